/*
 * hugemap.c - settling full regions of frontier mappings into huge pages
 * (hugemap.h), on hive's call_rcu thread.
 */
#include "util/hugemap.h"

#include <errno.h>
#include <stdatomic.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25           /* Linux 6.1; older headers lack the name */
#endif

static _Atomic unsigned      paused;
static _Atomic unsigned long settled, refused, ran;
static _Atomic int           refused_errno;

static void settle(void *region)
{
    /* The advice lifts the mapping's NOHUGEPAGE for this region (collapse
     * refuses such regions), and lets khugepaged do it later if the
     * collapse below is refused. Both are advice: the contents stay. */
    madvise(region, HIVE__HUGE_PAGE, MADV_HUGEPAGE);
    if (madvise(region, HIVE__HUGE_PAGE, MADV_COLLAPSE) == 0) {
        atomic_fetch_add_explicit(&settled, 1, memory_order_relaxed);   /* a statistic */
    } else {
        atomic_store_explicit(&refused_errno, errno, memory_order_relaxed);
        atomic_fetch_add_explicit(&refused, 1, memory_order_relaxed);
    }
}

static void settle_cb(struct rcu_head *head)
{
    hive__rcu_callback_begin();
    hive__settle_t *n = caa_container_of(head, hive__settle_t, rcu);
    /* relaxed: a pause only makes work optional; the closing store waits
     * for this callback (rcu_barrier) before unmapping whatever it sees */
    if (atomic_load_explicit(&paused, memory_order_relaxed) == 0)
        settle(n->region);
    /* release: our read of n before an owner that waited for us (an
     * rcu_barrier, then hive__settle_quiesced) frees it - the barrier
     * orders it, but liburcu is not instrumented and TSan must see it */
    atomic_fetch_add_explicit(&ran, 1, memory_order_release);
}

void hive__settle_quiesced(void)
{
    /* acquire: pairs with settle_cb's release (see there) */
    (void)atomic_load_explicit(&ran, memory_order_acquire);
}

void hive__settle_later(hive__settle_t *n, void *region)
{
    n->region = region;
    hive__rcu_thread();            /* call_rcu needs a registered reader */
    hive__call_rcu(&n->rcu, settle_cb);
}

void hive__settle_pause(bool on)
{
    /* relaxed: see settle_cb */
    if (on)
        atomic_fetch_add_explicit(&paused, 1, memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(&paused, 1, memory_order_relaxed);
}

unsigned long hive__settle_count(unsigned long *nrefused, int *last_errno)
{
    /* relaxed: statistics, read by tests after an rcu_barrier */
    if (nrefused != NULL)
        *nrefused = atomic_load_explicit(&refused, memory_order_relaxed);
    if (last_errno != NULL)
        *last_errno = atomic_load_explicit(&refused_errno, memory_order_relaxed);
    return atomic_load_explicit(&settled, memory_order_relaxed);
}
