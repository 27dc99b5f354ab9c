/*
 * fuzz_api.c - libFuzzer target for the public API as a whole: a small
 * interpreter that decodes each input into a sequence of calls (put, get,
 * release, retain, create, seal, submit with ref arguments to earlier refs,
 * cancel, wait, actors: new, call, kill, lookup; cells: new, publish,
 * acquire; small arrays) against ONE engine kept for the whole process
 * (2 workers, 16 MiB store).
 *
 * The interpreter tracks what it holds: every object it has heard of, with
 * the counts it owns and what it knows of the contents and of the outcomes a
 * task or call may still have. It checks:
 *   - every return code is one the contract documents for that call in that
 *     situation, and every failure leaves a sentence;
 *   - a get of a put or of a sealed create returns the same bytes; a task or
 *     call result ends in one of the outcomes its function, its
 *     dependencies, cancels and kills allow, with the bytes it returned, and
 *     never changes its outcome afterwards;
 *   - wait's count and flags agree with what is certainly ready or not;
 *   - cells hand out the version last published, with its publish count;
 *   - hive_seal of a task's or call's result is HIVE_ESTATE; a cancel that
 *     succeeds ends the result in HIVE_ECANCELED, whether it found the task
 *     queued or running (whatever the task then returned);
 *   - a name is refused while a live actor has it, and free again once that
 *     actor is dead; lookup gives the actor created last with the name;
 *   - at the end of the input every unsealed object is sealed, every result
 *     waited for (a bounded wait: a hang aborts), every count released,
 *     every actor killed, and (every HIVE_FUZZ_CHECK_EVERY inputs) the store
 *     comes back empty: a dead actor gives back its state and its
 *     constructor's arguments, and actor handles are no store objects.
 *
 * A call given (directly or through tasks) the pending result of another
 * call of its own actor may wait for it inside the actor's turn, which then
 * never reaches that call: a user-level deadlock, as in Ray (README, "Known
 * open issues"). The interpreter marks such actors and kills them before
 * waiting for the results at the end; the kill must end the wait (HIVE_EDEAD).
 * An input that gives a constructor ref arguments always checks the store
 * at its end, so that a leak is blamed on the input that made it.
 */
#include "fuzz.h"

#include <limits.h>
#include <stdatomic.h>

#define STORE_BYTES      (16u << 20)
#define MAX_OBJS         64
#define MAX_ACTORS       8
#define MAX_OPS          96
#define MAX_ARGS         4
#define ACTOR_STATE      16           /* bytes; the store charges 64 */
#define END_WAIT_NS      (10ull * 1000000000ull)
#define BIG              (17u << 20)  /* one past the store's capacity */

#define OK_BIT           FZ_BIT(HIVE_OK)
#define FAIL_BITS        (~OK_BIT)

enum kind { K_BLOB, K_CREATED, K_TASK, K_CALL, K_ARRAY, K_CELL };

typedef struct obj {
    uint64_t       id;
    int            kind;
    int            count;            /* counts this interpreter owns */
    bool           sealed;           /* K_CREATED */
    unsigned char *bytes;            /* known contents (blob, created, result), or NULL */
    size_t         size;
    bool           known;            /* bytes/size are the contents */
    unsigned       allowed;          /* K_TASK/K_CALL: outcomes still possible (bits) */
    int            final;            /* 1 + outcome once a get saw it, else 0 */
    int            fn;               /* the task's function or the call's method */
    int            token;            /* a spinner's index into spin_state, else -1 */
    int            deps[MAX_ARGS + 1];  /* objects it was given by ref (indices) */
    int            ndeps;
    int            actor;            /* K_CALL: index into actors */
    bool           cancel_ok;        /* a cancel returned HIVE_OK */
    int            version;          /* K_CELL: obj index of the current version, -1 none */
    uint64_t       publishes;        /* K_CELL */
} obj_t;

typedef struct actor {
    uint64_t id;
    int      cls;                    /* 0 counter, 1 empty */
    unsigned max_restarts;
    unsigned restarts_asked;
    bool     killed;                 /* by us: certain */
    bool     may_die;                /* constructor may fail or restarts may run out */
    bool     self_wait;              /* a call may wait for a call of this actor: kill first */
    int      deps[MAX_ARGS];         /* the constructor's ref arguments (object indices) */
    int      ndeps;
} actor_t;

typedef struct interp {
    fz_t     f;
    size_t   start_used;             /* store bytes in use when the input began */
    size_t   alloc_bytes;            /* what this input may have asked of the store since */
    bool     pressure;               /* the store may be full: any allocation may fail */
    bool     check_store;            /* check the store at the end of this input */
    obj_t    objs[MAX_OBJS];
    int      nobjs;
    actor_t  actors[MAX_ACTORS];
    int      nactors;
} interp_t;

static hive_t *H;
static unsigned char *big_buf;       /* BIG bytes of pattern for puts */
static char names_taken[8];          /* actor names fz-0..fz-7 created so far */
static uint64_t name_ids[8];         /* the actor created last with each */
static int name_holder[8];           /* its index in this input's actors, -1: an earlier
                                        input's (killed at its end: dead) */

/* ------------------------------------------------------------ functions run by workers */

static void worker_check(hive_ctx_t *ctx)
{
    if (hive_engine(ctx) != H || hive_worker_index(ctx) >= hive_num_workers(H))
        fz_fail(__FILE__, __LINE__, "a task's context names another engine or worker");
    size_t n = hive_nargs(ctx), size;
    for (size_t i = 0; i < n; i++)
        if (hive_arg(ctx, i, &size) == NULL)
            fz_fail(__FILE__, __LINE__, "hive_arg(%zu) of %zu arguments is NULL", i, n);
    if (hive_arg(ctx, n, &size) != NULL)
        fz_fail(__FILE__, __LINE__, "hive_arg past the last argument is not NULL");
}

/* The first argument's bytes, or NULL/0. */
static const void *arg0(hive_ctx_t *ctx, size_t *size)
{
    *size = 0;
    return hive_nargs(ctx) ? hive_arg(ctx, 0, size) : NULL;
}

enum { F_ECHO, F_FAIL, F_SPIN, F_NESTED, F_ALLOC, NFN };

/* Returns its first argument; a second argument is returned first and
 * replaced (a second hive_return replaces the first). */
static int fn_echo(hive_ctx_t *ctx)
{
    worker_check(ctx);
    size_t n1 = 0;
    if (hive_nargs(ctx) >= 2) {
        const void *p1 = hive_arg(ctx, 1, &n1);
        if (hive_return(ctx, p1, n1) != HIVE_OK)
            return 1;
    }
    size_t n;
    const void *p = arg0(ctx, &n);
    return hive_return(ctx, p ? p : "", n) == HIVE_OK ? 0 : 1;
}

static int fn_fail(hive_ctx_t *ctx)
{
    worker_check(ctx);
    return 1;
}

/* Spinners carry a token as their last argument ("SP", index) and say
 * through spin_state[index] when they run: 1 running, 2 done. A cancel can
 * then wait for its spinner to be running. */
static _Atomic int spin_state[256];
static uint8_t spin_next;

static int spin_token(hive_ctx_t *ctx)
{
    size_t n = hive_nargs(ctx), size = 0;
    const unsigned char *p = n ? hive_arg(ctx, n - 1, &size) : NULL;
    return size == 8 && p[1] == 'S' && p[2] == 'P' ? p[3] : -1;
}

/* Spins up to 1 ms (less if its first argument's first byte says so) or
 * until cancelled; stopping early fails it. */
static int fn_spin(hive_ctx_t *ctx)
{
    worker_check(ctx);
    int token = spin_token(ctx);
    /* relaxed (here and at every use of spin_state): a hint that tells the
     * interpreter's cancel when to go; no data is published through it, and
     * a stale value only makes the cancel find the task queued instead */
    if (token >= 0)
        atomic_store_explicit(&spin_state[token], 1, memory_order_relaxed);
    size_t n;
    const unsigned char *p = arg0(ctx, &n);
    uint64_t ns = n ? (uint64_t)p[0] * 4000 : 1000000;
    uint64_t end = fz_now_ns() + ns;
    int rc = 0;
    while (fz_now_ns() < end)
        if (hive_cancelled(ctx)) {
            rc = 1;
            break;
        }
    if (token >= 0)
        atomic_store_explicit(&spin_state[token], 2, memory_order_relaxed);
    return rc;
}

/* Fork-join inside a task: a child echoes the first argument's bytes; the
 * parent waits for it (a nested wait) and returns them. */
static int fn_nested(hive_ctx_t *ctx)
{
    worker_check(ctx);
    size_t n;
    const void *p = arg0(ctx, &n);
    hive_arg_t a = HIVE_BYTES(p ? p : "", n);
    hive_ref_t child;
    if (hive_submit(hive_engine(ctx), fn_echo, &a, 1, NULL, &child) != HIVE_OK)
        return 1;
    const void *got;
    size_t size;
    int rc = hive_get(hive_engine(ctx), child, 5000000000, &got, &size);
    if (rc == HIVE_OK)
        rc = hive_return(ctx, got, size);
    hive_release(hive_engine(ctx), child);
    return rc == HIVE_OK ? 0 : 1;
}

/* hive_return_alloc of a fuzzed size (its first argument's first 8 bytes),
 * filled with a pattern; NULL (store full) fails the task. */
static int fn_alloc(hive_ctx_t *ctx)
{
    worker_check(ctx);
    size_t n;
    const void *p = arg0(ctx, &n);
    uint64_t size = 16;
    if (n >= 8)
        memcpy(&size, p, 8);
    unsigned char *dst = hive_return_alloc(ctx, (size_t)size);
    if (dst == NULL) {
        if (hive_last_error()[0] == '\0')
            fz_fail(__FILE__, __LINE__, "hive_return_alloc(%llu) gave NULL without a sentence",
                    (unsigned long long)size);
        return 1;
    }
    for (uint64_t i = 0; i < size; i++)
        dst[i] = (unsigned char)(i * 7);
    return 0;
}

static const hive_fn fns[NFN] = { fn_echo, fn_fail, fn_spin, fn_nested, fn_alloc };

/* ------------------------------------------------------------ the actor classes */

#define STATE_MAGIC 0x5eedf00dull

typedef struct counter {
    uint64_t magic;
    int64_t  sum;
} counter_t;

static int counter_init(void *self, hive_ctx_t *ctx)
{
    worker_check(ctx);
    counter_t *c = self;
    if (c->magic != 0 || c->sum != 0)
        fz_fail(__FILE__, __LINE__, "an actor's state is not zero-filled before init");
    size_t n;
    const unsigned char *p = arg0(ctx, &n);
    if (n > 0 && p[0] == 0xEE)
        return 1;                                   /* the constructor fails */
    c->magic = STATE_MAGIC;
    return 0;
}

static void counter_fini(void *self)
{
    counter_t *c = self;
    if (c->magic != STATE_MAGIC)
        fz_fail(__FILE__, __LINE__, "fini of an actor whose init did not succeed (magic %llx)",
                (unsigned long long)c->magic);
    c->magic = 0xdeadull;
}

static int counter_check(void *self, hive_ctx_t *ctx)
{
    worker_check(ctx);
    counter_t *c = self;
    if (c->magic != STATE_MAGIC)
        fz_fail(__FILE__, __LINE__, "a method ran on an actor that is not constructed (magic %llx)",
                (unsigned long long)c->magic);
    return 0;
}

enum { M_ADD, M_FAIL, M_RESTART, M_ECHO, M_SPIN, NMETHODS };

static int m_add(void *self, hive_ctx_t *ctx)
{
    counter_check(self, ctx);
    counter_t *c = self;
    size_t n;
    const void *p = arg0(ctx, &n);
    int64_t d = 1;
    if (n >= 8)
        memcpy(&d, p, 8);
    c->sum = (int64_t)((uint64_t)c->sum + (uint64_t)d);
    return hive_return(ctx, &c->sum, sizeof c->sum) == HIVE_OK ? 0 : 1;
}

static int m_fail(void *self, hive_ctx_t *ctx)
{
    counter_check(self, ctx);
    return 1;
}

static int m_restart(void *self, hive_ctx_t *ctx)
{
    counter_check(self, ctx);
    return HIVE_RESTART;
}

static int m_echo(void *self, hive_ctx_t *ctx)
{
    counter_check(self, ctx);
    return fn_echo(ctx);
}

static int m_spin(void *self, hive_ctx_t *ctx)
{
    counter_check(self, ctx);
    return fn_spin(ctx);
}

static int empty_echo(void *self, hive_ctx_t *ctx)
{
    (void)self;
    return fn_echo(ctx);
}

static const hive_method_t counter_methods[NMETHODS] = {
    { "add", m_add, HIVE_PRIO_NORMAL },       { "fail", m_fail, HIVE_PRIO_LOW },
    { "restart", m_restart, HIVE_PRIO_NORMAL }, { "echo", m_echo, HIVE_PRIO_HIGH },
    { "spin", m_spin, HIVE_PRIO_NORMAL },
};
static const hive_method_t empty_methods[1] = { { "echo", empty_echo, HIVE_PRIO_NORMAL } };
static const hive_actor_class_t classes[2] = {
    { .name = "counter", .size = sizeof(counter_t), .init = counter_init, .fini = counter_fini,
      .methods = counter_methods, .nmethods = NMETHODS },
    { .name = "empty", .methods = empty_methods, .nmethods = 1 },
};

/* ------------------------------------------------------------ setup */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fz_setup(*argc, *argv);
    H = fz_engine(2, STORE_BYTES);
    big_buf = malloc(BIG);
    FZ_CHECK(big_buf != NULL, "out of memory");
    for (size_t i = 0; i < BIG; i++)
        big_buf[i] = (unsigned char)(i * 131 + (i >> 9));
    return 0;
}

/* ------------------------------------------------------------ helpers */

static void actor_may_die(interp_t *in, int a);

/* Object i may now end in `bits` too; a failure reaches everything that
 * was given it by ref: tasks and calls (HIVE_ETASK) and constructors (the
 * actor may die). */
static void widen(interp_t *in, int i, unsigned bits)
{
    obj_t *o = &in->objs[i];
    if (o->cancel_ok)
        return;                          /* HIVE_ECANCELED for sure; its dependents know */
    unsigned added = bits & ~o->allowed;
    o->allowed |= bits;
    if (!(added & FAIL_BITS))
        return;
    for (int j = 0; j < in->nobjs; j++)
        for (int d = 0; d < in->objs[j].ndeps; d++)
            if (in->objs[j].deps[d] == i)
                widen(in, j, FZ_BIT(HIVE_ETASK));
    for (int a = 0; a < in->nactors; a++)
        for (int d = 0; d < in->actors[a].ndeps; d++)
            if (in->actors[a].deps[d] == i && !in->actors[a].may_die)
                actor_may_die(in, a);
}

/* Store pressure: once this input may have filled the store (or met it
 * full), results that allocate may fail, and do fail their task (ETASK). */
static void set_pressure(interp_t *in)
{
    if (in->pressure)
        return;
    in->pressure = true;
    for (int i = 0; i < in->nobjs; i++)
        if (in->objs[i].kind == K_TASK || in->objs[i].kind == K_CALL)
            widen(in, i, FZ_BIT(HIVE_ETASK));
}

static void note_alloc(interp_t *in, size_t bytes)
{
    in->alloc_bytes += bytes < STORE_BYTES ? bytes : STORE_BYTES;
    if (in->start_used + in->alloc_bytes > STORE_BYTES / 4)
        set_pressure(in);
}

static obj_t *new_obj(interp_t *in, uint64_t id, int kind)
{
    FZ_CHECK(in->nobjs < MAX_OBJS, "object table overflow");
    obj_t *o = &in->objs[in->nobjs++];
    memset(o, 0, sizeof *o);
    o->id = id;
    o->kind = kind;
    o->count = 1;
    o->version = -1;
    o->actor = -1;
    o->token = -1;
    return o;
}

/* An object this interpreter holds a count on, or NULL. */
static obj_t *pick_held(interp_t *in)
{
    if (in->nobjs == 0)
        return NULL;
    int start = fz_u8(&in->f) % in->nobjs;
    for (int i = 0; i < in->nobjs; i++) {
        obj_t *o = &in->objs[(start + i) % in->nobjs];
        if (o->count > 0)
            return o;
    }
    return NULL;
}

static int obj_index(const interp_t *in, const obj_t *o)
{
    return (int)(o - in->objs);
}

/* An id that never names an object: ids count up from 1 in blocks. */
static uint64_t fake_id(fz_t *f)
{
    return ((uint64_t)1 << 62) + fz_u16(f);
}

static size_t pick_size(fz_t *f)
{
    static const size_t edges[] = { 0, 1, 63, 64, 65, 4095, 4096, 4097, 65536, 1u << 20 };
    uint8_t sel = fz_u8(f);
    if (sel < 200)
        return sel % 100;
    if (sel < 240)
        return edges[sel % (sizeof edges / sizeof edges[0])];
    return sel & 1 ? BIG : STORE_BYTES;
}

static unsigned char *pattern_copy(const unsigned char *src, size_t n)
{
    unsigned char *p = malloc(n ? n : 1);
    FZ_CHECK(p != NULL, "out of memory");
    if (n)
        memcpy(p, src, n);
    return p;
}

static void set_known(obj_t *o, const void *bytes, size_t n)
{
    free(o->bytes);
    o->bytes = pattern_copy(bytes, n);
    o->size = n;
    o->known = true;
}

/* An unsealed create we are about to let go of is sealed first: nobody
 * else could seal it, and tasks waiting on it would wait forever. */
static void seal_created(obj_t *o)
{
    int rc = hive_seal(H, (hive_ref_t){ o->id });
    FZ_CHECK(rc == HIVE_OK, "hive_seal of an unsealed create failed: %d", rc);
    o->sealed = true;
}

/* Check one get's answer for o. */
static void check_get(obj_t *o, int rc, const void *data, size_t size, int64_t timeout)
{
    switch (o->kind) {
    case K_BLOB:
    case K_ARRAY:
        FZ_CHECK(rc == HIVE_OK, "hive_get of a sealed %s failed: %d",
                 o->kind == K_BLOB ? "blob" : "array", rc);
        break;
    case K_CREATED:
        if (!o->sealed) {
            FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ETIMEDOUT), "hive_get of an unsealed create");
            return;
        }
        FZ_CHECK(rc == HIVE_OK, "hive_get of a sealed create failed: %d", rc);
        break;
    case K_CELL:
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ESTATE), "hive_get of a cell");
        return;
    default:                                       /* K_TASK, K_CALL */
        if (rc == HIVE_ETIMEDOUT) {
            FZ_CHECK(hive_last_error()[0] != '\0', "a timed-out get left no sentence");
            FZ_CHECK(o->final == 0 && timeout >= 0, "a result that was final timed out");
            return;
        }
        FZ_CHECK(rc <= 0 && (o->allowed & FZ_BIT(rc)), "%s result %llu (%s %d) ended with %d (%s), "
                 "which its function, dependencies, cancels and kills do not allow (allowed mask %#x)",
                 o->kind == K_TASK ? "a task" : "a call", (unsigned long long)o->id,
                 o->kind == K_TASK ? "function" : "method", o->fn, rc, hive_strerror(rc), o->allowed);
        FZ_CHECK(o->final == 0 || o->final == 1 - rc, "a result changed its outcome from %d to %d",
                 1 - o->final, rc);
        o->final = 1 - rc;
        if (rc != HIVE_OK) {
            FZ_CHECK(hive_last_error()[0] != '\0', "a failed result left no sentence");
            return;
        }
        break;
    }
    if (o->known) {
        FZ_CHECK(size == o->size, "hive_get of object %llu gave %zu bytes, expected %zu",
                 (unsigned long long)o->id, size, o->size);
        FZ_CHECK(size == 0 || memcmp(data, o->bytes, size) == 0,
                 "hive_get of object %llu gave other bytes than were put/returned",
                 (unsigned long long)o->id);
    }
}

/* ------------------------------------------------------------ operations */

static void op_put(interp_t *in)
{
    fz_t *f = &in->f;
    size_t size = pick_size(f);
    size_t off = fz_u16(f) % 4096;
    if (size > BIG - off)
        off = 0;
    hive_ref_t r;
    int rc = hive_put(H, big_buf + off, size, &r);
    if (rc != HIVE_OK) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EFULL) | FZ_BIT(HIVE_ENOMEM), "hive_put");
        set_pressure(in);
        return;
    }
    note_alloc(in, size);
    if (in->nobjs == MAX_OBJS) {
        hive_release(H, r);
        return;
    }
    obj_t *o = new_obj(in, r.id, K_BLOB);
    o->sealed = true;
    set_known(o, big_buf + off, size);
}

static void op_create(interp_t *in)
{
    fz_t *f = &in->f;
    size_t size = pick_size(f);
    uint8_t seed = fz_u8(f);
    void *data = NULL;
    hive_ref_t r;
    int rc = hive_create(H, size, &data, &r);
    if (rc != HIVE_OK) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EFULL) | FZ_BIT(HIVE_ENOMEM), "hive_create");
        set_pressure(in);
        return;
    }
    note_alloc(in, size);
    FZ_CHECK(data != NULL && (uintptr_t)data % 64 == 0, "hive_create gave a payload that is not "
             "64-byte aligned");
    if (in->nobjs == MAX_OBJS) {
        seal_created(&(obj_t){ .id = r.id });
        hive_release(H, r);
        return;
    }
    obj_t *o = new_obj(in, r.id, K_CREATED);
    unsigned char *p = data;
    for (size_t i = 0; i < size; i++)
        p[i] = (unsigned char)(seed + i);
    set_known(o, data, size);
}

static void op_get(interp_t *in)
{
    obj_t *o = pick_held(in);
    if (o == NULL)
        return;
    static const int64_t timeouts[] = { 0, 1000, 100000, 2000000, HIVE_FOREVER };
    int64_t t = timeouts[fz_u8(&in->f) % 5];
    bool ready = o->kind == K_BLOB || o->kind == K_ARRAY || o->kind == K_CELL ||
                 (o->kind == K_CREATED && o->sealed) || o->final;
    if (t == HIVE_FOREVER && !ready)
        t = 0;                                     /* never wait forever on what may not end */
    const void *data = NULL;
    size_t size = 12345;
    bool with_size = fz_u8(&in->f) & 1;
    int rc = hive_get(H, (hive_ref_t){ o->id }, t, &data, with_size ? &size : NULL);
    if (!with_size && rc == HIVE_OK) {
        size = 0;
        if (o->known)
            size = o->size;                        /* only the bytes can be compared */
    }
    check_get(o, rc, data, size, t);
}

static void op_release(interp_t *in)
{
    obj_t *o = pick_held(in);
    if (o == NULL)
        return;
    if (o->kind == K_CREATED && !o->sealed && o->count == 1)
        seal_created(o);
    int rc = hive_release(H, (hive_ref_t){ o->id });
    FZ_CHECK(rc == HIVE_OK, "hive_release of a held object failed: %d", rc);
    o->count--;
}

static void op_retain(interp_t *in)
{
    obj_t *o = pick_held(in);
    if (o == NULL || o->count >= 8)
        return;
    int rc = hive_retain(H, (hive_ref_t){ o->id });
    FZ_CHECK(rc == HIVE_OK, "hive_retain of a held object failed: %d", rc);
    o->count++;
}

static void op_seal(interp_t *in)
{
    obj_t *o = pick_held(in);
    if (o == NULL)
        return;
    int rc = hive_seal(H, (hive_ref_t){ o->id });
    if (o->kind == K_CREATED && !o->sealed) {
        FZ_CHECK(rc == HIVE_OK, "hive_seal of an unsealed create failed: %d", rc);
        o->sealed = true;
        return;
    }
    FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ESTATE), o->kind == K_TASK || o->kind == K_CALL
                  ? "hive_seal of a task's or call's result" : "hive_seal of a sealed object");
}

/* Fill args from the input; *fake when one names no object. deps gets the
 * objects passed by ref. Inline bytes live in store[]. */
typedef struct argset {
    hive_arg_t    a[MAX_ARGS];
    size_t        n;
    bool          fake;
    bool          gone_maybe;             /* a handle of an actor that may be dead: gone from
                                             the table once its last turn ran (ENOENT) */
    obj_t        *ref[MAX_ARGS];          /* per argument: the object, or NULL (inline/actor/fake) */
    unsigned char store[MAX_ARGS + 1][40];
} argset_t;

/* Append a spinner's token argument; its index. */
static int add_spin_token(argset_t *as)
{
    int token = spin_next++;
    atomic_store_explicit(&spin_state[token], 0, memory_order_relaxed);   /* relaxed: see fn_spin */
    unsigned char *t = as->store[as->n];
    memcpy(t, (unsigned char[8]){ 0xFF, 'S', 'P', (unsigned char)token, 0, 0, 0, 0 }, 8);
    as->a[as->n] = HIVE_BYTES(t, 8);
    as->ref[as->n] = NULL;
    as->n++;
    return token;
}

static void decode_args(interp_t *in, argset_t *as, size_t max)
{
    fz_t *f = &in->f;
    memset(as, 0, sizeof *as);
    as->n = fz_u8(f) % (max + 1);
    for (size_t i = 0; i < as->n; i++) {
        uint8_t sel = fz_u8(f);
        obj_t *o;
        if (sel < 110) {                              /* inline bytes */
            size_t n = fz_u8(f) % 41;
            for (size_t j = 0; j < n; j++)
                as->store[i][j] = fz_u8(f);
            as->a[i] = HIVE_BYTES(as->store[i], n);
        } else if (sel < 240 && (o = pick_held(in)) != NULL) {
            as->a[i] = HIVE_REF(((hive_ref_t){ o->id }));
            as->ref[i] = o;
        } else if (sel < 250 && in->nactors > 0) {    /* an actor handle, by ref */
            const actor_t *ac = &in->actors[fz_u8(f) % in->nactors];
            as->a[i] = HIVE_REF(((hive_ref_t){ ac->id }));
            as->gone_maybe = as->gone_maybe || ac->killed || ac->may_die;
        } else {
            as->a[i] = HIVE_REF(((hive_ref_t){ fake_id(f) }));
            as->fake = true;
        }
    }
}

/* Outcomes of a function given its arguments: dependencies that may fail
 * add HIVE_ETASK; ones that must fail leave only it. Sets the expected
 * bytes of echo-like functions when the first argument's are known. */
static void expect_outcome(interp_t *in, obj_t *r, const argset_t *as, unsigned base, bool echoes)
{
    bool may_fail = false, must_fail = false;
    for (size_t i = 0; i < as->n; i++)
        if (as->ref[i] != NULL)
            r->deps[r->ndeps++] = obj_index(in, as->ref[i]);
    for (size_t i = 0; i < as->n; i++) {
        const obj_t *d = as->ref[i];
        if (d == NULL || (d->kind != K_TASK && d->kind != K_CALL))
            continue;
        may_fail = may_fail || (d->allowed & FAIL_BITS);
        must_fail = must_fail || !(d->allowed & OK_BIT);
    }
    r->allowed = must_fail ? FZ_BIT(HIVE_ETASK) : base | (may_fail ? FZ_BIT(HIVE_ETASK) : 0);
    /* what its results may ask of the store: the arguments it may return */
    size_t ask = 64;
    for (size_t i = 0; i < as->n && i < 2; i++)
        ask += as->ref[i] == NULL ? as->a[i].size : as->ref[i]->known ? as->ref[i]->size : (1u << 20);
    note_alloc(in, ask);
    if (in->pressure)
        r->allowed |= FZ_BIT(HIVE_ETASK);
    if (!echoes)
        return;
    if (as->n == 0) {
        set_known(r, "", 0);
    } else if (as->ref[0] == NULL && as->a[0].ref.id == 0) {
        set_known(r, as->a[0].data, as->a[0].size);
    } else if (as->ref[0] != NULL && as->ref[0]->known && as->ref[0]->kind != K_ARRAY) {
        set_known(r, as->ref[0]->bytes, as->ref[0]->size);
    } else if (as->ref[0] != NULL && as->ref[0]->kind == K_CELL) {
        set_known(r, "", 0);                       /* a cell has no payload */
    } else if (as->ref[0] == NULL && as->a[0].ref.id != 0 && !as->fake) {
        set_known(r, "", 0);                       /* an actor handle has none either */
    }
}

static int pick_priority(fz_t *f, const hive_opts_t **opts, hive_opts_t *buf)
{
    uint8_t sel = fz_u8(f);
    if (sel < 128) {
        *opts = NULL;
        return 0;
    }
    static const int prios[] = { -1, 0, 1, -2, 2, INT_MIN, INT_MAX };
    buf->priority = prios[sel % 7];
    *opts = buf;
    return buf->priority;
}

static void op_submit(interp_t *in)
{
    fz_t *f = &in->f;
    int fn = fz_u8(f) % NFN;
    argset_t as;
    decode_args(in, &as, MAX_ARGS);
    hive_opts_t ob = { 0 };          /* every field defined: pick_priority sets only priority */
    const hive_opts_t *opts;
    pick_priority(f, &opts, &ob);
    int token = fn == F_SPIN && as.n < MAX_ARGS ? add_spin_token(&as) : -1;
    if (fn == F_ALLOC && as.n > 0 && as.a[0].ref.id == 0 && as.a[0].size >= 8 && (fz_u8(f) & 1)) {
        uint64_t huge = (uint64_t)fz_i64(f);     /* sometimes a size the store cannot give */
        memcpy(as.store[0], &huge, 8);
    }
    hive_ref_t r;
    int rc = hive_submit(H, fns[fn], as.a, as.n, opts, &r);
    if (as.fake || (as.gone_maybe && rc != HIVE_OK)) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ENOENT), "hive_submit with a ref that names no object "
                      "(or a dead actor's handle)");
        return;
    }
    FZ_CHECK(rc == HIVE_OK, "hive_submit failed: %d", rc);
    if (in->nobjs == MAX_OBJS) {
        hive_release(H, r);
        return;
    }
    obj_t *o = new_obj(in, r.id, K_TASK);
    o->fn = fn;
    o->token = token;
    static const unsigned base[NFN] = {
        [F_ECHO] = OK_BIT, [F_FAIL] = FZ_BIT(HIVE_ETASK), [F_SPIN] = OK_BIT, [F_NESTED] = OK_BIT,
        [F_ALLOC] = OK_BIT | FZ_BIT(HIVE_ETASK),
    };
    if (fn == F_ALLOC) {
        uint64_t ask = 16;
        if (as.n > 0 && as.a[0].ref.id == 0 && as.a[0].size >= 8)
            memcpy(&ask, as.a[0].data, 8);
        note_alloc(in, ask > STORE_BYTES ? STORE_BYTES : (size_t)ask);
    }
    expect_outcome(in, o, &as, base[fn], fn == F_ECHO || fn == F_NESTED);
}

/* An actor may die now: everything it has queued may fail with EDEAD. */
static void actor_may_die(interp_t *in, int a)
{
    in->actors[a].may_die = true;
    for (int i = 0; i < in->nobjs; i++)
        if (in->objs[i].kind == K_CALL && in->objs[i].actor == a)
            widen(in, i, FZ_BIT(HIVE_EDEAD));
}

static void op_cancel(interp_t *in)
{
    obj_t *o = pick_held(in);
    if (o == NULL)
        return;
    if (o->token >= 0 && (fz_u8(&in->f) & 1)) {      /* cancel a spinner while it runs */
        uint64_t until = fz_now_ns() + 20000000;
        while (atomic_load_explicit(&spin_state[o->token], memory_order_relaxed) == 0 &&   /* see fn_spin */
               fz_now_ns() < until)
            fz_sleep_us(10);
    }
    int rc = hive_cancel(H, (hive_ref_t){ o->id });
    if (o->kind != K_TASK && o->kind != K_CALL) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ESTATE), "hive_cancel of an object that is not a result");
        return;
    }
    if (rc != HIVE_OK) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ESTATE), "hive_cancel of a result");
        return;
    }
    FZ_CHECK(o->final == 0, "hive_cancel succeeded on a result whose outcome was already seen");
    /* queued or waiting: it never runs; running: whatever it returns, the
     * result fails with HIVE_ECANCELED. Its dependents may fail. */
    widen(in, obj_index(in, o), FZ_BIT(HIVE_ECANCELED));
    o->allowed = FZ_BIT(HIVE_ECANCELED);
    o->cancel_ok = true;
}

static void op_wait(interp_t *in)
{
    fz_t *f = &in->f;
    hive_ref_t refs[8];
    obj_t *objs[8];
    size_t n = fz_u8(f) % 9, k = 0;
    for (size_t i = 0; i < n; i++) {
        obj_t *o = pick_held(in);
        if (o == NULL)
            break;
        objs[k] = o;
        refs[k++] = (hive_ref_t){ o->id };
    }
    size_t sure = 0, never = 0;           /* certainly ready / certainly not ready now */
    for (size_t i = 0; i < k; i++) {
        if (objs[i]->kind == K_CREATED && !objs[i]->sealed)
            never++;
        else if (objs[i]->kind != K_TASK && objs[i]->kind != K_CALL)
            sure++;
        else if (objs[i]->final)
            sure++;
    }
    size_t want = fz_u8(f) % (k + 2);                /* k + 1: more than there are */
    int64_t t = fz_u8(f) & 1 ? 100000 : 0;
    unsigned char ready[8];
    memset(ready, 0xcc, sizeof ready);
    int rc = hive_wait(H, refs, k, want, t, ready);
    if (want > k) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EINVAL), "hive_wait for more refs than given");
        return;
    }
    if (rc == HIVE_ETIMEDOUT) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ETIMEDOUT), "hive_wait");
        FZ_CHECK(sure < want, "hive_wait timed out with %zu of %zu wanted certainly ready", sure, want);
        return;
    }
    FZ_CHECK(rc >= 0 && (size_t)rc >= want && (size_t)rc <= k - never,
             "hive_wait returned %d for %zu refs (%zu wanted, %zu certainly ready, %zu never)", rc, k,
             want, sure, never);
    size_t flagged = 0;
    for (size_t i = 0; i < k; i++) {
        FZ_CHECK(ready[i] == 0 || ready[i] == 1, "hive_wait's ready[%zu] is %d", i, ready[i]);
        flagged += ready[i];
        bool is_sure = (objs[i]->kind != K_TASK && objs[i]->kind != K_CALL &&
                        !(objs[i]->kind == K_CREATED && !objs[i]->sealed)) || objs[i]->final;
        if (is_sure)
            FZ_CHECK(ready[i] == 1, "hive_wait flagged a sealed object not ready");
        if (objs[i]->kind == K_CREATED && !objs[i]->sealed)
            FZ_CHECK(ready[i] == 0, "hive_wait flagged an unsealed create ready");
    }
    FZ_CHECK(flagged >= (size_t)rc, "hive_wait returned %d but flagged %zu", rc, flagged);
}

static void op_actor_new(interp_t *in)
{
    fz_t *f = &in->f;
    uint8_t sel = fz_u8(f);
    if (in->nactors == MAX_ACTORS)
        return;
    int cls = sel & 1;
    hive_actor_class_t bad;
    const hive_actor_class_t *c = &classes[cls];
    bool invalid = false;
    if ((sel & 0x0e) == 0x0e) {                  /* a bad class */
        static const hive_method_t no_fn[1] = { { "none", NULL, 0 } };
        bad = classes[0];
        if (sel & 0x10) {
            bad.methods = NULL;
        } else {
            bad.methods = no_fn;
            bad.nmethods = 1;
        }
        c = &bad;
        invalid = true;
    }
    argset_t as;
    decode_args(in, &as, 2);
    for (size_t i = 0; i < as.n; i++) {
        if (as.a[i].ref.id != 0 && !as.fake)
            in->check_store = true;             /* the dead actor must give them back */
    }
    bool ctor_fails = cls == 0 && as.n > 0 && as.a[0].ref.id == 0 && as.a[0].size > 0 &&
                      ((const unsigned char *)as.a[0].data)[0] == 0xEE;
    if (cls == 0 && (fz_u8(f) & 3) == 0 && as.n > 0 && as.a[0].ref.id == 0 && as.a[0].size > 0) {
        as.store[0][0] = 0xEE;
        ctor_fails = true;
    }
    bool dep_may_fail = false;
    for (size_t i = 0; i < as.n; i++)
        if (as.ref[i] && (as.ref[i]->kind == K_TASK || as.ref[i]->kind == K_CALL) &&
            (as.ref[i]->allowed & FAIL_BITS))
            dep_may_fail = true;
    hive_actor_opts_t opts = { .max_restarts = fz_u8(f) % 4 };
    char name[8];
    int name_i = -1;
    uint8_t nsel = fz_u8(f);
    if (nsel >= 200) {
        name_i = nsel % 8;
        snprintf(name, sizeof name, "fz-%d", name_i);
        opts.name = name;
    }
    hive_actor_t a;
    bool with_opts = (nsel & 1) || name_i >= 0;
    int rc = hive_actor_new(H, c, as.a, as.n, with_opts ? &opts : NULL, &a);
    /* a name is taken while its actor lives: certainly if we have not
     * killed it and it cannot have died, maybe if it may have died */
    const actor_t *holder = name_i >= 0 && name_holder[name_i] >= 0
                                ? &in->actors[name_holder[name_i]] : NULL;
    bool taken = holder != NULL && !holder->killed && !holder->may_die;
    bool maybe_taken = holder != NULL && !holder->killed && holder->may_die;
    /* the order of the checks is not documented: any that applies may come first */
    bool refused = invalid || taken || as.fake;
    unsigned may = (invalid || taken || maybe_taken ? FZ_BIT(HIVE_EINVAL) : 0) |
                   (as.fake || as.gone_maybe ? FZ_BIT(HIVE_ENOENT) : 0) |
                   (in->pressure ? FZ_BIT(HIVE_EFULL) : 0);
    if (refused || rc != HIVE_OK) {
        FZ_CHECK_FAIL(rc, may, refused ? "hive_actor_new with a bad class, a name a live actor has "
                      "or a fake ref" : "hive_actor_new (valid but for a name a dying actor may "
                      "still have, a dead actor's handle, or a full store)");
        if (rc == HIVE_EFULL)
            set_pressure(in);
        return;
    }
    if (name_i >= 0) {
        names_taken[name_i] = 1;
        name_ids[name_i] = a.id;
        name_holder[name_i] = in->nactors;
    }
    actor_t *ac = &in->actors[in->nactors++];
    memset(ac, 0, sizeof *ac);
    for (size_t i = 0; i < as.n; i++)
        if (as.ref[i] != NULL)
            ac->deps[ac->ndeps++] = obj_index(in, as.ref[i]);
    ac->id = a.id;
    ac->cls = cls;
    ac->max_restarts = with_opts ? opts.max_restarts : 0;
    note_alloc(in, ACTOR_STATE);
    ac->may_die = ctor_fails || dep_may_fail;
}

/* Does object i wait, directly or through its dependencies, for a call of
 * actor a that has not been seen to end? */
static bool waits_for_actor(const interp_t *in, int i, int a, int depth)
{
    const obj_t *o = &in->objs[i];
    if (o->kind == K_CALL && o->actor == a && o->final == 0)
        return true;
    for (int d = 0; d < o->ndeps && depth < 8; d++)
        if (waits_for_actor(in, o->deps[d], a, depth + 1))
            return true;
    return false;
}

static void op_call(interp_t *in)
{
    fz_t *f = &in->f;
    uint8_t sel = fz_u8(f);
    int ai = in->nactors ? sel % in->nactors : -1;
    bool fake = ai < 0 || sel >= 250;
    uint64_t id = fake ? fake_id(f) : in->actors[ai].id;
    uint8_t msel = fz_u8(f);
    unsigned nm = fake ? NMETHODS : (unsigned)classes[in->actors[ai].cls].nmethods;
    unsigned method = msel < 240 ? msel % nm : (msel & 1 ? nm : UINT_MAX - (msel & 3));
    argset_t as;
    decode_args(in, &as, 2);
    if (!fake)                                     /* a possible self-wait: see the top */
        for (size_t i = 0; i < as.n; i++)
            if (as.ref[i] != NULL && waits_for_actor(in, obj_index(in, as.ref[i]), ai, 0))
                in->actors[ai].self_wait = true;
    hive_opts_t ob = { 0 };          /* every field defined: pick_priority sets only priority */
    const hive_opts_t *opts;
    pick_priority(f, &opts, &ob);
    bool spins = !fake && in->actors[ai].cls == 0 && method == M_SPIN;
    int token = spins && as.n < MAX_ARGS ? add_spin_token(&as) : -1;
    hive_ref_t r;
    int rc = hive_call(H, (hive_actor_t){ id }, method, as.a, as.n, opts, &r);
    if (fake) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ENOENT), "hive_call of an actor that does not exist");
        return;
    }
    actor_t *ac = &in->actors[ai];
    /* the order of the checks is not documented: any that applies may come first */
    unsigned dead = ac->killed || ac->may_die ? FZ_BIT(HIVE_EDEAD) : 0;
    if (method >= nm) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EINVAL) | dead, "hive_call of a method out of range");
        return;
    }
    if (ac->killed) {
        FZ_CHECK_FAIL(rc, dead | (as.fake || as.gone_maybe ? FZ_BIT(HIVE_ENOENT) : 0),
                      "hive_call of a killed actor");
        return;
    }
    if (as.fake || (as.gone_maybe && rc == HIVE_ENOENT)) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ENOENT) | (ac->may_die ? FZ_BIT(HIVE_EDEAD) : 0),
                      "hive_call with a ref that names no object (or a dead actor's handle)");
        return;
    }
    if (rc != HIVE_OK) {
        FZ_CHECK(ac->may_die, "hive_call of a live actor failed: %d", rc);
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EDEAD), "hive_call of an actor that may have died");
        return;
    }
    if (in->nobjs == MAX_OBJS) {
        hive_release(H, r);
        return;
    }
    obj_t *o = new_obj(in, r.id, K_CALL);
    o->fn = ac->cls == 0 ? (int)method : M_ECHO;
    o->actor = ai;
    o->token = token;
    static const unsigned base[NMETHODS] = {
        [M_ADD] = OK_BIT, [M_FAIL] = FZ_BIT(HIVE_ETASK), [M_RESTART] = FZ_BIT(HIVE_ETASK),
        [M_ECHO] = OK_BIT, [M_SPIN] = OK_BIT,
    };
    expect_outcome(in, o, &as, base[o->fn], o->fn == M_ECHO);
    if (o->fn == M_ADD && (o->allowed & OK_BIT))
        o->known = false;                          /* the sum depends on the order of calls */
    if (ac->may_die)
        widen(in, obj_index(in, o), FZ_BIT(HIVE_EDEAD));
    if (o->fn == M_RESTART && ++ac->restarts_asked > ac->max_restarts)
        actor_may_die(in, ai);                     /* calls queued before it may run after it */
}

static void op_kill(interp_t *in)
{
    fz_t *f = &in->f;
    uint8_t sel = fz_u8(f);
    if (in->nactors == 0 || sel >= 250) {
        FZ_CHECK_FAIL(hive_actor_kill(H, (hive_actor_t){ fake_id(f) }), FZ_BIT(HIVE_ENOENT),
                      "hive_actor_kill of an actor that does not exist");
        return;
    }
    int ai = sel % in->nactors;
    actor_t *ac = &in->actors[ai];
    int rc = hive_actor_kill(H, (hive_actor_t){ ac->id });
    if (ac->killed)
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EDEAD), "hive_actor_kill of a killed actor");
    else if (rc != HIVE_OK)
        FZ_CHECK(ac->may_die && rc == HIVE_EDEAD && hive_last_error()[0],
                 "hive_actor_kill of a live actor failed: %d", rc);
    ac->killed = true;
    actor_may_die(in, ai);
}

static void op_lookup(interp_t *in)
{
    int i = fz_u8(&in->f) % 9;
    char name[8];
    snprintf(name, sizeof name, "fz-%d", i);
    hive_actor_t a = { 0 };
    int rc = hive_actor_lookup(H, i == 8 ? NULL : name, &a);
    if (i == 8)
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EINVAL), "hive_actor_lookup of NULL");
    else if (!names_taken[i])
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ENOENT), "hive_actor_lookup of a name never given");
    else
        FZ_CHECK(rc == HIVE_OK && a.id == name_ids[i], "hive_actor_lookup(%s) gave %d, id %llu, not "
                 "%llu", name, rc, (unsigned long long)a.id, (unsigned long long)name_ids[i]);
}

/* Which failure take_version gives for o as a cell's version, or OK. */
static int version_verdict(const obj_t *o)
{
    return o->kind == K_CELL ? HIVE_ESTATE : HIVE_OK;
}

static void op_cell_new(interp_t *in)
{
    fz_t *f = &in->f;
    uint8_t sel = fz_u8(f);
    obj_t *v = sel < 180 ? pick_held(in) : NULL;
    hive_ref_t init = { 0 };
    bool fake = false;
    if (v != NULL)
        init.id = v->id;
    else if (sel >= 240)
        init.id = fake_id(f), fake = true;
    hive_ref_t c;
    int rc = hive_cell_new(H, init, &c);
    if (fake) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ENOENT), "hive_cell_new with an initial that names no object");
        return;
    }
    if (v != NULL && version_verdict(v) != HIVE_OK) {
        FZ_CHECK_FAIL(rc, FZ_BIT(version_verdict(v)), "hive_cell_new with a cell as initial");
        return;
    }
    FZ_CHECK(rc == HIVE_OK, "hive_cell_new failed: %d", rc);
    if (in->nobjs == MAX_OBJS) {
        hive_release(H, c);
        return;
    }
    obj_t *o = new_obj(in, c.id, K_CELL);
    o->version = v ? obj_index(in, v) : -1;
    o->known = true;                               /* a cell has no payload */
}

static void op_publish(interp_t *in)
{
    fz_t *f = &in->f;
    obj_t *c = pick_held(in);
    obj_t *v = pick_held(in);
    if (c == NULL || v == NULL)
        return;
    bool fake = fz_u8(f) >= 240;
    hive_ref_t vr = { fake ? fake_id(f) : v->id };
    int rc = hive_cell_publish(H, (hive_ref_t){ c->id }, vr);
    if (c->kind != K_CELL) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ESTATE), "hive_cell_publish into an object that is not a cell");
        return;
    }
    if (fake) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ENOENT), "hive_cell_publish of a version that names no object");
        return;
    }
    if (version_verdict(v) != HIVE_OK) {
        FZ_CHECK_FAIL(rc, FZ_BIT(version_verdict(v)), "hive_cell_publish of a cell as version");
        return;
    }
    FZ_CHECK(rc == HIVE_OK, "hive_cell_publish failed: %d", rc);
    c->version = obj_index(in, v);
    c->publishes++;
}

static void op_acquire(interp_t *in)
{
    obj_t *c = pick_held(in);
    if (c == NULL)
        return;
    hive_ref_t v = { 0 };
    uint64_t seq = 777;
    bool with_seq = fz_u8(&in->f) & 1;
    int rc = hive_cell_acquire(H, (hive_ref_t){ c->id }, &v, with_seq ? &seq : NULL);
    if (c->kind != K_CELL) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ESTATE), "hive_cell_acquire of an object that is not a cell");
        return;
    }
    if (c->version < 0) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_ENOENT), "hive_cell_acquire of an empty cell");
        return;
    }
    obj_t *want = &in->objs[c->version];
    FZ_CHECK(rc == HIVE_OK && v.id == want->id, "hive_cell_acquire gave %d, version %llu, not %llu",
             rc, (unsigned long long)v.id, (unsigned long long)want->id);
    FZ_CHECK(!with_seq || seq == c->publishes, "hive_cell_acquire gave seq %llu after %llu publishes",
             (unsigned long long)seq, (unsigned long long)c->publishes);
    want->count++;
}

static void op_array(interp_t *in)
{
    fz_t *f = &in->f;
    int ndim = fz_u8(f) % 4;
    int64_t shape[3];
    for (int d = 0; d < ndim; d++)
        shape[d] = fz_u8(f) % 5;
    hive_dtype_t dt = (hive_dtype_t)(HIVE_BOOL + fz_u8(f) % 11);
    hive_ref_t r;
    int rc = hive_array_new(H, dt, ndim, shape, &r);
    if (rc != HIVE_OK) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EFULL) | FZ_BIT(HIVE_ENOMEM), "hive_array_new");
        set_pressure(in);
        return;
    }
    note_alloc(in, 4 * 4 * 4 * 8);
    if (in->nobjs == MAX_OBJS) {
        hive_release(H, r);
        return;
    }
    obj_t *o = new_obj(in, r.id, K_ARRAY);
    hive_array_t v;
    FZ_CHECK(hive_array_view(H, r, &v) == HIVE_OK, "hive_array_view of a new array failed");
    if (hive_array_numel(&v) > 0 && dt != HIVE_BOOL && dt < HIVE_F32)
        hive_array_add_i64(&v, 0, 1);
    o->known = false;
}

/* Calls on ids that name nothing, and NULL arguments. */
static void op_bad(interp_t *in)
{
    fz_t *f = &in->f;
    hive_ref_t fake = { fake_id(f) };
    const void *data;
    hive_ref_t out;
    unsigned which = fz_u8(f) % 12;
    switch (which) {
    case 0: FZ_CHECK_FAIL(hive_get(H, fake, 0, &data, NULL), FZ_BIT(HIVE_ENOENT), "get of a fake id"); break;
    case 1: FZ_CHECK_FAIL(hive_release(H, fake), FZ_BIT(HIVE_ENOENT), "release of a fake id"); break;
    case 2: FZ_CHECK_FAIL(hive_retain(H, fake), FZ_BIT(HIVE_ENOENT), "retain of a fake id"); break;
    case 3: FZ_CHECK_FAIL(hive_cancel(H, fake), FZ_BIT(HIVE_ENOENT), "cancel of a fake id"); break;
    case 4: FZ_CHECK_FAIL(hive_seal(H, fake), FZ_BIT(HIVE_ENOENT), "seal of a fake id"); break;
    case 5: FZ_CHECK_FAIL(hive_get(H, (hive_ref_t){ 0 }, 0, &data, NULL), FZ_BIT(HIVE_ENOENT),
                          "get of {0}"); break;
    case 6: FZ_CHECK_FAIL(hive_submit(H, NULL, NULL, 0, NULL, &out), FZ_BIT(HIVE_EINVAL),
                          "submit of NULL fn"); break;
    case 7: FZ_CHECK_FAIL(hive_submit(H, fn_echo, NULL, 2, NULL, &out), FZ_BIT(HIVE_EINVAL),
                          "submit of NULL args"); break;
    case 8: FZ_CHECK_FAIL(hive_wait(H, NULL, 3, 1, 0, NULL), FZ_BIT(HIVE_EINVAL), "wait on NULL refs");
            break;
    case 9: FZ_CHECK(hive_wait(H, NULL, 0, 0, 0, NULL) == 0, "wait on no refs did not return 0"); break;
    case 10:
        if (in->nactors > 0) {
            const actor_t *ac = &in->actors[fz_u8(f) % in->nactors];
            hive_ref_t ar = { ac->id };
            /* a dead actor's handle leaves the table once its last turn ran */
            unsigned ok = FZ_BIT(HIVE_ESTATE) | (ac->killed || ac->may_die ? FZ_BIT(HIVE_ENOENT) : 0);
            FZ_CHECK_FAIL(hive_retain(H, ar), ok, "retain of an actor handle");
            FZ_CHECK_FAIL(hive_release(H, ar), ok, "release of an actor handle");
            FZ_CHECK_FAIL(hive_get(H, ar, 0, &data, NULL), ok, "get of an actor handle");
        }
        break;
    default: {
        hive_store_stats_t st;
        FZ_CHECK(hive_store_stats(H, &st) == HIVE_OK && st.used <= st.capacity &&
                 st.capacity == STORE_BYTES, "store stats: %zu used of %zu", st.used, st.capacity);
        FZ_CHECK_FAIL(hive_store_stats(H, NULL), FZ_BIT(HIVE_EINVAL), "stats into NULL");
        break;
    }
    }
}

/* Wait for one result with a longer timeout (lets work finish mid-input). */
static void op_settle(interp_t *in)
{
    obj_t *o = pick_held(in);
    if (o == NULL || (o->kind != K_TASK && o->kind != K_CALL))
        return;
    const void *data = NULL;
    size_t size = 0;
    int rc = hive_get(H, (hive_ref_t){ o->id }, 50000000, &data, &size);
    check_get(o, rc, data, size, 50000000);
}

/* ------------------------------------------------------------ one input */

static void kill_actor(interp_t *in, int i)
{
    int rc = hive_actor_kill(H, (hive_actor_t){ in->actors[i].id });
    if (rc != HIVE_OK)
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EDEAD), "final hive_actor_kill");
    in->actors[i].killed = true;
    actor_may_die(in, i);
}

static void finish(interp_t *in)
{
    /* 1. seal what only we could seal; end the self-waits (see the top) */
    for (int i = 0; i < in->nobjs; i++)
        if (in->objs[i].kind == K_CREATED && !in->objs[i].sealed && in->objs[i].count > 0)
            seal_created(&in->objs[i]);
    for (int i = 0; i < in->nactors; i++)
        if (in->actors[i].self_wait)
            kill_actor(in, i);
    /* 2. every result we hold must end, in one of its outcomes */
    uint64_t deadline = fz_now_ns() + END_WAIT_NS;
    for (int i = 0; i < in->nobjs; i++) {
        obj_t *o = &in->objs[i];
        if ((o->kind != K_TASK && o->kind != K_CALL) || o->count == 0)
            continue;
        uint64_t now = fz_now_ns();
        int64_t left = now < deadline ? (int64_t)(deadline - now) : 0;
        const void *data = NULL;
        size_t size = 0;
        int rc = hive_get(H, (hive_ref_t){ o->id }, left, &data, &size);
        FZ_CHECK(rc != HIVE_ETIMEDOUT, "%s result %llu (function %d) did not end within %llu s "
                 "after the input sealed everything", o->kind == K_TASK ? "a task's" : "a call's",
                 (unsigned long long)o->id, o->fn, END_WAIT_NS / 1000000000ull);
        check_get(o, rc, data, size, left);
    }
    /* 3. give back every count */
    for (int i = 0; i < in->nobjs; i++) {
        obj_t *o = &in->objs[i];
        for (; o->count > 0; o->count--)
            FZ_CHECK(hive_release(H, (hive_ref_t){ o->id }) == HIVE_OK, "final hive_release failed");
        free(o->bytes);
    }
    /* 4. actors die: their last turns give their state and arguments back */
    for (int i = 0; i < in->nactors; i++)
        kill_actor(in, i);
    if (fz_check_due() || in->check_store)
        fz_expect_store_at_most(H, 0, 0, 10000);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static interp_t in;
    memset(&in, 0, sizeof in);
    in.f = (fz_t){ data, size };
    for (int i = 0; i < 8; i++)
        name_holder[i] = -1;                      /* earlier inputs killed their actors */
    hive_store_stats_t st;
    FZ_CHECK(hive_store_stats(H, &st) == HIVE_OK, "hive_store_stats failed");
    if (st.used > STORE_BYTES / 8) {              /* mostly frees still queued: run them */
        hive__store_drain(H);
        FZ_CHECK(hive_store_stats(H, &st) == HIVE_OK, "hive_store_stats failed");
    }
    in.start_used = st.used;
    for (int n = 0; n < MAX_OPS && fz_more(&in.f); n++) {
        switch (fz_u8(&in.f) % 19) {
        case 0:  op_put(&in); break;
        case 1:  op_get(&in); break;
        case 2:  op_release(&in); break;
        case 3:  op_retain(&in); break;
        case 4:  op_create(&in); break;
        case 5:  op_seal(&in); break;
        case 6:  op_submit(&in); break;
        case 7:  op_cancel(&in); break;
        case 8:  op_wait(&in); break;
        case 9:  op_actor_new(&in); break;
        case 10: op_call(&in); break;
        case 11: op_kill(&in); break;
        case 12: op_cell_new(&in); break;
        case 13: op_publish(&in); break;
        case 14: op_acquire(&in); break;
        case 15: op_array(&in); break;
        case 16: op_bad(&in); break;
        case 17: op_lookup(&in); break;
        default: op_settle(&in); break;
        }
    }
    finish(&in);
    return 0;
}
