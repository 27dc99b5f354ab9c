/*
 * sched.c - worker threads, their inboxes, and parking.
 *
 * The park/wake handshake (a store-load "Dekker" pair, all seq_cst):
 *
 *   poster:  push job (seq_cst xchg on inbox head)   worker: parked = 1 (seq_cst store)
 *            read parked (seq_cst load)                      read inbox head (seq_cst load)
 *            if 1: xchg parked 0, futex_wake                 if empty: futex_wait(parked, 1)
 *
 * In the single total order of seq_cst operations, either the poster's read
 * of parked comes after the worker's store of 1 - then the poster sees 1 and
 * wakes it - or the worker's read of head comes after the push - then the
 * worker sees the job and does not sleep. A lost wake-up would need both
 * reads to miss, which the total order forbids. The futex itself re-checks
 * parked == 1 in the kernel, so a wake between the worker's check and its
 * sleep is not lost either. Exactly one side clears parked (the exchange),
 * so each park costs at most one futex wake, and a busy worker none.
 */
#include "sched.h"
#include "hive_impl.h"
#include "util/clock.h"
#include "util/common.h"
#include "util/error.h"
#include "util/park.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__thread hive__worker_t *hive__self;

/* Idle: spin this long looking for work before parking. Long enough to
 * bridge the gap between back-to-back posts of a busy producer (a few
 * microseconds), short enough that an idle engine costs nothing. */
#define IDLE_SPIN_NS   20000u
#define IDLE_YIELDS    4

static inline bool has_work(hive__worker_t *w)
{
    return !hive__mpsc_empty(&w->inbox) ||
           atomic_load_explicit(&w->sched->stopping, memory_order_seq_cst);
}

static void park(hive__worker_t *w)
{
    hive__sched_t *s = w->sched;
    uint64_t until = hive__now_ns() + IDLE_SPIN_NS;
    do {
        for (int i = 0; i < 64; i++) {
            if (has_work(w))
                return;
            hive__cpu_relax();
        }
    } while (hive__now_ns() < until);
    for (int i = 0; i < IDLE_YIELDS; i++) {
        if (has_work(w))
            return;
        sched_yield();
    }

    /* seq_cst store: the worker's half of the handshake (see top). */
    atomic_store_explicit(&w->parked, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&w->parks, 1, memory_order_relaxed);
    /* relaxed: nparked is only a hint for posters deciding whether anybody
     * could need waking; the parked word itself carries the handshake. */
    atomic_fetch_add_explicit(&s->nparked, 1, memory_order_relaxed);
    if (has_work(w)) {
        /* Cancel. If a poster cleared parked first it also issues a wake,
         * which then finds nobody waiting: harmless. */
        atomic_exchange_explicit(&w->parked, 0, memory_order_seq_cst);
    } else {
        /* acquire: pairs with the poster's exchange, though the job itself is
         * published by the inbox's own release/acquire. */
        while (atomic_load_explicit(&w->parked, memory_order_acquire) == 1)
            hive__futex_wait(&w->parked, 1, -1);
    }
    atomic_fetch_sub_explicit(&s->nparked, 1, memory_order_relaxed);
}

static void run_jobs(hive__worker_t *w)
{
    hive__sched_t *s = w->sched;
    for (;;) {
        /* relaxed: a late view only runs one more job; stop() joins us */
        if (unlikely(atomic_load_explicit(&s->stopping, memory_order_relaxed)))
            return;
        hive__mpsc_node_t *n = hive__mpsc_pop(&w->inbox);
        if (n != NULL) {
            hive__job_t *job = HIVE_CONTAINER_OF(n, hive__job_t, node);
            atomic_fetch_add_explicit(&w->jobs, 1, memory_order_relaxed);
            job->fn(job, w);
            continue;
        }
        park(w);
    }
}

static void *worker_main(void *arg)
{
    hive__worker_t *w = arg;
    hive__sched_t *s = w->sched;
    hive__self = w;
    int rc = HIVE_OK;
    if (s->pin) {
        rc = hive__topo_bind_self(&s->h->topo, w->slot);
        w->bound = rc == HIVE_OK;
    }
    if (rc != HIVE_OK) {
        int expect = HIVE_OK;
        /* first failure wins; its sentence is copied for the init thread */
        if (atomic_compare_exchange_strong(&s->start_rc, &expect, rc))
            snprintf(s->start_msg, sizeof s->start_msg, "%s", hive_last_error());
    }
    /* release: publishes bound, start_rc and start_msg to hive__sched_start */
    atomic_fetch_add_explicit(&s->started, 1, memory_order_release);
    hive__futex_wake(&s->started, 1);
    run_jobs(w);
    hive__self = NULL;
    return NULL;
}

/* Wake w if (and only if) it is parked. */
static inline void wake(hive__sched_t *s, hive__worker_t *w)
{
    /* seq_cst load: the poster's half of the handshake. The exchange makes
     * exactly one waker pay for the system call. */
    if (atomic_load_explicit(&w->parked, memory_order_seq_cst) != 0 &&
        atomic_exchange_explicit(&w->parked, 0, memory_order_seq_cst) != 0) {
        atomic_fetch_add_explicit(&s->wakes, 1, memory_order_relaxed);
        hive__futex_wake(&w->parked, 1);
    }
}

void hive__sched_post(hive__sched_t *s, unsigned index, hive__job_t *job)
{
    hive__worker_t *w = &s->w[index];
    hive__mpsc_push(&w->inbox, &job->node);
    wake(s, w);
}

int hive__sched_start(hive__sched_t *s, struct hive *h, const hive__topo_t *topo,
                      unsigned n, bool pin)
{
    memset(s, 0, sizeof *s);
    s->h = h;
    s->pin = pin;
    if (posix_memalign((void **)&s->w, HIVE_PAD, (size_t)n * sizeof *s->w) != 0)
        return hive__fail(HIVE_ENOMEM, "cannot allocate %u workers of %zu bytes", n, sizeof *s->w);
    memset(s->w, 0, (size_t)n * sizeof *s->w);
    for (unsigned i = 0; i < n; i++) {
        hive__worker_t *w = &s->w[i];
        hive__mpsc_init(&w->inbox, false);
        w->sched = s;
        w->index = i;
        w->slot = hive__topo_slot(topo, i);
    }
    unsigned created = 0;
    int rc = HIVE_OK;
    for (; created < n; created++) {
        int e = pthread_create(&s->w[created].thread, NULL, worker_main, &s->w[created]);
        if (e != 0) {
            rc = hive__fail(e == EAGAIN ? HIVE_ENOMEM : HIVE_ETOPO,
                            "cannot start worker %u of %u: %s", created, n, strerror(e));
            break;
        }
    }
    s->n = created;
    /* wait until every created worker has bound itself (or failed to);
     * acquire pairs with the workers' release increment */
    uint32_t seen;
    while ((seen = atomic_load_explicit(&s->started, memory_order_acquire)) < created)
        hive__futex_wait(&s->started, seen, -1);
    if (rc == HIVE_OK && atomic_load(&s->start_rc) != HIVE_OK)
        rc = hive__fail(atomic_load(&s->start_rc), "%s", s->start_msg);
    if (rc != HIVE_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", hive_last_error());
        hive__sched_stop(s);
        hive__fail(rc, "%s", msg);
    }
    return rc;
}

void hive__sched_stop(hive__sched_t *s)
{
    /* seq_cst: the stop flag plays the job's role in the handshake */
    atomic_store_explicit(&s->stopping, 1, memory_order_seq_cst);
    for (unsigned i = 0; i < s->n; i++)
        wake(s, &s->w[i]);
    for (unsigned i = 0; i < s->n; i++)
        pthread_join(s->w[i].thread, NULL);
    /* nobody runs anymore: hand back what was still queued */
    for (unsigned i = 0; i < s->n; i++) {
        hive__mpsc_node_t *node;
        while ((node = hive__mpsc_pop(&s->w[i].inbox)) != NULL) {
            hive__job_t *job = HIVE_CONTAINER_OF(node, hive__job_t, node);
            job->fn(job, NULL);
        }
    }
    free(s->w);
    s->w = NULL;
    s->n = 0;
}
