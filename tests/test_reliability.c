/* test_reliability.c - regression tests for the defects of issue 9, one
 * test (or more) per defect, each of which failed (hung, crashed or gave a
 * wrong code) on the code before the fix:
 *
 *   1  shutdown while a task / an actor call / a constructor waits forever
 *   2  shutdown while user threads sleep in hive_get / hive_wait
 *   3  failure of a long dependency chain (cancel, task failure, shutdown)
 *   4  recursive submit-and-get 10,000 deep on 1 and 2 workers
 *   6  hive_seal on a task's or a call's pending result
 *   7  a HIGH call while the actor's turn waits in a lower lane
 *   8  actor churn through a small store; dead handles say HIVE_EDEAD
 *   9  cancel / kill of an actor stuck on a call's unsealed argument
 *  10  a worker waiting inside a job took a call on that job's result
 *      and waited for it above the job (found by fuzz_api)
 *
 * A watchdog turns a hang into a failure with a message: a test that hangs
 * must never wedge CI. */
#include "testutil.h"

#include <pthread.h>
#include <unistd.h>

#define MiB (1024u * 1024u)
#define DEADLINE_NS ((int64_t)20 * 1000000000)

/* ------------------------------------------------------------ watchdog */

static _Atomic uint64_t watchdog_until;
static const char *_Atomic watchdog_what;

static void *watchdog_main(void *arg)
{
    (void)arg;
    for (;;) {
        test_sleep_ms(200);
        uint64_t until = atomic_load(&watchdog_until);
        if (until != 0 && test_now_ns() > until) {
            fprintf(stderr, "watchdog: %s hung\n", atomic_load(&watchdog_what));
            _exit(3);
        }
    }
    return NULL;
}

static void arm(const char *what, unsigned seconds)
{
    atomic_store(&watchdog_what, what);
    atomic_store(&watchdog_until, test_now_ns() + (uint64_t)seconds * 1000000000u * TEST_SCALE);
}

static void disarm(void)
{
    atomic_store(&watchdog_until, 0);
}

static int start_watchdog(void **state)
{
    (void)state;
    static pthread_t t;
    static bool started;
    if (!started) {
        started = true;
        pthread_create(&t, NULL, watchdog_main, NULL);
        pthread_detach(t);
    }
    return 0;
}

/* ------------------------------------------------------------ helpers */

/* A task whose argument is passed as inline bytes: the ref of an object
 * it should wait for (so that the task itself runs at once). */
static int get_inline_ref_forever(hive_ctx_t *ctx)
{
    hive_ref_t r;
    memcpy(&r, hive_arg(ctx, 0, NULL), sizeof r);
    const void *p;
    int rc = hive_get(hive_engine(ctx), r, HIVE_FOREVER, &p, NULL);
    return rc == HIVE_ESHUTDOWN ? 0 : 1;
}

static int wait_inline_ref_forever(hive_ctx_t *ctx)
{
    hive_ref_t r;
    memcpy(&r, hive_arg(ctx, 0, NULL), sizeof r);
    int rc = hive_wait(hive_engine(ctx), &r, 1, 1, HIVE_FOREVER, NULL);
    return rc == HIVE_ESHUTDOWN ? 0 : 1;
}

static int nop_method(void *self, hive_ctx_t *ctx)
{
    (void)self;
    (void)ctx;
    return 0;
}

static const hive_method_t nop_methods[] = { { "nop", nop_method, 0 } };
static const hive_actor_class_t nop_class = { .name = "Nop", .size = 64,
                                              .methods = nop_methods, .nmethods = 1 };

/* ------------------------------------------------------------ defect 1 */

static void test_shutdown_task_waiting_forever(void **state)
{
    (void)state;
    for (int variant = 0; variant < 2; variant++) {
        arm("shutdown with a task in hive_get/hive_wait FOREVER", 30);
        hive_t *h = test_engine(16 * MiB, 2, NULL);
        void *d;
        hive_ref_t never;
        assert_int_equal(hive_create(h, 8, &d, &never), HIVE_OK);
        hive_ref_t r;
        hive_arg_t a = HIVE_VAL(never);
        assert_int_equal(hive_submit(h, variant ? wait_inline_ref_forever : get_inline_ref_forever,
                                     &a, 1, NULL, &r), HIVE_OK);
        test_sleep_ms(20);                     /* let it start waiting (either way must work) */
        assert_int_equal(hive_shutdown(h), HIVE_OK);
        disarm();
    }
}

static void test_shutdown_actor_call_arg_never_sealed(void **state)
{
    (void)state;
    arm("shutdown with an actor call waiting for its argument", 30);
    hive_t *h = test_engine(16 * MiB, 2, NULL);
    hive_actor_t a;
    assert_int_equal(hive_actor_new(h, &nop_class, NULL, 0, NULL, &a), HIVE_OK);
    void *d;
    hive_ref_t never, r1, r2;
    assert_int_equal(hive_create(h, 8, &d, &never), HIVE_OK);
    hive_arg_t arg = HIVE_REF(never);
    assert_int_equal(hive_call(h, a, 0, &arg, 1, NULL, &r1), HIVE_OK);
    assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &r2), HIVE_OK);
    test_sleep_ms(20);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    disarm();
}

static void test_shutdown_actor_ctor_arg_never_sealed(void **state)
{
    (void)state;
    arm("shutdown with a constructor waiting for its argument", 30);
    hive_t *h = test_engine(16 * MiB, 1, NULL);
    void *d;
    hive_ref_t never, r;
    assert_int_equal(hive_create(h, 8, &d, &never), HIVE_OK);
    hive_arg_t arg = HIVE_REF(never);
    hive_actor_t a;
    assert_int_equal(hive_actor_new(h, &nop_class, &arg, 1, NULL, &a), HIVE_OK);
    assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &r), HIVE_OK);
    test_sleep_ms(20);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    disarm();
}

/* ------------------------------------------------------------ defect 2 */

struct waiter {
    hive_t     *h;
    hive_ref_t  ref;
    int         use_wait;
    _Atomic int entered;
    int         rc;
};

static void *user_waiter(void *arg)
{
    struct waiter *w = arg;
    atomic_store(&w->entered, 1);
    if (w->use_wait) {
        w->rc = hive_wait(w->h, &w->ref, 1, 1, HIVE_FOREVER, NULL);
    } else {
        const void *p;
        w->rc = hive_get(w->h, w->ref, HIVE_FOREVER, &p, NULL);
    }
    return NULL;
}

static void test_shutdown_wakes_user_waiters(void **state)
{
    (void)state;
    arm("shutdown with user threads asleep in hive_get/hive_wait", 30);
    hive_t *h = test_engine(16 * MiB, 2, NULL);
    enum { N = 4 };
    struct waiter w[N];
    pthread_t t[N];
    hive_ref_t never[N];
    for (int i = 0; i < N; i++) {
        void *d;
        assert_int_equal(hive_create(h, 8, &d, &never[i]), HIVE_OK);
        w[i] = (struct waiter){ .h = h, .ref = never[i], .use_wait = i & 1, .rc = 1 };
        assert_int_equal(pthread_create(&t[i], NULL, user_waiter, &w[i]), 0);
    }
    for (int i = 0; i < N; i++)
        WAIT_UNTIL(atomic_load(&w[i].entered), 10000);
    test_sleep_ms(50);                         /* past the spin, into the futex sleep */
    /* also one task asleep in get on a worker */
    hive_ref_t r;
    hive_arg_t inl = HIVE_VAL(never[1]);
    assert_int_equal(hive_submit(h, get_inline_ref_forever, &inl, 1, NULL, &r), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        /* a get fails; a wait either says so or counts the object ready
         * (failed with HIVE_ESHUTDOWN by the sweep) */
        if (!(w[i].rc == HIVE_ESHUTDOWN || (w[i].use_wait && w[i].rc == 1)))
            fail_msg("waiter %d (%s) returned %d", i, w[i].use_wait ? "wait" : "get", w[i].rc);
    }
    disarm();
}

/* ------------------------------------------------------------ defect 3 */

static int pass_on(hive_ctx_t *ctx)
{
    size_t n;
    const void *p = hive_arg(ctx, 0, &n);
    return hive_return(ctx, p, n);
}

static int fail_now(hive_ctx_t *ctx)
{
    (void)ctx;
    return 1;
}

/* A chain of n tasks, each taking the previous result by ref; the head
 * takes `head_arg`. Returns the refs (the caller releases them). */
static hive_ref_t *build_chain(hive_t *h, hive_fn head_fn, hive_ref_t head_arg, size_t n)
{
    hive_ref_t *refs = malloc(n * sizeof *refs);
    assert_non_null(refs);
    hive_arg_t a = HIVE_REF(head_arg);
    assert_int_equal(hive_submit(h, head_fn, &a, 1, NULL, &refs[0]), HIVE_OK);
    for (size_t i = 1; i < n; i++) {
        a = HIVE_REF(refs[i - 1]);
        int rc = hive_submit(h, pass_on, &a, 1, NULL, &refs[i]);
        if (rc != HIVE_OK)
            fail_msg("submit %zu of the chain: %s", i, hive_last_error());
    }
    return refs;
}

static size_t chain_len(void)
{
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    return 200000;
#else
    return 1000000;
#endif
}

static void test_long_chain_fails_iteratively(void **state)
{
    (void)state;
    size_t n = chain_len();
    for (int how = 0; how < 3; how++) {      /* cancel the head, fail the head, shut down */
        arm("a long failing chain", 120);
        hive_t *h = test_engine((size_t)1 << 30, 2, NULL);
        void *d;
        hive_ref_t gate;
        assert_int_equal(hive_create(h, 8, &d, &gate), HIVE_OK);
        hive_ref_t *refs = build_chain(h, how == 1 ? fail_now : pass_on, gate, n);
        if (how == 2) {                      /* the shutdown sweep fails the whole chain */
            assert_int_equal(hive_shutdown(h), HIVE_OK);
            free(refs);
            disarm();
            continue;
        }
        if (how == 0)
            assert_int_equal(hive_cancel(h, refs[0]), HIVE_OK);
        else
            assert_int_equal(hive_seal(h, gate), HIVE_OK);   /* the head runs and fails */
        const void *p;
        int want_head = how == 0 ? HIVE_ECANCELED : HIVE_ETASK;
        assert_int_equal(hive_get(h, refs[0], DEADLINE_NS, &p, NULL), want_head);
        assert_int_equal(hive_get(h, refs[n - 1], DEADLINE_NS, &p, NULL), HIVE_ETASK);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(hive_release(h, refs[i]), HIVE_OK);
        assert_int_equal(hive_release(h, gate), HIVE_OK);
        free(refs);
        assert_int_equal(hive_shutdown(h), HIVE_OK);
        disarm();
    }
}

/* ------------------------------------------------------------ defect 4 */

/* recurse's children are awaited with hive_wait (then read at once) rather
 * than hive_get: the same nesting through the other waiting call */
static bool recurse_by_wait;

static int recurse(hive_ctx_t *ctx)
{
    int64_t depth;
    memcpy(&depth, hive_arg(ctx, 0, NULL), sizeof depth);
    if (depth == 0)
        return hive_return(ctx, &depth, sizeof depth);
    int64_t next = depth - 1;
    hive_arg_t a = HIVE_VAL(next);
    hive_ref_t child;
    if (hive_submit(hive_engine(ctx), recurse, &a, 1, NULL, &child) != HIVE_OK)
        return 1;
    const void *p;
    int rc = HIVE_OK;
    if (recurse_by_wait) {
        unsigned char ready = 0;
        rc = hive_wait(hive_engine(ctx), &child, 1, 1, HIVE_FOREVER, &ready);
        rc = rc == 1 && ready ? HIVE_OK : HIVE_ESTATE;
    }
    if (rc == HIVE_OK)
        rc = hive_get(hive_engine(ctx), child, recurse_by_wait ? 0 : HIVE_FOREVER, &p, NULL);
    int64_t got = rc == HIVE_OK ? *(const int64_t *)p + 1 : -1;
    hive_release(hive_engine(ctx), child);
    return rc == HIVE_OK ? hive_return(ctx, &got, sizeof got) : 1;
}

static void recursive_10000_deep(bool by_wait)
{
    recurse_by_wait = by_wait;
    size_t reserve = hive__stack_reserve;
    /* workers = 1 and 2 with the real stacks, then with stacks that fill
     * after a few hundred levels, so that spare threads take over */
#if defined(__SANITIZE_THREAD__)
    /* TSan keeps whole call stacks (at most 65,536 frames) and its own
     * per-thread state for every spare: 10,000 levels exceed its runtime's
     * limits, so TSan checks the same paths 1,000 deep */
    const int64_t depth = 1000;
#else
    const int64_t depth = 10000;
#endif
    unsigned first = 0;
    for (unsigned run = first; run < 4; run++) {
        unsigned workers = 1 + run % 2;
#if defined(__SANITIZE_THREAD__)
        hive__stack_reserve = run < 2 ? reserve : (size_t)7 << 20;     /* nest in 1 of 8 MiB */
#else
        hive__stack_reserve = run < 2 ? reserve : (size_t)1 << 40;     /* nest in 256 KiB */
#endif
        arm("recursive submit-and-get 10,000 deep", 120);
        hive_t *h = test_engine(256 * MiB, workers, NULL);
        hive_arg_t a = HIVE_VAL(depth);
        hive_ref_t r;
        assert_int_equal(hive_submit(h, recurse, &a, 1, NULL, &r), HIVE_OK);
        const void *p;
        test_get_ok(h, r, HIVE_FOREVER, &p, NULL);
        assert_int_equal(*(const int64_t *)p, depth);
        assert_int_equal(hive_release(h, r), HIVE_OK);
        uint64_t spares = 0;
        for (unsigned i = 0; i < workers; i++)
            spares += atomic_load(&h->sched.w[i].spares);
        if (run >= 2 && spares == 0)
            fail_msg("no spare thread was used with a small nesting stack");
        assert_int_equal(hive_shutdown(h), HIVE_OK);
        disarm();
    }
    hive__stack_reserve = reserve;
}

static void test_recursive_get_10000_deep(void **state)
{
    (void)state;
    recursive_10000_deep(false);
}

/* The same chain through hive_wait: a wait nested past the stack's reserve
 * hands its worker to a spare with its own completion test (wait_set_done). */
static void test_recursive_wait_10000_deep(void **state)
{
    (void)state;
    recursive_10000_deep(true);
}

/* ------------------------------------------------------------ defect 6 */

static _Atomic int gate_open;

static int wait_gate(hive_ctx_t *ctx)
{
    uint64_t deadline = test_now_ns() + (uint64_t)DEADLINE_NS;
    while (!atomic_load(&gate_open) && test_now_ns() < deadline)
        test_sleep_ms(1);
    uint64_t v = 42;
    return hive_return(ctx, &v, sizeof v);
}

static int gate_method(void *self, hive_ctx_t *ctx)
{
    (void)self;
    return wait_gate(ctx);
}

static void test_seal_refuses_task_results(void **state)
{
    (void)state;
    hive_t *h = test_engine(16 * MiB, 2, NULL);
    atomic_store(&gate_open, 0);
    hive_ref_t r;
    assert_int_equal(hive_submit(h, wait_gate, NULL, 0, NULL, &r), HIVE_OK);
    ASSERT_FAILS_WITH(hive_seal(h, r), HIVE_ESTATE, "only its task seals it");
    static const hive_method_t m[] = { { "gate", gate_method, 0 } };
    static const hive_actor_class_t cls = { .name = "Gate", .methods = m, .nmethods = 1 };
    hive_actor_t a;
    hive_ref_t c;
    assert_int_equal(hive_actor_new(h, &cls, NULL, 0, NULL, &a), HIVE_OK);
    assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &c), HIVE_OK);
    ASSERT_FAILS_WITH(hive_seal(h, c), HIVE_ESTATE, "only its task seals it");
    atomic_store(&gate_open, 1);
    const void *p;
    size_t n;
    test_get_ok(h, r, DEADLINE_NS, &p, &n);
    assert_int_equal(n, 8);
    assert_int_equal(*(const uint64_t *)p, 42);
    test_get_ok(h, c, DEADLINE_NS, &p, &n);
    assert_int_equal(*(const uint64_t *)p, 42);
    ASSERT_FAILS_WITH(hive_seal(h, r), HIVE_ESTATE, "only its task seals it");
    hive_release(h, r);
    hive_release(h, c);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------------ defect 7 */

static _Atomic int order_counter;
static _Atomic int high_ran_at;
static _Atomic int blocker_running;

static int blocker(hive_ctx_t *ctx)
{
    (void)ctx;
    atomic_store(&blocker_running, 1);
    uint64_t deadline = test_now_ns() + (uint64_t)DEADLINE_NS;
    while (!atomic_load(&gate_open) && test_now_ns() < deadline)
        test_sleep_ms(1);
    return 0;
}

static int count_task(hive_ctx_t *ctx)
{
    (void)ctx;
    atomic_fetch_add(&order_counter, 1);
    return 0;
}

static int high_method(void *self, hive_ctx_t *ctx)
{
    (void)self;
    (void)ctx;
    atomic_store(&high_ran_at, atomic_load(&order_counter));
    return 0;
}

static void test_high_call_overtakes_low_turn(void **state)
{
    (void)state;
    hive_t *h = test_engine(16 * MiB, 1, NULL);
    static const hive_method_t m[] = { { "low", nop_method, HIVE_PRIO_LOW },
                                       { "high", high_method, HIVE_PRIO_HIGH } };
    static const hive_actor_class_t cls = { .name = "Prio", .methods = m, .nmethods = 2 };
    hive_actor_t a;
    assert_int_equal(hive_actor_new(h, &cls, NULL, 0, NULL, &a), HIVE_OK);
    hive_ref_t warm;
    assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &warm), HIVE_OK);   /* constructed */
    const void *p;
    test_get_ok(h, warm, DEADLINE_NS, &p, NULL);
    hive_release(h, warm);

    atomic_store(&gate_open, 0);
    atomic_store(&blocker_running, 0);
    atomic_store(&order_counter, 0);
    atomic_store(&high_ran_at, -1);
    hive_ref_t b, low, high, tasks[100];
    assert_int_equal(hive_submit(h, blocker, NULL, 0, NULL, &b), HIVE_OK);
    WAIT_UNTIL(atomic_load(&blocker_running), 10000);
    assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &low), HIVE_OK);   /* turn queued LOW */
    for (int i = 0; i < 100; i++)
        assert_int_equal(hive_submit(h, count_task, NULL, 0, NULL, &tasks[i]), HIVE_OK);
    assert_int_equal(hive_call(h, a, 1, NULL, 0, NULL, &high), HIVE_OK);
    atomic_store(&gate_open, 1);
    test_get_ok(h, high, DEADLINE_NS, &p, NULL);
    for (int i = 0; i < 100; i++) {
        test_get_ok(h, tasks[i], DEADLINE_NS, &p, NULL);
        hive_release(h, tasks[i]);
    }
    test_get_ok(h, low, DEADLINE_NS, &p, NULL);
    /* the HIGH call ran right after the blocker, before any NORMAL task */
    assert_int_equal(atomic_load(&high_ran_at), 0);
    hive_release(h, b);
    hive_release(h, low);
    hive_release(h, high);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------------ defect 8 */

static int touch_state(void *self, hive_ctx_t *ctx)
{
    memset(self, 0x5a, 4096);
    (void)ctx;
    return 0;
}

static void test_actor_churn_small_store(void **state)
{
    (void)state;
    arm("actor churn", 300);
    hive_t *h = test_engine(1 * MiB, 2, NULL);
    static const hive_method_t m[] = { { "touch", touch_state, 0 } };
    static const hive_actor_class_t cls = { .name = "Churn", .size = 4096, .methods = m,
                                            .nmethods = 1 };
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    const int n = 20000;
#else
    const int n = 1000000;
#endif
    hive_actor_t first = { 0 }, last = { 0 };
    for (int i = 0; i < n; i++) {
        hive_actor_t a;
        int rc = hive_actor_new(h, &cls, NULL, 0, NULL, &a);
        if (rc != HIVE_OK)
            fail_msg("actor %d of %d: %s", i, n, hive_last_error());
        hive_ref_t r;
        assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &r), HIVE_OK);
        const void *p;
        test_get_ok(h, r, DEADLINE_NS, &p, NULL);
        assert_int_equal(hive_release(h, r), HIVE_OK);
        assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
        if (i == 0)
            first = a;
        last = a;
    }
    /* dead handles keep answering HIVE_EDEAD, however long ago they died */
    hive_ref_t r;
    ASSERT_FAILS_WITH(hive_call(h, first, 0, NULL, 0, NULL, &r), HIVE_EDEAD, "dead");
    ASSERT_FAILS_WITH(hive_actor_kill(h, first), HIVE_EDEAD, "dead already");
    WAIT_UNTIL((hive__store_drain(h), hive_call(h, last, 0, NULL, 0, NULL, &r) == HIVE_EDEAD), 10000);
    /* and every state byte came back */
    hive_store_stats_t st;
    WAIT_UNTIL((hive__store_drain(h), hive_store_stats(h, &st), st.used == 0 && st.objects == 0),
               10000);
    /* an id of no actor of this engine is not "dead" */
    ASSERT_FAILS_WITH(hive_call(h, (hive_actor_t){ first.id + ((uint64_t)1 << 39) }, 0, NULL, 0,
                                NULL, &r), HIVE_ENOENT, "does not exist");
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    disarm();
}

/* A dead named actor's name can be taken again; lookup finds the new one. */
static void test_dead_actor_name_reused(void **state)
{
    (void)state;
    hive_t *h = test_engine(16 * MiB, 1, NULL);
    hive_actor_opts_t o = { .name = "learner" };
    hive_actor_t a, b, c;
    assert_int_equal(hive_actor_new(h, &nop_class, NULL, 0, &o, &a), HIVE_OK);
    ASSERT_FAILS_WITH(hive_actor_new(h, &nop_class, NULL, 0, &o, &b), HIVE_EINVAL, "taken");
    assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
    assert_int_equal(hive_actor_lookup(h, "learner", &c), HIVE_OK);
    assert_int_equal(c.id, a.id);                 /* dead, still found */
    assert_int_equal(hive_actor_new(h, &nop_class, NULL, 0, &o, &b), HIVE_OK);
    assert_int_equal(hive_actor_lookup(h, "learner", &c), HIVE_OK);
    assert_int_equal(c.id, b.id);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------------ defect 9 */

static void cancel_and_kill_free_stuck_actor(unsigned max_concurrency)
{
    hive_t *h = test_engine(16 * MiB, 2, NULL);
    hive_actor_opts_t o = { .max_concurrency = max_concurrency };
    hive_actor_t a;
    assert_int_equal(hive_actor_new(h, &nop_class, NULL, 0, &o, &a), HIVE_OK);
    void *d;
    hive_ref_t never, stuck, next;
    assert_int_equal(hive_create(h, 8, &d, &never), HIVE_OK);
    hive_arg_t arg = HIVE_REF(never);
    /* cancel lets the actor move on */
    assert_int_equal(hive_call(h, a, 0, &arg, 1, NULL, &stuck), HIVE_OK);
    assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &next), HIVE_OK);
    test_sleep_ms(10);
    assert_int_equal(hive_cancel(h, stuck), HIVE_OK);
    const void *p;
    assert_int_equal(hive_get(h, stuck, DEADLINE_NS, &p, NULL), HIVE_ECANCELED);
    test_get_ok(h, next, DEADLINE_NS, &p, NULL);
    hive_release(h, stuck);
    hive_release(h, next);
    /* kill fails the waiting call and the queued ones at once */
    hive_ref_t q[3];
    assert_int_equal(hive_call(h, a, 0, &arg, 1, NULL, &stuck), HIVE_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &q[i]), HIVE_OK);
    /* a concurrent actor runs them beside the stuck one (waited for here,
     * not guessed with a sleep: a loaded machine may take long to run them);
     * a sequential one keeps them queued behind it */
    for (int i = 0; max_concurrency > 1 && i < 3; i++)
        assert_int_equal(hive_get(h, q[i], DEADLINE_NS, &p, NULL), HIVE_OK);
    test_sleep_ms(10);                   /* the stuck call parked, most likely: either way */
    assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
    assert_int_equal(hive_get(h, stuck, DEADLINE_NS, &p, NULL), HIVE_EDEAD);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(hive_get(h, q[i], DEADLINE_NS, &p, NULL),
                         max_concurrency > 1 ? HIVE_OK : HIVE_EDEAD);
        hive_release(h, q[i]);
    }
    hive_release(h, stuck);
    /* a constructor stuck on its argument: kill ends it too */
    hive_actor_t b;
    assert_int_equal(hive_actor_new(h, &nop_class, &arg, 1, &o, &b), HIVE_OK);
    assert_int_equal(hive_call(h, b, 0, NULL, 0, NULL, &next), HIVE_OK);
    test_sleep_ms(10);
    assert_int_equal(hive_actor_kill(h, b), HIVE_OK);
    assert_int_equal(hive_get(h, next, DEADLINE_NS, &p, NULL), HIVE_EDEAD);
    hive_release(h, next);
    hive_release(h, never);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_cancel_and_kill_free_stuck_actor(void **state)
{
    (void)state;
    arm("actor stuck on an unsealed argument", 60);
    cancel_and_kill_free_stuck_actor(0);        /* a turn parked on the argument */
    cancel_and_kill_free_stuck_actor(3);        /* a concurrent actor's call job parked */
    disarm();
}

/* ------------------------------------------------------------ defect 10 */

/* A worker waiting inside a job runs other jobs meanwhile. It once took an
 * actor call whose ref argument was the waiting job's own result and
 * waited for that argument right there, above the job on its stack: the
 * job could never resume, and the call never ran (found by fuzz_api: a
 * task that submits a child and waits for it, and a call given the task's
 * result). A nested worker now defers such a call; a worker that is not
 * inside another wait runs it. One worker, so the nesting is certain. */

static _Atomic int waiter_running;

static int wait_then_return(hive_ctx_t *ctx)
{
    hive_ref_t r;
    memcpy(&r, hive_arg(ctx, 0, NULL), sizeof r);
    atomic_store(&waiter_running, 1);
    const void *p;
    int rc = hive_get(hive_engine(ctx), r, HIVE_FOREVER, &p, NULL);
    return rc == HIVE_OK ? 0 : 1;
}

static void call_on_waiting_tasks_result(unsigned max_concurrency, bool as_ctor_arg)
{
    hive_t *h = test_engine(16 * MiB, 1, NULL);
    hive_actor_opts_t o = { .max_concurrency = max_concurrency };
    void *d;
    hive_ref_t gate, task, call;
    assert_int_equal(hive_create(h, 8, &d, &gate), HIVE_OK);
    atomic_store(&waiter_running, 0);
    hive_arg_t by_bytes = HIVE_BYTES(&gate, sizeof gate);
    assert_int_equal(hive_submit(h, wait_then_return, &by_bytes, 1, NULL, &task), HIVE_OK);
    while (!atomic_load(&waiter_running))
        test_sleep_ms(1);
    /* the only worker waits inside the task: whatever it runs now is nested */
    hive_arg_t on_task = HIVE_REF(task);
    hive_actor_t a;
    assert_int_equal(hive_actor_new(h, &nop_class, as_ctor_arg ? &on_task : NULL, as_ctor_arg,
                                    &o, &a), HIVE_OK);
    assert_int_equal(hive_call(h, a, 0, as_ctor_arg ? NULL : &on_task, !as_ctor_arg, NULL, &call),
                     HIVE_OK);
    test_sleep_ms(50);                   /* the waiting worker has met the call by now */
    assert_int_equal(hive_seal(h, gate), HIVE_OK);
    const void *p;
    test_get_ok(h, task, DEADLINE_NS, &p, NULL);
    test_get_ok(h, call, DEADLINE_NS, &p, NULL);
    hive_release(h, call);
    hive_release(h, task);
    hive_release(h, gate);
    assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_call_on_its_waiting_workers_result_parks(void **state)
{
    (void)state;
    arm("a call on the result of the job its worker waits in", 60);
    call_on_waiting_tasks_result(0, false);     /* a sequential actor's turn */
    call_on_waiting_tasks_result(2, false);     /* a concurrent actor's call job */
    call_on_waiting_tasks_result(0, true);      /* a constructor's argument */
    disarm();
}

/* ------------------------------------------------------------ defect 11 */

/* An actor whose next call waits for an argument once waited for it inside
 * its turn, helping: its worker ran other jobs above the turn. One of them,
 * a task waiting for a *later* call of the same actor, could never see that
 * call run - the turn below could not resume until the task returned - so
 * the argument's arrival changed nothing: a deadlock no user wrote (a user
 * thread blocking in the task's place would have been released). The turn
 * now parks and frees the worker. One worker, so the nesting is certain;
 * as a constructor's argument too, and with a cancel of the parked call. */

static int wait_for_ref_arg_bytes(hive_ctx_t *ctx)
{
    hive_ref_t r;
    memcpy(&r, hive_arg(ctx, 0, NULL), sizeof r);
    const void *p;
    return hive_get(hive_engine(ctx), r, HIVE_FOREVER, &p, NULL) == HIVE_OK ? 0 : 1;
}

static void task_waits_for_call_behind_parked_one(bool as_ctor_arg, bool cancel_first,
                                                  unsigned max_concurrency)
{
    hive_t *h = test_engine(16 * MiB, 1, NULL);
    hive_actor_opts_t o = { .max_concurrency = max_concurrency };
    void *d;
    hive_ref_t gate, first, later, task;
    assert_int_equal(hive_create(h, 8, &d, &gate), HIVE_OK);
    hive_arg_t on_gate = HIVE_REF(gate);
    hive_actor_t a;
    assert_int_equal(hive_actor_new(h, &nop_class, as_ctor_arg ? &on_gate : NULL, as_ctor_arg,
                                    &o, &a), HIVE_OK);
    assert_int_equal(hive_call(h, a, 0, as_ctor_arg ? NULL : &on_gate, !as_ctor_arg, NULL, &first),
                     HIVE_OK);
    assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &later), HIVE_OK);
    test_sleep_ms(20);                   /* the actor's turn has met the pending argument */
    hive_arg_t by_bytes = HIVE_BYTES(&later, sizeof later);
    assert_int_equal(hive_submit(h, wait_for_ref_arg_bytes, &by_bytes, 1, NULL, &task), HIVE_OK);
    test_sleep_ms(20);                   /* the only worker runs the task, which waits */
    const void *p;
    if (cancel_first && !as_ctor_arg) {
        /* the cancel alone lets the actor move on to `later` */
        assert_int_equal(hive_cancel(h, first), HIVE_OK);
        assert_int_equal(hive_get(h, first, DEADLINE_NS, &p, NULL), HIVE_ECANCELED);
    } else {
        assert_int_equal(hive_seal(h, gate), HIVE_OK);
        test_get_ok(h, first, DEADLINE_NS, &p, NULL);
    }
    test_get_ok(h, later, DEADLINE_NS, &p, NULL);
    test_get_ok(h, task, DEADLINE_NS, &p, NULL);
    hive_release(h, task);
    hive_release(h, later);
    hive_release(h, first);
    hive_release(h, gate);
    assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_parked_actor_frees_its_worker(void **state)
{
    (void)state;
    arm("a task waiting for a call queued behind a call waiting for its argument", 60);
    for (unsigned conc = 0; conc <= 2; conc += 2) {   /* sequential, then concurrent */
        task_waits_for_call_behind_parked_one(false, false, conc);
        task_waits_for_call_behind_parked_one(false, true, conc);
        task_waits_for_call_behind_parked_one(true, false, conc);
    }
    disarm();
}

/* The fuzzer's hang behind defect 11: a worker waiting inside a turn (the
 * constructor's argument) helped, took another actor's token, whose call
 * also waited for an argument; nested, it was re-queued in its lane, taken
 * again, and so on, while a LOW task submitted meanwhile never ran. Now
 * nothing waits inside a turn: the LOW task runs while both actors wait. */
static void test_low_task_runs_while_actors_wait(void **state)
{
    (void)state;
    arm("a LOW task while actors wait for arguments", 60);
    hive_t *h = test_engine(16 * MiB, 1, NULL);
    void *d;
    hive_ref_t gate, call[2], low;
    assert_int_equal(hive_create(h, 8, &d, &gate), HIVE_OK);
    hive_arg_t on_gate = HIVE_REF(gate);
    hive_actor_t a, b;
    hive_actor_opts_t conc = { .max_concurrency = 2 };
    assert_int_equal(hive_actor_new(h, &nop_class, &on_gate, 1, NULL, &a), HIVE_OK);
    assert_int_equal(hive_actor_new(h, &nop_class, NULL, 0, &conc, &b), HIVE_OK);
    assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &call[0]), HIVE_OK);
    assert_int_equal(hive_call(h, b, 0, &on_gate, 1, NULL, &call[1]), HIVE_OK);
    test_sleep_ms(20);
    hive_opts_t lo = { .priority = HIVE_PRIO_LOW };
    assert_int_equal(hive_submit(h, count_task, NULL, 0, &lo, &low), HIVE_OK);
    const void *p;
    test_get_ok(h, low, DEADLINE_NS, &p, NULL);  /* the gate is still unsealed */
    assert_int_equal(hive_get(h, call[0], 0, &p, NULL), HIVE_ETIMEDOUT);
    assert_int_equal(hive_seal(h, gate), HIVE_OK);
    for (int i = 0; i < 2; i++) {
        test_get_ok(h, call[i], DEADLINE_NS, &p, NULL);
        hive_release(h, call[i]);
    }
    hive_release(h, low);
    hive_release(h, gate);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    disarm();
}

/* A parked actor at shutdown: the call and the calls behind it fail with
 * HIVE_ESHUTDOWN, nothing leaks (ASan), and a park hung on an object made
 * by a job that was still running when shutdown began fires too. */
static void test_shutdown_parked_actor(void **state)
{
    (void)state;
    arm("shutdown with actors parked on unsealed arguments", 60);
    for (int round = 0; round < 20; round++) {
        hive_t *h = test_engine(16 * MiB, 2, NULL);
        void *d;
        hive_ref_t gate, c[7];
        assert_int_equal(hive_create(h, 8, &d, &gate), HIVE_OK);
        hive_arg_t on_gate = HIVE_REF(gate);
        hive_actor_t a, b, k;
        hive_actor_opts_t conc = { .max_concurrency = 2 };
        assert_int_equal(hive_actor_new(h, &nop_class, NULL, 0, NULL, &a), HIVE_OK);
        assert_int_equal(hive_actor_new(h, &nop_class, &on_gate, 1, NULL, &b), HIVE_OK);
        assert_int_equal(hive_actor_new(h, &nop_class, NULL, 0, &conc, &k), HIVE_OK);
        assert_int_equal(hive_call(h, a, 0, &on_gate, 1, NULL, &c[0]), HIVE_OK);
        assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &c[1]), HIVE_OK);
        assert_int_equal(hive_call(h, b, 0, NULL, 0, NULL, &c[2]), HIVE_OK);
        assert_int_equal(hive_call(h, a, 0, &on_gate, 1, NULL, &c[3]), HIVE_OK);
        for (int i = 0; i < 3; i++)
            assert_int_equal(hive_call(h, k, 0, &on_gate, 1, NULL, &c[4 + i]), HIVE_OK);
        if (round & 1)
            test_sleep_ms(1);
        if (round % 4 == 2) {
            assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
            assert_int_equal(hive_actor_kill(h, k), HIVE_OK);
        }
        assert_int_equal(hive_shutdown(h), HIVE_OK);   /* the refs die with the engine */
    }
    disarm();
}

/* Shutdown with the store full of live objects (nobody released them):
 * the close frees every record while walking the table. */
static void test_shutdown_full_store_unreleased(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) {
        hive_t *h = test_engine(8 * MiB, 2, NULL);
        char buf[64] = { 0 };
        hive_ref_t r;
        int n = 0;
        while (hive_put(h, buf, sizeof buf, &r) == HIVE_OK)
            n++;
        assert_true(n > 1000);
        assert_int_equal(hive_shutdown(h), HIVE_OK);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shutdown_task_waiting_forever),
        cmocka_unit_test(test_shutdown_actor_call_arg_never_sealed),
        cmocka_unit_test(test_shutdown_actor_ctor_arg_never_sealed),
        cmocka_unit_test(test_shutdown_wakes_user_waiters),
        cmocka_unit_test(test_long_chain_fails_iteratively),
        cmocka_unit_test(test_recursive_get_10000_deep),
        cmocka_unit_test(test_recursive_wait_10000_deep),
        cmocka_unit_test(test_seal_refuses_task_results),
        cmocka_unit_test(test_high_call_overtakes_low_turn),
        cmocka_unit_test(test_actor_churn_small_store),
        cmocka_unit_test(test_dead_actor_name_reused),
        cmocka_unit_test(test_cancel_and_kill_free_stuck_actor),
        cmocka_unit_test(test_shutdown_full_store_unreleased),
        cmocka_unit_test(test_call_on_its_waiting_workers_result_parks),
        cmocka_unit_test(test_parked_actor_frees_its_worker),
        cmocka_unit_test(test_shutdown_parked_actor),
        cmocka_unit_test(test_low_task_runs_while_actors_wait),
    };
    return cmocka_run_group_tests_name("reliability", tests, start_watchdog, NULL);
}
