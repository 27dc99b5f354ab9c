/*
 * bench_mpsc.c - hive's MPSC queue (src/ds/mpsc.h) against four peers.
 *
 *   hive     hive__mpsc_push / hive__mpsc_pop, intrusive.
 *   wfcq     liburcu's wait-free concurrent queue (urcu/wfcqueue.h), intrusive.
 *            One dequeuer, so the __ variant with no dequeue mutex, and
 *            __cds_wfcq_dequeue_nonblocking: the blocking one sleeps 10 ms
 *            (poll) when it meets a half-done enqueue, where hive's pop returns
 *            NULL; nonblocking puts both on the same footing - the caller's
 *            wait loop decides. Built with _LGPL_SOURCE so that it is inlined,
 *            as hive's header is, rather than called in liburcu.
 *   ck_fifo  Concurrency Kit's ck_fifo_mpmc (Michael-Scott queue with
 *            generation-tagged pointers). Not intrusive: every enqueue needs an
 *            entry, and the entry a dequeue hands back may still be read by a
 *            concurrent enqueuer, so it may not be reused without safe memory
 *            reclamation. Entries are therefore preallocated and pre-touched,
 *            one per item, besides the items themselves.
 *   ck_ring  ck_ring_enqueue_mpsc / ck_ring_dequeue_mpsc on a bounded ring of
 *            RING_SLOTS pointers to items; a producer that finds it full waits
 *            (as below) until there is room.
 *   mutex    a pthread mutex and condvar around an intrusive singly linked
 *            list; the consumer sleeps on the condvar when it finds it empty.
 *
 * Items (64 bytes, one cache line each) are the same for every impl and come
 * from one of two supplies, chosen by the environment variable HB_NODES and
 * shown in each benchmark's label:
 *   pool   (default) the producer takes each item from hive__pool_alloc and
 *          the consumer gives it back with hive__pool_free, as the runtime
 *          does: this measures the queue plus hive's pool.
 *   array  each producer walks its own preallocated, pre-touched array and
 *          nothing is freed: the queue alone.
 *
 * Families:
 *
 *   mpsc_push_pop/<impl>/producers:N   N producer threads push PP_ITEMS / N
 *       items each, tagged (producer, sequence, checksum); the benchmark's own
 *       thread is the one consumer and pops them all, spinning. One untimed
 *       transfer comes first (warm-up). Manual time runs from the start
 *       barrier to the last pop; items_per_second is items over that time.
 *       Every item is checked as it arrives: each producer's sequence must
 *       come in order with none missing or repeated, and the checksum must
 *       match (so a payload not yet visible to the consumer is caught too).
 *       pool_new_MiB: what the pool mapped during the timed transfers.
 *
 *   mpsc_handoff/<impl>/producers:1    one-way handoff latency, measured as
 *       half a ping-pong round trip: the benchmark's thread pushes a node on
 *       queue "ping", an echo thread pops it (spinning) and pushes it on
 *       "pong", the first pops it back, HO_ROUNDS times. The reported time is
 *       the batch's time / (2 * HO_ROUNDS). Round trips need no cross-core
 *       clock and keep one node in flight, so the figure is the handoff
 *       itself, not queueing delay behind a backlog. (The CPU column is the
 *       benchmark thread's CPU time for a whole batch.)
 *
 * Waiting is the same for every lock-free impl: PAUSE for SPIN_LIMIT empty
 * polls, then sched_yield (the machine may have fewer cores than threads).
 * A consumer that sees no progress for STALL_NS gives up and the run is
 * reported as failed with what was missing. So is an iteration that has not
 * finished within BUDGET_NS, to keep the whole file's run short: with more
 * threads than cores, a queue whose producers wait for one another (ck_ring
 * commits its slots in reservation order) can crawl while a preempted thread
 * waits for a time slice. The error says how far it got.
 */
#define _LGPL_SOURCE                 /* inline liburcu's wfcqueue (see above) */

#include "benches.h"
#include "shim.h"

#include "ds/mpsc.h"
#include "ds/pool.h"
#include "util/clock.h"
#include "util/common.h"

#include <ck_fifo.h>
#include <ck_ring.h>
#include <urcu/wfcqueue.h>

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CK_F_FIFO_MPMC
#error "ck_fifo_mpmc needs a double-width CAS (CK_F_FIFO_MPMC)"
#endif

#define PP_ITEMS    (1u << 20)        /* items per push_pop iteration, over all producers */
#define PP_ITERS    5
#define HO_ROUNDS   20000u            /* round trips per handoff iteration */
#define HO_ITERS    5
#define RING_SLOTS  (1u << 16)        /* ck_ring size (power of two; holds RING_SLOTS - 1) */
#define SPIN_LIMIT  256
#define STALL_NS    (2ull * 1000000000ull)
#define BUDGET_NS   (2ull * 1000000000ull)
#define MUTEX_WAIT_NS (10ull * 1000000ull)

#define ALWAYS_INLINE static inline __attribute__((always_inline))

enum impl { HIVE, WFCQ, CK_FIFO, CK_RING, MUTEX };

/* The node every impl carries: one cache line, as a pool block is. */
typedef struct __attribute__((aligned(HIVE_CACHELINE))) item {
    union {
        hive__mpsc_node_t hive;
        struct cds_wfcq_node wfcq;
        struct item *next;           /* mutex list */
    } link;
    uint32_t producer;
    uint64_t seq;
    uint64_t check;
} item_t;

typedef struct queue {
    union {
        hive__mpsc_t hive;
        struct {
            /* head and tail kept apart as hive keeps its head and tail */
            HIVE_ALIGNED struct __cds_wfcq_head head;
            HIVE_ALIGNED struct cds_wfcq_tail tail;
        } wfcq;
        ck_fifo_mpmc_t ck_fifo;
        struct {
            ck_ring_t ring;
            ck_ring_buffer_t *buf;
        } ck_ring;
        struct {
            pthread_mutex_t lock;
            pthread_cond_t nonempty;
            item_t *head, *tail;
            bool waiting;            /* the consumer sleeps on nonempty */
        } mutex;
    } u;
} queue_t;

/* The checksum of an item; round changes every iteration so that an array
 * item still holding last iteration's payload does not pass. */
static inline uint64_t tag(uint32_t producer, uint64_t seq, uint64_t round)
{
    return (seq * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)producer << 48) ^
           (round * 0xC2B2AE3D27D4EB4Full) ^ 0x5bd1e9955bd1e995ull;
}

/* HB_NODES=array: items from preallocated arrays instead of the pool. */
static bool use_arrays(void)
{
    const char *v = getenv("HB_NODES");
    return v != NULL && strcmp(v, "array") == 0;
}

/* One empty poll's worth of waiting; *spins counts polls since the last success. */
static inline void idle(unsigned *spins)
{
    if (++*spins < SPIN_LIMIT)
        hive__cpu_relax();
    else
        sched_yield();
}

/* ------------------------------------------------------------------ queues */

/* stub: ck_fifo's first entry; ring_buf: ck_ring's slots (RING_SLOTS). */
static void q_init(queue_t *q, enum impl impl, ck_fifo_mpmc_entry_t *stub,
                   ck_ring_buffer_t *ring_buf)
{
    switch (impl) {
    case HIVE:
        hive__mpsc_init(&q->u.hive, false);
        break;
    case WFCQ:
        __cds_wfcq_init(&q->u.wfcq.head, &q->u.wfcq.tail);
        break;
    case CK_FIFO:
        ck_fifo_mpmc_init(&q->u.ck_fifo, stub);
        break;
    case CK_RING:
        ck_ring_init(&q->u.ck_ring.ring, RING_SLOTS);
        q->u.ck_ring.buf = ring_buf;
        break;
    case MUTEX: {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_mutex_init(&q->u.mutex.lock, NULL);
        pthread_cond_init(&q->u.mutex.nonempty, &ca);
        pthread_condattr_destroy(&ca);
        q->u.mutex.head = q->u.mutex.tail = NULL;
        q->u.mutex.waiting = false;
        break;
    }
    }
}

static void q_destroy(queue_t *q, enum impl impl)
{
    if (impl == MUTEX) {
        pthread_cond_destroy(&q->u.mutex.nonempty);
        pthread_mutex_destroy(&q->u.mutex.lock);
    }
}

/*
 * Push it. *entry is the caller's next preallocated ck_fifo entry (unused by
 * the others). Returns false only if ck_ring was full and *abort got set.
 */
ALWAYS_INLINE bool q_push(queue_t *q, enum impl impl, item_t *it, ck_fifo_mpmc_entry_t **entry,
                          _Atomic bool *abort)
{
    switch (impl) {
    case HIVE:
        hive__mpsc_push(&q->u.hive, &it->link.hive);
        return true;
    case WFCQ:
        cds_wfcq_node_init(&it->link.wfcq);
        cds_wfcq_enqueue(&q->u.wfcq.head, &q->u.wfcq.tail, &it->link.wfcq);
        return true;
    case CK_FIFO:
        ck_fifo_mpmc_enqueue(&q->u.ck_fifo, (*entry)++, it);
        return true;
    case CK_RING: {
        unsigned spins = 0;
        while (!ck_ring_enqueue_mpsc(&q->u.ck_ring.ring, q->u.ck_ring.buf, it)) {
            if (atomic_load_explicit(abort, memory_order_relaxed))
                return false;
            idle(&spins);
        }
        return true;
    }
    case MUTEX: {
        pthread_mutex_lock(&q->u.mutex.lock);
        it->link.next = NULL;
        if (q->u.mutex.tail != NULL)
            q->u.mutex.tail->link.next = it;
        else
            q->u.mutex.head = it;
        q->u.mutex.tail = it;
        bool wake = q->u.mutex.waiting;
        pthread_mutex_unlock(&q->u.mutex.lock);
        /* Signalling after the unlock is safe: the consumer tests the list
         * under the lock before it waits, and it saves the woken consumer
         * from blocking at once on the lock we still hold. */
        if (wake)
            pthread_cond_signal(&q->u.mutex.nonempty);
        return true;
    }
    }
    return false;
}

static item_t *mutex_pop(queue_t *q)
{
    pthread_mutex_lock(&q->u.mutex.lock);
    if (q->u.mutex.head == NULL) {
        uint64_t until = hive__now_ns() + MUTEX_WAIT_NS;
        struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
        q->u.mutex.waiting = true;
        while (q->u.mutex.head == NULL &&
               pthread_cond_timedwait(&q->u.mutex.nonempty, &q->u.mutex.lock, &ts) == 0)
            ;
        q->u.mutex.waiting = false;
    }
    item_t *it = q->u.mutex.head;
    if (it != NULL) {
        q->u.mutex.head = it->link.next;
        if (q->u.mutex.head == NULL)
            q->u.mutex.tail = NULL;
    }
    pthread_mutex_unlock(&q->u.mutex.lock);
    return it;
}

/* Consumer only: the oldest item, or NULL if none is ready (the mutex queue
 * first sleeps up to MUTEX_WAIT_NS for one). */
ALWAYS_INLINE item_t *q_pop(queue_t *q, enum impl impl)
{
    switch (impl) {
    case HIVE: {
        hive__mpsc_node_t *n = hive__mpsc_pop(&q->u.hive);
        return n ? HIVE_CONTAINER_OF(n, item_t, link.hive) : NULL;
    }
    case WFCQ: {
        struct cds_wfcq_node *n = __cds_wfcq_dequeue_nonblocking(&q->u.wfcq.head, &q->u.wfcq.tail);
        if (n == NULL || n == CDS_WFCQ_WOULDBLOCK)
            return NULL;
        return HIVE_CONTAINER_OF(n, item_t, link.wfcq);
    }
    case CK_FIFO: {
        void *v;
        ck_fifo_mpmc_entry_t *garbage;   /* preallocated: nothing to free */
        return ck_fifo_mpmc_dequeue(&q->u.ck_fifo, &v, &garbage) ? v : NULL;
    }
    case CK_RING: {
        void *v;
        return ck_ring_dequeue_mpsc(&q->u.ck_ring.ring, q->u.ck_ring.buf, &v) ? v : NULL;
    }
    case MUTEX:
        return mutex_pop(q);
    }
    return NULL;
}

/* Pop, waiting (spin, then yield) until an item comes; NULL if instead
 * *abort gets set, no item comes for STALL_NS or the clock passes deadline. */
ALWAYS_INLINE item_t *q_pop_wait(queue_t *q, enum impl impl, _Atomic bool *abort, uint64_t deadline)
{
    unsigned spins = 0;
    uint64_t since = 0;
    for (;;) {
        item_t *it = q_pop(q, impl);
        if (likely(it != NULL))
            return it;
        if (impl != MUTEX)
            idle(&spins);
        if (impl == MUTEX || (spins & 255) == 0) {
            if (atomic_load_explicit(abort, memory_order_relaxed))
                return NULL;
            uint64_t now = hive__now_ns();
            if (now >= deadline)
                return NULL;
            if (since == 0)
                since = now;
            else if (now - since > STALL_NS)
                return NULL;
        }
    }
}

static queue_t *queue_new(void)
{
    queue_t *q = aligned_alloc(HIVE_PAD, (sizeof(queue_t) + HIVE_PAD - 1) / HIVE_PAD * HIVE_PAD);
    if (q == NULL)
        HIVE_DIE("out of memory");
    memset(q, 0, sizeof *q);
    return q;
}

/* ck_fifo entries, 16-byte aligned as its CAS2 needs, touched once so that
 * no page fault lands inside a timed region. */
static ck_fifo_mpmc_entry_t *entries_new(size_t n)
{
    size_t bytes = (n * sizeof(ck_fifo_mpmc_entry_t) + HIVE_CACHELINE - 1) / HIVE_CACHELINE *
                   HIVE_CACHELINE;
    ck_fifo_mpmc_entry_t *e = aligned_alloc(HIVE_CACHELINE, bytes);
    if (e == NULL)
        HIVE_DIE("out of memory");
    memset(e, 0, bytes);
    return e;
}

/* ------------------------------------------------------------------ push_pop */

typedef struct pp_run {
    queue_t *q;
    uint32_t nprod;
    uint64_t per_prod;
    uint64_t round;                  /* iteration number, part of every checksum */
    item_t *nodes;                   /* HB_NODES=array: per_prod per producer; else NULL */
    ck_fifo_mpmc_entry_t *entries;   /* ck_fifo: [0] stub, then per_prod per producer */
    pthread_barrier_t start;
    _Atomic bool abort;
} pp_run_t;

typedef struct pp_producer {
    pp_run_t *run;
    uint32_t id;
    pthread_t thread;
} pp_producer_t;

ALWAYS_INLINE void produce(pp_producer_t *p, enum impl impl)
{
    pp_run_t *r = p->run;
    ck_fifo_mpmc_entry_t *entry = r->entries ? r->entries + 1 + (size_t)p->id * r->per_prod : NULL;
    item_t *node = r->nodes ? r->nodes + (size_t)p->id * r->per_prod : NULL;
    pthread_barrier_wait(&r->start);
    for (uint64_t seq = 0; seq < r->per_prod; seq++) {
        /* The consumer gave up: stop now, not after the rest of our items
         * (a relaxed load of a line nobody writes meanwhile: noise-free). */
        if (unlikely(atomic_load_explicit(&r->abort, memory_order_relaxed)))
            return;
        item_t *it = node ? node++ : hive__pool_alloc(sizeof *it);
        if (it == NULL) {
            atomic_store(&r->abort, true);
            return;
        }
        it->producer = p->id;
        it->seq = seq;
        it->check = tag(p->id, seq, r->round);
        if (!q_push(r->q, impl, it, &entry, &r->abort))
            return;
    }
}

static void *producer_hive(void *p)    { produce(p, HIVE);    return NULL; }
static void *producer_wfcq(void *p)    { produce(p, WFCQ);    return NULL; }
static void *producer_ck_fifo(void *p) { produce(p, CK_FIFO); return NULL; }
static void *producer_ck_ring(void *p) { produce(p, CK_RING); return NULL; }
static void *producer_mutex(void *p)   { produce(p, MUTEX);   return NULL; }

static void *(*const producer_main[])(void *) = {
    [HIVE] = producer_hive, [WFCQ] = producer_wfcq, [CK_FIFO] = producer_ck_fifo,
    [CK_RING] = producer_ck_ring, [MUTEX] = producer_mutex,
};

/*
 * Pop all nprod * per_prod items, checking each. Returns the nanoseconds from
 * the start barrier to the last pop, or 0 with err filled in.
 */
ALWAYS_INLINE uint64_t consume(pp_run_t *r, enum impl impl, uint64_t *expected, char *err,
                               size_t errlen)
{
    uint64_t total = (uint64_t)r->nprod * r->per_prod;
    memset(expected, 0, r->nprod * sizeof *expected);

    pthread_barrier_wait(&r->start);
    uint64_t t0 = hive__now_ns(), deadline = t0 + BUDGET_NS;
    for (uint64_t got = 0; got < total; got++) {
        item_t *it = q_pop_wait(r->q, impl, &r->abort, deadline);
        if (it == NULL || (unlikely((got & 0xffff) == 0xffff) && hive__now_ns() >= deadline)) {
            uint64_t ns = hive__now_ns() - t0;
            if (ns >= BUDGET_NS) {
                snprintf(err, errlen,
                         "too slow: gave up after %.1f s with %" PRIu64 " of %" PRIu64
                         " items (%.3g items/s)",
                         (double)ns / 1e9, got, total, (double)got * 1e9 / (double)ns);
                return 0;
            }
            uint32_t p = 0;
            while (p < r->nprod && expected[p] == r->per_prod)
                p++;
            snprintf(err, errlen,
                     "stalled: %" PRIu64 " of %" PRIu64 " items arrived; producer %u's item "
                     "%" PRIu64 " never came%s",
                     got, total, p, p < r->nprod ? expected[p] : 0,
                     atomic_load(&r->abort) ? " (a producer aborted)" : "");
            return 0;
        }
        uint32_t p = it->producer;
        if (p >= r->nprod || it->seq != expected[p] || it->check != tag(p, it->seq, r->round)) {
            if (p >= r->nprod)
                snprintf(err, errlen, "item %" PRIu64 ": bad producer id %u", got, p);
            else if (it->seq != expected[p])
                snprintf(err, errlen,
                         "producer %u: item %" PRIu64 " arrived when %" PRIu64
                         " was expected (lost, repeated or out of order)",
                         p, it->seq, expected[p]);
            else
                snprintf(err, errlen, "producer %u item %" PRIu64 ": payload not as written", p,
                         it->seq);
            return 0;
        }
        expected[p]++;
        if (r->nodes == NULL)
            hive__pool_free(it, sizeof *it);
    }
    return hive__now_ns() - t0;
}

/* What one benchmark instance keeps across its iterations. */
typedef struct pp_bench {
    queue_t *q;
    uint32_t nprod;
    uint64_t per_prod;
    item_t *nodes;                   /* HB_NODES=array, else NULL */
    ck_fifo_mpmc_entry_t *entries;   /* ck_fifo only */
    ck_ring_buffer_t *ring;          /* ck_ring only */
    uint64_t *expected;              /* per producer: next sequence due */
    pp_producer_t *prod;
} pp_bench_t;

/* One whole transfer: start the producers, consume, join. Nanoseconds from
 * the start barrier to the last pop, or 0 with err filled in. */
ALWAYS_INLINE uint64_t pp_transfer(pp_bench_t *b, enum impl impl, uint64_t round, char *err,
                                   size_t errlen)
{
    pp_run_t run = {.q = b->q, .nprod = b->nprod, .per_prod = b->per_prod, .round = round,
                    .nodes = b->nodes, .entries = b->entries};
    atomic_init(&run.abort, false);
    q_init(b->q, impl, b->entries, b->ring);
    pthread_barrier_init(&run.start, NULL, b->nprod + 1);
    for (uint32_t i = 0; i < b->nprod; i++) {
        b->prod[i] = (pp_producer_t){.run = &run, .id = i};
        if (pthread_create(&b->prod[i].thread, NULL, producer_main[impl], &b->prod[i]) != 0)
            HIVE_DIE("pthread_create failed");
    }
    uint64_t ns = consume(&run, impl, b->expected, err, errlen);
    atomic_store(&run.abort, true);   /* after a failure: producers stop at their next push */
    for (uint32_t i = 0; i < b->nprod; i++)
        pthread_join(b->prod[i].thread, NULL);
    pthread_barrier_destroy(&run.start);
    q_destroy(b->q, impl);
    /* After a failure, whatever is left in the queue may be damaged: leaked. */
    return ns;
}

/* Pool nodes for the largest backlog a transfer can build (all PP_ITEMS
 * items in flight), mapped once before the first push_pop row, so that no
 * row's timed transfers see the pool grow. Without it the first row to
 * build a backlog beyond the warm-up's (hive's, in the table's order) paid
 * for the growth: fresh chunks mapped and faulted in, and their 2 MiB
 * regions collapsed into huge pages by the settler on one of the two vCPUs
 * (MADV_COLLAPSE copies 2 MiB, 2-5 ms a region) while its producer and
 * consumer ran; the next impl found the pool grown (pool_new_MiB 6-38 for
 * the first row of a process, 0 for the others). */
static void pool_reserve_once(void)
{
    if (hive__pool_reserve(sizeof(item_t), (size_t)PP_ITEMS * sizeof(item_t)) != 0)
        HIVE_DIE("hive__pool_reserve failed");
}

ALWAYS_INLINE void bm_push_pop(hb_state *s, enum impl impl)
{
    static pthread_once_t reserved = PTHREAD_ONCE_INIT;
    if (!use_arrays())
        pthread_once(&reserved, pool_reserve_once);
    pp_bench_t b = {.nprod = (uint32_t)hb_range(s, 0)};
    b.per_prod = PP_ITEMS / b.nprod;
    b.q = queue_new();
    b.expected = calloc(b.nprod, sizeof *b.expected);
    b.prod = calloc(b.nprod, sizeof *b.prod);
    if (impl == CK_FIFO)
        b.entries = entries_new(1 + (size_t)b.nprod * b.per_prod);
    if (impl == CK_RING)
        b.ring = calloc(RING_SLOTS, sizeof *b.ring);
    if (use_arrays())
        b.nodes = aligned_alloc(HIVE_CACHELINE, PP_ITEMS * sizeof *b.nodes);
    if (b.expected == NULL || b.prod == NULL || (impl == CK_RING && b.ring == NULL) ||
        (use_arrays() && b.nodes == NULL))
        HIVE_DIE("out of memory");
    hb_set_label(s, b.nodes ? "nodes:array" : "nodes:pool");

    /* One untimed transfer first, so that the first touch of the nodes (pool
     * chunks or arrays) and of the ck_fifo entries is not timed, and the
     * pool starts the timed ones in the state this traffic leaves it in. */
    char err[256] = "";
    uint64_t round = 1;
    if (pp_transfer(&b, impl, round, err, sizeof err) == 0)
        hb_skip_with_error(s, err);
    size_t mapped0 = hive__pool_mapped_bytes();
    while (hb_keep_running(s)) {
        uint64_t ns = pp_transfer(&b, impl, ++round, err, sizeof err);
        if (ns == 0) {
            hb_skip_with_error(s, err);
            break;
        }
        hb_set_iteration_time(s, (double)ns / 1e9);
    }
    if (err[0] == '\0') {
        hb_set_items_processed(s, hb_iterations(s) * (int64_t)(b.nprod * b.per_prod));
        /* Chunks the pool mapped during the timed transfers: nonzero means
         * it had not reached a steady state after the warm-up. */
        hb_counter(s, "pool_new_MiB", (double)(hive__pool_mapped_bytes() - mapped0) / (1 << 20),
                   HB_PLAIN);
    }
    free(b.nodes);
    free(b.ring);
    free(b.entries);
    free(b.prod);
    free(b.expected);
    free(b.q);
}

static void bm_push_pop_hive(hb_state *s)    { bm_push_pop(s, HIVE); }
static void bm_push_pop_wfcq(hb_state *s)    { bm_push_pop(s, WFCQ); }
static void bm_push_pop_ck_fifo(hb_state *s) { bm_push_pop(s, CK_FIFO); }
static void bm_push_pop_ck_ring(hb_state *s) { bm_push_pop(s, CK_RING); }
static void bm_push_pop_mutex(hb_state *s)   { bm_push_pop(s, MUTEX); }

/* ------------------------------------------------------------------ handoff */

typedef struct ho_run {
    queue_t *ping, *pong;
    ck_fifo_mpmc_entry_t *entries;   /* ck_fifo: 2 stubs, then HO_ROUNDS per side */
    pthread_barrier_t start;
    _Atomic bool abort;
    char err[128];                   /* the echo thread's failure, if any */
} ho_run_t;

/* The echo thread: pop from ping, check, push on pong. */
ALWAYS_INLINE void echo(ho_run_t *r, enum impl impl)
{
    ck_fifo_mpmc_entry_t *entry = r->entries ? r->entries + 2 + HO_ROUNDS : NULL;
    pthread_barrier_wait(&r->start);
    for (uint64_t i = 0; i < HO_ROUNDS; i++) {
        item_t *it = q_pop_wait(r->ping, impl, &r->abort, UINT64_MAX);
        if (it == NULL) {
            if (!atomic_load(&r->abort))
                snprintf(r->err, sizeof r->err, "echo: round %" PRIu64 " never arrived", i);
            atomic_store(&r->abort, true);
            return;
        }
        if (it->seq != i) {
            snprintf(r->err, sizeof r->err, "echo: round %" PRIu64 " got item %" PRIu64, i,
                     it->seq);
            atomic_store(&r->abort, true);
            return;
        }
        it->check = i + 1;
        q_push(r->pong, impl, it, &entry, &r->abort);
    }
}

static void *echo_hive(void *r)    { echo(r, HIVE);    return NULL; }
static void *echo_wfcq(void *r)    { echo(r, WFCQ);    return NULL; }
static void *echo_ck_fifo(void *r) { echo(r, CK_FIFO); return NULL; }
static void *echo_ck_ring(void *r) { echo(r, CK_RING); return NULL; }
static void *echo_mutex(void *r)   { echo(r, MUTEX);   return NULL; }

static void *(*const echo_main[])(void *) = {
    [HIVE] = echo_hive, [WFCQ] = echo_wfcq, [CK_FIFO] = echo_ck_fifo,
    [CK_RING] = echo_ck_ring, [MUTEX] = echo_mutex,
};

/* HO_ROUNDS round trips of one node; nanoseconds, or 0 with err filled in. */
ALWAYS_INLINE uint64_t ping_pong(ho_run_t *r, enum impl impl, item_t *it, char *err, size_t errlen)
{
    ck_fifo_mpmc_entry_t *entry = r->entries ? r->entries + 2 : NULL;
    pthread_barrier_wait(&r->start);
    uint64_t t0 = hive__now_ns(), deadline = t0 + BUDGET_NS;
    for (uint64_t i = 0; i < HO_ROUNDS; i++) {
        it->seq = i;
        it->check = 0;                /* the echo thread writes i + 1 */
        q_push(r->ping, impl, it, &entry, &r->abort);
        item_t *back = q_pop_wait(r->pong, impl, &r->abort, deadline);
        if (back != it || it->check != i + 1) {
            uint64_t ns = hive__now_ns() - t0;
            if (back == NULL && ns >= BUDGET_NS)
                snprintf(err, errlen,
                         "too slow: gave up after %.1f s with %" PRIu64 " of %u round trips"
                         " (%.0f ns one way)",
                         (double)ns / 1e9, i, HO_ROUNDS, (double)ns / (2.0 * (double)(i + 1)));
            else if (back == NULL)
                snprintf(err, errlen, "round %" PRIu64 " never came back", i);
            else
                snprintf(err, errlen, "round %" PRIu64 ": wrong node or payload came back", i);
            return 0;
        }
    }
    return hive__now_ns() - t0;
}

ALWAYS_INLINE void bm_handoff(hb_state *s, enum impl impl)
{
    char err[256] = "";
    queue_t *ping = queue_new(), *pong = queue_new();
    ck_fifo_mpmc_entry_t *entries = impl == CK_FIFO ? entries_new(2 + 2 * (size_t)HO_ROUNDS) : NULL;
    ck_ring_buffer_t *rings = impl == CK_RING ? calloc(2 * RING_SLOTS, sizeof *rings) : NULL;
    item_t *it = hive__pool_alloc(sizeof *it);
    if (it == NULL || (impl == CK_RING && rings == NULL))
        HIVE_DIE("out of memory");
    memset(it, 0, sizeof *it);

    while (hb_keep_running(s)) {
        ho_run_t run = {.ping = ping, .pong = pong, .entries = entries};
        atomic_init(&run.abort, false);
        q_init(ping, impl, entries, rings);
        q_init(pong, impl, entries ? entries + 1 : NULL, rings ? rings + RING_SLOTS : NULL);
        pthread_barrier_init(&run.start, NULL, 2);
        pthread_t echo_thread;
        if (pthread_create(&echo_thread, NULL, echo_main[impl], &run) != 0)
            HIVE_DIE("pthread_create failed");
        uint64_t ns = ping_pong(&run, impl, it, err, sizeof err);
        atomic_store(&run.abort, true);
        pthread_join(echo_thread, NULL);
        pthread_barrier_destroy(&run.start);
        q_destroy(ping, impl);
        q_destroy(pong, impl);
        if (run.err[0] != '\0')
            snprintf(err, sizeof err, "%s", run.err);
        if (ns == 0 || run.err[0] != '\0') {
            it = NULL;                /* may still be linked somewhere: leak it */
            hb_skip_with_error(s, err);
            break;
        }
        hb_set_iteration_time(s, (double)ns / 1e9 / (2.0 * HO_ROUNDS));
    }
    hive__pool_free(it, sizeof *it);
    free(rings);
    free(entries);
    free(pong);
    free(ping);
}

static void bm_handoff_hive(hb_state *s)    { bm_handoff(s, HIVE); }
static void bm_handoff_wfcq(hb_state *s)    { bm_handoff(s, WFCQ); }
static void bm_handoff_ck_fifo(hb_state *s) { bm_handoff(s, CK_FIFO); }
static void bm_handoff_ck_ring(hb_state *s) { bm_handoff(s, CK_RING); }
static void bm_handoff_mutex(hb_state *s)   { bm_handoff(s, MUTEX); }

/* ------------------------------------------------------------------ table */

static const int64_t producers_1_2_4[] = {1, 2, 4};
static const int64_t producers_1[] = {1};

#define PUSH_POP(impl, fn) \
    {"mpsc_push_pop/" impl, fn, 0, 1, producers_1_2_4, 3, "producers", HB_MS, PP_ITERS}
#define HANDOFF(impl, fn) \
    {"mpsc_handoff/" impl, fn, 0, 1, producers_1, 1, "producers", HB_NS, HO_ITERS}

const hb_bench hb_mpsc_benches[] = {
    PUSH_POP("hive", bm_push_pop_hive),
    PUSH_POP("wfcq", bm_push_pop_wfcq),
    PUSH_POP("ck_fifo", bm_push_pop_ck_fifo),
    PUSH_POP("ck_ring", bm_push_pop_ck_ring),
    PUSH_POP("mutex", bm_push_pop_mutex),
    HANDOFF("hive", bm_handoff_hive),
    HANDOFF("wfcq", bm_handoff_wfcq),
    HANDOFF("ck_fifo", bm_handoff_ck_fifo),
    HANDOFF("ck_ring", bm_handoff_ck_ring),
    HANDOFF("mutex", bm_handoff_mutex),
};
const size_t hb_mpsc_nbenches = HIVE_ARRAY_LEN(hb_mpsc_benches);
