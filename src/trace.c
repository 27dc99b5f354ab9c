/*
 * trace.c - the timeline recorder's slow half: opening the rings, the
 * shared-ring and counter records, and writing Chrome Trace Event JSON
 * (Perfetto and chrome://tracing open it) at shutdown or on
 * hive_trace_flush, from a consistent copy of the rings (see trace.h).
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
#include "util/seqlock.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <math.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define DEFAULT_EVENTS  65536u
#define MAX_EVENTS      ((uint64_t)1 << 24)

_Atomic bool hive__trace_tsc;
static pthread_once_t tsc_once = PTHREAD_ONCE_INIT;

/* Use the TSC if the CPU says it is invariant (constant rate in every
 * P-, C- and T-state, as Linux's constant_tsc + nonstop_tsc), unless
 * HIVE_TRACE_CLOCK=monotonic asks for the system clock. */
static void choose_clock(void)
{
    bool tsc = false;
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000007u &&
        __get_cpuid(0x80000007u, &a, &b, &c, &d))
        tsc = (d & (1u << 8)) != 0;
#endif
    const char *s = getenv("HIVE_TRACE_CLOCK");
    if (s != NULL && strcmp(s, "monotonic") == 0)
        tsc = false;
    /* relaxed: pthread_once orders this before every reader's first use */
    atomic_store_explicit(&hive__trace_tsc, tsc, memory_order_relaxed);
}

void hive__trace_choose_clock(void)
{
    pthread_once(&tsc_once, choose_clock);
}

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

static void free_rings(hive__trace_t *t)
{
    free(t->path);
    free(t->rings);
    if (t->events != NULL)
        munmap(t->events, t->events_bytes);
    memset(t, 0, sizeof *t);
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
    /* anonymous pages: zero (seq 0: never written, what a reader skips)
     * and touched only as events fill them */
    void *ev = hive__fault() ? MAP_FAILED : mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    t->events = ev == MAP_FAILED ? NULL : ev;
    t->events_bytes = bytes;
    if (t->path == NULL || t->rings == NULL || t->events == NULL) {
        free_rings(t);
        return hive__fail(HIVE_ENOMEM, "hive_init: cannot allocate the trace rings (%zu bytes)",
                          bytes);
    }
    t->out = fopen(path, "w");
    if (t->out == NULL) {
        int e = errno;
        free_rings(t);
        return hive__fail(HIVE_EINVAL, "hive_init: cannot open the trace file \"%s\": %s",
                          path, strerror(e));
    }
    for (size_t i = 0; i < nrings; i++) {
        t->rings[i].ev = t->events + i * cap;
        t->rings[i].mask = cap - 1;
        atomic_init(&t->rings[i].head, 0);
    }
    hive__trace_choose_clock();
    t->ns0 = hive__now_ns();
    t->tick0 = hive__trace_clock();
    pthread_mutex_init(&t->write_lock, NULL);
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
    hive__trace_put(r, w == NULL, HIVE__TEV_SUBMIT, t0, hive__trace_clock() - t0, id, a, b, arg);
}

void hive__trace_counters(struct hive *h, hive__tring_t *r)
{
    uint64_t now = hive__now_ns();
    if (now - r->sampled < 1000000u)
        return;
    r->sampled = now;
    uint64_t ts = hive__trace_clock();
    /* relaxed: figures for a picture, no ordering needed */
    uint64_t used = hive__store_used(h);
    uint64_t objects = hive__store_objects(h);
    hive__trace_put(r, false, HIVE__TEV_STORE, ts, objects, used, NULL, NULL, 0);
    uint64_t q[HIVE_NPRIO];
    for (unsigned lane = 0; lane < HIVE_NPRIO; lane++)
        q[lane] = hive__queued(&h->sched, lane);
    hive__trace_put(r, false, HIVE__TEV_QUEUE, ts, q[1], q[0], NULL, NULL,
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

/* ------------------------------------------------------------ the copy */

typedef struct tev {         /* an event copied out of a ring, in ns */
    uint64_t    ts, dur, id;
    const void *a, *b;
    uint32_t    kind, arg;
    unsigned    ring;
} tev_t;

typedef struct snapshot {
    tev_t   *ev;
    size_t   n;
    uint64_t skipped;        /* slots being written while copied (or never written) */
    uint64_t tick0, ns0;     /* the line from ticks to ns: ns0 + (tick - tick0) * scale */
    double   scale;
} snapshot_t;

static uint64_t to_ns(const snapshot_t *s, uint64_t tick)
{
    double d = (double)(int64_t)(tick - s->tick0) * s->scale;
    return s->ns0 + (uint64_t)llround(d);
}

/* Copy event k of r into o if it is whole (the reader's half of the
 * seqlock in trace.h): false if it is being written or was overwritten. */
static bool copy_event(const hive__tring_t *r, uint64_t k, tev_t *o)
{
    hive__tev_t *e = &r->ev[k & r->mask];
    /* acquire: pairs with the writer's release store of seq, so the fields
     * of that write are visible */
    if (atomic_load_explicit(&e->seq, memory_order_acquire) != k + 1)
        return false;
    /* relaxed: the fence and the second look tell a torn copy */
    uint64_t ts = atomic_load_explicit(&e->ts, memory_order_relaxed);
    uint64_t dur = atomic_load_explicit(&e->dur, memory_order_relaxed);
    uint64_t id = atomic_load_explicit(&e->id, memory_order_relaxed);
    uint64_t a = atomic_load_explicit(&e->a, memory_order_relaxed);
    uint64_t b = atomic_load_explicit(&e->b, memory_order_relaxed);
    uint64_t ka = atomic_load_explicit(&e->kind_arg, memory_order_relaxed);
    /* acquire fence, then the second look (seqlock.h): the loads above come
     * before it, so a writer that began since (seq 0, release fence) shows */
    if (hive__seq_reread(&e->seq) != k + 1)
        return false;
    *o = (tev_t){ .ts = ts, .dur = dur, .id = id, .a = (const void *)(uintptr_t)a,
                  .b = (const void *)(uintptr_t)b, .kind = (uint32_t)ka,
                  .arg = (uint32_t)(ka >> 32) };
    return true;
}

/* Every whole event the rings hold now, times turned into ns. */
static int take_snapshot(hive__trace_t *t, snapshot_t *s, const char *fn)
{
    memset(s, 0, sizeof *s);
    uint64_t heads[t->nworkers + 1];
    size_t total = 0;
    for (unsigned i = 0; i <= t->nworkers; i++) {
        const hive__tring_t *r = &t->rings[i];
        /* relaxed: which slots to look at; each event's seq says if it is whole */
        heads[i] = atomic_load_explicit(&r->head, memory_order_relaxed);
        total += heads[i] > r->mask + 1 ? r->mask + 1 : heads[i];
    }
    s->ev = hive__malloc((total ? total : 1) * sizeof *s->ev);
    if (s->ev == NULL)
        return hive__fail(HIVE_ENOMEM, "%s: cannot copy the %zu trace events", fn, total);
    for (unsigned i = 0; i <= t->nworkers; i++) {
        const hive__tring_t *r = &t->rings[i];
        uint64_t first = heads[i] > r->mask + 1 ? heads[i] - (r->mask + 1) : 0;
        for (uint64_t k = first; k < heads[i]; k++) {
            if (!copy_event(r, k, &s->ev[s->n])) {
                s->skipped++;
                continue;
            }
            s->ev[s->n++].ring = i;
        }
    }
    uint64_t ns1 = hive__now_ns(), tick1 = hive__trace_clock();
    s->tick0 = t->tick0;
    s->ns0 = t->ns0;
    /* relaxed: set once before the recorder opened */
    s->scale = atomic_load_explicit(&hive__trace_tsc, memory_order_relaxed) && tick1 > t->tick0 &&
               ns1 > t->ns0 ? (double)(ns1 - t->ns0) / (double)(tick1 - t->tick0) : 1.0;
    for (size_t k = 0; k < s->n; k++) {
        tev_t *e = &s->ev[k];
        uint64_t start = to_ns(s, e->ts);
        bool value = e->kind == HIVE__TEV_STORE || e->kind == HIVE__TEV_QUEUE;   /* dur: a figure */
        if (!value)
            e->dur = to_ns(s, e->ts + e->dur) - start;
        e->ts = start;
    }
    return HIVE_OK;
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
static void put_task_name(FILE *f, const tev_t *e)
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
static void put_name(FILE *f, const char *prefix, const tev_t *e, bool call)
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

static void write_event(writer_t *w, unsigned tid, const tev_t *e)
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
    case HIVE__TEV_WAIT:
        begin_event(w, "X", tid, e->ts);
        put_ts(f, "dur", e->dur);
        fprintf(f, ",\"cat\":\"wait\",\"name\":\"wait\",\"args\":{\"for\":%" PRIu64 ",\"depth\":%u}}",
                e->id, e->arg);
        break;
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

/* Sorted flow ids: of submits (starts) and of runs (ends) in the copy. */
static int collect_flows(const snapshot_t *s, writer_t *w, const char *fn)
{
    w->starts = hive__malloc((s->n ? s->n : 1) * sizeof *w->starts);
    w->ends = hive__malloc((s->n ? s->n : 1) * sizeof *w->ends);
    if (w->starts == NULL || w->ends == NULL)
        return hive__fail(HIVE_ENOMEM, "%s: cannot sort the %zu trace events", fn, s->n);
    for (size_t k = 0; k < s->n; k++) {
        const tev_t *e = &s->ev[k];
        if (e->kind == HIVE__TEV_SUBMIT)
            w->starts[w->nstarts++] = e->id;
        else if (e->kind == HIVE__TEV_TASK || e->kind == HIVE__TEV_METHOD)
            w->ends[w->nends++] = e->id;
    }
    qsort(w->starts, w->nstarts, sizeof *w->starts, cmp_u64);
    qsort(w->ends, w->nends, sizeof *w->ends, cmp_u64);
    return HIVE_OK;
}

static uint64_t earliest(const snapshot_t *s)
{
    uint64_t min = UINT64_MAX;
    for (size_t k = 0; k < s->n; k++)
        if (s->ev[k].ts < min)
            min = s->ev[k].ts;
    return min == UINT64_MAX ? 0 : min;
}

/* Tracks of threads that are no workers: apart from the workers' 1..n. */
static unsigned other_tid(uint32_t os_tid)
{
    return (1u << 24) + os_tid;
}

/* The track of an event copied from ring `ring` of a trace of nworkers. */
static unsigned track_of(const tev_t *e, unsigned nworkers)
{
    return e->ring < nworkers ? e->ring + 1 : other_tid(e->arg >> 1);
}

/* A name for each other thread that submitted (sorted, each once). */
static void write_other_tracks(writer_t *w, const snapshot_t *s, unsigned nworkers)
{
    uint64_t *tids = hive__malloc((s->n + 1) * sizeof *tids), n = 0;
    if (tids == NULL)
        return;
    for (size_t k = 0; k < s->n; k++)
        if (s->ev[k].ring == nworkers)
            tids[n++] = s->ev[k].arg >> 1;
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

/* The whole file from a copy of the rings, over what t->out held. */
static int write_file(hive__trace_t *t, struct hive *h, const char *fn)
{
    snapshot_t s;
    writer_t w = { .f = t->out, .pid = (int)getpid(), .first = true };
    int rc = take_snapshot(t, &s, fn);
    if (rc == HIVE_OK)
        rc = collect_flows(&s, &w, fn);
    if (rc == HIVE_OK) {
        /* start over: a flush before this one wrote a shorter timeline */
        fflush(t->out);
        rewind(t->out);
        if (ftruncate(fileno(t->out), 0) != 0)
            clearerr(t->out), rc = HIVE_EINVAL;
    }
    if (rc == HIVE_OK) {
        w.epoch = earliest(&s);
        fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", w.f);
        write_tracks(&w, h, t->nworkers);
        write_other_tracks(&w, &s, t->nworkers);
        for (size_t k = 0; k < s.n; k++)
            write_event(&w, track_of(&s.ev[k], t->nworkers), &s.ev[k]);
        uint64_t recorded, dropped;
        hive__trace_counts(t, &recorded, &dropped);
        fprintf(w.f, "\n],\"otherData\":{\"recorded\":%" PRIu64 ",\"dropped\":%" PRIu64
                ",\"skipped\":%" PRIu64 ",\"events_per_ring\":%" PRIu64 ",\"clock\":\"%s\"}}\n",
                recorded, dropped, s.skipped, t->rings[0].mask + 1,
                s.scale != 1.0 ? "tsc" : "monotonic");
        if (fflush(t->out) != 0 || ferror(t->out))
            rc = HIVE_EINVAL;
        if (rc != HIVE_OK)
            rc = hive__fail(HIVE_EINVAL, "%s: could not write the trace file \"%s\"", fn, t->path);
    } else if (rc == HIVE_EINVAL) {
        rc = hive__fail(HIVE_EINVAL, "%s: could not truncate the trace file \"%s\"", fn, t->path);
    }
    free(w.starts);
    free(w.ends);
    free(s.ev);
    return rc;
}

int hive_trace_flush(hive_t *h)
{
    if (h == NULL)
        return hive__fail(HIVE_EINVAL, "hive_trace_flush: engine is NULL");
    hive__trace_t *t = &h->trace;
    if (!t->on)
        return hive__fail(HIVE_ESTATE, "hive_trace_flush: no timeline is being recorded "
                          "(no trace_path, no HIVE_TRACE)");
    pthread_mutex_lock(&t->write_lock);
    int rc = write_file(t, h, "hive_trace_flush");
    pthread_mutex_unlock(&t->write_lock);
    return rc;
}

int hive__trace_close(hive__trace_t *t, struct hive *h)
{
    if (!t->on)
        return HIVE_OK;
    int rc = write_file(t, h, "hive_shutdown");
    if (fclose(t->out) != 0 && rc == HIVE_OK)
        rc = hive__fail(HIVE_EINVAL, "hive_shutdown: could not write the trace file \"%s\"", t->path);
    pthread_mutex_destroy(&t->write_lock);
    free_rings(t);
    return rc;
}
