/*
 * site.h - the dtrun SPANK plugin's admin arguments: the words after the
 * plugin's path in plugstack.conf, each key=value. Pure (no Slurm calls), so
 * it is unit-tested and fuzzed on its own.
 */
#ifndef DT_SPANK_SITE_H
#define DT_SPANK_SITE_H

#include <stdbool.h>
#include <stddef.h>

#define DT_SPANK_MAX_ENV 16

struct dt_spank_site {
    char dtrun[1024];       /* dtrun=PATH: the binary that validates --dt-config */
    char webhook[2048];     /* webhook=URL: default webhook of every job */
    char allow[1024];       /* webhook_allow=HOST,...: hosts webhooks may name ("" any) */
    char secret_file[1024]; /* webhook_secret_file=PATH: HMAC key of task_failed (root-readable) */
    double timeout;         /* task_failed_timeout=SECONDS (default 2) */
    bool gpu_bind;          /* gpu_bind=auto|none (default auto) */
    bool nccl_user_override; /* nccl_user_override=yes|no (default yes) */
    int nenv;
    char env[DT_SPANK_MAX_ENV][2][256]; /* NCCL_*=VALUE: the cluster's NCCL settings */
};

/* The defaults (dtrun is default_dtrun), then argv's key=value words. 0, or -1 with
 * err naming the word, why, and what is accepted. */
int dt_spank_site_parse(struct dt_spank_site *s, const char *default_dtrun, int argc, char **argv, char *err,
                        size_t n);

#endif
