/*
 * trace.h - the timeline recorder: per-worker event rings, and the Chrome
 * Trace Event JSON they turn into (trace.c).
 *
 * Recording: every worker owns one ring of fixed-size events (one 64-byte
 * line each), allocated when the engine starts. Recording an event is a
 * clock read and eight plain stores into the ring's next slot: no lock, no
 * malloc, no system call, no division. When a ring is full the newest
 * event overwrites the oldest (the file says how many were dropped). Only
 * the worker writes its ring (a spare thread that becomes the worker
 * writes it while the worker's own thread is blocked joining it), so its
 * head needs no read-modify-write. Threads that are no workers (the
 * user's) share one more ring, claimed slot by slot with a fetch-add.
 *
 * The clock: the CPU's time-stamp counter (rdtsc, a few ns) where it is
 * invariant (x86-64 with the invariant-TSC bit), else CLOCK_MONOTONIC.
 * Ticks are turned into nanoseconds only when the file is written, by the
 * line through two (ticks, CLOCK_MONOTONIC) pairs: one taken when the
 * recorder opened, one when writing.
 *
 * Reading while the workers run (hive_trace_flush): each event is a
 * seqlock of its own. The writer zeroes the event's seq, then (release
 * fence) stores the fields, then stores seq = its index + 1 (release). A
 * reader loads seq (acquire), copies the fields, fences (acquire) and loads
 * seq again: the copy is whole if both loads read index + 1 of the slot it
 * wanted, else the event was being overwritten and is skipped. Fields are
 * relaxed atomics, so the race is defined (and plain stores on x86).
 *
 * Spans are recorded when they end, with their start and duration; a span
 * that nests inside another (a task run while its parent waits in
 * hive_get) ends first, so dropping the oldest events never leaves half a
 * span behind.
 *
 * Off (no trace_path, no HIVE_TRACE), a worker's ring pointer is NULL and
 * each hook is one well-predicted branch on it (or on trace.on).
 */
#ifndef HIVE_TRACE_H
#define HIVE_TRACE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "util/clock.h"
#include "util/common.h"

struct hive;

enum {
    HIVE__TEV_TASK = 1,    /* span: a task ran (a: name or NULL, b: fn, id: result) */
    HIVE__TEV_METHOD,      /* span: an actor method ran (a: class name, b: method name, id: result) */
    HIVE__TEV_SUBMIT,      /* span: hive_submit (arg 0) or hive_call (arg 1); a/b as the run's */
    HIVE__TEV_PARKED,      /* span: the worker slept on its futex */
    HIVE__TEV_STEAL,       /* instant: took a job from worker arg's deque */
    HIVE__TEV_PARK,        /* instant: about to sleep */
    HIVE__TEV_WAKE,        /* instant: woke from sleep */
    HIVE__TEV_STORE,       /* counter: id bytes used, dur live objects */
    HIVE__TEV_QUEUE,       /* counter: jobs queued per lane: id HIGH, dur NORMAL, arg LOW */
    HIVE__TEV_WAIT,        /* span: a job waited in hive_get / hive_wait, helping (id: the
                              object awaited, or 0 for a hive_wait) */
};

typedef struct hive__tev {
    _Atomic uint64_t seq;      /* index + 1 once written, 0 while being written */
    _Atomic uint64_t ts;       /* clock ticks (start, for spans) */
    _Atomic uint64_t dur;      /* spans: ticks; counters: a value */
    _Atomic uint64_t id;       /* flow id (the result object's id) or a counter value */
    _Atomic uint64_t a, b;     /* names (see the kinds), as integers */
    _Atomic uint64_t kind_arg; /* kind | arg << 32; arg: spans: helping depth; steal: victim;
                                  counters: a value */
} __attribute__((aligned(64))) hive__tev_t;

typedef struct hive__tring {
    hive__tev_t     *ev;
    uint64_t         mask;  /* capacity - 1 (a power of two) */
    _Atomic uint64_t head;  /* events recorded so far (the next slot is head & mask) */
    uint64_t         sampled; /* when the worker last recorded counters (ns) */
} hive__tring_t;

typedef struct hive__trace {
    bool            on;
    FILE           *out;     /* opened at init, so a bad path fails there */
    char           *path;
    unsigned        nworkers;
    hive__tring_t  *rings;   /* [0, nworkers): the workers'; [nworkers]: other threads' */
    hive__tev_t    *events;  /* every ring's slots, one anonymous mapping */
    size_t          events_bytes;
    uint64_t        tick0, ns0;   /* the clock at open: ticks and CLOCK_MONOTONIC ns */
    pthread_mutex_t write_lock;   /* one writer of the file at a time (flush, close) */
} hive__trace_t;

/* Whether the recorder's clock is the TSC (set once, by the first open,
 * or by hive__trace_choose_clock: benchmarks call it). */
extern _Atomic bool hive__trace_tsc;
void hive__trace_choose_clock(void);

/* Open the recorder if path (else $HIVE_TRACE) names a file; off otherwise.
 * $HIVE_TRACE_EVENTS sets the events kept per ring (default 65536). */
int  hive__trace_open(hive__trace_t *t, const char *path, unsigned nworkers);
/* Write the JSON (after the workers are joined) and free everything.
 * HIVE_OK, or the failure to write with its sentence. */
/* (hive_trace_flush writes the same file while the workers run.) */
int  hive__trace_close(hive__trace_t *t, struct hive *h);
/* Events recorded and overwritten so far (for hive_stats). */
void hive__trace_counts(hive__trace_t *t, uint64_t *recorded, uint64_t *dropped);

/* The writer's fence (see the top). Not inlined under ThreadSanitizer,
 * where GCC refuses (-Wtsan) a fence inlined into another function (TSan
 * does not model fences; the fields are atomics, so it has no race to
 * report). On x86 it is a compiler barrier only. */
#if defined(__SANITIZE_THREAD__)
__attribute__((noinline, unused))
static void hive__trace_fence(void)
{
    atomic_thread_fence(memory_order_release);
}
#else
static inline void hive__trace_fence(void)
{
    atomic_thread_fence(memory_order_release);
}
#endif

/* The recorder's clock: TSC ticks where invariant, else ns. relaxed: set
 * once before any engine records, read-only afterwards. */
static inline uint64_t hive__trace_clock(void)
{
#if defined(__x86_64__)
    if (likely(atomic_load_explicit(&hive__trace_tsc, memory_order_relaxed)))
        return __rdtsc();
#endif
    return hive__now_ns();
}

/* Record into r (the caller's own ring, or the shared one: shared). */
static inline void hive__trace_put(hive__tring_t *r, bool shared, uint32_t kind, uint64_t ts,
                                   uint64_t dur, uint64_t id, const void *a, const void *b,
                                   uint32_t arg)
{
    uint64_t n;
    if (shared)   /* relaxed: claims a slot; the event's seq publishes it */
        n = atomic_fetch_add_explicit(&r->head, 1, memory_order_relaxed);
    else {        /* relaxed: one writer; readers take events by their seq */
        n = atomic_load_explicit(&r->head, memory_order_relaxed);
        atomic_store_explicit(&r->head, n + 1, memory_order_relaxed);
    }
    hive__tev_t *e = &r->ev[n & r->mask];
    /* the seqlock writer (see the top): seq 0, release fence, fields
     * (relaxed: ordered by the fence and by seq's release), seq */
    atomic_store_explicit(&e->seq, 0, memory_order_relaxed);
    hive__trace_fence();
    atomic_store_explicit(&e->ts, ts, memory_order_relaxed);
    atomic_store_explicit(&e->dur, dur, memory_order_relaxed);
    atomic_store_explicit(&e->id, id, memory_order_relaxed);
    atomic_store_explicit(&e->a, (uint64_t)(uintptr_t)a, memory_order_relaxed);
    atomic_store_explicit(&e->b, (uint64_t)(uintptr_t)b, memory_order_relaxed);
    atomic_store_explicit(&e->kind_arg, kind | (uint64_t)arg << 32, memory_order_relaxed);
    atomic_store_explicit(&e->seq, n + 1, memory_order_release);
}

/* A span from t0 (hive__trace_clock) to now on a worker's ring. */
static inline void hive__trace_span(hive__tring_t *r, uint32_t kind, uint64_t t0, uint64_t id,
                                    const void *a, const void *b, uint32_t arg)
{
    hive__trace_put(r, false, kind, t0, hive__trace_clock() - t0, id, a, b, arg);
}

/* A submit or call that began at t0 from any thread of engine h. */
void hive__trace_submit(struct hive *h, uint64_t t0, uint64_t id, const void *a, const void *b,
                        bool call);
/* Store and queue counters, sampled by worker r between jobs (at most
 * once a millisecond per worker, so an idle loop cannot flood the ring). */
void hive__trace_counters(struct hive *h, hive__tring_t *r);

#endif
