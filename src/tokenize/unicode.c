/* unicode.c - see unicode.h. */
#include <pthread.h>
#include "tokenize/unicode.h"
#include "tokenize/unicode_tables.h"

/* the Basic Multilingual Plane's classes in one table (64 KiB), built once: the pre-tokenizers ask
 * for every character, and a binary search over 831 ranges each time halved GPT-2's speed */
static uint8_t bmp[65536];
static pthread_once_t bmp_once = PTHREAD_ONCE_INIT;

static void bmp_build(void)
{
    for (size_t i = 0; i < DT_UNI_NRANGES; i++)
        for (uint32_t c = dt_uni_ranges[i].lo; c <= dt_uni_ranges[i].hi && c < 65536; c++) bmp[c] = dt_uni_ranges[i].cls;
}

int dt_uni_class(uint32_t c)
{
    if (c < 65536) {
        pthread_once(&bmp_once, bmp_build);
        return bmp[c];
    }
    size_t lo = 0, hi = DT_UNI_NRANGES;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c > dt_uni_ranges[mid].hi) lo = mid + 1;
        else if (c < dt_uni_ranges[mid].lo) hi = mid;
        else return dt_uni_ranges[mid].cls;
    }
    return 0;
}

uint32_t dt_utf8_next(const unsigned char *s, size_t n, size_t *len)
{
    unsigned char b = s[0];
    if (b < 0x80) {
        *len = 1;
        return b;
    }
    size_t need;
    uint32_t c;
    unsigned char lo = 0x80, hi = 0xBF; /* the allowed range of the second byte (WHATWG's bounds) */
    if (b >= 0xC2 && b <= 0xDF) {
        need = 1;
        c = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        c = b & 0x0F;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        c = b & 0x07;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else {
        *len = 1;
        return 0xFFFD;
    }
    size_t i = 1;
    for (; i <= need; i++) {
        if (i >= n) break;
        unsigned char x = s[i];
        if (i == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) break;
        c = c << 6 | (x & 0x3F);
    }
    if (i <= need) {
        *len = i; /* the maximal subpart: the bytes that could still have started a character */
        return 0xFFFD;
    }
    *len = need + 1;
    return c;
}

int dt_utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t l;
        if (dt_utf8_next(s + i, n - i, &l) == 0xFFFD && !(l == 3 && s[i] == 0xEF && s[i + 1] == 0xBF && s[i + 2] == 0xBD))
            return 0;
        i += l;
    }
    return 1;
}

size_t dt_utf8_repair(const unsigned char *s, size_t n, unsigned char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l;
        if (s[i] < 0x80) {
            out[o++] = s[i++];
            continue;
        }
        uint32_t c = dt_utf8_next(s + i, n - i, &l);
        if (c == 0xFFFD) {
            out[o++] = 0xEF;
            out[o++] = 0xBF;
            out[o++] = 0xBD;
        } else {
            for (size_t k = 0; k < l; k++) out[o++] = s[i + k];
        }
        i += l;
    }
    return o;
}
