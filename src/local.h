/*
 * local.h - worker-local values (hive_local_*): one value per worker and
 * key, built on first use, reset before each later task that uses it.
 *
 * A task that runs nested inside another task's wait (hive_get in a task;
 * see task.c) gets its own instances, one set per nesting depth, so a
 * suspended task never finds its simulator reset under its feet.
 */
#ifndef HIVE_LOCAL_H
#define HIVE_LOCAL_H

#include <pthread.h>
#include <stdint.h>

#include "hive.h"

struct hive;
struct hive__worker;

#define HIVE_MAX_LOCALS 1024
/* A key's id: the engine's serial above the index, so a key of another
 * engine is refused (HIVE_ENOENT) rather than naming one of ours. */
#define HIVE__LOCAL_INDEX_BITS 10
#define HIVE__LOCAL_SERIALS    ((1u << (32 - HIVE__LOCAL_INDEX_BITS)) - 1)

struct hive__tlocal;

typedef struct hive__locals {
    pthread_mutex_t   lock;                   /* hive_local_new only */
    _Atomic uint32_t  n;                      /* keys defined; defs[0..n) are immutable */
    uint32_t          serial;                 /* 1 .. HIVE__LOCAL_SERIALS: this engine's keys */
    struct hive__tlocal *threads;             /* user threads' values (hive_local_thread),
                                                 under local.c's process-wide lock */
    hive_local_def_t  defs[HIVE_MAX_LOCALS];
} hive__locals_t;

void hive__locals_init(hive__locals_t *l);
void hive__locals_destroy(hive__locals_t *l);

/* At shutdown, once no worker runs: fini every user thread's values of h
 * (hive_local_thread), on the calling thread. */
void hive__local_threads_exit(struct hive *h);

/* On the worker's own thread as it exits: fini every value it built. */
void hive__local_worker_exit(struct hive__worker *w);

#endif
