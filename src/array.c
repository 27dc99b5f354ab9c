/*
 * array.c - shared numpy-style arrays.
 *
 * An array is an object whose payload is its C-contiguous elements; its
 * dtype, shape and the seqlock of its write sections sit in a small block of
 * their own (struct hive__arr_meta, from the block pool) that the record
 * points to, so that no other object's record pays for them. Views
 * (hive_array_t) are plain values pointing into the payload; slicing makes a
 * new view, never a copy. A view carries its record in `priv`, so the
 * functions that take only a view (atomics, write sections, read) need no
 * lookup.
 *
 * Seqlock (Lamport; as in Linux's seqcount): the sequence is odd while a
 * write section is open. Writers take it from even to odd with a CAS (so they
 * exclude each other) and back to even with a release store. A reader copies
 * between two reads of the sequence and retries if they differ or were odd;
 * it never writes shared memory, so it never slows a writer down.
 */
#include "store.h"
#include "cell.h"
#include "ds/pool.h"
#include "hive_impl.h"
#include "util/error.h"
#include "util/seqlock.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ dtypes */

size_t hive_dtype_size(hive_dtype_t dtype)
{
    switch (dtype) {
    case HIVE_BOOL: case HIVE_I8: case HIVE_U8:  return 1;
    case HIVE_I16: case HIVE_U16:                return 2;
    case HIVE_I32: case HIVE_U32: case HIVE_F32: return 4;
    case HIVE_I64: case HIVE_U64: case HIVE_F64: return 8;
    default:                                     return 0;
    }
}

/* ------------------------------------------------------------------ arrays */

struct hive__arr_meta {
    _Atomic uint64_t seq;           /* seqlock: odd while a write section is open */
    int32_t          dtype;
    int32_t          ndim;
    int64_t          shape[HIVE_MAX_DIMS];
};

/* The arrays' drop hook: the record goes, and its meta with it. */
static void array_drop(struct hive *h, hive__obj_t *o, bool closing)
{
    (void)h;
    (void)closing;
    hive__pool_free(o->u.arr, sizeof *o->u.arr);
    o->u.arr = NULL;
}

void hive__arrays_init(struct hive *h)
{
    hive__store_on_drop(h, HIVE__ARRAY, array_drop);
}

int hive_array_new(hive_t *h, hive_dtype_t dtype, int ndim, const int64_t *shape, hive_ref_t *out)
{
    if (h == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_array_new: %s is NULL", h ? "out" : "engine");
    size_t isz = hive_dtype_size(dtype);
    if (isz == 0)
        return hive__fail(HIVE_EINVAL, "hive_array_new: dtype %d is not a hive_dtype_t", (int)dtype);
    if (ndim < 0 || ndim > HIVE_MAX_DIMS)
        return hive__fail(HIVE_EINVAL, "hive_array_new: ndim %d outside 0..%d", ndim, HIVE_MAX_DIMS);
    if (ndim > 0 && shape == NULL)
        return hive__fail(HIVE_EINVAL, "hive_array_new: shape is NULL for ndim %d", ndim);
    /* numpy's rule: the item size times the nonzero extents must fit in
     * int64_t, whatever the order of the extents. Then every stride of the
     * view (the item size times the extents to its right, a zero counted
     * as 1) and every offset a view or slice computes fits too. */
    int64_t span = (int64_t)isz;
    bool empty = false;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return hive__fail(HIVE_EINVAL, "hive_array_new: shape[%d] = %lld is negative", d,
                              (long long)shape[d]);
        if (shape[d] == 0)
            empty = true;
        else if (__builtin_mul_overflow(span, shape[d], &span))
            return hive__fail(HIVE_EINVAL, "hive_array_new: %d-d shape overflows: the item size "
                              "(%zu) times the nonzero extents passes %lld at dimension %d (extent "
                              "%lld)", ndim, isz, (long long)INT64_MAX, d, (long long)shape[d]);
    }
    size_t bytes = empty ? 0 : (size_t)span;
    struct hive__arr_meta *meta = hive__pool_alloc(sizeof *meta);
    if (meta == NULL)
        return hive__fail(HIVE_ENOMEM, "hive_array_new: cannot allocate %zu bytes of array header",
                          sizeof *meta);
    hive__obj_t *o;
    int rc = hive__obj_new(h, HIVE__ARRAY, bytes, true, &o);
    if (rc != HIVE_OK) {
        hive__pool_free(meta, sizeof *meta);
        return rc;
    }
    o->u.arr = meta;
    memset(o->data, 0, bytes);
    atomic_init(&o->u.arr->seq, 0);
    o->u.arr->dtype = (int32_t)dtype;
    o->u.arr->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        o->u.arr->shape[d] = shape[d];
    atomic_store_explicit(&o->state, HIVE__SEALED, memory_order_relaxed);   /* published below */
    atomic_store_explicit(&o->deps, HIVE__DEPS_CLOSED, memory_order_relaxed);
    hive__obj_publish(h, o);
    out->id = o->id;
    return HIVE_OK;
}

int hive_array_view(hive_t *h, hive_ref_t ref, hive_array_t *out)
{
    if (h == NULL || out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_array_view: %s is NULL", h ? "out" : "engine");
    hive__obj_t *o = hive__obj_find(h, ref, "hive_array_view");
    if (o == NULL)
        return HIVE_ENOENT;
    if (o->kind != HIVE__ARRAY)
        return hive__fail(HIVE_ESTATE, "hive_array_view: object %llu is %s, not an array",
                          (unsigned long long)ref.id, hive__kind_name(o->kind));
    hive_array_t v;
    memset(&v, 0, sizeof v);
    v.data = o->data;
    v.dtype = (hive_dtype_t)o->u.arr->dtype;
    v.ndim = o->u.arr->ndim;
    /* no overflow: hive_array_new checked the item size times the nonzero
     * extents, which bounds every stride and the last product */
    int64_t stride = (int64_t)hive_dtype_size(v.dtype);
    for (int d = v.ndim - 1; d >= 0; d--) {
        v.shape[d] = o->u.arr->shape[d];
        v.strides[d] = stride;
        stride *= v.shape[d] ? v.shape[d] : 1;
    }
    v.ref = ref;
    v.priv = o;
    *out = v;
    return HIVE_OK;
}

int64_t hive_array_numel(const hive_array_t *a)
{
    if (a == NULL)
        return -1;
    int64_t n = 1;
    for (int d = 0; d < a->ndim && d < HIVE_MAX_DIMS; d++)
        if (a->shape[d] < 0 || __builtin_mul_overflow(n, a->shape[d], &n)) {
            hive__fail(HIVE_EINVAL, "hive_array_numel: not a valid view (extent %lld in dimension "
                       "%d %s)", (long long)a->shape[d], d,
                       a->shape[d] < 0 ? "is negative" : "overflows the element count");
            return -1;
        }
    return n;
}

static bool view_ok(const hive_array_t *a, const char *fn)
{
    if (a == NULL) {
        hive__fail(HIVE_EINVAL, "%s: array is NULL", fn);
        return false;
    }
    if (a->ndim < 0 || a->ndim > HIVE_MAX_DIMS || hive_dtype_size(a->dtype) == 0) {
        hive__fail(HIVE_EINVAL, "%s: not a valid view (dtype %d, ndim %d)", fn, (int)a->dtype, a->ndim);
        return false;
    }
    return true;
}

void *hive_array_at(const hive_array_t *a, const int64_t *index)
{
    if (!view_ok(a, "hive_array_at"))
        return NULL;
    if (index == NULL && a->ndim > 0) {
        hive__fail(HIVE_EINVAL, "hive_array_at: index is NULL for a %d-d array", a->ndim);
        return NULL;
    }
    char *p = a->data;
    for (int d = 0; d < a->ndim; d++) {
        if (index[d] < 0 || index[d] >= a->shape[d]) {
            hive__fail(HIVE_EINVAL, "hive_array_at: index %lld out of range 0..%lld in dimension %d",
                       (long long)index[d], (long long)a->shape[d] - 1, d);
            return NULL;
        }
        p += index[d] * a->strides[d];
    }
    return p;
}

int hive_array_slice(const hive_array_t *a, int dim, int64_t start, int64_t stop, int64_t step,
                     hive_array_t *out)
{
    if (!view_ok(a, "hive_array_slice"))
        return HIVE_EINVAL;
    if (out == NULL)
        return hive__fail(HIVE_EINVAL, "hive_array_slice: out is NULL");
    if (dim < 0 || dim >= a->ndim)
        return hive__fail(HIVE_EINVAL, "hive_array_slice: dimension %d outside 0..%d", dim, a->ndim - 1);
    if (step == 0)
        return hive__fail(HIVE_EINVAL, "hive_array_slice: step 0 is not allowed");
    int64_t n = a->shape[dim];
    if (n < 0)
        return hive__fail(HIVE_EINVAL, "hive_array_slice: not a valid view (extent %lld in "
                          "dimension %d)", (long long)n, dim);
    /* Python's slice.indices(n); every sum below stays within -1 .. n */
    int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
    if (start < 0)
        start = start < -n ? lower : start + n;
    else if (start > upper)
        start = upper;
    if (stop < 0)
        stop = stop < -n ? lower : stop + n;
    else if (stop > upper)
        stop = upper;
    if (start < lower)
        start = lower;
    if (stop < lower)
        stop = lower;
    /* |step| as unsigned: -INT64_MIN does not fit int64_t */
    uint64_t mag = step > 0 ? (uint64_t)step : -(uint64_t)step;
    int64_t len;
    if (step > 0)
        len = stop > start ? (int64_t)((uint64_t)(stop - start - 1) / mag) + 1 : 0;
    else
        len = start > stop ? (int64_t)((uint64_t)(start - stop - 1) / mag) + 1 : 0;
    /* In a view made by hive_array_view or a slice, element len - 1 lies
     * inside the array, so with two elements or more neither product
     * overflows; with one, the stride is never used, and when stride * step
     * does not fit (numpy's would wrap) the old stride is kept. */
    int64_t offset = 0, stride;
    if (len > 0 && __builtin_mul_overflow(start, a->strides[dim], &offset))
        return hive__fail(HIVE_EINVAL, "hive_array_slice: not a valid view (offset %lld * stride "
                          "%lld overflows)", (long long)start, (long long)a->strides[dim]);
    if (__builtin_mul_overflow(a->strides[dim], step, &stride)) {
        if (len > 1)
            return hive__fail(HIVE_EINVAL, "hive_array_slice: not a valid view (stride %lld * step "
                              "%lld overflows with %lld elements)", (long long)a->strides[dim],
                              (long long)step, (long long)len);
        stride = a->strides[dim];
    }
    hive_array_t v = *a;
    v.data = (char *)a->data + offset;
    v.shape[dim] = len;
    v.strides[dim] = stride;
    *out = v;
    return HIVE_OK;
}

/* Address of element flat_index (C order over the logical shape), or NULL. */
static void *flat_at(const hive_array_t *a, int64_t flat_index, const char *fn)
{
    if (!view_ok(a, fn))
        return NULL;
    int64_t numel = hive_array_numel(a);
    if (numel < 0)
        return NULL;                        /* hive_array_numel said why */
    if (flat_index < 0 || flat_index >= numel) {
        hive__fail(HIVE_EINVAL, "%s: flat index %lld out of range 0..%lld", fn,
                   (long long)flat_index, (long long)numel - 1);
        return NULL;
    }
    char *p = a->data;
    for (int d = a->ndim - 1; d >= 0; d--) {
        p += (flat_index % a->shape[d]) * a->strides[d];
        flat_index /= a->shape[d];
    }
    size_t isz = hive_dtype_size(a->dtype);
    if ((uintptr_t)p % isz != 0) {
        hive__fail(HIVE_EINVAL, "%s: element at %p is not aligned to its %zu bytes", fn, (void *)p, isz);
        return NULL;
    }
    return p;
}

/* One atomic add on an integer element: *old the value before, *upd after
 * (both in the element's type, widened). relaxed: these are counters;
 * ordering with other data is the job of write sections or of whatever the
 * caller publishes afterwards. */
#define ADD_INT(V, T, p, d)  /* V: the element's type, T: its unsigned twin (wraps) */ \
    do {                                                                       \
        T o_ = __atomic_fetch_add((T *)(p), (T)(d), __ATOMIC_RELAXED);         \
        *old = (int64_t)(V)o_;                                                 \
        *upd = (int64_t)(V)(T)(o_ + (T)(d));                                   \
    } while (0)

static int add_int(const hive_array_t *a, int64_t flat_index, int64_t delta, int64_t *old,
                   int64_t *upd, const char *fn)
{
    void *p = flat_at(a, flat_index, fn);
    if (p == NULL)
        return HIVE_EINVAL;                 /* flat_at said why */
    switch (a->dtype) {
    case HIVE_I8:  ADD_INT(int8_t, uint8_t, p, delta);   return HIVE_OK;
    case HIVE_U8:  ADD_INT(uint8_t, uint8_t, p, delta);  return HIVE_OK;
    case HIVE_I16: ADD_INT(int16_t, uint16_t, p, delta);  return HIVE_OK;
    case HIVE_U16: ADD_INT(uint16_t, uint16_t, p, delta); return HIVE_OK;
    case HIVE_I32: ADD_INT(int32_t, uint32_t, p, delta);  return HIVE_OK;
    case HIVE_U32: ADD_INT(uint32_t, uint32_t, p, delta); return HIVE_OK;
    case HIVE_I64: ADD_INT(int64_t, uint64_t, p, delta); return HIVE_OK;
    case HIVE_U64: ADD_INT(uint64_t, uint64_t, p, delta); return HIVE_OK;
    default:
        return hive__fail(HIVE_EINVAL, "%s: dtype %d is not an integer type", fn, (int)a->dtype);
    }
}

/* Float elements: a CAS loop on the bits. relaxed: as add_int. */
static int add_float(const hive_array_t *a, int64_t flat_index, double delta, double *old,
                     double *upd, const char *fn)
{
    void *p = flat_at(a, flat_index, fn);
    if (p == NULL)
        return HIVE_EINVAL;
    if (a->dtype == HIVE_F64) {
        uint64_t ob = __atomic_load_n((uint64_t *)p, __ATOMIC_RELAXED), nb;
        double o, v;
        do {
            memcpy(&o, &ob, sizeof o);
            v = o + delta;
            memcpy(&nb, &v, sizeof nb);
        } while (!__atomic_compare_exchange_n((uint64_t *)p, &ob, nb, true, __ATOMIC_RELAXED,
                                              __ATOMIC_RELAXED));
        *old = o;
        *upd = v;
        return HIVE_OK;
    }
    if (a->dtype == HIVE_F32) {
        uint32_t ob = __atomic_load_n((uint32_t *)p, __ATOMIC_RELAXED), nb;
        float o, v;
        do {
            memcpy(&o, &ob, sizeof o);
            v = o + (float)delta;
            memcpy(&nb, &v, sizeof nb);
        } while (!__atomic_compare_exchange_n((uint32_t *)p, &ob, nb, true, __ATOMIC_RELAXED,
                                              __ATOMIC_RELAXED));
        *old = o;
        *upd = v;
        return HIVE_OK;
    }
    return hive__fail(HIVE_EINVAL, "%s: dtype %d is not F32 or F64", fn, (int)a->dtype);
}

int64_t hive_array_add_i64(const hive_array_t *a, int64_t flat_index, int64_t delta)
{
    int64_t old = 0, upd = 0;
    return add_int(a, flat_index, delta, &old, &upd, "hive_array_add_i64") == HIVE_OK ? upd : 0;
}

double hive_array_add_f64(const hive_array_t *a, int64_t flat_index, double delta)
{
    double old = 0, upd = 0;
    return add_float(a, flat_index, delta, &old, &upd, "hive_array_add_f64") == HIVE_OK ? upd : 0;
}

int hive_array_fetch_add_i64(const hive_array_t *a, int64_t flat_index, int64_t delta, int64_t *old)
{
    int64_t o = 0, upd = 0;
    int rc = add_int(a, flat_index, delta, &o, &upd, "hive_array_fetch_add_i64");
    if (rc == HIVE_OK && old != NULL)
        *old = o;
    return rc;
}

int hive_array_fetch_add_f64(const hive_array_t *a, int64_t flat_index, double delta, double *old)
{
    double o = 0, upd = 0;
    int rc = add_float(a, flat_index, delta, &o, &upd, "hive_array_fetch_add_f64");
    if (rc == HIVE_OK && old != NULL)
        *old = o;
    return rc;
}

/* ------------------------------------------------------------------ seqlock */

static hive__obj_t *array_record(const hive_array_t *a, const char *fn)
{
    if (a == NULL || a->priv == NULL) {
        hive__fail(HIVE_EINVAL, "%s: %s", fn, a ? "view has no array record (not from hive_array_view)"
                                               : "array is NULL");
        return NULL;
    }
    hive__obj_t *o = a->priv;
    if (o->kind != HIVE__ARRAY || o->id != a->ref.id) {
        hive__fail(HIVE_EINVAL, "%s: view of object %llu does not match its record", fn,
                   (unsigned long long)a->ref.id);
        return NULL;
    }
    return o;
}

static int write_lock(const hive_array_t *a, const char *fn)
{
    hive__obj_t *o = array_record(a, fn);
    if (o == NULL)
        return HIVE_EINVAL;
    uint64_t s = atomic_load_explicit(&o->u.arr->seq, memory_order_relaxed);
    for (;;) {
        if (s & 1) {                       /* another writer: wait for it */
            hive__cpu_relax();
            s = atomic_load_explicit(&o->u.arr->seq, memory_order_relaxed);
            continue;
        }
        /* acquire: this writer sees the previous writer's data */
        if (atomic_compare_exchange_weak_explicit(&o->u.arr->seq, &s, s + 1, memory_order_acquire,
                                                  memory_order_relaxed))
            break;
    }
    /* release fence: the odd sequence is ordered before every data store of
     * the section, so a reader that sees one of them sees the sequence move */
    atomic_thread_fence(memory_order_release);
    return HIVE_OK;
}

static int write_unlock(const hive_array_t *a, const char *fn)
{
    hive__obj_t *o = array_record(a, fn);
    if (o == NULL)
        return HIVE_EINVAL;
    uint64_t s = atomic_load_explicit(&o->u.arr->seq, memory_order_relaxed);
    if (!(s & 1))
        return hive__fail(HIVE_ESTATE, "%s: no write section is open on object %llu", fn,
                          (unsigned long long)o->id);
    /* release: the section's data stores are visible before the even value */
    atomic_store_explicit(&o->u.arr->seq, s + 1, memory_order_release);
    return HIVE_OK;
}

void hive_array_write_begin(const hive_array_t *a)
{
    (void)write_lock(a, "hive_array_write_begin");
}

void hive_array_write_end(const hive_array_t *a)
{
    (void)write_unlock(a, "hive_array_write_end");
}

int hive_array_write_lock(const hive_array_t *a)
{
    return write_lock(a, "hive_array_write_lock");
}

int hive_array_write_unlock(const hive_array_t *a)
{
    return write_unlock(a, "hive_array_write_unlock");
}

/* Copy view a into dst packed in C order. */
static void copy_view(const hive_array_t *a, unsigned char *dst, size_t isz)
{
    int nd = a->ndim;
    /* merge the innermost contiguous run into one copy */
    int64_t run = 1;
    int inner = nd;
    int64_t expect = (int64_t)isz;
    while (inner > 0 && a->strides[inner - 1] == expect) {
        run *= a->shape[inner - 1];
        expect *= a->shape[inner - 1];
        inner--;
    }
    size_t run_bytes = (size_t)run * isz;
    int64_t idx[HIVE_MAX_DIMS] = { 0 };
    for (;;) {
        const char *src = a->data;
        for (int d = 0; d < inner; d++)
            src += idx[d] * a->strides[d];
        hive__racy_copy(dst, src, run_bytes);
        dst += run_bytes;
        int d = inner - 1;
        while (d >= 0 && ++idx[d] == a->shape[d]) {
            idx[d] = 0;
            d--;
        }
        if (d < 0)
            return;
    }
}

int hive_array_read(const hive_array_t *a, void *dst, size_t dst_size)
{
    hive__obj_t *o = array_record(a, "hive_array_read");
    if (o == NULL)
        return HIVE_EINVAL;
    if (!view_ok(a, "hive_array_read"))
        return HIVE_EINVAL;
    if (dst == NULL)
        return hive__fail(HIVE_EINVAL, "hive_array_read: dst is NULL");
    size_t isz = hive_dtype_size(a->dtype);
    int64_t numel = hive_array_numel(a);
    size_t need;
    if (numel < 0)
        return HIVE_EINVAL;                 /* hive_array_numel said why */
    if (__builtin_mul_overflow((size_t)numel, isz, &need))
        return hive__fail(HIVE_EINVAL, "hive_array_read: not a valid view (%lld elements of %zu "
                          "bytes overflow a size)", (long long)numel, isz);
    if (need > dst_size)
        return hive__fail(HIVE_EINVAL, "hive_array_read: dst holds %zu bytes, the view needs %zu",
                          dst_size, need);
    if (numel == 0)
        return HIVE_OK;
    for (;;) {
        /* acquire: pairs with write_end's release, so the data of the last
         * finished section is what we copy */
        uint64_t s1 = atomic_load_explicit(&o->u.arr->seq, memory_order_acquire);
        if (s1 & 1) {
            hive__cpu_relax();
            continue;
        }
        copy_view(a, dst, isz);
        /* acquire fence, then the re-read: a write that overlapped the copy
         * shows as a changed sequence (util/seqlock.h) */
        if (hive__seq_reread(&o->u.arr->seq) == s1)
            return HIVE_OK;
    }
}
