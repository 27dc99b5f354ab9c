/*
 * actor_pool.c - actor pools (Ray's ActorPool): calls spread over a set of
 * actors, each actor getting the pool's next call when it has none of the
 * pool's in flight; results in submission order or in completion order.
 *
 * A pool is plain single-threaded bookkeeping on top of hive_call and
 * hive_wait: no thread of its own, no atomics beyond the guard that refuses
 * a second thread inside. Every submission is an entry, numbered in
 * submission order (seq) and kept in a window ent[0 .. hi) of a growing
 * array (seq = base + index). An entry is QUEUED (its arguments copied,
 * waiting for a free actor), RUNNING (its call made; the pool holds the
 * result's count), DONE (the result is ready, or the call could not be
 * made: `code`) or FETCHED (handed to the user). Queued entries go out in
 * seq order, so they are exactly the entries from `next_queued` on. The
 * completion order is a FIFO of seqs (`done`). Completions are noticed by
 * hive_wait over the in-flight results, inside the pool's own functions:
 * a waiting get_next keeps handing queued calls to actors as they free.
 */
#include "actor.h"
#include "hive_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

#define POOL_MAX_ACTORS ((size_t)1 << 20)
#define NONE            UINT64_MAX

enum { QUEUED, RUNNING, DONE, FETCHED };

typedef struct entry {
    int         state;
    int         code;            /* DONE: HIVE_OK, or why the call could not be made */
    char       *why;             /* the sentence of a failed call (malloc'd), or NULL */
    hive_ref_t  ref;             /* RUNNING / DONE with code OK: the result (the pool's count) */
    unsigned    method;
    size_t      nargs;
    hive_arg_t *args;            /* QUEUED: a copy (one block with the inline bytes), refs retained */
} entry_t;

struct hive_pool {
    hive_t          *h;
    _Atomic int      inside;     /* a thread is inside a pool function */
    size_t           n;
    hive_actor_t    *actors;
    uint64_t        *busy;       /* per actor: the seq it runs, NONE if free */
    unsigned char   *gone;       /* per actor: dead or unknown, never used again */
    size_t           live;       /* actors not gone */
    hive_ref_t      *wait_refs;  /* n slots for hive_wait */
    uint64_t        *wait_seq;
    unsigned char   *wait_ready;
    entry_t         *ent;        /* entries base .. base + hi - 1 */
    size_t           hi, cap;
    uint64_t         base;
    uint64_t         next_queued;
    uint64_t         next_get;   /* ordered gets: the first entry not yet fetched (or later) */
    uint64_t        *done;       /* completion order: seqs, done[dlo .. dhi) */
    size_t           dlo, dhi, dcap;
    size_t           outstanding;/* entries not yet fetched */
};

static entry_t *entry(hive_pool_t *p, uint64_t seq)
{
    return &p->ent[seq - p->base];
}

/* ------------------------------------------------------------ guard */

static int enter(hive_pool_t *p, const char *fn)
{
    if (p == NULL)
        return hive__fail(HIVE_EINVAL, "%s: pool is NULL", fn);
    /* acquire: pairs with leave's release, so a pool handed from one thread
     * to another (with synchronisation of their own) sees all of it */
    if (atomic_exchange_explicit(&p->inside, 1, memory_order_acquire) != 0)
        return hive__fail(HIVE_ESTATE, "%s: another thread is inside this pool; a pool is used "
                          "by one thread at a time", fn);
    return HIVE_OK;
}

static int leave(hive_pool_t *p, int rc)
{
    atomic_store_explicit(&p->inside, 0, memory_order_release);   /* see enter */
    return rc;
}

/* ------------------------------------------------------------ entries */

/* Room for one more entry: drop the fetched prefix, else grow. */
static int reserve_entry(hive_pool_t *p, const char *fn)
{
    size_t first = 0;                    /* entries before next_get and next_queued are done with */
    while (first < p->hi && p->ent[first].state == FETCHED)
        first++;
    if (first > 0 && first >= p->hi / 2) {
        memmove(p->ent, p->ent + first, (p->hi - first) * sizeof *p->ent);
        p->hi -= first;
        p->base += first;
    }
    if (p->hi < p->cap)
        return HIVE_OK;
    size_t cap = p->cap ? p->cap * 2 : 64, bytes;
    if (__builtin_mul_overflow(cap, sizeof *p->ent, &bytes))
        return hive__fail(HIVE_ENOMEM, "%s: %zu entries overflow a size", fn, cap);
    entry_t *e = hive__realloc(p->ent, bytes);
    if (e == NULL)
        return hive__fail(HIVE_ENOMEM, "%s: cannot grow the pool to %zu entries", fn, cap);
    p->ent = e;
    p->cap = cap;
    return HIVE_OK;
}

/* Room in the completion list for every entry not yet fetched, so that
 * noticing a completion never needs memory: first drop the seqs already
 * fetched (ordered gets leave them behind), then grow. */
static int reserve_done(hive_pool_t *p, const char *fn)
{
    if (p->dhi + p->outstanding + 1 <= p->dcap)
        return HIVE_OK;
    size_t keep = 0;
    for (size_t i = p->dlo; i < p->dhi; i++) {
        uint64_t seq = p->done[i];
        if (seq >= p->base && entry(p, seq)->state == DONE)
            p->done[keep++] = seq;
    }
    p->dlo = 0;
    p->dhi = keep;
    size_t need = keep + p->outstanding + 1;
    if (need <= p->dcap)
        return HIVE_OK;
    size_t cap = p->dcap * 2 > need ? p->dcap * 2 : need < 64 ? 64 : need, bytes;
    uint64_t *d;
    if (__builtin_mul_overflow(cap, sizeof *d, &bytes) || (d = hive__realloc(p->done, bytes)) == NULL)
        return hive__fail(HIVE_ENOMEM, "%s: cannot grow the pool's completion list to %zu", fn,
                          cap);
    p->done = d;
    p->dcap = cap;
    return HIVE_OK;
}

/* Room was reserved when the entry was submitted (reserve_done). */
static void push_done(hive_pool_t *p, uint64_t seq)
{
    p->done[p->dhi++] = seq;
}

/* A copy of a call's arguments for a queued entry: one block, the table
 * then the inline bytes; refs get a count of the pool's. */
static int copy_args(hive_pool_t *p, const hive_arg_t *args, size_t nargs, hive_arg_t **out)
{
    size_t bytes;
    if (__builtin_mul_overflow(nargs, sizeof(hive_arg_t), &bytes))
        return hive__fail(HIVE_EINVAL, "hive_pool_submit: %zu arguments overflow a size", nargs);
    for (size_t i = 0; i < nargs; i++)
        if (args[i].ref.id == 0 && __builtin_add_overflow(bytes, args[i].size, &bytes))
            return hive__fail(HIVE_EINVAL, "hive_pool_submit: argument %zu of %zu bytes overflows "
                              "a size", i, args[i].size);
    hive_arg_t *c = hive__malloc(bytes ? bytes : 1);
    if (c == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_pool_submit: cannot copy %zu bytes of arguments",
                          bytes);
    char *at = (char *)(c + nargs);
    for (size_t i = 0; i < nargs; i++) {
        c[i] = args[i];
        if (args[i].ref.id != 0) {
            int rc = hive_retain(p->h, args[i].ref);
            if (rc != HIVE_OK) {
                while (i-- > 0)
                    if (c[i].ref.id != 0)
                        hive_release(p->h, c[i].ref);
                free(c);
                return rc;
            }
        } else if (args[i].size != 0) {
            memcpy(at, args[i].data, args[i].size);
            c[i].data = at;
            at += args[i].size;
        }
    }
    *out = c;
    return HIVE_OK;
}

static void drop_args(hive_pool_t *p, entry_t *e)
{
    if (e->args == NULL)
        return;
    for (size_t i = 0; i < e->nargs; i++)
        if (e->args[i].ref.id != 0)
            hive_release(p->h, e->args[i].ref);
    free(e->args);
    e->args = NULL;
}

/* The entry is over before its call was made: get_next reports why. */
static void fail_entry(hive_pool_t *p, uint64_t seq, int code)
{
    entry_t *e = entry(p, seq);
    e->state = DONE;
    e->code = code;
    const char *why = hive_last_error();
    e->why = hive__malloc(strlen(why) + 1);
    if (e->why != NULL)
        strcpy(e->why, why);
    push_done(p, seq);
}

/* ------------------------------------------------------------ dispatch */

/* Make entry seq's call on a free live actor. An actor that is dead or
 * unknown leaves the pool and the next one is tried; other failures are
 * the call's (returned). HIVE_EDEAD when no live actor is left. */
static int make_call(hive_pool_t *p, uint64_t seq, const hive_arg_t *args, size_t nargs,
                     unsigned method)
{
    for (size_t i = 0; i < p->n; i++) {
        if (p->gone[i] || p->busy[i] != NONE)
            continue;
        hive_ref_t r;
        int rc = hive_call(p->h, p->actors[i], method, args, nargs, NULL, &r);
        if (rc == HIVE_EDEAD || rc == HIVE_ENOENT) {
            p->gone[i] = 1;
            p->live--;
            continue;
        }
        if (rc != HIVE_OK)
            return rc;
        entry_t *e = entry(p, seq);
        e->state = RUNNING;
        e->ref = r;
        p->busy[i] = seq;
        return HIVE_OK;
    }
    if (p->live == 0)
        return hive__fail(HIVE_EDEAD, "hive_pool: every one of the pool's %zu actors is dead", p->n);
    return HIVE_ETIMEDOUT;               /* internal: no free actor (callers check first) */
}

static bool has_free_actor(const hive_pool_t *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (!p->gone[i] && p->busy[i] == NONE)
            return true;
    return false;
}

/* Hand queued entries to free actors, oldest first. */
static void dispatch_queued(hive_pool_t *p)
{
    while (p->next_queued < p->base + p->hi && (has_free_actor(p) || p->live == 0)) {
        uint64_t seq = p->next_queued;
        entry_t *e = entry(p, seq);
        int rc = make_call(p, seq, e->args, e->nargs, e->method);
        if (rc == HIVE_ETIMEDOUT)
            break;                       /* the free ones were dead: wait for a busy one */
        p->next_queued++;
        drop_args(p, e);
        if (rc != HIVE_OK)
            fail_entry(p, seq, rc);
    }
}

/* Notice finished calls (waiting up to timeout_ns for at least one if
 * none has), free their actors and hand out queued calls. HIVE_OK, or
 * HIVE_ETIMEDOUT, or a failure of hive_wait. */
static int poll_calls(hive_pool_t *p, int64_t timeout_ns)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->busy[i] != NONE) {
            p->wait_refs[k] = entry(p, p->busy[i])->ref;
            p->wait_seq[k++] = p->busy[i];
        }
    if (k == 0) {
        dispatch_queued(p);
        return HIVE_OK;
    }
    int rc = hive_wait(p->h, p->wait_refs, k, 1, timeout_ns, p->wait_ready);
    if (rc < 0)
        return rc;
    for (size_t j = 0; j < k; j++) {
        if (!p->wait_ready[j])
            continue;
        uint64_t seq = p->wait_seq[j];
        entry_t *e = entry(p, seq);
        e->state = DONE;
        e->code = HIVE_OK;
        for (size_t i = 0; i < p->n; i++)
            if (p->busy[i] == seq)
                p->busy[i] = NONE;
        push_done(p, seq);
    }
    dispatch_queued(p);
    return HIVE_OK;
}

/* ------------------------------------------------------------ API */

static int cmp_id(const void *x, const void *y)
{
    uint64_t a = ((const hive_actor_t *)x)->id, b = ((const hive_actor_t *)y)->id;
    return a < b ? -1 : a > b;
}

static int check_actors(hive_t *h, const hive_actor_t *actors, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int rc = hive__actor_check(h, actors[i].id, "hive_pool_new");
        if (rc != HIVE_OK)
            return rc;
    }
    hive_actor_t *sorted = hive__malloc(n * sizeof *sorted);   /* n <= 2^20: no overflow */
    if (sorted == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_pool_new: cannot sort %zu actors", n);
    memcpy(sorted, actors, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_id);
    int rc = HIVE_OK;
    for (size_t i = 1; i < n && rc == HIVE_OK; i++)
        if (sorted[i].id == sorted[i - 1].id)
            rc = hive__fail(HIVE_EINVAL, "hive_pool_new: actor %llu is in the list twice",
                            (unsigned long long)sorted[i].id);
    free(sorted);
    return rc;
}

int hive_pool_free(hive_pool_t *p);

int hive_pool_new(hive_t *h, const hive_actor_t *actors, size_t n, hive_pool_t **out)
{
    if (h == NULL || actors == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_pool_new: %s is NULL",
                          h == NULL ? "engine" : actors == NULL ? "actors" : "out");
    if (n == 0 || n > POOL_MAX_ACTORS)
        return hive__fail(HIVE_EINVAL, "hive_pool_new: %zu actors, outside 1..%zu", n,
                          POOL_MAX_ACTORS);
    int rc = check_actors(h, actors, n);
    if (rc != HIVE_OK)
        return rc;
    hive_pool_t *p = hive__malloc(sizeof *p);
    if (p == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_pool_new: cannot allocate a pool");
    memset(p, 0, sizeof *p);
    p->h = h;
    atomic_init(&p->inside, 0);
    p->n = n;
    p->live = n;
    /* n <= 2^20, so none of these products overflows */
    p->actors = hive__malloc(n * sizeof *p->actors);
    p->busy = hive__malloc(n * sizeof *p->busy);
    p->gone = hive__malloc(n);
    p->wait_refs = hive__malloc(n * sizeof *p->wait_refs);
    p->wait_seq = hive__malloc(n * sizeof *p->wait_seq);
    p->wait_ready = hive__malloc(n);
    if (!p->actors || !p->busy || !p->gone || !p->wait_refs || !p->wait_seq || !p->wait_ready) {
        hive_pool_free(p);
        return hive__fail(HIVE_ENOMEM, "hive_pool_new: cannot allocate the tables of %zu actors",
                          n);
    }
    memcpy(p->actors, actors, n * sizeof *actors);
    for (size_t i = 0; i < n; i++)
        p->busy[i] = NONE;
    memset(p->gone, 0, n);
    *out = p;
    return HIVE_OK;
}

int hive_pool_free(hive_pool_t *p)
{
    int rc = enter(p, "hive_pool_free");
    if (rc != HIVE_OK)
        return rc;
    for (size_t i = 0; i < p->hi; i++) {
        entry_t *e = &p->ent[i];
        if ((e->state == RUNNING || e->state == DONE) && e->ref.id != 0)
            hive_release(p->h, e->ref);
        drop_args(p, e);
        free(e->why);
    }
    free(p->ent);
    free(p->done);
    free(p->actors);
    free(p->busy);
    free(p->gone);
    free(p->wait_refs);
    free(p->wait_seq);
    free(p->wait_ready);
    free(p);
    return HIVE_OK;
}

static int submit(hive_pool_t *p, unsigned method, const hive_arg_t *args, size_t nargs)
{
    if (args == NULL && nargs != 0)
        return hive__fail(HIVE_EINVAL, "hive_pool_submit: args is NULL for %zu arguments", nargs);
    int rc;
    if (!has_free_actor(p) && (rc = poll_calls(p, 0)) != HIVE_OK && rc != HIVE_ETIMEDOUT)
        return rc;
    if ((rc = reserve_entry(p, "hive_pool_submit")) != HIVE_OK ||
        (rc = reserve_done(p, "hive_pool_submit")) != HIVE_OK)
        return rc;
    uint64_t seq = p->base + p->hi;
    entry_t *e = &p->ent[p->hi];
    *e = (entry_t){ .state = QUEUED, .method = method, .nargs = nargs };
    rc = HIVE_ETIMEDOUT;
    if (p->next_queued == seq && has_free_actor(p)) {
        rc = make_call(p, seq, args, nargs, method);
        if (rc != HIVE_OK && rc != HIVE_ETIMEDOUT)
            return rc;                   /* no entry: the submission did not happen */
    }
    if (rc == HIVE_OK) {
        p->next_queued++;
    } else if (p->live == 0) {
        return hive__fail(HIVE_EDEAD, "hive_pool_submit: every one of the pool's %zu actors is "
                          "dead", p->n);
    } else if ((rc = copy_args(p, args, nargs, &e->args)) != HIVE_OK) {
        return rc;
    }
    p->hi++;
    p->outstanding++;
    return HIVE_OK;
}

int hive_pool_submit(hive_pool_t *p, unsigned method, const hive_arg_t *args, size_t nargs)
{
    int rc = enter(p, "hive_pool_submit");
    if (rc != HIVE_OK)
        return rc;
    return leave(p, submit(p, method, args, nargs));
}

int hive_pool_has_free(hive_pool_t *p)
{
    int rc = enter(p, "hive_pool_has_free");
    if (rc != HIVE_OK)
        return rc;
    rc = poll_calls(p, 0);
    if (rc != HIVE_OK && rc != HIVE_ETIMEDOUT)
        return leave(p, rc);
    return leave(p, p->next_queued == p->base + p->hi && has_free_actor(p));
}

int hive_pool_has_next(hive_pool_t *p)
{
    int rc = enter(p, "hive_pool_has_next");
    if (rc != HIVE_OK)
        return rc;
    return leave(p, p->outstanding > 0);
}

/* Hand entry seq to the user. */
static int take(hive_pool_t *p, uint64_t seq, const char *fn, hive_ref_t *result)
{
    entry_t *e = entry(p, seq);
    e->state = FETCHED;
    p->outstanding--;
    if (e->code != HIVE_OK) {
        int rc = hive__fail(e->code, "%s: call %llu of the pool could not be made: %s", fn,
                            (unsigned long long)seq, e->why ? e->why : hive_strerror(e->code));
        free(e->why);
        e->why = NULL;
        return rc;
    }
    *result = e->ref;
    e->ref.id = 0;                       /* the count is the user's now */
    return HIVE_OK;
}

static uint64_t deadline_of(int64_t timeout_ns)
{
    return timeout_ns < 0 ? UINT64_MAX : hive__now_ns() + (uint64_t)timeout_ns;
}

static int64_t left_of(uint64_t deadline)
{
    if (deadline == UINT64_MAX)
        return HIVE_FOREVER;
    uint64_t now = hive__now_ns();
    return now >= deadline ? 0 : (int64_t)(deadline - now);
}

static int nothing_to_get(hive_pool_t *p, const char *fn)
{
    return hive__fail(HIVE_ESTATE, "%s: no result to get: all %llu calls submitted to the pool "
                      "were fetched", fn, (unsigned long long)(p->base + p->hi));
}

static int get_next(hive_pool_t *p, int64_t timeout_ns, hive_ref_t *result)
{
    if (result == NULL)
        return hive__fail(HIVE_EINVAL, "hive_pool_get_next: result is NULL");
    if (p->outstanding == 0)
        return nothing_to_get(p, "hive_pool_get_next");
    if (p->next_get < p->base)
        p->next_get = p->base;
    while (entry(p, p->next_get)->state == FETCHED)
        p->next_get++;                   /* outstanding > 0: one is not */
    uint64_t seq = p->next_get, deadline = deadline_of(timeout_ns);
    while (entry(p, seq)->state != DONE) {
        int rc = poll_calls(p, left_of(deadline));
        if (rc == HIVE_ETIMEDOUT)
            return hive__fail(rc, "hive_pool_get_next: call %llu of the pool not done after %lld ns",
                              (unsigned long long)seq, (long long)timeout_ns);
        if (rc != HIVE_OK)
            return rc;
    }
    return take(p, seq, "hive_pool_get_next", result);
}

int hive_pool_get_next(hive_pool_t *p, int64_t timeout_ns, hive_ref_t *result)
{
    int rc = enter(p, "hive_pool_get_next");
    if (rc != HIVE_OK)
        return rc;
    return leave(p, get_next(p, timeout_ns, result));
}

static int get_next_unordered(hive_pool_t *p, int64_t timeout_ns, hive_ref_t *result,
                              size_t *index)
{
    if (result == NULL)
        return hive__fail(HIVE_EINVAL, "hive_pool_get_next_unordered: result is NULL");
    if (p->outstanding == 0)
        return nothing_to_get(p, "hive_pool_get_next_unordered");
    uint64_t deadline = deadline_of(timeout_ns);
    for (;;) {
        while (p->dlo < p->dhi) {
            uint64_t seq = p->done[p->dlo++];
            if (seq >= p->base && entry(p, seq)->state == DONE) {
                if (index != NULL)
                    *index = (size_t)seq;
                return take(p, seq, "hive_pool_get_next_unordered", result);
            }
        }
        int rc = poll_calls(p, left_of(deadline));
        if (rc == HIVE_ETIMEDOUT)
            return hive__fail(rc, "hive_pool_get_next_unordered: none of the pool's %zu calls "
                              "not fetched is done after %lld ns", p->outstanding,
                              (long long)timeout_ns);
        if (rc != HIVE_OK)
            return rc;
    }
}

int hive_pool_get_next_unordered(hive_pool_t *p, int64_t timeout_ns, hive_ref_t *result)
{
    int rc = enter(p, "hive_pool_get_next_unordered");
    if (rc != HIVE_OK)
        return rc;
    return leave(p, get_next_unordered(p, timeout_ns, result, NULL));
}

/* map and map_unordered: one call per argument, then every result. */
static int map(hive_pool_t *p, unsigned method, const hive_arg_t *args, size_t n,
               hive_ref_t *results, size_t *index, bool ordered, const char *fn)
{
    if ((args == NULL || results == NULL) && n != 0)
        return hive__fail(HIVE_EINVAL, "%s: %s is NULL for %zu calls", fn,
                          args == NULL ? "args" : "results", n);
    if (p->outstanding != 0)
        return hive__fail(HIVE_ESTATE, "%s: the pool still has %zu results not fetched; get them "
                          "first", fn, p->outstanding);
    uint64_t first = p->base + p->hi;
    for (size_t i = 0; i < n; i++)
        results[i] = (hive_ref_t){ 0 };
    int rc = HIVE_OK, first_rc = HIVE_OK;
    size_t made = 0;
    for (; made < n; made++)
        if ((rc = submit(p, method, &args[made], 1)) != HIVE_OK)
            break;
    if (rc != HIVE_OK)
        first_rc = rc;                   /* the calls made so far still get their results */
    for (size_t k = 0; k < made; k++) {
        hive_ref_t r = { 0 };
        size_t at = k;
        rc = ordered ? get_next(p, HIVE_FOREVER, &r) : get_next_unordered(p, HIVE_FOREVER, &r, &at);
        if (!ordered)
            at = (size_t)(at - first);
        if (index != NULL)
            index[k] = at;
        if (rc == HIVE_OK)
            results[k] = r;
        else if (first_rc == HIVE_OK)
            first_rc = rc;
    }
    return first_rc;
}

int hive_pool_map(hive_pool_t *p, unsigned method, const hive_arg_t *args, size_t n,
                  hive_ref_t *results)
{
    int rc = enter(p, "hive_pool_map");
    if (rc != HIVE_OK)
        return rc;
    return leave(p, map(p, method, args, n, results, NULL, true, "hive_pool_map"));
}

int hive_pool_map_unordered(hive_pool_t *p, unsigned method, const hive_arg_t *args, size_t n,
                            hive_ref_t *results, size_t *index)
{
    int rc = enter(p, "hive_pool_map_unordered");
    if (rc != HIVE_OK)
        return rc;
    return leave(p, map(p, method, args, n, results, index, false, "hive_pool_map_unordered"));
}
