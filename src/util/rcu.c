/* rcu.c - lazy RCU reader registration (see rcu.h). */
#include "util/rcu.h"
#include "util/hugemap.h"

#include <pthread.h>

__thread bool hive__rcu_registered;
#if defined(__SANITIZE_THREAD__)
char hive__rcu_tsan_token;
#endif

static pthread_key_t rcu_key;
static pthread_once_t rcu_once = PTHREAD_ONCE_INIT;

static void unregister_at_exit(void *unused)
{
    (void)unused;
    if (hive__rcu_registered) {
        urcu_memb_unregister_thread();
        hive__rcu_registered = false;
    }
}

/* Deferred frees go to one call_rcu thread of our own, created in RT mode:
 * it polls its queue (every 10 ms when idle) instead of sleeping on a
 * futex, so call_rcu never has to wake it - hive_release and
 * hive_cell_publish make no system call. The price: a free waits up to one
 * poll period longer, and an idle process sees ~100 short wake-ups a
 * second from that thread. */
static struct call_rcu_data *free_thread;

static void make_key(void)
{
    if (pthread_key_create(&rcu_key, unregister_at_exit) != 0)
        HIVE_DIE("pthread_key_create failed");
    free_thread = urcu_memb_create_call_rcu_data(URCU_CALL_RCU_RT, -1);
    if (free_thread == NULL)
        HIVE_DIE("cannot start the call_rcu thread");
    hive__settler_start();          /* its helper for huge-page collapses (hugemap.h) */
}

void hive__rcu_register_slow(void)
{
    pthread_once(&rcu_once, make_key);
    urcu_memb_register_thread();
    urcu_memb_set_thread_call_rcu_data(free_thread);
    hive__rcu_registered = true;
    /* any non-NULL value makes the destructor run at thread exit */
    pthread_setspecific(rcu_key, (void *)1);
}
