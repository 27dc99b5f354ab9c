/*
 * _hive.c - the CPython extension behind `import hive`: the Python types over
 * an engine, its objects (Ref, Future), the buffers that expose hive's memory
 * without a copy (Buffer: sealed payloads, created objects, shared arrays),
 * cells, replay buffers and C libraries loaded with dlopen (Library, Actor);
 * the release of the GIL around every call that can block, the mapping of
 * HIVE_E* codes to exceptions carrying hive_last_error()'s sentence, and the
 * DLPack capsule. numpy is not needed here: the package's __init__.py turns
 * Buffers into ndarrays through the buffer protocol.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "hive.h"

/* ------------------------------------------------------------------ errors */

static PyObject *Error, *StoreFull, *Timeout, *Cancelled, *TaskFailed, *ActorDead, *ShutDown;

static PyObject *exception_for(int code)
{
    switch (code) {
    case HIVE_EFULL:     return StoreFull;
    case HIVE_ETIMEDOUT: return Timeout;
    case HIVE_ECANCELED: return Cancelled;
    case HIVE_ETASK:     return TaskFailed;
    case HIVE_EDEAD:     return ActorDead;
    case HIVE_ESHUTDOWN: return ShutDown;
    case HIVE_EINVAL:    return PyExc_ValueError;
    case HIVE_ENOMEM:    return PyExc_MemoryError;
    default:             return Error;
    }
}

/* Raise the exception of @code with hive's sentence (read on this thread,
 * right after the failing call) and the code as .code. Returns NULL. */
static PyObject *raise_hive(int code, const char *what)
{
    const char *sentence = hive_last_error();
    PyObject *type = exception_for(code);
    PyObject *msg = PyUnicode_FromFormat("%s: %s [%s]", what,
                                         sentence && *sentence ? sentence : hive_strerror(code),
                                         hive_strerror(code));
    if (!msg)
        return NULL;
    PyObject *exc = PyObject_CallOneArg(type, msg);
    Py_DECREF(msg);
    if (!exc)
        return NULL;
    PyObject *c = PyLong_FromLong(code);
    if (c) {
        PyObject_SetAttrString(exc, "code", c);
        Py_DECREF(c);
    }
    PyErr_Clear();
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

/* seconds (None: forever) -> nanoseconds; -2 with ValueError/TypeError set */
static int64_t timeout_ns_of(PyObject *timeout)
{
    if (!timeout || timeout == Py_None)
        return HIVE_FOREVER;
    double s = PyFloat_AsDouble(timeout);
    if (s == -1.0 && PyErr_Occurred())
        return -2;
    if (!(s >= 0) || !isfinite(s)) {
        PyErr_Format(PyExc_ValueError, "timeout must be None or finite seconds >= 0, not %R", timeout);
        return -2;
    }
    if (s > 9.2e9)
        return HIVE_FOREVER;
    return (int64_t)(s * 1e9);
}

/* ------------------------------------------------------------------ engine */

typedef struct ReplayObj ReplayObj;
typedef struct EnvPoolObj EnvPoolObj;
typedef struct RefObj RefObj;

typedef struct {
    PyObject_HEAD
    hive_t    *h;          /* NULL once shut down */
    int        closing;    /* close() was called: no new calls start */
    int        stopping;   /* engine_shutdown_now is freeing pools and buffers */
    Py_ssize_t nbuffers;   /* live Buffers, and calls that run without the GIL
                              (env pool steps, pool frees, replay samples):
                              shutdown waits for the last one */
    ReplayObj *replays;    /* live replay buffers, freed before shutdown */
    EnvPoolObj *envpools;  /* live env pools, freed before shutdown */
    RefObj     *viewing;   /* Refs keeping a get's memoryview for reuse, the last used first */
    RefObj     *viewing_last;   /* (close() drops them all, a new one beyond KEPT_VIEWS the last) */
    Py_ssize_t  nviewing;
    PyObject   *locals;    /* capsules of worker-local defs' callables, freed after shutdown */
    char      *topology, *trace_path;
} EngineObj;

struct ReplayObj {
    PyObject_HEAD
    EngineObj     *engine;
    hive_replay_t *rb;
    size_t         item_size;
    int            inflight;   /* samples running without the GIL */
    int            closing;    /* close() was called while samples ran: the last one frees */
    ReplayObj     *next, *prev;
};

static PyTypeObject EngineType, RefType, FutureType, PayloadType, BufferType, CellType, ReplayType,
    LibraryType, ActorType, EnvPoolType, LocalType;

static void replay_unlink_free(ReplayObj *r)
{
    EngineObj *e = r->engine;
    if (r->rb) {
        hive_replay_free(r->rb);
        r->rb = NULL;
    }
    if (r->prev)
        r->prev->next = r->next;
    else if (e && e->replays == r)
        e->replays = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->next = r->prev = NULL;
}

/* free every env pool and replay buffer, then stop the engine with the GIL
 * released. An env pool's free releases the GIL too, and meanwhile another
 * thread may close a pool of its own (counted in nbuffers while it frees):
 * then the engine's stop is left to the end of that free (buffer_gone). */
static void envpool_unlink_free(EnvPoolObj *p);

static void ref_drop_views(EngineObj *e);

static void engine_shutdown_now(EngineObj *e)
{
    if (!e->h || e->stopping)
        return;
    e->stopping = 1;
    while (e->envpools)
        envpool_unlink_free(e->envpools);
    while (e->replays)
        replay_unlink_free(e->replays);
    e->stopping = 0;
    if (e->nbuffers > 0)
        return;
    hive_t *h = e->h;
    e->h = NULL;
    Py_BEGIN_ALLOW_THREADS
    hive_shutdown(h);
    Py_END_ALLOW_THREADS
}

/* the engine for a new call: ShutDown once close() was called */
static hive_t *engine_live(EngineObj *e)
{
    if (!e->h || e->closing) {
        PyErr_SetString(ShutDown, "the engine is closed");
        return NULL;
    }
    return e->h;
}

/* one of nbuffers ended: the engine stops if close() was called and it was the last */
static void buffer_gone(EngineObj *e)
{
    if (--e->nbuffers == 0 && e->closing)
        engine_shutdown_now(e);
}

static int engine_init(EngineObj *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"workers", "store_bytes", "topology", "trace_path", "pin", NULL};
    long long workers = 0, store = 0;
    const char *topo = NULL, *trace = NULL;
    int pin = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|LLzzp", kwlist, &workers, &store, &topo, &trace, &pin))
        return -1;
    if (self->h) {
        PyErr_SetString(PyExc_TypeError, "Engine.__init__ called twice");
        return -1;
    }
    if (workers < 0 || workers > 4096) {
        PyErr_Format(PyExc_ValueError, "workers must be 0 (one per core) .. 4096, not %lld", workers);
        return -1;
    }
    if (store < 0) {
        PyErr_Format(PyExc_ValueError, "store_bytes must be >= 0, not %lld", store);
        return -1;
    }
    self->topology = topo ? strdup(topo) : NULL;
    self->trace_path = trace ? strdup(trace) : NULL;
    hive_config_t cfg = {
        .workers = (unsigned)workers, .store_bytes = (size_t)store, .no_pin = !pin,
        .topology = self->topology, .trace_path = self->trace_path,
    };
    hive_t *h = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = hive_init(&cfg, &h);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        raise_hive(rc, "Engine");
        return -1;
    }
    self->h = h;
    return 0;
}

static void engine_dealloc(EngineObj *self)
{
    engine_shutdown_now(self);
    Py_CLEAR(self->locals);
    free(self->topology);
    free(self->trace_path);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *engine_close(EngineObj *self, PyObject *Py_UNUSED(ignored))
{
    self->closing = 1;
    ref_drop_views(self);
    if (self->nbuffers == 0)
        engine_shutdown_now(self);
    Py_RETURN_NONE;
}

static PyObject *engine_enter(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(self);
}

static PyObject *engine_exit(EngineObj *self, PyObject *args)
{
    (void)args;
    return engine_close(self, NULL);
}

static PyObject *engine_stats(EngineObj *self, PyObject *Py_UNUSED(ignored))
{
    hive_t *h = engine_live(self);
    if (!h)
        return NULL;
    hive_store_stats_t s;
    int rc = hive_store_stats(h, &s);
    if (rc < 0)
        return raise_hive(rc, "stats");
    return Py_BuildValue("{s:n,s:n,s:K,s:n}", "capacity", (Py_ssize_t)s.capacity, "used",
                         (Py_ssize_t)s.used, "objects", (unsigned long long)s.objects, "resident",
                         (Py_ssize_t)s.resident);
}

static PyObject *engine_get_workers(EngineObj *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLong(self->h ? hive_num_workers(self->h) : 0);
}

static PyObject *engine_get_closed(EngineObj *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->closing || !self->h);
}

/* ------------------------------------------------------------------ refs */

/* A raw sealed payload as an exporter of its own: get's memoryviews are made
 * over it rather than over their Ref, so that the Ref can keep one of them
 * for reuse without a reference cycle (Ref -> memoryview -> its managed
 * buffer -> Payload, never back to the Ref, which a cycle would keep alive
 * with its count until the garbage collector ran). The Ref hands its count
 * over when it makes its Payload. */
typedef struct {
    PyObject_HEAD
    EngineObj  *engine;
    hive_ref_t  ref;       /* one count, released when the Payload goes */
    const char *data;
    Py_ssize_t  len;
} PayloadObj;

struct RefObj {
    PyObject_HEAD
    EngineObj  *engine;
    hive_ref_t  ref;       /* one count, dropped with the object (held by payload once made) */
    int         kind;      /* REF_UNSEEN until a get finds it sealed, then: */
    int         viewed;    /* a get made a memoryview of it */
    const char *data;      /* the payload, fixed while the count is held, */
    Py_ssize_t  size, len; /* its size and the bytes a view shows (less any trailer) */
    PayloadObj *payload;   /* NULL, or the exporter of get's memoryviews (it holds the count) */
    PyObject   *view;      /* NULL, or the last memoryview get made over payload, kept for reuse */
    PyObject   *typed_args;   /* NULL, or what hive._typed_args found: (shape, dtype) or None */
    RefObj     *vnext, *vprev;   /* in engine->viewing while view is set */
};

enum { REF_UNSEEN, REF_RAW, REF_TRAILER };   /* RefObj.kind: REF_TRAILER typed or pickled */

/* a Ref or Future (the exact types first: PyObject_TypeCheck of a Future
 * against RefType walks its MRO) */
static inline int is_ref(PyObject *o)
{
    return Py_IS_TYPE(o, &RefType) || Py_IS_TYPE(o, &FutureType) || PyObject_TypeCheck(o, &RefType);
}

/* Freed Refs and Futures kept for reuse (both are RefObj-sized): a call +
 * get makes and drops one, pymalloc's round trip is most of a no-op call.
 * Touched only holding the GIL. */
#define REF_FREELIST 64
static RefObj *ref_free[REF_FREELIST];
static int ref_nfree;

/* a Ref (or Future) owning the count the caller already holds */
static PyObject *ref_new(EngineObj *e, hive_ref_t ref, PyTypeObject *type)
{
    RefObj *r;
    if (ref_nfree > 0) {
        r = ref_free[--ref_nfree];
        PyObject_Init((PyObject *)r, type);
    } else {
        r = PyObject_New(RefObj, type);
    }
    if (!r) {
        hive_release(e->h, ref);
        return NULL;
    }
    r->engine = (EngineObj *)Py_NewRef((PyObject *)e);
    r->ref = ref;
    r->kind = REF_UNSEEN;
    r->viewed = 0;
    r->data = NULL;
    r->size = r->len = 0;
    r->payload = NULL;
    r->view = NULL;
    r->typed_args = NULL;
    r->vnext = r->vprev = NULL;
    return (PyObject *)r;
}

/* r out of its engine's list of Refs keeping a view */
static void ref_unlink_view(RefObj *r)
{
    EngineObj *e = r->engine;
    if (r->vprev)
        r->vprev->vnext = r->vnext;
    else
        e->viewing = r->vnext;
    if (r->vnext)
        r->vnext->vprev = r->vprev;
    else
        e->viewing_last = r->vprev;
    r->vnext = r->vprev = NULL;
    e->nviewing--;
}

/* r (keeping a view) to the front of the list: the last used */
static void ref_link_view(RefObj *r)
{
    EngineObj *e = r->engine;
    r->vprev = NULL;
    r->vnext = e->viewing;
    if (e->viewing)
        e->viewing->vprev = r;
    else
        e->viewing_last = r;
    e->viewing = r;
    e->nviewing++;
}

/* r stops keeping its memoryview (it goes now unless someone holds it; its
 * going may run a weak reference's callback, so r is unlinked first). A
 * Payload nothing else holds (no view of it left) gives the count back to r
 * and goes to the free list: a Ref whose view was dropped for others' holds
 * no memory beyond its own. */
static void ref_drop_view(RefObj *r)
{
    ref_unlink_view(r);
    Py_CLEAR(r->view);
    PayloadObj *p = r->payload;
    if (p && Py_REFCNT(p) == 1 && !r->view) {
        r->payload = NULL;
        p->ref.id = 0;                  /* r holds the count again */
        Py_DECREF(p);
    }
}

/* close(): every Ref lets its kept memoryview go, so that the engine's
 * shutdown waits only for the views somebody holds. No shutdown (and no GIL
 * release) in the middle of the walk: engine_close decides after it. */
static void ref_drop_views(EngineObj *e)
{
    int stopping = e->stopping;
    e->stopping = 1;
    while (e->viewing)
        ref_drop_view(e->viewing);
    e->stopping = stopping;
}

static void ref_dealloc(RefObj *self)
{
    if (self->view)
        ref_drop_view(self);
    Py_CLEAR(self->typed_args);
    if (self->payload)
        Py_DECREF(self->payload);   /* it holds the count now */
    else if (self->engine->h && self->ref.id)
        hive_release(self->engine->h, self->ref);
    Py_DECREF(self->engine);
    if ((Py_TYPE(self) == &RefType || Py_TYPE(self) == &FutureType) && ref_nfree < REF_FREELIST)
        ref_free[ref_nfree++] = self;
    else
        PyObject_Free(self);
}

static PyObject *ref_repr(RefObj *self)
{
    char id[32];
    snprintf(id, sizeof id, "%llx", (unsigned long long)self->ref.id);
    return PyUnicode_FromFormat("%s(0x%s)", Py_TYPE(self)->tp_name, id);
}

static Py_hash_t ref_hash(RefObj *self)
{
    Py_hash_t x = (Py_hash_t)(self->ref.id ^ (self->ref.id >> 32));
    return x == -1 ? -2 : x;
}

static PyObject *ref_richcompare(PyObject *a, PyObject *b, int op)
{
    if (!PyObject_TypeCheck(b, &RefType) || (op != Py_EQ && op != Py_NE))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = ((RefObj *)a)->ref.id == ((RefObj *)b)->ref.id;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyObject *ref_get_id(RefObj *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLongLong(self->ref.id);
}

static PyObject *engine_get(EngineObj *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
static PyObject *ref_value(RefObj *r, int64_t ns);

/* Ref.get(timeout=None): engine.get(self, timeout), called directly */
static PyObject *ref_get(RefObj *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (!nargs && !kwnames)
        return ref_value(self, HIVE_FOREVER);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs + nkw > 1) {
        PyErr_SetString(PyExc_TypeError, "get(timeout=None)");
        return NULL;
    }
    PyObject *full[2] = {(PyObject *)self, nargs + nkw ? args[0] : Py_None};
    return engine_get(self->engine, full, 1 + nargs, kwnames);
}

static PyObject *future_cancel(RefObj *self, PyObject *Py_UNUSED(ignored))
{
    hive_t *h = engine_live(self->engine);
    if (!h)
        return NULL;
    int rc = hive_cancel(h, self->ref);
    if (rc == HIVE_ESTATE)
        Py_RETURN_FALSE;   /* finished already: nothing to cancel */
    if (rc < 0)
        return raise_hive(rc, "cancel");
    Py_RETURN_TRUE;
}

/* ------------------------------------------------------------------ buffers
 *
 * A Buffer holds one count of an object and exports its payload (or a
 * shared array) through the buffer protocol: read-only for sealed objects,
 * writable for created ones and arrays. While a Buffer lives, the engine's
 * shutdown waits (close() defers it to the last Buffer's end).
 */
#define TRAILER_MAGIC 0x5f6e70797668ull   /* "hvypn_": a payload put from a typed buffer */
#define PICKLE_MAGIC  0x5f6b70797668ull   /* "hvypk_": a pickled Python task result */
#define MAX_FORMAT    1024
#define MAX_NDIM      64

typedef struct {
    PyObject_HEAD
    EngineObj  *engine;
    hive_ref_t  ref;           /* one count, or owner's */
    PyObject   *owner;         /* NULL, or the Ref whose count keeps the payload (a get's) */
    char       *ptr;
    Py_ssize_t  len;           /* bytes exported (the payload less its trailer) */
    int         readonly;
    int         typed;         /* the payload carries a format/shape trailer */
    int         pickled;       /* the payload is a pickle (a Python task's result) */
    int         is_array;
    hive_array_t view;         /* is_array: the whole array */
    Py_ssize_t  itemsize;
    int         ndim;
    Py_ssize_t  shape[MAX_NDIM];
    char        format[MAX_FORMAT + 1];
    Py_ssize_t  exports;
} BufferObj;

/* Freed Buffers kept for reuse (a Buffer is ~1.6 KB, past pymalloc's small
 * objects: without this every get costs a malloc and a free). Touched only
 * holding the GIL. */
#define BUFFER_FREELIST 32
static BufferObj *buffer_free[BUFFER_FREELIST];
static int buffer_nfree;

static BufferObj *buffer_new(EngineObj *e, hive_ref_t ref, void *ptr, size_t len, int readonly)
{
    BufferObj *b;
    if (buffer_nfree > 0) {
        b = buffer_free[--buffer_nfree];
        PyObject_Init((PyObject *)b, &BufferType);
    } else {
        b = PyObject_New(BufferObj, &BufferType);
    }
    if (!b) {
        if (ref.id)
            hive_release(e->h, ref);
        return NULL;
    }
    b->engine = (EngineObj *)Py_NewRef((PyObject *)e);
    e->nbuffers++;
    b->ref = ref;
    b->owner = NULL;
    b->ptr = ptr;
    b->len = (Py_ssize_t)len;
    b->readonly = readonly;
    b->typed = 0;
    b->pickled = 0;
    b->is_array = 0;
    b->itemsize = 1;
    b->ndim = 1;
    b->shape[0] = (Py_ssize_t)len;
    strcpy(b->format, "B");
    b->exports = 0;
    return b;
}

static void buffer_dealloc(BufferObj *self)
{
    EngineObj *e = self->engine;
    if (self->owner)
        Py_CLEAR(self->owner);          /* the Ref's count (it releases it when it goes) */
    else if (e->h && self->ref.id)
        hive_release(e->h, self->ref);
    buffer_gone(e);
    Py_DECREF(e);
    if (buffer_nfree < BUFFER_FREELIST)
        buffer_free[buffer_nfree++] = self;
    else
        PyObject_Free(self);
}

static int buffer_getbuffer(BufferObj *self, Py_buffer *view, int flags)
{
    if ((flags & PyBUF_WRITABLE) && self->readonly) {
        PyErr_SetString(PyExc_BufferError, "a sealed hive object is read-only");
        return -1;
    }
    view->obj = Py_NewRef((PyObject *)self);
    view->buf = self->ptr;
    view->len = self->len;
    view->readonly = self->readonly;
    view->itemsize = self->itemsize;
    view->format = (flags & PyBUF_FORMAT) ? self->format : NULL;
    view->ndim = self->ndim;
    view->shape = (flags & PyBUF_ND) ? self->shape : NULL;
    view->strides = NULL;      /* C-contiguous */
    view->suboffsets = NULL;
    view->internal = NULL;
    if (!(flags & PyBUF_ND) && self->ndim != 1) {
        view->ndim = 1;
        view->itemsize = 1;
        view->format = (flags & PyBUF_FORMAT) ? "B" : NULL;
    }
    self->exports++;
    return 0;
}

static void buffer_releasebuffer(BufferObj *self, Py_buffer *Py_UNUSED(view))
{
    self->exports--;
}

static PyBufferProcs buffer_as_buffer = {
    (getbufferproc)buffer_getbuffer, (releasebufferproc)buffer_releasebuffer,
};

/* read a payload's trailer (format, shape, itemsize) into b, if it has one */
static void buffer_parse_trailer(BufferObj *b)
{
    Py_ssize_t size = b->len;
    if (size < 24)
        return;
    const char *end = b->ptr + size;
    uint32_t flen, ndim;
    uint64_t itemsize, magic;
    memcpy(&flen, end - 24, 4);
    memcpy(&ndim, end - 20, 4);
    memcpy(&itemsize, end - 16, 8);
    memcpy(&magic, end - 8, 8);
    if (magic == PICKLE_MAGIC && flen == 0 && ndim == 0 && itemsize == 1) {
        b->len = size - 24;
        b->shape[0] = b->len;
        b->pickled = 1;
        return;
    }
    if (magic != TRAILER_MAGIC || flen == 0 || flen > MAX_FORMAT || ndim > MAX_NDIM || itemsize == 0)
        return;
    size_t tlen = (size_t)flen + 8u * ndim + 24u;
    if (tlen > (size_t)size)
        return;
    size_t data = (size_t)size - tlen, n = itemsize;
    Py_ssize_t shape[MAX_NDIM];
    const char *sp = end - 24 - 8u * ndim;
    for (uint32_t i = 0; i < ndim; i++) {
        int64_t x;
        memcpy(&x, sp + 8u * i, 8);
        if (x < 0 || __builtin_mul_overflow(n, (size_t)x, &n))
            return;
        shape[i] = (Py_ssize_t)x;
    }
    if (n != data || memchr(sp - flen, 0, flen))
        return;
    memcpy(b->format, sp - flen, flen);
    b->format[flen] = 0;
    memcpy(b->shape, shape, sizeof(Py_ssize_t) * ndim);
    b->ndim = (int)ndim;
    b->itemsize = (Py_ssize_t)itemsize;
    b->len = (Py_ssize_t)data;
    b->typed = 1;
}

static PyObject *buffer_get_address(BufferObj *self, void *Py_UNUSED(c))
{
    return PyLong_FromVoidPtr(self->ptr);
}
static PyObject *buffer_get_nbytes(BufferObj *self, void *Py_UNUSED(c))
{
    return PyLong_FromSsize_t(self->len);
}
static PyObject *buffer_get_typed(BufferObj *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->typed);
}
static PyObject *buffer_get_pickled(BufferObj *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->pickled);
}

/* Buffer.ref(): a new Ref to the object (its own count) */
static PyObject *buffer_ref(BufferObj *self, PyObject *Py_UNUSED(ignored))
{
    hive_t *h = engine_live(self->engine);
    if (!h)
        return NULL;
    int rc = hive_retain(h, self->ref);
    if (rc < 0)
        return raise_hive(rc, "ref");
    return ref_new(self->engine, self->ref, &RefType);
}

static int buffer_need_array(BufferObj *self)
{
    if (!self->is_array) {
        PyErr_SetString(PyExc_TypeError, "not a shared array");
        return -1;
    }
    if (!engine_live(self->engine))
        return -1;
    return 0;
}

static int dtype_is_float(hive_dtype_t d) { return d == HIVE_F32 || d == HIVE_F64; }

/* Buffer.add(flat_index, delta) on an array: the new value */
static PyObject *buffer_add(BufferObj *self, PyObject *args)
{
    long long index;
    PyObject *delta;
    if (!PyArg_ParseTuple(args, "LO", &index, &delta) || buffer_need_array(self) < 0)
        return NULL;
    int rc;
    if (dtype_is_float(self->view.dtype)) {
        double d = PyFloat_AsDouble(delta), old = 0;
        if (d == -1.0 && PyErr_Occurred())
            return NULL;
        rc = hive_array_fetch_add_f64(&self->view, index, d, &old);
        if (rc < 0)
            return raise_hive(rc, "add");
        return PyFloat_FromDouble(self->view.dtype == HIVE_F32 ? (double)(float)((float)old + (float)d)
                                                               : old + d);
    }
    if (!PyLong_Check(delta) && !PyBool_Check(delta)) {
        PyErr_Format(PyExc_TypeError, "an integer array takes an integer delta, not %s",
                     Py_TYPE(delta)->tp_name);
        return NULL;
    }
    long long d = PyLong_AsLongLong(delta);
    if (d == -1 && PyErr_Occurred())
        return NULL;
    int64_t old = 0;
    rc = hive_array_fetch_add_i64(&self->view, index, d, &old);
    if (rc < 0)
        return raise_hive(rc, "add");
    /* the element's own width: read it back through the new value's type */
    int64_t nv = (int64_t)((uint64_t)old + (uint64_t)d);
    switch (self->view.dtype) {
    case HIVE_BOOL: case HIVE_U8: nv = (uint8_t)nv; break;
    case HIVE_I8:   nv = (int8_t)nv; break;
    case HIVE_I16:  nv = (int16_t)nv; break;
    case HIVE_U16:  nv = (uint16_t)nv; break;
    case HIVE_I32:  nv = (int32_t)nv; break;
    case HIVE_U32:  nv = (uint32_t)nv; break;
    case HIVE_U64:  return PyLong_FromUnsignedLongLong((uint64_t)nv);
    default: break;
    }
    return PyLong_FromLongLong(nv);
}

static PyObject *buffer_write_lock(BufferObj *self, PyObject *Py_UNUSED(ignored))
{
    if (buffer_need_array(self) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = hive_array_write_lock(&self->view);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        return raise_hive(rc, "write_lock");
    Py_RETURN_NONE;
}

static PyObject *buffer_write_unlock(BufferObj *self, PyObject *Py_UNUSED(ignored))
{
    if (buffer_need_array(self) < 0)
        return NULL;
    int rc = hive_array_write_unlock(&self->view);
    if (rc < 0)
        return raise_hive(rc, "write_unlock");
    Py_RETURN_NONE;
}

/* Buffer.read_into(dst): a consistent snapshot of the whole array */
static PyObject *buffer_read_into(BufferObj *self, PyObject *dst)
{
    if (buffer_need_array(self) < 0)
        return NULL;
    Py_buffer out;
    if (PyObject_GetBuffer(dst, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = hive_array_read(&self->view, out.buf, (size_t)out.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    if (rc < 0)
        return raise_hive(rc, "snapshot");
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ engine: objects */

/* Payload layout: the bytes, then for a typed buffer a trailer (format,
 * shape, then flen, ndim, itemsize and a magic in the last 24 bytes), for a
 * pickle a 24-byte trailer with the pickle magic. kind: 0 raw, 1 typed, 2 pickle. */
static int payload_size(const Py_buffer *v, int kind, size_t *total)
{
    size_t tlen = 0;
    if (kind == 1) {
        size_t flen = strlen(v->format ? v->format : "B");
        if (flen == 0 || flen > MAX_FORMAT || v->ndim > MAX_NDIM) {
            PyErr_Format(PyExc_ValueError, "put: a format of %zu characters or %d dimensions is "
                         "beyond %d / %d", flen, v->ndim, MAX_FORMAT, MAX_NDIM);
            return -1;
        }
        tlen = flen + 8u * (size_t)v->ndim + 24u;
    } else if (kind == 2) {
        tlen = 24;
    }
    if (__builtin_add_overflow((size_t)v->len, tlen, total)) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void payload_write(char *dst, const Py_buffer *v, int kind)
{
    memcpy(dst, v->buf, (size_t)v->len);
    if (kind == 0)
        return;
    char *t = dst + v->len;
    const char *fmt = v->format ? v->format : "B";
    uint32_t flen = kind == 1 ? (uint32_t)strlen(fmt) : 0, nd = kind == 1 ? (uint32_t)v->ndim : 0;
    uint64_t isz = kind == 1 ? (uint64_t)v->itemsize : 1, magic = kind == 1 ? TRAILER_MAGIC : PICKLE_MAGIC;
    memcpy(t, fmt, flen);
    t += flen;
    for (uint32_t i = 0; i < nd; i++, t += 8) {
        int64_t x = v->shape ? v->shape[i] : v->len / v->itemsize;
        memcpy(t, &x, 8);
    }
    memcpy(t, &flen, 4);
    memcpy(t + 4, &nd, 4);
    memcpy(t + 8, &isz, 8);
    memcpy(t + 16, &magic, 8);
}

/* copy the exported buffer v into a new sealed object (typed: with the
 * format/shape trailer that get() turns back into an ndarray); releases v */
static PyObject *put_view(EngineObj *self, hive_t *h, Py_buffer *v, int typed)
{
    size_t total;
    void *dst;
    hive_ref_t ref;
    if (!typed && v->len <= (1 << 20)) {   /* raw and small: one hive_put (the GIL held for the copy) */
        int rc = hive_put(h, v->buf, (size_t)v->len, &ref);
        PyBuffer_Release(v);
        return rc < 0 ? raise_hive(rc, "put") : ref_new(self, ref, &RefType);
    }
    if (payload_size(v, typed, &total) < 0) {
        PyBuffer_Release(v);
        return NULL;
    }
    int rc = hive_create(h, total, &dst, &ref);
    if (rc < 0) {
        PyBuffer_Release(v);
        return raise_hive(rc, "put");
    }
    if (v->len > (1 << 20)) {
        Py_BEGIN_ALLOW_THREADS
        payload_write(dst, v, typed);
        Py_END_ALLOW_THREADS
    } else {
        payload_write(dst, v, typed);
    }
    PyBuffer_Release(v);
    rc = hive_seal(h, ref);
    if (rc < 0) {
        hive_release(h, ref);
        return raise_hive(rc, "put");
    }
    return ref_new(self, ref, &RefType);
}

/* Engine._put(buffer, typed): copy into a new sealed object, typed or raw */
static PyObject *engine_put(EngineObj *self, PyObject *args)
{
    PyObject *obj;
    int typed = 0;
    if (!PyArg_ParseTuple(args, "O|p", &obj, &typed))
        return NULL;
    hive_t *h = engine_live(self);
    if (!h)
        return NULL;
    Py_buffer v;
    if (PyObject_GetBuffer(obj, &v, typed ? (PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) : PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    return put_view(self, h, &v, typed);
}

/* numpy's ndarray and generic types, and hive._put_other(engine, x) for
 * what put leaves to Python (numpy scalars, arrays that are not
 * C-contiguous), from hive/__init__.py (_set_runners); NULL without it */
static PyObject *np_ndarray, *np_generic, *py_put_other;

/* a buffer format holding Python objects ('O' outside the field names,
 * which stand between colons) */
static int format_has_object(const char *f)
{
    int name = 0;
    for (; f && *f; f++) {
        if (*f == ':')
            name = !name;
        else if (!name && *f == 'O')
            return 1;
    }
    return 0;
}

/* Engine.put(x): copy x (anything with the buffer protocol) into a new
 * sealed object -> Ref; an ndarray keeps its dtype and shape (the trailer).
 * One C call for bytes-likes and C-contiguous arrays; numpy scalars and
 * other arrays go through hive._put_other (np.asarray, ascontiguousarray). */
static PyObject *engine_put_any(EngineObj *self, PyObject *x)
{
    int typed = np_ndarray && PyObject_TypeCheck(x, (PyTypeObject *)np_ndarray);
    if (!typed && np_generic && PyObject_TypeCheck(x, (PyTypeObject *)np_generic))
        return PyObject_CallFunctionObjArgs(py_put_other, (PyObject *)self, x, NULL);
    hive_t *h = engine_live(self);
    if (!h)
        return NULL;
    Py_buffer v;
    if (PyObject_GetBuffer(x, &v, typed ? PyBUF_RECORDS_RO : PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (typed && format_has_object(v.format)) {
        PyBuffer_Release(&v);
        PyErr_SetString(PyExc_TypeError, "put: an array of Python objects has no bytes to share");
        return NULL;
    }
    if (typed && !PyBuffer_IsContiguous(&v, 'C')) {
        PyBuffer_Release(&v);
        return PyObject_CallFunctionObjArgs(py_put_other, (PyObject *)self, x, NULL);
    }
    return put_view(self, h, &v, typed);
}

static int ref_of(PyObject *o, hive_ref_t *out)
{
    if (!is_ref(o)) {
        PyErr_Format(PyExc_TypeError, "expected a hive.Ref, not %s", Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = ((RefObj *)o)->ref;
    return 0;
}

static PyObject *py_view_of;   /* hive._view_of: a typed or pickled Buffer -> its Python value */
static PyObject *py_typed_args, *py_object_view;   /* hive._typed_args, hive.ObjectView */

/* (ref, timeout=None) of a fastcall get */
static int get_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, hive_ref_t *ref,
                    int64_t *ns)
{
    PyObject *timeout = nargs > 1 ? args[1] : Py_None;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs < 1 || nargs > 2 || nkw > 1 || (nkw == 1 && nargs == 2)) {
        PyErr_SetString(PyExc_TypeError, "get(ref, timeout=None)");
        return -1;
    }
    if (nkw == 1) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(kwnames, 0)) ||
            PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "timeout")) {
            PyErr_Format(PyExc_TypeError, "get: unexpected keyword %R", PyTuple_GET_ITEM(kwnames, 0));
            return -1;
        }
        timeout = args[nargs];
    }
    if (ref_of(args[0], ref) < 0)
        return -1;
    *ns = timeout_ns_of(timeout);
    return *ns == -2 ? -1 : 0;
}

/* a payload that may end in a trailer (typed or pickled; buffer_parse_trailer
 * reads it in full and may still find it raw); without one it is raw bytes */
static int payload_may_have_trailer(const char *data, size_t size)
{
    uint64_t magic;
    if (size < 24)
        return 0;
    memcpy(&magic, data + size - 8, 8);
    return magic == TRAILER_MAGIC || magic == PICKLE_MAGIC;
}

/* a read-only Buffer over r's payload, parsed, that holds r (so its count:
 * a Ref keeps its count until it is dropped, no retain/release per get) */
static BufferObj *ref_buffer(RefObj *r, const char *data, size_t size)
{
    BufferObj *b = buffer_new(r->engine, (hive_ref_t){0}, (void *)data, size, 1);
    if (b) {
        b->ref = r->ref;
        b->owner = Py_NewRef((PyObject *)r);
        buffer_parse_trailer(b);
    }
    return b;
}

/* Find r's sealed payload, waiting up to ns for the seal (the GIL is
 * released only for a wait: a sealed object is taken at once, holding it),
 * and remember it in r: where it is, its kind, the bytes a view shows. A
 * repeat makes no store lookup (the payload is immutable and stays put while
 * r's count is held). With bufp, a payload with a trailer also comes back
 * as a parsed Buffer in *bufp (else *bufp is NULL). 0, or -1 raised. */
static int ref_resolve(RefObj *r, int64_t ns, BufferObj **bufp)
{
    EngineObj *e = r->engine;
    if (bufp)
        *bufp = NULL;
    hive_t *h = engine_live(e);
    if (!h)
        return -1;
    if (r->kind == REF_UNSEEN) {
        const void *data = NULL;
        size_t size = 0;
        int rc = hive_get(h, r->ref, 0, &data, &size);
        if (rc == HIVE_ETIMEDOUT && ns != 0) {
            Py_BEGIN_ALLOW_THREADS
            rc = hive_get(h, r->ref, ns, &data, &size);
            Py_END_ALLOW_THREADS
        }
        if (rc < 0) {
            raise_hive(rc, "get");
            return -1;
        }
        if (!e->h) {   /* shut down while this thread waited */
            raise_hive(HIVE_ESHUTDOWN, "get");
            return -1;
        }
        r->data = data;
        r->size = r->len = (Py_ssize_t)size;
        r->kind = REF_RAW;
        if (!payload_may_have_trailer(data, size))
            return 0;
        BufferObj *b = ref_buffer(r, data, size);
        if (!b)
            return -1;
        r->len = b->len;
        if (b->typed || b->pickled)
            r->kind = REF_TRAILER;
        if (bufp && r->kind == REF_TRAILER)
            *bufp = b;
        else
            Py_DECREF(b);
        return 0;
    }
    if (bufp && r->kind == REF_TRAILER && !(*bufp = ref_buffer(r, r->data, (size_t)r->size)))
        return -1;
    return 0;
}

/* A Ref exports its sealed payload (less any trailer) read-only through the
 * buffer protocol: engine.get's memoryview is made straight over the Ref,
 * which holds the count (no intermediate object). Not sealed yet: Timeout. */
static int ref_getbuffer(RefObj *self, Py_buffer *view, int flags)
{
    view->obj = NULL;
    if (flags & PyBUF_WRITABLE) {
        PyErr_SetString(PyExc_BufferError, "a sealed hive object is read-only");
        return -1;
    }
    if (ref_resolve(self, 0, NULL) < 0)
        return -1;
    /* cannot fail: it refuses only a writable request, refused above */
    (void)PyBuffer_FillInfo(view, (PyObject *)self, (void *)self->data, self->len, 1, flags);
    self->engine->nbuffers++;   /* shutdown waits for the view */
    return 0;
}

static void ref_releasebuffer(RefObj *self, Py_buffer *Py_UNUSED(view))
{
    buffer_gone(self->engine);
}

static PyBufferProcs ref_as_buffer = {
    (getbufferproc)ref_getbuffer, (releasebufferproc)ref_releasebuffer,
};

/* Freed Payloads kept for reuse, as Refs are. Touched only holding the GIL. */
#define PAYLOAD_FREELIST 64
static PayloadObj *payload_free[PAYLOAD_FREELIST];
static int payload_nfree;

/* r's Payload, made at its first memoryview get: it takes over r's count */
static PayloadObj *ref_payload(RefObj *r)
{
    if (r->payload)
        return r->payload;
    PayloadObj *p;
    if (payload_nfree > 0) {
        p = payload_free[--payload_nfree];
        PyObject_Init((PyObject *)p, &PayloadType);
    } else if (!(p = PyObject_New(PayloadObj, &PayloadType))) {
        return NULL;                    /* the count stays with r */
    }
    p->engine = (EngineObj *)Py_NewRef((PyObject *)r->engine);
    p->ref = r->ref;
    p->data = r->data;
    p->len = r->len;
    return r->payload = p;
}

static void payload_dealloc(PayloadObj *self)
{
    if (self->engine->h && self->ref.id)
        hive_release(self->engine->h, self->ref);
    Py_DECREF(self->engine);
    if (payload_nfree < PAYLOAD_FREELIST)
        payload_free[payload_nfree++] = self;
    else
        PyObject_Free(self);
}

/* as a Ref's: read-only, counted in nbuffers (shutdown waits for the views) */
static int payload_getbuffer(PayloadObj *self, Py_buffer *view, int flags)
{
    view->obj = NULL;
    if (flags & PyBUF_WRITABLE) {
        PyErr_SetString(PyExc_BufferError, "a sealed hive object is read-only");
        return -1;
    }
    if (!engine_live(self->engine))
        return -1;
    (void)PyBuffer_FillInfo(view, (PyObject *)self, (void *)self->data, self->len, 1, flags);
    self->engine->nbuffers++;
    return 0;
}

static void payload_releasebuffer(PayloadObj *self, Py_buffer *Py_UNUSED(view))
{
    buffer_gone(self->engine);
}

static PyBufferProcs payload_as_buffer = {
    (getbufferproc)payload_getbuffer, (releasebufferproc)payload_releasebuffer,
};

/* ------------------------------------------------------------------ recycled memoryviews
 *
 * A fresh memoryview is two objects the garbage collector tracks, a managed
 * buffer and the view (~600 instructions made and freed, 2.7x a no-op C
 * call by itself): a Ref's first get and every Future.get made one. CPython
 * keeps free lists for its own types; this keeps one for the views of
 * hive's exporters (a Ref, a Future, a Payload). The memoryview type's
 * tp_dealloc is wrapped (view_dealloc): a view whose reference count reached
 * zero - so nothing can observe it any more - is released as CPython's
 * memory_dealloc releases it (the exporter's releasebuffer, then its
 * reference: a count goes at the same moment it did before), and its memory
 * and its managed buffer, the view's alone, go to the free list instead of
 * the allocator; view_of builds a later get's view in them, as CPython's
 * mbuf_add_view builds one. Taken is only a view of one of hive's exporters
 * (exact types) with room for one dimension (as PyMemoryView_FromObject
 * makes one of them), not released, the only view of its managed buffer
 * (the buffer's refcount and exports 1: a slice, a cast or a toreadonly()
 * is another view on it, an ndarray over the view an export of the view,
 * which holds it), with no weak reference (their callbacks run in CPython's
 * dealloc); every other memoryview goes to CPython's dealloc unchanged.
 * A recycled view is left untracked by the garbage collector: it refers
 * only to its managed buffer, that only to the exporter, and no Ref or
 * Payload refers to a view over itself, so it is in no cycle (view_dealloc
 * tracks it again before handing it to CPython's dealloc, which untracks
 * it). Its managed buffer stays tracked, in the free list too (released,
 * referring to nothing), as mbuf_release expects to untrack a live one.
 * Built for the memoryview layout of CPython 3.11-3.13 with the GIL (the
 * structs of memoryobject.h, not the limited API); other builds make every
 * view with PyMemoryView_FromObject. Touched only holding the GIL. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED) && \
    !defined(Py_TRACE_REFS)
#define VIEW_RECYCLING 1
#define VIEW_FREELIST  32
static PyMemoryViewObject *view_free[VIEW_FREELIST];
static int view_nfree;
static destructor memoryview_dealloc;   /* CPython's own, NULL until view_recycling_install */

static inline int is_hive_exporter(PyObject *o)
{
    return o && (Py_IS_TYPE(o, &RefType) || Py_IS_TYPE(o, &FutureType) || Py_IS_TYPE(o, &PayloadType));
}

static void view_dealloc(PyObject *o)
{
    PyMemoryViewObject *mv = (PyMemoryViewObject *)o;
    _PyManagedBufferObject *mb = mv->mbuf;
    PyObject *x = mb ? mb->master.obj : NULL;
    if (view_nfree == VIEW_FREELIST || !is_hive_exporter(x) || Py_REFCNT(mb) != 1 || mb->exports != 1 ||
        mv->exports || (mv->flags & _Py_MEMORYVIEW_RELEASED) || mb->flags || mv->weakreflist ||
        Py_SIZE(mv) != 3) {
        if (!PyObject_GC_IsTracked(o))  /* one of view_of's: memory_dealloc untracks it */
            PyObject_GC_Track(o);
        memoryview_dealloc(o);
        return;
    }
    /* memory_dealloc less the frees: _memory_release(mv), mbuf_release(mb)
     * (mb left tracked) and its PyBuffer_Release(&mb->master): the
     * exporter's releasebuffer (buffer_gone, for all three), its reference */
    PyObject_GC_UnTrack(mv);            /* (a no-op for one view_of made) */
    mv->flags |= _Py_MEMORYVIEW_RELEASED;
    mb->exports = 0;
    mb->flags |= _Py_MANAGED_BUFFER_RELEASED;
    mb->master.obj = NULL;
    buffer_gone(Py_IS_TYPE(x, &PayloadType) ? ((PayloadObj *)x)->engine : ((RefObj *)x)->engine);
    Py_DECREF(x);
    /* (the release may free other views, which may fill the list meanwhile) */
    if (view_nfree < VIEW_FREELIST) {
        view_free[view_nfree++] = mv;   /* its mbuf stays with it, refcount 1 */
    } else {
        Py_DECREF(mb);
        PyObject_GC_Del(mv);
    }
}

/* wrap the memoryview type's dealloc (once, at import) */
static void view_recycling_install(void)
{
    if (!memoryview_dealloc) {
        memoryview_dealloc = PyMemoryView_Type.tp_dealloc;
        PyMemoryView_Type.tp_dealloc = view_dealloc;
    }
}

/* memoryview(x) for x (a raw Ref, or a Payload) of e, whose bytes are
 * data[0, len): in a recycled view if there is one, with the managed
 * buffer's master filled as x's getbuffer fills it (PyBuffer_FillInfo,
 * read-only, PyBUF_FULL_RO, counted in nbuffers) and the view copied from
 * it as mbuf_add_view's init_shared_values, init_shape_strides,
 * init_suboffsets and init_flags copy 1-D unsigned bytes; the view is not
 * tracked (above). A closed engine takes CPython's way, whose getbuffer
 * raises ShutDown, and so does a subclass of Ref (whose instances may have
 * a __dict__, and so be in a cycle with a view over themselves). */
static PyObject *view_of(PyObject *x, EngineObj *e, const char *data, Py_ssize_t len)
{
    if (!view_nfree || !e->h || e->closing || !is_hive_exporter(x))
        return PyMemoryView_FromObject(x);
    PyMemoryViewObject *mv = view_free[--view_nfree];
    _PyManagedBufferObject *mb = mv->mbuf;
    Py_buffer *m = &mb->master, *v = &mv->view;
    *m = (Py_buffer){.obj = Py_NewRef(x), .buf = (void *)data, .len = len, .readonly = 1, .itemsize = 1,
                     .format = "B", .ndim = 1, .shape = NULL, .strides = NULL};
    m->shape = &m->len;
    m->strides = &m->itemsize;
    e->nbuffers++;                      /* shutdown waits for the view */
    mb->flags = 0;
    mb->exports = 1;
    PyObject_Init((PyObject *)mv, &PyMemoryView_Type);
    *v = (Py_buffer){.obj = x, .buf = m->buf, .len = len, .readonly = 1, .itemsize = 1, .format = "B",
                     .ndim = 1, .shape = mv->ob_array, .strides = mv->ob_array + 1};
    v->shape[0] = len;
    v->strides[0] = 1;
    mv->hash = -1;
    mv->exports = 0;
    mv->flags = _Py_MEMORYVIEW_C | _Py_MEMORYVIEW_FORTRAN;   /* 1-D, stride == itemsize */
    return (PyObject *)mv;
}
#else
static void view_recycling_install(void) {}
static PyObject *view_of(PyObject *x, EngineObj *e, const char *data, Py_ssize_t len)
{
    (void)e, (void)data, (void)len;
    return PyMemoryView_FromObject(x);
}
#endif

/* get's memoryview of r's raw payload. The first is made over r itself, as
 * memoryview(r) is, and not kept. From the second get on r keeps the last
 * view it made: while nobody else holds that one (r's is its only
 * reference: no variable, no export, no weak reference) and it was not
 * released, the next get returns it again - `get`, use, drop allocates
 * nothing; an unreleased one somebody holds gives a new view on its managed
 * buffer (one object, not the two of a view over an exporter), with a
 * release() of its own. An engine's Refs keep KEPT_VIEWS views at most, the
 * ones last used: a kept view is two objects the garbage collector tracks
 * (and ~400 bytes), and keeping one for every Ref of a large set made the
 * gets that added them 3-6x slower (the collector's passes over all of them,
 * fresh pages), a first get keeping them likewise for every Future got once. */
#define KEPT_VIEWS 256   /* views an engine's Refs keep at most */

static PyObject *ref_view(RefObj *r)
{
    if (!r->viewed) {
        r->viewed = 1;
        return view_of((PyObject *)r, r->engine, r->data, r->len);
    }
    EngineObj *e = r->engine;
    PyObject *m = r->view;
    if (m) {
        PyMemoryViewObject *mv = (PyMemoryViewObject *)m;
        if (!(mv->flags & _Py_MEMORYVIEW_RELEASED)) {
            if (e->viewing != r) {      /* the last used: first to keep */
                ref_unlink_view(r);
                ref_link_view(r);
            }
            if (Py_REFCNT(m) == 1 && !mv->weakreflist)
                return Py_NewRef(m);
            return PyMemoryView_FromObject(m);
        }
        ref_drop_view(r);               /* its holder released it */
    }
    PayloadObj *p = ref_payload(r);
    if (!p || !(m = view_of((PyObject *)p, e, p->data, p->len)))
        return NULL;
    if (!e->closing) {                  /* (closed during a get's wait: not kept) */
        r->view = Py_NewRef(m);
        ref_link_view(r);
        if (e->nviewing > KEPT_VIEWS)   /* the least recently used one goes */
            ref_drop_view(e->viewing_last);
    }
    return m;
}

/* Engine.get(ref, timeout=None) -> read-only memoryview (over the Ref), or
 * (through hive._view_of) the ndarray or unpickled value of a typed / pickled payload */
/* what a get of r returns, its payload sealed or waited for up to ns */
static PyObject *ref_value(RefObj *r, int64_t ns)
{
    BufferObj *b;
    if (ref_resolve(r, ns, &b) < 0)
        return NULL;
    if (!b)
        return ref_view(r);
    PyObject *out;
    if (b->typed && r->viewed && py_typed_args) {
        /* a repeated typed get: ObjectView(shape, dtype, buffer) straight,
         * with the (immutable) shape and dtype its first _view_of had */
        if (!r->typed_args && !(r->typed_args = PyObject_CallOneArg(py_typed_args, (PyObject *)b))) {
            Py_DECREF(b);
            return NULL;
        }
        if (r->typed_args != Py_None) {
            PyObject *a[3] = {PyTuple_GET_ITEM(r->typed_args, 0), PyTuple_GET_ITEM(r->typed_args, 1),
                              (PyObject *)b};
            out = PyObject_Vectorcall(py_object_view, a, 3, NULL);
            Py_DECREF(b);
            return out;
        }
    }
    r->viewed = 1;
    out = py_view_of ? PyObject_CallOneArg(py_view_of, (PyObject *)b) : PyMemoryView_FromObject((PyObject *)b);
    Py_DECREF(b);
    return out;
}

static PyObject *engine_get(EngineObj *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    RefObj *r = nargs == 1 ? (RefObj *)args[0] : NULL;
    if (r && !kwnames && (Py_IS_TYPE(r, &RefType) || Py_IS_TYPE(r, &FutureType)) && r->engine == self)
        return ref_value(r, HIVE_FOREVER);   /* get(ref): nothing more to read */
    hive_ref_t ref;
    int64_t ns;
    if (get_args(args, nargs, kwnames, &ref, &ns) < 0)
        return NULL;
    r = (RefObj *)args[0];
    if (r->engine != self) {
        PyErr_Format(PyExc_ValueError, "get: %R belongs to another engine", args[0]);
        return NULL;
    }
    return ref_value(r, ns);
}

/* Engine._create(size) -> (Ref, writable Buffer) */
static PyObject *engine_create(EngineObj *self, PyObject *args)
{
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "n", &size))
        return NULL;
    if (size < 0) {
        PyErr_Format(PyExc_ValueError, "create: size must be >= 0, not %zd", size);
        return NULL;
    }
    hive_t *h = engine_live(self);
    if (!h)
        return NULL;
    void *data;
    hive_ref_t ref;
    int rc = hive_create(h, (size_t)size, &data, &ref);
    if (rc < 0)
        return raise_hive(rc, "create");
    rc = hive_retain(h, ref);
    if (rc < 0) {
        hive_release(h, ref);
        return raise_hive(rc, "create");
    }
    PyObject *r = ref_new(self, ref, &RefType);
    if (!r) {
        hive_release(h, ref);
        return NULL;
    }
    PyObject *b = (PyObject *)buffer_new(self, ref, data, (size_t)size, 0);
    if (!b) {
        Py_DECREF(r);
        return NULL;
    }
    PyObject *t = PyTuple_Pack(2, r, b);
    Py_DECREF(r);
    Py_DECREF(b);
    return t;
}

static PyObject *engine_seal(EngineObj *self, PyObject *refo)
{
    hive_ref_t ref;
    if (ref_of(refo, &ref) < 0)
        return NULL;
    hive_t *h = engine_live(self);
    if (!h)
        return NULL;
    int rc = hive_seal(h, ref);
    if (rc < 0)
        return raise_hive(rc, "seal");
    Py_RETURN_NONE;
}

/* Engine.wait(refs, num_returns=1, timeout=None) -> (ready, not_ready) */
static PyObject *engine_wait(EngineObj *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"refs", "num_returns", "timeout", NULL};
    PyObject *refs_in, *timeout = Py_None;
    Py_ssize_t num = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|nO", kwlist, &refs_in, &num, &timeout))
        return NULL;
    int64_t ns = timeout_ns_of(timeout);
    if (ns == -2)
        return NULL;
    PyObject *seq = PySequence_Fast(refs_in, "wait: refs must be a sequence of hive.Ref");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (num < 0 || num > n) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "wait: num_returns must be 0 .. %zd (the refs), not %zd", n, num);
        return NULL;
    }
    hive_ref_t *refs = PyMem_Calloc((size_t)n + 1, sizeof *refs);
    unsigned char *ready = PyMem_Calloc((size_t)n + 1, 1);
    PyObject *result = NULL;
    if (!refs || !ready) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (ref_of(PySequence_Fast_GET_ITEM(seq, i), &refs[i]) < 0)
            goto out;
    hive_t *h = engine_live(self);
    if (!h)
        goto out;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = hive_wait(h, refs, (size_t)n, (size_t)num, ns, ready);
    if (rc == HIVE_ETIMEDOUT)   /* as ray.wait: the ones ready at the deadline */
        rc = hive_wait(h, refs, (size_t)n, 0, 0, ready);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        raise_hive(rc, "wait");
        goto out;
    }
    PyObject *yes = PyList_New(0), *no = PyList_New(0);
    if (!yes || !no) {
        Py_XDECREF(yes);
        Py_XDECREF(no);
        goto out;
    }
    Py_ssize_t taken = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int is_ready = ready[i] && taken < (num ? num : n);
        taken += is_ready;
        if (PyList_Append(is_ready ? yes : no, PySequence_Fast_GET_ITEM(seq, i)) < 0) {
            Py_DECREF(yes);
            Py_DECREF(no);
            goto out;
        }
    }
    result = Py_BuildValue("(NN)", yes, no);
out:
    PyMem_Free(refs);
    PyMem_Free(ready);
    Py_DECREF(seq);
    return result;
}

/* Engine._array(shape, dtype_code) -> writable Buffer over a shared array */
static PyObject *engine_array(EngineObj *self, PyObject *args)
{
    PyObject *shape_in;
    int dtype;
    if (!PyArg_ParseTuple(args, "Oi", &shape_in, &dtype))
        return NULL;
    PyObject *seq = PySequence_Fast(shape_in, "array: shape must be a sequence of ints");
    if (!seq)
        return NULL;
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(seq);
    if (nd > HIVE_MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "array: %zd dimensions, at most %d", nd, HIVE_MAX_DIMS);
        return NULL;
    }
    int64_t shape[HIVE_MAX_DIMS];
    for (Py_ssize_t i = 0; i < nd; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyLong_Check(x)) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_TypeError, "array: extents must be ints, not %s", Py_TYPE(x)->tp_name);
            return NULL;
        }
        shape[i] = PyLong_AsLongLong(x);
        if (shape[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    hive_t *h = engine_live(self);
    if (!h)
        return NULL;
    hive_ref_t ref;
    int rc = hive_array_new(h, (hive_dtype_t)dtype, (int)nd, shape, &ref);
    if (rc < 0)
        return raise_hive(rc, "array");
    hive_array_t view;
    rc = hive_array_view(h, ref, &view);
    if (rc < 0) {
        hive_release(h, ref);
        return raise_hive(rc, "array");
    }
    size_t isz = hive_dtype_size(view.dtype);
    int64_t numel = hive_array_numel(&view);
    BufferObj *b = buffer_new(self, ref, view.data, (size_t)numel * isz, 0);
    if (!b)
        return NULL;
    static const char *fmts[] = {"", "?", "b", "B", "h", "H", "i", "I", "q", "Q", "f", "d"};
    b->is_array = 1;
    b->view = view;
    b->itemsize = (Py_ssize_t)isz;
    b->ndim = (int)nd;
    for (int i = 0; i < nd; i++)
        b->shape[i] = (Py_ssize_t)shape[i];
    strcpy(b->format, fmts[dtype]);
    return (PyObject *)b;
}

/* ------------------------------------------------------------------ cells */

typedef struct {
    PyObject_HEAD
    EngineObj *engine;
    hive_ref_t cell;
} CellObj;

static PyObject *engine_cell(EngineObj *self, PyObject *args)
{
    PyObject *init = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &init))
        return NULL;
    hive_ref_t initial = {0};
    if (init != Py_None && ref_of(init, &initial) < 0)
        return NULL;
    hive_t *h = engine_live(self);
    if (!h)
        return NULL;
    hive_ref_t cell;
    int rc = hive_cell_new(h, initial, &cell);
    if (rc < 0)
        return raise_hive(rc, "cell");
    CellObj *c = PyObject_New(CellObj, &CellType);
    if (!c) {
        hive_release(h, cell);
        return NULL;
    }
    c->engine = (EngineObj *)Py_NewRef((PyObject *)self);
    c->cell = cell;
    return (PyObject *)c;
}

static void cell_dealloc(CellObj *self)
{
    if (self->engine->h)
        hive_release(self->engine->h, self->cell);
    Py_DECREF(self->engine);
    PyObject_Free(self);
}

static PyObject *cell_publish(CellObj *self, PyObject *refo)
{
    hive_ref_t ref;
    if (ref_of(refo, &ref) < 0)
        return NULL;
    hive_t *h = engine_live(self->engine);
    if (!h)
        return NULL;
    int rc = hive_cell_publish(h, self->cell, ref);
    if (rc < 0)
        return raise_hive(rc, "publish");
    Py_RETURN_NONE;
}

static PyObject *cell_acquire(CellObj *self, PyObject *Py_UNUSED(ignored))
{
    hive_t *h = engine_live(self->engine);
    if (!h)
        return NULL;
    hive_ref_t v;
    uint64_t seq = 0;
    int rc = hive_cell_acquire(h, self->cell, &v, &seq);
    if (rc == HIVE_ENOENT)
        Py_RETURN_NONE;   /* still empty */
    if (rc < 0)
        return raise_hive(rc, "acquire");
    PyObject *r = ref_new(self->engine, v, &RefType);
    if (!r)
        return NULL;
    return Py_BuildValue("(NK)", r, (unsigned long long)seq);
}

/* ------------------------------------------------------------------ replay */

static PyObject *engine_replay(EngineObj *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"capacity", "item_size", "prioritized", "alpha", "beta",
                             "samples_per_insert", "min_size", "error_buffer", "seed", NULL};
    unsigned long long capacity, min_size = 0, seed = 0;
    Py_ssize_t item_size;
    int prioritized = 0;
    double alpha = 0.6, beta = 0.4, spi = 0, err = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Kn|pdddKdK", kwlist, &capacity, &item_size,
                                     &prioritized, &alpha, &beta, &spi, &min_size, &err, &seed))
        return NULL;
    if (item_size <= 0) {
        PyErr_Format(PyExc_ValueError, "replay: item size must be > 0, not %zd", item_size);
        return NULL;
    }
    hive_t *h = engine_live(self);
    if (!h)
        return NULL;
    hive_replay_config_t cfg = {
        .capacity = capacity, .item_size = (size_t)item_size, .prioritized = prioritized,
        .alpha = alpha, .beta = beta, .samples_per_insert = spi, .min_size_to_sample = min_size,
        .error_buffer = err, .seed = seed,
    };
    hive_replay_t *rb;
    int rc = hive_replay_new(h, &cfg, &rb);
    if (rc < 0)
        return raise_hive(rc, "replay");
    ReplayObj *r = PyObject_New(ReplayObj, &ReplayType);
    if (!r) {
        hive_replay_free(rb);
        return NULL;
    }
    r->engine = (EngineObj *)Py_NewRef((PyObject *)self);
    r->rb = rb;
    r->item_size = (size_t)item_size;
    r->prev = NULL;
    r->next = self->replays;
    if (self->replays)
        self->replays->prev = r;
    self->replays = r;
    return (PyObject *)r;
}

static void replay_dealloc(ReplayObj *self)
{
    replay_unlink_free(self);
    Py_DECREF(self->engine);
    PyObject_Free(self);
}

static hive_replay_t *replay_live(ReplayObj *self)
{
    if (!engine_live(self->engine))
        return NULL;
    if (!self->rb || self->closing) {
        PyErr_SetString(Error, "the replay buffer is closed");
        return NULL;
    }
    return self->rb;
}

/* close(): free now, or (samples running without the GIL) mark it closed:
 * those samples end within a wait slice and the last one frees it */
static PyObject *replay_close(ReplayObj *self, PyObject *Py_UNUSED(ignored))
{
    if (self->inflight > 0)
        self->closing = 1;
    else
        replay_unlink_free(self);
    Py_RETURN_NONE;
}

static PyObject *replay_push(ReplayObj *self, PyObject *obj)
{
    hive_replay_t *rb = replay_live(self);
    if (!rb)
        return NULL;
    Py_buffer v;
    if (PyObject_GetBuffer(obj, &v, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if ((size_t)v.len % self->item_size) {
        PyErr_Format(PyExc_ValueError, "push: %zd bytes is not a whole number of %zu-byte items",
                     v.len, self->item_size);
        PyBuffer_Release(&v);
        return NULL;
    }
    int rc = hive_replay_push_batch(rb, v.buf, (size_t)v.len / self->item_size);
    PyBuffer_Release(&v);
    if (rc < 0)
        return raise_hive(rc, "push");
    Py_RETURN_NONE;
}

static int writable_of(PyObject *o, Py_buffer *v, size_t want, const char *what)
{
    if (PyObject_GetBuffer(o, v, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if ((size_t)v->len != want) {
        PyErr_Format(PyExc_ValueError, "sample: %s holds %zd bytes, %zu expected", what, v->len, want);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

#define SAMPLE_SLICE_NS 50000000   /* 50 ms: how soon a blocked sample sees a close */

/* hive_replay_sample_ex without the GIL, counted as running (inflight and
 * the engine's nbuffers) so neither the buffer nor the engine is freed
 * under it. The rate limiter's wait is cut into slices: between them, with
 * the GIL, a close() of the buffer or the engine ends it (HIVE_ESHUTDOWN).
 * The last sample of a buffer closed meanwhile frees it. */
static int replay_sample_sliced(ReplayObj *self, hive_replay_t *rb, size_t n, int distinct, void *items,
                                void *keys, void *weights, int64_t ns)
{
    EngineObj *e = self->engine;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    self->inflight++;
    e->nbuffers++;
    int rc;
    for (;;) {
        int64_t slice = ns;
        if (ns < 0 || ns > SAMPLE_SLICE_NS)
            slice = SAMPLE_SLICE_NS;
        Py_BEGIN_ALLOW_THREADS
        rc = hive_replay_sample_ex(rb, n, distinct ? HIVE_REPLAY_DISTINCT : 0, NULL, items, keys,
                                   weights, slice);
        Py_END_ALLOW_THREADS
        if (rc != HIVE_ETIMEDOUT)
            break;
        if (self->closing || e->closing) {
            rc = HIVE_ESHUTDOWN;
            break;
        }
        if (ns >= 0) {
            struct timespec t1;
            clock_gettime(CLOCK_MONOTONIC, &t1);
            int64_t spent = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
            if (spent >= ns)
                break;
            ns -= spent;
            t0 = t1;
        }
    }
    if (--self->inflight == 0 && self->closing)
        replay_unlink_free(self);
    buffer_gone(e);
    return rc;
}

/* Replay.sample_into(n, items, keys, weights, timeout=None, distinct=False) */
static PyObject *replay_sample_into(ReplayObj *self, PyObject *args)
{
    Py_ssize_t n;
    PyObject *io, *ko, *wo, *timeout = Py_None;
    int distinct = 0;
    if (!PyArg_ParseTuple(args, "nOOO|Op", &n, &io, &ko, &wo, &timeout, &distinct))
        return NULL;
    if (n <= 0) {
        PyErr_Format(PyExc_ValueError, "sample: n must be > 0, not %zd", n);
        return NULL;
    }
    int64_t ns = timeout_ns_of(timeout);
    if (ns == -2)
        return NULL;
    hive_replay_t *rb = replay_live(self);
    if (!rb)
        return NULL;
    size_t isz;
    if (__builtin_mul_overflow((size_t)n, self->item_size, &isz))
        return PyErr_NoMemory();
    Py_buffer iv, kv, wv;
    if (writable_of(io, &iv, isz, "items") < 0)
        return NULL;
    if (writable_of(ko, &kv, (size_t)n * 8, "keys") < 0) {
        PyBuffer_Release(&iv);
        return NULL;
    }
    if (writable_of(wo, &wv, (size_t)n * 8, "weights") < 0) {
        PyBuffer_Release(&iv);
        PyBuffer_Release(&kv);
        return NULL;
    }
    int rc = replay_sample_sliced(self, rb, (size_t)n, distinct, iv.buf, kv.buf, wv.buf, ns);
    PyBuffer_Release(&iv);
    PyBuffer_Release(&kv);
    PyBuffer_Release(&wv);
    if (rc == HIVE_ESHUTDOWN) {
        PyErr_SetString(self->engine->closing ? ShutDown : Error, self->engine->closing ?
                        "sample: the engine was closed while it waited" :
                        "sample: the replay buffer was closed while it waited");
        return NULL;
    }
    if (rc < 0)
        return raise_hive(rc, "sample");
    Py_RETURN_NONE;
}

static PyObject *replay_update(ReplayObj *self, PyObject *args)
{
    PyObject *ko, *po;
    if (!PyArg_ParseTuple(args, "OO", &ko, &po))
        return NULL;
    hive_replay_t *rb = replay_live(self);
    if (!rb)
        return NULL;
    Py_buffer kv, pv;
    if (PyObject_GetBuffer(ko, &kv, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(po, &pv, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&kv);
        return NULL;
    }
    PyObject *res = NULL;
    if (kv.len != pv.len || kv.len % 8) {
        PyErr_Format(PyExc_ValueError, "update_priorities: %zd bytes of keys and %zd of priorities "
                     "are not as many 8-byte values", kv.len, pv.len);
    } else {
        int rc = hive_replay_update_priorities(rb, kv.buf, pv.buf, (size_t)kv.len / 8);
        res = rc < 0 ? raise_hive(rc, "update_priorities") : PyLong_FromLong(rc);
    }
    PyBuffer_Release(&kv);
    PyBuffer_Release(&pv);
    return res;
}

static PyObject *replay_stats(ReplayObj *self, PyObject *Py_UNUSED(ignored))
{
    hive_replay_t *rb = replay_live(self);
    if (!rb)
        return NULL;
    hive_replay_stats_t s;
    int rc = hive_replay_stats(rb, &s);
    if (rc < 0)
        return raise_hive(rc, "stats");
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:d,s:d}", "capacity", (unsigned long long)s.capacity,
                         "size", (unsigned long long)s.size, "inserts", (unsigned long long)s.inserts,
                         "samples", (unsigned long long)s.samples, "max_priority", s.max_priority,
                         "total_priority", s.total_priority);
}

/* ------------------------------------------------------------------ C libraries */

typedef struct {
    PyObject_HEAD
    EngineObj *engine;
    void      *dl;        /* never closed: tasks may still run its code */
    PyObject  *path;
} LibraryObj;

typedef struct {
    PyObject_HEAD
    EngineObj                *engine;
    hive_actor_t              actor;
    const hive_actor_class_t *cls;
    int                       named;   /* named actors outlive their handle (as Ray's detached) */
    PyObject                 *job;     /* Python actors: (engine, cls, args, kwargs), kept for restarts */
    PyObject                 *last_method;   /* the method name last called and its index: */
    size_t                    last_idx;      /* a repeated call skips the name lookup */
} ActorObj;

/* make hive's symbols (linked into this extension) visible to libraries
 * loaded next, so their hive_fn code calls this engine's functions */
static int export_hive_symbols(void)
{
    static int done;
    if (done)
        return 0;
    Dl_info info;
    if (!dladdr((void *)&export_hive_symbols, &info) || !info.dli_fname) {
        PyErr_SetString(Error, "load: cannot find the hive extension's own file");
        return -1;
    }
    if (!dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL)) {
        PyErr_Format(Error, "load: cannot export hive's symbols: %s", dlerror());
        return -1;
    }
    done = 1;
    return 0;
}

static PyObject *engine_load(EngineObj *self, PyObject *args)
{
    PyObject *path;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path))
        return NULL;
    if (!engine_live(self) || export_hive_symbols() < 0) {
        Py_DECREF(path);
        return NULL;
    }
    void *dl = dlopen(PyBytes_AS_STRING(path), RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        PyErr_Format(PyExc_OSError, "load: %s", dlerror());
        Py_DECREF(path);
        return NULL;
    }
    LibraryObj *l = PyObject_New(LibraryObj, &LibraryType);
    if (!l) {
        Py_DECREF(path);
        return NULL;
    }
    l->engine = (EngineObj *)Py_NewRef((PyObject *)self);
    l->dl = dl;
    l->path = path;
    return (PyObject *)l;
}

static void library_dealloc(LibraryObj *self)
{
    Py_DECREF(self->engine);
    Py_DECREF(self->path);
    PyObject_Free(self);
}

static void *library_symbol(LibraryObj *self, PyObject *name, const char *what)
{
    const char *s = PyUnicode_AsUTF8(name);
    if (!s)
        return NULL;
    dlerror();
    void *p = dlsym(self->dl, s);
    if (!p)
        PyErr_Format(PyExc_ValueError, "%s: %S has no symbol %R", what, self->path, name);
    return p;
}

/* Arguments for a task, an actor or a call: Refs (and objects with a
 * _hive_arg naming one), actors, ints (int64), floats (double), or any
 * buffer (copied inline at submit). */
#define ARGPACK_INLINE 4

typedef struct {
    hive_arg_t *args;
    Py_buffer  *views;
    int64_t    *scalars;   /* ints, floats and actor ids, 8 bytes each */
    Py_ssize_t  n, nviews;
    /* up to ARGPACK_INLINE arguments need no allocation */
    hive_arg_t  args_in[ARGPACK_INLINE];
    Py_buffer   views_in[ARGPACK_INLINE];
    int64_t     scalars_in[ARGPACK_INLINE];
} argpack;

static void argpack_free(argpack *p)
{
    for (Py_ssize_t i = 0; i < p->nviews; i++)
        PyBuffer_Release(&p->views[i]);
    if (p->args != p->args_in) {
        PyMem_Free(p->args);
        PyMem_Free(p->views);
        PyMem_Free(p->scalars);
    }
}

/* An int (bool too) or a float as 8 bytes in *slot, *a naming them: 1;
 * anything else: 0; an int beyond 64 bits: -1 (OverflowError). Their
 * checks are flag tests, where each PyObject_TypeCheck that fails walks
 * the type's MRO: argpack_one looks here first, and actor.call packs its
 * arguments with this alone when all are numbers. */
static inline int pack_number(PyObject *o, int64_t *slot, hive_arg_t *a)
{
    if (PyLong_Check(o)) {
        if ((*slot = PyLong_AsLongLong(o)) == -1 && PyErr_Occurred())
            return -1;
    } else if (PyFloat_Check(o)) {
        double d = PyFloat_AS_DOUBLE(o);
        memcpy(slot, &d, 8);
    } else {
        return 0;
    }
    *a = HIVE_BYTES(slot, 8);
    return 1;
}

static int argpack_one(argpack *p, Py_ssize_t i, PyObject *o, int depth)
{
    hive_arg_t *a = &p->args[i];
    int num = pack_number(o, &p->scalars[i], a);
    if (num != 0)
        return num < 0 ? -1 : 0;
    if (is_ref(o)) {
        *a = HIVE_REF(((RefObj *)o)->ref);
        return 0;
    }
    if (PyObject_TypeCheck(o, &BufferType) && ((BufferObj *)o)->is_array) {
        *a = HIVE_REF(((BufferObj *)o)->ref);
        return 0;
    }
    if (PyObject_TypeCheck(o, &CellType)) {
        *a = HIVE_REF(((CellObj *)o)->cell);
        return 0;
    }
    if (PyObject_TypeCheck(o, &ActorType)) {
        memcpy(&p->scalars[i], &((ActorObj *)o)->actor.id, 8);
        *a = HIVE_BYTES(&p->scalars[i], 8);
        return 0;
    }
    if (depth == 0) {
        PyObject *inner = PyObject_GetAttrString(o, "_hive_arg");
        if (inner) {
            int rc = inner == Py_None ? 1 : argpack_one(p, i, inner, 1);
            Py_DECREF(inner);
            if (rc <= 0)
                return rc;
        } else if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear();
    }
    if (PyObject_CheckBuffer(o)) {
        Py_buffer *v = &p->views[p->nviews];
        if (PyObject_GetBuffer(o, v, PyBUF_C_CONTIGUOUS) < 0)
            return -1;
        p->nviews++;
        *a = HIVE_BYTES(v->buf, (size_t)v->len);
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "argument %zd: a hive.Ref, array, actor, int, float or buffer, "
                 "not %s", i, Py_TYPE(o)->tp_name);
    return -1;
}

static int argpack_make(argpack *p, PyObject *const *items, Py_ssize_t n)
{
    p->n = n;
    p->nviews = 0;
    if (n <= ARGPACK_INLINE) {
        p->args = p->args_in;
        p->views = p->views_in;
        p->scalars = p->scalars_in;
    } else {
        p->args = PyMem_Calloc((size_t)n, sizeof *p->args);
        p->views = PyMem_Calloc((size_t)n, sizeof *p->views);
        p->scalars = PyMem_Calloc((size_t)n, sizeof *p->scalars);
    }
    if (!p->args || !p->views || !p->scalars) {
        argpack_free(p);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (argpack_one(p, i, items[i], 0) < 0) {
            argpack_free(p);
            return -1;
        }
    return 0;
}

static int priority_of(PyObject *o, int *out)
{
    if (!o || o == Py_None)
        return 0;
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < -1 || v > 1) {
        PyErr_Format(PyExc_ValueError, "priority must be -1 (LOW), 0 (NORMAL) or 1 (HIGH), not %ld", v);
        return -1;
    }
    *out = (int)v;
    return 1;
}

static int kw_take(PyObject *kw, const char *name, PyObject **out)
{
    *out = NULL;
    if (!kw)
        return 0;
    PyObject *v = PyDict_GetItemString(kw, name);
    if (v) {
        *out = v;
        if (PyDict_DelItemString(kw, name) < 0)
            return -1;
    }
    return 0;
}

static int kw_reject_rest(PyObject *kw, const char *what)
{
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_Format(PyExc_TypeError, "%s: unexpected keyword arguments %R", what, kw);
        return -1;
    }
    return 0;
}

/* The keywords of a fastcall (their values follow the nargs positional
 * ones): vals[i] is the value of names[i] (NULL-terminated list), NULL when
 * not given; another keyword is a TypeError. No dict is built. */
static int kw_fast(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, const char *const *names,
                   PyObject **vals, const char *what)
{
    for (int i = 0; names[i]; i++)
        vals[i] = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int i = 0;
        while (names[i] && PyUnicode_CompareWithASCIIString(key, names[i]))
            i++;
        if (!names[i]) {
            PyErr_Format(PyExc_TypeError, "%s: unexpected keyword argument %R", what, key);
            return -1;
        }
        vals[i] = args[nargs + k];
    }
    return 0;
}

/* node= / worker= keywords (None: not given) -> a placement (include/hive.h
 * "Placement"; hive checks the index against the nodes and workers, a
 * HIVE_EINVAL with its sentence). worker only where allow_worker (actors).
 * 0, or -1 raised. */
static int place_of(PyObject *node, PyObject *worker, int allow_worker, int *place, unsigned *index)
{
    node = node == Py_None ? NULL : node;
    worker = worker == Py_None ? NULL : worker;
    if (node && worker) {
        PyErr_SetString(PyExc_ValueError, "give node= or worker=, not both");
        return -1;
    }
    if (worker && !allow_worker) {
        PyErr_SetString(PyExc_TypeError, "worker= places actors only");
        return -1;
    }
    PyObject *o = node ? node : worker;
    if (!o)
        return 0;
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0 || v > 65535) {
        PyErr_Format(PyExc_ValueError, "%s must be 0 .. 65535, not %ld", node ? "node" : "worker", v);
        return -1;
    }
    *place = node ? HIVE_PLACE_NODE : HIVE_PLACE_WORKER;
    *index = (unsigned)v;
    return 0;
}

/* Library.submit(name, *args, priority=0, retries=0, node=None) -> Future
 * (fastcall: no argument tuple or keyword dict is built) */
static PyObject *library_submit(LibraryObj *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"priority", "retries", "node", NULL};
    if (nargs < 1 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "submit(name, *args): name must be a str");
        return NULL;
    }
    PyObject *kv[3];
    hive_opts_t opts = {0};
    if (kw_fast(args, nargs, kwnames, names, kv, "submit") < 0 || priority_of(kv[0], &opts.priority) < 0 ||
        place_of(kv[2], NULL, 0, &opts.place, &opts.place_index) < 0)
        return NULL;
    if (kv[1]) {
        long r = PyLong_AsLong(kv[1]);
        if (r == -1 && PyErr_Occurred())
            return NULL;
        if (r < 0 || r > 1000000) {
            PyErr_Format(PyExc_ValueError, "retries must be 0 .. 1000000, not %ld", r);
            return NULL;
        }
        opts.max_retries = (unsigned)r;
    }
    hive_fn fn = (hive_fn)library_symbol(self, args[0], "submit");
    hive_t *h = fn ? engine_live(self->engine) : NULL;
    argpack p;
    if (!h || argpack_make(&p, args + 1, nargs - 1) < 0)
        return NULL;
    hive_ref_t result;
    int rc = hive_submit(h, fn, p.args, (size_t)p.n, &opts, &result);
    argpack_free(&p);
    return rc < 0 ? raise_hive(rc, "submit") : ref_new(self->engine, result, &FutureType);
}

/* Library.actor(class_name, *args, name=None, max_restarts=0, max_concurrency=0,
 * node=None, worker=None) -> Actor */
static PyObject *library_actor(LibraryObj *self, PyObject *args, PyObject *kw_in)
{
    if (PyTuple_GET_SIZE(args) < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(args, 0))) {
        PyErr_SetString(PyExc_TypeError, "actor(class_name, *args): class_name must be a str");
        return NULL;
    }
    PyObject *kw = kw_in ? PyDict_Copy(kw_in) : NULL, *name_o, *restarts_o, *conc_o, *node_o, *worker_o;
    PyObject *res = NULL;
    hive_actor_opts_t opts = {0};
    if ((kw_in && !kw) || kw_take(kw, "name", &name_o) < 0 || kw_take(kw, "max_restarts", &restarts_o) < 0 ||
        kw_take(kw, "max_concurrency", &conc_o) < 0 || kw_take(kw, "node", &node_o) < 0 ||
        kw_take(kw, "worker", &worker_o) < 0 || kw_reject_rest(kw, "actor") < 0 ||
        place_of(node_o, worker_o, 1, &opts.place, &opts.place_index) < 0)
        goto out;
    if (name_o && name_o != Py_None && !(opts.name = PyUnicode_AsUTF8(name_o)))
        goto out;
    long v;
    if (restarts_o) {
        if ((v = PyLong_AsLong(restarts_o)) == -1 && PyErr_Occurred())
            goto out;
        if (v < 0 || v > 1000000) {
            PyErr_Format(PyExc_ValueError, "max_restarts must be 0 .. 1000000, not %ld", v);
            goto out;
        }
        opts.max_restarts = (unsigned)v;
    }
    if (conc_o) {
        if ((v = PyLong_AsLong(conc_o)) == -1 && PyErr_Occurred())
            goto out;
        if (v < 0 || v > HIVE_MAX_CONCURRENCY) {
            PyErr_Format(PyExc_ValueError, "max_concurrency must be 0 .. %d, not %ld", HIVE_MAX_CONCURRENCY, v);
            goto out;
        }
        opts.max_concurrency = (unsigned)v;
    }
    const hive_actor_class_t *cls = library_symbol(self, PyTuple_GET_ITEM(args, 0), "actor");
    hive_t *h = cls ? engine_live(self->engine) : NULL;
    argpack p;
    if (!h || argpack_make(&p, &PyTuple_GET_ITEM(args, 1), PyTuple_GET_SIZE(args) - 1) < 0)
        goto out;
    hive_actor_t actor;
    int rc = hive_actor_new(h, cls, p.args, (size_t)p.n, &opts, &actor);
    argpack_free(&p);
    if (rc < 0) {
        raise_hive(rc, "actor");
        goto out;
    }
    ActorObj *a = PyObject_New(ActorObj, &ActorType);
    if (!a)
        goto out;
    a->engine = (EngineObj *)Py_NewRef((PyObject *)self->engine);
    a->actor = actor;
    a->cls = cls;
    a->named = opts.name != NULL;
    a->job = NULL;
    a->last_method = NULL;
    res = (PyObject *)a;
out:
    Py_XDECREF(kw);
    return res;
}

static PyObject *pyactor_call(ActorObj *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

static void actor_dealloc(ActorObj *self)
{
    if (!self->named && self->engine->h)
        hive_actor_kill(self->engine->h, self->actor);
    if (!self->named)   /* a named actor may restart after its handle is gone */
        Py_XDECREF(self->job);
    Py_XDECREF(self->last_method);
    Py_DECREF(self->engine);
    PyObject_Free(self);
}

/* Actor.call(method, *args, priority=None) -> Future. Fastcall, no tuple or
 * dict built; a method name given as the same str object as the last call's
 * (a literal is one object) skips the lookup by name. */
static PyObject *actor_call(ActorObj *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"priority", NULL};
    if (nargs < 1 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "call(method, *args): method must be a str");
        return NULL;
    }
    if (self->job)
        return pyactor_call(self, args, nargs, kwnames);
    PyObject *name = args[0];
    size_t idx = 0;
    if (name == self->last_method) {
        idx = self->last_idx;
    } else {
        const char *m = PyUnicode_AsUTF8(name);
        if (!m)
            return NULL;
        while (idx < self->cls->nmethods && strcmp(self->cls->methods[idx].name, m))
            idx++;
        if (idx == self->cls->nmethods) {
            PyErr_Format(PyExc_ValueError, "call: class %s has no method %R",
                         self->cls->name ? self->cls->name : "?", name);
            return NULL;
        }
        Py_XSETREF(self->last_method, Py_NewRef(name));
        self->last_idx = idx;
    }
    PyObject *prio_o = NULL;
    hive_opts_t opts = {0};
    int has_prio = 0;
    if (kwnames && (kw_fast(args, nargs, kwnames, names, &prio_o, "call") < 0 ||
                    (has_prio = priority_of(prio_o, &opts.priority)) < 0))
        return NULL;
    hive_t *h = engine_live(self->engine);
    if (!h)
        return NULL;
    hive_ref_t result;
    int rc;
    hive_arg_t a[ARGPACK_INLINE];
    int64_t sc[ARGPACK_INLINE];
    Py_ssize_t n = nargs - 1, i = 0;
    /* only ints and floats: packed as argpack_one packs them, no argpack */
    for (int num; n <= ARGPACK_INLINE && i < n; i++)
        if ((num = pack_number(args[1 + i], &sc[i], &a[i])) < 0)
            return NULL;
        else if (num == 0)
            break;
    if (n <= ARGPACK_INLINE && i == n) {
        rc = hive_call(h, self->actor, (unsigned)idx, a, (size_t)n, has_prio ? &opts : NULL, &result);
    } else {
        argpack p;
        if (argpack_make(&p, args + 1, n) < 0)
            return NULL;
        rc = hive_call(h, self->actor, (unsigned)idx, p.args, (size_t)p.n, has_prio ? &opts : NULL, &result);
        argpack_free(&p);
    }
    return rc < 0 ? raise_hive(rc, "call") : ref_new(self->engine, result, &FutureType);
}

static PyObject *actor_kill(ActorObj *self, PyObject *Py_UNUSED(ignored))
{
    hive_t *h = engine_live(self->engine);
    if (!h)
        return NULL;
    int rc = hive_actor_kill(h, self->actor);
    if (rc < 0)
        return raise_hive(rc, "kill");
    Py_RETURN_NONE;
}


/* ------------------------------------------------------------------ Python callables
 *
 * engine.remote(fn) and engine.actor(Cls): the task or method is a C
 * trampoline whose first argument is the address of a Python "job" tuple
 * (a count taken at submit, dropped by the run); Ref arguments also go as
 * hive refs, so the trampoline runs once they are sealed. It takes the GIL,
 * has the package's runner (hive._run_*) call the Python code, and writes
 * the result it encodes (kind 0 raw, 1 typed, 2 pickle) as the task's
 * result. Correct, not parallel: every Python callable holds the GIL.
 */
#if PY_VERSION_HEX >= 0x030D0000
#define interpreter_finalizing() Py_IsFinalizing()
#else
#define interpreter_finalizing() _Py_IsFinalizing()
#endif

static PyObject *py_runners;   /* (run_task, new_actor, run_method, view_of) from hive/__init__.py */

static PyObject *set_runners(PyObject *Py_UNUSED(m), PyObject *t)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 9 || !PyType_Check(PyTuple_GET_ITEM(t, 5)) ||
        !PyType_Check(PyTuple_GET_ITEM(t, 6)) || !PyType_Check(PyTuple_GET_ITEM(t, 7))) {
        PyErr_SetString(PyExc_TypeError, "_set_runners((run_task, new_actor, run_method, view_of, "
                        "put_other, numpy.ndarray, numpy.generic, ObjectView, typed_args))");
        return NULL;
    }
    Py_XSETREF(py_runners, Py_NewRef(t));
    Py_XSETREF(py_view_of, Py_NewRef(PyTuple_GET_ITEM(t, 3)));
    Py_XSETREF(py_put_other, Py_NewRef(PyTuple_GET_ITEM(t, 4)));
    Py_XSETREF(np_ndarray, Py_NewRef(PyTuple_GET_ITEM(t, 5)));
    Py_XSETREF(np_generic, Py_NewRef(PyTuple_GET_ITEM(t, 6)));
    Py_XSETREF(py_object_view, Py_NewRef(PyTuple_GET_ITEM(t, 7)));
    Py_XSETREF(py_typed_args, Py_NewRef(PyTuple_GET_ITEM(t, 8)));
    Py_RETURN_NONE;
}

static PyObject *job_of(hive_ctx_t *ctx)
{
    size_t n = 0;
    const void *p = hive_arg(ctx, 0, &n);
    PyObject *job = NULL;
    if (p && n == sizeof job)
        memcpy(&job, p, sizeof job);
    return job;
}

/* run runner i on job; write its (object, kind) answer as the result */
/* the task a Python callable runs in on this thread (for worker-locals) */
static _Thread_local hive_ctx_t *py_cur_ctx;

static int run_and_return(hive_ctx_t *ctx, int i, PyObject *job)
{
    hive_ctx_t *outer = py_cur_ctx;     /* a get inside may run another task here */
    py_cur_ctx = ctx;
    PyObject *res = py_runners ? PyObject_CallObject(PyTuple_GET_ITEM(py_runners, i), job) : NULL;
    py_cur_ctx = outer;
    int kind, rc = 1;
    PyObject *obj;
    Py_buffer v;
    if (!res || !PyArg_ParseTuple(res, "Oi", &obj, &kind)) {
        PyErr_Print();
        Py_XDECREF(res);
        return 1;
    }
    if (PyObject_GetBuffer(obj, &v, kind == 1 ? (PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) : PyBUF_C_CONTIGUOUS) == 0) {
        size_t total;
        if (payload_size(&v, kind, &total) == 0) {
            void *dst = hive_return_alloc(ctx, total);
            if (dst) {
                payload_write(dst, &v, kind);
                rc = 0;
            }
        }
        PyBuffer_Release(&v);
    }
    if (PyErr_Occurred())
        PyErr_Print();
    Py_DECREF(res);
    return rc;
}

static int py_task_trampoline(hive_ctx_t *ctx)
{
    PyObject *job = job_of(ctx);
    if (!job || interpreter_finalizing())
        return 1;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = run_and_return(ctx, 0, job);
    Py_DECREF(job);
    PyGILState_Release(g);
    return rc;
}

typedef struct { PyObject *instance; } pyactor_state;

static int pyactor_init(void *self, hive_ctx_t *ctx)
{
    PyObject *job = job_of(ctx);   /* the handle keeps it (restarts run init again) */
    if (!job || interpreter_finalizing())
        return 1;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *inst = py_runners ? PyObject_CallObject(PyTuple_GET_ITEM(py_runners, 1), job) : NULL;
    if (!inst)
        PyErr_Print();
    ((pyactor_state *)self)->instance = inst;
    PyGILState_Release(g);
    return inst ? 0 : 1;
}

static void pyactor_fini(void *self)
{
    pyactor_state *st = self;
    if (!st->instance || interpreter_finalizing())
        return;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_CLEAR(st->instance);
    PyGILState_Release(g);
}

static int pyactor_method(void *self, hive_ctx_t *ctx)
{
    PyObject *job = job_of(ctx);
    pyactor_state *st = self;
    if (!job || interpreter_finalizing())
        return 1;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *full = PyTuple_New(PyTuple_GET_SIZE(job) + 1);   /* (instance, *job) */
    int rc = 1;
    if (full) {
        PyTuple_SET_ITEM(full, 0, Py_NewRef(st->instance ? st->instance : Py_None));
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(job); i++)
            PyTuple_SET_ITEM(full, i + 1, Py_NewRef(PyTuple_GET_ITEM(job, i)));
        rc = run_and_return(ctx, 2, full);
        Py_DECREF(full);
    }
    Py_DECREF(job);
    PyGILState_Release(g);
    return rc;
}

static const hive_method_t pyactor_methods[] = { { "__python__", pyactor_method, HIVE_PRIO_NORMAL } };
static const hive_actor_class_t pyactor_class = {
    .name = "python", .size = sizeof(pyactor_state), .init = pyactor_init, .fini = pyactor_fini,
    .methods = pyactor_methods, .nmethods = 1,
};

/* hive args for a job: its address, then every Ref among refs_from's items */
static int job_args(PyObject **jobp, PyObject *refs_from, hive_arg_t **out, size_t *n)
{
    Py_ssize_t m = PyTuple_GET_SIZE(refs_from), k = 1;
    hive_arg_t *a = PyMem_Calloc((size_t)m + 1, sizeof *a);
    if (!a) {
        PyErr_NoMemory();
        return -1;
    }
    a[0] = HIVE_BYTES(jobp, sizeof *jobp);
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *o = PyTuple_GET_ITEM(refs_from, i);
        if (PyObject_TypeCheck(o, &RefType))
            a[k++] = HIVE_REF(((RefObj *)o)->ref);
    }
    *out = a;
    *n = (size_t)k;
    return 0;
}

/* Engine._submit_py(fn, args, kwargs, priority) -> Future */
static PyObject *engine_submit_py(EngineObj *self, PyObject *a)
{
    PyObject *fn, *args, *kwargs, *prio_o;
    if (!PyArg_ParseTuple(a, "OO!O!O", &fn, &PyTuple_Type, &args, &PyDict_Type, &kwargs, &prio_o))
        return NULL;
    hive_opts_t opts = {0};
    if (priority_of(prio_o, &opts.priority) < 0)
        return NULL;
    hive_t *h = engine_live(self);
    if (!h)
        return NULL;
    PyObject *job = PyTuple_Pack(4, (PyObject *)self, fn, args, kwargs);
    hive_arg_t *ha;
    size_t n;
    if (!job || job_args(&job, args, &ha, &n) < 0) {
        Py_XDECREF(job);
        return NULL;
    }
    hive_ref_t result;
    int rc = hive_submit(h, py_task_trampoline, ha, n, &opts, &result);   /* the job's count goes to the task */
    PyMem_Free(ha);
    if (rc < 0) {
        Py_DECREF(job);
        return raise_hive(rc, "remote");
    }
    return ref_new(self, result, &FutureType);
}

/* Engine._actor_py(cls, args, kwargs, name, max_restarts, node, worker) -> Actor */
static PyObject *engine_actor_py(EngineObj *self, PyObject *a)
{
    PyObject *cls, *args, *kwargs, *node = Py_None, *worker = Py_None;
    const char *name = NULL;
    unsigned restarts = 0;
    int place = 0;
    unsigned place_index = 0;
    if (!PyArg_ParseTuple(a, "OO!O!|zIOO", &cls, &PyTuple_Type, &args, &PyDict_Type, &kwargs, &name, &restarts,
                          &node, &worker) ||
        place_of(node, worker, 1, &place, &place_index) < 0)
        return NULL;
    hive_t *h = engine_live(self);
    if (!h)
        return NULL;
    PyObject *job = PyTuple_Pack(4, (PyObject *)self, cls, args, kwargs);
    hive_arg_t *ha;
    size_t n;
    if (!job || job_args(&job, args, &ha, &n) < 0) {
        Py_XDECREF(job);
        return NULL;
    }
    hive_actor_opts_t opts = { .name = name, .max_restarts = restarts, .place = place, .place_index = place_index };
    hive_actor_t actor;
    int rc = hive_actor_new(h, &pyactor_class, ha, n, &opts, &actor);
    PyMem_Free(ha);
    if (rc < 0) {
        Py_DECREF(job);
        return raise_hive(rc, "actor");
    }
    ActorObj *o = PyObject_New(ActorObj, &ActorType);
    if (!o) {
        hive_actor_kill(h, actor);
        Py_DECREF(job);
        return NULL;
    }
    o->engine = (EngineObj *)Py_NewRef((PyObject *)self);
    o->actor = actor;
    o->cls = &pyactor_class;
    o->named = name != NULL;
    o->job = job;
    o->last_method = NULL;
    return (PyObject *)o;
}

/* Actor.call on a Python actor: the job is (engine, method, args, kwargs) */
static PyObject *pyactor_call(ActorObj *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *kw = PyDict_New(), *prio_o = NULL, *res = NULL, *rest = NULL, *job = NULL;
    hive_opts_t opts = {0};
    int has_prio = 0;
    if (!kw)
        return NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        if (!PyUnicode_CompareWithASCIIString(key, "priority"))
            prio_o = args[nargs + k];
        else if (PyDict_SetItem(kw, key, args[nargs + k]) < 0)
            goto out;
    }
    if ((has_prio = priority_of(prio_o, &opts.priority)) < 0)
        goto out;
    hive_t *h = engine_live(self->engine);
    if (!h || !(rest = PyTuple_New(nargs - 1)))
        goto out;
    for (Py_ssize_t i = 1; i < nargs; i++)
        PyTuple_SET_ITEM(rest, i - 1, Py_NewRef(args[i]));
    job = PyTuple_Pack(4, (PyObject *)self->engine, args[0], rest, kw);
    hive_arg_t *ha;
    size_t n;
    if (!job || job_args(&job, rest, &ha, &n) < 0)
        goto out;
    hive_ref_t result;
    int rc = hive_call(h, self->actor, 0, ha, n, has_prio ? &opts : NULL, &result);
    PyMem_Free(ha);
    if (rc < 0) {
        raise_hive(rc, "call");
        goto out;
    }
    job = NULL;   /* its count went to the call */
    res = ref_new(self->engine, result, &FutureType);
out:
    Py_XDECREF(job);
    Py_XDECREF(rest);
    Py_DECREF(kw);
    return res;
}

/* ------------------------------------------------------------------ DLPack
 *
 * The DLPack ABI (v0.8, the one torch and numpy take through __dlpack__),
 * declared here from the spec: a capsule named "dltensor" holding a
 * DLManagedTensor; the consumer renames it "used_dltensor" and calls the
 * deleter when done. Strides count elements.
 */
typedef struct { int32_t device_type, device_id; } DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;
typedef struct {
    void      *data;
    DLDevice   device;
    int32_t    ndim;
    DLDataType dtype;
    int64_t   *shape;
    int64_t   *strides;
    uint64_t   byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void    *manager_ctx;
    void   (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
enum { kDLCPU = 1, kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLComplex = 5, kDLBool = 6 };

typedef struct {
    DLManagedTensor mt;
    Py_buffer       view;      /* keeps the exporter (and its count) alive */
    int64_t         dims[];    /* shape, then strides */
} dlpack_holder;

static void dlpack_deleter(DLManagedTensor *mt)
{
    dlpack_holder *d = (dlpack_holder *)mt;
    PyGILState_STATE g = PyGILState_Ensure();
    PyBuffer_Release(&d->view);
    PyGILState_Release(g);
    PyMem_RawFree(d);
}

static void dlpack_capsule_destructor(PyObject *cap)
{
    if (!PyCapsule_IsValid(cap, "dltensor"))
        return;   /* consumed: the consumer calls the deleter */
    DLManagedTensor *mt = PyCapsule_GetPointer(cap, "dltensor");
    if (mt && mt->deleter)
        mt->deleter(mt);
}

static int dl_dtype_of(const char *fmt, Py_ssize_t itemsize, DLDataType *out)
{
    if (!fmt)
        fmt = "B";
    if (*fmt == '<' || *fmt == '=' || *fmt == '@')
        fmt++;
    uint8_t code;
    if (fmt[0] == 'Z' && strchr("fdg", fmt[1]) && !fmt[2])
        code = kDLComplex;
    else if (fmt[1])
        return -1;
    else if (*fmt == '?')
        code = kDLBool;
    else if (strchr("bhilq", *fmt))
        code = kDLInt;
    else if (strchr("BHILQ", *fmt))
        code = kDLUInt;
    else if (strchr("efd", *fmt))
        code = kDLFloat;
    else
        return -1;
    *out = (DLDataType){ code, (uint8_t)(itemsize * 8), 1 };
    return 0;
}

/* to_dlpack(obj): a "dltensor" capsule over obj's buffer, no copy */
static PyObject *to_dlpack(PyObject *Py_UNUSED(m), PyObject *obj)
{
    Py_buffer v;
    if (PyObject_GetBuffer(obj, &v, PyBUF_RECORDS_RO) < 0)
        return NULL;
    DLDataType dt;
    if (dl_dtype_of(v.format, v.itemsize, &dt) < 0) {
        PyErr_Format(PyExc_BufferError, "DLPack has no type for buffer format %s", v.format);
        PyBuffer_Release(&v);
        return NULL;
    }
    dlpack_holder *d = PyMem_RawCalloc(1, sizeof *d + 2 * sizeof(int64_t) * (size_t)(v.ndim + 1));
    if (!d) {
        PyBuffer_Release(&v);
        return PyErr_NoMemory();
    }
    int64_t *shape = d->dims, *strides = d->dims + v.ndim;
    Py_ssize_t stride = v.itemsize;
    for (int i = v.ndim - 1; i >= 0; i--) {
        shape[i] = v.shape[i];
        Py_ssize_t s = v.strides ? v.strides[i] : stride;
        if (s % v.itemsize) {
            PyErr_Format(PyExc_BufferError, "stride %zd is not a multiple of the item size %zd", s, v.itemsize);
            PyBuffer_Release(&v);
            PyMem_RawFree(d);
            return NULL;
        }
        strides[i] = s / v.itemsize;
        stride *= v.shape[i];
    }
    d->view = v;
    d->mt.dl_tensor = (DLTensor){
        .data = v.buf, .device = { kDLCPU, 0 }, .ndim = v.ndim, .dtype = dt,
        .shape = shape, .strides = strides, .byte_offset = 0,
    };
    d->mt.manager_ctx = d;
    d->mt.deleter = dlpack_deleter;
    PyObject *cap = PyCapsule_New(&d->mt, "dltensor", dlpack_capsule_destructor);
    if (!cap) {
        PyBuffer_Release(&d->view);
        PyMem_RawFree(d);
    }
    return cap;
}

/* ------------------------------------------------------------------ env pool */

/* An EnvPool wraps hive_envpool_t. Every batch it returns is four Buffers,
 * each retaining its batch array's object, so a numpy view never dangles;
 * the pool rewrites the arrays' contents on its next reset/step/recv (the
 * C contract), which is what "valid until the next call" means here. */
struct EnvPoolObj {
    PyObject_HEAD
    EngineObj      *engine;
    hive_envpool_t *pool;       /* NULL once closed */
    int             inside;     /* a call is running with the GIL released */
    int             act_dtype;  /* hive_dtype_t of the actions */
    hive_envpool_batch_t last;  /* the last batch returned (its C addresses) */
    EnvPoolObj     *next, *prev;
};

/* Unlink first, then free without the GIL, counted in the engine's
 * nbuffers: an engine.close() on another thread meanwhile finds the pool
 * gone from its list and leaves the engine's stop to this free's end, so
 * hive_shutdown never runs under hive_envpool_free. */
static void envpool_unlink_free(EnvPoolObj *p)
{
    EngineObj *e = p->engine;
    if (p->prev)
        p->prev->next = p->next;
    else if (e && e->envpools == p)
        e->envpools = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->next = p->prev = NULL;
    if (p->pool) {
        hive_envpool_t *pool = p->pool;
        p->pool = NULL;
        e->nbuffers++;
        Py_BEGIN_ALLOW_THREADS
        hive_envpool_free(pool);
        Py_END_ALLOW_THREADS
        buffer_gone(e);
    }
}

/* hive dtype of a buffer format character ('<' '=' '@' prefixes allowed); 0 if none */
static int hive_dtype_of_format(const char *fmt, Py_ssize_t itemsize)
{
    if (!fmt)
        fmt = "B";
    if (*fmt == '<' || *fmt == '=' || *fmt == '@')
        fmt++;
    if (!fmt[0] || fmt[1])
        return 0;
    switch (*fmt) {
    case '?': return HIVE_BOOL;
    case 'b': return HIVE_I8;
    case 'B': return HIVE_U8;
    case 'f': return HIVE_F32;
    case 'd': return HIVE_F64;
    default: break;
    }
    const char *s = strchr("hilq", *fmt) ? "s" : strchr("HILQ", *fmt) ? "u" : NULL;
    if (!s)
        return 0;
    int sgn = *s == 's';
    switch (itemsize) {
    case 2: return sgn ? HIVE_I16 : HIVE_U16;
    case 4: return sgn ? HIVE_I32 : HIVE_U32;
    case 8: return sgn ? HIVE_I64 : HIVE_U64;
    default: return 0;
    }
}

static PyObject *engine_envpool(EngineObj *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"env", "num_envs", "batch_size", "seed", "step_ns", "episode_len",
                             "heavy_tail", "env_node", NULL};
    const char *env;
    long long num_envs, batch = 0, step_ns = 1000, episode_len = 100;
    unsigned long long seed = 0;
    int heavy = 0;
    PyObject *nodes_in = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sL|LKLLpO", kwlist, &env, &num_envs, &batch, &seed,
                                     &step_ns, &episode_len, &heavy, &nodes_in))
        return NULL;
    const hive_env_class_t *cls;
    if (!strcmp(env, "CartPole"))
        cls = &hive_env_cartpole;
    else if (!strcmp(env, "Synthetic"))
        cls = &hive_env_synthetic;
    else {
        PyErr_Format(PyExc_ValueError, "envpool: env must be \"CartPole\" or \"Synthetic\", not \"%s\"", env);
        return NULL;
    }
    if (num_envs <= 0 || batch < 0 || step_ns < 0 || episode_len < 0 || episode_len > UINT_MAX) {
        PyErr_Format(PyExc_ValueError, "envpool: num_envs %lld must be > 0; batch_size %lld, step_ns %lld "
                     "and episode_len %lld must be >= 0", num_envs, batch, step_ns, episode_len);
        return NULL;
    }
    hive_t *h = engine_live(self);
    if (!h)
        return NULL;
    unsigned *nodes = NULL;
    if (nodes_in != Py_None) {
        PyObject *seq = PySequence_Fast(nodes_in, "envpool: env_node must be a sequence of ints");
        if (!seq)
            return NULL;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (n != num_envs) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "envpool: env_node has %zd entries for %lld envs", n, num_envs);
            return NULL;
        }
        nodes = PyMem_Malloc(sizeof *nodes * (size_t)n);
        if (!nodes) {
            Py_DECREF(seq);
            return PyErr_NoMemory();
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
            if (v == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                PyMem_Free(nodes);
                return NULL;
            }
            if (v < 0 || v > (long)UINT_MAX) {
                Py_DECREF(seq);
                PyMem_Free(nodes);
                PyErr_Format(PyExc_ValueError, "envpool: env_node[%zd] = %ld is not a node index", i, v);
                return NULL;
            }
            nodes[i] = (unsigned)v;
        }
        Py_DECREF(seq);
    }
    hive_env_synthetic_config_t syn = {
        .cost_ns = (uint64_t)step_ns, .episode_len = (unsigned)episode_len, .heavy_tail = heavy,
    };
    hive_envpool_opts_t opts = {
        .num_envs = (size_t)num_envs, .batch_size = (size_t)batch, .seed = seed,
        .config = cls == &hive_env_synthetic ? &syn : NULL, .env_node = nodes,
    };
    hive_envpool_t *pool = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = hive_envpool_new(h, cls, &opts, &pool);
    Py_END_ALLOW_THREADS
    PyMem_Free(nodes);
    if (rc < 0)
        return raise_hive(rc, "envpool");
    EnvPoolObj *p = PyObject_New(EnvPoolObj, &EnvPoolType);
    if (!p) {
        hive_envpool_free(pool);
        return NULL;
    }
    p->engine = (EngineObj *)Py_NewRef((PyObject *)self);
    p->pool = pool;
    p->inside = 0;
    p->act_dtype = cls->act_dtype;
    memset(&p->last, 0, sizeof p->last);
    p->prev = NULL;
    p->next = self->envpools;
    if (self->envpools)
        self->envpools->prev = p;
    self->envpools = p;
    return (PyObject *)p;
}

static void envpool_dealloc(EnvPoolObj *self)
{
    envpool_unlink_free(self);
    Py_XDECREF(self->engine);
    PyObject_Free(self);
}

/* the pool for a new call: ShutDown when closed, Error when another thread is inside */
static hive_envpool_t *envpool_live(EnvPoolObj *self)
{
    if (!self->pool || !engine_live(self->engine)) {
        if (!PyErr_Occurred())
            PyErr_SetString(ShutDown, "the env pool is closed");
        return NULL;
    }
    if (self->inside) {
        PyErr_SetString(Error, "the env pool is in use by another thread (a pool belongs to one "
                        "thread at a time)");
        return NULL;
    }
    return self->pool;
}

/* a retained, read-only Buffer over one batch array */
static PyObject *envpool_array_buffer(EnvPoolObj *self, const hive_array_t *a)
{
    EngineObj *e = self->engine;
    int rc = hive_retain(e->h, a->ref);
    if (rc < 0)
        return raise_hive(rc, "envpool");
    size_t isz = hive_dtype_size(a->dtype);
    int64_t numel = hive_array_numel(a);
    BufferObj *b = buffer_new(e, a->ref, a->data, (size_t)numel * isz, 1);
    if (!b)
        return NULL;
    static const char *fmts[] = {"", "?", "b", "B", "h", "H", "i", "I", "q", "Q", "f", "d"};
    b->itemsize = (Py_ssize_t)isz;
    b->ndim = a->ndim;
    for (int i = 0; i < a->ndim; i++)
        b->shape[i] = (Py_ssize_t)a->shape[i];
    strcpy(b->format, fmts[a->dtype]);
    return (PyObject *)b;
}

/* (obs, reward, done, env_id) Buffers of a batch */
static PyObject *envpool_batch_tuple(EnvPoolObj *self, const hive_envpool_batch_t *bt)
{
    self->last = *bt;
    const hive_array_t *arrs[4] = {&bt->obs, &bt->reward, &bt->done, &bt->env_id};
    PyObject *t = PyTuple_New(4);
    if (!t)
        return NULL;
    for (int i = 0; i < 4; i++) {
        PyObject *b = envpool_array_buffer(self, arrs[i]);
        if (!b) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, b);
    }
    return t;
}

/* the engine counts a call in flight as a live Buffer, so close() from
 * another thread waits for it instead of freeing the pool under it */
static void envpool_enter(EnvPoolObj *self)
{
    self->inside = 1;
    self->engine->nbuffers++;
}

static void envpool_leave(EnvPoolObj *self)
{
    EngineObj *e = self->engine;
    self->inside = 0;
    buffer_gone(e);
}

/* actions (buffer protocol) -> a hive_array_t over the caller's memory; PyBuffer to release */
static int envpool_actions(EnvPoolObj *self, PyObject *o, Py_buffer *v, hive_array_t *a)
{
    if (PyObject_GetBuffer(o, v, PyBUF_RECORDS_RO) < 0)
        return -1;
    int dt = hive_dtype_of_format(v->format, v->itemsize);
    if (dt != self->act_dtype || v->ndim < 1 || v->ndim > HIVE_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "envpool: actions must be an [n, ...] array of hive dtype %d "
                     "(int32 for CartPole and Synthetic), not format '%s' with %d dimensions",
                     self->act_dtype, v->format ? v->format : "B", v->ndim);
        PyBuffer_Release(v);
        return -1;
    }
    memset(a, 0, sizeof *a);
    a->data = v->buf;
    a->dtype = (hive_dtype_t)dt;
    a->ndim = v->ndim;
    for (int i = 0; i < v->ndim; i++) {
        a->shape[i] = v->shape[i];
        a->strides[i] = v->strides ? v->strides[i] : 0;
    }
    if (!v->strides) {
        int64_t s = v->itemsize;
        for (int i = v->ndim - 1; i >= 0; i--) {
            a->strides[i] = s;
            s *= v->shape[i];
        }
    }
    return 0;
}

/* the common tail: a batch call's rc -> tuple or exception */
static PyObject *envpool_result(EnvPoolObj *self, int rc, const hive_envpool_batch_t *bt, const char *what)
{
    PyObject *out = rc < 0 ? raise_hive(rc, what) : envpool_batch_tuple(self, bt);
    envpool_leave(self);
    return out;
}

static PyObject *envpool_reset(EnvPoolObj *self, PyObject *Py_UNUSED(ignored))
{
    hive_envpool_t *pool = envpool_live(self);
    if (!pool)
        return NULL;
    hive_envpool_batch_t bt;
    int rc;
    envpool_enter(self);
    Py_BEGIN_ALLOW_THREADS
    rc = hive_envpool_reset(pool, &bt);
    Py_END_ALLOW_THREADS
    return envpool_result(self, rc, &bt, "reset");
}

static PyObject *envpool_step(EnvPoolObj *self, PyObject *actions)
{
    hive_envpool_t *pool = envpool_live(self);
    if (!pool)
        return NULL;
    Py_buffer v;
    hive_array_t a;
    if (envpool_actions(self, actions, &v, &a) < 0)
        return NULL;
    hive_envpool_batch_t bt;
    int rc;
    envpool_enter(self);
    Py_BEGIN_ALLOW_THREADS
    rc = hive_envpool_step(pool, &a, &bt);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v);
    return envpool_result(self, rc, &bt, "step");
}

/* send(actions, env_ids): env_ids a contiguous int32 buffer of n ids */
static PyObject *envpool_send(EnvPoolObj *self, PyObject *args)
{
    PyObject *acts, *ids;
    if (!PyArg_ParseTuple(args, "OO", &acts, &ids))
        return NULL;
    hive_envpool_t *pool = envpool_live(self);
    if (!pool)
        return NULL;
    Py_buffer iv;
    if (PyObject_GetBuffer(ids, &iv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (hive_dtype_of_format(iv.format, iv.itemsize) != HIVE_I32 || iv.ndim != 1) {
        PyErr_Format(PyExc_ValueError, "send: env_ids must be a 1-d int32 array, not format '%s' "
                     "with %d dimensions", iv.format ? iv.format : "B", iv.ndim);
        PyBuffer_Release(&iv);
        return NULL;
    }
    Py_buffer v;
    hive_array_t a;
    if (envpool_actions(self, acts, &v, &a) < 0) {
        PyBuffer_Release(&iv);
        return NULL;
    }
    /* send returns at once (it queues jobs): no need to drop the GIL */
    int rc = hive_envpool_send(pool, &a, (const int32_t *)iv.buf, (size_t)iv.shape[0]);
    PyBuffer_Release(&v);
    PyBuffer_Release(&iv);
    if (rc < 0)
        return raise_hive(rc, "send");
    Py_RETURN_NONE;
}

static PyObject *envpool_async_reset(EnvPoolObj *self, PyObject *Py_UNUSED(ignored))
{
    hive_envpool_t *pool = envpool_live(self);
    if (!pool)
        return NULL;
    int rc = hive_envpool_async_reset(pool);
    if (rc < 0)
        return raise_hive(rc, "async_reset");
    Py_RETURN_NONE;
}

static PyObject *envpool_recv(EnvPoolObj *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "recv(timeout=None)");
        return NULL;
    }
    int64_t ns = timeout_ns_of(nargs ? args[0] : Py_None);
    if (ns == -2)
        return NULL;
    hive_envpool_t *pool = envpool_live(self);
    if (!pool)
        return NULL;
    hive_envpool_batch_t bt;
    envpool_enter(self);
    int rc = hive_envpool_recv(pool, 0, &bt);    /* a ready batch: no GIL round trip */
    if (rc == HIVE_ETIMEDOUT && ns != 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = hive_envpool_recv(pool, ns, &bt);
        Py_END_ALLOW_THREADS
    }
    return envpool_result(self, rc, &bt, "recv");
}

static PyObject *envpool_close(EnvPoolObj *self, PyObject *Py_UNUSED(ignored))
{
    if (self->inside) {
        PyErr_SetString(Error, "close: the env pool is in use by another thread");
        return NULL;
    }
    envpool_unlink_free(self);
    Py_RETURN_NONE;
}

/* (obs, reward, done, env_id) data addresses of the last batch, as the C struct holds them */
static PyObject *envpool_last_addresses(EnvPoolObj *self, PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("(KKKK)", (unsigned long long)(uintptr_t)self->last.obs.data,
                         (unsigned long long)(uintptr_t)self->last.reward.data,
                         (unsigned long long)(uintptr_t)self->last.done.data,
                         (unsigned long long)(uintptr_t)self->last.env_id.data);
}

static PyObject *envpool_get_num_envs(EnvPoolObj *self, void *Py_UNUSED(c))
{
    return PyLong_FromSize_t(hive_envpool_num_envs(self->pool));
}

static PyObject *envpool_get_batch_size(EnvPoolObj *self, void *Py_UNUSED(c))
{
    return PyLong_FromSize_t(hive_envpool_batch_size(self->pool));
}

/* ------------------------------------------------------------------ worker-locals */

/* engine._local(init, reinit, fini): a hive_local whose value is a Python
 * object. reinit None: fini then init again; "keep": hive_local_keep; else
 * reinit(value) is called. The callables live as long as the engine (the
 * key does). Local.get() is the value of the worker running the calling
 * Python task (or of the calling thread outside tasks). */
typedef struct {
    PyObject *init, *reinit, *fini;     /* reinit/fini may be NULL */
} pylocal_def;

typedef struct {
    PyObject_HEAD
    EngineObj   *engine;
    hive_local_t key;
} LocalObj;

static void *pylocal_init(void *arg)
{
    pylocal_def *d = arg;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *v = PyObject_CallNoArgs(d->init);
    if (!v) {
        PyErr_WriteUnraisable(d->init);
        v = NULL;
    }
    PyGILState_Release(g);
    return v;
}

static void pylocal_reinit(void *value, void *arg)
{
    pylocal_def *d = arg;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = PyObject_CallOneArg(d->reinit, (PyObject *)value);
    if (!r)
        PyErr_WriteUnraisable(d->reinit);
    Py_XDECREF(r);
    PyGILState_Release(g);
}

static void pylocal_fini(void *value, void *arg)
{
    pylocal_def *d = arg;
    if (interpreter_finalizing())
        return;
    PyGILState_STATE g = PyGILState_Ensure();
    if (d->fini) {
        PyObject *r = PyObject_CallOneArg(d->fini, (PyObject *)value);
        if (!r)
            PyErr_WriteUnraisable(d->fini);
        Py_XDECREF(r);
    }
    Py_DECREF((PyObject *)value);
    PyGILState_Release(g);
}

static void pylocal_def_free(PyObject *cap)
{
    pylocal_def *d = PyCapsule_GetPointer(cap, "hive.local");
    if (!d)
        return;
    Py_XDECREF(d->init);
    Py_XDECREF(d->reinit);
    Py_XDECREF(d->fini);
    PyMem_Free(d);
}

static PyObject *engine_local(EngineObj *self, PyObject *args)
{
    PyObject *init, *reinit, *fini;
    if (!PyArg_ParseTuple(args, "OOO", &init, &reinit, &fini))
        return NULL;
    int keep = PyUnicode_Check(reinit) && !PyUnicode_CompareWithASCIIString(reinit, "keep");
    if (!PyCallable_Check(init) || (reinit != Py_None && !keep && !PyCallable_Check(reinit)) ||
        (fini != Py_None && !PyCallable_Check(fini))) {
        PyErr_SetString(PyExc_TypeError, "local(init, reinit=None | \"keep\" | callable, fini=None | callable)");
        return NULL;
    }
    hive_t *h = engine_live(self);
    if (!h)
        return NULL;
    pylocal_def *d = PyMem_Calloc(1, sizeof *d);
    if (!d)
        return PyErr_NoMemory();
    d->init = Py_NewRef(init);
    d->reinit = reinit == Py_None || keep ? NULL : Py_NewRef(reinit);
    d->fini = fini == Py_None ? NULL : Py_NewRef(fini);
    PyObject *cap = PyCapsule_New(d, "hive.local", pylocal_def_free);
    if (!cap) {
        Py_DECREF(d->init);
        Py_XDECREF(d->reinit);
        Py_XDECREF(d->fini);
        PyMem_Free(d);
        return NULL;
    }
    if (!self->locals && !(self->locals = PyList_New(0))) {
        Py_DECREF(cap);
        return NULL;
    }
    if (PyList_Append(self->locals, cap) < 0) {    /* the engine keeps the callables */
        Py_DECREF(cap);
        return NULL;
    }
    Py_DECREF(cap);
    hive_local_def_t def = {
        .init = pylocal_init, .reinit = keep ? hive_local_keep : reinit == Py_None ? NULL : pylocal_reinit,
        .fini = pylocal_fini, .arg = d,
    };
    hive_local_t key;
    int rc = hive_local_new(h, &def, &key);
    if (rc < 0)
        return raise_hive(rc, "local");
    LocalObj *l = PyObject_New(LocalObj, &LocalType);
    if (!l)
        return NULL;
    l->engine = (EngineObj *)Py_NewRef((PyObject *)self);
    l->key = key;
    return (PyObject *)l;
}

static void local_dealloc(LocalObj *self)
{
    Py_DECREF(self->engine);
    PyObject_Free(self);
}

static PyObject *local_get(LocalObj *self, PyObject *Py_UNUSED(ignored))
{
    hive_t *h = engine_live(self->engine);
    if (!h)
        return NULL;
    void *v = py_cur_ctx ? hive_local(py_cur_ctx, self->key) : hive_local_thread(h, self->key);
    if (!v) {                           /* init raised (printed as unraisable) or no task */
        if (!PyErr_Occurred())
            PyErr_Format(Error, "local.get: no value: %s", hive_last_error());
        return NULL;
    }
    return Py_NewRef((PyObject *)v);
}

/* ------------------------------------------------------------------ type tables */

#define METH(n, f, fl, doc) { n, (PyCFunction)(void (*)(void))(f), fl, doc }

static PyMethodDef engine_methods[] = {
    METH("close", engine_close, METH_NOARGS, "close(): shut the engine down (after the last view goes)"),
    METH("__enter__", engine_enter, METH_NOARGS, NULL),
    METH("__exit__", engine_exit, METH_VARARGS, NULL),
    METH("stats", engine_stats, METH_NOARGS, "stats() -> dict of the store's capacity, used, objects, resident"),
    METH("put", engine_put_any, METH_O,
         "put(x) -> Ref: copy x (anything with the buffer protocol) into a new sealed object; an ndarray "
         "keeps its dtype and shape for get"),
    METH("_put", engine_put, METH_VARARGS, NULL),
    METH("get", engine_get, METH_FASTCALL | METH_KEYWORDS,
         "get(ref, timeout=None): the payload without a copy: a read-only memoryview, or an ndarray "
         "if it was put from one; waits with the GIL released"),
    METH("_create", engine_create, METH_VARARGS, NULL),
    METH("_array", engine_array, METH_VARARGS, NULL),
    METH("_replay", engine_replay, METH_VARARGS | METH_KEYWORDS, NULL),
    METH("_envpool", engine_envpool, METH_VARARGS | METH_KEYWORDS, NULL),
    METH("_local", engine_local, METH_VARARGS, NULL),
    METH("seal", engine_seal, METH_O, "seal(ref): publish a created object"),
    METH("wait", engine_wait, METH_VARARGS | METH_KEYWORDS,
         "wait(refs, num_returns=1, timeout=None) -> (ready, not_ready), as ray.wait"),
    METH("cell", engine_cell, METH_VARARGS, "cell(initial=None) -> Cell"),
    METH("load", engine_load, METH_VARARGS, "load(path) -> Library of hive_fn tasks and actor classes"),
    METH("_submit_py", engine_submit_py, METH_VARARGS, NULL),
    METH("_actor_py", engine_actor_py, METH_VARARGS, NULL),
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef engine_getset[] = {
    {"workers", (getter)engine_get_workers, NULL, "number of workers", NULL},
    {"closed", (getter)engine_get_closed, NULL, "close() was called", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef ref_methods[] = {
    METH("get", ref_get, METH_FASTCALL | METH_KEYWORDS, "get(timeout=None): engine.get(self, timeout)"),
    {NULL, NULL, 0, NULL},
};
/* get again on the Future type itself: CPython specializes a method call
 * only when the object's type is the method's own (else it walks the MRO
 * to check the type, every call) */
static PyMethodDef future_methods[] = {
    METH("get", ref_get, METH_FASTCALL | METH_KEYWORDS, "get(timeout=None): engine.get(self, timeout)"),
    METH("cancel", future_cancel, METH_NOARGS, "cancel() -> True if cancelled, False if finished"),
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef ref_getset[] = {
    {"id", (getter)ref_get_id, NULL, "the 64-bit object id", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef buffer_methods[] = {
    METH("ref", buffer_ref, METH_NOARGS, "ref() -> a new Ref to the object"),
    METH("add", buffer_add, METH_VARARGS, "add(flat_index, delta) -> new value (atomic)"),
    METH("write_lock", buffer_write_lock, METH_NOARGS, NULL),
    METH("write_unlock", buffer_write_unlock, METH_NOARGS, NULL),
    METH("read_into", buffer_read_into, METH_O, NULL),
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef buffer_getset[] = {
    {"address", (getter)buffer_get_address, NULL, "address of the payload in hive's store", NULL},
    {"nbytes", (getter)buffer_get_nbytes, NULL, "bytes exported", NULL},
    {"typed", (getter)buffer_get_typed, NULL, "put from a typed (numpy) buffer", NULL},
    {"pickled", (getter)buffer_get_pickled, NULL, "a pickled Python task result", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef cell_methods[] = {
    METH("publish", cell_publish, METH_O, "publish(ref): make ref the current version"),
    METH("acquire", cell_acquire, METH_NOARGS, "acquire() -> (Ref, seq), or None while empty"),
    {NULL, NULL, 0, NULL},
};

static PyMethodDef replay_methods[] = {
    METH("push", replay_push, METH_O, NULL),
    METH("sample_into", replay_sample_into, METH_VARARGS, NULL),
    METH("update_priorities", replay_update, METH_VARARGS, NULL),
    METH("stats", replay_stats, METH_NOARGS, NULL),
    METH("close", replay_close, METH_NOARGS, NULL),
    {NULL, NULL, 0, NULL},
};

static PyMethodDef library_methods[] = {
    METH("submit", library_submit, METH_FASTCALL | METH_KEYWORDS,
         "submit(fn_name, *args, priority=0, retries=0) -> Future"),
    METH("actor", library_actor, METH_VARARGS | METH_KEYWORDS,
         "actor(class_name, *args, name=None, max_restarts=0, max_concurrency=0, node=None, worker=None) -> Actor"),
    {NULL, NULL, 0, NULL},
};

static PyMethodDef actor_methods[] = {
    METH("call", actor_call, METH_FASTCALL | METH_KEYWORDS, "call(method, *args, priority=None) -> Future"),
    METH("kill", actor_kill, METH_NOARGS, NULL),
    {NULL, NULL, 0, NULL},
};

static PyObject *actor_repr(ActorObj *self)
{
    char id[32];
    snprintf(id, sizeof id, "%llx", (unsigned long long)self->actor.id);
    return PyUnicode_FromFormat("Actor(%s, 0x%s)", self->cls->name ? self->cls->name : "?", id);
}

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hive._hive.Engine", .tp_basicsize = sizeof(EngineObj),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, .tp_new = PyType_GenericNew,
    .tp_init = (initproc)engine_init, .tp_dealloc = (destructor)engine_dealloc,
    .tp_methods = engine_methods, .tp_getset = engine_getset,
    .tp_doc = "Engine(workers=0, store_bytes=0, topology=None, trace_path=None, pin=True)",
};
static PyTypeObject RefType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hive.Ref", .tp_basicsize = sizeof(RefObj), .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_dealloc = (destructor)ref_dealloc, .tp_repr = (reprfunc)ref_repr, .tp_hash = (hashfunc)ref_hash,
    .tp_richcompare = ref_richcompare, .tp_methods = ref_methods, .tp_getset = ref_getset,
    .tp_as_buffer = &ref_as_buffer,
    .tp_doc = "a counted reference to a hive object; the count goes when the Ref does",
};
static PyTypeObject FutureType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hive.Future", .tp_basicsize = sizeof(RefObj), .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_base = &RefType, .tp_methods = future_methods,
    .tp_doc = "the result of a task or an actor call: get(timeout), cancel()",
};
static PyTypeObject PayloadType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hive._hive.Payload", .tp_basicsize = sizeof(PayloadObj), .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)payload_dealloc, .tp_as_buffer = &payload_as_buffer,
    .tp_doc = "a sealed object's bytes, the exporter of get's memoryviews; holds the object's count",
};
static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hive.Buffer", .tp_basicsize = sizeof(BufferObj), .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)buffer_dealloc, .tp_as_buffer = &buffer_as_buffer,
    .tp_methods = buffer_methods, .tp_getset = buffer_getset,
    .tp_doc = "hive memory exported through the buffer protocol; holds the object's count",
};
static PyTypeObject CellType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hive.Cell", .tp_basicsize = sizeof(CellObj), .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)cell_dealloc, .tp_methods = cell_methods,
};
static PyTypeObject ReplayType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hive._hive.Replay", .tp_basicsize = sizeof(ReplayObj), .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)replay_dealloc, .tp_methods = replay_methods,
};
static PyMethodDef envpool_methods[] = {
    METH("reset", envpool_reset, METH_NOARGS, NULL),
    METH("step", envpool_step, METH_O, NULL),
    METH("send", envpool_send, METH_VARARGS, NULL),
    METH("recv", envpool_recv, METH_FASTCALL, NULL),
    METH("async_reset", envpool_async_reset, METH_NOARGS, NULL),
    METH("close", envpool_close, METH_NOARGS, NULL),
    METH("last_addresses", envpool_last_addresses, METH_NOARGS, NULL),
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef envpool_getset[] = {
    {"num_envs", (getter)envpool_get_num_envs, NULL, "environments (0 once closed)", NULL},
    {"batch_size", (getter)envpool_get_batch_size, NULL, "recv's batch (0 once closed)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyTypeObject EnvPoolType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hive._hive.EnvPool", .tp_basicsize = sizeof(EnvPoolObj), .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)envpool_dealloc, .tp_methods = envpool_methods, .tp_getset = envpool_getset,
};
static PyMethodDef local_methods[] = {
    METH("get", local_get, METH_NOARGS, "get(): this worker's value (built, reset or kept per the def)"),
    {NULL, NULL, 0, NULL},
};
static PyTypeObject LocalType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hive.Local", .tp_basicsize = sizeof(LocalObj), .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)local_dealloc, .tp_methods = local_methods,
};
static PyTypeObject LibraryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hive.Library", .tp_basicsize = sizeof(LibraryObj), .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)library_dealloc, .tp_methods = library_methods,
};
static PyTypeObject ActorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hive.Actor", .tp_basicsize = sizeof(ActorObj), .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)actor_dealloc, .tp_methods = actor_methods, .tp_repr = (reprfunc)actor_repr,
};

/* _noop(): nothing; the baseline "plain C-extension call" of the benchmarks */
static PyObject *noop(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    Py_RETURN_NONE;
}

/* _noop_view(obj) -> memoryview(obj): the floor of any C call that returns
 * a new memoryview (CPython allocates two objects for one), beside get's */
static PyObject *noop_view(PyObject *Py_UNUSED(m), PyObject *obj)
{
    return PyMemoryView_FromObject(obj);
}

/* _c_loop(what, target, n[, method]) -> seconds per operation of the same
 * work done from C, without Python: "get" n hive_get of the Ref target, or
 * one hive_get of each Ref in the list target (n is then ignored), as a
 * first Engine.get of a Ref does (no count taken); "call" n async hive_call
 * of the C actor target's method with the argument 1, then n hive_get +
 * hive_release of the results (as a list of actor.call(...) futures and
 * their .get()); "call_sync" n times a call and its result's get + release
 * (as actor.call(...).get()); "call_split" as "call", but returns (seconds
 * per call, seconds per get + release of a sealed result), the wait for the
 * last result between them left out; "put" n hive_put of 8 bytes into the
 * Engine target and their release (as put(b"12345678") whose Ref is dropped). The time is the calling thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), as the Python benchmark takes its own
 * (time.thread_time): on a loaded machine wall time is mostly other
 * processes' turns. The Python benchmark subtracts it from the Python-side
 * time: what remains is what the binding adds. The GIL is released while
 * the loop runs. */
static PyObject *c_loop(PyObject *Py_UNUSED(m), PyObject *args)
{
    const char *what, *method = "add";
    PyObject *target;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "sOn|s", &what, &target, &n, &method))
        return NULL;
    int sync = !strcmp(what, "call_sync"), split = !strcmp(what, "call_split");
    int call = sync || split || !strcmp(what, "call"), put = !strcmp(what, "put");
    int list = !call && PyList_Check(target);
    if (list)
        n = PyList_GET_SIZE(target);
    if (n <= 0) {
        PyErr_Format(PyExc_ValueError, "_c_loop: n must be > 0, not %zd", n);
        return NULL;
    }
    if (put ? !PyObject_TypeCheck(target, &EngineType)
            : call ? !PyObject_TypeCheck(target, &ActorType) || ((ActorObj *)target)->job
                   : strcmp(what, "get") || !PyObject_TypeCheck(list ? PyList_GET_ITEM(target, 0) : target, &RefType)) {
        PyErr_SetString(PyExc_TypeError, "_c_loop(\"get\", Ref or [Ref], n), _c_loop(\"put\", Engine, n) "
                        "or _c_loop(\"call\", \"call_sync\" or \"call_split\", C Actor, n[, method])");
        return NULL;
    }
    EngineObj *e = put ? (EngineObj *)target : call ? ((ActorObj *)target)->engine
                              : ((RefObj *)(list ? PyList_GET_ITEM(target, 0) : target))->engine;
    hive_t *h = engine_live(e);
    if (!h)
        return NULL;
    size_t idx = 0;
    const hive_actor_class_t *cls = call ? ((ActorObj *)target)->cls : NULL;
    while (cls && idx < cls->nmethods && strcmp(cls->methods[idx].name, method))
        idx++;
    if (cls && idx == cls->nmethods) {
        PyErr_Format(PyExc_ValueError, "_c_loop: class %s has no method %s", cls->name, method);
        return NULL;
    }
    hive_ref_t *refs = call || list ? PyMem_Calloc((size_t)n, sizeof *refs) : NULL;
    if ((call || list) && !refs)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; list && i < n; i++) {
        PyObject *o = PyList_GET_ITEM(target, i);
        if (!PyObject_TypeCheck(o, &RefType) || ((RefObj *)o)->engine != e) {
            PyMem_Free(refs);
            PyErr_SetString(PyExc_TypeError, "_c_loop: a list of Refs of one engine");
            return NULL;
        }
        refs[i] = ((RefObj *)o)->ref;
    }
    int rc = 0;
    struct timespec t0, t1, tm0 = {0, 0}, tm1 = {0, 0};
    Py_BEGIN_ALLOW_THREADS
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    if (put) {
        int64_t eight = 0x3837363534333231;   /* "12345678" */
        for (Py_ssize_t i = 0; i < n && rc >= 0; i++) {
            hive_ref_t r;
            rc = hive_put(h, &eight, sizeof eight, &r);
            if (rc >= 0)
                hive_release(h, r);
        }
    } else if (!call) {
        hive_ref_t ref = list ? refs[0] : ((RefObj *)target)->ref;
        for (Py_ssize_t i = 0; i < n && rc >= 0; i++) {
            const void *data;
            size_t size;
            rc = hive_get(h, list ? refs[i] : ref, 0, &data, &size);
        }
    } else {
        int64_t one = 1;
        hive_arg_t arg = HIVE_BYTES(&one, sizeof one);
        hive_actor_t a = ((ActorObj *)target)->actor;
        Py_ssize_t made = 0;
        for (Py_ssize_t i = 0; sync && i < n && rc >= 0; i++) {   /* each result before the next call */
            const void *data;
            size_t size;
            rc = hive_call(h, a, (unsigned)idx, &arg, 1, NULL, &refs[0]);
            if (rc >= 0) {
                rc = hive_get(h, refs[0], -1, &data, &size);
                hive_release(h, refs[0]);
            }
        }
        for (; !sync && made < n && rc >= 0; made++)
            rc = hive_call(h, a, (unsigned)idx, &arg, 1, NULL, &refs[made]);
        if (rc < 0 && made > 0)
            made--;
        if (split && rc >= 0) {   /* the calls' time; then, untimed, until the last result is in */
            const void *data;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &tm0);
            rc = hive_get(h, refs[made - 1], -1, &data, NULL);
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &tm1);
        }
        for (Py_ssize_t i = 0; i < made; i++) {
            const void *data;
            size_t size;
            int g = hive_get(h, refs[i], -1, &data, &size);
            rc = rc < 0 ? rc : g;
            hive_release(h, refs[i]);
        }
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    Py_END_ALLOW_THREADS
    PyMem_Free(refs);
    if (rc < 0)
        return raise_hive(rc, "_c_loop");
#define SECONDS(a, b) ((double)((b).tv_sec - (a).tv_sec) + ((b).tv_nsec - (a).tv_nsec) * 1e-9)
    if (split)
        return Py_BuildValue("(dd)", SECONDS(t0, tm0) / (double)n, SECONDS(tm1, t1) / (double)n);
    return PyFloat_FromDouble(SECONDS(t0, t1) / (double)n);
#undef SECONDS
}

/* _own_methods(cls): the Engine's C methods again on cls, a Python subclass
 * of Engine (hive.Engine), unless cls defines the name itself. CPython 3.11+
 * specializes a call of a C method only when the object's type is the
 * method's own type; a hive.Engine's inherited put and get took the generic
 * call every time (~150 instructions more a call: it checks the type
 * through the MRO). */
static PyObject *own_methods(PyObject *Py_UNUSED(m), PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &EngineType)) {
        PyErr_SetString(PyExc_TypeError, "_own_methods(cls): cls must be a subclass of Engine");
        return NULL;
    }
    PyObject *dict = ((PyTypeObject *)cls)->tp_dict;
    for (PyMethodDef *d = engine_methods; d->ml_name; d++) {
        PyObject *name = PyUnicode_InternFromString(d->ml_name), *descr = NULL;
        int rc = -1;
        if (name && PyDict_Contains(dict, name) == 0 && (descr = PyDescr_NewMethod((PyTypeObject *)cls, d)))
            rc = PyObject_SetAttr(cls, name, descr);
        else if (name && !PyErr_Occurred())
            rc = 0;                     /* defined by cls */
        Py_XDECREF(descr);
        Py_XDECREF(name);
        if (rc < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    METH("_noop", noop, METH_NOARGS, NULL),
    METH("_noop_view", noop_view, METH_O, NULL),
    METH("_c_loop", c_loop, METH_VARARGS, NULL),
    METH("to_dlpack", to_dlpack, METH_O, "to_dlpack(buffer) -> a 'dltensor' capsule, no copy"),
    METH("_set_runners", set_runners, METH_O, NULL),
    METH("_own_methods", own_methods, METH_O, NULL),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef hive_module = {
    PyModuleDef_HEAD_INIT, "hive._hive", "hive's C core for Python", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

static int add_exception(PyObject *m, PyObject **slot, const char *name, PyObject *base)
{
    char full[64];
    snprintf(full, sizeof full, "hive.%s", name);
    *slot = PyErr_NewException(full, base, NULL);
    return *slot ? PyModule_AddObjectRef(m, name, *slot) : -1;
}

PyMODINIT_FUNC PyInit__hive(void)
{
    PyTypeObject *types[] = {&EngineType, &RefType, &FutureType, &BufferType, &CellType,
                             &ReplayType, &LibraryType, &ActorType, &EnvPoolType, &LocalType, &PayloadType};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyType_Ready(types[i]) < 0)
            return NULL;
    view_recycling_install();
    PyObject *m = PyModule_Create(&hive_module);
    if (!m)
        return NULL;
    const char *names[] = {"Engine", "Ref", "Future", "Buffer", "Cell", "Replay", "Library", "Actor", "_EnvPool", "Local",
                           "Payload"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0)
            goto fail;
    if (add_exception(m, &Error, "Error", PyExc_RuntimeError) < 0 ||
        add_exception(m, &StoreFull, "StoreFull", Error) < 0 ||
        add_exception(m, &Timeout, "Timeout", Error) < 0 ||
        add_exception(m, &Cancelled, "Cancelled", Error) < 0 ||
        add_exception(m, &TaskFailed, "TaskFailed", Error) < 0 ||
        add_exception(m, &ActorDead, "ActorDead", Error) < 0 ||
        add_exception(m, &ShutDown, "ShutDown", Error) < 0 ||
        PyModule_AddIntConstant(m, "LOW", HIVE_PRIO_LOW) < 0 ||
        PyModule_AddIntConstant(m, "NORMAL", HIVE_PRIO_NORMAL) < 0 ||
        PyModule_AddIntConstant(m, "HIGH", HIVE_PRIO_HIGH) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
