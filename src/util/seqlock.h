/*
 * seqlock.h - the two pieces every seqlock reader in hive shares (shared
 * arrays in array.c, replay rows in rl/replay.c).
 *
 * hive__racy_copy: the copy that may race with a writer, by design: its
 * result is thrown away when the sequence moved. ThreadSanitizer is told
 * not to instrument it, and it avoids memcpy there, which TSan intercepts
 * and would check anyway. Writers' stores stay checked against each other.
 *
 * hive__seq_reread: the reader's second look at the sequence word, after an
 * acquire fence: the copy's loads are ordered before the re-read, so a
 * write that overlapped the copy shows as a changed word. Not inlined under
 * ThreadSanitizer, where GCC refuses (-Wtsan) a fence inlined into another
 * function; TSan does not model fences, and the copy they order is not
 * instrumented, so nothing is lost.
 */
#ifndef HIVE_UTIL_SEQLOCK_H
#define HIVE_UTIL_SEQLOCK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SANITIZE_THREAD__)
__attribute__((no_sanitize_thread, noinline, unused))
static void hive__racy_copy(void *dst, const void *src, size_t n)
{
    volatile const unsigned char *s = src;
    unsigned char *d = dst;
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
}

__attribute__((noinline, unused))
static uint64_t hive__seq_reread(_Atomic uint64_t *seq)
{
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(seq, memory_order_relaxed);
}
#else
static inline void hive__racy_copy(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
}

static inline uint64_t hive__seq_reread(_Atomic uint64_t *seq)
{
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(seq, memory_order_relaxed);
}
#endif

#endif
