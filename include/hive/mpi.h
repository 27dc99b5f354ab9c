/*
 * hive/mpi.h - one hive program across processes and machines, on MPI
 * (libhive-mpi.a, src/mpi/; link it before libhive.a and libmpi). The core
 * library has no MPI dependency; this layer plugs into it.
 *
 * A world is one hive engine per MPI rank. After hive_mpi_attach, ids are
 * world-wide values: every ref and actor handle carries its owner rank
 * (the id's 12-bit engine tag is rank + 1), so handles may travel between
 * ranks inside arguments or payloads as plain bytes, and the ordinary API
 * works on them:
 *   hive_call on another rank's actor  sends the call there (inline bytes
 *       travel with it - a call above 64 KiB as two messages -; ref
 *       arguments are fetched by the callee's rank) and
 *       returns a local future, sealed with the method's result when the
 *       reply arrives, or failed with the code the owner saw (HIVE_ETASK for
 *       a failing method, HIVE_EDEAD for a dead actor, HIVE_EINVAL for a bad
 *       method index, ...). Calls from one thread to one rank keep their
 *       order, so "calls from one caller at one priority run in the order
 *       they were made" and the priority lanes hold across ranks.
 *   hive_get on another rank's ref      fetches the payload once into the
 *       local store (a copy counted like a local object) and then answers
 *       from it; hive_release of that ref on this rank drops the copy (the
 *       owner's counts are the owner's: an object must stay alive on its
 *       owner while other ranks may still fetch it). Payloads above 32 KiB
 *       move with nonblocking MPI straight out of the owner's arena into the
 *       destination's.
 *   hive_actor_kill on another rank's actor  kills it there.
 *   hive_actor_lookup  finds a name registered on any rank (this rank
 *       first, then the lowest rank that has it). An answer from another
 *       rank is cached here: later lookups of the name cost no message
 *       until a call or kill from this rank finds that actor dead
 *       (HIVE_EDEAD; the next lookup asks again and finds the name's new
 *       actor) or this rank kills it. A name registered later on a lower
 *       rank is not noticed while the cached actor lives.
 *   hive_cell_acquire on another rank's cell  asks the owner for the current
 *       version and returns a local copy of it (a count for the caller);
 *       the copy is kept, so the payload travels only when the version
 *       changed (2 small messages otherwise). A publish is visible to the
 *       next acquire anywhere. hive_mpi_cell_subscribe (below) makes the
 *       owner push versions instead: acquires cost no message.
 *   hive_wait, hive_get_many, hive_submit and hive_call on this rank with
 *       another rank's ref (as a ref to wait for or an argument) use this
 *       rank's copy, fetched once as by hive_get; hive_retain of such a ref
 *       adds a hold on the copy, which one more hive_release drops.
 *   hive_cell_publish to another rank's cell  sends the version's bytes
 *       (once it is sealed) to the owner, which publishes a copy of them as
 *       the cell's next version; the owner's status comes back.
 * Not remote: arrays (views and writes stay on the owner).
 *
 * Counts: what the layer holds for itself - a request's answer record, a
 * remote ref's copy (a task or method that has it as an argument can name
 * it: hive_arg_ref), a remote cell's kept copy, a served object, a call's
 * local ref arguments until its answer (a remote call's future among
 * them) - it holds with the engine's own holds, as a task holds its
 * arguments: a hive_release once too many on one of them (or on a call's
 * store-record future) is refused with HIVE_ESTATE and takes nothing the
 * layer still uses. A remote call's future takes at most 32,767 counts
 * (hive_retain past that: HIVE_EINVAL), and may be an argument of at most
 * 65,535 calls in flight at once (hive_call past that: HIVE_EINVAL). hive_wait and
 * hive_get_many on another rank's ref whose copy cannot be made say
 * HIVE_ENOMEM.
 *
 * Threading: hive_mpi_attach needs MPI_Init_thread(..., MPI_THREAD_MULTIPLE)
 * (Open MPI 4.1 provides it): hive makes MPI calls on the calling thread
 * (a request is sent by the thread that makes it; a thread that waits for
 * its answer - hive_get of a remote ref or of a remote call's future, a
 * cell acquire, a kill, a lookup - receives it itself, spinning up to
 * 10 ms before it sleeps), on an idle worker (one at a time polls while it
 * spins before parking, and for 2 ms after the rank's last message, so a
 * call arriving then runs on it with no wake-up), on the worker that
 * finished a served call (its reply), and on one progress thread per
 * engine, which receives only while no other thread polls, all on
 * duplicates of the communicator, while the application keeps using MPI on
 * its own threads. The progress thread sleeps when nothing is in flight (a
 * request into a rank idle for 100 ms waits up to 10 ms for it).
 *
 * Shutdown: hive_mpi_detach is collective. Each rank stops taking new remote
 * requests (HIVE_ESHUTDOWN), waits for the answers to its own, and keeps
 * serving the others until every rank has got its answers; then the
 * progress thread stops. hive_shutdown of an attached engine is refused
 * with HIVE_ESTATE. The futures of remote calls the program has not
 * released by then are released by detach (their answers are in): like
 * every remote id, they name nothing afterwards (HIVE_ENOENT); but a call
 * made while all 4096 of the rank's future slots were held gets a store
 * record as its future, which stays the program's to release. A rank
 * that dies kills the job (Open MPI's default
 * error handler, MPI_ERRORS_ARE_FATAL, is kept): no caller hangs on a dead
 * rank. See docs/scale-out.md.
 */
#ifndef HIVE_MPI_H
#define HIVE_MPI_H

#include <mpi.h>
#include "hive.h"

#ifdef __cplusplus
extern "C" {
#endif

/* hive_mpi_attach - collective over comm: make h one rank of a hive world.
 * h must not have made any object or actor yet (its ids take the world's
 * tag here): attach right after hive_init. HIVE_ESTATE if MPI is not
 * initialised with MPI_THREAD_MULTIPLE, if h is attached already or has
 * made objects; HIVE_EINVAL for a NULL engine or a world above 4095 ranks. */
int hive_mpi_attach(hive_t *h, MPI_Comm comm);
/* hive_mpi_detach - collective: see "Shutdown" above. HIVE_ESTATE if h is
 * not attached. Remote ids found afterwards name nothing (HIVE_ENOENT). */
int hive_mpi_detach(hive_t *h);
/* This rank and the world's size; a negative HIVE_E* code if h is NULL or
 * not attached. */
int hive_mpi_rank(hive_t *h);
int hive_mpi_size(hive_t *h);
/* The rank that owns an id (ref or actor handle), or HIVE_ENOENT if the id
 * belongs to no rank of h's world. */
int hive_mpi_owner(hive_t *h, uint64_t id);

/* hive_mpi_cell_subscribe - from now on the cell's owner pushes every new
 * version to this rank, and hive_cell_acquire of it here is answered from
 * the pushed copy without a message (it first takes in what has arrived).
 * The acquire then sees a publish once its push arrived (eventual; the
 * publish-to-visible latency is a message's, bench-mpi reports it), not at
 * once as the unsubscribed acquire (which asks the owner every time) does.
 * Versions that fit one small message (about 1 KiB) travel in the push;
 * for a larger one the push says that it changed and the next acquire
 * fetches it (2 messages + the payload). After the owner drops the cell,
 * a subscribed rank keeps the last version it got. Collective: no. Also
 * acquires the current version once. HIVE_ENOENT for a cell that is no
 * rank's or gone, HIVE_ESTATE if h is not attached. */
int hive_mpi_cell_subscribe(hive_t *h, hive_ref_t cell);

/* What this rank's layer has done (counters since attach). */
typedef struct hive_mpi_stats {
    uint64_t calls_sent, calls_served;     /* remote calls made / run here for others */
    uint64_t fetches, fetch_bytes;         /* payloads fetched from other ranks, their bytes */
    uint64_t gets_served;                  /* payloads sent to other ranks */
    uint64_t cache_hits;                   /* remote gets answered from the local copy */
    uint64_t sleeps;                       /* times the progress thread went to sleep */
    uint64_t lookups, lookup_hits;         /* names asked of the other ranks / answered from the cache */
    uint64_t cell_pushes;                  /* versions of cells owned here pushed to subscribed ranks */
    uint64_t cell_local;                   /* remote cell acquires answered from a pushed copy */
    /* messages received, by the thread that took them: the progress thread,
     * a thread waiting for its own answer (hive_get of a remote ref or of a
     * remote call's future, a cell acquire, a kill, a lookup), an idle
     * worker (polling while it spins before it sleeps) */
    uint64_t recv_progress, recv_waiting, recv_idle;
    /* of calls_served, those an idle worker ran where it took them, in
     * the actor's free turn (all arguments inline bytes; the actor
     * sequential, with no call queued or running): no task or result
     * record, the reply sent from what the method returned */
    uint64_t calls_in_place;
} hive_mpi_stats_t;
int hive_mpi_stats(hive_t *h, hive_mpi_stats_t *out);

/* Replay across ranks. hive_mpi_replay_serve: on the buffer's rank, an
 * actor (named name, may be NULL) that pushes batches into rb (items of
 * item_size bytes, as rb was made with); rb must outlive it (kill it
 * first). hive_mpi_replay_push: from any rank, push n items as one batch
 * (one remote call); *done is the call's future: sealed once the items are
 * in, HIVE_ETASK if the buffer refused them. Find the server by name with
 * hive_actor_lookup. */
int hive_mpi_replay_serve(hive_t *h, hive_replay_t *rb, size_t item_size, const char *name,
                          hive_actor_t *out);
int hive_mpi_replay_push(hive_t *h, hive_actor_t server, const void *items, size_t n, size_t item_size,
                         hive_ref_t *done);

#ifdef __cplusplus
}
#endif

#endif
