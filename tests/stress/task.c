/*
 * stress/task.c - tasks under several user threads at once.
 *
 *  - many tiny tasks: 4 threads each submit TINY tasks (a pipeline of
 *    WINDOW outstanding results); each task bumps its own slot in a shared
 *    array and returns its index, which the submitter checks when it gets
 *    the result. At the end every slot is exactly 1: nothing ran twice and
 *    nothing was lost;
 *  - nested fork-join: fib from 2 threads at once, every task submitting
 *    two children and waiting for them inside the engine;
 *  - random dependencies: 2 threads each build a DAG in which a task takes
 *    up to 3 earlier results by ref; some tasks fail, and exactly their
 *    dependents (transitively) must fail with HIVE_ETASK, every other value
 *    must be what the submitter computes on its own.
 *  - escaping private results: tasks on the workers spawn children (whose
 *    results are private to their spawner, store.h) and let a third of the
 *    ids escape with a count to a user thread that gets and releases them
 *    (promoting them against the spawner's own gets and release), and a
 *    third escape without one to a prober that retains them while the
 *    spawner frees and reuses their slots: a retain either fails or holds
 *    the very object named (its value checked), never another of the slot.
 *  - cancels against the owner's run: children their spawner runs itself
 *    (plain claim and finish, store.c) cancelled by id from another thread
 *    at varying moments: a cancel said HIVE_OK exactly when the result
 *    failed with HIVE_ECANCELED;
 *  - dependents of private results: children their spawner runs itself
 *    with two dependents each pinning them by pointer: every value right,
 *    nothing left in the store.
 * Every result is released: no object and no byte is left at the end.
 */
#include "testutil.h"
#include "hive_impl.h"

#include <pthread.h>

#define MiB         (1024u * 1024u)
#define DEADLINE_NS ((int64_t)60 * 1000000000)   /* against hangs only */

static hive_t *h;

static void expect_empty_store(hive_t *e)
{
    hive_store_stats_t st;
    uint64_t deadline = test_now_ns() + 10ull * 1000000000u;
    do {                          /* tasks drop their counts just after their seal */
        hive__store_drain(e);
        hive_store_stats(e, &st);
        if (st.objects == 0 && st.used == 0)
            break;
        test_sleep_ms(1);
    } while (test_now_ns() < deadline);
    test_expect_empty_store(e);
}

/* ------------------------------------------------------------ tiny tasks */

#define TINY_THREADS 4
#define TINY         (250000 / TEST_SCALE)
#define WINDOW       512

static _Atomic unsigned char tiny_slot[TINY_THREADS * TINY];
static _Atomic long tiny_errors;

static int tiny_task(hive_ctx_t *ctx)
{
    const uint32_t *i = hive_arg(ctx, 0, NULL);
    atomic_fetch_add_explicit(&tiny_slot[*i], 1, memory_order_relaxed);
    return hive_return(ctx, i, sizeof *i);
}

static void tiny_check(hive_ref_t r, uint32_t want)
{
    const uint32_t *p;
    size_t n;
    int rc = hive_get(h, r, DEADLINE_NS, (const void **)&p, &n);
    if (rc != HIVE_OK || n != sizeof *p || *p != want)
        atomic_fetch_add(&tiny_errors, 1);
    if (hive_release(h, r) != HIVE_OK)
        atomic_fetch_add(&tiny_errors, 1);
}

static void *tiny_thread(void *arg)
{
    uint32_t base = (uint32_t)(uintptr_t)arg * TINY;
    static __thread hive_ref_t window[WINDOW];
    for (uint32_t k = 0; k < TINY; k++) {
        if (k >= WINDOW)
            tiny_check(window[k % WINDOW], base + k - WINDOW);
        uint32_t i = base + k;
        hive_arg_t a = HIVE_VAL(i);
        hive_opts_t o = { .priority = (int)(k % 3) - 1 };
        if (hive_submit(h, tiny_task, &a, 1, &o, &window[k % WINDOW]) != HIVE_OK) {
            atomic_fetch_add(&tiny_errors, 1);
            return NULL;
        }
    }
    for (uint32_t k = TINY > WINDOW ? TINY - WINDOW : 0; k < TINY; k++)
        tiny_check(window[k % WINDOW], base + k);
    return NULL;
}

static void test_many_tiny_tasks(void **state)
{
    (void)state;
    h = test_engine(256 * MiB, 0, NULL);
    memset(tiny_slot, 0, sizeof tiny_slot);
    atomic_store(&tiny_errors, 0);
    pthread_t t[TINY_THREADS];
    uint64_t t0 = test_now_ns();
    for (uintptr_t i = 0; i < TINY_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, tiny_thread, (void *)i), 0);
    for (int i = 0; i < TINY_THREADS; i++)
        pthread_join(t[i], NULL);
    print_message("%d tasks from %d threads in %.2f s\n", TINY_THREADS * TINY, TINY_THREADS,
                  (double)(test_now_ns() - t0) / 1e9);
    assert_int_equal(atomic_load(&tiny_errors), 0);
    for (size_t i = 0; i < HIVE_ARRAY_LEN(tiny_slot); i++)
        if (atomic_load(&tiny_slot[i]) != 1)
            fail_msg("task %zu ran %d times", i, atomic_load(&tiny_slot[i]));
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------- nested fork-join */

#if TEST_SCALE > 1
#define FIB_N 20
#else
#define FIB_N 22
#endif

static int fib_task(hive_ctx_t *ctx)
{
    uint32_t n = *(const uint32_t *)hive_arg(ctx, 0, NULL);
    uint64_t r = n;
    if (n >= 2) {
        hive_t *e = hive_engine(ctx);
        uint32_t a = n - 1, b = n - 2;
        hive_arg_t aa = HIVE_VAL(a), ab = HIVE_VAL(b);
        hive_ref_t ra, rb;
        if (hive_submit(e, fib_task, &aa, 1, NULL, &ra) != HIVE_OK)
            return 1;
        if (hive_submit(e, fib_task, &ab, 1, NULL, &rb) != HIVE_OK) {
            hive_release(e, ra);
            return 1;
        }
        const uint64_t *pa = NULL, *pb = NULL;
        int rc1 = hive_get(e, ra, HIVE_FOREVER, (const void **)&pa, NULL);
        int rc2 = hive_get(e, rb, HIVE_FOREVER, (const void **)&pb, NULL);
        if (rc1 == HIVE_OK && rc2 == HIVE_OK)
            r = *pa + *pb;
        hive_release(e, ra);
        hive_release(e, rb);
        if (rc1 != HIVE_OK || rc2 != HIVE_OK)
            return 1;
    }
    return hive_return(ctx, &r, sizeof r);
}

#define FIB_ROUNDS 4

/* out[round]: fib(FIB_N) as computed by the engine, FIB_ROUNDS times */
static void *fib_thread(void *arg)
{
    uint64_t *out = arg;
    for (int round = 0; round < FIB_ROUNDS; round++) {
        uint32_t n = FIB_N;
        hive_arg_t a = HIVE_VAL(n);
        hive_ref_t r;
        if (hive_submit(h, fib_task, &a, 1, NULL, &r) != HIVE_OK)
            return NULL;
        const uint64_t *p;
        if (hive_get(h, r, DEADLINE_NS, (const void **)&p, NULL) == HIVE_OK)
            out[round] = *p;
        hive_release(h, r);
    }
    return NULL;
}

static void test_nested_fib_two_threads(void **state)
{
    (void)state;
    h = test_engine(256 * MiB, 0, NULL);
    uint64_t want = 0, next = 1;
    for (int i = 0; i < FIB_N; i++) {
        uint64_t t = want + next;
        want = next;
        next = t;
    }
    uint64_t got[2][FIB_ROUNDS] = { { 0 } };
    pthread_t t[2];
    uint64_t t0 = test_now_ns();
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, fib_thread, got[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    print_message("fib(%d) %d times from 2 threads in %.2f s\n", FIB_N, 2 * FIB_ROUNDS,
                  (double)(test_now_ns() - t0) / 1e9);
    if (FIB_N == 22)
        assert_int_equal(want, 17711);
    for (int i = 0; i < 2; i++)
        for (int round = 0; round < FIB_ROUNDS; round++)
            assert_int_equal(got[i][round], want);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------ random dependencies */

#define DAG_THREADS 2
#define DAG_N       (200000 / TEST_SCALE)
#define DAG_BACK    64                     /* deps are among the last DAG_BACK tasks */
#define DAG_BATCH   64

/* Submits overlap running producers (no gate): ThreadSanitizer checks that
 * a submit never reads a result that is still being written. */
#define DAG_GATED 0

typedef struct dag_arg {
    uint64_t i;
    int      fail;
} dag_arg_t;

static uint64_t mix(uint64_t i)
{
    return i * 0x9E3779B97F4A7C15ull + 12345;
}

/* mix(i) plus the sum of its 8-byte ref arguments; fails when told to. */
static int dag_task(hive_ctx_t *ctx)
{
    const dag_arg_t *a = hive_arg(ctx, 0, NULL);
    if (a->fail)
        return 1;
    uint64_t v = mix(a->i);
    for (size_t k = 1; k < hive_nargs(ctx); k++) {
        size_t n;
        const uint64_t *p = hive_arg(ctx, k, &n);
        if (n != sizeof *p || hive_arg_ref(ctx, k).id == 0)
            return 2;                      /* never: dependencies are sealed 8-byte results */
        v += *p;
    }
    return hive_return(ctx, &v, sizeof v);
}

typedef struct dag_state {
    hive_ref_t *ref;
    uint64_t   *want;
    bool       *failed;
    long        errors, failures_seen;
} dag_state_t;

static void dag_check(dag_state_t *s, size_t j)
{
    const uint64_t *p;
    size_t n;
    int rc = hive_get(h, s->ref[j], DEADLINE_NS, (const void **)&p, &n);
    if (s->failed[j]) {
        if (rc != HIVE_ETASK)
            s->errors++;
        else
            s->failures_seen++;
    } else if (rc != HIVE_OK || n != sizeof *p || *p != s->want[j]) {
        s->errors++;
    }
    if (hive_release(h, s->ref[j]) != HIVE_OK)
        s->errors++;
}

static void *dag_thread(void *arg)
{
    dag_state_t *s = arg;
    uint64_t rng = 0x2545F4914F6CDD1Dull ^ (uint64_t)(uintptr_t)s;
    hive_ref_t gate = { 0 };
    for (size_t i = 0; i < DAG_N; i++) {
        if (DAG_GATED && i % DAG_BATCH == 0) {
            if (gate.id) {
                hive_seal(h, gate);
                hive_release(h, gate);
                if (hive_wait(h, &s->ref[i - DAG_BATCH], DAG_BATCH, DAG_BATCH, DEADLINE_NS, NULL) < 0)
                    s->errors++;
            }
            void *d;
            if (hive_create(h, sizeof(uint64_t), &d, &gate) != HIVE_OK)
                return NULL;
            memset(d, 0, sizeof(uint64_t));
        }
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        unsigned ndeps = i == 0 ? 0 : (unsigned)(rng % 4);
        dag_arg_t a = { .i = i, .fail = (i % 211) == 17 };
        hive_arg_t args[5] = { HIVE_VAL(a) };
        size_t nargs = 1;
        uint64_t want = mix(i);
        bool failed = a.fail;
        for (unsigned k = 0; k < ndeps; k++) {
            size_t back = 1 + (size_t)((rng >> (8 + 8 * k)) % DAG_BACK);
            size_t j = back > i ? 0 : i - back;
            args[nargs++] = HIVE_REF(s->ref[j]);
            want += s->want[j];
            failed |= s->failed[j];
        }
        if (DAG_GATED)
            args[nargs++] = HIVE_REF(gate);
        s->want[i] = want;
        s->failed[i] = failed;
        hive_opts_t o = { .priority = (int)(rng >> 40) % 3 - 1 };
        if (hive_submit(h, dag_task, args, nargs, &o, &s->ref[i]) != HIVE_OK) {
            s->errors++;
            return NULL;
        }
        /* a result no later task can pick any more is checked and released */
        if (i >= DAG_BACK + DAG_BATCH)
            dag_check(s, i - DAG_BACK - DAG_BATCH);
    }
    if (gate.id) {
        hive_seal(h, gate);
        hive_release(h, gate);
    }
    for (size_t j = DAG_N > DAG_BACK + DAG_BATCH ? DAG_N - DAG_BACK - DAG_BATCH : 0; j < DAG_N; j++)
        dag_check(s, j);
    return NULL;
}

static void test_random_dependencies(void **state)
{
    (void)state;
    h = test_engine(256 * MiB, 0, NULL);
    static dag_state_t s[DAG_THREADS];
    pthread_t t[DAG_THREADS];
    uint64_t t0 = test_now_ns();
    for (int k = 0; k < DAG_THREADS; k++) {
        s[k] = (dag_state_t){ .ref = calloc(DAG_N, sizeof(hive_ref_t)),
                              .want = calloc(DAG_N, sizeof(uint64_t)),
                              .failed = calloc(DAG_N, sizeof(bool)) };
        assert_int_equal(pthread_create(&t[k], NULL, dag_thread, &s[k]), 0);
    }
    for (int k = 0; k < DAG_THREADS; k++)
        pthread_join(t[k], NULL);
    print_message("%d dependent tasks from %d threads in %.2f s\n", DAG_THREADS * DAG_N,
                  DAG_THREADS, (double)(test_now_ns() - t0) / 1e9);
    for (int k = 0; k < DAG_THREADS; k++) {
        long expect_failed = 0;
        for (size_t j = 0; j < DAG_N; j++)
            expect_failed += s[k].failed[j];
        assert_int_equal(s[k].errors, 0);
        assert_int_equal(s[k].failures_seen, expect_failed);
        assert_true(expect_failed > DAG_N / 211);   /* failures did spread to dependents */
        assert_true(expect_failed < DAG_N);         /* ... but not to everything */
        free(s[k].ref);
        free(s[k].want);
        free(s[k].failed);
    }
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------ small tasks, cancelled */

/* Small tasks (task.c: the queued body inside the result record) raced by
 * cancels: 2 threads each submit CANCEL_N tasks of three inline arguments
 * and cancel every third one at once, or a little later, while the
 * workers run them. A task counts its run and returns a 64-byte result
 * filled from its arguments (written over the bytes its body was queued
 * in). Every result must be either sealed with exactly the bytes its
 * arguments give, after exactly one run, or failed with HIVE_ECANCELED
 * after at most one run - and only if a cancel said HIVE_OK. */
#define CANCEL_THREADS 2
#define CANCEL_N       (100000 / TEST_SCALE)
#define CANCEL_WINDOW  256

static _Atomic unsigned char cancel_runs[CANCEL_THREADS * CANCEL_N];

typedef struct cancel_args {
    uint32_t i;
    uint64_t key;
    uint8_t  tag;
} cancel_args_t;

static void cancel_fill(unsigned char out[64], uint32_t i, uint64_t key, uint8_t tag)
{
    for (int k = 0; k < 64; k++)
        out[k] = (unsigned char)(key >> (k % 8 * 8)) ^ (unsigned char)(i + k) ^ tag;
}

static int cancel_task(hive_ctx_t *ctx)
{
    const uint32_t *i = hive_arg(ctx, 0, NULL);
    const uint64_t *key = hive_arg(ctx, 1, NULL);
    const uint8_t *tag = hive_arg(ctx, 2, NULL);
    unsigned char *out = hive_return_alloc(ctx, 64);
    if (out == NULL || i == NULL || key == NULL || tag == NULL)
        return 1;
    atomic_fetch_add_explicit(&cancel_runs[*i], 1, memory_order_relaxed);
    cancel_fill(out, *i, *key, *tag);
    return 0;
}

typedef struct cancel_state {
    unsigned base;
    long     errors, cancelled, sealed;
} cancel_state_t;

static void cancel_check(cancel_state_t *s, hive_ref_t r, uint32_t i, bool cancel_ok)
{
    const unsigned char *p;
    size_t n;
    int rc = hive_get(h, r, DEADLINE_NS, (const void **)&p, &n);
    unsigned runs = atomic_load_explicit(&cancel_runs[i], memory_order_relaxed);
    if (rc == HIVE_OK) {
        unsigned char want[64];
        cancel_fill(want, i, mix(i), (uint8_t)i);
        if (n != 64 || memcmp(p, want, 64) != 0 || runs != 1)
            s->errors++;
        s->sealed++;
    } else if (rc == HIVE_ECANCELED) {
        if (!cancel_ok || runs > 1)
            s->errors++;
        s->cancelled++;
    } else {
        s->errors++;
    }
    if (hive_release(h, r) != HIVE_OK)
        s->errors++;
}

static void *cancel_thread(void *arg)
{
    cancel_state_t *s = arg;
    hive_ref_t refs[CANCEL_WINDOW];
    bool cancel_ok[CANCEL_WINDOW];
    for (uint32_t k = 0; k < CANCEL_N; k++) {
        uint32_t slot = k % CANCEL_WINDOW;
        if (k >= CANCEL_WINDOW)
            cancel_check(s, refs[slot], s->base + k - CANCEL_WINDOW, cancel_ok[slot]);
        uint32_t i = s->base + k;
        uint64_t key = mix(i);
        uint8_t tag = (uint8_t)i;
        hive_arg_t a[3] = { HIVE_VAL(i), HIVE_VAL(key), HIVE_VAL(tag) };
        if (hive_submit(h, cancel_task, a, 3, NULL, &refs[slot]) != HIVE_OK) {
            s->errors++;
            return NULL;
        }
        cancel_ok[slot] = false;
        if (k % 3 == 0)                         /* at once: mostly still queued */
            cancel_ok[slot] = hive_cancel(h, refs[slot]) == HIVE_OK;
        else if (k % 3 == 1 && k >= 8)          /* a few submits later: queued, running or done */
            cancel_ok[(k - 8) % CANCEL_WINDOW] |= hive_cancel(h, refs[(k - 8) % CANCEL_WINDOW]) == HIVE_OK;
    }
    for (uint32_t k = CANCEL_N > CANCEL_WINDOW ? CANCEL_N - CANCEL_WINDOW : 0; k < CANCEL_N; k++)
        cancel_check(s, refs[k % CANCEL_WINDOW], s->base + k, cancel_ok[k % CANCEL_WINDOW]);
    return NULL;
}

static void test_small_tasks_cancelled(void **state)
{
    (void)state;
    h = test_engine(256 * MiB, 0, NULL);
    memset(cancel_runs, 0, sizeof cancel_runs);
    static cancel_state_t s[CANCEL_THREADS];
    pthread_t t[CANCEL_THREADS];
    for (unsigned k = 0; k < CANCEL_THREADS; k++) {
        s[k] = (cancel_state_t){ .base = k * CANCEL_N };
        assert_int_equal(pthread_create(&t[k], NULL, cancel_thread, &s[k]), 0);
    }
    for (int k = 0; k < CANCEL_THREADS; k++)
        pthread_join(t[k], NULL);
    for (int k = 0; k < CANCEL_THREADS; k++) {
        print_message("thread %d: %ld sealed, %ld cancelled\n", k, s[k].sealed, s[k].cancelled);
        assert_int_equal(s[k].errors, 0);
        assert_int_equal(s[k].sealed + s[k].cancelled, CANCEL_N);
        assert_true(s[k].cancelled > 0);
        assert_true(s[k].sealed >= CANCEL_N / 3);   /* a third is never cancelled */
    }
    for (size_t i = 0; i < HIVE_ARRAY_LEN(cancel_runs); i++)
        if (atomic_load(&cancel_runs[i]) > 1)
            fail_msg("task %zu ran %d times", i, atomic_load(&cancel_runs[i]));
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------- escaping private results */

#define ESC_SPAWNERS 64                     /* spawning tasks per user thread */
#define ESC_KIDS     (2400 / TEST_SCALE)    /* children of each */
#define ESC_N        (2 * ESC_SPAWNERS * ESC_KIDS)

typedef struct esc_box {
    _Atomic uint64_t id;                    /* 0 until posted */
    uint64_t         want;                  /* the child's value (written before id) */
} esc_box_t;

static esc_box_t esc_counted[ESC_N], esc_stale[ESC_N];
static _Atomic uint32_t esc_ncounted, esc_nstale;
static _Atomic unsigned char esc_runs[ESC_N];
static _Atomic long esc_errors, esc_retained, esc_refused;
static _Atomic int esc_done;
static _Atomic uint32_t esc_probe_at;      /* the stale id the prober is at */

static int esc_child(hive_ctx_t *ctx)
{
    uint64_t v = *(const uint64_t *)hive_arg(ctx, 0, NULL);
    atomic_fetch_add_explicit(&esc_runs[v % ESC_N], 1, memory_order_relaxed);
    return hive_return(ctx, &v, sizeof v);
}

static uint32_t esc_post(esc_box_t *boxes, _Atomic uint32_t *n, uint64_t id, uint64_t want)
{
    uint32_t i = atomic_fetch_add(n, 1);
    boxes[i].want = want;
    atomic_store_explicit(&boxes[i].id, id, memory_order_release);   /* want before id */
    return i;
}

/* On a worker: spawn ESC_KIDS children in pairs, get each, and let some
 * ids escape (see the top). */
static int esc_spawner(hive_ctx_t *ctx)
{
    hive_t *e = hive_engine(ctx);
    uint64_t base = *(const uint64_t *)hive_arg(ctx, 0, NULL);
    for (uint64_t j = 0; j < ESC_KIDS; j += 2) {
        hive_ref_t r[2];
        uint64_t v[2] = { base + j, base + j + 1 };
        for (int k = 0; k < 2; k++)
            if (hive_submit(e, esc_child, &HIVE_VAL(v[k]), 1, NULL, &r[k]) != HIVE_OK)
                return 1;
        for (int k = 0; k < 2; k++) {
            const uint64_t *p;
            if (hive_get(e, r[k], HIVE_FOREVER, (const void **)&p, NULL) != HIVE_OK || *p != v[k])
                atomic_fetch_add(&esc_errors, 1);
            switch ((v[k] / 2) % 3) {
            case 0:                         /* escapes with a count of its own */
                if (hive_retain(e, r[k]) != HIVE_OK)
                    atomic_fetch_add(&esc_errors, 1);
                esc_post(esc_counted, &esc_ncounted, r[k].id, v[k]);
                break;
            case 1: {                       /* escapes without one: a stale id soon */
                uint32_t i = esc_post(esc_stale, &esc_nstale, r[k].id, v[k]);
                /* a moment for the prober to come near, so that its retain
                 * and our release race (bounded: never a wait for it) */
                uint32_t near = i - (i % 3 == 1);      /* at it, or one before it */
                for (int spin = 0; i % 3 != 0 && spin < 2000 && atomic_load(&esc_probe_at) < near;
                     spin++)
                    sched_yield();
                break;
            }
            default:
                break;
            }
            hive_release(e, r[k]);
        }
    }
    return 0;
}

/* From a user thread: run fn (one argument, or none if arg is NULL) on a
 * worker and wait for it; a failure counts in errors. */
static void run_spawner(hive_fn fn, const uint64_t *arg, _Atomic long *errors)
{
    hive_ref_t r;
    const void *p;
    if (hive_submit(h, fn, arg ? &HIVE_VAL(*arg) : NULL, arg ? 1 : 0, NULL, &r) != HIVE_OK ||
        hive_get(h, r, DEADLINE_NS, &p, NULL) != HIVE_OK)
        atomic_fetch_add(errors, 1);
    hive_release(h, r);
}

static void *esc_submitter(void *arg)
{
    uint64_t base = (uint64_t)(uintptr_t)arg * ESC_SPAWNERS * ESC_KIDS;
    for (int i = 0; i < ESC_SPAWNERS; i++) {
        uint64_t b = base + (uint64_t)i * ESC_KIDS;
        run_spawner(esc_spawner, &b, &esc_errors);
    }
    return NULL;
}

/* The counted ids: each got (its value checked) and released exactly once. */
static void *esc_getter(void *arg)
{
    (void)arg;
    for (uint32_t i = 0;;) {
        uint64_t id = atomic_load_explicit(&esc_counted[i].id, memory_order_acquire);
        if (id == 0) {
            if (atomic_load(&esc_done) && i == atomic_load(&esc_ncounted))
                return NULL;
            sched_yield();
            continue;
        }
        hive_ref_t r = { id };
        const uint64_t *p;
        if (hive_get(h, r, DEADLINE_NS, (const void **)&p, NULL) != HIVE_OK || *p != esc_counted[i].want ||
            hive_release(h, r) != HIVE_OK)
            atomic_fetch_add(&esc_errors, 1);
        i++;
    }
}

/* The stale ids: a retain either fails (released, the slot perhaps reused
 * under a new generation) or holds that very object: its value. */
static void *esc_prober(void *arg)
{
    (void)arg;
    for (uint32_t i = 0;;) {
        uint64_t id = atomic_load_explicit(&esc_stale[i].id, memory_order_acquire);
        if (id == 0) {
            if (atomic_load(&esc_done) && i == atomic_load(&esc_nstale))
                return NULL;
            sched_yield();
            continue;
        }
        atomic_store(&esc_probe_at, i);
        hive_ref_t r = { id };
        if (hive_retain(h, r) == HIVE_OK) {
            const uint64_t *p;
            if (hive_get(h, r, 0, (const void **)&p, NULL) != HIVE_OK || *p != esc_stale[i].want ||
                hive_release(h, r) != HIVE_OK)
                atomic_fetch_add(&esc_errors, 1);
            atomic_fetch_add(&esc_retained, 1);
        } else {
            atomic_fetch_add(&esc_refused, 1);
        }
        i++;
    }
}

static void test_escaping_private_results(void **state)
{
    (void)state;
    h = test_engine(256 * MiB, 2, NULL);
    pthread_t sub[2], getter, prober;
    assert_int_equal(pthread_create(&getter, NULL, esc_getter, NULL), 0);
    assert_int_equal(pthread_create(&prober, NULL, esc_prober, NULL), 0);
    for (uintptr_t k = 0; k < 2; k++)
        assert_int_equal(pthread_create(&sub[k], NULL, esc_submitter, (void *)k), 0);
    for (int k = 0; k < 2; k++)
        pthread_join(sub[k], NULL);
    atomic_store(&esc_done, 1);
    pthread_join(getter, NULL);
    pthread_join(prober, NULL);
    print_message("%u ids escaped with a count, %u without: %ld retained, %ld refused\n",
                  atomic_load(&esc_ncounted), atomic_load(&esc_nstale), atomic_load(&esc_retained),
                  atomic_load(&esc_refused));
    assert_int_equal(atomic_load(&esc_errors), 0);
    assert_int_equal(atomic_load(&esc_retained) + atomic_load(&esc_refused), atomic_load(&esc_nstale));
    for (size_t i = 0; i < ESC_N; i++)
        if (atomic_load(&esc_runs[i]) != 1)
            fail_msg("child %zu ran %d times", i, atomic_load(&esc_runs[i]));
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------ cancels against the owner's run
 *
 * A private child that its owner runs itself (its join takes it back from
 * its own deque) is claimed and finished with plain stores while no
 * promotion is under way (store.c, own_enter); a cancel from another
 * thread promotes it first. Tasks on the workers spawn children one at a
 * time and post each id (without a count: the spawner holds its own until
 * the verdict) to a canceller thread and join the child: a third at once
 * or after a delay that varies with the index (the cancel mostly comes
 * late, against the finish and the release), a third running until the
 * cancel has come (a cancel of a running task, promoted meanwhile), a
 * third once the canceller is at it (against the claim). One worker: the
 * owner runs every child itself. Every child must then be either sealed
 * with its value after one run and a refused cancel, or failed with
 * HIVE_ECANCELED after at most one run and an accepted cancel: an owner's
 * plain store over a cancel's CAS would seal a result whose cancel said
 * HIVE_OK, or fail one whose cancel was refused. */
#define OWN_SPAWNERS 16                     /* spawning tasks per user thread */
#define OWN_KIDS     (4000 / TEST_SCALE)    /* children of each */
#define OWN_N        (2 * OWN_SPAWNERS * OWN_KIDS)

typedef struct own_box {
    _Atomic uint64_t id;                    /* 0 until posted */
    _Atomic int      verdict;               /* hive_cancel's answer, 1 until given */
} own_box_t;

static own_box_t own_boxes[OWN_N];
static _Atomic long own_errors, own_sealed, own_cancelled, own_cancelled_running;
static _Atomic uint64_t own_at;             /* the child the canceller is at */
static _Atomic uint32_t own_n;
static _Atomic unsigned char own_runs[OWN_N];

static void own_spin(uint64_t n)
{
    for (volatile uint64_t k = 0; k < n; k++) {
    }
}

static int own_child(hive_ctx_t *ctx)
{
    uint64_t i = *(const uint64_t *)hive_arg(ctx, 0, NULL);
    atomic_fetch_add_explicit(&own_runs[i], 1, memory_order_relaxed);
    if (i % 3 == 1)       /* one in three: run until the cancel has come (bounded) */
        for (int spin = 0; spin < 4000 && atomic_load(&own_boxes[i].verdict) == 1; spin++)
            if (spin >= 1000)
                sched_yield();
    own_spin(i % 5 * 1000);                 /* a cancel may land while it runs */
    return hive_return(ctx, &i, sizeof i);
}

static int own_spawner(hive_ctx_t *ctx)
{
    hive_t *e = hive_engine(ctx);
    for (int j = 0; j < OWN_KIDS; j++) {
        uint64_t i = atomic_fetch_add(&own_n, 1);
        hive_ref_t r;
        if (hive_submit(e, own_child, &HIVE_VAL(i), 1, NULL, &r) != HIVE_OK) {
            atomic_fetch_add(&own_errors, 1);
            return 1;
        }
        atomic_store_explicit(&own_boxes[i].id, r.id, memory_order_release);
        /* one in three: join once the canceller is at this child (bounded:
         * never a wait for it), so that its promotion and cancel meet our
         * claim; then queued a while, or joined at once */
        for (int spin = 0; i % 3 == 2 && spin < 2000 && atomic_load(&own_at) < i; spin++)
            if (spin >= 1000)               /* the canceller is not running: let it */
                sched_yield();
        own_spin(i % 7 * 1000);
        const uint64_t *p;
        int rc = hive_get(e, r, HIVE_FOREVER, (const void **)&p, NULL);
        uint64_t v = rc == HIVE_OK ? *p : 0;
        int verdict;
        /* acquire: the canceller's answer (and its promotion) before our release */
        while ((verdict = atomic_load_explicit(&own_boxes[i].verdict, memory_order_acquire)) == 1)
            sched_yield();
        unsigned runs = atomic_load_explicit(&own_runs[i], memory_order_relaxed);
        if (rc == HIVE_OK && v == i && runs == 1 && verdict != HIVE_OK)
            atomic_fetch_add(&own_sealed, 1);
        else if (rc == HIVE_ECANCELED && runs <= 1 && verdict == HIVE_OK)
            atomic_fetch_add(runs ? &own_cancelled_running : &own_cancelled, 1);
        else
            atomic_fetch_add(&own_errors, 1);
        if (hive_release(e, r) != HIVE_OK)
            atomic_fetch_add(&own_errors, 1);
    }
    return 0;
}

static void *own_submitter(void *arg)
{
    (void)arg;
    for (int k = 0; k < OWN_SPAWNERS; k++)
        run_spawner(own_spawner, NULL, &own_errors);
    return NULL;
}

static void *own_canceller(void *arg)
{
    (void)arg;
    for (uint32_t i = 0, idle = 0; i < OWN_N;) {
        uint64_t id = atomic_load_explicit(&own_boxes[i].id, memory_order_acquire);
        if (id == 0) {                      /* close behind the post, without hogging a core */
            if (++idle % 256 == 0)
                sched_yield();
            continue;
        }
        atomic_store(&own_at, i);
        own_spin(i % 11 * 150);
        int rc = hive_cancel(h, (hive_ref_t){ id });
        if (rc != HIVE_OK && rc != HIVE_ESTATE)   /* the spawner holds its count: found */
            atomic_fetch_add(&own_errors, 1);
        /* release: as the spawner's acquire */
        atomic_store_explicit(&own_boxes[i].verdict, rc, memory_order_release);
        i++;
    }
    return NULL;
}

static void test_cancels_against_owner(void **state)
{
    (void)state;
    /* one worker: the owner runs every child itself, and the other core
     * is the canceller's */
    h = test_engine(256 * MiB, 1, NULL);
    for (size_t i = 0; i < OWN_N; i++)
        atomic_store(&own_boxes[i].verdict, 1);
    pthread_t sub[2], canceller;
    assert_int_equal(pthread_create(&canceller, NULL, own_canceller, NULL), 0);
    for (int k = 0; k < 2; k++)
        assert_int_equal(pthread_create(&sub[k], NULL, own_submitter, NULL), 0);
    for (int k = 0; k < 2; k++)
        pthread_join(sub[k], NULL);
    pthread_join(canceller, NULL);
    print_message("%ld sealed after a refused cancel, %ld cancelled queued, %ld running, %ld errors\n",
                  atomic_load(&own_sealed), atomic_load(&own_cancelled),
                  atomic_load(&own_cancelled_running), atomic_load(&own_errors));
    assert_int_equal(atomic_load(&own_errors), 0);
    assert_int_equal(atomic_load(&own_sealed) + atomic_load(&own_cancelled) +
                     atomic_load(&own_cancelled_running), OWN_N);
    assert_true(atomic_load(&own_cancelled) > 0);
    assert_true(atomic_load(&own_cancelled_running) > 0);
    assert_true(atomic_load(&own_sealed) > 0);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------ dependents of private results
 *
 * The owner drops the pin of a child it ran itself with a plain store
 * (store.c, release_count_by) unless it looked the child's id up (lent):
 * then dependents may hold pins on it by pointer and drop them with CASes
 * on the other worker, with no promotion. Spawners on 2 workers each make
 * a child, hang two dependents on it (each pins the child), join the child
 * themselves and release it at once, then join the dependents (thieves
 * run them too): every value right, and nothing left in the store - a
 * plain store over a dependent's CAS would lose or revive a count. */
#define DEP_SPAWNERS 32
#define DEP_KIDS     (2000 / TEST_SCALE)

static _Atomic long dep_errors;

static int dep_child(hive_ctx_t *ctx)
{
    uint64_t v = *(const uint64_t *)hive_arg(ctx, 0, NULL);
    return hive_return(ctx, &v, sizeof v);
}

static int dep_dependent(hive_ctx_t *ctx)
{
    size_t n = 0;
    const uint64_t *v = hive_arg(ctx, 0, &n);
    uint64_t k = *(const uint64_t *)hive_arg(ctx, 1, NULL);
    if (v == NULL || n != sizeof *v)
        return 1;
    uint64_t out = *v * 3 + k;
    return hive_return(ctx, &out, sizeof out);
}

static int dep_spawner(hive_ctx_t *ctx)
{
    hive_t *e = hive_engine(ctx);
    uint64_t base = *(const uint64_t *)hive_arg(ctx, 0, NULL);
    for (uint64_t j = 0; j < DEP_KIDS; j++) {
        uint64_t v = base + j;
        hive_ref_t c, d[2];
        if (hive_submit(e, dep_child, &HIVE_VAL(v), 1, NULL, &c) != HIVE_OK)
            return 1;
        for (uint64_t k = 0; k < 2; k++) {
            hive_arg_t a[2] = { HIVE_REF(c), HIVE_VAL(k) };
            if (hive_submit(e, dep_dependent, a, 2, NULL, &d[k]) != HIVE_OK)
                return 1;
        }
        const uint64_t *p;
        if (hive_get(e, c, HIVE_FOREVER, (const void **)&p, NULL) != HIVE_OK || *p != v)
            atomic_fetch_add(&dep_errors, 1);
        if (hive_release(e, c) != HIVE_OK)
            atomic_fetch_add(&dep_errors, 1);
        for (uint64_t k = 0; k < 2; k++) {
            if (hive_get(e, d[k], HIVE_FOREVER, (const void **)&p, NULL) != HIVE_OK || *p != v * 3 + k)
                atomic_fetch_add(&dep_errors, 1);
            if (hive_release(e, d[k]) != HIVE_OK)
                atomic_fetch_add(&dep_errors, 1);
        }
    }
    return 0;
}

static void test_dependents_of_private_results(void **state)
{
    (void)state;
    h = test_engine(256 * MiB, 2, NULL);
    hive_ref_t r[DEP_SPAWNERS];
    for (uint64_t i = 0; i < DEP_SPAWNERS; i++) {
        uint64_t base = i * DEP_KIDS;
        assert_int_equal(hive_submit(h, dep_spawner, &HIVE_VAL(base), 1, NULL, &r[i]), HIVE_OK);
    }
    for (int i = 0; i < DEP_SPAWNERS; i++) {
        const void *p;
        assert_int_equal(hive_get(h, r[i], DEADLINE_NS, &p, NULL), HIVE_OK);
        assert_int_equal(hive_release(h, r[i]), HIVE_OK);
    }
    assert_int_equal(atomic_load(&dep_errors), 0);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_tiny_tasks),
        cmocka_unit_test(test_nested_fib_two_threads),
        cmocka_unit_test(test_random_dependencies),
        cmocka_unit_test(test_small_tasks_cancelled),
        cmocka_unit_test(test_escaping_private_results),
        cmocka_unit_test(test_cancels_against_owner),
        cmocka_unit_test(test_dependents_of_private_results),
    };
    return cmocka_run_group_tests_name("stress_task", tests, NULL, NULL);
}
