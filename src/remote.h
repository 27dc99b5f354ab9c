/*
 * remote.h - the core's one hook for scale-out: the table of functions an
 * attached layer (src/mpi/, libhive-mpi.a) installs so that hive_call,
 * hive_get, hive_release, hive_actor_kill, hive_cell_acquire,
 * hive_cell_publish and hive_actor_lookup on an id owned by another process
 * go to it. The core never links MPI.
 *
 * Cost when nothing is attached: hive__remote_of() is one load of the
 * engine's `remote` pointer and one predictable branch (NULL). Ids carry
 * their owner in the 12-bit engine tag (handles.h): an attached layer gives
 * every engine of its world a distinct tag (hive__store_retag) and maps tags
 * back to owners itself.
 */
#ifndef HIVE_REMOTE_H
#define HIVE_REMOTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hive.h"

struct hive;

typedef struct hive__remote_ops {
    void *ctx;
    int (*call)(void *ctx, hive_actor_t actor, unsigned method, const hive_arg_t *args, size_t nargs,
                const hive_opts_t *opts, hive_ref_t *result);
    int (*get)(void *ctx, hive_ref_t ref, int64_t timeout_ns, const void **data, size_t *size);
    int (*release)(void *ctx, hive_ref_t ref);
    int (*kill)(void *ctx, hive_actor_t actor);
    int (*cell_acquire)(void *ctx, hive_ref_t cell, hive_ref_t *version, uint64_t *seq);
    int (*cell_publish)(void *ctx, hive_ref_t cell, hive_ref_t version);
    /* a name not registered here: ask the others (HIVE_ENOENT if none has it) */
    int (*lookup)(void *ctx, const char *name, hive_actor_t *out);
    /* another rank's ref where the core needs a record (hive_wait,
     * hive_get_many, a task's or a local call's argument): this rank's copy,
     * its fetch started if it is not here yet; the layer holds it until
     * hive_release of ref here. NULL with the failure set. */
    struct hive__obj *(*localize)(void *ctx, hive_ref_t ref);
    int (*retain)(void *ctx, hive_ref_t ref);
    /* a cell of this engine has a new version (called inside an RCU read
     * section, version alive in it): the layer may push it to other ranks */
    void (*published)(void *ctx, hive_ref_t cell, struct hive__obj *version, uint64_t seq);
    /* A user thread is about to wait in hive_get for o, an object of this
     * engine (pending): the layer may receive o's answer from another rank
     * on this thread (no hand-off to another thread) until o finishes or
     * deadline (hive__now_ns; UINT64_MAX: none) passes, or return at once.
     * Called through hive__remote_wait only (the gate below). May be NULL. */
    void (*wait)(void *ctx, struct hive__obj *o, uint64_t deadline);
    /* An idle worker in its spin before parking (sched.c). One worker at a
     * time holds the engine's poll claim: HIVE__IDLE_BEGIN when it takes
     * it, HIVE__IDLE_POLL every few looks at its queues (true: it handled
     * something, which may have made work; the spin goes on), then
     * HIVE__IDLE_BUSY (it found work) or HIVE__IDLE_PARK (it is going to
     * sleep) when it lets go. May be NULL. */
    bool (*idle)(void *ctx, int what);
} hive__remote_ops_t;

enum { HIVE__IDLE_BEGIN, HIVE__IDLE_POLL, HIVE__IDLE_BUSY, HIVE__IDLE_PARK };

/* Install (ops) or remove (NULL) the hook; the layer calls this while no
 * other thread uses a remote id of the engine (attach and detach).
 * Removing waits until no thread is inside the wait or idle hooks, which
 * the engine's own threads call at any time (the gate: after it returns,
 * the layer may free what ops->ctx points to). */
void hive__remote_set(struct hive *h, const hive__remote_ops_t *ops);

/* The gated calls of the wait and idle hooks (hive.c). hive__remote_wait:
 * a user thread about to wait for o (slow path only). The idle claim: an
 * idle worker takes it (NULL if another worker holds it or nothing is
 * attached), polls through the table it got, and lets go with
 * HIVE__IDLE_BUSY or HIVE__IDLE_PARK. */
void hive__remote_wait(struct hive *h, struct hive__obj *o, uint64_t deadline);
const hive__remote_ops_t *hive__remote_claim(struct hive *h);
void hive__remote_unclaim(struct hive *h, const hive__remote_ops_t *r, int what);

/* Give the engine's object table a new tag: only before any id was handed
 * out (HIVE_ESTATE otherwise, with the count). */
int hive__store_retag(struct hive *h, uint32_t tag);

/* The engine's tag, and the tag an id carries. */
uint32_t hive__store_tag(const struct hive *h);
static inline uint32_t hive__id_tag(uint64_t id)
{
    return (uint32_t)(id >> 30) & 0xfffu;
}

/* An id of the engine's own tag with generation 0 and bit 63 clear, which
 * no record ever has (handles.h: generations start at 1): an attached
 * layer's future of a remote call that has no store record (src/mpi/).
 * The core sends such ids to the layer's table as it does other ranks'
 * (hive__remote_of); the layer makes a record for one where the core
 * needs it (localize). */
static inline bool hive__id_future(uint64_t id)
{
    return (id >> 42) == 0;
}

#endif
