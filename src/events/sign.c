/* sign.c - see sign.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt_build_config.h"
#include "events/sign.h"
#ifdef HAVE_CRYPTO
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif

#ifdef HAVE_CRYPTO
bool dt_sign_available(void) { return true; }

int dt_sign(const char *key, const char *timestamp, const char *body, size_t len, char out[72])
{
    size_t tl = strlen(timestamp);
    unsigned char *msg = malloc(tl + 1 + len), mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    if (!msg) return -1;
    memcpy(msg, timestamp, tl);
    msg[tl] = '.';
    memcpy(msg + tl + 1, body, len);
    unsigned char *ok = HMAC(EVP_sha256(), key, (int)strlen(key), msg, tl + 1 + len, mac, &maclen);
    free(msg);
    if (!ok || maclen != 32) return -1;
    strcpy(out, "sha256=");
    for (unsigned i = 0; i < maclen; i++) snprintf(out + 7 + 2 * i, 3, "%02x", mac[i]);
    return 0;
}
#else
bool dt_sign_available(void) { return false; }

int dt_sign(const char *key, const char *timestamp, const char *body, size_t len, char out[72])
{
    (void)key, (void)timestamp, (void)body, (void)len;
    out[0] = '\0';
    return -1;
}
#endif
