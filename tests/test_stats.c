/*
 * test_stats.c - hive_stats and hive_worker_stats: the numbers add up
 * against a known workload (N tasks run = N, M calls = M methods), the
 * per-worker figures sum to the totals, steals done equal steals suffered,
 * actors alive and dead follow creation and kill, and the size versioning
 * neither writes past an older struct nor accepts a too-small one.
 */
#include "testutil.h"

#define N_TASKS   (400 / TEST_SCALE)
#define N_FORKS   16
#define N_KIDS    32
#define N_CALLS   60

static int one(hive_ctx_t *ctx)
{
    (void)ctx;
    return 0;
}

/* Spawns N_KIDS children onto its own deque and waits: others may steal. */
static int fork_join(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    hive_ref_t r[N_KIDS];
    for (int i = 0; i < N_KIDS; i++)
        if (hive_submit(h, one, NULL, 0, NULL, &r[i]) != HIVE_OK)
            return 1;
    for (int i = 0; i < N_KIDS; i++) {
        const void *p;
        size_t n;
        if (hive_get(h, r[i], HIVE_FOREVER, &p, &n) != HIVE_OK)
            return 1;
        hive_release(h, r[i]);
    }
    return 0;
}

static int bump(void *self, hive_ctx_t *ctx)
{
    (void)ctx;
    ++*(int *)self;
    return 0;
}

static int crash(void *self, hive_ctx_t *ctx)
{
    (void)self;
    (void)ctx;
    return HIVE_RESTART;
}

static const hive_method_t METHODS[] = { { .name = "bump", .fn = bump },
                                         { .name = "crash", .fn = crash } };
static const hive_actor_class_t CLS = { .name = "Bumper", .size = sizeof(int),
                                        .methods = METHODS, .nmethods = 2 };

static void wait_ref(hive_t *h, hive_ref_t r)
{
    const void *p;
    size_t n;
    test_get_ok(h, r, 60 * 1000000000ll, &p, &n);
    hive_release(h, r);
}

static void test_numbers_add_up(void **state)
{
    (void)state;
    hive_t *h = test_engine(64u << 20, 4, "pack:1 numa:2 core:2 pu:1");
    hive_stats_t s0;
    assert_int_equal(hive_stats(h, &s0, sizeof s0), HIVE_OK);
    assert_int_equal(s0.workers, 4);
    assert_int_equal(s0.nodes, 2);
    assert_int_equal(s0.total.tasks, 0);
    assert_int_equal(s0.total.methods, 0);

    hive_ref_t r;
    for (int i = 0; i < N_TASKS; i++) {
        assert_int_equal(hive_submit(h, one, NULL, 0, NULL, &r), HIVE_OK);
        wait_ref(h, r);
    }
    hive_ref_t f[N_FORKS];
    for (int i = 0; i < N_FORKS; i++)
        assert_int_equal(hive_submit(h, fork_join, NULL, 0, NULL, &f[i]), HIVE_OK);
    for (int i = 0; i < N_FORKS; i++)
        wait_ref(h, f[i]);
    hive_actor_t a, b;
    assert_int_equal(hive_actor_new(h, &CLS, NULL, 0, NULL, &a), HIVE_OK);
    assert_int_equal(hive_actor_new(h, &CLS, NULL, 0, NULL, &b), HIVE_OK);
    for (int i = 0; i < N_CALLS; i++) {
        assert_int_equal(hive_call(h, i % 2 ? a : b, 0, NULL, 0, NULL, &r), HIVE_OK);
        wait_ref(h, r);
    }
    hive_actor_opts_t again = { .max_restarts = 5 };
    hive_actor_t c;
    assert_int_equal(hive_actor_new(h, &CLS, NULL, 0, &again, &c), HIVE_OK);
    for (int i = 0; i < 2; i++) {                /* two crashes: two rebuilds */
        assert_int_equal(hive_call(h, c, 1, NULL, 0, NULL, &r), HIVE_OK);
        const void *p;
        size_t n;
        assert_int_equal(hive_get(h, r, 60 * 1000000000ll, &p, &n), HIVE_ETASK);
        hive_release(h, r);
    }
    assert_int_equal(hive_call(h, c, 0, NULL, 0, NULL, &r), HIVE_OK);   /* after the rebuilds */
    wait_ref(h, r);
    assert_int_equal(hive_actor_kill(h, b), HIVE_OK);

    hive_stats_t s;
    assert_int_equal(hive_stats(h, &s, sizeof s), HIVE_OK);
    uint64_t tasks = (uint64_t)N_TASKS + N_FORKS + (uint64_t)N_FORKS * N_KIDS;
    assert_int_equal(s.total.tasks, tasks);
    assert_int_equal(s.total.methods, N_CALLS + 3);
    assert_int_equal(s.actors_restarts, 2);
    assert_true(s.total.jobs > tasks);           /* each task a job; turns run the calls */
    assert_int_equal(s.actors_created, 3);
    assert_int_equal(s.actors_alive, 2);
    assert_int_equal(s.actors_dead, 1);
    assert_int_equal(s.store.capacity, 64u << 20);
    assert_int_equal(s.trace_events, 0);
    /* a thief's steal is its victim's loss: both sides count each once */
    assert_int_equal(s.total.steals_same_node + s.total.steals_other_node,
                     s.total.stolen_same_node + s.total.stolen_other_node);
    assert_int_equal(s.total.steals_same_node, s.total.stolen_same_node);

    /* the workers' figures sum to the totals (nothing runs now but the
     * parked workers: tasks, methods and steals do not move) */
    hive_worker_stats_t sum = { 0 };
    for (unsigned i = 0; i < s.workers; i++) {
        hive_worker_stats_t w;
        assert_int_equal(hive_worker_stats(h, i, &w, sizeof w), HIVE_OK);
        sum.tasks += w.tasks;
        sum.methods += w.methods;
        sum.steals_other_node += w.steals_other_node;
        sum.stolen_other_node += w.stolen_other_node;
        assert_true(w.wakes <= w.parks);
    }
    assert_int_equal(sum.tasks, s.total.tasks);
    assert_int_equal(sum.methods, s.total.methods);
    assert_int_equal(sum.steals_other_node, s.total.steals_other_node);
    assert_int_equal(sum.stolen_other_node, s.total.stolen_other_node);
    /* nested waits helped: fork_join's gets ran children nested, or
     * another worker ran them all; either way the depth is a small number */
    assert_true(s.total.help_depth_max <= N_KIDS + 1);
    /* nothing is left queued once everything has run */
    WAIT_UNTIL(hive_stats(h, &s, sizeof s) == HIVE_OK &&
               s.queued[0] + s.queued[1] + s.queued[2] == 0, 10000);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* An older caller's smaller struct: nothing past its size is written. */
static void test_size_versioning(void **state)
{
    (void)state;
    hive_t *h = test_engine(16u << 20, 1, NULL);
    size_t old = offsetof(hive_stats_t, trace_dropped);
    union { hive_stats_t s; unsigned char b[sizeof(hive_stats_t) + 64]; } u;
    memset(&u, 0xAB, sizeof u);
    assert_int_equal(hive_stats(h, &u.s, old), HIVE_OK);
    for (size_t i = old; i < sizeof u; i++)
        if (u.b[i] != 0xAB)
            fail_msg("byte %zu past the caller's %zu was written", i, old);
    assert_int_equal(u.s.workers, 1);
    /* a newer caller's larger struct: the part we do not know is zeroed */
    memset(&u, 0xAB, sizeof u);
    assert_int_equal(hive_stats(h, &u.s, sizeof u), HIVE_OK);
    for (size_t i = sizeof(hive_stats_t); i < sizeof u; i++)
        assert_int_equal(u.b[i], 0);
    hive_stats_t s;
    ASSERT_FAILS_WITH(hive_stats(h, &s, 8), HIVE_EINVAL, "size 8 is below");
    assert_int_equal(hive_stats(h, &s, offsetof(hive_stats_t, queued)), HIVE_OK);   /* up to total */
    ASSERT_FAILS_WITH(hive_stats(NULL, &s, sizeof s), HIVE_EINVAL, "engine is NULL");
    ASSERT_FAILS_WITH(hive_stats(h, NULL, sizeof s), HIVE_EINVAL, "out is NULL");
    hive_worker_stats_t w;
    ASSERT_FAILS_WITH(hive_worker_stats(h, 1, &w, sizeof w), HIVE_EINVAL,
                      "worker 1 out of range, engine has 1");
    ASSERT_FAILS_WITH(hive_worker_stats(h, 0, &w, 4), HIVE_EINVAL, "size 4 is below");
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers_add_up),
        cmocka_unit_test(test_size_versioning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
