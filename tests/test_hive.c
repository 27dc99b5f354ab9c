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
    hive_config_t trace = { .trace_path = "no-such-directory/trace.json" };
    ASSERT_FAILS_WITH(hive_init(&trace, &h), HIVE_EINVAL, "cannot open the trace file");
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

/* The address space a store needs (4 x store_bytes + 64 MiB per node) is
 * checked before anything is mapped; what passes either maps or fails at
 * init with the arithmetic, never later. */
static void test_huge_stores_fail_at_init_or_work(void **state)
{
    (void)state;
    hive_t *h = (hive_t *)0x1;
    hive_config_t too_big = { .workers = 1, .no_pin = 1, .store_bytes = (size_t)1 << 45 };
    ASSERT_FAILS_WITH(hive_init(&too_big, &h), HIVE_EINVAL,
                      "bytes of address space per node (4 x capacity + 64 MiB) x 1 nodes");
    hive_config_t two_nodes = { .workers = 1, .store_bytes = (size_t)1 << 44,
                                .topology = "pack:2 numa:1 core:1 pu:1" };
    ASSERT_FAILS_WITH(hive_init(&two_nodes, &h), HIVE_EINVAL, "x 2 nodes");
    assert_ptr_equal(h, (hive_t *)0x1);

    /* 8 TiB: 32 TiB of address space, which a sanitizer's layout may not have */
    hive_config_t huge = { .workers = 1, .no_pin = 1, .store_bytes = (size_t)1 << 43 };
    int rc = hive_init(&huge, &h);
    if (rc != HIVE_OK) {
        assert_true(rc == HIVE_ENOMEM || rc == HIVE_EINVAL);
        assert_non_null(strstr(hive_last_error(), "address space"));
        return;
    }
    static char big[1 << 20];
    hive_ref_t r;
    assert_int_equal(hive_put(h, big, sizeof big, &r), HIVE_OK);
    hive_store_stats_t st;
    assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
    assert_int_equal(st.capacity, (size_t)1 << 43);
    assert_int_equal(st.used, sizeof big + 64);
    assert_int_equal(hive_release(h, r), HIVE_OK);
    test_expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static int whoami(hive_ctx_t *ctx)
{
    unsigned i = hive_worker_index(ctx);
    return hive_return(ctx, &i, sizeof i);
}

/* 4096 workers (1024 under sanitizers) on a synthetic 64-node machine start,
 * run tasks and stop. Workers that start early sleep rather than spin
 * while the others are created, so right after hive_init every one of them
 * is parked; once cost 39 s on 2 cores. */
static void test_thousands_of_workers(void **state)
{
    (void)state;
    const unsigned n = TEST_SCALE == 1 ? 4096 : 1024;
    hive_t *h = test_engine(4u << 20, n, "pack:64 numa:1 core:64 pu:1");
    assert_int_equal(hive_num_workers(h), n);
    assert_int_equal(atomic_load(&h->sched.nparked), n);
    hive_worker_info_t wi;
    assert_int_equal(hive_worker_info(h, n - 1, &wi), HIVE_OK);
    assert_int_equal(wi.node, (n - 1) % 4096 / 64);
    enum { TASKS = 64 };
    hive_ref_t r[TASKS];
    for (unsigned i = 0; i < TASKS; i++)
        assert_int_equal(hive_submit(h, whoami, NULL, 0, NULL, &r[i]), HIVE_OK);
    for (unsigned i = 0; i < TASKS; i++) {
        const void *p;
        size_t size;
        test_get_ok(h, r[i], 30 * 1000000000ll, &p, &size);
        assert_int_equal(size, sizeof(unsigned));
        assert_true(*(const unsigned *)p < n);
        hive_release(h, r[i]);
    }
    /* a task drops its count on its result just after sealing it: wait
     * for that (a deadline against hangs), then check exactly */
    hive_store_stats_t st;
    WAIT_UNTIL((hive__store_drain(h), hive_store_stats(h, &st), st.objects == 0), 30000);
    test_expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Every handle of engine A is refused by engine B with HIVE_ENOENT: refs
 * (blobs, task results, arrays, cells), actors and worker-local keys. */
static int nop_task(hive_ctx_t *ctx)
{
    (void)ctx;
    return 0;
}

static int nop_method(void *self, hive_ctx_t *ctx)
{
    (void)self;
    (void)ctx;
    return 0;
}

static void *one_init(void *arg)
{
    return arg;
}

/* prefault: the store's large-object memory is resident from init on,
 * and the engine works as without it; without it, nothing is. */
static void test_prefault(void **state)
{
    (void)state;
    const size_t cap = 32u << 20;
    for (int pre = 0; pre < 2; pre++) {
        hive_config_t cfg = { .workers = 1, .store_bytes = cap, .no_pin = 1, .prefault = pre };
        hive_t *h;
        assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
        hive_store_stats_t st;
        assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
        if (pre ? st.resident < cap : st.resident > cap / 8)
            fail_msg("prefault %d: %zu bytes resident after init (capacity %zu)", pre, st.resident, cap);
        /* a large put and a get, through the prefaulted (or not) pages */
        char *buf = malloc(cap / 2);
        memset(buf, 0x5c, cap / 2);
        hive_ref_t r;
        assert_int_equal(hive_put(h, buf, cap / 2, &r), HIVE_OK);
        const void *p;
        size_t n;
        test_get_ok(h, r, 0, &p, &n);
        assert_int_equal(n, cap / 2);
        assert_memory_equal(p, buf, cap / 2);
        assert_int_equal(hive_release(h, r), HIVE_OK);
        free(buf);
        test_expect_empty_store(h);
        assert_int_equal(hive_shutdown(h), HIVE_OK);
    }
}

static void test_handles_of_another_engine(void **state)
{
    (void)state;
    hive_t *a = test_engine(16u << 20, 1, NULL), *b = test_engine(16u << 20, 1, NULL);
    hive_ref_t blob, task, arr, cell, mine;
    assert_int_equal(hive_put(a, "a", 2, &blob), HIVE_OK);
    assert_int_equal(hive_submit(a, nop_task, NULL, 0, NULL, &task), HIVE_OK);
    int64_t shape[1] = { 4 };
    assert_int_equal(hive_array_new(a, HIVE_I64, 1, shape, &arr), HIVE_OK);
    assert_int_equal(hive_cell_new(a, blob, &cell), HIVE_OK);
    assert_int_equal(hive_put(b, "b", 2, &mine), HIVE_OK);
    static const hive_method_t m[1] = { { "nop", nop_method, 0 } };
    static const hive_actor_class_t cls = { .name = "c", .size = 8, .methods = m, .nmethods = 1 };
    hive_actor_t actor;
    assert_int_equal(hive_actor_new(a, &cls, NULL, 0, NULL, &actor), HIVE_OK);
    int one = 1;
    hive_local_def_t def = { .init = one_init, .arg = &one };
    hive_local_t key;
    assert_int_equal(hive_local_new(a, &def, &key), HIVE_OK);

    const void *p;
    hive_array_t v;
    hive_ref_t got, res;
    ASSERT_FAILS_WITH(hive_get(b, blob, 0, &p, NULL), HIVE_ENOENT, "does not exist");
    ASSERT_FAILS_WITH(hive_get(b, task, 0, &p, NULL), HIVE_ENOENT, "does not exist");
    ASSERT_FAILS_WITH(hive_retain(b, blob), HIVE_ENOENT, "does not exist");
    ASSERT_FAILS_WITH(hive_release(b, blob), HIVE_ENOENT, "does not exist");
    ASSERT_FAILS_WITH(hive_cancel(b, task), HIVE_ENOENT, "does not exist");
    ASSERT_FAILS_WITH(hive_array_view(b, arr, &v), HIVE_ENOENT, "does not exist");
    ASSERT_FAILS_WITH(hive_cell_acquire(b, cell, &got, NULL), HIVE_ENOENT, "does not exist");
    ASSERT_FAILS_WITH(hive_cell_publish(b, cell, mine), HIVE_ENOENT, "does not exist");
    ASSERT_FAILS_WITH(hive_submit(b, nop_task, &HIVE_REF(blob), 1, NULL, &res), HIVE_ENOENT,
                      "does not exist");
    int st[2];
    const void *d[2];
    hive_ref_t two[2] = { mine, blob };
    ASSERT_FAILS_WITH(hive_get_many(b, two, 2, 0, d, NULL, st), HIVE_ENOENT, "refs[1]");
    assert_int_equal(st[0], HIVE_OK);
    assert_int_equal(st[1], HIVE_ENOENT);
    ASSERT_FAILS_WITH(hive_call(b, actor, 0, NULL, 0, NULL, &res), HIVE_ENOENT, "not an actor of this engine");
    ASSERT_FAILS_WITH(hive_actor_kill(b, actor), HIVE_ENOENT, "not an actor of this engine");
    assert_null(hive_local_thread(b, key));
    assert_non_null(strstr(hive_last_error(), "another engine"));
    assert_ptr_equal(hive_local_thread(a, key), &one);   /* all still fine in a */
    assert_int_equal(hive_get(a, blob, 0, &p, NULL), HIVE_OK);
    assert_int_equal(hive_cell_acquire(a, cell, &got, NULL), HIVE_OK);
    assert_int_equal(got.id, blob.id);
    assert_int_equal(hive_shutdown(b), HIVE_OK);
    assert_int_equal(hive_shutdown(a), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_defaults_and_shutdown),
        cmocka_unit_test(test_several_engines_at_once),
        cmocka_unit_test(test_repeated_init_shutdown),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_shutdown_from_inside_is_refused),
        cmocka_unit_test(test_huge_stores_fail_at_init_or_work),
        cmocka_unit_test(test_thousands_of_workers),
        cmocka_unit_test(test_handles_of_another_engine),
        cmocka_unit_test(test_prefault),
    };
    return cmocka_run_group_tests_name("hive", tests, NULL, NULL);
}
