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
 * The shared list is a bounded ring of batch pointers (ds/ring.h, Vyukov's
 * bounded MPMC queue): both ends are O(1), and no thread ever reads a block
 * it does not own, so there is no ABA hazard and no read of a block that is
 * being reused (the Treiber-stack pop hazard). When the ring is full (a burst of frees larger than the
 * ring), batches spill onto a mutex-guarded list that takers look at only
 * when the ring is empty: memory is never stranded in one thread's cache,
 * and the lock is off every path a ring of 4096 batches can absorb. When
 * both are empty the owner carves new memory.
 */
#ifndef HIVE_DS_BATCH_H
#define HIVE_DS_BATCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "ds/ring.h"
#include "util/common.h"

#ifdef HIVE_ASAN            /* util/common.h: gcc's and clang's ASan alike */
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
    struct hive__fblock *next_batch;            /* on the spill list (under its lock) */
    size_t n;                                   /* a batch's first block: blocks in the batch
                                                   (so a taker need not walk cold blocks to
                                                   count them); ordered like next */
} hive__fblock_t;

#define HIVE_FBLOCK_LINKS sizeof(hive__fblock_t)  /* bytes of a free block kept unpoisoned */

#define HIVE_BATCH_SLOTS 4096               /* batches the shared ring holds */

typedef struct hive__batchlist {
    hive__ring_t    ring;
    hive__rslot_t   slots[HIVE_BATCH_SLOTS];
    HIVE_ALIGNED _Atomic size_t nspill;     /* batches on the spill list */
    pthread_mutex_t spill_lock;
    hive__fblock_t *spill;                  /* batches linked by next_batch */
} hive__batchlist_t;

typedef struct hive__fcache {
    hive__fblock_t *head;
    unsigned        count;
} hive__fcache_t;

static inline void hive__batchlist_init(hive__batchlist_t *l)
{
    hive__ring_init(&l->ring, l->slots, HIVE_BATCH_SLOTS);
    atomic_init(&l->nspill, 0);
    pthread_mutex_init(&l->spill_lock, NULL);
    l->spill = NULL;
}

static inline void hive__batchlist_destroy(hive__batchlist_t *l)
{
    pthread_mutex_destroy(&l->spill_lock);
}

static inline hive__fblock_t *hive__fb_next(hive__fblock_t *b)
{
    return atomic_load_explicit(&b->next, memory_order_relaxed);
}

static inline void hive__fb_set_next(hive__fblock_t *b, hive__fblock_t *n)
{
    atomic_store_explicit(&b->next, n, memory_order_relaxed);
}

/* Hand a batch of n blocks to the shared list: the ring, or the spill list
 * if full. */
static inline void hive__batch_give(hive__batchlist_t *l, hive__fblock_t *batch, size_t n)
{
    batch->n = n;
    if (likely(hive__ring_put(&l->ring, batch)))
        return;
    pthread_mutex_lock(&l->spill_lock);
    batch->next_batch = l->spill;
    l->spill = batch;
    atomic_fetch_add_explicit(&l->nspill, 1, memory_order_relaxed);
    pthread_mutex_unlock(&l->spill_lock);
}

/* Take a batch: from the ring, else from the spill list; NULL if none. */
static inline hive__fblock_t *hive__batch_take(hive__batchlist_t *l)
{
    hive__fblock_t *b = hive__ring_take(&l->ring);
    /* relaxed: a hint; the lock orders the list itself */
    if (b != NULL || atomic_load_explicit(&l->nspill, memory_order_relaxed) == 0)
        return b;
    pthread_mutex_lock(&l->spill_lock);
    b = l->spill;
    if (b != NULL) {
        l->spill = b->next_batch;
        atomic_fetch_sub_explicit(&l->nspill, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&l->spill_lock);
    return b;
}

static inline void *hive__fcache_pop(hive__fcache_t *c, size_t block_size)
{
    hive__fblock_t *b = c->head;
    if (b == NULL)
        return NULL;
    c->head = hive__fb_next(b);
    c->count--;
    /* the next pop's block is likely cold (freed by another thread, a
     * grace period ago): ask for its line now, while this one is used */
    __builtin_prefetch(c->head);
    HIVE_UNPOISON(b, block_size);
    return b;
}

/* Fill an empty cache from the shared list; false if that is empty too. */
static inline bool hive__fcache_refill(hive__fcache_t *c, hive__batchlist_t *l)
{
    hive__fblock_t *batch = hive__batch_take(l);
    if (batch == NULL)
        return false;
    c->head = batch;
    c->count = (unsigned)batch->n;
    return true;
}

/* Free a block into the cache; at 2*HIVE_BATCH the older HIVE_BATCH go to l. */
static inline void hive__fcache_push(hive__fcache_t *c, void *p, size_t block_size,
                                     hive__batchlist_t *l)
{
    hive__fblock_t *b = p;
    atomic_init(&b->next, c->head);
    HIVE_POISON((char *)b + HIVE_FBLOCK_LINKS, block_size - HIVE_FBLOCK_LINKS);
    c->head = b;
    if (unlikely(++c->count >= 2 * HIVE_BATCH)) {
        /* keep the HIVE_BATCH most recently freed (cache-hot) blocks */
        hive__fblock_t *keep_last = c->head;
        for (unsigned i = 1; i < HIVE_BATCH; i++)
            keep_last = hive__fb_next(keep_last);
        hive__fblock_t *rest = hive__fb_next(keep_last);
        hive__fb_set_next(keep_last, NULL);
        c->count = HIVE_BATCH;
        hive__batch_give(l, rest, HIVE_BATCH);
    }
}

/* Split the chain from b into batches of HIVE_BATCH and give them to l. */
static inline void hive__batch_give_chain(hive__batchlist_t *l, hive__fblock_t *b)
{
    while (b != NULL) {
        hive__fblock_t *last = b;
        size_t n = 1;
        for (; n < HIVE_BATCH && hive__fb_next(last) != NULL; n++)
            last = hive__fb_next(last);
        hive__fblock_t *next = hive__fb_next(last);
        hive__fb_set_next(last, NULL);
        hive__batch_give(l, b, n);
        b = next;
    }
}

/* Give the whole cache to the shared list (thread exit, engine switch). */
static inline void hive__fcache_flush(hive__fcache_t *c, hive__batchlist_t *l)
{
    hive__batch_give_chain(l, c->head);
    c->head = NULL;
    c->count = 0;
}

/* Carve mem (n bytes) into blocks of block_size, linked into one chain: the
 * first HIVE_BATCH go to the (empty) cache, the rest to the shared list. */
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
    size_t keep = nblocks < HIVE_BATCH ? nblocks : HIVE_BATCH;
    hive__fblock_t *keep_last = (hive__fblock_t *)(void *)(mem + (keep - 1) * block_size);
    hive__fblock_t *rest = hive__fb_next(keep_last);
    hive__fb_set_next(keep_last, NULL);
    c->head = (hive__fblock_t *)(void *)mem;
    c->count = (unsigned)keep;
    hive__batch_give_chain(l, rest);
}

#endif
