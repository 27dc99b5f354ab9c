/*
 * stress/actor.c - actors under 4+ user threads for a few seconds.
 *
 * THREADS user threads call ACTORS actors at random, each call at a random
 * priority (HIGH, NORMAL or LOW; NORMAL sometimes through NULL opts, the
 * method's own priority). A call carries (caller, lane, seq), seq counting
 * 1, 2, ... per caller, lane and actor. The method checks, in the actor's
 * own state:
 *  - no other call of the same actor is inside (an atomic flag, exchanged);
 *  - per caller and lane, seq is exactly the last one seen + 1 (order kept,
 *    nothing lost, nothing run twice);
 * and counts its runs. Each caller keeps a window of results in flight and
 * gets every one (its payload must be its own seq). At the end each actor's
 * counts must equal what was sent to it, and the grand total must match.
 *
 * A second phase races kills against the end of turns: actors are called
 * and killed at once, over and over, from two threads; every call must end
 * (OK or HIVE_EDEAD) and fini must run exactly once per actor that was built.
 */
#include "testutil.h"
#include "hive_impl.h"

#include <pthread.h>
#include <sched.h>

#define THREADS     4
#define ACTORS      100
#define WINDOW      256                  /* results in flight per caller */
#define RUN_MS      (TEST_SCALE > 1 ? 4000 / TEST_SCALE : 2000)   /* sanitizers: 500 ms */
#define DEADLINE_NS ((int64_t)30 * 1000000000)

static hive_t *h;
static hive_actor_t actors[ACTORS];
static _Atomic int stop_flag;
static _Atomic long executed, overlaps, out_of_order, bad_result, call_errors;

typedef struct call_arg {
    uint32_t caller;
    uint32_t lane;                       /* 0 HIGH, 1 NORMAL, 2 LOW */
    int64_t  seq;
} call_arg_t;

typedef struct lane_state {
    _Atomic int inside;
    int64_t     last[THREADS][3];        /* plain: only one call is ever inside */
    int64_t     runs;
} lane_state_t;

enum { M_CALL, M_REPORT };

static int call_method(void *self, hive_ctx_t *ctx)
{
    lane_state_t *s = self;
    const call_arg_t *a = hive_arg(ctx, 0, NULL);
    /* seq_cst exchange: a second call inside this actor would see our 1 */
    if (atomic_exchange(&s->inside, 1) != 0)
        atomic_fetch_add(&overlaps, 1);
    if (a->caller >= THREADS || a->lane >= 3 || a->seq != s->last[a->caller][a->lane] + 1)
        atomic_fetch_add(&out_of_order, 1);
    else
        s->last[a->caller][a->lane] = a->seq;
    s->runs++;
    atomic_fetch_add_explicit(&executed, 1, memory_order_relaxed);
    atomic_store(&s->inside, 0);
    return hive_return(ctx, &a->seq, sizeof a->seq);
}

typedef struct report {
    int64_t last[THREADS][3];
    int64_t runs;
} report_t;

static int report_method(void *self, hive_ctx_t *ctx)
{
    lane_state_t *s = self;
    report_t r;
    memcpy(r.last, s->last, sizeof r.last);
    r.runs = s->runs;
    return hive_return(ctx, &r, sizeof r);
}

static const hive_method_t methods[] = {
    [M_CALL]   = { "call",   call_method,   HIVE_PRIO_NORMAL },
    [M_REPORT] = { "report", report_method, HIVE_PRIO_NORMAL },
};
static const hive_actor_class_t lane_class = {
    .name = "Lanes", .size = sizeof(lane_state_t), .methods = methods, .nmethods = 2,
};

typedef struct caller {
    unsigned id;
    int64_t  sent[ACTORS][3];            /* calls made, per actor and lane */
    long     calls;
} caller_t;

static caller_t callers[THREADS];

/* With gates, some calls also take a ref to an object their caller
 * created and seals a few calls later, so their turns park the actor (or,
 * sealed already, do not): order and exactly-once must hold all the same.
 * A caller seals all its gates before it waits for any result, so no two
 * callers can wait for each other's gates. */
#define GATES       16
static bool with_gates;
static _Atomic long gated;

typedef struct inflight {
    hive_ref_t ref;
    int64_t    seq;
} inflight_t;

static void settle(inflight_t *f)
{
    const int64_t *p;
    size_t n;
    int rc = hive_get(h, f->ref, DEADLINE_NS, (const void **)&p, &n);
    if (rc != HIVE_OK || n != sizeof *p || *p != f->seq)
        atomic_fetch_add(&bad_result, 1);
    hive_release(h, f->ref);
}

static void *call_loop(void *arg)
{
    caller_t *c = arg;
    inflight_t window[WINDOW];
    unsigned head = 0, used = 0;
    hive_ref_t gates[GATES];
    unsigned ngates = 0;
    uint64_t rng = 0x2545F4914F6CDD1Dull * (c->id + 1);
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        unsigned ai = (unsigned)(rng % ACTORS);
        unsigned lane = (unsigned)((rng >> 16) % 3);
        call_arg_t a = { .caller = c->id, .lane = lane, .seq = c->sent[ai][lane] + 1 };
        hive_arg_t arg = HIVE_VAL(a);
        hive_opts_t o = { .priority = 1 - (int)lane };
        bool null_opts = lane == 1 && (rng >> 24) % 2 == 0;   /* the method's own: NORMAL */
        if (used == WINDOW || ngates == GATES) {
            for (; ngates > 0; ngates--) {
                if (hive_seal(h, gates[ngates - 1]) != HIVE_OK)
                    atomic_fetch_add(&call_errors, 1);
                hive_release(h, gates[ngates - 1]);
            }
            for (int k = 0; k < WINDOW / 4 && used > 0; k++, used--, head = (head + 1) % WINDOW)
                settle(&window[head]);
        }
        hive_arg_t args[2] = { arg };
        size_t nargs = 1;
        void *gp;
        if (with_gates && (rng >> 32) % 4 == 0 && hive_create(h, 8, &gp, &gates[ngates]) == HIVE_OK) {
            args[1] = HIVE_REF(gates[ngates]);
            ngates++;
            nargs = 2;
            atomic_fetch_add_explicit(&gated, 1, memory_order_relaxed);
        }
        inflight_t *f = &window[(head + used) % WINDOW];
        if (hive_call(h, actors[ai], M_CALL, args, nargs, null_opts ? NULL : &o, &f->ref) != HIVE_OK) {
            atomic_fetch_add(&call_errors, 1);
            continue;
        }
        f->seq = a.seq;
        c->sent[ai][lane] = a.seq;
        c->calls++;
        used++;
    }
    for (; ngates > 0; ngates--) {
        if (hive_seal(h, gates[ngates - 1]) != HIVE_OK)
            atomic_fetch_add(&call_errors, 1);
        hive_release(h, gates[ngates - 1]);
    }
    for (; used > 0; used--, head = (head + 1) % WINDOW)
        settle(&window[head]);
    return NULL;
}

static void lane_stress(bool gates)
{
    with_gates = gates;
    atomic_store(&stop_flag, 0);
    atomic_store(&executed, 0);
    atomic_store(&gated, 0);
    memset(callers, 0, sizeof callers);
    hive_config_t cfg = { .workers = 4, .store_bytes = 256u << 20, .no_pin = 1 };
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    for (unsigned i = 0; i < ACTORS; i++)
        assert_int_equal(hive_actor_new(h, &lane_class, NULL, 0, NULL, &actors[i]), HIVE_OK);

    pthread_t th[THREADS];
    for (unsigned i = 0; i < THREADS; i++) {
        callers[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, call_loop, &callers[i]), 0);
    }
    test_sleep_ms(RUN_MS);
    atomic_store(&stop_flag, 1);
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);

    long total = 0;
    for (unsigned i = 0; i < THREADS; i++)
        total += callers[i].calls;
    printf("actor stress: %ld calls (%ld waiting for a gate) by %d threads to %d actors in %d ms\n",
           total, atomic_load(&gated), THREADS, ACTORS, RUN_MS);
    if (gates)
        assert_true(atomic_load(&gated) > 0);
    assert_int_equal(atomic_load(&call_errors), 0);
    assert_int_equal(atomic_load(&bad_result), 0);
    assert_int_equal(atomic_load(&overlaps), 0);
    assert_int_equal(atomic_load(&out_of_order), 0);
    assert_int_equal(atomic_load(&executed), total);

    /* every call ran exactly once, on its own actor, the last in each lane last */
    for (unsigned a = 0; a < ACTORS; a++) {
        hive_ref_t r;
        assert_int_equal(hive_call(h, actors[a], M_REPORT, NULL, 0, NULL, &r), HIVE_OK);
        const report_t *rep;
        size_t n;
        assert_int_equal(hive_get(h, r, DEADLINE_NS, (const void **)&rep, &n), HIVE_OK);
        assert_int_equal(n, sizeof *rep);
        int64_t sent = 0;
        for (unsigned c = 0; c < THREADS; c++)
            for (unsigned l = 0; l < 3; l++) {
                sent += callers[c].sent[a][l];
                if (rep->last[c][l] != callers[c].sent[a][l])
                    fail_msg("actor %u caller %u lane %u: last seq %lld, sent %lld", a, c, l,
                             (long long)rep->last[c][l], (long long)callers[c].sent[a][l]);
            }
        assert_int_equal(rep->runs, sent);
        hive_release(h, r);
    }
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_actor_stress(void **state)
{
    (void)state;
    lane_stress(false);
}

/* The same with calls parked on their ref arguments (actor.c, "parking"). */
static void test_parked_calls_stress(void **state)
{
    (void)state;
    lane_stress(true);
}

/* ---------------------------------------------------- kills against turns */

#define KILL_MS     1500                 /* not scaled: the race window needs rounds */
#define KILL_ROUNDS 10000                /* at most (dead actors' records live until shutdown) */
#define KILL_BATCH  8

static _Atomic int kill_inits, kill_finis, kill_bad;
static hive_actor_t kill_targets[KILL_BATCH];
static _Atomic int kill_round_go, kill_round_done;

static int noop_method(void *self, hive_ctx_t *ctx)
{
    (void)ctx;
    (*(int64_t *)self)++;
    return 0;
}

static int count_init(void *self, hive_ctx_t *ctx)
{
    (void)self;
    (void)ctx;
    atomic_fetch_add(&kill_inits, 1);
    return 0;
}

static void count_fini(void *self)
{
    (void)self;
    atomic_fetch_add(&kill_finis, 1);
}

static const hive_method_t kill_methods[] = { { "noop", noop_method, HIVE_PRIO_NORMAL } };
static const hive_actor_class_t kill_class = {
    .name = "Victim", .size = sizeof(int64_t), .init = count_init, .fini = count_fini,
    .methods = kill_methods, .nmethods = 1,
};

/* The killer: waits for each round's go, kills the round's actors; a go
 * of -1 ends it. */
static void *killer(void *arg)
{
    (void)arg;
    for (int round = 1;; round++) {
        int go;
        while ((go = atomic_load(&kill_round_go)) < round && go >= 0)
            sched_yield();
        if (go < 0)
            break;
        for (int i = 0; i < KILL_BATCH; i++)
            if (hive_actor_kill(h, kill_targets[i]) != HIVE_OK)
                atomic_fetch_add(&kill_bad, 1);
        atomic_store(&kill_round_done, round);
    }
    return NULL;
}

static void test_kills_race_turns(void **state)
{
    (void)state;
    hive_config_t cfg = { .workers = 2, .store_bytes = 64u << 20, .no_pin = 1 };
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, killer, NULL), 0);
    long calls = 0;
    int rounds = 0;
    uint64_t end = test_now_ns() + (uint64_t)KILL_MS * 1000000u;
    for (int round = 1; round <= KILL_ROUNDS && test_now_ns() < end; round++) {
        hive_ref_t refs[KILL_BATCH][2];
        for (int i = 0; i < KILL_BATCH; i++) {
            assert_int_equal(hive_actor_new(h, &kill_class, NULL, 0, NULL, &kill_targets[i]), HIVE_OK);
            assert_int_equal(hive_call(h, kill_targets[i], 0, NULL, 0, NULL, &refs[i][0]), HIVE_OK);
        }
        atomic_store(&kill_round_go, round);
        for (int i = 0; i < KILL_BATCH; i++) {
            int rc = hive_call(h, kill_targets[i], 0, NULL, 0, NULL, &refs[i][1]);
            if (rc == HIVE_EDEAD)
                refs[i][1].id = 0;
            else if (rc != HIVE_OK)
                atomic_fetch_add(&kill_bad, 1);
        }
        for (int i = 0; i < KILL_BATCH; i++)
            for (int k = 0; k < 2; k++) {
                if (refs[i][k].id == 0)
                    continue;
                const void *p;
                int rc = hive_get(h, refs[i][k], DEADLINE_NS, &p, NULL);
                if (rc != HIVE_OK && rc != HIVE_EDEAD)
                    atomic_fetch_add(&kill_bad, 1);
                hive_release(h, refs[i][k]);
                calls++;
            }
        while (atomic_load(&kill_round_done) < round)
            sched_yield();
        rounds = round;
    }
    atomic_store(&kill_round_go, -1);
    pthread_join(th, NULL);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    /* every actor was killed: fini ran once for each one that was built (one
     * killed before its constructor's turn is never built, and gets none) */
    printf("kills: %d actors killed while called (%d built), %ld calls ended\n",
           rounds * KILL_BATCH, atomic_load(&kill_inits), calls);
    assert_int_equal(atomic_load(&kill_bad), 0);
    assert_true(atomic_load(&kill_inits) <= rounds * KILL_BATCH);
    assert_int_equal(atomic_load(&kill_finis), atomic_load(&kill_inits));
}

/* No call left behind: a turn that ends while a caller is between its
 * exchange on the mailbox head and its link (the stub re-pushed behind a
 * half-linked call: tail -> X -> stub with head == stub) must still see the
 * call. Rounds of a batch of calls then a get of each, with CPU hogs so that
 * callers and turns get preempted at every point; a lost call times out. */
static _Atomic int hog_stop;

static void *hog(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&hog_stop, memory_order_relaxed))
        ;
    return NULL;
}

typedef struct lb_counter { int64_t n; } lb_counter_t;

static int lb_inc(void *self, hive_ctx_t *ctx)
{
    lb_counter_t *c = self;
    c->n++;
    return hive_return(ctx, &c->n, sizeof c->n);
}

static const hive_method_t lb_methods[] = { { "inc", lb_inc, HIVE_PRIO_NORMAL } };
static const hive_actor_class_t lb_class = { .name = "lb", .size = sizeof(lb_counter_t),
                                              .methods = lb_methods, .nmethods = 1 };

typedef struct lb_caller {
    hive_t      *h;
    hive_actor_t a;
    uint64_t     until;
    int          rounds;
    int          failed;
    char         msg[200];
} lb_caller_t;

/* Rounds of a small batch of calls, then a get of each (bounded wait). */
static void *lb_call_loop(void *arg)
{
    lb_caller_t *c = arg;
    enum { BATCH_CALLS = 16 };
    hive_ref_t refs[BATCH_CALLS];
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    while (test_now_ns() < c->until && !c->failed) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        if ((rng & 7) == 0) {                       /* an idle gap: workers park */
            struct timespec gap = { 0, (long)(rng >> 40) % 200000 };
            nanosleep(&gap, NULL);
        }
        for (int i = 0; i < BATCH_CALLS; i++)
            if (hive_call(c->h, c->a, 0, NULL, 0, NULL, &refs[i]) != HIVE_OK) {
                c->failed = 1;
                snprintf(c->msg, sizeof c->msg, "hive_call: %s", hive_last_error());
                return NULL;
            }
        for (int i = 0; i < BATCH_CALLS; i++) {
            const void *p;
            int rc = hive_get(c->h, refs[i], 10000000000ll, &p, NULL);
            if (rc != HIVE_OK && !c->failed) {
                c->failed = 1;
                snprintf(c->msg, sizeof c->msg, "round %d call %d: %s", c->rounds, i, hive_last_error());
            }
            hive_release(c->h, refs[i]);
        }
        c->rounds++;
    }
    return NULL;
}

static void test_no_call_left_behind(void **state)
{
    (void)state;
    hive_t *h = test_engine(256u << 20, 2, NULL);
    hive_actor_t a;
    assert_int_equal(hive_actor_new(h, &lb_class, NULL, 0, NULL, &a), HIVE_OK);
    pthread_t hogs[2], callers[1];
    lb_caller_t cs[1];
    atomic_store(&hog_stop, 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&hogs[i], NULL, hog, NULL), 0);
    uint64_t until = test_now_ns() + 1500000000ull / TEST_SCALE;
    for (int i = 0; i < 1; i++) {   /* one caller: nobody else's call can rescue a lost one */
        cs[i] = (lb_caller_t){ .h = h, .a = a, .until = until };
        assert_int_equal(pthread_create(&callers[i], NULL, lb_call_loop, &cs[i]), 0);
    }
    int rounds = 0;
    for (int i = 0; i < 1; i++) {
        pthread_join(callers[i], NULL);
        rounds += cs[i].rounds;
    }
    atomic_store(&hog_stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(hogs[i], NULL);
    printf("no call left behind: %d rounds of 16 calls\n", rounds);
    for (int i = 0; i < 1; i++)
        if (cs[i].failed)
            fail_msg("caller %d: %s", i, cs[i].msg);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------ create, call, kill: churn */

/*
 * CHURNERS threads each make actors over and over from a class of their
 * own on the stack (four contents: with or without init/fini, two names),
 * scribble over that class at once (the engine keeps a shared copy per
 * content, never the caller's struct), call each CHURN_CALLS times on one
 * lane - the first call racing the publication of an actor that has no
 * constructor turn - and check the answers 1, 2, ... in order. Most are
 * killed (their records and class copies go back while others are made
 * from the same contents); the rest live until shutdown. Every init gets
 * exactly one fini.
 */
#define CHURNERS    3
#define CHURN_CALLS 8

static _Atomic long churn_inits, churn_finis, churn_bad, churn_made;

typedef struct churn { int64_t n; } churn_t;

static int churn_init(void *self, hive_ctx_t *ctx)
{
    (void)ctx;
    ((churn_t *)self)->n = 0;
    atomic_fetch_add(&churn_inits, 1);
    return 0;
}

static void churn_fini(void *self)
{
    (void)self;
    atomic_fetch_add(&churn_finis, 1);
}

static int churn_next(void *self, hive_ctx_t *ctx)
{
    churn_t *c = self;
    c->n++;
    return hive_return(ctx, &c->n, sizeof c->n);
}

static const hive_method_t churn_methods[] = { { "next", churn_next, HIVE_PRIO_NORMAL } };

static void churn_one(unsigned k)
{
    hive_actor_class_t cls = {
        .name = k & 1 ? "churn-a" : "churn-b", .size = sizeof(churn_t),
        .methods = churn_methods, .nmethods = 1,
        .init = k & 2 ? churn_init : NULL, .fini = k & 2 ? churn_fini : NULL,
    };
    hive_actor_t a;
    if (hive_actor_new(h, &cls, NULL, 0, NULL, &a) != HIVE_OK) {
        atomic_fetch_add(&churn_bad, 1);
        return;
    }
    atomic_fetch_add(&churn_made, 1);
    memset(&cls, 0, sizeof cls);         /* a call through this would find no method */
    hive_ref_t r[CHURN_CALLS];
    for (int i = 0; i < CHURN_CALLS; i++)
        if (hive_call(h, a, 0, NULL, 0, NULL, &r[i]) != HIVE_OK) {
            atomic_fetch_add(&churn_bad, 1);
            r[i].id = 0;
        }
    for (int i = 0; i < CHURN_CALLS; i++) {
        const int64_t *p;
        size_t n;
        if (r[i].id == 0)
            continue;
        if (hive_get(h, r[i], DEADLINE_NS, (const void **)&p, &n) != HIVE_OK || n != sizeof *p ||
            *p != i + 1)
            atomic_fetch_add(&churn_bad, 1);
        hive_release(h, r[i]);
    }
    if (k % 4 != 3 && hive_actor_kill(h, a) != HIVE_OK)
        atomic_fetch_add(&churn_bad, 1);
}

static void *churner(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t end = test_now_ns() + (uint64_t)RUN_MS * 1000000u;
    for (unsigned k = id; test_now_ns() < end; k += 1 + id)
        churn_one(k);
    return NULL;
}

static void test_create_call_kill_churn(void **state)
{
    (void)state;
    hive_config_t cfg = { .workers = 2, .store_bytes = 256u << 20, .no_pin = 1 };
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    pthread_t th[CHURNERS];
    for (uintptr_t i = 0; i < CHURNERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, churner, (void *)i), 0);
    for (unsigned i = 0; i < CHURNERS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    printf("actor churn: %ld actors made, %ld constructed\n", atomic_load(&churn_made),
           atomic_load(&churn_inits));
    assert_int_equal(atomic_load(&churn_bad), 0);
    assert_true(atomic_load(&churn_made) > 0);
    assert_int_equal(atomic_load(&churn_finis), atomic_load(&churn_inits));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_actor_stress),
        cmocka_unit_test(test_parked_calls_stress),
        cmocka_unit_test(test_kills_race_turns),
        cmocka_unit_test(test_no_call_left_behind),
        cmocka_unit_test(test_create_call_kill_churn),
    };
    return cmocka_run_group_tests_name("stress_actor", tests, NULL, NULL);
}
