/*
 * bench_replay.c - the replay buffer (src/rl/replay.c) against what a plain
 * pthread program would write: a ring buffer and sum tree behind one mutex.
 *
 *   hive   hive_replay_push / push_batch / sample / update_priorities:
 *          lock-free pushes (one fetch-and-add, a per-row seqlock), lock-free
 *          sampling, and an 8-ary sum tree (a cache line per group) that
 *          pushes and updates mark and the next sample brings up to date.
 *   mutex  the same ring, RNG and sampling rules with a plain binary sum
 *          tree (as PER implementations keep one), every call under one
 *          pthread mutex (sampling copies its whole batch under it). It
 *          gives its users what hive's give theirs: sampling returns keys
 *          (insertion numbers, not rows), a priority update for a key whose
 *          item was overwritten is dropped, samples are counted (hive's
 *          stats), and a push takes the cached max priority^alpha rather
 *          than calling pow each time (as hive does).
 *
 * Items are CartPole transitions: obs[4], action, reward, next_obs[4], done
 * (11 floats, 44 bytes) padded to 48. Buffers hold 65536 of them, and every
 * benchmark starts from a full one, so pushes overwrite.
 *
 * Families (items_per_second counts items pushed or sampled):
 *   replay_push/<impl>/producers:N              N threads push single items
 *   replay_push_batch32/<impl>/producers:N      N threads push batches of 32
 *   replay_push_prioritized/<impl>/producers:N  single pushes, prioritized
 *                                               buffer (the sum tree path too)
 *   replay_sample_uniform/<impl>/batch:256      one thread samples batches
 *   replay_sample_prioritized/<impl>/batch:256  the same, prioritized, then
 *                                               updates the batch's priorities
 *   replay_mixed/<impl>/producers:1             a learner and a producer at
 *       a fixed ratio, as a rate limiter would hold them: the learner runs
 *       64 steps of the prioritized case (16384 samples) while one producer
 *       thread pushes 2048 items in batches of 32 (8 samples per insert,
 *       the batches an environment actor would push); an iteration ends
 *       when both are done. Items are sampled items. With a lock the two take
 *       turns; without one they overlap.
 *
 * Every family uses manual (wall-clock) time: a thread that waits for a lock
 * uses no CPU, so CPU time would flatter the mutex. Push iterations run from
 * the moment all N threads are released to the moment the last one has
 * pushed its share of PUSH_ITEMS; sampling iterations are one learner step
 * each, and replay_mixed iterations one run of both threads.
 */
#include "shim.h"
#include "benches.h"

#include <hive.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CAP        65536u
#define PUSH_ITEMS (1u << 20)          /* per push iteration, over all producers */
#define BATCH      256
#define ALPHA      0.6
#define BETA       0.4

typedef struct transition {            /* CartPole: 44 bytes of floats, padded to 48 */
    float obs[4], action, reward, next_obs[4], done, pad;
} transition_t;

enum impl { HIVE, MUTEX };

static hive_t *engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void engine_start(void)
{
    hive_config_t cfg = { .workers = 1, .store_bytes = 256u << 20 };
    if (hive_init(&cfg, &engine) != HIVE_OK) {
        fprintf(stderr, "bench_replay: hive_init: %s\n", hive_last_error());
        exit(1);
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* splitmix64, as the buffer uses */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

static void make_item(transition_t *t, uint64_t i)
{
    for (int k = 0; k < 4; k++) {
        t->obs[k] = (float)(i + (uint64_t)k);
        t->next_obs[k] = (float)(i + (uint64_t)k + 1);
    }
    t->action = (float)(i & 1);
    t->reward = 1.0f;
    t->done = (i % 200) == 199;
    t->pad = 0;
}

/* ------------------------------------------------------------ mutex peer */

typedef struct mring {
    pthread_mutex_t lock;
    unsigned char  *data;
    uint64_t        next, fill, leaves, samples;
    double         *tree;               /* NULL: uniform */
    double          max_prio, max_leaf; /* max_leaf = max_prio ^ ALPHA, kept as pushes need it */
} mring_t;

static void m_set_leaf(mring_t *m, uint64_t row, double v)
{
    uint64_t i = m->leaves + row;
    m->tree[i] = v;
    for (i >>= 1; i >= 1; i >>= 1)
        m->tree[i] = m->tree[2 * i] + m->tree[2 * i + 1];
}

static mring_t *m_new(bool prioritized)
{
    mring_t *m = calloc(1, sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
    m->data = calloc(CAP, sizeof(transition_t));
    m->max_prio = 1.0;
    m->max_leaf = 1.0;
    if (prioritized) {
        m->leaves = CAP;                 /* a power of two */
        m->tree = calloc(2 * CAP, sizeof(double));
    }
    return m;
}

static void m_free(mring_t *m)
{
    pthread_mutex_destroy(&m->lock);
    free(m->data);
    free(m->tree);
    free(m);
}

static void m_push_locked(mring_t *m, const transition_t *t)
{
    uint64_t row = m->next++ % CAP;
    memcpy(m->data + row * sizeof *t, t, sizeof *t);
    if (m->fill < CAP)
        m->fill++;
    if (m->tree != NULL)
        m_set_leaf(m, row, m->max_leaf);
}

/* The key row holds (the buffer is full in every benchmark; in general the
 * newest key below next that maps to row). CAP is a power of two. */
static inline uint64_t m_key_of(const mring_t *m, uint64_t row)
{
    return m->next - 1 - ((m->next - 1 - row) & (CAP - 1));
}

static void m_push(mring_t *m, const transition_t *t, size_t n)
{
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < n; i++)
        m_push_locked(m, t + i);
    pthread_mutex_unlock(&m->lock);
}

static uint64_t m_descend(const mring_t *m, double u)
{
    uint64_t i = 1;
    while (i < m->leaves) {
        if (u < m->tree[2 * i] || m->tree[2 * i + 1] <= 0) {
            i = 2 * i;
        } else {
            u -= m->tree[2 * i];
            i = 2 * i + 1;
        }
    }
    return i - m->leaves;
}

static void m_sample(mring_t *m, size_t batch, uint64_t *rng, transition_t *out, uint64_t *keys,
                     double *w)
{
    pthread_mutex_lock(&m->lock);
    m->samples += batch;
    if (m->tree == NULL) {
        for (size_t i = 0; i < batch; i++) {
            uint64_t row = (uint64_t)(((unsigned __int128)rng_next(rng) * m->fill) >> 64);
            memcpy(&out[i], m->data + row * sizeof *out, sizeof *out);
            keys[i] = m_key_of(m, row);
            w[i] = 1.0;
        }
    } else {
        double total = m->tree[1], seg = total / (double)batch, min_leaf = INFINITY;
        for (size_t i = 0; i < batch; i++) {
            uint64_t row = m_descend(m, ((double)i + rng_unit(rng)) * seg);
            memcpy(&out[i], m->data + row * sizeof *out, sizeof *out);
            keys[i] = m_key_of(m, row);
            w[i] = m->tree[m->leaves + row];
            if (w[i] < min_leaf)
                min_leaf = w[i];
        }
        for (size_t i = 0; i < batch; i++)
            w[i] = pow(min_leaf / w[i], BETA);
    }
    pthread_mutex_unlock(&m->lock);
}

/* A key whose row has been pushed over since it was sampled is dropped, as
 * hive drops it (its priority is not meant for the successor). */
static void m_update(mring_t *m, const uint64_t *keys, const double *prio, size_t n)
{
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < n; i++) {
        if (keys[i] + CAP < m->next)
            continue;
        m_set_leaf(m, keys[i] & (CAP - 1), pow(prio[i], ALPHA));
        if (prio[i] > m->max_prio) {
            m->max_prio = prio[i];
            m->max_leaf = pow(prio[i], ALPHA);
        }
    }
    pthread_mutex_unlock(&m->lock);
}

/* ------------------------------------------------------------ both */

typedef struct buf {
    enum impl      impl;
    hive_replay_t *rb;
    mring_t       *m;
} buf_t;

static buf_t buf_new(enum impl impl, bool prioritized)
{
    buf_t b = { .impl = impl };
    if (impl == HIVE) {
        pthread_once(&engine_once, engine_start);
        hive_replay_config_t cfg = { .capacity = CAP, .item_size = sizeof(transition_t),
                                     .prioritized = prioritized, .alpha = ALPHA, .beta = BETA,
                                     .seed = 1 };
        if (hive_replay_new(engine, &cfg, &b.rb) != HIVE_OK) {
            fprintf(stderr, "bench_replay: hive_replay_new: %s\n", hive_last_error());
            exit(1);
        }
    } else {
        b.m = m_new(prioritized);
    }
    return b;
}

static void buf_free(buf_t *b)
{
    if (b->impl == HIVE)
        hive_replay_free(b->rb);
    else
        m_free(b->m);
}

static inline bool buf_push(buf_t *b, const transition_t *t, size_t n)
{
    if (b->impl == HIVE)
        return (n == 1 ? hive_replay_push(b->rb, t) : hive_replay_push_batch(b->rb, t, n)) == HIVE_OK;
    m_push(b->m, t, n);
    return true;
}

static inline bool buf_sample(buf_t *b, uint64_t *rng, transition_t *out, uint64_t *keys, double *w)
{
    if (b->impl == HIVE)
        return hive_replay_sample(b->rb, BATCH, rng, out, keys, w, 0) == HIVE_OK;
    m_sample(b->m, BATCH, rng, out, keys, w);
    return true;
}

static inline bool buf_update(buf_t *b, const uint64_t *keys, const double *prio)
{
    if (b->impl == HIVE)
        return hive_replay_update_priorities(b->rb, keys, prio, BATCH) >= 0;
    m_update(b->m, keys, prio, BATCH);
    return true;
}

/* Fill the buffer once so that every benchmark runs on a full one. */
static void buf_fill(buf_t *b)
{
    transition_t t[32];
    for (uint64_t i = 0; i < CAP; i += 32) {
        for (int k = 0; k < 32; k++)
            make_item(&t[k], i + (uint64_t)k);
        buf_push(b, t, 32);
    }
}

/* ------------------------------------------------------------ pushes */

typedef struct push_run {
    buf_t          *b;
    size_t          chunk;           /* items per push call */
    uint64_t        items;           /* per producer */
    _Atomic int     go;
    _Atomic int     failed;
    _Atomic uint64_t last_end;
} push_run_t;

static void *producer(void *arg)
{
    push_run_t *r = arg;
    transition_t t[32];
    for (size_t k = 0; k < 32; k++)
        make_item(&t[k], k);
    while (!atomic_load_explicit(&r->go, memory_order_acquire))
        sched_yield();
    for (uint64_t i = 0; i < r->items; i += r->chunk) {
        t[0].obs[0] = (float)i;
        if (!buf_push(r->b, t, r->chunk)) {
            atomic_store(&r->failed, 1);
            break;
        }
    }
    uint64_t end = now_ns(), seen = atomic_load(&r->last_end);
    while (end > seen && !atomic_compare_exchange_weak(&r->last_end, &seen, end))
        ;
    return NULL;
}

static void push_bench(hb_state *s, enum impl impl, size_t chunk, bool prioritized)
{
    int n = (int)hb_range(s, 0);
    buf_t b = buf_new(impl, prioritized);
    buf_fill(&b);
    while (hb_keep_running(s)) {
        push_run_t r = { .b = &b, .chunk = chunk, .items = PUSH_ITEMS / (uint64_t)n };
        pthread_t th[8];
        for (int i = 0; i < n; i++)
            pthread_create(&th[i], NULL, producer, &r);
        uint64_t t0 = now_ns();
        atomic_store_explicit(&r.go, 1, memory_order_release);
        for (int i = 0; i < n; i++)
            pthread_join(th[i], NULL);
        if (atomic_load(&r.failed)) {
            hb_skip_with_error(s, impl == HIVE ? hive_last_error() : "push failed");
            break;
        }
        hb_set_iteration_time(s, (double)(atomic_load(&r.last_end) - t0) * 1e-9);
    }
    hb_set_items_processed(s, hb_iterations(s) * (int64_t)PUSH_ITEMS);
    buf_free(&b);
}

static void bm_push_hive(hb_state *s)        { push_bench(s, HIVE, 1, false); }
static void bm_push_mutex(hb_state *s)       { push_bench(s, MUTEX, 1, false); }
static void bm_push32_hive(hb_state *s)      { push_bench(s, HIVE, 32, false); }
static void bm_push32_mutex(hb_state *s)     { push_bench(s, MUTEX, 32, false); }
static void bm_push_prio_hive(hb_state *s)   { push_bench(s, HIVE, 1, true); }
static void bm_push_prio_mutex(hb_state *s)  { push_bench(s, MUTEX, 1, true); }

/* ------------------------------------------------------------ sampling */

typedef struct learner {
    transition_t items[BATCH];
    uint64_t     keys[BATCH];
    double       w[BATCH], prio[BATCH];
} learner_t;

/* One learner step; false on failure. */
static bool learn_step(buf_t *b, bool prioritized, uint64_t *rng, learner_t *l)
{
    if (!buf_sample(b, rng, l->items, l->keys, l->w))
        return false;
    if (!prioritized)
        return true;
    for (int i = 0; i < BATCH; i++)      /* a stand-in for |TD error| */
        l->prio[i] = 0.01 + (double)(l->keys[i] % 97) * 0.02 * l->w[i];
    return buf_update(b, l->keys, l->prio);
}

static void sample_bench(hb_state *s, enum impl impl, bool prioritized)
{
    buf_t b = buf_new(impl, prioritized);
    buf_fill(&b);
    learner_t *l = malloc(sizeof *l);
    uint64_t rng = 42;
    while (hb_keep_running(s)) {
        uint64_t t0 = now_ns();
        if (!learn_step(&b, prioritized, &rng, l)) {
            hb_skip_with_error(s, hive_last_error());
            break;
        }
        hb_set_iteration_time(s, (double)(now_ns() - t0) * 1e-9);
    }
    hb_set_items_processed(s, hb_iterations(s) * BATCH);
    free(l);
    buf_free(&b);
}

static void bm_sample_uniform_hive(hb_state *s)   { sample_bench(s, HIVE, false); }
static void bm_sample_uniform_mutex(hb_state *s)  { sample_bench(s, MUTEX, false); }
static void bm_sample_prio_hive(hb_state *s)      { sample_bench(s, HIVE, true); }
static void bm_sample_prio_mutex(hb_state *s)     { sample_bench(s, MUTEX, true); }

/* ------------------------------------------------------------ mixed */

#define MIX_STEPS  64                        /* learner steps per iteration */
#define MIX_SPI    8                         /* samples per insert: 256 / 8 = 32 pushes per step */
#define MIX_PUSHES (MIX_STEPS * BATCH / MIX_SPI)
#define MIX_CHUNK  32                        /* the producer pushes in batches, as env actors do */

typedef struct mixed_run {
    buf_t           *b;
    _Atomic int      go;
    _Atomic int      failed;
    _Atomic uint64_t producer_end;
} mixed_run_t;

static void *quota_producer(void *arg)
{
    mixed_run_t *r = arg;
    transition_t t[MIX_CHUNK];
    while (!atomic_load_explicit(&r->go, memory_order_acquire))
        sched_yield();
    for (uint64_t n = 0; n < MIX_PUSHES; n += MIX_CHUNK) {
        for (int k = 0; k < MIX_CHUNK; k++)
            make_item(&t[k], n + (uint64_t)k);
        if (!buf_push(r->b, t, MIX_CHUNK)) {
            atomic_store(&r->failed, 1);
            break;
        }
    }
    atomic_store(&r->producer_end, now_ns());
    return NULL;
}

static void mixed_bench(hb_state *s, enum impl impl)
{
    buf_t b = buf_new(impl, true);
    buf_fill(&b);
    learner_t *l = malloc(sizeof *l);
    uint64_t rng = 7;
    while (hb_keep_running(s)) {
        mixed_run_t r = { .b = &b };
        pthread_t th;
        pthread_create(&th, NULL, quota_producer, &r);
        uint64_t t0 = now_ns();
        atomic_store_explicit(&r.go, 1, memory_order_release);
        bool ok = true;
        for (int k = 0; k < MIX_STEPS && ok; k++)
            ok = learn_step(&b, true, &rng, l);
        uint64_t learner_end = now_ns();
        pthread_join(th, NULL);
        if (!ok || atomic_load(&r.failed)) {
            hb_skip_with_error(s, impl == HIVE ? hive_last_error() : "mixed run failed");
            break;
        }
        uint64_t end = atomic_load(&r.producer_end);
        if (learner_end > end)
            end = learner_end;
        hb_set_iteration_time(s, (double)(end - t0) * 1e-9);
    }
    hb_set_items_processed(s, hb_iterations(s) * MIX_STEPS * BATCH);
    free(l);
    buf_free(&b);
}

static void bm_mixed_hive(hb_state *s)  { mixed_bench(s, HIVE); }
static void bm_mixed_mutex(hb_state *s) { mixed_bench(s, MUTEX); }

/* ------------------------------------------------------------ table */

static const int64_t producers[] = { 1, 2 };
static const int64_t one[] = { 1 };
static const int64_t batch[] = { BATCH };

#define PUSH(nm, f) { .name = nm, .fn = f, .use_manual_time = 1, .args = producers, .nargs = 2, \
                      .arg_name = "producers", .unit = HB_MS }
#define STEP(nm, f, a, an) { .name = nm, .fn = f, .use_manual_time = 1, .args = a, .nargs = 1, \
                             .arg_name = an, .unit = HB_US }

const hb_bench hb_replay_benches[] = {
    PUSH("replay_push/hive", bm_push_hive),
    PUSH("replay_push/mutex", bm_push_mutex),
    PUSH("replay_push_batch32/hive", bm_push32_hive),
    PUSH("replay_push_batch32/mutex", bm_push32_mutex),
    PUSH("replay_push_prioritized/hive", bm_push_prio_hive),
    PUSH("replay_push_prioritized/mutex", bm_push_prio_mutex),
    STEP("replay_sample_uniform/hive", bm_sample_uniform_hive, batch, "batch"),
    STEP("replay_sample_uniform/mutex", bm_sample_uniform_mutex, batch, "batch"),
    STEP("replay_sample_prioritized/hive", bm_sample_prio_hive, batch, "batch"),
    STEP("replay_sample_prioritized/mutex", bm_sample_prio_mutex, batch, "batch"),
    STEP("replay_mixed/hive", bm_mixed_hive, one, "producers"),
    STEP("replay_mixed/mutex", bm_mixed_mutex, one, "producers"),
};
const size_t hb_replay_nbenches = sizeof hb_replay_benches / sizeof hb_replay_benches[0];
