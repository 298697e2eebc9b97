/*
 * load.c - reading a tokenizer: Hugging Face's tokenizer.json, or GPT-2's original encoder.json
 * (vocab.json) + vocab.bpe (merges.txt). The subset the three families use is read; anything else
 * a file asks for (a normalizer, pre-tokenizer, model or decoder type, a regex, an option) is
 * refused by name with its place in the file, never silently encoded another way.
 *
 * Byte-level vocabularies are written in GPT-2's bytes_to_unicode alphabet; their texts are turned
 * back into raw bytes here, once, so BPE runs on bytes (as tiktoken does).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/error.h"
#include "tokenize/tjson.h"
#include "tokenize/tok_impl.h"
#include "tokenize/unicode.h"

#define GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define LLAMA3_PATTERN                                                                                             \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
    "\\s+(?!\\S)|\\s+"
#define SPACE_MARK "\xe2\x96\x81" /* U+2581 `▁`, SentencePiece's space */

uint64_t dt_tok_hash(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 32);
}

int32_t dt_tok_lookup(const struct dt_tokenizer *t, const char *s, size_t n)
{
    for (uint32_t i = (uint32_t)dt_tok_hash(s, n) & t->vmask;; i = (i + 1) & t->vmask) {
        int32_t id = t->vh[i];
        if (id < 0) return -1;
        if (t->len[id] == n && !memcmp(t->pool + t->off[id], s, n)) return id;
    }
}

/* ---- reading */

struct loader {
    struct dt_tokenizer *t;
    const char *file; /* for messages */
    struct tj_doc d;
    uint16_t unbyte[0x144]; /* ByteLevel's alphabet: character -> byte + 1, 0 outside it */
    size_t poolcap, npool;
};

static dt_status_t refuse(struct loader *L, const char *where, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static dt_status_t refuse(struct loader *L, const char *where, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return dt_error(DT_ERR_DATA, "%s: error: %s: %s is not supported\n  hint: dtrun reads the tokenizer.json of GPT-2, "
                    "Llama 3 and Llama 2/TinyLlama/Mistral (byte-level or SentencePiece-style BPE); convert this one "
                    "or open an issue with its file", L->file, where, msg);
}

static dt_status_t read_all(const char *path, char **buf, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return dt_error(DT_ERR_DATA, "%s: error: cannot read the tokenizer: %s", path, strerror(errno));
    size_t cap = 1 << 20, len = 0;
    char *b = malloc(cap);
    for (size_t got; b && (got = fread(b + len, 1, cap - len, f)) > 0;) {
        len += got;
        if (len == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!b || err) {
        free(b);
        return dt_error(DT_ERR_DATA, "%s: error: %s", path, b ? "reading failed" : "out of memory");
    }
    *buf = b;
    *n = len;
    return DT_SUCCESS;
}

static void byte_alphabet(struct loader *L)
{
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        uint32_t c = printable ? (uint32_t)b : 0x100 + (uint32_t)n++;
        L->unbyte[c] = (uint16_t)(b + 1);
    }
}

/* s[0..n) in ByteLevel's alphabet as raw bytes into o (a character outside it, as in an added
 * token, stays as it is); returns the length, never more than n */
static size_t unbyte(const struct loader *L, const char *s, size_t n, char *o)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t l;
        uint32_t c = dt_utf8_next((const unsigned char *)s + i, n - i, &l);
        if (c < 0x144 && L->unbyte[c]) {
            o[k++] = (char)(L->unbyte[c] - 1);
        } else {
            memcpy(o + k, s + i, l);
            k += l;
        }
        i += l;
    }
    return k;
}

/* Appends a token's text to the pool: in ByteLevel's alphabet undone when byte_level (a character
 * outside it, as in an added token, stays as it is). */
static dt_status_t add_text(struct loader *L, int32_t id, const char *s, size_t n, bool byte_level)
{
    struct dt_tokenizer *t = L->t;
    if (L->npool + n + 1 > L->poolcap) {
        size_t cap = L->poolcap ? L->poolcap * 2 : 1 << 20;
        while (cap < L->npool + n + 1) cap *= 2;
        char *p = realloc(t->pool, cap);
        if (!p) return dt_error(DT_ERR_NOMEM, "%s: error: out of memory reading the vocabulary", L->file);
        t->pool = p;
        L->poolcap = cap;
    }
    size_t k = byte_level ? unbyte(L, s, n, t->pool + L->npool) : n;
    if (!byte_level) memcpy(t->pool + L->npool, s, n);
    t->off[id] = (uint32_t)L->npool;
    t->len[id] = (uint32_t)k;
    L->npool += k;
    return DT_SUCCESS;
}

static const char *str_of(struct loader *L, const struct tj_node *o, const char *key)
{
    const struct tj_node *n = tj_get(&L->d, o, key);
    return n && n->type == TJ_STR ? tj_str(&L->d, n) : NULL;
}

static bool is_true(struct loader *L, const struct tj_node *o, const char *key)
{
    const struct tj_node *n = tj_get(&L->d, o, key);
    return n && n->type == TJ_TRUE;
}

/* vocabulary: the model's {text: id} and the added tokens */
static dt_status_t vocab(struct loader *L, const struct tj_node *v, const struct tj_node *added, bool byte_level)
{
    struct dt_tokenizer *t = L->t;
    if (!v || v->type != TJ_OBJ)
        return dt_error(DT_ERR_DATA, "%s: error: model.vocab is missing or not an object of {token: id}", L->file);
    int64_t maxid = -1;
    size_t count = 0;
    for (const struct tj_node *m = tj_child(&L->d, v); m; m = tj_next(&L->d, m), count++) {
        if (m->type != TJ_NUM || m->num < 0 || m->num >= (1 << 22) || m->num != (double)(int64_t)m->num)
            return dt_error(DT_ERR_DATA, "%s: error: model.vocab[\"%s\"] is not a token id (a whole number from 0 "
                            "to 4194303)",
                            L->file, tj_key(&L->d, m));
        if ((int64_t)m->num > maxid) maxid = (int64_t)m->num;
    }
    for (const struct tj_node *a = added ? tj_child(&L->d, added) : NULL; a; a = tj_next(&L->d, a), count++) {
        const struct tj_node *id = tj_get(&L->d, a, "id");
        if (!id || id->type != TJ_NUM || id->num < 0 || id->num >= (1 << 22) ||
            id->num != (double)(int64_t)id->num || !str_of(L, a, "content"))
            return dt_error(DT_ERR_DATA, "%s: error: added_tokens: an entry without a whole \"id\" from 0 to 4194303 or a "
                            "\"content\" string", L->file);
        if ((int64_t)id->num > maxid) maxid = (int64_t)id->num;
    }
    if (maxid < 0) return dt_error(DT_ERR_DATA, "%s: error: model.vocab is empty", L->file);
    t->nvocab = (int32_t)maxid + 1;
    size_t nv = (size_t)t->nvocab;
    t->off = calloc(nv, sizeof *t->off);
    t->len = calloc(nv, sizeof *t->len);
    t->special = calloc(nv, 1);
    t->byteval = malloc(nv * sizeof *t->byteval);
    uint8_t *seen = calloc(nv, 1);
    uint32_t hcap = 1;
    while (hcap < 2 * (count + 1)) hcap *= 2;
    t->vh = malloc(hcap * sizeof *t->vh);
    t->vmask = hcap - 1;
    dt_status_t rc = DT_SUCCESS;
    if (!t->off || !t->len || !t->special || !t->byteval || !seen || !t->vh) {
        rc = dt_error(DT_ERR_NOMEM, "%s: error: out of memory for %zu tokens", L->file, nv);
        goto out;
    }
    memset(t->vh, 0xff, hcap * sizeof *t->vh);
    for (size_t i = 0; i < nv; i++) t->byteval[i] = -1;
    for (int pass = 0; pass < 2 && rc == DT_SUCCESS; pass++) {
        const struct tj_node *m = pass == 0 ? tj_child(&L->d, v) : added ? tj_child(&L->d, added) : NULL;
        for (; m && rc == DT_SUCCESS; m = tj_next(&L->d, m)) {
            int32_t id = (int32_t)(pass == 0 ? m->num : tj_get(&L->d, m, "id")->num);
            const char *s = pass == 0 ? tj_key(&L->d, m) : str_of(L, m, "content");
            if (pass == 1) t->special[id] = is_true(L, m, "special");
            if (seen[id]) continue; /* an added token that is also in the vocabulary (GPT-2's <|endoftext|>) */
            seen[id] = 1;
            rc = add_text(L, id, s, strlen(s), byte_level && pass == 0);
        }
    }
    /* the hash, from the pool (realloc'd while filling) */
    for (int32_t id = 0; id < t->nvocab && rc == DT_SUCCESS; id++) {
        if (!seen[id]) continue;
        const char *s = t->pool + t->off[id];
        size_t n = t->len[id];
        uint32_t i = (uint32_t)dt_tok_hash(s, n) & t->vmask;
        for (; t->vh[i] >= 0; i = (i + 1) & t->vmask) {
            int32_t o = t->vh[i];
            if (t->len[o] == n && !memcmp(t->pool + t->off[o], s, n)) break; /* the same text twice: the first id */
        }
        if (t->vh[i] < 0) t->vh[i] = id;
        if (n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') {
            unsigned v2;
            char hex[3] = {s[3], s[4], 0}, *e;
            v2 = (unsigned)strtoul(hex, &e, 16);
            if (!*e && hex[0] != '+' && hex[0] != '-' && hex[0] != ' ') t->byteval[id] = (int16_t)v2;
        }
    }
out:
    free(seen);
    return rc;
}

/* one merge: its two texts (in the file's alphabet) to ids, and their joined text's id */
static dt_status_t merge_add(struct loader *L, bool byte_level, size_t rank, const char *a, size_t na, const char *b,
                             size_t nb)
{
    struct dt_tokenizer *t = L->t;
    char buf[1024];
    int32_t ida, idb, idr;
    size_t la, lb;
    if (na + nb >= sizeof buf / 2)
        return dt_error(DT_ERR_DATA, "%s: error: merges[%zu] is longer than %zu bytes", L->file, rank, sizeof buf / 2);
    /* the texts as the pool holds them */
    if (byte_level) {
        la = unbyte(L, a, na, buf);
        lb = unbyte(L, b, nb, buf + la);
    } else {
        memcpy(buf, a, na);
        memcpy(buf + na, b, nb);
        la = na;
        lb = nb;
    }
    ida = dt_tok_lookup(t, buf, la);
    idb = dt_tok_lookup(t, buf + la, lb);
    idr = dt_tok_lookup(t, buf, la + lb);
    if (ida < 0 || idb < 0 || idr < 0)
        return dt_error(DT_ERR_DATA, "%s: error: merges[%zu] (\"%.*s\" + \"%.*s\"): %s is not in model.vocab\n  hint: "
                        "the file is damaged or its vocab and merges do not belong together", L->file, rank, (int)na, a,
                        (int)nb, b, ida < 0 ? "its left part" : idb < 0 ? "its right part" : "the merged token");
    uint64_t k = (uint64_t)(uint32_t)ida << 32 | (uint32_t)idb;
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 32) & t->mmask;
    while (t->mres[i] >= 0 && t->mk[i] != k) i = (i + 1) & t->mmask;
    /* a pair listed twice takes its last rank, as Hugging Face's map of merges does */
    t->mk[i] = k;
    t->mrank[i] = (uint32_t)rank;
    t->mres[i] = idr;
    return DT_SUCCESS;
}

static dt_status_t merges_alloc(struct loader *L, size_t n)
{
    struct dt_tokenizer *t = L->t;
    uint32_t cap = 1;
    while (cap < 2 * (n + 1)) cap *= 2;
    t->mk = malloc(cap * sizeof *t->mk);
    t->mrank = malloc(cap * sizeof *t->mrank);
    t->mres = malloc(cap * sizeof *t->mres);
    if (!t->mk || !t->mrank || !t->mres) return dt_error(DT_ERR_NOMEM, "%s: error: out of memory for %zu merges", L->file, n);
    memset(t->mres, 0xff, cap * sizeof *t->mres);
    t->mmask = cap - 1;
    return DT_SUCCESS;
}

static dt_status_t merges_json(struct loader *L, const struct tj_node *m, bool byte_level)
{
    if (!m || m->type != TJ_ARR)
        return dt_error(DT_ERR_DATA, "%s: error: model.merges is missing or not an array", L->file);
    DT_CHECK(merges_alloc(L, m->len));
    size_t rank = 0;
    for (const struct tj_node *e = tj_child(&L->d, m); e; e = tj_next(&L->d, e), rank++) {
        if (e->type == TJ_STR) {
            /* the legacy layout "a b": exactly one space, as Hugging Face splits it */
            const char *s = tj_str(&L->d, e), *sp = memchr(s, ' ', e->len);
            if (!sp || memchr(sp + 1, ' ', e->len - (size_t)(sp + 1 - s)))
                return dt_error(DT_ERR_DATA, "%s: error: merges[%zu] \"%s\" is not two tokens separated by one space",
                                L->file, rank, s);
            DT_CHECK(merge_add(L, byte_level, rank, s, (size_t)(sp - s), sp + 1, e->len - (size_t)(sp + 1 - s)));
        } else if (e->type == TJ_ARR && e->len == 2 && tj_child(&L->d, e)->type == TJ_STR &&
                   tj_next(&L->d, tj_child(&L->d, e))->type == TJ_STR) {
            const struct tj_node *a = tj_child(&L->d, e), *b = tj_next(&L->d, a);
            DT_CHECK(merge_add(L, byte_level, rank, tj_str(&L->d, a), a->len, tj_str(&L->d, b), b->len));
        } else {
            return dt_error(DT_ERR_DATA, "%s: error: merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", L->file, rank);
        }
    }
    return DT_SUCCESS;
}

/* ---- the pipeline's stages: what each may be */

static bool is_type(struct loader *L, const struct tj_node *n, const char *type)
{
    const char *ty = str_of(L, n, "type");
    return ty && !strcmp(ty, type);
}

static const char *type_of(struct loader *L, const struct tj_node *n)
{
    const char *ty = str_of(L, n, "type");
    return ty ? ty : "(no type)";
}

/* normalizer: null, or Sequence[Prepend "▁", Replace " " -> "▁"] (Llama 2) */
static dt_status_t normalizer(struct loader *L, const struct tj_node *n, bool *spm)
{
    *spm = false;
    if (!n || n->type == TJ_NULL) return DT_SUCCESS;
    if (!is_type(L, n, "Sequence")) return refuse(L, "normalizer", "type \"%s\"", type_of(L, n));
    const struct tj_node *list = tj_get(&L->d, n, "normalizers");
    int k = 0;
    bool prepend = false, replace = false;
    for (const struct tj_node *e = list ? tj_child(&L->d, list) : NULL; e; e = tj_next(&L->d, e), k++) {
        char where[64];
        snprintf(where, sizeof where, "normalizer.normalizers[%d]", k);
        const char *p = str_of(L, e, "prepend");
        const struct tj_node *pat = tj_get(&L->d, e, "pattern");
        const char *ps = str_of(L, pat, "String"), *content = str_of(L, e, "content");
        if (is_type(L, e, "Prepend") && p && !strcmp(p, SPACE_MARK) && k == 0) prepend = true;
        else if (is_type(L, e, "Replace") && ps && !strcmp(ps, " ") && content && !strcmp(content, SPACE_MARK))
            replace = true;
        else return refuse(L, where, "type \"%s\" with these settings", type_of(L, e));
    }
    if (!prepend || !replace || k != 2)
        return refuse(L, "normalizer", "%s",
                      "a Sequence other than [Prepend \"\xe2\x96\x81\", Replace \" \" -> \"\xe2\x96\x81\"]");
    *spm = true;
    return DT_SUCCESS;
}

static bool bytelevel_ok(struct loader *L, const struct tj_node *n, bool use_regex)
{
    const struct tj_node *r = tj_get(&L->d, n, "use_regex");
    bool regex = !r || r->type == TJ_TRUE;
    return is_type(L, n, "ByteLevel") && !is_true(L, n, "add_prefix_space") && regex == use_regex;
}

static dt_status_t pre_tokenizer(struct loader *L, const struct tj_node *n, bool spm_norm, bool *spm)
{
    struct dt_tokenizer *t = L->t;
    *spm = spm_norm;
    if (!n || n->type == TJ_NULL) {
        if (!spm_norm) return refuse(L, "pre_tokenizer", "%s", "null without the SentencePiece normalizer");
        t->split = SPLIT_NONE;
        return DT_SUCCESS;
    }
    if (spm_norm) return refuse(L, "pre_tokenizer", "type \"%s\" after the SentencePiece normalizer", type_of(L, n));
    if (is_type(L, n, "ByteLevel")) {
        if (!bytelevel_ok(L, n, true))
            return refuse(L, "pre_tokenizer", "%s", "ByteLevel with add_prefix_space true or use_regex false");
        t->split = SPLIT_GPT2;
        return DT_SUCCESS;
    }
    if (is_type(L, n, "Metaspace")) {
        const char *rep = str_of(L, n, "replacement"), *scheme = str_of(L, n, "prepend_scheme");
        if (!rep || strcmp(rep, SPACE_MARK) || (scheme && strcmp(scheme, "first") && strcmp(scheme, "always")) ||
            is_true(L, n, "split") || (!scheme && !is_true(L, n, "add_prefix_space")))
            return refuse(L, "pre_tokenizer", "%s", "Metaspace other than {replacement \"\xe2\x96\x81\", prepend_scheme "
                          "\"first\", split false}");
        t->split = SPLIT_NONE;
        t->metaspace = true;
        *spm = true;
        return DT_SUCCESS;
    }
    if (!is_type(L, n, "Sequence")) return refuse(L, "pre_tokenizer", "type \"%s\"", type_of(L, n));
    const struct tj_node *list = tj_get(&L->d, n, "pretokenizers");
    const struct tj_node *a = list ? tj_child(&L->d, list) : NULL, *b = a ? tj_next(&L->d, a) : NULL;
    if (!a || !b || tj_next(&L->d, b) || !is_type(L, a, "Split") || !bytelevel_ok(L, b, false))
        return refuse(L, "pre_tokenizer", "%s", "a Sequence other than [Split (a known regex), ByteLevel(use_regex false)]");
    const char *re = str_of(L, tj_get(&L->d, a, "pattern"), "Regex"), *beh = str_of(L, a, "behavior");
    bool invert = is_true(L, a, "invert");
    /* Isolated keeps the matches as pieces; Removed with invert keeps them too (GPT-4o's files) */
    if (!beh || !((!strcmp(beh, "Isolated") && !invert) || (!strcmp(beh, "Removed") && invert)))
        return refuse(L, "pre_tokenizer.pretokenizers[0]", "behavior \"%s\" with this invert",
                      beh ? beh : "(none)");
    if (re && !strcmp(re, LLAMA3_PATTERN)) t->split = SPLIT_LLAMA3;
    else if (re && !strcmp(re, GPT2_PATTERN)) t->split = SPLIT_GPT2;
    else return refuse(L, "pre_tokenizer.pretokenizers[0].pattern.Regex", "\"%s\" (dtrun has GPT-2's and Llama 3's)",
                       re ? re : "(not a Regex)");
    return DT_SUCCESS;
}

static dt_status_t decoder(struct loader *L, const struct tj_node *n, bool spm)
{
    if (!n || n->type == TJ_NULL) return DT_SUCCESS; /* decode then joins the tokens' texts */
    if (!spm)
        return is_type(L, n, "ByteLevel") ? DT_SUCCESS
                                          : refuse(L, "decoder", "type \"%s\" for a byte-level model", type_of(L, n));
    if (is_type(L, n, "Metaspace")) return DT_SUCCESS;
    if (!is_type(L, n, "Sequence")) return refuse(L, "decoder", "type \"%s\"", type_of(L, n));
    const struct tj_node *list = tj_get(&L->d, n, "decoders");
    int k = 0;
    for (const struct tj_node *e = list ? tj_child(&L->d, list) : NULL; e; e = tj_next(&L->d, e), k++) {
        const char *ty = type_of(L, e);
        if (strcmp(ty, "Replace") && strcmp(ty, "ByteFallback") && strcmp(ty, "Fuse") && strcmp(ty, "Strip")) {
            char where[64];
            snprintf(where, sizeof where, "decoder.decoders[%d]", k);
            return refuse(L, where, "type \"%s\"", ty);
        }
    }
    return DT_SUCCESS;
}

static dt_status_t model(struct loader *L, const struct tj_node *m)
{
    struct dt_tokenizer *t = L->t;
    if (!m || m->type != TJ_OBJ) return dt_error(DT_ERR_DATA, "%s: error: no \"model\" object", L->file);
    const char *ty = str_of(L, m, "type");
    if (ty && strcmp(ty, "BPE")) return refuse(L, "model.type", "\"%s\" (dtrun reads BPE models)", ty);
    const struct tj_node *dropout = tj_get(&L->d, m, "dropout");
    if (dropout && dropout->type != TJ_NULL && !(dropout->type == TJ_NUM && dropout->num == 0))
        return refuse(L, "model.dropout", "%s", "a dropout (it makes encoding random)");
    const char *pre = str_of(L, m, "continuing_subword_prefix"), *suf = str_of(L, m, "end_of_word_suffix");
    if (pre && *pre) return refuse(L, "model.continuing_subword_prefix", "\"%s\"", pre);
    if (suf && *suf) return refuse(L, "model.end_of_word_suffix", "\"%s\"", suf);
    t->byte_fallback = is_true(L, m, "byte_fallback");
    t->ignore_merges = is_true(L, m, "ignore_merges");
    return DT_SUCCESS;
}

static int32_t first_of(struct dt_tokenizer *t, const char *const *names)
{
    for (; *names; names++) {
        int32_t id = dt_tok_lookup(t, *names, strlen(*names));
        if (id >= 0) return id;
    }
    return -1;
}

/* Whether cutting a SentencePiece text before each `▁` that follows another character leaves the
 * ids unchanged: so when no merge can make a token across such a point, i.e. no merged token holds
 * a `▁` after another character, and no merge involves a byte token (whose text is not its bytes). */
static bool spm_cut_safe(const struct dt_tokenizer *t)
{
    for (uint32_t i = 0; i <= t->mmask; i++) {
        if (t->mres[i] < 0) continue;
        int32_t a = (int32_t)(t->mk[i] >> 32), b = (int32_t)(uint32_t)t->mk[i];
        if (t->byteval[a] >= 0 || t->byteval[b] >= 0) return false;
        const char *s = t->pool + t->off[t->mres[i]];
        size_t n = t->len[t->mres[i]];
        bool after_other = false;
        for (size_t k = 0; k < n;) {
            if (k + 3 <= n && !memcmp(s + k, SPACE_MARK, 3)) {
                if (after_other) return false;
                k += 3;
                after_other = false;
            } else {
                after_other = true;
                k++;
            }
        }
    }
    return true;
}

static dt_status_t finish(struct loader *L, bool byte_level)
{
    struct dt_tokenizer *t = L->t;
    for (int b = 0; b < 256; b++) {
        t->byte_tok[b] = -1;
        if (byte_level) {
            char c = (char)b;
            t->byte_tok[b] = dt_tok_lookup(t, &c, 1);
            if (t->byte_tok[b] < 0)
                return dt_error(DT_ERR_DATA, "%s: error: byte 0x%02x has no token: a byte-level vocabulary needs all "
                                "256\n  hint: the file is damaged or not a byte-level tokenizer", L->file, b);
        } else {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            t->byte_tok[b] = dt_tok_lookup(t, name, 6);
        }
    }
    if (t->spm) t->spm_cut = spm_cut_safe(t);
    for (int c = 0; c < 128; c++) {
        char ch = (char)c;
        t->ascii[c] = dt_tok_lookup(t, &ch, 1);
    }
    static const char *const docs[] = {"<|begin_of_text|>", "<s>", "<|endoftext|>", NULL};
    t->doc = first_of(t, docs);
    return DT_SUCCESS;
}

static dt_status_t load_json(struct loader *L, char *text, size_t n)
{
    struct dt_tokenizer *t = L->t;
    char err[256];
    if (tj_parse(&L->d, text, n, err, sizeof err))
        return dt_error(DT_ERR_DATA, "%s: error: not valid JSON: %s", L->file, err);
    const struct tj_node *root = &L->d.n[0];
    if (root->type != TJ_OBJ) return dt_error(DT_ERR_DATA, "%s: error: not a tokenizer.json (not a JSON object)", L->file);
    const struct tj_node *m = tj_get(&L->d, root, "model");
    bool spm_norm, spm;
    DT_CHECK(model(L, m));
    DT_CHECK(normalizer(L, tj_get(&L->d, root, "normalizer"), &spm_norm));
    DT_CHECK(pre_tokenizer(L, tj_get(&L->d, root, "pre_tokenizer"), spm_norm, &spm));
    DT_CHECK(decoder(L, tj_get(&L->d, root, "decoder"), spm));
    t->spm = spm;
    if (!spm && t->byte_fallback) return refuse(L, "model.byte_fallback", "%s", "true in a byte-level model");
    const struct tj_node *added = tj_get(&L->d, root, "added_tokens");
    if (added && added->type != TJ_ARR) added = NULL;
    DT_CHECK(vocab(L, tj_get(&L->d, m, "vocab"), added, !spm));
    DT_CHECK(merges_json(L, tj_get(&L->d, m, "merges"), !spm));
    const char *unk = str_of(L, m, "unk_token");
    t->unk = unk ? dt_tok_lookup(t, unk, strlen(unk)) : -1;
    return finish(L, !spm);
}

/* GPT-2's original pair: encoder.json {token: id} and vocab.bpe ("#version" then "a b" lines) */
static dt_status_t load_gpt2(struct loader *L, char *enc, size_t nenc, char *bpe, size_t nbpe, const char *bpe_path)
{
    struct dt_tokenizer *t = L->t;
    char err[256];
    if (tj_parse(&L->d, enc, nenc, err, sizeof err))
        return dt_error(DT_ERR_DATA, "%s: error: not valid JSON: %s", L->file, err);
    t->split = SPLIT_GPT2;
    DT_CHECK(vocab(L, &L->d.n[0], NULL, true));
    size_t lines = 0;
    for (size_t i = 0; i < nbpe; i++) lines += bpe[i] == '\n';
    DT_CHECK(merges_alloc(L, lines + 1));
    const char *file = L->file;
    L->file = bpe_path;
    size_t rank = 0, lineno = 0;
    for (char *s = bpe, *end = bpe + nbpe; s < end;) {
        char *nl = memchr(s, '\n', (size_t)(end - s));
        char *e = nl ? nl : end;
        lineno++;
        size_t len = (size_t)(e - s);
        if (len && s[len - 1] == '\r') len--;
        if (len && !(lineno == 1 && !strncmp(s, "#version", 8))) {
            char *sp = memchr(s, ' ', len);
            if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s))) {
                L->file = file;
                return dt_error(DT_ERR_DATA, "%s:%zu: error: not two tokens separated by one space", bpe_path, lineno);
            }
            DT_CHECK(merge_add(L, true, rank++, s, (size_t)(sp - s), sp + 1, len - (size_t)(sp + 1 - s)));
        }
        s = e + 1;
    }
    L->file = file;
    t->unk = -1;
    int32_t eot = dt_tok_lookup(t, "<|endoftext|>", 13);
    if (eot >= 0) t->special[eot] = 1; /* what tokenizer.json's added_tokens says of it */
    return finish(L, true);
}

static bool exists(const char *dir, const char *name, char *out, size_t size)
{
    struct stat st;
    snprintf(out, size, "%s/%s", dir, name);
    return stat(out, &st) == 0 && S_ISREG(st.st_mode);
}

dt_status_t dt_tokenizer_load(const char *path, dt_tokenizer_t *out)
{
    struct dt_tokenizer *t = calloc(1, sizeof *t);
    struct loader L = {.t = t, .file = path};
    char *text = NULL, *bpe = NULL, json[4096], merges[4096] = "";
    size_t n = 0, nbpe = 0;
    dt_status_t rc = DT_SUCCESS;
    if (!t || !(t->path = strdup(path))) {
        free(t);
        return dt_error(DT_ERR_NOMEM, "%s: error: out of memory", path);
    }
    byte_alphabet(&L);
    struct stat st;
    if (stat(path, &st)) {
        rc = dt_error(DT_ERR_DATA, "%s: error: cannot read the tokenizer: %s\n  hint: give a tokenizer.json, the "
                      "directory of a Hugging Face model holding one, or GPT-2's encoder.json", path, strerror(errno));
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        if (!exists(path, "tokenizer.json", json, sizeof json) && !exists(path, "encoder.json", json, sizeof json) &&
            !exists(path, "vocab.json", json, sizeof json)) {
            rc = dt_error(DT_ERR_DATA, "%s: error: this directory holds no tokenizer.json (nor GPT-2's encoder.json or "
                          "vocab.json)\n  hint: give the file itself, or the directory of a Hugging Face model", path);
            goto out;
        }
    } else {
        snprintf(json, sizeof json, "%s", path);
    }
    L.file = json;
    const char *base = strrchr(json, '/');
    base = base ? base + 1 : json;
    if (strcmp(base, "tokenizer.json")) {
        /* encoder.json or vocab.json: GPT-2's original pair when vocab.bpe or merges.txt is beside it */
        char dir[4096];
        snprintf(dir, sizeof dir, "%.*s", base == json ? 1 : (int)(base - json - 1), base == json ? "." : json);
        if (!exists(dir, "vocab.bpe", merges, sizeof merges) && !exists(dir, "merges.txt", merges, sizeof merges))
            merges[0] = 0;
    }
    if ((rc = read_all(json, &text, &n))) goto out;
    if (merges[0]) {
        if ((rc = read_all(merges, &bpe, &nbpe))) goto out;
        rc = load_gpt2(&L, text, n, bpe, nbpe, merges);
    } else {
        rc = load_json(&L, text, n);
    }
out:
    tj_free(&L.d);
    free(text);
    free(bpe);
    if (rc) {
        dt_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return DT_SUCCESS;
}

void dt_tokenizer_free(dt_tokenizer_t t)
{
    if (!t) return;
    free(t->path);
    free(t->pool);
    free(t->off);
    free(t->len);
    free(t->special);
    free(t->byteval);
    free(t->vh);
    free(t->mk);
    free(t->mrank);
    free(t->mres);
    free(t);
}

int dt_tokenizer_vocab_size(dt_tokenizer_t t) { return t->nvocab; }
const char *dt_tokenizer_path(dt_tokenizer_t t) { return t->path; }
int32_t dt_tokenizer_doc_token(dt_tokenizer_t t) { return t->doc; }
int32_t dt_tokenizer_token_id(dt_tokenizer_t t, const char *text) { return dt_tok_lookup(t, text, strlen(text)); }

const char *dt_tokenizer_family(dt_tokenizer_t t)
{
    return t->spm ? "sentencepiece" : t->split == SPLIT_LLAMA3 ? "llama3" : "gpt2";
}
