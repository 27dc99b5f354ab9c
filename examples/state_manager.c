/*
 * state_manager.c - one actor owns a counter; two other actors hold its
 * handle and change it through calls. Every call is a message to the
 * manager's mailbox, so the counter needs no lock: the manager's methods
 * never run at the same time.
 *
 * The seeds' question, in C: worker 1 increments, worker 2 increments,
 * worker 1 reads -> 1, 2, 2.
 *
 *   build/examples/state_manager
 */
#include <hive.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- SharedStateManager: the only owner of `count` */
typedef struct manager { int64_t count; } manager_t;
enum { M_INCREMENT, M_READ };

static int manager_increment(void *self, hive_ctx_t *ctx)
{
    manager_t *m = self;
    m->count++;
    return hive_return(ctx, &m->count, sizeof m->count);
}

static int manager_read(void *self, hive_ctx_t *ctx)
{
    manager_t *m = self;
    return hive_return(ctx, &m->count, sizeof m->count);
}

static const hive_method_t manager_methods[] = {
    [M_INCREMENT] = { "increment", manager_increment, HIVE_PRIO_NORMAL },
    [M_READ]      = { "read",      manager_read,      HIVE_PRIO_NORMAL },
};
static const hive_actor_class_t manager_class = {
    .name = "SharedStateManager", .size = sizeof(manager_t),
    .methods = manager_methods, .nmethods = 2,
};

/* ---- WorkerActor: holds the manager's handle (a plain value) */
typedef struct worker { hive_actor_t manager; } worker_t;
enum { W_INCREMENT, W_READ };

static int worker_init(void *self, hive_ctx_t *ctx)
{
    worker_t *w = self;
    const hive_actor_t *m = hive_arg(ctx, 0, NULL);   /* constructor argument, as in tasks */
    w->manager = *m;
    return 0;
}

/* Call the manager and wait for its answer (an actor waiting on an actor:
 * the worker thread runs other work meanwhile, so this never deadlocks). */
static int forward(worker_t *w, hive_ctx_t *ctx, unsigned method)
{
    hive_t *h = hive_engine(ctx);
    hive_ref_t r;
    const void *p;
    if (hive_call(h, w->manager, method, NULL, 0, NULL, &r) != HIVE_OK)
        return 1;
    int rc = hive_get(h, r, HIVE_FOREVER, &p, NULL);
    if (rc == HIVE_OK)
        rc = hive_return(ctx, p, sizeof(int64_t));
    hive_release(h, r);
    return rc;
}

static int worker_increment(void *self, hive_ctx_t *ctx) { return forward(self, ctx, M_INCREMENT); }
static int worker_read(void *self, hive_ctx_t *ctx)      { return forward(self, ctx, M_READ); }

static const hive_method_t worker_methods[] = {
    [W_INCREMENT] = { "increment", worker_increment, HIVE_PRIO_NORMAL },
    [W_READ]      = { "read",      worker_read,      HIVE_PRIO_NORMAL },
};
static const hive_actor_class_t worker_class = {
    .name = "WorkerActor", .size = sizeof(worker_t), .init = worker_init,
    .methods = worker_methods, .nmethods = 2,
};

static int64_t call_and_get(hive_t *h, hive_actor_t a, unsigned method)
{
    hive_ref_t r;
    const void *p;
    if (hive_call(h, a, method, NULL, 0, NULL, &r) != HIVE_OK ||
        hive_get(h, r, HIVE_FOREVER, &p, NULL) != HIVE_OK) {
        fprintf(stderr, "call failed: %s\n", hive_last_error());
        exit(1);
    }
    int64_t v = *(const int64_t *)p;
    hive_release(h, r);
    return v;
}

int main(void)
{
    hive_config_t cfg = { .store_bytes = 64u << 20 };
    hive_t *h;
    if (hive_init(&cfg, &h) != HIVE_OK) {
        fprintf(stderr, "hive_init: %s\n", hive_last_error());
        return 1;
    }
    hive_actor_t manager, w1, w2;
    hive_actor_opts_t named = { .name = "state" };
    if (hive_actor_new(h, &manager_class, NULL, 0, &named, &manager) != HIVE_OK ||
        hive_actor_new(h, &worker_class, &HIVE_VAL(manager), 1, NULL, &w1) != HIVE_OK ||
        hive_actor_new(h, &worker_class, &HIVE_VAL(manager), 1, NULL, &w2) != HIVE_OK) {
        fprintf(stderr, "hive_actor_new: %s\n", hive_last_error());
        return 1;
    }
    printf("worker 1 increments: %lld\n", (long long)call_and_get(h, w1, W_INCREMENT));
    printf("worker 2 increments: %lld\n", (long long)call_and_get(h, w2, W_INCREMENT));
    printf("worker 1 reads:      %lld\n", (long long)call_and_get(h, w1, W_READ));
    hive_actor_t found;
    hive_actor_lookup(h, "state", &found);
    printf("the manager, found by name, says %lld\n", (long long)call_and_get(h, found, M_READ));
    hive_shutdown(h);
    return 0;
}
