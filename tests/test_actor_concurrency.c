/* test_actor_concurrency.c - concurrent actors (max_concurrency and
 * concurrency groups): each group's limit is reached and never passed, the
 * groups overlap each other, priorities and one caller's start order hold
 * within a group, kill / restart / cancel / shutdown with calls running at
 * once, and every kind of bad input with its sentence.
 *
 * The calls under test are "holds": a hold logs its tag in entry order,
 * counts itself running in its group, and stays until the test thread hands
 * it a release ticket (tickets go out in entry order). So the test decides
 * when each slot frees and can look at who is inside in between. Methods
 * run on worker threads, where cmocka's assertions must not be used: they
 * record what they saw in globals and the test thread checks. Every wait
 * has a deadline so that a bug shows as a failed check, never as a hang. */
#include "testutil.h"

#include <sched.h>

#define MiB         (1024u * 1024u)
#define DEADLINE_MS 20000u                 /* against hangs only, never a timing check */
#define DEADLINE_NS ((int64_t)DEADLINE_MS * 1000000)
#define LOGN        256
#define NGROUPS     3                      /* default, A, B */

static _Atomic int running[NGROUPS], max_running[NGROUPS], total_running, max_total;
static _Atomic int entered;                /* holds and quick calls that began, in order */
static _Atomic int64_t entry_log[LOGN];
static _Atomic int released;               /* tickets handed out: hold i leaves once released > i */
static _Atomic int timeouts;               /* a hold that waited past its deadline */
static _Atomic int inits, finis;

static void reset(void)
{
    for (int g = 0; g < NGROUPS; g++) {
        atomic_store(&running[g], 0);
        atomic_store(&max_running[g], 0);
    }
    atomic_store(&total_running, 0);
    atomic_store(&max_total, 0);
    atomic_store(&entered, 0);
    atomic_store(&released, 0);
    atomic_store(&timeouts, 0);
    atomic_store(&inits, 0);
    atomic_store(&finis, 0);
}

static void raise_max(_Atomic int *max, int v)
{
    int m = atomic_load(max);
    while (v > m && !atomic_compare_exchange_weak(max, &m, v))
        ;
}

static int64_t arg_tag(hive_ctx_t *ctx)
{
    size_t n = 0;
    const void *p = hive_arg(ctx, 0, &n);
    int64_t tag = -1;
    if (p != NULL && n == sizeof tag)
        memcpy(&tag, p, sizeof tag);
    return tag;
}

static int log_entry(int64_t tag)
{
    int i = atomic_fetch_add(&entered, 1);
    if (i < LOGN)
        atomic_store(&entry_log[i], tag);
    return i;
}

typedef struct { int64_t gen; } state_t;

static int hold_in(int group, void *self, hive_ctx_t *ctx)
{
    (void)self;
    int64_t tag = arg_tag(ctx);
    int ticket = log_entry(tag);
    raise_max(&max_running[group], atomic_fetch_add(&running[group], 1) + 1);
    raise_max(&max_total, atomic_fetch_add(&total_running, 1) + 1);
    uint64_t deadline = test_now_ns() + (uint64_t)DEADLINE_NS;
    while (atomic_load(&released) <= ticket && !hive_cancelled(ctx)) {
        if (test_now_ns() > deadline) {
            atomic_fetch_add(&timeouts, 1);
            break;
        }
        sched_yield();
    }
    atomic_fetch_sub(&total_running, 1);
    atomic_fetch_sub(&running[group], 1);
    return hive_return(ctx, &tag, sizeof tag);
}

static int hold_default(void *self, hive_ctx_t *ctx) { return hold_in(0, self, ctx); }
static int hold_a(void *self, hive_ctx_t *ctx) { return hold_in(1, self, ctx); }
static int hold_b(void *self, hive_ctx_t *ctx) { return hold_in(2, self, ctx); }

static int quick(void *self, hive_ctx_t *ctx)
{
    (void)self;
    int64_t tag = arg_tag(ctx);
    log_entry(tag);
    return hive_return(ctx, &tag, sizeof tag);
}

static int ask_restart(void *self, hive_ctx_t *ctx)
{
    (void)self;
    (void)ctx;
    return HIVE_RESTART;
}

static int get_gen(void *self, hive_ctx_t *ctx)
{
    state_t *s = self;
    log_entry(-100 - s->gen);
    return hive_return(ctx, &s->gen, sizeof s->gen);
}

static int init_state(void *self, hive_ctx_t *ctx)
{
    (void)ctx;
    state_t *s = self;
    s->gen = atomic_fetch_add(&inits, 1) + 1;
    return 0;
}

static void fini_state(void *self)
{
    (void)self;
    atomic_fetch_add(&finis, 1);
}

enum { M_HOLD, M_HOLD_A, M_HOLD_B, M_QUICK, M_RESTART, M_GEN, M_QUICK_A, NMETHODS };
static const hive_method_t methods[NMETHODS] = {
    [M_HOLD] = { "hold", hold_default, HIVE_PRIO_NORMAL },
    [M_HOLD_A] = { "hold_a", hold_a, HIVE_PRIO_NORMAL },
    [M_HOLD_B] = { "hold_b", hold_b, HIVE_PRIO_NORMAL },
    [M_QUICK] = { "quick", quick, HIVE_PRIO_NORMAL },
    [M_RESTART] = { "restart", ask_restart, HIVE_PRIO_NORMAL },
    [M_GEN] = { "gen", get_gen, HIVE_PRIO_NORMAL },
    [M_QUICK_A] = { "quick_a", quick, HIVE_PRIO_NORMAL },
};
static const unsigned group_a_methods[] = { M_HOLD_A, M_QUICK_A };
static const unsigned group_b_methods[] = { M_HOLD_B };

/* No groups: the default group alone, limited by opts->max_concurrency. */
static const hive_actor_class_t plain_class = {
    .name = "Conc", .size = sizeof(state_t), .init = init_state, .fini = fini_state,
    .methods = methods, .nmethods = NMETHODS,
};

static hive_actor_t new_actor(hive_t *h, const hive_actor_class_t *cls, unsigned max_concurrency)
{
    hive_actor_opts_t o = { .max_concurrency = max_concurrency };
    hive_actor_t a;
    int rc = hive_actor_new(h, cls, NULL, 0, &o, &a);
    if (rc != HIVE_OK)
        fail_msg("hive_actor_new: %s", hive_last_error());
    return a;
}

static hive_ref_t call(hive_t *h, hive_actor_t a, unsigned m, int64_t tag, int priority)
{
    hive_opts_t o = { .priority = priority };
    hive_arg_t arg = HIVE_VAL(tag);
    hive_ref_t r = { 0 };
    int rc = hive_call(h, a, m, &arg, 1, &o, &r);
    if (rc != HIVE_OK)
        fail_msg("hive_call(method %u): %s", m, hive_last_error());
    return r;
}

static int64_t result(hive_t *h, hive_ref_t r)
{
    const void *p;
    size_t n;
    test_get_ok(h, r, DEADLINE_NS, &p, &n);
    assert_int_equal(n, sizeof(int64_t));
    int64_t v;
    memcpy(&v, p, sizeof v);
    assert_int_equal(hive_release(h, r), HIVE_OK);
    return v;
}

static void expect_fails(hive_t *h, hive_ref_t r, int code)
{
    const void *p;
    int rc = hive_get(h, r, DEADLINE_NS, &p, NULL);
    if (rc != code)
        fail_msg("hive_get gave %s, expected %s", hive_strerror(rc), hive_strerror(code));
    assert_int_equal(hive_release(h, r), HIVE_OK);
}

/* Give a call that should not start the chance to (a bug shows as a check
 * failing, the pause only makes that likelier). */
static void settle(void)
{
    test_sleep_ms(5);
}

/* The calls that have entered are exactly tags 0 .. n-1, in any order. */
static void expect_entered_prefix(int n)
{
    assert_int_equal(atomic_load(&entered), n);
    unsigned char seen[LOGN] = { 0 };
    for (int i = 0; i < n; i++) {
        int64_t t = atomic_load(&entry_log[i]);
        if (t < 0 || t >= n || seen[t])
            fail_msg("entry %d is tag %lld: the %d entered calls are not tags 0..%d", i,
                     (long long)t, n, n - 1);
        seen[t] = 1;
    }
}

/* A limit of `limit` is reached and never passed, and one caller's calls
 * start in the order made: whenever the test looks, the calls that have
 * entered are a prefix of the calls made. */
static void run_limit(unsigned limit, unsigned opt)
{
    reset();
    hive_t *h = test_engine(64 * MiB, limit + 2, NULL);
    hive_actor_t a = new_actor(h, &plain_class, opt);
    enum { N = 10 };
    hive_ref_t r[N];
    for (int i = 0; i < N; i++)
        r[i] = call(h, a, M_HOLD, i, HIVE_PRIO_NORMAL);
    for (int k = 0; k < N; k++) {
        int expect = k + (int)limit < N ? k + (int)limit : N;
        /* the k released ones have left, the next ones are in */
        WAIT_UNTIL(atomic_load(&entered) >= expect && atomic_load(&running[0]) <= expect - k,
                   DEADLINE_MS);
        settle();
        expect_entered_prefix(expect);
        assert_int_equal(atomic_load(&running[0]), expect - k);
        atomic_fetch_add(&released, 1);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(result(h, r[i]), i);
    assert_int_equal(atomic_load(&max_running[0]), (int)limit);
    assert_int_equal(atomic_load(&timeouts), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&finis), 1);
}

static void test_limit_one(void **state)
{
    (void)state;
    run_limit(1, 0);                     /* 0: the default */
    run_limit(1, 1);
}

static void test_limit_three(void **state)
{
    (void)state;
    run_limit(3, 3);
}

/* Groups: A (2 at once) and B (1) beside the default group (1); the groups
 * overlap each other, and each keeps its own limit. */
static const hive_concurrency_group_t groups[] = {
    { "A", 2, group_a_methods, 2 },
    { "B", 1, group_b_methods, 1 },
};
static const hive_actor_class_t grouped_class = {
    .name = "Grouped", .size = sizeof(state_t), .init = init_state, .fini = fini_state,
    .methods = methods, .nmethods = NMETHODS, .groups = groups, .ngroups = 2,
};

static void test_groups(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 6, NULL);
    hive_actor_t a = new_actor(h, &grouped_class, 0);
    enum { N = 9 };
    static const unsigned which[N] = { M_HOLD_A, M_HOLD_B, M_HOLD, M_HOLD_A, M_HOLD_A, M_HOLD_B,
                                       M_HOLD, M_HOLD_A, M_HOLD_B };
    hive_ref_t r[N];
    for (int i = 0; i < N; i++)
        r[i] = call(h, a, which[i], i, HIVE_PRIO_NORMAL);
    /* 2 of A + 1 of B + 1 of the default group: 4 at once */
    WAIT_UNTIL(atomic_load(&entered) >= 4, DEADLINE_MS);
    settle();
    assert_int_equal(atomic_load(&entered), 4);
    assert_int_equal(atomic_load(&running[0]), 1);
    assert_int_equal(atomic_load(&running[1]), 2);
    assert_int_equal(atomic_load(&running[2]), 1);
    /* release one at a time (entry order) until all are through */
    for (int k = 0; k < N; k++) {
        atomic_fetch_add(&released, 1);
        WAIT_UNTIL(atomic_load(&entered) - atomic_load(&total_running) >= k + 1, DEADLINE_MS);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(result(h, r[i]), i);
    assert_int_equal(atomic_load(&max_running[0]), 1);
    assert_int_equal(atomic_load(&max_running[1]), 2);
    assert_int_equal(atomic_load(&max_running[2]), 1);
    assert_int_equal(atomic_load(&max_total), 4);
    assert_int_equal(atomic_load(&timeouts), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Within a group a freed slot goes to the most urgent queued call, and one
 * caller's calls at one priority start in the order made. */
static void test_priorities_within_group(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 4, NULL);
    hive_actor_t a = new_actor(h, &grouped_class, 0);
    hive_ref_t hold[2] = { call(h, a, M_HOLD_A, 100, HIVE_PRIO_NORMAL),
                           call(h, a, M_HOLD_A, 101, HIVE_PRIO_NORMAL) };
    WAIT_UNTIL(atomic_load(&entered) >= 2, DEADLINE_MS);
    /* both slots of A are taken: these queue */
    static const int prio[] = { HIVE_PRIO_LOW, HIVE_PRIO_NORMAL, HIVE_PRIO_HIGH, HIVE_PRIO_LOW,
                                HIVE_PRIO_HIGH, HIVE_PRIO_NORMAL };
    static const int64_t expect[] = { 2, 4, 1, 5, 0, 3 };   /* HIGH, HIGH, NORMAL, NORMAL, LOW, LOW */
    hive_ref_t q[6];
    for (int i = 0; i < 6; i++)
        q[i] = call(h, a, M_HOLD_A, i, prio[i]);
    settle();
    assert_int_equal(atomic_load(&entered), 2);
    for (int k = 0; k < 6; k++) {
        atomic_fetch_add(&released, 1);  /* one slot frees: the next call takes it */
        WAIT_UNTIL(atomic_load(&entered) >= 3 + k, DEADLINE_MS);
        settle();
        assert_int_equal(atomic_load(&entered), 3 + k);
        assert_int_equal(atomic_load(&entry_log[2 + k]), expect[k]);
    }
    atomic_fetch_add(&released, 2);
    assert_int_equal(result(h, hold[0]), 100);
    assert_int_equal(result(h, hold[1]), 101);
    for (int i = 0; i < 6; i++)
        assert_int_equal(result(h, q[i]), i);
    assert_int_equal(atomic_load(&max_running[1]), 2);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Kill with calls running at once: queued calls fail at once, the running
 * ones finish with their results, fini runs after the last of them. */
static void test_kill_while_running(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 5, NULL);
    hive_actor_t a = new_actor(h, &plain_class, 3);
    hive_ref_t run[3], queued[4];
    for (int i = 0; i < 3; i++)
        run[i] = call(h, a, M_HOLD, i, HIVE_PRIO_NORMAL);
    WAIT_UNTIL(atomic_load(&entered) >= 3, DEADLINE_MS);
    for (int i = 0; i < 4; i++)
        queued[i] = call(h, a, M_QUICK, 10 + i, HIVE_PRIO_NORMAL);
    assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
    for (int i = 0; i < 4; i++)
        expect_fails(h, queued[i], HIVE_EDEAD);      /* while the three still run */
    assert_int_equal(atomic_load(&running[0]), 3);
    assert_int_equal(atomic_load(&finis), 0);
    hive_ref_t late;
    ASSERT_FAILS_WITH(hive_call(h, a, M_QUICK, NULL, 0, NULL, &late), HIVE_EDEAD, "dead");
    atomic_fetch_add(&released, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(result(h, run[i]), i);
    WAIT_UNTIL(atomic_load(&finis) == 1, DEADLINE_MS);
    assert_int_equal(atomic_load(&entered), 3);      /* no queued call ran */
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&finis), 1);
}

/* HIVE_RESTART with calls running: the rebuild waits for them, no call
 * starts meanwhile, and calls resume on the new state. */
static void test_restart_waits_for_running(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 5, NULL);
    hive_actor_opts_t o = { .max_concurrency = 3, .max_restarts = 1 };
    hive_actor_t a;
    assert_int_equal(hive_actor_new(h, &plain_class, NULL, 0, &o, &a), HIVE_OK);
    hive_ref_t run[2] = { call(h, a, M_HOLD, 0, HIVE_PRIO_NORMAL),
                          call(h, a, M_HOLD, 1, HIVE_PRIO_NORMAL) };
    WAIT_UNTIL(atomic_load(&entered) >= 2, DEADLINE_MS);
    expect_fails(h, call(h, a, M_RESTART, 0, HIVE_PRIO_NORMAL), HIVE_ETASK);
    hive_ref_t gen = call(h, a, M_GEN, 0, HIVE_PRIO_NORMAL);
    settle();
    assert_int_equal(atomic_load(&entered), 2);      /* the new call waits for the rebuild */
    hive_stats_t s;
    assert_int_equal(hive_stats(h, &s, sizeof s), HIVE_OK);
    assert_int_equal(s.actors_restarting, 1);        /* waiting to be rebuilt */
    assert_int_equal(atomic_load(&inits), 1);
    assert_int_equal(atomic_load(&finis), 0);        /* not while calls run on the state */
    atomic_fetch_add(&released, 2);
    assert_int_equal(result(h, run[0]), 0);
    assert_int_equal(result(h, run[1]), 1);
    assert_int_equal(result(h, gen), 2);             /* ran on the rebuilt state */
    assert_int_equal(atomic_load(&inits), 2);
    assert_int_equal(atomic_load(&finis), 1);
    assert_int_equal(hive_stats(h, &s, sizeof s), HIVE_OK);
    assert_int_equal(s.actors_restarting, 0);
    /* the one restart is spent: the next HIVE_RESTART kills it */
    expect_fails(h, call(h, a, M_RESTART, 0, HIVE_PRIO_NORMAL), HIVE_ETASK);
    WAIT_UNTIL(atomic_load(&finis) == 2, DEADLINE_MS);
    hive_ref_t late;
    ASSERT_FAILS_WITH(hive_call(h, a, M_QUICK, NULL, 0, NULL, &late), HIVE_EDEAD, "dead");
    assert_int_equal(hive_stats(h, &s, sizeof s), HIVE_OK);
    assert_int_equal(s.actors_restarting, 0);        /* the asked rebuild died with it */
    assert_int_equal(s.actors_alive, 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Killed while a HIVE_RESTART waits for running calls: no rebuild comes,
 * the last call out retires the actor, and hive_stats stops counting it as
 * restarting; hive_actor_top shows it restarting (with its queued call)
 * until the kill. */
static void test_kill_while_restart_waits(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 4, NULL);
    hive_actor_opts_t o = { .max_concurrency = 2, .max_restarts = 1 };
    hive_actor_t a;
    assert_int_equal(hive_actor_new(h, &plain_class, NULL, 0, &o, &a), HIVE_OK);
    hive_ref_t run = call(h, a, M_HOLD, 0, HIVE_PRIO_NORMAL);
    WAIT_UNTIL(atomic_load(&entered) >= 1, DEADLINE_MS);
    expect_fails(h, call(h, a, M_RESTART, 0, HIVE_PRIO_NORMAL), HIVE_ETASK);
    hive_ref_t queued = call(h, a, M_QUICK, 5, HIVE_PRIO_NORMAL);   /* waits for the rebuild */
    hive_stats_t s;
    /* the failed result comes a moment before the call asks for the rebuild */
    WAIT_UNTIL(hive_stats(h, &s, sizeof s) == HIVE_OK && s.actors_restarting == 1, DEADLINE_MS);
    hive_actor_info_t top[2];
    assert_int_equal(hive_actor_top(h, top, 2, sizeof top[0]), 1);
    assert_int_equal(top[0].id, a.id);
    assert_int_equal(top[0].state, HIVE_ACTOR_RESTARTING);
    assert_int_equal(top[0].mailbox, 1);
    assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
    expect_fails(h, queued, HIVE_EDEAD);
    atomic_fetch_add(&released, 1);
    assert_int_equal(result(h, run), 0);             /* the running call finishes */
    WAIT_UNTIL(atomic_load(&finis) == 1, DEADLINE_MS);   /* retired by the last call out */
    WAIT_UNTIL(hive_actor_top(h, top, 2, sizeof top[0]) == 0, DEADLINE_MS);
    assert_int_equal(hive_stats(h, &s, sizeof s), HIVE_OK);
    assert_int_equal(s.actors_restarting, 0);
    assert_int_equal(atomic_load(&inits), 1);        /* never rebuilt */
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Cancel: a queued call never runs, a running one sees hive_cancelled. */
static void test_cancel_with_concurrency(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 4, NULL);
    hive_actor_t a = new_actor(h, &plain_class, 2);
    hive_ref_t run[2] = { call(h, a, M_HOLD, 0, HIVE_PRIO_NORMAL),
                          call(h, a, M_HOLD, 1, HIVE_PRIO_NORMAL) };
    WAIT_UNTIL(atomic_load(&entered) >= 2, DEADLINE_MS);
    hive_ref_t queued = call(h, a, M_QUICK, 7, HIVE_PRIO_NORMAL);
    assert_int_equal(hive_cancel(h, queued), HIVE_OK);
    expect_fails(h, queued, HIVE_ECANCELED);
    assert_int_equal(hive_cancel(h, run[1]), HIVE_OK);   /* running: it sees hive_cancelled */
    expect_fails(h, run[1], HIVE_ECANCELED);
    atomic_fetch_add(&released, 2);      /* the two entered in either order: both tickets */
    assert_int_equal(result(h, run[0]), 0);
    assert_int_equal(result(h, call(h, a, M_QUICK, 8, HIVE_PRIO_NORMAL)), 8);
    assert_int_equal(atomic_load(&entered), 3);      /* the cancelled queued call never ran */
    assert_int_equal(atomic_load(&entry_log[2]), 8);
    assert_int_equal(atomic_load(&timeouts), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Shutdown with calls queued on a concurrent actor: every result is
 * decided, fini runs once, nothing leaks (ASan). */
static void test_shutdown_with_queued_concurrent_calls(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 2, NULL);
    hive_actor_t a = new_actor(h, &grouped_class, 4);
    WAIT_UNTIL(atomic_load(&inits) == 1, DEADLINE_MS);   /* built: fini is due at shutdown */
    for (int i = 0; i < 200; i++) {
        hive_ref_t r = call(h, a, i % 2 ? M_QUICK : M_QUICK_A, i, HIVE_PRIO_NORMAL);
        (void)r;                         /* the store frees it at shutdown */
    }
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&finis), 1);
}

static void test_bad_input(void **state)
{
    (void)state;
    reset();
    hive_t *h = test_engine(64 * MiB, 2, NULL);
    hive_actor_t a;
    hive_actor_opts_t big = { .max_concurrency = HIVE_MAX_CONCURRENCY + 1 };
    ASSERT_FAILS_WITH(hive_actor_new(h, &plain_class, NULL, 0, &big, &a), HIVE_EINVAL,
                      "max_concurrency 65537 of class Conc is above HIVE_MAX_CONCURRENCY (65536)");

    hive_actor_class_t c = grouped_class;
    c.groups = NULL;
    ASSERT_FAILS_WITH(hive_actor_new(h, &c, NULL, 0, NULL, &a), HIVE_EINVAL,
                      "class Grouped lists 2 concurrency groups but groups is NULL");
    c = grouped_class;
    c.ngroups = HIVE_MAX_GROUPS + 1;
    ASSERT_FAILS_WITH(hive_actor_new(h, &c, NULL, 0, NULL, &a), HIVE_EINVAL,
                      "class Grouped has 65 concurrency groups, more than HIVE_MAX_GROUPS (64)");

    hive_concurrency_group_t g[2] = { groups[0], groups[1] };
    c = grouped_class;
    c.groups = g;
    g[1].name = NULL;
    ASSERT_FAILS_WITH(hive_actor_new(h, &c, NULL, 0, NULL, &a), HIVE_EINVAL,
                      "concurrency group 1 of class Grouped has no name");
    g[1] = groups[1];
    g[1].max_concurrency = 0;
    ASSERT_FAILS_WITH(hive_actor_new(h, &c, NULL, 0, NULL, &a), HIVE_EINVAL,
                      "concurrency group 1 (B) of class Grouped has max_concurrency 0, outside 1..65536");
    g[1].max_concurrency = HIVE_MAX_CONCURRENCY + 1;
    ASSERT_FAILS_WITH(hive_actor_new(h, &c, NULL, 0, NULL, &a), HIVE_EINVAL,
                      "has max_concurrency 65537, outside 1..65536");
    g[1] = groups[1];
    g[1].name = "A";
    ASSERT_FAILS_WITH(hive_actor_new(h, &c, NULL, 0, NULL, &a), HIVE_EINVAL,
                      "concurrency groups 0 and 1 of class Grouped are both named \"A\"");
    g[1] = groups[1];
    g[1].methods = NULL;
    ASSERT_FAILS_WITH(hive_actor_new(h, &c, NULL, 0, NULL, &a), HIVE_EINVAL,
                      "concurrency group 1 (B) of class Grouped lists 1 methods but methods is NULL");
    static const unsigned out_of_range[] = { NMETHODS };
    g[1] = groups[1];
    g[1].methods = out_of_range;
    ASSERT_FAILS_WITH(hive_actor_new(h, &c, NULL, 0, NULL, &a), HIVE_EINVAL,
                      "concurrency group 1 (B) of class Grouped lists method 7, but the class has 7");
    static const unsigned twice[] = { M_HOLD_A };
    g[1] = groups[1];
    g[1].methods = twice;
    ASSERT_FAILS_WITH(hive_actor_new(h, &c, NULL, 0, NULL, &a), HIVE_EINVAL,
                      "method 1 of class Grouped is in two concurrency groups, A and B");
    /* nothing was built by the refused ones */
    assert_int_equal(atomic_load(&inits), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limit_one),
        cmocka_unit_test(test_limit_three),
        cmocka_unit_test(test_groups),
        cmocka_unit_test(test_priorities_within_group),
        cmocka_unit_test(test_kill_while_running),
        cmocka_unit_test(test_restart_waits_for_running),
        cmocka_unit_test(test_kill_while_restart_waits),
        cmocka_unit_test(test_cancel_with_concurrency),
        cmocka_unit_test(test_shutdown_with_queued_concurrent_calls),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests_name("actor_concurrency", tests, NULL, NULL);
}
