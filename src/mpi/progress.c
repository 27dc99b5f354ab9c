/*
 * progress.c - the MPI layer's progress thread: the only thread that makes
 * MPI calls for an attached engine (see world.h for the design). It sends
 * what user threads queue, receives and serves other ranks' requests
 * (calls, fetches, kills, name lookups), answers them when their objects
 * finish, fills the local futures when answers arrive, and sleeps when
 * nothing happens.
 */
#include "mpi/world.h"
#include "arena.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/park.h"
#include "util/rcu.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define HOT_NS        1000000    /* poll this long after the last activity */
#define SLEEP_MIN_NS  16000
#define SLEEP_MAX_NS  1000000    /* nothing in flight at all */
#define SLEEP_WAIT_NS 128000     /* only answers to wait for (a long remote call) */

void hive__mpi_mark_progress_thread(void);

/* ------------------------------------------------------------ the queues */

static void wake(world_t *w)
{
    /* seq_cst: the bump is ordered before the read of sleeping, against the
     * thread's "set sleeping, then futex_wait on the old kick" (a Dekker
     * pair: one of the two sees the other) */
    atomic_fetch_add_explicit(&w->kick, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&w->sleeping, memory_order_seq_cst))
        hive__futex_wake(&w->kick, 1);
}

void hive__mpi_push(world_t *w, lreq_t *r)
{
    pthread_mutex_lock(&w->qlock);
    if (w->q_tail)
        w->q_tail->next = r;
    else
        w->q_head = r;
    w->q_tail = r;
    pthread_mutex_unlock(&w->qlock);
    wake(w);
}

void hive__mpi_ready(world_t *w, served_t *s)
{
    pthread_mutex_lock(&w->qlock);
    s->next = w->ready;
    w->ready = s;
    pthread_mutex_unlock(&w->qlock);
    wake(w);
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

static void isend(world_t *w, const void *buf, size_t len, int dest, int tag, xfer_t x)
{
    MPI_Request *r;
    if (track(w, x, &r) != HIVE_OK) {   /* out of memory: send blocking */
        MPI_Send(buf, (int)len, MPI_BYTE, dest, tag, w->comm);
        free(x.free_buf);
        if (x.release)
            hive__obj_release(w->h, x.release);
        return;
    }
    MPI_Isend(buf, (int)len, MPI_BYTE, dest, tag, w->comm, r);
}

static void finish_xfer(world_t *w, xfer_t *x)
{
    free(x->free_buf);
    if (x->release)
        hive__obj_release(w->h, x->release);
    /* acq_rel: the last part's receiver sees every other part's bytes */
    if (x->seal && atomic_fetch_sub_explicit(x->parts, 1, memory_order_acq_rel) == 1) {
        free(x->parts);
        hive__obj_seal(w->h, x->seal);
        hive__obj_release(w->h, x->seal);   /* the request's count */
    }
}

static void irecv(world_t *w, void *buf, size_t len, int src, xfer_t x)
{
    MPI_Request *r;
    if (track(w, x, &r) != HIVE_OK) {   /* out of memory: receive blocking */
        MPI_Recv(buf, (int)len, MPI_BYTE, src, HIVE__MPI_TAG_DATA, w->comm, MPI_STATUS_IGNORE);
        finish_xfer(w, &x);
        return;
    }
    MPI_Irecv(buf, (int)len, MPI_BYTE, src, HIVE__MPI_TAG_DATA, w->comm, r);
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

static void send_copy(world_t *w, int dest, const void *msg, size_t len)
{
    void *buf = malloc(len);
    if (buf == NULL) {
        MPI_Send(msg, (int)len, MPI_BYTE, dest, HIVE__MPI_TAG_CTRL, w->comm);
        return;
    }
    memcpy(buf, msg, len);
    isend(w, buf, len, dest, HIVE__MPI_TAG_CTRL, (xfer_t){ .free_buf = buf });
}

static void reply_small(world_t *w, int dest, uint64_t req, int status, uint64_t id)
{
    wire_hdr_t h = { .type = M_REPLY, .status = status, .req = req, .id = id };
    send_copy(w, dest, &h, sizeof h);
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

static void pend_free(world_t *w, pend_t *p)
{
    for (size_t i = 0; i < p->nkeep; i++)
        hive_release(w->h, (hive_ref_t){ p->keep[i] });
    free(p->keep);
    free(p);
}

/* Queued local requests go out, in queue order. */
static bool take_local(world_t *w)
{
    pthread_mutex_lock(&w->qlock);
    lreq_t *r = w->q_head;
    w->q_head = w->q_tail = NULL;
    pthread_mutex_unlock(&w->qlock);
    bool did = r != NULL;
    while (r != NULL) {
        lreq_t *next = r->next;
        if (r->kind == 0) {
            w->phase = w->phase ? w->phase : 1;
        } else if (w->phase >= 2) {      /* raced with detach past the barrier: refuse */
            hive__obj_fail(w->h, r->pend->obj, HIVE_ESHUTDOWN);
            hive__obj_release(w->h, r->pend->obj);
            pend_free(w, r->pend);
            free(r->msg);
        } else if (r->dest >= 0) {
            pend_add(w, r->pend);
            isend(w, r->msg, r->len, r->dest, HIVE__MPI_TAG_CTRL, (xfer_t){ .free_buf = r->msg });
        } else {                         /* every other rank */
            pend_add(w, r->pend);
            for (int d = 0; d < w->size; d++)
                if (d != w->rank)
                    send_copy(w, d, r->msg, r->len);
            free(r->msg);
        }
        free(r);
        r = next;
    }
    return did;
}

/* ---------------------------------------------------------- serving */

static void send_object(world_t *w, int dest, uint64_t req, hive__obj_t *o, uint64_t id)
{
    if (hive__obj_state(o) != HIVE__SEALED) {
        reply_small(w, dest, req, hive__obj_fail_code(o), 0);
        return;
    }
    size_t size = o->size, inl = size <= HIVE__MPI_INLINE ? size : 0;
    wire_hdr_t h = { .type = M_REPLY, .status = HIVE_OK, .req = req, .size = size, .id = id };
    char *buf = malloc(sizeof h + inl);
    if (buf == NULL) {
        reply_small(w, dest, req, HIVE_ENOMEM, 0);
        return;
    }
    memcpy(buf, &h, sizeof h);
    if (inl)
        memcpy(buf + sizeof h, o->data, inl);
    isend(w, buf, sizeof h + inl, dest, HIVE__MPI_TAG_CTRL, (xfer_t){ .free_buf = buf });
    if (inl == size)
        return;
    for (size_t off = 0; off < size; off += HIVE__MPI_CHUNK) {   /* straight out of the arena */
        size_t n = size - off < HIVE__MPI_CHUNK ? size - off : HIVE__MPI_CHUNK;
        atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);   /* relaxed: we hold one */
        isend(w, (char *)o->data + off, n, dest, HIVE__MPI_TAG_DATA, (xfer_t){ .release = o });
    }
}

static void on_served_ready(hive__dep_t *dep, bool failed)
{
    (void)failed;
    served_t *s = (served_t *)dep;
    hive__mpi_ready(s->w, s);
}

static void served_free(world_t *w, served_t *s)
{
    if (s->obj)
        hive__obj_release(w->h, s->obj);
    for (size_t i = 0; i < s->nfetched; i++)
        hive__obj_release(w->h, s->fetched[i]);
    free(s->fetched);
    free(s);
}

static bool take_ready(world_t *w)
{
    pthread_mutex_lock(&w->qlock);
    served_t *s = w->ready;
    w->ready = NULL;
    pthread_mutex_unlock(&w->qlock);
    bool did = s != NULL;
    while (s != NULL) {
        served_t *next = s->next;
        send_object(w, s->src, s->req, s->obj, 0);
        served_free(w, s);
        w->nserving--;
        s = next;
    }
    return did;
}

/* Answer when s->obj finishes (now, if it has). */
static void serve_when_done(world_t *w, served_t *s)
{
    w->nserving++;
    s->w = w;
    s->dep.ready = on_served_ready;
    if (!hive__obj_add_dep(s->obj, &s->dep))
        hive__mpi_ready(w, s);
}

static void serve_get(world_t *w, int src, const wire_hdr_t *hdr)
{
    hive__rcu_lock();
    hive__obj_t *o = hive__obj_lookup(w->h, hdr->id);
    bool payload = o != NULL && (o->kind == HIVE__BLOB || o->kind == HIVE__ARRAY);
    bool ok = payload && hive__obj_retain_live(o);
    hive__rcu_unlock();
    hive__mpi_count(&w->st_gets_served, 1);
    served_t *s = ok ? calloc(1, sizeof *s) : NULL;
    if (s == NULL) {
        if (ok)
            hive__obj_release(w->h, o);
        reply_small(w, src, hdr->req, ok ? HIVE_ENOMEM : payload || o == NULL ? HIVE_ENOENT : HIVE_ESTATE, 0);
        return;
    }
    *s = (served_t){ .src = src, .req = hdr->req, .obj = o };
    serve_when_done(w, s);
}

/* A remote ref argument of a call served here: fetch it into a local
 * placeholder that the actor waits for. */
static int fetch_arg(world_t *w, uint64_t rid, hive__obj_t **out)
{
    hive__obj_t *o;
    int rc = hive__mpi_placeholder(w, &o);
    if (rc != HIVE_OK)
        return rc;
    pend_t *p = calloc(1, sizeof *p);
    if (p == NULL) {
        hive__obj_fail(w->h, o, HIVE_ENOMEM);
        hive__obj_release(w->h, o);
        *out = o;                        /* the call sees a failed argument */
        return HIVE_OK;
    }
    /* relaxed: only uniqueness matters */
    p->req = atomic_fetch_add_explicit(&w->next_req, 1, memory_order_relaxed) + 1;
    p->kind = M_GET;
    p->obj = o;
    pend_add(w, p);
    wire_hdr_t h = { .type = M_GET, .req = p->req, .id = rid };
    send_copy(w, (int)hive__id_tag(rid) - 1, &h, sizeof h);
    hive__mpi_count(&w->st_fetches, 1);
    *out = o;
    return HIVE_OK;
}

/* Parse a call's arguments; remote refs become local placeholders. */
static int parse_args(world_t *w, const wire_hdr_t *hdr, const char *buf, size_t n, hive_arg_t *args,
                      served_t *s)
{
    size_t at = sizeof *hdr;
    for (uint32_t i = 0; i < hdr->nargs; i++) {
        wire_arg_t a;
        if (n - at < sizeof a)
            return HIVE_EINVAL;
        memcpy(&a, buf + at, sizeof a);
        at += sizeof a;
        if (a.ref == 0) {
            uint64_t padded = (a.size + 7) & ~(uint64_t)7;
            if (a.size > n || padded > n - at)
                return HIVE_EINVAL;
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
        hive__obj_t *o;
        int rc = fetch_arg(w, a.ref, &o);
        if (rc != HIVE_OK)
            return rc;
        s->fetched[s->nfetched++] = o;
        args[i] = HIVE_REF((hive_ref_t){ o->id });
    }
    return HIVE_OK;
}

static void serve_call(world_t *w, int src, const wire_hdr_t *hdr, const char *buf, size_t n)
{
    size_t most = n / sizeof(wire_arg_t);
    served_t *s = calloc(1, sizeof *s);
    hive_arg_t *args = hdr->nargs <= most ? calloc(hdr->nargs + 1, sizeof *args) : NULL;
    if (s != NULL)
        s->fetched = hdr->nargs <= most ? calloc(hdr->nargs + 1, sizeof *s->fetched) : NULL;
    int rc = hdr->nargs > most ? HIVE_EINVAL : s && args && s->fetched ? HIVE_OK : HIVE_ENOMEM;
    if (rc == HIVE_OK)
        rc = parse_args(w, hdr, buf, n, args, s);
    hive_ref_t res = { 0 };
    hive_opts_t opts = { .priority = hdr->prio };
    if (rc == HIVE_OK)
        rc = hive_call(w->h, (hive_actor_t){ hdr->id }, hdr->method, args, hdr->nargs,
                       hdr->has_prio ? &opts : NULL, &res);
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
    s->src = src;
    s->req = hdr->req;
    hive__mpi_count(&w->st_calls_served, 1);   /* after the push: a gate may count on it */
    serve_when_done(w, s);
}

/* A remote cell's current version: "unchanged" if the requester's copy is
 * of the current seq (hdr->size), else its payload, seq in the id field. */
static void serve_cell(world_t *w, int src, const wire_hdr_t *hdr)
{
    hive_ref_t v;
    uint64_t seq = 0;
    int rc = hive_cell_acquire(w->h, (hive_ref_t){ hdr->id }, &v, &seq);
    if (rc != HIVE_OK) {
        reply_small(w, src, hdr->req, rc, 0);
        return;
    }
    if (seq == hdr->size) {
        wire_hdr_t h = { .type = M_REPLY, .status = HIVE_OK, .req = hdr->req, .id = seq, .method = 1 };
        send_copy(w, src, &h, sizeof h);
    } else {
        hive__rcu_lock();
        hive__obj_t *o = hive__obj_lookup(w->h, v.id);   /* our count keeps it */
        hive__rcu_unlock();
        send_object(w, src, hdr->req, o, seq);
    }
    hive_release(w->h, v);
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
static void take_payload(world_t *w, int src, pend_t *p, const wire_hdr_t *hdr, const char *buf, size_t n)
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
        hive__obj_release(w->h, o);
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
        hive__obj_release(w->h, o);
        for (size_t off = 0; off < size; off += HIVE__MPI_CHUNK) {
            size_t len = size - off < HIVE__MPI_CHUNK ? size - off : HIVE__MPI_CHUNK;
            void *scratch = malloc(len);
            irecv(w, scratch, len, src, (xfer_t){ .free_buf = scratch });
        }
        return;
    }
    o->size = size;
    o->data = data;
    atomic_init(parts, (int)nparts);
    for (size_t off = 0; off < size; off += HIVE__MPI_CHUNK) {   /* straight into the arena */
        size_t len = size - off < HIVE__MPI_CHUNK ? size - off : HIVE__MPI_CHUNK;
        irecv(w, (char *)data + off, len, src, (xfer_t){ .seal = o, .parts = parts });
    }
}

static void on_reply(world_t *w, int src, const wire_hdr_t *hdr, const char *buf, size_t n)
{
    pend_t **pp = pend_slot(w, hdr->req), *p = *pp;
    if (p == NULL)
        return;                          /* nobody asked: ignore */
    if (p->kind == M_LOOKUP) {
        if (hdr->status == HIVE_OK && src < p->found_rank) {
            p->found = hdr->id;
            p->found_rank = src;
        }
        if (--p->waiting > 0)
            return;
    }
    *pp = p->next;
    w->npend--;
    hive__obj_t *o = p->obj;
    if (p->kind == M_LOOKUP) {
        if (p->found)
            seal_bytes(w, o, &p->found, sizeof p->found);
        else
            hive__obj_fail(w->h, o, HIVE_ENOENT);
        hive__obj_release(w->h, o);
    } else if (hdr->status != HIVE_OK) {
        hive__obj_fail(w->h, o, hdr->status < 0 && hdr->status >= HIVE_ETOPO ? hdr->status : HIVE_EINVAL);
        hive__obj_release(w->h, o);
    } else if (p->kind == M_CELL) {
        p->cell->seq = hdr->id;              /* read by the requester after the seal */
        p->cell->unchanged = hdr->method == 1;
        if (p->cell->unchanged) {
            seal_bytes(w, o, NULL, 0);
            hive__obj_release(w->h, o);
        } else
            take_payload(w, src, p, hdr, buf, n);
    } else if (p->kind == M_KILL) {
        uint64_t zero = 0;
        seal_bytes(w, o, &zero, sizeof zero);
        hive__obj_release(w->h, o);
    } else
        take_payload(w, src, p, hdr, buf, n);
    pend_free(w, p);
}

/* ---------------------------------------------------------- receiving */

static void handle(world_t *w, int src, const char *buf, size_t n)
{
    wire_hdr_t hdr;
    if (n < sizeof hdr)
        return;                          /* not ours: ignore */
    memcpy(&hdr, buf, sizeof hdr);
    switch (hdr.type) {
    case M_CALL:   serve_call(w, src, &hdr, buf, n); break;
    case M_GET:    serve_get(w, src, &hdr); break;
    case M_LOOKUP: serve_lookup(w, src, &hdr, buf, n); break;
    case M_KILL:   reply_small(w, src, hdr.req, hive_actor_kill(w->h, (hive_actor_t){ hdr.id }), 0); break;
    case M_REPLY:  on_reply(w, src, &hdr, buf, n); break;
    case M_CELL:   serve_cell(w, src, &hdr); break;
    default:       break;
    }
}

static bool poll_incoming(world_t *w)
{
    bool did = false;
    for (int i = 0; i < 64; i++) {
        int flag = 0, count = 0;
        MPI_Message m;
        MPI_Status st;
        MPI_Improbe(MPI_ANY_SOURCE, HIVE__MPI_TAG_CTRL, w->comm, &flag, &m, &st);
        if (!flag)
            break;
        MPI_Get_count(&st, MPI_BYTE, &count);
        char *buf = malloc(count > 0 ? (size_t)count : 1);
        if (buf == NULL)
            abort();                     /* a message we cannot take would wedge the world */
        MPI_Mrecv(buf, count, MPI_BYTE, &m, MPI_STATUS_IGNORE);
        handle(w, st.MPI_SOURCE, buf, (size_t)count);
        free(buf);
        did = true;
    }
    return did;
}

/* ---------------------------------------------------------- detach */

static bool step_detach(world_t *w)
{
    if (w->phase == 1 && w->npend == 0) {    /* our answers are in: tell the world */
        MPI_Ibarrier(w->comm, &w->barrier);
        w->phase = 2;
        return true;
    }
    if (w->phase == 2) {
        int done = 0;
        MPI_Test(&w->barrier, &done, MPI_STATUS_IGNORE);
        if (done) {
            w->phase = 4;                /* everyone's answers are in */
            return true;
        }
    }
    if (w->phase == 4 && w->nreqs == 0 && w->nserving == 0)
        w->phase = 3;
    return false;
}

/* ---------------------------------------------------------- the loop */

static void idle_wait(world_t *w, uint32_t kick, int64_t ns)
{
    /* seq_cst: see wake() */
    atomic_store_explicit(&w->sleeping, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&w->kick, memory_order_seq_cst) == kick)
        hive__futex_wait(&w->kick, kick, ns);
    atomic_store_explicit(&w->sleeping, 0, memory_order_relaxed);
    hive__mpi_count(&w->st_sleeps, 1);
}

void *hive__mpi_progress(void *arg)
{
    world_t *w = arg;
    hive__mpi_mark_progress_thread();
    uint64_t last = hive__now_ns();
    int64_t sleep_ns = SLEEP_MIN_NS;
    while (w->phase != 3) {
        /* acquire: the queue's contents come with the mutex; this only
         * decides whether a sleep may start */
        uint32_t kick = atomic_load_explicit(&w->kick, memory_order_acquire);
        bool did = take_local(w);
        did |= take_ready(w);
        did |= poll_incoming(w);
        did |= test_xfers(w);
        did |= step_detach(w);
        uint64_t now = hive__now_ns();
        if (did) {
            last = now;
            sleep_ns = SLEEP_MIN_NS;
        } else if (now - last < HOT_NS || w->phase == 4 || w->nreqs > 0) {
            sched_yield();               /* MPI moves big payloads only while polled */
        } else {
            idle_wait(w, kick, sleep_ns);
            int64_t cap = w->npend > 0 ? SLEEP_WAIT_NS : SLEEP_MAX_NS;
            sleep_ns = sleep_ns * 2 < cap ? sleep_ns * 2 : cap;
        }
    }
    return NULL;
}
