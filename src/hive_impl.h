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
    unsigned      nworkers;
    bool          pin;
};

#endif
