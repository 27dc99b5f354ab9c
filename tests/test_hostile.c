/*
 * test_hostile.c - every public entry point fed what a careless or hostile
 * caller passes: NULL engines and pools, NULL outputs, ids that name
 * nothing, ids of the wrong kind, released ids, out-of-range indexes. Each
 * call must return a negative HIVE_E* code (or its documented neutral value:
 * 0, NULL) and leave a sentence in hive_last_error(); none may crash, and
 * afterwards the engine still works and holds nothing it did not before.
 */
#include "testutil.h"
#include "hive/envpool.h"
#include "hive/replay.h"

#include <math.h>

/* Plant a sentence, so that a call which fails without writing its own is
 * caught: hive_init with out NULL always fails with "out is NULL". */
static void plant_error(void)
{
    assert_int_equal(hive_init(NULL, NULL), HIVE_EINVAL);
    assert_non_null(strstr(hive_last_error(), "out is NULL"));
}

/* What a refused call must leave: rc == code, a sentence of its own (not
 * the planted one) that contains needle (NULL: any). */
static void check_bad(const char *call, int rc, int code, const char *needle)
{
    const char *e = hive_last_error();
    if (rc != code)
        fail_msg("%s: returned %d (%s), expected %d (%s); sentence: %s", call, rc, hive_strerror(rc),
                 code, hive_strerror(code), e);
    if (strcmp(e, "hive_init: out is NULL") == 0)
        fail_msg("%s: failed without a sentence of its own", call);
    if (needle != NULL && strstr(e, needle) == NULL)
        fail_msg("%s: sentence \"%s\" lacks \"%s\"", call, e, needle);
}

#define BAD(call, code, needle)                                                     \
    do {                                                                            \
        plant_error();                                                              \
        int bad_rc_ = (call);                                                       \
        check_bad(#call, bad_rc_, (code), (needle));                                \
    } while (0)

static int noop_task(hive_ctx_t *ctx)
{
    (void)ctx;
    return 0;
}

static int noop_method(void *self, hive_ctx_t *ctx)
{
    (void)self;
    (void)ctx;
    return 0;
}

static const hive_method_t methods[] = { { .name = "noop", .fn = noop_method } };
static const hive_actor_class_t cls = { .name = "hostile", .size = 8, .methods = methods,
                                        .nmethods = 1 };

/* Every entry point that takes an engine, given NULL. */
static void test_null_engine(void **state)
{
    (void)state;
    hive_ref_t r = { 1 }, out;
    hive_actor_t a = { 1 };
    const void *d;
    size_t sz;
    void *p;
    unsigned char ready;
    hive_store_stats_t ss;
    hive_stats_t st;
    hive_worker_stats_t ws;
    hive_actor_info_t ai;
    hive_size_class_t sc;
    hive_worker_info_t wi;
    hive_array_t view;
    hive_pool_t *pool;
    hive_local_t key;
    hive_local_def_t def = { 0 };
    hive_replay_t *rb;
    hive_replay_config_t rcfg = { .capacity = 8, .item_size = 8 };
    hive_envpool_t *ep;
    int64_t shape[1] = { 4 };

    BAD(hive_shutdown(NULL), HIVE_EINVAL, NULL);
    BAD(hive_trace_flush(NULL), HIVE_EINVAL, NULL);
    BAD(hive_worker_info(NULL, 0, &wi), HIVE_EINVAL, NULL);
    BAD(hive_put(NULL, "x", 1, &out), HIVE_EINVAL, NULL);
    BAD(hive_create(NULL, 8, &p, &out), HIVE_EINVAL, NULL);
    BAD(hive_seal(NULL, r), HIVE_EINVAL, NULL);
    BAD(hive_get(NULL, r, 0, &d, &sz), HIVE_EINVAL, NULL);
    BAD(hive_get_many(NULL, &r, 1, 0, &d, &sz, NULL), HIVE_EINVAL, NULL);
    BAD(hive_retain(NULL, r), HIVE_EINVAL, NULL);
    BAD(hive_release(NULL, r), HIVE_EINVAL, NULL);
    BAD(hive_wait(NULL, &r, 1, 1, 0, &ready), HIVE_EINVAL, NULL);
    BAD(hive_store_stats(NULL, &ss), HIVE_EINVAL, NULL);
    BAD(hive_stats(NULL, &st, sizeof st), HIVE_EINVAL, NULL);
    BAD(hive_worker_stats(NULL, 0, &ws, sizeof ws), HIVE_EINVAL, NULL);
    BAD(hive_actor_top(NULL, &ai, 1, sizeof ai), HIVE_EINVAL, NULL);
    BAD(hive_store_classes(NULL, &sc, 1), HIVE_EINVAL, NULL);
    BAD(hive_array_new(NULL, HIVE_F64, 1, shape, &out), HIVE_EINVAL, NULL);
    BAD(hive_array_view(NULL, r, &view), HIVE_EINVAL, NULL);
    BAD(hive_cell_new(NULL, (hive_ref_t){ 0 }, &out), HIVE_EINVAL, NULL);
    BAD(hive_cell_publish(NULL, r, r), HIVE_EINVAL, NULL);
    BAD(hive_cell_acquire(NULL, r, &out, NULL), HIVE_EINVAL, NULL);
    BAD(hive_submit(NULL, noop_task, NULL, 0, NULL, &out), HIVE_EINVAL, NULL);
    BAD(hive_cancel(NULL, r), HIVE_EINVAL, NULL);
    BAD(hive_actor_new(NULL, &cls, NULL, 0, NULL, &a), HIVE_EINVAL, NULL);
    BAD(hive_call(NULL, a, 0, NULL, 0, NULL, &out), HIVE_EINVAL, NULL);
    BAD(hive_actor_kill(NULL, a), HIVE_EINVAL, NULL);
    BAD(hive_actor_lookup(NULL, "x", &a), HIVE_EINVAL, NULL);
    BAD(hive_pool_new(NULL, &a, 1, &pool), HIVE_EINVAL, NULL);
    BAD(hive_local_new(NULL, &def, &key), HIVE_EINVAL, NULL);
    BAD(hive_replay_new(NULL, &rcfg, &rb), HIVE_EINVAL, NULL);
    BAD(hive_replay_list(NULL, NULL, 0, 0), HIVE_EINVAL, NULL);
    BAD(hive_envpool_list(NULL, NULL, 0, 0), HIVE_EINVAL, NULL);
    BAD(hive_envpool_new(NULL, &hive_env_cartpole, &(hive_envpool_opts_t){ .num_envs = 2 }, &ep),
        HIVE_EINVAL, "engine is NULL");

    /* the getters' documented neutral values */
    assert_int_equal(hive_num_workers(NULL), 0);
    assert_int_equal(hive_num_nodes(NULL), 0);
    assert_null(hive_local_thread(NULL, key));
}

/* NULL pools, buffers, views and task contexts. */
static void test_null_objects(void **state)
{
    (void)state;
    hive_ref_t out;
    int64_t old_i;
    double old_d;
    char buf[8];
    hive_envpool_batch_t batch;
    hive_replay_stats_t rs;
    uint64_t rng = 1;

    BAD(hive_pool_free(NULL), HIVE_EINVAL, NULL);
    BAD(hive_pool_submit(NULL, 0, NULL, 0), HIVE_EINVAL, NULL);
    BAD(hive_pool_has_free(NULL), HIVE_EINVAL, NULL);
    BAD(hive_pool_has_next(NULL), HIVE_EINVAL, NULL);
    BAD(hive_pool_get_next(NULL, 0, &out), HIVE_EINVAL, NULL);
    BAD(hive_pool_get_next_unordered(NULL, 0, &out), HIVE_EINVAL, NULL);
    BAD(hive_pool_map(NULL, 0, NULL, 0, NULL), HIVE_EINVAL, NULL);
    BAD(hive_pool_map_unordered(NULL, 0, NULL, 0, NULL, NULL), HIVE_EINVAL, NULL);

    BAD(hive_replay_free(NULL), HIVE_EINVAL, NULL);
    BAD(hive_replay_push(NULL, buf), HIVE_EINVAL, NULL);
    BAD(hive_replay_push_batch(NULL, buf, 1), HIVE_EINVAL, NULL);
    BAD(hive_replay_sample(NULL, 1, &rng, buf, NULL, NULL, 0), HIVE_EINVAL, NULL);
    BAD(hive_replay_sample_ex(NULL, 1, 0, &rng, buf, NULL, NULL, 0), HIVE_EINVAL, NULL);
    BAD(hive_replay_update_priorities(NULL, NULL, NULL, 0), HIVE_EINVAL, NULL);
    BAD(hive_replay_stats(NULL, &rs), HIVE_EINVAL, NULL);
    assert_int_equal(hive_replay_array(NULL).id, 0);

    assert_int_equal(hive_envpool_free(NULL), HIVE_OK);   /* documented: a no-op, as free(NULL) */
    BAD(hive_envpool_reset(NULL, &batch), HIVE_EINVAL, NULL);
    BAD(hive_envpool_step(NULL, NULL, &batch), HIVE_EINVAL, NULL);
    BAD(hive_envpool_send(NULL, NULL, NULL, 0), HIVE_EINVAL, NULL);
    BAD(hive_envpool_async_reset(NULL), HIVE_EINVAL, NULL);
    BAD(hive_envpool_recv(NULL, 0, &batch), HIVE_EINVAL, NULL);
    assert_int_equal(hive_envpool_num_envs(NULL), 0);
    assert_int_equal(hive_envpool_batch_size(NULL), 0);

    /* a NULL view, and a zeroed one (which names no object) */
    hive_array_t zero;
    memset(&zero, 0, sizeof zero);
    const hive_array_t *views[] = { NULL, &zero };
    for (size_t i = 0; i < 2; i++) {
        const hive_array_t *v = views[i];
        int64_t index[1] = { 0 };
        hive_array_t sl;
        assert_int_equal(hive_array_numel(v), i == 0 ? -1 : hive_array_numel(v));
        assert_null(hive_array_at(v, index));
        BAD(hive_array_slice(v, 0, 0, 1, 1, &sl), HIVE_EINVAL, NULL);
        BAD(hive_array_fetch_add_i64(v, 0, 1, &old_i), HIVE_EINVAL, NULL);
        BAD(hive_array_fetch_add_f64(v, 0, 1.0, &old_d), HIVE_EINVAL, NULL);
        plant_error();
        assert_true(hive_array_add_f64(v, 0, 1.0) == 0.0);   /* documented: 0 and a sentence */
        check_bad("hive_array_add_f64", 0, 0, NULL);
        plant_error();
        assert_int_equal(hive_array_add_i64(v, 0, 1), 0);
        check_bad("hive_array_add_i64", 0, 0, NULL);
        BAD(hive_array_write_lock(v), HIVE_EINVAL, NULL);
        BAD(hive_array_write_unlock(v), HIVE_EINVAL, NULL);
        BAD(hive_array_read(v, buf, sizeof buf), HIVE_EINVAL, NULL);
        hive_array_write_begin(v);   /* void: must simply do nothing */
        hive_array_write_end(v);
    }

    /* task-context calls outside a task */
    assert_null(hive_engine(NULL));
    assert_int_equal(hive_nargs(NULL), 0);
    size_t sz = 123;
    assert_null(hive_arg(NULL, 0, &sz));
    assert_int_equal(hive_arg_ref(NULL, 0).id, 0);
    BAD(hive_return(NULL, "x", 1), HIVE_EINVAL, NULL);
    assert_null(hive_return_alloc(NULL, 8));
    assert_int_equal(hive_cancelled(NULL), 0);
    assert_null(hive_local(NULL, (hive_local_t){ 0 }));
}

static hive_t *engine(void)
{
    hive_config_t cfg = { .workers = 2 };
    hive_t *h = NULL;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    return h;
}

static void assert_store_empty(hive_t *h)
{
    hive_store_stats_t s;
    WAIT_UNTIL((assert_int_equal(hive_store_stats(h, &s), HIVE_OK), s.objects == 0), 5000);
}

/* Ids that name nothing, ids of another kind, released ids, on a live
 * engine: each refused with its number in the sentence; the engine's own
 * objects are untouched. */
static void test_bad_ids(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_ref_t keep, out, gone, cell, arr;
    const void *d;
    size_t sz;
    unsigned char ready;
    hive_array_t view;
    uint64_t seq;

    assert_int_equal(hive_put(h, "keep", 5, &keep), HIVE_OK);
    assert_int_equal(hive_put(h, "gone", 5, &gone), HIVE_OK);
    assert_int_equal(hive_release(h, gone), HIVE_OK);
    hive_actor_t a;
    assert_int_equal(hive_actor_new(h, &cls, NULL, 0, NULL, &a), HIVE_OK);
    assert_int_equal(hive_cell_new(h, keep, &cell), HIVE_OK);
    int64_t shape[1] = { 4 };
    assert_int_equal(hive_array_new(h, HIVE_I64, 1, shape, &arr), HIVE_OK);

    char num[32];
    const hive_ref_t bogus[] = { { 0 }, gone, { 0xdeadbeefcafef00dull }, { keep.id ^ (1ull << 40) },
                                 { a.id } };
    for (size_t i = 0; i < sizeof bogus / sizeof bogus[0]; i++) {
        hive_ref_t b = bogus[i];
        snprintf(num, sizeof num, "%llu", (unsigned long long)b.id);
        const char *has = b.id != 0 ? num : NULL;
        plant_error();
        int rc = hive_get(h, b, 0, &d, &sz);
        assert_true(rc == HIVE_ENOENT || rc == HIVE_ESTATE || rc == HIVE_EINVAL);
        BAD(hive_retain(h, b), rc == HIVE_EINVAL ? HIVE_ENOENT : hive_retain(h, b), has);
        plant_error();
        assert_true(hive_release(h, b) < 0);
        assert_true(strcmp(hive_last_error(), "hive_init: out is NULL") != 0);
        plant_error();
        assert_true(hive_seal(h, b) < 0);
        BAD(hive_wait(h, &b, 1, 1, 0, &ready), b.id == a.id ? HIVE_ESTATE : HIVE_ENOENT, has);
        plant_error();
        assert_true(hive_cancel(h, b) < 0);
        plant_error();
        assert_true(hive_cell_acquire(h, b, &out, &seq) < 0);
        plant_error();
        assert_true(hive_cell_publish(h, b, keep) < 0);
        plant_error();
        assert_true(hive_cell_publish(h, cell, b) < 0 || b.id == 0);
        plant_error();
        assert_true(hive_array_view(h, b, &view) < 0);
        plant_error();
        int sub = hive_submit(h, noop_task, &HIVE_REF(b), 1, NULL, &out);
        /* a zero ref is an inline argument of no bytes, an actor handle a
         * ref argument that keeps the handle (test_actor.c): both run */
        if (b.id == 0 || b.id == a.id) {
            assert_int_equal(sub, HIVE_OK);
            assert_int_equal(hive_get(h, out, HIVE_FOREVER, &d, &sz), HIVE_OK);
            assert_int_equal(hive_release(h, out), HIVE_OK);
        } else {
            check_bad("hive_submit(ref argument)", sub, HIVE_ENOENT, num);
            BAD(hive_call(h, a, 0, &HIVE_REF(b), 1, NULL, &out), HIVE_ENOENT, num);
        }
    }

    /* a ref is no actor, a dead one's id is no actor */
    hive_actor_t not_actor = { keep.id }, nothing = { 0 }, made_up = { 0x4000deadbeefull };
    const hive_actor_t bad_actors[] = { not_actor, nothing, made_up };
    for (size_t i = 0; i < 3; i++) {
        plant_error();
        assert_true(hive_call(h, bad_actors[i], 0, NULL, 0, NULL, &out) < 0);
        assert_true(strcmp(hive_last_error(), "hive_init: out is NULL") != 0);
        plant_error();
        assert_true(hive_actor_kill(h, bad_actors[i]) < 0);
        assert_true(strcmp(hive_last_error(), "hive_init: out is NULL") != 0);
    }
    /* a method out of range, with both numbers */
    BAD(hive_call(h, a, 7, NULL, 0, NULL, &out), HIVE_EINVAL, "7");
    /* wrong kinds: a plain object as a cell, a cell's ref as an array */
    BAD(hive_cell_publish(h, keep, keep), HIVE_ESTATE, NULL);
    plant_error();
    assert_true(hive_array_view(h, cell, &view) < 0);
    assert_true(strcmp(hive_last_error(), "hive_init: out is NULL") != 0);
    /* killing twice */
    assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
    BAD(hive_actor_kill(h, a), HIVE_EDEAD, NULL);
    BAD(hive_call(h, a, 0, NULL, 0, NULL, &out), HIVE_EDEAD, NULL);
    /* lookups of names that are no name */
    hive_actor_t found;
    BAD(hive_actor_lookup(h, NULL, &found), HIVE_EINVAL, NULL);
    BAD(hive_actor_lookup(h, "", &found), HIVE_ENOENT, NULL);
    BAD(hive_actor_lookup(h, "nobody", &found), HIVE_ENOENT, "nobody");

    /* placement out of range, with the numbers */
    BAD(hive_submit(h, noop_task, NULL, 0, &(hive_opts_t){ .place = HIVE_PLACE_NODE, .place_index = 99 },
                    &out),
        HIVE_EINVAL, "99");
    BAD(hive_submit(h, noop_task, NULL, 0, &(hive_opts_t){ .place = 7 }, &out), HIVE_EINVAL, "7");
    BAD(hive_actor_new(h, &cls, NULL, 0,
                       &(hive_actor_opts_t){ .place = HIVE_PLACE_WORKER, .place_index = 1000 }, &a),
        HIVE_EINVAL, "1000");
    BAD(hive_worker_info(h, 1000, &(hive_worker_info_t){ 0 }), HIVE_EINVAL, "1000");

    /* what the engine held is untouched */
    assert_int_equal(hive_get(h, keep, 0, &d, &sz), HIVE_OK);
    assert_int_equal(sz, 5);
    assert_string_equal(d, "keep");
    hive_ref_t v;
    assert_int_equal(hive_cell_acquire(h, cell, &v, &seq), HIVE_OK);
    assert_int_equal(v.id, keep.id);
    assert_int_equal(hive_release(h, v), HIVE_OK);
    assert_int_equal(hive_release(h, keep), HIVE_OK);
    assert_int_equal(hive_release(h, cell), HIVE_OK);
    assert_int_equal(hive_release(h, arr), HIVE_OK);
    assert_store_empty(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Sizes whose products overflow, on each entry point that multiplies. */
static void test_overflowing_sizes(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_ref_t out;
    void *p;
    int64_t huge[2] = { INT64_MAX / 2, 3 };
    BAD(hive_array_new(h, HIVE_F64, 2, huge, &out), HIVE_EINVAL, NULL);
    int64_t neg[1] = { -1 };
    BAD(hive_array_new(h, HIVE_F64, 1, neg, &out), HIVE_EINVAL, "-1");
    BAD(hive_array_new(h, HIVE_F64, 99, huge, &out), HIVE_EINVAL, "99");
    BAD(hive_array_new(h, (hive_dtype_t)77, 1, huge, &out), HIVE_EINVAL, "77");
    plant_error();
    assert_true(hive_create(h, SIZE_MAX, &p, &out) < 0);
    assert_non_null(strstr(hive_last_error(), "18446744073709551615"));
    plant_error();
    assert_true(hive_put(h, "x", SIZE_MAX / 2, &out) < 0);
    assert_true(strcmp(hive_last_error(), "hive_init: out is NULL") != 0);
    hive_ref_t r;
    BAD(hive_get_many(h, &r, SIZE_MAX / 2, 0, (const void **)&p, NULL, NULL), HIVE_EINVAL, NULL);
    unsigned char ready;
    BAD(hive_wait(h, &r, SIZE_MAX / 2, 1, 0, &ready), HIVE_EINVAL, NULL);
    BAD(hive_submit(h, noop_task, &HIVE_BYTES("x", 1), SIZE_MAX / 8, NULL, &out), HIVE_EINVAL, NULL);
    BAD(hive_submit(h, noop_task, &HIVE_BYTES("x", SIZE_MAX - 4), 1, NULL, &out), HIVE_EINVAL, NULL);
    hive_replay_t *rb;
    BAD(hive_replay_new(h, &(hive_replay_config_t){ .capacity = UINT64_MAX / 4, .item_size = 64 }, &rb),
        HIVE_EINVAL, NULL);
    BAD(hive_replay_new(h, &(hive_replay_config_t){ .capacity = 8, .item_size = 8, .alpha = NAN,
                                                    .prioritized = 1 },
                        &rb),
        HIVE_EINVAL, NULL);
    hive_envpool_t *ep;
    BAD(hive_envpool_new(h, &hive_env_cartpole, &(hive_envpool_opts_t){ .num_envs = SIZE_MAX / 2 }, &ep),
        HIVE_EINVAL, NULL);
    hive_store_stats_t s;
    assert_int_equal(hive_store_stats(h, &s), HIVE_OK);
    assert_int_equal(s.objects, 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* A user who releases once too often must not take the counts the engine
 * holds itself (a queued task's argument and result, a cell's version): the
 * extra release is refused with HIVE_ESTATE, and what the engine holds stays
 * intact until it lets go. Before hive kept the two apart, the extra release
 * freed the object under the task or the cell, and the engine's own release
 * later ended the process. */
static atomic_int gate;

static int gated_echo(hive_ctx_t *ctx)
{
    while (!atomic_load(&gate))
        test_sleep_ms(1);
    size_t n = 0;
    const void *p = hive_arg(ctx, 0, &n);
    return p == NULL ? 1 : hive_return(ctx, p, n);
}

static void test_over_release(void **state)
{
    (void)state;
    hive_t *h = engine();
    const void *d;
    size_t sz;
    atomic_store(&gate, 0);

    /* an argument of a task that has not run yet */
    hive_ref_t arg, res, dup;
    assert_int_equal(hive_put(h, "payload", 8, &arg), HIVE_OK);
    assert_int_equal(hive_submit(h, gated_echo, &HIVE_REF(arg), 1, NULL, &res), HIVE_OK);
    assert_int_equal(hive_release(h, arg), HIVE_OK);
    BAD(hive_release(h, arg), HIVE_ESTATE, "no count left");
    assert_non_null(strstr(hive_last_error(), "1 hold"));
    /* the result of that task, released twice while it waits */
    assert_int_equal(hive_submit(h, gated_echo, &HIVE_REF(res), 1, NULL, &dup), HIVE_OK);
    assert_int_equal(hive_release(h, res), HIVE_OK);
    BAD(hive_release(h, res), HIVE_ESTATE, NULL);
    /* a cell's version */
    hive_ref_t v, cell, got;
    uint64_t seq;
    assert_int_equal(hive_put(h, "weights", 8, &v), HIVE_OK);
    assert_int_equal(hive_cell_new(h, v, &cell), HIVE_OK);
    assert_int_equal(hive_release(h, v), HIVE_OK);
    BAD(hive_release(h, v), HIVE_ESTATE, NULL);

    atomic_store(&gate, 1);
    /* the chain ran on intact payloads: dup echoes res, which echoed arg */
    assert_int_equal(hive_get(h, dup, HIVE_FOREVER, &d, &sz), HIVE_OK);
    assert_int_equal(sz, 8);
    assert_string_equal(d, "payload");
    assert_int_equal(hive_release(h, dup), HIVE_OK);
    assert_int_equal(hive_cell_acquire(h, cell, &got, &seq), HIVE_OK);
    assert_int_equal(got.id, v.id);
    assert_int_equal(hive_get(h, got, 0, &d, &sz), HIVE_OK);
    assert_string_equal(d, "weights");
    assert_int_equal(hive_release(h, got), HIVE_OK);
    assert_int_equal(hive_release(h, cell), HIVE_OK);
    /* a replay buffer's array and an env pool's batch arrays: reachable
     * by id, held by the structure alone */
    hive_replay_t *rb;
    assert_int_equal(hive_replay_new(h, &(hive_replay_config_t){ .capacity = 4, .item_size = 8 }, &rb),
                     HIVE_OK);
    BAD(hive_release(h, hive_replay_array(rb)), HIVE_ESTATE, "no count left");
    assert_int_equal(hive_replay_push(rb, "rowdata"), HIVE_OK);
    hive_envpool_t *ep;
    hive_envpool_batch_t batch;
    assert_int_equal(hive_envpool_new(h, &hive_env_cartpole, &(hive_envpool_opts_t){ .num_envs = 2 }, &ep),
                     HIVE_OK);
    assert_int_equal(hive_envpool_reset(ep, &batch), HIVE_OK);
    BAD(hive_release(h, batch.obs.ref), HIVE_ESTATE, NULL);
    BAD(hive_release(h, batch.env_id.ref), HIVE_ESTATE, NULL);
    assert_int_equal(hive_envpool_reset(ep, &batch), HIVE_OK);
    assert_int_equal(hive_envpool_free(ep), HIVE_OK);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    /* everything went with the engine's last holds: none of them was lost */
    assert_store_empty(h);
    /* and the ids are gone now, as any released id */
    BAD(hive_release(h, arg), HIVE_ENOENT, NULL);
    BAD(hive_release(h, v), HIVE_ENOENT, NULL);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_engine),
        cmocka_unit_test(test_null_objects),
        cmocka_unit_test(test_bad_ids),
        cmocka_unit_test(test_overflowing_sizes),
        cmocka_unit_test(test_over_release),
    };
    return cmocka_run_group_tests_name("hostile", tests, NULL, NULL);
}
