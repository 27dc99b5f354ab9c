/*
 * hive_impl.h - the engine record that ties the floors together. Internal:
 * every module that needs the engine's parts includes this, users never do.
 */
#ifndef HIVE_IMPL_H
#define HIVE_IMPL_H

#include "hive.h"
#include "actor.h"
#include "arena.h"
#include "local.h"
#include "obslist.h"
#include "store.h"
#include "sched.h"
#include "publish.h"
#include "remote.h"
#include "topo.h"
#include "trace.h"

#define HIVE_MAX_WORKERS 4096

struct hive {
    hive__arena_t arena;
    hive__store_t store;
    hive__topo_t  topo;
    hive__sched_t sched;
    hive__locals_t locals;
    hive__actors_t actors;
    hive__trace_t trace;          /* the timeline recorder (off unless asked for) */
    hive__publish_t publish;      /* the statistics file for hive-top (off unless asked for) */
    hive__obslist_t listed;       /* live replay buffers and env pools (statistics) */
    _Atomic(const hive__remote_ops_t *) remote;   /* scale-out hook (remote.h); NULL: none */
    unsigned      nworkers;
    bool          pin;
    /* the gate of the wait and idle hooks (hive.c), written only while
     * attached, on a line of its own: `remote` is read by every call */
    HIVE_ALIGNED _Atomic unsigned remote_in;   /* user threads inside the wait hook */
    _Atomic int   remote_poller;  /* 1 while an idle worker holds the poll claim */
};

/* The scale-out hook if id belongs to another engine of an attached
 * world, or is one of this engine's ids with generation 0 (never a
 * record's: the layer's record-free futures, remote.h), else NULL: one
 * load and a predictable branch when not attached. */
static inline const hive__remote_ops_t *hive__remote_of(struct hive *h, uint64_t id)
{
    /* acquire: pairs with hive__remote_set's release, so the table's
     * fields are visible; unattached engines read NULL and stop here */
    const hive__remote_ops_t *r = atomic_load_explicit(&h->remote, memory_order_acquire);
    if (likely(r == NULL) || id == 0 || (hive__id_tag(id) == h->store.table.tag && !hive__id_future(id)))
        return NULL;
    return r;
}

#endif
