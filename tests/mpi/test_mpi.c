/*
 * test_mpi.c - the MPI layer (libhive-mpi.a) across ranks: attach, global
 * handles, remote calls (exactly once, in order, priorities, failure and
 * kill codes), refs passed through ranks, remote gets of 0 B .. 64 MiB,
 * name lookup, and detach. Run under mpirun with 2 and 4 ranks
 * (tools/run-mpi-tests.sh); every test is collective: every rank runs it.
 */
#include "testutil.h"
#include "hive/mpi.h"
#include "sched.h"
#include "util/fault.h"

static hive_t *h;
static int rank, size;

/* ------------------------------------------------------------ actor class */

#define LOG_MAX 4096
typedef struct logger {
    int64_t last[64];          /* per caller rank: the last sequence number seen */
    int64_t count[64];
    int32_t order[LOG_MAX];    /* tags recorded by "rec", in the order they ran */
    int     norder;
} logger_t;

/* seq(caller, n): must come in order per caller; returns n * 2 */
static int m_seq(void *self, hive_ctx_t *ctx)
{
    logger_t *l = self;
    const int32_t *a = hive_arg(ctx, 0, NULL);
    int caller = a[0], n = a[1];
    if (caller < 0 || caller >= 64 || n != l->last[caller] + 1)
        return 1;              /* out of order or twice: fails the call */
    l->last[caller] = n;
    l->count[caller]++;
    int64_t r = (int64_t)n * 2;
    return hive_return(ctx, &r, sizeof r);
}

/* counts: the per-caller counts */
static int m_counts(void *self, hive_ctx_t *ctx)
{
    logger_t *l = self;
    return hive_return(ctx, l->count, sizeof l->count);
}

/* gate(target): wait until this rank has served target calls */
static int m_gate(void *self, hive_ctx_t *ctx)
{
    (void)self;
    const uint64_t *target = hive_arg(ctx, 0, NULL);
    hive_mpi_stats_t st;
    uint64_t deadline = test_now_ns() + 30000000000ull;
    do {
        if (hive_mpi_stats(hive_engine(ctx), &st) != HIVE_OK || test_now_ns() > deadline)
            return 1;
        test_sleep_ms(1);
    } while (st.calls_served < *target);
    return 0;
}

/* rec(tag): record the tag */
static int m_rec(void *self, hive_ctx_t *ctx)
{
    logger_t *l = self;
    const int32_t *t = hive_arg(ctx, 0, NULL);
    if (l->norder < LOG_MAX)
        l->order[l->norder++] = *t;
    return 0;
}

static int m_order(void *self, hive_ctx_t *ctx)
{
    logger_t *l = self;
    return hive_return(ctx, l->order, (size_t)l->norder * sizeof(int32_t));
}

/* sum(ref): the byte sum of the ref argument's payload, and its size */
static int m_sum(void *self, hive_ctx_t *ctx)
{
    (void)self;
    size_t n = 0;
    const unsigned char *p = hive_arg(ctx, 0, &n);
    uint64_t r[2] = { 0, n };
    for (size_t i = 0; i < n; i++)
        r[0] += p[i];
    return hive_return(ctx, r, sizeof r);
}

/* all(...): the byte sum of every argument's payload, and how many there were */
static int m_all(void *self, hive_ctx_t *ctx)
{
    (void)self;
    uint64_t r[2] = { 0, hive_nargs(ctx) };
    for (size_t a = 0; a < r[1]; a++) {
        size_t n = 0;
        const unsigned char *p = hive_arg(ctx, a, &n);
        for (size_t i = 0; i < n; i++)
            r[0] += p[i];
    }
    return hive_return(ctx, r, sizeof r);
}

static int m_fail(void *self, hive_ctx_t *ctx)
{
    (void)self; (void)ctx;
    return 7;
}

static int m_rank(void *self, hive_ctx_t *ctx)
{
    (void)self;
    int r = hive_mpi_rank(hive_engine(ctx));
    return hive_return(ctx, &r, sizeof r);
}

/* big(n): n bytes, byte i being (i * 13 + n) & 0xff */
static int m_big(void *self, hive_ctx_t *ctx)
{
    (void)self;
    const uint32_t *n = hive_arg(ctx, 0, NULL);
    unsigned char *p = hive_return_alloc(ctx, *n);
    if (p == NULL && *n != 0)
        return 1;
    for (uint32_t i = 0; i < *n; i++)
        p[i] = (unsigned char)(i * 13 + *n);
    return 0;
}

/* nap(ms): sleep ms milliseconds, return ms */
static int m_nap(void *self, hive_ctx_t *ctx)
{
    (void)self;
    const uint32_t *ms = hive_arg(ctx, 0, NULL);
    test_sleep_ms(*ms);
    return hive_return(ctx, ms, sizeof *ms);
}

static int m_boom(void *self, hive_ctx_t *ctx)
{
    (void)self; (void)ctx;
    return HIVE_RESTART;
}

/* drop(ref): release the argument's ref once more than this rank holds it
 * (a remote ref's copy, held by the layer): {the release's status, the
 * byte sum of the argument's payload} */
static int t_drop(hive_ctx_t *ctx)
{
    int64_t r[2] = { hive_release(hive_engine(ctx), hive_arg_ref(ctx, 0)), 0 };
    size_t n = 0;
    const unsigned char *p = hive_arg(ctx, 0, &n);
    for (size_t i = 0; i < n; i++)
        r[1] += p[i];
    return hive_return(ctx, r, sizeof r);
}

static int m_drop(void *self, hive_ctx_t *ctx)
{
    (void)self;
    return t_drop(ctx);
}

enum { SEQ, COUNTS, GATE, REC, ORDER, SUM, FAIL, RANK, ALL, BIG, BOOM, NAP, DROP, NMETHODS };
static const hive_method_t methods[NMETHODS] = {
    [SEQ] = { "seq", m_seq, 0 }, [COUNTS] = { "counts", m_counts, 0 }, [GATE] = { "gate", m_gate, 0 },
    [REC] = { "rec", m_rec, 0 }, [ORDER] = { "order", m_order, 0 }, [SUM] = { "sum", m_sum, 0 },
    [FAIL] = { "fail", m_fail, 0 }, [RANK] = { "rank", m_rank, 0 }, [ALL] = { "all", m_all, 0 },
    [BIG] = { "big", m_big, 0 }, [BOOM] = { "boom", m_boom, 0 }, [NAP] = { "nap", m_nap, 0 },
    [DROP] = { "drop", m_drop, 0 },
};
static const hive_actor_class_t logger_class = {
    .name = "Logger", .size = sizeof(logger_t), .methods = methods, .nmethods = NMETHODS,
};

/* A new actor on every rank; all[r] is rank r's. */
static void actor_everywhere(hive_actor_t *all, const char *name_prefix)
{
    char name[64];
    hive_actor_opts_t opts = { 0 };
    if (name_prefix) {
        snprintf(name, sizeof name, "%s.%d", name_prefix, rank);
        opts.name = name;
    }
    hive_actor_t mine;
    assert_int_equal(hive_actor_new(h, &logger_class, NULL, 0, &opts, &mine), HIVE_OK);
    MPI_Allgather(&mine.id, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
}

static int get_i64(hive_ref_t r, int64_t *out)
{
    const void *p;
    size_t n;
    int rc = hive_get(h, r, HIVE_FOREVER, &p, &n);
    if (rc == HIVE_OK && n == sizeof *out)
        memcpy(out, p, sizeof *out);
    return rc == HIVE_OK && n != sizeof *out ? HIVE_EINVAL : rc;
}

/* ------------------------------------------------------------------ tests */

static void test_attach_rank_size(void **state)
{
    (void)state;
    int r, s;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    assert_int_equal(hive_mpi_rank(h), r);
    assert_int_equal(hive_mpi_size(h), s);
    hive_ref_t ref;
    assert_int_equal(hive_put(h, "x", 1, &ref), HIVE_OK);
    assert_int_equal(hive_mpi_owner(h, ref.id), r);          /* ids carry their owner */
    uint64_t ids[64];
    MPI_Allgather(&ref.id, 1, MPI_UINT64_T, ids, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int i = 0; i < s; i++)
        assert_int_equal(hive_mpi_owner(h, ids[i]), i);
    /* an id of no rank: its tag is past the world */
    uint64_t alien = ref.id & ~((uint64_t)0xfff << 30);
    alien |= (uint64_t)(s + 1) << 30;
    assert_int_equal(hive_mpi_owner(h, alien), HIVE_ENOENT);
    const void *p;
    assert_int_equal(hive_get(h, (hive_ref_t){ alien }, 0, &p, NULL), HIVE_ENOENT);
    assert_int_equal(hive_cell_publish(h, (hive_ref_t){ alien }, ref), HIVE_ENOENT);
    assert_int_equal(hive_mpi_attach(h, MPI_COMM_WORLD), HIVE_ESTATE);   /* twice */
    assert_int_equal(hive_shutdown(h), HIVE_ESTATE);                     /* attached */
    assert_int_equal(hive_release(h, ref), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Every rank calls the next rank's actor N times: each call runs once, in
 * order, and its result comes back to its own future. */
static void test_remote_calls_once_in_order(void **state)
{
    (void)state;
    enum { N = 300 };
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    hive_actor_t to = all[(rank + 1) % size];
    static hive_ref_t res[N];
    for (int i = 0; i < N; i++) {
        int32_t a[2] = { rank, i + 1 };
        assert_int_equal(hive_call(h, to, SEQ, &HIVE_VAL(a), 1, NULL, &res[i]), HIVE_OK);
        assert_int_equal(hive_mpi_owner(h, res[i].id), rank);   /* the future is local */
    }
    for (int i = 0; i < N; i++) {
        int64_t v = 0;
        assert_int_equal(get_i64(res[i], &v), HIVE_OK);
        assert_int_equal(v, 2 * (i + 1));
        assert_int_equal(hive_release(h, res[i]), HIVE_OK);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* exactly once: the owner saw N calls from its one caller, none from others */
    hive_ref_t c;
    assert_int_equal(hive_call(h, all[rank], COUNTS, NULL, 0, NULL, &c), HIVE_OK);
    const int64_t *counts;
    size_t n;
    assert_int_equal(hive_get(h, c, HIVE_FOREVER, (const void **)&counts, &n), HIVE_OK);
    int from = (rank + size - 1) % size;
    for (int i = 0; i < size; i++)
        assert_int_equal(counts[i], i == from ? N : 0);
    hive_release(h, c);
    hive_mpi_stats_t st;
    assert_int_equal(hive_mpi_stats(h, &st), HIVE_OK);
    assert_true(st.calls_sent >= N && st.calls_served >= N);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Requests above the posted receive's 64 KiB (an M_BIG envelope, the
 * message on the data communicator) mixed with small ones, sent without
 * waiting: every call runs once and in order per caller, and the big
 * arguments arrive intact (sum of every byte, two of them in one call). */
static void test_big_requests_in_order(void **state)
{
    (void)state;
    enum { N = 24, BIG = 100000, BIG2 = 70001 };
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    hive_actor_t to = all[(rank + 1) % size];
    unsigned char *big = malloc(BIG), *big2 = malloc(BIG2);
    assert_non_null(big);
    assert_non_null(big2);
    uint64_t want = 0;
    for (size_t i = 0; i < BIG; i++)
        want += big[i] = (unsigned char)(i * 11 + (size_t)rank);
    for (size_t i = 0; i < BIG2; i++)
        want += big2[i] = (unsigned char)(i * 5 + 3);
    hive_ref_t res[N];
    for (int i = 0; i < N; i++) {
        int32_t a[2] = { rank, i + 1 };
        if (i % 3 == 1) {                /* seq(caller, n) reads the first 8 bytes */
            memcpy(big, a, sizeof a);
            assert_int_equal(hive_call(h, to, SEQ, &HIVE_BYTES(big, BIG), 1, NULL, &res[i]), HIVE_OK);
        } else
            assert_int_equal(hive_call(h, to, SEQ, &HIVE_VAL(a), 1, NULL, &res[i]), HIVE_OK);
    }
    for (int i = 0; i < N; i++) {
        int64_t v = 0;
        assert_int_equal(get_i64(res[i], &v), HIVE_OK);
        assert_int_equal(v, 2 * (i + 1));
        assert_int_equal(hive_release(h, res[i]), HIVE_OK);
    }
    for (size_t i = 0; i < 2 * sizeof(int32_t); i++)   /* the seq header overwrote these */
        want += (unsigned char)big[i] - (unsigned char)(i * 11 + (size_t)rank);
    hive_arg_t two[2] = { HIVE_BYTES(big, BIG), HIVE_BYTES(big2, BIG2) };
    hive_ref_t r;
    assert_int_equal(hive_call(h, to, ALL, two, 2, NULL, &r), HIVE_OK);
    const uint64_t *got;
    size_t n;
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, (const void **)&got, &n), HIVE_OK);
    assert_int_equal(n, 2 * sizeof(uint64_t));
    assert_int_equal(got[1], 2);
    assert_int_equal(got[0], want);
    hive_release(h, r);
    free(big);
    free(big2);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Rank 0 calls rank 1's actor N times, waiting for each answer at once,
 * then N more calls without waiting, with idle workers spinning long
 * (hive__idle_spin_ns, so that rank 1's worker is idle between calls and
 * polls): rank 0's answers are mostly received by the thread waiting for
 * them, rank 1's calls by its idle worker, which runs them where it took
 * them (the round trip without a hand-off between threads). Every call
 * runs once and in order, and every message is counted once by the kind
 * of thread that took it. */
static void test_round_trip_paths(void **state)
{
    (void)state;
    enum { N = 100 };
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    uint64_t spin = atomic_load(&hive__idle_spin_ns);
    atomic_store(&hive__idle_spin_ns, 200000000);   /* 200 ms */
    hive_mpi_stats_t a, b;
    assert_int_equal(hive_mpi_stats(h, &a), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);             /* every rank counts from before the first call */
    if (rank == 0) {
        for (int i = 0; i < N; i++) {
            int32_t arg[2] = { 0, i + 1 };
            hive_ref_t r;
            int64_t v = 0;
            assert_int_equal(hive_call(h, all[1], SEQ, &HIVE_VAL(arg), 1, NULL, &r), HIVE_OK);
            assert_int_equal(get_i64(r, &v), HIVE_OK);
            assert_int_equal(v, 2 * (i + 1));
            assert_int_equal(hive_release(h, r), HIVE_OK);
        }
        static hive_ref_t res[N];
        for (int i = 0; i < N; i++) {
            int32_t arg[2] = { 0, N + i + 1 };
            assert_int_equal(hive_call(h, all[1], SEQ, &HIVE_VAL(arg), 1, NULL, &res[i]), HIVE_OK);
        }
        for (int i = 0; i < N; i++) {
            int64_t v = 0;
            assert_int_equal(get_i64(res[i], &v), HIVE_OK);
            assert_int_equal(v, 2 * (N + i + 1));
            assert_int_equal(hive_release(h, res[i]), HIVE_OK);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    assert_int_equal(hive_mpi_stats(h, &b), HIVE_OK);
    uint64_t waiting = b.recv_waiting - a.recv_waiting, idle = b.recv_idle - a.recv_idle;
    uint64_t progress = b.recv_progress - a.recv_progress;
    /* Every answer (rank 0) and every call (rank 1) was taken by one of
     * the three, and counted once. Which one is the scheduler's choice
     * (a waiter stops driving after 10 ms, a worker polls only while
     * idle): bench-mpi shows the split, which on an unloaded pair of
     * cores is all waiting (rank 0) and idle (rank 1) but a few. */
    if (rank == 0)
        assert_int_equal(waiting + idle + progress, 2 * N);
    if (rank == 1) {
        assert_int_equal(waiting + idle + progress, 2 * N);
        /* a call is counted as served once it is in its mailbox, which
         * the thread that took it may do after the worker answered it */
        uint64_t deadline = test_now_ns() + 30000000000ull;
        while (b.calls_served - a.calls_served < 2 * N && test_now_ns() < deadline) {
            test_sleep_ms(1);
            assert_int_equal(hive_mpi_stats(h, &b), HIVE_OK);
        }
        assert_int_equal(b.calls_served - a.calls_served, 2 * N);
    }
    if (rank > 1)
        assert_int_equal(waiting + idle + progress, 0);
    atomic_store(&hive__idle_spin_ns, spin);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Calls an idle worker runs in place (in the actor's free turn, replying
 * from the method's return): rank 0 calls rank 1's actor, waiting for
 * each answer, mixed with bursts it does not wait for (those queue, and
 * a call taken while the mail is not empty goes behind them), while
 * rank 1's own thread calls the same actor as a second caller. Both
 * callers' calls run once and in order (seq fails otherwise); failures,
 * a method out of range, results of 0 B, 100 B and 40 000 B (above the
 * inline reply: sent from a copy), and a restart then a death by
 * HIVE_RESTART come back as through a task; a wait that times out gives
 * back the receive it posted for its answer; ref arguments and big inline
 * ones take the usual way. Rank 1 ran some in place. */
static void test_calls_in_place(void **state)
{
    (void)state;
    enum { ROUNDS = 60, BURST = 4, LOCAL = 400, LOCAL_CALLER = 40 };
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    hive_actor_t fragile;                /* rank 1's: one restart, then it dies */
    hive_actor_opts_t fo = { .max_restarts = 1 };
    assert_int_equal(hive_actor_new(h, &logger_class, NULL, 0, &fo, &fragile), HIVE_OK);
    uint64_t ids[64];
    MPI_Allgather(&fragile.id, 1, MPI_UINT64_T, ids, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    fragile.id = ids[1];
    uint64_t spin = atomic_load(&hive__idle_spin_ns);
    atomic_store(&hive__idle_spin_ns, 200000000);   /* 200 ms: rank 1's worker polls between calls */
    hive_mpi_stats_t a, b;
    assert_int_equal(hive_mpi_stats(h, &a), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);
    const void *p;
    size_t n;
    hive_ref_t r;
    if (rank == 0) {
        int32_t next = 1;
        for (int round = 0; round < ROUNDS; round++) {
            hive_ref_t q[BURST];
            int nq = round % 3 == 2 ? BURST : 0;   /* every third round: a burst first */
            for (int i = 0; i < nq; i++) {
                int32_t arg[2] = { 0, next++ };
                assert_int_equal(hive_call(h, all[1], SEQ, &HIVE_VAL(arg), 1, NULL, &q[i]), HIVE_OK);
            }
            int32_t arg[2] = { 0, next++ };
            int64_t v = 0;
            assert_int_equal(hive_call(h, all[1], SEQ, &HIVE_VAL(arg), 1, NULL, &r), HIVE_OK);
            assert_int_equal(get_i64(r, &v), HIVE_OK);
            assert_int_equal(v, 2 * arg[1]);
            assert_int_equal(hive_release(h, r), HIVE_OK);
            for (int i = 0; i < nq; i++) {
                assert_int_equal(get_i64(q[i], &v), HIVE_OK);
                hive_release(h, q[i]);
            }
        }
        assert_int_equal(hive_call(h, all[1], FAIL, NULL, 0, NULL, &r), HIVE_OK);
        assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, NULL), HIVE_ETASK);
        hive_release(h, r);
        assert_int_equal(hive_call(h, all[1], 999, NULL, 0, NULL, &r), HIVE_OK);
        assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, NULL), HIVE_EINVAL);
        hive_release(h, r);
        /* several arguments in place: the first stays in the request
         * buffer (16-byte aligned), the others are copied out to 16-byte
         * boundaries */
        unsigned char a8[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, a5[5] = { 9, 10, 11, 12, 13 }, a40[40];
        uint64_t sum3 = 36 + 55;
        for (int i = 0; i < 40; i++)
            sum3 += a40[i] = (unsigned char)(100 + i);
        hive_arg_t three[3] = { HIVE_BYTES(a8, 8), HIVE_BYTES(a5, 5), HIVE_BYTES(a40, 40) };
        assert_int_equal(hive_call(h, all[1], ALL, three, 3, NULL, &r), HIVE_OK);
        assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, &n), HIVE_OK);
        assert_int_equal(n, 2 * sizeof(uint64_t));
        assert_int_equal(((const uint64_t *)p)[0], sum3);
        assert_int_equal(((const uint64_t *)p)[1], 3);
        hive_release(h, r);
        uint32_t sizes[] = { 0, 100, 40000 };
        for (int k = 0; k < 3; k++) {
            assert_int_equal(hive_call(h, all[1], BIG, &HIVE_VAL(sizes[k]), 1, NULL, &r), HIVE_OK);
            assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, &n), HIVE_OK);
            assert_int_equal(n, sizes[k]);
            for (uint32_t i = 0; i < sizes[k]; i++)
                assert_int_equal(((const unsigned char *)p)[i], (unsigned char)(i * 13 + sizes[k]));
            hive_release(h, r);
        }
        /* a ref argument, and inline arguments too big for the worker's
         * stack, take the usual way (a task record) */
        unsigned char big[5000];
        uint64_t want = 0;
        for (size_t i = 0; i < sizeof big; i++)
            want += big[i] = (unsigned char)(i * 3);
        hive_ref_t ref;
        assert_int_equal(hive_put(h, big, sizeof big, &ref), HIVE_OK);
        hive_arg_t as[2] = { HIVE_REF(ref), HIVE_BYTES(big, sizeof big) };
        for (int k = 0; k < 2; k++) {
            assert_int_equal(hive_call(h, all[1], SUM, &as[k], 1, NULL, &r), HIVE_OK);
            assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, &n), HIVE_OK);
            assert_int_equal(n, 2 * sizeof(uint64_t));
            assert_int_equal(((const uint64_t *)p)[0], want);
            assert_int_equal(((const uint64_t *)p)[1], sizeof big);
            hive_release(h, r);
        }
        hive_release(h, ref);            /* rank 1 fetched it before it answered */
        /* a wait that times out withdraws the receive it posted for the
         * answer; the next wait takes the answer all the same */
        uint32_t ms = 100;
        uint64_t called = test_now_ns();
        assert_int_equal(hive_call(h, all[1], NAP, &HIVE_VAL(ms), 1, NULL, &r), HIVE_OK);
        int first = hive_get(h, r, 5000000, &p, &n);
        /* the answer cannot come before the nap is over: in time only if
         * this thread was off its core for about as long (a loaded run) */
        if (first == HIVE_OK)
            assert_true(test_now_ns() - called >= (uint64_t)ms * 1000000);
        else
            assert_int_equal(first, HIVE_ETIMEDOUT);
        assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, &n), HIVE_OK);
        assert_int_equal(n, sizeof ms);
        assert_int_equal(*(const uint32_t *)p, ms);
        hive_release(h, r);
        /* one restart, then the second HIVE_RESTART is the last */
        int expect[4] = { HIVE_ETASK, HIVE_OK, HIVE_ETASK, HIVE_EDEAD };
        unsigned method[4] = { BOOM, RANK, BOOM, RANK };
        for (int k = 0; k < 4; k++) {
            assert_int_equal(hive_call(h, fragile, method[k], NULL, 0, NULL, &r), HIVE_OK);
            int rc = hive_get(h, r, HIVE_FOREVER, &p, NULL);
            /* the death may still be on its way when the last call comes */
            for (int tries = 0; k == 3 && rc == HIVE_OK && tries < 1000; tries++) {
                hive_release(h, r);
                test_sleep_ms(1);
                assert_int_equal(hive_call(h, fragile, RANK, NULL, 0, NULL, &r), HIVE_OK);
                rc = hive_get(h, r, HIVE_FOREVER, &p, NULL);
            }
            assert_int_equal(rc, expect[k]);
            hive_release(h, r);
        }
    } else if (rank == 1) {
        /* a second caller of the same actor, here, meanwhile */
        hive_ref_t q[LOCAL];
        for (int i = 0; i < LOCAL; i++) {
            int32_t arg[2] = { LOCAL_CALLER, i + 1 };
            assert_int_equal(hive_call(h, all[1], SEQ, &HIVE_VAL(arg), 1, NULL, &q[i]), HIVE_OK);
            if (i % 20 == 19)
                test_sleep_ms(1);        /* let rank 0's calls find the turn free too */
        }
        for (int i = 0; i < LOCAL; i++) {
            int64_t v = 0;
            assert_int_equal(get_i64(q[i], &v), HIVE_OK);
            assert_int_equal(v, 2 * (i + 1));
            hive_release(h, q[i]);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        assert_int_equal(hive_call(h, all[1], COUNTS, NULL, 0, NULL, &r), HIVE_OK);
        const int64_t *counts;
        assert_int_equal(hive_get(h, r, HIVE_FOREVER, (const void **)&counts, &n), HIVE_OK);
        assert_int_equal(counts[0], ROUNDS + ROUNDS / 3 * BURST);
        assert_int_equal(counts[LOCAL_CALLER], LOCAL);
        hive_release(h, r);
        assert_int_equal(hive_mpi_stats(h, &b), HIVE_OK);
        /* which thread took each call is the scheduler's choice, but with
         * the worker spinning 200 ms the idle worker takes nearly all */
        assert_true(b.calls_in_place > a.calls_in_place);
        assert_true(b.calls_in_place - a.calls_in_place <= b.calls_served - a.calls_served);
    }
    atomic_store(&hive__idle_spin_ns, spin);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Calls with many arguments (more than the callee parses on its stack),
 * inline bytes and refs of the caller's, of a third rank and of the callee
 * mixed: every byte arrives. */
static void test_many_arguments(void **state)
{
    (void)state;
    enum { NA = 13 };
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    unsigned char bytes[NA][40];
    hive_ref_t mine;
    unsigned char big[3000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 7 + (size_t)rank);
    assert_int_equal(hive_put(h, big, sizeof big, &mine), HIVE_OK);
    uint64_t ids[64];
    MPI_Allgather(&mine.id, 1, MPI_UINT64_T, ids, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    int to = (rank + 1) % size, third = (rank + 2) % size;
    hive_arg_t args[NA];
    uint64_t want = 0;
    for (int a = 0; a < NA; a++) {
        size_t n = (size_t)(a * 3 % 40);
        for (size_t i = 0; i < n; i++)
            want += bytes[a][i] = (unsigned char)(a * 31 + (int)i);
        args[a] = HIVE_BYTES(bytes[a], n);
    }
    uint64_t refsum[3] = { 0 };              /* of the caller's, the third rank's, the callee's */
    int who[3] = { rank, third, to };
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < sizeof big; i++)
            refsum[k] += (unsigned char)(i * 7 + (size_t)who[k]);
    args[2] = HIVE_REF(mine);
    args[7] = HIVE_REF(((hive_ref_t){ ids[third] }));
    args[11] = HIVE_REF(((hive_ref_t){ ids[to] }));
    for (int a = 2; a < NA; a += a == 2 ? 5 : 4)   /* 2, 7, 11: their inline bytes are not sent */
        for (size_t i = 0; i < (size_t)(a * 3 % 40); i++)
            want -= bytes[a][i];
    want += refsum[0] + refsum[1] + refsum[2];
    hive_ref_t r;
    assert_int_equal(hive_call(h, all[to], ALL, args, NA, NULL, &r), HIVE_OK);
    const uint64_t *got;
    size_t n;
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, (const void **)&got, &n), HIVE_OK);
    assert_int_equal(n, 2 * sizeof(uint64_t));
    assert_int_equal(got[1], NA);
    assert_int_equal(got[0], want);
    assert_int_equal(hive_release(h, r), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);             /* every callee has fetched before the owners release */
    assert_int_equal(hive_release(h, mine), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Rank 0 holds rank 1's actor in a gate, queues LOW then HIGH calls behind
 * it; the HIGH ones must run first, each lane in its own order. */
static void test_priorities_across_ranks(void **state)
{
    (void)state;
    enum { K = 5 };
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    uint64_t base = 0;
    if (rank == 1) {
        hive_mpi_stats_t st;
        assert_int_equal(hive_mpi_stats(h, &st), HIVE_OK);
        base = st.calls_served;
    }
    MPI_Bcast(&base, 1, MPI_UINT64_T, 1, MPI_COMM_WORLD);
    if (rank == 0) {
        uint64_t target = base + 1 + 2 * K;    /* the gate itself and every call after it */
        hive_ref_t g, r[2 * K], o;
        assert_int_equal(hive_call(h, all[1], GATE, &HIVE_VAL(target), 1, NULL, &g), HIVE_OK);
        for (int i = 0; i < 2 * K; i++) {
            int32_t tag = i;                    /* 0..K-1 LOW, K..2K-1 HIGH */
            hive_opts_t op = { .priority = i < K ? HIVE_PRIO_LOW : HIVE_PRIO_HIGH };
            assert_int_equal(hive_call(h, all[1], REC, &HIVE_VAL(tag), 1, &op, &r[i]), HIVE_OK);
        }
        const void *p;
        assert_int_equal(hive_get(h, g, HIVE_FOREVER, &p, NULL), HIVE_OK);
        for (int i = 0; i < 2 * K; i++) {
            assert_int_equal(hive_get(h, r[i], HIVE_FOREVER, &p, NULL), HIVE_OK);
            hive_release(h, r[i]);
        }
        assert_int_equal(hive_call(h, all[1], ORDER, NULL, 0, NULL, &o), HIVE_OK);
        const int32_t *order;
        size_t n;
        assert_int_equal(hive_get(h, o, HIVE_FOREVER, (const void **)&order, &n), HIVE_OK);
        assert_int_equal(n, 2 * K * sizeof(int32_t));
        for (int i = 0; i < K; i++) {
            assert_int_equal(order[i], K + i);       /* HIGH first, in order */
            assert_int_equal(order[K + i], i);       /* then LOW, in order */
        }
        hive_release(h, o);
        hive_release(h, g);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A ref made on rank 0 goes as an argument to every rank's neighbour: the
 * callee fetches it from its owner (the caller, a third rank, or itself). */
static void test_refs_through_ranks(void **state)
{
    (void)state;
    enum { BYTES = 100000 };
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    hive_ref_t ref = { 0 };
    uint64_t want = 0;
    if (rank == 0) {
        unsigned char *d;
        assert_int_equal(hive_create(h, BYTES, (void **)&d, &ref), HIVE_OK);
        for (size_t i = 0; i < BYTES; i++) {
            d[i] = (unsigned char)(i * 31 + 7);
            want += d[i];
        }
        assert_int_equal(hive_seal(h, ref), HIVE_OK);
    }
    MPI_Bcast(&ref.id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Bcast(&want, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    hive_ref_t r;
    assert_int_equal(hive_call(h, all[(rank + 1) % size], SUM, &HIVE_REF(ref), 1, NULL, &r), HIVE_OK);
    const uint64_t *sum;
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, (const void **)&sum, NULL), HIVE_OK);
    assert_int_equal(sum[1], BYTES);
    assert_int_equal(sum[0], want);
    hive_release(h, r);
    MPI_Barrier(MPI_COMM_WORLD);                 /* the owner keeps it until all are done */
    if (rank == 0)
        assert_int_equal(hive_release(h, ref), HIVE_OK);
}


/* A task: the byte sum of its ref argument and its size (as m_sum). */
static int t_sum(hive_ctx_t *ctx)
{
    return m_sum(NULL, ctx);
}

/* Another rank's ref works wherever a local one does: hive_wait,
 * hive_get_many, a task's argument (hive_submit), a local actor call's
 * argument, hive_retain (one more hold on this rank's copy, which a
 * hive_release then drops). */
static void test_remote_refs_everywhere(void **state)
{
    (void)state;
    enum { BYTES = 70000 };              /* above the inline limit: a data message */
    hive_ref_t ref = { 0 };
    uint64_t want = 0;
    if (rank == 0) {
        unsigned char *d;
        assert_int_equal(hive_create(h, BYTES, (void **)&d, &ref), HIVE_OK);
        for (size_t i = 0; i < BYTES; i++) {
            d[i] = (unsigned char)(i * 13 + 5);
            want += d[i];
        }
        assert_int_equal(hive_seal(h, ref), HIVE_OK);
    }
    MPI_Bcast(&ref.id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Bcast(&want, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank != 0) {
        hive_mpi_stats_t st0, st1;
        assert_int_equal(hive_mpi_stats(h, &st0), HIVE_OK);
        /* a task with the remote ref as its argument, before anything fetched it */
        hive_ref_t t;
        assert_int_equal(hive_submit(h, t_sum, &HIVE_REF(ref), 1, NULL, &t), HIVE_OK);
        const uint64_t *sum;
        assert_int_equal(hive_get(h, t, HIVE_FOREVER, (const void **)&sum, NULL), HIVE_OK);
        assert_int_equal(sum[0], want);
        assert_int_equal(sum[1], BYTES);
        hive_release(h, t);
        /* a local actor's call with it */
        hive_actor_t mine;
        assert_int_equal(hive_actor_new(h, &logger_class, NULL, 0, NULL, &mine), HIVE_OK);
        assert_int_equal(hive_call(h, mine, SUM, &HIVE_REF(ref), 1, NULL, &t), HIVE_OK);
        assert_int_equal(hive_get(h, t, HIVE_FOREVER, (const void **)&sum, NULL), HIVE_OK);
        assert_int_equal(sum[0], want);
        hive_release(h, t);
        assert_int_equal(hive_actor_kill(h, mine), HIVE_OK);
        /* waits */
        hive_ref_t local;
        int64_t seven = 7;
        assert_int_equal(hive_put(h, &seven, sizeof seven, &local), HIVE_OK);
        hive_ref_t both[2] = { ref, local };
        unsigned char ready[2] = { 0, 0 };
        assert_int_equal(hive_wait(h, both, 2, 2, HIVE_FOREVER, ready), 2);
        assert_true(ready[0] && ready[1]);
        const void *datas[2];
        size_t sizes[2];
        int status[2];
        assert_int_equal(hive_get_many(h, both, 2, HIVE_FOREVER, datas, sizes, status), HIVE_OK);
        assert_int_equal(sizes[0], BYTES);
        assert_int_equal(((const unsigned char *)datas[0])[BYTES - 1], (unsigned char)((BYTES - 1) * 13 + 5));
        assert_int_equal(*(const int64_t *)datas[1], 7);
        hive_release(h, local);
        /* fetched once for all of the above */
        assert_int_equal(hive_mpi_stats(h, &st1), HIVE_OK);
        assert_int_equal(st1.fetches - st0.fetches, 1);
        /* a retained copy outlives one release; the second drops it */
        assert_int_equal(hive_retain(h, ref), HIVE_OK);
        assert_int_equal(hive_release(h, ref), HIVE_OK);
        const void *p;
        assert_int_equal(hive_get(h, ref, HIVE_FOREVER, &p, NULL), HIVE_OK);
        assert_int_equal(hive_mpi_stats(h, &st1), HIVE_OK);
        assert_int_equal(st1.fetches - st0.fetches, 1);   /* still the copy */
        assert_int_equal(hive_release(h, ref), HIVE_OK);
        assert_int_equal(hive_get(h, ref, HIVE_FOREVER, &p, NULL), HIVE_OK);
        assert_int_equal(hive_mpi_stats(h, &st1), HIVE_OK);
        assert_int_equal(st1.fetches - st0.fetches, 2);   /* dropped: fetched again */
        assert_int_equal(hive_release(h, ref), HIVE_OK);
    }
    MPI_Barrier(MPI_COMM_WORLD);                 /* the owner keeps it until all are done */
    if (rank == 0)
        assert_int_equal(hive_release(h, ref), HIVE_OK);
}

/* The bytes of test object k of n bytes: a byte pattern over 64 KiB,
 * repeated with memcpy (fast under the sanitizers too), with each 64 KiB
 * block's index written at its start so that moved blocks show. */
static void pattern(unsigned char *d, size_t n, unsigned k)
{
    size_t blk = (size_t)64 << 10, first = n < blk ? n : blk;
    for (size_t i = 0; i < first; i++)
        d[i] = (unsigned char)(i ^ (i >> 8) ^ k ^ 0x5a);
    for (size_t off = blk; off < n; off += blk)
        memcpy(d + off, d, n - off < blk ? n - off : blk);
    for (size_t off = blk; off + sizeof(uint64_t) <= n; off += blk) {
        uint64_t idx = off / blk;
        memcpy(d + off, &idx, sizeof idx);
    }
}

/* Rank 0's objects of 0 B, 1 B, 64 KiB and 64 MiB reach every rank intact,
 * fetched once: the second get comes from the local copy. (The sanitized
 * builds move 64 MiB / TEST_SCALE: still many transport fragments, in a
 * fraction of the time.) */
static void test_remote_get_sizes(void **state)
{
    (void)state;
    static const size_t sizes[] = { 0, 1, 64 << 10, (64 << 20) / TEST_SCALE };
    enum { NS = sizeof sizes / sizeof sizes[0] };
    uint64_t ids[NS] = { 0 };
    if (rank == 0)
        for (int k = 0; k < NS; k++) {
            unsigned char *d;
            hive_ref_t r;
            assert_int_equal(hive_create(h, sizes[k], (void **)&d, &r), HIVE_OK);
            pattern(d, sizes[k], (unsigned)k);
            assert_int_equal(hive_seal(h, r), HIVE_OK);
            ids[k] = r.id;
        }
    MPI_Bcast(ids, NS, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank != 0)
        for (int k = 0; k < NS; k++) {
            hive_mpi_stats_t before, after;
            assert_int_equal(hive_mpi_stats(h, &before), HIVE_OK);
            const unsigned char *p;
            size_t n = 99;
            assert_int_equal(hive_get(h, (hive_ref_t){ ids[k] }, HIVE_FOREVER, (const void **)&p, &n),
                             HIVE_OK);
            assert_int_equal(n, sizes[k]);
            unsigned char *want = malloc(n + 1);
            assert_non_null(want);
            pattern(want, n, (unsigned)k);
            assert_memory_equal(p, want, n);
            free(want);
            const unsigned char *q;
            assert_int_equal(hive_get(h, (hive_ref_t){ ids[k] }, 0, (const void **)&q, &n), HIVE_OK);
            assert_ptr_equal(q, p);                          /* the same local copy */
            assert_int_equal(hive_mpi_stats(h, &after), HIVE_OK);
            assert_int_equal(after.fetches, before.fetches + 1);
            assert_int_equal(after.cache_hits, before.cache_hits + 1);
            assert_int_equal(after.fetch_bytes, before.fetch_bytes + sizes[k]);
            assert_int_equal(hive_release(h, (hive_ref_t){ ids[k] }), HIVE_OK);   /* drops the copy */
        }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        for (int k = 0; k < NS; k++)
            assert_int_equal(hive_release(h, (hive_ref_t){ ids[k] }), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);             /* released before anyone asks again */
    /* a released remote object: the owner answers HIVE_ENOENT - once the
     * sends of its payload still in flight (which pin it) have ended: a get
     * that comes in before that is served, and we ask again */
    if (rank != 0) {
        const void *p;
        uint64_t deadline = test_now_ns() + 30000000000ull;
        int rc;
        while ((rc = hive_get(h, (hive_ref_t){ ids[3] }, HIVE_FOREVER, &p, NULL)) == HIVE_OK &&
               test_now_ns() < deadline) {
            assert_int_equal(hive_release(h, (hive_ref_t){ ids[3] }), HIVE_OK);   /* the copy */
            test_sleep_ms(1);
        }
        assert_int_equal(rc, HIVE_ENOENT);
        hive_release(h, (hive_ref_t){ ids[3] });
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A failing method is HIVE_ETASK, a bad method HIVE_EINVAL, a killed actor
 * HIVE_EDEAD: on the caller's rank, through its future. */
static void test_failure_and_kill(void **state)
{
    (void)state;
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    hive_actor_t to = all[(rank + 1) % size];
    hive_ref_t r;
    const void *p;
    assert_int_equal(hive_call(h, to, FAIL, NULL, 0, NULL, &r), HIVE_OK);
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, NULL), HIVE_ETASK);
    hive_release(h, r);
    assert_int_equal(hive_call(h, to, 999, NULL, 0, NULL, &r), HIVE_OK);
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, NULL), HIVE_EINVAL);
    hive_release(h, r);
    MPI_Barrier(MPI_COMM_WORLD);
    /* each rank kills its neighbour's actor from afar */
    assert_int_equal(hive_actor_kill(h, to), HIVE_OK);
    assert_int_equal(hive_actor_kill(h, to), HIVE_EDEAD);
    assert_int_equal(hive_call(h, to, RANK, NULL, 0, NULL, &r), HIVE_OK);
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, NULL), HIVE_EDEAD);
    hive_release(h, r);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A name registered on any rank is found from every rank. */
static void test_name_lookup(void **state)
{
    (void)state;
    hive_actor_t all[64];
    actor_everywhere(all, "svc");
    MPI_Barrier(MPI_COMM_WORLD);
    int other = (rank + 1) % size;
    char name[64];
    snprintf(name, sizeof name, "svc.%d", other);
    hive_actor_t a;
    assert_int_equal(hive_actor_lookup(h, name, &a), HIVE_OK);
    assert_int_equal(a.id, all[other].id);
    hive_ref_t r;
    int64_t unused;
    assert_int_equal(hive_call(h, a, RANK, NULL, 0, NULL, &r), HIVE_OK);
    const int *who;
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, (const void **)&who, NULL), HIVE_OK);
    assert_int_equal(*who, other);
    hive_release(h, r);
    (void)unused;
    assert_int_equal(hive_actor_lookup(h, "nobody.anywhere", &a), HIVE_ENOENT);
    /* a name longer than a request's 64 KiB goes to every rank as an
     * envelope and the request itself; the last rank has it */
    enum { LONG = 70000 };
    char *longname = malloc(LONG + 1);
    assert_non_null(longname);
    for (size_t i = 0; i < LONG; i++)
        longname[i] = (char)('a' + i % 26);
    longname[LONG] = '\0';
    hive_actor_t named = { 0 };
    hive_actor_opts_t lo = { .name = longname };
    if (rank == size - 1)
        assert_int_equal(hive_actor_new(h, &logger_class, NULL, 0, &lo, &named), HIVE_OK);
    MPI_Bcast(&named.id, 1, MPI_UINT64_T, size - 1, MPI_COMM_WORLD);
    assert_int_equal(hive_actor_lookup(h, longname, &a), HIVE_OK);
    assert_int_equal(a.id, named.id);
    longname[0] = 'z';                   /* nobody's */
    assert_int_equal(hive_actor_lookup(h, longname, &a), HIVE_ENOENT);
    MPI_Barrier(MPI_COMM_WORLD);         /* every rank looked before the actor goes */
    if (rank == size - 1)
        assert_int_equal(hive_actor_kill(h, named), HIVE_OK);
    free(longname);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A name found on another rank is asked for once; when the actor behind
 * it dies and the name passes to a new actor, a call to the cached one
 * fails with HIVE_EDEAD and the next lookup finds the new actor. */
static void test_name_lookup_cached(void **state)
{
    (void)state;
    hive_actor_t all[64];
    actor_everywhere(all, "cached");
    MPI_Barrier(MPI_COMM_WORLD);
    int other = (rank + 1) % size;
    char name[64];
    snprintf(name, sizeof name, "cached.%d", other);
    hive_mpi_stats_t st0, st1;
    assert_int_equal(hive_mpi_stats(h, &st0), HIVE_OK);
    hive_actor_t a, b;
    assert_int_equal(hive_actor_lookup(h, name, &a), HIVE_OK);
    assert_int_equal(hive_actor_lookup(h, name, &b), HIVE_OK);
    assert_int_equal(a.id, all[other].id);
    assert_int_equal(b.id, a.id);
    assert_int_equal(hive_mpi_stats(h, &st1), HIVE_OK);
    assert_int_equal(st1.lookups - st0.lookups, 1);          /* the second came from the cache */
    assert_int_equal(st1.lookup_hits - st0.lookup_hits, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    /* each rank replaces its actor under the same name */
    char mine[64];
    snprintf(mine, sizeof mine, "cached.%d", rank);
    assert_int_equal(hive_actor_kill(h, all[rank]), HIVE_OK);
    hive_actor_t fresh;
    hive_actor_opts_t opts = { .name = mine };
    assert_int_equal(hive_actor_new(h, &logger_class, NULL, 0, &opts, &fresh), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);
    hive_ref_t r;
    assert_int_equal(hive_call(h, a, RANK, NULL, 0, NULL, &r), HIVE_OK);
    const void *p;
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, NULL), HIVE_EDEAD);
    hive_release(h, r);
    assert_int_equal(hive_actor_lookup(h, name, &b), HIVE_OK);
    assert_int_not_equal(b.id, a.id);                        /* asked again: the new actor */
    assert_int_equal(hive_mpi_owner(h, b.id), other);
    assert_int_equal(hive_call(h, b, RANK, NULL, 0, NULL, &r), HIVE_OK);
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, NULL), HIVE_OK);
    assert_int_equal(*(const int *)p, other);
    hive_release(h, r);
    MPI_Barrier(MPI_COMM_WORLD);
    assert_int_equal(hive_actor_kill(h, fresh), HIVE_OK);
}

/* Subscribed ranks get rank 0's versions pushed: small ones travel in the
 * push and are acquired with no message, a large one is announced and
 * fetched by the next acquire. Every rank polls until it sees the last
 * version (pushes are eventual), with a deadline. */
static void test_cell_pushed(void **state)
{
    (void)state;
    enum { BIG = 50000, ROUNDS = 20 };
    hive_ref_t cell = { 0 }, v;
    int64_t x = 0;
    if (rank == 0) {
        assert_int_equal(hive_put(h, &x, sizeof x, &v), HIVE_OK);
        assert_int_equal(hive_cell_new(h, v, &cell), HIVE_OK);
        hive_release(h, v);
    }
    MPI_Bcast(&cell.id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    assert_int_equal(hive_mpi_cell_subscribe(h, cell), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);                 /* everyone subscribed */
    hive_mpi_stats_t st0, st1;
    assert_int_equal(hive_mpi_stats(h, &st0), HIVE_OK);
    if (rank == 0)
        for (x = 1; x <= ROUNDS; x++) {
            assert_int_equal(hive_put(h, &x, sizeof x, &v), HIVE_OK);
            assert_int_equal(hive_cell_publish(h, cell, v), HIVE_OK);
            hive_release(h, v);
        }
    uint64_t seq = 0, deadline = test_now_ns() + 30000000000ull;
    const void *p;
    size_t n;
    do {                                         /* until the last push arrived */
        assert_int_equal(hive_cell_acquire(h, cell, &v, &seq), HIVE_OK);
        assert_int_equal(hive_get(h, v, HIVE_FOREVER, &p, &n), HIVE_OK);
        assert_int_equal(n, sizeof x);
        assert_int_equal(*(const int64_t *)p, (int64_t)seq);   /* each version with its seq */
        hive_release(h, v);
        assert_true(test_now_ns() < deadline);
    } while (seq < ROUNDS);
    assert_int_equal(hive_mpi_stats(h, &st1), HIVE_OK);
    if (rank == 0)
        assert_int_equal(st1.cell_pushes - st0.cell_pushes, (uint64_t)ROUNDS * (size - 1));
    else
        assert_true(st1.cell_local - st0.cell_local >= 1);   /* answered from the pushed copy */
    MPI_Barrier(MPI_COMM_WORLD);
    /* a large version: announced, fetched by the next acquire */
    if (rank == 0) {
        unsigned char *d;
        assert_int_equal(hive_create(h, BIG, (void **)&d, &v), HIVE_OK);
        pattern(d, BIG, 4);
        assert_int_equal(hive_seal(h, v), HIVE_OK);
        assert_int_equal(hive_cell_publish(h, cell, v), HIVE_OK);
        hive_release(h, v);
    }
    unsigned char *want = malloc(BIG);
    pattern(want, BIG, 4);
    do {
        assert_int_equal(hive_cell_acquire(h, cell, &v, &seq), HIVE_OK);
        assert_int_equal(hive_get(h, v, HIVE_FOREVER, &p, &n), HIVE_OK);
        if (seq == ROUNDS + 1) {
            assert_int_equal(n, BIG);
            assert_memory_equal(p, want, BIG);
        }
        hive_release(h, v);
        assert_true(test_now_ns() < deadline);
    } while (seq < ROUNDS + 1);
    free(want);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        assert_int_equal(hive_release(h, cell), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Every other rank publishes into rank 0's cell (a small version, then
 * rank 1 a large one): each publish is a new version on the owner, pushed
 * to a subscriber and seen by a pulling acquire; the publisher keeps its
 * own version. Errors: a version that is no blob, a cell that is gone. */
static void test_cell_publish_across_ranks(void **state)
{
    (void)state;
    enum { BIG = 70000 };
    hive_ref_t cell = { 0 }, v;
    if (rank == 0) {
        assert_int_equal(hive_put(h, "v0", 3, &v), HIVE_OK);
        assert_int_equal(hive_cell_new(h, v, &cell), HIVE_OK);
        hive_release(h, v);
    }
    MPI_Bcast(&cell.id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == size - 1 && rank != 1)
        assert_int_equal(hive_mpi_cell_subscribe(h, cell), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0) {
        int32_t mine = rank * 1000;
        assert_int_equal(hive_put(h, &mine, sizeof mine, &v), HIVE_OK);
        assert_int_equal(hive_cell_publish(h, cell, v), HIVE_OK);
        const int32_t *p;
        assert_int_equal(hive_get(h, v, 0, (const void **)&p, NULL), HIVE_OK);
        assert_int_equal(*p, mine);            /* the publisher's version is its own still */
        assert_int_equal(hive_release(h, v), HIVE_OK);
        hive_actor_t a;
        assert_int_equal(hive_actor_new(h, &logger_class, NULL, 0, NULL, &a), HIVE_OK);
        assert_int_equal(hive_cell_publish(h, cell, (hive_ref_t){ a.id }), HIVE_ESTATE);   /* no blob */
        assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t seq = 0;
    const void *p;
    size_t n;
    assert_int_equal(hive_cell_acquire(h, cell, &v, &seq), HIVE_OK);
    if (rank != size - 1 || rank == 1)         /* pulled: every publish is in */
        assert_int_equal(seq, (uint64_t)(size - 1));
    assert_int_equal(hive_get(h, v, HIVE_FOREVER, &p, &n), HIVE_OK);
    assert_int_equal(n, sizeof(int32_t));
    assert_true(*(const int32_t *)p % 1000 == 0 && *(const int32_t *)p >= 1000);
    hive_release(h, v);
    /* every rank has checked the small versions before rank 1 publishes
     * the large one (else a slow rank's acquire can see it already) */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {                           /* a large one: the whole payload arrives */
        unsigned char *d;
        assert_int_equal(hive_create(h, BIG, (void **)&d, &v), HIVE_OK);
        pattern(d, BIG, 5);
        assert_int_equal(hive_seal(h, v), HIVE_OK);
        assert_int_equal(hive_cell_publish(h, cell, v), HIVE_OK);
        assert_int_equal(hive_release(h, v), HIVE_OK);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        assert_int_equal(hive_cell_acquire(h, cell, &v, &seq), HIVE_OK);
        assert_int_equal(seq, (uint64_t)size);
        assert_int_equal(hive_get(h, v, 0, &p, &n), HIVE_OK);
        assert_int_equal(n, BIG);
        unsigned char *want = malloc(BIG);
        pattern(want, BIG, 5);
        assert_memory_equal(p, want, BIG);
        free(want);
        hive_release(h, v);
        assert_int_equal(hive_release(h, cell), HIVE_OK);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {                           /* the cell is gone on its owner */
        assert_int_equal(hive_put(h, "x", 1, &v), HIVE_OK);
        assert_int_equal(hive_cell_publish(h, cell, v), HIVE_ENOENT);
        hive_release(h, v);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A version published on the cell's owner reaches every rank's acquire;
 * a rank keeps its copy until the version changes. */
static void test_cell_across_ranks(void **state)
{
    (void)state;
    enum { BIG = 100000 };                    /* above the inline limit: the data path */
    hive_ref_t cell = { 0 }, v;
    if (rank == 0) {
        assert_int_equal(hive_put(h, "v0", 3, &v), HIVE_OK);
        assert_int_equal(hive_cell_new(h, v, &cell), HIVE_OK);
        hive_release(h, v);
    }
    MPI_Bcast(&cell.id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    uint64_t seq = 99;
    const char *p;
    size_t n;
    assert_int_equal(hive_cell_acquire(h, cell, &v, &seq), HIVE_OK);
    assert_int_equal(seq, 0);
    assert_int_equal(hive_get(h, v, 0, (const void **)&p, &n), HIVE_OK);
    assert_int_equal(n, 3);
    assert_string_equal(p, "v0");
    if (rank != 0)
        assert_int_equal(hive_mpi_owner(h, v.id), rank);   /* a local copy */
    hive_release(h, v);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        unsigned char *d;
        assert_int_equal(hive_create(h, BIG, (void **)&d, &v), HIVE_OK);
        pattern(d, BIG, 9);
        assert_int_equal(hive_seal(h, v), HIVE_OK);
        assert_int_equal(hive_cell_publish(h, cell, v), HIVE_OK);
        hive_release(h, v);
    }
    MPI_Barrier(MPI_COMM_WORLD);             /* published before anyone looks */
    assert_int_equal(hive_cell_acquire(h, cell, &v, &seq), HIVE_OK);
    assert_int_equal(seq, 1);
    assert_int_equal(hive_get(h, v, 0, (const void **)&p, &n), HIVE_OK);
    assert_int_equal(n, BIG);
    unsigned char *want = malloc(BIG);
    pattern(want, BIG, 9);
    assert_memory_equal(p, want, BIG);
    free(want);
    /* unchanged: the same copy, no payload moves */
    hive_ref_t again;
    hive_mpi_stats_t before, after;
    if (rank != 0) {
        assert_int_equal(hive_mpi_stats(h, &before), HIVE_OK);
        assert_int_equal(hive_cell_acquire(h, cell, &again, &seq), HIVE_OK);
        assert_int_equal(again.id, v.id);
        assert_int_equal(seq, 1);
        assert_int_equal(hive_mpi_stats(h, &after), HIVE_OK);
        assert_int_equal(after.fetch_bytes, before.fetch_bytes);
        hive_release(h, again);
    }
    hive_release(h, v);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        assert_int_equal(hive_release(h, cell), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);
    /* the cell is gone on its owner: the others hear HIVE_ENOENT */
    if (rank != 0)
        assert_int_equal(hive_cell_acquire(h, cell, &v, &seq), HIVE_ENOENT);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Every other rank pushes batches into rank 0's replay buffer, found by name. */
static void test_replay_fed_from_ranks(void **state)
{
    (void)state;
    enum { BATCHES = 10, PER = 50 };
    typedef struct item { int32_t rank, seq; double x; } item_t;
    hive_replay_t *rb = NULL;
    hive_actor_t server;
    if (rank == 0) {
        hive_replay_config_t cfg = { .capacity = 100000, .item_size = sizeof(item_t), .seed = 1 };
        assert_int_equal(hive_replay_new(h, &cfg, &rb), HIVE_OK);
        assert_int_equal(hive_mpi_replay_serve(h, rb, sizeof(item_t), "replay", &server), HIVE_OK);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0) {
        assert_int_equal(hive_actor_lookup(h, "replay", &server), HIVE_OK);
        hive_ref_t done[BATCHES];
        for (int b = 0; b < BATCHES; b++) {
            item_t items[PER];
            for (int i = 0; i < PER; i++)
                items[i] = (item_t){ .rank = rank, .seq = b * PER + i, .x = rank + 0.5 };
            assert_int_equal(hive_mpi_replay_push(h, server, items, PER, sizeof(item_t), &done[b]), HIVE_OK);
        }
        for (int b = 0; b < BATCHES; b++) {
            const void *p;
            assert_int_equal(hive_get(h, done[b], HIVE_FOREVER, &p, NULL), HIVE_OK);
            hive_release(h, done[b]);
        }
        /* a batch of the wrong item size is refused: HIVE_ETASK */
        hive_ref_t bad;
        char odd[7] = { 0 };
        assert_int_equal(hive_mpi_replay_push(h, server, odd, 1, sizeof odd, &bad), HIVE_OK);
        const void *p;
        assert_int_equal(hive_get(h, bad, HIVE_FOREVER, &p, NULL), HIVE_ETASK);
        hive_release(h, bad);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        hive_replay_stats_t st;
        assert_int_equal(hive_replay_stats(rb, &st), HIVE_OK);
        assert_int_equal(st.inserts, (uint64_t)(size - 1) * BATCHES * PER);
        item_t out[64];
        uint64_t rng = 7;
        assert_int_equal(hive_replay_sample(rb, 64, &rng, out, NULL, NULL, 0), HIVE_OK);
        for (int i = 0; i < 64; i++) {
            assert_true(out[i].rank >= 1 && out[i].rank < size);
            assert_true(out[i].seq >= 0 && out[i].seq < BATCHES * PER);
            assert_true(out[i].x == out[i].rank + 0.5);
        }
        assert_int_equal(hive_actor_kill(h, server), HIVE_OK);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        const void *p;                       /* the kill has landed before the buffer goes */
        hive_ref_t r;
        assert_int_equal(hive_call(h, server, 0, NULL, 0, NULL, &r), HIVE_EDEAD);
        (void)p;
        assert_int_equal(hive_replay_free(rb), HIVE_OK);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A remote call's future is a slot of the caller's layer, not a store
 * record (docs/scale-out.md): it is this rank's id, hive_retain and
 * hive_release count it, a get after the last release and a second release
 * find nothing, it is no actor and no cell; it works as a ref argument of
 * another call (a local one on 2 ranks, a third rank's on 4: fetched from
 * here) and as a plain value that another rank gets; and more calls in
 * flight than there are slots take store records. */
static void test_call_futures(void **state)
{
    (void)state;
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    int next = (rank + 1) % size;
    hive_ref_t r, x, v;
    const int *who;
    assert_int_equal(hive_call(h, all[next], RANK, NULL, 0, NULL, &r), HIVE_OK);
    assert_int_equal(hive_mpi_owner(h, r.id), rank);
    assert_int_equal(hive_retain(h, r), HIVE_OK);
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, (const void **)&who, NULL), HIVE_OK);
    assert_int_equal(*who, next);
    assert_int_equal(hive_release(h, r), HIVE_OK);
    size_t n = 0;
    assert_int_equal(hive_get(h, r, 0, (const void **)&who, &n), HIVE_OK);   /* held still */
    assert_int_equal(n, sizeof(int));
    assert_int_equal(hive_call(h, (hive_actor_t){ r.id }, RANK, NULL, 0, NULL, &x), HIVE_ENOENT);
    assert_int_equal(hive_actor_kill(h, (hive_actor_t){ r.id }), HIVE_ENOENT);
    assert_int_equal(hive_cell_acquire(h, r, &v, NULL), HIVE_ENOENT);
    /* a ref argument */
    const uint64_t *sum;
    assert_int_equal(hive_call(h, all[(rank + 2) % size], SUM, &HIVE_REF(r), 1, NULL, &x), HIVE_OK);
    assert_int_equal(hive_get(h, x, HIVE_FOREVER, (const void **)&sum, NULL), HIVE_OK);
    assert_int_equal(sum[0], (uint64_t)next);    /* the int's bytes: next < 256 */
    assert_int_equal(sum[1], sizeof(int));
    assert_int_equal(hive_release(h, x), HIVE_OK);
    /* a value: each rank gets the next rank's future */
    uint64_t ids[64];
    MPI_Allgather(&r.id, 1, MPI_UINT64_T, ids, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    hive_ref_t theirs = { ids[next] };
    assert_int_equal(hive_get(h, theirs, HIVE_FOREVER, (const void **)&who, NULL), HIVE_OK);
    assert_int_equal(*who, (next + 1) % size);
    assert_int_equal(hive_release(h, theirs), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);                 /* the owners keep theirs until all got them */
    assert_int_equal(hive_release(h, r), HIVE_OK);
    assert_int_equal(hive_release(h, r), HIVE_ENOENT);
    assert_int_equal(hive_retain(h, r), HIVE_ENOENT);
    assert_int_equal(hive_get(h, r, 0, (const void **)&who, NULL), HIVE_ENOENT);
    /* the next rank's future, released by it: a get of it from here is
     * refused by its owner (no future of that generation holds the slot) */
    MPI_Allgather(&r.id, 1, MPI_UINT64_T, ids, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    assert_int_equal(hive_get(h, (hive_ref_t){ ids[next] }, HIVE_FOREVER, (const void **)&who, NULL),
                     HIVE_ENOENT);
    hive_release(h, (hive_ref_t){ ids[next] });   /* the failed copy's hold */
    /* bad arguments: none at all, and a ref of no rank after a local one
     * (retained for the call, then given back) */
    assert_int_equal(hive_call(h, all[next], ALL, NULL, 2, NULL, &x), HIVE_EINVAL);
    hive_ref_t mine;
    assert_int_equal(hive_put(h, "xy", 2, &mine), HIVE_OK);
    hive_arg_t bad[2] = { HIVE_REF(mine), HIVE_REF((hive_ref_t){ (uint64_t)4000 << 30 | 5 }) };
    assert_int_equal(hive_call(h, all[next], ALL, bad, 2, NULL, &x), HIVE_ENOENT);
    assert_int_equal(hive_release(h, mine), HIVE_OK);
    assert_int_equal(hive_get(h, mine, 0, (const void **)&who, NULL), HIVE_ENOENT);   /* no count kept */
    /* an answer above the slot's 48 bytes, taken by the get's own receive
     * (its buffer becomes the slot's): read, then made a record (a wait),
     * read again, and passed on as a ref argument */
    uint32_t big_n = 4096;
    assert_int_equal(hive_call(h, all[next], BIG, &HIVE_VAL(big_n), 1, NULL, &r), HIVE_OK);
    const unsigned char *bp;
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, (const void **)&bp, &n), HIVE_OK);
    assert_int_equal(n, big_n);
    uint64_t want_sum = 0;
    for (uint32_t i = 0; i < big_n; i++) {
        assert_int_equal(bp[i], (unsigned char)(i * 13 + big_n));
        want_sum += bp[i];
    }
    unsigned char ready[1];
    assert_int_equal(hive_wait(h, &r, 1, 1, HIVE_FOREVER, ready), 1);
    assert_int_equal(hive_get(h, r, 0, (const void **)&bp, &n), HIVE_OK);
    assert_int_equal(n, big_n);
    assert_int_equal(bp[big_n - 1], (unsigned char)((big_n - 1) * 13 + big_n));
    assert_int_equal(hive_call(h, all[(rank + 2) % size], SUM, &HIVE_REF(r), 1, NULL, &x), HIVE_OK);
    assert_int_equal(hive_get(h, x, HIVE_FOREVER, (const void **)&sum, NULL), HIVE_OK);
    assert_int_equal(sum[0], want_sum);
    assert_int_equal(sum[1], big_n);
    assert_int_equal(hive_release(h, x), HIVE_OK);
    assert_int_equal(hive_release(h, r), HIVE_OK);
    assert_int_equal(hive_release(h, r), HIVE_ENOENT);
    /* two short-form arguments, the second not at a multiple of 16 in the
     * message (12 bytes before it): copied out where it runs in place */
    unsigned char twelve[12], five[5];
    memset(twelve, 1, sizeof twelve);
    memset(five, 2, sizeof five);
    hive_arg_t two[2] = { HIVE_BYTES(twelve, sizeof twelve), HIVE_BYTES(five, sizeof five) };
    for (int i = 0; i < 20; i++) {
        assert_int_equal(hive_call(h, all[next], ALL, two, 2, NULL, &x), HIVE_OK);
        assert_int_equal(hive_get(h, x, HIVE_FOREVER, (const void **)&sum, NULL), HIVE_OK);
        assert_int_equal(sum[0], 12 + 10);
        assert_int_equal(sum[1], 2);
        assert_int_equal(hive_release(h, x), HIVE_OK);
    }
    /* more in flight than slots (4096) */
    enum { MANY = 5000 };
    hive_ref_t *many = malloc(MANY * sizeof *many);
    assert_non_null(many);
    for (int i = 0; i < MANY; i++)
        assert_int_equal(hive_call(h, all[next], RANK, NULL, 0, NULL, &many[i]), HIVE_OK);
    assert_int_equal(hive_mpi_owner(h, many[MANY - 1].id), rank);
    for (int i = 0; i < MANY; i++) {
        assert_int_equal(hive_get(h, many[i], HIVE_FOREVER, (const void **)&who, NULL), HIVE_OK);
        assert_int_equal(*who, next);
        assert_int_equal(hive_release(h, many[i]), HIVE_OK);
    }
    free(many);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Answers around the bare form's limit (up to 8 bytes go with no header,
 * world.h HIVE__MPI_BARE_MAX) and the short form's (48): every size from 0
 * to 17 bytes and 47-49, each taken three ways - by the waiter's own
 * receive (a round trip), by whoever probes (a burst of calls, then the
 * gets), and through a record made from the slot (hive_wait first) -
 * arrives with its size and bytes intact. */
static void check_big(hive_ref_t r, uint32_t n)
{
    const unsigned char *p = NULL;
    size_t got = 99;
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, (const void **)&p, &got), HIVE_OK);
    assert_int_equal(got, n);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(p[i], (unsigned char)(i * 13 + n));
    assert_int_equal(hive_release(h, r), HIVE_OK);
}

static void test_small_answers(void **state)
{
    (void)state;
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    hive_actor_t next = all[(rank + 1) % size];
    uint32_t sizes[21];
    for (uint32_t i = 0; i < 18; i++)
        sizes[i] = i;
    sizes[18] = 47, sizes[19] = 48, sizes[20] = 49;
    hive_ref_t burst[21];
    for (int i = 0; i < 21; i++) {       /* a round trip each */
        hive_ref_t r;
        assert_int_equal(hive_call(h, next, BIG, &HIVE_VAL(sizes[i]), 1, NULL, &r), HIVE_OK);
        check_big(r, sizes[i]);
    }
    for (int i = 0; i < 21; i++)         /* in flight together */
        assert_int_equal(hive_call(h, next, BIG, &HIVE_VAL(sizes[i]), 1, NULL, &burst[i]), HIVE_OK);
    for (int i = 20; i >= 0; i--)
        check_big(burst[i], sizes[i]);
    for (int i = 0; i < 21; i++) {       /* waited for through a record */
        hive_ref_t r;
        unsigned char ready[1];
        assert_int_equal(hive_call(h, next, BIG, &HIVE_VAL(sizes[i]), 1, NULL, &r), HIVE_OK);
        assert_int_equal(hive_wait(h, &r, 1, 1, HIVE_FOREVER, ready), 1);
        check_big(r, sizes[i]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A stale future id - released, its slot (4096 calls on) taken by a newer
 * future - names nothing: hive_release, hive_retain and hive_get of it
 * return HIVE_ENOENT and leave the newer future's count alone (the
 * generation is checked in the same CAS that moves a count). Then the
 * misuse raced: a second thread releases every id the first one has just
 * released, while the first keeps calling through the same slots. */
typedef struct stale_race {
    hive_actor_t     callee;
    _Atomic uint64_t last;     /* the id the caller released last; 0 when it is done */
    _Atomic int      done;
    int              bad;      /* the caller's: a call, get or release that went wrong */
    uint64_t         refused, moved;   /* the releaser's: HIVE_ENOENT / anything else */
} stale_race_t;

static void *stale_releaser(void *arg)
{
    stale_race_t *r = arg;
    while (!atomic_load(&r->done)) {
        uint64_t id = atomic_load(&r->last);
        if (id == 0)
            continue;
        if (hive_release(h, (hive_ref_t){ id }) == HIVE_ENOENT)
            r->refused++;
        else
            r->moved++;
        sched_yield();                   /* 4 ranks of spinning threads share 2 cores */
    }
    return NULL;
}

static void *stale_caller(void *arg)
{
    stale_race_t *r = arg;
    /* most released before their answer (the answer frees the slot),
     * every 16th after its get */
    for (int i = 0; i < 6000 && !r->bad; i++) {
        hive_ref_t f;
        const int *who;
        if (hive_call(h, r->callee, RANK, NULL, 0, NULL, &f) != HIVE_OK ||
            (i % 16 == 0 && (hive_get(h, f, HIVE_FOREVER, (const void **)&who, NULL) != HIVE_OK ||
                             *who != hive_mpi_owner(h, r->callee.id))) ||
            hive_release(h, f) != HIVE_OK)
            r->bad = i + 1;
        /* only a slot's future (calls past the slots held get a store
         * record, whose second release would take the layer's count: the
         * store's misuse, not the slots') */
        if ((f.id >> 42) == 0)
            atomic_store(&r->last, f.id);
    }
    /* one call waited for: the callee has run every call before it (one
     * caller's calls keep their order), so none is still served when the
     * next test starts (test_call_future_faults counts every allocation) */
    hive_ref_t f;
    const int *who;
    if (!r->bad && (hive_call(h, r->callee, RANK, NULL, 0, NULL, &f) != HIVE_OK ||
                    hive_get(h, f, HIVE_FOREVER, (const void **)&who, NULL) != HIVE_OK ||
                    hive_release(h, f) != HIVE_OK))
        r->bad = -1;
    atomic_store(&r->done, 1);
    return NULL;
}

static void test_future_stale_ids(void **state)
{
    (void)state;
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    int next = (rank + 1) % size;
    const int *who;
    hive_ref_t stale, f;
    assert_int_equal(hive_call(h, all[next], RANK, NULL, 0, NULL, &stale), HIVE_OK);
    assert_int_equal(hive_get(h, stale, HIVE_FOREVER, (const void **)&who, NULL), HIVE_OK);
    assert_int_equal(hive_release(h, stale), HIVE_OK);
    /* calls (released before their answers: those free the slots) until
     * one takes the stale id's slot again */
    for (;;) {
        assert_int_equal(hive_call(h, all[next], RANK, NULL, 0, NULL, &f), HIVE_OK);
        if ((f.id >> 42) == 0 && (f.id & 4095) == (stale.id & 4095))   /* a slot's future */
            break;
        assert_int_equal(hive_release(h, f), HIVE_OK);
    }
    assert_int_not_equal(f.id, stale.id);
    assert_int_equal(hive_release(h, stale), HIVE_ENOENT);
    assert_non_null(strstr(hive_last_error(), "does not exist"));
    assert_int_equal(hive_retain(h, stale), HIVE_ENOENT);
    assert_int_equal(hive_get(h, stale, 0, (const void **)&who, NULL), HIVE_ENOENT);
    /* the newer future kept its one count: a get, one release, then gone */
    assert_int_equal(hive_get(h, f, HIVE_FOREVER, (const void **)&who, NULL), HIVE_OK);
    assert_int_equal(*who, next);
    assert_int_equal(hive_release(h, f), HIVE_OK);
    assert_int_equal(hive_release(h, f), HIVE_ENOENT);
    assert_int_equal(hive_get(h, f, 0, (const void **)&who, NULL), HIVE_ENOENT);
    MPI_Barrier(MPI_COMM_WORLD);
    /* the double release raced against the slots' reuse */
    stale_race_t r = { .callee = all[next] };
    pthread_t a, b;
    assert_int_equal(pthread_create(&b, NULL, stale_releaser, &r), 0);
    assert_int_equal(pthread_create(&a, NULL, stale_caller, &r), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    assert_int_equal(r.bad, 0);
    assert_int_equal(r.moved, 0);
    assert_true(r.refused > 0);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Every allocation on a remote call's path fails once, in turn (the fault
 * hook, util/fault.h): the message of a call above 1 KiB, its list of ref
 * arguments kept until the answer, the record an answer above the slot's
 * 48 bytes needs, the record a wait needs, and a call made while all the
 * slots are held (the record path's future). Each either works as usual
 * or fails cleanly with HIVE_ENOMEM, and the slot is free again after.
 * Rank 0 injects; the others serve. */
static void test_call_future_faults(void **state)
{
    (void)state;
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    hive_actor_t callee = all[1];
    static unsigned char big[2000];
    memset(big, 3, sizeof big);
    hive_ref_t local;
    assert_int_equal(hive_put(h, "\x01\x02", 2, &local), HIVE_OK);
    enum { PLAIN, ANSWER_REC, ANSWER_BIG, WAIT_REC, NO_SLOT, NCASES };
    hive_ref_t *held = NULL;
    int failed[NCASES] = { 0 };
    for (int c = 0; c < NCASES && rank == 0; c++) {
        if (c == NO_SLOT) {              /* every slot held: the record path */
            held = malloc(4096 * sizeof *held);
            assert_non_null(held);
            for (int i = 0; i < 4096; i++)
                assert_int_equal(hive_call(h, callee, RANK, NULL, 0, NULL, &held[i]), HIVE_OK);
        }
        for (long k = 1;; k++) {
            hive_arg_t args[2] = { HIVE_BYTES(big, sizeof big), HIVE_REF(local) };
            /* BIG's answer: above the slot's 48 bytes; above 32 KiB (its
             * bytes after the header: drained when no record takes them) */
            uint32_t n = c == ANSWER_BIG ? 40000 : 100;
            hive_ref_t r;
            hive_mpi_stats_t s0;
            assert_int_equal(hive_mpi_stats(h, &s0), HIVE_OK);
            atomic_store(&hive__fault_checks, 0);
            atomic_store(&hive__fault_countdown, k);
            int rc = c == PLAIN || c == NO_SLOT ? hive_call(h, callee, ALL, args, 2, NULL, &r)
                                                : hive_call(h, callee, BIG, &HIVE_BYTES(&n, sizeof n), 1,
                                                            NULL, &r);
            int grc = HIVE_OK;
            const unsigned char *p = NULL;
            size_t len = 0;
            if (rc == HIVE_OK && c == ANSWER_REC) {
                /* taken by another thread (a record), not by the get's own
                 * receive (its buffer, no record): wait until the progress
                 * thread or an idle worker has taken a message (nothing
                 * else is in flight to rank 0 now) - a fixed sleep was not
                 * always enough under ASan on a loaded machine */
                uint64_t deadline = test_now_ns() + 30000000000ull;
                hive_mpi_stats_t s1;
                do {
                    test_sleep_ms(1);
                    assert_int_equal(hive_mpi_stats(h, &s1), HIVE_OK);
                } while (s1.recv_progress + s1.recv_idle == s0.recv_progress + s0.recv_idle &&
                         test_now_ns() < deadline);
            }
            if (rc == HIVE_OK && c == WAIT_REC) {   /* a wait: the future needs a record */
                unsigned char ready[1];
                int nr = hive_wait(h, &r, 1, 1, HIVE_FOREVER, ready);
                grc = nr == 1 ? HIVE_OK : nr;
            }
            if (rc == HIVE_OK && grc == HIVE_OK)
                grc = hive_get(h, r, HIVE_FOREVER, (const void **)&p, &len);
            atomic_store(&hive__fault_countdown, 0);
            long checks = atomic_load(&hive__fault_checks);
            if (rc != HIVE_OK) {
                assert_int_equal(rc, HIVE_ENOMEM);
                failed[c]++;
            } else if (grc != HIVE_OK) {
                /* hive_wait too says HIVE_ENOMEM for a future it could
                 * make no record for */
                assert_int_equal(grc, HIVE_ENOMEM);
                if (c == WAIT_REC)
                    assert_non_null(strstr(hive_last_error(), "cannot make a record"));
                failed[c]++;
            } else if (c == PLAIN || c == NO_SLOT) {
                assert_int_equal(len, 2 * sizeof(uint64_t));
                uint64_t sum[2];
                memcpy(sum, p, sizeof sum);
                assert_int_equal(sum[0], 3 * sizeof big + 3);
                assert_int_equal(sum[1], 2);
            } else {
                assert_int_equal(len, n);
                for (uint32_t i = 0; i < n; i++)
                    assert_int_equal(p[i], (unsigned char)(i * 13 + n));
            }
            if (rc == HIVE_OK) {
                assert_int_equal(hive_release(h, r), HIVE_OK);
                /* a slot's future is gone with its one count (a store
                 * record - every slot held, by this case or by answers
                 * not yet taken - may still hold the layer's count for a
                 * moment: no second release of it) */
                if ((r.id >> 42) == 0)
                    assert_int_equal(hive_release(h, r), HIVE_ENOENT);
            }
            if (checks < k)
                break;                   /* nothing left to fail: this call made every allocation */
        }
        /* ANSWER_REC's record is made only when another thread takes the
         * answer before the get does, and the fault countdown is shared by
         * every thread's allocations: under ASan on a loaded machine no run
         * of it may fail the record (seen in CI); its answers are checked
         * all the same. The other cases fail on the caller's own path. */
        if (failed[c] == 0 && c != ANSWER_REC)
            fail_msg("case %d: no allocation on its path failed cleanly", c);
    }
    if (held != NULL) {                  /* answered, then released: the slots are free again */
        for (int i = 0; i < 4096; i++) {
            const int *who;
            assert_int_equal(hive_get(h, held[i], HIVE_FOREVER, (const void **)&who, NULL), HIVE_OK);
            assert_int_equal(hive_release(h, held[i]), HIVE_OK);
        }
        free(held);
    }
    assert_int_equal(hive_release(h, local), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* The layer's own holds are pins (store.h): a user's release once too
 * many - of a remote get's cached copy (through a task's argument), of a
 * local argument of a remote call in flight, of the copy a callee fetched
 * for a call's argument, of a remote cell's version, of a call's future
 * that is a store record (every slot held) - is refused with HIVE_ESTATE
 * and takes nothing the layer still uses; each object goes with the
 * layer's last hold. */
static int64_t byte_sum(const char *s, size_t n)
{
    int64_t r = 0;
    for (size_t i = 0; i < n; i++)
        r += (unsigned char)s[i];
    return r;
}

static void test_over_release(void **state)
{
    (void)state;
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    char text[24] = { 0 }, theirs_text[24] = { 0 };
    snprintf(text, sizeof text, "rank %d", rank);
    snprintf(theirs_text, sizeof theirs_text, "rank %d", prev);
    hive_ref_t mine, objs[64];
    assert_int_equal(hive_put(h, text, sizeof text, &mine), HIVE_OK);
    MPI_Allgather(&mine.id, 1, MPI_UINT64_T, objs, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    hive_ref_t theirs = objs[prev];
    /* a remote get's cached copy, released by a task that has it as its argument */
    const char *d;
    const int64_t *r;
    assert_int_equal(hive_get(h, theirs, HIVE_FOREVER, (const void **)&d, NULL), HIVE_OK);
    hive_mpi_stats_t st0, st1;
    assert_int_equal(hive_mpi_stats(h, &st0), HIVE_OK);
    hive_ref_t t;
    assert_int_equal(hive_submit(h, t_drop, &HIVE_REF(theirs), 1, NULL, &t), HIVE_OK);
    assert_int_equal(hive_get(h, t, HIVE_FOREVER, (const void **)&r, NULL), HIVE_OK);
    assert_int_equal(r[0], HIVE_ESTATE);
    assert_int_equal(r[1], byte_sum(theirs_text, sizeof theirs_text));
    assert_int_equal(hive_release(h, t), HIVE_OK);
    assert_int_equal(hive_get(h, theirs, HIVE_FOREVER, (const void **)&d, NULL), HIVE_OK);
    assert_string_equal(d, theirs_text);
    assert_int_equal(hive_mpi_stats(h, &st1), HIVE_OK);
    assert_int_equal(st1.fetches, st0.fetches);   /* the same copy, still cached */
    assert_int_equal(hive_release(h, theirs), HIVE_OK);
    MPI_Barrier(MPI_COMM_WORLD);         /* the previous rank is done with mine */
    /* a local argument of a call in flight, released twice by its caller;
     * the callee's method releases its fetched copy once too often */
    hive_ref_t f;
    assert_int_equal(hive_call(h, all[next], DROP, &HIVE_REF(mine), 1, NULL, &f), HIVE_OK);
    assert_int_equal(hive_release(h, mine), HIVE_OK);
    assert_int_equal(hive_release(h, mine), HIVE_ESTATE);
    assert_non_null(strstr(hive_last_error(), "no count left"));
    assert_int_equal(hive_get(h, f, HIVE_FOREVER, (const void **)&r, NULL), HIVE_OK);
    assert_int_equal(r[0], HIVE_ESTATE);
    assert_int_equal(r[1], byte_sum(text, sizeof text));
    assert_int_equal(hive_release(h, f), HIVE_OK);
    /* the layer's hold on mine went with the answer */
    assert_int_equal(hive_release(h, mine), HIVE_ENOENT);
    MPI_Barrier(MPI_COMM_WORLD);
    /* a call's future (a slot) as another call's argument in flight,
     * released twice by its caller: the layer's hold is a pin on the slot,
     * so the second release is refused and the callee still fetches it */
    hive_ref_t s;
    const int *who;
    /* a slot's future (id >> 42 == 0): while every slot is held - answers
     * of the earlier tests' released calls still on their way, which a
     * slow world (ASan, 4 ranks on 2 cores) can take a while to bring -
     * a call's future is a store record, which this case is not about */
    uint64_t slot_deadline = test_now_ns() + 30000000000ull;
    for (;;) {
        assert_int_equal(hive_call(h, all[next], RANK, NULL, 0, NULL, &s), HIVE_OK);
        assert_int_equal(hive_get(h, s, HIVE_FOREVER, (const void **)&who, NULL), HIVE_OK);
        assert_int_equal(*who, next);
        if ((s.id >> 42) == 0 || test_now_ns() > slot_deadline)
            break;
        assert_int_equal(hive_release(h, s), HIVE_OK);
        test_sleep_ms(1);
    }
    assert_int_equal(s.id >> 42, 0);
    int32_t want = next;
    assert_int_equal(hive_call(h, all[next], DROP, &HIVE_REF(s), 1, NULL, &f), HIVE_OK);
    assert_int_equal(hive_release(h, s), HIVE_OK);
    assert_int_equal(hive_release(h, s), HIVE_ESTATE);
    assert_non_null(strstr(hive_last_error(), "no count left"));
    assert_int_equal(hive_get(h, s, 0, (const void **)&who, NULL), HIVE_ENOENT);   /* not the user's */
    assert_int_equal(hive_retain(h, s), HIVE_ENOENT);
    assert_int_equal(hive_get(h, f, HIVE_FOREVER, (const void **)&r, NULL), HIVE_OK);
    assert_int_equal(r[0], HIVE_ESTATE);
    assert_int_equal(r[1], byte_sum((const char *)&want, sizeof want));
    assert_int_equal(hive_release(h, f), HIVE_OK);
    /* the pin went with the answer: nothing holds the slot */
    assert_int_equal(hive_release(h, s), HIVE_ENOENT);
    MPI_Barrier(MPI_COMM_WORLD);
    /* a remote cell's version */
    hive_ref_t cell = { 0 }, v;
    if (rank == 0) {
        assert_int_equal(hive_put(h, "w0", 3, &v), HIVE_OK);
        assert_int_equal(hive_cell_new(h, v, &cell), HIVE_OK);
        assert_int_equal(hive_release(h, v), HIVE_OK);
    }
    MPI_Bcast(&cell.id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank != 0) {
        assert_int_equal(hive_cell_acquire(h, cell, &v, NULL), HIVE_OK);
        assert_int_equal(hive_release(h, v), HIVE_OK);
        assert_int_equal(hive_release(h, v), HIVE_ESTATE);
        hive_ref_t again;
        assert_int_equal(hive_cell_acquire(h, cell, &again, NULL), HIVE_OK);
        assert_int_equal(again.id, v.id);    /* unchanged: the copy kept here */
        assert_int_equal(hive_get(h, again, 0, (const void **)&d, NULL), HIVE_OK);
        assert_string_equal(d, "w0");
        assert_int_equal(hive_release(h, again), HIVE_OK);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        assert_int_equal(hive_release(h, cell), HIVE_OK);
    /* a call's future that is a store record (every slot held), released
     * twice while its answer is out */
    if (rank == 0) {
        hive_ref_t *held = malloc(4096 * sizeof *held);
        assert_non_null(held);
        for (int i = 0; i < 4096; i++)
            assert_int_equal(hive_call(h, all[next], RANK, NULL, 0, NULL, &held[i]), HIVE_OK);
        uint32_t ms = 50;
        hive_ref_t rec;
        assert_int_equal(hive_call(h, all[next], NAP, &HIVE_VAL(ms), 1, NULL, &rec), HIVE_OK);
        assert_int_not_equal(rec.id >> 42, 0);   /* a store record */
        assert_int_equal(hive_release(h, rec), HIVE_OK);
        assert_int_equal(hive_release(h, rec), HIVE_ESTATE);
        /* the answer comes in, and the record goes with the layer's hold */
        uint64_t deadline = test_now_ns() + 30000000000ull;
        int rc;
        while ((rc = hive_release(h, rec)) == HIVE_ESTATE && test_now_ns() < deadline)
            test_sleep_ms(1);
        assert_int_equal(rc, HIVE_ENOENT);
        for (int i = 0; i < 4096; i++)
            assert_int_equal(hive_release(h, held[i]), HIVE_OK);
        free(held);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* hive_wait and hive_get_many on another rank's ref whose copy cannot be
 * made (the record for it fails: the fault hook) say HIVE_ENOMEM, not
 * HIVE_ENOENT. */
static void test_remote_wait_no_memory(void **state)
{
    (void)state;
    hive_ref_t mine, objs[64];
    int64_t seven = 7;
    assert_int_equal(hive_put(h, &seven, sizeof seven, &mine), HIVE_OK);
    MPI_Allgather(&mine.id, 1, MPI_UINT64_T, objs, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    if (rank == 0) {
        hive_ref_t theirs = objs[1];
        const void *data[1];
        int status[1];
        atomic_store(&hive__fault_countdown, 1);
        int many = hive_get_many(h, &theirs, 1, HIVE_FOREVER, data, NULL, status);
        atomic_store(&hive__fault_countdown, 0);
        assert_int_equal(many, HIVE_ENOMEM);
        assert_int_equal(status[0], HIVE_ENOMEM);
        unsigned char ready[1];
        atomic_store(&hive__fault_countdown, 1);
        int rc = hive_wait(h, &theirs, 1, 1, HIVE_FOREVER, ready);
        atomic_store(&hive__fault_countdown, 0);
        assert_int_equal(rc, HIVE_ENOMEM);
        assert_non_null(strstr(hive_last_error(), "cannot"));
        assert_int_equal(hive_wait(h, &theirs, 1, 1, HIVE_FOREVER, ready), 1);
        assert_int_equal(hive_release(h, theirs), HIVE_OK);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    assert_int_equal(hive_release(h, mine), HIVE_OK);
}

/* Detach is collective; afterwards a remote handle names nothing: calls
 * return HIVE_ENOENT at once instead of hanging, and so do the futures of
 * remote calls the program had not released (detach waited for their
 * answers, then released them). Then attach again. */
static void test_detach_then_remote_fails(void **state)
{
    (void)state;
    hive_actor_t all[64];
    actor_everywhere(all, NULL);
    /* some calls in flight while the ranks detach, beside some taken first
     * (one of those made into a record: a wait needs one) */
    hive_ref_t r[16];
    for (int i = 0; i < 16; i++)
        assert_int_equal(hive_call(h, all[(rank + 1) % size], RANK, NULL, 0, NULL, &r[i]), HIVE_OK);
    unsigned char ready[1];
    assert_int_equal(hive_wait(h, r, 1, 1, HIVE_FOREVER, ready), 1);
    for (int i = 0; i < 8; i++) {
        const int *who;
        assert_int_equal(hive_get(h, r[i], HIVE_FOREVER, (const void **)&who, NULL), HIVE_OK);
        assert_int_equal(*who, (rank + 1) % size);
    }
    assert_int_equal(hive_mpi_detach(h), HIVE_OK);
    for (int i = 0; i < 16; i++) {
        const void *p;
        if ((r[i].id >> 42) != 0) {      /* a store record (every slot was held): the program's */
            assert_int_equal(hive_release(h, r[i]), HIVE_OK);
            continue;
        }
        assert_int_equal(hive_get(h, r[i], 0, &p, NULL), HIVE_ENOENT);
        assert_int_equal(hive_release(h, r[i]), HIVE_ENOENT);
    }
    hive_ref_t x;
    assert_int_equal(hive_call(h, all[(rank + 1) % size], RANK, NULL, 0, NULL, &x), HIVE_ENOENT);
    assert_int_equal(hive_mpi_rank(h), HIVE_ESTATE);
    assert_int_equal(hive_mpi_detach(h), HIVE_ESTATE);
    /* an engine that has made objects cannot take a world's tag */
    assert_int_equal(hive_mpi_attach(h, MPI_COMM_WORLD), HIVE_ESTATE);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    hive_config_t cfg = { .workers = 2, .no_pin = 1, .store_bytes = (size_t)256 << 20 };
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    assert_int_equal(hive_mpi_attach(h, MPI_COMM_WORLD), HIVE_OK);
}

static int setup(void **state)
{
    (void)state;
    hive_config_t cfg = { .workers = 2, .no_pin = 1, .store_bytes = (size_t)256 << 20 };
    if (hive_init(&cfg, &h) != HIVE_OK)
        return -1;
    return hive_mpi_attach(h, MPI_COMM_WORLD) == HIVE_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    if (hive_mpi_detach(h) != HIVE_OK)
        return -1;
    return hive_shutdown(h) == HIVE_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE || size < 2 || size > 64) {
        fprintf(stderr, "test_mpi: needs 2..64 ranks and MPI_THREAD_MULTIPLE (have %d ranks, level %d)\n",
                size, provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attach_rank_size),
        cmocka_unit_test(test_remote_calls_once_in_order),
        cmocka_unit_test(test_big_requests_in_order),
        cmocka_unit_test(test_round_trip_paths),
        cmocka_unit_test(test_calls_in_place),
        cmocka_unit_test(test_many_arguments),
        cmocka_unit_test(test_priorities_across_ranks),
        cmocka_unit_test(test_refs_through_ranks),
        cmocka_unit_test(test_remote_refs_everywhere),
        cmocka_unit_test(test_remote_get_sizes),
        cmocka_unit_test(test_failure_and_kill),
        cmocka_unit_test(test_name_lookup),
        cmocka_unit_test(test_name_lookup_cached),
        cmocka_unit_test(test_cell_across_ranks),
        cmocka_unit_test(test_cell_pushed),
        cmocka_unit_test(test_cell_publish_across_ranks),
        cmocka_unit_test(test_replay_fed_from_ranks),
        cmocka_unit_test(test_call_futures),
        cmocka_unit_test(test_small_answers),
        cmocka_unit_test(test_future_stale_ids),
        cmocka_unit_test(test_call_future_faults),
        cmocka_unit_test(test_over_release),
        cmocka_unit_test(test_remote_wait_no_memory),
        cmocka_unit_test(test_detach_then_remote_fails),
    };
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    MPI_Finalize();
    return failed ? 1 : 0;
}
