/*
 * webhook_reply.h - how the webhook's sender reads an endpoint's answer (webhook.c),
 * apart so that tests/fuzz/fuzz_webhook.c can hand it any response: the curl callbacks
 * that keep the Retry-After header and the start of the body, the Retry-After value in
 * both of its forms, and what an answer means. Internal to src/events.
 */
#ifndef DT_WEBHOOK_REPLY_H
#define DT_WEBHOOK_REPLY_H

#include <curl/curl.h>
#include <stddef.h>

struct dt_webhook_reply {
    char retry_after[64]; /* the last Retry-After header's value, as sent */
    char body[200];       /* the start of the body, for the log */
    size_t body_len;
};

enum dt_webhook_outcome { DT_WEBHOOK_SENT, DT_WEBHOOK_RETRY, DT_WEBHOOK_REJECTED };

/* Have the answers of h's requests kept in r (the header and write callbacks). */
void dt_webhook_reply_attach(CURL *h, struct dt_webhook_reply *r);
/* Forget the last answer, before each request. */
void dt_webhook_reply_reset(struct dt_webhook_reply *r);
/* One request as the template t is set, on a handle of its own that keeps its connection in share
 * for the next; its answer kept in r; code gets the HTTP status (0: none). A handle per request:
 * libcurl 7.88 (Debian 12) unfolds an answer whose first header line is a continuation into the
 * last answer's headers, freed by then, when a handle is reused (#16, tests/fuzz/fuzz_webhook.c). */
CURLcode dt_webhook_exchange(CURL *t, CURLSH *share, struct dt_webhook_reply *r, long *code);
/* Seconds a Retry-After value asks for (delta-seconds or an HTTP date still to come), or -1. */
double dt_webhook_retry_after(const char *v);
/* What a request that ended with cc and HTTP status code means: SENT (2xx); RETRY (no answer,
 * 408, 429, 5xx); REJECTED (any other). why gets the reason, one line, for the log. */
enum dt_webhook_outcome dt_webhook_judge(CURLcode cc, long code, const struct dt_webhook_reply *r, char *why,
                                         size_t n);

#endif
