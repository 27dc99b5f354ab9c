/*
 * test_rl_demo.c - a short smoke run of the RL demo (examples/rl_sampling.c,
 * what `make demo` runs): env actors step, the learner samples and updates,
 * weights get published. The demo is compiled in with its main renamed;
 * --check makes it fail unless steps, learner batches and publishes all
 * happened. Speed is not checked here (that is the demo's own report).
 */
#define main rl_sampling_main
#include "../examples/rl_sampling.c"
#undef main

#include "testutil.h"

static void test_demo_smoke(void **state)
{
    (void)state;
    /* sanitized builds run the learner 5-15x slower: give it the time to
     * reach its first publish (250 batches) on a loaded machine too */
    char *argv[] = { "rl_sampling", "--duration", TEST_SCALE > 1 ? "6" : "2", "--baseline", "0.5",
                     "--buffer", "20000", "--check", NULL };
    assert_int_equal(rl_sampling_main(8, argv), 0);
}

static void test_demo_bad_flag(void **state)
{
    (void)state;
    char *argv[] = { "rl_sampling", "--frobnicate", NULL };
    assert_int_equal(rl_sampling_main(2, argv), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_smoke),
        cmocka_unit_test(test_demo_bad_flag),
    };
    return cmocka_run_group_tests_name("rl_demo", tests, NULL, NULL);
}
