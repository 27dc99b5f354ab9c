/*
 * stress/deque_ring.c - the scheduler's two lock-free queues on their own.
 *
 * Chase-Lev deque (ds/deque.h): one owner pushes and takes at the bottom
 * while thieves steal at the top. Every item must come out exactly once;
 * the owner's takes come out newest-first between pushes, and what one
 * thief steals comes out in push order (the top only moves forward).
 *
 * Bounded MPMC ring (ds/ring.h): producers and consumers at once. Every
 * item exactly once; with one consumer, each producer's items arrive in the
 * order it put them (FIFO per producer). A full ring refuses, an empty one
 * returns NULL.
 */
#include "testutil.h"
#include "ds/deque.h"
#include "ds/ring.h"

#include <pthread.h>

#define ITEMS (2000000 / TEST_SCALE)

/* ------------------------------------------------------------ deque */

static hive__deque_t *dq;
static _Atomic uint8_t *taken;            /* per item: times it came out */
static _Atomic int owner_done;
static _Atomic long order_violations;

static void got(uintptr_t item)
{
    if (item == 0 || item > ITEMS)
        fail_msg("deque returned a value never pushed: %lu", (unsigned long)item);
    atomic_fetch_add_explicit(&taken[item - 1], 1, memory_order_relaxed);
}

static void *thief(void *arg)
{
    (void)arg;
    uintptr_t last = 0;
    for (;;) {
        uintptr_t x = (uintptr_t)hive__deque_steal(dq);
        if (x == 0) {
            if (atomic_load(&owner_done) && !hive__deque_nonempty(dq))
                return NULL;
            continue;
        }
        if (x <= last)                    /* one thief sees the top move forward only */
            atomic_fetch_add(&order_violations, 1);
        last = x;
        got(x);
    }
}

static void test_deque_owner_and_thieves(void **state)
{
    (void)state;
    dq = aligned_alloc(HIVE_PAD, (sizeof *dq + HIVE_PAD - 1) / HIVE_PAD * HIVE_PAD);
    hive__deque_init(dq);
    taken = calloc(ITEMS, 1);
    atomic_store(&owner_done, 0);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, thief, NULL), 0);
    uint64_t rng = 12345;
    uintptr_t next = 1;
    while (next <= ITEMS) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        unsigned burst = 1 + (unsigned)(rng % 64);
        for (unsigned i = 0; i < burst && next <= ITEMS; i++)
            if (hive__deque_push(dq, (void *)next))
                next++;
        unsigned takes = (unsigned)((rng >> 8) % 48);
        uintptr_t prev = UINTPTR_MAX;
        for (unsigned i = 0; i < takes; i++) {
            uintptr_t x = (uintptr_t)hive__deque_take(dq);
            if (x == 0)
                break;
            if (x >= prev)                /* LIFO between pushes */
                atomic_fetch_add(&order_violations, 1);
            prev = x;
            got(x);
        }
    }
    uintptr_t x;
    while ((x = (uintptr_t)hive__deque_take(dq)) != 0)
        got(x);
    atomic_store(&owner_done, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&order_violations), 0);
    for (uintptr_t i = 0; i < ITEMS; i++)
        if (atomic_load(&taken[i]) != 1)
            fail_msg("item %lu came out %u times", (unsigned long)i + 1, (unsigned)atomic_load(&taken[i]));
    free((void *)taken);
    free(dq);
}

static void test_deque_full_and_empty(void **state)
{
    (void)state;
    hive__deque_t *d = aligned_alloc(HIVE_PAD, (sizeof *d + HIVE_PAD - 1) / HIVE_PAD * HIVE_PAD);
    hive__deque_init(d);
    assert_null(hive__deque_take(d));
    assert_null(hive__deque_steal(d));
    for (uintptr_t i = 1; i <= HIVE_DEQUE_CAP; i++)
        assert_true(hive__deque_push(d, (void *)i));
    assert_false(hive__deque_push(d, (void *)1));            /* full: refused */
    assert_ptr_equal(hive__deque_steal(d), (void *)1);       /* thieves: oldest */
    assert_ptr_equal(hive__deque_take(d), (void *)(uintptr_t)HIVE_DEQUE_CAP);   /* owner: newest */
    assert_true(hive__deque_push(d, (void *)7));             /* room again */
    free(d);
}

/* ------------------------------------------------------------ ring */

#define RING_CAP 1024
static hive__ring_t ring;
static hive__rslot_t ring_slots[RING_CAP];
static _Atomic uint8_t *ring_seen;
static _Atomic int producers_left;
static _Atomic long fifo_violations;
#define PRODUCERS 4

typedef struct rp { unsigned id; uint32_t count; } rp_t;

/* items encode (producer, sequence) as producer * 2^32 + seq + 1 */
static void *ring_producer(void *arg)
{
    rp_t *p = arg;
    for (uint32_t s = 0; s < p->count; s++) {
        uintptr_t item = ((uintptr_t)p->id << 32) + s + 1;
        while (!hive__ring_put(&ring, (void *)item))
            ;                              /* full: try again */
    }
    atomic_fetch_sub(&producers_left, 1);
    return NULL;
}

static void *ring_consumer(void *arg)
{
    int check_fifo = (int)(intptr_t)arg;
    uint32_t last[PRODUCERS] = { 0 };
    for (;;) {
        uintptr_t x = (uintptr_t)hive__ring_take(&ring);
        if (x == 0) {
            if (atomic_load(&producers_left) == 0 && !hive__ring_nonempty(&ring))
                return NULL;
            continue;
        }
        unsigned id = (unsigned)(x >> 32);
        uint32_t seq = (uint32_t)x;        /* seq + 1 */
        if (id >= PRODUCERS)
            fail_msg("ring returned a value never put: %#lx", (unsigned long)x);
        if (check_fifo && seq != last[id] + 1)
            atomic_fetch_add(&fifo_violations, 1);
        last[id] = seq;
        atomic_fetch_add_explicit(&ring_seen[(size_t)id * (ITEMS / PRODUCERS) + seq - 1], 1,
                                  memory_order_relaxed);
    }
}

static void run_ring(int consumers)
{
    hive__ring_init(&ring, ring_slots, RING_CAP);
    ring_seen = calloc(ITEMS, 1);
    atomic_store(&producers_left, PRODUCERS);
    atomic_store(&fifo_violations, 0);
    pthread_t pt[PRODUCERS], ct[4];
    rp_t ps[PRODUCERS];
    for (int i = 0; i < consumers; i++)
        assert_int_equal(pthread_create(&ct[i], NULL, ring_consumer,
                                        (void *)(intptr_t)(consumers == 1)), 0);
    for (unsigned i = 0; i < PRODUCERS; i++) {
        ps[i] = (rp_t){ .id = i, .count = ITEMS / PRODUCERS };
        assert_int_equal(pthread_create(&pt[i], NULL, ring_producer, &ps[i]), 0);
    }
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(pt[i], NULL);
    for (int i = 0; i < consumers; i++)
        pthread_join(ct[i], NULL);
    assert_int_equal(atomic_load(&fifo_violations), 0);
    for (size_t i = 0; i < (size_t)(ITEMS / PRODUCERS) * PRODUCERS; i++)
        if (atomic_load(&ring_seen[i]) != 1)
            fail_msg("ring item %zu came out %u times", i, (unsigned)atomic_load(&ring_seen[i]));
    assert_null(hive__ring_take(&ring));
    free((void *)ring_seen);
}

static void test_ring_one_consumer_fifo(void **state)
{
    (void)state;
    run_ring(1);
}

static void test_ring_many_consumers(void **state)
{
    (void)state;
    run_ring(3);
}

static void test_ring_full_and_empty(void **state)
{
    (void)state;
    static hive__rslot_t slots[4];
    hive__ring_t r;
    hive__ring_init(&r, slots, 4);
    assert_null(hive__ring_take(&r));
    assert_false(hive__ring_nonempty(&r));
    for (uintptr_t i = 1; i <= 4; i++)
        assert_true(hive__ring_put(&r, (void *)i));
    assert_false(hive__ring_put(&r, (void *)5));             /* full: refused */
    for (uintptr_t i = 1; i <= 4; i++)
        assert_ptr_equal(hive__ring_take(&r), (void *)i);     /* FIFO */
    assert_null(hive__ring_take(&r));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deque_full_and_empty),
        cmocka_unit_test(test_deque_owner_and_thieves),
        cmocka_unit_test(test_ring_full_and_empty),
        cmocka_unit_test(test_ring_one_consumer_fifo),
        cmocka_unit_test(test_ring_many_consumers),
    };
    return cmocka_run_group_tests_name("stress_deque_ring", tests, NULL, NULL);
}
