/*
 * checksum.h - XXH64 (Yann Collet's xxHash, 64-bit; its published
 * specification, written out here): a checksum that keeps up with a disk,
 * for checkpoint files, computed while they are written. Not a cryptographic
 * hash: it catches flipped bits and torn files, not an attacker.
 */
#ifndef DT_CHECKSUM_H
#define DT_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

struct dt_xxh64 {
    uint64_t v[4], total;
    unsigned char buf[32];
    size_t nbuf;
    uint64_t seed;
};

void dt_xxh64_init(struct dt_xxh64 *h, uint64_t seed);
void dt_xxh64_update(struct dt_xxh64 *h, const void *data, size_t n);
uint64_t dt_xxh64_final(const struct dt_xxh64 *h);
uint64_t dt_xxh64(const void *data, size_t n, uint64_t seed);

#endif
