/*
 * sched.h - workers and where their work comes from.
 *
 * Each worker is a thread pinned to its slot. It finds work, in order:
 *   1. its inbox: an MPSC queue of jobs posted to this very worker;
 *   2. per priority, HIGH before NORMAL before LOW:
 *      a. its own Chase-Lev deque (tasks it spawned: LIFO),
 *      b. its NUMA node's shared ring (tasks submitted from outside, or for
 *         this node: FIFO, any worker of the node may take them),
 *      c. the deques of the other workers of its node (steal: FIFO),
 *      d. the rings, then the deques, of the other nodes.
 * Idle, it spins briefly, then parks on a futex. One idle spinner per node
 * also holds the node's hand-off slot while it spins: a job for the node's
 * ring is stored in that slot instead, and only that worker looks at it. In an engine attached to
 * a world of processes (remote.h), one idle worker at a time also polls the
 * layer for other processes' messages while it spins.
 *
 * A job is an intrusive node plus a function. Jobs still queued when the
 * engine stops are handed back to their function with w == NULL, so their
 * owner can fail or free them (tasks fail their results with HIVE_ESHUTDOWN).
 *
 * Wake rule: after making work visible, a producer reads one counter (the
 * number of parked workers); only if it is nonzero does it look for a parked
 * worker to wake. A busy engine costs no system call. See sched.c.
 */
#ifndef HIVE_SCHED_H
#define HIVE_SCHED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ds/deque.h"
#include "ds/mpsc.h"
#include "ds/ring.h"
#include "topo.h"

struct hive;
struct hive__worker;
struct hive__tring;

#define HIVE_NPRIO      3               /* lanes: 0 HIGH, 1 NORMAL, 2 LOW */
#define HIVE_RING_SLOTS 16384           /* per node and priority; beyond: worker inboxes */

static inline unsigned hive__prio_lane(int priority)
{
    return priority > 0 ? 0u : priority < 0 ? 2u : 1u;
}

typedef struct hive__job hive__job_t;
typedef void (*hive__job_fn)(hive__job_t *job, struct hive__worker *w);
struct hive__job {
    hive__mpsc_node_t node;
    hive__job_fn      fn;
};

struct hive__obj;

typedef struct hive__worker {
    hive__mpsc_t inbox;                       /* padded: producers' and consumer's lines apart */
    HIVE_ALIGNED _Atomic uint32_t parked;     /* futex word: 1 while parked or about to park */
    /* below: the worker's own, read by others only for stealing and stats */
    HIVE_ALIGNED struct hive__sched *sched;
    unsigned            index;
    const hive__slot_t *slot;
    bool                bound;
    pthread_t           thread;
    hive__deque_t      *deque[HIVE_NPRIO];
    unsigned            depth;                /* nesting of jobs run while waiting in a job */
    unsigned            maint;                /* jobs since the last hive__store_maintain */
    uint64_t            task_seq;             /* tasks started on this worker (local.c resets) */
    uint64_t            rng;                  /* victim choice */
    hive__job_t        *handed;               /* a job taken from its node's hand-off slot,
                                                 run next (sched.c) */
    hive__job_t         rec_job;              /* ... the job for a record handed bare */
    void               *rec;                  /* ... that record */
    bool                held;                 /* it holds that slot (sched.c) */
    bool                reserved;             /* it runs a job taken from the slot, which
                                                 stays reserved for it (sched.c) */
    const void         *lone;                 /* the deque whose lone job it waits to steal */
    int64_t             lone_top;             /* ... that job's index (its top then) */
    uint64_t            lone_since;           /* ... when it first saw it there */
    void               *locals;               /* worker-local values (local.c) */
    _Atomic uint64_t    parks;                /* times it set parked (about to sleep) */
    _Atomic uint64_t    jobs;                 /* jobs it ran */
    _Atomic uint64_t    steals;               /* jobs it took from another worker's deque */
    _Atomic uint64_t    remote_steals;        /* ... of a worker on another node */
    _Atomic uint64_t    spares;               /* spare threads it handed itself to (deep waits) */
    _Atomic uint64_t    handoffs;             /* jobs it took from its node's hand-off slot */
    /* statistics (stats.c): written by the worker alone (a relaxed load and
     * store, no read-modify-write) except stolen_*, which thieves add to */
    _Atomic uint64_t    tasks;                /* tasks it ran (retries count once) */
    _Atomic uint64_t    methods;              /* actor methods it ran */
    _Atomic uint64_t    woken;                /* times it slept and was woken */
    _Atomic uint64_t    idle_ns;              /* time spent looking for work and parked */
    _Atomic uint64_t    idle_since;           /* when the idle spell now under way began, or 0 */
    _Atomic uint32_t    help_max;             /* deepest helping nesting seen */
    uint64_t            start_ns;             /* when it started (set before its thread) */
    struct hive__tring *tring;                /* its timeline ring, NULL when not tracing */
    _Atomic(struct hive__obj *) retired;      /* records waiting to be freed (store.c) */
    struct hive__obj   *local;                /* free private records, its own (store.c) */
    unsigned            nlocal;               /* how many */
    _Atomic int64_t     pobjects;             /* private records it made less those it freed:
                                                 a share of the live-object count (store.c) */
    _Atomic unsigned    nretired;             /* pushed since its last flush (a hint) */
    _Atomic uint32_t    pbusy;                /* it is in a plain section on one of its
                                                 private records (store.c, own_enter) */
    HIVE_ALIGNED _Atomic uint64_t stolen_same;  /* jobs thieves of its node took from it */
    _Atomic uint64_t    stolen_other;         /* ... thieves of other nodes */
} hive__worker_t;

/* Add one to a counter only its worker writes (no locked instruction). */
static inline void hive__count(_Atomic uint64_t *c, uint64_t n)
{
    /* relaxed: a statistic with one writer; readers want a recent value only */
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

typedef struct hive__nodeq {
    hive__ring_t    ring[HIVE_NPRIO];
    unsigned        nworkers;
    unsigned       *workers;                  /* indices of this node's workers */
    HIVE_ALIGNED _Atomic unsigned rr;         /* round-robin cursor for overflow posts */
    /* The node's hand-off slot (sched.c): 0, or an idle spinning worker's
     * mark (it takes a job stored here in place of the mark), or such a
     * job, or a worker's reservation while it runs the job it took from
     * here. Its own line: the spinner reads it at every look. */
    HIVE_ALIGNED _Atomic uintptr_t handoff;
} hive__nodeq_t;

typedef struct hive__sched {
    struct hive      *h;
    unsigned          n;
    unsigned          nthreads;               /* threads actually started (joined at stop) */
    hive__worker_t   *w;
    unsigned          nnodes;
    hive__nodeq_t    *nodes;
    bool              pin;
    bool              asym;                   /* the wake handshake's fence is the parker's
                                                 membarrier (sched.c); else the spawner's */
    /* Lanes that ever held a spawned job (bit per lane, set once, never
     * cleared): find_job skips the others, so the empty HIGH lane of a
     * program that never uses priorities costs no look at every deque. */
    HIVE_ALIGNED _Atomic unsigned lanes_used;
    HIVE_ALIGNED _Atomic unsigned nparked;    /* workers parked now: one load tells if any sleeps */
    HIVE_ALIGNED _Atomic int stopping;        /* read before every job: its own line */
    HIVE_ALIGNED _Atomic uint64_t wakes;      /* futex wakes issued (slow path only) */
    /* start-up handshake */
    _Atomic uint32_t  started;
    _Atomic int       start_rc;
    char              start_msg[256];
} hive__sched_t;

/* Stack a nesting worker keeps free for the job at the top (8 MiB). Tests
 * raise it to make spare threads come early; read at thread start. */
extern size_t hive__stack_reserve;
/* How long an idle worker spins before it parks (20 us). Tests of the
 * scale-out layer raise it, so that an idle worker is certain to be the
 * one polling (remote.h); read at every idle spell (relaxed). */
extern _Atomic uint64_t hive__idle_spin_ns;

/* The worker the calling thread is, or NULL on a user thread. */
extern __thread hive__worker_t *hive__self;

/* Tests set it before hive_init to run the spawn handshake without
 * membarrier (sched.c): seq_cst pushes, as on a kernel without it. */
extern _Atomic bool hive__sched_fenced_push;

/* The calling thread's worker if it belongs to s, else NULL. */
static inline hive__worker_t *hive__self_in(const hive__sched_t *s)
{
    hive__worker_t *w = hive__self;
    return w != NULL && w->sched == s ? w : NULL;
}

/* A full barrier run on every thread of the process now running (the
 * slow half of an asymmetric handshake, as the parker's in sched.c): true
 * if it ran; false if s->asym is off (the kernel offers no private
 * expedited membarrier, or a test turned it off) or the call failed -
 * then the handshake's fast side must not be plain (store.c's reserves). */
bool hive__sched_membarrier(const hive__sched_t *s);

/* Start n workers on the slots of topo; bind them unless pin is false.
 * On failure every started worker is stopped again and the sentence of the
 * first failure is this thread's last error. */
int  hive__sched_start(hive__sched_t *s, struct hive *h, const hive__topo_t *topo,
                       unsigned n, bool pin);
/* Raise the stop flag and wake every parked worker; no job starts after
 * the worker sees it. Idempotent; hive__sched_stop does it too. */
void hive__sched_begin_stop(hive__sched_t *s);
/* Stop: running jobs finish, queued ones are dropped (fn(job, NULL)), all
 * threads are joined and the tables are freed. Not from a worker. */
void hive__sched_stop(hive__sched_t *s);

/* Post a job to worker index; wakes it only if it is parked. */
void hive__sched_post(hive__sched_t *s, unsigned index, hive__job_t *job);

/* Make a job runnable at priority lane `lane`, preferably on NUMA node
 * `node` (< 0: the caller's). From a worker of s on that node it goes on the
 * worker's own deque; otherwise on the node's ring. */
void hive__sched_spawn(hive__sched_t *s, hive__job_t *job, unsigned lane, int node);

/* Wake one parked worker, preferring node; nothing if none is parked. */
void hive__sched_wake_one(hive__sched_t *s, unsigned node);

/* The spawner's half of the wake handshake after a push on its own deque
 * (sched.c, see the top): with asym, the release push and a signal fence,
 * then nparked (acquire: a parker seen there is seen parked in
 * hive__sched_wake_one); the parker's membarrier orders the pair. Else the
 * seq_cst push is before this seq_cst load in the total order. */
static inline void hive__sched_pushed_own(hive__sched_t *s, unsigned node)
{
    atomic_signal_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&s->nparked, s->asym ? memory_order_acquire : memory_order_seq_cst) != 0)
        hive__sched_wake_one(s, node);
}

/* hive__sched_spawn from w itself, for w's own node: push job on w's own
 * deque (lane) and wake a parked worker if there is one; false if the
 * deque is full (then hive__sched_spawn puts it on the node's ring). A
 * worker's spawn without the look at who is calling and where; inline,
 * as it is every fork-join child's (task.c). */
static inline bool hive__sched_push_own(hive__worker_t *w, hive__job_t *job, unsigned lane)
{
    hive__sched_t *s = w->sched;
    /* relaxed: as hive__sched_spawn's (sched.c, find_job) */
    if (__builtin_expect(!(atomic_load_explicit(&s->lanes_used, memory_order_relaxed) & (1u << lane)), 0))
        atomic_fetch_or_explicit(&s->lanes_used, 1u << lane, memory_order_relaxed);
    if (__builtin_expect(!(s->asym ? hive__deque_push(w->deque[lane], job)
                                   : hive__deque_push_fenced(w->deque[lane], job)), 0))
        return false;
    hive__sched_pushed_own(s, w->slot->node);
    return true;
}

/* From a user thread: store job in the hand-off slot of node (< 0: node
 * 0, as hive__sched_spawn from a user thread) if one of the node's workers
 * spins idle holding it; false if none does (then hive__sched_spawn). A
 * handed job runs on that worker - next, or after the one job it found
 * elsewhere in the same look - or is dropped at a stop (fn(job, NULL)),
 * exactly once; no other worker can take it. One CAS. */
bool hive__sched_hand(hive__sched_t *s, hive__job_t *job, int node);
/* hive__sched_hand for a task result record alone (64-byte aligned): the
 * slot's word carries the record, so the worker reads nothing else before
 * it runs hive__task_run_handed(h, rec, w) (w NULL: dropped at a stop). */
bool hive__sched_hand_rec(hive__sched_t *s, void *rec, int node);
void hive__task_run_handed(struct hive *h, void *rec, struct hive__worker *w);

/* w's job is about to end (a task about to seal its result, at the top
 * of w's stack): if w has nothing queued of its own, it takes its node's
 * hand-off slot now rather than once it has looked everywhere, so that the
 * next job a client submits as soon as it sees the result is handed to w.
 * A job handed meanwhile runs before anything else w finds. */
void hive__sched_about_idle(hive__worker_t *w);

/* Run one job that w can find (its queues, its node, then steal), nested
 * inside the job w is running; false if there was none. For waits inside a
 * job: the worker keeps the engine moving instead of blocking its core.
 * done(arg) tells when the wait is over: past a stack's depth the worker
 * runs on a spare thread until then (sched.c, "deep nesting"). */
bool hive__sched_help(hive__worker_t *w, bool (*done)(void *arg), void *arg);
/* hive__sched_help's fork-join case, for a wait inside a job: run the
 * newest job of w's own deque (LIFO: the child just spawned, most often
 * the one waited for), if the plain case holds - nothing handed to w,
 * its inbox empty, only the NORMAL lane ever used, stack to spare; false
 * otherwise or if the deque is empty (then hive__sched_help). The job
 * find_job would have taken, without its search. */
bool hive__sched_help_own(hive__worker_t *w);

#endif
