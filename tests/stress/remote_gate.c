/*
 * stress/remote_gate.c - the gate of the scale-out layer's wait and idle
 * hooks (hive.c, remote.h), with a fake layer and no MPI.
 *
 * The engine's own threads call those hooks at times the layer cannot rule
 * out: idle workers poll through the idle hook while they spin, and a user
 * thread about to wait for a pending object calls the wait hook. So
 * hive__remote_set(h, NULL) must not return while any of them is inside a
 * hook, and none may enter one after it returned: the layer frees the
 * hooks' context right after (hive_mpi_detach).
 *
 * Rounds: install the fake table, make workers go idle (tasks) and user
 * threads wait (gets of a pending object with a short timeout), then remove
 * the table and mark the context dead at once. Every hook checks the mark
 * on entry and on its way out, after a short spin (a use after the free).
 * Also checked: one idle worker at a time holds the poll claim, and every
 * claim (BEGIN) ends with exactly one BUSY or PARK.
 *
 * Contract checked: no hook runs on a dead context, none is inside when the
 * removal returns, claims never overlap and always end, and both hooks are
 * called at all (the rounds reach them).
 */
#include "testutil.h"
#include "hive_impl.h"

#include <pthread.h>

#define ROUNDS  (400 / TEST_SCALE + 20)
#define WAITERS 3

typedef struct fake {
    _Atomic int  alive;      /* 0 once removed: the layer would have freed it */
    _Atomic int  inside;     /* threads inside a hook now */
    _Atomic int  claimed;    /* workers holding the claim now (must stay <= 1) */
} fake_t;

static fake_t fake;
static _Atomic long bad, waits, polls, begins, ends;
static _Atomic int stop_waiters;
static hive_t *h;
static hive_ref_t pending;   /* created, never sealed: every get of it waits */

static void enter(void)
{
    atomic_fetch_add_explicit(&fake.inside, 1, memory_order_seq_cst);
    if (!atomic_load_explicit(&fake.alive, memory_order_seq_cst))
        atomic_fetch_add_explicit(&bad, 1, memory_order_relaxed);
    for (int i = 0; i < 200; i++)
        hive__cpu_relax();           /* stay a while: a removal must wait for us */
}

static void leave(void)
{
    if (!atomic_load_explicit(&fake.alive, memory_order_seq_cst))
        atomic_fetch_add_explicit(&bad, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&fake.inside, 1, memory_order_seq_cst);
}

static void fake_wait(void *ctx, hive__obj_t *o, uint64_t deadline)
{
    (void)deadline;
    if (ctx != &fake || o == NULL)
        atomic_fetch_add_explicit(&bad, 1, memory_order_relaxed);
    enter();
    atomic_fetch_add_explicit(&waits, 1, memory_order_relaxed);
    leave();
}

static bool fake_idle(void *ctx, int what)
{
    if (ctx != &fake)
        atomic_fetch_add_explicit(&bad, 1, memory_order_relaxed);
    enter();
    switch (what) {
    case HIVE__IDLE_BEGIN:
        if (atomic_fetch_add_explicit(&fake.claimed, 1, memory_order_seq_cst) != 0)
            atomic_fetch_add_explicit(&bad, 1, memory_order_relaxed);   /* two claimants */
        atomic_fetch_add_explicit(&begins, 1, memory_order_relaxed);
        break;
    case HIVE__IDLE_POLL:
        if (atomic_load_explicit(&fake.claimed, memory_order_seq_cst) != 1)
            atomic_fetch_add_explicit(&bad, 1, memory_order_relaxed);   /* a poll without the claim */
        atomic_fetch_add_explicit(&polls, 1, memory_order_relaxed);
        break;
    case HIVE__IDLE_BUSY:
    case HIVE__IDLE_PARK:
        if (atomic_fetch_sub_explicit(&fake.claimed, 1, memory_order_seq_cst) != 1)
            atomic_fetch_add_explicit(&bad, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&ends, 1, memory_order_relaxed);
        break;
    default:
        atomic_fetch_add_explicit(&bad, 1, memory_order_relaxed);
    }
    leave();
    return false;
}

static const hive__remote_ops_t ops = { .ctx = &fake, .wait = fake_wait, .idle = fake_idle };

static void *waiter(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&stop_waiters, memory_order_relaxed)) {
        const void *p;
        int rc = hive_get(h, pending, 20000, &p, NULL);   /* 20 us: pending, so it times out */
        if (rc != HIVE_ETIMEDOUT)
            atomic_fetch_add_explicit(&bad, 1, memory_order_relaxed);
    }
    return NULL;
}

static int nop(hive_ctx_t *ctx)
{
    (void)ctx;
    return 0;
}

static void test_gate_holds_removal(void **state)
{
    (void)state;
    hive_config_t cfg = { .workers = 3, .no_pin = 1 };
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    void *d;
    assert_int_equal(hive_create(h, 8, &d, &pending), HIVE_OK);
    pthread_t th[WAITERS];
    for (int i = 0; i < WAITERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, waiter, NULL), 0);
    for (int round = 0; round < ROUNDS; round++) {
        atomic_store_explicit(&fake.alive, 1, memory_order_seq_cst);
        hive__remote_set(h, &ops);
        for (int i = 0; i < 8; i++) {            /* workers run, then go idle: they claim */
            hive_ref_t r;
            assert_int_equal(hive_submit(h, nop, NULL, 0, NULL, &r), HIVE_OK);
            const void *p;
            assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, NULL), HIVE_OK);
            hive_release(h, r);
        }
        if (round % 4 == 0)
            test_sleep_ms(1);                    /* some rounds remove while workers park */
        hive__remote_set(h, NULL);
        /* nobody inside now, and nobody may come in: the context is dead */
        assert_int_equal(atomic_load_explicit(&fake.inside, memory_order_seq_cst), 0);
        assert_int_equal(atomic_load_explicit(&fake.claimed, memory_order_seq_cst), 0);
        atomic_store_explicit(&fake.alive, 0, memory_order_seq_cst);
        for (int i = 0; i < 200; i++)
            hive__cpu_relax();
    }
    atomic_store_explicit(&stop_waiters, 1, memory_order_relaxed);
    for (int i = 0; i < WAITERS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&bad), 0);
    assert_int_equal(atomic_load(&begins), atomic_load(&ends));
    assert_true(atomic_load(&begins) > 0);       /* the rounds reached both hooks */
    assert_true(atomic_load(&polls) > 0);
    assert_true(atomic_load(&waits) > 0);
    assert_int_equal(hive_seal(h, pending), HIVE_OK);
    assert_int_equal(hive_release(h, pending), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gate_holds_removal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
