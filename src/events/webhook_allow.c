/* webhook_allow.c - see webhook_allow.h. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "events/webhook_allow.h"

bool dt_url_host(const char *url, char *host, size_t n)
{
    const char *s = strstr(url, "://");
    if (!s || s == url || n == 0) return false;
    for (const char *p = url; p < s; p++)
        if (!isalpha((unsigned char)*p) && *p != '+' && *p != '-' && *p != '.') return false;
    s += 3;
    size_t auth = strcspn(s, "/?#");
    const char *at = NULL;
    /* userinfo may hold '@' only escaped, so the last one ends it */
    for (const char *p = s; p < s + auth; p++)
        if (*p == '@') at = p;
    const char *h = at ? at + 1 : s, *end = s + auth;
    size_t len;
    if (*h == '[') {
        const char *close = memchr(h, ']', (size_t)(end - h));
        if (!close) return false;
        h++;
        len = (size_t)(close - h);
    } else {
        const char *colon = memchr(h, ':', (size_t)(end - h));
        len = (size_t)((colon ? colon : end) - h);
        /* libcurl decodes %XX in a host name: the list would judge another name than the one connected
         * to (#16, tests/fuzz/fuzz_spank.c); no webhook needs one */
        if (memchr(h, '%', len)) return false;
    }
    if (len == 0 || len >= n) return false;
    for (size_t i = 0; i < len; i++) host[i] = (char)tolower((unsigned char)h[i]);
    host[len] = '\0';
    return true;
}

bool dt_host_allowed(const char *host, const char *list)
{
    size_t hl = strlen(host);
    for (const char *p = list; p && *p;) {
        p += strspn(p, ", ");
        size_t len = strcspn(p, ", ");
        if (len == 0) break;
        const char *e = p;
        p += len;
        if (len == 1 && *e == '*') return true;
        if (*e == '*' && len > 1 && e[1] == '.') e++, len--; /* "*.example.org" reads as ".example.org" */
        if (*e == '.') {
            /* the domain itself, or a host ending in ".domain" */
            if (hl == len - 1 && !strncasecmp(host, e + 1, len - 1)) return true;
            if (hl > len && !strncasecmp(host + hl - len, e, len)) return true;
        } else if (hl == len && !strncasecmp(host, e, len)) {
            return true;
        }
    }
    return false;
}
