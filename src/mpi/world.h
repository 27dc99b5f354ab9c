/*
 * world.h - the MPI layer's state for one attached engine (src/mpi/): the
 * progress thread, the sends handed to it, the table of requests waiting for an
 * answer, the cache of fetched remote objects, and the wire format.
 *
 * Design (the argument for it):
 *  - Whichever thread makes a request sends it: hive_call, hive_get, ...
 *    on another rank's id do their MPI_Isend on the caller's thread, and
 *    a served call's reply is sent by the thread that finished the result
 *    (the worker that ran the method), through the store's dependency hook.
 *    Hence MPI_THREAD_MULTIPLE. A send that does not complete at once
 *    (a large payload) is handed to the progress thread to finish; that
 *    handoff is off the critical path (the message is already out).
 *  - Every request carries its own reply tag (reply_tag(req)); requests go
 *    on TAG_CTRL of `comm`, their answers on the reply tag of `rcomm`, and
 *    payloads above HIVE__MPI_INLINE on the same tag of `dcomm`, a third
 *    duplicate that only explicit receives read. A request above
 *    HIVE__MPI_CTRL_CAP goes as an M_BIG envelope on `comm` and its whole
 *    message on `dcomm` under its body tag (above every reply tag).
 *  - Requests are received only through the two persistent receives
 *    posted on `comm` (creq): a request is matched into a buffer as it
 *    arrives - no MPI_Improbe, no MPI_Mrecv, no copy through MPI's
 *    unexpected queue. Nobody probes `comm`: a probe could take a request
 *    that arrived while a receive was being started again, ahead of the
 *    one matched before it. Answers, which need no order, are probed for
 *    on `rcomm` (replies nobody waits for with a receive of their own).
 *  - A thread that waits for an answer (hive_get of a remote ref or of a
 *    remote call's future - the core's wait hook -, a cell acquire, a
 *    lookup, a kill) drives progress itself for up to DRIVE_NS: it takes
 *    poll_lock, tests the request receives and probes `rcomm`, handles
 *    whatever came (serving other ranks' requests too) and receives its payload straight into the local copy's
 *    arena payload, so no other thread is on the answer's path and no
 *    wake-up is needed. For the answer to its own last call (or to a
 *    first get) it posts a receive before it probes again: MPI matches
 *    the reply to it as it arrives, into a buffer of the thread (no
 *    probe, no copy through MPI's unexpected queue), and the thread
 *    probes for others' requests every OWN_POLL_EVERY looks. A probe by
 *    another thread that took the reply first leaves the receive
 *    unmatched: it is cancelled when the wait ends.
 *  - An idle worker polls too (the core's idle hook, one worker at a time:
 *    the claim): from its first look for work, and for IDLE_HOT_NS after
 *    the rank's last message. A call it receives whose arguments are all
 *    inline bytes, for a sequential actor whose turn is free (nothing
 *    running, queued or parked: hive__actor_claim_free), runs in place:
 *    the worker takes the turn under poll_lock (calls handled after it
 *    queue behind it, so per-caller and lane order hold), copies the
 *    arguments out of the request buffer, lets poll_lock go, runs the
 *    method with a task and a result record on its stack, and sends the
 *    reply from what the method returned, before the actor's turn is
 *    given back (hive__actor_run_here's done callback) - no task, no
 *    result in the store, no job; then it starts that request receive again (the other
 *    one takes requests meanwhile). Any other call becomes a job on its own
 *    deque, so it runs the method where it took the call and sends the
 *    reply from there: the callee's side of a round trip has no wake-up.
 *  - The progress thread receives only while nobody else polls (pollers,
 *    a hint; it naps meanwhile): it serves other ranks' requests (a
 *    hive_call into the actor, which wakes a parked worker), answers the
 *    replies nobody waits for, and finishes handed-over transfers. It
 *    polls while transfers are in flight and for 1 ms after its own last
 *    activity, yielding the CPU between polls; otherwise it sleeps on a
 *    futex with a timeout that doubles from 16 us to 1 ms (128 us while
 *    answers are awaited), and to IDLE_MAX once the rank has been idle for
 *    100 ms. A local request cuts only a deep sleep short (no wake-up per
 *    call); a worker that stops polling to park hands the polling back
 *    with a wake. A request from another rank into an idle rank waits at
 *    most that timeout. Open MPI has no blocking wait that does not
 *    busy-poll (MPI_Recv, MPI_Wait spin; the "blocking receive on a
 *    wake-up tag" technique would burn a core per idle rank), so the
 *    timeout is the price of an idle rank using ~0 CPU (docs/scale-out.md).
 *  - Whoever polls holds poll_lock from the test (or probe) until the
 *    message is handled (a call pushed into its actor's mailbox, or its
 *    turn taken), so requests are handled in the order MPI matched them,
 *    whichever thread takes them. An answer taken by its own posted receive is
 *    handled by its waiter outside poll_lock: nothing waits on the order
 *    of answers (a subscribed cell acquire first takes in what arrived).
 *  - A remote call's future is no store record but a slot of w->futs
 *    (fut_t below), claimed by a CAS and indexed by the request's
 *    sequence number, which the answer carries: the answer's taker writes
 *    it there, hive_get reads it there (driving it first, on a receive
 *    posted for it), hive_release frees the slot. The pending table
 *    (plock) is left to gets, lookups, kills and cells. A record is made
 *    for a future only where the core needs one.
 *  - Ordering: a thread's sends to one rank on one tag do not overtake each
 *    other (MPI), so a caller's calls reach the callee's actor queues in the
 *    order they were made (an M_BIG envelope takes its request's place:
 *    its body is received as the envelope is handled); the callee
 *    receives them in that order and the actor keeps it per lane.
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

/* A blocking receive returned: MPI may have copied the bytes in on
 * another thread that drove its progress meanwhile (the progress thread's
 * MPI_Test), telling the receiver through Open MPI's own atomics, which
 * TSan does not see (Open MPI is not built with it). Under TSan the range
 * is marked as new memory of this thread: a later read is checked against
 * hive's own accesses only. */
#if defined(__SANITIZE_THREAD__)
void AnnotateNewMemory(const char *file, int line, const volatile void *mem, size_t size);
/* In pieces of 16 KiB: TSan resets a range above its clear_shadow_mmap_threshold
 * (64 KiB) by writing its ends and remapping the shadow pages between, and in
 * a CI run a read of a 70,000-byte receive (test_name_lookup's long name)
 * still met the copying thread's earlier write; ranges this small are
 * written cell by cell. */
static inline void hive__mpi_received(const char *file, int line, const void *p, size_t n)
{
    for (size_t off = 0; off < n; off += (size_t)16 << 10)
        AnnotateNewMemory(file, line, (const char *)p + off,
                          n - off < ((size_t)16 << 10) ? n - off : (size_t)16 << 10);
}
#define HIVE__MPI_RECEIVED(p, n) hive__mpi_received(__FILE__, __LINE__, (p), (n))
/* A blocking send returned: MPI may have read the bytes on another thread
 * (its progress), which it orders with atomics TSan does not see, and the
 * buffer (often on the stack) is reused now: marked new likewise. */
#define HIVE__MPI_SENT(p, n) hive__mpi_received(__FILE__, __LINE__, (p), (n))
#else
#define HIVE__MPI_SENT(p, n) ((void)0)
#define HIVE__MPI_RECEIVED(p, n) ((void)0)
#endif

#define HIVE__MPI_INLINE   (32u << 10)   /* payloads up to this travel inside the header message */
#define HIVE__MPI_CHUNK    (1u << 30)    /* largest single data message */
#define HIVE__MPI_SMALL    1024u         /* messages up to this go with MPI_Send (below every
                                            transport's eager limit: it returns at once) */
#define HIVE__MPI_BUCKETS  4096u
#define HIVE__MPI_TAG_CTRL 1
#define HIVE__MPI_TAG_REPLY0 16       /* reply tags: REPLY0 + (req & tag_mask); body tags above them */
#define HIVE__MPI_CTRL_CAP (64u << 10)   /* the posted receive for requests takes messages up to
                                            this; a larger request goes as an M_BIG envelope and
                                            its whole message on dcomm (hive__mpi_body_tag) */

enum { M_CALL = 1, M_GET, M_LOOKUP, M_KILL, M_REPLY, M_CELL, M_PUSH, M_PUBLISH, M_BIG, M_SHORT, M_CALLS };

/* Every control message starts with this (then the call's arguments, or
 * an inline payload, or a name), but for the short answers and calls
 * (wire_short_t, wire_calls_t below), whose first word is the type too. */
typedef struct wire_hdr {
    uint32_t type;
    int32_t  status;        /* M_REPLY: HIVE_OK or the failure code */
    uint64_t req;           /* the requester's request id, echoed in the reply */
    uint64_t id;            /* actor / object id; M_REPLY of a lookup: the actor found */
    uint64_t size;          /* M_REPLY: payload bytes; M_CALL: argument bytes following */
    uint32_t method, nargs;
    int32_t  prio, has_prio;
} wire_hdr_t;

/* An M_REPLY that says only "HIVE_OK, these size bytes" (no id, no flags)
 * with at most HIVE__MPI_SHORT_MAX of them: this 16-byte header (type
 * first, as wire_hdr_t's) and the bytes, instead of 48 + the bytes. Open
 * MPI's shared-memory send and its receiver's copy cost more as a small
 * message grows (a 56-byte message takes ~100 ns longer there and back
 * than a 24-byte one, 8 B round trip 2 ranks); the receiver rebuilds the
 * long header (handle). */
typedef struct wire_short {
    uint32_t type;          /* M_SHORT */
    uint32_t size;
    uint64_t req;
} wire_short_t;
#define HIVE__MPI_SHORT_MAX 48u

/* A slot future's answer (its request id carries HIVE__MPI_FUT_BIT) that
 * says only "HIVE_OK, these bytes" with at most HIVE__MPI_BARE_MAX of them
 * goes as the bytes alone, with no header at all: every other message on
 * a reply tag is at least a wire_short_t, so a message of up to 8 bytes
 * there is one of these; its tag names the slot (the tag's low 12 bits are
 * the request's, and HIVE__MPI_FUTS = 4096 <= tag_mask + 1: the smallest
 * tag_ub MPI allows, 32767, gives 4096 reply tags), and the slot's key the
 * request (on_bare). Open MPI's shared-memory path carries up to 8 bytes
 * faster than anything longer: raw ping-pongs of 40 B there and 8 B back
 * took 0.81-0.84 us against 40/16 B 0.86-0.89 us and 40/24 B (the short
 * form of an 8-byte answer) 0.87-0.89 us (medians of 50,000, alternating
 * in one run, 2 ranks, 2026-12-04). */
#define HIVE__MPI_BARE_MAX 8u

/* A call whose arguments are all inline bytes, at most HIVE__MPI_CALLS_ARGS
 * of them, whose priority (if any) fits 8 bits, and that fits the posted
 * receive (a slot future's call): this 24-byte header, then per argument
 * its size (8 bytes: the low 4 the size, the rest 0) and its bytes padded
 * to 8, instead of wire_hdr_t's 48 and 16 per argument (an 8-byte call:
 * 40 bytes instead of 72; see wire_short_t). An argument's bytes start at
 * a multiple of 16 when the sizes before it are (a 4 KiB one stays where
 * it arrived: claim_in_place). */
typedef struct wire_calls {
    uint32_t bits;          /* M_CALLS | has_prio << 8 | nargs << 16 | (uint8_t)prio << 24 */
    uint32_t method;
    uint64_t req;
    uint64_t actor;
} wire_calls_t;
#define HIVE__MPI_CALLS_ARGS 8u

/* One argument on the wire, followed by size bytes padded to 8 if inline. */
typedef struct wire_arg {
    uint64_t ref;           /* 0: inline bytes */
    uint64_t size;
} wire_arg_t;

/* A request this rank made and waits for the answer to (in w->pend, under plock). */
typedef struct pend {
    struct pend  *next;      /* bucket chain */
    uint64_t      req;
    int           kind;      /* M_CALL, M_GET, M_LOOKUP, M_KILL */
    hive__obj_t  *obj;       /* where the answer goes (a count held) */
    int           dest;      /* where the request went (-1: every other rank) */
    int           waiting;   /* M_LOOKUP: answers still to come */
    uint64_t      found;     /* M_LOOKUP: best actor id so far */
    uint64_t      actor;     /* M_CALL, M_KILL: the actor (a dead one leaves the name cache) */
    int           found_rank;
    uint64_t     *keep;      /* M_CALL: local refs retained until the reply */
    size_t        nkeep;
    struct cell_answer *cell;   /* M_CELL: the seq and whether it changed */
} pend_t;

/* A remote call's future without a store record: a slot of w->futs,
 * found from its id (this rank's tag, generation 0, the request's
 * sequence number in the low 30 bits: hive__id_future) and from its
 * answer (the request id, which carries HIVE__MPI_FUT_BIT; slot = the
 * sequence number modulo HIVE__MPI_FUTS). The caller claims a free slot
 * with a CAS on key and publishes it with a release store of the request
 * id before it sends the call; whoever takes the answer writes it into the
 * slot and releases it through st; hive_get of the id reads it from there.
 * A record is made for it only where the core needs one (localize: a
 * task's argument, hive_wait, ...), or for an answer above
 * HIVE__MPI_FUT_INLINE bytes (state FUT_REC: the record has it) - but
 * one of up to HIVE__MPI_INLINE bytes that its waiter took with its own
 * posted receive stays in that receive's buffer, which the slot keeps
 * (heap; FUT_DONE). A call
 * whose slot is still held by an older future takes the record path.
 *
 * The user's counts live in `holds` beside the generation of the future
 * that holds them (the id's low 30 bits: HIVE__MPI_FUT_GEN), so that
 * hive_retain and hive_release check "this id's future still holds the
 * slot" in the same CAS that moves the count: a stale id (released
 * twice) whose slot a newer call took meanwhile finds another generation
 * there and is refused (HIVE_ENOENT), instead of moving the newer
 * future's count. Ids repeat after 2^30 calls: a stale id held that long
 * is not told from the new one. */
#define HIVE__MPI_FUTS       4096u
#define HIVE__MPI_FUT_BIT    (1ull << 63)     /* in a request id: its answer goes to a slot */
#define HIVE__MPI_FUT_INLINE 48u
#define HIVE__MPI_FUT_CLAIM  1ull             /* key while its claimer fills the slot */
#define HIVE__MPI_FUT_IDBITS ((1ull << 30) - 1)   /* an id's (and a key's) sequence bits */
/* holds: the generation (the id's sequence bits) above, the count below */
#define HIVE__MPI_FUT_GEN(id)   (((uint64_t)(id) & HIVE__MPI_FUT_IDBITS) << 32)
#define HIVE__MPI_FUT_COUNT(hd) ((uint32_t)(hd))
/* the count: 1 while the answer is not in, 2 per user count (bits 1-15:
 * at most 32,767 counts), HIVE__MPI_FUT_PIN per hold of the layer's
 * (bits 16-31: a call's ref argument until its answer, a served get's
 * while it makes the record), which no user's release can take */
#define HIVE__MPI_FUT_PIN      (1u << 16)
#define HIVE__MPI_FUT_USERS(n) ((n) & (HIVE__MPI_FUT_PIN - 2))   /* 2 per user count */
/* hive__mpi_fut_count's moves: a user's count taken or dropped; a pin taken
 * for a call's argument (while a user holds the future: the caller names
 * it) or for another rank's get (while anyone does), or dropped */
enum { HIVE__MPI_FUT_RETAIN, HIVE__MPI_FUT_RELEASE, HIVE__MPI_FUT_KEEP, HIVE__MPI_FUT_SERVE,
       HIVE__MPI_FUT_UNPIN };
enum { FUT_PENDING, FUT_DONE, FUT_FAILED, FUT_REC };

typedef struct fut {
    _Atomic uint64_t key;    /* the request id using the slot (with FUT_BIT); 0 free; FUT_CLAIM */
    /* HIVE__MPI_FUT_GEN of the future's id | its count: 2 per user count
     * (hive_retain adds one), plus 1 while the answer is not in, plus
     * HIVE__MPI_FUT_PIN per pin of the layer's; whoever
     * takes the count to 0 frees the slot (the generation stays: a stale
     * id's CAS fails against it, and against the next claimer's) */
    _Atomic uint64_t holds;
    _Atomic uint32_t st;     /* FUT_*: release by the answer's writer, acquire by readers */
    _Atomic(hive__obj_t *) rec;   /* the record made for it (a count held by the slot), or NULL */
    _Atomic int   sealed;    /* rec has been given the answer (claimed by exchange) */
    int32_t       status;    /* FUT_FAILED: the code */
    uint32_t      size;      /* FUT_DONE: bytes in `bytes`, or at heap + sizeof(wire_hdr_t) */
    /* FUT_DONE with an answer above HIVE__MPI_FUT_INLINE bytes that its
     * waiter received with its own posted receive (up to HIVE__MPI_INLINE):
     * the waiter's receive buffer itself, header first, given to the slot
     * (freed with it) instead of copied into a record; else NULL */
    char         *heap;
    int           dest;      /* the callee's rank */
    uint64_t      actor;
    uint64_t     *keep;      /* local refs retained until the answer (malloc'd) */
    size_t        nkeep;
    _Alignas(16) unsigned char bytes[HIVE__MPI_FUT_INLINE];
} fut_t;

/* What a cell request learns besides the payload (written before the seal). */
typedef struct cell_answer {
    uint64_t seq;
    int      unchanged;      /* the requester's copy is current: no payload came */
    int      subscribed;     /* the owner pushes new versions here from now on */
} cell_answer_t;

/* The latest version of a remote cell copied here. */
typedef struct cell_copy {
    struct cell_copy *next;
    uint64_t          cell, seq;
    hive__obj_t      *obj;   /* a count held */
    bool              pushed;   /* subscribed: the owner pushes every new version here */
} cell_copy_t;

/* The ranks a cell owned here pushes its versions to. */
typedef struct cell_subs {
    struct cell_subs *next;
    uint64_t          cell;
    int               n;
    int               ranks[];  /* w->size slots */
} cell_subs_t;

/* An MPI request in flight and what to do when it completes. */
typedef struct xfer {
    void        *free_buf;   /* free() on completion */
    hive__obj_t *release;    /* release on completion (payload sent from it) */
    hive__obj_t *seal;       /* seal on completion, once all its parts are in */
    _Atomic int *parts;      /* parts of that payload still in flight (shared, malloc'd) */
} xfer_t;

/* A send that did not complete at once, handed to the progress thread. */
typedef struct handed {
    struct handed *next;
    MPI_Request    req;
    xfer_t         x;
} handed_t;

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
    uint64_t       holds;    /* the first use's, plus one per hive_retain; hive_release drops one */
} cached_t;

/* The statistics a caller's round trip counts (a call sent, an answer
 * its own posted receive took), per thread: each thread counts in a cell
 * of its own with a load and a store, where an atomic add is a locked
 * instruction (~6 ns each on this machine, two per round trip, against a
 * raw MPI ping-pong of ~0.4 us), and hive_mpi_stats adds the cells up. A
 * thread takes a cell at its first count in a world (hive__mpi_cell);
 * threads past the HIVE__MPI_CELLS-th count in the shared st_* words. 64
 * bytes apart: one thread's counts share no cache line with another's. */
#define HIVE__MPI_CELLS 64u
typedef struct stat_cell {
    _Atomic uint64_t calls_sent, recv_own;
    char             pad[64 - 2 * sizeof(uint64_t)];
} stat_cell_t;

typedef struct world {
    hive__remote_ops_t ops;  /* ops.ctx == this */
    uint64_t      epoch;     /* this attach's number (from 1): a thread's cell belongs to one */
    hive_t       *h;
    MPI_Comm      comm;
    int           rank, size;
    pthread_t     thread;

    MPI_Comm      dcomm;     /* payloads above HIVE__MPI_INLINE, on the reply's tag; the
                                bodies of requests above HIVE__MPI_CTRL_CAP, on their body tag */
    MPI_Comm      rcomm;     /* answers (M_REPLY), on the request's reply tag */
    int           tag_ub;
    uint64_t      tag_mask;  /* reply and body tags: a power of two less one, below tag_ub / 2 */
    /* Two receives posted for requests (TAG_CTRL on comm, from any rank),
     * persistent (MPI_Recv_init): tested, handled and started again by
     * whoever holds poll_lock, so a request is matched into a buffer as it
     * arrives (no probe, no copy through MPI's unexpected queue). MPI
     * matches them in the order they were started, and they are tested in
     * that order (cq), so requests are handled one at a time in the order
     * MPI matched them. The second lets an idle worker that runs a call in
     * place start its buffer again after it answered (off the round trip)
     * while requests keep arriving in the other. */
    MPI_Request   creq[2];
    int           cq[2];     /* the started ones, oldest first */
    int           ncq;       /* how many are started (0 once closed) */
    char         *cbuf;      /* 2 x HIVE__MPI_CTRL_CAP bytes: creq[i] receives at cbuf + i x CAP */

    pthread_mutex_t qlock;   /* handed, ready, detach_asked */
    handed_t     *handed;
    served_t     *ready;     /* served records answered, to free */
    bool          detach_asked;
    _Atomic uint32_t kick;   /* futex word: bumped by every push */
    _Atomic uint32_t sleeping;   /* 0 awake, 1 a short nap, 2 a long sleep (requests wake it) */
    _Atomic int   closing;   /* detach began: new requests are refused */
    _Atomic uint64_t next_req;

    /* held by the one thread testing the request receives and probing
     * rcomm, and handling what it took: a flag, not a mutex (poll_try) */
    _Atomic int   poll_lock;
    _Atomic int   pollers;   /* threads polling besides the progress thread: callers driving
                                their answers, the idle worker holding the claim (the
                                progress thread sleeps meanwhile) */
    _Atomic uint64_t seen_ns;  /* when a thread last handled another rank's request (a hint: hot or cold) */
    _Atomic int   handoff;   /* the last polling worker went to sleep: poll soon again */
    pthread_mutex_t plock;   /* pend, npend, phase changes */
    pend_t       *pend[HIVE__MPI_BUCKETS];
    size_t        npend;
    _Atomic int   phase;     /* 0 run, 1 detach asked, 2 in the barrier, 4 barrier done, 3 stop */
    _Atomic size_t nserving; /* served records not yet answered */
    /* 1 while the idle worker runs a call in place, from its claim (under
     * poll_lock) to its answer sent: one at a time (the core's poll claim),
     * so a store, not a count. The progress thread polls meanwhile (it
     * does not count this worker among the pollers), and detach waits for
     * it as for nserving. */
    _Atomic int   in_place;
    fut_t        *futs;      /* HIVE__MPI_FUTS slots: record-free futures of calls */
    _Atomic size_t nfut;     /* slots whose answer is not in (detach waits for 0) */

    /* progress thread only */
    MPI_Request  *reqs;
    xfer_t       *xfers;
    size_t        nreqs, capreqs;
    MPI_Request   barrier;

    pthread_mutex_t clock;   /* the cache */
    cached_t     *cache[HIVE__MPI_BUCKETS];
    cell_copy_t  *cells;     /* remote cells read here (a short list: few cells per program) */
    struct name_hit *names;  /* names found on other ranks (a short list: a program's services) */
    cell_subs_t  *subs;      /* cells owned here with subscribers */

    _Atomic uint64_t st_calls_sent, st_calls_served, st_fetches, st_fetch_bytes,
                     st_gets_served, st_cache_hits, st_sleeps, st_lookups, st_lookup_hits, st_pushes, st_cell_local,
                     st_recv_progress, st_recv_waiting, st_recv_idle, st_in_place, st_recv_own;
    stat_cell_t   tcount[HIVE__MPI_CELLS];   /* the threads' own counts (stat_cell_t) */
    _Atomic unsigned ntcount; /* tcount cells taken (may pass HIVE__MPI_CELLS: those threads have none) */
} world_t;

/* attach.c: an actor reported dead leaves the name cache */
void  hive__mpi_forget_actor(world_t *w, uint64_t actor);
/* attach.c: a pushed version of a remote cell (NULL: drop the copy, ask next time) */
void  hive__mpi_cell_pushed(world_t *w, uint64_t cell, uint64_t seq, hive__obj_t *o);
/* progress.c: add src to a cell's subscribers; push a version to them */
bool  hive__mpi_subscribe(world_t *w, uint64_t cell, int src);
void  hive__mpi_push_version(world_t *w, uint64_t cell, hive__obj_t *v, uint64_t seq);
/* progress.c: receive what has arrived if no other thread is at it */
void  hive__mpi_poll_once(world_t *w);

/* progress.c */
void *hive__mpi_progress(void *arg);
void  hive__mpi_wake(world_t *w);
void  hive__mpi_nudge(world_t *w);      /* wake it only from a long sleep */
bool  hive__mpi_idle(void *ctx, int what);   /* the core's idle hook (remote.h) */
void  hive__mpi_count(_Atomic uint64_t *c, uint64_t n);
/* A statistic only one thread writes (every writer holds poll_lock, or it
 * is a thread's own cell): a load and a store (no locked instruction);
 * relaxed, as hive__mpi_count's */
static inline void hive__mpi_count_locked(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}
/* This thread's cell in w (stat_cell_t), taken at its first use; NULL if
 * all are taken. The thread remembers the world's epoch with it, so a
 * cell of a detached world is never used again. */
typedef struct hive__mpi_mine {
    uint64_t     epoch;
    stat_cell_t *cell;
} hive__mpi_mine_t;
extern __thread hive__mpi_mine_t hive__mpi_mine;
stat_cell_t *hive__mpi_cell_take(world_t *w);
static inline stat_cell_t *hive__mpi_cell(world_t *w)
{
    return hive__mpi_mine.epoch == w->epoch ? hive__mpi_mine.cell : hive__mpi_cell_take(w);
}
/* Count one in this thread's cell's field, or in the shared st_field */
#define HIVE__MPI_COUNT_MINE(w, field)                                            \
    do {                                                                          \
        stat_cell_t *mine_ = hive__mpi_cell(w);                                   \
        if (mine_ != NULL)                                                        \
            hive__mpi_count_locked(&mine_->field);                                \
        else                                                                      \
            hive__mpi_count(&(w)->st_##field, 1);                                 \
    } while (0)
void  hive__mpi_drain(world_t *w);      /* after the thread ended: free what is left */
static inline int hive__mpi_reply_tag(const world_t *w, uint64_t req)
{
    return HIVE__MPI_TAG_REPLY0 + (int)(req & w->tag_mask);
}
/* The tag of a large request's body on dcomm: above every reply tag, so
 * it never meets a payload part there. */
static inline int hive__mpi_body_tag(const world_t *w, uint64_t req)
{
    return HIVE__MPI_TAG_REPLY0 + (int)(w->tag_mask + 1 + (req & w->tag_mask));
}
/* The slot of a record-free future id (this rank's tag, generation 0)
 * if a future with that id holds it; acquire: the claimer's fields. */
static inline fut_t *hive__mpi_fut_find(world_t *w, uint64_t id)
{
    fut_t *f = &w->futs[id & (HIVE__MPI_FUTS - 1)];
    uint64_t k = atomic_load_explicit(&f->key, memory_order_acquire);
    return (k & HIVE__MPI_FUT_BIT) && ((k ^ id) & HIVE__MPI_FUT_IDBITS) == 0 ? f : NULL;
}
/* progress.c: send a request that has no pending record (a record-free
 * future's call: its slot is published already) */
void  hive__mpi_send(world_t *w, int dest, void *msg, size_t len, bool owned);
/* progress.c: make and start the request receive (attach, before any
 * thread polls); cancel and free it (detach, after the last poll) */
void  hive__mpi_open_ctrl(world_t *w);
void  hive__mpi_close_ctrl(world_t *w);
/* Send a request on the caller's thread: p goes into the pending table
 * first (HIVE_ESHUTDOWN if detach passed its barrier). owned: msg was
 * malloc'd and is freed either way; else it is the caller's (a small one
 * goes with MPI_Send from it, a large one from a copy). */
int   hive__mpi_request(world_t *w, int dest, void *msg, size_t len, pend_t *p, bool owned);
/* Receive and handle this rank's messages on the calling thread (one
 * thread at a time probes: poll_lock) until obj finishes or budget_ns
 * passed; the progress thread takes over after. src >= 0: obj is the
 * answer to request req sent to src, whose reply this thread receives
 * with a receive posted for it (matched as it arrives, straight into a
 * buffer of this thread: no probe, no unexpected-message copy), probing
 * for other ranks' requests only every few looks. */
void  hive__mpi_drive(world_t *w, hive__obj_t *obj, int64_t budget_ns, int src, uint64_t req);
/* The same for a record-free future: until f's answer is in. */
void  hive__mpi_drive_fut(world_t *w, fut_t *f, int64_t budget_ns);
/* The bytes of a FUT_DONE answer (acquire of st first) */
static inline const void *hive__mpi_fut_bytes(const fut_t *f)
{
    return f->heap != NULL ? (const void *)(f->heap + sizeof(wire_hdr_t)) : (const void *)f->bytes;
}
/* progress.c: f's record, made if it has none (a count held by the slot;
 * NULL: out of memory, the failure set) */
hive__obj_t *hive__mpi_fut_rec(world_t *w, fut_t *f);
/* progress.c: drop a hold (2: a user's count, 1: the answer's); the last
 * frees the slot (hive__mpi_fut_free, for one that took the last itself) */
void  hive__mpi_fut_drop(world_t *w, fut_t *f, uint32_t n);
/* progress.c: move a hold (HIVE__MPI_FUT_RETAIN, ...) on the future id
 * names, if that future holds its slot: one CAS checks the generation and
 * moves the count. false, with the code in *rc: no future of that id
 * holds what the move needs (released, never made, or its slot reused:
 * HIVE_ENOENT; a user's release that finds only the layer's pins:
 * HIVE_ESTATE; a count that would overflow: HIVE_EINVAL); the slot is
 * not touched. */
bool  hive__mpi_fut_count(world_t *w, uint64_t id, int move, int *rc);
void  hive__mpi_fut_free(world_t *w, fut_t *f);
bool  hive__mpi_serving(void);
/* A zeroed pending record (this thread's last freed one, if it kept one);
 * its release (local refs kept) and free. */
pend_t *hive__mpi_pend_new(void);
void  hive__mpi_pend_free(world_t *w, pend_t *p);

/* Holds on records. The layer's own holds are pins (store.h: HIVE__PIN):
 * a request's on the record its answer fills, the cache's and each
 * user's while it reads on a remote object's copy, a cell copy list's, a
 * slot's on its future's record, a served request's on its result, its
 * object or its fetched arguments, a send's per part in flight, a remote
 * call's on its local ref arguments (keep). A user count is taken only
 * for what is handed to a user: the record-path future of a remote call,
 * the version of a remote cell an acquire returns. So a user's release
 * once too many is refused (HIVE_ESTATE) instead of freeing a record
 * under the layer. */

/* A pending record with no payload yet: the future a remote answer fills,
 * with the request's pin and first (1: a user count for the caller;
 * HIVE__PIN: a pin for the caller; 0: none more). */
int   hive__mpi_placeholder(world_t *w, int64_t first, hive__obj_t **out);
/* A placeholder never sent: failed with code, both its holds dropped. */
void  hive__mpi_placeholder_drop(world_t *w, hive__obj_t *o, int code, int64_t first);
/* progress.c: a local ref argument of a remote call kept until the answer
 * (a pin; a slot future's id: a pin on its slot), i its index for the
 * sentence; and the list of them given back and freed */
int   hive__mpi_keep(world_t *w, hive_ref_t ref, size_t i);
void  hive__mpi_unkeep(world_t *w, uint64_t *keep, size_t n);

#endif
