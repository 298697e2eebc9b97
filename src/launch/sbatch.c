/*
 * sbatch.c - `dtrun submit`: an sbatch template whose #SBATCH lines are
 * filled in from the resolved config (geometry, time, partition, the
 * checkpoint-and-requeue signal), given to sbatch. The templates stay
 * runnable as they are (`sbatch templates/sbatch/single-node.sh`); submit
 * replaces the directives it sets, keeps the others, and adds a block that
 * names the dtrun, config and overrides the body runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "core/error.h"
#include "core/installdir.h"
#include "launch/launch.h"

#define MAX_LINES 4096
#define MAX_DIRECTIVES 64

struct script {
    char *text;         /* the template */
    char *line[MAX_LINES];
    int n;
    char *dir[MAX_DIRECTIVES]; /* our #SBATCH options, malloc'd */
    int ndir;
};

static void script_free(struct script *s)
{
    free(s->text);
    for (int i = 0; i < s->ndir; i++) free(s->dir[i]);
}

/* The built-in templates: the source tree's for a dtrun run from its build tree, else the installed. */
static void builtin(const char *name, char *buf, size_t n)
{
    if (dt_from_build_tree())
        snprintf(buf, n, "%s/templates/sbatch/%s", DT_SRCDIR, name);
    else snprintf(buf, n, "%s/templates/sbatch/%s", DT_PKGDATADIR, name);
}

static dt_status_t read_template(const char *path, struct script *s)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return dt_error(DT_ERR_CONFIG, "%s: error: cannot read the sbatch template: %s\n  hint: set slurm.template to "
                        "an sbatch script, or null for dtrun's own (templates/sbatch/)", path, strerror(errno));
    char *text = malloc(1 << 20);
    size_t len = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
    bool big = text && !feof(f);
    fclose(f);
    if (!text) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    text[len] = '\0';
    s->text = text;
    if (big) return dt_error(DT_ERR_CONFIG, "%s: error: the sbatch template is larger than 1 MiB", path);
    for (char *p = text; *p;) {
        if (s->n == MAX_LINES)
            return dt_error(DT_ERR_CONFIG, "%s: error: the sbatch template has more than %d lines", path, MAX_LINES);
        s->line[s->n++] = p;
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }
    return DT_SUCCESS;
}

/* opt: "--nodes" of "#SBATCH --nodes=2"; false when the line is not a directive */
static bool directive(const char *line, char *opt, size_t n)
{
    if (strncmp(line, "#SBATCH", 7) || (line[7] != ' ' && line[7] != '\t')) return false;
    const char *p = line + 7 + strspn(line + 7, " \t");
    size_t len = strcspn(p, "= \t");
    snprintf(opt, n, "%.*s", (int)len, p);
    return true;
}

/* "opt=value", or "opt" alone when value is NULL */
static dt_status_t add(struct script *s, const char *opt, const char *value)
{
    if (s->ndir == MAX_DIRECTIVES) return dt_error(DT_ERR_CONFIG, "dtrun: error: more than %d sbatch options", MAX_DIRECTIVES);
    /* sbatch reads a directive up to the line's end or an unquoted '#', a quoted value as it is
     * (no escapes): so no line breaks, quotes or backslashes, and quotes around anything unusual */
    for (const char *p = value; p && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\')
            return dt_error(DT_ERR_CONFIG, "dtrun: error: the sbatch option %s=%s cannot hold a control character, a "
                            "double quote or a backslash\n  hint: change the value in the config", opt, value);
    static const char safe[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+=.,/:@%";
    bool plain = !value || strspn(value, safe) == strlen(value);
    char buf[2048];
    if (!value) snprintf(buf, sizeof buf, "%s", opt);
    else snprintf(buf, sizeof buf, plain ? "%s=%s" : "%s=\"%s\"", opt, value);
    if (!(s->dir[s->ndir] = strdup(buf))) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    s->ndir++;
    return DT_SUCCESS;
}

static dt_status_t directives(const struct dt_config *cfg, const char *run_dir, struct script *s)
{
    char v[64];
    DT_CHECK(add(s, "--job-name", cfg->run.name));
    snprintf(v, sizeof v, "%d", cfg->resolved.nodes);
    DT_CHECK(add(s, "--nodes", v));
    snprintf(v, sizeof v, "%d", cfg->resolved.devices_per_node);
    DT_CHECK(add(s, "--ntasks-per-node", v));
    if (cfg->compute.device == DT_DEVICE_CUDA) DT_CHECK(add(s, "--gpus-per-task", "1"));
    if (cfg->slurm.time) DT_CHECK(add(s, "--time", cfg->slurm.time));
    if (cfg->slurm.partition) DT_CHECK(add(s, "--partition", cfg->slurm.partition));
    if (cfg->slurm.account) DT_CHECK(add(s, "--account", cfg->slurm.account));
    if (cfg->slurm.qos) DT_CHECK(add(s, "--qos", cfg->slurm.qos));
    if (cfg->slurm.constraint) DT_CHECK(add(s, "--constraint", cfg->slurm.constraint));
    /* every step's processes get USR1: dtrun saves at a step boundary and requeues (README) */
    char signal[32];
    snprintf(signal, sizeof signal, "USR1@%.0f", cfg->slurm.signal_grace);
    DT_CHECK(add(s, "--signal", signal));
    DT_CHECK(add(s, cfg->slurm.requeue ? "--requeue" : "--no-requeue", NULL));
    DT_CHECK(add(s, "--open-mode=append", NULL)); /* a requeued job's output follows the first's */
    char out[PATH_MAX + 32];
    snprintf(out, sizeof out, "%s/slurm-%%j.out", run_dir);
    DT_CHECK(add(s, "--output", out));
    if (cfg->slurm.extra) {
        char *copy = strdup(cfg->slurm.extra), *save = NULL;
        if (!copy) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
        dt_status_t rc = DT_SUCCESS;
        for (char *w = strtok_r(copy, " \t\n", &save); w && rc == DT_SUCCESS; w = strtok_r(NULL, " \t\n", &save))
            rc = w[0] == '-' ? add(s, w, NULL)
                             : dt_error(DT_ERR_CONFIG, "dtrun: error: slurm.extra: '%s' is not an sbatch option\n  hint: "
                                        "write options as sbatch takes them, e.g. \"--exclusive --mail-type=END\"", w);
        free(copy);
        DT_CHECK(rc);
    }
    return DT_SUCCESS;
}

/* a template's directive that sets what ours set: one option alone on its line, long or short */
static bool ours(const struct script *s, const char *line)
{
    char opt[128];
    if (!directive(line, opt, sizeof opt)) return false;
    const char *p = line + 7 + strspn(line + 7, " \t") + strlen(opt);
    if (*p == '=' || *p == ' ' || *p == '\t') p += strcspn(p + 1, " \t") + 1; /* its value */
    if (p[strspn(p, " \t")] != '\0' && p[strspn(p, " \t")] != '#') return false; /* more options: kept */
    static const char *const shorts[][2] = {{"-J", "--job-name"}, {"-N", "--nodes"}, {"-t", "--time"},
                                             {"-p", "--partition"}, {"-A", "--account"}, {"-q", "--qos"},
                                             {"-C", "--constraint"}, {"-o", "--output"}};
    for (size_t i = 0; i < sizeof shorts / sizeof shorts[0]; i++)
        if (!strcmp(opt, shorts[i][0])) snprintf(opt, sizeof opt, "%s", shorts[i][1]);
    size_t len = strlen(opt);
    for (int i = 0; i < s->ndir; i++)
        if (!strncmp(s->dir[i], opt, len) && (s->dir[i][len] == '=' || s->dir[i][len] == '\0')) return true;
    /* --requeue and --no-requeue say the one thing */
    return !strcmp(opt, "--requeue") || !strcmp(opt, "--no-requeue");
}

/* s inside a comment line: a line break would end it */
static void comment(FILE *f, const char *s)
{
    for (; *s; s++) fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

static void render(const struct script *s, const char *template, const char *config, const char *url, int nov,
                   char *const *ov, FILE *f)
{
    int last = -1;
    char opt[128];
    for (int i = 0; i < s->n; i++)
        if (directive(s->line[i], opt, sizeof opt)) last = i;
    char self[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    self[k > 0 ? k : 0] = '\0';
    for (int i = 0; i < s->n; i++) {
        if (!ours(s, s->line[i])) fprintf(f, "%s\n", s->line[i]);
        if (i != last) continue;
        /* after the template's own: where sbatch sees an option twice, the later one counts */
        for (int d = 0; d < s->ndir; d++) fprintf(f, "#SBATCH %s\n", s->dir[d]);
        time_t t = time(NULL);
        char when[32];
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
        fputs("# filled in by dtrun submit from ", f);
        comment(f, config ? config : "the built-in default");
        fputs(" (template ", f);
        comment(f, template);
        fprintf(f, ") at %s\nexport DTRUN=", when);
        dt_shell_quote(f, self);
        if (url) { /* where the SPANK plugin sends task_failed (spank/README.md) */
            fputs("\nexport DTRUN_JOB_WEBHOOK=", f);
            dt_shell_quote(f, url);
        }
        fputs("\nset --", f);
        if (config) fputc(' ', f), dt_shell_quote(f, config);
        for (int o = 0; o < nov; o++) fputc(' ', f), dt_shell_quote(f, ov[o]);
        fputc('\n', f);
    }
}

static dt_status_t mkdirs(const char *path)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return dt_error(DT_ERR_SYSTEM, "%s: error: cannot create run.dir: %s", p, strerror(errno));
        if (!c) return DT_SUCCESS;
        *s = c;
    }
}

/* sbatch --parsable: the job id on stdout, its own messages on ours */
static dt_status_t run_sbatch(const char *script, int n, char *const *args, char *id, size_t idn)
{
    char **argv = calloc((size_t)n + 4, sizeof *argv);
    if (!argv) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    int k = 0;
    argv[k++] = "sbatch";
    argv[k++] = "--parsable";
    for (int i = 0; i < n; i++) argv[k++] = args[i];
    argv[k++] = (char *)script;
    int p[2];
    if (pipe(p) != 0) {
        free(argv);
        return dt_error(DT_ERR_SYSTEM, "dtrun: error: cannot make a pipe: %s", strerror(errno));
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execvp("sbatch", argv);
        fprintf(stderr, "dtrun: error: cannot run sbatch: %s\n  hint: run dtrun submit where the Slurm client tools "
                "are on PATH (a login node)\n", strerror(errno));
        _exit(127);
    }
    free(argv);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return dt_error(DT_ERR_SYSTEM, "dtrun: error: cannot fork: %s", strerror(errno));
    }
    size_t len = 0;
    ssize_t r;
    while (len + 1 < idn && ((r = read(p[0], id + len, idn - 1 - len)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0) len += (size_t)r;
    id[len] = '\0';
    close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    id[strcspn(id, ";\n")] = '\0'; /* "123" or "123;cluster" */
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !id[0])
        return dt_error(DT_ERR_SYSTEM, "dtrun: error: sbatch refused the job (%s %d; its message is above); the script "
                        "is %s\n  hint: `dtrun submit CONFIG --dry-run` prints it; sbatch options go after --",
                        WIFEXITED(st) ? "exit code" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), script);
    return DT_SUCCESS;
}

dt_status_t dt_submit(const struct dt_config *cfg, const char *config, int noverrides, char *const *overrides,
                      int nsbatch, char *const *sbatch_args, bool dry_run)
{
    char template[PATH_MAX], abs_config[PATH_MAX], run_dir[PATH_MAX];
    if (cfg->slurm.template) snprintf(template, sizeof template, "%s", cfg->slurm.template);
    else builtin(cfg->resolved.nodes > 1 ? "multi-node.sh" : "single-node.sh", template, sizeof template);
    if (config && !realpath(config, abs_config))
        return dt_error(DT_ERR_CONFIG, "%s: error: %s", config, strerror(errno));
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return dt_error(DT_ERR_SYSTEM, "dtrun: error: cannot read the current directory");
    if (cfg->run.dir[0] == '/') snprintf(run_dir, sizeof run_dir, "%s", cfg->run.dir);
    else snprintf(run_dir, sizeof run_dir, "%s/%s", cwd, cfg->run.dir);
    char shown[PATH_MAX];
    if (realpath(template, shown)) snprintf(template, sizeof template, "%s", shown);
    struct script s = {0};
    dt_status_t rc = read_template(template, &s);
    char opt[128];
    bool any = false;
    for (int i = 0; rc == DT_SUCCESS && i < s.n; i++) any |= directive(s.line[i], opt, sizeof opt);
    if (rc == DT_SUCCESS && !any)
        rc = dt_error(DT_ERR_CONFIG, "%s: error: no #SBATCH line: not an sbatch template\n  hint: start from "
                      "templates/sbatch/single-node.sh", template);
    if (rc == DT_SUCCESS) rc = directives(cfg, run_dir, &s);
    if (rc != DT_SUCCESS || dry_run) {
        if (rc == DT_SUCCESS) render(&s, template, config ? abs_config : NULL, cfg->events.webhook.url, noverrides, overrides, stdout);
        script_free(&s);
        return rc;
    }
    char path[PATH_MAX + 16], id[64];
    snprintf(path, sizeof path, "%s/sbatch.sh", run_dir);
    rc = mkdirs(run_dir);
    /* 0600: it may name a webhook URL with a token in it */
    int fd = rc == DT_SUCCESS ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (rc == DT_SUCCESS && !f) rc = dt_error(DT_ERR_SYSTEM, "%s: error: cannot write the job script: %s", path, strerror(errno));
    if (f) {
        render(&s, template, config ? abs_config : NULL, cfg->events.webhook.url, noverrides, overrides, f);
        if (fclose(f) != 0) rc = dt_error(DT_ERR_SYSTEM, "%s: error: cannot write the job script: %s", path, strerror(errno));
    }
    script_free(&s);
    if (rc == DT_SUCCESS) rc = run_sbatch(path, nsbatch, sbatch_args, id, sizeof id);
    if (rc != DT_SUCCESS) return rc;
    printf("%s\n", id);
    if (cfg->compute.device == DT_DEVICE_AUTO && cfg->resolved.gpus == 0)
        fprintf(stderr, "dtrun: note: compute.device is auto and this machine has no GPU, so the job asks for none; "
                "set compute.device: cuda to ask for one GPU per task\n");
    fprintf(stderr, "dtrun: submitted batch job %s (%d node%s x %d tasks); output in %s/slurm-%s.out, script %s\n", id,
            cfg->resolved.nodes, cfg->resolved.nodes > 1 ? "s" : "", cfg->resolved.devices_per_node, run_dir, id, path);
    return DT_SUCCESS;
}
