/*
 * fuzz_replay.c - libFuzzer target for the replay buffer (src/rl/replay.c,
 * include/hive/replay.h).
 *
 * Each input decodes a configuration (capacity, item size, prioritized,
 * alpha, beta, rate limit, min size, seed: anywhere in their types, NaN and
 * infinities included) and makes two buffers with it, then runs a fuzzed
 * program of push, push_batch, sample, update_priorities and stats on both,
 * one thread, against a model kept here: every pushed item, every
 * priority, the counters. Invariants checked:
 *   - bad arguments fail with the documented code and a sentence, and a
 *     valid configuration is refused only for lack of memory; alpha above
 *     16 is refused, and so is an update with a priority whose
 *     priority^alpha passes DBL_MAX / (2 * capacity) (nothing changes);
 *   - a sample returns held keys only, each with the bytes pushed under it;
 *     uniform weights are 1; prioritized weights are finite, in [0, 1], the
 *     largest 1; an item of priority^alpha 0 is never drawn while another
 *     one's is above 0; min_size_to_sample and the rate limit hold;
 *   - update_priorities applies exactly the keys still held, and refuses a
 *     batch with any bad key or priority without changing anything;
 *   - stats match the model (the priority total within rounding);
 *   - the two buffers, same seed and same calls, sample the same things;
 *   - after both are freed the store is empty again.
 *
 * No known open defect of this target is stepped around (the sum-tree
 * drift it found is fixed; its input is in tests/fuzz/crashes-found/).
 */
#include "fuzz.h"

#include <float.h>

#define STORE_BYTES  (2u << 20)
#define MAX_OPS      48
#define MAX_BATCH    4096          /* items per push_batch or sample */
#define MAX_PUSHED   (1u << 20)    /* model bytes per input */

typedef struct model {
    hive_replay_config_t cfg;
    unsigned char *bytes;           /* item k at k * item_size */
    double        *leaf;            /* priority^alpha of item k (prioritized) */
    uint64_t       inserts;         /* keys handed out */
    uint64_t       alloc;           /* items room in bytes/leaf */
    uint64_t       samples;
    double         max_prio, max_leaf;
    double         peak;            /* largest total seen: the scale of rounding */
} model_t;

static hive_t *H;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fz_setup(*argc, *argv);
    H = fz_engine(1, STORE_BYTES);
    return 0;
}

/* ------------------------------------------------------------ model */

static uint64_t held_from(const model_t *m)
{
    return m->inserts > m->cfg.capacity ? m->inserts - m->cfg.capacity : 0;
}

static uint64_t fill(const model_t *m)
{
    return m->inserts - held_from(m);
}

static double model_total(const model_t *m)
{
    double t = 0;
    for (uint64_t k = held_from(m); k < m->inserts; k++)
        t += m->leaf[k];
    return t;
}

static bool model_reserve(model_t *m, uint64_t n)
{
    if (m->inserts + n <= m->alloc)
        return true;
    uint64_t want = m->inserts + n;
    if (want * m->cfg.item_size > MAX_PUSHED)
        return false;
    m->bytes = realloc(m->bytes, want * m->cfg.item_size);
    m->leaf = realloc(m->leaf, want * sizeof *m->leaf);
    FZ_CHECK(m->bytes != NULL && m->leaf != NULL, "out of memory for the model");
    m->alloc = want;
    return true;
}

static void model_push(model_t *m, const unsigned char *items, uint64_t n)
{
    if (n == 0)
        return;
    memcpy(m->bytes + m->inserts * m->cfg.item_size, items, n * m->cfg.item_size);
    for (uint64_t i = 0; i < n; i++)
        m->leaf[m->inserts + i] = m->cfg.prioritized ? m->max_leaf : 0;
    m->inserts += n;
    double t = model_total(m);
    if (m->cfg.prioritized && t > m->peak)
        m->peak = t;
}

/* ------------------------------------------------------------ config */

static uint64_t pick_capacity(fz_t *f)
{
    static const uint64_t edges[] = {
        0, 1, 2, 31, 32, 33, 64, 100, 1000, 4096, 1u << 20, (uint64_t)1 << 48, ((uint64_t)1 << 48) + 1,
        UINT64_MAX, UINT64_MAX / 2,
    };
    uint8_t sel = fz_u8(f);
    if (sel < 200)
        return 1 + sel % 40;
    if (sel < 240)
        return edges[sel % (sizeof edges / sizeof edges[0])];
    return fz_u64(f);
}

static size_t pick_item_size(fz_t *f)
{
    static const size_t edges[] = { 0, 1, 15, 16, 17, 64, 255, 256, 257, 1000, 4096, SIZE_MAX,
                                    SIZE_MAX / 2, (size_t)1 << 32 };
    uint8_t sel = fz_u8(f);
    if (sel < 200)
        return 1 + sel % 24;
    if (sel < 240)
        return edges[sel % (sizeof edges / sizeof edges[0])];
    return (size_t)fz_u64(f);
}

static bool config_valid(const hive_replay_config_t *c)
{
    if (c->capacity == 0 || c->item_size == 0 || c->capacity > ((uint64_t)1 << 48))
        return false;
    unsigned __int128 bytes = (unsigned __int128)c->capacity * c->item_size;
    if (bytes > INT64_MAX)
        return false;
    const double reals[] = { c->alpha, c->beta, c->samples_per_insert, c->error_buffer };
    for (int i = 0; i < 4; i++)
        if (!isfinite(reals[i]) || reals[i] < 0)
            return false;
    return c->alpha <= 16 && c->min_size_to_sample <= c->capacity;
}

static void decode_config(fz_t *f, hive_replay_config_t *c)
{
    memset(c, 0, sizeof *c);
    c->capacity = pick_capacity(f);
    c->item_size = pick_item_size(f);
    uint8_t flags = fz_u8(f);
    c->prioritized = flags & 1;
    c->alpha = (flags & 2) ? fz_f64(f) : 0.6;
    c->beta = (flags & 4) ? fz_f64(f) : 0.4;
    c->samples_per_insert = (flags & 8) ? fz_f64(f) : 0;
    c->error_buffer = (flags & 16) ? fz_f64(f) : 0;
    if (flags & 32) {
        uint8_t sel = fz_u8(f);
        c->min_size_to_sample = sel < 200 && c->capacity ? sel % (c->capacity < 8 ? c->capacity + 1 : 8)
                                                          : (uint64_t)fz_i64(f);
    }
    c->seed = (flags & 64) ? fz_u64(f) : 42;
}

/* ------------------------------------------------------------ ops */

typedef struct run {
    hive_replay_t *a, *b;          /* b: a twin for the determinism check, or NULL */
    model_t        m;
    uint64_t       rng_a, rng_b;
    uint64_t       last_keys[MAX_BATCH];
    size_t         nlast;
} run_t;

static void fill_items(fz_t *f, unsigned char *dst, size_t bytes)
{
    uint8_t seed = fz_u8(f);
    for (size_t i = 0; i < bytes; i++)
        dst[i] = (unsigned char)(seed + i * 31 + (i >> 8));
}

static void op_push(run_t *r, fz_t *f, bool batch)
{
    size_t isz = r->m.cfg.item_size;
    uint64_t n = 1;
    if (batch) {
        uint8_t sel = fz_u8(f);
        n = sel < 200 ? sel % 70 : (sel < 230 ? r->m.cfg.capacity + sel % 3 : fz_u16(f) % MAX_BATCH);
        if (n > MAX_BATCH)
            n = MAX_BATCH;
    }
    if (!model_reserve(&r->m, n))
        return;
    unsigned char *items = malloc(n * isz + 1);
    FZ_CHECK(items != NULL, "out of memory");
    fill_items(f, items, n * isz);
    for (int which = 0; which < 2; which++) {
        hive_replay_t *rb = which ? r->b : r->a;
        if (rb == NULL)
            continue;
        int rc = batch ? hive_replay_push_batch(rb, items, n) : hive_replay_push(rb, items);
        FZ_CHECK(rc == HIVE_OK, "hive_replay_push%s of %llu items failed: %d", batch ? "_batch" : "",
                 (unsigned long long)n, rc);
    }
    model_push(&r->m, items, n);
    free(items);
}

/* What hive_replay_sample must return (before waiting is considered). */
static int model_admit(const model_t *m, size_t batch)
{
    if (batch == 0)
        return HIVE_EINVAL;
    uint64_t f = fill(m);
    if (f < m->cfg.min_size_to_sample)
        return HIVE_ETIMEDOUT;
    if (batch > f)
        return HIVE_EINVAL;
    if (m->cfg.samples_per_insert == 0)
        return HIVE_OK;
    double allowed = m->cfg.samples_per_insert * (double)m->inserts + m->cfg.error_buffer;
    return (double)(m->samples + batch) <= allowed ? HIVE_OK : HIVE_ETIMEDOUT;
}

static void check_sample(run_t *r, size_t batch, const unsigned char *items, const uint64_t *keys,
                         const double *w, bool distinct)
{
    const model_t *m = &r->m;
    size_t isz = m->cfg.item_size;
    double total = m->cfg.prioritized ? model_total(m) : 0;
    bool weighted = m->cfg.prioritized && total > 0;
    double wmax = 0;
    for (size_t i = 0; i < batch; i++) {
        uint64_t k = keys[i];
        FZ_CHECK(k >= held_from(m) && k < m->inserts, "sampled key %llu is not held (keys %llu..%llu)",
                 (unsigned long long)k, (unsigned long long)held_from(m),
                 (unsigned long long)m->inserts);
        FZ_CHECK(items == NULL || memcmp(items + i * isz, m->bytes + k * isz, isz) == 0,
                 "sampled item %zu (key %llu) is not the bytes pushed under its key", i,
                 (unsigned long long)k);
        for (size_t j = 0; distinct && j < i; j++)
            FZ_CHECK(keys[j] != k, "a distinct batch of %zu has key %llu at %zu and %zu", batch,
                     (unsigned long long)k, j, i);
        /* without replacement, priority-0 items follow once the rest is drawn */
        if (weighted && !distinct)
            FZ_CHECK(m->leaf[k] > 0, "sampled key %llu has priority^alpha %g while the total is %g",
                     (unsigned long long)k, m->leaf[k], total);
        if (w == NULL)
            continue;
        if (!weighted) {
            FZ_CHECK(w[i] == 1.0, "uniform sample weight %zu is %g, not 1", i, w[i]);
        } else {
            FZ_CHECK(isfinite(w[i]) && w[i] >= 0 && w[i] <= 1, "weight %zu is %g (key %llu, "
                     "priority^alpha %g, beta %g)", i, w[i], (unsigned long long)k, m->leaf[k],
                     m->cfg.beta);
            if (w[i] > wmax)
                wmax = w[i];
        }
    }
    if (weighted && w != NULL)
        FZ_CHECK(wmax == 1.0, "the largest weight of a batch of %zu is %g, not 1", batch, wmax);
}

static void op_sample(run_t *r, fz_t *f)
{
    uint8_t sel = fz_u8(f);
    size_t batch = sel < 200 ? 1 + sel % 16 : (sel < 230 ? (size_t)fill(&r->m) + sel % 3 - 1
                                                         : fz_u16(f) % (MAX_BATCH + 2));
    if (batch > MAX_BATCH)
        batch = MAX_BATCH;
    if (batch * r->m.cfg.item_size > MAX_PUSHED)    /* the copies are the harness's memory */
        batch = MAX_PUSHED / r->m.cfg.item_size + 1;
    uint8_t how = fz_u8(f);
    bool own_rng = how & 1, want_items = how & 2, want_keys = how & 4, want_w = how & 8;
    bool distinct = how & 32;                /* hive_replay_sample_ex, without replacement */
    int64_t timeout = (how & 16) ? 1000 : 0;
    size_t isz = r->m.cfg.item_size;
    unsigned char *items[2];
    uint64_t *keys[2];
    double *w[2];
    int rc[2] = { 0, 0 };
    for (int which = 0; which < 2; which++) {
        hive_replay_t *rb = which ? r->b : r->a;
        items[which] = malloc(batch * isz + 1);
        keys[which] = malloc((batch + 1) * sizeof(uint64_t));
        w[which] = malloc((batch + 1) * sizeof(double));
        FZ_CHECK(items[which] && keys[which] && w[which], "out of memory");
        if (rb == NULL)
            continue;
        /* keys and weights are always asked for when the items are, to check them */
        rc[which] = hive_replay_sample_ex(rb, batch, distinct ? HIVE_REPLAY_DISTINCT : 0,
                                          own_rng ? (which ? &r->rng_b : &r->rng_a) : NULL,
                                          want_items ? items[which] : NULL,
                                          want_keys || want_items ? keys[which] : NULL,
                                          want_w || want_items ? w[which] : NULL, timeout);
    }
    int want = distinct && batch > r->m.cfg.capacity ? HIVE_EINVAL : model_admit(&r->m, batch);
    if (want != HIVE_OK) {
        FZ_CHECK_FAIL(rc[0], FZ_BIT(want), "hive_replay_sample (refused by the model)");
    } else {
        FZ_CHECK(rc[0] == HIVE_OK, "hive_replay_sample(batch %zu of %llu held) failed: %d", batch,
                 (unsigned long long)fill(&r->m), rc[0]);
        r->m.samples += batch;
        if (want_keys || want_items)
            check_sample(r, batch, want_items ? items[0] : NULL, keys[0],
                         want_w || want_items ? w[0] : NULL, distinct);
        if (want_keys || want_items) {
            memcpy(r->last_keys, keys[0], batch * sizeof(uint64_t));
            r->nlast = batch;
        }
    }
    if (r->b != NULL) {
        FZ_CHECK(rc[1] == rc[0], "twin buffers answered a sample with %d and %d", rc[0], rc[1]);
        if (rc[0] == HIVE_OK && (want_keys || want_items))
            FZ_CHECK(memcmp(keys[0], keys[1], batch * sizeof(uint64_t)) == 0,
                     "twin buffers (same seed, same calls) sampled different keys");
        if (rc[0] == HIVE_OK && (want_w || want_items))
            FZ_CHECK(memcmp(w[0], w[1], batch * sizeof(double)) == 0,
                     "twin buffers (same seed, same calls) gave different weights");
    }
    for (int which = 0; which < 2; which++) {
        free(items[which]);
        free(keys[which]);
        free(w[which]);
    }
}

/* The largest priority^alpha an update may set: the sum over a full
 * buffer stays finite (include/hive/replay.h, "Limits of priorities"). */
static double leaf_bound(const model_t *m)
{
    return DBL_MAX / (2.0 * (double)m->cfg.capacity);
}

static void op_update(run_t *r, fz_t *f)
{
    size_t n = fz_u8(f) % 40;
    uint64_t *keys = malloc((n + 1) * sizeof *keys);
    double *prio = malloc((n + 1) * sizeof *prio);
    FZ_CHECK(keys && prio, "out of memory");
    bool valid = true;
    size_t applied = 0;
    double pmax = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t sel = fz_u8(f);
        if (sel < 160 && r->nlast > 0)
            keys[i] = r->last_keys[fz_u8(f) % r->nlast];
        else if (sel < 230 && r->m.inserts > 0)
            keys[i] = fz_u64(f) % r->m.inserts;
        else
            keys[i] = (uint64_t)fz_i64(f);
        prio[i] = fz_f64(f);
        valid = valid && keys[i] < r->m.inserts && isfinite(prio[i]) && prio[i] >= 0;
        applied += keys[i] >= held_from(&r->m) && keys[i] < r->m.inserts;
        if (prio[i] > pmax)
            pmax = prio[i];
    }
    double lmax = pow(pmax, r->m.cfg.alpha);
    if (valid && r->m.cfg.prioritized && !(lmax <= leaf_bound(&r->m)))
        valid = false;                        /* above the bound: refused, nothing changes */
    int rc[2] = { 0, 0 };
    for (int which = 0; which < 2; which++) {
        hive_replay_t *rb = which ? r->b : r->a;
        if (rb != NULL)
            rc[which] = hive_replay_update_priorities(rb, keys, prio, n);
    }
    FZ_CHECK(r->b == NULL || rc[0] == rc[1], "twin buffers applied %d and %d priorities", rc[0], rc[1]);
    if (!r->m.cfg.prioritized) {
        FZ_CHECK_FAIL(rc[0], FZ_BIT(HIVE_ESTATE), "update_priorities on a uniform buffer");
    } else if (!valid) {
        FZ_CHECK_FAIL(rc[0], FZ_BIT(HIVE_EINVAL), "update_priorities with a bad key or priority, "
                      "or priority^alpha above the bound");
    } else {
        FZ_CHECK(rc[0] >= 0 && (size_t)rc[0] == applied, "update_priorities applied %d of %zu, the "
                 "model says %zu are held", rc[0], n, applied);
        model_t *m = &r->m;
        double passing = model_total(m);      /* the tree passes through at most this */
        for (size_t i = 0; i < n; i++)
            if (keys[i] >= held_from(m)) {
                double v = pow(prio[i], m->cfg.alpha);
                m->leaf[keys[i]] = v < lmax ? v : lmax;      /* as hive clamps */
                passing += m->leaf[keys[i]];
            }
        if (passing > m->peak)
            m->peak = passing;
        if (pmax > m->max_prio)
            m->max_prio = pmax;
        if (lmax > m->max_leaf)
            m->max_leaf = lmax;
        double t = model_total(m);
        if (t > m->peak)
            m->peak = t;
    }
    free(keys);
    free(prio);
}

static void op_stats(run_t *r)
{
    hive_replay_stats_t st;
    FZ_CHECK(hive_replay_stats(r->a, &st) == HIVE_OK, "hive_replay_stats failed");
    const model_t *m = &r->m;
    FZ_CHECK(st.capacity == m->cfg.capacity && st.inserts == m->inserts && st.size == fill(m) &&
             st.samples == m->samples, "stats: capacity %llu inserts %llu size %llu samples %llu, the "
             "model says %llu %llu %llu %llu", (unsigned long long)st.capacity,
             (unsigned long long)st.inserts, (unsigned long long)st.size,
             (unsigned long long)st.samples, (unsigned long long)m->cfg.capacity,
             (unsigned long long)m->inserts, (unsigned long long)fill(m),
             (unsigned long long)m->samples);
    if (!m->cfg.prioritized)
        return;
    FZ_CHECK(st.max_priority == m->max_prio, "stats: max_priority %g, the model says %g",
             st.max_priority, m->max_prio);
    double want = model_total(m);
    /* the tree adds differences, so its total carries rounding of the
     * largest totals it went through */
    if (isfinite(m->peak) && isfinite(want))
        FZ_CHECK(fabs(st.total_priority - want) <= 1e-9 * (m->peak > 1 ? m->peak : 1),
                 "stats: total_priority %.17g, the model says %.17g (peak %g)", st.total_priority,
                 want, m->peak);
}

/* The item array holds every held item in row key % capacity. */
static void op_array(run_t *r)
{
    hive_array_t v;
    FZ_CHECK(hive_array_view(H, hive_replay_array(r->a), &v) == HIVE_OK, "view of the item array");
    const model_t *m = &r->m;
    FZ_CHECK(v.dtype == HIVE_U8 && v.ndim == 2 && (uint64_t)v.shape[0] == m->cfg.capacity &&
             (size_t)v.shape[1] == m->cfg.item_size, "the item array is not U8 {capacity, item_size}");
    for (uint64_t k = held_from(m); k < m->inserts && k < held_from(m) + 64; k++) {
        int64_t idx[2] = { (int64_t)(k % m->cfg.capacity), 0 };
        const unsigned char *row = hive_array_at(&v, idx);
        FZ_CHECK(row != NULL && memcmp(row, m->bytes + k * m->cfg.item_size, m->cfg.item_size) == 0,
                 "row %lld of the item array does not hold key %llu", (long long)idx[0],
                 (unsigned long long)k);
    }
}

static void op_bad_args(run_t *r)
{
    uint64_t key = 0;
    double p = 1;
    hive_replay_stats_t st;
    FZ_CHECK_FAIL(hive_replay_push(r->a, NULL), FZ_BIT(HIVE_EINVAL), "push of NULL");
    FZ_CHECK_FAIL(hive_replay_push(NULL, &key), FZ_BIT(HIVE_EINVAL), "push to NULL");
    FZ_CHECK_FAIL(hive_replay_push_batch(r->a, NULL, 1), FZ_BIT(HIVE_EINVAL), "push_batch of NULL");
    FZ_CHECK(hive_replay_push_batch(r->a, NULL, 0) == HIVE_OK, "push_batch of 0 items failed");
    FZ_CHECK_FAIL(hive_replay_sample(NULL, 1, NULL, NULL, NULL, NULL, 0), FZ_BIT(HIVE_EINVAL),
                  "sample of NULL");
    FZ_CHECK_FAIL(hive_replay_sample(r->a, 0, NULL, NULL, NULL, NULL, 0), FZ_BIT(HIVE_EINVAL),
                  "sample of 0");
    FZ_CHECK_FAIL(hive_replay_update_priorities(r->a, NULL, &p, 1), FZ_BIT(HIVE_EINVAL) |
                  FZ_BIT(HIVE_ESTATE), "update of NULL keys");
    FZ_CHECK_FAIL(hive_replay_update_priorities(r->a, &key, NULL, 1), FZ_BIT(HIVE_EINVAL) |
                  FZ_BIT(HIVE_ESTATE), "update of NULL priorities");
    FZ_CHECK_FAIL(hive_replay_stats(r->a, NULL), FZ_BIT(HIVE_EINVAL), "stats into NULL");
    FZ_CHECK_FAIL(hive_replay_stats(NULL, &st), FZ_BIT(HIVE_EINVAL), "stats of NULL");
    FZ_CHECK(hive_replay_array(NULL).id == 0, "the array of a NULL buffer is not {0}");
}

/* ------------------------------------------------------------ one input */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_t f = { data, size };
    run_t r;
    memset(&r, 0, sizeof r);
    decode_config(&f, &r.m.cfg);
    bool valid = config_valid(&r.m.cfg);
    int rc = hive_replay_new(H, &r.m.cfg, &r.a);
    if (!valid) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EINVAL), "hive_replay_new (bad config)");
        return 0;
    }
    if (rc != HIVE_OK) {
        FZ_CHECK_FAIL(rc, FZ_BIT(HIVE_EFULL) | FZ_BIT(HIVE_ENOMEM), "hive_replay_new (valid config)");
        return 0;
    }
    if (hive_replay_new(H, &r.m.cfg, &r.b) != HIVE_OK)
        r.b = NULL;                          /* no room for a twin: no determinism check */
    r.m.max_prio = 1.0;
    r.m.max_leaf = 1.0;
    r.rng_a = r.rng_b = fz_u64(&f);
    for (int n = 0; n < MAX_OPS && fz_more(&f); n++) {
        switch (fz_u8(&f) % 8) {
        case 0: case 1: op_push(&r, &f, false); break;
        case 2: op_push(&r, &f, true); break;
        case 3: case 4: op_sample(&r, &f); break;
        case 5: op_update(&r, &f); break;
        case 6: op_stats(&r); op_array(&r); break;
        default: op_bad_args(&r); break;
        }
    }
    op_stats(&r);
    FZ_CHECK(hive_replay_free(r.a) == HIVE_OK, "hive_replay_free failed");
    if (r.b != NULL)
        FZ_CHECK(hive_replay_free(r.b) == HIVE_OK, "hive_replay_free of the twin failed");
    free(r.m.bytes);
    free(r.m.leaf);
    if (fz_check_due())
        fz_expect_store_at_most(H, 0, 0, 5000);
    return 0;
}
