/*
 * deque.h - Chase-Lev work-stealing deque of pointers (fixed capacity).
 *
 * D. Chase and Y. Lev, "Dynamic circular work-stealing deque" (SPAA 2005),
 * with the C11 orderings of N. M. Le, A. Pop, A. Cohen and F. Zappa Nardelli,
 * "Correct and efficient work-stealing for weak memory models" (PPoPP 2013).
 *
 * The owner pushes and takes at the bottom (LIFO: the task it just spawned
 * is hot in its cache); thieves steal at the top (FIFO: the oldest, usually
 * biggest, piece of work). The only contended case is the last element,
 * which the owner and a thief race for with one CAS on top.
 *
 * Capacity is fixed: a push onto a full deque is refused and the caller puts
 * the task elsewhere (its node's shared ring). Where the paper uses relaxed
 * accesses plus seq_cst fences, this uses seq_cst accesses on top and bottom
 * in take and steal (the same store-load ordering through the single total
 * order; on x86 an xchg instead of mov + mfence), and release/acquire on the
 * slots. Both choices also keep ThreadSanitizer, which does not model
 * fences, exact.
 *
 * Push needs no store-load order, only release: the paper's push is a
 * release fence and a relaxed store of bottom. A thief that reads the new
 * bottom (acquire, in its seq_cst load) sees the slot written before it;
 * a thief that reads the old bottom sees one job fewer and tries again
 * later; the owner's own take is ordered after the push by program order.
 * The full fence of Chase-Lev lives where two sides race for one element:
 * take's store of bottom before its load of top, against a steal's load of
 * top before bottom. So push is a plain store on x86 (no xchg): the one
 * fence a fork-join child costs is its take. A caller that needs the push
 * ordered before a later load of its own (sched.c's wake handshake without
 * membarrier) uses hive__deque_push_fenced.
 */
#ifndef HIVE_DS_DEQUE_H
#define HIVE_DS_DEQUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/common.h"

#define HIVE_DEQUE_CAP 4096              /* power of two */

typedef struct hive__deque {
    HIVE_ALIGNED _Atomic int64_t top;    /* thieves' end */
    HIVE_ALIGNED _Atomic int64_t bottom; /* owner's end */
    _Atomic(void *) slot[HIVE_DEQUE_CAP];
} hive__deque_t;

/* The slots need no initialisation: only slots in [top, bottom) are ever
 * read, and push writes a slot before it publishes it with bottom. Left
 * alone, a fresh deque's 32 KiB cost no page until they are used (4096
 * workers' deques once touched 400 MB at start). */
static inline void hive__deque_init(hive__deque_t *d)
{
    atomic_init(&d->top, 0);
    atomic_init(&d->bottom, 0);
}

static inline bool hive__deque_push_mo(hive__deque_t *d, void *x, memory_order mo)
{
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    /* acquire: a slot freed by a steal is not overwritten before the thief read it */
    int64_t t = atomic_load_explicit(&d->top, memory_order_acquire);
    if (b - t >= HIVE_DEQUE_CAP)
        return false;
    atomic_store_explicit(&d->slot[b & (HIVE_DEQUE_CAP - 1)], x, memory_order_release);
    /* release at least: publishes the slot to thieves (see the top) */
    atomic_store_explicit(&d->bottom, b + 1, mo);
    return true;
}

/* Owner only. False if full. */
static inline bool hive__deque_push(hive__deque_t *d, void *x)
{
    return hive__deque_push_mo(d, x, memory_order_release);
}

/* As hive__deque_push, with bottom's store seq_cst: it comes before the
 * caller's next seq_cst load in the single total order. */
static inline bool hive__deque_push_fenced(hive__deque_t *d, void *x)
{
    return hive__deque_push_mo(d, x, memory_order_seq_cst);
}

/* Owner only. NULL if empty. */
static inline void *hive__deque_take(hive__deque_t *d)
{
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed) - 1;
    /* seq_cst store, then seq_cst load of top: claiming slot b is ordered
     * before looking at top, against a thief's load of top then bottom
     * (the Dekker core of Chase-Lev) */
    atomic_store_explicit(&d->bottom, b, memory_order_seq_cst);
    int64_t t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    if (t > b) {                                    /* empty */
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
        return NULL;
    }
    void *x = atomic_load_explicit(&d->slot[b & (HIVE_DEQUE_CAP - 1)], memory_order_acquire);
    if (t == b) {                                   /* the last one: race thieves for it */
        if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst,
                                                     memory_order_relaxed))
            x = NULL;                               /* a thief won */
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
    }
    return x;
}

/* Any thread. NULL if empty or if it lost a race (the caller moves on). */
static inline void *hive__deque_steal(hive__deque_t *d)
{
    /* seq_cst loads: top before bottom in the total order (see take) */
    int64_t t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
    if (t >= b)
        return NULL;
    void *x = atomic_load_explicit(&d->slot[t & (HIVE_DEQUE_CAP - 1)], memory_order_acquire);
    /* seq_cst CAS: claims element t against the owner and other thieves */
    if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return NULL;
    return x;
}

/* Any thread: true if the deque may hold work. seq_cst loads: the parking
 * side of the handshake in sched.c. */
static inline bool hive__deque_nonempty(hive__deque_t *d)
{
    return atomic_load_explicit(&d->bottom, memory_order_seq_cst) >
           atomic_load_explicit(&d->top, memory_order_seq_cst);
}

#endif
