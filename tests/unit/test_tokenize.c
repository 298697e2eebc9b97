/*
 * test_tokenize.c - the tokenizer's parts on files written here (#40): BPE merging against a plain
 * quadratic loop (the lowest rank, the leftmost on ties) on random words long enough for the heap,
 * with the merges in both of tokenizer.json's layouts; what a file may not ask for, refused by
 * name; the stream never handing out half a character; invalid UTF-8 read as U+FFFD. The real
 * files against Hugging Face: tests/cli/test_tokenize.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/rng.h"
#include "dt_test.h"
#include "tokenize/tokenizer.h"

#define NMERGES 300

struct merges {
    char tok[256 + NMERGES][64]; /* ids 0..255: bytes; then each merge's result */
    int a[NMERGES], b[NMERGES], n, ntok;
};

static int tok_find(const struct merges *m, const char *s)
{
    for (int i = 0; i < m->ntok; i++)
        if (!strcmp(m->tok[i], s)) return i;
    return -1;
}

/* random merges over the letters a, b, c: each joins two tokens made of them */
static void make_merges(struct merges *m, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    for (int i = 1; i < 256; i++) m->tok[i][0] = (char)i; /* the words use 'a'..'c' alone */
    m->ntok = 256;
    int letters[64] = {'a', 'b', 'c'}, nl = 3;
    uint64_t s = seed;
    while (m->n < NMERGES) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int a = letters[(s >> 33) % (uint64_t)nl], b = letters[(s >> 45) % (uint64_t)nl];
        char joined[128];
        snprintf(joined, sizeof joined, "%s%s", m->tok[a], m->tok[b]);
        if (strlen(joined) > 40 || tok_find(m, joined) >= 0) continue;
        snprintf(m->tok[m->ntok], sizeof m->tok[0], "%s", joined);
        m->a[m->n] = a;
        m->b[m->n] = b;
        if (nl < 64) letters[nl++] = m->ntok;
        else letters[(s >> 20) % 64] = m->ntok;
        m->ntok++;
        m->n++;
    }
}

/* GPT-2's ByteLevel alphabet for byte b, as UTF-8 (JSON-escaped where needed) */
static const char *byte_char(int b, char *buf)
{
    int n = 0, c = b;
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (!printable) {
        for (int x = 0; x < b; x++)
            if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) n++;
        c = 0x100 + n;
    }
    if (c == '"' || c == '\\') sprintf(buf, "\\%c", c);
    else if (c < 0x80) sprintf(buf, "%c", c);
    else sprintf(buf, "\\u%04x", c);
    return buf;
}

static void write_tokenizer(const char *path, const struct merges *m, bool pairs)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
               "\"use_regex\": true}, \"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {");
    char buf[16];
    for (int i = 0; i < 256; i++) fprintf(f, "%s\"%s\": %d", i ? ", " : "", byte_char(i, buf), i);
    for (int i = 256; i < m->ntok; i++) fprintf(f, ", \"%s\": %d", m->tok[i], i);
    fprintf(f, "}, \"merges\": [");
    for (int i = 0; i < m->n; i++) {
        if (pairs) fprintf(f, "%s[\"%s\", \"%s\"]", i ? ", " : "", m->tok[m->a[i]], m->tok[m->b[i]]);
        else fprintf(f, "%s\"%s %s\"", i ? ", " : "", m->tok[m->a[i]], m->tok[m->b[i]]);
    }
    fprintf(f, "]}, \"added_tokens\": [{\"id\": %d, \"content\": \"<|endoftext|>\", \"special\": true}]}", m->ntok);
    fclose(f);
}

/* the reference: merge the lowest-ranked adjacent pair, the leftmost on ties, until none is left */
static int quadratic(const struct merges *m, const char *word, int *ids)
{
    int n = (int)strlen(word);
    for (int i = 0; i < n; i++) ids[i] = (unsigned char)word[i];
    for (;;) {
        int best = -1, rank = NMERGES;
        for (int i = 0; i + 1 < n; i++)
            for (int r = 0; r < rank; r++)
                if (m->a[r] == ids[i] && m->b[r] == ids[i + 1]) {
                    best = i;
                    rank = r;
                    break;
                }
        if (best < 0) return n;
        ids[best] = 256 + rank;
        memmove(ids + best + 1, ids + best + 2, (size_t)(n - best - 2) * sizeof *ids);
        n--;
    }
}

static void bpe_matches_quadratic(void **state)
{
    (void)state;
    struct merges *m = malloc(sizeof *m);
    assert_non_null(m);
    make_merges(m, 40);
    write_tokenizer("strings.json", m, false);
    write_tokenizer("pairs.json", m, true);
    dt_tokenizer_t t[2];
    assert_int_equal(dt_tokenizer_load("strings.json", &t[0]), DT_SUCCESS);
    assert_int_equal(dt_tokenizer_load("pairs.json", &t[1]), DT_SUCCESS);
    assert_int_equal(dt_tokenizer_vocab_size(t[0]), m->ntok + 1);
    assert_int_equal(dt_tokenizer_doc_token(t[0]), m->ntok);
    uint64_t s = 7;
    for (int k = 0; k < 400; k++) {
        char word[300];
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int len = 1 + (int)((s >> 33) % 250); /* past the plain scan's 16 symbols, into the heap */
        for (int i = 0; i < len; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            word[i] = "abc"[(s >> 40) % 3];
        }
        word[len] = 0;
        int want[300];
        int nw = quadratic(m, word, want);
        for (int v = 0; v < 2; v++) {
            dt_tok_ctx_t c = dt_tok_ctx_new(t[v]);
            struct dt_tok_ids ids = {0};
            assert_int_equal(dt_tokenizer_encode(c, word, (size_t)len, &ids), DT_SUCCESS);
            assert_int_equal(ids.n, nw);
            for (int i = 0; i < nw; i++) assert_int_equal(ids.v[i], want[i]);
            size_t dl;
            char *back = dt_tokenizer_decode(t[v], ids.v, ids.n, true, &dl);
            assert_string_equal(back, word);
            free(back);
            dt_tok_ids_free(&ids);
            dt_tok_ctx_free(c);
        }
    }
    dt_tokenizer_free(t[0]);
    dt_tokenizer_free(t[1]);
    free(m);
}

static void refused_by_name(void **state)
{
    (void)state;
    static const struct {
        const char *json, *msg;
    } cases[] = {
        {"{\"pre_tokenizer\": {\"type\": \"Whitespace\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}",
         "t.json: error: pre_tokenizer: type \"Whitespace\" is not supported"},
        {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", "t.json: error: model.type: \"WordPiece\" (dtrun reads BPE models) is not supported"},
        {"{\"normalizer\": {\"type\": \"NFC\"}, \"model\": {\"type\": \"BPE\"}}", "t.json: error: normalizer: type \"NFC\" is not supported"},
        {"{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "
         "\"\\\\w+\"}, \"behavior\": \"Isolated\"}, {\"type\": \"ByteLevel\", \"use_regex\": false}]}, \"model\": {\"type\": \"BPE\"}}",
         "t.json: error: pre_tokenizer.pretokenizers[0].pattern.Regex: \"\\w+\" (dtrun has GPT-2's and Llama 3's) is not supported"},
        {"{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, "
         "\"merges\": [\"a b\"]}}", "t.json: error: merges[0] (\"a\" + \"b\"): the merged token is not in model.vocab"},
        {"{\"model\": ", "t.json: error: not valid JSON: line 1: unexpected end of file"},
        {"{\"a\": \"\\ud800x\"}", "t.json: error: not valid JSON: line 1: a \\u escape of a high surrogate not followed by a low one"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dt_test_write("t.json", cases[i].json);
        dt_tokenizer_t t = NULL;
        assert_int_not_equal(dt_tokenizer_load("t.json", &t), DT_SUCCESS);
        if (strncmp(dt_error_msg(), cases[i].msg, strlen(cases[i].msg))) fail_msg("%s\nexpected: %s", dt_error_msg(), cases[i].msg);
    }
}

/* a tokenizer of single bytes only, so every byte of a character is its own token */
static dt_tokenizer_t bytes_only(void)
{
    struct merges *m = calloc(1, sizeof *m);
    assert_non_null(m);
    m->ntok = 256;
    write_tokenizer("bytes.json", m, false);
    free(m);
    dt_tokenizer_t t;
    assert_int_equal(dt_tokenizer_load("bytes.json", &t), DT_SUCCESS);
    return t;
}

static void stream_whole_characters(void **state)
{
    (void)state;
    dt_tokenizer_t t = bytes_only();
    const char *text = "a\xc3\xa9\xf0\x9f\x99\x82z";
    static const char *const after[] = {"a", "", "\xc3\xa9", "", "", "", "\xf0\x9f\x99\x82", "z"};
    struct dt_tok_stream s;
    dt_tok_stream_init(&s, t, true);
    char buf[128];
    for (size_t i = 0; i < strlen(text); i++) {
        int n = dt_tok_stream_feed(&s, (unsigned char)text[i], buf, sizeof buf);
        assert_true(n >= 0);
        buf[n] = 0;
        assert_string_equal(buf, after[i]);
    }
    /* an unfinished character at the end, and bytes that never make one */
    int n = dt_tok_stream_feed(&s, 0xE2, buf, sizeof buf);
    assert_int_equal(n, 0);
    n = dt_tok_stream_feed(&s, 'x', buf, sizeof buf);
    buf[n] = 0;
    assert_string_equal(buf, "\xef\xbf\xbdx");
    n = dt_tok_stream_feed(&s, 0xF0, buf, sizeof buf);
    assert_int_equal(n, 0);
    n = dt_tok_stream_finish(&s, buf, sizeof buf);
    buf[n] = 0;
    assert_string_equal(buf, "\xef\xbf\xbd");
    /* the end-of-text token is special: left out */
    dt_tok_stream_init(&s, t, true);
    assert_int_equal(dt_tok_stream_feed(&s, 256, buf, sizeof buf), 0);
    dt_tokenizer_free(t);
}

static void invalid_utf8_as_replacement(void **state)
{
    (void)state;
    dt_tokenizer_t t = bytes_only();
    dt_tok_ctx_t c = dt_tok_ctx_new(t);
    struct dt_tok_ids ids = {0};
    /* WHATWG: one U+FFFD per maximal subpart (\xe2\x96 is one, \xff another) */
    const char in[] = "a\xe2\x96 \xff";
    assert_int_equal(dt_tokenizer_encode(c, in, sizeof in - 1, &ids), DT_SUCCESS);
    size_t n;
    char *back = dt_tokenizer_decode(t, ids.v, ids.n, false, &n);
    assert_string_equal(back, "a\xef\xbf\xbd \xef\xbf\xbd");
    free(back);
    dt_tok_ids_free(&ids);
    dt_tok_ctx_free(c);
    dt_tokenizer_free(t);
}

DT_TESTS(T(bpe_matches_quadratic), T(refused_by_name), T(stream_whole_characters), T(invalid_utf8_as_replacement))
