/*
 * task.h - task records and the context a running task sees.
 *
 * A task record holds the function, its arguments (inline bytes copied into
 * the record, refs as counted object pointers, each with the dep node it
 * waits with), and the result object. Records come from the block pool (up
 * to HIVE_POOL_MAX bytes with their inline arguments; larger ones from
 * malloc: pass big data by ref).
 */
#ifndef HIVE_TASK_H
#define HIVE_TASK_H

#include <stdatomic.h>
#include <stdbool.h>

#include "hive.h"
#include "sched.h"
#include "store.h"

struct hive__task;

typedef struct hive__targ {
    const void        *data;     /* inline bytes (in the record) or NULL */
    size_t             size;
    hive__obj_t       *obj;      /* ref argument (one count held), or NULL */
    hive__dep_t        dep;      /* waits for obj while it is pending */
    struct hive__task *task;
} hive__targ_t;

typedef struct hive__task {
    hive__job_t      job;
    struct hive     *h;
    hive_fn          fn;
    struct hive__actor *actor;   /* actor calls: the callee (actor.c), else NULL */
    unsigned         method;
    hive__obj_t     *result;     /* one count held by the task; NULL for constructor records */
    _Atomic int32_t  pending;    /* pending ref args + 1 while submit is under way */
    _Atomic int32_t  dep_failed;
    unsigned         lane;
    unsigned         max_retries;/* runs after a failed one (hive_opts_t); 0 for actor calls */
    int              node;       /* preferred NUMA node, -1: none */
    const char      *name;       /* hive_opts_t.name (timeline), or NULL */
    size_t           bytes;      /* size of this record */
    size_t           nargs;
    hive__targ_t     args[];
} hive__task_t;

/* A small task's inline arguments while it runs: unpacked from its queued
 * body (store.h, hive__qtask_t) onto the worker's stack, each at a
 * 16-byte boundary as in a full record. */
#define HIVE__QTASK_NARGS 3
typedef struct hive__sargs {
    _Alignas(16) unsigned char bytes[2 * HIVE__QTASK_ARGS];
    unsigned         nargs;
    uint8_t          size[HIVE__QTASK_NARGS];
    uint8_t          off[HIVE__QTASK_NARGS];
} hive__sargs_t;

/* What hive_ctx_t is: one per running task (on the worker's stack). */
struct hive_ctx {
    struct hive    *h;
    hive__worker_t *w;
    hive__task_t   *task;        /* a full record (actor calls, spilled tasks), or NULL */
    const hive__sargs_t *sargs;  /* a small task's arguments, or NULL */
    hive__obj_t    *result;
    unsigned        depth;       /* worker nesting level (local.c instances) */
    uint64_t        seq;         /* this run's number on its worker (local.c resets) */
};

/* The engine's help hook for waits inside jobs (store.h). */
bool hive__task_help(struct hive *h, bool (*done)(void *arg), void *arg);

/* For actor.c, which sends calls through the same records. */
int  hive__task_new(struct hive *h, const hive_arg_t *args, size_t nargs, bool with_result,
                    const char *fn, hive__task_t **out);
bool hive__task_claim(hive__task_t *t);               /* QUEUED -> RUNNING, false if cancelled */
void hive__task_finish(hive__task_t *t, int code);    /* seal (HIVE_OK) or fail the result */
void hive__task_fail_unrun(hive__task_t *t, int code);/* fail (unless cancelled) and clean up */
void hive__task_cleanup(hive__task_t *t);             /* drop counts, free the record */

#endif
