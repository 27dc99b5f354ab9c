/*
 * bench_envpool.c - the environment pool (src/rl/envpool.c) against the
 * pthread program a C user would write for the same job.
 *
 *   hive     hive_envpool_step (sync) or send/recv (async) on an engine
 *            with one worker per core; the driver is a user thread.
 *   pthread  sync: one thread per core (the driver is thread 0), each
 *            stepping its contiguous slice of the envs, a barrier per
 *            batch. async: one thread per core owning its slice, a queue
 *            (mutex + condition) of envs to step per thread and one shared
 *            queue of results; the driver waits for batch_size results and
 *            sends them straight back (EnvPool's loop).
 *
 * Environments: CartPole-v1 and the synthetic env at 1, 10 and 100 us per
 * step, and at 10 us drawn from a heavy-tailed (Pareto 1.5) distribution.
 * num_envs is 2x and 4x the workers; async batches are half the envs.
 *
 *   python   (sync rows) bench/peer_vecenv.py: gym's AsyncVectorEnv / SB3's
 *            SubprocVecEnv pattern - one multiprocessing worker per core,
 *            actions through pipes, observations in shared numpy memory -
 *            stepping the same C environments through ctypes on
 *            build/libhive.so, under Debian's python3 and numpy.
 *
 * Families: envpool_<env>_<sync|async>/<impl>/envs_per_worker:<k>.
 * items_per_second counts env steps. Every row prints `efficiency` =
 * steps/s / (workers x the single-thread raw steps/s of the same env,
 * measured once per env by stepping one env on the calling thread, in that
 * thread's CPU time so that preemption is not counted), the fraction of
 * the machine's stepping capacity the sampler delivers. Wall time
 * (manual): a waiting thread uses no CPU, so CPU time would flatter the
 * peer. Beside it, `cpu_eff` = steps / (CPU seconds used by the process
 * and its children x raw steps/s): what the run made of the CPU it got,
 * the figure that still means something on a machine loaded by others
 * (where the wall-clock efficiency mostly measures the share of the cores
 * a run was given). The python peer's CPU includes its start (the
 * interpreter and numpy imports), so its cpu_eff is low by that much.
 * `caller_eff` = steps / (CPU seconds of the driving thread x raw): for a
 * batch the caller steps alone (CartPole), how close its loop comes to the
 * raw one; above 1 when other threads stepped too. A timed iteration is a
 * group of batches of about GROUP_NS of single-thread stepping (one batch
 * at >= 10 us a step), for hive and the pthread peer alike: the clock
 * reads and the harness around a 0.2 us CartPole batch are not part of
 * either sampler. `eff_p10` is the efficiency of the 10th-percentile
 * group (its steps in its wall time): the groups in which no thread of
 * the sampler was preempted, so on a machine loaded by others it still
 * shows what the sampler does when it has the cores (hive and pthread rows
 * alike; at >= 10 us a step a sync group is one batch, and an async group
 * is 8 batches at least: a recv may find its batch stepped during the
 * last one, so a group of a few batches would be no sample).
 */
#include "shim.h"
#include "benches.h"

#include <hive.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

typedef struct env_cfg {
    const char                 *name;
    const hive_env_class_t     *cls;
    hive_env_synthetic_config_t syn;      /* synthetic only */
    double                      raw;      /* single-thread steps/s, measured once */
} env_cfg_t;

enum { E_CARTPOLE, E_SYN1, E_SYN10, E_SYN100, E_HEAVY10, E_COUNT };
static env_cfg_t envs[E_COUNT] = {
    [E_CARTPOLE] = { "cartpole", &hive_env_cartpole, { 0 }, 0 },
    [E_SYN1]     = { "syn1us", &hive_env_synthetic, { 1000, 1000, 0 }, 0 },
    [E_SYN10]    = { "syn10us", &hive_env_synthetic, { 10000, 1000, 0 }, 0 },
    [E_SYN100]   = { "syn100us", &hive_env_synthetic, { 100000, 1000, 0 }, 0 },
    [E_HEAVY10]  = { "heavy10us", &hive_env_synthetic, { 10000, 1000, 1 }, 0 },
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const void *cfg_of(const env_cfg_t *e)
{
    return e->cls == &hive_env_synthetic ? &e->syn : NULL;
}

/* One env's state on this thread's heap, init'ed and reset. */
static void *local_env(const env_cfg_t *e, unsigned id, float *obs)
{
    void *st = aligned_alloc(64, (e->cls->state_size + 63) & ~(size_t)63);
    memset(st, 0, e->cls->state_size);
    if (e->cls->init)
        e->cls->init(st, cfg_of(e), id);
    e->cls->reset(st, 0x5eed + id, obs);
    return st;
}

/* Step one env with action a, auto-resetting as the pool does. */
static inline void step_local(const env_cfg_t *e, void *st, int32_t a, float *obs, uint64_t *ep)
{
    float r;
    int d;
    e->cls->step(st, &a, obs, &r, &d);
    if (d)
        e->cls->reset(st, ++*ep, obs);
}

/* CPU seconds of the calling thread: the raw rate is measured in it, so
 * that time this thread was preempted (a loaded machine) is not counted
 * as stepping. */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Single-thread raw steps/s: the best of three runs of >= 20 ms of CPU. */
static double raw_rate(env_cfg_t *e)
{
    if (e->raw > 0)
        return e->raw;
    float obs[4];
    void *st = local_env(e, 0, obs);
    uint64_t ep = 0, n = 64;
    double best = 0;
    for (int rep = 0; rep < 3;) {
        double t0 = thread_cpu_s();
        for (uint64_t i = 0; i < n; i++)
            step_local(e, st, (int32_t)(i & 1), obs, &ep);
        double t = thread_cpu_s() - t0;
        if (t < 0.02) {
            n *= 2;
            continue;
        }
        if ((double)n / t > best)
            best = (double)n / t;
        rep++;
    }
    free(st);
    return e->raw = best;
}

static unsigned ncores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set);
    return n > 0 ? (unsigned)n : 1;
}

static hive_t *engine(void)
{
    static hive_t *h;
    if (h == NULL && hive_init(NULL, &h) != HIVE_OK) {
        fprintf(stderr, "bench_envpool: hive_init: %s\n", hive_last_error());
        exit(1);
    }
    return h;
}

/* CPU seconds of this process and of its waited-for children (the python
 * peer's processes), all threads. */
static double proc_cpu_s(void)
{
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    return (double)(self.ru_utime.tv_sec + self.ru_stime.tv_sec + kids.ru_utime.tv_sec +
                    kids.ru_stime.tv_sec) +
           (double)(self.ru_utime.tv_usec + self.ru_stime.tv_usec + kids.ru_utime.tv_usec +
                    kids.ru_stime.tv_usec) * 1e-6;
}

/* The timed groups' wall times, kept for their 10th percentile: the
 * groups in which no thread of the sampler was preempted - on a loaded
 * machine, what the sampler does when it has the cores (the wall
 * efficiency there mostly measures the share of the cores a run got). */
typedef struct groups { double *t; size_t n, cap; } groups_t;

static void groups_add(groups_t *g, double t)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 1024;
        double *nt = realloc(g->t, cap * sizeof *nt);
        if (nt == NULL)
            return;                       /* a sample fewer: the percentile still holds */
        g->t = nt;
        g->cap = cap;
    }
    g->t[g->n++] = t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The 10th percentile of the group times (0: none); frees them. An async
 * group of a few batches is no sample of the rate: a recv finds results
 * stepped during the last group's recv (the pipeline), so its time can be
 * near zero; async groups are therefore P10_MIN_ASYNC_BATCHES batches at
 * least (group_of). */
#define P10_MIN_ASYNC_BATCHES 8u

static double groups_p10(groups_t *g)
{
    double v = 0;
    if (g->n > 0) {
        qsort(g->t, g->n, sizeof *g->t, cmp_double);
        v = g->t[g->n / 10];
    }
    free(g->t);
    *g = (groups_t){ 0 };
    return v;
}

/* efficiency: of the cores' stepping capacity over wall time; cpu_eff: of
 * the CPU time the run used (self + children), steps / (cpu x raw) - what
 * it made of the cores it got, which holds on a loaded machine too;
 * eff_p10: the efficiency of the 10th-percentile group (per_group steps in
 * p10 seconds), the same figure without the preempted groups. */
static void report(hb_state *s, env_cfg_t *e, unsigned workers, uint64_t steps, double wall,
                   double cpu, double caller_cpu, uint64_t per_group, double p10)
{
    hb_set_items_processed(s, (int64_t)steps);
    double rate = wall > 0 ? (double)steps / wall : 0;
    hb_counter(s, "efficiency", rate / ((double)workers * raw_rate(e)), HB_PLAIN);
    hb_counter(s, "cpu_eff", cpu > 0 ? (double)steps / (cpu * raw_rate(e)) : 0, HB_PLAIN);
    if (caller_cpu > 0)
        hb_counter(s, "caller_eff", (double)steps / (caller_cpu * raw_rate(e)), HB_PLAIN);
    hb_counter(s, "raw_1thread", raw_rate(e), HB_PLAIN);
    if (p10 > 0)
        hb_counter(s, "eff_p10", (double)per_group / p10 / ((double)workers * raw_rate(e)), HB_PLAIN);
}

/* Batches per timed iteration: about GROUP_NS of single-thread stepping,
 * at least one (async: P10_MIN_ASYNC_BATCHES, so that every async row has
 * an eff_p10). A CartPole batch is 0.2-0.4 us of work: two clock reads
 * and the harness's bookkeeping around each batch would be a fifth of
 * what is measured (the raw rate has none), so the hive and pthread rows
 * alike time groups of batches; at >= 10 us a step a sync group is one
 * batch. */
#define GROUP_NS 20000.0

static unsigned group_of(env_cfg_t *e, size_t batch, bool async)
{
    double g = GROUP_NS * raw_rate(e) * 1e-9 / (double)batch;
    unsigned least = async ? P10_MIN_ASYNC_BATCHES : 1u;
    return g < least ? least : g > 1000 ? 1000u : (unsigned)g;
}

/* ------------------------------------------------------------ hive */

typedef struct hive_run { hb_state *s; env_cfg_t *e; bool async; } hive_run_t;

static void drive_hive(hive_t *h, hb_state *s, env_cfg_t *e, bool async);

static int drive_task(hive_ctx_t *ctx)
{
    const hive_run_t *r = hive_arg(ctx, 0, NULL);
    drive_hive(hive_engine(ctx), r->s, r->e, r->async);
    return 0;
}

/* The driver runs as a task on a worker (as the pthread peer's driver is
 * thread 0): while it waits for a batch, its worker steps envs too. */
static void bm_hive(hb_state *s, env_cfg_t *e, bool async)
{
    hive_t *h = engine();
    raw_rate(e);
    hive_run_t r = { s, e, async };
    hive_arg_t arg = HIVE_VAL(r);
    hive_ref_t res;
    const void *out;
    if (hive_submit(h, drive_task, &arg, 1, NULL, &res) != HIVE_OK ||
        hive_get(h, res, HIVE_FOREVER, &out, NULL) != HIVE_OK) {
        hb_skip_with_error(s, hive_last_error());
        return;
    }
    hive_release(h, res);
}

static void drive_hive(hive_t *h, hb_state *s, env_cfg_t *e, bool async)
{
    unsigned w = hive_num_workers(h);
    size_t n = (size_t)hb_range(s, 0) * w, batch = async ? n / 2 : n;
    hive_envpool_opts_t o = { .num_envs = n, .batch_size = batch, .seed = 1, .config = cfg_of(e) };
    hive_envpool_t *p;
    if (hive_envpool_new(h, e->cls, &o, &p) != HIVE_OK) {
        hb_skip_with_error(s, hive_last_error());
        return;
    }
    /* two action tables used in turn: each env's action alternates from
     * batch to batch, as in the raw loop (the same trajectories) */
    int32_t *act = calloc(2 * n, sizeof *act);
    for (size_t i = 0; i < 2 * n; i++)
        act[i] = (int32_t)((i + i / n) & 1);
    hive_array_t a = { .data = act, .dtype = HIVE_I32, .ndim = 1, .shape = { (int64_t)batch },
                       .strides = { 4 } };
    unsigned turn = 0;
    hive_envpool_batch_t b;
    if (async) {
        hive_envpool_async_reset(p);
        hive_envpool_recv(p, HIVE_FOREVER, &b);
    } else {
        hive_envpool_reset(p, &b);
    }
    uint64_t steps = 0;
    double wall = 0;
    int rc = HIVE_OK;
    unsigned group = group_of(e, batch, async);
    groups_t gt = { 0 };
    double cpu0 = proc_cpu_s(), tcpu0 = thread_cpu_s();
    while (hb_keep_running(s)) {
        double t0 = now_s();
        for (unsigned g = 0; g < group && rc == HIVE_OK; g++) {
            a.data = act + (turn++ & 1) * n;
            if (async) {
                rc = hive_envpool_send(p, &a, b.env_id.data, b.n);
                if (rc == HIVE_OK)
                    rc = hive_envpool_recv(p, HIVE_FOREVER, &b);
            } else {
                rc = hive_envpool_step(p, &a, &b);
            }
        }
        double t = now_s() - t0;
        if (rc != HIVE_OK) {
            hb_skip_with_error(s, hive_last_error());
            break;
        }
        hb_set_iteration_time(s, t);
        groups_add(&gt, t);
        wall += t;
        steps += (uint64_t)group * batch;
    }
    report(s, e, w, steps, wall, proc_cpu_s() - cpu0, thread_cpu_s() - tcpu0,
           (uint64_t)group * batch, groups_p10(&gt));
    hive_envpool_free(p);
    free(act);
}

/* ------------------------------------------------------------ pthread, sync */

typedef struct psync {
    env_cfg_t         *e;
    size_t             n;
    unsigned           nthreads;
    void             **st;
    float             *obs;
    uint64_t          *ep;
    const int32_t     *act;
    pthread_barrier_t  go, done;
    volatile bool      stop;
} psync_t;

static void psync_slice(psync_t *p, unsigned t)
{
    size_t lo = p->n * t / p->nthreads, hi = p->n * (t + 1) / p->nthreads;
    for (size_t i = lo; i < hi; i++)
        step_local(p->e, p->st[i], p->act[i], p->obs + 4 * i, &p->ep[i]);
}

typedef struct pthr_arg { psync_t *p; unsigned t; } pthr_arg_t;

static void *psync_main(void *arg)
{
    pthr_arg_t *a = arg;
    for (;;) {
        pthread_barrier_wait(&a->p->go);
        if (a->p->stop)
            return NULL;
        psync_slice(a->p, a->t);
        pthread_barrier_wait(&a->p->done);
    }
}

static void bm_pthread_sync(hb_state *s, env_cfg_t *e)
{
    unsigned w = ncores();
    size_t n = (size_t)hb_range(s, 0) * w;
    raw_rate(e);
    psync_t p = { .e = e, .n = n, .nthreads = w };
    p.st = calloc(n, sizeof *p.st);
    p.obs = calloc(n * 4, sizeof(float));
    p.ep = calloc(n, sizeof *p.ep);
    int32_t *act = calloc(2 * n, sizeof *act);           /* two tables in turn, as hive's */
    for (size_t i = 0; i < 2 * n; i++)
        act[i] = (int32_t)((i + i / n) & 1);
    for (size_t i = 0; i < n; i++)
        p.st[i] = local_env(e, (unsigned)i, p.obs + 4 * i);
    p.act = act;
    unsigned turn = 0;
    pthread_barrier_init(&p.go, NULL, w);
    pthread_barrier_init(&p.done, NULL, w);
    pthread_t th[256];
    pthr_arg_t args[256];
    for (unsigned t = 1; t < w; t++) {
        args[t] = (pthr_arg_t){ &p, t };
        pthread_create(&th[t], NULL, psync_main, &args[t]);
    }
    uint64_t steps = 0;
    double wall = 0;
    unsigned group = group_of(e, n, false);
    groups_t gt = { 0 };
    double cpu0 = proc_cpu_s(), tcpu0 = thread_cpu_s();
    while (hb_keep_running(s)) {
        double t0 = now_s();
        for (unsigned g = 0; g < group; g++) {
            p.act = act + (turn++ & 1) * n;          /* published by the barrier */
            pthread_barrier_wait(&p.go);
            psync_slice(&p, 0);
            pthread_barrier_wait(&p.done);
        }
        double t = now_s() - t0;
        hb_set_iteration_time(s, t);
        groups_add(&gt, t);
        wall += t;
        steps += (uint64_t)group * n;
    }
    p.stop = true;
    pthread_barrier_wait(&p.go);
    for (unsigned t = 1; t < w; t++)
        pthread_join(th[t], NULL);
    report(s, e, w, steps, wall, proc_cpu_s() - cpu0, thread_cpu_s() - tcpu0,
           (uint64_t)group * n, groups_p10(&gt));
    for (size_t i = 0; i < n; i++)
        free(p.st[i]);
    free(p.st);
    free(p.obs);
    free(p.ep);
    free(act);
    pthread_barrier_destroy(&p.go);
    pthread_barrier_destroy(&p.done);
}

/* ------------------------------------------------------------ pthread, async */

typedef struct fifo {                     /* a ring of env ids under a mutex */
    pthread_mutex_t lock;
    pthread_cond_t  cond;
    int32_t        *ids;
    size_t          cap, head, count;
} fifo_t;

static void fifo_init(fifo_t *f, size_t cap)
{
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    f->ids = calloc(cap, sizeof *f->ids);
    f->cap = cap;
    f->head = f->count = 0;
}

static void fifo_put(fifo_t *f, int32_t id)
{
    pthread_mutex_lock(&f->lock);
    f->ids[(f->head + f->count++) % f->cap] = id;
    pthread_cond_signal(&f->cond);
    pthread_mutex_unlock(&f->lock);
}

static int32_t fifo_take(fifo_t *f)
{
    pthread_mutex_lock(&f->lock);
    while (f->count == 0)
        pthread_cond_wait(&f->cond, &f->lock);
    int32_t id = f->ids[f->head];
    f->head = (f->head + 1) % f->cap;
    f->count--;
    pthread_mutex_unlock(&f->lock);
    return id;
}

typedef struct pasync {
    env_cfg_t *e;
    size_t     n;
    unsigned   nthreads;
    void     **st;
    float     *obs;                       /* each env's own row; results copied out */
    uint64_t  *ep;
    int32_t   *act;
    fifo_t    *work;                      /* per thread */
    fifo_t     results;
} pasync_t;

typedef struct pa_arg { pasync_t *p; unsigned t; } pa_arg_t;

static void *pasync_main(void *arg)
{
    pa_arg_t *a = arg;
    pasync_t *p = a->p;
    for (;;) {
        int32_t id = fifo_take(&p->work[a->t]);
        if (id < 0)
            return NULL;
        step_local(p->e, p->st[id], p->act[id], p->obs + 4 * id, &p->ep[id]);
        fifo_put(&p->results, id);
    }
}

static void bm_pthread_async(hb_state *s, env_cfg_t *e)
{
    unsigned w = ncores();
    size_t n = (size_t)hb_range(s, 0) * w, batch = n / 2;
    raw_rate(e);
    pasync_t p = { .e = e, .n = n, .nthreads = w };
    p.st = calloc(n, sizeof *p.st);
    p.obs = calloc(n * 4, sizeof(float));
    p.ep = calloc(n, sizeof *p.ep);
    p.act = calloc(n, sizeof *p.act);
    p.work = calloc(w, sizeof *p.work);
    for (unsigned t = 0; t < w; t++)
        fifo_init(&p.work[t], n + 1);
    fifo_init(&p.results, n + 1);
    for (size_t i = 0; i < n; i++)
        p.st[i] = local_env(e, (unsigned)i, p.obs + 4 * i);
    pthread_t th[256];
    pa_arg_t args[256];
    for (unsigned t = 0; t < w; t++) {
        args[t] = (pa_arg_t){ &p, t };
        pthread_create(&th[t], NULL, pasync_main, &args[t]);
    }
    float *bobs = calloc(batch * 4, sizeof(float));
    int32_t *bids = calloc(batch, sizeof *bids);
    /* start: every env steps once; the first batch comes back */
    for (size_t i = 0; i < n; i++)
        fifo_put(&p.work[i * w / n], (int32_t)i);
    for (size_t k = 0; k < batch; k++)
        bids[k] = fifo_take(&p.results);
    uint64_t steps = 0;
    double wall = 0;
    unsigned group = group_of(e, batch, true);
    groups_t gt = { 0 };
    double cpu0 = proc_cpu_s(), tcpu0 = thread_cpu_s();
    while (hb_keep_running(s)) {
        double t0 = now_s();
        for (unsigned g = 0; g < group; g++) {
            for (size_t k = 0; k < batch; k++) {     /* send */
                p.act[bids[k]] = (int32_t)((k + g) & 1);
                fifo_put(&p.work[(size_t)bids[k] * w / n], bids[k]);
            }
            for (size_t k = 0; k < batch; k++) {     /* recv: ids and observations */
                bids[k] = fifo_take(&p.results);
                memcpy(bobs + 4 * k, p.obs + 4 * bids[k], 4 * sizeof(float));
            }
        }
        double t = now_s() - t0;
        hb_set_iteration_time(s, t);
        groups_add(&gt, t);
        wall += t;
        steps += (uint64_t)group * batch;
    }
    /* drain the envs still in flight, then stop the threads */
    for (size_t k = 0; k < n - batch; k++)
        fifo_take(&p.results);
    for (unsigned t = 0; t < w; t++)
        fifo_put(&p.work[t], -1);
    for (unsigned t = 0; t < w; t++)
        pthread_join(th[t], NULL);
    report(s, e, w, steps, wall, proc_cpu_s() - cpu0, thread_cpu_s() - tcpu0,
           (uint64_t)group * batch, groups_p10(&gt));
    for (size_t i = 0; i < n; i++)
        free(p.st[i]);
    free(p.st);
    free(p.obs);
    free(p.ep);
    free(p.act);
    for (unsigned t = 0; t < w; t++)
        free(p.work[t].ids);
    free(p.work);
    free(p.results.ids);
    free(bobs);
    free(bids);
}

/* ------------------------------------------------------------ python */

/* bench/peer_vecenv.py on build/libhive.so: one run of PY_SECONDS per
 * iteration; its output is steps/s. Sync families only: gym's async
 * vector env (step_async + step_wait) still waits for the whole batch. */
#define PY_SECONDS 1.0

static void bm_python(hb_state *s, env_cfg_t *e)
{
    unsigned w = ncores();
    size_t n = (size_t)hb_range(s, 0) * w;
    raw_rate(e);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 bench/peer_vecenv.py build/libhive.so %s %llu %d "
             "%zu %u %.1f 2>/dev/null", e->cls == &hive_env_cartpole ? "cartpole" : "synthetic",
             (unsigned long long)e->syn.cost_ns, e->syn.heavy_tail, n, w, PY_SECONDS);
    double total = 0, wall = 0;
    double cpu0 = proc_cpu_s();
    while (hb_keep_running(s)) {
        double rate = 0;
        FILE *f = popen(cmd, "r");
        if (f == NULL || fscanf(f, "%lf", &rate) != 1 || rate <= 0) {
            if (f)
                pclose(f);
            hb_skip_with_error(s, "peer_vecenv.py failed (python3-numpy? build/libhive.so?)");
            return;
        }
        pclose(f);
        hb_set_iteration_time(s, PY_SECONDS);
        total += rate * PY_SECONDS;
        wall += PY_SECONDS;
    }
    report(s, e, w, (uint64_t)total, wall, proc_cpu_s() - cpu0, 0, 0, 0);
}

/* ------------------------------------------------------------ the table */

#define ROWS(E, tag)                                                                   \
    static void bm_##tag##_sync_hive(hb_state *s) { bm_hive(s, &envs[E], false); }     \
    static void bm_##tag##_async_hive(hb_state *s) { bm_hive(s, &envs[E], true); }     \
    static void bm_##tag##_sync_pthread(hb_state *s) { bm_pthread_sync(s, &envs[E]); } \
    static void bm_##tag##_async_pthread(hb_state *s) { bm_pthread_async(s, &envs[E]); } \
    static void bm_##tag##_sync_python(hb_state *s) { bm_python(s, &envs[E]); }
ROWS(E_CARTPOLE, cartpole)
ROWS(E_SYN1, syn1)
ROWS(E_SYN10, syn10)
ROWS(E_SYN100, syn100)
ROWS(E_HEAVY10, heavy10)

static const int64_t per_worker[] = { 2, 4 };
#define ROW(name, fn) { name, fn, 0, 1, per_worker, 2, "envs_per_worker", HB_US, 0 }
#define PYROW(name, fn) { name, fn, 0, 1, per_worker, 2, "envs_per_worker", HB_US, 1 }
#define FAMILY(tag, str)                                                    \
    ROW("envpool_" str "_sync/hive", bm_##tag##_sync_hive),                \
    ROW("envpool_" str "_sync/pthread", bm_##tag##_sync_pthread),          \
    PYROW("envpool_" str "_sync/python", bm_##tag##_sync_python),          \
    ROW("envpool_" str "_async/hive", bm_##tag##_async_hive),              \
    ROW("envpool_" str "_async/pthread", bm_##tag##_async_pthread)

const hb_bench hb_envpool_benches[] = {
    FAMILY(cartpole, "cartpole"),
    FAMILY(syn1, "syn1us"),
    FAMILY(syn10, "syn10us"),
    FAMILY(syn100, "syn100us"),
    FAMILY(heavy10, "heavy10us"),
};
const size_t hb_envpool_nbenches = sizeof hb_envpool_benches / sizeof hb_envpool_benches[0];
