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
#include "events/webhook_reply.h"

enum outcome { SENT, RETRY, REJECTED, ABORTED };
_Static_assert(SENT == (int)DT_WEBHOOK_SENT && RETRY == (int)DT_WEBHOOK_RETRY && REJECTED == (int)DT_WEBHOOK_REJECTED,
               "post() takes dt_webhook_judge's outcome as its own");

struct dt_webhook {
    struct dt_webhook_cfg c;
    char *url, *secret, where[256];
    struct curl_slist *headers; /* the fixed ones */
    CURL *curl;   /* the template of every request (dt_webhook_exchange) */
    CURLSH *share; /* its connections, kept between requests */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* work arrived, or stop */
    pthread_cond_t idle; /* nothing pending */
    char **q;            /* ring of queue slots */
    int qhead, qlen;
    struct dt_spool spool;
    /* events the spool could not take (a full or failing disk): newer than all it holds, so they
     * wait here, in order, until it can (or go straight out); order: q, the spool, held */
    char **held;
    int nheld, held_cap;
    bool held_flight; /* the sender is posting held[0..]: they stay until it knows */
    int64_t held_dropped; /* refused by the spool with DT_WEBHOOK_HELD_MAX already held, in this outage */
    bool closing, down, said_rejected;
    _Atomic int64_t last_step; /* the highest step of an event posted (-1: none said one), for messages */
    atomic_bool stop; /* read by the progress callback without the lock, many times a second */
    int attempts;
    double retry_at; /* CLOCK_MONOTONIC seconds; written with mu held (dt_webhook_close zeroes it) */
    double retry_in; /* the backoff post() chose after a failure; the sender thread's own */
    struct dt_rng rng;
    struct dt_webhook_stats st;
    struct dt_webhook_reply reply; /* the request in flight's */
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
    struct dt_webhook_reply *r = ctx;
    size_t len = size * n;
    if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
        size_t k = len - 12 < sizeof r->retry_after - 1 ? len - 12 : sizeof r->retry_after - 1;
        memcpy(r->retry_after, p + 12, k);
        r->retry_after[k] = '\0';
    }
    return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    struct dt_webhook_reply *r = ctx;
    size_t len = size * n, room = sizeof r->body - 1 - r->body_len, k = len < room ? len : room;
    memcpy(r->body + r->body_len, p, k);
    r->body_len += k;
    r->body[r->body_len] = '\0';
    return len;
}

void dt_webhook_reply_attach(CURL *h, struct dt_webhook_reply *r)
{
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
}

void dt_webhook_reply_reset(struct dt_webhook_reply *r)
{
    r->retry_after[0] = '\0';
    r->body_len = 0;
    r->body[0] = '\0';
}

CURLcode dt_webhook_exchange(CURL *t, CURLSH *share, struct dt_webhook_reply *r, long *code)
{
    *code = 0;
    dt_webhook_reply_reset(r);
    CURL *h = curl_easy_duphandle(t);
    if (!h) return CURLE_OUT_OF_MEMORY;
    curl_easy_setopt(h, CURLOPT_SHARE, share); /* a copy does not take the template's */
    dt_webhook_reply_attach(h, r);
    CURLcode cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code);
    curl_easy_cleanup(h);
    return cc;
}

/* Ends a request in flight when the sender is told to stop (the flush deadline passed). */
static int on_progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    return atomic_load(&((struct dt_webhook *)ctx)->stop);
}

double dt_webhook_retry_after(const char *v)
{
    while (*v == ' ' || *v == '\t') v++;
    char *end;
    double s = strtod(v, &end);
    if (end != v && s >= 0) return s;
    time_t t = curl_getdate(v, NULL);
    /* a date already past (the clocks disagree) asks for nothing: backoff as without one (#16) */
    double d = t > 0 ? difftime(t, dt_wall_now().tv_sec) : -1;
    return d >= 0 ? d : -1;
}

enum dt_webhook_outcome dt_webhook_judge(CURLcode cc, long code, const struct dt_webhook_reply *r, char *why,
                                         size_t n)
{
    why[0] = '\0';
    if (cc != CURLE_OK) {
        snprintf(why, n, "%s", curl_easy_strerror(cc));
        return DT_WEBHOOK_RETRY;
    }
    if (code >= 200 && code < 300) return DT_WEBHOOK_SENT;
    size_t k = (size_t)snprintf(why, n, "HTTP %ld%s", code, r->body[0] ? ": " : "");
    /* the receiver's words as one line: its newlines or terminal escapes must not forge lines of the
     * log (#16, tests/fuzz/fuzz_webhook.c) */
    for (const unsigned char *p = (const unsigned char *)r->body; *p && k + 1 < n; p++) {
        if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) { /* a C1 control in UTF-8 (U+009B is CSI) */
            why[k++] = ' ';
            p++;
        } else {
            why[k++] = *p < 0x20 || *p == 0x7f ? ' ' : (char)*p;
        }
    }
    if (k < n) why[k] = '\0';
    return code == 408 || code == 429 || code >= 500 ? DT_WEBHOOK_RETRY : DT_WEBHOOK_REJECTED;
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
        snprintf(ts, sizeof ts, "%lld", (long long)dt_wall_now().tv_sec);
        if (dt_webhook_sign(w->secret, ts, body, len, sig) == DT_SUCCESS) {
            snprintf(line, sizeof line, "X-Dtrun-Timestamp: %s", ts);
            h = curl_slist_append(h, line);
            snprintf(line, sizeof line, "X-Dtrun-Signature: %s", sig);
            h = curl_slist_append(h, line);
        }
    }
    curl_easy_setopt(w->curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(w->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    long code;
    CURLcode cc = dt_webhook_exchange(w->curl, w->share, &w->reply, &code);
    curl_easy_setopt(w->curl, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(h);
    free(body);
    w->st.requests++;
    if (cc == CURLE_ABORTED_BY_CALLBACK) return ABORTED;
    char why[300];
    enum outcome o = (enum outcome)dt_webhook_judge(cc, code, &w->reply, why, sizeof why);
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
        double ra = w->reply.retry_after[0] ? dt_webhook_retry_after(w->reply.retry_after) : -1;
        if (ra >= 0) d = ra < w->c.max_backoff ? ra : w->c.max_backoff;
        w->attempts++;
        w->retry_in = d;
        if (!w->down) {
            int64_t at = atomic_load(&w->last_step);
            char since[48] = "";
            if (at > 0) snprintf(since, sizeof since, "noticed at step %lld; ", (long long)at);
            else if (at == 0) snprintf(since, sizeof since, "noticed at the run's start; ");
            DT_WARN("webhook %s: %s; events go to %s and are re-sent in order once it answers (%sretrying with "
                    "backoff; training goes on)", w->where, why, w->spool.path, since);
        }
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

/* The held events into the spool, oldest first, as far as it takes them; true when all went. Called
 * with mu held, never while the sender posts them. */
static bool unhold(struct dt_webhook *w)
{
    int moved = 0;
    while (moved < w->nheld && dt_spool_append(&w->spool, w->held[moved]) == DT_SUCCESS) free(w->held[moved++]);
    memmove(w->held, w->held + moved, (size_t)(w->nheld - moved) * sizeof *w->held);
    w->nheld -= moved;
    w->st.spooled += moved;
    if (moved && !w->nheld) {
        DT_WARN("webhook %s: %s takes events again; the %d held in memory are in it%s", w->where, w->spool.path,
                moved, w->held_dropped ? ", the ones dropped meanwhile are not" : "");
        w->held_dropped = 0;
    }
    return w->nheld == 0;
}

/* GCC 12's analyzer loses a pointer stored into an array at a computed index (w->held[], w->q[])
 * and calls it leaked: a false positive, the sender or dt_webhook_free() frees them (#16) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
/* Keep json in memory after the spool refused it (why: the spool's error, said once per outage), up
 * to DT_WEBHOOK_HELD_MAX events (webhook.h). */
static void hold(struct dt_webhook *w, const char *json, int64_t step, const char *why)
{
    if (w->nheld >= DT_WEBHOOK_HELD_MAX) {
        w->st.lost++;
        if (!w->held_dropped++)
            DT_WARN("webhook %s: %d events wait in memory (the spool cannot be written, the endpoint does not "
                    "answer): from the event of step %lld on, events are dropped for the webhook until one of "
                    "them recovers (rank 0's events.jsonl keeps them)", w->where, DT_WEBHOOK_HELD_MAX, (long long)step);
        return;
    }
    char *copy = strdup(json);
    if (copy && w->nheld == w->held_cap) {
        int cap = w->held_cap ? 2 * w->held_cap : 64;
        char **g = realloc(w->held, (size_t)cap * sizeof *g);
        if (g) w->held = g, w->held_cap = cap;
    }
    if (!copy || w->nheld == w->held_cap) {
        free(copy);
        w->st.lost++;
        DT_WARN("webhook %s: out of memory holding an event the spool refused: it is lost for the webhook (rank 0's "
                "events.jsonl keeps it)", w->where);
        return;
    }
    if (!w->nheld && why)
        DT_WARN("webhook %s: the event of step %lld cannot be spooled: %s\n  it and the events after it wait in "
                "memory, in order, until the spool can be written or the endpoint takes them (lost only if the "
                "process ends first)", w->where, (long long)step, why);
    w->held[w->nheld++] = copy;
}
#pragma GCC diagnostic pop

static void *sender(void *arg)
{
    struct dt_webhook *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        bool pending = w->qlen > 0 || dt_spool_pending(&w->spool) || w->nheld > 0;
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
        bool from_queue = w->qlen > 0, from_held = false;
        if (from_queue) {
            n = w->qlen < w->c.batch ? w->qlen : w->c.batch;
            ev = malloc((size_t)n * sizeof *ev);
            for (int i = 0; ev && i < n; i++) ev[i] = w->q[(w->qhead + i) % w->c.queue];
            if (!ev) n = 0;
        } else if (dt_spool_pending(&w->spool)) {
            n = dt_spool_read(&w->spool, w->c.batch, &ev, &buf, &bytes);
        } else if (unhold(w) || dt_spool_pending(&w->spool)) {
            continue; /* the spool takes them again, all or the oldest: they go out from there first */
        } else { /* it still does not: straight from memory */
            from_held = true;
            n = w->nheld < w->c.batch ? w->nheld : w->c.batch;
            ev = malloc((size_t)n * sizeof *ev);
            for (int i = 0; ev && i < n; i++) ev[i] = w->held[i];
            if (!ev) n = 0;
            w->held_flight = true;
        }
        pthread_mutex_unlock(&w->mu);
        enum outcome o = n ? post(w, ev, n) : RETRY;
        if (o == REJECTED) reject(w, ev, n);
        pthread_mutex_lock(&w->mu);
        /* nothing to post (the spool's next line is not whole yet, or no memory): wait a backoff too */
        if (o == RETRY) w->retry_at = dt_now() + (n ? w->retry_in : w->c.backoff);
        if (o == SENT || o == REJECTED) {
            if (from_queue) {
                for (int i = 0; i < n; i++) free(w->q[(w->qhead + i) % w->c.queue]);
                w->qhead = (w->qhead + n) % w->c.queue;
                w->qlen -= n;
            } else if (from_held) {
                for (int i = 0; i < n; i++) free(w->held[i]);
                memmove(w->held, w->held + n, (size_t)(w->nheld - n) * sizeof *w->held);
                w->nheld -= n;
                if (!w->nheld) w->held_dropped = 0;
            } else if (dt_spool_consume(&w->spool, bytes) != DT_SUCCESS) {
                DT_WARN("%s", dt_error_msg());
            }
        } else if (o == RETRY && from_queue) {
            spill(w);
        }
        w->held_flight = false;
        free(ev);
        free(buf);
    }
    pthread_cond_broadcast(&w->idle);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak" /* w->q[] at a computed index: as hold()'s */
void dt_webhook_post(struct dt_webhook *w, const char *json, int64_t step)
{
    pthread_mutex_lock(&w->mu);
    if (step > atomic_load(&w->last_step)) atomic_store(&w->last_step, step); /* a save's event may lag */
    char *copy = NULL;
    if (w->nheld && !w->held_flight) unhold(w);
    /* in memory only while nothing older waits in the spool (or held) */
    if (w->nheld) {
        hold(w, json, step, NULL);
    } else if (w->qlen < w->c.queue && !dt_spool_pending(&w->spool) && (copy = strdup(json))) {
        w->q[(w->qhead + w->qlen) % w->c.queue] = copy;
        w->qlen++;
    } else if (dt_spool_append(&w->spool, json) == DT_SUCCESS) {
        w->st.spooled++;
    } else {
        hold(w, json, step, dt_error_msg());
    }
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
}
#pragma GCC diagnostic pop

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
    if (w->share) curl_share_cleanup(w->share);
    curl_slist_free_all(w->headers);
    dt_spool_close(&w->spool);
    for (int i = 0; w->q && i < w->qlen; i++) free(w->q[(w->qhead + i) % w->c.queue]);
    free(w->q);
    for (int i = 0; i < w->nheld; i++) free(w->held[i]);
    free(w->held);
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
    atomic_store(&w->last_step, -1);
    dt_webhook_redact(c->url, w->where, sizeof w->where);
    w->url = strdup(c->url);
    w->secret = c->secret ? strdup(c->secret) : NULL;
    w->q = calloc((size_t)w->c.queue, sizeof *w->q);
    w->curl = curl_easy_init();
    w->share = curl_share_init();
    dt_status_t rc = !w->url || (c->secret && !w->secret) || !w->q || !w->curl || !w->share
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
    /* one connection (and TLS session) kept across the requests' handles; only the sender thread uses them */
    curl_share_setopt(w->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    curl_share_setopt(w->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_share_setopt(w->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_easy_setopt(h, CURLOPT_URL, w->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for DNS timeouts */
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->connect_timeout * 1000));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->timeout * 1000));
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, c->insecure ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, c->insecure ? 0L : 2L);
    dt_webhook_reply_attach(h, &w->reply);
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
    while ((w->qlen > 0 || dt_spool_pending(&w->spool) || w->nheld > 0) && dt_now() < end) {
        struct timespec ts = abs_time(end < dt_now() + 0.05 ? end : dt_now() + 0.05);
        pthread_cond_timedwait(&w->idle, &w->mu, &ts);
    }
    w->stop = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    spill(w);
    if (w->nheld && !unhold(w))
        DT_WARN("webhook %s: %d events were neither delivered nor taken by %s (%s): they are lost for the webhook "
                "(rank 0's are in events.jsonl)", w->where, w->nheld, w->spool.path, dt_error_msg());
    w->st.lost += w->qlen + w->nheld; /* what the spool took neither from the queue nor from memory */
    int64_t w_left = w->st.left = dt_spool_count(&w->spool);
    if (w->st.left)
        DT_WARN("webhook %s: %lld events not delivered within %gs stay in %s\n  hint: `dtrun events flush RUN_DIR` "
                "sends them (a later run in the same run.dir does too)", w->where, (long long)w->st.left, deadline,
                w->spool.path);
    if (st) *st = w->st;
    if (!w_left) dt_spool_remove(&w->spool); /* all delivered: no spool (or its offset) left behind */
    destroy(w);
}
