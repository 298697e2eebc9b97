/*
 * spank_dtrun.c - the dtrun SPANK plugin: the hooks only (README.md here for
 * admins). What each context does:
 *
 *   srun / sbatch / salloc  --dt-* options; --dt-config checked by `dtrun check` in the user's
 *                           own process, so a bad config is refused before anything is allocated;
 *                           --dt-webhook checked against the admin's allow-list
 *   slurmstepd, in a task   DTRUN_RANK... from Slurm's items, the options as DTRUN_* variables,
 *                           the cluster's NCCL settings, one GPU per task
 *   slurmstepd, task exit   a task that died by a signal: one task_failed event to the job's
 *                           webhook within task_failed_timeout
 *
 * Hooks that must not fail in slurmstepd (a failing init or user_init would drain a node or hide a
 * failed launch) log and return 0; only the submitting process refuses. It runs as root in
 * slurmstepd: it never opens a user's path there and never logs a secret or a whole URL.
 */
#include <stdint.h>
#include <slurm/spank.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "events/webhook_allow.h"
#include "spank/site.h"
#include "spank/task_failed.h"
#include "spank/validate.h"

SPANK_PLUGIN(dtrun, 1);

#define SAY "dtrun spank: "
/* Slurm's step ids at or above this are the batch, extern and interactive steps, not srun's */
#define SPECIAL_STEPS 0xfffffff0u

static struct dt_spank_site site;
static bool site_ok;
static char opt_config[PATH_MAX], opt_webhook[2048], opt_run_name[256];
static int opt_gpu_bind = -1; /* -1: the admin's default */
static char secret[1024];
static bool secret_missing; /* the admin wants signed posts but the secret cannot be read */
static double budget_end; /* task_failed posts of this step share one deadline */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static bool local(void)
{
    spank_context_t c = spank_context();
    return c == S_CTX_LOCAL || c == S_CTX_ALLOCATOR;
}

static int keep(char *dst, size_t n, const char *opt, const char *v)
{
    if (!v || strlen(v) >= n) {
        slurm_error(SAY "--%s: give a value of at most %zu bytes", opt, n - 1);
        return -1;
    }
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

static int cb_config(int val, const char *arg, int remote)
{
    (void)val, (void)remote;
    return keep(opt_config, sizeof opt_config, "dt-config", arg);
}

/* A URL outside the allow-list is refused where the user typed it. */
static bool url_allowed(const char *url, const char *what)
{
    char host[256];
    if (!dt_url_host(url, host, sizeof host) || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))) {
        slurm_error(SAY "%s: '%s' is not an http:// or https:// URL", what, url);
        return false;
    }
    if (site.allow[0] && !dt_host_allowed(host, site.allow)) {
        slurm_error(SAY "%s: the host %s is not in this cluster's webhook allow-list (%s); use a webhook on one of "
                    "those hosts, or ask the cluster's admins to add it to webhook_allow= in plugstack.conf",
                    what, host, site.allow);
        return false;
    }
    return true;
}

static int cb_webhook(int val, const char *arg, int remote)
{
    (void)val;
    if (keep(opt_webhook, sizeof opt_webhook, "dt-webhook", arg) != 0) return -1;
    return remote || url_allowed(arg, "--dt-webhook") ? 0 : -1;
}

static int cb_run_name(int val, const char *arg, int remote)
{
    (void)val, (void)remote;
    return keep(opt_run_name, sizeof opt_run_name, "dt-run-name", arg);
}

static int cb_gpu_bind(int val, const char *arg, int remote)
{
    (void)val, (void)remote;
    if (arg && !strcmp(arg, "auto")) opt_gpu_bind = 1;
    else if (arg && !strcmp(arg, "none")) opt_gpu_bind = 0;
    else {
        slurm_error(SAY "--dt-gpu-bind=%s: give auto (one GPU per task from the step's GPUs) or none", arg ? arg : "");
        return -1;
    }
    return 0;
}

static struct spank_option options[] = {
    {"dt-config", "FILE", "dtrun: the run's config; checked by `dtrun check` before the job is submitted", 1, 0,
     cb_config},
    {"dt-webhook", "URL", "dtrun: POST the run's events (and task_failed) to URL", 1, 0, cb_webhook},
    {"dt-run-name", "NAME", "dtrun: the run's name (run.name)", 1, 0, cb_run_name},
    {"dt-gpu-bind", "auto|none", "dtrun: one GPU per task from the step's GPUs (auto), or as Slurm set them (none)", 1,
     0, cb_gpu_bind},
    SPANK_OPTIONS_TABLE_END};

static void read_secret(void)
{
    secret[0] = '\0';
    if (!site.secret_file[0]) return;
    FILE *f = fopen(site.secret_file, "re");
    if (!f || !fgets(secret, sizeof secret, f)) {
        slurm_error(SAY "webhook_secret_file=%s: cannot read it (%s); task_failed is not sent unsigned", site.secret_file,
                    f ? "it is empty" : strerror(errno));
        secret[0] = '\0';
        secret_missing = true;
    } else if (!strchr(secret, '\n') && !feof(f)) {
        slurm_error(SAY "webhook_secret_file=%s: its first line is longer than %zu bytes; task_failed is not sent",
                    site.secret_file, sizeof secret - 2);
        secret_missing = true;
    }
    if (f) fclose(f);
    secret[strcspn(secret, "\r\n")] = '\0';
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    char err[512];
    site_ok = dt_spank_site_parse(&site, DT_BINDIR "/dtrun", ac, av, err, sizeof err) == 0;
    if (!site_ok) {
        slurm_error(SAY "plugstack.conf: %s", err);
        if (local()) return -1; /* nothing is submitted until the admin fixes the line */
        return 0;               /* in slurmd and slurmstepd: the plugin stays out of the way */
    }
    for (struct spank_option *o = options; o->name; o++) spank_option_register(sp, o);
    if (spank_context() == S_CTX_REMOTE) read_secret();
    return 0;
}

/* --dt-config: checked here, in the user's srun or sbatch, before anything is allocated. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)sp, (void)ac, (void)av;
    if (!site_ok || !local()) return 0;
    /* what `dtrun check` (and, through the environment, the job) sees */
    if (site.allow[0]) setenv("DTRUN_WEBHOOK_ALLOW", site.allow, 1);
    if (site.webhook[0]) setenv("DTRUN_SITE_WEBHOOK_URL", site.webhook, 1);
    if (opt_webhook[0]) setenv("DTRUN_WEBHOOK_URL", opt_webhook, 1), setenv("DTRUN_JOB_WEBHOOK", opt_webhook, 1);
    if (opt_run_name[0]) setenv("DTRUN_RUN_NAME", opt_run_name, 1);
    if (!opt_config[0]) return 0;
    char abs[PATH_MAX];
    if (!realpath(opt_config, abs)) snprintf(abs, sizeof abs, "%s", opt_config); /* dtrun names what is wrong */
    char url[2048], msg[8192];
    int rc = dt_spank_validate(site.dtrun, abs, 30, url, sizeof url, msg, sizeof msg);
    if (rc != 0) {
        slurm_error(SAY "--dt-config=%s is refused; nothing was submitted:", opt_config);
        for (char *line = strtok(msg, "\n"); line; line = strtok(NULL, "\n")) slurm_error("%s", line);
        return -1;
    }
    setenv("DTRUN_CONFIG", abs, 1);
    if (url[0]) setenv("DTRUN_JOB_WEBHOOK", url, 1);
    return 0;
}

static void set(spank_t sp, const char *var, const char *val, int overwrite)
{
    if (val && *val && spank_setenv(sp, var, val, overwrite) != ESPANK_SUCCESS && overwrite)
        slurm_error(SAY "could not set %s in the task", var);
}

static void set_u(spank_t sp, const char *var, unsigned v)
{
    char b[16];
    snprintf(b, sizeof b, "%u", v);
    set(sp, var, b, 1);
}

/* the i-th entry of a comma list, or "" */
static void nth(const char *list, int i, char *out, size_t n)
{
    out[0] = '\0';
    for (int k = 0; *list; k++) {
        size_t len = strcspn(list, ",");
        if (k == i) {
            snprintf(out, n, "%.*s", (int)len, list);
            return;
        }
        list += len + (list[len] == ',');
    }
}

/* One GPU each: with the step's GPUs all visible to every task (--gres=gpu:N), task i of the node
 * gets the i-th; a task that already sees one (--gpus-per-task=1) is left alone. */
static void bind_gpu(spank_t sp, int local_task, unsigned local_tasks)
{
    char cvd[1024];
    if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", cvd, sizeof cvd) != ESPANK_SUCCESS || !cvd[0]) return;
    unsigned count = 1;
    for (const char *p = cvd; *p; p++) count += *p == ',';
    if (count <= 1 || count < local_tasks) return; /* dtrun itself says why ranks would share a GPU */
    char one[64];
    nth(cvd, local_task, one, sizeof one);
    set(sp, "CUDA_VISIBLE_DEVICES", one, 1);
}

static bool is_dtrun(spank_t sp)
{
    int argc = 0;
    char **argv = NULL;
    if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1 || !argv[0]) return false;
    const char *base = strrchr(argv[0], '/');
    return !strcmp(base ? base + 1 : argv[0], "dtrun");
}

static void nccl_env(spank_t sp)
{
    for (int i = 0; i < site.nenv; i++) {
        char have[1024];
        bool user = spank_getenv(sp, site.env[i][0], have, sizeof have) == ESPANK_SUCCESS;
        if (user && site.nccl_user_override) continue;
        if (user && strcmp(have, site.env[i][1]))
            slurm_error(SAY "%s=%s from your environment is replaced by this cluster's %s (nccl_user_override=no "
                        "in plugstack.conf)", site.env[i][0], have, site.env[i][1]);
        set(sp, site.env[i][0], site.env[i][1], 1);
    }
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac, (void)av;
    if (!site_ok) return 0;
    uint32_t step = 0, rank = 0, size = 0, local_tasks = 0, node = 0, nnodes = 0;
    int local_task = 0;
    spank_get_item(sp, S_JOB_STEPID, &step);
    if (step < SPECIAL_STEPS && spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) == ESPANK_SUCCESS &&
        spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &size) == ESPANK_SUCCESS &&
        spank_get_item(sp, S_TASK_ID, &local_task) == ESPANK_SUCCESS &&
        spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local_tasks) == ESPANK_SUCCESS &&
        spank_get_item(sp, S_JOB_NODEID, &node) == ESPANK_SUCCESS) {
        set_u(sp, "DTRUN_RANK", rank);
        set_u(sp, "DTRUN_WORLD_SIZE", size);
        set_u(sp, "DTRUN_LOCAL_RANK", (unsigned)local_task);
        set_u(sp, "DTRUN_LOCAL_WORLD_SIZE", local_tasks);
        set_u(sp, "DTRUN_NODE_RANK", node);
        if (spank_get_item(sp, S_JOB_NNODES, &nnodes) == ESPANK_SUCCESS && nnodes > 0)
            set_u(sp, "DTRUN_NUM_NODES", nnodes);
        /* other programs (torchrun, a script) keep Slurm's GPUs unless the user asks */
        if (opt_gpu_bind == 1 || (opt_gpu_bind < 0 && site.gpu_bind && is_dtrun(sp)))
            bind_gpu(sp, local_task, local_tasks);
    }
    set(sp, "DTRUN_CONFIG", opt_config, 0); /* the submitting process set the checked absolute path */
    set(sp, "DTRUN_RUN_NAME", opt_run_name, 1);
    set(sp, "DTRUN_WEBHOOK_URL", opt_webhook, 1);
    set(sp, "DTRUN_WEBHOOK_ALLOW", site.allow, 1);
    set(sp, "DTRUN_SITE_WEBHOOK_URL", site.webhook, 1);
    nccl_env(sp);
    return 0;
}

static unsigned item_u(spank_t sp, spank_item_t item)
{
    uint32_t v = 0;
    return spank_get_item(sp, item, &v) == ESPANK_SUCCESS ? v : 0;
}

static unsigned env_u(spank_t sp, const char *var)
{
    char b[32];
    return spank_getenv(sp, var, b, sizeof b) == ESPANK_SUCCESS ? (unsigned)strtoul(b, NULL, 10) : 0;
}

/* Whether the OOM killer killed in this step: slurmstepd sits in <step>/slurm of task/cgroup's
 * cgroup v2 tree, and a step's memory.events counts from 0. -1: no such tree (task/none, v1). */
static int step_oom(void)
{
    char dir[4096];
    dt_cgroup_dir((long)getpid(), dir, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (!slash || strcmp(slash, "/slurm")) return -1;
    *slash = '\0';
    const char *step = strrchr(dir, '/');
    if (!step || strncmp(step, "/step_", 6)) return -1;
    long kills = dt_oom_kills(dir);
    return kills < 0 ? -1 : kills > 0;
}

/* In slurmstepd, as root, once per task: never fails the step, never waits past the deadline. */
int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
    (void)ac, (void)av;
    int status = 0;
    uint32_t u = 0;
    /* the batch script ends as its srun step did, whose own slurmstepd has said so */
    if (!site_ok || spank_get_item(sp, S_JOB_STEPID, &u) != ESPANK_SUCCESS || u >= SPECIAL_STEPS) return 0;
    if (spank_get_item(sp, S_TASK_EXIT_STATUS, &status) != ESPANK_SUCCESS) return 0;
    if (!dt_task_failed_wanted(status, is_dtrun(sp))) return 0;
    char url[2048], host[256];
    if (spank_getenv(sp, "DTRUN_JOB_WEBHOOK", url, sizeof url) != ESPANK_SUCCESS || !url[0])
        snprintf(url, sizeof url, "%s", opt_webhook[0] ? opt_webhook : site.webhook);
    if (!url[0]) return 0; /* this job has no webhook */
    /* root posts only where the admin allows: the admin's own webhook, or a host in webhook_allow */
    bool admins = site.webhook[0] && !strcmp(url, site.webhook);
    if (!dt_url_host(url, host, sizeof host) || (!admins && !dt_host_allowed(host, site.allow))) {
        slurm_error(SAY "task_failed not sent: the job's webhook host is not in webhook_allow (%s)",
                    site.allow[0] ? site.allow : "not set: task_failed goes only to the admin's webhook=");
        return 0;
    }
    if (secret_missing) return 0; /* said at start */
    struct dt_task_end e = {.oom = -1, .step = u};
    char node[256] = "", name[256] = "";
    e.job = item_u(sp, S_JOB_ID);
    e.task = (int)item_u(sp, S_TASK_GLOBAL_ID);
    e.node_rank = (int)item_u(sp, S_JOB_NODEID);
    spank_get_item(sp, S_TASK_ID, &e.local_task);
    pid_t pid = 0;
    spank_get_item(sp, S_TASK_PID, &pid), e.pid = (long)pid;
    e.restart = env_u(sp, "SLURM_RESTART_COUNT"); /* S_SLURM_RESTART_COUNT reads 0 (TESTBED.md) */
    if (spank_getenv(sp, "SLURMD_NODENAME", node, sizeof node) != ESPANK_SUCCESS) gethostname(node, sizeof node - 1);
    e.node = node;
    if (opt_run_name[0]) e.run_name = opt_run_name;
    else if (spank_getenv(sp, "DTRUN_RUN_NAME", name, sizeof name) == ESPANK_SUCCESS) e.run_name = name;
    e.status = status;
    e.oom = step_oom();
    double t = now();
    if (budget_end == 0) budget_end = t + site.timeout;
    if (budget_end - t < 0.01) {
        slurm_error(SAY "task_failed of task %d not sent: this step's %.1f s for them are spent", e.task, site.timeout);
        return 0;
    }
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    char *json = dt_task_failed_json(&e, (double)wall.tv_sec + (double)wall.tv_nsec * 1e-9);
    char why[256];
    if (!json) return 0;
    if (dt_task_failed_post(url, host, secret[0] ? secret : NULL, json, budget_end - t, why, sizeof why) != 0)
        slurm_error(SAY "task_failed of task %d not delivered to %s: %s", e.task, host, why);
    free(json);
    return 0;
}
