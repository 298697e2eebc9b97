/* memory.c - see memory.h. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "core/error.h"
#include "core/log.h"
#include "kernels/cuda/plan.h"
#include "kernels/kernels.h"
#include "model/lm_head.h"
#include "precision/policy.h"
#include "strategy/strategy.h"
#include "train/memory.h"
#include "train/shapes.h"

#define MIB (1024.0 * 1024.0)
/* The process before it allocates anything, measured on the CPU runs here (peak RSS of a 0.1M-
 * parameter GPT: 24 MiB alone, 33 MiB with Open MPI); a GPU run's host side loads CUDA, cuBLASLt
 * and NCCL besides (~220 MiB, bench/startup.sh), and its device holds the CUDA context and
 * cuBLASLt's workspace (kernels/cuda/matmul.c). */
#define PROCESS_CPU ((int64_t)24 << 20)
#define PROCESS_MPI ((int64_t)34 << 20)
#define PROCESS_GPU ((int64_t)256 << 20)
#define RUNTIME_GPU ((int64_t)544 << 20)
/* train/trainer.c's staging of the initial parameters, at most */
#define PARAM_STAGING_FLOATS ((int64_t)16 << 20)

/* A CPU's kernels' growing scratch under 16-bit compute (kernels/cpu/cpu.h's slots and matmul_lp.c's
 * copies): the largest matmul's operands widened or narrowed (its input, weight, output and output
 * gradient), attention's widened qkv, output and dqkv, a norm's or the loss's fp32 rows. */
static int64_t cpu_scratch(int64_t BT, int64_t C, int64_t qkv_width, int64_t widest_in, int64_t widest_out)
{
    int64_t matmul = 4 * (BT * widest_in + widest_in * widest_out + 2 * BT * widest_out);
    int64_t attention = 4 * (2 * BT * qkv_width + BT * C);
    return matmul + attention + 4 * BT * C;
}

/* what the plan and the stage table start from: the run's precision, engine and optimizer settings,
 * its units (malloc'd), and the ranks a part is shared over (a node's under HYBRID_SHARD) */
struct setting {
    struct dt_prec_policy prec;
    struct dt_engine_config ec;
    struct dt_optim_config oc;
    struct dt_unit *units;
    int nunits, shard;
};

static dt_status_t setting_of(const struct dt_config *cfg, struct setting *t)
{
    DT_CHECK(dt_precision_from_config(cfg, &t->prec));
    dt_strategy_engine_config(cfg, &t->prec, &t->ec);
    dt_shapes_optim(cfg, &t->oc);
    DT_CHECK(dt_shapes_units(cfg, &t->units, &t->nunits));
    int N = cfg->resolved.world;
    t->shard = t->ec.hybrid && cfg->resolved.nodes > 1 ? cfg->resolved.devices_per_node : N;
    return DT_SUCCESS;
}

dt_status_t dt_memory_plan(const struct dt_config *cfg, struct dt_memory_plan *p)
{
    struct setting t;
    DT_CHECK(setting_of(cfg, &t));
    struct dt_prec_policy prec = t.prec;
    struct dt_engine_config ec = t.ec;
    struct dt_optim_config oc = t.oc;
    int N = cfg->resolved.world, shard = t.shard;
    *p = (struct dt_memory_plan){.gpu = cfg->compute.device == DT_DEVICE_CUDA,
                                 .ranks_per_node = cfg->resolved.devices_per_node};
    dt_engine_plan_memory(&ec, t.units, t.nunits, N > 1 ? shard : 1, 0, oc.kind, &p->state);
    free(t.units);

    /* activations at the micro-batch; the embedding rows each backward gathers from every rank */
    int64_t B = cfg->data.micro_batch_size, T = cfg->model.seq_len, BT = B * T, C = cfg->model.n_embd;
    if (cfg->model.type == DT_MODEL_MLP) {
        struct dt_mlp_config mc;
        dt_shapes_mlp(cfg, &mc);
        mc.activations = prec.compute;
        p->activations = (int64_t)dt_mlp_arena_bytes(&mc, (int)B);
    } else {
        int64_t NH = cfg->model.n_head, NKV = cfg->model.type == DT_MODEL_LLAMA ? cfg->model.n_kv_head : NH;
        size_t natt = (size_t)(B * NH * T);
        /* on a GPU, with what kernels on trial add (DTRUN_CUDA_TRY; a run refuses a name it does not
         * know, where the plan leaves it out) */
        unsigned tries = 0;
        char bad[32];
        if (p->gpu && dt_cuda_tries_parse(getenv("DTRUN_CUDA_TRY"), &tries, bad, sizeof bad)) {
            DT_WARN("DTRUN_CUDA_TRY names '%s', no kernel on trial (kernels/cuda/plan.h): the plan leaves it out, "
                    "and a run refuses it", bad);
            tries = 0;
        }
        size_t nscratch = p->gpu ? dt_attn_scratch_tried(tries, prec.compute != DT_F32, (int)B, (int)T, (int)C,
                                                         (int)NH, (int)NKV)
                                 : 0;
        /* the matmuls' widest input and output, their widest weight; a GPU's partial sums a block of
         * rows and biased outputs (GPT's: layernorm's two of C, its biases' up to 4C; Llama's RMSNorm
         * one of C, no bias) */
        int64_t W = dt_attn_width((int)C, (int)NH, (int)NKV), widest_in, widest_out, widest_weight, partial_width, biased;
        if (cfg->model.type == DT_MODEL_LLAMA) {
            struct dt_llama_config lc;
            dt_shapes_llama(cfg, prec.compute, &lc);
            p->activations = (int64_t)dt_llama_arena_bytes(&lc, (int)B, (int)T, natt, nscratch);
            int64_t H = cfg->model.intermediate_size;
            widest_in = H > C ? H : C, widest_out = 2 * H > W ? 2 * H : W;
            widest_weight = C * widest_out;
            partial_width = C, biased = 0;
        } else {
            struct dt_gpt_config gc;
            dt_shapes_gpt(cfg, prec.compute, &gc);
            gc.fuse_gelu = gc.fuse_gelu && (tries & DT_CUDA_TRY_GELU); /* as cuda_table.c's gelu_fused */
            p->activations = (int64_t)dt_gpt_arena_bytes(&gc, (int)B, (int)T, natt, nscratch);
            widest_in = 4 * C, widest_out = 4 * C;
            widest_weight = 4 * C * C;
            partial_width = 4 * C, biased = 4 * C;
        }
        int64_t vb = dt_vocab_of((int)cfg->model.vocab_size).vb; /* the LM head's weight, a vocabulary block at a time */
        if (vb * C > widest_weight) widest_weight = vb * C;
        p->activations += 2 * BT * 4; /* the tokens: inputs and targets */
        if (N > 1) p->rows = N * BT * 4 + N * BT * C * 4;
        if (!p->gpu && prec.compute != DT_F32) p->scratch = cpu_scratch(BT, C, W, widest_in, widest_out);
        if (p->gpu) {
            struct dt_cuda_scratch_shape sh = {
                .BT = BT, .partial_width = partial_width, .widest_in = widest_in, .widest_out = widest_out,
                .widest_weight = widest_weight, .biased_out = biased,
                .sorted_rows = (tries & DT_CUDA_TRY_ROWS2) ? N * BT : 0,
                .round_weights = ec.stage == 3 && prec.compute != DT_F32, .fp8 = prec.fp8,
                .unaligned = (C | W | widest_in | vb) % 8 != 0}; /* any of them off a multiple of 8 */
            p->scratch = dt_cuda_scratch_bytes(&sh);
        }
        /* fp8-mixed: the scales and amax histories (precision/fp8.h); on the CPU the FP8 matmuls' own
         * scratch (the quantised operands and the sums, kernels/cpu/matmul_fp8.c) beside the 16-bit
         * matmuls' (the LM head's) */
        if (prec.fp8) {
            int64_t tensors = 3 * 4 * cfg->model.n_layer;
            p->scratch += 4 * tensors * (2 + (prec.fp8r.current ? 0 : prec.fp8r.history_len));
            if (!p->gpu) p->scratch += 4 * (BT * widest_in + widest_in * widest_out + 2 * BT * widest_out);
        }
    }
    if (p->gpu) p->runtime = RUNTIME_GPU;

    /* the host: offloaded optimizer state (fp32 master weights, Adam's moments, the fp32 gradients
     * copied down, the 16-bit weights copied back), the checkpoint's copy, the staging, the process */
    int64_t moments = 0; /* offloaded, in plain host memory (never copied) */
    if (ec.offload) {
        moments = p->state.optimizer;
        /* fp32 master weights (the working ones themselves in fp32) and the moments; the gradients'
         * pinned copy; a 16-bit working copy to send up, or the 16-bit weights themselves (offload_param) */
        int64_t elems = p->state.shard_elems, gsz = ec.accum > 1 ? 4 : (int64_t)dt_dtype_size(ec.pdt);
        int64_t moved = p->state.master + p->state.optimizer + (ec.offload_param ? p->state.params : 0);
        p->offloaded = 4 * elems + p->state.optimizer + elems * gsz +
                       (ec.pdt != DT_F32 ? elems * (int64_t)dt_dtype_size(ec.pdt) : 0);
        p->state.state -= moved;
        p->state.total -= moved;
        if (ec.offload_param) p->state.params = 0;
        p->state.master = p->state.optimizer = 0;
    }
    int narrays = 1 + (int)(dt_optimizer_state_bytes(oc.kind) / 4);
    if (cfg->checkpoint.dir) p->ckpt_copy = p->state.saved_elems * narrays * 4;
    p->staging = 4 * (p->state.load_max_elems < PARAM_STAGING_FLOATS ? p->state.load_max_elems : PARAM_STAGING_FLOATS);
    p->process = p->gpu ? PROCESS_GPU : N > 1 ? PROCESS_MPI : PROCESS_CPU;

    /* a GPU's copies run from page-locked memory: the offloaded buffers, the checkpoint's copy, the staging */
    if (p->gpu) p->pinned = p->offloaded - moments + p->ckpt_copy + p->staging;
    p->device = p->state.total + p->activations + p->rows + p->scratch + p->runtime;
    p->host = p->offloaded + p->ckpt_copy + p->staging + p->process + (p->gpu ? 0 : p->device);
    p->node = p->host * p->ranks_per_node;
    return DT_SUCCESS;
}

int64_t dt_memory_node_limit(char *what, size_t n)
{
    const char *node = getenv("SLURM_MEM_PER_NODE"), *cpu = getenv("SLURM_MEM_PER_CPU"),
               *cpus = getenv("SLURM_CPUS_ON_NODE");
    if (node && atoll(node) > 0) {
        snprintf(what, n, "Slurm's --mem (SLURM_MEM_PER_NODE=%s MB)", node);
        return atoll(node) * 1048576;
    }
    if (cpu && cpus && atoll(cpu) > 0 && atoll(cpus) > 0) {
        snprintf(what, n, "Slurm's --mem-per-cpu x the node's CPUs (SLURM_MEM_PER_CPU=%s MB x %s)", cpu, cpus);
        return atoll(cpu) * atoll(cpus) * 1048576;
    }
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    if (f) fclose(f);
    snprintf(what, n, "this host's MemAvailable");
    return (int64_t)kb * 1024;
}

static double mib(int64_t b) { return (double)b / MIB; }

/* "84.2 GiB" or "512.0 MiB" */
static const char *size_str(int64_t b, char *buf, size_t n)
{
    if (b >= (int64_t)10 << 30) snprintf(buf, n, "%.1f GiB", (double)b / (MIB * 1024));
    else snprintf(buf, n, "%.1f MiB", mib(b));
    return buf;
}

const char *dt_memory_device_str(const struct dt_memory_plan *p, char *buf, size_t n)
{
    snprintf(buf, n, "%.1f MiB of device memory, ", mib(p->device));
    return buf;
}

/* "; 12.3 GiB of it pinned (ulimit -l here: unlimited)". Said, not enforced: CUDA pins host memory
 * through its driver, which Linux's RLIMIT_MEMLOCK does not count (a DataLoader's pin_memory runs
 * in containers whose limit is 64 KiB); a site whose transport registers memory (RDMA) needs it
 * raised, and a pinned allocation that fails says how much it asked for. */
static const char *pinned_str(const struct dt_memory_plan *p, char *buf, size_t n)
{
    char a[32], b[32];
    struct rlimit lock;
    bool known = getrlimit(RLIMIT_MEMLOCK, &lock) == 0;
    snprintf(buf, n, "; %s of it pinned (ulimit -l here: %s)", size_str(p->pinned, a, sizeof a),
             !known ? "unknown" : lock.rlim_cur == RLIM_INFINITY ? "unlimited" : size_str((int64_t)lock.rlim_cur, b, sizeof b));
    return buf;
}

static void print_plan(const struct dt_config *cfg, const struct dt_memory_plan *p, uint64_t capacity, FILE *out)
{
    const struct dt_mem_report *r = &p->state;
    char a[32], b[32], runtime[96] = "", device[64] = "", pin[96];
    if (p->gpu) snprintf(runtime, sizeof runtime, " + CUDA context and cuBLASLt workspace ~%.0f", mib(p->runtime));
    else snprintf(device, sizeof device, "the device's %s + ", size_str(p->device, a, sizeof a));
    fprintf(out, "# memory of rank 0, as it will allocate it: %s, %d rank%s (%d a node), micro-batch %lld x %lld tokens%s\n",
            p->gpu ? "on its GPU" : "on the CPU (the device is the host)", cfg->resolved.world,
            cfg->resolved.world > 1 ? "s" : "", p->ranks_per_node, (long long)cfg->data.micro_batch_size,
            (long long)(cfg->model.type == DT_MODEL_MLP ? 1 : cfg->model.seq_len),
            cfg->model.activation_checkpointing ? ", activation checkpointing" : "");
    fprintf(out, "#   device: %s = model state %.1f MiB (parameters %.1f, gradients %.1f, master %.1f, optimizer %.1f, "
            "gathered %.1f) + workspace %.1f + activations %.1f + embedding rows %.1f + kernels' scratch %.1f%s\n",
            size_str(p->device, a, sizeof a), mib(r->state), mib(r->params), mib(r->grads),
            mib(r->master), mib(r->optimizer), mib(r->gathered), mib(r->buffers),
            mib(p->activations), mib(p->rows), mib(p->scratch), runtime);
    if (p->gpu && capacity) {
        double margin = (double)capacity - (double)p->device;
        fprintf(out, "#   fits a %s GPU: %s, %s %s (%.0f%%)\n", size_str((int64_t)capacity, a, sizeof a),
                margin >= 0 ? "yes" : "no", margin >= 0 ? "margin" : "short by",
                size_str((int64_t)(margin >= 0 ? margin : -margin), b, sizeof b), 100 * margin / (double)capacity);
    }
    fprintf(out, "#   host: %s = %soffloaded state %.1f MiB + checkpoint copy %.1f + parameter staging %.1f + "
            "the process %.1f%s\n", size_str(p->host, a, sizeof a), device, mib(p->offloaded), mib(p->ckpt_copy),
            mib(p->staging), mib(p->process), p->gpu ? pinned_str(p, pin, sizeof pin) : "");
    char what[160];
    int64_t limit = dt_memory_node_limit(what, sizeof what);
    fprintf(out, "#   node: %s for its %d rank%s; %s: %s\n", size_str(p->node, a, sizeof a), p->ranks_per_node,
            p->ranks_per_node > 1 ? "s" : "", what, limit ? size_str(limit, b, sizeof b) : "unknown");
}

dt_status_t dt_memory_estimate(const struct dt_config *cfg, uint64_t device_capacity, FILE *out)
{
    struct dt_memory_plan plan;
    DT_CHECK(dt_memory_plan(cfg, &plan));
    print_plan(cfg, &plan, device_capacity, out);
    struct setting t;
    DT_CHECK(setting_of(cfg, &t));
    const struct dt_prec_policy prec = t.prec;
    const struct dt_engine_config ec = t.ec;
    const struct dt_optim_config oc = t.oc;
    const struct dt_unit *units = t.units;
    int nunits = t.nunits, N = cfg->resolved.world, shard = t.shard;
    double psi = 0;
    for (int u = 0; u < nunits; u++) psi += (double)units[u].numel;
    double p = (double)dt_dtype_size(ec.pdt), g = ec.accum > 1 ? 4 : p;
    double K = (ec.master ? 4 : 0) + (double)dt_optimizer_state_bytes(oc.kind);
    fprintf(out, "# model state per rank, as dtrun allocates it: %.2fM parameters (Psi), %d rank%s%s, %s; per "
            "parameter p = %g bytes, g = %g, K = %g (%s%s)\n", psi / 1e6, N, N > 1 ? "s" : "",
            shard != N ? " (sharded over the ranks of a node)" : "", prec.name, p, g, K, ec.master ? "fp32 master 4 + " : "",
            oc.kind == DT_OPT_SGD ? "momentum 4" : "Adam moments 8");
    fprintf(out, "#   %-8s %10s %10s %9s %10s %9s %12s   %-30s %10s\n", "stage", "parameters", "gradients", "master",
            "optimizer", "gathered", "model state", "DeepSpeed's formula", "workspace");
    static const char *const names[] = {"ddp", "zero1", "zero2", "zero3"};
    static const char *const forms[] = {"(p+g+K) Psi", "(p+g) Psi + K Psi/N", "p Psi + (g+K) Psi/N", "(p+g+K) Psi/N"};
    double n = (double)shard;
    double formula[] = {(p + g + K) * psi, (p + g) * psi + K * psi / n, p * psi + (g + K) * psi / n,
                        (p + g + K) * psi / n};
    int64_t mine = 0;
    for (int stage = 0; stage <= 3; stage++) {
        struct dt_engine_config c = ec;
        c.stage = N > 1 ? stage : 0;
        struct dt_mem_report r;
        dt_engine_plan_memory(&c, units, nunits, N > 1 ? shard : 1, 0, oc.kind, &r);
        char f[64];
        snprintf(f, sizeof f, "%s = %.1f MiB", forms[stage], formula[stage] / MIB);
        fprintf(out, "#   %-8s %10.1f %10.1f %9.1f %10.1f %9.1f %8.1f MiB   %-30s %6.1f MiB%s\n", names[stage],
                mib(r.params), mib(r.grads), mib(r.master), mib(r.optimizer), mib(r.gathered), mib(r.state), f,
                mib(r.buffers), stage == cfg->resolved.stage ? "   <- this config" : "");
        if (stage == cfg->resolved.stage) mine = r.state;
    }
    fprintf(out, "# this config: %lld bytes of model state on rank 0\n", (long long)mine);
    free(t.units);
    return DT_SUCCESS;
}

dt_status_t dt_memory_check_node(const struct dt_config *cfg, const struct dt_memory_plan *p)
{
    char what[160], a[32], b[32], c[32], d[32], e[32];
    int64_t limit = dt_memory_node_limit(what, sizeof what);
    if (!limit || p->node <= limit) return DT_SUCCESS;
    bool offload = cfg->compute.strategy_config.offload_optimizer == DT_OFFLOAD_CPU;
    char parts[256];
    int o = p->gpu ? 0 : snprintf(parts, sizeof parts, "%s of model state, activations and workspace, ",
                                   size_str(p->device, c, sizeof c));
    snprintf(parts + o, sizeof parts - (size_t)o, "%s offloaded state, %s checkpoint copy, %s staging, %s the process",
             size_str(p->offloaded, d, sizeof d), size_str(p->ckpt_copy, e, sizeof e),
             size_str(p->staging, c, sizeof c), size_str(p->process, a, sizeof a));
    return dt_error(DT_ERR_CONFIG, "dtrun: error: this node cannot hold the run: its %d rank%s need%s %s of host memory "
                    "(%s each: %s), and %s gives %s\n  hint: %s%s%s%s", p->ranks_per_node,
                    p->ranks_per_node > 1 ? "s" : "", p->ranks_per_node > 1 ? "" : "s", size_str(p->node, a, sizeof a),
                    size_str(p->host, b, sizeof b),
                    parts, what, size_str(limit, c, sizeof c),
                    cfg->resolved.stage < 3 && cfg->resolved.world > 1 ? "zero3 keeps less on each rank; " : "",
                    offload ? "offload_optimizer: none keeps the optimizer state on the GPU; " : "",
                    cfg->model.activation_checkpointing ? "" : "model.activation_checkpointing: true keeps fewer activations; ",
                    "lower data.micro_batch_size, or give the job more nodes or memory (sbatch --mem)");
}
