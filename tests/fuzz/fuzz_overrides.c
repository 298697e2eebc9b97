/*
 * fuzz_overrides.c - dotted overrides (`dtrun check a.b=v ...`): each line of the input is
 * one argument, applied by dt_config_load over the built-in defaults (key path,
 * suggestions for unknown keys, the value parsed as YAML then by the key's type),
 * then resolved; what resolves must read back as for a file (dt_fuzz_config_reads_back).
 * The cluster has a webhook allow-list (DTRUN_WEBHOOK_ALLOW, from plugstack.conf): a URL that
 * passes must be one whose host, as libcurl reads it, is on the list.
 */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "config/resolve.h"
#include "events/webhook_allow.h"
#include "fuzz.h"

#define MAX_OVERRIDES 16
#define ALLOW "*.example.org, localhost 127.0.0.1"

/* the host libcurl would connect to must be on the list the config passed */
static void allowed_for_curl(const char *url)
{
    CURLU *u = curl_url();
    char *h = NULL;
    if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK && curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK) {
        char host[512];
        size_t len = strlen(h);
        if (len >= 2 && h[0] == '[') snprintf(host, sizeof host, "%.*s", (int)len - 2, h + 1);
        else snprintf(host, sizeof host, "%s", h);
        if (!dt_host_allowed(host, ALLOW))
            dt_fuzz_fail("events.webhook.url %s passes the allow-list (%s), but libcurl connects to %s", url, ALLOW, h);
    }
    curl_free(h);
    curl_url_cleanup(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = dt_fuzz_str(data, size), *ov[MAX_OVERRIDES];
    int n = 0;
    for (char *p = text; p && n < MAX_OVERRIDES;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        ov[n++] = p;
        p = nl ? nl + 1 : NULL;
    }
    dt_fuzz_init();
    setenv("DTRUN_WEBHOOK_ALLOW", ALLOW, 1);
    struct dt_config cfg;
    struct dt_geometry geo = {.gpu_note = "no GPU (fuzz)"};
    dt_fuzz_begin();
    dt_status_t rc = dt_config_init(&cfg);
    if (rc == DT_SUCCESS) rc = dt_config_load(&cfg, NULL, NULL, n, ov);
    if (rc == DT_SUCCESS) rc = dt_config_resolve(&cfg, &geo);
    dt_fuzz_check_error(rc, "dt_config_load (overrides) + dt_config_resolve");
    if (rc == DT_SUCCESS && cfg.events.webhook.url) allowed_for_curl(cfg.events.webhook.url);
    if (rc == DT_SUCCESS) dt_fuzz_config_reads_back(&cfg, &geo);
    dt_config_free(&cfg);
    free(text);
    return 0;
}
