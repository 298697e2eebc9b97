/*
 * test_llama_reference.c - the C Llama against PyTorch (tests/reference/make_llama_fixture.py,
 * Hugging Face LlamaForCausalLM's arithmetic written out): at a grouped-query shape with its own LM
 * head and at a multi-query shape with a tied one, the residual stream after every block, the
 * logits and loss, every gradient (max |c - torch| / max |torch| per tensor <= 5e-6; measured 6e-7
 * at most, under AVX2 too), and the losses of 10 AdamW steps with clipping (relative <= 1e-6;
 * measured 1.5e-7); with activation checkpointing too.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt_test.h"
#include "model/llama.h"
#include "optim/optimizer.h"

struct fixture {
    struct dt_llama_config c;
    int B, T, steps;
    float lr, beta1, beta2, eps, wd, clip;
    int32_t *tokens;
    float *params, *hidden, *logits, loss, *grads, *losses;
    size_t n;
};

static void *read_n(FILE *f, size_t size, size_t n)
{
    void *p = malloc(size * n);
    assert_non_null(p);
    assert_int_equal(fread(p, size, n, f), n);
    return p;
}

static struct fixture load(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/reference/%s", getenv("DT_SRCDIR") ? getenv("DT_SRCDIR") : ".", name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    struct fixture x = {0};
    char magic[4];
    int32_t h[11];
    float hp[8];
    assert_int_equal(fread(magic, 1, 4, f), 4);
    assert_memory_equal(magic, "DTLX", 4);
    assert_int_equal(fread(h, 4, 11, f), 11);
    assert_int_equal(h[0], 1);
    assert_int_equal(fread(hp, 4, 8, f), 8);
    x.c = (struct dt_llama_config){.n_layer = h[1], .n_head = h[2], .n_kv_head = h[3], .n_embd = h[4],
                                   .intermediate_size = h[5], .vocab_size = h[6], .max_seq_len = h[7],
                                   .tie_embeddings = h[10] != 0, .rms_eps = hp[0], .rope_theta = hp[1],
                                   .activations = DT_F32};
    x.T = h[7], x.B = h[8], x.steps = h[9];
    x.lr = hp[2], x.beta1 = hp[3], x.beta2 = hp[4], x.eps = hp[5], x.wd = hp[6], x.clip = hp[7];
    x.n = dt_llama_num_params(&x.c);
    size_t BTC = (size_t)x.B * x.T * x.c.n_embd;
    x.tokens = read_n(f, 4, (size_t)x.B * (x.T + 1));
    x.params = read_n(f, 4, x.n);
    x.hidden = read_n(f, 4, (size_t)(x.c.n_layer + 1) * BTC);
    x.logits = read_n(f, 4, (size_t)x.B * x.T * x.c.vocab_size);
    assert_int_equal(fread(&x.loss, 4, 1, f), 1);
    x.grads = read_n(f, 4, x.n);
    x.losses = read_n(f, 4, (size_t)x.steps);
    char extra;
    assert_int_equal(fread(&extra, 1, 1, f), 0); /* the whole file read: the layouts agree */
    fclose(f);
    return x;
}

static void release(struct fixture *x)
{
    free(x->tokens), free(x->params), free(x->hidden), free(x->logits), free(x->grads), free(x->losses);
}

static double max_rel(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num = dt_test_worst(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return den > 0 ? num / den : num;
}

static void check(const char *name, bool checkpointing)
{
    struct fixture x = load(name);
    x.c.activation_checkpointing = checkpointing;
    struct dt_model *m;
    assert_int_equal(dt_llama_create(&x.c, &dt_kernels_cpu, dt_test_kctx(), x.B, x.T, &m), DT_SUCCESS);
    dt_test_own(m, NULL, 0);
    assert_int_equal(m->nparams, x.n);
    size_t BTC = (size_t)x.B * x.T * x.c.n_embd, BTV = (size_t)x.B * x.T * x.c.vocab_size;
    float *buf = malloc((BTC > BTV ? BTC : BTV) * sizeof *buf);
    memcpy(m->params, x.params, x.n * sizeof(float));
    struct dt_batch batch = {.B = x.B, .T = x.T, .tokens = x.tokens};

    float loss = m->iface.forward(m, &batch, 0.0f, NULL);
    for (int l = 0; l <= x.c.n_layer; l++) {
        dt_llama_hidden(m, l, buf);
        double err = max_rel(buf, x.hidden + (size_t)l * BTC, BTC);
        if (err > 1e-5) fail_msg("%s: residual stream entering block %d: max relative error %.3g > 1e-5", name, l, err);
    }
    if (!(fabs(loss - x.loss) / x.loss <= 1e-5)) fail_msg("%s: loss %.7f, PyTorch %.7f", name, loss, x.loss);
    dt_llama_logits(m, buf);
    assert_true(max_rel(buf, x.logits, BTV) <= 1e-5);

    memset(m->grads, 0, x.n * sizeof(float));
    m->iface.forward(m, &batch, 1.0f, NULL);
    m->iface.backward(m);
    double worst = 0;
    for (int i = 0; i < m->nviews; i++) {
        const struct dt_param_view *v = &m->views[i];
        double err = max_rel(m->grads + v->offset, x.grads + v->offset, v->numel);
        if (err > 5e-6) fail_msg("%s: gradient of %s: max relative error %.3g > 5e-6", name, v->name, err);
        worst = fmax(worst, err);
    }

    memcpy(m->params, x.params, x.n * sizeof(float));
    struct dt_optimizer opt;
    struct dt_optim_config oc = {DT_OPT_ADAMW, x.beta1, x.beta2, x.eps, x.wd, 0, false};
    assert_int_equal(dt_optimizer_init(&opt, &oc, &dt_kernels_cpu, dt_test_kctx(), x.n), DT_SUCCESS);
    double worst_loss = 0;
    for (int s = 0; s < x.steps; s++) {
        memset(m->grads, 0, x.n * sizeof(float));
        float l = m->iface.forward(m, &batch, 1.0f, NULL);
        m->iface.backward(m);
        float gscale;
        dt_grad_norm(m, x.clip, &gscale);
        dt_optimizer_step(&opt, m, x.lr, gscale);
        double err = fabs(l - x.losses[s]) / x.losses[s];
        if (!(err <= 1e-6)) fail_msg("%s: step %d: loss %.7f, PyTorch %.7f", name, s, l, x.losses[s]);
        worst_loss = fmax(worst_loss, err);
    }
    print_message("# %s vs PyTorch: worst gradient error %.2e, worst step-loss error %.2e over %d AdamW steps\n", name,
                  worst, worst_loss, x.steps);
    dt_optimizer_free(&opt);
    dt_model_free(m);
    free(buf);
    release(&x);
}

/* grouped-query attention (4 query heads on 2 key/value heads), its own LM head */
static void matches_pytorch_gqa(void **state) { check("llama_fixture.bin", false); }
/* multi-query attention (3 on 1), the LM head tied to the embedding */
static void matches_pytorch_mqa_tied(void **state) { check("llama_fixture_mqa.bin", false); }
/* recomputing block internals in backward gives the same gradients */
static void matches_pytorch_with_checkpointing(void **state)
{
    check("llama_fixture.bin", true);
    check("llama_fixture_mqa.bin", true);
}

static struct dt_llama_config shape_of(int L, int NH, int NKV, int C, int H, int V, int T, bool tie)
{
    return (struct dt_llama_config){.n_layer = L, .n_head = NH, .n_kv_head = NKV, .n_embd = C, .intermediate_size = H,
                                    .vocab_size = V, .max_seq_len = T, .rms_eps = 1e-5f, .rope_theta = 10000,
                                    .tie_embeddings = tie, .activations = DT_F32};
}

/* the presets' parameter counts, as Meta and Hugging Face state them */
static void shapes(void **state)
{
    struct dt_llama_config l8 = shape_of(32, 32, 8, 4096, 14336, 128256, 8192, false);
    assert_int_equal(dt_llama_num_params(&l8), 8030261248); /* Meta-Llama-3-8B: 8,030,261,248 */
    struct dt_llama_config l1 = shape_of(16, 32, 8, 2048, 8192, 128256, 8192, true);
    assert_int_equal(dt_llama_num_params(&l1), 1235814400); /* Llama-3.2-1B: 1,235,814,400 */
    struct dt_llama_config tl = shape_of(22, 32, 4, 2048, 5632, 32000, 2048, false);
    assert_int_equal(dt_llama_num_params(&tl), 1100048384); /* TinyLlama-1.1B: 1,100,048,384 */
}

/* an odd head size cannot be rotated in pairs; kv heads must divide the query heads */
static void refuses_bad_shapes(void **state)
{
    struct dt_llama_config c = shape_of(1, 3, 1, 15, 8, 17, 4, false);
    struct dt_model *m;
    assert_int_equal(dt_llama_create(&c, &dt_kernels_cpu, dt_test_kctx(), 1, 4, &m), DT_ERR_INTERNAL);
    c.n_embd = 12, c.n_kv_head = 2;
    assert_int_equal(dt_llama_create(&c, &dt_kernels_cpu, dt_test_kctx(), 1, 4, &m), DT_ERR_INTERNAL);
    c.n_kv_head = 3;
    assert_int_equal(dt_llama_create(&c, &dt_kernels_cpu, dt_test_kctx(), 1, 4, &m), DT_SUCCESS);
    dt_model_free(m);
}

/* Llama 3.2 1B's scaled rotary frequencies (head size 64, theta 500000, factor 32, low 1, high 4,
 * original 8192) against transformers' _compute_llama3_parameters run in torch: indices 0-14 kept,
 * 15-17 interpolated, 18-31 divided by 32 */
static void rope_scaling_matches_transformers(void **state)
{
    static const float hf[32] = {
        0x1.p+0f, 0x1.53c38cp-1f, 0x1.c2ef78p-2f, 0x1.2b3dc6p-2f, 0x1.8d2760p-3f, 0x1.078d40p-3f,
        0x1.5dc95ap-4f, 0x1.d03ccep-5f, 0x1.341190p-5f, 0x1.98de92p-6f, 0x1.0f5386p-6f, 0x1.681adap-7f,
        0x1.ddee9ep-8f, 0x1.3d2804p-8f, 0x1.a4ee40p-9f, 0x1.524f36p-10f, 0x1.c26c40p-12f, 0x1.9731eep-14f,
        0x1.46831ap-16f, 0x1.b15902p-17f, 0x1.1f91f0p-17f, 0x1.7da9e8p-18f, 0x1.fa8b86p-19f, 0x1.5024d6p-19f,
        0x1.be2188p-20f, 0x1.280d96p-20f, 0x1.88ec20p-21f, 0x1.04be68p-21f, 0x1.5a0f4ep-22f, 0x1.cb4a9ap-23f,
        0x1.30c94ep-23f, 0x1.948360p-24f};
    const struct dt_rope_scaling sc = {32, 1, 4, 8192};
    for (int i = 0; i < 32; i++) {
        float f = dt_rope_freq(i, 64, 500000, &sc);
        if (fabsf(f - hf[i]) > 2e-7f * hf[i]) fail_msg("frequency %d: %a, transformers %a", i, f, hf[i]);
    }
    assert_true(dt_rope_freq(20, 64, 500000, NULL) == hf[20] * 32); /* unscaled: 32 times the divided one */
}

DT_TESTS(T(matches_pytorch_gqa), T(matches_pytorch_mqa_tied), T(matches_pytorch_with_checkpointing), T(shapes),
         T(refuses_bad_shapes),
         T(rope_scaling_matches_transformers))
