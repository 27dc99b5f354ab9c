/*
 * test_rl_demo.c - a short run of the RL demo (examples/rl_sampling.c, what
 * `make demo` runs): the env pool steps CartPole, the sampler pushes
 * transitions, the learner actor updates and publishes weights, and the
 * policy learns. The demo is compiled in with its main renamed; --check
 * makes it fail unless steps, learner updates and publishes all happened
 * and the hive run learned (mean return of 100 episodes >= 195; a run goes
 * on past --duration until it has, up to --max-duration). Speed is not
 * checked here (that is the demo's own report). Traced with HIVE_TRACE,
 * as a user would trace it, the demo's timeline passes tools/trace-check.py:
 * every span on a named worker track, spans nest on each track, each task
 * and call ran once, flows join two spans.
 */
#define main rl_sampling_main
#include "../examples/rl_sampling.c"
#undef main

#include "testutil.h"

#include <sys/wait.h>
#include <unistd.h>

static void test_demo_learns(void **state)
{
    (void)state;
    /* sanitized builds run 5-15x slower: the run goes on until the policy
     * is learned, up to --max-duration (120 s: a loaded machine too) */
    char *argv[] = { "rl_sampling", "--rounds", "1", "--duration", "1", "--baseline", "0.5",
                     "--max-duration", "120", "--buffer", "20000", "--check", NULL };
    assert_int_equal(rl_sampling_main((int)(sizeof argv / sizeof argv[0]) - 1, argv), 0);
}

static void test_demo_with_env_cost(void **state)
{
    (void)state;
    /* simulated physics (--env-cost-us): the same pipeline learns */
    char *argv[] = { "rl_sampling", "--rounds", "1", "--duration", "1", "--baseline", "0",
                     "--env-cost-us", "5", "--max-duration", "120", "--buffer", "20000", "--check",
                     NULL };
    assert_int_equal(rl_sampling_main((int)(sizeof argv / sizeof argv[0]) - 1, argv), 0);
}

static void test_demo_traced(void **state)
{
    (void)state;
    char path[] = "test_rl_demo_XXXXXX.json";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    close(fd);
    setenv("HIVE_TRACE", path, 1);
    setenv("HIVE_TRACE_EVENTS", "1048576", 1);      /* the whole run: nothing dropped */
    char *argv[] = { "rl_sampling", "--rounds", "1", "--duration", "0.5", "--max-duration", "0.5",
                     "--baseline", "0", "--buffer", "20000", NULL };
    int rc = rl_sampling_main((int)(sizeof argv / sizeof argv[0]) - 1, argv);
    unsetenv("HIVE_TRACE");
    unsetenv("HIVE_TRACE_EVENTS");
    assert_int_equal(rc, 0);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/trace-check.py %s", path);
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* it is the demo's timeline: its actors' methods ran on worker tracks */
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 24];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "\"cat\":\"method\""));
    assert_non_null(strstr(text, "\"name\":\"worker 0 (node "));
    remove(path);
}

static void test_demo_bad_flag(void **state)
{
    (void)state;
    char *argv[] = { "rl_sampling", "--frobnicate", NULL };
    assert_int_equal(rl_sampling_main(2, argv), 2);
    char *spi[] = { "rl_sampling", "--spi", "0", NULL };
    assert_int_equal(rl_sampling_main(3, spi), 2);
    char *cost[] = { "rl_sampling", "--env-cost-us", "-1", NULL };
    assert_int_equal(rl_sampling_main(3, cost), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_demo_learns),
        cmocka_unit_test(test_demo_with_env_cost),
        cmocka_unit_test(test_demo_traced),
        cmocka_unit_test(test_demo_bad_flag),
    };
    return cmocka_run_group_tests_name("rl_demo", tests, NULL, NULL);
}
