/*
 * test_top.c - live statistics for hive-top: an engine with publish_stats
 * writes its file, `tools/hive-top --once` (run with /usr/bin/python3)
 * shows its workers and store, the figures follow the work done, and the
 * file is gone after shutdown. HIVE_STATS=1 turns it on too. And as a
 * person would: hive-top's live screen in a tmux pane, captured, shows the
 * workers and the store, and its figures move as work is done. With a
 * backed-up actor, a replay buffer and an env pool, the file has the keys
 * the dashboards read (checked with Python's json) and --once shows the
 * busiest actor, the buffer's fill and the pool's steps; a program name
 * with quotes, control bytes and broken UTF-8 still gives valid JSON.
 */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
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
    char dir[] = "/tmp/test_top_XXXXXX";
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
    char dir[] = "/tmp/test_top_XXXXXX", name[64], cmd[512];
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

static _Atomic int gate_open, in_slow;

static int slow(void *self, hive_ctx_t *ctx)
{
    (void)self;
    (void)ctx;
    atomic_store(&in_slow, 1);
    while (!atomic_load(&gate_open))
        sched_yield();
    return 0;
}

static const hive_method_t SLOW_METHODS[] = { { .name = "slow", .fn = slow } };
static const hive_actor_class_t SLOW_CLS = { .name = "Slowpoke", .methods = SLOW_METHODS,
                                             .nmethods = 1 };

/* The engine's file in dir (one engine publishes there). */
static void the_file(const char *dir, char *path, size_t n)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    path[0] = '\0';
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".json") != NULL && strstr(e->d_name, ".tmp") == NULL)
            snprintf(path, n, "%s/%s", dir, e->d_name);
    closedir(d);
    assert_true(path[0] != '\0');
}

/* Python's json reads the file and checks the keys and their figures:
 * exit status 0 if every check holds. */
static int json_checks(const char *path, const char *program)
{
    static const char script[] =
        "import json,sys\n"
        "d=json.load(open(sys.argv[1]))\n"
        "assert d['program']==sys.argv[2], repr(d['program'])\n"
        "a=d['actors_top'][0]\n"
        "assert a['class']=='Slowpoke' and a['name']=='backlog' and a['mailbox']==12, a\n"
        "assert a['state']=='alive' and a['id'].startswith('0x'), a\n"
        "assert d['actors']['restarting']==0\n"
        "assert d['store']['used_high']>=d['store']['used'] and d['store']['efull']==0\n"
        "c=d['size_classes']; assert c[-1]['size']==0, c\n"
        "assert sum(x['bytes'] for x in c)==d['store']['used'], c\n"
        "r=d['replay'][0]\n"
        "assert (r['id'],r['capacity'],r['size'],r['inserts'],r['samples'],r['limiter_waits'])"
        "==(1,50,50,70,0,0), r\n"
        "e=d['envpools'][0]; assert (e['id'],e['num_envs'],e['steps'])==(1,3,6), e\n";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c \"$HIVE_TEST_SCRIPT\" '%s' \"$HIVE_TEST_PROG\"",
             path);
    setenv("HIVE_TEST_SCRIPT", script, 1);
    setenv("HIVE_TEST_PROG", program, 1);
    int st = system(cmd);
    unsetenv("HIVE_TEST_SCRIPT");
    unsetenv("HIVE_TEST_PROG");
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_busiest_actor_replay_and_envpool(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_top_XXXXXX", path[512];
    assert_non_null(mkdtemp(dir));
    setenv("HIVE_STATS_DIR", dir, 1);
    /* a name a JSON writer must escape: quote, backslash, a control byte,
     * bytes that are no UTF-8, and a valid two-byte sequence */
    char *saved = program_invocation_short_name;
    program_invocation_short_name = (char *)"we\"ird\\prog\x01\xff-\xc3\xa9\xe2(\xed\xa0\x80";
    hive_config_t cfg = { .workers = 2, .store_bytes = 16u << 20, .no_pin = 1, .publish_stats = 1 };
    hive_t *h = NULL;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    atomic_store(&gate_open, 0);
    hive_actor_t a;
    hive_actor_opts_t o = { .name = "backlog" };
    assert_int_equal(hive_actor_new(h, &SLOW_CLS, NULL, 0, &o, &a), HIVE_OK);
    hive_ref_t first, r[12];
    assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &first), HIVE_OK);
    WAIT_UNTIL(atomic_load(&in_slow), 10000);
    for (int i = 0; i < 12; i++)
        assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &r[i]), HIVE_OK);
    hive_replay_config_t rc = { .capacity = 50, .item_size = 16 };
    hive_replay_t *rb;
    assert_int_equal(hive_replay_new(h, &rc, &rb), HIVE_OK);
    unsigned char item[16] = { 0 };
    for (int i = 0; i < 70; i++)
        assert_int_equal(hive_replay_push(rb, item), HIVE_OK);
    hive_envpool_opts_t eo = { .num_envs = 3, .seed = 1 };
    hive_envpool_t *p;
    assert_int_equal(hive_envpool_new(h, &hive_env_cartpole, &eo, &p), HIVE_OK);
    hive_envpool_batch_t b;
    assert_int_equal(hive_envpool_reset(p, &b), HIVE_OK);
    assert_int_equal(hive_envpool_reset(p, &b), HIVE_OK);

    WAIT_UNTIL(top_once(dir, out, sizeof out) == 0 && strstr(out, "envpool 1") != NULL &&
               strstr(out, "steps 6") != NULL && strstr(out, "inserts 70") != NULL, 10000);
    assert_non_null(strstr(out, "  busiest Slowpoke \"backlog\""));
    assert_non_null(strstr(out, "mailbox 12 "));
    assert_non_null(strstr(out, "  replay 1   [##########] 50 of 50 (100%)  inserts 70  samples 0"));
    assert_non_null(strstr(out, "  envpool 1   envs 3 "));
    the_file(dir, path, sizeof path);
    /* 0xff: no lead byte; e2 then '(': cut short; ed a0 80: a surrogate,
     * then two continuation bytes alone: each a U+FFFD */
    assert_int_equal(json_checks(path, "we\"ird\\prog\x01\xef\xbf\xbd-\xc3\xa9"
                                       "\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"), 0);

    atomic_store(&gate_open, 1);
    const void *v;
    size_t sz;
    test_get_ok(h, first, 60 * 1000000000ll, &v, &sz);
    hive_release(h, first);
    for (int i = 0; i < 12; i++) {
        test_get_ok(h, r[i], 60 * 1000000000ll, &v, &sz);
        hive_release(h, r[i]);
    }
    assert_int_equal(hive_envpool_free(p), HIVE_OK);
    assert_int_equal(hive_replay_free(rb), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    program_invocation_short_name = saved;       /* the publisher read it until here */
    unsetenv("HIVE_STATS_DIR");
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_and_shown),
        cmocka_unit_test(test_live_screen_in_tmux),
        cmocka_unit_test(test_bad_directory_fails_init),
        cmocka_unit_test(test_busiest_actor_replay_and_envpool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
