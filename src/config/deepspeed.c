/*
 * deepspeed.c - the DeepSpeed JSON: its key table and its merge into the dtrun
 * config (see deepspeed.h for the rules).
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "config/diag.h"
#include "config/schema.h"
#include "config/timestr.h"
#include "core/error.h"
#include "core/log.h"

#define OFF(field) offsetof(struct dt_ds_config, field)
#define INF DBL_MAX

/* DeepSpeed's optimizer names; the ones dtrun lacks are refused, never swapped for another. */
static const struct dt_enum_name ds_optimizers[] = {
    {"AdamW", DT_OPTIM_ADAMW, NULL},
    {"Adam", DT_OPTIM_ADAM, NULL},
    {"SGD", DT_OPTIM_SGD, NULL},
    {"OneBitAdam", -1, "dtrun does not implement 1-bit Adam; use Adam or AdamW"},
    {"ZeroOneAdam", -1, "dtrun does not implement 0/1 Adam; use Adam or AdamW"},
    {"OneBitLamb", -1, "dtrun does not implement 1-bit LAMB; use Adam or AdamW"},
    {"Lamb", -1, "dtrun does not implement LAMB; use Adam or AdamW"},
    {"Lion", -1, "dtrun does not implement Lion; use Adam or AdamW"},
    {"Adagrad", -1, "dtrun does not implement Adagrad; use Adam or AdamW"},
    {"MuAdam", -1, "dtrun does not implement muP optimizers; use Adam or AdamW"},
    {"MuAdamW", -1, "dtrun does not implement muP optimizers; use Adam or AdamW"},
    {"MuSGD", -1, "dtrun does not implement muP optimizers; use SGD"},
    {0}};

#define A DT_F_AUTO
/* path, type, field, default, min, max, flags, maps_to, policy */
#define DK(p, t, f, d, lo, hi, fl, to, pol)                                                                     \
    {.path = p, .type = t, .offset = OFF(f), .def = d, .min = lo, .max = hi, .flags = fl, .maps_to = to,        \
     .policy = pol, .help = "DeepSpeed " p}
#define DE(p, f, d, names_, to, pol)                                                                          \
    {.path = p, .type = DT_T_ENUM, .offset = OFF(f), .def = d, .names = names_, .flags = A, .maps_to = to,     \
     .policy = pol, .help = "DeepSpeed " p}
/* a documented key or section dtrun accepts and has no use for, with the reason (said by name when set) */
#define IGN(p, why) {.path = p, .type = DT_T_ANY, .policy = DT_DS_IGNORED, .help = why}
/* the same for a key whose type is still checked */
#define NOOP(p, t, f, why) {.path = p, .type = t, .offset = OFF(f), .min = 0, .max = 1e15, .policy = DT_DS_IGNORED, .help = why}

static const struct dt_key ds_keys[] = {
    DK("train_batch_size", DT_T_INT, train_batch_size, NULL, 1, 1e12, A, NULL, DT_DS_BATCH),
    DK("train_micro_batch_size_per_gpu", DT_T_INT, train_micro_batch_size_per_gpu, NULL, 1, 1e12, A,
       "data.micro_batch_size", DT_DS_BATCH),
    DK("gradient_accumulation_steps", DT_T_INT, gradient_accumulation_steps, NULL, 1, 1e12, A,
       "compute.gradient_accumulation_steps", DT_DS_BATCH),
    DK("gradient_clipping", DT_T_FLOAT, gradient_clipping, NULL, 0, 1e9, A, "compute.gradient_clipping", DT_DS_MATCH),
    DK("wall_clock_breakdown", DT_T_BOOL, wall_clock_breakdown, NULL, 0, 0, A, "events.wall_clock_breakdown",
       DT_DS_WIN),
    DE("communication_data_type", communication_data_type, NULL, dt_dtype_names, "compute.grad_reduce_dtype", DT_DS_WIN),
    NOOP("steps_per_print", DT_T_INT, steps_per_print, "dtrun prints every events.interval"),

    DE("optimizer.type", optimizer.type, NULL, ds_optimizers, NULL, DT_DS_WIN),
    DK("optimizer.params.lr", DT_T_FLOAT, optimizer.params.lr, NULL, 0, 10, A | DT_F_MIN_EXCL, "optimizer.lr",
       DT_DS_WIN),
    {.path = "optimizer.params.betas", .type = DT_T_FLOATS, .offset = OFF(optimizer.params.betas), .min = 0,
     .max = 0.999999, .count = 2, .flags = A, .maps_to = "optimizer.betas", .policy = DT_DS_WIN,
     .help = "DeepSpeed optimizer.params.betas"},
    DK("optimizer.params.eps", DT_T_FLOAT, optimizer.params.eps, NULL, 0, 1, A | DT_F_MIN_EXCL, "optimizer.eps",
       DT_DS_WIN),
    DK("optimizer.params.weight_decay", DT_T_FLOAT, optimizer.params.weight_decay, NULL, 0, 10, A,
       "optimizer.weight_decay", DT_DS_WIN),
    DK("optimizer.params.momentum", DT_T_FLOAT, optimizer.params.momentum, NULL, 0, 1, A, "optimizer.momentum",
       DT_DS_WIN),
    DK("optimizer.params.nesterov", DT_T_BOOL, optimizer.params.nesterov, NULL, 0, 0, A, "optimizer.nesterov",
       DT_DS_WIN),
    DK("optimizer.params.adam_w_mode", DT_T_BOOL, optimizer.params.adam_w_mode, "true", 0, 0, 0, NULL, DT_DS_STORE),
    IGN("optimizer.params.torch_adam", "a choice between DeepSpeed's Adam kernels; dtrun has one"),
    IGN("optimizer.params.amsgrad", "dtrun's Adam has no AMSGrad variant"),
    IGN("optimizer.params.bias_correction", "dtrun's Adam always corrects bias, as PyTorch's does"),

    DE("scheduler.type", scheduler.type, NULL, dt_sched_names, "scheduler.type", DT_DS_WIN),
    DK("scheduler.params.warmup_min_lr", DT_T_FLOAT, scheduler.params.warmup_min_lr, NULL, 0, 10, A,
       "scheduler.warmup_min_lr", DT_DS_WIN),
    DK("scheduler.params.warmup_max_lr", DT_T_FLOAT, scheduler.params.warmup_max_lr, NULL, 0, 10, A,
       "scheduler.warmup_max_lr", DT_DS_WIN),
    DK("scheduler.params.warmup_num_steps", DT_T_INT, scheduler.params.warmup_num_steps, NULL, 0, 1e12, A,
       "scheduler.warmup", DT_DS_WIN),
    DK("scheduler.params.total_num_steps", DT_T_INT, scheduler.params.total_num_steps, NULL, 1, 1e12, A,
       "scheduler.total", DT_DS_WIN),
    DE("scheduler.params.warmup_type", scheduler.params.warmup_type, NULL, dt_warmup_type_names, "scheduler.warmup_type",
       DT_DS_WIN),
    DK("scheduler.params.warmup_min_ratio", DT_T_FLOAT, scheduler.params.warmup_min_ratio, NULL, 0, 1, A,
       "scheduler.warmup_min_ratio", DT_DS_WIN),
    DK("scheduler.params.cos_min_ratio", DT_T_FLOAT, scheduler.params.cos_min_ratio, NULL, 0, 1, A,
       "scheduler.cos_min_ratio", DT_DS_WIN),
    IGN("scheduler.params.last_batch_iteration", "the schedule resumes from dtrun's own checkpoints (checkpoint.resume)"),

    DK("fp16.enabled", DT_T_BOOL, fp16.enabled, NULL, 0, 0, A, NULL, DT_DS_WIN),
    DK("fp16.loss_scale", DT_T_FLOAT, fp16.loss_scale, NULL, 0, 1e30, A, "compute.loss_scaler.loss_scale", DT_DS_WIN),
    DK("fp16.initial_scale_power", DT_T_INT, fp16.initial_scale_power, NULL, 0, 126, A,
       "compute.loss_scaler.initial_scale_power", DT_DS_WIN),
    DK("fp16.loss_scale_window", DT_T_INT, fp16.loss_scale_window, NULL, 1, 1e9, A,
       "compute.loss_scaler.loss_scale_window", DT_DS_WIN),
    DK("fp16.hysteresis", DT_T_INT, fp16.hysteresis, NULL, 1, 1e9, A, "compute.loss_scaler.hysteresis", DT_DS_WIN),
    DK("fp16.consecutive_hysteresis", DT_T_BOOL, fp16.consecutive_hysteresis, NULL, 0, 0, A,
       "compute.loss_scaler.consecutive_hysteresis", DT_DS_WIN),
    DK("fp16.min_loss_scale", DT_T_FLOAT, fp16.min_loss_scale, NULL, 0, 1e30, A | DT_F_MIN_EXCL,
       "compute.loss_scaler.min_loss_scale", DT_DS_WIN),
    IGN("fp16.auto_cast", "dtrun's 16-mixed already runs every matmul in fp16"),
    IGN("fp16.fp16_master_weights_and_grads", "dtrun keeps fp32 master weights"),
    DK("bf16.enabled", DT_T_BOOL, bf16.enabled, NULL, 0, 0, A, NULL, DT_DS_WIN),
    IGN("bf16.immediate_grad_update", "a DeepSpeed accumulation detail; dtrun accumulates once per step"),
    IGN("bf16.check_grad_overflow", "bf16 needs no overflow check; 16-mixed has its loss scaler"),
    IGN("amp", "NVIDIA apex; dtrun's precision is compute.precision"),

    DK("zero_optimization.stage", DT_T_INT, zero.stage, "0", 0, 3, 0, NULL, DT_DS_STORE),
    DK("zero_optimization.reduce_bucket_size", DT_T_INT, zero.reduce_bucket_size, NULL, 1, 1e12, A,
       "compute.strategy_config.bucket_cap_mb", DT_DS_WIN),
    DK("zero_optimization.overlap_comm", DT_T_BOOL, zero.overlap_comm, NULL, 0, 0, 0,
       "compute.strategy_config.overlap_comm", DT_DS_WIN),
    NOOP("zero_optimization.contiguous_gradients", DT_T_BOOL, zero.contiguous_gradients,
         "dtrun's gradients are always in one contiguous buffer"),
    NOOP("zero_optimization.reduce_scatter", DT_T_BOOL, zero.reduce_scatter,
         "dtrun always reduce-scatters gradients in stages 1-3"),
    NOOP("zero_optimization.allgather_partitions", DT_T_BOOL, zero.allgather_partitions,
         "dtrun always all-gathers the updated parts"),
    DK("zero_optimization.allgather_bucket_size", DT_T_INT, zero.allgather_bucket_size, NULL, 1, 1e15, 0,
       "compute.strategy_config.allgather_bucket_size", DT_DS_WIN),
    NOOP("zero_optimization.round_robin_gradients", DT_T_BOOL, zero.round_robin_gradients,
         "a layout for offloaded gradients; dtrun's gradient parts are contiguous already"),
    DK("zero_optimization.sub_group_size", DT_T_INT, zero.sub_group_size, NULL, 1, 1e15, 0,
       "compute.strategy_config.sub_group_size", DT_DS_WIN),
    DK("zero_optimization.stage3_prefetch_bucket_size", DT_T_INT, zero.stage3_prefetch_bucket_size, NULL, 0, 1e15, A,
       "compute.strategy_config.prefetch_bucket_size", DT_DS_WIN),
    DK("zero_optimization.stage3_param_persistence_threshold", DT_T_INT, zero.stage3_param_persistence_threshold,
       NULL, 0, 1e15, A, "compute.strategy_config.param_persistence_threshold", DT_DS_WIN),
    DK("zero_optimization.stage3_max_live_parameters", DT_T_INT, zero.stage3_max_live_parameters, NULL, 0, 1e15, 0,
       "compute.strategy_config.max_live_parameters", DT_DS_WIN),
    DK("zero_optimization.stage3_max_reuse_distance", DT_T_INT, zero.stage3_max_reuse_distance, NULL, 0, 1e15, 0,
       "compute.strategy_config.max_reuse_distance", DT_DS_WIN),
    NOOP("zero_optimization.stage3_gather_16bit_weights_on_model_save", DT_T_BOOL,
         zero.stage3_gather_16bit_weights_on_model_save, "checkpoints hold fp32 weights; dtrun ckpt export writes a whole model"),
    DE("zero_optimization.offload_optimizer.device", zero.offload_optimizer.device, "none", dt_offload_names,
       "compute.strategy_config.offload_optimizer", DT_DS_WIN),
    NOOP("zero_optimization.offload_optimizer.pin_memory", DT_T_BOOL, zero.offload_optimizer.pin_memory,
         "dtrun always pins what it offloads from a GPU (a CPU run has nothing to pin)"),
    IGN("zero_optimization.offload_optimizer.buffer_count", "a tuning knob of NVMe offload, which dtrun lacks"),
    IGN("zero_optimization.offload_optimizer.fast_init", "a tuning knob of NVMe offload, which dtrun lacks"),
    IGN("zero_optimization.offload_optimizer.ratio", "partial offload (ZenFlow): dtrun offloads all of the optimizer or none"),
    IGN("zero_optimization.offload_optimizer.nvme_path", "dtrun offloads to host memory only"),
    DE("zero_optimization.offload_param.device", zero.offload_param.device, "none", dt_offload_names,
       "compute.strategy_config.offload_param", DT_DS_WIN),
    NOOP("zero_optimization.offload_param.pin_memory", DT_T_BOOL, zero.offload_param.pin_memory,
         "dtrun always pins what it offloads from a GPU (a CPU run has nothing to pin)"),
    IGN("zero_optimization.offload_param.buffer_count", "a tuning knob of NVMe offload, which dtrun lacks"),
    IGN("zero_optimization.offload_param.buffer_size", "a tuning knob of NVMe offload, which dtrun lacks"),
    IGN("zero_optimization.offload_param.max_in_cpu", "a tuning knob of NVMe offload, which dtrun lacks"),
    IGN("zero_optimization.offload_param.nvme_path", "dtrun offloads to host memory only"),
    IGN("zero_optimization.cpu_offload", "the old name of offload_optimizer: use offload_optimizer.device"),
    IGN("zero_optimization.elastic_checkpoint", "dtrun's checkpoints load into any world and strategy"),
    IGN("zero_optimization.load_from_fp32_weights", "dtrun always resumes from the fp32 weights it saved"),
    IGN("zero_optimization.ignore_unused_parameters", "dtrun's models use every parameter"),
    IGN("zero_optimization.legacy_stage1", "dtrun has one stage 1"),
    IGN("zero_optimization.stage3_gather_fp16_weights_on_model_save",
        "checkpoints hold fp32 weights; dtrun ckpt export writes a whole model"),
    IGN("zero_optimization.zero_hpz_partition_size", "ZeRO++'s secondary partition: use fsdp HYBRID_SHARD"),
    IGN("zero_optimization.zero_quantized_weights", "ZeRO++'s quantized gathers are not in dtrun"),
    IGN("zero_optimization.zero_quantized_gradients", "ZeRO++'s quantized gradients are not in dtrun"),
    IGN("zero_optimization.mics_shard_size", "MiCS is not in dtrun: use fsdp HYBRID_SHARD"),
    IGN("zero_optimization.memory_efficient_linear", "a PyTorch autograd detail with no counterpart here"),
    IGN("prescale_gradients", "dtrun always divides gradients by the world size before reducing"),
    IGN("gradient_predivide_factor", "dtrun always divides gradients by the world size before reducing"),
    IGN("sparse_gradients", "dtrun reduces the embedding's rows itself"),
    IGN("zero_allow_untested_optimizer", "dtrun's optimizers all work with every stage"),
    IGN("zero_force_ds_cpu_optimizer", "a CPU run already updates on the CPU"),
    IGN("activation_checkpointing", "use model.activation_checkpointing"),
    IGN("flops_profiler", "dtrun reports MFU in its metrics (events.peak_tflops)"),
    IGN("tensorboard", "dtrun reports through events.jsonl and the webhook"),
    IGN("wandb", "dtrun reports through events.jsonl and the webhook"),
    IGN("csv_monitor", "dtrun reports through events.jsonl and the webhook"),
    IGN("comet", "dtrun reports through events.jsonl and the webhook"),
    IGN("comms_logger", "dtrun's watchdog names stalled collectives; DTRUN_DEBUG_SUBSYS=COMM traces them"),
    IGN("data_types", "dtrun's types follow compute.precision and compute.grad_reduce_dtype"),
    IGN("checkpoint", "set checkpoint.* in the YAML (dir, interval, keep, resume)"),
    IGN("elasticity", "a Slurm job's world is fixed for its life"),
    IGN("aio", "a tuning knob of NVMe offload, which dtrun lacks"),
    IGN("autotuning", "dtrun does not search configurations"),
    IGN("compression_training", "not in dtrun"),
    IGN("data_efficiency", "dtrun's data comes from data.*"),
    IGN("curriculum_learning", "dtrun's data comes from data.*"),
    IGN("dump_state", "DTRUN_DEBUG shows dtrun's state"),
    IGN("memory_breakdown", "run_started and dtrun check --memory give the model-state bytes per rank"),
    IGN("sparse_attention", "dtrun's attention is dense"),
    IGN("pipeline", "dtrun has no pipeline parallelism"),
    IGN("seq_parallel_communication_data_type", "dtrun has no sequence parallelism"),
    IGN("disable_allgather", "a pipeline detail; dtrun has no pipeline parallelism"),
    IGN("gradient_accumulation_dtype", "dtrun accumulates in the gradients' type (compute.precision)"),
};

const struct dt_schema dt_ds_schema = {"DeepSpeed config", ds_keys, sizeof ds_keys / sizeof ds_keys[0]};

void dt_ds_free(struct dt_ds_config *ds)
{
    dt_schema_release(&dt_ds_schema, ds);
    free(ds->origin);
    ds->origin = NULL;
}

/* ---------------------------------------------------------------- merge */

struct merge {
    struct dt_config *cfg;
    struct dt_ds_config *ds;
    struct dt_diags errors; /* every merge error; mismatches are gathered into one */
    int nmismatch;
    char *mismatch_text;
    size_t mismatch_len;
};

static const struct dt_origin *ds_origin(const struct dt_ds_config *ds, const char *path)
{
    size_t i;
    return dt_schema_find(&dt_ds_schema, path, &i) ? &ds->origin[i] : NULL;
}

/* Where a DeepSpeed key's value came from; a path the schema does not know has no location (not NULL). */
static struct dt_loc ds_loc(const struct dt_ds_config *ds, const char *path)
{
    const struct dt_origin *o = ds_origin(ds, path);
    return o ? o->loc : (struct dt_loc){0};
}

/* Written in the JSON with a value (not "auto", not missing). */
static bool ds_explicit(const struct dt_ds_config *ds, const char *path)
{
    const struct dt_origin *o = ds_origin(ds, path);
    return o && o->kind == DT_ORIGIN_DEEPSPEED && !o->is_auto;
}

static bool user_set(const struct dt_origin *o)
{
    return (o->kind == DT_ORIGIN_FILE || o->kind == DT_ORIGIN_OVERRIDE) && !o->is_auto;
}

static void add_mismatch(struct merge *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_mismatch(struct merge *m, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t add = strlen(line);
    char *t = realloc(m->mismatch_text, m->mismatch_len + add + 4);
    if (!t) return;
    m->mismatch_text = t;
    memcpy(t + m->mismatch_len, "\n  ", 3);
    memcpy(t + m->mismatch_len + 3, line, add + 1);
    m->mismatch_len += add + 3;
    m->nmismatch++;
}

static void set_dt_origin(struct merge *m, size_t ti, const struct dt_origin *dso)
{
    m->cfg->origin[ti] = (struct dt_origin){.kind = DT_ORIGIN_DEEPSPEED, .loc = dso->loc};
}

/* A same-typed WIN or MATCH pair: the JSON value and the dtrun key it meets.
 * Pairs whose types differ (steps vs durations, elements vs MiB) are merged
 * by hand in merge_converted(). */
static void merge_plain(struct merge *m, const struct dt_key *dk, size_t di)
{
    size_t ti;
    const struct dt_key *tk = dt_schema_find(&dt_config_schema, dk->maps_to, &ti);
    if (!tk || tk->type != dk->type || (tk->type == DT_T_ENUM && tk->names != dk->names)) return;
    void *dv = DT_FIELD(m->ds, dk), *tv = DT_FIELD(m->cfg, tk);
    if (!ds_explicit(m->ds, dk->path)) {
        dt_value_copy(dk->type, dv, tv); /* "auto" or missing: take the dtrun value */
        return;
    }
    const struct dt_origin *dso = &m->ds->origin[di];
    struct dt_origin *to = &m->cfg->origin[ti];
    if (!dt_value_equal(dk->type, dv, tv) && user_set(to)) {
        char a[128], b[128], wa[256], wb[256];
        dt_value_format(dk, dv, a, sizeof a);
        dt_value_format(tk, tv, b, sizeof b);
        dt_loc_str(dso->loc, wa, sizeof wa);
        dt_loc_str(to->loc, wb, sizeof wb);
        if (dk->policy == DT_DS_MATCH) {
            add_mismatch(m, "%s = %s (%s) but %s = %s (%s)", dk->path, a, wa, tk->path, b, wb);
            return;
        }
        DT_WARN("%s: %s = %s overrides %s = %s (%s): with strategy deepspeed the JSON's value wins", wa, dk->path, a,
                tk->path, b, wb);
    }
    dt_value_copy(dk->type, tv, dv);
    set_dt_origin(m, ti, dso);
}

static bool dur_is_steps(struct dt_duration d, int64_t n) { return d.unit == DT_TU_BA && d.value == (double)n; }

/* JSON steps (warmup_num_steps, total_num_steps) against a dtrun duration. */
static void merge_steps(struct merge *m, const char *ds_path, int64_t *dsv, const char *dt_path)
{
    size_t ti, di;
    dt_schema_find(&dt_config_schema, dt_path, &ti);
    dt_schema_find(&dt_ds_schema, ds_path, &di);
    struct dt_duration *d = DT_FIELD(m->cfg, &dt_config_schema.keys[ti]);
    struct dt_origin *to = &m->cfg->origin[ti];
    if (!ds_explicit(m->ds, ds_path)) {
        if (d->unit == DT_TU_BA && !to->is_auto) *dsv = (int64_t)d->value;
        return;
    }
    char wa[256], wb[256], buf[64];
    if (user_set(to) && !dur_is_steps(*d, *dsv))
        DT_WARN("%s: %s = %lld overrides %s = %s (%s): with strategy deepspeed the JSON's value wins",
                dt_loc_str(m->ds->origin[di].loc, wa, sizeof wa), ds_path, (long long)*dsv, dt_path,
                dt_duration_str(*d, buf, sizeof buf), dt_loc_str(to->loc, wb, sizeof wb));
    *d = (struct dt_duration){(double)*dsv, DT_TU_BA};
    set_dt_origin(m, ti, &m->ds->origin[di]);
}

/* zero_optimization.reduce_bucket_size counts fp32 elements; bucket_cap_mb is MiB. */
static void merge_bucket(struct merge *m)
{
    const char *ds_path = "zero_optimization.reduce_bucket_size";
    size_t ti, di;
    dt_schema_find(&dt_config_schema, "compute.strategy_config.bucket_cap_mb", &ti);
    dt_schema_find(&dt_ds_schema, ds_path, &di);
    double *mb = &m->cfg->compute.strategy_config.bucket_cap_mb;
    struct dt_origin *to = &m->cfg->origin[ti];
    const struct dt_origin *dso = &m->ds->origin[di];
    int64_t *elems = &m->ds->zero.reduce_bucket_size;
    if (dso->kind != DT_ORIGIN_DEEPSPEED) {
        *elems = (int64_t)(*mb * (1 << 20) / 4);
        return;
    }
    if (dso->is_auto) {
        /* Hugging Face's rule: hidden_size squared */
        *elems = m->cfg->model.n_embd * m->cfg->model.n_embd;
        if (user_set(to)) {
            *elems = (int64_t)(*mb * (1 << 20) / 4);
            return;
        }
        *mb = (double)*elems * 4 / (1 << 20);
        *to = (struct dt_origin){.kind = DT_ORIGIN_AUTO};
        snprintf(to->note, sizeof to->note, "DeepSpeed reduce_bucket_size \"auto\" = n_embd^2 = %lld elements",
                 (long long)*elems);
        return;
    }
    double want = (double)*elems * 4 / (1 << 20);
    char wa[256], wb[256];
    if (user_set(to) && fabs(want - *mb) > 1e-9 * want)
        DT_WARN("%s: %s = %lld elements (%.6g MiB) overrides compute.strategy_config.bucket_cap_mb = %.6g (%s)",
                dt_loc_str(dso->loc, wa, sizeof wa), ds_path, (long long)*elems, want, *mb,
                dt_loc_str(to->loc, wb, sizeof wb));
    *mb = want;
    set_dt_origin(m, ti, dso);
}

static void merge_precision(struct merge *m)
{
    size_t ti;
    dt_schema_find(&dt_config_schema, "compute.precision", &ti);
    int *p = &m->cfg->compute.precision;
    struct dt_origin *to = &m->cfg->origin[ti];
    bool f16x = ds_explicit(m->ds, "fp16.enabled"), bf16x = ds_explicit(m->ds, "bf16.enabled");
    bool f16 = f16x && m->ds->fp16.enabled, bf16 = bf16x && m->ds->bf16.enabled;
    char wa[256], wb[256];
    if (f16 && bf16) {
        dt_diag(&m->errors, ds_loc(m->ds, "bf16.enabled"), "enable one of fp16 and bf16",
                "fp16.enabled and bf16.enabled are both true");
        return;
    }
    int want = *p;
    const char *why = NULL;
    if (f16) want = DT_PREC_16_MIXED, why = "fp16.enabled";
    else if (bf16) /* fp8-mixed is bf16-mixed with FP8 linear layers: the JSON's bf16 block agrees with it */
        want = *p == DT_PREC_BF16_TRUE || *p == DT_PREC_FP8_MIXED ? *p : DT_PREC_BF16_MIXED, why = "bf16.enabled";
    else if (f16x && *p == DT_PREC_16_MIXED) want = DT_PREC_32_TRUE, why = "fp16.enabled";
    else if (bf16x && (*p == DT_PREC_BF16_MIXED || *p == DT_PREC_BF16_TRUE || *p == DT_PREC_FP8_MIXED)) want = DT_PREC_32_TRUE, why = "bf16.enabled";
    else if (f16x && bf16x) want = DT_PREC_32_TRUE, why = "fp16.enabled";
    /* what "auto" means in the JSON, for `dtrun check` */
    m->ds->fp16.enabled = want == DT_PREC_16_MIXED;
    m->ds->bf16.enabled = want == DT_PREC_BF16_MIXED || want == DT_PREC_BF16_TRUE || want == DT_PREC_FP8_MIXED;
    if (!why || want == *p) {
        if (why) set_dt_origin(m, ti, ds_origin(m->ds, why));
        return;
    }
    if (user_set(to))
        DT_WARN("%s: %s = %s sets precision %s over compute.precision = %s (%s): with strategy deepspeed the "
                "JSON's fp16/bf16 blocks win",
                dt_loc_str(ds_loc(m->ds, why), wa, sizeof wa), why, (f16 || bf16) ? "true" : "false",
                dt_enum_str(dt_precision_names, want), dt_enum_str(dt_precision_names, *p),
                dt_loc_str(to->loc, wb, sizeof wb));
    *p = want;
    set_dt_origin(m, ti, ds_origin(m->ds, why));
}

static void merge_optimizer_type(struct merge *m)
{
    if (!ds_explicit(m->ds, "optimizer.type")) {
        m->ds->optimizer.type = m->cfg->optimizer.type;
        return;
    }
    size_t ti;
    dt_schema_find(&dt_config_schema, "optimizer.type", &ti);
    int want = m->ds->optimizer.type;
    /* DeepSpeed's "Adam" is AdamW unless adam_w_mode is false (ops/adam/fused_adam.py) */
    if (want == DT_OPTIM_ADAM && m->ds->optimizer.params.adam_w_mode) want = DT_OPTIM_ADAMW;
    struct dt_origin *to = &m->cfg->origin[ti];
    char wa[256], wb[256];
    if (user_set(to) && want != m->cfg->optimizer.type) {
        DT_WARN("%s: optimizer.type = %s overrides optimizer.type = %s (%s): with strategy deepspeed the JSON's "
                "optimizer wins",
                dt_loc_str(ds_loc(m->ds, "optimizer.type"), wa, sizeof wa), dt_enum_str(dt_optim_names, want),
                dt_enum_str(dt_optim_names, m->cfg->optimizer.type), dt_loc_str(to->loc, wb, sizeof wb));
    }
    m->cfg->optimizer.type = want;
    set_dt_origin(m, ti, ds_origin(m->ds, "optimizer.type"));
}

/* One side of the batch identity: known from the JSON, known from the YAML, or open. */
struct factor {
    const char *ds_path, *dt_path;
    int64_t *dsv, *dtv;
    bool known;
};

static void batch_factor(struct merge *m, struct factor *f)
{
    size_t ti;
    dt_schema_find(&dt_config_schema, f->dt_path, &ti);
    struct dt_origin *to = &m->cfg->origin[ti];
    if (ds_explicit(m->ds, f->ds_path)) {
        const struct dt_origin *dso = ds_origin(m->ds, f->ds_path);
        char wa[256], wb[256];
        if (user_set(to) && *f->dsv != *f->dtv) {
            add_mismatch(m, "%s = %lld (%s) but %s = %lld (%s)", f->ds_path, (long long)*f->dsv,
                         dt_loc_str(dso->loc, wa, sizeof wa), f->dt_path, (long long)*f->dtv,
                         dt_loc_str(to->loc, wb, sizeof wb));
        }
        *f->dtv = *f->dsv;
        set_dt_origin(m, ti, dso);
        f->known = true;
    } else {
        f->known = user_set(to);
    }
}

static void derived(struct merge *m, const char *dt_path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void derived(struct merge *m, const char *dt_path, const char *fmt, ...)
{
    size_t ti;
    dt_schema_find(&dt_config_schema, dt_path, &ti);
    struct dt_origin *o = &m->cfg->origin[ti];
    *o = (struct dt_origin){.kind = DT_ORIGIN_AUTO};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->note, sizeof o->note, fmt, ap);
    va_end(ap);
}

/* DeepSpeed's fill rules (runtime/config.py _set_batch_related_parameters), strict about remainders. */
static void merge_batch(struct merge *m)
{
    struct dt_config *c = m->cfg;
    struct dt_ds_config *ds = m->ds;
    int64_t w = c->resolved.world;
    struct factor micro = {"train_micro_batch_size_per_gpu", "data.micro_batch_size",
                           &ds->train_micro_batch_size_per_gpu, &c->data.micro_batch_size, false};
    struct factor gas = {"gradient_accumulation_steps", "compute.gradient_accumulation_steps",
                         &ds->gradient_accumulation_steps, &c->compute.gradient_accumulation_steps, false};
    batch_factor(m, &micro);
    batch_factor(m, &gas);
    if (!ds_explicit(ds, "train_batch_size")) {
        ds->train_batch_size = *micro.dtv * *gas.dtv * w;
        ds->train_micro_batch_size_per_gpu = *micro.dtv;
        ds->gradient_accumulation_steps = *gas.dtv;
        return;
    }
    const struct dt_origin *o = ds_origin(ds, "train_batch_size");
    char where[256];
    dt_loc_str(o->loc, where, sizeof where);
    int64_t train = ds->train_batch_size;
    if (!micro.known && !gas.known) {
        *gas.dtv = 1;
        gas.known = true;
        derived(m, gas.dt_path, "DeepSpeed: only train_batch_size given, so 1");
    }
    if (micro.known && gas.known) {
        if (train != *micro.dtv * *gas.dtv * w)
            dt_diag(&m->errors, o->loc, "set train_batch_size to \"auto\", or change one of the factors",
                    "train_batch_size %lld is not train_micro_batch_size_per_gpu %lld x gradient_accumulation_steps "
                    "%lld x world size %lld = %lld",
                    (long long)train, (long long)*micro.dtv, (long long)*gas.dtv, (long long)w,
                    (long long)(*micro.dtv * *gas.dtv * w));
    } else {
        struct factor *k = micro.known ? &micro : &gas, *u = micro.known ? &gas : &micro;
        int64_t div = *k->dtv * w;
        if (train % div != 0) {
            dt_diag(&m->errors, o->loc, "make train_batch_size a multiple of the product, or give all three",
                    "train_batch_size %lld is not divisible by %s %lld x world size %lld = %lld (DeepSpeed would "
                    "silently truncate %s)",
                    (long long)train, k->ds_path, (long long)*k->dtv, (long long)w, (long long)div, u->ds_path);
        } else {
            *u->dtv = train / div;
            derived(m, u->dt_path, "DeepSpeed: train_batch_size %lld / (%s %lld x world %lld)", (long long)train,
                    k->ds_path, (long long)*k->dtv, (long long)w);
        }
    }
    ds->train_micro_batch_size_per_gpu = *micro.dtv;
    ds->gradient_accumulation_steps = *gas.dtv;
}

static void warn_ignored(const struct dt_ds_config *ds, const char *path)
{
    char list[8192] = "";
    int n = 0;
    for (size_t i = 0; i < dt_ds_schema.n; i++) {
        if (dt_ds_schema.keys[i].policy != DT_DS_IGNORED || ds->origin[i].kind != DT_ORIGIN_DEEPSPEED) continue;
        char item[512];
        snprintf(item, sizeof item, "\n  %s (line %d): %s", dt_ds_schema.keys[i].path, ds->origin[i].loc.line,
                 dt_ds_schema.keys[i].help);
        strncat(list, item, sizeof list - strlen(list) - 1);
        n++;
    }
    if (n) DT_WARN("%s: %d DeepSpeed key%s set here %s no meaning in dtrun:%s", path, n, n > 1 ? "s" : "",
                   n > 1 ? "have" : "has", list);
}

dt_status_t dt_ds_load_merge(struct dt_config *cfg)
{
    const char *path = cfg->compute.strategy_config.config;
    struct dt_ds_config *ds = &cfg->ds;
    struct dt_ydoc *doc = NULL;
    DT_CHECK(dt_ydoc_load_file(path, &doc));
    const char *name = dt_namelist_add(&cfg->names, path);
    if (!name) {
        dt_ydoc_free(doc);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    }
    ds->origin = calloc(dt_ds_schema.n, sizeof *ds->origin);
    if (!ds->origin) {
        dt_ydoc_free(doc);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    }
    dt_status_t rc = dt_schema_defaults(&dt_ds_schema, ds, ds->origin);
    if (rc != DT_SUCCESS) {
        dt_ydoc_free(doc);
        return rc;
    }
    struct dt_diags d = {0};
    dt_schema_apply(&dt_ds_schema, ds, ds->origin, dt_ydoc_root(doc), "", DT_ORIGIN_DEEPSPEED, &d);
    dt_ydoc_free(doc);
    /* locations must outlive the document */
    for (size_t i = 0; i < dt_ds_schema.n; i++)
        if (ds->origin[i].kind == DT_ORIGIN_DEEPSPEED) ds->origin[i].loc.file = name;
    DT_CHECK(dt_diag_finish(&d));
    ds->present = true;
    warn_ignored(ds, name);

    struct merge m = {.cfg = cfg, .ds = ds};
    for (size_t i = 0; i < dt_ds_schema.n; i++) {
        const struct dt_key *k = &dt_ds_schema.keys[i];
        if ((k->policy == DT_DS_WIN || k->policy == DT_DS_MATCH) && k->maps_to) merge_plain(&m, k, i);
    }
    merge_optimizer_type(&m);
    merge_precision(&m);
    merge_steps(&m, "scheduler.params.warmup_num_steps", &ds->scheduler.params.warmup_num_steps, "scheduler.warmup");
    merge_steps(&m, "scheduler.params.total_num_steps", &ds->scheduler.params.total_num_steps, "scheduler.total");
    merge_bucket(&m);
    merge_batch(&m);
    if (m.nmismatch) {
        char hint[] = "  hint: set these DeepSpeed values to \"auto\" so they follow the dtrun config, or make both "
                      "sides equal";
        dt_diag(&m.errors, (struct dt_loc){name, 0, 0}, NULL,
                "the DeepSpeed config disagrees with the dtrun config in %d place%s:%s\n%s", m.nmismatch,
                m.nmismatch > 1 ? "s" : "", m.mismatch_text, hint);
    }
    free(m.mismatch_text);
    return dt_diag_finish(&m.errors);
}

void dt_ds_describe(const struct dt_config *cfg, char *buf, size_t n)
{
    const struct dt_ds_config *ds = &cfg->ds;
    snprintf(buf, n,
             "deepspeed: %s: zero stage %lld; train_batch_size %lld = train_micro_batch_size_per_gpu %lld x "
             "gradient_accumulation_steps %lld x world %d; fp16 %s, bf16 %s; reduce_bucket_size %lld",
             cfg->compute.strategy_config.config, (long long)ds->zero.stage, (long long)ds->train_batch_size,
             (long long)ds->train_micro_batch_size_per_gpu, (long long)ds->gradient_accumulation_steps,
             cfg->resolved.world, ds->fp16.enabled ? "on" : "off", ds->bf16.enabled ? "on" : "off",
             (long long)ds->zero.reduce_bucket_size);
}
