/*
 * webhook.h - POST event documents to an HTTP(S) endpoint from a thread of
 * its own, so training never waits on the network.
 *
 * Delivery is at least once and in order: events wait in a bounded memory
 * queue; when it is full, or the endpoint cannot be reached, they go to a
 * spool file (one document a line) and are re-sent from there, oldest first,
 * once it answers. Connection errors, timeouts, 408, 429 (honouring
 * Retry-After) and 5xx are retried with exponential backoff and jitter; any
 * other 4xx is not retried: the batch is said once in the log and kept in a
 * file beside the spool (".rejected"). A spool left by an earlier process is
 * sent first. Receivers drop duplicates by the events' ids.
 *
 * With a secret, each body is signed: X-Dtrun-Timestamp: <unix seconds> and
 * X-Dtrun-Signature: sha256=<hex HMAC-SHA256(secret, timestamp "." body)>,
 * so receivers can reject forged bodies and replays of old ones.
 */
#ifndef DT_WEBHOOK_H
#define DT_WEBHOOK_H

#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

struct dt_webhook_cfg {
    const char *url;
    const char *secret; /* NULL: unsigned */
    const char *headers; /* extra header lines, "Name: value" separated by newlines, or NULL */
    int batch;          /* events per POST: 1 posts the object, more a JSON array */
    int queue;          /* events held in memory */
    double connect_timeout, timeout, backoff, max_backoff; /* seconds */
    int insecure;       /* no TLS verification */
    const char *spool;  /* the spool file */
};

struct dt_webhook_stats {
    int64_t delivered; /* events the endpoint accepted */
    int64_t requests, failures, spooled, rejected;
    int64_t left;      /* in the spool after close */
    int64_t lost;      /* given up on: past DT_WEBHOOK_HELD_MAX, out of memory, or unspoolable at close */
};

/* Events kept in memory while the spool refuses them (~30 MB of metrics): a disk that stays full while
 * the endpoint stays down must not take the training's memory with it. */
#define DT_WEBHOOK_HELD_MAX 100000

struct dt_webhook;

dt_status_t dt_webhook_open(const struct dt_webhook_cfg *c, struct dt_webhook **out);
/* Hand one document over (the event of step, for messages); returns at once (a local file write at
 * most). An event the spool cannot take (a full disk) waits in memory, in order, and is said once. */
void dt_webhook_post(struct dt_webhook *w, const char *json, int64_t step);
/* Send what is pending for up to deadline seconds, then stop; what is left stays in the spool. */
void dt_webhook_close(struct dt_webhook *w, double deadline, struct dt_webhook_stats *st);
/* scheme://host[:port] of url: what logs may show (no credentials, path or query). */
void dt_webhook_redact(const char *url, char *buf, size_t n);
/* "sha256=<hex>" of timestamp "." body under key; returns DT_ERR_CONFIG in a build without libcrypto. */
dt_status_t dt_webhook_sign(const char *key, const char *timestamp, const char *body, size_t len, char out[72]);

#endif
