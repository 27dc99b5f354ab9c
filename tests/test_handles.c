/* test_handles.c - the object table (src/handles.c): ids name slots, a
 * stale or foreign id finds nothing, generations wrap without reaching 0,
 * and a stress of takers, readers and givers on several threads where no
 * slot is ever held twice and none is lost (run under TSan too). */
#include "testutil.h"
#include "handles.h"
#include "util/fault.h"
#include "util/hugemap.h"

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

/* A record as the table lays it out (handles.h): the id word first, the
 * key at HIVE__REC_KEY, 128 bytes; the rest is the owner's. */
typedef struct rec {
    uint64_t          id;
    uint64_t          mine;         /* the owner's: the stress marks its records here */
    unsigned char     pad[HIVE__REC_KEY - 16];
    _Atomic uint32_t  key;
    unsigned char     line2[64];
} rec_t;
_Static_assert(sizeof(rec_t) == HIVE__REC_BYTES && offsetof(rec_t, key) == HIVE__REC_KEY,
               "the table's record layout");

static rec_t *take(hive__handles_t *t, uint64_t *id)
{
    void *r = NULL;
    assert_int_equal(hive__handles_take(t, id, &r), HIVE_OK);
    assert_non_null(r);
    assert_true(((rec_t *)r)->id == *id);                  /* the take writes the id word */
    return r;
}

static void test_ids_name_slots(void **state)
{
    (void)state;
    hive__handles_t t, other;
    assert_int_equal(hive__handles_open(&t, 5), HIVE_OK);
    assert_int_equal(hive__handles_open(&other, 6), HIVE_OK);
    rec_t *r[3];
    uint64_t id[3];
    for (int i = 0; i < 3; i++) {
        r[i] = take(&t, &id[i]);
        assert_true(id[i] != 0 && (id[i] >> 63) == 0);
        assert_int_equal(hive__handles_slot_of(id[i]), i);
        assert_int_equal((uintptr_t)r[i] % 64, 0);
        assert_ptr_equal(hive__handles_rec(&t, id[i]), r[i]);
        assert_null(hive__handles_get(&t, id[i]));          /* not published yet */
        hive__handles_publish(r[i]);
        assert_ptr_equal(hive__handles_get(&t, id[i]), r[i]);
        assert_true(hive__handles_issued(&t, id[i]));
        /* the same id in another table names nothing there */
        assert_null(hive__handles_rec(&other, id[i]));
        assert_null(hive__handles_get(&other, id[i]));
        assert_false(hive__handles_issued(&other, id[i]));
    }
    assert_ptr_equal(r[1], r[0] + 1);                      /* slots are consecutive records */
    /* a slot given back comes back under a new generation, in the same
     * record: the old id is stale */
    uint64_t old = id[1];
    hive__handles_unpublish(r[1]);
    assert_null(hive__handles_get(&t, old));
    hive__handles_give(&t, old);
    assert_null(hive__handles_get(&t, old));
    uint64_t again;
    rec_t *ra = take(&t, &again);
    assert_ptr_equal(ra, r[1]);
    assert_int_equal(hive__handles_slot_of(again), 1);
    assert_true(again != old);
    assert_null(hive__handles_get(&t, again));             /* taken, not yet published */
    hive__handles_publish(ra);
    assert_null(hive__handles_get(&t, old));
    assert_ptr_equal(hive__handles_get(&t, again), ra);
    assert_true(hive__handles_issued(&t, old));             /* once handed out */
    assert_false(hive__handles_issued(&t, (uint64_t)5 << HIVE__SLOT_BITS | 1000));  /* gen 0 */
    /* bit 63 (an actor's handle) is part of what the key matches */
    hive__handles_unpublish(r[2]);
    r[2]->id |= (uint64_t)1 << 63;
    hive__handles_publish(r[2]);
    assert_null(hive__handles_get(&t, id[2]));
    assert_ptr_equal(hive__handles_get(&t, id[2] | (uint64_t)1 << 63), r[2]);
    assert_null(hive__handles_get(&t, id[0] | (uint64_t)1 << 63));
    /* a slot beyond the high-water mark, in a mapped chunk: nothing */
    assert_null(hive__handles_get(&t, (id[0] & ~(uint64_t)(HIVE__MAX_SLOTS - 1)) | 77));
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
        take(&t, &ids[i]);
    hive__handles_give(&t, ids[N - 1]);                    /* one before the chain */
    hive__handles_give_many(&t, ids, N - 1);
    hive__handles_give_many(&t, ids, 0);                   /* nothing: no change */
    bool seen[N] = { false };
    for (int i = 0; i < N; i++) {
        uint64_t id;
        take(&t, &id);
        uint32_t s = hive__handles_slot_of(id);
        assert_true(s < N);
        assert_false(seen[s]);
        seen[s] = true;
        assert_true(id != ids[s]);                         /* a new generation */
    }
    uint64_t fresh;
    take(&t, &fresh);
    assert_int_equal(hive__handles_slot_of(fresh), N);     /* the stack is empty again */
    hive__handles_close(&t);
}

/* The generation (kept in the record's id word between uses) wraps from
 * its largest value to 1, never to 0. */
static void test_generation_wraps(void **state)
{
    (void)state;
    hive__handles_t t;
    assert_int_equal(hive__handles_open(&t, 1), HIVE_OK);
    uint64_t id;
    rec_t *r = take(&t, &id);
    const int gs = HIVE__SLOT_BITS + HIVE__TAG_BITS;
    r->id = (r->id & (((uint64_t)1 << gs) - 1)) | ((uint64_t)((1u << HIVE__GEN_BITS) - 2) << gs);
    hive__handles_give(&t, id);
    assert_ptr_equal(take(&t, &id), r);
    assert_int_equal(id >> gs, (1u << HIVE__GEN_BITS) - 1);
    hive__handles_publish(r);                              /* the largest generation is findable */
    assert_ptr_equal(hive__handles_get(&t, id), r);
    hive__handles_unpublish(r);
    hive__handles_give(&t, id);
    take(&t, &id);
    assert_int_equal(id >> gs, 1);
    hive__handles_close(&t);
}

static void count_each(void *rec, void *arg)
{
    (void)rec;
    (*(size_t *)arg)++;
}

/* Chunks past the first are mapped as the high-water mark grows; records
 * never move, and each visits exactly the published ones. */
static void test_grows_past_a_chunk(void **state)
{
    (void)state;
    hive__handles_t t;
    assert_int_equal(hive__handles_open(&t, 2), HIVE_OK);
    const uint32_t n = 3u << HIVE__CHUNK_BITS;
    uint64_t *ids = malloc(n * sizeof *ids);
    rec_t **recs = malloc(n * sizeof *recs);
    for (uint32_t i = 0; i < n; i++) {
        recs[i] = take(&t, &ids[i]);
        assert_int_equal(hive__handles_slot_of(ids[i]), i);
        recs[i]->mine = i;
        if (i % 3 != 0)
            hive__handles_publish(recs[i]);
    }
    for (uint32_t i = 0; i < n; i += 4099) {
        assert_ptr_equal(hive__handles_rec(&t, ids[i]), recs[i]);
        assert_ptr_equal(hive__handles_get(&t, ids[i]), i % 3 != 0 ? recs[i] : NULL);
        assert_int_equal(recs[i]->mine, i);
    }
    size_t seen = 0;
    hive__handles_each(&t, count_each, &seen);
    assert_int_equal(seen, n - (n + 2) / 3);
    free(recs);
    free(ids);
    hive__handles_close(&t);
}

/* field ("Rss", "AnonHugePages") in KiB of the mapping holding p, from
 * /proc/self/smaps; -1 if not found. */
static long vma_kb(const void *p, const char *field)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    char line[512];
    bool in = false;
    long kb = -1;
    size_t flen = strlen(field);
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {     /* a mapping's first line */
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        } else if (in && strncmp(line, field, flen) == 0 && line[flen] == ':') {
            kb = strtol(line + flen + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}

/* The frontier grows in 4 KiB pages (what is touched is what is counted)
 * and each full 2 MiB region is settled into a huge page a grace period
 * later, records unchanged (util/hugemap.h). Where the kernel refuses the
 * collapse (before Linux 6.1: EINVAL), the test says so and checks the
 * rest. */
static void test_full_regions_settle(void **state)
{
    (void)state;
    hive__handles_t t;
    assert_int_equal(hive__handles_open(&t, 3), HIVE_OK);
    const uint32_t per_region = (uint32_t)(HIVE__HUGE_PAGE / HIVE__REC_BYTES);
    const uint32_t n = 2 * per_region + 100;     /* two full regions and 100 records */
    rec_t **recs = malloc(n * sizeof *recs);
    unsigned long refused0, refused1;
    hive__rcu_barrier();                          /* earlier tests' settles: done first */
    hive__settle_drain();
    unsigned long settled0 = hive__settle_count(&refused0, NULL);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t id;
        recs[i] = take(&t, &id);
        recs[i]->mine = i;
    }
    hive__rcu_barrier();                          /* the settles are with the settler */
    hive__settle_drain();                         /* and it has run them */
    int err = 0;
    unsigned long settled = hive__settle_count(&refused1, &err) - settled0;
    assert_int_equal(settled + (refused1 - refused0), 2);   /* one per full region, no more */
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(recs[i]->mine, i);       /* a collapse moves nothing a program sees */
    /* the frontier region: small pages, the 100 records' four of them */
    const void *frontier = recs[n - 1];
    assert_int_equal(vma_kb(frontier, "AnonHugePages"), 0);
    long rss = vma_kb(frontier, "Rss");
    if (rss < 0 || rss > 16)
        fail_msg("the frontier holds %ld KiB for 100 records of 128 bytes (16 KiB of pages)", rss);
    if (settled == 2) {
        long huge = vma_kb(recs[0], "AnonHugePages");
        if (huge < 4096)
            fail_msg("two settled regions, but %ld KiB of huge pages hold them", huge);
        printf("settle: 2 full regions collapsed (%ld KiB of huge pages), the frontier in %ld KiB "
               "of small pages\n", huge, rss);
    } else {
        printf("settle: the kernel refused %lu collapses (errno %d); regions stay in small pages\n",
               refused1 - refused0, err);
    }
    free(recs);
    hive__handles_close(&t);
}

/* The collapse runs on the settler, not on the call_rcu thread: while a
 * collapse copies its 2 MiB no deferred free may wait behind it (a store
 * growing under puts and releases would find no slot freed and grow on). */
static _Atomic int cb_tid;

static void note_tid(struct rcu_head *head)
{
    hive__rcu_callback_begin();
    atomic_store(&cb_tid, (int)gettid());
    free(head);
}

static void test_settles_leave_the_call_rcu_thread(void **state)
{
    (void)state;
    hive__handles_t t;
    assert_int_equal(hive__handles_open(&t, 3), HIVE_OK);
    const uint32_t per_region = (uint32_t)(HIVE__HUGE_PAGE / HIVE__REC_BYTES);
    for (uint32_t i = 0; i < per_region; i++) {   /* one full region: one settle */
        uint64_t id;
        take(&t, &id);
    }
    struct rcu_head *head = malloc(sizeof *head);
    assert_non_null(head);
    hive__rcu_thread();
    hive__call_rcu(head, note_tid);
    hive__rcu_barrier();
    hive__settle_drain();
    int settler = hive__settle_last_tid();
    assert_true(settler != 0);
    assert_true(atomic_load(&cb_tid) != 0);
    if (settler == atomic_load(&cb_tid))
        fail_msg("the settle ran on the call_rcu thread (tid %d)", settler);
    assert_true(settler != (int)gettid());
    hive__handles_close(&t);
}

/* A fresh page of the frontier is written first, never read first: a
 * read maps the shared zero page, and the write after it copies it and
 * flushes the old entry from every CPU's TLB (an IPI each: ~18 us a page
 * on a KVM guest, issue 10). So taking fresh slots costs one page fault a
 * page (32 records), not two. The thread's own minor faults, counted
 * around the takes (it failed with 543 for 256 pages before); the
 * records' ids are checked once all are taken. */
static void test_fresh_pages_fault_once(void **state)
{
    (void)state;
    hive__handles_t t;
    assert_int_equal(hive__handles_open(&t, 4), HIVE_OK);
    enum { PAGES = 256, PER_PAGE = 4096 / HIVE__REC_BYTES, N = PAGES * PER_PAGE };
    static uint64_t ids[N];
    static rec_t *recs[N];
    struct rusage ru0, ru1;
    memset(ids, 0xff, sizeof ids);               /* the test's own pages before the count */
    memset(recs, 0xff, sizeof recs);
    assert_int_equal(getrusage(RUSAGE_THREAD, &ru0), 0);
    for (uint32_t i = 0; i < N; i++) {
        void *r;
        if (hive__handles_take(&t, &ids[i], &r) != HIVE_OK)
            fail_msg("take %u: %s", i, hive_last_error());
        recs[i] = r;
    }
    assert_int_equal(getrusage(RUSAGE_THREAD, &ru1), 0);
    long faults = ru1.ru_minflt - ru0.ru_minflt;
    printf("fresh slots: %ld page faults for %d pages of records\n", faults, (int)PAGES);
    /* ASan's shadow pages beside them; TSan's shadow (several bytes of it
     * a byte written) faults on every record, so it checks the ids only */
#if !defined(__SANITIZE_THREAD__)
    if (faults > PAGES + PAGES / 2)
        fail_msg("%ld page faults for %d fresh pages: a page read before its first write "
                 "faults twice", faults, (int)PAGES);
#endif
    for (uint32_t i = 0; i < N; i++) {
        assert_true(recs[i]->id == ids[i]);
        assert_int_equal(hive__handles_slot_of(ids[i]), i);
        assert_ptr_equal(hive__handles_rec(&t, ids[i]), recs[i]);
    }
    /* a fresh slot's first id and a reused slot's next one differ */
    hive__handles_give(&t, ids[0]);
    uint64_t again;
    rec_t *r0 = take(&t, &again);
    assert_ptr_equal(r0, recs[0]);
    assert_true(again != ids[0] && hive__handles_slot_of(again) == 0);
    hive__handles_close(&t);
}

/* A chunk that cannot be mapped: the take that needed it fails with
 * HIVE_ENOMEM and a sentence, its slot stays a hole, and the next take maps
 * the chunk and goes on. */
static void test_chunk_map_fails(void **state)
{
    (void)state;
    hive__handles_t t;
    assert_int_equal(hive__handles_open(&t, 3), HIVE_OK);
    const uint32_t n = 1u << HIVE__CHUNK_BITS;             /* the first chunk, full */
    uint64_t id;
    for (uint32_t i = 0; i < n; i++)
        take(&t, &id);
    void *rec = NULL;
    atomic_store(&hive__fault_countdown, 1);
    assert_int_equal(hive__handles_take(&t, &id, &rec), HIVE_ENOMEM);
    atomic_store(&hive__fault_countdown, 0);
    assert_non_null(strstr(hive_last_error(), "cannot map records 131072.."));
    rec_t *r = take(&t, &id);
    assert_int_equal(hive__handles_slot_of(id), n + 1);    /* slot n is the hole */
    hive__handles_publish(r);
    assert_ptr_equal(hive__handles_get(&t, id), r);
    assert_ptr_equal(hive__handles_rec(&t, id), (rec_t *)hive__handles_rec(&t, id - 1) + 1);
    size_t seen = 0;
    hive__handles_each(&t, count_each, &seen);
    assert_int_equal(seen, 1);
    hive__handles_close(&t);
}

/* 2^30 slots are the most a table hands out: a take past them fails with
 * HIVE_ENOMEM and its sentence (the high-water mark set there by hand: the
 * chunks in between are never mapped, and each skips them). */
static void test_slot_limit(void **state)
{
    (void)state;
    hive__handles_t t;
    assert_int_equal(hive__handles_open(&t, 4), HIVE_OK);
    uint64_t id;
    rec_t *r = take(&t, &id);
    hive__handles_publish(r);
    atomic_store(&t.next_slot, HIVE__MAX_SLOTS + 1);       /* as a racing take leaves it */
    void *rec;
    assert_int_equal(hive__handles_take(&t, &id, &rec), HIVE_ENOMEM);
    assert_non_null(strstr(hive_last_error(), "2^30 = 1073741824 objects are live"));
    assert_int_equal(atomic_load(&t.next_slot), HIVE__MAX_SLOTS + 1);
    size_t seen = 0;
    hive__handles_each(&t, count_each, &seen);
    assert_int_equal(seen, 1);
    hive__handles_close(&t);
}

/* A cache (handles.h): chains given to it come back to its owner in chain
 * order under new generations; empty, it takes from the shared stack and
 * doubles its limit; givers see its room; what it holds goes back to the
 * shared stack whole. */
static void test_cache(void **state)
{
    (void)state;
    hive__handles_t t;
    assert_int_equal(hive__handles_open(&t, 3), HIVE_OK);
    hive__handles_cache_t c;
    memset(&c, 0, sizeof c);
    enum { N = 10 };
    uint64_t ids[N];
    rec_t *r[N];
    for (int i = 0; i < N; i++)
        r[i] = take(&t, &ids[i]);
    /* two chains: 0..3, then 4..9 (pushed later: taken first) */
    for (int i = 0; i < 3; i++)
        hive__handles_link(r[i], ids[i + 1]);
    hive__handles_give_cached(&t, &c, ids[0], r[3], 4);
    for (int i = 4; i < N - 1; i++)
        hive__handles_link(r[i], ids[i + 1]);
    hive__handles_give_cached(&t, &c, ids[4], r[N - 1], N - 4);
    assert_true(hive__handles_cache_room(&c));
    static const int order[N] = { 4, 5, 6, 7, 8, 9, 0, 1, 2, 3 };
    for (int i = 0; i < N; i++) {
        uint64_t id;
        void *v;
        assert_int_equal(hive__handles_take_cached(&t, &c, &id, &v), HIVE_OK);
        assert_ptr_equal(v, r[order[i]]);
        assert_int_equal(hive__handles_slot_of(id), order[i]);
        assert_true(id != ids[order[i]]);                  /* a new generation */
        ids[order[i]] = id;
    }
    assert_int_equal(atomic_load(&c.nlocal), 0);
    assert_int_equal(atomic_load(&c.limit), 0);
    /* empty: the shared stack (one slot on it), then a fresh slot; the
     * limit doubles at each */
    hive__handles_give(&t, ids[7]);
    uint64_t id;
    void *v;
    assert_int_equal(hive__handles_take_cached(&t, &c, &id, &v), HIVE_OK);
    assert_ptr_equal(v, r[7]);
    assert_int_equal(atomic_load(&c.limit), 2 * HIVE__CACHE_MIN);
    assert_int_equal(hive__handles_take_cached(&t, &c, &id, &v), HIVE_OK);
    assert_int_equal(hive__handles_slot_of(id), N);
    assert_int_equal(atomic_load(&c.limit), 4 * HIVE__CACHE_MIN);
    for (int k = 0; k < 20; k++)                           /* up to the most, no further */
        assert_int_equal(hive__handles_take_cached(&t, &c, &id, &v), HIVE_OK);
    assert_int_equal(atomic_load(&c.limit), HIVE__CACHE_MAX);
    /* room: givers stop at the limit */
    atomic_store(&c.limit, 8);                             /* below the least: the least counts */
    atomic_store(&c.ninbox, (int32_t)HIVE__CACHE_MIN - 1);
    assert_true(hive__handles_cache_room(&c));
    atomic_store(&c.nlocal, 1);
    assert_false(hive__handles_cache_room(&c));
    atomic_store(&c.nlocal, -5);                           /* a count behind its gives */
    assert_true(hive__handles_cache_room(&c));
    atomic_store(&c.ninbox, 0);
    atomic_store(&c.nlocal, 0);
    /* everything held goes back whole: 3 on the local list (a chain taken
     * from the inbox, one taken off it), 2 in the inbox */
    for (int i = 0; i < 3; i++)
        hive__handles_link(r[i], ids[i + 1]);
    hive__handles_give_cached(&t, &c, ids[0], r[3], 4);
    assert_int_equal(hive__handles_take_cached(&t, &c, &id, &v), HIVE_OK);
    assert_ptr_equal(v, r[0]);
    hive__handles_link(r[5], ids[6]);
    hive__handles_give_cached(&t, &c, ids[5], r[6], 2);
    hive__handles_cache_return_local(&t, &c);
    assert_int_equal(atomic_load(&c.local), 0);
    hive__handles_cache_return_local(&t, &c);              /* nothing: no change */
    hive__handles_cache_return_inbox(&t, &c);
    assert_int_equal(atomic_load(&c.inbox), 0);
    hive__handles_cache_return_inbox(&t, &c);
    bool seen[N] = { false };
    for (int i = 0; i < 5; i++) {
        take(&t, &id);
        uint32_t s = hive__handles_slot_of(id);
        assert_true(s == 1 || s == 2 || s == 3 || s == 5 || s == 6);
        assert_false(seen[s]);
        seen[s] = true;
    }
    take(&t, &id);
    assert_true(hive__handles_slot_of(id) > N);           /* the stack is empty again */
    hive__handles_close(&t);
}

/* ------------------------------------------------------------ cache stress
 * Owners take from their caches (and the shared stack when empty), hold a
 * few records, and release them in linked chains handed to a giver thread
 * (free_cb's part), which gives each chain to its owner's cache while it
 * has room, else to the shared stack, and now and then takes an inbox
 * back (store.c's reclaim after an owner left). Owners now and then give
 * everything they cache back (an exit). A slot held by two at once, or one
 * lost or doubled on the way, fails. */
#define COWNERS   3
#define CBATCH    8
#define CSLOTS    (1u << 20)
#define CROUNDS   (50000 / TEST_SCALE)

static hive__handles_t ct;
static hive__handles_cache_t ccache[COWNERS];
static _Atomic uint32_t *cowner;
static pthread_mutex_t cq_lock = PTHREAD_MUTEX_INITIALIZER;
static struct chain { uint64_t first; rec_t *last; uint32_t n, home; } cq[4096];
static unsigned cq_head, cq_len;
static _Atomic int cowners_left;

static void *cache_owner(void *arg)
{
    uint32_t me = (uint32_t)(uintptr_t)arg;
    rec_t *held[CBATCH];
    uint64_t ids[CBATCH];
    for (int i = 0; i < CROUNDS; i++) {
        for (unsigned k = 0; k < CBATCH; k++) {
            void *v;
            if (hive__handles_take_cached(&ct, &ccache[me], &ids[k], &v) != HIVE_OK)
                fail_msg("take: %s", hive_last_error());
            uint32_t s = hive__handles_slot_of(ids[k]), none = 0;
            if (s >= CSLOTS || !atomic_compare_exchange_strong(&cowner[s], &none, me + 1))
                fail_msg("slot %u handed to owner %u while %u holds it", s, me, none);
            held[k] = v;
            held[k]->mine = (uint64_t)me << 32 | (uint32_t)i;   /* plain: TSan sees a double */
            memset(held[k]->line2, (int)me, sizeof held[k]->line2);
        }
        for (unsigned k = 0; k < CBATCH; k++) {
            if (held[k]->mine >> 32 != me || held[k]->line2[7] != (unsigned char)me)
                fail_msg("a record owner %u holds was written by another", me);
            atomic_store(&cowner[hive__handles_slot_of(ids[k])], 0);
            if (k + 1 < CBATCH)
                hive__handles_link(held[k], ids[k + 1]);
        }
        for (;;) {
            pthread_mutex_lock(&cq_lock);   /* the queue orders the links before the giver */
            bool room = cq_len < sizeof cq / sizeof cq[0];
            if (room)
                cq[(cq_head + cq_len++) % (sizeof cq / sizeof cq[0])] =
                    (struct chain){ ids[0], held[CBATCH - 1], CBATCH, me };
            pthread_mutex_unlock(&cq_lock);
            if (room)
                break;
            sched_yield();
        }
        if (i % 997 == 996) {               /* an exit: the next "thread" starts empty */
            hive__handles_cache_return_local(&ct, &ccache[me]);
            hive__handles_cache_return_inbox(&ct, &ccache[me]);
        }
    }
    atomic_fetch_sub(&cowners_left, 1);
    return NULL;
}

static void *cache_giver(void *arg)
{
    (void)arg;
    unsigned n = 0;
    for (;;) {
        pthread_mutex_lock(&cq_lock);
        bool got = cq_len != 0;
        struct chain c = got ? cq[cq_head] : (struct chain){ 0, NULL, 0, 0 };
        if (got) {
            cq_head = (cq_head + 1) % (sizeof cq / sizeof cq[0]);
            cq_len--;
        }
        pthread_mutex_unlock(&cq_lock);
        if (!got) {
            if (atomic_load(&cowners_left) == 0)
                return NULL;
            sched_yield();
            continue;
        }
        hive__handles_cache_t *cc = &ccache[c.home];
        if (hive__handles_cache_room(cc))
            hive__handles_give_cached(&ct, cc, c.first, c.last, c.n);
        else
            hive__handles_give_linked(&ct, c.first, c.last);
        if (++n % 13 == 0)
            hive__handles_cache_return_inbox(&ct, &ccache[n % COWNERS]);
    }
}

static void test_cache_stress(void **state)
{
    (void)state;
    assert_int_equal(hive__handles_open(&ct, 4), HIVE_OK);
    memset(ccache, 0, sizeof ccache);
    cowner = calloc(CSLOTS, sizeof *cowner);
    atomic_store(&cowners_left, COWNERS);
    pthread_t t[COWNERS + 1];
    for (uintptr_t i = 0; i < COWNERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, cache_owner, (void *)i), 0);
    assert_int_equal(pthread_create(&t[COWNERS], NULL, cache_giver, NULL), 0);
    for (int i = 0; i <= COWNERS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < COWNERS; i++) {
        hive__handles_cache_return_local(&ct, &ccache[i]);
        hive__handles_cache_return_inbox(&ct, &ccache[i]);
    }
    /* every slot handed out is on the shared stack exactly once */
    uint32_t hw = atomic_load(&ct.next_slot);
    unsigned char *seen = calloc(hw, 1);
    for (uint32_t i = 0; i < hw; i++) {
        uint64_t id;
        take(&ct, &id);
        uint32_t s = hive__handles_slot_of(id);
        if (s >= hw || seen[s]++)
            fail_msg("slot %u (of %u) %s", s, hw, s >= hw ? "beyond those handed out" : "twice");
    }
    assert_int_equal(atomic_load(&ct.next_slot), hw);
    printf("cache stress: %d owners x %d batches of %d, %u slots used\n", COWNERS, CROUNDS,
           CBATCH, hw);
    free(seen);
    free(cowner);
    hive__handles_close(&ct);
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
    rec_t *held[HOLD];
    uint64_t ids[HOLD];
    unsigned n = 0;
    uint64_t rng = me * 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < ROUNDS; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        if (n < hold && (n == 0 || (rng >> 62) != 0)) {
            void *v;
            if (hive__handles_take(&st, &ids[n], &v) != HIVE_OK)
                fail_msg("take: %s", hive_last_error());
            rec_t *r = v;
            uint32_t s = hive__handles_slot_of(ids[n]);
            if (s >= atomic_load(&max_slots))
                fail_msg("slot %u beyond the bound", s);
            uint32_t none = 0;
            if (!atomic_compare_exchange_strong(&owner[s], &none, me))
                fail_msg("slot %u handed to thread %u while thread %u holds it", s, me, none - 1);
            if (r != hive__handles_rec(&st, ids[n]) || r->id != ids[n])
                fail_msg("slot %u: the take's record is not the slot's", s);
            /* the owner's plain writes: a record handed to two threads at
             * once is a data race TSan reports, and the mark a mismatch */
            r->mine = (uint64_t)me << 32 | (uint32_t)i;
            memset(r->line2, (int)me, sizeof r->line2);
            hive__handles_publish(r);
            held[n++] = r;
        } else {
            unsigned k = (unsigned)(rng % n);
            rec_t *r = held[k];
            uint64_t id = ids[k];
            rec_t *seen = hive__handles_get(&st, id);
            if (seen != r)
                fail_msg("id %llx finds %p, not its record %p", (unsigned long long)id,
                         (void *)seen, (void *)r);
            if (r->mine >> 32 != me || r->line2[63] != (unsigned char)me)
                fail_msg("record of slot %u: thread %llu wrote it while thread %u held it",
                         hive__handles_slot_of(id), (unsigned long long)(r->mine >> 32), me);
            hive__handles_unpublish(r);
            if (hive__handles_get(&st, id) != NULL)
                fail_msg("id %llx still found after its unpublish", (unsigned long long)id);
            atomic_store(&owner[hive__handles_slot_of(id)], 0);
            hive__handles_give(&st, id);
            held[k] = held[--n];
            ids[k] = ids[n];
        }
        /* finders look at slots others take, publish and give meanwhile
         * (the key's load races with all of them by design; a finder reads
         * nothing else before its key matches, and the records here are
         * not RCU-protected, so the test reads none it does not hold) */
        uint64_t probe = (rng >> 20) % (nthreads * hold);
        (void)hive__handles_get(&st, ((uint64_t)1 << (HIVE__SLOT_BITS + HIVE__TAG_BITS)) |
                                         ((uint64_t)st.tag << HIVE__SLOT_BITS) | probe);
    }
    while (n > 0) {
        n--;
        hive__handles_unpublish(held[n]);
        atomic_store(&owner[hive__handles_slot_of(ids[n])], 0);
        hive__handles_give(&st, ids[n]);
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
        take(&st, &id);
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
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_cache_stress),
        cmocka_unit_test(test_grows_past_a_chunk),
        cmocka_unit_test(test_full_regions_settle),
        cmocka_unit_test(test_settles_leave_the_call_rcu_thread),
        cmocka_unit_test(test_fresh_pages_fault_once),
        cmocka_unit_test(test_chunk_map_fails),
        cmocka_unit_test(test_slot_limit),
        cmocka_unit_test(test_stress_nothing_lost_or_doubled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
