/*
 * local.c - worker-local values.
 *
 * Keys are indices into the engine's table of definitions, which only grows
 * (under a mutex, in hive_local_new) and whose filled entries never change,
 * so hive_local reads it with one acquire load of the count and no lock.
 *
 * Each worker keeps, per nesting depth, an array of {value, seq}: seq is the
 * number of the task run that last used the value on that worker. A call
 * from a task with another number first resets the value (reinit, or fini +
 * init), so each task sees a fresh value and repeated calls in one task see
 * the same one. The arrays grow on first use of a key or depth (a slow
 * path), never on later calls.
 */
#include "local.h"
#include "hive_impl.h"
#include "task.h"
#include "util/error.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

typedef struct lslot {
    void    *value;
    uint64_t seq;
    bool     live;
} lslot_t;

typedef struct level {
    uint32_t cap;
    lslot_t *slots;
} level_t;

typedef struct wlocals {
    unsigned depths;
    level_t *level;
} wlocals_t;

void hive__locals_init(hive__locals_t *l)
{
    pthread_mutex_init(&l->lock, NULL);
    atomic_init(&l->n, 0);
}

void hive__locals_destroy(hive__locals_t *l)
{
    pthread_mutex_destroy(&l->lock);
}

void hive_local_keep(void *value, void *arg)
{
    (void)value;
    (void)arg;
}

int hive_local_new(hive_t *h, const hive_local_def_t *def, hive_local_t *out)
{
    if (h == NULL || def == NULL || out == NULL || def->init == NULL)
        return hive__fail(HIVE_EINVAL, "hive_local_new: %s is NULL",
                          h == NULL ? "engine" : def == NULL ? "def" : out == NULL ? "out" : "def->init");
    hive__locals_t *l = &h->locals;
    pthread_mutex_lock(&l->lock);
    uint32_t n = atomic_load_explicit(&l->n, memory_order_relaxed);
    if (n >= HIVE_MAX_LOCALS) {
        pthread_mutex_unlock(&l->lock);
        return hive__fail(HIVE_ENOMEM, "hive_local_new: all %d keys are in use", HIVE_MAX_LOCALS);
    }
    l->defs[n] = *def;
    /* release: the definition is complete before any reader sees the key */
    atomic_store_explicit(&l->n, n + 1, memory_order_release);
    pthread_mutex_unlock(&l->lock);
    out->id = n;
    return HIVE_OK;
}

/* The slot for (depth, key) on w, growing the tables if needed. */
static lslot_t *slot_of(hive__worker_t *w, unsigned depth, uint32_t key)
{
    wlocals_t *wl = w->locals;
    if (wl == NULL) {
        if ((wl = hive__calloc(1, sizeof *wl)) == NULL)
            return NULL;
        w->locals = wl;
    }
    if (depth >= wl->depths) {
        unsigned nd = depth + 1;
        level_t *lv = hive__realloc(wl->level, nd * sizeof *lv);
        if (lv == NULL)
            return NULL;
        memset(lv + wl->depths, 0, (nd - wl->depths) * sizeof *lv);
        wl->level = lv;
        wl->depths = nd;
    }
    level_t *lv = &wl->level[depth];
    if (key >= lv->cap) {
        uint32_t cap = lv->cap ? lv->cap : 8;
        while (cap <= key)
            cap *= 2;
        lslot_t *s = hive__realloc(lv->slots, cap * sizeof *s);
        if (s == NULL)
            return NULL;
        memset(s + lv->cap, 0, (cap - lv->cap) * sizeof *s);
        lv->slots = s;
        lv->cap = cap;
    }
    return &lv->slots[key];
}

void *hive_local(hive_ctx_t *ctx, hive_local_t key)
{
    if (ctx == NULL || ctx->w == NULL) {
        hive__fail(HIVE_EINVAL, "hive_local: not inside a task");
        return NULL;
    }
    hive__locals_t *l = &ctx->h->locals;
    /* acquire: pairs with hive_local_new's release of the count */
    if (key.id >= atomic_load_explicit(&l->n, memory_order_acquire)) {
        hive__fail(HIVE_ENOENT, "hive_local: key %u was never made (%u keys)", key.id,
                   atomic_load_explicit(&l->n, memory_order_relaxed));
        return NULL;
    }
    const hive_local_def_t *def = &l->defs[key.id];
    lslot_t *s = slot_of(ctx->w, ctx->depth, key.id);
    if (s == NULL) {
        hive__fail(HIVE_ENOMEM, "hive_local: cannot grow worker %u's table for key %u",
                   ctx->w->index, key.id);
        return NULL;
    }
    if (s->live && s->seq != ctx->seq) {
        if (def->reinit != NULL) {
            def->reinit(s->value, def->arg);
        } else {
            if (def->fini != NULL)
                def->fini(s->value, def->arg);
            s->live = false;
        }
    }
    if (!s->live) {
        s->value = def->init(def->arg);
        if (s->value == NULL) {
            hive__fail(HIVE_ENOMEM, "hive_local: init of key %u returned NULL on worker %u",
                       key.id, ctx->w->index);
            return NULL;
        }
        s->live = true;
    }
    s->seq = ctx->seq;
    return s->value;
}

void hive__local_worker_exit(hive__worker_t *w)
{
    wlocals_t *wl = w->locals;
    if (wl == NULL)
        return;
    hive__locals_t *l = &w->sched->h->locals;
    for (unsigned d = 0; d < wl->depths; d++) {
        level_t *lv = &wl->level[d];
        for (uint32_t k = 0; k < lv->cap; k++)
            if (lv->slots[k].live && l->defs[k].fini != NULL)
                l->defs[k].fini(lv->slots[k].value, l->defs[k].arg);
        free(lv->slots);
    }
    free(wl->level);
    free(wl);
    w->locals = NULL;
}
