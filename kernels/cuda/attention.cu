/*
 * attention.cu - causal self-attention with grouped-query heads on the GPU, the CPU kernel's
 * semantics (kernels/cpu/attention.c): a row of qkv (B,T,W) holds NH query heads, NKV key heads and
 * NKV value heads of hs = C/NH columns each, W = (NH + 2 NKV) hs (plan.h's dt_attn_width; NKV = NH
 * is multi-head attention's (B,T,3C)); query head h attends with key/value head h / (NH/NKV), scores
 * scaled by 1/sqrt(hs), out (B,T,C); backward WRITES dqkv (B,T,W). qkv, out and
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
 *   dkv    a block owns a block of keys of one key/value head and, for each query head of its
 *          group in order, walks the query tiles that can see them (queries >= the first key):
 *          dV += P^T dO, dK += scale dS^T Q with dS = P (dO V^T - Drow)
 *   dq     a block owns a block of queries and walks the key tiles they see: dQ += scale dS K
 * Each element of dqkv is written by exactly one thread (q columns by dq, k and v columns by dkv),
 * which stores its sum, formed in a fixed order (every column of a head, so dqkv needs no zeroing).
 * Where a group is split among several dkv blocks (plan.h's dt_attn_kv_splits: few key/value heads
 * at a small batch; never with kv1 on trial), each stores its fp32 sums in the scratch after Drow
 * and a fourth kernel, kv_sum, adds them in split order into dqkv's key and value columns.
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
 * q, dout and dq in dq, k, v, dk and dv in dkv) fit in registers: ptxas (CUDA 13) gives 64 to
 * 168 per thread for sm_80 and sm_90, dkv spilling up to 36 bytes at D = 64 and 128.
 *
 * Reference (fp32 only: the textbook algorithm, cuBLAS strided-batched gemms in fp32 over the heads
 * of one batch row at a time, and a warp per softmax row): forward writes att (B,NH,T,T), the causal
 * softmax with the masked entries 0, and backward works from it and writes dqkv, a key/value head's
 * gradient accumulated over its group by gemms with beta 1. The GPU tests hold the fused kernels
 * against it and against the CPU, and its att against a softmax of their own.
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

/* What the forward's and dq's blocks work out first: their (b, h), the query head's slice and its
 * key/value head's, their block of own rows. Blocks run heaviest first: the last query blocks see
 * the most keys (dkv's, plan.h's dt_attn_kv_block, the first key blocks, seen by the most queries). */
template <typename S>
struct head {
    int b, h, bh, blk;
    const S *q, *k, *v; /* (T, hs) slices of qkv, row stride W */
};

template <typename S>
__device__ static inline head<S> head_of(const S *qkv, int BH, int NH, int NKV, int T, int C, int nblk)
{
    head<S> o;
    dt_attn_block(blockIdx.x, BH, nblk, true, &o.bh, &o.blk);
    o.b = o.bh / NH;
    o.h = o.bh % NH;
    int hs = C / NH;
    o.q = qkv + (size_t)o.b * T * dt_attn_width(C, NH, NKV) + (size_t)o.h * hs;
    /* k as an offset from q: from the row's start, ptxas gives dq 145 registers at D = 64 (sm_80),
     * past the 128 of four blocks an SM */
    o.k = o.q + (C + (o.h / (NH / NKV) - o.h) * hs);
    o.v = o.k + NKV * hs;
    return o;
}

// ---------------------------------------------------------------- fused forward

template <int D, typename S>
__global__ static void __launch_bounds__(WARPS * 32)
    attention_forward_kernel(S *out, float *lse, const S *qkv, int BH, int NH, int NKV, int T, int C, float scale)
{
    constexpr int R = dt_attn_rows_per_warp(D), NC = D / 32, ROWS = WARPS * R;
    __shared__ float ks[KT][D + 1], vs[KT][D + 1];
    int hs = C / NH, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    size_t W = dt_attn_width(C, NH, NKV);
    head<S> hd = head_of(qkv, BH, NH, NKV, T, C, dt_attn_blocks_per_head(T, D));
    int q0 = hd.blk * ROWS, r0 = q0 + warp * R, last = min(q0 + ROWS, T) - 1;
    float q[R][NC], o[R][NC], m[R], l[R];
    load_rows<D>(q, hd.q, W, r0, T, hs);
#pragma unroll
    for (int i = 0; i < R; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++) o[i][c] = 0.0f;
    }
    for (int k0 = 0; k0 <= last; k0 += KT) {
        __syncthreads(); /* every warp is done with the previous tile */
        load_tile<D>(ks, hd.k, W, k0, T, hs);
        load_tile<D>(vs, hd.v, W, k0, T, hs);
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

/* dK, dV of a block of keys of one key/value head, summed over the block's query heads in order
 * (its group, or its split's share: plan.h's dt_attn_kv_block), each over the query tiles at and
 * after the first key. Stored into dqkv, or with SPLIT (a split group) as fp32 into the split's
 * partial in part, rows of dqkv's 2 NKV hs key and value columns. SPLIT a template argument and
 * the heads' pointers stepped, as attention_tc.cu's dkv (registers). */
template <int D, typename S, bool SPLIT>
__global__ static void __launch_bounds__(WARPS * 32)
    attention_dkv_kernel(S *dqkv, float *part, const float *dout, const S *qkv, const float *lse, const float *drow,
                         int B, int NH, int NKV, int splits, int T, int C, float scale)
{
    constexpr int R = dt_attn_rows_per_warp(D), NC = D / 32, ROWS = WARPS * R;
    __shared__ float qs[KT][D + 1], gs[KT][D + 1]; /* 32 queries' q and dout */
    __shared__ float lse_s[KT], drow_s[KT];
    int hs = C / NH, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    size_t W = dt_attn_width(C, NH, NKV);
    struct dt_attn_kv kv = dt_attn_kv_block(blockIdx.x, B, NH, NKV, splits, dt_attn_blocks_per_head(T, D));
    int k0 = kv.blk * ROWS, j0 = k0 + warp * R;
    const S *rows = qkv + (size_t)kv.b * T * W, *kh = rows + C + (size_t)kv.g * hs;
    float k[R][NC], v[R][NC], dk[R][NC], dv[R][NC];
    load_rows<D>(k, kh, W, j0, T, hs);
    load_rows<D>(v, kh + (size_t)NKV * hs, W, j0, T, hs);
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int c = 0; c < NC; c++) dk[i][c] = dv[i][c] = 0.0f;
    const S *q = rows + (size_t)kv.h0 * hs;
    const float *dy = dout + (size_t)kv.b * T * C + (size_t)kv.h0 * hs;
    size_t bh = (size_t)kv.b * NH + kv.h0;
    for (int n = kv.h1 - kv.h0; n > 0; n--, q += hs, dy += hs, bh++) {
        for (int t0 = k0 / KT * KT; t0 < T; t0 += KT) {
            __syncthreads(); /* every warp is done with the previous tile, of this head or the last */
            load_tile<D>(qs, q, W, t0, T, hs);
            load_tile<D>(gs, dy, C, t0, T, hs);
            if (threadIdx.x < KT) {
                int t = t0 + threadIdx.x;
                lse_s[threadIdx.x] = t < T ? lse[bh * T + t] : 0.0f;
                drow_s[threadIdx.x] = t < T ? drow[bh * T + t] : 0.0f;
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
    }
    if constexpr (SPLIT) {
        size_t kvw = 2 * (size_t)NKV * hs;
        float *pk = part + ((size_t)kv.split * B + kv.b) * T * kvw + (size_t)kv.g * hs;
        store_rows<D>(pk, kvw, dk, scale, j0, T, hs);
        store_rows<D>(pk + (size_t)NKV * hs, kvw, dv, 1.0f, j0, T, hs);
    } else {
        S *dkh = dqkv + (size_t)kv.b * T * W + C + (size_t)kv.g * hs;
        store_rows<D>(dkh, W, dk, scale, j0, T, hs);
        store_rows<D>(dkh + (size_t)NKV * hs, W, dv, 1.0f, j0, T, hs);
    }
}

/* dqkv's key and value columns (rows of W from column C, kvw of them) = the splits' partials (S,
 * B T rows of kvw) added in split order, rounded once */
template <typename S>
__global__ static void attention_kv_sum_kernel(S *dqkv, const float *part, int splits, size_t rows, int kvw, int W,
                                               int C)
{
    size_t n = rows * kvw;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float s = part[i];
        for (int j = 1; j < splits; j++) s += part[(size_t)j * n + i];
        dt_st(&dqkv[i / kvw * W + C + i % kvw], s);
    }
}

/* dQ of a block of queries, over the key tiles they see */
template <int D, typename S>
__global__ static void __launch_bounds__(WARPS * 32)
    attention_dq_kernel(S *dqkv, const float *dout, const S *qkv, const float *lse, const float *drow, int BH, int NH,
                        int NKV, int T, int C, float scale)
{
    constexpr int R = dt_attn_rows_per_warp(D), NC = D / 32, ROWS = WARPS * R;
    __shared__ float ks[KT][D + 1], vs[KT][D + 1];
    int hs = C / NH, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    size_t W = dt_attn_width(C, NH, NKV);
    head<S> hd = head_of(qkv, BH, NH, NKV, T, C, dt_attn_blocks_per_head(T, D));
    int q0 = hd.blk * ROWS, r0 = q0 + warp * R, last = min(q0 + ROWS, T) - 1;
    float q[R][NC], g[R][NC], dq[R][NC], lse_r[R], drow_r[R];
    load_rows<D>(q, hd.q, W, r0, T, hs);
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
        load_tile<D>(ks, hd.k, W, k0, T, hs);
        load_tile<D>(vs, hd.v, W, k0, T, hs);
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
    store_rows<D>(dqkv + (size_t)hd.b * T * W + (size_t)hd.h * hs, W, dq, scale, r0, T, hs);
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

/* the shapes every path takes: B, T >= 0 (0: nothing to do), query heads dividing C, key/value
 * heads dividing the query heads */
static bool shape_ok(int B, int T, int C, int NH, int NKV)
{
    return B >= 0 && T >= 0 && NH > 0 && C > 0 && C % NH == 0 && NKV > 0 && NH % NKV == 0;
}

template <int D, typename S>
static cudaError_t forward_launch(S *out, float *lse, const S *qkv, int B, int T, int C, int NH, int NKV)
{
    unsigned grid = dt_attn_grid(B, T, NH, D);
    if (!grid) return cudaErrorInvalidValue;
    attention_forward_kernel<D, S>
        <<<grid, WARPS * 32>>>(out, lse, qkv, B * NH, NH, NKV, T, C, 1.0f / sqrtf((float)(C / NH)));
    return cudaGetLastError();
}

/* part, splits: as dt_cuda_attention_tc_backward's (attention_tc.h) */
template <int D, typename S>
static cudaError_t backward_launch(S *dqkv, float *part, int splits, const float *dout, const S *qkv, const float *lse,
                                   const float *drow, int B, int T, int C, int NH, int NKV)
{
    /* dkv's grid, NKV splits heads, is no larger than dq's */
    unsigned grid = dt_attn_grid(B, T, NH, D), kv_grid = dt_attn_grid(B, T, NKV * splits, D);
    if (!grid) return cudaErrorInvalidValue;
    float scale = 1.0f / sqrtf((float)(C / NH));
    auto dkv = part ? attention_dkv_kernel<D, S, true> : attention_dkv_kernel<D, S, false>;
    dkv<<<kv_grid, WARPS * 32>>>(dqkv, part, dout, qkv, lse, drow, B, NH, NKV, splits, T, C, scale);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    attention_dq_kernel<D, S><<<grid, WARPS * 32>>>(dqkv, dout, qkv, lse, drow, B * NH, NH, NKV, T, C, scale);
    return cudaGetLastError();
}

static int blas_err(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? 0 : DT_CUDA_CUBLAS_ERR + (int)s; }

/* column-major C = alpha op(A) op(B) + beta C for `heads` heads of one batch row, each operand's
 * slices sa, sb, sc apart (hs or G hs in qkv, dqkv and out, T*T or G T*T in att) */
static int gemm_heads(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const float *A, int lda,
                      long long sa, const float *B, int ldb, long long sb, float beta, float *Cm, int ldc,
                      long long sc, int heads)
{
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    return blas_err(cublasGemmStridedBatchedEx(h, opa, opb, m, n, k, &alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F, ldb,
                                               sb, &beta, Cm, CUDA_R_32F, ldc, sc, heads, CUBLAS_COMPUTE_32F,
                                               CUBLAS_GEMM_DEFAULT));
}

extern "C" {

/* the fused kernels' scratch (plan.h): backward's Drow, one float per (b, h, t), and the partials
 * of a split group, whatever the type; under dkv2 (on trial), its lse and 16-bit dout after them */
size_t dt_cuda_attention_scratch(int B, int T, int C, int NH, int NKV, int at)
{
    return dt_attn_scratch_tried(dt_cuda_tries(), at == DT_CUDA_BF16 || at == DT_CUDA_F16, B, T, C, NH, NKV);
}

/* the padded head size the kernels are instantiated for, into *D (0: nothing to launch), or the
 * error of a shape they do not take */
static cudaError_t launch_dim(int B, int T, int C, int NH, int NKV, int *D)
{
    *D = 0;
    if (!shape_ok(B, T, C, NH, NKV)) return cudaErrorInvalidValue;
    int d = dt_attn_padded(C / NH);
    if (!d) return cudaErrorInvalidValue;
    if (B && T) *D = d;
    return cudaSuccess;
}

cudaError_t dt_cuda_attention_forward(void *out, float *lse, const void *qkv, int at, int B, int T, int C, int NH,
                                      int NKV)
{
    return dt_by_type(at, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        int D;
        cudaError_t bad = launch_dim(B, T, C, NH, NKV, &D);
        if (bad != cudaSuccess || !D) return bad;
        if (dt_cuda_attention_tc_takes(at, C / NH, out, qkv, NULL))
            return dt_cuda_attention_tc_forward(out, lse, qkv, at, B, T, C, NH, NKV);
        S *o = (S *)out;
        const S *x = (const S *)qkv;
        return D == 32 ? forward_launch<32>(o, lse, x, B, T, C, NH, NKV)
               : D == 64 ? forward_launch<64>(o, lse, x, B, T, C, NH, NKV)
                         : forward_launch<128>(o, lse, x, B, T, C, NH, NKV);
    });
}

cudaError_t dt_cuda_attention_backward(void *dqkv, const float *dout, const void *qkv, const void *out,
                                       const float *lse, float *scratch, int at, int B, int T, int C, int NH, int NKV)
{
    return dt_by_type(at, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        int D;
        cudaError_t e = launch_dim(B, T, C, NH, NKV, &D);
        if (e != cudaSuccess || !D) return e;
        size_t rows = (size_t)B * NH * T;
        attention_drow_kernel<<<warp_blocks(rows), 256>>>(scratch, dout, (const S *)out, NH, T, C, rows);
        if ((e = cudaGetLastError()) != cudaSuccess) return e;
        /* a split group's partials follow Drow in the scratch (plan.h's dt_attn_scratch_tried) */
        unsigned tries = dt_cuda_tries();
        int splits = dt_attn_kv_splits_tried(tries, B, T, NH, NKV);
        float *part = splits > 1 ? scratch + rows : NULL;
        S *d = (S *)dqkv;
        const S *x = (const S *)qkv;
        if (dt_cuda_attention_tc_takes(at, C / NH, dqkv, dout, qkv)) {
            bool dkv2 = dt_attn_dkv2_on(tries, at == DT_CUDA_BF16 || at == DT_CUDA_F16, C, NH);
            float *work = dkv2 ? scratch + dt_attn_scratch_s(B, T, C, NH, NKV, splits) : NULL;
            e = dt_cuda_attention_tc_backward(dqkv, part, splits, dout, qkv, lse, scratch, work, at, B, T, C, NH, NKV);
        } else {
            e = D == 32   ? backward_launch<32>(d, part, splits, dout, x, lse, scratch, B, T, C, NH, NKV)
                : D == 64 ? backward_launch<64>(d, part, splits, dout, x, lse, scratch, B, T, C, NH, NKV)
                          : backward_launch<128>(d, part, splits, dout, x, lse, scratch, B, T, C, NH, NKV);
        }
        if (e != cudaSuccess || !part) return e;
        int kvw = 2 * NKV * (C / NH);
        size_t bt = (size_t)B * T;
        attention_kv_sum_kernel<<<warp_blocks((bt * kvw + 31) / 32), 256>>>(d, part, splits, bt, kvw,
                                                                          dt_attn_width(C, NH, NKV), C);
        return cudaGetLastError();
    });
}

size_t dt_cuda_attention_ref_scratch(int NH, int T) { return (size_t)NH * T * T; }

/*
 * cuBLAS is column-major, where a row-major (T, hs) slice with row stride ld is an (hs, T) matrix
 * with leading dimension ld; so with Qc, Kc, Vc, dOc the slices' column-major views and att's
 * (T,T) rows its columns:
 *   att^T = Kc^T Qc (scaled)   out^T = Vc att^T
 * Query head h = g G + r (G = NH / NKV) has key/value head g: each product runs G times, for r = 0
 * .. G-1, as a batch over the NKV key/value heads (the query heads' slices G apart); multi-head
 * attention's one batch over every head.
 */
int dt_cuda_attention_forward_ref(struct dt_cuda_ctx *c, float *out, float *att, const float *qkv, int B, int T, int C,
                                  int NH, int NKV)
{
    if (!shape_ok(B, T, C, NH, NKV)) return (int)cudaErrorInvalidValue;
    if (!B || !T) return 0; /* (cuBLAS refuses a leading dimension of 0) */
    cublasHandle_t h = dt_cuda_ctx_blas(c);
    int hs = C / NH, W = dt_attn_width(C, NH, NKV), G = NH / NKV, e = 0;
    float scale = 1.0f / sqrtf((float)hs);
    long long tt = (long long)T * T, gs = (long long)G * hs, gt = G * tt;
    for (int b = 0; b < B && !e; b++) {
        const float *q = qkv + (size_t)b * T * W, *k = q + C, *v = k + (size_t)NKV * hs;
        float *a = att + (size_t)b * NH * tt, *y = out + (size_t)b * T * C;
        for (int r = 0; r < G && !e; r++)
            e = gemm_heads(h, true, false, T, T, hs, scale, k, W, hs, q + r * hs, W, gs, 0.0f, a + r * tt, T, gt, NKV);
        if (!e) {
            size_t rows = (size_t)NH * T;
            causal_softmax_kernel<<<warp_blocks(rows), 256>>>(a, T, rows);
            e = (int)cudaGetLastError();
        }
        for (int r = 0; r < G && !e; r++)
            e = gemm_heads(h, false, false, hs, T, T, 1.0f, v, W, hs, a + r * tt, T, gt, 0.0f, y + r * hs, C, gs, NKV);
    }
    return e;
}

/*
 * Backward from att, in the same column-major views (dpre: datt through the softmax's backward):
 *   datt^T = Vc^T dOc   dVc = dOc att   dQc = scale Kc dpre^T   dKc = scale Qc dpre
 * one batch row at a time, datt in scratch (dt_cuda_attention_ref_scratch floats), in G batches
 * over the key/value heads as forward's. Each slice of dQ is written by one gemm (beta 0); a
 * key/value head's dK and dV by its group's first query head (r = 0, beta 0), the others adding
 * theirs in order (beta 1); so dqkv needs no zeroing.
 */
int dt_cuda_attention_backward_ref(struct dt_cuda_ctx *c, float *dqkv, const float *dout, const float *qkv,
                                   const float *att, float *scratch, int B, int T, int C, int NH, int NKV)
{
    if (!shape_ok(B, T, C, NH, NKV)) return (int)cudaErrorInvalidValue;
    if (!B || !T) return 0; /* (cuBLAS refuses a leading dimension of 0) */
    cublasHandle_t h = dt_cuda_ctx_blas(c);
    int hs = C / NH, W = dt_attn_width(C, NH, NKV), G = NH / NKV, e = 0;
    float scale = 1.0f / sqrtf((float)hs);
    long long tt = (long long)T * T, gs = (long long)G * hs, gt = G * tt;
    for (int b = 0; b < B && !e; b++) {
        const float *q = qkv + (size_t)b * T * W, *k = q + C, *v = k + (size_t)NKV * hs;
        const float *a = att + (size_t)b * NH * tt, *dy = dout + (size_t)b * T * C;
        float *dq = dqkv + (size_t)b * T * W, *dk = dq + C, *dv = dk + (size_t)NKV * hs;
        for (int r = 0; r < G && !e; r++) {
            const float *dyr = dy + r * hs, *ar = a + r * tt;
            float *dar = scratch + r * tt, beta = r ? 1.0f : 0.0f;
            e = gemm_heads(h, true, false, T, T, hs, 1.0f, v, W, hs, dyr, C, gs, 0.0f, dar, T, gt, NKV);
            if (!e) e = gemm_heads(h, false, true, hs, T, T, 1.0f, dyr, C, gs, ar, T, gt, beta, dv, W, hs, NKV);
        }
        if (!e) {
            size_t rows = (size_t)NH * T;
            softmax_backward_kernel<<<warp_blocks(rows), 256>>>(scratch, a, T, rows);
            e = (int)cudaGetLastError();
        }
        for (int r = 0; r < G && !e; r++) {
            const float *dar = scratch + r * tt;
            float beta = r ? 1.0f : 0.0f;
            e = gemm_heads(h, false, false, hs, T, T, scale, k, W, hs, dar, T, gt, 0.0f, dq + r * hs, W, gs, NKV);
            if (!e)
                e = gemm_heads(h, false, true, hs, T, T, scale, q + r * hs, W, gs, dar, T, gt, beta, dk, W, hs, NKV);
        }
    }
    return e;
}

} /* extern "C" */
