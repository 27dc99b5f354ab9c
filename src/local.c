/*
 * local.c - worker-local values: one per worker (and nesting depth) for
 * tasks, one per user thread for hive_local_thread.
 *
 * Keys are indices into the engine's table of definitions, which only grows
 * (under a mutex, in hive_local_new) and whose filled entries never change,
 * so hive_local reads it with one acquire load of the count and no lock.
 * A key's id carries the engine's serial above the index, so a key made by
 * another engine is refused instead of naming one of this engine's keys.
 *
 * Each worker keeps, per nesting depth, an array of {value, seq}: seq is the
 * number of the task run that last used the value on that worker. A call
 * from a task with another number first resets the value (reinit, or fini +
 * init), so each task sees a fresh value and repeated calls in one task see
 * the same one. The arrays grow on first use of a key or depth (a slow
 * path), never on later calls.
 */
#include "local.h"
#include "hive_impl.h"
#include "task.h"
#include "util/error.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>
#include "util/clock.h"

typedef struct lslot {
    void    *value;
    uint64_t seq;
    bool     live;
} lslot_t;

typedef struct level {
    uint32_t cap;
    lslot_t *slots;
} level_t;

typedef struct wlocals {
    unsigned depths;
    level_t *level;
} wlocals_t;

void hive__locals_init(hive__locals_t *l)
{
    static _Atomic uint32_t serials;
    pthread_mutex_init(&l->lock, NULL);
    atomic_init(&l->n, 0);
    /* relaxed: only distinctness matters. 1 .. 2^22-1: {0} is never a key;
     * the serials wrap after four million engines */
    l->serial = atomic_fetch_add_explicit(&serials, 1, memory_order_relaxed) % HIVE__LOCAL_SERIALS + 1;
    l->threads = NULL;
}

static inline uint32_t key_index(hive_local_t key)
{
    return key.id & ((1u << HIVE__LOCAL_INDEX_BITS) - 1);
}

/* The index of key in l, or -1 (and the sentence) if l never made it. */
static int64_t key_check(hive__locals_t *l, hive_local_t key, const char *fn)
{
    if (key.id >> HIVE__LOCAL_INDEX_BITS != l->serial)
        return hive__fail(HIVE_ENOENT, "%s: key %u was made by another engine (its serial %u, this "
                          "engine's %u)", fn, key.id, key.id >> HIVE__LOCAL_INDEX_BITS, l->serial),
               -1;
    /* acquire: pairs with hive_local_new's release of the count */
    uint32_t n = atomic_load_explicit(&l->n, memory_order_acquire);
    if (key_index(key) >= n)
        return hive__fail(HIVE_ENOENT, "%s: key %u (index %u) was never made (%u keys)", fn, key.id,
                          key_index(key), n), -1;
    return key_index(key);
}

void hive__locals_destroy(hive__locals_t *l)
{
    pthread_mutex_destroy(&l->lock);
}

void hive_local_keep(void *value, void *arg)
{
    (void)value;
    (void)arg;
}

/* ------------------------------------------------------------------ eager
 * An eager key is built on every worker at once: a job in each worker's
 * inbox (which a worker takes before any other work) builds the depth-0
 * value and marks it fresh (seq 0: no task has used it, so the first task
 * takes it as it is instead of resetting it). From a user thread,
 * hive_local_new waits for the jobs; from a task it cannot (the jobs may
 * need this very worker) and returns at once. */
typedef struct eager_job {
    hive__job_t       job;
    struct eager     *e;
} eager_job_t;

typedef struct eager {
    struct hive      *h;
    uint32_t          index;
    _Atomic uint32_t  pending;      /* jobs not done yet */
    _Atomic uint32_t  holders;      /* jobs + the creator: the last one frees */
    eager_job_t       jobs[];
} eager_t;

static lslot_t *slot_of(hive__worker_t *w, unsigned depth, uint32_t key);

static void eager_drop(eager_t *e)
{
    /* acq_rel: the last holder sees every other's use before it frees */
    if (atomic_fetch_sub_explicit(&e->holders, 1, memory_order_acq_rel) == 1)
        free(e);
}

static void eager_build(hive__job_t *job, hive__worker_t *w)
{
    eager_t *e = HIVE_CONTAINER_OF(job, eager_job_t, job)->e;
    if (w != NULL) {                        /* NULL: dropped at shutdown */
        const hive_local_def_t *def = &e->h->locals.defs[e->index];
        lslot_t *s = slot_of(w, 0, e->index);
        if (s != NULL && !s->live && (s->value = def->init(def->arg)) != NULL) {
            s->live = true;
            s->seq = 0;
        }
    }
    /* release: the creator's acquire sees the values built */
    atomic_fetch_sub_explicit(&e->pending, 1, memory_order_release);
    eager_drop(e);
}

static void build_everywhere(struct hive *h, uint32_t index)
{
    unsigned n = h->nworkers;
    eager_t *e = hive__malloc(sizeof *e + n * sizeof e->jobs[0]);   /* n <= 4096 */
    /* relaxed: a hint (hive_local_new may not race a shutdown); posts made
     * after the stop began are still handed back with w == NULL */
    if (e == NULL || atomic_load_explicit(&h->sched.stopping, memory_order_relaxed)) {
        free(e);                            /* the values are built lazily instead */
        return;
    }
    e->h = h;
    e->index = index;
    atomic_init(&e->pending, n);
    atomic_init(&e->holders, n + 1);
    for (unsigned i = 0; i < n; i++) {
        e->jobs[i].e = e;
        e->jobs[i].job.fn = eager_build;
        hive__sched_post(&h->sched, i, &e->jobs[i].job);
    }
    if (hive__self_in(&h->sched) == NULL)
        /* acquire: pairs with eager_build's release (a slow path: naps) */
        while (atomic_load_explicit(&e->pending, memory_order_acquire) != 0)
            hive__sleep_ns(20000);
    eager_drop(e);
}

int hive_local_new(hive_t *h, const hive_local_def_t *def, hive_local_t *out)
{
    if (h == NULL || def == NULL || out == NULL || def->init == NULL)
        return hive__fail(HIVE_EINVAL, "hive_local_new: %s is NULL",
                          h == NULL ? "engine" : def == NULL ? "def" : out == NULL ? "out" : "def->init");
    hive__locals_t *l = &h->locals;
    pthread_mutex_lock(&l->lock);
    uint32_t n = atomic_load_explicit(&l->n, memory_order_relaxed);
    if (n >= HIVE_MAX_LOCALS) {
        pthread_mutex_unlock(&l->lock);
        return hive__fail(HIVE_ENOMEM, "hive_local_new: all %d keys are in use", HIVE_MAX_LOCALS);
    }
    l->defs[n] = *def;
    /* release: the definition is complete before any reader sees the key */
    atomic_store_explicit(&l->n, n + 1, memory_order_release);
    pthread_mutex_unlock(&l->lock);
    if (def->eager)
        build_everywhere(h, n);
    out->id = l->serial << HIVE__LOCAL_INDEX_BITS | n;
    return HIVE_OK;
}

/* The slot for (depth, key) on w, growing the tables if needed. */
static lslot_t *slot_of(hive__worker_t *w, unsigned depth, uint32_t key)
{
    wlocals_t *wl = w->locals;
    if (wl == NULL) {
        if ((wl = hive__calloc(1, sizeof *wl)) == NULL)
            return NULL;
        w->locals = wl;
    }
    if (depth >= wl->depths) {
        unsigned nd = depth + 1;
        level_t *lv = hive__realloc(wl->level, nd * sizeof *lv);
        if (lv == NULL)
            return NULL;
        memset(lv + wl->depths, 0, (nd - wl->depths) * sizeof *lv);
        wl->level = lv;
        wl->depths = nd;
    }
    level_t *lv = &wl->level[depth];
    if (key >= lv->cap) {
        uint32_t cap = lv->cap ? lv->cap : 8;
        while (cap <= key)
            cap *= 2;
        lslot_t *s = hive__realloc(lv->slots, cap * sizeof *s);
        if (s == NULL)
            return NULL;
        memset(s + lv->cap, 0, (cap - lv->cap) * sizeof *s);
        lv->slots = s;
        lv->cap = cap;
    }
    return &lv->slots[key];
}

void *hive_local(hive_ctx_t *ctx, hive_local_t key)
{
    if (ctx == NULL || ctx->w == NULL) {
        hive__fail(HIVE_EINVAL, "hive_local: not inside a task");
        return NULL;
    }
    hive__locals_t *l = &ctx->h->locals;
    int64_t idx = key_check(l, key, "hive_local");
    if (idx < 0)
        return NULL;
    const hive_local_def_t *def = &l->defs[idx];
    lslot_t *s = slot_of(ctx->w, ctx->depth, (uint32_t)idx);
    if (s == NULL) {
        hive__fail(HIVE_ENOMEM, "hive_local: cannot grow worker %u's table for key %u",
                   ctx->w->index, key.id);
        return NULL;
    }
    if (s->live && s->seq != ctx->seq && s->seq != 0) {   /* seq 0: built eagerly, unused */
        if (def->reinit != NULL) {
            def->reinit(s->value, def->arg);
        } else {
            if (def->fini != NULL)
                def->fini(s->value, def->arg);
            s->live = false;
        }
    }
    if (!s->live) {
        s->value = def->init(def->arg);
        if (s->value == NULL) {
            hive__fail(HIVE_ENOMEM, "hive_local: init of key %u returned NULL on worker %u",
                       key.id, ctx->w->index);
            return NULL;
        }
        s->live = true;
    }
    s->seq = ctx->seq;
    return s->value;
}

void hive__local_worker_exit(hive__worker_t *w)
{
    wlocals_t *wl = w->locals;
    if (wl == NULL)
        return;
    hive__locals_t *l = &w->sched->h->locals;
    for (unsigned d = 0; d < wl->depths; d++) {
        level_t *lv = &wl->level[d];
        for (uint32_t k = 0; k < lv->cap; k++)
            if (lv->slots[k].live && l->defs[k].fini != NULL)
                l->defs[k].fini(lv->slots[k].value, l->defs[k].arg);
        free(lv->slots);
    }
    free(wl->level);
    free(wl);
    w->locals = NULL;
}

/* ------------------------------------------------------------------ threads
 * hive_local_thread: a user thread's own values. Why this shape:
 *   - the seed builds its environment on the driver as well as on every
 *     worker; the driver is a user thread with no task around it, so its
 *     value has no task boundary to be reset at: it is built on first use
 *     and kept as it is (reinit never runs) - the driver resets it itself
 *     if it wants to;
 *   - the value must go when either side goes first: at the thread's exit
 *     (a pthread key destructor, on that thread) or at hive_shutdown (on
 *     the thread that shuts down, after every worker has stopped);
 *   - the fast path (second and later calls) takes no lock: the thread's
 *     own list of records, one per engine it used, is thread-local, and
 *     only the thread grows its record's slots.
 * One process-wide mutex guards the links between engines and records and
 * every slot change (slow paths only: a first use, a thread's exit, a
 * shutdown), so that the side that goes first finalises each value once.
 * A record whose engine shut down stays on its thread's list (engine NULL)
 * until the thread next makes a record, or exits. */
typedef struct tslot {
    void  *value;
    void (*fini)(void *value, void *arg);    /* the key's, copied: the record outlives its engine */
    void  *arg;
    bool   live;
} tslot_t;

typedef struct hive__tlocal {
    _Atomic(struct hive *) h;                /* NULL once the engine shut down */
    uint32_t              cap;
    tslot_t              *slots;
    struct hive__tlocal  *next_engine;       /* on h->locals.threads */
    struct hive__tlocal  *next_thread;       /* on the thread's own list */
} tlocal_t;

static pthread_mutex_t tl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t  tl_once = PTHREAD_ONCE_INIT;
static pthread_key_t   tl_key;
static __thread tlocal_t *tl_mine;

static void fini_slots(tslot_t *slots, uint32_t cap)
{
    for (uint32_t k = 0; k < cap; k++)
        if (slots[k].live && slots[k].fini != NULL)
            slots[k].fini(slots[k].value, slots[k].arg);
    free(slots);
}

static void unlink_engine(tlocal_t *r, struct hive *h)
{
    for (tlocal_t **p = &h->locals.threads; *p != NULL; p = &(*p)->next_engine)
        if (*p == r) {
            *p = r->next_engine;
            return;
        }
}

/* The thread exits: take its records off their engines under the lock,
 * then fini the values on this thread, outside it. */
static void thread_exit(void *marker)
{
    (void)marker;
    pthread_mutex_lock(&tl_lock);
    tlocal_t *mine = tl_mine;
    tl_mine = NULL;
    for (tlocal_t *r = mine; r != NULL; r = r->next_thread) {
        struct hive *h = atomic_load_explicit(&r->h, memory_order_relaxed);   /* under the lock */
        if (h != NULL)
            unlink_engine(r, h);
    }
    pthread_mutex_unlock(&tl_lock);
    while (mine != NULL) {
        tlocal_t *next = mine->next_thread;
        fini_slots(mine->slots, mine->cap);    /* NULL, 0 if the engine went first */
        free(mine);
        mine = next;
    }
}

static void tl_key_make(void)
{
    if (pthread_key_create(&tl_key, thread_exit) != 0)
        HIVE_DIE("hive_local_thread: cannot create a thread key");
}

void hive__local_threads_exit(struct hive *h)
{
    pthread_mutex_lock(&tl_lock);
    tlocal_t *r = h->locals.threads;
    h->locals.threads = NULL;
    for (; r != NULL; r = r->next_engine) {
        /* under the lock: a thread exiting now waits, then finds NULL */
        fini_slots(r->slots, r->cap);
        r->slots = NULL;
        r->cap = 0;
        atomic_store_explicit(&r->h, NULL, memory_order_relaxed);   /* the lock orders it */
    }
    pthread_mutex_unlock(&tl_lock);
}

/* This thread's record for h (made on first use), or NULL (and the sentence). */
static tlocal_t *thread_record(struct hive *h)
{
    for (tlocal_t *r = tl_mine; r != NULL; r = r->next_thread)
        /* relaxed: only a shutdown of that engine changes it (to NULL, under
         * the lock), and no call may race its own engine's shutdown */
        if (atomic_load_explicit(&r->h, memory_order_relaxed) == h)
            return r;
    pthread_once(&tl_once, tl_key_make);
    tlocal_t *r = hive__calloc(1, sizeof *r);
    if (r == NULL || pthread_setspecific(tl_key, (void *)1) != 0) {
        free(r);
        hive__fail(HIVE_ENOMEM, "hive_local_thread: cannot make this thread's record");
        return NULL;
    }
    atomic_init(&r->h, h);
    pthread_mutex_lock(&tl_lock);
    for (tlocal_t **p = &tl_mine; *p != NULL;) {      /* drop records of engines gone */
        tlocal_t *dead = *p;
        if (atomic_load_explicit(&dead->h, memory_order_relaxed) == NULL) {   /* under the lock */
            *p = dead->next_thread;
            free(dead);
        } else {
            p = &dead->next_thread;
        }
    }
    r->next_thread = tl_mine;
    tl_mine = r;
    r->next_engine = h->locals.threads;
    h->locals.threads = r;
    pthread_mutex_unlock(&tl_lock);
    return r;
}

/* Build key idx's value into r (the slow path, under the lock for the slot
 * table: a shutdown may read it). */
static void *thread_build(tlocal_t *r, const hive_local_def_t *def, uint32_t idx, hive_local_t key)
{
    void *v = def->init(def->arg);
    if (v == NULL) {
        hive__fail(HIVE_ENOMEM, "hive_local_thread: init of key %u returned NULL", key.id);
        return NULL;
    }
    pthread_mutex_lock(&tl_lock);
    if (idx >= r->cap) {
        uint32_t cap = r->cap ? r->cap : 8;
        while (cap <= idx)
            cap *= 2;                               /* idx < 1024 */
        tslot_t *s = hive__realloc(r->slots, cap * sizeof *s);
        if (s == NULL) {
            pthread_mutex_unlock(&tl_lock);
            if (def->fini != NULL)
                def->fini(v, def->arg);
            hive__fail(HIVE_ENOMEM, "hive_local_thread: cannot grow this thread's table to %u keys", cap);
            return NULL;
        }
        memset(s + r->cap, 0, (cap - r->cap) * sizeof *s);
        r->slots = s;
        r->cap = cap;
    }
    r->slots[idx] = (tslot_t){ .value = v, .fini = def->fini, .arg = def->arg, .live = true };
    pthread_mutex_unlock(&tl_lock);
    return v;
}

void *hive_local_thread(hive_t *h, hive_local_t key)
{
    if (h == NULL) {
        hive__fail(HIVE_EINVAL, "hive_local_thread: engine is NULL");
        return NULL;
    }
    hive__worker_t *w = hive__self_in(&h->sched);
    if (w != NULL) {
        hive__fail(HIVE_ESTATE, "hive_local_thread: called on worker %u of this engine; inside a "
                   "task use hive_local(ctx, key)", w->index);
        return NULL;
    }
    int64_t idx = key_check(&h->locals, key, "hive_local_thread");
    if (idx < 0)
        return NULL;
    tlocal_t *r = thread_record(h);
    if (r == NULL)
        return NULL;
    if ((uint32_t)idx < r->cap && r->slots[idx].live)
        return r->slots[idx].value;
    return thread_build(r, &h->locals.defs[idx], (uint32_t)idx, key);
}
