/*
 * dtrun.c - the command line: subcommands and mode selection only, and the one
 * place that turns a dt_status_t into an exit code.
 *
 *   dtrun [run] [CONFIG] [key=value ...]
 *   dtrun check [CONFIG] [key=value ...]
 *   dtrun help config | --help | --version
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "comm/bench.h"
#include "config/config.h"
#include "config/emit.h"
#include "config/reference.h"
#include "config/resolve.h"
#include "config/schema.h"
#include "ckpt/ckpt.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/log.h"
#include "kernels/backend.h"
#include "data/prepare.h"
#include "kernels/kernels.h"
#include "launch/alloc.h"
#include "launch/bootstrap.h"
#include "launch/device.h"
#include "launch/launch.h"
#include "launch/world.h"
#include "events/events.h"
#include "report/report.h"
#include "train/generate_cmd.h"
#include "train/memory.h"
#include "train/shapes.h"
#include "train/signals.h"
#include "train/trainer.h"
#include "version.h"

static const char usage[] =
    "usage: dtrun [run] [CONFIG] [key=value ...]   train (no CONFIG: the built-in default)\n"
    "       dtrun -n N [run|info] [CONFIG] ...     N local workers through mpirun, output prefixed by rank\n"
    "       dtrun [run] CONFIG --dry-run           in a Slurm allocation: print the srun line dtrun would run\n"
    "       dtrun submit [CONFIG] [key=value ...] [--dry-run] [-- SBATCH-OPTIONS]\n"
    "                                              an sbatch script from templates/sbatch/ and the\n"
    "                                              config's slurm: section, submitted (job id printed)\n"
    "       dtrun check [CONFIG] [key=value ...]   validate; print the resolved config as YAML\n"
    "       dtrun check CONFIG --memory [--device-memory SIZE]\n"
    "                                              ... and what a rank will hold on its device and host,\n"
    "                                              its node's total, the model state of every ZeRO stage\n"
    "       dtrun check CONFIG --get KEY           one resolved value alone (null: an empty line)\n"
    "       dtrun prepare TEXT... --out DIR        byte-level token shards (llm.c format) from text\n"
    "       dtrun prepare TEXT... --out DIR --tokenizer PATH   the same with a Hugging Face tokenizer.json\n"
    "       dtrun generate SOURCE --prompt TEXT [--max-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
    "                      [--seed S] [--ids] [--ignore-eos] [--tokenizer PATH] [--device auto|cpu|cuda]\n"
    "                                              text from a checkpoint, run.dir, Hugging Face Llama\n"
    "                                              directory or llm.c model file, with a key/value cache\n"
    "                                              (temperature 0: greedy; --prompt-ids 1,2,3 and --ids:\n"
    "                                              token ids in and out)\n"
    "       dtrun info                             this process's place in the job (rank, node, source)\n"
    "       dtrun -n 2 bench comm [--max-size MIB] all-reduce bus bandwidth, dtrun's next to plain MPI's\n"
    "       dtrun bench events URL [--events N]    events/s the webhook sender delivers to URL\n"
    "       dtrun events flush RUN_DIR [key=value] send the events a run left spooled (its webhook was down)\n"
    "       dtrun events example [CONFIG]          one record of each event type, as JSON lines\n"
    "       dtrun report RUN_DIR... [--out FILE]   one self-contained HTML page of one run or several\n"
    "                                              compared: curves, lifecycle timeline, config (default\n"
    "                                              FILE: RUN_DIR/report.html; for several, report.html)\n"
    "       dtrun ckpt inspect CKPT                a checkpoint's manifest, every file checked\n"
    "       dtrun ckpt consolidate CKPT OUT        its whole fp32 state as one file (OUT/step-N)\n"
    "       dtrun ckpt export CKPT --format llmc|safetensors --out PATH [--dtype fp32|bf16|fp16]\n"
    "                              [--max-shard-size 5GB]\n"
    "                                              llm.c's model file, or a Hugging Face model directory\n"
    "                                              (GPT-2 or Llama; Llama's model.init_from reads it)\n"
    "                                              (CKPT: a checkpoint step-N/, a checkpoint.dir or its\n"
    "                                              latest file, or a run.dir: the newest valid one)\n"
    "       dtrun help config                      the config reference (every key, default, range)\n"
    "       dtrun --help | --version\n"
    "\n"
    "CONFIG is a YAML file (templates/ has examples); key=value overrides any key,\n"
    "e.g. optimizer.lr=1e-3 compute.precision=bf16-mixed run.max_duration=2ep.\n"
    "\n"
    "exit codes:\n"
    "  0  success\n"
    "  1  training failed (non-finite loss, loss scale at its minimum)\n"
    "  2  usage or configuration error\n"
    "  3  data error (missing or corrupt shards)\n"
    "  4  communication error (a rank died or a collective timed out)\n"
    "  5  checkpoint error\n"
    "  6  internal or system error\n"
    "  75 stopped by a signal (SIGINT; SIGTERM or SIGUSR1 when Slurm does not requeue\n"
    "     the job) at a step boundary, its checkpoint saved: run it again to resume\n"
    "\n"
    "environment:\n"
    "  DTRUN_SITE_CONFIG   site defaults file (default: " DT_SYSCONFDIR "/dtrun.yaml if present)\n"
    "  DTRUN_DEBUG         ERROR, WARN, INFO (default), DEBUG or TRACE\n"
    "  DTRUN_DEBUG_SUBSYS  limit DEBUG/TRACE to CONFIG,LAUNCH,COMM,TRAIN,EVENTS,CKPT,KERNELS\n"
    "  DTRUN_NO_SRUN       set: in a Slurm allocation outside a step, train here instead of calling srun\n"
    "  DTRUN_CUDA_MODULE   the CUDA module to load (default: the one installed with this dtrun)\n"
    "  DTRUN_FAULT         tests: make a rank fail, e.g. kill@5:1 (src/core/fault.h)\n";

static dt_status_t usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static dt_status_t usage_error(const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return dt_error(DT_ERR_USAGE, "dtrun: error: %s\n  hint: dtrun --help lists the commands", what);
}

/* DTRUN_SITE_CONFIG names the admins' defaults (empty: none); else sysconfdir/dtrun.yaml if present. */
static const char *site_config(void)
{
    const char *env = getenv("DTRUN_SITE_CONFIG");
    if (env) return *env ? env : NULL;
    struct stat st;
    return stat(DT_SYSCONFDIR "/dtrun.yaml", &st) == 0 ? DT_SYSCONFDIR "/dtrun.yaml" : NULL;
}

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* argv after the subcommand: an optional CONFIG (the first word without '='), then overrides.
 * w: the world this process was launched into (its geometry fills "auto" and is checked
 * against the config); NULL: the allocation's, as the srun wrapper and `check` see it.
 * cfg is initialized first, so the caller can dt_config_free() it however this returns (#16:
 * `dtrun check optimizer.lr=1e-3 stray` freed an uninitialized config). */
static dt_status_t load_resolved(struct dt_config *cfg, int argc, char **argv, const struct dt_world *w)
{
    DT_CHECK(dt_config_init(cfg));
    const char *path = NULL;
    int first = 0;
    if (argc > 0 && !strchr(argv[0], '=')) {
        path = argv[0];
        first = 1;
    } else if (getenv("DTRUN_CONFIG") && *getenv("DTRUN_CONFIG")) {
        path = getenv("DTRUN_CONFIG"); /* srun/sbatch --dt-config (the SPANK plugin) */
    }
    for (int i = first; i < argc; i++)
        if (!strchr(argv[i], '=')) return usage_error("'%s' is neither key=value nor the first argument", argv[i]);
    DT_CHECK(dt_config_load(cfg, site_config(), path, argc - first, argv + first));
    struct dt_geometry geo = {0};
    if (w && w->source != DT_WORLD_SINGLE) {
        dt_step_geometry(w, &geo);
    } else {
        dt_alloc_geometry(&geo);
        if (w) geo.ranks = 1; /* training here, as one process */
    }
    /* the CUDA module is loaded only for a config that may want a GPU */
    if (cfg->compute.device != DT_DEVICE_CPU)
        DT_CHECK(dt_backend_gpus(cfg->compute.device == DT_DEVICE_CUDA, &geo.gpus, geo.gpu_note, sizeof geo.gpu_note));
    return dt_config_resolve(cfg, &geo);
}

/* --get KEY: one resolved value alone (a string as it is, null as an empty line), for scripts and the
 * SPANK plugin */
static dt_status_t print_key(const struct dt_config *cfg, const char *path)
{
    size_t i;
    const struct dt_key *k = dt_schema_find(&dt_config_schema, path, &i);
    if (!k) return usage_error("--get %s: no such key (`dtrun help config` lists them)", path);
    const void *field = DT_FIELD(cfg, k);
    char buf[4096];
    if (k->type == DT_T_STR) printf("%s\n", *(char *const *)field ? *(char *const *)field : "");
    else printf("%s\n", dt_value_format(k, field, buf, sizeof buf));
    return DT_SUCCESS;
}

/* "5GB" (10^9, as transformers' max_shard_size), "2GiB" (2^30), "500MB", "64KB", or bytes into *out;
 * 0 when it parses */
static int parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        double scale;
    } units[] = {{"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"KiB", 1024.0}, {"MiB", 1048576.0},
                 {"GiB", 1073741824.0}};
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0)) return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].suffix) && v * units[i].scale < 1.8e19) {
            *out = (uint64_t)(v * units[i].scale);
            return 0;
        }
    return -1;
}

/* dtrun check [CONFIG] [key=value ...] [--memory [--device-memory SIZE]] [--get KEY] */
static dt_status_t cmd_check(int argc, char **argv)
{
    bool memory = false;
    const char *get = NULL;
    uint64_t capacity = 0;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--memory")) memory = true;
        else if (!strcmp(argv[i], "--device-memory") && i + 1 < argc) {
            if (parse_size(argv[++i], &capacity) != 0 || !capacity)
                return usage_error("--device-memory '%s': give a size, as 80GB or 141GiB (a GPU's memory)", argv[i]);
        } else if (!strcmp(argv[i], "--device-memory"))
            return usage_error("--device-memory needs a size, e.g. --device-memory 80GB");
        else if (!strcmp(argv[i], "--get") && i + 1 < argc) get = argv[++i];
        else if (!strcmp(argv[i], "--get")) return usage_error("--get needs a key, e.g. --get events.webhook.url");
        else argv[n++] = argv[i];
    }
    struct dt_config cfg;
    dt_status_t rc = load_resolved(&cfg, n, argv, NULL);
    if (rc == DT_SUCCESS && get) {
        rc = print_key(&cfg, get);
        dt_config_free(&cfg);
        return rc;
    }
    if (rc == DT_SUCCESS) dt_config_emit(&cfg, stdout);
    if (rc == DT_SUCCESS) rc = dt_shapes_print(&cfg, stdout);
    if (rc == DT_SUCCESS && memory) rc = dt_memory_estimate(&cfg, capacity, stdout);
    dt_config_free(&cfg);
    return rc;
}

/* A Slurm allocation outside a step: become one srun step (or print it with --dry-run). */
static dt_status_t run_srun(int argc, char **argv, bool dry_run, bool *done)
{
    struct dt_config cfg;
    dt_status_t rc = load_resolved(&cfg, argc, argv, NULL);
    *done = rc != DT_SUCCESS || dry_run || cfg.resolved.world > 1;
    if (rc == DT_SUCCESS && *done) rc = dt_srun(&cfg, argc, argv, dry_run);
    if (rc == DT_SUCCESS && !*done) DT_INFO(DT_SUB_LAUNCH, "one rank: training in this process, not through srun");
    dt_config_free(&cfg);
    return rc;
}

/* dtrun submit [CONFIG] [key=value ...] [--dry-run] [-- SBATCH-OPTIONS...] */
static dt_status_t cmd_submit(int argc, char **argv)
{
    bool dry_run = false;
    int n = 0, nsbatch = 0;
    char **sbatch = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            sbatch = argv + i + 1;
            nsbatch = argc - i - 1;
            break;
        }
        if (!strcmp(argv[i], "--dry-run")) dry_run = true;
        else argv[n++] = argv[i];
    }
    struct dt_config cfg;
    dt_status_t rc = load_resolved(&cfg, n, argv, NULL);
    bool has_config = n > 0 && !strchr(argv[0], '=');
    if (rc == DT_SUCCESS)
        rc = dt_submit(&cfg, has_config ? argv[0] : NULL, n - has_config, argv + has_config, nsbatch, sbatch, dry_run);
    dt_config_free(&cfg);
    return rc;
}

/* compute.device cuda: the GPU this rank drives, or why there is none. */
static dt_status_t gpu_for_rank(const struct dt_config *cfg, const struct dt_world *w, struct dt_devmap *dev)
{
    if (cfg->resolved.gpus == 0)
        return dt_error(DT_ERR_CONFIG, "dtrun: rank %d: error: compute.device is cuda, but this process can use no "
                        "GPU (%s)\n  hint: set compute.device: cpu, or auto (a GPU when there is one)", w->rank,
                        cfg->resolved.device_note);
    DT_CHECK(dt_device_map(w, dev));
    /* nothing narrowed what the process sees (no CUDA_VISIBLE_DEVICES: `dtrun -n N` on a
     * workstation): one GPU per local rank, the one the NCCL backend takes too */
    if (dev->ordinal < 0) {
        if (w->local_rank >= cfg->resolved.gpus)
            return dt_error(DT_ERR_CONFIG, "dtrun: rank %d: error: local rank %d, but this node has %d GPU%s, so "
                            "ranks would share a GPU\n  hint: start at most one rank per GPU", w->rank, w->local_rank,
                            cfg->resolved.gpus, cfg->resolved.gpus > 1 ? "s" : "");
        dev->ordinal = w->local_rank;
        dev->visible = cfg->resolved.gpus;
        snprintf(dev->id, sizeof dev->id, "%d", w->local_rank);
        snprintf(dev->source, sizeof dev->source, "local rank %d; CUDA_VISIBLE_DEVICES unset", w->local_rank);
    }
    return DT_SUCCESS;
}

static dt_status_t cmd_run(int argc, char **argv)
{
    bool dry_run = false;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--dry-run")) dry_run = true;
        else argv[n++] = argv[i];
    }
    argc = n;
    DT_CHECK(dt_fault_init());
    if (dt_srun_wanted()) {
        bool done;
        dt_status_t rc = run_srun(argc, argv, dry_run, &done);
        if (done) return rc;
    } else if (dry_run) {
        printf("dtrun: not in a Slurm allocation outside a step, so dtrun trains here, without srun\n");
        return DT_SUCCESS;
    }
    /* a worker from here on: a stop asked for now is kept for the first step boundary (signals.h);
     * before run.dir's lock, whose release on a fatal signal then stays out of the way */
    DT_CHECK(dt_signals_catch());
    struct dt_world w;
    DT_CHECK(dt_world_discover(&w));
    dt_log_set_rank(w.rank, w.size); /* from here every line says which rank wrote it (log.h) */
    struct dt_config cfg;
    dt_status_t rc = load_resolved(&cfg, argc, argv, &w);
    struct dt_devmap dev = {.ordinal = -1};
    if (rc == DT_SUCCESS && cfg.compute.device == DT_DEVICE_CUDA) rc = gpu_for_rank(&cfg, &w, &dev);
    struct dt_train_result res;
    if (rc == DT_SUCCESS) rc = dt_train(&cfg, &w, &dev, &res);
    if (rc == DT_SUCCESS && !res.stopped_by) {
        char floor[64] = "", val[64] = "", events[4200];
        dt_events_jsonl_path(&cfg, events, sizeof events);
        if (!isnan(res.val_loss)) snprintf(val, sizeof val, ", validation %.4f", res.val_loss);
        if (res.trained > 0) {
            if (!isnan(res.loss_floor)) snprintf(floor, sizeof floor, " (best possible %.4f)", res.loss_floor);
            DT_INFO(DT_SUB_TRAIN, "done: %lld steps, loss %.4f%s%s, %.0f tokens/s; events in %s",
                    (long long)res.steps, res.loss, val, floor, res.tokens_per_s,
                    events[0] ? events : "(off: events.jsonl is null)");
        } else {
            if (!isnan(res.loss_floor)) snprintf(floor, sizeof floor, ", best possible %.4f", res.loss_floor);
            DT_INFO(DT_SUB_TRAIN, "done: nothing trained: the run was complete at step %lld (loss %.4f%s%s); events "
                    "in %s", (long long)res.steps, res.loss, val, floor,
                    events[0] ? events : "(off: events.jsonl is null)");
        }
    }
    dt_config_free(&cfg);
    dt_pmix_finalize();
    return rc;
}

/* One line per rank: what each process learned about the world. */
static dt_status_t cmd_info(void)
{
    struct dt_world w;
    struct dt_devmap dev;
    dt_status_t rc = dt_world_discover(&w);
    if (rc == DT_SUCCESS) rc = dt_device_map(&w, &dev);
    /* prove the bootstrap NCCL will use: rank 0's ncclUniqueId (random bytes in a build or on a
     * machine without the CUDA module), checksummed by every rank */
    unsigned char blob[128] = {0};
    const char *how = "";
    bool nccl = false;
    char why[256] = "";
    if (rc == DT_SUCCESS && w.rank == 0) rc = dt_backend_nccl_id(blob, &nccl, why, sizeof why);
    if (rc == DT_SUCCESS && w.rank == 0 && !nccl && getentropy(blob, sizeof blob) != 0)
        rc = dt_error(DT_ERR_SYSTEM, "dtrun: error: getentropy failed");
    /* without a key-value store there is nothing to prove: say so rather than fail */
    bool kv = w.size == 1 || w.source == DT_WORLD_PMIX;
    if (rc == DT_SUCCESS && kv) rc = dt_bootstrap_share(&w, "dtrun.info", blob, sizeof blob, 0, 60, &how);
    if (rc == DT_SUCCESS) {
        uint32_t h = 2166136261u; /* FNV-1a */
        for (size_t i = 0; i < sizeof blob; i++) h = (h ^ blob[i]) * 16777619u;
        char line[512], gpu[384], devline[256], boot[160], host[256] = "";
        if (kv)
            snprintf(boot, sizeof boot, "bootstrap %s: 128 bytes from rank 0, FNV-1a %08x (%s)", how, (unsigned)h,
                     w.rank ? "rank 0's" : nccl ? "an ncclUniqueId" : "random: no NCCL here");
        else snprintf(boot, sizeof boot, "bootstrap none: no PMIx key-value store");
        dt_world_describe(&w, line, sizeof line);
        dt_device_describe(&dev, devline, sizeof devline);
        gethostname(host, sizeof host - 1);
        int gpus = 0;
        if (dt_backend_gpus(true, &gpus, gpu, sizeof gpu) != DT_SUCCESS) dt_backend_describe_cuda(gpu, sizeof gpu);
        /* the GPU this rank drives, in detail; a GPU the runtime cannot describe is the error */
        if (gpus > 0 && dev.ordinal >= 0) rc = dt_backend_gpu_describe(dev.ordinal, gpu, sizeof gpu);
        else if (gpus > 0) snprintf(gpu, sizeof gpu, "CUDA ready, %d GPU%s, none for this rank", gpus, gpus > 1 ? "s" : "");
        if (rc == DT_SUCCESS)
            printf("dtrun info: %s; host %s; %d CPU thread%s; device %s; %s; %s\n", line, host, dt_kernels_threads(),
                   dt_kernels_threads() > 1 ? "s" : "", devline, gpu, boot);
        fflush(stdout);
    }
    dt_pmix_finalize();
    return rc;
}

/* dtrun bench comm [--max-size MiB] [--rounds N]: under a launcher, every rank runs it. */
/* dtrun bench events URL [--events N]: the webhook sender's rate, in this process. */
static dt_status_t bench_events(int argc, char **argv)
{
    if (argc < 2 || strchr(argv[1], '-') == argv[1])
        return usage_error("usage: dtrun bench events URL [--events N]  (URL: a receiver, e.g. tests/receiver.py)");
    long n = 20000;
    for (int i = 2; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "--events") || i + 1 >= argc) return usage_error("bench events: unknown option '%s'", argv[i]);
        n = strtol(argv[++i], &end, 10);
        if (*end || n < 1 || n > 10000000) return usage_error("bench events: --events takes a number from 1 to 10000000");
    }
    return dt_events_bench(argv[1], (int)n, stdout);
}

static dt_status_t cmd_bench(int argc, char **argv)
{
    if (argc >= 1 && !strcmp(argv[0], "events")) return bench_events(argc, argv);
    if (argc < 1 || strcmp(argv[0], "comm"))
        return usage_error("usage: dtrun -n N bench comm [--max-size MIB] [--rounds N], or dtrun bench events URL");
    long max_mib = 256, rounds = 5;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        long *v = !strcmp(argv[i], "--max-size") ? &max_mib : !strcmp(argv[i], "--rounds") ? &rounds : NULL;
        if (!v || i + 1 >= argc) return usage_error("bench comm: unknown option '%s'", argv[i]);
        *v = strtol(argv[++i], &end, 10);
        if (*end || *v < 1 || *v > 4096) return usage_error("bench comm: %s takes a number from 1 to 4096", argv[i - 1]);
    }
    struct dt_world w;
    DT_CHECK(dt_world_discover(&w));
    dt_log_set_rank(w.rank, w.size);
    if (w.size < 2)
        return dt_error(DT_ERR_USAGE, "dtrun: error: bench comm measures collectives between ranks, and this world "
                        "has one\n  hint: dtrun -n 2 bench comm, or srun -n 2 --mpi=pmix dtrun bench comm");
    struct dt_comm *c;
    DT_CHECK(dt_comm_open(&c, &w, dt_comm_cpu_backend(), 600));
    dt_status_t rc = dt_comm_bench(c, (size_t)max_mib << 20, (int)rounds, stdout);
    dt_comm_close(c, rc == DT_SUCCESS);
    dt_pmix_finalize();
    return rc;
}

/* dtrun events flush RUN_DIR [key=value ...] | dtrun events example [CONFIG] [key=value ...] */
static dt_status_t cmd_events(int argc, char **argv)
{
    const char *how = "usage: dtrun events flush RUN_DIR [key=value ...], or dtrun events example [CONFIG] [key=value ...]";
    if (argc >= 1 && !strcmp(argv[0], "example")) {
        struct dt_config cfg;
        struct dt_world w = {.size = 1, .local_size = 1, .nnodes = 1};
        dt_status_t rc = load_resolved(&cfg, argc - 1, argv + 1, NULL);
        if (rc == DT_SUCCESS) rc = dt_events_example(&cfg, &w, stdout);
        dt_config_free(&cfg);
        return rc;
    }
    if (argc < 2 || strcmp(argv[0], "flush") || strchr(argv[1], '=')) return usage_error("%s", how);
    for (int i = 2; i < argc; i++)
        if (!strchr(argv[i], '=')) return usage_error("'%s' is not key=value; %s", argv[i], how);
    /* the run's own settings (config.yaml, saved at its start), not resolved against this shell's world */
    char path[4200];
    snprintf(path, sizeof path, "%s/config.yaml", argv[1]);
    if (!exists(argv[1]))
        return dt_error(DT_ERR_USAGE, "%s: error: no such run directory\n  hint: give the run.dir of the run whose "
                        "events are spooled", argv[1]);
    struct dt_config cfg;
    DT_CHECK(dt_config_init(&cfg));
    dt_status_t rc = dt_config_load(&cfg, NULL, exists(path) ? path : NULL, argc - 2, argv + 2);
    if (rc == DT_SUCCESS) rc = dt_events_flush(&cfg, argv[1], stdout);
    dt_config_free(&cfg);
    return rc;
}

/* dtrun report RUN_DIR... [--out FILE.html] */
static dt_status_t cmd_report(int argc, char **argv)
{
    const char *out = NULL;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (argv[i][0] == '-') return usage_error("report: unknown option '%s'", argv[i]);
        else argv[n++] = argv[i];
    }
    if (n == 0) return usage_error("usage: dtrun report RUN_DIR [RUN_DIR...] [--out FILE.html]");
    return dt_report(n, argv, out, stdout);
}

/* dtrun ckpt inspect CKPT | consolidate CKPT OUT | export CKPT --format llmc|safetensors --out PATH
 * [--dtype fp32|bf16|fp16] [--max-shard-size SIZE] */
static dt_status_t cmd_ckpt(int argc, char **argv)
{
    const char *how = "usage: dtrun ckpt inspect CKPT, dtrun ckpt consolidate CKPT OUT, or dtrun ckpt export CKPT "
                      "--format llmc|safetensors --out PATH [--dtype fp32|bf16|fp16] [--max-shard-size SIZE] (CKPT: "
                      "a checkpoint, a checkpoint.dir, its latest file, or a run.dir)";
    char path[4096];
    if (argc == 2 && !strcmp(argv[0], "inspect")) {
        DT_CHECK(dt_ckpt_resolve_arg(argv[1], path, sizeof path));
        return dt_ckpt_inspect(path, stdout);
    }
    if (argc == 3 && !strcmp(argv[0], "consolidate")) {
        DT_CHECK(dt_ckpt_resolve_arg(argv[1], path, sizeof path));
        return dt_ckpt_consolidate(path, argv[2], stdout);
    }
    if (argc >= 2 && !strcmp(argv[0], "export")) {
        /* Hugging Face's save_pretrained: fp32 as trained, shards of at most 5 GB */
        struct dt_export x = {.dtype = DT_F32, .shard_bytes = 5000000000u};
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "--format") && i + 1 < argc) x.format = argv[++i];
            else if (!strcmp(argv[i], "--out") && i + 1 < argc) x.out = argv[++i];
            else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
                const char *d = argv[++i];
                if (!strcmp(d, "fp32") || !strcmp(d, "float32")) x.dtype = DT_F32;
                else if (!strcmp(d, "bf16") || !strcmp(d, "bfloat16")) x.dtype = DT_BF16;
                else if (!strcmp(d, "fp16") || !strcmp(d, "float16")) x.dtype = DT_F16;
                else return usage_error("ckpt export: --dtype '%s': use fp32, bf16 or fp16", d);
            } else if (!strcmp(argv[i], "--max-shard-size") && i + 1 < argc) {
                if (parse_size(argv[++i], &x.shard_bytes) != 0)
                    return usage_error("ckpt export: --max-shard-size '%s': give bytes, or a size such as 5GB, "
                                       "500MB or 2GiB (0: one file)", argv[i]);
            } else {
                return usage_error("ckpt export: unexpected '%s'; %s", argv[i], how);
            }
        }
        if (!x.format || !x.out) return usage_error("ckpt export needs --format and --out; %s", how);
        if (x.dtype != DT_F32 && strcmp(x.format, "safetensors"))
            return usage_error("ckpt export: --dtype applies to --format safetensors; llm.c's model file is fp32");
        DT_CHECK(dt_ckpt_resolve_arg(argv[1], path, sizeof path));
        return dt_ckpt_export(path, &x, stdout);
    }
    return usage_error("%s", how);
}

/* prepare's ranks wait for each other through PMIx (a day's prepare: no timeout to speak of) */
static dt_status_t prepare_barrier(void *arg, const char *what)
{
    return dt_bootstrap_barrier(arg, what, 7 * 24 * 3600);
}

static dt_status_t cmd_prepare(int argc, char **argv)
{
    struct dt_prepare_opts o = {.val_fraction = 0.1, .text_key = "text", .shard_tokens = 100000000};
    char **files = calloc((size_t)argc + 1, sizeof *files);
    if (!files) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    int n = 0;
    const char *how = "usage: dtrun prepare TEXT... --out DIR [--val-fraction 0.1] [--tokenizer PATH [--text-key text] "
                        "[--shard-tokens N] [-j THREADS] [--doc-token TOKEN]]";
    for (int i = 0; i < argc; i++) {
        char *end;
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "--out") && has) {
            o.out_dir = argv[++i];
        } else if (!strcmp(a, "--val-fraction") && has) {
            o.val_fraction = strtod(argv[++i], &end);
            if (*end || o.val_fraction < 0 || o.val_fraction >= 1) {
                free(files);
                return usage_error("--val-fraction takes a number in [0, 1)");
            }
        } else if (!strcmp(a, "--tokenizer") && has) {
            o.tokenizer = argv[++i];
        } else if (!strcmp(a, "--text-key") && has) {
            o.text_key = argv[++i];
        } else if (!strcmp(a, "--doc-token") && has) {
            o.doc_token = argv[++i];
        } else if (!strcmp(a, "--shard-tokens") && has) {
            long long v = strtoll(argv[++i], &end, 10);
            if (*end || v < 1 || v > (1ll << 32)) {
                free(files);
                return usage_error("--shard-tokens takes a whole number of tokens from 1 to 2^32, e.g. 100000000");
            }
            o.shard_tokens = (size_t)v;
        } else if ((!strcmp(a, "-j") || !strcmp(a, "--threads")) && has) {
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 256) {
                free(files);
                return usage_error("%s takes a number of threads from 1 to 256", a);
            }
            o.threads = (int)v;
        } else if (a[0] == '-' && a[1]) {
            free(files);
            return usage_error("prepare: unknown option '%s' (or its value is missing)\n  %s", a, how);
        } else {
            files[n++] = argv[i];
        }
    }
    if (!o.out_dir || n == 0) {
        free(files);
        return usage_error("%s", how);
    }
    if (!o.tokenizer && (o.doc_token || strcmp(o.text_key, "text") || o.threads || o.shard_tokens != 100000000)) {
        free(files);
        return usage_error("prepare: --text-key, --doc-token, --shard-tokens and -j go with --tokenizer PATH; without "
                           "it prepare writes bytes (vocabulary 256)");
    }
    o.nfiles = n;
    o.files = files;
    o.nranks = 1;
    /* every core this process may use: OpenMP's count follows OMP_NUM_THREADS and the CPU set Slurm
     * or taskset gave it, where sysconf would count the whole node */
    if (!o.threads) o.threads = dt_kernels_threads();
    dt_status_t rc = DT_SUCCESS;
    struct dt_world w = {.size = 1};
    if (o.tokenizer) rc = dt_world_discover(&w);
    if (rc == DT_SUCCESS && w.size > 1 && w.source != DT_WORLD_PMIX)
        rc = dt_error(DT_ERR_USAGE, "dtrun prepare: error: %d ranks, but no PMIx to coordinate them\n  hint: srun "
                      "--mpi=pmix dtrun prepare ..., or mpirun -n N dtrun prepare ...", w.size);
    if (rc == DT_SUCCESS && w.size > 1) {
        dt_log_set_rank(w.rank, w.size);
        o.rank = w.rank;
        o.nranks = w.size;
        o.barrier = prepare_barrier;
        o.barrier_arg = &w;
    }
    if (rc == DT_SUCCESS) rc = o.tokenizer ? dt_prepare_tokenized(&o) : dt_prepare(n, files, o.out_dir, o.val_fraction);
    free(files);
    if (w.size > 1) dt_pmix_finalize();
    return rc;
}

/* dtrun generate SOURCE --prompt TEXT [options] */
static dt_status_t cmd_generate(int argc, char **argv)
{
    const char *how = "usage: dtrun generate SOURCE [--prompt TEXT | --prompt-file PATH | --prompt-ids 1,2,3] "
                      "[--max-tokens 256] [--temperature 1] [--top-k 0] [--top-p 0.9] [--seed S] [--ids] [--ignore-eos] "
                      "[--tokenizer PATH] [--device auto|cpu|cuda] [--precision NAME]";
    /* llama2.c's run.c: temperature 1, top-p 0.9, 256 steps */
    struct dt_generate_opts o = {.max_tokens = 256, .device = "auto",
                                 .sampler = {.temperature = 1.0f, .top_k = 0, .top_p = 0.9f}};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        char *end = NULL;
        if (!strcmp(a, "--prompt") && has) o.prompt = argv[++i];
        else if (!strcmp(a, "--prompt-file") && has) o.prompt_file = argv[++i];
        else if (!strcmp(a, "--prompt-ids") && has) o.prompt_ids = argv[++i];
        else if (!strcmp(a, "--tokenizer") && has) o.tokenizer = argv[++i];
        else if (!strcmp(a, "--device") && has) o.device = argv[++i];
        else if (!strcmp(a, "--precision") && has) o.precision = argv[++i];
        else if (!strcmp(a, "--ids")) o.ids = true;
        else if (!strcmp(a, "--ignore-eos")) o.ignore_eos = true;
        else if (!strcmp(a, "--max-tokens") && has) {
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 1 << 24) return usage_error("--max-tokens takes a number of tokens from 1, e.g. 256");
            o.max_tokens = (int)v;
        } else if (!strcmp(a, "--temperature") && has) {
            o.sampler.temperature = strtof(argv[++i], &end);
            if (*end || !(o.sampler.temperature >= 0) || o.sampler.temperature > 100)
                return usage_error("--temperature takes a number from 0 (greedy) to 100, e.g. 0.8");
        } else if (!strcmp(a, "--top-k") && has) {
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 0 || v > 1 << 24) return usage_error("--top-k takes a number of tokens (0: all of them)");
            o.sampler.top_k = (int)v;
        } else if (!strcmp(a, "--top-p") && has) {
            o.sampler.top_p = strtof(argv[++i], &end);
            if (*end || !(o.sampler.top_p > 0) || o.sampler.top_p > 1)
                return usage_error("--top-p takes a probability in (0, 1] (1: no nucleus cut), e.g. 0.9");
        } else if (!strcmp(a, "--seed") && has) {
            unsigned long long v = strtoull(argv[++i], &end, 10);
            if (*end || argv[i][0] == '-') return usage_error("--seed takes a whole number, e.g. 1337");
            o.sampler.seed = v;
            o.seeded = true;
        } else if (a[0] == '-' || o.source) {
            return usage_error("generate: unexpected '%s' (or its value is missing)\n  %s", a, how);
        } else {
            o.source = a;
        }
    }
    if (!o.source) return usage_error("%s", how);
    if ((o.prompt != NULL) + (o.prompt_file != NULL) + (o.prompt_ids != NULL) > 1)
        return usage_error("generate: give one of --prompt, --prompt-file and --prompt-ids");
    return dt_generate_main(&o, stdout);
}

/* dtrun -n N [command] ...: the job's exit code is the launcher's. */
static int cmd_launch(int argc, char **argv)
{
    char *end = NULL;
    long n = argc > 0 ? strtol(argv[0], &end, 10) : 0;
    dt_status_t rc;
    int code = 0;
    if (argc < 1 || *end || n < 1 || n > 1024) {
        rc = usage_error("-n takes a number of workers from 1 to 1024, e.g. dtrun -n 2 config.yaml");
    } else {
        /* the workers run a command: the one given, else "run" */
        static const char *const commands[] = {"run", "info", "check", "bench", NULL};
        bool has_cmd = false;
        for (int i = 0; argc > 1 && commands[i]; i++) has_cmd |= !strcmp(argv[1], commands[i]);
        char **args = calloc((size_t)argc + 1, sizeof *args);
        if (!args) return 6;
        int k = 0;
        if (!has_cmd) args[k++] = "run";
        for (int i = 1; i < argc; i++) args[k++] = argv[i];
        rc = dt_launch_local((int)n, k, args, &code);
        free(args);
    }
    if (rc != DT_SUCCESS) {
        dt_log_text(dt_error_msg());
        return dt_status_exit_code(rc);
    }
    return code;
}

int main(int argc, char **argv)
{
    dt_log_init();
    dt_status_t rc;
    const char *cmd = argc > 1 ? argv[1] : NULL;
    if (cmd && (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help"))) {
        if (argc > 2 && !strcmp(cmd, "help") && !strcmp(argv[2], "config")) {
            dt_config_reference(stdout);
            return 0;
        }
        fputs(usage, stdout);
        return 0;
    }
    if (cmd && (!strcmp(cmd, "--version") || !strcmp(cmd, "-V"))) {
        dt_version_print(stdout);
        return 0;
    }
    if (cmd && !strcmp(cmd, "-n")) return cmd_launch(argc - 2, argv + 2);
    if (cmd && !strcmp(cmd, "check")) rc = cmd_check(argc - 2, argv + 2);
    else if (cmd && !strcmp(cmd, "run")) rc = cmd_run(argc - 2, argv + 2);
    else if (cmd && !strcmp(cmd, "submit")) rc = cmd_submit(argc - 2, argv + 2);
    else if (cmd && !strcmp(cmd, "prepare")) rc = cmd_prepare(argc - 2, argv + 2);
    else if (cmd && !strcmp(cmd, "generate")) rc = cmd_generate(argc - 2, argv + 2);
    else if (cmd && !strcmp(cmd, "info")) rc = cmd_info();
    else if (cmd && !strcmp(cmd, "bench")) rc = cmd_bench(argc - 2, argv + 2);
    else if (cmd && !strcmp(cmd, "events")) rc = cmd_events(argc - 2, argv + 2);
    else if (cmd && !strcmp(cmd, "ckpt")) rc = cmd_ckpt(argc - 2, argv + 2);
    else if (cmd && !strcmp(cmd, "report")) rc = cmd_report(argc - 2, argv + 2);
    else if (cmd && cmd[0] == '-') rc = usage_error("unknown option '%s'", cmd);
    else if (cmd && !strchr(cmd, '=') && !exists(cmd) && !strpbrk(cmd, "./"))
        rc = usage_error("'%s' is neither a command nor a config file", cmd);
    else rc = cmd_run(argc - 1, argv + 1);
    if (rc != DT_SUCCESS) {
        dt_log_text(dt_error_msg());
        return dt_status_exit_code(rc);
    }
    return 0;
}
