/* checksum.c - see checksum.h (XXH64, following xxHash's specification). */
#include <string.h>
#include "core/checksum.h"

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t read64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8); /* little-endian machines: the specification's byte order */
    return v;
}
static inline uint32_t read32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t round64(uint64_t acc, uint64_t in) { return rotl(acc + in * P2, 31) * P1; }
static inline uint64_t merge(uint64_t acc, uint64_t v) { return (acc ^ round64(0, v)) * P1 + P4; }

void dt_xxh64_init(struct dt_xxh64 *h, uint64_t seed)
{
    *h = (struct dt_xxh64){.v = {seed + P1 + P2, seed + P2, seed, seed - P1}, .seed = seed};
}

void dt_xxh64_update(struct dt_xxh64 *h, const void *data, size_t n)
{
    const unsigned char *p = data;
    h->total += n;
    if (h->nbuf + n < 32) {
        memcpy(h->buf + h->nbuf, p, n);
        h->nbuf += n;
        return;
    }
    if (h->nbuf) {
        size_t k = 32 - h->nbuf;
        memcpy(h->buf + h->nbuf, p, k);
        for (int i = 0; i < 4; i++) h->v[i] = round64(h->v[i], read64(h->buf + 8 * i));
        p += k;
        n -= k;
        h->nbuf = 0;
    }
    uint64_t v0 = h->v[0], v1 = h->v[1], v2 = h->v[2], v3 = h->v[3];
    for (; n >= 32; p += 32, n -= 32) {
        v0 = round64(v0, read64(p));
        v1 = round64(v1, read64(p + 8));
        v2 = round64(v2, read64(p + 16));
        v3 = round64(v3, read64(p + 24));
    }
    h->v[0] = v0, h->v[1] = v1, h->v[2] = v2, h->v[3] = v3;
    memcpy(h->buf, p, n);
    h->nbuf = n;
}

uint64_t dt_xxh64_final(const struct dt_xxh64 *h)
{
    uint64_t acc;
    if (h->total >= 32) {
        acc = rotl(h->v[0], 1) + rotl(h->v[1], 7) + rotl(h->v[2], 12) + rotl(h->v[3], 18);
        for (int i = 0; i < 4; i++) acc = merge(acc, h->v[i]);
    } else {
        acc = h->seed + P5;
    }
    acc += h->total;
    const unsigned char *p = h->buf;
    size_t n = h->nbuf;
    for (; n >= 8; p += 8, n -= 8) acc = rotl(acc ^ round64(0, read64(p)), 27) * P1 + P4;
    if (n >= 4) {
        acc = rotl(acc ^ (uint64_t)read32(p) * P1, 23) * P2 + P3;
        p += 4;
        n -= 4;
    }
    for (; n > 0; p++, n--) acc = rotl(acc ^ (uint64_t)*p * P5, 11) * P1;
    acc ^= acc >> 33;
    acc *= P2;
    acc ^= acc >> 29;
    acc *= P3;
    acc ^= acc >> 32;
    return acc;
}

uint64_t dt_xxh64(const void *data, size_t n, uint64_t seed)
{
    struct dt_xxh64 h;
    dt_xxh64_init(&h, seed);
    dt_xxh64_update(&h, data, n);
    return dt_xxh64_final(&h);
}
