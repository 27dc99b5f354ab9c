/*
 * hugemap.h - anonymous mappings on 2 MiB boundaries for the store's record
 * table and the block pool's large chunks, backed by transparent huge pages
 * where they are full, so that a random lookup among millions of objects
 * costs no page-table walk per miss (a 4 KiB-page TLB covers a few MiB;
 * 2 MiB pages cover GBs).
 *
 * A huge page is 2 MiB from its first touch, so a table that stops growing
 * would pay up to 2 MiB for the part of its last page it never uses (2 bytes
 * per record at a million). So the frontier grows in ordinary pages - a
 * mapping starts advised MADV_NOHUGEPAGE, and memory costs what is touched,
 * to the 4 KiB page - and each 2 MiB region, once every byte of it has been
 * handed out, is settled: advised MADV_HUGEPAGE and collapsed into a huge
 * page (MADV_COLLAPSE, Linux 6.1). Collapsing copies the region (2-5 ms; a
 * thread touching that region meanwhile waits in a page fault) and changes
 * nothing a program can see; where it is refused (an older kernel, no free
 * huge page), the region stays in small pages, or khugepaged collapses it
 * later: only slower lookups, never wrong ones.
 *
 * Who collapses: a full region is queued with call_rcu from the path that
 * filled it (no system call there), and hive's call_rcu thread hands it to
 * the settler, one thread per process started with the call_rcu thread,
 * which collapses the regions one by one. Not the call_rcu thread itself:
 * while it copies, no deferred free runs, a store growing under puts and
 * releases finds no slot freed and grows further - each 5 ms collapse at
 * 25 M puts/s queued eight more regions, and a 20 M-put loop ended with
 * 512 MiB of records where 50 MiB do and 3x the CPU per put.
 */
#ifndef HIVE_UTIL_HUGEMAP_H
#define HIVE_UTIL_HUGEMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include "util/common.h"
#include "util/rcu.h"
#ifdef HIVE_ASAN
#include <sanitizer/lsan_interface.h>
#endif

#define HIVE__HUGE_PAGE ((size_t)2 << 20)

/* bytes (rounded up to whole 2 MiB pages) of zeroed memory starting on a
 * 2 MiB boundary, or MAP_FAILED. Unmap with munmap(p, the same bytes
 * rounded up). Maps 2 MiB more than asked, then gives back the ends.
 * huge: advised MADV_HUGEPAGE (memory that is filled at once), else
 * MADV_NOHUGEPAGE (a frontier that fills as it grows: settle each region
 * when full, hive__settle_later). */
static inline void *hive__map_huge2(size_t bytes, bool huge)
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
    /* advice: ignored where THP is off; NOHUGEPAGE holds where it is
     * "always" too */
    madvise(a, want, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    return a;
}

static inline void *hive__map_huge(size_t bytes)
{
    return hive__map_huge2(bytes, true);
}

static inline void *hive__map_frontier(size_t bytes)
{
    return hive__map_huge2(bytes, false);
}

/* A 2 MiB region of a frontier mapping waiting to become a huge page: the
 * owner keeps one per region (no allocation on the path that fills it). */
typedef struct hive__settle {
    struct rcu_head      rcu;
    void                *region;
    struct hive__settle *next;     /* the settler's queue */
} hive__settle_t;

/* Region (2 MiB aligned, every byte handed out) is settled by the settler
 * after a grace period: no system call or allocation here (the call_rcu
 * thread polls). n must stay valid until then: owners that unmap call
 * hive__rcu_barrier() and then hive__settle_drain() first, under
 * hive__settle_pause. */
void hive__settle_later(hive__settle_t *n, void *region);

/* Start the settler (once per process; the call_rcu thread's start calls
 * it). If it cannot start, regions are settled on the call_rcu thread. */
void hive__settler_start(void);

/* After an rcu_barrier (every settle the caller queued is with the
 * settler): wait until the settler holds no settle record and runs no
 * collapse - under a pause it skips what is queued, so this waits out one
 * collapse at most. Then the records may be freed and the regions unmapped. */
void hive__settle_drain(void);

/* While any pause is on (a store closing, which waits for every callback
 * before unmapping), settles are skipped - the regions stay in small pages -
 * so a shutdown never waits for collapses - of any engine in the process,
 * whose regions then stay in small pages. Pauses nest (a count). */
void hive__settle_pause(bool on);

/* Settles done so far (MADV_COLLAPSE returned 0) and refused (it failed:
 * the errno of the last refusal in *last_errno, if not NULL). For tests. */
unsigned long hive__settle_count(unsigned long *refused, int *last_errno);

/* The thread id (gettid) that ran the last settle, 0 before the first. For
 * tests: the settler's, not the call_rcu thread's. */
int hive__settle_last_tid(void);

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
