/*
 * pool.c - the block pool behind pool.h.
 *
 * Per class, a thread's cache is a singly linked free list with a count.
 * free() pushes on it; when it holds 2*BATCH blocks, BATCH of them leave as
 * one linked batch for the class's global list. alloc() pops from it; when it
 * is empty, it takes one batch from the global list, or carves a new chunk.
 *
 * The global list is a stack of batches linked through their first block.
 * Pushing is a CAS loop that never dereferences the old top (so ABA cannot
 * hurt it). Taking is an exchange of the whole stack with NULL: the taker
 * then owns every batch in it, keeps one and pushes the rest back. Because no
 * thread ever reads a block it does not own, there is no ABA problem and no
 * race with a block being reused - the classic Treiber-pop hazard is avoided
 * at the price of other takers briefly seeing an empty list (then they carve
 * or retry; both are correct).
 */
#include "ds/pool.h"
#include "util/common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define NCLASSES   7                 /* 64 .. 4096 */
#define BATCH      64                /* blocks moved between a cache and the global list at once */
#define CHUNK      (256u * 1024u)    /* bytes mapped per refill when everything is empty */

/* A free block's first bytes. Atomics because a block changes owner between
 * threads; every hand-over is ordered by the global list's acquire/release,
 * so relaxed accesses suffice inside. */
typedef struct block {
    _Atomic(struct block *) next;        /* next free block in this list or batch */
    _Atomic(struct block *) next_batch;  /* on the global list: the next batch */
} block_t;

#define LINKS sizeof(block_t)            /* bytes of a free block kept unpoisoned */

typedef struct cache {
    block_t *head;
    unsigned count;
} cache_t;

static _Atomic(block_t *) global_batches[NCLASSES];
static _Atomic size_t mapped_bytes;

static __thread cache_t caches[NCLASSES];
static __thread bool cache_registered;
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

static inline unsigned class_of(size_t size)
{
    unsigned c = 0;
    size_t s = HIVE_POOL_MIN;
    while (s < size) {
        s <<= 1;
        c++;
    }
    return c;
}

static inline size_t class_size(unsigned c)
{
    return (size_t)HIVE_POOL_MIN << c;
}

static inline block_t *bnext(block_t *b)
{
    return atomic_load_explicit(&b->next, memory_order_relaxed);
}

static inline void set_bnext(block_t *b, block_t *n)
{
    atomic_store_explicit(&b->next, n, memory_order_relaxed);
}

/* Push a chain of batches first..last (linked by next_batch) on a global list.
 * release: publishes the batches' links and every write their previous owner
 * made to the blocks to whoever takes them with the acquire exchange below. */
static void global_push(unsigned c, block_t *first, block_t *last)
{
    block_t *top = atomic_load_explicit(&global_batches[c], memory_order_relaxed);
    do {
        atomic_store_explicit(&last->next_batch, top, memory_order_relaxed);
    } while (!atomic_compare_exchange_weak_explicit(&global_batches[c], &top, first,
                                                    memory_order_release, memory_order_relaxed));
}

/* Take one batch from the global list, or NULL. */
static block_t *global_take(unsigned c)
{
    /* acquire: pairs with the release in global_push; we now own all batches. */
    block_t *all = atomic_exchange_explicit(&global_batches[c], NULL, memory_order_acquire);
    if (all == NULL)
        return NULL;
    block_t *rest = atomic_load_explicit(&all->next_batch, memory_order_relaxed);
    if (rest != NULL) {
        block_t *last = rest;
        block_t *n;
        while ((n = atomic_load_explicit(&last->next_batch, memory_order_relaxed)) != NULL)
            last = n;
        global_push(c, rest, last);
    }
    return all;
}

static void flush_caches(void *unused)
{
    (void)unused;
    for (unsigned c = 0; c < NCLASSES; c++) {
        cache_t *k = &caches[c];
        if (k->head == NULL)
            continue;
        block_t *last = k->head;
        while (bnext(last) != NULL)
            last = bnext(last);
        global_push(c, k->head, last);
        k->head = NULL;
        k->count = 0;
    }
}

static void make_key(void)
{
    if (pthread_key_create(&cache_key, flush_caches) != 0)
        HIVE_DIE("pthread_key_create failed");
}

/* First use on a thread: arrange for its caches to go back to the global
 * lists when it exits, so blocks cached by short-lived threads are not lost. */
static void register_thread(void)
{
    pthread_once(&cache_key_once, make_key);
    pthread_setspecific(cache_key, (void *)1);
    cache_registered = true;
}

static void refill(unsigned c)
{
    cache_t *k = &caches[c];
    block_t *batch = global_take(c);
    if (batch != NULL) {
        unsigned n = 0;
        for (block_t *b = batch; b != NULL; b = bnext(b))
            n++;
        k->head = batch;
        k->count = n;
        return;
    }
    /* Carve a new chunk into batches: the first stays in this cache, the
     * rest go to the global list as a chain of batches for any thread. */
    size_t bs = class_size(c);
    char *chunk = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (chunk == MAP_FAILED)
        return;                          /* alloc reports NULL */
    atomic_fetch_add_explicit(&mapped_bytes, CHUNK, memory_order_relaxed);
    size_t nblocks = CHUNK / bs;
    block_t *batch_first = NULL, *batch_last = NULL, *prev_batch = NULL;
    for (size_t i = 0; i < nblocks; i++) {
        block_t *b = (block_t *)(void *)(chunk + i * bs);
        bool starts_batch = i % BATCH == 0;
        set_bnext(b, NULL);
        atomic_init(&b->next_batch, NULL);
        POISON((char *)b + LINKS, bs - LINKS);
        if (starts_batch) {
            if (prev_batch != NULL)
                atomic_store_explicit(&prev_batch->next_batch, b, memory_order_relaxed);
            else
                batch_first = b;
            prev_batch = b;
        } else {
            set_bnext((block_t *)(void *)(chunk + (i - 1) * bs), b);
        }
    }
    batch_last = prev_batch;
    k->head = batch_first;
    k->count = nblocks < BATCH ? (unsigned)nblocks : BATCH;
    block_t *rest = atomic_load_explicit(&batch_first->next_batch, memory_order_relaxed);
    if (rest != NULL)
        global_push(c, rest, batch_last);
}

void *hive__pool_alloc(size_t size)
{
    if (unlikely(size == 0 || size > HIVE_POOL_MAX))
        return NULL;
    if (unlikely(!cache_registered))
        register_thread();
    unsigned c = class_of(size);
    cache_t *k = &caches[c];
    if (unlikely(k->head == NULL)) {
        refill(c);
        if (k->head == NULL)
            return NULL;
    }
    block_t *b = k->head;
    k->head = bnext(b);
    k->count--;
    UNPOISON(b, class_size(c));
    return b;
}

void hive__pool_free(void *p, size_t size)
{
    if (p == NULL)
        return;
    if (unlikely(!cache_registered))
        register_thread();
    unsigned c = class_of(size);
    cache_t *k = &caches[c];
    block_t *b = p;
    atomic_init(&b->next, k->head);
    atomic_init(&b->next_batch, NULL);
    POISON((char *)b + LINKS, class_size(c) - LINKS);
    k->head = b;
    k->count++;
    if (unlikely(k->count >= 2 * BATCH)) {
        /* keep the BATCH most recently freed (cache-hot) blocks, hand the
         * older BATCH to the global list as one batch */
        block_t *keep_last = k->head;
        for (unsigned i = 1; i < BATCH; i++)
            keep_last = bnext(keep_last);
        block_t *first = bnext(keep_last);
        set_bnext(keep_last, NULL);
        k->count = BATCH;
        atomic_store_explicit(&first->next_batch, NULL, memory_order_relaxed);
        global_push(c, first, first);
    }
}

size_t hive__pool_mapped_bytes(void)
{
    return atomic_load_explicit(&mapped_bytes, memory_order_relaxed);
}
