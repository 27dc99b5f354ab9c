/*
 * topo.c - hwloc topology: discovery, worker order, binding.
 *
 * All placement decisions read the slot table built here once at init; after
 * that nothing touches hwloc on a hot path. Building it is linear in the
 * processing units (plus nodes per hyperthread round): thousands of nodes
 * take milliseconds.
 */
#include "topo.h"
#include "util/common.h"
#include "util/error.h"
#include "util/fault.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int hive__topo_fail_bind;

/* pu_node[os index] = the NUMA node (logical index) whose cpuset holds the
 * PU, the first such in logical order; 0 where none does (hwloc 2 keeps
 * NUMA nodes as memory children, not ancestors, of cores). One pass over
 * the nodes' cpusets. */
static int map_pu_nodes(hive__topo_t *t)
{
    hwloc_const_cpuset_t all = hwloc_topology_get_complete_cpuset(t->hw);
    int last = all ? hwloc_bitmap_last(all) : -1;
    t->npu_index = last >= 0 ? (unsigned)last + 1 : 1;
    t->pu_node = hive__malloc(t->npu_index * sizeof *t->pu_node);
    if (t->pu_node == NULL)
        return hive__fail(HIVE_ENOMEM, "topology: cannot allocate a table of %u processing units",
                          t->npu_index);
    for (unsigned i = 0; i < t->npu_index; i++)
        t->pu_node[i] = UINT_MAX;
    hwloc_obj_t n = NULL;
    while ((n = hwloc_get_next_obj_by_type(t->hw, HWLOC_OBJ_NUMANODE, n)) != NULL) {
        unsigned id;
        if (n->cpuset == NULL)
            continue;
        hwloc_bitmap_foreach_begin(id, n->cpuset) {
            if (id < t->npu_index && t->pu_node[id] == UINT_MAX)
                t->pu_node[id] = n->logical_index;
        } hwloc_bitmap_foreach_end();
    }
    for (unsigned i = 0; i < t->npu_index; i++)
        if (t->pu_node[i] == UINT_MAX)
            t->pu_node[i] = 0;
    return HIVE_OK;
}

/* The usable PUs: the process's cpuset on a real machine, everything on a
 * synthetic one. */
static hwloc_bitmap_t usable_cpuset(hive__topo_t *t)
{
    hwloc_bitmap_t set = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(t->hw));
    if (set == NULL)
        return NULL;
    if (!t->synthetic) {
        hwloc_bitmap_t proc = hwloc_bitmap_alloc();
        if (proc && hwloc_get_cpubind(t->hw, proc, HWLOC_CPUBIND_PROCESS) == 0 &&
            hwloc_bitmap_intersects(proc, set))
            hwloc_bitmap_and(set, set, proc);
        hwloc_bitmap_free(proc);
    }
    return set;
}

/* Every core's usable PUs in ascending order: core c's are
 * pus[first[c] .. first[c + 1]). */
typedef struct core_pus {
    int       ncores;
    unsigned *first;     /* ncores + 1 entries */
    int      *pus;
} core_pus_t;

static int list_core_pus(hwloc_topology_t hw, hwloc_obj_type_t ctype, int ncores, int npu,
                         hwloc_const_bitmap_t usable, core_pus_t *cp)
{
    cp->ncores = ncores;
    cp->first = hive__malloc(((size_t)ncores + 1) * sizeof *cp->first);
    cp->pus = hive__malloc((size_t)(npu > 0 ? npu : 1) * sizeof *cp->pus);
    if (cp->first == NULL || cp->pus == NULL)
        return hive__fail(HIVE_ENOMEM, "topology: cannot allocate a table of %d cores", ncores);
    unsigned n = 0;
    for (int c = 0; c < ncores; c++) {
        cp->first[c] = n;
        hwloc_obj_t core = hwloc_get_obj_by_type(hw, ctype, (unsigned)c);
        if (core == NULL || core->cpuset == NULL)
            continue;
        unsigned id;
        hwloc_bitmap_foreach_begin(id, core->cpuset) {
            if (hwloc_bitmap_isset(usable, id) && n < (unsigned)npu)
                cp->pus[n++] = (int)id;
        } hwloc_bitmap_foreach_end();
    }
    cp->first[ncores] = n;
    return HIVE_OK;
}

/* Round r takes the r-th usable PU of every core that has one, ordered by
 * the node of that PU, then by core (a stable counting sort by node); core
 * indices are given in the order cores first get a slot, so they too run
 * node by node. Linear in PUs, plus nodes per round. */
static int order_slots(hive__topo_t *t, const core_pus_t *cp)
{
    unsigned *active = hive__malloc((size_t)(cp->ncores > 0 ? cp->ncores : 1) * sizeof *active);
    unsigned *sorted = hive__malloc((size_t)(cp->ncores > 0 ? cp->ncores : 1) * sizeof *sorted);
    unsigned *start = hive__malloc(((size_t)t->nnodes + 1) * sizeof *start);
    int *core_idx = hive__malloc((size_t)(cp->ncores > 0 ? cp->ncores : 1) * sizeof *core_idx);
    int rc = HIVE_OK;
    if (active == NULL || sorted == NULL || start == NULL || core_idx == NULL) {
        rc = hive__fail(HIVE_ENOMEM, "topology: cannot allocate a table of %d cores", cp->ncores);
        goto out;
    }
    unsigned nactive = 0, nslots = 0, ncores = 0;
    for (int c = 0; c < cp->ncores; c++) {
        core_idx[c] = -1;
        if (cp->first[c + 1] > cp->first[c])
            active[nactive++] = (unsigned)c;
    }
    for (unsigned round = 0; nactive > 0; round++) {
        memset(start, 0, ((size_t)t->nnodes + 1) * sizeof *start);
        for (unsigned k = 0; k < nactive; k++)
            start[t->pu_node[cp->pus[cp->first[active[k]] + round]] + 1]++;
        for (unsigned node = 0; node < t->nnodes; node++)
            start[node + 1] += start[node];
        for (unsigned k = 0; k < nactive; k++)
            sorted[start[t->pu_node[cp->pus[cp->first[active[k]] + round]]]++] = active[k];
        for (unsigned k = 0; k < nactive; k++) {
            unsigned c = sorted[k];
            int pu = cp->pus[cp->first[c] + round];
            if (core_idx[c] < 0)
                core_idx[c] = (int)ncores++;
            t->slots[nslots++] = (hive__slot_t){ .pu = pu, .core = (unsigned)core_idx[c],
                                                 .node = t->pu_node[pu] };
        }
        /* cores with a next PU, still in core order (the sort is stable) */
        unsigned still = 0;
        for (unsigned k = 0; k < nactive; k++)
            if (cp->first[active[k]] + round + 1 < cp->first[active[k] + 1])
                active[still++] = active[k];
        nactive = still;
    }
    t->nslots = nslots;
    t->ncores = ncores;
out:
    free(active);
    free(sorted);
    free(start);
    free(core_idx);
    return rc;
}
static int build_slots(hive__topo_t *t)
{
    hwloc_topology_t hw = t->hw;
    int npu = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PU);
    int ncore_objs = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_CORE);
    t->nnodes = (unsigned)hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
    if (t->nnodes == 0)
        t->nnodes = 1;
    t->slots = hive__calloc((size_t)(npu > 0 ? npu : 1), sizeof *t->slots);
    t->node_os = hive__calloc(t->nnodes, sizeof *t->node_os);
    if (t->slots == NULL || t->node_os == NULL)
        return hive__fail(HIVE_ENOMEM, "topology: cannot allocate a table of %d processing units", npu);
    for (unsigned i = 0; i < t->nnodes; i++) {
        hwloc_obj_t n = hwloc_get_obj_by_type(hw, HWLOC_OBJ_NUMANODE, i);
        t->node_os[i] = n ? (int)n->os_index : 0;
    }
    int rc = map_pu_nodes(t);
    if (rc != HIVE_OK)
        return rc;
    hwloc_bitmap_t usable = usable_cpuset(t);
    if (usable == NULL)
        return hive__fail(HIVE_ENOMEM, "topology: cannot allocate a cpuset");
    /* A "core" is a CORE object, or each PU where the description has none. */
    core_pus_t cp = { 0 };
    rc = list_core_pus(hw, ncore_objs > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU,
                       ncore_objs > 0 ? ncore_objs : npu, npu, usable, &cp);
    if (rc == HIVE_OK)
        rc = order_slots(t, &cp);
    free(cp.first);
    free(cp.pus);
    hwloc_bitmap_free(usable);
    if (rc == HIVE_OK && t->nslots == 0)
        rc = hive__fail(HIVE_ETOPO, "topology: no usable processing unit among %d in this process's cpuset", npu);
    return rc;
}

int hive__topo_open(hive__topo_t *t, const char *synthetic)
{
    memset(t, 0, sizeof *t);
    t->synthetic = synthetic != NULL;
    if (hwloc_topology_init(&t->hw) != 0)
        return hive__fail(HIVE_ETOPO, "topology: hwloc_topology_init failed: %s", strerror(errno));
    if (synthetic && hwloc_topology_set_synthetic(t->hw, synthetic) != 0) {
        int e = errno;
        hwloc_topology_destroy(t->hw);
        t->hw = NULL;
        return hive__fail(HIVE_ETOPO, "topology: cannot parse synthetic description \"%s\": %s",
                          synthetic, strerror(e));
    }
    if (hwloc_topology_load(t->hw) != 0) {
        int e = errno;
        hwloc_topology_destroy(t->hw);
        t->hw = NULL;
        return hive__fail(HIVE_ETOPO, "topology: hwloc_topology_load failed: %s", strerror(e));
    }
    int rc = build_slots(t);
    if (rc != HIVE_OK)
        hive__topo_close(t);
    return rc;
}

void hive__topo_close(hive__topo_t *t)
{
    free(t->slots);
    free(t->pu_node);
    free(t->node_os);
    if (t->hw)
        hwloc_topology_destroy(t->hw);
    memset(t, 0, sizeof *t);
}

int hive__topo_bind_self(const hive__topo_t *t, const hive__slot_t *s)
{
    if (hive__topo_fail_bind)
        return hive__fail(HIVE_ETOPO, "binding a worker to processing unit %d failed: "
                          "refused by the test hook", s->pu);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set == NULL)
        return hive__fail(HIVE_ENOMEM, "binding: cannot allocate a cpuset");
    hwloc_bitmap_only(set, (unsigned)s->pu);
    int rc = hwloc_set_cpubind(t->hw, set, HWLOC_CPUBIND_THREAD);
    int e = errno;
    hwloc_bitmap_free(set);
    if (rc != 0)
        return hive__fail(HIVE_ETOPO, "binding a worker to processing unit %d (core %u, node %u) failed: %s",
                          s->pu, s->core, s->node, strerror(e));
    return HIVE_OK;
}

unsigned hive__topo_node_of_pu(const hive__topo_t *t, int pu)
{
    return pu >= 0 && (unsigned)pu < t->npu_index ? t->pu_node[pu] : 0;
}
