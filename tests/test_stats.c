/*
 * test_stats.c - hive_stats and hive_worker_stats: the numbers add up
 * against a known workload (N tasks run = N, M calls = M methods), the
 * per-worker figures sum to the totals, steals done equal steals suffered,
 * actors alive and dead follow creation and kill, and the size versioning
 * neither writes past an older struct nor accepts a too-small one. Then
 * the figures beyond the counters: a backed-up actor heads hive_actor_top
 * with its exact mailbox depth, a rebuilding actor shows as restarting,
 * the store's size classes add up to what it holds, and replay buffers and
 * env pools are listed with the work done on them.
 */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>

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

/* ------------------------------------------------------------ actor top */

static _Atomic int gate_open, in_slow, hold_init;

/* Blocks until the test opens the gate: calls queue behind it. */
static int slow(void *self, hive_ctx_t *ctx)
{
    (void)self;
    (void)ctx;
    atomic_store(&in_slow, 1);
    while (!atomic_load(&gate_open))
        sched_yield();
    return 0;
}

/* A constructor that blocks while hold_init is set (a rebuild in progress). */
static int held_init(void *self, hive_ctx_t *ctx)
{
    (void)self;
    (void)ctx;
    while (atomic_load(&hold_init))
        sched_yield();
    return 0;
}

static const hive_method_t SLOW_METHODS[] = { { .name = "slow", .fn = slow },
                                              { .name = "bump", .fn = bump },
                                              { .name = "crash", .fn = crash } };
static const hive_actor_class_t SLOW_CLS = { .name = "Slowpoke", .size = sizeof(int),
                                             .init = held_init, .methods = SLOW_METHODS,
                                             .nmethods = 3 };

#define QUEUED 25

static void test_actor_top(void **state)
{
    (void)state;
    hive_t *h = test_engine(64u << 20, 2, NULL);
    atomic_store(&gate_open, 0);
    atomic_store(&in_slow, 0);
    atomic_store(&hold_init, 0);
    hive_actor_t quiet, busy;
    hive_actor_opts_t named = { .name = "the-slow-one", .max_restarts = 3 };
    assert_int_equal(hive_actor_new(h, &CLS, NULL, 0, NULL, &quiet), HIVE_OK);
    assert_int_equal(hive_actor_new(h, &SLOW_CLS, NULL, 0, &named, &busy), HIVE_OK);
    hive_ref_t first, r[QUEUED];
    assert_int_equal(hive_call(h, busy, 0, NULL, 0, NULL, &first), HIVE_OK);
    WAIT_UNTIL(atomic_load(&in_slow), 10000);           /* it runs: popped */
    for (int i = 0; i < QUEUED; i++)
        assert_int_equal(hive_call(h, busy, 1, NULL, 0, NULL, &r[i]), HIVE_OK);

    hive_actor_info_t top[8];
    int n = hive_actor_top(h, top, 8, sizeof top[0]);
    assert_int_equal(n, 2);
    assert_int_equal(top[0].id, busy.id);
    assert_int_equal(top[0].mailbox, QUEUED);
    assert_int_equal(top[0].state, HIVE_ACTOR_ALIVE);
    assert_string_equal(top[0].class_name, "Slowpoke");
    assert_string_equal(top[0].name, "the-slow-one");
    assert_int_equal(top[1].id, quiet.id);
    assert_int_equal(top[1].mailbox, 0);
    assert_string_equal(top[1].name, "");
    /* max bounds what is written; an older, shorter struct keeps its tail */
    assert_int_equal(hive_actor_top(h, top, 1, sizeof top[0]), 1);
    assert_int_equal(top[0].id, busy.id);
    size_t old = offsetof(hive_actor_info_t, class_name);
    union { hive_actor_info_t i[2]; unsigned char b[2 * sizeof(hive_actor_info_t)]; } u;
    memset(&u, 0xAB, sizeof u);
    assert_int_equal(hive_actor_top(h, u.i, 2, old), 2);
    uint64_t second;                                 /* record 1, at offset old (unaligned) */
    memcpy(&second, u.b + old + offsetof(hive_actor_info_t, id), sizeof second);
    assert_int_equal(second, quiet.id);
    for (size_t i = 2 * old; i < sizeof u; i++)
        if (u.b[i] != 0xAB)
            fail_msg("byte %zu past the caller's 2 x %zu was written", i, old);
    assert_int_equal(hive_actor_top(h, NULL, 0, sizeof top[0]), 0);
    ASSERT_FAILS_WITH(hive_actor_top(NULL, top, 8, sizeof top[0]), HIVE_EINVAL, "engine is NULL");
    ASSERT_FAILS_WITH(hive_actor_top(h, NULL, 8, sizeof top[0]), HIVE_EINVAL, "out is NULL");
    ASSERT_FAILS_WITH(hive_actor_top(h, top, 8, 8), HIVE_EINVAL, "size 8 is below");

    /* the queue drains: depth 0 again */
    atomic_store(&gate_open, 1);
    wait_ref(h, first);
    for (int i = 0; i < QUEUED; i++)
        wait_ref(h, r[i]);
    assert_int_equal(hive_actor_top(h, top, 8, sizeof top[0]), 2);
    assert_int_equal(top[0].mailbox + top[1].mailbox, 0);

    /* a rebuild in progress: restarting, in the top and in hive_stats */
    atomic_store(&hold_init, 1);
    hive_ref_t c;
    assert_int_equal(hive_call(h, busy, 2, NULL, 0, NULL, &c), HIVE_OK);
    hive_stats_t s;
    WAIT_UNTIL(hive_stats(h, &s, sizeof s) == HIVE_OK && s.actors_restarting == 1, 10000);
    n = hive_actor_top(h, top, 8, sizeof top[0]);
    assert_int_equal(n, 2);
    assert_int_equal(top[0].state + top[1].state, HIVE_ACTOR_RESTARTING);
    atomic_store(&hold_init, 0);
    WAIT_UNTIL(hive_stats(h, &s, sizeof s) == HIVE_OK && s.actors_restarting == 0, 10000);
    hive_release(h, c);
    /* a killed actor: dead until its last turn unlists it, then gone */
    assert_int_equal(hive_actor_kill(h, quiet), HIVE_OK);
    WAIT_UNTIL(hive_actor_top(h, top, 8, sizeof top[0]) == 1, 10000);
    assert_int_equal(top[0].id, busy.id);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------------ size classes */

static void classes_sum(hive_t *h, hive_size_class_t *c, size_t *bytes)
{
    assert_int_equal(hive_store_classes(h, c, HIVE_STORE_CLASSES), HIVE_STORE_CLASSES);
    *bytes = 0;
    for (int i = 0; i < HIVE_STORE_CLASSES; i++) {
        *bytes += c[i].bytes;
        if (c[i].size != 0)
            assert_int_equal(c[i].bytes, c[i].objects * c[i].size);
    }
}

static const hive_size_class_t *class_of_size(const hive_size_class_t *c, size_t size)
{
    for (int i = 0; i < HIVE_STORE_CLASSES; i++)
        if (c[i].size == size)
            return &c[i];
    fail_msg("no class of %zu bytes", size);
    return NULL;
}

static void test_size_classes(void **state)
{
    (void)state;
    hive_t *h = test_engine(64u << 20, 2, NULL);
    hive_size_class_t c0[HIVE_STORE_CLASSES], c[HIVE_STORE_CLASSES];
    size_t bytes0, bytes;
    classes_sum(h, c0, &bytes0);
    assert_int_equal(c0[0].size, 64);
    assert_int_equal(c0[HIVE_STORE_CLASSES - 2].size, 32768);
    assert_int_equal(c0[HIVE_STORE_CLASSES - 1].size, 0);     /* the large area */
    static char data[100000];
    hive_ref_t small[3], mid[2], big;
    for (int i = 0; i < 3; i++)
        assert_int_equal(hive_put(h, data, 100, &small[i]), HIVE_OK);    /* cells of 128 */
    for (int i = 0; i < 2; i++)
        assert_int_equal(hive_put(h, data, 5000, &mid[i]), HIVE_OK);     /* cells of 5120 */
    assert_int_equal(hive_put(h, data, sizeof data, &big), HIVE_OK);     /* a large block */
    classes_sum(h, c, &bytes);
    assert_int_equal(class_of_size(c, 128)->objects, class_of_size(c0, 128)->objects + 3);
    assert_int_equal(class_of_size(c, 5120)->objects, class_of_size(c0, 5120)->objects + 2);
    assert_int_equal(c[HIVE_STORE_CLASSES - 1].objects, c0[HIVE_STORE_CLASSES - 1].objects + 1);
    assert_true(c[HIVE_STORE_CLASSES - 1].bytes - c0[HIVE_STORE_CLASSES - 1].bytes >= sizeof data);
    /* quiet: the classes add up to the store's used */
    hive_store_stats_t st;
    assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
    assert_int_equal(bytes, st.used);
    for (int i = 0; i < 3; i++)
        hive_release(h, small[i]);
    for (int i = 0; i < 2; i++)
        hive_release(h, mid[i]);
    hive_release(h, big);
    /* records go after a grace period: their bytes soon after */
    WAIT_UNTIL((classes_sum(h, c, &bytes), bytes == bytes0), 10000);
    assert_int_equal(class_of_size(c, 128)->objects, class_of_size(c0, 128)->objects);
    /* a cell taken by this thread and freed by another (the release's
     * grace-period callback) still counts out: each thread's counts go
     * below zero or above, their sum is right */
    assert_int_equal(hive_put(h, data, 100, &small[0]), HIVE_OK);
    hive_ref_t r;
    assert_int_equal(hive_submit(h, one, NULL, 0, NULL, &r), HIVE_OK);
    wait_ref(h, r);
    assert_int_equal(hive_store_classes(h, c, 4), 4);           /* max bounds it */
    ASSERT_FAILS_WITH(hive_store_classes(NULL, c, 4), HIVE_EINVAL, "engine is NULL");
    ASSERT_FAILS_WITH(hive_store_classes(h, NULL, 4), HIVE_EINVAL, "out is NULL");
    hive_release(h, small[0]);
    WAIT_UNTIL((classes_sum(h, c, &bytes), bytes == bytes0), 10000);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------------ replay, env pools */

typedef struct sampler {
    hive_replay_t *rb;
    int            rc;
} sampler_t;

static void *sample_forever(void *arg)
{
    sampler_t *s = arg;
    unsigned char item[8];
    uint64_t key;
    s->rc = hive_replay_sample(s->rb, 1, NULL, item, &key, NULL, HIVE_FOREVER);
    return NULL;
}

static void test_replay_and_envpool_lists(void **state)
{
    (void)state;
    hive_t *h = test_engine(64u << 20, 2, NULL);
    hive_replay_info_t ri[4];
    hive_envpool_info_t ei[4];
    assert_int_equal(hive_replay_list(h, ri, 4, sizeof ri[0]), 0);
    assert_int_equal(hive_envpool_list(h, ei, 4, sizeof ei[0]), 0);

    hive_replay_config_t cfg = { .capacity = 100, .item_size = 8, .min_size_to_sample = 10 };
    hive_replay_t *a, *b;
    assert_int_equal(hive_replay_new(h, &cfg, &a), HIVE_OK);
    assert_int_equal(hive_replay_new(h, &cfg, &b), HIVE_OK);
    /* a sampler that must wait for min_size: a limiter wait */
    sampler_t s = { .rb = b, .rc = 1 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sample_forever, &s), 0);
    WAIT_UNTIL(hive_replay_list(h, ri, 4, sizeof ri[0]) == 2 && ri[1].limiter_waits > 0, 10000);
    unsigned char item[8] = { 0 };
    for (int i = 0; i < 150; i++)
        assert_int_equal(hive_replay_push(a, item), HIVE_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(hive_replay_push(b, item), HIVE_OK);
    pthread_join(t, NULL);
    assert_int_equal(s.rc, HIVE_OK);                /* one item sampled */
    unsigned char out[5 * 8];
    uint64_t keys[5];
    assert_int_equal(hive_replay_sample(a, 5, NULL, out, keys, NULL, 0), HIVE_OK);
    assert_int_equal(hive_replay_list(h, ri, 4, sizeof ri[0]), 2);
    assert_int_equal(ri[0].id, 1);
    assert_int_equal(ri[0].capacity, 100);
    assert_int_equal(ri[0].size, 100);
    assert_int_equal(ri[0].inserts, 150);
    assert_int_equal(ri[0].samples, 5);
    assert_int_equal(ri[0].limiter_waits, 0);
    assert_int_equal(ri[1].id, 2);
    assert_int_equal(ri[1].size, 10);
    assert_int_equal(ri[1].samples, 1);
    assert_true(ri[1].limiter_waits >= 1);

    hive_envpool_opts_t o = { .num_envs = 4, .seed = 1 };
    hive_envpool_t *p;
    assert_int_equal(hive_envpool_new(h, &hive_env_cartpole, &o, &p), HIVE_OK);
    hive_envpool_batch_t bt;
    assert_int_equal(hive_envpool_reset(p, &bt), HIVE_OK);
    int32_t act[4] = { 0, 1, 0, 1 };
    hive_array_t av = { .data = act, .dtype = HIVE_I32, .ndim = 1 };
    av.shape[0] = 4;
    av.strides[0] = sizeof(int32_t);
    for (int i = 0; i < 3; i++)
        assert_int_equal(hive_envpool_step(p, &av, &bt), HIVE_OK);
    /* async: send two, receive them as one batch of 2 */
    hive_envpool_t *q;
    hive_envpool_opts_t oq = { .num_envs = 2, .batch_size = 2, .seed = 1 };
    assert_int_equal(hive_envpool_new(h, &hive_env_cartpole, &oq, &q), HIVE_OK);
    assert_int_equal(hive_envpool_async_reset(q), HIVE_OK);
    assert_int_equal(hive_envpool_recv(q, HIVE_FOREVER, &bt), HIVE_OK);
    assert_int_equal(hive_envpool_list(h, ei, 4, sizeof ei[0]), 2);
    assert_int_equal(ei[0].id, 1);
    assert_int_equal(ei[0].num_envs, 4);
    assert_int_equal(ei[0].steps, 4 * 4);           /* a reset and three steps of 4 */
    assert_int_equal(ei[1].id, 2);
    assert_int_equal(ei[1].steps, 2);
    /* max and size */
    assert_int_equal(hive_envpool_list(h, ei, 1, sizeof ei[0]), 1);
    assert_int_equal(hive_replay_list(h, NULL, 0, sizeof ri[0]), 0);
    ASSERT_FAILS_WITH(hive_replay_list(NULL, ri, 4, sizeof ri[0]), HIVE_EINVAL, "engine is NULL");
    ASSERT_FAILS_WITH(hive_envpool_list(h, NULL, 4, sizeof ei[0]), HIVE_EINVAL, "out is NULL");
    ASSERT_FAILS_WITH(hive_replay_list(h, ri, 4, 8), HIVE_EINVAL, "size 8 is below");
    union { hive_envpool_info_t e[2]; unsigned char b[2 * sizeof(hive_envpool_info_t) + 32]; } u;
    memset(&u, 0xAB, sizeof u);
    size_t big = sizeof(hive_envpool_info_t) + 16;   /* a newer caller's larger struct */
    assert_int_equal(hive_envpool_list(h, u.e, 2, big), 2);
    assert_int_equal(((hive_envpool_info_t *)(void *)(u.b + big))->id, 2);
    for (size_t i = sizeof(hive_envpool_info_t); i < big; i++)
        assert_int_equal(u.b[i], 0);

    /* freed: off the lists; ids are not reused */
    assert_int_equal(hive_replay_free(a), HIVE_OK);
    assert_int_equal(hive_envpool_free(p), HIVE_OK);
    assert_int_equal(hive_replay_list(h, ri, 4, sizeof ri[0]), 1);
    assert_int_equal(ri[0].id, 2);
    assert_int_equal(hive_envpool_list(h, ei, 4, sizeof ei[0]), 1);
    assert_int_equal(ei[0].id, 2);
    assert_int_equal(hive_replay_new(h, &cfg, &a), HIVE_OK);
    assert_int_equal(hive_replay_list(h, ri, 4, sizeof ri[0]), 2);
    assert_int_equal(ri[1].id, 3);
    assert_int_equal(hive_replay_free(a), HIVE_OK);
    assert_int_equal(hive_replay_free(b), HIVE_OK);
    assert_int_equal(hive_envpool_free(q), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers_add_up),
        cmocka_unit_test(test_size_versioning),
        cmocka_unit_test(test_actor_top),
        cmocka_unit_test(test_size_classes),
        cmocka_unit_test(test_replay_and_envpool_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
