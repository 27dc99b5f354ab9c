/* rcu_memb.c - bench_store.c's lookup loop with liburcu's memb flavour. */
#define URCU_API_MAP 1          /* keep the generic rcu_* names mapped to this flavour */
#include <urcu/urcu-memb.h>
#define FL memb
#define FL_MEMB 1
#include "rcu_flavor.inc"
