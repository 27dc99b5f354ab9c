/*
 * test_top.c - live statistics for hive-top: an engine with publish_stats
 * writes its file, `tools/hive-top --once` (run with /usr/bin/python3)
 * shows its workers and store, the figures follow the work done, and the
 * file is gone after shutdown. HIVE_STATS=1 turns it on too. And as a
 * person would: hive-top's live screen in a tmux pane, captured, shows the
 * workers and the store, and its figures move as work is done.
 */
#include "testutil.h"

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

static int noop(hive_ctx_t *ctx)
{
    (void)ctx;
    return 0;
}

static void run_tasks(hive_t *h, int n)
{
    for (int i = 0; i < n; i++) {
        hive_ref_t r;
        const void *p;
        size_t sz;
        assert_int_equal(hive_submit(h, noop, NULL, 0, NULL, &r), HIVE_OK);
        test_get_ok(h, r, 60 * 1000000000ll, &p, &sz);
        hive_release(h, r);
    }
}

/* hive-top --once on dir: its output in buf, its exit status returned. */
static int top_once(const char *dir, char *buf, size_t n)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/hive-top --once --dir %s --pid %d", dir,
             (int)getpid());
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t len = fread(buf, 1, n - 1, p);
    buf[len] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static unsigned files_in(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    unsigned n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static char out[1 << 16];

static void check_engine(const char *dir, bool by_env)
{
    hive_config_t cfg = { .workers = 2, .store_bytes = 16u << 20, .no_pin = 1,
                          .topology = "pack:1 numa:2 core:1 pu:1", .publish_stats = !by_env };
    hive_t *h = NULL;
    if (by_env)
        setenv("HIVE_STATS", "1", 1);
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    unsetenv("HIVE_STATS");
    assert_int_equal(files_in(dir), 1);
    run_tasks(h, 25);
    /* the publisher catches up within ~100 ms: poll until it shows 25 */
    WAIT_UNTIL(top_once(dir, out, sizeof out) == 0 && strstr(out, "total   tasks 25 ") != NULL,
               10000);
    char pid[32];
    snprintf(pid, sizeof pid, "pid %d", (int)getpid());
    assert_non_null(strstr(out, pid));
    assert_non_null(strstr(out, "worker 0   n0  c0"));
    assert_non_null(strstr(out, "worker 1   n1  c1"));
    assert_non_null(strstr(out, "  store   ["));
    assert_non_null(strstr(out, "of 16.0 MiB"));
    /* it changes over time: more work, a larger count */
    run_tasks(h, 15);
    WAIT_UNTIL(top_once(dir, out, sizeof out) == 0 && strstr(out, "total   tasks 40 ") != NULL,
               10000);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(files_in(dir), 0);           /* removed, temporary file too */
    assert_int_equal(top_once(dir, out, sizeof out), 1);
    assert_non_null(strstr(out, "no hive engines"));
}

static void test_published_and_shown(void **state)
{
    (void)state;
    char dir[] = "test_top_XXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("HIVE_STATS_DIR", dir, 1);
    check_engine(dir, false);
    check_engine(dir, true);
    unsetenv("HIVE_STATS_DIR");
    rmdir(dir);
}

/* The visible pane of tmux session name, into out. */
static void capture(const char *name)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "tmux capture-pane -p -t %s", name);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = '\0';
    pclose(p);
}

static void test_live_screen_in_tmux(void **state)
{
    (void)state;
    char dir[] = "test_top_XXXXXX", name[64], cmd[512];
    assert_non_null(mkdtemp(dir));
    setenv("HIVE_STATS_DIR", dir, 1);
    hive_config_t cfg = { .workers = 2, .store_bytes = 16u << 20, .no_pin = 1,
                          .topology = "pack:1 numa:2 core:1 pu:1", .publish_stats = 1 };
    hive_t *h = NULL;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    snprintf(name, sizeof name, "hive-top-test-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "tmux new-session -d -s %s -x 150 -y 20 "
             "'/usr/bin/python3 tools/hive-top --dir %s --pid %d --interval 0.2'",
             name, dir, (int)getpid());
    assert_int_equal(system(cmd), 0);
    run_tasks(h, 30);
    WAIT_UNTIL((capture(name), strstr(out, "total   tasks 30 ") != NULL), 20000);
    assert_non_null(strstr(out, "worker 1   n1  c1"));
    assert_non_null(strstr(out, "  store   ["));
    run_tasks(h, 12);
    WAIT_UNTIL((capture(name), strstr(out, "total   tasks 42 ") != NULL), 20000);
    snprintf(cmd, sizeof cmd, "tmux send-keys -t %s q; sleep 0.3; tmux kill-session -t %s "
             "2>/dev/null", name, name);
    (void)system(cmd);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    unsetenv("HIVE_STATS_DIR");
    rmdir(dir);
}

static void test_bad_directory_fails_init(void **state)
{
    (void)state;
    setenv("HIVE_STATS_DIR", "no-such-directory", 1);
    hive_config_t cfg = { .workers = 1, .store_bytes = 16u << 20, .no_pin = 1, .publish_stats = 1 };
    hive_t *h = (hive_t *)0x1;
    ASSERT_FAILS_WITH(hive_init(&cfg, &h), HIVE_EINVAL, "cannot write the statistics file");
    assert_ptr_equal(h, (hive_t *)0x1);
    unsetenv("HIVE_STATS_DIR");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_and_shown),
        cmocka_unit_test(test_live_screen_in_tmux),
        cmocka_unit_test(test_bad_directory_fails_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
