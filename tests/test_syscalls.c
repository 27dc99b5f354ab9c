/* test_syscalls.c - the hot paths make no system call and call no malloc.
 *
 * A user thread warms up (first-use registrations, caches, id blocks), then
 * installs a seccomp filter on itself alone that lets process-private
 * futex calls through (hive's documented sleeps and wakes: a get that
 * waits, a submit that wakes a parked worker) and traps every other system
 * call (a shared futex too: liburcu wakes its threads with those) into a SIGSYS handler
 * that records its number. It then runs put/get/retain/release, create/
 * seal, cell publish/acquire, submit/get (a small task and one with a ref
 * argument), actor call/get and replay
 * push/push_batch/sample loops (uniform and prioritized, with priority
 * updates). Any trapped call fails the test, named by
 * number.
 *
 * Seccomp filters cannot be removed, so the filtered thread ends by
 * sleeping on a futex for good; the process exit takes it along.
 *
 * The same filtered rounds count the thread's calls to malloc, calloc,
 * realloc and the aligned allocators (this executable's definitions of
 * them interpose glibc's for the whole process, libhive included, and pass
 * every call on): any call fails the test. (A malloc served from glibc's
 * thread cache makes no system call, so the filter alone would not see it.)
 *
 * The sanitizer runtimes make system calls of their own on paths hive does
 * not control (TSan's and ASan's allocators and shadow memory), so the
 * filter runs in the normal build; the sanitizer builds run the same loops
 * unfiltered, for their own checks. */
#include "testutil.h"
#include "ds/pool.h"
#include "rl/replay_check.h"
#include "store.h"
#include <urcu/static/urcu-common.h>
extern struct urcu_gp urcu_memb_gp;   /* liburcu: the grace-period state */

#include <errno.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define MiB (1024u * 1024u)
#define ROUNDS 20000

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define FILTERED 0
#else
#define FILTERED 1
#endif

#if FILTERED
/* glibc's own entry points, which the definitions below pass calls on to */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);

static __thread bool counting_mallocs;   /* set on the filtered thread for its rounds */
static _Atomic int mallocs;

static inline void count_malloc(void)
{
    if (counting_mallocs)
        atomic_fetch_add_explicit(&mallocs, 1, memory_order_relaxed);
}

void *malloc(size_t n)
{
    count_malloc();
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    count_malloc();
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    count_malloc();
    return __libc_realloc(p, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    count_malloc();
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    count_malloc();
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    void *p = __libc_memalign(align, n);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}
#define COUNT_MALLOCS(on) (counting_mallocs = (on))
#define MALLOCS() atomic_load(&mallocs)
#else
#define COUNT_MALLOCS(on) ((void)0)
#define MALLOCS() 0
#endif

static _Atomic int trapped;
static _Atomic long trapped_nr[16];

static void on_sigsys(int sig, siginfo_t *si, void *uc_)
{
    (void)sig;
    int i = atomic_fetch_add(&trapped, 1);
    if (i < 16)
        atomic_store(&trapped_nr[i], si->si_syscall);
    ucontext_t *uc = uc_;
    uc->uc_mcontext.gregs[REG_RAX] = -ENOSYS;   /* the call fails; the test fails anyway */
}

static int install_filter(void)
{
    /* Allow futex with FUTEX_PRIVATE_FLAG (hive's own sleeps and wakes),
     * and liburcu's grace-period wake: a read-side unlock wakes a writer
     * that sleeps waiting for this very reader (rare: a grace period must
     * be waiting on us). Trap everything else - liburcu's call_rcu and
     * workqueue wakes use shared futexes, so they are caught. */
    uint64_t gp = (uint64_t)(uintptr_t)&urcu_memb_gp.futex;
    struct sock_filter f[] = {
        /* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        /* the return from on_sigsys: trapping it would kill the process
         * (SIGSYS is blocked in its own handler) before the test could say
         * which call was trapped */
        /* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 7, 0),
        /* 2 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_futex, 0, 7),
        /* 3 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
        /* 4 */ BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, FUTEX_PRIVATE_FLAG, 4, 0),
        /* 5 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        /* 6 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)gp, 0, 3),
        /* 7 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]) + 4),
        /* 8 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(gp >> 32), 0, 1),
        /* 9 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        /* 10 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
    };
    struct sock_fprog prog = { .len = (unsigned short)(sizeof f / sizeof f[0]), .filter = f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    /* no SECCOMP_FILTER_FLAG_TSYNC: this thread only */
    return (int)syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/* SIGSYS to on_sigsys, and (the filtered build) the filter on the calling
 * thread: 0, or install_filter's failure */
static int filter_this_thread(void)
{
    struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSYS, &sa, NULL);
    sigset_t sys;
    sigemptyset(&sys);
    sigaddset(&sys, SIGSYS);
    pthread_sigmask(SIG_UNBLOCK, &sys, NULL);
    return FILTERED ? install_filter() : 0;
}

static int add_one(hive_ctx_t *ctx)
{
    uint64_t v;
    memcpy(&v, hive_arg(ctx, 0, NULL), sizeof v);
    v++;
    return hive_return(ctx, &v, sizeof v);
}

static int inc_method(void *self, hive_ctx_t *ctx)
{
    uint64_t *n = self;
    ++*n;
    return hive_return(ctx, n, sizeof *n);
}

static const hive_method_t methods[] = { { "inc", inc_method, 0 } };
static const hive_actor_class_t counter = { .name = "Counter", .size = sizeof(uint64_t),
                                            .methods = methods, .nmethods = 1 };

struct run {
    hive_t         *h;
    hive_actor_t    actor;
    hive_ref_t      cell;
    hive_replay_t  *rb;
    hive_replay_t  *prb;               /* prioritized: the sum tree's paths too */
    int             filter_rc;
    _Atomic int     done;
    const char     *failed;            /* what went wrong (no assertion off the main thread) */
};

#define CHECK(cond, what) do { if (!(cond)) { r->failed = (what); return; } } while (0)

/* One round of every hot path. */
static void round_of_everything(struct run *r, uint64_t i)
{
    hive_t *h = r->h;
    hive_ref_t a, b, c, v, t;
    const void *p;
    size_t n;
    CHECK(hive_put(h, &i, sizeof i, &a) == HIVE_OK, "put");
    CHECK(hive_get(h, a, 0, &p, &n) == HIVE_OK && n == sizeof i, "get");
    CHECK(hive_retain(h, a) == HIVE_OK, "retain");
    CHECK(hive_release(h, a) == HIVE_OK, "release");
    void *d;
    CHECK(hive_create(h, 256, &d, &b) == HIVE_OK, "create");
    memset(d, (int)i, 256);
    CHECK(hive_seal(h, b) == HIVE_OK, "seal");
    hive_ref_t both[2] = { a, b };
    const void *ps[2];
    int sts[2];
    CHECK(hive_get_many(h, both, 2, 0, ps, NULL, sts) == HIVE_OK && ps[0] != NULL, "get many");
    CHECK(hive_put(h, &i, sizeof i, &v) == HIVE_OK, "put version");
    CHECK(hive_cell_publish(h, r->cell, v) == HIVE_OK, "cell publish");
    CHECK(hive_release(h, v) == HIVE_OK, "release version");
    uint64_t seq;
    CHECK(hive_cell_acquire(h, r->cell, &c, &seq) == HIVE_OK, "cell acquire");
    CHECK(hive_release(h, c) == HIVE_OK, "release acquired");
    hive_arg_t arg = HIVE_VAL(i);
    CHECK(hive_submit(h, add_one, &arg, 1, NULL, &t) == HIVE_OK, "submit");
    CHECK(hive_get(h, t, HIVE_FOREVER, &p, NULL) == HIVE_OK && *(const uint64_t *)p == i + 1,
          "task result");
    CHECK(hive_release(h, t) == HIVE_OK, "release task result");
    /* a ref argument: the task takes a record of its own (the one above is
     * queued inside its result record: task.c, small tasks) */
    hive_arg_t ref_arg = HIVE_REF(a);
    CHECK(hive_submit(h, add_one, &ref_arg, 1, NULL, &t) == HIVE_OK, "submit with a ref");
    CHECK(hive_get(h, t, HIVE_FOREVER, &p, NULL) == HIVE_OK && *(const uint64_t *)p == i + 1,
          "ref task result");
    CHECK(hive_release(h, t) == HIVE_OK, "release ref task result");
    CHECK(hive_call(h, r->actor, 0, NULL, 0, NULL, &t) == HIVE_OK, "call");
    CHECK(hive_get(h, t, HIVE_FOREVER, &p, NULL) == HIVE_OK, "call result");
    CHECK(hive_release(h, t) == HIVE_OK, "release call result");
    CHECK(hive_replay_push(r->rb, &i) == HIVE_OK, "replay push");
    /* a claim this thread's run cache does not see, as another producer's:
     * the next single pushes claim runs of keys and push held ones */
    hive__replay_write_claimed(r->rb, hive__replay_claim(r->rb, 1), &i, 1);
    hive__replay_write_claimed(r->prb, hive__replay_claim(r->prb, 1), &i, 1);
    uint64_t run[40] = { i };               /* a run across the end of the rows now and then */
    CHECK(hive_replay_push_batch(r->rb, run, 40) == HIVE_OK, "replay push_batch");
    uint64_t out[8], keys[8], rng = i;
    CHECK(hive_replay_sample(r->rb, 8, &rng, out, keys, NULL, 0) == HIVE_OK, "replay sample");
    CHECK(hive_replay_push(r->prb, &i) == HIVE_OK, "prioritized push");
    CHECK(hive_replay_push_batch(r->prb, run, 40) == HIVE_OK, "prioritized push_batch");
    double w[8], prio[8];
    CHECK(hive_replay_sample(r->prb, 8, &rng, out, keys, w, 0) == HIVE_OK, "prioritized sample");
    for (int k = 0; k < 8; k++)
        prio[k] = 0.5 + (double)((i + (uint64_t)k) % 7);
    CHECK(hive_replay_update_priorities(r->prb, keys, prio, 8) >= 0, "update priorities");
    CHECK(hive_release(h, b) == HIVE_OK, "release created");
    r->failed = NULL;
}

static void *filtered_thread(void *arg)
{
    struct run *r = arg;
    /* warm-up: until the block pool has stopped growing for ROUNDS rounds
     * (frees come back a grace period late, so the pool grows to the
     * working set of one grace period first), at most 50 times that */
    uint64_t i = 0, stable_since = 0;
    size_t mapped = hive__pool_mapped_bytes();
    for (; i < 50 * ROUNDS && i - stable_since < ROUNDS && r->failed == NULL; i++) {
        round_of_everything(r, i);
        if (hive__pool_mapped_bytes() != mapped) {
            mapped = hive__pool_mapped_bytes();
            stable_since = i;
        }
    }
    if (r->failed != NULL) {
        atomic_store(&r->done, 1);
        return NULL;
    }
    /* Headroom: the blocks a round frees come back a grace period late,
     * from the call_rcu thread, and on a loaded machine that thread can be
     * off a core for many rounds (it also settles full table regions into
     * huge pages, a few ms each). Then the pool grows - an mmap once per
     * chunk, amortised, but a system call in the filtered rounds (seen at
     * load 20: hive_cell_publish -> new_chunk). Spare blocks of every size
     * make the filtered rounds what they are meant to be: the steady state. */
    for (size_t sz = HIVE_POOL_MIN; sz <= HIVE_POOL_MAX; sz <<= 1)
        if (hive__pool_reserve(sz, (size_t)4 << 20) != 0)
            r->failed = "reserve pool headroom";
    if (r->failed != NULL) {
        atomic_store(&r->done, 1);
        return NULL;
    }
    r->filter_rc = filter_this_thread();
    COUNT_MALLOCS(true);
    for (uint64_t k = 0; k < ROUNDS && r->failed == NULL && r->filter_rc == 0; k++)
        round_of_everything(r, i + k);
    COUNT_MALLOCS(false);
    atomic_store(&r->done, 1);
    if (FILTERED && r->filter_rc == 0) {
        /* no way back from the filter: sleep here until the process ends */
        static _Atomic uint32_t never;
        for (;;)
            syscall(SYS_futex, &never, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    }
    return NULL;
}

static void test_hot_paths_make_no_system_call(void **state)
{
    (void)state;
    hive_t *h = test_engine(64 * MiB, 2, NULL);
    struct run r = { .h = h };
    assert_int_equal(hive_actor_new(h, &counter, NULL, 0, NULL, &r.actor), HIVE_OK);
    assert_int_equal(hive_cell_new(h, (hive_ref_t){ 0 }, &r.cell), HIVE_OK);
    hive_replay_config_t rc = { .capacity = 1024, .item_size = sizeof(uint64_t), .seed = 1 };
    assert_int_equal(hive_replay_new(h, &rc, &r.rb), HIVE_OK);
    rc.prioritized = 1;
    rc.alpha = 0.6;
    rc.beta = 0.4;
    assert_int_equal(hive_replay_new(h, &rc, &r.prb), HIVE_OK);
    uint64_t x = 0;
    for (int i = 0; i < 16; i++) {
        assert_int_equal(hive_replay_push(r.rb, &x), HIVE_OK);
        assert_int_equal(hive_replay_push(r.prb, &x), HIVE_OK);
    }

    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, filtered_thread, &r), 0);
    WAIT_UNTIL(atomic_load(&r.done), 120000);
    if (!FILTERED)
        pthread_join(t, NULL);
    else
        pthread_detach(t);
    assert_int_equal(r.filter_rc, 0);
    int n = atomic_load(&trapped);
    if (n != 0) {
        char list[256] = "";
        for (int i = 0; i < n && i < 16; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), " %ld", atomic_load(&trapped_nr[i]));
        fail_msg("%d system calls other than futex on the hot paths; numbers:%s", n, list);
    }
    if (MALLOCS() != 0)
        fail_msg("%d calls to malloc (or calloc, realloc, an aligned allocator) on the hot paths",
                 MALLOCS());
    if (r.failed != NULL)
        fail_msg("%s failed: %s", r.failed, hive_last_error());
    assert_int_equal(hive_replay_free(r.rb), HIVE_OK);
    assert_int_equal(hive_replay_free(r.prb), HIVE_OK);
    assert_int_equal(hive_release(h, r.cell), HIVE_OK);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* ------------------------------------------------------------ on a worker
 *
 * The same proof for the paths a task takes on its worker: fork-join
 * submits (a worker's small task goes to its own deque), hive_wait and
 * hive_get of its own children (the join runs them in place), their
 * release, put/get/release through the worker's store shard, and an actor
 * call and its get. One worker, so that nothing is stolen and the join
 * never sleeps: what is measured is the path, not the scheduler's parking
 * (whose membarrier is a system call by design: sched.c).
 *
 * A driver task installs the filter on its worker's thread. A filter stays
 * for good, and a worker that went back to its loop would make system
 * calls (parking, and at shutdown its thread's exit), so in the filtered
 * build the driver ends by sleeping on a futex, and the engine is left to
 * the process's exit instead of hive_shutdown. */
#define JOIN_FAN 4

struct wrun {
    hive_actor_t    actor;
    int             filter_rc;
    _Atomic int     done;
    const char     *failed;
};

static struct wrun wr;

#undef CHECK
#define CHECK(cond, what) do { if (!(cond)) { wr.failed = (what); return; } } while (0)

static void worker_round(hive_t *h, uint64_t i)
{
    hive_ref_t t[JOIN_FAN], a, c;
    const void *p;
    size_t n;
    for (int k = 0; k < JOIN_FAN; k++) {
        uint64_t v = i + (uint64_t)k;
        hive_arg_t arg = HIVE_VAL(v);
        CHECK(hive_submit(h, add_one, &arg, 1, NULL, &t[k]) == HIVE_OK, "worker submit");
    }
    CHECK(hive_wait(h, t, 2, 2, HIVE_FOREVER, NULL) == 2, "worker wait");
    for (int k = 0; k < JOIN_FAN; k++) {
        CHECK(hive_get(h, t[k], HIVE_FOREVER, &p, &n) == HIVE_OK && n == sizeof i &&
              *(const uint64_t *)p == i + (uint64_t)k + 1, "worker get of a child");
        CHECK(hive_release(h, t[k]) == HIVE_OK, "worker release of a child");
    }
    CHECK(hive_put(h, &i, sizeof i, &a) == HIVE_OK, "worker put");
    CHECK(hive_get(h, a, 0, &p, &n) == HIVE_OK && n == sizeof i, "worker get");
    CHECK(hive_release(h, a) == HIVE_OK, "worker release");
    CHECK(hive_call(h, wr.actor, 0, NULL, 0, NULL, &c) == HIVE_OK, "worker call");
    CHECK(hive_get(h, c, HIVE_FOREVER, &p, NULL) == HIVE_OK, "worker call result");
    CHECK(hive_release(h, c) == HIVE_OK, "worker release of a call result");
    wr.failed = NULL;
}

static int worker_driver(hive_ctx_t *ctx)
{
    hive_t *h = hive_engine(ctx);
    uint64_t i = 0, stable_since = 0;
    size_t mapped = hive__pool_mapped_bytes();
    for (; i < 50 * ROUNDS && i - stable_since < ROUNDS && wr.failed == NULL; i++) {
        worker_round(h, i);
        if (hive__pool_mapped_bytes() != mapped) {
            mapped = hive__pool_mapped_bytes();
            stable_since = i;
        }
    }
    for (size_t sz = HIVE_POOL_MIN; sz <= HIVE_POOL_MAX && wr.failed == NULL; sz <<= 1)
        if (hive__pool_reserve(sz, (size_t)4 << 20) != 0)
            wr.failed = "reserve pool headroom";
    if (wr.failed != NULL) {
        atomic_store(&wr.done, 1);
        return 0;
    }
    wr.filter_rc = filter_this_thread();
    COUNT_MALLOCS(true);
    for (uint64_t k = 0; k < ROUNDS && wr.failed == NULL && wr.filter_rc == 0; k++)
        worker_round(h, i + k);
    COUNT_MALLOCS(false);
    atomic_store(&wr.done, 1);
    if (FILTERED && wr.filter_rc == 0) {
        static _Atomic uint32_t never;
        for (;;)
            syscall(SYS_futex, &never, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    }
    return 0;
}

static void test_worker_paths_make_no_system_call(void **state)
{
    (void)state;
    atomic_store(&trapped, 0);
    hive_t *h = test_engine(64 * MiB, 1, NULL);
    assert_int_equal(hive_actor_new(h, &counter, NULL, 0, NULL, &wr.actor), HIVE_OK);
    hive_ref_t d;
    assert_int_equal(hive_submit(h, worker_driver, NULL, 0, NULL, &d), HIVE_OK);
    WAIT_UNTIL(atomic_load(&wr.done), 120000);
    assert_int_equal(wr.filter_rc, 0);
    int n = atomic_load(&trapped);
    if (n != 0) {
        char list[256] = "";
        for (int i = 0; i < n && i < 16; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), " %ld", atomic_load(&trapped_nr[i]));
        fail_msg("%d system calls other than futex on a worker's hot paths; numbers:%s", n, list);
    }
    if (MALLOCS() != 0)
        fail_msg("%d calls to malloc (or calloc, realloc, an aligned allocator) on a worker's hot paths",
                 MALLOCS());
    if (wr.failed != NULL)
        fail_msg("%s failed: %s", wr.failed, hive_last_error());
    if (!FILTERED) {                    /* the driver returned: a clean end */
        const void *p;
        assert_int_equal(hive_get(h, d, HIVE_FOREVER, &p, NULL), HIVE_OK);
        assert_int_equal(hive_release(h, d), HIVE_OK);
        assert_int_equal(hive_shutdown(h), HIVE_OK);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hot_paths_make_no_system_call),
        /* last: in the filtered build its engine is left to the exit */
        cmocka_unit_test(test_worker_paths_make_no_system_call),
    };
    return cmocka_run_group_tests_name("syscalls", tests, NULL, NULL);
}
