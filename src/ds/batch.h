/*
 * batch.h - free blocks moving between per-thread caches and a shared
 * lock-free list of batches. ds/pool.c (queue nodes, task records) and
 * arena.c (small payloads) both allocate this way.
 *
 * A cache is a thread's private singly linked free list with a count. Free
 * pushes on it; at its limit (2*HIVE_BATCH blocks), the older HIVE_BATCH
 * leave as one batch for the shared list. Alloc pops from it; when it is
 * empty it takes a batch from the shared list, or its owner carves fresh
 * memory.
 *
 * The shared list is a bounded ring of batch pointers in the style of
 * Dmitry Vyukov's bounded MPMC queue: each slot carries a sequence number
 * that says whose turn it is (a putter at position p waits for seq == p, a
 * getter for seq == p + 1). A thread claims a position with one CAS on the
 * ring's put or get counter, then hands the slot on with a release store of
 * the next sequence. Both ends are O(1), and no thread ever reads a block it
 * does not own, so there is no ABA hazard and no read of a block that is
 * being reused. When the ring is full the cache simply keeps its blocks
 * (its limit doubles); when it is empty the owner carves new memory.
 */
#ifndef HIVE_DS_BATCH_H
#define HIVE_DS_BATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/common.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define HIVE_POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define HIVE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define HIVE_POISON(p, n)   ((void)(p), (void)(n))
#define HIVE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define HIVE_BATCH 64

/* A free block's first bytes. Atomic because a block changes owner between
 * threads; every hand-over is ordered by the shared ring's release/acquire,
 * so relaxed accesses suffice for the link itself. */
typedef struct hive__fblock {
    _Atomic(struct hive__fblock *) next;        /* next free block in this cache or batch */
} hive__fblock_t;

#define HIVE_FBLOCK_LINKS sizeof(hive__fblock_t)  /* bytes of a free block kept unpoisoned */

#define HIVE_BATCH_SLOTS 4096               /* batches the shared ring holds */

typedef struct hive__bslot {
    _Atomic size_t  seq;
    hive__fblock_t *batch;
} hive__bslot_t;

typedef struct hive__batchlist {
    HIVE_ALIGNED _Atomic size_t put;        /* next position to fill */
    HIVE_ALIGNED _Atomic size_t get;        /* next position to empty */
    HIVE_ALIGNED hive__bslot_t  slot[HIVE_BATCH_SLOTS];
} hive__batchlist_t;

typedef struct hive__fcache {
    hive__fblock_t *head;
    unsigned        count;
    unsigned        limit;                  /* hand a batch on at this count; 0: 2*HIVE_BATCH */
} hive__fcache_t;

static inline void hive__batchlist_init(hive__batchlist_t *l)
{
    atomic_init(&l->put, 0);
    atomic_init(&l->get, 0);
    for (size_t i = 0; i < HIVE_BATCH_SLOTS; i++) {
        atomic_init(&l->slot[i].seq, i);
        l->slot[i].batch = NULL;
    }
}

static inline hive__fblock_t *hive__fb_next(hive__fblock_t *b)
{
    return atomic_load_explicit(&b->next, memory_order_relaxed);
}

static inline void hive__fb_set_next(hive__fblock_t *b, hive__fblock_t *n)
{
    atomic_store_explicit(&b->next, n, memory_order_relaxed);
}

/* Put a batch (a chain linked by next) in the ring; false if it is full. */
static inline bool hive__batch_put(hive__batchlist_t *l, hive__fblock_t *batch)
{
    /* relaxed: the counter only picks a slot; the slot's seq orders the data */
    size_t pos = atomic_load_explicit(&l->put, memory_order_relaxed);
    for (;;) {
        hive__bslot_t *s = &l->slot[pos & (HIVE_BATCH_SLOTS - 1)];
        /* acquire: the getter that freed this slot is done reading it */
        size_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)pos;
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&l->put, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                s->batch = batch;
                /* release: the batch pointer and every write the previous
                 * owner made to its blocks reach the getter */
                atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
                return true;
            }
        } else if (dif < 0) {
            return false;                   /* full */
        } else {
            pos = atomic_load_explicit(&l->put, memory_order_relaxed);
        }
    }
}

/* Take one batch from the ring, or NULL if it is empty. */
static inline hive__fblock_t *hive__batch_take(hive__batchlist_t *l)
{
    size_t pos = atomic_load_explicit(&l->get, memory_order_relaxed);
    for (;;) {
        hive__bslot_t *s = &l->slot[pos & (HIVE_BATCH_SLOTS - 1)];
        /* acquire: pairs with the putter's release */
        size_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)(pos + 1);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&l->get, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                hive__fblock_t *b = s->batch;
                /* release: our read of batch is done before a putter reuses the slot */
                atomic_store_explicit(&s->seq, pos + HIVE_BATCH_SLOTS, memory_order_release);
                return b;
            }
        } else if (dif < 0) {
            return NULL;                    /* empty (or a putter mid-way: treat as empty) */
        } else {
            pos = atomic_load_explicit(&l->get, memory_order_relaxed);
        }
    }
}

static inline void *hive__fcache_pop(hive__fcache_t *c, size_t block_size)
{
    hive__fblock_t *b = c->head;
    if (b == NULL)
        return NULL;
    c->head = hive__fb_next(b);
    c->count--;
    HIVE_UNPOISON(b, block_size);
    return b;
}

/* Fill an empty cache from the shared list; false if that is empty too. */
static inline bool hive__fcache_refill(hive__fcache_t *c, hive__batchlist_t *l)
{
    hive__fblock_t *batch = hive__batch_take(l);
    if (batch == NULL)
        return false;
    unsigned n = 0;
    for (hive__fblock_t *b = batch; b != NULL; b = hive__fb_next(b))
        n++;
    c->head = batch;
    c->count = n;
    return true;
}

/* Free a block into the cache; at the limit the older HIVE_BATCH go to l. */
static inline void hive__fcache_push(hive__fcache_t *c, void *p, size_t block_size,
                                     hive__batchlist_t *l)
{
    hive__fblock_t *b = p;
    atomic_init(&b->next, c->head);
    HIVE_POISON((char *)b + HIVE_FBLOCK_LINKS, block_size - HIVE_FBLOCK_LINKS);
    c->head = b;
    if (c->limit == 0)
        c->limit = 2 * HIVE_BATCH;
    if (unlikely(++c->count >= c->limit)) {
        /* keep the HIVE_BATCH most recently freed (cache-hot) blocks */
        hive__fblock_t *keep_last = c->head;
        for (unsigned i = 1; i < HIVE_BATCH; i++)
            keep_last = hive__fb_next(keep_last);
        hive__fblock_t *rest = hive__fb_next(keep_last);
        hive__fb_set_next(keep_last, NULL);
        if (hive__batch_put(l, rest)) {
            c->count = HIVE_BATCH;
            c->limit = 2 * HIVE_BATCH;
        } else {
            hive__fb_set_next(keep_last, rest);     /* ring full: keep them, look later */
            c->limit *= 2;
        }
    }
}

/* Split the chain from b into batches of HIVE_BATCH and put them in l;
 * returns what did not fit (NULL if everything did). */
static inline hive__fblock_t *hive__batch_put_chain(hive__batchlist_t *l, hive__fblock_t *b)
{
    while (b != NULL) {
        hive__fblock_t *last = b;
        for (unsigned i = 1; i < HIVE_BATCH && hive__fb_next(last) != NULL; i++)
            last = hive__fb_next(last);
        hive__fblock_t *next = hive__fb_next(last);
        hive__fb_set_next(last, NULL);
        if (!hive__batch_put(l, b)) {
            hive__fb_set_next(last, next);
            return b;
        }
        b = next;
    }
    return NULL;
}

/* Give the whole cache to the shared list (thread exit, engine switch).
 * Blocks that do not fit in a full ring stay in the cache. */
static inline void hive__fcache_flush(hive__fcache_t *c, hive__batchlist_t *l)
{
    c->head = hive__batch_put_chain(l, c->head);
    c->count = 0;
    for (hive__fblock_t *b = c->head; b != NULL; b = hive__fb_next(b))
        c->count++;
}

/* Carve mem (n bytes) into blocks of block_size, linked into one chain: the
 * first HIVE_BATCH go to the (empty) cache, the rest to the shared list in
 * batches (what does not fit stays in the cache). */
static inline void hive__fcache_carve(hive__fcache_t *c, char *mem, size_t n, size_t block_size,
                                      hive__batchlist_t *l)
{
    size_t nblocks = n / block_size;
    if (nblocks == 0)
        return;
    for (size_t i = 0; i < nblocks; i++) {
        hive__fblock_t *b = (hive__fblock_t *)(void *)(mem + i * block_size);
        atomic_init(&b->next, i + 1 < nblocks ? (hive__fblock_t *)(void *)(mem + (i + 1) * block_size)
                                              : NULL);
            HIVE_POISON((char *)b + HIVE_FBLOCK_LINKS, block_size - HIVE_FBLOCK_LINKS);
    }
    hive__fblock_t *first = (hive__fblock_t *)(void *)mem;
    size_t keep = nblocks < HIVE_BATCH ? nblocks : HIVE_BATCH;
    hive__fblock_t *keep_last = (hive__fblock_t *)(void *)(mem + (keep - 1) * block_size);
    hive__fblock_t *rest = hive__fb_next(keep_last);
    hive__fb_set_next(keep_last, NULL);
    c->head = first;
    c->count = (unsigned)keep;
    rest = hive__batch_put_chain(l, rest);
    if (rest != NULL) {                      /* ring full: the cache keeps the remainder */
        hive__fb_set_next(keep_last, rest);
        for (hive__fblock_t *b = rest; b != NULL; b = hive__fb_next(b))
            c->count++;
    }
}

#endif
