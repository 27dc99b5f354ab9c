/*
 * hive.h - the public API of hive, a shared-memory engine for tasks, actors and
 * an object store on one many-core machine.
 *
 * Every function may be called from any thread at any time, except
 * hive_shutdown, and the hive_pool_* functions of one pool, which take one
 * thread at a time (see "actor pools"). Functions that can fail return HIVE_OK (0) or a negative
 * HIVE_E* code; on failure their output arguments are left untouched and
 * hive_last_error() holds a sentence with the numbers that explain it.
 */
#ifndef HIVE_H
#define HIVE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ errors */

enum {
    HIVE_OK        =   0,
    HIVE_EINVAL    =  -1,  /* bad argument: NULL where not allowed, bad dtype/shape, bad index, size overflow */
    HIVE_ENOMEM    =  -2,  /* process memory exhausted */
    HIVE_EFULL     =  -3,  /* object store full: capacity reached and nothing can be freed */
    HIVE_ENOENT    =  -4,  /* unknown, released or never-existing reference / actor / local key */
    HIVE_ETIMEDOUT =  -5,
    HIVE_ECANCELED =  -6,  /* the task or call was cancelled */
    HIVE_ETASK     =  -7,  /* the task/method failed, or one of its dependencies did */
    HIVE_EDEAD     =  -8,  /* the actor is dead: killed, constructor failed, or out of restarts */
    HIVE_ESHUTDOWN =  -9,  /* the engine is shutting down */
    HIVE_ESTATE    = -10,  /* wrong state: seal twice, put into a sealed object, wrong object kind */
    HIVE_ETOPO     = -11,  /* topology discovery or thread binding failed */
};

/*
 * hive_strerror - a short constant description of a status code.
 * Never NULL; "unknown error" for codes hive does not define.
 */
const char *hive_strerror(int status);

/*
 * hive_last_error - the calling thread's last failure as a sentence with the
 * numbers that explain it; "" if this thread has seen no failure. The string
 * stays valid until the thread's next failing hive call. A successful call
 * does not clear it: it is meaningful only right after a call reported a
 * failure (a negative status, NULL, or -1 where documented). To tell
 * whether a value-returning call failed, use the status-returning form
 * (hive_array_fetch_add_*, hive_array_write_lock/unlock).
 */
const char *hive_last_error(void);

#define HIVE_FOREVER (-1)  /* timeout_ns: < 0 waits forever, 0 polls */

/* ------------------------------------------------------------------ engine */

typedef struct hive hive_t;

typedef struct hive_config {        /* a zero-initialised config (or NULL) means all defaults */
    unsigned    workers;            /* 0: one per core of this process's cpuset */
    size_t      store_bytes;        /* object store capacity; 0: 30% of physical memory */
    int         no_pin;             /* nonzero: do not bind workers to cores */
    const char *topology;           /* NULL: this machine; else an hwloc synthetic description such as
                                       "pack:2 numa:1 core:4 pu:1": placement follows it, no binding */
    const char *trace_path;         /* NULL: $HIVE_TRACE if set, else no timeline; else where
                                       hive_shutdown writes a Chrome trace (JSON; see hive_init) */
    int         publish_stats;      /* nonzero (or $HIVE_STATS=1): publish statistics for
                                       tools/hive-top every 100 ms (see hive_init) */
    int         prefault;           /* nonzero: touch the store's memory for large objects at init
                                       (capacity bytes in all, split over the NUMA nodes), so the
                                       first big puts copy at memory speed instead of faulting pages
                                       in (as Ray's plasma store can); costs that memory up front */
} hive_config_t;

/*
 * hive_init - start an engine.
 * @cfg: NULL or a configuration; zero fields take their defaults.
 * @out: receives the engine.
 *
 * Discovers the topology (or builds the synthetic one), starts one worker per
 * slot, numbered NUMA node by node, one per core, hyperthread siblings last,
 * and binds each to its processing unit unless cfg->no_pin or a synthetic
 * topology is given. Several engines may live in one process at once.
 * Returns HIVE_EINVAL for NULL @out, for workers > 4096, for a
 * nonzero store_bytes below 4096, or for one whose address space (sparse:
 * 4 x store_bytes + 64 MiB per NUMA node) exceeds what the process can map
 * (2^47 bytes, or RLIMIT_AS), with the arithmetic in the sentence;
 * HIVE_ETOPO if discovery or binding fails, HIVE_ENOMEM if memory, threads
 * or the mapping cannot be had.
 *
 * Timeline: with trace_path (or the environment variable HIVE_TRACE=path
 * when trace_path is NULL) every worker records what it does into a ring of
 * its own, allocated here: $HIVE_TRACE_EVENTS events per worker (default
 * 65536, 64 bytes each, pages touched only as used; when full the oldest
 * are overwritten and counted). Recording takes no lock, no malloc and no
 * system call; timestamps come from the CPU's invariant TSC where there is
 * one (else CLOCK_MONOTONIC; HIVE_TRACE_CLOCK=monotonic forces it), turned
 * into ns when the file is written. hive_shutdown (and hive_trace_flush,
 * while running) writes Chrome Trace Event JSON to the path
 * (open it in ui.perfetto.dev or chrome://tracing): a track per worker
 * named "worker i (node n, core c, pu p)", a span per task (named by
 * hive_opts_t.name, else its function's symbol) and per actor method
 * ("Class.method"; with tracing on the class's name strings must live until
 * hive_shutdown), nested as helping nests them, a "wait" span for each
 * hive_get / hive_wait a job made on a worker (holding the jobs it helped
 * with meanwhile), a short span per submit and
 * call with a flow arrow to where it ran, instants for steals ("from": the
 * victim), parks and wakes, spans for parked time, and counters of store
 * bytes, live objects and queued jobs per lane. The file is created here:
 * HIVE_EINVAL with the reason if it cannot be.
 *
 * Live statistics: with publish_stats (or HIVE_STATS=1) a thread writes
 * hive_stats and every worker's figures as JSON to
 * $HIVE_STATS_DIR/hive-<pid>-<n>.json (default directory /dev/shm; mode
 * 0600, replaced whole by a rename every 100 ms, removed by hive_shutdown);
 * tools/hive-top shows them. Besides "workers", "queued", "actors" (with
 * "restarting"), "store" (with "used_high" and "efull") and "trace", the
 * file has "actors_top" (hive_actor_top's 8: id as a hex string, class,
 * name, mailbox, state "alive"/"restarting"/"dead"), "size_classes"
 * (classes holding objects, and the large area as size 0), "replay" and
 * "envpools" (as hive_replay_list / hive_envpool_list); strings are JSON-
 * escaped (bytes that are not UTF-8 become U+FFFD). HIVE_EINVAL if the file
 * cannot be written.
 */
int hive_init(const hive_config_t *cfg, hive_t **out);

/*
 * hive_shutdown - stop an engine. First every object still pending fails
 * with HIVE_ESHUTDOWN, so every waiter returns: tasks and actors waiting
 * inside the engine, and user threads blocked in hive_get / hive_wait
 * (HIVE_ESHUTDOWN, or hive_wait counting the failed object ready). Then
 * running work finishes, queued work never runs, every worker is joined,
 * the blocked user threads have left, and every byte the engine owns is
 * freed. @h is invalid afterwards: no call may start on it once shutdown
 * has begun. Must not be called from inside the engine. With a timeline,
 * it is written last; HIVE_EINVAL if the file cannot be written (the engine
 * is gone all the same). An engine attached to an MPI world (hive/mpi.h)
 * is refused with HIVE_ESTATE and left running: hive_mpi_detach it first.
 */
int hive_shutdown(hive_t *h);

/*
 * hive_trace_flush - write the timeline recorded so far to the trace file
 * (trace_path or $HIVE_TRACE), replacing what the file held, while the
 * engine runs on: a complete Chrome Trace JSON, as hive_shutdown writes at
 * the end (which writes the file once more, whole). Safe from any thread,
 * a task included, while workers record: each ring is copied event by
 * event, and an event being overwritten during the copy is left out (the
 * file's otherData.skipped counts them), never written half old, half new.
 * Flushes are serialized; each costs a pass over the rings and the file's
 * writing. HIVE_EINVAL for a NULL engine or a file that cannot be written,
 * HIVE_ESTATE if the engine records no timeline, HIVE_ENOMEM if the copy
 * cannot be allocated.
 */
int hive_trace_flush(hive_t *h);

/* The placement of one worker, for users who lay out work by NUMA node. */
typedef struct hive_worker_info {
    unsigned node;      /* NUMA node index, 0 .. hive_num_nodes()-1 (hwloc logical order) */
    unsigned core;      /* core index (hwloc logical order) */
    int      pu;        /* operating-system index of the processing unit it runs on */
    int      bound;     /* nonzero when the thread is bound to that processing unit */
} hive_worker_info_t;

/* hive_num_workers - the number of workers of @h (0 for NULL). */
unsigned hive_num_workers(const hive_t *h);

/* hive_num_nodes - the number of NUMA nodes the engine places work on (0 for NULL). */
unsigned hive_num_nodes(const hive_t *h);

/*
 * hive_worker_info - where worker @index runs.
 * Returns HIVE_EINVAL for NULL arguments or an index >= hive_num_workers(h).
 */
int hive_worker_info(const hive_t *h, unsigned index, hive_worker_info_t *out);

/* ------------------------------------------------------------------ objects
 *
 * Every object has a 64-bit id; a hive_ref_t names one and {0} is never
 * valid. An id names a slot of its engine's table plus the slot's
 * generation: the id of a released object finds nothing (HIVE_ENOENT),
 * even once its slot serves a new object, until that slot has been reused
 * 2^21 - 1 times; an id of another engine finds nothing here (engines get
 * one of 4096 tags in turn). Objects are reference counted: functions that hand
 * the caller a new ref (put, create, array_new, cell_new, cell_acquire) give
 * it one count; hive_release drops it; the last release frees the memory
 * once no concurrent reader can still see it. A pointer from hive_get or
 * hive_array_view stays valid while the caller holds a count.
 * Payloads are 64-byte aligned; zero-size objects are valid.
 */
typedef struct hive_ref { uint64_t id; } hive_ref_t;

/* hive_put - copy size bytes from data into a new sealed object. */
int hive_put(hive_t *h, const void *data, size_t size, hive_ref_t *out);

/* hive_create - reserve an object of size bytes and return where to write
 * it; hive_seal publishes it (immutable afterwards). Until sealed, getters
 * wait. HIVE_EFULL if the store is full, with the numbers. hive_seal of a
 * task's or an actor call's result is HIVE_ESTATE: only its task seals it. */
int hive_create(hive_t *h, size_t size, void **data, hive_ref_t *out);
int hive_seal(hive_t *h, hive_ref_t ref);

/* hive_get - the payload of a sealed object, zero-copy: *data points into the
 * store. Waits up to timeout_ns (< 0 forever, 0 polls) for the seal; a short
 * spin, then a futex sleep. A failed result gives its failure code
 * (HIVE_ETASK, HIVE_ECANCELED, HIVE_ESHUTDOWN or HIVE_EDEAD). size may be NULL. */
int hive_get(hive_t *h, hive_ref_t ref, int64_t timeout_ns, const void **data, size_t *size);

/*
 * hive_get_many - the payloads of n objects at once (Ray's ray.get([refs],
 * timeout)). Waits until every ref is sealed or failed, or timeout_ns passes
 * (< 0 forever, 0 polls); inside a task it runs other work while it waits,
 * as hive_get does. Then datas[i] points at the payload of refs[i] (as
 * hive_get: zero-copy, valid while the caller holds a count) or is NULL;
 * sizes[i] is its size (0 when NULL); status[i] is HIVE_OK, the object's
 * failure code (HIVE_ETASK, HIVE_ECANCELED, HIVE_ESHUTDOWN, HIVE_EDEAD),
 * HIVE_ETIMEDOUT if it was still pending at the deadline (HIVE_ESHUTDOWN
 * if the engine began to shut down meanwhile), HIVE_ENOENT if
 * the ref names no object, or HIVE_ESTATE for a cell or actor handle.
 * sizes and status may be NULL; datas is written even when the call fails
 * (its entries are scratch space while it waits: no allocation for any n).
 * Returns HIVE_OK if every status is HIVE_OK, else the status of the first
 * failing ref (lowest index), with a sentence naming it and how many failed;
 * HIVE_EINVAL (nothing written) for a NULL engine, NULL refs or datas with
 * n > 0, or n so large that an array of n refs overflows a size.
 * Among millions of objects it is the faster way to read many: it fetches
 * the refs' records ahead, 16 at a time, so their cache misses overlap.
 */
int hive_get_many(hive_t *h, const hive_ref_t *refs, size_t n, int64_t timeout_ns,
                  const void **datas, size_t *sizes, int *status);

/* hive_retain / hive_release - add or drop one count. Releasing a count the
 * caller does not hold is an error only when it is detectable: a ref whose
 * object is already gone gives HIVE_ENOENT; one whose users' counts are all
 * released while the engine still holds it itself (a queued task's or
 * call's argument or result, a cell's version) gives HIVE_ESTATE, and the
 * engine's holds stay - a release too many never frees an object under a
 * task or a cell. hive_retain gives HIVE_ESTATE past 2^32 - 1 counts on one
 * object. hive_get takes no count. The last release makes the
 * object unfindable at once; its memory comes back after an RCU grace
 * period, and small objects (payload <= 64 bytes) go in batches of 64 per
 * thread: until a batch is flushed - when full, when a worker runs out of
 * work, at hive_store_stats, when the store is full, at shutdown - they
 * still count in hive_store_stats' objects and used. One exception: the
 * result of a small task submitted inside a task (a fork-join child) that
 * only its spawner's worker ever looked up is freed at once when that
 * worker drops its last count, and its memory serves that worker's next
 * result. */
int hive_retain(hive_t *h, hive_ref_t ref);
int hive_release(hive_t *h, hive_ref_t ref);

/* hive_wait - wait until at least num_ready of the n refs are ready (sealed
 * or failed), or timeout_ns passes. Returns the count ready (>= num_ready) or
 * HIVE_ETIMEDOUT; ready (may be NULL) gets 1 for each ready ref, else 0.
 * HIVE_EINVAL if n is so large that a table of n pointers overflows a size,
 * HIVE_ENOENT for a ref that names no object, HIVE_ESTATE for an actor
 * handle's id (there is nothing to wait for). */
int hive_wait(hive_t *h, const hive_ref_t *refs, size_t n, size_t num_ready, int64_t timeout_ns,
              unsigned char *ready);

/* Store statistics. used: the bytes live objects take from the store, which
 * is what counts against capacity (HIVE_EFULL past it). An object of up to
 * 32 KiB takes a cell of its size class: its size rounded up to 64 bytes,
 * and above 256 bytes to one of four cell sizes per doubling (less than 25%
 * more than the size). A larger object takes its size rounded up to 64
 * bytes plus a 64-byte header. Zero-size objects take 64 bytes. A released
 * object counts until its grace period ends. objects: live objects.
 * resident: the bytes of store memory the kernel holds now (pages touched
 * and not given back). Freed memory goes back in purges: a worker runs one
 * between jobs once small-object memory held passes used + capacity/8 +
 * 8 MiB, and a thread that would cut a new slab past used + capacity/4 +
 * 16 MiB runs one itself first, so that is the bound: whole free slabs
 * (256 KiB) lose their pages and serve any size afterwards. Free large
 * blocks keep theirs (the next large objects reuse them without faulting) unless the store holds more than capacity * 5/4
 * + 16 MiB. What a purge cannot give back: cells cached by threads (up to
 * 128 per size class and thread) and slabs that still hold a live object.
 * used_high: the most `used` has been since hive_init (counting, as the
 * capacity does, the up to 2 KiB each thread takes ahead for its small
 * objects; a full store takes those back before it refuses). efull: objects
 * refused with HIVE_EFULL (puts, creates, arrays, results) since hive_init.
 * hive_store_stats also flushes the batches of released small objects
 * (hive_release), so their memory is given back a grace period later:
 * polling it until objects reaches 0 terminates once nothing is held. */
typedef struct hive_store_stats {
    size_t   capacity;
    size_t   used;
    uint64_t objects;
    size_t   resident;
    size_t   used_high;
    uint64_t efull;
} hive_store_stats_t;
int hive_store_stats(hive_t *h, hive_store_stats_t *out);

/* ------------------------------------------------------------ statistics
 *
 * hive_stats - what the engine has done and holds now. The structs grow at
 * their end only: pass sizeof of the struct you compiled with; fields past
 * it are not written, fields the library does not know stay zero, and the
 * return value is HIVE_OK. Counters come from each worker's own counters
 * (no shared line is written on the hot path) and are summed on read, so a
 * snapshot taken while work runs is a moment's view, each figure exact for
 * the work that has finished before the call began.
 *
 * Per worker (hive_worker_stats; hive_stats_t.total is the sum):
 *   tasks, methods    tasks / actor methods it ran (a retried task once)
 *   jobs              everything it ran (tasks, methods, actor turns)
 *   steals_same_node, steals_other_node  jobs it took from other workers'
 *                     deques of its node / of other nodes
 *   stolen_same_node, stolen_other_node  jobs taken from its deque by
 *                     workers of its node / of other nodes
 *   parks, wakes      times it went to sleep / was woken from sleep
 *   busy_ns, idle_ns  time since it started running jobs / looking for work
 *                     or asleep (busy = uptime - idle)
 *   help_depth_max    deepest nesting of jobs run while waiting in a job
 * Engine: queued[lane] (lane 0 HIGH, 1 NORMAL, 2 LOW) jobs in the shared
 * rings and worker deques now; actors_created, actors_alive (not yet dead),
 * actors_dead = created - alive; the store as hive_store_stats; trace_events
 * recorded and trace_dropped (overwritten in a full ring) when tracing;
 * actors_restarts, the rebuilds done after HIVE_RESTART; actors_restarting,
 * the actors being rebuilt now. More figures come from their own calls
 * below: hive_actor_top (deepest mailboxes), hive_store_classes (bytes per
 * size class), hive_replay_list and hive_envpool_list.
 * HIVE_EINVAL for a NULL engine or out, a size that does not reach .total
 * (hive_stats) or .methods (hive_worker_stats), or a worker index out of
 * range.
 */
typedef struct hive_worker_stats {
    uint64_t tasks, methods, jobs;
    uint64_t steals_same_node, steals_other_node;
    uint64_t stolen_same_node, stolen_other_node;
    uint64_t parks, wakes;
    uint64_t busy_ns, idle_ns;
    uint64_t help_depth_max;            /* in .total: the maximum, not the sum */
} hive_worker_stats_t;

typedef struct hive_stats {
    unsigned            workers, nodes;
    hive_worker_stats_t total;
    uint64_t            queued[3];
    uint64_t            actors_created, actors_alive, actors_dead;
    hive_store_stats_t  store;
    uint64_t            trace_events, trace_dropped;
    uint64_t            actors_restarts;   /* rebuilds after a method returned HIVE_RESTART */
    uint64_t            actors_restarting; /* actors being rebuilt now (HIVE_RESTART returned,
                                              constructor not yet through) */
} hive_stats_t;

int hive_stats(hive_t *h, hive_stats_t *out, size_t size);
int hive_worker_stats(hive_t *h, unsigned index, hive_worker_stats_t *out, size_t size);

/*
 * hive_actor_top - the actors with the deepest mailboxes now, deepest
 * first: up to max (at most 64) records written to out, each `size` bytes
 * apart (pass
 * sizeof(hive_actor_info_t) of your build; the struct grows at its end and
 * fields past size are not written). Returns how many were written (0 ..
 * max), or HIVE_EINVAL for a NULL engine, out NULL with max > 0, or a size
 * below the end of .state. `mailbox` counts calls queued and not yet
 * started, over every lane (and group); it comes from two counters per
 * mailbox lane, one the callers bump next to the lane's head (a line every
 * call writes anyway) and one the turn bumps (a line only it writes), read
 * without a lock, so a snapshot taken while calls flow is a moment's view.
 * The walk goes over the object table (every live actor's handle is
 * there) inside an RCU read-side section: no lock that hive_actor_new or a
 * call takes (the registry lock only to copy names), and its cost grows
 * with the table's slots, not with the actors. Dead actors show until
 * their last turn retired them; class_name and name are copied (truncated, NUL-terminated).
 */
enum { HIVE_ACTOR_ALIVE = 0, HIVE_ACTOR_RESTARTING = 1, HIVE_ACTOR_DEAD = 2 };

typedef struct hive_actor_info {
    uint64_t id;                /* the handle's id (hive_actor_t.id) */
    uint64_t mailbox;           /* calls queued, not yet started */
    int      state;             /* HIVE_ACTOR_ALIVE, _RESTARTING or _DEAD */
    char     class_name[48];    /* hive_actor_class_t.name, "" if none */
    char     name[64];          /* the hive_actor_opts_t.name it is registered under, "" if none */
} hive_actor_info_t;

int hive_actor_top(hive_t *h, hive_actor_info_t *out, size_t max, size_t size);

/*
 * hive_store_classes - the store's use per size class: HIVE_STORE_CLASSES
 * records (fewer if max is smaller): payloads up to 32 KiB live in cells of
 * 32 classes (size 64, 128, ... 32768: .size is the cell size), larger ones
 * (and small ones that found no cell) in blocks of the large area, the
 * last record, with .size 0. .bytes is what they count in `used` (cells
 * whole; large blocks with their header), .objects how many live there.
 * Counted per thread (each thread's own counters: no shared line on the
 * allocation path) and summed on read, so a moment's view while puts and
 * releases run; once they stop the records add up to hive_store_stats'
 * used. Returns the number written, HIVE_EINVAL for a NULL engine or out.
 */
#define HIVE_STORE_CLASSES 33

typedef struct hive_size_class {
    size_t   size;              /* cell size in bytes; 0: the large area */
    size_t   bytes;             /* bytes counted in used */
    uint64_t objects;           /* payloads held */
} hive_size_class_t;

int hive_store_classes(hive_t *h, hive_size_class_t *out, size_t max);

/*
 * hive_replay_list, hive_envpool_list - the replay buffers and env pools
 * alive on the engine (made and not yet freed), oldest first: up to max
 * records, each `size` bytes apart (sizeof of your build's struct; the
 * structs grow at their end). Returns how many were written; HIVE_EINVAL
 * for a NULL engine, out NULL with max > 0, or a size below the struct's
 * first version. The ids number buffers and pools from 1 in the order made
 * (per engine, never reused). Figures are read with relaxed loads from the
 * counters the buffer or pool keeps anyway (see include/hive/replay.h,
 * envpool.h): a moment's view. limiter_waits counts the times a sampler
 * went to sleep on the rate limiter (samples_per_insert, min_size_to_
 * sample); steps counts environment steps and resets returned to the
 * caller (sync batches and async results received).
 */
typedef struct hive_replay_info {
    uint64_t id, capacity, size, inserts, samples, limiter_waits;
} hive_replay_info_t;

typedef struct hive_envpool_info {
    uint64_t id, num_envs, steps;
} hive_envpool_info_t;

int hive_replay_list(hive_t *h, hive_replay_info_t *out, size_t max, size_t size);
int hive_envpool_list(hive_t *h, hive_envpool_info_t *out, size_t max, size_t size);

/* ------------------------------------------------------- shared arrays
 *
 * Mutable numpy-style arrays: every holder sees the same bytes. Concurrent
 * writers use the atomics or write sections; readers copy consistent
 * snapshots with hive_array_read without ever blocking a writer.
 */
typedef enum hive_dtype {
    HIVE_BOOL = 1, HIVE_I8, HIVE_U8, HIVE_I16, HIVE_U16, HIVE_I32, HIVE_U32,
    HIVE_I64, HIVE_U64, HIVE_F32, HIVE_F64
} hive_dtype_t;
#define HIVE_MAX_DIMS 8
typedef struct hive_array {
    void        *data;
    hive_dtype_t dtype;
    int          ndim;
    int64_t      shape[HIVE_MAX_DIMS];
    int64_t      strides[HIVE_MAX_DIMS];   /* bytes, numpy's convention */
    hive_ref_t   ref;                      /* the object the view points into (not an extra count) */
    void        *priv;                     /* internal: the object's record; do not touch */
} hive_array_t;

size_t  hive_dtype_size(hive_dtype_t dtype);                   /* 0 for an invalid dtype */

/* hive_array_new - a zero-filled, C-contiguous array; ndim 0 is a scalar.
 * HIVE_EINVAL for a bad dtype, ndim outside 0..8, a negative extent, or,
 * as numpy, an item size times the nonzero extents above INT64_MAX (in any
 * order: {0, 2^62} and {2^62, 0} of F64 are both refused, both accepted as
 * U8), so that every stride and offset of its views fits int64_t. */
int     hive_array_new(hive_t *h, hive_dtype_t dtype, int ndim, const int64_t *shape, hive_ref_t *out);
/* hive_array_view - a view of the whole array; HIVE_ESTATE if not an array. */
int     hive_array_view(hive_t *h, hive_ref_t ref, hive_array_t *out);
/* hive_array_numel - the product of the extents; -1 (with the sentence) for
 * NULL or a view whose extents are negative or overflow. */
int64_t hive_array_numel(const hive_array_t *a);
/* hive_array_at - element address, strides honoured; NULL if index is out
 * of bounds or a / index is NULL (index may be NULL for ndim 0). */
void   *hive_array_at(const hive_array_t *a, const int64_t *index);
/* hive_array_slice - a view of start:stop:step along dim (numpy semantics:
 * negative start/stop count from the end, out-of-range ones are clipped,
 * step is any nonzero value, INT64_MIN included, and may be negative).
 * No copy. The new stride is stride * step, except when that does not fit
 * int64_t: the slice then has at most one element and keeps the old stride.
 * HIVE_EINVAL for a hand-made view whose extent is negative or whose
 * offsets overflow. */
int     hive_array_slice(const hive_array_t *a, int dim, int64_t start, int64_t stop, int64_t step,
                         hive_array_t *out);

/* Atomic read-modify-write of one element; flat_index is in C order over the
 * logical shape (strides honoured). add_i64 works on every integer dtype
 * (the delta is truncated to its width), add_f64 on F32 and F64. They return
 * the new value; on bad input (NULL, index out of range, wrong dtype) they
 * return 0, change nothing, and hive_last_error() says why. */
int64_t hive_array_add_i64(const hive_array_t *a, int64_t flat_index, int64_t delta);
double  hive_array_add_f64(const hive_array_t *a, int64_t flat_index, double delta);
/* The same with a status, as C11's atomic_fetch_add: HIVE_OK and *old
 * (may be NULL) the element's value before the add (widened from its
 * dtype; the new value is old + delta in the element's type).
 * HIVE_EINVAL (nothing changed, *old untouched) for a NULL or broken view,
 * an index outside 0 .. numel-1, or a wrong dtype (fetch_add_i64: not an
 * integer dtype; fetch_add_f64: not F32/F64). */
int     hive_array_fetch_add_i64(const hive_array_t *a, int64_t flat_index, int64_t delta,
                                 int64_t *old);
int     hive_array_fetch_add_f64(const hive_array_t *a, int64_t flat_index, double delta,
                                 double *old);

/* Write sections: a seqlock per array object. Writers exclude each other;
 * readers never block them. hive_array_read copies a consistent snapshot of
 * the view into dst (C order, packed), never a half-finished write section;
 * HIVE_EINVAL if dst_size is smaller than numel * itemsize. */
void    hive_array_write_begin(const hive_array_t *a);
void    hive_array_write_end(const hive_array_t *a);
/* The same with a status. hive_array_write_lock: HIVE_OK once the section
 * is open; HIVE_EINVAL for NULL or a view not from hive_array_view /
 * hive_array_slice. hive_array_write_unlock: HIVE_OK; HIVE_EINVAL as
 * lock, HIVE_ESTATE if no section is open on the array. (begin/end do the
 * same and say nothing; a failed begin leaves no section open.) */
int     hive_array_write_lock(const hive_array_t *a);
int     hive_array_write_unlock(const hive_array_t *a);
int     hive_array_read(const hive_array_t *a, void *dst, size_t dst_size);

/* ------------------------------------------------------------------ cells
 *
 * A cell holds one current version (a ref). Readers take the latest without
 * locks; a publisher swaps in a new one; the old version is freed once the
 * last reader releases it.
 */
int hive_cell_new(hive_t *h, hive_ref_t initial, hive_ref_t *cell);        /* initial may be {0} */
int hive_cell_publish(hive_t *h, hive_ref_t cell, hive_ref_t version);      /* the cell takes its own count */
/* the caller owns one count of the current version; seq counts publishes
 * (0 = initial); HIVE_ENOENT if the cell is still empty. seq may be NULL. */
int hive_cell_acquire(hive_t *h, hive_ref_t cell, hive_ref_t *version, uint64_t *seq);

/* ------------------------------------------------------------------ tasks
 *
 * A task is a C function run once on some worker. Its future is its result
 * object: PENDING until the task returns, then sealed with what it returned
 * (or failed with HIVE_ETASK / HIVE_ECANCELED / HIVE_ESHUTDOWN). Arguments
 * are inline bytes (copied at submit) or refs (the task runs once every ref
 * is sealed, and reads the payload in place, zero-copy).
 */
typedef struct hive_ctx hive_ctx_t;
typedef int (*hive_fn)(hive_ctx_t *ctx);     /* 0: success; nonzero: the result fails with HIVE_ETASK */

typedef struct hive_arg {                    /* inline bytes (copied at submit) or, when ref.id != 0, an object */
    const void *data;
    size_t      size;
    hive_ref_t  ref;
} hive_arg_t;
#define HIVE_BYTES(p, n) ((hive_arg_t){ .data = (p), .size = (n) })
#define HIVE_VAL(x)      HIVE_BYTES(&(x), sizeof(x))
#define HIVE_REF(r)      ((hive_arg_t){ .ref = (r) })

enum { HIVE_PRIO_LOW = -1, HIVE_PRIO_NORMAL = 0, HIVE_PRIO_HIGH = 1 };

/*
 * Placement (the `place` / `place_index` fields of hive_opts_t and
 * hive_actor_opts_t). Zero is the default, so zero-initialised options
 * keep meaning "default"; the index is only read for the other two kinds,
 * so node 0 and worker 0 are written { .place = HIVE_PLACE_NODE } and
 * { .place = HIVE_PLACE_WORKER }.
 *  - HIVE_PLACE_DEFAULT: tasks go to the node of their largest sealed ref
 *    argument (else the caller's), actors live on their creator's node.
 *  - HIVE_PLACE_NODE: NUMA node place_index (0 .. hive_num_nodes()-1).
 *    An actor's state is allocated there and its turns are queued there; a
 *    task is queued there (the hint beats the argument rule). Workers of
 *    other nodes take such work only when they find nothing nearer (the
 *    usual stealing order), so it runs elsewhere only while that node is
 *    busy and another one is idle.
 *  - HIVE_PLACE_WORKER (actors only): worker place_index (0 ..
 *    hive_num_workers()-1). The state is allocated on that worker's node
 *    and every turn is posted to that worker alone (never stolen): a
 *    learner pinned to its core. A concurrent actor's dispatcher runs
 *    there; its dispatched calls are queued on that worker's node.
 * Out-of-range kinds, nodes or workers are HIVE_EINVAL, with the numbers.
 */
enum { HIVE_PLACE_DEFAULT = 0, HIVE_PLACE_NODE = 1, HIVE_PLACE_WORKER = 2 };

typedef struct hive_opts {                   /* NULL or zero-initialised: defaults */
    int priority;                            /* higher runs first among queued work (> 0: HIGH lane,
                                                0: NORMAL, < 0: LOW); for hive_call, NULL opts take
                                                the method's own priority instead */
    unsigned max_retries;                    /* hive_submit only (hive_call ignores it): a task whose
                                                function returns nonzero runs again, at once on the
                                                same worker, up to this many more times before its
                                                result fails with HIVE_ETASK. Each run starts with
                                                an empty result (what a failed run returned is
                                                dropped) and counts as a new task for worker-local
                                                values. A cancelled task is never run again. */
    const char *name;                        /* hive_submit only: the task's name on the timeline
                                                (trace_path); NULL: its function's symbol name
                                                (dladdr: link with -rdynamic for static ones).
                                                With tracing on, the string must live until
                                                hive_shutdown (a literal does). */
    int      place;                          /* hive_submit only: HIVE_PLACE_DEFAULT (0) or
                                                HIVE_PLACE_NODE (run on node place_index); hive_call
                                                ignores both (the actor's placement rules) */
    unsigned place_index;
} hive_opts_t;

/*
 * hive_submit - run fn(ctx) on a worker; *result receives the future (one
 * count for the caller). The task runs once every ref argument is sealed; if
 * one failed, the task never runs and its result fails with HIVE_ETASK.
 * Placement: on the NUMA node of the largest sealed ref argument (else the
 * caller's node): from a worker of that node, on its own deque (others steal
 * from it); otherwise on that node's shared ring. No lock, no system call unless a
 * worker is parked, no malloc for records up to 4 KiB (inline bytes count).
 * A small task - inline arguments only, at most 3 of them, their sizes
 * rounded up to 8 bytes summing to at most 24, no name, max_retries <= 255 -
 * is queued inside its own result's 128-byte record (no record of its own);
 * others take a task record beside it. hive_arg's pointers stay valid, and
 * aligned as malloc's, while the task runs.
 * opts->place = HIVE_PLACE_NODE overrides that with node place_index.
 * HIVE_EINVAL for NULL fn/result or args, a bad placement (a kind other
 * than DEFAULT/NODE, a node >= hive_num_nodes), or nargs so large that the
 * record's argument table passes 2^40 bytes (also for hive_call and
 * hive_actor_new), HIVE_ENOENT for a ref that names no object,
 * HIVE_ESHUTDOWN once the engine is stopping.
 */
int hive_submit(hive_t *h, hive_fn fn, const hive_arg_t *args, size_t nargs,
                const hive_opts_t *opts, hive_ref_t *result);

/*
 * hive_cancel - a queued (or still waiting) task never runs and its result
 * fails with HIVE_ECANCELED at once; a running one sees hive_cancelled()
 * turn true, and its result fails with HIVE_ECANCELED when it returns,
 * whatever it returns. A small task a user thread submits while a worker
 * spins idle is handed straight to that worker and counts as running from
 * then on. An actor call waiting for a ref argument is let go
 * (the actor moves on). HIVE_ESTATE if result is not a task's or the task
 * has finished.
 */
int hive_cancel(hive_t *h, hive_ref_t result);

/* Inside a task, an actor method or a constructor. */
hive_t     *hive_engine(hive_ctx_t *ctx);
unsigned    hive_worker_index(hive_ctx_t *ctx);          /* 0 .. workers-1 */
size_t      hive_nargs(hive_ctx_t *ctx);
const void *hive_arg(hive_ctx_t *ctx, size_t i, size_t *size);   /* inline bytes or the object's payload,
                                                                    zero-copy; NULL if i is out of range */
hive_ref_t  hive_arg_ref(hive_ctx_t *ctx, size_t i);             /* {0} for inline arguments */
int         hive_return(hive_ctx_t *ctx, const void *data, size_t size);   /* copies into the result */
void       *hive_return_alloc(hive_ctx_t *ctx, size_t size);             /* write the result in place;
                                                                    NULL (and the sentence) if full */
int         hive_cancelled(hive_ctx_t *ctx);

/* ------------------------------------------------------------------ actors
 *
 * An actor is a state block plus a table of C methods. By default its
 * methods never run concurrently with each other, and the state stays where
 * it is (on the actor's home NUMA node: the node of the thread that created
 * it, or the node or worker opts->place names). Calls go into one of three lock-free mailboxes by priority: a worker
 * drains HIGH, then NORMAL, then LOW, so a HIGH call runs right after the
 * method running now, ahead of every queued lower-priority call. Calls from
 * one caller at one priority run in the order they were made.
 *
 * Concurrent actors (Ray's max_concurrency and concurrency groups): a
 * read-mostly actor may serve several calls at once. Every method belongs
 * to one concurrency group: the one of the class's `groups` that lists
 * its index, or else the default group, whose limit is
 * opts->max_concurrency (0 or 1: one at a time). At most a group's
 * max_concurrency calls of that group run at once, on different workers;
 * calls of different groups run independently of each other (a group of
 * limit 1 still overlaps the other groups). The methods synchronise their
 * own access to the state. Within a group:
 *  - priority: a call is started ahead of every queued call of that group
 *    with a lower priority (HIGH, then NORMAL, then LOW, as above);
 *  - order: calls from one caller at one priority are dispatched (given a
 *    slot of the group) in the order they were made. With a limit of 1
 *    each runs after the previous one returned, as in a default actor.
 *    With a limit L above 1 they overlap, and a dispatched call may begin
 *    a moment after later ones (as with Ray's threaded actors); what holds
 *    is that when a call's method begins, at most L-1 earlier calls of its
 *    caller and priority in that group have not begun yet.
 * A constructor runs before any call; a call returning HIVE_RESTART asks
 * for a rebuild that waits until every running call of the actor (all
 * groups) has returned, while no further call starts; then fini, zero-fill
 * and init run alone, and calls resume on the new state. Calls returning
 * HIVE_RESTART while a rebuild waits join that rebuild (one restart is
 * counted). hive_actor_kill fails the queued calls at once; the running
 * ones finish, and fini runs after the last of them. An actor with no
 * groups and max_concurrency 0 or 1 is exactly a default actor, at the
 * same cost.
 */
typedef struct hive_actor { uint64_t id; } hive_actor_t;   /* a plain value: pass it as an argument */
typedef int (*hive_method_fn)(void *self, hive_ctx_t *ctx);
typedef struct hive_method {
    const char    *name;
    hive_method_fn fn;
    int            priority;             /* default priority of calls made with NULL opts */
} hive_method_t;
#define HIVE_MAX_GROUPS      64          /* concurrency groups per class */
#define HIVE_MAX_CONCURRENCY 65536       /* calls of one group at once */
typedef struct hive_concurrency_group {
    const char     *name;                /* unique in the class, not NULL (for the sentences) */
    unsigned        max_concurrency;     /* 1 .. HIVE_MAX_CONCURRENCY calls of the group at once */
    const unsigned *methods;             /* the indices of its methods (nmethods of them); a
                                            method in no group is in the default group */
    size_t          nmethods;
} hive_concurrency_group_t;
typedef struct hive_actor_class {
    const char          *name;
    size_t               size;           /* bytes of state, zero-filled before init */
    int                (*init)(void *self, hive_ctx_t *ctx);   /* constructor, may be NULL; args as in tasks */
    void               (*fini)(void *self);   /* may be NULL; runs on kill, restart, death and shutdown */
    const hive_method_t *methods;        /* must stay valid while the actor lives */
    size_t               nmethods;
    const hive_concurrency_group_t *groups;   /* NULL or ngroups (<= HIVE_MAX_GROUPS) named groups;
                                                 read by hive_actor_new only */
    size_t               ngroups;
} hive_actor_class_t;
typedef struct hive_actor_opts {         /* NULL or zero-initialised: defaults */
    unsigned    max_restarts;
    const char *name;                    /* non-NULL: findable with hive_actor_lookup; taken
                                            while the actor lives */
    unsigned    max_concurrency;         /* the default group's limit: 0 or 1 one call at a
                                            time, up to HIVE_MAX_CONCURRENCY */
    int         place;                   /* HIVE_PLACE_DEFAULT (0): the creator's node;
                                            HIVE_PLACE_NODE / HIVE_PLACE_WORKER: node or worker
                                            place_index (see "Placement" above) */
    unsigned    place_index;
} hive_actor_opts_t;
#define HIVE_RESTART 0x7e57a47           /* a method returning this asks for a restart */

/*
 * hive_actor_new - create an actor; its constructor runs on a worker before
 * any call (arguments as in tasks; ref arguments are waited for, as for
 * calls: the actor parks until they finish, and no worker waits). A
 * constructor that returns nonzero leaves the actor dead: calls fail with
 * HIVE_EDEAD. HIVE_EINVAL for a bad class (NULL, methods NULL with
 * nmethods > 0, a NULL method fn), a name a live actor has, or a bad
 * placement (unknown kind, node >= hive_num_nodes, worker >=
 * hive_num_workers). opts->place puts the state and the turns on a node
 * or a worker (see "Placement").
 * The engine keeps the class's fields (not the struct: *cls may change or
 * go once this returns; what they point to - name, methods - must stay
 * valid while the actor lives), one shared copy per distinct content. An
 * idle actor costs 256 bytes besides its state (a 128-byte record and its
 * handle record, whose second line holds the actor's turn jobs), plus
 * out-of-line parts only for arguments, restarts or concurrency; one with
 * no init and no arguments runs no job until its first call. Without a
 * name, of the class created last, it takes no lock.
 */
int hive_actor_new(hive_t *h, const hive_actor_class_t *cls, const hive_arg_t *args, size_t nargs,
                   const hive_actor_opts_t *opts, hive_actor_t *out);
/*
 * hive_call - call method of actor; *result receives the future. NULL opts:
 * the method's own priority. A method returning nonzero fails its call
 * (HIVE_ETASK) and the actor lives on; HIVE_RESTART also rebuilds it (fini,
 * zero-fill, init with the original arguments) up to max_restarts times,
 * after which it is dead. Ref arguments still pending are waited for when
 * the call's turn comes: the actor parks - it runs nothing else until they
 * finish, so its order is kept - and its worker goes on with other work (no
 * thread waits, so a job that waits for a later call of this actor cannot
 * hold the parked one up). Cancelling the call, killing the actor or
 * shutting down ends the wait at once. A concurrent actor's call parks
 * alone (its slot stays taken; the actor's other calls go on). Parking
 * takes a 128-byte block; without memory for it the call fails with
 * HIVE_ENOMEM (a constructor's argument: the actor dies) rather than wait
 * on a thread. HIVE_EINVAL for a bad method index, HIVE_ENOENT for an
 * unknown actor, HIVE_EDEAD for a dead one.
 */
int hive_call(hive_t *h, hive_actor_t actor, unsigned method, const hive_arg_t *args, size_t nargs,
              const hive_opts_t *opts, hive_ref_t *result);
/* hive_actor_kill - the actor dies: queued and later calls fail with
 * HIVE_EDEAD (a call waiting for an argument too, at once), fini runs once
 * the method running now (if any) returns, and the state's bytes go back
 * to the store. The handle keeps answering HIVE_EDEAD for good, at no cost.
 * HIVE_EDEAD if it was dead already. */
int hive_actor_kill(hive_t *h, hive_actor_t actor);
/* hive_actor_lookup - the actor created last with opts->name == name
 * (alive or dead; a dead actor's name may be taken by a new actor);
 * HIVE_ENOENT if none. */
int hive_actor_lookup(hive_t *h, const char *name, hive_actor_t *out);

/* ------------------------------------------------------------ actor pools
 *
 * A pool spreads calls over a fixed set of actors (Ray's ActorPool): each
 * submitted call goes to an actor of the pool that has no call of the
 * pool's in flight; the others wait in the pool, in submission order, and
 * go out oldest first as actors come free. A pool has no thread of its
 * own: it notices finished calls inside its functions, and a waiting
 * hive_pool_get_next* keeps handing queued calls to actors as they free
 * up. An actor found dead (or unknown) when it is given a call leaves the
 * pool and the call goes to another; a call that fails inside its actor
 * is a failed result as with hive_call.
 * Thread safety: as Ray's ActorPool, a pool belongs to one thread at a
 * time; a second thread calling into a pool while another is inside gets
 * HIVE_ESTATE (its handoff between threads needs their own
 * synchronisation). The actors themselves may be called by anyone
 * meanwhile; the pool counts only its own calls.
 */
typedef struct hive_pool hive_pool_t;
/* hive_pool_new - a pool over n actors (copied). HIVE_EINVAL for NULL
 * arguments, n of 0 or above 2^20, an actor listed twice; HIVE_ENOENT /
 * HIVE_EDEAD for a handle that names no actor / a dead one. */
int hive_pool_new(hive_t *h, const hive_actor_t *actors, size_t n, hive_pool_t **out);
/* hive_pool_free - free the pool: results not fetched are released, calls
 * still queued in the pool are never made; calls in flight run on. */
int hive_pool_free(hive_pool_t *pool);
/* hive_pool_submit - call method with args on a free actor of the pool, or
 * queue the call (inline bytes copied, refs counted) until one is free.
 * The result comes from hive_pool_get_next / _unordered. A call made at
 * once may fail here as hive_call does (HIVE_EINVAL for a bad method, ...;
 * nothing is then submitted); a queued call's failure to be made is
 * reported when its result is fetched. HIVE_EDEAD once every actor of the
 * pool is dead. */
int hive_pool_submit(hive_pool_t *pool, unsigned method, const hive_arg_t *args, size_t nargs);
/* hive_pool_has_free - 1 if a submit now would go to an actor at once (a
 * free actor and nothing queued), 0 if not, or a negative HIVE_E* code. */
int hive_pool_has_free(hive_pool_t *pool);
/* hive_pool_has_next - 1 if a submitted call's result is still to be
 * fetched, 0 if not, or a negative HIVE_E* code. */
int hive_pool_has_next(hive_pool_t *pool);
/* hive_pool_get_next - the result of the oldest call not yet fetched
 * (submission order), waiting up to timeout_ns for it to be ready (sealed
 * or failed: hive_get on it tells which). *result gets the ref and its
 * count (the caller releases it). HIVE_ETIMEDOUT: nothing is fetched, the
 * same call comes next. HIVE_ESTATE if every result was fetched. A call
 * that could not be made (e.g. every actor dead) is fetched as its code
 * with the sentence, *result untouched. */
int hive_pool_get_next(hive_pool_t *pool, int64_t timeout_ns, hive_ref_t *result);
/* hive_pool_get_next_unordered - as get_next, but the result of the call
 * that finished first among those not yet fetched (completion order). */
int hive_pool_get_next_unordered(hive_pool_t *pool, int64_t timeout_ns, hive_ref_t *result);
/* hive_pool_map - one call of method per argument (call i gets args[i] as
 * its only argument), spread over the pool; waits for all and puts call
 * i's result in results[i] (the caller owns each count). HIVE_ESTATE if
 * the pool still has results to fetch. If a call cannot be made, its slot
 * is {0} and its code is returned after every other result is in. */
int hive_pool_map(hive_pool_t *pool, unsigned method, const hive_arg_t *args, size_t n,
                  hive_ref_t *results);
/* hive_pool_map_unordered - as map, but results[k] is the k-th call to
 * finish and index[k] (index may be NULL) the argument it was given. */
int hive_pool_map_unordered(hive_pool_t *pool, unsigned method, const hive_arg_t *args, size_t n,
                            hive_ref_t *results, size_t *index);

/* ------------------------------------------------- worker-local state
 *
 * A value built once per worker that uses it (a simulator, say), reset
 * before each later task on that worker that uses it, finalised at
 * shutdown on its worker's thread. A task that runs on a worker while
 * another task of that worker waits inside hive_get gets its own instance.
 * A user thread (the driver) gets its own instance with hive_local_thread.
 */
typedef struct hive_local_def {
    void *(*init)(void *arg);                /* builds the value, once on each worker that uses it */
    void  (*reinit)(void *value, void *arg); /* before each later task on that worker that uses it;
                                                NULL: fini then init again */
    void  (*fini)(void *value, void *arg);   /* at shutdown; may be NULL */
    void   *arg;
    int     eager;                           /* nonzero: hive_local_new builds the value on every
                                                worker at once (the first task on each worker then
                                                takes it as built, without a reset); from a user
                                                thread it returns once every worker has built it,
                                                from inside a task at once. 0: on first use */
} hive_local_def_t;
/* A key names one definition of one engine: a key of another engine is
 * refused with HIVE_ENOENT (engines are told apart by a serial in the id,
 * which repeats only after four million engines). {0} is never a key. */
typedef struct hive_local { uint32_t id; } hive_local_t;
void  hive_local_keep(void *value, void *arg);   /* a reinit that keeps the value as it is */
/* HIVE_EINVAL for NULL h/def/out or def->init; HIVE_ENOMEM past 1024 keys.
 * An eager init that returns NULL is not an error here: that worker builds
 * the value on first use instead (and hive_local reports a second NULL). */
int   hive_local_new(hive_t *h, const hive_local_def_t *def, hive_local_t *out);
/* The value for this worker (same value for repeated calls in one task);
 * NULL (and the sentence) for a key of another engine or never made
 * (HIVE_ENOENT), outside a task (HIVE_EINVAL), or if init returned NULL
 * (HIVE_ENOMEM). */
void *hive_local(hive_ctx_t *ctx, hive_local_t key);
/*
 * hive_local_thread - the calling user thread's own value of key (the
 * driver's environment, say): built with init on the thread's first call,
 * the same value on every later call from that thread (never reset: no task
 * marks a boundary there), finalised with fini on the thread's exit or at
 * hive_shutdown of h, whichever comes first (at shutdown, on the thread
 * that shuts down; the value must not be used after). Each thread has its
 * own instance, apart from every worker's. No lock after the first call.
 * NULL (and the sentence) for NULL h (HIVE_EINVAL), a call from a worker of
 * h (HIVE_ESTATE: inside a task use hive_local), a key of another engine or
 * never made (HIVE_ENOENT), or if init returned NULL (HIVE_ENOMEM).
 */
void *hive_local_thread(hive_t *h, hive_local_t key);

#ifdef __cplusplus
}
#endif

#include "hive/replay.h"   /* the replay buffer (src/rl/replay.c) */
#include "hive/envpool.h"  /* the environment pool (src/rl/envpool.c) */

#endif /* HIVE_H */
