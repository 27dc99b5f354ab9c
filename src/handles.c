/*
 * handles.c - the object table of handles.h: record chunks, ids and the
 * free-slot stack.
 */
#include "handles.h"
#include "util/error.h"
#include "util/fault.h"
#include "util/hugemap.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define CHUNK_SLOTS ((uint32_t)1 << HIVE__CHUNK_BITS)
#define CHUNK_BYTES ((size_t)CHUNK_SLOTS * HIVE__REC_BYTES)
#define GEN_MAX     (((uint32_t)1 << HIVE__GEN_BITS) - 1)
#define REGION_SLOTS ((uint32_t)(HIVE__HUGE_PAGE / HIVE__REC_BYTES))   /* slots per 2 MiB */

_Static_assert(CHUNK_BYTES % HIVE__HUGE_PAGE == 0, "a chunk is whole huge pages");
_Static_assert(HIVE__HUGE_PAGE % HIVE__REC_BYTES == 0, "a region is whole records");
_Static_assert(HIVE__MAX_SLOTS < HIVE__KEY_PUB, "a free link (slot + 1) never has the key's PUB bit");
_Static_assert(HIVE__REC_KEY % 4 == 0 && HIVE__REC_KEY + 4 <= 64, "the key is in the first line");

static inline unsigned char *rec_at(hive__handles_t *t, uint32_t s)
{
    /* acquire: as hive__handles_rec */
    unsigned char *chunk = atomic_load_explicit(&t->dir[s >> HIVE__CHUNK_BITS], memory_order_acquire);
    return chunk + (size_t)(s & (CHUNK_SLOTS - 1)) * HIVE__REC_BYTES;
}

/* A chunk's memory: a frontier mapping (hugemap.h). Slots are handed out
 * in order, so the region being filled costs what its records touch, to
 * the 4 KiB page, and each full region becomes a huge page
 * (hive__handles_take). */
static void *map_chunk(void)
{
    void *m = hive__map_frontier(CHUNK_BYTES);
    if (m != MAP_FAILED)
        hive__lsan_root(m, CHUNK_BYTES);   /* records hold pointers (hugemap.h) */
    return m;
}

/* Map the chunk of slot s if nobody has; false (with the sentence) if the
 * mapping fails. */
static bool chunk_ready(hive__handles_t *t, uint32_t s)
{
    _Atomic(unsigned char *) *d = &t->dir[s >> HIVE__CHUNK_BITS];
    /* acquire: as hive__handles_rec */
    if (likely(atomic_load_explicit(d, memory_order_acquire) != NULL))
        return true;
    pthread_mutex_lock(&t->grow);
    bool ok = true;
    if (atomic_load_explicit(d, memory_order_relaxed) == NULL) {   /* the lock orders writers */
        void *m = hive__fault() ? MAP_FAILED : map_chunk();
        if (m == MAP_FAILED) {
            ok = false;
            hive__fail(HIVE_ENOMEM, "store: cannot map records %u.. of the object table (%zu bytes)",
                       s & ~(CHUNK_SLOTS - 1), CHUNK_BYTES);
        } else {
            /* release: the (zeroed) chunk before its pointer */
            atomic_store_explicit(d, (unsigned char *)m, memory_order_release);
        }
    }
    pthread_mutex_unlock(&t->grow);
    return ok;
}

int hive__handles_open(hive__handles_t *t, uint32_t tag)
{
    memset(t, 0, sizeof *t);
    t->tag = tag & ((1u << HIVE__TAG_BITS) - 1);
    t->dir = hive__calloc(HIVE__DIR_SIZE, sizeof *t->dir);
    /* both virtual until used (calloc maps large blocks): a word per chunk,
     * a settle record per 2 MiB region */
    t->settle = hive__calloc(HIVE__MAX_SLOTS / REGION_SLOTS, sizeof *t->settle);
    if (t->dir == NULL || t->settle == NULL) {
        free(t->dir);
        free(t->settle);
        t->dir = NULL;
        return hive__fail(HIVE_ENOMEM, "store: cannot allocate the object table's directory");
    }
    pthread_mutex_init(&t->grow, NULL);
    atomic_init(&t->free_head, 0);
    atomic_init(&t->next_slot, 0);
    if (!chunk_ready(t, 0)) {               /* the first chunk up front: puts never map it */
        hive__handles_close(t);
        return HIVE_ENOMEM;
    }
    return HIVE_OK;
}

void hive__handles_close(hive__handles_t *t)
{
    if (t->dir == NULL)
        return;
    /* skip what the settler has queued (of any table), then wait until it
     * holds none of ours: a collapse it runs finishes before we unmap */
    hive__settle_pause(true);
    /* relaxed: written by takers this caller has joined or waited for */
    if (atomic_load_explicit(&t->settling, memory_order_relaxed))
        hive__rcu_barrier();               /* our queued settles reach the settler */
    hive__settle_drain();
    hive__settle_pause(false);
    for (size_t i = 0; i < HIVE__DIR_SIZE; i++) {
        unsigned char *c = atomic_load_explicit(&t->dir[i], memory_order_relaxed);   /* quiet */
        if (c != NULL) {
            hive__lsan_unroot(c, CHUNK_BYTES);
            munmap(c, CHUNK_BYTES);
        }
    }
    free(t->dir);
    free(t->settle);
    t->dir = NULL;
    pthread_mutex_destroy(&t->grow);
}

/* The record of the free slot s (the stack's new head, the next take's),
 * both lines, for writing: it was freed a grace period ago (its lines have
 * left this core's caches, and the take's read of its link would wait for
 * the whole miss), and a put writes both. A prefetch never faults; s is a
 * free slot (the popping CAS saw the stack unchanged), its chunk mapped. */
static inline void prefetch_rec(hive__handles_t *t, uint32_t s)
{
    unsigned char *r = rec_at(t, s);
    __builtin_prefetch(r, 1);
    __builtin_prefetch(r + 64, 1);
}

/* A slot off the free stack, or UINT32_MAX if it is empty. */
static uint32_t pop_free(hive__handles_t *t)
{
    /* acquire: pairs with the pushing CAS's release, so the popped slot's
     * link (written before the push) is the one we read, and its record's
     * last owner's writes happen before ours */
    uint64_t head = atomic_load_explicit(&t->free_head, memory_order_acquire);
    while ((uint32_t)head != 0) {
        uint32_t s = (uint32_t)head - 1;
        /* relaxed: if the slot was popped since we read head (and its key
         * word rewritten: a new owner's publish, or another push's link),
         * the stack's tag changed too and the CAS fails */
        uint32_t next = atomic_load_explicit(hive__handles_key(rec_at(t, s)), memory_order_relaxed);
        uint64_t neu = (((head >> 32) + 1) << 32) | next;
        /* acquire on success and failure: as the first load */
        if (atomic_compare_exchange_weak_explicit(&t->free_head, &head, neu, memory_order_acquire,
                                                  memory_order_acquire)) {
            if (next != 0)
                prefetch_rec(t, next - 1);   /* the next take's record */
            return s;
        }
    }
    return UINT32_MAX;
}

/* Give slot s (its record r) its next id and return it. The record is
 * ours alone until given back, and no finder reads its id word before
 * matching its key (not PUB or PRIV now): plain accesses. The generation
 * of the last id handed out lives in that word. */
static uint64_t stamp_gen(hive__handles_t *t, unsigned char *r, uint32_t s, uint32_t gen)
{
    uint64_t neu = ((uint64_t)gen << (HIVE__SLOT_BITS + HIVE__TAG_BITS)) |
                   ((uint64_t)t->tag << HIVE__SLOT_BITS) | s;
    memcpy(r + HIVE__REC_ID, &neu, sizeof neu);
    return neu;
}

static uint64_t stamp(hive__handles_t *t, unsigned char *r, uint32_t s)
{
    uint64_t last;
    memcpy(&last, r + HIVE__REC_ID, sizeof last);
    uint32_t gen = (uint32_t)(last >> (HIVE__SLOT_BITS + HIVE__TAG_BITS)) & GEN_MAX;
    return stamp_gen(t, r, s, gen == GEN_MAX ? 1 : gen + 1);
}

int hive__handles_take(hive__handles_t *t, uint64_t *id, void **rec)
{
    uint32_t s = pop_free(t);
    if (s == UINT32_MAX) {
        unsigned char *r;
        /* relaxed: only uniqueness matters, which the RMW gives */
        s = atomic_fetch_add_explicit(&t->next_slot, 1, memory_order_relaxed);
        if (unlikely(s >= HIVE__MAX_SLOTS)) {
            atomic_fetch_sub_explicit(&t->next_slot, 1, memory_order_relaxed);
            return hive__fail(HIVE_ENOMEM, "store: 2^30 = %u objects are live, the most one engine "
                              "can hold", HIVE__MAX_SLOTS);
        }
        if (unlikely(!chunk_ready(t, s)))
            return HIVE_ENOMEM;              /* slot s stays a hole; the next take maps again */
        if (unlikely((s + 1) % REGION_SLOTS == 0)) {   /* the last slot of its region: */
            atomic_store_explicit(&t->settling, true, memory_order_relaxed);   /* see close */
            hive__settle_later(&t->settle[s / REGION_SLOTS],   /* every one handed out */
                               rec_at(t, s + 1 - REGION_SLOTS));
        }
        /* A slot never handed out: its record is zero (a fresh chunk), so
         * its first id has generation 1, written without a read first. A
         * frontier page's first touch must be a write: a read maps the
         * shared zero page, and the write after it copies that page and
         * flushes the old entry from the TLB of every CPU that runs a
         * thread of the process - an IPI to each, ~18 us a page on a
         * 2-vCPU KVM guest (issue 10: one such fault per 32 records made a
         * fresh engine's first ~200k synchronous tasks cost ~0.9 us
         * instead of ~0.35). */
        r = rec_at(t, s);
        *id = stamp_gen(t, r, s, 1);
        *rec = r;
        return HIVE_OK;
    }
    unsigned char *r = rec_at(t, s);
    *id = stamp(t, r, s);
    *rec = r;
    return HIVE_OK;
}

uint64_t hive__handles_renew(hive__handles_t *t, void *rec)
{
    uint64_t last;
    memcpy(&last, (unsigned char *)rec + HIVE__REC_ID, sizeof last);
    return stamp(t, rec, hive__handles_slot_of(last));   /* a used slot: its id names it */
}
void hive__handles_give(hive__handles_t *t, uint64_t id)
{
    _Atomic uint32_t *key = hive__handles_key(rec_at(t, hive__handles_slot_of(id)));
    uint32_t s1 = hive__handles_slot_of(id) + 1;
    /* relaxed: the head is read again by the CAS */
    uint64_t head = atomic_load_explicit(&t->free_head, memory_order_relaxed);
    uint64_t neu;
    do {
        /* relaxed: published by the CAS's release below */
        atomic_store_explicit(key, (uint32_t)head, memory_order_relaxed);
        neu = (((head >> 32) + 1) << 32) | s1;
        /* release: our link (and the record's id, its generation) before
         * the slot is poppable */
    } while (!atomic_compare_exchange_weak_explicit(&t->free_head, &head, neu, memory_order_release,
                                                    memory_order_relaxed));
}

void hive__handles_give_linked(hive__handles_t *t, uint64_t first_id, void *last_rec)
{
    _Atomic uint32_t *last = hive__handles_key(last_rec);
    uint32_t first1 = hive__handles_slot_of(first_id) + 1;
    /* relaxed: the head is read again by the CAS */
    uint64_t head = atomic_load_explicit(&t->free_head, memory_order_relaxed);
    uint64_t neu;
    do {
        /* relaxed: published by the CAS's release below */
        atomic_store_explicit(last, (uint32_t)head, memory_order_relaxed);
        neu = (((head >> 32) + 1) << 32) | first1;
        /* release: every link of the chain (written by its owner before
         * this call, on this thread or handed to it through a release
         * such as call_rcu's queue) and every record's id before the slots
         * are poppable */
    } while (!atomic_compare_exchange_weak_explicit(&t->free_head, &head, neu, memory_order_release,
                                                    memory_order_relaxed));
}

/* ------------------------------------------------------------------ caches
 * (handles.h). The owner's local list is plain; nlocal is written by the
 * owner alone (relaxed load and store) and read by givers as a hint. */

static inline void add_nlocal(hive__handles_cache_t *c, int32_t d)
{
    /* relaxed: a hint for givers (cache_room) */
    atomic_store_explicit(&c->nlocal, atomic_load_explicit(&c->nlocal, memory_order_relaxed) + d,
                          memory_order_relaxed);
}

/* The owner's local list is empty: take the inbox's chains as the new
 * list; 0 if there are none. */
static uint32_t take_inbox(hive__handles_cache_t *c)
{
    /* relaxed: a look before the exchange, which writes the givers' line */
    if (atomic_load_explicit(&c->inbox, memory_order_relaxed) == 0) {
        /* nothing held: the count starts again from the truth (a chain
         * taken by someone else, store.c's reclaim, left it high) */
        atomic_store_explicit(&c->nlocal, 0, memory_order_relaxed);
        return 0;
    }
    /* acquire: pairs with the givers' pushes (seq_cst), so every link of
     * their chains, and the records' last owners' writes, are ours */
    uint32_t s1 = atomic_exchange_explicit(&c->inbox, 0, memory_order_acquire);
    /* relaxed: a count; a giver adds before it pushes, so a chain taken
     * here may be counted at the next take instead (a hint either way) */
    add_nlocal(c, atomic_exchange_explicit(&c->ninbox, 0, memory_order_relaxed));
    return s1;
}

int hive__handles_take_cached(hive__handles_t *t, hive__handles_cache_t *c, uint64_t *id, void **rec)
{
    /* relaxed: the owner's own word (atomic only so that a checker may
     * look at a quiet cache) */
    uint32_t s1 = atomic_load_explicit(&c->local, memory_order_relaxed);
    if (unlikely(s1 == 0) && (s1 = take_inbox(c)) == 0) {
        /* relaxed: a hint the owner alone writes (handles.h, limit) */
        uint32_t lim = atomic_load_explicit(&c->limit, memory_order_relaxed);
        if (lim < HIVE__CACHE_MAX)
            atomic_store_explicit(&c->limit, lim < HIVE__CACHE_MIN ? 2 * HIVE__CACHE_MIN : 2 * lim,
                                  memory_order_relaxed);
        return hive__handles_take(t, id, rec);
    }
    unsigned char *r = rec_at(t, s1 - 1);
    /* relaxed: the link was written by this thread (flush_list, or this
     * function's list) or before the push our exchange acquired; a stale
     * finder only loads the word */
    uint32_t next = atomic_load_explicit(hive__handles_key(r), memory_order_relaxed);
    atomic_store_explicit(&c->local, next, memory_order_relaxed);   /* relaxed: as above */
    add_nlocal(c, -1);
    if (next != 0)
        prefetch_rec(t, next - 1);   /* the next take's record (most often in this core's cache) */
    *id = stamp(t, r, s1 - 1);
    *rec = r;
    return HIVE_OK;
}

bool hive__handles_cache_room(const hive__handles_cache_t *c)
{
    /* relaxed: a hint (a cache may pass the bound by the chains given at
     * the same moment) */
    int32_t n = atomic_load_explicit(&c->nlocal, memory_order_relaxed);
    n = n > 0 ? n : 0;
    uint32_t lim = atomic_load_explicit(&c->limit, memory_order_relaxed);
    return (uint32_t)n + (uint32_t)atomic_load_explicit(&c->ninbox, memory_order_relaxed) <
           (lim < HIVE__CACHE_MIN ? HIVE__CACHE_MIN : lim);
}

void hive__handles_give_cached(hive__handles_t *t, hive__handles_cache_t *c, uint64_t first_id,
                               void *last_rec, uint32_t n)
{
    (void)t;
    /* relaxed: a hint, counted before the slots can be taken */
    atomic_fetch_add_explicit(&c->ninbox, (int32_t)n, memory_order_relaxed);
    _Atomic uint32_t *last = hive__handles_key(last_rec);
    uint32_t first1 = hive__handles_slot_of(first_id) + 1;
    /* relaxed: the CAS reads the head again */
    uint32_t head = atomic_load_explicit(&c->inbox, memory_order_relaxed);
    do {
        /* relaxed: published by the CAS below */
        atomic_store_explicit(last, head, memory_order_relaxed);
        /* seq_cst: release for the chain's links and records (the owner's
         * exchange acquires them), and ordered before the caller's seq_cst
         * look at the owner's claim (store.c, free_cb) */
    } while (!atomic_compare_exchange_weak_explicit(&c->inbox, &head, first1, memory_order_seq_cst,
                                                    memory_order_relaxed));
}

/* Give the list from slot s1 - 1 on (ours alone) to the shared stack. */
static void give_list(hive__handles_t *t, uint32_t s1)
{
    if (s1 == 0)
        return;
    unsigned char *last = rec_at(t, s1 - 1);
    uint32_t next;
    /* relaxed: ours alone (as take_cached's read) */
    while ((next = atomic_load_explicit(hive__handles_key(last), memory_order_relaxed)) != 0)
        last = rec_at(t, next - 1);
    hive__handles_give_linked(t, s1 - 1, last);
}

void hive__handles_cache_return_inbox(hive__handles_t *t, hive__handles_cache_t *c)
{
    /* relaxed look first; acquire: as take_inbox */
    if (atomic_load_explicit(&c->inbox, memory_order_relaxed) != 0)
        give_list(t, atomic_exchange_explicit(&c->inbox, 0, memory_order_acquire));
}

void hive__handles_cache_return_local(hive__handles_t *t, hive__handles_cache_t *c)
{
    /* relaxed: the owner's word (as take_cached) */
    give_list(t, atomic_load_explicit(&c->local, memory_order_relaxed));
    atomic_store_explicit(&c->local, 0, memory_order_relaxed);
    atomic_store_explicit(&c->nlocal, 0, memory_order_relaxed);   /* relaxed: a hint */
}

void hive__handles_give_many(hive__handles_t *t, const uint64_t *ids, size_t n)
{
    if (n == 0)
        return;
    /* link them first: they are ours alone until the push */
    for (size_t i = 0; i + 1 < n; i++)
        hive__handles_link(rec_at(t, hive__handles_slot_of(ids[i])), ids[i + 1]);
    hive__handles_give_linked(t, ids[0], rec_at(t, hive__handles_slot_of(ids[n - 1])));
}

void hive__handles_each(hive__handles_t *t, void (*fn)(void *rec, void *arg), void *arg)
{
    /* relaxed: callers run this when the records they care about were
     * published before (shutdown's sweep, close) */
    uint32_t n = atomic_load_explicit(&t->next_slot, memory_order_relaxed);
    if (n > HIVE__MAX_SLOTS)
        n = HIVE__MAX_SLOTS;
    for (uint32_t s = 0; s < n; s++) {
        unsigned char *c = atomic_load_explicit(&t->dir[s >> HIVE__CHUNK_BITS], memory_order_acquire);
        if (c == NULL) {                    /* a chunk that failed to map: skip it */
            s |= CHUNK_SLOTS - 1;
            continue;
        }
        unsigned char *r = c + (size_t)(s & (CHUNK_SLOTS - 1)) * HIVE__REC_BYTES;
        /* acquire: as hive__handles_get */
        uint32_t k = atomic_load_explicit(hive__handles_key(r), memory_order_acquire);
        if ((k & HIVE__KEY_PUB) || (hive__handles_key_is_priv(k) && hive__handles_promote(r, k)))
            fn(r, arg);
    }
}
