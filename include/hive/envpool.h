/*
 * hive/envpool.h - a vectorised environment pool for RL sampling (EnvPool's
 * model on hive's own workers; src/rl/envpool.c, src/rl/cartpole.c,
 * src/rl/synthetic.c). Included by <hive.h>.
 *
 * An environment type is a C class (hive_env_class_t): a state block,
 * observation and action shapes and dtypes, reset() and step(). A pool
 * holds num_envs environments spread round robin over the engine's NUMA
 * nodes (or as opts->env_node places them): each state block is allocated
 * on its node. Each environment has a home worker on its node (the node's
 * envs cut into contiguous ranges over its workers, or as opts->env_worker
 * says), and hive's workers step them (no thread of the pool's own): a
 * sync step cuts each worker's share into chunks of about 1 us of work
 * (one claim each, no atomic per environment) and posts each worker a job
 * (waking it only if it is parked); a send queues each env on its home
 * worker's slice and posts the same way. A job that runs out of work
 * stands about 20 us watching its slice before it ends (running other
 * jobs its worker finds meanwhile), so a stream of batches posts nothing
 * (not on the calling worker, which steps its own slice itself, and only
 * while a step costs under 4 us). A worker with nothing of its own
 * takes chunks or queued envs of its node's other workers, then of other
 * nodes. The calling thread
 * takes part when it is one of the engine's workers (a task or actor
 * method): a sync step steps its own worker's envs inline, as a pthread
 * program's thread 0 steps its slice, then helps with the rest; a recv
 * steps queued envs while it waits. So a batch never waits for a worker
 * that is late, preempted or busy in a long method. A batch cheaper than a
 * hand-off (under about 2 us of work at the step cost the calling worker
 * measured) is stepped by that worker alone: a sync step in a plain loop
 * with no atomic; a send (when its envs and the results still on their
 * way are that cheap) steps its envs before it returns, straight into the
 * rows recv will return (so the recv after finds them done).
 * A calling thread that is not a worker steps nothing (its timeouts hold)
 * and posts every worker a job, so an idle worker takes the envs of a busy
 * one.
 *
 * Auto-reset: a step that ends an episode (done = 1) resets the
 * environment at once, inside the same step; the observation returned with
 * done = 1 is the new episode's first (gym's vector-env convention; the
 * reward and done are the final step's).
 *
 * Sync mode: hive_envpool_reset and hive_envpool_step step every
 * environment and return the whole batch, row i for environment i.
 *
 * Async mode (EnvPool's send/recv): hive_envpool_send(actions, ids) starts
 * a step of each named environment and returns at once;
 * hive_envpool_recv returns the first batch_size environments to finish,
 * in finishing order, with their ids (cheap envs claimed together, under
 * 0.5 us a step and about 4 us of work in all, finish together; results
 * of different workers that come out during one look of recv's are taken
 * worker by worker, each worker's in its finishing order). hive_envpool_async_reset starts a
 * reset of every environment the same way. An environment is busy from
 * the send that names it until the recv that returns it.
 *
 * Batches (hive_envpool_batch_t) are hive arrays: obs [n, obs_shape...] of
 * obs_dtype, reward F32 [n], done U8 [n], env_id I32 [n]. In sync mode
 * the environments write their rows in place (step's obs_out points into
 * the batch); in async mode an environment steps into its own row of the
 * pool, the worker that stepped it hands its result to the pool's owner
 * through a ring of its own (no atomic read-modify-write), and recv
 * copies it into the next free row of the batch being filled (one copy
 * of obs_bytes) - except when a send steps it at once (above) or recv's
 * own thread steps it: then it is written in place. Either way the policy reads the arrays zero-copy. A batch's
 * arrays stay valid and unchanged until the pool's next reset, step or
 * recv call; hive_envpool_free releases them (views must not be used
 * after).
 *
 * Threads: a pool belongs to one thread at a time (as an actor pool); a
 * second thread calling in while another is inside gets HIVE_ESTATE. The
 * pool may be used from a user thread or from inside a task or actor
 * method (a waiting worker runs other jobs meanwhile). hive_envpool_free
 * must come before hive_shutdown of the engine; if the engine shuts down
 * while steps are queued, they never run and the waiting call returns
 * HIVE_ESHUTDOWN.
 *
 * Errors (nothing is sent or changed when a call fails):
 *   HIVE_EINVAL  NULL arguments; a class with a NULL reset/step, a bad
 *                dtype or shape, or sizes that overflow; num_envs of 0 or
 *                above 2^24; batch_size > num_envs; an env_node entry >=
 *                hive_num_nodes; an env_worker entry >= hive_num_workers; actions whose dtype or shape is not
 *                [n, act_shape...] of act_dtype (C-contiguous); an id
 *                outside 0 .. num_envs-1, or named twice in one send.
 *   HIVE_ESTATE  an environment named by send is busy (sent and not yet
 *                returned by recv); a sync call while async steps are
 *                outstanding; recv while fewer than batch_size results
 *                are on their way (it would wait forever); another thread
 *                is inside the pool.
 *   HIVE_ETIMEDOUT recv's timeout passed: nothing is taken, call again.
 *   HIVE_ENOMEM / HIVE_EFULL  memory or the object store is exhausted.
 *   HIVE_ESHUTDOWN the engine is shutting down.
 * The sentence (hive_last_error) names the numbers.
 */
#ifndef HIVE_ENVPOOL_H
#define HIVE_ENVPOOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hive_env_class {
    const char  *name;
    size_t       state_size;            /* bytes of state per environment, zero-filled at creation */
    hive_dtype_t obs_dtype;
    int          obs_ndim;              /* 0 .. HIVE_MAX_DIMS-1 */
    int64_t      obs_shape[HIVE_MAX_DIMS - 1];
    hive_dtype_t act_dtype;
    int          act_ndim;              /* 0: one scalar action per environment */
    int64_t      act_shape[HIVE_MAX_DIMS - 1];
    /* optional: once per environment, in hive_envpool_new on the calling
     * thread, before its first reset; config is opts->config, env_id its
     * index; nonzero fails hive_envpool_new (HIVE_EINVAL) */
    int        (*init)(void *state, const void *config, unsigned env_id);
    /* start an episode: write the first observation */
    void       (*reset)(void *state, uint64_t seed, void *obs_out);
    /* one step: write the next observation, the reward and done (0 or 1) */
    void       (*step)(void *state, const void *action, void *obs_out, float *reward, int *done);
} hive_env_class_t;

typedef struct hive_envpool_opts {      /* zero fields take their defaults */
    size_t          num_envs;           /* required: 1 .. 2^24 */
    size_t          batch_size;         /* async recv's batch; 0: num_envs */
    uint64_t        seed;               /* episode k of env i is reset with a seed mixed from
                                           (seed, i, k): runs are reproducible */
    const void     *config;             /* passed to the class's init */
    const unsigned *env_node;           /* NULL: env i on node i mod hive_num_nodes; else
                                           num_envs node indices */
    const unsigned *env_worker;         /* NULL: each node's envs cut into contiguous ranges
                                           over its workers; else num_envs worker indices
                                           (env i's home worker; its node is that worker's,
                                           env_node is then ignored) */
} hive_envpool_opts_t;

typedef struct hive_envpool_batch {
    size_t       n;                     /* rows */
    hive_array_t obs;                   /* [n, obs_shape...] obs_dtype */
    hive_array_t reward;                /* [n] F32 */
    hive_array_t done;                  /* [n] U8 */
    hive_array_t env_id;                /* [n] I32 */
} hive_envpool_batch_t;

typedef struct hive_envpool hive_envpool_t;

/* hive_envpool_new - num_envs environments of cls (copied), each state
 * allocated on its node and init'ed (if init is set); none reset yet. */
int hive_envpool_new(hive_t *h, const hive_env_class_t *cls, const hive_envpool_opts_t *opts,
                     hive_envpool_t **out);
/* hive_envpool_free - drop the steps still queued (not stepped), wait for
 * those being stepped, release the arrays and states. A job of the pool
 * still queued on a busy worker is not waited for: it finds the pool gone
 * and ends. NULL is a no-op (HIVE_OK). */
int hive_envpool_free(hive_envpool_t *pool);

size_t hive_envpool_num_envs(const hive_envpool_t *pool);      /* 0 for NULL */
size_t hive_envpool_batch_size(const hive_envpool_t *pool);    /* 0 for NULL */

/* Sync: reset every environment / step environment i with actions row i;
 * *out gets the whole batch (n = num_envs, env_id[i] = i). */
int hive_envpool_reset(hive_envpool_t *pool, hive_envpool_batch_t *out);
int hive_envpool_step(hive_envpool_t *pool, const hive_array_t *actions, hive_envpool_batch_t *out);

/* Async: start a step of env_ids[k] with actions row k (n rows); returns
 * at once. */
int hive_envpool_send(hive_envpool_t *pool, const hive_array_t *actions, const int32_t *env_ids,
                      size_t n);
/* Async: start a reset of every environment (all must be idle). */
int hive_envpool_async_reset(hive_envpool_t *pool);
/* Async: wait up to timeout_ns (< 0 forever, 0 polls) for the next
 * batch_size environments to finish; *out gets them (n = batch_size), in
 * finishing order, and they are idle again. */
int hive_envpool_recv(hive_envpool_t *pool, int64_t timeout_ns, hive_envpool_batch_t *out);

/* ------------------------------------------------------ environments */

/* CartPole-v1 (Barto, Sutton & Anderson 1983; Gym's constants): obs F32
 * [4] (x, x', theta, theta'), action I32 scalar (0 push left, 1 right),
 * reward 1 per step, done when the pole passes 12 degrees, the cart
 * leaves +-2.4, or after 500 steps. config unused. */
extern const hive_env_class_t hive_env_cartpole;

/* A synthetic environment whose step costs cost_ns of calibrated,
 * deterministic spinning (a fixed count of loop iterations per step, not
 * a clock), standing in for MuJoCo (~10-50 us) or Atari (~100s of us)
 * steps in benchmarks. obs F32 [4], action I32 scalar, reward 1, done
 * every episode_len steps. heavy_tail: the cost of each step is drawn
 * (deterministically, from the env's seed) from a Pareto distribution of
 * shape 1.5 whose mean is cost_ns, capped at 50 x cost_ns. config: a
 * hive_env_synthetic_config_t (NULL: 1 us, 100-step episodes). */
typedef struct hive_env_synthetic_config {
    uint64_t cost_ns;
    unsigned episode_len;               /* 0: 100 */
    int      heavy_tail;
} hive_env_synthetic_config_t;
extern const hive_env_class_t hive_env_synthetic;

/* hive_env_spin - spin for about ns nanoseconds of this machine's time,
 * as a fixed iteration count calibrated once per process (the synthetic
 * env's cost; benchmarks use it to measure single-thread speed). */
void hive_env_spin(uint64_t ns);

#ifdef __cplusplus
}
#endif

#endif /* HIVE_ENVPOOL_H */
