/*
 * attention.c - causal multi-head self-attention, blocked as flash attention
 * is (Dao et al. 2022): per (batch, head) the queries go QB rows at a time over
 * the key blocks up to the diagonal with an online softmax (a running max and
 * sum per row, the output rescaled as the max grows), so the T x T matrix never
 * exists, in memory or in traffic. Forward keeps each row's log-sum-exp, which
 * is all backward needs to recompute a block's probabilities exactly as forward
 * had them. The products are sgemm calls on strided views into qkv, whose rows
 * hold NH query heads, NKV key heads and NKV value heads (kernels.h): forward
 * runs one (b, query head) per OpenMP thread, backward one (b, key/value head,
 * chunk of its group's query heads), which walks its chunk's heads in order so
 * that the key and value gradients they share are summed in one order whatever
 * the threads (heads_per_chunk); oneDNN runs single-threaded inside a parallel
 * region, so the pool is never oversubscribed; a thread's blocks live on its
 * stack and stay in cache.
 */
#include <math.h>
#include <omp.h>
#include <string.h>
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"

/* rows of queries and of keys per block: 64 x 64 fp32 is 16 KiB, two of them sit in L1/L2 */
#define QB 64
#define KB QB /* equal, so a diagonal block's first key is never after its first query */

size_t dt_cpu_attention_saved(int B, int NH, int T) { return (size_t)B * NH * T; }
/* the CPU's scratch comes from its context (dt_cpu_scratch): none on the device side */
size_t dt_cpu_attention_scratch(int B, int T, int C, int NH, int NKV, enum dt_dtype at)
{
    (void)B, (void)T, (void)C, (void)NH, (void)NKV, (void)at;
    return 0;
}

/* P = exp(S - m_row) for the keys row r may see (j0 + c <= i0 + r), 0 beyond: the causal mask */
static inline int visible(int i0, int r, int j0, int nk)
{
    int n = i0 + r - j0 + 1;
    return n < nk ? n : nk;
}

/* The loops over a row's n visible entries run in chunks of LW lanes, the last chunk masked, so
 * that none has a scalar remainder: over exactly n, GCC left each row's last n % 16 to scalar expf
 * calls and the max reduction wholly scalar, half of attention's time at T = 64. A masked lane
 * takes exp(0), never -inf, which libmvec's vector expf would hand to its scalar fallback. */
#define LW 16

/* the larger of mx and the max of row[0, n) */
static inline float masked_max(const float *row, int n, float mx)
{
    float lane[LW];
    for (int l = 0; l < LW; l++) lane[l] = mx;
    for (int c0 = 0; c0 < n; c0 += LW) {
        #pragma omp simd
        for (int l = 0; l < LW; l++) {
            float x = c0 + l < n ? row[c0 + l] : mx;
            lane[l] = x > lane[l] ? x : lane[l];
        }
    }
    for (int l = 0; l < LW; l++) mx = lane[l] > mx ? lane[l] : mx;
    return mx;
}

/* row[c] = exp(row[c] - sub) for c < n, 0 for n <= c < nk; returns their sum, the lanes added in order */
static inline float masked_exp(float *row, int n, int nk, float sub)
{
    float acc[LW] = {0}, sum = 0;
    int c0 = 0;
    for (; c0 < n; c0 += LW) {
        #pragma omp simd
        for (int l = 0; l < LW; l++) {
            bool in = c0 + l < n;
            float e = expf(in ? row[c0 + l] - sub : 0.0f);
            e = in ? e : 0.0f;
            row[c0 + l] = e;
            acc[l] += e;
        }
    }
    for (int c = c0; c < nk; c++) row[c] = 0;
    for (int l = 0; l < LW; l++) sum += acc[l];
    return sum;
}

/* qkv's row width, and where query head h's key and value heads start in a row */
static inline int qkv_width(int C, int NH, int NKV) { return C + 2 * NKV * (C / NH); }
static inline int key_head(int C, int NH, int NKV, int h) { return C + h / (NH / NKV) * (C / NH); }

DT_CLONES static void forward_f32(float *out, float *lse, const float *qkv, int B, int T, int C, int NH, int NKV)
{
    int hs = C / NH, W = qkv_width(C, NH, NKV);
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            float s[QB * KB], m[QB], l[QB];
            const float *q = qkv + (size_t)b * T * W + h * hs;
            const float *k = qkv + (size_t)b * T * W + key_head(C, NH, NKV, h), *v = k + NKV * hs;
            float *o = out + (size_t)b * T * C + h * hs, *lrow = lse + ((size_t)b * NH + h) * T;
            for (int i0 = 0; i0 < T; i0 += QB) {
                int nq = T - i0 < QB ? T - i0 : QB;
                for (int r = 0; r < nq; r++) m[r] = -INFINITY, l[r] = 0;
                for (int j0 = 0; j0 <= i0; j0 += KB) {
                    int nk = T - j0 < KB ? T - j0 : KB;
                    dt_cpu_gemm('N', 'T', nq, nk, hs, scale, q + (size_t)i0 * W, W, k + (size_t)j0 * W,
                                W, 0.0f, s, KB);
                    for (int r = 0; r < nq; r++) {
                        float *row = s + (size_t)r * KB, *orow = o + (size_t)(i0 + r) * C;
                        int n = visible(i0, r, j0, nk);
                        float mx = masked_max(row, n, m[r]);
                        float sum = masked_exp(row, n, nk, mx);
                        /* the sums so far were taken against the old max: rescale them */
                        float corr = j0 ? expf(m[r] - mx) : 0.0f;
                        l[r] = l[r] * corr + sum;
                        m[r] = mx;
                        if (j0) {
                            #pragma omp simd
                            for (int d = 0; d < hs; d++) orow[d] *= corr;
                        }
                    }
                    dt_cpu_gemm('N', 'N', nq, hs, nk, 1.0f, s, KB, v + (size_t)j0 * W, W, j0 ? 1.0f : 0.0f,
                                o + (size_t)i0 * C, C);
                }
                for (int r = 0; r < nq; r++) {
                    float *orow = o + (size_t)(i0 + r) * C, inv = 1.0f / l[r];
                    #pragma omp simd
                    for (int d = 0; d < hs; d++) orow[d] *= inv;
                    lrow[i0 + r] = m[r] + logf(l[r]);
                }
            }
        }
    }
}

/*
 * Per query block i and key block j <= i, with P = exp(S - lse) recomputed:
 *   dV_j += P^T dO_i;  dP = dO_i V_j^T;  dS = P (dP - D_i), D = rowsum(dO O);
 *   dQ_i += scale dS K_j;  dK_j += scale dS^T Q_i.
 */

/* Query heads per chunk of a group: a group's dK and dV sum over its query heads, and one thread
 * summing them all left multi-query attention at batch 1 on one thread (#38). So a group's heads
 * are split into chunks, enough that the (b, key/value head, chunk) items number 16 or more, each
 * chunk's sums taken by one thread and the chunks' added in order. The split depends on the shape
 * alone, never on the threads: the same shape gives the same bits on any machine. */
static inline int heads_per_chunk(int B, int NH, int NKV)
{
    int group = NH / NKV, items = B * NKV, chunks = items >= 16 ? 1 : (16 + items - 1) / items;
    chunks = chunks < group ? chunks : group;
    return (group + chunks - 1) / chunks;
}

/* floats of the chunks' shares of dK and dV past the first, which adds into dqkv itself */
static size_t part_floats(int B, int T, int C, int NH, int NKV)
{
    int per = heads_per_chunk(B, NH, NKV), chunks = (NH / NKV + per - 1) / per;
    return (size_t)B * NKV * (size_t)(chunks - 1) * T * 2 * (C / NH);
}

/* dqkv is added to. A (b, key/value head, chunk of its query heads) is one thread's: its query heads'
 * dQ whole, and its chunk's share of dK and dV, which the first chunk adds into dqkv and the others
 * into part (see heads_per_chunk), added in chunk order afterwards. */
DT_CLONES static void backward_f32(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                                   float *part, int B, int T, int C, int NH, int NKV)
{
    int hs = C / NH, W = qkv_width(C, NH, NKV), group = NH / NKV, per = heads_per_chunk(B, NH, NKV);
    int chunks = (group + per - 1) / per;
    float scale = 1.0f / sqrtf((float)hs);
    size_t share = (size_t)T * 2 * hs; /* a chunk's dK and dV rows, packed: [T][dk hs | dv hs] */
    #pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++) {
        for (int g = 0; g < NKV; g++) {
            for (int c = 0; c < chunks; c++) {
                float p[QB * KB], dp[QB * KB], drow[QB];
                const float *k = qkv + (size_t)b * T * W + C + g * hs, *v = k + NKV * hs;
                float *dk = dqkv + (size_t)b * T * W + C + g * hs, *dv = dk + NKV * hs;
                int ld = W;
                if (c) {
                    dk = part + (((size_t)b * NKV + g) * (chunks - 1) + (c - 1)) * share, dv = dk + hs, ld = 2 * hs;
                    memset(dk, 0, share * sizeof *dk);
                }
                int h1 = g * group + (c + 1) * per < (g + 1) * group ? g * group + (c + 1) * per : (g + 1) * group;
                for (int h = g * group + c * per; h < h1; h++) {
                    const float *q = qkv + (size_t)b * T * W + h * hs;
                    float *dq = dqkv + (size_t)b * T * W + h * hs;
                    const float *o = out + (size_t)b * T * C + h * hs, *dy = dout + (size_t)b * T * C + h * hs;
                    const float *lrow = lse + ((size_t)b * NH + h) * T;
                    for (int i0 = 0; i0 < T; i0 += QB) {
                        int nq = T - i0 < QB ? T - i0 : QB;
                        for (int r = 0; r < nq; r++) {
                            const float *yr = dy + (size_t)(i0 + r) * C, *outr = o + (size_t)(i0 + r) * C;
                            float d = 0;
                            #pragma omp simd reduction(+ : d)
                            for (int e = 0; e < hs; e++) d += yr[e] * outr[e];
                            drow[r] = d;
                        }
                        for (int j0 = 0; j0 <= i0; j0 += KB) {
                            int nk = T - j0 < KB ? T - j0 : KB;
                            dt_cpu_gemm('N', 'T', nq, nk, hs, scale, q + (size_t)i0 * W, W, k + (size_t)j0 * W, W,
                                        0.0f, p, KB);
                            for (int r = 0; r < nq; r++) {
                                float *row = p + (size_t)r * KB, lr = lrow[i0 + r];
                                masked_exp(row, visible(i0, r, j0, nk), nk, lr);
                            }
                            dt_cpu_gemm('T', 'N', nk, hs, nq, 1.0f, p, KB, dy + (size_t)i0 * C, C, 1.0f,
                                        dv + (size_t)j0 * ld, ld);
                            dt_cpu_gemm('N', 'T', nq, nk, hs, 1.0f, dy + (size_t)i0 * C, C, v + (size_t)j0 * W, W,
                                        0.0f, dp, KB);
                            for (int r = 0; r < nq; r++) {
                                float *pr = p + (size_t)r * KB;
                                const float *dr = dp + (size_t)r * KB;
                                float d = drow[r];
                                #pragma omp simd
                                for (int e = 0; e < nk; e++) pr[e] *= dr[e] - d; /* masked entries stay 0 */
                            }
                            dt_cpu_gemm('N', 'N', nq, hs, nk, scale, p, KB, k + (size_t)j0 * W, W, 1.0f,
                                        dq + (size_t)i0 * W, W);
                            dt_cpu_gemm('T', 'N', nk, hs, nq, scale, p, KB, q + (size_t)i0 * W, W, 1.0f,
                                        dk + (size_t)j0 * ld, ld);
                        }
                    }
                }
            }
        }
    }
    if (chunks == 1) return;
    /* the chunks' shares, added in chunk order, a row each */
    #pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++)
        for (int g = 0; g < NKV; g++)
            for (int t = 0; t < T; t++) {
                float *dkv = dqkv + ((size_t)b * T + t) * W + C + g * hs;
                for (int c = 1; c < chunks; c++) {
                    const float *src = part + (((size_t)b * NKV + g) * (chunks - 1) + (c - 1)) * share + (size_t)t * 2 * hs;
                    #pragma omp simd
                    for (int e = 0; e < hs; e++) dkv[e] += src[e];
                    #pragma omp simd
                    for (int e = 0; e < hs; e++) dkv[(size_t)NKV * hs + e] += src[hs + e];
                }
            }
}

/* 16-bit activations are widened into fp32 scratch, attended as fp32 ones are, and the results
 * rounded once: the same sums as the fp32 path on the 16-bit values. */
void dt_cpu_attention_forward(struct dt_kctx *kc, void *out, float *lse, const void *qkv, enum dt_dtype at, int B, int T,
                              int C, int NH, int NKV)
{
    if (at == DT_F32) {
        forward_f32(out, lse, qkv, B, T, C, NH, NKV);
        return;
    }
    size_t n = (size_t)B * T * C, nqkv = (size_t)B * T * qkv_width(C, NH, NKV);
    float *q = dt_cpu_scratch(kc, 1, nqkv * sizeof(float), "attention_forward");
    float *o = dt_cpu_scratch(kc, 2, n * sizeof(float), "attention_forward");
    if (!q || !o) return;
    dt_cpu_convert(kc, q, DT_F32, qkv, at, nqkv);
    forward_f32(o, lse, q, B, T, C, NH, NKV);
    dt_cpu_convert(kc, out, at, o, DT_F32, n);
}

void dt_cpu_attention_backward(struct dt_kctx *kc, void *dqkv, const float *dout, const void *qkv, const void *out,
                               const float *lse, float *scratch, enum dt_dtype at, int B, int T, int C, int NH,
                               int NKV)
{
    (void)scratch;
    size_t n = (size_t)B * T * C, nqkv = (size_t)B * T * qkv_width(C, NH, NKV);
    size_t np = part_floats(B, T, C, NH, NKV);
    float *part = np ? dt_cpu_scratch(kc, 0, np * sizeof(float), "attention_backward") : NULL;
    if (np && !part) return;
    if (at == DT_F32) {
        dt_cpu_zero(kc, dqkv, nqkv * sizeof(float));
        backward_f32(dqkv, dout, qkv, out, lse, part, B, T, C, NH, NKV);
        return;
    }
    float *q = dt_cpu_scratch(kc, 1, nqkv * sizeof(float), "attention_backward");
    float *o = dt_cpu_scratch(kc, 2, n * sizeof(float), "attention_backward");
    float *dq = dt_cpu_scratch(kc, 3, nqkv * sizeof(float), "attention_backward");
    if (!q || !o || !dq) return;
    dt_cpu_convert(kc, q, DT_F32, qkv, at, nqkv);
    dt_cpu_convert(kc, o, DT_F32, out, at, n);
    dt_cpu_zero(kc, dq, nqkv * sizeof(float));
    backward_f32(dq, dout, q, o, lse, part, B, T, C, NH, NKV);
    dt_cpu_convert(kc, dqkv, at, dq, DT_F32, nqkv);
}
