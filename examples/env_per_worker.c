/*
 * env_per_worker.c - the seeds' per-worker environment: an expensive object
 * (a simulator) built once on each worker and reused by the tasks that run
 * there, instead of being rebuilt by every task. In Python the seeds kept
 * it in a module-level global of the worker process; in hive it is a
 * worker-local value (hive_local), and its def says what happens to it
 * between two tasks on the same worker. The three ways:
 *
 *   rebuild each time  reinit = NULL: fini, then init again ("Making new env"
 *                      before every task)
 *   a custom reset     reinit = env_reset: the same env, put back in its
 *                      start state (the counter goes back to 0)
 *   keep as is         reinit = hive_local_keep: the same env, untouched
 *                      (the counter goes 0, 1, 2, 3)
 *
 * Each mode runs four tasks one after the other on one worker (so the
 * output is the same every run); each task reads the env's counter and
 * steps it once.
 *
 *   build/examples/env_per_worker
 */
#include <hive.h>

#include <stdio.h>
#include <stdlib.h>

#define TASKS 4

/* ---- the environment: an id (which build this is) and a step counter */
typedef struct env { int id, counter; } env_t;

static int builds;                      /* touched on the one worker only */

static void *env_make(void *arg)
{
    (void)arg;
    env_t *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;                    /* hive_local then returns NULL too */
    e->id = ++builds;
    printf("Making new env (env %d)\n", e->id);
    return e;
}

static void env_reset(void *value, void *arg)
{
    (void)arg;
    env_t *e = value;
    printf("Resetting env %d\n", e->id);
    e->counter = 0;
}

static void env_close(void *value, void *arg)
{
    (void)arg;
    free(value);
}

/* ---- the task: use this worker's env, return its counter, then step it */
static int rollout(hive_ctx_t *ctx)
{
    hive_local_t key = *(const hive_local_t *)hive_arg(ctx, 0, NULL);
    env_t *e = hive_local(ctx, key);
    if (e == NULL)
        return 1;
    int seen[2] = { e->id, e->counter };
    e->counter++;
    return hive_return(ctx, seen, sizeof seen);
}

static int run_mode(hive_t *h, const char *title, void (*reinit)(void *, void *))
{
    printf("%s\n", title);
    hive_local_def_t def = { .init = env_make, .reinit = reinit, .fini = env_close };
    hive_local_t key;
    if (hive_local_new(h, &def, &key) != HIVE_OK)
        return 1;
    for (int t = 0; t < TASKS; t++) {
        hive_ref_t r;
        const void *p;
        if (hive_submit(h, rollout, &HIVE_VAL(key), 1, NULL, &r) != HIVE_OK ||
            hive_get(h, r, HIVE_FOREVER, &p, NULL) != HIVE_OK) {
            fprintf(stderr, "task %d: %s\n", t, hive_last_error());
            return 1;
        }
        const int *seen = p;
        printf("  task %d: env %d, counter %d\n", t, seen[0], seen[1]);
        hive_release(h, r);
    }
    return 0;
}

int main(void)
{
    hive_config_t cfg = { .workers = 1, .store_bytes = 64u << 20 };
    hive_t *h;
    int rc = hive_init(&cfg, &h);
    if (rc != HIVE_OK) {
        fprintf(stderr, "hive_init: %s: %s\n", hive_strerror(rc), hive_last_error());
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);   /* the worker and main print in turn */
    int bad = run_mode(h, "rebuild each time (reinit = NULL):", NULL) ||
              run_mode(h, "a custom reset (reinit = env_reset):", env_reset) ||
              run_mode(h, "keep as is (reinit = hive_local_keep):", hive_local_keep);
    hive_shutdown(h);                   /* runs env_close on the worker's thread */
    printf("envs built: %d\n", builds);
    return bad;
}
