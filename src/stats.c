/*
 * stats.c - hive_stats and hive_worker_stats: the workers' own counters
 * summed on read, queue depths, actor and store figures, trace counts.
 * Nothing here runs on a hot path; every load is relaxed (figures for
 * people: a moment's view, no ordering needed with the work they count).
 */
#include "stats.h"
#include "hive_impl.h"
#include "trace.h"
#include "util/clock.h"
#include "util/error.h"

#include <stddef.h>
#include <string.h>

/* The least a caller's struct must hold: hive_stats up to .total,
 * hive_worker_stats up to .methods. Fields past size are not written. */
#define STATS_MIN  (offsetof(hive_stats_t, total) + sizeof(hive_worker_stats_t))
#define WORKER_MIN (offsetof(hive_worker_stats_t, methods) + sizeof(uint64_t))

static uint64_t load(_Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);   /* a statistic */
}

uint64_t hive__queued(hive__sched_t *s, unsigned lane)
{
    uint64_t n = 0;
    for (unsigned node = 0; node < s->nnodes; node++) {
        hive__ring_t *r = &s->nodes[node].ring[lane];
        size_t put = atomic_load_explicit(&r->put, memory_order_relaxed);
        size_t take = atomic_load_explicit(&r->take, memory_order_relaxed);
        n += put > take ? put - take : 0;       /* read apart: may be off for a moment */
    }
    for (unsigned i = 0; i < s->n; i++) {
        hive__deque_t *d = s->w[i].deque[lane];
        int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
        int64_t t = atomic_load_explicit(&d->top, memory_order_relaxed);
        n += b > t ? (uint64_t)(b - t) : 0;
    }
    return n;
}

static void worker_figures(hive__worker_t *w, uint64_t now, hive_worker_stats_t *o)
{
    uint64_t steals = load(&w->steals), remote = load(&w->remote_steals);
    *o = (hive_worker_stats_t){
        .tasks = load(&w->tasks), .methods = load(&w->methods), .jobs = load(&w->jobs),
        .steals_same_node = steals > remote ? steals - remote : 0, .steals_other_node = remote,
        .stolen_same_node = load(&w->stolen_same), .stolen_other_node = load(&w->stolen_other),
        .parks = load(&w->parks), .wakes = load(&w->woken), .idle_ns = load(&w->idle_ns),
        .help_depth_max = atomic_load_explicit(&w->help_max, memory_order_relaxed),
    };
    uint64_t since = load(&w->idle_since);     /* an idle spell not yet counted */
    if (since != 0 && now > since)
        o->idle_ns += now - since;
    uint64_t up = now > w->start_ns ? now - w->start_ns : 0;
    o->busy_ns = up > o->idle_ns ? up - o->idle_ns : 0;
}

static void add_figures(hive_worker_stats_t *sum, const hive_worker_stats_t *o)
{
    sum->tasks += o->tasks;
    sum->methods += o->methods;
    sum->jobs += o->jobs;
    sum->steals_same_node += o->steals_same_node;
    sum->steals_other_node += o->steals_other_node;
    sum->stolen_same_node += o->stolen_same_node;
    sum->stolen_other_node += o->stolen_other_node;
    sum->parks += o->parks;
    sum->wakes += o->wakes;
    sum->busy_ns += o->busy_ns;
    sum->idle_ns += o->idle_ns;
    if (o->help_depth_max > sum->help_depth_max)
        sum->help_depth_max = o->help_depth_max;
}

/* Copy the first size bytes of what we filled (a caller's older struct). */
static void copy_out(void *out, size_t size, const void *full, size_t full_size)
{
    if (size > full_size) {
        memset((char *)out + full_size, 0, size - full_size);
        size = full_size;
    }
    memcpy(out, full, size);
}

int hive_worker_stats(hive_t *h, unsigned index, hive_worker_stats_t *out, size_t size)
{
    if (h == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_worker_stats: %s is NULL", h ? "out" : "engine");
    if (size < WORKER_MIN)
        return hive__fail(HIVE_EINVAL, "hive_worker_stats: size %zu is below the %zu bytes up to "
                          "methods", size, WORKER_MIN);
    if (index >= h->nworkers)
        return hive__fail(HIVE_EINVAL, "hive_worker_stats: worker %u out of range, engine has %u",
                          index, h->nworkers);
    hive_worker_stats_t full;
    worker_figures(&h->sched.w[index], hive__now_ns(), &full);
    copy_out(out, size, &full, sizeof full);
    return HIVE_OK;
}

int hive_stats(hive_t *h, hive_stats_t *out, size_t size)
{
    if (h == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_stats: %s is NULL", h ? "out" : "engine");
    if (size < STATS_MIN)
        return hive__fail(HIVE_EINVAL, "hive_stats: size %zu is below the %zu bytes up to total",
                          size, STATS_MIN);
    hive_stats_t full = { .workers = h->nworkers, .nodes = h->topo.nnodes };
    uint64_t now = hive__now_ns();
    for (unsigned i = 0; i < h->nworkers; i++) {
        hive_worker_stats_t o;
        worker_figures(&h->sched.w[i], now, &o);
        add_figures(&full.total, &o);
    }
    for (unsigned lane = 0; lane < HIVE_NPRIO; lane++)
        full.queued[lane] = hive__queued(&h->sched, lane);
    hive__actors_count(h, &full.actors_created, &full.actors_alive);
    full.actors_dead = full.actors_created - full.actors_alive;
    int rc = hive_store_stats(h, &full.store);
    if (rc != HIVE_OK)
        return rc;
    hive__trace_counts(&h->trace, &full.trace_events, &full.trace_dropped);
    full.actors_restarts = load(&h->actors.restarts);
    copy_out(out, size, &full, sizeof full);
    return HIVE_OK;
}
