/*
 * handles.h - the object table: an id names a slot, the slot *is* the
 * object's record, and finding an object is one indexed load, no hashing.
 *
 * An id is   bit 63      0 (the store leaves it to its callers: actor
 *                        handles set it)
 *            bits 42..62 the slot's generation, 1 .. 2^21-1
 *            bits 30..41 the table's tag (its engine's serial, 12 bits)
 *            bits 0..29  the slot, 0 .. 2^30-1
 * so an id is never 0, an id of another engine names no slot here (unless
 * the engines' serials are 4096 apart), and a stale id of a reused slot is
 * refused because the record there is published under another generation
 * (it comes round again after 2^21 - 1 reuses of that slot).
 *
 * The table's slots are the records themselves: HIVE__REC_BYTES (128)
 * each, in chunks of 2^17 (16 MiB) found through a directory of 2^13
 * chunk pointers that never moves and stays cached. A lookup is the
 * directory entry and then one line of the record (its header; the
 * inline payload is the adjacent line). Chunks are mapped on 2 MiB
 * boundaries and advised onto huge pages (util/hugemap.h: one TLB entry
 * per 16,384 records), but for the first 2 MiB of the first chunk, so a
 * small engine touches a few 4 KiB pages. Chunks are mapped on demand
 * under a mutex, once per 131,072 slots of high-water mark, and never
 * unmapped while the table lives: a record never moves, and its memory
 * stays readable by any reader at any time.
 *
 * The table owns two words of every record (the rest is its owner's):
 *   id  (offset 0, plain)   the id last handed out for the slot, written
 *                           by take (the generation lives here between
 *                           uses); 0 for a slot never used
 *   key (offset 60, atomic) while the record is findable: HIVE__KEY_PUB
 *                           | bit 63 of its id at bit 30 | its
 *                           generation; while it is on the free stack:
 *                           the next free slot + 1 (< 2^31, 0: none);
 *                           else anything without HIVE__KEY_PUB
 * Publish stores the key (release: every field of the record before it),
 * unpublish clears it, a finder loads it (acquire) and compares it with
 * the key its id calls for: one load decides "findable, and this very
 * object". A finder reads nothing else of the record before that match,
 * so an owner reinitialising a reused record never races with a stale
 * finder; after the match the record's fields are the published ones.
 * Records are freed through RCU: a reader that matched the key just
 * before unpublish still reads a live record until its read-side section
 * ends, and the slot goes back to the free stack only after that grace
 * period, so a record is never reused while a reader might hold it.
 *
 * Free slots form a Treiber stack (the link in the key word) whose head
 * carries a 32-bit tag that every change bumps, so a pop that read a
 * stale link (its slot popped and pushed again meanwhile, or published:
 * the key word is the link's only while the slot is on the stack) fails
 * its CAS instead of corrupting the stack (the ABA problem). A chain of
 * slots can be linked by its owner ahead of its push (hive__handles_link,
 * on the thread that has the records' lines) and pushed later by another
 * thread that writes only the last link (hive__handles_give_linked). A
 * take prefetches the next free slot's record for the take after it.
 * Most slots do not pass through that shared stack: each client thread
 * has a cache of its own (hive__handles_cache_t below), to which its
 * released slots come back.
 */
#ifndef HIVE_HANDLES_H
#define HIVE_HANDLES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/common.h"

#define HIVE__SLOT_BITS   30
#define HIVE__TAG_BITS    12
#define HIVE__GEN_BITS    21
#define HIVE__CHUNK_BITS  17
#define HIVE__MAX_SLOTS   ((uint32_t)1 << HIVE__SLOT_BITS)
#define HIVE__DIR_SIZE    ((size_t)1 << (HIVE__SLOT_BITS - HIVE__CHUNK_BITS))

#define HIVE__REC_BYTES   128        /* a record: the table's slot */
#define HIVE__REC_ID      0          /* offset of its uint64_t id */
#define HIVE__REC_KEY     60         /* offset of its _Atomic uint32_t key */
#define HIVE__KEY_PUB     ((uint32_t)1 << 31)
#define HIVE__KEY_ACTOR   ((uint32_t)1 << 30)
/* A private record (store.h, "private results"): findable by its owner
 * worker without a word written, by anyone else once promoted to PUB.
 * Its key is this bit and the generation, PUB clear: above every free
 * link (slot + 1 <= 2^30, as a generation is never 0), never a PUB key. */
#define HIVE__KEY_PRIV    ((uint32_t)1 << 30)
#define HIVE__KEY_GEN     (((uint32_t)1 << HIVE__GEN_BITS) - 1)

typedef struct hive__handles {
    _Atomic(unsigned char *) *dir;  /* HIVE__DIR_SIZE chunk pointers */
    uint32_t          tag;          /* the table's 12-bit tag */
    pthread_mutex_t   grow;         /* maps chunks */
    struct hive__settle *settle;    /* one per 2 MiB region of slots (util/hugemap.h) */
    _Atomic bool      settling;     /* a settle was queued since the last rcu_barrier */
    HIVE_ALIGNED _Atomic uint64_t free_head;   /* stack tag << 32 | (slot + 1), 0 slot: empty */
    HIVE_ALIGNED _Atomic uint32_t next_slot;   /* slots ever handed out (the high-water mark) */
} hive__handles_t;

/* A thread's cache of free slots (store.c keeps one per client thread, in
 * its shard): slots that thread released come back to it after their
 * grace period, so a put takes a record whose lines are still in its own
 * core's cache and writes no word another thread writes, where the free
 * stack's head and its records would move between cores on every put.
 *
 *   local   the owner's list (plain: only the owner takes from it), linked
 *           through the key words as the free stack is
 *   inbox   chains given back for the owner (hive__handles_give_cached:
 *           the call_rcu thread, once per chain), pushed with a CAS and
 *           taken whole by the owner with one exchange: push-only and
 *           take-all, so no ABA and no tag
 *   counts  how many slots it holds (nlocal + ninbox, a hint for givers,
 *           who send chains to the shared stack instead once it holds its
 *           limit)
 *   limit   HIVE__CACHE_MIN slots at first; doubled (up to HIVE__CACHE_MAX)
 *           whenever its owner finds the cache empty and takes from the
 *           shared stack: a thread that puts and releases at a high rate
 *           has that many records on their way back (released, waiting for
 *           their grace period: ~10 ms at 10 M/s is 10^5 records), and its
 *           cache grows until it holds them all; a thread that only
 *           releases keeps HIVE__CACHE_MIN
 *
 * A cache is its owner's alone to take from; hive__handles_cache_return_local
 * and _return_inbox give everything in it to the shared stack (the owner
 * leaving). */
#define HIVE__CACHE_MIN 1024u       /* 128 KiB of records */
#define HIVE__CACHE_MAX 131072u     /* 16 MiB of records */
typedef struct hive__handles_cache {
    _Atomic uint32_t  local;        /* the owner's first free slot + 1; 0: none (only the
                                       owner reads or writes it: relaxed, plain moves) */
    _Atomic int32_t   nlocal;       /* slots on local (the owner writes; givers read) */
    HIVE_ALIGNED _Atomic uint32_t inbox;   /* first slot + 1 of chains given back; 0: none */
    _Atomic int32_t   ninbox;       /* slots given to inbox since the owner last took it */
    _Atomic uint32_t  limit;        /* the most givers give it; 0: HIVE__CACHE_MIN (the
                                       owner writes, givers read) */
} hive__handles_cache_t;

/* Open a table with the given tag (its low 12 bits); HIVE_ENOMEM. Close
 * runs an rcu_barrier first (settles skipped) if a full region's settle may
 * still be queued: clear settling after a barrier of your own to spare it;
 * then it waits for the settler to let go of its regions.
 * Not from an RCU read section or callback. */
int  hive__handles_open(hive__handles_t *t, uint32_t tag);
void hive__handles_close(hive__handles_t *t);

/* A free slot: its record in *rec (HIVE__REC_BYTES, 64-byte aligned; the
 * id word set to the new id, the key word not PUB, everything else as the
 * last owner left it, or zero) and the id it now stands for in *id;
 * HIVE_ENOMEM (with the sentence) past 2^30 slots or if a chunk cannot be
 * mapped. Lock-free but for the mapping of a new chunk. */
int  hive__handles_take(hive__handles_t *t, uint64_t *id, void **rec);

/* Give id's slot back (its record was freed, or never published; the
 * caller owns it until this returns). */
void hive__handles_give(hive__handles_t *t, uint64_t id);
/* Give n ids' slots back with one push. */
void hive__handles_give_many(hive__handles_t *t, const uint64_t *ids, size_t n);


static inline uint32_t hive__handles_slot_of(uint64_t id)
{
    return (uint32_t)(id & (HIVE__MAX_SLOTS - 1));
}

static inline _Atomic uint32_t *hive__handles_key(void *rec)
{
    return (_Atomic uint32_t *)((unsigned char *)rec + HIVE__REC_KEY);
}

/* A chain given back in two steps, so that the records' lines are written
 * by whoever has them in its cache and the giver touches one of them: the
 * owner of a chain of unpublished records links each to the next
 * (hive__handles_link: the slot's key word, which no finder matches any
 * more, becomes the free stack's link to come), and later anyone pushes
 * the whole chain at once with hive__handles_give_linked(first record's
 * id, last record), writing only the last record's link. The caller owns
 * the chain's records until the push. */
static inline void hive__handles_link(void *rec, uint64_t next_id)
{
    /* relaxed: published by give_linked's release CAS (the chain is the
     * caller's until then; a stale finder loads a value without PUB) */
    atomic_store_explicit(hive__handles_key(rec), hive__handles_slot_of(next_id) + 1,
                          memory_order_relaxed);
}
void hive__handles_give_linked(hive__handles_t *t, uint64_t first_id, void *last_rec);

/* A free slot for cache c's owner (the caller): from its local list, else
 * the chains in its inbox, else as hive__handles_take. */
int  hive__handles_take_cached(hive__handles_t *t, hive__handles_cache_t *c, uint64_t *id,
                               void **rec);
/* Does cache c hold fewer slots than its limit (a moment's view)? */
bool hive__handles_cache_room(const hive__handles_cache_t *c);
/* Give a linked chain of n slots (as hive__handles_give_linked) to c's
 * inbox. The push is seq_cst: store.c decides after it, by a seq_cst load
 * of the owner's claim, whether the owner can still see it. */
void hive__handles_give_cached(hive__handles_t *t, hive__handles_cache_t *c, uint64_t first_id,
                               void *last_rec, uint32_t n);
/* Take c's inbox (anyone: the exchange makes it the caller's) and give it
 * to the shared stack. */
void hive__handles_cache_return_inbox(hive__handles_t *t, hive__handles_cache_t *c);
/* Give c's local list to the shared stack (its owner, or whoever owns it
 * now: the list is plain) and empty it. */
void hive__handles_cache_return_local(hive__handles_t *t, hive__handles_cache_t *c);

/* The key a record published under id carries. */
static inline uint32_t hive__handles_key_of(uint64_t id)
{
    return HIVE__KEY_PUB | ((uint32_t)(id >> 63) << 30) |
           ((uint32_t)(id >> (HIVE__SLOT_BITS + HIVE__TAG_BITS)) & (((uint32_t)1 << HIVE__GEN_BITS) - 1));
}

/* The key a private record of id carries (ids with bit 63 are never private). */
static inline uint32_t hive__handles_key_priv(uint64_t id)
{
    return HIVE__KEY_PRIV | ((uint32_t)(id >> (HIVE__SLOT_BITS + HIVE__TAG_BITS)) & HIVE__KEY_GEN);
}

/* Is key a private record's (PUB clear, PRIV set, a generation)? */
static inline bool hive__handles_key_is_priv(uint32_t key)
{
    return (key & (HIVE__KEY_PUB | HIVE__KEY_PRIV)) == HIVE__KEY_PRIV && (key & HIVE__KEY_GEN) != 0;
}

/* Make the private record rec (key k, loaded with acquire) public: true if
 * it is now published under the same generation, by us or by another
 * promoter; false if its owner freed it first (the key moved on). The
 * caller must be inside an RCU read-side section: a promoted record is
 * freed through a grace period like any published one. */
static inline bool hive__handles_promote(void *rec, uint32_t k)
{
    uint32_t pub = HIVE__KEY_PUB | (k & HIVE__KEY_GEN);
    /* acq_rel: the CAS against the owner's free (PRIV -> 0) decides who
     * owns the record's fate; acquire (also on failure) as a finder's load */
    return atomic_compare_exchange_strong_explicit(hive__handles_key(rec), &k, pub,
                                                   memory_order_acq_rel, memory_order_acquire) ||
           k == pub;
}

/* The record memory of id's slot (whatever it holds now), or NULL if the
 * id cannot be one of this table's. Never faults: for prefetching. */
static inline void *hive__handles_rec(const hive__handles_t *t, uint64_t id)
{
    if (unlikely(((id >> HIVE__SLOT_BITS) & ((1u << HIVE__TAG_BITS) - 1)) != t->tag))
        return NULL;
    uint32_t s = hive__handles_slot_of(id);
    /* relaxed would do for the chunk's own contents (mapped zeroed and
     * never written but through records); acquire pairs with the release
     * that published the pointer, keeping the mapping's initialisation
     * ordered for tools that do not know mmap zeroes */
    unsigned char *chunk = atomic_load_explicit(&t->dir[s >> HIVE__CHUNK_BITS], memory_order_acquire);
    return chunk != NULL
           ? chunk + (size_t)(s & (((uint32_t)1 << HIVE__CHUNK_BITS) - 1)) * HIVE__REC_BYTES : NULL;
}

/* The record published under id, or NULL. Inside an RCU read-side
 * section (or holding a count on the object). */
static inline void *hive__handles_get(const hive__handles_t *t, uint64_t id)
{
    void *rec = hive__handles_rec(t, id);
    /* acquire: pairs with publish's release, so the record's fields (and
     * its id) are visible once the key matches */
    return rec != NULL &&
           atomic_load_explicit(hive__handles_key(rec), memory_order_acquire) == hive__handles_key_of(id)
           ? rec : NULL;
}

/* Make rec findable under the id in its id word (taken, and perhaps given
 * bit 63 by the caller). */
static inline void hive__handles_publish(void *rec)
{
    uint64_t id;
    __builtin_memcpy(&id, (unsigned char *)rec + HIVE__REC_ID, sizeof id);
    /* release: everything written to rec so far comes first */
    atomic_store_explicit(hive__handles_key(rec), hive__handles_key_of(id), memory_order_release);
}

/* Make rec findable as a private record under the id in its id word. */
static inline void hive__handles_publish_private(void *rec)
{
    uint64_t id;
    __builtin_memcpy(&id, (unsigned char *)rec + HIVE__REC_ID, sizeof id);
    /* release: as hive__handles_publish */
    atomic_store_explicit(hive__handles_key(rec), hive__handles_key_priv(id), memory_order_release);
}

/* The next id of a slot its caller holds unpublished (a private record
 * freed by its owner and taken again at once): the generation moves on,
 * so every id of its earlier lives is refused. Written to the id word. */
uint64_t hive__handles_renew(hive__handles_t *t, void *rec);

static inline void hive__handles_unpublish(void *rec)
{
    /* relaxed: a reader that still matches the old key reads a record kept
     * alive by RCU; nothing is published by clearing */
    atomic_store_explicit(hive__handles_key(rec), 0, memory_order_relaxed);
}

/* Was id handed out by this table at some point (tag and slot in range)? */
static inline bool hive__handles_issued(const hive__handles_t *t, uint64_t id)
{
    /* relaxed: the id reached the caller after it was made, through
     * whatever synchronisation carried it */
    return ((id >> HIVE__SLOT_BITS) & ((1u << HIVE__TAG_BITS) - 1)) == t->tag &&
           (id >> (HIVE__SLOT_BITS + HIVE__TAG_BITS) & ((1u << HIVE__GEN_BITS) - 1)) != 0 &&
           hive__handles_slot_of(id) < atomic_load_explicit(&t->next_slot, memory_order_relaxed);
}

/* Call fn(rec, arg) for every record published now (inside an RCU
 * read-side section, or with the table quiet). Private records it meets
 * are promoted first (those their owner frees meanwhile are skipped). */
void hive__handles_each(hive__handles_t *t, void (*fn)(void *rec, void *arg), void *arg);

#endif
