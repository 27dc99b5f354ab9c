/*
 * arena.c - payload memory (see arena.h for the shape of it).
 *
 * Large allocator: every block, free or used, starts with a 64-byte header
 * holding its size and its physical predecessor's size (boundary tags), so
 * a freed block merges with free neighbours on both sides in O(1). Free
 * blocks sit in 64 lists by floor(log2(size)); alloc scans its own list
 * first-fit and takes the first block of any larger list, splitting off the
 * rest. All of it under the region's mutex.
 *
 * Small allocator: slabs cut from the class's own address range with one
 * atomic add, carved into cells; per-thread caches and lock-free batch
 * rings (ds/batch.h). A cell stays with its class forever (resident memory
 * of a class is its high-water mark), which is why each class has a range
 * of its own: no history of small objects can block a large one.
 *
 * Per-thread caches belong to one arena at a time (one cache per node and
 * class): the thread-local cache names the arena by its process-unique id. A thread that moves to
 * another arena first hands its cells back to the old one, if that arena is
 * still open - a registry of open arenas under a mutex decides, so a cache
 * never writes into an arena that was closed (its cells are then simply
 * forgotten with the memory).
 */
#include "arena.h"
#include "ds/batch.h"
#include "util/error.h"

#include <errno.h>
#include <hwloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ------------------------------------------------------------ large blocks */

#define HDR         64u
#define MIN_BLOCK   128u
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
    return n < r->base + r->large_size ? (lblk_t *)(void *)n : NULL;
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

/* A payload of n bytes from the large allocator, or NULL if no free block
 * is big enough. */
static void *large_alloc(hive__region_t *r, size_t n)
{
    size_t need = HDR + ((n + 63) & ~(size_t)63);
    if (need < MIN_BLOCK)
        need = MIN_BLOCK;
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
    if (have - need >= MIN_BLOCK) {
        lblk_t *rest = (lblk_t *)(void *)((char *)b + need);
        rest->size = have - need;
        rest->prev_size = need;
        rest->magic = LMAGIC;
        b->size = need;
        set_prev_size_of_next(r, rest);
        bin_insert(r, rest);
    }
    b->magic = LMAGIC;
    pthread_mutex_unlock(&r->lock);
    return (char *)b + HDR;
}

static void large_free(hive__region_t *r, void *p)
{
    lblk_t *b = (lblk_t *)(void *)((char *)p - HDR);
    pthread_mutex_lock(&r->lock);
    if (b->magic != LMAGIC || bfree(b))
        HIVE_DIE("arena: freeing %p, which is not a live large block", p);
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
    pthread_mutex_unlock(&r->lock);
}

/* ------------------------------------------------------------ small cells */

static inline unsigned class_of(size_t size)
{
    unsigned c = 0;
    for (size_t s = 64; s < size; s <<= 1)
        c++;
    return c;
}

static inline size_t class_size(unsigned c)
{
    return (size_t)64 << c;
}

static inline size_t slab_bytes(unsigned c)
{
    size_t s = 8 * class_size(c);
    return s < 65536 ? 65536 : s;
}

typedef struct tcache {
    uint64_t        arena_id;       /* 0: none */
    hive__arena_t  *arena;
    hive__fcache_t *cls;            /* [node * HIVE_ARENA_NCLASSES + class] */
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

/* Hand the thread's cells back to their arena, if it is still open. */
static void tc_release(void)
{
    if (tc.arena_id == 0)
        return;
    pthread_mutex_lock(&registry_lock);
    if (registry_has(tc.arena, tc.arena_id)) {
        for (unsigned n = 0; n < tc.arena->nnodes; n++)
            for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++) {
                hive__fcache_t *k = &tc.cls[n * HIVE_ARENA_NCLASSES + c];
                hive__fcache_flush(k, &tc.arena->regions[n].batches[c]);
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
    tc.cls = calloc((size_t)a->nnodes * HIVE_ARENA_NCLASSES, sizeof *tc.cls);
    if (tc.cls == NULL)
        return false;
    tc.arena = a;
    tc.arena_id = a->id;
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

static void *small_alloc(hive__arena_t *a, size_t size, unsigned node)
{
    if (unlikely(!tc_is(a)) && !tc_switch(a))
        return NULL;
    unsigned c = class_of(size);
    hive__fcache_t *k = &tc.cls[node * HIVE_ARENA_NCLASSES + c];
    if (unlikely(k->head == NULL)) {
        hive__region_t *r = &a->regions[node];
        if (!hive__fcache_refill(k, &r->batches[c])) {
            size_t sb = slab_bytes(c);
            /* relaxed: the range is only ever cut, never handed back */
            size_t off = atomic_fetch_add_explicit(&r->class_used[c], sb, memory_order_relaxed);
            if (off + sb > r->class_area)
                return NULL;
            hive__fcache_carve(k, r->class_base[c] + off, sb, class_size(c), &r->batches[c]);
        }
    }
    return hive__fcache_pop(k, class_size(c));
}

static void small_free(hive__arena_t *a, void *p, size_t size, unsigned node)
{
    if (unlikely(!tc_is(a)) && !tc_switch(a)) {
        /* no memory for a cache: hand the cell over as a batch of one */
        hive__fblock_t *b = p;
        atomic_init(&b->next, NULL);
        hive__batch_give(&a->regions[node].batches[class_of(size)], b);
        return;
    }
    unsigned c = class_of(size);
    hive__fcache_push(&tc.cls[node * HIVE_ARENA_NCLASSES + c], p, class_size(c),
                      &a->regions[node].batches[c]);
}

/* ------------------------------------------------------------ the arena */

unsigned hive__arena_node_of(const hive__arena_t *a, const void *p)
{
    for (unsigned i = 0; i < a->nnodes; i++) {
        const hive__region_t *r = &a->regions[i];
        if ((const char *)p >= r->base && (const char *)p < r->base + r->vsize)
            return i;
    }
    return 0;
}

void *hive__arena_alloc(hive__arena_t *a, size_t size, unsigned node, int *err)
{
    if (node >= a->nnodes)
        node = 0;
    size_t charge = hive__arena_charge(size);
    if (unlikely(size > a->capacity)) {
        *err = hive__fail(HIVE_EFULL, "object store full: asked %zu bytes, capacity is %zu",
                          size, a->capacity);
        return NULL;
    }
    /* relaxed: a pure counter; nothing is published through it */
    size_t was = atomic_fetch_add_explicit(&a->used, charge, memory_order_relaxed);
    if (unlikely(was + charge > a->capacity)) {
        atomic_fetch_sub_explicit(&a->used, charge, memory_order_relaxed);
        *err = hive__fail(HIVE_EFULL, "object store full: asked %zu bytes, %zu of %zu in use",
                          size, was, a->capacity);
        return NULL;
    }
    void *p = charge <= HIVE_ARENA_SMALL_MAX ? small_alloc(a, charge, node)
                                             : large_alloc(&a->regions[node], charge);
    if (unlikely(p == NULL)) {
        atomic_fetch_sub_explicit(&a->used, charge, memory_order_relaxed);
        *err = hive__fail(HIVE_ENOMEM, "object store: no free block of %zu bytes on node %u "
                          "(%zu of %zu in use)", size, node, was, a->capacity);
        return NULL;
    }
    return p;
}

void hive__arena_free(hive__arena_t *a, void *p, size_t size)
{
    size_t charge = hive__arena_charge(size);
    unsigned node = hive__arena_node_of(a, p);
    if (charge <= HIVE_ARENA_SMALL_MAX)
        small_free(a, p, charge, node);
    else
        large_free(&a->regions[node], p);
    atomic_fetch_sub_explicit(&a->used, charge, memory_order_relaxed);
}

static int open_region(hive__region_t *r, unsigned node, size_t large_size, size_t class_area,
                       const hive__topo_t *topo)
{
    size_t vsize = large_size + HIVE_ARENA_NCLASSES * class_area;
    memset(r, 0, sizeof *r);
    r->node = node;
    r->large_size = large_size;
    r->class_area = class_area;
    r->memfd = memfd_create("hive-arena", MFD_CLOEXEC);
    if (r->memfd < 0)
        return hive__fail(HIVE_ENOMEM, "arena: memfd_create for node %u failed: %s", node, strerror(errno));
    if (ftruncate(r->memfd, (off_t)vsize) != 0) {
        int e = errno;
        close(r->memfd);
        return hive__fail(HIVE_ENOMEM, "arena: cannot size node %u's region to %zu bytes: %s",
                          node, vsize, strerror(e));
    }
    void *base = mmap(NULL, vsize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, r->memfd, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        close(r->memfd);
        return hive__fail(HIVE_ENOMEM, "arena: cannot map %zu bytes for node %u: %s", vsize, node, strerror(e));
    }
    r->base = base;
    r->vsize = vsize;
    for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++) {
        r->class_base[c] = (char *)base + large_size + c * class_area;
        atomic_init(&r->class_used[c], 0);
    }
    madvise(base, large_size, MADV_HUGEPAGE);   /* advice only: ignored where THP for shmem is off */
    if (!topo->synthetic) {
        /* place every page of this region on its node; on a single-node
         * machine this is a formality that must still succeed */
        hwloc_nodeset_t ns = hwloc_bitmap_alloc();
        hwloc_bitmap_only(ns, (unsigned)topo->node_os[node]);
        r->bound = hwloc_set_area_membind(topo->hw, base, vsize, ns, HWLOC_MEMBIND_BIND,
                                          HWLOC_MEMBIND_BYNODESET) == 0;
        hwloc_bitmap_free(ns);
    }
    pthread_mutex_init(&r->lock, NULL);
    for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++)
        hive__batchlist_init(&r->batches[c]);
    lblk_t *b = (lblk_t *)base;
    b->size = large_size & ~(size_t)63;
    b->prev_size = 0;
    b->magic = LMAGIC;
    bin_insert(r, b);
    return HIVE_OK;
}

static void close_region(hive__region_t *r)
{
    if (r->base == NULL)
        return;
    /* ASan keeps poison across munmap: clear what the cells poisoned */
    for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++) {
        size_t used = atomic_load_explicit(&r->class_used[c], memory_order_relaxed);
        HIVE_UNPOISON(r->class_base[c], used < r->class_area ? used : r->class_area);
    }
    munmap(r->base, r->vsize);
    for (unsigned c = 0; c < HIVE_ARENA_NCLASSES; c++)
        hive__batchlist_destroy(&r->batches[c]);
    close(r->memfd);
    pthread_mutex_destroy(&r->lock);
    r->base = NULL;
}

int hive__arena_open(hive__arena_t *a, size_t capacity, const hive__topo_t *topo)
{
    memset(a, 0, sizeof *a);
    a->capacity = capacity;
    a->nnodes = topo->nnodes;
    a->id = atomic_fetch_add(&next_arena_id, 1);
    /* address space (see arena.h): 2x capacity for large blocks, capacity
     * plus slack for cells kept in caches for every small class */
    size_t page = 2u << 20;
    size_t large_size = (2 * capacity + page - 1) & ~(page - 1);
    size_t class_area = (capacity + (64u << 20) + page - 1) & ~(page - 1);
    if (posix_memalign((void **)&a->regions, HIVE_PAD, a->nnodes * sizeof *a->regions) != 0)
        return hive__fail(HIVE_ENOMEM, "arena: cannot allocate %u regions", a->nnodes);
    memset(a->regions, 0, a->nnodes * sizeof *a->regions);
    for (unsigned i = 0; i < a->nnodes; i++) {
        int rc = open_region(&a->regions[i], i, large_size, class_area, topo);
        if (rc != HIVE_OK) {
            for (unsigned j = 0; j < i; j++)
                close_region(&a->regions[j]);
            free(a->regions);
            a->regions = NULL;
            return rc;
        }
    }
    pthread_mutex_lock(&registry_lock);
    if (registry_len == registry_cap) {
        size_t cap = registry_cap ? 2 * registry_cap : 8;
        hive__arena_t **n = realloc(registry, cap * sizeof *n);
        if (n == NULL) {
            pthread_mutex_unlock(&registry_lock);
            for (unsigned j = 0; j < a->nnodes; j++)
                close_region(&a->regions[j]);
            free(a->regions);
            return hive__fail(HIVE_ENOMEM, "arena: cannot grow the registry to %zu", cap);
        }
        registry = n;
        registry_cap = cap;
    }
    registry[registry_len++] = a;
    pthread_mutex_unlock(&registry_lock);
    return HIVE_OK;
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
    for (unsigned i = 0; i < a->nnodes; i++)
        close_region(&a->regions[i]);
    free(a->regions);
    a->regions = NULL;
}
