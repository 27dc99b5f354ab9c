/*
 * replay.c - a replay buffer fed from other ranks: the owner serves its
 * buffer through an actor (one method, push_batch), and env ranks push
 * batches to it with remote calls. Batching is the pusher's: one call per
 * batch, so a batch costs 2 messages (3 above 32 KiB) however many items.
 */
#include "hive/mpi.h"
#include "util/error.h"

#include <string.h>

typedef struct replay_server {
    hive_replay_t *rb;
    size_t         item_size;
} replay_server_t;

static int server_init(void *self, hive_ctx_t *ctx)
{
    replay_server_t *s = self;
    size_t n = 0;
    const replay_server_t *cfg = hive_arg(ctx, 0, &n);
    if (cfg == NULL || n != sizeof *cfg)
        return 1;
    *s = *cfg;
    return 0;
}

static int server_push(void *self, hive_ctx_t *ctx)
{
    replay_server_t *s = self;
    size_t n = 0;
    const void *items = hive_arg(ctx, 0, &n);
    if (items == NULL || n % s->item_size != 0)
        return 1;                         /* the caller sees HIVE_ETASK */
    return hive_replay_push_batch(s->rb, items, n / s->item_size) == HIVE_OK ? 0 : 1;
}

static const hive_method_t server_methods[] = { { "push_batch", server_push, 0 } };
static const hive_actor_class_t server_class = {
    .name = "ReplayServer", .size = sizeof(replay_server_t), .init = server_init,
    .methods = server_methods, .nmethods = 1,
};

int hive_mpi_replay_serve(hive_t *h, hive_replay_t *rb, size_t item_size, const char *name,
                          hive_actor_t *out)
{
    if (h == NULL || rb == NULL || out == NULL || item_size == 0)
        return hive__fail(HIVE_EINVAL, "hive_mpi_replay_serve: %s", item_size == 0 ? "item_size is 0"
                          : "engine, buffer or out is NULL");
    replay_server_t cfg = { .rb = rb, .item_size = item_size };
    hive_actor_opts_t opts = { .name = name };
    return hive_actor_new(h, &server_class, &HIVE_VAL(cfg), 1, &opts, out);
}

int hive_mpi_replay_push(hive_t *h, hive_actor_t server, const void *items, size_t n, size_t item_size,
                         hive_ref_t *done)
{
    size_t bytes;
    if (h == NULL || done == NULL || (items == NULL && n > 0))
        return hive__fail(HIVE_EINVAL, "hive_mpi_replay_push: engine, items or done is NULL");
    if (__builtin_mul_overflow(n, item_size, &bytes))
        return hive__fail(HIVE_EINVAL, "hive_mpi_replay_push: %zu items of %zu bytes overflow a size",
                          n, item_size);
    return hive_call(h, server, 0, &HIVE_BYTES(items, bytes), 1, NULL, done);
}
