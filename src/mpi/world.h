/*
 * world.h - the MPI layer's state for one attached engine (src/mpi/): the
 * progress thread, its request queue, the table of requests waiting for an
 * answer, the cache of fetched remote objects, and the wire format.
 *
 * Design (the argument for it):
 *  - One progress thread per attached engine makes every MPI call hive
 *    makes, on a duplicate of the user's communicator. User threads and
 *    workers never enter libmpi: they build a message, push it on `q`
 *    (a mutex-protected list: one short critical section per request,
 *    cheaper than the message itself) and wake the thread if it sleeps.
 *    So hive's side needs nothing of MPI's thread support but that the
 *    application may use MPI on its own threads at the same time, which is
 *    MPI_THREAD_MULTIPLE.
 *  - Sleeping when idle: Open MPI's blocking calls busy-poll, so the thread
 *    never blocks in MPI. It polls (MPI_Improbe, MPI_Test) while there was
 *    activity in the last millisecond or an MPI transfer is in flight
 *    (Open MPI moves large messages only while polled), yielding the CPU
 *    between polls; then it sleeps on a futex with a timeout that doubles
 *    from 16 us up to 1 ms (128 us while it waits for answers from other
 *    ranks). A local request wakes it at once; a message from another rank
 *    waits at most that long.
 *  - Served work completes through the store's dependency hook: the result
 *    of a served call (or a fetched object still pending) gets a
 *    hive__dep_t whose callback queues the reply for the thread; nothing
 *    polls objects.
 *  - Ordering: one thread sends in queue order, and MPI does not let two
 *    messages between the same pair of ranks on one tag overtake each
 *    other, so a caller's calls reach the callee's actor queues in the
 *    order they were made; the actor keeps that order per lane.
 *  - Payloads above HIVE__MPI_INLINE bytes travel as a second message on
 *    TAG_DATA, Isent from the owner's arena and Irecv'd into the record's
 *    freshly allocated arena payload (chunks of at most 1 GiB); the
 *    receiver posts its receives in the order the headers arrive, which is
 *    the order the owner sent the payloads in.
 */
#ifndef HIVE_MPI_WORLD_H
#define HIVE_MPI_WORLD_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hive_impl.h"
#include "remote.h"
#include "store.h"
#include "hive/mpi.h"

#define HIVE__MPI_INLINE   (32u << 10)   /* payloads up to this travel inside the header message */
#define HIVE__MPI_CHUNK    (1u << 30)    /* largest single data message */
#define HIVE__MPI_BUCKETS  4096u
#define HIVE__MPI_TAG_CTRL 1
#define HIVE__MPI_TAG_DATA 2

enum { M_CALL = 1, M_GET, M_LOOKUP, M_KILL, M_REPLY, M_CELL };

/* Every control message starts with this (then the call's arguments, or
 * an inline payload, or a name). */
typedef struct wire_hdr {
    uint32_t type;
    int32_t  status;        /* M_REPLY: HIVE_OK or the failure code */
    uint64_t req;           /* the requester's request id, echoed in the reply */
    uint64_t id;            /* actor / object id; M_REPLY of a lookup: the actor found */
    uint64_t size;          /* M_REPLY: payload bytes; M_CALL: argument bytes following */
    uint32_t method, nargs;
    int32_t  prio, has_prio;
} wire_hdr_t;

/* One argument on the wire, followed by size bytes padded to 8 if inline. */
typedef struct wire_arg {
    uint64_t ref;           /* 0: inline bytes */
    uint64_t size;
} wire_arg_t;

/* A request this rank made and waits for the answer to (progress thread only). */
typedef struct pend {
    struct pend  *next;      /* bucket chain */
    uint64_t      req;
    int           kind;      /* M_CALL, M_GET, M_LOOKUP, M_KILL */
    hive__obj_t  *obj;       /* where the answer goes (a count held) */
    int           waiting;   /* M_LOOKUP: answers still to come */
    uint64_t      found;     /* M_LOOKUP: best actor id so far */
    int           found_rank;
    uint64_t     *keep;      /* M_CALL: local refs retained until the reply */
    size_t        nkeep;
    struct cell_answer *cell;   /* M_CELL: the seq and whether it changed */
} pend_t;

/* What a cell request learns besides the payload (written before the seal). */
typedef struct cell_answer {
    uint64_t seq;
    int      unchanged;      /* the requester's copy is current: no payload came */
} cell_answer_t;

/* The latest version of a remote cell copied here. */
typedef struct cell_copy {
    struct cell_copy *next;
    uint64_t          cell, seq;
    hive__obj_t      *obj;   /* a count held */
} cell_copy_t;

/* A local request on its way to the progress thread. */
typedef struct lreq {
    struct lreq *next;
    int          kind;       /* M_CALL / M_GET / M_LOOKUP / M_KILL, or 0: detach */
    int          dest;       /* -1: every other rank */
    void        *msg;        /* the message (malloc'd) */
    size_t       len;
    pend_t      *pend;
} lreq_t;

/* An MPI request in flight and what to do when it completes. */
typedef struct xfer {
    void        *free_buf;   /* free() on completion */
    hive__obj_t *release;    /* release on completion (payload sent from it) */
    hive__obj_t *seal;       /* seal on completion, once all its parts are in */
    _Atomic int *parts;      /* parts of that payload still in flight (shared, malloc'd) */
} xfer_t;

/* Work done here for another rank: a call's result or an object to send. */
typedef struct served {
    hive__dep_t   dep;       /* first: the store's callback finds us through it */
    struct served *next;     /* the ready queue */
    struct world *w;
    int           src;
    uint64_t      req;
    hive__obj_t  *obj;       /* result / object (a count held) */
    hive__obj_t **fetched;   /* argument copies fetched for a call (counts held) */
    size_t        nfetched;
} served_t;

/* A fetched copy of a remote object, cached by its remote id. */
typedef struct cached {
    struct cached *next;
    uint64_t       rid;
    hive__obj_t   *obj;      /* a count held */
} cached_t;

typedef struct world {
    hive__remote_ops_t ops;  /* ops.ctx == this */
    hive_t       *h;
    MPI_Comm      comm;
    int           rank, size;
    pthread_t     thread;

    pthread_mutex_t qlock;   /* q, ready, detach_asked */
    lreq_t       *q_head, *q_tail;
    served_t     *ready;
    _Atomic uint32_t kick;   /* futex word: bumped by every push */
    _Atomic uint32_t sleeping;
    _Atomic int   closing;   /* detach began: new requests are refused */
    _Atomic uint64_t next_req;

    /* progress thread only */
    pend_t       *pend[HIVE__MPI_BUCKETS];
    size_t        npend;
    MPI_Request  *reqs;
    xfer_t       *xfers;
    size_t        nreqs, capreqs;
    size_t        nserving;  /* served records not yet answered */
    int           phase;     /* 0 run, 1 detach asked, 2 in the barrier, 3 done */
    MPI_Request   barrier;

    pthread_mutex_t clock;   /* the cache */
    cached_t     *cache[HIVE__MPI_BUCKETS];
    cell_copy_t  *cells;     /* remote cells read here (a short list: few cells per program) */

    _Atomic uint64_t st_calls_sent, st_calls_served, st_fetches, st_fetch_bytes,
                     st_gets_served, st_cache_hits, st_sleeps;
} world_t;

/* progress.c */
void *hive__mpi_progress(void *arg);
void  hive__mpi_push(world_t *w, lreq_t *r);
void  hive__mpi_ready(world_t *w, served_t *s);
void  hive__mpi_count(_Atomic uint64_t *c, uint64_t n);

/* A pending record with no payload yet: the future a remote answer fills. */
int   hive__mpi_placeholder(world_t *w, hive__obj_t **out);

#endif
