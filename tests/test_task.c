/* test_task.c - tasks: inline arguments (copied at submit) and ref arguments
 * (zero-copy), results, dependencies, cancel, priorities, nested waits with
 * one worker, shutdown with queued work, bad input, and NUMA placement and
 * stealing order on a synthetic two-node topology.
 *
 * Task functions run on worker threads, where cmocka's assertions must not
 * be used: they record what they saw in globals (or in their result) and
 * the test thread checks it. Spins inside tasks carry a deadline so that a
 * bug shows as a failed check, never as a hang. */
#include "testutil.h"
#include "hive_impl.h"
#include "task.h"

#include <sched.h>
#include <unistd.h>

#define MiB        (1024u * 1024u)
#define DEADLINE_MS 10000u                 /* against hangs only, never a timing check */

#define engine test_engine

/* Spin (politely: 2 cores, several threads) until *flag != 0; false at the deadline. */
static bool wait_flag(_Atomic int *flag, unsigned ms)
{
    uint64_t deadline = test_now_ns() + (uint64_t)ms * 1000000u;
    while (!atomic_load(flag)) {
        if (test_now_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

static void get_ok(hive_t *h, hive_ref_t r, const void **p, size_t *n)
{
    test_get_ok(h, r, (int64_t)DEADLINE_MS * 1000000, p, n);
}

/* r's payload, which must be exactly size bytes, copied to out. */
static void get_exact(hive_t *h, hive_ref_t r, void *out, size_t size)
{
    const void *p;
    size_t n;
    get_ok(h, r, &p, &n);
    assert_int_equal(n, size);
    memcpy(out, p, size);
}

static uint64_t get_u64(hive_t *h, hive_ref_t r)
{
    uint64_t v;
    get_exact(h, r, &v, sizeof v);
    return v;
}

/* A task drops its counts on its arguments and result just after the
 * result is sealed, so a getter can be a moment ahead of it: wait for the
 * store to empty (a deadline against hangs), then check it exactly. */
static void expect_empty_store(hive_t *h)
{
    hive_store_stats_t st;
    uint64_t deadline = test_now_ns() + (uint64_t)DEADLINE_MS * 1000000u;
    do {
        hive__store_drain(h);
        hive_store_stats(h, &st);
        if (st.objects == 0 && st.used == 0)
            break;
        test_sleep_ms(1);
    } while (test_now_ns() < deadline);
    test_expect_empty_store(h);
}

/* ------------------------------------------------------------ shared tasks */

/* A gate: the worker that runs it is busy until gate_open (or the deadline). */
static _Atomic int gate_open, gate_entered;

static void gate_reset(void)
{
    atomic_store(&gate_open, 0);
    atomic_store(&gate_entered, 0);
}

static int gate_task(hive_ctx_t *ctx)
{
    (void)ctx;
    atomic_fetch_add(&gate_entered, 1);
    return wait_flag(&gate_open, DEADLINE_MS) ? 0 : 1;
}

/* Counts its runs; returns nothing. */
static _Atomic int count_runs;

static int count_task(hive_ctx_t *ctx)
{
    (void)ctx;
    atomic_fetch_add(&count_runs, 1);
    return 0;
}

static int fail_task(hive_ctx_t *ctx)
{
    (void)ctx;
    return 1;
}

/* Gated failure: fails once gate_open is set. */
static int gated_fail_task(hive_ctx_t *ctx)
{
    (void)ctx;
    wait_flag(&gate_open, DEADLINE_MS);
    return 1;
}

/* ---------------------------------------------------------- inline arguments */

typedef struct point {
    int32_t id;
    double  x, y;
    char    name[12];
} point_t;

typedef struct arg_report {
    size_t   nargs;
    size_t   size[3];
    int32_t  v;
    point_t  p;
    int      empty_nonnull;
    int      out_of_range_null;
    uint64_t ref_id[4];
    unsigned worker;
    int      engine_ok;
} arg_report_t;

static hive_t *report_engine;
static _Atomic int args_gate;

static int report_args(hive_ctx_t *ctx)
{
    /* read the arguments only after the caller has scribbled over its own */
    if (!wait_flag(&args_gate, DEADLINE_MS))
        return 1;
    arg_report_t r;
    memset(&r, 0, sizeof r);
    r.nargs = hive_nargs(ctx);
    const int32_t *v = hive_arg(ctx, 0, &r.size[0]);
    const point_t *p = hive_arg(ctx, 1, &r.size[1]);
    const void *e = hive_arg(ctx, 2, &r.size[2]);
    if (v == NULL || p == NULL)
        return 2;
    r.v = *v;
    r.p = *p;
    r.empty_nonnull = e != NULL;
    size_t sz = 12345;
    r.out_of_range_null = hive_arg(ctx, 3, &sz) == NULL && hive_arg(ctx, SIZE_MAX, NULL) == NULL &&
                          strstr(hive_last_error(), "out of range") != NULL;
    for (size_t i = 0; i < 4; i++)
        r.ref_id[i] = hive_arg_ref(ctx, i).id;
    r.worker = hive_worker_index(ctx);
    r.engine_ok = hive_engine(ctx) == report_engine;
    return hive_return(ctx, &r, sizeof r);
}

static void test_inline_args_copied_at_submit(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 2, NULL);
    report_engine = h;
    atomic_store(&args_gate, 0);
    int32_t v = 42;
    point_t p = { .id = 7, .x = 1.5, .y = -2.25, .name = "origin" };
    hive_arg_t args[3] = { HIVE_VAL(v), HIVE_VAL(p), HIVE_BYTES(NULL, 0) };
    hive_ref_t r = { 0 };
    assert_int_equal(hive_submit(h, report_args, args, 3, NULL, &r), HIVE_OK);
    assert_true(r.id != 0);
    /* the caller's buffers and even its argument table are its own again */
    v = -1;
    memset(&p, 0xAB, sizeof p);
    memset(args, 0, sizeof args);
    atomic_store(&args_gate, 1);

    const arg_report_t *rep;
    size_t n;
    get_ok(h, r, (const void **)&rep, &n);
    assert_int_equal(n, sizeof *rep);
    assert_int_equal(rep->nargs, 3);
    assert_int_equal(rep->size[0], sizeof(int32_t));
    assert_int_equal(rep->size[1], sizeof(point_t));
    assert_int_equal(rep->size[2], 0);
    assert_int_equal(rep->v, 42);
    assert_int_equal(rep->p.id, 7);
    assert_true(rep->p.x == 1.5 && rep->p.y == -2.25);
    assert_string_equal(rep->p.name, "origin");
    assert_true(rep->empty_nonnull);
    assert_true(rep->out_of_range_null);
    for (int i = 0; i < 4; i++)
        assert_int_equal(rep->ref_id[i], 0);       /* {0} for inline and out of range */
    assert_true(rep->worker < 2);
    assert_true(rep->engine_ok);
    assert_int_equal(hive_release(h, r), HIVE_OK);

    /* no arguments at all */
    assert_int_equal(hive_submit(h, count_task, NULL, 0, NULL, &r), HIVE_OK);
    const void *q;
    get_ok(h, r, &q, &n);
    assert_int_equal(n, 0);
    hive_release(h, r);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Users cast hive_arg's pointer to their struct, so inline bytes must be
 * aligned as malloc's are (max_align_t), whatever the number of arguments
 * (a long double or _Alignas(16) argument; UBSan checks the load). */
static _Atomic uintptr_t seen_arg_addr[3];

static int record_arg_addrs(hive_ctx_t *ctx)
{
    for (size_t i = 0; i < hive_nargs(ctx) && i < 3; i++)
        atomic_store(&seen_arg_addr[i], (uintptr_t)hive_arg(ctx, i, NULL));
    return 0;
}

static void test_inline_args_alignment(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    long double ld = 1.0L;
    char c = 'c';
    uintptr_t misaligned = 0;
    for (size_t nargs = 1; nargs <= 3; nargs++) {
        hive_arg_t args[3] = { HIVE_VAL(ld), HIVE_VAL(c), HIVE_VAL(ld) };
        hive_ref_t r;
        assert_int_equal(hive_submit(h, record_arg_addrs, args, nargs, NULL, &r), HIVE_OK);
        const void *p;
        get_ok(h, r, &p, NULL);
        hive_release(h, r);
        for (size_t i = 0; i < nargs; i++)
            if (atomic_load(&seen_arg_addr[i]) % _Alignof(max_align_t) != 0)
                misaligned = atomic_load(&seen_arg_addr[i]);
    }
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    if (misaligned != 0)
        fail_msg("inline argument at %#lx is not %zu-byte aligned", (unsigned long)misaligned,
                 _Alignof(max_align_t));
}

/* ---------------------------------------------------------- ref arguments */

static _Atomic uintptr_t seen_ptr, seen_size;
static _Atomic uint64_t seen_ref, seen_ref1;

static int record_ref_arg(hive_ctx_t *ctx)
{
    size_t n = 0;
    atomic_store(&seen_ptr, (uintptr_t)hive_arg(ctx, 0, &n));
    atomic_store(&seen_size, n);
    atomic_store(&seen_ref, hive_arg_ref(ctx, 0).id);
    atomic_store(&seen_ref1, hive_arg_ref(ctx, 1).id);
    return 0;
}

static void test_ref_args_zero_copy(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 2, NULL);
    unsigned char buf[4096];
    for (unsigned i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 7);
    hive_ref_t obj, r;
    assert_int_equal(hive_put(h, buf, sizeof buf, &obj), HIVE_OK);
    int one = 1;
    hive_arg_t args[2] = { HIVE_REF(obj), HIVE_VAL(one) };
    assert_int_equal(hive_submit(h, record_ref_arg, args, 2, NULL, &r), HIVE_OK);
    const void *p;
    get_ok(h, r, &p, NULL);
    const void *outside;
    get_ok(h, obj, &outside, NULL);
    assert_ptr_equal((const void *)atomic_load(&seen_ptr), outside);   /* same bytes, no copy */
    assert_int_equal(atomic_load(&seen_size), sizeof buf);
    assert_int_equal(atomic_load(&seen_ref), obj.id);
    assert_int_equal(atomic_load(&seen_ref1), 0);
    assert_memory_equal(outside, buf, sizeof buf);
    hive_release(h, r);

    /* a zero-size object as argument: a valid pointer, size 0 */
    hive_ref_t z;
    assert_int_equal(hive_put(h, NULL, 0, &z), HIVE_OK);
    hive_arg_t zarg = HIVE_REF(z);
    assert_int_equal(hive_submit(h, record_ref_arg, &zarg, 1, NULL, &r), HIVE_OK);
    get_ok(h, r, &p, NULL);
    assert_true(atomic_load(&seen_ptr) != 0);
    assert_int_equal(atomic_load(&seen_size), 0);
    assert_int_equal(atomic_load(&seen_ref), z.id);
    hive_release(h, r);
    hive_release(h, z);
    hive_release(h, obj);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Large inline arguments take the malloc path and arrive intact. */
static int check_big_arg(hive_ctx_t *ctx)
{
    size_t n = 0;
    const unsigned char *p = hive_arg(ctx, 1, &n);
    uint64_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += p[i] != (unsigned char)(i * 31 + 5);
    size_t n0 = 0, n2 = 0;
    const uint32_t *a = hive_arg(ctx, 0, &n0);
    const uint32_t *c = hive_arg(ctx, 2, &n2);
    uint64_t out[4] = { n, bad, n0 == 4 ? *a : 0, n2 == 4 ? *c : 0 };
    return hive_return(ctx, out, sizeof out);
}

static void test_large_inline_arg(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 2, NULL);
    size_t sizes[] = { 3000, 4096, 64 * 1024, 1 * MiB };
    for (size_t k = 0; k < HIVE_ARRAY_LEN(sizes); k++) {
        unsigned char *big = malloc(sizes[k]);
        for (size_t i = 0; i < sizes[k]; i++)
            big[i] = (unsigned char)(i * 31 + 5);
        uint32_t a = 0xA11CE, c = 0xC0FFEE;
        hive_arg_t args[3] = { HIVE_VAL(a), HIVE_BYTES(big, sizes[k]), HIVE_VAL(c) };
        hive_ref_t r;
        assert_int_equal(hive_submit(h, check_big_arg, args, 3, NULL, &r), HIVE_OK);
        free(big);                               /* copied at submit: ASan would see a use after free */
        const uint64_t *out;
        size_t n;
        get_ok(h, r, (const void **)&out, &n);
        assert_int_equal(n, 4 * sizeof(uint64_t));
        assert_int_equal(out[0], sizes[k]);
        assert_int_equal(out[1], 0);
        assert_int_equal(out[2], 0xA11CE);
        assert_int_equal(out[3], 0xC0FFEE);
        hive_release(h, r);
    }
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ---------------------------------------------------------------- results */

typedef struct ret_probe {
    _Atomic uintptr_t alloc_ptr;
    _Atomic int       bad_return_rc;
    _Atomic int       bad_return_msg_ok;
    _Atomic int       full_null;
    _Atomic int       full_msg_ok;
} ret_probe_t;
static ret_probe_t probe;

static int ret_struct(hive_ctx_t *ctx)
{
    point_t p = { .id = 3, .x = 0.5, .y = 0.25, .name = "ret" };
    return hive_return(ctx, &p, sizeof p);
}

static int ret_alloc(hive_ctx_t *ctx)
{
    unsigned char *p = hive_return_alloc(ctx, 1000);
    if (p == NULL)
        return 1;
    for (unsigned i = 0; i < 1000; i++)
        p[i] = (unsigned char)(i ^ 0x5a);
    atomic_store(&probe.alloc_ptr, (uintptr_t)p);
    return 0;
}

static int ret_twice(hive_ctx_t *ctx)
{
    if (hive_return(ctx, "first", 6) != HIVE_OK)
        return 1;
    return hive_return(ctx, "second!", 8);      /* replaces the first */
}

static int ret_alloc_zero(hive_ctx_t *ctx)
{
    return hive_return_alloc(ctx, 0) != NULL ? 0 : 1;
}

static int ret_then_fail(hive_ctx_t *ctx)
{
    void *p = hive_return_alloc(ctx, 8192);
    if (p != NULL)
        memset(p, 1, 8192);
    return p != NULL ? 7 : 0;                   /* fail with the result written */
}

static int ret_bad(hive_ctx_t *ctx)
{
    atomic_store(&probe.bad_return_rc, hive_return(ctx, NULL, 5));
    atomic_store(&probe.bad_return_msg_ok, strstr(hive_last_error(), "NULL for 5 bytes") != NULL);
    return 0;
}

static int ret_too_big(hive_ctx_t *ctx)
{
    void *p = hive_return_alloc(ctx, 4 * MiB);
    atomic_store(&probe.full_null, p == NULL);
    atomic_store(&probe.full_msg_ok, strstr(hive_last_error(), "object store full") != NULL);
    return hive_return(ctx, "small", 6);        /* a small result still fits */
}

static void test_results(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 2, NULL);
    memset(&probe, 0, sizeof probe);
    hive_ref_t r;
    const void *p;
    size_t n;

    assert_int_equal(hive_submit(h, ret_struct, NULL, 0, NULL, &r), HIVE_OK);
    get_ok(h, r, &p, &n);
    assert_int_equal(n, sizeof(point_t));
    assert_int_equal(((const point_t *)p)->id, 3);
    assert_string_equal(((const point_t *)p)->name, "ret");
    hive_release(h, r);

    assert_int_equal(hive_submit(h, ret_alloc, NULL, 0, NULL, &r), HIVE_OK);
    get_ok(h, r, &p, &n);
    assert_int_equal(n, 1000);
    assert_ptr_equal(p, (const void *)atomic_load(&probe.alloc_ptr));   /* written in place */
    for (unsigned i = 0; i < 1000; i++)
        if (((const unsigned char *)p)[i] != (unsigned char)(i ^ 0x5a))
            fail_msg("byte %u of the in-place result is wrong", i);
    hive_release(h, r);

    assert_int_equal(hive_submit(h, count_task, NULL, 0, NULL, &r), HIVE_OK);   /* no return */
    n = 99;
    get_ok(h, r, &p, &n);
    assert_int_equal(n, 0);
    assert_non_null(p);
    hive_release(h, r);

    assert_int_equal(hive_submit(h, ret_twice, NULL, 0, NULL, &r), HIVE_OK);
    get_ok(h, r, &p, &n);
    assert_int_equal(n, 8);
    assert_string_equal(p, "second!");
    hive_release(h, r);
    expect_empty_store(h);                    /* the replaced "first" is freed too */

    assert_int_equal(hive_submit(h, ret_alloc_zero, NULL, 0, NULL, &r), HIVE_OK);
    get_ok(h, r, &p, &n);
    assert_int_equal(n, 0);
    hive_release(h, r);
    expect_empty_store(h);

    /* a nonzero return fails the result and drops what was written */
    assert_int_equal(hive_submit(h, ret_then_fail, NULL, 0, NULL, &r), HIVE_OK);
    p = (void *)0x1;
    assert_int_equal(hive_wait(h, &r, 1, 1, (int64_t)DEADLINE_MS * 1000000, NULL), 1);
    ASSERT_FAILS_WITH(hive_get(h, r, 0, &p, &n), HIVE_ETASK, "failed");
    assert_ptr_equal(p, (void *)0x1);
    hive__store_drain(h);
    hive_store_stats_t st;
    hive_store_stats(h, &st);
    assert_int_equal(st.objects, 1);                /* the failed result, still held ... */
    assert_int_equal(st.used, 0);                   /* ... without its 8192 bytes */
    hive_release(h, r);

    assert_int_equal(hive_submit(h, fail_task, NULL, 0, NULL, &r), HIVE_OK);
    ASSERT_FAILS_WITH(hive_get(h, r, HIVE_FOREVER, &p, &n), HIVE_ETASK, "failed");
    hive_release(h, r);

    assert_int_equal(hive_submit(h, ret_bad, NULL, 0, NULL, &r), HIVE_OK);
    get_ok(h, r, &p, &n);
    assert_int_equal(n, 0);
    assert_int_equal(atomic_load(&probe.bad_return_rc), HIVE_EINVAL);
    assert_true(atomic_load(&probe.bad_return_msg_ok));
    hive_release(h, r);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);

    /* a result that does not fit: NULL and the sentence, the task goes on */
    h = engine(1 * MiB, 1, NULL);
    assert_int_equal(hive_submit(h, ret_too_big, NULL, 0, NULL, &r), HIVE_OK);
    get_ok(h, r, &p, &n);
    assert_string_equal(p, "small");
    assert_true(atomic_load(&probe.full_null));
    assert_true(atomic_load(&probe.full_msg_ok));
    hive_release(h, r);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------------ dependencies */

static _Atomic int sum_runs;

/* The sum of the bytes of every argument. */
static int sum_bytes_task(hive_ctx_t *ctx)
{
    atomic_fetch_add(&sum_runs, 1);
    uint64_t s = 0;
    for (size_t i = 0; i < hive_nargs(ctx); i++) {
        size_t n;
        const unsigned char *p = hive_arg(ctx, i, &n);
        for (size_t k = 0; k < n; k++)
            s += p[k];
    }
    return hive_return(ctx, &s, sizeof s);
}

static void test_dep_waits_for_seal(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 2, NULL);
    atomic_store(&sum_runs, 0);
    unsigned char *d1, *d2;
    hive_ref_t o1, o2, o3, r;
    assert_int_equal(hive_create(h, 256, (void **)&d1, &o1), HIVE_OK);
    assert_int_equal(hive_create(h, 16, (void **)&d2, &o2), HIVE_OK);
    unsigned char three[3] = { 1, 2, 3 };
    assert_int_equal(hive_put(h, three, 3, &o3), HIVE_OK);
    hive_arg_t args[3] = { HIVE_REF(o1), HIVE_REF(o3), HIVE_REF(o2) };
    assert_int_equal(hive_submit(h, sum_bytes_task, args, 3, NULL, &r), HIVE_OK);

    test_sleep_ms(30);
    assert_int_equal(atomic_load(&sum_runs), 0);
    const void *p;
    ASSERT_FAILS_WITH(hive_get(h, r, 0, &p, NULL), HIVE_ETIMEDOUT, "still pending");

    memset(d1, 1, 256);
    assert_int_equal(hive_seal(h, o1), HIVE_OK);
    test_sleep_ms(30);
    assert_int_equal(atomic_load(&sum_runs), 0);   /* o2 is still pending */
    assert_int_equal(hive_wait(h, &r, 1, 1, 0, NULL), HIVE_ETIMEDOUT);

    memset(d2, 2, 16);
    assert_int_equal(hive_seal(h, o2), HIVE_OK);
    assert_int_equal(get_u64(h, r), 256 + 6 + 32);
    assert_int_equal(atomic_load(&sum_runs), 1);
    hive_release(h, r);
    hive_release(h, o1);
    hive_release(h, o2);
    hive_release(h, o3);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* No arguments: 1. One ref argument: its value + 1. */
static int add_one(hive_ctx_t *ctx)
{
    uint64_t v = 1;
    if (hive_nargs(ctx) > 0) {
        size_t n;
        const uint64_t *p = hive_arg(ctx, 0, &n);
        if (n != sizeof *p)
            return 1;
        v = *p + 1;
    }
    return hive_return(ctx, &v, sizeof v);
}

static void test_dep_chain(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 2, NULL);

    /* the whole chain queued behind an unsealed head, each link's ref
     * released by this thread at once: the tasks hold their own counts */
    uint64_t *head_data;
    hive_ref_t head, prev;
    assert_int_equal(hive_create(h, sizeof *head_data, (void **)&head_data, &head), HIVE_OK);
    hive_arg_t a = HIVE_REF(head);
    assert_int_equal(hive_submit(h, add_one, &a, 1, NULL, &prev), HIVE_OK);
    for (int i = 1; i < 100; i++) {
        hive_ref_t next;
        a = HIVE_REF(prev);
        assert_int_equal(hive_submit(h, add_one, &a, 1, NULL, &next), HIVE_OK);
        assert_int_equal(hive_release(h, prev), HIVE_OK);
        prev = next;
    }
    *head_data = 1000;
    assert_int_equal(hive_seal(h, head), HIVE_OK);
    assert_int_equal(hive_release(h, head), HIVE_OK);
    assert_int_equal(get_u64(h, prev), 1100);
    hive_release(h, prev);
    expect_empty_store(h);

    /* step by step: each link submitted on a finished result */
    assert_int_equal(hive_submit(h, add_one, NULL, 0, NULL, &prev), HIVE_OK);
    for (int i = 1; i < 100; i++) {
        assert_int_equal(get_u64(h, prev), (uint64_t)i);
        hive_ref_t next;
        a = HIVE_REF(prev);
        assert_int_equal(hive_submit(h, add_one, &a, 1, NULL, &next), HIVE_OK);
        assert_int_equal(hive_release(h, prev), HIVE_OK);
        prev = next;
    }
    assert_int_equal(get_u64(h, prev), 100);
    hive_release(h, prev);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* A dependent submitted while its producer runs and writes its result: the
 * submit must not read the result's size or place while they change
 * (ThreadSanitizer checks). */
static _Atomic int producer_running, producer_go;

static int busy_producer(hive_ctx_t *ctx)
{
    atomic_store(&producer_running, 1);
    uint64_t v = 0;
    uint64_t deadline = test_now_ns() + (uint64_t)DEADLINE_MS * 1000000u;
    /* keep rewriting the result until the dependent is submitted */
    do {
        v++;
        if (hive_return(ctx, &v, sizeof v) != HIVE_OK)
            return 1;
    } while (!atomic_load(&producer_go) && test_now_ns() < deadline);
    v = 41;
    return hive_return(ctx, &v, sizeof v);
}

static void test_dep_on_running_task(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 2, NULL);
    for (int round = 0; round < 20; round++) {
        atomic_store(&producer_running, 0);
        atomic_store(&producer_go, 0);
        hive_ref_t r1, r2;
        assert_int_equal(hive_submit(h, busy_producer, NULL, 0, NULL, &r1), HIVE_OK);
        WAIT_UNTIL(atomic_load(&producer_running), DEADLINE_MS);
        hive_arg_t a = HIVE_REF(r1);
        assert_int_equal(hive_submit(h, add_one, &a, 1, NULL, &r2), HIVE_OK);
        atomic_store(&producer_go, 1);
        assert_int_equal(get_u64(h, r2), 42);
        hive_release(h, r1);
        hive_release(h, r2);
    }
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_dep_failure_propagates(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 2, NULL);
    gate_reset();
    atomic_store(&count_runs, 0);
    const void *p = (void *)0x1;

    /* fails after its dependents are queued: t1 -> t2 -> t3 */
    hive_ref_t r1, r2, r3;
    assert_int_equal(hive_submit(h, gated_fail_task, NULL, 0, NULL, &r1), HIVE_OK);
    hive_arg_t a1 = HIVE_REF(r1);
    assert_int_equal(hive_submit(h, count_task, &a1, 1, NULL, &r2), HIVE_OK);
    hive_arg_t a2 = HIVE_REF(r2);
    assert_int_equal(hive_submit(h, count_task, &a2, 1, NULL, &r3), HIVE_OK);
    atomic_store(&gate_open, 1);
    ASSERT_FAILS_WITH(hive_get(h, r3, HIVE_FOREVER, &p, NULL), HIVE_ETASK, "failed");
    ASSERT_FAILS_WITH(hive_get(h, r2, 0, &p, NULL), HIVE_ETASK, "failed");
    ASSERT_FAILS_WITH(hive_get(h, r1, 0, &p, NULL), HIVE_ETASK, "failed");
    assert_ptr_equal(p, (void *)0x1);

    /* already failed at submit, alone or among sealed arguments */
    hive_ref_t ok, r4, r5;
    assert_int_equal(hive_put(h, "fine", 5, &ok), HIVE_OK);
    assert_int_equal(hive_submit(h, count_task, &a1, 1, NULL, &r4), HIVE_OK);
    hive_arg_t mixed[3] = { HIVE_REF(ok), HIVE_REF(r1), HIVE_REF(ok) };
    assert_int_equal(hive_submit(h, count_task, mixed, 3, NULL, &r5), HIVE_OK);
    ASSERT_FAILS_WITH(hive_get(h, r4, HIVE_FOREVER, &p, NULL), HIVE_ETASK, "failed");
    ASSERT_FAILS_WITH(hive_get(h, r5, HIVE_FOREVER, &p, NULL), HIVE_ETASK, "failed");

    /* a task that depends on a sealed and a failing one never runs either */
    hive_ref_t r6, r7;
    assert_int_equal(hive_submit(h, fail_task, NULL, 0, NULL, &r6), HIVE_OK);
    hive_arg_t two[2] = { HIVE_REF(ok), HIVE_REF(r6) };
    assert_int_equal(hive_submit(h, count_task, two, 2, NULL, &r7), HIVE_OK);
    ASSERT_FAILS_WITH(hive_get(h, r7, HIVE_FOREVER, &p, NULL), HIVE_ETASK, "failed");

    assert_int_equal(atomic_load(&count_runs), 0);  /* no dependent function ever ran */
    hive_ref_t all[] = { r1, r2, r3, r4, r5, r6, r7, ok };
    for (size_t i = 0; i < HIVE_ARRAY_LEN(all); i++)
        assert_int_equal(hive_release(h, all[i]), HIVE_OK);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------------------ cancel */

static void test_cancel_queued(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    gate_reset();
    atomic_store(&count_runs, 0);
    hive_ref_t blocker, second, third, fourth, marker, pending;
    assert_int_equal(hive_submit(h, gate_task, NULL, 0, NULL, &blocker), HIVE_OK);
    WAIT_UNTIL(atomic_load(&gate_entered) == 1, DEADLINE_MS);

    assert_int_equal(hive_submit(h, count_task, NULL, 0, NULL, &second), HIVE_OK);
    assert_int_equal(hive_cancel(h, second), HIVE_OK);
    const void *p = (void *)0x1;
    ASSERT_FAILS_WITH(hive_get(h, second, 0, &p, NULL), HIVE_ECANCELED, "failed");   /* at once */
    assert_ptr_equal(p, (void *)0x1);
    ASSERT_FAILS_WITH(hive_cancel(h, second), HIVE_ESTATE, "cancelled already");

    /* a dependent of the cancelled task fails */
    hive_arg_t a = HIVE_REF(second);
    assert_int_equal(hive_submit(h, count_task, &a, 1, NULL, &third), HIVE_OK);

    /* a task still waiting for its argument can be cancelled too */
    void *d;
    assert_int_equal(hive_create(h, 8, &d, &pending), HIVE_OK);
    hive_arg_t b = HIVE_REF(pending);
    assert_int_equal(hive_submit(h, count_task, &b, 1, NULL, &fourth), HIVE_OK);
    assert_int_equal(hive_cancel(h, fourth), HIVE_OK);
    ASSERT_FAILS_WITH(hive_get(h, fourth, 0, &p, NULL), HIVE_ECANCELED, "failed");
    assert_int_equal(atomic_load(&gate_entered), 1);   /* all this while the worker was blocked */

    atomic_store(&gate_open, 1);
    get_ok(h, blocker, &p, NULL);
    assert_int_equal(hive_seal(h, pending), HIVE_OK);  /* fourth becomes ready, and must not run */
    ASSERT_FAILS_WITH(hive_get(h, third, HIVE_FOREVER, &p, NULL), HIVE_ETASK, "failed");
    /* FIFO from this thread: once a later task ran, the worker has passed the cancelled ones */
    assert_int_equal(hive_submit(h, ret_alloc_zero, NULL, 0, NULL, &marker), HIVE_OK);
    get_ok(h, marker, &p, NULL);
    test_sleep_ms(20);
    assert_int_equal(atomic_load(&count_runs), 0);
    ASSERT_FAILS_WITH(hive_get(h, fourth, 0, &p, NULL), HIVE_ECANCELED, "failed");

    hive_ref_t all[] = { blocker, second, third, fourth, marker, pending };
    for (size_t i = 0; i < HIVE_ARRAY_LEN(all); i++)
        assert_int_equal(hive_release(h, all[i]), HIVE_OK);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static _Atomic int until_cancel_started;

static _Atomic int until_cancel_saw;
static int until_cancelled(hive_ctx_t *ctx)
{
    int saw[2] = { hive_cancelled(ctx), 0 };
    atomic_store(&until_cancel_started, 1);
    uint64_t deadline = test_now_ns() + (uint64_t)DEADLINE_MS * 1000000u;
    while (!hive_cancelled(ctx) && test_now_ns() < deadline)
        sched_yield();
    saw[1] = hive_cancelled(ctx);
    atomic_store(&until_cancel_saw, saw[0] * 2 + saw[1]);
    hive_return(ctx, saw, sizeof saw);
    return saw[1] ? 1 : 0;           /* fails when cancelled: must read ECANCELED, not ETASK */
}

static void test_cancel_running_and_bad_cancels(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 2, NULL);
    atomic_store(&until_cancel_started, 0);
    hive_ref_t r;
    assert_int_equal(hive_submit(h, until_cancelled, NULL, 0, NULL, &r), HIVE_OK);
    WAIT_UNTIL(atomic_load(&until_cancel_started), DEADLINE_MS);
    assert_int_equal(hive_cancel(h, r), HIVE_OK);
    const int *saw;
    /* it saw the cancel and returned: cancelled, whatever it returned (as
     * Ray's TaskCancelledError), never HIVE_ETASK */
    ASSERT_FAILS_WITH(hive_get(h, r, HIVE_FOREVER, (const void **)&saw, NULL), HIVE_ECANCELED,
                      "cancelled");
    assert_int_equal(atomic_load(&until_cancel_saw), 1);   /* not cancelled at start, then yes */
    ASSERT_FAILS_WITH(hive_cancel(h, r), HIVE_ESTATE, "finished");
    ASSERT_FAILS_WITH(hive_get(h, r, 0, (const void **)&saw, NULL), HIVE_ECANCELED, "cancelled");

    hive_ref_t obj;
    assert_int_equal(hive_put(h, "plain", 6, &obj), HIVE_OK);
    ASSERT_FAILS_WITH(hive_cancel(h, obj), HIVE_ESTATE, "not a task's result");
    void *d;
    hive_ref_t created;
    assert_int_equal(hive_create(h, 8, &d, &created), HIVE_OK);
    ASSERT_FAILS_WITH(hive_cancel(h, created), HIVE_ESTATE, "not a task's result");
    ASSERT_FAILS_WITH(hive_cancel(h, (hive_ref_t){ (uint64_t)1 << 60 }), HIVE_ENOENT, "does not exist");
    ASSERT_FAILS_WITH(hive_cancel(h, (hive_ref_t){ 0 }), HIVE_ENOENT, "{0}");
    ASSERT_FAILS_WITH(hive_cancel(NULL, r), HIVE_EINVAL, "NULL");
    /* a finished failed task cannot be cancelled either */
    hive_ref_t f;
    assert_int_equal(hive_submit(h, fail_task, NULL, 0, NULL, &f), HIVE_OK);
    assert_int_equal(hive_wait(h, &f, 1, 1, HIVE_FOREVER, NULL), 1);
    ASSERT_FAILS_WITH(hive_cancel(h, f), HIVE_ESTATE, "finished");
    const void *p;
    ASSERT_FAILS_WITH(hive_get(h, f, 0, &p, NULL), HIVE_ETASK, "failed");   /* not ECANCELED */

    hive_release(h, f);
    hive_release(h, r);
    hive_release(h, obj);
    hive_release(h, created);
    expect_empty_store(h);           /* the task's own count goes just after its seal */
    ASSERT_FAILS_WITH(hive_cancel(h, r), HIVE_ENOENT, "does not exist");   /* released: gone */
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* -------------------------------------------------------------- priorities */

static _Atomic int order_next;
static _Atomic int order_tag[64];

static int tag_task(hive_ctx_t *ctx)
{
    const int *tag = hive_arg(ctx, 0, NULL);
    int i = atomic_fetch_add(&order_next, 1);
    if (i < 64)
        atomic_store(&order_tag[i], *tag);
    return 0;
}

/* Lane of each of the 15 submissions: interleaved so that order of
 * submission alone cannot give the right answer. The tag is the lane's
 * nominal priority; opts uses other values of the same lane for some. */
static void prio_of(int i, int *tag, int *prio)
{
    static const int tags[3] = { HIVE_PRIO_LOW, HIVE_PRIO_NORMAL, HIVE_PRIO_HIGH };
    *tag = tags[i % 3];
    *prio = *tag;
    if (i == 3)
        *prio = -100;                    /* LOW lane */
    if (i == 5)
        *prio = 7;                       /* HIGH lane */
}

static void check_prio_order(void)
{
    assert_int_equal(atomic_load(&order_next), 15);
    for (int i = 0; i < 15; i++) {
        int want = i < 5 ? HIVE_PRIO_HIGH : i < 10 ? HIVE_PRIO_NORMAL : HIVE_PRIO_LOW;
        if (atomic_load(&order_tag[i]) != want)
            fail_msg("run %d had priority %d, expected %d", i, atomic_load(&order_tag[i]), want);
    }
}

/* Submits the 15 from inside a task (its own deque); returns their refs. */
static int submit_prios(hive_ctx_t *ctx)
{
    hive_ref_t refs[15];
    for (int i = 0; i < 15; i++) {
        int tag, prio;
        prio_of(i, &tag, &prio);
        hive_opts_t o = { .priority = prio };
        hive_arg_t a = HIVE_VAL(tag);
        if (hive_submit(hive_engine(ctx), tag_task, &a, 1, i % 3 == 1 && i != 1 ? NULL : &o,
                        &refs[i]) != HIVE_OK)
            return 1;
    }
    return hive_return(ctx, refs, sizeof refs);
}

static void test_priorities(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    gate_reset();
    atomic_store(&order_next, 0);

    /* from a user thread (the node's ring), while the only worker is busy */
    hive_ref_t blocker, refs[15];
    assert_int_equal(hive_submit(h, gate_task, NULL, 0, NULL, &blocker), HIVE_OK);
    WAIT_UNTIL(atomic_load(&gate_entered) == 1, DEADLINE_MS);
    for (int i = 0; i < 15; i++) {
        int tag, prio;
        prio_of(i, &tag, &prio);
        hive_opts_t o = { .priority = prio };
        hive_arg_t a = HIVE_VAL(tag);
        /* NULL opts and zeroed opts are NORMAL */
        assert_int_equal(hive_submit(h, tag_task, &a, 1, i % 3 == 1 && i != 1 ? NULL : &o, &refs[i]),
                         HIVE_OK);
    }
    assert_int_equal(atomic_load(&order_next), 0);
    atomic_store(&gate_open, 1);
    const void *p;
    for (int i = 0; i < 15; i++) {
        get_ok(h, refs[i], &p, NULL);
        hive_release(h, refs[i]);
    }
    get_ok(h, blocker, &p, NULL);
    hive_release(h, blocker);
    check_prio_order();

    /* from inside a task (the worker's own deques) */
    atomic_store(&order_next, 0);
    hive_ref_t sub;
    assert_int_equal(hive_submit(h, submit_prios, NULL, 0, NULL, &sub), HIVE_OK);
    const hive_ref_t *inner;
    size_t n;
    get_ok(h, sub, (const void **)&inner, &n);
    assert_int_equal(n, sizeof refs);
    memcpy(refs, inner, sizeof refs);
    for (int i = 0; i < 15; i++) {
        get_ok(h, refs[i], &p, NULL);
        hive_release(h, refs[i]);
    }
    hive_release(h, sub);
    check_prio_order();
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------------ nested waits */

static int fib_task(hive_ctx_t *ctx)
{
    uint32_t n = *(const uint32_t *)hive_arg(ctx, 0, NULL);
    uint64_t r = n;
    if (n >= 2) {
        hive_t *h = hive_engine(ctx);
        uint32_t a = n - 1, b = n - 2;
        hive_arg_t aa = HIVE_VAL(a), ab = HIVE_VAL(b);
        hive_ref_t ra, rb;
        if (hive_submit(h, fib_task, &aa, 1, NULL, &ra) != HIVE_OK)
            return 1;
        if (hive_submit(h, fib_task, &ab, 1, NULL, &rb) != HIVE_OK)
            return 1;
        const uint64_t *pa, *pb;
        int rc1 = hive_get(h, ra, HIVE_FOREVER, (const void **)&pa, NULL);
        int rc2 = hive_get(h, rb, HIVE_FOREVER, (const void **)&pb, NULL);
        if (rc1 != HIVE_OK || rc2 != HIVE_OK)
            return 1;
        r = *pa + *pb;
        hive_release(h, ra);
        hive_release(h, rb);
    }
    return hive_return(ctx, &r, sizeof r);
}

static int square_task(hive_ctx_t *ctx)
{
    uint64_t i = *(const uint64_t *)hive_arg(ctx, 0, NULL);
    uint64_t sq = i * i;
    return hive_return(ctx, &sq, sizeof sq);
}

/* Waits for its children with hive_wait, then sums them. */
static int wait_children(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    hive_ref_t refs[4];
    for (uint64_t i = 0; i < 4; i++) {
        hive_arg_t a = HIVE_VAL(i);
        if (hive_submit(h, square_task, &a, 1, NULL, &refs[i]) != HIVE_OK)
            return 1;
    }
    int first = hive_wait(h, refs, 4, 1, HIVE_FOREVER, NULL);
    unsigned char ready[4] = { 0 };
    int all = hive_wait(h, refs, 4, 4, HIVE_FOREVER, ready);
    uint64_t out[3] = { (uint64_t)first, (uint64_t)all, 0 };
    for (int i = 0; i < 4; i++) {
        const uint64_t *p;
        if (!ready[i] || hive_get(h, refs[i], 0, (const void **)&p, NULL) != HIVE_OK)
            return 1;
        out[2] += *p;
        hive_release(h, refs[i]);
    }
    return hive_return(ctx, out, sizeof out);
}

static void test_nested_waits_one_worker(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    uint32_t n = 15;
    hive_arg_t a = HIVE_VAL(n);
    hive_ref_t r;
    assert_int_equal(hive_submit(h, fib_task, &a, 1, NULL, &r), HIVE_OK);
    assert_int_equal(get_u64(h, r), 610);
    hive_release(h, r);

    assert_int_equal(hive_submit(h, wait_children, NULL, 0, NULL, &r), HIVE_OK);
    const uint64_t *out;
    size_t sz;
    get_ok(h, r, (const void **)&out, &sz);
    assert_int_equal(sz, 3 * sizeof(uint64_t));
    assert_true(out[0] >= 1 && out[0] <= 4);
    assert_int_equal(out[1], 4);
    assert_int_equal(out[2], 0 + 1 + 4 + 9);
    hive_release(h, r);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ---------------------------------------------------------------- shutdown */

static _Atomic int stop_seen, stop_submit_rc, stop_submit_untouched;

static int until_stopping(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    atomic_fetch_add(&gate_entered, 1);
    uint64_t deadline = test_now_ns() + (uint64_t)DEADLINE_MS * 1000000u;
    while (!atomic_load(&h->sched.stopping) && test_now_ns() < deadline)
        sched_yield();
    atomic_store(&stop_seen, atomic_load(&h->sched.stopping));
    hive_ref_t r = { 4242 };
    atomic_store(&stop_submit_rc, hive_submit(h, count_task, NULL, 0, NULL, &r));
    atomic_store(&stop_submit_untouched, r.id == 4242);
    return 0;
}

static void test_shutdown_with_queued_work(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    gate_reset();
    atomic_store(&count_runs, 0);
    atomic_store(&stop_seen, 0);
    atomic_store(&stop_submit_rc, 1);
    hive_ref_t blocker, queued[10], waiting, never, keep;
    assert_int_equal(hive_submit(h, until_stopping, NULL, 0, NULL, &blocker), HIVE_OK);
    WAIT_UNTIL(atomic_load(&gate_entered) == 1, DEADLINE_MS);
    for (int i = 0; i < 10; i++) {
        hive_opts_t o = { .priority = i % 3 - 1 };
        assert_int_equal(hive_submit(h, count_task, NULL, 0, &o, &queued[i]), HIVE_OK);
    }
    void *d;
    assert_int_equal(hive_create(h, 64, &d, &never), HIVE_OK);
    assert_int_equal(hive_put(h, "kept", 5, &keep), HIVE_OK);
    hive_arg_t args[2] = { HIVE_REF(keep), HIVE_REF(never) };
    assert_int_equal(hive_submit(h, count_task, args, 2, NULL, &waiting), HIVE_OK);
    /* every ref is still held by this thread: shutdown frees them all
     * (ASan's leak check sees anything left), and nothing may be touched after */
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&count_runs), 0);
    assert_int_equal(atomic_load(&stop_seen), 1);
    assert_int_equal(atomic_load(&stop_submit_rc), HIVE_ESHUTDOWN);
    assert_true(atomic_load(&stop_submit_untouched));
}

/* A task still running at shutdown that waits inside the engine must not
 * run work that was queued: "queued ones never run"; its wait ends with
 * HIVE_ESHUTDOWN instead. */
static _Atomic int late_get_rc;
static hive_ref_t late_queued;

static int get_while_stopping(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    atomic_fetch_add(&gate_entered, 1);
    uint64_t deadline = test_now_ns() + (uint64_t)DEADLINE_MS * 1000000u;
    while (!atomic_load(&h->sched.stopping) && test_now_ns() < deadline)
        sched_yield();
    const void *p;
    atomic_store(&late_get_rc, hive_get(h, late_queued, 100 * 1000000, &p, NULL));   /* bounded */
    return 0;
}

static void test_shutdown_nested_wait_runs_nothing_queued(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    gate_reset();
    atomic_store(&count_runs, 0);
    atomic_store(&late_get_rc, 1);
    hive_ref_t blocker;
    assert_int_equal(hive_submit(h, get_while_stopping, NULL, 0, NULL, &blocker), HIVE_OK);
    WAIT_UNTIL(atomic_load(&gate_entered) == 1, DEADLINE_MS);
    assert_int_equal(hive_submit(h, count_task, NULL, 0, NULL, &late_queued), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_not_equal(atomic_load(&late_get_rc), 1);   /* the blocker did wait */
    if (atomic_load(&count_runs) != 0)
        fail_msg("a queued task ran during shutdown (the running task's hive_get returned %d)",
                 atomic_load(&late_get_rc));
    assert_int_equal(atomic_load(&late_get_rc), HIVE_ESHUTDOWN);
}

/* --------------------------------------------------------------- bad input */

static _Atomic int inner_rc, inner_msg_ok, inner_untouched;

/* Inside a task: make an object, release it, then name it in a submit. */
static int submit_released(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    hive_ref_t gone, r = { 777 };
    if (hive_put(h, "gone", 5, &gone) != HIVE_OK || hive_release(h, gone) != HIVE_OK)
        return 1;
    hive_arg_t a = HIVE_REF(gone);
    atomic_store(&inner_rc, hive_submit(h, count_task, &a, 1, NULL, &r));
    atomic_store(&inner_msg_ok, strstr(hive_last_error(), "does not exist") != NULL);
    atomic_store(&inner_untouched, r.id == 777);
    /* and one the caller released before submitting this task */
    const uint64_t *id = hive_arg(ctx, 0, NULL);
    hive_arg_t b = HIVE_REF(((hive_ref_t){ *id }));
    int rc = hive_submit(h, count_task, &b, 1, NULL, &r);
    return rc == HIVE_ENOENT && r.id == 777 ? 0 : 1;
}

/* Returns its argument, 8 bytes (1 if the return is refused). */
static int ret8_task(hive_ctx_t *ctx)
{
    return hive_return(ctx, hive_arg(ctx, 0, NULL), 8) == HIVE_OK ? 0 : 1;
}

/* Forks ret8_task children on its own worker (private results, charged
 * from the worker's reserve and freed back into it) and sums what they
 * return. */
static int fork_ret8_task(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    enum { KIDS = 300 };               /* more than two reserve batches */
    hive_ref_t r[KIDS];
    uint64_t sum = 0;
    for (uint64_t i = 0; i < KIDS; i++)
        if (hive_submit(h, ret8_task, &HIVE_VAL(i), 1, NULL, &r[i]) != HIVE_OK)
            return 1;
    for (int i = 0; i < KIDS; i++) {
        const void *p;
        if (hive_get(h, r[i], HIVE_FOREVER, &p, NULL) == HIVE_OK)
            sum += *(const uint64_t *)p;
        hive_release(h, r[i]);
    }
    return hive_return(ctx, &sum, sizeof sum) == HIVE_OK ? 0 : 1;
}

/* Inline results on workers are charged from the thread's reserve, taken
 * in batches (store.c): near a full store the reserves are taken back and a
 * worker still gets the last cells one at a time, a result past the
 * capacity is refused, and the store's used counts what live payloads
 * take, never a reserve. */
static void test_inline_results_near_full(void **state)
{
    (void)state;
    hive_t *h = engine(1 * MiB, 1, NULL);
    hive_ref_t r, big, kids[5];
    const void *p;
    /* a fork-join whose children's results come from the reserve */
    assert_int_equal(hive_submit(h, fork_ret8_task, NULL, 0, NULL, &r), HIVE_OK);
    get_ok(h, r, &p, NULL);
    assert_int_equal(*(const uint64_t *)p, 300 * 299 / 2);
    hive_release(h, r);
    expect_empty_store(h);             /* no reserve counted as used */
    /* leave four cells free: a large object takes its size + a 64-byte header */
    void *d;
    assert_int_equal(hive_create(h, 1 * MiB - 5 * 64, &d, &big), HIVE_OK);
    hive_store_stats_t st;
    hive_store_stats(h, &st);
    assert_int_equal(st.used, 1 * MiB - 4 * 64);
    for (uint64_t i = 0; i < 5; i++)
        assert_int_equal(hive_submit(h, ret8_task, &HIVE_VAL(i), 1, NULL, &kids[i]), HIVE_OK);
    for (int i = 0; i < 4; i++) {      /* no batch fits: each takes its one cell */
        size_t n;
        get_ok(h, kids[i], &p, &n);
        assert_int_equal(n, 8);
        assert_int_equal(*(const uint64_t *)p, (uint64_t)i);
    }
    ASSERT_FAILS_WITH(hive_get(h, kids[4], HIVE_FOREVER, &p, NULL), HIVE_ETASK, "failed");
    hive_store_stats(h, &st);
    assert_int_equal(st.used, 1 * MiB);
    for (int i = 0; i < 5; i++)
        hive_release(h, kids[i]);
    hive_release(h, big);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_submit_bad_input(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 2, NULL);
    atomic_store(&count_runs, 0);
    hive_ref_t keep, r = { 777 };
    assert_int_equal(hive_put(h, "keep me", 8, &keep), HIVE_OK);
    hive_store_stats_t before, after;
    hive__store_drain(h);
    hive_store_stats(h, &before);
    int one = 1;
    hive_arg_t good = HIVE_VAL(one);

    ASSERT_FAILS_WITH(hive_submit(NULL, count_task, NULL, 0, NULL, &r), HIVE_EINVAL, "engine is NULL");
    ASSERT_FAILS_WITH(hive_submit(h, NULL, NULL, 0, NULL, &r), HIVE_EINVAL, "fn is NULL");
    ASSERT_FAILS_WITH(hive_submit(h, count_task, &good, 1, NULL, NULL), HIVE_EINVAL, "result is NULL");
    ASSERT_FAILS_WITH(hive_submit(h, count_task, NULL, 2, NULL, &r), HIVE_EINVAL,
                      "args is NULL for 2 arguments");
    hive_arg_t null_data[2] = { HIVE_VAL(one), HIVE_BYTES(NULL, 8) };
    ASSERT_FAILS_WITH(hive_submit(h, count_task, null_data, 2, NULL, &r), HIVE_EINVAL,
                      "argument 1 has NULL data and size 8");
    /* a ref that never existed, after a good ref whose count must be given back */
    hive_arg_t ghost[3] = { HIVE_REF(keep), HIVE_VAL(one), HIVE_REF(((hive_ref_t){ (uint64_t)1 << 61 })) };
    ASSERT_FAILS_WITH(hive_submit(h, count_task, ghost, 3, NULL, &r), HIVE_ENOENT, "does not exist");
    /* so many arguments that nargs * the entry size wraps (any entry of 2
     * bytes or more): refused before the record is sized or args read */
    ASSERT_FAILS_WITH(hive_submit(h, count_task, null_data, SIZE_MAX / 2 + 2, NULL, &r), HIVE_EINVAL,
                      "arguments are too many");
    assert_int_equal(r.id, 777);                    /* untouched every time */

    hive__store_drain(h);
    hive_store_stats(h, &after);
    assert_int_equal(after.objects, before.objects);   /* no result object was left behind */
    assert_int_equal(after.used, before.used);
    const void *p;
    get_ok(h, keep, &p, NULL);                        /* others intact */
    assert_string_equal(p, "keep me");

    /* a ref released before the submit, from inside a task */
    hive_ref_t released;
    assert_int_equal(hive_put(h, "bye", 4, &released), HIVE_OK);
    assert_int_equal(hive_release(h, released), HIVE_OK);
    ASSERT_FAILS_WITH(hive_submit(h, count_task, &(hive_arg_t){ .ref = released }, 1, NULL, &r),
                      HIVE_ENOENT, "does not exist");
    atomic_store(&inner_rc, 1);
    hive_arg_t id = HIVE_VAL(released.id);
    assert_int_equal(hive_submit(h, submit_released, &id, 1, NULL, &r), HIVE_OK);
    get_ok(h, r, &p, NULL);
    assert_int_equal(atomic_load(&inner_rc), HIVE_ENOENT);
    assert_true(atomic_load(&inner_msg_ok));
    assert_true(atomic_load(&inner_untouched));
    hive_release(h, r);
    assert_int_equal(atomic_load(&count_runs), 0);

    /* the kept object still has exactly the caller's one count */
    assert_int_equal(hive_release(h, keep), HIVE_OK);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* --------------------------------------------------------------------- NUMA */

#define NUMA_TOPO "pack:2 numa:1 core:2 pu:1"     /* workers 0,1 on node 0; 2,3 on node 1 */

static size_t ring_len(hive__ring_t *r)
{
    return atomic_load(&r->put) - atomic_load(&r->take);
}

static size_t deque_len(hive__deque_t *d)
{
    return (size_t)(atomic_load(&d->bottom) - atomic_load(&d->top));
}

/* An internal job posted to one worker: optionally put an object there,
 * optionally wait for *go and run a hook, then optionally hold the worker
 * until `open`. */
typedef struct wjob {
    hive__job_t  job;
    hive_t      *h;
    size_t       put_size;                 /* nonzero: put this many bytes of (char)put_fill */
    int          put_fill;
    hive_ref_t   ref;
    void       (*hook)(struct wjob *j);
    _Atomic int *go;                       /* non-NULL: wait for it before the hook */
    bool         hold;
    _Atomic int  entered, hooked, open, done;
} wjob_t;

static void wjob_fn(hive__job_t *job, hive__worker_t *w)
{
    wjob_t *j = HIVE_CONTAINER_OF(job, wjob_t, job);
    if (w != NULL) {
        atomic_store(&j->entered, 1);
        if (j->put_size) {
            void *buf = malloc(j->put_size);
            memset(buf, j->put_fill, j->put_size);
            hive_put(j->h, buf, j->put_size, &j->ref);
            free(buf);
        }
        if (j->go)
            wait_flag(j->go, DEADLINE_MS);
        if (j->hook)
            j->hook(j);
        atomic_store(&j->hooked, 1);
        if (j->hold) {
            /* politely: several threads share two cores */
            uint64_t deadline = test_now_ns() + (uint64_t)DEADLINE_MS * 1000000u;
            while (!atomic_load(&j->open) && !atomic_load(&w->sched->stopping) &&
                   test_now_ns() < deadline)
                test_sleep_ms(1);
        }
    }
    atomic_store(&j->done, 1);
}

static void post(hive_t *h, unsigned worker, wjob_t *j)
{
    j->job.fn = wjob_fn;
    j->h = h;
    hive__sched_post(&h->sched, worker, &j->job);
}

static unsigned node_of_worker(hive_t *h, unsigned w)
{
    return h->sched.w[w].slot->node;
}

/* (a) Arguments pull tasks to their node. */
enum { PL_MAX = 256 };
typedef struct pl_arg {
    uint32_t id;
    uint32_t target;        /* 0/1: the node ring it should be on; 2: worker 0's deque */
} pl_arg_t;
static _Atomic int pl_runs[PL_MAX], pl_bad_payload, pl_ran_on[PL_MAX];
static _Atomic int pl_log_n[4];
static _Atomic int pl_log[4][PL_MAX];

static int placed_task(hive_ctx_t *ctx)
{
    const pl_arg_t *a = hive_arg(ctx, 0, NULL);
    unsigned w = hive_worker_index(ctx);
    atomic_fetch_add(&pl_runs[a->id], 1);
    atomic_store(&pl_ran_on[a->id], (int)w);
    int k = atomic_fetch_add(&pl_log_n[w], 1);
    if (k < PL_MAX)
        atomic_store(&pl_log[w][k], (int)a->target);
    for (size_t i = 1; i < hive_nargs(ctx); i++) {
        size_t n;
        const unsigned char *p = hive_arg(ctx, i, &n);
        if (n == 0 || p[0] != p[n - 1] || (p[0] != 0x10 && p[0] != 0x11 && p[0] != 0x20 && p[0] != 0x21))
            atomic_fetch_add(&pl_bad_payload, 1);
    }
    return 0;
}

static hive_ref_t big0, big1, small0, small1;
static hive_ref_t pl_refs[PL_MAX];
static _Atomic unsigned pl_count;
static _Atomic int pl_hook_rc;

static void pl_submit(hive_t *h, uint32_t target, hive_ref_t first, hive_ref_t second)
{
    unsigned id = atomic_load(&pl_count);     /* one submitter at a time */
    pl_arg_t a = { .id = id, .target = target };
    hive_arg_t args[3] = { HIVE_VAL(a), HIVE_REF(first), HIVE_REF(second) };
    int rc = hive_submit(h, placed_task, args, second.id ? 3 : 2, NULL, &pl_refs[id]);
    if (rc != HIVE_OK)
        atomic_store(&pl_hook_rc, rc);
    atomic_store(&pl_count, id + 1);
}

enum { PL_K = 8, PL_N = 32 };

/* On worker 0 (node 0): node-1 objects go to node 1's ring, node-0 ones to its own deque. */
static void submit_from_worker0(wjob_t *j)
{
    for (int i = 0; i < PL_K; i++)
        pl_submit(j->h, 1, big1, (hive_ref_t){ 0 });
    for (int i = 0; i < PL_K; i++)
        pl_submit(j->h, 2, big0, (hive_ref_t){ 0 });
}

static void test_numa_args_pull_tasks(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 4, NUMA_TOPO);
    assert_int_equal(hive_num_nodes(h), 2);
    for (unsigned w = 0; w < 4; w++)
        assert_int_equal(node_of_worker(h, w), w / 2);
    memset(pl_runs, 0, sizeof pl_runs);
    memset(pl_log_n, 0, sizeof pl_log_n);
    atomic_store(&pl_bad_payload, 0);
    atomic_store(&pl_hook_rc, 0);
    pl_count = 0;

    /* objects made on the worker of a node live on that node */
    static wjob_t puts[4];
    const size_t sizes[4] = { 1 * MiB, 128, 1 * MiB, 128 };   /* past the inline size */
    const int fills[4] = { 0x10, 0x11, 0x20, 0x21 };
    for (unsigned w = 0; w < 4; w++) {
        puts[w] = (wjob_t){ .put_size = sizes[w], .put_fill = fills[w] };
        post(h, w, &puts[w]);
    }
    for (unsigned w = 0; w < 4; w++)
        WAIT_UNTIL(atomic_load(&puts[w].done), DEADLINE_MS);
    big0 = puts[0].ref, small0 = puts[1].ref, big1 = puts[2].ref, small1 = puts[3].ref;
    hive_ref_t objs[4] = { big0, small0, big1, small1 };
    for (unsigned w = 0; w < 4; w++) {
        const void *p;
        get_ok(h, objs[w], &p, NULL);
        assert_int_equal(hive__arena_node_of(&h->arena, p), w / 2);
    }

    /* hold every worker; worker 0 submits once all of them are held */
    static wjob_t hold[4];
    static _Atomic int go;
    atomic_store(&go, 0);
    for (unsigned w = 0; w < 4; w++) {
        hold[w] = (wjob_t){ .hold = true, .hook = w == 0 ? submit_from_worker0 : NULL,
                            .go = w == 0 ? &go : NULL };
        post(h, w, &hold[w]);
    }
    for (unsigned w = 0; w < 4; w++)
        WAIT_UNTIL(atomic_load(&hold[w].entered), DEADLINE_MS);
    atomic_store(&go, 1);
    WAIT_UNTIL(atomic_load(&hold[0].hooked), DEADLINE_MS);
    assert_int_equal(atomic_load(&pl_count), 2 * PL_K);
    /* from this thread: the ring of the node of the largest ref argument */
    for (int i = 0; i < PL_N; i++)
        pl_submit(h, 1, big1, (hive_ref_t){ 0 });
    for (int i = 0; i < PL_N; i++)
        pl_submit(h, 0, big0, (hive_ref_t){ 0 });
    pl_submit(h, 1, small0, big1);
    pl_submit(h, 0, big0, small1);
    assert_int_equal(atomic_load(&pl_hook_rc), 0);

    const unsigned lane = hive__prio_lane(HIVE_PRIO_NORMAL);
    assert_int_equal(ring_len(&h->sched.nodes[1].ring[lane]), PL_K + PL_N + 1);
    assert_int_equal(ring_len(&h->sched.nodes[0].ring[lane]), PL_N + 1);
    assert_int_equal(deque_len(h->sched.w[0].deque[lane]), PL_K);
    for (unsigned w = 1; w < 4; w++)
        assert_int_equal(deque_len(h->sched.w[w].deque[lane]), 0);

    /* let node 1 go first: each of its workers drains its own node's ring
     * before it looks at node 0's ring, and that ring before node 0's deques */
    atomic_store(&hold[2].open, 1);
    atomic_store(&hold[3].open, 1);
    WAIT_UNTIL(atomic_load(&pl_log_n[2]) + atomic_load(&pl_log_n[3]) == (int)pl_count, DEADLINE_MS);
    for (unsigned w = 2; w < 4; w++) {
        int n = atomic_load(&pl_log_n[w]), prev = 1;
        for (int k = 0; k < n; k++) {
            int t = atomic_load(&pl_log[w][k]);
            int rank = t == 1 ? 1 : t == 0 ? 2 : 3;      /* own ring, remote ring, remote deque */
            if (rank < prev)
                fail_msg("worker %u ran a task of target %d after one of a later source (run %d)",
                         w, t, k);
            prev = rank;
        }
    }
    atomic_store(&hold[0].open, 1);
    atomic_store(&hold[1].open, 1);
    for (unsigned i = 0; i < pl_count; i++) {
        const void *p;
        get_ok(h, pl_refs[i], &p, NULL);
        assert_int_equal(atomic_load(&pl_runs[i]), 1);
        hive_release(h, pl_refs[i]);
    }
    for (unsigned w = 0; w < 4; w++)
        WAIT_UNTIL(atomic_load(&hold[w].done), DEADLINE_MS);
    assert_int_equal(atomic_load(&pl_bad_payload), 0);
    for (unsigned w = 0; w < 4; w++)
        hive_release(h, objs[w]);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* (b) Thieves take from their own node first. Workers 0 (node 0) and 2
 * (node 1) each spawn ST_N tasks on their own deque and then wait without
 * touching it; workers 1 (node 0) and 3 (node 1) are the only thieves, let
 * loose once both deques are full. A thief goes to the other node only
 * after finding its own node's deque empty, and no deque is refilled, so:
 *  - each thief's runs are all same-node tasks, then all remote ones;
 *  - at most one thief ever steals remotely (the first thief to find its
 *    own deque empty does so when nothing is left to take there: if the
 *    other one later comes over, it finds it empty too);
 * A random victim order breaks both at once. Failed steals cannot blur
 * this: a steal fails spuriously only against a concurrent thief on the
 * same deque, which needs a remote thief, which needs an empty deque. */
#if TEST_SCALE > 1
enum { ST_N = 500 };
#else
enum { ST_N = 2000 };
#endif
static _Atomic int st_done[2], st_pushed[2], st_runs[2][ST_N];
static _Atomic int st_log_n[4];
static _Atomic unsigned char st_log[4][2 * ST_N];
static hive_ref_t st_refs[2][ST_N];
static _Atomic int st_submit_rc;

typedef struct st_arg { uint32_t origin, id; } st_arg_t;

static int stolen_task(hive_ctx_t *ctx)
{
    const st_arg_t *a = hive_arg(ctx, 0, NULL);
    unsigned w = hive_worker_index(ctx);
    int k = atomic_fetch_add(&st_log_n[w], 1);
    if (k < 2 * ST_N)
        atomic_store(&st_log[w][k], (unsigned char)a->origin);
    atomic_fetch_add(&st_runs[a->origin][a->id], 1);
    uint64_t until = test_now_ns() + 2000;          /* a couple of microseconds of work */
    while (test_now_ns() < until)
        ;
    atomic_fetch_add(&st_done[a->origin], 1);
    return 0;
}

static void spawn_and_wait(wjob_t *j)
{
    unsigned origin = node_of_worker(j->h, hive__self->index);
    for (uint32_t i = 0; i < ST_N; i++) {
        st_arg_t a = { .origin = origin, .id = i };
        hive_arg_t arg = HIVE_VAL(a);
        int rc = hive_submit(j->h, stolen_task, &arg, 1, NULL, &st_refs[origin][i]);
        if (rc != HIVE_OK)
            atomic_store(&st_submit_rc, rc);
    }
    atomic_store(&st_pushed[origin], 1);
    uint64_t deadline = test_now_ns() + (uint64_t)DEADLINE_MS * 1000000u;
    /* until every task is done, the other spawner's too: a free spawner would steal */
    while (atomic_load(&st_done[0]) + atomic_load(&st_done[1]) < 2 * ST_N && test_now_ns() < deadline)
        test_sleep_ms(1);
}

static void test_numa_steal_same_node_first(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 4, NUMA_TOPO);
    memset(st_done, 0, sizeof st_done);
    memset(st_pushed, 0, sizeof st_pushed);
    memset(st_runs, 0, sizeof st_runs);
    memset(st_log_n, 0, sizeof st_log_n);
    atomic_store(&st_submit_rc, 0);
    static wjob_t thief[2], spawner[2];
    for (unsigned k = 0; k < 2; k++) {
        thief[k] = (wjob_t){ .hold = true };
        post(h, 2 * k + 1, &thief[k]);
    }
    for (unsigned k = 0; k < 2; k++)
        WAIT_UNTIL(atomic_load(&thief[k].entered), DEADLINE_MS);
    /* both spawners busy before either pushes: an idle worker 2 would steal */
    static _Atomic int go;
    atomic_store(&go, 0);
    for (unsigned k = 0; k < 2; k++) {
        spawner[k] = (wjob_t){ .hook = spawn_and_wait, .go = &go };
        post(h, 2 * k, &spawner[k]);
    }
    for (unsigned k = 0; k < 2; k++)
        WAIT_UNTIL(atomic_load(&spawner[k].entered), DEADLINE_MS);
    atomic_store(&go, 1);
    WAIT_UNTIL(atomic_load(&st_pushed[0]) && atomic_load(&st_pushed[1]), DEADLINE_MS);
    assert_int_equal(atomic_load(&st_submit_rc), 0);
    const unsigned lane = hive__prio_lane(HIVE_PRIO_NORMAL);
    assert_int_equal(deque_len(h->sched.w[0].deque[lane]), ST_N);
    assert_int_equal(deque_len(h->sched.w[2].deque[lane]), ST_N);
    uint64_t steals0[4], remote0[4];
    for (unsigned w = 0; w < 4; w++) {
        steals0[w] = atomic_load(&h->sched.w[w].steals);
        remote0[w] = atomic_load(&h->sched.w[w].remote_steals);
    }
    atomic_store(&thief[0].open, 1);
    atomic_store(&thief[1].open, 1);
    for (unsigned k = 0; k < 2; k++)
        WAIT_UNTIL(atomic_load(&spawner[k].done), 2 * DEADLINE_MS);
    assert_int_equal(atomic_load(&st_done[0]), ST_N);
    assert_int_equal(atomic_load(&st_done[1]), ST_N);
    for (unsigned o = 0; o < 2; o++)
        for (unsigned i = 0; i < ST_N; i++)
            if (atomic_load(&st_runs[o][i]) != 1)
                fail_msg("task %u of node %u ran %d times", i, o, atomic_load(&st_runs[o][i]));

    /* only the thieves ran tasks: the spawners never touched their deques */
    assert_int_equal(atomic_load(&st_log_n[0]), 0);
    assert_int_equal(atomic_load(&st_log_n[2]), 0);
    unsigned local[4] = { 0 }, remote[4] = { 0 };
    for (unsigned w = 1; w < 4; w += 2) {
        unsigned home = node_of_worker(h, w);
        int n = atomic_load(&st_log_n[w]);
        bool went_remote = false;
        for (int k = 0; k < n; k++) {
            unsigned origin = atomic_load(&st_log[w][k]);
            if (origin == home) {
                if (went_remote)
                    fail_msg("worker %u stole from its own node (run %d) after stealing remotely", w, k);
                local[w]++;
            } else {
                went_remote = true;
                remote[w]++;
            }
        }
        /* the worker's own counters agree with what its tasks saw */
        assert_int_equal(atomic_load(&h->sched.w[w].steals) - steals0[w], local[w] + remote[w]);
        assert_int_equal(atomic_load(&h->sched.w[w].remote_steals) - remote0[w], remote[w]);
    }
    if (remote[1] != 0 && remote[3] != 0)
        fail_msg("both thieves stole remotely (%u and %u of %u; local %u and %u)", remote[1],
                 remote[3], 2 * ST_N, local[1], local[3]);
    assert_true(local[1] + local[3] >= remote[1] + remote[3]);
    assert_true(local[1] + local[3] >= ST_N);
    print_message("steals: worker 1 %u local + %u remote, worker 3 %u local + %u remote\n",
                  local[1], remote[1], local[3], remote[3]);

    for (unsigned o = 0; o < 2; o++)
        for (unsigned i = 0; i < ST_N; i++)
            hive_release(h, st_refs[o][i]);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ---------------------------------------------------------------- retries */

/* Fails (after a hive_return of its run number) until run number
 * fails_first, then succeeds returning nothing, so a result with bytes
 * proves that a failed run's bytes leaked. */
static _Atomic int retry_runs;

static int flaky_task(hive_ctx_t *ctx)
{
    int fails_first = *(const int *)hive_arg(ctx, 0, NULL);
    int run = atomic_fetch_add(&retry_runs, 1);
    if (run < fails_first) {
        hive_return(ctx, &run, sizeof run);
        return 1;
    }
    return 0;
}

static void test_retries_count_runs(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 2, NULL);
    const void *p;
    size_t n = 99;
    /* fails twice, 3 retries allowed: 3 runs, sealed, empty result */
    atomic_store(&retry_runs, 0);
    int fails = 2;
    hive_opts_t o = { .max_retries = 3 };
    hive_ref_t r;
    assert_int_equal(hive_submit(h, flaky_task, &HIVE_VAL(fails), 1, &o, &r), HIVE_OK);
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, &n), HIVE_OK);
    assert_int_equal(n, 0);                          /* the failed runs' bytes are gone */
    assert_int_equal(atomic_load(&retry_runs), 3);
    hive_release(h, r);
    /* fails 5 times, 3 retries: 4 runs, then HIVE_ETASK */
    atomic_store(&retry_runs, 0);
    fails = 5;
    assert_int_equal(hive_submit(h, flaky_task, &HIVE_VAL(fails), 1, &o, &r), HIVE_OK);
    ASSERT_FAILS_WITH(hive_get(h, r, HIVE_FOREVER, &p, &n), HIVE_ETASK, "failed");
    assert_int_equal(atomic_load(&retry_runs), 4);
    hive_release(h, r);
    /* zero-initialised opts (and NULL): one run, as before */
    atomic_store(&retry_runs, 0);
    hive_opts_t zero = { 0 };
    assert_int_equal(hive_submit(h, flaky_task, &HIVE_VAL(fails), 1, &zero, &r), HIVE_OK);
    ASSERT_FAILS_WITH(hive_get(h, r, HIVE_FOREVER, &p, &n), HIVE_ETASK, "failed");
    assert_int_equal(atomic_load(&retry_runs), 1);
    hive_release(h, r);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Counts its runs, waits for the cancel, fails. */
static _Atomic int cancel_retry_runs;

static int fail_when_cancelled(hive_ctx_t *ctx)
{
    atomic_fetch_add(&cancel_retry_runs, 1);
    uint64_t deadline = test_now_ns() + (uint64_t)DEADLINE_MS * 1000000u;
    while (!hive_cancelled(ctx) && test_now_ns() < deadline)
        sched_yield();
    return 1;
}

static void test_cancelled_task_is_not_retried(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 2, NULL);
    atomic_store(&cancel_retry_runs, 0);
    hive_opts_t o = { .max_retries = 5 };
    hive_ref_t r;
    assert_int_equal(hive_submit(h, fail_when_cancelled, NULL, 0, &o, &r), HIVE_OK);
    WAIT_UNTIL(atomic_load(&cancel_retry_runs) == 1, DEADLINE_MS);
    assert_int_equal(hive_cancel(h, r), HIVE_OK);
    const void *p;
    ASSERT_FAILS_WITH(hive_get(h, r, HIVE_FOREVER, &p, NULL), HIVE_ECANCELED, "cancelled");
    assert_int_equal(atomic_load(&cancel_retry_runs), 1);
    /* cancelled while queued: never runs at all */
    gate_reset();
    hive_ref_t g[2], q;
    for (int i = 0; i < 2; i++)
        assert_int_equal(hive_submit(h, gate_task, NULL, 0, NULL, &g[i]), HIVE_OK);
    WAIT_UNTIL(atomic_load(&gate_entered) == 2, DEADLINE_MS);
    assert_int_equal(hive_submit(h, fail_when_cancelled, NULL, 0, &o, &q), HIVE_OK);
    assert_int_equal(hive_cancel(h, q), HIVE_OK);
    atomic_store(&gate_open, 1);
    ASSERT_FAILS_WITH(hive_get(h, q, HIVE_FOREVER, &p, NULL), HIVE_ECANCELED, "cancelled");
    for (int i = 0; i < 2; i++) {
        assert_int_equal(hive_get(h, g[i], HIVE_FOREVER, &p, NULL), HIVE_OK);
        hive_release(h, g[i]);
    }
    assert_int_equal(atomic_load(&cancel_retry_runs), 1);
    hive_release(h, q);
    hive_release(h, r);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------- a worker's wait is not counted */

/* Get the object whose ref is the one inline argument (not a dependency:
 * the task runs at once and waits inside). */
static int get_the_ref(hive_ctx_t *ctx)
{
    hive_ref_t r = *(const hive_ref_t *)hive_arg(ctx, 0, NULL);
    const void *p;
    return hive_get(hive_engine(ctx), r, HIVE_FOREVER, &p, NULL) != HIVE_OK;
}

/* A task blocked in hive_get does not count itself in the store's sleepers:
 * that engine-wide count (two RMWs on one line per waiting get, from every
 * worker) protects user threads from shutdown's frees, and shutdown joins
 * the engine's workers before it frees anything. Once the waiting task has
 * set the object's WAITERS bit it is past where it would have counted. */
static void test_worker_wait_is_not_a_sleeper(void **state)
{
    (void)state;
    hive_t *h = engine(16 * MiB, 1, NULL);
    void *data;
    hive_ref_t obj, r;
    assert_int_equal(hive_create(h, 8, &data, &obj), HIVE_OK);
    assert_int_equal(hive_submit(h, get_the_ref, &HIVE_VAL(obj), 1, NULL, &r), HIVE_OK);
    hive__obj_t *o = hive__obj_find(h, obj, "test");
    assert_non_null(o);
    WAIT_UNTIL(atomic_load(&o->state) & HIVE__WAITERS, DEADLINE_MS);
    assert_int_equal(atomic_load(&h->store.sleepers), 0);
    assert_int_equal(hive_seal(h, obj), HIVE_OK);
    const void *p;
    get_ok(h, r, &p, NULL);
    hive_release(h, r);
    hive_release(h, obj);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------------ small tasks */

/* A task with few small inline arguments keeps its whole queued body in
 * its result record's inline payload (task.c, "Small tasks"), which the
 * task then writes its result into. echo_args first fills a 64-byte
 * result (exactly those bytes) with 0xEE and only then reads its
 * arguments, so arguments still read from the record would come back as
 * 0xEE. It reports: whether it ran as a small task, nargs, every size and
 * the misaligned count, then the argument bytes one after another. */
typedef struct echo_head {
    uint8_t small, nargs, misaligned, ref0;
    uint8_t size[4];
} echo_head_t;

static int echo_args(hive_ctx_t *ctx)
{
    const void *ptr[4];
    size_t size[4];
    size_t n = hive_nargs(ctx);
    for (size_t i = 0; i < n && i < 4; i++)
        ptr[i] = hive_arg(ctx, i, &size[i]);
    unsigned char *out = hive_return_alloc(ctx, 64);
    if (out == NULL)
        return 1;
    memset(out, 0xEE, 64);
    echo_head_t hd = { .small = ctx->sargs != NULL, .nargs = (uint8_t)n,
                       .ref0 = hive_arg_ref(ctx, 0).id != 0 };
    size_t at = sizeof hd;
    for (size_t i = 0; i < n && i < 4; i++) {
        hd.size[i] = (uint8_t)size[i];
        hd.misaligned += (uintptr_t)ptr[i] % _Alignof(max_align_t) != 0;
        if (at < 64)
            memcpy(out + at, ptr[i], size[i] < 64 - at ? size[i] : 64 - at);
        at += size[i];
    }
    memcpy(out, &hd, sizeof hd);
    return hive_arg(ctx, n, NULL) == NULL ? 0 : 1;   /* one past the end: NULL */
}

static void test_small_task_args(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 2, NULL);
    /* sizes of up to 4 arguments (-1: none) and whether the task is small:
     * up to 3 inline arguments whose sizes, rounded up to 8, sum to 24 */
    static const struct { int size[4]; bool small; } cases[] = {
        { { -1, -1, -1, -1 }, true },  { { 0, -1, -1, -1 }, true },   { { 1, -1, -1, -1 }, true },
        { { 4, -1, -1, -1 }, true },   { { 8, -1, -1, -1 }, true },   { { 9, -1, -1, -1 }, true },
        { { 16, -1, -1, -1 }, true },  { { 17, -1, -1, -1 }, true },  { { 24, -1, -1, -1 }, true },
        { { 25, -1, -1, -1 }, false }, { { 40, -1, -1, -1 }, false }, { { 4, 4, 4, -1 }, true },
        { { 8, 8, 8, -1 }, true },     { { 8, 8, 9, -1 }, false },    { { 16, 8, -1, -1 }, true },
        { { 17, 8, -1, -1 }, false },  { { 0, 0, 0, -1 }, true },     { { 24, 0, -1, -1 }, true },
        { { 0, 24, 0, -1 }, true },    { { 1, 1, 1, 1 }, false },     { { 7, 1, 15, -1 }, false },
        { { 7, 1, 8, -1 }, true },
    };
    for (size_t c = 0; c < HIVE_ARRAY_LEN(cases); c++) {
        unsigned char bytes[4][40];
        hive_arg_t args[4];
        size_t nargs = 0;
        for (; nargs < 4 && cases[c].size[nargs] >= 0; nargs++) {
            size_t n = (size_t)cases[c].size[nargs];
            for (size_t k = 0; k < n; k++)
                bytes[nargs][k] = (unsigned char)(c * 16 + nargs * 64 + k + 1);
            args[nargs] = HIVE_BYTES(n ? bytes[nargs] : NULL, n);
        }
        hive_ref_t r;
        assert_int_equal(hive_submit(h, echo_args, nargs ? args : NULL, nargs, NULL, &r), HIVE_OK);
        memset(bytes, 0, sizeof bytes);            /* copied at submit */
        const unsigned char *out;
        size_t n;
        get_ok(h, r, (const void **)&out, &n);
        assert_int_equal(n, 64);
        echo_head_t hd;
        memcpy(&hd, out, sizeof hd);
        if (hd.small != cases[c].small)
            fail_msg("case %zu: ran as a %s task", c, hd.small ? "small" : "full");
        assert_int_equal(hd.nargs, nargs);
        assert_int_equal(hd.misaligned, 0);
        assert_int_equal(hd.ref0, 0);
        size_t at = sizeof hd;
        for (size_t i = 0; i < nargs; i++) {
            assert_int_equal(hd.size[i], cases[c].size[i]);
            for (size_t k = 0; k < hd.size[i] && at + k < 64; k++)
                if (out[at + k] != (unsigned char)(c * 16 + i * 64 + k + 1))
                    fail_msg("case %zu: argument %zu byte %zu is %#x", c, i, k, out[at + k]);
            at += hd.size[i];
        }
        assert_int_equal(hive_release(h, r), HIVE_OK);
    }
    /* options that need a full record: a name, many retries; and ones that do not */
    hive_opts_t named = { .name = "named" }, retries = { .max_retries = 1000 },
                few = { .max_retries = 255, .priority = 1, .place = HIVE_PLACE_NODE };
    const hive_opts_t *opts[] = { &named, &retries, &few };
    const bool small[] = { false, false, true };
    for (size_t i = 0; i < HIVE_ARRAY_LEN(opts); i++) {
        int v = 5;
        hive_ref_t r;
        assert_int_equal(hive_submit(h, echo_args, &HIVE_VAL(v), 1, opts[i], &r), HIVE_OK);
        const unsigned char *out;
        get_ok(h, r, (const void **)&out, NULL);
        assert_int_equal(out[0], small[i]);
        int got;
        memcpy(&got, out + sizeof(echo_head_t), sizeof got);
        assert_int_equal(got, 5);
        hive_release(h, r);
    }
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Private results (store.h): a task's children are its own until their
 * ids reach another thread. With one worker, a child released by its
 * spawner is freed at once and its slot taken again by the next child
 * under a new generation (the old id refused); a child whose id escapes
 * (the parent's result) is found and got by the test thread. */
typedef struct priv_seen {
    uint64_t a, b;                            /* the first two children's ids */
    int      get_a, retain_a, cancel_a;       /* what the spawner saw for a stale id */
    uint64_t va, vb;                          /* their values */
    uint64_t c;                               /* the escaping child */
} priv_seen_t;

static int priv_child(hive_ctx_t *ctx)
{
    uint64_t v = *(const uint64_t *)hive_arg(ctx, 0, NULL) * 3;
    return hive_return(ctx, &v, sizeof v);
}

static int priv_spawner(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    priv_seen_t s = { 0 };
    uint64_t x = 5, y = 7, z = 11;
    hive_ref_t a, b, c;
    const void *p;
    if (hive_submit(h, priv_child, &HIVE_VAL(x), 1, NULL, &a) != HIVE_OK ||
        hive_get(h, a, HIVE_FOREVER, &p, NULL) != HIVE_OK)
        return 1;
    memcpy(&s.va, p, sizeof s.va);
    s.a = a.id;
    if (hive_release(h, a) != HIVE_OK)
        return 1;
    s.get_a = hive_get(h, a, 0, &p, NULL);
    s.retain_a = hive_retain(h, a);
    s.cancel_a = hive_cancel(h, a);
    if (hive_submit(h, priv_child, &HIVE_VAL(y), 1, NULL, &b) != HIVE_OK ||
        hive_get(h, b, HIVE_FOREVER, &p, NULL) != HIVE_OK)
        return 1;
    memcpy(&s.vb, p, sizeof s.vb);
    s.b = b.id;
    hive_release(h, b);
    if (hive_submit(h, priv_child, &HIVE_VAL(z), 1, NULL, &c) != HIVE_OK)
        return 1;
    s.c = c.id;                               /* its count goes with the id to the caller */
    return hive_return(ctx, &s, sizeof s);
}

/* More children than a worker keeps freed private records (1024): the
 * rest go back to the table's free stack at once; twice, each child's
 * value checked. Its result: the number of children that were right. */
#define PRIV_MANY 1100
static int priv_many(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    static hive_ref_t r[PRIV_MANY];           /* one worker: one spawner at a time */
    uint32_t ok = 0;
    for (int round = 0; round < 2; round++) {
        int n = 0;
        for (; n < PRIV_MANY; n++) {
            uint64_t x = (uint64_t)n + (uint64_t)round * PRIV_MANY;
            if (hive_submit(h, priv_child, &HIVE_VAL(x), 1, NULL, &r[n]) != HIVE_OK)
                break;
        }
        for (int i = 0; i < n; i++) {
            const void *p;
            uint64_t v;
            if (hive_get(h, r[i], HIVE_FOREVER, &p, NULL) == HIVE_OK &&
                (memcpy(&v, p, sizeof v), v == 3 * ((uint64_t)i + (uint64_t)round * PRIV_MANY)))
                ok++;
            hive_release(h, r[i]);
        }
    }
    return hive_return(ctx, &ok, sizeof ok);
}

/* A spawner's own fast paths and where they give way (store.c's
 * own_private, sched.c's hive__sched_push_own and hive__sched_help_own):
 * more children than the deque holds (the rest go to the node's ring),
 * joined newest first; then the same with HIGH and LOW children beside
 * the NORMAL ones (the help then searches every lane); and a second
 * release of a child the owner freed is refused. Its result: the number
 * of checks that failed. */
#define OWN_KIDS 5000                          /* > HIVE_DEQUE_CAP (4096) */
static int own_paths_task(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    static hive_ref_t r[OWN_KIDS];            /* one worker: one spawner at a time */
    int mixed = *(const int *)hive_arg(ctx, 0, NULL);
    uint32_t bad = 0;
    int n = 0;
    for (; n < OWN_KIDS; n++) {
        uint64_t x = (uint64_t)n;
        hive_opts_t o = { .priority = !mixed ? HIVE_PRIO_NORMAL : n % 3 == 0 ? HIVE_PRIO_HIGH
                                      : n % 3 == 1 ? HIVE_PRIO_LOW : HIVE_PRIO_NORMAL };
        if (hive_submit(h, ret8_task, &HIVE_VAL(x), 1, &o, &r[n]) != HIVE_OK)
            break;
    }
    bad += n != OWN_KIDS;
    for (int i = n - 1; i >= 0; i--) {        /* newest first: each is at the deque's bottom */
        const void *p;
        size_t size;
        uint64_t v = 0;
        if (hive_get(h, r[i], HIVE_FOREVER, &p, &size) != HIVE_OK || size != 8 ||
            (memcpy(&v, p, 8), v != (uint64_t)i))
            bad++;
        bad += hive_release(h, r[i]) != HIVE_OK;
        if (i % 1000 == 0)                    /* the owner's record is gone: refused */
            bad += hive_release(h, r[i]) != HIVE_ENOENT;
    }
    return hive_return(ctx, &bad, sizeof bad);
}

static void test_own_paths_give_way(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    for (int mixed = 0; mixed < 2; mixed++) {
        hive_ref_t r;
        const void *p;
        assert_int_equal(hive_submit(h, own_paths_task, &HIVE_VAL(mixed), 1, NULL, &r), HIVE_OK);
        get_ok(h, r, &p, NULL);
        assert_int_equal(*(const uint32_t *)p, 0);
        hive_release(h, r);
    }
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_private_results(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    hive_ref_t escaped[3];
    for (int round = 0; round < 3; round++) {
        hive_ref_t r;
        assert_int_equal(hive_submit(h, priv_spawner, NULL, 0, NULL, &r), HIVE_OK);
        priv_seen_t s;
        get_exact(h, r, &s, sizeof s);
        hive_release(h, r);
        assert_int_equal(s.va, 15);
        assert_int_equal(s.vb, 21);
        assert_int_equal(s.get_a, HIVE_ENOENT);
        assert_int_equal(s.retain_a, HIVE_ENOENT);
        assert_int_equal(s.cancel_a, HIVE_ENOENT);
        /* the same slot at once, under a new generation */
        assert_int_equal(hive__handles_slot_of(s.a), hive__handles_slot_of(s.b));
        assert_true(s.a != s.b);
        hive_ref_t a = { s.a }, b = { s.b }, c = { s.c };
        const void *p;
        assert_int_equal(hive_get(h, a, 0, &p, NULL), HIVE_ENOENT);
        assert_int_equal(hive_release(h, b), HIVE_ENOENT);
        /* the escaped child: found from this thread (promoted), its value */
        assert_int_equal(get_u64(h, c), 33);
        assert_int_equal(hive_cancel(h, c), HIVE_ESTATE);     /* finished */
        assert_int_equal(hive_release(h, c), HIVE_OK);
        escaped[round] = c;
    }
    hive_ref_t m;
    assert_int_equal(hive_submit(h, priv_many, NULL, 0, NULL, &m), HIVE_OK);
    const void *mp;
    get_ok(h, m, &mp, NULL);
    uint32_t mok;
    memcpy(&mok, mp, sizeof mok);
    assert_int_equal(mok, 2 * PRIV_MANY);
    hive_release(h, m);
    expect_empty_store(h);   /* the children drop their own counts just after their seals */
    for (int round = 0; round < 3; round++)
        assert_int_equal(hive_release(h, escaped[round]), HIVE_ENOENT);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* A small task returns what hive_arg points at: the source is the
 * worker's copy, never the bytes being written. */
static int echo_first(hive_ctx_t *ctx)
{
    size_t n;
    const void *p = hive_arg(ctx, 0, &n);
    return hive_return(ctx, p, n);
}

/* Queued behind a busy worker, a small task costs its result record (128
 * bytes), its slot (16) and the caller's ref (8): the resident memory
 * grows by no more than that, plus a huge page's rounding (a full record
 * beside it made it ~280). The sanitizers' shadow memory grows with it, so
 * they run the same tasks without the bound. Then every task runs and
 * returns its own argument. */
static void test_small_task_queued_memory(void **state)
{
    (void)state;
    enum { N = 200000 / TEST_SCALE };
    hive_t *h = engine((size_t)N * 160 + 64 * MiB, 1, NULL);
    hive_ref_t *refs = malloc(N * sizeof *refs);
    assert_non_null(refs);
    memset(refs, 0, N * sizeof *refs);           /* the refs' pages count before */
    gate_reset();
    hive_ref_t g;
    assert_int_equal(hive_submit(h, gate_task, NULL, 0, NULL, &g), HIVE_OK);
    WAIT_UNTIL(atomic_load(&gate_entered) == 1, DEADLINE_MS);
    size_t before = test_resident_bytes();
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(hive_submit(h, echo_first, &HIVE_VAL(i), 1, NULL, &refs[i]), HIVE_OK);
    double per = (double)(test_resident_bytes() - before) / N;
    print_message("%d queued small tasks: %.1f bytes each\n", (int)N, per);
    atomic_store(&gate_open, 1);
    for (uint32_t i = 0; i < N; i++) {
        const void *p;
        size_t n;
        get_ok(h, refs[i], &p, &n);
        uint32_t v;
        assert_int_equal(n, sizeof v);
        memcpy(&v, p, sizeof v);
        assert_int_equal(v, i);
        hive_release(h, refs[i]);
    }
    const void *p;
    get_ok(h, g, &p, NULL);
    hive_release(h, g);
    free(refs);
    expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
    if (per > 176)
        fail_msg("a queued small task costs %.1f bytes of resident memory (at most 176 wanted: "
                 "record 128, slot 16, huge-page rounding)", per);
#else
    (void)per;
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_private_results),
        cmocka_unit_test(test_own_paths_give_way),
        cmocka_unit_test(test_small_task_queued_memory),
        cmocka_unit_test(test_small_task_args),
        cmocka_unit_test(test_worker_wait_is_not_a_sleeper),
        cmocka_unit_test(test_retries_count_runs),
        cmocka_unit_test(test_cancelled_task_is_not_retried),
        cmocka_unit_test(test_inline_args_copied_at_submit),
        cmocka_unit_test(test_inline_args_alignment),
        cmocka_unit_test(test_ref_args_zero_copy),
        cmocka_unit_test(test_large_inline_arg),
        cmocka_unit_test(test_results),
        cmocka_unit_test(test_dep_waits_for_seal),
        cmocka_unit_test(test_dep_chain),
        cmocka_unit_test(test_dep_on_running_task),
        cmocka_unit_test(test_dep_failure_propagates),
        cmocka_unit_test(test_cancel_queued),
        cmocka_unit_test(test_cancel_running_and_bad_cancels),
        cmocka_unit_test(test_priorities),
        cmocka_unit_test(test_nested_waits_one_worker),
        cmocka_unit_test(test_shutdown_with_queued_work),
        cmocka_unit_test(test_shutdown_nested_wait_runs_nothing_queued),
        cmocka_unit_test(test_submit_bad_input),
        cmocka_unit_test(test_inline_results_near_full),
        cmocka_unit_test(test_numa_args_pull_tasks),
        cmocka_unit_test(test_numa_steal_same_node_first),
    };
    return cmocka_run_group_tests_name("task", tests, NULL, NULL);
}
