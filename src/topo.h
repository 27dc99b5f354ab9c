/*
 * topo.h - where workers run: hwloc discovery of the cores and NUMA nodes in
 * this process's cpuset (or of a synthetic description), the worker order,
 * and binding a thread to its processing unit.
 *
 * Worker order: NUMA node by node (hwloc logical order), within a node core
 * by core, taking the first processing unit of each core; then, only if more
 * workers are asked for than there are cores, the second processing unit of
 * each core (hyperthread siblings) in the same order, and so on. Beyond the
 * number of processing units the order wraps around.
 */
#ifndef HIVE_TOPO_H
#define HIVE_TOPO_H

#include <hwloc.h>
#include <stdbool.h>

typedef struct hive__slot {
    int      pu;        /* OS index of the processing unit */
    unsigned core;      /* core index, 0 .. ncores-1, in worker order */
    unsigned node;      /* NUMA node index, 0 .. nnodes-1 (hwloc logical order) */
} hive__slot_t;

typedef struct hive__topo {
    hwloc_topology_t hw;
    bool          synthetic;
    unsigned      ncores;    /* cores with at least one usable processing unit */
    unsigned      nnodes;
    unsigned      nslots;    /* usable processing units, = length of slots */
    hive__slot_t *slots;     /* in worker order */
    int          *node_os;   /* OS index of each NUMA node, for memory binding */
    unsigned      npu_index; /* 1 + the highest PU OS index */
    unsigned     *pu_node;   /* NUMA node of each PU OS index (0 if in none) */
} hive__topo_t;

/* Discover the machine (synthetic == NULL) or build the synthetic topology.
 * HIVE_ETOPO with a sentence if hwloc fails, HIVE_ENOMEM if memory is short. */
int  hive__topo_open(hive__topo_t *t, const char *synthetic);
void hive__topo_close(hive__topo_t *t);

/* The slot of worker i (wraps around past nslots). */
static inline const hive__slot_t *hive__topo_slot(const hive__topo_t *t, unsigned i)
{
    return &t->slots[i % t->nslots];
}

/* Bind the calling thread to slot s's processing unit. HIVE_ETOPO with the
 * reason on failure. Tests may set hive__topo_fail_bind to make it fail. */
int hive__topo_bind_self(const hive__topo_t *t, const hive__slot_t *s);
extern int hive__topo_fail_bind;

/* The NUMA node index of the processing unit with OS index pu, or 0. O(1). */
unsigned hive__topo_node_of_pu(const hive__topo_t *t, int pu);

#endif
