/*
 * hive/replay.h - an experience replay buffer for RL samplers, built on
 * hive's shared arrays (src/rl/replay.c). Included by <hive.h>.
 *
 * Items are fixed-size byte records (a transition) kept in ONE shared array
 * object of dtype HIVE_U8 and shape {capacity, item_size}: any holder can
 * view it zero-copy (hive_replay_array). Many producers push at once without
 * a lock; when the buffer is full the oldest item is overwritten. Consumers
 * sample batches uniformly or in proportion to priority (prioritized
 * experience replay, Schaul et al. 2016), while pushes go on: a sampled item
 * is never torn, each row carries its own sequence lock.
 *
 * Keys. Every pushed item gets a key: its insertion number (0 for the first
 * item ever pushed, 1 for the next, ...). Its row in the array is
 * key % capacity. Sampling returns keys and update_priorities takes them, so
 * a priority meant for an item that has been overwritten in the meantime is
 * dropped instead of landing on its successor.
 *
 * Rate limiting (optional, as DeepMind Reverb's SampleToInsertRatio): a
 * sample call waits while the buffer holds fewer than min_size_to_sample
 * items or while taking its batch would make
 *     samples > samples_per_insert * inserts + error_buffer
 * (samples and inserts count items since the buffer was made). Unlike Reverb,
 * the bound has no min_size offset and pushes are never blocked: producers
 * (environments) always run at full speed and only the sampler is held back.
 *
 * Threads. Push, push_batch, sample, update_priorities and stats may be
 * called from any threads at once; hive_replay_free must not race with them.
 * No call takes a lock. A sampler reads no per-row word unless the row was
 * written since its call began (it validates a chunk of copies with one
 * look at the insert count; src/rl/replay.c, "Samplers and done"). The
 * waits that remain are all for a write in progress on the same rows: a
 * sampler that picks a row being written waits for that write; the
 * writers of one row take turns in key order, so a push (or a batch) whose
 * row's previous key, a whole capacity of pushes earlier, is claimed but
 * not yet written waits for that write (only that row's writer waits: the
 * other pushes go on; after a short spin it sleeps until a write ends);
 * and a push waits for a priority update holding its row for the moment
 * it takes to set a leaf. A push makes a system call only to wake such a
 * sleeper or a sampler held by the rate limiter.
 *
 * Runs of keys. When a thread's single pushes (hive_replay_push) into a
 * full buffer of at least 128 rows meet another thread's claims between
 * two of its own, it claims 32 keys at once (so that two producers write
 * rows of their own, not neighbouring ones) and holds the rest for its next
 * pushes into that buffer, until a claim of its own meets no other (then it
 * goes back to one key a push). A held key counts as inserted from its
 * claim (stats inserts, the rate limiter) though its item is not pushed
 * yet. Until it is, the key's row keeps its previous item, which samplers
 * hand out with that item's own key and priority (never the held key);
 * a priority update of that previous item is dropped (its next key is
 * claimed). A held key stalls nobody: the next lap's writer of its row
 * goes ahead, and the holder then gives the key up and pushes its item
 * with a fresh claim. So with several producers at most 31 rows per
 * pushing thread hold an older item than their newest key, and a thread
 * that stops pushing leaves its held keys so (they count as inserts that
 * never got an item). A thread holds keys for up to 4 buffers at a time.
 *
 * The sum tree (prioritized) is brought up to date lazily: a push or an
 * update sets its item's leaf and marks the leaf's block; each sample call,
 * update_priorities call and stats call first recomputes the marked blocks
 * and the nodes above them, once each. Only one call does that at a time;
 * a call that finds it under way does not wait but uses the tree as it is
 * (so, while others push and update, a sample may draw by priorities a
 * moment old, as it may with any concurrent update). Once the calls stop,
 * the next such call sees every priority.
 *
 * Limits of priorities. The buffer keeps priority^alpha per item and their
 * sums, and none of these may become infinite or NaN (an infinite total
 * would stay so forever and turn sampling and weights into noise). So
 *   - alpha is at most 16 (hive_replay_new);
 *   - every priority set must be finite, >= 0, and have priority^alpha at
 *     most DBL_MAX / (2 * capacity), so that the sum over all items stays
 *     finite; with alpha <= 16 that admits every priority up to 1e18 at any
 *     capacity (with alpha 2 and capacity 1e6, every priority up to 9e150).
 *     hive_replay_update_priorities refuses anything else with HIVE_EINVAL
 *     and the numbers, and changes nothing.
 * Pushes take no priority of their own (they get the largest set so far),
 * so they never break the bound. Importance weights are always finite, in
 * [0, 1]. Priorities so small that priority^alpha underflows to 0 count as
 * 0 (never sampled while another item has mass).
 */
#ifndef HIVE_REPLAY_H
#define HIVE_REPLAY_H

#include <hive.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hive_replay hive_replay_t;

typedef struct hive_replay_config {
    uint64_t capacity;            /* items held; > 0 */
    size_t   item_size;           /* bytes per item; > 0 */
    int      prioritized;         /* 0: uniform sampling; nonzero: proportional to priority^alpha */
    double   alpha;               /* priority exponent (prioritized only), 0 .. 16; 0 is uniform */
    double   beta;                /* importance-weight exponent (prioritized only), >= 0 */
    double   samples_per_insert;  /* 0: no rate limit; > 0: the sample/insert ratio to hold */
    uint64_t min_size_to_sample;  /* sampling waits until this many items are held (<= capacity) */
    double   error_buffer;        /* slack of the rate limit, in samples (>= 0) */
    uint64_t seed;                /* the buffer's own random stream (see hive_replay_sample) */
} hive_replay_config_t;

/*
 * hive_replay_new - make a replay buffer.
 * @h: the engine whose store holds the items.
 * @cfg: the configuration (see hive_replay_config_t).
 * @out: receives the buffer.
 *
 * Allocates the item array (zero-filled) in @h's store, plus, in process
 * memory, per-row sequence and content words (16 bytes a row) and, when prioritized, one
 * priority leaf per row (8 bytes each) and an 8-ary sum tree over blocks
 * of 8 leaves with the flusher's work list (about 2.2 bytes per row).
 * Returns HIVE_EINVAL for NULL arguments,
 * a zero capacity or item size, capacity * item_size overflowing, alpha,
 * beta, error_buffer or samples_per_insert negative or not finite, alpha
 * above 16 (see "Limits of priorities" above), or min_size_to_sample above
 * the capacity; HIVE_EFULL if the store cannot hold the items; HIVE_ENOMEM.
 */
int hive_replay_new(hive_t *h, const hive_replay_config_t *cfg, hive_replay_t **out);

/*
 * hive_replay_free - release the item array (the buffer's count of it) and
 * free the buffer. No other call on @rb may run or follow. Call it before
 * hive_shutdown of its engine. HIVE_EINVAL for NULL.
 */
int hive_replay_free(hive_replay_t *rb);

/*
 * hive_replay_array - the item array: HIVE_U8, shape {capacity, item_size};
 * row key % capacity holds the item of that key. The buffer keeps its own
 * count; hive_retain it to use it beyond hive_replay_free. Rows may be
 * rewritten at any time by pushes: read them through hive_replay_sample for
 * untorn copies. {0} for NULL.
 */
hive_ref_t hive_replay_array(const hive_replay_t *rb);

/*
 * hive_replay_push - copy one item (item_size bytes) into the buffer.
 * @rb: the buffer.
 * @item: the bytes to copy.
 *
 * One fetch-and-add claims the next key, which makes the caller the only
 * writer of its row: it waits until the row's previous item (the key one
 * capacity earlier) is complete, then writes the row under its sequence
 * word with plain stores. When other threads push at once, a claim takes
 * 32 keys and later pushes use the held ones (see "Runs of keys" above;
 * one CAS on the row's own word a push). When the buffer is full the
 * oldest item is overwritten.
 * A prioritized buffer gives the new item the largest priority seen so far
 * (1.0 until a larger one is set). Never blocks on samplers or on the rate
 * limiter. HIVE_EINVAL for NULL arguments.
 */
int hive_replay_push(hive_replay_t *rb, const void *item);

/*
 * hive_replay_push_batch - push n items stored back to back (n * item_size
 * bytes) with one claim for the lot; their keys are consecutive. The rows
 * are written a run of up to 32 rows at a time: each row's sequence word
 * taken, one memcpy for the run, the words given back. One locked
 * instruction for the whole batch (the claim).
 * If n exceeds the capacity only the last capacity items are kept (all n
 * count as inserts).
 * n = 0 does nothing. HIVE_EINVAL for NULL arguments, or n * item_size
 * above PTRDIFF_MAX (no buffer is that large; nothing is pushed).
 */
int hive_replay_push_batch(hive_replay_t *rb, const void *items, size_t n);

/*
 * hive_replay_sample - copy a batch of items out of the buffer.
 * @rb: the buffer.
 * @batch: items to sample (with replacement; hive_replay_sample_ex samples
 *         without); 1 .. the number held.
 * @rng_state: NULL, or the caller's own 64-bit random state, used and
 *             advanced (seed it once, e.g. one per sampler thread). NULL uses
 *             the buffer's stream: call number k of the buffer draws from
 *             seed and k alone.
 * @out_items: NULL or room for batch * item_size bytes: the items, each an
 *             untorn copy of one push.
 * @out_keys: NULL or room for batch keys (row = key % capacity).
 * @out_weights: NULL or room for batch importance weights. Prioritized:
 *             w_i = (N * P(i))^-beta / max_j w_j with N the number of items
 *             held, P(i) = p_i^alpha / sum_k p_k^alpha, and the max taken over
 *             this batch (as Acme does with Reverb), so the largest is 1.
 *             Uniform: all 1.
 * @timeout_ns: how long to wait for the rate limiter and min_size_to_sample
 *             (< 0 forever, 0 polls).
 *
 * Uniform sampling draws rows uniformly among the items held; prioritized
 * sampling splits the total priority mass into batch equal segments and
 * draws one item in each (stratified, as in the PER paper) by descending the
 * sum tree. If every priority is 0, sampling is uniform. The same seed (or
 * rng state) and the same pushes, updates and calls give the same samples.
 * Safe while pushes and priority updates go on: an item overwritten during
 * its copy is copied again (its replacement, with the replacement's key).
 * Returns HIVE_OK; HIVE_ETIMEDOUT if the rate limiter or min_size_to_sample
 * held the call past timeout_ns (nothing is counted then); HIVE_EINVAL for
 * NULL rb, batch 0, or batch larger than the number of items held.
 */
int hive_replay_sample(hive_replay_t *rb, size_t batch, uint64_t *rng_state, void *out_items,
                       uint64_t *out_keys, double *out_weights, int64_t timeout_ns);

/*
 * hive_replay_sample_ex - hive_replay_sample with flags.
 * @flags: 0 (exactly hive_replay_sample) or HIVE_REPLAY_DISTINCT: sample
 *         without replacement, as Python's random.sample: the batch holds
 *         batch distinct keys, in random order.
 *
 * Without replacement, uniform sampling gives every set of batch items held
 * the same chance. Prioritized sampling draws one item after another, each
 * among the items not drawn yet in proportion to priority^alpha (as
 * numpy's choice(replace=False, p=...), not stratified); items of priority
 * 0 are drawn, uniformly, only once every item with a positive priority is
 * in the batch. Weights are computed as for hive_replay_sample from the
 * drawn items' priorities. The rows are chosen first (a set of twice the
 * batch: on the stack up to 128 items, else malloc'd), then copied; an item
 * overwritten during its copy is copied again as its replacement, with the
 * replacement's key, which is still distinct (one row, one key). A draw
 * costs O(log capacity), except once the items drawn hold nearly all the
 * mass: then a draw scans the capacity once.
 * Returns as hive_replay_sample; also HIVE_EINVAL for unknown flags or, with
 * HIVE_REPLAY_DISTINCT, a batch larger than the items held (the numbers in
 * the sentence); HIVE_ENOMEM if the set cannot be allocated.
 */
#define HIVE_REPLAY_DISTINCT 1u
int hive_replay_sample_ex(hive_replay_t *rb, size_t batch, unsigned flags, uint64_t *rng_state,
                          void *out_items, uint64_t *out_keys, double *out_weights, int64_t timeout_ns);

/*
 * hive_replay_update_priorities - set new priorities after learning.
 * @keys: n keys from hive_replay_sample.
 * @priorities: n priorities, finite and >= 0 (0: never sampled again while
 *              another item has a priority above 0), with priority^alpha at
 *              most DBL_MAX / (2 * capacity) (see "Limits of priorities").
 *
 * Every argument is checked before anything changes. A key whose item has
 * been overwritten since it was sampled is skipped. Lock-free against
 * sampling; it briefly holds the row's sequence lock so that a push landing
 * on the same row cannot interleave with it. Returns the number of
 * priorities applied (>= 0), HIVE_ESTATE if the buffer is not prioritized,
 * HIVE_EINVAL for NULL arguments, a NaN, infinite or negative priority, a
 * priority whose priority^alpha is above the bound, or a key never handed
 * out; nothing changes then.
 */
int hive_replay_update_priorities(hive_replay_t *rb, const uint64_t *keys, const double *priorities,
                                  size_t n);

typedef struct hive_replay_stats {
    uint64_t capacity;
    uint64_t size;            /* items held: min(inserts, capacity) */
    uint64_t inserts;         /* keys claimed since the buffer was made: items pushed, counted
                                 from the moment a push claims its key (before its bytes are
                                 in), plus the keys runs hold (see "Runs of keys") */
    uint64_t samples;         /* items sampled since the buffer was made */
    double   max_priority;    /* the largest priority seen (prioritized; 1.0 at first) */
    double   total_priority;  /* sum of priority^alpha over the items held (prioritized) */
} hive_replay_stats_t;

/* hive_replay_stats - a snapshot of the counters (each read atomically, not
 * all at one instant). HIVE_EINVAL for NULL arguments. */
int hive_replay_stats(const hive_replay_t *rb, hive_replay_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* HIVE_REPLAY_H */
