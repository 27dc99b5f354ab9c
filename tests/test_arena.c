/* test_arena.c - the payload allocator: alignment, exact capacity,
 * coalescing of large blocks, small cells across threads, NUMA regions. */
#include "testutil.h"
#include "arena.h"

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
    assert_int_equal(atomic_load(&arena.used), 12 * M);
    /* free the middle, then the first: they merge into one 8 MiB hole */
    hive__arena_free(&arena, b, 4 * M);
    hive__arena_free(&arena, a, 4 * M);
    char *d = hive__arena_alloc(&arena, 8 * M, 0, &err);
    assert_ptr_equal(d, a);                      /* first fit lands in the merged hole */
    assert_int_equal(c[0], 3);                   /* the neighbour is untouched */
    hive__arena_free(&arena, d, 8 * M);
    hive__arena_free(&arena, c, 4 * M);
    assert_int_equal(atomic_load(&arena.used), 0);
    /* all merged back: the largest possible block is available again */
    char *all = hive__arena_alloc(&arena, 64u << 20, 0, &err);
    assert_non_null(all);
    hive__arena_free(&arena, all, 64u << 20);
}

static void test_capacity_exact(void **state)
{
    (void)state;
    int err = 0;
    void *a = hive__arena_alloc(&arena, (64u << 20) - 64, 1, &err);
    assert_non_null(a);
    void *b = hive__arena_alloc(&arena, 1, 1, &err);   /* charged 64: exactly full */
    assert_non_null(b);
    assert_null(hive__arena_alloc(&arena, 1, 0, &err));
    assert_int_equal(err, HIVE_EFULL);
    assert_non_null(strstr(hive_last_error(), "asked 1 bytes, 67108864 of 67108864 in use"));
    hive__arena_free(&arena, b, 1);
    hive__arena_free(&arena, a, (64u << 20) - 64);
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
    /* the cells come back: a second round maps no new slab space */
    size_t before = arena.regions[0].large_free;
    void *p = hive__arena_alloc(&arena, 200, 0, &err);
    assert_int_equal(arena.regions[0].large_free, before);
    hive__arena_free(&arena, p, 200);
    hive__arena_flush_thread(&arena);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regions_per_node),
        cmocka_unit_test(test_large_blocks_coalesce),
        cmocka_unit_test(test_capacity_exact),
        cmocka_unit_test(test_small_cells_across_threads),
    };
    return cmocka_run_group_tests_name("arena", tests, setup, teardown);
}
