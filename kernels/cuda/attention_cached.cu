/*
 * attention_cached.cu - attention for generation over a cache of keys and values on the GPU, the
 * CPU kernel's semantics (kernels.h's attention_cached, kernels/cpu/attention_cached.c): qkv (B,n,W)
 * holds n new tokens at positions pos .. pos + n - 1 in attention.cu's row layout (NH query heads,
 * NKV key heads, NKV value heads of hs = C/NH columns, W = (NH + 2 NKV) hs); kcache and vcache are
 * (B,Tc,NKV,hs), element (b, t, g, d) at ((b Tc + t) NKV + g) hs + d; out (B,n,C). All of type S
 * (fp32, bf16, fp16: ops.h's dt_ld widens as read, dt_st rounds once as stored). Two kernels, in
 * order on the default stream (per thread in this build):
 *
 * store      the new rows' key and value heads into the caches at rows [pos, pos + n), an element
 *            a thread (grid-stride); through fp32 as the CPU's load and store go, so the caches
 *            hold the CPU's bits, a NaN's quieting included.
 * attention  one block of 4 warps per (b, query head h, new query i), h fastest so that the blocks
 *            of a key/value group run side by side and share its rows in L2. Query i sees the
 *            cached keys 0 .. pos + i, with key/value head h / (NH/NKV); they pass through shared
 *            memory KT = 32 at a time, widened to fp32:
 *              - the key tile; each warp takes 8 of its keys, lanes over the head's columns, the
 *                dot with q (in shared memory) summed by an xor shuffle tree, scaled by 1/sqrt(hs);
 *              - warp 0 runs the online softmax on the 32 scores, a lane per key: the running max
 *                m and sum l, alpha = exp(m_old - m), p = exp(s - m) (0 past the visible keys),
 *                while the other warps load the value tile into the same buffer;
 *              - thread t owns columns t and t + 128 of the output, o = alpha o + sum_j p_j v_j
 *                over the tile's keys in order.
 *            out = o / l, rounded once. Every operand of an fp32 product is read along a row of
 *            the tile (lanes on consecutive columns), so the tile needs no padding against bank
 *            conflicts.
 *
 * Cost: the block reads its key/value head's visible rows once, O(context x hs), and holds nothing
 * that grows with Tc. Shared memory, static: the tile (32 x 256 floats), q (256 floats) and the
 * tile's scores, 33928 bytes at any head size. Head sizes up to DT_CUDA_ATTN_CACHED_HS_MAX (ops.h).
 * A decode step at B = 1 is NH blocks, each walking the whole context alone: simple and correct;
 * splitting the context among blocks (flash-decoding) is the step to take if long contexts on a
 * large GPU ask for it.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <type_traits>
#include "kernels/cuda/ops.h"

#define KT 32 /* keys of a tile: one per lane of warp 0's softmax */
#define WARPS 4
#define THREADS (WARPS * 32)
#define HS_MAX DT_CUDA_ATTN_CACHED_HS_MAX
#define COLS (HS_MAX / THREADS) /* output columns per thread */
#define FULL 0xffffffffu

static_assert(KT % WARPS == 0 && HS_MAX % THREADS == 0, "the tile's keys and the head's columns divide evenly");
static_assert(sizeof(float) * (KT * HS_MAX + HS_MAX + KT + 2) <= 48 * 1024, "static shared memory over 48 KiB");

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

/* kcache, vcache rows [pos, pos + n) of every batch row = the key and value heads of qkv's rows;
 * total = B n kvw, kvw = NKV hs the elements of a cache row */
template <typename S>
__global__ static void attention_cached_store_kernel(S *kcache, S *vcache, const S *qkv, size_t total, int n, int pos,
                                                     int Tc, int C, int kvw, int W)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / kvw, e = i % kvw; /* qkv's row (b n + its token) and the column after the queries */
        size_t dst = ((r / n) * Tc + pos + r % n) * kvw + e;
        const S *src = qkv + r * W + C + e;
        dt_st(&kcache[dst], dt_ld(src[0]));
        dt_st(&vcache[dst], dt_ld(src[kvw]));
    }
}

/* keys [k0, k0 + KT) of one key/value head's cache rows at base (row stride ld) into tile (KT rows
 * of hs), widened; zeros from key `seen` on, so that no stale value meets a p of 0. Called by the
 * whole block, consecutive threads on consecutive columns. */
template <typename S>
__device__ static void load_keys(float *tile, const S *base, size_t ld, int k0, int seen, int hs)
{
    for (int e = threadIdx.x; e < KT * hs; e += THREADS) {
        int j = e / hs, d = e - j * hs;
        tile[e] = k0 + j < seen ? dt_ld(base[(size_t)(k0 + j) * ld + d]) : 0.0f;
    }
}

template <typename S>
__global__ static void __launch_bounds__(THREADS)
    attention_cached_kernel(S *out, const S *qkv, const S *kcache, const S *vcache, int n, int pos, int Tc, int C,
                            int NH, int NKV, float scale)
{
    __shared__ float tile[KT * HS_MAX]; /* the keys of a tile, then its values */
    __shared__ float qs[HS_MAX];
    __shared__ float sp[KT]; /* the tile's scores, then warp 0's probabilities */
    __shared__ float alpha_s, l_s;
    int hs = C / NH, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int h = (int)(blockIdx.x % NH), r = (int)(blockIdx.x / NH); /* r = b n + i: the row of qkv and out */
    int b = r / n, seen = pos + r % n + 1;
    size_t ld = (size_t)NKV * hs, W = (size_t)C + 2 * ld;
    size_t kv = ((size_t)b * Tc * NKV + (size_t)(h / (NH / NKV))) * hs;
    const S *q = qkv + (size_t)r * W + (size_t)h * hs;
    for (int d = threadIdx.x; d < hs; d += THREADS) qs[d] = dt_ld(q[d]);
    float o[COLS], m = -INFINITY, l = 0.0f; /* m, l: warp 0's */
#pragma unroll
    for (int c = 0; c < COLS; c++) o[c] = 0.0f;
    for (int k0 = 0; k0 < seen; k0 += KT) {
        int nk = min(KT, seen - k0);
        __syncthreads(); /* the previous tile's values and probabilities are read (and qs written) */
        load_keys(tile, kcache + kv, ld, k0, seen, hs);
        __syncthreads();
        /* the warp's 8 keys' partial dots first, then their 8 reductions: the shuffles overlap */
        float part[KT / WARPS];
#pragma unroll
        for (int k = 0; k < KT / WARPS; k++) {
            const float *key = tile + (warp * (KT / WARPS) + k) * hs;
            part[k] = 0.0f;
            for (int d = lane; d < hs; d += 32) part[k] = fmaf(qs[d], key[d], part[k]);
        }
#pragma unroll
        for (int k = 0; k < KT / WARPS; k++) {
            float s = warp_sum(part[k]);
            if (lane == k) sp[warp * (KT / WARPS) + k] = s * scale;
        }
        __syncthreads();
        if (warp == 0) {
            float x = lane < nk ? sp[lane] : -INFINITY;
            float mn = fmaxf(m, warp_max(x)); /* finite: key k0 is always visible */
            float alpha = expf(m - mn), p = expf(x - mn);
            l = l * alpha + warp_sum(p);
            m = mn;
            sp[lane] = p;
            if (lane == 0) alpha_s = alpha;
        }
        load_keys(tile, vcache + kv, ld, k0, seen, hs); /* the keys' tile is read: values into it */
        __syncthreads();
        float alpha = alpha_s;
#pragma unroll
        for (int c = 0; c < COLS; c++) {
            int d = c * THREADS + threadIdx.x;
            if (d >= hs) continue;
            o[c] *= alpha;
            for (int j = 0; j < nk; j++) o[c] = fmaf(sp[j], tile[j * hs + d], o[c]);
        }
    }
    if (threadIdx.x == 0) l_s = l;
    __syncthreads();
    S *y = out + (size_t)r * C + (size_t)h * hs;
#pragma unroll
    for (int c = 0; c < COLS; c++) {
        int d = c * THREADS + threadIdx.x;
        if (d < hs) dt_st(&y[d], o[c] / l_s);
    }
}

extern "C" cudaError_t dt_cuda_attention_cached(void *out, const void *qkv, void *kcache, void *vcache, int at, int B,
                                                int n, int pos, int Tc, int C, int NH, int NKV)
{
    return dt_by_type(at, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        if (B < 0 || n < 0 || pos < 0 || (long long)pos + n > Tc || NH <= 0 || C <= 0 || C % NH || C / NH > HS_MAX ||
            NKV <= 0 || NH % NKV)
            return cudaErrorInvalidValue;
        size_t rows = (size_t)B * (size_t)n;
        if (rows * NH > 0x7fffffffu) return cudaErrorInvalidValue; /* a block per (b, h, i), past gridDim.x's limit */
        if (!rows) return cudaSuccess;
        int hs = C / NH, kvw = NKV * hs;
        size_t total = rows * kvw, blocks = (total + 255) / 256;
        attention_cached_store_kernel<S><<<(unsigned)(blocks < 65535u * 16u ? blocks : 65535u * 16u), 256>>>(
            (S *)kcache, (S *)vcache, (const S *)qkv, total, n, pos, Tc, C, kvw, C + 2 * kvw);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
        attention_cached_kernel<S><<<(unsigned)(rows * NH), THREADS>>>((S *)out, (const S *)qkv, (const S *)kcache,
                                                                       (const S *)vcache, n, pos, Tc, C, NH, NKV,
                                                                       1.0f / sqrtf((float)hs));
        return cudaGetLastError();
    });
}
