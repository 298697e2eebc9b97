/*
 * config_schema.c - every key of the dtrun config: path, type, default, range,
 * help. The only list of keys there is: the loader, `dtrun check`, the
 * README's config reference (tests/config_reference.sh keeps it in sync) and
 * the DeepSpeed mapping all read it.
 *
 * The defaults are the built-in config: `dtrun` with no file trains a 4-layer
 * byte-level GPT on a synthetic order-1 Markov source whose entropy rate is
 * known, so a run with no data and no cluster still means something.
 */
#include <float.h>
#include <stddef.h>
#include "config/config.h"

#define OFF(field) offsetof(struct dt_config, field)
#define INF DBL_MAX

static const struct dt_enum_name model_types[] = {
    {"gpt", DT_MODEL_GPT, NULL}, {"llama", DT_MODEL_LLAMA, NULL}, {"mlp", DT_MODEL_MLP, NULL}, {0}};

static const struct dt_enum_name rope_types[] = {{"none", DT_ROPE_NONE, NULL}, {"llama3", DT_ROPE_LLAMA3, NULL}, {0}};

static const struct dt_enum_name fp8_formats[] = {
    {"hybrid", DT_FP8_HYBRID, NULL}, {"HYBRID", DT_FP8_HYBRID, NULL}, {"e4m3", DT_FP8_ALL_E4M3, NULL},
    {"E4M3", DT_FP8_ALL_E4M3, NULL}, {"e5m2", -1, "E5M2 forward loses too much precision; use hybrid (E4M3 forward, E5M2 gradients) or e4m3"},
    {0}};
static const struct dt_enum_name fp8_scalings[] = {
    {"delayed", DT_FP8_DELAYED, NULL}, {"current", DT_FP8_CURRENT, NULL}, {0}};
static const struct dt_enum_name fp8_amax_algos[] = {
    {"max", DT_FP8_AMAX_MAX, NULL}, {"most_recent", DT_FP8_AMAX_MOST_RECENT, NULL}, {0}};

static const struct dt_enum_name devices[] = {
    {"auto", DT_DEVICE_AUTO, NULL}, {"cpu", DT_DEVICE_CPU, NULL}, {"cuda", DT_DEVICE_CUDA, NULL},
    {"gpu", DT_DEVICE_CUDA, NULL},  {0}};

/* Lightning's names and aliases ("32"->"32-true", "16"->"16-mixed", "bf16"->"bf16-mixed"). */
const struct dt_enum_name dt_precision_names[] = {
    {"32-true", DT_PREC_32_TRUE, NULL},
    {"32", DT_PREC_32_TRUE, NULL},
    {"16-mixed", DT_PREC_16_MIXED, NULL},
    {"16", DT_PREC_16_MIXED, NULL},
    {"bf16-mixed", DT_PREC_BF16_MIXED, NULL},
    {"bf16", DT_PREC_BF16_MIXED, NULL},
    {"bf16-true", DT_PREC_BF16_TRUE, NULL},
    {"fp8-mixed", DT_PREC_FP8_MIXED, NULL},
    {"transformer-engine", DT_PREC_FP8_MIXED, NULL},
    {"fp8", DT_PREC_FP8_MIXED, NULL},
    {"64", -1, "dtrun has no float64 training; use 32-true"},
    {"64-true", -1, "dtrun has no float64 training; use 32-true"},
    {"16-true", -1, "pure fp16 training diverges without fp32 master weights; use 16-mixed or bf16-true"},
    {0}};

const struct dt_enum_name dt_strategy_names[] = {
    {"auto", DT_STRAT_AUTO, NULL},   {"single", DT_STRAT_SINGLE, NULL}, {"ddp", DT_STRAT_DDP, NULL},
    {"fsdp", DT_STRAT_FSDP, NULL},   {"zero1", DT_STRAT_ZERO1, NULL},   {"zero2", DT_STRAT_ZERO2, NULL},
    {"zero3", DT_STRAT_ZERO3, NULL}, {"deepspeed", DT_STRAT_DEEPSPEED, NULL}, {0}};

const struct dt_enum_name dt_optim_names[] = {
    {"adamw", DT_OPTIM_ADAMW, NULL}, {"adam", DT_OPTIM_ADAM, NULL}, {"sgd", DT_OPTIM_SGD, NULL}, {0}};

/* DeepSpeed's class names are accepted too, so a scheduler copied from a JSON reads. */
const struct dt_enum_name dt_sched_names[] = {
    {"constant", DT_SCHED_CONSTANT, NULL},
    {"linear", DT_SCHED_LINEAR, NULL},
    {"cosine", DT_SCHED_COSINE, NULL},
    {"step", DT_SCHED_STEP, NULL},
    {"multistep", DT_SCHED_MULTISTEP, NULL},
    {"composite", DT_SCHED_COMPOSITE, NULL},
    {"warmup_lr", DT_SCHED_WARMUP_LR, NULL},
    {"WarmupLR", DT_SCHED_WARMUP_LR, NULL},
    {"warmup_decay_lr", DT_SCHED_WARMUP_DECAY_LR, NULL},
    {"WarmupDecayLR", DT_SCHED_WARMUP_DECAY_LR, NULL},
    {"warmup_cosine_lr", DT_SCHED_WARMUP_COSINE_LR, NULL},
    {"WarmupCosineLR", DT_SCHED_WARMUP_COSINE_LR, NULL},
    {"OneCycle", -1, "dtrun does not implement OneCycle; use cosine or warmup_cosine_lr"},
    {"LRRangeTest", -1, "dtrun does not implement LRRangeTest"},
    {0}};

const struct dt_enum_name dt_warmup_type_names[] = {
    {"log", DT_WARMUP_LOG, NULL}, {"linear", DT_WARMUP_LINEAR, NULL}, {0}};

static const struct dt_enum_name synth_kinds[] = {
    {"auto", DT_SYNTH_AUTO, NULL}, {"markov", DT_SYNTH_MARKOV, NULL}, {"teacher", DT_SYNTH_TEACHER, NULL}, {0}};

static const struct dt_enum_name mlp_tasks[] = {
    {"classification", DT_TASK_CLASSIFICATION, NULL}, {"regression", DT_TASK_REGRESSION, NULL}, {0}};

const struct dt_enum_name dt_dtype_names[] = {
    {"fp32", DT_DTYPE_FP32, NULL}, {"bf16", DT_DTYPE_BF16, NULL}, {"fp16", DT_DTYPE_FP16, NULL}, {0}};

const struct dt_enum_name dt_fsdp_sharding_names[] = {{"FULL_SHARD", DT_FSDP_FULL_SHARD, NULL},
                                                      {"SHARD_GRAD_OP", DT_FSDP_SHARD_GRAD_OP, NULL},
                                                      {"NO_SHARD", DT_FSDP_NO_SHARD, NULL},
                                                      {"HYBRID_SHARD", DT_FSDP_HYBRID_SHARD, NULL},
                                                      {"_HYBRID_SHARD_ZERO2", -1, "dtrun's HYBRID_SHARD is ZeRO-3 within a node; use it, or SHARD_GRAD_OP"},
                                                      {0}};

const struct dt_enum_name dt_offload_names[] = {
    {"none", DT_OFFLOAD_NONE, NULL},
    {"cpu", DT_OFFLOAD_CPU, NULL},
    {"nvme", -1, "dtrun offloads to host memory only; use \"cpu\""},
    {0}};

#define K(p, t, f, d, lo, hi, fl, h) {.path = p, .type = t, .offset = OFF(f), .def = d, .min = lo, .max = hi, .flags = fl, .help = h}
#define E(p, f, d, names_, fl, h) {.path = p, .type = DT_T_ENUM, .offset = OFF(f), .def = d, .names = names_, .flags = fl, .help = h}
#define D(p, f, d, u, h) {.path = p, .type = DT_T_DURATION, .offset = OFF(f), .def = d, .min = 0, .max = INF, .units = u, .help = h}

static const struct dt_key keys[] = {
    K("run.name", DT_T_STR, run.name, "gpt-tiny", 0, 0, 0, "name of the run (events, run directory)"),
    K("run.seed", DT_T_INT, run.seed, "1234", 0, 4294967295.0, 0, "seed of weights, data order and sampling"),
    D("run.max_duration", run.max_duration, "300ba", DT_UNITS_TRAIN, "length of training"),
    D("run.eval_interval", run.eval_interval, "100ba", DT_UNITS_INTERVAL, "validate every this long; 0ba: never"),
    K("run.dir", DT_T_STR, run.dir, "auto", 0, 0, DT_F_AUTO, "run directory; auto: runs/<run.name>"),

    E("model.type", model.type, "gpt", model_types, 0, "architecture"),
    K("model.n_layer", DT_T_INT, model.n_layer, "4", 1, 1024, 0, "transformer blocks"),
    K("model.n_head", DT_T_INT, model.n_head, "4", 1, 1024, 0, "attention heads (divides n_embd)"),
    K("model.n_embd", DT_T_INT, model.n_embd, "128", 1, 65536, 0, "embedding width"),
    K("model.vocab_size", DT_T_INT, model.vocab_size, "256", 2, 16777216, 0, "vocabulary size (256: bytes)"),
    K("model.seq_len", DT_T_INT, model.seq_len, "128", 1, 1048576, 0, "tokens per sequence"),
    K("model.preset", DT_T_STR, model.preset, NULL, 0, 0, DT_F_NULLABLE,
      "a named shape filling the model keys left unset: llama3-8b, llama3.2-1b, tinyllama-1.1b, llama-tiny"),
    K("model.n_kv_head", DT_T_INT, model.n_kv_head, "auto", 1, 1024, DT_F_AUTO,
      "llama: key/value heads, shared by n_head / n_kv_head query heads each (divides n_head); auto: n_head"),
    K("model.intermediate_size", DT_T_INT, model.intermediate_size, "auto", 1, 1048576, DT_F_AUTO,
      "llama: SwiGLU width; auto: Llama's rule, 2/3 of 4 n_embd rounded up to a multiple of 256"),
    K("model.max_position_embeddings", DT_T_INT, model.max_position_embeddings, "auto", 1, 16777216, DT_F_AUTO,
      "llama: the positions the model is made for (config.json's max_position_embeddings, which export writes); "
      "auto: what model.init_from or model.preset says, else model.seq_len"),
    K("model.norm_eps", DT_T_FLOAT, model.norm_eps, "1.0e-5", 1e-12, 1, 0, "llama: RMSNorm epsilon"),
    K("model.rope_theta", DT_T_FLOAT, model.rope_theta, "10000", 1, 1e9, 0, "llama: rotary embeddings' base"),
    E("model.rope_scaling.type", model.rope_scaling.type, "none", rope_types, 0,
      "llama: scaled rotary frequencies; llama3: Llama 3.1/3.2's (transformers' rope_type llama3)"),
    K("model.rope_scaling.factor", DT_T_FLOAT, model.rope_scaling.factor, "8", 1, 1e6, 0,
      "llama3 scaling: long wavelengths divided by this"),
    K("model.rope_scaling.low_freq_factor", DT_T_FLOAT, model.rope_scaling.low_freq_factor, "1", 1e-6, 1e6, 0,
      "llama3 scaling: wavelengths past original / this are divided by factor"),
    K("model.rope_scaling.high_freq_factor", DT_T_FLOAT, model.rope_scaling.high_freq_factor, "4", 1e-6, 1e6, 0,
      "llama3 scaling: wavelengths below original / this are kept; between, interpolated"),
    K("model.rope_scaling.original_max_position_embeddings", DT_T_INT,
      model.rope_scaling.original_max_position_embeddings, "8192", 1, 1048576, 0,
      "llama3 scaling: the context the model was pretrained on"),
    K("model.tie_embeddings", DT_T_BOOL, model.tie_embeddings, "auto", 0, 0, DT_F_AUTO,
      "the LM head is the token embedding; auto: gpt yes (always), llama no"),
    K("model.activation_checkpointing", DT_T_BOOL, model.activation_checkpointing, "false", 0, 0, 0,
      "recompute block internals in backward to save memory"),
    K("model.init_from", DT_T_STR, model.init_from, NULL, 0, 0, DT_F_NULLABLE,
      "initial weights: a Hugging Face Llama directory (config.json, safetensors) or llm.c's GPT-2 model file; "
      "the model keys left unset are taken from it; null: random init"),
    K("model.tokenizer", DT_T_STR, model.tokenizer, NULL, 0, 0, DT_F_NULLABLE,
      "the tokenizer of the model's ids (a tokenizer.json or its directory), which dtrun generate and "
      "events.sample_interval decode with; unset: the one prepare.json records beside data.train's shards, else "
      "model.init_from's tokenizer.json; none: bytes (vocabulary 256)"),
    {.path = "model.mlp.hidden", .type = DT_T_FLOATS, .offset = OFF(model.mlp.hidden), .def = "[64, 64]", .min = 1,
     .max = 65536, .help = "mlp: widths of the hidden layers (GELU between layers)"},
    E("model.mlp.task", model.mlp.task, "classification", mlp_tasks, 0,
      "mlp: classification (cross-entropy) or regression (mean squared error)"),
    K("model.mlp.in_features", DT_T_INT, model.mlp.in_features, "16", 1, 1048576, 0, "mlp: input features"),
    K("model.mlp.out_features", DT_T_INT, model.mlp.out_features, "4", 1, 1048576, 0,
      "mlp: classes (classification) or outputs (regression)"),

    K("data.train", DT_T_STR, data.train, NULL, 0, 0, DT_F_NULLABLE,
      "glob of llm.c token shards; null: the synthetic source"),
    K("data.val", DT_T_STR, data.val, NULL, 0, 0, DT_F_NULLABLE, "glob of validation shards"),
    K("data.micro_batch_size", DT_T_INT, data.micro_batch_size, "8", 1, 1048576, 0,
      "sequences per rank per forward/backward"),
    K("data.eval_batches", DT_T_INT, data.eval_batches, "8", 1, 1048576, 0,
      "micro-batches per rank in each validation"),
    E("data.synthetic.kind", data.synthetic.kind, "auto", synth_kinds, 0,
      "synthetic source when data.train is null; auto: markov for gpt, teacher for mlp"),
    K("data.synthetic.order", DT_T_INT, data.synthetic.order, "1", 1, 8, 0,
      "Markov order (context tokens); higher orders take many more steps to learn"),
    K("data.synthetic.seed", DT_T_INT, data.synthetic.seed, "3", 0, 4294967295.0, 0,
      "seed of the chain's transition table"),
    K("data.synthetic.alphabet", DT_T_INT, data.synthetic.alphabet, "32", 2, 65536, 0,
      "tokens the chain uses (<= model.vocab_size)"),
    K("data.synthetic.support", DT_T_INT, data.synthetic.support, "4", 1, 64, 0,
      "successors per context, with Zipf probabilities 1/(i+1)"),
    K("data.synthetic.noise", DT_T_FLOAT, data.synthetic.noise, "0.1", 0, 100, 0,
      "teacher, regression: std of the Gaussian noise on targets (best MSE: noise^2)"),

    E("optimizer.type", optimizer.type, "adamw", dt_optim_names, 0, "optimizer"),
    K("optimizer.lr", DT_T_FLOAT, optimizer.lr, "3.0e-3", 0, 10, DT_F_MIN_EXCL, "peak learning rate"),
    {.path = "optimizer.betas", .type = DT_T_FLOATS, .offset = OFF(optimizer.betas), .def = "[0.9, 0.95]", .min = 0,
     .max = 0.999999, .count = 2, .help = "Adam betas [beta1, beta2]"},
    K("optimizer.eps", DT_T_FLOAT, optimizer.eps, "1.0e-8", 0, 1, DT_F_MIN_EXCL, "Adam epsilon"),
    K("optimizer.weight_decay", DT_T_FLOAT, optimizer.weight_decay, "0.1", 0, 10, 0,
      "decoupled weight decay (not on biases, norms, embeddings)"),
    K("optimizer.momentum", DT_T_FLOAT, optimizer.momentum, "0.9", 0, 1, 0, "SGD momentum"),
    K("optimizer.nesterov", DT_T_BOOL, optimizer.nesterov, "false", 0, 0, 0, "SGD Nesterov momentum"),

    E("scheduler.type", scheduler.type, "cosine", dt_sched_names, 0, "learning-rate schedule"),
    D("scheduler.warmup", scheduler.warmup, "30ba", DT_UNITS_TRAIN, "linear warmup length (DeepSpeed: warmup_num_steps)"),
    {.path = "scheduler.total", .type = DT_T_DURATION, .offset = OFF(scheduler.total), .def = "auto", .min = 0,
     .max = INF, .units = DT_UNITS_TRAIN, .flags = DT_F_AUTO,
     .help = "schedule length (DeepSpeed: total_num_steps); auto: run.max_duration"},
    K("scheduler.min_lr_ratio", DT_T_FLOAT, scheduler.min_lr_ratio, "0.1", 0, 1, 0,
      "cosine/linear: final lr as a fraction of the peak"),
    E("scheduler.warmup_type", scheduler.warmup_type, "log", dt_warmup_type_names, 0, "DeepSpeed warmup curve"),
    K("scheduler.warmup_min_lr", DT_T_FLOAT, scheduler.warmup_min_lr, "0", 0, 10, 0,
      "WarmupLR/WarmupDecayLR: lr at step 0"),
    K("scheduler.warmup_max_lr", DT_T_FLOAT, scheduler.warmup_max_lr, "auto", 0, 10, DT_F_AUTO,
      "WarmupLR/WarmupDecayLR: lr after warmup; auto: optimizer.lr"),
    K("scheduler.warmup_min_ratio", DT_T_FLOAT, scheduler.warmup_min_ratio, "0", 0, 1, 0,
      "WarmupCosineLR: starting ratio of optimizer.lr"),
    K("scheduler.cos_min_ratio", DT_T_FLOAT, scheduler.cos_min_ratio, "1.0e-4", 0, 1, 0,
      "WarmupCosineLR: final ratio of optimizer.lr"),
    D("scheduler.step_size", scheduler.step_size, "100ba", DT_UNITS_TRAIN, "step: multiply the lr by gamma this often"),
    K("scheduler.gamma", DT_T_FLOAT, scheduler.gamma, "0.1", 0, 1, DT_F_MIN_EXCL, "step, multistep: lr factor"),
    {.path = "scheduler.milestones", .type = DT_T_FLOATS, .offset = OFF(scheduler.milestones), .def = "[100, 200]",
     .min = 0, .max = 1e15, .help = "multistep: optimizer steps where the lr is multiplied by gamma"},
    {.path = "scheduler.phases", .type = DT_T_PHASES, .offset = OFF(scheduler.phases),
     .def = "[{type: linear, start: 0.0, end: 1.0, length: 0.1}, {type: cosine, start: 1.0, end: 0.1, length: 0.9}]",
     .help = "composite: fvcore phases over the run, values as multiples of optimizer.lr"},

    E("compute.device", compute.device, "auto", devices, 0, "cpu, cuda, or auto (cuda when a GPU is visible)"),
    E("compute.precision", compute.precision, "32-true", dt_precision_names, 0, "Lightning precision name"),
    K("compute.num_devices", DT_T_INT, compute.num_devices, "auto", 1, 4096, DT_F_AUTO,
      "ranks per node; auto: what the scheduler gives"),
    K("compute.num_nodes", DT_T_INT, compute.num_nodes, "auto", 1, 65536, DT_F_AUTO,
      "nodes; auto: what the scheduler gives"),
    E("compute.strategy", compute.strategy, "auto", dt_strategy_names, 0, "auto: single on 1 rank, ddp on more"),
    K("compute.strategy_config.bucket_cap_mb", DT_T_FLOAT, compute.strategy_config.bucket_cap_mb, "25", 0, 65536,
      DT_F_MIN_EXCL, "ddp/zero/fsdp: gradients reduced at once, in MiB of fp32"),
    K("compute.strategy_config.config", DT_T_STR, compute.strategy_config.config, NULL, 0, 0, DT_F_NULLABLE,
      "deepspeed: path of the DeepSpeed JSON"),
    E("compute.strategy_config.sharding_strategy", compute.strategy_config.sharding_strategy, "FULL_SHARD",
      dt_fsdp_sharding_names, 0, "fsdp: FULL_SHARD (zero3), SHARD_GRAD_OP (zero2), NO_SHARD (ddp), HYBRID_SHARD"),
    K("compute.strategy_config.allgather_bucket_size", DT_T_INT, compute.strategy_config.allgather_bucket_size,
      "500000000", 1, 1e15, 0, "zero1/2: parameter elements all-gathered at a time after the step"),
    K("compute.strategy_config.prefetch_bucket_size", DT_T_INT, compute.strategy_config.prefetch_bucket_size, "auto",
      0, 1e15, DT_F_AUTO, "zero3: parameter elements gathered ahead of use; auto: 0.9 n_embd^2"),
    K("compute.strategy_config.param_persistence_threshold", DT_T_INT,
      compute.strategy_config.param_persistence_threshold, "auto", 0, 1e15, DT_F_AUTO,
      "zero3: units with fewer parameters stay whole on every rank; auto: 10 n_embd"),
    K("compute.strategy_config.max_live_parameters", DT_T_INT, compute.strategy_config.max_live_parameters, "0", 0,
      1e15, 0, "zero3: gathered parameters kept beyond those in use (0: none, as FSDP)"),
    K("compute.strategy_config.max_reuse_distance", DT_T_INT, compute.strategy_config.max_reuse_distance, "0", 0,
      1e15, 0, "zero3: a unit used again within this many parameters stays gathered"),
    K("compute.strategy_config.sub_group_size", DT_T_INT, compute.strategy_config.sub_group_size, "1000000", 1,
      1e15, 0, "the optimizer updates this many elements at a time (its fp32 workspace)"),
    K("compute.strategy_config.overlap_comm", DT_T_BOOL, compute.strategy_config.overlap_comm, "true", 0, 0, 0,
      "reduce gradients while backward runs"),
    E("compute.strategy_config.offload_optimizer", compute.strategy_config.offload_optimizer, "none",
      dt_offload_names, 0, "cpu: the optimizer state and fp32 master weights in host memory, stepped by the CPU "
      "(ZeRO-Offload)"),
    E("compute.strategy_config.offload_param", compute.strategy_config.offload_param, "none", dt_offload_names, 0,
      "cpu: zero3's 16-bit weights in host memory too, each unit's part copied up into its gather (with "
      "offload_optimizer)"),
    K("compute.gradient_accumulation_steps", DT_T_INT, compute.gradient_accumulation_steps, "1", 1, 1048576, 0,
      "micro-batches per optimizer step"),
    K("compute.gradient_clipping", DT_T_FLOAT, compute.gradient_clipping, "1.0", 0, 1e9, 0,
      "clip the global gradient norm to this; 0: off"),
    K("compute.comm_timeout", DT_T_SECONDS, compute.comm_timeout, "600s", 0.001, 604800, 0,
      "a collective slower than this ends the job"),
    E("compute.grad_reduce_dtype", compute.grad_reduce_dtype, "fp32", dt_dtype_names, 0,
      "dtype gradients travel in and are summed in (fp32: exact whatever order the collective adds in)"),
    K("compute.loss_scaler.loss_scale", DT_T_FLOAT, compute.loss_scaler.loss_scale, "0", 0, 1e30, 0,
      "16-mixed: 0 = dynamic, else a static scale"),
    K("compute.loss_scaler.initial_scale_power", DT_T_INT, compute.loss_scaler.initial_scale_power, "16", 0, 126, 0,
      "dynamic: start at 2^this"),
    K("compute.loss_scaler.loss_scale_window", DT_T_INT, compute.loss_scaler.loss_scale_window, "1000", 1, 1e9, 0,
      "dynamic: clean steps before the scale doubles"),
    K("compute.loss_scaler.hysteresis", DT_T_INT, compute.loss_scaler.hysteresis, "2", 1, 1e9, 0,
      "dynamic: overflows tolerated before the scale halves"),
    K("compute.loss_scaler.consecutive_hysteresis", DT_T_BOOL, compute.loss_scaler.consecutive_hysteresis, "false", 0,
      0, 0, "dynamic: refill hysteresis on every clean step"),
    K("compute.loss_scaler.min_loss_scale", DT_T_FLOAT, compute.loss_scaler.min_loss_scale, "1", 0, 1e30,
      DT_F_MIN_EXCL, "dynamic: lowest scale; overflowing there stops the run"),

    E("compute.fp8.format", compute.fp8.format, "hybrid", fp8_formats, 0,
      "fp8-mixed: hybrid (inputs and weights E4M3, gradients E5M2) or e4m3 (all E4M3)"),
    E("compute.fp8.scaling", compute.fp8.scaling, "delayed", fp8_scalings, 0,
      "fp8-mixed: delayed (scales from the amax history) or current (from each tensor's own amax)"),
    K("compute.fp8.amax_history_len", DT_T_INT, compute.fp8.amax_history_len, "1024", 1, 65536, 0,
      "fp8-mixed, delayed: optimizer steps of amaxes each scale is chosen from"),
    E("compute.fp8.amax_compute_algo", compute.fp8.amax_compute_algo, "max", fp8_amax_algos, 0,
      "fp8-mixed, delayed: max (the largest of the history) or most_recent (the last step's)"),
    K("compute.fp8.margin", DT_T_FLOAT, compute.fp8.margin, "0", 0, 64, 0,
      "fp8-mixed: scales lowered by 2^margin below what the amax allows"),

    K("checkpoint.dir", DT_T_STR, checkpoint.dir, "ckpt", 0, 0, DT_F_NULLABLE,
      "checkpoint directory (relative: under run.dir); null: no checkpoints"),
    D("checkpoint.interval", checkpoint.interval, "0ba", DT_UNITS_WALL,
      "save every this long (training time, or wall time: 30min, 2h, 600sec); 0ba: only at the end"),
    K("checkpoint.keep", DT_T_INT, checkpoint.keep, "3", 0, 1e6, 0,
      "newest checkpoints kept (and the one resumed from); 0: all"),
    K("checkpoint.resume", DT_T_STR, checkpoint.resume, "auto", 0, 0, 0,
      "auto (the newest valid checkpoint in checkpoint.dir, if any), none, or a checkpoint's path"),

    K("slurm.partition", DT_T_STR, slurm.partition, NULL, 0, 0, DT_F_NULLABLE,
      "dtrun submit: the partition; null: the cluster's default"),
    K("slurm.account", DT_T_STR, slurm.account, NULL, 0, 0, DT_F_NULLABLE, "dtrun submit: the account; null: yours"),
    K("slurm.qos", DT_T_STR, slurm.qos, NULL, 0, 0, DT_F_NULLABLE, "dtrun submit: the QOS; null: the default"),
    K("slurm.constraint", DT_T_STR, slurm.constraint, NULL, 0, 0, DT_F_NULLABLE,
      "dtrun submit: node features (--constraint); null: any node"),
    K("slurm.time", DT_T_STR, slurm.time, NULL, 0, 0, DT_F_NULLABLE,
      "dtrun submit: time limit as Slurm writes it (MM, HH:MM:SS, D-HH:MM); null: the partition's"),
    K("slurm.signal_grace", DT_T_SECONDS, slurm.signal_grace, "120s", 1, 65535, 0,
      "dtrun submit: SIGUSR1 this long before the time limit: save, then requeue"),
    K("slurm.requeue", DT_T_BOOL, slurm.requeue, "true", 0, 0, 0,
      "dtrun submit: requeue the job after a preemption or time-limit stop (it resumes)"),
    K("slurm.template", DT_T_STR, slurm.template, NULL, 0, 0, DT_F_NULLABLE,
      "dtrun submit: the sbatch script to fill in; null: templates/sbatch/single-node.sh or multi-node.sh"),
    K("slurm.extra", DT_T_STR, slurm.extra, NULL, 0, 0, DT_F_NULLABLE,
      "dtrun submit: more sbatch options, one #SBATCH line each, e.g. \"--exclusive --mail-type=END\""),

    K("events.jsonl", DT_T_STR, events.jsonl, "events.jsonl", 0, 0, DT_F_NULLABLE,
      "event log (relative: under run.dir); null: none"),
    K("events.prometheus", DT_T_STR, events.prometheus, NULL, 0, 0, DT_F_NULLABLE,
      "latest metrics for node_exporter's textfile collector, rewritten every events.interval (a .prom file; "
      "relative: under run.dir); null: none"),
    D("events.interval", events.interval, "10ba", DT_UNITS_TRAIN, "metrics every this long"),
    D("events.sample_interval", events.sample_interval, "0ba", DT_UNITS_INTERVAL,
      "generate a sample from the current weights every this long (llm.c's every 20 steps), printed and sent as a "
      "sample event; 0ba: never"),
    K("events.sample_prompt", DT_T_STR, events.sample_prompt, NULL, 0, 0, DT_F_NULLABLE,
      "the text a sample continues; null: the tokenizer's document token alone, as llm.c starts"),
    K("events.sample_tokens", DT_T_INT, events.sample_tokens, "64", 1, 1048576, 0,
      "tokens a sample generates at most (temperature 1, seed 1337 every time, as llm.c samples)"),
    K("events.wall_clock_breakdown", DT_T_BOOL, events.wall_clock_breakdown, "false", 0, 0, 0,
      "time forward/backward/comm/optimizer separately, and every kernel op"),
    K("events.peak_tflops", DT_T_FLOAT, events.peak_tflops, "0", 0, 1e6, 0,
      "peak TFLOP/s of one device, for MFU; 0: a GPU's from its name (H100, H200, A100, ...), else unknown (mfu null)"),
    K("events.webhook.url", DT_T_STR, events.webhook.url, NULL, 0, 0, DT_F_NULLABLE | DT_F_CREDENTIALS,
      "POST events here (http or https); null: off"),
    K("events.webhook.secret_env", DT_T_STR, events.webhook.secret_env, NULL, 0, 0, DT_F_NULLABLE,
      "environment variable holding the HMAC-SHA256 secret; null: unsigned"),
    K("events.webhook.headers", DT_T_STR, events.webhook.headers, NULL, 0, 0, DT_F_NULLABLE,
      "extra header lines \"Name: value\", ${VAR} taken from the environment"),
    K("events.webhook.batch", DT_T_INT, events.webhook.batch, "32", 1, 10000, 0,
      "most events per POST (a JSON array when more than 1)"),
    K("events.webhook.queue", DT_T_INT, events.webhook.queue, "1024", 1, 1e7, 0,
      "events held in memory before they go to the spool file"),
    K("events.webhook.connect_timeout", DT_T_SECONDS, events.webhook.connect_timeout, "5s", 0.001, 3600, 0,
      "time to connect"),
    K("events.webhook.timeout", DT_T_SECONDS, events.webhook.timeout, "10s", 0.001, 3600, 0, "time for a whole request"),
    K("events.webhook.backoff", DT_T_SECONDS, events.webhook.backoff, "500ms", 0.001, 3600, 0,
      "first retry delay, doubled per failure, with jitter"),
    K("events.webhook.max_backoff", DT_T_SECONDS, events.webhook.max_backoff, "30s", 0.001, 86400, 0,
      "longest retry delay (Retry-After included)"),
    K("events.webhook.flush_timeout", DT_T_SECONDS, events.webhook.flush_timeout, "10s", 0, 86400, 0,
      "at exit, send for at most this long; the rest stays spooled"),
    K("events.webhook.insecure", DT_T_BOOL, events.webhook.insecure, "false", 0, 0, 0,
      "skip TLS certificate verification (warned about)"),
};

const struct dt_schema dt_config_schema = {"dtrun config", keys, sizeof keys / sizeof keys[0]};
