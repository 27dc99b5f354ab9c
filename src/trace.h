/*
 * trace.h - the timeline recorder: per-worker event rings, and the Chrome
 * Trace Event JSON they turn into (trace.c).
 *
 * Recording: every worker owns one ring of fixed-size events, allocated
 * when the engine starts. Recording an event is a clock read and a store
 * into the ring's next slot: no lock, no malloc, no system call. When a ring
 * is full the newest event overwrites the oldest (the file says how many
 * were dropped). Only the worker writes its ring (a spare thread that
 * becomes the worker writes it while the worker's own thread is blocked
 * joining it), so its head needs no read-modify-write. Threads that are no
 * workers (the user's) share one more ring, claimed slot by slot with a
 * fetch-add. Nothing reads a ring before the workers are joined
 * (hive_shutdown), so the events need no ordering of their own.
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

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util/clock.h"

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
};

typedef struct hive__tev {
    uint64_t    ts;        /* CLOCK_MONOTONIC ns (start, for spans) */
    uint64_t    dur;       /* spans: ns; counters: a value */
    uint64_t    id;        /* flow id (the result object's id) or a counter value */
    const void *a, *b;     /* names (see the kinds) */
    uint32_t    kind;
    uint32_t    arg;       /* spans: helping depth; steal: victim; counters: a value */
} hive__tev_t;

typedef struct hive__tring {
    hive__tev_t     *ev;
    uint64_t         mask;  /* capacity - 1 (a power of two) */
    _Atomic uint64_t head;  /* events recorded so far (the next slot is head & mask) */
    uint64_t         sampled; /* when the worker last recorded counters */
} hive__tring_t;

typedef struct hive__trace {
    bool           on;
    FILE          *out;     /* opened at init, so a bad path fails there */
    char          *path;
    unsigned       nworkers;
    hive__tring_t *rings;   /* [0, nworkers): the workers'; [nworkers]: other threads' */
    hive__tev_t   *events;  /* every ring's slots, one block */
} hive__trace_t;

/* Open the recorder if path (else $HIVE_TRACE) names a file; off otherwise.
 * $HIVE_TRACE_EVENTS sets the events kept per ring (default 65536). */
int  hive__trace_open(hive__trace_t *t, const char *path, unsigned nworkers);
/* Write the JSON (after the workers are joined) and free everything.
 * HIVE_OK, or the failure to write with its sentence. */
int  hive__trace_close(hive__trace_t *t, struct hive *h);
/* Events recorded and overwritten so far (for hive_stats). */
void hive__trace_counts(hive__trace_t *t, uint64_t *recorded, uint64_t *dropped);

/* The recorder's clock. */
static inline uint64_t hive__trace_clock(void)
{
    return hive__now_ns();
}

/* Record into r (the caller's own ring, or the shared one: shared). */
static inline void hive__trace_put(hive__tring_t *r, bool shared, uint32_t kind, uint64_t ts,
                                   uint64_t dur, uint64_t id, const void *a, const void *b,
                                   uint32_t arg)
{
    uint64_t n;
    if (shared)   /* relaxed: claims a slot; the reader runs after joins */
        n = atomic_fetch_add_explicit(&r->head, 1, memory_order_relaxed);
    else {        /* relaxed: one writer; stats readers only want a count */
        n = atomic_load_explicit(&r->head, memory_order_relaxed);
        atomic_store_explicit(&r->head, n + 1, memory_order_relaxed);
    }
    r->ev[n & r->mask] = (hive__tev_t){ .ts = ts, .dur = dur, .id = id, .a = a, .b = b,
                                        .kind = kind, .arg = arg };
}

/* A span from t0 to now on a worker's ring. */
static inline void hive__trace_span(hive__tring_t *r, uint32_t kind, uint64_t t0, uint64_t id,
                                    const void *a, const void *b, uint32_t arg)
{
    hive__trace_put(r, false, kind, t0, hive__now_ns() - t0, id, a, b, arg);
}

/* A submit or call that began at t0 from any thread of engine h. */
void hive__trace_submit(struct hive *h, uint64_t t0, uint64_t id, const void *a, const void *b,
                        bool call);
/* Store and queue counters, sampled by worker r between jobs (at most
 * once a millisecond per worker, so an idle loop cannot flood the ring). */
void hive__trace_counters(struct hive *h, hive__tring_t *r);

#endif
