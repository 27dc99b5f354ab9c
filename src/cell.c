/*
 * cell.c - cells: an object that holds one current version (a ref).
 *
 * A cell is an object whose record points to a slot {version, seq} (the
 * record's kind-owned pointer, u.owned). Readers load the slot under RCU and
 * take a count on its version; a publisher installs a new slot with a CAS
 * and drops the cell's count on the old version, freeing the old slot after
 * a grace period. When the cell's record goes, the store calls cell_drop
 * (registered by kind in hive__cells_init), which frees the slot and the
 * count: the store itself knows nothing of cells.
 */
#include "cell.h"
#include "store.h"
#include "ds/pool.h"
#include "hive_impl.h"
#include "util/error.h"

typedef struct hive__cell_slot {
    hive__obj_t    *version;
    uint64_t        seq;
    struct hive    *h;
    struct rcu_head rcu;
} cell_slot_t;

static int find_cell(hive_t *h, hive_ref_t cell, const char *fn, hive__obj_t **out)
{
    hive__obj_t *c = hive__obj_find(h, cell, fn);
    if (c == NULL)
        return HIVE_ENOENT;
    if (c->kind != HIVE__CELL)
        return hive__fail(HIVE_ESTATE, "%s: object %llu is %s, not a cell", fn,
                          (unsigned long long)cell.id, hive__kind_name(c->kind));
    *out = c;
    return HIVE_OK;
}

/* Find a version and take the cell's count on it. */
static int take_version(hive_t *h, hive_ref_t version, const char *fn, hive__obj_t **out)
{
    hive__rcu_lock();
    hive__obj_t *v = version.id ? hive__obj_find(h, version, fn) : NULL;
    int rc = HIVE_OK;
    if (v == NULL)
        rc = version.id ? HIVE_ENOENT : hive__fail(HIVE_ENOENT, "%s: version ref {0} names no object", fn);
    else if (v->kind == HIVE__CELL || v->kind == HIVE__ACTOR)
        rc = hive__fail(HIVE_ESTATE, "%s: object %llu is %s and cannot be a version", fn,
                        (unsigned long long)version.id, hive__kind_name(v->kind));
    else if (!hive__obj_pin_live(v))     /* the cell's hold: a pin (store.h) */
        rc = hive__fail(HIVE_ENOENT, "%s: object %llu is being released", fn,
                        (unsigned long long)version.id);
    hive__rcu_unlock();
    if (rc == HIVE_OK)
        *out = v;
    return rc;
}

int hive_cell_new(hive_t *h, hive_ref_t initial, hive_ref_t *cell)
{
    if (h == NULL || cell == NULL)
        return hive__fail(HIVE_EINVAL, "hive_cell_new: %s is NULL", h ? "cell" : "engine");
    hive__obj_t *v = NULL;
    if (initial.id != 0) {
        int rc = take_version(h, initial, "hive_cell_new", &v);
        if (rc != HIVE_OK)
            return rc;
    }
    cell_slot_t *slot = NULL;
    if (v != NULL && (slot = hive__pool_alloc(sizeof *slot)) == NULL) {
        hive__obj_unpin(h, v);
        return hive__fail(HIVE_ENOMEM, "hive_cell_new: cannot allocate a slot");
    }
    hive__obj_t *c;
    int rc = hive__obj_new(h, HIVE__CELL, 0, false, &c);
    if (rc != HIVE_OK) {
        if (v != NULL) {
            hive__pool_free(slot, sizeof *slot);
            hive__obj_unpin(h, v);
        }
        return rc;
    }
    if (slot != NULL)
        *slot = (cell_slot_t){ .version = v, .seq = 0, .h = h };
    atomic_init(&c->u.owned, slot);
    atomic_store_explicit(&c->state, HIVE__SEALED, memory_order_relaxed);   /* published below */
    atomic_store_explicit(&c->deps, HIVE__DEPS_CLOSED, memory_order_relaxed);
    hive__obj_publish(h, c);
    cell->id = c->id;
    return HIVE_OK;
}

static void slot_free_cb(struct rcu_head *head)
{
    hive__rcu_callback_begin();
    cell_slot_t *slot = caa_container_of(head, cell_slot_t, rcu);
    struct hive *h = slot->h;
    hive__pool_free(slot, sizeof *slot);
    /* release: see free_cb in store.c */
    atomic_fetch_sub_explicit(&h->store.callbacks, 1, memory_order_release);
}

int hive_cell_publish(hive_t *h, hive_ref_t cell, hive_ref_t version)
{
    if (h == NULL)
        return hive__fail(HIVE_EINVAL, "hive_cell_publish: engine is NULL");
    const hive__remote_ops_t *rr = hive__remote_of(h, cell.id);
    if (unlikely(rr != NULL))            /* another rank's cell: its owner publishes */
        return rr->cell_publish(rr->ctx, cell, version);
    hive__obj_t *c, *v;
    int rc = find_cell(h, cell, "hive_cell_publish", &c);
    if (rc != HIVE_OK)
        return rc;
    rc = take_version(h, version, "hive_cell_publish", &v);
    if (rc != HIVE_OK)
        return rc;
    cell_slot_t *slot = hive__pool_alloc(sizeof *slot);
    if (slot == NULL) {
        hive__obj_unpin(h, v);
        return hive__fail(HIVE_ENOMEM, "hive_cell_publish: cannot allocate a slot");
    }
    slot->version = v;
    slot->h = h;
    /* acquire: as hive__remote_of. An attached layer pushes the version to
     * the ranks that read this cell; the RCU section keeps v readable for it
     * even if a concurrent publish replaces and releases it */
    const hive__remote_ops_t *r = atomic_load_explicit(&h->remote, memory_order_acquire);
    if (unlikely(r != NULL))
        hive__rcu_lock();
    void *seen = atomic_load_explicit(&c->u.owned, memory_order_acquire);
    cell_slot_t *old;
    uint64_t seq;
    do {
        old = seen;
        slot->seq = seq = old ? old->seq + 1 : 1;
        /* release: readers that load the new slot (acquire) see its fields;
         * acquire on failure: we read old->seq of the slot we now see */
    } while (!atomic_compare_exchange_weak_explicit(&c->u.owned, &seen, slot, memory_order_acq_rel,
                                                    memory_order_acquire));
    if (unlikely(r != NULL)) {
        r->published(r->ctx, cell, v, seq);
        hive__rcu_unlock();
    }
    if (old != NULL) {
        hive__obj_unpin(h, old->version);
        atomic_fetch_add_explicit(&h->store.callbacks, 1, memory_order_relaxed);
        hive__call_rcu(&old->rcu, slot_free_cb);
    }
    return HIVE_OK;
}

int hive_cell_acquire(hive_t *h, hive_ref_t cell, hive_ref_t *version, uint64_t *seq)
{
    if (h == NULL || version == NULL)
        return hive__fail(HIVE_EINVAL, "hive_cell_acquire: %s is NULL", h ? "version" : "engine");
    const hive__remote_ops_t *r = hive__remote_of(h, cell.id);
    if (unlikely(r != NULL))
        return r->cell_acquire(r->ctx, cell, version, seq);
    hive__obj_t *c;
    int rc = find_cell(h, cell, "hive_cell_acquire", &c);
    if (rc != HIVE_OK)
        return rc;
    hive__rcu_lock();
    for (;;) {
        /* acquire: pairs with publish's release; the slot's fields are set */
        cell_slot_t *slot = atomic_load_explicit(&c->u.owned, memory_order_acquire);
        if (slot == NULL) {
            hive__rcu_unlock();
            return hive__fail(HIVE_ENOENT, "hive_cell_acquire: cell %llu is still empty",
                              (unsigned long long)cell.id);
        }
        /* the slot and its version stay readable until we unlock; if the
         * version's count already fell to zero a newer slot is in place */
        if (hive__obj_retain_live(slot->version)) {
            version->id = slot->version->id;
            if (seq)
                *seq = slot->seq;
            break;
        }
        /* relaxed: the cell's pin keeps the record; only whether its users'
         * half is full (hive_retain's limit), else it is on its way out */
        int64_t n = atomic_load_explicit(&slot->version->refs, memory_order_relaxed);
        if (unlikely((n & HIVE__USERS) == HIVE__USERS)) {
            hive__rcu_unlock();
            return hive__fail(HIVE_ESTATE, "hive_cell_acquire: version %llu of cell %llu already has "
                              "%lld counts, the most it can hold", (unsigned long long)slot->version->id,
                              (unsigned long long)cell.id, (long long)HIVE__USERS);
        }
    }
    hive__rcu_unlock();
    return HIVE_OK;
}

/* The store's drop hook for cells: the record goes, and with it the slot
 * and (unless the whole store is closing, when every record goes anyway)
 * the cell's count on its version. acquire: the slot's fields as published. */
static void cell_drop(struct hive *h, hive__obj_t *cell, bool closing)
{
    cell_slot_t *slot = atomic_load_explicit(&cell->u.owned, memory_order_acquire);
    if (slot == NULL)
        return;
    if (!closing)
        hive__obj_unpin(h, slot->version);
    hive__pool_free(slot, sizeof *slot);
}

void hive__cells_init(struct hive *h)
{
    hive__store_on_drop(h, HIVE__CELL, cell_drop);
}
