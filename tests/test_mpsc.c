/* test_mpsc.c - the MPSC queue's contract on one thread (the stress test
 * in tests/stress/mpsc.c covers concurrency). */
#include "testutil.h"
#include "ds/mpsc.h"

typedef struct item {
    hive__mpsc_node_t node;
    int value;
} item_t;

static int value_of(hive__mpsc_node_t *n)
{
    return ((item_t *)(void *)n)->value;
}

static void test_fifo_and_empty(void **state)
{
    (void)state;
    static hive__mpsc_t q;
    item_t items[100];
    hive__mpsc_init(&q, false);
    assert_true(hive__mpsc_empty(&q));
    assert_null(hive__mpsc_pop(&q));
    for (int round = 0; round < 3; round++) {          /* the stub goes around */
        for (int i = 0; i < 100; i++) {
            items[i].value = i;
            assert_false(hive__mpsc_push(&q, &items[i].node));
            assert_false(hive__mpsc_empty(&q));
        }
        for (int i = 0; i < 100; i++) {
            hive__mpsc_node_t *n = hive__mpsc_pop(&q);
            assert_non_null(n);
            assert_int_equal(value_of(n), i);
        }
        assert_null(hive__mpsc_pop(&q));
        assert_true(hive__mpsc_empty(&q));
    }
}

static void test_single_item_leaves_at_once(void **state)
{
    (void)state;
    static hive__mpsc_t q;
    item_t a = { .value = 7 }, b = { .value = 8 };
    hive__mpsc_init(&q, false);
    hive__mpsc_push(&q, &a.node);
    assert_ptr_equal(hive__mpsc_pop(&q), &a.node);   /* no second push needed */
    assert_true(hive__mpsc_empty(&q));
    /* a popped node may be pushed again immediately */
    hive__mpsc_push(&q, &a.node);
    hive__mpsc_push(&q, &b.node);
    assert_ptr_equal(hive__mpsc_pop(&q), &a.node);
    assert_ptr_equal(hive__mpsc_pop(&q), &b.node);
    assert_null(hive__mpsc_pop(&q));
}

static void test_chain_push(void **state)
{
    (void)state;
    static hive__mpsc_t q;
    item_t items[10];
    hive__mpsc_init(&q, false);
    items[0].value = 0;
    hive__mpsc_push(&q, &items[0].node);
    for (int i = 1; i < 10; i++) {
        items[i].value = i;
        if (i > 1)
            atomic_store(&items[i - 1].node.next, &items[i].node);
    }
    hive__mpsc_push_chain(&q, &items[1].node, &items[9].node);
    for (int i = 0; i < 10; i++) {
        hive__mpsc_node_t *n = hive__mpsc_pop(&q);
        assert_non_null(n);
        assert_int_equal(value_of(n), i);
    }
    assert_null(hive__mpsc_pop(&q));
}

static void test_empty_mark_tells_one_pusher(void **state)
{
    (void)state;
    static hive__mpsc_t q;
    item_t a = { .value = 1 }, b = { .value = 2 }, c = { .value = 3 };
    hive__mpsc_init(&q, true);                        /* starts idle */
    assert_true(hive__mpsc_push(&q, &a.node));        /* first push schedules */
    assert_false(hive__mpsc_push(&q, &b.node));       /* later ones do not */
    assert_false(hive__mpsc_mark_empty(&q));          /* not empty: refused */
    assert_ptr_equal(hive__mpsc_pop(&q), &a.node);
    assert_false(hive__mpsc_mark_empty(&q));
    assert_ptr_equal(hive__mpsc_pop(&q), &b.node);
    assert_null(hive__mpsc_pop(&q));
    assert_true(hive__mpsc_mark_empty(&q));
    assert_true(hive__mpsc_empty(&q));
    assert_true(hive__mpsc_push(&q, &c.node));        /* idle again: this one schedules */
    assert_ptr_equal(hive__mpsc_pop(&q), &c.node);
    assert_null(hive__mpsc_pop(&q));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_and_empty),
        cmocka_unit_test(test_single_item_leaves_at_once),
        cmocka_unit_test(test_chain_push),
        cmocka_unit_test(test_empty_mark_tells_one_pusher),
    };
    return cmocka_run_group_tests_name("mpsc", tests, NULL, NULL);
}
