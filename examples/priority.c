/*
 * priority.c - the seeds' question, with a clock: an actor is busy with a
 * stream of slow `insert` calls when a `sample` call arrives. `sample` is
 * HIGH priority in the actor's method table, so it does not wait for the
 * whole queue: it runs second, right after the insert running now.
 *
 * Each call returns when it started and ended (ms since the first call);
 * main prints them in the order the calls were made.
 *
 *   build/examples/priority
 */
#include <hive.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define INSERTS   5
#define INSERT_MS 50

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t t0;                      /* set before the first call, read by the methods */
static _Atomic int first_insert_began;

/* What every call returns: when it ran, in ms since t0. */
typedef struct span { double start, end; } span_t;

static int return_span(hive_ctx_t *ctx, uint64_t start)
{
    span_t s = { (start - t0) / 1e6, (now_ns() - t0) / 1e6 };
    return hive_return(ctx, &s, sizeof s);
}

/* ---- the actor: a table that takes slow inserts and quick samples */
typedef struct table { int64_t rows; } table_t;
enum { INSERT, SAMPLE };

static int insert(void *self, hive_ctx_t *ctx)
{
    table_t *t = self;
    uint64_t start = now_ns();
    atomic_store(&first_insert_began, 1);
    while (now_ns() - start < INSERT_MS * 1000000ull)
        ;                                /* ~50 ms of work; the actor is busy */
    t->rows++;
    return return_span(ctx, start);
}

static int sample(void *self, hive_ctx_t *ctx)
{
    table_t *t = self;
    (void)t->rows;                       /* a quick look at the state */
    return return_span(ctx, now_ns());
}

/* The priority in the table is what a call with NULL opts gets. */
static const hive_method_t table_methods[] = {
    [INSERT] = { "insert", insert, HIVE_PRIO_NORMAL },
    [SAMPLE] = { "sample", sample, HIVE_PRIO_HIGH },
};
static const hive_actor_class_t table_class = {
    .name = "Table", .size = sizeof(table_t), .methods = table_methods, .nmethods = 2,
};

static hive_ref_t call(hive_t *h, hive_actor_t a, unsigned method)
{
    hive_ref_t r;
    if (hive_call(h, a, method, NULL, 0, NULL, &r) != HIVE_OK) {
        fprintf(stderr, "hive_call: %s\n", hive_last_error());
        exit(1);
    }
    return r;
}

int main(void)
{
    hive_config_t cfg = { .store_bytes = 64u << 20 };
    hive_t *h;
    hive_actor_t table;
    if (hive_init(&cfg, &h) != HIVE_OK ||
        hive_actor_new(h, &table_class, NULL, 0, NULL, &table) != HIVE_OK) {
        fprintf(stderr, "start-up: %s\n", hive_last_error());
        return 1;
    }

    /* Five inserts, then one sample. In a real program the actor is already
     * busy when the sample comes; here we wait until the first insert has
     * begun, so every run prints the same story. (A sample that arrived
     * before any insert had started would simply run first.) */
    hive_ref_t calls[INSERTS + 1];
    t0 = now_ns();
    calls[0] = call(h, table, INSERT);
    while (!atomic_load(&first_insert_began))
        ;
    for (int i = 1; i < INSERTS; i++)
        calls[i] = call(h, table, INSERT);
    calls[INSERTS] = call(h, table, SAMPLE);   /* NULL opts: HIGH, from the table */

    printf("call       started   ended   (ms since the first call)\n");
    span_t spans[INSERTS + 1];
    for (int i = 0; i <= INSERTS; i++) {
        const void *p;
        if (hive_get(h, calls[i], HIVE_FOREVER, &p, NULL) != HIVE_OK) {
            fprintf(stderr, "hive_get: %s\n", hive_last_error());
            return 1;
        }
        spans[i] = *(const span_t *)p;
        hive_release(h, calls[i]);
        char name[24] = "sample";
        if (i < INSERTS)
            snprintf(name, sizeof name, "insert %d", i + 1);
        printf("%-9s %8.1f %7.1f\n", name, spans[i].start, spans[i].end);
    }
    /* the order they ran in: methods never overlap, so sort by (start, end) */
    int order[INSERTS + 1];
    for (int i = 0; i <= INSERTS; i++) {
        int k = i;
        for (; k > 0 && (spans[order[k - 1]].start > spans[i].start ||
                         (spans[order[k - 1]].start == spans[i].start &&
                          spans[order[k - 1]].end > spans[i].end)); k--)
            order[k] = order[k - 1];
        order[k] = i;
    }
    int sample_at = 0;
    printf("ran in this order:");
    for (int i = 0; i <= INSERTS; i++) {
        if (order[i] == INSERTS) {
            printf(" sample");
            sample_at = i;
        } else {
            printf(" insert%d", order[i] + 1);
        }
    }
    printf("\nsample, queued last behind %d inserts, ran %s\n", INSERTS,
           sample_at == 1 ? "second" : "out of turn");
    hive_shutdown(h);
    return sample_at == 1 ? 0 : 1;
}
