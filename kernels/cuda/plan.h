/*
 * plan.h - the host-side decisions of the CUDA kernels, in plain C so that a unit test checks them
 * on any machine (tests/unit/test_cuda_plan.c): how the fused attention's grid covers the rows,
 * how backward splits a key/value head's group of query heads among blocks and the scratch that
 * takes, what its blocks keep in shared memory (and the tensor-core attention's, with its mma
 * fragments: which lane holds or addresses which element), how kernels.h's row-major matmuls
 * become cuBLASLt's column-major gemms (the FP8 ones in the "TN" layout), and which values of an
 * FP8 cast's tile each thread reads and writes. attention.cu, fp8.cu and matmul.c take their numbers
 * from here, nowhere else.
 */
#ifndef DT_CUDA_PLAN_H
#define DT_CUDA_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "core/half.h" /* DT_HD: host and device */

/* what the kernels' templates use as compile-time constants is constexpr in C++ */
#ifdef __cplusplus
#define DT_CONSTEXPR constexpr
#else
#define DT_CONSTEXPR
#endif

/* ---- the logits' rows: a walk along row i of a block-major (BT, V) buffer (kernels.h: vocabulary
 * blocks of vb columns, each holding all BT rows) in steps of a block's threads, without a division
 * per element: the vocabulary block moves on when the column leaves it (one step may cross
 * several blocks when vb is smaller than the step). Columns must be visited in increasing order. */
struct dt_row_walk {
    int v0, n;   /* the current vocabulary block: its first column and width */
    size_t base; /* where row i of it starts */
};
DT_HD static inline struct dt_row_walk dt_row_start(int i, int V, int vb)
{
    int n = V < vb ? V : vb;
    struct dt_row_walk w = {0, n, (size_t)i * n};
    return w;
}
DT_HD static inline size_t dt_row_at(struct dt_row_walk *w, int v, int i, int BT, int V, int vb)
{
    while (v >= w->v0 + w->n) {
        w->v0 += vb;
        w->n = V - w->v0 < vb ? V - w->v0 : vb;
        w->base = (size_t)BT * w->v0 + (size_t)i * w->n;
    }
    return w->base + (size_t)(v - w->v0);
}

/* xent2's walk: row i's full vocabulary blocks (V / vb of them) as one run of packs of E columns, so
 * that all of a block's threads have work whatever vb (a 2048-column block is 256 bf16 packs, and
 * xent2 runs 1024 threads a row); pack j's first column into *v, and where it lives. The blocks' rows
 * start on 16 bytes when the logits do and vb is a multiple of E (the caller checks); the last,
 * partial block is walked apart. */
DT_HD static inline size_t dt_xent2_pack(int j, int i, int BT, int vb, int E, int *v)
{
    int per = vb / E, s = j / per, k = (j - s * per) * E;
    *v = s * vb + k;
    return (size_t)BT * s * vb + (size_t)i * vb + (size_t)k;
}

/* softmax_xent's dynamic shared memory for a row of V logits of esz bytes kept there, beside the
 * kernel's static_bytes, under the device's per-block opt-in limit optin: V esz rounded up to 16
 * bytes, or 0 when the row does not fit (the kernel then reads the row from global memory in each
 * of its passes) */
static inline size_t dt_xent_row_bytes(int V, size_t esz, size_t static_bytes, size_t optin)
{
    size_t bytes = ((size_t)V * esz + 15) / 16 * 16;
    return bytes + static_bytes <= optin ? bytes : 0;
}

/* the rows of a reduction over rows summed into one partial (ops.h: layernorm's dweight and dbias, a
 * bias's column sums), cpu.h's DT_ROW_BLOCK */
#define DT_CUDA_ROW_BLOCK 64
/* the floats of partial sums one such reduction over (BT, C) takes: a row of C a block of rows */
static inline size_t dt_cuda_row_partials(int64_t BT, int64_t C)
{
    return BT > 0 && C > 0 ? (size_t)((BT + DT_CUDA_ROW_BLOCK - 1) / DT_CUDA_ROW_BLOCK) * (size_t)C : 0;
}

/* ---- The module's own scratch (matmul.h's slots) as a training step grows it, in bytes, for dtrun
 * check --memory (the activations' arena and attention's scratch are the model's, planned apart):
 *   - the row blocks' partial sums, partial_width floats a block: a layernorm's two of width C and
 *     a bias's of its output width (GPT), an RMSNorm's one (Llama, which has no biases);
 *   - where the matmuls get their weights in fp32 under 16-bit compute (ZeRO-3's gathered units), the
 *     widest weight (widest_weight elements) rounded to 16 bits;
 *   - under fp8-mixed the codes, a byte each, of the widest operands: an input (BT x widest_in), a
 *     weight, an output gradient plain and transposed (2 BT x widest_out);
 *   - where a width is no multiple of 8 (unaligned: cuBLASLt's 16-byte kernels do not take it), a
 *     biased output's fp32 sums before their one rounding (BT x biased_out, matmul.c's
 *     aligned_forward);
 *   - under rows2 (on trial) the sorted entries of the sorted_rows rows a backward adds into the
 *     token table, keys and indices twice over and the radix sort's as much again, 32 bytes a row;
 *   - the reductions' partials, a multi-tensor AdamW's slice table and the like: under 64 KiB, in the
 *     runtime's margin.
 * Not planned: gelu's (on trial) fp32 dinp where cuBLASLt has no DGELU algorithm (BT x 4C floats
 * in place of the arena's). */
struct dt_cuda_scratch_shape {
    int64_t BT, partial_width, widest_in, widest_out, widest_weight, biased_out, sorted_rows;
    bool round_weights, fp8, unaligned;
};
static inline int64_t dt_cuda_scratch_bytes(const struct dt_cuda_scratch_shape *s)
{
    int64_t bytes = 4 * (int64_t)dt_cuda_row_partials(s->BT, s->partial_width) + 32 * s->sorted_rows;
    if (s->round_weights) bytes += 2 * s->widest_weight;
    if (s->fp8) bytes += s->BT * s->widest_in + s->widest_weight + 2 * s->BT * s->widest_out;
    if (s->unaligned) bytes += 4 * s->BT * s->biased_out;
    return bytes;
}

/* ---- kernels on trial (#41): alternatives to kernels in use that a device session times one at
 * a time against them, chosen with DTRUN_CUDA_TRY, a comma-separated list of these names or "all":
 *   xent2     softmax_xent without its row in shared memory: 1024 threads a row, three passes over
 *             the row in 16-byte packs (the second and third from L2), the same arithmetic
 *   rows2     rows_add through a stable radix sort of the entries by row (below)
 *   convert2  convert and accumulate in 16-byte packs where both buffers are aligned to them
 *   gelu      GPT's MLP with GELU in cuBLASLt's epilogues: GELU_AUX_BIAS forward, DGELU backward
 *             (kernels.h's gelu_fused; matmul.c)
 *   norm2     the gradient's sum of squares and inf/nan count with the type as a template argument,
 *             16-byte loads and 1024 blocks (the kernel in use: 256 blocks of 2-byte loads through a
 *             type switch)
 *   rms2      RMSNorm's forward and dinp a warp per row, as layernorm's (in use: a block per row and
 *             a shared-memory tree with eight barriers)
 *   resid2    the residual add (fp32 plus the activation type) 8 elements a thread in packs
 *   dq2       attention backward's dq on tensor cores with its key and value tiles double-buffered
 *             by cp.async, as the forward's (attention_tc.cu)
 *   dkv2      attention backward's dK, dV on tensor cores with its query and dO tiles (and their lse
 *             and Drow) double-buffered by cp.async: dout rounded to 16 bits and lse taken to base 2
 *             by a kernel before it, as dkv rounds and scales them while it stages them (below)
 *   kv1       a grouped-query group's dK, dV summed in one dkv block whatever the shape, never split
 *             among blocks (below): the split path timed against it where it is taken; not in "all"
 *   swiglu2   SwiGLU forward and backward 8 columns a thread in packs, a row a grid row: no 64-bit
 *             index arithmetic per element (in use: a thread an element, its row by division)
 *   dkv3      dkv2 with tiles of 32 queries at head size 64 (64: 128 registers, four blocks a
 *             multiprocessor against three); where both are named, dkv3
 *   adam2     the optimizer's multi-tensor AdamW with the types fixed at compile time, 8 elements a
 *             thread in packs (in use: one element a thread, every load through a type switch)
 *   colsum2   the row blocks' partial sums (layernorm's dweight and dbias, RMSNorm's dweight, a bias's
 *             column sums) a 16-byte pack of channels a thread, each channel's adds as in use: the
 *             same bits (in use: a channel a thread, 2- or 4-byte loads)
 *   bgradb    a bias's gradient in the weight gradient's gemm, cuBLASLt's BGRADB epilogue (16-bit
 *             compute): the sums in cuBLASLt's order, not the CPU's (in use: column sums after it)
 * What wins becomes the kernel in use, and its flag goes. */
enum {
    DT_CUDA_TRY_XENT2 = 1u,
    DT_CUDA_TRY_ROWS2 = 2u,
    DT_CUDA_TRY_CONVERT2 = 4u,
    DT_CUDA_TRY_GELU = 8u,
    DT_CUDA_TRY_NORM2 = 16u,
    DT_CUDA_TRY_RMS2 = 32u,
    DT_CUDA_TRY_RESID2 = 64u,
    DT_CUDA_TRY_DQ2 = 128u,
    DT_CUDA_TRY_DKV2 = 256u,
    DT_CUDA_TRY_KV1 = 512u,
    DT_CUDA_TRY_SWIGLU2 = 1024u,
    DT_CUDA_TRY_ADAM2 = 2048u,
    DT_CUDA_TRY_DKV3 = 4096u,
    DT_CUDA_TRY_COLSUM2 = 8192u,
    DT_CUDA_TRY_BGRADB = 16384u
};
/* "all": every trial named below but kv1, which replaces no kernel but takes the split path away,
 * and dkv3, which dkv2 would give way to */
#define DT_CUDA_TRY_ALL (((1u << DT_CUDA_TRY_COUNT) - 1u) & ~(unsigned)(DT_CUDA_TRY_KV1 | DT_CUDA_TRY_DKV3))
/* their names, flag 1 << i */
static const char *const dt_cuda_try_names[] = {"xent2", "rows2", "convert2", "gelu", "norm2",
                                                 "rms2",  "resid2", "dq2",     "dkv2", "kv1", "swiglu2", "adam2",
                                                 "dkv3",  "colsum2", "bgradb"};
#define DT_CUDA_TRY_COUNT ((int)(sizeof dt_cuda_try_names / sizeof dt_cuda_try_names[0]))
/* room for all of them as dt_cuda_tries_str lists them: under 16 bytes a name with its ", " */
#define DT_CUDA_TRY_STR (16 * DT_CUDA_TRY_COUNT)

/* The flags DTRUN_CUDA_TRY's value names (spaces around a name are skipped): 0, or -1 with the name
 * it does not know in bad */
static inline int dt_cuda_tries_parse(const char *s, unsigned *flags, char *bad, size_t n)
{
    *flags = 0;
    while (s && *s) {
        while (*s == ' ') s++;
        size_t len = 0, end;
        while (s[len] && s[len] != ',') len++;
        end = len;
        while (end > 0 && s[end - 1] == ' ') end--;
        unsigned f = 0;
        if (end == 3 && s[0] == 'a' && s[1] == 'l' && s[2] == 'l') f = DT_CUDA_TRY_ALL;
        for (int i = 0; i < DT_CUDA_TRY_COUNT && !f; i++) {
            size_t k = 0;
            while (k < end && dt_cuda_try_names[i][k] == s[k]) k++;
            if (k == end && !dt_cuda_try_names[i][k]) f = 1u << i;
        }
        if (!f) {
            size_t k = end < n ? end : n - 1;
            for (size_t i = 0; i < k; i++) bad[i] = s[i];
            bad[k] = 0;
            return -1;
        }
        *flags |= f;
        s += len + (s[len] == ',');
    }
    return 0;
}

/* the names of flags joined by ", " into buf ("" for none) */
static inline void dt_cuda_tries_str(unsigned flags, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < DT_CUDA_TRY_COUNT; i++) {
        if (!(flags & (1u << i))) continue;
        int w = snprintf(buf + at, n - at, "%s%s", at ? ", " : "", dt_cuda_try_names[i]);
        if (w < 0 || (size_t)w >= n - at) return;
        at += (size_t)w;
    }
}

/* ---- a table's gradient by sorted rows (rows_add under rows2). Entry i's key is its table row less
 * r0 where dst holds part of that row (r0..r1: the rows dst overlaps), else the sentinel
 * r1 - r0 + 1, which sorts last. A stable radix sort of (key, i) over dt_rows_key_bits bits puts
 * each row's entries together in index order; the block of sorted position k owns a row when k
 * starts a run of one key other than the sentinel, and adds that run's entries in order: the CPU's
 * order, so its bits, and every block's work its own row's (the kernel in use has every block walk
 * all the entries). */
DT_HD static inline unsigned dt_rows_key(int row, size_t r0, size_t r1)
{
    return row >= 0 && (size_t)row >= r0 && (size_t)row <= r1 ? (unsigned)((size_t)row - r0) : (unsigned)(r1 - r0 + 1);
}
/* the bits that hold every key, the sentinel included */
static inline int dt_rows_key_bits(size_t r0, size_t r1)
{
    int b = 1;
    while (b < 32 && (1ull << b) <= (unsigned long long)(r1 - r0 + 1)) b++;
    return b;
}
DT_HD static inline bool dt_rows_run_start(const unsigned *keys, int k, unsigned sentinel)
{
    return keys[k] != sentinel && (k == 0 || keys[k - 1] != keys[k]);
}

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

/* ---- fused attention on tensor cores (attention_tc.cu): bf16 and fp16 activations, head size 64
 * or 128. A block is 4 warps; each warp owns 16 of the block's 64 own rows (one m16 row block of
 * the mma) and walks tiles of KT rows staged in shared memory as 16-bit rows of D + PAD elements. */
#define DT_ATTN_TC_WARPS 4
#define DT_ATTN_TC_ROWS 64 /* a block's own rows: queries in forward and dq, keys in dkv */
/* 16-bit elements after each shared row: a row of 2 (D + 8) bytes keeps ldmatrix's row addresses
 * 16-byte aligned, and its 8 rows of 16 bytes start 4 banks apart (2 (D + 8) / 4 = 4 mod 32 words):
 * the 32 banks once, no conflict */
#define DT_ATTN_TC_PAD 8
/* the three kernels, for the tile and shared memory sizes below, and those on trial (dq2, dkv2 and
 * dkv3: their tiles double-buffered by cp.async, as forward's) */
enum dt_attn_tc_kernel {
    DT_ATTN_TC_FWD,
    DT_ATTN_TC_DKV,
    DT_ATTN_TC_DQ,
    DT_ATTN_TC_DQ2,
    DT_ATTN_TC_DKV2,
    DT_ATTN_TC_DKV3
};

/* the head sizes the tensor-core kernels are instantiated for */
DT_HD static inline bool dt_attn_tc_head(int hs) { return hs == 64 || hs == 128; }
/* Rows of the tiles a block walks (keys in forward and dq, queries in dkv): 64, but 32 in backward
 * at D = 128, where a warp's fp32 accumulators (dK and dV: 2 x 64 per lane) leave room for the
 * scores of 32 columns only (S and dP: 2 x 16 per lane) under 255 registers. A multiple of 16 (the
 * mma's k) that divides DT_ATTN_TC_ROWS, so that dkv's first query tile starts at its first key.
 * dkv3 (on trial): 32 at both, dkv2's register count at 64 brought down to four blocks' 128. */
DT_HD static DT_CONSTEXPR inline int dt_attn_tc_kt(int kernel, int D)
{
    return kernel == DT_ATTN_TC_DKV3 ? 32 : kernel == DT_ATTN_TC_FWD || D <= 64 ? 64 : 32;
}
DT_HD static inline int dt_attn_tc_blocks_per_head(int T)
{
    return (int)(((long long)T + DT_ATTN_TC_ROWS - 1) / DT_ATTN_TC_ROWS);
}
/* the grid, every head's blocks in one dimension (dt_attn_block maps a block to its head and
 * rows); 0 when past gridDim.x's limit */
static inline unsigned dt_attn_tc_grid(int B, int T, int NH)
{
    size_t n = (size_t)B * (size_t)NH * (size_t)dt_attn_tc_blocks_per_head(T);
    return n <= 0x7fffffffu ? (unsigned)n : 0;
}
/* Dynamic shared memory of a block, bytes: forward two K and V tiles (the next pair loads, by
 * cp.async, while the warps work on the current one; the block's Q passes through the first K tile
 * into registers first); dkv its own K and V and a tile of Q and of dO, and the tile's
 * lse and Drow (fp32); dq its own Q and dO and a tile of K and of V; dq2 (on trial) dq's and a
 * second tile of K and of V; dkv2 and dkv3 (on trial) dkv's and a second tile of Q, dO, lse and
 * Drow (a tile's bytes: dt_attn_tc_dkv2_tile). Over 48 KiB (dkv and dq at D = 128: 52480 and 52224;
 * forward at D = 128: 69632; dq2: 55296 and 69632; dkv2: 56320 and 70144; dkv3 at 128: 70144) the
 * launcher opts in (cudaFuncAttributeMaxDynamicSharedMemorySize). */
DT_HD static DT_CONSTEXPR inline int dt_attn_tc_dkv2_tile(int kernel, int D)
{
    return 2 * dt_attn_tc_kt(kernel, D) * 2 * (D + DT_ATTN_TC_PAD) + 2 * dt_attn_tc_kt(kernel, D) * (int)sizeof(float);
}
DT_HD static DT_CONSTEXPR inline int dt_attn_tc_smem(int kernel, int D)
{
    return kernel == DT_ATTN_TC_FWD ? 2 * 2 * dt_attn_tc_kt(kernel, D) * 2 * (D + DT_ATTN_TC_PAD)
           : kernel == DT_ATTN_TC_DQ2
               ? 2 * (DT_ATTN_TC_ROWS + 2 * dt_attn_tc_kt(kernel, D)) * 2 * (D + DT_ATTN_TC_PAD)
           : kernel == DT_ATTN_TC_DKV2 || kernel == DT_ATTN_TC_DKV3
               ? 2 * DT_ATTN_TC_ROWS * 2 * (D + DT_ATTN_TC_PAD) + 2 * dt_attn_tc_dkv2_tile(kernel, D)
               : 2 * (DT_ATTN_TC_ROWS + dt_attn_tc_kt(kernel, D)) * 2 * (D + DT_ATTN_TC_PAD) +
                     (kernel == DT_ATTN_TC_DKV ? 2 * dt_attn_tc_kt(kernel, D) * (int)sizeof(float) : 0);
}
#define DT_ATTN_TC_STATIC_SMEM (48 * 1024) /* what a block gets without opting in */

/* ---- grouped-query heads (kernels.h): a row of qkv holds NH query heads, NKV key heads, NKV value
 * heads of hs = C / NH columns; query head h attends with key/value head h / (NH / NKV). */

/* qkv's (and dqkv's) row, elements */
DT_HD static inline int dt_attn_width(int C, int NH, int NKV) { return C + 2 * NKV * (C / NH); }

/*
 * Backward's dK and dV of a key/value head sum over its group of NH / NKV query heads. A dkv block
 * owns a block of keys of one key/value head and walks its query heads in order, the sums in
 * registers, no atomics. When that leaves too few blocks for the GPU (B NKV blocks of keys, a few
 * for a multi-query model at a small batch) the group is split: split s of S takes query heads
 * [s G / S, (s + 1) G / S) of the group (G = NH / NKV), stores its fp32 sums in scratch, and a last
 * kernel adds the S partials in split order and rounds once. S is the least divisor of G that gives
 * DT_ATTN_KV_BLOCKS blocks of DT_ATTN_TC_ROWS keys (G when none does; 1 for multi-head attention):
 * a function of the shape alone, so the bits are the same on every GPU. It splits only below
 * DT_ATTN_KV_BLOCKS blocks of keys, so the partials (S B T 2 NKV hs floats) stay under
 * 2 S DT_ATTN_KV_BLOCKS DT_ATTN_TC_ROWS hs floats, however large the model.
 */
#define DT_ATTN_KV_BLOCKS 256 /* about two blocks for each SM of the largest GPUs (132 on an H100) */
static inline int dt_attn_kv_splits(int B, int T, int NH, int NKV)
{
    if (B <= 0 || T <= 0 || NKV <= 0 || NH % NKV) return 1;
    int group = NH / NKV;
    long long key_blocks = (long long)B * NKV * dt_attn_tc_blocks_per_head(T);
    for (int s = 1; s < group; s++)
        if (group % s == 0 && key_blocks * s >= DT_ATTN_KV_BLOCKS) return s;
    return group;
}
/* the splits with the kernels on trial (tries, DTRUN_CUDA_TRY's flags): kv1, none */
static inline int dt_attn_kv_splits_tried(unsigned tries, int B, int T, int NH, int NKV)
{
    return tries & DT_CUDA_TRY_KV1 ? 1 : dt_attn_kv_splits(B, T, NH, NKV);
}
/* Floats of backward's scratch for S splits: Drow (B,NH,T), then the S partials of a split group,
 * each shaped as dqkv's key and value columns, (B,T,2 NKV hs) (none when S is 1). 0 for a shape no
 * path takes. (dt_attn_scratch_tried, below: with the splits and the kernels on trial.) */
static inline size_t dt_attn_scratch_s(int B, int T, int C, int NH, int NKV, int S)
{
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || C % NH || NH % NKV) return 0;
    size_t drow = (size_t)B * NH * T, part = (size_t)B * T * 2 * NKV * (C / NH);
    return drow + (S > 1 ? (size_t)S * part : 0);
}
/* What dkv2 (on trial) adds to it, floats: lse in base 2 (B,NH,T), then dout rounded to 16 bits
 * (B,T,C, two a float), each from a 16-byte boundary (cp.async's), with 3 floats of slack to reach
 * the first from wherever the scratch ends (dt_attn_dkv2_at). */
static inline size_t dt_attn_dkv2_scratch(int B, int T, int C, int NH)
{
    size_t lse = (size_t)B * NH * T, dout = ((size_t)B * T * C + 1) / 2;
    return 3 + (lse + 3) / 4 * 4 + dout;
}
/* where dkv2's lse starts in a scratch whose first float is at p: the first 16-byte boundary at or
 * past p + n; and its dout, after the B NH T floats of lse */
static inline uintptr_t dt_attn_dkv2_at(uintptr_t p, size_t n) { return (p + n * 4 + 15) / 16 * 16; }
static inline uintptr_t dt_attn_dkv2_dout(uintptr_t lse, int B, int T, int NH)
{
    return lse + ((size_t)B * NH * T + 3) / 4 * 16;
}
/* whether backward's dK and dV run as dkv2 or dkv3: on trial (tries, DTRUN_CUDA_TRY's flags),
 * activations in 16 bits (lp), and a head size the tensor-core kernels take */
static inline bool dt_attn_dkv2_on(unsigned tries, bool lp, int C, int NH)
{
    return (tries & (DT_CUDA_TRY_DKV2 | DT_CUDA_TRY_DKV3)) && lp && NH > 0 && C % NH == 0 && dt_attn_tc_head(C / NH);
}
/* backward's scratch, floats, with the kernels on trial (tries; 0: those in use): dkv2's after the
 * fused kernels', whose partials kv1 drops */
static inline size_t dt_attn_scratch_tried(unsigned tries, bool lp, int B, int T, int C, int NH, int NKV)
{
    size_t n = dt_attn_scratch_s(B, T, C, NH, NKV, dt_attn_kv_splits_tried(tries, B, T, NH, NKV));
    return n && dt_attn_dkv2_on(tries, lp, C, NH) ? n + dt_attn_dkv2_scratch(B, T, C, NH) : n;
}

/* A dkv block's work: batch row b, key/value head g, split s (of the grid's S) and the query heads
 * [h0, h1) it sums over, its block of keys blk (dt_attn_block's order: first key blocks first). */
struct dt_attn_kv {
    int b, g, split, h0, h1, blk;
};
/* dkv's grid: dt_attn_grid or dt_attn_tc_grid with NKV S heads */
DT_HD static inline struct dt_attn_kv dt_attn_kv_block(unsigned block, int B, int NH, int NKV, int S, int nblk)
{
    struct dt_attn_kv o;
    int i, per = NH / NKV / S;
    dt_attn_block(block, B * NKV * S, nblk, false, &i, &o.blk);
    o.b = i / (NKV * S);
    o.g = i / S % NKV;
    o.split = i % S;
    o.h0 = o.g * (NH / NKV) + o.split * per;
    o.h1 = o.h0 + per;
    return o;
}

/*
 * The fragments of mma.sync.m16n8k16 with 16-bit A and B and fp32 accumulators (PTX ISA, "Matrix
 * Fragments for mma.m16n8k16 with floating point type"), lane = 0..31: accumulator element i
 * (0..3) of a 16 x 8 tile is at row lane/4 + 8 (i/2), column 2 (lane%4) + i%2. A (16 x 16, row)
 * register r holds row lane/4 + 8 (r%2), columns 2 (lane%4) + 8 (r/2) and the next; B (16 x 8,
 * col) register r holds rows 2 (lane%4) + 8 r and the next of column lane/4. So the accumulators of
 * two 8-column tiles, j = 2c and 2c + 1, packed in pairs, are A's registers for the k-columns
 * [16c, 16c + 16): {acc[2c][0,1], acc[2c][2,3], acc[2c+1][0,1], acc[2c+1][2,3]}.
 */
DT_HD static inline int dt_mma_acc_row(int lane, int i) { return lane / 4 + (i / 2) * 8; }
DT_HD static inline int dt_mma_acc_col(int lane, int i) { return 2 * (lane % 4) + i % 2; }
/*
 * ldmatrix.x4 reads four 8 x 8 blocks of 16-bit elements, lanes 8m..8m+7 giving the addresses of
 * block m's 8 rows, and gives each lane one register of each. For a 16 x 16 block of shared rows,
 * the (row, column) of its corner that lane points at:
 *   - A stored [m][k] (row-major), or a pair of B tiles stored [k][n] read with .trans: blocks
 *     top-left, bottom-left, top-right, bottom-right, which are A's registers 0..3, or B's
 *     registers 0, 1 of columns [0, 8) and then 0, 1 of columns [8, 16);
 *   - a pair of B tiles stored [n][k] (bn, read without .trans): top-left, top-right,
 *     bottom-left, bottom-right, B's registers 0, 1 of the first 8 n, then of the next 8.
 */
DT_HD static inline int dt_mma_ldsm_row(int lane, bool bn) { return lane % 8 + (bn ? lane / 16 : lane / 8 % 2) * 8; }
DT_HD static inline int dt_mma_ldsm_col(int lane, bool bn) { return (bn ? lane / 8 % 2 : lane / 16) * 8; }

/* ---- the matmuls as cuBLASLt gemms */

/* the buffers of kernels.h's matmuls, and the transposed copies of the FP8 matmuls' operands */
enum dt_mm_operand {
    DT_MM_INP, DT_MM_WEIGHT, DT_MM_OUT, DT_MM_DOUT, DT_MM_DINP, DT_MM_DWEIGHT,
    DT_MM_INP_T,    /* inp^T (C,BT) row-major */
    DT_MM_WEIGHT_T, /* weight^T (C,OC) */
    DT_MM_DOUT_T,   /* dout^T (OC,BT) */
    DT_MM_OPERANDS
};

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

/*
 * The FP8 matmuls (fp8-mixed). On Ada and Hopper cuBLASLt's FP8 gemms take A transposed and B not
 * ("TN"): both operands stored K-major. The forward is such a gemm as it stands (weight and inp both
 * keep C, its K, contiguous); the backward's two are not, so they read transposed copies, which the
 * quantisation writes beside the plain codes (fp8.cu, as Transformer Engine's cast-transpose does):
 *   forward: out^T (OC,BT) = weight (OC,C) . inp^T (C,BT)          same as dt_matmul_plans'
 *   dgrad:   dinp^T (C,BT) += weight^T (C,OC) . dout^T (OC,BT)     weight^T row-major is stored (OC,C)
 *   wgrad:   dweight^T (C,OC) += inp^T (C,BT) . dout (BT,OC)       inp^T row-major is stored (BT,C),
 *                                                                  dout^T row-major (BT,OC)
 * Every leading dimension is a K (C, OC or BT). Returns how many plans it wrote (1 forward, 2 backward).
 */
static inline int dt_matmul_plans_fp8(bool backward, int BT, int C, int OC, struct dt_gemm_plan out[2])
{
    if (!backward) return dt_matmul_plans(false, BT, C, OC, out);
    out[0] = dt_gemm_plan_of(DT_MM_WEIGHT_T, DT_MM_DOUT, DT_MM_DINP, true, false, C, BT, OC, OC, OC, C, 1.0f);
    out[1] = dt_gemm_plan_of(DT_MM_INP_T, DT_MM_DOUT_T, DT_MM_DWEIGHT, true, false, C, OC, BT, BT, BT, C, 1.0f);
    return 2;
}

/*
 * ---- the FP8 quantisation's cast (fp8.cu): a block of DT_FP8_THREADS threads takes a tile of
 * DT_FP8_TILE x DT_FP8_TILE values of an (R, Cc) operand through shared memory. It reads them a
 * tile row at a time, a warp's 32 threads on 32 adjacent columns (coalesced), and writes their codes
 * 4 bytes a thread: into the plain copy (R, Cc) a tile row at a time, into the transposed one (Cc, R)
 * a tile column at a time, so both stores run along memory. R and Cc must be multiples of 4 (the
 * matmuls ask 16), so that a 4-byte word never crosses the operand's edge. The grid: x the tiles
 * along Cc, y along R.
 */
#define DT_FP8_TILE 64
#define DT_FP8_THREADS 256
#define DT_FP8_PITCH (DT_FP8_TILE + 4) /* bytes of a shared tile row: its words stay 4-byte aligned */
#define DT_FP8_READS (DT_FP8_TILE * DT_FP8_TILE / DT_FP8_THREADS) /* values a thread reads */
#define DT_FP8_WORDS (DT_FP8_TILE / 4)                           /* 4-byte words of a tile line */
#define DT_FP8_WRITES (DT_FP8_TILE * DT_FP8_WORDS / DT_FP8_THREADS) /* words a thread writes, per copy */
/* value j (0 .. DT_FP8_READS - 1) that thread t reads: its tile row and column */
DT_HD static inline int dt_fp8_read_row(int t, int j) { return t / DT_FP8_TILE + j * (DT_FP8_THREADS / DT_FP8_TILE); }
DT_HD static inline int dt_fp8_read_col(int t) { return t % DT_FP8_TILE; }
/* word j (0 .. DT_FP8_WRITES - 1) that thread t writes: word w of tile line l, the bytes 4w .. 4w + 3
 * of tile row l (the plain copy) or of tile column l (the transposed one) */
DT_HD static inline int dt_fp8_write_line(int t, int j)
{
    return t / DT_FP8_WORDS + j * (DT_FP8_THREADS / DT_FP8_WORDS);
}
DT_HD static inline int dt_fp8_write_word(int t) { return t % DT_FP8_WORDS; }

#endif
