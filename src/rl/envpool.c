/*
 * envpool.c - the environment pool (include/hive/envpool.h): environments
 * stepped as hive jobs on their NUMA nodes, sync batches written in place,
 * async results gathered in finishing order into a ring of batch blocks.
 *
 * Records. Each environment has a record (env_t, one cache line apart
 * from its neighbours) in the pool's table and a block in the engine's
 * arena on its node: its state, its own observation row (async) and its
 * action (copied at send). Steps are queued as chunks: a chunk is a list
 * of environments of one node linked through `next`, run by one job (the
 * job embedded in the chunk's first environment), so cheap environments
 * do not pay a job each. A chunk's job reads an environment's `next`
 * before stepping it: once its result is out, the owner may send it again.
 *
 * Sync. Environment i writes row i of the sync batch in place; a chunk
 * counts its environments off sync_left at once when all have stepped, and
 * the chunk that brings it to zero signals the waiter.
 *
 * Async. A finishing environment claims the next position (claim, an
 * atomic counter), writes row pos % B of block (pos / B) % K and counts
 * the block's `filled`; recv takes blocks in order once filled == B. An
 * environment is busy from its send until the recv that returns it, so at
 * most num_envs results are on their way: positions stay within the held
 * block plus (num_envs - 1) / B + 1 blocks ahead, and K = num_envs / B + 3
 * blocks never wrap onto a block the user still reads. claim's RMWs are
 * acq_rel, which turns that counting argument into happens-before (see
 * publish).
 *
 * Waiting: finishers bump `progress` (a futex word) and wake only if the
 * waiter said it sleeps - a store-load pair, seq_cst on both sides (see
 * signal/wait_until). A waiter that is a worker runs other jobs instead.
 */
#include "hive_impl.h"
#include "arena.h"
#include "sched.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fault.h"
#include "util/park.h"

#include <stdio.h>

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENVS   ((size_t)1 << 24)
#define SPIN_NS    5000u                  /* spin this long before sleeping in a wait */
#define HELP_NAP_NS 50000u                /* a waiting worker looks for other jobs this often */
#define LANE       1u                     /* steps run in the NORMAL lane */

enum { KIND_STEP, KIND_RESET };

typedef struct env {
    hive__job_t           job;           /* runs the chunk this env heads */
    struct hive_envpool  *pool;
    unsigned char        *state;         /* arena block on `node`: state | obs row | action */
    unsigned char        *own_obs;
    unsigned char        *act;
    const unsigned char  *act_src;       /* sync: the caller's row; async: act */
    int32_t               next;          /* next env of the chunk, -1: last */
    int32_t               id;
    uint32_t              episode;
    unsigned              node;
    int                   kind;
    bool                  sync;
    bool                  busy;          /* owner thread only: sent, not yet received */
} HIVE_ALIGNED env_t;

typedef struct block {                   /* one async batch */
    hive_envpool_batch_t  b;
    hive_ref_t            refs[4];
    HIVE_ALIGNED _Atomic uint32_t filled;
} block_t;

struct hive_envpool {
    hive_t               *h;
    hive_env_class_t      cls;
    size_t                n, bsize;      /* num_envs, batch_size */
    size_t                obs_bytes, act_bytes, state_bytes, block_bytes;
    uint64_t              seed;
    env_t                *env;
    int32_t              *order;         /* env ids grouped by node (sync chunks) */
    size_t               *node_count;    /* envs per node */
    int32_t              *scratch;       /* send: per-node lists */
    hive_envpool_batch_t  sync;
    hive_ref_t            sync_refs[4];
    block_t              *blocks;
    size_t                nblocks;
    uint64_t              recv_pos;      /* owner: blocks taken so far */
    size_t                inflight;      /* owner: results sent and not received */
    HIVE_ALIGNED _Atomic uint64_t claim;      /* async positions handed out */
    HIVE_ALIGNED _Atomic uint32_t sync_left;  /* sync envs still stepping */
    HIVE_ALIGNED _Atomic uint32_t progress;   /* futex word: bumped at every signal */
    _Atomic uint32_t      sleeping;           /* the waiter sleeps on progress */
    _Atomic uint32_t      shut;               /* a step was dropped by shutdown */
    _Atomic uint32_t      inside;             /* a thread is in the pool's functions */
    _Atomic uint64_t      finished;           /* async results written */
    uint64_t              sent;               /* owner: async steps started */
    _Atomic uint64_t      steps;              /* owner: steps returned (read by statistics) */
    hive__listed_t        listed;             /* in the engine's list (statistics) */
};

/* Steps returned to the caller: the owner bumps, statistics read (relaxed
 * load and store: one writer at a time, `inside` orders the owners). */
static void count_steps(hive_envpool_t *p, size_t n)
{
    atomic_store_explicit(&p->steps, atomic_load_explicit(&p->steps, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

void hive__envpool_info(const hive__listed_t *n, hive_envpool_info_t *out)
{
    const hive_envpool_t *p = (const hive_envpool_t *)((const char *)n -
                                                       offsetof(hive_envpool_t, listed));
    /* relaxed: a figure for people */
    *out = (hive_envpool_info_t){ .id = n->id, .num_envs = p->n,
                                  .steps = atomic_load_explicit(&p->steps, memory_order_relaxed) };
}

/* ------------------------------------------------------------ helpers */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t episode_seed(const hive_envpool_t *p, const env_t *e)
{
    return mix64(p->seed ^ mix64(((uint64_t)(uint32_t)e->id << 32) | e->episode));
}

static int enter(hive_envpool_t *p, const char *fn)
{
    if (p == NULL)
        return hive__fail(HIVE_EINVAL, "%s: pool is NULL", fn);
    /* acquire: we see what the previous owner did in the pool */
    if (atomic_exchange_explicit(&p->inside, 1, memory_order_acquire) != 0)
        return hive__fail(HIVE_ESTATE, "%s: another thread is inside this pool", fn);
    return HIVE_OK;
}

static int leave(hive_envpool_t *p, int rc)
{
    /* release: hands what we did to the next owner */
    atomic_store_explicit(&p->inside, 0, memory_order_release);
    return rc;
}

/* Bytes of one item of a dtype times the extents; false on overflow. */
static bool shape_bytes(hive_dtype_t dt, int ndim, const int64_t *shape, size_t *out)
{
    size_t b = hive_dtype_size(dt);
    if (b == 0 || ndim < 0 || ndim > HIVE_MAX_DIMS - 1)
        return false;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(b, (size_t)shape[i], &b))
            return false;
    *out = b;
    return true;
}

static size_t round64(size_t x)
{
    return (x + 63) & ~(size_t)63;
}

/* ------------------------------------------------------------ stepping */

/* A result is out: wake the waiter if it sleeps. seq_cst, both: the
 * finisher's half of the store-load pair (its result is visible before
 * it reads sleeping; the waiter stores sleeping before re-checking). */
static void signal_waiter(hive_envpool_t *p)
{
    atomic_fetch_add_explicit(&p->progress, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&p->sleeping, memory_order_seq_cst) != 0)
        hive__futex_wake(&p->progress, 1);
}

/* The finisher's last touch of the pool: hive_envpool_free waits for the
 * count, so nothing of p may be used after it. release: free's acquire
 * sees every use before. */
static void count_finished(hive_envpool_t *p)
{
    atomic_fetch_add_explicit(&p->finished, 1, memory_order_release);
}

static void publish(hive_envpool_t *p, env_t *e, const unsigned char *obs, float r, int d)
{
    if (e->sync) {
        ((float *)p->sync.reward.data)[e->id] = r;
        ((uint8_t *)p->sync.done.data)[e->id] = (uint8_t)d;
        /* seq_cst: the rows are written before the count drops (release
         * for the waiter's acquire), and before signal's read of sleeping */
        if (atomic_fetch_sub_explicit(&p->sync_left, 1, memory_order_seq_cst) == 1)
            signal_waiter(p);
        count_finished(p);
        return;
    }
    /* acq_rel: besides a unique position, the happens-before that makes
     * reusing a block safe. An env sent before the owner finished reading
     * a block may claim a row of that block's next round only after an
     * env sent later has claimed (see the top: older envs alone cannot
     * reach that far), so the RMW chain on claim orders the owner's last
     * read (and its reset of filled) before this env's writes. */
    uint64_t pos = atomic_fetch_add_explicit(&p->claim, 1, memory_order_acq_rel);
    block_t *bl = &p->blocks[(pos / p->bsize) % p->nblocks];
    size_t row = (size_t)(pos % p->bsize);
    if (p->obs_bytes)
        memcpy((unsigned char *)bl->b.obs.data + row * p->obs_bytes, obs, p->obs_bytes);
    ((float *)bl->b.reward.data)[row] = r;
    ((uint8_t *)bl->b.done.data)[row] = (uint8_t)d;
    ((int32_t *)bl->b.env_id.data)[row] = e->id;
    /* seq_cst: release of this row to recv's acquire of filled == B (the
     * RMWs form one release sequence), and ordered before signal's read */
    if (atomic_fetch_add_explicit(&bl->filled, 1, memory_order_seq_cst) + 1 == p->bsize)
        signal_waiter(p);
    count_finished(p);
}

/* One step (or reset) of e, auto-reset included: the observation goes to
 * its sync row or its own row; *obs_out says which. */
static void step_env(hive_envpool_t *p, env_t *e, unsigned char **obs_out, float *r, int *d)
{
    unsigned char *obs = e->sync ? (unsigned char *)p->sync.obs.data + (size_t)e->id * p->obs_bytes
                                 : e->own_obs;
    *r = 0;
    *d = 0;
    if (e->kind == KIND_RESET) {
        p->cls.reset(e->state, episode_seed(p, e), obs);
    } else {
        p->cls.step(e->state, e->act_src, obs, r, d);
        *d = *d != 0;
        if (*d) {                        /* auto-reset, inside the same step */
            e->episode++;
            p->cls.reset(e->state, episode_seed(p, e), obs);
        }
    }
    *obs_out = obs;
}

static void run_env(hive_envpool_t *p, env_t *e)
{
    unsigned char *obs;
    float r;
    int d;
    step_env(p, e, &obs, &r, &d);
    publish(p, e, obs, r, d);
}

/* A sync chunk: every env writes its rows in place, then the chunk counts
 * them all at once - one RMW on sync_left and one on finished per chunk
 * instead of per env (two contended cache lines per step were most of a
 * cheap step's cost). seq_cst on sync_left as in publish: the rows are
 * written before the count drops, and before signal's read of sleeping. */
static void run_sync_chunk(hive_envpool_t *p, env_t *e)
{
    uint32_t k = 0;
    for (int32_t i = e->id; i >= 0; k++) {
        env_t *cur = &p->env[i];
        i = cur->next;                   /* before the count (see top) */
        unsigned char *obs;
        float r;
        int d;
        step_env(p, cur, &obs, &r, &d);
        ((float *)p->sync.reward.data)[cur->id] = r;
        ((uint8_t *)p->sync.done.data)[cur->id] = (uint8_t)d;
    }
    if (atomic_fetch_sub_explicit(&p->sync_left, k, memory_order_seq_cst) == k)
        signal_waiter(p);
    /* release: free's acquire sees every use of p before; our last touch */
    atomic_fetch_add_explicit(&p->finished, k, memory_order_release);
}

/* A chunk's job. w == NULL: the engine stopped before it ran; its envs
 * are counted (so the waiter returns) and marked lost. */
static void chunk_job(hive__job_t *job, hive__worker_t *w)
{
    env_t *e = HIVE_CONTAINER_OF(job, env_t, job);
    hive_envpool_t *p = e->pool;
    if (w != NULL && e->sync) {          /* a chunk's envs are all sync or all async */
        run_sync_chunk(p, e);
        return;
    }
    for (int32_t i = e->id; i >= 0;) {
        env_t *cur = &p->env[i];
        i = cur->next;                   /* before the result is out (see top) */
        if (w == NULL) {
            /* relaxed: the waiter reads it after the count that follows */
            atomic_store_explicit(&p->shut, 1, memory_order_relaxed);
            publish(p, cur, cur->own_obs, 0, 0);
        } else {
            run_env(p, cur);
        }
    }
}

/* Queue envs ids[0..n) (all of one node) as chunks of about `per` envs. */
static void spawn_chunks(hive_envpool_t *p, const int32_t *ids, size_t n, size_t per, unsigned node)
{
    for (size_t k = 0; k < n; k += per) {
        size_t m = n - k < per ? n - k : per;
        for (size_t j = 0; j < m; j++)
            p->env[ids[k + j]].next = j + 1 < m ? ids[k + j + 1] : -1;
        hive__sched_spawn(&p->h->sched, &p->env[ids[k]].job, LANE, (int)node);
    }
}

/* Envs per chunk for n envs on node: about two chunks per worker there. */
static size_t chunk_size(hive_envpool_t *p, unsigned node, size_t n)
{
    unsigned nw = node < p->h->sched.nnodes ? p->h->sched.nodes[node].nworkers : 0;
    size_t chunks = 2 * (size_t)(nw ? nw : 1);
    size_t per = (n + chunks - 1) / chunks;
    return per ? per : 1;
}

/* ------------------------------------------------------------ waiting */

static bool stopping(hive_envpool_t *p)
{
    return atomic_load_explicit(&p->h->sched.stopping, memory_order_acquire) != 0;
}

/* Wait until done(p) or the deadline (deadline 0: none). HIVE_OK or
 * HIVE_ETIMEDOUT. On a worker, run other jobs meanwhile. */
static int wait_until(hive_envpool_t *p, bool (*done)(void *), uint64_t deadline)
{
    hive__worker_t *w = hive__self_in(&p->h->sched);
    uint64_t spin_end = hive__now_ns() + SPIN_NS;
    while (!done(p)) {
        uint64_t now = hive__now_ns();
        if (deadline != 0 && now >= deadline)
            return HIVE_ETIMEDOUT;
        if (w != NULL) {                 /* a worker: step envs itself meanwhile */
            if (hive__sched_help(w, done, p))
                continue;
            if (now < spin_end) {
                hive__cpu_relax();       /* the last envs are about to finish */
                continue;
            }
        } else if (now < spin_end) {
            sched_yield();
            continue;
        }
        /* Sleep until a result comes out. A worker naps (HELP_NAP_NS at
         * most) and looks for work again: nothing of the pool is left to
         * help with (its chunks are all taken), but other jobs may come.
         * Sleeping, not yielding in a loop: a yield on a loaded machine
         * gives the core away for a whole time slice while the results
         * are already in, and on a machine with more workers than cores
         * the spinning waiter takes the core from the workers stepping. */
        uint64_t nap = deadline ? deadline - now : 1000000000u;
        if (w != NULL && nap > HELP_NAP_NS)
            nap = HELP_NAP_NS;
        /* seq_cst: the waiter's half of the pair in signal_waiter: either
         * the finisher sees sleeping, or our re-check sees its result */
        uint32_t v = atomic_load_explicit(&p->progress, memory_order_seq_cst);
        atomic_store_explicit(&p->sleeping, 1, memory_order_seq_cst);
        if (!done(p))
            hive__futex_wait(&p->progress, v, (int64_t)nap);
        atomic_store_explicit(&p->sleeping, 0, memory_order_relaxed);
    }
    return HIVE_OK;
}

static bool all_finished(void *arg)
{
    hive_envpool_t *p = arg;
    /* acquire: pairs with publish's release of finished */
    return atomic_load_explicit(&p->finished, memory_order_acquire) == p->sent;
}

static bool sync_done(void *arg)
{
    hive_envpool_t *p = arg;
    /* seq_cst: acquires the rows (see publish) and pairs with signal */
    return atomic_load_explicit(&p->sync_left, memory_order_seq_cst) == 0;
}

static bool block_ready(void *arg)
{
    hive_envpool_t *p = arg;
    block_t *bl = &p->blocks[p->recv_pos % p->nblocks];
    /* seq_cst: acquires the rows (see publish) and pairs with signal */
    return atomic_load_explicit(&bl->filled, memory_order_seq_cst) == p->bsize;
}

/* ------------------------------------------------------------ creation */

static int check_class(const hive_env_class_t *c, size_t *obs, size_t *act)
{
    if (c->reset == NULL || c->step == NULL)
        return hive__fail(HIVE_EINVAL, "hive_envpool_new: class %s has no %s function",
                          c->name ? c->name : "(unnamed)", c->reset == NULL ? "reset" : "step");
    if (!shape_bytes(c->obs_dtype, c->obs_ndim, c->obs_shape, obs))
        return hive__fail(HIVE_EINVAL, "hive_envpool_new: class %s: observation dtype %d, ndim %d "
                          "(0..%d) or a negative or overflowing extent",
                          c->name ? c->name : "(unnamed)", (int)c->obs_dtype, c->obs_ndim,
                          HIVE_MAX_DIMS - 1);
    if (!shape_bytes(c->act_dtype, c->act_ndim, c->act_shape, act))
        return hive__fail(HIVE_EINVAL, "hive_envpool_new: class %s: action dtype %d, ndim %d "
                          "(0..%d) or a negative or overflowing extent",
                          c->name ? c->name : "(unnamed)", (int)c->act_dtype, c->act_ndim,
                          HIVE_MAX_DIMS - 1);
    return HIVE_OK;
}

/* A batch of n rows: four arrays, views and the pool's counts. */
static int new_batch(hive_envpool_t *p, size_t n, hive_envpool_batch_t *b, hive_ref_t *refs)
{
    int64_t shape[HIVE_MAX_DIMS];
    shape[0] = (int64_t)n;
    for (int i = 0; i < p->cls.obs_ndim; i++)
        shape[1 + i] = p->cls.obs_shape[i];
    const int64_t one[1] = { (int64_t)n };
    int rc = hive_array_new(p->h, p->cls.obs_dtype, 1 + p->cls.obs_ndim, shape, &refs[0]);
    if (rc == HIVE_OK && (rc = hive_array_new(p->h, HIVE_F32, 1, one, &refs[1])) != HIVE_OK)
        refs[1].id = 0;
    if (rc == HIVE_OK && (rc = hive_array_new(p->h, HIVE_U8, 1, one, &refs[2])) != HIVE_OK)
        refs[2].id = 0;
    if (rc == HIVE_OK && (rc = hive_array_new(p->h, HIVE_I32, 1, one, &refs[3])) != HIVE_OK)
        refs[3].id = 0;
    if (rc != HIVE_OK)
        return rc;
    b->n = n;
    hive_array_view(p->h, refs[0], &b->obs);
    hive_array_view(p->h, refs[1], &b->reward);
    hive_array_view(p->h, refs[2], &b->done);
    hive_array_view(p->h, refs[3], &b->env_id);
    return HIVE_OK;
}

static void free_batch(hive_envpool_t *p, hive_ref_t *refs)
{
    for (int i = 0; i < 4; i++)
        if (refs[i].id != 0)
            hive_release(p->h, refs[i]);
}

static void destroy(hive_envpool_t *p)
{
    if (p->env != NULL)
        for (size_t i = 0; i < p->n; i++)
            if (p->env[i].state != NULL)
                hive__arena_free(&p->h->arena, p->env[i].state, p->block_bytes);
    free_batch(p, p->sync_refs);
    if (p->blocks != NULL)
        for (size_t k = 0; k < p->nblocks; k++)
            free_batch(p, p->blocks[k].refs);
    free(p->env);
    free(p->blocks);
    free(p->order);
    free(p->node_count);
    free(p->scratch);
    free(p);
}

static int check_opts(hive_t *h, const hive_envpool_opts_t *o)
{
    if (o->num_envs == 0 || o->num_envs > MAX_ENVS)
        return hive__fail(HIVE_EINVAL, "hive_envpool_new: num_envs %zu is outside 1..%zu",
                          o->num_envs, MAX_ENVS);
    if (o->batch_size > o->num_envs)
        return hive__fail(HIVE_EINVAL, "hive_envpool_new: batch_size %zu is above num_envs %zu",
                          o->batch_size, o->num_envs);
    if (o->env_node != NULL)
        for (size_t i = 0; i < o->num_envs; i++)
            if (o->env_node[i] >= hive_num_nodes(h))
                return hive__fail(HIVE_EINVAL, "hive_envpool_new: env_node[%zu] = %u is not one of "
                                  "the engine's %u NUMA nodes", i, o->env_node[i], hive_num_nodes(h));
    return HIVE_OK;
}

/* Each env's arena block on its node, zero-filled, init'ed. */
static int make_envs(hive_envpool_t *p, const hive_envpool_opts_t *o)
{
    unsigned nodes = hive_num_nodes(p->h);
    for (size_t i = 0; i < p->n; i++) {
        env_t *e = &p->env[i];
        e->pool = p;
        e->id = (int32_t)i;
        e->node = o->env_node ? o->env_node[i] : (unsigned)(i % nodes);
        e->job.fn = chunk_job;
        e->next = -1;
        int err = HIVE_OK;
        e->state = hive__arena_alloc(&p->h->arena, p->block_bytes, e->node, &err);
        if (e->state == NULL)
            return hive__fail(err, "hive_envpool_new: no room for environment %zu's %zu bytes "
                              "on node %u", i, p->block_bytes, e->node);
        memset(e->state, 0, p->block_bytes);
        e->own_obs = e->state + round64(p->state_bytes);
        e->act = e->own_obs + round64(p->obs_bytes);
        p->node_count[e->node]++;
        if (p->cls.init != NULL && p->cls.init(e->state, o->config, (unsigned)i) != 0)
            return hive__fail(HIVE_EINVAL, "hive_envpool_new: %s's init failed for environment %zu",
                              p->cls.name ? p->cls.name : "the class", i);
    }
    /* ids grouped by node, in id order within a node */
    size_t k = 0;
    for (unsigned nd = 0; nd < nodes; nd++)
        for (size_t i = 0; i < p->n; i++)
            if (p->env[i].node == nd)
                p->order[k++] = (int32_t)i;
    return HIVE_OK;
}

int hive_envpool_new(hive_t *h, const hive_env_class_t *cls, const hive_envpool_opts_t *opts,
                     hive_envpool_t **out)
{
    if (h == NULL || cls == NULL || opts == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_envpool_new: %s is NULL",
                          h == NULL ? "engine" : cls == NULL ? "class" : opts == NULL ? "opts" : "out");
    size_t obs, act, blk;
    int rc = check_class(cls, &obs, &act);
    if (rc == HIVE_OK)
        rc = check_opts(h, opts);
    if (rc != HIVE_OK)
        return rc;
    if (__builtin_add_overflow(round64(cls->state_size), round64(obs), &blk) ||
        __builtin_add_overflow(blk, round64(act), &blk) || cls->state_size > SIZE_MAX / 2)
        return hive__fail(HIVE_EINVAL, "hive_envpool_new: state %zu + observation %zu + action %zu "
                          "bytes overflow a size", cls->state_size, obs, act);
    hive_envpool_t *p = hive__calloc(1, sizeof *p);
    if (p == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_envpool_new: cannot allocate the pool");
    p->h = h;
    p->cls = *cls;
    p->n = opts->num_envs;
    p->bsize = opts->batch_size ? opts->batch_size : opts->num_envs;
    p->obs_bytes = obs;
    p->act_bytes = act;
    p->state_bytes = cls->state_size;
    p->block_bytes = blk ? blk : 64;
    p->seed = opts->seed;
    p->nblocks = p->n / p->bsize + 3;
    if (hive__posix_memalign((void **)&p->env, HIVE_PAD, p->n * sizeof(env_t)) != 0) {
        p->env = NULL;
        destroy(p);
        return hive__fail(HIVE_ENOMEM, "hive_envpool_new: cannot allocate %zu environment records",
                          opts->num_envs);
    }
    memset(p->env, 0, p->n * sizeof(env_t));
    p->order = hive__calloc(p->n, sizeof(int32_t));
    p->scratch = hive__calloc(p->n, sizeof(int32_t));
    p->node_count = hive__calloc(hive_num_nodes(h), sizeof(size_t));
    p->blocks = hive__calloc(p->nblocks, sizeof(block_t));
    if (p->order == NULL || p->scratch == NULL || p->node_count == NULL || p->blocks == NULL) {
        destroy(p);
        return hive__fail(HIVE_ENOMEM, "hive_envpool_new: cannot allocate the tables for %zu "
                          "environments", opts->num_envs);
    }
    rc = make_envs(p, opts);
    if (rc == HIVE_OK)
        rc = new_batch(p, p->n, &p->sync, p->sync_refs);
    for (size_t k = 0; rc == HIVE_OK && k < p->nblocks; k++)
        rc = new_batch(p, p->bsize, &p->blocks[k].b, p->blocks[k].refs);
    if (rc != HIVE_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", hive_last_error());
        destroy(p);
        return hive__fail(rc, "%s", why);
    }
    for (size_t i = 0; i < p->n; i++)
        ((int32_t *)p->sync.env_id.data)[i] = (int32_t)i;
    hive__listed_add(h, &p->listed, HIVE__LISTED_ENVPOOL);
    *out = p;
    return HIVE_OK;
}

int hive_envpool_free(hive_envpool_t *p)
{
    if (p == NULL)
        return HIVE_OK;
    int rc = enter(p, "hive_envpool_free");
    if (rc != HIVE_OK)
        return rc;
    /* every result still on its way must be out before the blocks and
     * states go: wait for the finished count to reach what was sent */
    hive__worker_t *w = hive__self_in(&p->h->sched);
    while (atomic_load_explicit(&p->finished, memory_order_acquire) != p->sent) {
        if (w == NULL || !hive__sched_help(w, all_finished, p))
            hive__sleep_ns(10000);
    }
    hive__listed_remove(p->h, &p->listed);
    destroy(p);
    return HIVE_OK;
}

size_t hive_envpool_num_envs(const hive_envpool_t *p)
{
    return p ? p->n : 0;
}

size_t hive_envpool_batch_size(const hive_envpool_t *p)
{
    return p ? p->bsize : 0;
}

/* ------------------------------------------------------------ sync */

static int check_actions(hive_envpool_t *p, const hive_array_t *a, size_t n, const char *fn)
{
    if (a == NULL || (a->data == NULL && n * p->act_bytes != 0))
        return hive__fail(HIVE_EINVAL, "%s: actions are NULL", fn);
    bool ok = a->dtype == p->cls.act_dtype && a->ndim == 1 + p->cls.act_ndim &&
              a->shape[0] == (int64_t)n;
    for (int i = 0; ok && i < p->cls.act_ndim; i++)
        ok = a->shape[1 + i] == p->cls.act_shape[i];
    /* C-contiguous: each stride is the bytes of the dimensions after it */
    int64_t want = (int64_t)hive_dtype_size(p->cls.act_dtype);
    for (int i = a->ndim - 1; ok && i >= 0; i--) {
        ok = a->shape[i] <= 1 || a->strides[i] == want;
        want *= a->shape[i];
    }
    if (!ok)
        return hive__fail(HIVE_EINVAL, "%s: actions must be a C-contiguous [%zu, ...] array of dtype "
                          "%d with %d action dimensions; got dtype %d, ndim %d, first extent %lld",
                          fn, n, (int)p->cls.act_dtype, p->cls.act_ndim, (int)a->dtype, a->ndim,
                          a->ndim > 0 ? (long long)a->shape[0] : -1LL);
    return HIVE_OK;
}

static int run_sync(hive_envpool_t *p, int kind, const unsigned char *acts, hive_envpool_batch_t *out,
                    const char *fn)
{
    if (p->inflight > 0)
        return hive__fail(HIVE_ESTATE, "%s: %zu async results are still to be received", fn,
                          p->inflight);
    if (stopping(p))
        return hive__fail(HIVE_ESHUTDOWN, "%s: the engine is shutting down", fn);
    for (size_t i = 0; i < p->n; i++) {
        env_t *e = &p->env[i];
        e->kind = kind;
        e->sync = true;
        e->act_src = acts ? acts + i * p->act_bytes : NULL;
    }
    /* relaxed: the spawns below publish it to the jobs */
    atomic_store_explicit(&p->sync_left, (uint32_t)p->n, memory_order_relaxed);
    p->sent += p->n;
    size_t at = 0;
    for (unsigned nd = 0; nd < hive_num_nodes(p->h); nd++) {
        size_t c = p->node_count[nd];
        if (c)
            spawn_chunks(p, p->order + at, c, chunk_size(p, nd, c), nd);
        at += c;
    }
    wait_until(p, sync_done, 0);
    if (atomic_load_explicit(&p->shut, memory_order_relaxed))
        return hive__fail(HIVE_ESHUTDOWN, "%s: the engine shut down while environments stepped", fn);
    count_steps(p, p->n);
    *out = p->sync;
    return HIVE_OK;
}

int hive_envpool_reset(hive_envpool_t *p, hive_envpool_batch_t *out)
{
    int rc = enter(p, "hive_envpool_reset");
    if (rc != HIVE_OK)
        return rc;
    if (out == NULL)
        return leave(p, hive__fail(HIVE_EINVAL, "hive_envpool_reset: out is NULL"));
    return leave(p, run_sync(p, KIND_RESET, NULL, out, "hive_envpool_reset"));
}

int hive_envpool_step(hive_envpool_t *p, const hive_array_t *actions, hive_envpool_batch_t *out)
{
    int rc = enter(p, "hive_envpool_step");
    if (rc != HIVE_OK)
        return rc;
    if (out == NULL)
        return leave(p, hive__fail(HIVE_EINVAL, "hive_envpool_step: out is NULL"));
    if ((rc = check_actions(p, actions, p->n, "hive_envpool_step")) != HIVE_OK)
        return leave(p, rc);
    return leave(p, run_sync(p, KIND_STEP, actions->data, out, "hive_envpool_step"));
}

/* ------------------------------------------------------------ async */

static int check_ids(hive_envpool_t *p, const int32_t *ids, size_t n)
{
    int rc = HIVE_OK;
    size_t i = 0;
    for (; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= p->n) {
            rc = hive__fail(HIVE_EINVAL, "hive_envpool_send: env_ids[%zu] = %d is not in the pool "
                            "(0..%zu)", i, ids[i], p->n - 1);
            break;
        }
        env_t *e = &p->env[ids[i]];
        if (e->busy) {
            rc = hive__fail(e->next == -2 ? HIVE_EINVAL : HIVE_ESTATE,
                            e->next == -2 ? "hive_envpool_send: environment %d is named twice "
                                            "(env_ids[%zu])"
                                          : "hive_envpool_send: environment %d (env_ids[%zu]) is "
                                            "busy: sent and not yet received",
                            ids[i], i);
            break;
        }
        e->busy = true;                  /* tentatively; -2 marks "this send" */
        e->next = -2;
    }
    if (rc != HIVE_OK)
        for (size_t j = 0; j < i; j++) {   /* undo: nothing is sent */
            p->env[ids[j]].busy = false;
            p->env[ids[j]].next = -1;
        }
    return rc;
}

/* Start the envs ids[0..n) (marked busy), grouped by node into chunks. */
static void send_ids(hive_envpool_t *p, const int32_t *ids, size_t n)
{
    unsigned nodes = hive_num_nodes(p->h);
    size_t at = 0;
    for (unsigned nd = 0; nd < nodes; nd++) {
        size_t c = 0;
        for (size_t i = 0; i < n; i++)
            if (p->env[ids[i]].node == nd)
                p->scratch[at + c++] = ids[i];
        if (c)
            spawn_chunks(p, p->scratch + at, c, chunk_size(p, nd, c), nd);
        at += c;
    }
    p->inflight += n;
    p->sent += n;
}

int hive_envpool_send(hive_envpool_t *p, const hive_array_t *actions, const int32_t *env_ids, size_t n)
{
    int rc = enter(p, "hive_envpool_send");
    if (rc != HIVE_OK)
        return rc;
    if (n > 0 && env_ids == NULL)
        return leave(p, hive__fail(HIVE_EINVAL, "hive_envpool_send: env_ids is NULL"));
    if (n > p->n)
        return leave(p, hive__fail(HIVE_EINVAL, "hive_envpool_send: %zu ids for a pool of %zu", n,
                                   p->n));
    if ((rc = check_actions(p, actions, n, "hive_envpool_send")) != HIVE_OK)
        return leave(p, rc);
    if (stopping(p))
        return leave(p, hive__fail(HIVE_ESHUTDOWN, "hive_envpool_send: the engine is shutting down"));
    if ((rc = check_ids(p, env_ids, n)) != HIVE_OK)
        return leave(p, rc);
    for (size_t k = 0; k < n; k++) {
        env_t *e = &p->env[env_ids[k]];
        if (p->act_bytes)
            memcpy(e->act, (const unsigned char *)actions->data + k * p->act_bytes, p->act_bytes);
        e->act_src = e->act;
        e->kind = KIND_STEP;
        e->sync = false;
    }
    send_ids(p, env_ids, n);
    return leave(p, HIVE_OK);
}

int hive_envpool_async_reset(hive_envpool_t *p)
{
    int rc = enter(p, "hive_envpool_async_reset");
    if (rc != HIVE_OK)
        return rc;
    if (p->inflight > 0)
        return leave(p, hive__fail(HIVE_ESTATE, "hive_envpool_async_reset: %zu results are still "
                                   "to be received", p->inflight));
    if (stopping(p))
        return leave(p, hive__fail(HIVE_ESHUTDOWN, "hive_envpool_async_reset: the engine is "
                                   "shutting down"));
    for (size_t i = 0; i < p->n; i++) {
        env_t *e = &p->env[i];
        e->busy = true;
        e->kind = KIND_RESET;
        e->sync = false;
    }
    size_t at = 0;                       /* every env: order is grouped by node already */
    for (unsigned nd = 0; nd < hive_num_nodes(p->h); nd++) {
        size_t c = p->node_count[nd];
        if (c)
            spawn_chunks(p, p->order + at, c, chunk_size(p, nd, c), nd);
        at += c;
    }
    p->inflight += p->n;
    p->sent += p->n;
    return leave(p, HIVE_OK);
}

int hive_envpool_recv(hive_envpool_t *p, int64_t timeout_ns, hive_envpool_batch_t *out)
{
    int rc = enter(p, "hive_envpool_recv");
    if (rc != HIVE_OK)
        return rc;
    if (out == NULL)
        return leave(p, hive__fail(HIVE_EINVAL, "hive_envpool_recv: out is NULL"));
    if (p->inflight < p->bsize)
        return leave(p, hive__fail(HIVE_ESTATE, "hive_envpool_recv: only %zu results are on their "
                                   "way, fewer than batch_size %zu: it would wait forever",
                                   p->inflight, p->bsize));
    uint64_t deadline = timeout_ns < 0 ? 0 : hive__now_ns() + (uint64_t)timeout_ns;
    if (timeout_ns == 0)
        deadline = 1;                    /* already passed: poll */
    if (wait_until(p, block_ready, deadline) != HIVE_OK)
        return leave(p, hive__fail(HIVE_ETIMEDOUT, "hive_envpool_recv: no batch of %zu within "
                                   "%lld ns", p->bsize, (long long)timeout_ns));
    block_t *bl = &p->blocks[p->recv_pos % p->nblocks];
    /* relaxed: no writer touches this block again before our next recv
     * (see the top), and that comes after sends that publish it */
    atomic_store_explicit(&bl->filled, 0, memory_order_relaxed);
    p->recv_pos++;
    p->inflight -= p->bsize;
    const int32_t *ids = bl->b.env_id.data;
    for (size_t i = 0; i < p->bsize; i++) {
        p->env[ids[i]].busy = false;
        p->env[ids[i]].next = -1;
    }
    if (atomic_load_explicit(&p->shut, memory_order_relaxed))
        return leave(p, hive__fail(HIVE_ESHUTDOWN, "hive_envpool_recv: the engine shut down while "
                                   "environments stepped"));
    count_steps(p, p->bsize);
    *out = bl->b;
    return leave(p, HIVE_OK);
}
