/*
 * test_cuda_plan.c - the host-side decisions of the CUDA kernels (kernels/cuda/plan.h), checked on
 * any machine, GPU or not:
 *   - the fused attention's grid covers every (head, row) exactly once, heaviest blocks first, stays
 *     under gridDim.x's limit or says it cannot, and its blocks' shared memory fits 48 KiB;
 *   - the column-major gemms the matmuls hand cuBLASLt compute kernels.h's row-major products:
 *     each plan is run by a plain host gemm with cuBLAS's conventions (op, stored shape, leading
 *     dimension) and compared with the CPU kernels.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/rng.h"
#include "dt_test.h"
#include "kernels/cuda/plan.h"
#include "kernels/kernels.h"

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

DT_TESTS(T(attention_grid), T(matmul_plans))
