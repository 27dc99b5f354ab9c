/*
 * pool.c - the process-wide block pool behind pool.h: one shared batch list
 * per size class, one cache per class per thread (see ds/batch.h). Chunks
 * are mapped when everything is empty and kept for the life of the process.
 */
#include "ds/pool.h"
#include "ds/batch.h"
#include "util/common.h"
#include "util/fault.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#define NCLASSES 7                       /* 64 .. 4096 */
#define CHUNK_MIN ((size_t)256 << 10)    /* bytes mapped per refill when everything is empty ... */
#define CHUNK_MAX ((size_t)64 << 20)     /* ... growing with what is mapped, up to this */

static hive__batchlist_t shared[NCLASSES];
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

static bool refill(unsigned c)
{
    hive__fcache_t *k = &caches[c];
    if (hive__fcache_refill(k, &shared[c]))
        return true;
    /* Chunks grow with the pool (half of what is mapped so far): a pool
     * that must grow to its working set - frees come back a grace period
     * late - maps O(log size) times, not once per 256 KiB, so a steady
     * load soon makes no system call at all. relaxed: a statistic. */
    size_t bytes = atomic_load_explicit(&mapped_bytes, memory_order_relaxed) / 2;
    bytes = bytes < CHUNK_MIN ? CHUNK_MIN : bytes > CHUNK_MAX ? CHUNK_MAX : bytes & ~(CHUNK_MIN - 1);
    char *chunk = hive__fault() ? MAP_FAILED : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (chunk == MAP_FAILED)
        return false;
    /* records of millions of objects: huge pages spare the TLB a miss per
     * random lookup (advice; ignored where THP is off) */
    if (bytes >= ((size_t)2 << 20))
        madvise(chunk, bytes, MADV_HUGEPAGE);
    atomic_fetch_add_explicit(&mapped_bytes, bytes, memory_order_relaxed);
    hive__fcache_carve(k, chunk, bytes, class_size(c), &shared[c]);
    return true;
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
    char *chunk = hive__fault() ? MAP_FAILED : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (chunk == MAP_FAILED)
        return -1;
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
