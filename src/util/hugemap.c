/*
 * hugemap.c - settling full regions of frontier mappings into huge pages
 * (hugemap.h): queued by call_rcu, collapsed by the settler thread.
 */
#include "util/hugemap.h"
#include "util/fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25           /* Linux 6.1; older headers lack the name */
#endif

static _Atomic unsigned      paused;
static _Atomic unsigned long settled, refused;
static _Atomic int           refused_errno;
static _Atomic int           last_tid;      /* the thread of the last settle, for tests */

/* The settler's queue. A mutex: its users are the call_rcu thread (a
 * region's push, a few hundred per GB of records), the settler and a
 * closing store - none of them a caller's path. */
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  q_work = PTHREAD_COND_INITIALIZER;   /* the settler waits for a region */
static pthread_cond_t  q_idle = PTHREAD_COND_INITIALIZER;   /* drains wait for it to finish */
static hive__settle_t *q_head, *q_tail;
static bool            q_busy;     /* the settler holds a region it popped */
static bool            q_running;  /* the settler started */

static void settle(void *region)
{
    /* The advice lifts the mapping's NOHUGEPAGE for this region (collapse
     * refuses such regions), and lets khugepaged do it later if the
     * collapse below is refused. Both are advice: the contents stay. */
    atomic_store_explicit(&last_tid, (int)gettid(), memory_order_relaxed);   /* a statistic */
    madvise(region, HIVE__HUGE_PAGE, MADV_HUGEPAGE);
    if (madvise(region, HIVE__HUGE_PAGE, MADV_COLLAPSE) == 0) {
        atomic_fetch_add_explicit(&settled, 1, memory_order_relaxed);   /* a statistic */
    } else {
        atomic_store_explicit(&refused_errno, errno, memory_order_relaxed);
        atomic_fetch_add_explicit(&refused, 1, memory_order_relaxed);
    }
}

/* relaxed: a pause only makes work optional; a closing store waits for the
 * settler (hive__settle_drain) before unmapping whatever it sees */
static bool is_paused(void)
{
    return atomic_load_explicit(&paused, memory_order_relaxed) != 0;
}

static void *settler_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&q_lock);
    for (;;) {
        if (q_head == NULL) {
            q_busy = false;
            pthread_cond_broadcast(&q_idle);
            pthread_cond_wait(&q_work, &q_lock);
            continue;
        }
        hive__settle_t *n = q_head;
        q_head = n->next;
        if (q_head == NULL)
            q_tail = NULL;
        /* the record is not touched after this: its owner may free it once
         * q_busy drops (hive__settle_drain), the region stays mapped until then */
        void *region = n->region;
        q_busy = true;
        pthread_mutex_unlock(&q_lock);
        if (!is_paused())
            settle(region);
        pthread_mutex_lock(&q_lock);
    }
    return NULL;
}

void hive__settler_start(void)
{
    pthread_attr_t a;
    pthread_t t;
    /* a thread creation as any other: the fault hook can refuse it (tests
     * of the fallback below, tests/test_settle_fallback.c) */
    bool ok = !hive__fault() && pthread_attr_init(&a) == 0;
    if (ok) {
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        ok = pthread_create(&t, &a, settler_main, NULL) == 0;
        pthread_attr_destroy(&a);
    }
    if (ok)
        pthread_setname_np(t, "hive-settle");   /* a name: cosmetic, may fail */
    pthread_mutex_lock(&q_lock);
    q_running = ok;
    pthread_mutex_unlock(&q_lock);
}

static void settle_cb(struct rcu_head *head)
{
    hive__rcu_callback_begin();
    hive__settle_t *n = caa_container_of(head, hive__settle_t, rcu);
    pthread_mutex_lock(&q_lock);
    if (q_running) {
        n->next = NULL;
        if (q_tail != NULL)
            q_tail->next = n;
        else
            q_head = n;
        q_tail = n;                /* a drain waits for it from now on (q_head) */
        pthread_cond_signal(&q_work);
        pthread_mutex_unlock(&q_lock);
        return;
    }
    pthread_mutex_unlock(&q_lock);
    if (!is_paused())              /* no settler: here, as a last resort */
        settle(n->region);
}

void hive__settle_drain(void)
{
    pthread_mutex_lock(&q_lock);
    while (q_head != NULL || q_busy)
        pthread_cond_wait(&q_idle, &q_lock);
    pthread_mutex_unlock(&q_lock);
}

void hive__settle_later(hive__settle_t *n, void *region)
{
    n->region = region;
    hive__rcu_thread();            /* call_rcu needs a registered reader */
    hive__call_rcu(&n->rcu, settle_cb);
}

void hive__settle_pause(bool on)
{
    /* relaxed: see is_paused */
    if (on)
        atomic_fetch_add_explicit(&paused, 1, memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(&paused, 1, memory_order_relaxed);
}

unsigned long hive__settle_count(unsigned long *nrefused, int *last_errno)
{
    /* relaxed: statistics, read by tests after hive__settle_drain */
    if (nrefused != NULL)
        *nrefused = atomic_load_explicit(&refused, memory_order_relaxed);
    if (last_errno != NULL)
        *last_errno = atomic_load_explicit(&refused_errno, memory_order_relaxed);
    return atomic_load_explicit(&settled, memory_order_relaxed);
}

int hive__settle_last_tid(void)
{
    return atomic_load_explicit(&last_tid, memory_order_relaxed);   /* a statistic */
}
