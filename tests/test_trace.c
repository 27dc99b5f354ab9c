/*
 * test_trace.c - the timeline (trace_path, HIVE_TRACE): a workload of
 * named tasks, nested helping waits, untitled tasks and actor calls is
 * traced, and tools/trace-check.py (run with /usr/bin/python3) checks the
 * file's structure: tracks, nesting, each submitted task once, flows.
 * The checker itself is shown to reject a broken trace, and tools/hive-trace
 * draws the file as a PNG. A waiting job's wait is a span around the jobs
 * it helped with. hive_trace_flush writes a valid file while workers
 * record, also from a ring that wraps during the copy.
 */
#include "testutil.h"
#include "util/fault.h"
#include "hive_impl.h"

#include <signal.h>
#include <sys/resource.h>

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_LEAF    (200 / (TEST_SCALE > 1 ? 2 : 1))
#define N_PARENT  8
#define N_CHILD   4
#define N_CALLS   50

static const char *checker = "tools/trace-check.py";

/* Run the checker on path with extra arguments; its exit status. */
static int run_checker(const char *path, const char *extra)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s %s", checker, path, extra);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A fresh file name in the working directory (removed by the test). */
static void temp_path(char *buf, size_t n)
{
    snprintf(buf, n, "test_trace_XXXXXX.json");
    int fd = mkstemps(buf, 5);
    if (fd < 0)
        fail_msg("mkstemps failed");
    close(fd);
}

static int leaf(hive_ctx_t *ctx)
{
    int x = 1;
    return hive_return(ctx, &x, sizeof x);
}

int untitled_task(hive_ctx_t *ctx);        /* named by its symbol (tests link -rdynamic) */
int untitled_task(hive_ctx_t *ctx)
{
    return leaf(ctx);
}

static const hive_opts_t CHILD = { .name = "child" };

/* Submits N_CHILD children and waits for them: nested helping spans. */
static int parent(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    hive_ref_t r[N_CHILD];
    for (int i = 0; i < N_CHILD; i++)
        if (hive_submit(h, leaf, NULL, 0, &CHILD, &r[i]) != HIVE_OK)
            return 1;
    int sum = 0;
    for (int i = 0; i < N_CHILD; i++) {
        const void *p;
        size_t n;
        if (hive_get(h, r[i], HIVE_FOREVER, &p, &n) != HIVE_OK)
            return 1;
        sum += *(const int *)p;
        hive_release(h, r[i]);
    }
    return sum == N_CHILD ? 0 : 1;
}

static int add(void *self, hive_ctx_t *ctx)
{
    (void)ctx;
    ++*(int *)self;
    return 0;
}

static const hive_method_t COUNTER_METHODS[] = { { .name = "add", .fn = add } };
static const hive_actor_class_t COUNTER = { .name = "Counter", .size = sizeof(int),
                                            .methods = COUNTER_METHODS, .nmethods = 1 };

static void get_and_release(hive_t *h, hive_ref_t r)
{
    const void *p;
    size_t n;
    test_get_ok(h, r, 60 * 1000000000ll, &p, &n);
    hive_release(h, r);
}

/* The workload: n_leaf named leaves, parents with children, two untitled
 * tasks, N_CALLS actor calls. */
static void workload(hive_t *h, int n_leaf)
{
    static const hive_opts_t LEAF = { .name = "leaf" }, PARENT = { .name = "parent" };
    hive_ref_t r;
    for (int i = 0; i < n_leaf; i++) {
        assert_int_equal(hive_submit(h, leaf, NULL, 0, &LEAF, &r), HIVE_OK);
        get_and_release(h, r);
    }
    hive_ref_t p[N_PARENT];
    for (int i = 0; i < N_PARENT; i++)
        assert_int_equal(hive_submit(h, parent, NULL, 0, &PARENT, &p[i]), HIVE_OK);
    for (int i = 0; i < N_PARENT; i++)
        get_and_release(h, p[i]);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(hive_submit(h, untitled_task, NULL, 0, NULL, &r), HIVE_OK);
        get_and_release(h, r);
    }
    hive_actor_t a;
    assert_int_equal(hive_actor_new(h, &COUNTER, NULL, 0, NULL, &a), HIVE_OK);
    hive_ref_t c[N_CALLS];
    for (int i = 0; i < N_CALLS; i++)
        assert_int_equal(hive_call(h, a, 0, NULL, 0, NULL, &c[i]), HIVE_OK);
    for (int i = 0; i < N_CALLS; i++)
        get_and_release(h, c[i]);
}

static void test_timeline_structure(void **state)
{
    (void)state;
    char path[64];
    temp_path(path, sizeof path);
    hive_config_t cfg = { .workers = 4, .store_bytes = 64u << 20, .no_pin = 1,
                          .topology = "pack:1 numa:2 core:2 pu:1", .trace_path = path };
    hive_t *h = NULL;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    workload(h, N_LEAF);
    hive_stats_t st;
    assert_int_equal(hive_stats(h, &st, sizeof st), HIVE_OK);
    assert_true(st.trace_events > 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    char extra[256];
    snprintf(extra, sizeof extra, "leaf=%d child=%d parent=%d Counter.add=%d", N_LEAF,
             N_PARENT * N_CHILD, N_PARENT, N_CALLS);
    assert_int_equal(run_checker(path, extra), 0);
    /* the same file does not pass a wrong count: the counts are checked */
    snprintf(extra, sizeof extra, "leaf=%d", N_LEAF + 1);
    assert_int_equal(run_checker(path, extra), 1);
    /* worker tracks carry node, core and PU; untitled tasks got a name */
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 22];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "\"worker 3 (node 1, core 3, pu 3)\""));
    assert_non_null(strstr(text, "\"name\":\"untitled_task\""));   /* -rdynamic: by its symbol */
    assert_non_null(strstr(text, "\"name\":\"store\""));
    /* tools/hive-trace draws it: a PNG comes out */
    char png[80], cmd[256];
    snprintf(png, sizeof png, "%s.png", path);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tools/hive-trace %s %s > /dev/null", path, png);
    assert_int_equal(system(cmd), 0);
    f = fopen(png, "rb");
    assert_non_null(f);
    unsigned char magic[8] = { 0 };
    assert_int_equal(fread(magic, 1, 8, f), 8);
    fclose(f);
    assert_memory_equal(magic, "\x89PNG\r\n\x1a\n", 8);
    remove(png);
    remove(path);
}

/* HIVE_TRACE turns it on without a config field; a small ring drops the
 * oldest events, counts them, and what is left is still a valid trace. */
static void test_env_and_dropping(void **state)
{
    (void)state;
    char path[64];
    temp_path(path, sizeof path);
    setenv("HIVE_TRACE", path, 1);
    setenv("HIVE_TRACE_EVENTS", "64", 1);
    hive_t *h = test_engine(64u << 20, 2, NULL);
    unsetenv("HIVE_TRACE");
    unsetenv("HIVE_TRACE_EVENTS");
    workload(h, 300);
    hive_stats_t st;
    assert_int_equal(hive_stats(h, &st, sizeof st), HIVE_OK);
    assert_true(st.trace_dropped > 0);
    assert_true(st.trace_events > st.trace_dropped);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(run_checker(path, "--dropped"), 0);
    remove(path);
}

#define N_THREADS 3
#define N_EACH    60

static void *submitter(void *arg)
{
    static const hive_opts_t FROM_THREAD = { .name = "from_thread" };
    hive_t *h = arg;
    for (int i = 0; i < N_EACH; i++) {
        hive_ref_t r;
        if (hive_submit(h, leaf, NULL, 0, &FROM_THREAD, &r) != HIVE_OK)
            return (void *)1;
        get_and_release(h, r);
    }
    return NULL;
}

/* Several user threads submit at once into the shared ring: each gets a
 * track of its own, on which its submits nest, and every task is there. */
static void test_user_threads(void **state)
{
    (void)state;
    char path[64];
    temp_path(path, sizeof path);
    hive_config_t cfg = { .workers = 2, .store_bytes = 64u << 20, .no_pin = 1, .trace_path = path };
    hive_t *h = NULL;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    pthread_t t[N_THREADS];
    for (int i = 0; i < N_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, submitter, h), 0);
    for (int i = 0; i < N_THREADS; i++) {
        void *rv;
        assert_int_equal(pthread_join(t[i], &rv), 0);
        assert_null(rv);
    }
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    char extra[64];
    snprintf(extra, sizeof extra, "from_thread=%d", N_THREADS * N_EACH);
    assert_int_equal(run_checker(path, extra), 0);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 22];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    int tracks = 0;
    for (const char *p = text; (p = strstr(p, "\"name\":\"thread ")) != NULL; p++)
        tracks++;
    assert_int_equal(tracks, N_THREADS);
    remove(path);
}

/* Off: nothing is recorded. */
static void test_off_records_nothing(void **state)
{
    (void)state;
    hive_t *h = test_engine(64u << 20, 2, NULL);
    workload(h, 10);
    hive_stats_t st;
    assert_int_equal(hive_stats(h, &st, sizeof st), HIVE_OK);
    assert_int_equal(st.trace_events, 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* The checker rejects what breaks the rules: overlapping spans on one
 * track, a span on an unnamed track, a task that ran twice, a dangling flow. */
static void test_checker_rejects_broken_traces(void **state)
{
    (void)state;
    static const char *broken[] = {
        "{\"traceEvents\":[{\"ph\":\"M\",\"pid\":1,\"tid\":1,\"name\":\"thread_name\",\"args\":{\"name\":\"worker 0\"}},"
        "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":1.000,\"dur\":5.000,\"cat\":\"task\",\"name\":\"a\",\"args\":{\"id\":1}},"
        "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":3.000,\"dur\":5.000,\"cat\":\"task\",\"name\":\"b\",\"args\":{\"id\":2}}],"
        "\"otherData\":{\"dropped\":0}}",
        "{\"traceEvents\":[{\"ph\":\"X\",\"pid\":1,\"tid\":7,\"ts\":1.000,\"dur\":1.000,\"cat\":\"task\",\"name\":\"a\",\"args\":{\"id\":1}}],"
        "\"otherData\":{\"dropped\":0}}",
        "{\"traceEvents\":[{\"ph\":\"M\",\"pid\":1,\"tid\":1,\"name\":\"thread_name\",\"args\":{\"name\":\"worker 0\"}},"
        "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":1.000,\"dur\":1.000,\"cat\":\"task\",\"name\":\"a\",\"args\":{\"id\":1}},"
        "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":3.000,\"dur\":1.000,\"cat\":\"task\",\"name\":\"a\",\"args\":{\"id\":1}}],"
        "\"otherData\":{\"dropped\":0}}",
        "{\"traceEvents\":[{\"ph\":\"M\",\"pid\":1,\"tid\":1,\"name\":\"thread_name\",\"args\":{\"name\":\"worker 0\"}},"
        "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":1.000,\"dur\":1.000,\"cat\":\"task\",\"name\":\"a\",\"args\":{\"id\":1}},"
        "{\"ph\":\"f\",\"pid\":1,\"tid\":1,\"ts\":1.000,\"id\":1,\"bp\":\"e\"}],"
        "\"otherData\":{\"dropped\":0}}",
        "{\"traceEvents\":[",
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        char path[64];
        temp_path(path, sizeof path);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(broken[i], f);
        fclose(f);
        if (run_checker(path, "") != 1)
            fail_msg("the checker accepted broken trace %zu", i);
        remove(path);
    }
}

/* One worker: a parent's children wait in its own deque, so its hive_get
 * helps, and its hive_wait too: wait spans hold the children's spans. */
static int waiter(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    hive_ref_t r[N_CHILD];
    for (int i = 0; i < N_CHILD; i++)
        if (hive_submit(h, leaf, NULL, 0, &CHILD, &r[i]) != HIVE_OK)
            return 1;
    if (hive_wait(h, r, N_CHILD / 2, N_CHILD / 2, HIVE_FOREVER, NULL) < N_CHILD / 2)
        return 1;
    for (int i = 0; i < N_CHILD; i++) {
        const void *p;
        size_t n;
        if (hive_get(h, r[i], HIVE_FOREVER, &p, &n) != HIVE_OK)
            return 1;
        hive_release(h, r[i]);
    }
    return 0;
}

static void test_wait_spans(void **state)
{
    (void)state;
    char path[64];
    temp_path(path, sizeof path);
    hive_config_t cfg = { .workers = 1, .store_bytes = 64u << 20, .no_pin = 1, .trace_path = path };
    hive_t *h = NULL;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    static const hive_opts_t WAITER = { .name = "waiter" };
    hive_ref_t r[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(hive_submit(h, waiter, NULL, 0, &WAITER, &r[i]), HIVE_OK);
    for (int i = 0; i < 3; i++)
        get_and_release(h, r[i]);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    char extra[64];
    snprintf(extra, sizeof extra, "--waits waiter=3 child=%d", 3 * N_CHILD);
    assert_int_equal(run_checker(path, extra), 0);
    remove(path);
}

/* The checker's --waits fails a trace without a helping wait. */
static void test_waits_checked(void **state)
{
    (void)state;
    char path[64];
    temp_path(path, sizeof path);
    hive_config_t cfg = { .workers = 1, .store_bytes = 64u << 20, .no_pin = 1, .trace_path = path };
    hive_t *h = NULL;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    hive_ref_t r;
    assert_int_equal(hive_submit(h, leaf, NULL, 0, NULL, &r), HIVE_OK);
    get_and_release(h, r);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(run_checker(path, ""), 0);
    assert_int_equal(run_checker(path, "--waits"), 1);
    remove(path);
}

#define BUSY_ROUNDS 40                 /* a bounded timeline: the checker reads it whole */

typedef struct busy {
    hive_t     *h;
    _Atomic int stop;
    _Atomic int rounds;
} busy_t;

/* Keeps the workers recording until told to stop. */
static void *keep_busy(void *arg)
{
    busy_t *b = arg;
    static const hive_opts_t PARENT = { .name = "parent" };
    while (!atomic_load(&b->stop) && b->rounds < BUSY_ROUNDS) {
        hive_ref_t p[N_PARENT];
        for (int i = 0; i < N_PARENT; i++)
            if (hive_submit(b->h, parent, NULL, 0, &PARENT, &p[i]) != HIVE_OK)
                return (void *)1;
        for (int i = 0; i < N_PARENT; i++)
            get_and_release(b->h, p[i]);
        b->rounds++;
    }
    return NULL;
}

/* Flushes while the workers record: each file is a whole, valid trace. */
static void flush_while_busy(const char *events, const char *checker_extra)
{
    char path[64];
    temp_path(path, sizeof path);
    if (events != NULL)
        setenv("HIVE_TRACE_EVENTS", events, 1);
    hive_config_t cfg = { .workers = 2, .store_bytes = 64u << 20, .no_pin = 1, .trace_path = path };
    hive_t *h = NULL;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    unsetenv("HIVE_TRACE_EVENTS");
    busy_t b = { .h = h };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, keep_busy, &b), 0);
    for (int i = 0; i < 5; i++) {
        WAIT_UNTIL(atomic_load(&b.rounds) > i, 30000);   /* mostly while it runs on */
        assert_int_equal(hive_trace_flush(h), HIVE_OK);
        assert_int_equal(run_checker(path, checker_extra), 0);
    }
    atomic_store(&b.stop, 1);
    void *rv;
    assert_int_equal(pthread_join(t, &rv), 0);
    assert_null(rv);
    /* quiet now: a flush holds every task run so far */
    assert_int_equal(hive_trace_flush(h), HIVE_OK);
    char extra[128];
    if (events == NULL) {
        snprintf(extra, sizeof extra, "parent=%d child=%d", b.rounds * N_PARENT,
                 b.rounds * N_PARENT * N_CHILD);
        assert_int_equal(run_checker(path, extra), 0);
    }
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(run_checker(path, events == NULL ? extra : checker_extra), 0);
    remove(path);
}

static void test_flush_while_running(void **state)
{
    (void)state;
    flush_while_busy(NULL, "");
}

/* A ring of 16 wraps many times during a copy: torn events are skipped,
 * what is written still checks (dropped > 0). */
static void test_flush_small_ring(void **state)
{
    (void)state;
    flush_while_busy("16", "--dropped");
}

/* hive_trace_flush with the nth allocation check from now failing; should
 * another thread of the engine take that check first (a late free), the
 * flush succeeds and we try again. */
static int flush_failing_at(hive_t *h, long nth)
{
    int rc = HIVE_OK;
    for (int tries = 0; tries < 100 && rc == HIVE_OK; tries++) {
        atomic_store(&hive__fault_countdown, nth);
        rc = hive_trace_flush(h);
        atomic_store(&hive__fault_countdown, 0);
    }
    return rc;
}

static void test_flush_errors(void **state)
{
    (void)state;
    ASSERT_FAILS_WITH(hive_trace_flush(NULL), HIVE_EINVAL, "engine is NULL");
    hive_t *h = test_engine(16u << 20, 1, NULL);
    ASSERT_FAILS_WITH(hive_trace_flush(h), HIVE_ESTATE, "no timeline is being recorded");
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    /* no memory for the copy, or for sorting the flows: HIVE_ENOMEM, and
     * the next flush works (the engine is idle: its workers allocate
     * nothing meanwhile) */
    char path[64];
    temp_path(path, sizeof path);
    hive_config_t ok = { .workers = 1, .store_bytes = 16u << 20, .no_pin = 1, .trace_path = path };
    assert_int_equal(hive_init(&ok, &h), HIVE_OK);
    workload(h, 5);
    hive__store_drain(h);                         /* deferred frees done: nothing else allocates */
    assert_int_equal(flush_failing_at(h, 1), HIVE_ENOMEM);
    assert_non_null(strstr(hive_last_error(), "cannot copy"));
    assert_int_equal(flush_failing_at(h, 2), HIVE_ENOMEM);
    assert_non_null(strstr(hive_last_error(), "cannot sort"));
    assert_int_equal(hive_trace_flush(h), HIVE_OK);
    assert_int_equal(run_checker(path, "leaf=5"), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    remove(path);
    /* a file that cannot be written: the error with the path */
    hive_config_t cfg = { .workers = 1, .store_bytes = 16u << 20, .no_pin = 1,
                          .trace_path = "/dev/full" };
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    ASSERT_FAILS_WITH(hive_trace_flush(h), HIVE_EINVAL, "could not truncate");
    ASSERT_FAILS_WITH(hive_shutdown(h), HIVE_EINVAL, "could not");
    /* a file that cannot grow (RLIMIT_FSIZE; SIGXFSZ ignored, so writes
     * fail with EFBIG): the flush and the shutdown say so */
    temp_path(path, sizeof path);
    ok.trace_path = path;
    assert_int_equal(hive_init(&ok, &h), HIVE_OK);
    workload(h, 5);
    struct rlimit was, small = { .rlim_cur = 512, .rlim_max = RLIM_INFINITY };
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &was), 0);
    small.rlim_max = was.rlim_max;
    void (*old)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    int rc1 = hive_trace_flush(h);
    char why[256];
    snprintf(why, sizeof why, "%s", hive_last_error());
    int rc2 = hive_shutdown(h);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &was), 0);
    signal(SIGXFSZ, old);
    assert_int_equal(rc1, HIVE_EINVAL);
    assert_non_null(strstr(why, "could not write the trace file"));
    assert_int_equal(rc2, HIVE_EINVAL);
    remove(path);
}

/* An event whose slot is being written when the copy reads it is left
 * out and counted as skipped: here one marked so by hand (seq 0, what a
 * writer stores first), the rest of the file intact. */
static void test_flush_skips_event_being_written(void **state)
{
    (void)state;
    char path[64];
    temp_path(path, sizeof path);
    hive_config_t cfg = { .workers = 1, .store_bytes = 16u << 20, .no_pin = 1, .trace_path = path };
    hive_t *h = NULL;
    assert_int_equal(hive_init(&cfg, &h), HIVE_OK);
    workload(h, 5);                                 /* the worker is idle afterwards */
    hive__tring_t *r = &h->trace.rings[0];
    uint64_t head = atomic_load(&r->head);
    assert_true(head > 0);
    hive__tev_t *e = &r->ev[(head - 1) & r->mask];
    uint64_t seq = atomic_load(&e->seq);
    atomic_store(&e->seq, 0);
    assert_int_equal(hive_trace_flush(h), HIVE_OK);
    atomic_store(&e->seq, seq);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "\"skipped\":1,"));
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(run_checker(path, ""), 0);
    f = fopen(path, "r");
    assert_non_null(f);
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    assert_non_null(strstr(text, "\"skipped\":0,"));   /* whole again at shutdown */
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeline_structure),
        cmocka_unit_test(test_env_and_dropping),
        cmocka_unit_test(test_user_threads),
        cmocka_unit_test(test_off_records_nothing),
        cmocka_unit_test(test_checker_rejects_broken_traces),
        cmocka_unit_test(test_wait_spans),
        cmocka_unit_test(test_waits_checked),
        cmocka_unit_test(test_flush_while_running),
        cmocka_unit_test(test_flush_small_ring),
        cmocka_unit_test(test_flush_errors),
        cmocka_unit_test(test_flush_skips_event_being_written),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
