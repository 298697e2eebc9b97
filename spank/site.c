/* site.c - see site.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "events/sign.h"
#include "events/webhook_allow.h"
#include "spank/site.h"

static const char accepted[] = "dtrun=PATH, webhook=URL, webhook_allow=HOST[,HOST...], webhook_secret_file=PATH, "
                               "task_failed_timeout=SECONDS, gpu_bind=auto|none, nccl_user_override=yes|no, NCCL_*=VALUE";

static int copy(char *dst, size_t cap, const char *key, const char *v, char *err, size_t n)
{
    if (strlen(v) >= cap) {
        snprintf(err, n, "%s= is longer than %zu bytes", key, cap - 1);
        return -1;
    }
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

static int yes_no(bool *out, const char *key, const char *v, const char *yes, const char *no, char *err, size_t n)
{
    if (!strcmp(v, yes)) *out = true;
    else if (!strcmp(v, no)) *out = false;
    else {
        snprintf(err, n, "%s=%.64s: give %s or %s", key, v, yes, no);
        return -1;
    }
    return 0;
}

static int word(struct dt_spank_site *s, const char *w, char *err, size_t n)
{
    const char *eq = strchr(w, '=');
    if (!eq || eq == w) {
        snprintf(err, n, "'%.64s' is not key=value (accepted: %s)", w, accepted);
        return -1;
    }
    char key[64];
    if ((size_t)(eq - w) >= sizeof key) {
        snprintf(err, n, "unknown argument '%.64s' (accepted: %s)", w, accepted);
        return -1;
    }
    memcpy(key, w, (size_t)(eq - w));
    key[eq - w] = '\0';
    const char *v = eq + 1;
    if (!strcmp(key, "dtrun")) {
        if (v[0] != '/') {
            snprintf(err, n, "dtrun=%.64s: give the absolute path of the dtrun program", v);
            return -1;
        }
        return copy(s->dtrun, sizeof s->dtrun, key, v, err, n);
    }
    if (!strcmp(key, "webhook")) {
        char host[256];
        if (!dt_url_host(v, host, sizeof host) || (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))) {
            snprintf(err, n, "webhook=%.64s: give an http:// or https:// URL", v);
            return -1;
        }
        return copy(s->webhook, sizeof s->webhook, key, v, err, n);
    }
    if (!strcmp(key, "webhook_allow")) return copy(s->allow, sizeof s->allow, key, v, err, n);
    if (!strcmp(key, "webhook_secret_file")) {
        if (v[0] != '/') {
            snprintf(err, n, "webhook_secret_file=%.64s: give an absolute path", v);
            return -1;
        }
        if (!dt_sign_available()) {
            snprintf(err, n, "webhook_secret_file: this build of the plugin has no libcrypto to sign with; rebuild "
                     "dtrun with libssl-dev installed");
            return -1;
        }
        return copy(s->secret_file, sizeof s->secret_file, key, v, err, n);
    }
    if (!strcmp(key, "task_failed_timeout")) {
        char *end;
        errno = 0;
        double t = strtod(v, &end);
        if (end == v || *end || errno || !isfinite(t) || t <= 0 || t > 60) {
            snprintf(err, n, "task_failed_timeout=%.64s: give seconds, more than 0 and at most 60", v);
            return -1;
        }
        s->timeout = t;
        return 0;
    }
    if (!strcmp(key, "gpu_bind")) return yes_no(&s->gpu_bind, key, v, "auto", "none", err, n);
    if (!strcmp(key, "nccl_user_override")) return yes_no(&s->nccl_user_override, key, v, "yes", "no", err, n);
    if (!strncmp(key, "NCCL_", 5) && key[5]) {
        for (int i = 0; i < s->nenv; i++)
            if (!strcmp(s->env[i][0], key)) return copy(s->env[i][1], sizeof s->env[i][1], key, v, err, n);
        if (s->nenv == DT_SPANK_MAX_ENV) {
            snprintf(err, n, "more than %d NCCL_* settings", DT_SPANK_MAX_ENV);
            return -1;
        }
        snprintf(s->env[s->nenv][0], sizeof s->env[s->nenv][0], "%s", key);
        return copy(s->env[s->nenv++][1], sizeof s->env[0][1], key, v, err, n);
    }
    snprintf(err, n, "unknown argument '%s' (accepted: %s)", key, accepted);
    return -1;
}

int dt_spank_site_parse(struct dt_spank_site *s, const char *default_dtrun, int argc, char **argv, char *err,
                        size_t n)
{
    *s = (struct dt_spank_site){.timeout = 2, .gpu_bind = true, .nccl_user_override = true};
    snprintf(s->dtrun, sizeof s->dtrun, "%s", default_dtrun);
    err[0] = '\0';
    for (int i = 0; i < argc; i++)
        if (word(s, argv[i], err, n) != 0) return -1;
    return 0;
}
