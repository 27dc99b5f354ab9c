/*
 * test_settle_fallback.c - the settler thread that could not start
 * (util/hugemap.h): full regions of the object table are then settled on
 * the call_rcu thread, as a last resort, and everything else works as
 * before - a store fills, releases, drains and closes.
 *
 * The settler starts once per process, with the call_rcu thread, at the
 * first RCU registration; so this is a binary of its own whose first act
 * is that registration with the fault hook armed for exactly that one
 * thread creation.
 */
#include "testutil.h"
#include "handles.h"
#include "util/fault.h"
#include "util/hugemap.h"
#include "util/rcu.h"

#include <stdlib.h>
#include <unistd.h>

static _Atomic int cb_tid;

static void note_tid(struct rcu_head *head)
{
    hive__rcu_callback_begin();
    atomic_store(&cb_tid, (int)gettid());
    free(head);
}

static void test_settles_on_the_call_rcu_thread(void **state)
{
    (void)state;
    hive__handles_t t;
    assert_int_equal(hive__handles_open(&t, 3), HIVE_OK);
    const uint32_t per_region = (uint32_t)(HIVE__HUGE_PAGE / HIVE__REC_BYTES);
    unsigned long refused0, refused1;
    unsigned long settled0 = hive__settle_count(&refused0, NULL);
    for (uint32_t i = 0; i < 2 * per_region + 10; i++) {   /* two full regions: two settles */
        uint64_t id;
        void *r = NULL;
        assert_int_equal(hive__handles_take(&t, &id, &r), HIVE_OK);
        assert_non_null(r);
        assert_true(*(const uint64_t *)r == id);
    }
    struct rcu_head *head = malloc(sizeof *head);
    assert_non_null(head);
    hive__call_rcu(head, note_tid);
    hive__rcu_barrier();                 /* every settle has run: no settler queues any */
    hive__settle_drain();                /* (returns at once: nothing was queued) */
    unsigned long settled = hive__settle_count(&refused1, NULL) - settled0;
    assert_int_equal(settled + (refused1 - refused0), 2);   /* one per full region, no more */
    int settler = hive__settle_last_tid();
    assert_true(settler != 0);
    assert_true(settler != (int)gettid());
    if (settler != atomic_load(&cb_tid))
        fail_msg("with no settler the settle ran on thread %d, not the call_rcu thread (%d)", settler,
                 atomic_load(&cb_tid));
    hive__handles_close(&t);
}

/* A whole engine without a settler: its store grows past a region of
 * records, and shuts down with them released. */
static void test_engine_without_settler(void **state)
{
    (void)state;
    hive_config_t cfg = { .workers = 2, .no_pin = 1, .store_bytes = 64u << 20 };
    hive_t *h = NULL;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    enum { N = 40000 };                  /* 40,000 records of 128 bytes: past two 2 MiB regions */
    hive_ref_t *refs = malloc(N * sizeof *refs);
    assert_non_null(refs);
    for (uint64_t i = 0; i < N; i++)
        assert_int_equal(hive_put(h, &i, sizeof i, &refs[i]), HIVE_OK);
    for (uint64_t i = 0; i < N; i++) {
        const void *p;
        assert_int_equal(hive_get(h, refs[i], 0, &p, NULL), HIVE_OK);
        assert_int_equal(*(const uint64_t *)p, i);
        assert_int_equal(hive_release(h, refs[i]), HIVE_OK);
    }
    free(refs);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    /* the first registration starts the call_rcu thread, then the settler,
     * whose creation is the one armed check that fails */
    atomic_store(&hive__fault_checks, 0);
    atomic_store(&hive__fault_countdown, 1);
    hive__rcu_thread();
    long left = atomic_exchange(&hive__fault_countdown, 0);
    long checks = atomic_load(&hive__fault_checks);
    if (left != 0 || checks != 1) {
        fprintf(stderr, "test_settle_fallback: the settler's start made %ld fault checks (countdown "
                "left at %ld), where it should make exactly one\n", checks, left);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settles_on_the_call_rcu_thread),
        cmocka_unit_test(test_engine_without_settler),
    };
    return cmocka_run_group_tests_name("settle_fallback", tests, NULL, NULL);
}
