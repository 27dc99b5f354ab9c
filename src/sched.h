/*
 * sched.h - workers: threads pinned to their slots, each with an MPSC inbox
 * of jobs, that spin briefly when idle and then park on a futex.
 *
 * A job is an intrusive node plus a function. Any thread may post a job to a
 * worker; the worker runs it on its own thread. Jobs still queued when the
 * engine stops are handed back to their function with w == NULL, so their
 * owner can fail or free them (tasks fail their results with HIVE_ESHUTDOWN).
 *
 * Wake rule: a post wakes the worker only if that worker is parked - one
 * seq_cst load of its parked word on the fast path, no system call while it
 * is busy. See the handshake comment in sched.c.
 */
#ifndef HIVE_SCHED_H
#define HIVE_SCHED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ds/mpsc.h"
#include "topo.h"

struct hive;
struct hive__worker;

typedef struct hive__job hive__job_t;
typedef void (*hive__job_fn)(hive__job_t *job, struct hive__worker *w);
struct hive__job {
    hive__mpsc_node_t node;
    hive__job_fn      fn;
};

typedef struct hive__worker {
    hive__mpsc_t inbox;                       /* padded: producers' and consumer's lines apart */
    HIVE_ALIGNED _Atomic uint32_t parked;     /* futex word: 1 while parked or about to park */
    /* below: written by the worker itself, read by others only for stats */
    HIVE_ALIGNED struct hive__sched *sched;
    unsigned            index;
    const hive__slot_t *slot;
    bool                bound;
    pthread_t           thread;
    _Atomic uint64_t    parks;                /* times it set parked (about to sleep) */
    _Atomic uint64_t    jobs;                 /* jobs it ran */
} hive__worker_t;

typedef struct hive__sched {
    struct hive      *h;
    unsigned          n;
    hive__worker_t   *w;
    bool              pin;
    HIVE_ALIGNED _Atomic unsigned nparked;    /* workers parked now: one load tells if any sleeps */
    HIVE_ALIGNED _Atomic int stopping;        /* read before every job: its own line, never written again */
    _Atomic uint64_t  wakes;                  /* futex wakes issued (slow path only) */
    /* start-up handshake */
    _Atomic uint32_t  started;
    _Atomic int       start_rc;
    char              start_msg[256];
} hive__sched_t;

/* The worker the calling thread is, or NULL on a user thread. */
extern __thread hive__worker_t *hive__self;

/* Start n workers on the slots of topo; bind them unless pin is false.
 * On failure every started worker is stopped again and the sentence of the
 * first failure is this thread's last error. */
int  hive__sched_start(hive__sched_t *s, struct hive *h, const hive__topo_t *topo,
                       unsigned n, bool pin);
/* Stop: running jobs finish, queued ones are dropped (fn(job, NULL)), all
 * threads are joined and the worker table is freed. Not from a worker. */
void hive__sched_stop(hive__sched_t *s);

/* Post a job to worker index; wakes it only if it is parked. */
void hive__sched_post(hive__sched_t *s, unsigned index, hive__job_t *job);

#endif
