/* test_sched.c - workers run posted jobs on their own thread, park when
 * idle (no CPU), are woken only when parked, and drop queued jobs at stop. */
#include "testutil.h"
#include "hive_impl.h"
#include "sched.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct tjob {
    hive__job_t job;
    _Atomic int *ran;          /* incremented when run */
    _Atomic int *dropped;      /* incremented when dropped at shutdown */
    _Atomic int *gate;         /* if set: spin until *gate != 0 (or stopping) */
    unsigned    expect_worker;
    _Atomic int *wrong_worker;
} tjob_t;

static void tjob_fn(hive__job_t *job, hive__worker_t *w)
{
    tjob_t *t = (tjob_t *)job;
    if (w == NULL) {
        atomic_fetch_add(t->dropped, 1);
        return;
    }
    if (hive__self != w || w->index != t->expect_worker)
        atomic_fetch_add(t->wrong_worker, 1);
    if (t->gate) {
        while (!atomic_load(t->gate) && !atomic_load(&w->sched->stopping))
            ;
    }
    atomic_fetch_add(t->ran, 1);
}

static hive_t *start(unsigned workers)
{
    hive_config_t cfg = { .workers = workers, .no_pin = 1 };
    hive_t *h = NULL;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    return h;
}

static void test_jobs_run_on_their_worker(void **state)
{
    (void)state;
    hive_t *h = start(3);
    static tjob_t jobs[300];
    _Atomic int ran = 0, dropped = 0, wrong = 0;
    for (unsigned i = 0; i < 300; i++) {
        jobs[i] = (tjob_t){ .job.fn = tjob_fn, .ran = &ran, .dropped = &dropped,
                            .expect_worker = i % 3, .wrong_worker = &wrong };
        hive__sched_post(&h->sched, i % 3, &jobs[i].job);
    }
    WAIT_UNTIL(atomic_load(&ran) == 300, 10000);
    assert_int_equal(atomic_load(&wrong), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&dropped), 0);
}

static unsigned parked_count(hive_t *h)
{
    return atomic_load(&h->sched.nparked);
}

static void test_wake_only_when_parked(void **state)
{
    (void)state;
    hive_t *h = start(2);
    WAIT_UNTIL(parked_count(h) == 2 && atomic_load(&h->sched.w[0].parked) == 1, 5000);
    uint64_t wakes0 = atomic_load(&h->sched.wakes);

    /* a parked worker is woken by a post: exactly one wake */
    static tjob_t blocker, more[1000];
    _Atomic int ran = 0, dropped = 0, wrong = 0, gate = 0;
    blocker = (tjob_t){ .job.fn = tjob_fn, .ran = &ran, .dropped = &dropped, .gate = &gate,
                        .expect_worker = 0, .wrong_worker = &wrong };
    hive__sched_post(&h->sched, 0, &blocker.job);
    WAIT_UNTIL(atomic_load(&h->sched.w[0].parked) == 0 && atomic_load(&h->sched.w[0].jobs) == 1, 5000);
    assert_int_equal(atomic_load(&h->sched.wakes), wakes0 + 1);

    /* while it is busy, posts make no wake at all */
    for (unsigned i = 0; i < 1000; i++) {
        more[i] = (tjob_t){ .job.fn = tjob_fn, .ran = &ran, .dropped = &dropped,
                            .expect_worker = 0, .wrong_worker = &wrong };
        hive__sched_post(&h->sched, 0, &more[i].job);
    }
    assert_int_equal(atomic_load(&h->sched.wakes), wakes0 + 1);
    atomic_store(&gate, 1);
    WAIT_UNTIL(atomic_load(&ran) == 1001, 5000);
    assert_int_equal(atomic_load(&wrong), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_shutdown_drops_queued_jobs(void **state)
{
    (void)state;
    hive_t *h = start(1);
    static tjob_t blocker, queued[10];
    _Atomic int ran = 0, dropped = 0, wrong = 0, gate = 0;
    blocker = (tjob_t){ .job.fn = tjob_fn, .ran = &ran, .dropped = &dropped, .gate = &gate,
                        .wrong_worker = &wrong };
    hive__sched_post(&h->sched, 0, &blocker.job);
    WAIT_UNTIL(atomic_load(&h->sched.w[0].jobs) == 1, 5000);
    for (unsigned i = 0; i < 10; i++) {
        queued[i] = (tjob_t){ .job.fn = tjob_fn, .ran = &ran, .dropped = &dropped,
                              .wrong_worker = &wrong };
        hive__sched_post(&h->sched, 0, &queued[i].job);
    }
    /* the running job ends when it sees the engine stopping */
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&ran), 1);        /* the running one finished */
    assert_int_equal(atomic_load(&dropped), 10);   /* the queued ones never ran */
}

/* A job stored in the hand-off slot of a worker that sees the stop before
 * it looks there is not lost: the worker takes it as it gives the slot up,
 * and the stop drops it (fn with w == NULL). The worker is made to hold the
 * slot by hand, while a job keeps it busy: that is the moment a spawn finds
 * the slot held and stores its job there. */
static _Atomic int blocker_started;

/* Say it runs (seq_cst: after the worker's last look at its own fields
 * before this job), then run until the engine stops. */
static void blocker_fn(hive__job_t *job, hive__worker_t *w)
{
    (void)job;
    if (w == NULL)
        return;
    atomic_store(&blocker_started, 1);
    while (!atomic_load(&w->sched->stopping))
        ;
}

static void test_stop_drops_a_handed_job(void **state)
{
    (void)state;
    hive_t *h = start(1);
    static hive__job_t blocker;
    static tjob_t handed;
    _Atomic int ran = 0, dropped = 0, wrong = 0;
    atomic_store(&blocker_started, 0);
    blocker.fn = blocker_fn;
    hive__sched_post(&h->sched, 0, &blocker);
    WAIT_UNTIL(atomic_load(&blocker_started) == 1, 5000);
    /* the worker read held last before the blocker said it runs, and reads
     * it next after it sees the stop (seq_cst), which comes after this */
    h->sched.w[0].held = true;
    atomic_store(&h->sched.nodes[0].handoff, (uintptr_t)1);   /* worker 0's mark */
    handed = (tjob_t){ .job.fn = tjob_fn, .ran = &ran, .dropped = &dropped,
                       .wrong_worker = &wrong };
    hive__sched_spawn(&h->sched, &handed.job, 1, -1);
    assert_true(atomic_load(&h->sched.nodes[0].handoff) == (uintptr_t)&handed.job);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&ran), 0);         /* the handed job never ran ... */
    assert_int_equal(atomic_load(&dropped), 1);     /* ... it was dropped */
    assert_int_equal(atomic_load(&wrong), 0);
}

/* A job a worker took from the hand-off slot stays there as its
 * reservation while it runs (sched.c, HANDOFF_MARK): no other spinner
 * marks the slot and no spawn stores a job over it - the next spawn goes
 * to the ring and runs once the first ends - and the worker marks the slot
 * again when it is idle. One worker spinning for good (a long idle spin),
 * so that it holds the slot whenever it is idle. */
/* Workers start asleep: one job wakes worker 0, which then spins idle
 * (holding the slot) for as long as hive__idle_spin_ns says. */
static void wake_to_spin(hive_t *h)
{
    static tjob_t wake;
    static _Atomic int ran, dropped, wrong;
    atomic_store(&ran, 0);
    wake = (tjob_t){ .job.fn = tjob_fn, .ran = &ran, .dropped = &dropped, .wrong_worker = &wrong };
    hive__sched_post(&h->sched, 0, &wake.job);
    WAIT_UNTIL(atomic_load(&ran) == 1, 5000);
}

/* One worker (start(1)) spinning idle for a minute, holding node 0's
 * hand-off slot (its mark seen); *spin: the idle spin to put back after
 * the shutdown. */
static hive_t *spinning_worker(uint64_t *spin)
{
    *spin = atomic_load(&hive__idle_spin_ns);
    atomic_store(&hive__idle_spin_ns, (uint64_t)60 * 1000000000u);
    hive_t *h = start(1);
    wake_to_spin(h);
    WAIT_UNTIL(atomic_load(&h->sched.nodes[0].handoff) == (uintptr_t)1, 5000);   /* worker 0's mark */
    return h;
}

/* A first job held at gate and a second one, both counting into the same
 * counters. */
static void gated_pair(tjob_t *first, tjob_t *second, _Atomic int *ran, _Atomic int *dropped,
                       _Atomic int *wrong, _Atomic int *gate)
{
    *first = (tjob_t){ .job.fn = tjob_fn, .ran = ran, .dropped = dropped, .gate = gate,
                       .wrong_worker = wrong };
    *second = (tjob_t){ .job.fn = tjob_fn, .ran = ran, .dropped = dropped, .wrong_worker = wrong };
}

static void test_a_handed_job_reserves_the_slot(void **state)
{
    (void)state;
    uint64_t spin;
    hive_t *h = spinning_worker(&spin);
    _Atomic uintptr_t *slot = &h->sched.nodes[0].handoff;
    static tjob_t first, second;
    _Atomic int ran = 0, dropped = 0, wrong = 0, gate = 0;
    gated_pair(&first, &second, &ran, &dropped, &wrong, &gate);
    hive__sched_spawn(&h->sched, &first.job, 1, -1);
    /* handed: the slot holds the job, taken or not (the take writes nothing) */
    assert_true(atomic_load(slot) == (uintptr_t)&first.job);
    WAIT_UNTIL(atomic_load(&h->sched.w[0].jobs) >= 2, 5000);   /* the waking job + first */
    assert_true(atomic_load(slot) == (uintptr_t)&first.job);
    hive__sched_spawn(&h->sched, &second.job, 1, -1);           /* the ring, not the slot */
    assert_true(atomic_load(slot) == (uintptr_t)&first.job);
    assert_true(hive__ring_nonempty(&h->sched.nodes[0].ring[1]));
    assert_int_equal(atomic_load(&ran), 0);
    atomic_store(&gate, 1);
    WAIT_UNTIL(atomic_load(&ran) == 2, 5000);
    WAIT_UNTIL(atomic_load(slot) == (uintptr_t)1, 5000);         /* idle: marked again */
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    atomic_store(&hive__idle_spin_ns, spin);
    assert_int_equal(atomic_load(&dropped), 0);
    assert_int_equal(atomic_load(&wrong), 0);
}

/* A stop while a job taken from the slot runs: the job ends (it sees the
 * stop), its worker frees the slot on its way out, and a job queued behind
 * it is dropped, not lost. */
static void test_stop_while_a_handed_job_runs(void **state)
{
    (void)state;
    uint64_t spin;
    hive_t *h = spinning_worker(&spin);
    static tjob_t first, second;
    _Atomic int ran = 0, dropped = 0, wrong = 0, gate = 0;
    gated_pair(&first, &second, &ran, &dropped, &wrong, &gate);
    hive__sched_spawn(&h->sched, &first.job, 1, -1);
    WAIT_UNTIL(atomic_load(&h->sched.w[0].jobs) >= 2, 5000);
    hive__sched_spawn(&h->sched, &second.job, 1, -1);
    hive__sched_begin_stop(&h->sched);      /* the gated job ends on the stop */
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    atomic_store(&hive__idle_spin_ns, spin);
    assert_int_equal(atomic_load(&ran), 1);
    assert_int_equal(atomic_load(&dropped), 1);
    assert_int_equal(atomic_load(&wrong), 0);
}

/* A job taken from the slot that waits (helps) frees the slot for the
 * other spinners, and the worker marks it again once it is idle. A task
 * submitted from this thread (handed: the worker holds the slot) waits for
 * an object only this thread seals. */
static int wait_for_arg(hive_ctx_t *ctx)
{
    const void *p;
    hive_ref_t r = *(const hive_ref_t *)hive_arg(ctx, 0, NULL);
    return hive_get(hive_engine(ctx), r, HIVE_FOREVER, &p, NULL);
}

static int echo_arg(hive_ctx_t *ctx)
{
    size_t n;
    const void *p = hive_arg(ctx, 0, &n);
    return hive_return(ctx, p, n);
}

static void test_a_waiting_handed_job_frees_the_slot(void **state)
{
    (void)state;
    uint64_t spin;
    hive_t *h = spinning_worker(&spin);
    _Atomic uintptr_t *slot = &h->sched.nodes[0].handoff;
    void *data;
    hive_ref_t obj, task;
    assert_int_equal(hive_create(h, 8, &data, &obj), HIVE_OK);
    assert_int_equal(hive_submit(h, wait_for_arg, &HIVE_VAL(obj), 1, NULL, &task), HIVE_OK);
    /* it waits, helping: the slot is free (no other worker to mark it) */
    WAIT_UNTIL(atomic_load(slot) == 0, 5000);
    assert_int_equal(hive_seal(h, obj), HIVE_OK);
    const void *p;
    assert_int_equal(hive_get(h, task, 5000000000, &p, NULL), HIVE_OK);
    WAIT_UNTIL(atomic_load(slot) == (uintptr_t)1, 5000);
    assert_int_equal(hive_release(h, task), HIVE_OK);
    assert_int_equal(hive_release(h, obj), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    atomic_store(&hive__idle_spin_ns, spin);
}

/* A small task a user thread submits to a worker spinning with the slot
 * is handed to it RUNNING (task.c, hand_small): no claim. A cancel then
 * asks a running task - the task sees hive_cancelled() and its result
 * fails with HIVE_ECANCELED - and the worker marks the slot again after. */
static _Atomic int cancel_seen, handed_started;

static int until_cancelled(hive_ctx_t *ctx)
{
    atomic_store(&handed_started, 1);
    for (long i = 0; i < 20000000000L && !hive_cancelled(ctx); i++)
        sched_yield();
    atomic_store(&cancel_seen, hive_cancelled(ctx));
    return 0;                         /* the cancel decides: HIVE_ECANCELED all the same */
}

static void test_a_handed_task_is_running(void **state)
{
    (void)state;
    uint64_t spin;
    hive_t *h = spinning_worker(&spin);
    _Atomic uintptr_t *slot = &h->sched.nodes[0].handoff;
    atomic_store(&cancel_seen, 0);
    atomic_store(&handed_started, 0);
    uint64_t handoffs = atomic_load(&h->sched.w[0].handoffs);
    hive_ref_t r;
    assert_int_equal(hive_submit(h, until_cancelled, NULL, 0, NULL, &r), HIVE_OK);
    /* handed: the slot holds the job (its reservation) as it runs */
    assert_true(atomic_load(slot) != (uintptr_t)1 && atomic_load(slot) != 0);
    WAIT_UNTIL(atomic_load(&handed_started) == 1, 5000);
    assert_int_equal(atomic_load(&h->sched.w[0].handoffs), handoffs + 1);
    assert_int_equal(hive_cancel(h, r), HIVE_OK);
    const void *p;
    assert_int_equal(hive_get(h, r, 5000000000, &p, NULL), HIVE_ECANCELED);
    assert_int_equal(atomic_load(&cancel_seen), 1);
    assert_int_equal(hive_cancel(h, r), HIVE_ESTATE);   /* finished */
    assert_int_equal(hive_release(h, r), HIVE_OK);
    WAIT_UNTIL(atomic_load(slot) == (uintptr_t)1, 5000);   /* idle: marked again */
    /* and a plain handed task returns its value */
    int64_t seventy_seven = 77;
    assert_int_equal(hive_submit(h, echo_arg, &HIVE_VAL(seventy_seven), 1, NULL, &r), HIVE_OK);
    size_t size;
    assert_int_equal(hive_get(h, r, 5000000000, &p, &size), HIVE_OK);
    assert_int_equal(size, sizeof(int64_t));
    assert_int_equal(*(const int64_t *)p, 77);
    assert_int_equal(hive_release(h, r), HIVE_OK);
    assert_int_equal(atomic_load(&h->sched.w[0].handoffs), handoffs + 2);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    atomic_store(&hive__idle_spin_ns, spin);
}

/* A small task handed to a worker that sees the stop before it runs it is
 * dropped (its result fails), never run, and nothing of it is lost: the
 * worker is busy in a job, holding the slot by hand as in
 * test_stop_drops_a_handed_job, when the submit hands the task over. */
static _Atomic int dropped_task_ran;

static int must_not_run(hive_ctx_t *ctx)
{
    (void)ctx;
    atomic_store(&dropped_task_ran, 1);
    return 0;
}

/* with_arg: a task with an argument (its body in the record's inline
 * line, handed as a job); else a bare one (handed as its record alone) */
static void stop_drops_a_handed_task(bool with_arg)
{
    hive_t *h = start(1);
    static hive__job_t blocker;
    atomic_store(&blocker_started, 0);
    atomic_store(&dropped_task_ran, 0);
    blocker.fn = blocker_fn;
    hive__sched_post(&h->sched, 0, &blocker);
    WAIT_UNTIL(atomic_load(&blocker_started) == 1, 5000);
    h->sched.w[0].held = true;
    atomic_store(&h->sched.nodes[0].handoff, (uintptr_t)1);   /* worker 0's mark */
    hive_ref_t r;
    int64_t one = 1;
    assert_int_equal(hive_submit(h, must_not_run, with_arg ? &HIVE_VAL(one) : NULL, with_arg, NULL, &r),
                     HIVE_OK);
    uintptr_t v = atomic_load(&h->sched.nodes[0].handoff);
    assert_true(v != (uintptr_t)1 && v != 0);                  /* handed, not queued */
    assert_int_equal(v & 3, with_arg ? 0 : 2);                 /* a job, or a record bare */
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&dropped_task_ran), 0);
}

static void test_stop_drops_a_handed_task(void **state)
{
    (void)state;
    stop_drops_a_handed_task(true);
    stop_drops_a_handed_task(false);
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* An idle engine uses no CPU: workers spin for microseconds, then park. */
static void test_idle_engine_uses_no_cpu(void **state)
{
    (void)state;
    hive_config_t cfg = { .workers = 8, .no_pin = 1 };   /* more workers than cores */
    hive_t *h = NULL;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    WAIT_UNTIL(parked_count(h) == 8, 5000);
    double before = cpu_seconds();
    test_sleep_ms(1000);
    double used = cpu_seconds() - before;
    /* 8 spinning workers would burn ~2 s of CPU on 2 cores; parked ones ~0 */
    if (used > 0.05)
        fail_msg("idle engine used %.3f s of CPU in 1 s", used);
    assert_int_equal(parked_count(h), 8);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* A lone job in a busy worker's deque is left to its owner for a moment
 * (sched.c, LONE_GRACE_NS), then stolen: an owner that never takes it back
 * (here it spins on a flag only that job sets, without helping) does not
 * keep it from running. Workers 0 and 1 each spawn one job on their own
 * deque and block; worker 2 (or worker 1, before its own owner job comes
 * up) must steal both - one at a time: a thief times one lone job and
 * must not starve the other. */
#define LONE_OWNERS 2
typedef struct lone_owner {
    tjob_t      t;
    hive__job_t lone;
    _Atomic int lone_ran, lone_where;
} lone_owner_t;

static void lone_fn(hive__job_t *job, hive__worker_t *w)
{
    lone_owner_t *o = HIVE_CONTAINER_OF(job, lone_owner_t, lone);
    atomic_store(&o->lone_where, w != NULL ? (int)w->index : -1);
    atomic_store(&o->lone_ran, 1);
}

static void lone_owner_fn(hive__job_t *job, hive__worker_t *w)
{
    lone_owner_t *o = (lone_owner_t *)job;
    if (w == NULL) {
        atomic_fetch_add(o->t.dropped, 1);
        return;
    }
    if (w->index != o->t.expect_worker)
        atomic_fetch_add(o->t.wrong_worker, 1);
    hive__sched_spawn(w->sched, &o->lone, hive__prio_lane(HIVE_PRIO_NORMAL), -1);
    while (!atomic_load(&o->lone_ran) && !atomic_load(&w->sched->stopping))
        ;                            /* blocks without helping: only a thief runs it */
    atomic_fetch_add(o->t.ran, 1);
}

static void test_lone_job_is_stolen_from_a_blocked_owner(void **state)
{
    (void)state;
    hive_t *h = start(LONE_OWNERS + 1);
    static lone_owner_t owners[LONE_OWNERS];
    _Atomic int ran = 0, dropped = 0, wrong = 0;
    uint64_t steals0 = 0;
    for (unsigned i = 0; i <= LONE_OWNERS; i++)
        steals0 += atomic_load(&h->sched.w[i].steals);
    for (unsigned i = 0; i < LONE_OWNERS; i++) {
        owners[i] = (lone_owner_t){ .t = { .job.fn = lone_owner_fn, .ran = &ran,
                                           .dropped = &dropped, .expect_worker = i,
                                           .wrong_worker = &wrong },
                                    .lone.fn = lone_fn, .lone_where = -1 };
        hive__sched_post(&h->sched, i, &owners[i].t.job);
    }
    WAIT_UNTIL(atomic_load(&ran) == LONE_OWNERS, 10000);
    assert_int_equal(atomic_load(&wrong), 0);
    uint64_t steals = 0;
    for (unsigned i = 0; i <= LONE_OWNERS; i++)
        steals += atomic_load(&h->sched.w[i].steals);
    for (unsigned i = 0; i < LONE_OWNERS; i++) {   /* stolen: run by another worker */
        int where = atomic_load(&owners[i].lone_where);
        if (where < 0 || where > LONE_OWNERS || where == (int)i)
            fail_msg("owner %u's lone job ran on worker %d", i, where);
    }
    assert_int_equal(steals, steals0 + LONE_OWNERS);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&dropped), 0);
}

/* A worker that spawns onto its own deque and then blocks without helping
 * must wake a parked worker to run the job (sched.c: the spawn handshake,
 * whose fence is the parker's membarrier, or a seq_cst push without it).
 * Worker 0 spawns one job per round and waits for it; worker 1, idle,
 * spins a microsecond and parks, and the rounds start at varying moments
 * of its way to sleep. A lost wake-up leaves the job queued while the
 * other worker sleeps: seen parked in the same park a second apart, the
 * owner runs the job itself and the round counts as lost. */
#define RACE_ROUNDS 3000
typedef struct race_owner {
    hive__job_t job, child;
    _Atomic int child_ran, done, lost, saw_parked;
    unsigned    delay;
} race_owner_t;

static void race_child_fn(hive__job_t *job, hive__worker_t *w)
{
    (void)w;
    race_owner_t *o = HIVE_CONTAINER_OF(job, race_owner_t, child);
    atomic_store(&o->child_ran, 1);
}

static void race_owner_fn(hive__job_t *job, hive__worker_t *w)
{
    race_owner_t *o = HIVE_CONTAINER_OF(job, race_owner_t, job);
    if (w == NULL) {
        atomic_store(&o->done, 1);
        return;
    }
    for (volatile unsigned i = 0; i < o->delay; i++)
        ;
    if (atomic_load(&w->sched->nparked) != 0)
        atomic_fetch_add(&o->saw_parked, 1);
    hive__sched_spawn(w->sched, &o->child, hive__prio_lane(HIVE_PRIO_NORMAL), -1);
    /* A second without the job run: lost, if the other worker sat parked
     * (parked set, the same park) for another second meanwhile; a worker
     * that is merely slow to get a core (a loaded machine) is waited for */
    hive__worker_t *other = &w->sched->w[1 - w->index];
    uint64_t look = test_now_ns() + 1000000000u, parks = 0;
    bool parked_seen = false;
    while (!atomic_load(&o->child_ran) && !atomic_load(&w->sched->stopping)) {
        if (test_now_ns() < look)
            continue;
        bool parked = atomic_load(&other->parked) != 0;
        uint64_t p = atomic_load(&other->parks);
        if (parked && parked_seen && p == parks) {
            atomic_fetch_add(&o->lost, 1);
            while (!atomic_load(&o->child_ran) && hive__sched_help(w, NULL, NULL))
                ;                        /* run it here, to go on counting */
            break;
        }
        parked_seen = parked;
        parks = p;
        look = test_now_ns() + 1000000000u;
    }
    atomic_store(&o->done, 1);
}

static void spawn_wakes_parked(bool fenced)
{
    atomic_store(&hive__sched_fenced_push, fenced);
    uint64_t spin = atomic_load(&hive__idle_spin_ns);
    atomic_store(&hive__idle_spin_ns, 1000);
    hive_t *h = start(2);
    assert_int_equal(h->sched.asym, !fenced);   /* this kernel has membarrier */
    static race_owner_t o;
    int lost = 0, parked = 0;
    for (unsigned r = 0; r < RACE_ROUNDS; r++) {
        o = (race_owner_t){ .job.fn = race_owner_fn, .child.fn = race_child_fn,
                            .delay = (r * 37) % 400 };
        hive__sched_post(&h->sched, 0, &o.job);
        uint64_t deadline = test_now_ns() + 10000000000u;
        while (!atomic_load(&o.done)) {
            if (test_now_ns() > deadline)
                fail_msg("round %u: the owner job did not finish in 10 s", r);
            sched_yield();
        }
        lost += atomic_load(&o.lost);
        parked += atomic_load(&o.saw_parked);
        if (r % 3 != 0)
            usleep(r % 61);              /* let worker 1 get to different points of parking */
    }
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    atomic_store(&hive__idle_spin_ns, spin);
    atomic_store(&hive__sched_fenced_push, false);
    if (lost != 0)
        fail_msg("%s: %d of %d spawned jobs waited on a worker that slept through them (lost wake-ups)",
                 fenced ? "seq_cst push" : "membarrier", lost, RACE_ROUNDS);
    if (parked == 0)
        fail_msg("%s: no spawn found a parked worker in %d rounds: the test tested nothing",
                 fenced ? "seq_cst push" : "membarrier", RACE_ROUNDS);
}

static void test_spawn_wakes_a_parked_worker(void **state)
{
    (void)state;
    spawn_wakes_parked(false);
    spawn_wakes_parked(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jobs_run_on_their_worker),
        cmocka_unit_test(test_wake_only_when_parked),
        cmocka_unit_test(test_shutdown_drops_queued_jobs),
        cmocka_unit_test(test_stop_drops_a_handed_job),
        cmocka_unit_test(test_a_handed_job_reserves_the_slot),
        cmocka_unit_test(test_a_waiting_handed_job_frees_the_slot),
        cmocka_unit_test(test_stop_while_a_handed_job_runs),
        cmocka_unit_test(test_a_handed_task_is_running),
        cmocka_unit_test(test_stop_drops_a_handed_task),
        cmocka_unit_test(test_idle_engine_uses_no_cpu),
        cmocka_unit_test(test_lone_job_is_stolen_from_a_blocked_owner),
        cmocka_unit_test(test_spawn_wakes_a_parked_worker),
    };
    return cmocka_run_group_tests_name("sched", tests, NULL, NULL);
}
