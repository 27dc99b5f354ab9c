/* test_array.c - shared arrays (views, slices, atomics, write sections,
 * snapshots) and cells (publish, acquire, old versions freed). */
#include "testutil.h"
#include "hive_impl.h"

static hive_t *engine(void)
{
    return test_engine(64u << 20, 1, NULL);
}

static void finish(hive_t *h)
{
    test_expect_empty_store(h);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

static void test_dtype_sizes(void **state)
{
    (void)state;
    assert_int_equal(hive_dtype_size(HIVE_BOOL), 1);
    assert_int_equal(hive_dtype_size(HIVE_U8), 1);
    assert_int_equal(hive_dtype_size(HIVE_I16), 2);
    assert_int_equal(hive_dtype_size(HIVE_F32), 4);
    assert_int_equal(hive_dtype_size(HIVE_U32), 4);
    assert_int_equal(hive_dtype_size(HIVE_I64), 8);
    assert_int_equal(hive_dtype_size(HIVE_F64), 8);
    assert_int_equal(hive_dtype_size((hive_dtype_t)0), 0);
    assert_int_equal(hive_dtype_size((hive_dtype_t)12), 0);
}

static void test_new_view_at(void **state)
{
    (void)state;
    hive_t *h = engine();
    int64_t shape[2] = { 4, 5 };
    hive_ref_t r;
    assert_int_equal(hive_array_new(h, HIVE_I64, 2, shape, &r), HIVE_OK);
    hive_array_t a, b;
    assert_int_equal(hive_array_view(h, r, &a), HIVE_OK);
    assert_int_equal(a.ndim, 2);
    assert_int_equal(a.dtype, HIVE_I64);
    assert_int_equal(a.shape[0], 4);
    assert_int_equal(a.shape[1], 5);
    assert_int_equal(a.strides[0], 40);            /* C-contiguous, bytes */
    assert_int_equal(a.strides[1], 8);
    assert_int_equal(a.ref.id, r.id);
    assert_int_equal(hive_array_numel(&a), 20);
    assert_int_equal((uintptr_t)a.data % 64, 0);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++) {
            int64_t idx[2] = { i, j };
            int64_t *e = hive_array_at(&a, idx);
            assert_non_null(e);
            assert_int_equal(*e, 0);                /* zero-filled */
            *e = i * 10 + j;
        }
    /* every view of the object sees the same bytes */
    assert_int_equal(hive_array_view(h, r, &b), HIVE_OK);
    assert_ptr_equal(a.data, b.data);
    int64_t idx[2] = { 3, 4 };
    assert_int_equal(*(int64_t *)hive_array_at(&b, idx), 34);
    const void *raw;
    size_t n;
    assert_int_equal(hive_get(h, r, 0, &raw, &n), HIVE_OK);   /* the payload is the elements */
    assert_ptr_equal(raw, a.data);
    assert_int_equal(n, 160);
    int64_t bad[2] = { 4, 0 };
    assert_null(hive_array_at(&a, bad));
    assert_non_null(strstr(hive_last_error(), "index 4 out of range 0..3 in dimension 0"));
    assert_null(hive_array_at(&a, NULL));

    /* a scalar */
    hive_ref_t s;
    hive_array_t sv;
    assert_int_equal(hive_array_new(h, HIVE_F64, 0, NULL, &s), HIVE_OK);
    assert_int_equal(hive_array_view(h, s, &sv), HIVE_OK);
    assert_int_equal(hive_array_numel(&sv), 1);
    *(double *)hive_array_at(&sv, NULL) = 2.5;
    assert_true(hive_array_add_f64(&sv, 0, 1.0) == 3.5);
    hive_release(h, s);
    hive_release(h, r);
    finish(h);
}

static void test_slices(void **state)
{
    (void)state;
    hive_t *h = engine();
    int64_t shape[2] = { 4, 6 };
    hive_ref_t r;
    hive_array_t a, s, t;
    assert_int_equal(hive_array_new(h, HIVE_I32, 2, shape, &r), HIVE_OK);
    hive_array_view(h, r, &a);
    for (int64_t i = 0; i < 24; i++)
        ((int32_t *)a.data)[i] = (int32_t)i;
    /* rows 1..2, columns ::-2 (5, 3, 1) */
    assert_int_equal(hive_array_slice(&a, 0, 1, 3, 1, &s), HIVE_OK);
    assert_int_equal(hive_array_slice(&s, 1, INT64_MAX, INT64_MIN, -2, &t), HIVE_OK);
    assert_int_equal(t.shape[0], 2);
    assert_int_equal(t.shape[1], 3);
    int32_t out[6];
    assert_int_equal(hive_array_read(&t, out, sizeof out), HIVE_OK);
    int32_t want[6] = { 11, 9, 7, 17, 15, 13 };
    assert_memory_equal(out, want, sizeof want);
    /* a slice is a view: writing through it changes the array */
    int64_t idx[2] = { 0, 0 };
    *(int32_t *)hive_array_at(&t, idx) = -1;
    assert_int_equal(((int32_t *)a.data)[11], -1);
    /* numpy clipping and negative indices */
    assert_int_equal(hive_array_slice(&a, 1, -2, 100, 1, &s), HIVE_OK);   /* [-2:100] -> 2 */
    assert_int_equal(s.shape[1], 2);
    assert_int_equal(hive_array_slice(&a, 1, 4, 2, 1, &s), HIVE_OK);      /* empty */
    assert_int_equal(s.shape[1], 0);
    assert_int_equal(hive_array_numel(&s), 0);
    assert_int_equal(hive_array_read(&s, out, 0), HIVE_OK);
    assert_int_equal(hive_array_slice(&a, 0, -100, 100, 3, &s), HIVE_OK);  /* 0, 3 */
    assert_int_equal(s.shape[0], 2);
    assert_int_equal(s.strides[0], 72);
    /* flat indices follow the view's logical C order */
    assert_int_equal(hive_array_slice(&a, 1, INT64_MAX, INT64_MIN, -1, &s), HIVE_OK);
    assert_int_equal(hive_array_add_i64(&s, 1, 100), 104);                 /* a[0][4] */
    /* bad slices */
    ASSERT_FAILS_WITH(hive_array_slice(&a, 2, 0, 1, 1, &s), HIVE_EINVAL, "dimension 2 outside 0..1");
    ASSERT_FAILS_WITH(hive_array_slice(&a, 0, 0, 1, 0, &s), HIVE_EINVAL, "step 0");
    ASSERT_FAILS_WITH(hive_array_slice(&a, 0, 0, 1, 1, NULL), HIVE_EINVAL, "out is NULL");
    ASSERT_FAILS_WITH(hive_array_slice(NULL, 0, 0, 1, 1, &s), HIVE_EINVAL, "array is NULL");
    hive_release(h, r);
    finish(h);
}

static void test_atomics_every_dtype(void **state)
{
    (void)state;
    hive_t *h = engine();
    int64_t shape[1] = { 3 };
    for (hive_dtype_t t = HIVE_I8; t <= HIVE_U64; t++) {
        hive_ref_t r;
        hive_array_t a;
        assert_int_equal(hive_array_new(h, t, 1, shape, &r), HIVE_OK);
        hive_array_view(h, r, &a);
        assert_int_equal(hive_array_add_i64(&a, 2, 5), 5);
        assert_int_equal(hive_array_add_i64(&a, 2, 7), 12);
        assert_int_equal(hive_array_add_i64(&a, 0, 0), 0);
        hive_release(h, r);
    }
    hive_ref_t r;
    hive_array_t a;
    assert_int_equal(hive_array_new(h, HIVE_I8, 1, shape, &r), HIVE_OK);
    hive_array_view(h, r, &a);
    assert_int_equal(hive_array_add_i64(&a, 0, 127), 127);
    assert_int_equal(hive_array_add_i64(&a, 0, 1), -128);     /* wraps at its width */
    hive_release(h, r);
    for (hive_dtype_t t = HIVE_F32; t <= HIVE_F64; t++) {
        assert_int_equal(hive_array_new(h, t, 1, shape, &r), HIVE_OK);
        hive_array_view(h, r, &a);
        assert_true(hive_array_add_f64(&a, 1, 0.5) == 0.5);
        assert_true(hive_array_add_f64(&a, 1, 0.25) == 0.75);
        assert_true(hive_array_add_i64(&a, 1, 1) == 0);      /* wrong dtype: no change */
        assert_non_null(strstr(hive_last_error(), "not an integer type"));
        assert_true(hive_array_add_f64(&a, 1, 0) == 0.75);
        hive_release(h, r);
    }
    assert_int_equal(hive_array_new(h, HIVE_BOOL, 1, shape, &r), HIVE_OK);
    hive_array_view(h, r, &a);
    assert_int_equal(hive_array_add_i64(&a, 0, 1), 0);
    assert_int_equal(*(uint8_t *)a.data, 0);
    assert_true(hive_array_add_f64(&a, 0, 1) == 0);
    assert_non_null(strstr(hive_last_error(), "not F32 or F64"));
    assert_int_equal(hive_array_add_i64(&a, 3, 1), 0);
    assert_non_null(strstr(hive_last_error(), "flat index 3 out of range 0..2"));
    assert_int_equal(hive_array_add_i64(NULL, 0, 1), 0);
    assert_non_null(strstr(hive_last_error(), "array is NULL"));
    hive_release(h, r);
    finish(h);
}

static void test_write_section_and_read(void **state)
{
    (void)state;
    hive_t *h = engine();
    int64_t shape[2] = { 3, 3 };
    hive_ref_t r;
    hive_array_t a;
    assert_int_equal(hive_array_new(h, HIVE_F32, 2, shape, &r), HIVE_OK);
    hive_array_view(h, r, &a);
    hive_array_write_begin(&a);
    for (int i = 0; i < 9; i++)
        ((float *)a.data)[i] = (float)i;
    hive_array_write_end(&a);
    float snap[9];
    assert_int_equal(hive_array_read(&a, snap, sizeof snap), HIVE_OK);
    for (int i = 0; i < 9; i++)
        assert_true(snap[i] == (float)i);
    ASSERT_FAILS_WITH(hive_array_read(&a, snap, sizeof snap - 1), HIVE_EINVAL,
                      "dst holds 35 bytes, the view needs 36");
    ASSERT_FAILS_WITH(hive_array_read(&a, NULL, 36), HIVE_EINVAL, "dst is NULL");
    hive_array_write_end(&a);                       /* no section open: refused, no damage */
    assert_non_null(strstr(hive_last_error(), "no write section is open"));
    hive_array_t fake = a;
    fake.priv = NULL;
    ASSERT_FAILS_WITH(hive_array_read(&fake, snap, sizeof snap), HIVE_EINVAL, "no array record");
    hive_array_write_begin(&fake);                  /* refused, returns */
    assert_non_null(strstr(hive_last_error(), "no array record"));
    hive_array_write_begin(&a);                     /* the real lock still works */
    hive_array_write_end(&a);
    hive_release(h, r);
    finish(h);
}

static void test_bad_arrays(void **state)
{
    (void)state;
    hive_t *h = engine();
    int64_t shape[9] = { 2, 2, 2, 2, 2, 2, 2, 2, 2 };
    hive_ref_t r = { 77 }, blob;
    hive_array_t v;
    ASSERT_FAILS_WITH(hive_array_new(h, (hive_dtype_t)99, 1, shape, &r), HIVE_EINVAL, "dtype 99");
    ASSERT_FAILS_WITH(hive_array_new(h, HIVE_I8, 9, shape, &r), HIVE_EINVAL, "ndim 9 outside 0..8");
    ASSERT_FAILS_WITH(hive_array_new(h, HIVE_I8, -1, shape, &r), HIVE_EINVAL, "ndim -1");
    ASSERT_FAILS_WITH(hive_array_new(h, HIVE_I8, 2, NULL, &r), HIVE_EINVAL, "shape is NULL");
    int64_t neg[2] = { 3, -1 };
    ASSERT_FAILS_WITH(hive_array_new(h, HIVE_I8, 2, neg, &r), HIVE_EINVAL, "shape[1] = -1");
    int64_t huge[3] = { INT64_MAX / 2, 4, 4 };
    ASSERT_FAILS_WITH(hive_array_new(h, HIVE_F64, 3, huge, &r), HIVE_EINVAL, "overflows");
    int64_t big[1] = { (int64_t)1 << 40 };
    ASSERT_FAILS_WITH(hive_array_new(h, HIVE_U8, 1, big, &r), HIVE_EFULL, "object store full");
    ASSERT_FAILS_WITH(hive_array_new(h, HIVE_U8, 1, shape, NULL), HIVE_EINVAL, "out is NULL");
    assert_int_equal(r.id, 77);
    assert_int_equal(hive_put(h, "blob", 5, &blob), HIVE_OK);
    ASSERT_FAILS_WITH(hive_array_view(h, blob, &v), HIVE_ESTATE, "is a blob, not an array");
    ASSERT_FAILS_WITH(hive_array_view(h, (hive_ref_t){ 0 }, &v), HIVE_ENOENT, "{0}");
    hive_array_t a;
    assert_int_equal(hive_array_new(h, HIVE_U8, 1, shape, &r), HIVE_OK);
    hive_array_view(h, r, &a);
    ASSERT_FAILS_WITH(hive_seal(h, r), HIVE_ESTATE, "is an array, not a blob");
    assert_int_equal(hive_array_numel(NULL), -1);
    hive_release(h, r);
    hive_release(h, blob);
    finish(h);
}

static void test_cells(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_ref_t cell, v1, v2, v3, got;
    uint64_t seq = 99;
    assert_int_equal(hive_cell_new(h, (hive_ref_t){ 0 }, &cell), HIVE_OK);
    ASSERT_FAILS_WITH(hive_cell_acquire(h, cell, &got, &seq), HIVE_ENOENT, "still empty");
    assert_int_equal(seq, 99);
    assert_int_equal(hive_put(h, "w1", 3, &v1), HIVE_OK);
    assert_int_equal(hive_put(h, "w2", 3, &v2), HIVE_OK);
    assert_int_equal(hive_put(h, "w3", 3, &v3), HIVE_OK);
    assert_int_equal(hive_cell_publish(h, cell, v1), HIVE_OK);
    assert_int_equal(hive_release(h, v1), HIVE_OK);           /* the cell keeps its own count */
    assert_int_equal(hive_cell_acquire(h, cell, &got, &seq), HIVE_OK);
    assert_int_equal(got.id, v1.id);
    assert_int_equal(seq, 1);
    const void *p;
    assert_int_equal(hive_get(h, got, 0, &p, NULL), HIVE_OK);
    assert_string_equal(p, "w1");
    /* publish v2 while we still hold v1: v1 lives until we let go */
    assert_int_equal(hive_cell_publish(h, cell, v2), HIVE_OK);
    assert_int_equal(hive_release(h, v2), HIVE_OK);
    hive__store_drain(h);
    assert_int_equal(hive_get(h, got, 0, &p, NULL), HIVE_OK);
    assert_string_equal(p, "w1");
    assert_int_equal(hive_release(h, got), HIVE_OK);          /* last count of v1 */
    hive__store_drain(h);
    ASSERT_FAILS_WITH(hive_get(h, v1, 0, &p, NULL), HIVE_ENOENT, "does not exist");
    assert_int_equal(hive_cell_acquire(h, cell, &got, NULL), HIVE_OK);
    assert_int_equal(got.id, v2.id);
    hive_release(h, got);

    /* bad input */
    ASSERT_FAILS_WITH(hive_cell_publish(h, v3, v3), HIVE_ESTATE, "is a blob, not a cell");
    ASSERT_FAILS_WITH(hive_cell_publish(h, cell, (hive_ref_t){ 0 }), HIVE_ENOENT, "{0}");
    ASSERT_FAILS_WITH(hive_cell_publish(h, cell, cell), HIVE_ESTATE, "cannot be a version");
    ASSERT_FAILS_WITH(hive_cell_publish(h, cell, (hive_ref_t){ 424242 }), HIVE_ENOENT, "424242");
    ASSERT_FAILS_WITH(hive_cell_acquire(h, v3, &got, &seq), HIVE_ESTATE, "not a cell");
    ASSERT_FAILS_WITH(hive_cell_acquire(h, cell, NULL, &seq), HIVE_EINVAL, "version is NULL");
    ASSERT_FAILS_WITH(hive_cell_new(h, (hive_ref_t){ 424242 }, &got), HIVE_ENOENT, "424242");
    ASSERT_FAILS_WITH(hive_get(h, cell, 0, &p, NULL), HIVE_ESTATE, "is a cell");
    assert_int_equal(hive_cell_acquire(h, cell, &got, &seq), HIVE_OK);   /* unharmed */
    assert_int_equal(got.id, v2.id);
    assert_int_equal(seq, 2);
    hive_release(h, got);

    /* a cell made with an initial version starts at seq 0 */
    hive_ref_t c2;
    assert_int_equal(hive_cell_new(h, v3, &c2), HIVE_OK);
    assert_int_equal(hive_cell_acquire(h, c2, &got, &seq), HIVE_OK);
    assert_int_equal(got.id, v3.id);
    assert_int_equal(seq, 0);
    hive_release(h, got);
    hive_release(h, v3);
    /* releasing a cell releases its version */
    hive_release(h, c2);
    hive_release(h, cell);
    finish(h);
}

/* Every nonzero step is valid, INT64_MIN and INT64_MAX included: a step
 * that jumps past the end leaves one element, and a stride * step that does
 * not fit int64_t (UB before) leaves the stride as it was. */
static void test_slice_extreme_steps(void **state)
{
    (void)state;
    hive_t *h = engine();
    int64_t shape[2] = { 3, 5 };
    hive_ref_t r;
    hive_array_t a, s, t;
    assert_int_equal(hive_array_new(h, HIVE_I32, 2, shape, &r), HIVE_OK);
    assert_int_equal(hive_array_view(h, r, &a), HIVE_OK);
    for (int32_t i = 0; i < 15; i++)
        ((int32_t *)a.data)[i] = i;
    int32_t out[5];
    /* [::INT64_MAX] along the columns: column 0 of every row */
    assert_int_equal(hive_array_slice(&a, 1, 0, INT64_MAX, INT64_MAX, &s), HIVE_OK);
    assert_int_equal(s.shape[1], 1);
    assert_int_equal(s.strides[1], 4);              /* 4 * INT64_MAX does not fit: kept */
    assert_int_equal(hive_array_read(&s, out, sizeof out), HIVE_OK);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 5);
    assert_int_equal(out[2], 10);
    /* [::INT64_MIN]: from the end, one element (column 4) */
    assert_int_equal(hive_array_slice(&a, 1, INT64_MAX, INT64_MIN, INT64_MIN, &s), HIVE_OK);
    assert_int_equal(s.shape[1], 1);
    assert_int_equal(s.strides[1], 4);
    assert_int_equal(hive_array_read(&s, out, sizeof out), HIVE_OK);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 9);
    assert_int_equal(out[2], 14);
    /* INT64_MIN as start and stop: clipped as numpy does */
    assert_int_equal(hive_array_slice(&a, 0, INT64_MIN, INT64_MAX, -INT64_MAX, &s), HIVE_OK);
    assert_int_equal(s.shape[0], 0);                /* [-inf:+inf:-big] is empty */
    assert_int_equal(hive_array_slice(&a, 0, INT64_MIN, INT64_MIN, 1, &s), HIVE_OK);
    assert_int_equal(s.shape[0], 0);
    assert_int_equal(hive_array_slice(&a, 0, INT64_MAX, INT64_MIN, -INT64_MAX, &s), HIVE_OK);
    assert_int_equal(s.shape[0], 1);                /* row 2 */
    int64_t idx[2] = { 0, 3 };
    assert_int_equal(*(int32_t *)hive_array_at(&s, idx), 13);
    /* a slice of such a slice still works, and a step whose product fits
     * takes that product */
    assert_int_equal(hive_array_slice(&s, 1, INT64_MIN, INT64_MAX, 2, &t), HIVE_OK);
    assert_int_equal(t.shape[1], 3);
    assert_int_equal(t.strides[1], 8);
    assert_int_equal(hive_array_read(&t, out, sizeof out), HIVE_OK);
    assert_int_equal(out[0], 10);
    assert_int_equal(out[1], 12);
    assert_int_equal(out[2], 14);
    /* a made-up view whose extents overflow is refused, never computed */
    hive_array_t bogus = a;
    bogus.shape[0] = INT64_MAX;
    bogus.shape[1] = 4;
    assert_int_equal(hive_array_numel(&bogus), -1);
    assert_non_null(strstr(hive_last_error(), "overflows the element count"));
    ASSERT_FAILS_WITH(hive_array_read(&bogus, out, sizeof out), HIVE_EINVAL, "not a valid view");
    assert_int_equal(hive_array_add_i64(&bogus, 0, 1), 0);
    assert_non_null(strstr(hive_last_error(), "not a valid view"));
    bogus = a;
    bogus.shape[1] = -1;
    ASSERT_FAILS_WITH(hive_array_slice(&bogus, 1, 0, 1, 1, &s), HIVE_EINVAL, "extent -1");
    hive_release(h, r);
    finish(h);
}

/* numpy's rule for shapes with a zero extent: the item size times the
 * nonzero extents must fit int64_t, whatever the order, so the strides of
 * the view can be computed (F64 {0, 2^62} was accepted and its view
 * overflowed; {2^62, 0} was refused). */
static void test_zero_extent_shapes(void **state)
{
    (void)state;
    hive_t *h = engine();
    const int64_t big = (int64_t)1 << 62;
    int64_t zero_big[2] = { 0, big }, big_zero[2] = { big, 0 };
    hive_ref_t r = { 5 };
    ASSERT_FAILS_WITH(hive_array_new(h, HIVE_F64, 2, zero_big, &r), HIVE_EINVAL, "dimension 1");
    ASSERT_FAILS_WITH(hive_array_new(h, HIVE_F64, 2, big_zero, &r), HIVE_EINVAL, "dimension 0");
    int64_t i32[3] = { 0, (int64_t)1 << 61, 0 };    /* 4 * 2^61 = 2^63 */
    ASSERT_FAILS_WITH(hive_array_new(h, HIVE_I32, 3, i32, &r), HIVE_EINVAL, "overflows");
    assert_int_equal(r.id, 5);
    /* as U8 both fit: empty arrays with computable strides */
    hive_array_t a;
    assert_int_equal(hive_array_new(h, HIVE_U8, 2, zero_big, &r), HIVE_OK);
    assert_int_equal(hive_array_view(h, r, &a), HIVE_OK);
    assert_int_equal(a.strides[0], big);
    assert_int_equal(a.strides[1], 1);
    assert_int_equal(hive_array_numel(&a), 0);
    unsigned char none;
    assert_int_equal(hive_array_read(&a, &none, 0), HIVE_OK);
    hive_array_t s;                                 /* slicing its long dimension */
    assert_int_equal(hive_array_slice(&a, 1, 0, INT64_MAX, big / 2, &s), HIVE_OK);
    assert_int_equal(s.shape[1], 2);
    assert_int_equal(s.strides[1], big / 2);
    hive_release(h, r);
    assert_int_equal(hive_array_new(h, HIVE_U8, 2, big_zero, &r), HIVE_OK);
    assert_int_equal(hive_array_view(h, r, &a), HIVE_OK);
    assert_int_equal(a.strides[0], 1);
    assert_int_equal(a.strides[1], 1);
    assert_int_equal(hive_array_numel(&a), 0);
    hive_release(h, r);
    finish(h);
}

static const hive_actor_class_t empty_class = { .name = "Empty" };

/* Every kind-mismatch sentence names the kind the object really is. */
static void test_kind_sentences(void **state)
{
    (void)state;
    hive_t *h = engine();
    hive_ref_t blob, arr, cell, got;
    hive_actor_t act;
    int64_t shape[1] = { 4 };
    assert_int_equal(hive_put(h, "blob", 5, &blob), HIVE_OK);
    assert_int_equal(hive_array_new(h, HIVE_U8, 1, shape, &arr), HIVE_OK);
    assert_int_equal(hive_cell_new(h, blob, &cell), HIVE_OK);
    assert_int_equal(hive_actor_new(h, &empty_class, NULL, 0, NULL, &act), HIVE_OK);
    hive_ref_t actor = { act.id };
    hive_array_t v;
    const void *p;
    char want[96];
    /* an actor handle where a cell is wanted (said "blob" before) */
    snprintf(want, sizeof want, "object %llu is an actor handle, not a cell", (unsigned long long)act.id);
    ASSERT_FAILS_WITH(hive_cell_publish(h, actor, blob), HIVE_ESTATE, want);
    ASSERT_FAILS_WITH(hive_cell_acquire(h, actor, &got, NULL), HIVE_ESTATE, want);
    ASSERT_FAILS_WITH(hive_cell_publish(h, arr, blob), HIVE_ESTATE, "is an array, not a cell");
    ASSERT_FAILS_WITH(hive_cell_acquire(h, blob, &got, NULL), HIVE_ESTATE, "is a blob, not a cell");
    ASSERT_FAILS_WITH(hive_cell_publish(h, cell, actor), HIVE_ESTATE,
                      "is an actor handle and cannot be a version");
    ASSERT_FAILS_WITH(hive_cell_publish(h, cell, cell), HIVE_ESTATE, "is a cell and cannot be a version");
    /* where an array is wanted */
    ASSERT_FAILS_WITH(hive_array_view(h, actor, &v), HIVE_ESTATE, "is an actor handle, not an array");
    ASSERT_FAILS_WITH(hive_array_view(h, cell, &v), HIVE_ESTATE, "is a cell, not an array");
    ASSERT_FAILS_WITH(hive_array_view(h, blob, &v), HIVE_ESTATE, "is a blob, not an array");
    /* where a blob is wanted ("an cell" before) */
    ASSERT_FAILS_WITH(hive_seal(h, cell), HIVE_ESTATE, "is a cell, not a blob");
    ASSERT_FAILS_WITH(hive_seal(h, actor), HIVE_ESTATE, "is an actor handle, not a blob");
    ASSERT_FAILS_WITH(hive_seal(h, arr), HIVE_ESTATE, "is an array, not a blob");
    ASSERT_FAILS_WITH(hive_get(h, actor, 0, &p, NULL), HIVE_ESTATE, "is an actor handle");
    ASSERT_FAILS_WITH(hive_get(h, cell, 0, &p, NULL), HIVE_ESTATE, "is a cell");
    /* where an actor is wanted (said "does not exist" before) */
    hive_ref_t res;
    ASSERT_FAILS_WITH(hive_call(h, (hive_actor_t){ blob.id }, 0, NULL, 0, NULL, &res), HIVE_ENOENT,
                      "is a blob, not an actor");
    ASSERT_FAILS_WITH(hive_call(h, (hive_actor_t){ cell.id }, 0, NULL, 0, NULL, &res), HIVE_ENOENT,
                      "is a cell, not an actor");
    assert_int_equal(hive_actor_kill(h, act), HIVE_OK);
    hive_release(h, cell);
    hive_release(h, arr);
    hive_release(h, blob);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

/* The status forms tell a failure from a result of 0, which the old forms cannot. */
static void test_status_forms(void **state)
{
    (void)state;
    hive_t *h = test_engine(16u << 20, 1, NULL);
    int64_t shape[1] = { 4 };
    hive_ref_t ri, rf;
    assert_int_equal(hive_array_new(h, HIVE_I32, 1, shape, &ri), HIVE_OK);
    assert_int_equal(hive_array_new(h, HIVE_F32, 1, shape, &rf), HIVE_OK);
    hive_array_t ai, af;
    assert_int_equal(hive_array_view(h, ri, &ai), HIVE_OK);
    assert_int_equal(hive_array_view(h, rf, &af), HIVE_OK);

    int64_t old = 42;
    assert_int_equal(hive_array_fetch_add_i64(&ai, 1, 5, &old), HIVE_OK);
    assert_int_equal(old, 0);
    assert_int_equal(hive_array_fetch_add_i64(&ai, 1, -5, &old), HIVE_OK);
    assert_int_equal(old, 5);                        /* the value before; now 0 again */
    assert_int_equal(hive_array_fetch_add_i64(&ai, 2, INT32_MAX, NULL), HIVE_OK);
    assert_int_equal(hive_array_fetch_add_i64(&ai, 2, 1, &old), HIVE_OK);
    assert_int_equal(old, INT32_MAX);                /* wraps in the element's type */
    assert_int_equal(hive_array_add_i64(&ai, 2, 0), INT32_MIN);
    double dold = 42;
    assert_int_equal(hive_array_fetch_add_f64(&af, 3, 1.5, &dold), HIVE_OK);
    assert_true(dold == 0.0);
    assert_int_equal(hive_array_fetch_add_f64(&af, 3, 1.0, &dold), HIVE_OK);
    assert_true(dold == 1.5);

    /* bad input: a status and a sentence; the output untouched */
    old = 42;
    ASSERT_FAILS_WITH(hive_array_fetch_add_i64(&ai, 4, 1, &old), HIVE_EINVAL,
                      "flat index 4 out of range 0..3");
    ASSERT_FAILS_WITH(hive_array_fetch_add_i64(&af, 0, 1, &old), HIVE_EINVAL,
                      "is not an integer type");
    ASSERT_FAILS_WITH(hive_array_fetch_add_i64(NULL, 0, 1, &old), HIVE_EINVAL, "hive_array_fetch_add_i64");
    assert_int_equal(old, 42);
    ASSERT_FAILS_WITH(hive_array_fetch_add_f64(&ai, 0, 1, &dold), HIVE_EINVAL, "is not F32 or F64");
    ASSERT_FAILS_WITH(hive_array_fetch_add_f64(&af, -1, 1, &dold), HIVE_EINVAL,
                      "flat index -1 out of range");
    assert_true(dold == 1.5);

    /* write sections with a status */
    ASSERT_FAILS_WITH(hive_array_write_unlock(&ai), HIVE_ESTATE, "no write section is open");
    assert_int_equal(hive_array_write_lock(&ai), HIVE_OK);
    assert_int_equal(hive_array_write_unlock(&ai), HIVE_OK);
    ASSERT_FAILS_WITH(hive_array_write_lock(NULL), HIVE_EINVAL, "hive_array_write_lock: array is NULL");
    hive_array_t forged = ai;
    forged.priv = NULL;
    ASSERT_FAILS_WITH(hive_array_write_lock(&forged), HIVE_EINVAL, "no array record");
    ASSERT_FAILS_WITH(hive_array_write_unlock(&forged), HIVE_EINVAL, "no array record");
    int32_t back[4];
    assert_int_equal(hive_array_read(&ai, back, sizeof back), HIVE_OK);   /* no section left open */
    assert_int_equal(back[2], INT32_MIN);

    hive_release(h, ri);
    hive_release(h, rf);
    assert_int_equal(hive_shutdown(h), HIVE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_sizes),
        cmocka_unit_test(test_new_view_at),
        cmocka_unit_test(test_slices),
        cmocka_unit_test(test_atomics_every_dtype),
        cmocka_unit_test(test_write_section_and_read),
        cmocka_unit_test(test_bad_arrays),
        cmocka_unit_test(test_cells),
        cmocka_unit_test(test_slice_extreme_steps),
        cmocka_unit_test(test_zero_extent_shapes),
        cmocka_unit_test(test_kind_sentences),
        cmocka_unit_test(test_status_forms),
    };
    return cmocka_run_group_tests_name("array", tests, NULL, NULL);
}
