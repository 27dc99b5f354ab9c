/*
 * benches.h - the benchmark tables of bench/, one pair of names per file.
 *
 * A new bench/bench_<module>.c defines hb_<module>_benches[] and
 * hb_<module>_nbenches, declares them here and adds one hb_register() line
 * to bench/main.c.
 */
#ifndef HIVE_BENCH_BENCHES_H
#define HIVE_BENCH_BENCHES_H

#include "shim.h"

extern const hb_bench hb_mpsc_benches[];   /* bench_mpsc.c: src/ds/mpsc.h vs peers */
extern const size_t hb_mpsc_nbenches;

extern const hb_bench hb_store_benches[];  /* bench_store.c: object store vs memcpy and Python shm */
extern const size_t hb_store_nbenches;

extern const hb_bench hb_task_benches[];   /* bench_task.c: tasks (Ray's figures) and fork-join vs TBB */
extern const size_t hb_task_nbenches;

extern const hb_bench hb_actor_benches[];  /* bench_actor.c: actors (Ray's figures) vs CAF */
extern const size_t hb_actor_nbenches;

extern const hb_bench hb_replay_benches[]; /* bench_replay.c: replay buffer vs a mutex-protected ring */
extern const size_t hb_replay_nbenches;

extern const hb_bench hb_scale_benches[];  /* bench_scale.c: costs against the work held */
extern const size_t hb_scale_nbenches;
extern const hb_bench hb_scale_all_benches[]; /* bench_scale_all.c: 10 M objects, 1 M tasks, 1 M actors at once */
extern const size_t hb_scale_all_nbenches;
extern const hb_bench hb_envpool_benches[]; /* bench_envpool.c: env pool vs the pthread sampler */
extern const size_t hb_envpool_nbenches;

extern const hb_bench hb_trace_benches[];  /* bench_trace.c: the timeline recorder, off and on */
extern const size_t hb_trace_nbenches;

extern const hb_bench hb_limits_benches[]; /* bench_limits.c: the machine's round trips */
extern const size_t hb_limits_nbenches;

#endif
