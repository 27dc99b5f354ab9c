/*
 * bench_scale.c - how per-operation costs grow with the work held: the
 * "scale" family of the report (issue: costs that stay flat at millions).
 *
 *   scale_get/hive/objects:N      a random hive_get among N live 8-byte
 *                                 objects: the refs are shuffled up front
 *                                 and walked in order, so the walk itself
 *                                 reads sequentially (prefetched) and the
 *                                 cost is the lookup's own misses
 *   scale_get_many/hive/objects:N as scale_get, 64 refs per hive_get_many
 *                                 (time per ref: the batch lets hive
 *                                 prefetch, so misses overlap)
 *   scale_limit/load/objects:N    the machine's floor for that row: one
 *                                 random 8-byte load from an array of N
 *                                 128-byte records (hive's record
 *                                 footprint), walked the same way
 *   scale_put/hive/objects:N      hive_put + hive_release of one 8-byte
 *                                 object while N others stay live
 *   scale_submit/hive/queued:N    hive_submit of N tasks queued behind
 *                                 workers that are all busy (time per submit;
 *                                 cpu_ns_per_submit: the submitting thread's
 *                                 own CPU time per submit, page faults included)
 *   scale_actor_new/hive/actors:N hive_actor_new of N actors with 64 bytes
 *                                 of state (time per actor)
 *   scale_actor_call/hive/actors:N a sync call to a random one of N idle actors
 *
 * Each row also reports bytes_per_item: what one live object, queued task
 * or idle actor costs in memory, all included, measured by
 * build/bench/scale-mem (bench/scale_mem.c) in a fresh process: the growth
 * of its resident memory while it makes N of them, over N (in this process
 * the block pool would reuse what earlier rows touched). For actors, N
 * more than the process's first, which also sets up the shared lists of
 * free blocks (~0.8 MiB once; scale-mem prints it on stderr). Each
 * instance runs in an engine of its own (2 workers) shut down after it;
 * scale_actor_new also reports how long that shutdown took (shutdown_s).
 * `make bench` runs N up to 10^7 objects and 10^6 tasks and actors.
 */
#include "shim.h"
#include "benches.h"

#include <hive.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* bytes_per_item from a fresh process (see the top), or -1. */
static double memory_per(const char *kind, size_t n)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "build/bench/scale-mem %s %zu", kind, n);
    FILE *f = popen(cmd, "r");
    double b = -1;
    if (f != NULL) {
        if (fscanf(f, "%lf", &b) != 1)
            b = -1;
        pclose(f);
    }
    return b;
}

static hive_t *engine_for(hb_state *s, size_t store_bytes)
{
    hive_config_t cfg = { .workers = 2, .store_bytes = store_bytes };
    hive_t *h = NULL;
    if (hive_init(&cfg, &h) != HIVE_OK) {
        hb_skip_with_error(s, hive_last_error());
        return NULL;
    }
    return h;
}

static uint64_t mix(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 17;
}

/* N live 8-byte objects; NULL (and the benchmark skipped) if not. */
static hive_ref_t *fill(hb_state *s, hive_t *h, size_t n)
{
    hive_ref_t *refs = malloc(n * sizeof *refs);
    if (refs == NULL) {
        hb_skip_with_error(s, "no memory for the refs");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v = i;
        if (hive_put(h, &v, sizeof v, &refs[i]) != HIVE_OK) {
            hb_skip_with_error(s, hive_last_error());
            free(refs);
            return NULL;
        }
    }
    return refs;
}

static size_t store_for(size_t n)
{
    return n * 128 + ((size_t)256 << 20);
}

/* Shuffle n refs in place (Fisher-Yates): the walk order of a get row. */
static void shuffle(hive_ref_t *refs, size_t n, uint64_t seed)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(mix(&seed) % i);
        hive_ref_t t = refs[i - 1];
        refs[i - 1] = refs[j];
        refs[j] = t;
    }
}

static void bm_get(hb_state *s)
{
    size_t n = (size_t)hb_range(s, 0);
    hive_t *h = engine_for(s, store_for(n));
    if (h == NULL)
        return;
    hive_ref_t *refs = fill(s, h, n);
    if (refs == NULL) {
        hive_shutdown(h);
        return;
    }
    shuffle(refs, n, 42);
    size_t i = 0;
    uint64_t sum = 0;
    while (hb_keep_running(s)) {
        const void *p;
        size_t sz;
        hive_get(h, refs[i], 0, &p, &sz);
        sum += *(const uint64_t *)p;
        if (++i == n)
            i = 0;
    }
    __asm__ __volatile__("" ::"r"(sum));
    hb_set_items_processed(s, hb_iterations(s));
    hb_counter(s, "bytes_per_item", memory_per("objects", n), HB_PLAIN);
    free(refs);
    hive_shutdown(h);
}

static void bm_get_many(hb_state *s)
{
    enum { BATCH = 64 };
    size_t n = (size_t)hb_range(s, 0);
    hive_t *h = engine_for(s, store_for(n));
    if (h == NULL)
        return;
    hive_ref_t *refs = fill(s, h, n);
    if (refs == NULL) {
        hive_shutdown(h);
        return;
    }
    shuffle(refs, n, 42);
    size_t i = 0;
    uint64_t sum = 0;
    while (hb_keep_running(s)) {
        const void *p[BATCH];
        if (i + BATCH > n)
            i = 0;
        if (hive_get_many(h, refs + i, BATCH, 0, p, NULL, NULL) == HIVE_OK)
            sum += *(const uint64_t *)p[0] + *(const uint64_t *)p[BATCH - 1];
        i += BATCH;
    }
    __asm__ __volatile__("" ::"r"(sum));
    hb_set_items_processed(s, hb_iterations(s) * BATCH);
    free(refs);
    hive_shutdown(h);
}

/* The floor of scale_get: N records of 128 bytes (touched, so resident;
 * on 2 MiB pages where the kernel gives them, as hive asks for its
 * records), their indices shuffled and walked in order as bm_get walks its
 * refs, one 8-byte load from each. What hive adds above this is its own
 * misses. */
enum { RECORD = 128 };
#define HUGE_PAGE ((size_t)2 << 20)

static void bm_limit_load(hb_state *s)
{
    size_t n = (size_t)hb_range(s, 0);
    size_t bytes = (n * RECORD + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    char *recs = aligned_alloc(HUGE_PAGE, bytes);
    if (recs != NULL)
        madvise(recs, bytes, MADV_HUGEPAGE);
    hive_ref_t *order = malloc(n * sizeof *order);   /* same element size as bm_get's refs */
    if (recs == NULL || order == NULL) {
        hb_skip_with_error(s, "no memory for the records");
        free(recs);
        free(order);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v = i;
        memcpy(recs + i * RECORD, &v, sizeof v);
        order[i].id = i;
    }
    shuffle(order, n, 42);
    size_t i = 0;
    uint64_t sum = 0;
    while (hb_keep_running(s)) {
        uint64_t v;
        memcpy(&v, recs + order[i].id * RECORD, sizeof v);
        sum += v;
        if (++i == n)
            i = 0;
    }
    __asm__ __volatile__("" ::"r"(sum));
    hb_set_items_processed(s, hb_iterations(s));
    free(order);
    free(recs);
}

static void bm_put(hb_state *s)
{
    size_t n = (size_t)hb_range(s, 0);
    hive_t *h = engine_for(s, store_for(n));
    if (h == NULL)
        return;
    hive_ref_t *refs = fill(s, h, n);
    if (refs == NULL) {
        hive_shutdown(h);
        return;
    }
    uint64_t v = 7;
    while (hb_keep_running(s)) {
        hive_ref_t r;
        hive_put(h, &v, sizeof v, &r);
        hive_release(h, r);
    }
    hb_set_items_processed(s, hb_iterations(s));
    free(refs);
    hive_shutdown(h);
}

static int noop(hive_ctx_t *ctx)
{
    (void)ctx;
    return 0;
}

/* Keeps a worker occupied until the gate opens: not waiting in hive_get
 * (which would help by running the queued tasks) and not spinning either,
 * which on a 2-core machine would take the submitting thread's core away
 * half the time and charge that wait to hive_submit. It naps. */
static _Atomic int gate_open;

static int hold(hive_ctx_t *ctx)
{
    (void)ctx;
    /* acquire: nothing to see; just the flag */
    while (!atomic_load_explicit(&gate_open, memory_order_acquire))
        usleep(100);
    return 0;
}

/* The calling thread's CPU time (user + system: its page faults count):
 * on a machine shared with other work, the submitter's own cost, which its
 * wall time only shows with the time it waited for a core added in. */
static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void bm_submit(hb_state *s)
{
    size_t n = (size_t)hb_range(s, 0);
    double cpu = 0;
    size_t rounds = 0;
    while (hb_keep_running(s)) {
        hb_pause(s);
        hive_t *h = engine_for(s, (size_t)256 << 20);
        if (h == NULL)
            return;
        hive_ref_t held[2], *res = malloc(n * sizeof *res);
        atomic_store(&gate_open, 0);
        for (int w = 0; w < 2; w++)
            hive_submit(h, hold, NULL, 0, NULL, &held[w]);
        usleep(20000);                      /* both workers have taken a hold task */
        hb_resume(s);
        double t0 = now_s(), c0 = thread_cpu_s();
        for (size_t i = 0; i < n; i++)
            if (hive_submit(h, noop, NULL, 0, NULL, &res[i]) != HIVE_OK) {
                hb_skip_with_error(s, hive_last_error());
                break;
            }
        double t1 = now_s();
        cpu += thread_cpu_s() - c0;
        rounds++;
        hb_pause(s);
        hb_set_iteration_time(s, (t1 - t0) / (double)n);
        atomic_store(&gate_open, 1);
        for (size_t i = 0; i < n; i++)
            hive_release(h, res[i]);
        hive_release(h, held[0]);
        hive_release(h, held[1]);
        hive_shutdown(h);
        free(res);
        hb_resume(s);
    }
    hb_set_items_processed(s, hb_iterations(s));
    if (rounds != 0)
        hb_counter(s, "cpu_ns_per_submit", cpu / (double)rounds / (double)n * 1e9, HB_PLAIN);
    hb_counter(s, "bytes_per_item", memory_per("tasks", n), HB_PLAIN);
}

typedef struct state64 { char bytes[64]; } state64_t;

static int ping(void *self, hive_ctx_t *ctx)
{
    state64_t *st = self;
    st->bytes[0]++;
    return hive_return(ctx, st->bytes, 1);
}

static const hive_method_t methods[] = { { .name = "ping", .fn = ping } };
static const hive_actor_class_t cls64 = { .name = "idle64", .size = sizeof(state64_t),
                                          .methods = methods, .nmethods = 1 };

static hive_actor_t *spawn_actors(hb_state *s, hive_t *h, size_t n, double *per)
{
    hive_actor_t *a = malloc(n * sizeof *a);
    double t0 = now_s();
    for (size_t i = 0; i < n; i++)
        if (hive_actor_new(h, &cls64, NULL, 0, NULL, &a[i]) != HIVE_OK) {
            hb_skip_with_error(s, hive_last_error());
            free(a);
            return NULL;
        }
    *per = (now_s() - t0) / (double)n;
    return a;
}

static void bm_actor_new(hb_state *s)
{
    size_t n = (size_t)hb_range(s, 0);
    double per = 0, down = 0;
    while (hb_keep_running(s)) {
        hive_t *h = engine_for(s, store_for(n));
        if (h == NULL)
            return;
        hive_actor_t *a = spawn_actors(s, h, n, &per);
        hb_set_iteration_time(s, per);
        double t0 = now_s();
        hive_shutdown(h);
        down = now_s() - t0;
        free(a);
    }
    hb_set_items_processed(s, hb_iterations(s));
    hb_counter(s, "bytes_per_item", memory_per("actors", n), HB_PLAIN);
    hb_counter(s, "shutdown_s", down, HB_PLAIN);
}

static void bm_actor_call(hb_state *s)
{
    size_t n = (size_t)hb_range(s, 0);
    double per;
    hive_t *h = engine_for(s, store_for(n));
    if (h == NULL)
        return;
    hive_actor_t *a = spawn_actors(s, h, n, &per);
    if (a == NULL) {
        hive_shutdown(h);
        return;
    }
    uint64_t x = 9;
    while (hb_keep_running(s)) {
        hive_ref_t r;
        const void *p;
        hive_call(h, a[mix(&x) % n], 0, NULL, 0, NULL, &r);
        hive_get(h, r, HIVE_FOREVER, &p, NULL);
        hive_release(h, r);
    }
    hb_set_items_processed(s, hb_iterations(s));
    free(a);
    hive_shutdown(h);
}

static const int64_t objects[] = { 1000, 100000, 1000000, 10000000 };
static const int64_t queued[] = { 1000, 100000, 1000000 };
static const int64_t actors[] = { 1, 1000, 100000, 1000000 };

const hb_bench hb_scale_benches[] = {
    { .name = "scale_get/hive", .fn = bm_get, .args = objects, .nargs = 4, .arg_name = "objects" },
    { .name = "scale_get_many/hive", .fn = bm_get_many, .args = objects, .nargs = 4,
      .arg_name = "objects" },
    { .name = "scale_limit/load", .fn = bm_limit_load, .args = objects, .nargs = 4,
      .arg_name = "objects" },
    { .name = "scale_put/hive", .fn = bm_put, .args = objects, .nargs = 4, .arg_name = "objects" },
    { .name = "scale_submit/hive", .fn = bm_submit, .args = queued, .nargs = 3, .arg_name = "queued",
      .use_manual_time = 1, .iterations = 2 },
    { .name = "scale_actor_new/hive", .fn = bm_actor_new, .args = actors + 1, .nargs = 3,
      .arg_name = "actors", .use_manual_time = 1, .iterations = 1 },
    { .name = "scale_actor_call/hive", .fn = bm_actor_call, .args = actors, .nargs = 4,
      .arg_name = "actors" },
};
const size_t hb_scale_nbenches = sizeof hb_scale_benches / sizeof hb_scale_benches[0];
