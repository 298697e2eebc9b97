/*
 * webhook_allow.h - which hosts a webhook may name: a site's allow-list
 * (plugstack.conf `webhook_allow=`, DTRUN_WEBHOOK_ALLOW in a job) against the
 * host of a URL. Shared with the SPANK plugin (spank/), so it depends on
 * nothing but libc.
 */
#ifndef DT_WEBHOOK_ALLOW_H
#define DT_WEBHOOK_ALLOW_H

#include <stdbool.h>
#include <stddef.h>

/* The host of an http(s) URL, lower-cased, without userinfo, port or IPv6 brackets.
 * false when url is not scheme://host..., or the host is percent-encoded. */
bool dt_url_host(const char *url, char *host, size_t n);

/* Whether host is in list: comma- or space-separated entries, each a host name or address
 * (exact, case-insensitive), "*.example.org" or ".example.org" (that domain and any host in
 * it), or "*" (any host). */
bool dt_host_allowed(const char *host, const char *list);

#endif
