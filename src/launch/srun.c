/*
 * srun.c - `dtrun CONFIG` inside an allocation but outside a step (a batch
 * script, salloc): re-run as one srun step with the geometry the config and
 * the allocation resolved to, PMIx for wire-up, and --kill-on-bad-exit so a
 * dead rank ends the step (REFERENCE.md problem 34).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/error.h"
#include "launch/launch.h"

bool dt_srun_wanted(void)
{
    const char *job = getenv("SLURM_JOB_ID");
    return job && *job && !getenv("SLURM_STEP_ID") && !getenv("PMIX_RANK") && !getenv("OMPI_COMM_WORLD_RANK") &&
           !getenv("DTRUN_NO_SRUN");
}

void dt_shell_quote(FILE *f, const char *s)
{
    if (*s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+=.,/:@%") == strlen(s)) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputs("'\\''", f);
        else fputc(*s, f);
    }
    fputc('\'', f);
}

dt_status_t dt_srun(const struct dt_config *cfg, int argc, char **argv, bool dry_run)
{
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return dt_error(DT_ERR_SYSTEM, "dtrun: error: cannot find this program (/proc/self/exe)");
    self[len] = '\0';
    char nodes[32], per_node[48];
    snprintf(nodes, sizeof nodes, "--nodes=%d", cfg->resolved.nodes);
    snprintf(per_node, sizeof per_node, "--ntasks-per-node=%d", cfg->resolved.devices_per_node);
    const char *fixed[] = {"srun", "--mpi=pmix", "--kill-on-bad-exit=1", nodes, per_node,
                           cfg->compute.device == DT_DEVICE_CUDA ? "--gpus-per-task=1" : NULL};
    char **args = calloc((size_t)argc + 16, sizeof *args);
    if (!args) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    int k = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (fixed[i]) args[k++] = (char *)fixed[i];
    args[k++] = self;
    args[k++] = "run";
    for (int i = 0; i < argc; i++) args[k++] = argv[i];
    FILE *f = dry_run ? stdout : stderr;
    if (!dry_run) fputs("dtrun: in Slurm job ", f), fputs(getenv("SLURM_JOB_ID"), f), fputs(", running: ", f);
    for (int i = 0; i < k; i++) {
        if (i) fputc(' ', f);
        dt_shell_quote(f, args[i]);
    }
    fputc('\n', f);
    fflush(f);
    if (dry_run) {
        free(args);
        return DT_SUCCESS;
    }
    execvp("srun", args);
    int e = errno;
    free(args);
    return dt_error(DT_ERR_SYSTEM, "dtrun: error: cannot run srun: %s\n  hint: the Slurm client tools must be on PATH "
                    "inside the allocation, or run `srun --mpi=pmix dtrun ...` yourself", strerror(e));
}
