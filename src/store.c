/*
 * store.c - the object store: ids, the record table, states, counts,
 * waiting; and the public blob functions (put, create, seal, get, retain,
 * release, wait, stats). See store.h for the life of a record.
 */
#include "store.h"
#include "arena.h"
#include "hive_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/park.h"
#include "util/fault.h"
#include "util/hugemap.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

/* ------------------------------------------------------------------ ids
 * An id names a slot of the store's table (handles.h): the slot, its
 * generation and the engine's tag. Each engine takes the next serial for
 * its tag, so ids of another live engine name no slot here (unless 4096
 * engines were opened in between). */
static _Atomic uint32_t store_serials;

/* ------------------------------------------------------------------ node
 * The NUMA node a thread's new objects go to: a worker's own node; for a
 * user thread, the node of the CPU it ran on when it first used this
 * engine (cached per thread). */
static __thread const struct hive *node_cache_h;
static __thread unsigned node_cache;

unsigned hive__current_node(struct hive *h)
{
    if (hive__self != NULL && hive__self->sched == &h->sched)
        return hive__self->slot->node;
    if (node_cache_h != h) {
        int cpu = sched_getcpu();
        node_cache = cpu >= 0 ? hive__topo_node_of_pu(&h->topo, cpu) : 0;
        node_cache_h = h;
    }
    return node_cache;
}

/* ------------------------------------------------------------------ shards
 * store.h: a thread's shard is claimed at its first use of any store (the
 * same index in every store) and given up when it exits. shard_gen[i] is
 * even while shard i is free and odd while a live thread owns it; every
 * claim and every exit bumps it, so a look before and after an action
 * tells whether the owner stayed the same throughout. Threads that find
 * no free shard use the shared one, HIVE__SHARDS, for good. */
static _Atomic uint32_t shard_gen[HIVE__SHARDS];
static __thread unsigned my_ix = UINT_MAX;
static pthread_key_t shard_key;
static pthread_once_t shard_once = PTHREAD_ONCE_INIT;

/* The open stores, for the exits (shard_exit), under stores_lock. */
static pthread_mutex_t stores_lock = PTHREAD_MUTEX_INITIALIZER;
static hive__store_t *stores;

/* Give shard sh's reserve back to the arena (anyone: the exchange makes it
 * the caller's). */
static void give_reserve(struct hive *h, hive__shard_t *sh)
{
    /* relaxed: a counter; the exchange alone decides who gives it back */
    if (atomic_load_explicit(&sh->reserve, memory_order_relaxed) != 0)
        hive__arena_unreserve(&h->arena, atomic_exchange_explicit(&sh->reserve, 0, memory_order_relaxed));
}

/* A thread that owned shard ix exits: in every open store, its cache's
 * slots go to the table's shared stack, so none is kept by a thread that
 * is gone; then the shard is free for the next thread. */
static void shard_exit(void *v)
{
    unsigned ix = (unsigned)(uintptr_t)v - 1;
    my_ix = UINT_MAX;                 /* a later use (another destructor) claims again */
    pthread_mutex_lock(&stores_lock);
    /* the local lists first, while they are ours (they are plain) */
    for (hive__store_t *s = stores; s != NULL; s = s->next)
        hive__handles_cache_return_local(&s->table, &s->shards[ix].cache);
    /* seq_cst: release for the lists above (the next owner's claim
     * acquires), and free_cb's seq_cst look after its push to an inbox
     * either sees this (and takes the inbox back itself) or comes before
     * it, so that the take below sees the push */
    atomic_fetch_add_explicit(&shard_gen[ix], 1, memory_order_seq_cst);
    for (hive__store_t *s = stores; s != NULL; s = s->next) {
        hive__handles_cache_return_inbox(&s->table, &s->shards[ix].cache);
        give_reserve(HIVE_CONTAINER_OF(s, struct hive, store), &s->shards[ix]);
    }
    pthread_mutex_unlock(&stores_lock);
}

static void shard_make_key(void)
{
    if (pthread_key_create(&shard_key, shard_exit) != 0)
        HIVE_DIE("pthread_key_create failed");
}

static unsigned claim_shard(void)
{
    pthread_once(&shard_once, shard_make_key);
    for (unsigned i = 0; i < HIVE__SHARDS; i++) {
        /* relaxed: the CAS decides */
        uint32_t g = atomic_load_explicit(&shard_gen[i], memory_order_relaxed);
        /* acquire: pairs with the last owner's exit (its plain writes to
         * the shard's lists and counts before ours) */
        if ((g & 1) == 0 && atomic_compare_exchange_strong_explicit(&shard_gen[i], &g, g + 1,
                                                                   memory_order_acquire,
                                                                   memory_order_relaxed)) {
            /* the value (index + 1, never NULL) makes shard_exit run at exit */
            pthread_setspecific(shard_key, (void *)(uintptr_t)(i + 1));
            return i;
        }
    }
    return HIVE__SHARDS;
}

static inline unsigned my_shard_ix(void)
{
    if (unlikely(my_ix == UINT_MAX))
        my_ix = claim_shard();
    return my_ix;
}

/* Add d to the live-object count of the calling thread's shard: a plain
 * load and store on its own shard, an RMW on the shared one. */
static inline void count_objects(struct hive *h, int64_t d)
{
    unsigned ix = my_shard_ix();
    _Atomic int64_t *c = &h->store.shards[ix].objects;
    /* relaxed: a statistic (hive__store_objects sums the shards) */
    if (likely(ix < HIVE__SHARDS))
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(c, d, memory_order_relaxed);
}

/* A slot for a new record: from the calling thread's cache if it has one. */
static inline int take_slot(struct hive *h, uint64_t *id, void **rec)
{
    unsigned ix = my_shard_ix();
    if (likely(ix < HIVE__SHARDS))
        return hive__handles_take_cached(&h->store.table, &h->store.shards[ix].cache, id, rec);
    return hive__handles_take(&h->store.table, id, rec);
}

/* free_cb: give the linked chain first .. last (n slots) to the cache of
 * shard home, if a thread owns it and it has room; false if not (then the
 * caller gives it to the shared stack). */
static bool give_home(struct hive *h, unsigned home, hive__obj_t *first, hive__obj_t *last, uint32_t n)
{
    if (home >= HIVE__SHARDS)
        return false;
    hive__handles_cache_t *c = &h->store.shards[home].cache;
    /* seq_cst: the look before (and after) the push, against shard_exit */
    uint32_t g = atomic_load_explicit(&shard_gen[home], memory_order_seq_cst);
    if ((g & 1) == 0 || !hive__handles_cache_room(c))
        return false;
    hive__handles_give_cached(&h->store.table, c, first->id, last, n);
    /* The owner left (or left and another came) since the first look: its
     * exit may have taken the inbox before our push. Take the inbox back to
     * the shared stack (slots a new owner would have had go there too). */
    if (unlikely(atomic_load_explicit(&shard_gen[home], memory_order_seq_cst) != g))
        hive__handles_cache_return_inbox(&h->store.table, c);
    return true;
}

bool hive__store_shard_claimed(unsigned i)
{
    /* seq_cst: a test's look at a quiet process */
    return i < HIVE__SHARDS && (atomic_load(&shard_gen[i]) & 1) != 0;
}

unsigned hive__store_thread_shard(void)
{
    return my_shard_ix();
}

static void stores_add(hive__store_t *s)
{
    pthread_mutex_lock(&stores_lock);
    s->prev = NULL;
    s->next = stores;
    if (stores != NULL)
        stores->prev = s;
    stores = s;
    pthread_mutex_unlock(&stores_lock);
}

static void stores_remove(hive__store_t *s)
{
    pthread_mutex_lock(&stores_lock);
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        stores = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    pthread_mutex_unlock(&stores_lock);
}

uint64_t hive__store_objects(struct hive *h)
{
    int64_t n = 0;
    for (unsigned i = 0; i <= HIVE__SHARDS; i++)   /* relaxed: a statistic */
        n += atomic_load_explicit(&h->store.shards[i].objects, memory_order_relaxed);
    /* private records are counted by their owners (hive__obj_new_private),
     * with no read-modify-write; relaxed: a statistic, each a single writer's */
    for (unsigned i = 0; h->sched.w != NULL && i < h->sched.n; i++)
        n += atomic_load_explicit(&h->sched.w[i].pobjects, memory_order_relaxed);
    return n > 0 ? (uint64_t)n : 0;   /* a moment's view may catch a free before its new */
}

/* ------------------------------------------------------------------ records */

static char zero_payload[64] __attribute__((aligned(64)));

/* The arena holds much more memory than live payloads need: a worker
 * purges it (hive__arena_purge), posted as a job like any other. */
static void purge_job(hive__job_t *job, hive__worker_t *w)
{
    hive__store_t *s = HIVE_CONTAINER_OF(job, hive__store_t, purge_job);
    struct hive *h = HIVE_CONTAINER_OF(s, struct hive, store);
    if (w != NULL)
        hive__arena_purge(&h->arena);
    /* release: a later requester sees what this purge gave back */
    atomic_store_explicit(&s->purge_asked, 0, memory_order_release);
}

static void request_purge(void *ctx)
{
    struct hive *h = ctx;
    hive__store_t *s = &h->store;
    /* acquire: pairs with purge_job's release */
    if (atomic_exchange_explicit(&s->purge_asked, 1, memory_order_acquire) != 0)
        return;
    if (atomic_load_explicit(&h->sched.stopping, memory_order_relaxed) || h->sched.n == 0) {
        atomic_store_explicit(&s->purge_asked, 0, memory_order_relaxed);
        return;
    }
    s->purge_job.fn = purge_job;
    hive__sched_post(&h->sched, 0, &s->purge_job);
}

int hive__store_open(hive__store_t *s)
{
    memset(s, 0, sizeof *s);
    hive__rcu_thread();
    /* relaxed: only distinctness matters, which the RMW gives */
    int rc = hive__handles_open(&s->table,
                                atomic_fetch_add_explicit(&store_serials, 1, memory_order_relaxed));
    if (rc != HIVE_OK)
        return rc;
    /* the arena (opened first) asks for purges through the store's job */
    struct hive *h = HIVE_CONTAINER_OF(s, struct hive, store);
    h->arena.ask_ctx = h;
    h->arena.ask_purge = request_purge;
    stores_add(s);
    return HIVE_OK;
}

int hive__store_retag(struct hive *h, uint32_t tag)
{
    /* relaxed: attach runs before any other thread uses an id of h */
    uint32_t n = atomic_load_explicit(&h->store.table.next_slot, memory_order_relaxed);
    if (n != 0)
        return hive__fail(HIVE_ESTATE, "the engine has handed out %u ids already; give it its "
                          "world tag (attach it) before it makes any object", n);
    h->store.table.tag = tag & ((1u << HIVE__TAG_BITS) - 1);
    return HIVE_OK;
}

uint32_t hive__store_tag(const struct hive *h)
{
    return h->store.table.tag;
}

static inline void init_record(struct hive *h, hive__obj_t *o, uint8_t kind, size_t size, void *data,
                               uint16_t owner)
{
    atomic_init(&o->state, HIVE__PENDING);
    atomic_init(&o->refs, 1);
    o->kind = kind;
    o->lent = 0;
    atomic_init(&o->deps, NULL);
    o->size = size;
    o->data = data;
    /* relaxed: read only by a finder that matched the key (acquire) after
     * the publish's release; atomic because a stale finder of an earlier
     * life may read it while it is rewritten (and then fails its CAS) */
    atomic_store_explicit(&o->owner, owner, memory_order_relaxed);
    /* relaxed: a statistic. Actor handles are not store objects: they go
     * with their actor (actor.c). A private record is counted by its owner */
    if (kind != HIVE__ACTOR && owner == 0)
        count_objects(h, 1);
}

/* Add d to w's share of the live-object count: one writer, no RMW. */
static inline void count_private(hive__worker_t *w, int64_t d)
{
    /* relaxed: a statistic (hive__store_objects sums the shares) */
    atomic_store_explicit(&w->pobjects, atomic_load_explicit(&w->pobjects, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

int hive__obj_new(struct hive *h, uint8_t kind, size_t size, bool alloc_payload, hive__obj_t **out)
{
    /* the record is a slot of the table: taking the slot allocates it (its
     * id word set by the take; nobody finds it before the publish) */
    uint64_t id;
    void *rec;
    int rc = take_slot(h, &id, &rec);
    if (unlikely(rc != HIVE_OK))
        return rc;
    hive__obj_t *o = rec;
    void *data = NULL;
    if (alloc_payload) {
        int err;
        data = hive__payload_alloc(h, o, kind, size, hive__current_node(h), &err);
        if (unlikely(data == NULL)) {
            hive__handles_give(&h->store.table, id);   /* never published: no grace period */
            if (err == HIVE_EFULL)          /* relaxed: a statistic */
                atomic_fetch_add_explicit(&h->store.efull, 1, memory_order_relaxed);
            return err;
        }
    }
    init_record(h, o, kind, size, data, 0);
    *out = o;
    return HIVE_OK;
}

int hive__obj_new_private(struct hive *h, hive__worker_t *w, hive__obj_t **out)
{
    _Static_assert(HIVE_MAX_WORKERS < UINT16_MAX, "a worker's index + 1 fits the owner field");
    hive__obj_t *o = w->local;
    if (o != NULL) {                  /* freed by w, never found by anyone else: ours */
        w->local = o->tail.dead.next;
        w->nlocal--;
        hive__handles_renew(&h->store.table, o);
    } else {
        uint64_t id;
        void *rec;
        int rc = take_slot(h, &id, &rec);
        if (unlikely(rc != HIVE_OK))
            return rc;
        o = rec;
    }
    init_record(h, o, HIVE__BLOB, 0, NULL, (uint16_t)(w->index + 1));
    count_private(w, 1);              /* a free by another thread takes it off a shard */
    *out = o;
    return HIVE_OK;
}

void hive__obj_publish_private(struct hive *h, hive__obj_t *o)
{
    (void)h;
    /* the key's release store, as hive__obj_publish */
    hive__handles_publish_private(o);
}

/* Its owner drops a private record's last count and nobody promoted it:
 * free it now into the owner's cache (or give the slot back, if that is
 * full). No other thread holds it or can find it: the key's CAS to 0 was
 * won against every promoter, and the other holders' counts are gone. */
static inline void payload_free(struct hive *h, hive__obj_t *o);
static void free_private(struct hive *h, hive__worker_t *w, hive__obj_t *o)
{
    if (h->store.drop[o->kind] != NULL)
        h->store.drop[o->kind](h, o, false);
    payload_free(h, o);               /* inline here: the fork-join parent's every release */
    count_private(w, -1);
    if (w->nlocal < HIVE__LOCAL_MAX) {
        o->tail.dead.next = w->local;
        w->local = o;
        w->nlocal++;
    } else {
        hive__handles_give(&h->store.table, o->id);
    }
}

_Static_assert(sizeof(hive__obj_t) == HIVE__REC_BYTES, "a record is a slot of the table");
_Static_assert(_Alignof(hive__obj_t) <= 64, "records are 64-byte aligned in the table");
_Static_assert(offsetof(hive__obj_t, id) == HIVE__REC_ID, "the table's id word");
_Static_assert(offsetof(hive__obj_t, hkey) == HIVE__REC_KEY, "the table's key word");
_Static_assert(offsetof(hive__obj_t, tail) == 64, "the inline payload is the second line");

static void flush_all_retired(struct hive *h);
static bool any_retired(struct hive *h);

/* The owner's plain section on its reserve (store.h): a thread changes
 * its own shard's reserve - a charge taken, a charge given back, on every
 * put and release of a small object and every fork-join result - with a
 * plain load and store instead of a CAS, while no full store is taking
 * the reserves back. The handshake with that taker (take_reserves) is an
 * asymmetric Dekker, as the spawn's with a parker (sched.c):
 *   owner:  rbusy = 1; [compiler barrier]; load reclaiming; if 0: plain
 *           load and store of reserve; rbusy = 0 (release)
 *   taker:  reclaiming += 1 (seq_cst); membarrier; load rbusy (acquire),
 *           wait while 1; exchange reserve
 * The membarrier runs a full barrier on the owner's CPU: either the
 * owner's rbusy = 1 is before it (the taker sees 1 and waits for the
 * release, which carries the plain store), or the owner's load of
 * reclaiming is after it and sees the taker (and the owner takes the CAS).
 * Without the asymmetric fence (h->sched.asym off) every change is a CAS.
 * The same handshake guards a private record's owner (own_enter, below):
 * plain_enter / plain_leave are the owner's half, plain_wait_out the
 * other's wait.
 *
 * plain_enter: busy = 1, then the look at the takers' count; true in a
 * plain section (end it with plain_leave), false if a taker is at work. */
static inline bool plain_enter(_Atomic uint32_t *busy, _Atomic uint32_t *takers)
{
    atomic_store_explicit(busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    /* acquire: pairs with a taker's release of its count, so that what it
     * changed is seen by our loads in the section */
    if (likely(atomic_load_explicit(takers, memory_order_acquire) == 0))
        return true;
    atomic_store_explicit(busy, 0, memory_order_release);
    return false;
}

static inline void plain_leave(_Atomic uint32_t *busy)
{
    /* release: the section's plain stores before a taker's acquire of 0 */
    atomic_store_explicit(busy, 0, memory_order_release);
}

/* The taker's wait for an owner's section to end (after its count and the
 * membarrier). acquire: pairs with plain_leave's release (the owner's
 * plain stores are seen by the taker's RMWs after it). */
static void plain_wait_out(_Atomic uint32_t *busy)
{
    for (unsigned spins = 0; atomic_load_explicit(busy, memory_order_acquire); spins++) {
        if (spins < 64)
            hive__cpu_relax();
        else
            sched_yield();            /* the owner was preempted inside its section */
    }
}

/* reserve_enter: true in a plain section on sh's reserve (end it with
 * reserve_leave). */
static inline bool reserve_enter(struct hive *h, hive__shard_t *sh)
{
    return likely(h->sched.asym) && plain_enter(&sh->rbusy, &h->store.reclaiming);
}

static inline void reserve_leave(hive__shard_t *sh)
{
    plain_leave(&sh->rbusy);
}

/* One inline charge from the calling thread's reserve in shard ix; false
 * if the reserve is short (or a full store took it back meanwhile). */
static inline bool take_reserved(struct hive *h, unsigned ix)
{
    hive__shard_t *sh = &h->store.shards[ix];
    _Atomic size_t *r = &sh->reserve;
    size_t unit = hive__arena_inline_charge();
    if (likely(reserve_enter(h, sh))) {
        /* relaxed: only we write reserve now (see reserve_enter) */
        size_t v = atomic_load_explicit(r, memory_order_relaxed);
        bool ok = likely(v >= unit);
        if (ok)
            atomic_store_explicit(r, v - unit, memory_order_relaxed);
        reserve_leave(sh);
        return ok;
    }
    /* relaxed: a counter; the CAS (on this thread's own line) decides
     * against a full store taking the reserve back */
    size_t v = atomic_load_explicit(r, memory_order_relaxed);
    return likely(v >= unit) &&
           atomic_compare_exchange_strong_explicit(r, &v, v - unit, memory_order_relaxed,
                                                   memory_order_relaxed);
}

/* Charge an inline payload of size bytes: from the calling thread's
 * reserve (store.h), refilled HIVE__RESERVE_BATCH charges at a time while
 * they fit; else one charge, exactly, with the sentence if it does not. */

static bool charge_inline(struct hive *h, size_t size, int *err)
{
    unsigned ix = my_shard_ix();
    if (likely(ix < HIVE__SHARDS)) {
        _Atomic size_t *r = &h->store.shards[ix].reserve;
        size_t unit = hive__arena_inline_charge();
        if (take_reserved(h, ix))
            return true;
        if (hive__arena_reserve(&h->arena, unit * HIVE__RESERVE_BATCH)) {
            atomic_fetch_add_explicit(r, unit * (HIVE__RESERVE_BATCH - 1), memory_order_relaxed);
            return true;
        }
    }
    return hive__arena_charge_elsewhere(&h->arena, size, err);
}

/* An inline payload freed by this thread: its charge joins the thread's
 * reserve (its own line: a fork-join's private result, charged and freed
 * on one worker, then writes no engine-wide line), up to twice a batch;
 * beyond that, or if the CAS loses to a full store taking the reserve
 * back, the charge goes back to the arena. */
static void uncharge_inline(struct hive *h)
{
    unsigned ix = my_shard_ix();
    if (likely(ix < HIVE__SHARDS)) {
        hive__shard_t *sh = &h->store.shards[ix];
        _Atomic size_t *r = &sh->reserve;
        size_t unit = hive__arena_inline_charge();
        if (likely(reserve_enter(h, sh))) {
            /* relaxed: only we write reserve now (see reserve_enter) */
            size_t v = atomic_load_explicit(r, memory_order_relaxed);
            bool kept = likely(v < unit * 2 * HIVE__RESERVE_BATCH);
            if (kept)
                atomic_store_explicit(r, v + unit, memory_order_relaxed);
            reserve_leave(sh);
            if (kept)
                return;
        } else {
            /* relaxed: as charge_inline */
            size_t v = atomic_load_explicit(r, memory_order_relaxed);
            if (likely(v < unit * 2 * HIVE__RESERVE_BATCH) &&
                atomic_compare_exchange_strong_explicit(r, &v, v + unit, memory_order_relaxed,
                                                        memory_order_relaxed))
                return;
        }
    }
    hive__arena_uncharge_elsewhere(&h->arena);
}

/* The store is full: give every thread's reserve back; true if any was.
 * The taker's half of reserve_enter's handshake: counted in reclaiming,
 * the membarrier, then each owner's plain section waited out before the
 * exchange. A membarrier that fails (it cannot, once registered) takes
 * nothing: an owner may be inside a plain section unseen. */
static bool take_reserves(struct hive *h)
{
    hive__store_t *s = &h->store;
    bool any = false;
    /* seq_cst: before the membarrier and the loads of rbusy */
    atomic_fetch_add_explicit(&s->reclaiming, 1, memory_order_seq_cst);
    if (!h->sched.asym || hive__sched_membarrier(&h->sched)) {
        for (unsigned i = 0; i < HIVE__SHARDS; i++) {
            plain_wait_out(&s->shards[i].rbusy);   /* its plain store is seen by the exchange */
            /* relaxed: as give_reserve */
            any |= atomic_load_explicit(&s->shards[i].reserve, memory_order_relaxed) != 0;
            give_reserve(h, &s->shards[i]);
        }
    }
    /* release: our exchanges before an owner's acquire of 0 */
    atomic_fetch_sub_explicit(&s->reclaiming, 1, memory_order_release);
    return any;
}

/* Bytes of `used` held in reserves (a moment's view: statistics). */
static size_t reserved(struct hive *h)
{
    size_t n = 0;
    for (unsigned i = 0; i < HIVE__SHARDS; i++)   /* relaxed: a statistic */
        n += atomic_load_explicit(&h->store.shards[i].reserve, memory_order_relaxed);
    return n;
}

size_t hive__store_used(struct hive *h)
{
    /* relaxed: a statistic */
    size_t used = atomic_load_explicit(&h->arena.used, memory_order_relaxed), res = reserved(h);
    return used > res ? used - res : 0;   /* a moment's view may see a reserve before its charge */
}

bool hive__payload_inline_fast(struct hive *h, hive__obj_t *o, size_t size)
{
    unsigned ix = my_shard_ix();
    if (unlikely(ix >= HIVE__SHARDS) || !take_reserved(h, ix))
        return false;
    o->data = o->tail.inl;
    o->size = size;
    return true;
}

static void *payload_try(struct hive *h, void *inl, size_t size, unsigned node, int *err)
{
    if (inl != NULL)
        return charge_inline(h, size, err) ? inl : NULL;
    return hive__arena_alloc(&h->arena, size, node, err);
}

void *hive__payload_alloc(struct hive *h, hive__obj_t *o, uint8_t kind, size_t size,
                          unsigned node, int *err)
{
    void *inl = hive__obj_inline_for(o, kind, size);
    void *data = payload_try(h, inl, size, node, err);
    /* Threads' reserves (store.h) are capacity no payload has yet: a full
     * store takes them all back before it refuses anything. */
    if (unlikely(data == NULL) && *err == HIVE_EFULL && take_reserves(h))
        data = payload_try(h, inl, size, node, err);
    /* Released objects wait for a grace period before their bytes return.
     * Full only counts once nothing more can be freed: while frees are
     * queued, wait for them (slow path: a grace period and the callbacks)
     * and try again. Bounded, because other threads may keep queueing (and
     * taking) forever. With nothing queued it still tries once more: a free
     * that ended between the failed try and the look at the queue (its
     * count drops after its bytes are back) has made room. */
    for (int tries = 0; unlikely(data == NULL) && *err == HIVE_EFULL && tries < 64; tries++) {
        bool queued = atomic_load_explicit(&h->store.callbacks, memory_order_relaxed) != 0 ||
                      any_retired(h);
        if (queued) {
            hive__rcu_thread();
            flush_all_retired(h);     /* workers' batches too */
            hive__rcu_barrier();
        }
        take_reserves(h);
        data = payload_try(h, inl, size, node, err);
        if (!queued)
            break;
    }
    return data;
}

static inline void payload_free(struct hive *h, hive__obj_t *o)
{
    if (o->data == (void *)o->tail.inl)
        uncharge_inline(h);
    else if (o->data != NULL)
        hive__arena_free(&h->arena, o->data, o->size);
    o->data = NULL;
}

void hive__payload_free(struct hive *h, hive__obj_t *o)
{
    payload_free(h, o);
}

/* The record's memory is its slot: giving the slot back is its free, so
 * it comes last (the kind is read before). */
static void free_record(struct hive *h, hive__obj_t *o)
{
    hive__payload_free(h, o);
    bool object = o->kind != HIVE__ACTOR;
    hive__handles_give(&h->store.table, o->id);
    if (object)
        count_objects(h, -1);
}

void hive__obj_discard(struct hive *h, hive__obj_t *o)
{
    free_record(h, o);
}

void hive__obj_publish(struct hive *h, hive__obj_t *o)
{
    (void)h;
    /* the key's release store: every field written so far (and the
     * payload) happens-before anything a finder does after its acquire
     * load of the key */
    hive__handles_publish(o);
}

void hive__obj_unpublish(struct hive *h, hive__obj_t *o)
{
    (void)h;
    hive__handles_unpublish(o);
}

/* ----------------------------------------- private records biased to their owner
 *
 * While a record is private (store.h), nobody but its owner can reach its
 * state word or its key without promoting it first: a thief that runs its
 * task holds the job, not the id, and is not the owner; every other thread
 * comes by the id, through lookup, which promotes. So the owner's own
 * changes - the claim and the finish of a task it runs itself (the join
 * running its newest child) and the key's move to 0 at its last release -
 * need no locked instruction while no promotion is under way: the owner
 * makes them with a plain load and store inside a section marked by its
 * pbusy, and a promoter pays instead, with the handshake of the reserves'
 * plain sections (reserve_enter), an asymmetric Dekker:
 *   owner:    pbusy = 1; [compiler barrier]; load revoking; if 0 and the
 *             key is still private: plain load and store of the state word
 *             (or the key); pbusy = 0 (release)
 *   promoter: revoking += 1 (seq_cst); membarrier; wait while the owner's
 *             pbusy is 1 (acquire); the key's CAS to PUB; revoking -= 1
 *             (release)
 * The membarrier runs a full barrier on the owner's CPU: either the
 * owner's pbusy = 1 is before it (the promoter sees 1 and waits for the
 * release, which carries the plain store: its CASes from then on see it),
 * or the owner's load of revoking is after it and sees the promoter (and
 * the owner takes the CAS). An owner that reads revoking as 0 reads the
 * value a promoter's decrement wrote (acquire: the key's CAS before it is
 * seen, and the owner takes the CAS) or one from before any promotion of
 * this record. A thief's claim and finish, and every change by a
 * non-owner, stay CASes, and the owner never writes plainly a record it
 * does not run: a job has one runner. Without the asymmetric fence
 * (h->sched.asym off) every change is a CAS, as before. The count (refs)
 * stays a CAS for everyone: a dependent task holds a count on its
 * argument without a promotion and drops it wherever it runs. */

/* The owner w's plain section on its private record o: true inside it (end
 * it with own_leave); false if a CAS must do (no asymmetric fence, a
 * promotion under way, or o promoted already). The caller checked that w
 * owns o. */
static inline bool own_enter(struct hive *h, hive__worker_t *w, hive__obj_t *o)
{
    /* plain_enter's acquire of revoking: a promoter's CAS of the key is
     * seen by our load of the key below; relaxed key: only a promoter
     * moves it off the private value, and none can now */
    if (unlikely(!h->sched.asym) || !plain_enter(&w->pbusy, &h->store.revoking))
        return false;
    if (likely(atomic_load_explicit(hive__handles_key(o), memory_order_relaxed) ==
               hive__handles_key_priv(o->id)))
        return true;
    plain_leave(&w->pbusy);
    return false;
}

static inline void own_leave(hive__worker_t *w)
{
    plain_leave(&w->pbusy);
}

/* Is w (a worker of h, or NULL) the owner of o? relaxed: the owner field
 * is written before the record is published and changes only when its
 * slot is reused, under a new key. */
static inline bool owned_by(hive__worker_t *w, const hive__obj_t *o)
{
    return w != NULL && atomic_load_explicit(&o->owner, memory_order_relaxed) == w->index + 1;
}

/* The owner w takes its private record o off the table (the key to 0)
 * when it drops the last count: true if it did, false if a promoter made
 * it public first. Plainly inside own_enter's section; else a CAS that
 * decides against every promoter (relaxed: nothing is published by it,
 * and a promoter that loses reads nothing more of the record; the load
 * first spares a promoted record's release a failing CAS). */
static inline bool own_unkey(struct hive *h, hive__worker_t *w, hive__obj_t *o)
{
    if (own_enter(h, w, o)) {
        /* relaxed: no promoter reaches the key now; a finder that reads 0
         * finds nothing, as after the CAS */
        atomic_store_explicit(hive__handles_key(o), 0, memory_order_relaxed);
        own_leave(w);
        return true;
    }
    uint32_t k = hive__handles_key_priv(o->id);
    return atomic_load_explicit(hive__handles_key(o), memory_order_relaxed) == k &&
           atomic_compare_exchange_strong_explicit(hive__handles_key(o), &k, 0, memory_order_relaxed,
                                                   memory_order_relaxed);
}

/* Wait out worker i's plain section (a promoter's half of own_enter). */
static void wait_plain(struct hive *h, unsigned i)
{
    plain_wait_out(&h->sched.w[i].pbusy);
}

/* Start a promotion: every owner's changes are CASes from now until
 * promote_end; the owner of o (all workers if o is NULL: a walk of the
 * table) has left any plain section it was in. */
static void promote_begin(struct hive *h, const hive__obj_t *o)
{
    /* seq_cst: before the membarrier and the loads of pbusy */
    atomic_fetch_add_explicit(&h->store.revoking, 1, memory_order_seq_cst);
    if (!h->sched.asym)
        return;                       /* no owner takes a plain section */
    if (!hive__sched_membarrier(&h->sched))
        HIVE_DIE("store: the private expedited membarrier failed after its registration");
    unsigned owner = o != NULL ? atomic_load_explicit(&o->owner, memory_order_relaxed) : 0;
    if (owner != 0) {
        /* an owner read from a slot reused meanwhile is a worker we wait
         * for needlessly: the key's CAS then fails anyway */
        if (owner <= h->sched.n)
            wait_plain(h, owner - 1);
    } else {
        for (unsigned i = 0; i < h->sched.n; i++)
            wait_plain(h, i);
    }
}

static void promote_end(struct hive *h)
{
    /* release: the key's CAS before an owner's acquire of 0 */
    atomic_fetch_sub_explicit(&h->store.revoking, 1, memory_order_release);
}

/* Promote the private record o (key k): hive__handles_promote, with the
 * owner's plain sections waited out. */
static bool promote(struct hive *h, hive__obj_t *o, uint32_t k)
{
    promote_begin(h, o);
    bool ok = hive__handles_promote(o, k);
    promote_end(h);
    return ok;
}

void hive__store_each(struct hive *h, void (*fn)(void *rec, void *arg), void *arg)
{
    /* one handshake for the whole walk: the promotions it makes are then
     * plain CASes against owners that take the CAS too */
    promote_begin(h, NULL);
    hive__handles_each(&h->store.table, fn, arg);
    promote_end(h);
}

/* A private record matched (store.h): its owner takes it as it is; anyone
 * else promotes it first (inside a read-side section: the callers of
 * lookup are), or finds nothing if the owner freed it meanwhile. */
static hive__obj_t *lookup_private(struct hive *h, hive__obj_t *o, uint32_t k)
{
    hive__worker_t *w = hive__self;
    /* relaxed: written before the key's release, which our acquire saw */
    if (w != NULL && w->sched == &h->sched &&
        atomic_load_explicit(&o->owner, memory_order_relaxed) == w->index + 1) {
        o->lent = 1;                  /* its pin drop stays a CAS (release_count_by) */
        return o;
    }
    return promote(h, o, k) ? o : NULL;
}

/* The record published under id, or NULL: the slot may hold a newer
 * object (a stale id), or none. The payload's line (an inline payload)
 * is fetched alongside the header's, not after it. */
static hive__obj_t *lookup(struct hive *h, uint64_t id)
{
    void *rec = hive__handles_rec(&h->store.table, id);
    if (unlikely(rec == NULL))
        return NULL;
    __builtin_prefetch((const char *)rec + 64);
    /* acquire: as hive__handles_get */
    uint32_t k = atomic_load_explicit(hive__handles_key(rec), memory_order_acquire);
    if (likely(k == hive__handles_key_of(id)))
        return rec;
    return k == hive__handles_key_priv(id) ? lookup_private(h, rec, k) : NULL;
}

/* The calling worker's own private record under id (store.h), or NULL:
 * the fork-join case of get and release, a spawner reading its child's
 * result. The id's slot decode and one look at the key and the owner, no
 * layer between: the owner takes its own record as it is (lookup_private),
 * and a record a promoter made public since fails the key test and goes
 * the usual way. NULL also for id 0, another engine's or rank's id, and
 * any thread that is not one of this engine's workers (w: the caller's
 * worker of h, or NULL). */
static inline hive__obj_t *own_private(struct hive *h, hive__worker_t *w, uint64_t id)
{
    if (w == NULL || id == 0)
        return NULL;
    hive__obj_t *o = hive__handles_rec(&h->store.table, id);
    /* acquire: as lookup's (pairs with publish_private's release). The
     * owner and the id word are written before that release, and only by
     * this thread while the key stays private (relaxed, plain) */
    if (unlikely(o == NULL) ||
        atomic_load_explicit(hive__handles_key(o), memory_order_acquire) != hive__handles_key_priv(id) ||
        atomic_load_explicit(&o->owner, memory_order_relaxed) != w->index + 1 || o->id != id)
        return NULL;
    return o;
}

bool hive__store_issued(struct hive *h, uint64_t id)
{
    return hive__handles_issued(&h->store.table, id);
}

hive__obj_t *hive__obj_lookup(struct hive *h, uint64_t id)
{
    return lookup(h, id);             /* the key's acquire: pairs with publish's release */
}

hive__obj_t *hive__obj_find(struct hive *h, hive_ref_t ref, const char *fn)
{
    if (unlikely(ref.id == 0)) {
        hive__fail(HIVE_ENOENT, "%s: ref {0} never names an object", fn);
        return NULL;
    }
    const hive__remote_ops_t *r = hive__remote_of(h, ref.id);
    if (unlikely(r != NULL))
        return r->localize(r->ctx, ref);   /* another rank's: this rank's copy */
    hive__rcu_lock();
    hive__obj_t *o = hive__obj_lookup(h, ref.id);
    hive__rcu_unlock();
    if (unlikely(o == NULL))
        hive__fail(HIVE_ENOENT, "%s: object %llu does not exist (never created, or released)",
                   fn, (unsigned long long)ref.id);
    return o;
}

/* Add one count of unit (1: a user's, HIVE__PIN: the engine's). */
static inline bool retain_unit(hive__obj_t *o, int64_t unit)
{
    int64_t n = atomic_load_explicit(&o->refs, memory_order_relaxed);
    do {
        if (n <= 0 || (unit == 1 && (n & HIVE__USERS) == HIVE__USERS))
            return false;
        /* relaxed: taking a count publishes nothing; the caller already
         * reached the object through an acquire (lookup or its own count) */
    } while (!atomic_compare_exchange_weak_explicit(&o->refs, &n, n + unit, memory_order_relaxed,
                                                    memory_order_relaxed));
    return true;
}

bool hive__obj_retain_live(hive__obj_t *o)
{
    return retain_unit(o, 1);
}

bool hive__obj_pin_live(hive__obj_t *o)
{
    return retain_unit(o, HIVE__PIN);
}

static void free_cb(struct rcu_head *head);
static void retire_on(struct hive *h, _Atomic(hive__obj_t *) *list, _Atomic unsigned *n,
                      hive__obj_t *o, unsigned home);

/* Drop one count of unit (1: a user's, HIVE__PIN: a pin). Returns false if
 * the record holds none of that kind to drop. w: the calling thread's
 * worker if it is one of h's, else NULL. */
static void last_count(struct hive *h, hive__worker_t *w, hive__obj_t *o, bool mine);

static bool release_count_by(struct hive *h, hive__worker_t *w, hive__obj_t *o, int64_t unit)
{
    /* relaxed owner: written before the record was published to us (an
     * acquire on the way here), and only by its owner while private */
    uint16_t owner = atomic_load_explicit(&o->owner, memory_order_relaxed);
    bool mine = w != NULL && owner == w->index + 1;
    /* The owner's last count on its private record (a fork-join parent
     * releasing the result its child has finished and let go of): one
     * CAS, the key's, instead of the count's and then the key's. The
     * acquire load of 1 - our own count; the task's drop (acq_rel) is
     * seen with every write it made before - and then a won CAS of the
     * key to 0 mean nobody else can hold or take a count: anyone but the
     * owner reaches the record only through a promotion, which moves the
     * key off the private value first (then our CAS fails and the count
     * drops below as usual), and fails once the key is 0. */
    if (mine && atomic_load_explicit(&o->refs, memory_order_acquire) == unit && own_unkey(h, w, o)) {
        atomic_store_explicit(&o->refs, 0, memory_order_relaxed);   /* ours alone now */
        free_private(h, w, o);
        return true;
    }
    int64_t n;
    /* The owner drops the pin of a child it ran itself (run_small): a
     * plain load and store inside its section (own_enter), unless it ever
     * looked the record up by id (lent): then a count may sit with a
     * dependent that drops it with a CAS on another worker without a
     * promotion. Otherwise every other holder came by the id, through a
     * promotion the section excludes, and a thief that runs a task drops
     * its pin itself (not the owner: a job has one runner). */
    if (mine && unit == HIVE__PIN && !o->lent && own_enter(h, w, o)) {
        /* relaxed: nobody else changes the count now; own_leave's release
         * carries the store to a later promoter */
        n = atomic_load_explicit(&o->refs, memory_order_relaxed);
        bool held = n >= HIVE__PIN;
        if (held)
            atomic_store_explicit(&o->refs, n - HIVE__PIN, memory_order_relaxed);
        own_leave(w);
        if (!held)
            return false;
        if (n == HIVE__PIN)
            last_count(h, w, o, true);
        return true;
    }
    n = atomic_load_explicit(&o->refs, memory_order_relaxed);
    /* the last count writes the second line too (the retire link): both
     * lines are fetched for writing at once, not one after the other */
    if (n == unit)
        hive__prefetchw(&o->tail);
    do {
        /* none of unit's kind left: a user's release finds only pins (an
         * over-release, refused), or the engine's finds no pin (a bug) */
        if (n <= 0 || (unit == 1 ? (n & HIVE__USERS) == 0 : n < HIVE__PIN))
            return false;
        /* acq_rel: the release makes this holder's writes to the object
         * visible to whoever frees it; the acquire (for the last one) makes
         * every other holder's writes visible before we free */
    } while (!atomic_compare_exchange_weak_explicit(&o->refs, &n, n - unit, memory_order_acq_rel,
                                                    memory_order_relaxed));
    if (n == unit)
        last_count(h, w, o, mine);
    return true;
}

/* The last count on o is gone (dropped by the calling thread, w's if it is
 * a worker of h; mine: w owns o): free it. */
static void last_count(struct hive *h, hive__worker_t *w, hive__obj_t *o, bool mine)
{
    /* the owner's own free: own_unkey decides against promoters */
    if (mine && own_unkey(h, w, o)) {
        free_private(h, w, o);
        return;
    }
    hive__handles_unpublish(o);
    o->tail.dead.h = h;           /* the payload is dead: no count is left */
    if (!hive__obj_in_arena(o)) {  /* a record with no arena block: batched */
        unsigned ix = my_shard_ix();
        if (w != NULL && w->sched == &h->sched) {
            retire_on(h, &w->retired, &w->nretired, o, ix);
        } else {
            hive__shard_t *l = &h->store.shards[ix];
            retire_on(h, &l->head, &l->n, o, ix);
        }
    } else {
        atomic_fetch_add_explicit(&h->store.callbacks, 1, memory_order_relaxed);
        o->tail.dead.next = NULL;
        o->tail.dead.last = o;
        o->tail.dead.n = 1;
        o->tail.dead.inl = 0;
        o->tail.dead.objects = o->kind != HIVE__ACTOR;
        o->tail.dead.walk = true;  /* its arena block */
        o->tail.dead.home = (uint8_t)my_shard_ix();
        hive__call_rcu(&o->tail.dead.rcu, free_cb);
    }
}

static inline bool release_count(struct hive *h, hive__obj_t *o, int64_t unit)
{
    return release_count_by(h, hive__self_in(&h->sched), o, unit);
}

void hive__obj_release(struct hive *h, hive__obj_t *o)
{
    if (!release_count(h, o, 1))
        HIVE_DIE("store: internal release of object %llu with no count", (unsigned long long)o->id);
}

void hive__obj_unpin(struct hive *h, hive__obj_t *o)
{
    if (!release_count(h, o, HIVE__PIN))
        HIVE_DIE("store: internal unpin of object %llu with no pin", (unsigned long long)o->id);
}

void hive__obj_unpin_by(struct hive *h, hive__worker_t *w, hive__obj_t *o)
{
    if (!release_count_by(h, w, o, HIVE__PIN))
        HIVE_DIE("store: internal unpin of object %llu with no pin", (unsigned long long)o->id);
}

void hive__ref_pin(struct hive *h, hive_ref_t ref)
{
    hive__rcu_lock();
    hive__obj_t *o = lookup(h, ref.id);
    if (o == NULL)
        HIVE_DIE("store: pinning object %llu, which the caller holds no count on", (unsigned long long)ref.id);
    /* relaxed: one user count becomes a pin in one RMW; the caller's count
     * keeps the record meanwhile, and nothing is published by it */
    atomic_fetch_add_explicit(&o->refs, HIVE__PIN - 1, memory_order_relaxed);
    hive__rcu_unlock();
}

void hive__ref_unpin(struct hive *h, hive_ref_t ref)
{
    hive__rcu_lock();
    hive__obj_t *o = lookup(h, ref.id);
    if (o == NULL)
        HIVE_DIE("store: unpinning object %llu, which is gone", (unsigned long long)ref.id);
    hive__obj_unpin(h, o);
    hive__rcu_unlock();
}

/* Free a chain of records (one, or a retire list's batch) a grace period
 * after their last counts went. flush_list (or release_count, for a record
 * with an arena block) prepared it: linked its slots for the free stack and
 * counted it into the head's dead fields. So a chain of records with
 * inline payloads and no drop hook - every put's and small task result's -
 * costs this thread (the call_rcu thread) one read of the head's second
 * line and one write of the last record's link; the records' lines stay
 * with the thread that released them (which wrote them last, and will
 * most likely take them again for its next objects). A chain with a
 * record to look at (a drop hook, an arena block) is walked first. A
 * record is not touched once its slot is pushed. */
static void free_cb(struct rcu_head *head)
{
    hive__rcu_callback_begin();
    hive__obj_t *first = caa_container_of(head, hive__obj_t, tail.dead.rcu);
    struct hive *h = first->tail.dead.h;
    uint32_t n = first->tail.dead.n;
    uint32_t inl = first->tail.dead.inl;
    uint32_t objects = first->tail.dead.objects;
    hive__obj_t *last = first->tail.dead.last;
    if (first->tail.dead.walk) {
        uint32_t done = 0;
        for (hive__obj_t *o = first, *next; o != NULL; o = next) {
            next = o == last ? NULL : o->tail.dead.next;   /* before a hook touches o */
            if (h->store.drop[o->kind] != NULL)
                h->store.drop[o->kind](h, o, false);
            if (hive__obj_in_arena(o))
                hive__payload_free(h, o);
            done++;
        }
        if (done != n)
            HIVE_DIE("store: a retired chain held %u records, not the %u counted", done, n);
    }
    /* the slots go back to the cache of the thread that released them
     * (its puts take them while their lines are in its core's cache), or to
     * the shared stack */
    if (!give_home(h, first->tail.dead.home, first, last, n))
        hive__handles_give_linked(&h->store.table, first->id, last);
    hive__arena_uncharge_elsewhere_n(&h->arena, inl);
    count_objects(h, -(int64_t)objects);
    /* release: the shutdown path's acquire load sees our frees done */
    atomic_fetch_sub_explicit(&h->store.callbacks, n, memory_order_release);
}

/* Queue the chain of records now on list for a grace period. Any thread
 * may take it (the exchange makes the chain the taker's alone), and
 * prepares it for free_cb: links the slots in chain order for the free
 * stack (hive__handles_link: the lines were written last by their
 * releasers, most often this thread), counts it, and notes whether any
 * record needs a look. Pushers never read each other's records. */
static void flush_list(struct hive *h, _Atomic(hive__obj_t *) *list, unsigned home)
{
    /* relaxed: a look before the exchange, which writes the line */
    if (atomic_load_explicit(list, memory_order_relaxed) == NULL)
        return;
    /* acquire: pairs with the pushes' release, so their links are read */
    hive__obj_t *chain = atomic_exchange_explicit(list, NULL, memory_order_acquire);
    if (chain == NULL)
        return;
    uint32_t n = 0, inl = 0, objects = 0;
    bool walk = false;
    hive__obj_t *o = chain;
    for (;;) {
        n++;
        /* the list holds records without an arena block: inline or none */
        inl += o->data == (void *)o->tail.inl;
        objects += o->kind != HIVE__ACTOR;
        walk |= h->store.drop[o->kind] != NULL;
        hive__obj_t *next = o->tail.dead.next;
        if (next == NULL)
            break;
        hive__handles_link(o, next->id);
        o = next;
    }
    chain->tail.dead.last = o;
    chain->tail.dead.n = n;
    chain->tail.dead.inl = inl;
    chain->tail.dead.objects = objects;
    chain->tail.dead.walk = walk;
    chain->tail.dead.home = (uint8_t)home;
    /* relaxed: a count the drain reads after its barrier (free_cb's release) */
    atomic_fetch_add_explicit(&h->store.callbacks, n, memory_order_relaxed);
    hive__call_rcu(&chain->tail.dead.rcu, free_cb);
}

void hive__store_flush_retired(struct hive *h, hive__worker_t *w)
{
    /* w's records go back to w's cache when w flushes them itself */
    flush_list(h, &w->retired, hive__self == w ? my_shard_ix() : HIVE__SHARDS);
}

static void flush_user_lists(struct hive *h)
{
    for (unsigned i = 0; i <= HIVE__SHARDS; i++)
        flush_list(h, &h->store.shards[i].head, i);
}

/* Push o on list (a worker's or a user list: several threads may push at
 * once, and a flusher take the chain at any time); flush a full batch. */
static void retire_on(struct hive *h, _Atomic(hive__obj_t *) *list, _Atomic unsigned *n,
                      hive__obj_t *o, unsigned home)
{
    /* relaxed: the CAS re-reads the head; only the link is written from it */
    hive__obj_t *head = atomic_load_explicit(list, memory_order_relaxed);
    do {
        o->tail.dead.next = head;
        /* release: o's link (and everything its releaser wrote) before the
         * chain is taken by the flusher's acquire exchange */
    } while (!atomic_compare_exchange_weak_explicit(list, &head, o, memory_order_release,
                                                    memory_order_relaxed));
    /* relaxed: a hint; a lost update (two pushers) only flushes a batch
     * early or late, and every list is flushed by drains and parking */
    unsigned k = atomic_load_explicit(n, memory_order_relaxed) + 1;
    if (k >= HIVE__RETIRE_BATCH) {
        k = 0;
        flush_list(h, list, home);
    }
    atomic_store_explicit(n, k, memory_order_relaxed);
}

static void flush_all_retired(struct hive *h)
{
    for (unsigned i = 0; h->sched.w != NULL && i < h->sched.n; i++)
        hive__store_flush_retired(h, &h->sched.w[i]);
    flush_user_lists(h);
}

void hive__store_on_drop(struct hive *h, uint8_t kind, hive__drop_fn fn)
{
    if (kind >= HIVE__KINDS)
        HIVE_DIE("store: no kind %u", (unsigned)kind);
    h->store.drop[kind] = fn;       /* at init, before any record of the kind exists */
}

/* Called by workers between jobs and before parking, never inside a
 * read-side section: a purge makes system calls. */
void hive__store_maintain(struct hive *h)
{
    flush_user_lists(h);              /* user threads' last records of a burst */
    if (unlikely(hive__arena_wants_purge(&h->arena)))
        hive__arena_purge(&h->arena);
}

static bool any_retired(struct hive *h)
{
    for (unsigned i = 0; h->sched.w != NULL && i < h->sched.n; i++)
        /* relaxed: a drain runs when nobody else releases; a late push is
         * the caller's race */
        if (atomic_load_explicit(&h->sched.w[i].retired, memory_order_relaxed) != NULL)
            return true;
    for (unsigned i = 0; i <= HIVE__SHARDS; i++)   /* relaxed: as above */
        if (atomic_load_explicit(&h->store.shards[i].head, memory_order_relaxed) != NULL)
            return true;
    return false;
}

void hive__store_drain(struct hive *h)
{
    hive__rcu_thread();
    /* a record's drop hook may release other records: loop until no free
     * is left (only when nobody else is releasing: tests, stats, shutdown) */
    do {
        flush_all_retired(h);
        hive__rcu_barrier();
    } while (atomic_load_explicit(&h->store.callbacks, memory_order_acquire) != 0 ||
             any_retired(h));
}

typedef struct fail_arg {
    struct hive *h;
    int code;
} fail_arg_t;

static void fail_if_pending(void *obj, void *arg)
{
    hive__obj_t *o = obj;
    fail_arg_t *f = arg;
    if (hive__obj_state(o) == HIVE__PENDING)
        hive__obj_fail(f->h, o, f->code);
}

void hive__store_fail_pending(struct hive *h, int code)
{
    fail_arg_t f = { h, code };
    hive__rcu_lock();
    hive__store_each(h, fail_if_pending, &f);
    hive__rcu_unlock();
    /* hive_wait sleepers whose objects had all finished before still look
     * at stopping once more */
    atomic_fetch_add_explicit(&h->store.epoch, 1, memory_order_seq_cst);
    hive__futex_wake(&h->store.epoch, INT_MAX);
}

static void free_left(void *obj, void *arg)
{
    struct hive *h = arg;
    hive__obj_t *o = obj;
    hive__handles_unpublish(o);
    if (h->store.drop[o->kind] != NULL)
        h->store.drop[o->kind](h, o, true);
    free_record(h, o);
}

void hive__store_close(struct hive *h)
{
    hive__store_t *s = &h->store;
    stores_remove(s);                 /* exits leave it alone from now on */
    /* settling regions into huge pages (util/hugemap.h) would only delay
     * the shutdown: the callbacks the barriers below wait for skip it */
    hive__settle_pause(true);
    /* 1. let queued frees run */
    hive__store_drain(h);
    /* 2. nobody else runs in this engine now: free what is left directly */
    hive__handles_each(&s->table, free_left, h);
    hive__rcu_barrier();
    /* relaxed: no taker is left; the barrier ran every queued settle */
    atomic_store_explicit(&s->table.settling, false, memory_order_relaxed);
    hive__handles_close(&s->table);
    hive__settle_pause(false);
}

/* ------------------------------------------------------------------ states */

/* After a state change: wake hive_wait sleepers, if any. seq_cst load: the
 * sealer's half of a store-load handshake with the waiter, which bumps
 * epoch_waiters (seq_cst) before it re-reads the states (seq_cst). Either we
 * see its count, or it sees our new state. */
static void wake_epoch(hive__store_t *s)
{
    if (atomic_load_explicit(&s->epoch_waiters, memory_order_seq_cst) != 0) {
        atomic_fetch_add_explicit(&s->epoch, 1, memory_order_seq_cst);
        hive__futex_wake(&s->epoch, INT_MAX);
    }
}

/* Tell the waiting deps on the list d, once.
 *
 * A dep's ready() may finish another object (a task that cannot run fails
 * its result, whose deps are other tasks, ...): calling it directly would
 * recurse once per link of a dependency chain and overflow the stack on a
 * long one. So deps go on a per-thread worklist, and only the outermost
 * deliver on a thread drains it: a chain of any length fails in a loop. */
static __thread hive__dep_t *deps_todo;
static __thread bool deps_draining;

static void deliver(hive__dep_t *d, bool failed)
{
    while (d != NULL && d != HIVE__DEPS_CLOSED) {
        hive__dep_t *next = d->next;
        d->failed = failed;
        d->next = deps_todo;
        deps_todo = d;
        d = next;
    }
    if (deps_draining)
        return;                          /* an outer deliver on this thread drains it */
    deps_draining = true;
    while ((d = deps_todo) != NULL) {
        deps_todo = d->next;             /* taken before ready() may free d */
        d->ready(d, d->failed);
    }
    deps_draining = false;
}

/* The deps list and the finish meet in a store-load pair, so that a finish
 * with no deps (nearly every one) writes no second word:
 *
 *   add_dep: push dep (seq_cst CAS)          finish: state final (seq_cst CAS)
 *            read state (seq_cst)                    read deps (seq_cst)
 *            finished: take the list (xchg)          non-empty: take the list (xchg)
 *
 * In the total order one of the reads comes after the other side's write:
 * the finisher sees the dep, or the adder sees the object finished, or
 * both - then both exchange the list for CLOSED, and each dep goes to the
 * one exchange that took it. An adder that took its own dep back says so
 * (false: not called, look at the state) and delivers the others it took,
 * whose adders find their deps gone and answer true. */
bool hive__obj_add_dep(hive__obj_t *o, hive__dep_t *dep)
{
    hive__dep_t *head = atomic_load_explicit(&o->deps, memory_order_acquire);
    do {
        if (head == HIVE__DEPS_CLOSED)
            return false;
        dep->next = head;
        /* seq_cst: release, so dep's fields reach whoever takes the list
         * with an acquire exchange (push-only plus take-all: no ABA), and
         * the store half of the pair above */
    } while (!atomic_compare_exchange_weak_explicit(&o->deps, &head, dep, memory_order_seq_cst,
                                                    memory_order_acquire));
    uint32_t st = atomic_load_explicit(&o->state, memory_order_seq_cst) & HIVE__STATE_MASK;
    if (st == HIVE__PENDING)
        return true;                     /* the finish will see it */
    /* acq_rel: acquire the deps pushed (ours included); release: a later
     * add_dep that sees CLOSED also sees the final state we saw */
    hive__dep_t *d = atomic_exchange_explicit(&o->deps, HIVE__DEPS_CLOSED, memory_order_acq_rel);
    hive__dep_t *others = NULL;
    bool mine = false;
    while (d != NULL && d != HIVE__DEPS_CLOSED) {
        hive__dep_t *next = d->next;
        if (d == dep) {
            mine = true;
        } else {
            d->next = others;
            others = d;
        }
        d = next;
    }
    if (others != NULL)
        deliver(others, st == HIVE__FAILED);
    return !mine;
}

/* The finisher's half of the pair above (after its seq_cst CAS). */
static void run_deps(hive__obj_t *o, bool failed)
{
    if (atomic_load_explicit(&o->deps, memory_order_seq_cst) == NULL)
        return;                          /* no dep: an adder after us sees the state */
    /* acq_rel: acquire the pushed deps; release so that a later add_dep that
     * sees CLOSED also sees the final state */
    deliver(atomic_exchange_explicit(&o->deps, HIVE__DEPS_CLOSED, memory_order_acq_rel), failed);
}

/* After a finish: wake whoever sleeps on the state word (the old value had
 * the WAITERS bit), hive_wait sleepers, and the deps. */
static void finished(struct hive *h, hive__obj_t *o, uint32_t old, uint32_t now)
{
    if (old & HIVE__WAITERS)
        hive__futex_wake(&o->state, INT_MAX);
    wake_epoch(&h->store);
    run_deps(o, (now & HIVE__STATE_MASK) == HIVE__FAILED);
}

/* Move PENDING -> to, keeping the run bits; false if the object was not
 * pending. seq_cst CAS: release for the payload, and the store half of the
 * handshakes (WAITERS bit here, epoch_waiters in wake_epoch, the deps). */
static bool finish(struct hive *h, hive__obj_t *o, uint32_t to)
{
    uint32_t v = atomic_load_explicit(&o->state, memory_order_relaxed), now;
    do {
        if ((v & HIVE__STATE_MASK) != HIVE__PENDING)
            return false;
        now = to | (v & HIVE__RUN_MASK);
    } while (!atomic_compare_exchange_weak_explicit(&o->state, &v, now, memory_order_seq_cst,
                                                    memory_order_relaxed));
    finished(h, o, v, now);
    return true;
}

static inline uint32_t failed_word(int code)
{
    return HIVE__FAILED | ((uint32_t)-code << HIVE__CODE_SHIFT);
}

bool hive__obj_claim_run(struct hive *h, hive__worker_t *w, hive__obj_t *o)
{
    uint32_t v;
    if (owned_by(w, o) && own_enter(h, w, o)) {
        /* the owner runs its own private record's task: nobody else can
         * change the word now (own_enter), a cancel by the owner itself
         * comes before or after this, in its program order */
        v = atomic_load_explicit(&o->state, memory_order_relaxed);
        bool queued = hive__run_of(v) == HIVE__RUN_QUEUED;
        if (queued)   /* relaxed: our own section's store, released by own_leave */
            atomic_store_explicit(&o->state, (v & ~HIVE__RUN_MASK) | HIVE__RUN_RUNNING << HIVE__RUN_SHIFT,
                                  memory_order_relaxed);
        own_leave(w);
        return queued;
    }
    v = atomic_load_explicit(&o->state, memory_order_relaxed);
    do {
        if (hive__run_of(v) != HIVE__RUN_QUEUED)
            return false;
        /* acq_rel: against hive_cancel's CAS on the same word (a waiter's
         * WAITERS bit only makes us try again) */
    } while (!atomic_compare_exchange_weak_explicit(&o->state, &v,
                                                    (v & ~HIVE__RUN_MASK) |
                                                    HIVE__RUN_RUNNING << HIVE__RUN_SHIFT,
                                                    memory_order_acq_rel, memory_order_relaxed));
    return true;
}

bool hive__obj_end_queued(struct hive *h, hive__obj_t *o, int code, uint32_t run_to)
{
    uint32_t v = atomic_load_explicit(&o->state, memory_order_relaxed), now;
    do {
        if (hive__run_of(v) != HIVE__RUN_QUEUED)
            return false;
        now = (v & HIVE__STATE_MASK) == HIVE__PENDING ? failed_word(code)
                                                      : v & ~(HIVE__RUN_MASK | HIVE__WAITERS);
        now |= run_to << HIVE__RUN_SHIFT;
        /* seq_cst: as finish (and against a claim's or another end's CAS) */
    } while (!atomic_compare_exchange_weak_explicit(&o->state, &v, now, memory_order_seq_cst,
                                                    memory_order_relaxed));
    if ((v & HIVE__STATE_MASK) == HIVE__PENDING)
        finished(h, o, v, now);
    return true;
}

/* The word a run's finish moves v to, and the code the result ends with. */
static inline uint32_t finish_word(uint32_t v, int code, int *c)
{
    *c = hive__run_of(v) == HIVE__RUN_CANCEL_ASKED ? HIVE_ECANCELED : code;
    uint32_t now;
    if ((v & HIVE__STATE_MASK) != HIVE__PENDING)
        now = v & ~(HIVE__RUN_MASK | HIVE__WAITERS);   /* failed before (shutdown) */
    else
        now = *c == HIVE_OK ? HIVE__SEALED : failed_word(*c);
    return now | HIVE__RUN_DONE << HIVE__RUN_SHIFT;
}

int hive__obj_finish_run(struct hive *h, hive__worker_t *w, hive__obj_t *o, int code)
{
    uint32_t v, now;
    int c;
    if (owned_by(w, o) && own_enter(h, w, o)) {
        /* the owner finishes the task of its own private record (as
         * hive__obj_claim_run): a plain load and store. release: the
         * result's fields before the state, for this thread's later reads
         * and, through own_leave, for a promoter's. The seq_cst loads in
         * finished() need no seq_cst store before them: a waiter or a dep
         * on another thread came by the id, promoted the record, and so
         * either saw this store (own_leave's release) before it looked at
         * the state, or made us take the CAS below */
        v = atomic_load_explicit(&o->state, memory_order_relaxed);
        now = finish_word(v, code, &c);
        atomic_store_explicit(&o->state, now, memory_order_release);
        own_leave(w);
    } else {
        v = atomic_load_explicit(&o->state, memory_order_relaxed);
        do {
            now = finish_word(v, code, &c);
            /* seq_cst: as finish; it also orders the result's fields before
             * a hive_cancel that reads DONE, and decides against its CAS */
        } while (!atomic_compare_exchange_weak_explicit(&o->state, &v, now, memory_order_seq_cst,
                                                        memory_order_relaxed));
    }
    if ((v & HIVE__STATE_MASK) != HIVE__PENDING)
        return code;
    finished(h, o, v, now);
    return c;
}

int hive__obj_seal(struct hive *h, hive__obj_t *o)
{
    if (!finish(h, o, HIVE__SEALED))
        return hive__fail(HIVE_ESTATE, "hive_seal: object %llu is already %s",
                          (unsigned long long)o->id,
                          hive__obj_state(o) == HIVE__SEALED ? "sealed" : "failed");
    return HIVE_OK;
}

void hive__obj_fail(struct hive *h, hive__obj_t *o, int code)
{
    finish(h, o, HIVE__FAILED | ((uint32_t)-code << HIVE__CODE_SHIFT));
}

/* Spin this long before sleeping: a seal that is microseconds away costs no
 * system call on either side. */
#define GET_SPIN_NS 20000u
#define WAIT_HELP_BURST 256          /* jobs a waiting worker runs between rescans */

/* Shutdown's half of every waiter's handshake: stopping is set (seq_cst)
 * before the sweep fails every pending object. A waiter that sets its
 * WAITERS bit (or registers as an epoch waiter) and then reads stopping
 * (both seq_cst) either sees stopping and returns, or comes before the
 * sweep in the total order - and the sweep then finds its object pending
 * and wakes it. So no waiter sleeps through a shutdown. */
static inline bool engine_stopping(struct hive *h)
{
    return atomic_load_explicit(&h->sched.stopping, memory_order_seq_cst) != 0;
}

static bool obj_done(void *arg)
{
    return hive__obj_state(arg) != HIVE__PENDING;
}

/* Wait for o to leave PENDING by sleeping on its state word. On a worker
 * (helping), run other jobs first, so nested gets never stall the engine
 * (workers = 1 included), and nap at most HELP_NAP_NS before looking for
 * work again. */
#define HELP_NAP_NS 50000
/* A worker with nothing to help with spins this long before its first
 * sleep: the awaited call often runs on another worker that stole it and
 * answers within a microsecond, while a futex sleep and wake cost both
 * sides system calls (an actor ping-pong on an idle machine: 3.5 us a
 * round trip). It keeps looking for work to help with meanwhile. */
#define HELP_SPIN_NS 10000
static int sleep_wait(struct hive *h, hive__obj_t *o, uint64_t deadline, int64_t timeout_ns,
                      const char *fn, bool helping)
{
    uint64_t spin_until = 0;             /* helping: set when there is first nothing to help with */
    for (;;) {
        uint32_t v = atomic_load_explicit(&o->state, memory_order_acquire);
        if ((v & HIVE__STATE_MASK) != HIVE__PENDING)
            return HIVE_OK;
        /* no deadline: help before any clock read (a fork-join get loops
         * here once per job it runs); the clock only once there is no job.
         * The worker's own newest job first, without the search (sched.h) */
        if (helping && deadline == UINT64_MAX &&
            (hive__sched_help_own(hive__self) || h->store.help(h, obj_done, o)))
            continue;
        uint64_t now = hive__now_ns();
        if (now >= deadline)
            return hive__fail(HIVE_ETIMEDOUT, "%s: object %llu still pending after %lld ns", fn,
                              (unsigned long long)o->id, (long long)timeout_ns);
        if (helping && deadline != UINT64_MAX && h->store.help(h, obj_done, o))
            continue;
        if (helping && spin_until == 0)
            spin_until = now + HELP_SPIN_NS;
        if (now < spin_until) {          /* helping: see HELP_SPIN_NS */
            for (int i = 0; i < 64; i++)
                hive__cpu_relax();
            continue;
        }
        /* seq_cst: the waiter's half of the handshake with finish() */
        if (!(v & HIVE__WAITERS) &&
            !atomic_compare_exchange_strong_explicit(&o->state, &v, v | HIVE__WAITERS,
                                                     memory_order_seq_cst, memory_order_relaxed))
            continue;
        if (unlikely(engine_stopping(h)))
            return hive__fail(HIVE_ESHUTDOWN, "%s: the engine is shutting down and object %llu "
                              "is still pending", fn, (unsigned long long)o->id);
        int64_t left = deadline == UINT64_MAX ? -1 : (int64_t)(deadline - now);
        if (helping && (left < 0 || left > HELP_NAP_NS))
            left = HELP_NAP_NS;
        hive__futex_wait(&o->state, v | HIVE__WAITERS, left);
    }
}

static int wait_state(struct hive *h, hive__obj_t *o, int64_t timeout_ns, const char *fn)
{
    /* on a worker: help at once (the awaited job is often in our own deque,
     * and spinning would only delay it); traced, the wait is a span around
     * the jobs it helped with. A helping wait without a deadline reads no
     * clock: fork-join waits once per task. */
    hive__worker_t *w = timeout_ns != 0 && h->store.help != NULL ? hive__self_in(&h->sched) : NULL;
    uint64_t start = w != NULL && timeout_ns < 0 ? 0 : hive__now_ns();
    uint64_t deadline = timeout_ns < 0 ? UINT64_MAX : start + (uint64_t)timeout_ns;
    if (w != NULL) {
        uint64_t t0 = unlikely(w->tring != NULL) ? hive__trace_clock() : 0;
        int rc = sleep_wait(h, o, deadline, timeout_ns, fn, true);
        if (unlikely(w->tring != NULL))
            hive__trace_span(w->tring, HIVE__TEV_WAIT, t0, o->id, NULL, NULL, w->depth);
        return rc;
    }
    /* attached to a world (remote.h): the layer may receive o's answer on
     * this thread. relaxed: the gate reads it again */
    if (unlikely(atomic_load_explicit(&h->remote, memory_order_relaxed) != NULL) && timeout_ns != 0)
        hive__remote_wait(h, o, deadline);
    uint64_t spin_until = start + (timeout_ns >= 0 && (uint64_t)timeout_ns < GET_SPIN_NS
                                   ? (uint64_t)timeout_ns : GET_SPIN_NS);
    do {
        for (int i = 0; i < 64; i++) {
            if (hive__obj_state(o) != HIVE__PENDING)
                return HIVE_OK;
            hive__cpu_relax();
        }
    } while (hive__now_ns() < spin_until);
    return sleep_wait(h, o, deadline, timeout_ns, fn, false);
}

int hive__obj_wait(struct hive *h, hive__obj_t *o, int64_t timeout_ns, const char *fn)
{
    if (hive__obj_state(o) != HIVE__PENDING)
        return HIVE_OK;
    return wait_state(h, o, timeout_ns, fn);
}

/* A thread that may block in get or wait counts itself in sleepers first, so
 * that shutdown does not free the records (or the engine) under it. seq_cst
 * increment: before the waiter's read of stopping, against shutdown's store
 * of stopping before its read of sleepers - either shutdown waits for us,
 * or we see stopping (in the loops above) and leave. */
static inline void sleeper_enter(struct hive *h)
{
    /* The engine's own workers (and spares standing in for them) need no
     * count: shutdown joins them before it frees a record. A fork-join
     * get would otherwise write this engine-wide line twice per task. */
    if (hive__self_in(&h->sched) == NULL)
        atomic_fetch_add_explicit(&h->store.sleepers, 1, memory_order_seq_cst);
}

/* The last touch of the engine by a sleeper. release: every read of a record
 * before it happens-before shutdown's acquire load that sees the count 0.
 * On the same thread as its sleeper_enter, so the same test skips both. */
static inline void sleeper_leave(struct hive *h)
{
    if (hive__self_in(&h->sched) == NULL)
        atomic_fetch_sub_explicit(&h->store.sleepers, 1, memory_order_release);
}

void hive__store_wait_sleepers(struct hive *h)
{
    /* every pending object is failed by now and the epoch bumped: sleepers
     * are on their way out; a short nap between looks (shutdown only) */
    while (atomic_load_explicit(&h->store.sleepers, memory_order_acquire) != 0) {
        atomic_fetch_add_explicit(&h->store.epoch, 1, memory_order_seq_cst);
        hive__futex_wake(&h->store.epoch, INT_MAX);
        hive__sleep_ns(20000);
    }
}

/* ------------------------------------------------------------------ API */

#define CHECK_ENGINE(h, fn) \
    do { if (unlikely((h) == NULL)) return hive__fail(HIVE_EINVAL, "%s: engine is NULL", fn); } while (0)

int hive_put(hive_t *h, const void *data, size_t size, hive_ref_t *out)
{
    CHECK_ENGINE(h, "hive_put");
    if (unlikely(out == NULL || (data == NULL && size != 0)))
        return hive__fail(HIVE_EINVAL, "hive_put: %s is NULL", out == NULL ? "out" : "data");
    hive__obj_t *o;
    int rc = hive__obj_new(h, HIVE__BLOB, size, true, &o);
    if (unlikely(rc != HIVE_OK))
        return rc;
    if (size)
        memcpy(o->data, data, size);
    atomic_store_explicit(&o->state, HIVE__SEALED, memory_order_relaxed);  /* published below */
    atomic_store_explicit(&o->deps, HIVE__DEPS_CLOSED, memory_order_relaxed);
    hive__obj_publish(h, o);
    out->id = o->id;
    return HIVE_OK;
}

int hive_create(hive_t *h, size_t size, void **data, hive_ref_t *out)
{
    CHECK_ENGINE(h, "hive_create");
    if (unlikely(out == NULL || data == NULL))
        return hive__fail(HIVE_EINVAL, "hive_create: %s is NULL", out == NULL ? "out" : "data");
    hive__obj_t *o;
    int rc = hive__obj_new(h, HIVE__BLOB, size, true, &o);
    if (unlikely(rc != HIVE_OK))
        return rc;
    hive__obj_publish(h, o);
    *data = size ? o->data : zero_payload;
    out->id = o->id;
    return HIVE_OK;
}

int hive_seal(hive_t *h, hive_ref_t ref)
{
    CHECK_ENGINE(h, "hive_seal");
    hive__obj_t *o = hive__obj_find(h, ref, "hive_seal");
    if (unlikely(o == NULL))
        return HIVE_ENOENT;
    if (unlikely(o->kind != HIVE__BLOB))
        return hive__fail(HIVE_ESTATE, "hive_seal: object %llu is %s, not a blob",
                          (unsigned long long)ref.id, hive__kind_name(o->kind));
    if (unlikely(hive__obj_run(o) != HIVE__RUN_NONE))
        return hive__fail(HIVE_ESTATE, "hive_seal: object %llu is the result of a task or actor "
                          "call; only its task seals it", (unsigned long long)ref.id);
    return hive__obj_seal(h, o);
}

/* What a get of a finished object gives. */
static int get_result(hive__obj_t *o, uint32_t st, const void **data, size_t *size)
{
    if (unlikely(st == HIVE__FAILED))
        return hive__fail(hive__obj_fail_code(o), "hive_get: object %llu failed: %s",
                          (unsigned long long)o->id, hive_strerror(hive__obj_fail_code(o)));
    *data = o->size ? o->data : zero_payload;
    if (size)
        *size = o->size;
    return HIVE_OK;
}

int hive_get(hive_t *h, hive_ref_t ref, int64_t timeout_ns, const void **data, size_t *size)
{
    CHECK_ENGINE(h, "hive_get");
    if (unlikely(data == NULL))
        return hive__fail(HIVE_EINVAL, "hive_get: data is NULL");
    /* a worker's own private result (a blob): no find, no kind to check */
    hive__worker_t *w = hive__self_in(&h->sched);
    hive__obj_t *o = own_private(h, w, ref.id);
    if (unlikely(o == NULL)) {
        const hive__remote_ops_t *r = hive__remote_of(h, ref.id);
        if (unlikely(r != NULL))
            return r->get(r->ctx, ref, timeout_ns, data, size);
        o = hive__obj_find(h, ref, "hive_get");
        if (unlikely(o == NULL))
            return HIVE_ENOENT;
        if (unlikely(o->kind != HIVE__BLOB && o->kind != HIVE__ARRAY))
            return hive__fail(HIVE_ESTATE, "hive_get: object %llu is %s, which has no payload to get",
                              (unsigned long long)ref.id, hive__kind_name(o->kind));
    }
    uint32_t st = hive__obj_state(o);
    if (likely(st != HIVE__PENDING))
        return get_result(o, st, data, size);
    /* a fork-join join: a worker waiting for good, not traced, runs its
     * newest own jobs (the child itself, most often) until the result is
     * in, before any of wait_state's set-up; then the general wait */
    if (timeout_ns < 0 && w != NULL && w->tring == NULL &&
        h->store.help != NULL) {
        while (hive__sched_help_own(w))
            if ((st = hive__obj_state(o)) != HIVE__PENDING)
                return get_result(o, st, data, size);
    }
    sleeper_enter(h);
    int rc = wait_state(h, o, timeout_ns, "hive_get");
    if (rc == HIVE_OK)
        rc = get_result(o, hive__obj_state(o), data, size);
    sleeper_leave(h);
    return rc;
}

int hive_retain(hive_t *h, hive_ref_t ref)
{
    CHECK_ENGINE(h, "hive_retain");
    const hive__remote_ops_t *r = hive__remote_of(h, ref.id);
    if (unlikely(r != NULL))
        return r->retain(r->ctx, ref);
    hive__rcu_lock();                 /* the record must not go while we look */
    hive__obj_t *o = ref.id ? lookup(h, ref.id) : NULL;
    bool actor = o != NULL && o->kind == HIVE__ACTOR;
    bool ok = o != NULL && !actor && hive__obj_retain_live(o);
    /* relaxed: only which sentence to write */
    int64_t n = o != NULL && !ok ? atomic_load_explicit(&o->refs, memory_order_relaxed) : 0;
    hive__rcu_unlock();
    if (unlikely(actor))
        return hive__fail(HIVE_ESTATE, "hive_retain: %llu is an actor handle, which is not counted",
                          (unsigned long long)ref.id);
    if (unlikely(n > 0 && (n & HIVE__USERS) == HIVE__USERS))
        return hive__fail(HIVE_ESTATE, "hive_retain: object %llu already has %lld counts, the most "
                          "it can hold", (unsigned long long)ref.id, (long long)HIVE__USERS);
    if (unlikely(!ok))
        return hive__fail(HIVE_ENOENT, "hive_retain: object %llu does not exist (never created, "
                          "or released)", (unsigned long long)ref.id);
    return HIVE_OK;
}

int hive_release(hive_t *h, hive_ref_t ref)
{
    CHECK_ENGINE(h, "hive_release");
    hive__rcu_lock();
    /* a worker's own private record (a blob): the count drop (and, for the
     * last, the free into its cache) with no find; inside the read-side
     * section all the same, so that the record cannot change lives between
     * the key's look and the count's CAS (a count dropped twice by mistake) */
    hive__worker_t *w = hive__self_in(&h->sched);
    hive__obj_t *o = own_private(h, w, ref.id);
    bool own = o != NULL;             /* a blob, never an actor handle */
    if (unlikely(!own)) {
        const hive__remote_ops_t *r = hive__remote_of(h, ref.id);
        if (unlikely(r != NULL)) {
            hive__rcu_unlock();
            return r->release(r->ctx, ref);
        }
        /* the record's first line is fetched for writing (the count)
         * before the key is read: a line another thread wrote last (a
         * task's seal) comes over once, not shared for the read and then
         * upgraded */
        void *rec = ref.id ? hive__handles_rec(&h->store.table, ref.id) : NULL;
        if (rec != NULL)
            hive__prefetchw(rec);
        o = ref.id ? lookup(h, ref.id) : NULL;
    }
    bool actor = !own && o != NULL && o->kind == HIVE__ACTOR;
    bool ok = o != NULL && !actor && release_count_by(h, w, o, 1);
    /* relaxed: only which sentence to write (the engine's pins, if any) */
    int64_t pins = o != NULL && !ok ? atomic_load_explicit(&o->refs, memory_order_relaxed) / HIVE__PIN : 0;
    hive__rcu_unlock();
    if (unlikely(actor))
        return hive__fail(HIVE_ESTATE, "hive_release: %llu is an actor handle, which is not counted",
                          (unsigned long long)ref.id);
    if (unlikely(pins > 0))
        return hive__fail(HIVE_ESTATE, "hive_release: object %llu has no count left to release "
                          "(released more often than put, retained or returned); the engine's own "
                          "%lld hold(s) on it (task or call arguments and results, cell versions) "
                          "stay", (unsigned long long)ref.id, (long long)pins);
    if (unlikely(!ok))
        return hive__fail(HIVE_ENOENT, "hive_release: object %llu does not exist (never created, "
                          "or already released)", (unsigned long long)ref.id);
    return HIVE_OK;
}

struct wait_set {
    hive__obj_t **objs;
    size_t        n, num_ready;
};

static bool wait_set_done(void *arg)
{
    const struct wait_set *ws = arg;
    size_t count = 0;
    for (size_t i = 0; i < ws->n && count < ws->num_ready; i++)
        count += hive__obj_state(ws->objs[i]) != HIVE__PENDING;
    return count >= ws->num_ready;
}

int hive_wait(hive_t *h, const hive_ref_t *refs, size_t n, size_t num_ready, int64_t timeout_ns,
              unsigned char *ready)
{
    CHECK_ENGINE(h, "hive_wait");
    if (unlikely(refs == NULL && n != 0))
        return hive__fail(HIVE_EINVAL, "hive_wait: refs is NULL for %zu refs", n);
    if (unlikely(num_ready > n))
        return hive__fail(HIVE_EINVAL, "hive_wait: num_ready %zu exceeds the %zu refs", num_ready, n);
    /* the caller holds counts, so the records stay while we look at them */
    hive__obj_t *stack_objs[64];
    hive__obj_t **objs = stack_objs;
    size_t slot_bytes;
    if (unlikely(__builtin_mul_overflow(n, sizeof *objs, &slot_bytes)))
        return hive__fail(HIVE_EINVAL, "hive_wait: %zu refs: their table of %zu-byte slots "
                          "overflows a size", n, sizeof *objs);
    if (n > 64 && (objs = hive__malloc(slot_bytes)) == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_wait: cannot allocate %zu slots", n);
    int rc = HIVE_OK;
    hive__worker_t *w = hive__self_in(&h->sched);
    for (size_t i = 0; i < n; i++)   /* a worker's own results without the find (own_private) */
        if ((objs[i] = own_private(h, w, refs[i].id)) == NULL &&
            (objs[i] = hive__obj_find(h, refs[i], "hive_wait")) == NULL) {
            /* HIVE_ENOENT, or why another rank's ref has no copy here
             * (HIVE_ENOMEM, HIVE_ESHUTDOWN: the find's sentence) */
            rc = hive__fail_code() < 0 ? hive__fail_code() : HIVE_ENOENT;
            goto out;
        } else if (unlikely(objs[i]->kind == HIVE__ACTOR)) {   /* never pending: no future */
            rc = hive__fail(HIVE_ESTATE, "hive_wait: refs[%zu] (object %llu) is an actor handle, "
                            "which has nothing to wait for", i, (unsigned long long)refs[i].id);
            goto out;
        }
    hive__store_t *s = &h->store;
    sleeper_enter(h);
    if (s->help == NULL)
        w = NULL;
    bool on_worker = w != NULL;
    /* a helping wait without a deadline reads no clock (see wait_state) */
    bool clockless = on_worker && timeout_ns < 0;
    uint64_t start = clockless ? 0 : hive__now_ns();
    uint64_t deadline = timeout_ns < 0 ? UINT64_MAX : start + (uint64_t)timeout_ns;
    uint64_t t0 = unlikely(on_worker && w->tring != NULL) ? hive__trace_clock() : 0;
    bool registered = false;
    for (;;) {
        uint32_t epoch = atomic_load_explicit(&s->epoch, memory_order_seq_cst);
        size_t count = 0;
        /* seq_cst loads: the re-read half of the handshake with wake_epoch */
        for (size_t i = 0; i < n; i++)
            count += (atomic_load_explicit(&objs[i]->state, memory_order_seq_cst) &
                      HIVE__STATE_MASK) != HIVE__PENDING;
        if (count >= num_ready) {
            if (ready)
                for (size_t i = 0; i < n; i++)
                    ready[i] = hive__obj_state(objs[i]) != HIVE__PENDING;
            rc = (int)(count > INT_MAX ? INT_MAX : count);
            break;
        }
        uint64_t now = clockless ? 0 : hive__now_ns();
        if (now >= deadline) {
            rc = hive__fail(HIVE_ETIMEDOUT, "hive_wait: %zu of %zu ready, %zu wanted, after %lld ns",
                            count, n, num_ready, (long long)timeout_ns);
            break;
        }
        if (on_worker) {
            /* keep the engine moving: run ready jobs in a burst (rescanning
             * the refs after every single job would cost O(n) per job) */
            unsigned ran = 0;
            struct wait_set ws = { objs, n, num_ready };
            while (ran < WAIT_HELP_BURST &&
                   (hive__sched_help_own(w) || s->help(h, wait_set_done, &ws)))
                ran++;
            if (ran != 0)
                continue;
        } else if (now - start < GET_SPIN_NS) {
            hive__cpu_relax();
            continue;
        }
        if (!registered) {
            /* seq_cst: waiter's half of the handshake in wake_epoch; the
             * states are re-read after it before any sleep */
            atomic_fetch_add_explicit(&s->epoch_waiters, 1, memory_order_seq_cst);
            registered = true;
            continue;
        }
        if (unlikely(engine_stopping(h))) {
            rc = hive__fail(HIVE_ESHUTDOWN, "hive_wait: the engine is shutting down with %zu of "
                            "%zu ready, %zu wanted", count, n, num_ready);
            break;
        }
        uint64_t left = deadline - now;
        if (on_worker && left > HELP_NAP_NS)
            left = HELP_NAP_NS;             /* look for work to help with again soon */
        hive__futex_wait(&s->epoch, epoch, deadline == UINT64_MAX && !on_worker ? -1 : (int64_t)left);
    }
    if (registered)
        atomic_fetch_sub_explicit(&s->epoch_waiters, 1, memory_order_relaxed);
    if (unlikely(on_worker && w->tring != NULL))
        hive__trace_span(w->tring, HIVE__TEV_WAIT, t0, 0, NULL, NULL, w->depth);
    sleeper_leave(h);
out:
    if (objs != stack_objs)
        free(objs);
    return rc;
}

int hive_store_stats(hive_t *h, hive_store_stats_t *out)
{
    CHECK_ENGINE(h, "hive_store_stats");
    if (out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_store_stats: out is NULL");
    /* what user threads released goes now: the counts below drop a grace
     * period later, as for every other release */
    hive__rcu_thread();
    flush_user_lists(h);
    out->capacity = h->arena.capacity;
    out->used = hive__store_used(h);
    out->resident = hive__arena_resident(&h->arena);
    /* relaxed: statistics */
    out->used_high = atomic_load_explicit(&h->arena.used_high, memory_order_relaxed);
    out->efull = atomic_load_explicit(&h->store.efull, memory_order_relaxed);
    out->objects = hive__store_objects(h);
    return HIVE_OK;
}

/* ------------------------------------------------------------------ get_many
 * hive_get_many keeps no table of its own: while it waits, datas[i] holds
 * the record of refs[i] (the caller's count keeps it alive), or for a ref
 * that names no object it can get, the negated status as a small integer
 * (no record lives in the first page); only at the end does it become the
 * payload. So any n costs no allocation. It waits for the
 * refs one after another against one deadline: waiting for the slowest is
 * waiting for all, and each wait is hive_get's (spin, futex, or helping on a
 * worker). */

/* Look refs[i] up: its record in *o, or its status (HIVE_ENOENT, HIVE_ESTATE). */
static int many_find(struct hive *h, hive_ref_t ref, size_t i, hive__obj_t **o)
{
    *o = hive__obj_find(h, ref, "hive_get_many");
    if (unlikely(*o == NULL))         /* HIVE_ENOENT, or why a remote ref has no copy (hive_wait) */
        return hive__fail_code() < 0 ? hive__fail_code() : HIVE_ENOENT;
    if (unlikely((*o)->kind != HIVE__BLOB && (*o)->kind != HIVE__ARRAY))
        return hive__fail(HIVE_ESTATE, "hive_get_many: refs[%zu] (object %llu) is %s", i,
                          (unsigned long long)ref.id, hive__kind_name((*o)->kind));
    return HIVE_OK;
}

/* The refs of a get_many are independent, so their cache misses need not
 * queue one behind another: before each window of MANY_AHEAD refs, both
 * lines of every record of the window are prefetched (an id names its
 * record's address: no load is needed to know where), and the finds that
 * follow mostly hit. (A prefetch never faults, and the table's memory is
 * never unmapped: a stale id costs a wasted line at most. The finds check
 * everything as before.) */
#define MANY_AHEAD 16

static void many_prefetch(struct hive *h, const hive_ref_t *refs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *r = hive__handles_rec(&h->store.table, refs[i].id);
        if (r != NULL) {
            __builtin_prefetch(r);
            __builtin_prefetch(r + 64);
        }
    }
}

#define MANY_CODE_MAX 4096u           /* datas[i] below this: -status of a bad ref */

static inline hive__obj_t *many_obj(const void *d)
{
    return (uintptr_t)d < MANY_CODE_MAX ? NULL : (hive__obj_t *)(uintptr_t)d;
}

/* Wait for every pending record until deadline (UINT64_MAX: forever).
 * The caller counts itself a sleeper around this and its reading of the
 * records after it (as hive_get), so that shutdown does not free them. */
static void many_wait(struct hive *h, const void **datas, size_t n, uint64_t deadline)
{
    for (size_t i = 0; i < n; i++) {
        hive__obj_t *o = many_obj(datas[i]);
        if (o == NULL)
            continue;
        if (hive__obj_state(o) != HIVE__PENDING)
            continue;
        uint64_t now = hive__now_ns();
        int64_t left = deadline == UINT64_MAX ? -1 : now >= deadline ? 0 : (int64_t)(deadline - now);
        if (wait_state(h, o, left, "hive_get_many") == HIVE_ESHUTDOWN)
            return;                  /* the outcome is read below */
    }
}

int hive_get_many(hive_t *h, const hive_ref_t *refs, size_t n, int64_t timeout_ns,
                  const void **datas, size_t *sizes, int *status)
{
    CHECK_ENGINE(h, "hive_get_many");
    size_t bytes;
    if (unlikely(__builtin_mul_overflow(n, sizeof *refs, &bytes) ||
                 __builtin_mul_overflow(n, sizeof *datas, &bytes)))
        return hive__fail(HIVE_EINVAL, "hive_get_many: %zu refs: an array of %zu-byte entries "
                          "overflows a size", n, sizeof *refs);
    if (unlikely(n != 0 && (refs == NULL || datas == NULL)))
        return hive__fail(HIVE_EINVAL, "hive_get_many: %s is NULL for %zu refs",
                          refs == NULL ? "refs" : "datas", n);
    bool pending = false;
    for (size_t i = 0; i < n; i++) {
        if (i % MANY_AHEAD == 0)
            many_prefetch(h, refs + i, n - i < MANY_AHEAD ? n - i : MANY_AHEAD);
        hive__obj_t *o;
        int st = many_find(h, refs[i], i, &o);
        datas[i] = st == HIVE_OK ? (const void *)o : (const void *)(uintptr_t)-st;
        pending |= st == HIVE_OK && hive__obj_state(o) == HIVE__PENDING;
    }
    if (pending) {
        sleeper_enter(h);
        many_wait(h, datas, n, timeout_ns < 0 ? UINT64_MAX : hive__now_ns() + (uint64_t)timeout_ns);
    }
    size_t bad = 0, first = n;
    int first_rc = HIVE_OK;
    for (size_t i = 0; i < n; i++) {
        hive__obj_t *o = many_obj(datas[i]);
        int st = o == NULL ? -(int)(uintptr_t)datas[i] : HIVE_OK;
        if (st == HIVE_OK) {
            uint32_t s = hive__obj_state(o);
            st = s == HIVE__FAILED ? hive__obj_fail_code(o) : s == HIVE__SEALED ? HIVE_OK
                 : engine_stopping(h) ? HIVE_ESHUTDOWN : HIVE_ETIMEDOUT;
        }
        datas[i] = st == HIVE_OK ? (o->size ? o->data : zero_payload) : NULL;
        if (sizes != NULL)
            sizes[i] = st == HIVE_OK ? o->size : 0;
        if (status != NULL)
            status[i] = st;
        if (st != HIVE_OK && bad++ == 0) {
            first = i;
            first_rc = st;
        }
    }
    if (pending)
        sleeper_leave(h);            /* the records are not touched again */
    if (unlikely(bad != 0))
        return hive__fail(first_rc, "hive_get_many: %zu of %zu refs are not available; the first, "
                          "refs[%zu] (object %llu): %s", bad, n, first,
                          (unsigned long long)refs[first].id, hive_strerror(first_rc));
    return HIVE_OK;
}
