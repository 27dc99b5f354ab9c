/*
 * bench_mpi.c - the MPI layer against raw MPI in the same run (make
 * bench-mpi): a remote actor call's round trip beside an MPI ping-pong of
 * the same payload, a 64 MiB remote get beside MPI_Send/MPI_Recv of 64 MiB,
 * async remote calls per second, a cell's publish-to-visible latency, and the CPU an idle attached world uses
 * (getrusage over a few seconds: workers, hive's progress thread and Open
 * MPI's own threads together). Ranks 0 and 1 measure; the idle figure sums
 * every rank. Prints a table and writes JSON lines to the path in argv[1]
 * (if given). argv[2] "rt" runs the round trips only, 100 times longer,
 * "get" the 64 MiB get only, 4 times longer, "cell" the cell rows only,
 * 3 times each (to profile them).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "hive.h"
#include "hive/mpi.h"

static hive_t *h;
static int rank, size;
static FILE *json;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A barrier that sleeps while it waits: Open MPI's MPI_Barrier busy-polls,
 * and a rank spinning in it would take a core from the ranks measuring. */
static void quiet_barrier(void)
{
    MPI_Request r;
    int done = 0;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    struct timespec ts = { .tv_nsec = 100000 };
    while (MPI_Test(&r, &done, MPI_STATUS_IGNORE), !done)
        nanosleep(&ts, NULL);
}

/* Wait for a 0-byte message from `from` on `tag`, sleeping between tests
 * and with no nonblocking collective in flight: an active MPI_Ibarrier
 * (quiet_barrier) makes every progress call of every thread of the rank
 * progress it too, which would slow the polling of the rank's hive threads
 * (the worker taking calls, the thread serving a get) while the raw
 * ping-pong beside it has no such collective. */
static void quiet_recv(int from, int tag)
{
    MPI_Request r;
    int done = 0;
    MPI_Irecv(NULL, 0, MPI_BYTE, from, tag, MPI_COMM_WORLD, &r);
    struct timespec ts = { .tv_nsec = 100000 };
    while (MPI_Test(&r, &done, MPI_STATUS_IGNORE), !done)
        nanosleep(&ts, NULL);
}

static int m_echo(void *self, hive_ctx_t *ctx)
{
    (void)self;
    size_t n = 0;
    const void *p = hive_arg(ctx, 0, &n);
    return hive_return(ctx, p, n);
}

static int m_nop(void *self, hive_ctx_t *ctx)
{
    (void)self; (void)ctx;
    return 0;
}

static const hive_method_t methods[] = { { "echo", m_echo, 0 }, { "nop", m_nop, 0 } };
static const hive_actor_class_t echo_class = { .name = "Echo", .methods = methods, .nmethods = 2 };

/* A row: hive's figure beside raw MPI's; the ratio is hive's speed over
 * raw MPI's from the two (ratio < 0), or the one given. */
static void row_ratio(const char *name, double hive, double raw, const char *unit, double ratio)
{
    if (rank != 0)
        return;
    if (ratio < 0)
        ratio = raw > 0 ? (strstr(unit, "us") ? raw / hive : hive / raw) : 0;
    if (raw <= 0)                        /* a row with no raw MPI peer (async calls) */
        printf("%-34s hive %12.2f %-6s  (no raw MPI peer)\n", name, hive, unit);
    else
        printf("%-34s hive %12.2f %-6s  raw MPI %12.2f %-6s  ratio %.2f\n", name, hive, unit, raw, unit,
               ratio);
    if (json)
        fprintf(json, "{\"name\": \"%s\", \"hive\": %.3f, \"mpi\": %.3f, \"unit\": \"%s\", \"ratio\": %.3f}\n",
                name, hive, raw, unit, ratio);
}

static void row(const char *name, double hive, double raw, const char *unit)
{
    row_ratio(name, hive, raw, unit, -1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of v[0..n) (sorts v). */
static double quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[(int)(q * (n - 1))];
}

/* Round trip of a call carrying n bytes each way, beside a ping-pong of n
 * bytes. The row is the mean; on a loaded machine a few descheduled round
 * trips dominate it, so the median and the 90th percentile follow. */
/* Which threads received the messages since *before (each rank's own):
 * on rank 0 the answers, on rank 1 the calls. */
static void print_receivers(const char *what, const hive_mpi_stats_t *before)
{
    hive_mpi_stats_t now;
    hive_mpi_stats(h, &now);
    uint64_t mine[4] = { now.recv_waiting - before->recv_waiting, now.recv_idle - before->recv_idle,
                         now.recv_progress - before->recv_progress,
                         now.calls_in_place - before->calls_in_place };
    uint64_t *all = rank == 0 ? calloc((size_t)size * 4, sizeof *all) : NULL;
    MPI_Gather(mine, 4, MPI_UINT64_T, all, 4, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank != 0 || all == NULL)
        return;
    printf("  %s: rank 0 took its answers on: the waiting thread %llu, an idle worker %llu, the "
           "progress thread %llu;\n  rank 1 took the calls on: a waiting thread %llu, an idle worker "
           "%llu, the progress thread %llu; it ran %llu in place\n", what, (unsigned long long)all[0],
           (unsigned long long)all[1], (unsigned long long)all[2], (unsigned long long)all[4],
           (unsigned long long)all[5], (unsigned long long)all[6], (unsigned long long)all[7]);
    free(all);
}

static void bench_round_trip(hive_actor_t echo, size_t n, int iters)
{
    char *buf = calloc(1, n ? n : 1);
    double *th = calloc((size_t)iters, sizeof *th), *tr = calloc((size_t)iters, sizeof *tr);
    quiet_barrier();
    double hive_us = 0, raw_us = 0;
    hive_mpi_stats_t before;
    hive_mpi_stats(h, &before);
    if (rank == 0) {
        for (int i = -iters / 10; i < iters; i++) {      /* the first tenth warms up */
            double t0 = now_s();
            hive_ref_t r;
            const void *p;
            if (hive_call(h, echo, 0, &HIVE_BYTES(buf, n), 1, NULL, &r) != HIVE_OK ||
                hive_get(h, r, HIVE_FOREVER, &p, NULL) != HIVE_OK)
                MPI_Abort(MPI_COMM_WORLD, 3);
            hive_release(h, r);
            if (i >= 0)
                hive_us += th[i] = (now_s() - t0) * 1e6;
        }
        hive_us /= iters;
        MPI_Send(NULL, 0, MPI_BYTE, 1, 10, MPI_COMM_WORLD);   /* rank 1 may go on */
    } else if (rank == 1)
        quiet_recv(0, 10);
    quiet_barrier();
    char what[64];
    snprintf(what, sizeof what, "round trip %zu B", n);
    print_receivers(what, &before);
    for (int i = -iters / 10; i < iters; i++) {
        double t0 = now_s();
        if (rank == 0) {
            MPI_Send(buf, (int)n, MPI_BYTE, 1, 9, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)n, MPI_BYTE, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, (int)n, MPI_BYTE, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)n, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
        }
        if (i >= 0)
            raw_us += tr[i] = (now_s() - t0) * 1e6;
    }
    raw_us /= iters;
    /* The same ping-pong with the bytes hive's messages take on the wire
     * for this call (src/mpi/world.h: wire_calls_t there, the bare bytes
     * of up to 8 or wire_short_t back, or the long headers): Open MPI's shared-memory path is faster
     * for the smallest messages, which the raw ping-pong of n bytes uses
     * and a message with a header cannot. Printed beside the row. */
    size_t wcall = 24 + 8 + ((n + 7) & ~(size_t)7), wans = n <= 8 ? n : n <= 48 ? 16 + n : 48 + n;
    char *wbuf = calloc(1, wcall > wans ? wcall : wans);
    double *tw = calloc((size_t)iters, sizeof *tw);
    for (int i = -iters / 10; i < iters; i++) {
        double t0 = now_s();
        if (rank == 0) {
            MPI_Send(wbuf, (int)wcall, MPI_BYTE, 1, 9, MPI_COMM_WORLD);
            MPI_Recv(wbuf, (int)wans, MPI_BYTE, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(wbuf, (int)wcall, MPI_BYTE, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(wbuf, (int)wans, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
        }
        if (i >= 0)
            tw[i] = (now_s() - t0) * 1e6;
    }
    free(wbuf);
    char name[64];
    snprintf(name, sizeof name, "round trip %zu B", n);
    row(name, hive_us, raw_us, "us");
    if (rank == 0) {
        double hm = quantile(th, iters, 0.5), rm = quantile(tr, iters, 0.5);
        double h9 = quantile(th, iters, 0.9), r9 = quantile(tr, iters, 0.9);
        printf("  median: hive %.2f us, raw MPI %.2f us, ratio %.2f; 90th percentile: hive %.2f us, "
               "raw MPI %.2f us, ratio %.2f\n", hm, rm, rm / hm, h9, r9, r9 / h9);
        double wm = quantile(tw, iters, 0.5);
        printf("  raw MPI with hive's wire sizes (%zu B there, %zu B back): median %.2f us, hive's ratio "
               "to it %.2f\n", wcall, wans, wm, wm / hm);
        if (json)
            fprintf(json, "{\"name\": \"%s median vs raw MPI of the wire sizes\", \"hive\": %.3f, "
                    "\"mpi\": %.3f, \"unit\": \"us\", \"ratio\": %.3f}\n", name, hm, wm, wm / hm);
        if (json)
            fprintf(json, "{\"name\": \"%s median\", \"hive\": %.3f, \"mpi\": %.3f, \"unit\": \"us\", "
                    "\"ratio\": %.3f}\n", name, hm, rm, rm / hm);
    }
    free(th);
    free(tr);
    free(tw);
    free(buf);
}

/* A 64 MiB object fetched by rank 1 (its copy dropped each time), beside
 * MPI_Send/MPI_Recv of 64 MiB into a buffer touched beforehand, the two
 * alternating so that both see the same load. Rank 1 times each transfer;
 * the row is the median of each (one descheduled transfer on a loaded
 * machine moves a mean by a factor), the spread follows, and the median
 * of the pairs' ratios (a get and the raw transfer right after it: the
 * load drifts less within a pair than over the run). */
static void bench_get(size_t n, int iters)
{
    hive_ref_t ref = { 0 };
    if (rank == 0) {
        void *d;
        if (hive_create(h, n, &d, &ref) != HIVE_OK)
            MPI_Abort(MPI_COMM_WORLD, 4);
        memset(d, 7, n);
        hive_seal(h, ref);
    }
    MPI_Bcast(&ref.id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    char *buf = malloc(n);
    memset(buf, 1, n);
    double *th = calloc((size_t)iters, sizeof *th), *tr = calloc((size_t)iters, sizeof *tr);
    for (int i = -3; i < iters; i++) {   /* the first fetches fault the arena's pages in */
        quiet_barrier();
        double t0 = now_s();
        if (rank == 1) {
            const void *p;
            if (hive_get(h, ref, HIVE_FOREVER, &p, NULL) != HIVE_OK)
                MPI_Abort(MPI_COMM_WORLD, 5);
            if (i >= 0)
                th[i] = now_s() - t0;
            hive_release(h, ref);        /* drop the copy: fetch again */
            MPI_Send(NULL, 0, MPI_BYTE, 0, 10, MPI_COMM_WORLD);
        } else if (rank == 0)
            quiet_recv(1, 10);           /* rank 0 serves meanwhile */
        quiet_barrier();
        t0 = now_s();
        if (rank == 0)
            MPI_Send(buf, (int)n, MPI_BYTE, 1, 8, MPI_COMM_WORLD);
        else if (rank == 1) {
            MPI_Recv(buf, (int)n, MPI_BYTE, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (i >= 0)
                tr[i] = now_s() - t0;
        }
    }
    free(buf);
    double res[9] = { 0 };
    if (rank == 1) {
        double mib = (double)n / (1 << 20);
        double *pr = calloc((size_t)iters, sizeof *pr);
        for (int i = 0; i < iters; i++)
            pr[i] = tr[i] / th[i];           /* hive's bandwidth over raw MPI's */
        res[6] = quantile(pr, iters, 0.5);
        res[7] = quantile(pr, iters, 0.25);
        res[8] = quantile(pr, iters, 0.75);
        free(pr);
        res[0] = mib / quantile(th, iters, 0.5);
        res[1] = mib / quantile(tr, iters, 0.5);
        res[2] = mib / th[iters - 1];    /* sorted: the slowest, the fastest */
        res[3] = mib / th[0];
        res[4] = mib / tr[iters - 1];
        res[5] = mib / tr[0];
    }
    free(th);
    free(tr);
    MPI_Bcast(res, 9, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    row_ratio("remote get 64 MiB", res[0], res[1], "MiB/s", res[6]);
    if (rank == 0)
        printf("  medians of %d transfers each (ratio of the medians %.2f); the ratio is the median of the\n"
               "  pairs' (a get, then the raw transfer), quartiles %.2f-%.2f; range: hive %.0f-%.0f MiB/s, raw\n"
               "  MPI %.0f-%.0f MiB/s\n", iters, res[1] > 0 ? res[0] / res[1] : 0, res[7], res[8], res[2],
               res[3], res[4], res[5]);
    quiet_barrier();
    if (rank == 0)
        hive_release(h, ref);
}

/* Calls issued without waiting, then all results taken. */
static void bench_async(hive_actor_t echo, int n)
{
    quiet_barrier();
    if (rank == 0) {
        hive_ref_t *r = malloc(sizeof *r * (size_t)n);
        double t0 = now_s();
        for (int i = 0; i < n; i++)
            if (hive_call(h, echo, 1, NULL, 0, NULL, &r[i]) != HIVE_OK)
                MPI_Abort(MPI_COMM_WORLD, 6);
        for (int i = 0; i < n; i++) {
            const void *p;
            hive_get(h, r[i], HIVE_FOREVER, &p, NULL);
            hive_release(h, r[i]);
        }
        double s = now_s() - t0;
        row("async remote calls", n / s, 0, "call/s");
        free(r);
    }
    quiet_barrier();
}

/* Rank 0 publishes a version stamped with the clock; rank 1 acquires until
 * it sees it (one host: CLOCK_MONOTONIC is shared), then acknowledges. */
static void bench_cell(int rounds, int subscribe)
{
    hive_ref_t cell = { 0 }, v;
    if (rank == 0) {
        double t = now_s();
        hive_put(h, &t, sizeof t, &v);
        hive_cell_new(h, v, &cell);
        hive_release(h, v);
    }
    MPI_Bcast(&cell.id, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 1 && subscribe && hive_mpi_cell_subscribe(h, cell) != HIVE_OK)
        MPI_Abort(MPI_COMM_WORLD, 7);
    quiet_barrier();
    double lat = 0;
    for (int i = 1; i <= rounds; i++) {
        if (rank == 0) {
            double t = now_s();
            hive_put(h, &t, sizeof t, &v);
            hive_cell_publish(h, cell, v);
            hive_release(h, v);
            MPI_Request ack;             /* wait without spinning a core away from rank 1 */
            int got = 0;
            struct timespec ts = { .tv_nsec = 20000 };
            MPI_Irecv(NULL, 0, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &ack);
            while (MPI_Test(&ack, &got, MPI_STATUS_IGNORE), !got)
                nanosleep(&ts, NULL);
        } else if (rank == 1) {
            uint64_t seq = 0;
            const double *p;
            do {
                if (hive_cell_acquire(h, cell, &v, &seq) != HIVE_OK ||
                    hive_get(h, v, HIVE_FOREVER, (const void **)&p, NULL) != HIVE_OK)
                    MPI_Abort(MPI_COMM_WORLD, 7);
                if (seq == (uint64_t)i)
                    lat += now_s() - *p;
                hive_release(h, v);
            } while (seq < (uint64_t)i);
            MPI_Send(NULL, 0, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
        }
    }
    MPI_Bcast(&lat, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    if (rank == 0) {
        const char *name = subscribe ? "cell publish-to-visible (pushed)" : "cell publish-to-visible (pulled)";
        printf("%-34s %.2f us (publish on rank 0 to acquire on rank 1, polling)\n", name, lat / rounds * 1e6);
        if (json)
            fprintf(json, "{\"name\": \"%s\", \"hive\": %.3f, \"unit\": \"us\"}\n", name,
                    lat / rounds * 1e6);
        hive_release(h, cell);
    }
    quiet_barrier();
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

/* Every rank sits attached and idle for secs seconds. */
static void bench_idle(double secs)
{
    quiet_barrier();
    struct timespec ts = { .tv_sec = 1 };
    nanosleep(&ts, NULL);                  /* let the last activity cool down */
    double c0 = cpu_s(), t0 = now_s();
    struct timespec nap = { .tv_sec = (time_t)secs, .tv_nsec = (long)((secs - (time_t)secs) * 1e9) };
    nanosleep(&nap, NULL);
    double frac = (cpu_s() - c0) / (now_s() - t0), sum = 0;
    MPI_Reduce(&frac, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%-34s %d ranks together use %.2f%% of one core (%.2f%% per rank)\n", "idle world CPU",
               size, sum * 100, sum * 100 / size);
        if (json)
            fprintf(json, "{\"name\": \"idle world CPU\", \"ranks\": %d, \"core_percent\": %.3f}\n",
                    size, sum * 100);
    }
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "bench_mpi: needs 2 or more ranks and MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0 && argc > 1)
        json = fopen(argv[1], "w");
    hive_config_t cfg = { .workers = 1, .no_pin = 1, .store_bytes = (size_t)512 << 20 };
    if (hive_init(&cfg, &h) != HIVE_OK || hive_mpi_attach(h, MPI_COMM_WORLD) != HIVE_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);
    hive_actor_t mine, all[2];
    hive_actor_new(h, &echo_class, NULL, 0, NULL, &mine);
    uint64_t *ids = malloc(sizeof *ids * (size_t)size);   /* only ranks 0 and 1 measure */
    MPI_Allgather(&mine.id, 1, MPI_UINT64_T, ids, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    all[1].id = ids[1];
    free(ids);
    if (rank == 0)
        printf("hive MPI layer vs raw MPI (%d ranks, ranks 0 and 1 measure)\n", size);
    /* argv[2] "rt": the round trips only, longer (for profiling them);
     * "get": the 64 MiB get only, 100 transfers (the same) */
    int rt_only = argc > 2 && strcmp(argv[2], "rt") == 0;
    if (argc > 2 && strcmp(argv[2], "get") == 0) {
        bench_get((size_t)64 << 20, 100);
        goto out;
    }
    if (argc > 2 && strcmp(argv[2], "cell") == 0) {   /* the cell rows only, 3 times each */
        for (int i = 0; i < 3; i++) {
            bench_cell(500, 0);
            bench_cell(500, 1);
        }
        goto out;
    }
    bench_round_trip(all[1], 8, rt_only ? 200000 : 2000);
    bench_round_trip(all[1], 4096, rt_only ? 20000 : 2000);
    if (rt_only)
        goto out;
    bench_get((size_t)64 << 20, 25);
    bench_async(all[1], 20000);
    bench_cell(500, 0);
    bench_cell(500, 1);
    bench_idle(3.0);
out:
    hive_mpi_detach(h);
    hive_shutdown(h);
    if (json)
        fclose(json);
    MPI_Finalize();
    return 0;
}
