/*
 * tok_tool.c - the tokenizer from the command line, for tests/cli/test_tokenize.sh and
 * bench/tokenize.sh. A corpus file holds documents as records "LENGTH\nBYTES\n" (bytes, so it can
 * carry invalid UTF-8); tests/cli/tok_ref.mjs reads the same records for Hugging Face.
 *   tok_tool ids TOKENIZER CORPUS         one line of ids per document
 *   tok_tool roundtrip TOKENIZER CORPUS   decode(encode(x)) == x for every document (x repaired as
 *                                         UTF-8; for SentencePiece a literal `▁` reads back as a space)
 *   tok_tool bench TOKENIZER CORPUS [THREADS]   MB/s encoding the corpus THREADS ways
 *   tok_tool stream TOKENIZER CORPUS      the streaming decoder gives decode's text
 *   tok_tool check TOKENIZER CORPUS       ids, roundtrip and stream at once (one load of the file)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/error.h"
#include "tokenize/tokenizer.h"
#include "tokenize/unicode.h"

struct doc {
    const char *p;
    size_t n;
};

static struct doc *read_corpus(const char *path, size_t *ndocs, char **data)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    if (!b || fread(b, 1, (size_t)sz, f) != (size_t)sz) exit(2);
    fclose(f);
    size_t cap = 1024, n = 0;
    struct doc *d = malloc(cap * sizeof *d);
    for (char *s = b, *end = b + sz; s < end;) {
        char *e;
        unsigned long len = strtoul(s, &e, 10);
        if (*e != '\n' || e + 1 + len > end) {
            fprintf(stderr, "%s: malformed record at byte %ld\n", path, (long)(s - b));
            exit(2);
        }
        if (n == cap) d = realloc(d, (cap *= 2) * sizeof *d);
        d[n++] = (struct doc){e + 1, len};
        s = e + 1 + len + 1;
    }
    *ndocs = n;
    *data = b;
    return d;
}

static bool all_mode(const char *m) { return !strcmp(m, "check"); }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct job {
    dt_tokenizer_t t;
    struct doc *d;
    size_t first, end, tokens;
};

static void *bench_thread(void *arg)
{
    struct job *j = arg;
    dt_tok_ctx_t c = dt_tok_ctx_new(j->t);
    struct dt_tok_ids ids = {0};
    for (size_t i = j->first; i < j->end; i++) {
        ids.n = 0;
        if (dt_tokenizer_encode(c, j->d[i].p, j->d[i].n, &ids)) exit(1);
        j->tokens += ids.n;
    }
    dt_tok_ids_free(&ids);
    dt_tok_ctx_free(c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: tok_tool ids|check|roundtrip|bench|stream TOKENIZER CORPUS [THREADS]\n");
        return 2;
    }
    dt_tokenizer_t t;
    if (dt_tokenizer_load(argv[2], &t)) {
        fprintf(stderr, "%s\n", dt_error_msg());
        return 1;
    }
    size_t nd;
    char *data;
    struct doc *d = read_corpus(argv[3], &nd, &data);
    dt_tok_ctx_t c = dt_tok_ctx_new(t);
    struct dt_tok_ids ids = {0};
    int bad = 0;
    if (!strcmp(argv[1], "bench")) {
        int nt = argc > 4 ? atoi(argv[4]) : 1;
        size_t bytes = 0;
        for (size_t i = 0; i < nd; i++) bytes += d[i].n;
        struct job jobs[256];
        pthread_t th[256];
        if (nt < 1 || nt > 256) return 2;
        double t0 = now();
        /* documents split by bytes, so each thread gets about the same work */
        size_t per = bytes / (size_t)nt + 1, i = 0;
        for (int k = 0; k < nt; k++) {
            size_t b = 0, first = i;
            while (i < nd && (b < per || k == nt - 1)) b += d[i++].n;
            jobs[k] = (struct job){t, d, first, i, 0};
            pthread_create(&th[k], NULL, bench_thread, &jobs[k]);
        }
        size_t tokens = 0;
        for (int k = 0; k < nt; k++) {
            pthread_join(th[k], NULL);
            tokens += jobs[k].tokens;
        }
        double s = now() - t0;
        printf("%s threads=%d bytes=%zu tokens=%zu seconds=%.3f MB/s=%.2f\n", dt_tokenizer_family(t), nt, bytes, tokens,
               s, bytes / s / 1e6);
        return 0;
    }
    for (size_t i = 0; i < nd; i++) {
        ids.n = 0;
        if (dt_tokenizer_encode(c, d[i].p, d[i].n, &ids)) {
            fprintf(stderr, "%s\n", dt_error_msg());
            return 1;
        }
        bool all = !strcmp(argv[1], "check");
        if (all || !strcmp(argv[1], "ids")) {
            for (size_t k = 0; k < ids.n; k++) printf(k ? " %u" : "%u", ids.v[k]);
            putchar('\n');
            if (!all) continue;
        }
        size_t len;
        char *text = dt_tokenizer_decode(t, ids.v, ids.n, true, &len);
        unsigned char *want = malloc(3 * d[i].n + 1);
        size_t wn = dt_utf8_repair((const unsigned char *)d[i].p, d[i].n, want);
        if (!strcmp(dt_tokenizer_family(t), "sentencepiece")) {
            /* a literal `▁` is SentencePiece's space: it reads back as one */
            size_t o = 0;
            for (size_t k = 0; k < wn;) {
                if (k + 3 <= wn && !memcmp(want + k, "\xe2\x96\x81", 3)) {
                    want[o++] = ' ';
                    k += 3;
                } else {
                    want[o++] = want[k++];
                }
            }
            wn = o;
        }
        if (all || !strcmp(argv[1], "stream")) {
            struct dt_tok_stream st;
            dt_tok_stream_init(&st, t, true);
            char *out = malloc(len + 64), buf[4096];
            size_t o = 0;
            for (size_t k = 0; k < ids.n; k++) {
                int r = dt_tok_stream_feed(&st, ids.v[k], buf, sizeof buf);
                if (r < 0 || o + (size_t)r > len + 60) break;
                memcpy(out + o, buf, (size_t)r);
                o += (size_t)r;
            }
            int r = dt_tok_stream_finish(&st, buf, sizeof buf);
            if (r > 0 && o + (size_t)r <= len + 60) memcpy(out + o, buf, (size_t)r), o += (size_t)r;
            if (o != len || memcmp(out, text, len)) {
                if (bad++ < 5) fprintf(stderr, "document %zu: the stream's text differs from decode's\n", i);
            }
            free(out);
        }
        if (strcmp(argv[1], "stream") && (len != wn || memcmp(text, want, len))) {
            if (bad++ < 5) {
                size_t k = 0;
                while (k < len && k < wn && text[k] == (char)want[k]) k++;
                fprintf(stderr, "document %zu: decode(encode(x)) != x from byte %zu (lengths %zu, %zu)\n", i, k, len, wn);
            }
        }
        free(want);
        free(text);
    }
    if (strcmp(argv[1], "ids")) fprintf(all_mode(argv[1]) ? stderr : stdout, "%s: %zu documents, %d differ\n", argv[1], nd, bad);
    dt_tok_ids_free(&ids);
    dt_tok_ctx_free(c);
    dt_tokenizer_free(t);
    free(d);
    free(data);
    return bad ? 1 : 0;
}
