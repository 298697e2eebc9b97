/*
 * fuzz_spank.c - the SPANK plugin's arguments (spank/site.c): the input's lines (or NUL-
 * separated words) are the words after the plugin's path in plugstack.conf, parsed by
 * dt_spank_site_parse (key=value, paths, the default webhook's URL, the allow-list, the
 * timeout, NCCL_* settings). The URL check is the plugin's gate for --dt-webhook and the
 * site webhook: for every word with a URL in it, the host dt_url_host reads must be the
 * host libcurl (which task_failed and the webhook send with) would connect to, or the
 * allow-list could be walked around; and the allow-list is matched against it.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "events/webhook_allow.h"
#include "spank/site.h"
#include "fuzz.h"

#define MAX_WORDS 24

/* the same address written two ways (curl normalises IPv4 and IPv6 literals) */
static bool same_address(const char *a, const char *b)
{
    unsigned char x[16], y[16];
    struct in_addr v4;
    if (inet_pton(AF_INET6, a, x) == 1 && inet_pton(AF_INET6, b, y) == 1) return !memcmp(x, y, 16);
    if (inet_aton(a, &v4) == 1 && inet_pton(AF_INET, b, y) == 1) return !memcmp(&v4, y, 4);
    return false;
}

/* what dt_url_host reads against what curl would connect to */
static void url_host(const char *url)
{
    char host[256];
    if (!dt_url_host(url, host, sizeof host)) return;
    CURLU *u = curl_url();
    char *ch = NULL;
    if (!u) dt_fuzz_fail("out of memory");
    /* curl's defaults, as the webhook and task_failed hand it the URL */
    if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK && curl_url_get(u, CURLUPART_HOST, &ch, 0) == CURLUE_OK) {
        char theirs[512];
        size_t len = strlen(ch);
        /* "[::1]": the brackets are not the address */
        if (len >= 2 && ch[0] == '[' && ch[len - 1] == ']') snprintf(theirs, sizeof theirs, "%.*s", (int)len - 2, ch + 1);
        else snprintf(theirs, sizeof theirs, "%s", ch);
        char mine[256];
        /* an IPv6 address's zone ("fe80::1%25eth0") is not the address */
        snprintf(mine, sizeof mine, "%.*s", strchr(host, ':') ? (int)strcspn(host, "%") : (int)strlen(host), host);
        if (strcasecmp(mine, theirs) && !same_address(mine, theirs))
            dt_fuzz_fail("dt_url_host reads host '%s' in '%s', curl connects to '%s'", host, url, ch);
    }
    curl_free(ch);
    curl_url_cleanup(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dt_fuzz_init();
    char *buf = dt_fuzz_str(data, size), *argv[MAX_WORDS];
    int argc = 0;
    /* words end at a newline or a NUL */
    for (size_t i = 0, start = 0; i <= size && argc < MAX_WORDS; i++) {
        if (i < size && data[i] != '\n' && data[i] != '\0') continue;
        buf[i < size ? i : size] = '\0';
        argv[argc++] = buf + start;
        start = i + 1;
    }
    struct dt_spank_site site;
    char err[512];
    int rc = dt_spank_site_parse(&site, "/usr/bin/dtrun", argc, argv, err, sizeof err);
    if (rc != 0 && !err[0]) dt_fuzz_fail("dt_spank_site_parse refused the arguments without saying why");
    if (rc == 0) {
        if (site.dtrun[0] != '/' || site.timeout <= 0 || site.timeout > 60 || site.nenv < 0 ||
            site.nenv > DT_SPANK_MAX_ENV)
            dt_fuzz_fail("dt_spank_site_parse took a setting out of its range");
        char host[256];
        if (site.webhook[0] && dt_url_host(site.webhook, host, sizeof host)) dt_host_allowed(host, site.allow);
    }
    for (int i = 0; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        url_host(eq ? eq + 1 : argv[i]);
        if (eq && dt_url_host(eq + 1, err, sizeof err)) dt_host_allowed(err, argv[0]);
    }
    free(buf);
    return 0;
}
