/*
 * bench_store.c - the object store, named as Ray's microbenchmark so the
 * figures can be set beside Ray's published ones, with peers in the same run:
 *
 *   memcpy  - copying the same buffer: the physical limit of a copying put,
 *             and what a copying get would cost;
 *   py_shm  - Python's multiprocessing.shared_memory with numpy doing the
 *             same put/get (bench/peer_shm.py under /usr/bin/python3, timed
 *             inside Python, startup excluded).
 *
 * Also: get latency against object size (it must be flat: get never copies),
 * lookup throughput with 1 and 2 reader threads, and the liburcu flavour
 * comparison behind the choice in src/util/rcu.h (rcu_lookup/<flavour>).
 */
#include "shim.h"
#include "benches.h"

#include <hive.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GiB (1024ull * 1024 * 1024)
#define RAY_PUT_BYTES (800ull * 1000 * 1000)   /* Ray: np.zeros(100M, int64) */

static hive_t *engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void engine_start(void)
{
    hive_config_t cfg = { .workers = 1, .store_bytes = 6 * GiB };
    if (hive_init(&cfg, &engine) != HIVE_OK) {
        fprintf(stderr, "bench_store: hive_init: %s\n", hive_last_error());
        exit(1);
    }
}

static hive_t *eng(void)
{
    pthread_once(&engine_once, engine_start);
    return engine;
}

/* ------------------------------------------------------------ py_shm peer */

/* Run peer_shm.py with args; its one line of output is the seconds it took. */
static int run_py(hb_state *s, const char *args, double *seconds)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 bench/peer_shm.py %s 2>/dev/null", args);
    FILE *f = popen(cmd, "r");
    if (f == NULL || fscanf(f, "%lf", seconds) != 1) {
        if (f)
            pclose(f);
        hb_skip_with_error(s, "peer_shm.py failed (is python3-numpy installed? make deps)");
        return -1;
    }
    pclose(f);
    return 0;
}

#define PY_CALLS 20000

static void py_calls(hb_state *s, const char *mode)
{
    char args[64];
    snprintf(args, sizeof args, "%s %d", mode, PY_CALLS);
    while (hb_keep_running(s)) {
        double secs;
        if (run_py(s, args, &secs) != 0)
            return;
        hb_set_iteration_time(s, secs);
    }
    hb_set_items_processed(s, hb_iterations(s) * PY_CALLS);
}

static void bm_py_put_calls(hb_state *s) { py_calls(s, "put_calls"); }
static void bm_py_get_calls(hb_state *s) { py_calls(s, "get_calls"); }

static void bm_py_put_gigabytes(hb_state *s)
{
    char args[64];
    snprintf(args, sizeof args, "put_bytes %llu 2", RAY_PUT_BYTES);
    while (hb_keep_running(s)) {
        double secs;
        if (run_py(s, args, &secs) != 0)
            return;
        hb_set_iteration_time(s, secs / 2);
    }
    hb_set_bytes_processed(s, hb_iterations(s) * (int64_t)RAY_PUT_BYTES);
}

/* ------------------------------------------------------------ small calls */

static void bm_put_calls(hb_state *s)
{
    hive_t *h = eng();
    int64_t v = 0;
    while (hb_keep_running(s)) {
        hive_ref_t r;
        if (hive_put(h, &v, sizeof v, &r) != HIVE_OK) {
            hb_skip_with_error(s, hive_last_error());
            return;
        }
        hive_release(h, r);
        v++;
    }
    hb_set_items_processed(s, hb_iterations(s));
}

static void bm_memcpy_calls(hb_state *s)
{
    static __thread int64_t dst[8];
    int64_t v = 0;
    while (hb_keep_running(s)) {
        memcpy(dst, &v, sizeof v);
        __asm__ __volatile__("" ::"r"(dst) : "memory");
        v++;
    }
    hb_set_items_processed(s, hb_iterations(s));
}

static void bm_get_calls(hb_state *s)
{
    hive_t *h = eng();
    int64_t v = 42;
    hive_ref_t r;
    hive_put(h, &v, sizeof v, &r);
    int64_t sum = 0;
    while (hb_keep_running(s)) {
        const void *p;
        hive_get(h, r, 0, &p, NULL);
        sum += *(const int64_t *)p;
    }
    if (sum != 42 * hb_iterations(s))
        hb_skip_with_error(s, "get returned the wrong payload");
    hive_release(h, r);
    hb_set_items_processed(s, hb_iterations(s));
}

/* ------------------------------------------------------------ gigabytes */

/* TOUCH: a peer's destination is filled with nonzero bytes before it is
 * timed. Zeros are not enough: on a virtual machine whose host backs guest
 * pages lazily (this project's VM is one), a page that has only held zeros
 * can still cost a host fault at its first nonzero write - measured here:
 * memset(0) of 800 MB, then the first memcpy into it took 10.7 s, the next
 * ones 0.2 s. The store's reused pages held earlier payloads, so the
 * peers' must hold data too. */

static int64_t *ray_array(void)
{
    static int64_t *src;
    if (src == NULL) {
        src = malloc(RAY_PUT_BYTES);
        for (size_t i = 0; i < RAY_PUT_BYTES / 8; i++)
            src[i] = (int64_t)i;
    }
    return src;
}

/* Steady state, as the peer's destination is touched before it is timed:
 * two untimed put + release rounds first, so the store's large blocks have
 * their pages (a release's block is reused by a later put, not the next
 * one at once: its free waits for the RCU grace period). */
static void warm_store(hive_t *h, const void *src)
{
    for (int k = 0; k < 2; k++) {
        hive_ref_t r;
        if (hive_put(h, src, RAY_PUT_BYTES, &r) == HIVE_OK)
            hive_release(h, r);
    }
}

static void bm_put_gigabytes(hb_state *s)
{
    hive_t *h = eng();
    int64_t *src = ray_array();
    warm_store(h, src);
    while (hb_keep_running(s)) {
        hive_ref_t r;
        if (hive_put(h, src, RAY_PUT_BYTES, &r) != HIVE_OK) {
            hb_skip_with_error(s, hive_last_error());
            return;
        }
        hb_pause(s);
        hive_release(h, r);
        hb_resume(s);
    }
    hb_set_bytes_processed(s, hb_iterations(s) * (int64_t)RAY_PUT_BYTES);
}

/* create + write the data in place once (no source buffer, no copy) */
static void bm_create_gigabytes(hb_state *s)
{
    hive_t *h = eng();
    warm_store(h, ray_array());
    while (hb_keep_running(s)) {
        hive_ref_t r;
        void *d;
        if (hive_create(h, RAY_PUT_BYTES, &d, &r) != HIVE_OK) {
            hb_skip_with_error(s, hive_last_error());
            return;
        }
        int64_t *a = d;
        for (size_t i = 0; i < RAY_PUT_BYTES / 8; i++)
            a[i] = (int64_t)i;
        hive_seal(h, r);
        hb_pause(s);
        hive_release(h, r);
        hb_resume(s);
    }
    hb_set_bytes_processed(s, hb_iterations(s) * (int64_t)RAY_PUT_BYTES);
}

static void bm_memcpy_gigabytes(hb_state *s)
{
    int64_t *src = ray_array();
    static char *dst;
    if (dst == NULL) {
        dst = malloc(RAY_PUT_BYTES);
        memset(dst, 1, RAY_PUT_BYTES);      /* touched, as the store's reused pages are (TOUCH) */
    }
    while (hb_keep_running(s)) {
        memcpy(dst, src, RAY_PUT_BYTES);
        __asm__ __volatile__("" ::"r"(dst) : "memory");
    }
    hb_set_bytes_processed(s, hb_iterations(s) * (int64_t)RAY_PUT_BYTES);
}

/* The limit of hive_create + writing in place: writing the same 800 MB
 * (the same int64 ramp) into memory that is already touched. */
static void bm_memset_gigabytes(hb_state *s)
{
    static int64_t *dst;
    if (dst == NULL) {
        dst = malloc(RAY_PUT_BYTES);
        memset(dst, 1, RAY_PUT_BYTES);      /* TOUCH */
    }
    while (hb_keep_running(s)) {
        for (size_t i = 0; i < RAY_PUT_BYTES / 8; i++)
            dst[i] = (int64_t)i;
        __asm__ __volatile__("" ::"r"(dst) : "memory");
    }
    hb_set_bytes_processed(s, hb_iterations(s) * (int64_t)RAY_PUT_BYTES);
}

#define MULTI_BYTES (200ull * 1000 * 1000)

static void bm_multi_put_gigabytes(hb_state *s)
{
    hive_t *h = eng();
    char *src = malloc(MULTI_BYTES);
    memset(src, 1 + hb_thread_index(s), MULTI_BYTES);
    while (hb_keep_running(s)) {
        hive_ref_t r;
        if (hive_put(h, src, MULTI_BYTES, &r) != HIVE_OK) {
            hb_skip_with_error(s, hive_last_error());
            break;
        }
        hive_release(h, r);
    }
    free(src);
    hb_set_bytes_processed(s, hb_iterations(s) * (int64_t)MULTI_BYTES);
}

static void bm_multi_memcpy_gigabytes(hb_state *s)
{
    char *src = malloc(MULTI_BYTES), *dst = malloc(MULTI_BYTES);
    memset(src, 1, MULTI_BYTES);
    memset(dst, 1, MULTI_BYTES);        /* TOUCH */
    while (hb_keep_running(s)) {
        memcpy(dst, src, MULTI_BYTES);
        __asm__ __volatile__("" ::"r"(dst) : "memory");
    }
    free(src);
    free(dst);
    hb_set_bytes_processed(s, hb_iterations(s) * (int64_t)MULTI_BYTES);
}

/* ------------------------------------------------------------ get latency */

static void bm_get_latency(hb_state *s)
{
    hive_t *h = eng();
    size_t bytes = (size_t)hb_range(s, 0);
    hive_ref_t r;
    void *d;
    if (hive_create(h, bytes, &d, &r) != HIVE_OK) {
        hb_skip_with_error(s, hive_last_error());
        return;
    }
    memset(d, 7, bytes);
    hive_seal(h, r);
    uint64_t sum = 0;
    while (hb_keep_running(s)) {
        const void *p;
        size_t n;
        hive_get(h, r, 0, &p, &n);
        sum += *(const unsigned char *)p + n;
    }
    __asm__ __volatile__("" ::"r"(sum));
    hive_release(h, r);
    hb_set_items_processed(s, hb_iterations(s));
}

static void bm_memcpy_latency(hb_state *s)
{
    size_t bytes = (size_t)hb_range(s, 0);
    char *src = malloc(bytes), *dst = malloc(bytes);
    memset(src, 7, bytes);
    memset(dst, 1, bytes);              /* TOUCH */
    while (hb_keep_running(s)) {
        memcpy(dst, src, bytes);
        __asm__ __volatile__("" ::"r"(dst) : "memory");
    }
    free(src);
    free(dst);
    hb_set_items_processed(s, hb_iterations(s));
}

static void bm_py_get_latency(hb_state *s)
{
    char args[64];
    int64_t bytes = hb_range(s, 0);
    int n = bytes >= (int64_t)(256u << 20) ? 20 : 2000;
    snprintf(args, sizeof args, "get_bytes %lld %d", (long long)bytes, n);
    while (hb_keep_running(s)) {
        double secs;
        if (run_py(s, args, &secs) != 0)
            return;
        hb_set_iteration_time(s, secs / n);
    }
    hb_set_items_processed(s, hb_iterations(s));
}

/* ------------------------------------------------------------ lookups */

#define LOOKUP_OBJECTS 65536
static hive_ref_t lookup_refs[LOOKUP_OBJECTS];
static pthread_once_t lookup_once = PTHREAD_ONCE_INIT;

static void lookup_setup(void)
{
    hive_t *h = eng();
    for (uint64_t i = 0; i < LOOKUP_OBJECTS; i++)
        hive_put(h, &i, sizeof i, &lookup_refs[i]);
}

static void bm_lookup(hb_state *s)
{
    pthread_once(&lookup_once, lookup_setup);
    hive_t *h = eng();
    uint64_t rng = 0x9E3779B97F4A7C15ull * (uint64_t)(hb_thread_index(s) + 1), found = 0;
    while (hb_keep_running(s)) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        const void *p;
        found += hive_get(h, lookup_refs[rng % LOOKUP_OBJECTS], 0, &p, NULL) == HIVE_OK;
    }
    if (found != (uint64_t)hb_iterations(s))
        hb_skip_with_error(s, "a lookup failed");
    hb_set_items_processed(s, hb_iterations(s));
}

#define FLAVOUR_BENCH(fl)                                                        \
    void hb_rcu_##fl##_setup(uint64_t n);                                        \
    uint64_t hb_rcu_##fl##_lookups(uint64_t count, uint64_t n, uint64_t seed);   \
    void hb_rcu_##fl##_reader_begin(void);                                       \
    void hb_rcu_##fl##_reader_end(void);                                         \
    static void bm_rcu_##fl(hb_state *s)                                         \
    {                                                                            \
        if (hb_thread_index(s) == 0)                                             \
            hb_rcu_##fl##_setup(LOOKUP_OBJECTS);                                 \
        hb_rcu_##fl##_reader_begin();                                            \
        uint64_t found = 0, seed = (uint64_t)hb_thread_index(s) * 7919 + 1;      \
        while (hb_keep_running(s))                                               \
            found += hb_rcu_##fl##_lookups(1024, LOOKUP_OBJECTS, seed++);        \
        hb_rcu_##fl##_reader_end();                                              \
        if (found != (uint64_t)hb_iterations(s) * 1024)                          \
            hb_skip_with_error(s, "a lookup failed");                            \
        hb_set_items_processed(s, hb_iterations(s) * 1024);                      \
    }
FLAVOUR_BENCH(qsbr)
FLAVOUR_BENCH(memb)
FLAVOUR_BENCH(bp)

static const int64_t latency_sizes[] = { 1, 1024, 1 << 20, 64 << 20, 1 << 30 };

const hb_bench hb_store_benches[] = {
    { .name = "single_client_put_calls/hive", .fn = bm_put_calls },
    { .name = "single_client_put_calls/memcpy", .fn = bm_memcpy_calls },
    { .name = "single_client_put_calls/py_shm", .fn = bm_py_put_calls, .use_manual_time = 1,
      .iterations = 1, .unit = HB_MS },
    { .name = "single_client_get_calls/hive", .fn = bm_get_calls },
    { .name = "single_client_get_calls/memcpy", .fn = bm_memcpy_calls },
    { .name = "single_client_get_calls/py_shm", .fn = bm_py_get_calls, .use_manual_time = 1,
      .iterations = 1, .unit = HB_MS },
    { .name = "multi_client_put_calls/hive", .fn = bm_put_calls, .threads = 2 },
    { .name = "multi_client_put_calls/memcpy", .fn = bm_memcpy_calls, .threads = 2 },
    { .name = "single_client_put_gigabytes/hive", .fn = bm_put_gigabytes, .iterations = 4, .unit = HB_MS },
    { .name = "create_gigabytes/hive", .fn = bm_create_gigabytes, .iterations = 4, .unit = HB_MS },
    { .name = "create_gigabytes/memset", .fn = bm_memset_gigabytes, .iterations = 4, .unit = HB_MS },
    { .name = "single_client_put_gigabytes/memcpy", .fn = bm_memcpy_gigabytes, .iterations = 4,
      .unit = HB_MS },
    { .name = "single_client_put_gigabytes/py_shm", .fn = bm_py_put_gigabytes, .use_manual_time = 1,
      .iterations = 1, .unit = HB_MS },
    { .name = "multi_client_put_gigabytes/hive", .fn = bm_multi_put_gigabytes, .threads = 2,
      .iterations = 8, .unit = HB_MS },
    { .name = "multi_client_put_gigabytes/memcpy", .fn = bm_multi_memcpy_gigabytes, .threads = 2,
      .iterations = 8, .unit = HB_MS },
    { .name = "get_latency/hive", .fn = bm_get_latency, .args = latency_sizes, .nargs = 5,
      .arg_name = "bytes" },
    { .name = "get_latency/memcpy", .fn = bm_memcpy_latency, .args = latency_sizes, .nargs = 5,
      .arg_name = "bytes" },
    { .name = "get_latency/py_shm", .fn = bm_py_get_latency, .args = latency_sizes, .nargs = 5,
      .arg_name = "bytes", .use_manual_time = 1, .iterations = 1, .unit = HB_US },
    { .name = "lookup/hive", .fn = bm_lookup },
    { .name = "lookup/hive", .fn = bm_lookup, .threads = 2 },
    { .name = "rcu_lookup/memb", .fn = bm_rcu_memb },
    { .name = "rcu_lookup/memb", .fn = bm_rcu_memb, .threads = 2 },
    { .name = "rcu_lookup/qsbr", .fn = bm_rcu_qsbr },
    { .name = "rcu_lookup/qsbr", .fn = bm_rcu_qsbr, .threads = 2 },
    { .name = "rcu_lookup/bp", .fn = bm_rcu_bp },
    { .name = "rcu_lookup/bp", .fn = bm_rcu_bp, .threads = 2 },
};
const size_t hb_store_nbenches = sizeof hb_store_benches / sizeof hb_store_benches[0];
