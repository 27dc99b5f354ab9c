/*
 * replay_check.h - a look inside the replay buffer for tests only.
 */
#ifndef HIVE_RL_REPLAY_CHECK_H
#define HIVE_RL_REPLAY_CHECK_H

#include <hive.h>

/* With no push or update in flight: the number of sum-tree nodes that are
 * not the sum of what lies under them (0 for a uniform buffer). After
 * concurrent updates have ended it must be 0: no node kept a stale sum. */
uint64_t hive__replay_tree_check(const hive_replay_t *rb);

#endif
