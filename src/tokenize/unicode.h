/*
 * unicode.h - what the pre-tokenizers ask of a character: UTF-8 decoding the way Python's and
 * JavaScript's decoders repair invalid input (WHATWG: one U+FFFD per maximal invalid subpart),
 * and the classes \p{L}, \p{N}, \s of Unicode 16.0 (unicode_tables.h, generated).
 */
#ifndef DT_TOK_UNICODE_H
#define DT_TOK_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#define DT_UNI_L 1
#define DT_UNI_N 2
#define DT_UNI_S 4

/* The code point at s[0..n) (n >= 1) and its length in *len; U+FFFD with the length of the
 * invalid subpart when the bytes are not valid UTF-8. */
uint32_t dt_utf8_next(const unsigned char *s, size_t n, size_t *len);
/* The classes (DT_UNI_*) of a code point. */
int dt_uni_class(uint32_t c);
/* Whether s[0..n) is valid UTF-8. */
int dt_utf8_valid(const unsigned char *s, size_t n);
/* Copies s[0..n) into out (room for 3n bytes) with each invalid subpart replaced by U+FFFD;
 * returns the length written. */
size_t dt_utf8_repair(const unsigned char *s, size_t n, unsigned char *out);

#endif
