/*
 * replay_buffer.c - the seeds' ReplayBuffer (capacity, push, sample), in hive.
 *
 * In Python the seeds wrote a ReplayBuffer actor: a list with a capacity,
 * push(transition) and sample(batch_size). In hive the buffer needs no actor
 * around it: any number of threads, tasks or actors push into it at once
 * without a lock, and samplers copy out batches that are never torn. Here
 * four tasks push transitions concurrently, then we sample, uniform and
 * prioritized.
 *
 *   build/examples/replay_buffer
 */
#include <hive.h>

#include <stdint.h>
#include <stdio.h>

typedef struct transition {
    float    state[4];
    int32_t  action;
    float    reward;
    float    next_state[4];
    int32_t  done;
    uint32_t producer, step;               /* who pushed it, and when */
} transition_t;

/* A task: push 100 transitions, as an environment would after each step;
 * its result is how many it pushed. */
static int producer(hive_ctx_t *ctx)
{
    hive_replay_t *rb = *(hive_replay_t *const *)hive_arg(ctx, 0, NULL);
    uint32_t id = *(const uint32_t *)hive_arg(ctx, 1, NULL);
    uint64_t pushed = 0;
    for (uint32_t step = 0; step < 100; step++) {
        transition_t t = { .action = (int32_t)(step & 1), .reward = 1.0f, .producer = id, .step = step };
        t.state[0] = (float)step;
        t.next_state[0] = (float)step + 1;
        if (hive_replay_push(rb, &t) != HIVE_OK)
            return 1;
        pushed++;
    }
    return hive_return(ctx, &pushed, sizeof pushed);
}

int main(void)
{
    hive_config_t cfg = { .store_bytes = 64u << 20 };
    hive_t *h;
    if (hive_init(&cfg, &h) != HIVE_OK) {
        fprintf(stderr, "hive_init: %s\n", hive_last_error());
        return 1;
    }
    /* ReplayBuffer(capacity=256): the oldest items are overwritten past it */
    hive_replay_config_t rc = { .capacity = 256, .item_size = sizeof(transition_t),
                                .prioritized = 1, .alpha = 1.0, .beta = 0.4, .seed = 7 };
    hive_replay_t *rb;
    if (hive_replay_new(h, &rc, &rb) != HIVE_OK) {
        fprintf(stderr, "hive_replay_new: %s\n", hive_last_error());
        return 1;
    }

    /* push: four producers at once, 400 transitions into 256 slots */
    hive_ref_t done[4];
    for (uint32_t id = 0; id < 4; id++) {
        hive_arg_t args[2] = { HIVE_VAL(rb), HIVE_VAL(id) };
        if (hive_submit(h, producer, args, 2, NULL, &done[id]) != HIVE_OK)
            return 1;
    }
    uint64_t pushed = 0;
    for (int i = 0; i < 4; i++) {
        const void *n;
        if (hive_get(h, done[i], HIVE_FOREVER, &n, NULL) != HIVE_OK) {
            fprintf(stderr, "producer %d: %s\n", i, hive_last_error());
            return 1;
        }
        pushed += *(const uint64_t *)n;
        hive_release(h, done[i]);
    }
    /* (stats.inserts counts keys claimed: with producers pushing at once it
     * may count a few keys a producer holds for its next pushes, see
     * "Runs of keys" in hive/replay.h) */
    hive_replay_stats_t st;
    hive_replay_stats(rb, &st);
    printf("pushed %llu transitions from 4 producers; the buffer holds %llu (capacity %llu)\n",
           (unsigned long long)pushed, (unsigned long long)st.size, (unsigned long long)st.capacity);

    /* sample(batch_size=4): copies, never torn, with keys to update priorities by */
    transition_t batch[4];
    uint64_t keys[4];
    double weights[4];
    if (hive_replay_sample(rb, 4, NULL, batch, keys, weights, 0) != HIVE_OK) {
        fprintf(stderr, "sample: %s\n", hive_last_error());
        return 1;
    }
    printf("a batch of 4 (all priorities equal, so uniform):\n");
    for (int i = 0; i < 4; i++)
        printf("  key %3llu: producer %u step %2u action %d reward %.0f  weight %.2f\n",
               (unsigned long long)keys[i], batch[i].producer, batch[i].step, batch[i].action,
               batch[i].reward, weights[i]);

    /* prioritized: make the first sampled item 100x as likely, sample again */
    double prio[1] = { 100.0 };
    hive_replay_update_priorities(rb, keys, prio, 1);
    int hits = 0;
    for (int round = 0; round < 100; round++) {
        uint64_t k[4];
        hive_replay_sample(rb, 4, NULL, NULL, k, NULL, 0);
        for (int i = 0; i < 4; i++)
            hits += k[i] == keys[0];
    }
    printf("after raising key %llu's priority to 100 (others 1): drawn %d times in 400 samples "
           "(expected about %.0f)\n", (unsigned long long)keys[0], hits, 400 * 100.0 / (100.0 + 255));

    hive_replay_free(rb);
    hive_shutdown(h);
    return 0;
}
