/*
 * test_params.c - a model's initial parameters range by range (model.h's sources, #39): every range
 * drawn alone, in any cut, gives the bits of the whole draw, and the whole draw is the one dtrun made
 * before ranks drew their own slices (written out here as it was: GPT-2's llm.c-order tensors each a
 * stream of their own, a Llama's views each a stream, an MLP's views each a uniform stream); an
 * llm.c model file and a Hugging Face directory read in pieces give what one read gives, and read
 * only the bytes of the pieces asked for.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/hf.h"
#include "core/half.h"
#include "core/rng.h"
#include "dt_test.h"
#include "model/gpt.h"
#include "model/llama.h"
#include "model/mlp.h"

/* [0, n) cut at k points from the stream `cut` (k + 1 ranges, some empty), each filled alone */
static float *in_pieces(struct dt_param_source *s, size_t n, int k, uint64_t cut)
{
    float *out = malloc(n * sizeof *out);
    size_t at[16] = {0};
    struct dt_rng r = dt_rng_make(99, cut);
    for (int i = 1; i <= k; i++) at[i] = dt_rng_below(&r, (uint32_t)n);
    at[k + 1] = n;
    for (int i = 1; i <= k + 1; i++) /* sorted, insertion */
        for (int j = i; j > 1 && at[j - 1] > at[j]; j--) {
            size_t t = at[j];
            at[j] = at[j - 1], at[j - 1] = t;
        }
    for (int i = 0; i <= k; i++)
        if (at[i + 1] > at[i]) assert_int_equal(s->fill(s->ctx, at[i], at[i + 1] - at[i], out + at[i]), DT_SUCCESS);
    return out;
}

/* the whole draw, and every cut of it into 1 to 8 ranges, bitwise */
static void cuts_agree(struct dt_param_source *s, size_t n, const float *whole)
{
    for (int k = 0; k < 8; k++) {
        float *got = in_pieces(s, n, k, (uint64_t)k);
        assert_memory_equal(got, whole, n * sizeof *got);
        free(got);
    }
}

static float *whole_draw(struct dt_param_source *s, size_t n)
{
    float *w = malloc(n * sizeof *w);
    assert_int_equal(s->fill(s->ctx, 0, n, w), DT_SUCCESS);
    return w;
}

/* GPT-2's init as dt_gpt_init drew it: llm.c's tensors in llm.c's order, tensor i from stream i,
 * then reordered into the model's layer-major layout */
static void gpt_init(void **state)
{
    struct dt_gpt_config c = {.n_layer = 3, .n_head = 2, .n_embd = 16, .vocab_size = 37, .max_seq_len = 8,
                              .activations = DT_F32};
    struct dt_model *m;
    assert_int_equal(dt_gpt_create(&c, &dt_kernels_cpu, dt_test_kctx(), 1, 8, &m), DT_SUCCESS);
    size_t n = m->nparams, C = 16, L = 3;
    /* llm.c's tensors: wte, wpe, 12 block tensors for all layers, lnfw, lnfb */
    size_t bsz[12] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
    float *llmc = malloc(n * sizeof *llmc), *ref = malloc(n * sizeof *ref);
    size_t off = 0;
    for (int i = 0; i < 16; i++) {
        size_t len = i == 0 ? 37 * C : i == 1 ? 8 * C : i < 14 ? bsz[i - 2] * L : C;
        int b = i - 2;
        bool norm = (i >= 2 && i < 14 && (b == 0 || b == 6)) || i == 14;
        bool bias = (i >= 2 && i < 14 && (b == 1 || b == 3 || b == 5 || b == 7 || b == 9 || b == 11)) || i == 15;
        float std = i >= 2 && i < 14 && (b == 4 || b == 10) ? 0.02f / sqrtf(6.0f) : 0.02f;
        struct dt_rng r = dt_rng_make(1234, (uint64_t)i);
        for (size_t j = 0; j < len; j++) llmc[off + j] = norm ? 1.0f : bias ? 0.0f : std * dt_rng_normal(&r);
        off += len;
    }
    assert_int_equal(off, n);
    dt_gpt_from_llmc(m, llmc, ref);
    struct dt_param_source s;
    dt_model_init_source(m, 1234, &s);
    float *whole = whole_draw(&s, n);
    assert_memory_equal(whole, ref, n * sizeof *ref);
    cuts_agree(&s, n, whole);
    dt_source_close(&s);
    free(llmc), free(ref), free(whole);
    dt_model_free(m);
}

/* a Llama's and an MLP's: view i from stream i (the MLP's 0x3100 + i), as dt_llama_init and
 * dt_mlp_init drew them */
static void llama_and_mlp_init(void **state)
{
    struct dt_llama_config lc = {.n_layer = 2, .n_head = 4, .n_kv_head = 2, .n_embd = 16, .intermediate_size = 24,
                                 .vocab_size = 37, .max_seq_len = 8, .rms_eps = 1e-5f, .rope_theta = 10000,
                                 .activations = DT_F32};
    struct dt_mlp_config mc = {.in = 5, .out = 3, .nhidden = 2, .hidden = {7, 6}, .activations = DT_F32};
    for (int family = 0; family < 2; family++) {
        struct dt_model *m;
        if (family == 0) assert_int_equal(dt_llama_create(&lc, &dt_kernels_cpu, dt_test_kctx(), 1, 8, &m), DT_SUCCESS);
        else assert_int_equal(dt_mlp_create(&mc, &dt_kernels_cpu, dt_test_kctx(), 2, &m), DT_SUCCESS);
        float *ref = malloc(m->nparams * sizeof *ref);
        static const int width[] = {5, 7, 6};
        for (int i = 0; i < m->nviews; i++) {
            const struct dt_param_view *v = &m->views[i];
            struct dt_rng r = dt_rng_make(7, family == 0 ? (uint64_t)i : 0x3100ull + (uint64_t)i);
            float bound = 1.0f / sqrtf((float)width[i / 2 < 3 ? i / 2 : 0]);
            for (size_t j = 0; j < v->numel; j++)
                ref[v->offset + j] = family == 1 ? bound * (2.0f * dt_rng_uniform(&r) - 1.0f)
                                   : v->ndim == 1 ? 1.0f
                                                  : 0.02f * dt_rng_normal(&r);
        }
        struct dt_param_source s;
        dt_model_init_source(m, 7, &s);
        float *whole = whole_draw(&s, m->nparams);
        assert_memory_equal(whole, ref, m->nparams * sizeof *ref);
        cuts_agree(&s, m->nparams, whole);
        dt_source_close(&s);
        free(ref), free(whole);
        dt_model_free(m);
    }
}

/* a Hugging Face directory and an llm.c file read in pieces: the values of one read, and the bytes of
 * the pieces only */
static void files_in_pieces(void **state)
{
    struct dt_llama_config lc = {.n_layer = 2, .n_head = 4, .n_kv_head = 2, .n_embd = 16, .intermediate_size = 24,
                                 .vocab_size = 37, .max_seq_len = 8, .rms_eps = 1e-5f, .rope_theta = 10000,
                                 .activations = DT_F32};
    struct dt_model *m;
    assert_int_equal(dt_llama_create(&lc, &dt_kernels_cpu, dt_test_kctx(), 1, 8, &m), DT_SUCCESS);
    dt_test_own(m, NULL, 5);
    assert_int_equal(dt_hf_save_llama(m, m->params, "hf", DT_BF16, 4096), DT_SUCCESS); /* shards, bf16 */
    struct dt_param_source s;
    assert_int_equal(dt_hf_llama_source(m, "hf", &s), DT_SUCCESS);
    float *whole = whole_draw(&s, m->nparams);
    assert_int_equal(s.bytes_read, m->nparams * 2);
    for (size_t i = 0; i < m->nparams; i++) /* the bf16 file holds the values rounded */
        assert_true(whole[i] == dt_f32_from_bf16(dt_bf16_from_f32(m->params[i])));
    cuts_agree(&s, m->nparams, whole);
    uint64_t before = s.bytes_read;
    float part[100];
    assert_int_equal(s.fill(s.ctx, 1000, 100, part), DT_SUCCESS);
    assert_int_equal(s.bytes_read - before, 200); /* 100 bf16 values, nothing else */
    dt_source_close(&s);
    free(whole);
    dt_model_free(m);

    struct dt_gpt_config gc = {.n_layer = 2, .n_head = 2, .n_embd = 8, .vocab_size = 16, .max_seq_len = 8,
                               .activations = DT_F32};
    assert_int_equal(dt_gpt_create(&gc, &dt_kernels_cpu, dt_test_kctx(), 1, 8, &m), DT_SUCCESS);
    dt_test_own(m, NULL, 3);
    /* llm.c's file: wte padded to 20 rows, 12 positions; the model reads the first 16 and 8 */
    size_t n = m->nparams, C = 8;
    float *llmc = malloc(n * sizeof *llmc);
    dt_gpt_to_llmc(m, m->params, llmc);
    FILE *f = fopen("gpt.bin", "wb");
    int32_t h[256] = {20240326, 3, 12, 16, 2, 2, 8, 20};
    fwrite(h, sizeof h, 1, f);
    float pad[64] = {0};
    fwrite(llmc, sizeof(float), 16 * C, f);
    fwrite(pad, sizeof(float), 4 * C, f);
    fwrite(llmc + 16 * C, sizeof(float), 8 * C, f);
    fwrite(pad, sizeof(float), 4 * C, f);
    fwrite(llmc + 24 * C, sizeof(float), n - 24 * C, f);
    fclose(f);
    assert_int_equal(dt_gpt_llmc_source(m, "gpt.bin", &s), DT_SUCCESS);
    whole = whole_draw(&s, n);
    assert_memory_equal(whole, m->params, n * sizeof *whole);
    assert_int_equal(s.bytes_read, n * 4);
    cuts_agree(&s, n, whole);
    dt_source_close(&s);
    free(whole), free(llmc);
    dt_model_free(m);
}

DT_TESTS(T(gpt_init), T(llama_and_mlp_init), T(files_in_pieces))
