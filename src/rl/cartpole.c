/*
 * cartpole.c - the CartPole-v1 environment class (hive_env_cartpole):
 * the classic cart-pole physics (Barto, Sutton & Anderson 1983) with the
 * constants and termination rules of Gym's CartPole-v1.
 */
#include "hive.h"

#include <math.h>
#include <string.h>

typedef struct cartpole {
    double   x, xd, th, thd;
    int      steps;
    uint64_t rng;
} cartpole_t;

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Uniform in [-0.05, 0.05). */
static double small_uniform(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0) * 0.1 - 0.05;
}

static void observe(const cartpole_t *c, float *obs)
{
    obs[0] = (float)c->x;
    obs[1] = (float)c->xd;
    obs[2] = (float)c->th;
    obs[3] = (float)c->thd;
}

static void cp_reset(void *state, uint64_t seed, void *obs_out)
{
    cartpole_t *c = state;
    c->rng = seed | 1;                   /* xorshift needs a nonzero state */
    c->x = small_uniform(&c->rng);
    c->xd = small_uniform(&c->rng);
    c->th = small_uniform(&c->rng);
    c->thd = small_uniform(&c->rng);
    c->steps = 0;
    observe(c, obs_out);
}

/* One Euler step of 0.02 s. */
static void cp_step(void *state, const void *action, void *obs_out, float *reward, int *done)
{
    const double gravity = 9.8, masspole = 0.1, total_mass = 1.1, length = 0.5;
    const double polemass_length = masspole * length, force_mag = 10.0, tau = 0.02;
    cartpole_t *c = state;
    int32_t a;
    memcpy(&a, action, sizeof a);
    double force = a ? force_mag : -force_mag;
    double ct = cos(c->th), st = sin(c->th);
    double temp = (force + polemass_length * c->thd * c->thd * st) / total_mass;
    double thacc = (gravity * st - ct * temp) /
                   (length * (4.0 / 3.0 - masspole * ct * ct / total_mass));
    double xacc = temp - polemass_length * thacc * ct / total_mass;
    c->x += tau * c->xd;
    c->xd += tau * xacc;
    c->th += tau * c->thd;
    c->thd += tau * thacc;
    c->steps++;
    observe(c, obs_out);
    *reward = 1.0f;
    *done = c->x < -2.4 || c->x > 2.4 || c->th < -0.2094395 || c->th > 0.2094395 || c->steps >= 500;
}

const hive_env_class_t hive_env_cartpole = {
    .name = "CartPole-v1",
    .state_size = sizeof(cartpole_t),
    .obs_dtype = HIVE_F32, .obs_ndim = 1, .obs_shape = { 4 },
    .act_dtype = HIVE_I32, .act_ndim = 0,
    .reset = cp_reset,
    .step = cp_step,
};
