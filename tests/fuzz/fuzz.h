/*
 * fuzz.h - what the libFuzzer targets share: a reader that turns the fuzzer's
 * bytes into choices, invariant checks that abort with a sentence (libFuzzer
 * then saves the input), and a drain that waits for the store to come back.
 */
#ifndef HIVE_FUZZ_H
#define HIVE_FUZZ_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hive.h"
#include "hive_impl.h"

/* ------------------------------------------------------------ input reader
 * Past the end every read gives 0, so any input decodes to some program. */
typedef struct fz {
    const uint8_t *p;
    size_t         n;
} fz_t;

static inline bool fz_more(const fz_t *f)
{
    return f->n > 0;
}

static inline uint8_t fz_u8(fz_t *f)
{
    if (f->n == 0)
        return 0;
    f->n--;
    return *f->p++;
}

static inline uint16_t fz_u16(fz_t *f)
{
    uint16_t v = fz_u8(f);
    return (uint16_t)(v | (uint16_t)fz_u8(f) << 8);
}

static inline uint32_t fz_u32(fz_t *f)
{
    uint32_t v = fz_u16(f);
    return v | (uint32_t)fz_u16(f) << 16;
}

static inline uint64_t fz_u64(fz_t *f)
{
    uint64_t v = fz_u32(f);
    return v | (uint64_t)fz_u32(f) << 32;
}

/* A 64-bit integer: mostly small, sometimes an edge (0, ±1, the limits,
 * powers of two around them), sometimes any 64 bits. */
static inline int64_t fz_i64(fz_t *f)
{
    static const int64_t edges[] = {
        0, 1, -1, 2, -2, 3, 7, 8, 63, 64, 65, 1000, -1000, INT32_MAX, INT32_MIN,
        (int64_t)1 << 31, (int64_t)1 << 32, (int64_t)1 << 48, (int64_t)1 << 62, -((int64_t)1 << 62),
        INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1, INT64_MAX / 2, INT64_MIN / 2,
    };
    uint8_t sel = fz_u8(f);
    if (sel < 128)
        return (int64_t)(sel % 16) - 4;          /* -4 .. 11 */
    if (sel < 224)
        return edges[sel % (sizeof edges / sizeof edges[0])];
    return (int64_t)fz_u64(f);
}

/* A double: small values, edges of the format and NaN/infinities. */
static inline double fz_f64(fz_t *f)
{
    static const double edges[] = {
        0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 0.6, 0.4, 10.0, 100.0, 1e-300, 1e300, 4.9e-324,
        1.7976931348623157e308, -1e300, 1e20, 1e-20, NAN, INFINITY, -INFINITY,
    };
    uint8_t sel = fz_u8(f);
    if (sel < 64)
        return (double)(sel % 16) / 4.0;         /* 0 .. 3.75 */
    if (sel < 224)
        return edges[sel % (sizeof edges / sizeof edges[0])];
    uint64_t bits = fz_u64(f);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* ------------------------------------------------------------ checks
 * A broken invariant aborts: libFuzzer reports it as a crash and keeps the
 * input, which reproduces it when given back to the target. */
__attribute__((format(printf, 3, 4), noreturn)) static void fz_fail(const char *file, int line,
                                                                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\n*** hive invariant broken at %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n*** last error of this thread: \"%s\"\n", hive_last_error());
    va_end(ap);
    abort();
}

#define FZ_CHECK(cond, ...)                                    \
    do {                                                       \
        if (!(cond))                                           \
            fz_fail(__FILE__, __LINE__, __VA_ARGS__);          \
    } while (0)

/* A failure must carry one of the allowed codes and a sentence. `allowed`
 * is a mask of bits (1u << -code). */
#define FZ_BIT(code) (1u << (unsigned)(-(code)))
#define FZ_CHECK_FAIL(rc, allowed, what)                                                    \
    do {                                                                                    \
        int fzc_rc_ = (rc);                                                                 \
        FZ_CHECK(fzc_rc_ < 0 && fzc_rc_ >= -31 && ((allowed) & FZ_BIT(fzc_rc_)),            \
                 "%s returned %d (%s), not one of the documented failures here", (what),    \
                 fzc_rc_, hive_strerror(fzc_rc_));                                          \
        FZ_CHECK(hive_last_error()[0] != '\0', "%s failed with %d but left no sentence",    \
                 (what), fzc_rc_);                                                          \
    } while (0)

/* ------------------------------------------------------------ known defects
 * HIVE_FUZZ_KNOWN=name,name... makes a target step around the inputs that
 * hit those known defects (each target lists its names), so that a run can
 * look past them for new ones. Unset, the targets step around the defects
 * listed in FZ_KNOWN_OPEN (reproducers in tests/fuzz/crashes-found/) and
 * say so at start; none is open today. HIVE_FUZZ_KNOWN= (empty) makes
 * every check. */
#define FZ_KNOWN_OPEN ""

static inline const char *fz_known_list(void)
{
    const char *list = getenv("HIVE_FUZZ_KNOWN");
    return list != NULL ? list : FZ_KNOWN_OPEN;
}

static inline bool fz_known(const char *name)
{
    const char *list = fz_known_list();
    size_t n = strlen(name);
    for (const char *p = list; p != NULL && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* The store check waits for a grace period and liburcu's callback thread
 * (about 10 ms), so it runs after every HIVE_FUZZ_CHECK_EVERY-th input
 * (default 64) and after every input when the target is given files to
 * replay rather than a corpus directory to grow. */
static unsigned fz_check_every = 64;

static inline void fz_setup(int argc, char **argv)
{
    if (fz_known_list()[0] != '\0')
        fprintf(stderr, "fuzz: stepping around the known open defects %s (README, \"Known open "
                "issues\"); HIVE_FUZZ_KNOWN= checks them too\n", fz_known_list());
    const char *e = getenv("HIVE_FUZZ_CHECK_EVERY");
    if (e != NULL && atoi(e) > 0)
        fz_check_every = (unsigned)atoi(e);
    for (int i = 1; i < argc; i++) {
        FILE *fp = argv[i][0] != '-' ? fopen(argv[i], "r") : NULL;
        if (fp != NULL && fgetc(fp) != EOF && !ferror(fp))
            fz_check_every = 1;                  /* a file (a directory reads as an error) */
        if (fp != NULL)
            fclose(fp);
    }
}

static inline bool fz_check_due(void)
{
    static unsigned inputs;
    return ++inputs % fz_check_every == 0;
}

static inline uint64_t fz_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void fz_sleep_us(unsigned us)
{
    struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)us * 1000L };
    nanosleep(&ts, NULL);
}

/* An engine for the whole fuzzing process (libFuzzer runs every input in
 * one process; starting an engine per input would measure hive_init). */
static inline hive_t *fz_engine(unsigned workers, size_t store_bytes)
{
    hive_config_t cfg = { .workers = workers, .store_bytes = store_bytes, .no_pin = 1 };
    hive_t *h = NULL;
    int rc = hive_init(&cfg, &h);
    FZ_CHECK(rc == HIVE_OK, "hive_init: %s", hive_strerror(rc));
    return h;
}

/* Wait (up to timeout_ms) until the store holds at most max_objects objects
 * and max_used bytes: frees are deferred past a grace period, and work the
 * input released may still be finishing. Aborts on the deadline: a leak. */
static inline void fz_expect_store_at_most(hive_t *h, uint64_t max_objects, size_t max_used,
                                           unsigned timeout_ms)
{
    uint64_t deadline = fz_now_ns() + (uint64_t)timeout_ms * 1000000u;
    hive_store_stats_t st;
    for (;;) {
        FZ_CHECK(hive_store_stats(h, &st) == HIVE_OK, "hive_store_stats failed");
        if (st.objects <= max_objects && st.used <= max_used)
            return;
        FZ_CHECK(fz_now_ns() < deadline, "the store still holds %llu objects and %zu bytes %u ms "
                 "after the input released everything (expected at most %llu and %zu)",
                 (unsigned long long)st.objects, st.used, timeout_ms,
                 (unsigned long long)max_objects, max_used);
        hive__store_drain(h);       /* run the queued frees */
        if (st.objects > max_objects)
            fz_sleep_us(100);        /* work still running: give it the cores */
    }
}

#endif
