/*
 * config.h - the typed configuration of a run.
 *
 * Every field is described once in the schema table (schema.c): key path, type,
 * default, range, help. The loader (load.c) fills the struct from built-in
 * defaults, a YAML file and dotted overrides, recording where each value came
 * from; resolve.c fills "auto" values and checks what must agree; emit.c prints
 * the result as YAML that load.c reads back to the same values.
 */
#ifndef DT_CONFIG_H
#define DT_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include "config/deepspeed.h"
#include "config/types.h"
#include "core/status.h"

enum dt_model_type { DT_MODEL_GPT, DT_MODEL_MLP, DT_MODEL_LLAMA };
enum dt_rope_type { DT_ROPE_NONE, DT_ROPE_LLAMA3 };
enum dt_device { DT_DEVICE_AUTO, DT_DEVICE_CPU, DT_DEVICE_CUDA };
enum dt_precision { DT_PREC_32_TRUE, DT_PREC_16_MIXED, DT_PREC_BF16_MIXED, DT_PREC_BF16_TRUE, DT_PREC_FP8_MIXED };
/* compute.fp8 (Transformer Engine's DelayedScaling / Float8CurrentScaling recipes) */
enum dt_fp8_format { DT_FP8_HYBRID, DT_FP8_ALL_E4M3 };
enum dt_fp8_scaling { DT_FP8_DELAYED, DT_FP8_CURRENT };
enum dt_fp8_amax_algo { DT_FP8_AMAX_MAX, DT_FP8_AMAX_MOST_RECENT };
enum dt_strategy {
    DT_STRAT_AUTO,
    DT_STRAT_SINGLE,
    DT_STRAT_DDP,
    DT_STRAT_FSDP,
    DT_STRAT_ZERO1,
    DT_STRAT_ZERO2,
    DT_STRAT_ZERO3,
    DT_STRAT_DEEPSPEED
};
enum dt_optim_type { DT_OPTIM_ADAMW, DT_OPTIM_ADAM, DT_OPTIM_SGD };
enum dt_sched_type {
    DT_SCHED_CONSTANT,
    DT_SCHED_LINEAR,
    DT_SCHED_COSINE,
    DT_SCHED_STEP,
    DT_SCHED_MULTISTEP,
    DT_SCHED_COMPOSITE,
    DT_SCHED_WARMUP_LR,
    DT_SCHED_WARMUP_DECAY_LR,
    DT_SCHED_WARMUP_COSINE_LR
};
enum dt_warmup_type { DT_WARMUP_LOG, DT_WARMUP_LINEAR };
enum dt_synth_kind { DT_SYNTH_AUTO, DT_SYNTH_MARKOV, DT_SYNTH_TEACHER };
enum dt_mlp_task { DT_TASK_CLASSIFICATION, DT_TASK_REGRESSION };
enum dt_dtype_name { DT_DTYPE_FP32, DT_DTYPE_BF16, DT_DTYPE_FP16 };
/* FSDP's sharding strategies: FULL_SHARD is ZeRO-3, SHARD_GRAD_OP ZeRO-2, NO_SHARD DDP, HYBRID_SHARD
 * ZeRO-3 within each node and DDP across nodes */
enum dt_fsdp_sharding { DT_FSDP_FULL_SHARD, DT_FSDP_SHARD_GRAD_OP, DT_FSDP_NO_SHARD, DT_FSDP_HYBRID_SHARD };

/* compute.strategy_config: what the ddp, zero and fsdp strategies take (a DeepSpeed JSON's
 * zero_optimization block maps onto it; element counts as DeepSpeed counts them) */
struct dt_strategy_config {
    double bucket_cap_mb; /* gradients reduced at once (DeepSpeed reduce_bucket_size) */
    char *config;         /* deepspeed: the JSON */
    int sharding_strategy; /* fsdp: enum dt_fsdp_sharding */
    int64_t allgather_bucket_size, prefetch_bucket_size, param_persistence_threshold, max_live_parameters,
        max_reuse_distance, sub_group_size;
    bool overlap_comm;
    int offload_optimizer, offload_param; /* enum dt_ds_offload */
};

struct dt_config {
    struct {
        char *name;
        int64_t seed;
        struct dt_duration max_duration;
        struct dt_duration eval_interval;
        char *dir;
    } run;
    struct {
        int type; /* enum dt_model_type */
        int64_t n_layer, n_head, n_embd, vocab_size, seq_len;
        char *preset; /* a named shape that fills the model keys a file leaves unset (resolve.c) */
        int64_t n_kv_head, intermediate_size; /* llama */
        int64_t max_position_embeddings;       /* llama: the model's context, which seq_len may be below */
        double norm_eps, rope_theta;           /* llama */
        bool tie_embeddings;
        struct {
            int type; /* enum dt_rope_type */
            double factor, low_freq_factor, high_freq_factor;
            int64_t original_max_position_embeddings;
        } rope_scaling; /* llama: Llama 3.1's scaled rotary frequencies */
        bool activation_checkpointing;
        char *init_from;
        char *tokenizer;
        struct {
            struct dt_floats hidden; /* layer widths */
            int task;                /* enum dt_mlp_task */
            int64_t in_features, out_features;
        } mlp;
    } model;
    struct {
        char *train, *val;
        int64_t micro_batch_size;
        int64_t eval_batches;
        struct {
            int kind; /* enum dt_synth_kind */
            int64_t order, seed, alphabet, support;
            double noise;
        } synthetic;
    } data;
    struct {
        int type; /* enum dt_optim_type */
        double lr;
        struct dt_floats betas;
        double eps, weight_decay, momentum;
        bool nesterov;
    } optimizer;
    struct {
        int type; /* enum dt_sched_type */
        struct dt_duration warmup;
        struct dt_duration total;
        double min_lr_ratio;
        int warmup_type; /* enum dt_warmup_type */
        double warmup_min_lr, warmup_max_lr, warmup_min_ratio, cos_min_ratio;
        struct dt_duration step_size;
        double gamma;
        struct dt_floats milestones; /* optimizer steps */
        struct dt_phases phases;
    } scheduler;
    struct {
        int device;    /* enum dt_device */
        int precision; /* enum dt_precision */
        int64_t num_devices, num_nodes;
        int strategy; /* enum dt_strategy */
        struct dt_strategy_config strategy_config;
        int64_t gradient_accumulation_steps;
        double gradient_clipping;
        double comm_timeout; /* seconds */
        int grad_reduce_dtype; /* enum dt_dtype_name */
        struct {
            double loss_scale;
            int64_t initial_scale_power, loss_scale_window, hysteresis;
            bool consecutive_hysteresis;
            double min_loss_scale;
        } loss_scaler;
        struct dt_fp8_config {
            int format;           /* enum dt_fp8_format */
            int scaling;          /* enum dt_fp8_scaling */
            int64_t amax_history_len;
            int amax_compute_algo; /* enum dt_fp8_amax_algo */
            double margin;
        } fp8;
    } compute;
    struct {
        char *dir;
        struct dt_duration interval;
        int64_t keep;
        char *resume;
    } checkpoint;
    struct { /* dtrun submit's sbatch script */
        char *partition, *account, *qos, *constraint, *time, *template, *extra;
        double signal_grace;
        bool requeue;
    } slurm;
    struct {
        char *jsonl;
        char *prometheus;
        struct dt_duration interval;
        struct dt_duration sample_interval;
        char *sample_prompt;
        int64_t sample_tokens;
        bool wall_clock_breakdown;
        double peak_tflops;
        struct {
            char *url;
            char *secret_env;
            char *headers;
            int64_t batch, queue;
            double connect_timeout, timeout, backoff, max_backoff, flush_timeout;
            bool insecure;
        } webhook;
    } events;

    /* Filled by dt_config_resolve(). */
    struct {
        int nodes, devices_per_node, world;
        int64_t global_batch; /* sequences per optimizer step */
        int strategy;         /* the strategy that runs: never AUTO or DEEPSPEED */
        int stage;            /* its ZeRO stage: 0 (single, ddp) to 3 */
        bool hybrid;          /* fsdp HYBRID_SHARD: shard within each node, replicate across nodes */
        int gpus;             /* GPUs this process can use (0: none, or never looked for: device cpu) */
        char device_note[160]; /* why there are none */
    } resolved;

    struct dt_ds_config ds; /* the DeepSpeed JSON, when compute.strategy is deepspeed */
    struct dt_origin *origin; /* one per dt_config_schema entry */
    struct dt_namelist names; /* file names the origins point into */
};

/* Built-in defaults only: the config a run gets without a file. */
dt_status_t dt_config_init(struct dt_config *cfg);
/* Apply the site defaults file, then the YAML file (either NULL: none), then overrides "a.b=v". */
dt_status_t dt_config_load(struct dt_config *cfg, const char *site, const char *path, int noverrides,
                           char *const *overrides);
void dt_config_free(struct dt_config *cfg);

extern const struct dt_schema dt_config_schema;
/* The enum spellings of the schema, for messages and output. */
extern const struct dt_enum_name dt_precision_names[], dt_strategy_names[], dt_optim_names[], dt_sched_names[],
    dt_warmup_type_names[], dt_dtype_names[], dt_fsdp_sharding_names[], dt_offload_names[];

/* The origin of a key by path ("optimizer.lr"); NULL for an unknown path. */
const struct dt_origin *dt_config_origin(const struct dt_config *cfg, const char *path);

#endif
