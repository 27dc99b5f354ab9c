/*
 * actor.h - actor records and the engine's registry of them (actor.c).
 */
#ifndef HIVE_ACTOR_H
#define HIVE_ACTOR_H

#include <pthread.h>

struct hive;
struct hive__actor;

typedef struct hive__actors {
    pthread_mutex_t     lock;       /* create, lookup by name, shutdown: never on a call */
    struct hive__actor *all;
} hive__actors_t;

void hive__actors_init(hive__actors_t *r);
/* After the workers stopped: fail what is queued (HIVE_ESHUTDOWN), run fini
 * of every live actor, free every record. */
void hive__actors_shutdown(struct hive *h);

#endif
