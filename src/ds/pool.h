/*
 * pool.h - per-thread free lists of fixed-size blocks, so that hot paths
 * (queue nodes, task records, call messages) never call malloc.
 *
 * Blocks come in power-of-two size classes from 64 to 4096 bytes, each
 * aligned to its class's size (chunks are page-aligned and cut in whole
 * blocks of the class). Each thread keeps a free list per class. A thread that frees more
 * than it allocates (a consumer) hands whole batches to a global lock-free
 * list; a thread that runs dry (a producer) takes a batch back. Only when the
 * global list is empty too is a new chunk mapped and carved - the one system
 * call, amortised over a chunk of blocks. Memory is kept for the life of the
 * process, as the Pony runtime's pool does: it is recycled, never unmapped.
 *
 * hive__pool_alloc/free: size must be 1..HIVE_POOL_MAX and the same at free
 * as at alloc. Any thread may free a block any thread allocated.
 */
#ifndef HIVE_DS_POOL_H
#define HIVE_DS_POOL_H

#include <stddef.h>

#define HIVE_POOL_MIN 64
#define HIVE_POOL_MAX 4096

void *hive__pool_alloc(size_t size);
void  hive__pool_free(void *p, size_t size);

/* Map bytes of blocks of size's class ahead of need (tests and benches that
 * must not see the pool grow); 0 or -1. */
int hive__pool_reserve(size_t size, size_t bytes);

/* Bytes mapped by the pool so far (for tests and benches). */
size_t hive__pool_mapped_bytes(void);

#endif
