/*
 * park.c - futex wrappers. Kept out of line: they are the slow path by
 * definition (a system call), and keeping them here keeps <linux/futex.h>
 * out of every other file.
 */
#include "util/park.h"
#include "util/common.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

void hive__futex_wait(_Atomic uint32_t *word, uint32_t expected, int64_t timeout_ns)
{
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns % 1000000000;
        tsp = &ts;
    }
    /* EAGAIN (value changed), EINTR and ETIMEDOUT all mean "go re-check". */
    long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, tsp, NULL, 0);
    if (rc < 0 && errno != EAGAIN && errno != EINTR && errno != ETIMEDOUT)
        HIVE_DIE("futex wait failed: errno %d", errno);
}

void hive__futex_wake(_Atomic uint32_t *word, int count)
{
    long rc = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
    if (rc < 0)
        HIVE_DIE("futex wake failed: errno %d", errno);
}
