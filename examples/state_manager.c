/*
 * state_manager.c - one actor owns a counter; two other actors hold its
 * handle and change it through calls. Every call is a message to the
 * manager's mailbox, so the counter needs no lock: the manager's methods
 * never run at the same time.
 *
 * The seeds' question, in C: worker 1 increments, worker 2 increments,
 * worker 1 reads -> 1, 2, 2. Then the seed's update(value): worker 2 sets
 * the counter to 10, worker 1 reads 10, and increments go on from there.
 *
 *   build/examples/state_manager
 */
#include <hive.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- SharedStateManager: the only owner of `count` */
typedef struct manager { int64_t count; } manager_t;
enum { M_INCREMENT, M_READ, M_UPDATE };

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

/* update(value): the new value comes as the call's argument (inline bytes). */
static int manager_update(void *self, hive_ctx_t *ctx)
{
    manager_t *m = self;
    size_t size;
    const int64_t *value = hive_arg(ctx, 0, &size);
    if (value == NULL || size != sizeof *value)
        return 1;                       /* fails the call: HIVE_ETASK */
    m->count = *value;
    return hive_return(ctx, &m->count, sizeof m->count);
}

static const hive_method_t manager_methods[] = {
    [M_INCREMENT] = { "increment", manager_increment, HIVE_PRIO_NORMAL },
    [M_READ]      = { "read",      manager_read,      HIVE_PRIO_NORMAL },
    [M_UPDATE]    = { "update",    manager_update,    HIVE_PRIO_NORMAL },
};
static const hive_actor_class_t manager_class = {
    .name = "SharedStateManager", .size = sizeof(manager_t),
    .methods = manager_methods, .nmethods = 3,
};

/* ---- WorkerActor: holds the manager's handle (a plain value) */
typedef struct worker { hive_actor_t manager; } worker_t;
enum { W_INCREMENT, W_READ, W_UPDATE };

static int worker_init(void *self, hive_ctx_t *ctx)
{
    worker_t *w = self;
    const hive_actor_t *m = hive_arg(ctx, 0, NULL);   /* constructor argument, as in tasks */
    w->manager = *m;
    return 0;
}

/* Call the manager with this call's own arguments and wait for its answer
 * (an actor waiting on an actor: the worker thread runs other work
 * meanwhile, so this never deadlocks). */
static int forward(worker_t *w, hive_ctx_t *ctx, unsigned method)
{
    hive_t *h = hive_engine(ctx);
    hive_ref_t r;
    const void *p;
    hive_arg_t arg;
    size_t nargs = 0, size;
    const void *value = hive_arg(ctx, 0, &size);
    if (value != NULL) {
        arg = HIVE_BYTES(value, size);
        nargs = 1;
    }
    if (hive_call(h, w->manager, method, nargs ? &arg : NULL, nargs, NULL, &r) != HIVE_OK)
        return 1;
    int rc = hive_get(h, r, HIVE_FOREVER, &p, NULL);
    if (rc == HIVE_OK)
        rc = hive_return(ctx, p, sizeof(int64_t));
    hive_release(h, r);
    return rc;
}

static int worker_increment(void *self, hive_ctx_t *ctx) { return forward(self, ctx, M_INCREMENT); }
static int worker_read(void *self, hive_ctx_t *ctx)      { return forward(self, ctx, M_READ); }
static int worker_update(void *self, hive_ctx_t *ctx)    { return forward(self, ctx, M_UPDATE); }

static const hive_method_t worker_methods[] = {
    [W_INCREMENT] = { "increment", worker_increment, HIVE_PRIO_NORMAL },
    [W_READ]      = { "read",      worker_read,      HIVE_PRIO_NORMAL },
    [W_UPDATE]    = { "update",    worker_update,    HIVE_PRIO_NORMAL },
};
static const hive_actor_class_t worker_class = {
    .name = "WorkerActor", .size = sizeof(worker_t), .init = worker_init,
    .methods = worker_methods, .nmethods = 3,
};

/* Call a method (with one int64 argument, or none when @arg is NULL) and
 * wait for its int64 answer. */
static int64_t call_and_get(hive_t *h, hive_actor_t a, unsigned method, const int64_t *arg)
{
    hive_ref_t r;
    const void *p;
    if (hive_call(h, a, method, arg ? &HIVE_VAL(*arg) : NULL, arg ? 1 : 0, NULL, &r) != HIVE_OK ||
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
    printf("worker 1 increments: %lld\n", (long long)call_and_get(h, w1, W_INCREMENT, NULL));
    printf("worker 2 increments: %lld\n", (long long)call_and_get(h, w2, W_INCREMENT, NULL));
    printf("worker 1 reads:      %lld\n", (long long)call_and_get(h, w1, W_READ, NULL));
    hive_actor_t found;
    hive_actor_lookup(h, "state", &found);
    printf("the manager, found by name, says %lld\n", (long long)call_and_get(h, found, M_READ, NULL));
    int64_t ten = 10;
    printf("worker 2 updates to 10: %lld\n", (long long)call_and_get(h, w2, W_UPDATE, &ten));
    printf("worker 1 reads:      %lld\n", (long long)call_and_get(h, w1, W_READ, NULL));
    printf("worker 1 increments: %lld\n", (long long)call_and_get(h, w1, W_INCREMENT, NULL));
    hive_shutdown(h);
    return 0;
}
