/*
 * main.c - hb_register_all(): every table of bench/benches.h, in the order
 * they run. main() itself is in shim.cc (see shim.h).
 */
#include "benches.h"

void hb_register_all(void)
{
    hb_register(hb_limits_benches, hb_limits_nbenches);
    hb_register(hb_mpsc_benches, hb_mpsc_nbenches);
    hb_register(hb_store_benches, hb_store_nbenches);
    hb_register(hb_task_benches, hb_task_nbenches);
    hb_register(hb_actor_benches, hb_actor_nbenches);
    hb_register(hb_replay_benches, hb_replay_nbenches);
    hb_register(hb_scale_benches, hb_scale_nbenches);
    hb_register(hb_scale_all_benches, hb_scale_all_nbenches);
    hb_register(hb_envpool_benches, hb_envpool_nbenches);
    hb_register(hb_trace_benches, hb_trace_nbenches);
}
