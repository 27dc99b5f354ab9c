/*
 * attach.c - the MPI layer's public side: attach / detach, rank and owner
 * queries, statistics, and the functions the core diverts remote ids to
 * (hive_call, hive_get, hive_release, hive_actor_kill, hive_actor_lookup).
 * They run on the caller's thread: build the message, make the local
 * future, send it (progress.c), and, where the caller waits for the
 * answer right away (get, cell acquire, kill, lookup), drive it.
 */
#include "mpi/world.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fault.h"
#include "util/rcu.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void hive__mpi_count(_Atomic uint64_t *c, uint64_t n)
{
    /* relaxed: statistics */
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

__thread hive__mpi_mine_t hive__mpi_mine;
static _Atomic uint64_t epochs;          /* attaches so far (world_t.epoch) */

stat_cell_t *hive__mpi_cell_take(world_t *w)
{
    /* relaxed: only uniqueness matters (the cell is zero from the world's calloc) */
    unsigned i = atomic_fetch_add_explicit(&w->ntcount, 1, memory_order_relaxed);
    hive__mpi_mine = (hive__mpi_mine_t){ .epoch = w->epoch, .cell = i < HIVE__MPI_CELLS ? &w->tcount[i] : NULL };
    return hive__mpi_mine.cell;
}

static world_t *world_of(hive_t *h)
{
    if (h == NULL)
        return NULL;
    /* acquire: as hive__remote_of */
    const hive__remote_ops_t *r = atomic_load_explicit(&h->remote, memory_order_acquire);
    return r ? (world_t *)r->ctx : NULL;
}

/* The owner of an id in w's world, or -1. */
static int owner(const world_t *w, uint64_t id)
{
    int tag = (int)hive__id_tag(id);
    return id != 0 && tag >= 1 && tag <= w->size ? tag - 1 : -1;
}

int hive__mpi_placeholder(world_t *w, int64_t first, hive__obj_t **out)
{
    hive__obj_t *o;
    /* a fault injected here (tests/util/fault.h) stands for a full store */
    int rc = hive__fault() ? hive__fail(HIVE_ENOMEM, "hive mpi: no record for an answer (an injected "
                                        "fault: the store is full)")
                           : hive__obj_new(w->h, HIVE__BLOB, 0, false, &o);
    if (rc != HIVE_OK)
        return rc;
    /* "a result whose producer is done": its size is not fixed until the
     * seal (a task taking it as an argument does not read it before), the
     * user cannot seal it, hive_cancel refuses it. relaxed: the publish
     * below releases it */
    hive__obj_init_run(o, HIVE__RUN_DONE);
    hive__obj_publish(w->h, o);
    /* obj_new's one user count becomes first and the request's pin;
     * relaxed: nobody else knows o yet */
    atomic_fetch_add_explicit(&o->refs, first + HIVE__PIN - 1, memory_order_relaxed);
    *out = o;
    return HIVE_OK;
}

void hive__mpi_placeholder_drop(world_t *w, hive__obj_t *o, int code, int64_t first)
{
    hive__obj_fail(w->h, o, code);
    if (first == 1)
        hive__obj_release(w->h, o);
    else if (first == HIVE__PIN)
        hive__obj_unpin(w->h, o);
    hive__obj_unpin(w->h, o);            /* the request's: the last */
}

static int refuse_closing(world_t *w, const char *fn)
{
    /* seq_cst: pairs with detach's exchange; a request made after it is
     * refused, and a call that counted its future in nfut before this
     * load is seen by detach (remote_call) */
    if (atomic_load_explicit(&w->closing, memory_order_seq_cst))
        return hive__fail(HIVE_ESHUTDOWN, "%s: rank %d is detaching from its MPI world", fn, w->rank);
    return HIVE_OK;
}

/* How long a caller that waits for its own answer drives it before
 * leaving it to the progress thread and sleeping in the core's wait. */
#define DRIVE_NS 10000000

static pend_t *new_pend(world_t *w, int kind, hive__obj_t *obj, wire_hdr_t *hdr)
{
    pend_t *p = hive__mpi_pend_new();
    if (p == NULL)
        return NULL;
    /* relaxed: only uniqueness matters */
    p->req = atomic_fetch_add_explicit(&w->next_req, 1, memory_order_relaxed) + 1;
    p->kind = kind;
    p->obj = obj;
    hdr->req = p->req;
    hdr->type = (uint32_t)kind;
    return p;
}

/* ------------------------------------------------------------------ calls */

static int encode_args(const hive_arg_t *args, size_t nargs, size_t *len)
{
    size_t n = sizeof(wire_hdr_t);
    for (size_t i = 0; i < nargs; i++) {
        size_t pad = args[i].ref.id ? 0 : (args[i].size + 7) & ~(size_t)7;
        if (!args[i].ref.id && args[i].size > 0 && args[i].data == NULL)
            return hive__fail(HIVE_EINVAL, "hive_call: argument %zu has %zu bytes at NULL", i, args[i].size);
        if (__builtin_add_overflow(n, sizeof(wire_arg_t), &n) || __builtin_add_overflow(n, pad, &n) ||
            n > INT_MAX)
            return hive__fail(HIVE_EINVAL, "hive_call: a remote call's arguments pass %d bytes at "
                              "argument %zu", INT_MAX, i);
    }
    *len = n;
    return HIVE_OK;
}

/* Write the arguments after the header; local refs are retained into
 * keep (*nkeep of them). */
static int write_args(world_t *w, const hive_arg_t *args, size_t nargs, char *msg, uint64_t *keep,
                      size_t *nkeep)
{
    char *at = msg + sizeof(wire_hdr_t);
    for (size_t i = 0; i < nargs; i++) {
        wire_arg_t a = { .ref = args[i].ref.id, .size = args[i].ref.id ? 0 : args[i].size };
        memcpy(at, &a, sizeof a);
        at += sizeof a;
        if (a.ref == 0) {
            if (a.size)
                memcpy(at, args[i].data, a.size);
            at += (a.size + 7) & ~(uint64_t)7;
        } else if (owner(w, a.ref) == w->rank) {
            int rc = hive__mpi_keep(w, args[i].ref, i);   /* kept alive until the callee has it */
            if (rc != HIVE_OK)
                return rc;
            keep[(*nkeep)++] = a.ref;
        } else if (owner(w, a.ref) < 0)
            return hive__fail(HIVE_ENOENT, "hive_call: argument %zu, ref %llu, belongs to no rank "
                              "of this world", i, (unsigned long long)a.ref);
    }
    return HIVE_OK;
}

/* The remote call this thread made last: the future its caller most
 * likely waits for next. */
typedef struct last_call {
    world_t  *w;
    uint64_t  fut, req;
    int       dest;
} last_call_t;
static __thread last_call_t last_call;

/* A call whose future is a slot (world.h: fut_t), not a store record:
 * nothing is allocated for a small call without ref arguments. Its nfut
 * count is taken. HIVE__MPI_NO_SLOT: the slot is held by an older future
 * (more than HIVE__MPI_FUTS calls ago, not released): take the record path. */
#define HIVE__MPI_NO_SLOT 1
static int fut_call(world_t *w, int dest, hive_actor_t actor, unsigned method, const hive_arg_t *args,
                    size_t nargs, const hive_opts_t *opts, hive_ref_t *result)
{
    int rc;
    if (nargs > 0 && args == NULL)
        rc = hive__fail(HIVE_EINVAL, "hive_call: args is NULL with nargs = %zu", nargs);
    size_t len = 0;
    if ((nargs > 0 && args == NULL) || (rc = encode_args(args, nargs, &len)) != HIVE_OK) {
        atomic_fetch_sub_explicit(&w->nfut, 1, memory_order_relaxed);   /* relaxed: never sent */
        return rc;
    }
    /* relaxed: only uniqueness matters */
    uint64_t seq = atomic_fetch_add_explicit(&w->next_req, 1, memory_order_relaxed) + 1;
    fut_t *f = &w->futs[seq & (HIVE__MPI_FUTS - 1)];
    uint64_t free_key = 0;
    /* acquire: the last user's frees of the slot (fut_free's release) before our writes */
    if (!atomic_compare_exchange_strong_explicit(&f->key, &free_key, HIVE__MPI_FUT_CLAIM,
                                                 memory_order_acquire, memory_order_relaxed))
        return HIVE__MPI_NO_SLOT;
    bool refs = false;                   /* local ref arguments to keep until the reply */
    for (size_t i = 0; i < nargs && !refs; i++)
        refs = args[i].ref.id != 0;
    /* the short form (wire_calls_t) if it can carry the call: its length
     * is len less 24 bytes of header and 8 per argument */
    int prio = opts ? opts->priority : 0;
    bool shortf = !refs && nargs <= HIVE__MPI_CALLS_ARGS && prio >= INT8_MIN && prio <= INT8_MAX &&
                  len - sizeof(wire_hdr_t) + sizeof(wire_calls_t) - 8 * nargs <= HIVE__MPI_CTRL_CAP;
    if (shortf)
        len = len - sizeof(wire_hdr_t) + sizeof(wire_calls_t) - 8 * nargs;
    /* a small call is built on the stack and goes out with MPI_Send from
     * there (no allocation for it); zeroed: no stray bytes in the padding */
    uint64_t small[HIVE__MPI_SMALL / 8];
    char *msg = len <= sizeof small ? memset(small, 0, len) : hive__calloc(1, len);
    /* relaxed, all: the slot is ours (CLAIM) until key's release below */
    atomic_store_explicit(&f->holds, HIVE__MPI_FUT_GEN(seq) | 3,   /* the caller's count, the answer */
                          memory_order_relaxed);
    atomic_store_explicit(&f->st, FUT_PENDING, memory_order_relaxed);
    atomic_store_explicit(&f->rec, NULL, memory_order_relaxed);
    atomic_store_explicit(&f->sealed, 0, memory_order_relaxed);
    f->heap = NULL;
    f->dest = dest;
    f->actor = actor.id;
    f->nkeep = 0;
    f->keep = refs && msg != NULL ? hive__calloc(nargs, sizeof *f->keep) : NULL;
    if (msg == NULL || (refs && f->keep == NULL)) {
        rc = hive__fail(HIVE_ENOMEM, "hive_call: cannot allocate a remote call of %zu bytes", len);
        goto fail;
    }
    wire_hdr_t hdr = { .type = M_CALL, .req = seq | HIVE__MPI_FUT_BIT, .id = actor.id, .method = method,
                       .nargs = (uint32_t)nargs, .prio = prio, .has_prio = opts != NULL,
                       .size = len - sizeof hdr };
    if (shortf) {
        wire_calls_t c = { .bits = M_CALLS | (uint32_t)(opts != NULL) << 8 | (uint32_t)nargs << 16 |
                                   (uint32_t)(uint8_t)(int8_t)prio << 24,
                           .method = method, .req = hdr.req, .actor = actor.id };
        memcpy(msg, &c, sizeof c);
        char *at = msg + sizeof c;
        for (size_t i = 0; i < nargs; i++) {
            uint64_t size = args[i].size;  /* below 64 KiB: the message fits the posted receive */
            memcpy(at, &size, sizeof size);
            if (size)
                memcpy(at + 8, args[i].data, size);
            at += 8 + ((size + 7) & ~(uint64_t)7);
        }
    } else {
        if ((rc = write_args(w, args, nargs, msg, f->keep, &f->nkeep)) != HIVE_OK)
            goto fail;
        memcpy(msg, &hdr, sizeof hdr);
    }
    result->id = (uint64_t)(w->rank + 1) << 30 | (seq & HIVE__MPI_FUT_IDBITS);
    HIVE__MPI_COUNT_MINE(w, calls_sent);
    /* release: the fields above before any finder's acquire of key */
    atomic_store_explicit(&f->key, hdr.req, memory_order_release);
    hive__mpi_send(w, dest, msg, len, msg != (char *)small);
    return HIVE_OK;
fail:
    if (msg != (char *)small)
        free(msg);
    hive__mpi_unkeep(w, f->keep, f->nkeep);
    f->keep = NULL;
    f->nkeep = 0;
    /* relaxed: no id of this generation went out; no count on it then */
    atomic_store_explicit(&f->holds, HIVE__MPI_FUT_GEN(seq), memory_order_relaxed);
    atomic_store_explicit(&f->key, 0, memory_order_release);   /* release: as fut_free's */
    atomic_fetch_sub_explicit(&w->nfut, 1, memory_order_relaxed);   /* relaxed: never sent */
    return rc;
}

static int remote_call(void *ctx, hive_actor_t actor, unsigned method, const hive_arg_t *args,
                       size_t nargs, const hive_opts_t *opts, hive_ref_t *result)
{
    world_t *w = ctx;
    int dest = owner(w, actor.id), rc;
    if (dest < 0 || dest == w->rank)     /* this rank's ids come here only as futures */
        return hive__fail(HIVE_ENOENT, "hive_call: actor %llu belongs to no rank of this world "
                          "(%d ranks)", (unsigned long long)actor.id, w->size);
    /* seq_cst: counted before refuse_closing's load, so that a detach
     * that this call does not see waits for its answer (step_detach) */
    atomic_fetch_add_explicit(&w->nfut, 1, memory_order_seq_cst);
    if ((rc = refuse_closing(w, "hive_call")) != HIVE_OK) {
        atomic_fetch_sub_explicit(&w->nfut, 1, memory_order_relaxed);   /* relaxed: never sent */
        return rc;
    }
    rc = fut_call(w, dest, actor, method, args, nargs, opts, result);
    if (rc != HIVE__MPI_NO_SLOT)
        return rc;
    atomic_fetch_sub_explicit(&w->nfut, 1, memory_order_relaxed);   /* relaxed: the record path
                                                    counts its request in npend */
    if (nargs > 0 && args == NULL)
        return hive__fail(HIVE_EINVAL, "hive_call: args is NULL with nargs = %zu", nargs);
    size_t len = 0;
    if ((rc = encode_args(args, nargs, &len)) != HIVE_OK)
        return rc;
    /* a small call is built on the stack and goes out with MPI_Send from
     * there (no allocation for it); zeroed: no stray bytes in the padding */
    uint64_t small[HIVE__MPI_SMALL / 8];
    char *msg = len <= sizeof small ? memset(small, 0, len) : hive__calloc(1, len);
    bool refs = false;                   /* local ref arguments to keep until the reply */
    for (size_t i = 0; i < nargs && !refs; i++)
        refs = args[i].ref.id != 0;
    hive__obj_t *fut = NULL;
    wire_hdr_t hdr = { .id = actor.id, .method = method, .nargs = (uint32_t)nargs,
                       .prio = opts ? opts->priority : 0, .has_prio = opts != NULL,
                       .size = len - sizeof hdr };
    pend_t *p = NULL;
    /* the future: the caller's count and the request's pin */
    if (msg == NULL || (rc = hive__mpi_placeholder(w, 1, &fut)) != HIVE_OK ||
        (p = new_pend(w, M_CALL, fut, &hdr)) == NULL || (refs && (p->keep = hive__calloc(nargs, 8)) == NULL)) {
        rc = msg == NULL || fut != NULL ? hive__fail(HIVE_ENOMEM, "hive_call: cannot allocate a "
                                                     "remote call of %zu bytes", len) : rc;
        goto fail;
    }
    p->actor = actor.id;
    if ((rc = write_args(w, args, nargs, msg, p->keep, &p->nkeep)) != HIVE_OK)
        goto fail;
    memcpy(msg, &hdr, sizeof hdr);
    result->id = fut->id;
    HIVE__MPI_COUNT_MINE(w, calls_sent);
    /* a hive_get of this future on this thread next (a round trip) posts
     * a receive for the answer (remote_wait) */
    last_call = (last_call_t){ .w = w, .fut = fut->id, .req = hdr.req, .dest = dest };
    return hive__mpi_request(w, dest, msg, len, p, msg != (char *)small);
fail:
    if (msg != (char *)small)
        free(msg);
    if (p != NULL)
        hive__mpi_pend_free(w, p);
    if (fut != NULL)
        hive__mpi_placeholder_drop(w, fut, rc, 1);
    return rc;
}

/* The core's wait hook (remote.h): a user thread about to wait for o.
 * If o is an answer this layer fills (a placeholder: pending, with its
 * producer marked done), the thread receives it itself, so no other thread
 * of this rank is on the answer's path; then it waits in the core as
 * before (the progress thread takes over). */
static void remote_wait(void *ctx, hive__obj_t *o, uint64_t deadline)
{
    world_t *w = ctx;
    /* acquire: pairs with the placeholder's publish */
    if (hive__obj_run(o) != HIVE__RUN_DONE)
        return;                          /* a local task's result: nothing to receive */
    uint64_t now = hive__now_ns();
    if (now >= deadline)
        return;
    int64_t budget = deadline - now < DRIVE_NS ? (int64_t)(deadline - now) : DRIVE_NS;
    bool mine = last_call.w == w && last_call.fut == o->id;   /* this thread's last call */
    hive__mpi_drive(w, o, budget, mine ? last_call.dest : -1, last_call.req);
    if (mine)
        last_call.w = NULL;
}

/* ------------------------------------------------------------------ gets */

static cached_t **bucket(world_t *w, uint64_t rid)
{
    return &w->cache[(rid * 0x9e3779b97f4a7c15ull) >> 52 & (HIVE__MPI_BUCKETS - 1)];
}

/* The local copy of rid, fetching it if this is the first get; a pin on
 * it for the caller. Every hold on a copy is the layer's, a pin: the
 * cache's, the request's, a caller's while it uses it; the user's holds
 * are counted in c->holds (and the user never names the copy, but a task
 * or method that has it as its argument does: hive_arg_ref). */
static int local_copy(world_t *w, uint64_t rid, int dest, bool drive, int holds, hive__obj_t **out)
{
    pthread_mutex_lock(&w->clock);
    for (cached_t *c = *bucket(w, rid); c != NULL; c = c->next)
        if (c->rid == rid) {
            atomic_fetch_add_explicit(&c->obj->refs, HIVE__PIN, memory_order_relaxed);   /* relaxed:
                                                    the cache's own pin keeps it alive meanwhile */
            c->holds += (uint64_t)holds;
            *out = c->obj;
            pthread_mutex_unlock(&w->clock);
            hive__mpi_count(&w->st_cache_hits, 1);
            return HIVE_OK;
        }
    hive__obj_t *o = NULL;
    wire_hdr_t hdr = { .id = rid };
    cached_t *c = calloc(1, sizeof *c);
    wire_hdr_t *msg = malloc(sizeof *msg);
    pend_t *p = NULL;
    int rc = c && msg ? hive__mpi_placeholder(w, HIVE__PIN, &o) : HIVE_ENOMEM;   /* the cache's */
    if (rc == HIVE_OK && (p = new_pend(w, M_GET, o, &hdr)) == NULL)
        rc = HIVE_ENOMEM;
    if (rc != HIVE_OK) {
        pthread_mutex_unlock(&w->clock);
        if (o != NULL)
            hive__mpi_placeholder_drop(w, o, HIVE_ENOMEM, HIVE__PIN);
        free(c);
        free(msg);
        return hive__fail(HIVE_ENOMEM, "hive_get: cannot allocate the fetch of %llu",
                          (unsigned long long)rid);
    }
    c->rid = rid;
    c->obj = o;
    c->holds = 1;
    c->next = *bucket(w, rid);
    *bucket(w, rid) = c;
    atomic_fetch_add_explicit(&o->refs, HIVE__PIN, memory_order_relaxed);   /* the caller's; relaxed: as above */
    pthread_mutex_unlock(&w->clock);
    *msg = hdr;
    *out = o;
    hive__mpi_count(&w->st_fetches, 1);
    hive__mpi_request(w, dest, msg, sizeof *msg, p, true);
    if (drive)
        hive__mpi_drive(w, o, DRIVE_NS, dest, hdr.req);   /* the first get receives it itself */
    return HIVE_OK;
}

/* A record-free future's slot, if its user holds it (HIVE_ENOENT set otherwise). */
static fut_t *fut_held(world_t *w, uint64_t id, const char *fn)
{
    fut_t *f = hive__mpi_fut_find(w, id);
    /* relaxed: a hint against a released id; the user's own count keeps it */
    uint64_t hd = f != NULL ? atomic_load_explicit(&f->holds, memory_order_relaxed) : 0;
    if (f == NULL || (hd & ~(uint64_t)UINT32_MAX) != HIVE__MPI_FUT_GEN(id) ||
        HIVE__MPI_FUT_USERS(HIVE__MPI_FUT_COUNT(hd)) < 2) {
        hive__fail(HIVE_ENOENT, "%s: object %llu does not exist (never created, or released)", fn,
                   (unsigned long long)id);
        return NULL;
    }
    return f;
}

/* hive_get of a record-free future: drive its answer, then read it from
 * the slot; one too big for the slot, or not in within the drive's
 * budget, is waited for through its record (the core's wait). */
static int fut_get(world_t *w, uint64_t id, int64_t timeout_ns, const void **data, size_t *size)
{
    fut_t *f = fut_held(w, id, "hive_get");
    if (f == NULL)
        return HIVE_ENOENT;
    /* acquire: the answer's bytes and status, written before st */
    uint32_t st = atomic_load_explicit(&f->st, memory_order_acquire);
    int64_t left = timeout_ns;
    /* a user thread drives its answer; a worker waits through the record
     * (the core's wait helps with other jobs meanwhile, as for any record) */
    if (st == FUT_PENDING && timeout_ns != 0 && hive__self == NULL) {
        uint64_t t0 = timeout_ns > 0 ? hive__now_ns() : 0;
        hive__mpi_drive_fut(w, f, timeout_ns > 0 && timeout_ns < DRIVE_NS ? timeout_ns : DRIVE_NS);
        st = atomic_load_explicit(&f->st, memory_order_acquire);   /* acquire: as above */
        if (timeout_ns > 0) {
            int64_t spent = (int64_t)(hive__now_ns() - t0);
            left = spent < timeout_ns ? timeout_ns - spent : 0;
        }
    }
    if (st == FUT_DONE) {
        *data = hive__mpi_fut_bytes(f);
        if (size)
            *size = f->size;
        return HIVE_OK;
    }
    if (st == FUT_FAILED)
        return hive__fail(f->status, "hive_get: the call %llu to actor %llu on rank %d failed: %s",
                          (unsigned long long)id, (unsigned long long)f->actor, f->dest,
                          hive_strerror(f->status));
    hive__obj_t *r = hive__mpi_fut_rec(w, f);   /* FUT_REC, or not in yet */
    if (r == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_get: cannot make a record for call %llu",
                          (unsigned long long)id);
    return hive_get(w->h, (hive_ref_t){ r->id }, left, data, size);
}

static int remote_get(void *ctx, hive_ref_t ref, int64_t timeout_ns, const void **data, size_t *size)
{
    world_t *w = ctx;
    int dest = owner(w, ref.id), rc;
    if (dest == w->rank)                 /* this rank's ids come here only as futures */
        return fut_get(w, ref.id, timeout_ns, data, size);
    if (dest < 0)
        return hive__fail(HIVE_ENOENT, "hive_get: object %llu belongs to no rank of this world "
                          "(%d ranks)", (unsigned long long)ref.id, w->size);
    if ((rc = refuse_closing(w, "hive_get")) != HIVE_OK)
        return rc;
    hive__obj_t *o = NULL;
    if ((rc = local_copy(w, ref.id, dest, true, 0, &o)) != HIVE_OK)
        return rc;
    /* the copy is a local object: the core's own get waits for it */
    rc = hive_get(w->h, (hive_ref_t){ o->id }, timeout_ns, data, size);
    hive__obj_unpin(w->h, o);            /* the cache's pin keeps the payload */
    return rc;
}

/* Take or drop (move) a user's count on a record-free future. */
static int fut_count(world_t *w, uint64_t id, int move, const char *fn)
{
    int rc;
    if (hive__mpi_fut_count(w, id, move, &rc))
        return HIVE_OK;
    if (rc == HIVE_EINVAL)
        return hive__fail(rc, "%s: future %llu holds 32,767 counts already", fn, (unsigned long long)id);
    if (rc == HIVE_ESTATE)               /* relaxed: for the sentence */
        return hive__fail(rc, "%s: future %llu has no count left (released once too often); the layer "
                          "still holds it for %u calls in flight", fn, (unsigned long long)id,
                          HIVE__MPI_FUT_COUNT(atomic_load_explicit(&w->futs[id & (HIVE__MPI_FUTS - 1)].holds,
                                                                   memory_order_relaxed)) >> 16);
    return hive__fail(HIVE_ENOENT, "%s: object %llu does not exist (never created, or released)", fn,
                      (unsigned long long)id);
}

static int remote_release(void *ctx, hive_ref_t ref)
{
    world_t *w = ctx;
    if (owner(w, ref.id) == w->rank)     /* this rank's ids come here only as futures */
        return fut_count(w, ref.id, HIVE__MPI_FUT_RELEASE, "hive_release");
    pthread_mutex_lock(&w->clock);
    cached_t **pp = bucket(w, ref.id), *c;
    while ((c = *pp) != NULL && c->rid != ref.id)
        pp = &c->next;
    if (c != NULL && --c->holds == 0)
        *pp = c->next;
    else if (c != NULL)
        c = NULL;                        /* held still: hive_retain'ed here */
    pthread_mutex_unlock(&w->clock);
    if (c == NULL)                       /* nothing held here for it */
        return owner(w, ref.id) >= 0 ? HIVE_OK
               : hive__fail(HIVE_ENOENT, "hive_release: object %llu belongs to no rank of this "
                            "world", (unsigned long long)ref.id);
    hive__obj_unpin(w->h, c->obj);
    free(c);
    return HIVE_OK;
}

/* Another rank's ref used as an argument or waited for: the local copy,
 * fetching it in the background (the caller does not wait here). */
static hive__obj_t *remote_localize(void *ctx, hive_ref_t ref)
{
    world_t *w = ctx;
    int dest = owner(w, ref.id);
    if (dest == w->rank) {               /* a record-free future: its record */
        fut_t *f = fut_held(w, ref.id, "hive mpi");
        hive__obj_t *r = f != NULL ? hive__mpi_fut_rec(w, f) : NULL;
        if (f != NULL && r == NULL)
            hive__fail(HIVE_ENOMEM, "hive mpi: cannot make a record for call %llu",
                       (unsigned long long)ref.id);
        return r;
    }
    if (dest < 0) {
        hive__fail(HIVE_ENOENT, "object %llu belongs to no rank of this world (%d ranks)",
                   (unsigned long long)ref.id, w->size);
        return NULL;
    }
    hive__obj_t *o = NULL;
    if (refuse_closing(w, "hive mpi") != HIVE_OK || local_copy(w, ref.id, dest, false, 0, &o) != HIVE_OK)
        return NULL;
    hive__obj_unpin(w->h, o);            /* the cache's pin keeps the record */
    return o;
}

/* A count on another rank's ref: one more hold on this rank's copy. */
static int remote_retain(void *ctx, hive_ref_t ref)
{
    world_t *w = ctx;
    int dest = owner(w, ref.id), rc;
    if (dest == w->rank)                 /* this rank's ids come here only as futures */
        return fut_count(w, ref.id, HIVE__MPI_FUT_RETAIN, "hive_retain");
    if (dest < 0)
        return hive__fail(HIVE_ENOENT, "hive_retain: object %llu belongs to no rank of this world "
                          "(%d ranks)", (unsigned long long)ref.id, w->size);
    if ((rc = refuse_closing(w, "hive_retain")) != HIVE_OK)
        return rc;
    hive__obj_t *o = NULL;
    if ((rc = local_copy(w, ref.id, dest, false, 1, &o)) != HIVE_OK)
        return rc;
    hive__obj_unpin(w->h, o);            /* the cache's pin keeps the record */
    return HIVE_OK;
}

/* Futures the program did not release: their records go (their answers
 * are all in: detach waited for them). */
static void drop_futs(world_t *w)
{
    for (size_t i = 0; i < HIVE__MPI_FUTS; i++) {
        fut_t *f = &w->futs[i];
        /* relaxed: every thread that used the world is done with it */
        hive__obj_t *r = atomic_load_explicit(&f->rec, memory_order_relaxed);
        if (atomic_load_explicit(&f->key, memory_order_relaxed) != 0 && r != NULL)
            hive__obj_unpin(w->h, r);    /* the slot's */
        if (atomic_load_explicit(&f->key, memory_order_relaxed) != 0)
            free(f->heap);
    }
    free(w->futs);
}

static void drop_cache(world_t *w)
{
    for (size_t b = 0; b < HIVE__MPI_BUCKETS; b++)
        while (w->cache[b] != NULL) {
            cached_t *c = w->cache[b];
            w->cache[b] = c->next;
            hive__obj_unpin(w->h, c->obj);
            free(c);
        }
}

/* ------------------------------------------------------------------ cells
 * hive_cell_acquire on another rank's cell asks its owner for the current
 * version, saying which seq it holds a copy of: the owner answers
 * "unchanged" (2 small messages) or sends the new version's payload, which
 * becomes the local copy. The caller gets a count on the local copy. */

static cell_copy_t *cell_copy(world_t *w, uint64_t cell)
{
    cell_copy_t *c = w->cells;
    while (c != NULL && c->cell != cell)
        c = c->next;
    return c;
}

/* Keep o as the copy of seq if it is newer than the one kept (o comes
 * with a pin, which the list takes: the list's hold is the layer's); the
 * copy that is newest, with a user count on it for the caller if user
 * (a cell acquire hands it to its user). */
static hive__obj_t *keep_newest(world_t *w, uint64_t cell, uint64_t seq, hive__obj_t *o, uint64_t *seq_out,
                                bool user)
{
    pthread_mutex_lock(&w->clock);
    cell_copy_t *c = cell_copy(w, cell);
    if (c == NULL && o != NULL && (c = calloc(1, sizeof *c)) != NULL) {
        *c = (cell_copy_t){ .next = w->cells, .cell = cell, .seq = seq, .obj = o };
        w->cells = c;
        o = NULL;                            /* the list took our pin */
    } else if (c != NULL && o != NULL && seq > c->seq) {
        hive__obj_t *old = c->obj;
        c->obj = o;
        c->seq = seq;
        o = old;                             /* released below */
    }
    hive__obj_t *keep = c ? c->obj : NULL;
    if (keep) {
        if (user)
            atomic_fetch_add_explicit(&keep->refs, 1, memory_order_relaxed);   /* relaxed: the
                                                    list's pin keeps it alive meanwhile */
        *seq_out = c->seq;
    }
    pthread_mutex_unlock(&w->clock);
    if (o != NULL)
        hive__obj_unpin(w->h, o);
    return keep;
}

void hive__mpi_cell_pushed(world_t *w, uint64_t cell, uint64_t seq, hive__obj_t *o)
{
    if (o == NULL) {                     /* announced only: the next acquire asks */
        pthread_mutex_lock(&w->clock);
        cell_copy_t *c = cell_copy(w, cell);
        if (c != NULL && c->seq < seq)
            c->pushed = false;
        pthread_mutex_unlock(&w->clock);
        return;
    }
    uint64_t got;
    keep_newest(w, cell, seq, o, &got, false);   /* takes o's pin */
}

/* The pushed copy, if this rank is subscribed and has it: a user count on
 * it (the acquire hands it to its user). */
static hive__obj_t *pushed_copy(world_t *w, uint64_t cell, uint64_t *seq)
{
    hive__mpi_poll_once(w);              /* take in what has arrived */
    pthread_mutex_lock(&w->clock);
    cell_copy_t *c = cell_copy(w, cell);
    hive__obj_t *o = c != NULL && c->pushed ? c->obj : NULL;
    if (o != NULL) {
        atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);   /* relaxed: the list's
                                                    pin keeps it alive meanwhile */
        *seq = c->seq;
    }
    pthread_mutex_unlock(&w->clock);
    return o;
}

static void mark_pushed(world_t *w, uint64_t cell)
{
    pthread_mutex_lock(&w->clock);
    cell_copy_t *c = cell_copy(w, cell);
    if (c != NULL)
        c->pushed = true;
    pthread_mutex_unlock(&w->clock);
}

static int cell_acquire(world_t *w, hive_ref_t cell, hive_ref_t *version, uint64_t *seq, bool subscribe)
{
    int dest = owner(w, cell.id), rc;
    if (dest < 0 || dest == w->rank)     /* this rank's ids come here only as futures */
        return hive__fail(HIVE_ENOENT, "hive_cell_acquire: cell %llu belongs to no rank of this world",
                          (unsigned long long)cell.id);
    if ((rc = refuse_closing(w, "hive_cell_acquire")) != HIVE_OK)
        return rc;
    uint64_t pseq = 0;
    hive__obj_t *pushed = pushed_copy(w, cell.id, &pseq);
    if (pushed != NULL) {                /* kept current by the owner's pushes: no message */
        hive__mpi_count(&w->st_cell_local, 1);
        version->id = pushed->id;
        if (seq)
            *seq = pseq;
        return HIVE_OK;
    }
    pthread_mutex_lock(&w->clock);
    cell_copy_t *c = cell_copy(w, cell.id);
    uint64_t have = c ? c->seq : UINT64_MAX;
    pthread_mutex_unlock(&w->clock);
    wire_hdr_t hdr = { .id = cell.id, .size = have, .nargs = subscribe };   /* 1: push to me */
    wire_hdr_t *msg = malloc(sizeof *msg);
    cell_answer_t *ans = calloc(1, sizeof *ans);
    hive__obj_t *o = NULL;
    pend_t *p = NULL;
    rc = msg && ans ? hive__mpi_placeholder(w, HIVE__PIN, &o) : HIVE_ENOMEM;   /* ours, for the list */
    if (rc == HIVE_OK && (p = new_pend(w, M_CELL, o, &hdr)) == NULL)
        rc = HIVE_ENOMEM;
    if (rc != HIVE_OK) {
        free(msg);
        free(ans);
        if (o != NULL)
            hive__mpi_placeholder_drop(w, o, rc, HIVE__PIN);
        return hive__fail(rc, "hive_cell_acquire: cannot allocate the request");
    }
    p->cell = ans;
    *msg = hdr;
    hive_ref_t local = { o->id };
    hive__mpi_request(w, dest, msg, sizeof *msg, p, true);
    hive__mpi_drive(w, o, DRIVE_NS, -1, 0);
    const void *data;
    rc = hive_get(w->h, local, HIVE_FOREVER, &data, NULL);   /* the answer is in ans after this */
    uint64_t got = ans->seq;
    int unchanged = ans->unchanged, subscribed = ans->subscribed;
    free(ans);
    if (rc != HIVE_OK) {
        hive__obj_unpin(w->h, o);
        return hive__fail(rc, "hive_cell_acquire: cell %llu on rank %d: %s", (unsigned long long)cell.id,
                          dest, hive_strerror(rc));
    }
    if (unchanged) {
        hive__obj_unpin(w->h, o);
        o = NULL;
    }
    hive__obj_t *keep = keep_newest(w, cell.id, got, o, &got, true);
    if (keep != NULL && subscribed)
        mark_pushed(w, cell.id);         /* later publishes come to us */
    if (keep == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_cell_acquire: cannot keep the copy of cell %llu",
                          (unsigned long long)cell.id);
    version->id = keep->id;
    if (seq)
        *seq = got;
    return HIVE_OK;
}

static int remote_cell_acquire(void *ctx, hive_ref_t cell, hive_ref_t *version, uint64_t *seq)
{
    return cell_acquire(ctx, cell, version, seq, false);
}

int hive_mpi_cell_subscribe(hive_t *h, hive_ref_t cell)
{
    world_t *w = world_of(h);
    if (w == NULL)
        return hive__fail(HIVE_ESTATE, "hive_mpi_cell_subscribe: the engine is not attached");
    int who = owner(w, cell.id);
    if (who < 0)
        return hive__fail(HIVE_ENOENT, "hive_mpi_cell_subscribe: cell %llu belongs to no rank of this "
                          "world (%d ranks)", (unsigned long long)cell.id, w->size);
    hive_ref_t v;
    if (who == w->rank)                  /* this rank's own cell: acquires are local already */
        return hive_cell_acquire(h, cell, &v, NULL) == HIVE_OK ? hive_release(h, v) : HIVE_ENOENT;
    int rc = cell_acquire(w, cell, &v, NULL, true);
    if (rc != HIVE_OK)
        return rc;
    hive_release(h, v);
    return HIVE_OK;
}

static int ask_and_wait(world_t *w, int kind, int dest, uint64_t id, const void *name, size_t nlen,
                        uint64_t *answer);

/* hive_cell_publish on another rank's cell: the version's bytes go to the
 * owner inside the request (a copy of any size: a large one is staged in
 * the owner's receive buffer), which publishes a copy of them; the answer
 * is the owner's status. The caller keeps its version. */
static int remote_cell_publish(void *ctx, hive_ref_t cell, hive_ref_t version)
{
    world_t *w = ctx;
    int dest = owner(w, cell.id), rc;
    if (dest < 0 || dest == w->rank)     /* this rank's ids come here only as futures */
        return hive__fail(HIVE_ENOENT, "hive_cell_publish: cell %llu belongs to no rank of this world",
                          (unsigned long long)cell.id);
    if ((rc = refuse_closing(w, "hive_cell_publish")) != HIVE_OK)
        return rc;
    const void *data;
    size_t size = 0;
    if ((rc = hive_get(w->h, version, HIVE_FOREVER, &data, &size)) != HIVE_OK)
        return hive__fail(rc, "hive_cell_publish: version %llu for cell %llu on rank %d: %s",
                          (unsigned long long)version.id, (unsigned long long)cell.id, dest,
                          hive_strerror(rc));
    if (size > (size_t)INT_MAX - sizeof(wire_hdr_t))
        return hive__fail(HIVE_EINVAL, "hive_cell_publish: a version of %zu bytes for cell %llu on "
                          "rank %d passes the %d bytes of one message", size,
                          (unsigned long long)cell.id, dest, INT_MAX);
    uint64_t unused;
    rc = ask_and_wait(w, M_PUBLISH, dest, cell.id, data, size, &unused);
    return rc == HIVE_OK ? rc : hive__fail(rc, "hive_cell_publish: cell %llu on rank %d: %s",
                                           (unsigned long long)cell.id, dest, hive_strerror(rc));
}

/* A cell of this engine has a new version: push it to its subscribers. */
static void remote_published(void *ctx, hive_ref_t cell, hive__obj_t *version, uint64_t seq)
{
    hive__mpi_push_version(ctx, cell.id, version, seq);
}

static void drop_cells(world_t *w)
{
    while (w->cells != NULL) {
        cell_copy_t *c = w->cells;
        w->cells = c->next;
        hive__obj_unpin(w->h, c->obj);
        free(c);
    }
}

/* -------------------------------------------------------- kill and lookup */

/* Send a small request and wait for its placeholder; *answer gets the
 * reply's id field. */
static int ask_and_wait(world_t *w, int kind, int dest, uint64_t id, const void *name, size_t nlen,
                        uint64_t *answer)
{
    wire_hdr_t hdr = { .id = id, .size = nlen };
    char *msg = malloc(sizeof hdr + nlen);
    hive__obj_t *o = NULL;
    pend_t *p = NULL;
    int rc = msg ? hive__mpi_placeholder(w, HIVE__PIN, &o) : HIVE_ENOMEM;   /* ours while we wait */
    if (rc == HIVE_OK && (p = new_pend(w, kind, o, &hdr)) == NULL)
        rc = HIVE_ENOMEM;
    if (rc != HIVE_OK) {
        free(msg);
        if (o != NULL)
            hive__mpi_placeholder_drop(w, o, rc, HIVE__PIN);
        return hive__fail(rc, "hive mpi: cannot allocate a request");
    }
    p->waiting = dest < 0 ? w->size - 1 : 1;
    p->actor = kind == M_KILL ? id : 0;
    p->found_rank = INT_MAX;
    memcpy(msg, &hdr, sizeof hdr);
    if (nlen)
        memcpy(msg + sizeof hdr, name, nlen);
    hive_ref_t ref = { o->id };
    hive__mpi_request(w, dest, msg, sizeof hdr + nlen, p, true);
    hive__mpi_drive(w, o, DRIVE_NS, -1, 0);
    const void *data;
    size_t size;
    rc = hive_get(w->h, ref, HIVE_FOREVER, &data, &size);
    if (rc == HIVE_OK && size == sizeof *answer)
        memcpy(answer, data, sizeof *answer);
    hive__obj_unpin(w->h, o);
    return rc;
}

static int remote_kill(void *ctx, hive_actor_t actor)
{
    world_t *w = ctx;
    int dest = owner(w, actor.id), rc;
    if (dest < 0 || dest == w->rank)     /* this rank's ids come here only as futures */
        return hive__fail(HIVE_ENOENT, "hive_actor_kill: actor %llu belongs to no rank of this world",
                          (unsigned long long)actor.id);
    if ((rc = refuse_closing(w, "hive_actor_kill")) != HIVE_OK)
        return rc;
    uint64_t unused;
    rc = ask_and_wait(w, M_KILL, dest, actor.id, NULL, 0, &unused);
    hive__mpi_forget_actor(w, actor.id); /* dead now, or it was already */
    return rc == HIVE_OK ? rc : hive__fail(rc, "hive_actor_kill: actor %llu on rank %d: %s",
                                           (unsigned long long)actor.id, dest, hive_strerror(rc));
}

/* A name another rank answered for. Names are per rank and a dead
 * actor's name passes to the next actor made with it, so an entry lives
 * until this rank learns that its actor is dead. */
typedef struct name_hit {
    struct name_hit *next;
    uint64_t         actor;
    char             name[];
} name_hit_t;

static bool cached_name(world_t *w, const char *name, uint64_t *actor)
{
    pthread_mutex_lock(&w->clock);
    name_hit_t *n = w->names;
    while (n != NULL && strcmp(n->name, name) != 0)
        n = n->next;
    if (n != NULL)
        *actor = n->actor;
    pthread_mutex_unlock(&w->clock);
    return n != NULL;
}

static void cache_name(world_t *w, const char *name, uint64_t actor)
{
    size_t len = strlen(name) + 1;
    name_hit_t *n = malloc(sizeof *n + len);
    if (n == NULL)
        return;                          /* no cache: the next lookup asks again */
    n->actor = actor;
    memcpy(n->name, name, len);
    pthread_mutex_lock(&w->clock);
    n->next = w->names;
    w->names = n;
    pthread_mutex_unlock(&w->clock);
}

void hive__mpi_forget_actor(world_t *w, uint64_t actor)
{
    pthread_mutex_lock(&w->clock);
    for (name_hit_t **pp = &w->names; *pp != NULL;) {
        name_hit_t *n = *pp;
        if (n->actor == actor) {
            *pp = n->next;
            free(n);
        } else
            pp = &n->next;
    }
    pthread_mutex_unlock(&w->clock);
}

static void drop_names(world_t *w)
{
    while (w->names != NULL) {
        name_hit_t *n = w->names;
        w->names = n->next;
        free(n);
    }
}

static int remote_lookup(void *ctx, const char *name, hive_actor_t *out)
{
    world_t *w = ctx;
    int rc;
    if (hive__mpi_serving() || w->size == 1)   /* serving another rank's lookup: ours only */
        return hive__fail(HIVE_ENOENT, "hive_actor_lookup: no actor is named \"%s\"", name);
    if ((rc = refuse_closing(w, "hive_actor_lookup")) != HIVE_OK)
        return rc;
    uint64_t id = 0;
    if (cached_name(w, name, &id)) {
        hive__mpi_count(&w->st_lookup_hits, 1);
        out->id = id;
        return HIVE_OK;
    }
    hive__mpi_count(&w->st_lookups, 1);
    rc = ask_and_wait(w, M_LOOKUP, -1, 0, name, strlen(name) + 1, &id);
    if (rc != HIVE_OK)
        return hive__fail(rc, "hive_actor_lookup: no actor is named \"%s\" on any of the %d ranks",
                          name, w->size);
    cache_name(w, name, id);
    out->id = id;
    return HIVE_OK;
}

/* ------------------------------------------------------------------ attach */

int hive_mpi_attach(hive_t *h, MPI_Comm comm)
{
    int inited = 0, level = 0;
    if (h == NULL)
        return hive__fail(HIVE_EINVAL, "hive_mpi_attach: engine is NULL");
    MPI_Initialized(&inited);
    if (!inited || (MPI_Query_thread(&level), level < MPI_THREAD_MULTIPLE))
        return hive__fail(HIVE_ESTATE, "hive_mpi_attach: MPI must be initialised with "
                          "MPI_Init_thread(MPI_THREAD_MULTIPLE) (initialised %d, level %d of %d)",
                          inited, level, MPI_THREAD_MULTIPLE);
    if (world_of(h) != NULL)
        return hive__fail(HIVE_ESTATE, "hive_mpi_attach: the engine is attached already");
    world_t *w = calloc(1, sizeof *w);
    if (w == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_mpi_attach: cannot allocate the world (%zu bytes)", sizeof *w);
    w->epoch = atomic_fetch_add_explicit(&epochs, 1, memory_order_relaxed) + 1;   /* relaxed: only uniqueness matters */
    MPI_Comm_dup(comm, &w->comm);
    MPI_Comm_dup(comm, &w->dcomm);
    MPI_Comm_dup(comm, &w->rcomm);
    int *ub = NULL, has_ub = 0;
    MPI_Comm_get_attr(w->comm, MPI_TAG_UB, &ub, &has_ub);
    w->tag_ub = has_ub && ub ? *ub : 32767;   /* the standard's minimum */
    /* reply tags [REPLY0, REPLY0 + 2^k) and body tags the 2^k above them,
     * all at most tag_ub: a mask, not a division, per request */
    uint64_t span = 1;
    while (HIVE__MPI_TAG_REPLY0 + 4 * span - 1 <= (uint64_t)w->tag_ub)
        span *= 2;
    w->tag_mask = span - 1;
    MPI_Comm_rank(w->comm, &w->rank);
    MPI_Comm_size(w->comm, &w->size);
    w->cbuf = malloc(2 * (size_t)HIVE__MPI_CTRL_CAP);
    w->futs = calloc(HIVE__MPI_FUTS, sizeof *w->futs);
    int rc = w->size > 4095 ? hive__fail(HIVE_EINVAL, "hive_mpi_attach: %d ranks, at most 4095 "
                                         "(ids carry the rank in 12 bits)", w->size)
             : w->cbuf == NULL || w->futs == NULL
                 ? hive__fail(HIVE_ENOMEM, "hive_mpi_attach: cannot allocate the request buffers (2 x %u "
                              "bytes) and future slots (%u x %zu bytes)", HIVE__MPI_CTRL_CAP,
                              HIVE__MPI_FUTS, sizeof(fut_t))
                               : hive__store_retag(h, (uint32_t)w->rank + 1);
    int all = rc;                        /* every rank agrees, or none attaches */
    MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MIN, w->comm);
    if (all != HIVE_OK) {
        MPI_Comm_free(&w->comm);
        MPI_Comm_free(&w->dcomm);
        MPI_Comm_free(&w->rcomm);
        free(w->cbuf);
        free(w->futs);
        free(w);
        return rc != HIVE_OK ? rc : hive__fail(all, "hive_mpi_attach: another rank could not attach "
                                               "(%s)", hive_strerror(all));
    }
    w->h = h;
    w->ops = (hive__remote_ops_t){ .ctx = w, .call = remote_call, .get = remote_get,
                                   .release = remote_release, .kill = remote_kill,
                                   .lookup = remote_lookup, .cell_acquire = remote_cell_acquire,
                                   .localize = remote_localize, .retain = remote_retain,
                                   .published = remote_published, .cell_publish = remote_cell_publish,
                                   .wait = remote_wait,
                                   .idle = hive__mpi_idle };
    pthread_mutex_init(&w->qlock, NULL);
    pthread_mutex_init(&w->clock, NULL);
    pthread_mutex_init(&w->plock, NULL);
    hive__mpi_open_ctrl(w);              /* before any thread polls (the thread's start orders it) */
    if (pthread_create(&w->thread, NULL, hive__mpi_progress, w) != 0) {
        hive__mpi_close_ctrl(w);
        MPI_Comm_free(&w->comm);
        MPI_Comm_free(&w->dcomm);
        MPI_Comm_free(&w->rcomm);
        free(w->cbuf);
        free(w->futs);
        free(w);
        return hive__fail(HIVE_ENOMEM, "hive_mpi_attach: cannot start the progress thread");
    }
    hive__remote_set(h, &w->ops);
    MPI_Barrier(comm);                   /* every rank serves before anyone calls */
    return HIVE_OK;
}

int hive_mpi_detach(hive_t *h)
{
    world_t *w = world_of(h);
    if (w == NULL)
        return hive__fail(HIVE_ESTATE, "hive_mpi_detach: the engine is not attached");
    /* release: pairs with refuse_closing's acquire; the exchange lets one
     * detach through */
    /* seq_cst: pairs with refuse_closing (see remote_call) */
    if (atomic_exchange_explicit(&w->closing, 1, memory_order_seq_cst) != 0)
        return hive__fail(HIVE_ESTATE, "hive_mpi_detach: the engine is detaching already");
    pthread_mutex_lock(&w->qlock);
    w->detach_asked = true;
    pthread_mutex_unlock(&w->qlock);
    hive__mpi_wake(w);
    pthread_join(w->thread, NULL);       /* it ends after the world's barrier */
    hive__remote_set(h, NULL);           /* waits for an idle worker or a waiter polling */
    hive__mpi_drain(w);
    drop_cache(w);
    drop_futs(w);
    drop_cells(w);
    drop_names(w);
    MPI_Comm_free(&w->comm);
    MPI_Comm_free(&w->dcomm);
    MPI_Comm_free(&w->rcomm);
    free(w->cbuf);
    free(w->reqs);
    free(w->xfers);
    pthread_mutex_destroy(&w->qlock);
    pthread_mutex_destroy(&w->clock);
    pthread_mutex_destroy(&w->plock);
    hive__rcu_thread();
    hive__rcu_barrier();                 /* frees queued through our records' releases */
    free(w);
    return HIVE_OK;
}

int hive_mpi_rank(hive_t *h)
{
    world_t *w = world_of(h);
    return w ? w->rank : hive__fail(HIVE_ESTATE, "hive_mpi_rank: the engine is not attached");
}

int hive_mpi_size(hive_t *h)
{
    world_t *w = world_of(h);
    return w ? w->size : hive__fail(HIVE_ESTATE, "hive_mpi_size: the engine is not attached");
}

int hive_mpi_owner(hive_t *h, uint64_t id)
{
    world_t *w = world_of(h);
    if (w == NULL)
        return hive__fail(HIVE_ESTATE, "hive_mpi_owner: the engine is not attached");
    int r = owner(w, id);
    return r >= 0 ? r : hive__fail(HIVE_ENOENT, "hive_mpi_owner: id %llu carries tag %u, which is "
                                   "no rank of this %d-rank world", (unsigned long long)id,
                                   hive__id_tag(id), w->size);
}

int hive_mpi_stats(hive_t *h, hive_mpi_stats_t *out)
{
    world_t *w = world_of(h);
    if (w == NULL || out == NULL)
        return hive__fail(w ? HIVE_EINVAL : HIVE_ESTATE, "hive_mpi_stats: %s",
                          w ? "out is NULL" : "the engine is not attached");
    /* relaxed: statistics */
#define LD(x) atomic_load_explicit(&w->x, memory_order_relaxed)
    uint64_t sent = LD(st_calls_sent), own = LD(st_recv_own);
    for (unsigned i = 0; i < HIVE__MPI_CELLS; i++) {   /* the threads' own counts (0 if untaken) */
        sent += LD(tcount[i].calls_sent);
        own += LD(tcount[i].recv_own);
    }
    *out = (hive_mpi_stats_t){ .calls_sent = sent, .calls_served = LD(st_calls_served),
                               .fetches = LD(st_fetches), .fetch_bytes = LD(st_fetch_bytes),
                               .gets_served = LD(st_gets_served), .cache_hits = LD(st_cache_hits),
                               .sleeps = LD(st_sleeps), .lookups = LD(st_lookups),
                               .lookup_hits = LD(st_lookup_hits), .cell_pushes = LD(st_pushes),
                               .cell_local = LD(st_cell_local),
                               .recv_progress = LD(st_recv_progress),
                               .recv_waiting = LD(st_recv_waiting) + own, .recv_idle = LD(st_recv_idle),
                               .calls_in_place = LD(st_in_place) };
#undef LD
    return HIVE_OK;
}
