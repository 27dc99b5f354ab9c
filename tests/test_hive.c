/* test_hive.c - engine life cycle and configuration errors. */
#include "testutil.h"
#include "hive_impl.h"

static void test_init_defaults_and_shutdown(void **state)
{
    (void)state;
    hive_t *h = NULL;
    assert_int_equal(hive_init(NULL, &h), HIVE_OK);
    assert_non_null(h);
    assert_true(hive_num_workers(h) >= 1);
    assert_int_equal(hive_shutdown(h), HIVE_OK);

    hive_config_t zero = { 0 };
    assert_int_equal(hive_init(&zero, &h), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_several_engines_at_once(void **state)
{
    (void)state;
    hive_t *a, *b, *c;
    hive_config_t ca = { .workers = 2, .topology = "pack:2 numa:1 core:1 pu:1" };
    hive_config_t cb = { .workers = 3, .no_pin = 1 };
    assert_int_equal(hive_init(&ca, &a), HIVE_OK);
    assert_int_equal(hive_init(&cb, &b), HIVE_OK);
    assert_int_equal(hive_init(NULL, &c), HIVE_OK);
    assert_int_equal(hive_num_workers(a), 2);
    assert_int_equal(hive_num_nodes(a), 2);
    assert_int_equal(hive_num_workers(b), 3);
    assert_int_equal(hive_shutdown(b), HIVE_OK);
    assert_int_equal(hive_num_workers(a), 2);      /* the others live on */
    assert_int_equal(hive_shutdown(a), HIVE_OK);
    assert_int_equal(hive_shutdown(c), HIVE_OK);
}

static void test_repeated_init_shutdown(void **state)
{
    (void)state;
    for (int i = 0; i < 50 / TEST_SCALE + 5; i++) {
        hive_config_t cfg = { .workers = 1 + (unsigned)i % 4, .no_pin = i % 2 };
        hive_t *h;
        assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
        assert_int_equal(hive_shutdown(h), HIVE_OK);
    }
}

static void test_bad_config(void **state)
{
    (void)state;
    hive_t *h = (hive_t *)0x1;
    ASSERT_FAILS_WITH(hive_init(NULL, NULL), HIVE_EINVAL, "out is NULL");
    hive_config_t many = { .workers = HIVE_MAX_WORKERS + 1 };
    ASSERT_FAILS_WITH(hive_init(&many, &h), HIVE_EINVAL, "4097 exceeds the limit of 4096");
    hive_config_t trace = { .trace_path = "/tmp/x.json" };
    ASSERT_FAILS_WITH(hive_init(&trace, &h), HIVE_EINVAL, "/tmp/x.json");
    assert_ptr_equal(h, (hive_t *)0x1);
    ASSERT_FAILS_WITH(hive_shutdown(NULL), HIVE_EINVAL, "engine is NULL");
}

static _Atomic int from_worker_rc = 1;
static void shutdown_from_worker(hive__job_t *job, hive__worker_t *w)
{
    (void)job;
    if (w)
        atomic_store(&from_worker_rc, hive_shutdown(w->sched->h));
}

static void test_shutdown_from_inside_is_refused(void **state)
{
    (void)state;
    hive_config_t cfg = { .workers = 1, .no_pin = 1 };
    hive_t *h;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    static hive__job_t job = { .fn = shutdown_from_worker };
    hive__sched_post(&h->sched, 0, &job);
    WAIT_UNTIL(atomic_load(&from_worker_rc) != 1, 5000);
    assert_int_equal(atomic_load(&from_worker_rc), HIVE_ESTATE);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_defaults_and_shutdown),
        cmocka_unit_test(test_several_engines_at_once),
        cmocka_unit_test(test_repeated_init_shutdown),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_shutdown_from_inside_is_refused),
    };
    return cmocka_run_group_tests_name("hive", tests, NULL, NULL);
}
