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
     * (not the adjacent-line pair HIVE_PAD keeps apart elsewhere): every
     * actor has three of these, and with 128-byte pairs its record took the
     * pool's 2048-byte class instead of 1024. */
    _Alignas(HIVE_CACHELINE) _Atomic uintptr_t head;
    /* Nodes pushed, for users that count (actor mailboxes do, for
     * statistics): on head's line, which every push writes anyway. The
     * queue's own functions never touch it. */
    _Atomic uint64_t pushes;
    /* Consumer's end: touched only by the one consumer. */
    _Alignas(HIVE_CACHELINE) hive__mpsc_node_t *tail;
    hive__mpsc_node_t stub;
    _Atomic uint64_t pops;       /* nodes popped, if the user counts: the consumer's line */
} hive__mpsc_t;

#define HIVE__MPSC_MARK ((uintptr_t)1)

/* Initialise an empty queue, optionally already marked empty (an actor
 * mailbox starts marked: its first push must schedule the actor). */
static inline void hive__mpsc_init(hive__mpsc_t *q, bool marked)
{
    atomic_init(&q->stub.next, NULL);
    atomic_init(&q->pushes, 0);
    atomic_init(&q->pops, 0);
    q->tail = &q->stub;
    atomic_init(&q->head, (uintptr_t)&q->stub | (marked ? HIVE__MPSC_MARK : 0));
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
static inline bool hive__mpsc_push_chain(hive__mpsc_t *q, hive__mpsc_node_t *first,
                                         hive__mpsc_node_t *last)
{
    atomic_store_explicit(&last->next, NULL, memory_order_relaxed);
    uintptr_t prev = atomic_exchange_explicit(&q->head, (uintptr_t)last, memory_order_seq_cst);
    hive__mpsc_node_t *p = (hive__mpsc_node_t *)(prev & ~HIVE__MPSC_MARK);
    atomic_store_explicit(&p->next, first, memory_order_release);
    return (prev & HIVE__MPSC_MARK) != 0;
}

static inline bool hive__mpsc_push(hive__mpsc_t *q, hive__mpsc_node_t *n)
{
    return hive__mpsc_push_chain(q, n, n);
}

/* Consumer only: the oldest node, or NULL if none is linked yet. */
static inline hive__mpsc_node_t *hive__mpsc_pop(hive__mpsc_t *q)
{
    hive__mpsc_node_t *tail = q->tail;
    /* acquire: pairs with the release link store in push, so the node's
     * payload written before the push is visible to us. */
    hive__mpsc_node_t *next = atomic_load_explicit(&tail->next, memory_order_acquire);

    if (tail == &q->stub) {
        if (next == NULL)
            return NULL;
        q->tail = next;          /* step over the stub */
        tail = next;
        next = atomic_load_explicit(&tail->next, memory_order_acquire);
    }
    if (next != NULL) {
        q->tail = next;
        return tail;
    }
    /* tail is the newest linked node. If a producer has already exchanged
     * head past it but not linked yet, wait for a later pop. relaxed: only the
     * identity of head matters here, nothing is read through it. */
    uintptr_t head = atomic_load_explicit(&q->head, memory_order_relaxed) & ~HIVE__MPSC_MARK;
    if ((hive__mpsc_node_t *)head != tail)
        return NULL;
    /* tail is the last node: put the stub behind it so that it can leave. */
    hive__mpsc_push(q, &q->stub);
    next = atomic_load_explicit(&tail->next, memory_order_acquire);
    if (next != NULL) {
        q->tail = next;
        return tail;
    }
    return NULL;                 /* a producer slipped in before the stub: later */
}

/*
 * Consumer only: true if no node is queued and no push is in flight.
 * seq_cst load of head: the consumer's half of the park handshake (push).
 */
static inline bool hive__mpsc_empty(hive__mpsc_t *q)
{
    uintptr_t head = atomic_load_explicit(&q->head, memory_order_seq_cst) & ~HIVE__MPSC_MARK;
    return q->tail == &q->stub && (hive__mpsc_node_t *)head == &q->stub;
}

/*
 * Consumer only, after pop returned NULL: mark the queue empty so the next
 * push reports it. Fails (returns false) if a push has begun since, in which
 * case the consumer must keep going. seq_cst: orders the mark against the
 * producers' exchange in the single total order, so exactly one of them sees
 * the mark; on failure nothing was written.
 */
static inline bool hive__mpsc_mark_empty(hive__mpsc_t *q)
{
    if (q->tail != &q->stub)
        return false;
    uintptr_t expect = (uintptr_t)&q->stub;
    return atomic_compare_exchange_strong_explicit(&q->head, &expect, expect | HIVE__MPSC_MARK,
                                                   memory_order_seq_cst, memory_order_relaxed);
}

#endif
