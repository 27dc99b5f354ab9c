/*
 * obslist.h - the engine's list of live replay buffers and env pools, for
 * statistics (hive_replay_list, hive_envpool_list, the hive-top file).
 * A buffer or pool embeds a hive__listed_t and adds it when made, removes
 * it when freed; both take the list's mutex, as do the readers, so a
 * reader never sees a freed record. Never on a push, sample or step path.
 */
#ifndef HIVE_OBSLIST_H
#define HIVE_OBSLIST_H

#include <pthread.h>
#include <stdint.h>

#include "hive.h"

struct hive;

enum { HIVE__LISTED_REPLAY, HIVE__LISTED_ENVPOOL, HIVE__LISTED_KINDS };

typedef struct hive__listed {
    struct hive__listed *prev, *next;
    uint64_t             id;        /* 1, 2, ... per kind and engine */
    int                  kind;
} hive__listed_t;

typedef struct hive__obslist {
    pthread_mutex_t lock;
    hive__listed_t *head, *tail;    /* oldest first */
    uint64_t        made[HIVE__LISTED_KINDS];
} hive__obslist_t;

void hive__obslist_init(hive__obslist_t *l);
void hive__obslist_destroy(hive__obslist_t *l);
void hive__listed_add(struct hive *h, hive__listed_t *n, int kind);
void hive__listed_remove(struct hive *h, hive__listed_t *n);

/* Figures of a listed record (list lock held): replay.c and envpool.c. */
void hive__replay_info(const hive__listed_t *n, hive_replay_info_t *out);
void hive__envpool_info(const hive__listed_t *n, hive_envpool_info_t *out);

#endif
