/* test_arena.c - the payload allocator: alignment, exact capacity,
 * coalescing of large blocks, small cells across threads, NUMA regions,
 * what a payload is charged, fills of every size, the small area's
 * fallback, and the address space check. */
#include "testutil.h"
#include "arena.h"
#include "hive_impl.h"
#include "util/fault.h"

#include <pthread.h>

static hive__topo_t topo;
static hive__arena_t arena;

static int setup(void **state)
{
    (void)state;
    if (hive__topo_open(&topo, "pack:2 numa:1 core:2 pu:1") != HIVE_OK)
        return -1;
    return hive__arena_open(&arena, 64u << 20, &topo) == HIVE_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    hive__arena_close(&arena);
    hive__topo_close(&topo);
    return 0;
}

static void test_regions_per_node(void **state)
{
    (void)state;
    int err;
    assert_int_equal(arena.nnodes, 2);
    void *a = hive__arena_alloc(&arena, 100, 0, &err);
    void *b = hive__arena_alloc(&arena, 100, 1, &err);
    assert_int_equal(hive__arena_node_of(&arena, a), 0);
    assert_int_equal(hive__arena_node_of(&arena, b), 1);
    hive__arena_free(&arena, a, 100);
    hive__arena_free(&arena, b, 100);
    assert_int_equal(atomic_load(&arena.used), 0);
}

static void test_large_blocks_coalesce(void **state)
{
    (void)state;
    int err;
    const size_t M = 1u << 20;
    char *a = hive__arena_alloc(&arena, 4 * M, 0, &err);
    char *b = hive__arena_alloc(&arena, 4 * M, 0, &err);
    char *c = hive__arena_alloc(&arena, 4 * M, 0, &err);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_int_equal((uintptr_t)a % 64, 0);
    memset(a, 1, 4 * M);
    memset(b, 2, 4 * M);
    memset(c, 3, 4 * M);
    assert_int_equal(atomic_load(&arena.used), 12 * M + 3 * 64);   /* three 64-byte headers */
    /* free the middle, then the first: they merge into one 8 MiB hole */
    hive__arena_free(&arena, b, 4 * M);
    hive__arena_free(&arena, a, 4 * M);
    char *d = hive__arena_alloc(&arena, 8 * M, 0, &err);
    assert_ptr_equal(d, a);                      /* first fit lands in the merged hole */
    assert_int_equal(c[0], 3);                   /* the neighbour is untouched */
    hive__arena_free(&arena, d, 8 * M);
    hive__arena_free(&arena, c, 4 * M);
    assert_int_equal(atomic_load(&arena.used), 0);
    /* all merged back: the largest possible block (with its header,
     * exactly the capacity) is available again */
    char *all = hive__arena_alloc(&arena, (64u << 20) - 64, 0, &err);
    assert_non_null(all);
    assert_int_equal(atomic_load(&arena.used), 64u << 20);
    hive__arena_free(&arena, all, (64u << 20) - 64);
}

static void test_capacity_exact(void **state)
{
    (void)state;
    int err = 0;
    void *a = hive__arena_alloc(&arena, (64u << 20) - 128, 1, &err);   /* + its header */
    assert_non_null(a);
    void *b = hive__arena_alloc(&arena, 1, 1, &err);   /* a 64-byte cell: exactly full */
    assert_non_null(b);
    assert_null(hive__arena_alloc(&arena, 1, 0, &err));
    assert_int_equal(err, HIVE_EFULL);
    assert_non_null(strstr(hive_last_error(), "asked 1 bytes (taking 64), 67108864 of 67108864 in use"));
    hive__arena_free(&arena, b, 1);
    hive__arena_free(&arena, a, (64u << 20) - 128);
    assert_int_equal(atomic_load(&arena.used), 0);
}

#define CELLS 20000
static void *_Atomic handoff[CELLS];

static void *freer(void *arg)
{
    (void)arg;
    for (int i = 0; i < CELLS; i++) {
        void *p;
        while ((p = atomic_exchange(&handoff[i], NULL)) == NULL)
            ;
        assert_int_equal(*(int *)p, i);
        hive__arena_free(&arena, p, 200);
    }
    hive__arena_flush_thread(&arena);
    return NULL;
}

static void test_small_cells_across_threads(void **state)
{
    (void)state;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, freer, NULL), 0);
    int err;
    for (int i = 0; i < CELLS; i++) {
        int *p = hive__arena_alloc(&arena, 200, 0, &err);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        *p = i;
        atomic_store(&handoff[i], p);
    }
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&arena.used), 0);
    /* the cells come back: a second round cuts no new slab */
    size_t before = atomic_load(&arena.regions[0].small_cut);
    void *p = hive__arena_alloc(&arena, 200, 0, &err);
    assert_int_equal(atomic_load(&arena.regions[0].small_cut), before);
    hive__arena_free(&arena, p, 200);
    hive__arena_flush_thread(&arena);
}

/* ------------------------------------------------ what a payload is charged */

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static hive__arena_t fresh;

static void open_fresh(size_t cap)
{
    if (hive__arena_open(&fresh, cap, &topo) != HIVE_OK)
        fail_msg("an arena of %zu bytes: %s", cap, hive_last_error());
}

static size_t round64(size_t n)
{
    return n == 0 ? 64 : (n + 63) & ~(size_t)63;
}

/* A charge is a multiple of 64 that holds the payload and wastes at most a
 * quarter of it (of 64 bytes, the payload alignment, below 256). */
static void check_charge_bound(size_t size, size_t charge)
{
    if (charge < size || charge % 64 != 0 || charge * 4 > round64(size) * 5 ||
        (size > 256 && charge * 4 >= size * 5))
        fail_msg("a payload of %zu bytes is charged %zu", size, charge);
}

/* Payload sizes 0 .. 1 MiB: every 64 bytes and one more up to 64 KiB + 64,
 * then powers of two and one either side; step widens under sanitizers
 * (it stays a multiple of 64, so every 2^k + 1 is still met). */
static size_t next_size(size_t s)
{
    if (s < 64 * KiB + 64)
        return s % 64 == 0 ? s + 1 : s - 1 + 64 * TEST_SCALE;
    size_t p = (size_t)1 << (64 - __builtin_clzll((unsigned long long)s));   /* next power of two above */
    if (s + 1 < p - 1)
        return p - 1;
    return s + 1;
}

/* used grows by exactly the charge, and the charge is the room the payload
 * really takes: two payloads of a size allocated in a fresh arena lie one
 * charge apart (neighbouring cells of one slab, or neighbouring blocks). */
static void test_charge_is_the_room_taken(void **state)
{
    (void)state;
    for (size_t s = 0; s <= MiB + 1; s = next_size(s)) {
        size_t charge = hive__arena_charge(s);
        open_fresh(4 * charge);
        int err;
        check_charge_bound(s, charge);
        char *p = hive__arena_alloc(&fresh, s, 0, &err);
        char *q = hive__arena_alloc(&fresh, s, 0, &err);
        assert_non_null(p);
        assert_non_null(q);
        if ((size_t)(q - p) != charge)
            fail_msg("size %zu: charged %zu, but payloads lie %td bytes apart", s, charge, q - p);
        assert_int_equal(atomic_load(&fresh.used), 2 * charge);
        assert_int_equal(hive__arena_charge_of(&fresh, p, s), charge);
        hive__arena_free(&fresh, q, s);
        hive__arena_free(&fresh, p, s);
        assert_int_equal(atomic_load(&fresh.used), 0);
        hive__arena_close(&fresh);
    }
}

/* Fill a fresh arena with payloads of one size until it refuses: it must
 * say HIVE_EFULL (never ENOMEM), past 95% of the capacity, with used the
 * exact sum of the charges. The capacity is 20 charges or more. */
static void fill_until_full(size_t size, size_t cap)
{
    open_fresh(cap);
    size_t charge = hive__arena_charge(size), n = 0;
    int err = 0;
    while (hive__arena_alloc(&fresh, size, 0, &err) != NULL)
        n++;
    size_t used = atomic_load(&fresh.used);
    if (err != HIVE_EFULL)
        fail_msg("size %zu, capacity %zu: %s after %zu payloads (%zu bytes in use): %s", size, cap,
                 hive_strerror(err), n, used, hive_last_error());
    if (used != n * charge || used + charge <= cap || used * 20 < cap * 19)
        fail_msg("size %zu, capacity %zu: full with %zu payloads, %zu bytes in use, charge %zu",
                 size, cap, n, used, charge);
    hive__arena_close(&fresh);
}

static void test_every_size_fills_the_store(void **state)
{
    (void)state;
    for (size_t s = 0; s <= MiB + 1; s = next_size(s)) {
        size_t cap = (24 * hive__arena_charge(s) + 64 * KiB - 1) & ~(64 * KiB - 1);
        fill_until_full(s, cap);
    }
}

/* The case: 4160-byte payloads take 5120-byte cells, charged as
 * such, and fill a 128 MiB store (they once ran out of address at 76%). */
static void test_fill_beyond_the_slack(void **state)
{
    (void)state;
    fill_until_full(4160, 128 * MiB);
    fill_until_full(4097, 128 * MiB);
}

/* A history of every class filling the store in turn spends the small area
 * (cells stay with their class): later small payloads take large blocks,
 * the store still fills, and everything comes back. */
static void test_spent_small_area_falls_back_to_blocks(void **state)
{
    (void)state;
    const size_t cap = 8 * MiB;
    open_fresh(cap);
    static void *held[8 * MiB / 64 + 1];
    size_t fell_back = 0;
    for (size_t s = 64; s <= HIVE_ARENA_SMALL_MAX; s = hive__arena_charge(s) + 1) {
        size_t n = 0;
        int err = 0;
        while ((held[n] = hive__arena_alloc(&fresh, s, 0, &err)) != NULL)
            n++;
        size_t used = atomic_load(&fresh.used), sum = 0;
        for (size_t i = 0; i < n; i++) {
            size_t c = hive__arena_charge_of(&fresh, held[i], s);
            fell_back += c != hive__arena_charge(s);
            sum += c;
        }
        if (err != HIVE_EFULL || used != sum || used * 20 < cap * 19)
            fail_msg("size %zu: %s after %zu payloads, %zu in use (charges sum to %zu): %s", s,
                     hive_strerror(err), n, used, sum, hive_last_error());
        for (size_t i = 0; i < n; i++)
            hive__arena_free(&fresh, held[i], s);
        hive__arena_flush_thread(&fresh);
        assert_int_equal(atomic_load(&fresh.used), 0);
    }
    assert_true(fell_back > 0);          /* 32 classes x 8 MiB do not fit 80 MiB of cells */
    int err;
    void *big = hive__arena_alloc(&fresh, cap - 64, 0, &err);   /* the whole capacity, in one */
    if (big == NULL)
        fail_msg("after the history, the capacity in one block failed: %s", hive_last_error());
    hive__arena_free(&fresh, big, cap - 64);
    hive__arena_close(&fresh);
}

/* ------------------------------------------------------------ purge */

/* Every class in turn fills half the store and frees it all. Without
 * purges each class keeps its cells: the memfd holds the sum of the
 * history (here some 30 x 4 MiB). With a purge after each round, the
 * memory held stays near one round's, and later classes take the slabs
 * earlier ones gave back instead of cutting new ones. */
static void test_purge_gives_slabs_back(void **state)
{
    (void)state;
    const size_t cap = 8 * MiB;
    open_fresh(cap);
    static void *held[8 * MiB / 64 + 1];
    size_t most = 0, rounds = 0;
    for (size_t s = 64; s <= HIVE_ARENA_SMALL_MAX; s = hive__arena_charge(s) + 1, rounds++) {
        size_t n = 0;
        int err = 0;
        while (atomic_load(&fresh.used) < cap / 2 &&
               (held[n] = hive__arena_alloc(&fresh, s, 0, &err)) != NULL)
            n++;
        for (size_t i = 0; i < n; i++)
            hive__arena_free(&fresh, held[i], s);
        hive__arena_flush_thread(&fresh);
        size_t before = hive__arena_resident(&fresh);
        hive__arena_purge(&fresh);
        size_t after = hive__arena_resident(&fresh);
        if (before > most)
            most = before;
        /* all cells are on the rings: every slab goes; what stays is a page
         * per free slab (its link) and the large area's first header */
        if (after > 64 * KiB + (fresh.regions[0].free_slab_bytes / HIVE_ARENA_SLAB) * 4 * KiB)
            fail_msg("size %zu: %zu bytes held after the purge (%zu before)", s, after, before);
    }
    /* a round fills cap / 2 (plus a slab); the history never held much more */
    if (most > cap / 2 + 2 * MiB)
        fail_msg("%zu bytes held at most over %zu rounds of %zu", most, rounds, cap / 2);
    size_t cut = atomic_load(&fresh.regions[0].small_cut);
    assert_true(cut <= cap / 2 + 2 * MiB);   /* slabs were reused, not cut anew */
    assert_int_equal(atomic_load(&fresh.purges), rounds);
    hive__arena_close(&fresh);
}

/* A slab with one live cell stays with its class; its neighbours go. */
static void test_purge_keeps_slabs_with_live_cells(void **state)
{
    (void)state;
    open_fresh(8 * MiB);
    const size_t s = 1000, per = HIVE_ARENA_SLAB / hive__arena_charge(s);
    static void *held[4096];
    int err;
    size_t n = 8 * per;                       /* eight slabs' worth */
    for (size_t i = 0; i < n; i++)
        assert_non_null(held[i] = hive__arena_alloc(&fresh, s, 0, &err));
    for (size_t i = 0; i < n; i++)
        if (i != 3 * per + 5)                 /* one cell of one slab stays live */
            hive__arena_free(&fresh, held[i], s);
    hive__arena_flush_thread(&fresh);
    hive__arena_purge(&fresh);
    size_t freed = fresh.regions[0].free_slab_bytes;
    size_t cut = atomic_load(&fresh.regions[0].small_cut);
    assert_int_equal(freed, cut - HIVE_ARENA_SLAB);   /* every slab but the one */
    /* the slab that stayed still serves its class, and the live cell is intact */
    memset(held[3 * per + 5], 0x5a, s);
    hive__arena_free(&fresh, held[3 * per + 5], s);
    hive__arena_flush_thread(&fresh);
    hive__arena_purge(&fresh);
    assert_int_equal(fresh.regions[0].free_slab_bytes, cut);
    /* purging twice with nothing new changes nothing */
    hive__arena_purge(&fresh);
    assert_int_equal(fresh.regions[0].free_slab_bytes, cut);
    assert_int_equal(atomic_load(&fresh.used), 0);
    hive__arena_close(&fresh);
}

/* Freed large blocks keep their pages while the store holds less than its
 * bound (the next large payloads reuse them without faulting), and lose
 * them in a purge beyond it. */
static void test_purge_gives_large_pages_back(void **state)
{
    (void)state;
    open_fresh(64 * MiB);
    void *p[40];
    int err;
    for (int i = 0; i < 40; i++) {
        assert_non_null(p[i] = hive__arena_alloc(&fresh, MiB, 0, &err));
        memset(p[i], 1, MiB);
    }
    size_t full = hive__arena_resident(&fresh);
    assert_true(full >= 40 * MiB);
    for (int i = 0; i < 40; i += 2)           /* every other one: no coalescing among them */
        hive__arena_free(&fresh, p[i], MiB);
    hive__arena_purge(&fresh);                /* 40 MiB held, under 64 * 5/4 + 16: kept */
    assert_true(hive__arena_resident(&fresh) >= 40 * MiB);
    assert_int_equal(atomic_load(&fresh.regions[0].large_dirty), 0);
    fresh.large_bound = 0;                    /* as if the store held more than its bound */
    for (int i = 0; i < 40; i += 2) {         /* dirty again */
        assert_non_null(p[i] = hive__arena_alloc(&fresh, MiB, 0, &err));
        hive__arena_free(&fresh, p[i], MiB);
    }
    hive__arena_purge(&fresh);
    size_t half = hive__arena_resident(&fresh);
    if (half > 20 * MiB + MiB)
        fail_msg("%zu bytes held with 20 of 40 MiB blocks live (%zu before)", half, full);
    for (int i = 1; i < 40; i += 2)
        hive__arena_free(&fresh, p[i], MiB);
    hive__arena_purge(&fresh);
    assert_true(hive__arena_resident(&fresh) <= 64 * KiB);
    assert_int_equal(atomic_load(&fresh.regions[0].large_dirty), 0);
    /* the memory serves again */
    void *big = hive__arena_alloc(&fresh, 40 * MiB, 0, &err);
    assert_non_null(big);
    memset(big, 2, 40 * MiB);
    hive__arena_free(&fresh, big, 40 * MiB);
    hive__arena_close(&fresh);
}

/* Through an engine, nobody calls the purge: the arena asks a worker when
 * the memory held outgrows live bytes. Every size class in turn fills 3/4
 * of a 64 MiB store and is released; the memory the store holds stays
 * within capacity + capacity/4 + the 16 MiB slack (without purges the
 * history piles up past 200 MiB). */
static void test_engine_purges_by_itself(void **state)
{
    (void)state;
    const size_t cap = 64 * MiB;
    hive_t *h = test_engine(cap, 1, NULL);
    static hive_ref_t refs[64 * MiB / 64];
    size_t most = 0;
    /* from the first size past the inline payloads: those live in records */
    for (size_t s = HIVE__INLINE_MAX + 1; s <= HIVE_ARENA_SMALL_MAX; s = hive__arena_charge(s) + 1) {
        size_t n = 0;
        hive_store_stats_t st;
        do {
            void *data;
            if (hive_create(h, s, &data, &refs[n]) != HIVE_OK)
                fail_msg("size %zu, object %zu: %s", s, n, hive_last_error());
            memset(data, 1, s);
            assert_int_equal(hive_seal(h, refs[n]), HIVE_OK);
            n++;
            assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
        } while (st.used < cap / 4 * 3);
        assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
        if (st.resident > most)
            most = st.resident;
        for (size_t i = 0; i < n; i++)
            assert_int_equal(hive_release(h, refs[i]), HIVE_OK);
        test_expect_empty_store(h);
    }
    printf("held at most %zu MiB over the history, %llu purges\n", most >> 20,
           (unsigned long long)atomic_load(&h->arena.purges));
    if (most > cap + cap / 4 + 16 * MiB)
        fail_msg("the store held %zu bytes at most (capacity %zu)", most, cap);
    assert_true(atomic_load(&h->arena.purges) > 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------------ address space */

static void test_address_space_is_checked_up_front(void **state)
{
    (void)state;
    assert_int_equal(hive__arena_check(64 * MiB, 3000), HIVE_OK);
    ASSERT_FAILS_WITH(hive__arena_check((size_t)1 << 45, 1), HIVE_EINVAL,
                      "store_bytes = 35184372088832 needs 140737555464192 bytes of address space per node");
    ASSERT_FAILS_WITH(hive__arena_check((size_t)1 << 40, 200), HIVE_EINVAL, "x 200 nodes = ");
    ASSERT_FAILS_WITH(hive__arena_check(SIZE_MAX / 3, 2), HIVE_EINVAL, "more than 2^64");
    /* refused before anything is mapped, with the same sentence */
    hive__arena_t a;
    ASSERT_FAILS_WITH(hive__arena_open(&a, (size_t)1 << 45, &topo), HIVE_EINVAL, "x 2 nodes");
}

/* hive__arena_classes: cells and large blocks counted per class, also a
 * cell freed by a thread whose cache could not be made (its free goes to
 * the class's list as a batch of one, counted on the arena itself). */
static void *free_uncached(void *arg)
{
    atomic_store(&hive__fault_countdown, 1);      /* this thread's cache: no memory */
    hive__arena_free(&arena, arg, 100);
    atomic_store(&hive__fault_countdown, 0);
    return NULL;
}

static void test_classes_counted(void **state)
{
    (void)state;
    hive_size_class_t c[HIVE_STORE_CLASSES];
    int err;
    void *small = hive__arena_alloc(&arena, 100, 0, &err);      /* a cell of 128 */
    void *big = hive__arena_alloc(&arena, 100000, 0, &err);     /* a large block */
    assert_non_null(small);
    assert_non_null(big);
    hive__arena_classes(&arena, c);
    assert_int_equal(c[1].size, 128);
    assert_int_equal(c[1].objects, 1);
    assert_int_equal(c[1].bytes, 128);
    assert_int_equal(c[HIVE_STORE_CLASSES - 1].size, 0);
    assert_int_equal(c[HIVE_STORE_CLASSES - 1].objects, 1);
    assert_int_equal(c[HIVE_STORE_CLASSES - 1].bytes, hive__arena_charge(100000));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, free_uncached, small), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    hive__arena_free(&arena, big, 100000);
    hive__arena_classes(&arena, c);
    assert_int_equal(c[1].objects, 0);
    assert_int_equal(c[HIVE_STORE_CLASSES - 1].objects, 0);
    assert_int_equal(c[HIVE_STORE_CLASSES - 1].bytes, 0);
    assert_int_equal(atomic_load(&arena.used), 0);
    hive__arena_flush_thread(&arena);             /* the cache's counts move to the arena */
    hive__arena_classes(&arena, c);
    assert_int_equal(c[1].objects, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classes_counted),
        cmocka_unit_test(test_regions_per_node),
        cmocka_unit_test(test_large_blocks_coalesce),
        cmocka_unit_test(test_capacity_exact),
        cmocka_unit_test(test_small_cells_across_threads),
        cmocka_unit_test(test_charge_is_the_room_taken),
        cmocka_unit_test(test_every_size_fills_the_store),
        cmocka_unit_test(test_fill_beyond_the_slack),
        cmocka_unit_test(test_spent_small_area_falls_back_to_blocks),
        cmocka_unit_test(test_purge_gives_slabs_back),
        cmocka_unit_test(test_purge_keeps_slabs_with_live_cells),
        cmocka_unit_test(test_purge_gives_large_pages_back),
        cmocka_unit_test(test_engine_purges_by_itself),
        cmocka_unit_test(test_address_space_is_checked_up_front),
    };
    return cmocka_run_group_tests_name("arena", tests, setup, teardown);
}
