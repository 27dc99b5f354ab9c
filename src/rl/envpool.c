/*
 * envpool.c - the environment pool (include/hive/envpool.h): environments
 * stepped by hive's workers from per-worker slices, sync batches written in
 * place, async results gathered in finishing order into a ring of batch
 * blocks.
 *
 * Slices. Every environment has a home worker, fixed at creation: the envs
 * of a node are cut into contiguous ranges, one per worker of that node (a
 * node without workers lends its envs to all workers round robin). Each
 * worker has a slice: the list of its home envs (sync) and a ring of the
 * ids of its envs waiting for an async step, filled by the pool's owner
 * thread (one producer, the tail published once per slice and call) and
 * emptied by claims (a CAS on the ring's head) from any participant. A step
 * or send posts the slice's job to the home worker's inbox (only if the job
 * is not already queued or running, and the post wakes the worker only if
 * it is parked). A slice job serves its own slice, then steals from the
 * slices of its node, then of other nodes, and ends when it finds nothing
 * in any - after it stands a while (stand: STAND_NS watching its own
 * slice, still marked queued, so the owner's next batch posts nothing; not
 * when it runs nested in a wait). The pool's owner takes part too: a sync
 * step serves the caller's own slice inline (as the pthread program's
 * thread 0 steps its slice) and then helps the others; a waiting recv
 * serves and steals the same way. So a batch never waits for a worker that
 * is late or preempted: whoever is free takes its envs, and the owner
 * alone finishes any batch. The envs of one worker stay on that worker
 * while it keeps up, so their state stays in its cache.
 *
 * Claims read the ids first and then CAS the head past them: a CAS that
 * succeeds proves the ids were still unclaimed, and they cannot have been
 * overwritten, because a ring has room for all its home envs and an env is
 * pushed again only after its step (see claim()). A claim takes about
 * CHUNK_NS of work (cost_hint): a participant preempted while holding it
 * holds back no more of someone else's batch.
 *
 * Sync. A batch is cut, per slice, into chunks of consecutive home envs of
 * about SYNC_CHUNK_NS of work (the owner's measured step cost): the owner
 * moves each slice's `go` (chunks handed out, ever) on by the batch's
 * chunks, and participants claim chunks by a CAS on the slice's `taken`
 * (claim_chunk) and step them in a plain loop - no atomic per env: one
 * RMW per microsecond of work, on a line only the home worker touches
 * while it keeps up, and one on sync_left per slice a turn stepped from
 * (the pthread peer's barrier costs as much); at 1 us a step a chunk is
 * one env, so whoever is free takes over the untouched part of a late
 * worker's share. A worker caller steps its own share first and looks at
 * the others' only after a grace (LOOK_EVERY spins), so that in the common
 * case nobody reads a line another worker claims from: per batch, go's
 * line crosses to each worker and sync_left's back. Environment i writes
 * row i of the sync batch in place; the participant that brings sync_left
 * to zero signals the waiter. A batch cheaper than INLINE_NS is stepped by
 * a worker caller alone, with no atomics at all.
 *
 * Async. A worker that finishes environments pushes their results (id,
 * reward, done; the observation stays in the env's own row) into its own
 * result ring - one per worker, written by that worker's thread alone,
 * read by the owner alone: plain stores and one release store of the
 * tail, no read-modify-write and no line another worker writes (a ring
 * too full - more than RES_CAP results of one worker not yet gathered -
 * sends the rest to an overflow stack, by CAS). The owner writes every
 * row of the batch blocks itself: recv gathers the rings' new entries
 * (copying each observation from its env's row) into the next rows, in
 * the order it finds them, until the block it takes next is full; results
 * the owner steps itself (a recv's own stepping, a cheap send stepped at
 * once by step_now) go straight into the next rows. So blocks need no
 * count: the owner knows `ready`. An environment is busy from its send
 * until the recv that returns it, so at most num_envs results are on
 * their way: rows stay within the block recv takes next plus
 * (num_envs - 1) / B blocks ahead, and K = num_envs / B + 3 blocks never
 * wrap onto the block the user still reads.
 *
 * Waiting: sync finishers bump `progress` (a futex word) and wake only if
 * the waiter said it sleeps - a store-load pair, seq_cst on both sides
 * (see signal/wait_until). Async pushers do the same after each push
 * (wake_owner): with the engine's membarrier the pushers' side is plain
 * and the sleeper runs the barrier (as the scheduler's wake handshake).
 * A waiter serves rings first; a waiter that is a worker runs other jobs
 * when none is left; a sync owner, once a look found nothing, polls
 * done() alone, looking again every LOOK_EVERY spins (its reads of the
 * others' claim lines and rings would take the lines their workers claim
 * from); a recv, once a look found every ring empty, looks no more (only
 * the owner fills rings).
 *
 * Lines: what workers read at every claim (the pool's sizes, the envs,
 * the batches) is written at creation only; the owner's bookkeeping
 * (enter/leave, counts, estimates) has lines of its own; a sync batch's
 * parameters travel in each slice's go line, so a worker takes one line
 * from the owner per batch.
 *
 * Lifetime: the slices (with their jobs) live in a shell that outlives the
 * pool while posted jobs still hold it: a job posted to a worker that is
 * busy for long (a long actor method) may run after the pool is freed.
 * A job counts itself in `running` and then checks `dead`; free sets
 * `dead` and then waits for `running` to reach zero (a store-load pair,
 * seq_cst: either the job sees dead and does not touch the pool, or free
 * waits for it). The shell's `refs` (the pool's one, plus one per job
 * posted and not yet ended) frees it when the last goes.
 * hive_envpool_free takes every id still in a ring first (dropping it).
 */
#include "hive_impl.h"
#include "arena.h"
#include "sched.h"
#include "store.h"
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
#define MAX_CLAIM  16u                    /* ids taken by one claim at most */
#define INLINE_NS  2000.0                 /* a batch cheaper than this: the caller steps it */
#define CHUNK_NS   4000.0                 /* async: envs claimed together make about this much work */
/* sync: a chunk is about this much work - small enough that whoever is
 * free takes over the untouched part of a late worker's share at 1 us a
 * step, large enough that its one fetch_add is ~1% of it */
#define SYNC_CHUNK_NS 1000.0
#define TOGETHER_NS 500u                 /* async: cheaper envs of a claim are published together */
/* async: a worker's result ring holds num_envs results, this many at most
 * (more go to the overflow stack: see push_results) */
#define RES_CAP    hive__envpool_res_cap
/* For tests: RES_CAP (a power of two), read at hive_envpool_new; small
 * values make the overflow stack carry results. */
unsigned hive__envpool_res_cap = 1024;
/* a slice job with nothing left stands this long, watching its slice,
 * before it ends (see stand); it looks at the clock and for other jobs
 * every STAND_LOOK spins */
#define STAND_NS   20000u
#define STAND_LOOK 64u
#define STAND_COST_NS 4000u               /* ... only while a step costs less than this */
#define COST_EVERY 32u                    /* batches (sends) between two measures of a step's cost */
/* a sync owner with nothing to step polls done() alone, looking for work
 * (steals, other jobs) every LOOK_EVERY spins: a few hundred ns */
#define LOOK_EVERY 8u
/* a waiter with nothing to do reads the clock every CLOCK_EVERY-th pass
 * (a read is 35-50 ns on this VM) */
#define CLOCK_EVERY 8u
/* a slice job times one turn in TURN_EVERY (the cost hint) while a step
 * costs under STAND_COST_NS */
#define TURN_EVERY 8u

enum { KIND_STEP, KIND_RESET };

typedef struct env {
    struct hive_envpool  *pool;
    unsigned char        *state;         /* arena block on `node`: state | obs row | action */
    unsigned char        *own_obs;
    unsigned char        *act;
    int32_t               id;
    uint32_t              episode;
    unsigned              node;
    unsigned              home;          /* slice (worker index) that steps it */
    int                   kind;          /* async: step or reset (written at send, only
                                            when it changes: see the pool's sent) */
    /* async: a result that found its worker's result ring full, on the
     * pool's overflow stack (see push_result): written by the stepper
     * before its release CAS, read by the owner after its acquire */
    struct env           *onext;
    float                 oreward;
    uint8_t               odone;
} HIVE_ALIGNED env_t;

typedef struct result {                  /* one async result in a worker's result ring */
    int32_t               id;
    float                 reward;
    uint32_t              done;
} result_t;

struct shell;

typedef struct slice {                   /* one per worker: its envs waiting for a step */
    hive__job_t           job;           /* serves the ring (posted to `worker`) */
    struct hive_envpool  *pool;          /* touched by the job only while the pool lives */
    struct shell         *shell;
    /* async: cap entries, each an env id (low 32 bits) and, when actions
     * are 4 bytes or less (act_inline), its action's bytes (high 32) */
    _Atomic uint64_t     *ring;
    uint64_t              mask;          /* cap - 1; cap is a power of two >= the home envs */
    int32_t              *home;          /* sync: the ids of its home envs, in id order */
    uint32_t              nhome;
    unsigned              worker, node;
    /* the job's turns that stepped something (its runner's: one at a
     * time; see slice_job's cost hint) */
    uint32_t              turns;
    /* positions claimed (any participant, CAS): a line apart from the
     * tail the owner stores, so that the home worker's claims hit its
     * own cache while nobody else looks */
    HIVE_ALIGNED _Atomic uint64_t head;
    HIVE_ALIGNED _Atomic uint64_t tail;  /* positions published (the owner thread) */
    /* owner: positions pushed, published by publish_tails - in the tail's
     * line, which the owner stores anyway: in the first line (ring, mask,
     * home, read at every claim) each push took that line from the
     * workers */
    uint64_t              ptail;
    _Atomic uint32_t      queued;        /* the job is posted or running (see post_slice) */
    /* sync: chunks handed out so far, ever - the end of the batch under
     * way; only the owner stores it, once per batch (see claim_chunk) */
    HIVE_ALIGNED _Atomic uint64_t go;
    /* sync: the batch's parameters, written by the owner before go's
     * release and read by a claimer after its acquire - in go's line, so
     * that one line crosses to a worker per batch, not two */
    uint64_t              base;          /* the batch's first chunk number */
    const unsigned char  *acts;          /* the caller's actions (NULL: reset) */
    int                   kind;
    uint32_t              chunk;         /* envs per chunk */
    /* sync: chunks claimed so far, ever (a CAS, never past go). A line
     * apart from go's: the home worker claims from it, and nobody else
     * reads it unless it is late, so its claims hit its own cache */
    HIVE_ALIGNED _Atomic uint64_t taken;
    /* async: the results worker `worker` stepped (from whichever slice),
     * for the owner to gather into the batches (gather): one producer -
     * the worker's thread (a spare thread that becomes the worker runs
     * only while the other waits in a join) - and one consumer, the
     * owner. rtail: results pushed, a release store per push, no RMW;
     * rseen: the producer's last look at rhead. */
    result_t             *res;
    uint64_t              rmask;         /* rcap - 1 */
    HIVE_ALIGNED _Atomic uint64_t rtail;
    uint64_t              rseen;
    /* results gathered (the owner; release, read by the producer only
     * when its ring looks full) - a line of its own, so that the owner's
     * store does not take away the line the producer pushes to */
    HIVE_ALIGNED _Atomic uint64_t rhead;
} HIVE_ALIGNED slice_t;

typedef struct shell {                   /* what a job may touch after its pool is freed */
    _Atomic uint32_t      refs;          /* the pool's one + posted jobs not yet ended */
    _Atomic uint32_t      running;       /* jobs inside the pool now */
    _Atomic uint32_t      dead;          /* the pool is being freed: a job ends at once */
} HIVE_ALIGNED shell_t;                  /* the slices follow it in its block */

/* Drop a reference to the shell; the last frees it. acq_rel: every use
 * of the shell by the other holders comes before the free. */
static void shell_unref(shell_t *sh)
{
    if (atomic_fetch_sub_explicit(&sh->refs, 1, memory_order_acq_rel) == 1)
        free(sh);
}

typedef struct block {                   /* one async batch */
    hive_envpool_batch_t  b;
    hive_ref_t            refs[4];
} block_t;

struct hive_envpool {
    hive_t               *h;
    hive_env_class_t      cls;
    /* the slice of the worker the owner last called from (UINT32_MAX: a
     * user thread); slice jobs read it (see slice_job). relaxed both
     * ways: a hint; stored only when it changes, so the line stays shared */
    _Atomic uint32_t      owner_slice;
    size_t                n, bsize;      /* num_envs, batch_size */
    size_t                obs_bytes, act_bytes, state_bytes, block_bytes;
    size_t                act_item;      /* bytes of one action element */
    /* actions of 4 bytes or less travel in the ring entries (push): the
     * stepper reads no line of the env's block the owner wrote */
    bool                  act_inline;
    uint64_t              seed;
    env_t                *env;
    shell_t              *shell;         /* the slices' block (see the top) */
    slice_t              *slices;        /* one per worker of the engine, after the shell */
    unsigned              nslices;
    unsigned             *order;         /* per slice: the slices to steal from, nearest first */
    hive_envpool_batch_t  sync;
    hive_ref_t            sync_refs[4];
    block_t              *blocks;
    size_t                nblocks;
    /* The owner's fields below, written by its calls and read by no
     * worker: on lines of their own, so that the owner's bookkeeping does
     * not take away from the workers the lines they read at every claim
     * (the ones above, written at creation only). */
    /* enter/leave's flag; acquire/release order the owners */
    HIVE_ALIGNED _Atomic uint32_t inside;
    _Atomic uint64_t      steps;         /* owner: steps returned (read by statistics) */
    double                step_ns;       /* owner: a step's cost as the owner measured it */
    double                cost_high;     /* owner: a sample far above step_ns, held back (note_cost) */
    uint32_t              nsync;         /* owner: sync batches so far (cost sampling) */
    uint32_t              nwait;         /* owner: waits so far (cost sampling, wait_until) */
    size_t                recv_blk;      /* owner: the block recv takes next (blocks taken
                                            so far mod nblocks, kept, not divided: a
                                            division is a tenth of a CartPole step) */
    size_t                inflight;      /* owner: results sent and not received */
    uint64_t              sends;         /* owner: sends checked so far (check_ids' marks) */
    /* owner: per env, 0 while idle, else the number of the send that
     * named it (busy from that send until the recv that returns it) - an
     * array of the owner's own, not a field of the env's record: the
     * owner writes it at every send and recv, and a record's line is read
     * by whoever steps the env, so it stays clean in their caches */
    uint64_t             *sent;
    /* owner: results placed in the batches and not yet received (recv's
     * block is ready once it reaches batch_size), and where the next one
     * goes (row fill_row of block fill_blk) */
    size_t                ready;
    size_t                fill_row, fill_blk;
    /* async results whose worker's result ring was full (push_results): a
     * stack of envs, pushed by CAS, taken whole by the owner (exchange) */
    HIVE_ALIGNED _Atomic(env_t *) over;
    HIVE_ALIGNED _Atomic uint32_t sync_left;  /* sync envs still stepping */
    HIVE_ALIGNED _Atomic uint32_t progress;   /* futex word: bumped at every signal */
    _Atomic uint32_t      sleeping;           /* the waiter sleeps on progress */
    _Atomic uint32_t      shut;               /* a step was dropped by shutdown */
    /* a step's cost in ns as last measured by anyone stepping (the owner,
     * or a slice job over its turn): sizes async claims, so that a claim
     * holds about CHUNK_NS of work - a participant that is preempted holds
     * back no more than that of someone else's batch. 0: not measured */
    HIVE_ALIGNED _Atomic uint32_t cost_hint;
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

static bool stopping(hive_envpool_t *p)
{
    return atomic_load_explicit(&p->h->sched.stopping, memory_order_acquire) != 0;
}

/* ------------------------------------------------------------ stepping */

/* One step (or reset) of e, auto-reset included, into obs. */
static inline __attribute__((always_inline)) void step_env(hive_envpool_t *p, env_t *e, int kind,
                                                          const void *act, unsigned char *obs,
                                                          float *r, int *d)
{
    *r = 0;
    *d = 0;
    if (kind == KIND_RESET) {
        p->cls.reset(e->state, episode_seed(p, e), obs);
    } else {
        p->cls.step(e->state, act, obs, r, d);
        *d = *d != 0;
        if (*d) {                        /* auto-reset, inside the same step */
            e->episode++;
            p->cls.reset(e->state, episode_seed(p, e), obs);
        }
    }
}

/* A result is out: wake the waiter if it sleeps. seq_cst, both: the
 * finisher's half of the store-load pair (its result is visible before
 * it reads sleeping; the waiter stores sleeping before re-checking). */
static void signal_waiter(hive_envpool_t *p)
{
    atomic_fetch_add_explicit(&p->progress, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&p->sleeping, memory_order_seq_cst) != 0)
        hive__futex_wake(&p->progress, 1);
}

/* The owner's end of the async results. Every row of the batch blocks is
 * written by the owner alone - results it stepped itself (step_now, a
 * recv's own stepping) go straight in, those of other workers are gathered
 * from their result rings (gather) - so a block needs no count and no
 * claim of positions: the owner keeps `ready` (rows placed, not yet
 * received) and the next row (fill_row of fill_blk). Rows stay within the
 * block recv takes next plus (num_envs - 1) / B blocks ahead (ready <=
 * inflight <= num_envs), and K = num_envs / B + 3 blocks never wrap onto
 * the block the user still reads. */

/* The next row for a result (env id, reward r, done d); returns where its
 * observation goes. Owner only. */
static unsigned char *place(hive_envpool_t *p, int32_t id, float r, uint8_t d)
{
    block_t *bl = &p->blocks[p->fill_blk];
    size_t row = p->fill_row;
    ((float *)bl->b.reward.data)[row] = r;
    ((uint8_t *)bl->b.done.data)[row] = d;
    ((int32_t *)bl->b.env_id.data)[row] = id;
    if (++p->fill_row == p->bsize) {
        p->fill_row = 0;
        p->fill_blk = p->fill_blk + 1 == p->nblocks ? 0 : p->fill_blk + 1;
    }
    p->ready++;
    return (unsigned char *)bl->b.obs.data + row * p->obs_bytes;
}

/* A result stepped into its env's own row, placed: its observation copied. */
static void place_copy(hive_envpool_t *p, int32_t id, float r, uint8_t d)
{
    unsigned char *obs = place(p, id, r, d);
    if (p->obs_bytes)
        memcpy(obs, p->env[id].own_obs, p->obs_bytes);
}

/* A worker pushed results: wake the owner if it sleeps (the pushers' half
 * of the store-load pair with wait_until's sleep). asym (the engine's
 * private expedited membarrier works): the push's release store, a
 * compiler barrier and a relaxed load - the sleeper's membarrier runs a
 * full barrier on this CPU, so either our store is visible to its re-check
 * or our load sees its sleeping (as the scheduler's own wake handshake,
 * sched.c); no fence here, so a push waits for no line. Else the push's
 * store was seq_cst and so is this load, against the sleeper's seq_cst
 * store and re-reads (recheck). The orders are constants in each branch:
 * a memory order known only at run time compiles as seq_cst. */
static void wake_owner(hive_envpool_t *p)
{
    atomic_signal_fence(memory_order_seq_cst);
    bool asleep = p->h->sched.asym ? atomic_load_explicit(&p->sleeping, memory_order_relaxed) != 0
                                   : atomic_load_explicit(&p->sleeping, memory_order_seq_cst) != 0;
    if (asleep) {
        /* seq_cst: the futex word changes before the wake */
        atomic_fetch_add_explicit(&p->progress, 1, memory_order_seq_cst);
        hive__futex_wake(&p->progress, 1);
    }
}

/* Results of worker `out` (the stepping worker's slice): the k envs ids[]
 * (their observations in their own rows, rewards r[], dones d[]) into its
 * result ring - plain stores of the entries and one release store of the
 * tail, no read-modify-write, on lines only this worker writes. A ring
 * too full for them (the owner has not gathered: more than a ring of
 * results of one worker on their way) sends the rest to the pool's
 * overflow stack, each env its own node (an env has at most one result on
 * its way), by CAS. */
static void push_results(hive_envpool_t *p, slice_t *out, const int32_t *ids, unsigned k,
                         const float *r, const int *d)
{
    /* relaxed: this thread is the ring's only writer */
    uint64_t t = atomic_load_explicit(&out->rtail, memory_order_relaxed), cap = out->rmask + 1;
    if (t + k - out->rseen > cap)
        /* acquire: the owner's reads of the entries it gathered come
         * before our overwrites of them */
        out->rseen = atomic_load_explicit(&out->rhead, memory_order_acquire);
    unsigned i = 0;
    for (; i < k && t - out->rseen < cap; i++, t++) {
        result_t *x = &out->res[t & out->rmask];
        x->id = ids[i];
        x->reward = r[i];
        x->done = (uint32_t)d[i];
    }
    /* release: the entries and the envs' own rows to gather's acquire
     * (seq_cst without asym: see wake_owner) */
    if (i > 0 && p->h->sched.asym)
        atomic_store_explicit(&out->rtail, t, memory_order_release);
    else if (i > 0)
        atomic_store_explicit(&out->rtail, t, memory_order_seq_cst);
    for (; i < k; i++) {
        env_t *e = &p->env[ids[i]];
        e->oreward = r[i];
        e->odone = (uint8_t)d[i];
        env_t *top = atomic_load_explicit(&p->over, memory_order_relaxed);
        do
            e->onext = top;
        /* release: the env's result and row to gather's acquire exchange;
         * seq_cst: also the pushers' store of the pair without asym (see
         * wake_owner) - a locked instruction either way on x86, and the
         * overflow is no fast path */
        while (!atomic_compare_exchange_weak_explicit(&p->over, &top, e, memory_order_seq_cst,
                                                      memory_order_relaxed));
    }
    wake_owner(p);
}

/* Async results are out: into the owner's batches (out NULL: the caller
 * is the owner) or worker out's result ring. */
static void publish(hive_envpool_t *p, slice_t *out, const int32_t *ids, unsigned k,
                    const float *r, const int *d)
{
    if (out != NULL) {
        push_results(p, out, ids, k, r, d);
        return;
    }
    for (unsigned i = 0; i < k; i++)
        place_copy(p, ids[i], r[i], (uint8_t)d[i]);
}

/* The owner takes every result the workers pushed into the batches: each
 * result ring's new entries (acquire on its tail, release of its head for
 * the producer's reuse), then the overflow stack, whole. */
static void gather(hive_envpool_t *p)
{
    for (unsigned i = 0; i < p->nslices; i++) {
        slice_t *s = &p->slices[i];
        /* acquire: the entries and the envs' rows (see push_results) */
        uint64_t t = atomic_load_explicit(&s->rtail, memory_order_acquire);
        /* relaxed: the owner is rhead's only writer */
        uint64_t h = atomic_load_explicit(&s->rhead, memory_order_relaxed);
        if (h == t)
            continue;
        for (; h < t; h++) {
            const result_t *x = &s->res[h & s->rmask];
            place_copy(p, x->id, x->reward, (uint8_t)x->done);
        }
        /* release: our reads of the entries before the producer's reuse */
        atomic_store_explicit(&s->rhead, t, memory_order_release);
    }
    /* relaxed: a look; the exchange acquires what it takes */
    if (atomic_load_explicit(&p->over, memory_order_relaxed) != NULL) {
        env_t *e = atomic_exchange_explicit(&p->over, NULL, memory_order_acquire);
        for (; e != NULL; e = e->onext)
            place_copy(p, e->id, e->oreward, e->odone);
    }
}

/* The sleeper's re-read of what the pushers store (without asym: see
 * wake_owner): seq_cst loads, after its seq_cst store of sleeping; the
 * gather after them reads values at least as new (read-read coherence). */
static void recheck(hive_envpool_t *p)
{
    for (unsigned i = 0; i < p->nslices; i++)
        (void)atomic_load_explicit(&p->slices[i].rtail, memory_order_seq_cst);
    (void)atomic_load_explicit(&p->over, memory_order_seq_cst);
}

/* Step the envs ids[0..n) now, on the owner's thread, straight into the
 * next n rows of the batches (each observation written in its row: no
 * copy from the env's own row): a worker's send of envs cheaper than a
 * hand-off (all_inline), so the recv after it finds them done. acts: the
 * send's actions, row k for ids[k] (NULL: the kind each env was given,
 * its action in its own row). No atomics: the owner writes every row. */
static void step_now(hive_envpool_t *p, const int32_t *ids, size_t n, const unsigned char *acts)
{
    size_t row = p->fill_row, blk = p->fill_blk;
    const size_t ob = p->obs_bytes, ab = p->act_bytes;
    for (size_t i = 0; i < n;) {
        block_t *bl = &p->blocks[blk];
        size_t m = p->bsize - row;
        if (m > n - i)
            m = n - i;
        unsigned char *obs = (unsigned char *)bl->b.obs.data + row * ob;
        float *rw = (float *)bl->b.reward.data + row;
        uint8_t *dn = (uint8_t *)bl->b.done.data + row;
        int32_t *id = (int32_t *)bl->b.env_id.data + row;
        for (size_t j = 0; j < m; j++, i++) {
            env_t *e = &p->env[ids ? (size_t)ids[i] : i];
            int d;
            step_env(p, e, e->kind, acts ? acts + i * ab : e->act, obs + j * ob, &rw[j], &d);
            dn[j] = (uint8_t)d;
            id[j] = e->id;
        }
        row += m;
        if (row == p->bsize) {
            row = 0;
            blk = blk + 1 == p->nblocks ? 0 : blk + 1;
        }
    }
    p->fill_row = row;
    p->fill_blk = blk;
    p->ready += n;
}

/* ------------------------------------------------------------ sync chunks */

/* Claim the next chunk of slice s's sync batch: its index in the batch,
 * or -1 when none is left. Chunks are numbered for ever: the owner moves
 * go from the last batch's end to this one's (base + chunks), and a
 * claimer moves taken from t to t + 1 by CAS while t < go - never past
 * it, so taken == go again when a batch is all claimed, which it is
 * before the owner starts the next (sync_left reached 0). A CAS that wins
 * t < go owns chunk t, and t is in the batch under way: a chunk of an
 * earlier batch unclaimed would mean that batch had not ended. So base,
 * read after the claim, is that batch's, and the owner does not rewrite
 * it before our count. acquire on go: pairs with the owner's release
 * store, so the batch's parameters and the envs' state from the last
 * batch (whoever stepped them counted off, release, before the owner's
 * acquire of sync_left) are visible. The CAS alone orders nothing else
 * (relaxed): the chunk's uniqueness is its atomicity. */
static int64_t claim_chunk(slice_t *s)
{
    uint64_t t = atomic_load_explicit(&s->taken, memory_order_relaxed);
    for (;;) {
        if (t >= atomic_load_explicit(&s->go, memory_order_acquire))
            return -1;
        if (atomic_compare_exchange_weak_explicit(&s->taken, &t, t + 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            return (int64_t)(t - s->base);
    }
}

static bool sync_pending(slice_t *s)
{
    /* seq_cst: the job's half of the store-load pair in post_slices */
    return atomic_load_explicit(&s->taken, memory_order_seq_cst) <
           atomic_load_explicit(&s->go, memory_order_seq_cst);
}

/* Step the envs home[lo..hi) (home NULL: the ids lo..hi-1) into the sync
 * batch's rows: a plain loop, no atomics - the caller's inline batch and
 * every claimed chunk. */
static void step_rows(hive_envpool_t *p, const unsigned char *acts, int kind, const int32_t *home,
                      size_t lo, size_t hi)
{
    float *rw = p->sync.reward.data;
    uint8_t *dn = p->sync.done.data;
    unsigned char *obs = p->sync.obs.data;
    const size_t ob = p->obs_bytes, ab = p->act_bytes;
    for (size_t k = lo; k < hi; k++) {
        size_t id = home ? (size_t)home[k] : k;
        float r;
        int d;
        step_env(p, &p->env[id], kind, acts ? acts + id * ab : NULL, obs + id * ob, &r, &d);
        rw[id] = r;
        dn[id] = (uint8_t)d;
    }
}

/* A turn's rewards and dones, held until the turn counts off (flush):
 * rows of envs of different workers share lines (4-byte rewards, 1-byte
 * dones), and each claim's locked instruction waits for the stores before
 * it - so stores into lines another core is writing would make every
 * claim wait for a line crossing. Held here, they cost one wait, at the
 * count. */
#define STAGE_N 32
typedef struct stage {
    size_t  n;
    int32_t id[STAGE_N];
    float   r[STAGE_N];
    uint8_t d[STAGE_N];
} stage_t;

static void flush_stage(hive_envpool_t *p, stage_t *st)
{
    float *rw = p->sync.reward.data;
    uint8_t *dn = p->sync.done.data;
    for (size_t i = 0; i < st->n; i++) {
        rw[st->id[i]] = st->r[i];
        dn[st->id[i]] = st->d[i];
    }
    st->n = 0;
}

/* Step chunk idx of slice s into the sync batch's rows (lost: drop it),
 * its rewards and dones through st. Returns the envs it covered. */
static size_t step_chunk(hive_envpool_t *p, slice_t *s, uint32_t idx, bool lost, stage_t *st)
{
    size_t lo = (size_t)idx * s->chunk, hi = lo + s->chunk;
    if (hi > s->nhome)
        hi = s->nhome;
    if (lost) {
        float *rw = p->sync.reward.data;
        uint8_t *dn = p->sync.done.data;
        /* relaxed: the waiter reads it after sync_left's acquire */
        atomic_store_explicit(&p->shut, 1, memory_order_relaxed);
        for (size_t k = lo; k < hi; k++) {
            rw[s->home[k]] = 0;
            dn[s->home[k]] = 0;
        }
        return hi - lo;
    }
    unsigned char *obs = p->sync.obs.data;
    const size_t ob = p->obs_bytes, ab = p->act_bytes;
    for (size_t k = lo; k < hi; k++) {
        size_t id = (size_t)s->home[k];
        int d;
        if (st->n == STAGE_N)
            flush_stage(p, st);
        step_env(p, &p->env[id], s->kind, s->acts ? s->acts + id * ab : NULL, obs + id * ob,
                 &st->r[st->n], &d);
        st->d[st->n] = (uint8_t)d;
        st->id[st->n++] = (int32_t)id;
    }
    return hi - lo;
}

/* Sync envs counted off at once: one RMW per slice a turn stepped from,
 * not per env or chunk. seq_cst: the rows are written before the count
 * drops (release for the waiter's acquire), and before signal's read of
 * sleeping. Returns the envs still to be counted after ours (k == 0:
 * unknown, SIZE_MAX). */
static size_t count_sync(hive_envpool_t *p, size_t k)
{
    if (k == 0)
        return SIZE_MAX;
    uint32_t was = atomic_fetch_sub_explicit(&p->sync_left, (uint32_t)k, memory_order_seq_cst);
    if (was == k)
        signal_waiter(p);
    return was - k;
}

/* A turn at the sync batch: the chunks of slice `me` first, then (others)
 * of the other slices, nearest first; counted off once per slice that had
 * chunks for us, before the next slice is looked at, and no look at all
 * once the count says the batch is done: a look at another slice's taken
 * costs a line from the core that claims from it, and makes its next
 * claim fetch it back. Returns the envs. */
static size_t serve_sync(hive_envpool_t *p, unsigned me, bool lost, bool others)
{
    const unsigned *ord = p->order + (size_t)me * p->nslices;
    size_t total = 0;
    for (unsigned k = 0; k < (others ? p->nslices : 1); k++) {
        slice_t *s = &p->slices[ord[k]];
        int64_t c;
        size_t got = 0;
        stage_t st;
        st.n = 0;
        while ((c = claim_chunk(s)) >= 0)
            got += step_chunk(p, s, (uint32_t)c, lost, &st);
        flush_stage(p, &st);
        total += got;
        if (count_sync(p, got) == 0)
            break;
    }
    return total;
}

/* ------------------------------------------------------------ slices */

/* Claim up to `most` entries of s into out[]; 0 if it is empty. The ids
 * are read before the CAS and are ours only if it succeeds: then none of
 * those positions was claimed before, and none was overwritten, because
 * the owner pushes position q + cap only after cap + 1 pushes since q,
 * which needs an env to come back (stepped, received, sent again) from a
 * position at or after q while q was unclaimed - impossible, as head only
 * grows. acq_rel on the CAS: acquire of the ids' writes is the tail's
 * (below); release so that a later claimer of a position past ours
 * (whose step leads, through recv or sync_left, to the owner's next push
 * into our slots) comes after our reads of the slots. relaxed loads of
 * ring entries: a racing overwrite is possible only when the CAS then
 * fails, and its value is then discarded. acts[k]: the action bits of
 * out[k]'s entry (see push). */
static unsigned claim(slice_t *s, unsigned most, int32_t *out, uint32_t *acts)
{
    uint64_t h = atomic_load_explicit(&s->head, memory_order_relaxed);
    for (;;) {
        /* acquire: pairs with the owner's release of tail, so the ids
         * below (and the fields the owner wrote before) are visible */
        uint64_t t = atomic_load_explicit(&s->tail, memory_order_acquire);
        if (h >= t)
            return 0;
        uint64_t avail = t - h, take = (avail + 1) / 2;   /* half: leave some for thieves */
        if (take > most)
            take = most;
        for (uint64_t k = 0; k < take; k++) {
            uint64_t x = atomic_load_explicit(&s->ring[(h + k) & s->mask], memory_order_relaxed);
            out[k] = (int32_t)(uint32_t)x;
            acts[k] = (uint32_t)(x >> 32);
        }
        if (atomic_compare_exchange_weak_explicit(&s->head, &h, h + take, memory_order_acq_rel,
                                                  memory_order_relaxed))
            return (unsigned)take;
    }
}

/* The shared cost hint (see the pool): relaxed, a sizing hint only; the
 * last writer wins. */
static void hint_cost(hive_envpool_t *p, uint64_t ns)
{
    uint32_t v = ns == 0 ? 1 : ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
    uint32_t old = atomic_load_explicit(&p->cost_hint, memory_order_relaxed);
    /* stored only when it moves by more than an eighth: a turn's time per
     * env differs by some ns every time, and a store at every turn made
     * the line cross to every reader (each claim reads it) at every turn */
    uint32_t diff = v > old ? v - old : old - v;
    if (old == 0 || diff > old / 8)
        atomic_store_explicit(&p->cost_hint, v, memory_order_relaxed);
}

/* Ids one async claim may take: about CHUNK_NS of work, 1 .. MAX_CLAIM
 * (MAX_CLAIM until a cost is known: cheap envs are the costly case for
 * claims). */
static unsigned claim_most(hive_envpool_t *p, unsigned most)
{
    uint32_t c = atomic_load_explicit(&p->cost_hint, memory_order_relaxed);   /* a hint */
    unsigned m = c == 0 ? MAX_CLAIM : c >= CHUNK_NS ? 1u : (unsigned)(CHUNK_NS / c);
    if (m > most)
        m = most;
    return m ? m : 1;
}

/* One claim from slice s, stepped (lost: dropped) and published (out:
 * the stepping worker's slice, whose result ring takes them; NULL: the
 * owner, who places them itself): cheap envs together once all are
 * stepped (a claim is about CHUNK_NS of work: a result waits that long at
 * most), dearer ones one by one. Returns the entries taken. */
static unsigned serve_once(hive_envpool_t *p, slice_t *s, unsigned most, bool lost, slice_t *out)
{
    int32_t ids[MAX_CLAIM];
    float r[MAX_CLAIM];
    int d[MAX_CLAIM];
    uint32_t acts[MAX_CLAIM];
    unsigned k = claim(s, claim_most(p, most), ids, acts);
    /* cheap envs (the hint under TOGETHER_NS): published together (one
     * tail store and one look at the sleeper for all); dearer ones each as
     * it finishes, so a recv waits for no step it does not need */
    uint32_t hint = atomic_load_explicit(&p->cost_hint, memory_order_relaxed);   /* a hint */
    bool together = hint != 0 && hint < TOGETHER_NS;
    unsigned from = 0;
    for (unsigned i = 0; i < k; i++) {
        r[i] = 0;
        d[i] = 0;
        env_t *e = &p->env[ids[i]];
        if (lost)                        /* dropped at shutdown, not stepped */
            /* relaxed: the waiter reads it after acquiring the result */
            atomic_store_explicit(&p->shut, 1, memory_order_relaxed);
        else
            step_env(p, e, e->kind, p->act_inline ? (const void *)&acts[i] : e->act, e->own_obs,
                     &r[i], &d[i]);
        if (!together) {
            publish(p, out, ids + i, 1, r + i, d + i);
            from = i + 1;
        }
    }
    if (k > from)
        publish(p, out, ids + from, k - from, r + from, d + from);
    return k;
}

/* Serve async rings until none has anything: slice `me` first, then the
 * others nearest first (me's steal order). lost: drop instead of stepping;
 * out: as serve_once's. */
static size_t serve_all(hive_envpool_t *p, unsigned me, bool lost, slice_t *out)
{
    const unsigned *ord = p->order + (size_t)me * p->nslices;
    size_t total = 0;
    for (unsigned k = 0; k < p->nslices;) {
        unsigned got = serve_once(p, &p->slices[ord[k]], MAX_CLAIM, lost, out);
        if (got == 0) {
            k++;
            continue;
        }
        total += got;
        k = 0;                           /* nearest first again */
    }
    return total;
}

static bool ring_nonempty(slice_t *s)
{
    /* seq_cst: the job's half of the store-load pair in post_slice */
    return atomic_load_explicit(&s->head, memory_order_seq_cst) <
           atomic_load_explicit(&s->tail, memory_order_seq_cst);
}

/* Whether any slice has work waiting: a slice's job re-checks them all
 * before it ends, not only its own, because a caller that steps nothing
 * posts every job for the others' work (post_slices, every). */
static bool any_pending(hive_envpool_t *p, unsigned me)
{
    const unsigned *ord = p->order + (size_t)me * p->nslices;
    for (unsigned k = 0; k < p->nslices; k++)
        if (ring_nonempty(&p->slices[ord[k]]) || sync_pending(&p->slices[ord[k]]))
            return true;
    return false;
}

/* Work for slice s itself: ids in its ring, or chunks of a sync batch
 * left in it (taken < go). Loads only: what a standing job watches. */
static bool own_pending(slice_t *s)
{
    return ring_nonempty(s) || sync_pending(s);
}

/* A slice job with nothing left stands: it stays queued (so the owner's
 * next step or send posts nothing - no inbox push, no wake, no job start,
 * no shell count: about five lines crossing cores, ~1 us on a 2-vCPU VM,
 * which at 1 us a step was a quarter of a 4-env batch) and watches its
 * own slice's lines (go and the tail the owner stores once per batch;
 * not every slice's, so that its reads do not pull the owner's own taken
 * away at every claim; the others' only every STAND_LOOK spins) for
 * STAND_NS. True when work came: serve again.
 * False when it ran out, the engine stops or the pool is being freed
 * (free waits for `running`, which this job holds: it must not stand
 * long). Every STAND_LOOK spins it runs one other job the worker finds
 * (hive__sched_help), so a standing job holds no other work back. */
static bool stand(hive_envpool_t *p, slice_t *s, hive__worker_t *w)
{
    /* the stand's end is set at its first look (STAND_LOOK spins in): a
     * clock read at its start came right after the turn's last result,
     * when the next batch's work may be on its way */
    uint64_t end = 0;
    for (unsigned i = 1;; i++) {
        if (own_pending(s))
            return true;
        if (i % STAND_LOOK == 0) {
            /* the others' slices too, now and then: a caller that is not
             * a worker leaves a busy worker's envs to whoever is free */
            if (any_pending(p, (unsigned)(s - p->slices)))
                return true;
            uint64_t now = hive__now_ns();
            if (end == 0)
                end = now + STAND_NS;
            /* seq_cst: dead is free's store of the pair in slice_job */
            if (stopping(p) || atomic_load_explicit(&s->shell->dead, memory_order_seq_cst) ||
                now >= end)
                return false;
            if (hive__sched_help(w, NULL, NULL))
                end = hive__now_ns() + STAND_NS;   /* it was busy: a fresh stand */
        }
        hive__cpu_relax();
    }
}

/* A slice's job: serve its ring and steal, until nothing is left; stand a
 * while (see stand); then mark itself idle and re-check its ring (the
 * post_slice pair). w == NULL:
 * the engine stopped before it ran; it only ends (the envs in its ring are
 * dropped by the waiter or by free). */
static void slice_job(hive__job_t *job, hive__worker_t *w)
{
    slice_t *s = HIVE_CONTAINER_OF(job, slice_t, job);
    shell_t *sh = s->shell;
    /* seq_cst RMW, then seq_cst load of dead: the job's half of the pair
     * with free (see the top) */
    atomic_fetch_add_explicit(&sh->running, 1, memory_order_seq_cst);
    if (w != NULL && !atomic_load_explicit(&sh->dead, memory_order_seq_cst)) {
        hive_envpool_t *p = s->pool;
        unsigned me = (unsigned)(s - p->slices);
        for (;;) {
            bool lost = stopping(p);
            /* two clock reads a timed turn (the cost hint), one turn
             * that stepped in TURN_EVERY while steps are cheap: the first
             * read came before the turn's first claim, ~40 ns on the way
             * of every result */
            /* a hint: relaxed. Steps of STAND_COST_NS or more: every
             * turn, as before (two reads are under 1% of a turn there) */
            uint32_t hint = atomic_load_explicit(&p->cost_hint, memory_order_relaxed);
            bool timed = hint == 0 || hint >= STAND_COST_NS || s->turns % TURN_EVERY == 0;
            uint64_t t0 = timed ? hive__now_ns() : 0;
            /* results into the ring of the worker running us (not of
             * slice me: a job may run on another worker than its own) */
            size_t k = serve_sync(p, me, lost, true) + serve_all(p, me, lost, &p->slices[w->index]);
            if (k > 0)
                s->turns++;
            if (timed && k > 0 && !lost)
                hint_cost(p, (hive__now_ns() - t0) / k);
            /* only a job the worker runs at its top stands: one run
             * nested in a wait (the owner's recv helping with its own
             * slice's job, a task's get) would hold that wait back. And
             * not the job of the owner's own worker: the owner serves
             * that slice itself when it calls, and a job standing there
             * would only take the core from the owner's next turn (a
             * sampler actor whose pool's envs are all on its worker).
             * relaxed: a hint (see owner_slice). And only while steps
             * are cheap (the cost hint under STAND_COST_NS, relaxed: a
             * hint): the hand-off a stand saves (~1 us) matters against 1
             * us steps, not against batches of 10 us ones, whose rows
             * keep the behaviour they had */
            uint32_t cost = atomic_load_explicit(&p->cost_hint, memory_order_relaxed);
            if (!lost && w->depth == 0 && cost != 0 && cost < STAND_COST_NS &&
                me != atomic_load_explicit(&p->owner_slice, memory_order_relaxed) &&
                stand(p, s, w))
                continue;
            /* seq_cst: the job's half of the pair in post_slices: either
             * the owner's read of queued sees 0 and posts again, or our
             * re-check sees its push (or its sync batch) */
            atomic_store_explicit(&s->queued, 0, memory_order_seq_cst);
            if (!any_pending(p, me) ||
                atomic_exchange_explicit(&s->queued, 1, memory_order_seq_cst) != 0)
                break;
        }
    } else {
        /* dropped by a stop, or the pool is gone: nobody posts it now
         * (relaxed: the flag is only read by a poster) */
        atomic_store_explicit(&s->queued, 0, memory_order_relaxed);
    }
    /* release: free's acquire of running sees every use of the pool
     * before; our last touch of it */
    atomic_fetch_sub_explicit(&sh->running, 1, memory_order_release);
    shell_unref(sh);
}

/* Push id into its home ring with its action (act; NULL: none, a reset):
 * in the entry when actions are 4 bytes or less, else copied to the env's
 * block. The owner thread only. The tail is published by publish_tails,
 * once per slice and call. */
static void push(hive_envpool_t *p, int32_t id, const unsigned char *act)
{
    slice_t *s = &p->slices[p->env[id].home];
    uint32_t bits = 0;
    if (act != NULL && p->act_inline)
        memcpy(&bits, act, p->act_bytes);
    else if (act != NULL && p->act_bytes)
        memcpy(p->env[id].act, act, p->act_bytes);
    /* relaxed: published by the tail's release store */
    atomic_store_explicit(&s->ring[s->ptail & s->mask], (uint64_t)bits << 32 | (uint32_t)id,
                          memory_order_relaxed);
    s->ptail++;
}

/* Publish what push added: one store of each changed tail. release: the
 * ids and what the owner wrote for the envs (their actions, kind) before
 * it, to claim's acquire. seq_cst: also the owner's half of the pair in
 * post_slices (the store before the read of queued). */
static void publish_tails(hive_envpool_t *p)
{
    for (unsigned i = 0; i < p->nslices; i++) {
        slice_t *s = &p->slices[i];
        /* relaxed: only the owner writes tail */
        if (atomic_load_explicit(&s->tail, memory_order_relaxed) != s->ptail)
            atomic_store_explicit(&s->tail, s->ptail, memory_order_seq_cst);
    }
}

/* Post the job of every slice with waiting work (ids in its ring, or
 * chunks of a sync batch) that is not queued yet, but that of `skip` (the
 * calling worker's slice in a sync step: the caller serves it). every: a
 * caller that is not a worker steps nothing, so it posts every slice's
 * job: a worker whose own slice is empty steals, and envs whose home
 * worker is busy for long (a long actor method) still get stepped.
 * queued: seq_cst, the owner's half of the store-load pair with
 * slice_job (tail or go stored before, then queued read): a job that
 * ends either sees the work or is posted again. The exchange makes one
 * post per idle job. */
static void post_slices(hive_envpool_t *p, unsigned skip, bool every)
{
    for (unsigned i = 0; i < p->nslices; i++) {
        slice_t *s = &p->slices[i];
        /* queued first: a job that is queued (standing, the common case)
         * needs no post whatever its slice holds, and the look at the
         * slice's head and taken would take those lines from the worker
         * about to claim from them */
        if (i == skip || atomic_load_explicit(&s->queued, memory_order_seq_cst) != 0 ||
            (!every && !ring_nonempty(s) && !sync_pending(s)))
            continue;
        if (atomic_exchange_explicit(&s->queued, 1, memory_order_seq_cst) == 0) {
            /* relaxed: the post publishes the job; the count only has
             * to be there before the job can drop it */
            atomic_fetch_add_explicit(&p->shell->refs, 1, memory_order_relaxed);
            hive__sched_post(&p->h->sched, s->worker, &s->job);
        }
    }
}

/* The owner's estimate of one step's cost, from the envs it stepped
 * itself: ns for k envs. An average that follows changes within a few
 * batches (owner-only field: `inside` orders owners). A sample is wall
 * time, so a preemption inside it (a loaded machine) would make a 40 ns
 * CartPole step look like microseconds and send the next hundreds of
 * batches through the rings. So a sample above twice the estimate is
 * believed only when the next one agrees (a preemption seldom hits two
 * samples COST_EVERY batches apart), and then it is the estimate: a real
 * rise - 100 us steps measured first by a cheap reset - is followed two
 * samples later, not by 1/8 of twice the estimate a sample (clamping each
 * sample to twice the estimate crawled up from a reset's cost for
 * thousands of batches, with 100 us batches stepped on one core). */
static void note_cost(hive_envpool_t *p, uint64_t ns, size_t k)
{
    if (k == 0)
        return;
    double x = (double)ns / (double)k;
    if (p->step_ns > 0 && x > 2 * p->step_ns) {
        if (p->cost_high == 0) {         /* the first: held back */
            p->cost_high = x;
            return;
        }
        p->step_ns = x < p->cost_high ? x : p->cost_high;   /* two agree: the lesser */
        p->cost_high = 0;
        hint_cost(p, (uint64_t)p->step_ns);
        return;
    }
    p->cost_high = 0;
    p->step_ns = p->step_ns > 0 ? p->step_ns * 0.875 + x * 0.125 : x;
    hint_cost(p, (uint64_t)p->step_ns);
}

/* For tests: the owner's estimate of a step's cost (note_cost), in ns; 0
 * until the owner has timed a batch. */
double hive__envpool_step_estimate(const hive_envpool_t *p);
double hive__envpool_step_estimate(const hive_envpool_t *p)
{
    return p->step_ns;
}

/* Whether k envs are cheaper to step on the calling worker alone than to
 * hand to others: a hand-off (a post, the other worker noticing it, the
 * count back) costs on the order of a microsecond, so a batch below
 * INLINE_NS of work is stepped by the caller (as EnvPool with one thread
 * would). Only a worker caller; the cost is the owner's measure, else the
 * slice jobs' hint (a turn's time per env: never less than a step);
 * until either is measured, never. */
static bool all_inline(const hive_envpool_t *p, unsigned me, size_t k)
{
    if (me == UINT32_MAX)
        return false;
    /* relaxed: a hint */
    double c = p->step_ns > 0 ? p->step_ns
             : (double)atomic_load_explicit(&p->cost_hint, memory_order_relaxed);
    return c > 0 && c * (double)k < INLINE_NS;
}

/* The slice the calling thread serves first: its worker's, or (a user
 * thread) none of its own: UINT_MAX. */
static unsigned self_slice(hive_envpool_t *p)
{
    hive__worker_t *w = hive__self_in(&p->h->sched);
    return w != NULL && w->index < p->nslices ? w->index : UINT32_MAX;
}

/* The owner calls from slice me now (see owner_slice). */
static void note_owner(hive_envpool_t *p, unsigned me)
{
    if (atomic_load_explicit(&p->owner_slice, memory_order_relaxed) != me)
        atomic_store_explicit(&p->owner_slice, me, memory_order_relaxed);
}

/* ------------------------------------------------------------ waiting */

static bool block_ready(void *arg);

/* Wait until done(p) or the deadline (deadline 0: none). HIVE_OK or
 * HIVE_ETIMEDOUT. Serve rings meanwhile (own slice first; dropping the
 * ids once the engine stops, so the wait ends); on a worker, run other
 * jobs when no ring has anything. */
static int wait_until(hive_envpool_t *p, bool (*done)(void *), unsigned most, uint64_t deadline,
                      bool grace)
{
    hive__worker_t *w = hive__self_in(&p->h->sched);
    unsigned me = self_slice(p);
    const unsigned *ord = p->order + (size_t)(me == UINT32_MAX ? 0 : me) * p->nslices;
    uint64_t spin_end = 0;
    if (done(p))                         /* stepped inline at send: no clock read */
        return HIVE_OK;
    /* the cost of the envs stepped here (note_cost): the time from the
     * start of the wait while it did nothing but step, two clock reads in
     * all (a clock read per env would cost as much as a CartPole step);
     * timed every COST_EVERY-th wait (or until there is an estimate), as
     * a sync step and a cheap send are: a read costs 35-50 ns on this VM,
     * and a recv at 1 us a step waits about once a microsecond. Steps of
     * STAND_COST_NS or more: every wait, as before (two reads are under 1%
     * of a wait there, and the owner's smoothed estimate, stored in the
     * cost hint at each, keeps the hint from following one turn's sample
     * of a heavy-tailed env) */
    bool timing = w != NULL && !grace &&  /* a grace's spins are no stepping */
                  (p->step_ns == 0 || p->step_ns >= STAND_COST_NS ||
                   p->nwait++ % COST_EVERY == 0);
    uint64_t t0 = timing ? hive__now_ns() : 0;
    size_t served = 0;
    unsigned polls = 0;                  /* idle passes (the clock is read every CLOCK_EVERY-th) */
    /* spins since the last look for work (0: look now). grace: the
     * first look comes after LOOK_EVERY spins - a sync owner that stepped
     * its own share first gives the other workers, which got theirs a
     * hand-off later, that long before it reads their lines to steal */
    unsigned idle = grace ? 1 : 0;
    /* a recv whose look found every ring empty looks no more: only the
     * owner (here, waiting) puts ids in rings, so none can come, and a
     * look at a ring reads the head line its worker claims from */
    bool async = done == block_ready, drained = false;
    while (!done(p)) {
        /* A sync owner (grace), between two looks for work once a look
         * found none, polls done() alone: a look reads the other slices'
         * taken and rings, and every read of a line a worker is claiming
         * from makes that worker's next claim fetch it back from this core
         * (at 1 us a step, that was a tenth of the batch). A late worker's
         * envs are still taken within LOOK_EVERY spins. A recv looks at
         * every spin, as before: the async rows did not move with the
         * throttle, and the demo's samplers (3 workers on 2 cores) read
         * no better with it on a loaded machine. */
        if (grace && idle != 0 && idle++ % LOOK_EVERY != 0) {
            hive__cpu_relax();
            continue;
        }
        if (deadline != 0 && hive__now_ns() >= deadline)
            return HIVE_ETIMEDOUT;
        /* a claim of `most` at a time, re-checking done between: a worker
         * steps envs (from its own slice first); once the engine stops, any
         * waiter takes what is left without stepping it, so the wait ends.
         * A user thread otherwise only waits (its timeout holds). */
        bool lost = stopping(p), got = false;
        if ((w != NULL || lost) && !drained) {
            size_t m = serve_sync(p, me == UINT32_MAX ? 0 : me, lost, true);
            for (unsigned k = 0; k < p->nslices && m == 0; k++)
                m = serve_once(p, &p->slices[ord[k]], most, lost, NULL);
            got = m != 0;
            drained = async && !got;
            served += m;
            timing = timing && !lost;
        }
        if (got) {
            idle = 0;
            continue;
        }
        idle = 1;
        /* the clock only every CLOCK_EVERY-th idle pass (the spin's end
         * is 5 us away; a read between two looks at done() delays
         * seeing the last result by its cost) */
        uint64_t now = 0;
        if (timing || spin_end == 0 || ++polls % CLOCK_EVERY == 0)
            now = hive__now_ns();
        if (timing) {                    /* the stepping stretch ended */
            note_cost(p, now - t0, served);
            timing = false;
        }
        if (spin_end == 0)
            spin_end = now + SPIN_NS;
        if (w != NULL && hive__sched_help(w, done, p))
            continue;
        if (now == 0 || now < spin_end) {
            hive__cpu_relax();           /* the last envs are about to finish */
            continue;
        }
        /* Sleep until a result comes out. A worker naps (HELP_NAP_NS at
         * most) and looks for work again: other jobs may come. Sleeping,
         * not yielding in a loop: a yield on a loaded machine gives the
         * core away for a whole time slice while the results are already
         * in, and on a machine with more workers than cores the spinning
         * waiter takes the core from the workers stepping. */
        uint64_t nap = deadline ? deadline - now : 1000000000u;
        if (w != NULL && nap > HELP_NAP_NS)
            nap = HELP_NAP_NS;
        /* seq_cst: the waiter's half of the pair in signal_waiter: either
         * the finisher sees sleeping, or our re-check sees its result */
        uint32_t v = atomic_load_explicit(&p->progress, memory_order_seq_cst);
        atomic_store_explicit(&p->sleeping, 1, memory_order_seq_cst);
        if (async && !hive__sched_membarrier(&p->h->sched)) {
            /* the pair with wake_owner: with asym, the membarrier; else
             * seq_cst re-reads of the pushers' stores. asym but the call
             * failed: a pusher's plain side is not ordered, so nap */
            recheck(p);
            if (p->h->sched.asym && nap > HELP_NAP_NS)
                nap = HELP_NAP_NS;
        }
        if (!done(p))
            hive__futex_wait(&p->progress, v, (int64_t)nap);
        atomic_store_explicit(&p->sleeping, 0, memory_order_relaxed);
    }
    if (timing && served)
        note_cost(p, hive__now_ns() - t0, served);
    return HIVE_OK;
}

static bool sync_done(void *arg)
{
    hive_envpool_t *p = arg;
    /* seq_cst: acquires the rows (see count_sync) and pairs with signal */
    return atomic_load_explicit(&p->sync_left, memory_order_seq_cst) == 0;
}

/* recv's batch is placed: the owner's count, else after a gather. */
static bool block_ready(void *arg)
{
    hive_envpool_t *p = arg;
    if (p->ready >= p->bsize)
        return true;
    gather(p);
    return p->ready >= p->bsize;
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
    if (rc != HIVE_OK)
        refs[0].id = 0;
    if (rc == HIVE_OK && (rc = hive_array_new(p->h, HIVE_F32, 1, one, &refs[1])) != HIVE_OK)
        refs[1].id = 0;
    if (rc == HIVE_OK && (rc = hive_array_new(p->h, HIVE_U8, 1, one, &refs[2])) != HIVE_OK)
        refs[2].id = 0;
    if (rc == HIVE_OK && (rc = hive_array_new(p->h, HIVE_I32, 1, one, &refs[3])) != HIVE_OK)
        refs[3].id = 0;
    /* the pool's counts are the engine's own (store.h): a user who releases
     * a batch array's ref by mistake is refused, not freeing it under the
     * pool. Pinned only once all four are made, so free_batch meets pins
     * alone: what a failure made goes back here */
    for (int i = 0; i < 4; i++) {
        if (refs[i].id == 0)
            continue;
        if (rc == HIVE_OK) {
            hive__ref_pin(p->h, refs[i]);
        } else {
            hive_release(p->h, refs[i]);
            refs[i].id = 0;
        }
    }
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
            hive__ref_unpin(p->h, refs[i]);
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
    if (p->slices != NULL)
        for (unsigned i = 0; i < p->nslices; i++)
        {
            free((void *)p->slices[i].ring);
            free(p->slices[i].home);
            free(p->slices[i].res);
        }
    free(p->env);
    free(p->sent);
    free(p->blocks);
    if (p->shell != NULL)
        shell_unref(p->shell);           /* queued jobs may still hold it */
    free(p->order);
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
    if (o->env_worker != NULL)
        for (size_t i = 0; i < o->num_envs; i++)
            if (o->env_worker[i] >= hive_num_workers(h))
                return hive__fail(HIVE_EINVAL, "hive_envpool_new: env_worker[%zu] = %u is not one "
                                  "of the engine's %u workers", i, o->env_worker[i],
                                  hive_num_workers(h));
    if (o->env_node != NULL && o->env_worker == NULL)
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
        e->node = o->env_worker ? p->h->sched.w[o->env_worker[i]].slot->node
                : o->env_node ? o->env_node[i] : (unsigned)(i % nodes);
        int err = HIVE_OK;
        e->state = hive__arena_alloc(&p->h->arena, p->block_bytes, e->node, &err);
        if (e->state == NULL)
            return hive__fail(err, "hive_envpool_new: no room for environment %zu's %zu bytes "
                              "on node %u", i, p->block_bytes, e->node);
        memset(e->state, 0, p->block_bytes);
        e->own_obs = e->state + round64(p->state_bytes);
        e->act = e->own_obs + round64(p->obs_bytes);
        if (p->cls.init != NULL && p->cls.init(e->state, o->config, (unsigned)i) != 0)
            return hive__fail(HIVE_EINVAL, "hive_envpool_new: %s's init failed for environment %zu",
                              p->cls.name ? p->cls.name : "the class", i);
    }
    return HIVE_OK;
}

/* Home workers and the slices: env_worker's, or the envs of a node, in id
 * order, cut into contiguous ranges over its workers (a node without
 * workers: round robin over all); each slice's ring has room for all its envs, and its steal
 * order lists its own node's slices (from the next one on) before the
 * other nodes'. */
static int make_slices(hive_envpool_t *p, const unsigned *env_worker)
{
    hive__sched_t *s = &p->h->sched;
    unsigned nodes = hive_num_nodes(p->h), ns = s->n;
    size_t *count = hive__calloc(nodes, sizeof *count);
    size_t *home_n = hive__calloc(ns, sizeof *home_n);
    p->nslices = ns;
    p->shell = NULL;
    p->slices = NULL;
    if (hive__posix_memalign((void **)&p->shell, HIVE_PAD, sizeof(shell_t) + ns * sizeof(slice_t)) != 0) {
        p->shell = NULL;
    } else {
        memset(p->shell, 0, sizeof(shell_t) + ns * sizeof(slice_t));
        atomic_init(&p->shell->refs, 1);
        p->slices = (slice_t *)(p->shell + 1);
    }
    p->order = hive__calloc((size_t)ns * ns, sizeof *p->order);
    int rc = HIVE_OK;
    if (count == NULL || home_n == NULL || p->slices == NULL || p->order == NULL) {
        rc = hive__fail(HIVE_ENOMEM, "hive_envpool_new: cannot allocate the slices of %u workers",
                        ns);
        goto out;
    }
    for (size_t i = 0; i < p->n; i++)
        count[p->env[i].node]++;
    size_t *seen = hive__calloc(nodes, sizeof *seen);
    if (seen == NULL) {
        rc = hive__fail(HIVE_ENOMEM, "hive_envpool_new: cannot allocate the slices");
        goto out;
    }
    for (size_t i = 0; i < p->n; i++) {
        env_t *e = &p->env[i];
        const hive__nodeq_t *nq = e->node < s->nnodes ? &s->nodes[e->node] : NULL;
        size_t k = seen[e->node]++;
        if (env_worker != NULL)
            e->home = env_worker[i];
        else if (nq != NULL && nq->nworkers > 0)
            e->home = nq->workers[k * nq->nworkers / count[e->node]];
        else
            e->home = (unsigned)(k % ns);
        home_n[e->home]++;
    }
    free(seen);
    for (unsigned i = 0; i < ns; i++) {
        slice_t *sl = &p->slices[i];
        sl->pool = p;
        sl->shell = p->shell;
        sl->worker = i;
        sl->node = s->w[i].slot->node;
        sl->job.fn = slice_job;
        uint64_t cap = 1;
        while (cap < home_n[i])
            cap *= 2;
        sl->mask = cap - 1;
        sl->ring = hive__calloc(cap, sizeof *sl->ring);
        sl->home = hive__calloc(home_n[i] ? home_n[i] : 1, sizeof *sl->home);
        /* a result ring of num_envs entries never fills (an env has one
         * result on its way at most); past RES_CAP the overflow stack
         * takes what does not fit (push_results) */
        uint64_t rcap = 1;
        while (rcap < p->n && rcap < RES_CAP)
            rcap *= 2;
        sl->rmask = rcap - 1;
        sl->res = hive__calloc(rcap, sizeof *sl->res);
        if (sl->ring == NULL || sl->home == NULL || sl->res == NULL) {
            rc = hive__fail(HIVE_ENOMEM, "hive_envpool_new: cannot allocate a ring of %llu ids "
                            "and a list of %zu", (unsigned long long)cap, home_n[i]);
            goto out;
        }
    }
    for (size_t i = 0; i < p->n; i++) {            /* each slice's home ids, in id order */
        slice_t *sl = &p->slices[p->env[i].home];
        sl->home[sl->nhome++] = (int32_t)i;
    }
    for (unsigned i = 0; i < ns; i++) {
        unsigned *ord = p->order + (size_t)i * ns, k = 0;
        ord[k++] = i;
        for (unsigned j = 1; j < ns; j++)          /* own node, from the next worker on */
            if (p->slices[(i + j) % ns].node == p->slices[i].node)
                ord[k++] = (i + j) % ns;
        for (unsigned j = 1; j < ns; j++)          /* then the other nodes */
            if (p->slices[(i + j) % ns].node != p->slices[i].node)
                ord[k++] = (i + j) % ns;
    }
out:
    free(count);
    free(home_n);
    return rc;
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
    p->act_item = hive_dtype_size(cls->act_dtype);
    p->act_inline = act <= sizeof(uint32_t);
    atomic_init(&p->owner_slice, UINT32_MAX);
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
    p->blocks = hive__calloc(p->nblocks, sizeof(block_t));
    p->sent = hive__calloc(p->n, sizeof *p->sent);
    if (p->blocks == NULL || p->sent == NULL) {
        destroy(p);
        return hive__fail(HIVE_ENOMEM, "hive_envpool_new: cannot allocate the tables for %zu "
                          "environments", opts->num_envs);
    }
    rc = make_envs(p, opts);
    if (rc == HIVE_OK)
        rc = make_slices(p, opts->env_worker);
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
    /* nothing may be on its way when the blocks and states go: take
     * every id still waiting in a ring (dropped, not stepped), then wait
     * for every slice job to end (a job that took ids steps and publishes
     * them first) */
    serve_all(p, 0, true, NULL);
    hive__worker_t *w = hive__self_in(&p->h->sched);
    /* seq_cst: free's half of the pair with slice_job (see the top).
     * Jobs still queued will see dead and only drop the shell. */
    atomic_store_explicit(&p->shell->dead, 1, memory_order_seq_cst);
    /* seq_cst: the load of free's half of the pair; it also acquires each
     * job's release of running */
    while (atomic_load_explicit(&p->shell->running, memory_order_seq_cst) != 0) {
        if (w == NULL || !hive__sched_help(w, NULL, NULL))
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

/* *out = *b, by libc's memcpy: a batch is four array views, ~680 bytes,
 * and a struct copy that size is a rep movsq (its start-up alone is as
 * long as a CartPole step; recv and step return one per call). The size
 * is hidden from the compiler so that it calls the vector copy. */
static void give_batch(hive_envpool_batch_t *out, const hive_envpool_batch_t *b)
{
    size_t size = sizeof *out;
    __asm__("" : "+r"(size));
    memcpy(out, b, size);
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
    int64_t want = (int64_t)p->act_item;
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
    unsigned me = self_slice(p);
    note_owner(p, me);
    /* the owner's cost estimate is refreshed every COST_EVERY batches (two
     * clock reads cost as much as a CartPole step) */
    bool timed = me != UINT32_MAX && (p->step_ns == 0 || p->nsync++ % COST_EVERY == 0);
    uint64_t t0;
    if (all_inline(p, me, p->n)) {
        t0 = timed ? hive__now_ns() : 0;
        /* too little work to hand out: step every env here, no atomics */
        step_rows(p, acts, kind, NULL, 0, p->n);
        if (timed)
            note_cost(p, hive__now_ns() - t0, p->n);
    } else {
        /* chunks of about SYNC_CHUNK_NS of work (one env until a cost is
         * measured): one claim per chunk, so cheap envs cost a worker one
         * atomic per batch, and dear ones are still shared out env by env
         * when a worker is late */
        uint32_t hint = atomic_load_explicit(&p->cost_hint, memory_order_relaxed);   /* a hint */
        double c = p->step_ns > 0 ? SYNC_CHUNK_NS / p->step_ns : hint ? SYNC_CHUNK_NS / hint : 1;
        uint32_t chunk = c < 1 ? 1 : c > (double)p->n ? (uint32_t)p->n : (uint32_t)c;
        /* relaxed: published by the go stores' release below */
        atomic_store_explicit(&p->sync_left, (uint32_t)p->n, memory_order_relaxed);
        for (unsigned i = 0; i < p->nslices; i++) {
            slice_t *s = &p->slices[i];
            if (s->nhome == 0)
                continue;
            /* plain: every claimer of the last batch has counted off
             * (sync_left reached 0, acquired), and a claimer of this one
             * reads them after go's acquire. relaxed load: the owner is
             * go's only writer */
            uint64_t end = atomic_load_explicit(&s->go, memory_order_relaxed);
            s->base = end;
            s->acts = acts;
            s->kind = kind;
            s->chunk = chunk;
            uint64_t chunks = (s->nhome + (uint64_t)chunk - 1) / chunk;
            /* release: the batch's parameters and the envs' last state to
             * claim_chunk's acquire; seq_cst: also the owner's half of the
             * pair in post_slices (stored before queued is read) */
            atomic_store_explicit(&s->go, end + chunks, memory_order_seq_cst);
        }
        post_slices(p, me, me == UINT32_MAX);
        if (me != UINT32_MAX) {          /* our own slice first, inline; then help */
            t0 = timed ? hive__now_ns() : 0;     /* the stepping alone, not the hand-off */
            size_t k = serve_sync(p, me, false, false);
            if (timed)
                note_cost(p, hive__now_ns() - t0, k);
        }
        /* the others' slices only after a grace (wait_until): their
         * workers started a hand-off later than we did */
        wait_until(p, sync_done, MAX_CLAIM, 0, me != UINT32_MAX);
    }
    if (atomic_load_explicit(&p->shut, memory_order_relaxed))
        return hive__fail(HIVE_ESHUTDOWN, "%s: the engine shut down while environments stepped", fn);
    count_steps(p, p->n);
    give_batch(out, &p->sync);
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

/* Check a send's ids (in the pool, idle, named once) and mark them busy,
 * their kind a step; on a failure nothing stays marked. An env named by
 * this send carries its number in sent[], so a second naming is told from
 * a busy env without a pass to clear the marks afterwards (an earlier
 * send's number is smaller; 64 bits do not wrap). */
static int check_ids(hive_envpool_t *p, const int32_t *ids, size_t n)
{
    uint64_t now = ++p->sends;
    size_t i = 0;
    for (; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= p->n || p->sent[ids[i]] != 0)
            break;
        p->sent[ids[i]] = now;           /* tentatively */
        env_t *e = &p->env[ids[i]];
        if (e->kind != KIND_STEP)        /* idle: no stepper reads it now */
            e->kind = KIND_STEP;
    }
    if (i == n)
        return HIVE_OK;
    int rc;
    if (ids[i] < 0 || (size_t)ids[i] >= p->n)
        rc = hive__fail(HIVE_EINVAL, "hive_envpool_send: env_ids[%zu] = %d is not in the pool "
                        "(0..%zu)", i, ids[i], p->n - 1);
    else if (p->sent[ids[i]] == now)
        rc = hive__fail(HIVE_EINVAL, "hive_envpool_send: environment %d is named twice "
                        "(env_ids[%zu])", ids[i], i);
    else
        rc = hive__fail(HIVE_ESTATE, "hive_envpool_send: environment %d (env_ids[%zu]) is "
                        "busy: sent and not yet received", ids[i], i);
    for (size_t j = 0; j < i; j++)       /* undo: nothing is sent */
        p->sent[ids[j]] = 0;
    return rc;
}

/* Start the envs ids[0..n) (ids NULL: 0..n-1; marked busy, their kind
 * written; acts: the send's actions, row k for ids[k], NULL for a reset).
 * A worker caller steps them at once when they and the results still on
 * their way are cheaper than a hand-off (all_inline): the recv after finds
 * them done, and nothing went through
 * a ring. Otherwise each goes into its home ring with its action copied
 * to the env, and the slices' jobs are posted - the calling worker's own
 * too: it serves it when it waits (recv) or runs jobs. */
static void send_ids(hive_envpool_t *p, const int32_t *ids, size_t n, const unsigned char *acts)
{
    unsigned me = self_slice(p);
    note_owner(p, me);
    /* the pool's whole outstanding work, not this send's alone: at 1 us a
     * step, batches of 2 of 4 envs would otherwise sit at the threshold
     * and be stepped by the caller alone (half the machine) */
    if (all_inline(p, me, p->inflight + n)) {
        /* the cost is re-measured every COST_EVERY calls (two clock
         * reads cost as much as a CartPole step) */
        bool timed = p->nsync++ % COST_EVERY == 0;
        uint64_t t0 = timed ? hive__now_ns() : 0;
        step_now(p, ids, n, acts);
        if (timed)
            note_cost(p, hive__now_ns() - t0, n);
    } else {
        for (size_t i = 0; i < n; i++) {
            push(p, ids ? ids[i] : (int32_t)i, acts != NULL ? acts + i * p->act_bytes : NULL);
        }
        publish_tails(p);
        post_slices(p, UINT32_MAX, me == UINT32_MAX);
    }
    p->inflight += n;
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
    send_ids(p, env_ids, n, n ? actions->data : NULL);
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
    p->sends++;
    for (size_t i = 0; i < p->n; i++) {
        p->sent[i] = p->sends;
        p->env[i].kind = KIND_RESET;
    }
    send_ids(p, NULL, p->n, NULL);
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
    /* a block that is done (stepped at send) needs no clock, no look at
     * the rings and no wait: the common case of cheap envs */
    if (!block_ready(p)) {
        uint64_t deadline = timeout_ns < 0 ? 0 : hive__now_ns() + (uint64_t)timeout_ns;
        if (timeout_ns == 0)
            deadline = 1;                /* already passed: poll */
        /* ids a worker caller left unposted (all_inline) are not stepped by
         * anyone else: a caller that is not a worker posts them now */
        if (self_slice(p) == UINT32_MAX) {
            bool pending = false;
            for (unsigned i = 0; i < p->nslices && !pending; i++)
                pending = ring_nonempty(&p->slices[i]);
            if (pending)
                post_slices(p, UINT32_MAX, true);
        }
        /* claims of what the block still lacks at most: re-check between */
        size_t lack = p->bsize - p->ready;
        if (lack > MAX_CLAIM)
            lack = MAX_CLAIM;
        if (wait_until(p, block_ready, lack ? (unsigned)lack : 1, deadline, false) != HIVE_OK)
            return leave(p, hive__fail(HIVE_ETIMEDOUT, "hive_envpool_recv: no batch of %zu within "
                                       "%lld ns", p->bsize, (long long)timeout_ns));
    }
    block_t *bl = &p->blocks[p->recv_blk];
    p->ready -= p->bsize;
    p->recv_blk = p->recv_blk + 1 == p->nblocks ? 0 : p->recv_blk + 1;
    p->inflight -= p->bsize;
    const int32_t *ids = bl->b.env_id.data;
    for (size_t i = 0; i < p->bsize; i++)
        p->sent[ids[i]] = 0;
    if (atomic_load_explicit(&p->shut, memory_order_relaxed))
        return leave(p, hive__fail(HIVE_ESHUTDOWN, "hive_envpool_recv: the engine shut down while "
                                   "environments stepped"));
    count_steps(p, p->bsize);
    give_batch(out, &bl->b);
    return leave(p, HIVE_OK);
}
