/*
 * progress.c - the MPI layer's message paths (see world.h for the design):
 * sending on the caller's thread, the pending table, driving one's own
 * answer, serving other ranks' requests (calls, fetches, kills, name
 * lookups, cells), and the progress thread, which serves, answers what
 * nobody drives, finishes handed-over transfers and sleeps when nothing
 * is in flight.
 */
#include "mpi/world.h"
#include "actor.h"
#include "arena.h"
#include "sched.h"
#include "task.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fault.h"
#include "util/park.h"
#include "util/rcu.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define HOT_NS        1000000    /* poll this long after the last activity */
#define SLEEP_MIN_NS  16000
#define SLEEP_MAX_NS  1000000    /* nothing in flight, idle for less than COLD_NS */
#define COLD_NS       100000000  /* idle this long: sleep up to IDLE_MAX_NS */
#define IDLE_MAX_NS   10000000
#define SLEEP_WAIT_NS 128000     /* answers to wait for or calls served (a long method) */
#define SMALL_MSG     HIVE__MPI_SMALL   /* sent with MPI_Send from the stack (eager: never waits) */
#define IDLE_HOT_NS   2000000    /* an idle worker polls this long after the rank's last request */
#define IDLE_FREE_NS  20000      /* ... and yields the CPU between polls after this */

/* True while this thread serves other ranks' requests (the progress
 * thread, or a caller driving progress): a name lookup served then answers
 * from this rank only. */
static __thread bool serving;
/* An idle worker's empty polls in a row, and whether the rank is hot (1:
 * traffic less than IDLE_FREE_NS ago, 2: less than IDLE_HOT_NS ago). */
static __thread unsigned idle_empty, idle_hot, idle_looks;
/* A call the idle worker took for an actor whose turn was free: claimed
 * under poll_lock (so the calls handled after it queue behind it), its
 * arguments left in the request buffer (started again after the answer)
 * or copied out, run on this worker once poll_lock is let go
 * (run_in_place). */
#define HERE_MAX_ARGS 8
#define HERE_MAX_BYTES 4352      /* their bytes at 16-byte steps: a 4 KiB argument and a few small */
typedef struct here {
    struct hive__actor *a;       /* the claimed turn; NULL: nothing to run */
    int         restart;         /* the request receive to start after the answer, or -1 */
    wire_hdr_t  hdr;
    int         src;
    uint64_t    sizes[HERE_MAX_ARGS];
    const void *data[HERE_MAX_ARGS];   /* each argument: in the request buffer, or in bytes */
    /* arguments copied out, each at a 16-byte boundary, as a task record holds them */
    _Alignas(16) unsigned char bytes[HERE_MAX_BYTES];
} here_t;
/* Set while the idle worker polls: calls may run in place (NULL otherwise). */
static __thread here_t *here_slot;
/* Requests from other ranks this thread has handled (a driver that served
 * some hands the polling back to the progress thread when it stops). */
static __thread uint64_t served_here;

bool hive__mpi_serving(void)
{
    return serving;
}

void hive__mpi_wake(world_t *w)
{
    /* seq_cst: the bump is ordered before the read of sleeping, against the
     * thread's "set sleeping, then futex_wait on the old kick" (a Dekker
     * pair: one of the two sees the other) */
    atomic_fetch_add_explicit(&w->kick, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&w->sleeping, memory_order_seq_cst))
        hive__futex_wake(&w->kick, 1);
}

void hive__mpi_nudge(world_t *w)
{
    /* Only a deep sleep (2) is cut short: a nap ends by itself soon, and a
     * bump per request would keep a napping progress thread from sleeping
     * at all. No lost wake-up: the caller added its request under plock
     * before this seq_cst load; the thread stores 2 (seq_cst) before it
     * looks at npend under plock (idle_wait). Whichever takes plock second
     * sees the other's write (the request, or the 2). */
    if (atomic_load_explicit(&w->sleeping, memory_order_seq_cst) == 2) {
        atomic_fetch_add_explicit(&w->kick, 1, memory_order_seq_cst);   /* as hive__mpi_wake */
        hive__futex_wake(&w->kick, 1);
    }
}

/* ------------------------------------------------------- MPI requests */

static int track(world_t *w, xfer_t x, MPI_Request **req)
{
    if (w->nreqs == w->capreqs) {
        size_t cap = w->capreqs ? w->capreqs * 2 : 64;
        MPI_Request *r = realloc(w->reqs, cap * sizeof *r);
        if (r == NULL)
            return HIVE_ENOMEM;
        w->reqs = r;
        xfer_t *xs = realloc(w->xfers, cap * sizeof *xs);
        if (xs == NULL)
            return HIVE_ENOMEM;
        w->xfers = xs;
        w->capreqs = cap;
    }
    w->xfers[w->nreqs] = x;
    *req = &w->reqs[w->nreqs++];
    return HIVE_OK;
}

static void finish_xfer(world_t *w, xfer_t *x)
{
    free(x->free_buf);
    if (x->release)
        hive__obj_unpin(w->h, x->release);
    /* acq_rel: the last part's receiver sees every other part's bytes */
    if (x->seal && atomic_fetch_sub_explicit(x->parts, 1, memory_order_acq_rel) == 1) {
        free(x->parts);
        hive__obj_seal(w->h, x->seal);
        hive__obj_unpin(w->h, x->seal);  /* the request's pin */
    }
}

/* A request that did not complete at once goes to the progress thread. */
static void hand_over(world_t *w, MPI_Request r, xfer_t x)
{
    handed_t *hd = malloc(sizeof *hd);
    if (hd == NULL) {                    /* out of memory: finish it here */
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        finish_xfer(w, &x);
        return;
    }
    *hd = (handed_t){ .req = r, .x = x };
    pthread_mutex_lock(&w->qlock);
    hd->next = w->handed;
    w->handed = hd;
    pthread_mutex_unlock(&w->qlock);
    hive__mpi_wake(w);
}

/* How long a sender tests a message of up to HIVE__MPI_CTRL_CAP bytes
 * that did not go at once before it hands it to the progress thread. */
#define SEND_SPIN_NS 20000

/* Send buf (any thread); x says what to do once it is out. A message above
 * the transport's eager limit (4 KiB with Open MPI's shared memory) waits
 * for its receiver's answer (rendezvous), which a receiver that polls -
 * a waiter with its receive posted, an idle worker - gives within
 * microseconds: one up to HIVE__MPI_CTRL_CAP is tested on for up to
 * SEND_SPIN_NS first, as a hand-over costs a wake-up of the progress
 * thread (a 4 KiB call's round trip had two). Larger ones (payload parts)
 * are handed over at once. */
static void send_msg(world_t *w, MPI_Comm comm, const void *buf, size_t len, int dest, int tag, xfer_t x)
{
    MPI_Request r;
    int done = 0;
    MPI_Isend(buf, (int)len, MPI_BYTE, dest, tag, comm, &r);
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (!done && len <= HIVE__MPI_CTRL_CAP) {
        uint64_t t0 = hive__now_ns();
        do
            MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        while (!done && hive__now_ns() - t0 < SEND_SPIN_NS);
    }
    if (done)
        finish_xfer(w, &x);
    else
        hand_over(w, r, x);
}

/* A control message the caller keeps: small ones go from its buffer with
 * MPI_Send (below every transport's eager limit, so it returns at once),
 * larger ones from a copy. */
static void send_copy(world_t *w, MPI_Comm comm, int dest, int tag, const void *msg, size_t len)
{
    if (len <= SMALL_MSG) {
        MPI_Send(msg, (int)len, MPI_BYTE, dest, tag, comm);
        HIVE__MPI_SENT(msg, len);
        return;
    }
    void *buf = malloc(len);
    if (buf == NULL) {
        MPI_Send(msg, (int)len, MPI_BYTE, dest, tag, comm);
        HIVE__MPI_SENT(msg, len);
        return;
    }
    memcpy(buf, msg, len);
    send_msg(w, comm, buf, len, dest, tag, (xfer_t){ .free_buf = buf });
}

/* A request to dest (TAG_CTRL on comm). One above HIVE__MPI_CTRL_CAP,
 * which the receiver's posted receive cannot take, goes as an M_BIG
 * envelope there and the whole message on dcomm under the request's body
 * tag; the receiver takes the body as it handles the envelope, so requests
 * stay in the order they were matched. owned: msg was malloc'd and is
 * freed here (or when its send completes); else it is the caller's. */
static void send_request(world_t *w, int dest, void *msg, size_t len, bool owned)
{
    if (len <= HIVE__MPI_CTRL_CAP) {
        if (owned && len > SMALL_MSG)
            send_msg(w, w->comm, msg, len, dest, HIVE__MPI_TAG_CTRL, (xfer_t){ .free_buf = msg });
        else {
            send_copy(w, w->comm, dest, HIVE__MPI_TAG_CTRL, msg, len);
            if (owned)
                free(msg);
        }
        return;
    }
    wire_hdr_t h;
    memcpy(&h, msg, sizeof h);
    wire_hdr_t env = { .type = M_BIG, .req = h.req, .size = len };
    MPI_Send(&env, (int)sizeof env, MPI_BYTE, dest, HIVE__MPI_TAG_CTRL, w->comm);
    HIVE__MPI_SENT(&env, sizeof env);
    int tag = hive__mpi_body_tag(w, h.req);
    if (owned)
        send_msg(w, w->dcomm, msg, len, dest, tag, (xfer_t){ .free_buf = msg });
    else
        send_copy(w, w->dcomm, dest, tag, msg, len);
}

static void reply_small(world_t *w, int dest, uint64_t req, int status, uint64_t id)
{
    wire_hdr_t h = { .type = M_REPLY, .status = status, .req = req, .id = id };
    send_copy(w, w->rcomm, dest, hive__mpi_reply_tag(w, req), &h, sizeof h);
}

/* Receive a payload part: on a thread driving its own answer, right here
 * (the header is in, so the data is on its way); on the progress thread,
 * tracked. */
static void recv_data(world_t *w, void *buf, size_t len, int src, int tag, xfer_t x, bool own)
{
    MPI_Request *r;
    if (own || track(w, x, &r) != HIVE_OK) {
        MPI_Recv(buf, (int)len, MPI_BYTE, src, tag, w->dcomm, MPI_STATUS_IGNORE);
        HIVE__MPI_RECEIVED(buf, len);
        finish_xfer(w, &x);
        return;
    }
    MPI_Irecv(buf, (int)len, MPI_BYTE, src, tag, w->dcomm, r);
}

static bool test_xfers(world_t *w)
{
    size_t k = 0;
    bool any = false;
    for (size_t i = 0; i < w->nreqs; i++) {
        int flag = 0;
        MPI_Test(&w->reqs[i], &flag, MPI_STATUS_IGNORE);
        if (flag) {
            finish_xfer(w, &w->xfers[i]);
            any = true;
        } else {
            w->reqs[k] = w->reqs[i];
            w->xfers[k++] = w->xfers[i];
        }
    }
    w->nreqs = k;
    return any;
}

/* Handed-over sends join the tracked ones; a detach request is noted. */
static bool take_handed(world_t *w)
{
    pthread_mutex_lock(&w->qlock);
    handed_t *hd = w->handed;
    w->handed = NULL;
    bool detach = w->detach_asked;
    pthread_mutex_unlock(&w->qlock);
    if (detach && atomic_load_explicit(&w->phase, memory_order_relaxed) == 0)
        atomic_store_explicit(&w->phase, 1, memory_order_relaxed);   /* relaxed: only this thread
                                                    moves the phase before the barrier */
    bool did = hd != NULL;
    while (hd != NULL) {
        handed_t *next = hd->next;
        MPI_Request *r;
        if (track(w, hd->x, &r) != HIVE_OK) {
            MPI_Wait(&hd->req, MPI_STATUS_IGNORE);
            finish_xfer(w, &hd->x);
        } else
            *r = hd->req;
        free(hd);
        hd = next;
    }
    return did;
}

/* ---------------------------------------------------------- pending */

static pend_t **pend_slot(world_t *w, uint64_t req)
{
    pend_t **pp = &w->pend[req & (HIVE__MPI_BUCKETS - 1)];
    while (*pp != NULL && (*pp)->req != req)
        pp = &(*pp)->next;
    return pp;
}

static void pend_add(world_t *w, pend_t *p)
{
    pend_t **head = &w->pend[p->req & (HIVE__MPI_BUCKETS - 1)];
    p->next = *head;
    *head = p;
    w->npend++;
}

/* One freed pending record kept per thread for its next request (a
 * caller making round trips frees one and makes one per call), freed
 * when the thread ends. */
static pthread_key_t pend_key;
static pthread_once_t pend_once = PTHREAD_ONCE_INIT;
static bool pend_key_ok;
static __thread pend_t *pend_spare;

static void pend_key_make(void)
{
    pend_key_ok = pthread_key_create(&pend_key, free) == 0;
}

pend_t *hive__mpi_pend_new(void)
{
    pend_t *p = pend_spare;
    if (p == NULL)
        return hive__calloc(1, sizeof *p);
    pend_spare = NULL;
    pthread_setspecific(pend_key, NULL);
    memset(p, 0, sizeof *p);
    return p;
}

int hive__mpi_keep(world_t *w, hive_ref_t ref, size_t i)
{
    int rc;
    if (hive__id_future(ref.id)) {       /* a slot's future: a pin on the slot */
        if (hive__mpi_fut_count(w, ref.id, HIVE__MPI_FUT_KEEP, &rc))
            return HIVE_OK;
        if (rc == HIVE_EINVAL)
            return hive__fail(rc, "hive_call: argument %zu, future %llu, is an argument of 65,535 calls "
                              "in flight already", i, (unsigned long long)ref.id);
        return hive__fail(HIVE_ENOENT, "hive_call: argument %zu, object %llu, does not exist (never "
                          "created, or released)", i, (unsigned long long)ref.id);
    }
    hive__rcu_lock();                    /* the record must not go while we look */
    hive__obj_t *o = hive__obj_lookup(w->h, ref.id);
    bool actor = o != NULL && o->kind == HIVE__ACTOR;
    bool ok = o != NULL && !actor && hive__obj_pin_live(o);
    hive__rcu_unlock();
    if (actor)
        return hive__fail(HIVE_ESTATE, "hive_call: argument %zu, %llu, is an actor handle, which is "
                          "not counted: pass its id as bytes", i, (unsigned long long)ref.id);
    if (!ok)
        return hive__fail(HIVE_ENOENT, "hive_call: argument %zu, object %llu, does not exist (never "
                          "created, or released)", i, (unsigned long long)ref.id);
    return HIVE_OK;
}

void hive__mpi_unkeep(world_t *w, uint64_t *keep, size_t n)
{
    int rc;
    for (size_t i = 0; i < n; i++)
        if (hive__id_future(keep[i]))
            hive__mpi_fut_count(w, keep[i], HIVE__MPI_FUT_UNPIN, &rc);   /* ours: it cannot fail */
        else
            hive__ref_unpin(w->h, (hive_ref_t){ keep[i] });
    free(keep);
}

void hive__mpi_pend_free(world_t *w, pend_t *p)
{
    hive__mpi_unkeep(w, p->keep, p->nkeep);
    if (pend_spare == NULL) {            /* p->cell is the requester's */
        pthread_once(&pend_once, pend_key_make);
        if (pend_key_ok && pthread_setspecific(pend_key, p) == 0) {
            pend_spare = p;
            return;
        }
    }
    free(p);
}

/* The pending request an answer is for, taken out of the table once its
 * last answer is in (a lookup waits for every rank's); NULL otherwise. */
static pend_t *pend_take(world_t *w, int src, const wire_hdr_t *hdr)
{
    pthread_mutex_lock(&w->plock);
    pend_t **pp = pend_slot(w, hdr->req), *p = *pp;
    if (p != NULL && p->kind == M_LOOKUP) {
        if (hdr->status == HIVE_OK && src < p->found_rank) {
            p->found = hdr->id;
            p->found_rank = src;
        }
        if (--p->waiting > 0)
            p = NULL;
    }
    if (p != NULL) {
        *pp = p->next;
        w->npend--;
    }
    pthread_mutex_unlock(&w->plock);
    return p;
}

static void refuse(world_t *w, pend_t *p)
{
    hive__obj_fail(w->h, p->obj, HIVE_ESHUTDOWN);
    hive__obj_unpin(w->h, p->obj);
    hive__mpi_pend_free(w, p);
}

int hive__mpi_request(world_t *w, int dest, void *msg, size_t len, pend_t *p, bool owned)
{
    pthread_mutex_lock(&w->plock);
    /* acquire: pairs with step_detach's store under the same lock (the lock
     * orders it already; the atomic is for the progress loop's reads) */
    bool late = atomic_load_explicit(&w->phase, memory_order_acquire) >= 2;
    if (!late) {
        p->dest = dest;
        pend_add(w, p);
    }
    pthread_mutex_unlock(&w->plock);
    if (late) {                          /* raced with detach past the barrier */
        if (owned)
            free(msg);
        refuse(w, p);
        return HIVE_OK;                  /* the future says HIVE_ESHUTDOWN */
    }
    if (dest >= 0)
        send_request(w, dest, msg, len, owned);
    else {                               /* to every other rank */
        for (int d = 0; d < w->size; d++)
            if (d != w->rank)
                send_request(w, d, msg, len, false);
        if (owned)
            free(msg);
    }
    /* answers nobody drives are the progress thread's: it naps at most
     * SLEEP_WAIT_NS while requests are out, so only a long sleep is cut
     * short (a caller that waits at once drives its answer itself) */
    hive__mpi_nudge(w);
    return HIVE_OK;
}

void hive__mpi_send(world_t *w, int dest, void *msg, size_t len, bool owned)
{
    send_request(w, dest, msg, len, owned);
    /* as in hive__mpi_request: the caller counted its answer in nfut
     * (seq_cst) before this seq_cst load; idle_wait stores 2 before it
     * reads nfut */
    hive__mpi_nudge(w);
}

/* ---------------------------------------------------------- futures */

/* Give f's record the answer that is in the slot (FUT_DONE or FUT_FAILED,
 * read after an acquire of st), unless someone did. */
static void seal_bytes(world_t *w, hive__obj_t *o, const void *data, size_t size);

static void fut_seal_rec(world_t *w, fut_t *f, hive__obj_t *r, uint32_t st)
{
    /* acq_rel: one of the answer's writer and the record's maker gives it */
    if (atomic_exchange_explicit(&f->sealed, 1, memory_order_acq_rel))
        return;
    if (st == FUT_DONE)
        seal_bytes(w, r, hive__mpi_fut_bytes(f), f->size);
    else
        hive__obj_fail(w->h, r, f->status);
}

hive__obj_t *hive__mpi_fut_rec(world_t *w, fut_t *f)
{
    /* acquire: the record's maker published it with its CAS */
    hive__obj_t *r = atomic_load_explicit(&f->rec, memory_order_acquire);
    if (r != NULL)
        return r;
    hive__obj_t *o;
    if (hive__mpi_placeholder(w, 0, &o) != HIVE_OK)   /* one pin, the slot's */
        return NULL;
    /* seq_cst: against the answer's writer, who stores st and then loads
     * rec (on_fut_reply): either it sees our record, or we see its state */
    if (!atomic_compare_exchange_strong_explicit(&f->rec, &r, o, memory_order_seq_cst, memory_order_acquire)) {
        hive__obj_fail(w->h, o, HIVE_ESTATE);   /* another thread made one first */
        hive__obj_unpin(w->h, o);
        return r;
    }
    uint32_t st = atomic_load_explicit(&f->st, memory_order_seq_cst);
    if (st == FUT_DONE || st == FUT_FAILED)
        fut_seal_rec(w, f, o, st);
    return o;
}

void hive__mpi_fut_free(world_t *w, fut_t *f)
{
    /* relaxed: the last hold's acq_rel ordered every other holder's use */
    hive__obj_t *r = atomic_load_explicit(&f->rec, memory_order_relaxed);
    if (r != NULL)
        hive__obj_unpin(w->h, r);        /* the slot's */
    free(f->heap);                       /* an adopted receive buffer (claimers reset it) */
    /* release: everything above before the slot's next claimer (its CAS acquires) */
    atomic_store_explicit(&f->key, 0, memory_order_release);
}

void hive__mpi_fut_drop(world_t *w, fut_t *f, uint32_t n)
{
    /* acq_rel: every holder's reads of the slot before the one that frees
     * it. The count never goes below 0 (each hold is dropped once), so the
     * subtraction stays out of the generation's bits */
    if (HIVE__MPI_FUT_COUNT(atomic_fetch_sub_explicit(&f->holds, n, memory_order_acq_rel)) == n)
        hive__mpi_fut_free(w, f);
}

bool hive__mpi_fut_count(world_t *w, uint64_t id, int move, int *rc)
{
    fut_t *f = &w->futs[id & (HIVE__MPI_FUTS - 1)];
    uint64_t gen = HIVE__MPI_FUT_GEN(id), next;
    bool user = move == HIVE__MPI_FUT_RETAIN || move == HIVE__MPI_FUT_RELEASE;
    bool take = move == HIVE__MPI_FUT_RETAIN || move == HIVE__MPI_FUT_KEEP || move == HIVE__MPI_FUT_SERVE;
    /* relaxed: a first look; the CAS decides */
    uint64_t hd = atomic_load_explicit(&f->holds, memory_order_relaxed);
    do {
        uint32_t n = HIVE__MPI_FUT_COUNT(hd), users = HIVE__MPI_FUT_USERS(n);
        /* another generation (the slot is a newer future's), or not the
         * hold the move needs: a user's count for a user's move and a
         * call's pin (a free slot's count is 0), any hold but the answer's
         * for a served get's pin, a pin for an unpin */
        bool held = move == HIVE__MPI_FUT_SERVE ? n >= 2 : move == HIVE__MPI_FUT_UNPIN ? n >= HIVE__MPI_FUT_PIN
                    : users >= 2;
        if ((hd & ~(uint64_t)UINT32_MAX) != gen || !held) {
            /* a release once too many, with the layer's pins left: refused */
            *rc = (hd & ~(uint64_t)UINT32_MAX) == gen && move == HIVE__MPI_FUT_RELEASE && n >= HIVE__MPI_FUT_PIN
                  ? HIVE_ESTATE : HIVE_ENOENT;
            return false;
        }
        if (take && (user ? users == HIVE__MPI_FUT_PIN - 2 : n >> 16 == UINT16_MAX)) {
            *rc = HIVE_EINVAL;           /* the part would overflow */
            return false;
        }
        uint32_t step = user ? 2 : HIVE__MPI_FUT_PIN;
        next = take ? hd + step : hd - step;
        /* acq_rel: a release's reads of the slot before the last one's
         * free (which acquires them); a retain publishes nothing but
         * takes the same path */
    } while (!atomic_compare_exchange_weak_explicit(&f->holds, &hd, next, memory_order_acq_rel,
                                                    memory_order_relaxed));
    if (HIVE__MPI_FUT_COUNT(next) == 0)
        hive__mpi_fut_free(w, f);        /* the last hold was ours */
    *rc = HIVE_OK;
    return true;
}

/* Drain a payload that has nowhere to go (its parts are on their way).
 * Its parts must be received whole (Open MPI cannot truncate a message
 * above its eager limit: it faults), and its sender waits until they are:
 * a rank that cannot allocate a scratch part either cannot go on. */
static void recv_data(world_t *w, void *buf, size_t len, int src, int tag, xfer_t x, bool own);
static void drain_payload(world_t *w, size_t size, int src, int tag, bool own)
{
    for (size_t off = 0; off < size; off += HIVE__MPI_CHUNK) {
        size_t len = size - off < HIVE__MPI_CHUNK ? size - off : HIVE__MPI_CHUNK;
        void *scratch = hive__malloc(len);
        if (scratch == NULL)
            HIVE_DIE("cannot allocate %zu bytes to drain a payload part from rank %d that has no "
                     "record to go to: its sender would wait for it forever", len, src);
        recv_data(w, scratch, len, src, tag, (xfer_t){ .free_buf = scratch }, own);
    }
}

static void take_payload(world_t *w, int src, int tag, pend_t *p, const wire_hdr_t *hdr, const char *buf,
                         size_t n, bool own);
static bool own_adopt(const char *buf);

/* The answer to a record-free future's call: hdr, then its inline bytes at
 * data (buf + sizeof *hdr, or a short answer's after its own header). */
static void on_fut_reply(world_t *w, int src, int tag, const wire_hdr_t *hdr, const char *buf, size_t n,
                         const char *data, bool own)
{
    fut_t *f = &w->futs[hdr->req & (HIVE__MPI_FUTS - 1)];
    /* acquire: the claimer's fields (dest, actor, keep), published with key.
     * relaxed st: only the answer's one taker writes it */
    if (atomic_load_explicit(&f->key, memory_order_acquire) != hdr->req ||
        atomic_load_explicit(&f->st, memory_order_relaxed) != FUT_PENDING)
        return;                          /* nobody asked: ignore */
    hive__mpi_unkeep(w, f->keep, f->nkeep);
    f->keep = NULL;
    f->nkeep = 0;
    uint32_t st = FUT_DONE;
    if (hdr->status != HIVE_OK) {
        if (hdr->status == HIVE_EDEAD && f->actor != 0)
            hive__mpi_forget_actor(w, f->actor);
        f->status = hdr->status < 0 && hdr->status >= HIVE_ETOPO ? hdr->status : HIVE_EINVAL;
        st = FUT_FAILED;
    } else if (hdr->size <= HIVE__MPI_INLINE && n - sizeof *hdr < hdr->size) {
        f->status = HIVE_EINVAL;
        st = FUT_FAILED;
    } else if (hdr->size <= HIVE__MPI_FUT_INLINE) {
        memcpy(f->bytes, data, hdr->size);
        f->size = (uint32_t)hdr->size;
    } else if (hdr->size <= HIVE__MPI_INLINE && own_adopt(buf)) {
        /* the waiter's receive buffer, answer and all, becomes the slot's:
         * no record, no payload block, no copy (a 4 KiB answer). Cut to
         * the answer (a shrinking realloc splits the block, no copy), so
         * held futures keep their answers' bytes, not 32 KiB each (4,096
         * slots: at most 128 MiB, outside the store's bound) */
        char *cut = realloc((char *)buf, sizeof *hdr + hdr->size);
        f->heap = cut != NULL ? cut : (char *)buf;
        f->size = (uint32_t)hdr->size;
    } else {                             /* too big for the slot: a record takes it */
        hive__obj_t *r = hive__mpi_fut_rec(w, f);
        if (r == NULL) {
            if (hdr->size > HIVE__MPI_INLINE)
                drain_payload(w, hdr->size, src, tag, own);
            f->status = HIVE_ENOMEM;
            st = FUT_FAILED;
        } else {
            atomic_store_explicit(&f->sealed, 1, memory_order_relaxed);   /* relaxed: st (REC)
                                        tells the record's readers to wait on it instead */
            atomic_fetch_add_explicit(&r->refs, HIVE__PIN, memory_order_relaxed);   /* take_payload's;
                                        relaxed: the slot's pin keeps it */
            /* release: readers of REC find the record (made before) */
            atomic_store_explicit(&f->st, FUT_REC, memory_order_release);
            pend_t tmp = { .kind = M_CALL, .obj = r };
            take_payload(w, src, tag, &tmp, hdr, buf, n, own);
            st = FUT_REC;
        }
    }
    if (st != FUT_REC) {
        /* seq_cst: the bytes and status before it (readers acquire), and
         * against hive__mpi_fut_rec's CAS of rec (a Dekker pair) */
        atomic_store_explicit(&f->st, st, memory_order_seq_cst);
        hive__obj_t *r = atomic_load_explicit(&f->rec, memory_order_seq_cst);
        if (r != NULL)
            fut_seal_rec(w, f, r, st);
    }
    /* release: detach's phase step reads it (acquire) before the barrier */
    atomic_fetch_sub_explicit(&w->nfut, 1, memory_order_release);
    hive__mpi_fut_drop(w, f, 1);         /* the answer's hold */
}

/* ---------------------------------------------------------- serving */

/* Answer req with size bytes at data. hold: the record data belongs to,
 * which a payload above HIVE__MPI_INLINE is sent straight out of (a pin
 * on it per part in flight); NULL: data is gone after the call, so such
 * a payload goes from a copy. */
static void send_bytes(world_t *w, int dest, uint64_t req, const void *data, size_t size, uint64_t id,
                       uint32_t flags, hive__obj_t *hold)
{
    int tag = hive__mpi_reply_tag(w, req);
    size_t inl = size <= HIVE__MPI_INLINE ? size : 0;
    wire_hdr_t h = { .type = M_REPLY, .status = HIVE_OK, .req = req, .size = size, .id = id, .nargs = flags };
    char *copy = NULL;
    if ((req & HIVE__MPI_FUT_BIT) && size <= HIVE__MPI_BARE_MAX && id == 0 && flags == 0) {
        uint64_t bare = 0;               /* a slot's answer of up to 8 bytes: the bytes alone */
        if (size)
            memcpy(&bare, data, size);
        MPI_Send(&bare, (int)size, MPI_BYTE, dest, tag, w->rcomm);
        HIVE__MPI_SENT(&bare, size);
        return;
    }
    if (size <= HIVE__MPI_SHORT_MAX && id == 0 && flags == 0) {   /* the short form (wire_short_t) */
        char buf[sizeof(wire_short_t) + HIVE__MPI_SHORT_MAX];
        wire_short_t s = { .type = M_SHORT, .size = (uint32_t)size, .req = req };
        memcpy(buf, &s, sizeof s);
        if (size)
            memcpy(buf + sizeof s, data, size);
        MPI_Send(buf, (int)(sizeof s + size), MPI_BYTE, dest, tag, w->rcomm);
        HIVE__MPI_SENT(buf, sizeof s + size);
        return;
    }
    if (inl != size && hold == NULL && (copy = malloc(size)) == NULL) {
        reply_small(w, dest, req, HIVE_ENOMEM, 0);
        return;
    }
    if (sizeof h + inl <= SMALL_MSG) {
        char buf[SMALL_MSG];
        memcpy(buf, &h, sizeof h);
        if (inl)
            memcpy(buf + sizeof h, data, inl);
        MPI_Send(buf, (int)(sizeof h + inl), MPI_BYTE, dest, tag, w->rcomm);
        HIVE__MPI_SENT(buf, sizeof h + inl);
    } else {
        char *buf = malloc(sizeof h + inl);
        if (buf == NULL) {
            free(copy);
            reply_small(w, dest, req, HIVE_ENOMEM, 0);
            return;
        }
        memcpy(buf, &h, sizeof h);
        memcpy(buf + sizeof h, data, inl);
        send_msg(w, w->rcomm, buf, sizeof h + inl, dest, tag, (xfer_t){ .free_buf = buf });
    }
    if (inl == size)
        return;
    if (copy != NULL)
        memcpy(copy, data, size);
    for (size_t off = 0; off < size; off += HIVE__MPI_CHUNK) {   /* straight out of the arena */
        size_t n = size - off < HIVE__MPI_CHUNK ? size - off : HIVE__MPI_CHUNK;
        if (hold != NULL)
            atomic_fetch_add_explicit(&hold->refs, HIVE__PIN, memory_order_relaxed);   /* relaxed: we
                                                    hold one */
        /* the copy is freed with its last part */
        bool last = off + n == size;
        send_msg(w, w->dcomm, (copy ? copy : (const char *)data) + off, n, dest, tag,
                 (xfer_t){ .release = hold, .free_buf = copy && last ? copy : NULL });
    }
}

static void send_object(world_t *w, int dest, uint64_t req, hive__obj_t *o, uint64_t id, uint32_t flags)
{
    if (hive__obj_state(o) != HIVE__SEALED) {
        reply_small(w, dest, req, hive__obj_fail_code(o), 0);
        return;
    }
    send_bytes(w, dest, req, o->data, o->size, id, flags, o);
}

/* A served object finished: the thread that finished it (the worker that
 * ran the method, usually) sends the answer; the record is freed later by
 * the progress thread, outside the store's finish path. */
static void on_served_ready(hive__dep_t *dep, bool failed)
{
    (void)failed;
    served_t *s = (served_t *)dep;
    world_t *w = s->w;
    send_object(w, s->src, s->req, s->obj, 0, 0);
    pthread_mutex_lock(&w->qlock);
    s->next = w->ready;
    w->ready = s;
    pthread_mutex_unlock(&w->qlock);
    /* release: the sends above (handed over first) before the count that
     * lets detach finish (step_detach's acquire) */
    atomic_fetch_sub_explicit(&w->nserving, 1, memory_order_release);
}

static void served_free(world_t *w, served_t *s)
{
    if (s->obj)
        hive__obj_unpin(w->h, s->obj);
    for (size_t i = 0; i < s->nfetched; i++)
        hive__obj_unpin(w->h, s->fetched[i]);
    free(s->fetched);
    free(s);
}

static void take_ready(world_t *w)
{
    pthread_mutex_lock(&w->qlock);
    served_t *s = w->ready;
    w->ready = NULL;
    pthread_mutex_unlock(&w->qlock);
    while (s != NULL) {
        served_t *next = s->next;
        served_free(w, s);
        s = next;
    }
}

/* Answer when s->obj finishes (now, if it has). */
static void serve_when_done(world_t *w, served_t *s)
{
    /* relaxed: the progress thread's own count; on_served_ready's release
     * decrement is what detach waits for */
    atomic_fetch_add_explicit(&w->nserving, 1, memory_order_relaxed);
    s->w = w;
    s->dep.ready = on_served_ready;
    if (!hive__obj_add_dep(s->obj, &s->dep)) {
        /* finished already (an object to send, mostly): answer and free
         * the record here, outside the store's finish path, so that our
         * count on the object goes with the answer and not whenever the
         * progress thread next looks (an owner that releases it after its
         * readers got it expects it gone) */
        send_object(w, s->src, s->req, s->obj, 0, 0);
        /* release: as in on_served_ready */
        atomic_fetch_sub_explicit(&w->nserving, 1, memory_order_release);
        served_free(w, s);
    }
}

/* A record-free future of this rank asked for by another (its id passed
 * on as a value, or as a call's argument): its record, with a pin for
 * the caller; NULL if no future holds that id. */
static hive__obj_t *fut_served(world_t *w, uint64_t id, int *why)
{
    fut_t *f = hive__mpi_fut_find(w, id);
    /* a pin of our own while we make its record: the generation is
     * checked in the same CAS (a future released meanwhile, its slot
     * taken by a newer one, is not touched) */
    if (f == NULL || !hive__mpi_fut_count(w, id, HIVE__MPI_FUT_SERVE, why)) {
        *why = HIVE_ENOENT;
        return NULL;
    }
    hive__obj_t *r = hive__mpi_fut_rec(w, f);
    *why = HIVE_ENOMEM;                  /* if r is NULL */
    if (r != NULL)
        atomic_fetch_add_explicit(&r->refs, HIVE__PIN, memory_order_relaxed);   /* relaxed: the
                                                    slot's pin keeps it meanwhile */
    hive__mpi_fut_drop(w, f, HIVE__MPI_FUT_PIN);
    return r;
}

static void serve_get(world_t *w, int src, const wire_hdr_t *hdr)
{
    hive__obj_t *o;
    bool payload, ok;
    int why = HIVE_OK;
    if (hive__id_tag(hdr->id) == (uint32_t)w->rank + 1 && hive__id_future(hdr->id)) {
        o = fut_served(w, hdr->id, &why);
        payload = ok = o != NULL;
    } else {
        hive__rcu_lock();
        o = hive__obj_lookup(w->h, hdr->id);
        payload = o != NULL && (o->kind == HIVE__BLOB || o->kind == HIVE__ARRAY);
        ok = payload && hive__obj_pin_live(o);
        hive__rcu_unlock();
    }
    hive__mpi_count(&w->st_gets_served, 1);
    served_t *s = ok ? calloc(1, sizeof *s) : NULL;
    if (s == NULL) {
        if (ok)
            hive__obj_unpin(w->h, o);
        reply_small(w, src, hdr->req, ok || why == HIVE_ENOMEM ? HIVE_ENOMEM
                                      : payload || o == NULL ? HIVE_ENOENT : HIVE_ESTATE, 0);
        return;
    }
    *s = (served_t){ .src = src, .req = hdr->req, .obj = o };
    serve_when_done(w, s);
}

/* A remote ref argument of a call served here: fetch it into a local
 * placeholder that the actor waits for (a pin for the served record: the
 * method may name it, hive_arg_ref, but the layer holds it). */
static int fetch_arg(world_t *w, uint64_t rid, hive__obj_t **out)
{
    hive__obj_t *o;
    int rc = hive__mpi_placeholder(w, HIVE__PIN, &o);
    if (rc != HIVE_OK)
        return rc;
    pend_t *p = hive__mpi_pend_new();
    wire_hdr_t *h = malloc(sizeof *h);
    if (p == NULL || h == NULL) {
        free(p);
        free(h);
        hive__obj_fail(w->h, o, HIVE_ENOMEM);
        hive__obj_unpin(w->h, o);        /* the request's */
        *out = o;                        /* the call sees a failed argument */
        return HIVE_OK;
    }
    /* relaxed: only uniqueness matters */
    p->req = atomic_fetch_add_explicit(&w->next_req, 1, memory_order_relaxed) + 1;
    p->kind = M_GET;
    p->obj = o;
    *h = (wire_hdr_t){ .type = M_GET, .req = p->req, .id = rid };
    hive__mpi_count(&w->st_fetches, 1);
    *out = o;
    return hive__mpi_request(w, (int)hive__id_tag(rid) - 1, h, sizeof *h, p, true);
}

/* The next long-form argument of a call at *at (a wire_arg_t, then for
 * inline bytes the bytes padded to 8): *a, and *at moved past the
 * wire_arg_t; false if the message ends early or the inline bytes run
 * past it. The caller moves *at past the bytes (*padded). */
static bool next_wire_arg(const char *buf, size_t n, size_t *at, wire_arg_t *a, uint64_t *padded)
{
    if (n - *at < sizeof *a)
        return false;
    memcpy(a, buf + *at, sizeof *a);
    *at += sizeof *a;
    *padded = (a->size + 7) & ~(uint64_t)7;
    return a->ref != 0 || (a->size <= n && *padded <= n - *at);
}

/* Parse a call's arguments; remote refs become local placeholders. */
static int parse_args(world_t *w, const wire_hdr_t *hdr, const char *buf, size_t n, hive_arg_t *args,
                      served_t *s)
{
    size_t at = sizeof *hdr;
    for (uint32_t i = 0; i < hdr->nargs; i++) {
        wire_arg_t a;
        uint64_t padded;
        if (!next_wire_arg(buf, n, &at, &a, &padded))
            return HIVE_EINVAL;
        if (a.ref == 0) {
            args[i] = HIVE_BYTES(buf + at, a.size);
            at += padded;
            continue;
        }
        int tag = (int)hive__id_tag(a.ref);
        if (tag - 1 == w->rank) {
            args[i] = HIVE_REF((hive_ref_t){ a.ref });
            continue;
        }
        if (tag < 1 || tag > w->size)
            return HIVE_ENOENT;
        if (s->fetched == NULL &&        /* the first remote ref: room for every argument */
            (s->fetched = calloc(hdr->nargs, sizeof *s->fetched)) == NULL)
            return HIVE_ENOMEM;
        hive__obj_t *o;
        int rc = fetch_arg(w, a.ref, &o);
        if (rc != HIVE_OK)
            return rc;
        s->fetched[s->nfetched++] = o;
        args[i] = HIVE_REF((hive_ref_t){ o->id });
    }
    return HIVE_OK;
}

/* A short call's arguments (wire_calls_t): where each one's bytes are and
 * how many; false if the message is malformed. */
static bool short_args(const wire_hdr_t *hdr, const char *buf, size_t n, const char **from, uint64_t *sizes)
{
    size_t at = sizeof(wire_calls_t);
    if (hdr->nargs > HIVE__MPI_CALLS_ARGS)
        return false;
    for (uint32_t i = 0; i < hdr->nargs; i++) {
        uint64_t size;
        if (n - at < sizeof size)
            return false;
        memcpy(&size, buf + at, sizeof size);
        at += sizeof size;
        uint64_t padded = (size + 7) & ~(uint64_t)7;
        if (size > n || padded > n - at)
            return false;
        from[i] = buf + at;
        sizes[i] = size;
        at += padded;
    }
    return true;
}

/* The idle worker's shortcut: a call whose arguments are all inline
 * bytes, for an actor whose turn is free, claims that turn here (under
 * poll_lock) and runs after poll_lock is let go (run_in_place): no task
 * record, no result record, no job, the reply sent from what the method
 * returned. False: the call goes the usual way. */
static bool claim_in_place(world_t *w, int src, const wire_hdr_t *hdr, const char *buf, size_t n, bool shortf)
{
    here_t *x = here_slot;
    if (x == NULL || x->a != NULL || hive__self == NULL || hdr->nargs > HERE_MAX_ARGS)
        return false;
    size_t at = sizeof *hdr, total = 0;
    const char *from[HERE_MAX_ARGS];
    if (shortf && !short_args(hdr, buf, n, from, x->sizes))
        return false;                    /* malformed: serve_call says so */
    for (uint32_t i = 0; i < hdr->nargs; i++) {
        if (!shortf) {
            wire_arg_t a;
            uint64_t padded;
            if (!next_wire_arg(buf, n, &at, &a, &padded) || a.ref != 0)
                return false;            /* malformed (serve_call says so) or a ref: the usual way */
            from[i] = buf + at;
            x->sizes[i] = a.size;
            at += padded;
        }
        total += (x->sizes[i] + 15) & ~(uint64_t)15;
    }
    if (total > HERE_MAX_BYTES)
        return false;                    /* big arguments: a record holds them */
    struct hive__actor *a = hive__actor_claim_free(w->h, hdr->id, hdr->method, hive__self->index);
    if (a == NULL)
        return false;
    /* An argument stays where it is in the request buffer if that is not
     * started again before the answer (take_request defers the start while
     * the other receive is started: the same test) and it is 16-byte
     * aligned, as a task record holds it; else it is copied out (a buffer
     * started again before poll_lock goes, or an M_BIG body freed). */
    bool stays = buf >= w->cbuf && buf < w->cbuf + 2 * (size_t)HIVE__MPI_CTRL_CAP && w->ncq > 0;
    for (size_t i = 0, off = 0; i < hdr->nargs; i++) {
        if (stays && ((uintptr_t)from[i] & 15) == 0) {
            x->data[i] = from[i];
            continue;
        }
        memcpy(x->bytes + off, from[i], x->sizes[i]);
        x->data[i] = x->bytes + off;
        off += (x->sizes[i] + 15) & ~(size_t)15;
    }
    x->a = a;
    x->hdr = *hdr;
    x->src = src;
    /* relaxed: only this worker writes it (the poll claim); run_in_place's
     * release store is what detach waits for */
    atomic_store_explicit(&w->in_place, 1, memory_order_relaxed);
    hive__mpi_count_locked(&w->st_calls_served);   /* a gate may count on it */
    hive__mpi_count_locked(&w->st_in_place);
    return true;
}

/* The answer to a call run in place, sent as soon as the method returned
 * (before the actor's turn is given back: hive__actor_run_here). */
typedef struct here_done {
    world_t     *w;
    here_t      *x;
    hive__obj_t *res;
} here_done_t;

static void answer_in_place(void *arg, int rc)
{
    here_done_t *d = arg;
    here_t *x = d->x;
    if (rc == 0)
        send_bytes(d->w, x->src, x->hdr.req, d->res->data ? d->res->data : (const void *)"", d->res->size,
                   0, 0, NULL);
    else
        reply_small(d->w, x->src, x->hdr.req, HIVE_ETASK, 0);
}

/* Run the call claim_in_place took, on this worker, and answer it. */
static void run_in_place(world_t *w, here_t *x)
{
    size_t nargs = x->hdr.nargs;
    _Alignas(hive__task_t) unsigned char tbuf[sizeof(hive__task_t) + HERE_MAX_ARGS * sizeof(hive__targ_t)];
    hive__task_t *t = (hive__task_t *)(void *)tbuf;
    memset(t, 0, sizeof *t + nargs * sizeof(hive__targ_t));
    t->nargs = nargs;
    t->method = x->hdr.method;
    for (size_t i = 0; i < nargs; i++) {
        t->args[i].data = x->data[i];
        t->args[i].size = x->sizes[i];
    }
    hive__obj_t res;
    memset(&res, 0, sizeof res);
    res.kind = HIVE__BLOB;
    /* The method is user code on a worker, as in a job: not serving (a
     * lookup inside it asks every rank), and not counted among the
     * pollers (in_place), so that the progress thread receives meanwhile
     * if the method takes long */
    bool was = serving;
    serving = false;
    here_done_t d = { .w = w, .x = x, .res = &res };
    hive__actor_run_here(x->a, hive__self, x->hdr.method, t, &res, answer_in_place, &d);
    serving = was;
    hive__payload_free(w->h, &res);
    x->a = NULL;
    /* release: the answer's sends (handed over first) before the flag
     * that lets detach finish (step_detach's acquire) */
    atomic_store_explicit(&w->in_place, 0, memory_order_release);
}

static void serve_call(world_t *w, int src, const wire_hdr_t *hdr, const char *buf, size_t n, bool shortf)
{
    if (claim_in_place(w, src, hdr, buf, n, shortf))
        return;
    size_t most = n / sizeof(wire_arg_t);
    served_t *s = calloc(1, sizeof *s);
    hive_arg_t few[8];                   /* the usual call's arguments: no allocation */
    hive_arg_t *args = hdr->nargs > most ? NULL
                       : hdr->nargs <= 8 ? few : calloc(hdr->nargs, sizeof *args);
    int rc = hdr->nargs > most ? HIVE_EINVAL : s && args ? HIVE_OK : HIVE_ENOMEM;
    if (rc == HIVE_OK && shortf) {       /* inline bytes only */
        const char *from[HIVE__MPI_CALLS_ARGS];
        uint64_t sizes[HIVE__MPI_CALLS_ARGS];
        if (!short_args(hdr, buf, n, from, sizes))
            rc = HIVE_EINVAL;
        for (uint32_t i = 0; rc == HIVE_OK && i < hdr->nargs; i++)
            args[i] = HIVE_BYTES(from[i], sizes[i]);
    } else if (rc == HIVE_OK)
        rc = parse_args(w, hdr, buf, n, args, s);
    hive_ref_t res = { 0 };
    hive_opts_t opts = { .priority = hdr->prio };
    if (rc == HIVE_OK)
        rc = hive_call(w->h, (hive_actor_t){ hdr->id }, hdr->method, args, hdr->nargs,
                       hdr->has_prio ? &opts : NULL, &res);
    if (args != few)
        free(args);
    if (rc != HIVE_OK) {
        reply_small(w, src, hdr->req, rc, 0);
        if (s != NULL)
            served_free(w, s);
        return;
    }
    hive__rcu_lock();
    s->obj = hive__obj_lookup(w->h, res.id);   /* our count (from hive_call) keeps it */
    hive__rcu_unlock();
    /* our count becomes a pin (a user of this rank who names the result
     * cannot release it under the answer); relaxed: as hive__ref_pin */
    atomic_fetch_add_explicit(&s->obj->refs, HIVE__PIN - 1, memory_order_relaxed);
    s->src = src;
    s->req = hdr->req;
    hive__mpi_count_locked(&w->st_calls_served);   /* after the push: a gate may count on it */
    serve_when_done(w, s);
}

/* A remote cell's current version: "unchanged" if the requester's copy is
 * of the current seq (hdr->size), else its payload, seq in the id field. */
static void serve_cell(world_t *w, int src, const wire_hdr_t *hdr)
{
    hive_ref_t v;
    uint64_t seq = 0;
    /* subscribe first: a publish after this is pushed, one before it is
     * what the acquire below answers (the requester keeps the newest) */
    uint32_t sub = hdr->nargs == 1 && hive__mpi_subscribe(w, hdr->id, src);
    int rc = hive_cell_acquire(w->h, (hive_ref_t){ hdr->id }, &v, &seq);
    if (rc != HIVE_OK) {
        reply_small(w, src, hdr->req, rc, 0);
        return;
    }
    if (seq == hdr->size) {
        wire_hdr_t h = { .type = M_REPLY, .status = HIVE_OK, .req = hdr->req, .id = seq, .method = 1,
                         .nargs = sub };
        send_copy(w, w->rcomm, src, hive__mpi_reply_tag(w, hdr->req), &h, sizeof h);
    } else {
        hive__rcu_lock();
        hive__obj_t *o = hive__obj_lookup(w->h, v.id);   /* our count keeps it */
        hive__rcu_unlock();
        /* a pin while we send from it (the version's users cannot release
         * it under us); relaxed: as hive__ref_pin */
        atomic_fetch_add_explicit(&o->refs, HIVE__PIN, memory_order_relaxed);
        hive_release(w->h, v);
        send_object(w, src, hdr->req, o, seq, sub);
        hive__obj_unpin(w->h, o);
        return;
    }
    hive_release(w->h, v);
}

/* A version of a cell owned here, published by another rank: a copy of
 * its bytes becomes the cell's new version (pushed to subscribers as any). */
static void serve_publish(world_t *w, int src, const wire_hdr_t *hdr, const char *buf, size_t n)
{
    hive_ref_t v;
    int rc = hdr->size > n - sizeof *hdr ? HIVE_EINVAL
             : hive_put(w->h, buf + sizeof *hdr, hdr->size, &v);
    if (rc == HIVE_OK) {
        hive__ref_pin(w->h, v);          /* ours: no user of this rank releases it under us */
        rc = hive_cell_publish(w->h, (hive_ref_t){ hdr->id }, v);
        hive__ref_unpin(w->h, v);
    }
    reply_small(w, src, hdr->req, rc, 0);
}

static void serve_lookup(world_t *w, int src, const wire_hdr_t *hdr, const char *buf, size_t n)
{
    hive_actor_t a = { 0 };
    int rc = HIVE_EINVAL;
    if (hdr->size >= 1 && hdr->size <= n - sizeof *hdr && buf[sizeof *hdr + hdr->size - 1] == '\0')
        rc = hive_actor_lookup(w->h, buf + sizeof *hdr, &a);
    reply_small(w, src, hdr->req, rc, a.id);
}

/* ---------------------------------------------------------- answers */

static void seal_bytes(world_t *w, hive__obj_t *o, const void *data, size_t size)
{
    int err = HIVE_OK;
    void *p = size ? hive__payload_alloc(w->h, o, HIVE__BLOB, size, hive__current_node(w->h), &err) : NULL;
    if (size && p == NULL) {
        hive__obj_fail(w->h, o, err);
        return;
    }
    if (size)
        memcpy(p, data, size);
    o->size = size;
    o->data = p;
    hive__obj_seal(w->h, o);
}

/* A payload reply: inline bytes, or receives posted into a new payload. */
static void take_payload(world_t *w, int src, int tag, pend_t *p, const wire_hdr_t *hdr, const char *buf,
                         size_t n, bool own)
{
    hive__obj_t *o = p->obj;
    size_t size = hdr->size;
    if (p->kind == M_GET)
        hive__mpi_count(&w->st_fetch_bytes, size);
    if (size <= HIVE__MPI_INLINE) {
        if (n - sizeof *hdr < size)
            hive__obj_fail(w->h, o, HIVE_EINVAL);
        else
            seal_bytes(w, o, buf + sizeof *hdr, size);
        hive__obj_unpin(w->h, o);
        return;
    }
    int err = HIVE_ENOMEM;
    _Atomic int *parts = malloc(sizeof *parts);
    void *data = parts ? hive__payload_alloc(w->h, o, HIVE__BLOB, size, hive__current_node(w->h), &err)
                       : NULL;
    size_t nparts = (size + HIVE__MPI_CHUNK - 1) / HIVE__MPI_CHUNK;
    if (data == NULL) {                      /* drain the data, fail the object */
        free(parts);
        hive__obj_fail(w->h, o, err);
        hive__obj_unpin(w->h, o);
        drain_payload(w, size, src, tag, own);
        return;
    }
    o->size = size;
    o->data = data;
    atomic_init(parts, (int)nparts);
    for (size_t off = 0; off < size; off += HIVE__MPI_CHUNK) {   /* straight into the arena */
        size_t len = size - off < HIVE__MPI_CHUNK ? size - off : HIVE__MPI_CHUNK;
        recv_data(w, (char *)data + off, len, src, tag, (xfer_t){ .seal = o, .parts = parts }, own);
    }
}

static void on_reply(world_t *w, int src, int tag, const wire_hdr_t *hdr, const char *buf, size_t n, bool own)
{
    if (hdr->req & HIVE__MPI_FUT_BIT) {
        on_fut_reply(w, src, tag, hdr, buf, n, buf + sizeof *hdr, own);
        return;
    }
    pend_t *p = pend_take(w, src, hdr);
    if (p == NULL)
        return;                          /* nobody asked, or more answers to come */
    hive__obj_t *o = p->obj;
    if (p->kind == M_LOOKUP) {
        if (p->found)
            seal_bytes(w, o, &p->found, sizeof p->found);
        else
            hive__obj_fail(w->h, o, HIVE_ENOENT);
        hive__obj_unpin(w->h, o);
    } else if (hdr->status != HIVE_OK) {
        if (hdr->status == HIVE_EDEAD && p->actor != 0)
            hive__mpi_forget_actor(w, p->actor);
        hive__obj_fail(w->h, o, hdr->status < 0 && hdr->status >= HIVE_ETOPO ? hdr->status : HIVE_EINVAL);
        hive__obj_unpin(w->h, o);
    } else if (p->kind == M_CELL) {
        p->cell->seq = hdr->id;              /* read by the requester after the seal */
        p->cell->unchanged = hdr->method == 1;
        p->cell->subscribed = hdr->nargs == 1;
        if (hdr->method == 1) {
            seal_bytes(w, o, NULL, 0);
            hive__obj_unpin(w->h, o);
        } else
            take_payload(w, src, tag, p, hdr, buf, n, own);
    } else if (p->kind == M_KILL || p->kind == M_PUBLISH) {
        uint64_t zero = 0;
        seal_bytes(w, o, &zero, sizeof zero);
        hive__obj_unpin(w->h, o);
    } else
        take_payload(w, src, tag, p, hdr, buf, n, own);
    hive__mpi_pend_free(w, p);
}

/* ---------------------------------------------------------- cell pushes
 * A cell owned here pushes each new version to the ranks that acquired it
 * (subscribed by their first acquire): a version that fits SMALL_MSG
 * with the header travels in the push; a larger one is announced, and the
 * subscriber's next acquire fetches it. A push is one message below every
 * transport's eager limit: MPI_Send returns at once, and a push that a
 * detaching rank no longer reads leaves no transfer to wait for. */

bool hive__mpi_subscribe(world_t *w, uint64_t cell, int src)
{
    pthread_mutex_lock(&w->clock);
    cell_subs_t *s = w->subs;
    while (s != NULL && s->cell != cell)
        s = s->next;
    if (s == NULL && (s = calloc(1, sizeof *s + (size_t)w->size * sizeof(int))) != NULL) {
        s->cell = cell;
        s->next = w->subs;
        w->subs = s;
    }
    bool have = false;
    for (int i = 0; s != NULL && i < s->n; i++)
        have |= s->ranks[i] == src;
    if (s != NULL && !have && s->n < w->size)
        s->ranks[s->n++] = src;
    pthread_mutex_unlock(&w->clock);
    return s != NULL;
}

void hive__mpi_push_version(world_t *w, uint64_t cell, hive__obj_t *v, uint64_t seq)
{
    pthread_mutex_lock(&w->clock);
    cell_subs_t *s = w->subs;
    while (s != NULL && s->cell != cell)
        s = s->next;
    int n = s ? s->n : 0;
    int *ranks = n ? malloc((size_t)n * sizeof *ranks) : NULL;
    if (ranks != NULL)
        memcpy(ranks, s->ranks, (size_t)n * sizeof *ranks);
    pthread_mutex_unlock(&w->clock);
    if (ranks == NULL)
        return;
    /* acquire: a rank past its barrier pushes no more (the others may be gone) */
    bool open = atomic_load_explicit(&w->phase, memory_order_acquire) < 2;
    bool whole = open && hive__obj_pin_live(v);
    if (whole && (hive__obj_state(v) != HIVE__SEALED || v->size > SMALL_MSG - sizeof(wire_hdr_t))) {
        hive__obj_unpin(w->h, v);
        whole = false;                   /* announce only: the next acquire fetches it */
    }
    size_t size = whole ? v->size : 0;
    char *buf = open ? malloc(sizeof(wire_hdr_t) + size) : NULL;
    if (buf != NULL) {
        wire_hdr_t h = { .type = M_PUSH, .status = whole ? HIVE_OK : HIVE_ESTATE, .id = cell,
                         .size = size, .method = (uint32_t)seq, .nargs = (uint32_t)(seq >> 32) };
        memcpy(buf, &h, sizeof h);
        if (size)
            memcpy(buf + sizeof h, v->data, size);
        for (int i = 0; i < n; i++)
            MPI_Send(buf, (int)(sizeof h + size), MPI_BYTE, ranks[i], HIVE__MPI_TAG_CTRL, w->comm);
        HIVE__MPI_SENT(buf, sizeof h + size);
        hive__mpi_count(&w->st_pushes, (uint64_t)n);
    }
    free(buf);
    if (whole)
        hive__obj_unpin(w->h, v);
    free(ranks);
}

static void on_push(world_t *w, const wire_hdr_t *hdr, const char *buf, size_t n)
{
    uint64_t seq = (uint64_t)hdr->method | (uint64_t)hdr->nargs << 32;
    hive__obj_t *o = NULL;
    if (hdr->status != HIVE_OK || n - sizeof *hdr < hdr->size ||
        hive__mpi_placeholder(w, HIVE__PIN, &o) != HIVE_OK) {   /* the list's pin and the request's */
        hive__mpi_cell_pushed(w, hdr->id, seq, NULL);   /* stale: the next acquire asks */
        return;
    }
    seal_bytes(w, o, buf + sizeof *hdr, hdr->size);
    hive__obj_unpin(w->h, o);            /* the placeholder's request pin */
    hive__mpi_cell_pushed(w, hdr->id, seq, o);   /* takes the other */
}

static void drop_subs(world_t *w)
{
    while (w->subs != NULL) {
        cell_subs_t *s = w->subs;
        w->subs = s->next;
        free(s);
    }
}

/* ---------------------------------------------------------- receiving */

/* A bare answer (world.h: HIVE__MPI_BARE_MAX): the slot its tag names,
 * if that slot's request went out on this tag; on_fut_reply checks the
 * rest (the key again, the answer still pending). */
static void on_bare(world_t *w, int src, int tag, const char *buf, size_t n, bool own)
{
    uint64_t bits = (uint64_t)(tag - HIVE__MPI_TAG_REPLY0);
    fut_t *f = &w->futs[bits & (HIVE__MPI_FUTS - 1)];
    /* relaxed: on_fut_reply loads it again with acquire */
    uint64_t key = atomic_load_explicit(&f->key, memory_order_relaxed);
    if (!(key & HIVE__MPI_FUT_BIT) || (key & w->tag_mask) != bits)
        return;                          /* nobody asked: ignore */
    wire_hdr_t hdr = { .type = M_REPLY, .status = HIVE_OK, .req = key, .size = n };
    on_fut_reply(w, src, tag, &hdr, NULL, sizeof hdr + n, buf, own);
}

static void handle(world_t *w, int src, int tag, const char *buf, size_t n, bool own)
{
    wire_hdr_t hdr;
    uint32_t type;
    if (tag != HIVE__MPI_TAG_CTRL && n <= HIVE__MPI_BARE_MAX) {
        on_bare(w, src, tag, buf, n, own);
        return;
    }
    if (tag != HIVE__MPI_TAG_CTRL && n >= sizeof(wire_short_t) && (memcpy(&type, buf, sizeof type), type == M_SHORT)) {
        /* a short answer: rebuilt as a long one on the stack (at most
         * HIVE__MPI_SHORT_MAX bytes to copy) */
        wire_short_t s;
        memcpy(&s, buf, sizeof s);
        if (s.size > HIVE__MPI_SHORT_MAX || n - sizeof s < s.size)
            return;                      /* not ours: ignore */
        hdr = (wire_hdr_t){ .type = M_REPLY, .status = HIVE_OK, .req = s.req, .size = s.size };
        if (s.req & HIVE__MPI_FUT_BIT) { /* a slot's (the round trip's): its bytes go in from here */
            on_fut_reply(w, src, tag, &hdr, NULL, sizeof hdr + s.size, buf + sizeof s, own);
            return;
        }
        _Alignas(16) char full[sizeof hdr + HIVE__MPI_SHORT_MAX];
        memcpy(full, &hdr, sizeof hdr);
        if (s.size)
            memcpy(full + sizeof hdr, buf + sizeof s, s.size);
        on_reply(w, src, tag, &hdr, full, sizeof hdr + s.size, own);
        return;
    }
    if (tag == HIVE__MPI_TAG_CTRL && n >= sizeof(wire_calls_t) &&
        (memcpy(&type, buf, sizeof type), (type & 0xff) == M_CALLS)) {
        /* a short call (wire_calls_t): its long header rebuilt, its
         * arguments read where they are */
        wire_calls_t c;
        memcpy(&c, buf, sizeof c);
        hdr = (wire_hdr_t){ .type = M_CALL, .req = c.req, .id = c.actor, .method = c.method,
                            .nargs = c.bits >> 16 & 0xff, .has_prio = c.bits >> 8 & 1,
                            .prio = (int8_t)(uint8_t)(c.bits >> 24), .size = n - sizeof c };
        served_here++;
        serve_call(w, src, &hdr, buf, n, true);
        return;
    }
    if (n < sizeof hdr)
        return;                          /* not ours: ignore */
    memcpy(&hdr, buf, sizeof hdr);
    if (tag != HIVE__MPI_TAG_CTRL) {
        if (hdr.type == M_REPLY)
            on_reply(w, src, tag, &hdr, buf, n, own);
        return;
    }
    if (hdr.type == M_BIG) {             /* the request's whole message follows on dcomm */
        if (hdr.size < sizeof hdr || hdr.size > INT_MAX)
            return;                      /* not ours: ignore */
        char *body = malloc(hdr.size);
        if (body == NULL)
            abort();                     /* a message we cannot take would wedge the world */
        MPI_Recv(body, (int)hdr.size, MPI_BYTE, src, hive__mpi_body_tag(w, hdr.req), w->dcomm,
                 MPI_STATUS_IGNORE);
        HIVE__MPI_RECEIVED(body, hdr.size);
        wire_hdr_t inner;
        memcpy(&inner, body, sizeof inner);
        if (inner.type != M_BIG)
            handle(w, src, tag, body, hdr.size, own);
        free(body);
        return;
    }
    if (hdr.type != M_PUSH)
        served_here++;                   /* a request (a push asks for nothing) */
    switch (hdr.type) {
    case M_CALL:   serve_call(w, src, &hdr, buf, n, false); break;
    case M_GET:    serve_get(w, src, &hdr); break;
    case M_LOOKUP: serve_lookup(w, src, &hdr, buf, n); break;
    case M_KILL:   reply_small(w, src, hdr.req, hive_actor_kill(w->h, (hive_actor_t){ hdr.id }), 0); break;
    case M_CELL:   serve_cell(w, src, &hdr); break;
    case M_PUSH:   on_push(w, &hdr, buf, n); break;
    case M_PUBLISH: serve_publish(w, src, &hdr, buf, n); break;
    default:       break;
    }
}

/* Start request receive i again: it matches after the ones started
 * before it (poll_lock held, or no other thread polls yet). */
static void start_ctrl(world_t *w, int i)
{
    MPI_Start(&w->creq[i]);
    w->cq[w->ncq++] = i;
}

void hive__mpi_open_ctrl(world_t *w)
{
    /* persistent: each post is an MPI_Start, cheaper than an MPI_Irecv */
    for (int i = 0; i < 2; i++) {
        MPI_Recv_init(w->cbuf + (size_t)i * HIVE__MPI_CTRL_CAP, (int)HIVE__MPI_CTRL_CAP, MPI_BYTE,
                      MPI_ANY_SOURCE, HIVE__MPI_TAG_CTRL, w->comm, &w->creq[i]);
        start_ctrl(w, i);
    }
}

void hive__mpi_close_ctrl(world_t *w)
{
    for (int k = 0; k < w->ncq; k++) {   /* nobody polls any more; a late push is dropped */
        MPI_Cancel(&w->creq[w->cq[k]]);
        MPI_Wait(&w->creq[w->cq[k]], MPI_STATUS_IGNORE);
    }
    w->ncq = 0;
    for (int i = 0; i < 2; i++)
        if (w->creq[i] != MPI_REQUEST_NULL)
            MPI_Request_free(&w->creq[i]);
}

/* A request matched into the oldest started receive (poll_lock held):
 * handle it and start the receive again - after the answer, if an idle
 * worker claimed the call to run in place and the other receive is
 * started meanwhile (poll_here). Counted in ctr first: before its answer
 * can be sealed or its call answered, so whoever sees that sees the count.
 * Every handler is done with the buffer when it returns (a call claimed to
 * run in place has its arguments copied out). */
static bool take_request(world_t *w, bool own, _Atomic uint64_t *ctr)
{
    if (w->ncq == 0)
        return false;                    /* closed (detach), or both held by in-place runs */
    int i = w->cq[0], done = 0, count = 0;
    MPI_Status st;
    MPI_Test(&w->creq[i], &done, &st);
    if (!done)
        return false;
    w->cq[0] = w->cq[1];
    w->ncq--;
    hive__mpi_count_locked(ctr);
    MPI_Get_count(&st, MPI_BYTE, &count);
    handle(w, st.MPI_SOURCE, HIVE__MPI_TAG_CTRL, w->cbuf + (size_t)i * HIVE__MPI_CTRL_CAP, (size_t)count,
           own);
    here_t *x = here_slot;
    if (x != NULL && x->a != NULL && w->ncq > 0)
        x->restart = i;                  /* poll_here starts it after the answer */
    else
        start_ctrl(w, i);
    return true;
}

/* Receive a matched answer and handle it; small ones land on the stack.
 * Counted in ctr first, as take_request's. */
static void take_matched(world_t *w, MPI_Message *m, MPI_Status *st, bool own, _Atomic uint64_t *ctr)
{
    hive__mpi_count_locked(ctr);
    int count = 0;
    MPI_Get_count(st, MPI_BYTE, &count);
    uint64_t stack[512];                 /* 4 KiB, 8-aligned */
    char *buf = count <= (int)sizeof stack ? (char *)stack : malloc((size_t)count);
    if (buf == NULL)
        abort();                         /* a message we cannot take would wedge the world */
    MPI_Mrecv(buf, count, MPI_BYTE, m, MPI_STATUS_IGNORE);
    handle(w, st->MPI_SOURCE, st->MPI_TAG, buf, (size_t)count, own);
    if (buf != (char *)stack)
        free(buf);
}

/* Receive what has arrived (the caller holds poll_lock): requests from
 * the posted receive, and (replies) answers nobody receives with a
 * receive of their own, by probe; count them in ctr. Stops after a call
 * claimed to run in place (here_slot). */
static bool poll_incoming(world_t *w, bool own, _Atomic uint64_t *ctr, bool replies)
{
    int n = 0;
    for (; n < 64; n++) {
        if (take_request(w, own, ctr)) {
            if (here_slot != NULL && here_slot->a != NULL) {
                n++;
                break;
            }
            continue;
        }
        int flag = 0;
        MPI_Message m;
        MPI_Status st;
        if (replies)
            MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, w->rcomm, &flag, &m, &st);
        if (!flag)
            break;
        take_matched(w, &m, &st, own, ctr);
    }
    return n > 0;
}

/* poll_lock is taken only by a try: the thread that gets it receives,
 * the others go on (a waiter looks at its own receive, an idle worker
 * at its deques, the progress thread naps), so nobody sleeps on it and it
 * is a flag, not a mutex: its release is a plain store (a mutex's unlock
 * is a locked instruction and a look for sleepers), which a call run in
 * place makes on the round trip before its method. The one wait for it
 * (a request receive started again after an answer) yields between
 * tries. acquire: what the last holder did (the receives' state, the
 * handled messages' effects) before ours; a relaxed look first, so that
 * a thread that cannot have it does not take the line from its holder. */
static inline bool poll_try(world_t *w)
{
    return atomic_load_explicit(&w->poll_lock, memory_order_relaxed) == 0 &&
           atomic_exchange_explicit(&w->poll_lock, 1, memory_order_acquire) == 0;
}

static inline void poll_unlock(world_t *w)
{
    /* release: pairs with poll_try's acquire */
    atomic_store_explicit(&w->poll_lock, 0, memory_order_release);
}

void hive__mpi_poll_once(world_t *w)
{
    if (!poll_try(w))
        return;                          /* another thread receives */
    bool was = serving;
    serving = true;
    poll_incoming(w, true, &w->st_recv_waiting, true);
    serving = was;
    poll_unlock(w);
}

/* One poll by a thread other than the progress thread (poll_lock taken if
 * free: one thread at a time receives, so messages are handled in the
 * order they were matched); true if it handled something. */
static bool poll_here(world_t *w, _Atomic uint64_t *ctr, here_t *x, bool replies)
{
    if (!poll_try(w))
        return false;                    /* another thread polls */
    uint64_t served0 = served_here;
    here_slot = x;
    bool did = poll_incoming(w, true, ctr, replies);
    here_slot = NULL;
    poll_unlock(w);
    if (x != NULL && x->a != NULL)
        run_in_place(w, x);              /* poll_lock is free meanwhile: others receive */
    if (x != NULL && x->restart >= 0) {  /* answered: its request receive goes back */
        while (!poll_try(w))
            sched_yield();               /* its holder handles a message: not for long */
        start_ctrl(w, x->restart);
        poll_unlock(w);
        x->restart = -1;
    }
    if (served_here != served0)   /* relaxed: a hint (IDLE_HOT_NS, the progress thread's sleeps);
                                     after the answer: its clock read is off the round trip */
        atomic_store_explicit(&w->seen_ns, hive__now_ns(), memory_order_relaxed);
    return did;
}

/* Polls that find nothing spin this long (a reply is usually microseconds
 * away) before they yield the CPU between polls (ranks may share cores). */
#define DRIVE_SPIN_NS 50000

/* This thread's buffer for the answers it receives with a posted receive
 * (the largest a reply tag carries: a header and an inline payload),
 * allocated at its first use, freed when the thread ends. */
#define OWN_BUF (sizeof(wire_hdr_t) + HIVE__MPI_INLINE)
static pthread_key_t own_key;
static pthread_once_t own_once = PTHREAD_ONCE_INIT;
static __thread char *own_buf;
static bool own_key_ok;

static void own_key_make(void)
{
    own_key_ok = pthread_key_create(&own_key, free) == 0;
}

static char *own_buffer(void)
{
    if (own_buf == NULL) {
        pthread_once(&own_once, own_key_make);
        char *b = own_key_ok ? malloc(OWN_BUF) : NULL;
        if (b != NULL && pthread_setspecific(own_key, b) != 0) {
            free(b);
            b = NULL;
        }
        own_buf = b;
    }
    return own_buf;
}

/* Is buf this thread's receive buffer (an answer its own posted receive
 * took)? Then it is the caller's from now on (the slot's: it frees it),
 * and the thread's next receive gets a new one. */
static bool own_adopt(const char *buf)
{
    if (buf == NULL || buf != own_buf)
        return false;
    own_buf = NULL;
    if (own_key_ok)
        pthread_setspecific(own_key, NULL);
    return true;
}

/* Polls for other ranks' requests while a receive is posted for one's
 * own answer: every this many looks at it. A poll (a test of the request
 * receive, a probe of rcomm) takes a few times as long as a look, and an
 * answer that lands during one waits for its end: at 16, a waiter spends
 * ~1/6 of its time there (at 4, half). */
#define OWN_POLL_EVERY 16

/* Is the answer drive waits for still to come: obj's, or f's? */
static inline bool awaited(const hive__obj_t *obj, fut_t *f)
{
    /* acquire: the answer's bytes (the slot's, or the record's) come with it */
    return f != NULL ? atomic_load_explicit(&f->st, memory_order_acquire) == FUT_PENDING
                     : hive__obj_state(obj) == HIVE__PENDING;
}

static void drive(world_t *w, hive__obj_t *obj, fut_t *f, int64_t budget_ns, int src, uint64_t req);

void hive__mpi_drive(world_t *w, hive__obj_t *obj, int64_t budget_ns, int src, uint64_t req)
{
    drive(w, obj, NULL, budget_ns, src, req);
}

void hive__mpi_drive_fut(world_t *w, fut_t *f, int64_t budget_ns)
{
    /* relaxed: the slot's fields came with key's acquire (its finder's) */
    drive(w, NULL, f, budget_ns, f->dest, atomic_load_explicit(&f->key, memory_order_relaxed));
}

static void drive(world_t *w, hive__obj_t *obj, fut_t *f, int64_t budget_ns, int src, uint64_t req)
{
    uint64_t t0 = hive__now_ns(), now = t0;
    bool was = serving;
    serving = true;
    /* relaxed: a hint that lets the progress thread sleep meanwhile */
    atomic_fetch_add_explicit(&w->pollers, 1, memory_order_relaxed);
    uint64_t served0 = served_here;
    /* The answer's own receive: posted before anyone probes for it again.
     * A thread that probed the answer already (it is gone from MPI's
     * queue) is handling it: the receive is cancelled once obj finishes. */
    MPI_Request own = MPI_REQUEST_NULL;
    int tag = src >= 0 ? hive__mpi_reply_tag(w, req) : 0;
    char *buf = src >= 0 ? own_buffer() : NULL;
    if (buf != NULL)
        MPI_Irecv(buf, (int)OWN_BUF, MPI_BYTE, src, tag, w->rcomm, &own);
    unsigned looks = 0;
    /* acquire: a stopped world (phase 3) is not polled any more */
    while (awaited(obj, f) && now - t0 < (uint64_t)budget_ns &&
           atomic_load_explicit(&w->phase, memory_order_acquire) != 3) {
        if (own != MPI_REQUEST_NULL) {
            int done = 0, count = 0;
            MPI_Status st;
            MPI_Test(&own, &done, &st);
            if (done) {                  /* own is MPI_REQUEST_NULL now */
                HIVE__MPI_COUNT_MINE(w, recv_own);   /* no poll_lock here: its own cell */
                MPI_Get_count(&st, MPI_BYTE, &count);
                handle(w, src, tag, buf, (size_t)count, true);
                continue;
            }
            if (++looks % OWN_POLL_EVERY != 0)
                continue;                /* the clock is read when polling */
        }
        /* no pause between polls while spinning: a probe takes long
         * enough, and each pause would add to the answer's latency */
        if (!poll_here(w, &w->st_recv_waiting, NULL, true) && now - t0 >= DRIVE_SPIN_NS)
            sched_yield();
        now = hive__now_ns();
    }
    if (own != MPI_REQUEST_NULL) {
        /* out of budget, or another thread took the answer: withdraw the
         * receive; if it matched meanwhile, the answer is ours to handle */
        MPI_Status st;
        int cancelled = 0, count = 0;
        MPI_Cancel(&own);
        MPI_Wait(&own, &st);
        MPI_Test_cancelled(&st, &cancelled);
        if (!cancelled) {
            HIVE__MPI_COUNT_MINE(w, recv_own);
            MPI_Get_count(&st, MPI_BYTE, &count);
            handle(w, src, tag, buf, (size_t)count, true);
        }
    }
    /* relaxed: as above. The progress thread naps while others poll; wake
     * it if this was the last poller and it leaves work behind: its answer
     * (out of budget) or other ranks' requests, which may go on (a caller
     * that only took its answers leaves it be: no wake-up per round trip) */
    if (atomic_fetch_sub_explicit(&w->pollers, 1, memory_order_relaxed) == 1 &&
        (awaited(obj, f) || served_here != served0)) {
        atomic_store_explicit(&w->handoff, 1, memory_order_relaxed);   /* relaxed: the wake
                                                    orders it (seq_cst RMW) */
        hive__mpi_wake(w);
    }
    serving = was;
}

/* The core's idle hook (remote.h): an idle worker polls while it spins. */
bool hive__mpi_idle(void *ctx, int what)
{
    world_t *w = ctx;
    switch (what) {
    case HIVE__IDLE_BEGIN:
        idle_empty = 0;
        /* relaxed: as in hive__mpi_drive */
        atomic_fetch_add_explicit(&w->pollers, 1, memory_order_relaxed);
        return false;
    case HIVE__IDLE_POLL: {
        /* acquire: a stopped world (phase 3) is not polled any more */
        if (atomic_load_explicit(&w->phase, memory_order_acquire) == 3)
            return false;
        bool was = serving;
        serving = true;
        here_t x;                        /* calls may run here, in place */
        x.a = NULL;
        x.restart = -1;
        /* answers nobody receives are looked for every 8th poll: the
         * requests (the posted receive's test) come first */
        bool did = poll_here(w, &w->st_recv_idle, &x, idle_looks++ % 8 == 0);
        serving = was;
        if (did) {
            idle_empty = 0;
            return true;
        }
        /* Traffic within IDLE_HOT_NS: stay awake (yielding the CPU between
         * polls after the first IDLE_FREE_NS), so the next request of a
         * conversation finds this worker running instead of costing two
         * wake-ups (the progress thread's, then this worker's), each a
         * scheduler's round on a loaded machine. The clock is read every
         * 16th empty poll (the verdict is kept in between): a probe is
         * cheaper than a clock read here. relaxed: a hint */
        if (idle_empty++ % 16 == 0) {
            uint64_t now = hive__now_ns(), seen = atomic_load_explicit(&w->seen_ns, memory_order_relaxed);
            idle_hot = seen > now || now - seen < IDLE_HOT_NS ? 1 + (now - seen >= IDLE_FREE_NS) : 0;
        }
        if (idle_hot == 2)
            sched_yield();
        return idle_hot != 0;
    }
    default:
        /* relaxed: as in hive__mpi_drive. The last poller going to sleep
         * hands the polling back to the progress thread at once; one that
         * found work will poll again when it is idle (not worth a wake-up) */
        if (atomic_fetch_sub_explicit(&w->pollers, 1, memory_order_relaxed) == 1 &&
            what == HIVE__IDLE_PARK) {
            atomic_store_explicit(&w->handoff, 1, memory_order_relaxed);   /* relaxed: the wake
                                                    below orders it (seq_cst RMW) */
            hive__mpi_wake(w);
        }
        return false;
    }
}

/* ---------------------------------------------------------- detach */

static bool step_detach(world_t *w)
{
    int phase = atomic_load_explicit(&w->phase, memory_order_relaxed);
    if (phase == 1) {
        pthread_mutex_lock(&w->plock);
        /* seq_cst: a caller counts its future's answer in nfut before it
         * reads closing (remote_call); detach set closing before it asked */
        bool ours_in = w->npend == 0 && atomic_load_explicit(&w->nfut, memory_order_seq_cst) == 0;
        if (ours_in)   /* release: requests made from now on see it under plock and are refused */
            atomic_store_explicit(&w->phase, 2, memory_order_release);
        pthread_mutex_unlock(&w->plock);
        if (ours_in)                         /* our answers are in: tell the world */
            MPI_Ibarrier(w->comm, &w->barrier);
        return ours_in;
    }
    if (phase == 2) {
        int done = 0;
        MPI_Test(&w->barrier, &done, MPI_STATUS_IGNORE);
        if (done)                            /* everyone's answers are in */
            atomic_store_explicit(&w->phase, 4, memory_order_relaxed);   /* relaxed: >= 2 already */
        return done;
    }
    if (phase == 4) {
        /* acquire: pairs with on_served_ready's release; its sends were
         * handed over before, so take_handed below sees them */
        size_t serving = atomic_load_explicit(&w->nserving, memory_order_acquire) +
                         (size_t)atomic_load_explicit(&w->in_place, memory_order_acquire);
        take_handed(w);
        test_xfers(w);
        if (serving == 0 && w->nreqs == 0)
            atomic_store_explicit(&w->phase, 3, memory_order_relaxed);   /* relaxed: this thread's */
    }
    return false;
}

/* ---------------------------------------------------------- the loop */

/* Sleep until kicked or ns passed. deep: a local request cuts it short
 * (hive__mpi_nudge); otherwise only hand-overs, detach and a poller that
 * stops without its answer do. */
static void idle_wait(world_t *w, uint32_t kick, int64_t ns, bool deep)
{
    /* seq_cst: see hive__mpi_wake() and hive__mpi_nudge() */
    atomic_store_explicit(&w->sleeping, deep ? 2 : 1, memory_order_seq_cst);
    bool asked = false;
    if (deep) {                          /* a request may have come without a nudge */
        pthread_mutex_lock(&w->plock);
        asked = w->npend > 0;
        pthread_mutex_unlock(&w->plock);
        asked |= atomic_load_explicit(&w->nfut, memory_order_seq_cst) > 0;   /* see hive__mpi_send */
    }
    if (!asked && atomic_load_explicit(&w->kick, memory_order_seq_cst) == kick) {
        hive__futex_wait(&w->kick, kick, ns);
        hive__mpi_count(&w->st_sleeps, 1);
    }
    atomic_store_explicit(&w->sleeping, 0, memory_order_relaxed);
}

/* Something this rank waits on or owes: answers, transfers, served calls. */
static bool in_flight(world_t *w)
{
    pthread_mutex_lock(&w->plock);
    size_t npend = w->npend;
    pthread_mutex_unlock(&w->plock);
    /* relaxed: a hint for how long to sleep; a wake comes with new work */
    return npend > 0 || atomic_load_explicit(&w->nfut, memory_order_relaxed) > 0 || w->nreqs > 0 ||
           atomic_load_explicit(&w->nserving, memory_order_relaxed) > 0 ||
           atomic_load_explicit(&w->in_place, memory_order_relaxed) != 0;
}

void *hive__mpi_progress(void *arg)
{
    world_t *w = arg;
    serving = true;
    uint64_t last = hive__now_ns();
    int64_t sleep_ns = SLEEP_MIN_NS;
    while (atomic_load_explicit(&w->phase, memory_order_relaxed) != 3) {   /* relaxed: ours */
        /* acquire: the queues' contents come with their mutex; this only
         * decides whether a sleep may start */
        uint32_t kick = atomic_load_explicit(&w->kick, memory_order_acquire);
        bool did = take_handed(w);
        take_ready(w);
        /* relaxed, both: hints. Another thread polls (a caller driving its
         * answer, an idle worker): leave the receiving to it */
        bool others = atomic_load_explicit(&w->pollers, memory_order_relaxed) -
                      atomic_load_explicit(&w->in_place, memory_order_relaxed) > 0;
        if (atomic_exchange_explicit(&w->handoff, 0, memory_order_relaxed))
            sleep_ns = SLEEP_MIN_NS;     /* the polling worker went to sleep: look soon */
        uint64_t served0 = served_here;
        if (!others && poll_try(w)) {
            did |= poll_incoming(w, false, &w->st_recv_progress, true);
            poll_unlock(w);
        }
        did |= test_xfers(w);
        did |= step_detach(w);
        uint64_t now = hive__now_ns();
        int phase = atomic_load_explicit(&w->phase, memory_order_relaxed);
        if (did) {
            last = now;
            sleep_ns = SLEEP_MIN_NS;
            if (served_here != served0)  /* relaxed: a hint for the idle worker (IDLE_HOT_NS) */
                atomic_store_explicit(&w->seen_ns, now, memory_order_relaxed);
        } else if (others && w->nreqs == 0 && phase != 4) {
            /* the other poller receives; it wakes us when it stops without
             * its answer or goes to sleep (a worker) */
            idle_wait(w, kick, SLEEP_MAX_NS, false);
        } else if (now - last < HOT_NS || phase == 4 || w->nreqs > 0) {
            sched_yield();               /* MPI moves big payloads only while polled */
        } else {
            idle_wait(w, kick, sleep_ns, sleep_ns > SLEEP_WAIT_NS);
            /* relaxed: a hint (the pollers' traffic keeps the rank warm) */
            uint64_t seen = atomic_load_explicit(&w->seen_ns, memory_order_relaxed);
            uint64_t recent = seen > last ? seen : last;
            int64_t cap = in_flight(w) ? SLEEP_WAIT_NS
                          : recent > now || now - recent < COLD_NS ? SLEEP_MAX_NS : IDLE_MAX_NS;
            sleep_ns = sleep_ns * 2 < cap ? sleep_ns * 2 : cap;
        }
    }
    return NULL;
}

void hive__mpi_drain(world_t *w)
{
    hive__mpi_close_ctrl(w);
    drop_subs(w);
    take_ready(w);
    take_handed(w);
    while (w->nreqs > 0)
        test_xfers(w);
}
