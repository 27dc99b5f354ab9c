/*
 * pytasks.c - the C tasks and actor classes the Python tests load with
 * engine.load(): a task that writes into a shared array, one that reports
 * where its argument's payload lives, failing and cancellable tasks, and a
 * counter actor (plus one whose constructor fails).
 */
#include <hive.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static int64_t arg_i64(hive_ctx_t *ctx, size_t i)
{
    size_t n = 0;
    const void *p = hive_arg(ctx, i, &n);
    int64_t v = 0;
    if (p && n >= sizeof v)
        memcpy(&v, p, sizeof v);
    return v;
}

/* py_bump(array ref, delta): adds delta to every element of an I64 array */
int py_bump(hive_ctx_t *ctx)
{
    hive_array_t a;
    if (hive_array_view(hive_engine(ctx), hive_arg_ref(ctx, 0), &a) != HIVE_OK)
        return 1;
    int64_t n = hive_array_numel(&a), d = arg_i64(ctx, 1);
    for (int64_t i = 0; i < n; i++)
        if (hive_array_fetch_add_i64(&a, i, d, NULL) != HIVE_OK)
            return 1;
    return 0;
}

/* py_addr(x): returns the address and size of argument 0's payload */
int py_addr(hive_ctx_t *ctx)
{
    size_t n = 0;
    const void *p = hive_arg(ctx, 0, &n);
    uint64_t out[2] = { (uint64_t)(uintptr_t)p, n };
    return hive_return(ctx, out, sizeof out);
}

/* py_sum_f64(x): the sum of argument 0 read as doubles */
int py_sum_f64(hive_ctx_t *ctx)
{
    size_t n = 0;
    const double *p = hive_arg(ctx, 0, &n);
    double s = 0;
    for (size_t i = 0; i < n / sizeof *p; i++)
        s += p[i];
    return hive_return(ctx, &s, sizeof s);
}

int py_fail(hive_ctx_t *ctx)
{
    (void)ctx;
    return 1;
}

/* py_spin(): runs until cancelled */
int py_spin(hive_ctx_t *ctx)
{
    struct timespec ms = { 0, 1000000 };
    while (!hive_cancelled(ctx))
        nanosleep(&ms, NULL);
    return 0;
}

typedef struct { int64_t value; } counter_t;

static int counter_init(void *self, hive_ctx_t *ctx)
{
    ((counter_t *)self)->value = hive_nargs(ctx) ? arg_i64(ctx, 0) : 0;
    return 0;
}
static int counter_add(void *self, hive_ctx_t *ctx)
{
    counter_t *c = self;
    c->value += arg_i64(ctx, 0);
    return hive_return(ctx, &c->value, sizeof c->value);
}
static int counter_get(void *self, hive_ctx_t *ctx)
{
    return hive_return(ctx, &((counter_t *)self)->value, sizeof(int64_t));
}
static const hive_method_t counter_methods[] = {
    { "add", counter_add, HIVE_PRIO_NORMAL },
    { "get", counter_get, HIVE_PRIO_NORMAL },
};
const hive_actor_class_t py_counter = {
    .name = "py_counter", .size = sizeof(counter_t), .init = counter_init,
    .methods = counter_methods, .nmethods = 2,
};

static int broken_init(void *self, hive_ctx_t *ctx)
{
    (void)self;
    (void)ctx;
    return 1;
}
const hive_actor_class_t py_broken = {
    .name = "py_broken", .size = 8, .init = broken_init, .methods = counter_methods, .nmethods = 2,
};
