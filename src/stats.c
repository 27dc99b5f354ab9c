/*
 * stats.c - hive_stats and hive_worker_stats: the workers' own counters
 * summed on read, queue depths, actor and store figures, trace counts.
 * Also the engine's list of live replay buffers and env pools
 * (obslist.h) and the calls that read it, and the store's size classes.
 * Nothing here runs on a hot path; every load is relaxed (figures for
 * people: a moment's view, no ordering needed with the work they count).
 */
#include "stats.h"
#include "hive_impl.h"
#include "trace.h"
#include "util/clock.h"
#include "util/error.h"

#include <limits.h>
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
    full.actors_restarting = hive__actors_restarting(h);
    copy_out(out, size, &full, sizeof full);
    return HIVE_OK;
}

/* ------------------------------------------------------------ listed records */

void hive__obslist_init(hive__obslist_t *l)
{
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->lock, NULL);
}

void hive__obslist_destroy(hive__obslist_t *l)
{
    pthread_mutex_destroy(&l->lock);
}

void hive__listed_add(struct hive *h, hive__listed_t *n, int kind)
{
    hive__obslist_t *l = &h->listed;
    pthread_mutex_lock(&l->lock);
    n->kind = kind;
    n->id = ++l->made[kind];
    n->next = NULL;
    n->prev = l->tail;
    if (l->tail != NULL)
        l->tail->next = n;
    else
        l->head = n;
    l->tail = n;
    pthread_mutex_unlock(&l->lock);
}

void hive__listed_remove(struct hive *h, hive__listed_t *n)
{
    hive__obslist_t *l = &h->listed;
    pthread_mutex_lock(&l->lock);
    if (n->prev != NULL)
        n->prev->next = n->next;
    else
        l->head = n->next;
    if (n->next != NULL)
        n->next->prev = n->prev;
    else
        l->tail = n->prev;
    pthread_mutex_unlock(&l->lock);
}

/* Write up to max records of kind into out (stride size, of which the
 * library knows full bytes); the count written. */
static int list_kind(hive_t *h, int kind, void *out, size_t max, size_t size, size_t full)
{
    union { hive_replay_info_t r; hive_envpool_info_t e; } buf;
    size_t n = 0, k = size < full ? size : full;
    pthread_mutex_lock(&h->listed.lock);
    for (hive__listed_t *x = h->listed.head; x != NULL && n < max && n < INT_MAX; x = x->next) {
        if (x->kind != kind)
            continue;
        if (kind == HIVE__LISTED_REPLAY)
            hive__replay_info(x, &buf.r);
        else
            hive__envpool_info(x, &buf.e);
        char *dst = (char *)out + n * size;
        memcpy(dst, &buf, k);
        if (size > k)
            memset(dst + k, 0, size - k);
        n++;
    }
    pthread_mutex_unlock(&h->listed.lock);
    return (int)n;
}

static int check_list(hive_t *h, const void *out, size_t max, size_t size, size_t min,
                      const char *fn)
{
    if (h == NULL || (out == NULL && max > 0))
        return hive__fail(HIVE_EINVAL, "%s: %s is NULL", fn, h ? "out" : "engine");
    if (size < min)
        return hive__fail(HIVE_EINVAL, "%s: size %zu is below the struct's first %zu bytes", fn,
                          size, min);
    return HIVE_OK;
}

int hive_replay_list(hive_t *h, hive_replay_info_t *out, size_t max, size_t size)
{
    int rc = check_list(h, out, max, size, sizeof(hive_replay_info_t), "hive_replay_list");
    return rc != HIVE_OK ? rc
                         : list_kind(h, HIVE__LISTED_REPLAY, out, max, size, sizeof *out);
}

int hive_envpool_list(hive_t *h, hive_envpool_info_t *out, size_t max, size_t size)
{
    int rc = check_list(h, out, max, size, sizeof(hive_envpool_info_t), "hive_envpool_list");
    return rc != HIVE_OK ? rc
                         : list_kind(h, HIVE__LISTED_ENVPOOL, out, max, size, sizeof *out);
}

/* ------------------------------------------------------------ size classes */

int hive_store_classes(hive_t *h, hive_size_class_t *out, size_t max)
{
    if (h == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_store_classes: %s is NULL", h ? "out" : "engine");
    hive_size_class_t all[HIVE_STORE_CLASSES];
    hive__arena_classes(&h->arena, all);
    size_t n = max < HIVE_STORE_CLASSES ? max : HIVE_STORE_CLASSES;
    memcpy(out, all, n * sizeof *out);
    return (int)n;
}
