/*
 * hello.c - start an engine, show where its workers run, and show that an
 * idle engine sleeps. Also lays the same engine out on a synthetic two-node
 * machine, the way tests check NUMA placement on a one-node laptop.
 *
 *   make demo            (or: build/examples/hello)
 */
#include <hive.h>

#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

static void show(hive_t *h, const char *title)
{
    printf("%s: %u workers on %u NUMA node(s)\n", title, hive_num_workers(h), hive_num_nodes(h));
    for (unsigned i = 0; i < hive_num_workers(h); i++) {
        hive_worker_info_t wi;
        if (hive_worker_info(h, i, &wi) == HIVE_OK)
            printf("  worker %2u: node %u, core %2u, pu %2d%s\n", i, wi.node, wi.core, wi.pu,
                   wi.bound ? ", pinned" : "");
    }
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

int main(void)
{
    hive_t *h;
    int rc = hive_init(NULL, &h);
    if (rc != HIVE_OK) {
        fprintf(stderr, "hive_init: %s: %s\n", hive_strerror(rc), hive_last_error());
        return 1;
    }
    show(h, "this machine");
    struct timespec half = { 0, 500000000 };
    nanosleep(&half, NULL);                      /* workers spin briefly, then park */
    double before = cpu_seconds();
    nanosleep(&half, NULL);
    printf("idle for 0.5 s: the engine used %.1f ms of CPU\n", (cpu_seconds() - before) * 1e3);
    hive_shutdown(h);

    hive_config_t cfg = { .topology = "pack:2 numa:1 core:4 pu:2" };
    if ((rc = hive_init(&cfg, &h)) != HIVE_OK) {
        fprintf(stderr, "hive_init: %s: %s\n", hive_strerror(rc), hive_last_error());
        return 1;
    }
    show(h, "synthetic \"pack:2 numa:1 core:4 pu:2\"");
    hive_shutdown(h);

    cfg = (hive_config_t){ .topology = "pack:x" };
    rc = hive_init(&cfg, &h);
    printf("a bad topology: %s (%d): %s\n", hive_strerror(rc), rc, hive_last_error());
    return 0;
}
