/*
 * hugemap.h - anonymous mappings on 2 MiB boundaries, advised to be backed
 * by transparent huge pages: the store's record table and the block pool's
 * large chunks, so
 * that a random lookup among millions of objects costs no page-table walk
 * per miss (a 4 KiB-page TLB covers a few MiB; 2 MiB pages cover GBs).
 *
 * The advice is only advice: where THP is off ("never") the kernel maps
 * 4 KiB pages as before, silently. Memory is touched (and counted as
 * resident) only when first written, as for any anonymous mapping, but a
 * huge page is 2 MiB at its first touch: use it for regions that fill.
 */
#ifndef HIVE_UTIL_HUGEMAP_H
#define HIVE_UTIL_HUGEMAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include "util/common.h"
#ifdef HIVE_ASAN
#include <sanitizer/lsan_interface.h>
#endif

#define HIVE__HUGE_PAGE ((size_t)2 << 20)

/* bytes (rounded up to whole 2 MiB pages) of zeroed memory starting on a
 * 2 MiB boundary, or MAP_FAILED. Unmap with munmap(p, the same bytes
 * rounded up). Maps 2 MiB more than asked, then gives back the ends. */
static inline void *hive__map_huge(size_t bytes)
{
    size_t want, span;
    if (__builtin_add_overflow(bytes, HIVE__HUGE_PAGE - 1, &want))
        return MAP_FAILED;
    want &= ~(HIVE__HUGE_PAGE - 1);
    if (__builtin_add_overflow(want, HIVE__HUGE_PAGE, &span))
        return MAP_FAILED;
    char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return MAP_FAILED;
    char *a = (char *)(((uintptr_t)m + HIVE__HUGE_PAGE - 1) & ~(uintptr_t)(HIVE__HUGE_PAGE - 1));
    size_t head = (size_t)(a - m), tail = span - head - want;
    if (head != 0)
        munmap(m, head);
    if (tail != 0)
        munmap(a + want, tail);
    madvise(a, want, MADV_HUGEPAGE);   /* advice: ignored where THP is off */
    return a;
}

/* LeakSanitizer scans the heap, stacks and globals for pointers, not
 * mappings of our own: a record in such a mapping holding the only pointer
 * to a malloc'd block (an actor's out-of-line part; a class copy waiting
 * for its grace period behind a record's RCU head in liburcu's callback
 * queue) would make that block look leaked while the record lives - when
 * libFuzzer checks for leaks after each input. Our mappings that hold
 * pointers (the pool's chunks, the object table's) are roots while mapped:
 * hive__lsan_root after mapping, hive__lsan_unroot before unmapping. */
static inline void hive__lsan_root(void *p, size_t bytes)
{
#ifdef HIVE_ASAN
    __lsan_register_root_region(p, bytes);
#else
    (void)p;
    (void)bytes;
#endif
}

static inline void hive__lsan_unroot(void *p, size_t bytes)
{
#ifdef HIVE_ASAN
    __lsan_unregister_root_region(p, bytes);
#else
    (void)p;
    (void)bytes;
#endif
}

#endif
