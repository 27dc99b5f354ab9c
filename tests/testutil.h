/*
 * testutil.h - what every test file includes: cmocka in the order it needs,
 * the public header, and small helpers (time, spinning waits, scale).
 */
#ifndef HIVE_TESTUTIL_H
#define HIVE_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hive.h"
#include "hive_impl.h"

/* Sanitized builds run 5-15x slower: stress loops scale their counts by this. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define TEST_SCALE 8
#else
#define TEST_SCALE 1

#endif

/* cmocka writes its verdict lines to stderr and the rest to stdout: line
 * buffering keeps them in order when the runner pipes both into one log. */
__attribute__((constructor)) static void test_line_buffered_stdout(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
}

static inline uint64_t test_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void test_sleep_ms(unsigned ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Wait until cond holds, polling every millisecond; fail the test after
 * timeout_ms (a deadline against hangs, not a timing assertion). */
#define WAIT_UNTIL(cond, timeout_ms)                                              \
    do {                                                                          \
        uint64_t wu_deadline_ = test_now_ns() + (uint64_t)(timeout_ms) * 1000000u;\
        while (!(cond)) {                                                         \
            if (test_now_ns() > wu_deadline_)                                     \
                fail_msg("timed out after %u ms waiting for %s", (unsigned)(timeout_ms), #cond); \
            test_sleep_ms(1);                                                     \
        }                                                                         \
    } while (0)

/* Assert that a call failed with code and left a non-empty sentence that
 * contains the fragment (the numbers that explain it). */
#define ASSERT_FAILS_WITH(call, code, fragment)                                   \
    do {                                                                          \
        int af_rc_ = (call);                                                      \
        assert_int_equal(af_rc_, (code));                                         \
        const char *af_msg_ = hive_last_error();                                  \
        assert_non_null(af_msg_);                                                 \
        if (strstr(af_msg_, (fragment)) == NULL)                                  \
            fail_msg("last error \"%s\" lacks \"%s\"", af_msg_, (fragment));      \
    } while (0)

/* An engine for a test: unpinned, with the given store size, workers and
 * (NULL: real) topology; the test fails if it cannot start. */
/* Resident bytes of this process (/proc/self/statm), 0 if unknown. */
static inline size_t test_resident_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static inline hive_t *test_engine(size_t store_bytes, unsigned workers, const char *topology)
{
    hive_config_t cfg = { .workers = workers, .store_bytes = store_bytes, .no_pin = 1,
                          .topology = topology };
    hive_t *h = NULL;
    if (hive_init(&cfg, &h) != HIVE_OK)
        fail_msg("hive_init: %s", hive_last_error());
    return h;
}

/* hive_get that must succeed within timeout_ns (a deadline against hangs);
 * the test fails with the code and sentence otherwise. */
static inline void test_get_ok(hive_t *h, hive_ref_t r, int64_t timeout_ns, const void **p, size_t *n)
{
    int rc = hive_get(h, r, timeout_ns, p, n);
    if (rc != HIVE_OK)
        fail_msg("hive_get(%llu): %s: %s", (unsigned long long)r.id, hive_strerror(rc),
                 hive_last_error());
}

/* Wait for queued frees, then check that no object and no byte is left. */
static inline void test_expect_empty_store(hive_t *h)
{
    hive__store_drain(h);
    hive_store_stats_t st;
    assert_int_equal(hive_store_stats(h, &st), HIVE_OK);
    if (st.used != 0 || st.objects != 0)
        fail_msg("store not empty: %llu objects, %zu bytes in use",
                 (unsigned long long)st.objects, st.used);
}

#endif
