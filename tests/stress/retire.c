/*
 * stress/retire.c - the store's retire lists (store.c: a worker's, and the
 * user lists user threads release into) with pushers and drainers at once.
 *
 * Releasers (more threads than there are shards, all alive at once, so the
 * last shard's list and counts are shared by concurrent pushers and its
 * threads take from the shared free stack while the others take from their
 * caches; and tasks on the workers, which push on their workers' lists)
 * put and release 8-byte objects, each checked on a get before its
 * release. Drainers meanwhile take every list (hive__store_drain,
 * hive_store_stats, both flushing). A drop hook counts every record freed.
 * Releasers exit while free_cb gives chains back to their caches (the
 * exit gives a cache to the shared stack; a chain given after the exit
 * goes there too).
 *
 * Contract checked: every released record is freed exactly once. A lost
 * record (a push that overwrote the head instead of its CAS, a flush that
 * dropped a chain) leaves drops below nputs and objects above 0 after the
 * final drain; a record freed twice (two drainers taking one chain: a load
 * and a store in place of the exchange) shows as drops above nputs, as
 * free_cb's count check, a slot pushed twice on the table's free stack
 * or caches (two objects in one record), or a reused slot whose get finds
 * another payload. At the end every slot is free exactly once: on the
 * shared stack or in the cache of a thread still alive (none stays with a
 * thread that ended).
 */
#include "testutil.h"
#include "hive_impl.h"

#include <pthread.h>
#include <stdlib.h>

#define RELEASERS (HIVE__SHARDS + 4)
#define DRAINERS  2
#define PER_THREAD (40000 / TEST_SCALE)
#define TASKS     (64 / TEST_SCALE + 4)

static hive_t *h;
static _Atomic uint64_t drops, nputs;
static _Atomic int stop_drainers;
static _Atomic long bad;

static void count_drop(struct hive *hh, hive__obj_t *o, bool closing)
{
    (void)hh;
    (void)o;
    (void)closing;
    atomic_fetch_add_explicit(&drops, 1, memory_order_relaxed);
}

/* put, get (the payload must be ours), release; n times */
static long churn(uint64_t tag, long n)
{
    long wrong = 0;
    for (long i = 0; i < n; i++) {
        uint64_t v = tag << 32 | (uint64_t)i;
        hive_ref_t r;
        if (hive_put(h, &v, sizeof v, &r) != HIVE_OK) {
            wrong++;
            continue;
        }
        const void *p;
        size_t sz;
        if (hive_get(h, r, 0, &p, &sz) != HIVE_OK || sz != sizeof v || memcmp(p, &v, sizeof v) != 0)
            wrong++;
        if (hive_release(h, r) != HIVE_OK)
            wrong++;
    }
    atomic_fetch_add(&nputs, (uint64_t)n);
    return wrong;
}

static pthread_barrier_t all_in;   /* every releaser has its shard (or shares the last) */

static void *releaser(void *arg)
{
    long wrong = churn((uint64_t)(uintptr_t)arg << 20, 1);
    pthread_barrier_wait(&all_in);
    atomic_fetch_add(&bad, wrong + churn((uint64_t)(uintptr_t)arg, PER_THREAD));
    return NULL;
}

static int churn_task(hive_ctx_t *ctx)
{
    uint64_t tag;
    memcpy(&tag, hive_arg(ctx, 0, NULL), sizeof tag);
    atomic_fetch_add(&bad, churn(tag, PER_THREAD / 16));
    return hive_return(ctx, &tag, sizeof tag);
}

static void *drainer(void *arg)
{
    bool stats = (uintptr_t)arg & 1;
    while (!atomic_load(&stop_drainers)) {
        if (stats) {
            hive_store_stats_t st;
            hive_store_stats(h, &st);
        } else {
            hive__store_drain(h);
        }
    }
    return NULL;
}

/* Mark the free list from slot s1 - 1 on in seen[]; the slots counted. */
static uint32_t walk_free(hive__handles_t *t, uint32_t s1, unsigned char *seen, uint32_t n,
                          const char *what)
{
    uint32_t count = 0;
    for (; s1 != 0; count++) {
        uint32_t s = s1 - 1;
        if (s >= n || seen[s] || count >= n)
            fail_msg("%s: slot %u (of %u) %s after %u slots", what, s, n,
                     s >= n ? "beyond the high-water mark" : "twice", count);
        seen[s] = 1;
        hive__obj_t *o = hive__handles_rec(t, (uint64_t)t->tag << HIVE__SLOT_BITS | s);
        s1 = atomic_load_explicit(&o->hkey, memory_order_relaxed);
    }
    return count;
}

/* With the store empty and quiet, every slot ever handed out is free
 * exactly once, on the table's free stack or in a cache: the chains the
 * flushers linked and free_cb pushed whole lost no slot, doubled none,
 * made no cycle. Only shards of live threads (this one, the workers, the
 * call_rcu thread) may hold slots: an ended thread's went to the stack. */
static void check_free_stack(void)
{
    hive__handles_t *t = &h->store.table;
    uint32_t n = atomic_load(&t->next_slot);
    unsigned char *seen = calloc(n, 1);
    assert_non_null(seen);
    uint32_t count = walk_free(t, (uint32_t)atomic_load(&t->free_head), seen, n, "free stack");
    uint32_t cached = 0, holders = 0;
    for (unsigned i = 0; i <= HIVE__SHARDS; i++) {
        hive__handles_cache_t *c = &h->store.shards[i].cache;
        uint32_t k = walk_free(t, atomic_load_explicit(&c->local, memory_order_relaxed), seen, n,
                               "a cache") +
                     walk_free(t, atomic_load(&c->inbox), seen, n, "a cache's inbox");
        if (k != 0 && !hive__store_shard_claimed(i))
            fail_msg("shard %u holds %u free slots with no thread to take them", i, k);
        cached += k;
        holders += k != 0;
    }
    free(seen);
    printf("retire stress: %u slots handed out, %u on the free stack, %u in %u caches\n", n, count,
           cached, holders);
    if (count + cached != n)
        fail_msg("free stack and caches: %u of %u slots", count + cached, n);
}

/* hook: a drop hook on blobs (free_cb walks every chain), or none (the
 * chains of inline blobs go back whole, their records untouched) */
static void every_record_freed_once(bool hook)
{
    atomic_store(&drops, 0);
    atomic_store(&nputs, 0);
    atomic_store(&stop_drainers, 0);
    h = test_engine(256u << 20, 2, NULL);
    if (hook)
        hive__store_on_drop(h, HIVE__BLOB, count_drop);   /* before any blob exists */
    pthread_t rel[RELEASERS], dr[DRAINERS];
    pthread_barrier_init(&all_in, NULL, RELEASERS);
    for (uintptr_t i = 0; i < DRAINERS; i++)
        assert_int_equal(pthread_create(&dr[i], NULL, drainer, (void *)i), 0);
    for (uintptr_t i = 0; i < RELEASERS; i++)
        assert_int_equal(pthread_create(&rel[i], NULL, releaser, (void *)(i + 1)), 0);
    hive_ref_t res[TASKS];
    for (unsigned i = 0; i < TASKS; i++) {
        uint64_t tag = 1000 + i;
        hive_arg_t a = HIVE_VAL(tag);
        assert_int_equal(hive_submit(h, churn_task, &a, 1, NULL, &res[i]), HIVE_OK);
    }
    for (unsigned i = 0; i < TASKS; i++) {
        const void *p;
        test_get_ok(h, res[i], -1, &p, NULL);
        assert_int_equal(hive_release(h, res[i]), HIVE_OK);
    }
    for (int i = 0; i < RELEASERS; i++)
        pthread_join(rel[i], NULL);
    pthread_barrier_destroy(&all_in);
    atomic_store(&stop_drainers, 1);
    for (int i = 0; i < DRAINERS; i++)
        pthread_join(dr[i], NULL);
    test_expect_empty_store(h);
    assert_int_equal(atomic_load(&bad), 0);
    /* the task results are blobs too */
    uint64_t want = atomic_load(&nputs) + TASKS, got = atomic_load(&drops);
    printf("retire stress: %d releasers, %d tasks, %d drainers: %llu records, %llu freed%s\n",
           RELEASERS, TASKS, DRAINERS, (unsigned long long)want, (unsigned long long)got,
           hook ? "" : " (no hook: not counted)");
    if (hook && got != want)
        fail_msg("%llu records released, %llu freed", (unsigned long long)want,
                 (unsigned long long)got);
    check_free_stack();
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_every_record_freed_once(void **state)
{
    (void)state;
    every_record_freed_once(true);
}

static void test_every_record_freed_once_unhooked(void **state)
{
    (void)state;
    every_record_freed_once(false);
}

/* Threads that released fewer records than a batch and ended: their records
 * wait on the engine's user lists, and with no drain at all the store
 * still comes back to 0 objects and 0 bytes (stats flushes the lists; the
 * frees follow a grace period later). */
static void *release_a_few(void *arg)
{
    long wrong = churn((uint64_t)(uintptr_t)arg, HIVE__RETIRE_BATCH / 2 + 3);
    atomic_fetch_add(&bad, wrong);
    return NULL;
}

static void test_ended_threads_leave_nothing(void **state)
{
    (void)state;
    h = test_engine(64u << 20, 1, NULL);
    pthread_t t[RELEASERS];
    for (uintptr_t i = 0; i < RELEASERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, release_a_few, (void *)(i + 1)), 0);
    for (int i = 0; i < RELEASERS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&bad), 0);
    hive_store_stats_t st;
    WAIT_UNTIL((hive_store_stats(h, &st), st.objects == 0 && st.used == 0), 10000);
    for (unsigned i = 0; i <= HIVE__SHARDS; i++)
        assert_null(atomic_load_explicit(&h->store.shards[i].head, memory_order_relaxed));
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_record_freed_once),
        cmocka_unit_test(test_every_record_freed_once_unhooked),
        cmocka_unit_test(test_ended_threads_leave_nothing),
    };
    return cmocka_run_group_tests_name("retire stress", tests, NULL, NULL);
}
