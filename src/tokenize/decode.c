/*
 * decode.c - ids back to text, as Hugging Face's decoders do it: byte-level tokens are their
 * bytes; SentencePiece tokens read `▁` as a space and <0xNN> tokens as bytes, and the text loses
 * its first leading space (the one the normalizer put there). The stream never hands out half a
 * character: `dtrun generate` prints as it samples.
 */
#include <stdlib.h>
#include <string.h>
#include "tokenize/tok_impl.h"
#include "tokenize/unicode.h"

struct sbuf {
    char *p;
    size_t n, cap;
    bool fail;
};

static void put(struct sbuf *b, const void *s, size_t n)
{
    if (b->fail) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->fail = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* bytes as text: each maximal invalid subpart a U+FFFD (from_utf8_lossy) or, per_byte, each of
 * its bytes one (ByteFallback) */
static void put_lossy(struct sbuf *b, const unsigned char *s, size_t n, bool per_byte)
{
    for (size_t i = 0; i < n;) {
        size_t l;
        if (s[i] < 0x80) {
            put(b, s + i, 1);
            i++;
            continue;
        }
        uint32_t c = dt_utf8_next(s + i, n - i, &l);
        bool real = !(c == 0xFFFD && !(l == 3 && s[i] == 0xEF));
        if (real) put(b, s + i, l);
        else for (size_t k = 0; k < (per_byte ? l : 1); k++) put(b, "\xef\xbf\xbd", 3);
        i += l;
    }
}

char *dt_tokenizer_decode(dt_tokenizer_t t, const uint32_t *ids, size_t n, bool skip_special, size_t *len)
{
    struct sbuf b = {0}, bytes = {0};
    put(&b, "", 0);
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        if (id >= (uint32_t)t->nvocab || (skip_special && t->special[id])) continue;
        const char *s = t->pool + t->off[id];
        size_t l = t->len[id];
        if (!t->spm) {
            put(&bytes, s, l);
            continue;
        }
        if (t->byteval[id] >= 0) {
            unsigned char c = (unsigned char)t->byteval[id];
            put(&bytes, &c, 1);
            continue;
        }
        if (bytes.n) put_lossy(&b, (unsigned char *)bytes.p, bytes.n, true);
        bytes.n = 0;
        for (size_t k = 0; k < l;) {
            if (k + 3 <= l && !memcmp(s + k, "\xe2\x96\x81", 3)) {
                put(&b, " ", 1);
                k += 3;
            } else {
                put(&b, s + k, 1);
                k++;
            }
        }
    }
    if (bytes.n) put_lossy(&b, (unsigned char *)bytes.p, bytes.n, t->spm);
    free(bytes.p);
    if (b.fail || bytes.fail) {
        free(b.p);
        return NULL;
    }
    b.p[b.n] = 0;
    if (t->spm && b.n && b.p[0] == ' ') {
        memmove(b.p, b.p + 1, b.n);
        b.n--;
    }
    *len = b.n;
    return b.p;
}

void dt_tok_stream_init(struct dt_tok_stream *s, dt_tokenizer_t t, bool skip_special)
{
    memset(s, 0, sizeof *s);
    s->t = t;
    s->skip_special = skip_special;
}

/* the expected length of a character from its first byte; 0 when it cannot start one */
static int char_len(unsigned char b)
{
    return b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
}

/* Appends bytes to the pending ones and writes out every complete character (and U+FFFD for each
 * invalid subpart); an unfinished character at the end stays pending. */
static int emit(struct dt_tok_stream *s, const unsigned char *in, size_t n, char *buf, size_t size, size_t o)
{
    for (size_t i = 0; i < n; i++) {
        s->pend[s->npend++] = in[i];
        for (;;) {
            if (!s->npend) break;
            int want = char_len(s->pend[0]);
            size_t l;
            if (want && s->npend < want) {
                /* still valid so far? */
                dt_utf8_next(s->pend, (size_t)s->npend, &l);
                if ((int)l == s->npend) break;
            }
            uint32_t c = dt_utf8_next(s->pend, (size_t)s->npend, &l);
            (void)c;
            bool bad = !want || c == 0xFFFD ? !(l == 3 && s->pend[0] == 0xEF) : false;
            if (o + 4 > size) return -1;
            if (bad) {
                memcpy(buf + o, "\xef\xbf\xbd", 3);
                o += 3;
            } else {
                memcpy(buf + o, s->pend, l);
                o += l;
            }
            memmove(s->pend, s->pend + l, (size_t)s->npend - l);
            s->npend -= (int)l;
        }
    }
    return (int)o;
}

int dt_tok_stream_feed(struct dt_tok_stream *s, uint32_t id, char *buf, size_t size)
{
    const struct dt_tokenizer *t = s->t;
    if (id >= (uint32_t)t->nvocab || (s->skip_special && t->special[id])) return 0;
    const unsigned char *p = (const unsigned char *)t->pool + t->off[id];
    size_t l = t->len[id], o = 0;
    if (t->byteval[id] >= 0 && t->spm) {
        unsigned char c = (unsigned char)t->byteval[id];
        s->started = true;
        return emit(s, &c, 1, buf, size, 0);
    }
    for (size_t k = 0; k < l;) {
        if (t->spm && k + 3 <= l && !memcmp(p + k, "\xe2\x96\x81", 3)) {
            /* the first leading space of the text is the normalizer's */
            int r = s->started ? emit(s, (const unsigned char *)" ", 1, buf, size, o) : (int)o;
            if (r < 0) return -1;
            o = (size_t)r;
            k += 3;
        } else {
            int r = emit(s, p + k, 1, buf, size, o);
            if (r < 0) return -1;
            o = (size_t)r;
            k++;
        }
        s->started = true;
    }
    return (int)o;
}

int dt_tok_stream_finish(struct dt_tok_stream *s, char *buf, size_t size)
{
    if (!s->npend) return 0;
    s->npend = 0;
    if (size < 3) return -1;
    memcpy(buf, "\xef\xbf\xbd", 3);
    return 3;
}
