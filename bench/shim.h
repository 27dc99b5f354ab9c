/*
 * shim.h - Google Benchmark for C: the few calls hive's benchmarks need.
 *
 * Google Benchmark is a C++ library; bench/shim.cc (the one C++ file of
 * bench/) wraps it, and every benchmark is written in C against this header.
 *
 * A benchmark is a function that loops on hb_keep_running(), the C form of
 * `for (auto _ : state)`:
 *
 *     static void bm_push(hb_state *s)
 *     {
 *         while (hb_keep_running(s))
 *             work();
 *         hb_set_items_processed(s, hb_iterations(s));
 *     }
 *
 * Each bench/bench_<module>.c lists its benchmarks in a const table of
 * hb_bench rows and declares the table in bench/benches.h; bench/main.c
 * defines hb_register_all(), which hands every table to hb_register().
 * shim.cc's main() calls hb_register_all() and then runs the benchmarks.
 *
 * Naming: "<family>/<impl>[/<rest>]", e.g. "mpsc_push_pop/hive" with
 * arg_name "producers" becomes "mpsc_push_pop/hive/producers:2". After the
 * run, main() prints a ratio table: for every family and rest that has a
 * "hive" entry, one line per peer impl with ratio = hive speed / peer speed
 * (items_per_second if both report it, else peer time / hive time), so a
 * ratio above 1 always means hive is faster. With --benchmark_repetitions the
 * median is compared.
 *
 * Command line: every --benchmark_* flag of Google Benchmark works, among
 * them --benchmark_filter, --benchmark_repetitions and
 * --benchmark_out=<file> --benchmark_out_format=json.
 */
#ifndef HIVE_BENCH_SHIM_H
#define HIVE_BENCH_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hb_state hb_state;    /* a benchmark::State, opaque to C */
typedef void (*hb_fn)(hb_state *s);

/* Time units for hb_bench.unit. */
enum { HB_NS = 0, HB_US = 1, HB_MS = 2 };

/* Counter flags for hb_counter (they may be or-ed). */
enum {
    HB_PLAIN       = 0,
    HB_RATE        = 1,  /* value is divided by the benchmark's time (kIsRate) */
    HB_AVG_THREADS = 2   /* value is divided by the number of threads (kAvgThreads) */
};

/* One benchmark to register. Zero means "default" in every optional field. */
typedef struct hb_bench {
    const char *name;          /* "<family>/<impl>[/<rest>]" */
    hb_fn fn;
    int threads;               /* 0 or 1: one thread; n > 1: fn runs on n threads at once */
    int use_manual_time;       /* nonzero: the time is what fn passes to hb_set_iteration_time */
    const int64_t *args;       /* nargs values, one benchmark instance each (hb_range(s, 0)) */
    int nargs;
    const char *arg_name;      /* shown as "<arg_name>:<value>" in the name */
    int unit;                  /* HB_NS, HB_US or HB_MS */
    int iterations;            /* 0: let the library choose; n > 0: exactly n iterations */
} hb_bench;

/* The loop condition: true while the library wants another iteration. */
int  hb_keep_running(hb_state *s);

/* Stop and restart the clock around untimed work inside the loop. */
void hb_pause(hb_state *s);
void hb_resume(hb_state *s);

/* With use_manual_time: the time this iteration took, in seconds. */
void hb_set_iteration_time(hb_state *s, double seconds);

/* Totals over all iterations; the library reports them per second. */
void hb_set_items_processed(hb_state *s, int64_t n);
void hb_set_bytes_processed(hb_state *s, int64_t n);

/* A free-form note shown after the figures (and in the JSON "label"). */
void hb_set_label(hb_state *s, const char *label);

/* A user counter shown as a column; flags are HB_RATE / HB_AVG_THREADS. */
void hb_counter(hb_state *s, const char *name, double value, int flags);

int     hb_threads(hb_state *s);        /* threads running this benchmark */
int     hb_thread_index(hb_state *s);   /* this thread's index, 0 .. threads-1 */
int64_t hb_range(hb_state *s, int i);   /* the i-th argument of this instance */
int64_t hb_iterations(hb_state *s);     /* iterations the loop will run (max_iterations) */

/* Report the run as failed with msg (copied). The next hb_keep_running()
 * returns false; the caller should leave its loop at once. */
void hb_skip_with_error(hb_state *s, const char *msg);

/* Register n benchmarks; call only from hb_register_all(). */
void hb_register(const hb_bench *table, size_t n);

/* Defined in bench/main.c: registers every table in bench/benches.h. */
void hb_register_all(void);

/* ------------------------------------------------ peers with only a C++ API
 *
 * Peers whose library offers no C interface are driven from the end of
 * shim.cc (the one C++ file of bench/); the C benchmarks call these.
 */

/* Intel TBB (oneTBB) task_group, default arena (one thread per core). */
uint64_t hb_tbb_fib(int n, int cutoff);   /* fork-join fib(n): tbb::task_group run/run/wait
                                             per level, serial below cutoff; returns fib(n) */
void hb_tbb_spawn_wait(int n);            /* one task_group: run n empty lambdas, then wait */

/* CAF, the C++ Actor Framework (Debian's libcaf 0.17), for bench_actor.c.
 * One caf::actor_system, started on first use with one scheduler thread per
 * core of this process's cpuset (as hive's workers = 0), serves every call.
 * Handles are opaque; every function returns a negative number on failure.
 *
 * An hb_caf_actor is a counter actor (a stateful event_based_actor whose
 * int64 starts at 0): "inc" adds 1, "add" adds the sum of the eight int64
 * words of a 64-byte blob message; both answer the new value. A pinger is
 * an actor that holds a counter and, on "start n", bounces n inc/answer
 * messages off it before answering the counter's final value (or -1 if an
 * answer was not the one expected). A caller is a caf::scoped_actor: the
 * thread that made it, and only that one, uses it. */
typedef struct hb_caf_actor hb_caf_actor;
typedef struct hb_caf_caller hb_caf_caller;

hb_caf_actor  *hb_caf_counter_new(void);  /* NULL on failure; the system owns it until exit */
hb_caf_actor  *hb_caf_pinger_new(void);   /* a pinger with a fresh counter of its own */
hb_caf_caller *hb_caf_caller_new(void);
void           hb_caf_caller_free(hb_caf_caller *c);
/* request inc and receive the answer: the new value */
int64_t hb_caf_call_sync(hb_caf_caller *c, hb_caf_actor *a);
/* n requests sent one after another, call i to actors[i % nactors], inc when
 * arg64 is NULL, else add with a copy of the 64 bytes at arg64; then the n
 * answers received in order into out[i]. 0, or -1 if a request failed. */
int     hb_caf_call_batch(hb_caf_caller *c, hb_caf_actor *const *actors, int nactors, int n,
                          const void *arg64, int64_t *out);
/* request "start n" of a pinger: n round trips; the counter's final value */
int64_t hb_caf_pingpong(hb_caf_caller *c, hb_caf_actor *pinger, int64_t n);

/* Defined in bench_task.c: fib's serial leaf work, which both sides call
 * below the cutoff so that they run the same code there. */
uint64_t hb_fib_serial(int n);

#ifdef __cplusplus
}
#endif

#endif
