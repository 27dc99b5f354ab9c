/*
 * scale_mem.c - what one live object, queued task or idle actor costs in
 * memory, measured in a fresh process so that nothing an earlier benchmark
 * touched is reused: `scale-mem objects|tasks|actors N` makes N of them in
 * a new engine and prints the growth of the process's resident memory
 * (RSS, /proc/self/statm) divided by N. bench/bench_scale.c runs it.
 */
#include <hive.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static _Atomic int gate_open;

static int hold(hive_ctx_t *ctx)
{
    (void)ctx;
    /* acquire: just the flag */
    while (!atomic_load_explicit(&gate_open, memory_order_acquire))
        __builtin_ia32_pause();
    return 0;
}

static int noop(hive_ctx_t *ctx)
{
    (void)ctx;
    return 0;
}

static int ping(void *self, hive_ctx_t *ctx)
{
    return hive_return(ctx, self, 1);
}

static const hive_method_t methods[] = { { .name = "ping", .fn = ping } };
static const hive_actor_class_t cls64 = { .name = "idle64", .size = 64, .methods = methods,
                                          .nmethods = 1 };

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    size_t n = strtoull(argv[2], NULL, 10);
    hive_config_t cfg = { .workers = 2, .store_bytes = n * 128 + ((size_t)256 << 20) };
    hive_t *h;
    if (n == 0 || hive_init(&cfg, &h) != HIVE_OK)
        return 1;
    hive_ref_t *refs = malloc(n * sizeof *refs);
    hive_actor_t *actors = malloc(n * sizeof *actors);
    if (refs == NULL || actors == NULL)
        return 1;
    /* the caller's own arrays of ids are resident before the count starts:
     * what is measured is the engine's memory, not the 8 bytes a caller
     * keeps per id (they were counted before, 8 bytes too many per item) */
    memset(refs, 0xff, n * sizeof *refs);   /* not 0: malloc + zeroing would become calloc */
    memset(actors, 0xff, n * sizeof *actors);
    hive_ref_t held[2];
    if (strcmp(argv[1], "tasks") == 0)
        for (int w = 0; w < 2; w++)
            hive_submit(h, hold, NULL, 0, NULL, &held[w]);
    /* The first actor of a process also sets up what every later one
     * shares: the block pool's and the arena's lists of free batches
     * (rings of 4096 slots per size class, ~0.7 MiB in all, written once).
     * Made before the count starts, so that what is measured is what one
     * more actor costs; that one-time cost is printed on stderr. */
    if (strcmp(argv[1], "actors") == 0) {
        size_t bare = rss_bytes();
        hive_actor_t first;
        if (hive_actor_new(h, &cls64, NULL, 0, NULL, &first) != HIVE_OK)
            return 1;
        fprintf(stderr, "scale-mem: the first actor cost %zu KiB\n", (rss_bytes() - bare) >> 10);
    }
    usleep(20000);
    size_t before = rss_bytes();
    for (size_t i = 0; i < n; i++) {
        int rc;
        uint64_t v = i;
        if (strcmp(argv[1], "objects") == 0)
            rc = hive_put(h, &v, sizeof v, &refs[i]);
        else if (strcmp(argv[1], "tasks") == 0)
            rc = hive_submit(h, noop, NULL, 0, NULL, &refs[i]);
        else
            rc = hive_actor_new(h, &cls64, NULL, 0, NULL, &actors[i]);
        if (rc != HIVE_OK) {
            fprintf(stderr, "scale-mem: %s\n", hive_last_error());
            return 1;
        }
    }
    printf("%.1f\n", (double)(rss_bytes() - before) / (double)n);
    atomic_store(&gate_open, 1);
    hive_shutdown(h);
    return 0;
}
