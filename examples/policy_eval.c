/*
 * policy_eval.c - batch policy evaluation: score 100 states against one
 * shared weight matrix, one task per state, and collect the results in
 * chunks as they become ready.
 *
 * Shows: hive_put of a read-only object shared by every task (passed by ref,
 * read in place, never copied), small inline arguments (each state), results
 * returned with hive_return, and hive_wait + hive_get to fetch them by chunk.
 * Like the seed, it ends with the mean Q value over the states (here the
 * mean of each state's best action value).
 *
 *   make examples && build/examples/policy_eval
 */
#include <hive.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define STATES  100
#define DIM     64           /* floats per state */
#define ACTIONS 4            /* W is DIM x ACTIONS, row-major */
#define CHUNK   10

/* Every hive call returns HIVE_OK (0) or a negative HIVE_E* code (hive_wait:
 * a count). On failure print the call, the code and the engine's sentence. */
#define CHECK(call)                                                              \
    do {                                                                         \
        int rc_ = (call);                                                        \
        if (rc_ < 0) {                                                           \
            fprintf(stderr, "%s failed: %s: %s\n", #call, hive_strerror(rc_),    \
                    hive_last_error());                                          \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

/* A tiny deterministic generator: uniform floats in [-1, 1). */
static float uniform(uint32_t *x)
{
    *x = *x * 1664525u + 1013904223u;
    return (float)(*x >> 8) / (1 << 24) * 2 - 1;
}

/* max over actions of Q = state . W; the tasks and the serial check share it. */
static float max_q(const float *state, const float *w)
{
    float best = -INFINITY;
    for (int a = 0; a < ACTIONS; a++) {
        float q = 0;
        for (int i = 0; i < DIM; i++)
            q += state[i] * w[i * ACTIONS + a];
        best = q > best ? q : best;
    }
    return best;
}

/* The task: argument 0 is the state (inline bytes, copied at submit),
 * argument 1 the weights (a ref: the task reads the stored object in place). */
static int eval_task(hive_ctx_t *ctx)
{
    size_t ssize, wsize;
    const float *state = hive_arg(ctx, 0, &ssize);
    const float *w = hive_arg(ctx, 1, &wsize);
    if (ssize != DIM * sizeof(float) || wsize != DIM * ACTIONS * sizeof(float))
        return 1;                          /* nonzero: the result fails with HIVE_ETASK */
    float best = max_q(state, w);
    return hive_return(ctx, &best, sizeof best);   /* copied into the result; a failed
                                                      copy (< 0) fails the task too */
}

static double ms(struct timespec a, struct timespec b)
{
    return (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
}

int main(void)
{
    static float states[STATES][DIM], w[DIM * ACTIONS];
    uint32_t seed = 12345;                 /* same numbers every run */
    for (int s = 0; s < STATES; s++)
        for (int i = 0; i < DIM; i++)
            states[s][i] = uniform(&seed);
    for (int i = 0; i < DIM * ACTIONS; i++)
        w[i] = uniform(&seed);

    hive_t *h;
    CHECK(hive_init(NULL, &h));            /* defaults: one worker per core */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    /* The weights go into the store once; every task gets the same ref. */
    hive_ref_t wref, results[STATES];
    CHECK(hive_put(h, w, sizeof w, &wref));
    for (int s = 0; s < STATES; s++) {
        hive_arg_t args[2] = { HIVE_BYTES(states[s], sizeof states[s]), HIVE_REF(wref) };
        CHECK(hive_submit(h, eval_task, args, 2, NULL, &results[s]));
    }
    /* Our own count on the weights can go now: each queued task holds one. */
    CHECK(hive_release(h, wref));

    /* Fetch in chunks: wait until the whole chunk is ready, then read each. */
    float got[STATES];
    for (int c = 0; c < STATES; c += CHUNK) {
        CHECK(hive_wait(h, &results[c], CHUNK, CHUNK, HIVE_FOREVER, NULL));
        printf("states %2d-%2d max Q:", c, c + CHUNK - 1);
        for (int s = c; s < c + CHUNK; s++) {
            const void *p;
            size_t size;
            CHECK(hive_get(h, results[s], HIVE_FOREVER, &p, &size));  /* zero-copy */
            if (size != sizeof(float)) {
                fprintf(stderr, "result %d has %zu bytes, expected %zu\n", s, size, sizeof(float));
                return 1;
            }
            got[s] = *(const float *)p;    /* read before the release below */
            CHECK(hive_release(h, results[s]));
            printf(" %6.3f", got[s]);
        }
        printf("\n");
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sum = 0;
    for (int s = 0; s < STATES; s++)
        sum += got[s];
    printf("Mean Q value: %.4f\n", sum / STATES);

    /* The same computation serially: the results must match exactly (same
     * code, same order of operations). Tiny tasks like these cost more to
     * ship than to compute; tasks pay off when each does real work. */
    struct timespec t2;
    float diff = 0;
    for (int s = 0; s < STATES; s++)
        diff = fmaxf(diff, fabsf(got[s] - max_q(states[s], w)));
    clock_gettime(CLOCK_MONOTONIC, &t2);
    printf("hive: %d states on %u workers in %.3f ms (submit to last result); serial: %.3f ms; "
           "max |hive - serial| = %g%s\n", STATES, hive_num_workers(h), ms(t0, t1), ms(t1, t2), diff,
           diff == 0 ? " (exact)" : " MISMATCH");
    CHECK(hive_shutdown(h));
    return diff == 0 ? 0 : 1;
}
