/*
 * arena.h - where object payloads live.
 *
 * One region per NUMA node: a memfd (so another process could map it later)
 * mapped MAP_SHARED, bound to its node with hwloc, MADV_HUGEPAGE. Inside a
 * region:
 *  - large payloads (> HIVE_ARENA_SMALL_MAX) come from a boundary-tag
 *    allocator with size-segregated free lists that coalesces neighbours on
 *    free; it is guarded by a per-region mutex (a large put copies at least
 *    32 KiB, which dwarfs an uncontended lock);
 *  - small payloads come in size classes 64 B .. 32 KiB, through per-thread
 *    caches: alloc and free are a pointer pop/push on the fast path, no lock,
 *    no system call. Caches exchange batches with a lock-free per-class ring
 *    (ds/batch.h). Each class owns an address range of its own, from which
 *    slabs are cut with one atomic add; its cells never leave the class.
 *
 * Capacity is counted exactly in one atomic: every payload counts its size
 * rounded up to 64 bytes; beyond the capacity alloc fails with HIVE_EFULL and
 * the numbers. Address space is what makes that promise hold whatever the
 * history: the large allocator gets twice the capacity (fragmentation can
 * never turn free capacity into a failed large put) and every small class
 * gets the capacity plus slack (cells kept by one class never starve another
 * or the large allocator). Only touched pages cost memory; the reservation is
 * sparse (memfd, MAP_NORESERVE).
 */
#ifndef HIVE_ARENA_H
#define HIVE_ARENA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ds/batch.h"
#include "topo.h"
#include "util/common.h"

#define HIVE_ARENA_SMALL_MAX (32u * 1024u)
#define HIVE_ARENA_NCLASSES  10               /* 64 .. 32768 */

struct hive__lblk;

typedef struct hive__region {
    char          *base;
    size_t         vsize;
    size_t         large_size;                 /* [base, base + large_size): the large allocator */
    size_t         class_area;                 /* bytes of address space per small class */
    char          *class_base[HIVE_ARENA_NCLASSES];
    _Atomic size_t class_used[HIVE_ARENA_NCLASSES];   /* bump offset of cut slabs */
    int            memfd;
    unsigned       node;
    int            bound;                      /* memory bound to its node */
    pthread_mutex_t lock;                      /* the large allocator */
    struct hive__lblk *bins[64];               /* free blocks by floor(log2(size)) */
    size_t         large_free;                 /* bytes in free large blocks (stats) */
    HIVE_ALIGNED hive__batchlist_t batches[HIVE_ARENA_NCLASSES];  /* lock-free batch lists */
} hive__region_t;

typedef struct hive__arena {
    uint64_t        id;                        /* process-unique, never reused */
    size_t          capacity;
    unsigned        nnodes;
    hive__region_t *regions;
    HIVE_ALIGNED _Atomic size_t used;          /* bytes counted against capacity */
} hive__arena_t;

int  hive__arena_open(hive__arena_t *a, size_t capacity, const hive__topo_t *topo);
void hive__arena_close(hive__arena_t *a);

/* Allocate size bytes (64-byte aligned; size 0 is valid and still unique)
 * on the given node. NULL with HIVE_EFULL or HIVE_ENOMEM in *err and the
 * sentence in hive_last_error(). */
void *hive__arena_alloc(hive__arena_t *a, size_t size, unsigned node, int *err);
void  hive__arena_free(hive__arena_t *a, void *p, size_t size);

/* The node a payload lives on. */
unsigned hive__arena_node_of(const hive__arena_t *a, const void *p);

/* The bytes counted for a payload of size bytes. */
static inline size_t hive__arena_charge(size_t size)
{
    return size == 0 ? 64 : (size + 63) & ~(size_t)63;
}

/* Give back whatever the calling thread caches for this arena (tests use it
 * to check that every block returns). */
void hive__arena_flush_thread(hive__arena_t *a);

#endif
