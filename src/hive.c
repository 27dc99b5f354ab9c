/*
 * hive.c - the engine: configuration, init and shutdown, placement queries.
 */
#include "hive_impl.h"
#include "cell.h"
#include "util/common.h"
#include "util/error.h"
#include "task.h"
#include "util/fault.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Ray's default: 30% of physical memory for the object store. */
static size_t default_store_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || psize <= 0)
        return (size_t)1 << 30;
    return (size_t)((double)pages * (double)psize * 0.3);
}

static int check_config(const hive_config_t *cfg)
{
    if (cfg->workers > HIVE_MAX_WORKERS)
        return hive__fail(HIVE_EINVAL, "hive_init: workers = %u exceeds the limit of %u",
                          cfg->workers, HIVE_MAX_WORKERS);
    if (cfg->store_bytes != 0 && cfg->store_bytes < 4096)
        return hive__fail(HIVE_EINVAL, "hive_init: store_bytes = %zu is below the minimum of 4096",
                          cfg->store_bytes);
    /* what cannot map even on one node; the arena checks again per node */
    if (cfg->store_bytes != 0 && hive__arena_check(cfg->store_bytes, 1) != HIVE_OK)
        return HIVE_EINVAL;
    return HIVE_OK;
}

int hive_init(const hive_config_t *cfg, hive_t **out)
{
    static const hive_config_t defaults;
    if (out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_init: out is NULL");
    if (cfg == NULL)
        cfg = &defaults;
    int rc = check_config(cfg);
    if (rc != HIVE_OK)
        return rc;

    hive_t *h;
    if (hive__posix_memalign((void **)&h, HIVE_PAD, sizeof *h) != 0)
        return hive__fail(HIVE_ENOMEM, "hive_init: cannot allocate the engine (%zu bytes)", sizeof *h);
    memset(h, 0, sizeof *h);

    rc = hive__topo_open(&h->topo, cfg->topology);
    if (rc != HIVE_OK) {
        free(h);
        return rc;
    }
    size_t store_bytes = cfg->store_bytes ? cfg->store_bytes : default_store_bytes();
    rc = hive__arena_open(&h->arena, store_bytes, &h->topo);
    if (rc != HIVE_OK)
        goto fail_topo;
    if (cfg->prefault && (rc = hive__arena_prefault(&h->arena)) != HIVE_OK)
        goto fail_arena;
    rc = hive__store_open(&h->store);
    if (rc != HIVE_OK)
        goto fail_arena;
    h->store.help = hive__task_help;
    hive__cells_init(h);
    hive__arrays_init(h);
    hive__locals_init(&h->locals);
    hive__actors_init(&h->actors);
    hive__obslist_init(&h->listed);
    h->nworkers = cfg->workers ? cfg->workers : h->topo.ncores;
    /* a synthetic topology describes another machine: place by it, bind nothing */
    h->pin = !cfg->no_pin && cfg->topology == NULL;

    rc = hive__trace_open(&h->trace, cfg->trace_path, h->nworkers);
    if (rc != HIVE_OK)
        goto fail_store;
    rc = hive__sched_start(&h->sched, h, &h->topo, h->nworkers, h->pin);
    if (rc != HIVE_OK) {
        hive__trace_close(&h->trace, h);
        goto fail_store;
    }
    rc = hive__publish_start(h, cfg->publish_stats != 0);
    if (rc != HIVE_OK) {
        hive__sched_stop(&h->sched);     /* no actor or task exists yet */
        hive__trace_close(&h->trace, h);
        goto fail_store;
    }
    *out = h;
    return HIVE_OK;

fail_store:
    hive__obslist_destroy(&h->listed);
    hive__locals_destroy(&h->locals);
    hive__store_close(h);
fail_arena:
    hive__arena_close(&h->arena);
fail_topo:
    hive__topo_close(&h->topo);
    free(h);
    return rc;
}

int hive_shutdown(hive_t *h)
{
    if (h == NULL)
        return hive__fail(HIVE_EINVAL, "hive_shutdown: engine is NULL");
    if (hive__self != NULL && hive__self->sched == &h->sched)
        return hive__fail(HIVE_ESTATE, "hive_shutdown: called from worker %u of the same engine",
                          hive__self->index);
    /* relaxed: attach and detach happen on the thread that shuts down */
    if (unlikely(atomic_load_explicit(&h->remote, memory_order_relaxed) != NULL))
        return hive__fail(HIVE_ESTATE, "hive_shutdown: the engine is attached to an MPI world; "
                          "hive_mpi_detach it first (collective)");
    /* 1. no job starts from now on; every object still pending fails with
     *    HIVE_ESHUTDOWN, so every waiter - a task inside hive_get, an actor
     *    waiting for a call's argument, a user thread - returns */
    hive__publish_stop(h);               /* it reads the workers' counters */
    hive__sched_begin_stop(&h->sched);
    hive__store_fail_pending(h, HIVE_ESHUTDOWN);
    /* 2. running jobs end; queued ones are dropped (their results fail) and
     *    the workers are joined */
    hive__sched_stop(&h->sched);
    /* 3. actors: queued calls fail, fini runs for every live one */
    hive__actors_shutdown(h);
    hive__local_threads_exit(h);         /* user threads' worker-local values */
    int rc = hive__trace_close(&h->trace, h);   /* every writer is gone: write the timeline */
    /* 4. whatever the last jobs created, and then nobody may still be
     *    inside a get or a wait when the records go */
    hive__store_fail_pending(h, HIVE_ESHUTDOWN);
    hive__store_wait_sleepers(h);
    hive__store_close(h);
    hive__actors_close(h);               /* after the store: its last callbacks free actors */
    hive__obslist_destroy(&h->listed);
    hive__locals_destroy(&h->locals);
    hive__arena_close(&h->arena);
    hive__topo_close(&h->topo);
    free(h);
    return rc;
}

/* The gate of the wait and idle hooks. The engine's own threads call them
 * on local objects and while idle, at times the layer cannot rule out, so
 * removing the table must wait for them: a Dekker pair on seq_cst
 * operations. A hook caller first counts itself in (remote_in, or the poll
 * claim), then reads `remote`; hive__remote_set(NULL) first clears
 * `remote`, then reads both. In the total order either the caller's read
 * comes after the clearing (it sees NULL and calls nothing) or the
 * remover's read comes after the count (it waits until the caller is out).
 * The caller leaves with a release, the remover reads with acquire: what
 * the hook did happens before the layer frees its context. */
void hive__remote_set(struct hive *h, const hive__remote_ops_t *ops)
{
    if (ops != NULL) {
        /* release: the table's fields before the pointer (hive__remote_of) */
        atomic_store_explicit(&h->remote, ops, memory_order_release);
        return;
    }
    atomic_store_explicit(&h->remote, NULL, memory_order_seq_cst);
    /* seq_cst loads (acquire among them): they pair with the callers'
     * releases on leaving */
    while (atomic_load_explicit(&h->remote_in, memory_order_seq_cst) != 0 ||
           atomic_load_explicit(&h->remote_poller, memory_order_seq_cst) != 0)
        sched_yield();                   /* a hook's caller leaves within its budget */
}

void hive__remote_wait(struct hive *h, struct hive__obj *o, uint64_t deadline)
{
    /* seq_cst: the caller's half of the gate (above) */
    atomic_fetch_add_explicit(&h->remote_in, 1, memory_order_seq_cst);
    const hive__remote_ops_t *r = atomic_load_explicit(&h->remote, memory_order_seq_cst);
    if (r != NULL && r->wait != NULL)
        r->wait(r->ctx, o, deadline);
    /* release: the hook's accesses before the remover's acquire */
    atomic_fetch_sub_explicit(&h->remote_in, 1, memory_order_release);
}

const hive__remote_ops_t *hive__remote_claim(struct hive *h)
{
    int free_ = 0;
    /* relaxed: a look before the RMW, so idle workers do not bounce the
     * line while one of them holds the claim */
    if (atomic_load_explicit(&h->remote_poller, memory_order_relaxed) != 0 ||
        !atomic_compare_exchange_strong_explicit(&h->remote_poller, &free_, 1, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return NULL;
    /* seq_cst: the caller's half of the gate (above) */
    const hive__remote_ops_t *r = atomic_load_explicit(&h->remote, memory_order_seq_cst);
    if (r == NULL || r->idle == NULL) {
        atomic_store_explicit(&h->remote_poller, 0, memory_order_release);   /* as unclaim */
        return NULL;
    }
    r->idle(r->ctx, HIVE__IDLE_BEGIN);
    return r;
}

void hive__remote_unclaim(struct hive *h, const hive__remote_ops_t *r, int what)
{
    r->idle(r->ctx, what);
    /* release: the hook's accesses before the remover's acquire, and before
     * the next claimant's CAS */
    atomic_store_explicit(&h->remote_poller, 0, memory_order_release);
}

unsigned hive_num_workers(const hive_t *h)
{
    return h ? h->nworkers : 0;
}

unsigned hive_num_nodes(const hive_t *h)
{
    return h ? h->topo.nnodes : 0;
}

int hive_worker_info(const hive_t *h, unsigned index, hive_worker_info_t *out)
{
    if (h == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_worker_info: %s is NULL", h ? "out" : "engine");
    if (index >= h->nworkers)
        return hive__fail(HIVE_EINVAL, "hive_worker_info: worker %u out of range, engine has %u",
                          index, h->nworkers);
    const hive__worker_t *w = &h->sched.w[index];
    *out = (hive_worker_info_t){ .node = w->slot->node, .core = w->slot->core,
                                 .pu = w->slot->pu, .bound = w->bound };
    return HIVE_OK;
}
