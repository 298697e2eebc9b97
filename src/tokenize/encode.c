/*
 * encode.c - the encoding pipeline: repair invalid UTF-8, normalize (SentencePiece: `▁` for
 * spaces and before the text), pre-tokenize (split.c), and merge each piece (bpe.c) through a
 * per-thread cache of pieces already seen, as Hugging Face's BPE keeps one: natural text repeats
 * its words, and the cache is most of the speed.
 */
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "tokenize/tok_impl.h"
#include "tokenize/unicode.h"

#define SPACE_MARK "\xe2\x96\x81"
#define CACHE_SLOTS (1u << 16)  /* the table; cleared whole when half full */
#define CACHE_MAX_PIECE 64      /* longer pieces are rare and not worth keeping */
#define CACHE_POOL (1u << 22)   /* bytes of keys and ids before it is cleared */

struct cache_ent {
    uint64_t h;
    uint32_t koff, klen, voff, vn; /* klen 0: empty */
};

struct dt_tok_ctx {
    const struct dt_tokenizer *t;
    struct bpe_scratch bs;
    int32_t *sym;
    size_t symcap;
    unsigned char *buf; /* the repaired and normalized text */
    size_t bufcap;
    struct cache_ent *ce;
    uint32_t used;
    char *keys;
    size_t nkeys;
    uint32_t *vals;
    size_t nvals;
};

dt_tok_ctx_t dt_tok_ctx_new(dt_tokenizer_t t)
{
    struct dt_tok_ctx *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->t = t;
    c->ce = calloc(CACHE_SLOTS, sizeof *c->ce);
    c->keys = malloc(CACHE_POOL);
    c->vals = malloc(CACHE_POOL);
    if (!c->ce || !c->keys || !c->vals) {
        dt_tok_ctx_free(c);
        return NULL;
    }
    return c;
}

void dt_tok_ctx_free(dt_tok_ctx_t c)
{
    if (!c) return;
    dt_tok_bpe_free(&c->bs);
    free(c->sym);
    free(c->buf);
    free(c->ce);
    free(c->keys);
    free(c->vals);
    free(c);
}

void dt_tok_ids_free(struct dt_tok_ids *ids)
{
    free(ids->v);
    memset(ids, 0, sizeof *ids);
}

static bool reserve(struct dt_tok_ids *o, size_t more)
{
    if (o->n + more <= o->cap) return true;
    size_t cap = o->cap ? o->cap : 1024;
    while (cap < o->n + more) cap *= 2;
    uint32_t *v = realloc(o->v, cap * sizeof *v);
    if (!v) return false;
    o->v = v;
    o->cap = cap;
    return true;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static struct cache_ent *cache_find(struct dt_tok_ctx *c, const unsigned char *s, size_t n, uint64_t h)
{
    for (uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
        struct cache_ent *e = &c->ce[i];
        if (!e->klen || (e->h == h && e->klen == n && !memcmp(c->keys + e->koff, s, n))) return e;
    }
}

static void cache_put(struct dt_tok_ctx *c, struct cache_ent *e, const unsigned char *s, size_t n, uint64_t h,
                      const uint32_t *ids, size_t k)
{
    if (c->used >= CACHE_SLOTS / 2 || c->nkeys + n > CACHE_POOL || (c->nvals + k) * sizeof *c->vals > CACHE_POOL) {
        memset(c->ce, 0, CACHE_SLOTS * sizeof *c->ce);
        c->used = 0;
        c->nkeys = c->nvals = 0;
        e = cache_find(c, s, n, h);
    }
    memcpy(c->keys + c->nkeys, s, n);
    memcpy(c->vals + c->nvals, ids, k * sizeof *ids);
    *e = (struct cache_ent){h, (uint32_t)c->nkeys, (uint32_t)n, (uint32_t)c->nvals, (uint32_t)k};
    c->nkeys += n;
    c->nvals += k;
    c->used++;
}

/* The initial symbols of a piece: each byte's token (byte-level), or each character's token, its
 * bytes' <0xNN> tokens when it has none (byte fallback), else <unk> (consecutive ones fused). */
static long symbols(struct dt_tok_ctx *c, const unsigned char *s, size_t n)
{
    const struct dt_tokenizer *t = c->t;
    if (!grow((void **)&c->sym, &c->symcap, n, sizeof *c->sym)) return -1;
    size_t k = 0;
    if (!t->spm) {
        for (size_t i = 0; i < n; i++) c->sym[i] = t->byte_tok[s[i]];
        return (long)n;
    }
    for (size_t i = 0; i < n;) {
        size_t l = 1;
        int32_t id;
        if (s[i] < 0x80) {
            id = t->ascii[s[i]];
        } else {
            dt_utf8_next(s + i, n - i, &l);
            id = dt_tok_lookup(t, (const char *)s + i, l);
        }
        if (id >= 0) {
            c->sym[k++] = id;
        } else {
            bool all = t->byte_fallback;
            for (size_t b = 0; b < l && all; b++) all = t->byte_tok[s[i + b]] >= 0;
            if (all) {
                for (size_t b = 0; b < l; b++) c->sym[k++] = t->byte_tok[s[i + b]];
            } else if (t->unk >= 0 && !(k > 0 && c->sym[k - 1] == t->unk)) {
                c->sym[k++] = t->unk; /* fuse_unk: a run of unknown characters is one <unk> */
            }
        }
        i += l;
    }
    return (long)k;
}

static dt_status_t piece(struct dt_tok_ctx *c, const unsigned char *s, size_t n, struct dt_tok_ids *out)
{
    const struct dt_tokenizer *t = c->t;
    struct cache_ent *e = NULL;
    uint64_t h = 0;
    if (n <= CACHE_MAX_PIECE) {
        h = dt_tok_hash(s, n);
        e = cache_find(c, s, n, h);
        if (e->klen) {
            if (!reserve(out, e->vn)) goto nomem;
            memcpy(out->v + out->n, c->vals + e->voff, e->vn * sizeof *out->v);
            out->n += e->vn;
            return DT_SUCCESS;
        }
    }
    if (!reserve(out, n)) goto nomem;
    uint32_t *o = out->v + out->n;
    long k = -1;
    if (t->ignore_merges) {
        int32_t id = dt_tok_lookup(t, (const char *)s, n);
        if (id >= 0) {
            o[0] = (uint32_t)id;
            k = 1;
        }
    }
    if (k < 0) {
        long m = symbols(c, s, n);
        if (m < 0 || (k = dt_tok_bpe(t, &c->bs, c->sym, (size_t)m)) < 0) goto nomem;
        for (long i = 0; i < k; i++) o[i] = (uint32_t)c->sym[i];
    }
    if (e) cache_put(c, e, s, n, h, o, (size_t)k);
    out->n += (size_t)k;
    return DT_SUCCESS;
nomem:
    return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory tokenizing a piece of %zu bytes", n);
}

dt_status_t dt_tokenizer_encode(dt_tok_ctx_t c, const char *text, size_t n, struct dt_tok_ids *out)
{
    const struct dt_tokenizer *t = c->t;
    const unsigned char *s = (const unsigned char *)text;
    if (n == 0) return DT_SUCCESS;
    if (t->spm) {
        unsigned char *tmp = NULL;
        if (!dt_utf8_valid(s, n)) {
            if (!(tmp = malloc(3 * n))) goto nomem;
            n = dt_utf8_repair(s, n, tmp);
            s = tmp;
        }
        /* Prepend "▁", Replace " " -> "▁", in one pass that hands each piece to BPE as it ends: a
         * cut before each `▁` that follows another character (when the load found that safe) */
        if (!grow((void **)&c->buf, &c->bufcap, 3 + 3 * n, 1)) {
            free(tmp);
            goto nomem;
        }
        unsigned char *b = c->buf;
        bool lead = s[0] == ' ' || (n >= 3 && !memcmp(s, SPACE_MARK, 3));
        size_t m = t->metaspace && lead ? 0 : 3, start = 0;
        bool after_mark = true;
        dt_status_t rc = DT_SUCCESS;
        memcpy(b, SPACE_MARK, 3);
        for (size_t i = 0; i < n && !rc; i++) {
            bool mark = s[i] == ' ' || (s[i] == 0xE2 && i + 2 < n && s[i + 1] == 0x96 && s[i + 2] == 0x81);
            if (!mark) {
                b[m++] = s[i];
                after_mark = false;
                continue;
            }
            if (!after_mark && t->spm_cut) {
                rc = piece(c, b + start, m - start, out);
                start = m;
            }
            memcpy(b + m, SPACE_MARK, 3);
            m += 3;
            i += s[i] == ' ' ? 0 : 2;
            after_mark = true;
        }
        free(tmp);
        return rc ? rc : piece(c, b + start, m - start, out);
    }
    if (!dt_utf8_valid(s, n)) {
        if (!grow((void **)&c->buf, &c->bufcap, 3 * n, 1)) goto nomem;
        n = dt_utf8_repair(s, n, c->buf);
        s = c->buf;
    }
    size_t (*split)(const unsigned char *, size_t, size_t) =
        t->split == SPLIT_LLAMA3 ? dt_tok_split_llama3 : dt_tok_split_gpt2;
    for (size_t i = 0; i < n;) {
        size_t e = split(s, n, i);
        DT_CHECK(piece(c, s + i, e - i, out));
        i = e;
    }
    return DT_SUCCESS;
nomem:
    return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory tokenizing a text of %zu bytes", n);
}
