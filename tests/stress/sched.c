/*
 * stress/sched.c - posting to workers from several threads while they park
 * and wake. Every job must run exactly once, on the worker it was posted to;
 * a lost wake-up shows as jobs that never run (the deadline fails the test).
 * Posters pause now and then so that workers really park between bursts.
 *
 * A lane's first job: find_job skips priority lanes that never held a job
 * (sched.h, lanes_used). In fresh engines, the first HIGH and LOW jobs are
 * spawned from inside a task (own deque) and from a client (node ring)
 * while the workers scan and park; every one must run exactly once (a job
 * in a lane the workers keep skipping never runs: the deadline fails).
 *
 * The hand-off slot (sched.c): client threads spawn jobs from outside the
 * engine while the workers go idle, spin holding the slot, give it up and
 * park, and while synchronous tasks (submit, get) make a worker take the
 * slot before its result is sealed; at the end a burst of slow jobs meets
 * the shutdown. Every job must run or be dropped exactly once (one lost in
 * the slot never does: the count fails), and some must have been handed
 * off (else the test proved nothing about the slot).
 */
#include "testutil.h"
#include "ds/pool.h"
#include "hive_impl.h"

#include <pthread.h>

#define POSTERS 4

typedef struct sjob {
    hive__job_t job;
    uint32_t    id;
    unsigned    worker;
} sjob_t;

static _Atomic uint8_t *ran;          /* run count per job id */
static _Atomic long misplaced, dropped;

static void sjob_fn(hive__job_t *job, hive__worker_t *w)
{
    sjob_t *j = (sjob_t *)job;
    if (w == NULL)
        atomic_fetch_add(&dropped, 1);
    else {
        if (w->index != j->worker)
            atomic_fetch_add(&misplaced, 1);
        atomic_fetch_add_explicit(&ran[j->id], 1, memory_order_relaxed);
    }
    hive__pool_free(j, sizeof *j);
}

typedef struct poster {
    hive_t  *h;
    uint32_t first, count;
} poster_t;

static void *post_loop(void *arg)
{
    poster_t *p = arg;
    unsigned nw = hive_num_workers(p->h);
    uint64_t rng = 88172645463325252ull ^ p->first;
    for (uint32_t i = 0; i < p->count; i++) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        sjob_t *j = hive__pool_alloc(sizeof *j);
        assert_non_null(j);
        j->job.fn = sjob_fn;
        j->id = p->first + i;
        j->worker = (unsigned)(rng >> 33) % nw;
        hive__sched_post(&p->h->sched, j->worker, &j->job);
        if ((rng & 0xfff) == 0)
            test_sleep_ms(1);                 /* let workers park */
    }
    return NULL;
}

static void test_post_park_wake(void **state)
{
    (void)state;
    const uint32_t per = 500000 / TEST_SCALE, total = per * POSTERS;
    ran = calloc(total, 1);
    hive_config_t cfg = { .workers = 3, .no_pin = 1 };
    hive_t *h;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    pthread_t th[POSTERS];
    poster_t ps[POSTERS];
    for (unsigned i = 0; i < POSTERS; i++) {
        ps[i] = (poster_t){ .h = h, .first = i * per, .count = per };
        assert_int_equal(pthread_create(&th[i], NULL, post_loop, &ps[i]), 0);
    }
    for (unsigned i = 0; i < POSTERS; i++)
        pthread_join(th[i], NULL);
    uint64_t runs = 0;
    uint64_t deadline = test_now_ns() + 60ull * 1000000000u;
    for (;;) {
        runs = 0;
        for (unsigned i = 0; i < h->sched.n; i++)
            runs += atomic_load(&h->sched.w[i].jobs);
        if (runs >= total || test_now_ns() > deadline)
            break;
        test_sleep_ms(1);
    }
    uint64_t parks = 0;
    for (unsigned i = 0; i < h->sched.n; i++)
        parks += atomic_load(&h->sched.w[i].parks);
    uint64_t wakes = atomic_load(&h->sched.wakes);
    printf("sched stress: %u jobs, %llu parks, %llu wakes\n", total,
           (unsigned long long)parks, (unsigned long long)wakes);
    /* a wake ends one park: never more wakes than parks, none for busy workers */
    assert_true(wakes <= parks);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&dropped), 0);
    assert_int_equal(atomic_load(&misplaced), 0);
    for (uint32_t i = 0; i < total; i++)
        if (atomic_load(&ran[i]) != 1)
            fail_msg("job %u ran %u times", i, (unsigned)atomic_load(&ran[i]));
    free((void *)ran);
}

/* ------------------------------------------------------- a lane's first job */

#define LANE_ROUNDS (400 / TEST_SCALE)
#define LANE_KIDS   8
#define LANE_WAIT_NS ((int64_t)60 * 1000000000)   /* against hangs only */

static _Atomic uint32_t lane_runs[3];

/* Bump the count of the lane its one argument names. */
static int lane_leaf(hive_ctx_t *ctx)
{
    unsigned lane = *(const unsigned *)hive_arg(ctx, 0, NULL);
    atomic_fetch_add_explicit(&lane_runs[lane], 1, memory_order_relaxed);
    return 0;
}

static int prio_of_lane(unsigned lane)
{
    return lane == 0 ? HIVE_PRIO_HIGH : lane == 2 ? HIVE_PRIO_LOW : HIVE_PRIO_NORMAL;
}

/* From a worker: LANE_KIDS leaves in the HIGH and LOW lanes (their first
 * jobs in this engine), then wait for all of them. */
static int lane_parent(hive_ctx_t *ctx)
{
    hive_t *e = hive_engine(ctx);
    hive_ref_t r[LANE_KIDS];
    for (unsigned k = 0; k < LANE_KIDS; k++) {
        unsigned lane = k % 2 ? 2u : 0u;
        hive_opts_t o = { .priority = prio_of_lane(lane) };
        if (hive_submit(e, lane_leaf, &HIVE_VAL(lane), 1, &o, &r[k]) != HIVE_OK)
            return 1;
    }
    int bad = hive_wait(e, r, LANE_KIDS, LANE_KIDS, LANE_WAIT_NS, NULL) != LANE_KIDS;
    for (unsigned k = 0; k < LANE_KIDS; k++)
        hive_release(e, r[k]);
    return bad;
}

static void test_first_job_of_a_lane(void **state)
{
    (void)state;
    for (unsigned round = 0; round < LANE_ROUNDS; round++) {
        for (unsigned l = 0; l < 3; l++)
            atomic_store(&lane_runs[l], 0);
        hive_config_t cfg = { .workers = 2, .no_pin = 1 };
        hive_t *h;
        assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
        unsigned normal = 1, client_lane = round % 2 ? 2u : 0u;
        hive_opts_t co = { .priority = prio_of_lane(client_lane) };
        hive_ref_t p, c;
        if (round % 3 == 0)
            test_sleep_ms(1);                 /* now and then: workers parked first */
        assert_int_equal(hive_submit(h, lane_parent, &HIVE_VAL(normal), 1, NULL, &p), HIVE_OK);
        assert_int_equal(hive_submit(h, lane_leaf, &HIVE_VAL(client_lane), 1, &co, &c), HIVE_OK);
        const void *d;
        assert_int_equal(hive_get(h, c, LANE_WAIT_NS, &d, NULL), HIVE_OK);
        assert_int_equal(hive_get(h, p, LANE_WAIT_NS, &d, NULL), HIVE_OK);
        hive_release(h, p);
        hive_release(h, c);
        assert_int_equal(hive_shutdown(h), HIVE_OK);
        /* each leaf ran exactly once: HIGH and LOW got LANE_KIDS / 2 each
         * from the parent, and the client's one */
        assert_int_equal(atomic_load(&lane_runs[0]), LANE_KIDS / 2 + (client_lane == 0));
        assert_int_equal(atomic_load(&lane_runs[2]), LANE_KIDS / 2 + (client_lane == 2));
        assert_int_equal(atomic_load(&lane_runs[1]), 0);
    }
}

/* ------------------------------------------------------------ hand-off */

#define HO_CLIENTS 3

typedef struct hjob {
    hive__job_t job;
    uint32_t    id;
    bool        slow;                 /* spin a little: the shutdown burst */
} hjob_t;

static _Atomic uint8_t *ho_seen;      /* per job: runs + drops */
static _Atomic long ho_dropped, ho_sync;

static void hjob_fn(hive__job_t *job, hive__worker_t *w)
{
    hjob_t *j = (hjob_t *)job;
    if (w == NULL)
        atomic_fetch_add(&ho_dropped, 1);
    else if (j->slow) {
        uint64_t until = test_now_ns() + 20000;
        while (test_now_ns() < until)
            ;
    }
    atomic_fetch_add_explicit(&ho_seen[j->id], 1, memory_order_relaxed);
    hive__pool_free(j, sizeof *j);
}

static int ho_task(hive_ctx_t *ctx)
{
    (void)ctx;
    atomic_fetch_add_explicit(&ho_sync, 1, memory_order_relaxed);
    return 0;
}

/* An asynchronous task in place of a job: a task takes the slot before its
 * seal (hive__sched_about_idle) while a job may wait in w->handed. */
static _Atomic long ho_ran;

static int ho_id_task(hive_ctx_t *ctx)
{
    uint32_t id = *(const uint32_t *)hive_arg(ctx, 0, NULL);
    atomic_fetch_add_explicit(&ho_seen[id], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ho_ran, 1, memory_order_relaxed);
    return 0;
}

typedef struct ho_client {
    hive_t  *h;
    uint32_t first, count;
    long     syncs;
} ho_client_t;

static void ho_spawn(hive_t *h, uint32_t id, bool slow)
{
    hjob_t *j = hive__pool_alloc(sizeof *j);
    assert_non_null(j);
    j->job.fn = hjob_fn;
    j->id = id;
    j->slow = slow;
    hive__sched_spawn(&h->sched, &j->job, 1, -1);
}

static void *ho_loop(void *arg)
{
    ho_client_t *c = arg;
    uint64_t rng = 0x9E3779B97F4A7C15ull ^ c->first;
    for (uint32_t i = 0; i < c->count; i++) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        if (rng & 0x10000) {
            uint32_t id = c->first + i;
            hive_ref_t r;
            assert_int_equal(hive_submit(c->h, ho_id_task, &HIVE_VAL(id), 1, NULL, &r), HIVE_OK);
            assert_int_equal(hive_release(c->h, r), HIVE_OK);
        } else
            ho_spawn(c->h, c->first + i, false);
        if ((rng & 7) == 0) {         /* a synchronous task: the seal-time take */
            hive_ref_t r;
            const void *d;
            assert_int_equal(hive_submit(c->h, ho_task, NULL, 0, NULL, &r), HIVE_OK);
            assert_int_equal(hive_get(c->h, r, LANE_WAIT_NS, &d, NULL), HIVE_OK);
            assert_int_equal(hive_release(c->h, r), HIVE_OK);
            c->syncs++;
        }
        if ((rng & 0x3ff) == 0)
            test_sleep_ms(1);         /* workers give the slot up and park */
        else if ((rng & 0x3f) == 0)
            usleep(30);               /* ... or spin through their whole spell */
    }
    return NULL;
}

static void test_handoff(void **state)
{
    (void)state;
    const uint32_t per = 200000 / TEST_SCALE, burst = 64, total = per * HO_CLIENTS + burst;
    ho_seen = calloc(total, 1);
    assert_non_null(ho_seen);
    atomic_store(&ho_dropped, 0);
    atomic_store(&ho_sync, 0);
    atomic_store(&ho_ran, 0);
    hive_config_t cfg = { .workers = 2, .no_pin = 1 };
    hive_t *h;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    pthread_t th[HO_CLIENTS];
    ho_client_t cs[HO_CLIENTS];
    for (unsigned i = 0; i < HO_CLIENTS; i++) {
        cs[i] = (ho_client_t){ .h = h, .first = i * per, .count = per };
        assert_int_equal(pthread_create(&th[i], NULL, ho_loop, &cs[i]), 0);
    }
    long syncs = 0;
    for (unsigned i = 0; i < HO_CLIENTS; i++) {
        pthread_join(th[i], NULL);
        syncs += cs[i].syncs;
    }
    /* every client's task and job has run before the burst (a task
     * queued at the shutdown would fail, not count) */
    WAIT_UNTIL(({ bool all = true;
                  for (uint32_t i = 0; all && i < per * HO_CLIENTS; i++)
                      all = atomic_load_explicit(&ho_seen[i], memory_order_relaxed) != 0;
                  all; }), 60000);
    /* slow jobs, then the shutdown at once: some are still queued or in
     * the slot, and are dropped instead */
    for (uint32_t i = 0; i < burst; i++)
        ho_spawn(h, per * HO_CLIENTS + i, true);
    uint64_t handoffs = 0;
    for (unsigned i = 0; i < h->sched.n; i++)
        handoffs += atomic_load(&h->sched.w[i].handoffs);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    printf("hand-off stress: %u jobs and tasks (%ld tasks, %ld dropped at shutdown), %ld sync "
           "tasks, %llu handed off\n", total, atomic_load(&ho_ran), atomic_load(&ho_dropped), syncs,
           (unsigned long long)handoffs);
    assert_true(handoffs > 0);
    assert_int_equal(atomic_load(&ho_sync), syncs);
    for (uint32_t i = 0; i < total; i++)
        if (atomic_load(&ho_seen[i]) != 1)
            fail_msg("job %u ran or was dropped %u times", i, (unsigned)atomic_load(&ho_seen[i]));
    free((void *)ho_seen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_post_park_wake),
        cmocka_unit_test(test_first_job_of_a_lane),
        cmocka_unit_test(test_handoff),
    };
    return cmocka_run_group_tests_name("stress_sched", tests, NULL, NULL);
}
