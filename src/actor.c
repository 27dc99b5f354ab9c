/*
 * actor.c - actors on lock-free priority mailboxes.
 *
 * An actor has three intrusive MPSC mailboxes (ds/mpsc.h), one per priority
 * lane, and a `scheduled` flag. A call is a task record (task.c) with the
 * method index in it: hive_call pushes it on its lane (one exchange), then
 * exchanges `scheduled` to 1; the one caller that found it 0 spawns the
 * actor's turn job on the scheduler, on the actor's home NUMA node.
 *
 * A turn runs on one worker: the constructor first if it has not run, then
 * up to ACTOR_BATCH calls, always taking HIGH before NORMAL before LOW (so a
 * HIGH call overtakes every queued lower call, and runs right after the
 * method running now). Then it clears `scheduled` and looks at the mailbox
 * heads again: if anything arrived (or the actor was killed meanwhile) and
 * it wins `scheduled` back, it spawns another turn. Pusher and turn form a
 * store-load handshake, all seq_cst: "push, then exchange scheduled" against
 * "store scheduled = 0, then read the heads": either the pusher sees 0 and
 * schedules, or the turn sees the push. So exactly one turn exists at a
 * time (methods never overlap), and no call is left behind.
 *
 * One caller's calls at one priority keep their order: the MPSC queue is
 * FIFO per producer, and a turn takes them in queue order. Ref arguments
 * still pending when their call comes up are waited for in place (the
 * actor waits, its order is kept; the worker runs other work meanwhile).
 *
 * Failure: a nonzero return fails the call with HIVE_ETASK; HIVE_RESTART
 * also rebuilds the actor (fini, zero-fill, init with the original
 * arguments) up to max_restarts times, then the actor dies. Death (kill,
 * failed constructor, no restarts left) fails queued and later calls with
 * HIVE_EDEAD and runs fini once. Records live until shutdown, so a handle
 * to a dead actor still says HIVE_EDEAD rather than HIVE_ENOENT.
 */
#include "actor.h"
#include "arena.h"
#include "hive_impl.h"
#include "task.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

#define ACTOR_BATCH 100                  /* calls per turn before others get the worker (Pony: 100) */

typedef struct hive__actor {
    hive__job_t         turn;
    hive__mpsc_t        lane[HIVE_NPRIO];
    HIVE_ALIGNED _Atomic uint32_t scheduled;
    _Atomic uint32_t    dead;
    /* owned by the running turn (one at a time) */
    HIVE_ALIGNED bool   initialized;
    bool                finalized;
    unsigned            restarts;
    unsigned            max_restarts;
    hive_actor_class_t  cls;
    void               *state;
    hive__task_t       *ctor;            /* constructor arguments, kept for restarts */
    hive__obj_t        *handle;
    unsigned            node;
    char               *name;
    struct hive        *h;
    struct hive__actor *next;
} hive__actor_t;

void hive__actors_init(hive__actors_t *r)
{
    pthread_mutex_init(&r->lock, NULL);
    r->all = NULL;
}

/* Schedule a turn unless one is scheduled. seq_cst: the pusher's half of
 * the handshake (the push's exchange came first). */
static void kick(hive__actor_t *a, unsigned lane)
{
    if (atomic_exchange_explicit(&a->scheduled, 1, memory_order_seq_cst) == 0)
        hive__sched_spawn(&a->h->sched, &a->turn, lane, (int)a->node);
}

/* Which lanes still hold calls the turn has not taken (consumer only, so
 * read while the turn still owns the actor): a tail off the stub. This
 * catches what the heads alone cannot, a call whose producer had exchanged
 * the head but not yet linked it when pop pushed the stub behind it
 * (chain: tail -> X -> stub with head == stub). */
static unsigned lanes_unfinished(hive__actor_t *a)
{
    unsigned mask = 0;
    for (unsigned l = 0; l < HIVE_NPRIO; l++)
        if (a->lane[l].tail != &a->lane[l].stub)
            mask |= 1u << l;
    return mask;
}

/* May any mailbox hold a call (-1: none, else its most urgent lane)? After
 * the turn gave up the actor it reads only the producers' ends (heads),
 * plus what lanes_unfinished saw before: head off the stub means a push
 * since the last stub re-push. */
static int mail_pending(hive__actor_t *a, unsigned unfinished)
{
    for (unsigned l = 0; l < HIVE_NPRIO; l++) {
        uintptr_t head = atomic_load_explicit(&a->lane[l].head, memory_order_seq_cst);
        if ((unfinished & (1u << l)) || (head & ~HIVE__MPSC_MARK) != (uintptr_t)&a->lane[l].stub)
            return (int)l;                  /* the most urgent lane with mail */
    }
    return -1;
}

/* Consumer only: the next call, HIGH before NORMAL before LOW. */
static hive__task_t *next_call(hive__actor_t *a)
{
    for (unsigned l = 0; l < HIVE_NPRIO; l++) {
        hive__mpsc_node_t *n = hive__mpsc_pop(&a->lane[l]);
        if (n != NULL)
            return HIVE_CONTAINER_OF(n, hive__task_t, job.node);
    }
    return NULL;
}

static void fail_queued(hive__actor_t *a, int code)
{
    hive__task_t *t;
    while ((t = next_call(a)) != NULL)
        hive__task_fail_unrun(t, code);
}

/* Wait for a record's pending ref arguments; false if one failed. */
static bool args_ready(struct hive *h, hive__task_t *t, const char *fn)
{
    for (size_t i = 0; i < t->nargs; i++) {
        hive__obj_t *o = t->args[i].obj;
        if (o == NULL)
            continue;
        hive__obj_wait(h, o, HIVE_FOREVER, fn);
        if (hive__obj_state(o) == HIVE__FAILED)
            return false;
    }
    return true;
}

static void finalize(hive__actor_t *a)
{
    if (a->initialized && !a->finalized && a->cls.fini != NULL)
        a->cls.fini(a->state);
    a->finalized = true;
}

static void die(hive__actor_t *a)
{
    /* release: callers that see dead also see why (nothing else to publish) */
    atomic_store_explicit(&a->dead, 1, memory_order_release);
    finalize(a);
}

static void construct(hive__actor_t *a, hive__worker_t *w)
{
    struct hive *h = a->h;
    a->initialized = true;
    a->finalized = false;
    if (!args_ready(h, a->ctor, "hive_actor_new")) {
        a->finalized = true;             /* nothing was built: no fini */
        die(a);
        return;
    }
    int rc = 0;
    if (a->cls.init != NULL) {
        struct hive_ctx ctx = { .h = h, .w = w, .task = a->ctor, .result = NULL, .depth = w->depth,
                                .seq = ++w->task_seq };
        rc = a->cls.init(a->state, &ctx);
    }
    if (rc != 0) {
        a->finalized = true;             /* a failed constructor gets no fini */
        die(a);
    }
}

static void restart(hive__actor_t *a, hive__worker_t *w)
{
    /* acquire: a kill that landed while the method ran wins over the restart */
    if (atomic_load_explicit(&a->dead, memory_order_acquire))
        return;
    if (a->restarts >= a->max_restarts) {
        die(a);
        return;
    }
    a->restarts++;
    finalize(a);
    if (a->cls.size)
        memset(a->state, 0, a->cls.size);
    construct(a, w);
}

static void run_call(hive__actor_t *a, hive__task_t *t, hive__worker_t *w)
{
    struct hive *h = a->h;
    if (!args_ready(h, t, "hive_call")) {
        hive__task_fail_unrun(t, HIVE_ETASK);
        return;
    }
    if (!hive__task_claim(t)) {          /* cancelled while queued: already failed */
        hive__task_cleanup(t);
        return;
    }
    struct hive_ctx ctx = { .h = h, .w = w, .task = t, .result = t->result, .depth = w->depth,
                            .seq = ++w->task_seq };
    int rc = a->cls.methods[t->method].fn(a->state, &ctx);
    hive__task_finish(t, rc == 0 ? HIVE_OK : HIVE_ETASK);
    hive__task_cleanup(t);
    if (rc == HIVE_RESTART)
        restart(a, w);
}

static void turn(hive__job_t *job, hive__worker_t *w)
{
    hive__actor_t *a = HIVE_CONTAINER_OF(job, hive__actor_t, turn);
    if (w == NULL) {                     /* dropped at shutdown */
        fail_queued(a, HIVE_ESHUTDOWN);
        return;
    }
    /* acquire: pairs with kill's and die's stores */
    if (!a->initialized && !atomic_load_explicit(&a->dead, memory_order_acquire))
        construct(a, w);
    for (int n = 0; n < ACTOR_BATCH; n++) {
        /* stopping: queued calls never run; this turn ends and the next one
         * is dropped by the scheduler, failing them with HIVE_ESHUTDOWN */
        if (atomic_load_explicit(&w->sched->stopping, memory_order_acquire))
            break;
        hive__task_t *t = next_call(a);
        if (t == NULL)
            break;
        if (atomic_load_explicit(&a->dead, memory_order_acquire))
            hive__task_fail_unrun(t, HIVE_EDEAD);
        else
            run_call(a, t, w);
    }
    if (atomic_load_explicit(&a->dead, memory_order_acquire)) {
        fail_queued(a, HIVE_EDEAD);
        finalize(a);
    }
    /* read before giving the actor up: once scheduled is 0 another turn may
     * own these fields */
    bool finalized = a->finalized;
    unsigned unfinished = lanes_unfinished(a);
    /* seq_cst store, then seq_cst reads of the heads and of dead: the turn's
     * half of the handshake (see top) */
    atomic_store_explicit(&a->scheduled, 0, memory_order_seq_cst);
    int lane = mail_pending(a, unfinished);
    if (lane < 0 && atomic_load_explicit(&a->dead, memory_order_seq_cst) && !finalized)
        lane = 0;
    if (lane >= 0)
        kick(a, (unsigned)lane);
}

/* ------------------------------------------------------------ API */

static int find_actor(hive_t *h, hive_actor_t actor, const char *fn, hive__actor_t **out)
{
    if (h == NULL)
        return hive__fail(HIVE_EINVAL, "%s: engine is NULL", fn);
    hive__obj_t *o = hive__obj_find(h, (hive_ref_t){ actor.id }, fn);
    if (o == NULL || o->kind != HIVE__ACTOR)
        return o == NULL ? hive__fail(HIVE_ENOENT, "%s: actor %llu does not exist", fn,
                                      (unsigned long long)actor.id)
                         : hive__fail(HIVE_ENOENT, "%s: actor %llu does not exist: object %llu is "
                                      "%s, not an actor", fn, (unsigned long long)actor.id,
                                      (unsigned long long)actor.id, hive__kind_name(o->kind));
    *out = o->u.actor.actor;
    return HIVE_OK;
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

static hive__actor_t *by_name(hive__actors_t *r, const char *name)
{
    for (hive__actor_t *a = r->all; a != NULL; a = a->next)
        if (a->name != NULL && strcmp(a->name, name) == 0)
            return a;
    return NULL;
}

static void free_actor(hive__actor_t *a)
{
    if (a->state != NULL)
        hive__arena_free(&a->h->arena, a->state, a->cls.size);
    if (a->ctor != NULL)
        hive__task_cleanup(a->ctor);
    free(a->name);
    free(a);
}

int hive_actor_new(hive_t *h, const hive_actor_class_t *cls, const hive_arg_t *args, size_t nargs,
                   const hive_actor_opts_t *opts, hive_actor_t *out)
{
    if (h == NULL || cls == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_actor_new: %s is NULL",
                          h == NULL ? "engine" : cls == NULL ? "class" : "out");
    int rc = check_class(cls);
    if (rc != HIVE_OK)
        return rc;
    if (atomic_load_explicit(&h->sched.stopping, memory_order_relaxed))
        return hive__fail(HIVE_ESHUTDOWN, "hive_actor_new: the engine is shutting down");
    hive__actor_t *a;
    if (posix_memalign((void **)&a, HIVE_PAD, sizeof *a) != 0)
        return hive__fail(HIVE_ENOMEM, "hive_actor_new: cannot allocate an actor record");
    memset(a, 0, sizeof *a);
    a->h = h;
    a->cls = *cls;
    a->max_restarts = opts ? opts->max_restarts : 0;
    a->node = hive__current_node(h);
    a->turn.fn = turn;
    for (unsigned l = 0; l < HIVE_NPRIO; l++)
        hive__mpsc_init(&a->lane[l], false);
    atomic_init(&a->scheduled, 0);
    atomic_init(&a->dead, 0);
    if (opts != NULL && opts->name != NULL && (a->name = strdup(opts->name)) == NULL) {
        free(a);
        return hive__fail(HIVE_ENOMEM, "hive_actor_new: cannot copy the name");
    }
    if ((rc = hive__task_new(h, args, nargs, false, "hive_actor_new", &a->ctor)) != HIVE_OK) {
        free_actor(a);
        return rc;
    }
    if (cls->size != 0) {
        a->state = hive__arena_alloc(&h->arena, cls->size, a->node, &rc);
        if (a->state == NULL) {
            free_actor(a);
            return rc;
        }
        memset(a->state, 0, cls->size);
    }
    if ((rc = hive__obj_new(h, HIVE__ACTOR, 0, false, &a->handle)) != HIVE_OK) {
        free_actor(a);
        return rc;
    }
    a->handle->u.actor.actor = a;
    atomic_store_explicit(&a->handle->state, HIVE__SEALED, memory_order_relaxed);
    atomic_store_explicit(&a->handle->deps, HIVE__DEPS_CLOSED, memory_order_relaxed);

    hive__actors_t *r = &h->actors;
    pthread_mutex_lock(&r->lock);
    if (a->name != NULL && by_name(r, a->name) != NULL) {
        pthread_mutex_unlock(&r->lock);
        hive__fail(HIVE_EINVAL, "hive_actor_new: the name \"%s\" is taken", a->name);
        hive__obj_discard(h, a->handle);
        free_actor(a);
        return HIVE_EINVAL;
    }
    hive__obj_publish(h, a->handle);     /* findable from now on (release) */
    a->next = r->all;
    r->all = a;
    pthread_mutex_unlock(&r->lock);
    out->id = a->handle->id;
    kick(a, 1);                          /* the constructor's turn */
    return HIVE_OK;
}

int hive_call(hive_t *h, hive_actor_t actor, unsigned method, const hive_arg_t *args, size_t nargs,
              const hive_opts_t *opts, hive_ref_t *result)
{
    hive__actor_t *a;
    if (result == NULL)
        return hive__fail(HIVE_EINVAL, "hive_call: result is NULL");
    int rc = find_actor(h, actor, "hive_call", &a);
    if (unlikely(rc != HIVE_OK))
        return rc;
    if (unlikely(method >= a->cls.nmethods))
        return hive__fail(HIVE_EINVAL, "hive_call: method %u out of range, class %s has %zu", method,
                          a->cls.name ? a->cls.name : "(unnamed)", a->cls.nmethods);
    if (unlikely(atomic_load_explicit(&a->dead, memory_order_acquire)))
        return hive__fail(HIVE_EDEAD, "hive_call: actor %llu is dead (killed, constructor failed, "
                          "or out of its %u restarts)", (unsigned long long)actor.id, a->max_restarts);
    if (unlikely(atomic_load_explicit(&h->sched.stopping, memory_order_relaxed)))
        return hive__fail(HIVE_ESHUTDOWN, "hive_call: the engine is shutting down");
    hive__task_t *t;
    if ((rc = hive__task_new(h, args, nargs, true, "hive_call", &t)) != HIVE_OK)
        return rc;
    t->actor = a;
    t->method = method;
    t->lane = hive__prio_lane(opts ? opts->priority : a->cls.methods[method].priority);
    result->id = t->result->id;
    unsigned lane = t->lane;             /* t belongs to the actor once pushed */
    hive__mpsc_push(&a->lane[lane], &t->job.node);
    kick(a, lane);
    return HIVE_OK;
}

int hive_actor_kill(hive_t *h, hive_actor_t actor)
{
    hive__actor_t *a;
    int rc = find_actor(h, actor, "hive_actor_kill", &a);
    if (rc != HIVE_OK)
        return rc;
    /* seq_cst: ordered before kick's exchange, against the turn's final
     * "scheduled = 0, then read dead" */
    if (atomic_exchange_explicit(&a->dead, 1, memory_order_seq_cst) != 0)
        return hive__fail(HIVE_EDEAD, "hive_actor_kill: actor %llu is dead already",
                          (unsigned long long)actor.id);
    kick(a, 0);                          /* a turn fails what is queued and runs fini */
    return HIVE_OK;
}

int hive_actor_lookup(hive_t *h, const char *name, hive_actor_t *out)
{
    if (h == NULL || name == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_actor_lookup: %s is NULL",
                          h == NULL ? "engine" : name == NULL ? "name" : "out");
    pthread_mutex_lock(&h->actors.lock);
    hive__actor_t *a = by_name(&h->actors, name);
    uint64_t id = a ? a->handle->id : 0;
    pthread_mutex_unlock(&h->actors.lock);
    if (a == NULL)
        return hive__fail(HIVE_ENOENT, "hive_actor_lookup: no actor is named \"%s\"", name);
    out->id = id;
    return HIVE_OK;
}

void hive__actors_shutdown(struct hive *h)
{
    hive__actors_t *r = &h->actors;
    pthread_mutex_lock(&r->lock);
    hive__actor_t *a = r->all;
    r->all = NULL;
    pthread_mutex_unlock(&r->lock);
    while (a != NULL) {
        hive__actor_t *next = a->next;
        fail_queued(a, HIVE_ESHUTDOWN);  /* no worker runs: we are the only consumer */
        finalize(a);
        free_actor(a);
        a = next;
    }
    pthread_mutex_destroy(&r->lock);
}
