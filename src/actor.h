/*
 * actor.h - actor records and the engine's registry of them (actor.c).
 */
#ifndef HIVE_ACTOR_H
#define HIVE_ACTOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct hive;
struct hive__actor;
struct hive__actor_name;
struct hive__actor_cls;
struct hive__worker;
struct hive__task;
struct hive__obj;

typedef struct hive__actors {
    pthread_mutex_t     lock;       /* names and classes: never on a call */
    struct hive__actor_name *names; /* name -> handle id, for hive_actor_lookup */
    struct hive__actor_cls *classes; /* one shared copy per distinct class (actor.c) */
    _Atomic(struct hive__actor_cls *) hot; /* the copy made or found last (actor.c) */
    _Atomic uint64_t    next;       /* actors created so far (a statistic) */
    _Atomic uint64_t    deaths;     /* actors killed or failed so far (a statistic) */
    _Atomic uint64_t    dying;      /* killed or failed, state not yet given back */
    _Atomic uint64_t    restarts;   /* rebuilds after HIVE_RESTART (a statistic) */
    _Atomic int64_t     rebuilding; /* actors being rebuilt or waiting to be (a statistic) */
    _Atomic uint64_t    parked;     /* parks (actor.c) whose dependencies have not all fired */
} hive__actors_t;

/* Actor handle ids: the handle's store id (handles.h) with bit 63 set
 * (object ids never have it). An id with bit 63 that this engine's store
 * handed out but whose slot holds no such record is a dead actor: a
 * tombstone of no bytes at all (the slot may serve other objects since). */
#define HIVE__ACTOR_TAG        ((uint64_t)1 << 63)

void hive__actors_init(hive__actors_t *r);
/* HIVE_OK if id names a living actor of h, else the failure with fn's
 * sentence (HIVE_ENOENT, HIVE_EDEAD); for actor_pool.c. */
int hive__actor_check(struct hive *h, uint64_t id, const char *fn);
/* A call run in place by a worker that is not running a job (the MPI
 * layer's idle poller, src/mpi/): claim takes the turn of a sequential,
 * living, built actor of h whose turn is free - no turn running, queued or
 * parked, no mail - so that the call keeps every order a mailbox would
 * give it; NULL otherwise (hive_call it then), and for a method out of
 * range, a worker-placed actor placed elsewhere, tracing or shutdown.
 * run_here runs the method on worker w with t as its arguments (a record
 * the caller built: only nargs and args are read; inline bytes only) and
 * res as its result (a BLOB record outside the table: what the method
 * returned is in res->data and res->size, hive__payload_free gives it
 * back), calls done(arg, rc) with what the method returned (NULL: none)
 * while the turn is still held - an answer sent from there is on its way
 * before the turn's end costs anything -, applies HIVE_RESTART, and gives
 * the turn back as a turn does; it returns what the method returned. */
struct hive__actor *hive__actor_claim_free(struct hive *h, uint64_t id, unsigned method, unsigned worker);
int hive__actor_run_here(struct hive__actor *a, struct hive__worker *w, unsigned method,
                         struct hive__task *t, struct hive__obj *res, void (*done)(void *, int),
                         void *arg);
/* After the workers stopped: fail what is queued (HIVE_ESHUTDOWN), run fini
 * of every live actor, free every record. */
void hive__actors_shutdown(struct hive *h);
/* After the store closed (no retire callback is left): the classes and
 * the lock go. */
void hive__actors_close(struct hive *h);
/* Actors created so far and those not dead now (stats.c). */
void hive__actors_count(struct hive *h, uint64_t *created, uint64_t *alive);
/* Actors being rebuilt now, or waiting to be (stats.c). */
uint64_t hive__actors_restarting(struct hive *h);

#endif
