/*
 * stress/envpool.c - every step's result delivered exactly once, to the
 * right id, under async send/recv with uneven step costs, interleaved with
 * sync steps, on 1, 2 and 4 synthetic nodes.
 *
 * The env is a counter: its observation is (its id, how many steps it has
 * taken in its life, a checksum of both), and a step costs a spin that
 * depends on id and count, so envs finish out of order. The driver keeps,
 * per env, whether it is in flight and the count it expects next. Every
 * received row must name an env that is in flight, carry that env's id and
 * the expected count and checksum (a row written to the wrong slot, a
 * result delivered twice or to the wrong id, or a lost one - the driver
 * would wait on it, or send to a still-busy env - fails). Sends go to
 * random subsets of the idle envs, with random batch sizes. Each run is
 * driven from a user thread and then from a task (a worker: it steps envs
 * itself); the cheap runs (no spin) take the inline path, where the
 * calling worker steps a whole batch alone, and the echo runs (each batch
 * sent straight back from a task, the cost flipping between cheap and
 * dear) go from sends stepped at once to sends through the rings and
 * back, with both kinds in flight together. Two runs pause at random
 * (up to ~2x the 20 us a slice job stands) before their sends. The sync
 * runs step all envs back to back, the cost changing under them.
 * Results come back through each stepping worker's result ring: runs with
 * rings of two entries make most go through the overflow stack, and runs
 * with dear steps (the owner sleeps while it waits) check the wake pair
 * with the engine's membarrier and without it (fences on both sides).
 */
#include "testutil.h"
#include "hive_impl.h"

#include <stdatomic.h>

/* envpool.c, for tests: the entries of a worker's result ring at most */
extern unsigned hive__envpool_res_cap;

typedef struct counter { int64_t id, life; } counter_t;

/* a step's cost unit: 0 makes steps cheap (stepped inline); the echo runs
 * change it while workers step (relaxed: any value read is a valid cost) */
static _Atomic uint64_t spin_ns = 300;
/* 0, or the longest pause (ns, drawn at random) before each send of
 * drive(): pauses around the 20 us a slice job stands with nothing to do
 * make sends land while a job stands, as its stand runs out and after it
 * ended (the post-or-see pair at its end) */
static uint64_t pause_max_ns;

static int ctr_init(void *s, const void *config, unsigned id)
{
    (void)config;
    ((counter_t *)s)->id = id;
    return 0;
}
static void ctr_observe(const counter_t *c, int64_t *obs)
{
    obs[0] = c->id;
    obs[1] = c->life;
    obs[2] = c->id * 1000003 + c->life * 7919;
}
static void ctr_reset(void *s, uint64_t seed, void *obs)
{
    (void)seed;
    ctr_observe(s, obs);
}
static void ctr_step(void *s, const void *action, void *obs, float *r, int *d)
{
    counter_t *c = s;
    int32_t a;
    memcpy(&a, action, sizeof a);
    hive_env_spin((uint64_t)((c->id * 37 + c->life * 11) % 7) *
                  atomic_load_explicit(&spin_ns, memory_order_relaxed));
    c->life++;
    ctr_observe(c, obs);
    *r = (float)a;                       /* the action comes back as the reward */
    *d = c->life % 5 == 0;
}
static const hive_env_class_t ctr_class = {
    .name = "counter", .state_size = sizeof(counter_t), .obs_dtype = HIVE_I64, .obs_ndim = 1,
    .obs_shape = { 3 }, .act_dtype = HIVE_I32, .init = ctr_init, .reset = ctr_reset, .step = ctr_step,
};

#define MAXN 64

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void check_row(const hive_envpool_batch_t *b, size_t i, bool *busy, int64_t *life,
                      int32_t *want_reward)
{
    int32_t id = ((const int32_t *)b->env_id.data)[i];
    const int64_t *o = (const int64_t *)b->obs.data + 3 * i;
    if (id < 0 || id >= MAXN || !busy[id])
        fail_msg("row %zu: env %d was not in flight", i, id);
    if (o[0] != id || o[1] != life[id] || o[2] != id * 1000003 + o[1] * 7919)
        fail_msg("row %zu: env %d carries (%lld, %lld, %lld), expected life %lld", i, id,
                 (long long)o[0], (long long)o[1], (long long)o[2], (long long)life[id]);
    if (((const float *)b->reward.data)[i] != (float)want_reward[id])
        fail_msg("env %d: reward %g, sent action %d", id, ((const float *)b->reward.data)[i],
                 want_reward[id]);
    if (((const uint8_t *)b->done.data)[i] != (life[id] > 0 && life[id] % 5 == 0))
        fail_msg("env %d: done %d at life %lld", id, ((const uint8_t *)b->done.data)[i],
                 (long long)life[id]);
    busy[id] = false;
}

static void drive(hive_t *h, size_t n, size_t batch, int rounds)
{
    hive_envpool_opts_t o = { .num_envs = n, .batch_size = batch };
    hive_envpool_t *p;
    assert_int_equal(hive_envpool_new(h, &ctr_class, &o, &p), HIVE_OK);
    bool busy[MAXN] = { false };
    int64_t life[MAXN] = { 0 };
    int32_t want_reward[MAXN] = { 0 };
    uint64_t delivered = 0, sent = 0;
    size_t inflight = 0;
    for (int r = 0; r < rounds; r++) {
        if (r % 50 == 49 && inflight == 0) {      /* now and then a sync step */
            int32_t act[MAXN];
            for (size_t i = 0; i < n; i++)
                act[i] = want_reward[i] = (int32_t)(next_rand() % 100);
            hive_array_t a = { .data = act, .dtype = HIVE_I32, .ndim = 1, .shape = { (int64_t)n },
                               .strides = { 4 } };
            hive_envpool_batch_t b;
            for (size_t i = 0; i < n; i++)
                busy[i] = true, life[i]++;
            assert_int_equal(hive_envpool_step(p, &a, &b), HIVE_OK);
            for (size_t i = 0; i < n; i++)
                check_row(&b, i, busy, life, want_reward);
            continue;
        }
        if (pause_max_ns) {
            struct timespec ts = { 0, (long)(next_rand() % pause_max_ns) };
            nanosleep(&ts, NULL);
        }
        /* send to a random subset of the idle envs */
        int32_t ids[MAXN], act[MAXN];
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!busy[i] && next_rand() % 3 != 0) {
                ids[k] = (int32_t)i;
                act[k] = want_reward[i] = (int32_t)(next_rand() % 1000);
                busy[i] = true;
                life[i]++;
                k++;
            }
        if (k > 0) {
            hive_array_t a = { .data = act, .dtype = HIVE_I32, .ndim = 1, .shape = { (int64_t)k },
                               .strides = { 4 } };
            assert_int_equal(hive_envpool_send(p, &a, ids, k), HIVE_OK);
            inflight += k;
            sent += k;
        }
        while (inflight >= batch && (inflight == n || next_rand() % 2)) {
            hive_envpool_batch_t b;
            assert_int_equal(hive_envpool_recv(p, HIVE_FOREVER, &b), HIVE_OK);
            assert_int_equal(b.n, batch);
            for (size_t i = 0; i < batch; i++)
                check_row(&b, i, busy, life, want_reward);
            inflight -= batch;
            delivered += batch;
        }
    }
    /* drain what fills whole batches; the rest is in flight at free */
    while (inflight >= batch) {
        hive_envpool_batch_t b;
        assert_int_equal(hive_envpool_recv(p, HIVE_FOREVER, &b), HIVE_OK);
        for (size_t i = 0; i < batch; i++)
            check_row(&b, i, busy, life, want_reward);
        inflight -= batch;
        delivered += batch;
    }
    size_t still = 0;
    for (size_t i = 0; i < n; i++)
        still += busy[i];
    assert_int_equal(still, inflight);
    assert_int_equal(delivered + inflight, sent);
    assert_int_equal(hive_envpool_free(p), HIVE_OK);
}

/* EnvPool's loop from a task: each batch received is sent straight back,
 * and the step cost flips between cheap and dear every `flip` rounds, so
 * the pool goes from sends stepped at once (step_now, alone once every
 * ring-sent env is received) to sends through the rings and back, with
 * results of both kinds in flight together. */
static void drive_echo(hive_t *h, size_t n, size_t batch, int rounds, int flip)
{
    hive_envpool_opts_t o = { .num_envs = n, .batch_size = batch };
    hive_envpool_t *p;
    assert_int_equal(hive_envpool_new(h, &ctr_class, &o, &p), HIVE_OK);
    bool busy[MAXN];
    int64_t life[MAXN] = { 0 };
    int32_t want_reward[MAXN] = { 0 }, ids[MAXN], act[MAXN];
    for (size_t i = 0; i < n; i++)
        busy[i] = true;
    assert_int_equal(hive_envpool_async_reset(p), HIVE_OK);
    size_t inflight = n;
    hive_envpool_batch_t b;
    for (int r = 0; r < rounds; r++) {
        if (r % flip == flip - 1)
            atomic_store_explicit(&spin_ns, (r / flip) % 2 ? 0 : 300, memory_order_relaxed);
        if (r % flip == flip / 2) {
            /* now and then: receive everything, one sync step of all (a
             * cheap one is stepped by this worker alone), send all again */
            while (inflight > 0) {
                assert_int_equal(hive_envpool_recv(p, HIVE_FOREVER, &b), HIVE_OK);
                for (size_t i = 0; i < batch; i++)
                    check_row(&b, i, busy, life, want_reward);
                inflight -= batch;
            }
            for (size_t i = 0; i < n; i++) {
                ids[i] = (int32_t)i;
                act[i] = want_reward[i] = (int32_t)(next_rand() % 1000);
                busy[i] = true;
                life[i]++;
            }
            hive_array_t all = { .data = act, .dtype = HIVE_I32, .ndim = 1,
                                 .shape = { (int64_t)n }, .strides = { 4 } };
            assert_int_equal(hive_envpool_step(p, &all, &b), HIVE_OK);
            for (size_t i = 0; i < n; i++)
                check_row(&b, i, busy, life, want_reward);
            for (size_t i = 0; i < n; i++) {
                act[i] = want_reward[i] = (int32_t)(next_rand() % 1000);
                busy[i] = true;
                life[i]++;
            }
            assert_int_equal(hive_envpool_send(p, &all, ids, n), HIVE_OK);
            inflight = n;
        }
        assert_int_equal(hive_envpool_recv(p, HIVE_FOREVER, &b), HIVE_OK);
        assert_int_equal(b.n, batch);
        for (size_t i = 0; i < batch; i++) {
            ids[i] = ((const int32_t *)b.env_id.data)[i];
            check_row(&b, i, busy, life, want_reward);
        }
        inflight -= batch;
        for (size_t i = 0; i < batch; i++) {
            act[i] = want_reward[ids[i]] = (int32_t)(next_rand() % 1000);
            busy[ids[i]] = true;
            life[ids[i]]++;
        }
        hive_array_t a = { .data = act, .dtype = HIVE_I32, .ndim = 1,
                           .shape = { (int64_t)batch }, .strides = { 4 } };
        assert_int_equal(hive_envpool_send(p, &a, ids, batch), HIVE_OK);
        inflight += batch;
    }
    while (inflight >= batch) {
        assert_int_equal(hive_envpool_recv(p, HIVE_FOREVER, &b), HIVE_OK);
        for (size_t i = 0; i < batch; i++)
            check_row(&b, i, busy, life, want_reward);
        inflight -= batch;
    }
    assert_int_equal(hive_envpool_free(p), HIVE_OK);
}

/* Sync steps back to back, the cost unit changing every 64 steps (0, 30,
 * 300 and 3000 ns: chunks of many envs down to one), a random pause now
 * and then: every env stepped exactly once per step, its row in place -
 * the claims of chunks by home workers and thieves (the caller after its
 * grace, the other workers after their own share), batch after batch. */
static void drive_sync(hive_t *h, size_t n, int rounds)
{
    hive_envpool_opts_t o = { .num_envs = n };
    hive_envpool_t *p;
    assert_int_equal(hive_envpool_new(h, &ctr_class, &o, &p), HIVE_OK);
    bool busy[MAXN] = { false };
    int64_t life[MAXN] = { 0 };
    int32_t want_reward[MAXN] = { 0 }, act[MAXN];
    hive_array_t a = { .data = act, .dtype = HIVE_I32, .ndim = 1, .shape = { (int64_t)n },
                       .strides = { 4 } };
    static const uint64_t unit[] = { 0, 30, 300, 3000 };
    for (int r = 0; r < rounds; r++) {
        atomic_store_explicit(&spin_ns, unit[(r / 64) % 4], memory_order_relaxed);
        if (next_rand() % 16 == 0) {
            struct timespec ts = { 0, (long)(next_rand() % 30000) };
            nanosleep(&ts, NULL);
        }
        for (size_t i = 0; i < n; i++) {
            act[i] = want_reward[i] = (int32_t)(next_rand() % 1000);
            busy[i] = true;
            life[i]++;
        }
        hive_envpool_batch_t b;
        assert_int_equal(hive_envpool_step(p, &a, &b), HIVE_OK);
        assert_int_equal(b.n, n);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(((const int32_t *)b.env_id.data)[i], (int32_t)i);
            check_row(&b, i, busy, life, want_reward);
        }
    }
    assert_int_equal(hive_envpool_free(p), HIVE_OK);
    atomic_store_explicit(&spin_ns, 300, memory_order_relaxed);
}

typedef struct drive_args { size_t n, batch; int rounds; int flip; } drive_args_t;

static int drive_task(hive_ctx_t *ctx)
{
    const drive_args_t *a = hive_arg(ctx, 0, NULL);
    if (a->flip < 0)
        drive_sync(hive_engine(ctx), a->n, a->rounds);
    else if (a->flip)
        drive_echo(hive_engine(ctx), a->n, a->batch, a->rounds, a->flip);
    else
        drive(hive_engine(ctx), a->n, a->batch, a->rounds);
    return 0;
}

/* The pool driven from a user thread, then from a task (a worker caller:
 * it steps its own slice, helps with the others, and steps cheap batches
 * alone, inline). */
/* drive_task with a from a task of h, then shut h down. */
static void drive_from_task_and_shut(hive_t *h, drive_args_t a)
{
    hive_ref_t r;
    const void *v;
    assert_int_equal(hive_submit(h, drive_task, &HIVE_VAL(a), 1, NULL, &r), HIVE_OK);
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, &v, NULL), HIVE_OK);
    assert_int_equal(hive_release(h, r), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void run(const char *topology, size_t n, size_t batch, int rounds)
{
    hive_config_t cfg = { .topology = topology };
    hive_t *h;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    drive(h, n, batch, rounds);
    drive_from_task_and_shut(h, (drive_args_t){ n, batch, rounds, 0 });
}

static void test_envpool_stress(void **state)
{
    (void)state;
    int rounds = 4000 / TEST_SCALE;
    run("pack:1 numa:1 core:2 pu:1", 16, 4, rounds);
    run("pack:2 numa:1 core:2 pu:1", 64, 7, rounds);
    run("pack:4 numa:1 core:1 pu:1", 33, 1, rounds);
    run("pack:2 numa:1 core:1 pu:1", 40, 40, rounds / 4);
    pause_max_ns = 45000;                /* sends before, during and after jobs stand */
    run("pack:1 numa:1 core:2 pu:1", 16, 4, rounds / 4);
    run("pack:2 numa:1 core:2 pu:1", 33, 5, rounds / 4);
    pause_max_ns = 0;
    /* rings of two results: the rest through the overflow stack */
    hive__envpool_res_cap = 2;
    run("pack:1 numa:1 core:2 pu:1", 16, 4, rounds / 2);
    run("pack:2 numa:1 core:2 pu:1", 64, 7, rounds / 2);
    hive__envpool_res_cap = 1024;
    /* dear steps (up to ~20 us): the owner sleeps in its waits, woken by
     * the pushers - with the membarrier pair, then with fences alone */
    atomic_store(&spin_ns, 3000);
    for (int fenced = 0; fenced < 2; fenced++) {
        atomic_store(&hive__sched_fenced_push, fenced != 0);
        run("pack:1 numa:1 core:2 pu:1", 16, 4, rounds / 8);
        run("pack:2 numa:1 core:2 pu:1", 33, 5, rounds / 8);
    }
    atomic_store(&hive__sched_fenced_push, false);
    atomic_store(&spin_ns, 0);           /* cheap steps: the inline path */
    run("pack:1 numa:1 core:2 pu:1", 16, 4, rounds);
    run("pack:2 numa:1 core:2 pu:1", 33, 5, rounds);
    /* the echo loop from a task, the cost flipping between cheap and dear */
    /* batch | n; flip: rounds between cost flips (long cheap stretches let
     * the pool's cost estimate settle, so most of their sends are inline) */
    static const struct { const char *topo; size_t n, batch; int flip; } echo[] = {
        { "pack:1 numa:1 core:2 pu:1", 4, 2, 1000 },
        { "pack:1 numa:1 core:2 pu:1", 8, 4, 97 },
        { "pack:2 numa:1 core:2 pu:1", 15, 5, 97 },
        { "pack:1 numa:1 core:4 pu:1", 16, 2, 1000 },
    };
    for (size_t k = 0; k < sizeof echo / sizeof echo[0]; k++) {
        hive_config_t cfg = { .topology = echo[k].topo };
        hive_t *h;
        assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
        atomic_store(&spin_ns, 0);
        drive_args_t a = { echo[k].n, echo[k].batch, rounds,
                           echo[k].flip < rounds ? echo[k].flip : rounds / 2 + 1 };
        drive_from_task_and_shut(h, a);
    }
    atomic_store(&spin_ns, 300);
    /* sync steps back to back, from a user thread and from a task */
    static const struct { const char *topo; size_t n; } syncs[] = {
        { "pack:1 numa:1 core:2 pu:1", 4 },
        { "pack:1 numa:1 core:2 pu:1", 9 },
        { "pack:2 numa:1 core:2 pu:1", 37 },
        { "pack:1 numa:1 core:3 pu:1", 64 },
    };
    for (size_t k = 0; k < sizeof syncs / sizeof syncs[0]; k++) {
        hive_config_t cfg = { .topology = syncs[k].topo };
        hive_t *h;
        assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
        drive_sync(h, syncs[k].n, rounds / 2);
        drive_from_task_and_shut(h, (drive_args_t){ syncs[k].n, syncs[k].n, rounds / 2, -1 });
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envpool_stress),
    };
    return cmocka_run_group_tests_name("stress_envpool", tests, NULL, NULL);
}
