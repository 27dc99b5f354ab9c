/*
 * soak/soak.c - a long mixed load near store capacity: nothing lost,
 * nothing done twice, nothing leaked.
 *
 * SOAK_S seconds (30 unless set; `make soak` runs 600) of LOADERS user
 * threads, each running a random mix of:
 *  - chains (4..16 tasks, each adding its increment to its predecessor's
 *    result) and fan-ins (2..8 leaves summed by one sink), values checked;
 *  - fork-join trees (nested hive_get inside tasks, depth 2..6);
 *  - slow tasks cancelled at a random moment;
 *  - batches of actor calls (one sometimes cancelled), restarts
 *    (HIVE_RESTART) and kills with a fresh actor in the victim's place;
 *  - puts and create+seal, read back and released;
 *  - cell publishes and acquires (seq never goes back, payloads intact);
 *  - replay pushes (single and batched) and prioritized samples with
 *    priority updates (items never torn);
 * while each keeps "ballast" objects (16 KiB .. 512 KiB, a pattern checked
 * when released) so the 64 MiB store stays 65..80% full.
 *
 * Accounting: every task and call adds 1 and its token to "ran" counters
 * when it does its work; whoever gets a result with HIVE_OK adds 1 and the
 * token to "ok" counters, and gets every result exactly once. Both must
 * match: nothing ran without a result, nothing got a result without
 * running, nothing ran twice. A task or call that may be cancelled counts
 * its runs in a slot of its own instead: 1 if its result is OK, at most 1
 * if it is HIVE_ECANCELED (a cancel that reaches a running task makes it
 * HIVE_ECANCELED whatever it returned - never HIVE_ETASK), none if
 * HIVE_EDEAD.
 *
 * At the end (load stopped, everything released, every actor killed, frees
 * waited for) the store must hold 0 bytes, and only as many objects as the
 * dead actors' handles cost (measured on one actor at the start: a dead
 * actor's handle stays findable, so it may stay counted). Resident memory,
 * sampled every second from /proc/self/statm, must not grow after warm-up
 * (the first 20% of the run): the least-squares slope must stay under
 * RSS_SLOPE_MAX KiB/min plus what one late step of RSS_STEP_KIB would add
 * to it. Such steps are high-water marks, not leaks: store pages and
 * record pools touched for the first time when the load peaks (the store's
 * large allocator may spread over twice its capacity of address space);
 * here RSS grows in a step or two during the first minute or so, then stays
 * flat. So a 30 s run (bound ~120 MiB/min) only catches leaks of ~20 bytes
 * per task (~100k tasks a second), a 10-minute one (~7 MiB/min) of a byte
 * per task. The store's own leaks are caught exactly, by its byte count
 * (and the heap's by ASan: `make soak VARIANT=asan`, where RSS is only
 * reported, as sanitizers keep freed memory). Open fds (/proc/self/fd)
 * and threads (/proc/self/status) must be the same at the end of warm-up
 * and at the end.
 * Ops per second by kind are printed.
 */
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <unistd.h>

#define LOADERS        3
#define STORE_BYTES    ((size_t)64 << 20)
/* The ballast band leaves 20% of the store to everything else in flight:
 * results and puts whose release waits for a grace period. On an
 * overloaded machine (load 9 on 2 cores) a preempted reader stretches
 * grace periods, and with only 10% left the fill reached 100%: tasks' own
 * hive_return got HIVE_EFULL, which this soak counts as failures. */
#define BAND_LOW       0.65              /* ballast added below this fill */
#define BAND_HIGH      0.80              /* and dropped above it */
#define BALLAST_MAX    512               /* objects per loader */
#define BALLAST_MIN_SZ (16u << 10)
#define BALLAST_MAX_SZ (512u << 10)
#define NACTORS        16
#define ACTOR_STATE    (16u << 10)       /* bytes of state: a kill must give them back */
#define NCELLS         4
#define RB_CAPACITY    4096
#define RB_BATCH       32
#define KILL_EVERY_MS  1000              /* per loader: ~3 kills/s in all */
#define RSS_SLOPE_MAX  1024.0            /* KiB per minute after warm-up, steady growth */
#define RSS_STEP_KIB   32768.0           /* plus one late step of high-water growth */
#define WARMUP_FRAC    0.2
#define DEADLINE_NS    ((int64_t)60 * 1000000000)   /* against hangs only */

static hive_t *h;
static _Atomic int stop_flag;

/* ------------------------------------------------------------ failures */

static _Atomic long bad_count;
static pthread_mutex_t bad_lock = PTHREAD_MUTEX_INITIALIZER;
static char bad_first[512];

static void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bad(const char *fmt, ...)
{
    if (atomic_fetch_add(&bad_count, 1) != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&bad_lock);
    vsnprintf(bad_first, sizeof bad_first, fmt, ap);
    pthread_mutex_unlock(&bad_lock);
    va_end(ap);
}

/* Append a sentence to a failure report. */
static void why_add(char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void why_add(char *why, const char *fmt, ...)
{
    size_t len = strlen(why), cap = 2048;
    if (len + 3 >= cap)
        return;
    if (len != 0) {
        strcpy(why + len, "; ");
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + len, cap - len, fmt, ap);
    va_end(ap);
}

static void expect_ok(const char *what, int rc)
{
    if (rc != HIVE_OK)
        bad("%s: %s: %s", what, hive_strerror(rc), hive_last_error());
}

static inline uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static inline uint64_t mix(uint64_t x)          /* splitmix64's finaliser */
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* ------------------------------------------------------------ accounting */

/* relaxed everywhere: totals read after the threads are joined */
static _Atomic uint64_t ran_tasks, ran_task_sum, ok_tasks, ok_task_sum;
static _Atomic uint64_t ran_calls, ran_call_sum, ok_calls, ok_call_sum;
static _Atomic long bad_values, cancel_doubled, cancel_lost, cancel_etask, cancel_ok, cancel_cancelled,
    inits, finis;

static void count_ok_task(uint64_t token)
{
    atomic_fetch_add_explicit(&ok_tasks, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ok_task_sum, token, memory_order_relaxed);
}

enum {
    OP_CHAIN, OP_FANIN, OP_FORK, OP_CANCEL, OP_CALLS, OP_RESTART, OP_KILL, OP_PUT, OP_CREATE,
    OP_PUBLISH, OP_ACQUIRE, OP_PUSH, OP_SAMPLE, NOPS,
    /* counted, not picked */
    N_TASKS = NOPS, N_CALLS, N_BALLAST_ADD, N_BALLAST_DROP, N_FULL, N_PUSHED, N_SAMPLED, NCOUNT
};
static const char *const op_names[NCOUNT] = {
    "chains", "fan-ins", "fork trees", "cancelled tasks", "call batches", "restarts", "kills",
    "puts", "creates", "cell publishes", "cell acquires", "replay pushes", "replay samples",
    "tasks", "calls", "ballast adds", "ballast drops", "store-full puts", "items pushed",
    "items sampled",
};
static const unsigned op_weight[NOPS] = {
    [OP_CHAIN] = 6, [OP_FANIN] = 6, [OP_FORK] = 3, [OP_CANCEL] = 4, [OP_CALLS] = 8,
    [OP_RESTART] = 1, [OP_KILL] = 2, [OP_PUT] = 4, [OP_CREATE] = 4, [OP_PUBLISH] = 3,
    [OP_ACQUIRE] = 8, [OP_PUSH] = 8, [OP_SAMPLE] = 4,
};

/* ------------------------------------------------------------ tasks */

typedef struct add_arg {
    uint64_t token;
    int64_t  inc;
} add_arg_t;

/* inc plus the int64 payload of every ref argument */
static int t_add(hive_ctx_t *ctx)
{
    const add_arg_t *a = hive_arg(ctx, 0, NULL);
    int64_t sum = a->inc;
    for (size_t i = 1; i < hive_nargs(ctx); i++) {
        size_t n;
        const int64_t *p = hive_arg(ctx, i, &n);
        if (n != sizeof *p)
            return 1;
        sum += *p;
    }
    if (hive_return(ctx, &sum, sizeof sum) != HIVE_OK)
        return 1;
    atomic_fetch_add_explicit(&ran_tasks, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ran_task_sum, a->token, memory_order_relaxed);
    return 0;
}

typedef struct fork_arg {
    uint64_t token;
    int      depth;
} fork_arg_t;

static int64_t fork_value(int depth)
{
    return ((int64_t)1 << (depth + 1)) - 1;
}

/* Two children, waited for inside the engine; the parent accounts them. */
static int t_fork(hive_ctx_t *ctx)
{
    const fork_arg_t *a = hive_arg(ctx, 0, NULL);
    hive_t *e = hive_engine(ctx);
    int64_t sum = 1;
    if (a->depth > 0) {
        hive_ref_t kid[2];
        fork_arg_t ka[2];
        for (int k = 0; k < 2; k++) {
            ka[k] = (fork_arg_t){ .token = mix(a->token + (uint64_t)k + 1), .depth = a->depth - 1 };
            hive_arg_t arg = HIVE_VAL(ka[k]);
            int rc = hive_submit(e, t_fork, &arg, 1, NULL, &kid[k]);
            if (rc != HIVE_OK) {
                bad("hive_submit in a fork: %s: %s", hive_strerror(rc), hive_last_error());
                return 1;
            }
        }
        for (int k = 0; k < 2; k++) {
            const int64_t *p;
            size_t n;
            int rc = hive_get(e, kid[k], DEADLINE_NS, (const void **)&p, &n);
            if (rc != HIVE_OK)
                bad("hive_get of a fork child: %s: %s", hive_strerror(rc), hive_last_error());
            else if (n != sizeof *p || *p != fork_value(a->depth - 1))
                atomic_fetch_add(&bad_values, 1);
            else {
                sum += *p;
                count_ok_task(ka[k].token);
            }
            hive_release(e, kid[k]);
        }
    }
    if (hive_return(ctx, &sum, sizeof sum) != HIVE_OK)
        return 1;
    atomic_fetch_add_explicit(&ran_tasks, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ran_task_sum, a->token, memory_order_relaxed);
    return 0;
}

/* Spins up to ~200 us; counts its start in its submitter's slot. */
static int t_slow(hive_ctx_t *ctx)
{
    _Atomic int *started = *(_Atomic int *const *)hive_arg(ctx, 0, NULL);
    atomic_fetch_add(started, 1);
    uint64_t end = test_now_ns() + 200000;
    while (test_now_ns() < end)
        if (hive_cancelled(ctx))
            return 1;
    return 0;
}

/* ------------------------------------------------------------ actors */

typedef struct acc {
    int64_t calls;
    char    pad[ACTOR_STATE - sizeof(int64_t)];
} acc_t;

enum { M_ADD, M_RESTART };

typedef struct call_arg {
    uint64_t     token;
    int64_t      value;
    _Atomic int *started;                 /* a call that may be cancelled counts here instead */
} call_arg_t;

static int m_add(void *self, hive_ctx_t *ctx)
{
    acc_t *s = self;
    const call_arg_t *a = hive_arg(ctx, 0, NULL);
    s->calls++;
    if (hive_return(ctx, &a->value, sizeof a->value) != HIVE_OK)
        return 1;
    if (a->started != NULL) {
        atomic_fetch_add(a->started, 1);
        return 0;
    }
    atomic_fetch_add_explicit(&ran_calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ran_call_sum, a->token, memory_order_relaxed);
    return 0;
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
    atomic_fetch_add(&inits, 1);
    return 0;
}

static void acc_fini(void *self)
{
    (void)self;
    atomic_fetch_add(&finis, 1);
}

static const hive_method_t acc_methods[] = {
    [M_ADD]     = { "add", m_add, HIVE_PRIO_NORMAL },
    [M_RESTART] = { "restart", m_restart, HIVE_PRIO_NORMAL },
};
static const hive_actor_class_t acc_class = {
    .name = "SoakAcc", .size = sizeof(acc_t), .init = acc_init, .fini = acc_fini,
    .methods = acc_methods, .nmethods = 2,
};
static const hive_actor_opts_t acc_opts = { .max_restarts = 1u << 30 };

static _Atomic uint64_t actor_slot[NACTORS];
static _Atomic long actors_created;

static int new_actor(hive_actor_t *out)
{
    int rc = hive_actor_new(h, &acc_class, NULL, 0, &acc_opts, out);
    if (rc == HIVE_OK)
        atomic_fetch_add(&actors_created, 1);
    return rc;
}

/* ------------------------------------------------------------ cells, replay */

static hive_ref_t cells[NCELLS];
static _Atomic uint64_t cell_pubs[NCELLS];

typedef struct version {
    uint64_t cell, pub, check;
} version_t;

static hive_replay_t *rb;

typedef struct item {
    uint64_t producer, n;
    uint64_t body[5];
    uint64_t check;
} item_t;                                 /* 64 bytes */

static void item_fill(item_t *it, uint64_t producer, uint64_t n)
{
    it->producer = producer;
    it->n = n;
    uint64_t c = mix(producer * 0x100000001b3ull + n);
    for (int i = 0; i < 5; i++)
        it->body[i] = c = mix(c);
    it->check = mix(c ^ n);
}

static bool item_ok(const item_t *it)
{
    item_t want;
    item_fill(&want, it->producer, it->n);
    return memcmp(&want, it, sizeof want) == 0;
}

/* ------------------------------------------------------------ loaders */

typedef struct ballast {
    hive_ref_t ref;
    size_t     size;
    uint64_t   seed;
} ballast_t;

typedef struct loader {
    unsigned    id;
    uint64_t    rng;
    uint64_t    tokens;
    uint64_t    ops[NCOUNT];
    ballast_t   ballast[BALLAST_MAX];
    unsigned    nballast;
    uint64_t    cell_seen[NCELLS];
    uint64_t   *buf;                      /* BALLAST_MAX_SZ bytes of pattern */
    uint64_t    next_kill_ns;
    _Atomic int slow_started;
    _Atomic int call_started;
    pthread_t   thread;
} loader_t;

static loader_t loaders[LOADERS];

static uint64_t token(loader_t *L)
{
    return mix(((uint64_t)L->id << 48) ^ ++L->tokens);
}

static void pattern_fill(uint64_t *w, size_t size, uint64_t seed)
{
    for (size_t i = 0; i < size / 8; i++)
        w[i] = seed ^ (i * 0x9E3779B97F4A7C15ull);
}

static bool pattern_ok(const uint64_t *w, size_t size, uint64_t seed)
{
    size_t n = size / 8;
    for (size_t i = 0; i < n; i += 512)
        if (w[i] != (seed ^ (i * 0x9E3779B97F4A7C15ull)))
            return false;
    return n == 0 || w[n - 1] == (seed ^ ((n - 1) * 0x9E3779B97F4A7C15ull));
}

/* Get, check and release an object holding pattern_fill(size, seed). */
static void check_and_release(hive_ref_t r, size_t size, uint64_t seed, const char *what)
{
    const void *p;
    size_t n;
    int rc = hive_get(h, r, 0, &p, &n);
    if (rc != HIVE_OK)
        bad("hive_get of a %s: %s: %s", what, hive_strerror(rc), hive_last_error());
    else if (n != size || !pattern_ok(p, size, seed))
        bad("a %s of %zu bytes came back changed (%zu bytes)", what, size, n);
    expect_ok("hive_release", hive_release(h, r));
}

/* A put or a create+seal of size bytes of pattern; false if the store is full. */
static bool make_object(loader_t *L, bool create, size_t size, uint64_t seed, hive_ref_t *out)
{
    int rc;
    if (create) {
        void *p;
        rc = hive_create(h, size, &p, out);
        if (rc == HIVE_OK) {
            pattern_fill(p, size, seed);
            expect_ok("hive_seal", hive_seal(h, *out));
        }
    } else {
        pattern_fill(L->buf, size, seed);
        rc = hive_put(h, L->buf, size, out);
    }
    if (rc == HIVE_EFULL) {
        L->ops[N_FULL]++;
        return false;
    }
    expect_ok(create ? "hive_create" : "hive_put", rc);
    return rc == HIVE_OK;
}

static void ballast_drop(loader_t *L, unsigned i)
{
    ballast_t b = L->ballast[i];
    L->ballast[i] = L->ballast[--L->nballast];
    check_and_release(b.ref, b.size, b.seed, "ballast object");
    L->ops[N_BALLAST_DROP]++;
}

/* Keep the store BAND_LOW..BAND_HIGH full with this loader's ballast. */
static void keep_band(loader_t *L)
{
    hive_store_stats_t st;
    expect_ok("hive_store_stats", hive_store_stats(h, &st));
    double fill = (double)st.used / (double)st.capacity;
    if (fill < BAND_LOW && L->nballast < BALLAST_MAX) {
        size_t size = BALLAST_MIN_SZ + (size_t)(rnd(&L->rng) % (BALLAST_MAX_SZ - BALLAST_MIN_SZ));
        size &= ~(size_t)7;
        ballast_t b = { .size = size, .seed = rnd(&L->rng) };
        if (make_object(L, rnd(&L->rng) & 1, size, b.seed, &b.ref)) {
            L->ballast[L->nballast++] = b;
            L->ops[N_BALLAST_ADD]++;
        }
    } else if (fill > BAND_HIGH && L->nballast > 0) {
        ballast_drop(L, (unsigned)(rnd(&L->rng) % L->nballast));
    }
}

static void account_get(hive_ref_t r, uint64_t tok, int64_t want, const char *what)
{
    const int64_t *p;
    size_t n;
    int rc = hive_get(h, r, DEADLINE_NS, (const void **)&p, &n);
    if (rc != HIVE_OK)
        bad("hive_get of a %s: %s: %s", what, hive_strerror(rc), hive_last_error());
    else if (n != sizeof *p || *p != want)
        atomic_fetch_add(&bad_values, 1);
    else
        count_ok_task(tok);
    expect_ok("hive_release", hive_release(h, r));
}

static void op_chain(loader_t *L)
{
    enum { MAXLEN = 16 };
    int len = 4 + (int)(rnd(&L->rng) % (MAXLEN - 3));
    hive_ref_t r[MAXLEN];
    uint64_t tok[MAXLEN];
    int64_t value[MAXLEN], sum = 0;
    int made = 0;
    for (int i = 0; i < len; i++) {
        add_arg_t a = { .token = token(L), .inc = (int64_t)(rnd(&L->rng) % 1000) };
        hive_arg_t args[2] = { HIVE_VAL(a), HIVE_REF(i ? r[i - 1] : (hive_ref_t){ 0 }) };
        int rc = hive_submit(h, t_add, args, i ? 2 : 1, NULL, &r[i]);
        if (rc != HIVE_OK) {
            expect_ok("hive_submit of a chain link", rc);
            break;
        }
        tok[i] = a.token;
        value[i] = sum += a.inc;
        made++;
    }
    /* the last one first: once it is sealed, every earlier one is */
    for (int i = made - 1; i >= 0; i--)
        account_get(r[i], tok[i], value[i], "chain link");
    L->ops[N_TASKS] += (uint64_t)made;
}

static void op_fanin(loader_t *L)
{
    enum { MAXK = 8 };
    int k = 2 + (int)(rnd(&L->rng) % (MAXK - 1));
    hive_ref_t leaf[MAXK], sink;
    add_arg_t la[MAXK];
    hive_arg_t args[MAXK + 1];
    int64_t want = 0;
    add_arg_t sa = { .token = token(L), .inc = 0 };
    args[0] = HIVE_VAL(sa);
    for (int i = 0; i < k; i++) {
        la[i] = (add_arg_t){ .token = token(L), .inc = (int64_t)(rnd(&L->rng) % 1000) };
        hive_arg_t a = HIVE_VAL(la[i]);
        int rc = hive_submit(h, t_add, &a, 1, NULL, &leaf[i]);
        if (rc != HIVE_OK) {
            expect_ok("hive_submit of a leaf", rc);
            for (int j = 0; j < i; j++)
                account_get(leaf[j], la[j].token, la[j].inc, "leaf");
            return;
        }
        want += la[i].inc;
        args[i + 1] = HIVE_REF(leaf[i]);
    }
    int rc = hive_submit(h, t_add, args, (size_t)k + 1, NULL, &sink);
    expect_ok("hive_submit of a sink", rc);
    if (rc == HIVE_OK)
        account_get(sink, sa.token, want, "fan-in sink");
    for (int i = 0; i < k; i++)
        account_get(leaf[i], la[i].token, la[i].inc, "leaf");
    L->ops[N_TASKS] += (uint64_t)k + (rc == HIVE_OK);
}

static void op_fork(loader_t *L)
{
    fork_arg_t a = { .token = token(L), .depth = 2 + (int)(rnd(&L->rng) % 5) };
    hive_arg_t arg = HIVE_VAL(a);
    hive_ref_t r;
    int rc = hive_submit(h, t_fork, &arg, 1, NULL, &r);
    expect_ok("hive_submit of a fork", rc);
    if (rc != HIVE_OK)
        return;
    account_get(r, a.token, fork_value(a.depth), "fork");
    L->ops[N_TASKS] += ((uint64_t)1 << (a.depth + 1)) - 1;
}

static void check_cancelled_runs(int rc, int started);

/* A slow task cancelled 0..100 us after its submit. */
static void op_cancel(loader_t *L)
{
    atomic_store(&L->slow_started, 0);
    _Atomic int *slot = &L->slow_started;
    hive_arg_t arg = HIVE_VAL(slot);
    hive_ref_t r;
    int rc = hive_submit(h, t_slow, &arg, 1, NULL, &r);
    expect_ok("hive_submit of a slow task", rc);
    if (rc != HIVE_OK)
        return;
    uint64_t until = test_now_ns() + rnd(&L->rng) % 100000;
    while (test_now_ns() < until)
        ;
    rc = hive_cancel(h, r);
    if (rc != HIVE_OK && rc != HIVE_ESTATE)
        bad("hive_cancel: %s: %s", hive_strerror(rc), hive_last_error());
    const void *p;
    rc = hive_get(h, r, DEADLINE_NS, &p, NULL);
    check_cancelled_runs(rc, atomic_load(&L->slow_started));
    if (rc == HIVE_OK)
        atomic_fetch_add(&cancel_ok, 1);
    else if (rc == HIVE_ECANCELED)
        atomic_fetch_add(&cancel_cancelled, 1);
    else if (rc == HIVE_ETASK)            /* a cancelled running task must say HIVE_ECANCELED */
        atomic_fetch_add(&cancel_etask, 1);
    else if (rc != HIVE_OK && rc != HIVE_ECANCELED)
        bad("hive_get of a cancelled task: %s: %s", hive_strerror(rc), hive_last_error());
    expect_ok("hive_release", hive_release(h, r));
}

static hive_actor_t random_actor(loader_t *L)
{
    return (hive_actor_t){ atomic_load(&actor_slot[rnd(&L->rng) % NACTORS]) };
}

/* Whether a cancelled task or call ran as often as its result says: once
 * if it succeeded, at most once if it was cancelled (a cancel that reaches
 * it running makes it HIVE_ECANCELED whatever it returned), never if it
 * failed otherwise (HIVE_EDEAD: killed before its turn). */
static void check_cancelled_runs(int rc, int started)
{
    if (started > 1)
        atomic_fetch_add(&cancel_doubled, 1);
    else if ((rc == HIVE_OK && started != 1) || (rc == HIVE_EDEAD && started != 0))
        atomic_fetch_add(&cancel_lost, 1);
}

/* 1..32 calls to one actor, the last one sometimes cancelled; a kill may
 * land meanwhile (HIVE_EDEAD). */
static void op_calls(loader_t *L)
{
    enum { MAXB = 32 };
    int nb = 1 + (int)(rnd(&L->rng) % MAXB);
    bool cancel = rnd(&L->rng) % 4 == 0;
    hive_actor_t a = random_actor(L);
    hive_ref_t r[MAXB];
    call_arg_t ca[MAXB];
    int made = 0;
    atomic_store(&L->call_started, 0);
    for (int i = 0; i < nb; i++) {
        ca[i] = (call_arg_t){ .token = token(L), .value = (int64_t)(rnd(&L->rng) % 1000000),
                              .started = cancel && i == nb - 1 ? &L->call_started : NULL };
        hive_arg_t arg = HIVE_VAL(ca[i]);
        int rc = hive_call(h, a, M_ADD, &arg, 1, NULL, &r[i]);
        if (rc == HIVE_EDEAD)
            break;
        expect_ok("hive_call", rc);
        if (rc != HIVE_OK)
            break;
        made++;
    }
    if (cancel && made == nb) {
        int rc = hive_cancel(h, r[made - 1]);
        if (rc != HIVE_OK && rc != HIVE_ESTATE)
            bad("hive_cancel of a call: %s: %s", hive_strerror(rc), hive_last_error());
    }
    for (int i = 0; i < made; i++) {
        const int64_t *p;
        size_t n;
        int rc = hive_get(h, r[i], DEADLINE_NS, (const void **)&p, &n);
        if (ca[i].started != NULL) {
            check_cancelled_runs(rc, atomic_load(&L->call_started));
            if (rc != HIVE_OK && rc != HIVE_ECANCELED && rc != HIVE_EDEAD)
                bad("hive_get of a cancelled call: %s: %s", hive_strerror(rc), hive_last_error());
        } else if (rc == HIVE_OK) {
            if (n != sizeof *p || *p != ca[i].value)
                atomic_fetch_add(&bad_values, 1);
            else {
                atomic_fetch_add_explicit(&ok_calls, 1, memory_order_relaxed);
                atomic_fetch_add_explicit(&ok_call_sum, ca[i].token, memory_order_relaxed);
            }
        } else if (rc != HIVE_EDEAD) {
            bad("hive_get of a call: %s: %s", hive_strerror(rc), hive_last_error());
        }
        expect_ok("hive_release", hive_release(h, r[i]));
    }
    L->ops[N_CALLS] += (uint64_t)made;
}

static void op_restart(loader_t *L)
{
    hive_ref_t r;
    int rc = hive_call(h, random_actor(L), M_RESTART, NULL, 0, NULL, &r);
    if (rc == HIVE_EDEAD)
        return;
    expect_ok("hive_call of a restart", rc);
    if (rc != HIVE_OK)
        return;
    const void *p;
    rc = hive_get(h, r, DEADLINE_NS, &p, NULL);
    if (rc != HIVE_ETASK && rc != HIVE_EDEAD)      /* a restart fails its own call */
        bad("hive_get of a restart: %s: %s", hive_strerror(rc), hive_last_error());
    expect_ok("hive_release", hive_release(h, r));
}

/* A fresh actor takes a random slot; the one it replaces is killed. */
static void op_kill(loader_t *L)
{
    uint64_t now = test_now_ns();
    if (now < L->next_kill_ns)
        return;                           /* paced: at most one per KILL_EVERY_MS */
    L->next_kill_ns = now + (uint64_t)KILL_EVERY_MS * 1000000u;
    hive_actor_t fresh;
    int rc = new_actor(&fresh);
    expect_ok("hive_actor_new", rc);
    if (rc != HIVE_OK)
        return;
    hive_actor_t old = { atomic_exchange(&actor_slot[rnd(&L->rng) % NACTORS], fresh.id) };
    expect_ok("hive_actor_kill", hive_actor_kill(h, old));
}

static void op_object(loader_t *L, bool create)
{
    size_t size = (size_t)(rnd(&L->rng) % (64u << 10)) & ~(size_t)7;
    uint64_t seed = rnd(&L->rng);
    hive_ref_t r;
    if (make_object(L, create, size, seed, &r))
        check_and_release(r, size, seed, create ? "created object" : "put object");
}

/* A new version of cell c; false if the store was full. */
static bool publish(unsigned c)
{
    version_t v = { .cell = c, .pub = atomic_fetch_add(&cell_pubs[c], 1) + 1 };
    v.check = mix(v.cell ^ mix(v.pub));
    hive_ref_t r;
    int rc = hive_put(h, &v, sizeof v, &r);
    if (rc == HIVE_EFULL)
        return false;
    expect_ok("hive_put of a version", rc);
    if (rc == HIVE_OK) {
        expect_ok("hive_cell_publish", hive_cell_publish(h, cells[c], r));
        expect_ok("hive_release", hive_release(h, r));
    }
    return true;
}

static void op_publish(loader_t *L)
{
    if (!publish((unsigned)(rnd(&L->rng) % NCELLS)))
        L->ops[N_FULL]++;
}

static void op_acquire(loader_t *L)
{
    unsigned c = (unsigned)(rnd(&L->rng) % NCELLS);
    hive_ref_t r;
    uint64_t seq;
    int rc = hive_cell_acquire(h, cells[c], &r, &seq);
    expect_ok("hive_cell_acquire", rc);
    if (rc != HIVE_OK)
        return;
    if (seq < L->cell_seen[c])
        bad("cell %u: seq went back from %llu to %llu", c, (unsigned long long)L->cell_seen[c],
            (unsigned long long)seq);
    L->cell_seen[c] = seq;
    const version_t *v;
    size_t n;
    rc = hive_get(h, r, 0, (const void **)&v, &n);
    if (rc != HIVE_OK)
        bad("hive_get of a version: %s: %s", hive_strerror(rc), hive_last_error());
    else if (n != sizeof *v || v->cell != c || v->check != mix(v->cell ^ mix(v->pub)))
        bad("cell %u: a version came back changed", c);
    expect_ok("hive_release", hive_release(h, r));
}

static void op_push(loader_t *L)
{
    enum { MAXN = 16 };
    item_t items[MAXN];
    size_t n = 1 + (size_t)(rnd(&L->rng) % MAXN);
    for (size_t i = 0; i < n; i++)
        item_fill(&items[i], L->id, L->ops[N_PUSHED] + i);
    if (n == 1)
        expect_ok("hive_replay_push", hive_replay_push(rb, &items[0]));
    else
        expect_ok("hive_replay_push_batch", hive_replay_push_batch(rb, items, n));
    L->ops[N_PUSHED] += n;
}

static void op_sample(loader_t *L)
{
    hive_replay_stats_t st;
    expect_ok("hive_replay_stats", hive_replay_stats(rb, &st));
    if (st.size < RB_BATCH)
        return;
    item_t items[RB_BATCH];
    uint64_t keys[RB_BATCH];
    double w[RB_BATCH], prio[RB_BATCH];
    int rc = hive_replay_sample(rb, RB_BATCH, &L->rng, items, keys, w, 0);
    expect_ok("hive_replay_sample", rc);
    if (rc != HIVE_OK)
        return;
    for (int i = 0; i < RB_BATCH; i++) {
        if (!item_ok(&items[i]))
            bad("replay: a sampled item is torn (key %llu)", (unsigned long long)keys[i]);
        if (!(w[i] > 0 && w[i] <= 1.0))
            bad("replay: weight %g outside (0, 1]", w[i]);
        prio[i] = 0.01 + (double)(rnd(&L->rng) % 1000) / 100.0;
    }
    rc = hive_replay_update_priorities(rb, keys, prio, RB_BATCH);
    if (rc < 0 || rc > RB_BATCH)
        bad("hive_replay_update_priorities: %d: %s", rc, hive_last_error());
    L->ops[N_SAMPLED] += RB_BATCH;
}

static void run_op(loader_t *L, int op)
{
    uint64_t kill_before = L->next_kill_ns;
    switch (op) {
    case OP_CHAIN:   op_chain(L); break;
    case OP_FANIN:   op_fanin(L); break;
    case OP_FORK:    op_fork(L); break;
    case OP_CANCEL:  op_cancel(L); break;
    case OP_CALLS:   op_calls(L); break;
    case OP_RESTART: op_restart(L); break;
    case OP_KILL:    op_kill(L); break;
    case OP_PUT:     op_object(L, false); break;
    case OP_CREATE:  op_object(L, true); break;
    case OP_PUBLISH: op_publish(L); break;
    case OP_ACQUIRE: op_acquire(L); break;
    case OP_PUSH:    op_push(L); break;
    default:         op_sample(L); break;
    }
    if (op != OP_KILL || L->next_kill_ns != kill_before)
        L->ops[op]++;
}

static void *loader_loop(void *arg)
{
    loader_t *L = arg;
    unsigned total = 0;
    for (int i = 0; i < NOPS; i++)
        total += op_weight[i];
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        keep_band(L);
        unsigned pick = (unsigned)(rnd(&L->rng) % total);
        int op = 0;
        while (pick >= op_weight[op])
            pick -= op_weight[op++];
        run_op(L, op);
    }
    while (L->nballast > 0)
        ballast_drop(L, L->nballast - 1);
    return NULL;
}

/* ------------------------------------------------------------ process probes */

/* Resident and resident-shared KiB from /proc/self/statm. */
static void rss_kib(long *resident, long *shared)
{
    long size = 0, r = -1, s = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld %ld", &size, &r, &s) != 3)
            r = s = -1;
        fclose(f);
    }
    long kib = sysconf(_SC_PAGESIZE) / 1024;
    *resident = r < 0 ? -1 : r * kib;
    *shared = s < 0 ? -1 : s * kib;
}

static int fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1;                         /* the directory's own fd */
}

static int thread_count(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}

typedef struct sample {
    double t_s;
    long   rss_kib;
    long   shared_kib;                    /* of which file-backed or shared (the store's memfd) */
    double fill;
} sample_t;

/* Least-squares slope over t, from sample `from` on, in KiB/min, of the
 * resident KiB (anon = 0), or of its anonymous part (anon = 1: resident
 * minus shared, i.e. the heap and stacks rather than the store). */
static double rss_slope(const sample_t *s, int from, int n, bool anon)
{
    double st = 0, sr = 0, stt = 0, str = 0;
    int m = n - from;
    if (m < 2)
        return 0;
    for (int i = from; i < n; i++) {
        double r = (double)(s[i].rss_kib - (anon ? s[i].shared_kib : 0));
        st += s[i].t_s;
        sr += r;
        stt += s[i].t_s * s[i].t_s;
        str += s[i].t_s * r;
    }
    double den = m * stt - st * st;
    return den == 0 ? 0 : (m * str - st * sr) / den * 60.0;
}

/* ------------------------------------------------------------ the run */

static unsigned soak_seconds(void)
{
    const char *s = getenv("SOAK_S");
    long v = s != NULL ? strtol(s, NULL, 10) : 30;
    return v > 0 ? (unsigned)v : 30;
}

/* Objects a dead actor leaves counted (its handle may stay findable). */
static uint64_t dead_actor_objects(void)
{
    hive_store_stats_t before, after;
    hive__store_drain(h);
    assert_int_equal(hive_store_stats(h, &before), HIVE_OK);
    hive_actor_t a;
    assert_int_equal(new_actor(&a), HIVE_OK);
    call_arg_t ca = { .token = 0, .value = 7 };
    hive_arg_t arg = HIVE_VAL(ca);
    hive_ref_t r;
    const void *p;
    assert_int_equal(hive_call(h, a, M_ADD, &arg, 1, NULL, &r), HIVE_OK);
    test_get_ok(h, r, DEADLINE_NS, &p, NULL);
    atomic_fetch_add(&ok_calls, 1);
    hive_release(h, r);
    assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
    /* its state goes back after its last turn: wait for the bytes (2 s at most) */
    uint64_t deadline = test_now_ns() + 2000000000ull;
    do {
        hive__store_drain(h);
        assert_int_equal(hive_store_stats(h, &after), HIVE_OK);
        if (after.used == before.used)
            break;
        test_sleep_ms(1);
    } while (test_now_ns() < deadline);
    return after.objects - before.objects;
}

static void sum_ops(uint64_t *total)
{
    memset(total, 0, NCOUNT * sizeof *total);
    for (int i = 0; i < LOADERS; i++)
        for (int k = 0; k < NCOUNT; k++)
            total[k] += loaders[i].ops[k];
}

static void test_soak(void **state)
{
    (void)state;
    unsigned secs = soak_seconds();
    bool verbose = getenv("SOAK_VERBOSE") != NULL;      /* a line per second */
    hive_config_t cfg = { .store_bytes = STORE_BYTES, .no_pin = 1 };
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    printf("soak: %u s, %u workers, %d loaders, %zu MiB store kept %.0f..%.0f%% full\n", secs,
           hive_num_workers(h), LOADERS, STORE_BYTES >> 20, BAND_LOW * 100, BAND_HIGH * 100);
    uint64_t per_dead = dead_actor_objects();

    for (int i = 0; i < NACTORS; i++) {
        hive_actor_t a;
        assert_int_equal(new_actor(&a), HIVE_OK);
        atomic_store(&actor_slot[i], a.id);
    }
    for (int i = 0; i < NCELLS; i++)
        assert_int_equal(hive_cell_new(h, (hive_ref_t){ 0 }, &cells[i]), HIVE_OK);
    for (unsigned i = 0; i < NCELLS; i++)
        assert_true(publish(i));                 /* never empty from here on */
    hive_replay_config_t rc = { .capacity = RB_CAPACITY, .item_size = sizeof(item_t),
                                .prioritized = 1, .alpha = 0.6, .beta = 0.4, .seed = 42 };
    assert_int_equal(hive_replay_new(h, &rc, &rb), HIVE_OK);

    for (unsigned i = 0; i < LOADERS; i++) {
        loaders[i].id = i + 1;
        loaders[i].rng = mix(test_now_ns() + i) | 1;
        loaders[i].buf = aligned_alloc(64, BALLAST_MAX_SZ);
        assert_non_null(loaders[i].buf);
        assert_int_equal(pthread_create(&loaders[i].thread, NULL, loader_loop, &loaders[i]), 0);
    }

    /* one sample a second; fds and threads at the end of warm-up and at the end */
    sample_t *samples = calloc(secs + 2, sizeof *samples);
    assert_non_null(samples);
    int nsamples = 0, warm_from = -1, fds_warm = -1, threads_warm = -1;
    uint64_t t0 = test_now_ns();
    for (unsigned s = 1; s <= secs; s++) {
        while (test_now_ns() < t0 + (uint64_t)s * 1000000000u)
            test_sleep_ms(20);
        hive_store_stats_t st;
        hive_store_stats(h, &st);
        sample_t *x = &samples[nsamples++];
        x->t_s = (double)(test_now_ns() - t0) / 1e9;
        x->fill = (double)st.used / (double)st.capacity;
        rss_kib(&x->rss_kib, &x->shared_kib);
        if (verbose)
            printf("soak: %4.0f s  RSS %ld KiB (shared %ld)  store %.0f%% full, %llu objects\n",
                   x->t_s, x->rss_kib, x->shared_kib, x->fill * 100, (unsigned long long)st.objects);
        if (warm_from < 0 && s >= (unsigned)ceil(secs * WARMUP_FRAC)) {
            warm_from = nsamples - 1;
            fds_warm = fd_count();
            threads_warm = thread_count();
        }
    }
    int fds_end = fd_count(), threads_end = thread_count();
    double elapsed = (double)(test_now_ns() - t0) / 1e9;
    atomic_store(&stop_flag, 1);
    for (unsigned i = 0; i < LOADERS; i++) {
        pthread_join(loaders[i].thread, NULL);
        free(loaders[i].buf);
    }

    /* release everything, kill every actor, wait for the frees */
    for (int i = 0; i < NCELLS; i++)
        assert_int_equal(hive_release(h, cells[i]), HIVE_OK);
    hive_replay_stats_t rs;
    assert_int_equal(hive_replay_stats(rb, &rs), HIVE_OK);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    for (int i = 0; i < NACTORS; i++)
        assert_int_equal(hive_actor_kill(h, (hive_actor_t){ atomic_load(&actor_slot[i]) }), HIVE_OK);
    uint64_t want_objects = per_dead * (uint64_t)atomic_load(&actors_created);
    hive_store_stats_t st;
    uint64_t deadline = test_now_ns() + 10000000000ull;
    do {
        hive__store_drain(h);
        assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
        if (st.used == 0 && st.objects == want_objects)
            break;
        test_sleep_ms(10);
    } while (test_now_ns() < deadline);

    /* report */
    uint64_t ops[NCOUNT];
    sum_ops(ops);
    printf("soak: ops per second by kind over %.1f s:\n", elapsed);
    for (int k = 0; k < NCOUNT; k++)
        printf("  %-16s %12llu  %10.1f/s\n", op_names[k], (unsigned long long)ops[k],
               (double)ops[k] / elapsed);
    double fmin = 1, fmax = 0, fsum = 0;
    for (int i = warm_from; i < nsamples; i++) {
        fmin = fmin < samples[i].fill ? fmin : samples[i].fill;
        fmax = fmax > samples[i].fill ? fmax : samples[i].fill;
        fsum += samples[i].fill;
    }
    double slope = rss_slope(samples, warm_from, nsamples, false);
    double anon_slope = rss_slope(samples, warm_from, nsamples, true);
    /* a step of S KiB at the middle of a window of T minutes has a
     * least-squares slope of 1.5 S / T: allow one of RSS_STEP_KIB */
    double window_min = (samples[nsamples - 1].t_s - samples[warm_from].t_s) / 60.0;
    double bound = RSS_SLOPE_MAX + (window_min > 0 ? 1.5 * RSS_STEP_KIB / window_min : 0);
    printf("soak: store fill after warm-up %.0f..%.0f%% (mean %.0f%%)\n", fmin * 100, fmax * 100,
           fsum / (nsamples - warm_from) * 100);
    printf("soak: RSS %ld KiB at warm-up, %ld KiB at the end; slope after warm-up %.1f KiB/min "
           "(bound %.0f; heap and stacks %.1f, store %.1f)\n", samples[warm_from].rss_kib,
           samples[nsamples - 1].rss_kib, slope, bound, anon_slope, slope - anon_slope);
    printf("soak: fds %d -> %d, threads %d -> %d\n", fds_warm, fds_end, threads_warm, threads_end);
    printf("soak: tasks ran %llu, results OK %llu; calls ran %llu, results OK %llu; lost or "
           "doubled: tasks %lld, calls %lld, cancelled tasks %ld/%ld\n",
           (unsigned long long)ran_tasks, (unsigned long long)ok_tasks,
           (unsigned long long)ran_calls, (unsigned long long)ok_calls,
           (long long)(ran_tasks - ok_tasks), (long long)(ran_calls - ok_calls),
           atomic_load(&cancel_lost), atomic_load(&cancel_doubled));
    printf("soak: cancelled slow tasks: %ld finished first, %ld HIVE_ECANCELED, %ld HIVE_ETASK\n",
           atomic_load(&cancel_ok), atomic_load(&cancel_cancelled), atomic_load(&cancel_etask));
    printf("soak: replay inserts %llu (pushed %llu), samples %llu (sampled %llu)\n",
           (unsigned long long)rs.inserts, (unsigned long long)ops[N_PUSHED],
           (unsigned long long)rs.samples, (unsigned long long)ops[N_SAMPLED]);
    printf("soak: at the end %zu bytes used, %llu objects (%llu dead actor handles x %llu)\n",
           st.used, (unsigned long long)st.objects, (unsigned long long)atomic_load(&actors_created),
           (unsigned long long)per_dead);

    assert_int_equal(hive_shutdown(h), HIVE_OK);
    h = NULL;
    printf("soak: actors built %ld, finalised %ld\n", atomic_load(&inits), atomic_load(&finis));

    /* every violated check, then one failure */
    char why[2048] = "";
    if (atomic_load(&bad_count) != 0)
        why_add(why, "%ld unexpected results; first: %s", atomic_load(&bad_count), bad_first);
    if (atomic_load(&bad_values) != 0)
        why_add(why, "%ld results with a wrong value", atomic_load(&bad_values));
    if (ran_tasks != ok_tasks || ran_task_sum != ok_task_sum)
        why_add(why, "tasks: %llu ran, %llu results OK (token sums %s)",
                (unsigned long long)ran_tasks, (unsigned long long)ok_tasks,
                ran_task_sum == ok_task_sum ? "equal" : "differ");
    if (ran_calls != ok_calls || ran_call_sum != ok_call_sum)
        why_add(why, "calls: %llu ran, %llu results OK (token sums %s)",
                (unsigned long long)ran_calls, (unsigned long long)ok_calls,
                ran_call_sum == ok_call_sum ? "equal" : "differ");
    if (atomic_load(&cancel_lost) != 0 || atomic_load(&cancel_doubled) != 0)
        why_add(why, "cancelled tasks and calls: %ld ran fewer times than their result says, "
                "%ld more than once", atomic_load(&cancel_lost), atomic_load(&cancel_doubled));
    if (atomic_load(&cancel_etask) != 0)
        why_add(why, "%ld cancelled running tasks failed with HIVE_ETASK instead of HIVE_ECANCELED",
                atomic_load(&cancel_etask));
    /* inserts count claimed keys: the items pushed, and the keys that
     * contended single pushes claimed in runs and hold, or gave up when a
     * lap passed them (hive/replay.h, "Runs of keys"), never fewer */
    if (rs.inserts < ops[N_PUSHED] || rs.samples != ops[N_SAMPLED])
        why_add(why, "replay counted %llu inserts and %llu samples, for %llu and %llu",
                (unsigned long long)rs.inserts, (unsigned long long)rs.samples,
                (unsigned long long)ops[N_PUSHED], (unsigned long long)ops[N_SAMPLED]);
    if (atomic_load(&inits) != atomic_load(&finis))
        why_add(why, "%ld actors built, %ld finalised", atomic_load(&inits), atomic_load(&finis));
    if (st.used != 0 || st.objects != want_objects)
        why_add(why, "store not empty at the end: %zu bytes, %llu objects (want 0 and %llu)",
                st.used, (unsigned long long)st.objects, (unsigned long long)want_objects);
    /* sanitizers keep freed memory (ASan's quarantine, TSan's shadow and
     * history): their RSS is reported, not judged; ASan checks for leaks */
    if (slope > bound && TEST_SCALE == 1)
        why_add(why, "RSS grows %.1f KiB/min after warm-up (bound %.0f)", slope, bound);
    if (fds_end != fds_warm)
        why_add(why, "open fds went from %d to %d", fds_warm, fds_end);
    if (threads_end != threads_warm)
        why_add(why, "threads went from %d to %d", threads_warm, threads_end);
    free(samples);
    if (why[0] != 0)
        fail_msg("%s", why);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_soak),
    };
    return cmocka_run_group_tests_name("soak", tests, NULL, NULL);
}
