/*
 * deepspeed.h - a DeepSpeed JSON (compute.strategy_config.config) read with the
 * same loader as the YAML, and merged into the dtrun config.
 *
 * How each key meets the dtrun config is in its table entry (deepspeed.c):
 *   MATCH, BATCH  batch sizes, accumulation, clipping: "auto" or a missing key takes the
 *          dtrun value; an explicit value fills a dtrun default; an explicit value
 *          that differs from an explicit dtrun value is a mismatch, and all
 *          mismatches are reported together (Hugging Face's fill_match).
 *   WIN    optimizer, scheduler, fp16/bf16 and the loss scaler: the JSON wins,
 *          with a notice where it overrides an explicit dtrun value.
 *   IGNORED  documented keys dtrun does not implement yet: warned about by name.
 * Then the batch identity train_batch_size = micro x accumulation x world is
 * completed with DeepSpeed's fill rules and checked, refusing non-divisible
 * inputs instead of truncating (REFERENCE.md B2, problems 31-32).
 */
#ifndef DT_DEEPSPEED_H
#define DT_DEEPSPEED_H

#include <stdbool.h>
#include <stdint.h>
#include "config/types.h"

enum dt_ds_offload { DT_OFFLOAD_NONE, DT_OFFLOAD_CPU };

struct dt_ds_config {
    bool present;
    int64_t train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps;
    double gradient_clipping;
    int64_t steps_per_print;
    bool wall_clock_breakdown;
    int communication_data_type;
    struct {
        int type;
        struct {
            double lr, eps, weight_decay, momentum;
            struct dt_floats betas;
            bool nesterov, adam_w_mode;
        } params;
    } optimizer;
    struct {
        int type;
        struct {
            double warmup_min_lr, warmup_max_lr, warmup_min_ratio, cos_min_ratio;
            int64_t warmup_num_steps, total_num_steps;
            int warmup_type;
        } params;
    } scheduler;
    struct {
        bool enabled;
        double loss_scale, min_loss_scale;
        int64_t initial_scale_power, loss_scale_window, hysteresis;
        bool consecutive_hysteresis;
    } fp16;
    struct {
        bool enabled;
    } bf16;
    struct {
        int64_t stage;
        bool overlap_comm, contiguous_gradients, reduce_scatter, allgather_partitions, round_robin_gradients;
        int64_t reduce_bucket_size, allgather_bucket_size, sub_group_size;
        int64_t stage3_prefetch_bucket_size, stage3_param_persistence_threshold;
        int64_t stage3_max_live_parameters, stage3_max_reuse_distance;
        bool stage3_gather_16bit_weights_on_model_save;
        struct {
            int device;
            bool pin_memory;
        } offload_optimizer, offload_param;
    } zero;
    struct dt_origin *origin; /* one per dt_ds_schema entry */
};

extern const struct dt_schema dt_ds_schema;

struct dt_config;
/* Read the JSON named by compute.strategy_config.config and merge it (resolve.c calls this). */
dt_status_t dt_ds_load_merge(struct dt_config *cfg);
void dt_ds_free(struct dt_ds_config *ds);
/* One line per DeepSpeed value that runs, for `dtrun check`. */
void dt_ds_describe(const struct dt_config *cfg, char *buf, size_t n);

#endif
