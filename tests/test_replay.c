/* test_replay.c - the replay buffer (src/rl/replay.c): uniform sampling
 * passes a chi-square test, prioritized sampling follows the priorities,
 * importance weights, priority updates, wrap-around, determinism, the rate
 * limiter, and every bad input. */
#include "testutil.h"
#include "rl/replay_check.h"

#include <float.h>
#include <math.h>
#include <pthread.h>

static hive_t *engine(void)
{
    return test_engine(64u << 20, 1, NULL);
}

static void finish(hive_t *h)
{
    test_expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* A buffer of 8-byte items (each item is its own push number). */
static hive_replay_t *make(hive_t *h, uint64_t cap, int prioritized, double alpha, double beta,
                           uint64_t seed)
{
    hive_replay_config_t cfg = { .capacity = cap, .item_size = sizeof(uint64_t),
                                 .prioritized = prioritized, .alpha = alpha, .beta = beta,
                                 .seed = seed };
    hive_replay_t *rb = NULL;
    if (hive_replay_new(h, &cfg, &rb) != HIVE_OK)
        fail_msg("hive_replay_new: %s", hive_last_error());
    return rb;
}

static void push_n(hive_replay_t *rb, uint64_t from, uint64_t n)
{
    for (uint64_t i = from; i < from + n; i++)
        assert_int_equal(hive_replay_push(rb, &i), HIVE_OK);
}

/* Sample `total` items in batches; counts[key]++; items must equal keys. */
static void sample_counts(hive_replay_t *rb, size_t batch, uint64_t total, uint64_t *rng,
                          uint64_t *counts, uint64_t nkeys)
{
    uint64_t items[256], keys[256];
    assert_true(batch <= 256);
    for (uint64_t done = 0; done < total; done += batch) {
        assert_int_equal(hive_replay_sample(rb, batch, rng, items, keys, NULL, 0), HIVE_OK);
        for (size_t i = 0; i < batch; i++) {
            assert_int_equal(items[i], keys[i]);
            assert_true(keys[i] < nkeys);
            counts[keys[i]]++;
        }
    }
}

/* ------------------------------------------------------------------ uniform */

static void test_uniform_chi_square(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_replay_t *rb = make(h, 100, 0, 0, 0, 12345);
    push_n(rb, 0, 100);
    /* 100 items, 200k samples: chi-square with 99 degrees of freedom stays
     * below 148.2 with probability 0.999 */
    for (int pass = 0; pass < 2; pass++) {          /* the buffer's stream, then a caller's */
        uint64_t counts[100] = { 0 }, rng = 777;
        sample_counts(rb, 100, 200000, pass ? &rng : NULL, counts, 100);
        double chi = 0, expect = 200000.0 / 100;
        for (int i = 0; i < 100; i++)
            chi += (counts[i] - expect) * (counts[i] - expect) / expect;
        printf("uniform chi-square (%s stream): %.1f (critical 148.2)\n", pass ? "caller" : "buffer", chi);
        assert_true(chi < 148.2);
    }
    /* uniform weights are all 1 */
    double w[16];
    assert_int_equal(hive_replay_sample(rb, 16, NULL, NULL, NULL, w, 0), HIVE_OK);
    for (int i = 0; i < 16; i++)
        assert_true(w[i] == 1.0);
    hive_replay_stats_t st;
    assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
    assert_int_equal(st.capacity, 100);
    assert_int_equal(st.size, 100);
    assert_int_equal(st.inserts, 100);
    assert_int_equal(st.samples, 400016);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    finish(h);
}

/* The items live in one shared U8 array {capacity, item_size}. */
static void test_array_is_shared(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_replay_config_t cfg = { .capacity = 10, .item_size = 12 };
    hive_replay_t *rb;
    assert_int_equal(hive_replay_new(h, &cfg, &rb), HIVE_OK);
    hive_array_t a;
    hive_ref_t ref = hive_replay_array(rb);
    assert_int_not_equal(ref.id, 0);
    assert_int_equal(hive_array_view(h, ref, &a), HIVE_OK);
    assert_int_equal(a.dtype, HIVE_U8);
    assert_int_equal(a.ndim, 2);
    assert_int_equal(a.shape[0], 10);
    assert_int_equal(a.shape[1], 12);
    unsigned char item[12];
    for (int k = 0; k < 13; k++) {                  /* 13 pushes: key 10 lands on row 0 */
        memset(item, k + 1, sizeof item);
        assert_int_equal(hive_replay_push(rb, item), HIVE_OK);
    }
    int64_t idx[2] = { 3, 11 };
    assert_int_equal(*(unsigned char *)hive_array_at(&a, idx), 4);
    idx[0] = 0;
    assert_int_equal(*(unsigned char *)hive_array_at(&a, idx), 11);
    assert_int_equal(hive_replay_array(NULL).id, 0);
    /* the buffer's count goes with it; a retained one keeps the array */
    assert_int_equal(hive_retain(h, ref), HIVE_OK);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    assert_int_equal(hive_array_view(h, ref, &a), HIVE_OK);
    assert_int_equal(hive_release(h, ref), HIVE_OK);
    finish(h);
}

/* ------------------------------------------------------------------ prioritized */

static void check_freqs(hive_replay_t *rb, size_t batch, const double *want, int n)
{
    uint64_t counts[8] = { 0 }, rng = 99;
    const uint64_t total = 200000;
    sample_counts(rb, batch, total, &rng, counts, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        double f = (double)counts[i] / total;
        if (fabs(f - want[i]) > 0.02)
            fail_msg("batch %zu: key %d sampled with frequency %.4f, want %.4f", batch, i, f, want[i]);
    }
}

static void test_prioritized_follows_priorities(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_replay_t *rb = make(h, 4, 1, 1.0, 0.4, 1);
    push_n(rb, 0, 4);
    /* new items all get the max priority (1.0 at first): uniform */
    const double even[4] = { 0.25, 0.25, 0.25, 0.25 };
    check_freqs(rb, 4, even, 4);
    uint64_t keys[4] = { 0, 1, 2, 3 };
    double prio[4] = { 1, 2, 3, 4 };
    assert_int_equal(hive_replay_update_priorities(rb, keys, prio, 4), 4);
    const double want[4] = { 0.1, 0.2, 0.3, 0.4 };
    check_freqs(rb, 1, want, 4);                    /* independent draws */
    check_freqs(rb, 4, want, 4);                    /* stratified batches */
    hive_replay_stats_t st;
    hive_replay_stats(rb, &st);
    assert_true(fabs(st.total_priority - 10.0) < 1e-12);
    assert_true(st.max_priority == 4.0);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);

    /* alpha = 0.5: frequencies follow sqrt(p) */
    rb = make(h, 4, 1, 0.5, 0.4, 2);
    push_n(rb, 0, 4);
    double p2[4] = { 1, 4, 9, 16 };
    assert_int_equal(hive_replay_update_priorities(rb, keys, p2, 4), 4);
    const double want2[4] = { 0.1, 0.2, 0.3, 0.4 };
    check_freqs(rb, 4, want2, 4);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    finish(h);
}

static void test_importance_weights(void **state)
{
    (void)state;
    hive_t *h = engine();
    const double beta = 0.6;
    hive_replay_t *rb = make(h, 4, 1, 1.0, beta, 3);
    push_n(rb, 0, 4);
    uint64_t keys[4] = { 0, 1, 2, 3 };
    double prio[4] = { 1, 2, 3, 4 };
    assert_int_equal(hive_replay_update_priorities(rb, keys, prio, 4), 4);
    int saw_max = 0;
    for (int round = 0; round < 200; round++) {
        uint64_t k[4];
        double w[4], wmax = 0, raw[4];
        assert_int_equal(hive_replay_sample(rb, 4, NULL, NULL, k, w, 0), HIVE_OK);
        /* w_i = (N * P(i))^-beta / max_j w_j over the batch */
        for (int i = 0; i < 4; i++) {
            raw[i] = pow(4 * prio[k[i]] / 10.0, -beta);
            if (raw[i] > wmax)
                wmax = raw[i];
        }
        for (int i = 0; i < 4; i++) {
            if (fabs(w[i] - raw[i] / wmax) > 1e-12)
                fail_msg("weight of key %llu is %.15f, want %.15f", (unsigned long long)k[i], w[i],
                         raw[i] / wmax);
            assert_true(w[i] > 0 && w[i] <= 1.0);
            saw_max += w[i] == 1.0;
        }
    }
    assert_true(saw_max >= 200);                    /* every batch has its max at 1 */
    assert_int_equal(hive_replay_free(rb), HIVE_OK);

    /* beta = 0: all 1 */
    rb = make(h, 4, 1, 1.0, 0.0, 3);
    push_n(rb, 0, 4);
    assert_int_equal(hive_replay_update_priorities(rb, keys, prio, 4), 4);
    double w[4];
    assert_int_equal(hive_replay_sample(rb, 4, NULL, NULL, NULL, w, 0), HIVE_OK);
    for (int i = 0; i < 4; i++)
        assert_true(w[i] == 1.0);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    finish(h);
}

static void test_update_changes_distribution(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_replay_t *rb = make(h, 4, 1, 1.0, 0.5, 4);
    push_n(rb, 0, 4);
    uint64_t keys[4] = { 0, 1, 2, 3 };
    double prio[4] = { 1, 1, 1, 1 };
    assert_int_equal(hive_replay_update_priorities(rb, keys, prio, 4), 4);
    /* key 0 up to 7: 7/10 of the mass */
    double p7 = 7;
    assert_int_equal(hive_replay_update_priorities(rb, keys, &p7, 1), 1);
    const double want[4] = { 0.7, 0.1, 0.1, 0.1 };
    check_freqs(rb, 4, want, 4);
    /* priority 0: never sampled while others have mass */
    double zero[2] = { 0, 0 };
    assert_int_equal(hive_replay_update_priorities(rb, keys, zero, 2), 2);
    const double want2[4] = { 0, 0, 0.5, 0.5 };
    uint64_t counts[4] = { 0 }, rng = 5;
    sample_counts(rb, 4, 16000, &rng, counts, 4);
    assert_int_equal(counts[0] + counts[1], 0);
    check_freqs(rb, 4, want2, 4);
    /* every priority 0: uniform */
    assert_int_equal(hive_replay_update_priorities(rb, keys + 2, zero, 2), 2);
    const double even[4] = { 0.25, 0.25, 0.25, 0.25 };
    check_freqs(rb, 4, even, 4);
    /* new items take the largest priority seen so far (7), even now */
    hive_replay_stats_t st;
    hive_replay_stats(rb, &st);
    assert_true(st.max_priority == 7.0);
    push_n(rb, 4, 1);                               /* key 4 replaces key 0 on row 0 */
    hive_replay_stats(rb, &st);
    assert_true(fabs(st.total_priority - 7.0) < 1e-12);
    /* an update for the overwritten key 0 is dropped; key 4's is applied */
    uint64_t k2[2] = { 0, 4 };
    double p2[2] = { 100, 2 };
    assert_int_equal(hive_replay_update_priorities(rb, k2, p2, 2), 1);
    hive_replay_stats(rb, &st);
    assert_true(fabs(st.total_priority - 2.0) < 1e-12);
    assert_true(st.max_priority == 100.0);          /* the max counts every priority seen */
    assert_int_equal(hive_replay_update_priorities(rb, NULL, NULL, 0), 0);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    finish(h);
}

/* ------------------------------------------------------------------ wrap-around */

static void test_wraparound_keeps_newest(void **state)
{
    (void)state;
    hive_t *h = engine();
    for (int prioritized = 0; prioritized < 2; prioritized++) {
        hive_replay_t *rb = make(h, 8, prioritized, 1.0, 0.5, 6);
        push_n(rb, 0, 20);
        uint64_t counts[64] = { 0 }, rng = 1;
        sample_counts(rb, 8, 8000, &rng, counts, 64);
        for (uint64_t k = 0; k < 64; k++) {
            if (k >= 12 && k < 20)
                assert_true(counts[k] > 0);
            else
                assert_int_equal(counts[k], 0);
        }
        /* a batch of 30 in one push: only its last 8 are kept */
        uint64_t items[30];
        for (uint64_t i = 0; i < 30; i++)
            items[i] = 20 + i;
        assert_int_equal(hive_replay_push_batch(rb, items, 30), HIVE_OK);
        memset(counts, 0, sizeof counts);
        sample_counts(rb, 8, 8000, &rng, counts, 64);
        for (uint64_t k = 0; k < 64; k++) {
            if (k >= 42 && k < 50)
                assert_true(counts[k] > 0);
            else
                assert_int_equal(counts[k], 0);
        }
        /* rows hold key % capacity */
        hive_array_t a;
        assert_int_equal(hive_array_view(h, hive_replay_array(rb), &a), HIVE_OK);
        for (uint64_t r = 0; r < 8; r++)
            assert_int_equal(((uint64_t *)a.data)[r] % 8, r);
        hive_replay_stats_t st;
        hive_replay_stats(rb, &st);
        assert_int_equal(st.inserts, 50);
        assert_int_equal(st.size, 8);
        if (prioritized)
            assert_true(fabs(st.total_priority - 8.0) < 1e-12);
        assert_int_equal(hive_replay_push_batch(rb, items, 0), HIVE_OK);
        assert_int_equal(hive_replay_free(rb), HIVE_OK);
    }
    finish(h);
}

/* ------------------------------------------------------------------ determinism */

static void run_script(hive_t *h, int prioritized, uint64_t seed, uint64_t *keys_out, uint64_t *items_out,
                       double *w_out)
{
    hive_replay_t *rb = make(h, 64, prioritized, 0.7, 0.5, seed);
    push_n(rb, 0, 100);
    if (prioritized) {
        uint64_t keys[20];
        double prio[20];
        for (int i = 0; i < 20; i++) {
            keys[i] = 40 + (uint64_t)i * 3;
            prio[i] = 0.1 + i * 0.37;
        }
        assert_int_equal(hive_replay_update_priorities(rb, keys, prio, 20), 20);
    }
    for (int b = 0; b < 10; b++)
        assert_int_equal(hive_replay_sample(rb, 32, NULL, items_out + b * 32, keys_out + b * 32,
                                            w_out + b * 32, 0), HIVE_OK);
    uint64_t rng = seed * 3 + 1;
    assert_int_equal(hive_replay_sample(rb, 32, &rng, items_out + 320, keys_out + 320, w_out + 320, 0),
                     HIVE_OK);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
}

static void test_deterministic(void **state)
{
    (void)state;
    hive_t *h = engine();
    for (int prioritized = 0; prioritized < 2; prioritized++) {
        uint64_t k1[352], k2[352], k3[352], i1[352], i2[352], i3[352];
        double w1[352], w2[352], w3[352];
        run_script(h, prioritized, 42, k1, i1, w1);
        run_script(h, prioritized, 42, k2, i2, w2);
        run_script(h, prioritized, 43, k3, i3, w3);
        assert_memory_equal(k1, k2, sizeof k1);
        assert_memory_equal(i1, i2, sizeof i1);
        assert_memory_equal(w1, w2, sizeof w1);
        assert_memory_equal(i1, k1, sizeof i1);
        assert_true(memcmp(k1, k3, sizeof k1) != 0);
    }
    finish(h);
}

/* ------------------------------------------------------------------ rate limiter */

#define RL_PUSHES 3000
#define RL_SPI    2.0
#define RL_EB     16.0

static _Atomic int rl_done;
static _Atomic int rl_violations;

static void *rl_pusher(void *arg)
{
    hive_replay_t *rb = arg;
    for (uint64_t i = 0; i < RL_PUSHES; i++) {
        hive_replay_push(rb, &i);
        if (i % 16 == 0)
            test_sleep_ms(1);
    }
    atomic_store(&rl_done, 1);
    return NULL;
}

static void test_rate_limiter_holds_ratio(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_replay_config_t cfg = { .capacity = 1024, .item_size = 8, .samples_per_insert = RL_SPI,
                                 .error_buffer = RL_EB, .min_size_to_sample = 10, .seed = 8 };
    hive_replay_t *rb;
    assert_int_equal(hive_replay_new(h, &cfg, &rb), HIVE_OK);
    atomic_store(&rl_done, 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, rl_pusher, rb), 0);
    uint64_t sampled = 0, timeouts = 0;
    for (;;) {
        uint64_t items[4];
        int done = atomic_load(&rl_done);           /* before: a later timeout saw every insert */
        int rc = hive_replay_sample(rb, 4, NULL, items, NULL, NULL, 20 * 1000000);
        hive_replay_stats_t st;
        hive_replay_stats(rb, &st);                 /* inserts only grow: a later look is >= */
        if (rc == HIVE_OK) {
            sampled += 4;
            if ((double)sampled > RL_SPI * (double)st.inserts + RL_EB)
                atomic_fetch_add(&rl_violations, 1);
            assert_true(st.inserts >= 10);          /* min_size_to_sample */
        } else {
            assert_int_equal(rc, HIVE_ETIMEDOUT);
            timeouts++;
            if (done)
                break;
        }
    }
    pthread_join(th, NULL);
    hive_replay_stats_t st;
    hive_replay_stats(rb, &st);
    printf("rate limiter: %llu inserts, %llu samples (bound %.0f), %llu timeouts\n",
           (unsigned long long)st.inserts, (unsigned long long)sampled,
           RL_SPI * RL_PUSHES + RL_EB, (unsigned long long)timeouts);
    assert_int_equal(atomic_load(&rl_violations), 0);
    assert_int_equal(st.samples, sampled);
    /* the sampler kept up: it took all it was allowed (to within a batch) */
    assert_true((double)sampled > RL_SPI * RL_PUSHES + RL_EB - 4);
    assert_true((double)sampled <= RL_SPI * RL_PUSHES + RL_EB);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    finish(h);
}

static void *late_push(void *arg)
{
    test_sleep_ms(50);
    uint64_t v = 5;
    hive_replay_push(arg, &v);
    return NULL;
}

static void *forever_sampler(void *arg)
{
    uint64_t item = 0;
    int rc = hive_replay_sample(arg, 1, NULL, &item, NULL, NULL, HIVE_FOREVER);
    return (void *)(intptr_t)(rc == HIVE_OK && item == 5 ? 1 : 0);
}

/* several samplers asleep at once: one push wakes them all */
static void test_every_sleeper_wakes(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_replay_config_t cfg = { .capacity = 16, .item_size = 8, .min_size_to_sample = 1 };
    hive_replay_t *rb;
    assert_int_equal(hive_replay_new(h, &cfg, &rb), HIVE_OK);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, forever_sampler, rb), 0);
    test_sleep_ms(50);
    uint64_t v = 5;
    assert_int_equal(hive_replay_push(rb, &v), HIVE_OK);
    for (int i = 0; i < 3; i++) {
        void *ok;
        pthread_join(th[i], &ok);
        assert_int_equal((intptr_t)ok, 1);
    }
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    finish(h);
}

static void test_rate_limiter_timeouts(void **state)
{
    (void)state;
    hive_t *h = engine();
    /* nothing pushed: min_size_to_sample holds sampling back */
    hive_replay_config_t cfg = { .capacity = 16, .item_size = 8, .min_size_to_sample = 1 };
    hive_replay_t *rb;
    assert_int_equal(hive_replay_new(h, &cfg, &rb), HIVE_OK);
    uint64_t item = 1, key = 77;
    uint64_t t0 = test_now_ns();
    ASSERT_FAILS_WITH(hive_replay_sample(rb, 1, NULL, &item, &key, NULL, 0), HIVE_ETIMEDOUT,
                      "min_size_to_sample 1 items (the buffer holds 0)");
    ASSERT_FAILS_WITH(hive_replay_sample(rb, 1, NULL, &item, &key, NULL, 50 * 1000000), HIVE_ETIMEDOUT,
                      "min_size_to_sample");
    uint64_t waited = test_now_ns() - t0;
    assert_true(waited >= 50u * 1000000);
    assert_int_equal(item, 1);                      /* outputs untouched */
    assert_int_equal(key, 77);
    /* a sampler waiting forever is woken by a push */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, late_push, rb), 0);
    assert_int_equal(hive_replay_sample(rb, 1, NULL, &item, &key, NULL, HIVE_FOREVER), HIVE_OK);
    assert_int_equal(item, 5);
    assert_int_equal(key, 0);
    pthread_join(th, NULL);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);

    /* one sample per insert, no slack: 5 pushes allow 5 samples */
    hive_replay_config_t c2 = { .capacity = 16, .item_size = 8, .samples_per_insert = 1.0 };
    assert_int_equal(hive_replay_new(h, &c2, &rb), HIVE_OK);
    push_n(rb, 0, 5);
    assert_int_equal(hive_replay_sample(rb, 3, NULL, NULL, NULL, NULL, 0), HIVE_OK);
    ASSERT_FAILS_WITH(hive_replay_sample(rb, 3, NULL, NULL, NULL, NULL, 0), HIVE_ETIMEDOUT,
                      "3 samples + batch 3 > 1 per insert * 5 inserts + error buffer 0");
    ASSERT_FAILS_WITH(hive_replay_sample(rb, 3, NULL, NULL, NULL, NULL, 10 * 1000000), HIVE_ETIMEDOUT,
                      "rate limit");
    assert_int_equal(hive_replay_sample(rb, 2, NULL, NULL, NULL, NULL, 0), HIVE_OK);
    ASSERT_FAILS_WITH(hive_replay_sample(rb, 1, NULL, NULL, NULL, NULL, 0), HIVE_ETIMEDOUT, "rate limit");
    hive_replay_stats_t st;
    hive_replay_stats(rb, &st);
    assert_int_equal(st.samples, 5);                /* timed-out calls count nothing */
    assert_int_equal(pthread_create(&th, NULL, late_push, rb), 0);
    assert_int_equal(hive_replay_sample(rb, 1, NULL, NULL, NULL, NULL, HIVE_FOREVER), HIVE_OK);
    pthread_join(th, NULL);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    finish(h);
}

/* ------------------------------------------------------------------ bad input */

/* No priority may make the sum tree non-finite (issue 9): an alpha that
 * overflows ordinary priorities is refused at creation, a priority whose
 * power is infinite or above DBL_MAX / (2 capacity) at update, and a
 * refused update changes nothing. Before, 1e300 with alpha 2 made the total
 * inf for good (NaN once set back) and alpha 2000 made every weight NaN. */
static void expect_finite_weights(hive_replay_t *rb, size_t batch)
{
    double w[8];
    uint64_t k[8];
    assert_true(batch <= 8);
    for (int round = 0; round < 50; round++) {
        assert_int_equal(hive_replay_sample(rb, batch, NULL, NULL, k, w, 0), HIVE_OK);
        for (size_t i = 0; i < batch; i++)
            if (!(isfinite(w[i]) && w[i] >= 0 && w[i] <= 1))
                fail_msg("weight %zu of key %llu is %g", i, (unsigned long long)k[i], w[i]);
    }
}

static void test_priority_limits(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_replay_t *rb = (hive_replay_t *)(uintptr_t)0x1234;
    hive_replay_config_t cfg = { .capacity = 4, .item_size = 8, .prioritized = 1, .alpha = 2000 };
    ASSERT_FAILS_WITH(hive_replay_new(h, &cfg, &rb), HIVE_EINVAL, "alpha = 2000 is above 16");
    cfg.alpha = 16.5;
    ASSERT_FAILS_WITH(hive_replay_new(h, &cfg, &rb), HIVE_EINVAL, "alpha = 16.5 is above 16");
    assert_ptr_equal(rb, (hive_replay_t *)(uintptr_t)0x1234);

    /* alpha 2: 1e300^2 is inf; refused, and nothing changes */
    rb = make(h, 4, 1, 2.0, 0.4, 7);
    push_n(rb, 0, 4);
    uint64_t keys[4] = { 0, 1, 2, 3 };
    double prio[4] = { 1e300, 1, 1, 1 };
    ASSERT_FAILS_WITH(hive_replay_update_priorities(rb, keys, prio, 4), HIVE_EINVAL,
                      "priority 0 is 1e+300, and 1e+300^alpha (alpha 2) = inf is above");
    assert_non_null(strstr(hive_last_error(), "over 4 items finite; nothing was changed"));
    hive_replay_stats_t st;
    assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
    assert_true(st.total_priority == 4.0);
    assert_true(st.max_priority == 1.0);
    /* the biggest one is named wherever it is in the batch */
    double late[4] = { 1, 2, 1e200, 3 };
    ASSERT_FAILS_WITH(hive_replay_update_priorities(rb, keys, late, 4), HIVE_EINVAL, "priority 2 is 1e+200");
    /* the buffer still samples by priority: 1, 4, 9, 16 out of 30 */
    double ok[4] = { 1, 2, 3, 4 };
    assert_int_equal(hive_replay_update_priorities(rb, keys, ok, 4), 4);
    const double want[4] = { 1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0 };
    check_freqs(rb, 4, want, 4);
    expect_finite_weights(rb, 4);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);

    /* alpha 1: each priority finite, but four of 1e308 would sum to inf;
     * the bound is DBL_MAX / (2 * 4), and exactly that is allowed */
    rb = make(h, 4, 1, 1.0, 0.4, 7);
    push_n(rb, 0, 4);
    double big[4] = { 1e308, 1e308, 1e308, 1e308 };
    ASSERT_FAILS_WITH(hive_replay_update_priorities(rb, keys, big, 4), HIVE_EINVAL, "is above");
    assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
    assert_true(st.total_priority == 4.0);
    double edge[4] = { DBL_MAX / 8, DBL_MAX / 8, DBL_MAX / 8, DBL_MAX / 8 };
    assert_int_equal(hive_replay_update_priorities(rb, keys, edge, 4), 4);
    double above = nextafter(DBL_MAX / 8, INFINITY);
    ASSERT_FAILS_WITH(hive_replay_update_priorities(rb, keys, &above, 1), HIVE_EINVAL, "is above");
    assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
    assert_true(isfinite(st.total_priority) && st.total_priority > DBL_MAX / 4);
    expect_finite_weights(rb, 4);
    /* new pushes take the largest priority: the total stays finite through
     * a full lap of pushes and batches */
    push_n(rb, 4, 4);
    uint64_t items[8] = { 0 };
    assert_int_equal(hive_replay_push_batch(rb, items, 8), HIVE_OK);
    assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
    assert_true(isfinite(st.total_priority));
    double one = 1, tiny = 1e-300;
    uint64_t k12 = 12, k13 = 13;
    assert_int_equal(hive_replay_update_priorities(rb, &k12, &one, 1), 1);
    assert_int_equal(hive_replay_update_priorities(rb, &k13, &tiny, 1), 1);
    expect_finite_weights(rb, 4);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);

    /* alpha 16, the largest: ordinary priorities work, 1e20^16 does not */
    rb = make(h, 4, 1, 16.0, 1.0, 7);
    push_n(rb, 0, 4);
    double mid[4] = { 2, 0.5, 1e18, 0 };
    assert_int_equal(hive_replay_update_priorities(rb, keys, mid, 4), 4);
    expect_finite_weights(rb, 4);
    double huge = 1e20;
    ASSERT_FAILS_WITH(hive_replay_update_priorities(rb, keys, &huge, 1), HIVE_EINVAL, "alpha 16");
    assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
    assert_true(isfinite(st.total_priority) && st.max_priority == 1e18);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    finish(h);
}

/* The tree is recomputed from its children, never adjusted by differences:
 * a huge priority set and reset must leave the small ones counted (with
 * differences, 1e300 - 1e300 + the other three's 3 rounded to 0, and an
 * item of priority 0 was sampled). */
static void test_sum_tree_never_drifts(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_replay_t *rb = make(h, 4, 1, 1.0, 0.4, 7);
    push_n(rb, 0, 4);
    uint64_t k0 = 0;
    double huge = 1e300, zero = 0;
    assert_int_equal(hive_replay_update_priorities(rb, &k0, &huge, 1), 1);
    assert_int_equal(hive_replay_update_priorities(rb, &k0, &zero, 1), 1);
    hive_replay_stats_t st;
    assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
    assert_true(st.total_priority == 3.0);
    uint64_t items[4], keys[4], rng = 3;
    for (int round = 0; round < 1000; round++) {
        assert_int_equal(hive_replay_sample(rb, 4, &rng, items, keys, NULL, 0), HIVE_OK);
        for (int i = 0; i < 4; i++)
            assert_true(keys[i] != 0);
    }
    assert_int_equal(hive_replay_free(rb), HIVE_OK);

    /* wild ranges over 300 rows (several blocks and levels), in batches
     * long enough to take the gathered path: after each, the total is the
     * sum of the priorities (exact here: powers of two whose sum fits) */
    rb = make(h, 300, 1, 1.0, 0.4, 7);
    push_n(rb, 0, 300);
    uint64_t keys300[300];
    double prio[300];
    uint64_t r = 99;
    for (size_t i = 0; i < 300; i++)
        keys300[i] = i;
    for (int round = 0; round < 200; round++) {
        size_t n = round % 2 ? 300 : 5;
        for (size_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            prio[i] = (r >> 60) == 0 ? ldexp(1, 900) : (r >> 59) & 1 ? 0 : 1;
        }
        assert_int_equal(hive_replay_update_priorities(rb, keys300, prio, n), (int)n);
        if (n == 300) {
            double big = 0, small = 0;
            for (size_t i = 0; i < n; i++)
                *(prio[i] > 1 ? &big : &small) += prio[i];
            assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
            if (big == 0)
                assert_true(st.total_priority == small);
        }
        /* back to small values only: the total must not keep any residue */
        for (size_t i = 0; i < 300; i++)
            prio[i] = (i + round) % 3 == 0;
        assert_int_equal(hive_replay_update_priorities(rb, keys300, prio, 300), 300);
        assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
        assert_true(st.total_priority == 100.0);
    }
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    finish(h);
}

/* The tree is lazy: pushes only mark their blocks, and the next sample,
 * update or stats call brings every node up to date. Capacities of one
 * block (the bottom node is the root), four blocks, and 5000 rows (157
 * blocks: marks in three words of the bitmap, nodes above in several
 * words); pushes single and batched, with priorities set between them so
 * that pushes change leaves (max priority 2, alpha 1: each push sets 2).
 * 30 and 101 rows: blocks whose leaves are not a multiple of four. */
static void test_lazy_tree(void **state)
{
    (void)state;
    hive_t *h = engine();
    static const uint64_t caps[] = { 30, 101, 5000 };
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        uint64_t cap = caps[c];
        hive_replay_t *rb = make(h, cap, 1, 1.0, 0.4, 9);
        hive_replay_stats_t st;
        push_n(rb, 0, cap);                             /* all 1.0 */
        assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
        assert_true(st.total_priority == (double)cap);
        assert_int_equal(hive__replay_tree_check(rb), 0);
        uint64_t k = 0;
        double two = 2.0;
        assert_int_equal(hive_replay_update_priorities(rb, &k, &two, 1), 1);
        /* cap / 2 single pushes overwrite rows 0 .. cap/2 - 1 with 2.0 */
        push_n(rb, cap, cap / 2);
        assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
        assert_true(st.total_priority == (double)(cap / 2) * 2 + (double)(cap - cap / 2));
        /* a batch over the rest (across the end of the rows, and blocks) */
        uint64_t n = cap - cap / 2 + 3, *items = calloc(n, sizeof *items);
        assert_non_null(items);
        assert_int_equal(hive_replay_push_batch(rb, items, n), HIVE_OK);
        free(items);
        uint64_t one = 0, key = 0, rng = 5;
        /* every leaf is 2 now: the sample flushes, and draws by the new tree */
        assert_int_equal(hive_replay_sample(rb, 1, &rng, &one, &key, NULL, 0), HIVE_OK);
        assert_int_equal(hive__replay_tree_check(rb), 0);
        assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
        assert_true(st.total_priority == 2.0 * (double)cap);
        assert_int_equal(hive_replay_free(rb), HIVE_OK);
    }
    finish(h);
}

/* The sum tree's shapes: groups of eight entries per level, so capacities
 * around the powers of eight (a level that is one full group, one more row
 * than that, a last group of one entry) change the depth and the padding.
 * With integer priorities (0 .. 4, alpha 1) every sum is exact, so the row a
 * stratified batch draws in each segment is known exactly: the draws of one
 * batch are in row order, each lands on a row with a priority above 0, and
 * over many batches each row is drawn in proportion to its priority (the
 * rows of priority 0, a whole group of them in a row at times, never). */
static void test_tree_shapes(void **state)
{
    (void)state;
    hive_t *h = engine();
    static const uint64_t caps[] = { 1, 2, 7, 8, 9, 63, 64, 65, 511, 512, 513, 4097 };
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        uint64_t cap = caps[c];
        hive_replay_t *rb = make(h, cap, 1, 1.0, 0.4, 5);
        push_n(rb, 0, cap);
        uint64_t *keys = calloc(cap, sizeof *keys), *counts = calloc(cap, sizeof *counts);
        double *prio = calloc(cap, sizeof *prio), *before = calloc(cap, sizeof *before);
        assert_non_null(keys);
        assert_non_null(counts);
        assert_non_null(prio);
        assert_non_null(before);
        double sum = 0;
        for (uint64_t i = 0; i < cap; i++) {
            keys[i] = i;
            /* rows 8 .. 23 (two groups of leaves) all 0, the rest i % 5 */
            prio[i] = cap == 1 ? 3 : i >= 8 && i < 24 ? 0 : (double)(i % 5);
            before[i] = sum;                /* the mass of the rows before i */
            sum += prio[i];
        }
        assert_int_equal(hive_replay_update_priorities(rb, keys, prio, cap), (int)cap);
        assert_int_equal(hive__replay_tree_check(rb), 0);
        hive_replay_stats_t st;
        assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
        assert_true(st.total_priority == sum);
        size_t batch = cap < 64 ? (size_t)cap : 64;
        uint64_t out[64], got[64], rng = 11 + cap;
        const uint64_t rounds = 4000;
        for (uint64_t r = 0; r < rounds; r++) {
            assert_int_equal(hive_replay_sample(rb, batch, &rng, out, got, NULL, 0), HIVE_OK);
            for (size_t i = 0; i < batch; i++) {
                assert_true(got[i] < cap);
                assert_int_equal(out[i], got[i]);
                if (!(prio[got[i]] > 0))
                    fail_msg("capacity %llu: drew row %llu of priority 0",
                             (unsigned long long)cap, (unsigned long long)got[i]);
                /* segment i of the batch is [i, i + 1) * sum / batch: the
                 * row drawn there overlaps it */
                double lo = before[got[i]];
                double seg = sum / (double)batch;
                if (!(lo < (double)(i + 1) * seg && lo + prio[got[i]] > (double)i * seg))
                    fail_msg("capacity %llu: draw %zu of %zu took row %llu, prefix [%g, %g), "
                             "outside its segment [%g, %g)", (unsigned long long)cap, i, batch,
                             (unsigned long long)got[i], lo, lo + prio[got[i]], i * seg,
                             (i + 1) * seg);
                if (i > 0)
                    assert_true(got[i] >= got[i - 1]);
                counts[got[i]]++;
            }
        }
        double draws = (double)(rounds * batch);
        for (uint64_t i = 0; i < cap; i++) {
            double want = prio[i] / sum, f = (double)counts[i] / draws;
            /* stratified draws vary less than independent ones: 5 sigma of
             * a binomial is a loose bound */
            if (fabs(f - want) > 5 * sqrt(want * (1 - want) / draws) + 1e-9)
                fail_msg("capacity %llu: row %llu drawn with frequency %.5f, want %.5f",
                         (unsigned long long)cap, (unsigned long long)i, f, want);
        }
        free(keys);
        free(counts);
        free(prio);
        free(before);
        assert_int_equal(hive_replay_free(rb), HIVE_OK);
    }
    finish(h);
}

/* A descent for a mass the tree does not hold, as a sampler meets one when
 * the tree lags its leaves (a flush under way elsewhere, or priorities set
 * to 0 between its look at the total and its descent): at or past the
 * total it ends on the last row with mass; when no leaf has mass it finds
 * none, and never leaves the rows (the padding of a group, entries past
 * the capacity's, is no place to go: it used to walk into it and read past
 * the leaves). Capacities of one group, one level and several levels. */
static void test_descent_out_of_mass(void **state)
{
    (void)state;
    hive_t *h = engine();
    static const uint64_t caps[] = { 4, 8, 9, 60, 513 };
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        uint64_t cap = caps[c];
        hive_replay_t *rb = make(h, cap, 1, 1.0, 0.4, 3);
        push_n(rb, 0, cap);
        uint64_t *keys = calloc(cap, sizeof *keys);
        double *prio = calloc(cap, sizeof *prio);
        assert_non_null(keys);
        assert_non_null(prio);
        for (uint64_t i = 0; i < cap; i++) {
            keys[i] = i;
            prio[i] = i == 1 ? 1 : 0;             /* one row with mass */
        }
        assert_int_equal(hive_replay_update_priorities(rb, keys, prio, cap), (int)cap);
        assert_int_equal(hive__replay_descend(rb, 0.5), 1);
        assert_int_equal(hive__replay_descend(rb, 1.0), 1);     /* the total */
        assert_int_equal(hive__replay_descend(rb, 1e9), 1);     /* far past it */
        prio[1] = 0;
        assert_int_equal(hive_replay_update_priorities(rb, keys, prio, cap), (int)cap);
        hive_replay_stats_t st;
        assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
        assert_true(st.total_priority == 0);
        for (double m = 0; m < 20; m += 0.75)
            assert_true(hive__replay_descend(rb, m) == UINT64_MAX);
        /* every priority 0: sampling is uniform, over the rows */
        uint64_t out[4], got[4], rng = 1;
        assert_int_equal(hive_replay_sample(rb, 4, &rng, out, got, NULL, 0), HIVE_OK);
        for (int i = 0; i < 4; i++)
            assert_true(got[i] < cap);
        free(keys);
        free(prio);
        assert_int_equal(hive_replay_free(rb), HIVE_OK);
    }
    finish(h);
}

static void test_bad_input(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_replay_t *rb = (hive_replay_t *)(uintptr_t)0x1234, *good;
    hive_replay_config_t cfg = { .capacity = 8, .item_size = 8 };
    ASSERT_FAILS_WITH(hive_replay_new(NULL, &cfg, &rb), HIVE_EINVAL, "engine is NULL");
    ASSERT_FAILS_WITH(hive_replay_new(h, NULL, &rb), HIVE_EINVAL, "config is NULL");
    ASSERT_FAILS_WITH(hive_replay_new(h, &cfg, NULL), HIVE_EINVAL, "out is NULL");
    cfg.capacity = 0;
    ASSERT_FAILS_WITH(hive_replay_new(h, &cfg, &rb), HIVE_EINVAL, "capacity is 0");
    cfg.capacity = 8;
    cfg.item_size = 0;
    ASSERT_FAILS_WITH(hive_replay_new(h, &cfg, &rb), HIVE_EINVAL, "item_size is 0");
    cfg.capacity = UINT64_C(1) << 40;
    cfg.item_size = SIZE_MAX / 2;
    ASSERT_FAILS_WITH(hive_replay_new(h, &cfg, &rb), HIVE_EINVAL,
                      "capacity 1099511627776 * item_size 9223372036854775807 overflows");
    cfg.capacity = UINT64_C(1) << 24;
    cfg.item_size = SIZE_MAX >> 24;                 /* no overflow in size_t, but above INT64_MAX */
    ASSERT_FAILS_WITH(hive_replay_new(h, &cfg, &rb), HIVE_EINVAL, "overflows");
    cfg.capacity = UINT64_MAX;
    cfg.item_size = 1;
    ASSERT_FAILS_WITH(hive_replay_new(h, &cfg, &rb), HIVE_EINVAL, "above the limit");
    cfg = (hive_replay_config_t){ .capacity = 8, .item_size = 8, .prioritized = 1, .alpha = NAN };
    ASSERT_FAILS_WITH(hive_replay_new(h, &cfg, &rb), HIVE_EINVAL, "alpha = nan");
    cfg.alpha = 0.6;
    cfg.beta = -1;
    ASSERT_FAILS_WITH(hive_replay_new(h, &cfg, &rb), HIVE_EINVAL, "beta = -1");
    cfg.beta = 0.4;
    cfg.samples_per_insert = INFINITY;
    ASSERT_FAILS_WITH(hive_replay_new(h, &cfg, &rb), HIVE_EINVAL, "samples_per_insert = inf");
    cfg.samples_per_insert = 1;
    cfg.error_buffer = -0.5;
    ASSERT_FAILS_WITH(hive_replay_new(h, &cfg, &rb), HIVE_EINVAL, "error_buffer = -0.5");
    cfg.error_buffer = 1;
    cfg.min_size_to_sample = 9;
    ASSERT_FAILS_WITH(hive_replay_new(h, &cfg, &rb), HIVE_EINVAL, "min_size_to_sample 9 is above the "
                      "capacity 8");
    assert_ptr_equal(rb, (hive_replay_t *)(uintptr_t)0x1234);   /* untouched */
    /* the store refuses an array it cannot hold: its own code and sentence */
    hive_replay_config_t huge = { .capacity = UINT64_C(1) << 20, .item_size = 1024 };
    ASSERT_FAILS_WITH(hive_replay_new(h, &huge, &rb), HIVE_EFULL, "object store full");
    assert_ptr_equal(rb, (hive_replay_t *)(uintptr_t)0x1234);

    cfg = (hive_replay_config_t){ .capacity = 8, .item_size = 8, .prioritized = 1, .alpha = 1 };
    assert_int_equal(hive_replay_new(h, &cfg, &good), HIVE_OK);
    uint64_t v = 3, keys[2] = { 0, 1 }, out = 9;
    double prio[2] = { 1, 2 };
    ASSERT_FAILS_WITH(hive_replay_push(NULL, &v), HIVE_EINVAL, "buffer is NULL");
    ASSERT_FAILS_WITH(hive_replay_push(good, NULL), HIVE_EINVAL, "item is NULL");
    ASSERT_FAILS_WITH(hive_replay_push_batch(NULL, &v, 1), HIVE_EINVAL, "buffer is NULL");
    ASSERT_FAILS_WITH(hive_replay_push_batch(good, NULL, 1), HIVE_EINVAL, "items is NULL");
    /* counts whose bytes wrap size_t (to 8) or pass PTRDIFF_MAX: refused,
     * nothing is claimed or read */
    ASSERT_FAILS_WITH(hive_replay_push_batch(good, &v, SIZE_MAX / 8 + 2), HIVE_EINVAL,
                      "more than any buffer can hold; nothing was pushed");
    ASSERT_FAILS_WITH(hive_replay_push_batch(good, &v, (size_t)PTRDIFF_MAX / 8 + 1), HIVE_EINVAL,
                      "items of 8 bytes");
    hive_replay_stats_t st0;
    assert_int_equal(hive_replay_stats(good, &st0), HIVE_OK);
    assert_int_equal(st0.inserts, 0);
    /* batch larger than the fill, and batch 0 */
    ASSERT_FAILS_WITH(hive_replay_sample(good, 1, NULL, &out, NULL, NULL, 0), HIVE_EINVAL,
                      "batch 1 is larger than the 0 items held");
    push_n(good, 0, 2);
    ASSERT_FAILS_WITH(hive_replay_sample(good, 3, NULL, &out, NULL, NULL, HIVE_FOREVER), HIVE_EINVAL,
                      "batch 3 is larger than the 2 items held");
    ASSERT_FAILS_WITH(hive_replay_sample(good, 0, NULL, &out, NULL, NULL, 0), HIVE_EINVAL, "batch is 0");
    ASSERT_FAILS_WITH(hive_replay_sample(NULL, 1, NULL, &out, NULL, NULL, 0), HIVE_EINVAL,
                      "buffer is NULL");
    assert_int_equal(out, 9);
    /* priorities: NaN, negative, infinite, unknown keys, NULLs; nothing changes */
    hive_replay_stats_t st;
    prio[1] = NAN;
    ASSERT_FAILS_WITH(hive_replay_update_priorities(good, keys, prio, 2), HIVE_EINVAL,
                      "priority 1 is nan");
    prio[1] = -2;
    ASSERT_FAILS_WITH(hive_replay_update_priorities(good, keys, prio, 2), HIVE_EINVAL,
                      "priority 1 is -2 (must be finite and >= 0); nothing was changed");
    prio[1] = INFINITY;
    ASSERT_FAILS_WITH(hive_replay_update_priorities(good, keys, prio, 2), HIVE_EINVAL, "is inf");
    prio[1] = 2;
    keys[1] = 2;
    ASSERT_FAILS_WITH(hive_replay_update_priorities(good, keys, prio, 2), HIVE_EINVAL,
                      "key 1 is 2, but only 2 keys were handed out");
    hive_replay_stats(good, &st);
    assert_true(st.total_priority == 2.0);          /* both still at 1 */
    assert_true(st.max_priority == 1.0);
    ASSERT_FAILS_WITH(hive_replay_update_priorities(NULL, keys, prio, 2), HIVE_EINVAL, "buffer is NULL");
    ASSERT_FAILS_WITH(hive_replay_update_priorities(good, NULL, prio, 2), HIVE_EINVAL, "keys is NULL");
    ASSERT_FAILS_WITH(hive_replay_update_priorities(good, keys, NULL, 2), HIVE_EINVAL,
                      "priorities is NULL");
    ASSERT_FAILS_WITH(hive_replay_stats(NULL, &st), HIVE_EINVAL, "buffer is NULL");
    ASSERT_FAILS_WITH(hive_replay_stats(good, NULL), HIVE_EINVAL, "out is NULL");
    ASSERT_FAILS_WITH(hive_replay_free(NULL), HIVE_EINVAL, "buffer is NULL");
    assert_int_equal(hive_replay_free(good), HIVE_OK);

    /* priorities on a uniform buffer */
    cfg.prioritized = 0;
    assert_int_equal(hive_replay_new(h, &cfg, &good), HIVE_OK);
    push_n(good, 0, 2);
    keys[1] = 1;
    ASSERT_FAILS_WITH(hive_replay_update_priorities(good, keys, prio, 2), HIVE_ESTATE, "not prioritized");
    assert_int_equal(hive_replay_free(good), HIVE_OK);
    finish(h);
}

/* ------------------------------------------------------- without replacement */

static double chi_square(const uint64_t *counts, const double *expect, int n)
{
    double chi = 0;
    for (int i = 0; i < n; i++)
        chi += (counts[i] - expect[i]) * (counts[i] - expect[i]) / expect[i];
    return chi;
}

/* Every key of the batch is distinct, and items match keys. */
static void assert_distinct(const uint64_t *items, const uint64_t *keys, size_t batch, uint64_t nkeys)
{
    for (size_t i = 0; i < batch; i++) {
        if (items != NULL)
            assert_int_equal(items[i], keys[i]);
        assert_true(keys[i] < nkeys);
        for (size_t j = 0; j < i; j++)
            if (keys[i] == keys[j])
                fail_msg("batch of %zu: key %llu at %zu and %zu", batch,
                         (unsigned long long)keys[i], j, i);
    }
}

static void test_distinct_uniform(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_replay_t *rb = make(h, 300, 0, 0, 0, 4242);
    push_n(rb, 0, 100);
    /* 20000 batches of 10 out of 100: each key is in a batch with
     * probability 1/10, and first in it with probability 1/100 (the order
     * is random too). Chi-square, 99 degrees of freedom: below 148.2 with
     * probability 0.999. */
    enum { B = 10, ROUNDS = 20000 };
    uint64_t in_batch[100] = { 0 }, first[100] = { 0 }, rng = 5;
    uint64_t items[B], keys[B];
    for (int r = 0; r < ROUNDS; r++) {
        assert_int_equal(hive_replay_sample_ex(rb, B, HIVE_REPLAY_DISTINCT, r % 2 ? &rng : NULL,
                                               items, keys, NULL, 0), HIVE_OK);
        assert_distinct(items, keys, B, 100);
        for (int i = 0; i < B; i++)
            in_batch[keys[i]]++;
        first[keys[0]]++;
    }
    double e_in[100], e_first[100];
    for (int i = 0; i < 100; i++) {
        e_in[i] = ROUNDS * (double)B / 100;
        e_first[i] = ROUNDS / 100.0;
    }
    /* the in-batch counts are not independent draws (they are 10 at a
     * time without replacement), which only makes their spread smaller */
    double c1 = chi_square(in_batch, e_in, 100), c2 = chi_square(first, e_first, 100);
    printf("distinct uniform chi-square: in batch %.1f, first %.1f (critical 148.2)\n", c1, c2);
    assert_true(c1 < 148.2);
    assert_true(c2 < 148.2);

    /* a batch of everything held: each key exactly once; without out_keys,
     * and above the stack set (heap scratch) */
    uint64_t all[100];
    assert_int_equal(hive_replay_sample_ex(rb, 100, HIVE_REPLAY_DISTINCT, &rng, all, NULL, NULL, 0),
                     HIVE_OK);
    assert_distinct(all, all, 100, 100);
    push_n(rb, 100, 200);                            /* full: 300 items */
    uint64_t big_items[300], big_keys[300];
    double w[300];
    assert_int_equal(hive_replay_sample_ex(rb, 300, HIVE_REPLAY_DISTINCT, &rng, big_items, big_keys,
                                           w, 0), HIVE_OK);
    assert_distinct(big_items, big_keys, 300, 300);
    for (int i = 0; i < 300; i++)
        assert_true(w[i] == 1.0);
    /* flags 0 is hive_replay_sample: same stream, same samples */
    uint64_t a = 9, b = 9, ka[16], kb[16];
    assert_int_equal(hive_replay_sample_ex(rb, 16, 0, &a, NULL, ka, NULL, 0), HIVE_OK);
    assert_int_equal(hive_replay_sample(rb, 16, &b, NULL, kb, NULL, 0), HIVE_OK);
    assert_memory_equal(ka, kb, sizeof ka);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    finish(h);
}

static void test_distinct_prioritized(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_replay_t *rb = make(h, 4, 1, 1.0, 0.5, 7);
    push_n(rb, 0, 4);
    uint64_t keys4[4] = { 0, 1, 2, 3 };
    double prio[4] = { 1, 2, 3, 4 };
    assert_int_equal(hive_replay_update_priorities(rb, keys4, prio, 4), 4);
    /* batches of 2: the first draw follows p / 10, the second p_k / (10 - p_i)
     * given the first was i. Chi-square, 3 degrees of freedom: below 16.27
     * with probability 0.999. */
    enum { ROUNDS = 40000 };
    uint64_t c0[4] = { 0 }, c1[4] = { 0 }, rng = 11;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t items[2], keys[2];
        double w[2];
        assert_int_equal(hive_replay_sample_ex(rb, 2, HIVE_REPLAY_DISTINCT, &rng, items, keys, w, 0),
                         HIVE_OK);
        assert_distinct(items, keys, 2, 4);
        /* weights: (min leaf / leaf)^beta over the batch */
        uint64_t lo = keys[0] < keys[1] ? 0 : 1;
        assert_true(fabs(w[lo] - 1.0) < 1e-12);
        assert_true(fabs(w[1 - lo] - pow(prio[keys[lo]] / prio[keys[1 - lo]], 0.5)) < 1e-12);
        c0[keys[0]]++;
        c1[keys[1]]++;
    }
    double e0[4], e1[4];
    for (int k = 0; k < 4; k++) {
        e0[k] = ROUNDS * prio[k] / 10;
        double p = 0;
        for (int i = 0; i < 4; i++)
            if (i != k)
                p += prio[i] / 10 * prio[k] / (10 - prio[i]);
        e1[k] = ROUNDS * p;
    }
    double x0 = chi_square(c0, e0, 4), x1 = chi_square(c1, e1, 4);
    printf("distinct prioritized chi-square: first %.2f, second %.2f (critical 16.27)\n", x0, x1);
    assert_true(x0 < 16.27);
    assert_true(x1 < 16.27);

    /* priority 0 is drawn only after every item with mass, uniformly */
    double z[4] = { 0, 0, 5, 0 };
    assert_int_equal(hive_replay_update_priorities(rb, keys4, z, 4), 4);
    uint64_t zc[4] = { 0 };
    for (int r = 0; r < 3000; r++) {
        uint64_t items[3], keys[3];
        assert_int_equal(hive_replay_sample_ex(rb, 3, HIVE_REPLAY_DISTINCT, &rng, items, keys, NULL, 0),
                         HIVE_OK);
        assert_distinct(items, keys, 3, 4);
        assert_int_equal(keys[0], 2);
        zc[keys[1]]++;
        zc[keys[2]]++;
    }
    assert_int_equal(zc[2], 0);
    for (int k = 0; k < 4; k++)                      /* 2000 each; a wide band */
        if (k != 2 && (zc[k] < 1700 || zc[k] > 2300))
            fail_msg("zero-priority key %d drawn %llu times, want about 2000", k,
                     (unsigned long long)zc[k]);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    finish(h);
}

static void test_distinct_bad_input(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_replay_t *rb = make(h, 8, 1, 1.0, 0.5, 7);
    push_n(rb, 0, 4);
    uint64_t keys[16];
    ASSERT_FAILS_WITH(hive_replay_sample_ex(rb, 5, HIVE_REPLAY_DISTINCT, NULL, NULL, keys, NULL, 0),
                      HIVE_EINVAL, "batch 5 is larger than the 4 items held");
    ASSERT_FAILS_WITH(hive_replay_sample_ex(rb, 9, HIVE_REPLAY_DISTINCT, NULL, NULL, keys, NULL, 0),
                      HIVE_EINVAL, "batch 9 is larger than the capacity 8");
    ASSERT_FAILS_WITH(hive_replay_sample_ex(rb, 1, 6, NULL, NULL, keys, NULL, 0), HIVE_EINVAL,
                      "unknown flags 0x6");
    ASSERT_FAILS_WITH(hive_replay_sample_ex(rb, 0, HIVE_REPLAY_DISTINCT, NULL, NULL, keys, NULL, 0),
                      HIVE_EINVAL, "batch is 0");
    ASSERT_FAILS_WITH(hive_replay_sample_ex(NULL, 1, HIVE_REPLAY_DISTINCT, NULL, NULL, keys, NULL, 0),
                      HIVE_EINVAL, "buffer is NULL");
    hive_replay_stats_t st;
    assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
    assert_int_equal(st.samples, 0);                 /* nothing counted */
    /* with replacement, a batch above the contents is refused as before */
    ASSERT_FAILS_WITH(hive_replay_sample_ex(rb, 5, 0, NULL, NULL, keys, NULL, 0), HIVE_EINVAL,
                      "batch 5 is larger than the 4 items held");
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    finish(h);
}

/* ------------------------------------------------------------------ keys */

/* Samplers work a row's key out from a watermark (the keys seen complete)
 * instead of reading it from the row: for every item size they special-
 * case and one they do not, capacities a power of two and not, in the
 * first lap (rows past the fill) and after many, with single pushes,
 * batches and a batch longer than the buffer (keys that are never
 * written), every key handed out must be one of the newest capacity
 * keys and name the item pushed with it (its bytes derived from the key). */
static void fill_keyed(unsigned char *it, size_t isz, uint64_t key)
{
    for (size_t b = 0; b < isz; b++)
        it[b] = (unsigned char)(key * 131 + b * 7 + (key >> 8));
}

static void check_keyed(hive_replay_t *rb, size_t isz, uint64_t cap, uint64_t pushed, uint64_t *rng,
                        unsigned char *items, unsigned char *want)
{
    uint64_t keys[64];
    uint64_t held = pushed < cap ? pushed : cap;
    size_t batch = held < 64 ? (size_t)held : 64;
    for (int distinct = 0; distinct < 2; distinct++) {
        assert_int_equal(hive_replay_sample_ex(rb, batch, distinct ? HIVE_REPLAY_DISTINCT : 0, rng,
                                               items, keys, NULL, 0), HIVE_OK);
        for (size_t i = 0; i < batch; i++) {
            assert_true(keys[i] < pushed && keys[i] + cap >= pushed);
            fill_keyed(want, isz, keys[i]);
            assert_memory_equal(items + i * isz, want, isz);
        }
    }
}

static void test_keys_from_watermark(void **state)
{
    (void)state;
    hive_t *h = engine();
    static const size_t sizes[] = { 8, 16, 32, 48, 64, 96, 128, 200 };
    static const uint64_t caps[] = { 7, 64 };
    unsigned char *items = malloc(200 * 200), *want = malloc(200);
    assert_non_null(items);
    assert_non_null(want);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (size_t ci = 0; ci < 2; ci++) {
            size_t isz = sizes[si];
            uint64_t cap = caps[ci], pushed = 0, rng = 9;
            for (int prioritized = 0; prioritized < 2; prioritized++) {
                hive_replay_config_t cfg = { .capacity = cap, .item_size = isz,
                                             .prioritized = prioritized, .alpha = 0.5, .seed = 3 };
                hive_replay_t *rb = NULL;
                assert_int_equal(hive_replay_new(h, &cfg, &rb), HIVE_OK);
                pushed = 0;
                for (int step = 0; step < 60; step++) {
                    /* single pushes, batches, and now and then a batch longer than the buffer */
                    uint64_t n = step % 7 == 6 ? cap + 3 : (uint64_t)(step % 5) + 1;
                    for (uint64_t i = 0; i < n; i++)
                        fill_keyed(items + i * isz, isz, pushed + i);
                    if (n == 1)
                        assert_int_equal(hive_replay_push(rb, items), HIVE_OK);
                    else
                        assert_int_equal(hive_replay_push_batch(rb, items, (size_t)n), HIVE_OK);
                    pushed += n;
                    check_keyed(rb, isz, cap, pushed, &rng, items, want);
                }
                assert_int_equal(hive_replay_free(rb), HIVE_OK);
            }
        }
    free(items);
    free(want);
    finish(h);
}

/* Pushes of keys 16 and 17, from a thread of their own (their rows' last
 * keys, 8 and 9, belong to a batch that writes late: they wait for it). */
static void *push_16_17(void *arg)
{
    push_n(arg, 16, 2);
    return NULL;
}

/* A batch that claimed its keys and writes them late: the pushes of the
 * next lap on its rows wait for it (a row's writers take turns in key
 * order), the other rows go on; samplers meanwhile and after hand out
 * only whole items with their own keys; a priority update of an item
 * whose row is claimed by a newer key is dropped, one of an item whose
 * row is not is applied. */
static void test_lagging_batch(void **state)
{
    (void)state;
    hive_t *h = engine();
    for (int prioritized = 0; prioritized < 2; prioritized++) {
        hive_replay_t *rb = make(h, 8, prioritized, 1.0, 0.5, 2);
        push_n(rb, 0, 8);                               /* keys 0..7 in rows 0..7 */
        uint64_t base = hive__replay_claim(rb, 6);      /* keys 8..13, rows 0..5, not written */
        assert_int_equal(base, 8);
        if (prioritized) {
            /* key 2's row is claimed by key 10 (dropped); key 6's is not yet (applied) */
            uint64_t k[2] = { 2, 6 };
            double p[2] = { 3.0, 5.0 };
            assert_int_equal(hive_replay_update_priorities(rb, k, p, 2), 1);
            hive_replay_stats_t st;
            hive_replay_stats(rb, &st);
            assert_true(fabs(st.total_priority - 12.0) < 1e-12);   /* 7 * 1 + 5 */
        }
        push_n(rb, 14, 2);                              /* keys 14, 15: rows 6, 7, not held */
        uint64_t items[8], keys[8], rng = 4;
        /* rows 0..5 still hold keys 0..5, whole; rows 6, 7 keys 14, 15 */
        assert_int_equal(hive_replay_sample_ex(rb, 8, HIVE_REPLAY_DISTINCT, &rng, items, keys, NULL, 0),
                         HIVE_OK);
        uint64_t seen = 0;
        for (int i = 0; i < 8; i++) {
            assert_int_equal(items[i], keys[i]);
            assert_true(keys[i] < 6 || keys[i] == 14 || keys[i] == 15);
            seen |= UINT64_C(1) << keys[i];
        }
        assert_int_equal(seen, 0xc03f);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, push_16_17, rb), 0);
        test_sleep_ms(20);
        hive_array_t a;
        assert_int_equal(hive_array_view(h, hive_replay_array(rb), &a), HIVE_OK);
        const _Atomic uint64_t *row0 = (const _Atomic uint64_t *)a.data;
        /* relaxed: key 16's push must not have begun; its row holds key 0 */
        assert_int_equal(atomic_load_explicit(row0, memory_order_relaxed), 0);
        uint64_t late[6] = { 8, 9, 10, 11, 12, 13 };
        hive__replay_write_claimed(rb, base, late, 6);  /* then 16 and 17 follow on rows 0, 1 */
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_int_equal(hive_replay_sample_ex(rb, 8, HIVE_REPLAY_DISTINCT, &rng, items, keys, NULL, 0),
                         HIVE_OK);
        seen = 0;
        for (int i = 0; i < 8; i++) {
            assert_int_equal(items[i], keys[i]);
            assert_true(keys[i] >= 10 && keys[i] < 18);
            seen |= UINT64_C(1) << (keys[i] - 10);
        }
        assert_int_equal(seen, 0xff);                   /* keys 10..17, each once */
        static const uint64_t want[8] = { 16, 17, 10, 11, 12, 13, 14, 15 };
        assert_memory_equal(a.data, want, sizeof want);
        if (prioritized) {
            hive_replay_stats_t st;
            hive_replay_stats(rb, &st);
            /* every row holds an item pushed with the largest priority, 5 */
            assert_true(fabs(st.total_priority - 8 * 5.0) < 1e-9);
            assert_int_equal(hive__replay_tree_check(rb), 0);
        }
        assert_int_equal(hive_replay_free(rb), HIVE_OK);
    }
    finish(h);
}

/* A batch of n consecutive keys, items equal to their keys. */
static void push_batch_keys(hive_replay_t *rb, uint64_t from, size_t n)
{
    uint64_t items[64];
    for (size_t i = 0; i < n; i++)
        items[i] = from + i;
    assert_int_equal(hive_replay_push_batch(rb, items, n), HIVE_OK);
}

static void *batch_128(void *arg)
{
    push_batch_keys(arg, 128, 32);
    return NULL;
}

/* A batch's rows are looked at all at once and taken with plain stores
 * when every previous turn is done (run_put); a row whose previous key is
 * claimed but not written sends the run to the row-by-row wait. Capacity
 * 64: keys 64..67 (rows 0..3) claimed and held back, batches 68..99 and
 * 100..127 go ahead (their previous keys are written), the batch 128..159
 * on rows 0..31 waits for rows 0..3 and writes none of its rows before
 * them; then every row holds the newest key claimed for it. */
static void test_batch_waits_for_its_rows(void **state)
{
    (void)state;
    hive_t *h = engine();
    for (int prioritized = 0; prioritized < 2; prioritized++) {
        hive_replay_t *rb = make(h, 64, prioritized, 1.0, 0.5, 3);
        push_batch_keys(rb, 0, 64);
        uint64_t base = hive__replay_claim(rb, 4);
        assert_int_equal(base, 64);
        push_batch_keys(rb, 68, 32);
        push_batch_keys(rb, 100, 28);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, batch_128, rb), 0);
        test_sleep_ms(20);
        hive_array_t a;
        assert_int_equal(hive_array_view(h, hive_replay_array(rb), &a), HIVE_OK);
        const _Atomic uint64_t *rows = (const _Atomic uint64_t *)a.data;
        for (int r = 4; r < 32; r++)    /* relaxed: the waiting batch must not have begun */
            assert_int_equal(atomic_load_explicit(&rows[r], memory_order_relaxed), 64 + r);
        uint64_t late[4] = { 64, 65, 66, 67 };
        hive__replay_write_claimed(rb, base, late, 4);
        assert_int_equal(pthread_join(th, NULL), 0);
        for (uint64_t r = 0; r < 64; r++) {
            uint64_t key;
            assert_int_equal(hive__replay_row_turn(rb, r, &key), 0);
            assert_int_equal(key, r < 32 ? 128 + r : 64 + r);
            assert_int_equal(atomic_load_explicit(&rows[r], memory_order_relaxed), key);
        }
        uint64_t items[64], keys[64], rng = 5;
        assert_int_equal(hive_replay_sample_ex(rb, 64, HIVE_REPLAY_DISTINCT, &rng, items, keys, NULL, 0),
                         HIVE_OK);
        for (int i = 0; i < 64; i++) {
            assert_int_equal(items[i], keys[i]);
            assert_true(keys[i] >= 96 && keys[i] < 160);
        }
        if (prioritized)
            assert_int_equal(hive__replay_tree_check(rb), 0);
        assert_int_equal(hive_replay_free(rb), HIVE_OK);
    }
    finish(h);
}

/* Runs of keys (src/rl/replay.c, "Runs of keys"): a thread whose single
 * pushes meet another producer's claims claims 32 keys at once and holds
 * the rest; the rows of held keys keep their older items (sampled with
 * their own keys, never the held key), stall neither a batch writer nor a
 * single pusher of the next lap, and a held key whose next lap is claimed
 * is given back (or found overwritten) and the item pushed with a fresh
 * claim. Items are their keys throughout. */
typedef struct late_batch { hive_replay_t *rb; uint64_t base; } late_batch_t;

static void *write_late(void *arg)
{
    late_batch_t *lb = arg;
    uint64_t items[128];
    for (uint64_t i = 0; i < 128; i++)
        items[i] = lb->base + i;
    test_sleep_ms(50);                      /* the held key's push comes first, most likely */
    hive__replay_write_claimed(lb->rb, lb->base, items, 128);
    return NULL;
}

static void *push_one_128(void *arg)
{
    uint64_t item = 128;
    assert_int_equal(hive_replay_push(arg, &item), HIVE_OK);
    return NULL;
}

static uint64_t lap_from;

static void *push_lap(void *arg)           /* a thread of its own: a lap of single claims */
{
    push_n(arg, lap_from, 128);
    return NULL;
}

/* Sample every row once: each item is its key; keys in [lo, hi) but for
 * the rows of the held keys [held_lo, held_hi), whose keys are a lap older
 * (their rows' turn words name the held keys). */
static void check_rows(hive_replay_t *rb, uint64_t lo, uint64_t hi, uint64_t held_lo, uint64_t held_hi)
{
    uint64_t items[128], keys[128], rng = 9;
    assert_int_equal(hive_replay_sample_ex(rb, 128, HIVE_REPLAY_DISTINCT, &rng, items, keys, NULL, 0),
                     HIVE_OK);
    bool row_seen[128] = { false };
    for (int i = 0; i < 128; i++) {
        assert_int_equal(items[i], keys[i]);
        uint64_t row = keys[i] % 128, named;
        assert_false(row_seen[row]);
        row_seen[row] = true;
        bool held = false;
        for (uint64_t k = held_lo; k < held_hi; k++)
            held |= k % 128 == row;
        assert_int_equal(hive__replay_row_turn(rb, row, &named), held ? 1 : 0);
        if (held) {
            assert_int_equal(keys[i] + 128, named);    /* the item a lap before the held key */
        } else {
            assert_int_equal(named, keys[i]);
            assert_true(keys[i] >= lo && keys[i] < hi);
        }
    }
    assert_int_equal(hive__replay_tree_check(rb), 0);
}

/* Another thread pushes keys from .. from + 127 (alone: one key a push),
 * then we push one item: a run from + 128 .. from + 159, whose first key
 * is written and the rest held. */
static void lap_then_ours(hive_replay_t *rb, uint64_t from)
{
    pthread_t th;
    lap_from = from;
    assert_int_equal(pthread_create(&th, NULL, push_lap, rb), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    check_rows(rb, from, from + 128, 0, 0);
    push_n(rb, from + 128, 1);
    hive_replay_stats_t st;
    hive_replay_stats(rb, &st);
    assert_int_equal(st.inserts, from + 160);
    check_rows(rb, from + 32, from + 129, from + 129, from + 160);
}

static void test_runs_of_keys(void **state)
{
    (void)state;
    hive_t *h = engine();
    for (int prioritized = 0; prioritized < 2; prioritized++) {
        hive_replay_t *rb = make(h, 128, prioritized, 1.0, 0.5, 3);
        hive_replay_stats_t st;
        push_n(rb, 0, 128);                             /* alone: one key a push */
        hive_replay_stats(rb, &st);
        assert_int_equal(st.inserts, 128);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, push_one_128, rb), 0);   /* key 128 */
        assert_int_equal(pthread_join(th, NULL), 0);
        push_n(rb, 129, 1);                             /* key 129: not the 128 we expected */
        push_n(rb, 130, 1);                             /* so a run: keys 130 .. 161, 130 written */
        hive_replay_stats(rb, &st);
        assert_int_equal(st.inserts, 162);
        check_rows(rb, 34, 131, 131, 162);              /* rows 3 .. 33 keep keys 3 .. 33 */
        if (prioritized) {
            /* key 5's row is held by key 133: dropped; key 130's applied */
            uint64_t k[2] = { 5, 130 };
            double p[2] = { 4.0, 2.0 };
            assert_int_equal(hive_replay_update_priorities(rb, k, p, 2), 1);
            hive_replay_stats(rb, &st);
            assert_true(fabs(st.total_priority - 129.0) < 1e-12);   /* 127 * 1 + 2 */
        }
        push_n(rb, 131, 1);                             /* the held key 131 */
        check_rows(rb, 34, 132, 132, 162);
        /* keys 162 .. 289 claimed, written late by another thread: the
         * next lap of the held keys 132 .. 161. Our push of key 132 finds
         * it claimed (the row given back) or its row overwritten, and
         * claims again: key 290, alone (our run's claim met no other), so
         * one key. The batch's rows over the held keys' TURN words do not
         * wait for us. */
        late_batch_t lb = { rb, hive__replay_claim(rb, 128) };
        assert_int_equal(lb.base, 162);
        assert_int_equal(pthread_create(&th, NULL, write_late, &lb), 0);
        push_n(rb, 290, 1);
        assert_int_equal(pthread_join(th, NULL), 0);
        hive_replay_stats(rb, &st);
        assert_int_equal(st.inserts, 291);
        check_rows(rb, 163, 291, 0, 0);
        /* another thread's lap of single pushes (one key a push, alone),
         * then ours: 419 is not the 291 we expected, so a run, 419 .. 450 */
        lap_then_ours(rb, 291);
        /* another lap over the held rows does not wait for them; our next
         * push finds its held key 420 overwritten and claims a fresh run */
        lap_then_ours(rb, 451);
        assert_int_equal(hive_replay_free(rb), HIVE_OK);
    }
    finish(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform_chi_square),
        cmocka_unit_test(test_distinct_uniform),
        cmocka_unit_test(test_distinct_prioritized),
        cmocka_unit_test(test_distinct_bad_input),
        cmocka_unit_test(test_array_is_shared),
        cmocka_unit_test(test_prioritized_follows_priorities),
        cmocka_unit_test(test_importance_weights),
        cmocka_unit_test(test_update_changes_distribution),
        cmocka_unit_test(test_wraparound_keeps_newest),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_rate_limiter_holds_ratio),
        cmocka_unit_test(test_rate_limiter_timeouts),
        cmocka_unit_test(test_every_sleeper_wakes),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_priority_limits),
        cmocka_unit_test(test_sum_tree_never_drifts),
        cmocka_unit_test(test_lazy_tree),
        cmocka_unit_test(test_tree_shapes),
        cmocka_unit_test(test_descent_out_of_mass),
        cmocka_unit_test(test_keys_from_watermark),
        cmocka_unit_test(test_lagging_batch),
        cmocka_unit_test(test_batch_waits_for_its_rows),
        cmocka_unit_test(test_runs_of_keys),
    };
    return cmocka_run_group_tests_name("replay", tests, NULL, NULL);
}
