/*
 * error.c - status strings, the per-thread last-error sentence, and
 * hive__die for internal faults.
 */
#include "util/error.h"
#include "util/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* One sentence per thread; 256 bytes fit every message hive writes with room
 * for the numbers. Thread-local, so no thread ever sees another's error. */
static __thread char last_error[256];
static __thread int last_code;

const char *hive_strerror(int status)
{
    switch (status) {
    case HIVE_OK:        return "success";
    case HIVE_EINVAL:    return "invalid argument";
    case HIVE_ENOMEM:    return "out of memory";
    case HIVE_EFULL:     return "object store full";
    case HIVE_ENOENT:    return "no such object, actor or key";
    case HIVE_ETIMEDOUT: return "timed out";
    case HIVE_ECANCELED: return "cancelled";
    case HIVE_ETASK:     return "task failed";
    case HIVE_EDEAD:     return "actor is dead";
    case HIVE_ESHUTDOWN: return "engine is shutting down";
    case HIVE_ESTATE:    return "wrong object state or kind";
    case HIVE_ETOPO:     return "topology discovery or thread binding failed";
    default:             return "unknown error";
    }
}

const char *hive_last_error(void)
{
    return last_error;
}

int hive__fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    last_code = code;
    return code;
}

int hive__fail_code(void)
{
    return last_code;
}

void hive__die(const char *file, int line, const char *func, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "hive: fatal internal error at %s:%d (%s): ", file, line, func);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}
