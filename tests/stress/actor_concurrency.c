/*
 * stress/actor_concurrency.c - concurrent actors and actor pools under 4
 * user threads for a few seconds.
 *
 * Phase 1, groups: ACTORS actors whose default group runs 4 calls at once,
 * group W 1 and group S 2. THREADS user threads call them at random (actor,
 * method, priority); a call carries (caller, lane, seq), seq counting 1, 2,
 * ... per caller, lane, actor and group. The method checks, in side tables:
 *  - its group never has more than its limit inside (a counter);
 *  - start order: with `started` the number of calls of its (actor, group,
 *    caller, lane) that have begun, this one included, seq - started stays
 *    below the group's limit (the earlier calls not begun yet each hold a
 *    slot); with limit 1 (W) seq == started, the exact order;
 * and the caller gets each result (its own seq). At the end every
 * (actor, group, caller, lane) must have started exactly what was sent:
 * nothing lost, nothing run twice.
 *
 * Phase 2, restarts and kills: calls race a method that asks for a restart
 * now and then, and a thread that kills actors; init and fini check that no
 * call of their actor is inside; every call ends OK, failed (HIVE_ETASK,
 * its restart) or dead (HIVE_EDEAD), and fini runs once per built actor.
 *
 * Phase 3, pools: each thread owns a pool over its own actors (two default
 * ones, one that runs 3 calls at once) and submits bursts, fetching them in
 * order (exact seqs), out of order (each seq once) or by map; no actor
 * ever has two of its pool's calls inside.
 */
#include "testutil.h"
#include "hive_impl.h"

#include <pthread.h>
#include <sched.h>

#define THREADS     4
#define ACTORS      16
#define NG          3                    /* default, W, S */
#define WINDOW      128
#define RUN_MS      (TEST_SCALE > 1 ? 4000 / TEST_SCALE : 2000)
#define DEADLINE_NS ((int64_t)30 * 1000000000)

static hive_t *h;
static _Atomic int stop_flag;
static _Atomic long over_limit, out_of_order, bad_result, call_errors, executed;

static const unsigned limit_of[NG] = { 4, 1, 2 };

typedef struct side {                    /* per actor, outside the state (restarts zero it) */
    _Atomic int     inside[NG];
    _Atomic int     inside_all;
    _Atomic int64_t started[NG][THREADS][3];
} side_t;

static side_t side[ACTORS];

typedef struct call_arg {
    uint32_t actor, caller, lane, group;
    int64_t  seq;
} call_arg_t;

static int grouped(void *self, hive_ctx_t *ctx)
{
    (void)self;
    const call_arg_t *a = hive_arg(ctx, 0, NULL);
    side_t *s = &side[a->actor];
    unsigned lim = limit_of[a->group];
    if ((unsigned)atomic_fetch_add(&s->inside[a->group], 1) + 1 > lim)
        atomic_fetch_add(&over_limit, 1);
    int64_t started = atomic_fetch_add(&s->started[a->group][a->caller][a->lane], 1) + 1;
    /* earlier calls not begun yet hold slots: at most lim - 1 of them;
     * with lim 1 the order is exact */
    if (a->seq - started > (int64_t)lim - 1 || (lim == 1 && started != a->seq))
        atomic_fetch_add(&out_of_order, 1);
    for (volatile int i = 0; i < 200; i++)   /* a little work, so that calls overlap */
        ;
    atomic_fetch_add_explicit(&executed, 1, memory_order_relaxed);
    atomic_fetch_sub(&s->inside[a->group], 1);
    return hive_return(ctx, &a->seq, sizeof a->seq);
}

enum { M_DEF, M_W, M_S };
static const hive_method_t gmethods[] = {
    [M_DEF] = { "read", grouped, HIVE_PRIO_NORMAL },
    [M_W]   = { "write", grouped, HIVE_PRIO_NORMAL },
    [M_S]   = { "stat", grouped, HIVE_PRIO_NORMAL },
};
static const unsigned w_methods[] = { M_W }, s_methods[] = { M_S };
static const hive_concurrency_group_t ggroups[] = { { "W", 1, w_methods, 1 },
                                                    { "S", 2, s_methods, 1 } };
static const hive_actor_class_t gclass = {
    .name = "Grouped", .methods = gmethods, .nmethods = 3, .groups = ggroups, .ngroups = 2,
};

static hive_actor_t gactors[ACTORS];

typedef struct caller {
    unsigned id;
    int64_t  sent[ACTORS][NG][3];
    long     calls;
} caller_t;

static caller_t callers[THREADS];

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

static uint64_t xorshift(uint64_t *r)
{
    *r ^= *r << 13;
    *r ^= *r >> 7;
    *r ^= *r << 17;
    return *r;
}

static void *group_loop(void *arg)
{
    caller_t *c = arg;
    inflight_t window[WINDOW];
    unsigned head = 0, used = 0;
    uint64_t rng = 0x9E3779B97F4A7C15ull * (c->id + 1);
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        uint64_t x = xorshift(&rng);
        unsigned ai = (unsigned)(x % ACTORS), lane = (unsigned)((x >> 16) % 3);
        unsigned g = (unsigned)((x >> 24) % NG);
        call_arg_t a = { .actor = ai, .caller = c->id, .lane = lane, .group = g,
                         .seq = c->sent[ai][g][lane] + 1 };
        hive_arg_t harg = HIVE_VAL(a);
        hive_opts_t o = { .priority = 1 - (int)lane };
        if (used == WINDOW) {
            settle(&window[head]);
            head = (head + 1) % WINDOW;
            used--;
        }
        inflight_t *f = &window[(head + used) % WINDOW];
        if (hive_call(h, gactors[ai], g, &harg, 1, &o, &f->ref) != HIVE_OK) {
            atomic_fetch_add(&call_errors, 1);
            continue;
        }
        f->seq = a.seq;
        c->sent[ai][g][lane] = a.seq;
        c->calls++;
        used++;
    }
    for (; used > 0; used--, head = (head + 1) % WINDOW)
        settle(&window[head]);
    return NULL;
}

static void start_engine(void)
{
    hive_config_t cfg = { .workers = 4, .store_bytes = 256u << 20, .no_pin = 1 };
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    atomic_store(&stop_flag, 0);
}

static void run_threads(void *(*fn)(void *), unsigned ms)
{
    pthread_t th[THREADS];
    for (unsigned i = 0; i < THREADS; i++) {
        callers[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, fn, &callers[i]), 0);
    }
    test_sleep_ms(ms);
    atomic_store(&stop_flag, 1);
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
}

static void test_groups_stress(void **state)
{
    (void)state;
    start_engine();
    hive_actor_opts_t o = { .max_concurrency = limit_of[0] };
    for (unsigned i = 0; i < ACTORS; i++)
        assert_int_equal(hive_actor_new(h, &gclass, NULL, 0, &o, &gactors[i]), HIVE_OK);
    run_threads(group_loop, RUN_MS);
    long total = 0;
    for (unsigned i = 0; i < THREADS; i++)
        total += callers[i].calls;
    printf("concurrent actor stress: %ld calls by %d threads to %d actors in %d ms\n", total,
           THREADS, ACTORS, RUN_MS);
    assert_int_equal(atomic_load(&call_errors), 0);
    assert_int_equal(atomic_load(&bad_result), 0);
    assert_int_equal(atomic_load(&over_limit), 0);
    assert_int_equal(atomic_load(&out_of_order), 0);
    assert_int_equal(atomic_load(&executed), total);
    for (unsigned a = 0; a < ACTORS; a++)
        for (unsigned g = 0; g < NG; g++)
            for (unsigned c = 0; c < THREADS; c++)
                for (unsigned l = 0; l < 3; l++)
                    if (atomic_load(&side[a].started[g][c][l]) != callers[c].sent[a][g][l])
                        fail_msg("actor %u group %u caller %u lane %u: %lld started, %lld sent", a,
                                 g, c, l, (long long)atomic_load(&side[a].started[g][c][l]),
                                 (long long)callers[c].sent[a][g][l]);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------ restarts and kills */

#define RACTORS 8
#define RSLOTS  (1 << 15)                /* one per actor built (wraps after that) */
static _Atomic long rebuild_overlap, unexpected, built, finished;
static _Atomic int rinside[RSLOTS];      /* calls inside, per actor instance */
static _Atomic int64_t rnext;
static _Atomic uint64_t ractor_ids[RACTORS];

typedef struct rstate { int64_t who; } rstate_t;

static int r_init(void *self, hive_ctx_t *ctx)
{
    const int64_t *who = hive_arg(ctx, 0, NULL);
    ((rstate_t *)self)->who = *who;
    if (atomic_load(&rinside[*who % RSLOTS]) != 0)
        atomic_fetch_add(&rebuild_overlap, 1);
    atomic_fetch_add(&built, 1);
    return 0;
}

static void r_fini(void *self)
{
    if (atomic_load(&rinside[((rstate_t *)self)->who % RSLOTS]) != 0)
        atomic_fetch_add(&rebuild_overlap, 1);
    atomic_fetch_add(&finished, 1);
}

static int r_call(void *self, hive_ctx_t *ctx)
{
    rstate_t *s = self;
    const uint64_t *x = hive_arg(ctx, 0, NULL);
    atomic_fetch_add(&rinside[s->who % RSLOTS], 1);
    for (volatile int i = 0; i < 300; i++)
        ;
    atomic_fetch_sub(&rinside[s->who % RSLOTS], 1);
    return *x % 40 == 0 ? HIVE_RESTART : hive_return(ctx, x, sizeof *x);
}

static const hive_method_t rmethods[] = { { "call", r_call, HIVE_PRIO_NORMAL } };
static const hive_actor_class_t rclass = {
    .name = "Restarty", .size = sizeof(rstate_t), .init = r_init, .fini = r_fini,
    .methods = rmethods, .nmethods = 1,
};

static uint64_t new_ractor(void)
{
    hive_actor_opts_t o = { .max_concurrency = 3, .max_restarts = 1u << 30 };
    int64_t who = atomic_fetch_add(&rnext, 1);
    hive_arg_t arg = HIVE_VAL(who);
    hive_actor_t a = { 0 };
    if (hive_actor_new(h, &rclass, &arg, 1, &o, &a) != HIVE_OK)
        atomic_fetch_add(&unexpected, 1);
    return a.id;
}

static void *restart_loop(void *arg)
{
    caller_t *c = arg;
    uint64_t rng = 0xD1B54A32D192ED03ull * (c->id + 1);
    hive_ref_t refs[32];
    uint64_t xs[32];
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        if (c->id == 0) {                /* the killer: one actor at a time, replaced */
            unsigned i = (unsigned)(xorshift(&rng) % RACTORS);
            hive_actor_t a = { atomic_load(&ractor_ids[i]) };
            int rc = hive_actor_kill(h, a);
            if (rc != HIVE_OK && rc != HIVE_EDEAD)
                atomic_fetch_add(&unexpected, 1);
            atomic_store(&ractor_ids[i], new_ractor());
            test_sleep_ms(2);
            continue;
        }
        unsigned n = 0;
        for (; n < 32; n++) {
            uint64_t x = xorshift(&rng);
            hive_actor_t a = { atomic_load(&ractor_ids[x % RACTORS]) };
            xs[n] = x >> 8;
            hive_arg_t harg = HIVE_VAL(xs[n]);
            int rc = hive_call(h, a, 0, &harg, 1, NULL, &refs[n]);
            if (rc == HIVE_EDEAD) {
                n--;
                continue;
            }
            if (rc != HIVE_OK) {
                atomic_fetch_add(&unexpected, 1);
                break;
            }
        }
        for (unsigned k = 0; k < n; k++) {
            const uint64_t *p;
            size_t sz;
            int rc = hive_get(h, refs[k], DEADLINE_NS, (const void **)&p, &sz);
            if (rc == HIVE_OK ? (sz != sizeof *p || *p != xs[k] || xs[k] % 40 == 0)
                              : (rc != HIVE_EDEAD && !(rc == HIVE_ETASK && xs[k] % 40 == 0)))
                atomic_fetch_add(&unexpected, 1);
            hive_release(h, refs[k]);
        }
    }
    return NULL;
}

static void test_restart_kill_stress(void **state)
{
    (void)state;
    start_engine();
    for (int i = 0; i < RACTORS; i++)
        atomic_store(&ractor_ids[i], new_ractor());
    run_threads(restart_loop, RUN_MS);
    long b = atomic_load(&built);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    printf("restart/kill stress: %ld constructions, %ld finis\n", b, atomic_load(&finished));
    assert_int_equal(atomic_load(&unexpected), 0);
    assert_int_equal(atomic_load(&rebuild_overlap), 0);
    assert_int_equal(atomic_load(&finished), atomic_load(&built));   /* fini once per build */
}

/* ------------------------------------------------ pools */

static _Atomic long pool_overlap, pool_bad;
#define PACT 3                            /* actors per pool */
static _Atomic int pinside[THREADS * PACT];

typedef struct pstate { int64_t who; } pstate_t;

static int p_init(void *self, hive_ctx_t *ctx)
{
    ((pstate_t *)self)->who = *(const int64_t *)hive_arg(ctx, 0, NULL);
    return 0;
}

static int p_echo(void *self, hive_ctx_t *ctx)
{
    pstate_t *s = self;
    if (atomic_fetch_add(&pinside[s->who], 1) != 0)
        atomic_fetch_add(&pool_overlap, 1);
    const int64_t *x = hive_arg(ctx, 0, NULL);
    for (volatile int i = 0; i < (int)(*x % 5) * 100; i++)
        ;
    atomic_fetch_sub(&pinside[s->who], 1);
    return hive_return(ctx, x, sizeof *x);
}

static const hive_method_t pmethods[] = { { "echo", p_echo, HIVE_PRIO_NORMAL } };
static const hive_actor_class_t pclass = {
    .name = "Echo", .size = sizeof(pstate_t), .init = p_init, .methods = pmethods, .nmethods = 1,
};

static int64_t fetch(hive_pool_t *p, bool ordered, bool *ok)
{
    hive_ref_t r;
    int rc = ordered ? hive_pool_get_next(p, DEADLINE_NS, &r)
                     : hive_pool_get_next_unordered(p, DEADLINE_NS, &r);
    const int64_t *v;
    size_t n;
    if (rc != HIVE_OK || hive_get(h, r, DEADLINE_NS, (const void **)&v, &n) != HIVE_OK ||
        n != sizeof *v) {
        *ok = false;
        return -1;
    }
    int64_t x = *v;
    hive_release(h, r);
    return x;
}

static void *pool_loop(void *arg)
{
    caller_t *c = arg;
    hive_actor_t acts[PACT];
    for (int64_t i = 0; i < PACT; i++) {
        int64_t who = (int64_t)c->id * PACT + i;
        hive_arg_t a = HIVE_VAL(who);
        hive_actor_opts_t o = { .max_concurrency = i == 0 ? 3 : 0 };
        if (hive_actor_new(h, &pclass, &a, 1, &o, &acts[i]) != HIVE_OK)
            atomic_fetch_add(&pool_bad, 1);
    }
    hive_pool_t *p;
    if (hive_pool_new(h, acts, PACT, &p) != HIVE_OK) {
        atomic_fetch_add(&pool_bad, 1);
        return NULL;
    }
    uint64_t rng = 0xA0761D6478BD642Full * (c->id + 1);
    int64_t next_seq = 0;
    enum { BURST = 64 };
    unsigned char seen[BURST];
    int64_t xs[BURST];
    hive_arg_t args[BURST];
    hive_ref_t res[BURST];
    size_t index[BURST];
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        uint64_t x = xorshift(&rng);
        unsigned n = 1 + (unsigned)(x % BURST), mode = (unsigned)((x >> 8) % 4);
        int64_t first = next_seq;
        bool ok = true;
        if (mode >= 2) {                 /* map / map_unordered */
            for (unsigned i = 0; i < n; i++) {
                xs[i] = next_seq++;
                args[i] = HIVE_VAL(xs[i]);
            }
            int rc = mode == 2 ? hive_pool_map(p, 0, args, n, res)
                               : hive_pool_map_unordered(p, 0, args, n, res, index);
            memset(seen, 0, n);
            for (unsigned k = 0; k < n && rc == HIVE_OK; k++) {
                size_t at = mode == 2 ? k : index[k];
                const int64_t *v;
                size_t sz;
                if (at >= n || seen[at] ||
                    hive_get(h, res[k], DEADLINE_NS, (const void **)&v, &sz) != HIVE_OK ||
                    *v != xs[at])
                    ok = false;
                if (at < n)
                    seen[at] = 1;
                hive_release(h, res[k]);
            }
            ok = ok && rc == HIVE_OK;
        } else {                         /* submit, interleaved with fetches */
            memset(seen, 0, n);
            unsigned got = 0;
            for (unsigned i = 0; i < n; i++) {
                int64_t v = next_seq++;
                hive_arg_t a = HIVE_VAL(v);
                if (hive_pool_submit(p, 0, &a, 1) != HIVE_OK)
                    ok = false;
                if (hive_pool_has_free(p) < 0)
                    ok = false;
                if ((xorshift(&rng) & 3) == 0 && got < i + 1) {
                    int64_t r = fetch(p, mode == 0, &ok);
                    if (mode == 0 && r != first + got)
                        ok = false;
                    if (r >= first && r < first + n && !seen[r - first])
                        seen[r - first] = 1;
                    else
                        ok = false;
                    got++;
                }
            }
            for (; got < n; got++) {
                int64_t r = fetch(p, mode == 0, &ok);
                if (mode == 0 && r != first + got)
                    ok = false;
                if (r >= first && r < first + n && !seen[r - first])
                    seen[r - first] = 1;
                else
                    ok = false;
            }
            if (hive_pool_has_next(p) != 0)
                ok = false;
        }
        if (!ok)
            atomic_fetch_add(&pool_bad, 1);
        c->calls += n;
    }
    if (hive_pool_free(p) != HIVE_OK)
        atomic_fetch_add(&pool_bad, 1);
    return NULL;
}

static void test_pool_stress(void **state)
{
    (void)state;
    start_engine();
    for (unsigned i = 0; i < THREADS; i++)
        callers[i].calls = 0;
    run_threads(pool_loop, RUN_MS);
    long total = 0;
    for (unsigned i = 0; i < THREADS; i++)
        total += callers[i].calls;
    printf("pool stress: %ld calls through %d pools in %d ms\n", total, THREADS, RUN_MS);
    assert_int_equal(atomic_load(&pool_bad), 0);
    assert_int_equal(atomic_load(&pool_overlap), 0);
    assert_true(total > 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_groups_stress),
        cmocka_unit_test(test_restart_kill_stress),
        cmocka_unit_test(test_pool_stress),
    };
    return cmocka_run_group_tests_name("stress_actor_concurrency", tests, NULL, NULL);
}
