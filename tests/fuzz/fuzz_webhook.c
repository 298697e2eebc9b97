/*
 * fuzz_webhook.c - the webhook's answer handling (events/webhook.c, webhook_reply.h): the
 * bytes are the endpoint's whole response (status line, headers, body) to one POST made the
 * way the sender makes it (dt_webhook_exchange from a template handle, the sender's
 * callbacks), sent by a listener of this process on the loopback. libcurl parses the status
 * line and the headers; dtrun's callbacks keep Retry-After and the body's start;
 * dt_webhook_judge says what the answer means; dt_webhook_retry_after reads Retry-After in
 * both forms (seconds, an HTTP date). The outcome must follow the status code, the reason
 * must be one printable line (it goes to the log), a Retry-After must give -1 or seconds.
 * One process sends many requests, as the sender does: state left by one answer meets the next.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "events/webhook_reply.h"
#include "fuzz.h"

static CURL *curl; /* the template, as webhook.c's sender keeps one */
static CURLSH *share;
static struct curl_slist *headers;
static struct dt_webhook_reply reply;
static int listener = -1, server = -1;
static const uint8_t *answer;
static size_t answer_len;

/* Once curl is connected, before it sends: the whole answer waits in the socket, then end of file
 * (whatever does not fit in the socket's buffer is cut). In-process and single-threaded: curl 7.88
 * cannot take a socket already connected (CURL_SOCKOPT_ALREADY_CONNECTED fails), so it connects to
 * this listener on the loopback. */
static int answer_now(void *ctx, char *ip, char *local, int port, int local_port)
{
    (void)ctx, (void)ip, (void)local, (void)port, (void)local_port;
    server = accept(listener, NULL, NULL);
    if (server < 0) return CURL_PREREQFUNC_ABORT;
    /* closed with a reset: no TIME_WAIT left per input */
    struct linger no = {1, 0};
    setsockopt(server, SOL_SOCKET, SO_LINGER, &no, sizeof no);
    fcntl(server, F_SETFL, O_NONBLOCK);
    for (size_t at = 0; at < answer_len;) {
        ssize_t k = write(server, answer + at, answer_len - at);
        if (k <= 0) break;
        at += (size_t)k;
    }
    shutdown(server, SHUT_WR);
    return CURL_PREREQFUNC_OK;
}

static void release(void)
{
    curl_easy_cleanup(curl);
    curl_share_cleanup(share);
    curl_slist_free_all(headers);
    curl_global_cleanup();
    close(listener);
}

static void setup(void)
{
    dt_fuzz_init();
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0 || bind(listener, (struct sockaddr *)&a, sizeof a) != 0 || listen(listener, 4) != 0 ||
        getsockname(listener, (struct sockaddr *)&a, &len) != 0)
        dt_fuzz_fail("cannot listen on the loopback");
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/events", ntohs(a.sin_port));
    curl_global_init(CURL_GLOBAL_DEFAULT);
    curl = curl_easy_init();
    share = curl_share_init();
    /* the fixed headers of webhook.c's fixed_headers() */
    headers = curl_slist_append(NULL, "Content-Type: application/json");
    headers = curl_slist_append(headers, "User-Agent: dtrun/fuzz");
    headers = curl_slist_append(headers, "Expect:");
    if (!curl || !share || !headers) dt_fuzz_fail("cannot set up curl");
    atexit(release);
    curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 500L);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "{\"event\":\"fuzz\"}");
    curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(curl, CURLOPT_PREREQFUNCTION, answer_now);
    dt_webhook_reply_attach(curl, &reply);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!curl) setup();
    answer = data;
    answer_len = size;
    long code;
    CURLcode cc = dt_webhook_exchange(curl, share, &reply, &code);
    if (server >= 0) close(server);
    server = -1;
    char why[300];
    enum dt_webhook_outcome o = dt_webhook_judge(cc, code, &reply, why, sizeof why);
    if (o == DT_WEBHOOK_SENT && (cc != CURLE_OK || code < 200 || code > 299))
        dt_fuzz_fail("SENT for curl %d, HTTP %ld", cc, code);
    if (o != DT_WEBHOOK_SENT && !why[0]) dt_fuzz_fail("outcome %d without a reason", o);
    for (const unsigned char *p = (const unsigned char *)why; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            dt_fuzz_fail("the reason for the log holds control byte 0x%02x: %s", *p, why);
    if (reply.retry_after[0]) {
        double ra = dt_webhook_retry_after(reply.retry_after);
        if (isnan(ra) || (ra < 0 && ra != -1)) dt_fuzz_fail("Retry-After '%s' is %g s", reply.retry_after, ra);
    }
    return 0;
}
