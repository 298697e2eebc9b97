/*
 * test_cuda_plan.c - the host-side decisions of the CUDA kernels (kernels/cuda/plan.h), checked on
 * any machine, GPU or not:
 *   - the fused attention's grid covers every (head, row) exactly once, heaviest blocks first, stays
 *     under gridDim.x's limit or says it cannot, and its blocks' shared memory fits 48 KiB;
 *   - the tensor-core attention's (attention_tc.cu) likewise, its tiles and shared memory fit what
 *     the kernels assume and the devices give, and its fragment mapping (which lane points ldmatrix
 *     at which row, which accumulator is which element) computes products: ldmatrix and
 *     mma.m16n8k16 emulated here from the PTX ISA's definitions, run over the mapping as the
 *     kernels use it, against plain loops;
 *   - grouped-query heads: how backward's key/value sums are split among blocks (a divisor of the
 *     group, by the shape alone), the scratch that takes, and dkv's blocks covering every (query
 *     head, key) exactly once with the query head's own key/value head;
 *   - the column-major gemms the matmuls hand cuBLASLt compute kernels.h's row-major products:
 *     each plan is run by a plain host gemm with cuBLAS's conventions (op, stored shape, leading
 *     dimension) and compared with the CPU kernels; the FP8 ones likewise, each in the "TN" layout
 *     Hopper's FP8 gemms take, on the transposed copies their plans name;
 *   - the FP8 cast's threads (fp8.cu), run here block by block over plan.h's mapping: every value of
 *     a tile read once, every code written once, to its place in the plain and the transposed copy;
 *   - softmax_xent's walk along a row of the block-major logits reaches, for every column a thread
 *     visits, the element kernels.h's layout puts there, also where a step crosses several blocks;
 *     xent2's run of packs over the full blocks likewise, every column once; and when a row fits in
 *     shared memory;
 *   - DTRUN_CUDA_TRY's names, and rows2's plan: its keys sorted stably as the radix sort does and its
 *     blocks run here over them give the CPU's rows_add, bit for bit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/rng.h"
#include "dt_test.h"
#include "kernels/cuda/plan.h"
#include "kernels/kernels.h"
#include "model/lm_head.h"

static void attention_grid(void **state)
{
    static const int hs[] = {1, 16, 24, 32, 33, 64, 100, 128};
    static const int T[] = {1, 7, 31, 32, 33, 64, 100, 1024};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
        int D = dt_attn_padded(hs[i]);
        assert_true(D >= hs[i] && D % 32 == 0 && D <= 128);
        assert_true(DT_ATTN_SMEM(D, true) <= 48 * 1024 && DT_ATTN_SMEM(D, false) < DT_ATTN_SMEM(D, true));
        for (size_t j = 0; j < sizeof T / sizeof T[0]; j++) {
            int B = 2, NH = 3, BH = B * NH, rows = dt_attn_rows_per_block(D), nblk = dt_attn_blocks_per_head(T[j], D);
            unsigned grid = dt_attn_grid(B, T[j], NH, D);
            assert_int_equal(grid, (unsigned)(BH * nblk));
            for (int last_first = 0; last_first < 2; last_first++) {
                int *seen = calloc((size_t)BH * T[j], sizeof *seen), prev_blk = last_first ? nblk : -1;
                for (unsigned blk = 0; blk < grid; blk++) {
                    int bh, b;
                    dt_attn_block(blk, BH, nblk, last_first, &bh, &b);
                    assert_true(bh >= 0 && bh < BH && b >= 0 && b < nblk);
                    /* a head's blocks come in the promised order: the first BH blocks of the grid
                     * start every head, then the next row block of each, and so on */
                    if (bh == 0) {
                        assert_int_equal(b, last_first ? prev_blk - 1 : prev_blk + 1);
                        prev_blk = b;
                    }
                    for (int r = b * rows; r < (b + 1) * rows && r < T[j]; r++) seen[(size_t)bh * T[j] + r]++;
                }
                for (size_t r = 0; r < (size_t)BH * T[j]; r++) assert_int_equal(seen[r], 1);
                free(seen);
            }
        }
    }
    assert_int_equal(dt_attn_padded(129), 0);
    /* a grid past 2^31 - 1 blocks is refused, not truncated */
    assert_int_equal(dt_attn_grid(1 << 16, 1 << 16, 64, 128), 0);
}

static void attention_tc_plan(void **state)
{
    (void)state;
    assert_true(dt_attn_tc_head(64) && dt_attn_tc_head(128));
    assert_false(dt_attn_tc_head(32) || dt_attn_tc_head(96) || dt_attn_tc_head(100) || dt_attn_tc_head(256));
    assert_int_equal(DT_ATTN_TC_ROWS, DT_ATTN_TC_WARPS * 16);
    static const int Ds[] = {64, 128}, kernels[] = {DT_ATTN_TC_FWD, DT_ATTN_TC_DKV, DT_ATTN_TC_DQ};
    for (int i = 0; i < 2; i++) {
        int D = Ds[i], row = 2 * (D + DT_ATTN_TC_PAD);
        /* ldmatrix: 16-byte aligned rows; 8 rows of 16 bytes on 8 different groups of 4 banks */
        assert_int_equal(row % 16, 0);
        assert_int_equal(row / 4 % 32, 4);
        for (int k = 0; k < 3; k++) {
            int kt = dt_attn_tc_kt(kernels[k], D), smem = dt_attn_tc_smem(kernels[k], D);
            /* a multiple of the mma's k (and of two 8-column tiles), dividing the block's rows: dkv's
             * query tiles start at its first key, forward's Q fits the K tile */
            assert_true(kt % 16 == 0 && DT_ATTN_TC_ROWS % kt == 0);
            if (kernels[k] == DT_ATTN_TC_FWD) assert_int_equal(kt, DT_ATTN_TC_ROWS);
            /* every tile region starts 16-byte aligned */
            assert_int_equal(kt * row % 16, 0);
            assert_int_equal(DT_ATTN_TC_ROWS * row % 16, 0);
            /* what sm_80 gives a block at most (163 KiB; sm_90: 227 KiB), and within 48 KiB where
             * the launcher does not opt in: D = 64 */
            assert_true(smem <= 163 * 1024);
            assert_int_equal(smem > DT_ATTN_TC_STATIC_SMEM, D == 128);
        }
        /* the sizes the comments promise */
        assert_int_equal(dt_attn_tc_smem(DT_ATTN_TC_FWD, D), D == 64 ? 36864 : 69632);
        if (D == 128) {
            assert_int_equal(dt_attn_tc_smem(DT_ATTN_TC_DKV, D), 52480);
            assert_int_equal(dt_attn_tc_smem(DT_ATTN_TC_DQ, D), 52224);
        }
        /* dq2: dq's and a second key tile and value tile, its tiles dq's, within sm_80's limit (the
         * launcher opts in past 48 KiB at both sizes: 55296 and 69632 bytes) */
        int kt = dt_attn_tc_kt(DT_ATTN_TC_DQ2, D);
        assert_int_equal(kt, dt_attn_tc_kt(DT_ATTN_TC_DQ, D));
        assert_int_equal(dt_attn_tc_smem(DT_ATTN_TC_DQ2, D), dt_attn_tc_smem(DT_ATTN_TC_DQ, D) + 2 * kt * row);
        assert_int_equal(dt_attn_tc_smem(DT_ATTN_TC_DQ2, D), D == 64 ? 55296 : 69632);
        assert_true(dt_attn_tc_smem(DT_ATTN_TC_DQ2, D) <= 163 * 1024);
        /* dkv2: dkv's own K and V, and two of its tiles of Q, dO, lse and Drow, each buffer starting
         * 16-byte aligned (cp.async), within sm_80's limit (56320 and 70144 bytes) */
        kt = dt_attn_tc_kt(DT_ATTN_TC_DKV2, D);
        assert_int_equal(kt, dt_attn_tc_kt(DT_ATTN_TC_DKV, D));
        int tile = dt_attn_tc_dkv2_tile(DT_ATTN_TC_DKV2, D);
        assert_int_equal(tile, 2 * kt * row + 2 * kt * 4);
        assert_int_equal(tile % 16, 0);
        assert_int_equal(dt_attn_tc_smem(DT_ATTN_TC_DKV2, D), 2 * DT_ATTN_TC_ROWS * row + 2 * tile);
        assert_int_equal(dt_attn_tc_smem(DT_ATTN_TC_DKV2, D),
                         dt_attn_tc_smem(DT_ATTN_TC_DKV, D) + 2 * kt * row + 2 * kt * 4);
        assert_int_equal(dt_attn_tc_smem(DT_ATTN_TC_DKV2, D), D == 64 ? 56320 : 70144);
        assert_true(dt_attn_tc_smem(DT_ATTN_TC_DKV2, D) <= 163 * 1024);
        /* dkv3: dkv2 with tiles of 32 queries at both head sizes (dkv2's at 128), four blocks of it
         * within sm_80's 164 KiB a multiprocessor (a block's 1 KiB reserved) */
        assert_int_equal(dt_attn_tc_kt(DT_ATTN_TC_DKV3, D), 32);
        tile = dt_attn_tc_dkv2_tile(DT_ATTN_TC_DKV3, D);
        assert_int_equal(tile % 16, 0);
        assert_int_equal(dt_attn_tc_smem(DT_ATTN_TC_DKV3, D), 2 * DT_ATTN_TC_ROWS * row + 2 * tile);
        assert_int_equal(dt_attn_tc_smem(DT_ATTN_TC_DKV3, D), D == 64 ? 37376 : 70144);
        if (D == 64) assert_true(4 * (dt_attn_tc_smem(DT_ATTN_TC_DKV3, D) + 1024) <= 164 * 1024);
        else assert_int_equal(dt_attn_tc_smem(DT_ATTN_TC_DKV3, D), dt_attn_tc_smem(DT_ATTN_TC_DKV2, D));
    }
    /* dkv2's scratch after the fused kernels': lse2 from the first 16-byte boundary past their end,
     * wherever that end falls (a float apart), then dout16 (16-byte aligned too) and its B T C 16-bit
     * values within the floats asked for */
    static const int shapes[][4] = {{1, 1, 128, 2}, {2, 63, 256, 4}, {3, 65, 768, 12}, {1, 7, 64, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int B = shapes[i][0], T = shapes[i][1], C = shapes[i][2], NH = shapes[i][3];
        size_t n = dt_attn_dkv2_scratch(B, T, C, NH), rows = (size_t)B * NH * T;
        for (uintptr_t end = 4096; end < 4096 + 16; end += 4) {
            uintptr_t lse2 = dt_attn_dkv2_at(end, 0), dout16 = dt_attn_dkv2_dout(lse2, B, T, NH);
            assert_true(dout16 >= lse2 + rows * 4);
            assert_true(lse2 >= end && lse2 - end <= 12 && lse2 % 16 == 0 && dout16 % 16 == 0);
            assert_true(dout16 + (size_t)B * T * C * 2 <= end + n * 4);
        }
        assert_int_equal(dt_attn_dkv2_at(4100, 3), 4112); /* 4100 + 3 floats: a boundary already */
        assert_int_equal(dt_attn_dkv2_at(4100, 4), 4128);
    }
    static const int T[] = {1, 63, 64, 65, 200, 1024};
    for (size_t j = 0; j < sizeof T / sizeof T[0]; j++) {
        int B = 2, NH = 3, BH = B * NH, nblk = dt_attn_tc_blocks_per_head(T[j]);
        unsigned grid = dt_attn_tc_grid(B, T[j], NH);
        assert_int_equal(grid, (unsigned)(BH * nblk));
        for (int last_first = 0; last_first < 2; last_first++) {
            int *seen = calloc((size_t)BH * T[j], sizeof *seen);
            for (unsigned blk = 0; blk < grid; blk++) {
                int bh, b;
                dt_attn_block(blk, BH, nblk, last_first, &bh, &b);
                assert_true(bh >= 0 && bh < BH && b >= 0 && b < nblk);
                for (int r = b * DT_ATTN_TC_ROWS; r < (b + 1) * DT_ATTN_TC_ROWS && r < T[j]; r++)
                    seen[(size_t)bh * T[j] + r]++;
            }
            for (size_t r = 0; r < (size_t)BH * T[j]; r++) assert_int_equal(seen[r], 1);
            free(seen);
        }
    }
    assert_int_equal(dt_attn_tc_grid(1 << 16, 1 << 16, 1 << 10), 0);
}

/*
 * Grouped-query heads: the split of a key/value head's group among dkv's blocks is the least
 * divisor that reaches DT_ATTN_KV_BLOCKS blocks of keys (the group when none does, 1 for
 * multi-head attention), the scratch holds Drow and the partials, and dkv's grid (either kind of
 * kernel's rows per block) gives each (batch row, query head, key) to exactly one block, whose key
 * and value heads are the query head's and whose query heads are consecutive, split by split.
 */
static void attention_kv_plan(void **state)
{
    (void)state;
    assert_int_equal(dt_attn_width(768, 12, 12), 3 * 768);
    assert_int_equal(dt_attn_width(2048, 32, 4), 2048 + 2 * 4 * 64);
    static const int shapes[][4] = {{1, 128, 32, 4}, {8, 128, 4, 2},  {8, 2048, 32, 8}, {2, 100, 4, 1},
                                    {4, 64, 6, 1},   {32, 100, 8, 2}, {32, 100, 8, 4},  {3, 65, 12, 12},
                                    {1, 1, 7, 1},    {64, 64, 8, 4},  {5, 500, 12, 3}};
    int seen_kind[3] = {0};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int B = shapes[i][0], T = shapes[i][1], NH = shapes[i][2], NKV = shapes[i][3], G = NH / NKV;
        int S = dt_attn_kv_splits(B, T, NH, NKV);
        long long key_blocks = (long long)B * NKV * dt_attn_tc_blocks_per_head(T);
        assert_true(S >= 1 && G % S == 0);
        if (NKV == NH) assert_int_equal(S, 1);
        assert_true(S == G || key_blocks * S >= DT_ATTN_KV_BLOCKS);
        for (int s = 1; s < S; s++) assert_true(G % s || key_blocks * s < DT_ATTN_KV_BLOCKS);
        seen_kind[S == 1 ? 0 : S < G ? 1 : 2]++;
        /* the partials stay under the bound plan.h promises */
        if (S > 1) assert_true(key_blocks < DT_ATTN_KV_BLOCKS);
        int hs = 64, C = NH * hs;
        size_t drow = (size_t)B * NH * T, part = S > 1 ? (size_t)S * B * T * 2 * NKV * hs : 0;
        assert_true(dt_attn_scratch_tried(0, true, B, T, C, NH, NKV) == drow + part);
        if (S > 1) assert_true(part < 2.0 * S * DT_ATTN_KV_BLOCKS * DT_ATTN_TC_ROWS * hs);

        int rows[] = {DT_ATTN_TC_ROWS, dt_attn_rows_per_block(32), dt_attn_rows_per_block(128)};
        for (int r = 0; r < 3; r++) {
            int nblk = (T + rows[r] - 1) / rows[r];
            unsigned grid = r ? dt_attn_grid(B, T, NKV * S, r == 1 ? 32 : 128) : dt_attn_tc_grid(B, T, NKV * S);
            assert_int_equal(grid, (unsigned)B * NKV * S * nblk);
            int *seen = calloc((size_t)B * NH * T, sizeof *seen);
            int *owner = calloc((size_t)B * NKV * S * nblk, sizeof *owner);
            int prev_blk = -1;
            for (unsigned blk = 0; blk < grid; blk++) {
                struct dt_attn_kv kv = dt_attn_kv_block(blk, B, NH, NKV, S, nblk);
                assert_true(kv.b >= 0 && kv.b < B && kv.g >= 0 && kv.g < NKV && kv.split >= 0 && kv.split < S);
                assert_true(kv.blk >= 0 && kv.blk < nblk);
                assert_int_equal(kv.h0, kv.g * G + kv.split * (G / S));
                assert_int_equal(kv.h1 - kv.h0, G / S);
                /* first key blocks first: the first B NKV S blocks start every key/value head */
                if (kv.b == 0 && kv.g == 0 && kv.split == 0) {
                    assert_int_equal(kv.blk, prev_blk + 1);
                    prev_blk = kv.blk;
                }
                owner[((size_t)(kv.b * NKV + kv.g) * S + kv.split) * nblk + kv.blk]++;
                for (int h = kv.h0; h < kv.h1; h++) {
                    assert_int_equal(h / G, kv.g); /* repeat_kv's mapping */
                    for (int t = kv.blk * rows[r]; t < (kv.blk + 1) * rows[r] && t < T; t++)
                        seen[((size_t)kv.b * NH + h) * T + t]++;
                }
            }
            for (size_t x = 0; x < (size_t)B * NH * T; x++) assert_int_equal(seen[x], 1);
            for (size_t x = 0; x < (size_t)B * NKV * S * nblk; x++) assert_int_equal(owner[x], 1);
            free(seen), free(owner);
        }
    }
    /* the list reaches each way of summing: in one block, split in part, split per query head */
    assert_true(seen_kind[0] && seen_kind[1] && seen_kind[2]);
    /* test_cuda_attention's cases where a dkv block sums two query heads: a whole group of two, and
     * a group of four split in two */
    assert_int_equal(dt_attn_kv_splits(64, 65, 4, 2), 1);
    assert_int_equal(dt_attn_kv_splits(64, 65, 4, 1), 2);
    /* dkv2's scratch on trial (dkv3's the same): only with its flag, 16-bit activations and a
     * tensor-core head size */
    assert_true(dt_attn_scratch_tried(DT_CUDA_TRY_DKV3, true, 2, 64, 256, 4, 2) ==
                dt_attn_scratch_tried(DT_CUDA_TRY_DKV2, true, 2, 64, 256, 4, 2));
    size_t base = dt_attn_scratch_tried(0, true, 2, 64, 256, 4, 2);
    assert_true(dt_attn_scratch_tried(DT_CUDA_TRY_DKV2, true, 2, 64, 256, 4, 2) ==
                base + dt_attn_dkv2_scratch(2, 64, 256, 4));
    unsigned others = DT_CUDA_TRY_ALL & ~(DT_CUDA_TRY_DKV2 | DT_CUDA_TRY_DKV3);
    assert_true(dt_attn_scratch_tried(others, true, 2, 64, 256, 4, 2) == base);
    assert_true(dt_attn_scratch_tried(DT_CUDA_TRY_DKV2, false, 2, 64, 256, 4, 2) == base);
    assert_true(dt_attn_scratch_tried(DT_CUDA_TRY_DKV2, true, 2, 64, 384, 4, 2) ==
                dt_attn_scratch_tried(0, true, 2, 64, 384, 4, 2));
    assert_true(dt_attn_scratch_tried(DT_CUDA_TRY_DKV2, true, 2, 64, 250, 4, 2) == 0);
    /* kv1 on trial: never split, so no partials (this shape splits in two otherwise) */
    assert_int_equal(dt_attn_kv_splits(2, 64, 4, 2), 2);
    assert_int_equal(dt_attn_kv_splits_tried(DT_CUDA_TRY_KV1, 2, 64, 4, 2), 1);
    assert_int_equal(dt_attn_kv_splits_tried(DT_CUDA_TRY_ALL & ~DT_CUDA_TRY_KV1, 2, 64, 4, 2), 2);
    assert_true(dt_attn_scratch_tried(DT_CUDA_TRY_KV1, true, 2, 64, 256, 4, 2) == (size_t)2 * 4 * 64);
    assert_true(dt_attn_scratch_tried(DT_CUDA_TRY_KV1 | DT_CUDA_TRY_DKV2, true, 2, 64, 256, 4, 2) ==
                (size_t)2 * 4 * 64 + dt_attn_dkv2_scratch(2, 64, 256, 4));
    /* shapes no path takes */
    assert_int_equal(dt_attn_kv_splits(2, 64, 4, 3), 1);
    assert_true(dt_attn_scratch_tried(0, true, 2, 64, 256, 4, 3) == 0);
    assert_true(dt_attn_scratch_tried(0, true, 2, 64, 256, 4, 0) == 0);
    assert_true(dt_attn_scratch_tried(0, true, 0, 64, 256, 4, 2) == 0);
    assert_true(dt_attn_scratch_tried(0, true, 2, 64, 250, 4, 2) == 0);
}

/* One warp's registers of 16-bit pairs: reg[lane][r][h], h = 0 the low half */
typedef float warp_regs[32][4][2];

/* ldmatrix.x4 (.trans or not) over mem (row stride ld) as a warp runs it, lane l giving the address
 * of (r0 + dt_mma_ldsm_row(l, bn), c0 + dt_mma_ldsm_col(l, bn)): lanes 8i..8i+7 give the rows of
 * 8 x 8 block i, and lane l gets in register i block i's row l/4, columns 2 (l%4) and the next,
 * or with .trans its column l/4, rows 2 (l%4) and the next */
static void ldsm_emul(warp_regs out, const float *mem, int ld, int r0, int c0, bool bn, bool trans)
{
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++)
            for (int h = 0; h < 2; h++) {
                int row = trans ? 2 * (l % 4) + h : l / 4, col = trans ? l / 4 : 2 * (l % 4) + h;
                int src = 8 * i + row; /* the lane that gave this row's address */
                out[l][i][h] = mem[(r0 + dt_mma_ldsm_row(src, bn)) * ld + c0 + dt_mma_ldsm_col(src, bn) + col];
            }
}

/* d += A B, mma.sync.m16n8k16.row.col, the fragments as the PTX ISA lays them out (g = l/4, t = l%4):
 * A register r: row g + 8 (r%2), columns 2t + 8 (r/2) + h; B register r: rows 2t + 8r + h, column
 * g; accumulator i: row g + 8 (i/2), column 2t + i%2. b: registers bsel, bsel + 1 of each lane. */
static void mma_emul(float d[32][4], warp_regs a, warp_regs b, int bsel)
{
    double A[16][16], Bm[16][8];
    for (int l = 0; l < 32; l++)
        for (int r = 0; r < 4; r++)
            for (int h = 0; h < 2; h++) {
                A[l / 4 + 8 * (r % 2)][2 * (l % 4) + 8 * (r / 2) + h] = a[l][r][h];
                if (r < 2) Bm[2 * (l % 4) + 8 * r + h][l / 4] = b[l][bsel + r][h];
            }
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++) {
            int m = l / 4 + 8 * (i / 2), n = 2 * (l % 4) + i % 2;
            double s = 0;
            for (int k = 0; k < 16; k++) s += A[m][k] * Bm[k][n];
            d[l][i] += (float)s;
        }
}

/*
 * The products of attention_tc.cu's warps, emulated, on small integers (exact in float): from
 * shared rows with padding and offsets, S (16 x 16) = X Y^T over k = 32 (A [m][k] and a pair of B
 * tiles [n][k], no .trans: product()), then O (16 x 16) = S Z with S's accumulators repacked as A
 * and Z stored [k][n] read with .trans (product_acc()); each accumulator checked at the element
 * dt_mma_acc_row/_col name.
 */
static void attention_tc_fragments(void **state)
{
    (void)state;
    enum { LD = 40, R0 = 16 }; /* a tile of 32 + 8 columns; the warp's rows start at row 16 */
    float X[48 * LD], Y[16 * LD], Z[16 * LD], s[2][32][4] = {{{0}}}, o[2][32][4] = {{{0}}};
    for (int i = 0; i < 48 * LD; i++) X[i] = (float)((i * 7 + 3) % 11 - 5);
    for (int i = 0; i < 16 * LD; i++) Y[i] = (float)((i * 5 + 1) % 9 - 4), Z[i] = (float)((i * 3 + 2) % 7 - 3);
    for (int kk = 0; kk < 2; kk++) {
        warp_regs af, bf;
        ldsm_emul(af, X, LD, R0, kk * 16, false, false);
        ldsm_emul(bf, Y, LD, 0, kk * 16, true, false);
        mma_emul(s[0], af, bf, 0);
        mma_emul(s[1], af, bf, 2);
    }
    double S[16][16];
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            S[m][n] = 0;
            for (int k = 0; k < 32; k++) S[m][n] += (double)X[(R0 + m) * LD + k] * Y[n * LD + k];
        }
    for (int j = 0; j < 2; j++)
        for (int l = 0; l < 32; l++)
            for (int i = 0; i < 4; i++)
                assert_true(s[j][l][i] == S[dt_mma_acc_row(l, i)][8 * j + dt_mma_acc_col(l, i)]);
    /* S's accumulators as A: {s[0][0,1], s[0][2,3], s[1][0,1], s[1][2,3]} (product_acc's pack2) */
    warp_regs pa, vb;
    for (int l = 0; l < 32; l++)
        for (int r = 0; r < 4; r++)
            for (int h = 0; h < 2; h++) pa[l][r][h] = s[r / 2][l][2 * (r % 2) + h];
    ldsm_emul(vb, Z, LD, 0, 8, false, true); /* Z's columns 8..23 */
    mma_emul(o[0], pa, vb, 0);
    mma_emul(o[1], pa, vb, 2);
    for (int j = 0; j < 2; j++)
        for (int l = 0; l < 32; l++)
            for (int i = 0; i < 4; i++) {
                int m = dt_mma_acc_row(l, i), n = 8 * j + dt_mma_acc_col(l, i);
                double want = 0;
                for (int k = 0; k < 16; k++) want += S[m][k] * Z[k * LD + 8 + n];
                assert_true(o[j][l][i] == want);
            }
}

/* D = op(A) op(B) + beta D, column-major, as cuBLAS defines it */
static void host_gemm(const struct dt_gemm_plan *p, const float *A, const float *B, float *D)
{
    for (int j = 0; j < p->n; j++)
        for (int i = 0; i < p->m; i++) {
            double s = 0;
            for (int l = 0; l < p->k; l++) {
                float a = p->ta ? A[l + (size_t)i * p->lda] : A[i + (size_t)l * p->lda];
                float b = p->tb ? B[j + (size_t)l * p->ldb] : B[l + (size_t)j * p->ldb];
                s += (double)a * b;
            }
            float *d = &D[i + (size_t)j * p->ldd];
            *d = (float)(s + p->beta * *d);
        }
}

static float *rnd(size_t n, uint64_t stream)
{
    float *x = malloc(n * sizeof *x);
    struct dt_rng r = dt_rng_make(7, stream);
    for (size_t i = 0; i < n; i++) x[i] = dt_rng_normal(&r);
    return x;
}

static double maxdiff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = dt_test_worst(m, fabs((double)a[i] - b[i]));
    return m;
}

static void matmul_plans(void **state)
{
    struct dt_kctx *kc = dt_test_kctx();
    static const int shapes[][3] = {{5, 7, 3}, {16, 32, 48}, {1, 9, 1}, {33, 17, 65}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int BT = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        float *buf[6];
        size_t n[6] = {[DT_MM_INP] = (size_t)BT * C, [DT_MM_WEIGHT] = (size_t)OC * C, [DT_MM_OUT] = (size_t)BT * OC,
                       [DT_MM_DOUT] = (size_t)BT * OC, [DT_MM_DINP] = (size_t)BT * C, [DT_MM_DWEIGHT] = (size_t)OC * C};
        for (int i = 0; i < 6; i++) buf[i] = rnd(n[i], (uint64_t)(10 * s + i));
        float *ref[6];
        for (int i = 0; i < 6; i++) ref[i] = malloc(n[i] * sizeof(float)), memcpy(ref[i], buf[i], n[i] * sizeof(float));
        dt_kernels_cpu.matmul_forward(kc, ref[DT_MM_OUT], buf[DT_MM_INP], buf[DT_MM_WEIGHT], NULL, BT, C, OC);
        dt_kernels_cpu.matmul_backward(kc, ref[DT_MM_DINP], ref[DT_MM_DWEIGHT], NULL, buf[DT_MM_DOUT], buf[DT_MM_INP],
                                       buf[DT_MM_WEIGHT], BT, C, OC, 0);
        struct dt_gemm_plan p[2];
        for (int backward = 0; backward < 2; backward++) {
            int np = dt_matmul_plans(backward, BT, C, OC, p);
            assert_int_equal(np, backward ? 2 : 1);
            for (int i = 0; i < np; i++) {
                /* each stored operand's leading dimension holds its stored rows */
                assert_true(p[i].lda >= (p[i].ta ? p[i].k : p[i].m) && p[i].ldb >= (p[i].tb ? p[i].n : p[i].k) &&
                            p[i].ldd >= p[i].m);
                assert_int_equal((size_t)p[i].m * p[i].n, n[p[i].d]);
                host_gemm(&p[i], buf[p[i].a], buf[p[i].b], buf[p[i].d]);
            }
        }
        /* forward overwrites out (beta 0); backward accumulates into dinp and dweight (beta 1) */
        assert_true(maxdiff(buf[DT_MM_OUT], ref[DT_MM_OUT], n[DT_MM_OUT]) < 1e-4);
        assert_true(maxdiff(buf[DT_MM_DINP], ref[DT_MM_DINP], n[DT_MM_DINP]) < 1e-4);
        assert_true(maxdiff(buf[DT_MM_DWEIGHT], ref[DT_MM_DWEIGHT], n[DT_MM_DWEIGHT]) < 1e-4);
        for (int i = 0; i < 6; i++) free(buf[i]), free(ref[i]);
    }
}

/* The FP8 plans: every gemm "TN" (A transposed, B not, each leading dimension its K) and reading the
 * transposed copies where plan.h says, computing the CPU's products. */
static void matmul_plans_fp8(void **state)
{
    struct dt_kctx *kc = dt_test_kctx();
    static const int shapes[][3] = {{16, 32, 48}, {48, 16, 32}, {5, 7, 3}, {64, 80, 16}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int BT = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        float *buf[DT_MM_OPERANDS];
        size_t n[DT_MM_OPERANDS] = {[DT_MM_INP] = (size_t)BT * C, [DT_MM_WEIGHT] = (size_t)OC * C,
                                    [DT_MM_OUT] = (size_t)BT * OC, [DT_MM_DOUT] = (size_t)BT * OC,
                                    [DT_MM_DINP] = (size_t)BT * C, [DT_MM_DWEIGHT] = (size_t)OC * C,
                                    [DT_MM_INP_T] = (size_t)BT * C, [DT_MM_WEIGHT_T] = (size_t)OC * C,
                                    [DT_MM_DOUT_T] = (size_t)BT * OC};
        for (int i = 0; i < DT_MM_INP_T; i++) buf[i] = rnd(n[i], (uint64_t)(100 + 10 * s + i));
        /* the transposed copies, (cols, rows) row-major */
        static const int of[][3] = {{DT_MM_INP_T, DT_MM_INP, 0}, {DT_MM_WEIGHT_T, DT_MM_WEIGHT, 1},
                                    {DT_MM_DOUT_T, DT_MM_DOUT, 2}};
        for (int i = 0; i < 3; i++) {
            int rows = of[i][2] == 1 ? OC : BT, cols = of[i][2] == 2 ? OC : C;
            const float *src = buf[of[i][1]];
            float *t = malloc(n[of[i][0]] * sizeof *t);
            for (int r = 0; r < rows; r++)
                for (int c = 0; c < cols; c++) t[(size_t)c * rows + r] = src[(size_t)r * cols + c];
            buf[of[i][0]] = t;
        }
        float *ref[DT_MM_INP_T];
        for (int i = 0; i < DT_MM_INP_T; i++)
            ref[i] = malloc(n[i] * sizeof(float)), memcpy(ref[i], buf[i], n[i] * sizeof(float));
        dt_kernels_cpu.matmul_forward(kc, ref[DT_MM_OUT], buf[DT_MM_INP], buf[DT_MM_WEIGHT], NULL, BT, C, OC);
        dt_kernels_cpu.matmul_backward(kc, ref[DT_MM_DINP], ref[DT_MM_DWEIGHT], NULL, buf[DT_MM_DOUT], buf[DT_MM_INP],
                                       buf[DT_MM_WEIGHT], BT, C, OC, 0);
        struct dt_gemm_plan p[2];
        for (int backward = 0; backward < 2; backward++) {
            int np = dt_matmul_plans_fp8(backward, BT, C, OC, p);
            assert_int_equal(np, backward ? 2 : 1);
            for (int i = 0; i < np; i++) {
                assert_true(p[i].ta && !p[i].tb && p[i].lda == p[i].k && p[i].ldb == p[i].k && p[i].ldd == p[i].m);
                assert_int_equal((size_t)p[i].m * p[i].k, n[p[i].a]);
                assert_int_equal((size_t)p[i].n * p[i].k, n[p[i].b]);
                assert_int_equal((size_t)p[i].m * p[i].n, n[p[i].d]);
                host_gemm(&p[i], buf[p[i].a], buf[p[i].b], buf[p[i].d]);
            }
        }
        assert_true(maxdiff(buf[DT_MM_OUT], ref[DT_MM_OUT], n[DT_MM_OUT]) < 1e-4);
        assert_true(maxdiff(buf[DT_MM_DINP], ref[DT_MM_DINP], n[DT_MM_DINP]) < 1e-4);
        assert_true(maxdiff(buf[DT_MM_DWEIGHT], ref[DT_MM_DWEIGHT], n[DT_MM_DWEIGHT]) < 1e-4);
        for (int i = 0; i < DT_MM_OPERANDS; i++) free(buf[i]);
        for (int i = 0; i < DT_MM_INP_T; i++) free(ref[i]);
    }
}

/* The FP8 cast kernel's index math, emulated: for each block of the grid and each of its threads,
 * the values plan.h has it read into the shared tile and the 4-byte words it writes from there. Every
 * value of the operand must reach both copies once, the plain one at (r, c), the transposed at (c, r). */
static void fp8_cast_tiles(void **state)
{
    (void)state;
    assert_int_equal(DT_FP8_READS * DT_FP8_THREADS, DT_FP8_TILE * DT_FP8_TILE);
    assert_int_equal(DT_FP8_WRITES * DT_FP8_THREADS, DT_FP8_TILE * DT_FP8_WORDS);
    assert_int_equal(DT_FP8_THREADS % DT_FP8_TILE, 0);
    assert_int_equal(DT_FP8_THREADS % DT_FP8_WORDS, 0);
    assert_int_equal(DT_FP8_PITCH % 4, 0);
    static const int shapes[][2] = {{16, 16}, {64, 64}, {80, 144}, {4, 260}, {132, 8}, {128, 192}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int R = shapes[s][0], Cc = shapes[s][1];
        size_t n = (size_t)R * Cc;
        uint8_t *x = malloc(n), *q = calloc(n, 1), *qt = calloc(n, 1);
        int *nq = calloc(n, sizeof *nq), *nqt = calloc(n, sizeof *nqt);
        for (size_t i = 0; i < n; i++) x[i] = (uint8_t)(i * 37 + i / 251);
        int gx = (Cc + DT_FP8_TILE - 1) / DT_FP8_TILE, gy = (R + DT_FP8_TILE - 1) / DT_FP8_TILE;
        for (int by = 0; by < gy; by++)
            for (int bx = 0; bx < gx; bx++) {
                int r0 = by * DT_FP8_TILE, c0 = bx * DT_FP8_TILE;
                static uint8_t tile[DT_FP8_TILE][DT_FP8_PITCH];
                static int filled[DT_FP8_TILE][DT_FP8_TILE];
                memset(filled, 0, sizeof filled);
                for (int t = 0; t < DT_FP8_THREADS; t++)
                    for (int j = 0; j < DT_FP8_READS; j++) {
                        int row = dt_fp8_read_row(t, j), col = dt_fp8_read_col(t);
                        assert_true(row >= 0 && row < DT_FP8_TILE && col >= 0 && col < DT_FP8_TILE);
                        if (r0 + row < R && c0 + col < Cc) {
                            tile[row][col] = x[(size_t)(r0 + row) * Cc + c0 + col];
                            filled[row][col]++;
                        }
                    }
                for (int row = 0; row < DT_FP8_TILE; row++)
                    for (int col = 0; col < DT_FP8_TILE; col++)
                        assert_int_equal(filled[row][col], r0 + row < R && c0 + col < Cc ? 1 : 0);
                for (int t = 0; t < DT_FP8_THREADS; t++)
                    for (int j = 0; j < DT_FP8_WRITES; j++) {
                        int l = dt_fp8_write_line(t, j), w = dt_fp8_write_word(t);
                        assert_true(l >= 0 && l < DT_FP8_TILE && w >= 0 && w < DT_FP8_WORDS);
                        for (int b = 0; b < 4; b++) {
                            if (r0 + l < R && c0 + 4 * w < Cc) { /* the kernel's guards, a word at a time */
                                assert_int_equal(filled[l][4 * w + b], 1);
                                size_t at = (size_t)(r0 + l) * Cc + c0 + 4 * w + b;
                                q[at] = tile[l][4 * w + b], nq[at]++;
                            }
                            if (c0 + l < Cc && r0 + 4 * w < R) {
                                assert_int_equal(filled[4 * w + b][l], 1);
                                size_t at = (size_t)(c0 + l) * R + r0 + 4 * w + b;
                                qt[at] = tile[4 * w + b][l], nqt[at]++;
                            }
                        }
                    }
            }
        for (int r = 0; r < R; r++)
            for (int c = 0; c < Cc; c++) {
                size_t at = (size_t)r * Cc + c, tat = (size_t)c * R + r;
                assert_int_equal(nq[at], 1);
                assert_int_equal(nqt[tat], 1);
                assert_int_equal(q[at], x[at]);
                assert_int_equal(qt[tat], x[at]);
            }
        free(x), free(q), free(qt), free(nq), free(nqt);
    }
}

/* the walk against kernels.h's block-major index: element (i, v) of a (BT, V) buffer in vocabulary
 * blocks of vb columns lives at BT v0 + i n + (v - v0), v0 = v - v % vb, n the block's width */
static void logit_row_walk(void **state)
{
    (void)state;
    static const int shapes[][3] = {{4, 50257, 6336}, {3, 1000, 64}, {5, 130, 64}, {2, 37, 64}, {1, 256, 256}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int BT = shapes[s][0], V = shapes[s][1], vb = shapes[s][2];
        for (int i = 0; i < BT; i++)
            for (int tid = 0; tid < 256; tid += 37) {
                struct dt_row_walk w = dt_row_start(i, V, vb);
                for (int v = tid; v < V; v += 256) {
                    int v0 = v - v % vb, n = V - v0 < vb ? V - v0 : vb;
                    assert_int_equal(dt_row_at(&w, v, i, BT, V, vb), (size_t)BT * v0 + (size_t)i * n + (size_t)(v - v0));
                }
            }
    }
}

/* xent2's run of packs over a row's full vocabulary blocks: every column of those blocks once, at
 * the block-major index, its pack's columns consecutive in memory; the last block's columns are left
 * to the walk block by block. The vocabularies' blocks as dt_vocab_of cuts them. */
static void xent2_walk(void **state)
{
    (void)state;
    static const int shapes[][2] = {{4, 50257}, {2, 128256}, {3, 1000}, {5, 256}, {2, 32000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int E = 4; E <= 8; E += 4) { /* fp32's packs and bf16's */
            int BT = shapes[s][0], V = shapes[s][1], vb = dt_vocab_of(V).vb;
            assert_int_equal(vb % E, 0);
            int full = V / vb, packs = full * (vb / E);
            unsigned char *seen = calloc((size_t)V, 1);
            for (int i = 0; i < BT; i++) {
                memset(seen, 0, (size_t)V);
                for (int j = 0; j < packs; j++) {
                    int v;
                    size_t at = dt_xent2_pack(j, i, BT, vb, E, &v);
                    for (int k = 0; k < E; k++) {
                        int c = v + k, v0 = c - c % vb;
                        assert_true(c < full * vb);
                        assert_int_equal(at + (size_t)k, (size_t)BT * v0 + (size_t)i * vb + (size_t)(c - v0));
                        seen[c]++;
                    }
                }
                for (int c = 0; c < V; c++) assert_int_equal(seen[c], c < full * vb ? 1 : 0);
            }
            free(seen);
        }
}

/* softmax_xent keeps a row in shared memory where it fits: GPT-2's bf16 row on an H100 (opt-in limit
 * 227 KiB) and an A100 (163 KiB), not Llama 3's 128256 (250.5 KiB); sizes rounded up to 16 bytes */
static void xent_row_bytes(void **state)
{
    (void)state;
    size_t st = 256 * (sizeof(float) + sizeof(double));
    assert_int_equal(dt_xent_row_bytes(50257, 2, st, 232448), 100528);
    assert_int_equal(dt_xent_row_bytes(50257, 2, st, 166912), 100528);
    assert_int_equal(dt_xent_row_bytes(50257, 4, st, 166912), 0);
    assert_int_equal(dt_xent_row_bytes(128256, 2, st, 232448), 0);
    assert_int_equal(dt_xent_row_bytes(300, 2, st, 232448), 608);
    assert_int_equal(dt_xent_row_bytes(4, 4, st, 232448), 16);
    assert_int_equal(dt_xent_row_bytes(1000, 4, st, 4000 + st), 4000);
    assert_int_equal(dt_xent_row_bytes(1001, 4, st, 4000 + st), 0);
}

static void cuda_tries(void **state)
{
    (void)state;
    unsigned f = 99;
    char bad[8];
    assert_int_equal(dt_cuda_tries_parse("", &f, bad, sizeof bad), 0);
    assert_int_equal(f, 0);
    assert_int_equal(dt_cuda_tries_parse("rows2", &f, bad, sizeof bad), 0);
    assert_int_equal(f, DT_CUDA_TRY_ROWS2);
    assert_int_equal(dt_cuda_tries_parse("convert2,xent2", &f, bad, sizeof bad), 0);
    assert_int_equal(f, DT_CUDA_TRY_CONVERT2 | DT_CUDA_TRY_XENT2);
    assert_int_equal(dt_cuda_tries_parse("all", &f, bad, sizeof bad), 0);
    assert_int_equal(f, DT_CUDA_TRY_XENT2 | DT_CUDA_TRY_ROWS2 | DT_CUDA_TRY_CONVERT2 | DT_CUDA_TRY_GELU |
                            DT_CUDA_TRY_NORM2 | DT_CUDA_TRY_RMS2 | DT_CUDA_TRY_RESID2 | DT_CUDA_TRY_DQ2 |
                            DT_CUDA_TRY_DKV2 | DT_CUDA_TRY_SWIGLU2 | DT_CUDA_TRY_ADAM2 | DT_CUDA_TRY_COLSUM2 |
                            DT_CUDA_TRY_BGRADB);
    assert_int_equal(dt_cuda_tries_parse("dkv3", &f, bad, sizeof bad), 0);
    assert_int_equal(f, DT_CUDA_TRY_DKV3);
    /* every name's flag but kv1's (which takes a path away rather than replace a kernel) and dkv3's
     * (which dkv2 would give way to), no other */
    assert_int_equal(DT_CUDA_TRY_ALL, ((1u << DT_CUDA_TRY_COUNT) - 1) & ~(DT_CUDA_TRY_KV1 | DT_CUDA_TRY_DKV3));
    assert_int_equal(dt_cuda_tries_parse("gelu", &f, bad, sizeof bad), 0);
    assert_int_equal(f, DT_CUDA_TRY_GELU);
    assert_int_equal(dt_cuda_tries_parse("xent2,xent", &f, bad, sizeof bad), -1);
    assert_string_equal(bad, "xent");
    assert_int_equal(dt_cuda_tries_parse("xent22", &f, bad, sizeof bad), -1);
    assert_string_equal(bad, "xent22");
    assert_int_equal(dt_cuda_tries_parse("rows2,,", &f, bad, sizeof bad), -1);
    assert_string_equal(bad, "");
    assert_int_equal(dt_cuda_tries_parse("a-very-long-name", &f, bad, sizeof bad), -1);
    assert_string_equal(bad, "a-very-");
    assert_int_equal(dt_cuda_tries_parse(" xent2 , rows2", &f, bad, sizeof bad), 0); /* as the hint lists them */
    assert_int_equal(f, DT_CUDA_TRY_XENT2 | DT_CUDA_TRY_ROWS2);
    assert_int_equal(dt_cuda_tries_parse("x ent2", &f, bad, sizeof bad), -1);
    assert_string_equal(bad, "x ent2");
    /* each name its own flag, and the list the log and the hint print parses back to all of them */
    char names[128];
    for (int i = 0; i < DT_CUDA_TRY_COUNT; i++) {
        assert_int_equal(dt_cuda_tries_parse(dt_cuda_try_names[i], &f, bad, sizeof bad), 0);
        assert_int_equal(f, 1u << i);
    }
    dt_cuda_tries_str(DT_CUDA_TRY_ALL, names, sizeof names);
    assert_string_equal(names, "xent2, rows2, convert2, gelu, norm2, rms2, resid2, dq2, dkv2, swiglu2, adam2, colsum2, "
                                "bgradb");
    assert_int_equal(dt_cuda_tries_parse(names, &f, bad, sizeof bad), 0);
    assert_int_equal(f, DT_CUDA_TRY_ALL);
    assert_int_equal(dt_cuda_tries_parse("all,kv1", &f, bad, sizeof bad), 0);
    assert_int_equal(f, DT_CUDA_TRY_ALL | DT_CUDA_TRY_KV1);
    dt_cuda_tries_str(DT_CUDA_TRY_KV1, names, sizeof names);
    assert_string_equal(names, "kv1");
    dt_cuda_tries_str(0, names, sizeof names);
    assert_string_equal(names, "");
}

static int by_key(const void *a, const void *b)
{
    const unsigned *x = a, *y = b; /* (key, index): index breaks ties, as a stable sort keeps them */
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* rows2's blocks over its sorted keys, one after another, against the CPU's rows_add: a range that
 * starts and ends inside rows, entries outside it, a row repeated hundreds of times */
static void rows_sorted_plan(void **state)
{
    (void)state;
    struct dt_kctx *kc = dt_test_kctx();
    int nrows = 1500, width = 24, V = 900;
    size_t lo = 3 * (size_t)width + 5, n = 700 * (size_t)width;
    size_t r0 = lo / width, r1 = (lo + n - 1) / width;
    int32_t *rows = malloc(nrows * sizeof *rows);
    unsigned *pairs = malloc(2 * (size_t)nrows * sizeof *pairs), *keys = malloc(nrows * sizeof *keys);
    float *vals = malloc((size_t)nrows * width * sizeof *vals);
    struct dt_rng rng = dt_rng_make(41, 0);
    for (int i = 0; i < nrows; i++) rows[i] = i % 4 == 0 ? 9 : (int32_t)dt_rng_below(&rng, (uint32_t)V);
    for (size_t i = 0; i < (size_t)nrows * width; i++) vals[i] = dt_rng_normal(&rng);
    unsigned sentinel = dt_rows_key(-1, r0, r1);
    assert_int_equal(sentinel, r1 - r0 + 1);
    assert_true((1ull << dt_rows_key_bits(r0, r1)) > sentinel && (1ull << (dt_rows_key_bits(r0, r1) - 1)) <= sentinel);
    for (int i = 0; i < nrows; i++) pairs[2 * i] = dt_rows_key(rows[i], r0, r1), pairs[2 * i + 1] = (unsigned)i;
    qsort(pairs, nrows, 2 * sizeof *pairs, by_key);
    for (int k = 0; k < nrows; k++) keys[k] = pairs[2 * k];
    for (int ti = 0; ti < 2; ti++) {
        enum dt_dtype t = ti ? DT_BF16 : DT_F32;
        size_t es = dt_dtype_size(t);
        char *ref = malloc(n * es), *got = malloc(n * es);
        for (size_t e = 0; e < n; e++) {
            float x = (float)e * 0.01f - 3.0f;
            if (t == DT_F32) ((float *)ref)[e] = x;
            else ((uint16_t *)ref)[e] = dt_bf16_from_f32(x);
        }
        memcpy(got, ref, n * es);
        dt_kernels_cpu.rows_add(kc, ref, t, lo, n, rows, vals, nrows, width);
        int runs = 0;
        for (int k = 0; k < nrows; k++) {
            if (!dt_rows_run_start(keys, k, sentinel)) continue;
            runs++;
            for (int c = 0; c < width; c++) {
                size_t e = (r0 + keys[k]) * (size_t)width + (size_t)c;
                if (e < lo || e >= lo + n) continue;
                float x = t == DT_F32 ? ((float *)got)[e - lo] : dt_f32_from_bf16(((uint16_t *)got)[e - lo]);
                for (int j = k; j < nrows && keys[j] == keys[k]; j++) {
                    x += vals[(size_t)pairs[2 * j + 1] * width + c];
                    if (t == DT_BF16) x = dt_f32_from_bf16(dt_bf16_from_f32(x));
                }
                if (t == DT_F32) ((float *)got)[e - lo] = x;
                else ((uint16_t *)got)[e - lo] = dt_bf16_from_f32(x);
            }
        }
        assert_true(runs > 100 && runs < V);
        assert_memory_equal(got, ref, n * es);
        free(ref), free(got);
    }
    free(rows), free(pairs), free(keys), free(vals);
}

DT_TESTS(T(cuda_tries), T(rows_sorted_plan), T(logit_row_walk), T(xent2_walk), T(xent_row_bytes), T(attention_grid), T(attention_tc_plan), T(attention_kv_plan), T(attention_tc_fragments), T(matmul_plans),
         T(matmul_plans_fp8), T(fp8_cast_tiles))
