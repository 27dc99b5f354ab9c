/*
 * rcu.h - the one place that picks the liburcu flavour and wraps it.
 *
 * Flavour: memb (sys_membarrier). Its read-side lock is a per-thread counter
 * update with no fence; the grace-period side pays with a membarrier system
 * call. QSBR's read side is free, but every thread must then announce
 * quiescent states, and user threads that sit outside hive for seconds would
 * stall every grace period unless they went offline/online around each call
 * (a full fence each way). bench/bench_store.c measures the three flavours'
 * lookup throughput side by side; the numbers are in the README.
 *
 * Threads are registered lazily: the first hive call on a thread that needs
 * RCU registers it, and a thread-exit destructor unregisters it, so users
 * never call anything by hand.
 *
 * ThreadSanitizer cannot see the happens-before that a grace period gives
 * (liburcu is not instrumented). Under TSan, every read-side unlock releases
 * a token that every RCU callback acquires, which tells TSan the truth: a
 * callback runs after every reader that could have seen its object.
 */
#ifndef HIVE_UTIL_RCU_H
#define HIVE_UTIL_RCU_H

#include <stdbool.h>
/* The read side inline (liburcu's _LGPL_SOURCE, as bench_mpsc.c): a lock and
 * an unlock are a few instructions on the thread's counter instead of two
 * calls into the shared library, each reaching its thread-local counter
 * through __tls_get_addr (~150 instructions per get + release pair, 9% of
 * a fork-join task). Same code, same semantics (the unlock's grace-period
 * wake included). Not under TSan, which then sees none of it, as before. */
#if !defined(__SANITIZE_THREAD__) && !defined(_LGPL_SOURCE)
#define _LGPL_SOURCE
#endif
#include <urcu/urcu-memb.h>
#include <urcu/call-rcu.h>
#include <urcu/rculfhash.h>

#include "util/common.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
extern char hive__rcu_tsan_token;
#define HIVE_TSAN_RELEASE(p) __tsan_release(p)
#define HIVE_TSAN_ACQUIRE(p) __tsan_acquire(p)
#else
#define HIVE_TSAN_RELEASE(p) ((void)0)
#define HIVE_TSAN_ACQUIRE(p) ((void)0)
#endif

extern __thread bool hive__rcu_registered;
void hive__rcu_register_slow(void);

/* Make sure the calling thread is an RCU reader (cheap after the first call). */
static inline void hive__rcu_thread(void)
{
    if (unlikely(!hive__rcu_registered))
        hive__rcu_register_slow();
}

static inline void hive__rcu_lock(void)
{
    hive__rcu_thread();
    urcu_memb_read_lock();
}

static inline void hive__rcu_unlock(void)
{
    HIVE_TSAN_RELEASE(&hive__rcu_tsan_token);
    urcu_memb_read_unlock();
}

/* Start of every RCU callback. liburcu's call_rcu threads are registered
 * readers already: mark it so that a callback that releases another object
 * does not register the thread twice. TSan: see the comment at the top. */
static inline void hive__rcu_callback_begin(void)
{
    hive__rcu_registered = true;
    HIVE_TSAN_ACQUIRE(&hive__rcu_tsan_token);
}

/* Queue func(head) after a grace period. Under TSan the caller's own
 * accesses so far are released to the callback too (call_rcu's queue
 * orders them, but liburcu is not instrumented). */
static inline void hive__call_rcu(struct rcu_head *head, void (*func)(struct rcu_head *head))
{
    HIVE_TSAN_RELEASE(&hive__rcu_tsan_token);
    urcu_memb_call_rcu(head, func);
}
#define hive__rcu_barrier urcu_memb_barrier
#define hive__rcu_flavor urcu_memb_flavor

#endif
