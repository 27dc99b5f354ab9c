/*
 * stress/replay.c - the replay buffer under concurrent pushers, samplers and
 * priority updates, for about a second per phase.
 *
 * Every item (512 bytes) carries its producer, its counter and 62 words
 * derived from both, so a torn copy (bytes of two pushes) fails the check;
 * a reader that skips the sequence re-check, or writers of one row that do
 * not exclude each other, are caught within the first phase. Phases:
 *  - prioritized, 1000 rows (not a power of two): three pushers (one
 *    pushes batches of 8, one batches of 5, so that batches meet each
 *    other and single items on neighbouring rows and take rows whose
 *    previous key another pusher is still writing; the third pushes
 *    single items), two samplers
 *    (one on the buffer's stream, one on its own) that update the
 *    priorities of what they sampled (0 now and then);
 *  - prioritized, 4 rows: the same, but pushers lap each other on every row
 *    all the time (writers of one row must exclude each other);
 *  - uniform, 1000 rows and 4 rows: single pushes and batches of 8 and 5, which
 *    in the 4-row buffer lap themselves and wait for rows other pushes hold;
 *  - uniform with a rate limiter (one sample per insert, slack 64): the
 *    samplers check that samples never exceed inserts + 64;
 *  - keyed, uniform 1000 rows and prioritized 4 rows: one pusher alone
 *    (batches of 8 and 5 and single pushes in turn), so an item's counter
 *    is its key: the samplers check every key they are handed against
 *    its item's counter (the samplers' fast path works keys out from a
 *    watermark instead of reading them from the rows: a wrong key, or a
 *    copy of another lap's item under it, fails at once).
 * While it runs, every sampled batch is checked for order: two items of
 * one producer carry keys in the order it pushed them, and one key always
 * names one item. After each phase, with everything quiet: the inserts
 * add up; a distinct sample of the whole buffer holds exactly the newest
 * capacity keys, and of each producer exactly its newest items, one
 * each, in key order (nothing lost, doubled, torn or reordered); every
 * node of the sum tree is the sum of its children (no concurrent update
 * left a stale one); and after a quiet update of every row the total
 * equals the sum of the new leaves.
 */
#include "testutil.h"
#include "rl/replay_check.h"

#include <math.h>
#include <pthread.h>

#define PUSHERS  3
#define SAMPLERS 2
#define WORDS    64          /* 512-byte items: a wide window for a torn copy to show */
#define PHASE_MS 1000

typedef struct item { uint64_t w[WORDS]; } item_t;

static hive_replay_t *rb;
static int prioritized, limited, solo, singles;
static size_t batch_n;            /* BATCH, or the capacity if smaller */
static _Atomic int stop_flag;
static _Atomic long torn, over_limit, pushed, sampled, updated, bad_rc, reordered, miskeyed;
static uint64_t pushed_by[PUSHERS];   /* items each pusher pushed (its next counter) */

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static void fill_item(item_t *it, uint64_t producer, uint64_t counter)
{
    it->w[0] = producer;
    it->w[1] = counter;
    for (int j = 2; j < WORDS; j++)
        it->w[j] = mix(producer * 0x9E3779B97F4A7C15ull + counter * 131 + (uint64_t)j);
}

static bool item_ok(const item_t *it)
{
    if (it->w[0] >= PUSHERS)
        return false;
    for (int j = 2; j < WORDS; j++)
        if (it->w[j] != mix(it->w[0] * 0x9E3779B97F4A7C15ull + it->w[1] * 131 + (uint64_t)j))
            return false;
    return true;
}

static void *pusher(void *arg)
{
    uint64_t id = (uint64_t)(intptr_t)arg, counter = 0;
    item_t batch[8];
    long n = 0;
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        static const int turns[4] = { 8, 1, 5, 1 };   /* the solo pusher's: both paths */
        int m = solo ? turns[counter % 13 % 4] : singles || id == 2 ? 1 : id == 0 ? 8 : 5;
        if (m > 1) {                     /* 8 and 5: batches meet in one block, and straddle two */
            for (int i = 0; i < m; i++)
                fill_item(&batch[i], id, counter++);
            if (hive_replay_push_batch(rb, batch, (size_t)m) != HIVE_OK)
                atomic_fetch_add(&bad_rc, 1);
            n += m;
        } else {
            fill_item(&batch[0], id, counter++);
            if (hive_replay_push(rb, &batch[0]) != HIVE_OK)
                atomic_fetch_add(&bad_rc, 1);
            n++;
        }
    }
    atomic_fetch_add(&pushed, n);
    pushed_by[id] = counter;             /* read after the join */
    return NULL;
}

/* Items of one producer must carry keys in its push order, and a key
 * drawn twice must name the same item: the number of pairs that do not. */
static long order_faults(const item_t *items, const uint64_t *keys, size_t n)
{
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            const item_t *a = &items[i], *b = &items[j];
            if (keys[i] == keys[j])
                bad += a->w[0] != b->w[0] || a->w[1] != b->w[1];
            else if (a->w[0] == b->w[0])
                bad += (a->w[1] < b->w[1]) != (keys[i] < keys[j]);
        }
    return bad;
}

#define BATCH 32

static void *sampler(void *arg)
{
    uint64_t id = (uint64_t)(intptr_t)arg, rng = 1000 + id, prng = mix(id + 7);
    uint64_t *rngp = id == 0 ? NULL : &rng;
    item_t items[BATCH];
    uint64_t keys[BATCH];
    double w[BATCH], prio[BATCH];
    long n = 0, u = 0;
    while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
        int rc = hive_replay_sample(rb, batch_n, rngp, items, keys, w, limited ? 1000000 : 0);
        if (rc == HIVE_ETIMEDOUT && limited)
            continue;
        if (rc == HIVE_EINVAL && !limited) {        /* fewer than BATCH items so far */
            sched_yield();
            continue;
        }
        if (rc != HIVE_OK) {
            atomic_fetch_add(&bad_rc, 1);
            continue;
        }
        n += (long)batch_n;
        long bad = order_faults(items, keys, batch_n);
        if (bad != 0)
            atomic_fetch_add(&reordered, bad);
        for (size_t i = 0; i < batch_n; i++) {
            if (!item_ok(&items[i]))
                atomic_fetch_add(&torn, 1);
            if (solo && (items[i].w[0] != 0 || items[i].w[1] != keys[i]))
                atomic_fetch_add(&miskeyed, 1);
            if (!(w[i] > 0 && w[i] <= 1.0))
                atomic_fetch_add(&torn, 1);
        }
        if (limited) {
            /* samples first, inserts second: inserts only grow, and every
             * admission held samples <= inserts + 64 when it was made */
            hive_replay_stats_t s1, s2;
            hive_replay_stats(rb, &s1);
            hive_replay_stats(rb, &s2);
            if ((double)s1.samples > 1.0 * (double)s2.inserts + 64.0)
                atomic_fetch_add(&over_limit, 1);
        }
        if (prioritized) {
            for (size_t i = 0; i < batch_n; i++) {
                prng = mix(prng + 1);
                prio[i] = (prng % 16 == 0) ? 0.0 : (double)(prng % 1000) / 500.0;
            }
            int a = hive_replay_update_priorities(rb, keys, prio, batch_n);
            if (a < 0)
                atomic_fetch_add(&bad_rc, 1);
            else
                u += a;
        }
    }
    atomic_fetch_add(&sampled, n);
    atomic_fetch_add(&updated, u);
    return NULL;
}

static int by_key(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Quiet now: every row's word names the newest key claimed for it; a
 * row whose newest key a producer's run holds unwritten (a TURN word, see
 * src/rl/replay.c, "Runs of keys") keeps an older item of its own, never
 * handed out under the held key. A distinct sample of every row gives the
 * newest capacity keys, each once, but for those rows; of each producer,
 * its items in key order (and, with no held rows, exactly its newest
 * items, one each, with no gap: nothing lost, doubled, torn or
 * reordered). Under the rate limiter a sample of the whole buffer may not
 * be admitted: then the items come from the array, each with the key its
 * row must hold (checking the items, not the rows' keys). Returns the
 * rows held. */
static uint64_t check_newest(const hive_array_t *a, uint64_t cap, uint64_t inserts)
{
    item_t *items = malloc(cap * sizeof *items);
    uint64_t *keys = malloc(cap * sizeof *keys), *order = malloc(2 * cap * sizeof *order), rng = 5;
    bool *held = calloc(cap, sizeof *held);
    assert_non_null(items);
    assert_non_null(keys);
    assert_non_null(order);
    assert_non_null(held);
    uint64_t holes = 0;
    for (uint64_t k = inserts - cap; k < inserts; k++) {
        uint64_t named;
        int t = hive__replay_row_turn(rb, k % cap, &named);
        assert_true(t == 0 || t == 1);
        assert_int_equal(named, k);                                /* the newest claim's turn */
        held[k % cap] = t == 1;
        holes += t == 1;
    }
    if (!limited) {
        assert_int_equal(hive_replay_sample_ex(rb, (size_t)cap, HIVE_REPLAY_DISTINCT, &rng, items, keys,
                                               NULL, 0), HIVE_OK);
    } else {
        for (uint64_t k = inserts - cap; k < inserts; k++) {
            keys[k % cap] = k;
            items[k % cap] = ((const item_t *)a->data)[k % cap];
        }
    }
    size_t m = 0;
    for (uint64_t i = 0; i < cap; i++) {     /* (key, index) pairs of unheld rows, sorted by key */
        uint64_t row = keys[i] % cap, newest = inserts - cap + (row + cap - (inserts - cap) % cap) % cap;
        if (held[row]) {                     /* an older item, never the held key */
            assert_true(limited || keys[i] < newest);
            assert_true(item_ok(&items[i]));
            continue;
        }
        assert_int_equal(keys[i], newest);
        order[2 * m] = keys[i];
        order[2 * m + 1] = i;
        m++;
    }
    assert_int_equal(m, cap - holes);
    qsort(order, m, 2 * sizeof *order, by_key);
    uint64_t next[PUSHERS];                  /* the counter each producer's next item must have */
    bool seen[PUSHERS] = { false };
    for (size_t i = 0; i < m; i++) {
        if (i > 0)
            assert_true(order[2 * i] > order[2 * i - 2]);           /* none doubled */
        const item_t *it = &items[order[2 * i + 1]];
        assert_true(item_ok(it));
        uint64_t p = it->w[0];
        if (seen[p] && holes == 0)
            assert_int_equal(it->w[1], next[p]);                   /* in push order, no gap */
        else if (seen[p])
            assert_true(it->w[1] >= next[p]);                      /* in push order */
        seen[p] = true;
        next[p] = it->w[1] + 1;
    }
    for (int p = 0; p < PUSHERS; p++)        /* each producer's items end with its last push */
        if (seen[p] && holes == 0)
            assert_int_equal(next[p], pushed_by[p]);
    free(items);
    free(keys);
    free(order);
    free(held);
    return holes;
}

static void run_phase(hive_t *h, const char *name, hive_replay_config_t cfg)
{
    prioritized = cfg.prioritized;
    limited = cfg.samples_per_insert > 0;
    solo = name[0] == 'k';                   /* the keyed phases */
    singles = name[0] == 's';                /* every pusher pushes single items: runs of keys */
    int pushers = solo ? 1 : PUSHERS;
    batch_n = cfg.capacity < BATCH ? (size_t)cfg.capacity : BATCH;
    atomic_store(&stop_flag, 0);
    atomic_store(&pushed, 0);
    atomic_store(&sampled, 0);
    atomic_store(&updated, 0);
    assert_int_equal(hive_replay_new(h, &cfg, &rb), HIVE_OK);
    pthread_t p[PUSHERS], s[SAMPLERS];
    for (int i = 0; i < pushers; i++)
        assert_int_equal(pthread_create(&p[i], NULL, pusher, (void *)(intptr_t)i), 0);
    for (int i = 0; i < SAMPLERS; i++)
        assert_int_equal(pthread_create(&s[i], NULL, sampler, (void *)(intptr_t)i), 0);
    test_sleep_ms(PHASE_MS);
    atomic_store(&stop_flag, 1);
    for (int i = 0; i < pushers; i++)
        pthread_join(p[i], NULL);
    for (int i = 0; i < SAMPLERS; i++)
        pthread_join(s[i], NULL);

    hive_replay_stats_t st;
    assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
    printf("%s: %ld pushed, %ld sampled, %ld priority updates applied; torn %ld\n", name,
           atomic_load(&pushed), atomic_load(&sampled), atomic_load(&updated), atomic_load(&torn));
    assert_int_equal(atomic_load(&torn), 0);
    assert_int_equal(atomic_load(&bad_rc), 0);
    assert_int_equal(atomic_load(&over_limit), 0);
    assert_int_equal(atomic_load(&reordered), 0);
    assert_int_equal(atomic_load(&miskeyed), 0);
    /* claimed keys: the items pushed, and the keys runs hold (or dropped) unwritten */
    assert_true(st.inserts >= (uint64_t)atomic_load(&pushed));
    if (solo || cfg.capacity < 128)          /* no runs: one pusher, or a buffer too small */
        assert_int_equal(st.inserts, (uint64_t)atomic_load(&pushed));
    assert_true(atomic_load(&pushed) > 10000 / TEST_SCALE);
    assert_true(atomic_load(&sampled) > 1000 / TEST_SCALE);

    /* quiet now: every row untorn, holding the newest capacity keys */
    hive_array_t a;
    assert_int_equal(hive_array_view(h, hive_replay_array(rb), &a), HIVE_OK);
    for (uint64_t r = 0; r < cfg.capacity; r++)
        assert_true(item_ok((const item_t *)a.data + r));
    uint64_t holes = check_newest(&a, cfg.capacity, st.inserts);
    printf("%s: %llu keys claimed, not written; %llu rows held by runs\n", name,
           (unsigned long long)(st.inserts - (uint64_t)atomic_load(&pushed)), (unsigned long long)holes);
    assert_true(holes <= st.inserts - (uint64_t)atomic_load(&pushed));
    if (prioritized) {
        /* no node kept a sum its children no longer have */
        assert_int_equal(hive__replay_tree_check(rb), 0);
        uint64_t cap = cfg.capacity, *keys = malloc(cap * sizeof *keys);
        double *prio = malloc(cap * sizeof *prio), want = 0;
        for (uint64_t i = 0; i < cap; i++) {
            keys[i] = st.inserts - cap + i;
            prio[i] = 1.0 + (double)(i % 3);
            want += pow(prio[i], cfg.alpha);
        }
        /* a held row's update is dropped: its item is not the key's */
        assert_int_equal(hive_replay_update_priorities(rb, keys, prio, cap), (int)(cap - holes));
        assert_int_equal(hive__replay_tree_check(rb), 0);
        hive_replay_stats(rb, &st);
        printf("%s: sum tree total %.12f, leaves add up to %.12f\n", name, st.total_priority, want);
        if (holes == 0)
            assert_true(fabs(st.total_priority - want) < 1e-9 * want);
        free(keys);
        free(prio);
    }
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
}

static void test_replay_stress(void **state)
{
    (void)state;
    hive_t *h = test_engine(64u << 20, 1, NULL);
    run_phase(h, "prioritized 1000 rows", (hive_replay_config_t){
        .capacity = 1000, .item_size = sizeof(item_t), .prioritized = 1, .alpha = 0.6, .beta = 0.4,
        .seed = 1 });
    run_phase(h, "prioritized 4 rows (lapping)", (hive_replay_config_t){
        .capacity = 4, .item_size = sizeof(item_t), .prioritized = 1, .alpha = 1.0, .beta = 0.4,
        .seed = 2 });
    run_phase(h, "singles, prioritized 128 rows (runs lapping)", (hive_replay_config_t){
        .capacity = 128, .item_size = sizeof(item_t), .prioritized = 1, .alpha = 0.6, .beta = 0.4,
        .seed = 8 });
    run_phase(h, "singles, uniform 1000 rows", (hive_replay_config_t){
        .capacity = 1000, .item_size = sizeof(item_t), .seed = 9 });
    run_phase(h, "uniform 1000 rows", (hive_replay_config_t){
        .capacity = 1000, .item_size = sizeof(item_t), .seed = 4 });
    run_phase(h, "uniform 4 rows (lapping, batches of 8 and 5)", (hive_replay_config_t){
        .capacity = 4, .item_size = sizeof(item_t), .seed = 5 });
    run_phase(h, "uniform, rate limited", (hive_replay_config_t){
        .capacity = 64, .item_size = sizeof(item_t), .samples_per_insert = 1.0, .error_buffer = 64,
        .min_size_to_sample = 32, .seed = 3 });
    run_phase(h, "keyed uniform 1000 rows", (hive_replay_config_t){
        .capacity = 1000, .item_size = sizeof(item_t), .seed = 6 });
    run_phase(h, "keyed prioritized 4 rows (lapping)", (hive_replay_config_t){
        .capacity = 4, .item_size = sizeof(item_t), .prioritized = 1, .alpha = 1.0, .beta = 0.4,
        .seed = 7 });
    test_expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_stress),
    };
    return cmocka_run_group_tests_name("stress_replay", tests, NULL, NULL);
}
