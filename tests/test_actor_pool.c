/* test_actor_pool.c - actor pools: results in submission order and in completion
 * order, never two of the pool's calls on one actor at once, has_free and
 * has_next, map and map_unordered, timeouts, dead actors leaving the pool,
 * the one-thread-at-a-time guard, freeing a busy pool, and bad input with
 * its sentence.
 *
 * Methods run on worker threads and only record what they see (globals);
 * the test thread checks. A "hold" call stays until the test releases its
 * argument, so the test decides the completion order. Every wait has a
 * deadline: a bug shows as a failed check, never as a hang. */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>

#define MiB         (1024u * 1024u)
#define DEADLINE_MS 20000u                 /* against hangs only, never a timing check */
#define DEADLINE_NS ((int64_t)DEADLINE_MS * 1000000)
#define NACT        8
#define NHOLD       64

static _Atomic int inside[NACT];           /* pool calls running on each actor */
static _Atomic int used[NACT];             /* calls each actor ran */
static _Atomic int overlap;                /* an actor ran two calls at once */
static _Atomic int release_of[NHOLD];      /* hold x returns once release_of[x] */
static _Atomic int timeouts;

typedef struct { int64_t who; } worker_t;

static void reset(void)
{
    for (int i = 0; i < NACT; i++) {
        atomic_store(&inside[i], 0);
        atomic_store(&used[i], 0);
    }
    for (int i = 0; i < NHOLD; i++)
        atomic_store(&release_of[i], 0);
    atomic_store(&overlap, 0);
    atomic_store(&timeouts, 0);
}

static int64_t arg_i64(hive_ctx_t *ctx)
{
    size_t n = 0;
    const void *p = hive_arg(ctx, 0, &n);
    int64_t v = -1;
    if (p != NULL && n == sizeof v)
        memcpy(&v, p, sizeof v);
    return v;
}

static int worker_init(void *self, hive_ctx_t *ctx)
{
    ((worker_t *)self)->who = arg_i64(ctx);
    return 0;
}

static int begin(worker_t *w)
{
    int who = (int)w->who;
    if (atomic_fetch_add(&inside[who], 1) != 0)
        atomic_store(&overlap, 1);
    atomic_fetch_add(&used[who], 1);
    return who;
}

/* twice its argument, after a little work that differs per argument */
static int twice(void *self, hive_ctx_t *ctx)
{
    int who = begin(self);
    int64_t x = arg_i64(ctx);
    for (volatile int i = 0; i < (int)(x % 7) * 2000; i++)
        ;
    atomic_fetch_sub(&inside[who], 1);
    int64_t v = 2 * x;
    return hive_return(ctx, &v, sizeof v);
}

/* its argument, once the test releases it */
static int hold(void *self, hive_ctx_t *ctx)
{
    int who = begin(self);
    int64_t x = arg_i64(ctx);
    uint64_t deadline = test_now_ns() + (uint64_t)DEADLINE_NS;
    while (x >= 0 && x < NHOLD && !atomic_load(&release_of[x])) {
        if (test_now_ns() > deadline) {
            atomic_fetch_add(&timeouts, 1);
            break;
        }
        sched_yield();
    }
    atomic_fetch_sub(&inside[who], 1);
    return hive_return(ctx, &x, sizeof x);
}

enum { M_TWICE, M_HOLD };
static const hive_method_t methods[] = { { "twice", twice, 0 }, { "hold", hold, 0 } };
static const hive_actor_class_t worker_class = {
    .name = "Worker", .size = sizeof(worker_t), .init = worker_init,
    .methods = methods, .nmethods = 2,
};

static void make_actors(hive_t *h, hive_actor_t *a, int n)
{
    for (int64_t i = 0; i < n; i++) {
        hive_arg_t arg = HIVE_VAL(i);
        if (hive_actor_new(h, &worker_class, &arg, 1, NULL, &a[i]) != HIVE_OK)
            fail_msg("hive_actor_new: %s", hive_last_error());
    }
}

static hive_pool_t *make_pool(hive_t *h, hive_actor_t *a, int n)
{
    make_actors(h, a, n);
    hive_pool_t *p = NULL;
    if (hive_pool_new(h, a, (size_t)n, &p) != HIVE_OK)
        fail_msg("hive_pool_new: %s", hive_last_error());
    return p;
}

static void submit(hive_pool_t *p, unsigned m, int64_t x)
{
    hive_arg_t arg = HIVE_VAL(x);
    if (hive_pool_submit(p, m, &arg, 1) != HIVE_OK)
        fail_msg("hive_pool_submit: %s", hive_last_error());
}

static int64_t value(hive_t *h, hive_ref_t r)
{
    const void *d;
    size_t n;
    test_get_ok(h, r, DEADLINE_NS, &d, &n);
    assert_int_equal(n, sizeof(int64_t));
    int64_t v;
    memcpy(&v, d, sizeof v);
    assert_int_equal(hive_release(h, r), HIVE_OK);
    return v;
}

static int64_t next(hive_t *h, hive_pool_t *p, bool ordered)
{
    hive_ref_t r;
    int rc = ordered ? hive_pool_get_next(p, DEADLINE_NS, &r)
                     : hive_pool_get_next_unordered(p, DEADLINE_NS, &r);
    if (rc != HIVE_OK)
        fail_msg("get_next: %s", hive_last_error());
    return value(h, r);
}

static void test_get_next_in_submission_order(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 4, NULL);
    hive_actor_t a[3];
    hive_pool_t *p = make_pool(h, a, 3);
    assert_int_equal(hive_pool_has_next(p), 0);
    for (int64_t x = 0; x < 40; x++)
        submit(p, M_TWICE, x);
    assert_int_equal(hive_pool_has_next(p), 1);
    for (int64_t x = 0; x < 40; x++)
        assert_int_equal(next(h, p, true), 2 * x);
    assert_int_equal(hive_pool_has_next(p), 0);
    hive_ref_t r = { 0 };
    ASSERT_FAILS_WITH(hive_pool_get_next(p, 0, &r), HIVE_ESTATE,
                      "no result to get: all 40 calls submitted to the pool were fetched");
    ASSERT_FAILS_WITH(hive_pool_get_next_unordered(p, 0, &r), HIVE_ESTATE, "all 40 calls");
    assert_int_equal(atomic_load(&overlap), 0);
    for (int i = 0; i < 3; i++)                      /* the first three went one to each */
        assert_true(atomic_load(&used[i]) >= 1);
    assert_int_equal(atomic_load(&used[0]) + atomic_load(&used[1]) + atomic_load(&used[2]), 40);
    assert_int_equal(hive_pool_free(p), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Completion order: the test releases holds 2, 0, 1 and gets them so. */
static void test_get_next_unordered_completion_order(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 4, NULL);
    hive_actor_t a[3];
    hive_pool_t *p = make_pool(h, a, 3);
    for (int64_t x = 0; x < 3; x++)
        submit(p, M_HOLD, x);
    static const int order[] = { 2, 0, 1 };
    for (int k = 0; k < 3; k++) {
        atomic_store(&release_of[order[k]], 1);
        assert_int_equal(next(h, p, false), order[k]);
    }
    /* ordered and unordered mixed: each result is fetched once */
    for (int64_t x = 10; x < 14; x++)
        submit(p, M_HOLD, x);
    atomic_store(&release_of[12], 1);
    assert_int_equal(next(h, p, false), 12);
    for (int x = 10; x < 14; x++)
        atomic_store(&release_of[x], 1);
    assert_int_equal(next(h, p, true), 10);
    assert_int_equal(next(h, p, true), 11);
    assert_int_equal(next(h, p, false), 13);
    assert_int_equal(hive_pool_has_next(p), 0);
    assert_int_equal(atomic_load(&overlap), 0);
    assert_int_equal(atomic_load(&timeouts), 0);
    assert_int_equal(hive_pool_free(p), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* has_free: a free actor and nothing queued; a queued call goes to the
 * first actor that frees, so has_free stays 0 until the queue is empty. */
static void test_has_free(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 4, NULL);
    hive_actor_t a[2];
    hive_pool_t *p = make_pool(h, a, 2);
    assert_int_equal(hive_pool_has_free(p), 1);
    submit(p, M_HOLD, 0);
    assert_int_equal(hive_pool_has_free(p), 1);
    submit(p, M_HOLD, 1);
    assert_int_equal(hive_pool_has_free(p), 0);
    submit(p, M_HOLD, 2);                            /* queued in the pool */
    WAIT_UNTIL(atomic_load(&inside[0]) + atomic_load(&inside[1]) == 2, DEADLINE_MS);
    atomic_store(&release_of[0], 1);
    /* the pool notices inside its functions: the freed actor takes the
     * queued call, so nothing is free yet */
    WAIT_UNTIL((hive_pool_has_free(p), atomic_load(&used[0]) + atomic_load(&used[1]) == 3),
               DEADLINE_MS);
    assert_int_equal(hive_pool_has_free(p), 0);
    atomic_store(&release_of[1], 1);
    WAIT_UNTIL(hive_pool_has_free(p) == 1, DEADLINE_MS);
    atomic_store(&release_of[2], 1);
    for (int64_t x = 0; x < 3; x++)
        assert_int_equal(next(h, p, true), x);
    assert_int_equal(hive_pool_has_free(p), 1);
    assert_int_equal(atomic_load(&overlap), 0);
    assert_int_equal(hive_pool_free(p), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* A waiting get_next keeps the other actors busy: the first call is held
 * while the other actor runs every other queued call. */
static void test_waiting_get_next_dispatches(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 4, NULL);
    hive_actor_t a[2];
    hive_pool_t *p = make_pool(h, a, 2);
    submit(p, M_HOLD, 0);
    for (int64_t x = 1; x < 8; x++)
        submit(p, M_HOLD, x);
    for (int x = 1; x < 8; x++)
        atomic_store(&release_of[x], 1);
    /* get_next waits for call 0, which only ends once 1..7 all ran */
    hive_ref_t r;
    ASSERT_FAILS_WITH(hive_pool_get_next(p, 2000000, &r), HIVE_ETIMEDOUT,
                      "hive_pool_get_next: call 0 of the pool not done after 2000000 ns");
    WAIT_UNTIL((hive_pool_has_free(p), atomic_load(&used[0]) + atomic_load(&used[1]) == 8),
               DEADLINE_MS);
    atomic_store(&release_of[0], 1);
    for (int64_t x = 0; x < 8; x++)
        assert_int_equal(next(h, p, true), x);
    assert_int_equal(atomic_load(&overlap), 0);
    assert_int_equal(hive_pool_free(p), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_map(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 4, NULL);
    hive_actor_t a[4];
    hive_pool_t *p = make_pool(h, a, 4);
    enum { N = 100 };
    int64_t xs[N];
    hive_arg_t args[N];
    hive_ref_t res[N];
    size_t index[N];
    for (int i = 0; i < N; i++) {
        xs[i] = 1000 + i;
        args[i] = HIVE_VAL(xs[i]);
    }
    assert_int_equal(hive_pool_map(p, M_TWICE, args, N, res), HIVE_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(value(h, res[i]), 2 * xs[i]);
    assert_int_equal(hive_pool_map_unordered(p, M_TWICE, args, N, res, index), HIVE_OK);
    unsigned char seen[N] = { 0 };
    for (int k = 0; k < N; k++) {
        assert_true(index[k] < N);
        assert_int_equal(seen[index[k]], 0);
        seen[index[k]] = 1;
        assert_int_equal(value(h, res[k]), 2 * xs[index[k]]);
    }
    /* map with results still to fetch is refused */
    submit(p, M_TWICE, 1);
    ASSERT_FAILS_WITH(hive_pool_map(p, M_TWICE, args, N, res), HIVE_ESTATE,
                      "hive_pool_map: the pool still has 1 results not fetched");
    assert_int_equal(next(h, p, true), 2);
    assert_int_equal(hive_pool_map(p, M_TWICE, args, 0, NULL), HIVE_OK);
    assert_int_equal(atomic_load(&overlap), 0);
    assert_int_equal(hive_pool_free(p), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* A dead actor leaves the pool; its call goes to another; with none left,
 * submit says so. */
static void test_dead_actors_leave(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 4, NULL);
    hive_actor_t a[2];
    hive_pool_t *p = make_pool(h, a, 2);
    assert_int_equal(hive_actor_kill(h, a[0]), HIVE_OK);
    for (int64_t x = 0; x < 10; x++)
        submit(p, M_TWICE, x);
    for (int64_t x = 0; x < 10; x++)
        assert_int_equal(next(h, p, true), 2 * x);
    assert_int_equal(atomic_load(&used[0]), 0);
    assert_int_equal(atomic_load(&used[1]), 10);
    assert_int_equal(hive_actor_kill(h, a[1]), HIVE_OK);
    hive_arg_t arg = HIVE_VAL(a[0]);
    ASSERT_FAILS_WITH(hive_pool_submit(p, M_TWICE, &arg, 1), HIVE_EDEAD,
                      "every one of the pool's 2 actors is dead");
    assert_int_equal(hive_pool_has_next(p), 0);
    assert_int_equal(hive_pool_free(p), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* A queued call whose actors all die meanwhile is fetched as HIVE_EDEAD. */
static void test_queued_call_with_no_actor_left(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 4, NULL);
    hive_actor_t a[1];
    hive_pool_t *p = make_pool(h, a, 1);
    submit(p, M_HOLD, 0);
    submit(p, M_HOLD, 1);                            /* queued */
    WAIT_UNTIL(atomic_load(&inside[0]) == 1, DEADLINE_MS);
    assert_int_equal(hive_actor_kill(h, a[0]), HIVE_OK);
    atomic_store(&release_of[0], 1);
    assert_int_equal(next(h, p, true), 0);           /* the running call finishes */
    hive_ref_t r = { 0 };
    ASSERT_FAILS_WITH(hive_pool_get_next(p, DEADLINE_NS, &r), HIVE_EDEAD,
                      "call 1 of the pool could not be made");
    assert_int_equal(r.id, 0);
    assert_int_equal(hive_pool_has_next(p), 0);
    assert_int_equal(hive_pool_free(p), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void *blocked_get(void *arg)
{
    hive_pool_t *p = arg;
    hive_ref_t r;
    return (void *)(intptr_t)hive_pool_get_next(p, DEADLINE_NS, &r);
}

/* One thread at a time: a second thread is refused while one waits inside. */
static void test_one_thread_at_a_time(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 4, NULL);
    hive_actor_t a[1];
    hive_pool_t *p = make_pool(h, a, 1);
    submit(p, M_HOLD, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, blocked_get, p), 0);
    WAIT_UNTIL(hive_pool_has_next(p) == HIVE_ESTATE, DEADLINE_MS);
    assert_non_null(strstr(hive_last_error(), "another thread is inside this pool"));
    atomic_store(&release_of[0], 1);
    void *rc;
    assert_int_equal(pthread_join(t, &rc), 0);
    assert_int_equal((int)(intptr_t)rc, HIVE_OK);
    assert_int_equal(hive_pool_has_next(p), 0);
    assert_int_equal(hive_pool_free(p), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Freeing a pool with calls running, queued and unfetched: nothing leaks
 * (ASan) and the running calls finish. */
static void test_free_busy_pool(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 4, NULL);
    hive_actor_t a[2];
    hive_pool_t *p = make_pool(h, a, 2);
    hive_ref_t big;
    int64_t payload[32] = { 0 };
    assert_int_equal(hive_put(h, payload, sizeof payload, &big), HIVE_OK);
    for (int64_t x = 0; x < 6; x++) {
        hive_arg_t args[2] = { HIVE_VAL(x), HIVE_REF(big) };
        assert_int_equal(hive_pool_submit(p, M_HOLD, args, 2), HIVE_OK);
    }
    assert_int_equal(hive_release(h, big), HIVE_OK);   /* the pool holds its own counts */
    WAIT_UNTIL(atomic_load(&inside[0]) + atomic_load(&inside[1]) == 2, DEADLINE_MS);
    assert_int_equal(hive_pool_free(p), HIVE_OK);
    for (int x = 0; x < 6; x++)
        atomic_store(&release_of[x], 1);
    WAIT_UNTIL(atomic_load(&inside[0]) + atomic_load(&inside[1]) == 0, DEADLINE_MS);
    assert_int_equal(atomic_load(&used[0]) + atomic_load(&used[1]), 2);   /* queued ones never made */
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_bad_input(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 2, NULL);
    hive_actor_t a[2];
    make_actors(h, a, 2);
    hive_pool_t *p = NULL;
    ASSERT_FAILS_WITH(hive_pool_new(NULL, a, 2, &p), HIVE_EINVAL, "hive_pool_new: engine is NULL");
    ASSERT_FAILS_WITH(hive_pool_new(h, NULL, 2, &p), HIVE_EINVAL, "hive_pool_new: actors is NULL");
    ASSERT_FAILS_WITH(hive_pool_new(h, a, 2, NULL), HIVE_EINVAL, "hive_pool_new: out is NULL");
    ASSERT_FAILS_WITH(hive_pool_new(h, a, 0, &p), HIVE_EINVAL, "0 actors, outside 1..1048576");
    ASSERT_FAILS_WITH(hive_pool_new(h, a, ((size_t)1 << 20) + 1, &p), HIVE_EINVAL,
                      "1048577 actors, outside 1..1048576");
    hive_actor_t twice[3] = { a[0], a[1], a[0] };
    char want[96];
    snprintf(want, sizeof want, "actor %llu is in the list twice", (unsigned long long)a[0].id);
    ASSERT_FAILS_WITH(hive_pool_new(h, twice, 3, &p), HIVE_EINVAL, want);
    hive_actor_t bogus[1] = { { 12345 } };
    ASSERT_FAILS_WITH(hive_pool_new(h, bogus, 1, &p), HIVE_ENOENT, "actor 12345 does not exist");
    assert_null(p);

    assert_int_equal(hive_pool_new(h, a, 2, &p), HIVE_OK);
    ASSERT_FAILS_WITH(hive_pool_submit(NULL, 0, NULL, 0), HIVE_EINVAL, "hive_pool_submit: pool is NULL");
    ASSERT_FAILS_WITH(hive_pool_submit(p, 0, NULL, 3), HIVE_EINVAL,
                      "hive_pool_submit: args is NULL for 3 arguments");
    ASSERT_FAILS_WITH(hive_pool_submit(p, 9, NULL, 0), HIVE_EINVAL,
                      "method 9 out of range, class Worker has 2");
    assert_int_equal(hive_pool_has_next(p), 0);      /* the refused one is not in the pool */
    ASSERT_FAILS_WITH(hive_pool_get_next(p, 0, NULL), HIVE_EINVAL, "result is NULL");
    ASSERT_FAILS_WITH(hive_pool_get_next_unordered(p, 0, NULL), HIVE_EINVAL, "result is NULL");
    ASSERT_FAILS_WITH(hive_pool_map(p, 0, NULL, 4, NULL), HIVE_EINVAL,
                      "hive_pool_map: args is NULL for 4 calls");
    ASSERT_FAILS_WITH(hive_pool_has_free(NULL), HIVE_EINVAL, "hive_pool_has_free: pool is NULL");
    ASSERT_FAILS_WITH(hive_pool_has_next(NULL), HIVE_EINVAL, "hive_pool_has_next: pool is NULL");
    ASSERT_FAILS_WITH(hive_pool_free(NULL), HIVE_EINVAL, "hive_pool_free: pool is NULL");
    assert_int_equal(hive_pool_free(p), HIVE_OK);

    assert_int_equal(hive_actor_kill(h, a[1]), HIVE_OK);
    ASSERT_FAILS_WITH(hive_pool_new(h, a, 2, &p), HIVE_EDEAD, "is dead already");
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_next_in_submission_order),
        cmocka_unit_test(test_get_next_unordered_completion_order),
        cmocka_unit_test(test_has_free),
        cmocka_unit_test(test_waiting_get_next_dispatches),
        cmocka_unit_test(test_map),
        cmocka_unit_test(test_dead_actors_leave),
        cmocka_unit_test(test_queued_call_with_no_actor_left),
        cmocka_unit_test(test_one_thread_at_a_time),
        cmocka_unit_test(test_free_busy_pool),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests_name("actor_pool", tests, NULL, NULL);
}
