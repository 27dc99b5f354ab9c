/*
 * arena.h - where object payloads live.
 *
 * One memfd (so another process could map it later), mapped MAP_SHARED once
 * for the whole store and cut into one region per NUMA node, each bound to
 * its node with hwloc. A region has two areas:
 *  - the large area, twice the capacity: payloads over HIVE_ARENA_SMALL_MAX
 *    come from a boundary-tag allocator with size-segregated free lists that
 *    coalesces neighbours on free, under a per-region mutex (a large put
 *    copies at least 32 KiB, which dwarfs an uncontended lock);
 *    MADV_HUGEPAGE;
 *  - the small area, twice the capacity plus 64 MiB: payloads up to 32 KiB
 *    come in 32 size classes, four per doubling in multiples of 64 bytes
 *    (64, 128, 192, 256, 320, 384, 448, 512, 640, 768, ..., 28672, 32768),
 *    through per-thread caches: alloc and free are a pointer pop/push on the
 *    fast path, no lock, no system call. Caches exchange batches with a
 *    lock-free per-class ring (ds/batch.h, made at the class's first slab on
 *    the node). Classes cut slabs from the node's small area with one atomic
 *    add (or take one a purge gave back); a slab serves one class at a time.
 * Slabs are all HIVE_ARENA_SLAB bytes, so a slab one class no longer needs
 * can serve another: a purge (hive__arena_purge, run by a worker between
 * jobs when the small memory held passes live bytes + capacity/8, or by
 * an allocating thread itself past live bytes + capacity/4) finds
 * the slabs whose cells are all free on their class's shared list, punches
 * their pages out of the memfd and keeps them on the region's free-slab
 * list, which a class takes before cutting a new slab. Cells in threads'
 * caches (at most 128 per class and thread) and slabs with one live cell
 * stay. Should the small area still run out, a small payload whose class
 * has no free cell takes a block of the large allocator instead (its
 * mutex, its header): slower, but in an area of twice the capacity, where
 * only fragmentation could refuse it. Large payloads never live in the
 * small area, so cells kept by classes never take address space from a
 * large one; free large blocks lose their pages in a purge too.
 *
 * Capacity is counted exactly in one atomic, `used`: what live payloads
 * take from the store. A payload in a cell counts the cell (under 25% more
 * than a payload over 256 bytes, at most 63 bytes more below); a payload in
 * the large area counts its block, the payload rounded up to 64 bytes plus
 * a 64-byte header. Beyond the capacity alloc fails with HIVE_EFULL and the
 * numbers, so the memory live payloads hold never exceeds the capacity.
 *
 * Address space: 4 x capacity + 64 MiB per node (rounded to 2 MiB), times
 * the nodes; only touched pages cost memory (memfd, MAP_NORESERVE). What
 * cannot fit below 2^47 or RLIMIT_AS is refused before mapping, with the
 * arithmetic (hive__arena_check).
 */
#ifndef HIVE_ARENA_H
#define HIVE_ARENA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ds/batch.h"
#include "topo.h"
#include "util/common.h"

#define HIVE_ARENA_SMALL_MAX (32u * 1024u)
#define HIVE_ARENA_NCLASSES  32               /* 64 .. 32768, four per doubling */
#define HIVE_ARENA_SLAB      ((size_t)256 << 10)  /* every slab; 8 cells of the largest class */

struct hive__lblk;

typedef struct hive__region {
    char          *base;                       /* [base, small): the large allocator */
    char          *small;                      /* [small, small + small_size): slabs of cells */
    unsigned       node;
    int            bound;                      /* memory bound to its node */
    pthread_mutex_t lock;                      /* the large allocator */
    struct hive__lblk *bins[64];               /* free blocks by floor(log2(size)) */
    size_t         large_free;                 /* bytes in free large blocks (stats) */
    _Atomic size_t large_used;                 /* bytes in live large blocks (written under
                                                  lock; read by hive_store_classes) */
    _Atomic uint64_t large_live;               /* live large blocks (as large_used) */
    _Atomic size_t large_dirty;                /* bytes freed in the large area since its
                                                  last purge (written under lock) */
    _Atomic(hive__batchlist_t *) lists[HIVE_ARENA_NCLASSES];  /* lock-free batch lists */
    pthread_mutex_t slab_lock;                 /* the free slabs (a slow path: see small_refill) */
    char          *free_slabs;                 /* slabs given back by a purge, linked through
                                                  their first word */
    _Atomic size_t free_slab_bytes;            /* their bytes (written under slab_lock) */
    HIVE_ALIGNED _Atomic size_t small_cut;     /* bump offset of cut slabs */
} hive__region_t;

typedef struct hive__arena {
    uint64_t        id;                        /* process-unique, never reused */
    size_t          capacity;
    unsigned        nnodes;
    char           *base;                      /* the one mapping, region i at base + i * region_size */
    size_t          vsize;
    size_t          region_size, large_size, small_size;
    int             memfd;
    hive__region_t *regions;
    void          (*ask_purge)(void *ctx);     /* asks someone to call hive__arena_purge soon */
    void           *ask_ctx;
    _Atomic int     purging;                   /* one purge at a time */
    _Atomic size_t  purge_floor;               /* small bytes held after the last purge */
    _Atomic uint64_t purges;                   /* purges run (a statistic) */
    size_t          large_bound;               /* held beyond this, a purge punches free large
                                                  blocks (capacity * 5/4 + 16 MiB; tests lower it) */
    struct hive__tcache *caches;               /* threads' caches of this arena, under the
                                                  registry lock (per-class counts) */
    _Atomic int64_t cells_gone[HIVE_ARENA_NCLASSES]; /* cells counted by caches since
                                                  released, and frees no cache took */
    HIVE_ALIGNED _Atomic size_t used;          /* bytes live payloads take (see above) */
    HIVE_ALIGNED _Atomic size_t used_high;     /* the most used has been (a statistic) */
} hive__arena_t;

/* HIVE_OK if a store of capacity bytes over nnodes nodes fits in the
 * address space this process can map; else HIVE_EINVAL with the arithmetic. */
int  hive__arena_check(size_t capacity, unsigned nnodes);

int  hive__arena_open(hive__arena_t *a, size_t capacity, const hive__topo_t *topo);
void hive__arena_close(hive__arena_t *a);

/* Allocate size bytes (64-byte aligned; size 0 is valid and still unique)
 * on the given node. NULL with HIVE_EFULL or HIVE_ENOMEM in *err and the
 * sentence in hive_last_error(). */
void *hive__arena_alloc(hive__arena_t *a, size_t size, unsigned node, int *err);
void  hive__arena_free(hive__arena_t *a, void *p, size_t size);

/* Count a payload kept elsewhere (a small one inline in its record) in
 * `used`, as a cell of the smallest class: false with HIVE_EFULL in *err
 * and the sentence when the store is full. hive__arena_uncharge gives it
 * back. The capacity bounds every payload, wherever it lives. */
bool hive__arena_charge_elsewhere(hive__arena_t *a, size_t size, int *err);
void hive__arena_uncharge_elsewhere(hive__arena_t *a);
/* n of those at once (a batch of freed records: one write of the shared counter). */
void hive__arena_uncharge_elsewhere_n(hive__arena_t *a, size_t n);

/* Capacity taken ahead of its payloads (store.c: a thread's reserve of
 * inline charges, so that its puts write no shared counter): bytes more in
 * `used` if they fit, else false (no sentence, nothing taken).
 * hive__arena_unreserve gives reserved bytes back; the charge of one
 * inline payload is hive__arena_inline_charge(). */
bool   hive__arena_reserve(hive__arena_t *a, size_t bytes);
void   hive__arena_unreserve(hive__arena_t *a, size_t bytes);
#define HIVE__ARENA_MIN_CLASS 64      /* the smallest block class: an inline payload's charge */
static inline size_t hive__arena_inline_charge(void)
{
    return HIVE__ARENA_MIN_CLASS;    /* a constant the hot paths fold in (put, a task's result) */
}

/* The node a payload lives on. */
unsigned hive__arena_node_of(const hive__arena_t *a, const void *p);

/* The bytes a payload of size bytes counts in `used` when it gets its usual
 * place: its class's cell up to HIVE_ARENA_SMALL_MAX, else its large block
 * (SIZE_MAX if that overflows). */
size_t hive__arena_charge(size_t size);

/* What the live payload p of size bytes counts in `used`: its charge, or,
 * for a small payload that had to take a large block, that block. */
size_t hive__arena_charge_of(const hive__arena_t *a, const void *p, size_t size);

/* Give back whatever the calling thread caches for this arena (tests use it
 * to check that every block returns). */
void hive__arena_flush_thread(hive__arena_t *a);

/* Whether memory the store holds has grown past what a purge should give
 * back (a few loads: callers check it between jobs). */
bool hive__arena_wants_purge(const hive__arena_t *a);

/* Give free memory back to the kernel: every slab whose cells are all on
 * their class's shared list leaves the class (its pages punched out of the
 * memfd) for any class to reuse, and free large blocks lose their pages.
 * Slow (system calls, a pass over the free cells); never on a hot path.
 * Concurrent callers: one purges, the others return at once. */
void hive__arena_purge(hive__arena_t *a);

/* Touch capacity / nodes bytes of each region's large area now, so that
 * the first large payloads do not fault their pages in (hive_config_t's
 * prefault). HIVE_ENOMEM (and the sentence) if the memory cannot be had. */
int hive__arena_prefault(hive__arena_t *a);

/* The store's use per size class (hive_store_classes): HIVE_ARENA_NCLASSES
 * small classes, then the large area (size 0). Takes the registry lock
 * that threads take when they switch arenas or exit; sums each thread's
 * own counts of live cells (no shared line on the allocation path). */
struct hive_size_class;
void hive__arena_classes(hive__arena_t *a, struct hive_size_class *out);

/* Bytes of the store's memfd the kernel holds now (one fstat). */
size_t hive__arena_resident(const hive__arena_t *a);

#endif
