/*
 * prepare_tok.c - `dtrun prepare TEXT... --out DIR --tokenizer PATH` (#40): text files (one document
 * each) and JSON Lines files (one document a line, its --text-key field) to llm.c token shards with
 * a Hugging Face tokenizer. Each document is preceded by the tokenizer's document token, put in by
 * id (text that looks like a special token stays text). Threads take chunks of documents; the
 * tokens are written in document order, so the shards are the same on any number of threads.
 *
 * Validation takes whole documents spread evenly: document k (counted over all inputs) goes to
 * validation when round((k+1)F) > round(kF), so F = 0.1 takes every tenth and F = 0 none.
 */
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "core/error.h"
#include "core/log.h"
#include "data/prepare.h"
#include "data/prepare_manifest.h"
#include "data/shard.h"
#include "events/jsonl.h"
#include "tokenize/tjson.h"
#include "tokenize/tokenizer.h"

#define CHUNK_BYTES (1 << 20)  /* documents a thread takes at once */
#define BATCH_BYTES (64 << 20) /* text read before the threads tokenize it */

struct doc {
    const char *p;
    size_t n;
    uint32_t file, line; /* line > 0: a JSON Lines line, parsed by the thread that tokenizes it */
};

struct chunk {
    size_t first, end; /* documents */
    struct dt_tok_ids ids;
    size_t *ends;      /* (end - first) each document's end in ids */
    dt_status_t rc;
    char err[512];
};

/* the work on one input file */
struct work {
    dt_tokenizer_t tok;
    char *const *files;
    const char *key;
    struct doc *docs;
    struct chunk *chunks;
    size_t nchunks;
    atomic_size_t next, done_bytes;
};

/* one output split: train or val */
struct out {
    const char *dir, *prefix;
    int rank; /* -1: one process, names without a rank */
    uint32_t *buf;
    size_t n, cap; /* cap: --shard-tokens */
    int index;
    uint64_t total;
    int vocab;
    struct dt_prepare_manifest *man;
};

static dt_status_t flush(struct out *o)
{
    if (!o->n) return DT_SUCCESS;
    char name[64], path[4200];
    if (o->rank < 0) snprintf(name, sizeof name, "%s_%06d.bin", o->prefix, o->index);
    else snprintf(name, sizeof name, "%s_r%04d_%06d.bin", o->prefix, o->rank, o->index);
    snprintf(path, sizeof path, "%s/%s", o->dir, name);
    DT_CHECK(dt_shard_write(path, o->buf, o->n, o->vocab));
    char **s = realloc(o->man->shards, (size_t)(o->man->nshards + 1) * sizeof *s);
    if (!s || !(s[o->man->nshards] = strdup(name))) {
        if (s) o->man->shards = s;
        return dt_error(DT_ERR_NOMEM, "dtrun prepare: error: out of memory");
    }
    o->man->shards = s;
    o->man->nshards++;
    o->index++;
    o->n = 0;
    return DT_SUCCESS;
}

static dt_status_t append(struct out *o, const uint32_t *t, size_t n)
{
    while (n) {
        /* llm.c's shards are filled to the size and a document continues in the next one */
        size_t k = o->cap - o->n < n ? o->cap - o->n : n;
        memcpy(o->buf + o->n, t, k * sizeof *t);
        o->n += k;
        o->total += k;
        t += k;
        n -= k;
        if (o->n == o->cap) DT_CHECK(flush(o));
    }
    return DT_SUCCESS;
}

/* tokenizes one chunk's documents with the thread's context (NULL: memory ran out) */
/* A JSON Lines document: its --text-key field, decoded, then encoded. */
static dt_status_t encode_json(struct work *w, dt_tok_ctx_t c, const struct doc *d, struct dt_tok_ids *ids)
{
    struct tj_doc j;
    char err[256];
    const char *path = w->files[d->file];
    if (tj_parse(&j, d->p, d->n, err, sizeof err)) {
        const char *why = strchr(err, ':'); /* past tjson's "line 1: ", the line is the file's */
        return dt_error(DT_ERR_DATA, "%s:%u: error: not a JSON object (%s)\n  hint: JSON Lines hold one object a "
                        "line, e.g. {\"%s\": \"the document\"}", path, d->line, why ? why + 2 : err, w->key);
    }
    const struct tj_node *v = tj_get(&j, &j.n[0], w->key);
    dt_status_t rc = !v || v->type != TJ_STR
                         ? dt_error(DT_ERR_DATA, "%s:%u: error: no string field \"%s\"\n  hint: name the documents' "
                                    "field with --text-key", path, d->line, w->key)
                         : dt_tokenizer_encode(c, tj_str(&j, v), v->len, ids);
    tj_free(&j);
    return rc;
}

/* tokenizes one chunk's documents with the thread's context (NULL: memory ran out) */
static void run_chunk(struct work *w, dt_tok_ctx_t c, struct chunk *ch)
{
    size_t bytes = 0;
    for (size_t d = ch->first; d < ch->end && !ch->rc; d++) {
        const struct doc *doc = &w->docs[d];
        if (!c) ch->rc = dt_error(DT_ERR_NOMEM, "dtrun prepare: error: out of memory for a thread's tokenizer");
        else if (doc->line) ch->rc = encode_json(w, c, doc, &ch->ids);
        else ch->rc = dt_tokenizer_encode(c, doc->p, doc->n, &ch->ids);
        if (ch->rc) snprintf(ch->err, sizeof ch->err, "%s", dt_error_msg());
        ch->ends[d - ch->first] = ch->ids.n;
        bytes += doc->n;
    }
    atomic_fetch_add(&w->done_bytes, bytes);
}

static void *worker(void *arg)
{
    struct work *w = arg;
    dt_tok_ctx_t c = dt_tok_ctx_new(w->tok);
    for (size_t i; (i = atomic_fetch_add(&w->next, 1)) < w->nchunks;) run_chunk(w, c, &w->chunks[i]);
    dt_tok_ctx_free(c);
    return NULL;
}

static bool is_jsonl(const char *path)
{
    size_t n = strlen(path);
    return (n > 6 && !strcmp(path + n - 6, ".jsonl")) || (n > 7 && !strcmp(path + n - 7, ".ndjson"));
}

/* A JSON Lines file's documents: its non-blank lines (the threads parse them) that start in
 * [lo, hi) (this rank's share); those before are counted in *before. */
static dt_status_t jsonl_docs(const char *path, uint32_t file, const char *buf, size_t n, size_t lo, size_t hi,
                              struct doc **docs, size_t *ndocs, uint64_t *before)
{
    size_t cap = 1024, nd = 0, line = 0;
    struct doc *d = malloc(cap * sizeof *d);
    if (!d) return dt_error(DT_ERR_NOMEM, "%s: error: out of memory", path);
    for (const char *s = buf, *end = buf + n; s < end && (size_t)(s - buf) < hi;) {
        const char *nl = memchr(s, '\n', (size_t)(end - s)), *e = nl ? nl : end;
        line++;
        const char *q = s;
        while (q < e && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        if (q < e && (size_t)(s - buf) < lo) {
            ++*before;
        } else if (q < e) {
            if (nd == cap) {
                struct doc *nd2 = realloc(d, (cap *= 2) * sizeof *d);
                if (!nd2) {
                    free(d);
                    return dt_error(DT_ERR_NOMEM, "%s: error: out of memory", path);
                }
                d = nd2;
            }
            d[nd++] = (struct doc){s, (size_t)(e - s), file, (uint32_t)line};
        }
        s = e + 1;
    }
    *docs = d;
    *ndocs = nd;
    return DT_SUCCESS;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct progress {
    bool tty;
    double t0, last;
    uint64_t total_bytes, done_bytes, docs, tokens;
};

static void show(struct progress *p, uint64_t bytes, bool final)
{
    double t = now(), el = t - p->t0;
    if (!final && t - p->last < (p->tty ? 0.2 : 10.0)) return;
    p->last = t;
    double rate = el > 0 ? (double)bytes / el / 1e6 : 0;
    double eta = rate > 0 ? ((double)p->total_bytes - (double)bytes) / 1e6 / rate : 0;
    if (final) {
        if (p->tty) fputs("\r\033[K", stderr);
        return;
    }
    fprintf(stderr, "%sprepare: %.1f/%.1f MB, %llu documents, %llu tokens, %.1f MB/s, ETA %.0f s%s",
            p->tty ? "\r\033[K" : "", (double)bytes / 1e6, (double)p->total_bytes / 1e6, (unsigned long long)p->docs,
            (unsigned long long)p->tokens, rate, eta, p->tty ? "" : "\n");
}

/* Documents from one file or several (many small text files are one batch), tokenized by all the
 * threads at once and written in order. */
struct batch {
    struct doc *docs;
    size_t nd, cap, bytes;
    void **mem; /* the files' buffers the documents point into */
    size_t nmem, memcap;
};

static dt_status_t batch_add(struct batch *b, unsigned char *buf, const struct doc *docs, size_t nd)
{
    if (b->nmem + 1 > b->memcap) {
        void **m = realloc(b->mem, (b->memcap = b->memcap * 2 + 16) * sizeof *m);
        if (!m) return free(buf), dt_error(DT_ERR_NOMEM, "dtrun prepare: error: out of memory");
        b->mem = m;
    }
    b->mem[b->nmem++] = buf;
    if (b->nd + nd > b->cap) {
        size_t cap = b->cap * 2 + nd + 64;
        struct doc *d = realloc(b->docs, cap * sizeof *d);
        if (!d) return dt_error(DT_ERR_NOMEM, "dtrun prepare: error: out of memory");
        b->docs = d;
        b->cap = cap;
    }
    for (size_t i = 0; i < nd; i++) b->bytes += docs[i].n;
    memcpy(b->docs + b->nd, docs, nd * sizeof *docs);
    b->nd += nd;
    return DT_SUCCESS;
}

static void batch_free(struct batch *b)
{
    for (size_t i = 0; i < b->nmem; i++) free(b->mem[i]);
    free(b->mem);
    free(b->docs);
    memset(b, 0, sizeof *b);
}

/* what the tokenizing threads and the ordered writer share over the whole prepare */
struct state {
    dt_tokenizer_t tok;
    char *const *files;
    const char *key;
    int nthreads;
    struct progress *pr;
    double F;
    int32_t doc;
    struct out *train, *val;
    uint64_t k, k0; /* documents this rank has written; documents of the ranks before it */
    uint64_t bytes; /* text this rank has tokenized */
};

static dt_status_t tokenize_batch(struct state *S, struct batch *B)
{
    dt_status_t rc = DT_SUCCESS;
    /* chunks of whole documents, up to CHUNK_BYTES, and at least four a thread when the batch is small */
    struct work w = {.tok = S->tok, .files = S->files, .key = S->key, .docs = B->docs};
    size_t chcap = 0, chunk = B->bytes / (4 * (size_t)S->nthreads);
    chunk = chunk > CHUNK_BYTES ? CHUNK_BYTES : chunk < 1024 ? 1024 : chunk;
    for (size_t d = 0; d < B->nd && !rc;) {
        size_t b = 0, first = d;
        while (d < B->nd && (b < chunk || d == first)) b += B->docs[d++].n;
        if (w.nchunks == chcap) {
            struct chunk *c = realloc(w.chunks, (chcap = chcap * 2 + 16) * sizeof *c);
            if (!c) {
                rc = dt_error(DT_ERR_NOMEM, "dtrun prepare: error: out of memory");
                break;
            }
            w.chunks = c;
        }
        w.chunks[w.nchunks] = (struct chunk){.first = first, .end = d};
        if (!(w.chunks[w.nchunks++].ends = malloc((d - first) * sizeof(size_t))))
            rc = dt_error(DT_ERR_NOMEM, "dtrun prepare: error: out of memory");
    }
    if (!rc) {
        pthread_t th[256];
        int started = 0, want = S->nthreads < 256 ? S->nthreads : 256;
        if ((size_t)want > w.nchunks) want = (int)w.nchunks;
        for (int t = 1; t < want; t++)
            if (pthread_create(&th[started], NULL, worker, &w) == 0) started++;
        /* this thread works too, and shows the progress between its chunks */
        dt_tok_ctx_t c = dt_tok_ctx_new(S->tok);
        for (size_t i; (i = atomic_fetch_add(&w.next, 1)) < w.nchunks;) {
            run_chunk(&w, c, &w.chunks[i]);
            S->pr->docs = S->k + w.chunks[i].end;
            show(S->pr, S->bytes + atomic_load(&w.done_bytes), false);
        }
        dt_tok_ctx_free(c);
        for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
        for (size_t i = 0; i < w.nchunks && !rc; i++) {
            struct chunk *ch = &w.chunks[i];
            if (ch->rc) {
                rc = dt_error(ch->rc, "%s", ch->err);
                break;
            }
            size_t at = 0;
            for (size_t d = ch->first; d < ch->end && !rc; d++, S->k++) {
                uint64_t g = S->k0 + S->k; /* the document's index over all inputs, whatever the rank */
                bool to_val = llround((double)(g + 1) * S->F) > llround((double)g * S->F);
                struct out *dst = to_val ? S->val : S->train;
                uint32_t dt = (uint32_t)S->doc;
                size_t e = ch->ends[d - ch->first];
                rc = append(dst, &dt, 1);
                if (!rc) rc = append(dst, ch->ids.v + at, e - at);
                S->pr->tokens += 1 + e - at;
                at = e;
            }
        }
    }
    for (size_t i = 0; i < w.nchunks; i++) {
        dt_tok_ids_free(&w.chunks[i].ids);
        free(w.chunks[i].ends);
    }
    free(w.chunks);
    S->bytes += B->bytes;
    S->pr->docs = S->k;
    for (size_t i = 0; i < B->nmem; i++) free(B->mem[i]);
    B->nmem = B->nd = B->bytes = 0;
    return rc;
}

/* Removes what an earlier prepare wrote into dir (its manifest lists it) and refuses shards it
 * did not write: a run's glob would mix them in. */
static dt_status_t clear_dir(const char *dir)
{
    struct dt_prepare_manifest old;
    bool found;
    char path[4200];
    DT_CHECK(dt_prepare_manifest_read(dir, &old, &found));
    for (int i = 0; found && i < old.nshards; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, old.shards[i]);
        if (unlink(path) && errno != ENOENT) {
            dt_prepare_manifest_free(&old);
            return dt_error(DT_ERR_DATA, "%s: error: cannot remove the shard an earlier prepare wrote: %s", path,
                            strerror(errno));
        }
    }
    dt_prepare_manifest_free(&old);
    for (int k = 0; k < 2; k++) {
        glob_t g;
        snprintf(path, sizeof path, "%s/%s_*.bin", dir, k ? "val" : "train");
        if (glob(path, 0, NULL, &g) == 0 && g.gl_pathc) {
            dt_status_t rc = dt_error(DT_ERR_DATA, "%s: error: shards that dtrun prepare --tokenizer did not write are "
                                      "here (%s)\n  hint: a run's data.train glob would mix them in: choose another "
                                      "--out, or remove them", dir, g.gl_pathv[0]);
            globfree(&g);
            return rc;
        }
        globfree(&g);
    }
    return DT_SUCCESS;
}

/* Ranks: each writes what it did to DIR/.prepare_rNNNN (counts, then its shards' names); after a
 * barrier rank 0 adds them all into its manifest and removes the files. */
static dt_status_t gather_ranks(const struct dt_prepare_opts *o, struct dt_prepare_manifest *m)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/.prepare_r%04d", o->out_dir, o->rank);
    FILE *f = fopen(path, "w");
    if (!f) return dt_error(DT_ERR_DATA, "%s: error: cannot write: %s", path, strerror(errno));
    fprintf(f, "%llu %llu %llu %llu\n", (unsigned long long)m->documents, (unsigned long long)m->train_tokens,
            (unsigned long long)m->val_tokens, (unsigned long long)m->bytes);
    for (int i = 0; i < m->nshards; i++) fprintf(f, "%s\n", m->shards[i]);
    if (fclose(f)) return dt_error(DT_ERR_DATA, "%s: error: cannot write: %s", path, strerror(errno));
    DT_CHECK(o->barrier(o->barrier_arg, "prepare: every rank wrote its shards"));
    if (o->rank != 0) return DT_SUCCESS;
    for (int r = 1; r < o->nranks; r++) {
        snprintf(path, sizeof path, "%s/.prepare_r%04d", o->out_dir, r);
        f = fopen(path, "r");
        unsigned long long d, t, v, b;
        if (!f || fscanf(f, "%llu %llu %llu %llu\n", &d, &t, &v, &b) != 4) {
            if (f) fclose(f);
            return dt_error(DT_ERR_DATA, "%s: error: rank %d's account is missing or damaged\n  hint: --out must be on a "
                            "file system every rank sees (a shared one across nodes)", path, r);
        }
        m->documents += d;
        m->train_tokens += t;
        m->val_tokens += v;
        m->bytes += b;
        char name[256];
        while (fscanf(f, "%255s", name) == 1) {
            char **s = realloc(m->shards, (size_t)(m->nshards + 1) * sizeof *s);
            if (!s || !(s[m->nshards] = strdup(name))) {
                if (s) m->shards = s;
                fclose(f);
                return dt_error(DT_ERR_NOMEM, "dtrun prepare: error: out of memory");
            }
            m->shards = s;
            m->nshards++;
        }
        fclose(f);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/.prepare_r%04d", o->out_dir, 0);
    unlink(path);
    return DT_SUCCESS;
}

dt_status_t dt_prepare_tokenized(const struct dt_prepare_opts *o)
{
    dt_tokenizer_t tok = NULL;
    DT_CHECK(dt_tokenizer_load(o->tokenizer, &tok));
    int vocab = dt_tokenizer_vocab_size(tok);
    int32_t doc = dt_tokenizer_doc_token(tok);
    dt_status_t rc = DT_SUCCESS;
    if (o->doc_token) {
        doc = dt_tokenizer_token_id(tok, o->doc_token);
        if (doc < 0)
            rc = dt_error(DT_ERR_USAGE, "--doc-token: error: \"%s\" is not a token of %s\n  hint: name one of its "
                          "tokens, e.g. <|endoftext|> or <s>", o->doc_token, o->tokenizer);
    } else if (doc < 0) {
        rc = dt_error(DT_ERR_USAGE, "%s: error: this tokenizer has no <|begin_of_text|>, <s> or <|endoftext|> to put "
                      "before each document\n  hint: name the document token with --doc-token TOKEN", o->tokenizer);
    }
    struct dt_prepare_manifest man = {0};
    uint32_t *tbuf = NULL, *vbuf = NULL;
    struct progress pr = {.tty = isatty(STDERR_FILENO), .t0 = now()};
    pr.last = pr.t0;
    for (int i = 0; i < o->nfiles && !rc; i++) {
        struct stat st;
        if (stat(o->files[i], &st))
            rc = dt_error(DT_ERR_DATA, "%s: error: cannot read: %s", o->files[i], strerror(errno));
        else pr.total_bytes += (uint64_t)st.st_size;
    }
    /* ranks: each takes the documents that start in its equal share of the input bytes */
    uint64_t total = pr.total_bytes, lo = total * (uint64_t)o->rank / (uint64_t)o->nranks,
             hi = total * (uint64_t)(o->rank + 1) / (uint64_t)o->nranks;
    pr.total_bytes = hi - lo;
    if (o->rank == o->nranks - 1) hi = UINT64_MAX; /* the last rank takes what starts at the very end (empty files) */
    if (!rc) rc = dt_mkdirs(o->out_dir);
    if (!rc && o->rank == 0) rc = clear_dir(o->out_dir);
    /* the other ranks write nothing until rank 0 has cleared the directory */
    if (!rc && o->nranks > 1) rc = o->barrier(o->barrier_arg, "prepare: rank 0 cleared the output directory");
    size_t cap = o->shard_tokens;
    if (!rc && (!(tbuf = malloc(cap * sizeof *tbuf)) || !(vbuf = malloc(cap * sizeof *vbuf))))
        rc = dt_error(DT_ERR_NOMEM, "dtrun prepare: error: out of memory for shards of %zu tokens\n  hint: a smaller "
                      "--shard-tokens", cap);
    int rank_name = o->nranks > 1 ? o->rank : -1;
    struct out train = {o->out_dir, "train", rank_name, tbuf, 0, cap, 0, 0, vocab, &man};
    struct out val = {o->out_dir, "val", rank_name, vbuf, 0, cap, 0, 0, vocab, &man};
    int nthreads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nthreads < 1) nthreads = 1;
    struct state S = {.tok = tok, .files = o->files, .key = o->text_key, .nthreads = nthreads, .pr = &pr, .F = o->val_fraction, .doc = doc,
                      .train = &train, .val = &val};
    struct batch B = {0};
    uint64_t base = 0;
    for (int f = 0; f < o->nfiles && !rc; f++) {
        unsigned char *buf = NULL;
        size_t n = 0, nd = 0;
        struct doc *docs = NULL;
        uint64_t fbase = base, before = 0;
        struct stat st;
        base += stat(o->files[f], &st) == 0 ? (uint64_t)st.st_size : 0;
        if (fbase >= hi && o->nranks > 1) break; /* the next ranks' share */
        bool jsonl = is_jsonl(o->files[f]);
        if (!jsonl && fbase < lo) {
            S.k0++; /* a text file is one document, an earlier rank's */
            continue;
        }
        if ((rc = dt_prepare_read_file(o->files[f], &buf, &n))) break;
        if (jsonl) {
            size_t rlo = lo > fbase ? (size_t)(lo - fbase) : 0, rhi = hi - fbase < n ? (size_t)(hi - fbase) : n;
            if (o->nranks == 1) rhi = n;
            rc = jsonl_docs(o->files[f], (uint32_t)f, (char *)buf, n, rlo, rhi, &docs, &nd, &before);
            S.k0 += before;
        } else if (!(docs = malloc(sizeof *docs))) {
            rc = dt_error(DT_ERR_NOMEM, "%s: error: out of memory", o->files[f]);
        } else {
            docs[0] = (struct doc){(char *)buf, n, (uint32_t)f, 0};
            nd = 1;
        }
        /* the batch keeps the file's memory until its documents are tokenized and written */
        if (!rc) rc = batch_add(&B, buf, docs, nd);
        else free(buf);
        free(docs);
        if (!rc && B.bytes >= BATCH_BYTES) rc = tokenize_batch(&S, &B);
    }
    if (!rc) rc = tokenize_batch(&S, &B);
    batch_free(&B);
    uint64_t k = S.k, bytes_before = S.bytes;
    if (!rc) rc = flush(&train);
    if (!rc) rc = flush(&val);
    show(&pr, bytes_before, true);
    man.documents = k;
    man.bytes = bytes_before;
    man.train_tokens = train.total;
    man.val_tokens = val.total;
    if (!rc && o->nranks > 1) rc = gather_ranks(o, &man);
    if (!rc && o->rank == 0 && man.train_tokens == 0)
        rc = dt_error(DT_ERR_DATA, "dtrun prepare: error: no document went to training (%llu documents)\n  hint: give "
                      "more documents or a smaller --val-fraction", (unsigned long long)man.documents);
    if (!rc && o->rank == 0) {
        snprintf(man.tokenizer, sizeof man.tokenizer, "%s", dt_tokenizer_path(tok));
        char *abs = realpath(dt_tokenizer_path(tok), NULL);
        if (abs) snprintf(man.tokenizer, sizeof man.tokenizer, "%s", abs);
        free(abs);
        snprintf(man.family, sizeof man.family, "%s", dt_tokenizer_family(tok));
        man.vocab_size = vocab;
        man.doc_token = doc;
        rc = dt_prepare_manifest_write(o->out_dir, &man);
    }
    if (!rc) {
        double el = now() - pr.t0;
        int version = dt_shard_version(vocab);
        char ranks[32] = "";
        if (o->nranks > 1) snprintf(ranks, sizeof ranks, " on each of %d ranks", o->nranks);
        DT_INFO(DT_SUB_TRAIN, "prepare: %llu documents, %.1f MB in %.1f s (%.1f MB/s, %d thread%s%s): %llu training and "
                "%llu validation tokens in %d shards in %s (%s tokenizer, %d ids, document token %d, shard version %d)",
                (unsigned long long)man.documents, (double)man.bytes / 1e6, el, el > 0 ? (double)man.bytes / 1e6 / el : 0,
                nthreads, nthreads > 1 ? "s" : "", ranks, (unsigned long long)man.train_tokens, (unsigned long long)man.val_tokens, man.nshards,
                o->out_dir, dt_tokenizer_family(tok), vocab, doc, version);
        DT_INFO(DT_SUB_TRAIN, "prepare: train with data.train=%s/train_*.bin%s%s%s model.vocab_size=%d (or larger)",
                o->out_dir, man.val_tokens ? " data.val=" : "", man.val_tokens ? o->out_dir : "",
                man.val_tokens ? "/val_*.bin" : "",
                vocab);
    }
    dt_prepare_manifest_free(&man);
    free(tbuf);
    free(vbuf);
    dt_tokenizer_free(tok);
    return rc;
}
