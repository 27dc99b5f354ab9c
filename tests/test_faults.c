/* test_faults.c - fault injection sweep.
 *
 * A workload that touches every kind of allocation hive makes (init, put,
 * create/seal, submit with ref arguments, actor new/call, cells, replay,
 * worker-local values, waits on many refs, a large inline argument) runs
 * again and again with the Nth allocation, mapping or thread creation made
 * to fail (util/fault.h), N = 1, 2, 3, ... until a run makes fewer checks
 * than N. Each run checks that every call returns HIVE_OK or a documented
 * failure code with a sentence, that the engine (if it started) keeps
 * serving once the fault has passed, and that shutdown returns; ASan's
 * leak check at exit and its use-after-free checks cover the rest. */
#include "testutil.h"
#include "util/fault.h"

#define MiB (1024u * 1024u)
#define DEADLINE_NS ((int64_t)20 * 1000000000)

static int add_one(hive_ctx_t *ctx)
{
    uint64_t v = 0;
    size_t n;
    const void *p = hive_arg(ctx, 0, &n);
    if (p != NULL && n >= sizeof v)
        memcpy(&v, p, sizeof v);
    v++;
    return hive_return(ctx, &v, sizeof v);
}

static void *local_init(void *arg)
{
    (void)arg;
    return malloc(64);
}

static void local_fini(void *v, void *arg)
{
    (void)arg;
    free(v);
}

static hive_local_t key;

static int use_local(hive_ctx_t *ctx)
{
    return hive_local(ctx, key) != NULL ? 0 : 1;
}

static int inc(void *self, hive_ctx_t *ctx)
{
    uint64_t *n = self;
    ++*n;
    return hive_return(ctx, n, sizeof *n);
}

static const hive_method_t methods[] = { { "inc", inc, 0 } };
static const hive_actor_class_t counter = { .name = "Counter", .size = 64, .methods = methods,
                                            .nmethods = 1 };

static int bad_calls;
static int parks_failed;             /* calls failed for want of a park (printed) */

/* A call's code must be OK or a documented failure with a sentence. */
static bool ok(int rc, const char *what)
{
    if (rc == HIVE_OK || rc > 0)
        return true;
    bool documented = rc == HIVE_ENOMEM || rc == HIVE_EFULL || rc == HIVE_ETOPO ||
                      rc == HIVE_ETASK || rc == HIVE_EDEAD;
    const char *msg = hive_last_error();
    if (!documented || msg == NULL || msg[0] == '\0') {
        fprintf(stderr, "%s: undocumented %d (%s)\n", what, rc, msg ? msg : "(null)");
        bad_calls++;
    }
    return false;
}

static void release_if(hive_t *h, bool have, hive_ref_t r)
{
    if (have)
        assert_int_equal(hive_release(h, r), HIVE_OK);
}

/* Everything once; returns false if init failed. */
static bool workload(hive_t **out)
{
    hive_config_t cfg = { .workers = 2, .store_bytes = 16 * MiB, .no_pin = 1 };
    hive_t *h = NULL;
    if (!ok(hive_init(&cfg, &h), "hive_init"))
        return false;
    *out = h;
    const void *p;
    uint64_t x = 7;
    hive_ref_t a = { 0 }, b = { 0 }, t = { 0 }, c = { 0 }, cell = { 0 }, v = { 0 }, l = { 0 };
    bool ha = ok(hive_put(h, &x, sizeof x, &a), "hive_put");
    void *d;
    bool hb = ok(hive_create(h, 100000, &d, &b), "hive_create");   /* a large block */
    if (hb) {
        memset(d, 1, 100000);
        assert_int_equal(hive_seal(h, b), HIVE_OK);
    }
    if (ha) {
        hive_arg_t args[2] = { HIVE_REF(a), HIVE_VAL(x) };
        if (ok(hive_submit(h, add_one, args, 2, NULL, &t), "hive_submit")) {
            ok(hive_get(h, t, DEADLINE_NS, &p, NULL), "hive_get task");
            release_if(h, true, t);
        }
    }
    static char big[8192];                                    /* a malloc'd record */
    hive_arg_t bigarg = HIVE_BYTES(big, sizeof big);
    if (ok(hive_submit(h, add_one, &bigarg, 1, NULL, &t), "hive_submit big")) {
        ok(hive_get(h, t, DEADLINE_NS, &p, NULL), "hive_get big");
        release_if(h, true, t);
    }
    hive_actor_opts_t o = { .name = "counter" };
    hive_actor_t act;
    if (ok(hive_actor_new(h, &counter, NULL, 0, &o, &act), "hive_actor_new")) {
        if (ok(hive_call(h, act, 0, NULL, 0, NULL, &c), "hive_call")) {
            ok(hive_get(h, c, DEADLINE_NS, &p, NULL), "hive_get call");
            release_if(h, true, c);
        }
        /* a call whose ref argument is still pending when its turn comes:
         * the actor parks on it, and the park is one more allocation that
         * can fail (then the call fails, HIVE_ENOMEM: nothing waits in place) */
        void *pd;
        hive_ref_t pend;
        if (ok(hive_create(h, sizeof x, &pd, &pend), "hive_create pending")) {
            hive_arg_t parg = HIVE_REF(pend);
            if (ok(hive_call(h, act, 0, &parg, 1, NULL, &c), "hive_call pending argument")) {
                int rc = hive_get(h, c, 50000000, &p, NULL);   /* its turn parks or fails */
                parks_failed += rc == HIVE_ENOMEM;
                if (rc != HIVE_ETIMEDOUT)
                    ok(rc, "hive_get call before its argument");
                memcpy(pd, &x, sizeof x);
                assert_int_equal(hive_seal(h, pend), HIVE_OK);
                ok(hive_get(h, c, DEADLINE_NS, &p, NULL), "hive_get call after its argument");
                release_if(h, true, c);
            }
            release_if(h, true, pend);
        }
        ok(hive_actor_kill(h, act), "hive_actor_kill");
    }
    /* a concurrent actor behind a pool of one (its calls never overlap):
     * groups, the pool's tables, queued copies, the completion list */
    hive_actor_opts_t co = { .max_concurrency = 2 };
    hive_actor_t cact;
    hive_pool_t *pool;
    if (ok(hive_actor_new(h, &counter, NULL, 0, &co, &cact), "hive_actor_new concurrent")) {
        if (ok(hive_pool_new(h, &cact, 1, &pool), "hive_pool_new")) {
            for (int i = 0; i < 3; i++)
                ok(hive_pool_submit(pool, 0, NULL, 0), "hive_pool_submit");
            hive_ref_t pr;
            while (hive_pool_has_next(pool) == 1)
                if (ok(hive_pool_get_next(pool, DEADLINE_NS, &pr), "hive_pool_get_next"))
                    release_if(h, true, pr);
            assert_int_equal(hive_pool_free(pool), HIVE_OK);
        }
        ok(hive_actor_kill(h, cact), "hive_actor_kill concurrent");
    }
    if (ok(hive_cell_new(h, (hive_ref_t){ 0 }, &cell), "hive_cell_new")) {
        if (ha)
            ok(hive_cell_publish(h, cell, a), "hive_cell_publish");
        uint64_t seq;
        if (ha && ok(hive_cell_acquire(h, cell, &v, &seq), "hive_cell_acquire"))
            release_if(h, true, v);
        release_if(h, true, cell);
    }
    hive_replay_config_t rc = { .capacity = 256, .item_size = 16, .prioritized = 1, .alpha = 0.6,
                                .beta = 0.4, .seed = 3 };
    hive_replay_t *rb;
    if (ok(hive_replay_new(h, &rc, &rb), "hive_replay_new")) {
        char item[16] = { 0 };
        for (int i = 0; i < 8; i++)
            ok(hive_replay_push(rb, item), "hive_replay_push");
        char out[4 * 16];
        uint64_t keys[4], rng = 1;
        double w[4];
        ok(hive_replay_sample(rb, 4, &rng, out, keys, w, 0), "hive_replay_sample");
        assert_int_equal(hive_replay_free(rb), HIVE_OK);
    }
    hive_local_def_t def = { .init = local_init, .fini = local_fini };
    if (ok(hive_local_new(h, &def, &key), "hive_local_new") &&
        ok(hive_submit(h, use_local, NULL, 0, NULL, &l), "hive_submit local")) {
        ok(hive_get(h, l, DEADLINE_NS, &p, NULL), "hive_get local");
        release_if(h, true, l);
    }
    hive_ref_t many[100];
    int nmany = 0;
    for (; nmany < 100; nmany++)
        if (!ok(hive_put(h, &x, sizeof x, &many[nmany]), "hive_put many"))
            break;
    if (nmany > 64)
        ok(hive_wait(h, many, (size_t)nmany, (size_t)nmany, DEADLINE_NS, NULL), "hive_wait");
    for (int i = 0; i < nmany; i++)
        release_if(h, true, many[i]);
    release_if(h, ha, a);
    release_if(h, hb, b);
    return true;
}

/* After the fault: the engine still serves. */
static void still_serves(hive_t *h)
{
    uint64_t x = 41;
    hive_ref_t a, t;
    const void *p;
    assert_int_equal(hive_put(h, &x, sizeof x, &a), HIVE_OK);
    hive_arg_t arg = HIVE_REF(a);
    assert_int_equal(hive_submit(h, add_one, &arg, 1, NULL, &t), HIVE_OK);
    test_get_ok(h, t, DEADLINE_NS, &p, NULL);
    assert_int_equal(*(const uint64_t *)p, 42);
    assert_int_equal(hive_release(h, t), HIVE_OK);
    assert_int_equal(hive_release(h, a), HIVE_OK);
}

static void test_fault_sweep(void **state)
{
    (void)state;
    long n = 1, fired = 0;
    for (;; n++) {
        atomic_store(&hive__fault_checks, 0);
        atomic_store(&hive__fault_countdown, n);
        hive_t *h = NULL;
        bool up = workload(&h);
        long checks = atomic_load(&hive__fault_checks);
        bool hit = atomic_exchange(&hive__fault_countdown, 0) == 0 && checks >= n;
        fired += hit;
        if (up) {
            still_serves(h);
            assert_int_equal(hive_shutdown(h), HIVE_OK);
        }
        if (!hit)
            break;                     /* the workload makes fewer than n checks: all covered */
        if (n > 5000)
            fail_msg("the sweep did not end after %ld faults", n);
    }
    printf("fault sweep: %ld faults injected, one per run; %d undocumented results; %d calls "
           "failed for want of a park\n", fired, bad_calls, parks_failed);
    assert_true(fired > 10);
    assert_int_equal(bad_calls, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fault_sweep),
    };
    return cmocka_run_group_tests_name("faults", tests, NULL, NULL);
}
