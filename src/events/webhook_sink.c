/* webhook_sink.c - the webhook as a sink: its settings read from the config and checked (the
 * URL, the secret's variable, ${VAR}s in extra headers), and nothing secret ever logged. */
#include <ctype.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/log.h"
#include "events/events.h"
#include "events/webhook.h"

/* headers with ${VAR} replaced from the environment, each line "Name: value" */
static dt_status_t expand_headers(const char *in, char **out)
{
    *out = NULL;
    size_t cap = strlen(in) + 1, len = 0;
    char *s = malloc(cap);
    if (!s) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for webhook headers");
    for (const char *p = in; *p;) {
        const char *piece = p, *val = NULL;
        size_t n = 1;
        if (p[0] == '$' && p[1] == '{') {
            const char *e = strchr(p, '}');
            if (!e) {
                free(s);
                return dt_error(DT_ERR_CONFIG, "events.webhook.headers: error: \"${\" without its \"}\"\n"
                                "  hint: write ${NAME} for the value of the environment variable NAME");
            }
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(e - p - 2), p + 2);
            val = getenv(name);
            if (!val || !*val) {
                free(s);
                return dt_error(DT_ERR_CONFIG, "events.webhook.headers: error: the environment variable %s is %s\n"
                                "  hint: export %s in the job's environment (sbatch passes it on)", name,
                                val ? "empty" : "not set", name);
            }
            piece = val;
            n = strlen(val);
            p = e + 1;
        } else p++;
        if (len + n + 1 > cap) {
            char *b = realloc(s, cap = 2 * cap + n);
            if (!b) {
                free(s);
                return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for webhook headers");
            }
            s = b;
        }
        memcpy(s + len, piece, n);
        len += n;
    }
    s[len] = '\0';
    /* every non-empty line a header; a value must not smuggle in another line */
    int line = 1;
    for (char *p = s; *p; line++) {
        char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n && p[n - 1] == '\r') p[n - 1] = ' ';
        size_t name = 0;
        while (name < n && (isalnum((unsigned char)p[name]) || p[name] == '-' || p[name] == '_')) name++;
        bool blank = strspn(p, " \t") >= n;
        if (!blank && (name == 0 || name >= n || p[name] != ':')) {
            free(s);
            return dt_error(DT_ERR_CONFIG, "events.webhook.headers: error: line %d is not \"Name: value\"\n"
                            "  hint: one header a line, e.g. \"Authorization: Bearer ${WEBHOOK_TOKEN}\"", line);
        }
        p += n + (e != NULL);
    }
    *out = s;
    return DT_SUCCESS;
}

dt_status_t dt_webhook_cfg_from(const struct dt_config *cfg, const char *spool, struct dt_webhook_cfg *out,
                                char **headers, char **secret)
{
    const typeof(cfg->events.webhook) *h = &cfg->events.webhook;
    *headers = *secret = NULL;
    char where[256];
    dt_webhook_redact(h->url, where, sizeof where);
    if (strncmp(h->url, "http://", 7) && strncmp(h->url, "https://", 8))
        return dt_error(DT_ERR_CONFIG, "events.webhook.url: error: %s is not an http:// or https:// URL\n"
                        "  hint: e.g. https://hooks.example.com/dtrun", where);
    CURLU *u = curl_url();
    CURLUcode uc = u ? curl_url_set(u, CURLUPART_URL, h->url, 0) : CURLUE_OUT_OF_MEMORY;
    curl_url_cleanup(u);
    if (uc != CURLUE_OK)
        return dt_error(DT_ERR_CONFIG, "events.webhook.url: error: the URL does not parse (%s)\n"
                        "  hint: check it with curl first", curl_url_strerror(uc));
    if (h->secret_env) {
        const char *v = getenv(h->secret_env);
        if (!v || !*v)
            return dt_error(DT_ERR_CONFIG, "events.webhook.secret_env: error: it names %s, which is %s in this "
                            "process\n  hint: export %s before starting the run (or set secret_env: null to send "
                            "unsigned)", h->secret_env, v ? "empty" : "not set", h->secret_env);
        char sig[72];
        DT_CHECK(dt_webhook_sign(v, "0", "", 0, sig)); /* a build without libcrypto says so now */
        if (!(*secret = strdup(v))) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    }
    if (h->headers) {
        dt_status_t rc = expand_headers(h->headers, headers);
        if (rc != DT_SUCCESS) {
            free(*secret);
            *secret = NULL;
            return rc;
        }
    }
    *out = (struct dt_webhook_cfg){.url = h->url, .secret = *secret, .headers = *headers, .batch = (int)h->batch,
                                   .queue = (int)h->queue, .connect_timeout = h->connect_timeout,
                                   .timeout = h->timeout, .backoff = h->backoff, .max_backoff = h->max_backoff,
                                   .insecure = h->insecure, .spool = spool};
    return DT_SUCCESS;
}

struct hook_sink {
    struct dt_sink sink;
    struct dt_webhook *w;
    char *headers, *secret;
};

static dt_status_t hook_emit(struct dt_sink *s, const struct dt_event *e)
{
    dt_webhook_post(((struct hook_sink *)s->ctx)->w, e->json, e->step);
    return DT_SUCCESS;
}

static void hook_close(struct dt_sink *s, double deadline)
{
    struct hook_sink *h = s->ctx;
    struct dt_webhook_stats st;
    dt_webhook_close(h->w, deadline, &st);
    DT_DEBUG(DT_SUB_EVENTS, "webhook: %lld events delivered in %lld requests (%lld failed), %lld spooled, %lld rejected, "
             "%lld left, %lld lost", (long long)st.delivered, (long long)st.requests, (long long)st.failures,
             (long long)st.spooled, (long long)st.rejected, (long long)st.left, (long long)st.lost);
    free(h->headers);
    free(h->secret);
    free(h);
}

dt_status_t dt_sink_webhook(const struct dt_config *cfg, const char *spool, struct dt_sink **out)
{
    struct hook_sink *h = calloc(1, sizeof *h);
    if (!h) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the webhook");
    struct dt_webhook_cfg wc;
    dt_status_t rc = dt_webhook_cfg_from(cfg, spool, &wc, &h->headers, &h->secret);
    if (rc == DT_SUCCESS) rc = dt_webhook_open(&wc, &h->w);
    if (rc != DT_SUCCESS) {
        free(h->headers);
        free(h->secret);
        free(h);
        return rc;
    }
    h->sink = (struct dt_sink){.name = "webhook", .emit = hook_emit, .close = hook_close, .ctx = h};
    *out = &h->sink;
    return DT_SUCCESS;
}
