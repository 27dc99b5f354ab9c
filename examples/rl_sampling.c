/*
 * rl_sampling.c - the job hive is for, and the pthread program it replaces.
 *
 * hive: one sampler actor per core, each placed on its own worker
 * (HIVE_PLACE_WORKER) with an env pool (include/hive/envpool.h) of its
 * share of the CartPole environments in async mode, homed on that worker
 * (opts.env_worker), so the worker steps them itself - cheap ones as the
 * sampler sends them (under a hand-off's cost: plain CartPole), dearer ones
 * while it waits in recv; a batched policy reads each observation batch in place and sends
 * the next actions; the transitions go into a lock-free prioritized replay
 * buffer in batches; a learner actor placed on its own worker samples it,
 * updates priorities and publishes new weights into a cell, which the
 * policies read without a lock. No sampler depends on another, so a
 * sampler that is descheduled (a loaded machine) holds back only its own
 * environments, as one of the baseline's threads does.
 *
 * baseline: the same environments, the same policy and learner code, as a
 * C programmer writes it with plain threads: one thread per worker steps
 * its slice of the environments, one learner thread, a mutex around the
 * buffer (a ring and a sum tree), weights copied under a mutex, condition
 * variables for the rate limiter.
 *
 * Both run at the same samples-per-insert ratio (each transition is
 * sampled about --spi times): a rate limiter holds the learner back when it
 * is ahead and the environments when they are ahead, as Reverb's
 * SampleToInsertRatio does. So one number, learner updates per second at
 * that ratio, says who is faster. hive gets a worker per core plus one for
 * the learner, unpinned, as the baseline has a thread per core plus a
 * learner thread. The two take turns (--rounds, each run from scratch) so
 * that a loaded machine's swings fall on both. The summary compares each
 * with the best the cores can do: from the single-thread cost of an env
 * step (with the policy and the push) cs and of a learner update cu, C
 * cores do at most min(1 / cu, C / (cu + (BATCH / spi) * cs)) updates per
 * second; it also prints the cores each run got (CPU time / wall time).
 *
 *   make demo                    (build/examples/rl_sampling)
 *   rl_sampling [--envs N] [--rounds R] [--duration S] [--baseline S] [--max-duration S]
 *               [--spi R] [--env-cost-us U] [--buffer N] [--seed N] [--check]
 *
 * CartPole is the library's (hive_env_cartpole: Gym's CartPole-v1, 500-step
 * limit); --env-cost-us adds U microseconds of simulated physics to each
 * step (hive_env_spin, the synthetic env's calibrated spin). The policy is
 * epsilon-greedy over a linear Q function of 10 features (the state, its
 * squares and angle x angular velocity); the learner does Q-learning with
 * the last published weights as its target network and |TD error| as the
 * new priorities. A run lasts --duration seconds, and longer (up to
 * --max-duration) until the policy is learned: the mean return of the last
 * 100 episodes >= 195, CartPole's classic solved line. --check exits 1
 * unless the hive run learned.
 */
#include <hive.h>

#include <math.h>
#include <stdbool.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

/* ------------------------------------------------------------ the environment */

/* CartPole plus an optional simulated physics cost per step. */
typedef struct demo_env {
    _Alignas(16) unsigned char cp[128];    /* >= hive_env_cartpole.state_size (checked in main) */
    uint64_t cost_ns;
} demo_env_t;

static int denv_init(void *state, const void *config, unsigned env_id)
{
    (void)env_id;
    ((demo_env_t *)state)->cost_ns = *(const uint64_t *)config;
    return 0;
}

static void denv_reset(void *state, uint64_t seed, void *obs_out)
{
    hive_env_cartpole.reset(((demo_env_t *)state)->cp, seed, obs_out);
}

static void denv_step(void *state, const void *action, void *obs_out, float *reward, int *done)
{
    demo_env_t *e = state;
    hive_env_cartpole.step(e->cp, action, obs_out, reward, done);
    if (e->cost_ns)
        hive_env_spin(e->cost_ns);
}

static hive_env_class_t demo_class(void)
{
    hive_env_class_t c = hive_env_cartpole;
    c.name = "CartPoleCost";
    c.state_size = sizeof(demo_env_t);
    c.init = denv_init;
    c.reset = denv_reset;
    c.step = denv_step;
    return c;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static double urand(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* CPU seconds this process has used, all threads. */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* CPU seconds the calling thread has used: single-thread costs measured
 * in it hold on a loaded machine too (time preempted is not counted). */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ policy and learner */

#define NF 10                              /* features per action */
#define NW (2 * NF)                        /* weights: one row per action */

typedef struct transition {                /* 48 bytes in the replay buffer */
    float s[4], a, r, s2[4], done, pad;
} transition_t;

static void features(const float s[4], float f[NF])
{
    f[0] = 1;
    f[1] = s[0] / 2.4f;
    f[2] = s[1] / 2;
    f[3] = s[2] / 0.21f;
    f[4] = s[3] / 2;
    f[5] = f[1] * f[1];
    f[6] = f[2] * f[2];
    f[7] = f[3] * f[3];
    f[8] = f[4] * f[4];
    f[9] = f[3] * f[4];
}

static float qvalue(const float *w, const float s[4], int a)
{
    float f[NF], v = 0;
    features(s, f);
    for (int i = 0; i < NF; i++)
        v += w[a * NF + i] * f[i];
    return v;
}

/* Exploration falls with the policy version. */
static double epsilon_of(uint64_t version)
{
    return 0.02 + 0.98 * exp(-(double)version / 12.0);
}

static int32_t choose(const float *w, const float s[4], double eps, uint64_t *rng)
{
    if (urand(rng) < eps)
        return (int32_t)(rng_next(rng) & 1);
    return qvalue(w, s, 1) > qvalue(w, s, 0);
}

/* One Q-learning step on a batch; fills |TD error| + 0.01 as new priorities. */
#define BATCH 64
#define LR    0.003f
#define GAMMA 0.99f

static void learn_batch(float *w, const float *target, const transition_t *b, const double *iw,
                        double *prio)
{
    for (int k = 0; k < BATCH; k++) {
        const transition_t *t = &b[k];
        int a = (int)t->a;
        float next = t->done > 0.5f ? 0 : GAMMA * fmaxf(qvalue(target, t->s2, 0),
                                                        qvalue(target, t->s2, 1));
        float delta = t->r + next - qvalue(w, t->s, a);
        prio[k] = fabsf(delta) + 0.01;
        if (delta > 10) delta = 10;
        if (delta < -10) delta = -10;
        float f[NF];
        features(t->s, f);
        float step = LR * (float)iw[k] * delta;
        for (int i = 0; i < NF; i++)
            w[a * NF + i] += step * f[i];
    }
}

#define PUBLISH_EVERY 250                  /* learner updates per published version */
#define LEAD          256                  /* updates the environments may run ahead of the learner */
#define MIN_FILL      1000                 /* transitions before the first update */
#define SOLVED        195.0                /* mean return of the last 100 episodes */

/* The rate limiter's arithmetic, shared by both pipelines: the updates
 * that `inserts` transitions pay for at samples-per-insert spi. */
static uint64_t credit(uint64_t inserts, double spi)
{
    return inserts < MIN_FILL ? 0 : (uint64_t)((double)inserts * spi / BATCH);
}

/* The environments' side of the limiter, shared by both pipelines: they
 * stop once the updates paid for run LEAD ahead of those done, and go on
 * once the learner has caught up to LEAD / 2 (a burst of env work per
 * wait, not a step per update: fewer wake-ups on both sides). *ahead
 * keeps which half of the hysteresis we are in. */
static bool too_far_ahead(bool *ahead, uint64_t paid, uint64_t done)
{
    *ahead = paid > done + (*ahead ? LEAD / 2 : LEAD);
    return *ahead;
}

/* ------------------------------------------------------------ the sampler's bookkeeping */

/* What a sampler knows of its environments: the observation each acted on,
 * the action, the policy version, the episode so far. Shared code: the
 * hive pipeline has one, each baseline thread one for its slice. */
typedef struct tracker {
    float    (*obs)[4];
    int32_t  *act;
    uint64_t *ver;
    int      *len;
    uint8_t  *have;                        /* a step is outstanding from obs/act */
    uint64_t  rng;
    /* since the last merge */
    uint64_t  steps, episodes, lag_sum, lag_n;
    double    ret_sum;
    double    rets[512];                   /* episode returns, for the last-100 window */
    unsigned  nrets;
} tracker_t;

static int tracker_init(tracker_t *t, size_t n, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    t->obs = calloc(n, sizeof *t->obs);
    t->act = calloc(n, sizeof *t->act);
    t->ver = calloc(n, sizeof *t->ver);
    t->len = calloc(n, sizeof *t->len);
    t->have = calloc(n, sizeof *t->have);
    t->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    return t->obs && t->act && t->ver && t->len && t->have ? 0 : -1;
}

static void tracker_free(tracker_t *t)
{
    free(t->obs);
    free(t->act);
    free(t->ver);
    free(t->len);
    free(t->have);
}

/* One batch of results: row k is env slot[k] (an index into the tracker)
 * with observation obs[k], reward and done. Writes the transitions the rows
 * complete into tr (returns how many) and each env's next action into
 * act_out[k]. A step that hit the 500-step time limit is not a terminal
 * state and its next observation is already the new episode's: it is not
 * stored. */
static size_t on_batch(tracker_t *t, const float *w, uint64_t version, size_t n, const int32_t *slot,
                       const float *obs, const float *reward, const uint8_t *done,
                       int32_t *act_out, transition_t *tr)
{
    double eps = epsilon_of(version);
    size_t m = 0;
    for (size_t k = 0; k < n; k++) {
        int32_t i = slot[k];
        const float *o = obs + 4 * k;
        if (t->have[i]) {
            t->steps++;
            t->len[i]++;
            t->lag_sum += version - t->ver[i];
            t->lag_n++;
            bool truncated = done[k] && t->len[i] >= 500;
            if (!truncated) {
                transition_t *x = &tr[m++];
                memcpy(x->s, t->obs[i], sizeof x->s);
                x->a = (float)t->act[i];
                x->r = reward[k];
                memcpy(x->s2, o, sizeof x->s2);
                x->done = (float)done[k];
                x->pad = 0;
            }
            if (done[k]) {
                t->episodes++;
                t->ret_sum += t->len[i];
                if (t->nrets < sizeof t->rets / sizeof t->rets[0])
                    t->rets[t->nrets++] = t->len[i];
                t->len[i] = 0;
            }
        }
        int32_t a = choose(w, o, eps, &t->rng);
        memcpy(t->obs[i], o, sizeof t->obs[i]);
        t->act[i] = a;
        t->ver[i] = version;
        t->have[i] = 1;
        act_out[k] = a;
    }
    return m;
}

/* What a run shows: totals, the per-second window, the last 100 returns. */
typedef struct stats {
    uint64_t steps, updates, episodes, lag_sum, lag_n, version;
    double   ret_sum;
    double   last100[100];
    unsigned n100, pos100;
    double   t0, solved_at;                /* seconds into the run; 0: not yet */
    double   best100;
    /* the window printed last */
    double   t_print;
    uint64_t p_steps, p_updates, p_episodes, p_lag_sum, p_lag_n;
    double   p_ret_sum;
} stats_t;

static double mean100(const stats_t *s)
{
    double sum = 0;
    for (unsigned i = 0; i < s->n100; i++)
        sum += s->last100[i];
    return s->n100 ? sum / s->n100 : 0;
}

/* Fold a tracker's counts into the run's (under the baseline's lock). */
static void merge(stats_t *s, tracker_t *t)
{
    s->steps += t->steps;
    s->episodes += t->episodes;
    s->lag_sum += t->lag_sum;
    s->lag_n += t->lag_n;
    s->ret_sum += t->ret_sum;
    for (unsigned k = 0; k < t->nrets; k++) {
        s->last100[s->pos100] = t->rets[k];
        s->pos100 = (s->pos100 + 1) % 100;
        if (s->n100 < 100)
            s->n100++;
        double m = mean100(s);
        if (s->n100 == 100 && m > s->best100)
            s->best100 = m;
        if (s->n100 == 100 && m >= SOLVED && s->solved_at == 0)
            s->solved_at = now_s() - s->t0;
    }
    t->steps = t->episodes = t->lag_sum = t->lag_n = 0;
    t->ret_sum = 0;
    t->nrets = 0;
}

/* The per-second line: env steps/s, learner updates/s, samples per insert,
 * policy version and lag, average return of the episodes that ended. */
static void print_second(stats_t *s, double t)
{
    double dt = t - s->t_print;
    uint64_t eps = s->episodes - s->p_episodes, ln = s->lag_n - s->p_lag_n;
    printf("[%4.1fs] env steps/s %8.0f | learner updates/s %6.0f | samples/insert %4.1f | "
           "policy v%-4llu lag %.2f | avg return %5.1f\n", t - s->t0,
           (double)(s->steps - s->p_steps) / dt, (double)(s->updates - s->p_updates) / dt,
           s->steps ? (double)s->updates * BATCH / (double)s->steps : 0,
           (unsigned long long)s->version, ln ? (double)(s->lag_sum - s->p_lag_sum) / (double)ln : 0,
           eps ? (s->ret_sum - s->p_ret_sum) / (double)eps : 0);
    fflush(stdout);
    s->t_print = t;
    s->p_steps = s->steps;
    s->p_updates = s->updates;
    s->p_episodes = s->episodes;
    s->p_lag_sum = s->lag_sum;
    s->p_lag_n = s->lag_n;
    s->p_ret_sum = s->ret_sum;
}

typedef struct run_cfg {
    unsigned nenv, workers;
    double   duration, max_duration, spi;
    uint64_t buffer, seed, cost_ns;
} run_cfg_t;

/* A run goes on past its duration until the policy is learned. */
static bool run_over(const stats_t *s, const run_cfg_t *c, double t)
{
    double el = t - s->t0;
    return el >= c->max_duration || (el >= c->duration && s->solved_at > 0);
}

typedef struct result {
    double seconds, steps, updates, publishes, lag, solved_at, best100, cpu;
} result_t;

static void fill_result(const stats_t *s, double t, result_t *r)
{
    r->seconds = t - s->t0;
    r->steps = (double)s->steps;
    r->updates = (double)s->updates;
    r->publishes = (double)s->version;
    r->lag = s->lag_n ? (double)s->lag_sum / (double)s->lag_n : 0;
    r->solved_at = s->solved_at;
    r->best100 = s->best100;
}

#define FAIL(what) do { fprintf(stderr, "%s: %s\n", what, hive_last_error()); goto out; } while (0)

/* ------------------------------------------------------------ the hive pipeline */

/* What the hive pipeline's threads share, all counts: each is written by
 * one side (or by fetch_add) and read by the others, and none guards data
 * (transitions reach the learner through the replay buffer, weights the
 * samplers through the cell, both of which order their own contents), so
 * relaxed loads and stores suffice: a stale count only makes a side wait
 * or go on a moment early, and it reads again. */
typedef struct counts {                    /* one sampler's, written by it only */
    _Alignas(64) _Atomic uint64_t steps, episodes, lag_sum, lag_n, ret_sum, version;
} counts_t;

typedef struct shared {
    _Alignas(64) _Atomic uint64_t inserts;  /* env steps of all samplers: the limiter's credit */
    _Alignas(64) _Atomic uint64_t updates;  /* the learner's updates done */
    _Alignas(64) _Atomic uint64_t nrets;    /* episode returns ever added to rets */
    _Atomic uint32_t rets[100];             /* the last 100 returns, at nrets % 100 */
    _Alignas(64) _Atomic int stop;          /* the run is over: samplers and learner end */
    counts_t *per;                          /* one per sampler */
    unsigned  nsamplers;
} shared_t;

typedef struct learner_args {
    hive_replay_t *rb;
    hive_ref_t     weights;                /* the cell the learner publishes into */
    uint64_t       seed;
    shared_t      *sh;
    double         spi;
} learner_args_t;

typedef struct learner {
    learner_args_t a;
    float          w[NW], target[NW];
    uint64_t       updates, rng;
    transition_t   batch[BATCH];
} learner_t;

static int learner_init(void *self, hive_ctx_t *ctx)
{
    learner_t *l = self;
    l->a = *(const learner_args_t *)hive_arg(ctx, 0, NULL);
    l->rng = l->a.seed ^ 0xabcdefull;
    return 0;
}

/* One update: a prioritized batch, a Q-learning step, new priorities,
 * and every PUBLISH_EVERY updates a new weights version. */
static int learner_update(hive_t *h, learner_t *l)
{
    uint64_t keys[BATCH];
    double iw[BATCH], prio[BATCH];
    if (hive_replay_sample(l->a.rb, BATCH, &l->rng, l->batch, keys, iw, 0) != HIVE_OK)
        return -1;
    learn_batch(l->w, l->target, l->batch, iw, prio);
    if (hive_replay_update_priorities(l->a.rb, keys, prio, BATCH) < 0)
        return -1;
    if (++l->updates % PUBLISH_EVERY == 0) {
        hive_ref_t v;                       /* a new version: put, publish, drop our count */
        if (hive_put(h, l->w, sizeof l->w, &v) != HIVE_OK)
            return -1;
        int rc = hive_cell_publish(h, l->a.weights, v);
        hive_release(h, v);
        if (rc != HIVE_OK)
            return -1;
        memcpy(l->target, l->w, sizeof l->w);
    }
    return 0;
}

static void nap_us(long us)
{
    struct timespec ts = { 0, us * 1000 };
    nanosleep(&ts, NULL);
}

/* run(): the learner's whole run on its own worker, as the baseline's
 * learner thread: update while the inserts pay for it (the rate
 * limiter), nap while they do not, end when the run is over. */
static int learner_run(void *self, hive_ctx_t *ctx)
{
    learner_t *l = self;
    shared_t *sh = l->a.sh;
    int rc = 0;
    while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
        if (credit(atomic_load_explicit(&sh->inserts, memory_order_relaxed), l->a.spi) <= l->updates) {
            nap_us(20);                     /* the environments are behind */
            continue;
        }
        if (learner_update(hive_engine(ctx), l) != 0) {
            rc = -1;
            break;
        }
        atomic_store_explicit(&sh->updates, l->updates, memory_order_relaxed);
    }
    return hive_return(ctx, &rc, sizeof rc);
}

static const hive_method_t learner_methods[] = { { "run", learner_run, HIVE_PRIO_NORMAL } };
static const hive_actor_class_t learner_class = {
    .name = "Learner", .size = sizeof(learner_t), .init = learner_init,
    .methods = learner_methods, .nmethods = 1,
};

typedef struct sampler_job {               /* what a sampler actor's run() is given */
    shared_t        *sh;
    counts_t        *mine;
    const run_cfg_t *c;
    hive_envpool_t  *pool;
    hive_replay_t   *rb;
    hive_ref_t       cell;
    unsigned         index;
} sampler_job_t;

/* A sampler: its own env pool (async, its envs homed on its own worker,
 * which steps them while it waits in recv), the policy on each batch read
 * in place, the actions sent straight back, the transitions pushed in one
 * batch into the replay buffer. One per core, as the baseline has a
 * thread per core stepping its slice. */
static int sampler_loop(const sampler_job_t *j, hive_t *h)
{
    const run_cfg_t *c = j->c;
    shared_t *sh = j->sh;
    counts_t *mine = j->mine;
    size_t n = hive_envpool_num_envs(j->pool);
    int32_t *acts = calloc(n, sizeof *acts);
    transition_t *tr = calloc(n, sizeof *tr);
    tracker_t tk = { 0 };
    int ret = -1;
    bool ahead = false;
    if (acts == NULL || tr == NULL || tracker_init(&tk, n, c->seed + 1 + j->index) != 0) {
        fprintf(stderr, "out of memory\n");
        goto out;
    }
    if (hive_envpool_async_reset(j->pool) != HIVE_OK)
        FAIL("hive_envpool_async_reset");
    while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
        uint64_t paid = credit(atomic_load_explicit(&sh->inserts, memory_order_relaxed), c->spi);
        uint64_t done_n = atomic_load_explicit(&sh->updates, memory_order_relaxed);
        if (too_far_ahead(&ahead, paid, done_n)) {
            /* the learner is behind: wait about as long as it needs to
             * get back to LEAD / 2 (5 us an update is faster than any
             * learner here: we wake early rather than late), 20 us to
             * 1 ms, rather than wake every 20 us to find it still behind */
            uint64_t gap = paid - done_n - LEAD / 2;
            nap_us(gap < 4 ? 20 : gap > 200 ? 1000 : (long)(gap * 5));
            continue;
        }
        hive_envpool_batch_t b;
        if (hive_envpool_recv(j->pool, HIVE_FOREVER, &b) != HIVE_OK)
            FAIL("hive_envpool_recv");
        hive_ref_t v;
        uint64_t version;
        const void *w;
        if (hive_cell_acquire(h, j->cell, &v, &version) != HIVE_OK ||
            hive_get(h, v, 0, &w, NULL) != HIVE_OK)
            FAIL("weights");
        size_t m = on_batch(&tk, w, version, b.n, b.env_id.data, b.obs.data, b.reward.data,
                            b.done.data, acts, tr);
        hive_release(h, v);                 /* the old version goes once nobody holds it */
        hive_array_t a = { .data = acts, .dtype = HIVE_I32, .ndim = 1,
                           .shape = { (int64_t)b.n }, .strides = { 4 } };
        if (hive_envpool_send(j->pool, &a, b.env_id.data, b.n) != HIVE_OK)
            FAIL("hive_envpool_send");
        if (hive_replay_push_batch(j->rb, tr, m) != HIVE_OK)
            FAIL("hive_replay_push_batch");
        /* the counts: ours (one writer: load + store), the shared credit
         * and the returns window (several writers: RMWs) */
        atomic_fetch_add_explicit(&sh->inserts, tk.steps, memory_order_relaxed);
#define BUMP(f, x) atomic_store_explicit(&mine->f, atomic_load_explicit(&mine->f, \
                                         memory_order_relaxed) + (x), memory_order_relaxed)
        BUMP(steps, tk.steps);
        BUMP(episodes, tk.episodes);
        BUMP(lag_sum, tk.lag_sum);
        BUMP(lag_n, tk.lag_n);
        BUMP(ret_sum, (uint64_t)tk.ret_sum);
#undef BUMP
        atomic_store_explicit(&mine->version, version, memory_order_relaxed);
        for (unsigned k = 0; k < tk.nrets; k++) {
            uint64_t at = atomic_fetch_add_explicit(&sh->nrets, 1, memory_order_relaxed);
            atomic_store_explicit(&sh->rets[at % 100], (uint32_t)tk.rets[k], memory_order_relaxed);
        }
        tk.steps = tk.episodes = tk.lag_sum = tk.lag_n = 0;
        tk.ret_sum = 0;
        tk.nrets = 0;
    }
    ret = 0;
out:
    tracker_free(&tk);
    free(acts);
    free(tr);
    return ret;
}

static int sampler_run(void *self, hive_ctx_t *ctx)
{
    (void)self;
    const sampler_job_t *j = *(sampler_job_t *const *)hive_arg(ctx, 0, NULL);
    int rc = sampler_loop(j, hive_engine(ctx));
    if (rc != 0)                            /* the others end too */
        atomic_store_explicit(&j->sh->stop, 1, memory_order_relaxed);
    return hive_return(ctx, &rc, sizeof rc);
}

static const hive_method_t sampler_methods[] = { { "run", sampler_run, HIVE_PRIO_NORMAL } };
static const hive_actor_class_t sampler_class = {
    .name = "Sampler", .size = 8, .methods = sampler_methods, .nmethods = 1,
};

/* The run's figures from the shared counts (the main thread, each tick):
 * totals summed over the samplers, the last-100 window from the returns
 * ring, solved_at when its mean first reaches SOLVED. */
static void snapshot(const shared_t *sh, stats_t *st, uint64_t *seen_rets)
{
    uint64_t steps = 0, episodes = 0, lag_sum = 0, lag_n = 0, ret_sum = 0, version = 0;
    for (unsigned i = 0; i < sh->nsamplers; i++) {
        const counts_t *k = &sh->per[i];
        steps += atomic_load_explicit(&k->steps, memory_order_relaxed);
        episodes += atomic_load_explicit(&k->episodes, memory_order_relaxed);
        lag_sum += atomic_load_explicit(&k->lag_sum, memory_order_relaxed);
        lag_n += atomic_load_explicit(&k->lag_n, memory_order_relaxed);
        ret_sum += atomic_load_explicit(&k->ret_sum, memory_order_relaxed);
        uint64_t v = atomic_load_explicit(&k->version, memory_order_relaxed);
        version = v > version ? v : version;
    }
    st->steps = steps;
    st->episodes = episodes;
    st->lag_sum = lag_sum;
    st->lag_n = lag_n;
    st->ret_sum = (double)ret_sum;
    st->version = version;
    st->updates = atomic_load_explicit(&sh->updates, memory_order_relaxed);
    uint64_t nr = atomic_load_explicit(&sh->nrets, memory_order_relaxed);
    if (nr == *seen_rets)
        return;
    *seen_rets = nr;
    st->n100 = nr < 100 ? (unsigned)nr : 100;
    for (unsigned i = 0; i < 100; i++)
        st->last100[i] = atomic_load_explicit(&sh->rets[i], memory_order_relaxed);
    double m = mean100(st);
    if (st->n100 == 100 && m > st->best100)
        st->best100 = m;
    if (st->n100 == 100 && m >= SOLVED && st->solved_at == 0)
        st->solved_at = now_s() - st->t0;
}

/* hive: a worker per core, each running a sampler actor with its own env
 * pool, and one more worker for the learner actor; the main thread only
 * prints and says when the run is over, as the baseline's. */
static int run_hive(hive_t *h, const run_cfg_t *c, result_t *res)
{
    int ret = -1;
    unsigned ns = c->workers;
    hive_replay_t *rb = NULL;
    hive_envpool_t **pools = calloc(ns, sizeof *pools);
    sampler_job_t *jobs = calloc(ns, sizeof *jobs);
    hive_ref_t *done = calloc(ns, sizeof *done);
    unsigned *home = calloc(c->nenv, sizeof *home);
    shared_t sh = { .nsamplers = ns };
    hive_ref_t cell = { 0 }, lrun = { 0 };
    stats_t st = { 0 };
    uint64_t seen_rets = 0;
    if (posix_memalign((void **)&sh.per, 64, ns * sizeof(counts_t)) != 0)
        sh.per = NULL;
    if (pools == NULL || jobs == NULL || done == NULL || home == NULL || sh.per == NULL) {
        fprintf(stderr, "out of memory\n");
        goto out;
    }
    memset(sh.per, 0, ns * sizeof(counts_t));
    hive_replay_config_t rc = { .capacity = c->buffer, .item_size = sizeof(transition_t),
                                .prioritized = 1, .alpha = 0.6, .beta = 0.4, .seed = c->seed };
    if (hive_replay_new(h, &rc, &rb) != HIVE_OK)
        FAIL("hive_replay_new");
    float zero[NW] = { 0 };
    hive_ref_t w0;
    if (hive_put(h, zero, sizeof zero, &w0) != HIVE_OK || hive_cell_new(h, w0, &cell) != HIVE_OK)
        FAIL("weights");
    hive_release(h, w0);
    st.t0 = st.t_print = now_s();
    /* the learner on the worker after the samplers' */
    learner_args_t la = { .rb = rb, .weights = cell, .seed = c->seed, .sh = &sh, .spi = c->spi };
    hive_actor_opts_t lo = { .place = HIVE_PLACE_WORKER, .place_index = ns };
    hive_actor_t learner;
    if (hive_actor_new(h, &learner_class, &HIVE_VAL(la), 1, &lo, &learner) != HIVE_OK ||
        hive_call(h, learner, 0, NULL, 0, NULL, &lrun) != HIVE_OK)
        FAIL("learner");
    hive_env_class_t cls = demo_class();
    for (unsigned i = 0; i < ns; i++) {
        /* sampler i's envs: its share, homed on its own worker */
        unsigned lo_env = c->nenv * i / ns, n = c->nenv * (i + 1) / ns - lo_env;
        for (unsigned k = 0; k < n; k++)
            home[k] = i;
        hive_envpool_opts_t po = { .num_envs = n, .batch_size = n / 2 ? n / 2 : 1,
                                   .seed = c->seed * 1000003 + lo_env, .config = &c->cost_ns,
                                   .env_worker = home };
        if (hive_envpool_new(h, &cls, &po, &pools[i]) != HIVE_OK)
            FAIL("hive_envpool_new");
        jobs[i] = (sampler_job_t){ &sh, &sh.per[i], c, pools[i], rb, cell, i };
        sampler_job_t *jp = &jobs[i];
        hive_actor_opts_t so = { .place = HIVE_PLACE_WORKER, .place_index = i };
        hive_actor_t sampler;
        if (hive_actor_new(h, &sampler_class, NULL, 0, &so, &sampler) != HIVE_OK ||
            hive_call(h, sampler, 0, &HIVE_VAL(jp), 1, NULL, &done[i]) != HIVE_OK)
            FAIL("sampler");
    }
    for (;;) {                              /* print each second; end the run */
        nap_us(10000);
        double t = now_s();
        snapshot(&sh, &st, &seen_rets);
        bool over = atomic_load_explicit(&sh.stop, memory_order_relaxed) || run_over(&st, c, t);
        if (!over && t - st.t_print >= 1)
            print_second(&st, t);
        if (over)
            break;
    }
    atomic_store_explicit(&sh.stop, 1, memory_order_relaxed);
    int bad = 0;
    for (unsigned i = 0; i < ns; i++) {
        const void *p;
        if (done[i].id == 0 || hive_get(h, done[i], HIVE_FOREVER, &p, NULL) != HIVE_OK ||
            *(const int *)p != 0)
            bad = 1;
    }
    const void *p;
    if (hive_get(h, lrun, HIVE_FOREVER, &p, NULL) != HIVE_OK || *(const int *)p != 0)
        bad = 1;
    snapshot(&sh, &st, &seen_rets);
    fill_result(&st, now_s(), res);
    ret = bad ? -1 : 0;
out:
    atomic_store_explicit(&sh.stop, 1, memory_order_relaxed);
    for (unsigned i = 0; done != NULL && i < ns; i++)
        if (done[i].id) {
            const void *q;
            hive_get(h, done[i], HIVE_FOREVER, &q, NULL);
            hive_release(h, done[i]);
        }
    if (lrun.id) {
        const void *q;
        hive_get(h, lrun, HIVE_FOREVER, &q, NULL);
        hive_release(h, lrun);
    }
    for (unsigned i = 0; pools != NULL && i < ns; i++)
        hive_envpool_free(pools[i]);
    hive_replay_free(rb);
    if (cell.id)
        hive_release(h, cell);
    free(pools);
    free(jobs);
    free(done);
    free(home);
    free(sh.per);
    return ret;
}

/* ------------------------------------------------------------ the pthread baseline */

/* A ring of transitions with a sum tree of priority^alpha over it, all
 * under one mutex; the rate limiter's two condition variables. */
typedef struct base {
    pthread_mutex_t  lock, w_lock;
    pthread_cond_t   learner_cv, env_cv;
    transition_t    *items;
    double          *tree;                 /* leaves at [cap, 2 cap) */
    uint64_t         cap, inserts;
    double           max_prio;
    float            w[NW];                /* the published weights, under w_lock */
    uint64_t         version;
    bool             stop;
    int              fail;
    stats_t          st;                   /* under lock */
    const run_cfg_t *c;
    hive_env_class_t cls;
    unsigned         next_thread;
} base_t;

static void tree_set(base_t *b, uint64_t leaf, double v)
{
    uint64_t i = leaf + b->cap;
    double d = v - b->tree[i];
    for (; i >= 1; i /= 2)
        b->tree[i] += d;
}

/* Caller holds lock. */
static void base_push(base_t *b, const transition_t *tr, size_t m)
{
    double p = pow(b->max_prio, 0.6);
    for (size_t i = 0; i < m; i++) {
        uint64_t row = b->inserts++ % b->cap;
        b->items[row] = tr[i];
        tree_set(b, row, p);
    }
}

/* One thread per worker: step its slice of the environments with the
 * latest weights, push the slice's transitions, wait while ahead. */
static void *base_env(void *arg)
{
    base_t *b = arg;
    const run_cfg_t *c = b->c;
    pthread_mutex_lock(&b->lock);
    unsigned me = b->next_thread++;
    pthread_mutex_unlock(&b->lock);
    size_t lo = (size_t)c->nenv * me / c->workers, hi = (size_t)c->nenv * (me + 1) / c->workers;
    size_t n = hi - lo;
    demo_env_t *envs = calloc(n, sizeof *envs);
    float *obs = calloc(n, 4 * sizeof *obs), *rew = calloc(n, sizeof *rew);
    uint8_t *done = calloc(n, 1);
    int32_t *slot = calloc(n, sizeof *slot), *acts = calloc(n, sizeof *acts);
    uint32_t *episode = calloc(n, sizeof *episode);
    transition_t *tr = calloc(n, sizeof *tr);
    tracker_t tk = { 0 };
    if (!envs || !obs || !rew || !done || !slot || !acts || !episode || !tr ||
        tracker_init(&tk, n, c->seed + 1 + me) != 0) {
        pthread_mutex_lock(&b->lock);
        b->fail = 1;
        b->stop = true;
        pthread_cond_broadcast(&b->learner_cv);
        pthread_mutex_unlock(&b->lock);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        b->cls.init(&envs[i], &c->cost_ns, (unsigned)(lo + i));
        b->cls.reset(&envs[i], c->seed * 1000003 + lo + i, obs + 4 * i);
        slot[i] = (int32_t)i;
    }
    float w[NW];
    for (;;) {
        pthread_mutex_lock(&b->w_lock);
        memcpy(w, b->w, sizeof w);
        uint64_t version = b->version;
        pthread_mutex_unlock(&b->w_lock);
        size_t m = on_batch(&tk, w, version, n, slot, obs, rew, done, acts, tr);
        for (size_t i = 0; i < n; i++) {     /* the same step, auto-reset included */
            int d = 0;
            b->cls.step(&envs[i], &acts[i], obs + 4 * i, &rew[i], &d);
            done[i] = d != 0;
            if (d)
                b->cls.reset(&envs[i], (c->seed * 1000003 + lo + i) ^ ((uint64_t)++episode[i] << 40),
                             obs + 4 * i);
        }
        pthread_mutex_lock(&b->lock);
        base_push(b, tr, m);
        merge(&b->st, &tk);
        pthread_cond_signal(&b->learner_cv);
        bool ahead = false;
        while (!b->stop && too_far_ahead(&ahead, credit(b->st.steps, c->spi), b->st.updates))
            pthread_cond_wait(&b->env_cv, &b->lock);
        bool stop = b->stop;
        pthread_mutex_unlock(&b->lock);
        if (stop)
            break;
    }
    tracker_free(&tk);
    free(envs);
    free(obs);
    free(rew);
    free(done);
    free(slot);
    free(acts);
    free(episode);
    free(tr);
    return NULL;
}

/* Caller holds lock: a stratified prioritized batch, as hive_replay does. */
static void base_sample(base_t *b, uint64_t *rng, transition_t *batch, uint64_t *rows, double *iw)
{
    uint64_t held = b->inserts < b->cap ? b->inserts : b->cap;
    double total = b->tree[1], maxw = 0;
    for (int k = 0; k < BATCH; k++) {
        double u = (k + urand(rng)) * total / BATCH;
        uint64_t i = 1;
        while (i < b->cap) {
            if (u <= b->tree[2 * i] || b->tree[2 * i + 1] <= 0)
                i = 2 * i;
            else {
                u -= b->tree[2 * i];
                i = 2 * i + 1;
            }
        }
        rows[k] = (i - b->cap) < held ? i - b->cap : held - 1;
        batch[k] = b->items[rows[k]];
        double p = b->tree[rows[k] + b->cap] / total;
        iw[k] = pow((double)held * p, -0.4);
        if (iw[k] > maxw)
            maxw = iw[k];
    }
    for (int k = 0; k < BATCH; k++)
        iw[k] /= maxw;
}

static void *base_learner(void *arg)
{
    base_t *b = arg;
    float w[NW] = { 0 }, target[NW] = { 0 };
    transition_t batch[BATCH];
    uint64_t rows[BATCH], rng = b->c->seed ^ 0xabcdefull, updates = 0;
    double iw[BATCH], prio[BATCH];
    pthread_mutex_lock(&b->lock);
    for (;;) {
        while (!b->stop && credit(b->st.steps, b->c->spi) <= b->st.updates)
            pthread_cond_wait(&b->learner_cv, &b->lock);
        if (b->stop)
            break;
        base_sample(b, &rng, batch, rows, iw);
        pthread_mutex_unlock(&b->lock);
        learn_batch(w, target, batch, iw, prio);
        pthread_mutex_lock(&b->lock);
        for (int k = 0; k < BATCH; k++) {
            tree_set(b, rows[k], pow(prio[k], 0.6));
            if (prio[k] > b->max_prio)
                b->max_prio = prio[k];
        }
        b->st.updates++;
        pthread_cond_broadcast(&b->env_cv);
        if (++updates % PUBLISH_EVERY == 0) {
            pthread_mutex_lock(&b->w_lock);
            memcpy(b->w, w, sizeof w);
            b->version++;
            b->st.version = b->version;
            pthread_mutex_unlock(&b->w_lock);
            memcpy(target, w, sizeof w);
        }
    }
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

static int run_baseline(const run_cfg_t *c, result_t *res)
{
    base_t b = { .cap = 1, .max_prio = 1.0, .c = c, .cls = demo_class() };
    while (b.cap < c->buffer)
        b.cap *= 2;
    b.items = calloc(b.cap, sizeof *b.items);
    b.tree = calloc(2 * b.cap, sizeof *b.tree);
    pthread_t *th = calloc(c->workers + 1, sizeof *th);
    if (!b.items || !b.tree || !th) {
        fprintf(stderr, "out of memory\n");
        return -1;
    }
    pthread_mutex_init(&b.lock, NULL);
    pthread_mutex_init(&b.w_lock, NULL);
    pthread_cond_init(&b.learner_cv, NULL);
    pthread_cond_init(&b.env_cv, NULL);
    b.st.t0 = b.st.t_print = now_s();
    pthread_create(&th[c->workers], NULL, base_learner, &b);
    for (unsigned i = 0; i < c->workers; i++)
        pthread_create(&th[i], NULL, base_env, &b);
    for (;;) {
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        double t = now_s();
        pthread_mutex_lock(&b.lock);
        bool over = b.fail || run_over(&b.st, c, t);
        if (!over && t - b.st.t_print >= 1)
            print_second(&b.st, t);
        if (over) {
            b.stop = true;
            pthread_cond_broadcast(&b.learner_cv);
            pthread_cond_broadcast(&b.env_cv);
        }
        pthread_mutex_unlock(&b.lock);
        if (over)
            break;
    }
    for (unsigned i = 0; i <= c->workers; i++)
        pthread_join(th[i], NULL);
    fill_result(&b.st, now_s(), res);
    pthread_mutex_destroy(&b.lock);
    pthread_mutex_destroy(&b.w_lock);
    pthread_cond_destroy(&b.learner_cv);
    pthread_cond_destroy(&b.env_cv);
    free(th);
    free(b.items);
    free(b.tree);
    return b.fail ? -1 : 0;
}

/* ------------------------------------------------------------ the bound */

/* Single-thread costs in CPU seconds: cs of an env step with its policy,
 * bookkeeping and push, cu of a learner update (sample, learn, priorities). */
static int measure_costs(hive_t *h, const run_cfg_t *c, double *cs, double *cu)
{
    enum { N = 16 };
    hive_env_class_t cls = demo_class();
    _Alignas(64) demo_env_t envs[N];
    float obs[4 * N], rew[N], w[NW] = { 0 };
    uint8_t done[N] = { 0 };
    int32_t slot[N], acts[N];
    transition_t tr[N];
    tracker_t tk = { 0 };
    hive_replay_t *rb = NULL;
    hive_replay_config_t rc = { .capacity = c->buffer, .item_size = sizeof(transition_t),
                                .prioritized = 1, .alpha = 0.6, .beta = 0.4, .seed = c->seed };
    if (tracker_init(&tk, N, c->seed) != 0 || hive_replay_new(h, &rc, &rb) != HIVE_OK)
        return -1;
    memset(envs, 0, sizeof envs);
    for (int i = 0; i < N; i++) {
        cls.init(&envs[i], &c->cost_ns, (unsigned)i);
        cls.reset(&envs[i], c->seed + (uint64_t)i, obs + 4 * i);
        slot[i] = i;
    }
    uint64_t steps = 0;
    double t0 = thread_cpu_s(), t;
    while ((t = thread_cpu_s()) - t0 < 0.3 || steps < 2 * MIN_FILL) {
        size_t m = on_batch(&tk, w, 0, N, slot, obs, rew, done, acts, tr);
        for (int i = 0; i < N; i++) {
            int d = 0;
            cls.step(&envs[i], &acts[i], obs + 4 * i, &rew[i], &d);
            done[i] = d != 0;
            if (d)
                cls.reset(&envs[i], c->seed + steps + (uint64_t)i, obs + 4 * i);
        }
        hive_replay_push_batch(rb, tr, m);
        tk.nrets = 0;
        steps += N;
    }
    *cs = (t - t0) / (double)steps;
    learner_t *l = calloc(1, sizeof *l);
    if (l == NULL)
        return -1;
    l->a.rb = rb;
    l->rng = c->seed;
    uint64_t updates = 0;
    t0 = thread_cpu_s();
    while ((t = thread_cpu_s()) - t0 < 0.3) {
        for (int i = 0; i < 16; i++) {    /* no publishing: the cost of a publish is 1/250th */
            uint64_t keys[BATCH];
            double iw[BATCH], prio[BATCH];
            hive_replay_sample(rb, BATCH, &l->rng, l->batch, keys, iw, 0);
            learn_batch(l->w, l->target, l->batch, iw, prio);
            hive_replay_update_priorities(rb, keys, prio, BATCH);
        }
        updates += 16;
    }
    *cu = (t - t0) / (double)updates;
    free(l);
    tracker_free(&tk);
    hive_replay_free(rb);
    return 0;
}

/* ------------------------------------------------------------ main */

/* efficiency: updates/s against the bound; CPU efficiency: the CPU the
 * updates and their env steps need on one thread (cpu_per_update) against
 * the CPU the run used - what the run made of the cores it got. */
static void print_result(const char *who, const result_t *r, double bound, double cpu_per_update)
{
    double u = r->updates / r->seconds;
    printf("  %-9s %7.0f learner updates/s, %8.0f env steps/s, samples/insert %.2f, policy lag %.2f\n"
           "  %-9s efficiency %.2f of the bound; %.2f cores used, CPU efficiency %.2f\n", who, u,
           r->steps / r->seconds, r->steps > 0 ? r->updates * BATCH / r->steps : 0, r->lag, "",
           u / bound, r->cpu / r->seconds, r->cpu > 0 ? r->updates * cpu_per_update / r->cpu : 0);
}

static void print_learned(const char *who, const result_t *r)
{
    if (r->solved_at > 0)
        printf("%s: learned (mean return of 100 episodes >= %.0f) at %.1f s; %.0f learner updates/s\n",
               who, SOLVED, r->solved_at, r->updates / r->seconds);
    else
        printf("%s: NOT learned (best mean return of 100 episodes %.1f); %.0f learner updates/s\n",
               who, r->best100, r->updates / r->seconds);
}

static void add_result(result_t *sum, const result_t *r)
{
    sum->seconds += r->seconds;
    sum->steps += r->steps;
    sum->updates += r->updates;
    sum->publishes += r->publishes;
    sum->lag += r->lag * r->steps;
    sum->cpu += r->cpu;          /* weighted by steps; divided at the end */
}

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [--envs N] [--rounds R] [--duration S] [--baseline S] "
            "[--max-duration S] [--spi R] [--env-cost-us U] [--buffer N] [--seed N] [--check]\n",
            argv0);
}

int main(int argc, char **argv)
{
    run_cfg_t c = { .duration = 3, .max_duration = 60, .spi = 8, .buffer = 100000, .seed = 1 };
    double baseline = 3, cost_us = 0;
    int check = 0, rounds = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--envs") && i + 1 < argc) c.nenv = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--duration") && i + 1 < argc) c.duration = atof(argv[++i]);
        else if (!strcmp(argv[i], "--baseline") && i + 1 < argc) baseline = atof(argv[++i]);
        else if (!strcmp(argv[i], "--max-duration") && i + 1 < argc) c.max_duration = atof(argv[++i]);
        else if (!strcmp(argv[i], "--spi") && i + 1 < argc) c.spi = atof(argv[++i]);
        else if (!strcmp(argv[i], "--env-cost-us") && i + 1 < argc) cost_us = atof(argv[++i]);
        else if (!strcmp(argv[i], "--buffer") && i + 1 < argc) c.buffer = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) c.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--check")) check = 1;
        else {
            usage(argv[0]);
            return 2;
        }
    }
    if (!(c.spi > 0 && c.spi <= 1000) || !(cost_us >= 0 && cost_us <= 1e6) || c.buffer < MIN_FILL ||
        rounds < 1 || rounds > 100 || !(c.duration > 0) || !(baseline >= 0)) {
        fprintf(stderr, "--spi must be in (0, 1000], --env-cost-us in [0, 1e6], --buffer >= %d, "
                "--rounds in 1 .. 100, --duration > 0, --baseline >= 0\n", MIN_FILL);
        return 2;
    }
    if (c.max_duration < c.duration)
        c.max_duration = c.duration;
    c.cost_ns = (uint64_t)(cost_us * 1000);
    if (hive_env_cartpole.state_size > sizeof(((demo_env_t *)0)->cp)) {
        fprintf(stderr, "CartPole's state (%zu bytes) outgrew the demo's wrapper\n",
                hive_env_cartpole.state_size);
        return 1;
    }
    cpu_set_t cpus;
    c.workers = 1;
    if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 1)
        c.workers = CPU_COUNT(&cpus) < 256 ? (unsigned)CPU_COUNT(&cpus) : 256;
    run_cfg_t bc = c;                        /* the baseline's runs */
    bc.duration = baseline;
    if (check)
        bc.max_duration = baseline;          /* the check asks hive's runs to learn */
    if (bc.max_duration < bc.duration)
        bc.max_duration = bc.duration;
    /* a worker per core for the sampler and the environments and one for
     * the learner, as the baseline has a thread per core and a learner
     * thread; unpinned, as the baseline's threads */
    hive_config_t cfg = { .store_bytes = 512u << 20, .workers = c.workers + 1, .no_pin = 1 };
    if (c.nenv == 0)
        c.nenv = 16 * c.workers;
    if (c.nenv < 2)
        c.nenv = 2;
    bc.nenv = c.nenv;
    double cs, cu;
    hive_t *h;
    if (hive_init(&cfg, &h) != HIVE_OK || measure_costs(h, &c, &cs, &cu) != 0) {
        fprintf(stderr, "measuring: %s\n", hive_last_error());
        return 1;
    }
    hive_shutdown(h);
    double cpu_per_update = cu + (BATCH / c.spi) * cs;
    double bound = fmin(1 / cu, c.workers / cpu_per_update);
    printf("CartPole + %g us of physics per step, linear Q policy, samples/insert %g, batch %d\n",
           cost_us, c.spi, BATCH);
    printf("one thread: env step + policy %.3f us, learner update %.2f us -> bound on %u cores: "
           "%.0f updates/s\n", cs * 1e6, cu * 1e6, c.workers, bound);
    printf("hive: %u workers; on each of workers 0..%u a sampler actor with an env pool of %u envs "
           "(async, batches of %u, stepped on its worker), a learner actor on worker %u\n",
           c.workers + 1, c.workers - 1, c.nenv / c.workers, c.nenv / c.workers / 2, c.workers);
    if (baseline > 0)
        printf("baseline: %u pthreads stepping slices of the same envs, a learner thread, a "
               "mutex-protected buffer, weights copied under a lock\n", c.workers);
    result_t hsum = { 0 }, bsum = { 0 };
    int hlearned = 0, blearned = 0;
    /* hive and the baseline take turns, first one then the other, so that
     * a loaded machine's swings fall on both alike; each run starts from
     * scratch and must learn */
    for (int round = 0; round < rounds; round++) {
        run_cfg_t hc = c, bcr = bc;
        hc.seed = bcr.seed = c.seed + (uint64_t)round;
        for (int k = 0; k < 2; k++) {
            result_t r = { 0 };
            double cpu0 = cpu_s();
            if ((k + round) % 2 == 0) {
                printf("round %d/%d: hive\n", round + 1, rounds);
                if (hive_init(&cfg, &h) != HIVE_OK) {
                    fprintf(stderr, "hive_init: %s\n", hive_last_error());
                    return 1;
                }
                int rc = run_hive(h, &hc, &r);
                hive_shutdown(h);            /* its workers must not take the baseline's cores */
                if (rc != 0)
                    return 1;
                r.cpu = cpu_s() - cpu0;
                print_learned("hive", &r);
                add_result(&hsum, &r);
                hlearned += r.solved_at > 0;
            } else if (baseline > 0) {
                printf("round %d/%d: baseline\n", round + 1, rounds);
                if (run_baseline(&bcr, &r) != 0)
                    return 1;
                r.cpu = cpu_s() - cpu0;
                print_learned("baseline", &r);
                add_result(&bsum, &r);
                blearned += r.solved_at > 0;
            }
        }
    }
    hsum.lag = hsum.steps > 0 ? hsum.lag / hsum.steps : 0;
    bsum.lag = bsum.steps > 0 ? bsum.lag / bsum.steps : 0;
    printf("\nsummary (%d rounds, samples/insert %g, bound %.0f updates/s)\n", rounds, c.spi, bound);
    print_result("hive:", &hsum, bound, cpu_per_update);
    if (baseline > 0) {
        print_result("baseline:", &bsum, bound, cpu_per_update);
        printf("  hive / baseline = %.2f (learner updates/s at the same samples/insert)\n",
               (hsum.updates / hsum.seconds) / (bsum.updates / bsum.seconds + 1e-9));
    }
    printf("  learned: hive %d/%d runs", hlearned, rounds);
    if (baseline > 0)
        printf(", baseline %d/%d runs", blearned, rounds);
    printf("\n");
    if (check) {
        int ok = hsum.steps > 0 && hsum.updates > 0 && hsum.publishes > 0 && hlearned == rounds;
        printf("check: %s (steps %.0f, learner updates %.0f, publishes %.0f, learned in %d of %d "
               "runs)\n", ok ? "ok" : "FAILED", hsum.steps, hsum.updates, hsum.publishes, hlearned,
               rounds);
        return ok ? 0 : 1;
    }
    return 0;
}
