/*
 * ring.h - bounded lock-free multi-producer multi-consumer ring of pointers,
 * after Dmitry Vyukov's bounded MPMC queue.
 *
 * Each slot carries a sequence number that says whose turn it is: a putter
 * at position p may fill the slot when seq == p, a taker at p may empty it
 * when seq == p + 1. A thread claims a position with one CAS on the put or
 * take counter, then hands the slot on with a release store of the next
 * sequence (p + 1 after a put, p + capacity after a take). Both ends are
 * O(1); FIFO holds between positions; a full ring refuses a put and an
 * empty ring (or one whose next putter is still writing) refuses a take.
 *
 * The capacity is fixed at init (a power of two); the slots follow the
 * header in one allocation made by the owner.
 */
#ifndef HIVE_DS_RING_H
#define HIVE_DS_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/common.h"

typedef struct hive__rslot {
    _Atomic size_t seq;
    void          *item;
} hive__rslot_t;

typedef struct hive__ring {
    HIVE_ALIGNED _Atomic size_t put;     /* next position to fill */
    HIVE_ALIGNED _Atomic size_t take;    /* next position to empty */
    HIVE_ALIGNED size_t mask;            /* capacity - 1 */
    hive__rslot_t *slot;
} hive__ring_t;

/* slots: capacity entries (a power of two), owned by the caller. */
static inline void hive__ring_init(hive__ring_t *r, hive__rslot_t *slots, size_t capacity)
{
    atomic_init(&r->put, 0);
    atomic_init(&r->take, 0);
    r->mask = capacity - 1;
    r->slot = slots;
    for (size_t i = 0; i < capacity; i++) {
        atomic_init(&slots[i].seq, i);
        slots[i].item = NULL;
    }
}

/* Append item; false if the ring is full. */
static inline bool hive__ring_put(hive__ring_t *r, void *item)
{
    /* relaxed: the counter only picks a slot; the slot's seq orders the data */
    size_t pos = atomic_load_explicit(&r->put, memory_order_relaxed);
    for (;;) {
        hive__rslot_t *s = &r->slot[pos & r->mask];
        /* acquire: the taker that emptied this slot is done reading it */
        size_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)pos;
        if (dif == 0) {
            /* seq_cst on success: the claim is the store half of the "make
             * work visible, then read nparked" handshake in sched.c (a
             * locked cmpxchg on x86 either way) */
            if (atomic_compare_exchange_weak_explicit(&r->put, &pos, pos + 1, memory_order_seq_cst,
                                                      memory_order_relaxed)) {
                s->item = item;
                /* release: the item and everything written before the put
                 * reach the taker that acquires this seq */
                atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
                return true;
            }
        } else if (dif < 0) {
            return false;
        } else {
            pos = atomic_load_explicit(&r->put, memory_order_relaxed);
        }
    }
}

/* Remove the oldest item; NULL if the ring is empty. */
static inline void *hive__ring_take(hive__ring_t *r)
{
    size_t pos = atomic_load_explicit(&r->take, memory_order_relaxed);
    for (;;) {
        hive__rslot_t *s = &r->slot[pos & r->mask];
        /* acquire: pairs with the putter's release */
        size_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)(pos + 1);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&r->take, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                void *item = s->item;
                /* release: our read of item is done before a putter reuses the slot */
                atomic_store_explicit(&s->seq, pos + r->mask + 1, memory_order_release);
                return item;
            }
        } else if (dif < 0) {
            return NULL;
        } else {
            pos = atomic_load_explicit(&r->take, memory_order_relaxed);
        }
    }
}

/* True if a put has claimed a position not yet taken. seq_cst: the parking
 * side of the store-load handshake in sched.c. */
static inline bool hive__ring_nonempty(hive__ring_t *r)
{
    return atomic_load_explicit(&r->put, memory_order_seq_cst) !=
           atomic_load_explicit(&r->take, memory_order_seq_cst);
}

#endif
