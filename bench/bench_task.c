/*
 * bench_task.c - tasks, named as Ray's microbenchmark so the figures can be
 * set beside Ray's published ones (about 1k sync and 10k async tasks/s per
 * client), plus fork-join and spawn-and-wait against Intel TBB's task_group
 * in the same run (the TBB side lives in shim.cc: see "peers with only a C++
 * API" in shim.h).
 *
 *   single_client_tasks_sync         submit an empty task, hive_get it, one at a time
 *   single_client_tasks_async        submit 1000 empty tasks, then get all (items = tasks)
 *   multi_client_tasks_async         the same from 2 client threads at once
 *   single_client_tasks_and_get_batch  submit 1000, hive_wait for all, get each
 *   single_client_wait_1k_refs       submit 1000, one hive_wait(num_ready = 1000), release
 *   fib30                            fork-join fib(30): each task forks fib(n-1) and
 *                                    fib(n-2) and joins them; below n = 12 serial
 *   spawn_wait                       a task spawns 1000 empty children and waits for them
 *
 * On the hive side the client thread submits the root task (fib(30), or the
 * spawning task) and hive_gets it, which is in the time; the TBB side runs
 * the same from the client thread, which TBB turns into one of its workers.
 *
 * Units: as in Ray's script, "tasks_and_get_batch" and "wait_1k_refs" count
 * batches (items/s = batches/s, Ray reports these per call), with the task
 * rate as the "tasks" column; the other task families count tasks. fib30 is
 * compared by time.
 *
 * Time is wall-clock time (use_manual_time, measured here around each
 * iteration): the work runs on worker threads, so the client thread's CPU
 * time, which the library would otherwise divide items by, says nothing.
 *
 * Every benchmark checks what it gets (status codes, fib's value) and stops
 * with hb_skip_with_error on the first mismatch. One engine serves them all:
 * one worker per core, 1 GiB store, started on first use.
 */
#include "shim.h"
#include "benches.h"

#include <hive.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define GiB (1024ull * 1024 * 1024)
#define BATCH 1000                 /* tasks per batch, as in Ray's script */
#define FIB_N 30
#define FIB_CUTOFF 12              /* below this, fib is computed serially (same in the TBB peer) */
#define FIB_30 832040ull

static hive_t *engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void engine_start(void)
{
    hive_config_t cfg = { .workers = 0, .store_bytes = 1 * GiB };
    if (hive_init(&cfg, &engine) != HIVE_OK) {
        fprintf(stderr, "bench_task: hive_init: %s\n", hive_last_error());
        exit(1);
    }
}

static hive_t *eng(void)
{
    pthread_once(&engine_once, engine_start);
    return engine;
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

static int empty_task(hive_ctx_t *ctx)
{
    (void)ctx;
    return 0;
}

/* ------------------------------------------------------- Ray's task figures */

/* One sync round: submit an empty task and wait for its result. */
static int sync_round(hb_state *s, hive_t *h)
{
    hive_ref_t r;
    const void *p;
    int rc = hive_submit(h, empty_task, NULL, 0, NULL, &r);
    if (rc != HIVE_OK) {
        fail(s, "hive_submit", rc);
        return -1;
    }
    rc = hive_get(h, r, HIVE_FOREVER, &p, NULL);
    hive_release(h, r);
    if (rc != HIVE_OK) {
        fail(s, "hive_get", rc);
        return -1;
    }
    return 0;
}

static void bm_tasks_sync(hb_state *s)
{
    hive_t *h = eng();
    while (hb_keep_running(s)) {
        double t0 = now_s();
        if (sync_round(s, h) != 0)
            return;
        hb_set_iteration_time(s, now_s() - t0);
    }
    hb_set_items_processed(s, hb_iterations(s));
}

/* Submit BATCH empty tasks into refs; on failure release what was submitted. */
static int submit_batch(hb_state *s, hive_t *h, hive_ref_t *refs)
{
    for (int i = 0; i < BATCH; i++) {
        int rc = hive_submit(h, empty_task, NULL, 0, NULL, &refs[i]);
        if (rc != HIVE_OK) {
            fail(s, "hive_submit", rc);
            while (i-- > 0)
                hive_release(h, refs[i]);
            return -1;
        }
    }
    return 0;
}

/* Get every ref of the batch (checking each) and release it. */
static int get_batch(hb_state *s, hive_t *h, hive_ref_t *refs)
{
    int bad = HIVE_OK;
    for (int i = 0; i < BATCH; i++) {
        const void *p;
        int rc = hive_get(h, refs[i], HIVE_FOREVER, &p, NULL);
        if (rc != HIVE_OK && bad == HIVE_OK) {
            fail(s, "hive_get", rc);
            bad = rc;
        }
        hive_release(h, refs[i]);
    }
    return bad == HIVE_OK ? 0 : -1;
}

/* One hive_wait for the whole batch; it must report all BATCH ready. On
 * failure the batch is released. */
static int wait_batch(hb_state *s, hive_t *h, hive_ref_t *refs)
{
    int rc = hive_wait(h, refs, BATCH, BATCH, HIVE_FOREVER, NULL);
    if (rc == BATCH)
        return 0;
    if (rc < 0) {
        fail(s, "hive_wait", rc);
    } else {
        char msg[96];
        snprintf(msg, sizeof msg, "hive_wait: %d of %d ready", rc, BATCH);
        hb_skip_with_error(s, msg);
    }
    for (int i = 0; i < BATCH; i++)
        hive_release(h, refs[i]);
    return -1;
}

/* single_ and multi_client_tasks_async: each client thread runs its own
 * batches; the library sums the items of all threads. */
static void bm_tasks_async(hb_state *s)
{
    hive_t *h = eng();
    hive_ref_t refs[BATCH];
    while (hb_keep_running(s)) {
        double t0 = now_s();
        if (submit_batch(s, h, refs) != 0 || get_batch(s, h, refs) != 0)
            return;
        hb_set_iteration_time(s, now_s() - t0);
    }
    hb_set_items_processed(s, hb_iterations(s) * BATCH);
}

static void bm_tasks_and_get_batch(hb_state *s)
{
    hive_t *h = eng();
    hive_ref_t refs[BATCH];
    while (hb_keep_running(s)) {
        double t0 = now_s();
        if (submit_batch(s, h, refs) != 0 || wait_batch(s, h, refs) != 0 ||
            get_batch(s, h, refs) != 0)
            return;
        hb_set_iteration_time(s, now_s() - t0);
    }
    hb_set_items_processed(s, hb_iterations(s));
    hb_counter(s, "tasks", (double)(hb_iterations(s) * BATCH), HB_RATE);
}

static void bm_wait_1k_refs(hb_state *s)
{
    hive_t *h = eng();
    hive_ref_t refs[BATCH];
    /* untimed: one round that also gets every result, since the timed rounds
     * only wait (and a failed result counts as ready) */
    if (submit_batch(s, h, refs) != 0 || wait_batch(s, h, refs) != 0 || get_batch(s, h, refs) != 0)
        return;
    while (hb_keep_running(s)) {
        double t0 = now_s();
        if (submit_batch(s, h, refs) != 0 || wait_batch(s, h, refs) != 0)
            return;
        for (int i = 0; i < BATCH; i++)
            hive_release(h, refs[i]);
        hb_set_iteration_time(s, now_s() - t0);
    }
    hb_set_items_processed(s, hb_iterations(s));
    hb_counter(s, "tasks", (double)(hb_iterations(s) * BATCH), HB_RATE);
}

/* ------------------------------------------------------- fork-join fib(30) */

/* The serial leaf work, shared with the TBB peer (declared in shim.h) so
 * both sides run the very same machine code below the cutoff; noinline so
 * that neither call site gets a differently optimised copy. */
__attribute__((noinline)) uint64_t hb_fib_serial(int n)
{
    return n < 2 ? (uint64_t)n : hb_fib_serial(n - 1) + hb_fib_serial(n - 2);
}

/* fib(n): fork fib(n-1) and fib(n-2) as tasks, join both with hive_get.
 * A failed child fails the parent, up to the client's hive_get. */
static int fib_task(hive_ctx_t *ctx)
{
    int n = *(const int *)hive_arg(ctx, 0, NULL);
    uint64_t v = 0;
    if (n < FIB_CUTOFF) {
        v = hb_fib_serial(n);
    } else {
        hive_t *h = hive_engine(ctx);
        int m[2] = { n - 1, n - 2 };
        hive_ref_t r[2];
        if (hive_submit(h, fib_task, &HIVE_VAL(m[0]), 1, NULL, &r[0]) != HIVE_OK)
            return 1;
        if (hive_submit(h, fib_task, &HIVE_VAL(m[1]), 1, NULL, &r[1]) != HIVE_OK) {
            hive_release(h, r[0]);
            return 1;
        }
        int bad = 0;
        for (int i = 0; i < 2; i++) {
            const void *p;
            size_t size;
            if (hive_get(h, r[i], HIVE_FOREVER, &p, &size) == HIVE_OK && size == sizeof v)
                v += *(const uint64_t *)p;
            else
                bad = 1;
            hive_release(h, r[i]);
        }
        if (bad)
            return 1;
    }
    return hive_return(ctx, &v, sizeof v) == HIVE_OK ? 0 : 1;
}

static void bm_fib_hive(hb_state *s)
{
    hive_t *h = eng();
    int n = FIB_N;
    while (hb_keep_running(s)) {
        double t0 = now_s();
        hive_ref_t r;
        const void *p;
        int rc = hive_submit(h, fib_task, &HIVE_VAL(n), 1, NULL, &r);
        if (rc != HIVE_OK) {
            fail(s, "hive_submit", rc);
            return;
        }
        rc = hive_get(h, r, HIVE_FOREVER, &p, NULL);
        uint64_t v = rc == HIVE_OK ? *(const uint64_t *)p : 0;
        hive_release(h, r);
        hb_set_iteration_time(s, now_s() - t0);
        if (rc != HIVE_OK) {
            fail(s, "hive_get fib(30)", rc);
            return;
        }
        if (v != FIB_30) {
            hb_skip_with_error(s, "fib(30) is wrong");
            return;
        }
    }
}

static void bm_fib_tbb(hb_state *s)
{
    while (hb_keep_running(s)) {
        double t0 = now_s();
        uint64_t v = hb_tbb_fib(FIB_N, FIB_CUTOFF);
        hb_set_iteration_time(s, now_s() - t0);
        if (v != FIB_30) {
            hb_skip_with_error(s, "tbb fib(30) is wrong");
            return;
        }
    }
}

/* ------------------------------------------------------- spawn and wait */

/* Spawn BATCH empty children from this worker and hive_wait for all of them.
 * Its one inline argument, when nonzero, asks it to also hive_get every
 * child (the untimed check round); the timed rounds only wait. Its result is
 * the number of children that were ready and OK, as a uint32_t. */
static int spawn_wait_task(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    int check = *(const int *)hive_arg(ctx, 0, NULL);
    hive_ref_t refs[BATCH];
    int n = 0;
    for (; n < BATCH; n++)
        if (hive_submit(h, empty_task, NULL, 0, NULL, &refs[n]) != HIVE_OK)
            break;
    uint32_t ok = 0;
    if (n == BATCH && hive_wait(h, refs, BATCH, BATCH, HIVE_FOREVER, NULL) == BATCH)
        ok = BATCH;
    for (int i = 0; i < n; i++) {
        const void *p;
        if (check && hive_get(h, refs[i], 0, &p, NULL) != HIVE_OK)
            ok = 0;
        hive_release(h, refs[i]);
    }
    return hive_return(ctx, &ok, sizeof ok) == HIVE_OK ? 0 : 1;
}

/* Run one spawn_wait round from the client thread; 0 if all BATCH were OK. */
static int spawn_wait_round(hb_state *s, hive_t *h, int check)
{
    hive_ref_t r;
    const void *p;
    int rc = hive_submit(h, spawn_wait_task, &HIVE_VAL(check), 1, NULL, &r);
    if (rc != HIVE_OK) {
        fail(s, "hive_submit", rc);
        return -1;
    }
    rc = hive_get(h, r, HIVE_FOREVER, &p, NULL);
    uint32_t ok = rc == HIVE_OK ? *(const uint32_t *)p : 0;
    hive_release(h, r);
    if (rc != HIVE_OK) {
        fail(s, "hive_get", rc);
        return -1;
    }
    if (ok != BATCH) {
        hb_skip_with_error(s, "spawn_wait: a child failed or the wait fell short");
        return -1;
    }
    return 0;
}

static void bm_spawn_wait_hive(hb_state *s)
{
    hive_t *h = eng();
    if (spawn_wait_round(s, h, 1) != 0)   /* untimed check round */
        return;
    while (hb_keep_running(s)) {
        double t0 = now_s();
        if (spawn_wait_round(s, h, 0) != 0)
            return;
        hb_set_iteration_time(s, now_s() - t0);
    }
    hb_set_items_processed(s, hb_iterations(s) * BATCH);
}

static void bm_spawn_wait_tbb(hb_state *s)
{
    while (hb_keep_running(s)) {
        double t0 = now_s();
        hb_tbb_spawn_wait(BATCH);
        hb_set_iteration_time(s, now_s() - t0);
    }
    hb_set_items_processed(s, hb_iterations(s) * BATCH);
}

/* Every row uses manual (wall-clock) time; see the top of the file. */
#define TASK_BENCH(nm, f, ...) { .name = nm, .fn = f, .use_manual_time = 1, __VA_ARGS__ }

const hb_bench hb_task_benches[] = {
    TASK_BENCH("single_client_tasks_sync/hive", bm_tasks_sync, .unit = HB_NS),
    TASK_BENCH("single_client_tasks_async/hive", bm_tasks_async, .unit = HB_US),
    TASK_BENCH("multi_client_tasks_async/hive", bm_tasks_async, .threads = 2, .unit = HB_US),
    TASK_BENCH("single_client_tasks_and_get_batch/hive", bm_tasks_and_get_batch, .unit = HB_US),
    TASK_BENCH("single_client_wait_1k_refs/hive", bm_wait_1k_refs, .unit = HB_US),
    TASK_BENCH("fib30/hive", bm_fib_hive, .unit = HB_MS),
    TASK_BENCH("fib30/tbb", bm_fib_tbb, .unit = HB_MS),
    TASK_BENCH("spawn_wait/hive", bm_spawn_wait_hive, .unit = HB_US),
    TASK_BENCH("spawn_wait/tbb", bm_spawn_wait_tbb, .unit = HB_US),
};
const size_t hb_task_nbenches = sizeof hb_task_benches / sizeof hb_task_benches[0];
