/*
 * mixed.c - arithmetic between buffers of different element types (fp32, bf16,
 * fp16): what mixed precision needs around the matmuls. Sums are formed in
 * fp32 and rounded once, to nearest even (core/dtype.h), except the
 * stochastic rounding of bf16-true's parameter updates.
 */
#include <math.h>
#include <omp.h>
#include <string.h>
#include "kernels/formulas.h"
#include "core/dtype.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"

static inline float get(const void *p, enum dt_dtype t, size_t i)
{
    if (t == DT_F32) return ((const float *)p)[i];
    if (t == DT_BF16) return dt_f32_from_bf16(((const uint16_t *)p)[i]);
    return dt_f32_from_f16(((const uint16_t *)p)[i]);
}

static inline void put(void *p, enum dt_dtype t, size_t i, float v)
{
    if (t == DT_F32) ((float *)p)[i] = v;
    else if (t == DT_BF16) ((uint16_t *)p)[i] = dt_bf16_from_f32(v);
    else ((uint16_t *)p)[i] = dt_f16_from_f32(v);
}

void dt_cpu_convert(struct dt_kctx *kc, void *dst, enum dt_dtype dt, const void *src, enum dt_dtype st, size_t n)
{
    if (dt == st) {
        size_t bytes = n * dt_dtype_size(dt);
        #pragma omp parallel if (bytes >= DT_CPU_PARALLEL_BYTES)
        {
            size_t lo, hi;
            dt_cpu_byte_share(bytes, &lo, &hi);
            memcpy((char *)dst + lo, (const char *)src + lo, hi - lo);
        }
    } else if (st == DT_F32) {
        dt_cpu_cast_to_lp(kc, dst, src, n, dt);
    } else if (dt == DT_F32) {
        dt_cpu_cast_from_lp(kc, dst, src, n, st);
    } else {
        #pragma omp parallel for
        for (size_t i = 0; i < n; i++) put(dst, dt, i, get(src, st, i));
    }
}

/* A block of n values as fp32 (a copy, or the conversion instructions' widening) */
#define BLOCK 1024
static const float *widen(float *tmp, const void *src, enum dt_dtype t, size_t n, const struct dt_convert *cv)
{
    if (t == DT_F32) return src;
    (t == DT_BF16 ? cv->f32_from_bf16 : cv->f32_from_f16)(tmp, src, n);
    return tmp;
}

void dt_cpu_accumulate(struct dt_kctx *kc, void *dst, enum dt_dtype dt, const void *src, enum dt_dtype st, size_t n)
{
    if (dt == DT_F32 && st == DT_F32) {
        float *d = dst;
        const float *s = src;
        #pragma omp parallel for simd
        for (size_t i = 0; i < n; i++) d[i] += s[i];
        return;
    }
    const struct dt_convert *cv = dt_convert_fast();
    size_t dsz = dt_dtype_size(dt), ssz = dt_dtype_size(st);
    #pragma omp parallel for schedule(static)
    for (size_t b = 0; b < n; b += BLOCK) {
        float td[BLOCK], ts[BLOCK];
        size_t k = n - b < BLOCK ? n - b : BLOCK;
        const float *s = widen(ts, (const char *)src + b * ssz, st, k, cv);
        float *d = dt == DT_F32 ? (float *)dst + b : td;
        if (dt != DT_F32) widen(td, (const char *)dst + b * dsz, dt, k, cv);
        #pragma omp simd
        for (size_t i = 0; i < k; i++) d[i] += s[i];
        if (dt != DT_F32) (dt == DT_BF16 ? cv->bf16_from_f32 : cv->f16_from_f32)((uint16_t *)dst + b, td, k);
    }
}

/* Forward: the 16-bit value i lands on bytes [2i, 2i+2), which held fp32 values already read. */
void dt_cpu_narrow_inplace(struct dt_kctx *kc, void *buf, size_t n, enum dt_dtype t)
{
    const float *f = buf;
    uint16_t *h = buf;
    for (size_t i = 0; i < n; i++) {
        float v = f[i];
        h[i] = t == DT_BF16 ? dt_bf16_from_f32(v) : dt_f16_from_f32(v);
    }
}

/* Backward: the fp32 value i lands on bytes [4i, 4i+4), which held 16-bit values 2i and 2i+1,
 * already widened (they come after i). */
void dt_cpu_widen_inplace(struct dt_kctx *kc, void *buf, size_t n, enum dt_dtype t)
{
    float *f = buf;
    const uint16_t *h = buf;
    for (size_t i = n; i-- > 0;) {
        uint16_t v = h[i];
        f[i] = t == DT_BF16 ? dt_f32_from_bf16(v) : dt_f32_from_f16(v);
    }
}

void dt_cpu_round_stochastic(struct dt_kctx *kc, uint16_t *dst, const float *src, size_t n, uint64_t seed, uint64_t index0)
{
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) dst[i] = dt_bf16_stochastic(src[i], seed, index0 + i);
}

/* The squares of k values, in double: exact for every fp32 square, so the global norm of 124M
 * gradients does not lose digits. LANES running sums, element i in sum i % LANES, added in lane
 * order: the same bits from every vector width (vmath.h's clones; a fused multiply-add rounds an
 * exact product as the add does), where a vectorized reduction has as many lanes as the vector. */
#define LANES 32
DT_CLONES static double squares(const float *f, size_t k)
{
    double acc[LANES] = {0}, part = 0;
    size_t i = 0;
    for (; i + LANES <= k; i += LANES) {
        #pragma omp simd
        for (size_t j = 0; j < LANES; j++) acc[j] += (double)f[i + j] * f[i + j];
    }
    for (; i < k; i++) acc[i % LANES] += (double)f[i] * f[i];
    for (size_t j = 0; j < LANES; j++) part += acc[j];
    return part;
}

/* How many of k <= BLOCK values are inf or nan: all ones in the exponent, read off the bits (a
 * comparison the compiler vectorizes, which isfinite() is not), counted in 32 bits as the lanes are. */
DT_CLONES static size_t count_nonfinite(const void *x, enum dt_dtype t, size_t k)
{
    uint32_t bad = 0;
    if (t == DT_F32) {
        const uint32_t *u = x;
        #pragma omp simd reduction(+ : bad)
        for (size_t i = 0; i < k; i++) bad += (u[i] & 0x7f800000u) == 0x7f800000u;
        return bad;
    }
    const uint16_t *h = x, mask = t == DT_BF16 ? 0x7f80 : 0x7c00;
    #pragma omp simd reduction(+ : bad)
    for (size_t i = 0; i < k; i++) bad += (h[i] & mask) == mask;
    return bad;
}

/* The squares of n values of any type, in blocks from the first: one order for every type, so a
 * 16-bit array sums to what its fp32 widening does. Each thread sums a contiguous run of blocks and
 * the threads' sums are added in thread order (an OpenMP reduction adds them in the order they
 * finish: with 3 threads or more, other bits from run to run). With bad, also how many are inf or
 * nan, in the same read: inf and nan square to inf and nan and no 16- or 32-bit square overflows a
 * double, so only a block whose sum is not finite is counted (a loop that also tested every element
 * took 4x as long: 141 against 32 ms over 124M fp32 values). */
static double sumsq_blocks(const void *x, enum dt_dtype t, size_t n, size_t *bad)
{
    enum { MAX_THREADS = 256 };
    const struct dt_convert *cv = dt_convert_fast();
    size_t esz = dt_dtype_size(t), nblocks = (n + BLOCK - 1) / BLOCK, nbad[MAX_THREADS] = {0};
    double sums[MAX_THREADS] = {0}, s = 0;
    int nt = omp_get_max_threads() < MAX_THREADS ? omp_get_max_threads() : MAX_THREADS;
    #pragma omp parallel num_threads(nt)
    {
        size_t th = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads(), nb = 0;
        double sum = 0;
        for (size_t i = nblocks * th / T; i < nblocks * (th + 1) / T; i++) {
            float tmp[BLOCK];
            size_t b = i * BLOCK, k = n - b < BLOCK ? n - b : BLOCK;
            const void *at = (const char *)x + b * esz;
            double part = squares(widen(tmp, at, t, k, cv), k);
            if (bad && !isfinite(part)) nb += count_nonfinite(at, t, k);
            sum += part;
        }
        sums[th] = sum;
        nbad[th] = nb;
    }
    size_t nb = 0;
    for (int i = 0; i < nt; i++) s += sums[i], nb += nbad[i];
    if (bad) *bad = nb;
    return s;
}

double dt_cpu_sumsq(struct dt_kctx *kc, const void *x, enum dt_dtype t, size_t n) { return sumsq_blocks(x, t, n, NULL); }

size_t dt_cpu_nonfinite(struct dt_kctx *kc, const void *x, enum dt_dtype t, size_t n)
{
    size_t esz = dt_dtype_size(t), bad = 0;
    #pragma omp parallel for schedule(static) reduction(+ : bad)
    for (size_t b = 0; b < n; b += BLOCK)
        bad += count_nonfinite((const char *)x + b * esz, t, n - b < BLOCK ? n - b : BLOCK);
    return bad;
}

/* Each part in one pass: its squares (where it counts them) with its finiteness, or its finiteness
 * alone. A part's squares are summed over the same bounds as dt_cpu_sumsq's. */
double dt_cpu_sumsq_parts(struct dt_kctx *kc, const struct dt_norm_part *parts, int nparts, enum dt_dtype t,
                          size_t *bad)
{
    double s = 0;
    *bad = 0;
    for (int i = 0; i < nparts; i++) {
        size_t nb = 0;
        if (parts[i].squares) s += sumsq_blocks(parts[i].x, t, parts[i].n, &nb);
        else nb = dt_cpu_nonfinite(kc, parts[i].x, t, parts[i].n);
        *bad += nb;
    }
    return s;
}
