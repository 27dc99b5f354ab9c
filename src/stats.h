/*
 * stats.h - engine statistics read from the workers' own counters (stats.c).
 */
#ifndef HIVE_STATS_H
#define HIVE_STATS_H

#include <stdint.h>

#include "sched.h"

/* Jobs queued now at priority lane `lane`: node rings plus worker deques
 * (a moment's view: the counts move while they are read). */
uint64_t hive__queued(hive__sched_t *s, unsigned lane);

#endif
