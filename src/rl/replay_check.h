/*
 * replay_check.h - a look inside the replay buffer for tests only.
 */
#ifndef HIVE_RL_REPLAY_CHECK_H
#define HIVE_RL_REPLAY_CHECK_H

#include <hive.h>

/* With no push or update in flight: brings the lazy sum tree up to its
 * leaves (as a sample call does), then counts the nodes that are not the
 * sum of what lies under them (0 for a uniform buffer). After concurrent
 * updates have ended it must be 0: no leaf was left out of the tree. */
uint64_t hive__replay_tree_check(const hive_replay_t *rb);

/* With no push or update in flight: brings the sum tree up to its leaves
 * and returns the row a sampler's descent takes for mass (any value, also
 * at or past the total, which a descent meets when the tree lags its
 * leaves), or UINT64_MAX when no leaf has mass (and for a uniform buffer). */
uint64_t hive__replay_descend(const hive_replay_t *rb, double mass);

/* A batch push in two steps, for tests of a batch that lags: claim n
 * keys (returns the first; they count as inserts at once), then, later,
 * write the n items of those keys as hive_replay_push_batch does (until
 * then, a push of a key a capacity later than one of these waits for it:
 * a row's writers take turns in key order). */
uint64_t hive__replay_claim(hive_replay_t *rb, size_t n);
void hive__replay_write_claimed(hive_replay_t *rb, uint64_t base, const void *items, size_t n);

/* With no push in flight: the key a row's word names in *key and what it
 * is: 1 a TURN word (a run holds *key, unwritten; the row keeps an older
 * item), 0 the row holds *key, -1 never written. */
int hive__replay_row_turn(const hive_replay_t *rb, uint64_t row, uint64_t *key);

#endif
