/*
 * compute_square.c - the seeds' first program: four tasks that each sleep
 * one second and return the square of their argument, run on four workers,
 * so the whole batch takes about one second, not four.
 *
 *   Ray:   futures = [compute_square.remote(i) for i in range(4)]
 *          print(ray.get(futures))            # [0, 1, 4, 9]
 *
 * Four workers on a machine with fewer cores is allowed: the workers are
 * threads, and a sleeping task leaves its core to the others.
 *
 *   build/examples/compute_square
 */
#include <hive.h>

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define N 4

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* The task: sleep a second (a stand-in for real work), return x * x. */
static int compute_square(hive_ctx_t *ctx)
{
    int64_t x = *(const int64_t *)hive_arg(ctx, 0, NULL);
    struct timespec one_second = { 1, 0 };
    nanosleep(&one_second, NULL);
    int64_t square = x * x;
    return hive_return(ctx, &square, sizeof square);
}

int main(void)
{
    hive_config_t cfg = { .workers = N, .store_bytes = 64u << 20 };
    hive_t *h;
    int rc = hive_init(&cfg, &h);
    if (rc != HIVE_OK) {
        fprintf(stderr, "hive_init: %s: %s\n", hive_strerror(rc), hive_last_error());
        return 1;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    /* futures = [compute_square.remote(i) for i in range(4)] */
    hive_ref_t futures[N];
    for (int64_t i = 0; i < N; i++) {
        rc = hive_submit(h, compute_square, &HIVE_VAL(i), 1, NULL, &futures[i]);
        if (rc != HIVE_OK) {
            fprintf(stderr, "hive_submit: %s\n", hive_last_error());
            return 1;
        }
    }

    /* ray.get(futures): every result, in submission order */
    int64_t results[N];
    for (int i = 0; i < N; i++) {
        const void *p;
        if (hive_get(h, futures[i], HIVE_FOREVER, &p, NULL) != HIVE_OK) {
            fprintf(stderr, "hive_get: %s\n", hive_last_error());
            return 1;
        }
        results[i] = *(const int64_t *)p;
        hive_release(h, futures[i]);
    }
    double took = seconds_since(&t0);

    printf("[");
    for (int i = 0; i < N; i++)
        printf("%s%lld", i ? ", " : "", (long long)results[i]);
    printf("]\n");
    printf("%d tasks of 1 s each on %u workers took %.2f s\n", N, hive_num_workers(h), took);
    hive_shutdown(h);
    return 0;
}
