/*
 * stress/handles.c - the slot table's free stack (handles.c) with many
 * takers and batch givers at once: hive__handles_take pops one slot (or
 * carves a fresh one by the high-water fetch_add), hive__handles_give_many
 * pushes a linked run of slots with one CAS, as free_cb does for a batch.
 *
 * Contract checked: no slot is handed out twice while held (a per-slot
 * owner word claimed by CAS on every take), none is lost (at the end every
 * slot ever handed out comes off the stack exactly once, and none beyond
 * the high-water mark), and the record a take returns is its holder's
 * alone (plain writes to it race under TSan otherwise). A give_many whose
 * push were a plain store (or whose CAS lacked the stack's tag) loses runs
 * or hands a slot twice; one whose links were published without the CAS's
 * release lets a taker read a stale link, which TSan reports and the owner
 * words catch.
 */
#include "testutil.h"
#include "handles.h"

#include <pthread.h>
#include <stdlib.h>

#define THREADS 6
#define BATCH   64
#define ROUNDS  (40000 / TEST_SCALE)

static hive__handles_t t;
static _Atomic uint32_t *owner;              /* per slot: holder + 1, or 0 */
static _Atomic long bad;
static _Atomic int go;

static void *worker(void *arg)
{
    uint32_t me = (uint32_t)(uintptr_t)arg + 1;
    uint64_t ids[BATCH];
    uint64_t *recs[BATCH];
    uint64_t rng = me * 0x9e3779b97f4a7c15ull;
    while (!atomic_load(&go))
        ;
    for (int r = 0; r < ROUNDS; r++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        size_t n = 1 + (size_t)(rng >> 58);   /* 1 .. 64: singles and long runs */
        for (size_t i = 0; i < n; i++) {
            void *rec;
            if (hive__handles_take(&t, &ids[i], &rec) != HIVE_OK) {
                atomic_fetch_add(&bad, 1);
                return NULL;
            }
            uint32_t none = 0, s = hive__handles_slot_of(ids[i]);
            if (!atomic_compare_exchange_strong(&owner[s], &none, me))
                atomic_fetch_add(&bad, 1);  /* handed out while another holds it */
            /* the owner's plain write to its record (past the table's id
             * word): a record held twice is a race TSan reports */
            recs[i] = rec;
            recs[i][1] = me;
        }
        for (size_t i = 0; i < n; i++) {
            if (recs[i][1] != me || recs[i][0] != ids[i])
                atomic_fetch_add(&bad, 1);  /* written by another holder */
            atomic_store(&owner[hive__handles_slot_of(ids[i])], 0);
        }
        if (r & 1) {
            hive__handles_give_many(&t, ids, n);
        } else {
            hive__handles_give_many(&t, ids, n / 2);
            for (size_t i = n / 2; i < n; i++)
                hive__handles_give(&t, ids[i]);
        }
    }
    return NULL;
}

static void test_give_many_and_take(void **state)
{
    (void)state;
    assert_int_equal(hive__handles_open(&t, 5), HIVE_OK);
    const size_t most = (size_t)THREADS * BATCH;
    owner = calloc(most, sizeof *owner);
    pthread_t th[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker, (void *)i), 0);
    atomic_store(&go, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&bad), 0);
    uint32_t hw = atomic_load(&t.next_slot);
    assert_true(hw <= most);              /* slots came back: never more than held at once */
    unsigned char *seen = calloc(hw, 1);
    for (uint32_t i = 0; i < hw; i++) {
        uint64_t id;
        void *rec;
        assert_int_equal(hive__handles_take(&t, &id, &rec), HIVE_OK);
        uint32_t s = hive__handles_slot_of(id);
        if (s >= hw)
            fail_msg("slot %u off the free stack, beyond the %u handed out: one was lost", s, hw);
        if (seen[s]++)
            fail_msg("slot %u was on the free stack twice", s);
    }
    assert_int_equal(atomic_load(&t.next_slot), hw);
    printf("handles stress: %d threads x %d rounds of up to %d, %u slots used\n", THREADS, ROUNDS,
           BATCH, hw);
    free(seen);
    free(owner);
    hive__handles_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_give_many_and_take),
    };
    return cmocka_run_group_tests_name("handles stress", tests, NULL, NULL);
}
