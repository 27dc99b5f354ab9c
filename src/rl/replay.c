/*
 * replay.c - the experience replay buffer of include/hive/replay.h.
 *
 * Built only on hive's public API: the items live in one shared U8 array
 * (hive_array_new / hive_array_view), everything else is this file's own
 * process memory and C11 atomics. The one internal header used is
 * util/error.h, for hive__fail: public code has no other way to set the
 * sentence behind hive_last_error(), and obslist.h, to be listed in the
 * engine's statistics (hive_replay_list).
 *
 * Layout
 *   data[row * item_size]  the array's payload, capacity rows.
 *   seq[row]               one 64-bit sequence word per row (below).
 *   cont[row]              the label of the item a row holds while its word
 *                          is a TURN word (see "Runs of keys").
 *   leaf[row]              prioritized only: priority^alpha of the row's
 *                          item (0: never written), never above leaf_max =
 *                          DBL_MAX / (2 * capacity): so every sum in the
 *                          tree, rounding included, stays finite, and so do
 *                          the sampling targets and the importance weights
 *                          (ratios of two finite leaves, at most 1).
 *                          leaf[] is padded with 0 to whole blocks of 8
 *                          and starts on a cache line, so a block of
 *                          leaves is one line.
 *   dirty, todo            prioritized only: a bit per block whose leaves
 *                          changed since the last flush (set by writers),
 *                          and the flusher's own list of the entries it
 *                          recomputes (see "The sum tree is lazy").
 *   tree, level[d]         prioritized only: an 8-ary sum tree whose groups
 *                          of 8 entries fill one cache line. Level 0 has an
 *                          entry per block of LEAF_BLOCK = 8 leaves (entry
 *                          b sums rows 8b .. 8b+7), each level above an
 *                          entry per group of 8 below (entry i of level d
 *                          sums entries 8i .. 8i+7 of level d-1), up to a
 *                          level of at most 8 entries, one group, whose sum
 *                          is the total, tree[0]. Every level starts on a
 *                          line and is padded with 0 to whole groups. A
 *                          sampler's descent loads one line per level (the
 *                          group) and picks the entry that holds its mass
 *                          by counting the group's prefix sums at or below
 *                          it, without a branch (group_pick), then does the
 *                          same along the block's leaves: for 65536 rows 5
 *                          lines and the leaves' line, where a binary tree
 *                          over the blocks took 13 dependent loads and 13
 *                          branches the predictor lost half the time. A
 *                          flush recomputes 5 levels instead of 13, a group
 *                          (one line) per entry. Doubles are kept as their
 *                          bits in atomic uint64s.
 *   cursor                 the next key to hand out (keys are insertion
 *                          numbers; row = key % capacity).
 *
 * The row sequence word: seq = (key + 1) << 1 | busy.
 *   seq >> 1 is the label: key + 1 of the item the row holds or is being
 *   written with (0: never written); the low bit is set while a writer or
 *   an update holds the row. So the word is odd while the row is being
 *   written and even when it is complete: a per-row seqlock (Lamport;
 *   Linux's seqcount) whose even values also say which item is there.
 *   Readers never write the word: they read it (even), copy the row and
 *   the leaf, and read it again; a changed or odd word means retry. A
 *   priority update brings the word back to the same even value (ABA), but
 *   it leaves the bytes alone and the leaf is one atomic word, so a reader
 *   straddling it gets the untouched item with either the old or the new
 *   priority, both of which that item had.
 *
 * One claim, then plain stores. A push claims its key with one
 * fetch-and-add on the cursor, and that claim is also its take of the
 * row: the keys of one row are k, k + cap, k + 2 cap, ..., each claimed
 * once, and the writer of each waits until the row's word is the even
 * word of the key before it (row_claim; 0 in the first lap), so a row's
 * writers take turns in key order and each is its row's only writer while
 * it writes: it stores its odd word, the bytes and the leaf, and its even
 * word with plain stores. One locked instruction per push (the claim),
 * where a CAS on the row's word used to follow it (and a look at a batch
 * gate before and after: blocks of rows that batches closed with a CAS of
 * their own). A batch claims its n keys with one fetch-and-add and writes
 * them a run of up to RUN_ROWS rows at a time: waits for and takes each
 * row of the run, one memcpy, the leaves, the even words; so a batch pays
 * one locked instruction in all, a mutex ring two (lock, unlock). A batch
 * longer than the capacity writes only its last capacity keys (the rest
 * would be overwritten at once); the row of each held, before the batch,
 * one of the capacity keys below it (run_put). The cost of the turns: a
 * writer whose key's previous lap is claimed but not yet written (its
 * writer descheduled between its claim and its even word) waits for it
 * (only that row's writer: the cursor and the other rows go on; under a
 * mutex every user waits for a descheduled holder). It spins a little and
 * then sleeps on a futex word that the next writer to finish a row bumps
 * (row_wait, row_wake: a push makes a system call only when a pusher
 * sleeps), so that on a machine with more threads than cores the waiters
 * leave the core to the writer they wait for; yielding in a loop instead
 * cut the stress test's pushes 4-11 times. An earlier version let a push overtake one a
 * lap behind that had not begun (a CAS per row, the slower push then
 * dropped its item); that cost a second locked instruction on every push
 * for the rare case of a pusher descheduled for a whole lap of pushes.
 *   A priority update of key k takes the row from the even word of k to
 *   its odd value with a CAS, and then looks at the cursor: if key k + cap
 *   has been claimed, the item is overwritten, and it gives the row back
 *   (a CAS back to the even word, which fails harmlessly if the pusher of
 *   k + cap has stored its odd word by then) and drops the priority; else
 *   it sets the leaf and stores the even word. Why a pusher and an update
 *   never both write (a Dekker pair of seq_cst operations): the pusher
 *   claims (fetch-and-add) and then loads the word; the update CASes the
 *   word and then loads the cursor. In their single total order one load
 *   comes after the other side's write: either the update sees the claim
 *   and gives up without writing, or the pusher sees the odd word and
 *   waits for the update's even store. An update finding another label
 *   (overwritten, or not written yet) drops its priority at once.
 *
 * Samplers and done. A sampler does not read a row's sequence word on
 * its fast path (that was an extra cache line per item, the mutex ring
 * reads only the row): it works the row's key out from a watermark and
 * validates its copies with one look at the cursor per chunk.
 *   done (the watermark): every key below it whose row has not been
 *   claimed again was seen complete. A sampler raises it at the start of
 *   each call (done_advance): from the old mark (or cursor - capacity, if
 *   higher: keys below that have been claimed over, and some of them, the
 *   head of a batch longer than the buffer, are never written), it reads
 *   the words of the keys after it in order (acquire) while each is even
 *   and names its key, stops at the first that does not (a push still
 *   writing), and publishes the new mark (release CAS, the
 *   larger of concurrent marks wins). Each key is scanned about once.
 *   The fast path for a row: its key is the newest key below done that
 *   maps to it (arithmetic, next_key); the copy is made; then, after an
 *   acquire fence, the cursor c2 is read. If key + capacity >= c2 (no push
 *   has claimed the row's next key), the copy is the item of that key and
 *   untorn: (a) that key's writer finished before the mark covered it
 *   (its release store, the scanner's acquire load, the mark's release and
 *   the sampler's acquire of it), and every older writer of the row
 *   finished before it (a row's writers take turns in key order); (b) a newer writer claims its key
 *   (fetch-and-add on the cursor) before its release fence and its first
 *   store to the row, so a copy that saw any of its stores makes the
 *   sampler's fence synchronise with that writer's, and c2 then sees the
 *   claim; (c) a priority update of that key changes only the leaf, an
 *   atomic the sampler reads inside the same window (either value belongs
 *   to the item). A row that fails (its next key claimed, or no key below
 *   the mark: a row the first lap has not completed) is read on its own
 *   under its sequence word (row_get), waiting for its writer. A mark
 *   stuck behind a descheduled pusher only sends more rows to that path.
 *   Samplers read rows a chunk at a time: choose the rows (prioritized:
 *   all descents of the chunk level by level, so their loads overlap;
 *   uniform: the next chunk's draws, with their prefetches, in the same
 *   loop as this chunk's copies) and prefetch them one chunk ahead; copy
 *   every row (the item size a constant for the common sizes); one look
 *   at the cursor checks the chunk by its smallest next key (uniform: a
 *   cursor still at the mark passes every row, as every next key is at
 *   least the mark; else row by row).
 *
 * The sum tree is lazy: a leaf is only written by its row's holder, who
 * then marks the leaf's block stale (a bit in dirty[], mark_block; an
 * update marks the blocks of a chunk of 32 leaves after one fence,
 * marks_flush) and leaves the entries alone. A sampler, update_priorities,
 * stats and the tree check first bring the tree up to its leaves
 * (tree_flush): one flusher at a time recomputes each marked block's entry
 * from its leaves and each entry above from its group, a level at a time
 * from a sorted list, once per entry, never by adding a difference,
 * which rounding would let drift (a huge priority set and reset absorbs
 * the small ones). A caller that finds a flush under way does not wait:
 * it goes on with the tree as it is. So a push costs one locked
 * instruction for the tree (its leaf's store) where it made one exchange
 * per level up to the root, on lines every producer shared (two producers
 * bounced the top of the tree on every push); the entries are recomputed
 * once per flush, not once per leaf. Once updates stop, one flush leaves
 * every entry the sum of its group. A sampler descending while leaves
 * change (or before the flush that covers them) can see an entry disagree
 * with its group; the descent clamps into the nearest entry that has mass
 * (group_clamp) and ends on a filled leaf (leaf > 0), scanning for the
 * nearest one in the rare case it does not.
 *
 * Inserts are counted by the cursor itself: a push counts from the moment
 * it claims its key (one atomic per push, not two), and so do the keys a
 * run holds (see "Runs of keys"). So the fill may include
 * a row whose first write is still under way; a sampler that picks it waits
 * for the writer, as it would for any row being rewritten.
 *
 * The rate limiter compares the cursor with the count of sampled items. A
 * sampler takes its batch from the sample count with a CAS only while the
 * bound holds; otherwise it sleeps on a futex word that a pusher bumps (and
 * wakes) only when a sampler has asked for it, so pushes pay one extra load
 * and one system call per sleep, not per push.
 */
#include <hive.h>
#include "obslist.h"
#include "store.h"
#include "rl/replay_check.h"
#include "util/error.h"
#include "util/seqlock.h"
#include "util/fault.h"

#include <float.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define REPLAY_PAD      128                 /* keeps hot counters off each other's lines */
#define REPLAY_ALIGNED  __attribute__((aligned(REPLAY_PAD)))
#define MAX_CAPACITY    (UINT64_C(1) << 48) /* keeps every size computation far from overflow */
#define SPIN_LIMIT      128
#define CHUNK           32                  /* rows picked and prefetched at a time */
#define UCHUNK          16                  /* the same for uniform draws (measured best) */
#define LEAF_BLOCK      8                   /* leaves under one entry of the tree's bottom level */
#define MAX_ALPHA       16.0                /* priorities up to 1e18 stay below the leaf bound */
#define RUN_ROWS        32                  /* rows a batch takes before it copies them */
#define FAN             8                   /* entries of a tree group: one cache line of doubles */
#define MAX_DEPTH       16                  /* levels of 2^45 blocks (MAX_CAPACITY / 8): 15 */
#define RUN_KEYS        32                  /* keys a contended single push claims at once */
#define RUN_MIN_CAP     (4 * RUN_KEYS)      /* smaller buffers never use runs */
#define RUN_CACHES      4                   /* buffers a thread keeps a run of keys for */
#define TURN            (UINT64_C(1) << 63) /* a row word's mark: a run holds the key, unwritten */
_Static_assert(LEAF_BLOCK == FAN, "a block of leaves is one group: one cache line");

struct hive_replay {
    /* set by hive_replay_new, read-only afterwards */
    hive_t           *h;
    hive_ref_t        ref;          /* the item array; the buffer holds one count */
    unsigned char    *data;
    uint64_t          cap;
    uint64_t          mask;         /* cap - 1 when cap is a power of two, else 0 */
    size_t            isz;
    uint64_t          blocks;       /* leaf blocks: entries of the tree's bottom level */
    unsigned          depth;        /* levels of the tree; level depth - 1 is one group */
    _Atomic uint64_t *level[MAX_DEPTH];   /* level d's entries (line-aligned groups of 8) */
    uint64_t          level_len[MAX_DEPTH];   /* entries of level d (not counting padding) */
    _Atomic uint64_t *seq;          /* cap row sequence words, line-aligned */
    _Atomic uint64_t *cont;         /* cap content labels of TURN rows (see "Runs of keys") */
    uint64_t          gen;          /* this buffer's number among all made: run caches' tag */
    bool              runs;         /* single pushes may claim runs: cap >= RUN_MIN_CAP */
    _Atomic uint64_t *leaf;         /* cap leaves (doubles' bits) and zero padding to a group
                                       of 8, line-aligned; NULL when uniform */
    _Atomic uint64_t *tree;         /* the total, then every level; NULL when uniform */
    void             *seq_mem, *leaf_mem, *tree_mem;  /* what calloc gave for seq and cont,
                                                         leaf, tree */
    _Atomic uint64_t *dirty;        /* prioritized: a bit per leaf block whose entry is stale */
    uint64_t         *todo;         /* prioritized: the flusher's list of entries, blocks long */
    double            alpha, beta, spi, error_buffer;
    double            leaf_max;     /* the largest leaf allowed: DBL_MAX / (2 cap) */
    uint64_t          min_size;
    uint64_t          seed;
    bool              may_wait;     /* a sampler can ever wait: spi > 0 or min_size > 0 */

    REPLAY_ALIGNED _Atomic uint64_t cursor;   /* next key = inserts so far; pushers' shared line */
    REPLAY_ALIGNED _Atomic uint64_t done;     /* samplers' watermark: see "Samplers and done" */
    REPLAY_ALIGNED _Atomic uint64_t samples;  /* items sampled (admitted) */
    _Atomic uint64_t calls;                   /* sample calls on the buffer's stream */
    REPLAY_ALIGNED _Atomic uint32_t epoch;    /* futex word of waiting samplers */
    _Atomic uint32_t want_wake;               /* a sampler sleeps: the next push wakes it */
    REPLAY_ALIGNED _Atomic uint32_t row_epoch; /* futex word of pushers waiting for a row */
    _Atomic uint32_t row_want;                /* such a pusher sleeps: the next writer wakes it */
    REPLAY_ALIGNED _Atomic uint32_t flushing; /* a tree_flush is under way */
    REPLAY_ALIGNED _Atomic uint64_t max_prio; /* bits: largest priority seen */
    _Atomic uint64_t max_leaf;                /* bits: max_prio ^ alpha */
    _Atomic uint64_t limiter_waits;           /* sleeps on the rate limiter (a statistic) */
    hive__listed_t   listed;                  /* in the engine's list (statistics) */
};

/* ------------------------------------------------------------------ helpers */

static inline uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static inline double bitsd(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/* Ask for a line in the state a store needs (exclusive): PREFETCHW on x86
 * (executed as a NOP by the CPUs that predate it). GCC's
 * __builtin_prefetch(p, 1) emits a read prefetch for the baseline x86-64
 * target, whose shared copy the store must then upgrade: with two
 * producers on neighbouring rows, that is a second transaction on a line
 * the other core holds. A hint only: no memory is read or written. */
static inline void prefetch_w(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1);
#endif
}

/* Waiting for a row's holder: it is in the middle of a short copy, so spin,
 * then give the core away (it may be preempted, or share our core). */
static inline void backoff(unsigned *spins)
{
    if (++*spins < SPIN_LIMIT)
        cpu_relax();
    else
        sched_yield();
}

/* splitmix64 (Steele, Lea, Flood 2014): one 64-bit state, any seed works. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Uniform in 0 .. n-1 (Lemire's multiply; bias below n / 2^64). */
static inline uint64_t rng_below(uint64_t *s, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)rng_next(s) * n) >> 64);
}

/* Uniform in [0, 1). */
static inline double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* ------------------------------------------------------------------ sum tree */

static inline double entry_get(const _Atomic uint64_t *w)
{
    /* relaxed: the tree publishes no other data; item bytes are validated
     * by the row's sequence word, never by a priority */
    return bitsd(atomic_load_explicit(w, memory_order_relaxed));
}

/* The total mass: the root, above the top group. */
static inline double tree_total(const hive_replay_t *rb)
{
    return entry_get(&rb->tree[0]);
}

static inline double leaf_get(const hive_replay_t *rb, uint64_t row)
{
    /* relaxed: as entry_get */
    return bitsd(atomic_load_explicit(&rb->leaf[row], memory_order_relaxed));
}

/* The sum of a group of FAN entries (one cache line), always in this
 * order, so that the same entries always give the same sum: pairs, then
 * pairs of pairs (three dependent adds where a left-to-right sum takes
 * seven). The leaves' group is read with seq_cst loads (see mark_block),
 * the tree's own with relaxed ones (entry_get). */
static inline double group_sum(const _Atomic uint64_t *g, memory_order mo)
{
    double e[FAN];
#pragma GCC unroll 8
    for (int k = 0; k < FAN; k++)
        e[k] = bitsd(atomic_load_explicit(&g[k], mo));
    return ((e[0] + e[1]) + (e[2] + e[3])) + ((e[4] + e[5]) + (e[6] + e[7]));
}

/* What lies under entry i of level d now: its block of leaves (level 0)
 * or its group on the level below. */
static double under_sum(const hive_replay_t *rb, unsigned d, uint64_t i)
{
    if (d == 0)
        return group_sum(&rb->leaf[i * FAN], memory_order_seq_cst);
    return group_sum(&rb->level[d - 1][i * FAN], memory_order_relaxed);
}

/* Mark block b's entry stale, for the next tree_flush. The caller stored a
 * leaf of the block with seq_cst just before (or stored leaves and then
 * issued a seq_cst fence: marks_flush); the mark is skipped when the
 * bit is set already (pushes of consecutive keys share a block, and the
 * word would else bounce between producers on every push). Why no leaf
 * store is left out of the tree: the flusher takes a word's bits with a
 * seq_cst exchange and only then reads the leaves (seq_cst). If our load
 * saw the bit set, it came before the exchange that clears it in the
 * single total order of seq_cst operations, and so did our leaf store
 * (program order): that flush's leaf loads see it. If our load saw it
 * clear, our fetch-or sets it after, and a later flush takes it. */
static inline void mark_block(hive_replay_t *rb, uint64_t b)
{
    _Atomic uint64_t *w = &rb->dirty[b / 64];
    uint64_t bit = UINT64_C(1) << (b % 64);
    if (!(atomic_load_explicit(w, memory_order_seq_cst) & bit))
        atomic_fetch_or_explicit(w, bit, memory_order_seq_cst);
}

/* Set a row's leaf; the caller holds the row (its claim, or an update's
 * odd word), so it is the only writer of the leaf. The holder's take of
 * the row (an acquire) ordered it after the previous holder's release
 * store, which came after that holder's leaf store, so the old value read
 * here is exact. The store is seq_cst for mark_block's argument. The tree
 * above the leaf is left to the next tree_flush: one locked instruction
 * per leaf instead of an exchange per level up to the root, whose lines
 * every producer shared. */
static void leaf_set(hive_replay_t *rb, uint64_t row, double v)
{
    double old = leaf_get(rb, row);
    if (old == v)
        return;
    atomic_store_explicit(&rb->leaf[row], dbits(v), memory_order_seq_cst);
    mark_block(rb, row / LEAF_BLOCK);
}

/* The fence between an update's leaf stores and its marks (marks_flush).
 * Not inlined under ThreadSanitizer, where GCC refuses (-Wtsan) a fence
 * inlined into another function (TSan does not model fences; the leaves
 * and marks are atomics, so it has nothing to report either way). */
#if defined(__SANITIZE_THREAD__)
__attribute__((noinline)) static void marks_fence(void)
#else
static inline void marks_fence(void)
#endif
{
    atomic_thread_fence(memory_order_seq_cst);
}

/* Set a row's leaf as leaf_set does, but leave its block's mark to the
 * caller's next marks_flush, so that the leaves of many rows share one
 * fence instead of paying a locked store each (update_priorities). The
 * store is relaxed: the holder's release of the row orders it for the next
 * holder and for readers, and marks_flush's fence for the flusher. True
 * if the leaf changed (its block then needs its mark). */
static inline bool leaf_put(hive_replay_t *rb, uint64_t row, double v)
{
    if (leaf_get(rb, row) == v)
        return false;
    atomic_store_explicit(&rb->leaf[row], dbits(v), memory_order_relaxed);
    return true;
}

/* Mark the n blocks of leaves stored with leaf_put since the last call.
 * Why none is left out of the tree (as mark_block's argument, with a
 * fence in the place of each seq_cst leaf store): the leaf stores come
 * before the seq_cst fence, the fence before mark_block's load of the
 * mark. If that load saw the bit still set, it read a value from before
 * the flusher's exchange that clears it, so our fence precedes that
 * exchange in the single total order, and the flusher's seq_cst leaf
 * loads after its exchange see our stores (a store sequenced before a
 * seq_cst fence is seen by every seq_cst load that follows the fence in
 * that order). If it saw the bit clear, our fetch-or sets it, after our
 * stores, for a later flush. */
static void marks_flush(hive_replay_t *rb, const uint64_t *blocks, size_t n)
{
    if (n == 0)
        return;
    marks_fence();
    for (size_t i = 0; i < n; i++)
        mark_block(rb, blocks[i]);
}

/* Bring the tree up to its leaves: every block marked since the last flush
 * gets its entry recomputed from its leaves, and every entry above one
 * recomputed gets recomputed from its group, groups before their parents,
 * the total last. An entry is recomputed, never adjusted by a difference:
 * adding +1e300 and then -1e300 to a total of 2 leaves 0 (the small part
 * is absorbed by rounding), and the tree would then say the buffer is
 * empty while items of priority 1 remain. Recomputing makes every entry
 * exact (to the roundings of one group sum per level) whatever came before.
 *
 * One flusher at a time: the entry stores are then plain (relaxed) stores
 * of the only writer, and each entry is written once per flush. A caller
 * that finds a flush under way does not wait for it and flushes nothing:
 * the marks it would have taken stay for the next flush, and it reads the
 * tree as it is (a descent copes with a tree that lags its leaves, see
 * group_pick). Samplers, update_priorities, stats and the tree check
 * flush; pushes only mark. So when everything is quiet, one flush leaves
 * every entry the sum of what lies under it. */
static uint64_t descend(const hive_replay_t *rb, double u);

static void tree_flush(hive_replay_t *rb)
{
    uint32_t idle = 0;
    /* relaxed look first: a sampler that meets a flush under way does not
     * bounce its line. acquire on success: the previous flusher's entry
     * stores and its use of todo[] come before ours (release below) */
    if (atomic_load_explicit(&rb->flushing, memory_order_relaxed) != 0 ||
        !atomic_compare_exchange_strong_explicit(&rb->flushing, &idle, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return;
    uint64_t words = (rb->blocks + 63) / 64, *todo = rb->todo;
    _Atomic uint64_t *bottom = rb->level[0];
    size_t n = 0;
    for (uint64_t w = 0; w < words; w++) {
        /* relaxed look: a clear word needs no exchange (a bit set after it
         * is the next flush's) */
        if (atomic_load_explicit(&rb->dirty[w], memory_order_relaxed) == 0)
            continue;
        /* seq_cst: see mark_block */
        uint64_t bits = atomic_exchange_explicit(&rb->dirty[w], 0, memory_order_seq_cst);
        for (; bits != 0; bits &= bits - 1) {
            uint64_t b = w * 64 + (uint64_t)__builtin_ctzll(bits);
            /* relaxed: readers only descend by the entries, see entry_get */
            atomic_store_explicit(&bottom[b], dbits(under_sum(rb, 0, b)), memory_order_relaxed);
            todo[n++] = b;
        }
    }
    if (n == 0)
        return (void)atomic_store_explicit(&rb->flushing, 0, memory_order_release);
    /* the levels above, one at a time: todo holds the entries recomputed on
     * one level in increasing order (the bits were taken in order), so their
     * parents come in nondecreasing order too and a parent shared by two of
     * them is the one just listed. The list is rewritten in place (parent k
     * is written at or before child k is read) and each parent recomputed
     * from its group, every entry of which is final by now. */
    for (unsigned d = 1; d < rb->depth; d++) {
        size_t m = 0;
        for (size_t k = 0; k < n; k++) {
            uint64_t parent = todo[k] / FAN;
            if (m == 0 || todo[m - 1] != parent)
                todo[m++] = parent;
        }
        for (size_t k = 0; k < m; k++)
            /* relaxed: the group is this flusher's own stores (or a
             * previous flusher's, ordered by the acquire above) */
            atomic_store_explicit(&rb->level[d][todo[k]], dbits(under_sum(rb, d, todo[k])),
                                  memory_order_relaxed);
        n = m;
    }
    /* relaxed: as above */
    atomic_store_explicit(&rb->tree[0], dbits(group_sum(rb->level[rb->depth - 1], memory_order_relaxed)),
                          memory_order_relaxed);
    atomic_store_explicit(&rb->flushing, 0, memory_order_release);
}

uint64_t hive__replay_descend(const hive_replay_t *rb, double mass)
{
    if (rb->tree == NULL)
        return UINT64_MAX;
    tree_flush((hive_replay_t *)rb);        /* the record is never const itself */
    return descend(rb, mass);
}

uint64_t hive__replay_tree_check(const hive_replay_t *rb)
{
    uint64_t bad = 0;
    if (rb->tree != NULL) {
        tree_flush((hive_replay_t *)rb);    /* the record is never const itself */
        for (unsigned d = 0; d < rb->depth; d++) {
            uint64_t padded = (rb->level_len[d] + FAN - 1) / FAN * FAN;
            for (uint64_t i = 0; i < padded; i++)   /* the padding must stay 0 */
                bad += entry_get(&rb->level[d][i]) != (i < rb->level_len[d] ? under_sum(rb, d, i) : 0);
        }
        bad += tree_total(rb) != group_sum(rb->level[rb->depth - 1], memory_order_relaxed);
        for (uint64_t row = rb->cap; row < rb->blocks * FAN; row++)
            bad += leaf_get(rb, row) != 0;
    }
    return bad;
}

/* Largest double below x (x > 0): keeps a target strictly inside an entry. */
static inline double below(double x)
{
    return nextafter(x, 0.0);
}

/* The nearest row with a positive leaf to row, or UINT64_MAX if none:
 * the clamp for a descent that found no mass where its sums said, because
 * it raced with updates or met rounding residue. O(capacity), and rare. */
static uint64_t nearest_filled(const hive_replay_t *rb, uint64_t row)
{
    if (leaf_get(rb, row) > 0)
        return row;
    for (uint64_t d = 1; d <= rb->cap; d++) {
        if (row >= d && leaf_get(rb, row - d) > 0)
            return row - d;
        if (row + d < rb->cap && leaf_get(rb, row + d) > 0)
            return row + d;
    }
    return UINT64_MAX;
}

/* The rare end of group_pick: entry c of group e (its mass u) cannot hold
 * u, because the sums above lagged the group or rounding left a sliver.
 * Clamp into the nearest entry with mass: c itself (u to its last or first
 * bit of mass), else the last one before it with mass (u at its end),
 * else the first one after it (u at its start). An empty group gives its
 * first entry with u = 0, and the leaves' scan then finds the nearest
 * filled row. Never an entry of the padding: those are 0, and the first
 * entry of every group a descent reaches is a real one (the group of real
 * entry g above starts at entry 8g, below the level's length), so every
 * entry chosen is real, and so is every group and block it leads to. */
static __attribute__((noinline)) unsigned group_clamp(const double *e, unsigned c, double *u)
{
    if (e[c] > 0) {
        *u = *u >= e[c] ? below(e[c]) : 0;
        return c;
    }
    for (unsigned k = c; k-- > 0;)
        if (e[k] > 0) {
            *u = below(e[k]);
            return k;
        }
    for (unsigned k = c + 1; k < FAN; k++)
        if (e[k] > 0) {
            *u = 0;
            return k;
        }
    *u = 0;
    return 0;
}

/* The entry of group g (one cache line of FAN entries) whose prefix-sum
 * interval holds mass *u, and *u less the entries before it. The prefix
 * sums of the line's entries are nondecreasing, so the entry is the count
 * of them at or below *u: seven compares added up, no branch (which way a
 * descent goes is a coin toss the predictor loses half the time), one
 * load of a line where a binary tree takes three dependent loads and three
 * branches. Only the rare clamp branches. */
static inline unsigned group_pick(const _Atomic uint64_t *g, double *u)
{
    double v = *u, pre[FAN];
    pre[0] = 0;
#pragma GCC unroll 8
    for (int k = 1; k < FAN; k++)
        pre[k] = pre[k - 1] + entry_get(&g[k - 1]);
    unsigned c = 0;
#pragma GCC unroll 8
    for (int k = 1; k < FAN; k++)
        c += pre[k] <= v;
    double ec = entry_get(&g[c]);
    v -= pre[c];
    *u = v;
    if (__builtin_expect(!(v < ec && v >= 0), 0)) {
        double e[FAN];
        for (int k = 0; k < FAN; k++)
            e[k] = entry_get(&g[k]);
        c = group_clamp(e, c, u);
    }
    return c;
}

static uint64_t block_scan(const hive_replay_t *rb, uint64_t b, double u);

/* The row whose prefix-sum interval holds mass u (0 <= u < total): down
 * the levels a group (one line) at a time to a block, then along the
 * block's leaves (one line). */
static uint64_t descend(const hive_replay_t *rb, double u)
{
    uint64_t e = 0;                         /* the top level is one group, group 0 */
    for (unsigned d = rb->depth; d-- > 0;)
        e = e * FAN + group_pick(&rb->level[d][e * FAN], &u);
    return block_scan(rb, e, u);
}

/* descend for m masses at once (m <= CHUNK), level by level: the loads of
 * one level are independent of each other, so their misses overlap rather
 * than come one after another as in m separate descents; the blocks'
 * leaves are asked for before any is scanned. */
static void descend_chunk(const hive_replay_t *rb, const double *mass, size_t m, uint64_t *rows)
{
    uint64_t e[CHUNK];
    double u[CHUNK];
    for (size_t j = 0; j < m; j++) {
        e[j] = 0;
        u[j] = mass[j];
    }
    for (unsigned d = rb->depth; d-- > 0;) {
        const _Atomic uint64_t *lv = rb->level[d];
        for (size_t j = 0; j < m; j++)
            e[j] = e[j] * FAN + group_pick(&lv[e[j] * FAN], &u[j]);
    }
    for (size_t j = 0; j < m; j++)
        __builtin_prefetch(&rb->leaf[e[j] * FAN]);   /* the block's line */
    for (size_t j = 0; j < m; j++)
        rows[j] = block_scan(rb, e[j], u[j]);
}

/* Along block b's leaves (one line) to the row that holds mass u. */
static uint64_t block_scan(const hive_replay_t *rb, uint64_t b, double u)
{
    uint64_t first = b * FAN;
    unsigned c = group_pick(&rb->leaf[first], &u);
    if (first + c < rb->cap && leaf_get(rb, first + c) > 0)
        return first + c;
    /* the block had no mass (a lagging tree): the nearest filled row */
    return nearest_filled(rb, first < rb->cap ? first : rb->cap - 1);
}

/* ------------------------------------------------------------------ rows */

/* memcpy for an item, inlined: 16-byte moves and one overlapping move for
 * the tail (items of 16 bytes or more), instead of a call that dispatches
 * on the size every time; a transition is a few dozen bytes. */
static inline void item_copy(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (n < 16 || n > 256) {
        memcpy(d, s, n);
        return;
    }
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        memcpy(d + i, s + i, 16);
    if (i < n)
        memcpy(d + n - 16, s + n - 16, 16);
}

/* The copy that races with a writer by design of the seqlock (its result is
 * thrown away when the sequence word moved): util/seqlock.h's under
 * ThreadSanitizer, the tuned item copy otherwise. */
#if defined(__SANITIZE_THREAD__)
#define racy_copy hive__racy_copy
#else
#define racy_copy item_copy
#endif

/* Ask for the lines of a row's bytes at p (first and last: a row may
 * straddle two; and every line between for longer rows). */
static inline void row_prefetch_at(const unsigned char *p, size_t isz, bool bytes)
{
    if (!bytes)
        return;
    __builtin_prefetch(p);
    __builtin_prefetch(p + isz - 1);
    for (size_t off = 64; off + 1 < isz; off += 64)
        __builtin_prefetch(p + off);
}

/* Ask for a row's lines (its leaf, the sequence word for writing if the
 * caller takes the row, and the bytes if wanted) ahead of their use. Samplers do not
 * ask for the word: their fast path never reads it (see "Samplers and
 * done"). */
static inline void row_prefetch(const hive_replay_t *rb, uint64_t row, bool bytes, bool word)
{
    if (word)
        prefetch_w(&rb->seq[row]);          /* taken with a CAS: read and written */
    row_prefetch_at(rb->data + row * rb->isz, rb->isz, bytes);
    if (rb->leaf != NULL)
        __builtin_prefetch(&rb->leaf[row]);
}

/* The row of a key: key % capacity, without a division when the capacity
 * is a power of two (a 64-bit division costs as much as the rest of a push). */
static inline uint64_t row_of(const hive_replay_t *rb, uint64_t key)
{
    return rb->mask != 0 ? key & rb->mask : key % rb->cap;
}

/* The writer's release fence between taking a row (odd word) and storing
 * its bytes. Not inlined under ThreadSanitizer, where GCC refuses (-Wtsan)
 * a fence inlined into another function (as util/seqlock.h's reader
 * fence); TSan orders writers by the CAS and the release store instead. */
#if defined(__SANITIZE_THREAD__)
__attribute__((noinline)) static void writer_fence(void)
#else
static inline void writer_fence(void)
#endif
{
    atomic_thread_fence(memory_order_release);
}

/* The word a row holds once the item before key's is complete: the label
 * of key - capacity, even, or 0 while key is in the first lap (the row was
 * never written). prev_lap is key's place counted a lap on: key itself for
 * a single push, see run_put for a batch longer than the capacity. */
static inline uint64_t ready_word(const hive_replay_t *rb, uint64_t prev_lap)
{
    return prev_lap >= rb->cap ? (prev_lap - rb->cap + 1) << 1 : 0;
}

/* Wait until a row's word is `ready` (the item of the row's previous key
 * complete, and no priority update holding it), then take the row for
 * the key labelled `label` with a plain store of its odd word. The caller
 * claimed that key from the cursor, so it is the row's only writer (see
 * "One claim, then plain stores" at the top of the file): the previous
 * key's writer stores `ready` last, and the next key's writer waits for
 * ours; an update takes the row only from the even word and gives it
 * back (gives up) once it sees our claim, see update_priorities.
 *
 * seq_cst loads: acquire, pairing with the previous writer's release
 * store (its bytes and leaf come before ours); and the pusher's half of
 * the Dekker pair with an update (our claim on the cursor, then this
 * load; its CAS on the word, then its load of the cursor), so that an
 * update which took the row after our load sees our claim and gives up
 * without writing. Plain loads on x86. */
static void futex_wait(_Atomic uint32_t *word, uint32_t seen, uint64_t timeout_ns);
static void futex_wake_all(_Atomic uint32_t *word);

#define ROW_NAP_NS 200000                   /* the longest sleep of a pusher waiting for a row */

/* Whether a row's word s shows the turn before ours complete: ready (the
 * previous key written), or that key's TURN word (a run holds it and has
 * not begun it: see "Runs of keys"; a run never holds a first-lap key, so
 * ready 0 has no TURN form). */
static inline bool turn_done(uint64_t s, uint64_t ready)
{
    return s == ready || s == (ready | TURN);
}

/* The slow half of row_claim: the row's previous writer is still at it
 * (or has not begun: descheduled between its claim and its first store).
 * Spin a little, then sleep on row_epoch until a writer finishes a row,
 * rather than yield in a loop: on a machine with more threads than cores
 * the writer we wait for needs the core, and a waiter that keeps yielding
 * competes for it (in the stress test's oversubscribed phases that convoy
 * cost most of the pushes). The sleep is bounded (ROW_NAP_NS): a writer
 * looks at row_want with a relaxed load after its release store, without
 * the seq_cst pair that would make the wake exact, so a wake can be
 * missed, and then the nap ends it. */
static __attribute__((noinline)) uint64_t row_wait(hive_replay_t *rb, _Atomic uint64_t *sq,
                                                   uint64_t ready)
{
    unsigned spins = 0;
    uint64_t s;
    /* seq_cst loads: as in row_claim */
    while (!turn_done(s = atomic_load_explicit(sq, memory_order_seq_cst), ready)) {
        if (++spins < SPIN_LIMIT) {
            cpu_relax();
            continue;
        }
        /* acquire: pairs with the waker's release bump, so a bump after
         * this read ends the sleep at once */
        uint32_t seen = atomic_load_explicit(&rb->row_epoch, memory_order_acquire);
        /* relaxed: a request to the writers; a missed one costs a nap */
        atomic_store_explicit(&rb->row_want, 1, memory_order_relaxed);
        if (turn_done(s = atomic_load_explicit(sq, memory_order_seq_cst), ready))
            break;
        futex_wait(&rb->row_epoch, seen, ROW_NAP_NS);
        spins = 0;
    }
    return s;                               /* the word that showed the turn done */
}

/* After a writer's release store of a row's even word: wake the pushers
 * that sleep in row_wait, if any asked (one load of a line nobody writes
 * while nobody waits). */
static inline void row_wake(hive_replay_t *rb)
{
    /* relaxed: see row_wait (a missed request costs the waiter a nap) */
    if (__builtin_expect(atomic_load_explicit(&rb->row_want, memory_order_relaxed) != 0, 0) &&
        atomic_exchange_explicit(&rb->row_want, 0, memory_order_relaxed) != 0) {
        /* release: see row_wait */
        atomic_fetch_add_explicit(&rb->row_epoch, 1, memory_order_release);
        futex_wake_all(&rb->row_epoch);
    }
}

static inline void row_claim(hive_replay_t *rb, _Atomic uint64_t *sq, uint64_t ready, uint64_t label)
{
    if (__builtin_expect(!turn_done(atomic_load_explicit(sq, memory_order_seq_cst), ready), 0))
        row_wait(rb, sq, ready);
    /* relaxed: no other writer stores to the word now but an update's
     * hand-back, a CAS expecting its own odd word, which this store makes
     * fail; readers are ordered by the writer's fence that follows */
    atomic_store_explicit(sq, label << 1 | 1, memory_order_relaxed);
}

/* One item's bytes into its row: a transition is a few dozen bytes, so the
 * common sizes are constant moves. */
static inline __attribute__((always_inline)) void item_put(unsigned char *dst, const void *src,
                                                           size_t isz)
{
    switch (isz) {
    case 16: item_copy(dst, src, 16); break;
    case 32: item_copy(dst, src, 32); break;
    case 48: item_copy(dst, src, 48); break;
    case 64: item_copy(dst, src, 64); break;
    case 96: item_copy(dst, src, 96); break;
    case 128: item_copy(dst, src, 128); break;
    default: item_copy(dst, src, isz); break;
    }
}

/* Write the item of key into its row, which the caller holds (its odd
 * word stored), and give the row back complete. */
static inline __attribute__((always_inline)) void row_fill(hive_replay_t *rb, _Atomic uint64_t *sq,
                                                           unsigned char *dst, uint64_t key,
                                                           uint64_t row, const void *src, double leaf)
{
    /* sq and dst from the caller: computed before the copy, whose stores
     * could alias the record and would make the compiler reload it */
    /* release fence: the odd word is ordered before every byte stored
     * below, so a reader whose copy saw one of them and then issued its
     * acquire fence re-reads the word as odd or later, and retries */
    writer_fence();
    item_put(dst, src, rb->isz);
    if (rb->tree != NULL)
        leaf_set(rb, row, leaf);
    /* release: bytes and leaf are visible to whoever reads this even value
     * with acquire (readers, the next holder) */
    atomic_store_explicit(sq, (key + 1) << 1, memory_order_release);
    row_wake(rb);
}

/* Write the item of key into its row (the key claimed by the caller). */
static void row_put(hive_replay_t *rb, uint64_t key, uint64_t row, const void *src, double leaf)
{
    _Atomic uint64_t *sq = &rb->seq[row];
    unsigned char *dst = rb->data + row * rb->isz;
    /* the word's line and the row's, for writing, so that their misses
     * overlap (the word is read and then written: one transfer, not a
     * shared copy and then its upgrade) */
    prefetch_w(sq);
    prefetch_w(dst);
    prefetch_w(dst + rb->isz - 1);
    row_claim(rb, sq, ready_word(rb, key), key + 1);
    row_fill(rb, sq, dst, key, row, src, leaf);
}

/* Write the items of keys key .. key+n-1 into the n consecutive rows from
 * row (no wrap inside), claimed by the caller in one batch from base: take
 * every row (row_claim), then one memcpy for the run, the leaves, and the
 * even words. A batch of more than the capacity keeps only its last
 * capacity keys; the row of each had, before the batch, the key
 * base - cap + (key - base) % cap (for shorter batches, key - cap), whose
 * completion it waits for. */
static void run_put(hive_replay_t *rb, uint64_t base, uint64_t key, uint64_t row, size_t n,
                    const unsigned char *src, double leaf)
{
    _Atomic uint64_t *sq = &rb->seq[row];
    const size_t isz = rb->isz;
    const uint64_t cap = rb->cap;           /* a local: the word stores could alias the record */
    unsigned char *dst = rb->data + row * isz;
    /* ask for the run's lines for writing now, so that their misses overlap
     * the takes of the words below instead of coming one after another
     * under the memcpy */
    const size_t bytes = n * isz;
#pragma GCC unroll 4
    for (size_t off = 0; off < bytes; off += 64)
        prefetch_w(dst + off);
    prefetch_w(dst + bytes - 1);            /* the last line, if dst is not on a line */
    for (size_t i = 0; i < n; i += 8)
        prefetch_w(&sq[i]);                 /* the words' lines, read and then written */
    prefetch_w(&sq[n - 1]);
    if (__builtin_expect(key >= cap && key - base + n <= cap, 1)) {
        /* the common case: every row's previous key is k - cap, so the
         * ready words and ours are two runs of consecutive labels. Every
         * word is looked at first, in a loop that only loads and compares
         * (each word differs from its ready word in no bit but the TURN
         * mark: the previous key's even word or its TURN word, as
         * turn_done accepts; a label never reaches the mark's bit), and
         * when every turn is done all are taken with plain stores: about 7
         * instructions a row for the look and the take, where row_claim's
         * took 11.6 (callgrind). It is row_claim's protocol row by row
         * (each row's store follows its own seq_cst load; only the time
         * between them is longer, and an update or a TURN holder that
         * takes a row in that time sees our claim and gives the row back,
         * as in row_claim). A row not done sends the run to row_claim,
         * which looks again and waits. */
        const uint64_t ready = (key - cap + 1) << 1, odd = (key + 1) << 1 | 1;
        uint64_t miss = 0;
#pragma GCC unroll 8
        for (size_t i = 0; i < n; i++)
            /* seq_cst: as in row_claim (acquire of the previous writer's
             * stores; our half of the Dekker pair with an update) */
            miss |= atomic_load_explicit(&sq[i], memory_order_seq_cst) ^ (ready + 2 * i);
        if (__builtin_expect((miss & ~TURN) == 0, 1)) {
#pragma GCC unroll 8
            for (size_t i = 0; i < n; i++)
                /* relaxed: as in row_claim */
                atomic_store_explicit(&sq[i], odd + 2 * i, memory_order_relaxed);
        } else {
            for (size_t i = 0; i < n; i++)
                row_claim(rb, &sq[i], ready + 2 * i, key + i + 1);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            uint64_t k = key + i;
            /* the division only past the head that a batch this long skips */
            uint64_t lap = k - base >= cap ? base + (k - base) % cap : k;
            row_claim(rb, &sq[i], ready_word(rb, lap), k + 1);
        }
    }
    /* release fence: as in row_put, the odd words before the bytes */
    writer_fence();
    memcpy(dst, src, n * isz);
    if (rb->tree != NULL)
        for (size_t i = 0; i < n; i++)
            leaf_set(rb, row + i, leaf);
    /* release: as in row_put, bytes and leaf before the even word */
    const uint64_t even = (key + 1) << 1;
#pragma GCC unroll 8
    for (size_t i = 0; i < n; i++)
        atomic_store_explicit(&sq[i], even + 2 * i, memory_order_release);
    row_wake(rb);
}

/* Runs of keys (single pushes from several threads at once). With keys
 * handed out one a push, two producers alternate keys, so every push moves
 * the cursor's line and its row's word, data and leaf lines from the other
 * core (~100 ns a push against ~9 ns with runs of 32 keys, see
 * docs/benchmarks.md). So a thread whose single pushes into a full buffer
 * meet another producer's claims between its own claims RUN_KEYS keys at
 * once and keeps the rest in a per-thread cache (run_cache_t) for its next
 * pushes; its rows are then its own lines.
 *   A held key may never be written (the thread stops pushing), and it must
 * never stall anybody. So at claim time the owner takes each of the run's
 * rows in turn as a batch would (row_claim's wait for the previous turn,
 * the same Dekker pair with updates), and instead of writing it stores the
 * key's TURN word: TURN | (key + 1) << 1, even, meaning "this key's turn is
 * taken by a run and not begun; the row still holds the item labelled
 * cont[row]" (run_hold). The next lap's writer counts a TURN word of its
 * previous key as that turn complete (turn_done), so unwritten keys stall
 * no writer; a sampler reading a TURN word (row_get) returns the row's
 * previous item, with its key from cont[] and its own leaf, so it waits for
 * nobody either; done_advance stops at a TURN word (it is not the key's
 * even word) and the fast path never accepts the row (its next key is
 * claimed). An update of that previous item is dropped (its label is not
 * the word's), as for any item whose next key is claimed.
 *   The owner's push of a held key k (run_push): CAS the word from TURN(k)
 * to odd(k), then look at the cursor (seq_cst): if key k + cap is claimed
 * its writer may have counted our TURN word as done and be writing, so
 * give the row back (CAS odd(k) -> TURN(k), which fails harmlessly if that
 * writer stored over it), write nothing, and push with a fresh claim. Why
 * the owner and that writer never both write: the writer claims (seq_cst
 * fetch-and-add) and then loads the word (seq_cst); the owner CASes the
 * word and then loads the cursor. In the single total order one load comes
 * after the other side's write: either the writer sees odd(k) and waits
 * for the owner's even word, or the owner sees the claim and gives up. A
 * failed CAS means the row moved on: the rest of the run is dropped the
 * same way (its rows stay TURN words, harmless). Every take of a TURN word
 * is by its key's owner (CAS) or by a next-lap writer after its claim, so
 * batches keep their plain stores. */
typedef struct run_cache {
    uint64_t gen;                           /* the buffer's gen (0: empty) */
    uint64_t next, left;                    /* held keys next .. next + left - 1 */
    uint64_t expect;                        /* the end of our last claim (0: none yet) */
    bool     contended;                     /* another producer claimed between our last two */
} run_cache_t;

static _Thread_local run_cache_t run_caches[RUN_CACHES];
static _Atomic uint64_t replay_gens;        /* buffers made: each gets the next number */

/* Hold the keys base .. base + n - 1 (claimed by the caller, all at least
 * a capacity: no first-lap key) as TURN words; see "Runs of keys". */
static void run_hold(hive_replay_t *rb, uint64_t base, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t k = base + i, row = row_of(rb, k);
        _Atomic uint64_t *sq = &rb->seq[row];
        uint64_t ready = ready_word(rb, k);
        /* seq_cst: as in row_claim (the pusher's half of the Dekker pair
         * with an update, and acquire of the previous writer's stores) */
        uint64_t s = atomic_load_explicit(sq, memory_order_seq_cst);
        /* the word that showed the turn done decides, never a second look:
         * an update (of the previous key) or the holder of a TURN word may
         * take the row for a moment after it, but either then sees our
         * claim on the cursor and gives the row back untouched (see
         * row_claim and run_push) */
        if (!turn_done(s, ready))
            s = row_wait(rb, sq, ready);
        if (s == ready)                     /* the previous key written: it is the content now */
            /* release: the reader's acquire fence after reading it orders
             * the word's change away from the value it read before it */
            atomic_store_explicit(&rb->cont[row], ready >> 1, memory_order_release);
        /* release: the content's bytes and cont[] before the TURN word, for
         * the readers and writers that acquire it */
        atomic_store_explicit(sq, TURN | (k + 1) << 1, memory_order_release);
    }
    row_wake(rb);
}

/* Write item as the held key k (see "Runs of keys"); false if the row has
 * moved on (nothing written: push with a fresh claim). */
static bool run_push(hive_replay_t *rb, uint64_t k, const void *item, double leaf)
{
    uint64_t row = row_of(rb, k);
    _Atomic uint64_t *sq = &rb->seq[row];
    unsigned char *dst = rb->data + row * rb->isz;
    prefetch_w(dst);
    prefetch_w(dst + rb->isz - 1);
    uint64_t turn = TURN | (k + 1) << 1, odd = (k + 1) << 1 | 1;
    uint64_t s = turn;
    /* seq_cst: acquire of the TURN store (the content's writer and the
     * holder before us), and our half of the Dekker pair with the next
     * lap's writer (this CAS, then the look at the cursor) */
    if (!atomic_compare_exchange_strong_explicit(sq, &s, odd, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return false;
    if (atomic_load_explicit(&rb->cursor, memory_order_seq_cst) > k + rb->cap) {
        /* relaxed: we wrote nothing; the CAS continues the release sequence
         * of the TURN store for the writer that waits for it */
        atomic_compare_exchange_strong_explicit(sq, &odd, turn, memory_order_relaxed,
                                                memory_order_relaxed);
        row_wake(rb);
        return false;
    }
    row_fill(rb, sq, dst, k, row, item, leaf);
    return true;
}

/* The seqlock reader's second look at a row's word: util/seqlock.h. */
#define seq_reread hive__seq_reread

/* What a sampler reads, taken out of the record once per call: stores
 * through the caller's byte buffer could alias the record's fields and
 * would force the compiler to reload them after every item. */
typedef struct reader {
    _Atomic uint64_t    *seq;
    _Atomic uint64_t    *cont;          /* content labels of TURN rows */
    const unsigned char *data;
    size_t               isz;
    _Atomic uint64_t    *leaf;          /* the leaves of the sum tree, NULL when uniform */
    _Atomic uint64_t    *cursor;        /* the second look of the fast path */
    uint64_t             cap;
    uint64_t             done;          /* the watermark of this call */
    uint64_t             lap;           /* done - 1 rounded down to a multiple of cap */
    uint64_t             last;          /* row of done - 1 */
} reader_t;

/* Bring the samplers' watermark up and return it (see "Samplers and
 * done" at the top of the file): every key below it whose row was not
 * claimed again by the time of a later look at the cursor was seen
 * complete, its row's word even and naming it. The scan starts at the old
 * mark, or at cursor - capacity if that is higher (an older key's row has
 * been claimed again already: it can never pass a sampler's check, and a
 * key that is never written, such as the first of a batch longer than the
 * capacity, is left behind so), and stops at the first key not complete,
 * or at the cursor. Each key is scanned about once over the buffer's
 * life, by whichever sampler comes first: one sequential load per push. */
static uint64_t done_advance(hive_replay_t *rb)
{
    /* acquire: pairs with the release CAS below of the scanner that
     * raised it, so every row it saw complete (its acquire loads of their
     * words) comes before our copies */
    uint64_t w = atomic_load_explicit(&rb->done, memory_order_acquire);
    /* relaxed: only compared with; a sampler's later look at the cursor
     * comes after this one (we publish the mark after it, release), so
     * that look is at least as high */
    uint64_t c = atomic_load_explicit(&rb->cursor, memory_order_relaxed);
    uint64_t k = w;
    if (c > rb->cap && k < c - rb->cap)
        k = c - rb->cap;
    if (k >= c)
        return w;
    uint64_t row = row_of(rb, k);
    /* acquire: pairs with the holder's release store of the even word, so
     * the bytes (and leaf) of key k come before every sampler that reads
     * the mark we publish */
    while (k < c && atomic_load_explicit(&rb->seq[row], memory_order_acquire) == (k + 1) << 1) {
        k++;
        if (++row == rb->cap)
            row = 0;
    }
    /* release: publishes the looks above; acquire on failure: another
     * scanner's higher mark, with its looks */
    while (w < k && !atomic_compare_exchange_weak_explicit(&rb->done, &w, k, memory_order_release,
                                                           memory_order_acquire))
        ;
    return w > k ? w : k;
}

/* A reader for one sample call, with the watermark done. */
static reader_t reader_of(hive_replay_t *rb, uint64_t done)
{
    reader_t r = { .seq = rb->seq, .cont = rb->cont, .data = rb->data, .isz = rb->isz, .leaf = rb->leaf,
                   .cursor = &rb->cursor, .cap = rb->cap, .done = done };
    if (done > 0) {
        r.last = row_of(rb, done - 1);
        r.lap = done - 1 - r.last;
    }
    return r;
}

/* The key that will next overwrite row, counting from the watermark: the
 * newest key below the mark that maps to row plus the capacity (rows up
 * to the mark's row hold keys of its lap, the rest keys of the lap
 * before; no division). Its row's copy is good if this key was not
 * claimed by the sampler's look at the cursor after the copy, c2: if
 * next_key >= c2. A row with no key below the mark (past the mark in the
 * first lap) gets the row number itself, which is below c2 (every row
 * drawn is below the fill, itself at most c2): it always fails. The
 * caller checks done > 0 itself (with no mark, every row fails). */
static inline uint64_t next_key(const reader_t *r, uint64_t row)
{
    return row + (row <= r->last ? r->lap + r->cap : r->lap);
}

/* Copy row into dst (if not NULL) consistently and return its key; *leaf
 * (if not NULL) gets the row's leaf as it was for that item. */
static inline uint64_t row_get(const reader_t *r, uint64_t row, void *dst, double *leaf)
{
    _Atomic uint64_t *sq = &r->seq[row];
    unsigned spins = 0;
    for (;;) {
        /* acquire: pairs with the holder's release store, so the bytes and
         * leaf of the item this word names are what we read */
        uint64_t s1 = atomic_load_explicit(sq, memory_order_acquire);
        if ((s1 & 1) || s1 == 0) {          /* being written (or claimed, not yet written) */
            backoff(&spins);
            continue;
        }
        if (dst != NULL)
            racy_copy(dst, r->data + row * r->isz, r->isz);
        /* relaxed: read inside the window, validated by the re-read below */
        double v = r->leaf != NULL ? bitsd(atomic_load_explicit(&r->leaf[row], memory_order_relaxed)) : 0;
        /* a TURN word: the row still holds the item whose label cont[]
         * keeps (see "Runs of keys"). relaxed: cont changes only while the
         * word is not a TURN word, and its release store comes after the
         * word left this value, so the re-read below catches a change */
        uint64_t label = (s1 & TURN) ? atomic_load_explicit(&r->cont[row], memory_order_relaxed)
                                     : s1 >> 1;
        if (seq_reread(sq) == s1) {
            if (leaf != NULL)
                *leaf = v;
            return label - 1;
        }
        spins = 0;
    }
}

/* The copies of a chunk's rows, all of them, whether or not their first
 * look found them complete (a busy row's copy is simply thrown away):
 * a loop with nothing in it but the copies. Always inlined, so that the
 * callers below pass the common item sizes as constants and each copy
 * becomes a few moves, not a loop. */
static inline __attribute__((always_inline)) void rows_copy(const unsigned char *data, size_t isz,
                                                            const uint64_t *rows, size_t m,
                                                            unsigned char *dst)
{
    for (size_t j = 0; j < m; j++)
        racy_copy(dst + j * isz, data + rows[j] * isz, isz);
}

static void rows_copy_any(const unsigned char *data, size_t isz, const uint64_t *rows, size_t m,
                          unsigned char *dst)
{
    switch (isz) {                        /* a transition is a few dozen bytes */
    case 16: rows_copy(data, 16, rows, m, dst); break;
    case 32: rows_copy(data, 32, rows, m, dst); break;
    case 48: rows_copy(data, 48, rows, m, dst); break;
    case 64: rows_copy(data, 64, rows, m, dst); break;
    case 96: rows_copy(data, 96, rows, m, dst); break;
    case 128: rows_copy(data, 128, rows, m, dst); break;
    default: rows_copy(data, isz, rows, m, dst); break;
    }
}

/* Copy m (<= CHUNK) rows out (dst may be NULL): keys[j] and, if leaves is
 * not NULL, leaves[j] for rows[j]. The fast path of "Samplers and done":
 * each row's key comes from the watermark (no load), every copy is made,
 * then one look at the cursor (after seq_reread's acquire fence, so every
 * copy is ordered before it) says whether any row was claimed again since
 * its key was seen complete: the chunk is good at once if its smallest
 * next_key is not claimed yet; else row by row, and a row that fails is
 * read again on its own under its sequence word (row_get). */
__attribute__((noinline))
static void rows_get(const reader_t *r, const uint64_t *rows, size_t m, unsigned char *dst,
                     uint64_t *keys, double *leaves)
{
    const reader_t rd = *r;               /* in registers, whatever dst aliases */
    uint64_t own[CHUNK];
    if (keys == rows) {                   /* a distinct sample's rows are its keys' room */
        memcpy(own, rows, m * sizeof *rows);
        rows = own;
    }
    uint64_t lo = UINT64_MAX;
    for (size_t j = 0; j < m; j++) {
        uint64_t nk = next_key(&rd, rows[j]);
        keys[j] = nk - rd.cap;
        lo = nk < lo ? nk : lo;
    }
    if (dst != NULL)
        rows_copy_any(rd.data, rd.isz, rows, m, dst);
    if (leaves != NULL)                   /* relaxed: inside the window, validated below */
        for (size_t j = 0; j < m; j++)
            leaves[j] = bitsd(atomic_load_explicit(&rd.leaf[rows[j]], memory_order_relaxed));
    uint64_t c2 = seq_reread(rd.cursor);
    if (rd.done > 0 && lo >= c2)
        return;
    for (size_t j = 0; j < m; j++)
        if (rd.done == 0 || keys[j] + rd.cap < c2)
            keys[j] = row_get(&rd, rows[j], dst ? dst + j * rd.isz : NULL, leaves ? &leaves[j] : NULL);
}

/* One row of a uniform chunk: its key from the watermark (next_key less
 * a lap: the row's lap offset is lap at or below the mark's row, lap - cap
 * past it) and, if copy, its bytes. */
#define UNIFORM_ROW(j)                                                          \
    do {                                                                        \
        uint64_t row_ = cur[j];                                                 \
        keys[j] = row_ + (row_ <= last ? near : far);                           \
        if (copy)                                                               \
            racy_copy(dst + (j) * isz, data + row_ * isz, isz);                 \
    } while (0)

/* One chunk of a uniform sample, in one loop: draw the next chunk's row j
 * (nm rows, nm <= m) and ask for its lines, and take this chunk's row j
 * (its key and its copy); then the rows of the last chunk, which draw
 * nothing. Always inlined, so that the common item sizes and whether
 * there is a copy are constants: the loop holds nothing else. */
static inline __attribute__((always_inline)) void
uniform_chunk(const reader_t *rd, size_t isz, bool copy, uint64_t *st, uint64_t fill,
              const uint64_t *cur, size_t m, uint64_t *nxt, size_t nm, unsigned char *dst,
              uint64_t *keys)
{
    /* locals, all: the stores below (keys, rows, bytes) could alias the
     * reader and the random state, which would be reloaded every row */
    const unsigned char *data = rd->data;
    uint64_t last = rd->last, near = rd->lap, far = rd->lap - rd->cap;   /* mod 2^64 */
    uint64_t s = *st;
    size_t j = 0;
    for (; j < nm; j++) {
        uint64_t r = rng_below(&s, fill);
        nxt[j] = r;
        if (copy) {
            const unsigned char *p = data + r * isz;
            __builtin_prefetch(p);
            for (size_t off = 64; off + 1 < isz; off += 64)   /* rows beyond two lines */
                __builtin_prefetch(p + off);
            __builtin_prefetch(p + isz - 1);
        }
        UNIFORM_ROW(j);
    }
    for (; j < m; j++)
        UNIFORM_ROW(j);
    *st = s;
}

/* The rows of a uniform sample with replacement: chunk after chunk, the
 * next chunk drawn and prefetched while this one is copied (the draws keep
 * their order: the same state gives the same samples). Then one look at
 * the cursor checks the chunk: every next_key is at least the mark, so a
 * cursor still at the mark (no key claimed since: the common case) passes
 * every row at once; otherwise each row by its next_key, as rows_get. */
static void uniform_rows(const reader_t *rd, uint64_t *st, uint64_t fill, size_t batch,
                         unsigned char *dst, uint64_t *out_keys)
{
    uint64_t rows[2][UCHUNK], kbuf[UCHUNK];
    size_t isz = rd->isz;
    for (size_t j = 0; j < batch && j < UCHUNK; j++) {
        rows[0][j] = rng_below(st, fill);
        row_prefetch_at(rd->data + rows[0][j] * isz, isz, dst != NULL);
    }
    for (size_t base = 0, c = 0; base < batch; base += UCHUNK, c ^= 1) {
        size_t m = batch - base < UCHUNK ? batch - base : UCHUNK;
        size_t rest = batch - base - m, nm = rest < UCHUNK ? rest : UCHUNK;
        uint64_t *keys = out_keys != NULL ? out_keys + base : kbuf;
        unsigned char *d = dst != NULL ? dst + base * isz : NULL;
        const uint64_t *cur = rows[c];
        uint64_t *nxt = rows[c ^ 1];
        switch (d == NULL ? 0 : isz) {    /* a transition is a few dozen bytes */
        case 0: uniform_chunk(rd, isz, false, st, fill, cur, m, nxt, nm, d, keys); break;
        case 16: uniform_chunk(rd, 16, true, st, fill, cur, m, nxt, nm, d, keys); break;
        case 32: uniform_chunk(rd, 32, true, st, fill, cur, m, nxt, nm, d, keys); break;
        case 48: uniform_chunk(rd, 48, true, st, fill, cur, m, nxt, nm, d, keys); break;
        case 64: uniform_chunk(rd, 64, true, st, fill, cur, m, nxt, nm, d, keys); break;
        case 96: uniform_chunk(rd, 96, true, st, fill, cur, m, nxt, nm, d, keys); break;
        case 128: uniform_chunk(rd, 128, true, st, fill, cur, m, nxt, nm, d, keys); break;
        default: uniform_chunk(rd, isz, true, st, fill, cur, m, nxt, nm, d, keys); break;
        }
        uint64_t c2 = seq_reread(rd->cursor);   /* every copy above is ordered before it */
        if (rd->done > 0 && c2 <= rd->done)
            continue;
        for (size_t j = 0; j < m; j++)
            if (rd->done == 0 || keys[j] + rd->cap < c2)
                keys[j] = row_get(rd, cur[j], d != NULL ? d + j * isz : NULL, NULL);
    }
}

/* ------------------------------------------------------------------ futex */

static void futex_wait(_Atomic uint32_t *word, uint32_t seen, uint64_t timeout_ns)
{
    struct timespec ts = { .tv_sec = (time_t)(timeout_ns / 1000000000u),
                           .tv_nsec = (long)(timeout_ns % 1000000000u) };
    /* EINTR, EAGAIN (the word moved) and ETIMEDOUT all mean: look again */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen,
            timeout_ns == UINT64_MAX ? NULL : &ts, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* After a push claimed keys (and wrote them): wake samplers that wait for
 * more inserts. A sleeping sampler raises want_wake; the first pusher to
 * see it clears it and wakes every sleeper, so the later pushes of that
 * sleep pay one load, not a system call each.
 *
 * Why no wake-up is lost (the seq_cst pair with admit_wait): the pusher's
 * fetch_add on the cursor comes before its load of want_wake; the
 * sampler's store to want_wake before its second look at the cursor. In
 * the single total order of seq_cst operations one of the two loads comes
 * second and sees the other side's write: either the sampler sees the new
 * keys and does not sleep, or the pusher sees the flag and bumps the futex
 * word, which makes the sampler's FUTEX_WAIT (on the value read before its
 * second look) return at once. Several sleepers share the flag: one that
 * read the futex word before a pusher's bump returns from FUTEX_WAIT at
 * once; one that read it after (acquire, pairing with the bump's release)
 * raised the flag after the pusher cleared it, so the next push wakes it. */
static inline void wake_samplers(hive_replay_t *rb)
{
    if (rb->may_wait && atomic_load_explicit(&rb->want_wake, memory_order_seq_cst) != 0 &&
        atomic_exchange_explicit(&rb->want_wake, 0, memory_order_seq_cst) != 0) {
        atomic_fetch_add_explicit(&rb->epoch, 1, memory_order_release);
        futex_wake_all(&rb->epoch);
    }
}

/* calloc'd room for n words, line-aligned: *mem gets what to free. All-zero
 * bits are 0.0 doubles, and big tables come from fresh (lazily zeroed)
 * pages. n is far below SIZE_MAX / 8 (MAX_CAPACITY). */
static _Atomic uint64_t *words_aligned(uint64_t n, void **mem)
{
    *mem = hive__calloc(n + FAN - 1, sizeof(uint64_t));
    if (*mem == NULL)
        return NULL;
    uintptr_t p = ((uintptr_t)*mem + FAN * sizeof(uint64_t) - 1) & ~(uintptr_t)(FAN * sizeof(uint64_t) - 1);
    return (_Atomic uint64_t *)p;
}

/* The leaves (padded with 0 to whole blocks) and the levels of the sum tree
 * above them: level 0 one entry per block of FAN leaves, each level above
 * one entry per group of FAN below, up to a level of at most FAN entries
 * (one group) whose sum is the total, tree[0]. Every level starts on a
 * line and is padded with 0 to whole groups, so a group is one line. With
 * the marks (a bit per block) and the flusher's list (a word per block). */
static int tree_new(hive_replay_t *rb)
{
    rb->blocks = (rb->cap + LEAF_BLOCK - 1) / LEAF_BLOCK;
    uint64_t len = rb->blocks, words = FAN;     /* the total, alone on its line */
    unsigned d = 0;
    for (;;) {
        rb->level_len[d] = len;
        words += (len + FAN - 1) / FAN * FAN;
        d++;
        if (len <= FAN)
            break;
        len = (len + FAN - 1) / FAN;
    }
    rb->depth = d;
    rb->leaf = words_aligned(rb->blocks * FAN, &rb->leaf_mem);
    rb->tree = words_aligned(words, &rb->tree_mem);
    rb->dirty = hive__calloc((rb->blocks + 63) / 64, sizeof *rb->dirty);
    rb->todo = hive__calloc(rb->blocks, sizeof *rb->todo);
    if (rb->leaf == NULL || rb->tree == NULL || rb->dirty == NULL || rb->todo == NULL)
        return HIVE_ENOMEM;
    uint64_t at = FAN;
    for (unsigned k = d; k-- > 0;) {            /* the top level first, the bottom last */
        rb->level[k] = rb->tree + at;
        at += (rb->level_len[k] + FAN - 1) / FAN * FAN;
    }
    return HIVE_OK;
}

static void tree_free(hive_replay_t *rb)
{
    free(rb->todo);
    free(rb->dirty);
    free(rb->tree_mem);
    free(rb->leaf_mem);
}

/* ------------------------------------------------------------------ API */

int hive_replay_new(hive_t *h, const hive_replay_config_t *cfg, hive_replay_t **out)
{
    if (h == NULL || cfg == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_replay_new: %s is NULL",
                          h == NULL ? "engine" : cfg == NULL ? "config" : "out");
    if (cfg->capacity == 0)
        return hive__fail(HIVE_EINVAL, "hive_replay_new: capacity is 0 (items held must be > 0)");
    if (cfg->item_size == 0)
        return hive__fail(HIVE_EINVAL, "hive_replay_new: item_size is 0 (bytes per item must be > 0)");
    if (cfg->capacity > MAX_CAPACITY)
        return hive__fail(HIVE_EINVAL, "hive_replay_new: capacity %llu is above the limit %llu",
                          (unsigned long long)cfg->capacity, (unsigned long long)MAX_CAPACITY);
    uint64_t bytes;
    if (__builtin_mul_overflow(cfg->capacity, (uint64_t)cfg->item_size, &bytes) ||
        bytes > (uint64_t)INT64_MAX)
        return hive__fail(HIVE_EINVAL, "hive_replay_new: capacity %llu * item_size %zu overflows "
                          "a byte size", (unsigned long long)cfg->capacity, cfg->item_size);
    const struct { const char *name; double v; } reals[] = {
        { "alpha", cfg->alpha }, { "beta", cfg->beta },
        { "samples_per_insert", cfg->samples_per_insert }, { "error_buffer", cfg->error_buffer },
    };
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        if (!isfinite(reals[i].v) || reals[i].v < 0)
            return hive__fail(HIVE_EINVAL, "hive_replay_new: %s = %g (must be finite and >= 0)",
                              reals[i].name, reals[i].v);
    if (cfg->alpha > MAX_ALPHA)
        return hive__fail(HIVE_EINVAL, "hive_replay_new: alpha = %g is above %g: ordinary priorities "
                          "raised to it overflow (2^alpha alone is %g)", cfg->alpha, MAX_ALPHA,
                          pow(2, cfg->alpha));
    if (cfg->min_size_to_sample > cfg->capacity)
        return hive__fail(HIVE_EINVAL, "hive_replay_new: min_size_to_sample %llu is above the "
                          "capacity %llu: sampling could never start",
                          (unsigned long long)cfg->min_size_to_sample,
                          (unsigned long long)cfg->capacity);

    hive_replay_t *rb = aligned_alloc(REPLAY_PAD, (sizeof *rb + REPLAY_PAD - 1) / REPLAY_PAD * REPLAY_PAD);
    if (rb == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_replay_new: cannot allocate the buffer's record");
    memset(rb, 0, sizeof *rb);
    rb->h = h;
    rb->cap = cfg->capacity;
    rb->mask = (rb->cap & (rb->cap - 1)) == 0 ? rb->cap - 1 : 0;   /* cap 1: key % 1 = 0 too */
    rb->isz = cfg->item_size;
    rb->alpha = cfg->alpha;
    rb->leaf_max = DBL_MAX / (2.0 * (double)rb->cap);
    rb->beta = cfg->beta;
    rb->spi = cfg->samples_per_insert;
    rb->error_buffer = cfg->error_buffer;
    rb->min_size = cfg->min_size_to_sample;
    rb->seed = cfg->seed;
    rb->may_wait = rb->spi > 0 || rb->min_size > 0;
    atomic_init(&rb->cursor, 0);
    atomic_init(&rb->done, 0);
    atomic_init(&rb->samples, 0);
    atomic_init(&rb->calls, 0);
    atomic_init(&rb->epoch, 0);
    atomic_init(&rb->want_wake, 0);
    atomic_init(&rb->row_epoch, 0);
    atomic_init(&rb->row_want, 0);
    atomic_init(&rb->max_prio, dbits(1.0));
    atomic_init(&rb->max_leaf, dbits(1.0));   /* 1 ^ alpha */
    atomic_init(&rb->limiter_waits, 0);
    atomic_init(&rb->flushing, 0);

    /* the array first: a store too small for it is the likeliest refusal,
     * and it should come before any large allocation of ours */
    int64_t shape[2] = { (int64_t)rb->cap, (int64_t)rb->isz };
    int rc = hive_array_new(h, HIVE_U8, 2, shape, &rb->ref);   /* sets the sentence itself */
    hive_array_t view;
    if (rc == HIVE_OK && (rc = hive_array_view(h, rb->ref, &view)) != HIVE_OK)
        hive_release(h, rb->ref);
    if (rc != HIVE_OK) {
        free(rb);
        return rc;
    }
    /* the buffer's count is the engine's own: a user who releases
     * hive_replay_array's ref by mistake is refused, not freeing the rows */
    hive__ref_pin(h, rb->ref);
    /* calloc: all-zero bits are 0 words and 0.0 doubles, and big tables
     * come from fresh (lazily zeroed) pages */
    /* seq, then cont (cap <= 2^48), each line-aligned: with the words at 16
     * bytes past a line (what calloc gives for a table this large: an
     * mmap'd chunk's header), a batch's 32 words spanned 5 lines, and the
     * first and the last were the neighbouring batches' too, which the
     * other producer writes at the same time (docs/benchmarks.md,
     * "Replay batches, and the MPSC row") */
    uint64_t seq_words = (rb->cap + FAN - 1) / FAN * FAN;
    rb->seq = words_aligned(2 * seq_words, &rb->seq_mem);
    rb->cont = rb->seq != NULL ? rb->seq + seq_words : NULL;
    rb->gen = atomic_fetch_add_explicit(&replay_gens, 1, memory_order_relaxed) + 1;   /* a tag only */
    rb->runs = rb->cap >= RUN_MIN_CAP;
    if (cfg->prioritized && rb->seq != NULL && tree_new(rb) != HIVE_OK)
        rb->tree = NULL;
    if (rb->seq == NULL || (cfg->prioritized && rb->tree == NULL)) {
        uint64_t cap = rb->cap;
        hive__ref_unpin(h, rb->ref);
        tree_free(rb);
        free(rb->seq_mem);
        free(rb);
        return hive__fail(HIVE_ENOMEM, "hive_replay_new: cannot allocate the sequence words%s of "
                          "%llu items", cfg->prioritized ? " and sum tree" : "", (unsigned long long)cap);
    }
    rb->data = view.data;
    hive__listed_add(h, &rb->listed, HIVE__LISTED_REPLAY);
    *out = rb;
    return HIVE_OK;
}

void hive__replay_info(const hive__listed_t *n, hive_replay_info_t *out)
{
    const hive_replay_t *rb = (const hive_replay_t *)((const char *)n -
                                                      offsetof(hive_replay_t, listed));
    /* relaxed, all: figures for people, each read once */
    uint64_t ins = atomic_load_explicit(&rb->cursor, memory_order_relaxed);
    *out = (hive_replay_info_t){
        .id = n->id, .capacity = rb->cap, .size = min_u64(ins, rb->cap), .inserts = ins,
        .samples = atomic_load_explicit(&rb->samples, memory_order_relaxed),
        .limiter_waits = atomic_load_explicit(&rb->limiter_waits, memory_order_relaxed),
    };
}

int hive_replay_free(hive_replay_t *rb)
{
    if (rb == NULL)
        return hive__fail(HIVE_EINVAL, "hive_replay_free: buffer is NULL");
    hive__listed_remove(rb->h, &rb->listed);
    hive__ref_unpin(rb->h, rb->ref);
    tree_free(rb);
    free(rb->seq_mem);
    free(rb);
    return HIVE_OK;
}

hive_ref_t hive_replay_array(const hive_replay_t *rb)
{
    return rb != NULL ? rb->ref : (hive_ref_t){ 0 };
}

int hive_replay_push(hive_replay_t *rb, const void *item)
{
    if (rb == NULL || item == NULL)
        return hive__fail(HIVE_EINVAL, "hive_replay_push: %s is NULL", rb ? "item" : "buffer");
    /* relaxed: see raise_to */
    double leaf = rb->tree != NULL ? bitsd(atomic_load_explicit(&rb->max_leaf, memory_order_relaxed)) : 0;
    run_cache_t *rc = &run_caches[rb->gen % RUN_CACHES];
    if (rc->gen != rb->gen)                 /* another buffer's: its held keys stay TURN words */
        *rc = (run_cache_t){ .gen = rb->gen };
    for (;;) {
        if (rc->left > 0) {                 /* a held key (see "Runs of keys") */
            uint64_t k = rc->next++;
            rc->left--;
            if (run_push(rb, k, item, leaf))
                break;
            rc->left = 0;                   /* a lap passed us: the rest is overwritten too */
            continue;
        }
        /* the bytes are published by the row's sequence word, not by the
         * cursor, which only hands out distinct keys; seq_cst is for the
         * wake protocol (wake_samplers) and the Dekker pair with an update
         * (row_claim), and costs nothing more on x86 */
        if (rc->contended && rb->runs &&
            atomic_load_explicit(&rb->cursor, memory_order_relaxed) >= rb->cap) {
            /* another producer claims too: a run, whose keys are all past
             * the first lap (relaxed look: the cursor only grows) */
            uint64_t base = atomic_fetch_add_explicit(&rb->cursor, RUN_KEYS, memory_order_seq_cst);
            rc->contended = base != rc->expect;     /* alone again: back to single claims */
            rc->expect = base + RUN_KEYS;
            run_hold(rb, base, RUN_KEYS);
            rc->next = base;
            rc->left = RUN_KEYS;
            continue;
        }
        uint64_t key = atomic_fetch_add_explicit(&rb->cursor, 1, memory_order_seq_cst);
        rc->contended = rc->expect != 0 && key != rc->expect;
        rc->expect = key + 1;
        row_put(rb, key, row_of(rb, key), item, leaf);
        break;
    }
    wake_samplers(rb);
    return HIVE_OK;
}

static void batch_write(hive_replay_t *rb, uint64_t base, const void *items, size_t n);

int hive_replay_push_batch(hive_replay_t *rb, const void *items, size_t n)
{
    if (rb == NULL || (items == NULL && n > 0))
        return hive__fail(HIVE_EINVAL, "hive_replay_push_batch: %s is NULL", rb ? "items" : "buffer");
    if (n == 0)
        return HIVE_OK;
    /* n items must fit in one object of the caller's memory; this also keeps
     * the offsets i * item_size below from wrapping */
    size_t bytes;
    if (__builtin_mul_overflow(n, rb->isz, &bytes) || bytes > (size_t)PTRDIFF_MAX)
        return hive__fail(HIVE_EINVAL, "hive_replay_push_batch: %zu items of %zu bytes are more "
                          "than any buffer can hold; nothing was pushed", n, rb->isz);
    /* seq_cst: as in hive_replay_push */
    uint64_t base = atomic_fetch_add_explicit(&rb->cursor, n, memory_order_seq_cst);
    run_cache_t *rc = &run_caches[rb->gen % RUN_CACHES];
    if (rc->gen == rb->gen)                 /* our own claims are no contention */
        rc->expect = base + n;
    batch_write(rb, base, items, n);
    wake_samplers(rb);
    return HIVE_OK;
}

/* Write the n items of the keys base .. base+n-1, claimed by the caller. */
static void batch_write(hive_replay_t *rb, uint64_t base, const void *items, size_t n)
{
    /* relaxed: see raise_to */
    double leaf = rb->tree != NULL ? bitsd(atomic_load_explicit(&rb->max_leaf, memory_order_relaxed)) : 0;
    size_t first = n > rb->cap ? n - (size_t)rb->cap : 0;   /* the rest would be overwritten at once */
    const unsigned char *src = items;
    /* runs of up to RUN_ROWS rows, none across the end of the rows */
    uint64_t row = row_of(rb, base + first);
    for (size_t i = first; i < n;) {
        uint64_t run_end = row + RUN_ROWS < rb->cap ? row + RUN_ROWS : rb->cap;
        size_t m = n - i < run_end - row ? n - i : (size_t)(run_end - row);
        run_put(rb, base, base + i, row, m, src + i * rb->isz, leaf);
        i += m;
        row += m;
        if (row == rb->cap)
            row = 0;
    }
}

uint64_t hive__replay_claim(hive_replay_t *rb, size_t n)
{
    return atomic_fetch_add_explicit(&rb->cursor, n, memory_order_seq_cst);
}

void hive__replay_write_claimed(hive_replay_t *rb, uint64_t base, const void *items, size_t n)
{
    batch_write(rb, base, items, n);
}

int hive__replay_row_turn(const hive_replay_t *rb, uint64_t row, uint64_t *key)
{
    /* acquire: as a reader's look at the word */
    uint64_t s = atomic_load_explicit(&rb->seq[row], memory_order_acquire);
    *key = ((s & ~TURN) >> 1) - 1;
    return s == 0 ? -1 : (s & TURN) != 0;
}

/* One look at the limits: HIVE_OK (samples taken, *fill set), HIVE_EINVAL
 * (batch above the fill), or HIVE_ETIMEDOUT meaning "blocked for now". */
static int admit_once(hive_replay_t *rb, size_t batch, uint64_t *fill, bool report)
{
    /* seq_cst: the second look in admit_wait must be ordered after the
     * waiter registration (see wake_samplers()) */
    uint64_t ins = atomic_load_explicit(&rb->cursor, memory_order_seq_cst);
    uint64_t f = min_u64(ins, rb->cap);
    if (f < rb->min_size) {
        if (report)
            hive__fail(HIVE_ETIMEDOUT, "hive_replay_sample: timed out waiting for min_size_to_sample "
                       "%llu items (the buffer holds %llu)", (unsigned long long)rb->min_size,
                       (unsigned long long)f);
        return HIVE_ETIMEDOUT;
    }
    if (batch > f)
        return hive__fail(HIVE_EINVAL, "hive_replay_sample: batch %zu is larger than the %llu items "
                          "held", batch, (unsigned long long)f);
    if (rb->spi == 0) {
        atomic_fetch_add_explicit(&rb->samples, batch, memory_order_relaxed);   /* a statistic */
        *fill = f;
        return HIVE_OK;
    }
    double allowed = rb->spi * (double)ins + rb->error_buffer;
    /* relaxed: the sample count orders no data; the CAS only keeps
     * concurrent samplers from taking the same allowance twice */
    uint64_t s = atomic_load_explicit(&rb->samples, memory_order_relaxed);
    while ((double)(s + batch) <= allowed) {
        if (atomic_compare_exchange_weak_explicit(&rb->samples, &s, s + batch, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *fill = f;
            return HIVE_OK;
        }
    }
    if (report)
        hive__fail(HIVE_ETIMEDOUT, "hive_replay_sample: timed out on the rate limit: %llu samples + "
                   "batch %zu > %g per insert * %llu inserts + error buffer %g",
                   (unsigned long long)s, batch, rb->spi, (unsigned long long)ins, rb->error_buffer);
    return HIVE_ETIMEDOUT;
}

static int admit_wait(hive_replay_t *rb, size_t batch, int64_t timeout_ns, uint64_t *fill)
{
    uint64_t deadline = timeout_ns < 0 ? UINT64_MAX : now_ns() + (uint64_t)timeout_ns;
    for (;;) {
        /* read before looking, so a bump after the look ends the sleep;
         * acquire pairs with the bump's release (see wake_samplers) */
        uint32_t seen = atomic_load_explicit(&rb->epoch, memory_order_acquire);
        int rc = admit_once(rb, batch, fill, false);
        if (rc != HIVE_ETIMEDOUT)
            return rc;
        uint64_t now = timeout_ns < 0 ? 0 : now_ns();
        if (timeout_ns >= 0 && now >= deadline)
            return admit_once(rb, batch, fill, true);   /* last look, and the sentence */
        atomic_store_explicit(&rb->want_wake, 1, memory_order_seq_cst);
        rc = admit_once(rb, batch, fill, false);        /* the second look (see wake_samplers()) */
        if (rc != HIVE_ETIMEDOUT)
            return rc;                                  /* the flag costs one spare wake at most */
        /* relaxed: a statistic, on a path that sleeps anyway */
        atomic_fetch_add_explicit(&rb->limiter_waits, 1, memory_order_relaxed);
        futex_wait(&rb->epoch, seen, timeout_ns < 0 ? UINT64_MAX : deadline - now);
    }
}

/* The random state of one sample call: the caller's, or call k of the
 * buffer's stream, a state made from seed and k only (relaxed: k only has
 * to be distinct). */
static uint64_t call_state(hive_replay_t *rb, const uint64_t *rng_state)
{
    if (rng_state != NULL)
        return *rng_state;
    uint64_t k = atomic_fetch_add_explicit(&rb->calls, 1, memory_order_relaxed);
    uint64_t st = rb->seed ^ (k * UINT64_C(0xD1B54A32D192ED03));
    rng_next(&st);
    return st;
}

/* Importance weights from the leaves in w (in place): w_i = (N P(i))^-beta
 * / max_j w_j with P(i) = leaf_i / total: N and total cancel, and the max
 * is at the smallest leaf, so w_i = (min_j leaf_j / leaf_i)^beta - computed
 * so, it cannot overflow. A leaf set to 0 after the descent gets the max, 1. */
static void leaves_to_weights(const hive_replay_t *rb, double *w, size_t batch, double min_leaf)
{
    for (size_t i = 0; i < batch; i++) {
        double leaf = w[i];
        w[i] = leaf > 0 && rb->beta != 0 ? pow(min_leaf / leaf, rb->beta) : 1.0;
    }
}

/* What choosing the rows of a prioritized with-replacement batch needs. */
typedef struct pick {
    uint64_t fill;
    double   total, seg;                /* the total mass, a segment of it */
    bool     bytes;                     /* the items are copied (prefetch them) */
} pick_t;

/* Choose the m rows of draws base .. base+m-1 and ask for their lines.
 * Prioritized draws are stratified: one in each of batch segments. */
static void pick_chunk(const hive_replay_t *rb, const pick_t *pk, uint64_t *st, size_t base, size_t m,
                       uint64_t *rows)
{
    double u[CHUNK];
    for (size_t j = 0; j < m; j++) {
        u[j] = ((double)(base + j) + rng_unit(st)) * pk->seg;
        if (!(u[j] < pk->total))
            u[j] = below(pk->total);
    }
    descend_chunk(rb, u, m, rows);
    for (size_t j = 0; j < m; j++)
        if (rows[j] == UINT64_MAX)          /* every leaf went to 0 meanwhile */
            rows[j] = rng_below(st, pk->fill);
    for (size_t j = 0; j < m; j++)
        row_prefetch(rb, rows[j], pk->bytes, false);
}

static int sample_with_replacement(hive_replay_t *rb, size_t batch, uint64_t fill, uint64_t *rng_state,
                                   void *out_items, uint64_t *out_keys, double *out_weights)
{
    /* the random state lives in a register for the call (it would else be
     * stored and reloaded around every copy, which may alias it) */
    uint64_t st = call_state(rb, rng_state);
    const reader_t rd = reader_of(rb, done_advance(rb));
    /* Rows are chosen a chunk at a time and their lines prefetched before
     * any is copied, so the cache misses of a chunk overlap instead of
     * coming one after another (the draws keep their order: same samples).
     * The watermark first (see "Samplers and done"), so that every row it
     * covers was complete before the copies below. */
    unsigned char *dst = out_items;
    if (rb->tree != NULL)
        tree_flush(rb);                     /* the pushes' and updates' leaves since the last */
    double total = rb->tree != NULL ? tree_total(rb) : 0;
    bool uniform = !(total > 0);            /* not prioritized, or every priority is 0 */
    if (uniform) {
        uniform_rows(&rd, &st, fill, batch, dst, out_keys);
        if (rng_state != NULL)
            *rng_state = st;
        if (out_weights != NULL)
            for (size_t i = 0; i < batch; i++)
                out_weights[i] = 1.0;
        return HIVE_OK;
    }
    double seg = total / (double)batch, min_leaf = INFINITY;
    uint64_t rows[2][CHUNK], keys[CHUNK];
    double leaves[CHUNK];
    const pick_t pk = { .fill = fill, .total = total, .seg = seg, .bytes = dst != NULL };
    pick_chunk(rb, &pk, &st, 0, batch < CHUNK ? batch : CHUNK, rows[0]);
    for (size_t base = 0, c = 0; base < batch; base += CHUNK, c ^= 1) {
        size_t m = batch - base < CHUNK ? batch - base : CHUNK;
        if (base + CHUNK < batch)           /* the next chunk's misses overlap this one's copies */
            pick_chunk(rb, &pk, &st, base + CHUNK,
                       batch - base - CHUNK < CHUNK ? batch - base - CHUNK : CHUNK, rows[c ^ 1]);
        rows_get(&rd, rows[c], m, dst ? dst + base * rd.isz : NULL, out_keys ? out_keys + base : keys,
                 leaves);
        for (size_t j = 0; j < m; j++)
            if (leaves[j] > 0 && leaves[j] < min_leaf)
                min_leaf = leaves[j];
        if (out_weights != NULL)            /* turned into weights below */
            memcpy(out_weights + base, leaves, m * sizeof *leaves);
    }
    if (rng_state != NULL)
        *rng_state = st;
    if (out_weights != NULL)
        leaves_to_weights(rb, out_weights, batch, min_leaf);
    return HIVE_OK;
}

/* ------------------------------------------------------------------ distinct
 * Sampling without replacement picks distinct rows (a row holds one item at
 * a time, so distinct rows give distinct keys), all of them before any is
 * copied, remembering them in an open-addressing set of twice the batch.
 * Uniform: Floyd's algorithm (exactly batch draws, every subset equally
 * likely), then a Fisher-Yates shuffle so that the order is random too, as
 * Python's random.sample. Prioritized: draw after draw from the sum tree,
 * redrawing a row already taken (which is drawing among the rest in
 * proportion to their mass); after SET_REDRAWS redraws in a row the rest
 * holds little mass, and one scan of the leaves draws among it exactly. */
#define SET_STACK   256                    /* set slots on the stack (batch <= 128) */
#define SET_REDRAWS 64
#define SET_EMPTY   UINT64_MAX

typedef struct rowset {
    uint64_t *slot;
    uint64_t  mask;
} rowset_t;

/* Add row; false if it was there already. */
static bool set_add(rowset_t *s, uint64_t row)
{
    for (uint64_t i = (row * UINT64_C(0x9E3779B97F4A7C15)) >> 7 & s->mask;; i = (i + 1) & s->mask) {
        if (s->slot[i] == row)
            return false;
        if (s->slot[i] == SET_EMPTY) {
            s->slot[i] = row;
            return true;
        }
    }
}

static bool set_has(const rowset_t *s, uint64_t row)
{
    for (uint64_t i = (row * UINT64_C(0x9E3779B97F4A7C15)) >> 7 & s->mask;; i = (i + 1) & s->mask) {
        if (s->slot[i] == row)
            return true;
        if (s->slot[i] == SET_EMPTY)
            return false;
    }
}

static void pick_uniform(uint64_t *st, uint64_t fill, size_t batch, rowset_t *set, uint64_t *rows)
{
    size_t n = 0;
    for (uint64_t j = fill - batch; j < fill; j++) {         /* Floyd */
        uint64_t t = rng_below(st, j + 1);
        rows[n++] = set_add(set, t) ? t : (set_add(set, j), j);
    }
    for (size_t i = batch - 1; i > 0; i--) {                 /* Fisher-Yates */
        size_t k = (size_t)rng_below(st, i + 1);
        uint64_t tmp = rows[i];
        rows[i] = rows[k];
        rows[k] = tmp;
    }
}

/* One row among those not in set, in proportion to their leaves (uniform
 * among the rows below fill when the rest has no mass; *massless then
 * stays set, so that later draws of the batch go there at once). */
static uint64_t pick_prioritized(const hive_replay_t *rb, uint64_t *st, uint64_t fill, rowset_t *set,
                                 bool *massless)
{
    for (int tries = 0; !*massless && tries < SET_REDRAWS; tries++) {
        double total = tree_total(rb);
        if (!(total > 0))
            break;
        double u = rng_unit(st) * total;
        uint64_t row = descend(rb, u < total ? u : below(total));
        if (row == UINT64_MAX)
            break;
        if (set_add(set, row))
            return row;
    }
    double rest = 0;                        /* the exact draw: one scan */
    for (uint64_t row = 0; !*massless && row < rb->cap; row++)
        if (!set_has(set, row))
            rest += leaf_get(rb, row);
    *massless = !(rest > 0);
    if (rest > 0) {
        double u = rng_unit(st) * rest;
        uint64_t last = UINT64_MAX;
        for (uint64_t row = 0; row < rb->cap; row++) {
            double v = leaf_get(rb, row);
            if (v > 0 && !set_has(set, row)) {
                last = row;
                if (u < v)
                    break;
                u -= v;
            }
        }
        if (last != UINT64_MAX && set_add(set, last))
            return last;
    }
    uint64_t row;                           /* no mass left: uniform among the rest */
    do
        row = rng_below(st, fill);
    while (!set_add(set, row));
    return row;
}

static int sample_distinct(hive_replay_t *rb, size_t batch, uint64_t fill, uint64_t *rng_state,
                           void *out_items, uint64_t *out_keys, double *out_weights,
                           uint64_t *rows, rowset_t *set)
{
    uint64_t st = call_state(rb, rng_state);
    if (rb->tree != NULL)
        tree_flush(rb);
    double total = rb->tree != NULL ? tree_total(rb) : 0;
    bool uniform = !(total > 0);
    if (uniform) {
        pick_uniform(&st, fill, batch, set, rows);
    } else {
        bool massless = false;
        for (size_t i = 0; i < batch; i++)
            rows[i] = pick_prioritized(rb, &st, fill, set, &massless);
    }
    if (rng_state != NULL)
        *rng_state = st;
    const reader_t rd = reader_of(rb, done_advance(rb));
    unsigned char *dst = out_items;
    uint64_t keys[CHUNK];
    double leaves[CHUNK], min_leaf = INFINITY;
    for (size_t base = 0; base < batch; base += CHUNK) {
        size_t m = batch - base < CHUNK ? batch - base : CHUNK;
        for (size_t j = 0; j < m; j++)
            row_prefetch(rb, rows[base + j], dst != NULL, false);
        /* out_keys may be rows itself: rows_get reads rows[j] before it writes keys[j] */
        rows_get(&rd, rows + base, m, dst ? dst + base * rd.isz : NULL,
                 out_keys ? out_keys + base : keys, uniform ? NULL : leaves);
        if (!uniform) {
            for (size_t j = 0; j < m; j++)
                if (leaves[j] > 0 && leaves[j] < min_leaf)
                    min_leaf = leaves[j];
            if (out_weights != NULL)
                memcpy(out_weights + base, leaves, m * sizeof *leaves);
        }
    }
    if (out_weights != NULL) {
        if (uniform)
            for (size_t i = 0; i < batch; i++)
                out_weights[i] = 1.0;
        else
            leaves_to_weights(rb, out_weights, batch, min_leaf);
    }
    return HIVE_OK;
}

/* The scratch of a distinct sample: the rows (out_keys when given) and the
 * set, on the stack for small batches, else from malloc. */
static int distinct_scratch(size_t batch, uint64_t *out_keys, uint64_t *stack_rows,
                            uint64_t *stack_set, uint64_t **rows, rowset_t *set, void **heap)
{
    size_t slots = 4, bytes;
    while (slots < 2 * batch)
        slots *= 2;                             /* batch <= fill <= 2^62: no overflow */
    *heap = NULL;
    *rows = out_keys != NULL ? out_keys : stack_rows;
    set->slot = stack_set;
    if (slots > SET_STACK || (out_keys == NULL && batch > SET_STACK / 2)) {
        if (__builtin_mul_overflow(slots + batch, sizeof(uint64_t), &bytes) ||
            (*heap = hive__malloc(bytes)) == NULL)
            return hive__fail(HIVE_ENOMEM, "hive_replay_sample_ex: cannot allocate %zu set slots "
                              "for a batch of %zu distinct items", slots, batch);
        set->slot = *heap;
        if (out_keys == NULL)
            *rows = set->slot + slots;
    }
    set->mask = slots - 1;
    for (size_t i = 0; i < slots; i++)
        set->slot[i] = SET_EMPTY;
    return HIVE_OK;
}

int hive_replay_sample_ex(hive_replay_t *rb, size_t batch, unsigned flags, uint64_t *rng_state,
                          void *out_items, uint64_t *out_keys, double *out_weights, int64_t timeout_ns)
{
    const char *fn = flags & HIVE_REPLAY_DISTINCT ? "hive_replay_sample_ex" : "hive_replay_sample";
    if (rb == NULL)
        return hive__fail(HIVE_EINVAL, "%s: buffer is NULL", fn);
    if (batch == 0)
        return hive__fail(HIVE_EINVAL, "%s: batch is 0", fn);
    if (flags & ~(unsigned)HIVE_REPLAY_DISTINCT)
        return hive__fail(HIVE_EINVAL, "%s: unknown flags 0x%x", fn, flags & ~(unsigned)HIVE_REPLAY_DISTINCT);
    if (!(flags & HIVE_REPLAY_DISTINCT)) {
        uint64_t fill;
        int rc = rb->may_wait ? admit_wait(rb, batch, timeout_ns, &fill)
                              : admit_once(rb, batch, &fill, true);
        return rc == HIVE_OK ? sample_with_replacement(rb, batch, fill, rng_state, out_items,
                                                       out_keys, out_weights) : rc;
    }
    if (batch > rb->cap)                    /* before the scratch is sized by it */
        return hive__fail(HIVE_EINVAL, "%s: batch %zu is larger than the capacity %llu", fn, batch,
                          (unsigned long long)rb->cap);
    uint64_t stack_rows[SET_STACK / 2], stack_set[SET_STACK];
    uint64_t *rows;
    rowset_t set = { NULL, 0 };
    void *heap;
    int rc = distinct_scratch(batch, out_keys, stack_rows, stack_set, &rows, &set, &heap);
    uint64_t fill;
    if (rc == HIVE_OK)
        rc = rb->may_wait ? admit_wait(rb, batch, timeout_ns, &fill) : admit_once(rb, batch, &fill, true);
    if (rc == HIVE_OK)
        rc = sample_distinct(rb, batch, fill, rng_state, out_items, out_keys, out_weights, rows, &set);
    free(heap);
    return rc;
}

int hive_replay_sample(hive_replay_t *rb, size_t batch, uint64_t *rng_state, void *out_items,
                       uint64_t *out_keys, double *out_weights, int64_t timeout_ns)
{
    return hive_replay_sample_ex(rb, batch, 0, rng_state, out_items, out_keys, out_weights, timeout_ns);
}

/* Raise an atomic double to at least v. Relaxed: a statistic that new
 * pushes read as their starting priority; a push racing the raise may take
 * the old maximum, as it would had it come a moment earlier. */
static void raise_to(_Atomic uint64_t *word, double v)
{
    uint64_t old = atomic_load_explicit(word, memory_order_relaxed);
    while (bitsd(old) < v &&
           !atomic_compare_exchange_weak_explicit(word, &old, dbits(v), memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

int hive_replay_update_priorities(hive_replay_t *rb, const uint64_t *keys, const double *priorities,
                                  size_t n)
{
    if (rb == NULL || ((keys == NULL || priorities == NULL) && n > 0))
        return hive__fail(HIVE_EINVAL, "hive_replay_update_priorities: %s is NULL",
                          rb == NULL ? "buffer" : keys == NULL ? "keys" : "priorities");
    if (rb->tree == NULL)
        return hive__fail(HIVE_ESTATE, "hive_replay_update_priorities: the buffer is not prioritized");
    /* acquire: a key that reached us through a sample was claimed before
     * it was published, so the cursor we read is above it */
    uint64_t cursor = atomic_load_explicit(&rb->cursor, memory_order_acquire);
    double pmax = 0;
    size_t imax = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(priorities[i]) || priorities[i] < 0)
            return hive__fail(HIVE_EINVAL, "hive_replay_update_priorities: priority %zu is %g (must "
                              "be finite and >= 0); nothing was changed", i, priorities[i]);
        if (keys[i] >= cursor)
            return hive__fail(HIVE_EINVAL, "hive_replay_update_priorities: key %zu is %llu, but only "
                              "%llu keys were handed out; nothing was changed", i,
                              (unsigned long long)keys[i], (unsigned long long)cursor);
        if (priorities[i] > pmax) {
            pmax = priorities[i];
            imax = i;
        }
    }
    /* p^alpha grows with p: checking the largest checks them all (the
     * leaves are clamped to its power below, in case pow's rounding is not
     * monotonic) */
    double lmax = pow(pmax, rb->alpha);
    if (!(lmax <= rb->leaf_max))
        return hive__fail(HIVE_EINVAL, "hive_replay_update_priorities: priority %zu is %g, and %g^alpha "
                          "(alpha %g) = %g is above %g, the bound that keeps the sum over %llu items "
                          "finite; nothing was changed", imax, pmax, pmax, rb->alpha, lmax,
                          rb->leaf_max, (unsigned long long)rb->cap);
    int applied = 0;
    uint64_t blocks[CHUNK];                 /* blocks of the chunk's changed leaves, to mark */
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % CHUNK == 0) {               /* overlap the misses of a chunk of rows */
            marks_flush(rb, blocks, nb);    /* the last chunk's marks: one fence for them all */
            nb = 0;
            for (size_t j = i; j < n && j < i + CHUNK; j++)
                row_prefetch(rb, row_of(rb, keys[j]), false, true);
        }
        uint64_t key = keys[i], row = row_of(rb, key);
        _Atomic uint64_t *sq = &rb->seq[row];
        uint64_t label = (key + 1) << 1;
        /* relaxed polls: only the CAS that takes the row needs to order */
        uint64_t s = atomic_load_explicit(sq, memory_order_relaxed);
        unsigned spins = 0;
        bool held = false;
        while ((s >> 1) == key + 1) {       /* another label: overwritten (or not yet written) */
            if (s & 1) {                    /* another update of the same item */
                backoff(&spins);
                s = atomic_load_explicit(sq, memory_order_relaxed);
                continue;
            }
            /* seq_cst: acquire, so the previous holder's leaf store comes
             * before our read of the old leaf (see leaf_set); and the
             * update's half of the Dekker pair with row_claim: the CAS,
             * then the look at the cursor below */
            if (atomic_compare_exchange_weak_explicit(sq, &s, label | 1, memory_order_seq_cst,
                                                      memory_order_relaxed)) {
                /* seq_cst: a pusher of key + capacity either claimed it
                 * before this load (we see it and give up: the item is
                 * overwritten) or loads the word after its claim, after
                 * our CAS, sees it odd and waits for our release */
                if (atomic_load_explicit(&rb->cursor, memory_order_seq_cst) <= key + rb->cap) {
                    held = true;
                    break;
                }
                /* give the row back untouched. relaxed: we wrote nothing,
                 * and a CAS continues the release sequence of the word we
                 * took, for the pusher that waits for it; it fails if that
                 * pusher stored its odd word over ours already */
                uint64_t took = label | 1;
                atomic_compare_exchange_strong_explicit(sq, &took, label, memory_order_relaxed,
                                                        memory_order_relaxed);
                row_wake(rb);               /* the pusher may sleep on the row */
                break;
            }
        }
        if (!held)
            continue;
        double v = pow(priorities[i], rb->alpha);
        if (leaf_put(rb, row, v < lmax ? v : lmax) && (nb == 0 || blocks[nb - 1] != row / LEAF_BLOCK))
            blocks[nb++] = row / LEAF_BLOCK;
        /* release: the leaf is visible to the next holder and to readers */
        atomic_store_explicit(sq, label, memory_order_release);
        row_wake(rb);
        if (applied < INT_MAX)
            applied++;
    }
    marks_flush(rb, blocks, nb);
    tree_flush(rb);                         /* the tree up to the new priorities */
    raise_to(&rb->max_prio, pmax);
    raise_to(&rb->max_leaf, lmax);
    return applied;
}

int hive_replay_stats(const hive_replay_t *rb, hive_replay_stats_t *out)
{
    if (rb == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_replay_stats: %s is NULL", rb ? "out" : "buffer");
    hive_replay_stats_t st;
    /* relaxed: counters for display, no data depends on them */
    st.capacity = rb->cap;
    st.inserts = atomic_load_explicit(&rb->cursor, memory_order_relaxed);
    st.size = min_u64(st.inserts, rb->cap);
    st.samples = atomic_load_explicit(&rb->samples, memory_order_relaxed);
    st.max_priority = bitsd(atomic_load_explicit(&rb->max_prio, memory_order_relaxed));
    if (rb->tree != NULL)
        tree_flush((hive_replay_t *)rb);    /* the record is never const itself */
    st.total_priority = rb->tree != NULL ? tree_total(rb) : 0;
    *out = st;
    return HIVE_OK;
}
