/*
 * fuzz_array.c - libFuzzer target for shared arrays: shapes, views, slices,
 * element addresses, atomics and snapshots (src/array.c).
 *
 * Each input makes one array with a fuzzed dtype, ndim and shape, then runs a
 * fuzzed program of slices (start/stop/step anywhere in int64, chained),
 * hive_array_at, add_i64/add_f64, raw writes and hive_array_read against a
 * model kept here: a byte copy of the payload and, for every view, its
 * offset and strides in 128-bit arithmetic. Invariants checked:
 *   - bad input (dtype, ndim, shape, dimension, step, index, dst size,
 *     dtype of an atomic) fails with the documented code and a sentence;
 *     shapes follow numpy's rule: the item size times the nonzero extents
 *     must fit int64, in any order;
 *   - numel is the product of the extents, the payload size numel * itemsize;
 *   - slices (any nonzero step, INT64_MIN included) follow Python's
 *     slice.indices; every element address of every view is the model's,
 *     inside the payload and aligned;
 *   - atomics return and store what the model computes; a read returns the
 *     model's elements in C order;
 *   - after the array is released the store is empty again.

 */
#include "fuzz.h"

#define STORE_BYTES  (4u << 20)
#define MAX_VIEWS    6
#define MAX_OPS      64
#define CORNER_LIMIT 256          /* elements checked per view: its corners */

typedef __int128 i128;

typedef struct model_view {
    hive_array_t v;               /* what hive gave */
    i128         off;             /* the model: byte offset of element 0 */
    i128         stride[HIVE_MAX_DIMS];
    int64_t      shape[HIVE_MAX_DIMS];
} mview_t;

static hive_t *H;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fz_setup(*argc, *argv);
    H = fz_engine(1, STORE_BYTES);
    return 0;
}

typedef struct state {
    hive_ref_t     ref;
    unsigned char *payload;       /* hive's bytes */
    unsigned char *shadow;        /* the model's bytes */
    size_t         size;
    size_t         isz;
    hive_dtype_t   dtype;
    int            ndim;
    mview_t        views[MAX_VIEWS];
    int            nviews;
} state_t;

/* ------------------------------------------------------------ the model */

static bool is_int_dtype(hive_dtype_t t)
{
    return t >= HIVE_I8 && t <= HIVE_U64;
}

/* a * b, held within +-2^100: the model's strides grow without bound along
 * dimensions of extent 0 or 1 (steps multiply them), where no element is
 * ever addressed through them; along longer ones they stay below the
 * payload size. */
static i128 mul_sat(i128 a, i128 b)
{
    const i128 lim = (i128)1 << 100;
    i128 r;
    if (__builtin_mul_overflow(a, b, &r) || r > lim || r < -lim)
        return ((a < 0) != (b < 0)) ? -lim : lim;
    return r;
}

/* The byte offset of index idx in model view m. */
static i128 model_offset(const mview_t *m, int ndim, const int64_t *idx)
{
    i128 off = m->off;
    for (int d = 0; d < ndim; d++)
        off += (i128)idx[d] * m->stride[d];
    return off;
}

/* C-order multi-index of flat index k over shape. */
static void unflatten(int ndim, const int64_t *shape, int64_t k, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = k % shape[d];
        k /= shape[d];
    }
}

static int64_t model_numel(const mview_t *m, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= m->shape[d];
    return n;
}

/* Check that hive's address for idx in view m is the model's, inside the
 * payload and aligned. */
static void check_address(const state_t *s, const mview_t *m, const int64_t *idx)
{
    void *p = hive_array_at(&m->v, idx);
    FZ_CHECK(p != NULL, "hive_array_at gave NULL for an index inside the shape");
    i128 off = model_offset(m, s->ndim, idx);
    FZ_CHECK(off >= 0 && off + (i128)s->isz <= (i128)s->size,
             "model offset %lld of an element outside the %zu-byte payload", (long long)off, s->size);
    FZ_CHECK((unsigned char *)p == s->payload + (size_t)off,
             "hive_array_at gave payload+%td, the model says payload+%lld",
             (unsigned char *)p - s->payload, (long long)off);
    FZ_CHECK((size_t)off % s->isz == 0, "element at offset %lld is not aligned to %zu", (long long)off,
             s->isz);
}

/* Every corner of the view: the extreme addresses along each dimension. */
static void check_corners(const state_t *s, const mview_t *m)
{
    for (int d = 0; d < s->ndim; d++)
        if (m->shape[d] == 0)
            return;
    int64_t idx[HIVE_MAX_DIMS];
    for (unsigned c = 0; c < (1u << s->ndim) && c < CORNER_LIMIT; c++) {
        for (int d = 0; d < s->ndim; d++)
            idx[d] = (c >> d) & 1 ? m->shape[d] - 1 : 0;
        check_address(s, m, idx);
    }
}

/* Python's slice.indices(n) then len(range(...)), in 128 bits. */
static void py_slice(int64_t n, int64_t start, int64_t stop, int64_t step, i128 *ostart, i128 *olen)
{
    i128 st = start, sp = stop, lower = step > 0 ? 0 : -1, upper = step > 0 ? n : (i128)n - 1;
    if (st < 0) {
        st += n;
        if (st < 0)
            st = lower;
    } else if (st > upper) {
        st = upper;
    }
    if (sp < 0) {
        sp += n;
        if (sp < 0)
            sp = lower;
    } else if (sp > upper) {
        sp = upper;
    }
    i128 len = 0;
    if (step > 0 && sp > st)
        len = (sp - st - 1) / step + 1;
    else if (step < 0 && st > sp)
        len = (st - sp - 1) / (-(i128)step) + 1;
    *ostart = st;
    *olen = len;
}

/* ------------------------------------------------------------ operations */

static int64_t pick_index(fz_t *f, int64_t extent)
{
    uint8_t sel = fz_u8(f);
    if (sel < 200 && extent > 0)
        return (int64_t)(fz_u32(f) % (uint64_t)extent);
    if (sel < 220)
        return extent;                               /* one past the end */
    return fz_i64(f);
}

static void op_slice(state_t *s, fz_t *f)
{
    const mview_t *m = &s->views[fz_u8(f) % s->nviews];
    int dim = (int)(fz_u8(f) % (unsigned)(s->ndim + 2)) - 1;
    int64_t start = fz_i64(f), stop = fz_i64(f), step = fz_i64(f);
    hive_array_t out;
    memset(&out, 0xab, sizeof out);
    int rc = hive_array_slice(&m->v, dim, start, stop, step, &out);
    if (dim < 0 || dim >= s->ndim || step == 0) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EINVAL), "hive_array_slice (bad dim or zero step)");
        return;
    }
    FZ_CHECK(rc == HIVE_OK, "hive_array_slice(dim %d, %lld:%lld:%lld) failed: %d", dim,
             (long long)start, (long long)stop, (long long)step, rc);
    i128 pstart, plen;
    py_slice(m->shape[dim], start, stop, step, &pstart, &plen);
    FZ_CHECK(out.shape[dim] == (int64_t)plen, "slice %lld:%lld:%lld of extent %lld has length %lld, "
             "Python says %lld", (long long)start, (long long)stop, (long long)step,
             (long long)m->shape[dim], (long long)out.shape[dim], (long long)plen);
    FZ_CHECK(out.ndim == s->ndim && out.dtype == s->dtype && out.ref.id == s->ref.id,
             "a slice changed ndim, dtype or ref");
    mview_t n = *m;
    n.v = out;
    n.shape[dim] = (int64_t)plen;
    if (plen > 0)
        n.off = m->off + pstart * m->stride[dim];
    n.stride[dim] = mul_sat(m->stride[dim], step);   /* hive keeps the old one when this
                                                        overflows: then plen <= 1 and it is
                                                        never used */
    FZ_CHECK(plen <= 1 || (i128)out.strides[dim] == n.stride[dim],
             "slice stride %lld, the model says %lld", (long long)out.strides[dim],
             (long long)n.stride[dim]);
    for (int d = 0; d < s->ndim; d++)
        FZ_CHECK(out.shape[d] == n.shape[d], "slice changed the extent of dimension %d", d);
    check_corners(s, &n);
    if (s->nviews < MAX_VIEWS)
        s->views[s->nviews++] = n;
    else
        s->views[1 + fz_u8(f) % (MAX_VIEWS - 1)] = n;
}

static void op_at(state_t *s, fz_t *f)
{
    const mview_t *m = &s->views[fz_u8(f) % s->nviews];
    int64_t idx[HIVE_MAX_DIMS];
    bool inside = true;
    for (int d = 0; d < s->ndim; d++) {
        idx[d] = pick_index(f, m->shape[d]);
        inside = inside && idx[d] >= 0 && idx[d] < m->shape[d];
    }
    if (inside) {
        check_address(s, m, idx);
        return;
    }
    FZ_CHECK(hive_array_at(&m->v, idx) == NULL, "hive_array_at gave an address for an index outside "
             "the shape");
    FZ_CHECK(hive_last_error()[0] != '\0', "hive_array_at failed without a sentence");
}

/* The element of flat index k of view m, or -1 if k is out of range. */
static i128 flat_offset(const state_t *s, const mview_t *m, int64_t k)
{
    if (k < 0 || k >= model_numel(m, s->ndim))
        return -1;
    int64_t idx[HIVE_MAX_DIMS];
    unflatten(s->ndim, m->shape, k, idx);
    return model_offset(m, s->ndim, idx);
}

/* Add delta to the model's integer element at off, truncated as hive does;
 * the new value as add_i64 returns it. */
static int64_t model_add_int(state_t *s, size_t off, int64_t delta)
{
    unsigned char *p = s->shadow + off;
    switch (s->dtype) {
#define ADD(T) do { T v; memcpy(&v, p, sizeof v); v = (T)((uint64_t)v + (uint64_t)delta); \
                    memcpy(p, &v, sizeof v); return (int64_t)v; } while (0)
    case HIVE_I8:  ADD(int8_t);
    case HIVE_U8:  ADD(uint8_t);
    case HIVE_I16: ADD(int16_t);
    case HIVE_U16: ADD(uint16_t);
    case HIVE_I32: ADD(int32_t);
    case HIVE_U32: ADD(uint32_t);
    case HIVE_I64: ADD(int64_t);
    case HIVE_U64: ADD(uint64_t);
#undef ADD
    default:       return 0;
    }
}

static void op_add_i64(state_t *s, fz_t *f)
{
    const mview_t *m = &s->views[fz_u8(f) % s->nviews];
    int64_t k = pick_index(f, model_numel(m, s->ndim));
    int64_t delta = fz_i64(f);
    i128 off = flat_offset(s, m, k);
    bool bad = off < 0 || !is_int_dtype(s->dtype);
    if (delta & 1) {                         /* odd deltas: the status form, fetch_add_i64 */
        int64_t old = INT64_MIN + 7;
        int rc = hive_array_fetch_add_i64(&m->v, k, delta, &old);
        if (bad) {
            FZ_CHECK(rc == HIVE_EINVAL, "hive_array_fetch_add_i64 on bad input gave %d", rc);
            FZ_CHECK(old == INT64_MIN + 7, "hive_array_fetch_add_i64 wrote *old on bad input");
            FZ_CHECK(hive_last_error()[0] != '\0', "hive_array_fetch_add_i64 failed without a sentence");
            return;
        }
        FZ_CHECK(rc == HIVE_OK, "hive_array_fetch_add_i64 on good input gave %d", rc);
        int64_t before = model_add_int(s, (size_t)off, 0);
        model_add_int(s, (size_t)off, delta);
        FZ_CHECK(old == before, "hive_array_fetch_add_i64(flat %lld) gave old %lld, the model says %lld",
                 (long long)k, (long long)old, (long long)before);
        return;
    }
    int64_t got = hive_array_add_i64(&m->v, k, delta);
    if (bad) {
        FZ_CHECK(got == 0, "hive_array_add_i64 on bad input returned %lld, not 0", (long long)got);
        FZ_CHECK(hive_last_error()[0] != '\0', "hive_array_add_i64 failed without a sentence");
        return;
    }
    int64_t want = model_add_int(s, (size_t)off, delta);
    FZ_CHECK(got == want, "hive_array_add_i64(flat %lld, %lld) returned %lld, the model says %lld",
             (long long)k, (long long)delta, (long long)got, (long long)want);
}

static bool same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static void op_add_f64(state_t *s, fz_t *f)
{
    const mview_t *m = &s->views[fz_u8(f) % s->nviews];
    int64_t k = pick_index(f, model_numel(m, s->ndim));
    double delta = fz_f64(f);
    i128 off = flat_offset(s, m, k);
    double got = hive_array_add_f64(&m->v, k, delta);
    if (off < 0 || (s->dtype != HIVE_F32 && s->dtype != HIVE_F64)) {
        FZ_CHECK(got == 0, "hive_array_add_f64 on bad input returned %g, not 0", got);
        FZ_CHECK(hive_last_error()[0] != '\0', "hive_array_add_f64 failed without a sentence");
        return;
    }
    unsigned char *p = s->shadow + (size_t)off;
    double want;
    if (s->dtype == HIVE_F64) {
        memcpy(&want, p, sizeof want);
        want += delta;
        memcpy(p, &want, sizeof want);
    } else {
        float v;
        memcpy(&v, p, sizeof v);
        v += (float)delta;
        memcpy(p, &v, sizeof v);
        want = v;
    }
    FZ_CHECK(same_double(got, want), "hive_array_add_f64(flat %lld, %g) returned %g, the model says %g",
             (long long)k, delta, got, want);
}

/* A raw store through hive_array_at, mirrored in the model. */
static void op_write(state_t *s, fz_t *f)
{
    const mview_t *m = &s->views[fz_u8(f) % s->nviews];
    int64_t k = pick_index(f, model_numel(m, s->ndim));
    i128 off = flat_offset(s, m, k);
    if (off < 0)
        return;
    unsigned char bytes[8];
    for (size_t i = 0; i < s->isz; i++)
        bytes[i] = fz_u8(f);
    int64_t idx[HIVE_MAX_DIMS];
    unflatten(s->ndim, m->shape, k, idx);
    unsigned char *p = hive_array_at(&m->v, idx);
    FZ_CHECK(p == s->payload + (size_t)off, "hive_array_at disagrees with the model on flat %lld",
             (long long)k);
    memcpy(p, bytes, s->isz);
    memcpy(s->shadow + (size_t)off, bytes, s->isz);
}

static void op_read(state_t *s, fz_t *f)
{
    const mview_t *m = &s->views[fz_u8(f) % s->nviews];
    int64_t numel = model_numel(m, s->ndim);
    size_t need = (size_t)numel * s->isz;
    size_t have;
    switch (fz_u8(f) % 4) {
    case 0:  have = need; break;
    case 1:  have = need ? need - 1 : 0; break;
    case 2:  have = need + s->isz; break;
    default: have = need / 2; break;
    }
    unsigned char *dst = malloc(have ? have : 1);
    FZ_CHECK(dst != NULL, "out of memory for %zu bytes", have);
    bool write_section = fz_u8(f) & 1;               /* a reader beside an open section would spin */
    if (write_section) {
        hive_array_write_begin(&m->v);
        hive_array_write_end(&m->v);
    }
    int rc = hive_array_read(&m->v, dst, have);
    if (have < need) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EINVAL), "hive_array_read (dst too small)");
    } else {
        FZ_CHECK(rc == HIVE_OK, "hive_array_read of %zu bytes into %zu failed: %d", need, have, rc);
        int64_t idx[HIVE_MAX_DIMS];
        for (int64_t k = 0; k < numel; k++) {
            unflatten(s->ndim, m->shape, k, idx);
            i128 off = model_offset(m, s->ndim, idx);
            FZ_CHECK(memcmp(dst + (size_t)k * s->isz, s->shadow + (size_t)off, s->isz) == 0,
                     "hive_array_read element %lld differs from the model", (long long)k);
        }
    }
    free(dst);
}

/* A view whose dtype or ndim is out of range is refused by everything. */
static void op_corrupt(state_t *s, fz_t *f)
{
    hive_array_t bad = s->views[fz_u8(f) % s->nviews].v;
    if (fz_u8(f) & 1)
        bad.ndim = (fz_u8(f) & 1) ? HIVE_MAX_DIMS + 1 + fz_u8(f) : -1 - fz_u8(f);
    else
        bad.dtype = (hive_dtype_t)((fz_u8(f) & 1) ? 0 : 12 + fz_u8(f));
    int64_t idx[HIVE_MAX_DIMS] = { 0 };
    hive_array_t out;
    unsigned char dst[64];
    FZ_CHECK(hive_array_at(&bad, idx) == NULL, "hive_array_at accepted an invalid view");
    FZ_CHECK_FAIL(hive_array_slice(&bad, 0, 0, 1, 1, &out), FZ_BIT(HIVE_EINVAL), "slice of a bad view");
    FZ_CHECK(hive_array_add_i64(&bad, 0, 1) == 0, "add_i64 accepted an invalid view");
    FZ_CHECK(hive_array_add_f64(&bad, 0, 1) == 0, "add_f64 accepted an invalid view");
    FZ_CHECK_FAIL(hive_array_read(&bad, dst, sizeof dst), FZ_BIT(HIVE_EINVAL), "read of a bad view");
}

/* ------------------------------------------------------------ one input */

/* What hive_array_new must say: 1 valid, 0 EINVAL. numpy's rule: the item
 * size times the nonzero extents fits int64, whatever the order (so every
 * stride fits too). */
static bool new_is_valid(hive_dtype_t dtype, int ndim, const int64_t *shape)
{
    size_t isz = hive_dtype_size(dtype);
    if (isz == 0 || ndim < 0 || ndim > HIVE_MAX_DIMS)
        return false;
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0)
            return false;
    i128 bytes = (i128)isz;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            continue;
        bytes *= shape[d];
        if (bytes > INT64_MAX)
            return false;
    }
    return true;
}

static void check_new_view(state_t *s, const int64_t *shape)
{
    mview_t *m = &s->views[0];
    FZ_CHECK(hive_array_view(H, s->ref, &m->v) == HIVE_OK, "hive_array_view of a new array failed");
    FZ_CHECK(m->v.ndim == s->ndim && m->v.dtype == s->dtype && m->v.ref.id == s->ref.id,
             "the view does not describe the array");
    int64_t numel = 1;
    for (int d = 0; d < s->ndim; d++) {
        FZ_CHECK(m->v.shape[d] == shape[d], "view extent %d is %lld, not %lld", d,
                 (long long)m->v.shape[d], (long long)shape[d]);
        numel *= shape[d];
    }
    FZ_CHECK(hive_array_numel(&m->v) == numel, "numel %lld is not the product %lld",
             (long long)hive_array_numel(&m->v), (long long)numel);
    const void *p;
    size_t size;
    FZ_CHECK(hive_get(H, s->ref, 0, &p, &size) == HIVE_OK, "hive_get of an array failed");
    FZ_CHECK(size == (size_t)numel * s->isz, "payload of %zu bytes for %lld elements of %zu", size,
             (long long)numel, s->isz);
    FZ_CHECK(numel == 0 || p == m->v.data, "hive_get and the view disagree on the payload");
    s->payload = m->v.data;
    s->size = size;
    /* the model: C-contiguous strides (an extent of 0 counts as 1) */
    m->off = 0;
    i128 stride = (i128)s->isz;
    for (int d = s->ndim - 1; d >= 0; d--) {
        m->shape[d] = shape[d];
        m->stride[d] = stride;
        stride = mul_sat(stride, shape[d] ? shape[d] : 1);
    }
    s->shadow = calloc(size ? size : 1, 1);
    FZ_CHECK(s->shadow != NULL, "out of memory for the model of %zu bytes", size);
    FZ_CHECK(size == 0 || memcmp(s->payload, s->shadow, size) == 0, "a new array is not zero-filled");
    s->nviews = 1;
    check_corners(s, m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t f = { data, size };
    state_t s;
    memset(&s, 0, sizeof s);
    uint8_t dt = fz_u8(&f);
    s.dtype = (hive_dtype_t)(dt < 240 ? dt % 13 : (int8_t)dt);   /* 0 and 12 are invalid too */
    s.ndim = (int)(fz_u8(&f) % 12) - 1;                          /* -1 .. 10 */
    int64_t shape[HIVE_MAX_DIMS + 2];
    for (int d = 0; d < HIVE_MAX_DIMS + 2; d++) {
        uint8_t sel = fz_u8(&f);
        shape[d] = sel < 224 ? sel % 6 : fz_i64(&f);
    }
    s.isz = hive_dtype_size(s.dtype);
    bool valid = new_is_valid(s.dtype, s.ndim, shape);
    int rc = hive_array_new(H, s.dtype, s.ndim, shape, &s.ref);
    if (!valid) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EINVAL), "hive_array_new (bad dtype, ndim or shape)");
        return 0;
    }
    if (rc != HIVE_OK) {                     /* too big for the store */
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EFULL) | FZ_BIT(HIVE_ENOMEM), "hive_array_new (valid)");
        return 0;
    }
    check_new_view(&s, shape);
    for (int n = 0; n < MAX_OPS && fz_more(&f); n++) {
        switch (fz_u8(&f) % 8) {
        case 0: op_slice(&s, &f); break;
        case 1: op_at(&s, &f); break;
        case 2: op_add_i64(&s, &f); break;
        case 3: op_add_f64(&s, &f); break;
        case 4: op_write(&s, &f); break;
        case 5: op_read(&s, &f); break;
        case 6: op_corrupt(&s, &f); break;
        default: {                           /* a second view of the object sees the same bytes */
            hive_array_t again;
            FZ_CHECK(hive_array_view(H, s.ref, &again) == HIVE_OK, "hive_array_view failed");
            FZ_CHECK(again.data == s.views[0].v.data, "two views of one array differ");
            break;
        }
        }
    }
    FZ_CHECK(s.size == 0 || memcmp(s.payload, s.shadow, s.size) == 0,
             "the payload differs from the model after the program");
    FZ_CHECK(hive_release(H, s.ref) == HIVE_OK, "hive_release of the array failed");
    FZ_CHECK_FAIL(hive_release(H, s.ref), FZ_BIT(HIVE_ENOENT), "a second hive_release");
    free(s.shadow);
    if (fz_check_due())
        fz_expect_store_at_most(H, 0, 0, 5000);
    return 0;
}
