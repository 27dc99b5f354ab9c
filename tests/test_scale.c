/* test_scale.c - one engine holding a lot at once, run cleanly: 1,000,000
 * live objects, 100,000 tasks queued behind busy workers and 100,000 idle
 * actors (a tenth of what `make bench`'s scale family measures; sanitized
 * builds a further 1/8). Every object reads back its own value, every task
 * runs exactly once, every actor answers, and the store holds nothing but
 * the actors' state after. */
#include "testutil.h"

#include <stdatomic.h>

#define OBJECTS (1000000 / TEST_SCALE)
#define TASKS   (100000 / TEST_SCALE)
#define ACTORS  (100000 / TEST_SCALE)

static _Atomic int gate_open;
static _Atomic uint64_t ran;

static int hold(hive_ctx_t *ctx)
{
    (void)ctx;
    /* acquire: only the flag matters */
    while (!atomic_load_explicit(&gate_open, memory_order_acquire))
        sched_yield();
    return 0;
}

static int count(hive_ctx_t *ctx)
{
    size_t n;
    const uint64_t *i = hive_arg(ctx, 0, &n);
    atomic_fetch_add_explicit(&ran, 1, memory_order_relaxed);   /* a count, read after the gets */
    return hive_return(ctx, i, sizeof *i);
}

static int echo(void *self, hive_ctx_t *ctx)
{
    uint64_t *st = self;
    (*st)++;
    return hive_return(ctx, st, sizeof *st);
}

static const hive_method_t methods[] = { { .name = "echo", .fn = echo } };
static const hive_actor_class_t cls = { .name = "idle", .size = 64, .methods = methods,
                                        .nmethods = 1 };

static void test_a_lot_at_once(void **state)
{
    (void)state;
    hive_t *h = test_engine((size_t)OBJECTS * 128 + ((size_t)256 << 20), 2, NULL);
    hive_ref_t *objs = malloc(OBJECTS * sizeof *objs), *res = malloc(TASKS * sizeof *res);
    hive_actor_t *actors = malloc(ACTORS * sizeof *actors);
    for (uint64_t i = 0; i < OBJECTS; i++)
        if (hive_put(h, &i, sizeof i, &objs[i]) != HIVE_OK)
            fail_msg("put %llu: %s", (unsigned long long)i, hive_last_error());
    hive_ref_t held[2];
    for (int w = 0; w < 2; w++)
        assert_int_equal(hive_submit(h, hold, NULL, 0, NULL, &held[w]), HIVE_OK);
    for (uint64_t i = 0; i < TASKS; i++)
        if (hive_submit(h, count, &HIVE_VAL(i), 1, NULL, &res[i]) != HIVE_OK)
            fail_msg("submit %llu: %s", (unsigned long long)i, hive_last_error());
    for (size_t i = 0; i < ACTORS; i++)
        if (hive_actor_new(h, &cls, NULL, 0, NULL, &actors[i]) != HIVE_OK)
            fail_msg("actor %zu: %s", i, hive_last_error());
    hive_store_stats_t st;
    assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
    assert_true(st.objects >= OBJECTS + TASKS);
    atomic_store(&gate_open, 1);
    /* every object its own value, in a scattered order */
    for (uint64_t k = 0, i = 0; k < OBJECTS; k++, i = (i + 7919) % OBJECTS) {
        const void *p;
        size_t n;
        test_get_ok(h, objs[i], 10 * 1000000000ll, &p, &n);
        assert_int_equal(n, 8);
        assert_int_equal(*(const uint64_t *)p, i);
    }
    for (uint64_t i = 0; i < TASKS; i++) {
        const void *p;
        test_get_ok(h, res[i], 60 * 1000000000ll, &p, NULL);
        assert_int_equal(*(const uint64_t *)p, i);
    }
    assert_int_equal(atomic_load(&ran), TASKS);
    for (size_t i = 0; i < ACTORS; i += ACTORS / 1000 + 1) {
        hive_ref_t r;
        const void *p;
        assert_int_equal(hive_call(h, actors[i], 0, NULL, 0, NULL, &r), HIVE_OK);
        test_get_ok(h, r, 10 * 1000000000ll, &p, NULL);
        assert_int_equal(*(const uint64_t *)p, 1);
        assert_int_equal(hive_release(h, r), HIVE_OK);
    }
    for (uint64_t i = 0; i < OBJECTS; i++)
        assert_int_equal(hive_release(h, objs[i]), HIVE_OK);
    for (uint64_t i = 0; i < TASKS; i++)
        assert_int_equal(hive_release(h, res[i]), HIVE_OK);
    for (int w = 0; w < 2; w++)
        assert_int_equal(hive_release(h, held[w]), HIVE_OK);
    /* what is left is the live actors' state: 64 bytes each */
    hive__store_drain(h);
    assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
    if (st.objects != 0 || st.used != (size_t)ACTORS * 64)
        fail_msg("left: %llu objects, %zu bytes (the actors' state is %zu)",
                 (unsigned long long)st.objects, st.used, (size_t)ACTORS * 64);
    assert_int_equal(hive_shutdown(h), HIVE_OK);    /* with the actors still alive */
    free(objs);
    free(res);
    free(actors);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_lot_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
