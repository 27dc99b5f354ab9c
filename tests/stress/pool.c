/*
 * stress/pool.c - the block pool's lazy carving (pool.c: carve_fresh cuts
 * HIVE_BATCH blocks at a time from a class's current chunk by a fetch_add
 * on its cursor; new_chunk maps the next one under a lock) from many
 * threads at once.
 *
 * Each thread takes blocks of one class and nothing is freed, so every
 * block comes from a fresh cut (a round per class, each unused before); the class's chunks fill and new ones are
 * mapped while others carve. Each thread fills each block with its own
 * pattern, and after all are done checks every byte of its blocks.
 *
 * Contract checked: no two blocks overlap (a cut handed to two threads - a
 * load and a store in place of the fetch_add - has both write the same
 * bytes: a pattern changes, or two blocks have the same address, which
 * the final sort finds), every block is aligned to its class and lies
 * wholly inside mapped memory (a cut past a chunk's end would fault, or
 * under ASan be reported).
 */
#include "testutil.h"
#include "ds/pool.h"

#include <pthread.h>
#include <stdlib.h>

#define THREADS 6
#define ROUNDS  4                      /* classes 512 .. 4096, unused by anything else here */
#define PER_THREAD (6000 / TEST_SCALE + 200)

static _Atomic int go;
static _Atomic long bad;
static unsigned char *blocks[THREADS][PER_THREAD];
static size_t block;                   /* this round's class */

static void *carver(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    while (!atomic_load(&go))
        ;
    for (unsigned i = 0; i < PER_THREAD; i++) {
        unsigned char *b = hive__pool_alloc(block);
        if (b == NULL || ((uintptr_t)b & (block - 1)) != 0) {
            atomic_fetch_add(&bad, 1);
            blocks[me][i] = NULL;
            continue;
        }
        memset(b, (int)(me * 37 + i) & 0xff, block);
        blocks[me][i] = b;
    }
    return NULL;
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return x < y ? -1 : x > y;
}

static void carve_round(void)
{
    size_t before = hive__pool_mapped_bytes();
    pthread_t th[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, carver, (void *)i), 0);
    atomic_store(&go, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&bad), 0);
    long clobbered = 0;
    for (unsigned t = 0; t < THREADS; t++)
        for (unsigned i = 0; i < PER_THREAD; i++)
            for (size_t k = 0; k < block; k++)
                if (blocks[t][i][k] != ((t * 37 + i) & 0xff)) {
                    clobbered++;
                    break;
                }
    if (clobbered != 0)
        fail_msg("%ld blocks were written by another thread: a cut was handed out twice", clobbered);
    void **all = malloc(sizeof blocks);
    memcpy(all, blocks, sizeof blocks);
    size_t n = (size_t)THREADS * PER_THREAD;
    qsort(all, n, sizeof *all, by_address);
    for (size_t i = 1; i < n; i++)
        if ((uintptr_t)all[i] - (uintptr_t)all[i - 1] < block)
            fail_msg("blocks %p and %p overlap", all[i - 1], all[i]);
    printf("pool stress: %d threads carved %zu blocks of %zu bytes; %zu bytes mapped meanwhile\n",
           THREADS, n, block, hive__pool_mapped_bytes() - before);
    for (size_t i = 0; i < n; i++)
        hive__pool_free(all[i], block);
    free(all);
}

static void test_carving_hands_out_each_block_once(void **state)
{
    (void)state;
    for (unsigned r = 0; r < ROUNDS; r++) {
        block = (size_t)512 << r;
        atomic_store(&go, 0);
        carve_round();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_carving_hands_out_each_block_once),
    };
    return cmocka_run_group_tests_name("pool stress", tests, NULL, NULL);
}
