/*
 * sign.h - the webhook signature: X-Dtrun-Signature is "sha256=" and the hex
 * HMAC-SHA256, keyed with the secret, of "<X-Dtrun-Timestamp>.<body>" (the
 * scheme Stripe and Slack use). Shared with the SPANK plugin: libc and
 * libcrypto only.
 */
#ifndef DT_SIGN_H
#define DT_SIGN_H

#include <stdbool.h>
#include <stddef.h>

/* Whether this build can sign (it has libcrypto). */
bool dt_sign_available(void);
/* out: "sha256=<64 hex>"; 0, or -1 when memory ran out or libcrypto failed (or is missing). */
int dt_sign(const char *key, const char *timestamp, const char *body, size_t len, char out[72]);

#endif
