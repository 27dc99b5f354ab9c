/*
 * arena.c - payload memory (see arena.h for the shape of it).
 *
 * Large allocator: every block, free or used, starts with a 64-byte header
 * holding its size and its physical predecessor's size (boundary tags), so
 * a freed block merges with free neighbours on both sides in O(1). Free
 * blocks sit in 64 lists by floor(log2(size)); alloc scans its own list
 * first-fit and takes the first block of any larger list, splitting off the
 * rest - always, so a block is exactly what was asked (a rest of one header
 * is a free block that only coalescing can use). All of it under the
 * region's mutex.
 *
 * Small allocator: slabs cut from the node's small area with one atomic
 * add, carved into cells; per-thread caches and lock-free batch rings
 * (ds/batch.h). A slab serves one class until a purge finds all its cells
 * free on the class's ring and gives its pages back; the slab then waits
 * on the region's free-slab list for any class. Once the small area is
 * spent, small payloads fall back to large blocks (arena.h).
 *
 * Purge (hive__arena_purge, a worker between jobs): per class, it drains
 * the class's ring into one chain, counts the free cells of each slab,
 * unlinks the cells of slabs that are wholly free, gives the rest back to
 * the ring, and only then punches the freed slabs (their cells' links are
 * read before their pages go). Threads keep allocating meanwhile: one that
 * finds the ring empty takes a free slab or cuts a new one, which only
 * costs memory for a moment. Free large blocks lose their pages (all but
 * the header's) under the region's lock.
 *
 * Per-thread caches belong to one arena at a time (one cache per node and
 * class): the thread-local cache names the arena by its process-unique id. A thread that moves to
 * another arena first hands its cells back to the old one, if that arena is
 * still open - a registry of open arenas under a mutex decides, so a cache
 * never writes into an arena that was closed (its cells are then simply
 * forgotten with the memory).
 */
#include "arena.h"
#include "hive.h"
#include "ds/batch.h"
#include "util/error.h"
#include "util/fault.h"

#include <errno.h>
#include <hwloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ large blocks */

#define HDR         64u
#define FREE_BIT    ((size_t)1)
#define LMAGIC      0x686976656c626b21ull    /* "hivelbk!" */

typedef struct hive__lblk {
    size_t             size;        /* whole block incl. header; FREE_BIT when free */
    size_t             prev_size;   /* whole size of the physical predecessor; 0 if first */
    struct hive__lblk *next, *prev; /* free list links, valid while free */
    uint64_t           magic;
    char               pad[HDR - 5 * sizeof(size_t)];
} lblk_t;

_Static_assert(sizeof(lblk_t) == HDR, "large block header must be 64 bytes");

static inline size_t bsize(const lblk_t *b) { return b->size & ~FREE_BIT; }
static inline bool   bfree(const lblk_t *b) { return (b->size & FREE_BIT) != 0; }

static inline unsigned log2_floor(size_t x)
{
    return 63u - (unsigned)__builtin_clzll((unsigned long long)x);
}

static inline lblk_t *phys_next(hive__region_t *r, lblk_t *b)
{
    char *n = (char *)b + bsize(b);
    return n < r->small ? (lblk_t *)(void *)n : NULL;
}

static inline lblk_t *phys_prev(lblk_t *b)
{
    return b->prev_size ? (lblk_t *)(void *)((char *)b - b->prev_size) : NULL;
}

static void bin_insert(hive__region_t *r, lblk_t *b)
{
    unsigned i = log2_floor(bsize(b));
    b->size |= FREE_BIT;
    b->prev = NULL;
    b->next = r->bins[i];
    if (b->next)
        b->next->prev = b;
    r->bins[i] = b;
    r->large_free += bsize(b);
}

static void bin_remove(hive__region_t *r, lblk_t *b)
{
    unsigned i = log2_floor(bsize(b));
    if (b->prev)
        b->prev->next = b->next;
    else
        r->bins[i] = b->next;
    if (b->next)
        b->next->prev = b->prev;
    b->size &= ~FREE_BIT;
    r->large_free -= bsize(b);
}

static void set_prev_size_of_next(hive__region_t *r, lblk_t *b)
{
    lblk_t *n = phys_next(r, b);
    if (n)
        n->prev_size = bsize(b);
}

/* The whole block a payload of n bytes takes in the large area: the payload
 * rounded up to 64 bytes (at least 64) plus the header; n <= 2^47. */
static inline size_t large_block(size_t n)
{
    size_t payload = (n + 63) & ~(size_t)63;
    return HDR + (payload ? payload : 64);
}

/* Live large bytes and blocks (lock held): relaxed loads and stores, the
 * lock orders the writers; hive_store_classes reads them without it. */
static void count_large(hive__region_t *r, ptrdiff_t bytes, int blocks)
{
    atomic_store_explicit(&r->large_used, atomic_load_explicit(&r->large_used, memory_order_relaxed)
                          + (size_t)bytes, memory_order_relaxed);
    atomic_store_explicit(&r->large_live, atomic_load_explicit(&r->large_live, memory_order_relaxed)
                          + (uint64_t)(int64_t)blocks, memory_order_relaxed);
}

/* A block of need bytes (large_block()) from the large allocator, or NULL
 * if no free block is big enough. */
static void *large_alloc(hive__region_t *r, size_t need)
{
    pthread_mutex_lock(&r->lock);
    lblk_t *b = NULL;
    for (unsigned i = log2_floor(need); i < 64 && b == NULL; i++)
        for (lblk_t *c = r->bins[i]; c; c = c->next)
            if (bsize(c) >= need) {
                b = c;
                break;
            }
    if (b == NULL) {
        pthread_mutex_unlock(&r->lock);
        return NULL;
    }
    bin_remove(r, b);
    size_t have = bsize(b);
    if (have > need) {                 /* multiples of 64: the rest holds a header */
        lblk_t *rest = (lblk_t *)(void *)((char *)b + need);
        rest->size = have - need;
        rest->prev_size = need;
        rest->magic = LMAGIC;
        b->size = need;
        set_prev_size_of_next(r, rest);
        bin_insert(r, rest);
    }
    b->magic = LMAGIC;
    count_large(r, (ptrdiff_t)bsize(b), 1);
    pthread_mutex_unlock(&r->lock);
    return (char *)b + HDR;
}

/* Free the block of payload p; returns its size (what it counted in used). */
static size_t large_free(hive__region_t *r, void *p)
{
    lblk_t *b = (lblk_t *)(void *)((char *)p - HDR);
    pthread_mutex_lock(&r->lock);
    if (b->magic != LMAGIC || bfree(b))
        HIVE_DIE("arena: freeing %p, which is not a live large block", p);
    size_t freed = bsize(b);
    count_large(r, -(ptrdiff_t)freed, -1);
    lblk_t *n = phys_next(r, b);
    if (n && bfree(n)) {
        bin_remove(r, n);
        n->magic = 0;
        b->size += bsize(n);
    }
    lblk_t *pv = phys_prev(b);
    if (pv && bfree(pv)) {
        bin_remove(r, pv);
        b->magic = 0;
        pv->size += bsize(b);
        b = pv;
    }
    set_prev_size_of_next(r, b);
    bin_insert(r, b);
    /* relaxed: a trigger for the purge (hive__arena_wants_purge); the
     * lock orders the writers */
    atomic_store_explicit(&r->large_dirty, atomic_load_explicit(&r->large_dirty, memory_order_relaxed)
                          + freed, memory_order_relaxed);
    pthread_mutex_unlock(&r->lock);
    return freed;
}

/* ------------------------------------------------------------ small cells */

#define PURGE_SLACK ((size_t)16 << 20)     /* held beyond live + capacity/4 before a purge */

/* Classes 0..3 are 64, 128, 192, 256; above, four per doubling: for
 * 2^k < size <= 2^(k+1) (k >= 8) the cells are 2^k + j * 2^(k-2), j = 1..4,
 * all multiples of 64. A cell exceeds its payload by less than a quarter of
 * 2^k < size, and by at most 63 bytes up to 256. */
static inline unsigned class_of(size_t size)
{
    if (size <= 256)
        return size == 0 ? 0 : (unsigned)((size - 1) >> 6);
    unsigned k = log2_floor(size - 1);
    unsigned j = (unsigned)((size - 1 - ((size_t)1 << k)) >> (k - 2));
    return 4 + (k - 8) * 4 + j;
}

static inline size_t class_size(unsigned c)
{
    if (c < 4)
        return (size_t)HIVE__ARENA_MIN_CLASS * (c + 1);
    unsigned k = 8 + (c - 4) / 4, j = (c - 4) % 4 + 1;
    return ((size_t)1 << k) + ((size_t)j << (k - 2));
}

_Static_assert(HIVE_ARENA_NCLASSES == 4 + 4 * (15 - 8), "classes up to 2^15");

/* Cells of class c in a slab (the slab's tail past them is never used). */
static inline size_t slab_cells(unsigned c)
{
    return HIVE_ARENA_SLAB / class_size(c);
}

/* The class's batch list on r, made on first use; NULL only if that
 * allocation fails. */
static hive__batchlist_t *class_list(hive__region_t *r, unsigned c)
{
    /* acquire: pairs with the release of the CAS that published the list,
     * so its initialisation is visible */
    hive__batchlist_t *l = atomic_load_explicit(&r->lists[c], memory_order_acquire);
    if (likely(l != NULL))
        return l;
    hive__batchlist_t *mine;
    if (hive__posix_memalign((void **)&mine, HIVE_PAD, sizeof *mine) != 0)
        return NULL;
    hive__batchlist_init(mine);
    /* acq_rel: release publishes our initialisation; acquire (on failure)
     * makes the winner's visible */
    if (atomic_compare_exchange_strong_explicit(&r->lists[c], &l, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    hive__batchlist_destroy(mine);
    free(mine);
    return l;
}

typedef struct hive__tcache {
    uint64_t        arena_id;       /* 0: none */
    hive__arena_t  *arena;
    hive__fcache_t *cls;            /* [node * HIVE_ARENA_NCLASSES + class] */
    /* cells this thread took minus those it gave back, per class (may go
     * below 0: a cell freed by another thread than took it); only this
     * thread writes, hive__arena_classes reads (relaxed: statistics) */
    _Atomic int64_t net[HIVE_ARENA_NCLASSES];
    struct hive__tcache *prev, *next;   /* arena->caches, under registry_lock */
} tcache_t;

static __thread tcache_t tc;
static __thread bool tc_registered;

/* Registry of open arenas: only touched when a thread switches arenas, exits,
 * or an arena opens or closes. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static hive__arena_t **registry;
static size_t registry_len, registry_cap;
static _Atomic uint64_t next_arena_id = 1;
static pthread_key_t tc_key;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;

static bool registry_has(const hive__arena_t *a, uint64_t id)
{
    for (size_t i = 0; i < registry_len; i++)
        if (registry[i] == a && a->id == id)
            return true;
    return false;
}

/* The thread's counts of live cells go to the arena's, and its cache off
 * the arena's list (registry_lock held, the arena open). relaxed: the
 * lock orders this against the readers. */
static void tc_unlist(hive__arena_t *a)
{
    for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++)
        atomic_fetch_add_explicit(&a->cells_gone[c],
                                  atomic_load_explicit(&tc.net[c], memory_order_relaxed),
                                  memory_order_relaxed);
    if (tc.prev != NULL)
        tc.prev->next = tc.next;
    else
        a->caches = tc.next;
    if (tc.next != NULL)
        tc.next->prev = tc.prev;
}

/* Hand the thread's cells back to their arena, if it is still open. */
static void tc_release(void)
{
    if (tc.arena_id == 0)
        return;
    pthread_mutex_lock(&registry_lock);
    if (registry_has(tc.arena, tc.arena_id)) {
        tc_unlist(tc.arena);
        for (unsigned n = 0; n < tc.arena->nnodes; n++)
            for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++) {
                hive__fcache_t *k = &tc.cls[n * HIVE_ARENA_NCLASSES + c];
                /* cells exist only in classes whose list was made; acquire
                 * pairs with the release that published it */
                if (k->head != NULL)
                    hive__fcache_flush(k, atomic_load_explicit(&tc.arena->regions[n].lists[c],
                                                               memory_order_acquire));
            }
    }
    pthread_mutex_unlock(&registry_lock);
    free(tc.cls);
    memset(&tc, 0, sizeof tc);
}

static void tc_at_exit(void *unused)
{
    (void)unused;
    tc_release();
}

static void tc_make_key(void)
{
    if (pthread_key_create(&tc_key, tc_at_exit) != 0)
        HIVE_DIE("pthread_key_create failed");
}

static bool tc_switch(hive__arena_t *a)
{
    if (!tc_registered) {
        pthread_once(&tc_once, tc_make_key);
        pthread_setspecific(tc_key, (void *)1);
        tc_registered = true;
    }
    tc_release();
    tc.cls = hive__calloc((size_t)a->nnodes * HIVE_ARENA_NCLASSES, sizeof *tc.cls);
    if (tc.cls == NULL)
        return false;
    tc.arena = a;
    tc.arena_id = a->id;
    for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++)
        atomic_store_explicit(&tc.net[c], 0, memory_order_relaxed);  /* the lock publishes */
    pthread_mutex_lock(&registry_lock);  /* a is open: its caller uses it */
    tc.prev = NULL;
    tc.next = a->caches;
    if (a->caches != NULL)
        a->caches->prev = &tc;
    a->caches = &tc;
    pthread_mutex_unlock(&registry_lock);
    return true;
}

static inline bool tc_is(const hive__arena_t *a)
{
    return tc.arena_id == a->id && tc.arena == a;
}

void hive__arena_flush_thread(hive__arena_t *a)
{
    if (tc_is(a))
        tc_release();
}

static bool small_over(const hive__arena_t *a, size_t slack);

/* A slab a purge gave back, or NULL. The list is under a mutex: a thread
 * comes here once per slab's worth of cells (256 KiB), only when its
 * class's ring is empty too, and the purge holds the lock for a push; the
 * relaxed look first keeps the common case (no free slab) lock-free. */
static char *take_free_slab(hive__region_t *r)
{
    if (atomic_load_explicit(&r->free_slab_bytes, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&r->slab_lock);
    char *slab = r->free_slabs;
    if (slab != NULL) {
        r->free_slabs = *(char **)(void *)slab;
        atomic_store_explicit(&r->free_slab_bytes,
                              atomic_load_explicit(&r->free_slab_bytes, memory_order_relaxed) -
                              HIVE_ARENA_SLAB, memory_order_relaxed);
    }
    pthread_mutex_unlock(&r->slab_lock);
    return slab;
}

/* Fill the empty cache k of class c on region `node`: a batch from the
 * class's list, else a slab a purge gave back, else a new slab from the
 * small area (and, if memory held has outgrown live bytes, a purge is
 * asked for). False if the small area is spent. */
static bool small_refill(hive__arena_t *a, unsigned node, unsigned c, hive__fcache_t *k)
{
    hive__region_t *r = &a->regions[node];
    hive__batchlist_t *l = class_list(r, c);
    if (l == NULL)
        return false;
    if (hive__fcache_refill(k, l))
        return true;
    char *slab = take_free_slab(r);
    if (slab == NULL && a->ask_purge != NULL && small_over(a, a->capacity / 4 + PURGE_SLACK)) {
        /* The hard bound: the memory held would pass live bytes + a
         * quarter of the capacity, and the purge asked of a worker has not
         * come (workers busy). Purge here, once per slab at most, before
         * cutting (a slow path with system calls, like the EFULL retry's
         * grace period; a purge already running elsewhere returns at once). */
        hive__arena_purge(a);
        if (hive__fcache_refill(k, l))
            return true;
        slab = take_free_slab(r);
    }
    if (slab == NULL) {
        size_t sb = HIVE_ARENA_SLAB;
        /* relaxed: the area is only ever cut, never handed back; the load
         * keeps a spent area's counter from growing on every miss */
        if (atomic_load_explicit(&r->small_cut, memory_order_relaxed) + sb > a->small_size)
            return false;
        size_t off = atomic_fetch_add_explicit(&r->small_cut, sb, memory_order_relaxed);
        if (off + sb > a->small_size)
            return false;
        slab = r->small + off;
        if (a->ask_purge != NULL && hive__arena_wants_purge(a))
            a->ask_purge(a->ask_ctx);
    }
    /* a slab from the free list may hold another class's poison */
    HIVE_UNPOISON(slab, HIVE_ARENA_SLAB);
    hive__fcache_carve(k, slab, slab_cells(c) * class_size(c), class_size(c), l);
    return true;
}

/* This thread's live cells of class c (its own counter: a load and a
 * store, relaxed - only this thread writes it, readers want a figure). */
static inline void count_cell(unsigned c, int64_t d)
{
    atomic_store_explicit(&tc.net[c], atomic_load_explicit(&tc.net[c], memory_order_relaxed) + d,
                          memory_order_relaxed);
}

static void *small_alloc(hive__arena_t *a, unsigned c, unsigned node)
{
    if (unlikely(!tc_is(a)) && !tc_switch(a))
        return NULL;
    hive__fcache_t *k = &tc.cls[node * HIVE_ARENA_NCLASSES + c];
    if (unlikely(k->head == NULL) && !small_refill(a, node, c, k))
        return NULL;
    count_cell(c, 1);
    return hive__fcache_pop(k, class_size(c));
}

static void small_free(hive__arena_t *a, void *p, unsigned c, unsigned node)
{
    /* the list exists: the slab of this cell was cut after it was made;
     * acquire pairs with the release that published it */
    hive__batchlist_t *l = atomic_load_explicit(&a->regions[node].lists[c], memory_order_acquire);
    if (unlikely(!tc_is(a)) && !tc_switch(a)) {
        /* no memory for a cache: hand the cell over as a batch of one */
        hive__fblock_t *b = p;
        atomic_init(&b->next, NULL);
        hive__batch_give(l, b, 1);
        /* relaxed: a statistic (a slow path: no cache) */
        atomic_fetch_sub_explicit(&a->cells_gone[c], 1, memory_order_relaxed);
        return;
    }
    count_cell(c, -1);
    hive__fcache_push(&tc.cls[node * HIVE_ARENA_NCLASSES + c], p, class_size(c), l);
}

/* ------------------------------------------------------------ the arena */

size_t hive__arena_charge(size_t size)
{
    if (size <= HIVE_ARENA_SMALL_MAX)
        return class_size(class_of(size));
    if (size > SIZE_MAX - 2 * HDR)
        return SIZE_MAX;
    return large_block(size);
}

static inline bool in_small_area(const hive__arena_t *a, const void *p, unsigned node)
{
    return (uintptr_t)p >= (uintptr_t)a->regions[node].small;
}

size_t hive__arena_charge_of(const hive__arena_t *a, const void *p, size_t size)
{
    unsigned node = hive__arena_node_of(a, p);
    return in_small_area(a, p, node) ? class_size(class_of(size)) : large_block(size);
}

unsigned hive__arena_node_of(const hive__arena_t *a, const void *p)
{
    uintptr_t off = (uintptr_t)p - (uintptr_t)a->base;
    return off < a->vsize ? (unsigned)(off / a->region_size) : 0;
}

/* Count charge bytes against the capacity; false with HIVE_EFULL if they
 * do not fit. */
static bool take_capacity(hive__arena_t *a, size_t size, size_t charge, int *err)
{
    /* relaxed: a pure counter; nothing is published through it */
    size_t was = atomic_fetch_add_explicit(&a->used, charge, memory_order_relaxed);
    if (likely(was + charge <= a->capacity)) {
        /* the high-water mark: a read of a line that rarely changes, and a
         * CAS only when passed (relaxed: a statistic) */
        size_t now = was + charge, hw = atomic_load_explicit(&a->used_high, memory_order_relaxed);
        while (unlikely(now > hw) &&
               !atomic_compare_exchange_weak_explicit(&a->used_high, &hw, now, memory_order_relaxed,
                                                      memory_order_relaxed))
            ;
        return true;
    }
    atomic_fetch_sub_explicit(&a->used, charge, memory_order_relaxed);
    *err = hive__fail(HIVE_EFULL, "object store full: asked %zu bytes (taking %zu), %zu of %zu in use",
                      size, charge, was, a->capacity);
    return false;
}

bool hive__arena_reserve(hive__arena_t *a, size_t bytes)
{
    /* relaxed: a pure counter, as in take_capacity */
    size_t was = atomic_fetch_add_explicit(&a->used, bytes, memory_order_relaxed);
    if (likely(was + bytes <= a->capacity && was + bytes >= was)) {
        size_t now = was + bytes, hw = atomic_load_explicit(&a->used_high, memory_order_relaxed);
        while (unlikely(now > hw) &&
               !atomic_compare_exchange_weak_explicit(&a->used_high, &hw, now, memory_order_relaxed,
                                                      memory_order_relaxed))
            ;
        return true;
    }
    atomic_fetch_sub_explicit(&a->used, bytes, memory_order_relaxed);
    return false;
}


static inline void give_capacity(hive__arena_t *a, size_t charge)
{
    /* relaxed: a pure counter, as in take_capacity */
    atomic_fetch_sub_explicit(&a->used, charge, memory_order_relaxed);
}

bool hive__arena_charge_elsewhere(hive__arena_t *a, size_t size, int *err)
{
    return take_capacity(a, size, class_size(0), err);
}

void hive__arena_uncharge_elsewhere(hive__arena_t *a)
{
    give_capacity(a, class_size(0));
}

void hive__arena_unreserve(hive__arena_t *a, size_t bytes)
{
    if (bytes != 0)
        give_capacity(a, bytes);
}

void hive__arena_uncharge_elsewhere_n(hive__arena_t *a, size_t n)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, class_size(0), &bytes))
        HIVE_DIE("arena: uncharging %zu inline payloads overflows a size", n);
    if (n != 0)
        give_capacity(a, bytes);
}

void *hive__arena_alloc(hive__arena_t *a, size_t size, unsigned node, int *err)
{
    if (node >= a->nnodes)
        node = 0;
    if (unlikely(size > a->capacity)) {
        *err = hive__fail(HIVE_EFULL, "object store full: asked %zu bytes, capacity is %zu",
                          size, a->capacity);
        return NULL;
    }
    if (size <= HIVE_ARENA_SMALL_MAX) {
        unsigned c = class_of(size);
        if (!take_capacity(a, size, class_size(c), err))
            return NULL;
        void *p = small_alloc(a, c, node);
        if (likely(p != NULL))
            return p;
        /* the small area is spent (or a cache could not be had): a large block */
        give_capacity(a, class_size(c));
    }
    size_t need = large_block(size);
    if (!take_capacity(a, size, need, err))
        return NULL;
    void *p = large_alloc(&a->regions[node], need);
    /* relaxed: a trigger; many large frees since the last purge */
    if (unlikely(atomic_load_explicit(&a->regions[node].large_dirty, memory_order_relaxed) >
                 a->capacity / 8 + PURGE_SLACK) && a->ask_purge != NULL)
        a->ask_purge(a->ask_ctx);
    if (unlikely(p == NULL)) {
        give_capacity(a, need);
        /* relaxed: a number for the sentence */
        *err = hive__fail(HIVE_ENOMEM, "object store: no free block of %zu bytes on node %u "
                          "(%zu of %zu in use)", need, node,
                          atomic_load_explicit(&a->used, memory_order_relaxed), a->capacity);
        return NULL;
    }
    return p;
}

void hive__arena_free(hive__arena_t *a, void *p, size_t size)
{
    unsigned node = hive__arena_node_of(a, p);
    size_t charge;
    if (in_small_area(a, p, node)) {
        unsigned c = class_of(size);
        charge = class_size(c);
        small_free(a, p, c, node);
    } else {
        charge = large_free(&a->regions[node], p);
    }
    give_capacity(a, charge);
}

/* ------------------------------------------------------------ purge */

#define PAGE        ((size_t)4096)

/* Bytes of small area the regions hold: slabs cut, less those waiting on
 * the free-slab lists (punched). Relaxed loads: an estimate for a trigger. */
static size_t small_held(const hive__arena_t *a)
{
    size_t held = 0;
    for (unsigned i = 0; i < a->nnodes; i++) {
        const hive__region_t *r = &a->regions[i];
        size_t cut = atomic_load_explicit(&r->small_cut, memory_order_relaxed);
        held += (cut < a->small_size ? cut : a->small_size) -
                atomic_load_explicit(&r->free_slab_bytes, memory_order_relaxed);
    }
    return held;
}

/* Small-object memory held beyond live bytes + slack (and grown by more
 * than slack/2 since the last purge, which slabs with live cells may have
 * stopped short). Relaxed loads throughout: a stale view only moves a
 * purge a little. */
static bool small_over(const hive__arena_t *a, size_t slack)
{
    size_t used = atomic_load_explicit(&a->used, memory_order_relaxed);
    size_t held = small_held(a), floor = atomic_load_explicit(&a->purge_floor, memory_order_relaxed);
    return held > used + slack && held > floor + slack / 2;
}

bool hive__arena_wants_purge(const hive__arena_t *a)
{
    size_t cap = a->capacity;
    /* soft: half the hard bound of small_refill, so that a worker's purge
     * usually comes before a thread that allocates must do one itself */
    if (small_over(a, cap / 8 + PURGE_SLACK / 2))
        return true;
    for (unsigned i = 0; i < a->nnodes; i++)
        if (atomic_load_explicit(&a->regions[i].large_dirty, memory_order_relaxed) >
            cap / 8 + PURGE_SLACK)
            return true;
    return false;
}

/* Give the pages of [p, p + n) back to the kernel (a hole in the memfd);
 * they read as zeros and cost memory again when written. */
static void punch(char *p, size_t n)
{
    if (n > 0)
        madvise(p, n, MADV_REMOVE);        /* advice: a failure only keeps the pages */
}

/* Take every batch off class c's ring of r as one chain; *n its cells. At
 * most max cells (threads freeing as fast as the drain cannot hold it). */
static hive__fblock_t *drain_class(hive__batchlist_t *l, size_t max, size_t *n)
{
    hive__fblock_t *head = NULL, *tail = NULL;
    *n = 0;
    while (*n < max) {
        hive__fblock_t *b = hive__batch_take(l);
        if (b == NULL)
            break;
        if (tail == NULL)
            head = b;
        else
            hive__fb_set_next(tail, b);
        for (tail = b, (*n)++; hive__fb_next(tail) != NULL; tail = hive__fb_next(tail))
            (*n)++;
    }
    return head;
}

#define WHOLE UINT32_MAX                    /* counts[] mark of a slab whose cells are all free */

/* Purge class c of region r: slabs whose cells are all on the ring leave
 * for the free-slab list. counts has a word per slab cut (nslabs). */
static void purge_class(hive__region_t *r, unsigned c, uint32_t *counts, size_t nslabs)
{
    /* acquire: pairs with the release that published the list */
    hive__batchlist_t *l = atomic_load_explicit(&r->lists[c], memory_order_acquire);
    if (l == NULL)
        return;
    size_t n, per = slab_cells(c);
    hive__fblock_t *chain = drain_class(l, nslabs * per, &n);
    if (chain == NULL)
        return;
    memset(counts, 0, nslabs * sizeof *counts);
    for (hive__fblock_t *b = chain; b != NULL; b = hive__fb_next(b)) {
        size_t i = (size_t)((char *)b - r->small) / HIVE_ARENA_SLAB;
        if (i < nslabs)                     /* cut after we read the bump: not counted */
            counts[i]++;
    }
    size_t whole = 0;
    for (size_t i = 0; i < nslabs; i++)
        if (counts[i] == per) {
            counts[i] = WHOLE;
            whole++;
        }
    if (whole > 0) {                        /* unlink their cells: links are read before the punch */
        hive__fblock_t *keep = NULL, *tail = NULL;
        for (hive__fblock_t *b = chain, *next; b != NULL; b = next) {
            next = hive__fb_next(b);
            size_t i = (size_t)((char *)b - r->small) / HIVE_ARENA_SLAB;
            if (i < nslabs && counts[i] == WHOLE)
                continue;
            if (tail != NULL)
                hive__fb_set_next(tail, b);
            else
                keep = b;
            tail = b;
        }
        if (tail != NULL)
            hive__fb_set_next(tail, NULL);
        chain = keep;
    }
    hive__batch_give_chain(l, chain);
    for (size_t i = 0; i < nslabs && whole > 0; i++) {
        if (counts[i] != WHOLE)
            continue;
        char *slab = r->small + i * HIVE_ARENA_SLAB;
        HIVE_UNPOISON(slab, HIVE_ARENA_SLAB);
        punch(slab, HIVE_ARENA_SLAB);
        pthread_mutex_lock(&r->slab_lock);
        *(char **)(void *)slab = r->free_slabs;   /* one page comes back for the link */
        r->free_slabs = slab;
        atomic_store_explicit(&r->free_slab_bytes,
                              atomic_load_explicit(&r->free_slab_bytes, memory_order_relaxed) +
                              HIVE_ARENA_SLAB, memory_order_relaxed);
        pthread_mutex_unlock(&r->slab_lock);
        whole--;
    }
}

/* Punch the pages of every free large block of r but its header's. */
static void purge_large(hive__region_t *r)
{
    pthread_mutex_lock(&r->lock);
    for (unsigned i = 0; i < 64; i++)
        for (lblk_t *b = r->bins[i]; b != NULL; b = b->next) {
            uintptr_t from = ((uintptr_t)b + HDR + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
            uintptr_t to = ((uintptr_t)b + bsize(b)) & ~(uintptr_t)(PAGE - 1);
            if (to > from)
                punch((char *)from, to - from);
        }
    atomic_store_explicit(&r->large_dirty, 0, memory_order_relaxed);   /* under lock, as large_free */
    pthread_mutex_unlock(&r->lock);
}

/* Forget the large frees counted so far (they were not worth a purge). */
static void clear_dirty(hive__region_t *r)
{
    pthread_mutex_lock(&r->lock);
    atomic_store_explicit(&r->large_dirty, 0, memory_order_relaxed);   /* under lock, as large_free */
    pthread_mutex_unlock(&r->lock);
}

void hive__arena_purge(hive__arena_t *a)
{
    /* acquire/release: one purger at a time, each after the last's writes */
    if (atomic_exchange_explicit(&a->purging, 1, memory_order_acquire) != 0)
        return;
    for (unsigned n = 0; n < a->nnodes; n++) {
        hive__region_t *r = &a->regions[n];
        /* relaxed: slabs cut later are left for the next purge */
        size_t cut = atomic_load_explicit(&r->small_cut, memory_order_relaxed);
        size_t nslabs = (cut < a->small_size ? cut : a->small_size) / HIVE_ARENA_SLAB;
        uint32_t *counts = nslabs > 0 ? hive__malloc(nslabs * sizeof *counts) : NULL;
        if (counts != NULL)                 /* no memory for the counts: no small purge now */
            for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++)
                purge_class(r, c, counts, nslabs);
        free(counts);
    }
    /* Free large blocks are reused by the next large payloads, so their
     * pages only cost when the store holds more than its bound: punching
     * them otherwise would make every put after a release fault its pages
     * in again (a copying put would run at page-fault speed, not memcpy's). */
    bool over = hive__arena_resident(a) > a->large_bound;
    for (unsigned n = 0; n < a->nnodes; n++) {
        hive__region_t *r = &a->regions[n];
        if (atomic_load_explicit(&r->large_dirty, memory_order_relaxed) == 0)
            continue;
        if (over)
            purge_large(r);
        else
            clear_dirty(r);
    }
    atomic_store_explicit(&a->purge_floor, small_held(a), memory_order_relaxed);
    atomic_fetch_add_explicit(&a->purges, 1, memory_order_relaxed);   /* a statistic */
    atomic_store_explicit(&a->purging, 0, memory_order_release);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23              /* Linux 5.14 */
#endif

int hive__arena_prefault(hive__arena_t *a)
{
    size_t per = (a->capacity / a->nnodes + PAGE - 1) & ~(PAGE - 1);
    for (unsigned n = 0; n < a->nnodes; n++) {
        char *p = a->regions[n].base;
        if (madvise(p, per, MADV_POPULATE_WRITE) == 0)
            continue;
        if (errno != EINVAL)                /* EINVAL: an older kernel; touch by hand */
            return hive__fail(HIVE_ENOMEM, "hive_init: prefault of %zu bytes on node %u failed: %s",
                              per, n, strerror(errno));
        for (size_t off = 0; off < per; off += PAGE) {
            volatile char *c = p + off;      /* write each page's first byte back as it is */
            *c = *c;
        }
    }
    return HIVE_OK;
}

void hive__arena_classes(hive__arena_t *a, struct hive_size_class *out)
{
    int64_t cells[HIVE_ARENA_NCLASSES];
    /* relaxed, all: figures for people; the lock keeps the caches listed */
    pthread_mutex_lock(&registry_lock);
    for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++)
        cells[c] = atomic_load_explicit(&a->cells_gone[c], memory_order_relaxed);
    for (tcache_t *t = a->caches; t != NULL; t = t->next)
        for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++)
            cells[c] += atomic_load_explicit(&t->net[c], memory_order_relaxed);
    pthread_mutex_unlock(&registry_lock);
    for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++) {
        uint64_t n = cells[c] > 0 ? (uint64_t)cells[c] : 0;   /* counts read apart: clamp */
        out[c] = (hive_size_class_t){ .size = class_size(c), .bytes = n * class_size(c),
                                      .objects = n };
    }
    hive_size_class_t *large = &out[HIVE_ARENA_NCLASSES];
    *large = (hive_size_class_t){ 0 };
    for (unsigned i = 0; i < a->nnodes; i++) {
        large->bytes += atomic_load_explicit(&a->regions[i].large_used, memory_order_relaxed);
        large->objects += atomic_load_explicit(&a->regions[i].large_live, memory_order_relaxed);
    }
}

size_t hive__arena_resident(const hive__arena_t *a)
{
    struct stat st;
    if (fstat(a->memfd, &st) != 0)
        return 0;
    return (size_t)st.st_blocks * 512;
}

/* ------------------------------------------------------------ address space */

#define AREA_ALIGN  ((size_t)2 << 20)      /* areas start on huge-page boundaries */
#define SMALL_SLACK ((size_t)64 << 20)     /* cells cached by threads, beyond 2 x capacity */

typedef struct layout {
    size_t large, small, region, total;
} layout_t;

/* The most this process can map: the 47-bit user half of x86-64 (and
 * 4-level arm64), or less under RLIMIT_AS. */
static size_t address_limit(void)
{
    size_t lim = (size_t)1 << 47;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < lim)
        lim = (size_t)rl.rlim_cur;
    return lim;
}

/* x rounded up to a multiple of to (a power of two); false on overflow. */
static bool round_up(size_t x, size_t to, size_t *out)
{
    if (__builtin_add_overflow(x, to - 1, out))
        return false;
    *out &= ~(to - 1);
    return true;
}

/* Sizes of the areas for capacity over nnodes; false if they overflow. */
static bool layout_of(size_t capacity, unsigned nnodes, layout_t *l)
{
    size_t twice;
    return !__builtin_mul_overflow(capacity, (size_t)2, &twice) &&
           round_up(twice, AREA_ALIGN, &l->large) &&
           !__builtin_add_overflow(l->large, SMALL_SLACK, &l->small) &&
           !__builtin_add_overflow(l->large, l->small, &l->region) &&
           !__builtin_mul_overflow(l->region, (size_t)nnodes, &l->total);
}

int hive__arena_check(size_t capacity, unsigned nnodes)
{
    layout_t l;
    size_t lim = address_limit();
    if (!layout_of(capacity, nnodes, &l))
        return hive__fail(HIVE_EINVAL, "hive_init: store_bytes = %zu needs 4 x %zu + 64 MiB of address "
                          "space per node x %u nodes, more than 2^64, let alone the %zu this process "
                          "can map", capacity, capacity, nnodes, lim);
    if (l.total > lim)
        return hive__fail(HIVE_EINVAL, "hive_init: store_bytes = %zu needs %zu bytes of address space "
                          "per node (4 x capacity + 64 MiB) x %u nodes = %zu, more than the %zu this "
                          "process can map", capacity, l.region, nnodes, l.total, lim);
    return HIVE_OK;
}

/* Region i of the mapping: its large allocator holds one free block. */
static void init_region(hive__arena_t *a, unsigned i, const hive__topo_t *topo)
{
    hive__region_t *r = &a->regions[i];
    r->node = i;
    r->base = a->base + (size_t)i * a->region_size;
    r->small = r->base + a->large_size;
    atomic_init(&r->small_cut, 0);
    atomic_init(&r->large_used, 0);
    atomic_init(&r->large_live, 0);
    for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++)
        atomic_init(&r->lists[c], NULL);
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->slab_lock, NULL);
    r->free_slabs = NULL;
    atomic_init(&r->free_slab_bytes, 0);
    atomic_init(&r->large_dirty, 0);
    madvise(r->base, a->large_size, MADV_HUGEPAGE);  /* advice only: ignored where THP for shmem is off */
    if (!topo->synthetic) {
        /* place every page of this region on its node; on a single-node
         * machine this is a formality that must still succeed */
        hwloc_nodeset_t ns = hwloc_bitmap_alloc();
        hwloc_bitmap_only(ns, (unsigned)topo->node_os[i]);
        r->bound = hwloc_set_area_membind(topo->hw, r->base, a->region_size, ns, HWLOC_MEMBIND_BIND,
                                          HWLOC_MEMBIND_BYNODESET) == 0;
        hwloc_bitmap_free(ns);
    }
    lblk_t *b = (lblk_t *)(void *)r->base;
    b->size = a->large_size;
    b->prev_size = 0;
    b->magic = LMAGIC;
    bin_insert(r, b);
}

static void close_region(hive__arena_t *a, hive__region_t *r)
{
    /* ASan keeps poison across munmap: clear what the cells poisoned.
     * Relaxed and acquire loads: the engine is stopped, every thread that
     * cut or made a list was joined (which orders it before us) */
    size_t cut = atomic_load_explicit(&r->small_cut, memory_order_relaxed);
    HIVE_UNPOISON(r->small, cut < a->small_size ? cut : a->small_size);
    for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++) {
        hive__batchlist_t *l = atomic_load_explicit(&r->lists[c], memory_order_acquire);
        if (l != NULL) {
            hive__batchlist_destroy(l);
            free(l);
        }
    }
    pthread_mutex_destroy(&r->lock);
    pthread_mutex_destroy(&r->slab_lock);
}

/* One memfd and one mapping for every node's region. */
static int map_store(hive__arena_t *a, const layout_t *l)
{
    a->memfd = hive__fault() ? -1 : memfd_create("hive-arena", MFD_CLOEXEC);
    if (a->memfd < 0)
        return hive__fail(HIVE_ENOMEM, "arena: memfd_create failed: %s", strerror(errno));
    if (ftruncate(a->memfd, (off_t)l->total) != 0) {
        int e = errno;
        close(a->memfd);
        return hive__fail(HIVE_ENOMEM, "arena: cannot size the store's memfd to %zu bytes: %s",
                          l->total, strerror(e));
    }
    void *base = hive__fault() ? MAP_FAILED : mmap(NULL, l->total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, a->memfd, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        close(a->memfd);
        return hive__fail(HIVE_ENOMEM, "arena: cannot map %zu bytes of address space (%zu per node "
                          "x %u nodes for store_bytes = %zu): %s", l->total, l->region, a->nnodes,
                          a->capacity, strerror(e));
    }
    a->base = base;
    a->vsize = l->total;
    return HIVE_OK;
}

static int registry_add(hive__arena_t *a)
{
    pthread_mutex_lock(&registry_lock);
    if (registry_len == registry_cap) {
        size_t cap = registry_cap ? 2 * registry_cap : 8;
        hive__arena_t **n = hive__realloc(registry, cap * sizeof *n);
        if (n == NULL) {
            pthread_mutex_unlock(&registry_lock);
            return hive__fail(HIVE_ENOMEM, "arena: cannot grow the registry to %zu", cap);
        }
        registry = n;
        registry_cap = cap;
    }
    registry[registry_len++] = a;
    pthread_mutex_unlock(&registry_lock);
    return HIVE_OK;
}

static void unmap_store(hive__arena_t *a)
{
    for (unsigned i = 0; i < a->nnodes; i++)
        close_region(a, &a->regions[i]);
    munmap(a->base, a->vsize);
    close(a->memfd);
    free(a->regions);
    a->regions = NULL;
    a->base = NULL;
}

int hive__arena_open(hive__arena_t *a, size_t capacity, const hive__topo_t *topo)
{
    memset(a, 0, sizeof *a);
    a->capacity = capacity;
    a->nnodes = topo->nnodes;
    a->id = atomic_fetch_add(&next_arena_id, 1);
    a->large_bound = capacity / 4 * 5 + PURGE_SLACK;   /* cannot overflow: capacity < 2^47 here */
    int rc = hive__arena_check(capacity, a->nnodes);
    if (rc != HIVE_OK)
        return rc;
    layout_t l = { 0 };
    layout_of(capacity, a->nnodes, &l);      /* cannot overflow: checked */
    a->large_size = l.large;
    a->small_size = l.small;
    a->region_size = l.region;
    if (hive__posix_memalign((void **)&a->regions, HIVE_PAD, a->nnodes * sizeof *a->regions) != 0)
        return hive__fail(HIVE_ENOMEM, "arena: cannot allocate %u regions", a->nnodes);
    memset(a->regions, 0, a->nnodes * sizeof *a->regions);
    rc = map_store(a, &l);
    if (rc != HIVE_OK) {
        free(a->regions);
        a->regions = NULL;
        return rc;
    }
    for (unsigned i = 0; i < a->nnodes; i++)
        init_region(a, i, topo);
    rc = registry_add(a);
    if (rc != HIVE_OK)
        unmap_store(a);
    return rc;
}

void hive__arena_close(hive__arena_t *a)
{
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < registry_len; i++)
        if (registry[i] == a) {
            registry[i] = registry[--registry_len];
            break;
        }
    if (registry_len == 0) {
        free(registry);
        registry = NULL;
        registry_cap = 0;
    }
    pthread_mutex_unlock(&registry_lock);
    if (tc.arena == a) {
        free(tc.cls);
        memset(&tc, 0, sizeof tc);
    }
    unmap_store(a);
}
