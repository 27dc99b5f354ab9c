/* fault.c - the fault injection counters (see fault.h). */
#include "util/fault.h"

_Atomic long hive__fault_countdown;
_Atomic long hive__fault_checks;

bool hive__fault_hit(void)
{
    /* relaxed: counters; each armed check takes one step, and exactly the
     * one that takes it from 1 to 0 fails */
    atomic_fetch_add_explicit(&hive__fault_checks, 1, memory_order_relaxed);
    long v = atomic_fetch_sub_explicit(&hive__fault_countdown, 1, memory_order_relaxed);
    if (v == 1)
        return true;
    if (v <= 0)                        /* raced past zero: put it back, stay off */
        atomic_fetch_add_explicit(&hive__fault_countdown, 1, memory_order_relaxed);
    return false;
}
