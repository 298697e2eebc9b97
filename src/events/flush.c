/* flush.c - `dtrun events flush RUN_DIR`: send what a run left in its spools (and what the
 * receiver refused, once it is fixed), with the run's own webhook settings. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/dirlock.h"
#include "core/error.h"
#include "core/log.h"
#include "events/events.h"
#include "events/spool.h"
#include "events/webhook.h"

/* PATH.rejected goes back to the end of PATH's spool: the receiver may take it now. */
static dt_status_t requeue_rejected(const char *spool)
{
    char path[4200];
    snprintf(path, sizeof path, "%s.rejected", spool);
    FILE *f = fopen(path, "r");
    if (!f) return DT_SUCCESS;
    struct dt_spool s;
    dt_status_t rc = dt_spool_open(&s, spool);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while (rc == DT_SUCCESS && (n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] == '\n') line[n - 1] = '\0';
        if (line[0]) rc = dt_spool_append(&s, line);
    }
    free(line);
    fclose(f);
    if (rc == DT_SUCCESS) {
        dt_spool_close(&s);
        unlink(path);
    }
    return rc;
}

static dt_status_t flush_dir(const struct dt_config *cfg, const char *run_dir, FILE *out)
{
    char pattern[4200];
    glob_t g;
    snprintf(pattern, sizeof pattern, "%s/events*.spool.rejected", run_dir);
    dt_status_t rc = DT_SUCCESS;
    if (glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && rc == DT_SUCCESS; i++) {
            g.gl_pathv[i][strlen(g.gl_pathv[i]) - strlen(".rejected")] = '\0';
            rc = requeue_rejected(g.gl_pathv[i]);
        }
        globfree(&g);
        DT_CHECK(rc);
    }
    snprintf(pattern, sizeof pattern, "%s/events*.spool", run_dir);
    if (glob(pattern, 0, NULL, &g) != 0) {
        fprintf(out, "dtrun: events flush: nothing spooled in %s\n", run_dir);
        return DT_SUCCESS;
    }
    int64_t left = 0;
    struct dt_webhook_cfg wc;
    char *headers, *secret;
    rc = dt_webhook_cfg_from(cfg, NULL, &wc, &headers, &secret);
    for (size_t i = 0; i < g.gl_pathc && rc == DT_SUCCESS; i++) {
        struct dt_webhook *w = NULL;
        wc.spool = g.gl_pathv[i];
        rc = dt_webhook_open(&wc, &w);
        if (rc == DT_SUCCESS) {
            struct dt_webhook_stats st;
            dt_webhook_close(w, cfg->events.webhook.flush_timeout, &st);
            fprintf(out, "dtrun: events flush: %s: %lld delivered, %lld left\n", g.gl_pathv[i],
                    (long long)st.delivered, (long long)st.left);
            left += st.left;
        }
    }
    free(headers);
    free(secret);
    globfree(&g);
    if (rc == DT_SUCCESS && left)
        rc = dt_error(DT_ERR_SYSTEM, "dtrun: error: %lld events are still spooled in %s: the endpoint did not take "
                      "them within events.webhook.flush_timeout (%gs)\n  hint: check the receiver, then run this again "
                      "(events.webhook.flush_timeout=60s gives it longer)", (long long)left, run_dir,
                      cfg->events.webhook.flush_timeout);
    return rc;
}

dt_status_t dt_events_flush(const struct dt_config *cfg, const char *run_dir, FILE *out)
{
    if (!cfg->events.webhook.url)
        return dt_error(DT_ERR_CONFIG, "%s/config.yaml: error: events.webhook.url is null, so there is nowhere to send "
                        "to\n  hint: dtrun events flush %s events.webhook.url=https://...", run_dir, run_dir);
    if (strstr(cfg->events.webhook.url, "://***@"))
        return dt_error(DT_ERR_CONFIG, "%s/config.yaml: error: the webhook URL's credentials were masked when the run "
                        "saved it\n  hint: give it again: dtrun events flush %s events.webhook.url=...", run_dir,
                        run_dir);
    if (cfg->events.webhook.insecure)
        DT_WARN("events.webhook.insecure is true: the webhook's TLS certificate is not verified");
    /* a run still in that directory sends its own spool: two senders would send it twice */
    struct dt_dirlock lock;
    DT_CHECK(dt_dirlock_take(&lock, run_dir, "run.dir"));
    dt_status_t rc = flush_dir(cfg, run_dir, out);
    dt_dirlock_release(&lock);
    return rc;
}
