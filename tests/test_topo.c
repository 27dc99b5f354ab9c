/* test_topo.c - worker -> core -> node maps on synthetic topologies, the real
 * machine, and topology errors. */
#include "testutil.h"
#include "topo.h"

static hive_t *start(const char *topology, unsigned workers)
{
    hive_config_t cfg = { .workers = workers, .topology = topology };
    hive_t *h = NULL;
    int rc = hive_init(&cfg, &h);
    if (rc != HIVE_OK)
        fail_msg("hive_init(%s, %u): %s", topology ? topology : "machine", workers, hive_last_error());
    return h;
}

static void expect_worker(hive_t *h, unsigned i, unsigned node, unsigned core, int pu)
{
    hive_worker_info_t wi;
    assert_int_equal(hive_worker_info(h, i, &wi), HIVE_OK);
    if (wi.node != node || wi.core != core || wi.pu != pu)
        fail_msg("worker %u: node %u core %u pu %d, expected node %u core %u pu %d",
                 i, wi.node, wi.core, wi.pu, node, core, pu);
    assert_int_equal(wi.bound, 0);              /* synthetic: nothing is bound */
}

static void test_two_nodes(void **state)
{
    (void)state;
    hive_t *h = start("pack:2 numa:1 core:4 pu:1", 0);
    assert_int_equal(hive_num_workers(h), 8);  /* default: one per core */
    assert_int_equal(hive_num_nodes(h), 2);
    for (unsigned i = 0; i < 8; i++)
        expect_worker(h, i, i / 4, i, (int)i);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_four_nodes_siblings_last(void **state)
{
    (void)state;
    /* 4 nodes x 2 cores x 2 PUs: PU os index = node*4 + core*2 + thread */
    hive_t *h = start("pack:4 numa:1 core:2 pu:2", 16);
    assert_int_equal(hive_num_workers(h), 16);
    assert_int_equal(hive_num_nodes(h), 4);
    for (unsigned i = 0; i < 8; i++)           /* first PU of every core, node by node */
        expect_worker(h, i, i / 2, i, (int)(i * 2));
    for (unsigned i = 8; i < 16; i++)          /* then the hyperthread siblings */
        expect_worker(h, i, (i - 8) / 2, i - 8, (int)((i - 8) * 2 + 1));
    assert_int_equal(hive_shutdown(h), HIVE_OK);

    h = start("pack:4 numa:1 core:2 pu:2", 0);
    assert_int_equal(hive_num_workers(h), 8);  /* default: cores, not PUs */
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_more_workers_than_pus_wrap(void **state)
{
    (void)state;
    hive_t *h = start("pack:2 numa:1 core:2 pu:1", 6);
    expect_worker(h, 4, 0, 0, 0);
    expect_worker(h, 5, 0, 1, 1);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_no_core_level(void **state)
{
    (void)state;
    /* a description without cores: each PU counts as a core */
    hive_t *h = start("numa:2 pu:3", 0);
    assert_int_equal(hive_num_workers(h), 6);
    assert_int_equal(hive_num_nodes(h), 2);
    expect_worker(h, 3, 1, 3, 3);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_real_machine_pinned(void **state)
{
    (void)state;
    hive__topo_t t;
    assert_int_equal(hive__topo_open(&t, NULL), HIVE_OK);
    unsigned ncores = t.ncores;
    hive__topo_close(&t);
    assert_true(ncores >= 1);

    hive_t *h = start(NULL, 0);
    assert_int_equal(hive_num_workers(h), ncores);
    for (unsigned i = 0; i < ncores; i++) {
        hive_worker_info_t wi;
        assert_int_equal(hive_worker_info(h, i, &wi), HIVE_OK);
        assert_int_equal(wi.bound, 1);
        assert_int_equal(wi.core, i);
        for (unsigned j = 0; j < i; j++) {      /* distinct cores get distinct PUs */
            hive_worker_info_t wj;
            hive_worker_info(h, j, &wj);
            assert_int_not_equal(wi.pu, wj.pu);
        }
    }
    assert_int_equal(hive_shutdown(h), HIVE_OK);

    hive_config_t cfg = { .no_pin = 1, .workers = 3 };
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    hive_worker_info_t wi;
    assert_int_equal(hive_worker_info(h, 2, &wi), HIVE_OK);
    assert_int_equal(wi.bound, 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_bad_topology(void **state)
{
    (void)state;
    hive_config_t cfg = { .topology = "pack:x core:banana" };
    hive_t *h = (hive_t *)0x1;
    ASSERT_FAILS_WITH(hive_init(&cfg, &h), HIVE_ETOPO, "pack:x core:banana");
    assert_ptr_equal(h, (hive_t *)0x1);         /* output untouched */
}

static void test_binding_failure(void **state)
{
    (void)state;
    hive_t *h = (hive_t *)0x1;
    hive__topo_fail_bind = 1;
    ASSERT_FAILS_WITH(hive_init(NULL, &h), HIVE_ETOPO, "processing unit");
    hive__topo_fail_bind = 0;
    assert_ptr_equal(h, (hive_t *)0x1);
    /* no_pin does not bind, so the same failure cannot happen */
    hive__topo_fail_bind = 1;
    hive_config_t cfg = { .no_pin = 1 };
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    hive__topo_fail_bind = 0;
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_worker_info_bad_input(void **state)
{
    (void)state;
    hive_t *h = start("pack:1 numa:1 core:2 pu:1", 0);
    hive_worker_info_t wi = { .node = 99 };
    ASSERT_FAILS_WITH(hive_worker_info(h, 2, &wi), HIVE_EINVAL, "worker 2 out of range, engine has 2");
    assert_int_equal(wi.node, 99);
    ASSERT_FAILS_WITH(hive_worker_info(h, 0, NULL), HIVE_EINVAL, "out is NULL");
    ASSERT_FAILS_WITH(hive_worker_info(NULL, 0, &wi), HIVE_EINVAL, "engine is NULL");
    assert_int_equal(hive_num_workers(NULL), 0);
    assert_int_equal(hive_num_nodes(NULL), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* 3000 NUMA nodes (grouped in 60 packages: hwloc's own loading is
 * quadratic in siblings): the slot table is built in linear time (it was
 * cubic: 130 s of CPU for this one) and an engine over it starts, serves
 * and stops. */
static void test_thousands_of_nodes(void **state)
{
    (void)state;
    const char *desc = "pack:60 numa:50 core:1 pu:1";
    hive__topo_t t;
    assert_int_equal(hive__topo_open(&t, desc), HIVE_OK);
    assert_int_equal(t.nnodes, 3000);
    assert_int_equal(t.ncores, 3000);
    assert_int_equal(t.nslots, 3000);
    for (unsigned i = 0; i < 3000; i++) {
        const hive__slot_t *s = hive__topo_slot(&t, i);
        if (s->pu != (int)i || s->core != i || s->node != i || hive__topo_node_of_pu(&t, (int)i) != i)
            fail_msg("slot %u: pu %d core %u node %u", i, s->pu, s->core, s->node);
    }
    hive__topo_close(&t);

    /* every node gets a region and queues; fewer workers under sanitizers */
    unsigned workers = TEST_SCALE == 1 ? 0 : 300;
    hive_t *h = test_engine(4u << 20, workers, desc);
    assert_int_equal(hive_num_nodes(h), 3000);
    assert_int_equal(hive_num_workers(h), workers ? workers : 3000);
    expect_worker(h, hive_num_workers(h) - 1, hive_num_workers(h) - 1, hive_num_workers(h) - 1,
                  (int)hive_num_workers(h) - 1);
    hive_ref_t r;
    assert_int_equal(hive_put(h, "x", 1, &r), HIVE_OK);
    const void *p;
    test_get_ok(h, r, 0, &p, NULL);
    assert_int_equal(*(const char *)p, 'x');
    hive_release(h, r);
    test_expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_nodes),
        cmocka_unit_test(test_four_nodes_siblings_last),
        cmocka_unit_test(test_more_workers_than_pus_wrap),
        cmocka_unit_test(test_no_core_level),
        cmocka_unit_test(test_real_machine_pinned),
        cmocka_unit_test(test_bad_topology),
        cmocka_unit_test(test_binding_failure),
        cmocka_unit_test(test_worker_info_bad_input),
        cmocka_unit_test(test_thousands_of_nodes),
    };
    return cmocka_run_group_tests_name("topo", tests, NULL, NULL);
}
