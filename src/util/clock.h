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

/* Sleep about ns nanoseconds (slow paths only: a system call). */
static inline void hive__sleep_ns(uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u) };
    nanosleep(&ts, NULL);
}

#endif
