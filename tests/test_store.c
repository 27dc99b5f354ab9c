/* test_store.c - blobs: put/get zero-copy, create/seal, counts, waiting,
 * capacity, NUMA placement and every kind of bad input. */
#include "testutil.h"
#include "hive_impl.h"

#include <pthread.h>

#define MiB (1024u * 1024u)

#define engine test_engine

static size_t used_after_drain(hive_t *h)
{
    hive__store_drain(h);
    hive_store_stats_t st;
    assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
    return st.used;
}

static void test_put_get_zero_copy(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    char msg[] = "hello, hive";
    hive_ref_t r;
    assert_int_equal(hive_put(h, msg, sizeof msg, &r), HIVE_OK);
    assert_true(r.id != 0);
    const void *p1, *p2;
    size_t n;
    assert_int_equal(hive_get(h, r, 0, &p1, &n), HIVE_OK);
    assert_int_equal(n, sizeof msg);
    assert_memory_equal(p1, msg, sizeof msg);
    assert_ptr_not_equal(p1, msg);                   /* put copies in ... */
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p2, NULL), HIVE_OK);
    assert_ptr_equal(p1, p2);                        /* ... get never copies */
    assert_int_equal((uintptr_t)p1 % 64, 0);

    hive_ref_t z;                                    /* zero-size objects are valid */
    assert_int_equal(hive_put(h, NULL, 0, &z), HIVE_OK);
    assert_int_equal(hive_get(h, z, 0, &p1, &n), HIVE_OK);
    assert_int_equal(n, 0);
    assert_non_null(p1);
    assert_true(z.id != r.id);

    /* many sizes, each 64-byte aligned and intact */
    hive_ref_t refs[40];
    for (unsigned i = 0; i < 40; i++) {
        size_t sz = (size_t)1 << (i % 20);
        char *buf = malloc(sz);
        memset(buf, (int)i, sz);
        assert_int_equal(hive_put(h, buf, sz, &refs[i]), HIVE_OK);
        free(buf);
    }
    for (unsigned i = 0; i < 40; i++) {
        size_t sz = (size_t)1 << (i % 20);
        const unsigned char *p;
        assert_int_equal(hive_get(h, refs[i], 0, (const void **)&p, &n), HIVE_OK);
        assert_int_equal(n, sz);
        assert_int_equal((uintptr_t)p % 64, 0);
        assert_int_equal(p[0], i);
        assert_int_equal(p[sz - 1], i);
        assert_int_equal(hive_release(h, refs[i]), HIVE_OK);
    }
    assert_int_equal(hive_release(h, r), HIVE_OK);
    assert_int_equal(hive_release(h, z), HIVE_OK);
    assert_int_equal(used_after_drain(h), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

typedef struct sealer {
    hive_t    *h;
    hive_ref_t ref;
    char      *data;
    unsigned   delay_ms;
} sealer_t;

static void *seal_later(void *arg)
{
    sealer_t *s = arg;
    test_sleep_ms(s->delay_ms);
    strcpy(s->data, "sealed");
    return (void *)(intptr_t)hive_seal(s->h, s->ref);
}

static void test_create_seal_and_waiting_get(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    void *data;
    hive_ref_t r;
    assert_int_equal(hive_create(h, 64, &data, &r), HIVE_OK);
    assert_int_equal((uintptr_t)data % 64, 0);
    const void *p = (void *)0x1;
    ASSERT_FAILS_WITH(hive_get(h, r, 0, &p, NULL), HIVE_ETIMEDOUT, "still pending");
    ASSERT_FAILS_WITH(hive_get(h, r, 1000000, &p, NULL), HIVE_ETIMEDOUT, "after 1000000 ns");
    assert_ptr_equal(p, (void *)0x1);                /* untouched on failure */

    sealer_t s = { .h = h, .ref = r, .data = data, .delay_ms = 50 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, seal_later, &s), 0);
    size_t n;
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, &n), HIVE_OK);   /* sleeps, woken by seal */
    assert_ptr_equal(p, data);                       /* the bytes written in place */
    assert_string_equal(p, "sealed");
    void *rc;
    pthread_join(t, &rc);
    assert_int_equal((intptr_t)rc, HIVE_OK);

    ASSERT_FAILS_WITH(hive_seal(h, r), HIVE_ESTATE, "already sealed");
    hive_ref_t q;
    assert_int_equal(hive_put(h, "x", 1, &q), HIVE_OK);
    ASSERT_FAILS_WITH(hive_seal(h, q), HIVE_ESTATE, "already sealed");
    hive_release(h, q);
    hive_release(h, r);
    assert_int_equal(used_after_drain(h), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_counts(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    hive_ref_t r;
    assert_int_equal(hive_put(h, "abc", 4, &r), HIVE_OK);
    assert_int_equal(hive_retain(h, r), HIVE_OK);
    assert_int_equal(hive_release(h, r), HIVE_OK);
    const void *p;
    assert_int_equal(hive_get(h, r, 0, &p, NULL), HIVE_OK);   /* one count left */
    assert_int_equal(hive_release(h, r), HIVE_OK);
    ASSERT_FAILS_WITH(hive_get(h, r, 0, &p, NULL), HIVE_ENOENT, "does not exist");
    ASSERT_FAILS_WITH(hive_release(h, r), HIVE_ENOENT, "already released");   /* double release */
    ASSERT_FAILS_WITH(hive_retain(h, r), HIVE_ENOENT, "does not exist");
    assert_int_equal(used_after_drain(h), 0);
    hive_store_stats_t st;
    hive_store_stats(h, &st);
    assert_int_equal(st.objects, 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_bad_input_leaves_others_intact(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    hive_ref_t keep, r = { 12345 };
    assert_int_equal(hive_put(h, "keep me", 8, &keep), HIVE_OK);
    const void *p;
    void *d;
    unsigned char ready[2];
    ASSERT_FAILS_WITH(hive_put(NULL, "x", 1, &r), HIVE_EINVAL, "engine is NULL");
    ASSERT_FAILS_WITH(hive_put(h, NULL, 5, &r), HIVE_EINVAL, "data is NULL");
    ASSERT_FAILS_WITH(hive_put(h, "x", 1, NULL), HIVE_EINVAL, "out is NULL");
    ASSERT_FAILS_WITH(hive_create(h, 8, NULL, &r), HIVE_EINVAL, "data is NULL");
    ASSERT_FAILS_WITH(hive_create(h, SIZE_MAX, &d, &r), HIVE_EFULL, "asked 18446744073709551615");
    ASSERT_FAILS_WITH(hive_get(h, (hive_ref_t){ 0 }, 0, &p, NULL), HIVE_ENOENT, "{0}");
    ASSERT_FAILS_WITH(hive_get(h, (hive_ref_t){ 987654321 }, 0, &p, NULL), HIVE_ENOENT, "987654321");
    ASSERT_FAILS_WITH(hive_get(h, keep, 0, NULL, NULL), HIVE_EINVAL, "data is NULL");
    ASSERT_FAILS_WITH(hive_seal(h, (hive_ref_t){ 987654321 }), HIVE_ENOENT, "987654321");
    ASSERT_FAILS_WITH(hive_release(h, (hive_ref_t){ 0 }), HIVE_ENOENT, "object 0");
    ASSERT_FAILS_WITH(hive_wait(h, NULL, 2, 1, 0, ready), HIVE_EINVAL, "refs is NULL for 2");
    ASSERT_FAILS_WITH(hive_wait(h, &keep, 1, 2, 0, ready), HIVE_EINVAL, "num_ready 2 exceeds the 1");
    hive_ref_t bad[2] = { keep, { 555555555 } };
    ASSERT_FAILS_WITH(hive_wait(h, bad, 2, 1, 0, ready), HIVE_ENOENT, "555555555");
    ASSERT_FAILS_WITH(hive_store_stats(h, NULL), HIVE_EINVAL, "out is NULL");
    assert_int_equal(r.id, 12345);                   /* outputs untouched */
    size_t n;
    assert_int_equal(hive_get(h, keep, 0, &p, &n), HIVE_OK);
    assert_int_equal(n, 8);
    assert_string_equal(p, "keep me");
    hive_release(h, keep);
    assert_int_equal(used_after_drain(h), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_capacity_is_exact(void **state)
{
    (void)state;
    hive_t *h = engine(1 * MiB, 1, NULL);
    void *d;
    hive_ref_t a, b;
    /* a large payload takes its size rounded to 64 plus a 64-byte header */
    assert_int_equal(hive_create(h, 600 * 1024, &d, &a), HIVE_OK);
    ASSERT_FAILS_WITH(hive_create(h, 600 * 1024, &d, &b), HIVE_EFULL,
                      "asked 614400 bytes (taking 614464), 614464 of 1048576 in use");
    assert_int_equal(hive_create(h, 1 * MiB - 614464 - 64, &d, &b), HIVE_OK);   /* exactly full */
    ASSERT_FAILS_WITH(hive_put(h, "x", 1, &b), HIVE_EFULL, "1048576 of 1048576 in use");
    hive_release(h, a);
    hive__store_drain(h);
    assert_int_equal(hive_create(h, 600 * 1024, &d, &a), HIVE_OK);
    hive_release(h, a);
    hive_release(h, b);
    assert_int_equal(used_after_drain(h), 0);
    /* the statistics saw it: full once, two refusals */
    hive_store_stats_t st;
    assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
    assert_int_equal(st.used_high, 1 * MiB);
    assert_int_equal(st.efull, 2);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* After a churn of mixed sizes, half the capacity in one piece still fits
 * once half is free: fragmentation never eats free capacity. */
static void test_half_capacity_after_churn(void **state)
{
    (void)state;
    const size_t cap = 64 * MiB;
    hive_t *h = engine(cap, 1, NULL);
    enum { SLOTS = 256 };
    hive_ref_t live[SLOTS] = { { 0 } };
    size_t sizes[SLOTS] = { 0 };
    uint64_t rng = 42;
    for (int step = 0; step < 20000 / TEST_SCALE; step++) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        unsigned i = (unsigned)(rng % SLOTS);
        if (live[i].id) {
            assert_int_equal(hive_release(h, live[i]), HIVE_OK);
            live[i].id = 0;
            continue;
        }
        /* mostly small, some up to 2 MiB */
        size_t sz = (rng >> 20) % 4 == 0 ? (size_t)((rng >> 24) % (2 * MiB)) : (size_t)((rng >> 24) % 5000);
        void *d;
        int rc = hive_create(h, sz, &d, &live[i]);
        if (rc == HIVE_EFULL) {
            live[i].id = 0;
            continue;
        }
        assert_int_equal(rc, HIVE_OK);
        memset(d, 0x5a, sz);
        sizes[i] = sz;
    }
    /* free until at most half the capacity is in use */
    hive_store_stats_t st;
    for (unsigned i = 0; i < SLOTS; i++) {
        hive__store_drain(h);
        hive_store_stats(h, &st);
        if (st.used <= cap / 2)
            break;
        if (live[i].id) {
            hive_release(h, live[i]);
            live[i].id = 0;
        }
    }
    hive__store_drain(h);
    hive_store_stats(h, &st);
    assert_true(st.used <= cap / 2);
    void *d;
    hive_ref_t big;
    if (hive_create(h, cap / 2, &d, &big) != HIVE_OK)
        fail_msg("half the capacity did not fit with %zu of %zu in use: %s", st.used, cap,
                 hive_last_error());
    memset(d, 1, cap / 2);
    hive_release(h, big);
    for (unsigned i = 0; i < SLOTS; i++)
        if (live[i].id)
            hive_release(h, live[i]);
    (void)sizes;
    assert_int_equal(used_after_drain(h), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Filling the whole store with objects of one small size after another, and
 * releasing them each time, must leave room for a large object: cells kept
 * for reuse by one size class never starve the others. */
static void test_small_classes_never_starve_large(void **state)
{
    (void)state;
    const size_t cap = 8 * MiB;
    hive_t *h = engine(cap, 1, NULL);
    static hive_ref_t refs[140000];
    for (size_t sz = 64; sz <= 32768; sz *= 2) {
        size_t n = 0;
        void *d;
        int rc;
        while (n < 140000 && (rc = hive_create(h, sz, &d, &refs[n])) == HIVE_OK)
            n++;
        assert_int_equal(rc, HIVE_EFULL);
        assert_int_equal(n, cap / sz);                /* exactly the capacity */
        for (size_t i = 0; i < n; i++)
            hive_release(h, refs[i]);
        hive__store_drain(h);
        hive_ref_t big;
        if (hive_create(h, cap / 2, &d, &big) != HIVE_OK)
            fail_msg("after filling with %zu-byte objects, half the store did not fit: %s", sz,
                     hive_last_error());
        hive_release(h, big);
    }
    assert_int_equal(used_after_drain(h), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Filling a store with objects of one size, without releasing any, ends
 * with HIVE_EFULL (never ENOMEM) past 95% of the capacity, and used is the
 * sum of what the objects take. */
static void fill_store(size_t cap, size_t size)
{
    hive_t *h = engine(cap, 1, NULL);
    size_t max = cap / (size ? size : 1) + 1, n = 0;
    hive_ref_t *refs = malloc(max * sizeof *refs);
    assert_non_null(refs);
    void *d;
    int rc = HIVE_OK;
    while (n < max && (rc = hive_create(h, size, &d, &refs[n])) == HIVE_OK) {
        if (size)
            ((char *)d)[size - 1] = 1;
        n++;
    }
    hive_store_stats_t st;
    assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
    if (rc != HIVE_EFULL || st.used != n * hive__arena_charge(size) || st.used * 20 < cap * 19)
        fail_msg("store of %zu, objects of %zu: %s after %zu objects, %zu bytes in use: %s", cap, size,
                 hive_strerror(rc), n, st.used, hive_last_error());
    for (size_t i = 0; i < n; i++)
        hive_release(h, refs[i]);
    free(refs);
    test_expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_fill_ends_full_at_every_size(void **state)
{
    (void)state;
    for (unsigned k = 10; k <= 20; k++) {
        size_t p = (size_t)1 << k, sizes[] = { p - 1, p, p + 1, p + 64 };
        for (unsigned i = 0; i < 4; i++)
            fill_store(k <= 18 ? 8 * MiB : 32 * MiB, sizes[i]);
    }
    fill_store(128 * MiB, 4160);         /* issue 9: once ENOMEM at 76% */
}

static void test_wait(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    hive_ref_t refs[3];
    void *data[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(hive_create(h, 16, &data[i], &refs[i]), HIVE_OK);
    unsigned char ready[3] = { 9, 9, 9 };
    ASSERT_FAILS_WITH(hive_wait(h, refs, 3, 1, 0, ready), HIVE_ETIMEDOUT, "0 of 3 ready, 1 wanted");
    assert_int_equal(ready[0], 9);                   /* untouched on failure */
    assert_int_equal(hive_wait(h, refs, 3, 0, 0, ready), 0);
    assert_int_equal(hive_seal(h, refs[1]), HIVE_OK);
    assert_int_equal(hive_wait(h, refs, 3, 1, 0, ready), 1);
    assert_int_equal(ready[0], 0);
    assert_int_equal(ready[1], 1);
    assert_int_equal(ready[2], 0);
    /* a sleeping wait woken by seals from another thread */
    sealer_t s = { .h = h, .ref = refs[2], .data = data[2], .delay_ms = 30 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, seal_later, &s), 0);
    assert_int_equal(hive_wait(h, refs, 3, 2, HIVE_FOREVER, ready), 2);
    assert_int_equal(ready[2], 1);
    pthread_join(t, NULL);
    ASSERT_FAILS_WITH(hive_wait(h, refs, 3, 3, 20 * 1000000, ready), HIVE_ETIMEDOUT, "2 of 3 ready");
    for (int i = 0; i < 3; i++)
        hive_release(h, refs[i]);
    assert_int_equal(used_after_drain(h), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* A count of refs so large that n * sizeof(pointer) wraps (to 8 here) is
 * refused before anything is allocated or read; it used to get an 8-byte
 * table and write past it. */
static void test_wait_huge_count(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    hive_ref_t refs[2];
    assert_int_equal(hive_put(h, "x", 2, &refs[0]), HIVE_OK);
    refs[1] = (hive_ref_t){ 0 };
    size_t n = SIZE_MAX / sizeof(void *) + 2;
    char want[64];
    snprintf(want, sizeof want, "hive_wait: %zu refs", n);
    ASSERT_FAILS_WITH(hive_wait(h, refs, n, 1, 0, NULL), HIVE_EINVAL, want);
    assert_non_null(strstr(hive_last_error(), "overflows a size"));
    assert_int_equal(hive_wait(h, refs, 1, 1, 0, NULL), 1);   /* unharmed */
    hive_release(h, refs[0]);
    assert_int_equal(used_after_drain(h), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

typedef struct put_job {
    hive__job_t job;
    hive_t     *h;
    hive_ref_t  ref;
    _Atomic int done;
} put_job_t;

static void put_on_worker(hive__job_t *job, hive__worker_t *w)
{
    put_job_t *pj = (put_job_t *)job;
    if (w != NULL)
        {
        static const char payload[HIVE__INLINE_MAX + 1] = "on a worker";   /* past inline: the arena */
        hive_put(pj->h, payload, sizeof payload, &pj->ref);
    }
    atomic_store(&pj->done, 1);
}

/* Objects are made on the node of the thread that makes them. */
static void test_numa_placement(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 8, "pack:2 numa:1 core:4 pu:1");
    assert_int_equal(h->arena.nnodes, 2);
    static put_job_t jobs[8];
    for (unsigned i = 0; i < 8; i++) {
        jobs[i] = (put_job_t){ .job.fn = put_on_worker, .h = h };
        hive__sched_post(&h->sched, i, &jobs[i].job);
    }
    for (unsigned i = 0; i < 8; i++) {
        WAIT_UNTIL(atomic_load(&jobs[i].done), 5000);
        const void *p;
        assert_int_equal(hive_get(h, jobs[i].ref, 0, &p, NULL), HIVE_OK);
        hive_worker_info_t wi;
        hive_worker_info(h, i, &wi);
        assert_int_equal(hive__arena_node_of(&h->arena, p), wi.node);
        hive_release(h, jobs[i].ref);
    }
    assert_int_equal(used_after_drain(h), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_engines_do_not_share_refs(void **state)
{
    (void)state;
    hive_t *a = engine(8 * MiB, 1, NULL), *b = engine(8 * MiB, 1, NULL);
    hive_ref_t r;
    assert_int_equal(hive_put(a, "a", 2, &r), HIVE_OK);
    const void *p;
    ASSERT_FAILS_WITH(hive_get(b, r, 0, &p, NULL), HIVE_ENOENT, "does not exist");
    assert_int_equal(hive_shutdown(b), HIVE_OK);
    assert_int_equal(hive_get(a, r, 0, &p, NULL), HIVE_OK);
    /* shutdown frees objects still held */
    assert_int_equal(hive_shutdown(a), HIVE_OK);
}

/* ---------------------------------------------------------------- get_many */

static void test_get_many_all_ready(void **state)
{
    (void)state;
    hive_t *h = engine(16 * MiB, 1, NULL);
    enum { N = 100 };                                /* more than any fixed table */
    hive_ref_t refs[N];
    for (int i = 0; i < N; i++)
        assert_int_equal(hive_put(h, &i, sizeof i, &refs[i]), HIVE_OK);
    const void *datas[N];
    size_t sizes[N];
    int status[N];
    assert_int_equal(hive_get_many(h, refs, N, 0, datas, sizes, status), HIVE_OK);
    for (int i = 0; i < N; i++) {
        assert_int_equal(status[i], HIVE_OK);
        assert_int_equal(sizes[i], sizeof(int));
        assert_int_equal(*(const int *)datas[i], i);
        const void *p;
        assert_int_equal(hive_get(h, refs[i], 0, &p, NULL), HIVE_OK);
        assert_ptr_equal(p, datas[i]);               /* zero-copy, as hive_get */
    }
    /* sizes and status may be NULL; n = 0 is a no-op */
    assert_int_equal(hive_get_many(h, refs, N, 0, datas, NULL, NULL), HIVE_OK);
    assert_int_equal(*(const int *)datas[N - 1], N - 1);
    assert_int_equal(hive_get_many(h, NULL, 0, 0, NULL, NULL, NULL), HIVE_OK);
    for (int i = 0; i < N; i++)
        hive_release(h, refs[i]);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

struct seal_later { hive_t *h; hive_ref_t ref; };

static void *seal_after_a_while(void *arg)
{
    struct seal_later *s = arg;
    test_sleep_ms(20);
    assert_int_equal(hive_seal(s->h, s->ref), HIVE_OK);
    return NULL;
}

static void test_get_many_waits_and_reports_each(void **state)
{
    (void)state;
    hive_t *h = engine(16 * MiB, 1, NULL);
    hive_ref_t refs[4], cell;
    void *w;
    assert_int_equal(hive_put(h, "ok", 3, &refs[0]), HIVE_OK);
    assert_int_equal(hive_create(h, 8, &w, &refs[1]), HIVE_OK);    /* sealed by a thread */
    memcpy(w, "late", 5);
    assert_int_equal(hive_create(h, 8, &w, &refs[2]), HIVE_OK);    /* never sealed */
    assert_int_equal(hive_cell_new(h, (hive_ref_t){ 0 }, &cell), HIVE_OK);
    refs[3] = cell;
    const void *datas[4];
    size_t sizes[4];
    int status[4];

    /* a short timeout: everything reported, the first failure returned */
    ASSERT_FAILS_WITH(hive_get_many(h, refs, 4, 1000000, datas, sizes, status), HIVE_ETIMEDOUT,
                      "3 of 4 refs are not available; the first, refs[1]");
    assert_int_equal(status[0], HIVE_OK);
    assert_string_equal(datas[0], "ok");
    assert_int_equal(status[1], HIVE_ETIMEDOUT);
    assert_null(datas[1]);
    assert_int_equal(sizes[1], 0);
    assert_int_equal(status[2], HIVE_ETIMEDOUT);
    assert_int_equal(status[3], HIVE_ESTATE);

    /* waits for a seal that comes later */
    struct seal_later sl = { h, refs[1] };
    pthread_t t;
    pthread_create(&t, NULL, seal_after_a_while, &sl);
    assert_int_equal(hive_get_many(h, refs, 2, HIVE_FOREVER, datas, sizes, status), HIVE_OK);
    pthread_join(t, NULL);
    assert_string_equal(datas[1], "late");
    assert_int_equal(sizes[1], 8);

    /* unknown refs are reported per ref too */
    hive_ref_t gone[2] = { refs[0], { 0 } };
    ASSERT_FAILS_WITH(hive_get_many(h, gone, 2, 0, datas, NULL, status), HIVE_ENOENT,
                      "refs[1] (object 0)");
    assert_int_equal(status[0], HIVE_OK);
    assert_int_equal(status[1], HIVE_ENOENT);
    for (int i = 0; i < 4; i++)
        hive_release(h, refs[i]);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_get_many_bad_input(void **state)
{
    (void)state;
    hive_t *h = engine(16 * MiB, 1, NULL);
    hive_ref_t r;
    assert_int_equal(hive_put(h, "x", 2, &r), HIVE_OK);
    const void *d[1] = { (const void *)0x1 };
    ASSERT_FAILS_WITH(hive_get_many(NULL, &r, 1, 0, d, NULL, NULL), HIVE_EINVAL, "engine is NULL");
    ASSERT_FAILS_WITH(hive_get_many(h, NULL, 1, 0, d, NULL, NULL), HIVE_EINVAL,
                      "refs is NULL for 1 refs");
    ASSERT_FAILS_WITH(hive_get_many(h, &r, 1, 0, NULL, NULL, NULL), HIVE_EINVAL,
                      "datas is NULL for 1 refs");
    ASSERT_FAILS_WITH(hive_get_many(h, &r, SIZE_MAX / 4, 0, d, NULL, NULL), HIVE_EINVAL,
                      "overflows a size");
    assert_ptr_equal(d[0], (const void *)0x1);        /* nothing written */
    hive_release(h, r);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static int square_task(hive_ctx_t *ctx)
{
    int64_t x = *(const int64_t *)hive_arg(ctx, 0, NULL);
    int64_t y = x * x;
    return hive_return(ctx, &y, sizeof y);
}

/* A task that gets its children's results at once: the wait inside a task
 * runs the children on the same worker (one worker: it must help). */
static int fan_out_task(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    hive_ref_t kids[8];
    for (int64_t i = 0; i < 8; i++)
        if (hive_submit(h, square_task, &HIVE_VAL(i), 1, NULL, &kids[i]) != HIVE_OK)
            return 1;
    const void *d[8];
    int st[8];
    int rc = hive_get_many(h, kids, 8, HIVE_FOREVER, d, NULL, st);
    int64_t sum = 0;
    for (int i = 0; i < 8 && rc == HIVE_OK; i++)
        sum += *(const int64_t *)d[i];
    for (int i = 0; i < 8; i++)
        hive_release(h, kids[i]);
    return rc == HIVE_OK ? hive_return(ctx, &sum, sizeof sum) : 1;
}

static void test_get_many_inside_a_task(void **state)
{
    (void)state;
    hive_t *h = engine(16 * MiB, 1, NULL);
    hive_ref_t r;
    assert_int_equal(hive_submit(h, fan_out_task, NULL, 0, NULL, &r), HIVE_OK);
    const void *p;
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, NULL), HIVE_OK);
    assert_int_equal(*(const int64_t *)p, 0 + 1 + 4 + 9 + 16 + 25 + 36 + 49);
    hive_release(h, r);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

struct many_blocked { hive_t *h; hive_ref_t refs[2]; int rc, status[2]; };

static void *get_many_forever(void *arg)
{
    struct many_blocked *m = arg;
    const void *d[2];
    m->rc = hive_get_many(m->h, m->refs, 2, HIVE_FOREVER, d, NULL, m->status);
    return NULL;
}

/* A user thread blocked in hive_get_many returns at shutdown, and shutdown
 * waits for it before freeing the records it reads. */
/* ---------------------------------------- a promotion waits out its owner
 *
 * A private record's owner changes its state word and key plainly inside a
 * section marked by its pbusy (store.c, own_enter); a promoter (any other
 * thread that comes by the id) must wait for that section to close before
 * its key CAS. A worker's task spawns a child and holds it unjoined; the
 * test marks the worker as inside a plain section, and another thread's
 * retain of the child's id must not return until the mark is taken off -
 * then it holds the promoted record, which the owner joins and releases
 * with CASes as any public record, and the last release frees it. */
static _Atomic uint64_t pw_id;
static _Atomic int pw_go, pw_retained;
static hive_t *pw_engine;

static int pw_child(hive_ctx_t *ctx)
{
    uint64_t v = 7;
    return hive_return(ctx, &v, sizeof v);
}

static int pw_parent(hive_ctx_t *ctx)
{
    hive_t *e = hive_engine(ctx);
    hive_ref_t r;
    if (hive_submit(e, pw_child, NULL, 0, NULL, &r) != HIVE_OK)
        return 1;
    atomic_store(&pw_id, r.id);
    while (!atomic_load(&pw_go))
        sched_yield();
    const void *p;
    int rc = hive_get(e, r, HIVE_FOREVER, &p, NULL);
    int ok = rc == HIVE_OK && *(const uint64_t *)p == 7;
    return hive_release(e, r) == HIVE_OK && ok ? 0 : 1;
}

static void *pw_prober(void *arg)
{
    (void)arg;
    int rc = hive_retain(pw_engine, (hive_ref_t){ atomic_load(&pw_id) });
    atomic_store(&pw_retained, rc == HIVE_OK ? 1 : -1);
    return NULL;
}

static void test_promotion_waits_for_owner(void **state)
{
    (void)state;
    hive_t *e = pw_engine = test_engine(64 << 20, 1, NULL);
    if (!e->sched.asym) {
        assert_int_equal(hive_shutdown(e), HIVE_OK);
        skip();                       /* no plain sections without the membarrier */
    }
    hive_ref_t parent;
    assert_int_equal(hive_submit(e, pw_parent, NULL, 0, NULL, &parent), HIVE_OK);
    while (atomic_load(&pw_id) == 0)
        sched_yield();
    /* the worker spins in pw_parent: in no section of its own */
    atomic_store(&e->sched.w[0].pbusy, 1);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pw_prober, NULL), 0);
    test_sleep_ms(50);
    assert_int_equal(atomic_load(&pw_retained), 0);      /* waiting for the section */
    assert_int_equal(atomic_load(&e->store.revoking), 1);  /* owners take the CAS meanwhile */
    atomic_store(&e->sched.w[0].pbusy, 0);
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&pw_retained), 1);
    assert_int_equal(atomic_load(&e->store.revoking), 0);
    atomic_store(&pw_go, 1);
    const void *p;
    assert_int_equal(hive_get(e, parent, HIVE_FOREVER, &p, NULL), HIVE_OK);
    assert_int_equal(hive_release(e, parent), HIVE_OK);
    hive_ref_t child = { atomic_load(&pw_id) };
    assert_int_equal(hive_get(e, child, 0, &p, NULL), HIVE_OK);   /* ours: the retained count */
    assert_int_equal(*(const uint64_t *)p, 7);
    assert_int_equal(hive_release(e, child), HIVE_OK);
    assert_int_equal(hive_shutdown(e), HIVE_OK);
}

/* ------------------------------------------- the owner's two hammer tests */

/* Spin while *phase is from (at most bound rounds, 0: no bound), yielding
 * after the first thousand. */
static void spin_while(_Atomic int *phase, int from, int bound)
{
    for (int spin = 0; (bound == 0 || spin < bound) && atomic_load(phase) == from; spin++)
        if (spin >= 1000)
            sched_yield();
}

/* On a one-worker engine: run parent as a task from this thread while
 * hammer runs beside it, until parent returns (then *done ends hammer). */
static void run_hammered(hive_fn parent, void *(*hammer)(void *), _Atomic int *done)
{
    hive_t *e = test_engine(64 << 20, 1, NULL);
    if (!e->sched.asym) {             /* no plain sections: nothing to race */
        assert_int_equal(hive_shutdown(e), HIVE_OK);
        skip();
    }
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hammer, e), 0);
    hive_ref_t r;
    const void *p;
    assert_int_equal(hive_submit(e, parent, NULL, 0, NULL, &r), HIVE_OK);
    assert_int_equal(hive_get(e, r, HIVE_FOREVER, &p, NULL), HIVE_OK);
    assert_int_equal(hive_release(e, r), HIVE_OK);
    atomic_store(done, 1);
    pthread_join(t, NULL);
    assert_int_equal(hive_shutdown(e), HIVE_OK);
}

/* ------------------------------------ owners take the CAS while revoking
 *
 * The other half of that handshake: while a promotion is under way
 * (revoking nonzero), an owner changes its private records with CASes -
 * the promoter may already be changing them too. The test holds revoking
 * up as a promoter past its wait would, and a hammer thread adds to the
 * unused high bits of each pending child's state word with CASes while
 * the child's owner claims it (the join runs it); the child, running,
 * stops the hammer and checks that the word holds every addition. An
 * owner that stored its claim plainly over the hammer's CAS would lose
 * some (a pending record's bits above the run are read by nobody). */
#define RV_KIDS  (8000 / TEST_SCALE)
#define RV_SHIFT 16

static _Atomic(hive__obj_t *) rv_rec;      /* the child being hammered */
static _Atomic int rv_stop;                /* the child runs: stop */
static _Atomic long rv_count, rv_total;    /* additions to this child, to all */
static _Atomic int rv_phase;               /* 1: hammering, 2: stopped and counted */
static _Atomic long rv_errors;

static int rv_child(hive_ctx_t *ctx)
{
    hive__obj_t *o = atomic_load(&rv_rec);
    atomic_store(&rv_stop, 1);
    for (int spin = 0; atomic_load(&rv_phase) != 2; spin++)   /* the hammer stopped and counted */
        if (spin >= 1000)
            sched_yield();
    /* the hammer's last CAS is before its phase store, which we saw */
    uint32_t v = atomic_load(&o->state);
    if ((long)(v >> RV_SHIFT) != atomic_load(&rv_count) ||
        hive__run_of(v) != HIVE__RUN_RUNNING)
        atomic_fetch_add(&rv_errors, 1);
    uint64_t r = 1;
    return hive_return(ctx, &r, sizeof r);
}

static int rv_parent(hive_ctx_t *ctx)
{
    hive_t *e = hive_engine(ctx);
    for (int i = 0; i < RV_KIDS; i++) {
        hive_ref_t c;
        if (hive_submit(e, rv_child, NULL, 0, NULL, &c) != HIVE_OK)
            return 1;
        atomic_store(&rv_stop, 0);
        atomic_store(&rv_phase, 0);
        atomic_store(&rv_rec, (hive__obj_t *)hive__handles_rec(&e->store.table, c.id));
        spin_while(&rv_phase, 0, 4000);
        const void *p;
        if (hive_get(e, c, HIVE_FOREVER, &p, NULL) != HIVE_OK)
            atomic_fetch_add(&rv_errors, 1);
        atomic_store(&rv_rec, NULL);
        if (hive_release(e, c) != HIVE_OK)
            atomic_fetch_add(&rv_errors, 1);
    }
    return 0;
}

static _Atomic int rv_done;

static void *rv_hammer(void *arg)
{
    hive_t *e = arg;
    atomic_fetch_add(&e->store.revoking, 1);   /* a promoter past its wait, for the whole test */
    while (!atomic_load(&rv_done)) {
        hive__obj_t *o = atomic_load(&rv_rec);
        if (o == NULL || atomic_load(&rv_phase) != 0) {
            sched_yield();
            continue;
        }
        long n = 0;
        atomic_store(&rv_phase, 1);
        while (!atomic_load(&rv_stop) && n < 60000) {
            uint32_t v = atomic_load(&o->state);
            if (atomic_compare_exchange_weak(&o->state, &v, v + (1u << RV_SHIFT)))
                n++;
        }
        atomic_store(&rv_count, n);
        atomic_fetch_add(&rv_total, n);
        atomic_store(&rv_phase, 2);
    }
    atomic_fetch_sub(&e->store.revoking, 1);
    return NULL;
}

static void test_owner_takes_cas_while_revoking(void **state)
{
    (void)state;
    run_hammered(rv_parent, rv_hammer, &rv_done);
    print_message("%ld additions to %d children's state words\n", atomic_load(&rv_total), RV_KIDS);
    assert_int_equal(atomic_load(&rv_errors), 0);
    assert_true(atomic_load(&rv_total) > 0);
}

/* ------------------------------------ a lent record's pin drop is a CAS
 *
 * The owner drops the pin of a child it ran itself with a plain store
 * unless it looked the child up by id (lent): a dependent may then hold
 * a pin by pointer and drop it with a CAS on another thread. The parent
 * looks each child up (a retain and a release by id), and a hammer thread
 * plays such a dependent, taking and dropping pins on the child with CASes
 * from its submit until after the owner's join (which runs it and drops
 * its pin); then the count must be the parent's one count exactly. */
#define LN_KIDS (8000 / TEST_SCALE)

static _Atomic(hive__obj_t *) ln_rec;
static _Atomic int ln_stop, ln_phase, ln_done;
static _Atomic long ln_errors, ln_total;

static int ln_child(hive_ctx_t *ctx)
{
    uint64_t r = 1;
    return hive_return(ctx, &r, sizeof r);
}

static int ln_parent(hive_ctx_t *ctx)
{
    hive_t *e = hive_engine(ctx);
    for (int i = 0; i < LN_KIDS; i++) {
        hive_ref_t c;
        if (hive_submit(e, ln_child, NULL, 0, NULL, &c) != HIVE_OK)
            return 1;
        if (hive_retain(e, c) != HIVE_OK || hive_release(e, c) != HIVE_OK)   /* lent */
            atomic_fetch_add(&ln_errors, 1);
        hive__obj_t *o = hive__handles_rec(&e->store.table, c.id);
        atomic_store(&ln_stop, 0);
        atomic_store(&ln_phase, 0);
        atomic_store(&ln_rec, o);
        spin_while(&ln_phase, 0, 4000);
        const void *p;
        if (hive_get(e, c, HIVE_FOREVER, &p, NULL) != HIVE_OK)
            atomic_fetch_add(&ln_errors, 1);
        atomic_store(&ln_stop, 1);
        spin_while(&ln_phase, 1, 0);
        atomic_store(&ln_rec, NULL);
        if (atomic_load(&o->refs) != 1)       /* ours; the task's pin and the hammer's gone */
            atomic_fetch_add(&ln_errors, 1);
        if (hive_release(e, c) != HIVE_OK)
            atomic_fetch_add(&ln_errors, 1);
    }
    return 0;
}

static void *ln_hammer(void *arg)
{
    (void)arg;
    while (!atomic_load(&ln_done)) {
        hive__obj_t *o = atomic_load(&ln_rec);
        if (o == NULL || atomic_load(&ln_phase) != 0) {
            sched_yield();
            continue;
        }
        atomic_store(&ln_phase, 1);
        long n = 0;
        while (!atomic_load(&ln_stop)) {
            atomic_fetch_add(&o->refs, HIVE__PIN);   /* a dependent's pin, taken and dropped */
            atomic_fetch_sub(&o->refs, HIVE__PIN);
            n++;
        }
        atomic_fetch_add(&ln_total, n);
        atomic_store(&ln_phase, 2);
    }
    return NULL;
}

static void test_lent_pin_drop_is_a_cas(void **state)
{
    (void)state;
    run_hammered(ln_parent, ln_hammer, &ln_done);
    print_message("%ld pins taken and dropped on %d children\n", atomic_load(&ln_total), LN_KIDS);
    assert_int_equal(atomic_load(&ln_errors), 0);
    assert_true(atomic_load(&ln_total) > 0);
}

static void test_get_many_returns_at_shutdown(void **state)
{
    (void)state;
    hive_t *h = engine(16 * MiB, 1, NULL);
    struct many_blocked m = { .h = h };
    void *w;
    assert_int_equal(hive_put(h, "x", 2, &m.refs[0]), HIVE_OK);
    assert_int_equal(hive_create(h, 8, &w, &m.refs[1]), HIVE_OK);     /* never sealed */
    pthread_t t;
    pthread_create(&t, NULL, get_many_forever, &m);
    WAIT_UNTIL(atomic_load(&h->store.sleepers) == 1, 10000);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    pthread_join(t, NULL);
    assert_int_equal(m.rc, HIVE_ESHUTDOWN);
    assert_int_equal(m.status[0], HIVE_OK);
    assert_int_equal(m.status[1], HIVE_ESHUTDOWN);
}

/* Records a worker releases wait on its own list and go to RCU in
 * batches; whatever is left when it runs out of work goes before it
 * parks, so an idle engine holds nothing, without any drain. */
static int put_release_some(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    int n = *(const int *)hive_arg(ctx, 0, NULL);
    for (int i = 0; i < n; i++) {
        hive_ref_t r;
        if (hive_put(h, &i, sizeof i, &r) != HIVE_OK || hive_release(h, r) != HIVE_OK)
            return 1;
    }
    return 0;
}

/* A thread's reserve of inline charges (store.h) is capacity no object
 * has yet: a store filled by another thread still takes exactly its
 * capacity, the reserve taken back before the refusal. */
static hive_t *res_h;
static pthread_barrier_t res_bar;

static void *hold_a_reserve(void *arg)
{
    hive_ref_t *r = arg;
    assert_int_equal(hive_put(res_h, "r", 1, r), HIVE_OK);   /* takes a batch of charges */
    pthread_barrier_wait(&res_bar);                          /* ... and stays alive */
    pthread_barrier_wait(&res_bar);
    return NULL;
}

static void test_full_store_takes_reserves_back(void **state)
{
    (void)state;
    const size_t cap = 1 * MiB;
    res_h = engine(cap, 1, NULL);
    pthread_barrier_init(&res_bar, NULL, 2);
    hive_ref_t theirs;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_a_reserve, &theirs), 0);
    pthread_barrier_wait(&res_bar);
    hive_store_stats_t st;
    assert_int_equal(hive_store_stats(res_h, &st), HIVE_OK);
    assert_int_equal(st.used, 64);                           /* the reserve is not counted */
    size_t max = cap / 64, n = 0;
    hive_ref_t *refs = malloc(max * sizeof *refs);
    int rc;
    while (n < max && (rc = hive_put(res_h, &n, sizeof n, &refs[n])) == HIVE_OK)
        n++;
    assert_int_equal(rc, HIVE_EFULL);
    assert_int_equal(n + 1, cap / 64);                       /* theirs and ours: the capacity */
    assert_int_equal(hive_store_stats(res_h, &st), HIVE_OK);
    assert_int_equal(st.used, cap);
    pthread_barrier_wait(&res_bar);
    pthread_join(t, NULL);
    for (size_t i = 0; i < n; i++)
        hive_release(res_h, refs[i]);
    hive_release(res_h, theirs);
    free(refs);
    assert_int_equal(used_after_drain(res_h), 0);
    pthread_barrier_destroy(&res_bar);
    assert_int_equal(hive_shutdown(res_h), HIVE_OK);
}

/* A thread's released records come back to its own cache (store.h), and
 * when it exits its cache goes to the shared free stack, in every engine
 * it used: nothing stays with a thread that is gone, and the next puts
 * reuse those slots instead of growing the table. */
static hive_t *exit_h[2];
static unsigned exit_shard;

static void *churn_and_exit(void *arg)
{
    (void)arg;
    exit_shard = hive__store_thread_shard();
    for (int e = 0; e < 2; e++) {
        for (int i = 0; i < 3 * HIVE__RETIRE_BATCH; i++) {
            hive_ref_t r;
            assert_int_equal(hive_put(exit_h[e], &i, sizeof i, &r), HIVE_OK);
            assert_int_equal(hive_release(exit_h[e], r), HIVE_OK);
        }
        hive__store_drain(exit_h[e]);       /* the frees ran: the slots are in our cache */
        hive__handles_cache_t *c = &exit_h[e]->store.shards[exit_shard].cache;
        assert_true(atomic_load(&c->local) != 0 || atomic_load(&c->inbox) != 0);
    }
    return NULL;
}

static void test_exit_gives_cache_back(void **state)
{
    (void)state;
    exit_h[0] = engine(64 * MiB, 1, NULL);
    exit_h[1] = engine(64 * MiB, 1, NULL);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, churn_and_exit, NULL), 0);
    pthread_join(t, NULL);
    if (exit_shard >= HIVE__SHARDS)
        skip();                             /* more than HIVE__SHARDS threads alive: shared */
    assert_false(hive__store_shard_claimed(exit_shard));
    for (int e = 0; e < 2; e++) {
        hive__store_t *s = &exit_h[e]->store;
        hive__handles_cache_t *c = &s->shards[exit_shard].cache;
        assert_int_equal(atomic_load(&c->local), 0);
        assert_int_equal(atomic_load(&c->inbox), 0);
        assert_int_equal(atomic_load(&s->shards[exit_shard].reserve), 0);
        uint32_t hw = atomic_load(&s->table.next_slot);
        hive_ref_t r[HIVE__RETIRE_BATCH];
        for (int i = 0; i < HIVE__RETIRE_BATCH; i++)
            assert_int_equal(hive_put(exit_h[e], &i, sizeof i, &r[i]), HIVE_OK);
        assert_int_equal(atomic_load(&s->table.next_slot), hw);   /* all from the shared stack */
        for (int i = 0; i < HIVE__RETIRE_BATCH; i++)
            hive_release(exit_h[e], r[i]);
        assert_int_equal(used_after_drain(exit_h[e]), 0);
    }
    assert_int_equal(hive_shutdown(exit_h[0]), HIVE_OK);
    assert_int_equal(hive_shutdown(exit_h[1]), HIVE_OK);
}

static void test_worker_frees_before_parking(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    /* fewer than a batch, then more than two batches and a rest */
    const int counts[] = { 3, 2 * HIVE__RETIRE_BATCH + 5 };
    for (unsigned k = 0; k < 2; k++) {
        hive_ref_t r;
        const void *p;
        assert_int_equal(hive_submit(h, put_release_some, &HIVE_VAL(counts[k]), 1, NULL, &r),
                         HIVE_OK);
        assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, NULL), HIVE_OK);
        assert_int_equal(hive_release(h, r), HIVE_OK);
        hive_store_stats_t st;
        /* no drain: the worker must have flushed on its own */
        WAIT_UNTIL((hive_store_stats(h, &st), st.objects == 0 && st.used == 0), 10000);
        assert_null(atomic_load(&h->sched.w[0].retired));
    }
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Users' counts on one object stop at 2^32-1 (the word's upper half is the
 * engine's pins): a retain, or a cell's acquire of a version, past that is
 * refused with HIVE_ESTATE and the number, and the object is unharmed. The
 * count is brought to its limit directly (2^32 retains would take a minute). */
static void test_user_counts_cap(void **state)
{
    (void)state;
    hive_t *h = engine(64 * MiB, 1, NULL);
    int64_t v = 7;
    hive_ref_t r, cell, got;
    assert_int_equal(hive_put(h, &v, sizeof v, &r), HIVE_OK);
    assert_int_equal(hive_cell_new(h, r, &cell), HIVE_OK);   /* a pin: the other half */
    hive__rcu_lock();
    hive__obj_t *o = hive__obj_lookup(h, r.id);
    hive__rcu_unlock();
    assert_non_null(o);                 /* our count keeps it */
    atomic_fetch_add(&o->refs, HIVE__USERS - 1);            /* 1 + that: the users' half full */
    ASSERT_FAILS_WITH(hive_retain(h, r), HIVE_ESTATE, "4294967295 counts, the most it can hold");
    ASSERT_FAILS_WITH(hive_cell_acquire(h, cell, &got, NULL), HIVE_ESTATE,
                      "4294967295 counts, the most it can hold");
    atomic_fetch_sub(&o->refs, HIVE__USERS - 1);
    assert_int_equal(hive_cell_acquire(h, cell, &got, NULL), HIVE_OK);
    assert_int_equal(got.id, r.id);
    const void *d;
    assert_int_equal(hive_get(h, got, 0, &d, NULL), HIVE_OK);
    assert_int_equal(*(const int64_t *)d, 7);
    assert_int_equal(hive_release(h, got), HIVE_OK);
    assert_int_equal(hive_release(h, cell), HIVE_OK);
    assert_int_equal(hive_release(h, r), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_frees_before_parking),
        cmocka_unit_test(test_put_get_zero_copy),
        cmocka_unit_test(test_create_seal_and_waiting_get),
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_bad_input_leaves_others_intact),
        cmocka_unit_test(test_capacity_is_exact),
        cmocka_unit_test(test_full_store_takes_reserves_back),
        cmocka_unit_test(test_exit_gives_cache_back),
        cmocka_unit_test(test_half_capacity_after_churn),
        cmocka_unit_test(test_small_classes_never_starve_large),
        cmocka_unit_test(test_fill_ends_full_at_every_size),
        cmocka_unit_test(test_wait),
        cmocka_unit_test(test_wait_huge_count),
        cmocka_unit_test(test_numa_placement),
        cmocka_unit_test(test_engines_do_not_share_refs),
        cmocka_unit_test(test_promotion_waits_for_owner),
        cmocka_unit_test(test_owner_takes_cas_while_revoking),
        cmocka_unit_test(test_lent_pin_drop_is_a_cas),
        cmocka_unit_test(test_get_many_all_ready),
        cmocka_unit_test(test_get_many_waits_and_reports_each),
        cmocka_unit_test(test_get_many_bad_input),
        cmocka_unit_test(test_get_many_inside_a_task),
        cmocka_unit_test(test_get_many_returns_at_shutdown),
        cmocka_unit_test(test_user_counts_cap),
    };
    return cmocka_run_group_tests_name("store", tests, NULL, NULL);
}
