/*
 * error.h - the per-thread "last error" sentence behind hive_last_error().
 *
 * Every public function that fails calls hive__fail(code, fmt, ...), which
 * formats the sentence into a thread-local buffer and returns the code, so a
 * failure path reads as one line:  return hive__fail(HIVE_EINVAL, "...", n);
 */
#ifndef HIVE_UTIL_ERROR_H
#define HIVE_UTIL_ERROR_H

#include "hive.h"

__attribute__((format(printf, 2, 3)))
int hive__fail(int code, const char *fmt, ...);

/* The code of the calling thread's last hive__fail (HIVE_OK if none yet):
 * for a caller that got only NULL from a function that failed (a lookup
 * that may fail for lack of memory, not only for a missing object). */
int hive__fail_code(void);

#endif
