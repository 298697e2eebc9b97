/*
 * resolve.c - which checkpoint a path given to `dtrun ckpt ...` means (ckpt.h): whatever a user
 * has at hand names one. A checkpoint (step-<N>/ with its manifest) is itself; a checkpoint.dir is
 * its newest valid checkpoint (as checkpoint.resume: auto takes it); its `latest` file is the
 * checkpoint it names; a run.dir is its checkpoint.dir's newest (the caller read where that is
 * from the run's config.yaml). The choice is said, and so is what was looked for when none is found.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "config/config.h"
#include "core/error.h"

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The newest valid checkpoint of checkpoint.dir dir (the invalid ones are named and skipped by
 * dt_ckpt_find); what, besides dir, the error says it was asked for. */
static dt_status_t newest(const char *arg, const char *dir, const char *what, char *path, size_t n)
{
    int k = 0;
    free(dt_ckpt_steps(dir, &k));
    bool found;
    DT_CHECK(dt_ckpt_find(dir, "auto", path, n, &found));
    if (found) return DT_SUCCESS;
    if (k > 0)
        return dt_error(DT_ERR_CKPT, "%s: error: no valid checkpoint in %s%s: its %d step-<N> director%s failed the "
                        "checks named above\n  hint: a save interrupted before its manifest was written is not a "
                        "checkpoint; resume from an earlier one, or start afresh", arg, dir, what, k,
                        k == 1 ? "y" : "ies");
    return dt_error(DT_ERR_CKPT, "%s: error: no valid checkpoint here: looked for step-<N>/manifest.json in %s%s and "
                    "found none\n  hint: a run saves at checkpoint.interval and at its end", arg, dir, what);
}

dt_status_t dt_ckpt_resolve(const char *arg, const char *run_ckpt_dir, char *path, size_t n, FILE *log)
{
    char p[4200];
    struct stat st;
    if (stat(arg, &st) != 0)
        return dt_error(DT_ERR_USAGE, "%s: error: %s\n  hint: give a checkpoint (step-<N>/), a checkpoint.dir, its "
                        "latest file, or a run.dir", arg, strerror(errno));
    if (S_ISREG(st.st_mode)) { /* a `latest` file: the checkpoint it names, beside it */
        FILE *f = fopen(arg, "r");
        char name[64] = "";
        if (!f) return dt_error(DT_ERR_SYSTEM, "%s: error: cannot read: %s", arg, strerror(errno));
        bool ok = fgets(name, sizeof name, f) != NULL;
        fclose(f);
        long long step;
        int used = 0;
        name[strcspn(name, "\n")] = '\0';
        if (!ok || sscanf(name, "step-%lld%n", &step, &used) != 1 || name[used] != '\0')
            return dt_error(DT_ERR_USAGE, "%s: error: this file names no checkpoint (a checkpoint.dir's latest holds "
                            "one line, step-<N>)\n  hint: give a checkpoint (step-<N>/), a checkpoint.dir, its "
                            "latest file, or a run.dir", arg);
        const char *slash = strrchr(arg, '/');
        if (slash) snprintf(p, sizeof p, "%.*s/%s", (int)(slash - arg), arg, name);
        else snprintf(p, sizeof p, "%s", name);
        struct dt_ckpt *c;
        DT_CHECK(dt_ckpt_open(p, true, &c));
        dt_ckpt_close(c);
        snprintf(path, n, "%s", p);
        if (log) fprintf(log, "dtrun: ckpt: %s names %s: step %lld\n", arg, path, step);
        return DT_SUCCESS;
    }
    snprintf(p, sizeof p, "%s/manifest.json", arg);
    if (access(p, F_OK) == 0 || !S_ISDIR(st.st_mode)) { /* a checkpoint, or an error naming what it lacks */
        snprintf(path, n, "%s", arg);
        return DT_SUCCESS;
    }
    int k = 0;
    free(dt_ckpt_steps(arg, &k));
    snprintf(p, sizeof p, "%s/latest", arg);
    if (k > 0 || access(p, F_OK) == 0) { /* a checkpoint.dir */
        DT_CHECK(newest(arg, arg, "", path, n));
        if (log) fprintf(log, "dtrun: ckpt: %s: its newest valid checkpoint is %s\n", arg, path);
        return DT_SUCCESS;
    }
    if (!run_ckpt_dir)
        return dt_error(DT_ERR_CKPT, "%s: error: no valid checkpoint here: looked for %s/manifest.json (a checkpoint), "
                        "%s/step-<N>/ (a checkpoint.dir) and %s/config.yaml (a run.dir) and found none of them\n"
                        "  hint: give a checkpoint (step-<N>/), a checkpoint.dir, its latest file, or a run.dir", arg,
                        arg, arg, arg);
    /* a run.dir */
    if (!run_ckpt_dir[0])
        return dt_error(DT_ERR_CKPT, "%s: error: this run saved no checkpoints (checkpoint.dir: null in "
                        "%s/config.yaml)\n  hint: set checkpoint.dir to save them", arg, arg);
    char what[4300];
    snprintf(what, sizeof what, " (the checkpoint.dir of run.dir %s, from its config.yaml)", arg);
    if (!is_dir(run_ckpt_dir))
        return dt_error(DT_ERR_CKPT, "%s: error: no valid checkpoint: %s%s %s\n  hint: a run saves at "
                        "checkpoint.interval and at its end", arg, run_ckpt_dir, what,
                        access(run_ckpt_dir, F_OK) == 0 ? "is not a directory" : "does not exist");
    DT_CHECK(newest(arg, run_ckpt_dir, what, path, n));
    if (log) fprintf(log, "dtrun: ckpt: %s is a run.dir: its checkpoint.dir %s holds the newest valid checkpoint %s\n",
                     arg, run_ckpt_dir, path);
    return DT_SUCCESS;
}

dt_status_t dt_ckpt_resolve_arg(const char *arg, char *path, size_t n)
{
    char yaml[4200], manifest[4200], dir[4200];
    snprintf(yaml, sizeof yaml, "%s/config.yaml", arg);
    snprintf(manifest, sizeof manifest, "%s/manifest.json", arg);
    if (access(yaml, F_OK) != 0 || access(manifest, F_OK) == 0) return dt_ckpt_resolve(arg, NULL, path, n, stderr);
    struct dt_config cfg;
    DT_CHECK(dt_config_init(&cfg));
    dt_status_t rc = dt_config_load(&cfg, NULL, yaml, 0, NULL);
    if (rc == DT_SUCCESS) {
        const char *c = cfg.checkpoint.dir ? cfg.checkpoint.dir : "";
        if (c[0] == '/' || !c[0]) snprintf(dir, sizeof dir, "%s", c);
        else snprintf(dir, sizeof dir, "%s/%s", arg, c);
        rc = dt_ckpt_resolve(arg, dir, path, n, stderr);
    }
    dt_config_free(&cfg);
    return rc;
}
