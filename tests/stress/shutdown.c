/*
 * stress/shutdown.c - hive_shutdown at a random moment of a mixed load,
 * hundreds of times: every call returns, with a documented code.
 *
 * The contract held here (include/hive.h, hive_shutdown and hive_get):
 *  1. hive_shutdown returns within a bound whatever is in flight: queued
 *     and running tasks, tasks waiting for ref arguments that will never be
 *     sealed, tasks blocked in a nested hive_get / hive_wait FOREVER (on a
 *     child, or on an object nobody will ever seal), actor calls queued or
 *     waiting for a ref argument never sealed, objects created and never
 *     sealed. A watchdog thread aborts the run with a message if it does not
 *     return within WATCHDOG_S: a hang fails loudly instead of wedging CI.
 *  2. It first fails every pending object with HIVE_ESHUTDOWN, so every
 *     waiter returns, inside the engine (a task, a method, a constructor) or
 *     outside it (a user thread), and only then joins the workers.
 *     A waiter sees HIVE_ESHUTDOWN or its result: the value, or the result's
 *     own failure (HIVE_ETASK for a task whose dependency failed - by
 *     shutdown, too - HIVE_ECANCELED, HIVE_EDEAD); hive_wait counts a failed
 *     object as ready, so it may also return its count.
 *  3. A user thread may be inside the engine while hive_shutdown runs only
 *     if it was blocked in hive_get / hive_wait when shutdown started: @h is
 *     invalid once hive_shutdown returns, and a call that starts after
 *     shutdown started cannot be told from one that starts after it ended.
 *     So the load threads here stop (a flag, then join) before shutdown, and
 *     the waiter threads are checked to be asleep inside their call (in a
 *     futex, by /proc/self/task/TID/syscall) before it starts.
 *  4. Those waiters have returned, or return at once, when hive_shutdown
 *     returns, without touching freed memory (ASan checks that): they are
 *     joined under the watchdog. Every task that entered its FOREVER wait
 *     left it, and every actor that was built was finalised exactly once.
 *
 * The scenarios run the hazards one by one (so that a failure names its
 * cause) and then all of them at once, each with random workers (1..3) on a
 * synthetic machine of one or two NUMA nodes, random load mixes and a random
 * delay of 0..MAX_DELAY_MS before shutdown.
 * SHUTDOWN_SEED=n replays a run (the seed is printed); SHUTDOWN_ONLY=glob
 * runs the matching scenarios only (e.g. SHUTDOWN_ONLY='*anywhere').
 */
#include "testutil.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WATCHDOG_S   30
#define MAX_DELAY_MS 20
#define NEVER        8                   /* objects created and never sealed */
#define LATE         4                   /* objects created, sealed by a driver at some point (or not) */
#define NACTORS      4
#define DRIVERS      2
#define HELD         64                  /* refs a driver holds at once */
#define MAX_BLOCKERS 3                   /* FOREVER-blocked tasks per driver and iteration */
#define LATE_VALUE   1000

enum {
    F_TASKS        = 1 << 0,             /* chains and fan-in with deps, cancels */
    F_NESTED       = 1 << 1,             /* fork-join: nested hive_get FOREVER on children */
    F_ACTORS       = 1 << 2,             /* calls, restarts, kills */
    F_DEPS_PENDING = 1 << 3,             /* tasks with ref args never (or late) sealed */
    F_CREATES      = 1 << 4,             /* creates never sealed; puts */
    F_WAITERS      = 1 << 5,             /* user threads in hive_get / hive_wait FOREVER */
    F_TASK_BLOCKED = 1 << 6,             /* tasks in hive_get / hive_wait FOREVER on never-sealed */
    F_CALL_PENDING = 1 << 7,             /* calls and constructors with never-sealed ref args */
    F_ALL          = (1 << 8) - 1,
};

/* Allowed codes as a bit set: bit -code (HIVE_OK is bit 0). */
#define C(code) (1u << -(code))

/* ------------------------------------------------------------ watchdog */

static _Atomic uint64_t wd_deadline;     /* 0: disarmed */
static const char *_Atomic wd_what;
static _Atomic int wd_iteration;
static _Atomic unsigned wd_features;
static _Atomic int wd_quit;
static pthread_t wd_thread;

static void *watchdog(void *arg)
{
    (void)arg;
    while (!atomic_load(&wd_quit)) {
        uint64_t d = atomic_load(&wd_deadline);
        if (d != 0 && test_now_ns() > d) {
            fprintf(stderr, "watchdog: %s did not return within %d s (iteration %d, features 0x%x); "
                    "aborting\n", atomic_load(&wd_what), WATCHDOG_S, atomic_load(&wd_iteration),
                    atomic_load(&wd_features));
            abort();
        }
        test_sleep_ms(50);
    }
    return NULL;
}

static void arm(const char *what)
{
    atomic_store(&wd_what, what);
    atomic_store(&wd_deadline, test_now_ns() + (uint64_t)WATCHDOG_S * 1000000000u);
}

static void disarm(void)
{
    atomic_store(&wd_deadline, 0);
}

static int group_setup(void **state)
{
    (void)state;
    return pthread_create(&wd_thread, NULL, watchdog, NULL);
}

static int group_teardown(void **state)
{
    (void)state;
    atomic_store(&wd_quit, 1);
    return pthread_join(wd_thread, NULL);
}

/* ------------------------------------------------------------ bad codes */

static _Atomic long bad_count;
static pthread_mutex_t bad_lock = PTHREAD_MUTEX_INITIALIZER;
static char bad_first[512];

/* Record a code outside the allowed set (any thread; the test fails later). */
static void expect_code(const char *where, int rc, unsigned allowed)
{
    if (rc <= 0 && rc > -32 && (allowed & C(rc)))
        return;
    if (atomic_fetch_add(&bad_count, 1) == 0) {
        pthread_mutex_lock(&bad_lock);
        snprintf(bad_first, sizeof bad_first, "%s returned %d (%s): %s", where, rc,
                 hive_strerror(rc), hive_last_error());
        pthread_mutex_unlock(&bad_lock);
    }
}

static void expect_true(const char *what, bool ok)
{
    if (!ok && atomic_fetch_add(&bad_count, 1) == 0) {
        pthread_mutex_lock(&bad_lock);
        snprintf(bad_first, sizeof bad_first, "%s", what);
        pthread_mutex_unlock(&bad_lock);
    }
}

/* hive_wait FOREVER on n refs: a count >= want, or HIVE_ESHUTDOWN */
static void expect_wait(const char *where, int rc, int want)
{
    if (rc < want)
        expect_code(where, rc, C(HIVE_ESHUTDOWN));
}

static inline uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* ------------------------------------------------------------ one iteration's world */

typedef struct world {
    hive_t          *h;
    unsigned         features;
    hive_ref_t       never[NEVER];
    hive_ref_t       late[LATE];
    _Atomic int      late_sealed;        /* late[0 .. late_sealed) are sealed */
    _Atomic uint64_t actors[NACTORS];
    _Atomic int      stop;
    uint64_t         seed;
} world_t;

static world_t W;

/* totals over a scenario, for the closing line */
static _Atomic long n_tasks, n_calls, n_blocked_started, n_blocked_returned, n_waiter_shutdown,
    n_inits, n_finis, n_kills;

/* ------------------------------------------------------------ tasks */

static int64_t sum_args(hive_ctx_t *ctx)
{
    int64_t sum = 0;
    for (size_t i = 0; i < hive_nargs(ctx); i++) {
        size_t n = 0;
        const void *p = hive_arg(ctx, i, &n);
        if (p != NULL && n == sizeof(int64_t))
            sum += *(const int64_t *)p;
    }
    return sum;
}

/* The sum of its arguments: inline int64s and the payloads of its refs. */
static int t_add(hive_ctx_t *ctx)
{
    int64_t sum = sum_args(ctx);
    return hive_return(ctx, &sum, sizeof sum) == HIVE_OK ? 0 : 1;
}

static int64_t fork_value(int depth)
{
    return ((int64_t)1 << (depth + 1)) - 1;
}

/* Fork-join: two children of depth - 1, waited for FOREVER inside the
 * engine; 2^(depth+1) - 1 when every one ran. At shutdown a child may be
 * dropped (HIVE_ESHUTDOWN), and its parent then fails (HIVE_ETASK). */
static int t_fork(hive_ctx_t *ctx)
{
    int depth = *(const int *)hive_arg(ctx, 0, NULL);
    hive_t *h = hive_engine(ctx);
    int64_t sum = 1;
    bool failed = false;
    if (depth > 0) {
        int d = depth - 1;
        hive_arg_t a = HIVE_VAL(d);
        hive_ref_t kid[2];
        int nk = 0;
        for (int k = 0; k < 2; k++) {
            int rc = hive_submit(h, t_fork, &a, 1, NULL, &kid[nk]);
            if (rc == HIVE_OK)
                nk++;
            else {
                expect_code("hive_submit in a task", rc, C(HIVE_ESHUTDOWN));
                failed = true;
            }
        }
        for (int k = 0; k < nk; k++) {
            const int64_t *p;
            size_t n;
            int rc = hive_get(h, kid[k], HIVE_FOREVER, (const void **)&p, &n);
            expect_code("hive_get FOREVER of a child", rc, C(HIVE_OK) | C(HIVE_ETASK) | C(HIVE_ESHUTDOWN));
            if (rc == HIVE_OK) {
                expect_true("a child's value is 2^(depth+1)-1", n == sizeof *p && *p == fork_value(d));
                sum += *p;
            } else {
                failed = true;
            }
            expect_code("hive_release of a child", hive_release(h, kid[k]), C(HIVE_OK));
        }
    }
    if (failed)
        return 1;
    return hive_return(ctx, &sum, sizeof sum) == HIVE_OK ? 0 : 1;
}

typedef struct block_arg {
    uint64_t id;
    int      mode;                       /* 0: hive_get, 1: hive_wait */
    int      late;                       /* the object may be sealed */
} block_arg_t;

/* Blocks FOREVER on an object nobody may ever seal (the caller keeps its
 * count until shutdown); only shutdown can end the wait. */
static int t_block(hive_ctx_t *ctx)
{
    const block_arg_t *a = hive_arg(ctx, 0, NULL);
    hive_t *h = hive_engine(ctx);
    hive_ref_t r = { a->id };
    atomic_fetch_add(&n_blocked_started, 1);
    if (a->mode == 0) {
        const void *p;
        int rc = hive_get(h, r, HIVE_FOREVER, &p, NULL);
        expect_code("hive_get FOREVER on a never-sealed object, in a task", rc,
                    C(HIVE_ESHUTDOWN) | (a->late ? C(HIVE_OK) : 0));
    } else {
        int rc = hive_wait(h, &r, 1, 1, HIVE_FOREVER, NULL);
        expect_wait("hive_wait FOREVER on a never-sealed object, in a task", rc, 1);
    }
    atomic_fetch_add(&n_blocked_returned, 1);
    return 0;
}

/* ------------------------------------------------------------ actors */

typedef struct acc {
    int64_t sum;
    int64_t calls;
} acc_t;

enum { M_ADD, M_RESTART };

static int m_add(void *self, hive_ctx_t *ctx)
{
    acc_t *s = self;
    int64_t v = sum_args(ctx);
    s->sum += v;
    s->calls++;
    return hive_return(ctx, &v, sizeof v) == HIVE_OK ? 0 : 1;
}

static int m_restart(void *self, hive_ctx_t *ctx)
{
    (void)self;
    (void)ctx;
    return HIVE_RESTART;
}

static int acc_init(void *self, hive_ctx_t *ctx)
{
    (void)self;
    (void)ctx;
    atomic_fetch_add(&n_inits, 1);
    return 0;
}

static void acc_fini(void *self)
{
    (void)self;
    atomic_fetch_add(&n_finis, 1);
}

static const hive_method_t acc_methods[] = {
    [M_ADD]     = { "add", m_add, HIVE_PRIO_NORMAL },
    [M_RESTART] = { "restart", m_restart, HIVE_PRIO_NORMAL },
};
static const hive_actor_class_t acc_class = {
    .name = "Acc", .size = sizeof(acc_t), .init = acc_init, .fini = acc_fini,
    .methods = acc_methods, .nmethods = 2,
};

/* ------------------------------------------------------------ drivers */

enum { K_VALUE, K_ANY, K_BLOB, K_CREATED };

typedef struct held {
    hive_ref_t ref;
    int        kind;                     /* K_VALUE: want is its value when it succeeds */
    int64_t    want;
} held_t;

typedef struct driver {
    unsigned id;
    uint64_t rng;
    held_t   held[HELD];
    unsigned head, used;
    int      blockers;
} driver_t;

static driver_t drivers[DRIVERS];

/* Before shutdown: a task's or call's result is its value, not ready yet,
 * or the result of a cancel, a kill, a restart or a failed dependency. */
#define PRE_RESULT (C(HIVE_OK) | C(HIVE_ETIMEDOUT) | C(HIVE_ECANCELED) | C(HIVE_ETASK) | C(HIVE_EDEAD))

static void check_held(held_t *e)
{
    if (e->kind == K_CREATED)
        return;                           /* never sealed: nothing to get */
    const int64_t *p;
    size_t n;
    int rc = hive_get(W.h, e->ref, 0, (const void **)&p, &n);
    expect_code("hive_get (poll) of a held ref", rc,
                e->kind == K_BLOB ? C(HIVE_OK) : PRE_RESULT);
    if (rc == HIVE_OK && e->kind != K_ANY)
        expect_true("a result carries its expected value", n == sizeof *p && *p == e->want);
}

static void retire_oldest(driver_t *d)
{
    held_t *e = &d->held[d->head];
    check_held(e);
    expect_code("hive_release of a held ref", hive_release(W.h, e->ref), C(HIVE_OK));
    d->head = (d->head + 1) % HELD;
    d->used--;
}

static void hold(driver_t *d, hive_ref_t ref, int kind, int64_t want)
{
    if (d->used == HELD)
        retire_oldest(d);
    d->held[(d->head + d->used) % HELD] = (held_t){ .ref = ref, .kind = kind, .want = want };
    d->used++;
}

static held_t *random_held(driver_t *d)
{
    if (d->used == 0)
        return NULL;
    return &d->held[(d->head + rnd(&d->rng) % d->used) % HELD];
}

static hive_actor_t random_actor(driver_t *d)
{
    return (hive_actor_t){ atomic_load(&W.actors[rnd(&d->rng) % NACTORS]) };
}

static void op_chain(driver_t *d)
{
    int len = 1 + (int)(rnd(&d->rng) % 6);
    int64_t want = 0;
    hive_ref_t prev = { 0 };
    for (int i = 0; i < len; i++) {
        int64_t inc = (int64_t)(rnd(&d->rng) % 1000);
        hive_arg_t args[2] = { HIVE_VAL(inc), HIVE_REF(prev) };
        hive_ref_t r;
        int rc = hive_submit(W.h, t_add, args, i == 0 ? 1 : 2, NULL, &r);
        expect_code("hive_submit of a chain link", rc, C(HIVE_OK));
        if (rc != HIVE_OK)
            break;
        atomic_fetch_add(&n_tasks, 1);
        want += inc;
        if (i > 0)                        /* the next link holds its own count */
            expect_code("hive_release of a chain link", hive_release(W.h, prev), C(HIVE_OK));
        prev = r;
        if (i == len - 1)
            hold(d, r, K_VALUE, want);
    }
}

static void op_fanin(driver_t *d)
{
    hive_arg_t args[3];
    hive_ref_t leaf[3];
    int64_t v[3], want = 0;
    for (int i = 0; i < 3; i++) {
        v[i] = (int64_t)(rnd(&d->rng) % 1000);
        want += v[i];
        hive_arg_t a = HIVE_VAL(v[i]);
        int rc = hive_submit(W.h, t_add, &a, 1, NULL, &leaf[i]);
        expect_code("hive_submit of a leaf", rc, C(HIVE_OK));
        if (rc != HIVE_OK)
            return;
        args[i] = HIVE_REF(leaf[i]);
    }
    hive_ref_t sink;
    int rc = hive_submit(W.h, t_add, args, 3, NULL, &sink);
    expect_code("hive_submit of a fan-in", rc, C(HIVE_OK));
    for (int i = 0; i < 3; i++)
        expect_code("hive_release of a leaf", hive_release(W.h, leaf[i]), C(HIVE_OK));
    if (rc == HIVE_OK) {
        atomic_fetch_add(&n_tasks, 4);
        hold(d, sink, K_VALUE, want);
    }
}

static void op_fork(driver_t *d)
{
    int depth = 1 + (int)(rnd(&d->rng) % 4);
    hive_arg_t a = HIVE_VAL(depth);
    hive_ref_t r;
    int rc = hive_submit(W.h, t_fork, &a, 1, NULL, &r);
    expect_code("hive_submit of a fork", rc, C(HIVE_OK));
    if (rc == HIVE_OK) {
        atomic_fetch_add(&n_tasks, 1);
        hold(d, r, K_VALUE, fork_value(depth));
    }
}

static void op_get(driver_t *d)
{
    held_t *e = random_held(d);
    if (e == NULL || e->kind == K_CREATED)
        return;
    const int64_t *p;
    size_t n;
    int rc = hive_get(W.h, e->ref, (int64_t)(rnd(&d->rng) % 1000000), (const void **)&p, &n);
    expect_code("hive_get (1 ms) of a held ref", rc, e->kind == K_BLOB ? C(HIVE_OK) : PRE_RESULT);
    if (rc == HIVE_OK && e->kind != K_ANY)
        expect_true("a result carries its expected value", n == sizeof *p && *p == e->want);
}

static void op_cancel(driver_t *d)
{
    held_t *e = random_held(d);
    if (e == NULL || e->kind == K_BLOB || e->kind == K_CREATED)
        return;
    expect_code("hive_cancel", hive_cancel(W.h, e->ref), C(HIVE_OK) | C(HIVE_ESTATE));
}

static void op_call(driver_t *d)
{
    int64_t v = (int64_t)(rnd(&d->rng) % 1000);
    hive_arg_t a = HIVE_VAL(v);
    hive_ref_t r;
    int rc = hive_call(W.h, random_actor(d), M_ADD, &a, 1, NULL, &r);
    expect_code("hive_call", rc, C(HIVE_OK) | C(HIVE_EDEAD));
    if (rc == HIVE_OK) {
        atomic_fetch_add(&n_calls, 1);
        hold(d, r, K_VALUE, v);
    }
}

static void op_restart(driver_t *d)
{
    hive_ref_t r;
    int rc = hive_call(W.h, random_actor(d), M_RESTART, NULL, 0, NULL, &r);
    expect_code("hive_call of a restart", rc, C(HIVE_OK) | C(HIVE_EDEAD));
    if (rc == HIVE_OK) {
        atomic_fetch_add(&n_calls, 1);
        hold(d, r, K_ANY, 0);
    }
}

/* Replace an actor by a new one, then kill the old one. */
static void op_kill(driver_t *d)
{
    hive_actor_opts_t o = { .max_restarts = 2 };
    hive_actor_t fresh;
    int rc = hive_actor_new(W.h, &acc_class, NULL, 0, &o, &fresh);
    expect_code("hive_actor_new", rc, C(HIVE_OK));
    if (rc != HIVE_OK)
        return;
    hive_actor_t old = { atomic_exchange(&W.actors[rnd(&d->rng) % NACTORS], fresh.id) };
    /* HIVE_EDEAD: out of restarts already */
    expect_code("hive_actor_kill", hive_actor_kill(W.h, old), C(HIVE_OK) | C(HIVE_EDEAD));
    atomic_fetch_add(&n_kills, 1);
}

static void op_put(driver_t *d)
{
    int64_t v = (int64_t)rnd(&d->rng);
    hive_ref_t r;
    int rc = hive_put(W.h, &v, sizeof v, &r);
    expect_code("hive_put", rc, C(HIVE_OK));
    if (rc == HIVE_OK)
        hold(d, r, K_BLOB, v);
}

static void op_create(driver_t *d)
{
    size_t size = (size_t)(rnd(&d->rng) % 8192);
    void *p;
    hive_ref_t r;
    int rc = hive_create(W.h, size, &p, &r);
    expect_code("hive_create", rc, C(HIVE_OK));
    if (rc != HIVE_OK)
        return;
    memset(p, 0x5a, size);
    hold(d, r, K_CREATED, 0);             /* never sealed */
    /* driver 0 seals the late objects one by one, at random moments */
    int k = atomic_load(&W.late_sealed);
    if (d->id == 0 && k < LATE && rnd(&d->rng) % 8 == 0) {
        expect_code("hive_seal of a late object", hive_seal(W.h, W.late[k]), C(HIVE_OK));
        atomic_store(&W.late_sealed, k + 1);
    }
}

/* A ref that may never be sealed: one of never[], or a late one. */
static hive_ref_t unsealed_ref(driver_t *d, int *late)
{
    uint64_t x = rnd(&d->rng);
    *late = x % 4 == 0;
    return *late ? W.late[(x >> 8) % LATE] : W.never[(x >> 8) % NEVER];
}

static void op_dep_pending(driver_t *d)
{
    int late;
    int64_t inc = 1;
    hive_arg_t args[2] = { HIVE_VAL(inc), HIVE_REF(unsealed_ref(d, &late)) };
    hive_ref_t r;
    int rc = hive_submit(W.h, t_add, args, 2, NULL, &r);
    expect_code("hive_submit with a never-sealed ref", rc, C(HIVE_OK));
    if (rc == HIVE_OK) {
        atomic_fetch_add(&n_tasks, 1);
        hold(d, r, K_VALUE, LATE_VALUE + inc);
    }
}

static void op_block(driver_t *d)
{
    if (d->blockers >= MAX_BLOCKERS)
        return;
    block_arg_t b = { .mode = (int)(rnd(&d->rng) % 2) };
    b.id = unsealed_ref(d, &b.late).id;
    hive_arg_t a = HIVE_VAL(b);
    hive_ref_t r;
    int rc = hive_submit(W.h, t_block, &a, 1, NULL, &r);
    expect_code("hive_submit of a blocking task", rc, C(HIVE_OK));
    if (rc == HIVE_OK) {
        d->blockers++;
        atomic_fetch_add(&n_tasks, 1);
        hold(d, r, K_ANY, 0);
    }
}

static void op_call_pending(driver_t *d)
{
    int late;
    hive_arg_t a = HIVE_REF(unsealed_ref(d, &late));
    if (rnd(&d->rng) % 8 == 0) {
        /* a constructor waiting for its argument: replaces an actor */
        hive_actor_opts_t o = { .max_restarts = 2 };
        hive_actor_t fresh;
        int rc = hive_actor_new(W.h, &acc_class, &a, 1, &o, &fresh);
        expect_code("hive_actor_new with a never-sealed ref", rc, C(HIVE_OK));
        if (rc == HIVE_OK) {
            hive_actor_t old = { atomic_exchange(&W.actors[rnd(&d->rng) % NACTORS], fresh.id) };
            expect_code("hive_actor_kill", hive_actor_kill(W.h, old), C(HIVE_OK) | C(HIVE_EDEAD));
        }
        return;
    }
    hive_ref_t r;
    int rc = hive_call(W.h, random_actor(d), M_ADD, &a, 1, NULL, &r);
    expect_code("hive_call with a never-sealed ref", rc, C(HIVE_OK) | C(HIVE_EDEAD));
    if (rc == HIVE_OK) {
        atomic_fetch_add(&n_calls, 1);
        hold(d, r, K_VALUE, LATE_VALUE);
    }
}

typedef struct op {
    unsigned feature;
    void   (*fn)(driver_t *d);
    unsigned weight;
} op_t;

static const op_t ops[] = {
    { F_TASKS, op_chain, 4 },        { F_TASKS, op_fanin, 3 },
    { F_TASKS | F_NESTED | F_ACTORS, op_get, 3 },
    { F_TASKS | F_NESTED | F_ACTORS, op_cancel, 1 },
    { F_NESTED, op_fork, 3 },        { F_ACTORS, op_call, 6 },
    { F_ACTORS, op_restart, 1 },     { F_ACTORS, op_kill, 1 },
    { F_CREATES, op_put, 2 },        { F_CREATES, op_create, 2 },
    { F_DEPS_PENDING, op_dep_pending, 2 },
    { F_TASK_BLOCKED, op_block, 1 }, { F_CALL_PENDING, op_call_pending, 2 },
};
#define NOPS (sizeof ops / sizeof ops[0])

static void *driver_loop(void *arg)
{
    driver_t *d = arg;
    unsigned total = 0;
    for (size_t i = 0; i < NOPS; i++)
        if (ops[i].feature & W.features)
            total += ops[i].weight;
    if (total == 0)
        return NULL;
    while (!atomic_load_explicit(&W.stop, memory_order_relaxed)) {
        unsigned pick = (unsigned)(rnd(&d->rng) % total);
        for (size_t i = 0; i < NOPS; i++) {
            if (!(ops[i].feature & W.features))
                continue;
            if (pick < ops[i].weight) {
                ops[i].fn(d);
                break;
            }
            pick -= ops[i].weight;
        }
    }
    return NULL;                          /* what it still holds, shutdown frees */
}

/* ------------------------------------------------------------ waiters */

typedef struct waiter {
    int          kind;
    pid_t        tid;
    _Atomic int  entering;               /* the next thing it does is its wait */
    _Atomic int  returned;
    int          rc;
    pthread_t    thread;
} waiter_t;

enum { W_GET_NEVER, W_WAIT_BOTH, W_GET_DEP, W_GET_FORK, W_GET_LATE, W_WAIT_ANY, NWAITERS };
static waiter_t waiters[NWAITERS];

#define WAITER_FORK_DEPTH 3

static void *waiter_loop(void *arg)
{
    waiter_t *w = arg;
    hive_t *h = W.h;
    w->tid = (pid_t)syscall(SYS_gettid);
    const int64_t *p = NULL;
    size_t n = 0;
    hive_ref_t r = { 0 };
    int rc;
    switch (w->kind) {
    case W_GET_NEVER:
        atomic_store(&w->entering, 1);
        rc = hive_get(h, W.never[0], HIVE_FOREVER, (const void **)&p, &n);
        expect_code("user hive_get FOREVER on a never-sealed object", rc, C(HIVE_ESHUTDOWN));
        break;
    case W_WAIT_BOTH: {
        hive_ref_t both[2] = { W.never[1], W.late[0] };
        atomic_store(&w->entering, 1);
        rc = hive_wait(h, both, 2, 2, HIVE_FOREVER, NULL);
        expect_wait("user hive_wait FOREVER (all of 2, one never sealed)", rc, 2);
        break;
    }
    case W_GET_DEP: {
        hive_arg_t a = HIVE_REF(W.never[2]);
        expect_code("hive_submit with a never-sealed ref", hive_submit(h, t_add, &a, 1, NULL, &r),
                    C(HIVE_OK));
        atomic_store(&w->entering, 1);
        rc = hive_get(h, r, HIVE_FOREVER, (const void **)&p, &n);
        /* its dependency fails by shutdown (HIVE_ETASK) or it does itself */
        expect_code("user hive_get FOREVER on a task waiting for a never-sealed ref", rc,
                    C(HIVE_ETASK) | C(HIVE_ESHUTDOWN));
        break;
    }
    case W_GET_FORK: {
        int depth = WAITER_FORK_DEPTH;
        hive_arg_t a = HIVE_VAL(depth);
        expect_code("hive_submit of a fork", hive_submit(h, t_fork, &a, 1, NULL, &r), C(HIVE_OK));
        atomic_store(&w->entering, 1);
        rc = hive_get(h, r, HIVE_FOREVER, (const void **)&p, &n);
        expect_code("user hive_get FOREVER on a fork", rc,
                    C(HIVE_OK) | C(HIVE_ETASK) | C(HIVE_ESHUTDOWN));
        if (rc == HIVE_OK)
            expect_true("the waiter's fork has its value", n == sizeof *p && *p == fork_value(depth));
        break;
    }
    case W_GET_LATE:
        atomic_store(&w->entering, 1);
        rc = hive_get(h, W.late[1], HIVE_FOREVER, (const void **)&p, &n);
        expect_code("user hive_get FOREVER on a late object", rc, C(HIVE_OK) | C(HIVE_ESHUTDOWN));
        if (rc == HIVE_OK)
            expect_true("a late object has its value", n == sizeof *p && *p == LATE_VALUE);
        break;
    default: {
        hive_ref_t any[2] = { W.never[3], W.never[4] };
        atomic_store(&w->entering, 1);
        rc = hive_wait(h, any, 2, 1, HIVE_FOREVER, NULL);
        expect_wait("user hive_wait FOREVER (any of 2 never sealed)", rc, 1);
        break;
    }
    }
    w->rc = rc;
    if (rc == HIVE_ESHUTDOWN)
        atomic_fetch_add(&n_waiter_shutdown, 1);
    atomic_store(&w->returned, 1);
    return NULL;                          /* its counts, if any, shutdown frees */
}

/* Is thread tid asleep in a futex (inside its hive call)? /proc says which
 * system call a thread is blocked in: its number first. */
static bool in_futex(pid_t tid)
{
    char path[64], buf[64] = { 0 };
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return atoi(buf) == SYS_futex && buf[0] != '-';
}

/* Until every waiter is asleep inside its call (or has its result). */
static void await_waiters_inside(void)
{
    for (int i = 0; i < NWAITERS; i++) {
        waiter_t *w = &waiters[i];
        uint64_t deadline = test_now_ns() + 20ull * 1000000000u;
        while (!atomic_load(&w->returned) && !(atomic_load(&w->entering) && in_futex(w->tid))) {
            if (test_now_ns() > deadline)
                fail_msg("waiter %d did not block in its call within 20 s", i);
            test_sleep_ms(1);
        }
    }
}

/* ------------------------------------------------------------ one iteration */

typedef struct tally {
    uint64_t shutdown_ns_max;
    int      iterations;
} tally_t;

static void one_iteration(unsigned features, uint64_t seed, tally_t *t)
{
    memset(&W, 0, sizeof W);
    W.features = features;
    W.seed = seed;
    uint64_t rng = seed;
    unsigned workers = 1 + (unsigned)(rnd(&rng) % 3);
    /* a synthetic machine of 1 or 2 NUMA nodes: placement over node rings
     * too, and no 20 ms topology discovery per iteration */
    W.h = test_engine(32u << 20, workers,
                      rnd(&rng) % 2 ? "pack:1 numa:1 core:4 pu:1" : "pack:1 numa:2 core:2 pu:1");
    for (int i = 0; i < NEVER; i++) {
        void *p;
        assert_int_equal(hive_create(W.h, sizeof(int64_t), &p, &W.never[i]), HIVE_OK);
        memset(p, 0, sizeof(int64_t));
    }
    for (int i = 0; i < LATE; i++) {
        int64_t *p;
        assert_int_equal(hive_create(W.h, sizeof *p, (void **)&p, &W.late[i]), HIVE_OK);
        *p = LATE_VALUE;
    }
    for (int i = 0; i < NACTORS; i++) {
        hive_actor_opts_t o = { .max_restarts = 2 };
        hive_actor_t a;
        assert_int_equal(hive_actor_new(W.h, &acc_class, NULL, 0, &o, &a), HIVE_OK);
        atomic_store(&W.actors[i], a.id);
    }

    pthread_t dth[DRIVERS];
    for (unsigned i = 0; i < DRIVERS; i++) {
        memset(&drivers[i], 0, sizeof drivers[i]);
        drivers[i].id = i;
        drivers[i].rng = rnd(&rng) | 1;
        assert_int_equal(pthread_create(&dth[i], NULL, driver_loop, &drivers[i]), 0);
    }
    bool with_waiters = features & F_WAITERS;
    if (with_waiters)
        for (int i = 0; i < NWAITERS; i++) {
            memset(&waiters[i], 0, sizeof waiters[i]);
            waiters[i].kind = i;
            assert_int_equal(pthread_create(&waiters[i].thread, NULL, waiter_loop, &waiters[i]), 0);
        }

    /* the random moment: 0 .. MAX_DELAY_MS into the load (0 one time in 8) */
    unsigned delay = rnd(&rng) % 8 == 0 ? 0 : (unsigned)(rnd(&rng) % (MAX_DELAY_MS + 1));
    test_sleep_ms(delay);
    atomic_store(&W.stop, 1);
    arm("a load thread's last call before shutdown");
    for (unsigned i = 0; i < DRIVERS; i++)
        pthread_join(dth[i], NULL);
    disarm();
    if (with_waiters)
        await_waiters_inside();

    arm("hive_shutdown");
    uint64_t t0 = test_now_ns();
    assert_int_equal(hive_shutdown(W.h), HIVE_OK);
    uint64_t took = test_now_ns() - t0;
    disarm();
    if (took > t->shutdown_ns_max)
        t->shutdown_ns_max = took;
    W.h = NULL;
    if (with_waiters) {
        arm("a user thread blocked in hive_get / hive_wait when shutdown started");
        for (int i = 0; i < NWAITERS; i++)
            pthread_join(waiters[i].thread, NULL);
        disarm();
    }
    t->iterations++;
    if (atomic_load(&bad_count) != 0)
        fail_msg("iteration %d (features 0x%x, seed %llu, %u workers, delay %u ms): %ld bad codes; "
                 "first: %s", t->iterations, features, (unsigned long long)seed, workers, delay,
                 atomic_load(&bad_count), bad_first);
    if (atomic_load(&n_blocked_returned) != atomic_load(&n_blocked_started))
        fail_msg("iteration %d (features 0x%x, seed %llu): %ld tasks entered a FOREVER wait, "
                 "%ld left it", t->iterations, features, (unsigned long long)seed,
                 atomic_load(&n_blocked_started), atomic_load(&n_blocked_returned));
    if (atomic_load(&n_finis) != atomic_load(&n_inits))
        fail_msg("iteration %d (features 0x%x, seed %llu): %ld actors built, %ld finalised",
                 t->iterations, features, (unsigned long long)seed, atomic_load(&n_inits),
                 atomic_load(&n_finis));
}

static uint64_t base_seed(void)
{
    static uint64_t seed;
    if (seed == 0) {
        const char *s = getenv("SHUTDOWN_SEED");
        seed = s != NULL ? strtoull(s, NULL, 0) : test_now_ns();
        seed |= 1;
        printf("shutdown stress: SHUTDOWN_SEED=%llu\n", (unsigned long long)seed);
    }
    return seed;
}

static void run_scenario(const char *name, unsigned features, int iterations)
{
    uint64_t rng = base_seed() ^ (features * 0x9E3779B97F4A7C15ull);
    tally_t t = { 0 };
    atomic_store(&n_tasks, 0);
    atomic_store(&n_calls, 0);
    atomic_store(&n_blocked_started, 0);
    atomic_store(&n_blocked_returned, 0);
    atomic_store(&n_waiter_shutdown, 0);
    atomic_store(&n_inits, 0);
    atomic_store(&n_finis, 0);
    atomic_store(&n_kills, 0);
    for (int i = 0; i < iterations; i++) {
        atomic_store(&wd_iteration, i);
        atomic_store(&wd_features, features);
        one_iteration(features, rnd(&rng) | 1, &t);
    }
    printf("%s: %d shutdowns; %ld tasks, %ld calls, %ld kills, %ld FOREVER-blocked tasks ended, "
           "%ld user waiters got HIVE_ESHUTDOWN, %ld actors built and finalised; slowest shutdown "
           "%.1f ms\n", name, t.iterations, atomic_load(&n_tasks), atomic_load(&n_calls),
           atomic_load(&n_kills), atomic_load(&n_blocked_returned), atomic_load(&n_waiter_shutdown),
           atomic_load(&n_inits), (double)t.shutdown_ns_max / 1e6);
}

/* ------------------------------------------------------------ scenarios */

/* sanitized builds: a quarter (an iteration costs ~0.35 s in TSan: ~30 s in all) */
#define ITER_ONE (TEST_SCALE > 1 ? 8 : 30)    /* each hazard on its own */
#define ITER_ALL (TEST_SCALE > 1 ? 50 : 200)  /* everything at once */

/* Queued, running and nested work, actor calls, kills, cancels, puts. */
static void test_shutdown_busy(void **state)
{
    (void)state;
    run_scenario("busy", F_TASKS | F_NESTED | F_ACTORS | F_CREATES, ITER_ONE);
}

/* Tasks parked on ref args that are never sealed (no worker waits). */
static void test_shutdown_pending_deps(void **state)
{
    (void)state;
    run_scenario("pending deps", F_TASKS | F_DEPS_PENDING | F_CREATES, ITER_ONE);
}

/* User threads asleep in hive_get / hive_wait FOREVER when shutdown starts. */
static void test_shutdown_user_waiters(void **state)
{
    (void)state;
    run_scenario("user waiters", F_TASKS | F_NESTED | F_WAITERS, ITER_ONE);
}

/* Tasks in hive_get / hive_wait FOREVER on objects nobody seals. */
static void test_shutdown_blocked_tasks(void **state)
{
    (void)state;
    run_scenario("blocked tasks", F_TASKS | F_TASK_BLOCKED, ITER_ONE);
}

/* Actor calls and constructors waiting for ref args nobody seals. */
static void test_shutdown_pending_call_args(void **state)
{
    (void)state;
    run_scenario("pending call args", F_ACTORS | F_CALL_PENDING, ITER_ONE);
}

static void test_shutdown_anywhere(void **state)
{
    (void)state;
    run_scenario("anywhere", F_ALL, ITER_ALL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shutdown_busy),
        cmocka_unit_test(test_shutdown_pending_deps),
        cmocka_unit_test(test_shutdown_user_waiters),
        cmocka_unit_test(test_shutdown_blocked_tasks),
        cmocka_unit_test(test_shutdown_pending_call_args),
        cmocka_unit_test(test_shutdown_anywhere),
    };
    const char *only = getenv("SHUTDOWN_ONLY");     /* e.g. "*blocked*": one scenario */
    if (only != NULL)
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests_name("stress_shutdown", tests, group_setup, group_teardown);
}
