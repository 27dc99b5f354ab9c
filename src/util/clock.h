/* clock.h - monotonic nanoseconds (vDSO: no system call on Linux). */
#ifndef HIVE_UTIL_CLOCK_H
#define HIVE_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t hive__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
