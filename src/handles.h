/*
 * handles.h - the object table: an id names a slot, and finding an object
 * is one indexed load, no hashing.
 *
 * An id is   bit 63      0 (the store leaves it to its callers: actor
 *                        handles set it)
 *            bits 42..62 the slot's generation, 1 .. 2^21-1
 *            bits 30..41 the table's tag (its engine's serial, 12 bits)
 *            bits 0..29  the slot, 0 .. 2^30-1
 * so an id is never 0, an id of another engine names no slot here (unless
 * the engines' serials are 4096 apart), and a stale id of a reused slot is
 * refused because the record there has another id (the generation moved
 * on; it comes round again after 2^21 - 1 reuses of that slot).
 *
 * Slots live in chunks of 2^17 (16 bytes each: 2 MiB), found through a
 * directory of 2^13 chunk pointers that never moves: a lookup is two
 * dependent loads (directory, slot) and the record's. Chunks after the
 * first are 2 MiB-aligned huge pages (util/hugemap.h: one TLB entry per
 * 131,072 slots); the first is ordinary pages, so a small engine does not
 * pay 2 MiB for a few slots. Chunks are mapped on
 * demand under a mutex, once per 131,072 slots of high-water mark, and never
 * unmapped while the table lives, so a slot's memory stays readable by any
 * reader at any time.
 *
 * A slot holds the record pointer while the object is findable: set by
 * publish (release: the record's fields before it), cleared by unpublish.
 * Readers load it (acquire) inside an RCU read-side section and compare
 * the record's id with theirs; the record itself is freed through RCU, so
 * a reader that loaded the pointer just before unpublish still reads a
 * live record. Free slots form a Treiber stack whose head carries a 32-bit
 * tag that every change bumps, so a pop that read a stale next link (its
 * slot popped and pushed again meanwhile) fails its CAS instead of
 * corrupting the stack (the ABA problem). A slot goes back to the stack
 * only when its record is freed (after its grace period), so a record
 * and its slot are never both reused while a reader might hold them.
 */
#ifndef HIVE_HANDLES_H
#define HIVE_HANDLES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/common.h"

#define HIVE__SLOT_BITS   30
#define HIVE__TAG_BITS    12
#define HIVE__GEN_BITS    21
#define HIVE__CHUNK_BITS  17
#define HIVE__MAX_SLOTS   ((uint32_t)1 << HIVE__SLOT_BITS)
#define HIVE__DIR_SIZE    ((size_t)1 << (HIVE__SLOT_BITS - HIVE__CHUNK_BITS))

typedef struct hive__hslot {
    _Atomic(void *)   obj;          /* the record while findable, else NULL */
    _Atomic uint32_t  next_free;    /* free: the next free slot + 1 (0: none) */
    uint32_t          gen;          /* the generation of the id last handed out */
} hive__hslot_t;

typedef struct hive__handles {
    _Atomic(hive__hslot_t *) *dir;   /* HIVE__DIR_SIZE chunk pointers */
    uint32_t          tag;          /* the table's 12-bit tag */
    pthread_mutex_t   grow;         /* maps chunks */
    HIVE_ALIGNED _Atomic uint64_t free_head;   /* stack tag << 32 | (slot + 1), 0 slot: empty */
    HIVE_ALIGNED _Atomic uint32_t next_slot;   /* slots ever handed out (the high-water mark) */
} hive__handles_t;

/* Open a table with the given tag (its low 12 bits); HIVE_ENOMEM. */
int  hive__handles_open(hive__handles_t *t, uint32_t tag);
void hive__handles_close(hive__handles_t *t);

/* A free slot and the id it now stands for; HIVE_ENOMEM (with the
 * sentence) past 2^30 slots or if a chunk cannot be mapped. Lock-free but
 * for the mapping of a new chunk. */
int  hive__handles_take(hive__handles_t *t, uint64_t *id);

/* Give id's slot back (its record was freed, or never published). */
void hive__handles_give(hive__handles_t *t, uint64_t id);
/* Give n ids' slots back with one push. */
void hive__handles_give_many(hive__handles_t *t, const uint64_t *ids, size_t n);

static inline uint32_t hive__handles_slot_of(uint64_t id)
{
    return (uint32_t)(id & (HIVE__MAX_SLOTS - 1));
}

/* The slot of an id, or NULL if the id cannot be one of this table's. */
static inline hive__hslot_t *hive__handles_slot(const hive__handles_t *t, uint64_t id)
{
    if (unlikely(((id >> HIVE__SLOT_BITS) & ((1u << HIVE__TAG_BITS) - 1)) != t->tag))
        return NULL;
    uint32_t s = hive__handles_slot_of(id);
    /* relaxed load would do for the chunk's own contents (mapped zeroed
     * and never written but through slots); acquire pairs with the
     * release that published the pointer, keeping the mapping's
     * initialisation ordered for tools that do not know mmap zeroes */
    hive__hslot_t *chunk = atomic_load_explicit(&t->dir[s >> HIVE__CHUNK_BITS], memory_order_acquire);
    return chunk != NULL ? &chunk[s & (((uint32_t)1 << HIVE__CHUNK_BITS) - 1)] : NULL;
}

/* The record id names (its record's id compared by the caller), or NULL.
 * Inside an RCU read-side section. */
static inline void *hive__handles_get(const hive__handles_t *t, uint64_t id)
{
    hive__hslot_t *sl = hive__handles_slot(t, id);
    /* acquire: pairs with publish's release, so the record's fields are
     * visible before the caller reads its id */
    return sl != NULL ? atomic_load_explicit(&sl->obj, memory_order_acquire) : NULL;
}

static inline void hive__handles_publish(hive__handles_t *t, uint64_t id, void *obj)
{
    /* release: everything written to obj so far comes first */
    atomic_store_explicit(&hive__handles_slot(t, id)->obj, obj, memory_order_release);
}

static inline void hive__handles_unpublish(hive__handles_t *t, uint64_t id)
{
    /* relaxed: a reader that still sees the old pointer reads a record
     * kept alive by RCU; nothing is published by clearing */
    atomic_store_explicit(&hive__handles_slot(t, id)->obj, NULL, memory_order_relaxed);
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

/* Call fn(obj, arg) for every record published now (inside an RCU
 * read-side section, or with the table quiet). */
void hive__handles_each(hive__handles_t *t, void (*fn)(void *obj, void *arg), void *arg);

#endif
