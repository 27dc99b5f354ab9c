/*
 * common.h - small helpers every floor uses: branch hints, cache-line size,
 * the CPU relax hint, and hive__die for internal faults that cannot be
 * recovered (in the spirit of liburcu's urcu_die: loud, with file and line).
 */
#ifndef HIVE_UTIL_COMMON_H
#define HIVE_UTIL_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* 64 bytes is the line size of every x86-64 and most arm64 parts; adjacent-line
 * prefetch makes false sharing reach 128 bytes on Intel, so hot fields that
 * different threads write are kept 128 bytes apart. */
#define HIVE_CACHELINE 64
#define HIVE_PAD       128
#define HIVE_ALIGNED   __attribute__((aligned(HIVE_PAD)))

/* HIVE_ASAN: built with AddressSanitizer. gcc defines __SANITIZE_ADDRESS__;
 * clang (the fuzz build) does not, and answers __has_feature instead. */
#if defined(__SANITIZE_ADDRESS__)
#define HIVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HIVE_ASAN 1
#endif
#endif

#define HIVE_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define HIVE_CONTAINER_OF(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

static inline void hive__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/* Fetch the line at p for writing (exclusive), without waiting for it: a
 * line another core wrote last, which this thread will write, comes over
 * once, not shared first and then upgraded. __builtin_prefetch(p, 1)
 * gives a read prefetch (prefetcht0) on the baseline x86-64 target, so
 * the instruction is named: PREFETCHW, which every x86-64 core of the last
 * decade has, and older Intel cores run as a no-op. */
static inline void hive__prefetchw(const void *p)
{
#if defined(__x86_64__)
    __asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1);
#endif
}

__attribute__((noreturn, format(printf, 4, 5)))
void hive__die(const char *file, int line, const char *func, const char *fmt, ...);

#define HIVE_DIE(...) hive__die(__FILE__, __LINE__, __func__, __VA_ARGS__)

#endif
