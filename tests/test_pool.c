/* test_pool.c - per-thread block pool: classes, alignment, bad sizes,
 * cross-thread recycling without unbounded growth. */
#include "testutil.h"
#include "ds/pool.h"
#include "util/hugemap.h"

#include <pthread.h>

static void test_sizes_and_alignment(void **state)
{
    (void)state;
    assert_null(hive__pool_alloc(0));
    assert_null(hive__pool_alloc(HIVE_POOL_MAX + 1));
    size_t sizes[] = { 1, 63, 64, 65, 128, 200, 1000, 2049, 4096 };
    void *p[sizeof sizes / sizeof sizes[0]];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        p[i] = hive__pool_alloc(sizes[i]);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % 64, 0);
        memset(p[i], 0xab, sizes[i]);                 /* the whole size is usable */
    }
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t j = 0; j < i; j++)
            assert_ptr_not_equal(p[i], p[j]);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        hive__pool_free(p[i], sizes[i]);
    hive__pool_free(NULL, 64);                        /* like free(NULL) */
}

static void test_reuse_on_one_thread(void **state)
{
    (void)state;
    void *a = hive__pool_alloc(100);
    hive__pool_free(a, 100);
    void *b = hive__pool_alloc(128);                  /* same class: LIFO reuse */
    assert_ptr_equal(a, b);
    hive__pool_free(b, 128);
}

#define HANDOFF 4096
static void *_Atomic handoff[HANDOFF];

static void *consumer(void *arg)
{
    long rounds = (long)(intptr_t)arg;
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < HANDOFF; i++) {
            void *p;
            while ((p = atomic_exchange(&handoff[i], NULL)) == NULL)
                ;
            assert_int_equal(*(int *)p, i);
            hive__pool_free(p, 256);
        }
    }
    return NULL;
}

/* One thread allocates, another frees: the blocks must come back through
 * the global batch list instead of being mapped anew every round. */
static void test_cross_thread_recycling(void **state)
{
    (void)state;
    const long rounds = 200 / TEST_SCALE;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, consumer, (void *)(intptr_t)rounds), 0);
    size_t mapped_after_first = 0;
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < HANDOFF; i++) {
            int *p = hive__pool_alloc(256);
            assert_non_null(p);
            *p = i;
            while (atomic_load(&handoff[i]) != NULL)
                ;
            atomic_store(&handoff[i], p);
        }
        if (r == 2)
            mapped_after_first = hive__pool_mapped_bytes();
    }
    pthread_join(t, NULL);
    /* 200 rounds of 4096 blocks of 256 bytes = 200 MiB passed through; the
     * pool must have stayed within a small multiple of one round's worth. */
    size_t mapped = hive__pool_mapped_bytes();
    if (mapped > mapped_after_first + 8u * HANDOFF * 256u)
        fail_msg("pool grew from %zu to %zu bytes: blocks freed on another thread are not reused",
                 mapped_after_first, mapped);
}

/* Rounds of: short-lived threads allocate, the main thread frees it all.
 * Freed blocks beyond what the shared ring holds must still come back to
 * later allocators (and to nobody's private cache), so the pool stops
 * mapping after the first round. */
#define BURST_THREADS 4
#define BURST_PER     (96 * 1024 / TEST_SCALE)   /* 4 x 96K blocks: more batches than the ring holds */
static void *burst_slots[BURST_THREADS * BURST_PER];

static void *burst_alloc(void *arg)
{
    size_t id = (size_t)arg;
    for (size_t i = 0; i < BURST_PER; i++)
        if ((burst_slots[id * BURST_PER + i] = hive__pool_alloc(64)) == NULL)
            return (void *)1;
    return NULL;
}

static void test_bursts_from_exiting_threads(void **state)
{
    (void)state;
    size_t after_first = 0;
    for (int round = 0; round < 6; round++) {
        pthread_t t[BURST_THREADS];
        for (size_t i = 0; i < BURST_THREADS; i++)
            assert_int_equal(pthread_create(&t[i], NULL, burst_alloc, (void *)i), 0);
        for (int i = 0; i < BURST_THREADS; i++) {
            void *rc;
            pthread_join(t[i], &rc);
            assert_null(rc);
        }
        for (size_t i = 0; i < BURST_THREADS * BURST_PER; i++)
            hive__pool_free(burst_slots[i], 64);
        if (round == 0)
            after_first = hive__pool_mapped_bytes();
    }
    size_t live = (size_t)BURST_THREADS * BURST_PER * 64;
    if (hive__pool_mapped_bytes() > after_first + live / 4)
        fail_msg("pool grew from %zu to %zu bytes over rounds of %zu live bytes", after_first,
                 hive__pool_mapped_bytes(), live);
}

/* A pool that grows past a few MiB maps frontier chunks whose full 2 MiB
 * regions are settled into huge pages (util/hugemap.h): every region the
 * growth fills is queued once (settled, or refused where the kernel has no
 * MADV_COLLAPSE), and the blocks keep what was written in them. */
static void test_full_regions_settle(void **state)
{
    (void)state;
    enum { BS = 256, N = (48 << 20) / BS };   /* 48 MiB of blocks: chunks of 2 MiB and more */
    unsigned char **b = malloc(N * sizeof *b);
    unsigned long refused0, refused1;
    hive__rcu_barrier();                          /* earlier tests' settles: done first */
    hive__settle_drain();
    unsigned long settled0 = hive__settle_count(&refused0, NULL);
    for (size_t i = 0; i < N; i++) {
        b[i] = hive__pool_alloc(BS);
        assert_non_null(b[i]);
        b[i][BS - 1] = (unsigned char)i;
    }
    hive__rcu_barrier();
    hive__settle_drain();
    int err = 0;
    unsigned long queued = hive__settle_count(&refused1, &err) - settled0 + (refused1 - refused0);
    /* the chunks before the first huge one are small; of the 48 MiB, at
     * least 40 are in frontier chunks, and all but the last region of the
     * current chunk full */
    if (queued < 16 || queued > 24)
        fail_msg("%lu regions queued for settling after 48 MiB of 256-byte blocks", queued);
    printf("pool: %lu full regions queued, %lu refused (errno %d)\n", queued, refused1 - refused0, err);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(b[i][BS - 1], (unsigned char)i);
        hive__pool_free(b[i], BS);
    }
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_and_alignment),
        cmocka_unit_test(test_reuse_on_one_thread),
        cmocka_unit_test(test_cross_thread_recycling),
        cmocka_unit_test(test_bursts_from_exiting_threads),
        cmocka_unit_test(test_full_regions_settle),
    };
    return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
