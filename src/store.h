/*
 * store.h - objects: id -> record lookup (handles.h: an id names a slot,
 * and the slot is the record), states, counts, waiting, seal and free.
 *
 * A record lives in the table's chunks, its payload inline in it or in the
 * arena. The record is found by id through the table while inside an RCU
 * read-side section; the caller's own count keeps it alive afterwards. The
 * last release unpublishes it and frees it through call_rcu, after every
 * reader that could still have found it has left its read-side section;
 * its slot (the record's memory) is reused after that, under a new
 * generation.
 *
 * The state word is also a futex: PENDING until seal or failure; a getter
 * that must sleep sets WAITERS first, and a seal issues a wake only when it
 * finds that bit.
 */
#ifndef HIVE_STORE_H
#define HIVE_STORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hive.h"
#include "handles.h"
#include "sched.h"
#include "util/rcu.h"

enum {
    HIVE__PENDING = 0,
    HIVE__SEALED  = 1,
    HIVE__FAILED  = 2,
    HIVE__STATE_MASK = 3,
    HIVE__WAITERS = 4,               /* someone sleeps on the state word */
    HIVE__CODE_SHIFT = 8,            /* FAILED: bits 8.. hold -code (see hive__obj_fail_code) */
};

/* The kinds of record; the store treats them all alike, except that only
 * blobs and arrays have a payload to get (a kind's extra state goes in the
 * record's union and its drop hook). */
enum { HIVE__BLOB = 1, HIVE__ARRAY = 2, HIVE__CELL = 3, HIVE__ACTOR = 4, HIVE__KINDS = 5 };

/* The kind with its article, for sentences: "object 7 is an actor handle". */
static inline const char *hive__kind_name(unsigned kind)
{
    switch (kind) {
    case HIVE__BLOB:  return "a blob";
    case HIVE__ARRAY: return "an array";
    case HIVE__CELL:  return "a cell";
    case HIVE__ACTOR: return "an actor handle";
    default:          return "an object of unknown kind";
    }
}

/* Task results only: where the producing task is (task.c). It lives in
 * the state word, bits HIVE__RUN_SHIFT.., beside the state it decides, so
 * that a task's finish - RUNNING -> DONE, PENDING -> SEALED, or FAILED
 * when a cancel asked - is one CAS, and a cancel of a queued task one too. */
enum { HIVE__RUN_NONE = 0, HIVE__RUN_QUEUED, HIVE__RUN_RUNNING, HIVE__RUN_DONE, HIVE__RUN_CANCELLED,
       HIVE__RUN_CANCEL_ASKED };     /* running, and hive_cancel asked it to stop */
enum { HIVE__RUN_SHIFT = 4, HIVE__RUN_MASK = 7u << HIVE__RUN_SHIFT };
_Static_assert(HIVE__RUN_CANCEL_ASKED <= 7 && HIVE__RUN_SHIFT + 3 <= HIVE__CODE_SHIFT &&
               (HIVE__RUN_MASK & (HIVE__STATE_MASK | HIVE__WAITERS)) == 0,
               "the run bits sit between the waiters bit and the failure code");

static inline uint32_t hive__run_of(uint32_t state_word)
{
    return (state_word & HIVE__RUN_MASK) >> HIVE__RUN_SHIFT;
}

/* Someone waiting for an object to finish (a task's pending argument). The
 * store calls ready(dep, failed) once, from whichever thread seals or fails
 * the object, or at once if it already had. */
typedef struct hive__dep {
    struct hive__dep *next;
    void (*ready)(struct hive__dep *dep, bool failed);
    bool failed;                     /* store.c's worklist: the outcome to deliver */
} hive__dep_t;

#define HIVE__DEPS_CLOSED ((hive__dep_t *)1)

struct hive__arr_meta;

/* A small task's whole queued body (task.c): it lives in its result
 * record's inline payload from submit until a worker takes it, so a queued
 * small task costs its result record and nothing else. The worker copies
 * what it needs onto its stack before the function runs (and may write the
 * result into the same bytes). */
#define HIVE__QTASK_ARGS 24
typedef struct hive__qtask {
    hive__job_t       job;           /* the scheduler's link and small_job */
    hive_fn           fn;
    struct hive      *h;
    uint64_t          meta;          /* nargs, lane, node, retries, sizes (task.c) */
    unsigned char     args[HIVE__QTASK_ARGS];   /* inline arguments, 8-byte steps */
} hive__qtask_t;

/* Payloads of up to this many bytes (blobs: puts, creates, task and method
 * results) live in the record itself, 64-byte aligned like the arena's: no
 * arena block to allocate and free, one cache miss fewer for a get, and a
 * small object costs its 128-byte record (its slot of the table) in all. */
#define HIVE__INLINE_MAX 64

/* A record is a slot of the object table (handles.h), two cache lines: the
 * header (id, kind, state, counts, and the table's key word that finders
 * match) in the first, the inline payload in the second. Once the last
 * count is gone the payload is dead (nobody may read a payload without a
 * count), so the RCU head and the engine pointer the free needs reuse its
 * bytes. id and hkey are the table's words (handles.h): id is written by
 * hive__handles_take (and given bit 63 by actor.c before publish), hkey
 * only by the table. */
typedef struct hive__obj {
    uint64_t          id;
    _Atomic int64_t   refs;
    _Atomic(hive__dep_t *) deps;     /* waiting tasks; HIVE__DEPS_CLOSED once finished */
    size_t            size;          /* payload bytes */
    void             *data;          /* payload (64-byte aligned): inl, or an arena block */
    union {
        struct hive__arr_meta *arr;  /* HIVE__ARRAY: dtype, shape and seqlock (array.c),
                                        set before publish; freed by the arrays' drop hook.
                                        Kept out of the record so every record stays small */
        _Atomic(void *) owned;       /* another kind's own pointer (a cell's current
                                        slot: cell.c), freed by the kind's drop hook */
        struct {                     /* HIVE__ACTOR: a handle's record (actor.c) */
            struct hive__actor *actor;
        } actor;
        hive_fn task_fn;             /* a task result handed bare to its worker: the
                                        function, read once before it runs (task.c) */
    } u;
    _Atomic uint32_t  state;         /* futex word: PENDING/SEALED/FAILED | WAITERS |
                                        HIVE__RUN_* << 4 (a result's task) | -code << 8 */
    uint32_t          lent;          /* a private record its owner looked up by id
                                        (store.c, lookup_private): a count may have
                                        gone by pointer to a dependent task or call,
                                        which drops it wherever it runs; read and
                                        written by the owner alone */
    uint8_t           kind;
    _Atomic uint16_t  owner;         /* a private record's owner: its worker's index + 1; else 0 */
    _Atomic uint32_t  hkey;          /* the table's: findable key, or free-stack link */
    union {
        _Alignas(64) unsigned char inl[HIVE__INLINE_MAX];   /* a small payload */
        hive__qtask_t     queued;    /* a task result, RUN_QUEUED: its small task (task.c) */
        struct {                     /* after the last count: the free's own fields */
            struct hive     *h;
            struct rcu_head  rcu;
            struct hive__obj *next;  /* a retire list's records (store.c) */
            /* the chain's head, once flushed (store.c's flush_list): */
            struct hive__obj *last;  /* its last record */
            uint32_t         n;      /* its records */
            uint32_t         inl;    /* ... with inline payloads */
            uint32_t         objects;   /* ... that are store objects (no actor handle) */
            bool             walk;   /* some record needs a look (drop hook, arena block) */
            uint8_t          home;   /* the shard whose cache gets its slots (HIVE__SHARDS: none) */
        } dead;
    } tail;
} hive__obj_t;

/* A payload of size bytes for record o of kind: inline in o (counted in
 * the store's capacity all the same) or an arena block on node; NULL with
 * HIVE_EFULL / HIVE_ENOMEM in *err and the sentence. Sets nothing in o.
 * hive__payload_free gives o->data back, wherever it lives, and clears it. */
struct hive;
void *hive__payload_alloc(struct hive *h, struct hive__obj *o, uint8_t kind, size_t size,
                          unsigned node, int *err);
void  hive__payload_free(struct hive *h, struct hive__obj *o);
/* A blob's inline payload of size (1 .. HIVE__INLINE_MAX) bytes for o,
 * which has none yet, charged from the calling thread's reserve alone:
 * true with o->data and o->size set; false (nothing done, no sentence) if
 * the reserve is empty or the thread has no shard of its own - then
 * hive__payload_alloc. The fast path of a task's small result. */
bool  hive__payload_inline_fast(struct hive *h, struct hive__obj *o, size_t size);

/* Does o's payload live in its arena block (not inline, not absent)? */
static inline bool hive__obj_in_arena(const hive__obj_t *o)
{
    return o->data != NULL && o->data != (const void *)o->tail.inl;
}

/* Where a payload of size bytes of kind goes: inline in o, or NULL (the
 * arena). Only blobs: arrays are shared mutable memory, on their node. */
static inline void *hive__obj_inline_for(hive__obj_t *o, uint8_t kind, size_t size)
{
    return kind == HIVE__BLOB && size <= HIVE__INLINE_MAX ? (void *)o->tail.inl : NULL;
}

/* A kind's drop hook: the store calls it when a record of that kind goes,
 * before the record's memory is freed, so that the kind frees what it hung
 * on the record (u.owned). closing: the engine is closing and every record
 * goes at once; free only memory, drop no counts on other records. The
 * store knows no kind beyond this; kinds register at hive_init. */
typedef void (*hive__drop_fn)(struct hive *h, hive__obj_t *o, bool closing);

/* Every thread that uses the store has a shard of its own while it lives
 * (store.c claims one of HIVE__SHARDS for it at its first use, process-wide,
 * and gives it up at its exit; threads beyond HIVE__SHARDS at once share
 * the last, HIVE__SHARDS, whose fields are all updated by read-modify-
 * writes). A put or a release writes only its own shard's lines:
 *   - head, n: the records its thread released (a user thread; a worker
 *     has w->retired), waiting to go to call_rcu HIVE__RETIRE_BATCH at a
 *     time; anyone may take the list (flushes), so pushes are CASes;
 *   - objects: live objects, sharded: the shard's thread adds its new
 *     objects and takes away the ones it frees (so one record is often
 *     counted in one shard and uncounted in another); the sum is the count.
 *     Only the owner writes it (a plain load and store);
 *   - cache: the free slots of the records this thread released, given
 *     back by free_cb after their grace period (handles.h), from which its
 *     puts take their records;
 *   - reserve: capacity its thread took from the arena's `used` ahead of
 *     its inline payloads, HIVE__RESERVE_BATCH charges at a time, so that a
 *     put writes no counter another thread writes. Only its owner takes
 *     from it and gives to it, with a plain load and store inside a
 *     section marked by rbusy (biased: no locked instruction; a CAS where
 *     the engine has no asymmetric fence, sched.h); anyone may take it all
 *     back (an exchange: a store that is full, before it refuses; an exit)
 *     after the handshake of store.c's take_reserves, and hive_store_stats
 *     counts `used` without the reserves.
 * A thread that exits gives its cache to the table's shared free stack
 * and its reserve to the arena (store.c, shard_exit). */
#define HIVE__SHARDS 64
#define HIVE__RESERVE_BATCH 32       /* inline charges taken from the arena at once (2 KiB) */
typedef struct hive__shard {
    HIVE_ALIGNED _Atomic(struct hive__obj *) head;   /* records waiting to be freed */
    _Atomic unsigned  n;                             /* pushed since its last flush (a hint) */
    _Atomic int64_t   objects;
    _Atomic size_t    reserve;                       /* bytes of `used` not yet a payload's */
    _Atomic uint32_t  rbusy;                         /* its owner is in a plain section on reserve */
    hive__handles_cache_t cache;                     /* its own lines */
} hive__shard_t;
typedef hive__shard_t hive__retire_list_t;

typedef struct hive__store {
    hive__handles_t   table;
    /* A waiter on a worker of the engine calls this instead of sleeping:
     * it runs one other job and returns true, or returns false (then the
     * waiter sleeps a little). done(arg) says when the wait is over (a
     * worker whose stack is too deep to nest another job hands its queues
     * to a spare thread until then). Set by the engine (task.c). Read-mostly:
     * it shares no line with the counters below, which every put, call
     * and release writes. */
    bool (*help)(struct hive *h, bool (*done)(void *arg), void *arg);
    hive__drop_fn drop[HIVE__KINDS];           /* per kind, set at init (hive__store_on_drop) */
    /* Threads taking the reserves back now (store.c, take_reserves): while
     * nonzero, owners change their reserves with a CAS, not plainly. Read
     * by every charge, written only by a store that is full. */
    _Atomic uint32_t  reclaiming;
    /* Threads promoting a private record now (store.c, promote): while
     * nonzero, owners change their private records' state words and keys
     * with a CAS, not plainly. Read by every owner's claim, finish and last
     * release; written only by a promotion (its id reached another thread). */
    _Atomic uint32_t  revoking;
    HIVE_ALIGNED _Atomic uint64_t callbacks;   /* frees queued with call_rcu: release and free_cb */
    /* hive_wait: an engine-wide seal epoch that sleepers on several objects
     * wait on; a seal bumps it only when somebody waits. */
    HIVE_ALIGNED _Atomic uint32_t epoch;
    _Atomic uint32_t  epoch_waiters;
    /* Threads inside a blocking hive_get / hive_wait: shutdown fails what is
     * pending, then waits for this to drop to 0 before it frees anything
     * they may still touch. */
    HIVE_ALIGNED _Atomic uint32_t sleepers;
    HIVE_ALIGNED _Atomic uint32_t purge_asked; /* purge_job is posted */
    _Atomic uint64_t  efull;                   /* new objects refused with HIVE_EFULL (stats) */
    hive__job_t       purge_job;
    hive__shard_t     shards[HIVE__SHARDS + 1];   /* the last: threads without their own */
    struct hive__store *prev, *next;           /* the open stores (store.c, thread exits) */
} hive__store_t;

int  hive__store_open(hive__store_t *s);
/* Free every object still alive, wait for the RCU callbacks, destroy the table. */
void hive__store_close(struct hive *h);

/* The NUMA node new objects of the calling thread go to. */
unsigned hive__current_node(struct hive *h);

/* Give the arena's free memory back if it has outgrown live payloads (a
 * worker between jobs: it may make system calls). */
void hive__store_maintain(struct hive *h);

/* Was id ever handed out by this engine's store (whatever became of it)? */
bool hive__store_issued(struct hive *h, uint64_t id);

/* Does a live thread own shard i (tests: a free shard holds no slots)?
 * The calling thread's shard (claimed now if it has none yet). */
bool hive__store_shard_claimed(unsigned i);
unsigned hive__store_thread_shard(void);

/* Bytes live payloads take (the arena's `used` less the threads'
 * reserves; a moment's view): hive_store_stats' used. */
size_t hive__store_used(struct hive *h);

/* Live objects now (the sum of the shards' counts; a moment's view). */
uint64_t hive__store_objects(struct hive *h);
/* Wait until every free queued so far has run (tests, stats, shutdown). */
void hive__store_drain(struct hive *h);

/* Records whose last count went without an arena block (inline payloads)
 * wait on a retire list - a worker's own, or for a user thread its shard's
 * - and go to call_rcu HIVE__RETIRE_BATCH at a time (one
 * grace-period callback, one push of their slots). The flusher links the
 * chain's slots and counts it (store.c's flush_list), so the callback's
 * thread touches two of its records, not all of them. Workers flush their own
 * list and the user lists before they park and when they stop; drains,
 * hive_store_stats, a full store and the engine's close take every list, so
 * a record never waits on a list past any of those. */
#define HIVE__RETIRE_BATCH 64
void hive__store_flush_retired(struct hive *h, hive__worker_t *w);

/* Bytes live payloads take: the arena's `used` less the charges threads
 * hold in their reserves (a moment's view). */
size_t hive__store_used(struct hive *h);

/* A new record with one count, kind and payload of size bytes allocated on
 * node (data may be NULL: no payload yet), state PENDING, not yet visible. */
int  hive__obj_new(struct hive *h, uint8_t kind, size_t size, bool alloc_payload, hive__obj_t **out);
/* Make it findable by id (release: the record's fields are visible to
 * whoever finds it). */
void hive__obj_publish(struct hive *h, hive__obj_t *o);

/* Private records: a task result made on worker w (a blob, no payload,
 * one count, PENDING), from w's own cache of freed private records when it
 * has one, and made findable privately. Its owner w finds it by id like a
 * published one and writes no shared word for it; any other thread's
 * lookup (or a table walk) first promotes it to published, once, with one
 * CAS on the key. When the owner drops its last count and nobody promoted
 * it, nobody else can have reached it: it is freed at once into w's cache
 * (no grace period, no shared free stack: the next task result reuses the
 * line while it is in this core's cache, as a task library's own pool
 * would). Otherwise (promoted, or a last count dropped by another thread)
 * it goes the way of every record, through a grace period. The owner's
 * get, release and wait take such a record straight from its slot (no
 * find), and its last release - the count read as 1 - is the key's CAS
 * alone (store.c, release_count). */
#define HIVE__LOCAL_MAX 1024           /* free private records a worker keeps (128 KiB) */
int  hive__obj_new_private(struct hive *h, hive__worker_t *w, hive__obj_t **out);
void hive__obj_publish_private(struct hive *h, hive__obj_t *o);
/* Call fn(rec, arg) for every record published now (hive__handles_each,
 * inside an RCU read-side section), the private ones promoted first under
 * one handshake with their owners (store.c, promote) for the whole walk. */
void hive__store_each(struct hive *h, void (*fn)(void *rec, void *arg), void *arg);
/* Make a record unfindable again (an actor's handle when it dies); free it
 * with hive__obj_discard after a grace period (its memory, the table's
 * slot, is reused only then). */
void hive__obj_unpublish(struct hive *h, hive__obj_t *o);
/* Drop a record that was never published (error paths). */
void hive__obj_discard(struct hive *h, hive__obj_t *o);

/* Find a live record by id: NULL (and the sentence) if there is none. The
 * caller must hold a count, or be inside hive__rcu_lock(). */
hive__obj_t *hive__obj_find(struct hive *h, hive_ref_t ref, const char *fn);

/* Inside hive__rcu_lock(): the record of id, or NULL (no sentence). */
hive__obj_t *hive__obj_lookup(struct hive *h, uint64_t id);

/* Register dep to be told when o finishes. False if o had finished already
 * (then dep is not called; look at the state). */
bool hive__obj_add_dep(hive__obj_t *o, hive__dep_t *dep);

/* Fail every object still pending with code (shutdown), then wake every
 * hive_wait sleeper. */
void hive__store_fail_pending(struct hive *h, int code);
/* Shutdown: wait until no thread is inside a blocking get or wait. */
void hive__store_wait_sleepers(struct hive *h);

/* Wait until o is no longer pending (on a worker: running other jobs
 * meanwhile). HIVE_ETIMEDOUT after timeout_ns (< 0: never). */
int  hive__obj_wait(struct hive *h, hive__obj_t *o, int64_t timeout_ns, const char *fn);

/* Seal or fail a PENDING object, waking whoever sleeps on it. */
int  hive__obj_seal(struct hive *h, hive__obj_t *o);
void hive__obj_fail(struct hive *h, hive__obj_t *o, int code);

/* Counts on records already found. A record's refs word holds two counts:
 * its users' in the low 32 bits (a put's, a submit's result for its caller,
 * hive_retain's, a cell acquire's: what hive_release drops) and the
 * engine's own holds, pins, above (a task's on its arguments and its
 * result, a parked call's, a cell's on its version). The record lives
 * while either is nonzero. A user's release that finds no user count left
 * is refused (hive_release: HIVE_ESTATE), so a user who releases once too
 * often cannot take a count the engine still holds and free the object
 * under a running task or a cell. retain_live and pin_live fail if the
 * record has no count at all (the object is on its way out); retain_live
 * also when the users' half is full. release drops a user count, unpin a
 * pin; either one dropping the last count frees the record. */
#define HIVE__PIN   ((int64_t)1 << 32)
#define HIVE__USERS (HIVE__PIN - 1)
bool hive__obj_retain_live(hive__obj_t *o);
bool hive__obj_pin_live(hive__obj_t *o);
void hive__obj_release(struct hive *h, hive__obj_t *o);
void hive__obj_unpin(struct hive *h, hive__obj_t *o);
/* hive__obj_unpin from w, the calling thread, one of h's workers: the look
 * at who is calling done already (a task's own pin on its result, task.c). */
void hive__obj_unpin_by(struct hive *h, hive__worker_t *w, hive__obj_t *o);
/* The caller's user count on ref becomes a pin, and back to nothing: for
 * a structure that keeps an object its users can also reach by id (a
 * replay buffer's array, an env pool's batches), so that a user's release
 * too many is refused instead of freeing the object under the structure. */
void hive__ref_pin(struct hive *h, hive_ref_t ref);
void hive__ref_unpin(struct hive *h, hive_ref_t ref);

/* Register kind's drop hook (at hive_init, before any record of the kind). */

void hive__store_on_drop(struct hive *h, uint8_t kind, hive__drop_fn fn);

static inline uint32_t hive__obj_state(const hive__obj_t *o)
{
    /* acquire: pairs with the release in seal/fail (a put's record is
     * sealed before the publish's release of its key, which its finders
     * acquire), so the payload and fail_code written before are visible */
    return atomic_load_explicit(&o->state, memory_order_acquire) & HIVE__STATE_MASK;
}

/* Where the task behind a result is (HIVE__RUN_NONE: no task's result). */
static inline uint32_t hive__obj_run(const hive__obj_t *o)
{
    /* acquire: as hive__obj_state */
    return hive__run_of(atomic_load_explicit(&o->state, memory_order_acquire));
}

/* A result's task, before anyone can find the record: PENDING with run
 * (relaxed: the publish's release carries it). */
static inline void hive__obj_init_run(hive__obj_t *o, uint32_t run)
{
    atomic_store_explicit(&o->state, HIVE__PENDING | run << HIVE__RUN_SHIFT, memory_order_relaxed);
}

/* A result's task changes (task.c). claim: QUEUED -> RUNNING, false if it
 * was not queued (a cancel got there first). end_queued: a task that will
 * not run - QUEUED -> run_to, and the result FAILED with code if pending;
 * false if it was not queued. finish_run: the task ran - run DONE and the
 * result SEALED, or FAILED with code, or with HIVE_ECANCELED if a cancel
 * asked meanwhile; one CAS, then the seal's wake-ups. Returns the code the
 * result finished with (HIVE_OK: sealed), or code as given if the result
 * had been failed before (the shutdown sweep). w: the worker that runs the
 * task (NULL if none is known): when it owns the private record o, claim
 * and finish are plain stores while no promotion is under way (store.c,
 * own_enter). */
bool hive__obj_claim_run(struct hive *h, hive__worker_t *w, hive__obj_t *o);
bool hive__obj_end_queued(struct hive *h, hive__obj_t *o, int code, uint32_t run_to);
int  hive__obj_finish_run(struct hive *h, hive__worker_t *w, hive__obj_t *o, int code);

/* The code a FAILED object failed with. The code travels in the state word
 * itself, so the one finisher that wins the PENDING -> FAILED exchange also
 * decides the code: two failers (a cancel and the shutdown sweep, say)
 * never race on a separate field. */
static inline int hive__obj_fail_code(const hive__obj_t *o)
{
    /* acquire: as hive__obj_state */
    return -(int)(atomic_load_explicit(&o->state, memory_order_acquire) >> HIVE__CODE_SHIFT);
}

#endif
