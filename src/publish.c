/*
 * publish.c - owns the statistics file hive-top reads: with HIVE_STATS=1
 * (or hive_config_t.publish_stats) a thread writes the engine's figures as
 * JSON to $HIVE_STATS_DIR (default /dev/shm, shared memory) as
 * hive-<pid>-<n>.json every 100 ms, readable by the same user only
 * (mode 0600), by writing a temporary file and renaming it over the old
 * one (readers never see half a file). The file is removed at shutdown.
 * Nothing here touches a worker's hot path: the thread reads the same
 * counters hive_stats reads.
 */
#include "publish.h"
#include "hive_impl.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PERIOD_NS 100000000u

static _Atomic unsigned serial;      /* engines of this process that published */

/* The length of the UTF-8 sequence at c (a lead byte >= 0x80), 0 if it
 * is not a valid one (overlong, surrogate, past U+10FFFF or cut short). */
static size_t utf8_length(const unsigned char *c)
{
    size_t len = c[0] >= 0xf0 && c[0] <= 0xf4 ? 4 : c[0] >= 0xe0 ? 3 : c[0] >= 0xc2 ? 2 : 0;
    if (len == 0 || (c[0] >= 0xf0 && len != 4))
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((c[i] & 0xc0) != 0x80)
            return 0;
    if ((c[0] == 0xe0 && c[1] < 0xa0) || (c[0] == 0xed && c[1] >= 0xa0) ||
        (c[0] == 0xf0 && c[1] < 0x90) || (c[0] == 0xf4 && c[1] >= 0x90))
        return 0;
    return len;
}

static void write_worker(FILE *f, hive_t *h, unsigned i)
{
    hive_worker_stats_t w;
    hive_worker_info_t info;
    if (hive_worker_stats(h, i, &w, sizeof w) != HIVE_OK || hive_worker_info(h, i, &info) != HIVE_OK)
        return;
    fprintf(f, "%s\n  {\"index\":%u,\"node\":%u,\"core\":%u,\"pu\":%u,\"tasks\":%" PRIu64
            ",\"methods\":%" PRIu64 ",\"jobs\":%" PRIu64 ",\"steals\":%" PRIu64 ",\"stolen\":%" PRIu64
            ",\"parks\":%" PRIu64 ",\"wakes\":%" PRIu64 ",\"busy_ns\":%" PRIu64 ",\"idle_ns\":%" PRIu64
            ",\"help_depth_max\":%" PRIu64 "}", i ? "," : "", i, info.node, info.core, info.pu,
            w.tasks, w.methods, w.jobs, w.steals_same_node + w.steals_other_node,
            w.stolen_same_node + w.stolen_other_node, w.parks, w.wakes, w.busy_ns, w.idle_ns,
            w.help_depth_max);
}

/* s as a JSON string, quotes included: '"', '\\' and control bytes
 * escaped, bytes that are not valid UTF-8 written as U+FFFD (so the file
 * is always valid JSON, whatever a name holds). */
static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\' || *c < 0x20 || *c == 0x7f) {
            fprintf(f, "\\u%04x", *c);
            continue;
        }
        if (*c < 0x80) {
            fputc(*c, f);
            continue;
        }
        size_t len = utf8_length(c);
        if (len == 0) {
            fputs("\\ufffd", f);
            continue;
        }
        fwrite(c, 1, len, f);
        c += len - 1;
    }
    fputc('"', f);
}

/* ,"trace_path":"<absolute path>" when the timeline is on (the dashboard
 * links it), JSON-escaped; nothing when it is off. */
static void write_trace_path(FILE *f, hive_t *h)
{
    char abs[PATH_MAX];
    if (!h->trace.on || h->trace.path == NULL || realpath(h->trace.path, abs) == NULL)
        return;
    fputs(",\"trace_path\":", f);
    put_string(f, abs);
}

#define TOP_ACTORS 8
#define MAX_LISTED 64                    /* buffers / pools listed in the file */

static void write_actors_top(FILE *f, hive_t *h)
{
    static const char *const states[] = { "alive", "restarting", "dead" };
    hive_actor_info_t top[TOP_ACTORS];
    int n = hive_actor_top(h, top, TOP_ACTORS, sizeof top[0]);
    fputs(",\"actors_top\":[", f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s\n  {\"id\":\"0x%" PRIx64 "\",\"class\":", i ? "," : "", top[i].id);
        put_string(f, top[i].class_name);
        fputs(",\"name\":", f);
        put_string(f, top[i].name);
        fprintf(f, ",\"mailbox\":%" PRIu64 ",\"state\":\"%s\"}", top[i].mailbox,
                states[top[i].state >= 0 && top[i].state <= 2 ? top[i].state : 0]);
    }
    fputs("]", f);
}

/* Classes with something in them, and the large area always (size 0). */
static void write_size_classes(FILE *f, hive_t *h)
{
    hive_size_class_t c[HIVE_STORE_CLASSES];
    int n = hive_store_classes(h, c, HIVE_STORE_CLASSES);
    bool first = true;
    fputs(",\"size_classes\":[", f);
    for (int i = 0; i < n; i++) {
        if (c[i].objects == 0 && c[i].size != 0)
            continue;
        fprintf(f, "%s{\"size\":%zu,\"bytes\":%zu,\"objects\":%" PRIu64 "}", first ? "" : ",",
                c[i].size, c[i].bytes, c[i].objects);
        first = false;
    }
    fputs("]", f);
}

static void write_replays(FILE *f, hive_t *h)
{
    hive_replay_info_t r[MAX_LISTED];
    int n = hive_replay_list(h, r, MAX_LISTED, sizeof r[0]);
    fputs(",\"replay\":[", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\n  {\"id\":%" PRIu64 ",\"capacity\":%" PRIu64 ",\"size\":%" PRIu64
                ",\"inserts\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"limiter_waits\":%" PRIu64 "}",
                i ? "," : "", r[i].id, r[i].capacity, r[i].size, r[i].inserts, r[i].samples,
                r[i].limiter_waits);
    fputs("]", f);
}

static void write_envpools(FILE *f, hive_t *h)
{
    hive_envpool_info_t e[MAX_LISTED];
    int n = hive_envpool_list(h, e, MAX_LISTED, sizeof e[0]);
    fputs(",\"envpools\":[", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\n  {\"id\":%" PRIu64 ",\"num_envs\":%" PRIu64 ",\"steps\":%" PRIu64 "}",
                i ? "," : "", e[i].id, e[i].num_envs, e[i].steps);
    fputs("]", f);
}

/* One snapshot: into tmp, then renamed over path. */
static int write_snapshot(hive_t *h)
{
    hive__publish_t *p = &h->publish;
    hive_stats_t s;
    int rc = hive_stats(h, &s, sizeof s);
    if (rc != HIVE_OK)
        return rc;
    int fd = open(p->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return hive__fail(HIVE_EINVAL, "hive_init: cannot write the statistics file \"%s\": %s",
                          p->tmp, strerror(e));
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    fprintf(f, "{\"pid\":%d,\"program\":", (int)getpid());
    put_string(f, program_invocation_short_name);
    fprintf(f, ",\"time\":%lld.%03ld,\"workers_n\":%u,\"nodes\":%u,"
            "\"queued\":[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "],"
            "\"actors\":{\"created\":%" PRIu64 ",\"alive\":%" PRIu64 ",\"dead\":%" PRIu64
            ",\"restarts\":%" PRIu64 ",\"restarting\":%" PRIu64 "},"
            "\"store\":{\"capacity\":%zu,\"used\":%zu,\"objects\":%" PRIu64 ",\"resident\":%zu"
            ",\"used_high\":%zu,\"efull\":%" PRIu64 "},"
            "\"trace\":{\"events\":%" PRIu64 ",\"dropped\":%" PRIu64 "},\"workers\":[",
            (long long)now.tv_sec,
            now.tv_nsec / 1000000, s.workers, s.nodes, s.queued[0], s.queued[1], s.queued[2],
            s.actors_created, s.actors_alive, s.actors_dead, s.actors_restarts,
            s.actors_restarting, s.store.capacity, s.store.used,
            s.store.objects, s.store.resident, s.store.used_high, s.store.efull,
            s.trace_events, s.trace_dropped);
    for (unsigned i = 0; i < s.workers; i++)
        write_worker(f, h, i);
    fputs("\n]", f);
    write_trace_path(f, h);
    write_actors_top(f, h);
    write_size_classes(f, h);
    write_replays(f, h);
    write_envpools(f, h);
    fputs("}\n", f);
    bool bad = ferror(f) != 0;
    if (fclose(f) != 0 || bad || rename(p->tmp, p->path) != 0) {
        unlink(p->tmp);
        return hive__fail(HIVE_EINVAL, "hive_init: cannot write the statistics file \"%s\"",
                          p->path);
    }
    return HIVE_OK;
}

static void *publish_main(void *arg)
{
    hive_t *h = arg;
    hive__publish_t *p = &h->publish;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + PERIOD_NS;
        until.tv_sec += (time_t)(ns / 1000000000u);
        until.tv_nsec = (long)(ns % 1000000000u);
        while (!p->stop && pthread_cond_timedwait(&p->cond, &p->lock, &until) != ETIMEDOUT)
            ;
        if (p->stop)
            break;
        pthread_mutex_unlock(&p->lock);
        write_snapshot(h);            /* a failed write: the next one tries again */
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static bool env_asks(void)
{
    const char *s = getenv("HIVE_STATS");
    return s != NULL && strcmp(s, "1") == 0;
}

int hive__publish_start(struct hive *h, bool flag)
{
    hive__publish_t *p = &h->publish;
    memset(p, 0, sizeof *p);
    if (!flag && !env_asks())
        return HIVE_OK;
    const char *dir = getenv("HIVE_STATS_DIR");
    if (dir == NULL || *dir == '\0')
        dir = "/dev/shm";
    unsigned n = atomic_fetch_add_explicit(&serial, 1, memory_order_relaxed);   /* a name only */
    int len = snprintf(p->path, sizeof p->path, "%s/hive-%d-%u.json", dir, (int)getpid(), n);
    if (len < 0 || (size_t)len >= sizeof p->path)
        return hive__fail(HIVE_EINVAL, "hive_init: the statistics directory name is too long "
                          "(%d bytes, at most %zu)", len, sizeof p->path - 32);
    snprintf(p->tmp, sizeof p->tmp, "%s.tmp", p->path);
    int rc = write_snapshot(h);
    if (rc != HIVE_OK)
        return rc;
    pthread_mutex_init(&p->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    int e = pthread_create(&p->thread, NULL, publish_main, h);
    if (e != 0) {
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        unlink(p->path);
        return hive__fail(HIVE_ENOMEM, "hive_init: cannot start the statistics thread: %s",
                          strerror(e));
    }
    p->on = true;
    return HIVE_OK;
}

void hive__publish_stop(struct hive *h)
{
    hive__publish_t *p = &h->publish;
    if (!p->on)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    unlink(p->path);
    unlink(p->tmp);
    p->on = false;
}
