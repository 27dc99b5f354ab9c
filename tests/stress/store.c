/*
 * stress/store.c - the store under 4+ threads for a few seconds.
 *
 *  - shared refs: threads get, retain and release a common set of objects
 *    (each holds its own counts) and put/release private ones; contents are
 *    checked on every get (a use-after-free or a mixed-up payload shows);
 *  - stale ids: the ids of released private objects go to a shared ring,
 *    and threads get and retain them while their records are reused for
 *    new objects: every one must answer HIVE_ENOENT (a record found under
 *    an old generation, or one found while a new owner fills it in, shows
 *    here or as a TSan report);
 *  - array atomics: every thread adds to shared counters; the totals must be
 *    exact;
 *  - seqlock: writers fill a whole array with one value inside a write
 *    section; readers' snapshots must never mix two values;
 *  - cells: one publisher publishes versions whose payload is their own
 *    sequence number; readers check the payload against the seq they got,
 *    and that seqs never go backwards.
 * At the end everything is released: no object and no byte is left in use.
 */
#include "testutil.h"
#include "hive_impl.h"

#include <pthread.h>

#define THREADS  4
#define SHARED   64
#define ELEMS    256

static hive_t *h;
static hive_ref_t shared_refs[SHARED];
static hive_ref_t counters_ref, snap_ref, cell_ref;
static hive_array_t counters, snap;
static _Atomic int stop_flag;
static _Atomic long torn, bad_payload, seq_backwards, ops, stale_found, stale_probes;
static _Atomic uint64_t stale_ids[64];      /* ids of released objects */
static _Atomic long bad_kind[4];
static _Atomic int first_error_set;
static char first_error[300];
static _Atomic long writers_adds[THREADS];

static void check_shared(unsigned i)
{
    const uint64_t *p;
    size_t n;
    if (hive_get(h, shared_refs[i], 0, (const void **)&p, &n) != HIVE_OK || n != 64 * 8) {
        atomic_fetch_add(&bad_kind[0], 1);
        atomic_fetch_add(&bad_payload, 1);
        return;
    }
    for (unsigned k = 0; k < 64; k++)
        if (p[k] != i * 1000 + k) {
            atomic_fetch_add(&bad_payload, 1);
            return;
        }
}

static void *mixed(void *arg)
{
    unsigned id = (unsigned)(intptr_t)arg;
    uint64_t rng = 0x2545F4914F6CDD1Dull * (id + 1);
    long local_adds = 0, n = 0;
    uint64_t last_seq = 0;
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        unsigned what = (unsigned)(rng % 8);
        unsigned i = (unsigned)((rng >> 8) % SHARED);
        switch (what) {
        case 0: case 1: {                  /* shared refs: retain, get, release */
            if (hive_retain(h, shared_refs[i]) != HIVE_OK) {
                atomic_fetch_add(&bad_kind[1], 1);
                atomic_fetch_add(&bad_payload, 1);
                break;
            }
            check_shared(i);
            hive_release(h, shared_refs[i]);
            break;
        }
        case 2: {                          /* private put/get/release, mixed sizes */
            size_t sz = (size_t)((rng >> 16) % 70000);
            unsigned char *buf = malloc(sz + 1);
            memset(buf, (int)(rng & 0xff), sz + 1);
            hive_ref_t r;
            if (hive_put(h, buf, sz, &r) != HIVE_OK) {
                atomic_fetch_add(&bad_kind[2], 1);      /* full only if frees were lost */
                atomic_fetch_add(&bad_payload, 1);
                int expect = 0;
                if (atomic_compare_exchange_strong(&first_error_set, &expect, 1))
                    snprintf(first_error, sizeof first_error, "put of %zu bytes: %s", sz,
                             hive_last_error());
            } else {
                const unsigned char *p;
                size_t got;
                if (hive_get(h, r, 0, (const void **)&p, &got) != HIVE_OK || got != sz ||
                    (sz && (p[0] != buf[0] || p[sz - 1] != buf[0]))) {
                    int expect = 0;
                    if (atomic_compare_exchange_strong(&first_error_set, &expect, 1))
                        snprintf(first_error, sizeof first_error, "payload of %zu bytes differs", sz);
                    atomic_fetch_add(&bad_kind[2], 1);
                    atomic_fetch_add(&bad_payload, 1);
                }
                hive_release(h, r);
                /* relaxed: only the ids travel; the store orders the rest */
                atomic_store_explicit(&stale_ids[(rng >> 24) % 64], r.id, memory_order_relaxed);
                uint64_t sid = atomic_load_explicit(&stale_ids[(rng >> 32) % 64], memory_order_relaxed);
                if (sid != 0) {
                    const void *sp;
                    if (hive_get(h, (hive_ref_t){ sid }, 0, &sp, NULL) != HIVE_ENOENT ||
                        hive_retain(h, (hive_ref_t){ sid }) != HIVE_ENOENT)
                        atomic_fetch_add(&stale_found, 1);
                    atomic_fetch_add_explicit(&stale_probes, 1, memory_order_relaxed);
                }
            }
            free(buf);
            break;
        }
        case 3:                            /* array atomics */
            hive_array_add_i64(&counters, (int64_t)(id * 4 + (rng >> 20) % 4), 1);
            local_adds++;
            break;
        case 4: {                          /* seqlock writer */
            int64_t v = (int64_t)(rng >> 1);
            hive_array_write_begin(&snap);
            for (int k = 0; k < ELEMS; k++)
                ((int64_t *)snap.data)[k] = v;
            hive_array_write_end(&snap);
            break;
        }
        case 5: {                          /* seqlock reader */
            int64_t copy[ELEMS];
            hive_array_read(&snap, copy, sizeof copy);
            for (int k = 1; k < ELEMS; k++)
                if (copy[k] != copy[0]) {
                    atomic_fetch_add(&torn, 1);
                    break;
                }
            break;
        }
        default: {                         /* cell readers (thread 0 publishes) */
            if (id == 0) {
                static uint64_t next = 1;
                hive_ref_t v;
                uint64_t payload = next;
                if (hive_put(h, &payload, sizeof payload, &v) != HIVE_OK ||
                    hive_cell_publish(h, cell_ref, v) != HIVE_OK) {
                    atomic_fetch_add(&bad_kind[3], 1);
                    atomic_fetch_add(&bad_payload, 1);
                } else {
                    next++;
                    hive_release(h, v);
                }
                break;
            }
            hive_ref_t v;
            uint64_t seq;
            if (hive_cell_acquire(h, cell_ref, &v, &seq) == HIVE_OK) {
                const uint64_t *p;
                if (hive_get(h, v, 0, (const void **)&p, NULL) != HIVE_OK || *p != seq) {
                    atomic_fetch_add(&bad_kind[3], 1);
                    atomic_fetch_add(&bad_payload, 1);
                }
                if (seq < last_seq)
                    atomic_fetch_add(&seq_backwards, 1);
                last_seq = seq;
                hive_release(h, v);
            }
            break;
        }
        }
        n++;
    }
    atomic_fetch_add(&writers_adds[id], local_adds);
    atomic_fetch_add(&ops, n);
    return NULL;
}

static void test_store_stress(void **state)
{
    (void)state;
    hive_config_t cfg = { .workers = 2, .store_bytes = 256u << 20, .no_pin = 1 };
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    for (unsigned i = 0; i < SHARED; i++) {
        uint64_t payload[64];
        for (unsigned k = 0; k < 64; k++)
            payload[k] = i * 1000 + k;
        assert_int_equal(hive_put(h, payload, sizeof payload, &shared_refs[i]), HIVE_OK);
    }
    int64_t cshape[1] = { THREADS * 4 }, sshape[1] = { ELEMS };
    assert_int_equal(hive_array_new(h, HIVE_I64, 1, cshape, &counters_ref), HIVE_OK);
    assert_int_equal(hive_array_new(h, HIVE_I64, 1, sshape, &snap_ref), HIVE_OK);
    assert_int_equal(hive_array_view(h, counters_ref, &counters), HIVE_OK);
    assert_int_equal(hive_array_view(h, snap_ref, &snap), HIVE_OK);
    assert_int_equal(hive_cell_new(h, (hive_ref_t){ 0 }, &cell_ref), HIVE_OK);

    pthread_t th[THREADS];
    for (unsigned i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, mixed, (void *)(intptr_t)i), 0);
    test_sleep_ms(2500);
    atomic_store(&stop_flag, 1);
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);

    printf("store stress: %ld operations by %d threads, %ld stale ids probed\n", atomic_load(&ops),
           THREADS, atomic_load(&stale_probes));
    if (atomic_load(&bad_payload))
        printf("bad: shared get %ld, retain %ld, private %ld, cell %ld\n", atomic_load(&bad_kind[0]),
               atomic_load(&bad_kind[1]), atomic_load(&bad_kind[2]), atomic_load(&bad_kind[3]));
    if (atomic_load(&first_error_set))
        printf("first private failure: %s\n", first_error);
    assert_int_equal(atomic_load(&bad_payload), 0);
    assert_int_equal(atomic_load(&torn), 0);
    assert_int_equal(atomic_load(&stale_found), 0);
    assert_true(atomic_load(&stale_probes) > 0);
    assert_int_equal(atomic_load(&seq_backwards), 0);
    for (unsigned i = 0; i < THREADS; i++) {
        int64_t sum = 0;
        for (unsigned k = 0; k < 4; k++)
            sum += ((int64_t *)counters.data)[i * 4 + k];
        assert_int_equal(sum, atomic_load(&writers_adds[i]));
    }
    for (unsigned i = 0; i < SHARED; i++)
        assert_int_equal(hive_release(h, shared_refs[i]), HIVE_OK);
    hive_release(h, counters_ref);
    hive_release(h, snap_ref);
    hive_release(h, cell_ref);
    test_expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------------------
 * Reserves taken back while their owners change them. Each thread's
 * reserve of inline charges (store.h) is changed by its owner with a plain
 * load and store inside a marked section (store.c, reserve_enter), and
 * taken back by a store that is full (take_reserves) after a membarrier
 * handshake. Here user threads put and release 8-byte objects and a
 * fork-join task charges and frees its results on the workers, all in a
 * 1 MiB store that a filler keeps full with one large object, so the
 * small puts and the filler's creates keep failing with HIVE_EFULL - every
 * such failure takes all reserves back first. A lost update on either
 * side (an owner's store over a taker's exchange, or the reverse) leaves
 * the arena's count unequal to the reserves when nothing is alive, or a
 * store holding more than its capacity. */
#define RT_PUTTERS 3
#define RT_CUT     8

static _Atomic long rt_puts, rt_full, rt_fib_bad, rt_over;

static int rt_fib(hive_ctx_t *ctx)
{
    int n = *(const int *)hive_arg(ctx, 0, NULL);
    uint64_t v = 0;
    if (n < RT_CUT) {
        uint64_t a = 0, b = 1;
        for (int i = 0; i < n; i++) {
            uint64_t c = a + b;
            a = b;
            b = c;
        }
        v = a;
    } else {
        hive_t *e = hive_engine(ctx);
        int m[2] = { n - 1, n - 2 };
        hive_ref_t r[2];
        int subs = 0;
        for (; subs < 2; subs++)
            if (hive_submit(e, rt_fib, &HIVE_VAL(m[subs]), 1, NULL, &r[subs]) != HIVE_OK)
                break;
        int bad = subs < 2;
        for (int i = 0; i < subs; i++) {
            const void *p;
            size_t size;
            if (hive_get(e, r[i], HIVE_FOREVER, &p, &size) == HIVE_OK && size == sizeof v)
                v += *(const uint64_t *)p;
            else
                bad = 1;
            hive_release(e, r[i]);
        }
        if (bad)
            return 1;                 /* a full store: the parent fails too */
    }
    return hive_return(ctx, &v, sizeof v) == HIVE_OK ? 0 : 1;
}

static void *rt_putter(void *arg)
{
    unsigned id = (unsigned)(intptr_t)arg;
    hive_ref_t held[16];
    unsigned n = 0;
    uint64_t x = id;
    while (!atomic_load(&stop_flag)) {
        hive_ref_t r;
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int rc = hive_put(h, &x, sizeof x, &r);
        if (rc == HIVE_OK) {
            atomic_fetch_add(&rt_puts, 1);
            if (n == 16)              /* hold at most 16: the oldest goes first */
                assert_int_equal(hive_release(h, held[--n]), HIVE_OK);
            if ((x >> 60) < 8)
                assert_int_equal(hive_release(h, r), HIVE_OK);
            else
                held[n++] = r;
        } else {
            assert_int_equal(rc, HIVE_EFULL);
            atomic_fetch_add(&rt_full, 1);
            if (n > 0)
                assert_int_equal(hive_release(h, held[--n]), HIVE_OK);
        }
    }
    while (n > 0)
        assert_int_equal(hive_release(h, held[--n]), HIVE_OK);
    return NULL;
}

static void *rt_forker(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_flag)) {
        int n = 14;
        hive_ref_t r;
        if (hive_submit(h, rt_fib, &HIVE_VAL(n), 1, NULL, &r) != HIVE_OK) {
            atomic_fetch_add(&rt_full, 1);
            continue;
        }
        const void *p;
        size_t size;
        int rc = hive_get(h, r, HIVE_FOREVER, &p, &size);
        if (rc == HIVE_OK && (size != 8 || *(const uint64_t *)p != 377))
            atomic_fetch_add(&rt_fib_bad, 1);
        else if (rc != HIVE_OK && rc != HIVE_ETASK)
            atomic_fetch_add(&rt_fib_bad, 1);
        hive_release(h, r);
    }
    return NULL;
}

static void *rt_filler(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_flag)) {
        void *d;
        hive_ref_t big;
        hive_store_stats_t st;
        /* the store less 16 small objects: the rest keep hitting
         * the wall while it is held */
        if (hive_create(h, (1u << 20) - 64 * 16 - 64, &d, &big) == HIVE_OK) {
            assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
            if (st.used > st.capacity)
                atomic_fetch_add(&rt_over, 1);
            test_sleep_ms(1);
            assert_int_equal(hive_release(h, big), HIVE_OK);
        } else {
            atomic_fetch_add(&rt_full, 1);
        }
    }
    return NULL;
}

/* fenced: the engine without the asymmetric fence (sched.h's test knob),
 * where every change of a reserve is a CAS: the same checks hold. */
static void reserve_takeback_round(bool fenced, int ms)
{
    atomic_store(&hive__sched_fenced_push, fenced);
    hive_config_t cfg = { .workers = 2, .store_bytes = 1u << 20, .no_pin = 1 };
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    atomic_store(&hive__sched_fenced_push, false);
    if (fenced)
        assert_false(h->sched.asym);
    atomic_store(&stop_flag, 0);
    atomic_store(&rt_puts, 0);
    atomic_store(&rt_full, 0);
    pthread_t th[RT_PUTTERS + 2];
    for (unsigned i = 0; i < RT_PUTTERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, rt_putter, (void *)(intptr_t)i), 0);
    assert_int_equal(pthread_create(&th[RT_PUTTERS], NULL, rt_forker, NULL), 0);
    assert_int_equal(pthread_create(&th[RT_PUTTERS + 1], NULL, rt_filler, NULL), 0);
    test_sleep_ms(ms);
    /* and until some puts were refused (a slow build's filler may spend the
     * first while in its create's retries, each after a grace period) */
    for (int waited = 0; atomic_load(&rt_full) < 100 && waited < 30000; waited += 100)
        test_sleep_ms(100);
    atomic_store(&stop_flag, 1);
    for (unsigned i = 0; i < RT_PUTTERS + 2; i++)
        pthread_join(th[i], NULL);
    hive_store_stats_t st;
    assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
    printf("reserve takeback: %ld puts, %ld refused full (%llu efull), plain sections %s\n",
           atomic_load(&rt_puts), atomic_load(&rt_full), (unsigned long long)st.efull,
           h->sched.asym ? "on" : "off (no membarrier: every change a CAS)");
    assert_int_equal(atomic_load(&rt_fib_bad), 0);
    assert_int_equal(atomic_load(&rt_over), 0);
    assert_true(atomic_load(&rt_puts) > 0);
    assert_true(st.efull > 0);        /* the reserves were taken back, many times */
    test_expect_empty_store(h);
    /* nothing alive: the arena's count is the reserves' sum, to the byte */
    size_t res = 0;
    for (unsigned i = 0; i <= HIVE__SHARDS; i++)
        res += atomic_load(&h->store.shards[i].reserve);
    assert_int_equal(atomic_load(&h->arena.used), res);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_reserve_takeback_stress(void **state)
{
    (void)state;
    reserve_takeback_round(false, 1500);   /* plain sections, where the kernel offers membarrier */
    reserve_takeback_round(true, 700);     /* every change a CAS */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_stress),
        cmocka_unit_test(test_reserve_takeback_stress),
    };
    return cmocka_run_group_tests_name("stress_store", tests, NULL, NULL);
}
