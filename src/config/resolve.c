/*
 * resolve.c - see resolve.h. All contradictions found are reported together.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/diag.h"
#include "config/resolve.h"
#include "config/resolve_impl.h"
#include "config/schema.h"
#include "config/suggest.h"
#include "config/timestr.h"
#include "core/error.h"
#include "core/log.h"

static struct dt_origin *origin(struct dt_config *cfg, const char *path)
{
    return (struct dt_origin *)dt_config_origin(cfg, path);
}

static bool user_set(const struct dt_origin *o)
{
    return (o->kind == DT_ORIGIN_FILE || o->kind == DT_ORIGIN_OVERRIDE || o->kind == DT_ORIGIN_DEEPSPEED) &&
           !o->is_auto;
}

static void set_autov(struct dt_config *cfg, const char *path, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void set_autov(struct dt_config *cfg, const char *path, const char *fmt, va_list ap)
{
    struct dt_origin *o = origin(cfg, path);
    *o = (struct dt_origin){.kind = DT_ORIGIN_AUTO};
    vsnprintf(o->note, sizeof o->note, fmt, ap);
}

static void set_auto(struct dt_config *cfg, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_auto(struct dt_config *cfg, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_autov(cfg, path, fmt, ap);
    va_end(ap);
}

/* Where a value came from, for messages: "config.yaml:3:5" or "default". */
static const char *where(struct dt_config *cfg, const char *path, char *buf, size_t n)
{
    const struct dt_origin *o = origin(cfg, path);
    if (o->kind == DT_ORIGIN_DEFAULT) snprintf(buf, n, "default");
    else if (o->kind == DT_ORIGIN_AUTO) snprintf(buf, n, "auto");
    else dt_loc_str(o->loc, buf, n);
    return buf;
}

static struct dt_loc loc_of(struct dt_config *cfg, const char *path)
{
    const struct dt_origin *o = origin(cfg, path);
    if (o->kind == DT_ORIGIN_FILE || o->kind == DT_ORIGIN_OVERRIDE || o->kind == DT_ORIGIN_DEEPSPEED) return o->loc;
    return (struct dt_loc){"dtrun", 0, 0};
}

/* the same, for the other passes (resolve_impl.h) */
bool dt_resolve_user_set(const struct dt_config *cfg, const char *path)
{
    return user_set(dt_config_origin(cfg, path));
}

void dt_resolve_set_auto(struct dt_config *cfg, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_autov(cfg, path, fmt, ap);
    va_end(ap);
}

const char *dt_resolve_where(const struct dt_config *cfg, const char *path, char *buf, size_t n)
{
    return where((struct dt_config *)cfg, path, buf, n);
}

struct dt_loc dt_resolve_loc(const struct dt_config *cfg, const char *path)
{
    return loc_of((struct dt_config *)cfg, path);
}

static void resolve_world(struct dt_config *cfg, const struct dt_geometry *geo, struct dt_diags *d)
{
    if (cfg->compute.device == DT_DEVICE_AUTO) {
        cfg->compute.device = geo->gpus > 0 ? DT_DEVICE_CUDA : DT_DEVICE_CPU;
        if (geo->gpus > 0) set_auto(cfg, "compute.device", "%d GPU%s visible", geo->gpus, geo->gpus > 1 ? "s" : "");
        else set_auto(cfg, "compute.device", "%s", geo->gpu_note[0] ? geo->gpu_note : "no GPU visible");
    }
    if (origin(cfg, "compute.num_nodes")->is_auto) {
        cfg->compute.num_nodes = geo->nodes > 0 ? geo->nodes : 1;
        set_auto(cfg, "compute.num_nodes", "%s", geo->nodes > 0 ? geo->source : "not in a Slurm allocation");
    }
    if (origin(cfg, "compute.num_devices")->is_auto) {
        if (cfg->compute.device == DT_DEVICE_CUDA && geo->gpus > 0) {
            cfg->compute.num_devices = geo->gpus;
            set_auto(cfg, "compute.num_devices", "GPUs visible on this node");
        } else if (geo->tasks_per_node > 0) {
            cfg->compute.num_devices = geo->tasks_per_node;
            set_auto(cfg, "compute.num_devices", "%s", geo->source);
        } else {
            cfg->compute.num_devices = 1;
            set_auto(cfg, "compute.num_devices", "one process (not in a Slurm allocation)");
        }
    }
    cfg->resolved.nodes = (int)cfg->compute.num_nodes;
    cfg->resolved.devices_per_node = (int)cfg->compute.num_devices;
    cfg->resolved.world = (int)(cfg->compute.num_nodes * cfg->compute.num_devices);
    char w1[64], w2[64];
    if (geo->ranks == 1 && cfg->resolved.world == 1)
        return;
    if (geo->ranks > 1 && !geo->even && cfg->resolved.world != geo->ranks)
        dt_diag(d, loc_of(cfg, "compute.num_devices"), "start the step with --ntasks-per-node so every node runs "
                "the same number of ranks", "the step spreads %d ranks unevenly over %d nodes (%s)", geo->ranks,
                geo->nodes, geo->source);
    else if (geo->ranks == 1 && cfg->resolved.world > 1)
        dt_diag(d, loc_of(cfg, user_set(origin(cfg, "compute.num_nodes")) ? "compute.num_nodes" : "compute.num_devices"),
                "start the ranks: `dtrun -n N CONFIG` on this machine, `srun --mpi=pmix dtrun CONFIG` in Slurm",
                "compute.num_nodes %lld (%s) x compute.num_devices %lld (%s) = %d ranks, but dtrun was started as "
                "one process", (long long)cfg->compute.num_nodes, where(cfg, "compute.num_nodes", w1, sizeof w1),
                (long long)cfg->compute.num_devices, where(cfg, "compute.num_devices", w2, sizeof w2),
                cfg->resolved.world);
    else if (geo->ranks > 1 && (cfg->resolved.world != geo->ranks || cfg->compute.num_nodes != geo->nodes))
        dt_diag(d, loc_of(cfg, user_set(origin(cfg, "compute.num_nodes")) ? "compute.num_nodes" : "compute.num_devices"),
                "remove compute.num_nodes and compute.num_devices (auto takes the step's), or start the step with "
                "matching -N and --ntasks-per-node",
                "compute.num_nodes %lld (%s) x compute.num_devices %lld (%s) = %d ranks, but %s started %d rank%s on "
                "%d node%s", (long long)cfg->compute.num_nodes, where(cfg, "compute.num_nodes", w1, sizeof w1),
                (long long)cfg->compute.num_devices, where(cfg, "compute.num_devices", w2, sizeof w2),
                cfg->resolved.world, geo->source, geo->ranks, geo->ranks > 1 ? "s" : "", geo->nodes,
                geo->nodes > 1 ? "s" : "");
    else if (geo->ranks == 0 && geo->nodes > 0 && cfg->compute.num_nodes > geo->nodes)
        dt_diag(d, loc_of(cfg, "compute.num_nodes"), "lower compute.num_nodes, or ask sbatch/salloc for more nodes",
                "compute.num_nodes is %lld, but the allocation has %d node%s (%s)", (long long)cfg->compute.num_nodes,
                geo->nodes, geo->nodes > 1 ? "s" : "", geo->source);
}

static void resolve_strategy(struct dt_config *cfg, struct dt_diags *d)
{
    int s = cfg->compute.strategy;
    char w[256];
    if (s != DT_STRAT_DEEPSPEED && cfg->compute.strategy_config.config) {
        dt_diag(d, loc_of(cfg, "compute.strategy_config.config"),
                "set compute.strategy: deepspeed to use the JSON, or remove strategy_config.config",
                "compute.strategy_config.config names a DeepSpeed JSON but compute.strategy is not deepspeed (%s)",
                where(cfg, "compute.strategy", w, sizeof w));
        return;
    }
    if (s == DT_STRAT_AUTO) {
        s = cfg->resolved.world > 1 ? DT_STRAT_DDP : DT_STRAT_SINGLE;
        cfg->compute.strategy = s;
        set_auto(cfg, "compute.strategy", "world size %d", cfg->resolved.world);
    }
    if (s == DT_STRAT_SINGLE && cfg->resolved.world > 1) {
        dt_diag(d, loc_of(cfg, "compute.strategy"), "use ddp (or auto) for more than one rank",
                "compute.strategy single runs one rank, but the world has %d (num_nodes %lld x num_devices %lld)",
                cfg->resolved.world, (long long)cfg->compute.num_nodes, (long long)cfg->compute.num_devices);
    }
    if (s == DT_STRAT_DEEPSPEED && !cfg->compute.strategy_config.config)
        dt_diag(d, loc_of(cfg, "compute.strategy"), "name the JSON: compute.strategy_config.config: ds_config.json",
                "compute.strategy deepspeed needs compute.strategy_config.config");
    if (s != DT_STRAT_FSDP && cfg->compute.strategy_config.sharding_strategy != DT_FSDP_FULL_SHARD)
        dt_diag(d, loc_of(cfg, "compute.strategy_config.sharding_strategy"),
                "set compute.strategy: fsdp, or remove sharding_strategy (zero1/2/3 name their stage)",
                "compute.strategy_config.sharding_strategy %s is FSDP's, but compute.strategy is %s (%s)",
                dt_enum_str(dt_fsdp_sharding_names, cfg->compute.strategy_config.sharding_strategy),
                dt_enum_str(dt_strategy_names, s), where(cfg, "compute.strategy", w, sizeof w));
    cfg->resolved.strategy = s;
    static const int fsdp[] = {[DT_FSDP_FULL_SHARD] = DT_STRAT_ZERO3, [DT_FSDP_SHARD_GRAD_OP] = DT_STRAT_ZERO2,
                               [DT_FSDP_NO_SHARD] = DT_STRAT_DDP, [DT_FSDP_HYBRID_SHARD] = DT_STRAT_ZERO3};
    if (s == DT_STRAT_FSDP) {
        cfg->resolved.strategy = fsdp[cfg->compute.strategy_config.sharding_strategy];
        cfg->resolved.hybrid = cfg->compute.strategy_config.sharding_strategy == DT_FSDP_HYBRID_SHARD;
    }
}

/* The ZeRO stage that runs; one rank has nothing to share, whatever the strategy. */
static void resolve_stage(struct dt_config *cfg)
{
    int s = cfg->resolved.strategy;
    cfg->resolved.stage = s == DT_STRAT_ZERO1 ? 1 : s == DT_STRAT_ZERO2 ? 2 : s == DT_STRAT_ZERO3 ? 3 : 0;
    /* one rank has nothing to share, unless its weights live on the host (offload_param), which
     * stage 3 fetches to the device unit by unit */
    bool host_weights = cfg->resolved.stage == 3 && cfg->compute.strategy_config.offload_param == DT_OFFLOAD_CPU;
    if (cfg->resolved.world == 1 && !host_weights) {
        cfg->resolved.strategy = DT_STRAT_SINGLE;
        cfg->resolved.stage = 0;
        cfg->resolved.hybrid = false;
    }
}

/* Hugging Face's rules for DeepSpeed's "auto" (REFERENCE.md B2, phase 2): h = the model's width. */
static void resolve_zero(struct dt_config *cfg)
{
    struct dt_strategy_config *sc = &cfg->compute.strategy_config;
    int64_t h = cfg->model.n_embd;
    if (cfg->model.type == DT_MODEL_MLP)
        for (int i = 0; i < cfg->model.mlp.hidden.n; i++)
            if ((int64_t)cfg->model.mlp.hidden.v[i] > h || i == 0) h = (int64_t)cfg->model.mlp.hidden.v[i];
    if (origin(cfg, "compute.strategy_config.prefetch_bucket_size")->is_auto) {
        sc->prefetch_bucket_size = (int64_t)(0.9 * (double)h * (double)h);
        set_auto(cfg, "compute.strategy_config.prefetch_bucket_size", "0.9 x %lld^2 (the model's width)",
                 (long long)h);
    }
    if (origin(cfg, "compute.strategy_config.param_persistence_threshold")->is_auto) {
        sc->param_persistence_threshold = 10 * h;
        set_auto(cfg, "compute.strategy_config.param_persistence_threshold", "10 x %lld (the model's width)",
                 (long long)h);
    }
}

static void resolve_schedule(struct dt_config *cfg)
{
    if (origin(cfg, "scheduler.total")->is_auto) {
        cfg->scheduler.total = cfg->run.max_duration;
        set_auto(cfg, "scheduler.total", "run.max_duration");
    }
    if (origin(cfg, "scheduler.warmup_max_lr")->is_auto) {
        cfg->scheduler.warmup_max_lr = cfg->optimizer.lr;
        set_auto(cfg, "scheduler.warmup_max_lr", "optimizer.lr");
    }
    if (origin(cfg, "run.dir")->is_auto) {
        size_t n = strlen(cfg->run.name) + 6;
        char *dir = malloc(n);
        if (dir) {
            snprintf(dir, n, "runs/%s", cfg->run.name);
            free(cfg->run.dir);
            cfg->run.dir = dir;
            set_auto(cfg, "run.dir", "runs/<run.name>");
        }
    }
}

/* The shapes users know by name (Hugging Face's config.json of each), and a tiny one for laptops and
 * tests. The sequence length is what a run trains on, the model's own context at most. */
static const struct preset {
    const char *name;
    int64_t n_layer, n_head, n_kv_head, n_embd, intermediate_size, vocab_size, seq_len, max_position;
    double norm_eps, rope_theta;
    bool tie;
    double rope_factor; /* Llama 3.1's scaling (low 1, high 4, original 8192); 0: none */
} presets[] = {
    {"llama3-8b", 32, 32, 8, 4096, 14336, 128256, 8192, 8192, 1e-5, 500000, false, 0},
    {"llama3.2-1b", 16, 32, 8, 2048, 8192, 128256, 8192, 131072, 1e-5, 500000, true, 32},
    {"tinyllama-1.1b", 22, 32, 4, 2048, 5632, 32000, 2048, 2048, 1e-5, 10000, false, 0},
    {"llama-tiny", 4, 4, 2, 128, 384, 256, 128, 128, 1e-5, 10000, false, 0},
};

/* key was filled from model.init_from */
static bool from_file(struct dt_config *cfg, const char *key)
{
    const struct dt_origin *o = origin(cfg, key);
    return o->kind == DT_ORIGIN_AUTO && !strncmp(o->note, "model.init_from ", 16);
}

static void preset_disagrees(struct dt_config *cfg, struct dt_diags *d, const char *key, const char *preset)
{
    size_t i;
    const struct dt_key *k = dt_schema_find(&dt_config_schema, key, &i);
    char v[64];
    dt_diag(d, loc_of(cfg, "model.preset"), "drop model.preset: model.init_from fixes the shape",
            "model.preset %s does not describe model.init_from %s: %s is %s there", preset, cfg->model.init_from, key,
            dt_value_format(k, DT_FIELD(cfg, k), v, sizeof v));
}

/* model.preset fills every model key the user left unset, each marked auto with the preset's name */
static void resolve_preset(struct dt_config *cfg, struct dt_diags *d)
{
    if (!cfg->model.preset) return;
    const char *names[sizeof presets / sizeof presets[0]];
    const struct preset *p = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        names[i] = presets[i].name;
        if (!strcmp(cfg->model.preset, presets[i].name)) p = &presets[i];
    }
    if (!p) {
        const char *near = dt_suggest(cfg->model.preset, names, sizeof names / sizeof names[0]);
        char hint[160];
        if (near) snprintf(hint, sizeof hint, "did you mean '%s'?", near);
        else snprintf(hint, sizeof hint, "use %s, %s, %s or %s", names[0], names[1], names[2], names[3]);
        dt_diag(d, loc_of(cfg, "model.preset"), hint, "model.preset '%s' is not a known shape", cfg->model.preset);
        return;
    }
    if (user_set(origin(cfg, "model.type")) && cfg->model.type != DT_MODEL_LLAMA) {
        char w1[256], w2[256];
        dt_diag(d, loc_of(cfg, "model.preset"), "drop model.type (the preset sets llama), or drop model.preset",
                "model.preset %s (%s) is a Llama shape, but model.type is %s (%s)", p->name,
                where(cfg, "model.preset", w1, sizeof w1), cfg->model.type == DT_MODEL_GPT ? "gpt" : "mlp",
                where(cfg, "model.type", w2, sizeof w2));
        return;
    }
    /* a key model.init_from filled (it runs first) must agree: the file is the model, the preset a name */
#define FILL(key, field, val)                                                                                  \
    if (from_file(cfg, key)) {                                                                                 \
        if (cfg->model.field != (val)) preset_disagrees(cfg, d, key, p->name);                                \
    } else if (!user_set(origin(cfg, key))) {                                                                  \
        cfg->model.field = (val);                                                                              \
        set_auto(cfg, key, "model.preset %s", p->name);                                                        \
    }
    FILL("model.type", type, DT_MODEL_LLAMA);
    FILL("model.n_layer", n_layer, p->n_layer);
    FILL("model.n_head", n_head, p->n_head);
    FILL("model.n_kv_head", n_kv_head, p->n_kv_head);
    FILL("model.n_embd", n_embd, p->n_embd);
    FILL("model.intermediate_size", intermediate_size, p->intermediate_size);
    FILL("model.vocab_size", vocab_size, p->vocab_size);
    FILL("model.seq_len", seq_len, p->seq_len);
    FILL("model.max_position_embeddings", max_position_embeddings, p->max_position);
    FILL("model.norm_eps", norm_eps, p->norm_eps);
    FILL("model.rope_theta", rope_theta, p->rope_theta);
    FILL("model.tie_embeddings", tie_embeddings, p->tie);
    FILL("model.rope_scaling.type", rope_scaling.type, p->rope_factor > 0 ? DT_ROPE_LLAMA3 : DT_ROPE_NONE);
    if (p->rope_factor > 0) {
        FILL("model.rope_scaling.factor", rope_scaling.factor, p->rope_factor);
        FILL("model.rope_scaling.low_freq_factor", rope_scaling.low_freq_factor, 1.0);
        FILL("model.rope_scaling.high_freq_factor", rope_scaling.high_freq_factor, 4.0);
        FILL("model.rope_scaling.original_max_position_embeddings", rope_scaling.original_max_position_embeddings,
             8192);
    }
#undef FILL
}

/* Llama's keys: their autos, and the shapes its kernels take (a GPT's head is always tied; an MLP
 * reads none of them, so its config.yaml, which leaves them out, reads back as the run had them) */
static void resolve_llama(struct dt_config *cfg, struct dt_diags *d)
{
    char w1[256], w2[256];
    bool tie_auto = origin(cfg, "model.tie_embeddings")->is_auto;
    if (cfg->model.type == DT_MODEL_GPT) {
        if (tie_auto) {
            cfg->model.tie_embeddings = true;
            set_auto(cfg, "model.tie_embeddings", "model.type gpt");
        } else if (!cfg->model.tie_embeddings) {
            dt_diag(d, loc_of(cfg, "model.tie_embeddings"), "leave it auto, or use model.type: llama",
                    "model.tie_embeddings false: GPT-2's LM head is always its token embedding");
        }
    }
    if (cfg->model.type != DT_MODEL_LLAMA) return;
    if (origin(cfg, "model.n_kv_head")->is_auto) {
        cfg->model.n_kv_head = cfg->model.n_head;
        set_auto(cfg, "model.n_kv_head", "model.n_head (multi-head attention)");
    }
    if (origin(cfg, "model.intermediate_size")->is_auto) {
        int64_t h = 2 * (4 * cfg->model.n_embd) / 3;
        cfg->model.intermediate_size = (h + 255) / 256 * 256;
        set_auto(cfg, "model.intermediate_size", "2/3 x 4 x %lld rounded up to 256", (long long)cfg->model.n_embd);
    }
    if (origin(cfg, "model.max_position_embeddings")->is_auto) {
        cfg->model.max_position_embeddings = cfg->model.seq_len;
        set_auto(cfg, "model.max_position_embeddings", "model.seq_len");
    }
    if (tie_auto) {
        cfg->model.tie_embeddings = false;
        set_auto(cfg, "model.tie_embeddings", "model.type llama");
    }
    if (cfg->model.n_head % cfg->model.n_kv_head != 0)
        dt_diag(d, loc_of(cfg, "model.n_kv_head"), "make n_head a multiple of n_kv_head (1: multi-query)",
                "model.n_head %lld (%s) is not divisible by model.n_kv_head %lld (%s)", (long long)cfg->model.n_head,
                where(cfg, "model.n_head", w1, sizeof w1), (long long)cfg->model.n_kv_head,
                where(cfg, "model.n_kv_head", w2, sizeof w2));
    if (cfg->model.rope_scaling.type == DT_ROPE_LLAMA3 &&
        cfg->model.rope_scaling.low_freq_factor >= cfg->model.rope_scaling.high_freq_factor)
        dt_diag(d, loc_of(cfg, "model.rope_scaling.low_freq_factor"), "Llama 3.1 uses 1 and 4",
                "model.rope_scaling.low_freq_factor %g is not below high_freq_factor %g: no band to interpolate",
                cfg->model.rope_scaling.low_freq_factor, cfg->model.rope_scaling.high_freq_factor);
    int64_t hs = cfg->model.n_head ? cfg->model.n_embd / cfg->model.n_head : 0;
    if (cfg->model.n_embd % cfg->model.n_head == 0 && hs % 2)
        dt_diag(d, loc_of(cfg, "model.n_embd"), "choose n_embd and n_head so that n_embd / n_head is even",
                "model.n_embd %lld / model.n_head %lld = head size %lld, which is odd: rotary embeddings turn pairs "
                "of a head's channels", (long long)cfg->model.n_embd, (long long)cfg->model.n_head, (long long)hs);
}

static void check_model(struct dt_config *cfg, struct dt_diags *d)
{
    char w1[256], w2[256];
    if (cfg->data.synthetic.kind == DT_SYNTH_AUTO) {
        cfg->data.synthetic.kind = cfg->model.type == DT_MODEL_MLP ? DT_SYNTH_TEACHER : DT_SYNTH_MARKOV;
        set_auto(cfg, "data.synthetic.kind", "model.type %s",
                 cfg->model.type == DT_MODEL_MLP ? "mlp" : cfg->model.type == DT_MODEL_LLAMA ? "llama" : "gpt");
    }
    bool wants_tokens = cfg->model.type != DT_MODEL_MLP;
    if (!cfg->data.train && wants_tokens != (cfg->data.synthetic.kind == DT_SYNTH_MARKOV))
        dt_diag(d, loc_of(cfg, "data.synthetic.kind"), "gpt trains on markov, mlp on teacher (or leave kind: auto)",
                "data.synthetic.kind %s does not feed model.type %s", wants_tokens ? "teacher" : "markov",
                wants_tokens ? (cfg->model.type == DT_MODEL_LLAMA ? "llama" : "gpt") : "mlp");
    if (cfg->model.type == DT_MODEL_MLP) {
        if (cfg->data.train)
            dt_diag(d, loc_of(cfg, "data.train"), "train an mlp on the synthetic teacher (data.train: null)",
                    "model.type mlp reads features, not token shards");
        const struct dt_floats *h = &cfg->model.mlp.hidden;
        for (int i = 0; i < h->n; i++)
            if (h->v[i] != (double)(int64_t)h->v[i])
                dt_diag(d, loc_of(cfg, "model.mlp.hidden"), "give whole numbers of units",
                        "model.mlp.hidden item %d is %g, not a whole number", i + 1, h->v[i]);
        if (cfg->model.mlp.task == DT_TASK_CLASSIFICATION && cfg->model.mlp.out_features < 2)
            dt_diag(d, loc_of(cfg, "model.mlp.out_features"), "use 2 or more classes, or task: regression",
                    "model.mlp.out_features %lld: classification needs at least 2 classes",
                    (long long)cfg->model.mlp.out_features);
    }
    if (cfg->model.type != DT_MODEL_MLP && cfg->model.n_embd % cfg->model.n_head != 0)
        dt_diag(d, loc_of(cfg, "model.n_embd"), "make n_embd a multiple of n_head",
                "model.n_embd %lld (%s) is not divisible by model.n_head %lld (%s)", (long long)cfg->model.n_embd,
                where(cfg, "model.n_embd", w1, sizeof w1), (long long)cfg->model.n_head,
                where(cfg, "model.n_head", w2, sizeof w2));
}

/* fp8-mixed: the linear layers of a transformer (an MLP's are its whole model, and its last one the
 * loss's input, which Transformer Engine's recipes keep in 16 bits); compute.fp8's keys mean nothing
 * under another precision, so setting one there to other than its default is a mistake worth saying
 * (its default is what `dtrun check` prints, and that must read back) */
static void check_fp8(struct dt_config *cfg, struct dt_diags *d)
{
    static const char *const keys[] = {"compute.fp8.format", "compute.fp8.scaling", "compute.fp8.amax_history_len",
                                       "compute.fp8.amax_compute_algo", "compute.fp8.margin"};
    const struct dt_fp8_config *f = &cfg->compute.fp8;
    bool other[] = {f->format != DT_FP8_HYBRID, f->scaling != DT_FP8_DELAYED, f->amax_history_len != 1024,
                    f->amax_compute_algo != DT_FP8_AMAX_MAX, f->margin != 0};
    char w[256];
    if (cfg->compute.precision != DT_PREC_FP8_MIXED) {
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            if (other[i] && user_set(origin(cfg, keys[i])))
                dt_diag(d, loc_of(cfg, keys[i]), "set compute.precision: fp8-mixed, or remove the key",
                        "%s (%s) configures fp8-mixed, and compute.precision is %s", keys[i],
                        where(cfg, keys[i], w, sizeof w), dt_enum_str(dt_precision_names, cfg->compute.precision));
        return;
    }
    if (cfg->model.type == DT_MODEL_MLP) {
        dt_diag(d, loc_of(cfg, "compute.precision"), "use bf16-mixed for an mlp", "compute.precision fp8-mixed (%s) "
                "quantises a transformer's linear layers, and model.type is mlp",
                where(cfg, "compute.precision", w, sizeof w));
        return;
    }
    /* cuBLASLt's FP8 gemms take every dimension in multiples of 16: the rows and each quantised layer's
     * widths. Refused here, where `dtrun check` on a login node sees it, not at the GPU's first step
     * (the CPU's reference would take any shape, and a config runs the same on both) */
    int64_t B = cfg->data.micro_batch_size, T = cfg->model.seq_len, C = cfg->model.n_embd;
    char w2[256];
    if (B * T % 16) {
        const char *at = user_set(origin(cfg, "data.micro_batch_size")) ? "data.micro_batch_size" : "model.seq_len";
        dt_diag(d, loc_of(cfg, at), "make data.micro_batch_size x model.seq_len a multiple of 16, or use bf16-mixed",
                "compute.precision fp8-mixed: data.micro_batch_size %lld (%s) x model.seq_len %lld (%s) is %lld "
                "rows, not a multiple of 16 (the GPU's FP8 gemms take every dimension in multiples of 16)",
                (long long)B, where(cfg, "data.micro_batch_size", w, sizeof w), (long long)T,
                where(cfg, "model.seq_len", w2, sizeof w2), (long long)(B * T));
    }
    bool llama = cfg->model.type == DT_MODEL_LLAMA && cfg->model.n_head > 0;
    /* each width, the keys it comes from: the error is pinned to the first one the user set */
    const struct {
        const char *what, *keys[3];
        int64_t width;
    } widths[] = {
        {"model.n_embd", {"model.n_embd", "model.preset", "model.init_from"}, C},
        {"model.intermediate_size", {"model.intermediate_size", "model.preset", "model.init_from"},
         llama ? cfg->model.intermediate_size : 0},
        {"the qkv projection's width n_embd + 2 n_kv_head n_embd / n_head",
         {"model.n_kv_head", "model.n_head", "model.n_embd"},
         llama ? C + 2 * cfg->model.n_kv_head * (C / cfg->model.n_head) : 0},
    };
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        if (widths[i].width % 16 == 0) continue;
        const char *at = widths[i].keys[0];
        for (int k = 2; k >= 0; k--)
            if (user_set(origin(cfg, widths[i].keys[k]))) at = widths[i].keys[k];
        dt_diag(d, loc_of(cfg, at), "use widths in multiples of 16 under fp8-mixed, or bf16-mixed",
                "compute.precision fp8-mixed: %s is %lld (%s%s%s), not a multiple of 16 (the GPU's FP8 gemms take "
                "every dimension in multiples of 16)", widths[i].what, (long long)widths[i].width,
                strcmp(at, widths[i].what) ? at : "", strcmp(at, widths[i].what) ? ": " : "",
                where(cfg, at, w2, sizeof w2));
    }
}

/* ZeRO-Offload: the optimizer's state and fp32 master weights on the host (any stage, any device),
 * and under zero3 the 16-bit weights too; what it cannot carry is refused by name */
static void check_offload(struct dt_config *cfg, struct dt_diags *d)
{
    const struct dt_strategy_config *sc = &cfg->compute.strategy_config;
    char w[256];
    bool opt = sc->offload_optimizer == DT_OFFLOAD_CPU;
    if (sc->offload_param == DT_OFFLOAD_CPU && cfg->resolved.strategy != DT_STRAT_ZERO3)
        dt_diag(d, loc_of(cfg, "compute.strategy_config.offload_param"), "set compute.strategy: zero3 (or fsdp), or "
                "offload_param: none (offload_optimizer: cpu moves 12 of a parameter's 16 bytes at any stage)",
                "compute.strategy_config.offload_param: cpu (%s) keeps zero3's weights on the host, fetched to the "
                "device unit by unit, and this run is %s", where(cfg, "compute.strategy_config.offload_param", w, sizeof w),
                dt_enum_str(dt_strategy_names, cfg->resolved.strategy));
    else if (sc->offload_param == DT_OFFLOAD_CPU && !opt)
        dt_diag(d, loc_of(cfg, "compute.strategy_config.offload_param"), "set offload_optimizer: cpu too, as "
                "DeepSpeed's ZeRO-Infinity configs do", "compute.strategy_config.offload_param: cpu (%s): the weights "
                "on the host are updated there, by the offloaded optimizer, and offload_optimizer is none",
                where(cfg, "compute.strategy_config.offload_param", w, sizeof w));
    if (opt && cfg->compute.precision == DT_PREC_BF16_TRUE)
        dt_diag(d, loc_of(cfg, "compute.strategy_config.offload_optimizer"), "use bf16-mixed (fp32 master weights, on "
                "the host when offloaded), or offload_optimizer: none",
                "compute.strategy_config.offload_optimizer: cpu (%s) steps fp32 master weights on the host, and "
                "compute.precision bf16-true keeps none", where(cfg, "compute.strategy_config.offload_optimizer", w, sizeof w));
}

static void check_data(struct dt_config *cfg, struct dt_diags *d)
{
    static const char *const synth[] = {"data.synthetic.kind", "data.synthetic.order", "data.synthetic.seed",
                                        "data.synthetic.alphabet", "data.synthetic.support"};
    char w1[256], w2[256];
    if (cfg->data.train) {
        for (size_t i = 0; i < sizeof synth / sizeof synth[0]; i++) {
            if (!user_set(origin(cfg, synth[i]))) continue;
            dt_diag(d, loc_of(cfg, synth[i]), "keep data.train for token shards or data.synthetic for the built-in "
                    "source, not both",
                    "%s (%s) contradicts data.train (%s)", synth[i], where(cfg, synth[i], w1, sizeof w1),
                    where(cfg, "data.train", w2, sizeof w2));
            break;
        }
        if (!cfg->data.val && cfg->run.eval_interval.value > 0) {
            if (user_set(origin(cfg, "run.eval_interval"))) {
                dt_diag(d, loc_of(cfg, "run.eval_interval"), "set data.val, or run.eval_interval: 0ba",
                        "run.eval_interval asks for validation but data.val is not set");
            } else {
                /* nothing to validate on: the default says so, and `dtrun check` prints what reads back
                 * (100ba printed there was refused as asking for validation: #16, tests/fuzz/fuzz_config.c) */
                cfg->run.eval_interval = (struct dt_duration){0, DT_TU_BA};
                set_auto(cfg, "run.eval_interval", "data.val is not set, so no validation");
            }
        }
    } else {
        if (cfg->data.val)
            dt_diag(d, loc_of(cfg, "data.val"), "set data.train too, or remove data.val to use the synthetic source",
                    "data.val is set but data.train is not");
        if (cfg->data.synthetic.alphabet > cfg->model.vocab_size)
            dt_diag(d, loc_of(cfg, "data.synthetic.alphabet"), "make the alphabet at most the vocabulary",
                    "data.synthetic.alphabet %lld is larger than model.vocab_size %lld",
                    (long long)cfg->data.synthetic.alphabet, (long long)cfg->model.vocab_size);
        if (cfg->data.synthetic.support > cfg->data.synthetic.alphabet)
            dt_diag(d, loc_of(cfg, "data.synthetic.support"), "a context cannot have more successors than tokens",
                    "data.synthetic.support %lld is larger than data.synthetic.alphabet %lld",
                    (long long)cfg->data.synthetic.support, (long long)cfg->data.synthetic.alphabet);
        if (cfg->run.max_duration.unit == DT_TU_EP)
            dt_diag(d, loc_of(cfg, "run.max_duration"), "give the length in ba, sp or tok",
                    "run.max_duration is in epochs, but the synthetic source is endless");
    }
    if (cfg->events.webhook.secret_env && !cfg->events.webhook.url)
        dt_diag(d, loc_of(cfg, "events.webhook.secret_env"), "set events.webhook.url or remove secret_env",
                "events.webhook.secret_env is set but events.webhook.url is not");
}

dt_status_t dt_config_resolve(struct dt_config *cfg, const struct dt_geometry *geo)
{
    struct dt_diags d = {0};
    resolve_world(cfg, geo, &d);
    dt_resolve_init_from(cfg, &d);
    resolve_preset(cfg, &d);
    check_model(cfg, &d);
    resolve_llama(cfg, &d);
    check_data(cfg, &d);
    dt_resolve_tokenizer(cfg);
    resolve_strategy(cfg, &d);
    resolve_zero(cfg);
    DT_CHECK(dt_diag_finish(&d));
    if (cfg->compute.strategy == DT_STRAT_DEEPSPEED) {
        /* the JSON is read once the world is known: its batch identity needs it */
        DT_CHECK(dt_ds_load_merge(cfg));
        static const int by_stage[] = {DT_STRAT_DDP, DT_STRAT_ZERO1, DT_STRAT_ZERO2, DT_STRAT_ZERO3};
        cfg->resolved.strategy = by_stage[cfg->ds.zero.stage];
    }
    /* the offload settings, wherever they came from (a DeepSpeed JSON's win) */
    check_offload(cfg, &d);
    check_fp8(cfg, &d);
    DT_CHECK(dt_diag_finish(&d));
    resolve_stage(cfg);
    resolve_schedule(cfg);
    cfg->resolved.global_batch =
        cfg->data.micro_batch_size * cfg->compute.gradient_accumulation_steps * (int64_t)cfg->resolved.world;
    cfg->resolved.gpus = geo->gpus;
    snprintf(cfg->resolved.device_note, sizeof cfg->resolved.device_note, "%s", geo->gpu_note);
    return DT_SUCCESS;
}
