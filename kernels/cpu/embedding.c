/*
 * embedding.c - token and position embeddings, forward and backward. The token
 * table may come in blocks of rows (ZeRO-3 gathers the vocabulary a block at a
 * time), and the gradient of a table is added row by row into whatever range
 * of it a rank holds.
 */
#include <omp.h>
#include "core/dtype.h"
#include "kernels/cpu/cpu.h"

void dt_cpu_position_forward(struct dt_kctx *kc, float *out, const float *wpe, int B, int T, int C)
{
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *pe = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) o[c] = pe[c];
        }
}

void dt_cpu_rows_forward(struct dt_kctx *kc, float *out, const int32_t *inp, const void *table, enum dt_dtype t, int v0,
                         int nv, int n, int C)
{
    #pragma omp parallel for
    for (int i = 0; i < n; i++) {
        int r = inp[i] - v0;
        if (r < 0 || r >= nv) continue;
        float *o = out + (size_t)i * C;
        size_t at = (size_t)r * C;
        if (t == DT_F32) {
            const float *te = (const float *)table + at;
            #pragma omp simd
            for (int c = 0; c < C; c++) o[c] += te[c];
        } else {
            const uint16_t *te = (const uint16_t *)table + at;
            for (int c = 0; c < C; c++) o[c] += t == DT_BF16 ? dt_f32_from_bf16(te[c]) : dt_f32_from_f16(te[c]);
        }
    }
}

void dt_cpu_position_backward(struct dt_kctx *kc, float *dwpe, const float *dout, int B, int T, int C)
{
    #pragma omp parallel for
    for (int t = 0; t < T; t++) {
        float *pe = dwpe + (size_t)t * C;
        for (int b = 0; b < B; b++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            #pragma omp simd
            for (int c = 0; c < C; c++) pe[c] += d[c];
        }
    }
}

void dt_cpu_rows_add(struct dt_kctx *kc, void *dst, enum dt_dtype t, size_t lo, size_t n, const int32_t *rows, const float *vals,
                     int nrows, int width)
{
    /* rows repeat, so two rows may land on the same elements: each thread owns a range of
     * channels and walks the rows in order, which keeps the sums in one order too */
    #pragma omp parallel
    {
        int nt = omp_get_num_threads(), th = omp_get_thread_num();
        int c0 = (int)((long)width * th / nt), c1 = (int)((long)width * (th + 1) / nt);
        for (int i = 0; i < nrows; i++) {
            size_t start = (size_t)rows[i] * (size_t)width; /* the row's first element in the table */
            size_t a = start + (size_t)c0, b = start + (size_t)c1;
            if (a < lo) a = lo;
            if (b > lo + n) b = lo + n;
            const float *v = vals + (size_t)i * width;
            if (t == DT_F32) {
                float *d = dst;
                #pragma omp simd
                for (size_t e = a; e < b; e++) d[e - lo] += v[e - start];
            } else {
                uint16_t *d = dst;
                for (size_t e = a; e < b; e++) {
                    float x = (t == DT_BF16 ? dt_f32_from_bf16(d[e - lo]) : dt_f32_from_f16(d[e - lo])) + v[e - start];
                    d[e - lo] = t == DT_BF16 ? dt_bf16_from_f32(x) : dt_f16_from_f32(x);
                }
            }
        }
    }
}
