/* test_placement.c - actor and task placement (hive_actor_opts_t.place,
 * hive_opts_t.place) on synthetic 2- and 4-node topologies: where state is
 * allocated, where turns and hinted tasks are queued and run, and the
 * refusals of bad nodes and workers. Work can be stolen across nodes by an
 * idle worker, so the tests that look at where work runs first occupy the
 * workers of the other nodes with spinning actors pinned to them (worker
 * placement is never stolen), and the tests that look at where work is
 * queued occupy every worker and then read the node rings. */
#include "testutil.h"

#include <sched.h>

#define TWO_NODES  "pack:2 numa:1 core:2 pu:1"     /* 2 nodes x 2 workers */
#define FOUR_NODES "pack:4 numa:1 core:2 pu:1"     /* 4 nodes x 2 workers */

static _Atomic int release_spin, spinning;
static const void *dummy_;             /* hive_get needs somewhere to put the payload */

static int spin_method(void *self, hive_ctx_t *ctx)
{
    (void)self, (void)ctx;
    /* seq_cst, both: plain test flags, no data published through them */
    atomic_fetch_add(&spinning, 1);
    while (!atomic_load(&release_spin))
        sched_yield();
    return 0;
}

typedef struct where { unsigned worker, state_node; } where_t;

static int where_method(void *self, hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    where_t w = { hive_worker_index(ctx), hive__arena_node_of(&h->arena, self) };
    return hive_return(ctx, &w, sizeof w);
}

static const hive_method_t spin_methods[] = { { "spin", spin_method, 0 } };
static const hive_actor_class_t spin_class = { "spinner", 0, NULL, NULL, spin_methods, 1, NULL, 0 };
static const hive_method_t where_methods[] = { { "where", where_method, 0 } };
static const hive_actor_class_t where_class = { "where", 64, NULL, NULL, where_methods, 1, NULL, 0 };

static hive_t *start(const char *topology)
{
    hive_config_t cfg = { .topology = topology };
    hive_t *h = NULL;
    if (hive_init(&cfg, &h) != HIVE_OK)
        fail_msg("hive_init(%s): %s", topology, hive_last_error());
    return h;
}

static unsigned node_of_worker(hive_t *h, unsigned w)
{
    hive_worker_info_t wi;
    assert_int_equal(hive_worker_info(h, w, &wi), HIVE_OK);
    return wi.node;
}

/* Occupy every worker not on node `spare` (all of them if spare is -1)
 * with a spinning call; returns how many, the refs in res. */
static unsigned occupy(hive_t *h, int spare, hive_actor_t *act, hive_ref_t *res)
{
    atomic_store(&release_spin, 0);
    atomic_store(&spinning, 0);
    unsigned k = 0;
    for (unsigned w = 0; w < hive_num_workers(h); w++) {
        if (spare >= 0 && node_of_worker(h, w) == (unsigned)spare)
            continue;
        hive_actor_opts_t o = { .place = HIVE_PLACE_WORKER, .place_index = w };
        assert_int_equal(hive_actor_new(h, &spin_class, NULL, 0, &o, &act[k]), HIVE_OK);
        assert_int_equal(hive_call(h, act[k], 0, NULL, 0, NULL, &res[k]), HIVE_OK);
        k++;
    }
    WAIT_UNTIL(atomic_load(&spinning) == (int)k, 60000);
    return k;
}

static void let_go(hive_t *h, unsigned k, hive_actor_t *act, hive_ref_t *res)
{
    atomic_store(&release_spin, 1);
    for (unsigned i = 0; i < k; i++) {
        assert_int_equal(hive_get(h, res[i], HIVE_FOREVER, &dummy_, NULL), HIVE_OK);
        assert_int_equal(hive_release(h, res[i]), HIVE_OK);
        assert_int_equal(hive_actor_kill(h, act[i]), HIVE_OK);
    }
}

static where_t call_where(hive_t *h, hive_actor_t a)
{
    hive_ref_t r;
    assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &r), HIVE_OK);
    const void *p;
    size_t n;
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, &p, &n), HIVE_OK);
    assert_int_equal(n, sizeof(where_t));
    where_t w;
    memcpy(&w, p, sizeof w);
    assert_int_equal(hive_release(h, r), HIVE_OK);
    return w;
}

/* An actor placed on node k, the other nodes busy: its state is on k and
 * every turn runs on a worker of k (node 0 included). */
static void check_actor_on_nodes(const char *topology)
{
    hive_t *h = start(topology);
    hive_actor_t act[16];
    hive_ref_t res[16];
    for (unsigned node = 0; node < hive_num_nodes(h); node++) {
        unsigned k = occupy(h, (int)node, act, res);
        hive_actor_opts_t o = { .place = HIVE_PLACE_NODE, .place_index = node };
        hive_actor_t a;
        assert_int_equal(hive_actor_new(h, &where_class, NULL, 0, &o, &a), HIVE_OK);
        for (int i = 0; i < 20; i++) {
            where_t w = call_where(h, a);
            if (w.state_node != node || node_of_worker(h, w.worker) != node)
                fail_msg("actor placed on node %u: state on node %u, turn on worker %u (node %u)",
                         node, w.state_node, w.worker, node_of_worker(h, w.worker));
        }
        let_go(h, k, act, res);
        assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
    }
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_actor_node_two(void **state)
{
    (void)state;
    check_actor_on_nodes(TWO_NODES);
}

static void test_actor_node_four(void **state)
{
    (void)state;
    check_actor_on_nodes(FOUR_NODES);
}

/* An actor placed on worker w: every turn on w (nothing to occupy: a
 * worker's inbox is never stolen), the state on w's node. */
static void test_actor_worker(void **state)
{
    (void)state;
    hive_t *h = start(FOUR_NODES);
    for (unsigned wk = 0; wk < hive_num_workers(h); wk++) {
        hive_actor_opts_t o = { .place = HIVE_PLACE_WORKER, .place_index = wk };
        hive_actor_t a;
        assert_int_equal(hive_actor_new(h, &where_class, NULL, 0, &o, &a), HIVE_OK);
        for (int i = 0; i < 20; i++) {
            where_t w = call_where(h, a);
            if (w.worker != wk || w.state_node != node_of_worker(h, wk))
                fail_msg("actor placed on worker %u (node %u): turn on worker %u, state on node %u",
                         wk, node_of_worker(h, wk), w.worker, w.state_node);
        }
        assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
    }
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static int where_task(hive_ctx_t *ctx)
{
    unsigned w = hive_worker_index(ctx);
    return hive_return(ctx, &w, sizeof w);
}

/* Tasks hinted to node k, the other nodes busy, run on k. */
static void test_task_hint_runs_there(void **state)
{
    (void)state;
    hive_t *h = start(FOUR_NODES);
    hive_actor_t act[16];
    hive_ref_t res[16], r[20];
    for (unsigned node = 0; node < hive_num_nodes(h); node++) {
        unsigned k = occupy(h, (int)node, act, res);
        hive_opts_t o = { .place = HIVE_PLACE_NODE, .place_index = node };
        for (int i = 0; i < 20; i++)
            assert_int_equal(hive_submit(h, where_task, NULL, 0, &o, &r[i]), HIVE_OK);
        for (int i = 0; i < 20; i++) {
            const void *p;
            assert_int_equal(hive_get(h, r[i], HIVE_FOREVER, &p, NULL), HIVE_OK);
            unsigned w = *(const unsigned *)p;
            if (node_of_worker(h, w) != node)
                fail_msg("task hinted to node %u ran on worker %u of node %u", node, w,
                         node_of_worker(h, w));
            assert_int_equal(hive_release(h, r[i]), HIVE_OK);
        }
        let_go(h, k, act, res);
    }
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* Every worker busy: a hinted task and a node-placed actor's turn wait on
 * the named node's ring and no other (whoever takes them later). */
static unsigned rings_holding_work(hive_t *h)
{
    unsigned mask = 0;
    for (unsigned n = 0; n < h->sched.nnodes; n++)
        for (unsigned l = 0; l < HIVE_NPRIO; l++)
            if (hive__ring_nonempty(&h->sched.nodes[n].ring[l]))
                mask |= 1u << n;
    return mask;
}

static void test_queued_on_the_node(void **state)
{
    (void)state;
    hive_t *h = start(FOUR_NODES);
    hive_actor_t act[16];
    hive_ref_t res[16];
    for (unsigned node = 0; node < hive_num_nodes(h); node++) {
        WAIT_UNTIL(rings_holding_work(h) == 0, 60000);   /* the last round's kill turn */
        unsigned k = occupy(h, -1, act, res);
        assert_int_equal(rings_holding_work(h), 0);
        hive_opts_t o = { .place = HIVE_PLACE_NODE, .place_index = node };
        hive_ref_t t;
        assert_int_equal(hive_submit(h, where_task, NULL, 0, &o, &t), HIVE_OK);
        if (rings_holding_work(h) != 1u << node)
            fail_msg("task hinted to node %u: rings with work %#x", node, rings_holding_work(h));
        let_go(h, k, act, res);
        assert_int_equal(hive_get(h, t, HIVE_FOREVER, &dummy_, NULL), HIVE_OK);
        assert_int_equal(hive_release(h, t), HIVE_OK);

        WAIT_UNTIL(rings_holding_work(h) == 0, 60000);
        k = occupy(h, -1, act, res);
        assert_int_equal(rings_holding_work(h), 0);
        hive_actor_opts_t ao = { .place = HIVE_PLACE_NODE, .place_index = node };
        hive_actor_t a;
        assert_int_equal(hive_actor_new(h, &where_class, NULL, 0, &ao, &a), HIVE_OK);
        hive_ref_t c;
        assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &c), HIVE_OK);
        if (rings_holding_work(h) != 1u << node)
            fail_msg("actor placed on node %u: rings with work %#x", node, rings_holding_work(h));
        let_go(h, k, act, res);
        assert_int_equal(hive_get(h, c, HIVE_FOREVER, &dummy_, NULL), HIVE_OK);
        assert_int_equal(hive_release(h, c), HIVE_OK);
        assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
    }
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void expect_einval(int rc, const char *want1, const char *want2)
{
    assert_int_equal(rc, HIVE_EINVAL);
    if (strstr(hive_last_error(), want1) == NULL || strstr(hive_last_error(), want2) == NULL)
        fail_msg("sentence \"%s\" lacks \"%s\" or \"%s\"", hive_last_error(), want1, want2);
}

static void test_bad_placement(void **state)
{
    (void)state;
    hive_t *h = start(TWO_NODES);
    hive_actor_t a = { 77 };
    hive_actor_opts_t ao = { .place = HIVE_PLACE_NODE, .place_index = 2 };
    expect_einval(hive_actor_new(h, &where_class, NULL, 0, &ao, &a), "node 2", "2 NUMA");
    ao = (hive_actor_opts_t){ .place = HIVE_PLACE_WORKER, .place_index = 4 };
    expect_einval(hive_actor_new(h, &where_class, NULL, 0, &ao, &a), "worker 4", "4 workers");
    ao = (hive_actor_opts_t){ .place = 7 };
    expect_einval(hive_actor_new(h, &where_class, NULL, 0, &ao, &a), "kind 7", "HIVE_PLACE_NODE");
    assert_int_equal(a.id, 77);

    hive_ref_t r = { 55 };
    hive_opts_t o = { .place = HIVE_PLACE_NODE, .place_index = 9 };
    expect_einval(hive_submit(h, where_task, NULL, 0, &o, &r), "node 9", "2 NUMA");
    o = (hive_opts_t){ .place = HIVE_PLACE_WORKER };
    expect_einval(hive_submit(h, where_task, NULL, 0, &o, &r), "kind 2", "HIVE_PLACE_NODE");
    assert_int_equal(r.id, 55);

    /* the last valid ones are taken: node 1, worker 3 */
    ao = (hive_actor_opts_t){ .place = HIVE_PLACE_WORKER, .place_index = 3 };
    assert_int_equal(hive_actor_new(h, &where_class, NULL, 0, &ao, &a), HIVE_OK);
    assert_int_equal(call_where(h, a).worker, 3);
    assert_int_equal(hive_actor_kill(h, a), HIVE_OK);
    o = (hive_opts_t){ .place = HIVE_PLACE_NODE, .place_index = 1 };
    assert_int_equal(hive_submit(h, where_task, NULL, 0, &o, &r), HIVE_OK);
    assert_int_equal(hive_get(h, r, HIVE_FOREVER, &dummy_, NULL), HIVE_OK);
    assert_int_equal(hive_release(h, r), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_actor_node_two),
        cmocka_unit_test(test_actor_node_four),
        cmocka_unit_test(test_actor_worker),
        cmocka_unit_test(test_task_hint_runs_there),
        cmocka_unit_test(test_queued_on_the_node),
        cmocka_unit_test(test_bad_placement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
