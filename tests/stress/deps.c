/*
 * stress/deps.c - deps hung on an object while it finishes (store.c: the
 * store-load pair of hive__obj_add_dep and the finish, which reads the deps
 * word and exchanges it only when it holds a dep).
 *
 * Each round, ADDERS threads hang DEPS_EACH deps on a fresh pending object
 * while another thread seals or fails it (or, every fourth round, a queued
 * task result is cancelled, or claimed and finished: the run bits of the
 * state word move under the adders too). All start together at a spinning
 * gate (every 16th round the object is finished before it, so that the
 * adders' side of the race is reached however the threads are scheduled).
 * Contract checked, per dep: add_dep answered true and the dep was
 * called exactly once, with the outcome's failed flag; or it answered
 * false, the dep was never called, and the object had finished. A lost
 * dep (the finisher read the deps word before the push and the adder read
 * the state before the finish: no fence between) shows as a true with no
 * call; a dep called twice (two exchanges both delivering it) as a count
 * of 2; a false with a call as an adder that took back its own dep but
 * delivered it anyway.
 */
#include "testutil.h"
#include "hive_impl.h"

#include <pthread.h>
#include <sched.h>

#define ADDERS    3
#define DEPS_EACH 2
#define ROUNDS    (20000 / TEST_SCALE)

typedef struct tdep {
    hive__dep_t dep;
    _Atomic int calls;
    _Atomic int failed;
    int         added;           /* add_dep's answer: 1 true, 0 false */
} tdep_t;

static hive_t *h;
static hive__obj_t *obj;
static tdep_t deps[ADDERS][DEPS_EACH];
static _Atomic unsigned gate, done;
static _Atomic long lost, twice, false_called, false_pending, wrong_flag;

static void tdep_ready(hive__dep_t *d, bool failed)
{
    tdep_t *t = HIVE_CONTAINER_OF(d, tdep_t, dep);
    atomic_store(&t->failed, failed);
    atomic_fetch_add(&t->calls, 1);
}

static void wait_gate(unsigned round)
{
    for (unsigned spins = 0; atomic_load_explicit(&gate, memory_order_acquire) != round; spins++)
        if (spins % 64 == 63)
            sched_yield();               /* more threads than cores */
}

static void *adder(void *arg)
{
    unsigned id = (unsigned)(intptr_t)arg;
    for (unsigned r = 1; r <= ROUNDS; r++) {
        wait_gate(r);
        for (unsigned k = 0; k < DEPS_EACH; k++) {
            tdep_t *t = &deps[id][k];
            t->added = hive__obj_add_dep(obj, &t->dep);
            if (!t->added && hive__obj_state(obj) == HIVE__PENDING)
                atomic_fetch_add(&false_pending, 1);
        }
        atomic_fetch_add_explicit(&done, 1, memory_order_release);
    }
    return NULL;
}

/* The finisher's way of round r: seal, fail, cancel a queued result, or
 * claim and finish it (the last two on task results). Every 16th round
 * the main thread finished it before the gate: every adder comes after. */
static void *finisher(void *arg)
{
    (void)arg;
    for (unsigned r = 1; r <= ROUNDS; r++) {
        wait_gate(r);
        if (r % 16 == 15) {              /* main finished it before the gate */
            atomic_fetch_add_explicit(&done, 1, memory_order_release);
            continue;
        }
        switch (r % 4) {
        case 0: hive__obj_seal(h, obj); break;
        case 1: hive__obj_fail(h, obj, HIVE_ETASK); break;
        case 2: hive__obj_end_queued(h, obj, HIVE_ECANCELED, HIVE__RUN_CANCELLED); break;
        default:
            if (hive__obj_claim_run(h, NULL, obj))
                hive__obj_finish_run(h, NULL, obj, HIVE_OK);
            break;
        }
        atomic_fetch_add_explicit(&done, 1, memory_order_release);
    }
    return NULL;
}

static void test_deps_against_finish(void **state)
{
    (void)state;
    hive_config_t cfg = { .workers = 1, .no_pin = 1 };
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    pthread_t th[ADDERS + 1];
    for (unsigned i = 0; i < ADDERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, adder, (void *)(intptr_t)i), 0);
    assert_int_equal(pthread_create(&th[ADDERS], NULL, finisher, NULL), 0);
    long calls_total = 0, false_total = 0;
    for (unsigned r = 1; r <= ROUNDS; r++) {
        hive__obj_t *o;
        assert_int_equal(hive__obj_new(h, HIVE__BLOB, 0, false, &o), HIVE_OK);
        if (r % 4 >= 2)
            hive__obj_init_run(o, HIVE__RUN_QUEUED);   /* a queued task's result */
        hive__obj_publish(h, o);
        for (unsigned i = 0; i < ADDERS; i++)
            for (unsigned k = 0; k < DEPS_EACH; k++) {
                atomic_store(&deps[i][k].calls, 0);
                atomic_store(&deps[i][k].failed, -1);
                deps[i][k].dep.ready = tdep_ready;
            }
        if (r % 16 == 15 && hive__obj_claim_run(h, NULL, o))   /* adders all come after the finish */
            hive__obj_finish_run(h, NULL, o, HIVE_OK);
        obj = o;
        atomic_store(&done, 0);
        atomic_store_explicit(&gate, r, memory_order_release);   /* go */
        while (atomic_load_explicit(&done, memory_order_acquire) != ADDERS + 1)
            sched_yield();
        bool failed = hive__obj_state(o) == HIVE__FAILED;
        for (unsigned i = 0; i < ADDERS; i++)
            for (unsigned k = 0; k < DEPS_EACH; k++) {
                tdep_t *t = &deps[i][k];
                int c = atomic_load(&t->calls);
                calls_total += c;
                if (t->added) {
                    if (c == 0)
                        atomic_fetch_add(&lost, 1);
                    else if (c > 1)
                        atomic_fetch_add(&twice, 1);
                    else if (atomic_load(&t->failed) != failed)
                        atomic_fetch_add(&wrong_flag, 1);
                } else {
                    false_total++;
                    if (c != 0)
                        atomic_fetch_add(&false_called, 1);
                }
            }
        hive__obj_release(h, o);
    }
    for (unsigned i = 0; i <= ADDERS; i++)
        pthread_join(th[i], NULL);
    printf("deps stress: %d rounds, %ld deps called, %ld added after the finish\n", ROUNDS,
           calls_total, false_total);
    if (atomic_load(&lost) || atomic_load(&twice) || atomic_load(&false_called) ||
        atomic_load(&false_pending) || atomic_load(&wrong_flag))
        fail_msg("deps: %ld lost, %ld called twice, %ld called after add_dep said false, %ld false "
                 "while pending, %ld with the wrong outcome", atomic_load(&lost),
                 atomic_load(&twice), atomic_load(&false_called), atomic_load(&false_pending),
                 atomic_load(&wrong_flag));
    assert_true(calls_total > 0 && false_total > 0);   /* both sides of the race were reached */
    test_expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deps_against_finish),
    };
    return cmocka_run_group_tests_name("stress_deps", tests, NULL, NULL);
}
