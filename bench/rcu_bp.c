/* rcu_bp.c - bench_store.c's lookup loop with liburcu's bp flavour. */
#define URCU_API_MAP 1          /* keep the generic rcu_* names mapped to this flavour */
#include <urcu/urcu-bp.h>
#define FL bp
#define FL_BP 1
#include "rcu_flavor.inc"
