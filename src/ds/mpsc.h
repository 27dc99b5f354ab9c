/*
 * mpsc.h - intrusive lock-free multi-producer single-consumer queue.
 *
 * The algorithm is Dmitry Vyukov's intrusive MPSC node-based queue, with the
 * "empty mark" that the Pony runtime adds to its actor mailboxes so that
 * exactly one producer learns that the queue went from idle to busy.
 *
 *   head (producers' end) --xchg-->  [n3] <- [n2] <- [n1] <- [stub]  <- tail (consumer's end)
 *                                     links point from older to newer
 *
 * Push is one atomic exchange on head followed by one store that links the
 * previous head to the new node. Between the two the chain is broken: the
 * consumer then sees "nothing yet" (pop returns NULL while the queue is not
 * empty); hive__mpsc_empty() tells that case apart so nobody sleeps on it.
 *
 * The queue keeps a stub node of its own. When the consumer is about to take
 * the last real node, it pushes the stub behind it, so the tail always has a
 * node to stand on and user nodes leave the queue the moment they are popped:
 * the caller owns a popped node and may free or reuse it at once.
 *
 * Empty mark: the consumer may call hive__mpsc_mark_empty() after pop returned
 * NULL. It succeeds only if head is still the bare stub (no push has begun),
 * and then sets bit 0 of head. The next push's exchange returns that tagged
 * value, so that one producer - and only that one - learns the queue was
 * marked idle and must schedule the consumer. Nodes are at least 2-byte
 * aligned, so bit 0 of a real pointer is always clear.
 *
 * Thread roles: any thread may push; one thread at a time may pop or mark
 * (the owner of the queue, e.g. the worker that runs an actor).
 *
 * Two layouts share the algorithm (the *_at functions take the fields):
 * hive__mpsc_t keeps the producers' and the consumer's ends on lines of
 * their own (busy queues: worker inboxes), hive__mbox_t packs them into 24
 * bytes (many mostly idle queues: actor mailboxes).
 */
#ifndef HIVE_DS_MPSC_H
#define HIVE_DS_MPSC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/common.h"

typedef struct hive__mpsc_node {
    _Atomic(struct hive__mpsc_node *) next;
} hive__mpsc_node_t;

typedef struct hive__mpsc {
    /* Producers' end; every push exchanges it. Its own line so that
     * producers hammering it never evict the consumer's fields. One line
     * (not the adjacent-line pair HIVE_PAD keeps apart elsewhere). */
    _Alignas(HIVE_CACHELINE) _Atomic uintptr_t head;
    /* Consumer's end: touched only by the one consumer. */
    _Alignas(HIVE_CACHELINE) hive__mpsc_node_t *tail;
    hive__mpsc_node_t stub;
} hive__mpsc_t;

/*
 * The same queue packed into 24 bytes, head, tail and stub side by side:
 * for queues that are mostly idle and many (actor mailboxes: an actor has
 * one per priority lane, and a million idle actors must not each pay a
 * line per end). Producers and the consumer then share a line, which costs
 * only while the queue is busy.
 */
typedef struct hive__mbox {
    _Atomic uintptr_t head;
    hive__mpsc_node_t *tail;
    hive__mpsc_node_t stub;
} hive__mbox_t;

#define HIVE__MPSC_MARK ((uintptr_t)1)

/* ---- the algorithm, on the three fields wherever they live ---- */

static inline void hive__mpsc_init_at(_Atomic uintptr_t *head, hive__mpsc_node_t **tail,
                                      hive__mpsc_node_t *stub, bool marked)
{
    atomic_init(&stub->next, NULL);
    *tail = stub;
    atomic_init(head, (uintptr_t)stub | (marked ? HIVE__MPSC_MARK : 0));
}

/*
 * Link a chain first..last (already linked through next by the caller) at
 * the producers' end. Returns true if the queue was marked empty, i.e. this
 * caller is the one that must wake or schedule the consumer.
 *
 * Orderings:
 *  - last->next = NULL is relaxed: it is published by the exchange below.
 *  - The exchange is seq_cst. Its release half publishes last->next = NULL
 *    and the payload of every node in the chain to the producer that will
 *    link behind us (it acquires the same head); its acquire half pairs with
 *    that earlier producer's release. It is seq_cst (free on x86: xchg is a
 *    full barrier) because callers use it as one side of a store-load
 *    handshake with a sleeping consumer: "push, then read its parked flag"
 *    against "set parked flag, then read head" - with both sides seq_cst,
 *    at least one of them sees the other (see sched.c).
 *  - prev->next = first is a release store: the consumer acquires it in pop,
 *    and from it everything written to the chain before the exchange.
 */
static inline bool hive__mpsc_push_at(_Atomic uintptr_t *head, hive__mpsc_node_t *first,
                                      hive__mpsc_node_t *last)
{
    atomic_store_explicit(&last->next, NULL, memory_order_relaxed);
    uintptr_t prev = atomic_exchange_explicit(head, (uintptr_t)last, memory_order_seq_cst);
    hive__mpsc_node_t *p = (hive__mpsc_node_t *)(prev & ~HIVE__MPSC_MARK);
    atomic_store_explicit(&p->next, first, memory_order_release);
    return (prev & HIVE__MPSC_MARK) != 0;
}

/* Consumer only: the oldest node, or NULL if none is linked yet. */
static inline hive__mpsc_node_t *hive__mpsc_pop_at(_Atomic uintptr_t *head,
                                                   hive__mpsc_node_t **tailp,
                                                   hive__mpsc_node_t *stub)
{
    hive__mpsc_node_t *tail = *tailp;
    /* acquire: pairs with the release link store in push, so the node's
     * payload written before the push is visible to us. */
    hive__mpsc_node_t *next = atomic_load_explicit(&tail->next, memory_order_acquire);

    if (tail == stub) {
        if (next == NULL)
            return NULL;
        *tailp = next;           /* step over the stub */
        tail = next;
        next = atomic_load_explicit(&tail->next, memory_order_acquire);
    }
    if (next != NULL) {
        *tailp = next;
        return tail;
    }
    /* tail is the newest linked node. If a producer has already exchanged
     * head past it but not linked yet, wait for a later pop. relaxed: only the
     * identity of head matters here, nothing is read through it. */
    uintptr_t h = atomic_load_explicit(head, memory_order_relaxed) & ~HIVE__MPSC_MARK;
    if ((hive__mpsc_node_t *)h != tail)
        return NULL;
    /* tail is the last node: put the stub behind it so that it can leave. */
    hive__mpsc_push_at(head, stub, stub);
    next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (next != NULL) {
        *tailp = next;
        return tail;
    }
    return NULL;                 /* a producer slipped in before the stub: later */
}

/*
 * Consumer only: true if no node is queued and no push is in flight.
 * seq_cst load of head: the consumer's half of the park handshake (push).
 */
static inline bool hive__mpsc_empty_at(_Atomic uintptr_t *head, hive__mpsc_node_t *tail,
                                       hive__mpsc_node_t *stub)
{
    uintptr_t h = atomic_load_explicit(head, memory_order_seq_cst) & ~HIVE__MPSC_MARK;
    return tail == stub && (hive__mpsc_node_t *)h == stub;
}

/*
 * Consumer only, after pop returned NULL: mark the queue empty so the next
 * push reports it. Fails (returns false) if a push has begun since, in which
 * case the consumer must keep going. seq_cst: orders the mark against the
 * producers' exchange in the single total order, so exactly one of them sees
 * the mark; on failure nothing was written.
 */
static inline bool hive__mpsc_mark_empty_at(_Atomic uintptr_t *head, hive__mpsc_node_t *tail,
                                            hive__mpsc_node_t *stub)
{
    if (tail != stub)
        return false;
    uintptr_t expect = (uintptr_t)stub;
    return atomic_compare_exchange_strong_explicit(head, &expect, expect | HIVE__MPSC_MARK,
                                                   memory_order_seq_cst, memory_order_relaxed);
}

/* ---- the padded queue ---- */

/* Initialise an empty queue, optionally already marked empty (its first
 * push must then schedule the consumer). */
static inline void hive__mpsc_init(hive__mpsc_t *q, bool marked)
{
    hive__mpsc_init_at(&q->head, &q->tail, &q->stub, marked);
}

static inline bool hive__mpsc_push_chain(hive__mpsc_t *q, hive__mpsc_node_t *first,
                                         hive__mpsc_node_t *last)
{
    return hive__mpsc_push_at(&q->head, first, last);
}

static inline bool hive__mpsc_push(hive__mpsc_t *q, hive__mpsc_node_t *n)
{
    return hive__mpsc_push_at(&q->head, n, n);
}

static inline hive__mpsc_node_t *hive__mpsc_pop(hive__mpsc_t *q)
{
    return hive__mpsc_pop_at(&q->head, &q->tail, &q->stub);
}

static inline bool hive__mpsc_empty(hive__mpsc_t *q)
{
    return hive__mpsc_empty_at(&q->head, q->tail, &q->stub);
}

static inline bool hive__mpsc_mark_empty(hive__mpsc_t *q)
{
    return hive__mpsc_mark_empty_at(&q->head, q->tail, &q->stub);
}

/* ---- the packed mailbox: the same operations ---- */

static inline void hive__mbox_init(hive__mbox_t *q)
{
    hive__mpsc_init_at(&q->head, &q->tail, &q->stub, false);
}

static inline bool hive__mbox_push(hive__mbox_t *q, hive__mpsc_node_t *n)
{
    return hive__mpsc_push_at(&q->head, n, n);
}

static inline hive__mpsc_node_t *hive__mbox_pop(hive__mbox_t *q)
{
    return hive__mpsc_pop_at(&q->head, &q->tail, &q->stub);
}

/* Consumer only: has a push begun that pop has not returned yet? (tail
 * off the stub, or head off it.) seq_cst load of head: callers use it as
 * their half of a store-load handshake with pushers. */
static inline bool hive__mbox_busy(hive__mbox_t *q)
{
    return !hive__mpsc_empty_at(&q->head, q->tail, &q->stub);
}

#endif
