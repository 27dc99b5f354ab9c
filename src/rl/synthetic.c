/*
 * synthetic.c - the synthetic environment class (hive_env_synthetic) and
 * the calibrated spin it costs (hive_env_spin): a step is a fixed number
 * of loop iterations, calibrated once per process against the clock, so
 * its work is deterministic while its time tracks cost_ns on this machine.
 */
#include "hive.h"

#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

static double iters_per_ns;
static pthread_once_t calibrated = PTHREAD_ONCE_INIT;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* n iterations of a dependent multiply-add the compiler cannot skip. */
static uint64_t spin_iters(uint64_t n)
{
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

/* The fastest of several timed runs of at least 2 ms: the machine's speed
 * when nothing else interferes. */
static void calibrate(void)
{
    uint64_t n = 1 << 16, best = UINT64_MAX;
    for (;;) {
        uint64_t t0 = now_ns();
        spin_iters(n);
        uint64_t t = now_ns() - t0;
        if (t >= 2000000)
            break;
        n *= 2;
    }
    for (int k = 0; k < 7; k++) {
        uint64_t t0 = now_ns();
        spin_iters(n);
        uint64_t t = now_ns() - t0;
        if (t < best)
            best = t;
    }
    iters_per_ns = (double)n / (double)(best ? best : 1);
}

static uint64_t iters_for(uint64_t ns)
{
    pthread_once(&calibrated, calibrate);
    return (uint64_t)((double)ns * iters_per_ns + 0.5);
}

void hive_env_spin(uint64_t ns)
{
    spin_iters(iters_for(ns));
}

typedef struct synthetic {
    uint64_t iters;                      /* mean iterations per step */
    uint64_t rng;
    uint64_t sink;                       /* the spin's result, kept */
    unsigned t, len;
    int      heavy;
} synthetic_t;

static int syn_init(void *state, const void *config, unsigned env_id)
{
    (void)env_id;
    synthetic_t *s = state;
    hive_env_synthetic_config_t c = { .cost_ns = 1000, .episode_len = 100 };
    if (config != NULL)
        memcpy(&c, config, sizeof c);
    s->iters = iters_for(c.cost_ns);
    s->len = c.episode_len ? c.episode_len : 100;
    s->heavy = c.heavy_tail;
    return 0;
}

static void syn_observe(const synthetic_t *s, float *obs)
{
    obs[0] = (float)s->t;
    obs[1] = (float)(s->rng & 0xffff);
    obs[2] = (float)s->len;
    obs[3] = 1.0f;
}

static void syn_reset(void *state, uint64_t seed, void *obs_out)
{
    synthetic_t *s = state;
    s->rng = seed | 1;
    s->t = 0;
    syn_observe(s, obs_out);
}

/* Pareto of shape 1.5 with mean `mean` (scale mean / 3), capped at 50 x. */
static uint64_t heavy_draw(uint64_t *rng, uint64_t mean)
{
    uint64_t x = *rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    double u = ((double)(x >> 11) + 1.0) * (1.0 / 9007199254740992.0);   /* (0, 1] */
    double v = (double)mean / 3.0 / pow(u, 1.0 / 1.5);
    double cap = 50.0 * (double)mean;
    return (uint64_t)(v < cap ? v : cap);
}

static void syn_step(void *state, const void *action, void *obs_out, float *reward, int *done)
{
    synthetic_t *s = state;
    int32_t a;
    memcpy(&a, action, sizeof a);
    uint64_t n = s->heavy ? heavy_draw(&s->rng, s->iters) : s->iters;
    s->sink += spin_iters(n) + (uint64_t)a;
    s->t++;
    syn_observe(s, obs_out);
    *reward = 1.0f;
    *done = s->t >= s->len;
}

const hive_env_class_t hive_env_synthetic = {
    .name = "Synthetic",
    .state_size = sizeof(synthetic_t),
    .obs_dtype = HIVE_F32, .obs_ndim = 1, .obs_shape = { 4 },
    .act_dtype = HIVE_I32, .act_ndim = 0,
    .init = syn_init,
    .reset = syn_reset,
    .step = syn_step,
};
