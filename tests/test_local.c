/* test_local.c - worker-local values: built once per worker that uses them,
 * reset before each later task that uses them (reinit, or fini + init),
 * kept as they are with hive_local_keep, one instance per nesting level,
 * finalised at shutdown on their own worker; and bad keys and definitions.
 *
 * Task functions never use cmocka's assertions (they run on workers): they
 * return a report that the test thread checks. */
#include "testutil.h"
#include "hive_impl.h"

#include <pthread.h>

#define MiB         (1024u * 1024u)
#define DEADLINE_MS 10000u
#define MAXW        4
#define MAGIC       0x10CA1

#define engine test_engine

/* What the callbacks of one key did, per worker. */
typedef struct counters {
    _Atomic int init[MAXW], reinit[MAXW], fini[MAXW];
    _Atomic int off_worker;              /* a callback ran off any worker thread */
    _Atomic int fini_wrong_worker;       /* a value finalised on another worker */
    _Atomic int live;                    /* values built and not finalised */
} counters_t;

typedef struct lval {
    unsigned    worker;                  /* the worker that built it */
    int         magic;
    int         uses;                    /* since the last (re)init */
    int         total;                   /* since init */
} lval_t;

static unsigned self_index(counters_t *c)
{
    if (hive__self == NULL || hive__self->index >= MAXW) {
        atomic_fetch_add(&c->off_worker, 1);
        return MAXW - 1;
    }
    return hive__self->index;
}

static void *lv_init(void *arg)
{
    counters_t *c = arg;
    lval_t *v = calloc(1, sizeof *v);
    if (v == NULL)
        return NULL;
    v->worker = self_index(c);
    v->magic = MAGIC;
    atomic_fetch_add(&c->init[v->worker], 1);
    atomic_fetch_add(&c->live, 1);
    return v;
}

static void lv_reinit(void *value, void *arg)
{
    counters_t *c = arg;
    lval_t *v = value;
    atomic_fetch_add(&c->reinit[self_index(c)], 1);
    v->uses = 0;
}

static void lv_fini(void *value, void *arg)
{
    counters_t *c = arg;
    lval_t *v = value;
    if (self_index(c) != v->worker)
        atomic_fetch_add(&c->fini_wrong_worker, 1);
    atomic_fetch_add(&c->fini[v->worker], 1);
    atomic_fetch_sub(&c->live, 1);
    v->magic = 0;
    free(v);
}

static int sum(_Atomic int *a)
{
    int s = 0;
    for (int i = 0; i < MAXW; i++)
        s += atomic_load(&a[i]);
    return s;
}

static void get_ok(hive_t *h, hive_ref_t r, const void **p, size_t *n)
{
    test_get_ok(h, r, (int64_t)DEADLINE_MS * 1000000, p, n);
}

/* ------------------------------------------------------------ the task */

typedef struct report {
    unsigned  worker;
    int       owner_ok;      /* built by this worker, not freed */
    int       uses_before;   /* 0 when the value was reset (or new) for this task */
    int       total;         /* uses since init, this one included */
    int       same_again;    /* a second call in the task gives the same, un-reset value */
    uintptr_t value;
    uintptr_t child_value;   /* nested: the child's value */
    unsigned  child_worker;
    int       parent_intact; /* nested: the parent's value was not reset by the child */
} report_t;

/* Uses the key given as its first argument; a second argument (any) asks
 * it to run a child that uses the same key, and wait for it. */
static int use_local(hive_ctx_t *ctx)
{
    const hive_local_t *key = hive_arg(ctx, 0, NULL);
    lval_t *v = hive_local(ctx, *key);
    if (v == NULL)
        return 1;
    report_t r = { .worker = hive_worker_index(ctx) };
    r.owner_ok = v->worker == r.worker && v->magic == MAGIC;
    r.uses_before = v->uses;
    v->uses++;
    r.total = ++v->total;
    r.same_again = hive_local(ctx, *key) == v && v->uses == r.uses_before + 1;
    r.value = (uintptr_t)v;
    if (hive_nargs(ctx) > 1) {
        hive_t *h = hive_engine(ctx);
        hive_arg_t a = HIVE_BYTES(key, sizeof *key);
        hive_ref_t child;
        const report_t *cr;
        if (hive_submit(h, use_local, &a, 1, NULL, &child) != HIVE_OK ||
            hive_get(h, child, HIVE_FOREVER, (const void **)&cr, NULL) != HIVE_OK)
            return 1;
        r.child_value = cr->value;
        r.child_worker = cr->worker;
        hive_release(h, child);
        r.parent_intact = hive_local(ctx, *key) == v && v->uses == r.uses_before + 1 &&
                          v->magic == MAGIC;
    }
    return hive_return(ctx, &r, sizeof r);
}

static int no_local(hive_ctx_t *ctx)
{
    (void)ctx;
    return 0;
}

static report_t run_one(hive_t *h, hive_local_t key)
{
    hive_arg_t a = HIVE_VAL(key);
    hive_ref_t r;
    assert_int_equal(hive_submit(h, use_local, &a, 1, NULL, &r), HIVE_OK);
    const report_t *rep;
    size_t n;
    get_ok(h, r, (const void **)&rep, &n);
    assert_int_equal(n, sizeof *rep);
    report_t out = *rep;
    hive_release(h, r);
    return out;
}

/* ------------------------------------------------------------------ tests */

static void test_init_once_reinit_each_task(void **state)
{
    (void)state;
    enum { WORKERS = 3, TASKS = 300 };
    static counters_t c;
    memset(&c, 0, sizeof c);
    hive_t *h = engine(64 * MiB, WORKERS, NULL);
    hive_local_def_t def = { .init = lv_init, .reinit = lv_reinit, .fini = lv_fini, .arg = &c };
    hive_local_t key = { 77 };
    assert_int_equal(hive_local_new(h, &def, &key), HIVE_OK);
    def.arg = NULL;                                   /* the engine keeps its own copy */

    static hive_ref_t refs[TASKS], plain[TASKS];
    for (int i = 0; i < TASKS; i++) {
        hive_arg_t a = HIVE_VAL(key);
        assert_int_equal(hive_submit(h, use_local, &a, 1, NULL, &refs[i]), HIVE_OK);
        /* tasks that do not use the key do not reset it */
        assert_int_equal(hive_submit(h, no_local, NULL, 0, NULL, &plain[i]), HIVE_OK);
    }
    int ran[MAXW] = { 0 };
    uintptr_t value_of[MAXW] = { 0 };
    for (int i = 0; i < TASKS; i++) {
        const report_t *r;
        get_ok(h, refs[i], (const void **)&r, NULL);
        assert_true(r->worker < WORKERS);
        assert_true(r->owner_ok);
        assert_int_equal(r->uses_before, 0);          /* fresh for every task */
        assert_true(r->same_again);
        if (value_of[r->worker] == 0)
            value_of[r->worker] = r->value;
        assert_true(value_of[r->worker] == r->value); /* one value per worker */
        ran[r->worker]++;
        hive_release(h, refs[i]);
        const void *p;
        get_ok(h, plain[i], &p, NULL);
        hive_release(h, plain[i]);
    }
    for (int w = 0; w < WORKERS; w++) {
        assert_int_equal(atomic_load(&c.init[w]), ran[w] > 0);
        assert_int_equal(atomic_load(&c.reinit[w]), ran[w] > 0 ? ran[w] - 1 : 0);
        for (int v = 0; v < w; v++)
            assert_true(value_of[w] == 0 || value_of[w] != value_of[v]);
    }
    assert_int_equal(sum(c.fini), 0);
    assert_int_equal(atomic_load(&c.off_worker), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    /* at shutdown: every value built is finalised, on its own worker */
    for (int w = 0; w < MAXW; w++)
        assert_int_equal(atomic_load(&c.fini[w]), atomic_load(&c.init[w]));
    assert_int_equal(atomic_load(&c.live), 0);
    assert_int_equal(atomic_load(&c.fini_wrong_worker), 0);
    assert_int_equal(atomic_load(&c.off_worker), 0);
}

static void test_null_reinit_is_fini_then_init(void **state)
{
    (void)state;
    static counters_t c;
    memset(&c, 0, sizeof c);
    hive_t *h = engine(64 * MiB, 1, NULL);
    hive_local_def_t def = { .init = lv_init, .reinit = NULL, .fini = lv_fini, .arg = &c };
    hive_local_t key;
    assert_int_equal(hive_local_new(h, &def, &key), HIVE_OK);
    for (int i = 1; i <= 5; i++) {
        report_t r = run_one(h, key);
        assert_true(r.owner_ok);
        assert_int_equal(r.uses_before, 0);
        assert_int_equal(r.total, 1);                 /* a brand-new value each time */
        assert_true(r.same_again);
        assert_int_equal(atomic_load(&c.init[0]), i);
        assert_int_equal(atomic_load(&c.fini[0]), i - 1);
        assert_int_equal(atomic_load(&c.live), 1);
    }
    assert_int_equal(sum(c.reinit), 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&c.fini[0]), 5);
    assert_int_equal(atomic_load(&c.live), 0);
    assert_int_equal(atomic_load(&c.fini_wrong_worker), 0);
}

static void test_keep_and_several_keys(void **state)
{
    (void)state;
    static counters_t kept, reset;
    memset(&kept, 0, sizeof kept);
    memset(&reset, 0, sizeof reset);
    hive_t *h = engine(64 * MiB, 1, NULL);
    hive_local_def_t dk = { .init = lv_init, .reinit = hive_local_keep, .fini = lv_fini, .arg = &kept };
    hive_local_def_t dr = { .init = lv_init, .reinit = lv_reinit, .fini = lv_fini, .arg = &reset };
    hive_local_t k1, k2;
    assert_int_equal(hive_local_new(h, &dk, &k1), HIVE_OK);
    assert_int_equal(hive_local_new(h, &dr, &k2), HIVE_OK);
    assert_true(k1.id != k2.id);
    uintptr_t v1 = 0, v2 = 0;
    for (int i = 1; i <= 10; i++) {
        report_t a = run_one(h, k1), b = run_one(h, k2);
        assert_int_equal(a.uses_before, i - 1);       /* kept as it was */
        assert_int_equal(a.total, i);
        assert_int_equal(b.uses_before, 0);           /* reset */
        assert_int_equal(b.total, i);                 /* ... by reinit, not a new value */
        if (i == 1)
            v1 = a.value, v2 = b.value;
        assert_true(a.value == v1 && b.value == v2);
        assert_true(v1 != v2);
    }
    assert_int_equal(atomic_load(&kept.init[0]), 1);
    assert_int_equal(atomic_load(&reset.init[0]), 1);
    assert_int_equal(atomic_load(&reset.reinit[0]), 9);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&kept.fini[0]), 1);
    assert_int_equal(atomic_load(&reset.fini[0]), 1);
    assert_int_equal(atomic_load(&kept.live) + atomic_load(&reset.live), 0);
}

/* fini may be NULL: nothing is called at shutdown (the value is static here). */
static _Atomic int static_inits;
static lval_t static_value;

static void *static_init(void *arg)
{
    (void)arg;
    atomic_fetch_add(&static_inits, 1);
    static_value.worker = 0;
    static_value.magic = MAGIC;
    static_value.uses = 0;
    return &static_value;
}

static void test_null_fini(void **state)
{
    (void)state;
    atomic_store(&static_inits, 0);
    hive_t *h = engine(64 * MiB, 1, NULL);
    hive_local_def_t def = { .init = static_init };   /* reinit NULL and fini NULL */
    hive_local_t key;
    assert_int_equal(hive_local_new(h, &def, &key), HIVE_OK);
    for (int i = 1; i <= 3; i++) {
        hive_ref_t r;
        assert_int_equal(hive_submit(h, no_local, NULL, 0, NULL, &r), HIVE_OK);
        const void *p;
        get_ok(h, r, &p, NULL);
        hive_release(h, r);
    }
    assert_int_equal(atomic_load(&static_inits), 0); /* never used: never built */
    for (int i = 1; i <= 3; i++) {
        report_t r = run_one(h, key);
        assert_true(r.value == (uintptr_t)&static_value);
        assert_true(r.owner_ok);
        assert_int_equal(r.uses_before, 0);
        assert_int_equal(atomic_load(&static_inits), i);   /* fini (none), then init */
    }
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&static_inits), 3);
}

/* ------------------------------------------------------------- bad input */

typedef struct bad_report {
    int       unknown_null;
    char      unknown_msg[160];
    int       null_init_null;
    char      null_init_msg[160];
    int       retried;             /* init called again on the next call */
} bad_report_t;

static _Atomic int null_inits;

static void *init_null(void *arg)
{
    (void)arg;
    atomic_fetch_add(&null_inits, 1);
    return NULL;
}

static int probe_bad_keys(hive_ctx_t *ctx)
{
    const hive_local_t *keys = hive_arg(ctx, 0, NULL);   /* [unknown, init_null] */
    bad_report_t r;
    memset(&r, 0, sizeof r);
    r.unknown_null = hive_local(ctx, keys[0]) == NULL;
    snprintf(r.unknown_msg, sizeof r.unknown_msg, "%s", hive_last_error());
    r.null_init_null = hive_local(ctx, keys[1]) == NULL;
    snprintf(r.null_init_msg, sizeof r.null_init_msg, "%s", hive_last_error());
    int before = atomic_load(&null_inits);
    r.retried = hive_local(ctx, keys[1]) == NULL && atomic_load(&null_inits) == before + 1;
    return hive_return(ctx, &r, sizeof r);
}

static void test_bad_keys_and_definitions(void **state)
{
    (void)state;
    atomic_store(&null_inits, 0);
    hive_t *h = engine(64 * MiB, 1, NULL);
    static counters_t c;
    memset(&c, 0, sizeof c);
    hive_local_def_t def = { .init = lv_init, .fini = lv_fini, .arg = &c };
    hive_local_def_t no_init = { .fini = lv_fini, .arg = &c };
    hive_local_t key = { 4242 };
    ASSERT_FAILS_WITH(hive_local_new(NULL, &def, &key), HIVE_EINVAL, "engine is NULL");
    ASSERT_FAILS_WITH(hive_local_new(h, NULL, &key), HIVE_EINVAL, "def is NULL");
    ASSERT_FAILS_WITH(hive_local_new(h, &def, NULL), HIVE_EINVAL, "out is NULL");
    ASSERT_FAILS_WITH(hive_local_new(h, &no_init, &key), HIVE_EINVAL, "init is NULL");
    assert_int_equal(key.id, 4242);                   /* untouched */
    assert_null(hive_local(NULL, key));
    assert_non_null(strstr(hive_last_error(), "not inside a task"));

    hive_local_t good, nul;
    assert_int_equal(hive_local_new(h, &def, &good), HIVE_OK);
    hive_local_def_t dn = { .init = init_null };
    assert_int_equal(hive_local_new(h, &dn, &nul), HIVE_OK);
    hive_local_t keys[2] = { { good.id + 500 }, nul };   /* this engine's serial, index 500 */
    hive_arg_t a = HIVE_BYTES(keys, sizeof keys);
    hive_ref_t r;
    assert_int_equal(hive_submit(h, probe_bad_keys, &a, 1, NULL, &r), HIVE_OK);
    const bad_report_t *br;
    get_ok(h, r, (const void **)&br, NULL);
    assert_true(br->unknown_null);
    if (strstr(br->unknown_msg, "(index 500) was never made (2 keys)") == NULL)
        fail_msg("unknown key: \"%s\"", br->unknown_msg);
    assert_true(br->null_init_null);
    if (strstr(br->null_init_msg, "returned NULL") == NULL)
        fail_msg("init returning NULL: \"%s\"", br->null_init_msg);
    assert_true(br->retried);
    hive_release(h, r);

    /* the good key still works next to them */
    report_t ok = run_one(h, good);
    assert_true(ok.owner_ok);

    /* the table holds 1024 keys; the next one is refused with the numbers */
    hive_local_t k;
    for (uint32_t i = 2; i < HIVE_MAX_LOCALS; i++)
        assert_int_equal(hive_local_new(h, &def, &k), HIVE_OK);
    assert_int_equal(k.id, good.id + HIVE_MAX_LOCALS - 1);   /* the serial, then the index */
    hive_local_t last = k;
    k.id = 9;
    ASSERT_FAILS_WITH(hive_local_new(h, &def, &k), HIVE_ENOMEM, "1024 keys");
    assert_int_equal(k.id, 9);
    ok = run_one(h, last);                            /* the last key works */
    assert_true(ok.owner_ok);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&c.init[0]), 2);
    assert_int_equal(atomic_load(&c.fini[0]), 2);
    assert_int_equal(atomic_load(&c.live), 0);
}

/* A task that runs inside another task's hive_get on the same worker gets
 * its own instance: the suspended parent's value is not reset under it. */
static void test_nested_task_gets_own_instance(void **state)
{
    (void)state;
    static counters_t c;
    memset(&c, 0, sizeof c);
    hive_t *h = engine(64 * MiB, 1, NULL);
    hive_local_def_t def = { .init = lv_init, .reinit = lv_reinit, .fini = lv_fini, .arg = &c };
    hive_local_t key;
    assert_int_equal(hive_local_new(h, &def, &key), HIVE_OK);
    int nest = 1;
    hive_arg_t args[2] = { HIVE_VAL(key), HIVE_VAL(nest) };
    uintptr_t parent_value = 0, child_value = 0;
    for (int round = 0; round < 3; round++) {
        hive_ref_t r;
        assert_int_equal(hive_submit(h, use_local, args, 2, NULL, &r), HIVE_OK);
        const report_t *rep;
        get_ok(h, r, (const void **)&rep, NULL);
        assert_int_equal(rep->worker, 0);
        assert_int_equal(rep->child_worker, 0);       /* nested on the same, only worker */
        assert_true(rep->value != rep->child_value);
        assert_true(rep->parent_intact);
        assert_true(rep->owner_ok);
        if (round == 0)
            parent_value = rep->value, child_value = rep->child_value;
        /* later rounds reuse each level's instance (reset by reinit) */
        assert_true(rep->value == parent_value && rep->child_value == child_value);
        hive_release(h, r);
    }
    assert_int_equal(atomic_load(&c.init[0]), 2);     /* one per nesting level */
    assert_int_equal(atomic_load(&c.reinit[0]), 4);
    /* a plain task afterwards gets the top level's instance */
    report_t top = run_one(h, key);
    assert_true(top.value == parent_value);
    assert_int_equal(top.uses_before, 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&c.fini[0]), 2);
    assert_int_equal(atomic_load(&c.live), 0);
    assert_int_equal(atomic_load(&c.fini_wrong_worker), 0);
}

/* ------------------------------------------------------ user threads, eager */

/* A value that knows the thread that built it. */
typedef struct tval {
    pthread_t builder;
    int       magic;
} tval_t;

static _Atomic int t_inits, t_finis, t_fini_elsewhere;

static void *tv_init(void *arg)
{
    (void)arg;
    tval_t *v = calloc(1, sizeof *v);
    if (v == NULL)
        return NULL;
    v->builder = pthread_self();
    v->magic = MAGIC;
    atomic_fetch_add(&t_inits, 1);
    return v;
}

static void tv_fini(void *value, void *arg)
{
    (void)arg;
    tval_t *v = value;
    if (!pthread_equal(v->builder, pthread_self()))
        atomic_fetch_add(&t_fini_elsewhere, 1);
    atomic_fetch_add(&t_finis, 1);
    v->magic = 0;
    free(v);
}

typedef struct tl_run {
    hive_t      *h;
    hive_local_t key;
    void        *first, *second;
    _Atomic int  built, go_on;
    int          wait_for_go;
} tl_run_t;

static void *thread_uses_local(void *arg)
{
    tl_run_t *r = arg;
    r->first = hive_local_thread(r->h, r->key);
    r->second = hive_local_thread(r->h, r->key);
    atomic_store(&r->built, 1);
    while (r->wait_for_go && !atomic_load(&r->go_on))
        test_sleep_ms(1);
    return NULL;
}

typedef struct on_worker_report {
    int  was_null;
    char msg[200];
} on_worker_report_t;

static int thread_call_on_worker(hive_ctx_t *ctx)
{
    const hive_local_t *key = hive_arg(ctx, 0, NULL);
    on_worker_report_t r = { .was_null = hive_local_thread(hive_engine(ctx), *key) == NULL };
    snprintf(r.msg, sizeof r.msg, "%s", hive_last_error());
    return hive_return(ctx, &r, sizeof r);
}

static void test_thread_values(void **state)
{
    (void)state;
    atomic_store(&t_inits, 0);
    atomic_store(&t_finis, 0);
    atomic_store(&t_fini_elsewhere, 0);
    hive_t *h = engine(64 * MiB, 2, NULL);
    hive_local_def_t def = { .init = tv_init, .fini = tv_fini };
    hive_local_t key;
    assert_int_equal(hive_local_new(h, &def, &key), HIVE_OK);
    assert_int_equal(atomic_load(&t_inits), 0);       /* lazy by default */

    /* the driver: built on first use, the same value afterwards */
    tval_t *mine = hive_local_thread(h, key);
    assert_non_null(mine);
    assert_true(pthread_equal(mine->builder, pthread_self()));
    assert_ptr_equal(hive_local_thread(h, key), mine);
    assert_int_equal(atomic_load(&t_inits), 1);

    /* another thread: its own value, finalised on it when it exits */
    tl_run_t a = { .h = h, .key = key };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, thread_uses_local, &a), 0);
    pthread_join(t, NULL);
    assert_non_null(a.first);
    assert_ptr_equal(a.first, a.second);
    assert_ptr_not_equal(a.first, mine);
    assert_int_equal(atomic_load(&t_inits), 2);
    assert_int_equal(atomic_load(&t_finis), 1);
    assert_int_equal(atomic_load(&t_fini_elsewhere), 0);

    /* a thread still alive at shutdown: shutdown finalises its value once */
    tl_run_t b = { .h = h, .key = key, .wait_for_go = 1 };
    assert_int_equal(pthread_create(&t, NULL, thread_uses_local, &b), 0);
    WAIT_UNTIL(atomic_load(&b.built), DEADLINE_MS);
    assert_non_null(b.first);

    /* on a worker it is refused: tasks have hive_local */
    hive_arg_t arg = HIVE_VAL(key);
    hive_ref_t r;
    assert_int_equal(hive_submit(h, thread_call_on_worker, &arg, 1, NULL, &r), HIVE_OK);
    const on_worker_report_t *rep;
    get_ok(h, r, (const void **)&rep, NULL);
    assert_true(rep->was_null);
    if (strstr(rep->msg, "inside a task use hive_local") == NULL)
        fail_msg("on a worker: \"%s\"", rep->msg);
    hive_release(h, r);

    /* bad input */
    assert_null(hive_local_thread(NULL, key));
    assert_non_null(strstr(hive_last_error(), "hive_local_thread: engine is NULL"));
    assert_null(hive_local_thread(h, (hive_local_t){ 0 }));
    assert_non_null(strstr(hive_last_error(), "made by another engine"));
    assert_null(hive_local_thread(h, (hive_local_t){ key.id + 7 }));
    assert_non_null(strstr(hive_last_error(), "(index 7) was never made (1 keys)"));
    hive_local_def_t dn = { .init = init_null };
    hive_local_t nul;
    assert_int_equal(hive_local_new(h, &dn, &nul), HIVE_OK);
    assert_null(hive_local_thread(h, nul));
    assert_non_null(strstr(hive_last_error(), "init of key"));

    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&t_finis), 3);       /* the driver's and b's */
    atomic_store(&b.go_on, 1);
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&t_finis), 3);       /* b's exit finalises nothing more */
    assert_int_equal(atomic_load(&t_fini_elsewhere), 1);   /* b's, on the shutting-down thread */
}

/* eager: built on every worker by hive_local_new, and the first task on
 * each takes it as built (no fini + init although reinit is NULL) */
static void test_eager_builds_on_every_worker(void **state)
{
    (void)state;
    static counters_t c;
    memset(&c, 0, sizeof c);
    hive_t *h = engine(64 * MiB, 2, NULL);
    hive_local_def_t def = { .init = lv_init, .fini = lv_fini, .arg = &c, .eager = 1 };
    hive_local_t key;
    assert_int_equal(hive_local_new(h, &def, &key), HIVE_OK);
    assert_int_equal(atomic_load(&c.init[0]), 1);     /* done before hive_local_new returned */
    assert_int_equal(atomic_load(&c.init[1]), 1);
    assert_int_equal(atomic_load(&c.off_worker), 0);
    report_t rep = run_one(h, key);
    assert_true(rep.owner_ok);
    assert_int_equal(rep.total, 1);                   /* the eager value, first use */
    assert_int_equal(sum(c.init), 2);                 /* not rebuilt for the first task */
    assert_int_equal(sum(c.fini), 0);
    rep = run_one(h, key);                            /* later tasks reset it as before */
    assert_true(rep.owner_ok);
    assert_int_equal(rep.uses_before, 0);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
    assert_int_equal(atomic_load(&c.live), 0);
    assert_int_equal(atomic_load(&c.fini_wrong_worker), 0);
}

/* A key of engine A is refused by engine B: it used to be a bare index,
 * which named B's key of the same index. */
static int probe_key(hive_ctx_t *ctx)
{
    const hive_local_t *key = hive_arg(ctx, 0, NULL);
    on_worker_report_t r = { .was_null = hive_local(ctx, *key) == NULL };
    snprintf(r.msg, sizeof r.msg, "%s", hive_last_error());
    return hive_return(ctx, &r, sizeof r);
}

static void test_key_of_another_engine(void **state)
{
    (void)state;
    static counters_t ca, cb;
    memset(&ca, 0, sizeof ca);
    memset(&cb, 0, sizeof cb);
    hive_t *a = engine(16 * MiB, 1, NULL), *b = engine(16 * MiB, 1, NULL);
    hive_local_def_t da = { .init = lv_init, .fini = lv_fini, .arg = &ca };
    hive_local_def_t db = { .init = lv_init, .fini = lv_fini, .arg = &cb };
    hive_local_t ka, kb;
    assert_int_equal(hive_local_new(a, &da, &ka), HIVE_OK);
    assert_int_equal(hive_local_new(b, &db, &kb), HIVE_OK);   /* both the first key of their engine */
    assert_int_not_equal(ka.id, kb.id);
    hive_arg_t arg = HIVE_VAL(ka);
    hive_ref_t r;
    assert_int_equal(hive_submit(b, probe_key, &arg, 1, NULL, &r), HIVE_OK);
    const on_worker_report_t *rep;
    get_ok(b, r, (const void **)&rep, NULL);
    assert_true(rep->was_null);
    if (strstr(rep->msg, "was made by another engine") == NULL)
        fail_msg("a key of another engine: \"%s\"", rep->msg);
    hive_release(b, r);
    assert_int_equal(sum(cb.init), 0);                /* b's key was not touched */
    assert_null(hive_local_thread(b, ka));
    assert_non_null(strstr(hive_last_error(), "was made by another engine"));
    assert_true(run_one(b, kb).owner_ok);             /* b's own key works */
    assert_true(run_one(a, ka).owner_ok);
    assert_int_equal(hive_shutdown(a), HIVE_OK);
    assert_int_equal(hive_shutdown(b), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_once_reinit_each_task),
        cmocka_unit_test(test_null_reinit_is_fini_then_init),
        cmocka_unit_test(test_keep_and_several_keys),
        cmocka_unit_test(test_null_fini),
        cmocka_unit_test(test_bad_keys_and_definitions),
        cmocka_unit_test(test_nested_task_gets_own_instance),
        cmocka_unit_test(test_thread_values),
        cmocka_unit_test(test_eager_builds_on_every_worker),
        cmocka_unit_test(test_key_of_another_engine),
    };
    return cmocka_run_group_tests_name("local", tests, NULL, NULL);
}
