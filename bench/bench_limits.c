/*
 * bench_limits.c - what the machine itself allows, measured in the same run
 * as hive, so that the report can say how close each hive row comes:
 *   roundtrip/cacheline - two threads bounce one cache line (a counter each
 *                         advances when it sees the other's value): the
 *                         floor of any cross-thread hand-off and reply, such
 *                         as a sync task or an actor ping-pong;
 *   roundtrip/futex     - the same hand-off where each side sleeps in
 *                         FUTEX_WAIT and is woken by the other: the floor
 *                         for a hand-off to a parked thread.
 * (memcpy and memset into touched memory are rows of bench_store.c, beside
 * the puts they bound.) Two threads on a 2-core machine: the numbers need
 * both cores idle, like every other row.
 */
#include "benches.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 200000

typedef struct bounce {
    _Alignas(64) _Atomic uint32_t word;   /* even: the main side's turn; odd: the echo's */
    bool sleep;                           /* futex hand-off instead of spinning */
    uint32_t rounds;
} bounce_t;

static void futex_wait(_Atomic uint32_t *w, uint32_t v)
{
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Wait until the word is `want`, spinning or sleeping. */
static void await(bounce_t *b, uint32_t want)
{
    uint32_t v;
    /* acquire: the other side's store came first (a hand-off, as in a queue) */
    while ((v = atomic_load_explicit(&b->word, memory_order_acquire)) != want) {
        if (b->sleep)
            futex_wait(&b->word, v);
        else
            __builtin_ia32_pause();
    }
}

static void pass(bounce_t *b, uint32_t v)
{
    /* release: pairs with await's acquire */
    atomic_store_explicit(&b->word, v, memory_order_release);
    if (b->sleep)
        futex_wake(&b->word);
}

static void *echo(void *arg)
{
    bounce_t *b = arg;
    for (uint32_t i = 0; i < b->rounds; i++) {
        await(b, 2 * i + 1);
        pass(b, 2 * i + 2);
    }
    return NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void roundtrips(hb_state *s, bool sleep)
{
    while (hb_keep_running(s)) {
        bounce_t b = { .sleep = sleep, .rounds = ROUNDS };
        atomic_init(&b.word, 0);
        pthread_t t;
        if (pthread_create(&t, NULL, echo, &b) != 0) {
            hb_skip_with_error(s, "pthread_create failed");
            return;
        }
        double t0 = now_s();
        for (uint32_t i = 0; i < ROUNDS; i++) {
            pass(&b, 2 * i + 1);
            await(&b, 2 * i + 2);
        }
        double t1 = now_s();
        pthread_join(t, NULL);
        hb_set_iteration_time(s, (t1 - t0) / ROUNDS);
    }
    hb_set_items_processed(s, hb_iterations(s));
}

static void bm_cacheline(hb_state *s) { roundtrips(s, false); }
static void bm_futex(hb_state *s) { roundtrips(s, true); }

const hb_bench hb_limits_benches[] = {
    { .name = "roundtrip/cacheline", .fn = bm_cacheline, .use_manual_time = 1, .iterations = 5 },
    { .name = "roundtrip/futex", .fn = bm_futex, .use_manual_time = 1, .iterations = 5 },
};
const size_t hb_limits_nbenches = sizeof hb_limits_benches / sizeof hb_limits_benches[0];
