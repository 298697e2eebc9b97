/*
 * loader.h - where a run's sequences come from: token shards (data.train /
 * data.val; a glob may mix 16- and 32-bit shards, each read in its own width
 * and handed out as int32) or the synthetic source, and the sampler that maps
 * a global sample index to a sequence.
 *
 * Sample n of optimizer step s, micro-step m, rank r, row b is
 *   n = ((s * accumulation + m) * world + r) * micro_batch + b,
 * so every rank reads disjoint sequences, and one rank with accumulation k sees
 * the same samples per step as k ranks without it. The position a checkpoint
 * saves is just the number of samples consumed. Shard windows (seq_len + 1
 * tokens at stride seq_len, within a shard) are shuffled per epoch with a
 * permutation seeded by (run.seed, epoch); validation reads windows in order.
 */
#ifndef DT_LOADER_H
#define DT_LOADER_H

#include <stdint.h>
#include "config/config.h"
#include "data/markov.h"
#include "data/shard.h"
#include "data/teacher.h"

struct dt_dataset {
    bool synthetic;
    bool features; /* the teacher source (model.type mlp) */
    struct dt_markov markov;
    struct dt_teacher teacher;
    uint64_t stream; /* synthetic: 0 train, 1 validation */
    struct dt_shard *shards;
    int nshards;
    size_t *first_window; /* (nshards + 1) prefix sums of windows */
    size_t nwindows;
    int T;
    bool shuffle;
    uint64_t seed;
    size_t *perm; /* this epoch's permutation of windows */
    int64_t perm_epoch;
};

/* which: "data.train" or "data.val" (the glob comes from cfg). */
dt_status_t dt_dataset_open(struct dt_dataset *d, const struct dt_config *cfg, bool validation);
void dt_dataset_close(struct dt_dataset *d);
/* B sequences of T+1 tokens for samples first .. first+B-1 into out (B, T+1). */
void dt_dataset_batch(struct dt_dataset *d, int64_t first, int B, int32_t *out);
/* The teacher source: rows first .. first+B-1 as x (B, in) and labels (B) or y (B, out). */
void dt_dataset_features(struct dt_dataset *d, int64_t first, int B, float *x, int32_t *labels, float *y);
/* Windows per epoch (0 for the endless synthetic source). */
size_t dt_dataset_windows(const struct dt_dataset *d);

#endif
