/*
 * task.c - tasks: submit, dependency counting, run, cancel, context.
 *
 * Life of a task:
 *   submit   the record is built (inline args copied, ref args counted), the
 *            result object is created PENDING and published, and for every
 *            ref argument still pending a dep node is hung on that object;
 *            `pending` counts them plus one guard held by submit itself.
 *   ready    when the last dep fires (or at once, if none was pending) the
 *            task is spawned on the scheduler; if a dependency failed it
 *            never runs and its result fails with HIVE_ETASK.
 *   run      a worker claims the result (QUEUED -> RUNNING); a cancel that
 *            got there first (QUEUED -> CANCELLED) already failed it. The
 *            function runs; its return value seals or fails the result.
 *   cleanup  argument counts and the task's count on the result are dropped,
 *            and the record goes back to the pool.
 *
 * Small tasks: a task whose arguments are all inline and few (up to
 * HIVE__QTASK_NARGS of them, their bytes in 8-byte steps up to
 * HIVE__QTASK_ARGS), with no name and at most 255 retries, has no record of
 * its own: its whole queued body (store.h, hive__qtask_t: the job link,
 * the function, the engine, a packed word, the argument bytes) lives in
 * the inline payload of its result record, the second cache line, which a
 * pending result does not use. A queued small task is thus its result
 * record and nothing else. Its job (small_job) unpacks the function and
 * the arguments onto the worker's stack first, so the function may write
 * its result into those same bytes (hive_return from a pointer hive_arg
 * gave it included); then the run is the same as a full record's. Nobody
 * else reads the body: only the one worker that took the job, and the
 * bytes turn into a payload (or the record's dead fields) only after it.
 * Everything else - ref arguments (dep nodes), names, more or larger
 * arguments, actor calls - takes a full record (hive__task_t) from the pool.
 *
 * Nested waits: hive_get / hive_wait inside a task call the store's help
 * hook (hive__task_help) instead of sleeping, which runs another ready job
 * on the same worker, nested on its stack. This keeps every core busy and
 * makes nested gets deadlock-free with one worker for the patterns of
 * fork-join and pipelines: the awaited task is either queued (then some
 * worker, maybe this one, runs it) or running on another worker. Nesting
 * deepens the stack; past a stack's worth the worker moves to a spare
 * thread (sched.c, "deep nesting"), so recursion depth is bounded by memory.
 * The limit, said plainly: a task that waits for a task suspended *below it
 * on the same worker* cannot make progress until that one resumes - e.g. a
 * child that itself blocks on its parent's result.
 */
#include "task.h"
#include "arena.h"
#include "ds/pool.h"
#include "hive_impl.h"
#include "util/error.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

static char zero_arg[64] __attribute__((aligned(64)));

static void task_job(hive__job_t *job, hive__worker_t *w);
static void small_job(hive__job_t *job, hive__worker_t *w);

_Static_assert(sizeof(hive__qtask_t) <= HIVE__INLINE_MAX, "a small task's body fits the inline payload");
_Static_assert(HIVE__QTASK_ARGS < 32, "an argument's size fits 5 bits of the packed word");

static void free_record(hive__task_t *t)
{
    if (t->bytes <= HIVE_POOL_MAX)
        hive__pool_free(t, t->bytes);
    else
        free(t);
}

/* Drop what the task holds: its argument counts, its count on the result. */
void hive__task_cleanup(hive__task_t *t)
{
    struct hive *h = t->h;
    for (size_t i = 0; i < t->nargs; i++)
        if (t->args[i].obj != NULL)
            hive__obj_unpin(h, t->args[i].obj);
    if (t->result != NULL)
        hive__obj_unpin(h, t->result);
    free_record(t);
}

#define cleanup hive__task_cleanup

/* QUEUED -> RUNNING on a task's result; false if a cancel got there
 * first. w: the worker that will run it, if known (store.h). */
static inline bool task_claim_result(struct hive *h, hive__worker_t *w, hive__obj_t *r)
{
    return hive__obj_claim_run(h, w, r);
}

/* End a task that will not run: fail its result with code (unless a cancel
 * already did: one CAS on the state word decides), then clean up. */
static void complete_without_running(hive__task_t *t, int code)
{
    hive__obj_end_queued(t->h, t->result, code, HIVE__RUN_DONE);
    cleanup(t);
}

/* All dependencies are in: queue it, or end it if it cannot run. */
static void task_ready(hive__task_t *t)
{
    struct hive *h = t->h;
    if (atomic_load_explicit(&h->sched.stopping, memory_order_acquire))
        complete_without_running(t, HIVE_ESHUTDOWN);
    else if (atomic_load_explicit(&t->dep_failed, memory_order_acquire))
        complete_without_running(t, HIVE_ETASK);
    else
        hive__sched_spawn(&h->sched, &t->job, t->lane, t->node);
}

static void drop_pending(hive__task_t *t)
{
    /* acq_rel: the last one to count down sees every other's dep_failed */
    if (atomic_fetch_sub_explicit(&t->pending, 1, memory_order_acq_rel) == 1)
        task_ready(t);
}

static void dep_ready(hive__dep_t *dep, bool failed)
{
    hive__targ_t *a = HIVE_CONTAINER_OF(dep, hive__targ_t, dep);
    if (failed)
        atomic_store_explicit(&a->task->dep_failed, 1, memory_order_relaxed);
    drop_pending(a->task);
}

static size_t align16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

/* Release the counts taken on args[0..n) and free the record (submit errors). */
static void undo_args(struct hive *h, hive__task_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (t->args[i].obj != NULL)
            hive__obj_unpin(h, t->args[i].obj);
    free_record(t);
}

int hive__task_new(struct hive *h, const hive_arg_t *args, size_t nargs, bool with_result,
                   const char *fn, hive__task_t **out)
{
    if (unlikely(args == NULL && nargs != 0))
        return hive__fail(HIVE_EINVAL, "%s: args is NULL for %zu arguments", fn, nargs);
    /* the inline area starts 16-byte aligned (max_align_t, as malloc); the
     * table is checked against 1 << 40 bytes so that align16 cannot wrap */
    size_t bytes;
    if (unlikely(__builtin_mul_overflow(nargs, sizeof(hive__targ_t), &bytes) ||
                 __builtin_add_overflow(bytes, sizeof(hive__task_t), &bytes) ||
                 bytes > ((size_t)1 << 40)))
        return hive__fail(HIVE_EINVAL, "%s: %zu arguments are too many: their table of %zu-byte "
                          "entries passes 2^40 bytes", fn, nargs, sizeof(hive__targ_t));
    bytes = align16(bytes);
    for (size_t i = 0; i < nargs; i++) {
        if (args[i].ref.id != 0)
            continue;
        if (unlikely(args[i].data == NULL && args[i].size != 0))
            return hive__fail(HIVE_EINVAL, "%s: argument %zu has NULL data and size %zu",
                              fn, i, args[i].size);
        if (unlikely(args[i].size > ((size_t)1 << 40) ||
                     __builtin_add_overflow(bytes, align16(args[i].size), &bytes)))
            return hive__fail(HIVE_EINVAL, "%s: argument %zu of %zu bytes is too large "
                              "to copy; pass it by ref", fn, i, args[i].size);
    }
    hive__task_t *t = bytes <= HIVE_POOL_MAX ? hive__pool_alloc(bytes) : hive__malloc(bytes);
    if (unlikely(t == NULL))
        return hive__fail(HIVE_ENOMEM, "%s: cannot allocate a record of %zu bytes", fn, bytes);
    t->bytes = bytes;
    t->h = h;
    t->fn = NULL;
    t->actor = NULL;
    t->method = 0;
    t->result = NULL;
    t->nargs = nargs;
    t->lane = hive__prio_lane(HIVE_PRIO_NORMAL);
    t->max_retries = 0;
    t->node = -1;
    t->name = NULL;
    t->job.fn = task_job;
    atomic_init(&t->pending, 1);
    atomic_init(&t->dep_failed, 0);

    /* arguments: take counts on refs, copy inline bytes after the table */
    char *inline_at = (char *)t + align16(sizeof(hive__task_t) + nargs * sizeof(hive__targ_t));
    size_t biggest = 0;
    for (size_t i = 0; i < nargs; i++) {
        hive__targ_t *a = &t->args[i];
        a->task = t;
        a->dep.ready = dep_ready;
        if (args[i].ref.id != 0) {
            hive__rcu_lock();
            hive__obj_t *o = hive__obj_find(h, args[i].ref, fn);
            bool ok = o != NULL && hive__obj_pin_live(o);   /* the task's hold */
            hive__rcu_unlock();
            if (!ok) {
                if (o != NULL)
                    hive__fail(HIVE_ENOENT, "%s: argument %zu, object %llu, is being released",
                               fn, i, (unsigned long long)args[i].ref.id);
                undo_args(h, t, i);
                return HIVE_ENOENT;
            }
            a->obj = o;
            a->data = NULL;
            a->size = 0;
            /* placement by the largest argument: only payloads that are fixed
             * already (sealed, or a created/put object); a task result still
             * being written has neither size nor place yet. The acquire loads
             * order our reads after the writer's publication. */
            if ((hive__obj_state(o) == HIVE__SEALED || hive__obj_run(o) == HIVE__RUN_NONE) &&
                o->size >= biggest && hive__obj_in_arena(o)) {
                biggest = o->size;
                t->node = (int)hive__arena_node_of(&h->arena, o->data);
            }
        } else {
            a->obj = NULL;
            a->size = args[i].size;
            a->data = args[i].size ? inline_at : zero_arg;
            if (args[i].size)
                memcpy(inline_at, args[i].data, args[i].size);
            inline_at += align16(args[i].size);
        }
    }
    if (with_result) {
        int rc = hive__obj_new(h, HIVE__BLOB, 0, false, &t->result);
        if (unlikely(rc != HIVE_OK)) {
            undo_args(h, t, nargs);
            return rc;
        }
        hive__obj_init_run(t->result, HIVE__RUN_QUEUED);
        atomic_store_explicit(&t->result->refs, 1 + HIVE__PIN, memory_order_relaxed);   /* caller + task */
        hive__obj_publish(h, t->result);
    }
    *out = t;
    return HIVE_OK;
}

/* ------------------------------------------------------------ small tasks
 * The packed word of a queued small task (hive__qtask_t.meta):
 *   bits 0..1    nargs (0 .. HIVE__QTASK_NARGS)
 *   bits 2..3    lane
 *   bits 4..15   preferred node + 1 (0: none)
 *   bits 16..23  max_retries
 *   bits 24..38  the arguments' sizes, 5 bits each (0 .. HIVE__QTASK_ARGS)
 * The argument bytes follow each other in 8-byte steps in args[]. */
#define QT_NODE_MAX    4094u
#define QT_RETRIES_MAX 255u

static size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* Copy a small task's argument of n <= HIVE__QTASK_ARGS bytes: the usual
 * scalar sizes as one fixed move each, not a call into the C library. */
static inline void copy_arg(void *dst, const void *src, size_t n)
{
    switch (n) {
    case 0:  break;
    case 4:  memcpy(dst, src, 4); break;
    case 8:  memcpy(dst, src, 8); break;
    case 16: memcpy(dst, src, 16); break;
    default: memcpy(dst, src, n); break;
    }
}

/* Can this submit be a small task? Every bad input fails this test too (a
 * NULL table or datum, a ref): the full path writes its sentence. The
 * placement was checked against the engine's nodes already. */
static inline bool small_fits(const hive_arg_t *args, size_t nargs, const hive_opts_t *opts)
{
    if (opts != NULL && (opts->name != NULL || opts->max_retries > QT_RETRIES_MAX ||
                         (opts->place == HIVE_PLACE_NODE && opts->place_index > QT_NODE_MAX)))
        return false;
    if (nargs > HIVE__QTASK_NARGS || (nargs != 0 && args == NULL))
        return false;
    size_t used = 0;
    for (size_t i = 0; i < nargs; i++) {
        if (args[i].ref.id != 0 || args[i].size > HIVE__QTASK_ARGS ||
            (args[i].data == NULL && args[i].size != 0))
            return false;
        used += align8(args[i].size);
    }
    return used <= HIVE__QTASK_ARGS;
}

/* A small task that will not run: fail its result (unless a cancel did),
 * drop the task's count. */
static void small_unrun(struct hive *h, hive__obj_t *r, int code)
{
    hive__obj_end_queued(h, r, code, HIVE__RUN_DONE);   /* one CAS against hive_cancel's */
    hive__obj_unpin(h, r);
}

static void handed_job(hive__job_t *job, hive__worker_t *w);

/* Write a small task's queued body into its record's inline line. */
static inline void fill_body(hive__qtask_t *q, hive_t *h, hive_fn fn, const hive_arg_t *args,
                             size_t nargs, uint64_t meta)
{
    if (likely(nargs <= 1)) {         /* none or one (a fork-join's n): no loop */
        if (nargs == 1) {
            meta |= (uint64_t)args[0].size << 24;
            copy_arg(q->args, args[0].data, args[0].size);
        }
    } else {
        size_t at = 0;
        for (size_t i = 0; i < nargs; i++) {
            size_t n = args[i].size;
            meta |= (uint64_t)n << (24 + 5 * i);
            copy_arg(q->args + at, args[i].data, n);
            at += align8(n);
        }
    }
    q->job.fn = small_job;
    q->fn = fn;
    q->h = h;
    q->meta = meta;
}

/* A user thread's small task is handed to a worker of its node that spins
 * idle holding the hand-off slot (hive__sched_hand), if one does. A handed
 * task is RUNNING from the hand on - it is that worker's, which no other
 * worker can take - so its worker makes no claim: the claim's CAS took the
 * record's first line from the client spinning on it in hive_get, and the
 * seal took it back (issue 10). A cancel from then on asks a running task:
 * its result fails with HIVE_ECANCELED when it returns. A bare task (no
 * argument, no retry) goes as its record alone (hive__sched_hand_rec), its
 * function in the record's first line (u.task_fn): the worker reads
 * neither the body's line nor anything else the client wrote but that
 * header, which the client's spin in hive_get reads anyway, and the
 * client's release writes no line the worker read (issue 10: the body's
 * line cost a transfer to the worker and one back). The record is
 * published before the hand (nobody has its id before submit returns);
 * if no worker takes it, it becomes QUEUED and is spawned as usual (the
 * spawn's release carries that). Traced engines take the usual path (the
 * submit event comes before the run). */
static int submit_small(hive_t *h, hive_fn fn, const hive_arg_t *args, size_t nargs,
                        const hive_opts_t *opts, hive_ref_t *result, uint64_t t0)
{
    hive__obj_t *r;
    /* from a worker: a private result (store.h), the spawner's own until
     * its id reaches another thread */
    hive__worker_t *w = hive__self_in(&h->sched);
    int rc = w != NULL ? hive__obj_new_private(h, w, &r) : hive__obj_new(h, HIVE__BLOB, 0, false, &r);
    if (unlikely(rc != HIVE_OK))
        return rc;
    hive__qtask_t *q = &r->tail.queued;
    unsigned lane = hive__prio_lane(opts ? opts->priority : HIVE_PRIO_NORMAL);
    int node = opts != NULL && opts->place == HIVE_PLACE_NODE ? (int)opts->place_index : -1;
    uint64_t meta = (uint64_t)nargs | (uint64_t)lane << 2 | (uint64_t)(node + 1) << 4 |
                    (uint64_t)(opts ? opts->max_retries : 0) << 16;
    bool handing = w == NULL && likely(!h->trace.on);
    bool bare = handing && nargs == 0 && (opts == NULL || opts->max_retries == 0);
    if (bare)
        r->u.task_fn = fn;
    else
        fill_body(q, h, fn, args, nargs, meta);
    /* relaxed, all: nobody can find the record yet; publish's release
     * carries them with the rest */
    atomic_store_explicit(&r->refs, 1 + HIVE__PIN, memory_order_relaxed);   /* caller + task */
    if (handing) {
        hive__obj_init_run(r, HIVE__RUN_RUNNING);
        if (!bare)
            q->job.fn = handed_job;
        /* release (the publish, then the hand's CAS): as below */
        hive__obj_publish(h, r);
        if (bare ? hive__sched_hand_rec(&h->sched, r, node) : hive__sched_hand(&h->sched, &q->job, node)) {
            result->id = r->id;
            return HIVE_OK;
        }
        if (bare)
            fill_body(q, h, fn, args, nargs, meta);
        else
            q->job.fn = small_job;
    }
    hive__obj_init_run(r, HIVE__RUN_QUEUED);
    /* release (publish, then the spawn's queue): the body above reaches the
     * worker that takes the job; the record's fields anyone who finds it
     * (published already if it was to be handed) */
    if (w != NULL)
        hive__obj_publish_private(h, r);
    else if (!handing)
        hive__obj_publish(h, r);
    result->id = r->id;
    if (unlikely(h->trace.on))        /* before it can run: the flow starts here */
        hive__trace_submit(h, t0, r->id, NULL, (const void *)(uintptr_t)fn, false);
    /* acquire: as task_ready's; a stop begun after this look drops the
     * queued job (small_job with w == NULL) */
    if (atomic_load_explicit(&h->sched.stopping, memory_order_acquire))
        small_unrun(h, r, HIVE_ESHUTDOWN);
    else if (w == NULL || node >= 0 || !hive__sched_push_own(w, &q->job, lane))
        hive__sched_spawn(&h->sched, &q->job, lane, node);
    return HIVE_OK;
}

int hive_submit(hive_t *h, hive_fn fn, const hive_arg_t *args, size_t nargs,
                const hive_opts_t *opts, hive_ref_t *result)
{
    if (unlikely(h == NULL || fn == NULL || result == NULL))
        return hive__fail(HIVE_EINVAL, "hive_submit: %s is NULL",
                          h == NULL ? "engine" : fn == NULL ? "fn" : "result");
    if (unlikely(atomic_load_explicit(&h->sched.stopping, memory_order_relaxed)))
        return hive__fail(HIVE_ESHUTDOWN, "hive_submit: the engine is shutting down");
    if (unlikely(opts != NULL && opts->place != HIVE_PLACE_DEFAULT &&
                 (opts->place != HIVE_PLACE_NODE || opts->place_index >= h->topo.nnodes))) {
        if (opts->place != HIVE_PLACE_NODE)
            return hive__fail(HIVE_EINVAL, "hive_submit: placement kind %d is not one a task "
                              "takes (HIVE_PLACE_DEFAULT 0 or HIVE_PLACE_NODE 1)", opts->place);
        return hive__fail(HIVE_EINVAL, "hive_submit: node %u is not one of the engine's %u NUMA "
                          "nodes", opts->place_index, h->topo.nnodes);
    }
    uint64_t t0 = unlikely(h->trace.on) ? hive__trace_clock() : 0;
    if (likely(small_fits(args, nargs, opts)))
        return submit_small(h, fn, args, nargs, opts, result, t0);
    hive__task_t *t;
    int rc = hive__task_new(h, args, nargs, true, "hive_submit", &t);
    if (unlikely(rc != HIVE_OK))
        return rc;
    if (opts != NULL && opts->place == HIVE_PLACE_NODE)
        t->node = (int)opts->place_index;   /* the hint beats the argument rule */
    t->fn = fn;
    t->lane = hive__prio_lane(opts ? opts->priority : HIVE_PRIO_NORMAL);
    t->max_retries = opts ? opts->max_retries : 0;
    t->name = opts ? opts->name : NULL;
    result->id = t->result->id;
    if (unlikely(h->trace.on))        /* before it can run: the flow starts here */
        hive__trace_submit(h, t0, result->id, t->name, (const void *)(uintptr_t)fn, false);

    /* dependencies: count first, then hang the dep (it may fire at once) */
    bool refs = false;
    for (size_t i = 0; i < nargs; i++) {
        hive__obj_t *o = t->args[i].obj;
        if (o == NULL)
            continue;
        refs = true;
        atomic_fetch_add_explicit(&t->pending, 1, memory_order_relaxed);
        if (!hive__obj_add_dep(o, &t->args[i].dep)) {
            if (hive__obj_state(o) == HIVE__FAILED)
                atomic_store_explicit(&t->dep_failed, 1, memory_order_relaxed);
            atomic_fetch_sub_explicit(&t->pending, 1, memory_order_relaxed);
        }
    }
    if (refs)
        drop_pending(t);              /* submit's guard */
    else
        task_ready(t);                /* no dep was hung: nobody else counts */
    return HIVE_OK;
}

/* Drop what a failed run wrote into the result (hive_return). Only the
 * running task touches the payload fields until it finishes. */
static void drop_result(struct hive *h, hive__obj_t *r)
{
    if (r->data != NULL) {
        hive__payload_free(h, r);
        r->size = 0;
    }
}

/* Seal or fail the result r of a task that ran. A cancel that reached the
 * running task decides its outcome, whatever the function returned (as
 * Ray's TaskCancelledError): HIVE_ECANCELED. One CAS on the state word
 * moves the run to DONE and seals or fails the result, so it and
 * hive_cancel's CAS order the two: a cancel either lands before (and the
 * result fails) or finds RUN_DONE (and says the task has finished). */
static void finish_result(struct hive *h, hive__worker_t *w, hive__obj_t *r, int code)
{
    if (hive__obj_finish_run(h, w, r, code) != HIVE_OK)
        drop_result(h, r);            /* a result written before failing is dropped: the
                                         task still holds its count, and a failed
                                         result's payload is read by nobody */
}

/* Run a claimed task's function in ctx (its result RUNNING), again after
 * a failed run up to max_retries times, and finish its result. */
static void run_claimed(struct hive_ctx *ctx, hive_fn fn, unsigned max_retries, const char *name)
{
    hive__worker_t *w = ctx->w;
    hive__obj_t *r = ctx->result;
    uint64_t t0 = unlikely(w->tring != NULL) ? hive__trace_clock() : 0;
    int rc = fn(ctx);
    for (unsigned retry = 0; rc != 0 && retry < max_retries && !hive_cancelled(ctx); retry++) {
        drop_result(ctx->h, r);       /* the next run starts from an empty result */
        ctx->seq = ++w->task_seq;     /* a new run for worker-local values */
        rc = fn(ctx);
    }
    hive__count(&w->tasks, 1);
    if (unlikely(w->tring != NULL))
        hive__trace_span(w->tring, HIVE__TEV_TASK, t0, r->id, name, (const void *)(uintptr_t)fn,
                         w->depth);
    /* before the seal: a client that submits its next task as soon as it
     * sees this result finds w ready to be handed it (sched.h); only a job
     * at the top of w's stack, not holding the slot yet, can */
    if (w->depth == 0 && !w->held)
        hive__sched_about_idle(w);
    finish_result(ctx->h, w, r, rc == 0 ? HIVE_OK : HIVE_ETASK);
}

static void run_task(hive__task_t *t, hive__worker_t *w)
{
    if (!hive__task_claim(t)) {
        cleanup(t);                   /* cancelled while queued: result already failed */
        return;
    }
    struct hive_ctx ctx = { .h = t->h, .w = w, .task = t, .result = t->result, .depth = w->depth,
                            .seq = ++w->task_seq };
    run_claimed(&ctx, t->fn, t->max_retries, t->name);
    cleanup(t);
}

/* Unpack a small task's arguments (meta's sizes, bytes in 8-byte steps)
 * into sa, on the worker's stack. */
static inline void unpack_args(hive__sargs_t *sa, uint64_t meta, const unsigned char *args)
{
    sa->nargs = (unsigned)(meta & 3);
    if (likely(sa->nargs <= 1)) {
        /* none or one argument (a fork-join's n): it sits at offset 0 in
         * both layouts, so the whole body's argument bytes move as three
         * fixed words, with no per-argument loop (the bytes past it are
         * copied too and never read) */
        sa->size[0] = (uint8_t)((meta >> 24) & 31);
        sa->off[0] = 0;
        memcpy(sa->bytes, args, HIVE__QTASK_ARGS);
        return;
    }
    size_t from = 0, to = 0;
    for (unsigned i = 0; i < sa->nargs; i++) {
        size_t n = (meta >> (24 + 5 * i)) & 31;
        sa->size[i] = (uint8_t)n;
        sa->off[i] = (uint8_t)to;
        copy_arg(sa->bytes + to, args + from, n);
        from += align8(n);
        to += align16(n);
    }
}

/* The common end of a small task's three ways in (small_job, handed_job,
 * hive__task_run_handed): its function runs on w with the arguments sa
 * (unpacked onto the caller's stack), then the task's pin on its result
 * goes. */
static inline void run_small(struct hive *h, hive__worker_t *w, hive__obj_t *r, hive_fn fn,
                             hive__sargs_t *sa, unsigned retries)
{
    struct hive_ctx ctx = { .h = h, .w = w, .sargs = sa, .result = r, .depth = w->depth,
                            .seq = ++w->task_seq };
    run_claimed(&ctx, fn, retries, NULL);
    hive__obj_unpin_by(h, w, r);
}

/* A handed task dropped at shutdown: it never ran. RUNNING from the hand,
 * so there is no claim to lose: its result fails here. */
static void handed_unrun(struct hive *h, hive__obj_t *r)
{
    finish_result(h, NULL, r, HIVE_ESHUTDOWN);
    hive__obj_unpin(h, r);
}

/* A bare task handed as its record (submit_small, hive__sched_hand_rec):
 * its function in the record's header, no argument, no retry, RUNNING. */
void hive__task_run_handed(struct hive *h, void *rec, hive__worker_t *w)
{
    hive__obj_t *r = rec;
    if (w == NULL) {
        handed_unrun(h, r);
        return;
    }
    hive_fn fn = r->u.task_fn;        /* before the function may turn u to its own use */
    hive__sargs_t sa;
    sa.nargs = 0;
    run_small(h, w, r, fn, &sa, 0);
}

/* A small task with arguments handed to its worker (submit_small):
 * small_job without the claim - its result is RUNNING already. */
static void handed_job(hive__job_t *job, hive__worker_t *w)
{
    hive__obj_t *r = HIVE_CONTAINER_OF(job, hive__obj_t, tail.queued.job);
    const hive__qtask_t *q = &r->tail.queued;
    struct hive *h = q->h;
    if (w == NULL) {
        handed_unrun(h, r);
        return;
    }
    hive_fn fn = q->fn;
    uint64_t meta = q->meta;
    hive__sargs_t sa;
    unpack_args(&sa, meta, q->args);
    /* from here on the body is dead: the function may write the result
     * over it */
    run_small(h, w, r, fn, &sa, (unsigned)(meta >> 16) & QT_RETRIES_MAX);
}

/* A small task's job: take the body out of the result record (unpacking
 * the arguments onto this stack), then run it as a full record runs. */
static void small_job(hive__job_t *job, hive__worker_t *w)
{
    hive__obj_t *r = HIVE_CONTAINER_OF(job, hive__obj_t, tail.queued.job);
    const hive__qtask_t *q = &r->tail.queued;
    struct hive *h = q->h;
    if (w == NULL) {
        small_unrun(h, r, HIVE_ESHUTDOWN);   /* dropped at shutdown */
        return;
    }
    hive_fn fn = q->fn;
    uint64_t meta = q->meta;
    hive__sargs_t sa;
    unpack_args(&sa, meta, q->args);
    /* from here on the body is dead: the function may write the result
     * over it */
    if (!task_claim_result(h, w, r)) {
        hive__obj_unpin_by(h, w, r);   /* cancelled while queued: result already failed */
        return;
    }
    run_small(h, w, r, fn, &sa, (unsigned)(meta >> 16) & QT_RETRIES_MAX);
}

void hive__task_finish(hive__task_t *t, int code)
{
    finish_result(t->h, NULL, t->result, code);
}

bool hive__task_claim(hive__task_t *t)
{
    return task_claim_result(t->h, NULL, t->result);
}

void hive__task_fail_unrun(hive__task_t *t, int code)
{
    complete_without_running(t, code);
}

static void task_job(hive__job_t *job, hive__worker_t *w)
{
    hive__task_t *t = HIVE_CONTAINER_OF(job, hive__task_t, job);
    if (w == NULL)
        complete_without_running(t, HIVE_ESHUTDOWN);   /* dropped at shutdown */
    else
        run_task(t, w);
}

bool hive__task_help(struct hive *h, bool (*done)(void *arg), void *arg)
{
    hive__worker_t *w = hive__self_in(&h->sched);
    return w != NULL && hive__sched_help(w, done, arg);
}

int hive_cancel(hive_t *h, hive_ref_t ref)
{
    if (h == NULL)
        return hive__fail(HIVE_EINVAL, "hive_cancel: engine is NULL");
    hive__obj_t *o = hive__obj_find(h, ref, "hive_cancel");
    if (o == NULL)
        return HIVE_ENOENT;
    uint32_t v = atomic_load_explicit(&o->state, memory_order_acquire), st;
    for (;;) {
        switch (st = hive__run_of(v)) {
        case HIVE__RUN_NONE:
            return hive__fail(HIVE_ESTATE, "hive_cancel: object %llu is not a task's result",
                              (unsigned long long)ref.id);
        case HIVE__RUN_QUEUED:
            /* QUEUED -> CANCELLED and the result failed, in one CAS (false:
             * a claim or an end got there first; look again) */
            if (hive__obj_end_queued(h, o, HIVE_ECANCELED, HIVE__RUN_CANCELLED))
                return HIVE_OK;
            v = atomic_load_explicit(&o->state, memory_order_acquire);
            continue;
        case HIVE__RUN_RUNNING:
            /* acq_rel: against the CAS in hive__obj_finish_run; a waiter's
             * WAITERS bit only makes us try again */
            if (atomic_compare_exchange_weak_explicit(&o->state, &v,
                                                      (v & ~HIVE__RUN_MASK) |
                                                      HIVE__RUN_CANCEL_ASKED << HIVE__RUN_SHIFT,
                                                      memory_order_acq_rel, memory_order_acquire))
                return HIVE_OK;
            continue;
        default:
            return hive__fail(HIVE_ESTATE, "hive_cancel: the task of object %llu has %s",
                              (unsigned long long)ref.id,
                              st == HIVE__RUN_DONE ? "finished" : "been cancelled already");
        }
    }
}

/* ------------------------------------------------------------ context */

hive_t *hive_engine(hive_ctx_t *ctx)
{
    return ctx ? ctx->h : NULL;
}

unsigned hive_worker_index(hive_ctx_t *ctx)
{
    return ctx && ctx->w ? ctx->w->index : 0;
}

size_t hive_nargs(hive_ctx_t *ctx)
{
    return ctx == NULL ? 0 : ctx->sargs ? ctx->sargs->nargs : ctx->task ? ctx->task->nargs : 0;
}

const void *hive_arg(hive_ctx_t *ctx, size_t i, size_t *size)
{
    const hive__sargs_t *sa;
    if (likely(ctx != NULL && (sa = ctx->sargs) != NULL && i < sa->nargs)) {
        if (size)                     /* a small task: its bytes on the worker's stack */
            *size = sa->size[i];
        return sa->size[i] ? (const void *)(sa->bytes + sa->off[i]) : (const void *)zero_arg;
    }
    size_t n = hive_nargs(ctx);
    if (i >= n) {
        hive__fail(HIVE_EINVAL, "hive_arg: argument %zu out of range (%zu arguments)", i, n);
        return NULL;
    }
    const hive__targ_t *a = &ctx->task->args[i];
    if (a->obj != NULL) {
        if (size)
            *size = a->obj->size;
        return a->obj->data ? a->obj->data : zero_arg;
    }
    if (size)
        *size = a->size;
    return a->data;
}

hive_ref_t hive_arg_ref(hive_ctx_t *ctx, size_t i)
{
    if (ctx == NULL || ctx->sargs != NULL || ctx->task == NULL || i >= ctx->task->nargs ||
        ctx->task->args[i].obj == NULL)
        return (hive_ref_t){ 0 };
    return (hive_ref_t){ ctx->task->args[i].obj->id };
}

/* Give the result a payload of size bytes (replacing an earlier one). */
static int return_alloc(hive_ctx_t *ctx, size_t size, void **out, const char *fn)
{
    if (ctx == NULL || ctx->result == NULL)
        return hive__fail(HIVE_EINVAL, "%s: not inside a task", fn);
    hive__obj_t *r = ctx->result;
    struct hive *h = ctx->h;
    int err = HIVE_OK;
    void *p = NULL;
    if (size != 0 && r->data == (void *)r->tail.inl && size <= HIVE__INLINE_MAX) {
        p = r->tail.inl;              /* inline again: the same bytes and charge */
    } else {
        if (size != 0 &&
            (p = hive__payload_alloc(h, r, r->kind, size, ctx->w->slot->node, &err)) == NULL)
            return err;               /* the first return, if any, stays */
        hive__payload_free(h, r);     /* a second return replaces the first */
    }
    r->data = p;
    r->size = size;
    *out = p ? p : zero_arg;
    return HIVE_OK;
}

void *hive_return_alloc(hive_ctx_t *ctx, size_t size)
{
    void *p = NULL;
    return return_alloc(ctx, size, &p, "hive_return_alloc") == HIVE_OK ? p : NULL;
}

int hive_return(hive_ctx_t *ctx, const void *data, size_t size)
{
    /* a task's first small result (a fork-join's value): inline, charged
     * from this thread's reserve, copied; everything else below */
    hive__obj_t *r;
    if (likely(ctx != NULL && (r = ctx->result) != NULL && data != NULL && size - 1 < HIVE__INLINE_MAX &&
               r->data == NULL && hive__payload_inline_fast(ctx->h, r, size))) {
        copy_arg(r->tail.inl, data, size);
        return HIVE_OK;
    }
    if (data == NULL && size != 0)
        return hive__fail(HIVE_EINVAL, "hive_return: data is NULL for %zu bytes", size);
    void *p;
    int rc = return_alloc(ctx, size, &p, "hive_return");
    if (rc == HIVE_OK && size)
        memcpy(p, data, size);
    return rc;
}

int hive_cancelled(hive_ctx_t *ctx)
{
    /* relaxed: a flag the task polls; the outcome is decided in
     * hive__task_finish by the exchange on the same word */
    return ctx && ctx->result &&
           hive__run_of(atomic_load_explicit(&ctx->result->state, memory_order_relaxed)) ==
               HIVE__RUN_CANCEL_ASKED;
}
