/*
 * split.c - the pre-tokenizers' regexes, written out by hand (as llama.cpp's unicode.cpp does):
 * each function returns where the piece that starts at s[i] ends, exactly where Hugging Face's
 * regex engine (Oniguruma) ends its match. The input is valid UTF-8 (encode.c repairs it first).
 *
 * GPT-2:  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * Llama 3 (tiktoken's cl100k_base):
 *         (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *         \s*[\r\n]+|\s+(?!\S)|\s+
 * \s+(?!\S) needs no backtracking: a whitespace run followed by more text gives all but its last
 * character, which then starts the next piece (a space before a word joins it).
 */
#include "tokenize/tok_impl.h"
#include "tokenize/unicode.h"

static inline int cls(const unsigned char *s, size_t n, size_t i, size_t *len)
{
    if (s[i] < 0x80) {
        static const uint8_t ascii[128] = {
            ['\t'] = DT_UNI_S, ['\n'] = DT_UNI_S, ['\v'] = DT_UNI_S, ['\f'] = DT_UNI_S, ['\r'] = DT_UNI_S,
            [' '] = DT_UNI_S, ['0'] = DT_UNI_N, ['1'] = DT_UNI_N, ['2'] = DT_UNI_N, ['3'] = DT_UNI_N,
            ['4'] = DT_UNI_N, ['5'] = DT_UNI_N, ['6'] = DT_UNI_N, ['7'] = DT_UNI_N, ['8'] = DT_UNI_N,
            ['9'] = DT_UNI_N,
#define L26(b) [b] = 1, [b + 1] = 1, [b + 2] = 1, [b + 3] = 1, [b + 4] = 1, [b + 5] = 1, [b + 6] = 1, [b + 7] = 1, \
    [b + 8] = 1, [b + 9] = 1, [b + 10] = 1, [b + 11] = 1, [b + 12] = 1, [b + 13] = 1, [b + 14] = 1, [b + 15] = 1,     \
    [b + 16] = 1, [b + 17] = 1, [b + 18] = 1, [b + 19] = 1, [b + 20] = 1, [b + 21] = 1, [b + 22] = 1, [b + 23] = 1,   \
    [b + 24] = 1, [b + 25] = 1
            L26('A'), L26('a')};
#undef L26
        *len = 1;
        return ascii[s[i]];
    }
    return dt_uni_class(dt_utf8_next(s + i, n - i, len));
}

/* the end of the run of characters whose classes meet want (mask, value) from i */
static inline size_t run(const unsigned char *s, size_t n, size_t i, int mask, int value)
{
    size_t l;
    while (i < n && (cls(s, n, i, &l) & mask) == value) i += l;
    return i;
}

static inline size_t run_letters(const unsigned char *s, size_t n, size_t i)
{
    return run(s, n, i, DT_UNI_L, DT_UNI_L);
}

/* the whitespace alternatives once nothing else matched at i: \s+(?!\S)|\s+ */
static size_t spaces(const unsigned char *s, size_t n, size_t i)
{
    size_t l = 1, last = i, j = i;
    while (j < n && (cls(s, n, j, &l) & DT_UNI_S)) {
        last = j;
        j += l;
    }
    if (j == i) return i + l; /* not reached by the callers: a character no alternative takes alone */
    if (j == n || last == i) return j;
    return last;
}

size_t dt_tok_split_gpt2(const unsigned char *s, size_t n, size_t i)
{
    unsigned char c = s[i];
    if (c == '\'' && i + 1 < n) {
        unsigned char d = s[i + 1];
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
        if (i + 2 < n) {
            unsigned char e = s[i + 2];
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return i + 3;
        }
    }
    size_t j = c == ' ' && i + 1 < n ? i + 1 : i, l;
    int k = cls(s, n, j, &l);
    if (k & DT_UNI_L) return run_letters(s, n, j + l);
    if (k & DT_UNI_N) return run(s, n, j + l, DT_UNI_N, DT_UNI_N);
    if (!k) return run(s, n, j + l, DT_UNI_L | DT_UNI_N | DT_UNI_S, 0);
    return spaces(s, n, i);
}

static inline unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

size_t dt_tok_split_llama3(const unsigned char *s, size_t n, size_t i)
{
    unsigned char c = s[i];
    if (c == '\'' && i + 1 < n) {
        /* (?i:...): Unicode case folding, so U+017F LONG S matches 's' as well */
        unsigned char d = lower(s[i + 1]);
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
        if (s[i + 1] == 0xC5 && i + 2 < n && s[i + 2] == 0xBF) return i + 3;
        if (i + 2 < n) {
            unsigned char e = lower(s[i + 2]);
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return i + 3;
        }
    }
    size_t l0, l1;
    int k0 = cls(s, n, i, &l0);
    if (k0 & DT_UNI_L) return run_letters(s, n, i + l0);
    if (!(k0 & (DT_UNI_L | DT_UNI_N)) && c != '\r' && c != '\n' && i + l0 < n && (cls(s, n, i + l0, &l1) & DT_UNI_L))
        return run_letters(s, n, i + l0 + l1);
    if (k0 & DT_UNI_N) {
        size_t j = i + l0;
        for (int m = 1; m < 3 && j < n && (cls(s, n, j, &l1) & DT_UNI_N); m++) j += l1;
        return j;
    }
    size_t j = c == ' ' && i + 1 < n ? i + 1 : i, l;
    if (!(cls(s, n, j, &l) & (DT_UNI_L | DT_UNI_N | DT_UNI_S))) {
        j = run(s, n, j + l, DT_UNI_L | DT_UNI_N | DT_UNI_S, 0);
        while (j < n && (s[j] == '\r' || s[j] == '\n')) j++;
        return j;
    }
    /* \s*[\r\n]+: up to the last CR or LF of the whitespace run */
    size_t e = i, nl = 0;
    bool has_nl = false;
    while (e < n && (cls(s, n, e, &l) & DT_UNI_S)) {
        if (s[e] == '\r' || s[e] == '\n') {
            nl = e;
            has_nl = true;
        }
        e += l;
    }
    if (has_nl) return nl + 1;
    return spaces(s, n, i);
}
