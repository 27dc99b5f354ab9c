/*
 * topo.c - hwloc topology: discovery, worker order, binding.
 *
 * All placement decisions read the slot table built here once at init; after
 * that nothing touches hwloc on a hot path.
 */
#include "topo.h"
#include "util/common.h"
#include "util/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int hive__topo_fail_bind;

/* The NUMA node (logical index) whose cpuset holds this PU; 0 if none does
 * (hwloc 2 keeps NUMA nodes as memory children, not ancestors, of cores). */
static unsigned node_index_of(hwloc_topology_t hw, unsigned pu_os)
{
    hwloc_obj_t n = NULL;
    while ((n = hwloc_get_next_obj_by_type(hw, HWLOC_OBJ_NUMANODE, n)) != NULL)
        if (n->cpuset && hwloc_bitmap_isset(n->cpuset, pu_os))
            return n->logical_index;
    return 0;
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

static int build_slots(hive__topo_t *t)
{
    hwloc_topology_t hw = t->hw;
    hwloc_bitmap_t usable = usable_cpuset(t);
    if (usable == NULL)
        return hive__fail(HIVE_ENOMEM, "topology: cannot allocate a cpuset");

    int npu = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PU);
    int ncore_objs = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_CORE);
    t->nnodes = (unsigned)hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
    if (t->nnodes == 0)
        t->nnodes = 1;
    t->slots = calloc((size_t)(npu > 0 ? npu : 1), sizeof *t->slots);
    t->node_os = calloc(t->nnodes, sizeof *t->node_os);
    if (t->slots == NULL || t->node_os == NULL) {
        hwloc_bitmap_free(usable);
        return hive__fail(HIVE_ENOMEM, "topology: cannot allocate a table of %d processing units", npu);
    }
    for (unsigned i = 0; i < t->nnodes; i++) {
        hwloc_obj_t n = hwloc_get_obj_by_type(hw, HWLOC_OBJ_NUMANODE, i);
        t->node_os[i] = n ? (int)n->os_index : 0;
    }

    /* A "core" is a CORE object, or each PU where the description has none. */
    hwloc_obj_type_t ctype = ncore_objs > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
    int ncores_all = ncore_objs > 0 ? ncore_objs : npu;

    /* Round r takes the r-th usable PU of every core; within a round, cores
     * go node by node. Core indices are given in the order cores first get a
     * slot, so they too run node by node. */
    int *core_idx = malloc((size_t)ncores_all * sizeof *core_idx);
    if (core_idx == NULL) {
        hwloc_bitmap_free(usable);
        return hive__fail(HIVE_ENOMEM, "topology: cannot allocate a table of %d cores", ncores_all);
    }
    for (int i = 0; i < ncores_all; i++)
        core_idx[i] = -1;

    unsigned nslots = 0, ncores = 0;
    for (int round = 0; nslots < (unsigned)npu; round++) {
        unsigned before = nslots;
        for (unsigned node = 0; node < t->nnodes; node++) {
            for (int c = 0; c < ncores_all; c++) {
                hwloc_obj_t core = hwloc_get_obj_by_type(hw, ctype, (unsigned)c);
                if (core == NULL || core->cpuset == NULL)
                    continue;
                /* the round-th usable PU of this core */
                int pu = -1, seen = 0;
                unsigned id;
                hwloc_bitmap_foreach_begin(id, core->cpuset) {
                    if (hwloc_bitmap_isset(usable, id)) {
                        if (seen++ == round) {
                            pu = (int)id;
                            break;
                        }
                    }
                } hwloc_bitmap_foreach_end();
                if (pu < 0 || node_index_of(hw, (unsigned)pu) != node)
                    continue;
                if (core_idx[c] < 0)
                    core_idx[c] = (int)ncores++;
                t->slots[nslots++] = (hive__slot_t){ .pu = pu, .core = (unsigned)core_idx[c],
                                                     .node = node };
            }
        }
        if (nslots == before)
            break;                       /* no core has a round-th usable PU */
    }
    free(core_idx);
    hwloc_bitmap_free(usable);
    if (nslots == 0)
        return hive__fail(HIVE_ETOPO, "topology: no usable processing unit among %d in this process's cpuset", npu);
    t->nslots = nslots;
    t->ncores = ncores;
    return HIVE_OK;
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
    for (unsigned i = 0; i < t->nslots; i++)
        if (t->slots[i].pu == pu)
            return t->slots[i].node;
    return 0;
}
