/*
 * bench_scale_all.c - the scale issue's "all at once" row at full size:
 * one engine (2 workers) holding 10,000,000 live 8-byte objects,
 * 1,000,000 tasks queued behind busy workers and 1,000,000 idle actors
 * with 64 bytes of state, all at the same time (tests/test_scale.c runs a
 * tenth of it in `make test`).
 *
 *   scale_all/hive/objects:N   N objects, N/10 tasks, N/10 actors
 *
 * The row's time is the whole run: filling, queueing, running the tasks,
 * one call to every actor, reading every object back, releasing and
 * shutting down. It checks as it goes and reports an error instead of a
 * time if anything is off: every object reads back its own value, every
 * task runs exactly once and returns its argument, every actor answers its
 * call (state 64 B, first call answers 1). Counters: put_ns, submit_ns,
 * actor_new_ns and get_ns (per item, with everything else held),
 * shutdown_s, and rss_gb, the process's resident memory at the peak.
 */
#include "shim.h"
#include "benches.h"

#include <hive.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* resident memory of this process in GiB (from /proc/self/statm), or -1 */
static double rss_gb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = -1, res = -1;
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2)
            res = -1;
        fclose(f);
    }
    return res < 0 ? -1 : (double)res * (double)sysconf(_SC_PAGESIZE) / (double)(1ull << 30);
}

static _Atomic int gate_open;
static _Atomic uint64_t ran;

static int hold(hive_ctx_t *ctx)
{
    (void)ctx;
    /* acquire: only the flag matters */
    while (!atomic_load_explicit(&gate_open, memory_order_acquire))
        sched_yield();
    return 0;
}

static int echo_arg(hive_ctx_t *ctx)
{
    size_t n;
    const uint64_t *v = hive_arg(ctx, 0, &n);
    atomic_fetch_add_explicit(&ran, 1, memory_order_relaxed);   /* a count, read after the gets */
    return hive_return(ctx, v, sizeof *v);
}

typedef struct { uint64_t calls; char pad[56]; } state64_t;

static int bump(void *self, hive_ctx_t *ctx)
{
    state64_t *st = self;
    st->calls++;
    return hive_return(ctx, &st->calls, sizeof st->calls);
}

static const hive_method_t methods[] = { { .name = "bump", .fn = bump } };
static const hive_actor_class_t cls = { .name = "idle64", .size = sizeof(state64_t),
                                        .methods = methods, .nmethods = 1 };

typedef struct {
    size_t       nobj, ntask, nact;
    hive_ref_t  *objs, *tasks, *calls;
    hive_actor_t *actors;
    double       put_ns, submit_ns, new_ns, get_ns, peak_gb;
} world_t;

static int fail(hb_state *s, const char *what)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s", what, hive_last_error());
    hb_skip_with_error(s, msg);
    return -1;
}

static int fill(hb_state *s, hive_t *h, world_t *w)
{
    double t0 = now_s();
    for (size_t i = 0; i < w->nobj; i++) {
        uint64_t v = i;
        if (hive_put(h, &v, sizeof v, &w->objs[i]) != HIVE_OK)
            return fail(s, "put");
    }
    double t1 = now_s();
    for (size_t i = 0; i < w->nact; i++)
        if (hive_actor_new(h, &cls, NULL, 0, NULL, &w->actors[i]) != HIVE_OK)
            return fail(s, "actor_new");
    double t2 = now_s();
    hive_ref_t held[2];
    atomic_store(&gate_open, 0);
    for (int k = 0; k < 2; k++)
        if (hive_submit(h, hold, NULL, 0, NULL, &held[k]) != HIVE_OK)
            return fail(s, "submit hold");
    usleep(20000);                        /* both workers have taken a hold task */
    double t3 = now_s();
    for (size_t i = 0; i < w->ntask; i++) {
        uint64_t v = i;
        hive_arg_t a = HIVE_BYTES(&v, sizeof v);
        if (hive_submit(h, echo_arg, &a, 1, NULL, &w->tasks[i]) != HIVE_OK)
            return fail(s, "submit");
    }
    double t4 = now_s();
    w->put_ns = (t1 - t0) * 1e9 / (double)w->nobj;
    w->new_ns = (t2 - t1) * 1e9 / (double)w->nact;
    w->submit_ns = (t4 - t3) * 1e9 / (double)w->ntask;
    w->peak_gb = rss_gb();
    atomic_store(&gate_open, 1);
    hive_release(h, held[0]);
    hive_release(h, held[1]);
    return 0;
}

static int check(hb_state *s, hive_t *h, world_t *w)
{
    for (size_t i = 0; i < w->nact; i++)
        if (hive_call(h, w->actors[i], 0, NULL, 0, NULL, &w->calls[i]) != HIVE_OK)
            return fail(s, "call");
    const void *p;
    size_t n;
    for (size_t i = 0; i < w->ntask; i++) {
        if (hive_get(h, w->tasks[i], HIVE_FOREVER, &p, &n) != HIVE_OK)
            return fail(s, "get task");
        if (n != 8 || *(const uint64_t *)p != i) {
            hb_skip_with_error(s, "a task returned another task's value");
            return -1;
        }
    }
    for (size_t i = 0; i < w->nact; i++) {
        if (hive_get(h, w->calls[i], HIVE_FOREVER, &p, &n) != HIVE_OK)
            return fail(s, "get call");
        if (n != 8 || *(const uint64_t *)p != 1) {
            hb_skip_with_error(s, "an actor's first call did not answer 1");
            return -1;
        }
    }
    if (atomic_load(&ran) != w->ntask) {
        hb_skip_with_error(s, "tasks did not run exactly once each");
        return -1;
    }
    double t0 = now_s();
    uint64_t x = 7;
    for (size_t k = 0; k < w->nobj; k++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t i = (size_t)(x >> 17) % w->nobj;
        if (hive_get(h, w->objs[i], 0, &p, &n) != HIVE_OK)
            return fail(s, "get object");
        if (n != 8 || *(const uint64_t *)p != i) {
            hb_skip_with_error(s, "an object read back another's value");
            return -1;
        }
    }
    w->get_ns = (now_s() - t0) * 1e9 / (double)w->nobj;
    return 0;
}

static void release_all(hive_t *h, world_t *w)
{
    for (size_t i = 0; i < w->nobj; i++)
        hive_release(h, w->objs[i]);
    for (size_t i = 0; i < w->ntask; i++)
        hive_release(h, w->tasks[i]);
    for (size_t i = 0; i < w->nact; i++)
        hive_release(h, w->calls[i]);
}

static void bm_all(hb_state *s)
{
    world_t w = { .nobj = (size_t)hb_range(s, 0) };
    w.ntask = w.nact = w.nobj / 10;
    w.objs = calloc(w.nobj, sizeof *w.objs);
    w.tasks = calloc(w.ntask, sizeof *w.tasks);
    w.calls = calloc(w.nact, sizeof *w.calls);
    w.actors = calloc(w.nact, sizeof *w.actors);
    double down = 0;
    if (!w.objs || !w.tasks || !w.calls || !w.actors) {
        hb_skip_with_error(s, "no memory for the handles");
        goto out;
    }
    while (hb_keep_running(s)) {
        atomic_store(&ran, 0);
        /* objects, the tasks' results, the actors' state: 256 B each is room to spare */
        hive_config_t cfg = { .workers = 2, .store_bytes = (w.nobj + 2 * w.nact) * 256 + (256u << 20) };
        hive_t *h = NULL;
        if (hive_init(&cfg, &h) != HIVE_OK) {
            fail(s, "hive_init");
            goto out;
        }
        double t0 = now_s();
        int rc = fill(s, h, &w);
        if (rc == 0)
            rc = check(s, h, &w);
        if (rc == 0)
            release_all(h, &w);
        atomic_store(&gate_open, 1);          /* a failed fill may leave the holds waiting */
        double t1 = now_s();
        hive_shutdown(h);
        down = now_s() - t1;
        hb_set_iteration_time(s, now_s() - t0);
        if (rc != 0)
            goto out;
    }
    hb_counter(s, "put_ns", w.put_ns, HB_PLAIN);
    hb_counter(s, "submit_ns", w.submit_ns, HB_PLAIN);
    hb_counter(s, "actor_new_ns", w.new_ns, HB_PLAIN);
    hb_counter(s, "get_ns", w.get_ns, HB_PLAIN);
    hb_counter(s, "shutdown_s", down, HB_PLAIN);
    hb_counter(s, "rss_gb", w.peak_gb, HB_PLAIN);
out:
    free(w.objs);
    free(w.tasks);
    free(w.calls);
    free(w.actors);
}

static const int64_t sizes[] = { 10000000 };

const hb_bench hb_scale_all_benches[] = {
    { .name = "scale_all/hive", .fn = bm_all, .args = sizes, .nargs = 1, .arg_name = "objects",
      .use_manual_time = 1, .iterations = 1 },
};
const size_t hb_scale_all_nbenches = sizeof hb_scale_all_benches / sizeof hb_scale_all_benches[0];
