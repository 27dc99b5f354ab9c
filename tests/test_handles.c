/* test_handles.c - the object table (src/handles.c): ids name slots, a
 * stale or foreign id finds nothing, generations wrap without reaching 0,
 * and a stress of takers, readers and givers on several threads where no
 * slot is ever held twice and none is lost (run under TSan too). */
#include "testutil.h"
#include "handles.h"

#include <pthread.h>

typedef struct rec { uint64_t id; } rec_t;

static void test_ids_name_slots(void **state)
{
    (void)state;
    hive__handles_t t, other;
    assert_int_equal(hive__handles_open(&t, 5), HIVE_OK);
    assert_int_equal(hive__handles_open(&other, 6), HIVE_OK);
    rec_t r[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(hive__handles_take(&t, &r[i].id), HIVE_OK);
        assert_true(r[i].id != 0 && (r[i].id >> 63) == 0);
        assert_int_equal(hive__handles_slot_of(r[i].id), i);
        assert_null(hive__handles_get(&t, r[i].id));          /* not published yet */
        hive__handles_publish(&t, r[i].id, &r[i]);
        assert_ptr_equal(hive__handles_get(&t, r[i].id), &r[i]);
        assert_true(hive__handles_issued(&t, r[i].id));
        /* the same id in another table names nothing there */
        assert_null(hive__handles_get(&other, r[i].id));
        assert_false(hive__handles_issued(&other, r[i].id));
    }
    /* a slot given back comes back under a new generation: the old id is
     * stale (the caller compares the record's id) */
    uint64_t old = r[1].id;
    hive__handles_unpublish(&t, old);
    assert_null(hive__handles_get(&t, old));
    hive__handles_give(&t, old);
    rec_t again;
    assert_int_equal(hive__handles_take(&t, &again.id), HIVE_OK);
    assert_int_equal(hive__handles_slot_of(again.id), 1);
    assert_true(again.id != old);
    hive__handles_publish(&t, again.id, &again);
    rec_t *found = hive__handles_get(&t, old);
    assert_true(found == NULL || found->id != old);
    assert_true(hive__handles_issued(&t, old));             /* once handed out */
    assert_false(hive__handles_issued(&t, (uint64_t)5 << HIVE__SLOT_BITS | 1000));  /* gen 0 */
    hive__handles_close(&t);
    hive__handles_close(&other);
}

/* give_many pushes a chain in one go: every slot comes back exactly once,
 * under a new generation, and the slots given before it are still there. */
static void test_give_many(void **state)
{
    (void)state;
    hive__handles_t t;
    assert_int_equal(hive__handles_open(&t, 9), HIVE_OK);
    enum { N = 70 };
    uint64_t ids[N];
    for (int i = 0; i < N; i++)
        assert_int_equal(hive__handles_take(&t, &ids[i]), HIVE_OK);
    hive__handles_give(&t, ids[N - 1]);                    /* one before the chain */
    hive__handles_give_many(&t, ids, N - 1);
    hive__handles_give_many(&t, ids, 0);                   /* nothing: no change */
    bool seen[N] = { false };
    for (int i = 0; i < N; i++) {
        uint64_t id;
        assert_int_equal(hive__handles_take(&t, &id), HIVE_OK);
        uint32_t s = hive__handles_slot_of(id);
        assert_true(s < N);
        assert_false(seen[s]);
        seen[s] = true;
        assert_true(id != ids[s]);                         /* a new generation */
    }
    uint64_t fresh;
    assert_int_equal(hive__handles_take(&t, &fresh), HIVE_OK);
    assert_int_equal(hive__handles_slot_of(fresh), N);     /* the stack is empty again */
    hive__handles_close(&t);
}

/* The generation wraps from its largest value to 1, never to 0. */
static void test_generation_wraps(void **state)
{
    (void)state;
    hive__handles_t t;
    assert_int_equal(hive__handles_open(&t, 1), HIVE_OK);
    uint64_t id;
    assert_int_equal(hive__handles_take(&t, &id), HIVE_OK);
    hive__hslot_t *sl = hive__handles_slot(&t, id);
    sl->gen = (1u << HIVE__GEN_BITS) - 2;
    hive__handles_give(&t, id);
    assert_int_equal(hive__handles_take(&t, &id), HIVE_OK);
    assert_int_equal(id >> (HIVE__SLOT_BITS + HIVE__TAG_BITS), (1u << HIVE__GEN_BITS) - 1);
    hive__handles_give(&t, id);
    assert_int_equal(hive__handles_take(&t, &id), HIVE_OK);
    assert_int_equal(id >> (HIVE__SLOT_BITS + HIVE__TAG_BITS), 1);
    hive__handles_close(&t);
}

/* Chunks past the first are mapped as the high-water mark grows. */
static void test_grows_past_a_chunk(void **state)
{
    (void)state;
    hive__handles_t t;
    assert_int_equal(hive__handles_open(&t, 2), HIVE_OK);
    const uint32_t n = 3u << HIVE__CHUNK_BITS;
    uint64_t *ids = malloc(n * sizeof *ids);
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(hive__handles_take(&t, &ids[i]), HIVE_OK);
        assert_int_equal(hive__handles_slot_of(ids[i]), i);
        hive__handles_publish(&t, ids[i], &ids[i]);
    }
    for (uint32_t i = 0; i < n; i += 4099)
        assert_ptr_equal(hive__handles_get(&t, ids[i]), &ids[i]);
    free(ids);
    hive__handles_close(&t);
}

/* ------------------------------------------------------------ stress */

#define THREADS 8
#define HOLD    64
#define ROUNDS  (200000 / TEST_SCALE)

static hive__handles_t st;
static unsigned hold;                       /* records a thread holds at most (<= HOLD) */
static int nthreads;
static _Atomic uint32_t *owner;             /* per slot: the thread holding it + 1, or 0 */
static _Atomic uint32_t max_slots;

static void *stress(void *arg)
{
    uint32_t me = (uint32_t)(uintptr_t)arg + 1;
    rec_t recs[HOLD];                       /* records stay put; held[] lists the ones in use */
    unsigned held[HOLD], spare[HOLD], n = 0, nspare = HOLD;
    for (unsigned i = 0; i < HOLD; i++)
        spare[i] = i;
    uint64_t rng = me * 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < ROUNDS; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        if (n < hold && (n == 0 || (rng >> 62) != 0)) {
            rec_t *r = &recs[spare[--nspare]];
            if (hive__handles_take(&st, &r->id) != HIVE_OK)
                fail_msg("take: %s", hive_last_error());
            uint32_t s = hive__handles_slot_of(r->id);
            if (s >= atomic_load(&max_slots))
                fail_msg("slot %u beyond the bound", s);
            uint32_t none = 0;
            if (!atomic_compare_exchange_strong(&owner[s], &none, me))
                fail_msg("slot %u handed to thread %u while thread %u holds it", s, me, none - 1);
            hive__handles_publish(&st, r->id, r);
            held[n++] = (unsigned)(r - recs);
        } else {
            unsigned k = (unsigned)(rng % n);
            rec_t *r = &recs[held[k]];
            rec_t *seen = hive__handles_get(&st, r->id);
            if (seen != r)
                fail_msg("id %llx finds %p, not its record %p", (unsigned long long)r->id,
                         (void *)seen, (void *)r);
            hive__handles_unpublish(&st, r->id);
            atomic_store(&owner[hive__handles_slot_of(r->id)], 0);
            hive__handles_give(&st, r->id);
            spare[nspare++] = held[k];
            held[k] = held[--n];
        }
        /* readers look at slots others take and give meanwhile (the load
         * races with publish and unpublish by design; records here are not
         * RCU-protected, so the test does not read them) */
        uint64_t probe = (rng >> 20) % (nthreads * hold);
        (void)hive__handles_get(&st, ((uint64_t)1 << (HIVE__SLOT_BITS + HIVE__TAG_BITS)) |
                                         ((uint64_t)st.tag << HIVE__SLOT_BITS) | probe);
    }
    while (n > 0) {
        rec_t *r = &recs[held[--n]];
        hive__handles_unpublish(&st, r->id);
        atomic_store(&owner[hive__handles_slot_of(r->id)], 0);
        hive__handles_give(&st, r->id);
    }
    return NULL;
}

/* threads x holders: many slots in flight (64 each), or very few (3 each,
 * so the same slots go round the free stack all the time: a pop whose
 * next link went stale meanwhile, the ABA case, is caught there within a
 * few runs when the stack's tag is taken away). */
static void stress_run(int threads, unsigned holding, int rounds_scale)
{
    nthreads = threads;
    hold = holding;
    assert_int_equal(hive__handles_open(&st, 9), HIVE_OK);
    atomic_init(&max_slots, (uint32_t)(threads * holding));
    owner = calloc((size_t)threads * holding, sizeof *owner);
    pthread_t t[THREADS];
    for (int r = 0; r < rounds_scale; r++) {
        for (uintptr_t i = 0; i < (uintptr_t)threads; i++)
            assert_int_equal(pthread_create(&t[i], NULL, stress, (void *)i), 0);
        for (int i = 0; i < threads; i++)
            pthread_join(t[i], NULL);
    }
    /* every slot ever handed out is on the free stack exactly once */
    uint32_t hw = atomic_load(&st.next_slot);
    assert_true(hw <= (uint32_t)(threads * holding));
    unsigned char *seen = calloc(hw, 1);
    for (uint32_t i = 0; i < hw; i++) {
        uint64_t id;
        assert_int_equal(hive__handles_take(&st, &id), HIVE_OK);
        uint32_t s = hive__handles_slot_of(id);
        if (s >= hw)
            fail_msg("slot %u off the free stack, beyond the %u handed out", s, hw);
        if (seen[s]++)
            fail_msg("slot %u was on the free stack twice", s);
    }
    assert_int_equal(atomic_load(&st.next_slot), hw);   /* none came from beyond */
    printf("handles stress: %d threads x %d rounds x %d, holding %u, %u slots used\n", threads,
           ROUNDS, rounds_scale, holding, hw);
    free(seen);
    free(owner);
    hive__handles_close(&st);
}

static void test_stress_nothing_lost_or_doubled(void **state)
{
    (void)state;
    stress_run(4, HOLD, 1);
    stress_run(THREADS, 3, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids_name_slots),
        cmocka_unit_test(test_generation_wraps),
        cmocka_unit_test(test_give_many),
        cmocka_unit_test(test_grows_past_a_chunk),
        cmocka_unit_test(test_stress_nothing_lost_or_doubled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
