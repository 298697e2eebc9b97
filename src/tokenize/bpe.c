/*
 * bpe.c - byte-pair merging of one piece, as Hugging Face's BPE model does it: repeatedly merge
 * the adjacent pair with the lowest merge rank, the leftmost on ties. A binary heap over the
 * adjacent pairs and a doubly linked list of symbols make it O(n log n): Hugging Face took 22 s on
 * one 400k-character Llama 2 document with a quadratic loop (tokenizers #1449), and a SentencePiece
 * text with no cut point is one piece. Short pieces (most words) take a plain scan, which is
 * faster there and merges in the same order.
 */
#include <stdlib.h>
#include "tokenize/tok_impl.h"

#define SCAN_MAX 32

static long scan(const struct dt_tokenizer *t, int32_t *sym, size_t n)
{
    uint32_t rank[SCAN_MAX];
    int32_t res[SCAN_MAX];
    for (size_t i = 0; i + 1 < n; i++) rank[i] = dt_tok_merge(t, sym[i], sym[i + 1], &res[i]);
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (rank[i] < rank[best]) best = i;
        if (rank[best] == TOK_NO_MERGE) break;
        sym[best] = res[best];
        for (size_t i = best + 1; i + 1 < n; i++) {
            sym[i] = sym[i + 1];
            rank[i] = rank[i + 1];
            res[i] = res[i + 1];
        }
        n--;
        if (best > 0) rank[best - 1] = dt_tok_merge(t, sym[best - 1], sym[best], &res[best - 1]);
        if (best + 1 < n) rank[best] = dt_tok_merge(t, sym[best], sym[best + 1], &res[best]);
    }
    return (long)n;
}

static inline bool before(const struct bpe_entry *x, const struct bpe_entry *y)
{
    return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}

static void push(struct bpe_scratch *s, size_t *hn, struct bpe_entry e)
{
    size_t i = (*hn)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&e, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = e;
}

static struct bpe_entry pop(struct bpe_scratch *s, size_t *hn)
{
    struct bpe_entry top = s->heap[0], last = s->heap[--*hn];
    size_t i = 0, m = *hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && before(&s->heap[c + 1], &s->heap[c])) c++;
        if (!before(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (m) s->heap[i] = last;
    return top;
}

static void pair(const struct dt_tokenizer *t, struct bpe_scratch *s, size_t *hn, int32_t l, int32_t r)
{
    int32_t res;
    uint32_t rank = dt_tok_merge(t, s->id[l], s->id[r], &res);
    if (rank != TOK_NO_MERGE) push(s, hn, (struct bpe_entry){rank, (uint32_t)l, s->id[l], s->id[r]});
}

long dt_tok_bpe(const struct dt_tokenizer *t, struct bpe_scratch *s, int32_t *sym, size_t n)
{
    if (n < 2) return (long)n;
    if (n <= SCAN_MAX) return scan(t, sym, n);
    if (n > s->cap) {
        size_t cap = n * 2;
        int32_t *id = realloc(s->id, cap * sizeof *id), *prev = id ? realloc(s->prev, cap * sizeof *prev) : NULL;
        if (id) s->id = id;
        if (prev) s->prev = prev;
        int32_t *next = prev ? realloc(s->next, cap * sizeof *next) : NULL;
        if (!next) return -1;
        s->next = next;
        struct bpe_entry *h = realloc(s->heap, 3 * cap * sizeof *h); /* n-1 pairs, then at most 2 per merge */
        if (!h) return -1;
        s->heap = h;
        s->cap = cap;
    }
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        s->id[i] = sym[i];
        s->prev[i] = (int32_t)i - 1;
        s->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++) pair(t, s, &hn, (int32_t)i, (int32_t)i + 1);
    while (hn) {
        struct bpe_entry e = pop(s, &hn);
        int32_t l = (int32_t)e.pos, r = s->next[l];
        /* a stale entry: one of its symbols has been merged since it was pushed */
        if (s->id[l] != e.a || r < 0 || s->id[r] != e.b) continue;
        int32_t res = -1;
        dt_tok_merge(t, e.a, e.b, &res);
        s->id[l] = res;
        s->id[r] = -1;
        s->next[l] = s->next[r];
        if (s->next[r] >= 0) s->prev[s->next[r]] = l;
        if (s->prev[l] >= 0) pair(t, s, &hn, s->prev[l], l);
        if (s->next[l] >= 0) pair(t, s, &hn, l, s->next[l]);
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = s->next[i]) sym[k++] = s->id[i];
    return (long)k;
}

void dt_tok_bpe_free(struct bpe_scratch *s)
{
    free(s->id);
    free(s->prev);
    free(s->next);
    free(s->heap);
}
