/*
 * publish.h - the statistics publisher for hive-top (publish.c): a thread
 * that writes the engine's hive_stats as a small JSON file every 100 ms.
 */
#ifndef HIVE_PUBLISH_H
#define HIVE_PUBLISH_H

#include <pthread.h>
#include <stdbool.h>

struct hive;

typedef struct hive__publish {
    bool            on;
    bool            stop;       /* under lock */
    pthread_t       thread;
    pthread_mutex_t lock;
    pthread_cond_t  cond;
    char            path[512];  /* the file hive-top reads */
    char            tmp[520];   /* written, then renamed over path */
} hive__publish_t;

/* Start publishing if asked (flag, or $HIVE_STATS=1): the first snapshot
 * is written before this returns, so a bad directory fails here. */
int  hive__publish_start(struct hive *h, bool flag);
/* Stop the thread and remove the file (before the workers stop). */
void hive__publish_stop(struct hive *h);

#endif
