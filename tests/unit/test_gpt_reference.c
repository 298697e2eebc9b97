/*
 * test_gpt_reference.c - the C GPT against PyTorch (tests/reference/make_gpt_fixture.py):
 * logits and loss, every gradient (max |c - torch| / max |torch| per tensor <= 5e-6; measured 4.4e-7
 * at most, under AVX2 too), and the losses of 10 AdamW steps with clipping (relative <= 1e-6;
 * measured 1.3e-7).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "dt_test.h"
#include "kernels/cpu/cpu.h"
#include "kernels/profile.h"
#include "model/gpt.h"
#include "optim/optimizer.h"

struct fixture {
    int L, NH, C, V, T, B, steps;
    float lr, beta1, beta2, eps, wd, clip;
    int32_t *tokens;
    float *params, *logits, loss, *grads, *losses;
    size_t n;
};

static void *read_n(FILE *f, size_t size, size_t n)
{
    void *p = malloc(size * n);
    assert_non_null(p);
    assert_int_equal(fread(p, size, n, f), n);
    return p;
}

static struct fixture load(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/reference/gpt_fixture.bin", getenv("DT_SRCDIR") ? getenv("DT_SRCDIR") : ".");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    struct fixture x = {0};
    char magic[4];
    int32_t hdr[8];
    float hp[6];
    assert_int_equal(fread(magic, 1, 4, f), 4);
    assert_memory_equal(magic, "DTFX", 4);
    assert_int_equal(fread(hdr, 4, 8, f), 8);
    assert_int_equal(hdr[0], 1);
    x.L = hdr[1], x.NH = hdr[2], x.C = hdr[3], x.V = hdr[4], x.T = hdr[5], x.B = hdr[6], x.steps = hdr[7];
    assert_int_equal(fread(hp, 4, 6, f), 6);
    x.lr = hp[0], x.beta1 = hp[1], x.beta2 = hp[2], x.eps = hp[3], x.wd = hp[4], x.clip = hp[5];
    struct dt_gpt_config c = {x.L, x.NH, x.C, x.V, x.T, false, false, DT_F32, false};
    x.n = dt_gpt_num_params(&c);
    x.tokens = read_n(f, 4, (size_t)x.B * (x.T + 1));
    x.params = read_n(f, 4, x.n);
    x.logits = read_n(f, 4, (size_t)x.B * x.T * x.V);
    assert_int_equal(fread(&x.loss, 4, 1, f), 1);
    x.grads = read_n(f, 4, x.n);
    x.losses = read_n(f, 4, (size_t)x.steps);
    fclose(f);
    return x;
}

static void release(struct fixture *x)
{
    free(x->tokens);
    free(x->params);
    free(x->logits);
    free(x->grads);
    free(x->losses);
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

/* The fixture (llm.c's tensor-major order) in the model's order. */
static float *ours(const struct dt_model *m, const float *llmc)
{
    float *p = malloc(m->nparams * sizeof *p);
    assert_non_null(p);
    dt_gpt_from_llmc(m, llmc, p);
    return p;
}

static void check(bool checkpointing)
{
    struct fixture x = load();
    struct dt_gpt_config c = {x.L, x.NH, x.C, x.V, x.T, checkpointing, false, DT_F32, false};
    struct dt_model *m;
    assert_int_equal(dt_gpt_create(&c, &dt_kernels_cpu, dt_test_kctx(), x.B, x.T, &m), DT_SUCCESS);
    dt_test_own(m, NULL, 0);
    assert_int_equal(m->nparams, x.n);
    float *params = ours(m, x.params), *grads = ours(m, x.grads), *logits = malloc((size_t)x.B * x.T * x.V * 4);
    memcpy(m->params, params, x.n * sizeof(float));
    struct dt_batch batch = {.B = x.B, .T = x.T, .tokens = x.tokens};

    float loss = m->iface.forward(m, &batch, 0.0f, NULL);
    assert_true(fabs(loss - x.loss) / x.loss <= 1e-5);
    dt_gpt_logits(m, logits);
    assert_true(max_rel(logits, x.logits, (size_t)x.B * x.T * x.V) <= 1e-5);

    memset(m->grads, 0, x.n * sizeof(float));
    m->iface.forward(m, &batch, 1.0f, NULL);
    m->iface.backward(m);
    double worst = 0;
    for (int i = 0; i < m->nviews; i++) {
        const struct dt_param_view *v = &m->views[i];
        double err = max_rel(m->grads + v->offset, grads + v->offset, v->numel);
        if (err > 5e-6) fail_msg("gradient of %s: max relative error %.3g > 5e-6", v->name, err);
        worst = fmax(worst, err);
    }
    /* and back: the model's order converts to llm.c's exactly */
    float *back = malloc(x.n * sizeof(float));
    dt_gpt_to_llmc(m, params, back);
    assert_memory_equal(back, x.params, x.n * sizeof(float));
    free(back);

    memcpy(m->params, params, x.n * sizeof(float));
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
        if (!(err <= 1e-6)) fail_msg("step %d: loss %.7f, PyTorch %.7f", s, l, x.losses[s]);
        worst_loss = fmax(worst_loss, err);
    }
    print_message("# vs PyTorch: worst gradient error %.2e, worst step-loss error %.2e over %d AdamW steps\n", worst,
                  worst_loss, x.steps);
    dt_optimizer_free(&opt);
    dt_model_free(m);
    free(params);
    free(grads);
    free(logits);
    release(&x);
}

static void matches_pytorch(void **state) { check(false); }
/* recomputing block internals in backward gives the same gradients */
static void matches_pytorch_with_checkpointing(void **state) { check(true); }

static void checkpointing_saves_memory(void **state)
{
    struct dt_gpt_config c = {4, 4, 128, 256, 128, false, false, DT_F32, false}, ck = c;
    ck.activation_checkpointing = true;
    struct dt_model *a, *b;
    assert_int_equal(dt_gpt_create(&c, &dt_kernels_cpu, dt_test_kctx(), 8, 128, &a), DT_SUCCESS);
    assert_int_equal(dt_gpt_create(&ck, &dt_kernels_cpu, dt_test_kctx(), 8, 128, &b), DT_SUCCESS);
    print_message("# activations: %.1f MiB without checkpointing, %.1f MiB with\n", a->activation_bytes / 1048576.0,
                  b->activation_bytes / 1048576.0);
    assert_true(b->activation_bytes * 2 < a->activation_bytes);
    dt_model_free(a);
    dt_model_free(b);
}

/* The fixture's weights written as llm.c writes them (vocab padded to 64, 16 positions) load to the same loss. */
static void loads_llmc_weights(void **state)
{
    struct fixture x = load();
    int Vp = 64, maxT = 16, C = x.C;
    FILE *f = fopen("model.bin", "wb");
    assert_non_null(f);
    int32_t h[256] = {20240326, 3, maxT, x.V, x.L, x.NH, C, Vp};
    fwrite(h, sizeof h, 1, f);
    const float *p = x.params;
    fwrite(p, sizeof(float), (size_t)x.V * C, f);
    float zeros[64 * 15] = {0};
    fwrite(zeros, sizeof(float), (size_t)(Vp - x.V) * C, f);
    p += (size_t)x.V * C;
    fwrite(p, sizeof(float), (size_t)x.T * C, f);
    fwrite(zeros, sizeof(float), (size_t)(maxT - x.T) * C, f);
    p += (size_t)x.T * C;
    fwrite(p, sizeof(float), x.n - (size_t)(p - x.params), f);
    fclose(f);
    struct dt_gpt_config c = {x.L, x.NH, x.C, x.V, x.T, false, false, DT_F32, false};
    struct dt_model *m;
    assert_int_equal(dt_gpt_create(&c, &dt_kernels_cpu, dt_test_kctx(), x.B, x.T, &m), DT_SUCCESS);
    struct dt_param_source src;
    assert_int_equal(dt_gpt_llmc_source(m, "model.bin", &src), DT_SUCCESS);
    dt_test_own(m, &src, 0);
    float *params = ours(m, x.params);
    assert_memory_equal(m->params, params, x.n * sizeof(float));
    free(params);
    struct dt_batch batch = {.B = x.B, .T = x.T, .tokens = x.tokens};
    assert_true(fabs(m->iface.forward(m, &batch, 0.0f, NULL) - x.loss) / x.loss <= 1e-5);
    dt_model_free(m);
    c.n_layer = 3;
    assert_int_equal(dt_gpt_create(&c, &dt_kernels_cpu, dt_test_kctx(), x.B, x.T, &m), DT_SUCCESS);
    assert_int_equal(dt_gpt_llmc_source(m, "model.bin", &src), DT_ERR_CONFIG);
    assert_string_equal(dt_error_msg(), "model.bin: error: the file holds max_seq_len 16, vocab_size 61, n_layer 2, "
                                        "n_head 3, n_embd 15; the config asks for 7, 61, 3, 3, 15\n"
                                        "  hint: set model.* to the file's shape");
    dt_model_free(m);
    release(&x);
}

/* calls of the op named `name` in a profiled context */
static int64_t calls_of(struct dt_kctx *kc, const char *name)
{
    const struct dt_kprofile *p = dt_kprofile_of(kc);
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->name[i], name)) return p->calls_total[i];
    fail_msg("no op %s", name);
    return -1;
}

/* GELU in the MLP's matmuls (kernels.h's gelu_fused; on trial on the GPU as DTRUN_CUDA_TRY=gelu): the
 * model's fused path, taken here through the CPU's composed ops, gives the bits of the ops apart, in
 * bf16 and fp16, with activation checkpointing (the forward recomputed in backward) and without; it
 * is taken in each layer's forward and backward, not at all under fp32 compute, nor where the config
 * leaves fuse_gelu off (fp8-mixed's) though the kernels offer it; and the arena then holds no fp32
 * dinp between the two matmuls */
static void gelu_in_the_matmul(void **state)
{
    (void)state;
    static const enum dt_dtype types[] = {DT_BF16, DT_F16, DT_F32};
    const struct dt_kernels *k = &dt_kernels_cpu;
    struct dt_kctx *kc;
    assert_int_equal(dt_cpu_ctx_create(0, &kc), DT_SUCCESS);
    dt_cpu_gelu_fuse(kc, true);
    assert_int_equal(dt_kprofile_wrap(&k, &kc), DT_SUCCESS);
    int B = 2, T = 24, L = 2;
    int32_t tokens[2 * 25];
    for (int i = 0; i < B * (T + 1); i++) tokens[i] = (i * 37 + 11) % 97;
    struct dt_batch batch = {.B = B, .T = T, .tokens = tokens};
    int64_t forwards = 0, backwards = 0;
    for (int ti = 0; ti < 3; ti++)
        for (int ck = 0; ck < 2; ck++) {
            struct dt_gpt_config c = {L, 4, 64, 97, T, ck, false, types[ti], true};
            struct dt_model *apart, *fused;
            assert_int_equal(dt_gpt_create(&c, &dt_kernels_cpu, dt_test_kctx(), B, T, &apart), DT_SUCCESS);
            assert_int_equal(dt_gpt_create(&c, k, kc, B, T, &fused), DT_SUCCESS);
            dt_test_own(apart, NULL, 7);
            dt_test_own(fused, NULL, 7);
            memset(apart->grads, 0, apart->nparams * sizeof(float));
            memset(fused->grads, 0, fused->nparams * sizeof(float));
            float la = apart->iface.forward(apart, &batch, 1.0f, NULL);
            apart->iface.backward(apart);
            float lf = fused->iface.forward(fused, &batch, 1.0f, NULL);
            fused->iface.backward(fused);
            assert_true(la == lf && isfinite(la));
            assert_memory_equal(apart->grads, fused->grads, apart->nparams * sizeof(float));
            dt_model_free(apart);
            dt_model_free(fused);
            /* forward: each layer once, again in backward when checkpointing; backward: each layer once */
            int64_t f = calls_of(kc, "matmul_gelu_forward_lp"), b = calls_of(kc, "matmul_dgelu_backward_lp");
            assert_int_equal(f - forwards, types[ti] == DT_F32 ? 0 : L * (ck ? 2 : 1));
            assert_int_equal(b - backwards, types[ti] == DT_F32 ? 0 : L);
            forwards = f, backwards = b;
            /* the fp32 dinp between the matmuls (B T 4C floats) carved only where the ops run apart */
            struct dt_gpt_config off = c;
            off.fuse_gelu = false;
            size_t natt = k->attention_saved(B, 4, T), ns = k->attention_scratch(B, T, 64, 4, 4, types[ti]);
            size_t saved = dt_gpt_arena_bytes(&off, B, T, natt, ns) - dt_gpt_arena_bytes(&c, B, T, natt, ns);
            assert_int_equal(saved, types[ti] == DT_F32 ? 0 : (size_t)B * T * 4 * 64 * sizeof(float));
        }
    /* fuse_gelu off: the ops apart, though the kernels would fuse them */
    struct dt_gpt_config c = {L, 4, 64, 97, T, false, false, DT_BF16, false};
    struct dt_model *m;
    assert_int_equal(dt_gpt_create(&c, k, kc, B, T, &m), DT_SUCCESS);
    dt_test_own(m, NULL, 7);
    m->iface.forward(m, &batch, 1.0f, NULL);
    m->iface.backward(m);
    dt_model_free(m);
    assert_int_equal(calls_of(kc, "matmul_gelu_forward_lp"), forwards);
    assert_int_equal(calls_of(kc, "matmul_dgelu_backward_lp"), backwards);
    k->ctx_destroy(kc);
}

DT_TESTS(T(matches_pytorch), T(matches_pytorch_with_checkpointing), T(checkpointing_saves_memory),
         T(loads_llmc_weights), T(gelu_in_the_matmul))
