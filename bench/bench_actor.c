/*
 * bench_actor.c - actors, named as Ray's microbenchmark so the figures can be
 * set beside Ray's published ones (about 2k sync and 10k async actor calls/s
 * per client), each against CAF, the C++ Actor Framework, in the same run
 * (the CAF side lives in shim.cc: see "peers with only a C++ API" in shim.h).
 *
 *   1_1_actor_calls_sync            one caller, one actor: call "increment", get the
 *                                   answer, one at a time
 *   1_1_actor_calls_async           one caller, one actor: 1000 calls, then get all
 *   1_n_actor_calls_async           one caller, n actors (2 x cores, at least 4): 1000
 *                                   calls round-robin over them, then get all
 *   n_n_actor_calls_async           2 caller threads, each with an actor of its own, batches
 *   n_n_actor_calls_with_arg_async  as above, every call with a 64-byte argument
 *   actor_pingpong                  actor A calls actor B and waits for the answer,
 *                                   1000 times inside A; items = round trips
 *   n_1_concurrent_actor_reads_async  hive only: 2 caller threads, one actor with
 *                                   max_concurrency = workers, batches of a read-only
 *                                   method (calls of one actor run at once)
 *
 * The actor is the counter of examples/state_manager.c: "increment" adds 1
 * and answers the new value; "add" takes 64 bytes (eight int64 words, inline
 * HIVE_BYTES; a 64-byte std::array message for CAF) and adds their sum, which
 * is 1. Every answer is checked against the value the caller expects: calls
 * from one caller run in order, so the k-th answer of an actor is its count
 * before the batch plus k. The first wrong value stops the benchmark with
 * hb_skip_with_error. The actors are made once and reused by every run; the
 * expected count of each is kept here.
 *
 * For actor_pingpong the hive side is A's method looping hive_call(B) +
 * hive_get (a blocking wait inside an actor, which hive turns into help on
 * the worker); the CAF side is two event-based actors, A sending "inc" and B
 * answering it, A checking each answer and sending the next, then answering
 * the caller. Time per round trip is the "rt_ns" column.
 *
 * Every hive_get has a timeout (20 s; 10 s inside the pinger) rather than
 * HIVE_FOREVER, so that a call that never completes shows as a failed row
 * (HIVE_ETIMEDOUT) instead of a hung run.
 *
 * Time is wall-clock time (use_manual_time, measured around each iteration),
 * as in bench_task.c, for every row: the work runs on other threads. One hive
 * engine serves every row: one worker per core, 1 GiB store, started on first
 * use; one CAF actor system likewise, with one scheduler thread per core.
 */
#include "shim.h"
#include "benches.h"

#include <hive.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GiB (1024ull * 1024 * 1024)
#define BATCH 1000                 /* calls per batch, as in Ray's script */
#define ROUND_TRIPS 1000           /* ping-pong round trips per iteration */
#define MAX_ACTORS 64
#define N_CALLERS 2                /* caller threads of the n_n families */
/* No wait is forever: a call that never completes fails its row with
 * HIVE_ETIMEDOUT instead of hanging the whole run. The pinger's own waits
 * give up first, so its call fails (HIVE_ETASK) before the client's wait. */
#define GET_TIMEOUT_NS   (20 * 1000000000ll)
#define INNER_TIMEOUT_NS (10 * 1000000000ll)

/* ------------------------------------------------------------ the actors */

typedef struct counter { int64_t count; } counter_t;
enum { C_INCREMENT, C_ADD };

static int counter_increment(void *self, hive_ctx_t *ctx)
{
    counter_t *c = self;
    c->count++;
    return hive_return(ctx, &c->count, sizeof c->count);
}

/* Add the sum of the eight words of the 64-byte argument. */
static int counter_add(void *self, hive_ctx_t *ctx)
{
    counter_t *c = self;
    size_t size;
    const int64_t *w = hive_arg(ctx, 0, &size);
    if (w == NULL || size != 8 * sizeof(int64_t))
        return 1;
    int64_t d = 0;
    for (int i = 0; i < 8; i++)
        d += w[i];
    c->count += d;
    return hive_return(ctx, &c->count, sizeof c->count);
}

static const hive_method_t counter_methods[] = {
    [C_INCREMENT] = { "increment", counter_increment, HIVE_PRIO_NORMAL },
    [C_ADD]       = { "add",       counter_add,       HIVE_PRIO_NORMAL },
};
static const hive_actor_class_t counter_class = {
    .name = "Counter", .size = sizeof(counter_t),
    .methods = counter_methods, .nmethods = 2,
};

/* The pinger holds a counter of its own; "ping n" makes n round trips to
 * it, checking every answer, and answers the counter's final value. */
typedef struct pinger {
    hive_actor_t counter;
    int64_t expect;                /* the counter's value as the pinger knows it */
} pinger_t;
enum { P_PING };

static int pinger_init(void *self, hive_ctx_t *ctx)
{
    pinger_t *p = self;
    const hive_actor_t *c = hive_arg(ctx, 0, NULL);
    p->counter = *c;
    return 0;
}

static int pinger_ping(void *self, hive_ctx_t *ctx)
{
    pinger_t *p = self;
    hive_t *h = hive_engine(ctx);
    int64_t n = *(const int64_t *)hive_arg(ctx, 0, NULL);
    for (int64_t i = 0; i < n; i++) {
        hive_ref_t r;
        const void *v;
        size_t size;
        if (hive_call(h, p->counter, C_INCREMENT, NULL, 0, NULL, &r) != HIVE_OK)
            return 1;
        int rc = hive_get(h, r, INNER_TIMEOUT_NS, &v, &size);
        int ok = rc == HIVE_OK && size == sizeof(int64_t) && *(const int64_t *)v == p->expect + 1;
        hive_release(h, r);
        if (!ok)
            return 1;
        p->expect++;
    }
    return hive_return(ctx, &p->expect, sizeof p->expect);
}

static const hive_method_t pinger_methods[] = {
    [P_PING] = { "ping", pinger_ping, HIVE_PRIO_NORMAL },
};
static const hive_actor_class_t pinger_class = {
    .name = "Pinger", .size = sizeof(pinger_t), .init = pinger_init,
    .methods = pinger_methods, .nmethods = 1,
};

/* ------------------------------------------------------------ shared setup */

/* The concurrent reader: "read" answers a value init set, and never writes. */
typedef struct reader { int64_t value; } reader_t;
#define READER_VALUE 42

static int reader_init(void *self, hive_ctx_t *ctx)
{
    (void)ctx;
    ((reader_t *)self)->value = READER_VALUE;
    return 0;
}

static int reader_read(void *self, hive_ctx_t *ctx)
{
    return hive_return(ctx, &((const reader_t *)self)->value, sizeof(int64_t));
}

static const hive_method_t reader_methods[] = { { "read", reader_read, HIVE_PRIO_NORMAL } };
static const hive_actor_class_t reader_class = {
    .name = "Reader", .size = sizeof(reader_t), .init = reader_init,
    .methods = reader_methods, .nmethods = 1,
};

static int n_actors;               /* of 1_n: 2 x cores, at least 4 */

/* hive: the engine, counters[0 .. n_actors + N_CALLERS) and a pinger. Slot
 * 0 serves the 1_1 rows, slots 0 .. n_actors-1 the 1_n row, and slot
 * n_actors + t caller thread t of the n_n rows; benchmarks run one at a
 * time, so each slot has one caller at a time and its expected count here
 * needs no lock. */
static hive_t *engine;
static hive_actor_t hive_counters[MAX_ACTORS];
static int64_t hive_expect[MAX_ACTORS];
static hive_actor_t hive_pinger;
static hive_actor_t hive_reader;   /* max_concurrency = workers */
static int64_t hive_ping_expect;
static pthread_once_t hive_once = PTHREAD_ONCE_INIT;

/* CAF: the same layout. */
static hb_caf_actor *caf_counters[MAX_ACTORS];
static int64_t caf_expect[MAX_ACTORS];
static hb_caf_actor *caf_pinger;
static int64_t caf_ping_expect;
static pthread_once_t caf_once = PTHREAD_ONCE_INIT;

static void count_actors(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    n_actors = cores > 2 ? (int)(2 * cores) : 4;
    if (n_actors > MAX_ACTORS - N_CALLERS)
        n_actors = MAX_ACTORS - N_CALLERS;
}

static void hive_start(void)
{
    count_actors();
    hive_config_t cfg = { .workers = 0, .store_bytes = 1 * GiB };
    if (hive_init(&cfg, &engine) != HIVE_OK) {
        fprintf(stderr, "bench_actor: hive_init: %s\n", hive_last_error());
        exit(1);
    }
    hive_actor_t pc;
    for (int i = 0; i < n_actors + N_CALLERS; i++)
        if (hive_actor_new(engine, &counter_class, NULL, 0, NULL, &hive_counters[i]) != HIVE_OK)
            goto fail;
    if (hive_actor_new(engine, &counter_class, NULL, 0, NULL, &pc) != HIVE_OK ||
        hive_actor_new(engine, &pinger_class, &HIVE_VAL(pc), 1, NULL, &hive_pinger) != HIVE_OK)
        goto fail;
    hive_actor_opts_t ro = { .max_concurrency = hive_num_workers(engine) };
    if (hive_actor_new(engine, &reader_class, NULL, 0, &ro, &hive_reader) != HIVE_OK)
        goto fail;
    return;
fail:
    fprintf(stderr, "bench_actor: hive_actor_new: %s\n", hive_last_error());
    exit(1);
}

static void caf_start(void)
{
    count_actors();
    for (int i = 0; i < n_actors + N_CALLERS; i++)
        if ((caf_counters[i] = hb_caf_counter_new()) == NULL)
            goto fail;
    if ((caf_pinger = hb_caf_pinger_new()) == NULL)
        goto fail;
    return;
fail:
    fprintf(stderr, "bench_actor: CAF spawn failed\n");
    exit(1);
}

static hive_t *eng(void)
{
    pthread_once(&hive_once, hive_start);
    return engine;
}

static void caf_ready(void)
{
    pthread_once(&caf_once, caf_start);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Report a failed hive call with its sentence and the call's name. */
static void fail(hb_state *s, const char *what, int rc)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s: %s", what, hive_strerror(rc), hive_last_error());
    hb_skip_with_error(s, msg);
}

static void wrong(hb_state *s, const char *impl, int slot, int64_t got, int64_t want)
{
    char msg[160];
    snprintf(msg, sizeof msg, "%s: actor %d answered %lld, expected %lld", impl, slot,
             (long long)got, (long long)want);
    hb_skip_with_error(s, msg);
}

/* The 64-byte argument: eight words summing to 1, so that "add" counts as
 * "increment" does. */
static const int64_t arg64[8] = { 3, -1, 4, -1, -5, 9, -2, -6 };
_Static_assert(sizeof arg64 == 64, "the argument is 64 bytes");

/* ------------------------------------------------------------ hive side */

/* One batch: n calls round-robin over slots first .. first+nslots-1
 * (with the 64-byte argument if with_arg), then a get of each in order,
 * every answer checked. 0 or -1 (after hb_skip_with_error). */
static int hive_batch(hb_state *s, hive_t *h, int first, int nslots, int with_arg)
{
    hive_ref_t refs[BATCH];
    hive_arg_t arg = HIVE_BYTES(arg64, sizeof arg64);
    unsigned method = with_arg ? C_ADD : C_INCREMENT;
    for (int i = 0; i < BATCH; i++) {
        int rc = hive_call(h, hive_counters[first + i % nslots], method, with_arg ? &arg : NULL,
                           with_arg ? 1 : 0, NULL, &refs[i]);
        if (rc != HIVE_OK) {
            fail(s, "hive_call", rc);
            while (i-- > 0)
                hive_release(h, refs[i]);
            return -1;
        }
    }
    int bad = 0;
    for (int i = 0; i < BATCH; i++) {
        const void *p;
        size_t size;
        int slot = first + i % nslots;
        if (bad) {                       /* failed already: drop the rest unread */
            hive_release(h, refs[i]);
            continue;
        }
        int rc = hive_get(h, refs[i], GET_TIMEOUT_NS, &p, &size);
        int64_t want = ++hive_expect[slot];
        if (rc != HIVE_OK) {
            fail(s, "hive_get", rc);
            bad = 1;
        } else if (size != sizeof(int64_t) || *(const int64_t *)p != want) {
            wrong(s, "hive", slot, size == sizeof(int64_t) ? *(const int64_t *)p : -1, want);
            bad = 1;
        }
        hive_release(h, refs[i]);
    }
    return bad ? -1 : 0;
}

static void bm_sync_hive(hb_state *s)
{
    hive_t *h = eng();
    while (hb_keep_running(s)) {
        double t0 = now_s();
        hive_ref_t r;
        const void *p;
        size_t size;
        int rc = hive_call(h, hive_counters[0], C_INCREMENT, NULL, 0, NULL, &r);
        if (rc != HIVE_OK) {
            fail(s, "hive_call", rc);
            return;
        }
        rc = hive_get(h, r, GET_TIMEOUT_NS, &p, &size);
        int64_t v = rc == HIVE_OK && size == sizeof v ? *(const int64_t *)p : -1;
        hive_release(h, r);
        hb_set_iteration_time(s, now_s() - t0);
        if (rc != HIVE_OK) {
            fail(s, "hive_get", rc);
            return;
        }
        if (v != ++hive_expect[0]) {
            wrong(s, "hive", 0, v, hive_expect[0]);
            return;
        }
    }
    hb_set_items_processed(s, hb_iterations(s));
}

/* The async rows: which slots a caller uses. */
static void slots_of(hb_state *s, int one_n, int *first, int *nslots)
{
    if (one_n) {
        *first = 0;
        *nslots = n_actors;
    } else if (hb_threads(s) > 1) {
        *first = n_actors + hb_thread_index(s);
        *nslots = 1;
    } else {
        *first = 0;
        *nslots = 1;
    }
}

static void async_hive(hb_state *s, int one_n, int with_arg)
{
    hive_t *h = eng();
    int first, nslots;
    slots_of(s, one_n, &first, &nslots);
    while (hb_keep_running(s)) {
        double t0 = now_s();
        if (hive_batch(s, h, first, nslots, with_arg) != 0)
            return;
        hb_set_iteration_time(s, now_s() - t0);
    }
    hb_set_items_processed(s, hb_iterations(s) * BATCH);
    if (one_n)
        hb_counter(s, "actors", nslots, HB_PLAIN);
}

static void bm_async_hive(hb_state *s)     { async_hive(s, 0, 0); }
static void bm_1n_async_hive(hb_state *s)  { async_hive(s, 1, 0); }
static void bm_arg_async_hive(hb_state *s) { async_hive(s, 0, 1); }

/* Batches of "read" on the concurrent reader, every answer checked. */
static void bm_concurrent_reads_hive(hb_state *s)
{
    hive_t *h = eng();
    hive_ref_t refs[BATCH];
    while (hb_keep_running(s)) {
        double t0 = now_s();
        for (int i = 0; i < BATCH; i++) {
            int rc = hive_call(h, hive_reader, 0, NULL, 0, NULL, &refs[i]);
            if (rc != HIVE_OK) {
                fail(s, "hive_call", rc);
                while (i-- > 0)
                    hive_release(h, refs[i]);
                return;
            }
        }
        int bad = 0;
        for (int i = 0; i < BATCH; i++) {
            const void *p;
            size_t size;
            int rc = bad ? HIVE_OK : hive_get(h, refs[i], GET_TIMEOUT_NS, &p, &size);
            if (!bad && rc != HIVE_OK) {
                fail(s, "hive_get", rc);
                bad = 1;
            } else if (!bad && (size != sizeof(int64_t) || *(const int64_t *)p != READER_VALUE)) {
                wrong(s, "hive", -1, size == sizeof(int64_t) ? *(const int64_t *)p : -1,
                      READER_VALUE);
                bad = 1;
            }
            hive_release(h, refs[i]);
        }
        if (bad)
            return;
        hb_set_iteration_time(s, now_s() - t0);
    }
    hb_set_items_processed(s, hb_iterations(s) * BATCH);
}

static void round_trip_counters(hb_state *s, double secs, int64_t trips)
{
    hb_set_items_processed(s, trips);
    hb_counter(s, "rt_ns", trips > 0 ? secs * 1e9 / (double)trips : 0, HB_PLAIN);
}

static void bm_pingpong_hive(hb_state *s)
{
    hive_t *h = eng();
    int64_t n = ROUND_TRIPS;
    double total = 0;
    while (hb_keep_running(s)) {
        double t0 = now_s();
        hive_ref_t r;
        const void *p;
        size_t size;
        int rc = hive_call(h, hive_pinger, P_PING, &HIVE_VAL(n), 1, NULL, &r);
        if (rc != HIVE_OK) {
            fail(s, "hive_call", rc);
            return;
        }
        rc = hive_get(h, r, GET_TIMEOUT_NS, &p, &size);
        int64_t v = rc == HIVE_OK && size == sizeof v ? *(const int64_t *)p : -1;
        hive_release(h, r);
        double dt = now_s() - t0;
        hb_set_iteration_time(s, dt);
        total += dt;
        if (rc != HIVE_OK) {
            fail(s, "hive_get (ping: a wrong answer fails the call)", rc);
            return;
        }
        hive_ping_expect += n;
        if (v != hive_ping_expect) {
            wrong(s, "hive", -1, v, hive_ping_expect);
            return;
        }
    }
    round_trip_counters(s, total, hb_iterations(s) * ROUND_TRIPS);
}

/* ------------------------------------------------------------ CAF side */

static void bm_sync_caf(hb_state *s)
{
    caf_ready();
    hb_caf_caller *c = hb_caf_caller_new();
    if (c == NULL) {
        hb_skip_with_error(s, "caf: scoped_actor failed");
        return;
    }
    while (hb_keep_running(s)) {
        double t0 = now_s();
        int64_t v = hb_caf_call_sync(c, caf_counters[0]);
        hb_set_iteration_time(s, now_s() - t0);
        if (v != ++caf_expect[0]) {
            wrong(s, "caf", 0, v, caf_expect[0]);
            break;
        }
    }
    hb_caf_caller_free(c);
    hb_set_items_processed(s, hb_iterations(s));
}

static void async_caf(hb_state *s, int one_n, int with_arg)
{
    caf_ready();
    int first, nslots;
    slots_of(s, one_n, &first, &nslots);
    hb_caf_caller *c = hb_caf_caller_new();
    if (c == NULL) {
        hb_skip_with_error(s, "caf: scoped_actor failed");
        return;
    }
    int64_t out[BATCH];
    while (hb_keep_running(s)) {
        double t0 = now_s();
        int rc = hb_caf_call_batch(c, &caf_counters[first], nslots, BATCH,
                                   with_arg ? arg64 : NULL, out);
        hb_set_iteration_time(s, now_s() - t0);
        if (rc != 0) {
            hb_skip_with_error(s, "caf: a request failed");
            break;
        }
        int bad = 0;
        for (int i = 0; i < BATCH && !bad; i++) {
            int slot = first + i % nslots;
            if (out[i] != ++caf_expect[slot]) {
                wrong(s, "caf", slot, out[i], caf_expect[slot]);
                bad = 1;
            }
        }
        if (bad)
            break;
    }
    hb_caf_caller_free(c);
    hb_set_items_processed(s, hb_iterations(s) * BATCH);
    if (one_n)
        hb_counter(s, "actors", nslots, HB_PLAIN);
}

static void bm_async_caf(hb_state *s)     { async_caf(s, 0, 0); }
static void bm_1n_async_caf(hb_state *s)  { async_caf(s, 1, 0); }
static void bm_arg_async_caf(hb_state *s) { async_caf(s, 0, 1); }

static void bm_pingpong_caf(hb_state *s)
{
    caf_ready();
    hb_caf_caller *c = hb_caf_caller_new();
    if (c == NULL) {
        hb_skip_with_error(s, "caf: scoped_actor failed");
        return;
    }
    double total = 0;
    while (hb_keep_running(s)) {
        double t0 = now_s();
        int64_t v = hb_caf_pingpong(c, caf_pinger, ROUND_TRIPS);
        double dt = now_s() - t0;
        hb_set_iteration_time(s, dt);
        total += dt;
        caf_ping_expect += ROUND_TRIPS;
        if (v != caf_ping_expect) {
            wrong(s, "caf", -1, v, caf_ping_expect);
            break;
        }
    }
    hb_caf_caller_free(c);
    round_trip_counters(s, total, hb_iterations(s) * ROUND_TRIPS);
}

/* Every row uses manual (wall-clock) time; see the top of the file. */
#define ACTOR_BENCH(nm, f, ...) { .name = nm, .fn = f, .use_manual_time = 1, __VA_ARGS__ }

const hb_bench hb_actor_benches[] = {
    ACTOR_BENCH("1_1_actor_calls_sync/hive", bm_sync_hive, .unit = HB_NS),
    ACTOR_BENCH("1_1_actor_calls_sync/caf", bm_sync_caf, .unit = HB_NS),
    ACTOR_BENCH("1_1_actor_calls_async/hive", bm_async_hive, .unit = HB_US),
    ACTOR_BENCH("1_1_actor_calls_async/caf", bm_async_caf, .unit = HB_US),
    ACTOR_BENCH("1_n_actor_calls_async/hive", bm_1n_async_hive, .unit = HB_US),
    ACTOR_BENCH("1_n_actor_calls_async/caf", bm_1n_async_caf, .unit = HB_US),
    ACTOR_BENCH("n_n_actor_calls_async/hive", bm_async_hive, .threads = N_CALLERS, .unit = HB_US),
    ACTOR_BENCH("n_n_actor_calls_async/caf", bm_async_caf, .threads = N_CALLERS, .unit = HB_US),
    ACTOR_BENCH("n_n_actor_calls_with_arg_async/hive", bm_arg_async_hive, .threads = N_CALLERS,
                .unit = HB_US),
    ACTOR_BENCH("n_n_actor_calls_with_arg_async/caf", bm_arg_async_caf, .threads = N_CALLERS,
                .unit = HB_US),
    ACTOR_BENCH("actor_pingpong/hive", bm_pingpong_hive, .unit = HB_US),
    ACTOR_BENCH("actor_pingpong/caf", bm_pingpong_caf, .unit = HB_US),
    ACTOR_BENCH("n_1_concurrent_actor_reads_async/hive", bm_concurrent_reads_hive,
                .threads = N_CALLERS, .unit = HB_US),
};
const size_t hb_actor_nbenches = sizeof hb_actor_benches / sizeof hb_actor_benches[0];
