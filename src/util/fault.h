/*
 * fault.h - fault injection, for tests: every allocation, mapping and
 * thread creation hive makes goes through hive__fault(), which fails the
 * Nth such call after a test sets hive__fault_countdown = N (0: off).
 *
 * Off, it costs one relaxed load of a global that nobody writes, on slow
 * paths only (mapping chunks and regions, malloc fallbacks, threads): the
 * per-thread caches of the hot paths are not instrumented, their refills
 * are.
 */
#ifndef HIVE_UTIL_FAULT_H
#define HIVE_UTIL_FAULT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "util/common.h"

extern _Atomic long hive__fault_countdown;  /* N > 0: the Nth check from now fails */
extern _Atomic long hive__fault_checks;     /* checks made while armed */

bool hive__fault_hit(void);

static inline bool hive__fault(void)
{
    /* relaxed: a test sets it before the calls it wants to fail, from the
     * same thread or with a join/handshake in between */
    if (likely(atomic_load_explicit(&hive__fault_countdown, memory_order_relaxed) == 0))
        return false;
    return hive__fault_hit();
}

static inline void *hive__malloc(size_t n)
{
    return hive__fault() ? NULL : malloc(n);
}

static inline void *hive__calloc(size_t n, size_t size)
{
    return hive__fault() ? NULL : calloc(n, size);
}

static inline void *hive__realloc(void *p, size_t n)
{
    return hive__fault() ? NULL : realloc(p, n);
}

static inline int hive__posix_memalign(void **p, size_t align, size_t n)
{
    return hive__fault() ? ENOMEM : posix_memalign(p, align, n);
}

#endif
