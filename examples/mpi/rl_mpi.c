/*
 * rl_mpi.c - the RL pipeline across MPI ranks (make demo-mpi: 4 ranks).
 * Rank 0 holds the learner: an actor named "learner" with the replay
 * buffer and the weights; its main thread runs updates, and each update
 * publishes the new weights into a cell. Every other rank is an
 * environment pool: it finds the learner by name (hive_actor_lookup across
 * ranks), asks it for the weights' cell and subscribes to it
 * (hive_mpi_cell_subscribe: rank 0 pushes each version to it), reads the
 * current weights with a local hive_cell_acquire (no message), steps its
 * environments with that policy, and pushes the transitions to the replay
 * buffer in batches (async remote calls, a few in flight). Rank 0 prints,
 * each second, global env steps/s, learner updates/s and the policy lag
 * (learner version minus the version that produced a batch).
 *
 *   mpirun -np 4 build/examples/rl_mpi [seconds]      (default 5)
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hive.h"
#include "hive/mpi.h"

#define OBS      4
#define NENVS    64
#define STEPS    16                       /* steps per env between weight reads */
#define BATCH    (NENVS * STEPS)
#define CAPACITY 65536
#define INFLIGHT 4
#define PUBLISH_EVERY 8                   /* updates per broadcast of the weights: each is a
                                             push to every env rank, which takes it in */

typedef struct transition { float obs[OBS]; float act, rew; } transition_t;
typedef struct weights { uint64_t version; int stop; float w[OBS]; } weights_t;
typedef struct batch_hdr { uint64_t version; uint32_t n; } batch_hdr_t;

typedef struct learner {
    transition_t ring[CAPACITY];
    uint64_t     pushed;                  /* transitions ever pushed */
    uint64_t     lag_sum, batches;        /* policy lag summed over batches */
    weights_t    cur;
    hive_ref_t   cell;                    /* the published weights */
} learner_t;

/* A new version of the weights into the cell: subscribed ranks get it
 * pushed (small: it travels in the push). */
static int publish(hive_ctx_t *ctx, learner_t *l)
{
    hive_t *h = hive_engine(ctx);
    hive_ref_t v;
    int rc = hive_put(h, &l->cur, sizeof l->cur, &v);
    if (rc != HIVE_OK)
        return 1;
    rc = hive_cell_publish(h, l->cell, v);
    hive_release(h, v);
    return rc != HIVE_OK;
}

/* push(hdr, transitions): into the ring; the lag is counted */
static int l_push(void *self, hive_ctx_t *ctx)
{
    learner_t *l = self;
    size_t n0, n1;
    const batch_hdr_t *h = hive_arg(ctx, 0, &n0);
    const transition_t *t = hive_arg(ctx, 1, &n1);
    if (n0 != sizeof *h || n1 != h->n * sizeof *t)
        return 1;
    for (uint32_t i = 0; i < h->n; i++)
        l->ring[(l->pushed + i) % CAPACITY] = t[i];
    l->pushed += h->n;
    l->lag_sum += l->cur.version - h->version;
    l->batches++;
    return 0;
}

/* cell(): the weights' cell, made on the first call */
static int l_cell(void *self, hive_ctx_t *ctx)
{
    learner_t *l = self;
    if (l->cell.id == 0) {
        hive_t *h = hive_engine(ctx);
        hive_ref_t v;
        if (hive_put(h, &l->cur, sizeof l->cur, &v) != HIVE_OK)
            return 1;
        int rc = hive_cell_new(h, v, &l->cell);
        hive_release(h, v);
        if (rc != HIVE_OK)
            return 1;
    }
    return hive_return(ctx, &l->cell, sizeof l->cell);
}

/* update(): one step of a toy policy gradient on 256 sampled transitions */
static int l_update(void *self, hive_ctx_t *ctx)
{
    learner_t *l = self;
    (void)ctx;
    uint64_t have = l->pushed < CAPACITY ? l->pushed : CAPACITY;
    if (have == 0)
        return 0;
    float g[OBS] = { 0 };
    for (int i = 0; i < 256; i++) {
        const transition_t *t = &l->ring[(l->cur.version * 7919u + (uint64_t)i * 104729u) % have];
        for (int k = 0; k < OBS; k++)
            g[k] += t->rew * t->act * t->obs[k];
    }
    for (int k = 0; k < OBS; k++)
        l->cur.w[k] += 1e-4f * g[k];
    l->cur.version++;
    return l->cell.id && l->cur.version % PUBLISH_EVERY == 0 ? publish(ctx, l) : 0;
}

static int l_stats(void *self, hive_ctx_t *ctx)
{
    learner_t *l = self;
    uint64_t s[3] = { l->pushed, l->lag_sum, l->batches };
    return hive_return(ctx, s, sizeof s);
}

static int l_stop(void *self, hive_ctx_t *ctx)
{
    learner_t *l = self;
    l->cur.stop = 1;
    return l->cell.id ? publish(ctx, l) : 0;
}

enum { PUSH, CELL, UPDATE, STATS, STOP };
static const hive_method_t learner_methods[] = {
    [PUSH] = { "push", l_push, 0 }, [CELL] = { "cell", l_cell, HIVE_PRIO_HIGH },
    [UPDATE] = { "update", l_update, 0 }, [STATS] = { "stats", l_stats, HIVE_PRIO_HIGH },
    [STOP] = { "stop", l_stop, HIVE_PRIO_HIGH },
};
static const hive_actor_class_t learner_class = {
    .name = "Learner", .size = sizeof(learner_t), .methods = learner_methods, .nmethods = 5,
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int call_sync(hive_t *h, hive_actor_t a, unsigned m, void *out, size_t n)
{
    hive_ref_t r;
    const void *p;
    size_t got = 0;
    int rc = hive_call(h, a, m, NULL, 0, NULL, &r);
    if (rc == HIVE_OK && (rc = hive_get(h, r, HIVE_FOREVER, &p, &got)) == HIVE_OK && out)
        memcpy(out, p, got < n ? got : n);
    if (r.id)
        hive_release(h, r);
    return rc;
}

static void run_learner(hive_t *h, hive_actor_t learner, double seconds)
{
    double t0 = now_s(), tick = t0 + 1;
    uint64_t updates = 0, last_updates = 0, last[3] = { 0 };
    while (now_s() - t0 < seconds) {
        if (call_sync(h, learner, UPDATE, NULL, 0) != HIVE_OK)
            break;
        updates++;
        if (now_s() >= tick) {
            uint64_t s[3];
            call_sync(h, learner, STATS, s, sizeof s);
            uint64_t nb = s[2] - last[2];
            printf("t=%4.1fs  env steps/s %9.0f  learner updates/s %7.0f  policy lag %.1f versions\n",
                   now_s() - t0, (double)(s[0] - last[0]), (double)(updates - last_updates),
                   nb ? (double)(s[1] - last[1]) / (double)nb : 0.0);
            fflush(stdout);
            memcpy(last, s, sizeof s);
            last_updates = updates;
            tick += 1;
        }
    }
    call_sync(h, learner, STOP, NULL, 0);
}

/* One env rank: read weights, step NENVS toy envs STEPS times, push. */
static void run_envs(hive_t *h, int rank)
{
    hive_actor_t learner;
    if (hive_actor_lookup(h, "learner", &learner) != HIVE_OK) {
        fprintf(stderr, "rank %d: no learner: %s\n", rank, hive_last_error());
        return;
    }
    hive_ref_t cell;
    if (call_sync(h, learner, CELL, &cell, sizeof cell) != HIVE_OK ||
        hive_mpi_cell_subscribe(h, cell) != HIVE_OK) {
        fprintf(stderr, "rank %d: no weights: %s\n", rank, hive_last_error());
        return;
    }
    float state[NENVS][OBS];
    unsigned seed = (unsigned)rank * 2654435761u;
    for (int e = 0; e < NENVS; e++)
        for (int k = 0; k < OBS; k++)
            state[e][k] = (float)(rand_r(&seed) % 200 - 100) / 100.0f;
    static transition_t batch[BATCH];
    hive_ref_t inflight[INFLIGHT] = { { 0 } };
    for (unsigned it = 0;; it++) {
        weights_t w;                         /* the newest version pushed here: no message */
        hive_ref_t v;
        const void *p;
        if (hive_cell_acquire(h, cell, &v, NULL) != HIVE_OK)
            break;
        int rc = hive_get(h, v, HIVE_FOREVER, &p, NULL);
        if (rc == HIVE_OK)
            memcpy(&w, p, sizeof w);
        hive_release(h, v);
        if (rc != HIVE_OK || w.stop)
            break;
        int n = 0;
        for (int s = 0; s < STEPS; s++)
            for (int e = 0; e < NENVS; e++, n++) {
                float dot = 0;
                for (int k = 0; k < OBS; k++)
                    dot += w.w[k] * state[e][k];
                float act = dot + (float)(rand_r(&seed) % 100 - 50) / 100.0f > 0 ? 1.0f : -1.0f;
                transition_t *t = &batch[n];
                memcpy(t->obs, state[e], sizeof t->obs);
                t->act = act;
                state[e][0] += 0.05f * act + 0.01f * state[e][1];
                state[e][1] = 0.9f * state[e][1] + 0.1f * state[e][2];
                state[e][2] = sinf(state[e][0]);
                state[e][3] = cosf(state[e][1]);
                t->rew = -fabsf(state[e][0]);
            }
        batch_hdr_t bh = { .version = w.version, .n = (uint32_t)n };
        hive_arg_t args[2] = { HIVE_VAL(bh), HIVE_BYTES(batch, sizeof(transition_t) * (size_t)n) };
        hive_ref_t *slot = &inflight[it % INFLIGHT];
        if (slot->id) {                      /* keep at most INFLIGHT pushes in flight */
            const void *p;
            hive_get(h, *slot, HIVE_FOREVER, &p, NULL);
            hive_release(h, *slot);
        }
        if (hive_call(h, learner, PUSH, args, 2, NULL, slot) != HIVE_OK)
            break;
    }
    for (int i = 0; i < INFLIGHT; i++)
        if (inflight[i].id) {
            const void *p;
            hive_get(h, inflight[i], HIVE_FOREVER, &p, NULL);
            hive_release(h, inflight[i]);
        }
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double seconds = argc > 1 ? atof(argv[1]) : 5;
    hive_t *h;
    hive_config_t cfg = { .workers = 1, .no_pin = 1, .store_bytes = (size_t)256 << 20 };
    if (provided < MPI_THREAD_MULTIPLE || hive_init(&cfg, &h) != HIVE_OK ||
        hive_mpi_attach(h, MPI_COMM_WORLD) != HIVE_OK) {
        fprintf(stderr, "rank %d: cannot start: %s\n", rank, hive_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    hive_actor_t learner = { 0 };
    if (rank == 0) {
        hive_actor_opts_t o = { .name = "learner" };
        if (hive_actor_new(h, &learner_class, NULL, 0, &o, &learner) != HIVE_OK)
            MPI_Abort(MPI_COMM_WORLD, 1);
        printf("learner on rank 0, env pools of %d envs on ranks 1-%d\n", NENVS, size - 1);
    }
    hive_ref_t cell = { 0 };
    if (rank == 0 && call_sync(h, learner, CELL, &cell, sizeof cell) != HIVE_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);        /* the weights' cell, before any update */
    MPI_Barrier(MPI_COMM_WORLD);             /* the name exists before anyone looks */
    if (rank == 0)
        run_learner(h, learner, seconds);
    else
        run_envs(h, rank);
    hive_mpi_detach(h);                      /* collective: every rank's answers are in */
    if (cell.id)
        hive_release(h, cell);               /* the learner's count (nobody reads it now) */
    hive_shutdown(h);
    MPI_Finalize();
    return 0;
}
