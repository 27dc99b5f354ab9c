/* rcu_qsbr.c - bench_store.c's lookup loop with liburcu's qsbr flavour. */
#define URCU_API_MAP 1          /* keep the generic rcu_* names mapped to this flavour */
#include <urcu/urcu-qsbr.h>
#define FL qsbr
#define FL_QSBR 1
#include "rcu_flavor.inc"
