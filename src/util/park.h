/*
 * park.h - futex wait/wake on a 32-bit word, the only way hive sleeps.
 *
 * hive__futex_wait(word, expected, timeout_ns) sleeps while *word == expected
 * (checked atomically by the kernel), at most timeout_ns (< 0: forever), and
 * may return spuriously: callers always re-check their condition in a loop.
 * The words are process-private (FUTEX_PRIVATE_FLAG).
 */
#ifndef HIVE_UTIL_PARK_H
#define HIVE_UTIL_PARK_H

#include <stdatomic.h>
#include <stdint.h>

void hive__futex_wait(_Atomic uint32_t *word, uint32_t expected, int64_t timeout_ns);
void hive__futex_wake(_Atomic uint32_t *word, int count);

#endif
