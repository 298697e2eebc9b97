/* webhook.c - see webhook.h. One sender thread owns the curl handle (one connection, reused). */
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include "core/clock.h"
#include "dt_build_config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "events/sign.h"
#include "events/spool.h"
#include "events/webhook.h"

enum outcome { SENT, RETRY, REJECTED, ABORTED };

struct dt_webhook {
    struct dt_webhook_cfg c;
    char *url, *secret, where[256];
    struct curl_slist *headers; /* the fixed ones */
    CURL *curl;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* work arrived, or stop */
    pthread_cond_t idle; /* nothing pending */
    char **q;            /* ring of queue slots */
    int qhead, qlen;
    struct dt_spool spool;
    bool closing, down, said_rejected;
    atomic_bool stop; /* read by the progress callback without the lock, many times a second */
    int attempts;
    double retry_at; /* CLOCK_MONOTONIC seconds */
    struct dt_rng rng;
    struct dt_webhook_stats st;
    /* the request in flight */
    char retry_after[64];
    char reply[200];
    size_t reply_len;
};

static struct timespec abs_time(double t) /* a CLOCK_MONOTONIC time for pthread_cond_timedwait */
{
    struct timespec ts = {(time_t)t, (long)((t - floor(t)) * 1e9)};
    return ts;
}

void dt_webhook_redact(const char *url, char *buf, size_t n)
{
    snprintf(buf, n, "%s", "(unparsable URL)");
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL;
    if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
        curl_url_get(u, CURLUPART_PORT, &port, 0);
        snprintf(buf, n, "%s://%s%s%s", scheme, host, port ? ":" : "", port ? port : "");
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
}

dt_status_t dt_webhook_sign(const char *key, const char *timestamp, const char *body, size_t len, char out[72])
{
    if (!dt_sign_available())
        return dt_error(DT_ERR_CONFIG, "dtrun: error: events.webhook.secret_env is set, but this build has no libcrypto "
                        "to sign with\n  hint: rebuild with OpenSSL (apt-get install libssl-dev), or unset secret_env");
    if (dt_sign(key, timestamp, body, len, out) != 0)
        return dt_error(DT_ERR_SYSTEM, "dtrun: error: HMAC-SHA256 failed in libcrypto (or memory ran out)");
    return DT_SUCCESS;
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
    struct dt_webhook *w = ctx;
    size_t len = size * n;
    if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
        size_t k = len - 12 < sizeof w->retry_after - 1 ? len - 12 : sizeof w->retry_after - 1;
        memcpy(w->retry_after, p + 12, k);
        w->retry_after[k] = '\0';
    }
    return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    struct dt_webhook *w = ctx;
    size_t len = size * n, room = sizeof w->reply - 1 - w->reply_len, k = len < room ? len : room;
    memcpy(w->reply + w->reply_len, p, k);
    w->reply_len += k;
    w->reply[w->reply_len] = '\0';
    return len;
}

/* Ends a request in flight when the sender is told to stop (the flush deadline passed). */
static int on_progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    return atomic_load(&((struct dt_webhook *)ctx)->stop);
}

/* Seconds a Retry-After value asks for (delta-seconds or an HTTP date), or -1. */
static double retry_after(const char *v)
{
    while (*v == ' ' || *v == '\t') v++;
    char *end;
    double s = strtod(v, &end);
    if (end != v && s >= 0) return s;
    time_t t = curl_getdate(v, NULL);
    return t > 0 ? difftime(t, time(NULL)) : -1;
}

static enum outcome post(struct dt_webhook *w, char *const *ev, int n)
{
    size_t len = n > 1 ? 2 + (size_t)n - 1 : 0;
    for (int i = 0; i < n; i++) len += strlen(ev[i]);
    char *body = malloc(len + 1), *p = body;
    if (!body) return RETRY;
    if (n > 1) *p++ = '[';
    for (int i = 0; i < n; i++) {
        if (i) *p++ = ',';
        size_t k = strlen(ev[i]);
        memcpy(p, ev[i], k);
        p += k;
    }
    if (n > 1) *p++ = ']';
    *p = '\0';
    struct curl_slist *h = NULL;
    for (struct curl_slist *s = w->headers; s; s = s->next) h = curl_slist_append(h, s->data);
    if (w->secret) {
        char ts[32], sig[72], line[128];
        snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
        if (dt_webhook_sign(w->secret, ts, body, len, sig) == DT_SUCCESS) {
            snprintf(line, sizeof line, "X-Dtrun-Timestamp: %s", ts);
            h = curl_slist_append(h, line);
            snprintf(line, sizeof line, "X-Dtrun-Signature: %s", sig);
            h = curl_slist_append(h, line);
        }
    }
    w->retry_after[0] = '\0';
    w->reply_len = 0;
    w->reply[0] = '\0';
    curl_easy_setopt(w->curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    CURLcode cc = curl_easy_perform(w->curl);
    long code = 0;
    curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_setopt(w->curl, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(h);
    free(body);
    w->st.requests++;
    if (cc == CURLE_ABORTED_BY_CALLBACK) return ABORTED;
    enum outcome o;
    char why[300];
    if (cc != CURLE_OK) {
        o = RETRY;
        snprintf(why, sizeof why, "%s", curl_easy_strerror(cc));
    } else if (code >= 200 && code < 300) {
        o = SENT;
    } else if (code == 408 || code == 429 || code >= 500) {
        o = RETRY;
        snprintf(why, sizeof why, "HTTP %ld%s%s", code, w->reply[0] ? ": " : "", w->reply);
    } else {
        o = REJECTED;
        snprintf(why, sizeof why, "HTTP %ld%s%s", code, w->reply[0] ? ": " : "", w->reply);
    }
    if (o == SENT) {
        if (w->down)
            DT_WARN("webhook %s: delivering again", w->where);
        w->down = false;
        w->attempts = 0;
        w->st.delivered += n;
    } else if (o == RETRY) {
        w->st.failures++;
        double d = w->c.backoff * pow(2, w->attempts < 30 ? w->attempts : 30);
        if (d > w->c.max_backoff) d = w->c.max_backoff;
        d = d / 2 + d / 2 * dt_rng_uniform(&w->rng); /* jitter: ranks that failed together retry apart */
        double ra = w->retry_after[0] ? retry_after(w->retry_after) : -1;
        if (ra >= 0) d = ra < w->c.max_backoff ? ra : w->c.max_backoff;
        w->attempts++;
        w->retry_at = dt_now() + d;
        if (!w->down)
            DT_WARN("webhook %s: %s; events go to %s and are re-sent in order once it answers (retrying with "
                    "backoff; training goes on)", w->where, why, w->spool.path);
        w->down = true;
    } else if (!w->said_rejected) {
        DT_WARN("webhook %s: %s; not retried (a 4xx says the request itself is wrong); the events are kept in %s.rejected"
                "\n  hint: fix the receiver or events.webhook.*, then re-send with `dtrun events flush RUN_DIR`",
                w->where, why, w->spool.path);
        w->said_rejected = true;
    }
    return o;
}

static void reject(struct dt_webhook *w, char *const *ev, int n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s.rejected", w->spool.path);
    FILE *f = fopen(path, "a");
    for (int i = 0; f && i < n; i++) fprintf(f, "%s\n", ev[i]);
    if (f) fclose(f);
    w->st.rejected += n;
}

/* The memory queue, oldest first, into the spool ahead of what it holds: nothing is lost if
 * the process ends while the endpoint is down, and order is kept. Called with mu held. */
static void spill(struct dt_webhook *w)
{
    if (!w->qlen) return;
    int cap = w->c.queue;
    char **v = malloc((size_t)w->qlen * sizeof *v);
    if (!v) return;
    for (int i = 0; i < w->qlen; i++) v[i] = w->q[(w->qhead + i) % cap];
    if (dt_spool_prepend(&w->spool, v, w->qlen) == DT_SUCCESS) {
        w->st.spooled += w->qlen;
        for (int i = 0; i < w->qlen; i++) free(v[i]);
        w->qlen = 0;
    } else DT_WARN("%s", dt_error_msg());
    free(v);
}

static void *sender(void *arg)
{
    struct dt_webhook *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        bool pending = w->qlen > 0 || dt_spool_pending(&w->spool);
        if (w->stop || (!pending && w->closing)) break;
        if (!pending) {
            pthread_cond_broadcast(&w->idle);
            pthread_cond_wait(&w->wake, &w->mu);
            continue;
        }
        if (dt_now() < w->retry_at) {
            struct timespec ts = abs_time(w->retry_at);
            pthread_cond_timedwait(&w->wake, &w->mu, &ts);
            continue;
        }
        /* the queue holds the oldest events, the spool what came after it (or everything, while the
         * endpoint was down), so they go out in that order */
        char **ev = NULL, *buf = NULL;
        int64_t bytes = 0;
        int n;
        bool from_queue = w->qlen > 0;
        if (from_queue) {
            n = w->qlen < w->c.batch ? w->qlen : w->c.batch;
            ev = malloc((size_t)n * sizeof *ev);
            for (int i = 0; ev && i < n; i++) ev[i] = w->q[(w->qhead + i) % w->c.queue];
            if (!ev) n = 0;
        } else {
            n = dt_spool_read(&w->spool, w->c.batch, &ev, &buf, &bytes);
        }
        pthread_mutex_unlock(&w->mu);
        enum outcome o = n ? post(w, ev, n) : RETRY;
        if (o == REJECTED) reject(w, ev, n);
        pthread_mutex_lock(&w->mu);
        if (o == SENT || o == REJECTED) {
            if (from_queue) {
                for (int i = 0; i < n; i++) free(w->q[(w->qhead + i) % w->c.queue]);
                w->qhead = (w->qhead + n) % w->c.queue;
                w->qlen -= n;
            } else if (dt_spool_consume(&w->spool, bytes) != DT_SUCCESS) {
                DT_WARN("%s", dt_error_msg());
            }
        } else if (o == RETRY && from_queue) {
            spill(w);
        }
        free(ev);
        free(buf);
    }
    pthread_cond_broadcast(&w->idle);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

void dt_webhook_post(struct dt_webhook *w, const char *json)
{
    pthread_mutex_lock(&w->mu);
    char *copy = NULL;
    /* in memory only while nothing older waits in the spool */
    if (w->qlen < w->c.queue && !dt_spool_pending(&w->spool) && (copy = strdup(json))) {
        w->q[(w->qhead + w->qlen) % w->c.queue] = copy;
        w->qlen++;
    } else if (dt_spool_append(&w->spool, json) == DT_SUCCESS) {
        w->st.spooled++;
    } else {
        DT_WARN("%s", dt_error_msg());
    }
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
}

static dt_status_t fixed_headers(struct dt_webhook *w)
{
    w->headers = curl_slist_append(NULL, "Content-Type: application/json");
    w->headers = curl_slist_append(w->headers, "User-Agent: dtrun/" PACKAGE_VERSION);
    w->headers = curl_slist_append(w->headers, "Expect:"); /* no 100-continue round trip */
    for (const char *p = w->c.headers; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n) {
            char *line = strndup(p, n);
            if (!line) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for webhook headers");
            w->headers = curl_slist_append(w->headers, line);
            free(line);
        }
        p += n + (e != NULL);
    }
    return w->headers ? DT_SUCCESS : dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for webhook headers");
}

static void global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static void destroy(struct dt_webhook *w)
{
    if (w->curl) curl_easy_cleanup(w->curl);
    curl_slist_free_all(w->headers);
    dt_spool_close(&w->spool);
    for (int i = 0; w->q && i < w->qlen; i++) free(w->q[(w->qhead + i) % w->c.queue]);
    free(w->q);
    free(w->url);
    free(w->secret);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->idle);
    free(w);
}

dt_status_t dt_webhook_open(const struct dt_webhook_cfg *c, struct dt_webhook **out)
{
    *out = NULL;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, global_init);
    struct dt_webhook *w = calloc(1, sizeof *w);
    if (!w) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the webhook");
    w->c = *c;
    if (w->c.batch < 1) w->c.batch = 1;
    if (w->c.queue < w->c.batch) w->c.queue = w->c.batch;
    w->spool.fd = -1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->wake, &ca);
    pthread_cond_init(&w->idle, &ca);
    pthread_condattr_destroy(&ca);
    w->rng = dt_rng_make((uint64_t)time(NULL), (uint64_t)(uintptr_t)w);
    dt_webhook_redact(c->url, w->where, sizeof w->where);
    w->url = strdup(c->url);
    w->secret = c->secret ? strdup(c->secret) : NULL;
    w->q = calloc((size_t)w->c.queue, sizeof *w->q);
    w->curl = curl_easy_init();
    dt_status_t rc = !w->url || (c->secret && !w->secret) || !w->q || !w->curl
                         ? dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the webhook")
                         : fixed_headers(w);
    if (rc == DT_SUCCESS) rc = dt_spool_open(&w->spool, c->spool);
    if (rc != DT_SUCCESS) {
        destroy(w);
        return rc;
    }
    w->c.url = w->url;
    w->c.secret = w->secret;
    CURL *h = w->curl;
    curl_easy_setopt(h, CURLOPT_URL, w->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for DNS timeouts */
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->connect_timeout * 1000));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->timeout * 1000));
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, c->insecure ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, c->insecure ? 0L : 2L);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, w);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, w);
    if (dt_spool_pending(&w->spool))
        DT_INFO(DT_SUB_EVENTS, "webhook %s: %lld events spooled in %s by an earlier run go out first", w->where,
                (long long)dt_spool_count(&w->spool), w->spool.path);
    if (pthread_create(&w->thread, NULL, sender, w) != 0) {
        destroy(w);
        return dt_error(DT_ERR_SYSTEM, "dtrun: error: cannot start the webhook thread: %s", strerror(errno));
    }
    *out = w;
    return DT_SUCCESS;
}

void dt_webhook_close(struct dt_webhook *w, double deadline, struct dt_webhook_stats *st)
{
    if (!w) return;
    double end = dt_now() + deadline;
    pthread_mutex_lock(&w->mu);
    w->closing = true;
    /* a backoff wait ends now: at exit every event gets one more try within the deadline */
    w->retry_at = 0;
    pthread_cond_signal(&w->wake);
    while ((w->qlen > 0 || dt_spool_pending(&w->spool)) && dt_now() < end) {
        struct timespec ts = abs_time(end < dt_now() + 0.05 ? end : dt_now() + 0.05);
        pthread_cond_timedwait(&w->idle, &w->mu, &ts);
    }
    w->stop = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    spill(w);
    int64_t w_left = w->st.left = dt_spool_count(&w->spool);
    if (w->st.left)
        DT_WARN("webhook %s: %lld events not delivered within %gs stay in %s\n  hint: `dtrun events flush RUN_DIR` "
                "sends them (a later run in the same run.dir does too)", w->where, (long long)w->st.left, deadline,
                w->spool.path);
    if (st) *st = w->st;
    if (!w_left) dt_spool_remove(&w->spool); /* all delivered: no spool (or its offset) left behind */
    destroy(w);
}
