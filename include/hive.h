/*
 * hive.h - the public API of hive, a shared-memory engine for tasks, actors and
 * an object store on one many-core machine.
 *
 * Every function may be called from any thread at any time, except
 * hive_shutdown. Functions that can fail return HIVE_OK (0) or a negative
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
 * stays valid until the thread's next failing hive call.
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
    const char *trace_path;         /* NULL: no timeline; else a Chrome trace JSON written at shutdown */
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
 * Returns HIVE_EINVAL for NULL @out, HIVE_ETOPO if discovery or binding
 * fails, HIVE_ENOMEM if memory or threads cannot be had.
 */
int hive_init(const hive_config_t *cfg, hive_t **out);

/*
 * hive_shutdown - stop an engine: running work finishes, queued work never
 * runs, every worker is joined and every byte the engine owns is freed.
 * @h is invalid afterwards. Must not be called from inside the engine.
 */
int hive_shutdown(hive_t *h);

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

#ifdef __cplusplus
}
#endif

#endif /* HIVE_H */
