/*
 * test_generate.c - generation (#40): the sampler against closed forms (greedy's choice among equal
 * logits, top-k and top-p as the distributions they leave, draws that follow softmax, the same seed
 * the same tokens), and the key/value-cache path of GPT-2 and of a grouped-query Llama against the
 * whole sequence recomputed by the training forward, in fp32 and bf16, the prompt then one token a
 * step, and the cached attention kernel alone against attention_forward.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "dt_test.h"
#include "kernels/kernels.h"
#include "model/generate.h"
#include "model/gpt.h"
#include "model/llama.h"
#include "model/sampler.h"

static int32_t draw(const float *logits, int V, struct dt_sampler_opts o)
{
    struct dt_sampler s;
    assert_int_equal(dt_sampler_init(&s, &o, V), DT_SUCCESS);
    int32_t t = dt_sampler_next(&s, logits);
    dt_sampler_free(&s);
    return t;
}

static void sampler_greedy(void **state)
{
    (void)state;
    const float l[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, -INFINITY};
    struct dt_sampler_opts greedy = {.temperature = 0, .top_p = 1};
    assert_int_equal(draw(l, 6, greedy), 1); /* the first of the two largest, as torch.argmax */
    /* top-k 1 and a nucleus smaller than the top token's share leave only the largest */
    for (uint64_t seed = 1; seed < 50; seed++) {
        assert_int_equal(draw(l, 6, (struct dt_sampler_opts){.temperature = 1, .top_k = 1, .top_p = 1, .seed = seed}), 1);
        assert_int_equal(draw(l, 6, (struct dt_sampler_opts){.temperature = 1, .top_p = 0.01f, .seed = seed}), 1);
    }
    /* the padded rows past V are never read */
    assert_int_equal(draw(l, 3, greedy), 1);
}

/* frequencies of N draws against the closed form p */
static void frequencies(const float *l, int V, struct dt_sampler_opts o, const double *p)
{
    enum { N = 40000 };
    struct dt_sampler s;
    assert_int_equal(dt_sampler_init(&s, &o, V), DT_SUCCESS);
    int count[8] = {0};
    for (int i = 0; i < N; i++) count[dt_sampler_next(&s, l)]++;
    dt_sampler_free(&s);
    for (int v = 0; v < V; v++) {
        double f = (double)count[v] / N, sd = sqrt(p[v] * (1 - p[v]) / N);
        if (fabs(f - p[v]) > 5 * sd + 1e-9) fail_msg("token %d: frequency %.4f, expected %.4f (5 sd = %.4f)", v, f, p[v], 5 * sd);
    }
}

static void sampler_distributions(void **state)
{
    (void)state;
    const float l[4] = {1.0f, 0.0f, 2.0f, -1.0f};
    double e[4], sum = 0, p[4];
    /* temperature 0.5: softmax(l / 0.5) */
    for (int v = 0; v < 4; v++) sum += e[v] = exp(l[v] / 0.5);
    for (int v = 0; v < 4; v++) p[v] = e[v] / sum;
    frequencies(l, 4, (struct dt_sampler_opts){.temperature = 0.5f, .top_p = 1, .seed = 7}, p);
    /* top-k 2 at temperature 1: tokens 2 and 0 renormalised, the others never */
    double a = exp(2.0), b = exp(1.0);
    const double pk[4] = {b / (a + b), 0, a / (a + b), 0};
    frequencies(l, 4, (struct dt_sampler_opts){.temperature = 1, .top_k = 2, .top_p = 1, .seed = 8}, pk);
    /* top-p 0.85: softmax is .2369 .0871 .6439 .0321; the top two reach .8808, so tokens 2 and 0 again */
    frequencies(l, 4, (struct dt_sampler_opts){.temperature = 1, .top_p = 0.85f, .seed = 9}, pk);
    /* top-p 0.95: the third token joins */
    double c = exp(0.0), t = a + b + c;
    const double pp[4] = {b / t, c / t, a / t, 0};
    frequencies(l, 4, (struct dt_sampler_opts){.temperature = 1, .top_p = 0.95f, .seed = 10}, pp);
}

static void sampler_seeded(void **state)
{
    (void)state;
    float l[300];
    for (int v = 0; v < 300; v++) l[v] = sinf((float)v);
    struct dt_sampler_opts o = {.temperature = 1.2f, .top_k = 50, .top_p = 0.95f, .seed = 1337};
    struct dt_sampler s1, s2, s3;
    assert_int_equal(dt_sampler_init(&s1, &o, 300), DT_SUCCESS);
    assert_int_equal(dt_sampler_init(&s2, &o, 300), DT_SUCCESS);
    o.seed = 1338;
    assert_int_equal(dt_sampler_init(&s3, &o, 300), DT_SUCCESS);
    int differ = 0;
    for (int i = 0; i < 64; i++) {
        int32_t a = dt_sampler_next(&s1, l), b = dt_sampler_next(&s2, l), c = dt_sampler_next(&s3, l);
        assert_int_equal(a, b);
        differ += a != c;
    }
    assert_true(differ > 16); /* another seed, other draws */
    dt_sampler_free(&s1);
    dt_sampler_free(&s2);
    dt_sampler_free(&s3);
}

/* ---- the cache against the whole sequence */

enum { PROMPT = 5, STEPS = 12, TMAX = PROMPT + STEPS };

static dt_status_t create(bool llama, enum dt_dtype at, int T, struct dt_model **m)
{
    struct dt_llama_config lc = {.n_layer = 2, .n_head = 4, .n_kv_head = 2, .n_embd = 64, .intermediate_size = 96,
                                 .vocab_size = 97, .max_seq_len = TMAX, .rms_eps = 1e-5f, .rope_theta = 10000,
                                 .activations = at};
    struct dt_gpt_config gc = {.n_layer = 2, .n_head = 4, .n_embd = 64, .vocab_size = 97, .max_seq_len = TMAX,
                               .activations = at};
    return llama ? dt_llama_create(&lc, &dt_kernels_cpu, dt_test_kctx(), 1, T, m)
                 : dt_gpt_create(&gc, &dt_kernels_cpu, dt_test_kctx(), 1, T, m);
}

/* logits of the last of the n tokens, by the training forward over all of them */
static void recompute(bool llama, enum dt_dtype at, const int32_t *tokens, int n, float *out)
{
    struct dt_model *m;
    assert_int_equal(create(llama, at, n, &m), DT_SUCCESS);
    dt_test_own(m, NULL, 42);
    int32_t *row = calloc((size_t)n + 1, sizeof *row);
    memcpy(row, tokens, (size_t)n * sizeof *row);
    struct dt_batch b = {.B = 1, .T = n, .tokens = row};
    m->iface.forward(m, &b, 0.0f, NULL);
    float *all = malloc((size_t)n * 97 * sizeof *all);
    if (llama) dt_llama_logits(m, all);
    else dt_gpt_logits(m, all);
    memcpy(out, all + (size_t)(n - 1) * 97, 97 * sizeof *out);
    free(all);
    free(row);
    dt_model_free(m);
}

static void cache_vs_recompute(bool llama, enum dt_dtype at, double tol)
{
    struct dt_model *m;
    assert_int_equal(create(llama, at, TMAX, &m), DT_SUCCESS);
    dt_test_own(m, NULL, 42);
    int32_t tokens[TMAX] = {3, 14, 15, 92, 65};
    float got[97], want[97];
    double worst = 0;
    for (int step = 0; step <= STEPS - 1; step++) {
        int n = PROMPT + step;
        if (step == 0) assert_int_equal(m->iface.decode(m, tokens, PROMPT, 0, got), DT_SUCCESS);
        else assert_int_equal(m->iface.decode(m, tokens + n - 1, 1, n - 1, got), DT_SUCCESS);
        recompute(llama, at, tokens, n, want);
        int best = 0;
        for (int v = 0; v < 97; v++) {
            worst = dt_test_worst(worst, fabs((double)got[v] - want[v]) / fmax(1.0, fabs(want[v])));
            if (want[v] > want[best]) best = v;
        }
        tokens[n] = best; /* greedy on the recomputed logits: the cache must follow any sequence */
    }
    if (worst > tol)
        fail_msg("%s %s: cached logits differ from the recomputed ones by %.3g (relative above 1; bound %.3g)",
                 llama ? "llama" : "gpt", dt_dtype_str(at), worst, tol);
    /* past the positions the model holds: an error, not a write past the cache */
    assert_int_not_equal(m->iface.decode(m, tokens, 1, TMAX, got), DT_SUCCESS);
    m->iface.decode_end(m);
    dt_model_free(m);
}

static void cache_llama(void **state)
{
    (void)state;
    /* fp32: the same products, summed in another order (measured 1.3e-7); bf16: the same roundings and
     * (on AVX2 and AVX512_CORE_BF16, both bf16 paths) the same bits, held to one bf16 step (2^-7), which
     * another CPU's sums in another order may take */
    cache_vs_recompute(true, DT_F32, 1e-6);
    cache_vs_recompute(true, DT_BF16, 0x1p-7);
}

static void cache_gpt(void **state)
{
    (void)state;
    cache_vs_recompute(false, DT_F32, 1e-6);
    cache_vs_recompute(false, DT_BF16, 0x1p-7);
}

/* the kernel alone: the caches hold the new rows' keys and values, and out equals attention_forward's
 * rows, for a prompt, single steps and a block of several at once */
static void cached_kernel(void **state)
{
    (void)state;
    enum { B = 2, T = 70, C = 32, NH = 4, NKV = 2, HS = C / NH, W = C + 2 * NKV * HS };
    float *qkv = malloc(sizeof(float) * B * T * W), *ref = malloc(sizeof(float) * B * T * C),
          *lse = malloc(sizeof(float) * B * NH * T), *kc = calloc(B * T * NKV * HS, sizeof(float)),
          *vc = calloc(B * T * NKV * HS, sizeof(float)), *out = malloc(sizeof(float) * B * T * C),
          *part = malloc(sizeof(float) * B * T * W);
    for (int i = 0; i < B * T * W; i++) qkv[i] = sinf(0.37f * (float)i) * 2;
    dt_kernels_cpu.attention_forward(dt_test_kctx(), ref, lse, qkv, DT_F32, B, T, C, NH, NKV);
    const int cuts[] = {0, 9, 10, 11, 40, 70};
    double worst = 0;
    for (int c = 0; c + 1 < 6; c++) {
        int pos = cuts[c], n = cuts[c + 1] - pos;
        for (int b = 0; b < B; b++) memcpy(part + (size_t)b * n * W, qkv + ((size_t)b * T + pos) * W, sizeof(float) * n * W);
        dt_kernels_cpu.attention_cached(dt_test_kctx(), out, part, kc, vc, DT_F32, B, n, pos, T, C, NH, NKV);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n * C; i++)
                worst = dt_test_worst(worst, fabs(out[(size_t)b * n * C + i] - ref[((size_t)b * T + pos) * C + i]));
    }
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NKV * HS; h++) {
                assert_true(kc[((size_t)b * T + t) * NKV * HS + h] == qkv[((size_t)b * T + t) * W + C + h]);
                assert_true(vc[((size_t)b * T + t) * NKV * HS + h] == qkv[((size_t)b * T + t) * W + C + NKV * HS + h]);
            }
    if (worst > 1e-5) fail_msg("cached attention differs from attention_forward by %.3g", worst);
    free(qkv), free(ref), free(lse), free(kc), free(vc), free(out), free(part);
}

DT_TESTS(T(sampler_greedy), T(sampler_distributions), T(sampler_seeded), T(cache_llama), T(cache_gpt),
         T(cached_kernel))
