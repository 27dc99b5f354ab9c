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

#endif
