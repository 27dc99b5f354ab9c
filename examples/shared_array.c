/*
 * shared_array.c - the seeds' second answer: no manager actor at all. Two
 * WorkerActors hold a ref to one shared int64 array of one element and add
 * to it in place, atomically. The array lives in the object store; every
 * holder sees the same bytes, so nothing is copied and nobody owns it.
 *
 *   worker 1 adds one -> 1, worker 2 adds one -> 2, worker 1 reads -> 2
 *
 * (and main, holding the same ref, reads 2 as well).
 *
 * Then it shows that the bytes never move: each actor returns the address
 * it sees the element at, and main compares them with its own.
 *
 *   build/examples/shared_array
 */
#include <hive.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- WorkerActor: its state is the array's ref, a plain value */
typedef struct worker { hive_ref_t counter; } worker_t;
enum { ADD_ONE, READ, WHERE };

/* The array comes in by ref (HIVE_REF), not by value: the actor gets the
 * object itself, not a copy of its bytes. The actor's constructor record
 * keeps one count on it for as long as the actor lives (restarts reuse the
 * same arguments), so the ref stays valid in every later call. */
static int worker_init(void *self, hive_ctx_t *ctx)
{
    worker_t *w = self;
    w->counter = hive_arg_ref(ctx, 0);
    return w->counter.id != 0 ? 0 : 1;   /* passed inline by mistake: fail the constructor */
}

/* add_one: a view is a few words on the stack pointing into the store;
 * hive_array_add_i64 is one atomic add on the shared element. Two actors
 * may run this at the same moment on two cores: neither loses an update. */
static int worker_add_one(void *self, hive_ctx_t *ctx)
{
    worker_t *w = self;
    hive_array_t v;
    if (hive_array_view(hive_engine(ctx), w->counter, &v) != HIVE_OK)
        return 1;
    int64_t now = hive_array_add_i64(&v, 0, 1);   /* returns the new value */
    return hive_return(ctx, &now, sizeof now);
}

/* read: the element's current value, copied out as a consistent snapshot
 * (never half of a write section). */
static int worker_read(void *self, hive_ctx_t *ctx)
{
    worker_t *w = self;
    hive_array_t v;
    int64_t now;
    if (hive_array_view(hive_engine(ctx), w->counter, &v) != HIVE_OK ||
        hive_array_read(&v, &now, sizeof now) != HIVE_OK)
        return 1;
    return hive_return(ctx, &now, sizeof now);
}

/* where: the address this actor sees the element at. */
static int worker_where(void *self, hive_ctx_t *ctx)
{
    worker_t *w = self;
    hive_array_t v;
    if (hive_array_view(hive_engine(ctx), w->counter, &v) != HIVE_OK)
        return 1;
    uintptr_t p = (uintptr_t)hive_array_at(&v, (int64_t[]){ 0 });
    return hive_return(ctx, &p, sizeof p);
}

static const hive_method_t worker_methods[] = {
    [ADD_ONE] = { "add_one", worker_add_one, HIVE_PRIO_NORMAL },
    [READ]    = { "read",    worker_read,    HIVE_PRIO_NORMAL },
    [WHERE]   = { "where",   worker_where,   HIVE_PRIO_NORMAL },
};
static const hive_actor_class_t worker_class = {
    .name = "WorkerActor", .size = sizeof(worker_t), .init = worker_init,
    .methods = worker_methods, .nmethods = 3,
};

/* Call a method with no arguments and wait for its 8-byte answer. */
static uint64_t call_and_get(hive_t *h, hive_actor_t a, unsigned method)
{
    hive_ref_t r;
    const void *p;
    if (hive_call(h, a, method, NULL, 0, NULL, &r) != HIVE_OK ||
        hive_get(h, r, HIVE_FOREVER, &p, NULL) != HIVE_OK) {
        fprintf(stderr, "call failed: %s\n", hive_last_error());
        exit(1);
    }
    uint64_t v = *(const uint64_t *)p;
    hive_release(h, r);
    return v;
}

int main(void)
{
    hive_config_t cfg = { .store_bytes = 64u << 20 };
    hive_t *h;
    if (hive_init(&cfg, &h) != HIVE_OK) {
        fprintf(stderr, "hive_init: %s\n", hive_last_error());
        return 1;
    }

    /* One int64, zero-filled, in the store. */
    int64_t shape[1] = { 1 };
    hive_ref_t counter;
    if (hive_array_new(h, HIVE_I64, 1, shape, &counter) != HIVE_OK) {
        fprintf(stderr, "hive_array_new: %s\n", hive_last_error());
        return 1;
    }

    /* Both workers get the same ref as their constructor argument. */
    hive_arg_t arg = HIVE_REF(counter);
    hive_actor_t w1, w2;
    if (hive_actor_new(h, &worker_class, &arg, 1, NULL, &w1) != HIVE_OK ||
        hive_actor_new(h, &worker_class, &arg, 1, NULL, &w2) != HIVE_OK) {
        fprintf(stderr, "hive_actor_new: %s\n", hive_last_error());
        return 1;
    }

    printf("worker 1 adds one: %lld\n", (long long)(int64_t)call_and_get(h, w1, ADD_ONE));
    printf("worker 2 adds one: %lld\n", (long long)(int64_t)call_and_get(h, w2, ADD_ONE));
    int64_t read1 = (int64_t)call_and_get(h, w1, READ);
    printf("worker 1 reads:    %lld\n", (long long)read1);

    /* main reads the same element: a consistent snapshot, copied out */
    hive_array_t v;
    int64_t value;
    if (hive_array_view(h, counter, &v) != HIVE_OK || hive_array_read(&v, &value, sizeof value) != HIVE_OK) {
        fprintf(stderr, "read: %s\n", hive_last_error());
        return 1;
    }
    printf("main reads:        %lld\n", (long long)value);

    /* the bytes never moved: one address, seen by all three */
    uintptr_t p1 = (uintptr_t)call_and_get(h, w1, WHERE);
    uintptr_t p2 = (uintptr_t)call_and_get(h, w2, WHERE);
    uintptr_t pm = (uintptr_t)v.data;
    printf("element at %#lx (worker 1), %#lx (worker 2), %#lx (main): %s\n", (unsigned long)p1,
           (unsigned long)p2, (unsigned long)pm, p1 == p2 && p2 == pm ? "all equal" : "DIFFERENT");

    hive_release(h, counter);            /* the actors still hold theirs until shutdown */
    hive_shutdown(h);
    return read1 == 2 && value == 2 && p1 == p2 && p2 == pm ? 0 : 1;
}
