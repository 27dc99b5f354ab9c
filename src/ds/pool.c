/*
 * pool.c - the process-wide block pool behind pool.h: one shared batch list
 * per size class, one cache per class per thread (see ds/batch.h). Chunks
 * are mapped when everything is empty and kept for the life of the process.
 *
 * Fresh blocks are cut from a class's current chunk HIVE_BATCH at a time,
 * by a fetch_add on the chunk's cursor, so that a page is touched (and
 * counts in the process's resident memory) only when its blocks are first
 * handed out: a chunk of 64 MiB mapped for a growing pool costs nothing
 * until used. Only mapping the next chunk takes a lock, once per chunk.
 */
#include "ds/pool.h"
#include "ds/batch.h"
#include "util/common.h"
#include "util/fault.h"
#include "util/hugemap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#define NCLASSES 7                       /* 64 .. 4096 */
#define CHUNK_MIN ((size_t)256 << 10)    /* bytes mapped per refill when everything is empty ... */
#define CHUNK_MAX ((size_t)64 << 20)     /* ... growing with what is mapped, up to this */

static hive__batchlist_t shared[NCLASSES];

/* A chunk's first block holds its header: the cursor of the next fresh
 * block, the chunk's size and, for a frontier chunk (2 MiB and more), the
 * settle records of its 2 MiB regions (util/hugemap.h). */
typedef struct chunk_hdr {
    _Atomic size_t  off;
    size_t          size;
    hive__settle_t *settle;
} chunk_hdr_t;
_Static_assert(sizeof(chunk_hdr_t) <= HIVE_POOL_MIN, "the header fits the first block");
_Static_assert((size_t)HIVE_POOL_MAX * HIVE_BATCH <= HIVE__HUGE_PAGE,
               "one cut fills at most one region");

static _Atomic(chunk_hdr_t *) current[NCLASSES];
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic size_t mapped_bytes;

static __thread hive__fcache_t caches[NCLASSES];
static __thread bool registered;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static inline unsigned class_of(size_t size)
{
    unsigned c = 0;
    for (size_t s = HIVE_POOL_MIN; s < size; s <<= 1)
        c++;
    return c;
}

static inline size_t class_size(unsigned c)
{
    return (size_t)HIVE_POOL_MIN << c;
}

/* Thread exit: its cached blocks go back to the shared lists. */
static void flush_caches(void *unused)
{
    (void)unused;
    for (unsigned c = 0; c < NCLASSES; c++)
        hive__fcache_flush(&caches[c], &shared[c]);
}

static void make_key(void)
{
    for (unsigned c = 0; c < NCLASSES; c++)
        hive__batchlist_init(&shared[c]);
    if (pthread_key_create(&key, flush_caches) != 0)
        HIVE_DIE("pthread_key_create failed");
}

static void register_thread(void)
{
    pthread_once(&key_once, make_key);
    pthread_setspecific(key, (void *)1);
    registered = true;
}

/* Map a new current chunk for class c unless another thread already
 * replaced seen; false if mapping fails. */
static bool new_chunk(unsigned c, chunk_hdr_t *seen)
{
    bool ok = true;
    pthread_mutex_lock(&grow_lock);
    /* relaxed: the lock orders writers of current */
    if (atomic_load_explicit(&current[c], memory_order_relaxed) == seen) {
        /* Chunks grow with the pool (half of what is mapped so far): a pool
         * that must grow to its working set - frees come back a grace
         * period late - maps O(log size) times, not once per 256 KiB.
         * relaxed: a statistic. */
        size_t bytes = atomic_load_explicit(&mapped_bytes, memory_order_relaxed) / 2;
        bytes = bytes < CHUNK_MIN ? CHUNK_MIN : bytes > CHUNK_MAX ? CHUNK_MAX : bytes & ~(CHUNK_MIN - 1);
        /* records of millions of objects: chunks of 2 MiB and more are
         * frontier mappings on 2 MiB boundaries whose full regions become
         * huge pages (carve_fresh), which spare the TLB a miss (and the
         * walk a cache miss) per random lookup; smaller ones, while the
         * pool is small, ordinary pages */
        bool huge = bytes >= HIVE__HUGE_PAGE;
        if (huge)
            bytes &= ~(HIVE__HUGE_PAGE - 1);
        hive__settle_t *settle = huge ? hive__calloc(bytes / HIVE__HUGE_PAGE, sizeof *settle) : NULL;
        char *chunk = hive__fault() || (huge && settle == NULL) ? MAP_FAILED
                      : huge ? hive__map_frontier(bytes)
                             : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                    -1, 0);
        if (chunk == MAP_FAILED) {
            free(settle);
            ok = false;
        } else {
            hive__lsan_root(chunk, bytes);   /* never unmapped: roots for good */
            atomic_fetch_add_explicit(&mapped_bytes, bytes, memory_order_relaxed);
            chunk_hdr_t *hd = (chunk_hdr_t *)(void *)chunk;
            atomic_init(&hd->off, class_size(c));   /* the header's block is not a block */
            hd->size = bytes;
            hd->settle = settle;   /* chunks are never unmapped: nor are these freed */
            /* release: the header's fields before the chunk is seen */
            atomic_store_explicit(&current[c], hd, memory_order_release);
        }
    }
    pthread_mutex_unlock(&grow_lock);
    return ok;
}

/* Fill thread's empty cache of class c with fresh blocks. */
static bool carve_fresh(unsigned c)
{
    size_t bs = class_size(c), need = bs * HIVE_BATCH;
    for (;;) {
        /* acquire: pairs with new_chunk's release, for the header */
        chunk_hdr_t *hd = atomic_load_explicit(&current[c], memory_order_acquire);
        if (hd != NULL) {
            /* relaxed: the add hands out distinct ranges, which is all it
             * must do; the blocks are fresh memory nobody else reads */
            size_t off = atomic_fetch_add_explicit(&hd->off, need, memory_order_relaxed);
            if (off < hd->size) {    /* the last cut of a chunk may be short */
                size_t n = hd->size - off < need ? hd->size - off : need;
                hive__fcache_carve(&caches[c], (char *)hd + off, n, bs, &shared[c]);
                /* this cut reached the end of its first region: every byte
                 * of that region is handed out (a cut fills at most one) */
                size_t region = off & ~(HIVE__HUGE_PAGE - 1);
                if (hd->settle != NULL && off + n >= region + HIVE__HUGE_PAGE)
                    hive__settle_later(&hd->settle[region / HIVE__HUGE_PAGE], (char *)hd + region);
                if (n >= bs)
                    return true;
            }
        }
        if (!new_chunk(c, hd))
            return false;
    }
}

static bool refill(unsigned c)
{
    if (hive__fcache_refill(&caches[c], &shared[c]))
        return true;
    return carve_fresh(c);
}

void *hive__pool_alloc(size_t size)
{
    if (unlikely(size == 0 || size > HIVE_POOL_MAX))
        return NULL;
    if (unlikely(!registered))
        register_thread();
    unsigned c = class_of(size);
    if (unlikely(caches[c].head == NULL) && !refill(c))
        return NULL;
    return hive__fcache_pop(&caches[c], class_size(c));
}

void hive__pool_free(void *p, size_t size)
{
    if (p == NULL)
        return;
    if (unlikely(!registered))
        register_thread();
    unsigned c = class_of(size);
    hive__fcache_push(&caches[c], p, class_size(c), &shared[c]);
}

int hive__pool_reserve(size_t size, size_t bytes)
{
    if (size == 0 || size > HIVE_POOL_MAX)
        return -1;
    pthread_once(&key_once, make_key);
    unsigned c = class_of(size);
    bytes = (bytes + CHUNK_MIN - 1) & ~(CHUNK_MIN - 1);
    bool huge = bytes >= HIVE__HUGE_PAGE;     /* as new_chunk */
    if (huge)
        bytes = (bytes + HIVE__HUGE_PAGE - 1) & ~(HIVE__HUGE_PAGE - 1);
    char *chunk = hive__fault() ? MAP_FAILED
                  : huge ? hive__map_huge(bytes)
                         : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (chunk == MAP_FAILED)
        return -1;
    hive__lsan_root(chunk, bytes);   /* never unmapped: roots for good */
    atomic_fetch_add_explicit(&mapped_bytes, bytes, memory_order_relaxed);
    hive__fcache_t tmp = { 0 };
    hive__fcache_carve(&tmp, chunk, bytes, class_size(c), &shared[c]);
    hive__fcache_flush(&tmp, &shared[c]);
    return 0;
}

size_t hive__pool_mapped_bytes(void)
{
    return atomic_load_explicit(&mapped_bytes, memory_order_relaxed);
}
