/*
 * bench_trace.c - what the timeline recorder costs (issue 12: off nothing
 * measurable, on at most 50 ns per event). Rows, all in one run:
 *
 *   trace_event/off   the hook of a span with recording off: a branch on a
 *                     NULL ring pointer, as every hook site has (ns/event)
 *   trace_event/on    the same hook recording: a clock read at the start,
 *                     one at the end, the event stored in a ring (ns/event);
 *                     on - off is the recording cost per event
 *   trace_tasks/off   1000 empty tasks submitted then got, an engine without
 *   trace_tasks/on    a timeline and one with (its file in build/bench/);
 *                     a traced task records two spans (submit and run), so
 *                     (on - off) / 2 is the per-event cost in real use
 *
 * The ring of the event rows is the recorder's own (trace.h), 65536 events,
 * wrapping as a full ring does.
 */
#include "shim.h"
#include "benches.h"

#include <hive.h>
#include "trace.h"
#include "util/common.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENTS_PER_ITER 1000
#define RING            65536u
#define TASKS           1000

static hive__tring_t *volatile ring_on;     /* volatile: the compiler cannot fold the branch */
static hive__tring_t *volatile ring_off;

static hive__tring_t *bench_ring(void)
{
    static hive__tring_t r;
    hive__trace_choose_clock();                    /* the TSC where invariant, as trace_open */
    if (r.ev == NULL) {
        if (hive__posix_memalign((void **)&r.ev, 64, RING * sizeof *r.ev) != 0)
            abort();
        memset(r.ev, 0, RING * sizeof *r.ev);
        r.mask = RING - 1;
    }
    return &r;
}

/* EVENTS_PER_ITER hook sites, each as run_task has it: the ring pointer
 * loaded anew for each (as w->tring is), so the off row pays its branch. */
static void hooks(hive__tring_t *volatile *rp, uint64_t *sink)
{
    for (int i = 0; i < EVENTS_PER_ITER; i++) {
        hive__tring_t *r = *rp;
        uint64_t t0 = unlikely(r != NULL) ? hive__trace_clock() : 0;
        *sink += (uint64_t)i;                      /* the "work" of the span */
        if (unlikely(r != NULL))
            hive__trace_span(r, HIVE__TEV_TASK, t0, (uint64_t)i, NULL, NULL, 0);
    }
}

static void bm_event(hb_state *s, hive__tring_t *volatile *rp)
{
    uint64_t sink = 0;
    while (hb_keep_running(s))
        hooks(rp, &sink);
    if (sink == 1)
        printf("-");                               /* keep sink alive */
    hb_set_items_processed(s, hb_iterations(s) * EVENTS_PER_ITER);
}

static void bm_event_off(hb_state *s)
{
    ring_off = NULL;
    bm_event(s, &ring_off);
}

static void bm_event_on(hb_state *s)
{
    ring_on = bench_ring();
    bm_event(s, &ring_on);
}

static int empty(hive_ctx_t *ctx)
{
    (void)ctx;
    return 0;
}

static void bm_tasks(hb_state *s, const char *trace)
{
    hive_config_t cfg = { .store_bytes = 256u << 20, .trace_path = trace };
    hive_t *h;
    if (hive_init(&cfg, &h) != HIVE_OK) {
        hb_skip_with_error(s, hive_last_error());
        return;
    }
    static hive_ref_t r[TASKS];
    while (hb_keep_running(s)) {
        for (int i = 0; i < TASKS; i++)
            if (hive_submit(h, empty, NULL, 0, NULL, &r[i]) != HIVE_OK) {
                hb_skip_with_error(s, hive_last_error());
                break;
            }
        for (int i = 0; i < TASKS; i++) {
            const void *p;
            size_t n;
            hive_get(h, r[i], HIVE_FOREVER, &p, &n);
            hive_release(h, r[i]);
        }
    }
    hive_shutdown(h);
    hb_set_items_processed(s, hb_iterations(s) * TASKS);
}

static void bm_tasks_off(hb_state *s)
{
    bm_tasks(s, NULL);
}

static void bm_tasks_on(hb_state *s)
{
    bm_tasks(s, "build/bench/trace-bench.json");
}

const hb_bench hb_trace_benches[] = {
    {"trace_event/off", bm_event_off, 0, 0, NULL, 0, NULL, HB_NS, 0},
    {"trace_event/on", bm_event_on, 0, 0, NULL, 0, NULL, HB_NS, 0},
    {"trace_tasks/off", bm_tasks_off, 0, 0, NULL, 0, NULL, HB_US, 0},
    {"trace_tasks/on", bm_tasks_on, 0, 0, NULL, 0, NULL, HB_US, 0},
};
const size_t hb_trace_nbenches = HIVE_ARRAY_LEN(hb_trace_benches);
