/*
 * plan.h - the host-side decisions of the CUDA kernels, in plain C so that a unit test checks them
 * on any machine (tests/unit/test_cuda_plan.c): how the fused attention's grid covers the rows,
 * what its blocks keep in shared memory, and how kernels.h's row-major matmuls become cuBLASLt's
 * column-major gemms. attention.cu and matmul.c take their numbers from here, nowhere else.
 */
#ifndef DT_CUDA_PLAN_H
#define DT_CUDA_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include "core/half.h" /* DT_HD: host and device */

/* what the kernels' templates use as compile-time constants is constexpr in C++ */
#ifdef __cplusplus
#define DT_CONSTEXPR constexpr
#else
#define DT_CONSTEXPR
#endif

/* ---- fused attention */
#define DT_ATTN_KT 32   /* rows of a shared tile: one per lane */
#define DT_ATTN_WARPS 4 /* per block */

/* the head size padded to what a kernel instance holds (32, 64, 128), 0 past 128 */
DT_HD static inline int dt_attn_padded(int hs) { return hs <= 32 ? 32 : hs <= 64 ? 64 : hs <= 128 ? 128 : 0; }
/* own rows per warp: fewer at D = 128, where each row takes 4 registers per lane */
DT_HD static DT_CONSTEXPR inline int dt_attn_rows_per_warp(int D) { return D == 128 ? 4 : 8; }
DT_HD static DT_CONSTEXPR inline int dt_attn_rows_per_block(int D) { return DT_ATTN_WARPS * dt_attn_rows_per_warp(D); }
/* blocks of own rows per head */
DT_HD static inline int dt_attn_blocks_per_head(int T, int D)
{
    int r = dt_attn_rows_per_block(D);
    return (int)(((long long)T + r - 1) / r);
}
/* the grid: every head's blocks, in one dimension; 0 when past gridDim.x's limit (2^31 - 1) */
static inline unsigned dt_attn_grid(int B, int T, int NH, int D)
{
    size_t n = (size_t)B * (size_t)NH * (size_t)dt_attn_blocks_per_head(T, D);
    return n <= 0x7fffffffu ? (unsigned)n : 0;
}
/* Block `block`'s head (of BH) and its block of own rows. Heaviest first: the forward's and dq's
 * last query blocks see the most keys (last_first), dkv's first key blocks are seen by the most
 * queries. */
DT_HD static inline void dt_attn_block(unsigned block, int BH, int nblk, bool last_first, int *bh, int *blk)
{
    *bh = (int)(block % (unsigned)BH);
    int i = (int)(block / (unsigned)BH);
    *blk = last_first ? nblk - 1 - i : i;
}
/* static shared memory of a block: two tiles of KT x (D + 1) floats (the extra column keeps the
 * lanes on different banks), and dkv's per-query lse and Drow */
#define DT_ATTN_SMEM(D, dkv) ((int)sizeof(float) * (2 * DT_ATTN_KT * ((D) + 1) + ((dkv) ? 2 * DT_ATTN_KT : 0)))

/* ---- the matmuls as cuBLASLt gemms */

/* the buffers of kernels.h's matmuls */
enum dt_mm_operand { DT_MM_INP, DT_MM_WEIGHT, DT_MM_OUT, DT_MM_DOUT, DT_MM_DINP, DT_MM_DWEIGHT };

/* One column-major product D(m,n) = op(A)(m,k) . op(B)(k,n) + beta D: op(X) = X^T when tX; X is
 * stored (rows, cols) column-major with leading dimension ldX, rows = tX ? k : m for A. */
struct dt_gemm_plan {
    enum dt_mm_operand a, b, d;
    bool ta, tb;
    int m, n, k, lda, ldb, ldd;
    float beta;
};

/*
 * kernels.h's matmuls in cuBLASLt's terms. A row-major (R,K) matrix is a column-major (K,R) one,
 * so each product is taken transposed:
 *   forward:  out^T (OC,BT) = weight (OC,C) . inp^T (C,BT)            weight is stored (C,OC)
 *   backward: dinp^T (C,BT) += weight^T (C,OC) . dout^T (OC,BT)
 *             dweight^T (C,OC) += inp^T (C,BT) . dout (BT,OC)         dout is stored (OC,BT)
 * Returns how many plans it wrote (1 forward, 2 backward).
 */
static inline struct dt_gemm_plan dt_gemm_plan_of(enum dt_mm_operand a, enum dt_mm_operand b, enum dt_mm_operand d,
                                                  bool ta, bool tb, int m, int n, int k, int lda, int ldb, int ldd,
                                                  float beta)
{
    struct dt_gemm_plan p;
    p.a = a, p.b = b, p.d = d, p.ta = ta, p.tb = tb, p.m = m, p.n = n, p.k = k;
    p.lda = lda, p.ldb = ldb, p.ldd = ldd, p.beta = beta;
    return p;
}

static inline int dt_matmul_plans(bool backward, int BT, int C, int OC, struct dt_gemm_plan out[2])
{
    if (!backward) {
        out[0] = dt_gemm_plan_of(DT_MM_WEIGHT, DT_MM_INP, DT_MM_OUT, true, false, OC, BT, C, C, C, OC, 0.0f);
        return 1;
    }
    out[0] = dt_gemm_plan_of(DT_MM_WEIGHT, DT_MM_DOUT, DT_MM_DINP, false, false, C, BT, OC, C, OC, C, 1.0f);
    out[1] = dt_gemm_plan_of(DT_MM_INP, DT_MM_DOUT, DT_MM_DWEIGHT, false, true, C, OC, BT, C, OC, C, 1.0f);
    return 2;
}

#endif
