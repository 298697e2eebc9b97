/*
 * attention.cu - causal multi-head self-attention on the GPU, the CPU kernel's semantics
 * (kernels/cpu/attention.c): qkv (B,T,3C) holds q|k|v, head h is columns [h*hs, (h+1)*hs) of each,
 * hs = C/NH, scores scaled by 1/sqrt(hs), out (B,T,C); backward WRITES dqkv (B,T,3C). qkv, out and
 * dqkv are of the activation type (fp32, bf16 or fp16; the fused kernels are templates on it, S):
 * widened to fp32 as they are loaded, everything computed in fp32, each result rounded once as it
 * is stored, which is what the CPU computes on the same 16-bit values. dout and lse are fp32.
 * Two implementations:
 *
 * Fused (flash attention, fp32 arithmetic), for training: the forward never writes the (T,T) scores to global
 * memory. Per (b, h) and block of query rows, key/value tiles of KT = 32 rows pass through shared
 * memory and an online softmax keeps each row's running max m and sum l, rescaling the output
 * accumulated so far when m grows. It saves only lse = m + log l per query row (B,NH,T), from which
 * backward rebuilds each probability, p = exp(s - lse). Backward is three kernels, none with an
 * atomic, so every run gives the same bits:
 *   drow   Drow(t) = dout(t) . out(t) per (b,h,t), into the caller's scratch (B,NH,T)
 *          (= sum_u P(t,u) dP(t,u), the CPU's "dot")
 *   dkv    a block owns a block of keys and walks the query tiles that can see them (queries
 *          >= the first key): dV += P^T dO, dK += scale dS^T Q with dS = P (dO V^T - Drow)
 *   dq     a block owns a block of queries and walks the key tiles they see: dQ += scale dS K
 * Each element of dqkv is written by exactly one thread (q columns by dq, k and v columns by dkv),
 * which stores its sum, formed in a fixed order (every column of a head, so dqkv needs no zeroing).
 *
 * Thread mapping, shared by the three tiled kernels: 4 warps of 32 lanes. A block's own rows
 * (queries in forward and dq, keys in dkv) are R per warp, kept in registers spread over the lanes
 * (lane holds columns lane, lane + 32, ...; the head is zero-padded to D = 32, 64 or 128 columns).
 * The rows the block walks over come 32 at a time into shared memory, one per lane: a lane computes
 * the dot products of its tile row with the warp's R own rows, the own row's elements broadcast by
 * __shfl_sync, and the softmax statistics of a row reduce over the warp with xor shuffles (a fixed
 * tree whose result is the same bits on every lane). The products back into the own rows (P V,
 * dS K, ...) take the tile's rows in order, lane j's factor broadcast to all. Tiles are stored
 * [32][D + 1]: the padding word puts row j's column d in bank (j + d) mod 32, so lanes reading 32
 * rows at one column, or one row at 32 columns, hit 32 different banks.
 *
 * Shared memory, static (under the 48 KiB that needs no opt-in): two tiles of 32 x (D + 1) floats,
 * 33024 bytes at D = 128 (16640 at 64, 8448 at 32), and 256 more for dkv's per-query lse and Drow.
 * R is 8, or 4 at D = 128, so that the own rows' arrays (R x D/32 floats each: q and o in forward,
 * q, dout and dq in dq, k, v, dk and dv in dkv) fit in registers: ptxas gives 64 to 147 per
 * thread for sm_80, no spills.
 *
 * Reference (fp32 only: the textbook algorithm, cuBLAS strided-batched gemms in fp32 over the heads
 * of one batch row at a time, and a warp per softmax row): forward writes att (B,NH,T,T), the causal
 * softmax with the masked entries 0, and backward works from it and writes dqkv. The GPU tests hold
 * the fused kernels against it and against the CPU, and its att against a softmax of their own.
 *
 * Tensor cores (attention_tc.cu): bf16 and fp16 activations of head size 64 or 128, with buffers
 * 16-byte aligned (dt_cuda_attention_tc_takes), go to the tensor-core twins of the fused kernels
 * (forward, dkv, dq; backward after the same drow kernel). Every other call (fp32, other head
 * sizes) runs the kernels here.
 *
 * Every launcher returns cudaSuccess or the launch's error (the reference: or DT_CUDA_CUBLAS_ERR +
 * cuBLAS's status). Launches go on the default stream, per thread in this build.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <type_traits>
#include "kernels/cuda/attention_tc.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/plan.h"

#define KT DT_ATTN_KT
#define WARPS DT_ATTN_WARPS
#define FULL 0xffffffffu

static_assert(DT_ATTN_SMEM(128, true) <= 48 * 1024, "static shared memory over 48 KiB");

__device__ static inline float warp_max(float x)
{
    for (int o = 16; o; o >>= 1) x = fmaxf(x, __shfl_xor_sync(FULL, x, o));
    return x;
}

__device__ static inline float warp_sum(float x)
{
    for (int o = 16; o; o >>= 1) x += __shfl_xor_sync(FULL, x, o);
    return x;
}

/* rows [t0, t0 + KT) of one head's (T, hs) slice at base (row stride ld, elements of type E: the
 * activation type, or fp32 for dout) into tile, widened; zeros past T and past hs. Called by the
 * whole block; consecutive threads read consecutive columns, scalar loads (a head's slice of a 16-bit
 * row starts at any even byte). */
template <int D, typename E>
__device__ static void load_tile(float (*tile)[D + 1], const E *base, size_t ld, int t0, int T, int hs)
{
    for (int i = threadIdx.x; i < KT * D; i += blockDim.x) {
        int r = i / D, d = i % D, t = t0 + r;
        tile[r][d] = t < T && d < hs ? dt_ld(base[(size_t)t * ld + d]) : 0.0f;
    }
}

/* the warp's R rows from t0 into registers, widened, lane holding columns lane + 32c; zeros past T
 * and hs */
template <int D, typename E>
__device__ static void load_rows(float (&x)[dt_attn_rows_per_warp(D)][D / 32], const E *base, size_t ld, int t0, int T,
                                 int hs)
{
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < dt_attn_rows_per_warp(D); i++)
#pragma unroll
        for (int c = 0; c < D / 32; c++) {
            int t = t0 + i, d = c * 32 + lane;
            x[i][c] = t < T && d < hs ? dt_ld(base[(size_t)t * ld + d]) : 0.0f;
        }
}

/* base[t*ld + d] = scale * x, rounded to S, for the warp's rows below T and columns below hs */
template <int D, typename S>
__device__ static void store_rows(S *base, size_t ld, const float (&x)[dt_attn_rows_per_warp(D)][D / 32], float scale,
                                  int t0, int T, int hs)
{
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < dt_attn_rows_per_warp(D); i++)
#pragma unroll
        for (int c = 0; c < D / 32; c++) {
            int t = t0 + i, d = c * 32 + lane;
            if (t < T && d < hs) dt_st(&base[(size_t)t * ld + d], scale * x[i][c]);
        }
}

/* s[i] = own row i . tile row `lane`, summed over d in order (the own row broadcast from its lanes) */
template <int D>
__device__ static void dots(float (&s)[dt_attn_rows_per_warp(D)], const float (&own)[dt_attn_rows_per_warp(D)][D / 32],
                            const float (*tile)[D + 1])
{
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < dt_attn_rows_per_warp(D); i++) s[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < D / 32; c++)
#pragma unroll 8
        for (int l = 0; l < 32; l++) {
            float t = tile[lane][c * 32 + l];
#pragma unroll
            for (int i = 0; i < dt_attn_rows_per_warp(D); i++) s[i] = fmaf(__shfl_sync(FULL, own[i][c], l), t, s[i]);
        }
}

/* acc[i] += sum over tile rows j in order of f[i] (lane j's) * tile row j */
template <int D>
__device__ static void gather(float (&acc)[dt_attn_rows_per_warp(D)][D / 32], const float (&f)[dt_attn_rows_per_warp(D)],
                              const float (*tile)[D + 1])
{
    int lane = threadIdx.x % 32;
#pragma unroll 4
    for (int j = 0; j < KT; j++)
#pragma unroll
        for (int c = 0; c < D / 32; c++) {
            float t = tile[j][c * 32 + lane];
#pragma unroll
            for (int i = 0; i < dt_attn_rows_per_warp(D); i++) acc[i][c] = fmaf(__shfl_sync(FULL, f[i], j), t, acc[i][c]);
        }
}

/* What every tiled kernel's block works out first: its (b, h), the head's slices, its block of
 * own rows. Blocks run heaviest first: the forward's and dq's last query blocks see the most keys,
 * dkv's first key blocks are seen by the most queries. */
template <typename S>
struct head {
    int b, h, bh, blk;
    const S *q, *k, *v; /* (T, hs) slices of qkv, row stride 3C */
};

template <typename S>
__device__ static inline head<S> head_of(const S *qkv, int BH, int NH, int T, int C, int nblk, bool last_first)
{
    head<S> o;
    dt_attn_block(blockIdx.x, BH, nblk, last_first, &o.bh, &o.blk);
    o.b = o.bh / NH;
    o.h = o.bh % NH;
    o.q = qkv + (size_t)o.b * T * 3 * C + (size_t)o.h * (C / NH);
    o.k = o.q + C;
    o.v = o.q + 2 * C;
    return o;
}

// ---------------------------------------------------------------- fused forward

template <int D, typename S>
__global__ static void __launch_bounds__(WARPS * 32)
    attention_forward_kernel(S *out, float *lse, const S *qkv, int BH, int NH, int T, int C, float scale)
{
    constexpr int R = dt_attn_rows_per_warp(D), NC = D / 32, ROWS = WARPS * R;
    __shared__ float ks[KT][D + 1], vs[KT][D + 1];
    int hs = C / NH, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    head<S> hd = head_of(qkv, BH, NH, T, C, dt_attn_blocks_per_head(T, D), true);
    int q0 = hd.blk * ROWS, r0 = q0 + warp * R, last = min(q0 + ROWS, T) - 1;
    float q[R][NC], o[R][NC], m[R], l[R];
    load_rows<D>(q, hd.q, 3 * (size_t)C, r0, T, hs);
#pragma unroll
    for (int i = 0; i < R; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++) o[i][c] = 0.0f;
    }
    for (int k0 = 0; k0 <= last; k0 += KT) {
        __syncthreads(); /* every warp is done with the previous tile */
        load_tile<D>(ks, hd.k, 3 * (size_t)C, k0, T, hs);
        load_tile<D>(vs, hd.v, 3 * (size_t)C, k0, T, hs);
        __syncthreads();
        float s[R], p[R];
        dots<D>(s, q, ks);
        int key = k0 + lane;
#pragma unroll
        for (int i = 0; i < R; i++) {
            /* key <= row also masks keys past T for every row that is stored */
            float x = key <= r0 + i ? s[i] * scale : -INFINITY;
            float mn = fmaxf(m[i], warp_max(x));
            float base = mn == -INFINITY ? 0.0f : mn; /* a row that has seen no key yet stays at 0 */
            float alpha = expf(m[i] - base);
            p[i] = expf(x - base);
            l[i] = l[i] * alpha + warp_sum(p[i]);
            m[i] = mn;
#pragma unroll
            for (int c = 0; c < NC; c++) o[i][c] *= alpha;
        }
        gather<D>(o, p, vs);
    }
    S *y = out + (size_t)hd.b * T * C + (size_t)hd.h * hs;
#pragma unroll
    for (int i = 0; i < R; i++) {
        int t = r0 + i;
        if (t >= T) continue;
#pragma unroll
        for (int c = 0; c < NC; c++)
            if (c * 32 + lane < hs) dt_st(&y[(size_t)t * C + c * 32 + lane], o[i][c] / l[i]);
        if (lane == 0) lse[(size_t)hd.bh * T + t] = m[i] + logf(l[i]);
    }
}

// ---------------------------------------------------------------- fused backward

/* Drow (B,NH,T) = rowsum(dout . out), out widened, one warp per (b, h, t), lanes over the head's
 * columns */
template <typename S>
__global__ static void attention_drow_kernel(float *drow, const float *dout, const S *out, int NH, int T, int C,
                                             size_t rows)
{
    int hs = C / NH, lane = threadIdx.x % 32;
    size_t warps = (size_t)gridDim.x * blockDim.x / 32;
    for (size_t w = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; w < rows; w += warps) {
        size_t bh = w / T, t = w % T, b = bh / NH, h = bh % NH;
        size_t at = (b * T + t) * C + h * hs;
        float s = 0.0f;
        for (int d = lane; d < hs; d += 32) s = fmaf(dout[at + d], dt_ld(out[at + d]), s);
        s = warp_sum(s);
        if (lane == 0) drow[w] = s;
    }
}

/* dK, dV of a block of keys, over the query tiles at and after its first key */
template <int D, typename S>
__global__ static void __launch_bounds__(WARPS * 32)
    attention_dkv_kernel(S *dqkv, const float *dout, const S *qkv, const float *lse, const float *drow, int BH, int NH,
                         int T, int C, float scale)
{
    constexpr int R = dt_attn_rows_per_warp(D), NC = D / 32, ROWS = WARPS * R;
    __shared__ float qs[KT][D + 1], gs[KT][D + 1]; /* 32 queries' q and dout */
    __shared__ float lse_s[KT], drow_s[KT];
    int hs = C / NH, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    head<S> hd = head_of(qkv, BH, NH, T, C, dt_attn_blocks_per_head(T, D), false);
    int k0 = hd.blk * ROWS, j0 = k0 + warp * R;
    const float *dy = dout + (size_t)hd.b * T * C + (size_t)hd.h * hs;
    float k[R][NC], v[R][NC], dk[R][NC], dv[R][NC];
    load_rows<D>(k, hd.k, 3 * (size_t)C, j0, T, hs);
    load_rows<D>(v, hd.v, 3 * (size_t)C, j0, T, hs);
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int c = 0; c < NC; c++) dk[i][c] = dv[i][c] = 0.0f;
    for (int t0 = k0 / KT * KT; t0 < T; t0 += KT) {
        __syncthreads();
        load_tile<D>(qs, hd.q, 3 * (size_t)C, t0, T, hs);
        load_tile<D>(gs, dy, C, t0, T, hs);
        if (threadIdx.x < KT) {
            int t = t0 + threadIdx.x;
            lse_s[threadIdx.x] = t < T ? lse[(size_t)hd.bh * T + t] : 0.0f;
            drow_s[threadIdx.x] = t < T ? drow[(size_t)hd.bh * T + t] : 0.0f;
        }
        __syncthreads();
        float s[R], dp[R], p[R], ds[R];
        dots<D>(s, k, qs);  /* s[i] = q(t0 + lane) . k(j0 + i) */
        dots<D>(dp, v, gs); /* dp[i] = dout(t0 + lane) . v(j0 + i) */
        int row = t0 + lane;
#pragma unroll
        for (int i = 0; i < R; i++) {
            p[i] = j0 + i <= row && row < T ? expf(s[i] * scale - lse_s[lane]) : 0.0f;
            ds[i] = p[i] * (dp[i] - drow_s[lane]);
        }
        gather<D>(dv, p, gs);
        gather<D>(dk, ds, qs);
    }
    S *dq = dqkv + (size_t)hd.b * T * 3 * C + (size_t)hd.h * hs;
    store_rows<D>(dq + C, 3 * (size_t)C, dk, scale, j0, T, hs);
    store_rows<D>(dq + 2 * C, 3 * (size_t)C, dv, 1.0f, j0, T, hs);
}

/* dQ of a block of queries, over the key tiles they see */
template <int D, typename S>
__global__ static void __launch_bounds__(WARPS * 32)
    attention_dq_kernel(S *dqkv, const float *dout, const S *qkv, const float *lse, const float *drow, int BH, int NH,
                        int T, int C, float scale)
{
    constexpr int R = dt_attn_rows_per_warp(D), NC = D / 32, ROWS = WARPS * R;
    __shared__ float ks[KT][D + 1], vs[KT][D + 1];
    int hs = C / NH, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    head<S> hd = head_of(qkv, BH, NH, T, C, dt_attn_blocks_per_head(T, D), true);
    int q0 = hd.blk * ROWS, r0 = q0 + warp * R, last = min(q0 + ROWS, T) - 1;
    float q[R][NC], g[R][NC], dq[R][NC], lse_r[R], drow_r[R];
    load_rows<D>(q, hd.q, 3 * (size_t)C, r0, T, hs);
    load_rows<D>(g, dout + (size_t)hd.b * T * C + (size_t)hd.h * hs, C, r0, T, hs);
#pragma unroll
    for (int i = 0; i < R; i++) {
        int t = r0 + i;
        lse_r[i] = t < T ? lse[(size_t)hd.bh * T + t] : 0.0f;
        drow_r[i] = t < T ? drow[(size_t)hd.bh * T + t] : 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++) dq[i][c] = 0.0f;
    }
    for (int k0 = 0; k0 <= last; k0 += KT) {
        __syncthreads();
        load_tile<D>(ks, hd.k, 3 * (size_t)C, k0, T, hs);
        load_tile<D>(vs, hd.v, 3 * (size_t)C, k0, T, hs);
        __syncthreads();
        float s[R], dp[R], ds[R];
        dots<D>(s, q, ks);  /* s[i] = q(r0 + i) . k(k0 + lane) */
        dots<D>(dp, g, vs); /* dp[i] = dout(r0 + i) . v(k0 + lane) */
        int key = k0 + lane;
#pragma unroll
        for (int i = 0; i < R; i++) {
            float p = key <= r0 + i && r0 + i < T ? expf(s[i] * scale - lse_r[i]) : 0.0f;
            ds[i] = p * (dp[i] - drow_r[i]);
        }
        gather<D>(dq, ds, ks);
    }
    store_rows<D>(dqkv + (size_t)hd.b * T * 3 * C + (size_t)hd.h * hs, 3 * (size_t)C, dq, scale, r0, T, hs);
}

// ---------------------------------------------------------------- the reference path's kernels

/* warps for `rows` rows, 8 per block of 256, the grid bounded */
static unsigned warp_blocks(size_t rows)
{
    size_t b = (rows + 7) / 8;
    return (unsigned)(b < 65535u * 16u ? (b ? b : 1) : 65535u * 16u);
}

/* att (rows of T, the scaled scores) into the causal softmax in place, as the CPU kernel: the max
 * and the sum over u <= t, the entries after t set to 0. One warp per row. */
__global__ static void causal_softmax_kernel(float *att, int T, size_t rows)
{
    int lane = threadIdx.x % 32;
    size_t warps = (size_t)gridDim.x * blockDim.x / 32;
    for (size_t w = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; w < rows; w += warps) {
        int t = (int)(w % T);
        float *row = att + w * T;
        float mx = -INFINITY;
        for (int u = lane; u <= t; u += 32) mx = fmaxf(mx, row[u]);
        mx = warp_max(mx);
        float sum = 0.0f;
        for (int u = lane; u <= t; u += 32) {
            row[u] = expf(row[u] - mx);
            sum += row[u];
        }
        float inv = 1.0f / warp_sum(sum);
        for (int u = lane; u < T; u += 32) row[u] = u <= t ? row[u] * inv : 0.0f;
    }
}

/* datt (rows of T) into dpre = att * (datt - sum_u att * datt) in place, 0 after t, as the CPU */
__global__ static void softmax_backward_kernel(float *datt, const float *att, int T, size_t rows)
{
    int lane = threadIdx.x % 32;
    size_t warps = (size_t)gridDim.x * blockDim.x / 32;
    for (size_t w = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; w < rows; w += warps) {
        int t = (int)(w % T);
        float *d = datt + w * T;
        const float *a = att + w * T;
        float dot = 0.0f;
        for (int u = lane; u <= t; u += 32) dot = fmaf(a[u], d[u], dot);
        dot = warp_sum(dot);
        for (int u = lane; u < T; u += 32) d[u] = u <= t ? a[u] * (d[u] - dot) : 0.0f;
    }
}

// ---------------------------------------------------------------- launchers

/* the shapes every path takes: B, T >= 0 (0: nothing to do), heads dividing C */
static bool shape_ok(int B, int T, int C, int NH) { return B >= 0 && T >= 0 && NH > 0 && C > 0 && C % NH == 0; }


template <int D, typename S>
static cudaError_t forward_launch(S *out, float *lse, const S *qkv, int B, int T, int C, int NH)
{
    unsigned grid = dt_attn_grid(B, T, NH, D);
    if (!grid) return cudaErrorInvalidValue;
    attention_forward_kernel<D, S><<<grid, WARPS * 32>>>(out, lse, qkv, B * NH, NH, T, C, 1.0f / sqrtf((float)(C / NH)));
    return cudaGetLastError();
}

template <int D, typename S>
static cudaError_t backward_launch(S *dqkv, const float *dout, const S *qkv, const float *lse, const float *drow, int B,
                                   int T, int C, int NH)
{
    unsigned grid = dt_attn_grid(B, T, NH, D);
    if (!grid) return cudaErrorInvalidValue;
    float scale = 1.0f / sqrtf((float)(C / NH));
    attention_dkv_kernel<D, S><<<grid, WARPS * 32>>>(dqkv, dout, qkv, lse, drow, B * NH, NH, T, C, scale);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    attention_dq_kernel<D, S><<<grid, WARPS * 32>>>(dqkv, dout, qkv, lse, drow, B * NH, NH, T, C, scale);
    return cudaGetLastError();
}

static int blas_err(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? 0 : DT_CUDA_CUBLAS_ERR + (int)s; }

/* column-major C = alpha op(A) op(B) + beta C for the NH heads of one batch row: the heads' slices
 * lie hs apart in qkv, dqkv and out, T*T apart in att */
static int gemm_heads(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const float *A, int lda,
                      long long sa, const float *B, int ldb, long long sb, float beta, float *Cm, int ldc,
                      long long sc, int NH)
{
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    return blas_err(cublasGemmStridedBatchedEx(h, opa, opb, m, n, k, &alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F, ldb,
                                               sb, &beta, Cm, CUDA_R_32F, ldc, sc, NH, CUBLAS_COMPUTE_32F,
                                               CUBLAS_GEMM_DEFAULT));
}

extern "C" {

/* the fused kernels' scratch: backward's Drow, one float per (b, h, t), whatever the type */
size_t dt_cuda_attention_scratch(int B, int T, int C, int NH, int at)
{
    (void)C, (void)at;
    return B > 0 && T > 0 && NH > 0 ? (size_t)B * NH * T : 0;
}

/* the padded head size the kernels are instantiated for, into *D (0: nothing to launch), or the
 * error of a shape they do not take */
static cudaError_t launch_dim(int B, int T, int C, int NH, int *D)
{
    *D = 0;
    if (!shape_ok(B, T, C, NH)) return cudaErrorInvalidValue;
    int d = dt_attn_padded(C / NH);
    if (!d) return cudaErrorInvalidValue;
    if (B && T) *D = d;
    return cudaSuccess;
}

cudaError_t dt_cuda_attention_forward(void *out, float *lse, const void *qkv, int at, int B, int T, int C, int NH)
{
    return dt_by_type(at, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        int D;
        cudaError_t bad = launch_dim(B, T, C, NH, &D);
        if (bad != cudaSuccess || !D) return bad;
        if (dt_cuda_attention_tc_takes(at, C / NH, out, qkv, NULL))
            return dt_cuda_attention_tc_forward(out, lse, qkv, at, B, T, C, NH);
        S *o = (S *)out;
        const S *x = (const S *)qkv;
        return D == 32 ? forward_launch<32>(o, lse, x, B, T, C, NH)
               : D == 64 ? forward_launch<64>(o, lse, x, B, T, C, NH)
                         : forward_launch<128>(o, lse, x, B, T, C, NH);
    });
}

cudaError_t dt_cuda_attention_backward(void *dqkv, const float *dout, const void *qkv, const void *out,
                                       const float *lse, float *scratch, int at, int B, int T, int C, int NH)
{
    return dt_by_type(at, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        int D;
        cudaError_t bad = launch_dim(B, T, C, NH, &D);
        if (bad != cudaSuccess || !D) return bad;
        size_t rows = (size_t)B * NH * T;
        attention_drow_kernel<<<warp_blocks(rows), 256>>>(scratch, dout, (const S *)out, NH, T, C, rows);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
        if (dt_cuda_attention_tc_takes(at, C / NH, dqkv, dout, qkv))
            return dt_cuda_attention_tc_backward(dqkv, dout, qkv, lse, scratch, at, B, T, C, NH);
        S *d = (S *)dqkv;
        const S *x = (const S *)qkv;
        return D == 32 ? backward_launch<32>(d, dout, x, lse, scratch, B, T, C, NH)
               : D == 64 ? backward_launch<64>(d, dout, x, lse, scratch, B, T, C, NH)
                         : backward_launch<128>(d, dout, x, lse, scratch, B, T, C, NH);
    });
}

size_t dt_cuda_attention_ref_scratch(int NH, int T) { return (size_t)NH * T * T; }

/*
 * cuBLAS is column-major, where a row-major (T, hs) slice with row stride ld is an (hs, T) matrix
 * with leading dimension ld; so with Qc, Kc, Vc, dOc the slices' column-major views and att's
 * (T,T) rows its columns:
 *   att^T = Kc^T Qc (scaled)   out^T = Vc att^T
 */
int dt_cuda_attention_forward_ref(struct dt_cuda_ctx *c, float *out, float *att, const float *qkv, int B, int T, int C,
                                  int NH)
{
    if (!shape_ok(B, T, C, NH)) return (int)cudaErrorInvalidValue;
    if (!B || !T) return 0; /* (cuBLAS refuses a leading dimension of 0) */
    cublasHandle_t h = dt_cuda_ctx_blas(c);
    int hs = C / NH, e = 0;
    float scale = 1.0f / sqrtf((float)hs);
    long long tt = (long long)T * T;
    for (int b = 0; b < B && !e; b++) {
        const float *q = qkv + (size_t)b * T * 3 * C, *k = q + C, *v = q + 2 * C;
        float *a = att + (size_t)b * NH * tt, *y = out + (size_t)b * T * C;
        e = gemm_heads(h, true, false, T, T, hs, scale, k, 3 * C, hs, q, 3 * C, hs, 0.0f, a, T, tt, NH);
        if (!e) {
            size_t rows = (size_t)NH * T;
            causal_softmax_kernel<<<warp_blocks(rows), 256>>>(a, T, rows);
            e = (int)cudaGetLastError();
        }
        if (!e) e = gemm_heads(h, false, false, hs, T, T, 1.0f, v, 3 * C, hs, a, T, tt, 0.0f, y, C, hs, NH);
    }
    return e;
}

/*
 * Backward from att, in the same column-major views (dpre: datt through the softmax's backward):
 *   datt^T = Vc^T dOc   dVc = dOc att   dQc = scale Kc dpre^T   dKc = scale Qc dpre
 * one batch row at a time, datt in scratch (dt_cuda_attention_ref_scratch floats); each slice of
 * dqkv is written by one gemm (beta 0), so dqkv needs no zeroing.
 */
int dt_cuda_attention_backward_ref(struct dt_cuda_ctx *c, float *dqkv, const float *dout, const float *qkv,
                                   const float *att, float *scratch, int B, int T, int C, int NH)
{
    if (!shape_ok(B, T, C, NH)) return (int)cudaErrorInvalidValue;
    if (!B || !T) return 0; /* (cuBLAS refuses a leading dimension of 0) */
    cublasHandle_t h = dt_cuda_ctx_blas(c);
    int hs = C / NH, e = 0;
    float scale = 1.0f / sqrtf((float)hs);
    long long tt = (long long)T * T;
    for (int b = 0; b < B && !e; b++) {
        const float *q = qkv + (size_t)b * T * 3 * C, *k = q + C, *v = q + 2 * C;
        const float *a = att + (size_t)b * NH * tt, *dy = dout + (size_t)b * T * C;
        float *dq = dqkv + (size_t)b * T * 3 * C, *dk = dq + C, *dv = dq + 2 * C;
        e = gemm_heads(h, true, false, T, T, hs, 1.0f, v, 3 * C, hs, dy, C, hs, 0.0f, scratch, T, tt, NH);
        if (!e) e = gemm_heads(h, false, true, hs, T, T, 1.0f, dy, C, hs, a, T, tt, 0.0f, dv, 3 * C, hs, NH);
        if (!e) {
            size_t rows = (size_t)NH * T;
            softmax_backward_kernel<<<warp_blocks(rows), 256>>>(scratch, a, T, rows);
            e = (int)cudaGetLastError();
        }
        if (!e) e = gemm_heads(h, false, false, hs, T, T, scale, k, 3 * C, hs, scratch, T, tt, 0.0f, dq, 3 * C, hs, NH);
        if (!e) e = gemm_heads(h, false, true, hs, T, T, scale, q, 3 * C, hs, scratch, T, tt, 0.0f, dk, 3 * C, hs, NH);
    }
    return e;
}

} /* extern "C" */
