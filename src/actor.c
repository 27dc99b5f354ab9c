/*
 * actor.c - actors on lock-free priority mailboxes.
 *
 * An actor has three intrusive MPSC mailboxes (ds/mpsc.h), one per priority
 * lane, and a scheduling word `sched`: a RUNNING bit (a turn owns the actor)
 * and one TOKEN bit per lane (a turn job for that lane is queued on the
 * scheduler). hive_call pushes its record on its lane (one exchange) and
 * kicks: unless a turn is running, or a token is queued in that lane or a
 * more urgent one, it sets its lane's token bit and spawns that lane's token
 * job. So a HIGH call that arrives while the actor's turn waits in the LOW
 * lane behind other work posts a HIGH token and overtakes that work: it
 * runs right after the method running now, whatever lane scheduled the turn.
 *
 * A token job clears its bit and takes RUNNING; if a turn already runs it
 * just leaves (a stale token: the running turn sees the mail). A turn runs
 * the constructor first if it has not run, then up to ACTOR_BATCH calls,
 * always HIGH before NORMAL before LOW. Then it clears RUNNING and looks at
 * the mailbox heads again, kicking for any lane that has mail. Pusher and
 * turn form a store-load handshake, all seq_cst: "push, then read sched"
 * against "clear RUNNING, then read the heads": either the pusher sees no
 * RUNNING (and kicks), or the turn sees the push. Only RUNNING's owner runs
 * methods, so they never overlap, and no call is left behind.
 *
 * One caller's calls at one priority keep their order: the MPSC queue is
 * FIFO per producer, and a turn takes them in queue order. Ref arguments
 * still pending when their call comes up park the actor (see "parking"):
 * it runs nothing else until they finish, so its order is kept, but no
 * worker waits for them; cancelling that call, killing the actor or
 * shutting down ends the wait.
 *
 * Concurrent actors (opts->max_concurrency > 1, or the class declares
 * concurrency groups) keep one mailbox triple per group (group 0 is the
 * default group) and run the same sched word, tokens and handshake, but
 * the owner of RUNNING is a dispatcher, not a runner: its turn pops calls,
 * HIGH before NORMAL before LOW, while a group has a free slot (`inflight`
 * below its limit) and spawns each as a job of its own (call_job), so the
 * calls of one caller at one priority in one group are dispatched in the
 * order made and at most `limit` of a group run at once. A finishing call
 * frees its slot and kicks the dispatcher if its group was full (the
 * dispatcher may have left mail behind for want of a slot) - a second
 * store-load handshake, seq_cst: "decrement inflight, then read sched"
 * against "clear RUNNING, then read inflight and the heads". `active`
 * counts 1 for the living actor plus one per dispatched call; the
 * constructor and a restart run in a dispatcher turn only when no call is
 * in flight (a HIVE_RESTART sets restart_req; nothing is dispatched until
 * the last running call is out, which kicks). A call job whose arguments
 * are pending parks alone, keeping its slot (see "parking"). Death: the
 * dispatcher fails what is queued and what is parked, keeps RUNNING for
 * good and drops the living count; whoever drops `active` to zero (it, or
 * the last running call) retires.
 *
 * Failure: a nonzero return fails the call with HIVE_ETASK; HIVE_RESTART
 * also rebuilds the actor (fini, zero-fill, init with the original
 * arguments) up to max_restarts times, then the actor dies.
 *
 * Death (kill, failed constructor, no restarts left) is handled by a last
 * turn, which keeps RUNNING for good (no token is ever spawned again): it
 * fails queued calls with HIVE_EDEAD, runs fini, gives the state's bytes
 * back to the store, and removes the handle from the object table. Callers
 * find the actor through the table inside an RCU read-side section, so the
 * record itself is retired after a grace period: `refs` counts one for the
 * living actor (dropped by that RCU callback) and one per queued token; the
 * last drop fails whatever a late caller pushed meanwhile and frees the
 * record and its handle (whose second line holds the token jobs: see the
 * record's layout below). A dead actor's id stays recognisable without any record (see
 * actor.h): calls on it keep answering HIVE_EDEAD.
 */
#include "actor.h"
#include "arena.h"
#include "hive_impl.h"
#include "task.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fault.h"
#include "ds/pool.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACTOR_BATCH 100                  /* calls per turn before others get the worker (Pony: 100) */
#define RUNNING     (1u << HIVE_NPRIO)
#define TOKEN(l)    (1u << (l))
#define PARKED      (RUNNING << 1)       /* the turn's head record waits for an argument (parking) */
#define WOKE        (RUNNING << 2)       /* a park fired since the turn in progress began */

struct hive__actor;

typedef struct hive__actor_name {
    struct hive__actor_name *next;
    uint64_t                 id;
    char                     name[];
} name_t;

/* A mailbox triple, one packed MPSC queue per priority lane, with its
 * depth counters (hive_actor_top): callers bump `pushes`, the turn `pops`
 * (32 bits each: depth is their difference, modulo 2^32). */
typedef struct mail {
    hive__mbox_t        lane[HIVE_NPRIO];
    _Atomic uint32_t    pushes;
    _Atomic uint32_t    pops;
} mail_t;

typedef struct group {                   /* a concurrency group of a concurrent actor */
    mail_t              mail;
    HIVE_ALIGNED _Atomic uint32_t inflight;  /* calls dispatched and not yet finished */
    uint32_t            limit;           /* at most this many at once */
} group_t;

/* What only some actors have, out of line (most actors have none of it
 * and pay a pointer): constructor arguments (kept while restarts may need
 * them), the restart budget, and a concurrent actor's groups. Made by
 * hive_actor_new only for an actor that uses one of them. */
typedef struct xt {
    hive__task_t       *ctor;            /* constructor arguments, NULL for none; kept only
                                            while restarts may need them (running turn's) */
    unsigned            restarts;        /* running turn's */
    unsigned            max_restarts;
    _Atomic uint8_t     restarting;      /* a rebuild runs now (a statistic: hive_actor_top) */
    /* concurrent actors only (ngroups > 0): see the top */
    unsigned            ngroups;
    group_t            *groups;          /* ngroups groups, [0] the default one */
    _Atomic uint32_t    active;          /* 1 while living + 1 per dispatched call */
    _Atomic uint32_t    restart_req;     /* a call returned HIVE_RESTART; not yet rebuilt */
    pthread_mutex_t     park_lock;       /* parked calls: a park and a death, never a call */
    struct park        *parked;          /* call jobs parked on an argument (see parking) */
    unsigned            method_group[];  /* the group of each method */
} xt_t;

/* An actor class as the engine keeps it: one shared copy per distinct
 * hive_actor_class_t content (registry lock), counted by its actors. The
 * engine pointer lives here, not in each actor. */
typedef struct hive__actor_cls {
    hive_actor_class_t       cls;
    struct hive             *h;          /* the engine whose registry holds it */
    struct hive__actor_cls  *next;       /* actors.classes, under actors.lock */
    _Atomic uint64_t         refs;       /* actors holding it (see class_fast) */
    struct rcu_head          rcu;        /* its free, a grace period after unlinking */
} cls_t;

/*
 * An actor is 128 bytes of its own (a pool block of that class) plus the
 * second line of its handle record, beyond its state: 256 bytes in all
 * with the handle, so that a million idle actors take a quarter of a GB.
 *
 * The record: the mailboxes and the scheduling word, the class, the
 * handle, the out-of-line part (xt_t) and, while the actor lives, its
 * state and deferred call. Once retire has run those two are dead (the
 * state given back, nothing held: retire failed it) and their 16 bytes
 * are the RCU head of the record's retirement; nothing reads them after
 * retire (the final unref drains only the mailboxes, see unref).
 *
 * The handle record (store.h) is two lines: the header finders read, and
 * a 64-byte inline payload that an actor handle never has. The actor keeps
 * there what a turn's scheduling needs (atail_t): the three token jobs,
 * dead, placement and the turn's flags. The handle therefore lives as
 * long as the record: it leaves the table at retire (unpublish) and its
 * own count goes with the record, at the last unref, after the grace
 * period (queued tokens still point into it until then).
 */
typedef struct hive__actor {
    mail_t              mail;            /* 80 bytes */
    _Atomic uint32_t    sched;           /* RUNNING | TOKEN(lane)... */
    _Atomic uint32_t    refs;            /* 1 while not retired + 1 per queued token
                                            (+ 1 per dispatched call, concurrent actors) */
    const hive_actor_class_t *cls;       /* the engine's shared copy (cls_t) */
    hive__obj_t        *handle;          /* its second line: the atail_t */
    xt_t               *xt;              /* NULL unless the actor needs one; see xt_t */
    union {
        struct {
            void         *state;
            hive__task_t *held;          /* a call taken from the mail that parked the
                                            actor (see parking): the next turn runs it first */
        };
        struct rcu_head   rcu;           /* retired: see above */
    };
} hive__actor_t;

/* The actor's part of its handle record's second line. */
typedef struct atail {
    hive__job_t         token[HIVE_NPRIO];   /* each lane's turn job (token_run) */
    _Atomic uint32_t    dead;
    int16_t             worker;          /* HIVE_PLACE_WORKER: turns go to this inbox; else -1 */
    uint16_t            node;
    bool                conc;            /* concurrent: xt holds groups */
    /* owned by the running turn (one at a time) */
    bool                initialized;
    bool                finalized;
} atail_t;

_Static_assert(sizeof(hive__actor_t) == 128, "an actor record is a 128-byte pool block");
_Static_assert(sizeof(atail_t) <= sizeof(((hive__obj_t *)0)->tail.inl),
               "the actor's part fits its handle's inline payload");
_Static_assert(HIVE_MAX_WORKERS <= INT16_MAX, "a worker index fits atail_t.worker");

static inline atail_t *tail_in(hive__obj_t *handle)
{
    return (atail_t *)(void *)handle->tail.inl;
}

static inline atail_t *tail_of(const hive__actor_t *a)
{
    return tail_in(a->handle);
}

/* The engine: through the class copy (set before any turn or caller sees
 * the actor). */
static inline struct hive *eng(const hive__actor_t *a)
{
    return ((const cls_t *)(const void *)a->cls)->h;
}

static inline hive__task_t *ctor_of(const hive__actor_t *a)
{
    return a->xt != NULL ? a->xt->ctor : NULL;
}

void hive__actors_init(hive__actors_t *r)
{
    pthread_mutex_init(&r->lock, NULL);
    r->names = NULL;
    r->classes = NULL;
    atomic_init(&r->hot, NULL);
    atomic_init(&r->next, 0);
    atomic_init(&r->deaths, 0);
    atomic_init(&r->dying, 0);
    atomic_init(&r->restarts, 0);
    atomic_init(&r->rebuilding, 0);
    atomic_init(&r->parked, 0);
}

/* Was id ever an actor of this engine? (Then, if the table lacks it, dead.) */
static bool ours(hive_t *h, uint64_t id)
{
    return (id & HIVE__ACTOR_TAG) != 0 && hive__store_issued(h, id & ~HIVE__ACTOR_TAG);
}

static void unref(hive__actor_t *a);

/* Make sure a turn will take the mail of `lane`: unless a turn runs (it
 * sees the mail: the handshake at the top) or a token waits in this lane or
 * a more urgent one, queue this lane's token. seq_cst: the pusher's half of
 * the handshake (its push came first). */
static void kick(hive__actor_t *a, unsigned lane)
{
    uint32_t s = atomic_load_explicit(&a->sched, memory_order_seq_cst);
    for (;;) {
        if (s & (RUNNING | ((TOKEN(lane) << 1) - 1)))
            return;
        if (atomic_compare_exchange_weak_explicit(&a->sched, &s, s | TOKEN(lane),
                                                  memory_order_seq_cst, memory_order_seq_cst))
            break;
    }
    /* relaxed: the caller holds a reference already (a queued token, the
     * living one, or an RCU read-side section that keeps the living one) */
    atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
    atail_t *tl = tail_of(a);
    if (tl->worker >= 0)                 /* placed on a worker: its inbox, never stolen */
        hive__sched_post(&eng(a)->sched, (unsigned)tl->worker, &tl->token[lane]);
    else
        hive__sched_spawn(&eng(a)->sched, &tl->token[lane], lane, (int)tl->node);
}

/* Which lanes of a mailbox triple still hold calls the turn has not taken
 * (consumer only, so read while the turn still owns the actor): a tail off
 * the stub. This catches what the heads alone cannot, a call whose
 * producer had exchanged the head but not yet linked it when pop pushed
 * the stub behind it (chain: tail -> X -> stub with head == stub). */
static inline unsigned unfinished_of(mail_t *m)
{
    unsigned mask = 0;
    for (unsigned l = 0; l < HIVE_NPRIO; l++)
        if (m->lane[l].tail != &m->lane[l].stub)
            mask |= 1u << l;
    return mask;
}

static unsigned lanes_unfinished(hive__actor_t *a)
{
    return unfinished_of(&a->mail);
}

/* May a mailbox triple hold a call (-1: none, else its most urgent lane)?
 * After the turn gave up the actor it reads only the producers' ends
 * (heads), plus what unfinished_of saw before: head off the stub means a
 * push since the last stub re-push. */
static inline int pending_of(mail_t *m, unsigned unfinished)
{
    for (unsigned l = 0; l < HIVE_NPRIO; l++) {
        uintptr_t head = atomic_load_explicit(&m->lane[l].head, memory_order_seq_cst);
        if ((unfinished & (1u << l)) || (head & ~HIVE__MPSC_MARK) != (uintptr_t)&m->lane[l].stub)
            return (int)l;                  /* the most urgent lane with mail */
    }
    return -1;
}

static int mail_pending(hive__actor_t *a, unsigned unfinished)
{
    return pending_of(&a->mail, unfinished);
}

/* Mailbox depth counting (hive_actor_top): callers bump `pushes` after
 * their push (relaxed RMW on the heads' line, which the push has just
 * written: no other line); the consumer bumps `pops` with a load and a
 * store (relaxed: one consumer at a time, and turns are ordered by the
 * RUNNING handshake, so no bump is lost). Readers subtract: a statistic. */
static inline void count_push(mail_t *m)
{
    atomic_fetch_add_explicit(&m->pushes, 1, memory_order_relaxed);
}

static inline void count_pop(mail_t *m)
{
    atomic_store_explicit(&m->pops, atomic_load_explicit(&m->pops, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static uint64_t lanes_depth(mail_t *m)
{
    /* pops first: a call popped after this read was pushed before the
     * pushes read, so depth never goes below 0 for long (a pop counted
     * before its push's bump reads as a wrapped difference: clamped to 0).
     * relaxed, both: a statistic. 32-bit counters: the difference modulo
     * 2^32 is exact while fewer than 2^31 calls wait. */
    uint32_t out = atomic_load_explicit(&m->pops, memory_order_relaxed);
    uint32_t in = atomic_load_explicit(&m->pushes, memory_order_relaxed);
    uint32_t d = in - out;
    return d <= INT32_MAX ? d : 0;
}

/* Consumer only: the next call of a mailbox triple, HIGH before NORMAL
 * before LOW. */
static inline hive__task_t *pop_of(mail_t *m)
{
    for (unsigned l = 0; l < HIVE_NPRIO; l++) {
        hive__mpsc_node_t *n = hive__mbox_pop(&m->lane[l]);
        if (n != NULL) {
            count_pop(m);
            return HIVE_CONTAINER_OF(n, hive__task_t, job.node);
        }
    }
    return NULL;
}

static hive__task_t *next_call(hive__actor_t *a)
{
    return pop_of(&a->mail);
}

/* Consumer only: fail every call in the mailboxes, of every group (not
 * a->held: see fail_queued). */
static void fail_mail(hive__actor_t *a, int code)
{
    hive__task_t *t;
    while ((t = next_call(a)) != NULL)
        hive__task_fail_unrun(t, code);
    for (unsigned g = 0; a->xt != NULL && g < a->xt->ngroups; g++)
        while ((t = pop_of(&a->xt->groups[g].mail)) != NULL)
            hive__task_fail_unrun(t, code);
}

/* Consumer only, on an actor not yet retired: fail every queued call, of
 * every group, the held one first. */
static void fail_queued(hive__actor_t *a, int code)
{
    hive__task_t *t = a->held;
    a->held = NULL;
    if (t != NULL)
        hive__task_fail_unrun(t, code);
    fail_mail(a, code);
}

static bool is_dead(hive__actor_t *a)
{
    /* acquire: pairs with kill's and die's stores */
    return atomic_load_explicit(&tail_of(a)->dead, memory_order_acquire) != 0;
}

/* Can record t start? Its turn looked for a pending ref argument first
 * and parked on it (see parking), so an argument still pending here means
 * that no park could be had; then nothing waits in place (a thread waiting
 * inside a turn is the deadlock parking exists to prevent): the record
 * fails with HIVE_ENOMEM, or with HIVE_EDEAD / HIVE_ECANCELED if the actor
 * died or the call was cancelled. HIVE_ETASK if an argument failed;
 * HIVE_OK when all are sealed. */
static int args_ready(hive__actor_t *a, hive__task_t *t)
{
    for (size_t i = 0; t != NULL && i < t->nargs; i++) {
        hive__obj_t *o = t->args[i].obj;
        if (o == NULL)
            continue;
        uint32_t st = hive__obj_state(o);
        if (st == HIVE__PENDING) {
            if (is_dead(a))
                return HIVE_EDEAD;
            if (t->result != NULL &&
                hive__obj_run(t->result) == HIVE__RUN_CANCELLED)
                return HIVE_ECANCELED;
            return HIVE_ENOMEM;
        }
        if (st == HIVE__FAILED)
            return HIVE_ETASK;
    }
    return HIVE_OK;
}

/* ------------------------------------------------------------ parking
 *
 * A sequential actor's turn never waits for an argument. When the record at
 * the head of its work (the constructor, or the next call) has a ref
 * argument still pending, the turn parks: it keeps the record in a->held,
 * hangs a park on the argument (and, for a call, on the call's own result,
 * which a cancel fails), sets PARKED and ends. The actor runs nothing else
 * meanwhile - its order is kept, as when it waited in place - and its
 * worker is free. Whichever of the park's dependencies fires first wakes
 * the actor: PARKED off, WOKE on, a kick. The next turn looks again (an
 * argument may still be pending: it parks on that one).
 *
 * Waiting in place instead (a helping wait inside the turn) ran other jobs
 * above the turn on the worker's stack; one of them that waited for a later
 * call of this actor (a task doing hive_get on it) could never see it run,
 * since the turn below could not resume before that job returned: a
 * deadlock nobody wrote (tests/test_reliability.c, defect 11).
 *
 * While PARKED is set a turn (kicked by a new call, or a kill) does nothing
 * but notice death, and it kicks no further turn for mail: only the wake
 * (or a kill) does. So a turn's end reads WOKE in the same RMW that clears
 * RUNNING: a wake whose kick found RUNNING set is seen there (one word, so
 * either the waker's RMW or the turn's comes first in its order).
 *
 * A park holds a reference on the actor until it fires: the waker may
 * touch the actor after a kill retired it. It never touches the held
 * record, so a kill or a cancel can fail that record at once; the park is
 * freed by the last of its dependencies. Shutdown fails every pending
 * object (hive_shutdown), which fires every park before the actors go.
 */
typedef struct park {
    hive__dep_t       arg;               /* on the pending argument */
    hive__dep_t       res;               /* on the call's result (calls only) */
    hive__obj_t      *on_arg, *on_res;   /* a count on each (a pending object freed
                                            with its deps hung would never fire them) */
    hive__actor_t    *a;                 /* touched by the first to fire only: the
                                            park's reference on it goes then */
    struct hive      *h;
    hive__task_t     *job;               /* a concurrent actor's call job, parked by
                                            itself (see park_call_job), else NULL */
    struct park      *prev, *next;       /* conc->parked, under conc->park_lock */
    _Atomic uint32_t  left;              /* dependencies that have not fired */
    _Atomic uint32_t  fired;             /* 1 once the first has fired (it wakes) */
    uint16_t          deps;              /* how many were hung: 1 or 2 */
    uint16_t          lane;              /* the lane to kick */
    bool              linked;            /* in conc->parked (under its lock) */
    bool              killed;            /* its call failed by the actor's death */
} park_t;

_Static_assert(sizeof(park_t) <= 128, "a park is a 128-byte pool block");

static void call_job(hive__job_t *job, hive__worker_t *w);

/* A concurrent actor's parked call job leaves the kill list (its waker,
 * before it lets go of the park). */
static void park_unlink(park_t *p)
{
    xt_t *c = p->a->xt;
    pthread_mutex_lock(&c->park_lock);
    if (p->linked) {
        if (p->prev != NULL)
            p->prev->next = p->next;
        else
            c->parked = p->next;
        if (p->next != NULL)
            p->next->prev = p->prev;
        p->linked = false;
    }
    pthread_mutex_unlock(&c->park_lock);
}

/* One of p's dependencies fired: the first wakes what waits, the last
 * frees p. */
static void park_fire(park_t *p)
{
    hive__actor_t *a = p->a;             /* read before the decrement: p may go after it */
    unsigned lane = p->lane;
    struct hive *h = p->h;
    hive__task_t *job = p->job;
    /* The first to fire wakes, and it alone may touch the actor (the second
     * may come after a kill freed it). acq_rel: p's fields from its maker;
     * the first finishes with p (a call job's leaves the kill list) before
     * its decrement, so the last decrement frees a park nobody reads. */
    bool first = atomic_exchange_explicit(&p->fired, 1, memory_order_acq_rel) == 0;
    if (first && job != NULL)
        park_unlink(p);
    /* acq_rel: the last one out frees the park after the others' reads */
    uint32_t left = atomic_fetch_sub_explicit(&p->left, 1, memory_order_acq_rel);
    if (left == 1) {
        hive__pool_free(p, sizeof *p);
        /* release: hive__actors_shutdown's acquire load sees the parks done */
        atomic_fetch_sub_explicit(&h->actors.parked, 1, memory_order_release);
    }
    if (!first)
        return;
    /* acquire: pairs with hive__sched_begin_stop; a stopping engine starts no
     * job (hive__actors_shutdown fails what the actors hold) */
    bool stopping = atomic_load_explicit(&h->sched.stopping, memory_order_acquire);
    if (job != NULL) {
        /* the call job goes on (the call's reference on the actor and its
         * slot were kept); at a stop it fails the call as a dropped job */
        if (stopping)
            call_job(&job->job, NULL);
        else
            hive__sched_spawn(&h->sched, &job->job, lane, (int)tail_of(a)->node);
        return;
    }
    /* seq_cst RMW: the waker's half of the turn-end handshake (see above) */
    uint32_t s = atomic_load_explicit(&a->sched, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&a->sched, &s, (s & ~PARKED) | WOKE,
                                                  memory_order_seq_cst, memory_order_relaxed))
        ;
    if (!stopping)
        kick(a, lane);
    unref(a);                            /* the park's reference */
}

static void park_arg_ready(hive__dep_t *d, bool failed)
{
    (void)failed;                        /* the next turn reads the state */
    park_t *p = HIVE_CONTAINER_OF(d, park_t, arg);
    hive__obj_unpin(p->h, p->on_arg);
    park_fire(p);
}

static void park_res_ready(hive__dep_t *d, bool failed)
{
    (void)failed;
    park_t *p = HIVE_CONTAINER_OF(d, park_t, res);
    hive__obj_unpin(p->h, p->on_res);
    park_fire(p);
}

/* The index of t's first ref argument still pending, or -1; -1 also for
 * a cancelled call (its run fails it at once). */
static ptrdiff_t pending_arg(const hive__task_t *t, bool is_call)
{
    size_t i = 0;
    while (t != NULL && i < t->nargs &&
           (t->args[i].obj == NULL || hive__obj_state(t->args[i].obj) != HIVE__PENDING))
        i++;
    if (t == NULL || i == t->nargs)
        return -1;
    if (is_call && hive__obj_run(t->result) == HIVE__RUN_CANCELLED)
        return -1;
    return (ptrdiff_t)i;
}

/* A park on t's argument i (and on its result, for a call); NULL if none
 * could be allocated. The caller links or marks, then hangs (park_hang). */
static park_t *park_new(hive__actor_t *a, hive__task_t *t, size_t i, bool is_call)
{
    /* a slow path (the pool's caches are not instrumented): the fault
     * sweep (tests/test_faults.c) fails it here */
    park_t *p = hive__fault() ? NULL : hive__pool_alloc(sizeof *p);
    if (p == NULL)
        return NULL;
    memset(p, 0, sizeof *p);
    p->a = a;
    p->h = eng(a);
    p->deps = is_call ? 2 : 1;
    p->lane = (uint16_t)(is_call ? t->lane : hive__prio_lane(HIVE_PRIO_NORMAL));
    atomic_init(&p->left, p->deps);
    atomic_init(&p->fired, 0);
    p->arg.ready = park_arg_ready;
    p->res.ready = park_res_ready;
    /* t holds a count on both (its owner runs this): these cannot fail */
    p->on_arg = t->args[i].obj;
    p->on_res = is_call ? t->result : NULL;
    (void)hive__obj_pin_live(p->on_arg);
    if (is_call)
        (void)hive__obj_pin_live(p->on_res);
    /* relaxed: shutdown's count of parks; their frees release it */
    atomic_fetch_add_explicit(&eng(a)->actors.parked, 1, memory_order_relaxed);
    return p;
}

/* Hang p on its objects; a dependency that finished meanwhile fires at
 * once, here. The hooks' release publishes p to whoever fires it. */
static void park_hang(park_t *p)
{
    hive__obj_t *res = p->on_res;        /* p may be gone once the first has fired */
    if (!hive__obj_add_dep(p->on_arg, &p->arg))
        park_arg_ready(&p->arg, false);
    if (res != NULL && !hive__obj_add_dep(res, &p->res))
        park_res_ready(&p->res, false);
}

/* The turn (owner of RUNNING) about to start record t (the constructor's,
 * or a call): true if it parked the actor on one of t's pending ref
 * arguments. False if none is pending, if t is a cancelled call, or if no
 * park could be allocated (args_ready then fails the record, HIVE_ENOMEM). */
static bool park_on_args(hive__actor_t *a, hive__task_t *t, bool is_call)
{
    ptrdiff_t i = pending_arg(t, is_call);
    park_t *p = i < 0 ? NULL : park_new(a, t, (size_t)i, is_call);
    if (p == NULL)
        return false;
    /* relaxed: the park's reference; the hooks publish it with the park */
    atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
    /* relaxed: only the turn sets PARKED, and it owns RUNNING; a waker
     * clears it with a seq_cst RMW, ordered after this by the hooks. A
     * dependency that fires at once leaves WOKE for the end of this turn. */
    atomic_fetch_or_explicit(&a->sched, PARKED, memory_order_relaxed);
    park_hang(p);
    return true;
}

/* A concurrent actor's call job about to run call t: true if it parked
 * the job on one of t's pending arguments (the job is spawned again when
 * the first of the park's dependencies fires; it keeps its slot and its
 * reference meanwhile). The park goes on the actor's kill list first, under
 * the lock a death takes to fail parked calls (give_up), so a call parked
 * after the death was seen cannot be missed: the death is read under it. */
static bool park_call_job(hive__actor_t *a, hive__task_t *t)
{
    ptrdiff_t i = pending_arg(t, true);
    park_t *p = i < 0 ? NULL : park_new(a, t, (size_t)i, true);
    if (p == NULL)
        return false;
    p->job = t;
    xt_t *c = a->xt;
    pthread_mutex_lock(&c->park_lock);
    bool dead = is_dead(a);
    if (!dead) {
        p->next = c->parked;
        if (p->next != NULL)
            p->next->prev = p;
        c->parked = p;
        p->linked = true;
    }
    pthread_mutex_unlock(&c->park_lock);
    if (dead) {                          /* never hung: undo it, the run fails the call */
        hive__obj_unpin(eng(a), p->on_arg);
        hive__obj_unpin(eng(a), p->on_res);
        hive__pool_free(p, sizeof *p);
        atomic_fetch_sub_explicit(&eng(a)->actors.parked, 1, memory_order_release);
        return false;
    }
    park_hang(p);
    return true;
}

/* A concurrent actor died: fail every parked call's result with HIVE_EDEAD
 * now (its park then fires, and its job fails the call as a dead actor's).
 * One at a time, outside the lock: failing a result fires the park, which
 * takes the lock to leave the list. */
static void fail_parked_calls(hive__actor_t *a)
{
    xt_t *c = a->xt;
    for (;;) {
        pthread_mutex_lock(&c->park_lock);
        park_t *p = c->parked;
        while (p != NULL && p->killed)
            p = p->next;
        hive__obj_t *res = NULL;
        if (p != NULL) {
            p->killed = true;
            res = p->on_res;
            (void)hive__obj_pin_live(res);   /* p holds one: alive until we are done */
        }
        pthread_mutex_unlock(&c->park_lock);
        if (res == NULL)
            return;
        /* as complete_without_running (task.c): one CAS, one outcome wins */
        hive__obj_end_queued(eng(a), res, HIVE_EDEAD, HIVE__RUN_DONE);
        hive__obj_unpin(eng(a), res);
    }
}

static void finalize(hive__actor_t *a)
{
    atail_t *tl = tail_of(a);
    if (tl->initialized && !tl->finalized && a->cls->fini != NULL)
        a->cls->fini(a->state);
    tl->finalized = true;
}

/* The dead flag went 0 -> 1 (die, kill): relaxed, both counts are
 * statistics and hints. */
static void count_death(struct hive *h)
{
    atomic_fetch_add_explicit(&h->actors.deaths, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->actors.dying, 1, memory_order_relaxed);
}

/* hive_stats' actors_restarting, kept as a count (no walk over every
 * actor): +1 when an actor starts being rebuilt or a concurrent one's
 * restart is asked, -1 when that ends. relaxed: a statistic. */
static void note_rebuild(struct hive *h, int64_t d)
{
    atomic_fetch_add_explicit(&h->actors.rebuilding, d, memory_order_relaxed);
}

static void die(hive__actor_t *a)
{
    /* release: callers that see dead also see why (nothing else to publish) */
    if (atomic_exchange_explicit(&tail_of(a)->dead, 1, memory_order_acq_rel) == 0)
        count_death(eng(a));
    finalize(a);
}

/* The constructor's arguments are kept only for rebuilds: an actor that
 * may never restart gives them back once its constructor ran. */
static void drop_ctor_unless_restartable(hive__actor_t *a)
{
    xt_t *x = a->xt;
    if (x != NULL && x->ctor != NULL && x->restarts >= x->max_restarts) {
        hive__task_cleanup(x->ctor);
        x->ctor = NULL;
    }
}

static void construct(hive__actor_t *a, hive__worker_t *w)
{
    struct hive *h = eng(a);
    atail_t *tl = tail_of(a);
    tl->initialized = true;
    tl->finalized = false;
    if (args_ready(a, ctor_of(a)) != HIVE_OK) {
        tl->finalized = true;            /* nothing was built: no fini */
        die(a);
        return;
    }
    int rc = 0;
    if (a->cls->init != NULL) {
        struct hive_ctx ctx = { .h = h, .w = w, .task = ctor_of(a), .result = NULL,
                                .depth = w->depth, .seq = ++w->task_seq };
        rc = a->cls->init(a->state, &ctx);
    }
    if (rc != 0) {
        tl->finalized = true;            /* a failed constructor gets no fini */
        die(a);
    }
    drop_ctor_unless_restartable(a);
}

static void restart(hive__actor_t *a, hive__worker_t *w)
{
    /* a kill that landed while the method ran wins over the restart */
    if (is_dead(a))
        return;
    xt_t *x = a->xt;                     /* max_restarts > 0: hive_actor_new made one */
    if (x == NULL || x->restarts >= x->max_restarts) {
        die(a);
        return;
    }
    x->restarts++;
    /* relaxed, all three: statistics (hive_stats, hive_actor_top) */
    atomic_fetch_add_explicit(&eng(a)->actors.restarts, 1, memory_order_relaxed);
    atomic_store_explicit(&x->restarting, 1, memory_order_relaxed);
    note_rebuild(eng(a), 1);
    finalize(a);
    if (a->cls->size)
        memset(a->state, 0, a->cls->size);
    construct(a, w);
    atomic_store_explicit(&x->restarting, 0, memory_order_relaxed);
    note_rebuild(eng(a), -1);
}

/* Run one call (its record is gone afterwards); what the method returned,
 * 0 if it did not run. */
static int run_call(hive__actor_t *a, hive__task_t *t, hive__worker_t *w)
{
    struct hive *h = eng(a);
    int rc = args_ready(a, t);
    if (rc != HIVE_OK) {
        hive__task_fail_unrun(t, rc);    /* a cancelled one has failed already */
        return 0;
    }
    if (!hive__task_claim(t)) {          /* cancelled while queued: already failed */
        hive__task_cleanup(t);
        return 0;
    }
    struct hive_ctx ctx = { .h = h, .w = w, .task = t, .result = t->result, .depth = w->depth,
                            .seq = ++w->task_seq };
    uint64_t t0 = unlikely(w->tring != NULL) ? hive__trace_clock() : 0;
    rc = a->cls->methods[t->method].fn(a->state, &ctx);
    hive__count(&w->methods, 1);
    if (unlikely(w->tring != NULL))
        hive__trace_span(w->tring, HIVE__TEV_METHOD, t0, t->result->id, a->cls->name,
                         a->cls->methods[t->method].name, w->depth);
    hive__task_finish(t, rc == 0 ? HIVE_OK : HIVE_ETASK);
    hive__task_cleanup(t);
    return rc;
}

/* ------------------------------------------------------------ retiring */

/* ------------------------------------------------------------ classes */

/* The engine's copies of classes. The list and revivals are under the
 * registry lock; the most recently used copy is also `hot`, which
 * hive_actor_new reads without the lock (inside an RCU read-side section)
 * and takes a count on only while the count is above zero. A copy whose
 * count drops to zero is unlinked under the lock (unless it was revived
 * meanwhile) and freed after a grace period, so a reader that loaded `hot`
 * just before still reads a live copy. */

/* Take a count on c unless its count is zero (on its way out). relaxed:
 * the content was published with `hot` (release/acquire), and drops are
 * acq_rel. */
static bool class_retain(cls_t *c)
{
    uint64_t n = atomic_load_explicit(&c->refs, memory_order_relaxed);
    while (n != 0)
        if (atomic_compare_exchange_weak_explicit(&c->refs, &n, n + 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            return true;
    return false;
}

/* Without the lock: the hot copy if it is *cls's, with a count; else NULL. */
static cls_t *class_fast(hive_t *h, const hive_actor_class_t *cls)
{
    hive__rcu_lock();
    /* acquire: pairs with get_class's release, so the copy's content is
     * visible */
    cls_t *c = atomic_load_explicit(&h->actors.hot, memory_order_acquire);
    if (c != NULL && (memcmp(&c->cls, cls, sizeof *cls) != 0 || !class_retain(c)))
        c = NULL;
    hive__rcu_unlock();
    return c;
}

/* The engine's copy of *cls, shared by every actor of the same class
 * content (registry lock held): found (most recently used first) or
 * made, with a count for the caller. NULL without memory. */
static cls_t *get_class(hive_t *h, const hive_actor_class_t *cls)
{
    hive__actors_t *r = &h->actors;
    cls_t **at = &r->classes;
    while (*at != NULL && memcmp(&(*at)->cls, cls, sizeof *cls) != 0)
        at = &(*at)->next;
    cls_t *c = *at;
    if (c != NULL)
        *at = c->next;                   /* unlinked: goes to the front below */
    else if ((c = hive__malloc(sizeof *c)) != NULL) {
        c->cls = *cls;
        c->h = h;
        atomic_init(&c->refs, 0);
    } else
        return NULL;
    c->next = r->classes;
    r->classes = c;
    /* relaxed: under the lock, which a zero-count copy's unlinking takes
     * too (this may revive one: put_class looks again under the lock) */
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    /* release: the copy's content before the pointer (class_fast) */
    atomic_store_explicit(&r->hot, c, memory_order_release);
    return c;
}

static void class_free_cb(struct rcu_head *head)
{
    hive__rcu_callback_begin();
    free(caa_container_of(head, cls_t, rcu));
}

/* An actor is done with its class: the last count unlinks the copy (under
 * the registry lock) and frees it after a grace period. */
static void put_class(hive_t *h, const hive_actor_class_t *cls)
{
    cls_t *c = HIVE_CONTAINER_OF(cls, cls_t, cls);
    /* acq_rel: every holder's reads of the copy come before its free */
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    hive__actors_t *r = &h->actors;
    pthread_mutex_lock(&r->lock);
    /* c is looked for by address, not read, until found: another dropper
     * may have revived, dropped and freed it meanwhile */
    cls_t **at = &r->classes;
    while (*at != NULL && *at != c)
        at = &(*at)->next;
    if (*at == c && atomic_load_explicit(&c->refs, memory_order_relaxed) == 0) {
        *at = c->next;
        if (atomic_load_explicit(&r->hot, memory_order_relaxed) == c)
            atomic_store_explicit(&r->hot, NULL, memory_order_relaxed);
        hive__call_rcu(&c->rcu, class_free_cb);
    }
    pthread_mutex_unlock(&r->lock);
}

/* ------------------------------------------------------------ records */

/* The out-of-line part and what hangs on it. */
static void free_xt(xt_t *x)
{
    if (x == NULL)
        return;
    if (x->ctor != NULL)
        hive__task_cleanup(x->ctor);
    pthread_mutex_destroy(&x->park_lock);
    free(x->groups);
    free(x);
}

/* A record that never got its class nor was published (hive_actor_new
 * failed); its handle, if any, is the caller's to discard. */
static void free_unborn(hive_t *h, hive__actor_t *a, size_t state_size)
{
    free_xt(a->xt);
    if (a->state != NULL)
        hive__arena_free(&h->arena, a->state, state_size);
    hive__pool_free(a, sizeof *a);
}

/* The actor is done with its handle record (unpublished already): its
 * own count goes. That frees it, unless a task still holds the handle as
 * a ref argument (hive_submit and hive_call take a count on any object
 * they are given, an actor's handle too): then that task's release does,
 * through the store's usual path. */
static void drop_handle(hive_t *h, hive__obj_t *handle)
{
    hive__obj_release(h, handle);
}

/* Drop a reference; the last one frees the record and its handle. The
 * last reference always goes after retire (the living one is dropped by
 * retire_cb), so the state is gone and the held call failed already:
 * their bytes are the RCU head now, and only the mailboxes are drained.
 * Whoever drops it last is alone with the actor: no turn runs (RUNNING
 * stays set after death), no token is queued, and no caller can still
 * reach it (a grace period has passed since its handle left the table).
 * acq_rel: every earlier holder's writes happen-before the free. */
static void unref(hive__actor_t *a)
{
    if (atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) != 1)
        return;
    struct hive *h = eng(a);
    fail_mail(a, HIVE_EDEAD);            /* calls pushed by late callers */
    free_xt(a->xt);
    drop_handle(h, a->handle);           /* no token points into it any more */
    put_class(h, a->cls);
    hive__pool_free(a, sizeof *a);
}

/* After a grace period since the handle left the table: the living
 * reference goes (and with the last one, the record and its handle). */
static void retire_cb(struct rcu_head *head)
{
    hive__rcu_callback_begin();
    hive__actor_t *a = caa_container_of(head, hive__actor_t, rcu);
    struct hive *h = eng(a);
    unref(a);
    /* release: the shutdown path's acquire load sees our frees done */
    atomic_fetch_sub_explicit(&h->store.callbacks, 1, memory_order_release);
}

/* The last turn of a dead actor (it keeps RUNNING for good): queued calls
 * fail, fini runs, the state's bytes go back to the store, and the handle
 * leaves the table. */
static void retire(hive__actor_t *a)
{
    struct hive *h = eng(a);
    fail_queued(a, HIVE_EDEAD);
    finalize(a);
    if (a->state != NULL)
        hive__arena_free(&h->arena, a->state, a->cls->size);
    if (a->xt != NULL && a->xt->ctor != NULL) {
        hive__task_cleanup(a->xt->ctor);
        a->xt->ctor = NULL;
    }
    /* a concurrent actor that died with a rebuild asked: no rebuild comes.
     * relaxed: no call runs any more (retire comes after the last) */
    if (a->xt != NULL && a->xt->ngroups > 0 &&
        atomic_exchange_explicit(&a->xt->restart_req, 0, memory_order_relaxed) != 0)
        note_rebuild(h, -1);
    /* relaxed: a hint for hive_actor_new's wait on a full store */
    atomic_fetch_sub_explicit(&h->actors.dying, 1, memory_order_relaxed);
    hive__obj_unpublish(h, a->handle);
    atomic_fetch_add_explicit(&h->store.callbacks, 1, memory_order_relaxed);
    /* state and held are dead from here on: their bytes become the head */
    hive__call_rcu(&a->rcu, retire_cb);
}

/* The end of an unparked turn: give RUNNING up and kick for the mail left
 * (unfinished: lanes_unfinished, read while the turn still owned the
 * consumer side) or for a kill that came meanwhile. seq_cst RMW, then
 * seq_cst reads of the heads and of dead: the turn's half of the
 * handshakes (see top). */
static void release_turn(hive__actor_t *a, unsigned unfinished)
{
    atomic_fetch_and_explicit(&a->sched, ~(RUNNING | WOKE), memory_order_seq_cst);
    int lane = mail_pending(a, unfinished);
    if (lane < 0 && atomic_load_explicit(&tail_of(a)->dead, memory_order_seq_cst))
        lane = 0;                        /* killed meanwhile: a turn must retire it */
    if (lane >= 0)
        kick(a, (unsigned)lane);
}

/* A turn: the caller owns RUNNING. A record whose arguments are pending
 * parks the actor (see "parking"): the constructor leaves it unbuilt, a
 * call waits in a->held, ahead of the mail, for the turn after the wake. */
static void turn(hive__actor_t *a, hive__worker_t *w)
{
    /* relaxed: PARKED is set only by turns (we own RUNNING: token_run's
     * acquire ordered the last one's writes before us); a wake clearing it
     * meanwhile leaves WOKE, read at the end */
    bool parked = (atomic_load_explicit(&a->sched, memory_order_relaxed) & PARKED) != 0 &&
                  !is_dead(a);           /* dead: fail what it holds (the park never reads it) */
    if (!parked && !tail_of(a)->initialized && !is_dead(a)) {
        parked = park_on_args(a, ctor_of(a), false);
        if (!parked)
            construct(a, w);
    }
    for (int n = 0; n < ACTOR_BATCH && !parked; n++) {
        /* stopping: queued calls never run; this turn ends and the next one
         * is dropped by the scheduler, failing them with HIVE_ESHUTDOWN */
        if (atomic_load_explicit(&w->sched->stopping, memory_order_acquire))
            break;
        hive__task_t *t = a->held;
        a->held = NULL;
        if (t == NULL)
            t = next_call(a);
        if (t == NULL)
            break;
        if (is_dead(a)) {
            hive__task_fail_unrun(t, HIVE_EDEAD);
        } else if (park_on_args(a, t, true)) {
            a->held = t;
            parked = true;
        } else if (run_call(a, t, w) == HIVE_RESTART) {
            restart(a, w);
        }
    }
    if (is_dead(a)) {
        retire(a);                       /* RUNNING stays: no turn ever again */
        return;
    }
    if (parked) {
        int held_lane = a->held != NULL ? (int)a->held->lane : (int)hive__prio_lane(HIVE_PRIO_NORMAL);
        /* seq_cst RMW, then a seq_cst read of dead: as in release_turn
         * ("parking": the same RMW reads WOKE, and clears it for the turn
         * it may kick) */
        uint32_t was = atomic_fetch_and_explicit(&a->sched, ~(RUNNING | WOKE), memory_order_seq_cst);
        int lane = (was & WOKE) ? held_lane : -1;   /* mail waits for the wake, which kicks */
        if (lane < 0 && atomic_load_explicit(&tail_of(a)->dead, memory_order_seq_cst))
            lane = 0;                    /* killed meanwhile: a turn must retire it */
        if (lane >= 0)
            kick(a, (unsigned)lane);
        return;
    }
    /* read before giving the actor up: once RUNNING is clear another turn
     * may own the mailboxes' consumer side (and a->held) */
    release_turn(a, lanes_unfinished(a));
}

/* ------------------------------------------------------------ concurrent actors */

static void call_job(hive__job_t *job, hive__worker_t *w);

/* Is a restart waiting for the running calls to finish? seq_cst: read on
 * either side of the handshakes (after clearing RUNNING, after a call's
 * decrements), ordered against the store in call_done. */
static bool restart_wanted(hive__actor_t *a)
{
    return atomic_load_explicit(&a->xt->restart_req, memory_order_seq_cst) != 0;
}

/* Dispatcher only: spawn queued calls as jobs, HIGH before NORMAL before
 * LOW, while their group has a free slot; at most ACTOR_BATCH per turn. */
static void dispatch(hive__actor_t *a, hive__worker_t *w)
{
    int budget = ACTOR_BATCH;
    for (unsigned l = 0; l < HIVE_NPRIO; l++) {
        for (unsigned g = 0; g < a->xt->ngroups; g++) {
            group_t *gr = &a->xt->groups[g];
            /* acquire: a slot freed by a call that asked for a restart
             * comes with its restart_req (stored before the decrement), so
             * restart_wanted, read after it, stops the dispatch. Only the
             * dispatcher raises inflight; a stale (higher) value costs a
             * slot this turn, and the end-of-turn check reads it again. */
            while (budget > 0 &&
                   atomic_load_explicit(&gr->inflight, memory_order_acquire) < gr->limit &&
                   !restart_wanted(a)) {
                if (atomic_load_explicit(&w->sched->stopping, memory_order_acquire))
                    return;              /* queued calls fail with HIVE_ESHUTDOWN */
                hive__mpsc_node_t *n = hive__mbox_pop(&gr->mail.lane[l]);
                if (n == NULL)
                    break;
                count_pop(&gr->mail);
                hive__task_t *t = HIVE_CONTAINER_OF(n, hive__task_t, job.node);
                /* relaxed, all three: RMWs (no increment is lost), and the
                 * spawn below publishes the record to the call's job */
                atomic_fetch_add_explicit(&gr->inflight, 1, memory_order_relaxed);
                atomic_fetch_add_explicit(&a->xt->active, 1, memory_order_relaxed);
                atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
                t->job.fn = call_job;
                hive__sched_spawn(&eng(a)->sched, &t->job, l, (int)tail_of(a)->node);
                budget--;
            }
        }
    }
}

/* A dead concurrent actor's dispatcher: fail what is queued, keep RUNNING
 * for good, drop the living count; the last one out retires. acq_rel:
 * whoever retires sees every call's writes to the state before fini. */
static void give_up(hive__actor_t *a)
{
    fail_queued(a, HIVE_EDEAD);
    fail_parked_calls(a);
    if (atomic_fetch_sub_explicit(&a->xt->active, 1, memory_order_acq_rel) == 1)
        retire(a);
}

/* After the dispatcher gave the actor up: the lane to kick, -1 for none.
 * A rebuild is due once no call runs; mail counts in a group with a free
 * slot (a full group's next finishing call kicks). */
static int dispatch_pending(hive__actor_t *a, const unsigned char *unfinished)
{
    if (atomic_load_explicit(&tail_of(a)->dead, memory_order_seq_cst))
        return 0;                        /* killed meanwhile: retire it */
    if (restart_wanted(a))               /* seq_cst: see restart_wanted */
        return atomic_load_explicit(&a->xt->active, memory_order_seq_cst) == 1 ? 0 : -1;
    int best = -1;
    for (unsigned g = 0; g < a->xt->ngroups; g++) {
        group_t *gr = &a->xt->groups[g];
        /* seq_cst: the dispatcher's half of the slot handshake (top) */
        if (atomic_load_explicit(&gr->inflight, memory_order_seq_cst) >= gr->limit)
            continue;
        int l = pending_of(&gr->mail, unfinished[g]);
        if (l >= 0 && (best < 0 || l < best))
            best = l;
    }
    return best;
}

/* A dispatcher turn: the caller owns RUNNING. */
static void dispatch_turn(hive__actor_t *a, hive__worker_t *w)
{
    /* a constructor with pending arguments parks the actor, as a
     * sequential one's does (see "parking"; relaxed: as in turn) */
    bool parked = (atomic_load_explicit(&a->sched, memory_order_relaxed) & PARKED) != 0;
    if (!parked && !tail_of(a)->initialized && !is_dead(a)) {
        parked = park_on_args(a, ctor_of(a), false);
        if (!parked)
            construct(a, w);             /* nothing is dispatched before it */
    }
    if (parked && !is_dead(a)) {
        /* seq_cst RMW and read: the parked end of a turn (see turn) */
        uint32_t was = atomic_fetch_and_explicit(&a->sched, ~(RUNNING | WOKE), memory_order_seq_cst);
        if ((was & WOKE) || atomic_load_explicit(&tail_of(a)->dead, memory_order_seq_cst))
            kick(a, hive__prio_lane(HIVE_PRIO_NORMAL));
        return;
    }
    /* seq_cst: with call_done's decrements; active == 1 means no call runs */
    if (restart_wanted(a) && atomic_load_explicit(&a->xt->active, memory_order_seq_cst) == 1) {
        /* relaxed: only the dispatcher clears it, calls set it (seq_cst)
         * only while they run, and none does now */
        atomic_store_explicit(&a->xt->restart_req, 0, memory_order_relaxed);
        note_rebuild(eng(a), -1);        /* restart counts it again while it runs */
        restart(a, w);
    }
    if (is_dead(a)) {
        give_up(a);                      /* RUNNING stays: no turn ever again */
        return;
    }
    if (!restart_wanted(a))
        dispatch(a, w);
    unsigned char unfinished[HIVE_MAX_GROUPS + 1];
    for (unsigned g = 0; g < a->xt->ngroups; g++)
        unfinished[g] = (unsigned char)unfinished_of(&a->xt->groups[g].mail);
    /* seq_cst RMW, then seq_cst reads: the dispatcher's half of both
     * handshakes (see top) */
    atomic_fetch_and_explicit(&a->sched, ~RUNNING, memory_order_seq_cst);
    int lane = dispatch_pending(a, unfinished);
    if (lane >= 0)
        kick(a, (unsigned)lane);
}

/* A call finished (or was dropped): free its slot, and kick the dispatcher
 * if it may have left mail for want of this slot, or a rebuild waits for
 * this last call. seq_cst: the finishing call's half of the handshakes
 * ("decrement, then read sched" in kick). At shutdown (w == NULL) no kick:
 * hive__actors_shutdown fails what is queued and frees the actor. */
static void call_done(hive__actor_t *a, group_t *gr, unsigned lane, bool restart_asked,
                      hive__worker_t *w)
{
    /* an exchange (seq_cst, as the store it stands for) so that only the
     * first asker counts the rebuild */
    if (restart_asked && atomic_exchange_explicit(&a->xt->restart_req, 1, memory_order_seq_cst) == 0)
        note_rebuild(eng(a), 1);
    uint32_t before = atomic_fetch_sub_explicit(&gr->inflight, 1, memory_order_seq_cst);
    uint32_t left = atomic_fetch_sub_explicit(&a->xt->active, 1, memory_order_seq_cst) - 1;
    if (w != NULL) {
        if (left == 0)
            retire(a);                   /* dead, given up, and we were the last call out */
        else if (before == gr->limit || (left == 1 && restart_wanted(a)))
            kick(a, lane);
    }
    unref(a);                            /* this call's reference */
}

static void call_job(hive__job_t *job, hive__worker_t *w)
{
    hive__task_t *t = HIVE_CONTAINER_OF(job, hive__task_t, job);
    hive__actor_t *a = t->actor;
    group_t *gr = &a->xt->groups[a->xt->method_group[t->method]];
    unsigned lane = t->lane;             /* the record is gone after the call */
    int rc = 0;
    if (w == NULL) {
        hive__task_fail_unrun(t, HIVE_ESHUTDOWN);
    } else if (is_dead(a)) {
        hive__task_fail_unrun(t, HIVE_EDEAD);
    } else if (park_call_job(a, t)) {
        return;                          /* still in flight: its slot and references stay */
    } else {
        rc = run_call(a, t, w);
    }
    call_done(a, gr, lane, rc == HIVE_RESTART, w);
}

/* A turn job of lane `lane` (job is &tail_of(a)->token[lane]: the
 * actor's handle record holds it, and the handle points to the actor). */
/* A token dropped at shutdown (its job run with no worker) that took
 * RUNNING: it is the mailboxes' only consumer, and fails what is queued
 * instead of running it. Then it gives RUNNING up with the turn's end
 * handshake (release_turn) and, for mail pushed meanwhile (the pusher saw
 * RUNNING and kicked nobody), takes the actor again and fails that too,
 * rather than kick: a job dropped at shutdown may queue no new one
 * (hive__sched_stop's sweep may have passed that queue already).
 *
 * A drop that finds RUNNING held leaves the mail to the holder: a turn
 * running on another worker (which stops at its next look at the stop
 * flag and kicks for what is left: that token is dropped here later), or
 * a dead actor's, kept for good (its late mail fails when the last
 * reference goes: unref). Failing the mail there too, as this once did,
 * made two consumers of one mailbox while a turn still ran. */
static void drop_turn(hive__actor_t *a)
{
    for (;;) {
        fail_queued(a, HIVE_ESHUTDOWN);
        unsigned unfinished = lanes_unfinished(a);
        /* seq_cst RMW, then seq_cst reads of the heads: release_turn's half
         * of the pusher/turn handshake */
        atomic_fetch_and_explicit(&a->sched, ~(RUNNING | WOKE), memory_order_seq_cst);
        if (mail_pending(a, unfinished) < 0)
            return;
        /* seq_cst: as token_run's take; a pusher mid-push makes us look
         * again until its link is written */
        uint32_t s = atomic_load_explicit(&a->sched, memory_order_relaxed);
        do {
            if (s & RUNNING)
                return;                  /* taken: the mail is the new holder's */
        } while (!atomic_compare_exchange_weak_explicit(&a->sched, &s, s | RUNNING, memory_order_seq_cst,
                                                        memory_order_relaxed));
        hive__cpu_relax();
    }
}

static void token_run(hive__job_t *job, unsigned lane, hive__worker_t *w)
{
    atail_t *tl = (atail_t *)(void *)((char *)(job - lane) - offsetof(atail_t, token));
    hive__obj_t *handle = (hive__obj_t *)(void *)((char *)tl - offsetof(hive__obj_t, tail.inl));
    hive__actor_t *a = handle->u.actor.actor;
    /* Clear this token's bit and take RUNNING unless a turn holds it.
     * acq_rel: acquire the previous turn's writes to the actor; release
     * our bit's clearing to kickers. */
    uint32_t s = atomic_load_explicit(&a->sched, memory_order_relaxed), ns;
    do {
        ns = s & ~TOKEN(lane);
        if (!(s & RUNNING))
            ns = (ns | RUNNING) & ~WOKE; /* the turn about to run looks at everything */
    } while (!atomic_compare_exchange_weak_explicit(&a->sched, &s, ns, memory_order_seq_cst,
                                                    memory_order_relaxed));
    if (w == NULL) {
        if (!(s & RUNNING))
            drop_turn(a);
    } else if (!(s & RUNNING)) {
        if (!tl->conc)
            turn(a, w);
        else
            dispatch_turn(a, w);
    }
    unref(a);                            /* this token's reference */
}

/* One job function per lane, so that a token is a bare job: the lane is
 * which function runs, the actor where its job sits in the record. */
static void token_job_high(hive__job_t *job, hive__worker_t *w)
{
    token_run(job, 0, w);
}

static void token_job_normal(hive__job_t *job, hive__worker_t *w)
{
    token_run(job, 1, w);
}

static void token_job_low(hive__job_t *job, hive__worker_t *w)
{
    token_run(job, 2, w);
}

static const hive__job_fn token_fn[HIVE_NPRIO] = { token_job_high, token_job_normal,
                                                   token_job_low };
_Static_assert(HIVE_NPRIO == 3, "one token function per lane");

/* ------------------------------------------------------------ API */

/* Inside an RCU read-side section: the actor behind a handle id, or the
 * failure (HIVE_ENOENT for no actor of this engine, HIVE_EDEAD for a dead
 * one). */
static int find_actor(hive_t *h, hive_actor_t actor, const char *fn, hive__actor_t **out)
{
    hive__obj_t *o = NULL;
    if (actor.id != 0)
        o = hive__obj_lookup(h, actor.id);
    if (o != NULL && o->kind == HIVE__ACTOR) {
        hive__actor_t *a = o->u.actor.actor;
        /* acquire: as is_dead (read through the handle found: one line
         * fewer to wait for than through the record) */
        if (atomic_load_explicit(&tail_in(o)->dead, memory_order_acquire) == 0) {
            *out = a;
            return HIVE_OK;
        }
        return hive__fail(HIVE_EDEAD, "%s: actor %llu is dead already (killed, constructor "
                          "failed, or out of its %u restarts)", fn, (unsigned long long)actor.id,
                          a->xt != NULL ? a->xt->max_restarts : 0);
    }
    if (o == NULL && ours(h, actor.id))
        return hive__fail(HIVE_EDEAD, "%s: actor %llu is dead already (killed, constructor "
                          "failed, or out of its restarts)", fn, (unsigned long long)actor.id);
    if (o != NULL)
        return hive__fail(HIVE_ENOENT, "%s: actor %llu does not exist: object %llu is %s, not an "
                          "actor", fn, (unsigned long long)actor.id, (unsigned long long)actor.id,
                          hive__kind_name(o->kind));
    return hive__fail(HIVE_ENOENT, "%s: actor %llu does not exist (not an actor of this engine)",
                      fn, (unsigned long long)actor.id);
}

int hive__actor_check(struct hive *h, uint64_t id, const char *fn)
{
    hive__rcu_lock();
    hive__actor_t *a;
    int rc = find_actor(h, (hive_actor_t){ id }, fn, &a);
    hive__rcu_unlock();
    return rc;
}

/* ------------------------------------------------------------ calls run in place */

hive__actor_t *hive__actor_claim_free(struct hive *h, uint64_t id, unsigned method, unsigned worker)
{
    /* relaxed, both: a late view only sends this call through hive_call,
     * which reads them again */
    if (h->trace.on || atomic_load_explicit(&h->sched.stopping, memory_order_relaxed))
        return NULL;
    hive__rcu_lock();
    hive__obj_t *o = hive__obj_lookup(h, id);
    hive__actor_t *a = o != NULL && o->kind == HIVE__ACTOR ? o->u.actor.actor : NULL;
    if (a != NULL) {
        atail_t *tl = tail_in(o);
        uint32_t free_turn = 0;
        /* conc, worker and the class are fixed before the handle is
         * published; the rest is read once the turn is ours. The turn is
         * free when sched is 0 (no RUNNING, no token, not parked), and is
         * taken as token_run takes it. seq_cst: our half of the
         * pusher/turn handshake (see top), which orders the reads of the
         * heads below after it: a pusher that read sched before us saw no
         * RUNNING and queued a token (so sched was not 0), or we see its
         * push; one that read it after us leaves its mail to our end of
         * turn (release_turn), as with any turn. */
        if (tl->conc || method >= a->cls->nmethods || (tl->worker >= 0 && (unsigned)tl->worker != worker) ||
            !atomic_compare_exchange_strong_explicit(&a->sched, &free_turn, RUNNING, memory_order_seq_cst,
                                                     memory_order_relaxed)) {
            a = NULL;
        } else {
            unsigned unfinished = lanes_unfinished(a);
            if (!tl->initialized || a->held != NULL || unfinished != 0 || mail_pending(a, 0) >= 0 ||
                atomic_load_explicit(&tl->dead, memory_order_seq_cst)) {
                /* mail came first, or a kill, or the constructor has not
                 * run: that goes before us. Give the turn back as a turn
                 * ends (kicking for what is there) */
                release_turn(a, unfinished);
                a = NULL;
            }
        }
    }
    /* the living count keeps the record from here: only a turn retires
     * it, and the turn is ours until run_here gives it back */
    hive__rcu_unlock();
    return a;
}

int hive__actor_run_here(hive__actor_t *a, hive__worker_t *w, unsigned method, hive__task_t *t,
                         hive__obj_t *res, void (*done)(void *, int), void *arg)
{
    struct hive_ctx ctx = { .h = eng(a), .w = w, .task = t, .result = res, .depth = w->depth,
                            .seq = ++w->task_seq };
    int rc = a->cls->methods[method].fn(a->state, &ctx);
    if (done != NULL)
        done(arg, rc);                   /* the answer leaves before the turn's end */
    hive__count(&w->methods, 1);
    if (rc == HIVE_RESTART)
        restart(a, w);
    if (is_dead(a)) {                    /* killed meanwhile, or its restarts ran out: as turn() */
        retire(a);                       /* RUNNING stays: no turn ever again */
        return rc;
    }
    release_turn(a, lanes_unfinished(a));
    return rc;
}

static int check_class(const hive_actor_class_t *cls)
{
    if (cls->nmethods > 0 && cls->methods == NULL)
        return hive__fail(HIVE_EINVAL, "hive_actor_new: class %s lists %zu methods but methods is NULL",
                          cls->name ? cls->name : "(unnamed)", cls->nmethods);
    for (size_t m = 0; m < cls->nmethods; m++)
        if (cls->methods[m].fn == NULL)
            return hive__fail(HIVE_EINVAL, "hive_actor_new: method %zu (%s) of class %s has no fn", m,
                              cls->methods[m].name ? cls->methods[m].name : "unnamed",
                              cls->name ? cls->name : "(unnamed)");
    return HIVE_OK;
}

static const char *class_name(const hive_actor_class_t *cls)
{
    return cls->name ? cls->name : "(unnamed)";
}

/* Where opts place the actor: *node and *worker (-1: no worker). */
static int place_of(hive_t *h, const hive_actor_opts_t *opts, unsigned *node, int *worker)
{
    *worker = -1;
    if (opts == NULL || opts->place == HIVE_PLACE_DEFAULT) {
        *node = hive__current_node(h);
        return HIVE_OK;
    }
    unsigned i = opts->place_index;
    if (opts->place == HIVE_PLACE_NODE) {
        if (i >= h->topo.nnodes)
            return hive__fail(HIVE_EINVAL, "hive_actor_new: node %u is not one of the engine's "
                              "%u NUMA nodes", i, h->topo.nnodes);
        *node = i;
        return HIVE_OK;
    }
    if (opts->place == HIVE_PLACE_WORKER) {
        if (i >= h->nworkers)
            return hive__fail(HIVE_EINVAL, "hive_actor_new: worker %u is not one of the engine's "
                              "%u workers", i, h->nworkers);
        *node = h->sched.w[i].slot->node;
        *worker = (int)i;
        return HIVE_OK;
    }
    return hive__fail(HIVE_EINVAL, "hive_actor_new: placement kind %d is none of "
                      "HIVE_PLACE_DEFAULT (0), HIVE_PLACE_NODE (1), HIVE_PLACE_WORKER (2)",
                      opts->place);
}

/* The class's concurrency groups and the default group's limit. */
static int check_groups(const hive_actor_class_t *cls, unsigned max_concurrency)
{
    if (max_concurrency > HIVE_MAX_CONCURRENCY)
        return hive__fail(HIVE_EINVAL, "hive_actor_new: max_concurrency %u of class %s is above "
                          "HIVE_MAX_CONCURRENCY (%u)", max_concurrency, class_name(cls),
                          (unsigned)HIVE_MAX_CONCURRENCY);
    if (cls->ngroups > 0 && cls->groups == NULL)
        return hive__fail(HIVE_EINVAL, "hive_actor_new: class %s lists %zu concurrency groups but "
                          "groups is NULL", class_name(cls), cls->ngroups);
    if (cls->ngroups > HIVE_MAX_GROUPS)
        return hive__fail(HIVE_EINVAL, "hive_actor_new: class %s has %zu concurrency groups, more "
                          "than HIVE_MAX_GROUPS (%u)", class_name(cls), cls->ngroups,
                          (unsigned)HIVE_MAX_GROUPS);
    for (size_t g = 0; g < cls->ngroups; g++) {
        const hive_concurrency_group_t *gr = &cls->groups[g];
        if (gr->name == NULL)
            return hive__fail(HIVE_EINVAL, "hive_actor_new: concurrency group %zu of class %s has "
                              "no name", g, class_name(cls));
        if (gr->max_concurrency < 1 || gr->max_concurrency > HIVE_MAX_CONCURRENCY)
            return hive__fail(HIVE_EINVAL, "hive_actor_new: concurrency group %zu (%s) of class %s "
                              "has max_concurrency %u, outside 1..%u", g, gr->name,
                              class_name(cls), gr->max_concurrency,
                              (unsigned)HIVE_MAX_CONCURRENCY);
        for (size_t o = 0; o < g; o++)
            if (strcmp(cls->groups[o].name, gr->name) == 0)
                return hive__fail(HIVE_EINVAL, "hive_actor_new: concurrency groups %zu and %zu of "
                                  "class %s are both named \"%s\"", o, g, class_name(cls),
                                  gr->name);
        if (gr->nmethods > 0 && gr->methods == NULL)
            return hive__fail(HIVE_EINVAL, "hive_actor_new: concurrency group %zu (%s) of class %s "
                              "lists %zu methods but methods is NULL", g, gr->name,
                              class_name(cls), gr->nmethods);
        for (size_t i = 0; i < gr->nmethods; i++)
            if (gr->methods[i] >= cls->nmethods)
                return hive__fail(HIVE_EINVAL, "hive_actor_new: concurrency group %zu (%s) of "
                                  "class %s lists method %u, but the class has %zu", g, gr->name,
                                  class_name(cls), gr->methods[i], cls->nmethods);
    }
    return HIVE_OK;
}

/* The out-of-line part, for an actor that needs one: constructor
 * arguments, restarts, or concurrency (then with its groups and method
 * table). None for a plain actor. */
static int setup_xt(hive__actor_t *a, const hive_actor_class_t *cls, unsigned max_concurrency,
                    unsigned max_restarts, size_t nargs)
{
    bool conc = cls->ngroups > 0 || max_concurrency > 1;
    if (!conc && max_restarts == 0 && nargs == 0)
        return HIVE_OK;                  /* the plain actor: 128 bytes and its handle */
    size_t nm = conc ? (cls->nmethods ? cls->nmethods : 1) : 0, bytes;
    if (__builtin_mul_overflow(nm, sizeof(unsigned), &bytes) ||
        __builtin_add_overflow(bytes, sizeof(xt_t), &bytes))
        return hive__fail(HIVE_EINVAL, "hive_actor_new: a table of %zu methods of class %s "
                          "overflows a size", cls->nmethods, class_name(cls));
    xt_t *c = hive__malloc(bytes);
    if (c == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_actor_new: cannot allocate %zu bytes for the "
                          "actor's constructor, restarts and concurrency", bytes);
    memset(c, 0, bytes);                 /* every method in the default group */
    pthread_mutex_init(&c->park_lock, NULL);
    c->max_restarts = max_restarts;
    atomic_init(&c->restarting, 0);
    a->xt = c;
    if (!conc)
        return HIVE_OK;
    unsigned n = (unsigned)cls->ngroups + 1;
    if (hive__posix_memalign((void **)&c->groups, HIVE_PAD, n * sizeof(group_t)) != 0) {
        c->groups = NULL;
        return hive__fail(HIVE_ENOMEM, "hive_actor_new: cannot allocate %u concurrency groups", n);
    }
    c->ngroups = n;
    for (unsigned g = 0; g < n; g++) {
        group_t *gr = &c->groups[g];
        for (unsigned l = 0; l < HIVE_NPRIO; l++)
            hive__mbox_init(&gr->mail.lane[l]);
        atomic_init(&gr->mail.pushes, 0);
        atomic_init(&gr->mail.pops, 0);
        atomic_init(&gr->inflight, 0);
        gr->limit = g == 0 ? (max_concurrency > 1 ? max_concurrency : 1)
                           : cls->groups[g - 1].max_concurrency;
    }
    for (size_t g = 0; g < cls->ngroups; g++) {
        const hive_concurrency_group_t *gr = &cls->groups[g];
        for (size_t i = 0; i < gr->nmethods; i++) {
            unsigned m = gr->methods[i];  /* < nmethods: check_groups */
            if (c->method_group[m] != 0 && c->method_group[m] != g + 1)
                return hive__fail(HIVE_EINVAL, "hive_actor_new: method %u of class %s is in two "
                                  "concurrency groups, %s and %s", m, class_name(cls),
                                  cls->groups[c->method_group[m] - 1].name, gr->name);
            c->method_group[m] = (unsigned)g + 1;
        }
    }
    atomic_init(&c->active, 1);
    atomic_init(&c->restart_req, 0);
    return HIVE_OK;
}

static name_t *by_name(hive__actors_t *r, const char *name)
{
    for (name_t *n = r->names; n != NULL; n = n->next)
        if (strcmp(n->name, name) == 0)
            return n;
    return NULL;
}

/* Is the actor with this handle id still alive? (Registry lock held.) */
static bool alive(hive_t *h, uint64_t id)
{
    hive__rcu_lock();
    hive__obj_t *o = hive__obj_lookup(h, id);
    bool live = o != NULL && !is_dead(o->u.actor.actor);
    hive__rcu_unlock();
    return live;
}

/* The state block, waiting a little for dying actors to give theirs back
 * when the store is full (their last turns are queued already). */
static void *alloc_state(hive_t *h, size_t size, unsigned node, int *err)
{
    void *p = hive__arena_alloc(&h->arena, size, node, err);
    for (int tries = 0; p == NULL && *err == HIVE_EFULL && tries < 10000 &&
                        atomic_load_explicit(&h->actors.dying, memory_order_relaxed) != 0; tries++) {
        hive__sleep_ns(10000);
        p = hive__arena_alloc(&h->arena, size, node, err);
    }
    return p;
}

/* A fresh record (not yet the engine's copy of its class: a->cls is set
 * under the registry lock), or NULL. */
static hive__actor_t *new_record(void)
{
    hive__actor_t *a;
    /* from the block pool, not malloc: glibc's aligned allocations leave
     * fragments that later mallocs scan, which made actor_new grow with
     * the number of actors (perf: _int_malloc 39% at 200k actors) */
    if ((a = hive__pool_alloc(sizeof *a)) == NULL)
        return NULL;
    memset(a, 0, sizeof *a);
    for (unsigned l = 0; l < HIVE_NPRIO; l++)
        hive__mbox_init(&a->mail.lane[l]);
    atomic_init(&a->mail.pushes, 0);
    atomic_init(&a->mail.pops, 0);
    atomic_init(&a->sched, 0);
    atomic_init(&a->refs, 1);
    return a;
}

/* The actor's name as the registry keeps it (NULL and HIVE_OK for none). */
static int copy_actor_name(const hive_actor_opts_t *opts, name_t **out)
{
    *out = NULL;
    if (opts == NULL || opts->name == NULL)
        return HIVE_OK;
    size_t nlen = strlen(opts->name);
    name_t *nm = hive__malloc(sizeof *nm + nlen + 1);
    if (nm == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_actor_new: cannot copy the name of %zu bytes", nlen);
    memcpy(nm->name, opts->name, nlen + 1);
    *out = nm;
    return HIVE_OK;
}

/* The record's parts made outside the registry lock: the out-of-line
 * part, constructor arguments (none kept for none), state, and the handle
 * with the actor's part of it (atail_t). */
static int build_parts(hive_t *h, hive__actor_t *a, const hive_actor_class_t *cls,
                       const hive_arg_t *args, size_t nargs, const hive_actor_opts_t *opts,
                       unsigned node, int worker)
{
    unsigned max_concurrency = opts ? opts->max_concurrency : 0;
    int rc = setup_xt(a, cls, max_concurrency, opts ? opts->max_restarts : 0, nargs);
    if (rc == HIVE_OK && nargs > 0)
        rc = hive__task_new(h, args, nargs, false, "hive_actor_new", &a->xt->ctor);
    if (rc == HIVE_OK && cls->size != 0) {
        a->state = alloc_state(h, cls->size, node, &rc);
        if (a->state != NULL)
            memset(a->state, 0, cls->size);
    }
    if (rc == HIVE_OK && (rc = hive__obj_new(h, HIVE__ACTOR, 0, false, &a->handle)) == HIVE_OK) {
        hive__obj_t *o = a->handle;
        o->u.actor.actor = a;
        atomic_store_explicit(&o->state, HIVE__SEALED, memory_order_relaxed);
        atomic_store_explicit(&o->deps, HIVE__DEPS_CLOSED, memory_order_relaxed);
        atail_t *tl = tail_of(a);
        memset(tl, 0, sizeof *tl);
        for (unsigned l = 0; l < HIVE_NPRIO; l++)
            tl->token[l].fn = token_fn[l];
        atomic_init(&tl->dead, 0);
        tl->worker = (int16_t)worker;
        tl->node = (uint16_t)node;
        tl->conc = a->xt != NULL && a->xt->ngroups > 0;
    }
    return rc;
}

int hive_actor_new(hive_t *h, const hive_actor_class_t *cls, const hive_arg_t *args, size_t nargs,
                   const hive_actor_opts_t *opts, hive_actor_t *out)
{
    if (h == NULL || cls == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_actor_new: %s is NULL",
                          h == NULL ? "engine" : cls == NULL ? "class" : "out");
    int rc = check_class(cls);
    unsigned max_concurrency = opts ? opts->max_concurrency : 0;
    if (rc == HIVE_OK)
        rc = check_groups(cls, max_concurrency);
    unsigned node = 0;
    int worker = -1;
    if (rc == HIVE_OK)
        rc = place_of(h, opts, &node, &worker);
    if (rc != HIVE_OK)
        return rc;
    if (atomic_load_explicit(&h->sched.stopping, memory_order_relaxed))
        return hive__fail(HIVE_ESHUTDOWN, "hive_actor_new: the engine is shutting down");
    hive__actor_t *a = new_record();
    if (a == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_actor_new: cannot allocate an actor record of %zu "
                          "bytes", sizeof *a);
    name_t *nm = NULL;
    if ((rc = copy_actor_name(opts, &nm)) != HIVE_OK ||
        (rc = build_parts(h, a, cls, args, nargs, opts, node, worker)) != HIVE_OK) {
        if (a->handle != NULL)
            hive__obj_discard(h, a->handle);
        free(nm);
        free_unborn(h, a, cls->size);
        return rc;
    }

    /* the id: the handle's store id, marked as an actor's */
    a->handle->id |= HIVE__ACTOR_TAG;
    /* nothing to construct (no init, no arguments): built already, so no
     * turn runs until the first call (a million idle actors cost no job
     * each); set before the publish, which hands the record to callers */
    bool built = cls->init == NULL && nargs == 0;
    tail_of(a)->initialized = built;
    hive__actors_t *r = &h->actors;
    /* An actor without a name, of the class made last, takes no lock: the
     * table is the registry of live actors (see each_actor). */
    cls_t *c = nm == NULL ? class_fast(h, cls) : NULL;
    bool locked = c == NULL;
    if (locked) {
        pthread_mutex_lock(&r->lock);
        name_t *old = nm != NULL ? by_name(r, nm->name) : NULL;
        bool taken = old != NULL && alive(h, old->id);
        c = taken ? NULL : get_class(h, cls);
        if (c == NULL) {
            uint64_t holder = taken ? old->id : 0;
            pthread_mutex_unlock(&r->lock);
            if (taken)
                rc = hive__fail(HIVE_EINVAL, "hive_actor_new: the name \"%s\" is taken by live "
                                "actor %llu", nm->name, (unsigned long long)holder);
            else
                rc = hive__fail(HIVE_ENOMEM, "hive_actor_new: cannot copy class %s (%zu bytes)",
                                class_name(cls), sizeof(cls_t));
            free(nm);
            hive__obj_discard(h, a->handle);
            free_unborn(h, a, cls->size);
            return rc;
        }
        if (nm != NULL) {                /* named before it is findable: under the lock */
            if (old != NULL) {           /* a dead actor's name is free again */
                old->id = a->handle->id;
                free(nm);
            } else {
                nm->id = a->handle->id;
                nm->next = r->names;
                r->names = nm;
            }
        }
    }
    a->cls = &c->cls;
    /* relaxed: a count of actors created (a statistic) */
    atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
    /* findable from now on (release); a name is published with it, under
     * the lock, so a lookup never finds an id that is not in the table */
    hive__obj_publish(h, a->handle);
    out->id = a->handle->id;
    if (built) {                         /* no constructor turn: see build_parts */
        if (locked)
            pthread_mutex_unlock(&r->lock);
        return HIVE_OK;
    }
    hive__rcu_lock();                    /* as callers: the actor may die at once */
    if (locked)
        pthread_mutex_unlock(&r->lock);
    kick(a, 1);                          /* the constructor's turn */
    hive__rcu_unlock();
    return HIVE_OK;
}

int hive_call(hive_t *h, hive_actor_t actor, unsigned method, const hive_arg_t *args, size_t nargs,
              const hive_opts_t *opts, hive_ref_t *result)
{
    if (unlikely(h == NULL || result == NULL))
        return hive__fail(HIVE_EINVAL, "hive_call: %s is NULL", h == NULL ? "engine" : "result");
    const hive__remote_ops_t *r = hive__remote_of(h, actor.id);
    if (unlikely(r != NULL))
        return r->call(r->ctx, actor, method, args, nargs, opts, result);
    /* the read-side section keeps the actor's record while we push and kick */
    hive__rcu_lock();
    hive__actor_t *a;
    int rc = find_actor(h, actor, "hive_call", &a);
    if (unlikely(rc != HIVE_OK))
        goto out;
    const hive_actor_class_t *cls = a->cls;
    if (unlikely(method >= cls->nmethods)) {
        rc = hive__fail(HIVE_EINVAL, "hive_call: method %u out of range, class %s has %zu", method,
                        class_name(cls), cls->nmethods);
        goto out;
    }
    if (unlikely(atomic_load_explicit(&h->sched.stopping, memory_order_relaxed))) {
        rc = hive__fail(HIVE_ESHUTDOWN, "hive_call: the engine is shutting down");
        goto out;
    }
    uint64_t t0 = unlikely(h->trace.on) ? hive__trace_clock() : 0;
    hive__task_t *t;
    if ((rc = hive__task_new(h, args, nargs, true, "hive_call", &t)) != HIVE_OK)
        goto out;
    t->actor = a;
    t->method = method;
    t->lane = hive__prio_lane(opts ? opts->priority : cls->methods[method].priority);
    result->id = t->result->id;
    unsigned lane = t->lane;             /* t belongs to the actor once pushed */
    mail_t *box = likely(!tail_of(a)->conc) ? &a->mail
                                          : &a->xt->groups[a->xt->method_group[method]].mail;
    if (unlikely(h->trace.on))           /* before the push: the run comes after */
        hive__trace_submit(h, t0, result->id, cls->name, cls->methods[method].name, true);
    hive__mbox_push(&box->lane[lane], &t->job.node);
    count_push(box);
    kick(a, lane);
out:
    hive__rcu_unlock();
    return rc;
}

int hive_actor_kill(hive_t *h, hive_actor_t actor)
{
    if (h == NULL)
        return hive__fail(HIVE_EINVAL, "hive_actor_kill: engine is NULL");
    const hive__remote_ops_t *r = hive__remote_of(h, actor.id);
    if (unlikely(r != NULL))
        return r->kill(r->ctx, actor);
    hive__rcu_lock();
    hive__actor_t *a;
    int rc = find_actor(h, actor, "hive_actor_kill", &a);
    /* seq_cst: ordered before kick's read of sched, against the turn's
     * final "clear RUNNING, then read dead" */
    if (rc == HIVE_OK && atomic_exchange_explicit(&tail_of(a)->dead, 1, memory_order_seq_cst) != 0)
        rc = hive__fail(HIVE_EDEAD, "hive_actor_kill: actor %llu is dead already",
                        (unsigned long long)actor.id);
    else if (rc == HIVE_OK) {
        count_death(h);
        kick(a, 0);                      /* a turn fails what is queued and retires it */
    }
    hive__rcu_unlock();
    return rc;
}

int hive_actor_lookup(hive_t *h, const char *name, hive_actor_t *out)
{
    if (h == NULL || name == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_actor_lookup: %s is NULL",
                          h == NULL ? "engine" : name == NULL ? "name" : "out");
    pthread_mutex_lock(&h->actors.lock);
    name_t *n = by_name(&h->actors, name);
    uint64_t id = n ? n->id : 0;
    pthread_mutex_unlock(&h->actors.lock);
    if (n == NULL) {
        /* acquire: as hive__remote_of */
        const hive__remote_ops_t *r = atomic_load_explicit(&h->remote, memory_order_acquire);
        if (unlikely(r != NULL))
            return r->lookup(r->ctx, name, out);
        return hive__fail(HIVE_ENOENT, "hive_actor_lookup: no actor is named \"%s\"", name);
    }
    out->id = id;
    return HIVE_OK;
}

/* Every actor not yet retired is published in the object table (retire
 * unpublishes it): the table is the registry of live actors, so creating
 * one links it into nothing. fn(a, arg) for each, inside an RCU read-side
 * section or with the engine quiet (records stay until a grace period
 * after their handles leave the table). */
typedef struct each_arg {
    void (*fn)(hive__actor_t *a, void *arg);
    void *arg;
} each_arg_t;

static void each_cb(void *obj, void *arg)
{
    hive__obj_t *o = obj;
    const each_arg_t *e = arg;
    if (o->kind == HIVE__ACTOR)
        e->fn(o->u.actor.actor, e->arg);
}

static void each_actor(hive_t *h, void (*fn)(hive__actor_t *a, void *arg), void *arg)
{
    each_arg_t e = { fn, arg };
    hive__store_each(h, each_cb, &e);
}

/* Shutdown, one actor: no worker runs and every token was dropped, so only
 * the living reference is left. Its handle goes now (unpublished: the
 * table walk has passed its slot; freed by the store's drain at close),
 * its class with hive__actors_close. */
static void shut_one(hive__actor_t *a, void *arg)
{
    hive_t *h = arg;
    fail_queued(a, HIVE_ESHUTDOWN);
    finalize(a);
    free_xt(a->xt);
    if (a->state != NULL)
        hive__arena_free(&h->arena, a->state, a->cls->size);
    hive__obj_unpublish(h, a->handle);
    /* relaxed: nothing else runs now. Held by nobody else (every task was
     * failed and cleaned before), it goes at once, not through a grace
     * period and the RCU thread: a million of them at shutdown */
    if (atomic_load_explicit(&a->handle->refs, memory_order_relaxed) == 1)
        hive__obj_discard(h, a->handle);
    else
        drop_handle(h, a->handle);
    hive__pool_free(a, sizeof *a);
}

void hive__actors_shutdown(struct hive *h)
{
    hive__actors_t *r = &h->actors;
    /* A park hung on an object that a last job made after shutdown's first
     * hive__store_fail_pending: fail it now, so that every park fires (and
     * lets go of its actor) before the actors go. acquire: pairs with the
     * parks' release decrements (their frees are done). */
    if (atomic_load_explicit(&r->parked, memory_order_acquire) != 0)
        hive__store_fail_pending(h, HIVE_ESHUTDOWN);
    pthread_mutex_lock(&r->lock);
    name_t *n = r->names;
    r->names = NULL;
    pthread_mutex_unlock(&r->lock);
    while (n != NULL) {
        name_t *next = n->next;
        free(n);
        n = next;
    }
    each_actor(h, shut_one, h);
}

void hive__actors_close(struct hive *h)
{
    hive__actors_t *r = &h->actors;
    for (cls_t *c = r->classes, *next; c != NULL; c = next) {
        next = c->next;
        free(c);
    }
    r->classes = NULL;
    pthread_mutex_destroy(&r->lock);
}

void hive__actors_count(struct hive *h, uint64_t *created, uint64_t *alive)
{
    /* relaxed, both: statistics; deaths first, so that created >= alive
     * (an actor counts as created before it can die) */
    uint64_t dead = atomic_load_explicit(&h->actors.deaths, memory_order_relaxed);
    *created = atomic_load_explicit(&h->actors.next, memory_order_relaxed);
    *alive = *created > dead ? *created - dead : 0;
}

/* ------------------------------------------------------------ statistics */

static int actor_state(hive__actor_t *a)
{
    if (is_dead(a))
        return HIVE_ACTOR_DEAD;
    /* relaxed: statistics; restart_req: a concurrent actor's wanted rebuild */
    xt_t *x = a->xt;
    if (x != NULL && (atomic_load_explicit(&x->restarting, memory_order_relaxed) != 0 ||
                      (x->ngroups > 0 &&
                       atomic_load_explicit(&x->restart_req, memory_order_relaxed) != 0)))
        return HIVE_ACTOR_RESTARTING;
    return HIVE_ACTOR_ALIVE;
}

static uint64_t actor_depth(hive__actor_t *a)
{
    uint64_t n = lanes_depth(&a->mail);
    for (unsigned g = 0; a->xt != NULL && g < a->xt->ngroups; g++)
        n += lanes_depth(&a->xt->groups[g].mail);
    return n;
}

/* Keep top[0 .. *n) the deepest, deepest first (insertion: max is small). */
static void keep_deepest(hive__actor_t **top, uint64_t *depth, size_t *n, size_t max,
                         hive__actor_t *a, uint64_t d)
{
    size_t i = *n < max ? (*n)++ : max;
    while (i > 0 && depth[i - 1] < d) {
        if (i < max) {
            top[i] = top[i - 1];
            depth[i] = depth[i - 1];
        }
        i--;
    }
    if (i < max) {
        top[i] = a;
        depth[i] = d;
    }
}

static void copy_name(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src != NULL ? src : "");
}

static void fill_info(hive__actors_t *r, hive__actor_t *a, uint64_t depth, hive_actor_info_t *o)
{
    memset(o, 0, sizeof *o);
    o->id = a->handle->id;
    o->mailbox = depth;
    o->state = actor_state(a);
    copy_name(o->class_name, sizeof o->class_name, a->cls->name);
    for (name_t *nm = r->names; nm != NULL; nm = nm->next)
        if (nm->id == o->id) {
            copy_name(o->name, sizeof o->name, nm->name);
            break;
        }
}

#define INFO_MIN (offsetof(hive_actor_info_t, state) + sizeof(int))
#define TOP_MAX  64                      /* records per call: a screen's worth */

typedef struct top_arg {
    hive__actor_t *top[TOP_MAX];
    uint64_t       depth[TOP_MAX];
    size_t         n, max;
} top_arg_t;

static void top_one(hive__actor_t *a, void *arg)
{
    top_arg_t *t = arg;
    keep_deepest(t->top, t->depth, &t->n, t->max, a, actor_depth(a));
}

int hive_actor_top(hive_t *h, hive_actor_info_t *out, size_t max, size_t size)
{
    if (h == NULL || (out == NULL && max > 0))
        return hive__fail(HIVE_EINVAL, "hive_actor_top: %s is NULL", h ? "out" : "engine");
    if (size < INFO_MIN)
        return hive__fail(HIVE_EINVAL, "hive_actor_top: size %zu is below the %zu bytes up to state",
                          size, INFO_MIN);
    if (max > TOP_MAX)
        max = TOP_MAX;
    top_arg_t t = { .n = 0, .max = max };
    hive__actors_t *r = &h->actors;
    /* the read-side section keeps every record found until we are done */
    hive__rcu_lock();
    if (max > 0)
        each_actor(h, top_one, &t);
    pthread_mutex_lock(&r->lock);        /* the names */
    for (size_t i = 0; i < t.n; i++) {
        hive_actor_info_t full;
        fill_info(r, t.top[i], t.depth[i], &full);
        size_t k = size < sizeof full ? size : sizeof full;
        memcpy((char *)out + i * size, &full, k);
        if (size > k)
            memset((char *)out + i * size + k, 0, size - k);
    }
    pthread_mutex_unlock(&r->lock);
    hive__rcu_unlock();
    return (int)t.n;
}

uint64_t hive__actors_restarting(struct hive *h)
{
    /* relaxed: a statistic (see note_rebuild) */
    int64_t n = atomic_load_explicit(&h->actors.rebuilding, memory_order_relaxed);
    return n > 0 ? (uint64_t)n : 0;
}
