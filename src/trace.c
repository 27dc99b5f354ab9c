/*
 * trace.c - the timeline recorder's slow half: opening the rings, the
 * shared-ring and counter records, and writing Chrome Trace Event JSON
 * (Perfetto and chrome://tracing open it) at shutdown. See trace.h.
 *
 * The file: one process (pid), one track (tid i + 1) per worker i named with
 * its node, core and PU, one per other thread that submitted (2^24 + its
 * kernel id), and tid 0 for the engine's counters. Tasks and
 * methods are complete ("X") spans; submits and calls are short spans on
 * the submitting thread's track with a flow ("s" -> "f") to the span where
 * the work ran; steals, parks and wakes are instants ("i"); store and
 * queue figures are counters ("C"). Timestamps are microseconds since the
 * engine started, printed with nanosecond precision.
 */
#include "trace.h"
#include "hive_impl.h"
#include "stats.h"
#include "util/error.h"
#include "util/fault.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_EVENTS  65536u
#define MAX_EVENTS      ((uint64_t)1 << 24)

static uint64_t ring_capacity(void)
{
    const char *s = getenv("HIVE_TRACE_EVENTS");
    uint64_t want = DEFAULT_EVENTS, cap = 16;
    if (s != NULL && *s != '\0') {
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (*end == '\0' && v > 0)
            want = v < MAX_EVENTS ? v : MAX_EVENTS;
    }
    while (cap < want)
        cap <<= 1;
    return cap;
}

int hive__trace_open(hive__trace_t *t, const char *path, unsigned nworkers)
{
    memset(t, 0, sizeof *t);
    if (path == NULL)
        path = getenv("HIVE_TRACE");
    if (path == NULL || *path == '\0')
        return HIVE_OK;
    uint64_t cap = ring_capacity();
    size_t nrings = (size_t)nworkers + 1, nev, bytes;
    if (__builtin_mul_overflow(nrings, (size_t)cap, &nev) ||
        __builtin_mul_overflow(nev, sizeof(hive__tev_t), &bytes))
        return hive__fail(HIVE_EINVAL, "hive_init: a trace of %zu rings of %" PRIu64
                          " events overflows", nrings, cap);
    t->path = strdup(path);
    t->rings = hive__calloc(nrings, sizeof *t->rings);
    t->events = hive__malloc(bytes);     /* large: mapped lazily, pages cost when used */
    if (t->path == NULL || t->rings == NULL || t->events == NULL) {
        free(t->path);
        free(t->rings);
        free(t->events);
        memset(t, 0, sizeof *t);
        return hive__fail(HIVE_ENOMEM, "hive_init: cannot allocate the trace rings (%zu bytes)",
                          bytes);
    }
    t->out = fopen(path, "w");
    if (t->out == NULL) {
        int e = errno;
        free(t->path);
        free(t->rings);
        free(t->events);
        memset(t, 0, sizeof *t);
        return hive__fail(HIVE_EINVAL, "hive_init: cannot open the trace file \"%s\": %s",
                          path, strerror(e));
    }
    for (size_t i = 0; i < nrings; i++) {
        t->rings[i].ev = t->events + i * cap;
        t->rings[i].mask = cap - 1;
        atomic_init(&t->rings[i].head, 0);
    }
    t->nworkers = nworkers;
    t->on = true;
    return HIVE_OK;
}

/* The calling thread's kernel id (one system call per thread, then cached):
 * other threads' events carry it, so each gets a track of its own. */
static uint32_t thread_id(void)
{
    static __thread uint32_t tid;
    if (tid == 0)
        tid = (uint32_t)gettid() & 0x7fffffffu;
    return tid;
}

void hive__trace_submit(struct hive *h, uint64_t t0, uint64_t id, const void *a, const void *b,
                        bool call)
{
    hive__worker_t *w = hive__self_in(&h->sched);
    hive__tring_t *r = w != NULL ? w->tring : &h->trace.rings[h->trace.nworkers];
    uint32_t arg = (uint32_t)call | (w != NULL ? 0 : thread_id() << 1);
    hive__trace_put(r, w == NULL, HIVE__TEV_SUBMIT, t0, hive__now_ns() - t0, id, a, b, arg);
}

void hive__trace_counters(struct hive *h, hive__tring_t *r)
{
    uint64_t now = hive__now_ns();
    if (now - r->sampled < 1000000u)
        return;
    r->sampled = now;
    /* relaxed: figures for a picture, no ordering needed */
    uint64_t used = atomic_load_explicit(&h->arena.used, memory_order_relaxed);
    uint64_t objects = atomic_load_explicit(&h->store.objects, memory_order_relaxed);
    hive__trace_put(r, false, HIVE__TEV_STORE, now, objects, used, NULL, NULL, 0);
    uint64_t q[HIVE_NPRIO];
    for (unsigned lane = 0; lane < HIVE_NPRIO; lane++)
        q[lane] = hive__queued(&h->sched, lane);
    hive__trace_put(r, false, HIVE__TEV_QUEUE, now, q[1], q[0], NULL, NULL,
                    q[2] > UINT32_MAX ? UINT32_MAX : (uint32_t)q[2]);
}

void hive__trace_counts(hive__trace_t *t, uint64_t *recorded, uint64_t *dropped)
{
    *recorded = *dropped = 0;
    for (unsigned i = 0; t->on && i <= t->nworkers; i++) {
        /* relaxed: a count for statistics */
        uint64_t n = atomic_load_explicit(&t->rings[i].head, memory_order_relaxed);
        uint64_t cap = t->rings[i].mask + 1;
        *recorded += n;
        *dropped += n > cap ? n - cap : 0;
    }
}

/* ------------------------------------------------------------ writing */

/* s, escaped for a JSON string (without the quotes). */
static void put_escaped(FILE *f, const char *s)
{
    for (s = s ? s : "?"; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\' || c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

/* A task's name: its option name, else the function's symbol, else its address. */
static void put_task_name(FILE *f, const hive__tev_t *e)
{
    if (e->a != NULL) {
        put_escaped(f, e->a);
        return;
    }
    Dl_info info;
    void *fn;
    memcpy(&fn, &e->b, sizeof fn);
    if (dladdr(fn, &info) != 0 && info.dli_sname != NULL)
        put_escaped(f, info.dli_sname);
    else
        fprintf(f, "task@%p", fn);
}

/* "prefix Class.method" for calls, "prefix name" for tasks, quoted. */
static void put_name(FILE *f, const char *prefix, const hive__tev_t *e, bool call)
{
    fprintf(f, "\"%s", prefix);
    if (call) {
        put_escaped(f, e->a);
        fputc('.', f);
        put_escaped(f, e->b);
    } else {
        put_task_name(f, e);
    }
    fputc('"', f);
}

static void put_ts(FILE *f, const char *key, uint64_t ns)
{
    fprintf(f, ",\"%s\":%" PRIu64 ".%03" PRIu64, key, ns / 1000, ns % 1000);
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static bool has_id(const uint64_t *ids, size_t n, uint64_t id)
{
    return n > 0 && bsearch(&id, ids, n, sizeof *ids, cmp_u64) != NULL;
}

typedef struct writer {
    FILE     *f;
    int       pid;
    uint64_t  epoch;
    bool      first;
    uint64_t *starts, *ends;          /* sorted flow ids of submits and of runs kept */
    size_t    nstarts, nends;
} writer_t;

static void begin_event(writer_t *w, const char *ph, unsigned tid, uint64_t ts)
{
    fprintf(w->f, "%s\n{\"ph\":\"%s\",\"pid\":%d,\"tid\":%u", w->first ? "" : ",", ph, w->pid, tid);
    put_ts(w->f, "ts", ts - w->epoch);
    w->first = false;
}

static void write_event(writer_t *w, unsigned tid, const hive__tev_t *e)
{
    FILE *f = w->f;
    switch (e->kind) {
    case HIVE__TEV_TASK:
    case HIVE__TEV_METHOD:
    case HIVE__TEV_SUBMIT: {
        bool submit = e->kind == HIVE__TEV_SUBMIT;
        bool call = e->kind == HIVE__TEV_METHOD || (submit && (e->arg & 1));
        begin_event(w, "X", tid, e->ts);
        put_ts(f, "dur", e->dur);
        fprintf(f, ",\"cat\":\"%s\",\"name\":", submit ? (call ? "call" : "submit")
                                                       : (call ? "method" : "task"));
        put_name(f, submit ? (call ? "call " : "submit ") : "", e, call);
        if (submit)
            fprintf(f, ",\"args\":{\"id\":%" PRIu64 "}}", e->id);
        else
            fprintf(f, ",\"args\":{\"id\":%" PRIu64 ",\"depth\":%u}}", e->id, e->arg);
        bool flow = submit ? has_id(w->ends, w->nends, e->id) : has_id(w->starts, w->nstarts, e->id);
        if (flow) {
            begin_event(w, submit ? "s" : "f", tid, e->ts);
            fprintf(f, ",\"cat\":\"flow\",\"name\":\"run\",\"id\":%" PRIu64 "%s}", e->id,
                    submit ? "" : ",\"bp\":\"e\"");
        }
        break;
    }
    case HIVE__TEV_PARKED:
        begin_event(w, "X", tid, e->ts);
        put_ts(f, "dur", e->dur);
        fputs(",\"cat\":\"idle\",\"name\":\"parked\"}", f);
        break;
    case HIVE__TEV_STEAL:
        begin_event(w, "i", tid, e->ts);
        fprintf(f, ",\"s\":\"t\",\"cat\":\"sched\",\"name\":\"steal\",\"args\":{\"from\":%u}}", e->arg);
        break;
    case HIVE__TEV_PARK:
    case HIVE__TEV_WAKE:
        begin_event(w, "i", tid, e->ts);
        fprintf(f, ",\"s\":\"t\",\"cat\":\"sched\",\"name\":\"%s\"}",
                e->kind == HIVE__TEV_PARK ? "park" : "wake");
        break;
    case HIVE__TEV_STORE:
        begin_event(w, "C", 0, e->ts);
        fprintf(f, ",\"name\":\"store\",\"args\":{\"used_bytes\":%" PRIu64 ",\"objects\":%" PRIu64
                "}}", e->id, e->dur);
        break;
    case HIVE__TEV_QUEUE:
        begin_event(w, "C", 0, e->ts);
        fprintf(f, ",\"name\":\"queued\",\"args\":{\"high\":%" PRIu64 ",\"normal\":%" PRIu64
                ",\"low\":%u}}", e->id, e->dur, e->arg);
        break;
    default:
        break;
    }
}

/* The events of ring r still held, oldest first: [*from, head). */
static uint64_t ring_first(const hive__tring_t *r)
{
    /* relaxed: the writers were joined before (hive_shutdown) */
    uint64_t n = atomic_load_explicit(&r->head, memory_order_relaxed);
    return n > r->mask + 1 ? n - (r->mask + 1) : 0;
}

/* Sorted flow ids: of submits (starts) and of runs (ends) still held. */
static int collect_flows(hive__trace_t *t, writer_t *w)
{
    size_t total = 0;
    for (unsigned i = 0; i <= t->nworkers; i++)
        total += atomic_load_explicit(&t->rings[i].head, memory_order_relaxed) - ring_first(&t->rings[i]);
    w->starts = hive__malloc((total ? total : 1) * sizeof *w->starts);
    w->ends = hive__malloc((total ? total : 1) * sizeof *w->ends);
    if (w->starts == NULL || w->ends == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_shutdown: cannot sort the %zu trace events", total);
    for (unsigned i = 0; i <= t->nworkers; i++) {
        const hive__tring_t *r = &t->rings[i];
        uint64_t end = atomic_load_explicit(&r->head, memory_order_relaxed);
        for (uint64_t k = ring_first(r); k < end; k++) {
            const hive__tev_t *e = &r->ev[k & r->mask];
            if (e->kind == HIVE__TEV_SUBMIT)
                w->starts[w->nstarts++] = e->id;
            else if (e->kind == HIVE__TEV_TASK || e->kind == HIVE__TEV_METHOD)
                w->ends[w->nends++] = e->id;
        }
    }
    qsort(w->starts, w->nstarts, sizeof *w->starts, cmp_u64);
    qsort(w->ends, w->nends, sizeof *w->ends, cmp_u64);
    return HIVE_OK;
}

static uint64_t earliest(hive__trace_t *t)
{
    uint64_t min = UINT64_MAX;
    for (unsigned i = 0; i <= t->nworkers; i++) {
        const hive__tring_t *r = &t->rings[i];
        uint64_t end = atomic_load_explicit(&r->head, memory_order_relaxed);
        for (uint64_t k = ring_first(r); k < end; k++)
            if (r->ev[k & r->mask].ts < min)
                min = r->ev[k & r->mask].ts;
    }
    return min == UINT64_MAX ? 0 : min;
}

/* Tracks of threads that are no workers: apart from the workers' 1..n. */
static unsigned other_tid(uint32_t os_tid)
{
    return (1u << 24) + os_tid;
}

/* A name for each other thread that submitted (sorted, each once). */
static void write_other_tracks(writer_t *w, hive__trace_t *t)
{
    const hive__tring_t *r = &t->rings[t->nworkers];
    uint64_t end = atomic_load_explicit(&r->head, memory_order_relaxed), n = 0;
    uint64_t *tids = hive__malloc((end - ring_first(r) + 1) * sizeof *tids);
    if (tids == NULL)
        return;
    for (uint64_t k = ring_first(r); k < end; k++)
        tids[n++] = r->ev[k & r->mask].arg >> 1;
    qsort(tids, n, sizeof *tids, cmp_u64);
    for (uint64_t k = 0; k < n; k++) {
        if (k > 0 && tids[k] == tids[k - 1])
            continue;
        begin_event(w, "M", other_tid((uint32_t)tids[k]), w->epoch);
        fprintf(w->f, ",\"name\":\"thread_name\",\"args\":{\"name\":\"thread %" PRIu64 "\"}}",
                tids[k]);
    }
    free(tids);
}

static void write_tracks(writer_t *w, struct hive *h, unsigned nworkers)
{
    begin_event(w, "M", 0, w->epoch);
    fputs(",\"name\":\"process_name\",\"args\":{\"name\":\"hive\"}}", w->f);
    begin_event(w, "M", 0, w->epoch);
    fputs(",\"name\":\"thread_name\",\"args\":{\"name\":\"engine counters\"}}", w->f);
    for (unsigned i = 0; i < nworkers; i++) {
        const hive__slot_t *s = hive__topo_slot(&h->topo, i);
        begin_event(w, "M", i + 1, w->epoch);
        fprintf(w->f, ",\"name\":\"thread_name\",\"args\":{\"name\":\"worker %u (node %u, core %u, "
                "pu %u)\"}}", i, s->node, s->core, s->pu);
        begin_event(w, "M", i + 1, w->epoch);
        fprintf(w->f, ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%u}}", i + 1);
    }
}

int hive__trace_close(hive__trace_t *t, struct hive *h)
{
    if (!t->on)
        return HIVE_OK;
    writer_t w = { .f = t->out, .pid = (int)getpid(), .first = true };
    int rc = collect_flows(t, &w);
    if (rc == HIVE_OK) {
        w.epoch = earliest(t);
        fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", w.f);
        write_tracks(&w, h, t->nworkers);
        write_other_tracks(&w, t);
        for (unsigned i = 0; i <= t->nworkers; i++) {
            const hive__tring_t *r = &t->rings[i];
            uint64_t end = atomic_load_explicit(&r->head, memory_order_relaxed);
            for (uint64_t k = ring_first(r); k < end; k++) {
                const hive__tev_t *e = &r->ev[k & r->mask];
                write_event(&w, i < t->nworkers ? i + 1 : other_tid(e->arg >> 1), e);
            }
        }
        uint64_t recorded, dropped;
        hive__trace_counts(t, &recorded, &dropped);
        fprintf(w.f, "\n],\"otherData\":{\"recorded\":%" PRIu64 ",\"dropped\":%" PRIu64
                ",\"events_per_ring\":%" PRIu64 "}}\n", recorded, dropped, t->rings[0].mask + 1);
    }
    bool bad = ferror(t->out) != 0;
    if (fclose(t->out) != 0)
        bad = true;
    if (rc == HIVE_OK && bad)
        rc = hive__fail(HIVE_EINVAL, "hive_shutdown: could not write the trace file \"%s\"", t->path);
    free(w.starts);
    free(w.ends);
    free(t->path);
    free(t->rings);
    free(t->events);
    memset(t, 0, sizeof *t);
    return rc;
}
