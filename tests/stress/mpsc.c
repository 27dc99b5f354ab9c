/*
 * stress/mpsc.c - the MPSC queue under 1, 2, 4 and 8 producers.
 *
 * Contract checked: every pushed item is popped exactly once (a bitmap per
 * producer), and items of one producer come out in the order it pushed them
 * (per-producer sequence numbers must rise by exactly one). Producers mix
 * single pushes and chain pushes. The second test runs the empty-mark
 * protocol as an actor mailbox would: the consumer drains, marks the queue
 * empty and sleeps; the one producer that learns it was empty hands it the
 * "scheduled" token; two tokens at once would be a bug. The third runs the
 * first one's contract on the packed layout (hive__mbox_t, the actor
 * mailbox: head, tail and stub on one line, next to other hot words).
 */
#include "testutil.h"
#include "ds/mpsc.h"
#include "ds/pool.h"

#include <pthread.h>

typedef struct item {
    hive__mpsc_node_t node;
    uint32_t producer;
    uint32_t seq;
} item_t;

typedef struct run {
    hive__mpsc_t     q;
    hive__mbox_t     box;             /* packed: used instead of q when `packed` */
    bool             packed;
    unsigned         producers;
    uint32_t         per_producer;
    _Atomic unsigned go;
    bool             use_mark;        /* the mailbox protocol */
    _Atomic int      tokens;          /* consumer is scheduled while 1 */
    _Atomic int      bad_tokens;      /* a second token was handed out */
    _Atomic unsigned producers_done;
} run_t;

typedef struct prod_arg {
    run_t   *run;
    uint32_t id;
} prod_arg_t;

static bool push_chain(run_t *r, hive__mpsc_node_t *first, hive__mpsc_node_t *last)
{
    if (r->packed)
        return hive__mpsc_push_at(&r->box.head, first, last);
    return hive__mpsc_push_chain(&r->q, first, last);
}

static hive__mpsc_node_t *pop(run_t *r)
{
    return r->packed ? hive__mbox_pop(&r->box) : hive__mpsc_pop(&r->q);
}

static void give_token(run_t *r)
{
    if (atomic_fetch_add(&r->tokens, 1) != 0)
        atomic_fetch_add(&r->bad_tokens, 1);
}

static void *producer(void *arg)
{
    prod_arg_t *pa = arg;
    run_t *r = pa->run;
    while (!atomic_load(&r->go))
        ;
    uint32_t seq = 0;
    uint64_t rng = 0x9e3779b97f4a7c15ull * (pa->id + 1);
    while (seq < r->per_producer) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        uint32_t n = (rng & 7) == 0 ? 1 + (uint32_t)(rng >> 32) % 8 : 1;   /* some chains */
        if (n > r->per_producer - seq)
            n = r->per_producer - seq;
        item_t *first = NULL, *last = NULL;
        for (uint32_t i = 0; i < n; i++) {
            item_t *it = hive__pool_alloc(sizeof *it);
            assert_non_null(it);
            it->producer = pa->id;
            it->seq = seq++;
            if (last)
                atomic_store_explicit(&last->node.next, &it->node, memory_order_relaxed);
            else
                first = it;
            last = it;
        }
        if (push_chain(r, &first->node, &last->node)) {
            if (!r->use_mark)
                fail_msg("push reported an empty mark on a queue that is never marked");
            give_token(r);
        }
    }
    atomic_fetch_add(&r->producers_done, 1);
    return NULL;
}

static void run_one(unsigned producers, uint32_t per_producer, bool use_mark, bool packed)
{
    run_t *r = aligned_alloc(HIVE_PAD, (sizeof *r + HIVE_PAD - 1) / HIVE_PAD * HIVE_PAD);
    memset(r, 0, sizeof *r);
    hive__mpsc_init(&r->q, use_mark);
    hive__mbox_init(&r->box);
    r->packed = packed;
    r->producers = producers;
    r->per_producer = per_producer;
    r->use_mark = use_mark;

    uint32_t *next_seq = calloc(producers, sizeof *next_seq);
    pthread_t th[8];
    prod_arg_t pa[8];
    for (unsigned i = 0; i < producers; i++) {
        pa[i] = (prod_arg_t){ .run = r, .id = i };
        assert_int_equal(pthread_create(&th[i], NULL, producer, &pa[i]), 0);
    }
    atomic_store(&r->go, 1);

    uint64_t total = (uint64_t)producers * per_producer, got = 0;
    uint64_t deadline = test_now_ns() + 20ull * 1000000000u;
    bool scheduled = !use_mark;
    while (got < total) {
        if (!scheduled) {
            /* asleep until a producer hands us the token */
            if (atomic_load(&r->tokens) == 0) {
                if (test_now_ns() > deadline)
                    fail_msg("lost wake-up: %llu of %llu items, no token (tail %s, head %#lx, "
                             "stub %p, stub.next %p, producers done %u)",
                             (unsigned long long)got, (unsigned long long)total,
                             r->q.tail == &r->q.stub ? "stub" : "node",
                             (unsigned long)atomic_load(&r->q.head), (void *)&r->q.stub,
                             (void *)atomic_load(&r->q.stub.next), atomic_load(&r->producers_done));
                continue;
            }
            scheduled = true;
        }
        hive__mpsc_node_t *n = pop(r);
        if (n == NULL) {
            if (use_mark) {
                /* The turn ends at the mark: give the token back first, so
                 * the producer that sees the mark can hand out a new one.
                 * If the mark fails, a push has begun and nobody can have
                 * seen a mark: take the token again (it must still be 0). */
                atomic_fetch_sub(&r->tokens, 1);
                if (hive__mpsc_mark_empty(&r->q))
                    scheduled = false;
                else
                    give_token(r);
            }
            if (test_now_ns() > deadline)
                fail_msg("stuck at %llu of %llu items, %u producers, mark %d", (unsigned long long)got,
                         (unsigned long long)total, producers, (int)use_mark);
            continue;
        }
        item_t *it = (item_t *)n;
        if (it->producer >= producers)
            fail_msg("item from unknown producer %u", it->producer);
        if (it->seq != next_seq[it->producer])
            fail_msg("producer %u: got seq %u, expected %u (lost, doubled or reordered)",
                     it->producer, it->seq, next_seq[it->producer]);
        next_seq[it->producer]++;
        got++;
        hive__pool_free(it, sizeof *it);
    }
    for (unsigned i = 0; i < producers; i++)
        pthread_join(th[i], NULL);
    assert_null(pop(r));                             /* nothing extra */
    if (packed)
        assert_false(hive__mbox_busy(&r->box));      /* drained: back on its stub */
    for (unsigned i = 0; i < producers; i++)
        assert_int_equal(next_seq[i], per_producer);
    assert_int_equal(atomic_load(&r->bad_tokens), 0);
    free(next_seq);
    free(r);
}

static void test_producers_1_2_4_8(void **state)
{
    (void)state;
    const uint32_t total = 4000000 / TEST_SCALE;
    for (unsigned p = 1; p <= 8; p *= 2) {
        uint64_t t0 = test_now_ns();
        run_one(p, total / p, false, false);
        printf("mpsc stress: %u producer(s), %u items, %.2f s\n", p, total,
               (double)(test_now_ns() - t0) / 1e9);
    }
}

static void test_empty_mark_protocol(void **state)
{
    (void)state;
    const uint32_t total = 2000000 / TEST_SCALE;
    for (unsigned p = 1; p <= 8; p *= 2)
        run_one(p, total / p, true, false);
}

static void test_packed_mailbox(void **state)
{
    (void)state;
    const uint32_t total = 2000000 / TEST_SCALE;
    for (unsigned p = 1; p <= 8; p *= 2)
        run_one(p, total / p, false, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_producers_1_2_4_8),
        cmocka_unit_test(test_empty_mark_protocol),
        cmocka_unit_test(test_packed_mailbox),
    };
    return cmocka_run_group_tests_name("stress_mpsc", tests, NULL, NULL);
}
