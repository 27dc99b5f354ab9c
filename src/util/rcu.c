/* rcu.c - lazy RCU reader registration (see rcu.h). */
#include "util/rcu.h"

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

static void make_key(void)
{
    if (pthread_key_create(&rcu_key, unregister_at_exit) != 0)
        HIVE_DIE("pthread_key_create failed");
}

void hive__rcu_register_slow(void)
{
    pthread_once(&rcu_once, make_key);
    urcu_memb_register_thread();
    hive__rcu_registered = true;
    /* any non-NULL value makes the destructor run at thread exit */
    pthread_setspecific(rcu_key, (void *)1);
}
