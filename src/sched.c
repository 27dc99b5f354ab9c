/*
 * sched.c - worker threads, where they find work, stealing, and parking.
 *
 * Targeted posts (one worker's inbox) use a store-load "Dekker" pair:
 *
 *   poster:  push job (seq_cst xchg on inbox head)   worker: parked = 1 (seq_cst store)
 *            read parked (seq_cst load)                      read inbox head (seq_cst load)
 *            if 1: xchg parked 0, futex_wake                 if empty: futex_wait(parked, 1)
 *
 * In the single total order of seq_cst operations, either the poster's read
 * of parked comes after the worker's store of 1 - then the poster sees 1 and
 * wakes it - or the worker's read of head comes after the push - then the
 * worker sees the job and does not sleep. A lost wake-up would need both
 * reads to miss, which the total order forbids. The futex itself re-checks
 * parked == 1 in the kernel, so a wake between the worker's check and its
 * sleep is not lost either. Exactly one side clears parked (the exchange),
 * so each park costs at most one futex wake, and a busy worker none.
 *
 * Spawned work (deques and node rings, which any worker may take) uses the
 * same pattern one level up: the spawner makes the job visible with a
 * seq_cst store (deque bottom) or RMW (ring claim) and then reads nparked
 * (seq_cst); a parking worker bumps nparked (seq_cst RMW) and then reads
 * every deque's and ring's indices (seq_cst). Either the spawner sees the
 * parked worker (and wakes one parked worker, preferring the job's node), or
 * the worker sees the job. A busy engine never pays a system call.
 *
 * A push on the spawner's own deque (every fork-join child) is the hot case,
 * and its half of that pair needs a store-load fence (an xchg on x86) only
 * for the sake of the rare parker. So the fence moves to the parker
 * (asymmetric Dekker, as liburcu's memb flavour does for its readers): the
 * spawner pushes with a release store, keeps the compiler from moving its
 * load of nparked above it (a signal fence), and the parker, after its RMW
 * on nparked and before it reads the deques, calls
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which runs a full barrier
 * on every CPU running a thread of this process (a thread that is not
 * running passed one at its context switch). Take the point where that
 * barrier hit the spawner: if its push came before it, the push is visible
 * to the parker's reads after the call, which then finds the job; if
 * after, the spawner's load of nparked is after it too (program order) and
 * sees the parker's increment, made before the call, and the spawner wakes
 * a parked worker. A parker's membarrier is one system call beside the
 * futex wait it is about to make. Where the kernel offers no such command
 * (s->asym false), the push is seq_cst as before.
 *
 * Hand-off (a job for a node's ring while one of its workers spins idle):
 * the spinner marks the node's hand-off slot as its own (a CAS from 0, a
 * mark only it removes) and reads that one word at every look; a spawner
 * that finds the mark replaces it with the job (CAS) and is done - no
 * ring, no wake: the slot's owner is committed to look until it removes
 * its mark, and it removes it with a CAS that fails when a job is there,
 * which it then takes. So a job handed off is never lost or run twice, and
 * the spawn that hands it needs no handshake with nparked. Why: a job put
 * on the ring crosses cores as three lines (the put index, the slot, the
 * take index that other idle workers read too); a hand-off is one line
 * that only the spawner and one spinner touch (a synchronous task from a
 * user thread, issue 10). The other idle workers never see the slot, so
 * they find no work and park, instead of spinning beside the submitter on
 * a small machine.
 */
#include "sched.h"
#include "hive_impl.h"
#include "util/clock.h"
#include "util/common.h"
#include "util/error.h"
#include "util/park.h"
#include "local.h"
#include "trace.h"
#include "util/fault.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread hive__worker_t *hive__self;

_Atomic bool hive__sched_fenced_push;

/* Register this process for private expedited membarriers (once; true if
 * the kernel offers them). See the top: the parking half of the spawn
 * handshake then calls it. */
static bool membarrier_register(void)
{
    static _Atomic int state;            /* 0 not asked, 1 offered, 2 not offered */
    /* relaxed: the registration is idempotent; two first callers both ask */
    int st = atomic_load_explicit(&state, memory_order_relaxed);
    if (st == 0) {
        long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        bool ok = cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                  syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
        st = ok ? 1 : 2;
        atomic_store_explicit(&state, st, memory_order_relaxed);
    }
    return st == 1;
}

bool hive__sched_membarrier(const hive__sched_t *s)
{
    return s->asym && syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* Idle: spin this long looking for work before parking. Long enough to
 * bridge the gap between back-to-back posts of a busy producer (a few
 * microseconds), short enough that an idle engine costs nothing. */
#define IDLE_SPIN_NS   20000u
#define IDLE_YIELDS    4
#define MAINT_EVERY    256            /* jobs between looks at the object table's shape */
/* The idle spin looks at the other workers' deques every this many looks
 * (about a microsecond), at its inbox and the rings every time. A spinning
 * thief that reads a busy worker's deque indices all the time makes every
 * push and take of that worker - a seq_cst store - wait for the line to
 * come back (actor ping-pong on one worker pays two line transfers a round
 * trip for it); spawned work is stolen a microsecond later at most, and a
 * lone job is left to its owner for longer anyway (LONE_GRACE_NS). */
#define IDLE_DEQUE_EVERY 16

/* Conservative: true if any queue w could take from might hold a job.
 * deques false: only its inbox and the rings (the idle spin's frequent
 * look, see IDLE_DEQUE_EVERY); the parking checks look at everything. */
static bool has_work_in(hive__worker_t *w, bool deques)
{
    hive__sched_t *s = w->sched;
    if (!hive__mpsc_empty(&w->inbox) || atomic_load_explicit(&s->stopping, memory_order_seq_cst))
        return true;
    for (unsigned lane = 0; lane < HIVE_NPRIO; lane++) {
        for (unsigned n = 0; n < s->nnodes; n++)
            if (hive__ring_nonempty(&s->nodes[n].ring[lane]))
                return true;
        for (unsigned i = 0; deques && i < s->n; i++)
            if (hive__deque_nonempty(s->w[i].deque[lane]))
                return true;
    }
    return false;
}

static bool has_work(hive__worker_t *w)
{
    return has_work_in(w, true);
}

/* A lone job in another worker's deque is left to its owner for a moment.
 * The owner pushed it an instant ago and is usually about to take it back
 * itself: an actor method that calls another actor and waits for the
 * answer (actor ping-pong) pushes the callee's turn on its own deque and
 * helps at once, taking it within a few hundred nanoseconds. An idle thief
 * that steals it instead turns a call on one core into a hand-off between
 * two: the job, the mailbox, the actor and the result all cross (1.1 us a
 * round trip on an idle machine against 0.4 us on one worker). A deque
 * with two jobs or more is stolen from at once (fork-join, spawn loops:
 * the owner cannot run them all now), and a lone job that stays where it
 * is for LONE_GRACE_NS (the same deque, the same top index: the owner has
 * not taken it, which would have moved top) is stolen then, so a busy or
 * blocked owner delays its lone job by that much at most. */
#define LONE_GRACE_NS 2000u

/* May w steal from d, whose top and bottom it just read? The thief times
 * one lone job at a time (w->lone: its deque and top); another victim's
 * lone job waits until that one is decided. The record is dropped when its
 * deque is seen without a lone job (taken, or more pushed): every failed
 * look for work visits every deque, so no record outlives its job for
 * long, and a lone job that stays is stolen at most LONE_GRACE_NS after
 * the record that came before it was dropped. */
static bool may_steal(hive__worker_t *w, const hive__deque_t *d, int64_t t, int64_t b)
{
    if (b - t != 1) {
        if (w->lone == d)
            w->lone = NULL;              /* its lone job is gone, or has company */
        return b > t;
    }
    if (w->lone != NULL && w->lone != d)
        return false;                    /* timing another one */
    uint64_t now = hive__now_ns();
    if (w->lone == NULL || w->lone_top != t) {
        w->lone = d;                     /* first sight of this job: wait */
        w->lone_top = t;
        w->lone_since = now;
        return false;
    }
    return now - w->lone_since >= LONE_GRACE_NS;
}

/* The hand-off slot's words: 0 (free), worker index's mark (odd: it
 * spins and takes a job stored in its place), or a job (a pointer: even).
 * A job stays in the slot after its worker took it, as that worker's
 * reservation while it runs the job (w->reserved): no other spinner marks
 * a slot that is not 0, and no spawner stores a job in place of anything
 * but a mark. The worker marks the slot again once the job has ended
 * (handoff_unreserve), or frees it if it turns to other work. So the
 * take writes nothing - the only write on the slot's line between a
 * spawner's store and the sealed result is none - and a stream of
 * synchronous submits stays on one worker: without the reservation the
 * node's other idle worker marks the freed slot while the first runs, the
 * submits alternate between the two, and both spin beside the client
 * (issue 10). */
#define HANDOFF_MARK(index) (((uintptr_t)(index) << 1) | 1u)
/* A record handed bare (hive__sched_hand_rec): its address | 2; a job
 * pointer has both low bits clear. */
#define HANDOFF_REC 2u
_Static_assert(_Alignof(hive__job_t) >= 4, "a job pointer's two low bits are clear");

/* The job a taken slot value stands for: the job itself, or for a record
 * handed bare w's rec_job, which runs it (rec_run). */
static void rec_run(hive__job_t *job, hive__worker_t *w)
{
    hive__worker_t *owner = HIVE_CONTAINER_OF(job, hive__worker_t, rec_job);
    void *rec = owner->rec;              /* before anything can reuse it */
    hive__task_run_handed(owner->sched->h, rec, w);
}

static inline hive__job_t *taken_job(hive__worker_t *w, uintptr_t v)
{
    if ((v & 3) != HANDOFF_REC)
        return (hive__job_t *)v;
    w->rec = (void *)(v & ~(uintptr_t)3);
    w->rec_job.fn = rec_run;
    return &w->rec_job;
}

static inline _Atomic uintptr_t *handoff_slot(hive__worker_t *w)
{
    return &w->sched->nodes[w->slot->node].handoff;
}

/* Mark the node's hand-off slot as w's if nobody holds it; true if w holds
 * it now. Not while w still has a handed job to run: holding implies
 * w->handed is empty, so a take never overwrites one (it would be lost).
 * relaxed: the mark publishes nothing (the job a spawner stores in its
 * place is published by that CAS's release); the load first keeps a slot
 * held by another spinner shared, not written. */
static bool handoff_open(hive__worker_t *w)
{
    if (w->handed != NULL)
        return false;
    _Atomic uintptr_t *slot = handoff_slot(w);
    uintptr_t v = atomic_load_explicit(slot, memory_order_relaxed);
    w->held = v == 0 && atomic_compare_exchange_strong_explicit(slot, &v, HANDOFF_MARK(w->index),
                                                                memory_order_relaxed,
                                                                memory_order_relaxed);
    return w->held;
}

/* w holds the slot: take a job stored there into w->handed, giving the
 * slot up; true if there was one. Only w removes its mark, and a spawner
 * only replaces the mark: the slot holds w's mark or a job for w.
 * acquire: pairs with the spawner's release CAS (the job's body). The
 * store of 0 publishes nothing (relaxed): any worker may mark it again. */
static bool handoff_take(hive__worker_t *w)
{
    _Atomic uintptr_t *slot = handoff_slot(w);
    uintptr_t v = atomic_load_explicit(slot, memory_order_acquire);
    if (likely(v == HANDOFF_MARK(w->index)))
        return false;
    /* the job stays there as w's reservation (see HANDOFF_MARK): no write
     * now, but the line is fetched for the mark w stores there before its
     * job's seal (hive__sched_about_idle), while the job's own lines come */
    hive__prefetchw(slot);
    w->handed = taken_job(w, v);
    w->held = false;
    w->reserved = true;
    return true;
}

/* w's job taken from the slot has ended (or w turns to something else):
 * mark the slot as w's again if remark (w is about to look for work at
 * its top level, with no handed job), else free it. relaxed, both: the
 * slot is w's (reserved) until this store, and the mark publishes nothing
 * (handoff_open). */
static void handoff_unreserve(hive__worker_t *w, bool remark)
{
    w->reserved = false;
    remark = remark && w->handed == NULL;
    atomic_store_explicit(handoff_slot(w), remark ? HANDOFF_MARK(w->index) : 0, memory_order_relaxed);
    w->held = remark;
}

/* w holds the slot: give it up. The CAS fails only if a job was stored
 * there: then w takes it into w->handed (acquire on failure: the job's
 * body, as in handoff_take; C11 wants the success order at least as
 * strong, and a locked cmpxchg costs the same either way). */
static void handoff_close(hive__worker_t *w)
{
    _Atomic uintptr_t *slot = handoff_slot(w);
    uintptr_t v = HANDOFF_MARK(w->index);
    if (!atomic_compare_exchange_strong_explicit(slot, &v, 0, memory_order_acquire,
                                                 memory_order_acquire)) {
        atomic_store_explicit(slot, 0, memory_order_relaxed);
        w->handed = taken_job(w, v);
    }
    w->held = false;
}

void hive__sched_about_idle(hive__worker_t *w)
{
    if (w->held || w->depth != 0)
        return;
    if (w->reserved) {                   /* its job came from the slot: mark it again, */
        handoff_unreserve(w, true);      /* with no look around (a stream of submits) */
        return;
    }
    /* Work it will find next (its inbox, its deques, its node's rings):
     * taking the slot now would only give it up again at once, two writes
     * of the slot's line per job in a stream of submits. A hint: a stale
     * view at worst takes the slot and gives it up at its next job, or
     * leaves it to its next idle spell. relaxed loads (the lanes: see
     * find_queued). */
    hive__sched_t *s = w->sched;
    if (!hive__mpsc_empty(&w->inbox))
        return;
    unsigned used = atomic_load_explicit(&s->lanes_used, memory_order_relaxed);
    hive__nodeq_t *nq = &s->nodes[w->slot->node];
    for (unsigned lane = 0; lane < HIVE_NPRIO; lane++)
        if ((used & (1u << lane)) &&
            (hive__deque_nonempty(w->deque[lane]) || hive__ring_nonempty(&nq->ring[lane])))
            return;
    handoff_open(w);
}

/* *deferred is set if a lone job of this node was left to its owner: the
 * caller then looks no further away (nearest work first: the job stays a
 * candidate, and farther nodes wait for it as they would for any job here). */
static hive__job_t *steal_on_node(hive__worker_t *w, unsigned node, unsigned lane, bool *deferred)
{
    hive__sched_t *s = w->sched;
    hive__nodeq_t *nq = &s->nodes[node];
    if (nq->nworkers == 0)
        return NULL;
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    unsigned start = (unsigned)(w->rng % nq->nworkers);
    for (unsigned k = 0; k < nq->nworkers; k++) {
        hive__worker_t *v = &s->w[nq->workers[(start + k) % nq->nworkers]];
        if (v == w)
            continue;
        hive__deque_t *d = v->deque[lane];
        /* relaxed: a hint for may_steal; the steal reads both again
         * (seq_cst) and claims the job with its CAS */
        int64_t t = atomic_load_explicit(&d->top, memory_order_relaxed);
        int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
        if (!may_steal(w, d, t, b)) {
            *deferred |= b > t;
            continue;
        }
        void *x = hive__deque_steal(d);
        if (x != NULL) {
            /* relaxed: statistics */
            atomic_fetch_add_explicit(&w->steals, 1, memory_order_relaxed);
            if (node != w->slot->node)
                atomic_fetch_add_explicit(&w->remote_steals, 1, memory_order_relaxed);
            /* relaxed: a statistic; several thieves may add at once */
            atomic_fetch_add_explicit(node == w->slot->node ? &v->stolen_same : &v->stolen_other, 1,
                                      memory_order_relaxed);
            if (unlikely(w->tring != NULL))
                hive__trace_put(w->tring, false, HIVE__TEV_STEAL, hive__trace_clock(), 0, 0, NULL, NULL,
                                v->index);
            return x;
        }
    }
    return NULL;
}

/* The next job for w: one handed to it, its inbox, then per lane own deque, own node's ring and
 * deques, then the other nodes' rings and deques (nearest work first). */
static hive__job_t *find_queued(hive__worker_t *w);

static hive__job_t *find_job(hive__worker_t *w)
{
    if (w->held)                         /* (then w->handed is empty: handoff_open) */
        handoff_take(w);
    if (unlikely(w->handed != NULL)) {   /* taken from the hand-off slot */
        hive__job_t *job = w->handed;
        w->handed = NULL;
        hive__count(&w->handoffs, 1);
        return job;
    }
    hive__job_t *job = find_queued(w);
    if (job != NULL && w->held)
        handoff_close(w);                /* it goes to work: a job stored meanwhile runs next */
    return job;
}

/* find_job's search of w's queues. */
static hive__job_t *find_queued(hive__worker_t *w)
{
    hive__sched_t *s = w->sched;
    hive__mpsc_node_t *n = hive__mpsc_pop(&w->inbox);
    if (n != NULL)
        return HIVE_CONTAINER_OF(n, hive__job_t, node);
    unsigned home = w->slot->node;
    /* relaxed: the bit is set before the job is pushed (program order) and
     * the push is a release; a worker that saw the job (has_work's acquire
     * loads) sees the bit, and one that has not yet misses only a job it
     * would not have found anyway */
    unsigned used = atomic_load_explicit(&s->lanes_used, memory_order_relaxed);
    for (unsigned lane = 0; lane < HIVE_NPRIO; lane++) {
        if (!(used & (1u << lane)))
            continue;
        void *x = hive__deque_take(w->deque[lane]);
        if (x == NULL)
            x = hive__ring_take(&s->nodes[home].ring[lane]);
        bool deferred = false;           /* a lone job nearer by waits for its owner */
        if (x == NULL)
            x = steal_on_node(w, home, lane, &deferred);
        for (unsigned k = 1; x == NULL && !deferred && k < s->nnodes; k++) {
            unsigned node = (home + k) % s->nnodes;
            x = hive__ring_take(&s->nodes[node].ring[lane]);
            if (x == NULL)
                x = steal_on_node(w, node, lane, &deferred);
        }
        if (x != NULL)
            return x;
    }
    return NULL;
}

static inline void run_job(hive__worker_t *w, hive__job_t *job)
{
    /* relaxed: a statistic */
    hive__count(&w->jobs, 1);        /* one writer: the worker (or the spare standing in for it) */
    job->fn(job, w);
}

/* ------------------------------------------------------------ deep nesting
 *
 * A job that waits inside a job (hive_get in a task) helps: it runs other
 * jobs nested on its own stack, so fork-join never stalls and one worker is
 * enough. Recursive submit-and-get nests one job per level, so a worker's
 * stack bounds how deep a program may recurse. Two measures:
 *
 *  - Workers get large stacks (WORKER_STACK, virtual: only touched pages
 *    cost memory), and helping is bounded by the stack actually left, not
 *    by a count: nesting stops while hive__stack_reserve bytes (8 MiB, as
 *    much as a default thread has in all) remain for the job at the top.
 *  - When the stack is that deep and the wait is still not over, the worker
 *    hands itself to a spare thread: a fresh thread (fresh stack) that
 *    becomes the same worker - same deques, inbox, worker-local values at
 *    the next depth - and runs its jobs until the wait is over (or the
 *    engine stops). The waiting thread blocks in pthread_join meanwhile, so
 *    the two never run the worker's owner side at once; thread creation and
 *    join give the happens-before both ways. A spare can itself get deep
 *    and hand over to another one, so depth is limited by memory only.
 *
 * Why not a spare thread at every blocking wait (as some runtimes do)? A
 * thread per wait costs a system call and a stack on a path that nesting
 * serves for free: spares are only for waits deeper than a whole stack.
 * The one limit left: a waiter resumes only after the jobs nested above it
 * (on its stack or its spare's) have returned, as in every help-first
 * scheduler (TBB's included).
 */
#if defined(__SANITIZE_THREAD__)
/* TSan maps its own areas at fixed addresses; many 64 MiB stacks (spares
 * nest) crowd them out. Smaller stacks there: spares come sooner. */
#define WORKER_STACK  ((size_t)8 << 20)
size_t hive__stack_reserve = (size_t)2 << 20;
#else
#define WORKER_STACK  ((size_t)64 << 20)
size_t hive__stack_reserve = (size_t)8 << 20;
#endif

static __thread char *stack_floor;        /* below this, nest no further */

/* Note where the calling thread's stack ends, less the reserve. */
static void note_stack(void)
{
    pthread_attr_t attr;
    void *lo;
    size_t size;
    stack_floor = NULL;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return;
    if (pthread_attr_getstack(&attr, &lo, &size) == 0) {
        size_t keep = hive__stack_reserve;
        if (keep > size - ((size_t)256 << 10))
            keep = size - ((size_t)256 << 10);   /* nest in at least 256 KiB */
        stack_floor = (char *)lo + keep;
    }
    pthread_attr_destroy(&attr);
}

static bool stack_deep(void)
{
    return (char *)__builtin_frame_address(0) < stack_floor;
}

struct spare {
    hive__worker_t *w;
    bool          (*done)(void *arg);
    void           *arg;
};

static void *spare_main(void *arg)
{
    struct spare *sp = arg;
    hive__worker_t *w = sp->w;
    hive__self = w;
    note_stack();
    /* its jobs are nested inside the waiter's: a depth of their own */
    w->depth++;
    while (!sp->done(sp->arg) && !atomic_load_explicit(&w->sched->stopping, memory_order_acquire)) {
        if (!hive__sched_help(w, sp->done, sp->arg))
            hive__sleep_ns(20000);         /* nothing to run: look again soon */
    }
    w->depth--;
    hive__self = NULL;
    return NULL;
}

static int start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    int e = pthread_attr_init(&attr);
    if (e == 0 && (e = pthread_attr_setstacksize(&attr, WORKER_STACK)) == 0)
        e = hive__fault() ? EAGAIN : pthread_create(t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    if (e == EAGAIN || e == ENOMEM || e == EINVAL)
        e = hive__fault() ? EAGAIN : pthread_create(t, NULL, fn, arg);   /* no room for a large stack: the default one */
    return e;
}

/* Run the worker on a spare thread until done(arg); false if none could
 * be started (the waiter then naps and tries again). */
static bool hand_to_spare(hive__worker_t *w, bool (*done)(void *), void *arg)
{
    struct spare sp = { .w = w, .done = done, .arg = arg };
    pthread_t t;
    if (start_thread(&t, spare_main, &sp) != 0)
        return false;
    /* relaxed: a statistic */
    atomic_fetch_add_explicit(&w->spares, 1, memory_order_relaxed);
    pthread_join(t, NULL);
    return true;
}

/* Run job nested in the job w is in (a help). Once the engine stops, a
 * queued job never runs: it is dropped here (its owner fails it with
 * HIVE_ESHUTDOWN), which also ends a wait for it. */
static void help_run(hive__worker_t *w, hive__job_t *job)
{
    /* acquire: pairs with hive__sched_begin_stop's store */
    if (atomic_load_explicit(&w->sched->stopping, memory_order_acquire)) {
        job->fn(job, NULL);
        return;
    }
    w->depth++;
    /* relaxed: a statistic only this worker writes */
    if (w->depth > atomic_load_explicit(&w->help_max, memory_order_relaxed))
        atomic_store_explicit(&w->help_max, w->depth, memory_order_relaxed);
    run_job(w, job);
    w->depth--;
}

bool hive__sched_help(hive__worker_t *w, bool (*done)(void *), void *arg)
{
    /* a job from the slot waits: the slot is free for another spinner
     * (nested jobs never hold it) */
    if (unlikely(w->reserved))
        handoff_unreserve(w, false);
    if (unlikely(stack_deep()))
        return done != NULL && !done(arg) && hand_to_spare(w, done, arg);
    hive__job_t *job = find_job(w);
    if (job == NULL)
        return false;
    help_run(w, job);
    return true;
}

bool hive__sched_help_own(hive__worker_t *w)
{
    hive__sched_t *s = w->sched;
    unsigned lane = hive__prio_lane(0);
    /* Only the plain case, where find_job would come to w's own NORMAL
     * deque first anyway: nothing handed or held, the inbox empty, no
     * other lane ever used (relaxed, as find_queued's), stack to spare. */
    if (w->held || w->handed != NULL ||
        atomic_load_explicit(&s->lanes_used, memory_order_relaxed) != 1u << lane ||
        !hive__mpsc_empty(&w->inbox) || stack_deep())
        return false;
    hive__job_t *job = hive__deque_take(w->deque[lane]);
    if (job == NULL)
        return false;
    /* as hive__sched_help: a job from the slot that waits frees it */
    if (unlikely(w->reserved))
        handoff_unreserve(w, false);
    help_run(w, job);
    return true;
}

/* The sleeping half of parking. starting: the worker's start-up job (see
 * start_parked): it counts itself in `started` once it is in nparked, and
 * then only a stop or a post to its own inbox can be work for it. */
static bool park_sleep(hive__worker_t *w, bool starting)
{
    hive__sched_t *s = w->sched;
    /* seq_cst store: the worker's half of the inbox handshake (see top). */
    atomic_store_explicit(&w->parked, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&w->parks, 1, memory_order_relaxed);
    /* seq_cst RMW: the parking half of the spawn handshake; the loads of the
     * check below come after it in the total order */
    atomic_fetch_add_explicit(&s->nparked, 1, memory_order_seq_cst);
    /* asym: the spawners' fence, run on their CPUs (see the top). A worker
     * starting up needs none: spawns begin after hive__sched_start saw it
     * in nparked. If the call failed (it cannot, once registered) the
     * worker does not sleep: it looks for work again. */
    bool fenced = starting || !s->asym ||
                  syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
    if (starting) {
        /* release: orders the above before hive__sched_start's acquire */
        atomic_fetch_add_explicit(&s->started, 1, memory_order_release);
        hive__futex_wake(&s->started, 1);
    }
    bool work = !fenced || (starting ? atomic_load_explicit(&s->stopping, memory_order_seq_cst) ||
                                       !hive__mpsc_empty(&w->inbox)
                                     : has_work(w));
    if (work) {
        /* Cancel. If a poster cleared parked first it also issues a wake,
         * which then finds nobody waiting: harmless. */
        atomic_exchange_explicit(&w->parked, 0, memory_order_seq_cst);
    } else {
        /* acquire: pairs with the poster's exchange, though the job itself is
         * published by the inbox's own release/acquire. */
        while (atomic_load_explicit(&w->parked, memory_order_acquire) == 1)
            hive__futex_wait(&w->parked, 1, -1);
        hive__count(&w->woken, 1);
    }
    atomic_fetch_sub_explicit(&s->nparked, 1, memory_order_relaxed);
    return !work;
}

_Atomic uint64_t hive__idle_spin_ns = IDLE_SPIN_NS;

/* Spin, yield, then sleep until there may be work; true if it slept.
 * Sleeping starts at *slept_at. If w holds its node's hand-off slot, it
 * looks at it at every look, and gives it up before it sleeps. */
static bool idle_wait(hive__worker_t *w, uint64_t t0, uint64_t *slept_at)
{
    /* relaxed: a tunable, read once per idle spell */
    uint64_t spin = atomic_load_explicit(&hive__idle_spin_ns, memory_order_relaxed);
    uint64_t until = t0 + spin;
    struct hive *h = w->sched->h;
    /* attached (remote.h): one idle worker at a time receives other
     * processes' messages while it spins, from its first look on, so a
     * request finds a thread awake and its work lands here, with no
     * wake-up. relaxed: a late view only polls one round later (the claim
     * reads it again) */
    const hive__remote_ops_t *r = NULL;  /* held: this worker polls for the attached layer */
    if (unlikely(atomic_load_explicit(&h->remote, memory_order_relaxed) != NULL))
        r = hive__remote_claim(h);
    bool keep = false;                   /* the layer asked to spin on (traffic) */
    for (;;) {
        for (int i = 0; i < 64; i++) {
            bool all = i % IDLE_DEQUE_EVERY == 0;
            if ((w->held && handoff_take(w)) || has_work_in(w, all)) {
                if (unlikely(r != NULL))
                    hive__remote_unclaim(h, r, HIVE__IDLE_BUSY);
                return false;            /* find_job looks at the slot (still held) first */
            }
            if (!w->held && all)
                handoff_open(w);         /* its spinner went to work or to sleep */
            if (unlikely(r != NULL)) {   /* polling: a probe per look, then one clock read */
                keep |= r->idle(r->ctx, HIVE__IDLE_POLL);
                if (i == 3)
                    break;
            } else
                hive__cpu_relax();
        }
        if (unlikely(atomic_load_explicit(&h->remote, memory_order_relaxed) != NULL) && r == NULL)
            r = hive__remote_claim(h);   /* another worker let go of it (relaxed: as above) */
        uint64_t now = hive__now_ns();
        if (unlikely(keep)) {
            until = now + spin;          /* traffic: keep spinning */
            keep = false;
        }
        if (now >= until)
            break;
    }
    if (w->held) {
        handoff_close(w);                /* spinning ends: spawns use the ring again */
        if (w->handed != NULL) {
            if (unlikely(r != NULL))
                hive__remote_unclaim(h, r, HIVE__IDLE_BUSY);
            return false;
        }
    }
    if (unlikely(r != NULL))
        hive__remote_unclaim(h, r, HIVE__IDLE_PARK);
    /* about to yield and sleep: hand the user threads' retired records to
     * RCU now (see run_jobs: not at every idle spell) */
    hive__store_maintain(h);
    for (int i = 0; i < IDLE_YIELDS; i++) {
        if (has_work(w))
            return false;
        sched_yield();
    }
    *slept_at = unlikely(w->tring != NULL) ? hive__trace_clock() : 0;
    if (unlikely(w->tring != NULL))
        hive__trace_put(w->tring, false, HIVE__TEV_PARK, *slept_at, 0, 0, NULL, NULL, 0);
    return park_sleep(w, false);
}

/* Idle: wait for work, counting the time as idle (and on the timeline). */
static void park(hive__worker_t *w)
{
    uint64_t t0 = hive__now_ns(), slept_at = 0;
    /* relaxed: statistics; a reader may count a spell's end twice for a moment */
    atomic_store_explicit(&w->idle_since, t0, memory_order_relaxed);
    bool slept = idle_wait(w, t0, &slept_at);
    uint64_t t1 = hive__now_ns();
    hive__count(&w->idle_ns, t1 - t0);
    atomic_store_explicit(&w->idle_since, 0, memory_order_relaxed);
    if (unlikely(w->tring != NULL) && slept) {     /* slept_at: the recorder's clock */
        uint64_t woke = hive__trace_clock();
        hive__trace_put(w->tring, false, HIVE__TEV_PARKED, slept_at, woke - slept_at, 0, NULL,
                        NULL, 0);
        hive__trace_put(w->tring, false, HIVE__TEV_WAKE, woke, 0, 0, NULL, NULL, 0);
    }
}

static void run_jobs(hive__worker_t *w)
{
    hive__sched_t *s = w->sched;
    for (;;) {
        /* relaxed: a late view only runs one more job; stop() joins us */
        if (unlikely(atomic_load_explicit(&s->stopping, memory_order_relaxed))) {
            if (w->reserved)
                handoff_unreserve(w, false);
            if (w->held)
                handoff_close(w);         /* a job stored there: hive__sched_stop drops it */
            hive__store_flush_retired(s->h, w);
            return;
        }
        if (w->reserved && w->handed == NULL)   /* the job from the slot ended (not */
            handoff_unreserve(w, true);         /* about to start): w looks again */
        hive__job_t *job = find_job(w);
        if (job != NULL) {
            run_job(w, job);
            if (unlikely(++w->maint == MAINT_EVERY)) {
                w->maint = 0;
                hive__store_maintain(s->h);
                if (unlikely(w->tring != NULL))
                    hive__trace_counters(s->h, w->tring);
            }
        } else {
            /* Its own retired records: nothing is held while asleep (its
             * own line). The user threads' lists (hive__store_maintain) are
             * flushed every MAINT_EVERY jobs and before it sleeps, not at
             * every idle spell: in a submit-get loop the worker idles
             * after every task, and taking the client's list each time
             * pulls the client's line over on every release. */
            if (!w->held)
                handoff_open(w);          /* first: a spawn can hand it a job now */
            hive__store_flush_retired(s->h, w);
            if (unlikely(w->tring != NULL))
                hive__trace_counters(s->h, w->tring);
            park(w);
        }
    }
}

static void *worker_main(void *arg)
{
    hive__worker_t *w = arg;
    hive__sched_t *s = w->sched;
    hive__self = w;
    note_stack();
    int rc = HIVE_OK;
    if (s->pin) {
        rc = hive__topo_bind_self(&s->h->topo, w->slot);
        w->bound = rc == HIVE_OK;
    }
    if (rc != HIVE_OK) {
        int expect = HIVE_OK;
        /* first failure wins; its sentence is copied for the init thread */
        if (atomic_compare_exchange_strong(&s->start_rc, &expect, rc))
            snprintf(s->start_msg, sizeof s->start_msg, "%s", hive_last_error());
    }
    /* release: publishes bound, start_rc and start_msg to hive__sched_start */
    atomic_fetch_add_explicit(&s->started, 1, memory_order_release);
    hive__futex_wake(&s->started, 1);
    run_jobs(w);
    hive__local_worker_exit(w);          /* fini the worker-local values on their thread */
    hive__self = NULL;
    return NULL;
}

/* Wake w if (and only if) it is parked. */
static inline void wake(hive__sched_t *s, hive__worker_t *w)
{
    /* seq_cst load: the poster's half of the handshake. The exchange makes
     * exactly one waker pay for the system call. */
    if (atomic_load_explicit(&w->parked, memory_order_seq_cst) != 0 &&
        atomic_exchange_explicit(&w->parked, 0, memory_order_seq_cst) != 0) {
        atomic_fetch_add_explicit(&s->wakes, 1, memory_order_relaxed);
        hive__futex_wake(&w->parked, 1);
    }
}

void hive__sched_post(hive__sched_t *s, unsigned index, hive__job_t *job)
{
    hive__worker_t *w = &s->w[index];
    hive__mpsc_push(&w->inbox, &job->node);
    wake(s, w);
}

/* The hand-off mark this thread's last hand-off replaced (hive__sched_spawn). */
static __thread uintptr_t handoff_guess;

/* Wake one parked worker, preferring node; nothing if none is parked. */
void hive__sched_wake_one(hive__sched_t *s, unsigned node)
{
    hive__nodeq_t *nq = &s->nodes[node];
    for (unsigned k = 0; k < nq->nworkers; k++) {
        hive__worker_t *w = &s->w[nq->workers[k]];
        if (atomic_load_explicit(&w->parked, memory_order_relaxed) != 0 &&
            atomic_exchange_explicit(&w->parked, 0, memory_order_seq_cst) != 0) {
            atomic_fetch_add_explicit(&s->wakes, 1, memory_order_relaxed);
            hive__futex_wake(&w->parked, 1);
            return;
        }
    }
    for (unsigned i = 0; i < s->n; i++) {
        hive__worker_t *w = &s->w[i];
        if (w->slot->node != node && atomic_load_explicit(&w->parked, memory_order_relaxed) != 0 &&
            atomic_exchange_explicit(&w->parked, 0, memory_order_seq_cst) != 0) {
            atomic_fetch_add_explicit(&s->wakes, 1, memory_order_relaxed);
            hive__futex_wake(&w->parked, 1);
            return;
        }
    }
}

#define pushed_own hive__sched_pushed_own   /* sched.h */

/* Store job in place of the mark of node nq's hand-off slot; false if no
 * worker holds it. */
static inline bool hand_to_holder(hive__nodeq_t *nq, uintptr_t job)
{
    /* a worker of the node spins idle holding the hand-off slot: the
     * job goes there, and it takes it (see top; nothing to wake).
     * release: the job's body reaches it through its acquire load.
     * First a CAS from the mark this thread last handed a job to: in a
     * submit-get loop the same spinner holds the slot again, and one
     * CAS takes the line once, where a load and a CAS take it twice
     * (shared, then exclusive: issue 10). A miss forgets the guess, so
     * the next spawns take the relaxed load first as before: no write
     * while the slot is empty. */
    uintptr_t v = handoff_guess;
    if (v != 0) {
        if (atomic_compare_exchange_strong_explicit(&nq->handoff, &v, job,
                                                    memory_order_release, memory_order_relaxed))
            return true;
        handoff_guess = 0;
    } else {
        v = atomic_load_explicit(&nq->handoff, memory_order_relaxed);
    }
    if ((v & 1) && atomic_compare_exchange_strong_explicit(&nq->handoff, &v, job,
                                                           memory_order_release,
                                                           memory_order_relaxed)) {
        handoff_guess = v;
        return true;
    }
    return false;
}

static inline hive__nodeq_t *user_node(hive__sched_t *s, int node)
{
    return &s->nodes[node >= 0 && (unsigned)node < s->nnodes ? (unsigned)node : 0];
}

bool hive__sched_hand(hive__sched_t *s, hive__job_t *job, int node)
{
    return hand_to_holder(user_node(s, node), (uintptr_t)job);
}

bool hive__sched_hand_rec(hive__sched_t *s, void *rec, int node)
{
    return hand_to_holder(user_node(s, node), (uintptr_t)rec | HANDOFF_REC);
}

void hive__sched_spawn(hive__sched_t *s, hive__job_t *job, unsigned lane, int node)
{
    hive__worker_t *self = hive__self_in(s);
    /* relaxed: see find_job; the load first keeps the line shared (no
     * write) once the bit is set, which is every spawn after the first */
    if (unlikely(!(atomic_load_explicit(&s->lanes_used, memory_order_relaxed) & (1u << lane))))
        atomic_fetch_or_explicit(&s->lanes_used, 1u << lane, memory_order_relaxed);
    unsigned target = node >= 0 && (unsigned)node < s->nnodes ? (unsigned)node
                    : self != NULL ? self->slot->node : 0;
    if (likely(self != NULL && self->slot->node == target)) {
        bool pushed = s->asym ? hive__deque_push(self->deque[lane], job)
                              : hive__deque_push_fenced(self->deque[lane], job);
        if (likely(pushed)) {
            pushed_own(s, target);
            return;
        }
    }
    {
        hive__nodeq_t *nq = &s->nodes[target];
        if (hand_to_holder(nq, (uintptr_t)job))
            return;
        if (unlikely(!hive__ring_put(&nq->ring[lane], job))) {
            /* the node's ring is full: hand it to one of its workers directly */
            unsigned k = atomic_fetch_add_explicit(&nq->rr, 1, memory_order_relaxed);
            hive__sched_post(s, nq->nworkers ? nq->workers[k % nq->nworkers] : k % s->n, job);
            return;
        }
    }
    /* the spawner's half of the handshake (see top): the ring's seq_cst
     * claim is before this seq_cst read of nparked */
    if (atomic_load_explicit(&s->nparked, memory_order_seq_cst) != 0)
        hive__sched_wake_one(s, target);
}

/* Start-up: every worker's first job, posted before its thread starts. It
 * parks the worker with park()'s sleeping half (park_sleep), without the
 * spin first: workers that start early sleep
 * instead of spinning in has_work() while later ones are created (4096
 * workers on 2 cores took 39 s to start). It counts the worker in started a
 * second time once it is counted in nparked, and hive__sched_start returns
 * only after that: nothing but a stop or a post to this inbox can make work
 * before then (nobody has the engine yet), and any spawn after then sees
 * the worker in nparked and wakes a parked worker. So checking stopping and
 * the inbox is enough here, where park() must scan every queue. */
static void start_parked(hive__job_t *job, hive__worker_t *w)
{
    (void)job;
    if (w == NULL)
        return;                          /* dropped at a failed start: nothing to undo */
    /* relaxed: a statistic; this job is not work */
    atomic_fetch_sub_explicit(&w->jobs, 1, memory_order_relaxed);
    uint64_t t0 = hive__now_ns();
    /* relaxed: statistics (as in park) */
    atomic_store_explicit(&w->idle_since, t0, memory_order_relaxed);
    park_sleep(w, true);
    hive__count(&w->idle_ns, hive__now_ns() - t0);   /* asleep until the first work: idle */
    atomic_store_explicit(&w->idle_since, 0, memory_order_relaxed);
}

static void free_tables(hive__sched_t *s, unsigned n)
{
    if (n > 0 && s->w)
        free(s->w[0].deque[0]);          /* one block holds every deque */
    for (unsigned node = 0; node < s->nnodes && s->nodes; node++) {
        free(s->nodes[node].workers);
        for (unsigned lane = 0; lane < HIVE_NPRIO; lane++)
            free(s->nodes[node].ring[lane].slot);
    }
    free(s->nodes);
    free(s->w);
    s->nodes = NULL;
    s->w = NULL;
}

int hive__sched_start(hive__sched_t *s, struct hive *h, const hive__topo_t *topo,
                      unsigned n, bool pin)
{
    memset(s, 0, sizeof *s);
    s->h = h;
    s->pin = pin;
    /* relaxed: a test's setting, made before hive_init */
    s->asym = !atomic_load_explicit(&hive__sched_fenced_push, memory_order_relaxed) &&
              membarrier_register();
    /* the workers, then their start-up jobs, in one block (free(s->w)) */
    size_t wbytes, jbytes, total;
    if (__builtin_mul_overflow((size_t)n, sizeof *s->w, &wbytes) ||
        __builtin_mul_overflow((size_t)n, sizeof(hive__job_t), &jbytes) ||
        __builtin_add_overflow(wbytes, jbytes, &total) ||
        hive__posix_memalign((void **)&s->w, HIVE_PAD, total ? total : HIVE_PAD) != 0)
        return hive__fail(HIVE_ENOMEM, "cannot allocate %u workers of %zu bytes", n, sizeof *s->w);
    memset(s->w, 0, total);
    hive__job_t *start_jobs = (hive__job_t *)(void *)((char *)s->w + wbytes);
    s->nnodes = topo->nnodes;
    s->nodes = hive__calloc(s->nnodes, sizeof *s->nodes);
    /* every deque in one block: large enough to be mapped lazily, so a
     * deque's slots cost no page until used */
    hive__deque_t *deques = NULL;
    size_t dbytes;
    if (s->nodes == NULL || __builtin_mul_overflow((size_t)n * HIVE_NPRIO, sizeof *deques, &dbytes) ||
        hive__posix_memalign((void **)&deques, HIVE_PAD, dbytes ? dbytes : HIVE_PAD) != 0) {
        free(s->nodes);
        free(s->w);
        return hive__fail(HIVE_ENOMEM, "cannot allocate %u node queues and %u workers' deques",
                          s->nnodes, n);
    }
    for (unsigned i = 0; i < n; i++) {
        hive__worker_t *w = &s->w[i];
        hive__mpsc_init(&w->inbox, false);
        w->sched = s;
        w->index = i;
        w->slot = hive__topo_slot(topo, i);
        w->rng = 0x9E3779B97F4A7C15ull * (i + 1);
        w->start_ns = hive__now_ns();
        w->tring = h->trace.on ? &h->trace.rings[i] : NULL;
        for (unsigned lane = 0; lane < HIVE_NPRIO; lane++) {
            w->deque[lane] = &deques[(size_t)i * HIVE_NPRIO + lane];
            hive__deque_init(w->deque[lane]);
        }
        s->nodes[w->slot->node].nworkers++;
    }
    /* HIVE_RING_SLOTS per ring up to 16 nodes; beyond, the 16 nodes' total
     * shared out (at least 256): 3000 synthetic nodes would otherwise fill
     * and touch 2.3 GB of rings. A full ring overflows into inboxes. */
    size_t ring_slots = HIVE_RING_SLOTS;
    while (ring_slots > 256 && (size_t)s->nnodes * ring_slots > 16u * HIVE_RING_SLOTS)
        ring_slots /= 2;
    for (unsigned node = 0; node < s->nnodes; node++) {
        hive__nodeq_t *nq = &s->nodes[node];
        nq->workers = hive__calloc(nq->nworkers ? nq->nworkers : 1, sizeof *nq->workers);
        nq->nworkers = 0;
        for (unsigned lane = 0; lane < HIVE_NPRIO; lane++) {
            hive__rslot_t *slots = hive__malloc(ring_slots * sizeof *slots);
            if (nq->workers == NULL || slots == NULL) {
                free(slots);
                free_tables(s, n);
                return hive__fail(HIVE_ENOMEM, "cannot allocate the queues of node %u", node);
            }
            hive__ring_init(&nq->ring[lane], slots, ring_slots);
        }
    }
    for (unsigned i = 0; i < n; i++) {
        hive__nodeq_t *nq = &s->nodes[s->w[i].slot->node];
        nq->workers[nq->nworkers++] = i;
        start_jobs[i].fn = start_parked;
        hive__sched_post(s, i, &start_jobs[i]);
    }
    unsigned created = 0;
    int rc = HIVE_OK;
    /* every worker's tables exist before any thread starts looking at them */
    s->n = n;
    for (; created < n; created++) {
        int e = start_thread(&s->w[created].thread, worker_main, &s->w[created]);
        if (e != 0) {
            rc = hive__fail(e == EAGAIN ? HIVE_ENOMEM : HIVE_ETOPO,
                            "cannot start worker %u of %u: %s", created, n, strerror(e));
            break;
        }
    }
    s->nthreads = created;
    /* wait until every created worker has bound itself (or failed to) and
     * parked in its start-up job: two counts each, as nothing stops them
     * before; acquire pairs with the workers' release increments */
    uint32_t seen;
    while ((seen = atomic_load_explicit(&s->started, memory_order_acquire)) < 2 * created)
        hive__futex_wait(&s->started, seen, -1);
    if (rc == HIVE_OK && atomic_load(&s->start_rc) != HIVE_OK)
        rc = hive__fail(atomic_load(&s->start_rc), "%s", s->start_msg);
    if (rc != HIVE_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", hive_last_error());
        hive__sched_stop(s);
        hive__fail(rc, "%s", msg);
    }
    return rc;
}

void hive__sched_begin_stop(hive__sched_t *s)
{
    /* seq_cst: the stop flag plays the job's role in the parking handshake,
     * and the store half of the waiters' handshake (store.c) */
    atomic_store_explicit(&s->stopping, 1, memory_order_seq_cst);
    for (unsigned i = 0; i < s->n; i++)
        wake(s, &s->w[i]);
}

void hive__sched_stop(hive__sched_t *s)
{
    hive__sched_begin_stop(s);
    for (unsigned i = 0; i < s->nthreads; i++)
        pthread_join(s->w[i].thread, NULL);
    /* nobody runs anymore: hand back what was still queued (a dropped job
     * may not queue new ones: its owner sees the engine stopping) */
    for (unsigned i = 0; i < s->n; i++) {
        hive__worker_t *w = &s->w[i];
        if (w->handed != NULL) {         /* taken from the hand-off slot, not run */
            hive__job_t *job = w->handed;
            w->handed = NULL;
            job->fn(job, NULL);
        }
        hive__mpsc_node_t *node;
        while ((node = hive__mpsc_pop(&w->inbox)) != NULL) {
            hive__job_t *job = HIVE_CONTAINER_OF(node, hive__job_t, node);
            job->fn(job, NULL);
        }
        for (unsigned lane = 0; lane < HIVE_NPRIO; lane++) {
            hive__job_t *job;
            while ((job = hive__deque_take(w->deque[lane])) != NULL)
                job->fn(job, NULL);
        }
    }
    /* The hand-off slots are empty: a worker that stops gives up the slot
     * it holds (run_jobs), taking any job stored there into w->handed,
     * dropped above; a spawn after that finds 0 and uses the ring. */
    for (unsigned node = 0; node < s->nnodes; node++)
        for (unsigned lane = 0; lane < HIVE_NPRIO; lane++) {
            hive__job_t *job;
            while ((job = hive__ring_take(&s->nodes[node].ring[lane])) != NULL)
                job->fn(job, NULL);
        }
    free_tables(s, s->n);
    s->n = 0;
}
