/*
 * attention_tc.cu - causal attention (grouped-query heads) on tensor cores, for bf16 and fp16
 * activations of head size D = 64 or 128 (issue #29 item 3): attention.cu's fused kernels (same
 * buffers, same semantics, the same lse and Drow, the same split of a key/value head's group among
 * dkv blocks) with the products on mma.sync.m16n8k16 (16-bit operands, fp32
 * accumulators), FlashAttention-2's tiling (Dao 2023). attention.cu dispatches here
 * (dt_cuda_attention_tc_takes); fp32 and every other head size stay on its CUDA-core kernels.
 *
 * What is rounded to 16 bits besides the stored results: the probabilities P before P V (forward)
 * and P^T dO (backward), dS before dS K and dS^T Q, and dout (fp32) as it is staged for dO V^T and
 * P^T dO. The CPU kernel keeps all of them in fp32, so results differ from its by a few 16-bit
 * ulps of the terms' magnitudes (tests/unit/cuda_ops_matmul.c derives the bound it checks). Scores,
 * the softmax (max, sum, exp) and every accumulator are fp32; out, dqkv are rounded once, by
 * core/half.h as the CPU rounds.
 *
 * Blocks: 4 warps; a block owns 64 rows of one (b, h) (dt_attn_block: heaviest blocks first), a
 * warp 16 of them, the m of its mma tiles, and walks tiles of KT rows (plan.h's dt_attn_tc_kt)
 * staged in shared memory as 16-bit rows of D + 8 elements, read into fragments by ldmatrix:
 *   forward  own queries (Q in registers), over the key tiles up to the diagonal: S = Q K^T, the
 *            online softmax on the accumulators (row max and sum over the 4 lanes of a row, xor
 *            shuffles), O = diag(alpha) O + P V, P taken from S's accumulators as A fragments.
 *            Writes out and lse.
 *   dkv      own keys (of a key/value head), for each query head of its group (or of its split's
 *            share) in order, over the query tiles from the diagonal on: S^T = K Q^T, dP^T = V dO^T,
 *            P^T = exp(S^T scale - lse), dS^T = P^T (dP^T - Drow); dV += P^T dO, dK += dS^T Q.
 *   dq       own queries, over the key tiles up to the diagonal: S = Q K^T, dP = dO V^T, dS as
 *            above; dQ += dS K.
 * Every element of out, lse and dqkv (or of a split group's partial, which attention.cu adds in a
 * fixed order) is stored by one lane, from sums it formed in a fixed order (no atomics): every run
 * gives the same bits. Every row below T of dqkv's q, k and v columns of every head is written, so
 * dqkv needs no zeroing.
 *
 * Masks: scores of a key after its query, and of rows at or past T, are excluded (-inf in
 * forward's max, P = 0 in backward); tiles are zero past T, so no garbage meets a 0.
 *
 * Needs sm_80 or later (bf16 mma.sync, ldmatrix); the module is built for 80 and 90.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <type_traits>
#include "kernels/cuda/attention_tc.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/plan.h"

#define WARPS DT_ATTN_TC_WARPS
#define ROWS DT_ATTN_TC_ROWS
#define PAD DT_ATTN_TC_PAD
#define FULL 0xffffffffu
#define LOG2E 1.4426950408889634f
#define LN2 0.69314718055994531f

static_assert(ROWS == WARPS * 16, "a warp owns one m16 block of rows");
static_assert(ROWS % dt_attn_tc_kt(DT_ATTN_TC_DKV, 128) == 0 && ROWS % dt_attn_tc_kt(DT_ATTN_TC_DKV, 64) == 0 &&
                  ROWS % dt_attn_tc_kt(DT_ATTN_TC_DKV2, 64) == 0 && ROWS % dt_attn_tc_kt(DT_ATTN_TC_DKV3, 64) == 0 &&
                  ROWS % dt_attn_tc_kt(DT_ATTN_TC_DKV2, 128) == 0,
              "dkv's (dkv2's, dkv3's) first query tile starts at its block's first key");
static_assert(dt_attn_tc_kt(DT_ATTN_TC_FWD, 64) == ROWS && dt_attn_tc_kt(DT_ATTN_TC_FWD, 128) == ROWS,
              "forward stages its Q through the K tile");

/* the dynamic shared memory, one declaration for every instance (16-byte aligned) */
extern __shared__ uint4 tc_smem[];

// ---------------------------------------------------------------- fragments

/* two fp32 values as a register of two 16-bit S, lo in the low half (the lower column), round to
 * nearest even (the operands of a product, not a stored result) */
template <typename S>
__device__ static inline uint32_t pack2(float lo, float hi)
{
    uint32_t r;
    if constexpr (std::is_same_v<S, __half>) {
        __half2 h = __floats2half2_rn(lo, hi);
        memcpy(&r, &h, 4);
    } else {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        memcpy(&r, &h, 4);
    }
    return r;
}

/* two fp32 partials (a split group's dK, dV) at p: two stores, as the scratch after Drow is only
 * 4-byte aligned */
__device__ static inline void store2(float *p, float lo, float hi)
{
    p[0] = lo;
    p[1] = hi;
}

/* two results stored at p (4-byte aligned), each rounded by core/half.h as the CPU rounds */
template <typename S>
__device__ static inline void store2(S *p, float lo, float hi)
{
    uint32_t r;
    if constexpr (std::is_same_v<S, __half>)
        r = (uint32_t)dt_f16_from_f32(lo) | (uint32_t)dt_f16_from_f32(hi) << 16;
    else
        r = (uint32_t)dt_bf16_from_f32(lo) | (uint32_t)dt_bf16_from_f32(hi) << 16;
    *reinterpret_cast<uint32_t *>(p) = r;
}

__device__ static inline uint32_t shared_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* ldmatrix.x4 at p, the lane's row address (plan.h's dt_mma_ldsm_row/_col); trans: .trans */
template <bool trans>
__device__ static inline void ldsm4(uint32_t (&r)[4], const void *p)
{
    if constexpr (trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(shared_addr(p)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(shared_addr(p)));
}

/* d += a b, one 16 x 8 x 16 product, 16-bit S operands, fp32 accumulators */
template <typename S>
__device__ static inline void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    if constexpr (std::is_same_v<S, __half>)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* acc[j] (N 8-column tiles) += A B^T over k = 0..16 K for the warp's 16 rows: A rows [0, 16) of a,
 * B rows [0, 8 N) of b, both stored [row][k] in shared rows of LD elements (ldmatrix, no .trans) */
template <typename S, int K, int N, int LD>
__device__ static inline void product(float (&acc)[N][4], const S *a, const S *b)
{
    int lane = threadIdx.x % 32, ar = dt_mma_ldsm_row(lane, false), ac = dt_mma_ldsm_col(lane, false);
    int br = dt_mma_ldsm_row(lane, true), bc = dt_mma_ldsm_col(lane, true);
#pragma unroll
    for (int kk = 0; kk < K; kk++) {
        uint32_t af[4];
        ldsm4<false>(af, a + ar * LD + kk * 16 + ac);
#pragma unroll
        for (int np = 0; np < N / 2; np++) {
            uint32_t bf[4];
            ldsm4<false>(bf, b + (np * 16 + br) * LD + kk * 16 + bc);
            mma<S>(acc[2 * np], af, bf[0], bf[1]);
            mma<S>(acc[2 * np + 1], af, bf[2], bf[3]);
        }
    }
}

/* acc[j] (N tiles) += P b: P the warp's 16 x 8 KP values in p's accumulators (rounded to S here,
 * A's fragments, plan.h), b stored [k][n]: 8 KP rows of LD elements, read with .trans */
template <typename S, int KP, int N, int LD>
__device__ static inline void product_acc(float (&acc)[N][4], const float (&p)[KP][4], const S *b)
{
    int lane = threadIdx.x % 32, br = dt_mma_ldsm_row(lane, false), bc = dt_mma_ldsm_col(lane, false);
#pragma unroll
    for (int kk = 0; kk < KP / 2; kk++) {
        const uint32_t af[4] = {pack2<S>(p[2 * kk][0], p[2 * kk][1]), pack2<S>(p[2 * kk][2], p[2 * kk][3]),
                                pack2<S>(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                                pack2<S>(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
        for (int np = 0; np < N / 2; np++) {
            uint32_t bf[4];
            ldsm4<true>(bf, b + (kk * 16 + br) * LD + np * 16 + bc);
            mma<S>(acc[2 * np], af, bf[0], bf[1]);
            mma<S>(acc[2 * np + 1], af, bf[2], bf[3]);
        }
    }
}

template <int N>
__device__ static inline void zero(float (&acc)[N][4])
{
#pragma unroll
    for (int j = 0; j < N; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[j][i] = 0.0f;
}

// ---------------------------------------------------------------- staging

/* rows [t0, t0 + R) of a (T, D) head slice at g (row stride ld elements) into sh (rows of D + PAD),
 * 16 bytes a thread at a time, zeros past T; the whole block calls it */
template <int D, int R, typename S>
__device__ static void stage(S *sh, const S *g, size_t ld, int t0, int T)
{
    constexpr int V = D / 8;
    for (int i = threadIdx.x; i < R * V; i += blockDim.x) {
        int r = i / V, c = i % V * 8, t = t0 + r;
        uint4 x = make_uint4(0, 0, 0, 0);
        if (t < T) x = *reinterpret_cast<const uint4 *>(g + (size_t)t * ld + c);
        *reinterpret_cast<uint4 *>(sh + r * (D + PAD) + c) = x;
    }
}

/* the same by cp.async (sm_80's asynchronous copy to shared memory, no registers on the way): the
 * block's copies form one group with the caller's cp_async_commit, awaited by cp_async_wait; rows
 * past T are zeroed by plain stores, seen with the copies after the __syncthreads that follows the
 * wait */
template <int D, int R, typename S>
__device__ static void stage_async(S *sh, const S *g, size_t ld, int t0, int T)
{
    constexpr int V = D / 8;
    for (int i = threadIdx.x; i < R * V; i += blockDim.x) {
        int r = i / V, c = i % V * 8, t = t0 + r;
        S *dst = sh + r * (D + PAD) + c;
        if (t < T) {
            unsigned a = (unsigned)__cvta_generic_to_shared(dst);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(g + (size_t)t * ld + c) : "memory");
        } else {
            *reinterpret_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
        }
    }
}
__device__ static inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/* until at most N of this thread's committed groups are still in flight */
template <int N>
__device__ static inline void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* one float by cp.async (4 bytes: .ca, as .cg takes only 16), in the caller's group as stage_async's */
__device__ static inline void cp_async4(float *dst, const float *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(shared_addr(dst)), "l"(src) : "memory");
}

/* the same from fp32 (dout), rounded to S */
template <int D, int R, typename S>
__device__ static void stage(S *sh, const float *g, size_t ld, int t0, int T)
{
    constexpr int V = D / 8;
    for (int i = threadIdx.x; i < R * V; i += blockDim.x) {
        int r = i / V, c = i % V * 8, t = t0 + r;
        uint4 x = make_uint4(0, 0, 0, 0);
        if (t < T) {
            const float4 *src = reinterpret_cast<const float4 *>(g + (size_t)t * ld + c);
            float4 a = src[0], b = src[1];
            x = make_uint4(pack2<S>(a.x, a.y), pack2<S>(a.z, a.w), pack2<S>(b.x, b.y), pack2<S>(b.z, b.w));
        }
        *reinterpret_cast<uint4 *>(sh + r * (D + PAD) + c) = x;
    }
}

/* a warp's N accumulator tiles (16 rows from row r0 of a (T, D) slice at g, row stride ld) times
 * mul, stored rounded to S (or as fp32), rows below T */
template <int N, typename S>
__device__ static void store_rows(S *g, size_t ld, const float (&acc)[N][4], float mul, int r0, int T)
{
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int t = r0 + dt_mma_acc_row(lane, 2 * h);
        if (t >= T) continue;
#pragma unroll
        for (int j = 0; j < N; j++)
            store2(g + (size_t)t * ld + j * 8 + dt_mma_acc_col(lane, 0), mul * acc[j][2 * h], mul * acc[j][2 * h + 1]);
    }
}

/* forward's and dq's block: its (b, h), its query head's slice and its key/value head's (row
 * stride ld), its block of own rows, last first (dkv's: plan.h's dt_attn_kv_block) */
template <typename S>
struct tc_head {
    int b, h, bh, blk;
    const S *q, *k, *v;
};

/* The divisions unsigned (the operands are not negative): with signed ones ptxas gives dq 142
 * registers at D = 64 on sm_90, past the 128 of four blocks an SM, where these take 127. */
template <int D, typename S>
__device__ static inline tc_head<S> tc_head_of(const S *qkv, size_t ld, int BH, int NH, int NKV, int T, int C)
{
    tc_head<S> o;
    dt_attn_block(blockIdx.x, BH, dt_attn_tc_blocks_per_head(T), true, &o.bh, &o.blk);
    unsigned nh = NH, h = (unsigned)o.bh % nh;
    o.b = (int)((unsigned)o.bh / nh);
    o.h = (int)h;
    const S *rows = qkv + (size_t)o.b * T * ld;
    o.q = rows + (size_t)h * D;
    o.k = rows + C + (size_t)(h / (nh / (unsigned)NKV)) * D;
    o.v = o.k + (size_t)NKV * D;
    return o;
}

/* A double-buffered loop's tiles (forward's and dq2's): buf holds two buffers, each a K tile then a V
 * tile of KT rows; iteration it's pair was copied into buffer it % 2 by the iteration before (or
 * before the loop: the first). Copies the next pair into the other buffer (free since the
 * __syncthreads ending the last iteration), waits for this one's, and returns it once every
 * thread's copies are in shared memory. */
template <int D, int KT, typename S>
__device__ static inline S *kv_tiles(S *buf, const S *k, const S *v, size_t ld, int k0, int end, int it, int T)
{
    constexpr int LD = D + PAD;
    if (k0 + KT < end) {
        S *next = buf + ((it + 1) % 2) * 2 * KT * LD;
        stage_async<D, KT>(next, k, ld, k0 + KT, T);
        stage_async<D, KT>(next + KT * LD, v, ld, k0 + KT, T);
        cp_async_commit();
        cp_async_wait<1>();
    } else {
        cp_async_wait<0>();
    }
    __syncthreads();
    return buf + (it % 2) * 2 * KT * LD;
}

// ---------------------------------------------------------------- forward

/* scale2 = scale * log2(e): the scores in base 2, the softmax through exp2f */
template <int D, typename S>
__global__ static void __launch_bounds__(WARPS * 32)
    attention_tc_forward_kernel(S *out, float *lse, const S *qkv, int BH, int NH, int NKV, int T, int C, float scale2)
{
    constexpr int KT = dt_attn_tc_kt(DT_ATTN_TC_FWD, D), LD = D + PAD, NS = KT / 8, NO = D / 8;
    /* two buffers, each a K tile then a V tile */
    S *buf = reinterpret_cast<S *>(tc_smem);
    S *ks = buf;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    size_t ld = C + 2 * (size_t)NKV * D; /* dt_attn_width */
    tc_head<S> hd = tc_head_of<D>(qkv, ld, BH, NH, NKV, T, C);
    const S *q = hd.q, *k = hd.k, *v = hd.v;
    int q0 = hd.blk * ROWS, r0 = q0 + warp * 16, end = min(q0 + ROWS, T);

    /* the warp's Q as A fragments for the whole loop, staged through the K tile */
    stage<D, ROWS>(ks, q, ld, q0, T);
    __syncthreads();
    uint32_t qf[D / 16][4];
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
        ldsm4<false>(qf[kk], ks + (warp * 16 + dt_mma_ldsm_row(lane, false)) * LD + kk * 16 +
                                 dt_mma_ldsm_col(lane, false));

    /* rows lane/4 and lane/4 + 8 of the warp: running max (base 2), this lane's share of the sum */
    float o[NO][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    zero(o);
    int bn_r = dt_mma_ldsm_row(lane, true), bn_c = dt_mma_ldsm_col(lane, true);
    __syncthreads(); /* every warp holds its Q: the first buffer is free */
    stage_async<D, KT>(buf, k, ld, 0, T);
    stage_async<D, KT>(buf + KT * LD, v, ld, 0, T);
    cp_async_commit();
    for (int k0 = 0, it = 0; k0 < end; k0 += KT, it++) {
        ks = kv_tiles<D, KT>(buf, k, v, ld, k0, end, it, T);
        const S *vs = ks + KT * LD;
        float s[NS][4];
        zero(s);
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
            for (int np = 0; np < NS / 2; np++) {
                uint32_t bf[4];
                ldsm4<false>(bf, ks + (np * 16 + bn_r) * LD + kk * 16 + bn_c);
                mma<S>(s[2 * np], qf[kk], bf[0], bf[1]);
                mma<S>(s[2 * np + 1], qf[kk], bf[2], bf[3]);
            }
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int row = r0 + dt_mma_acc_row(lane, i), key = k0 + j * 8 + dt_mma_acc_col(lane, i);
                /* the causal mask; for the rows stored (below T) it drops the zero keys past T too */
                s[j][i] = key <= row ? s[j][i] * scale2 : -INFINITY;
                mx[i / 2] = fmaxf(mx[i / 2], s[j][i]);
            }
        float base[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(FULL, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(FULL, mx[h], 2));
            base[h] = mx[h] == -INFINITY ? 0.0f : mx[h]; /* a row that has seen no key yet stays at 0 */
            float alpha = exp2f(m[h] - base[h]);
            l[h] *= alpha;
            m[h] = mx[h];
#pragma unroll
            for (int j = 0; j < NO; j++) o[j][2 * h] *= alpha, o[j][2 * h + 1] *= alpha;
        }
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                s[j][i] = exp2f(s[j][i] - base[i / 2]);
                l[i / 2] += s[j][i];
            }
        product_acc<S, NS, NO, LD>(o, s, vs);
        __syncthreads(); /* every warp is done with this buffer before the next iteration refills it */
    }

    S *y = out + (size_t)hd.b * T * C + (size_t)hd.h * D;
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(FULL, l[h], 1);
        l[h] += __shfl_xor_sync(FULL, l[h], 2);
        inv[h] = 1.0f / l[h];
        int t = r0 + dt_mma_acc_row(lane, 2 * h);
        if (lane % 4 == 0 && t < T) lse[(size_t)hd.bh * T + t] = (m[h] + log2f(l[h])) * LN2;
    }
#pragma unroll
    for (int j = 0; j < NO; j++) o[j][0] *= inv[0], o[j][1] *= inv[0], o[j][2] *= inv[1], o[j][3] *= inv[1];
    store_rows<NO>(y, C, o, 1.0f, r0, T);
}

// ---------------------------------------------------------------- backward

/* One query tile's share of a warp's dK and dV (dkv's and dkv2's): S^T = K Q^T, dP^T = V dO^T,
 * P^T = exp(S^T scale - lse), dS^T = P^T (dP^T - Drow); dV += P^T dO, dK += dS^T Q. ks and vs the
 * warp's 16 keys from j0, qs and gs the tile's KT queries' Q and dO from t0, lse_s (base 2) and
 * drow_s theirs. */
template <int D, typename S, int KT>
__device__ static inline void dkv_tile(float (&dk)[D / 8][4], float (&dv)[D / 8][4], const S *ks, const S *vs,
                                       const S *qs, const S *gs, const float *lse_s, const float *drow_s, int j0,
                                       int t0, int lane, int T, float scale2)
{
    constexpr int LD = D + PAD, NS = KT / 8, NO = D / 8;
    /* s = S^T, dp = dP^T: rows the warp's keys, columns the tile's queries */
    float s[NS][4], dp[NS][4];
    zero(s);
    zero(dp);
    product<S, D / 16, NS, LD>(s, ks, qs);
    product<S, D / 16, NS, LD>(dp, vs, gs);
#pragma unroll
    for (int j = 0; j < NS; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int key = j0 + dt_mma_acc_row(lane, i), c = j * 8 + dt_mma_acc_col(lane, i), t = t0 + c;
            float p = key <= t && t < T ? exp2f(s[j][i] * scale2 - lse_s[c]) : 0.0f;
            s[j][i] = p;
            dp[j][i] = p * (dp[j][i] - drow_s[c]);
        }
    product_acc<S, NS, NO, LD>(dv, s, gs);
    product_acc<S, NS, NO, LD>(dk, dp, qs);
}

/* dkv2's tile of KT queries from t0 of query head h of batch row b into buf (Q, dO, lse, Drow:
 * plan.h's dt_attn_tc_dkv2_tile bytes; dkv3's too), by cp.async into the caller's group; rows past T: zeros.
 * The pointers are formed here, from the kernel's arguments, so that the loop keeps no pointer per
 * head live across its products (see the kernel). */
template <int D, int KT, typename S>
__device__ static inline void dkv2_stage(unsigned char *buf, const S *qkv, const S *dout16, const float *lse2,
                                         const float *drow, int b, int h, int t0, int T, int C, int NH, size_t ld)
{
    constexpr int LD = D + PAD;
    S *qs = reinterpret_cast<S *>(buf), *gs = qs + KT * LD;
    float *lse_s = reinterpret_cast<float *>(gs + KT * LD), *drow_s = lse_s + KT;
    size_t bh = (size_t)b * NH + h;
    stage_async<D, KT>(qs, qkv + (size_t)b * T * ld + (size_t)h * D, ld, t0, T);
    stage_async<D, KT>(gs, dout16 + (size_t)b * T * C + (size_t)h * D, C, t0, T);
    if (threadIdx.x < KT) {
        int t = t0 + threadIdx.x;
        if (t < T) {
            cp_async4(lse_s + threadIdx.x, lse2 + bh * T + t);
            cp_async4(drow_s + threadIdx.x, drow + bh * T + t);
        } else {
            lse_s[threadIdx.x] = drow_s[threadIdx.x] = 0.0f;
        }
    }
}

/* dkv2's blocks a multiprocessor at D = 64, which caps its registers at 168 as dkv's: three on
 * sm_90 (228 KiB of shared memory), where the split group's variant would take 188 otherwise and
 * spills 48 bytes instead; sm_80's 164 KiB hold two of its 56320 bytes, so no cap there. dkv3's:
 * four (128 registers; 132 unbounded, so 48 bytes spilled; its 37376 bytes fit four on both). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define DKV2_BLOCKS 0
#else
#define DKV2_BLOCKS 3
#endif
#define DKV3_BLOCKS 4

/* dK, dV of the block's 64 keys of one key/value head, summed over the block's query heads in
 * order (plan.h's dt_attn_kv_block), each over the query tiles from its first key on; stored into
 * dqkv, or with SPLIT (a split group) as fp32 into the split's partial in part, rows of dqkv's
 * 2 NKV D key and value columns (attention.cu's). SPLIT is a template argument, not a branch on
 * part: with both stores in one kernel ptxas gives 185 registers at D = 64 on sm_80, past the 168
 * of three blocks an SM, where this takes 168; the heads' pointers step for the same reason.
 * KIND: dkv (plan.h's DT_ATTN_TC_DKV), or on trial dkv2 or dkv3 (ASYNC; they differ in their tiles'
 * rows, KT, and blocks a multiprocessor), the (head, query tile) pairs walked as one sequence whose
 * next tile (Q, and dO and lse as dkv2_prep left them) is copied by cp.async into the second buffer
 * while the warps work on the current one: the same sums in the same order as without (the mma's
 * k steps of 16 queries, in order, whatever KT), where each tile is staged by all the threads
 * between two barriers, dO rounded and lse scaled on the way. */
template <int D, typename S, bool SPLIT, int KIND>
__global__ static void __launch_bounds__(WARPS * 32, D != 64                    ? 0
                                                     : KIND == DT_ATTN_TC_DKV2 ? DKV2_BLOCKS
                                                     : KIND == DT_ATTN_TC_DKV3 ? DKV3_BLOCKS
                                                                               : 0)
    attention_tc_dkv_kernel(S *dqkv, float *part, const float *dout, const S *dout16, const S *qkv, const float *lse,
                            const float *lse2, const float *drow, int B, int NH, int NKV, int splits, int T, int C,
                            float scale, float scale2)
{
    constexpr bool ASYNC = KIND != DT_ATTN_TC_DKV;
    constexpr int KT = dt_attn_tc_kt(KIND, D), LD = D + PAD, NO = D / 8;
    S *ks = reinterpret_cast<S *>(tc_smem), *vs = ks + ROWS * LD;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    struct dt_attn_kv kv = dt_attn_kv_block(blockIdx.x, B, NH, NKV, splits, dt_attn_tc_blocks_per_head(T));
    size_t ld = C + 2 * (size_t)NKV * D; /* dt_attn_width */
    const S *rows = qkv + (size_t)kv.b * T * ld, *k = rows + C + (size_t)kv.g * D, *v = k + (size_t)NKV * D;
    int k0 = kv.blk * ROWS, j0 = k0 + warp * 16;

    stage<D, ROWS>(ks, k, ld, k0, T);
    stage<D, ROWS>(vs, v, ld, k0, T);
    float dk[NO][4], dv[NO][4];
    zero(dk);
    zero(dv);
    if constexpr (ASYNC) {
        constexpr int TB = dt_attn_tc_dkv2_tile(KIND, D);
        unsigned char *tiles = reinterpret_cast<unsigned char *>(vs + ROWS * LD);
        /* tile i: query head h0 + i / per, queries from k0 + i % per KT */
        int per = (T - k0 + KT - 1) / KT, total = (kv.h1 - kv.h0) * per;
        dkv2_stage<D, KT>(tiles, qkv, dout16, lse2, drow, kv.b, kv.h0, k0, T, C, NH, ld);
        cp_async_commit();
        for (int it = 0; it < total; it++) {
            /* one barrier a tile: past it, tile it is in shared memory (K and V too, the first time)
             * and every warp is done with tile it - 1, whose buffer the next copy then refills */
            cp_async_wait<0>();
            __syncthreads();
            if (it + 1 < total) {
                int n = (it + 1) / per;
                dkv2_stage<D, KT>(tiles + ((it + 1) % 2) * TB, qkv, dout16, lse2, drow, kv.b, kv.h0 + n,
                                  k0 + (it + 1 - n * per) * KT, T, C, NH, ld);
                cp_async_commit();
            }
            const S *qs = reinterpret_cast<const S *>(tiles + (it % 2) * TB), *gs = qs + KT * LD;
            const float *lse_s = reinterpret_cast<const float *>(gs + KT * LD);
            dkv_tile<D, S, KT>(dk, dv, ks + warp * 16 * LD, vs + warp * 16 * LD, qs, gs, lse_s, lse_s + KT, j0,
                               k0 + it % per * KT, lane, T, scale2);
        }
    } else {
        S *qs = vs + ROWS * LD, *gs = qs + KT * LD;
        float *lse_s = reinterpret_cast<float *>(gs + KT * LD), *drow_s = lse_s + KT; /* lse in base 2 */
        const S *q = rows + (size_t)kv.h0 * D;
        const float *dy = dout + (size_t)kv.b * T * C + (size_t)kv.h0 * D;
        size_t bh = (size_t)kv.b * NH + kv.h0;
        for (int n = kv.h1 - kv.h0; n > 0; n--, q += D, dy += D, bh++) {
            const float *lh = lse + bh * T, *dh = drow + bh * T;
            for (int t0 = k0; t0 < T; t0 += KT) {
                __syncthreads(); /* every warp is done with the previous tile, of this head or the last */
                stage<D, KT>(qs, q, ld, t0, T);
                stage<D, KT>(gs, dy, C, t0, T);
                if (threadIdx.x < KT) {
                    int t = t0 + threadIdx.x;
                    lse_s[threadIdx.x] = t < T ? lh[t] * LOG2E : 0.0f;
                    drow_s[threadIdx.x] = t < T ? dh[t] : 0.0f;
                }
                __syncthreads();
                dkv_tile<D, S, KT>(dk, dv, ks + warp * 16 * LD, vs + warp * 16 * LD, qs, gs, lse_s, drow_s, j0, t0,
                                   lane, T, scale2);
            }
        }
    }
    if constexpr (SPLIT) {
        size_t kvw = 2 * (size_t)NKV * D;
        float *pk = part + ((size_t)kv.split * B + kv.b) * T * kvw + (size_t)kv.g * D;
        store_rows<NO>(pk, kvw, dk, scale, j0, T);
        store_rows<NO>(pk + (size_t)NKV * D, kvw, dv, 1.0f, j0, T);
    } else {
        S *dkh = dqkv + (size_t)kv.b * T * ld + C + (size_t)kv.g * D;
        store_rows<NO>(dkh, ld, dk, scale, j0, T);
        store_rows<NO>(dkh + (size_t)NKV * D, ld, dv, 1.0f, j0, T);
    }
}

/* dkv2's inputs (on trial): dout (n values, n a multiple of 8) rounded to S as dkv's stage rounds
 * it, into dout16, and lse (rows) in base 2 as dkv scales it, into lse2 */
template <typename S>
__global__ static void dkv2_prep_kernel(S *dout16, float *lse2, const float *dout, const float *lse, size_t n8,
                                        size_t rows)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8 || i < rows; i += stride) {
        if (i < n8) {
            const float4 *src = reinterpret_cast<const float4 *>(dout + i * 8);
            float4 a = src[0], b = src[1];
            reinterpret_cast<uint4 *>(dout16)[i] =
                make_uint4(pack2<S>(a.x, a.y), pack2<S>(a.z, a.w), pack2<S>(b.x, b.y), pack2<S>(b.z, b.w));
        }
        if (i < rows) lse2[i] = lse[i] * LOG2E;
    }
}

/* dq's rows: the lane's two rows' lse (base 2) and Drow */
__device__ static inline void dq_rows(float (&lr)[2], float (&dr)[2], const float *lse, const float *drow, size_t bh,
                                      int r0, int lane, int T)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int t = r0 + dt_mma_acc_row(lane, 2 * h);
        lr[h] = t < T ? lse[bh * T + t] * LOG2E : 0.0f;
        dr[h] = t < T ? drow[bh * T + t] : 0.0f;
    }
}

/* One key tile's share of a warp's dQ (dq's and dq2's): S = Q K^T, dP = dO V^T, dS = P (dP - Drow),
 * dQ += dS K; q and g the warp's 16 rows of Q and dO, ks and vs the tile of KT keys from k0 */
template <int D, typename S, int KT>
__device__ static inline void dq_tile(float (&dq)[D / 8][4], const S *q, const S *g, const S *ks, const S *vs,
                                      const float (&lr)[2], const float (&dr)[2], int r0, int k0, int lane, int T,
                                      float scale2)
{
    constexpr int LD = D + PAD, NS = KT / 8, NO = D / 8;
    float s[NS][4], dp[NS][4];
    zero(s);
    zero(dp);
    product<S, D / 16, NS, LD>(s, q, ks);
    product<S, D / 16, NS, LD>(dp, g, vs);
#pragma unroll
    for (int j = 0; j < NS; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int row = r0 + dt_mma_acc_row(lane, i), key = k0 + j * 8 + dt_mma_acc_col(lane, i);
            float p = key <= row && row < T ? exp2f(s[j][i] * scale2 - lr[i / 2]) : 0.0f;
            dp[j][i] = p * (dp[j][i] - dr[i / 2]);
        }
    product_acc<S, NS, NO, LD>(dq, dp, ks);
}

/* dQ of the block's 64 queries, over the key tiles up to its last query. ASYNC: dq on trial (dq2,
 * plan.h), the key and value tiles staged by cp.async into two buffers, the next pair copied while
 * the warps work on the current one (the forward's loop), the same sums in the same order; without,
 * each tile staged by all the threads between two barriers. Q and dO (converted from fp32) are
 * staged once either way. */
template <int D, typename S, bool ASYNC>
__global__ static void __launch_bounds__(WARPS * 32)
    attention_tc_dq_kernel(S *dqkv, const float *dout, const S *qkv, const float *lse, const float *drow, int BH,
                           int NH, int NKV, int T, int C, float scale, float scale2)
{
    constexpr int KT = dt_attn_tc_kt(ASYNC ? DT_ATTN_TC_DQ2 : DT_ATTN_TC_DQ, D), LD = D + PAD, NO = D / 8;
    /* Q, dO, then a K tile and a V tile (ASYNC: two buffers, each a K tile then a V tile) */
    S *qs = reinterpret_cast<S *>(tc_smem), *gs = qs + ROWS * LD, *buf = gs + ROWS * LD;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    size_t ld = C + 2 * (size_t)NKV * D; /* dt_attn_width */
    tc_head<S> hd = tc_head_of<D>(qkv, ld, BH, NH, NKV, T, C);
    const S *q = hd.q, *k = hd.k, *v = hd.v;
    const float *dy = dout + (size_t)hd.b * T * C + (size_t)hd.h * D;
    int q0 = hd.blk * ROWS, r0 = q0 + warp * 16, end = min(q0 + ROWS, T);

    if constexpr (ASYNC) {
        stage_async<D, KT>(buf, k, ld, 0, T);
        stage_async<D, KT>(buf + KT * LD, v, ld, 0, T);
        cp_async_commit();
    }
    stage<D, ROWS>(qs, q, ld, q0, T);
    stage<D, ROWS>(gs, dy, C, q0, T);
    float lr[2], dr[2]; /* the lane's two rows' lse (base 2) and Drow */
    dq_rows(lr, dr, lse, drow, hd.bh, r0, lane, T);
    float dq[NO][4];
    zero(dq);
    for (int k0 = 0, it = 0; k0 < end; k0 += KT, it++) {
        const S *ks = buf, *vs = buf + KT * LD;
        if constexpr (ASYNC) { /* (the first time, Q and dO, every thread's, are in shared memory too) */
            ks = kv_tiles<D, KT>(buf, k, v, ld, k0, end, it, T);
            vs = ks + KT * LD;
        } else {
            __syncthreads(); /* every warp is done with the previous tile */
            stage<D, KT>(buf, k, ld, k0, T);
            stage<D, KT>(buf + KT * LD, v, ld, k0, T);
            __syncthreads();
        }
        dq_tile<D, S, KT>(dq, qs + warp * 16 * LD, gs + warp * 16 * LD, ks, vs, lr, dr, r0, k0, lane, T, scale2);
        if constexpr (ASYNC) __syncthreads(); /* every warp is done with this buffer before it is refilled */
    }
    store_rows<NO>(dqkv + (size_t)hd.b * T * ld + (size_t)hd.h * D, ld, dq, scale, r0, T);
}

// ---------------------------------------------------------------- launchers

/* kernel's dynamic shared memory: bytes, opted into past the 48 KiB a block gets without asking
 * (per device, so on every launch; the call is cheap) */
template <typename K>
static cudaError_t smem_for(K kernel, int bytes)
{
    if (bytes <= DT_ATTN_TC_STATIC_SMEM) return cudaSuccess;
    return cudaFuncSetAttribute(reinterpret_cast<const void *>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                bytes);
}

template <int D, typename S>
static cudaError_t forward_tc(S *out, float *lse, const S *qkv, int B, int T, int C, int NH, int NKV)
{
    unsigned grid = dt_attn_tc_grid(B, T, NH);
    if (!grid) return cudaErrorInvalidValue;
    constexpr int bytes = dt_attn_tc_smem(DT_ATTN_TC_FWD, D);
    cudaError_t e = smem_for(attention_tc_forward_kernel<D, S>, bytes);
    if (e != cudaSuccess) return e;
    float scale2 = 1.0f / sqrtf((float)D) * LOG2E;
    attention_tc_forward_kernel<D, S><<<grid, WARPS * 32, bytes>>>(out, lse, qkv, B * NH, NH, NKV, T, C, scale2);
    return cudaGetLastError();
}

/* the dK, dV kernel of KIND for a split group (part) or not, with its shared memory opted into */
template <int D, typename S, int KIND, typename... A>
static cudaError_t dkv_launch(float *part, unsigned grid, A... args)
{
    constexpr int bytes = dt_attn_tc_smem(KIND, D);
    auto k = part ? attention_tc_dkv_kernel<D, S, true, KIND> : attention_tc_dkv_kernel<D, S, false, KIND>;
    cudaError_t e = smem_for(k, bytes);
    if (e != cudaSuccess) return e;
    k<<<grid, WARPS * 32, bytes>>>(args...);
    return cudaGetLastError();
}

/* dK and dV: dkv, or with work (dkv2 or dkv3 on trial: plan.h's dt_attn_dkv2_scratch floats) dkv2
 * or dkv3 after dkv2_prep has put lse2 and dout16 there */
template <int D, typename S>
static cudaError_t dkv_tc(S *dqkv, float *part, int splits, const float *dout, const S *qkv, const float *lse,
                          const float *drow, float *work, int B, int T, int C, int NH, int NKV)
{
    unsigned grid = dt_attn_tc_grid(B, T, NKV * splits);
    float scale = 1.0f / sqrtf((float)D), scale2 = scale * LOG2E;
    cudaError_t e;
    if (!work)
        return dkv_launch<D, S, DT_ATTN_TC_DKV>(part, grid, dqkv, part, dout, (const S *)NULL, qkv, lse,
                                                (const float *)NULL, drow, B, NH, NKV, splits, T, C, scale, scale2);
    size_t rows = (size_t)B * NH * T, n8 = (size_t)B * T * C / 8;
    uintptr_t at = dt_attn_dkv2_at((uintptr_t)work, 0);
    float *lse2 = reinterpret_cast<float *>(at);
    S *dout16 = reinterpret_cast<S *>(dt_attn_dkv2_dout(at, B, T, NH));
    size_t most = n8 > rows ? n8 : rows, blocks = (most + 255) / 256;
    dkv2_prep_kernel<S><<<(unsigned)(blocks < 8192 ? blocks : 8192), 256>>>(dout16, lse2, dout, lse, n8, rows);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    if constexpr (D == 64) { /* (at 128 dkv2's tiles are 32 rows already) */
        if (dt_cuda_tries() & DT_CUDA_TRY_DKV3)
            return dkv_launch<D, S, DT_ATTN_TC_DKV3>(part, grid, dqkv, part, (const float *)NULL, (const S *)dout16,
                                                     qkv, (const float *)NULL, (const float *)lse2, drow, B, NH, NKV,
                                                     splits, T, C, scale, scale2);
    }
    return dkv_launch<D, S, DT_ATTN_TC_DKV2>(part, grid, dqkv, part, (const float *)NULL, (const S *)dout16, qkv,
                                             (const float *)NULL, (const float *)lse2, drow, B, NH, NKV, splits, T, C,
                                             scale, scale2);
}

template <int D, typename S>
static cudaError_t backward_tc(S *dqkv, float *part, int splits, const float *dout, const S *qkv, const float *lse,
                               const float *drow, float *work, int B, int T, int C, int NH, int NKV)
{
    /* dkv's grid, NKV splits heads, is no larger than dq's */
    unsigned grid = dt_attn_tc_grid(B, T, NH);
    if (!grid) return cudaErrorInvalidValue;
    float scale = 1.0f / sqrtf((float)D), scale2 = scale * LOG2E;
    constexpr int dq_bytes = dt_attn_tc_smem(DT_ATTN_TC_DQ, D);
    cudaError_t e = dkv_tc<D>(dqkv, part, splits, dout, qkv, lse, drow, work, B, T, C, NH, NKV);
    if (e != cudaSuccess) return e;
    if (dt_cuda_tries() & DT_CUDA_TRY_DQ2) {
        constexpr int dq2_bytes = dt_attn_tc_smem(DT_ATTN_TC_DQ2, D);
        if ((e = smem_for(attention_tc_dq_kernel<D, S, true>, dq2_bytes)) != cudaSuccess) return e;
        attention_tc_dq_kernel<D, S, true>
            <<<grid, WARPS * 32, dq2_bytes>>>(dqkv, dout, qkv, lse, drow, B * NH, NH, NKV, T, C, scale, scale2);
        return cudaGetLastError();
    }
    if ((e = smem_for(attention_tc_dq_kernel<D, S, false>, dq_bytes)) != cudaSuccess) return e;
    attention_tc_dq_kernel<D, S, false>
        <<<grid, WARPS * 32, dq_bytes>>>(dqkv, dout, qkv, lse, drow, B * NH, NH, NKV, T, C, scale, scale2);
    return cudaGetLastError();
}

/* the shapes the entry points take, beyond dt_cuda_attention_tc_takes: C = NH hs, whole groups */
static bool tc_shape(int B, int T, int C, int NH, int NKV, int hs)
{
    return B > 0 && T > 0 && C == hs * NH && NKV > 0 && NH % NKV == 0;
}

cudaError_t dt_cuda_attention_tc_forward(void *out, float *lse, const void *qkv, int at, int B, int T, int C, int NH,
                                         int NKV)
{
    int hs = NH > 0 ? C / NH : 0;
    if (!dt_cuda_attention_tc_takes(at, hs, out, qkv, NULL) || !tc_shape(B, T, C, NH, NKV, hs))
        return cudaErrorInvalidValue;
    if (at == DT_CUDA_BF16) {
        __nv_bfloat16 *o = (__nv_bfloat16 *)out;
        const __nv_bfloat16 *x = (const __nv_bfloat16 *)qkv;
        return hs == 64 ? forward_tc<64>(o, lse, x, B, T, C, NH, NKV) : forward_tc<128>(o, lse, x, B, T, C, NH, NKV);
    }
    __half *o = (__half *)out;
    const __half *x = (const __half *)qkv;
    return hs == 64 ? forward_tc<64>(o, lse, x, B, T, C, NH, NKV) : forward_tc<128>(o, lse, x, B, T, C, NH, NKV);
}

cudaError_t dt_cuda_attention_tc_backward(void *dqkv, float *part, int splits, const float *dout, const void *qkv,
                                          const float *lse, const float *drow, float *work, int at, int B, int T, int C,
                                          int NH, int NKV)
{
    int hs = NH > 0 ? C / NH : 0;
    if (!dt_cuda_attention_tc_takes(at, hs, dqkv, dout, qkv) || !tc_shape(B, T, C, NH, NKV, hs) || splits < 1 ||
        (NH / NKV) % splits || (splits > 1) != (part != NULL))
        return cudaErrorInvalidValue;
    if (at == DT_CUDA_BF16) {
        __nv_bfloat16 *d = (__nv_bfloat16 *)dqkv;
        const __nv_bfloat16 *x = (const __nv_bfloat16 *)qkv;
        return hs == 64 ? backward_tc<64>(d, part, splits, dout, x, lse, drow, work, B, T, C, NH, NKV)
                        : backward_tc<128>(d, part, splits, dout, x, lse, drow, work, B, T, C, NH, NKV);
    }
    __half *d = (__half *)dqkv;
    const __half *x = (const __half *)qkv;
    return hs == 64 ? backward_tc<64>(d, part, splits, dout, x, lse, drow, work, B, T, C, NH, NKV)
                    : backward_tc<128>(d, part, splits, dout, x, lse, drow, work, B, T, C, NH, NKV);
}
