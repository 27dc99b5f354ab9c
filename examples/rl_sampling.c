/*
 * rl_sampling.c - the job hive is for: many environment actors stepping in
 * parallel, writing transitions into one shared replay buffer, and a learner
 * that samples it (prioritized, at HIGH priority so it never waits behind
 * the environments) and publishes weights that every environment reads
 * without a lock. Then the same pipeline as a plain pthread program would
 * write it (a mutex around the buffer, weights copied under a lock), and the
 * ratio between the two.
 *
 *   make demo                    (build/examples/rl_sampling)
 *   rl_sampling [--actors N] [--duration S] [--baseline S] [--buffer N] [--seed N] [--check]
 *
 * The environment is CartPole with the classic physics and termination
 * rules (Barto, Sutton & Anderson 1983; the constants of Gym's CartPole-v1,
 * 500-step limit), deterministic by seed. The policy is epsilon-greedy over a
 * linear Q function of 10 features (the state, its squares and the pole's
 * angle x angular velocity); the learner does Q-learning with the last
 * published weights as the target network, and priorities |TD error|.
 */
#include <hive.h>

#include <math.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ CartPole */

/* The physics is the library's (hive_env_cartpole, src/rl/cartpole.c);
 * this wrapper keeps its state, its observation and the demo's own RNG
 * (exploration and episode seeds). */
typedef struct cartpole {
    _Alignas(16) unsigned char state[128];   /* >= hive_env_cartpole.state_size (checked in main) */
    float    obs[4];
    int      steps;
    uint64_t rng;
} cartpole_t;

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

static void cp_reset(cartpole_t *c)
{
    hive_env_cartpole.reset(c->state, rng_next(&c->rng), c->obs);
    c->steps = 0;
}

/* One step; 1 if the pole fell or the cart left the track (the 500-step
 * time limit is not a fall: run_chunk ends the episode on it itself). */
static int cp_step(cartpole_t *c, int action)
{
    int32_t a = action;
    float r;
    int done;
    hive_env_cartpole.step(c->state, &a, c->obs, &r, &done);
    c->steps++;
    return done && c->steps < 500;
}

/* ------------------------------------------------------------ policy */

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

/* Exploration falls with the policy version the actor runs. */
static double epsilon_of(uint64_t version)
{
    return 0.02 + 0.98 * exp(-(double)version / 12.0);
}

typedef struct chunk_stats {               /* what one run of an environment reports */
    uint64_t steps, episodes;
    double   return_sum;
    uint64_t version, lag;
} chunk_stats_t;

/* Step env for n steps with weights w, writing transitions into out. */
static void run_chunk(cartpole_t *env, double *ep_return, const float *w, uint64_t version,
                      transition_t *out, int n, chunk_stats_t *st)
{
    double eps = epsilon_of(version);
    for (int i = 0; i < n; i++) {
        transition_t *t = &out[i];
        memcpy(t->s, env->obs, sizeof t->s);
        int a = urand(&env->rng) < eps ? (int)(rng_next(&env->rng) & 1)
                                       : qvalue(w, t->s, 1) > qvalue(w, t->s, 0);
        int fell = cp_step(env, a);
        t->a = (float)a;
        t->r = 1;
        memcpy(t->s2, env->obs, sizeof t->s2);
        t->done = (float)fell;              /* a time limit is not a terminal state */
        t->pad = 0;
        *ep_return += 1;
        if (fell || env->steps >= 500) {
            st->episodes++;
            st->return_sum += *ep_return;
            *ep_return = 0;
            cp_reset(env);
        }
    }
    st->steps += (uint64_t)n;
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

#define CHUNK          1000                /* env steps per call */
#define LEARN_BATCHES  50                  /* learner batches per call */
#define PUBLISH_EVERY  250                 /* learner batches per published version */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ hive pipeline */

typedef struct shared {                    /* what every actor needs, passed by value */
    hive_replay_t *rb;
    hive_ref_t     weights;                /* the cell the learner publishes into */
    uint64_t       seed;
} shared_t;

typedef struct env_actor {
    shared_t     sh;
    cartpole_t   env;
    double       ep_return;
    transition_t out[CHUNK];
} env_actor_t;

static int env_init(void *self, hive_ctx_t *ctx)
{
    env_actor_t *e = self;
    e->sh = *(const shared_t *)hive_arg(ctx, 0, NULL);
    e->env.rng = e->sh.seed * 0x9E3779B97F4A7C15ull + 1;
    cp_reset(&e->env);
    return 0;
}

/* Step CHUNK steps with the latest weights, push them, report. */
static int env_run(void *self, hive_ctx_t *ctx)
{
    env_actor_t *e = self;
    hive_t *h = hive_engine(ctx);
    hive_ref_t v;
    uint64_t version;
    const void *w;
    chunk_stats_t st = { 0 };
    if (hive_cell_acquire(h, e->sh.weights, &v, &version) != HIVE_OK ||
        hive_get(h, v, 0, &w, NULL) != HIVE_OK)
        return 1;
    run_chunk(&e->env, &e->ep_return, w, version, e->out, CHUNK, &st);
    hive_release(h, v);                    /* the old version goes once nobody holds it */
    if (hive_replay_push_batch(e->sh.rb, e->out, CHUNK) != HIVE_OK)
        return 1;
    uint64_t latest;                       /* policy lag: publishes since the one we used */
    if (hive_cell_acquire(h, e->sh.weights, &v, &latest) == HIVE_OK) {
        hive_release(h, v);
        st.lag = latest - version;
    }
    st.version = version;
    return hive_return(ctx, &st, sizeof st);
}

typedef struct learner {
    shared_t     sh;
    float        w[NW], target[NW];
    uint64_t     batches, version;
    uint64_t     rng;
    transition_t batch[BATCH];
} learner_t;

static int learner_init(void *self, hive_ctx_t *ctx)
{
    learner_t *l = self;
    l->sh = *(const shared_t *)hive_arg(ctx, 0, NULL);
    l->rng = l->sh.seed ^ 0xabcdefull;
    return 0;
}

/* LEARN_BATCHES prioritized batches; publish every PUBLISH_EVERY. */
static int learner_learn(void *self, hive_ctx_t *ctx)
{
    learner_t *l = self;
    hive_t *h = hive_engine(ctx);
    uint64_t keys[BATCH], done = 0;
    double iw[BATCH], prio[BATCH];
    for (int i = 0; i < LEARN_BATCHES; i++) {
        int rc = hive_replay_sample(l->sh.rb, BATCH, &l->rng, l->batch, keys, iw, 0);
        if (rc == HIVE_ETIMEDOUT || rc == HIVE_EINVAL)
            break;                          /* not enough data yet */
        if (rc != HIVE_OK)
            return 1;
        learn_batch(l->w, l->target, l->batch, iw, prio);
        if (hive_replay_update_priorities(l->sh.rb, keys, prio, BATCH) < 0)
            return 1;
        done++;
        if (++l->batches % PUBLISH_EVERY == 0) {
            hive_ref_t v;                   /* a new version: put, publish, drop our count */
            if (hive_put(h, l->w, sizeof l->w, &v) != HIVE_OK)
                return 1;
            int prc = hive_cell_publish(h, l->sh.weights, v);
            hive_release(h, v);
            if (prc != HIVE_OK)
                return 1;
            memcpy(l->target, l->w, sizeof l->w);
            l->version++;
        }
    }
    return hive_return(ctx, &done, sizeof done);
}

static const hive_method_t env_methods[] = { { "run", env_run, HIVE_PRIO_NORMAL } };
static const hive_actor_class_t env_class = {
    .name = "CartPoleEnv", .size = sizeof(env_actor_t), .init = env_init,
    .methods = env_methods, .nmethods = 1,
};
/* HIGH by default: a learn call jumps every queued environment call */
static const hive_method_t learner_methods[] = { { "learn", learner_learn, HIVE_PRIO_HIGH } };
static const hive_actor_class_t learner_class = {
    .name = "Learner", .size = sizeof(learner_t), .init = learner_init,
    .methods = learner_methods, .nmethods = 1,
};

typedef struct result {
    double   seconds, steps, updates, publishes, first_return, last_return;
} result_t;

#define FAIL(what) do { fprintf(stderr, "%s: %s\n", what, hive_last_error()); return -1; } while (0)

static int run_hive(hive_t *h, unsigned nenv, double duration, uint64_t buffer, uint64_t seed,
                    result_t *res)
{
    hive_replay_config_t rc = { .capacity = buffer, .item_size = sizeof(transition_t),
                                .prioritized = 1, .alpha = 0.6, .beta = 0.4, .seed = seed };
    hive_replay_t *rb;
    if (hive_replay_new(h, &rc, &rb) != HIVE_OK)
        FAIL("hive_replay_new");
    float zero[NW] = { 0 };
    hive_ref_t w0, cell;
    if (hive_put(h, zero, sizeof zero, &w0) != HIVE_OK || hive_cell_new(h, w0, &cell) != HIVE_OK)
        FAIL("weights");
    hive_release(h, w0);
    shared_t sh = { .rb = rb, .weights = cell, .seed = seed };
    hive_actor_t learner, *envs = calloc(nenv, sizeof *envs);
    hive_ref_t *inflight = calloc(nenv + 1, sizeof *inflight);
    if (hive_actor_new(h, &learner_class, &HIVE_VAL(sh), 1, NULL, &learner) != HIVE_OK)
        FAIL("learner");
    for (unsigned i = 0; i < nenv; i++) {
        shared_t mine = sh;
        mine.seed = seed + 1000 + i;
        if (hive_actor_new(h, &env_class, &HIVE_VAL(mine), 1, NULL, &envs[i]) != HIVE_OK)
            FAIL("env actor");
    }
    double t0 = now_s(), next_print = t0 + 1, ret_sum = 0, last_lag = 0;
    uint64_t steps = 0, updates = 0, episodes = 0, lag_sum = 0, chunks = 0, version = 0;
    uint64_t ps = 0, pu = 0;
    double win_ret = 0, win_eps = 0, first_sum = 0, first_eps = 0;
    for (;;) {
        bool stop = now_s() - t0 >= duration;
        for (unsigned i = 0; i <= nenv; i++) {
            if (inflight[i].id == 0 && !stop &&
                (i == nenv ? hive_call(h, learner, 0, NULL, 0, NULL, &inflight[i])
                           : hive_call(h, envs[i], 0, NULL, 0, NULL, &inflight[i])) != HIVE_OK)
                FAIL("hive_call");
        }
        unsigned char ready[65];
        hive_ref_t refs[65];
        unsigned map[65], n = 0;
        for (unsigned i = 0; i <= nenv && n < 65; i++)
            if (inflight[i].id) {
                refs[n] = inflight[i];
                map[n++] = i;
            }
        if (n == 0)
            break;                          /* stopped and drained */
        int got = hive_wait(h, refs, n, 1, 2000000, ready);
        for (unsigned k = 0; got > 0 && k < n; k++) {
            if (!ready[k])
                continue;
            unsigned i = map[k];
            const void *p;
            if (hive_get(h, inflight[i], 0, &p, NULL) != HIVE_OK)
                FAIL(i == nenv ? "learn" : "env run");
            if (i == nenv) {
                updates += *(const uint64_t *)p;
            } else {
                const chunk_stats_t *st = p;
                steps += st->steps;
                episodes += st->episodes;
                ret_sum += st->return_sum;
                win_ret += st->return_sum;
                win_eps += (double)st->episodes;
                if (first_eps < 200) {          /* the untrained policy: the first 200 episodes */
                    first_sum += st->return_sum;
                    first_eps += (double)st->episodes;
                }
                lag_sum += st->lag;
                chunks++;
                if (st->version > version)
                    version = st->version;
            }
            hive_release(h, inflight[i]);
            inflight[i].id = 0;
        }
        double t = now_s();
        if (t >= next_print) {
            hive_replay_stats_t rs;
            hive_replay_stats(rb, &rs);
            double avg = win_eps > 0 ? win_ret / win_eps : 0;
            last_lag = chunks ? (double)lag_sum / (double)chunks : 0;
            printf("[%4.1fs] env steps/s %9.0f | buffer %6llu/%llu | policy v%-4llu lag %.2f | "
                   "learner updates/s %7.0f | avg return %6.1f\n",
                   t - t0, (double)(steps - ps) / (t - next_print + 1), (unsigned long long)rs.size,
                   (unsigned long long)rs.capacity, (unsigned long long)version, last_lag,
                   (double)(updates - pu) / (t - next_print + 1), avg);
            ps = steps;
            pu = updates;
            res->last_return = avg;
            win_ret = win_eps = 0;
            next_print += 1;
        }
    }
    res->seconds = now_s() - t0;
    res->steps = (double)steps;
    res->updates = (double)updates;
    res->publishes = (double)version;
    res->first_return = first_eps > 0 ? first_sum / first_eps : 0;
    printf("hive: %llu env steps, %llu episodes, %llu learner batches, %llu weight versions, "
           "mean policy lag %.2f versions\n", (unsigned long long)steps, (unsigned long long)episodes,
           (unsigned long long)updates, (unsigned long long)version, last_lag);
    hive_replay_free(rb);
    hive_release(h, cell);
    free(envs);
    free(inflight);
    return 0;
}

/* ------------------------------------------------------------ the pthread baseline */

/* What a plain pthread program does: one mutex around a ring buffer with a
 * sum tree for priorities, and the weights copied under another mutex. */
typedef struct base {
    pthread_mutex_t buf_lock, w_lock;
    transition_t   *items;
    double         *tree;                   /* sum tree: leaves at [cap, 2 cap) */
    uint64_t        cap, inserts;
    double          max_prio;
    float           w[NW];
    uint64_t        version;
    _Atomic int     stop;
    uint64_t        steps, updates;
    uint64_t        seed;
} base_t;

static void tree_set(base_t *b, uint64_t leaf, double v)
{
    uint64_t i = leaf + b->cap;
    double d = v - b->tree[i];
    for (; i >= 1; i /= 2)
        b->tree[i] += d;
}

static void *base_env(void *arg)
{
    base_t *b = arg;
    cartpole_t env = { .rng = __atomic_add_fetch(&b->seed, 7919, __ATOMIC_RELAXED) };
    cp_reset(&env);
    double ep = 0;
    transition_t *out = malloc(CHUNK * sizeof *out);
    float w[NW];
    while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
        pthread_mutex_lock(&b->w_lock);
        memcpy(w, b->w, sizeof w);
        uint64_t version = b->version;
        pthread_mutex_unlock(&b->w_lock);
        chunk_stats_t st = { 0 };
        run_chunk(&env, &ep, w, version, out, CHUNK, &st);
        pthread_mutex_lock(&b->buf_lock);
        for (int i = 0; i < CHUNK; i++) {
            uint64_t row = b->inserts++ % b->cap;
            b->items[row] = out[i];
            tree_set(b, row, pow(b->max_prio, 0.6));
        }
        b->steps += CHUNK;
        pthread_mutex_unlock(&b->buf_lock);
    }
    free(out);
    return NULL;
}

static void *base_learner(void *arg)
{
    base_t *b = arg;
    float w[NW] = { 0 }, target[NW] = { 0 };
    transition_t batch[BATCH];
    uint64_t rows[BATCH], rng = __atomic_load_n(&b->seed, __ATOMIC_RELAXED) ^ 0xabcdef;
    double iw[BATCH], prio[BATCH];
    while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
        pthread_mutex_lock(&b->buf_lock);
        uint64_t held = b->inserts < b->cap ? b->inserts : b->cap;
        if (held < BATCH) {
            pthread_mutex_unlock(&b->buf_lock);
            continue;
        }
        double total = b->tree[1], maxw = 0;
        for (int k = 0; k < BATCH; k++) {   /* stratified proportional sampling */
            double u = (k + urand(&rng)) * total / BATCH;
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
        pthread_mutex_unlock(&b->buf_lock);
        for (int k = 0; k < BATCH; k++)
            iw[k] /= maxw;
        learn_batch(w, target, batch, iw, prio);
        pthread_mutex_lock(&b->buf_lock);
        for (int k = 0; k < BATCH; k++) {
            tree_set(b, rows[k], pow(prio[k], 0.6));
            if (prio[k] > b->max_prio)
                b->max_prio = prio[k];
        }
        b->updates++;
        uint64_t u = b->updates;
        pthread_mutex_unlock(&b->buf_lock);
        if (u % PUBLISH_EVERY == 0) {
            pthread_mutex_lock(&b->w_lock);
            memcpy(b->w, w, sizeof w);
            b->version++;
            pthread_mutex_unlock(&b->w_lock);
            memcpy(target, w, sizeof w);
        }
    }
    return NULL;
}

static void run_baseline(unsigned nenv, double duration, uint64_t buffer, uint64_t seed, result_t *res)
{
    base_t b = { .cap = 1, .max_prio = 1.0, .seed = seed };
    while (b.cap < buffer)
        b.cap *= 2;
    b.items = calloc(b.cap, sizeof *b.items);
    b.tree = calloc(2 * b.cap, sizeof *b.tree);
    pthread_mutex_init(&b.buf_lock, NULL);
    pthread_mutex_init(&b.w_lock, NULL);
    pthread_t *th = calloc(nenv + 1, sizeof *th);
    double t0 = now_s();
    pthread_create(&th[nenv], NULL, base_learner, &b);
    for (unsigned i = 0; i < nenv; i++)
        pthread_create(&th[i], NULL, base_env, &b);
    struct timespec ts = { (time_t)duration, (long)((duration - (time_t)duration) * 1e9) };
    nanosleep(&ts, NULL);
    atomic_store(&b.stop, 1);
    for (unsigned i = 0; i <= nenv; i++)
        pthread_join(th[i], NULL);
    res->seconds = now_s() - t0;
    res->steps = (double)b.steps;
    res->updates = (double)b.updates;
    res->publishes = (double)b.version;
    free(th);
    free(b.items);
    free(b.tree);
}

/* ------------------------------------------------------------ main */

static double raw_steps_per_second(uint64_t seed)
{
    cartpole_t env = { .rng = seed | 1 };
    cp_reset(&env);
    float w[NW] = { 0 };
    double ep = 0;
    transition_t *out = malloc(CHUNK * sizeof *out);
    chunk_stats_t st = { 0 };
    double t0 = now_s(), t;
    while ((t = now_s()) - t0 < 1.0)
        run_chunk(&env, &ep, w, 0, out, CHUNK, &st);
    free(out);
    return (double)st.steps / (t - t0);
}

int main(int argc, char **argv)
{
    unsigned actors = 0;
    double duration = 12, baseline = 6;
    uint64_t buffer = 100000, seed = 1;
    int check = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--actors") && i + 1 < argc) actors = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--duration") && i + 1 < argc) duration = atof(argv[++i]);
        else if (!strcmp(argv[i], "--baseline") && i + 1 < argc) baseline = atof(argv[++i]);
        else if (!strcmp(argv[i], "--buffer") && i + 1 < argc) buffer = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--check")) check = 1;
        else {
            fprintf(stderr, "usage: %s [--actors N] [--duration S] [--baseline S] [--buffer N] "
                    "[--seed N] [--check]\n", argv[0]);
            return 2;
        }
    }
    if (hive_env_cartpole.state_size > sizeof(((cartpole_t *)0)->state)) {
        fprintf(stderr, "CartPole's state (%zu bytes) outgrew the demo's wrapper\n",
                hive_env_cartpole.state_size);
        return 1;
    }
    hive_config_t cfg = { .store_bytes = 512u << 20 };
    hive_t *h;
    if (hive_init(&cfg, &h) != HIVE_OK) {
        fprintf(stderr, "hive_init: %s\n", hive_last_error());
        return 1;
    }
    if (actors == 0)
        actors = hive_num_workers(h);
    if (actors > 64)
        actors = 64;
    double raw = raw_steps_per_second(seed);
    printf("CartPole, linear Q policy: %.0f env steps/s on one thread (raw)\n", raw);
    printf("hive: %u env actors + 1 learner on %u workers, buffer %llu, %.0f s\n", actors,
           hive_num_workers(h), (unsigned long long)buffer, duration);
    result_t hr = { 0 }, br = { 0 };
    if (run_hive(h, actors, duration, buffer, seed, &hr) != 0)
        return 1;
    hive_shutdown(h);
    double hive_sps = hr.steps / hr.seconds;
    printf("baseline: the same pipeline with pthreads, a mutex-protected buffer and weights copied "
           "under a lock, %.0f s\n", baseline);
    if (baseline > 0)
        run_baseline(actors, baseline, buffer, seed, &br);
    double base_sps = br.seconds > 0 ? br.steps / br.seconds : 0;
    printf("\nsummary\n");
    printf("  hive:     %10.0f env steps/s, %8.0f learner batches/s, %4.0f weight versions, "
           "avg return %.1f (first 200 episodes) -> %.1f (last full second)\n", hive_sps, hr.updates / hr.seconds, hr.publishes,
           hr.first_return, hr.last_return);
    printf("  parallel efficiency: %.2f  (pipeline steps/s / (%u actors x %.0f raw steps/s))\n",
           hive_sps / (actors * raw), actors, raw);
    if (base_sps > 0)
        printf("  baseline: %10.0f env steps/s, %8.0f learner batches/s  ->  hive / baseline = %.2f "
               "(steps), %.2f (learner batches)\n", base_sps, br.updates / br.seconds,
               hive_sps / base_sps, (hr.updates / hr.seconds) / (br.updates / br.seconds + 1e-9));
    if (check) {
        int ok = hr.steps > 0 && hr.updates > 0 && hr.publishes > 0;
        printf("check: %s (steps %.0f, learner batches %.0f, publishes %.0f)\n", ok ? "ok" : "FAILED",
               hr.steps, hr.updates, hr.publishes);
        return ok ? 0 : 1;
    }
    return 0;
}
