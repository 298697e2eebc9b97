/*
 * ops.cu - the CUDA twins of the CPU kernels that are not matmuls or attention (issue 14, first
 * part): GELU, residual, casts between fp32 and bf16/fp16, AdamW, the sum of squares and inf/nan
 * count of a gradient, layernorm, the position and token embeddings (forward from a table of any
 * of the three types, and the table's gradient without atomics), fused softmax + cross-entropy on
 * the block-major logits (fp32, and 16-bit logits), SGD, stochastic rounding to bf16, conversion
 * and accumulation between fp32/bf16/fp16, narrowing and widening in place, MSE. AdamW and SGD
 * read a gradient of any of the three types and can write the 16-bit working copy of the
 * parameters in the same pass. Same layouts, same arguments and the
 * same semantics as kernels/cpu/ (kernels.h): backward kernels accumulate (+=) into fp32 gradients,
 * GELU's backward writes its 16-bit-capable dinp (=), casts round to nearest even through
 * core/half.h, the one definition both sides compile. The activation ops (GELU, residual's second
 * operand, layernorm's output) are templates on the storage type (ops.h's dt_ld/dt_st): widened
 * on load, computed in fp32, rounded once on store.
 *
 * Deterministic: no float atomics. Reductions run in a fixed grid (each block sums a fixed
 * strided set, then one block adds the partials in order). Reductions over rows (layernorm's
 * dweight/dbias, a bias's column sums) keep the CPU's order, cpu.h's DT_ROW_BLOCK: one thread per
 * (block of 64 rows, channel) sums its rows in order into a partial, then one thread per channel
 * adds the partials in block order, so dbias and the column sums are the CPU's bits. dwpe gives
 * each thread one column and adds the batches in order; a table's gradient (rows_add) adds each
 * element's rows in index order.
 *
 * The per-element formulas are kernels/formulas.h, compiled by both sides.
 *
 * Every launcher returns cudaSuccess or the launch's error; ops.h names the kernel for messages.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>
#include "core/half.h"
#include "kernels/formulas.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/plan.h"

#define THREADS 256
#define REDUCE_BLOCKS 256 /* fixed, so a sum is added in the same order on every run */

/* DTRUN_CUDA_TRY's kernels on trial (plan.h), set once as a context is made, before any launch */
static unsigned g_tries;

static unsigned blocks(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 65535u * 16u ? (b ? b : 1) : 65535u * 16u);
}

/* grid-stride loop: any n with a bounded grid */
#define FOR_EACH(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

static bool known(int t) { return t == DT_CUDA_F32 || t == DT_CUDA_BF16 || t == DT_CUDA_F16; }
static bool half16(int t) { return t == DT_CUDA_BF16 || t == DT_CUDA_F16; }

/* element i of x, of type t (fp32, bf16, fp16), as fp32; and f stored there rounded to t */
__device__ static inline float load(const void *x, int t, size_t i)
{
    if (t == DT_CUDA_F32) return ((const float *)x)[i];
    uint16_t h = ((const uint16_t *)x)[i];
    return t == DT_CUDA_BF16 ? dt_f32_from_bf16(h) : dt_f32_from_f16(h);
}

__device__ static inline void store(void *x, int t, size_t i, float f)
{
    if (t == DT_CUDA_F32) ((float *)x)[i] = f;
    else ((uint16_t *)x)[i] = t == DT_CUDA_BF16 ? dt_bf16_from_f32(f) : dt_f16_from_f32(f);
}

/* 16 bytes of S: elementwise kernels move their operands in these where every buffer is 16-byte
 * aligned (one 16-byte access instead of eight 2-byte ones), with the same arithmetic per element,
 * so the same bits as element by element */
template <typename S>
struct __align__(16) pack16 {
    S x[16 / sizeof(S)];
};
template <typename S>
constexpr int pack_n = (int)(16 / sizeof(S));
static bool aligned16(const void *p) { return (uintptr_t)p % 16 == 0; }
/* the grid of a packed launch: a thread per pack (the tail's few elements go to the first threads) */
template <typename S>
static unsigned pack_blocks(size_t N)
{
    return blocks((N + pack_n<S> - 1) / pack_n<S>);
}

/* with PACKED, thread j takes elements [E j, E j + E) (the last pack element by element) */
template <typename S, bool PACKED>
__global__ static void gelu_forward_kernel(S *out, const S *inp, size_t N)
{
    if (!PACKED) {
        FOR_EACH(i, N) dt_st(&out[i], dt_gelu(dt_ld(inp[i])));
        return;
    }
    constexpr int E = pack_n<S>;
    FOR_EACH(j, N / E)
    {
        pack16<S> a = ((const pack16<S> *)inp)[j], r;
        for (int k = 0; k < E; k++) dt_st(&r.x[k], dt_gelu(dt_ld(a.x[k])));
        ((pack16<S> *)out)[j] = r;
    }
    FOR_EACH(i, N % E) dt_st(&out[N / E * E + i], dt_gelu(dt_ld(inp[N / E * E + i])));
}

template <typename S, bool PACKED>
__global__ static void gelu_backward_kernel(S *dinp, const S *inp, const float *dout, size_t N)
{
    if (!PACKED) {
        FOR_EACH(i, N) dt_st(&dinp[i], dt_gelu_grad(dt_ld(inp[i])) * dout[i]);
        return;
    }
    constexpr int E = pack_n<S>;
    FOR_EACH(j, N / E)
    {
        pack16<S> a = ((const pack16<S> *)inp)[j], r;
        float d[E];
        for (int q = 0; q < E / 4; q++) {
            float4 f = ((const float4 *)dout)[j * (E / 4) + q];
            d[4 * q] = f.x, d[4 * q + 1] = f.y, d[4 * q + 2] = f.z, d[4 * q + 3] = f.w;
        }
        for (int k = 0; k < E; k++) dt_st(&r.x[k], dt_gelu_grad(dt_ld(a.x[k])) * d[k]);
        ((pack16<S> *)dinp)[j] = r;
    }
    size_t i0 = N / E * E;
    FOR_EACH(i, N % E) dt_st(&dinp[i0 + i], dt_gelu_grad(dt_ld(inp[i0 + i])) * dout[i0 + i]);
}

template <typename S>
__global__ static void residual_kernel(float *out, const float *a, const S *b, size_t N)
{
    FOR_EACH(i, N) out[i] = a[i] + dt_ld(b[i]);
}

/* the residual add on trial (resid2, plan.h): 8 elements a thread, a and out as two float4 and b as 8
 * values of S in one or two 16-byte loads (a and out aligned to 32 bytes, b to 8 of its elements:
 * the launcher checks), the tail one by one; the same sum per element */
template <typename T>
struct __align__(8 * sizeof(T)) pack8 {
    T x[8];
};
template <typename S>
__global__ static void residual8_kernel(float *out, const float *a, const S *b, size_t N)
{
    FOR_EACH(j, N / 8)
    {
        pack8<float> x = reinterpret_cast<const pack8<float> *>(a)[j], r;
        pack8<S> y = reinterpret_cast<const pack8<S> *>(b)[j];
#pragma unroll
        for (int k = 0; k < 8; k++) r.x[k] = x.x[k] + dt_ld(y.x[k]);
        reinterpret_cast<pack8<float> *>(out)[j] = r;
    }
    size_t i0 = N / 8 * 8;
    FOR_EACH(i, N % 8) out[i0 + i] = a[i0 + i] + dt_ld(b[i0 + i]);
}

__global__ static void cast_to_lp_kernel(uint16_t *dst, const float *src, size_t n, int bf16)
{
    FOR_EACH(i, n) dst[i] = bf16 ? dt_bf16_from_f32(src[i]) : dt_f16_from_f32(src[i]);
}

__global__ static void cast_from_lp_kernel(float *dst, const uint16_t *src, size_t n, int bf16)
{
    FOR_EACH(i, n) dst[i] = bf16 ? dt_f32_from_bf16(src[i]) : dt_f32_from_f16(src[i]);
}

__global__ static void round_lp_kernel(float *dst, const float *src, size_t n, int bf16)
{
    FOR_EACH(i, n) dst[i] = bf16 ? dt_f32_from_bf16(dt_bf16_from_f32(src[i])) : dt_f32_from_f16(dt_f16_from_f32(src[i]));
}

/* the gradient of type gt widened as it is read; plp (type pt) not NULL: the updated parameter
 * rounded into it too, so mixed precision's 16-bit copy costs no pass of its own */
__device__ static inline void adamw_at(float *param, const void *grad, int gt, float gscale, float l2, float *m,
                                       float *v, size_t i, float lr, float beta1, float beta2, float eps, float wd,
                                       float step, float rbc2, void *plp, int pt)
{
    dt_adamw_one(&param[i], &m[i], &v[i], dt_adamw_grad(load(grad, gt, i), gscale, l2, param[i]), lr, beta1, beta2,
                 eps, wd, step, rbc2);
    if (plp) store(plp, pt, i, param[i]);
}

__global__ static void adamw_kernel(float *param, const void *grad, int gt, float gscale, float l2, float *m, float *v,
                                    size_t n, float lr, float beta1, float beta2, float eps, float wd, float step,
                                    float rbc2, void *plp, int pt)
{
    FOR_EACH(i, n) adamw_at(param, grad, gt, gscale, l2, m, v, i, lr, beta1, beta2, eps, wd, step, rbc2, plp, pt);
}

/* elements of the step's element space a block of adamw_slices_kernel updates */
#define SLICE_CHUNK 4096

/* Block b updates elements [b * SLICE_CHUNK, (b + 1) * SLICE_CHUNK) of the slices laid end to end:
 * it finds the slice of its first element by bisection, and each thread steps on to the next slice
 * as its elements pass the end of one (they only grow). */
__device__ static inline int slice_of(const struct dt_cuda_slice_dev *s, int ns, size_t first)
{
    int k = 0, hi = ns - 1;
    while (k < hi) {
        int mid = (k + hi + 1) / 2;
        if (s[mid].start <= first) k = mid;
        else hi = mid - 1;
    }
    return k;
}

__global__ static void adamw_slices_kernel(const struct dt_cuda_slice_dev *s, int ns, size_t total, int gt,
                                           float gscale, float lr, float beta1, float beta2, float eps, float step,
                                           float rbc2, int pt)
{
    size_t first = (size_t)blockIdx.x * SLICE_CHUNK, end = first + SLICE_CHUNK < total ? first + SLICE_CHUNK : total;
    int k = slice_of(s, ns, first);
    for (size_t g = first + threadIdx.x; g < end; g += blockDim.x) {
        while (g >= s[k].start + s[k].n) k++;
        const struct dt_cuda_slice_dev *d = &s[k];
        adamw_at(d->param, d->grad, gt, gscale, d->l2, d->m, d->v, g - d->start, lr, beta1, beta2, eps, d->wd, step,
                 rbc2, d->plp, pt);
    }
}

/* AdamW on trial (adam2, plan.h): adamw_slices_kernel's blocks with the gradient's type G and the
 * 16-bit copy's L fixed at compile time, each thread taking 8 consecutive elements of the step's
 * element space: in packs (pack8) where the 8 are one pack of one slice whose buffers are aligned to
 * packs, else one by one; dt_adamw_one on each, as adamw_at, so the same bits */
template <typename G, typename L>
__device__ static inline void adamw2_one(const struct dt_cuda_slice_dev *d, size_t i, float gscale, float lr,
                                         float beta1, float beta2, float eps, float step, float rbc2)
{
    float g = dt_adamw_grad(dt_ld(((const G *)d->grad)[i]), gscale, d->l2, d->param[i]);
    dt_adamw_one(&d->param[i], &d->m[i], &d->v[i], g, lr, beta1, beta2, eps, d->wd, step, rbc2);
    if (d->plp) dt_st(&((L *)d->plp)[i], d->param[i]);
}

template <typename G, typename L>
__global__ static void adamw2_slices_kernel(const struct dt_cuda_slice_dev *s, int ns, size_t total, float gscale,
                                            float lr, float beta1, float beta2, float eps, float step, float rbc2)
{
    size_t first = (size_t)blockIdx.x * SLICE_CHUNK, end = first + SLICE_CHUNK < total ? first + SLICE_CHUNK : total;
    int k = slice_of(s, ns, first);
    for (size_t g0 = first + threadIdx.x * 8; g0 < end; g0 += blockDim.x * 8) {
        while (g0 >= s[k].start + s[k].n) k++;
        const struct dt_cuda_slice_dev *d = &s[k];
        size_t i0 = g0 - d->start;
        /* the slice's pointers in registers (the stores below could alias the table) and the pack
         * by its index: both let nvcc keep the 16- and 32-byte accesses */
        pack8<float> *pp = reinterpret_cast<pack8<float> *>(d->param), *mp = reinterpret_cast<pack8<float> *>(d->m);
        pack8<float> *vp = reinterpret_cast<pack8<float> *>(d->v);
        const pack8<G> *gp = reinterpret_cast<const pack8<G> *>(d->grad);
        pack8<L> *lp = reinterpret_cast<pack8<L> *>(d->plp);
        float l2 = d->l2, wd = d->wd;
        uintptr_t f32 = (uintptr_t)pp | (uintptr_t)mp | (uintptr_t)vp;
        if (i0 % 8 == 0 && i0 + 8 <= d->n && f32 % sizeof(pack8<float>) == 0 && (uintptr_t)gp % sizeof(pack8<G>) == 0 &&
            (uintptr_t)lp % sizeof(pack8<L>) == 0) {
            size_t q = i0 / 8;
            pack8<float> p = pp[q], m = mp[q], v = vp[q];
            pack8<G> gr = gp[q];
#pragma unroll
            for (int j = 0; j < 8; j++)
                dt_adamw_one(&p.x[j], &m.x[j], &v.x[j], dt_adamw_grad(dt_ld(gr.x[j]), gscale, l2, p.x[j]), lr, beta1,
                             beta2, eps, wd, step, rbc2);
            pp[q] = p;
            mp[q] = m;
            vp[q] = v;
            if (lp) {
                pack8<L> c;
#pragma unroll
                for (int j = 0; j < 8; j++) dt_st(&c.x[j], p.x[j]);
                lp[q] = c;
            }
        } else {
            for (size_t g = g0, kk = k; g < g0 + 8 && g < end; g++) {
                while (g >= s[kk].start + s[kk].n) kk++;
                adamw2_one<G, L>(&s[kk], g - s[kk].start, gscale, lr, beta1, beta2, eps, step, rbc2);
            }
        }
    }
}

/* the block's sums of acc and nb in a fixed tree, into partial and bad at the block's index */
__device__ static inline void block_partial(double *partial, unsigned long long *bad, double acc, unsigned long long nb)
{
    __shared__ double s[THREADS];
    __shared__ unsigned long long b[THREADS];
    s[threadIdx.x] = acc;
    b[threadIdx.x] = nb;
    __syncthreads();
    for (unsigned w = THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) {
            s[threadIdx.x] += s[threadIdx.x + w];
            b[threadIdx.x] += b[threadIdx.x + w];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = s[0];
        bad[blockIdx.x] = b[0];
    }
}

/* Block sums into partial[blockIdx.x]: a fixed tree over a fixed strided set of elements. */
__global__ static void sumsq_partial_kernel(double *partial, unsigned long long *bad, const void *x, int t, size_t n)
{
    double acc = 0;
    unsigned long long nb = 0;
    FOR_EACH(i, n)
    {
        float f = load(x, t, i);
        acc += (double)f * f;
        nb += !isfinite(f);
    }
    block_partial(partial, bad, acc, nb);
}

/* sumsq_partial_kernel on trial (norm2, plan.h): S the storage type, the elements moved 16 bytes at a
 * time from x's first 16-byte boundary (the head before it and the tail after the last pack one by
 * one), NORM2_BLOCKS blocks: a fixed grid, so the same partition and bits on every run and GPU */
#define NORM2_BLOCKS 1024
template <typename S>
__global__ static void __launch_bounds__(THREADS) sumsq2_partial_kernel(double *partial, unsigned long long *bad,
                                                                        const S *x, size_t n)
{
    constexpr int E = pack_n<S>;
    double acc = 0;
    unsigned long long nb = 0;
    size_t head = (16 - (uintptr_t)x % 16) % 16 / sizeof(S);
    head = head < n ? head : n;
    size_t packs = (n - head) / E, tail = head + packs * E;
    auto add = [&](float f) {
        acc += (double)f * f;
        nb += !isfinite(f);
    };
    FOR_EACH(i, head) add(dt_ld(x[i]));
    const pack16<S> *p = reinterpret_cast<const pack16<S> *>(x + head);
    FOR_EACH(j, packs)
    {
        pack16<S> a = p[j];
#pragma unroll
        for (int k = 0; k < E; k++) add(dt_ld(a.x[k]));
    }
    FOR_EACH(i, n - tail) add(dt_ld(x[tail + i]));
    block_partial(partial, bad, acc, nb);
}

/* One warp adds the partials in a fixed order (lane l the partials l, l + 32, ..., then the lanes'
 * sums in a fixed tree), and leaves both results in partial[0..1] for one copy to the host. A single
 * thread walking all of them took ~19 us, on the step's critical path 22 times a step. */
__global__ static void sumsq_final_kernel(double *partial, unsigned long long *bad, int nblocks)
{
    unsigned l = threadIdx.x;
    double s = 0;
    unsigned long long nb = 0;
    for (int i = (int)l; i < nblocks; i += 32) s += partial[i], nb += bad[i];
    for (unsigned w = 16; w > 0; w >>= 1) { /* the shuffles also order every lane's reads before lane 0's writes */
        s += __shfl_down_sync(0xffffffffu, s, w);
        nb += __shfl_down_sync(0xffffffffu, nb, w);
    }
    if (l == 0) partial[0] = s, ((unsigned long long *)partial)[1] = nb;
}

/* a warp's sum of x, on every lane with the same bits (each level adds the same pair on both lanes) */
__device__ static inline float warp_sum(float x)
{
    for (unsigned w = 16; w > 0; w >>= 1) x += __shfl_xor_sync(0xffffffffu, x, w);
    return x;
}

/* The row-wise layernorm kernels run a warp per row, LN_ROWS rows a block: a row of GPT-2's 768 is
 * 24 values a lane, and a warp's shuffles replace a block's shared-memory tree and its 16
 * __syncthreads (one block per row took 61 us forward, 81 backward, at 16 x 1024 rows on an H200). */
#define LN_ROWS (THREADS / 32)
static unsigned ln_blocks(int BT) { return (unsigned)((BT + LN_ROWS - 1) / LN_ROWS); }

/* Mean, then the variance around it (two passes, as the CPU kernel); out of type S, rounded once. */
template <typename S>
__global__ static void layernorm_forward_kernel(S *out, float *mean, float *rstd, const float *inp,
                                                const float *weight, const float *bias, int BT, int C)
{
    int r = blockIdx.x * LN_ROWS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= BT) return;
    const float *x = inp + (size_t)r * C;
    float m = 0;
    for (int c = lane; c < C; c += 32) m += x[c];
    m = warp_sum(m) / C;
    float var = 0;
    for (int c = lane; c < C; c += 32) var += (x[c] - m) * (x[c] - m);
    float s = 1.0f / sqrtf(warp_sum(var) / C + 1e-5f);
    S *o = out + (size_t)r * C;
    for (int c = lane; c < C; c += 32) dt_st(&o[c], (x[c] - m) * s * weight[c] + bias[c]);
    if (lane == 0) mean[r] = m, rstd[r] = s;
}

/* dinp, a warp per row; lp not NULL: the sum also rounded into it */
template <typename S>
__global__ static void layernorm_dinp_kernel(float *dinp, S *lp, const float *dout, const float *inp,
                                             const float *weight, const float *mean, const float *rstd, int BT, int C)
{
    int r = blockIdx.x * LN_ROWS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= BT) return;
    size_t row = (size_t)r * C;
    const float *dy = dout + row, *x = inp + row;
    float m = mean[r], s = rstd[r], a = 0, b = 0;
    for (int c = lane; c < C; c += 32) {
        float norm = (x[c] - m) * s, dnorm = weight[c] * dy[c];
        a += dnorm;
        b += dnorm * norm;
    }
    float dnorm_mean = warp_sum(a) / C, dnorm_norm_mean = warp_sum(b) / C;
    for (int c = lane; c < C; c += 32) {
        float norm = (x[c] - m) * s, dnorm = weight[c] * dy[c];
        float d = dinp[row + c] + (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        dinp[row + c] = d;
        if (lp) dt_st(&lp[row + c], d);
    }
}

/*
 * The reductions over rows in the CPU's order (ops.h, cpu.h's DT_ROW_BLOCK). The partial kernels run
 * one thread per (block of rows blockIdx.x, channel), the threads of a warp on adjacent channels, so
 * each row's read is coalesced; each sums its block's rows in order from 0 into partial[block][c].
 * The sums have no multiply for nvcc to fuse into them: dbias and column sums are the CPU's bits
 * (dweight's terms, a product, may be fused differently on either side).
 */
size_t dt_cuda_row_partials(int BT, int C)
{
    return BT > 0 && C > 0 ? (size_t)((BT + DT_CUDA_ROW_BLOCK - 1) / DT_CUDA_ROW_BLOCK) * (size_t)C : 0;
}

/* the grid of the partial kernels: x the row blocks, y the channels' blocks of THREADS */
static bool row_grid(int BT, int C, dim3 *grid)
{
    unsigned cb = (unsigned)((C + THREADS - 1) / THREADS);
    if (BT <= 0 || C <= 0 || cb > 65535u) return false;
    *grid = dim3((unsigned)((BT + DT_CUDA_ROW_BLOCK - 1) / DT_CUDA_ROW_BLOCK), cb);
    return true;
}

/* layernorm: pw[block][c] = sum of (x - mean) * rstd * dy, pb[block][c] = sum of dy, rows in order */
__global__ static void layernorm_partials_kernel(float *pw, float *pb, const float *dout, const float *inp,
                                                 const float *mean, const float *rstd, int BT, int C)
{
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    int r0 = blockIdx.x * DT_CUDA_ROW_BLOCK, r1 = min(BT, r0 + DT_CUDA_ROW_BLOCK);
    float w = 0.0f, b = 0.0f;
    for (int i = r0; i < r1; i++) {
        size_t at = (size_t)i * C + c;
        float dy = dout[at];
        w += (inp[at] - mean[i]) * rstd[i] * dy;
        b += dy;
    }
    pw[(size_t)blockIdx.x * C + c] = w;
    pb[(size_t)blockIdx.x * C + c] = b;
}

/* column sums of x (BT, C) of type S, widened (BF16: then rounded to bf16): p[block][c] = sum of the
 * block's rows, in order */
template <typename S, bool BF16>
__global__ static void colsum_partials_kernel(float *p, const S *x, int BT, int C)
{
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    int r0 = blockIdx.x * DT_CUDA_ROW_BLOCK, r1 = min(BT, r0 + DT_CUDA_ROW_BLOCK);
    float s = 0.0f;
    for (int i = r0; i < r1; i++) {
        float v = dt_ld(x[(size_t)i * C + c]);
        s += BF16 ? dt_f32_from_bf16(dt_bf16_from_f32(v)) : v;
    }
    p[(size_t)blockIdx.x * C + c] = s;
}

/* out[c] += (set: =) the nblk partials of channel c added in block order, from 0 */
__global__ static void partials_sum_kernel(float *out, const float *p, int nblk, int C, int set)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float t = 0.0f;
    for (int r = 0; r < nblk; r++) t += p[(size_t)r * C + c];
    out[c] = set ? t : out[c] + t;
}

/* RMSNorm forward, one block per row: the sum of squares by a fixed tree, out rounded once */
template <typename S>
__global__ static void rmsnorm_forward_kernel(S *out, float *rstd, const float *inp, const float *weight, float eps,
                                              int C)
{
    __shared__ float red[THREADS];
    const float *x = inp + (size_t)blockIdx.x * C;
    float ss = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) ss += x[c] * x[c];
    red[threadIdx.x] = ss;
    __syncthreads();
    for (unsigned w = THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
        __syncthreads();
    }
    float s = 1.0f / sqrtf(red[0] / C + eps);
    S *o = out + (size_t)blockIdx.x * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dt_st(&o[c], x[c] * s * weight[c]);
    if (threadIdx.x == 0) rstd[blockIdx.x] = s;
}

/* RMSNorm on trial (rms2, plan.h): a warp per row, LN_ROWS rows a block, as layernorm's kernels; the
 * sums of each lane's columns then the warp's shuffles (another order than the block's tree above) */
template <typename S>
__global__ static void rmsnorm2_forward_kernel(S *out, float *rstd, const float *inp, const float *weight, float eps,
                                               int BT, int C)
{
    int r = blockIdx.x * LN_ROWS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= BT) return;
    const float *x = inp + (size_t)r * C;
    float ss = 0;
    for (int c = lane; c < C; c += 32) ss += x[c] * x[c];
    float s = 1.0f / sqrtf(warp_sum(ss) / C + eps);
    S *o = out + (size_t)r * C;
    for (int c = lane; c < C; c += 32) dt_st(&o[c], x[c] * s * weight[c]);
    if (lane == 0) rstd[r] = s;
}

template <typename S>
__global__ static void rmsnorm2_dinp_kernel(float *dinp, S *lp, const float *dout, const float *inp,
                                            const float *weight, const float *rstd, int BT, int C)
{
    int r = blockIdx.x * LN_ROWS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= BT) return;
    size_t row = (size_t)r * C;
    const float *dy = dout + row, *x = inp + row;
    float s = rstd[r], a = 0;
    for (int c = lane; c < C; c += 32) a += weight[c] * dy[c] * x[c];
    float k = warp_sum(a) / C * s * s * s;
    for (int c = lane; c < C; c += 32) {
        float d = dinp[row + c] + (s * weight[c] * dy[c] - x[c] * k);
        dinp[row + c] = d;
        if (lp) dt_st(&lp[row + c], d);
    }
}

/* RMSNorm's dinp, one block per row: dx += s w dy - x s^3 mean(w dy x); lp not NULL: rounded too */
template <typename S>
__global__ static void rmsnorm_dinp_kernel(float *dinp, S *lp, const float *dout, const float *inp,
                                           const float *weight, const float *rstd, int C)
{
    __shared__ float red[THREADS];
    size_t row = (size_t)blockIdx.x * C;
    const float *dy = dout + row, *x = inp + row;
    float s = rstd[blockIdx.x], a = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) a += weight[c] * dy[c] * x[c];
    red[threadIdx.x] = a;
    __syncthreads();
    for (unsigned w = THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
        __syncthreads();
    }
    float k = red[0] / C * s * s * s;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float d = dinp[row + c] + (s * weight[c] * dy[c] - x[c] * k);
        dinp[row + c] = d;
        if (lp) dt_st(&lp[row + c], d);
    }
}

/* RMSNorm's dweight partials: x s dy over each block of rows, in row order */
__global__ static void rmsnorm_partials_kernel(float *pw, const float *dout, const float *inp, const float *rstd,
                                               int BT, int C)
{
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    int r0 = blockIdx.x * DT_CUDA_ROW_BLOCK, r1 = min(BT, r0 + DT_CUDA_ROW_BLOCK);
    float w = 0.0f;
    for (int i = r0; i < r1; i++) {
        size_t at = (size_t)i * C + c;
        w += inp[at] * rstd[i] * dout[at];
    }
    pw[(size_t)blockIdx.x * C + c] = w;
}

/* one thread per (row, head, pair) of the NH + NKV rotated heads of each (B*T) row */
template <typename S>
__global__ static void rope_kernel(S *qkv, const float *cs, int T, int NH, int NKV, int hs, size_t rows, float dir)
{
    int half = hs / 2, heads = NH + NKV;
    size_t n = rows * heads * half, width = (size_t)(NH + 2 * NKV) * hs;
    FOR_EACH(j, n)
    {
        size_t r = j / ((size_t)heads * half);
        int rest = (int)(j % ((size_t)heads * half)), h = rest / half, i = rest % half;
        const float *c = cs + (size_t)(r % T) * hs;
        S *x = qkv + r * width + (size_t)h * hs;
        float a = dt_ld(x[i]), b = dt_ld(x[i + half]);
        dt_rope_pair(&a, &b, c[i], c[half + i], dir);
        dt_st(&x[i], a);
        dt_st(&x[i + half], b);
    }
}

template <typename S>
__global__ static void swiglu_forward_kernel(S *out, const S *inp, size_t BT, int H)
{
    FOR_EACH(j, BT * H)
    {
        size_t r = j / H, i = j % H;
        const S *row = inp + r * 2 * H;
        dt_st(&out[j], dt_silu(dt_ld(row[i])) * dt_ld(row[H + i]));
    }
}

/* SwiGLU on trial (swiglu2, plan.h): thread p of grid row r takes columns 8p..8p+7 of rows r,
 * r + gridDim.y, ..., in packs (pack8: the launcher checks H and the alignment), the same arithmetic
 * per element as the kernels in use; no division */
template <typename S>
__global__ static void swiglu2_forward_kernel(S *out, const S *inp, size_t BT, int H)
{
    int p = blockIdx.x * blockDim.x + threadIdx.x, H8 = H / 8;
    if (p >= H8) return;
    for (size_t r = blockIdx.y; r < BT; r += gridDim.y) {
        const pack8<S> *row = reinterpret_cast<const pack8<S> *>(inp + r * 2 * H);
        pack8<S> g = row[p], u = row[H8 + p], o;
#pragma unroll
        for (int k = 0; k < 8; k++) dt_st(&o.x[k], dt_silu(dt_ld(g.x[k])) * dt_ld(u.x[k]));
        reinterpret_cast<pack8<S> *>(out + r * H)[p] = o;
    }
}

template <typename S>
__global__ static void swiglu2_backward_kernel(S *dinp, const S *inp, const float *dout, size_t BT, int H)
{
    int p = blockIdx.x * blockDim.x + threadIdx.x, H8 = H / 8;
    if (p >= H8) return;
    for (size_t r = blockIdx.y; r < BT; r += gridDim.y) {
        const pack8<S> *row = reinterpret_cast<const pack8<S> *>(inp + r * 2 * H);
        pack8<S> gp = row[p], up = row[H8 + p], dg, du;
        pack8<float> dyp = reinterpret_cast<const pack8<float> *>(dout + r * H)[p];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float g = dt_ld(gp.x[k]), u = dt_ld(up.x[k]), dy = dyp.x[k];
            dt_st(&dg.x[k], dy * u * dt_silu_grad(g));
            dt_st(&du.x[k], dy * dt_silu(g));
        }
        pack8<S> *drow = reinterpret_cast<pack8<S> *>(dinp + r * 2 * H);
        drow[p] = dg;
        drow[H8 + p] = du;
    }
}

template <typename S>
__global__ static void swiglu_backward_kernel(S *dinp, const S *inp, const float *dout, size_t BT, int H)
{
    FOR_EACH(j, BT * H)
    {
        size_t r = j / H, i = j % H;
        const S *row = inp + r * 2 * H;
        S *drow = dinp + r * 2 * H;
        float g = dt_ld(row[i]), u = dt_ld(row[H + i]), dy = dout[j];
        dt_st(&drow[i], dy * u * dt_silu_grad(g));
        dt_st(&drow[H + i], dy * dt_silu(g));
    }
}

__global__ static void position_forward_kernel(float *out, const float *wpe, int B, int T, int C)
{
    size_t n = (size_t)B * T * C, tc = (size_t)T * C;
    FOR_EACH(i, n) out[i] = wpe[i % tc];
}

/* one thread per (t, c), batches in order */
__global__ static void position_backward_kernel(float *dwpe, const float *dout, int B, int T, int C)
{
    size_t tc = (size_t)T * C;
    FOR_EACH(i, tc)
    {
        float s = dwpe[i];
        for (int b = 0; b < B; b++) s += dout[(size_t)b * tc + i];
        dwpe[i] = s;
    }
}

/* one thread per element of the n x C output; tokens outside [v0, v0 + nv) are another table block's;
 * the table of type t (fp32, bf16, fp16) */
__global__ static void rows_forward_kernel(float *out, const int32_t *inp, const void *table, int t, int v0, int nv,
                                           int n, int C)
{
    FOR_EACH(e, (size_t)n * C)
    {
        size_t i = e / C, c = e % C;
        int r = inp[i] - v0;
        if (r >= 0 && r < nv) out[e] += load(table, t, (size_t)r * C + c);
    }
}

/*
 * A table's gradient (dst of type S holds elements [lo, lo + n) of a (rows, width) table), without
 * atomics and in the CPU's order: each element gets its entries i = 0..nrows-1 added in index order
 * (a 16-bit element rounded after each add, as the CPU does). The table rows that dst overlaps,
 * [r0, r1], are dealt round-robin to the blocks: block g owns rows r0 + g, r0 + g + groups, ... and
 * walks the entries in order, THREADS at a time: the entries of this stretch that land on its rows
 * are listed in shared memory in index order (a ballot per warp, the warps' counts added in warp
 * order), then the block's threads, over the columns, add those entries' rows in list order. One
 * thread owns each (row, column) of dst, so no two threads ever touch one element. A repeated token
 * costs its block one row per repeat; the walk over the entries, one int each, is what every block
 * pays.
 */
#define ROWS_ADD_GROUPS 1024u

template <typename S>
__global__ static void __launch_bounds__(THREADS)
    rows_add_kernel(S *dst, size_t lo, size_t n, const int32_t *rows, const float *vals, int nrows, int width,
                    size_t r0, size_t r1, unsigned groups)
{
    __shared__ int list_i[THREADS];
    __shared__ size_t list_start[THREADS];
    __shared__ int counts[THREADS / 32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int base = 0; base < nrows; base += THREADS) {
        int i = base + (int)threadIdx.x;
        int r = i < nrows ? rows[i] : -1;
        bool mine = r >= 0 && (size_t)r >= r0 && (size_t)r <= r1 && ((size_t)r - r0) % groups == blockIdx.x;
        unsigned ballot = __ballot_sync(0xffffffffu, mine);
        if (lane == 0) counts[warp] = __popc(ballot);
        __syncthreads();
        int before = 0, total = 0;
        for (int w = 0; w < THREADS / 32; w++) {
            before += w < warp ? counts[w] : 0;
            total += counts[w];
        }
        if (mine) {
            int at = before + __popc(ballot & ((1u << lane) - 1u));
            list_i[at] = i;
            list_start[at] = (size_t)r * (size_t)width;
        }
        __syncthreads();
        for (int k = 0; k < total; k++) {
            const float *v = vals + (size_t)list_i[k] * (size_t)width;
            size_t start = list_start[k];
            for (int c = threadIdx.x; c < width; c += THREADS) {
                size_t e = start + (size_t)c;
                if (e < lo || e >= lo + n) continue;
                dt_st(&dst[e - lo], dt_ld(dst[e - lo]) + v[c]);
            }
        }
        __syncthreads(); /* the next stretch rewrites the list and the counts */
    }
}

/* element (i, v) of a block-major (BT, V) buffer (kernels.h) */
__device__ static inline size_t block_major(int i, int v, int BT, int V, int vb)
{
    int v0 = v / vb * vb, n = V - v0 < vb ? V - v0 : vb;
    return (size_t)BT * v0 + (size_t)i * n + (size_t)(v - v0);
}

/* a logit as fp32, and a gradient stored back: fp32 as it is, 16-bit (t) widened and rounded */
__device__ static inline float widen(float x, int) { return x; }
__device__ static inline float widen(uint16_t x, int t)
{
    return t == DT_CUDA_BF16 ? dt_f32_from_bf16(x) : dt_f32_from_f16(x);
}
__device__ static inline void put(float *x, float v, int) { *x = v; }
__device__ static inline void put(uint16_t *x, float v, int t)
{
    *x = t == DT_CUDA_BF16 ? dt_bf16_from_f32(v) : dt_f16_from_f32(v);
}

/* The row's segment in vocabulary block v0 (n columns, at seg) into row[v0, v0 + n) of shared memory,
 * 16 bytes at a time from the first 16-byte boundary on; returns the thread's max of what it moved
 * (a max is the same in any order). */
template <typename L>
__device__ static inline float segment_in(L *row, const L *seg, int n, int t)
{
    constexpr int E = pack_n<L>;
    int head = (int)((16 - (uintptr_t)seg % 16) % 16 / sizeof(L));
    head = head < n ? head : n;
    int packs = (n - head) / E;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < head; j += blockDim.x) row[j] = seg[j], mx = fmaxf(mx, widen(seg[j], t));
    const pack16<L> *p = reinterpret_cast<const pack16<L> *>(seg + head);
    for (int j = threadIdx.x; j < packs; j += blockDim.x) {
        pack16<L> x = p[j];
#pragma unroll
        for (int k = 0; k < E; k++) row[head + j * E + k] = x.x[k], mx = fmaxf(mx, widen(x.x[k], t));
    }
    for (int j = head + packs * E + threadIdx.x; j < n; j += blockDim.x) row[j] = seg[j], mx = fmaxf(mx, widen(seg[j], t));
    return mx;
}

/* the gradient of the segment from its logits in row (elementwise: any order gives the same bits) */
template <typename L>
__device__ static inline void segment_out(L *seg, const L *row, int n, int v0, int y, float lse, float dloss, int t)
{
    constexpr int E = pack_n<L>;
    int head = (int)((16 - (uintptr_t)seg % 16) % 16 / sizeof(L));
    head = head < n ? head : n;
    int packs = (n - head) / E;
    for (int j = threadIdx.x; j < head; j += blockDim.x)
        put(&seg[j], expf(widen(row[j], t) - lse) * dloss - (v0 + j == y ? dloss : 0.0f), t);
    pack16<L> *p = reinterpret_cast<pack16<L> *>(seg + head);
    for (int j = threadIdx.x; j < packs; j += blockDim.x) {
        pack16<L> x;
#pragma unroll
        for (int k = 0; k < E; k++) {
            int c = head + j * E + k;
            put(&x.x[k], expf(widen(row[c], t) - lse) * dloss - (v0 + c == y ? dloss : 0.0f), t);
        }
        p[j] = x;
    }
    for (int j = head + packs * E + threadIdx.x; j < n; j += blockDim.x)
        put(&seg[j], expf(widen(row[j], t) - lse) * dloss - (v0 + j == y ? dloss : 0.0f), t);
}

/* One block per row: the max, the sum of exponentials (in double), the loss; with dloss, the
 * gradient in place. L: float, or uint16_t for logits of type t. The sum adds each thread's columns
 * tid, tid + THREADS, ... in that order, then the threads' sums in a fixed tree: the same bits run
 * to run, with or without ROW. With ROW the row is read from global memory once, 16 bytes at a time,
 * into shared memory (V elements of L; dt_xent_row_fits), and the gradient written from there: one
 * read and one write of the logits instead of three reads and a write. */
template <typename L, bool ROW>
__global__ static void softmax_xent_kernel(float *losses, L *logits, const int32_t *targets, float dloss, int BT, int V,
                                           int vb, int t)
{
    extern __shared__ __align__(16) unsigned char xent_smem[];
    L *row = reinterpret_cast<L *>(xent_smem);
    __shared__ float mx_s[THREADS];
    __shared__ double sum_s[THREADS];
    int i = blockIdx.x, y = targets[i];
    float mx = -INFINITY;
    struct dt_row_walk w = dt_row_start(i, V, vb);
    if (ROW) {
        for (int v0 = 0; v0 < V; v0 += vb) {
            int n = V - v0 < vb ? V - v0 : vb;
            mx = fmaxf(mx, segment_in(row + v0, logits + (size_t)BT * v0 + (size_t)i * n, n, t));
        }
    } else {
        for (int v = threadIdx.x; v < V; v += blockDim.x) mx = fmaxf(mx, widen(logits[dt_row_at(&w, v, i, BT, V, vb)], t));
    }
    mx_s[threadIdx.x] = mx;
    __syncthreads();
    for (unsigned s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) mx_s[threadIdx.x] = fmaxf(mx_s[threadIdx.x], mx_s[threadIdx.x + s]);
        __syncthreads();
    }
    mx = mx_s[0];
    double sum = 0;
    w = dt_row_start(i, V, vb);
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        sum += expf(widen(ROW ? row[v] : logits[dt_row_at(&w, v, i, BT, V, vb)], t) - mx);
    sum_s[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sum_s[threadIdx.x] += sum_s[threadIdx.x + s];
        __syncthreads();
    }
    float lse = mx + (float)log(sum_s[0]);
    if (threadIdx.x == 0) losses[i] = lse - widen(ROW ? row[y] : logits[block_major(i, y, BT, V, vb)], t);
    if (dloss == 0) return;
    if (ROW) {
        for (int v0 = 0; v0 < V; v0 += vb) {
            int n = V - v0 < vb ? V - v0 : vb;
            segment_out(logits + (size_t)BT * v0 + (size_t)i * n, row + v0, n, v0, y, lse, dloss, t);
        }
        return;
    }
    __syncthreads(); /* the loss has read the target's logit before it is overwritten */
    w = dt_row_start(i, V, vb);
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        L *x = &logits[dt_row_at(&w, v, i, BT, V, vb)];
        put(x, expf(widen(*x, t) - lse) * dloss - (v == y ? dloss : 0.0f), t);
    }
}

/*
 * softmax_xent on trial (xent2, plan.h): one block of XENT2_THREADS a row and nothing in shared
 * memory but the reductions, so a GPU holds many rows at once (the kernel above holds two a
 * multiprocessor when its 98 KiB row is in shared memory). Three passes over the row's segments
 * in 16-byte packs: the max, the sum of exponentials in double, the gradient in place; the second
 * and third mostly from L2. The same arithmetic as the kernel above, the sum's terms grouped by
 * other threads.
 */
#define XENT2_THREADS 1024

/* f(x, j) for each element x = seg[j] of a row's segment of n, 16 bytes at a time from the first
 * 16-byte boundary; with WRITE, x is a reference and the pack is stored back */
template <bool WRITE, typename L, typename F>
__device__ static inline void each_in_segment(L *seg, int n, F f)
{
    constexpr int E = pack_n<L>;
    int head = (int)((16 - (uintptr_t)seg % 16) % 16 / sizeof(L));
    head = head < n ? head : n;
    int packs = (n - head) / E;
    for (int j = threadIdx.x; j < head; j += blockDim.x) f(seg[j], j);
    pack16<L> *p = reinterpret_cast<pack16<L> *>(seg + head);
    for (int j = threadIdx.x; j < packs; j += blockDim.x) {
        pack16<L> x = p[j];
#pragma unroll
        for (int k = 0; k < E; k++) f(x.x[k], head + j * E + k);
        if (WRITE) p[j] = x;
    }
    for (int j = head + packs * E + threadIdx.x; j < n; j += blockDim.x) f(seg[j], j);
}

/* A block's max and sum (blockDim.x a multiple of 32, at most 1024), each thread's value combined in
 * a fixed tree: each warp's by shuffles, then every warp the same tree over the warps' results from
 * shared memory, so every thread gets the same bits. sh: blockDim.x / 32 values, used once. */
__device__ static inline float block_max(float x, float *sh)
{
    for (unsigned w = 16; w > 0; w >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, w));
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = x;
    __syncthreads();
    x = threadIdx.x % 32 < blockDim.x / 32 ? sh[threadIdx.x % 32] : -INFINITY;
    for (unsigned w = 16; w > 0; w >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, w));
    return x;
}
__device__ static inline double block_sum(double x, double *sh)
{
    for (unsigned w = 16; w > 0; w >>= 1) x += __shfl_xor_sync(0xffffffffu, x, w);
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = x;
    __syncthreads();
    x = threadIdx.x % 32 < blockDim.x / 32 ? sh[threadIdx.x % 32] : 0.0;
    for (unsigned w = 16; w > 0; w >>= 1) x += __shfl_xor_sync(0xffffffffu, x, w);
    return x;
}

template <typename L>
__global__ static void __launch_bounds__(XENT2_THREADS)
    softmax_xent2_kernel(float *losses, L *logits, const int32_t *targets, float dloss, int BT, int V, int vb, int t)
{
    __shared__ float max_s[XENT2_THREADS / 32];
    __shared__ double sum_s[XENT2_THREADS / 32];
    int i = blockIdx.x, y = targets[i];
    /* read before any thread writes the row: block_max's barrier comes first */
    float xy = threadIdx.x == 0 ? widen(logits[block_major(i, y, BT, V, vb)], t) : 0.0f;
    float mx = -INFINITY;
    for (int v0 = 0; v0 < V; v0 += vb) {
        int n = V - v0 < vb ? V - v0 : vb;
        each_in_segment<false>(logits + (size_t)BT * v0 + (size_t)i * n, n,
                               [&](L x, int) { mx = fmaxf(mx, widen(x, t)); });
    }
    mx = block_max(mx, max_s);
    double sum = 0;
    for (int v0 = 0; v0 < V; v0 += vb) {
        int n = V - v0 < vb ? V - v0 : vb;
        each_in_segment<false>(logits + (size_t)BT * v0 + (size_t)i * n, n,
                               [&](L x, int) { sum += expf(widen(x, t) - mx); });
    }
    float lse = mx + (float)log(block_sum(sum, sum_s));
    if (threadIdx.x == 0) losses[i] = lse - xy;
    if (dloss == 0) return;
    for (int v0 = 0; v0 < V; v0 += vb) {
        int n = V - v0 < vb ? V - v0 : vb;
        each_in_segment<true>(logits + (size_t)BT * v0 + (size_t)i * n, n, [&](L &x, int j) {
            put(&x, expf(widen(x, t) - lse) * dloss - (v0 + j == y ? dloss : 0.0f), t);
        });
    }
}

/*
 * In place between n fp32 values and n 16-bit ones at the buffer's start. 16-bit value i lives in
 * bytes [2i, 2i + 2), inside fp32 value i/2, so a thread must not write there while another has
 * yet to read fp32 value i/2. Narrowing runs in ordered passes: the head [0, HEAD) in one block
 * that reads all of it into shared memory, then writes; then [a, b) with b <= 2a for a = HEAD,
 * 2 HEAD, 4 HEAD...: a pass reads fp32 values [a, b) and writes into fp32 values [a/2, b/2), below
 * a, which earlier passes have read and no later pass reads. Widening is the mirror image: passes
 * from the top down, each reading 16-bit values [a, b) (in fp32 values [a/2, b/2)) and writing fp32
 * values [a, b), which no later pass reads, the head last. Passes on one stream run one after the
 * other: about log2(n / HEAD) launches, none with two threads on one value.
 */
#define HEAD 4096

__global__ static void narrow_head_kernel(void *buf, size_t n, int bf16)
{
    __shared__ uint16_t h[HEAD];
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        float f = ((const float *)buf)[i];
        h[i] = bf16 ? dt_bf16_from_f32(f) : dt_f16_from_f32(f);
    }
    __syncthreads();
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) ((uint16_t *)buf)[i] = h[i];
}

__global__ static void narrow_pass_kernel(void *buf, size_t a, size_t b, int bf16)
{
    FOR_EACH(k, b - a)
    {
        float f = ((const float *)buf)[a + k];
        ((uint16_t *)buf)[a + k] = bf16 ? dt_bf16_from_f32(f) : dt_f16_from_f32(f);
    }
}

__global__ static void widen_head_kernel(void *buf, size_t n, int bf16)
{
    __shared__ uint16_t h[HEAD];
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) h[i] = ((const uint16_t *)buf)[i];
    __syncthreads();
    for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        ((float *)buf)[i] = bf16 ? dt_f32_from_bf16(h[i]) : dt_f32_from_f16(h[i]);
}

__global__ static void widen_pass_kernel(void *buf, size_t a, size_t b, int bf16)
{
    FOR_EACH(k, b - a)
    {
        uint16_t h = ((const uint16_t *)buf)[a + k];
        ((float *)buf)[a + k] = bf16 ? dt_f32_from_bf16(h) : dt_f32_from_f16(h);
    }
}

/* grad, plp as adamw_kernel's */
__global__ static void sgd_kernel(float *param, const void *grad, int gt, float gscale, float *buf, size_t n, float lr,
                                  float momentum, int nesterov, float wd, int first_step, void *plp, int pt)
{
    FOR_EACH(i, n)
    {
        dt_sgd_one(&param[i], &buf[i], load(grad, gt, i) * gscale, lr, momentum, nesterov, wd, first_step);
        if (plp) store(plp, pt, i, param[i]);
    }
}

__global__ static void round_stochastic_kernel(uint16_t *dst, const float *src, size_t n, uint64_t seed, uint64_t index0)
{
    FOR_EACH(i, n) dst[i] = dt_bf16_stochastic(src[i], seed, index0 + i);
}

/* dst = src, or dst += src (the sum in fp32, rounded once), between any two of fp32, bf16, fp16 */
__global__ static void convert_kernel(void *dst, int dt, const void *src, int st, size_t n, int add)
{
    FOR_EACH(i, n) store(dst, dt, i, (add ? load(dst, dt, i) : 0.0f) + load(src, st, i));
}

/* convert on trial (convert2, plan.h): the types as template arguments and 8 elements a thread,
 * moved in packs of 8 (pack8: 16 or 32 bytes; both buffers aligned to them, which the launcher
 * checks); the tail's elements one by one. The same arithmetic per element: the same bits. */
template <typename D, typename S, bool ADD>
__global__ static void convert8_kernel(D *dst, const S *src, size_t n)
{
    FOR_EACH(j, n / 8)
    {
        pack8<S> a = reinterpret_cast<const pack8<S> *>(src)[j];
        pack8<D> r;
        if (ADD) r = reinterpret_cast<const pack8<D> *>(dst)[j];
#pragma unroll
        for (int k = 0; k < 8; k++) dt_st(&r.x[k], (ADD ? dt_ld(r.x[k]) : 0.0f) + dt_ld(a.x[k]));
        reinterpret_cast<pack8<D> *>(dst)[j] = r;
    }
    size_t i0 = n / 8 * 8;
    FOR_EACH(i, n % 8) dt_st(&dst[i0 + i], (ADD ? dt_ld(dst[i0 + i]) : 0.0f) + dt_ld(src[i0 + i]));
}

/* mse's squared errors into the fixed-grid partials, and the gradient */
__global__ static void mse_partial_kernel(double *partial, float *dout, const float *out, const float *target, float dloss,
                                          size_t n)
{
    __shared__ double s[THREADS];
    double acc = 0;
    FOR_EACH(i, n)
    {
        float e = out[i] - target[i];
        acc += (double)e * e;
        if (dloss != 0) dout[i] = 2.0f * e * dloss;
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned w = THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

/* the partials added in block order, as the host adds them: the host's bits, into *acc */
__global__ static void mse_final_kernel(double *acc, const double *partial, size_t n, double div)
{
    double s = 0;
    for (int i = 0; i < REDUCE_BLOCKS; i++) s += partial[i];
    *acc += (double)(float)(s / (double)n) / div;
}

/* The mean of the BT losses on the device in double, added into *acc as the host would add the float
 * it returns: one block, each thread its rows tid, tid + THREADS, ... in order, then a fixed tree
 * (the same bits run to run; the host's sum in row order may differ from it in double's last bit) */
__global__ static void loss_mean_kernel(double *acc, const float *losses, int BT, double div)
{
    __shared__ double s[THREADS];
    double t = 0;
    for (int i = threadIdx.x; i < BT; i += THREADS) t += losses[i];
    s[threadIdx.x] = t;
    __syncthreads();
    for (unsigned k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) *acc += (double)(float)(s[0] / BT) / div;
}

/* After a launch that returned e, the mean of losses (BT, on the device): into *mean on the host, in
 * double, rows in order, as the CPU returns it (synchronizes); or, mean NULL, added into *acc on the
 * device (does not) */
static cudaError_t mean_loss(cudaError_t e, const float *losses, int BT, float *mean, double *acc, double div)
{
    if (e == cudaSuccess && !mean) {
        loss_mean_kernel<<<1, THREADS>>>(acc, losses, BT, div);
        return cudaGetLastError();
    }
    float *host = e == cudaSuccess ? (float *)malloc((size_t)BT * sizeof *host) : NULL;
    if (e == cudaSuccess && !host) e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) e = cudaMemcpy(host, losses, (size_t)BT * sizeof *host, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) {
        double m = 0;
        for (int i = 0; i < BT; i++) m += host[i];
        *mean = (float)(m / BT);
    }
    free(host);
    return e;
}

/* softmax_xent with its row in shared memory where the device's opt-in limit holds it (GPT-2's
 * 50257 bf16 logits: 98 KiB), else reading the row from global memory in each pass */
template <typename L>
static cudaError_t xent_launch(float *losses, L *logits, const int32_t *targets, float dloss, int BT, int V, int vb,
                               int t)
{
    if (dt_cuda_tries() & DT_CUDA_TRY_XENT2) {
        softmax_xent2_kernel<L><<<BT, XENT2_THREADS>>>(losses, logits, targets, dloss, BT, V, vb, t);
        return cudaGetLastError();
    }
    int dev = 0, optin = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (e != cudaSuccess) return e;
    size_t bytes = dt_xent_row_bytes(V, sizeof(L), THREADS * (sizeof(float) + sizeof(double)), (size_t)optin);
    if (!bytes) {
        softmax_xent_kernel<L, false><<<BT, THREADS>>>(losses, logits, targets, dloss, BT, V, vb, t);
        return cudaGetLastError();
    }
    e = cudaFuncSetAttribute(reinterpret_cast<const void *>(softmax_xent_kernel<L, true>),
                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e != cudaSuccess) return e;
    softmax_xent_kernel<L, true><<<BT, THREADS, bytes>>>(losses, logits, targets, dloss, BT, V, vb, t);
    return cudaGetLastError();
}

/* dt_cuda_column_sums and its bf16-rounding twin (BF16: each value rounded to bf16 first) */
template <bool BF16>
static cudaError_t column_sums(float *dbias, const void *dout, int t, int BT, int OC, int set, float *scratch)
{
    return dt_by_type(t, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        if (OC <= 0) return cudaSuccess;
        unsigned cb = (unsigned)((OC + THREADS - 1) / THREADS);
        if (BT <= 0) { /* no rows: the sums are 0 */
            if (set) return cudaMemsetAsync(dbias, 0, (size_t)OC * sizeof *dbias, cudaStreamPerThread);
            return cudaSuccess;
        }
        dim3 grid;
        if (!row_grid(BT, OC, &grid)) return cudaErrorInvalidValue;
        colsum_partials_kernel<S, BF16><<<grid, THREADS>>>(scratch, (const S *)dout, BT, OC);
        partials_sum_kernel<<<cb, THREADS>>>(dbias, scratch, (int)grid.x, OC, set);
        return cudaGetLastError();
    });
}

extern "C" {

cudaError_t dt_cuda_gelu_forward(void *out, const void *inp, int at, size_t N)
{
    return dt_by_type(at, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        bool packed = aligned16(out) && aligned16(inp);
        if (packed) gelu_forward_kernel<S, true><<<pack_blocks<S>(N), THREADS>>>((S *)out, (const S *)inp, N);
        else gelu_forward_kernel<S, false><<<blocks(N), THREADS>>>((S *)out, (const S *)inp, N);
        return cudaGetLastError();
    });
}

cudaError_t dt_cuda_gelu_backward(void *dinp, const void *inp, const float *dout, int at, size_t N)
{
    return dt_by_type(at, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        bool packed = aligned16(dinp) && aligned16(inp) && aligned16(dout);
        if (packed)
            gelu_backward_kernel<S, true><<<pack_blocks<S>(N), THREADS>>>((S *)dinp, (const S *)inp, dout, N);
        else gelu_backward_kernel<S, false><<<blocks(N), THREADS>>>((S *)dinp, (const S *)inp, dout, N);
        return cudaGetLastError();
    });
}

cudaError_t dt_cuda_residual_forward(float *out, const float *a, const void *b, int bt, size_t N)
{
    return dt_by_type(bt, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        if ((g_tries & DT_CUDA_TRY_RESID2) && (uintptr_t)out % 32 == 0 && (uintptr_t)a % 32 == 0 &&
            (uintptr_t)b % (8 * sizeof(S)) == 0)
            residual8_kernel<<<blocks((N + 7) / 8), THREADS>>>(out, a, (const S *)b, N);
        else residual_kernel<<<blocks(N), THREADS>>>(out, a, (const S *)b, N);
        return cudaGetLastError();
    });
}

cudaError_t dt_cuda_cast_to_lp(uint16_t *dst, const float *src, size_t n, int t)
{
    if (t != DT_CUDA_BF16 && t != DT_CUDA_F16) return cudaErrorInvalidValue;
    cast_to_lp_kernel<<<blocks(n), THREADS>>>(dst, src, n, t == DT_CUDA_BF16);
    return cudaGetLastError();
}

cudaError_t dt_cuda_cast_from_lp(float *dst, const uint16_t *src, size_t n, int t)
{
    if (t != DT_CUDA_BF16 && t != DT_CUDA_F16) return cudaErrorInvalidValue;
    cast_from_lp_kernel<<<blocks(n), THREADS>>>(dst, src, n, t == DT_CUDA_BF16);
    return cudaGetLastError();
}

cudaError_t dt_cuda_round_lp(float *dst, const float *src, size_t n, int t)
{
    if (t != DT_CUDA_BF16 && t != DT_CUDA_F16) return cudaErrorInvalidValue;
    round_lp_kernel<<<blocks(n), THREADS>>>(dst, src, n, t == DT_CUDA_BF16);
    return cudaGetLastError();
}

cudaError_t dt_cuda_adamw(float *param, const void *grad, int gt, float gscale, float l2, float *m, float *v, size_t n,
                          float lr, float beta1, float beta2, float eps, float wd, int t, void *plp, int pt)
{
    if (!known(gt) || (plp && !half16(pt))) return cudaErrorInvalidValue;
    /* the bias corrections on the host, as the CPU kernel computes them */
    float bc1 = 1.0f - powf(beta1, (float)t), bc2 = 1.0f - powf(beta2, (float)t);
    adamw_kernel<<<blocks(n), THREADS>>>(param, grad, gt, gscale, l2, m, v, n, lr, beta1, beta2, eps, wd, lr / bc1,
                                         1.0f / sqrtf(bc2), plp, pt);
    return cudaGetLastError();
}

cudaError_t dt_cuda_adamw_slices(const struct dt_cuda_slice_dev *s, int ns, size_t total, int gt, float gscale,
                                 float lr, float beta1, float beta2, float eps, int t, int pt)
{
    if (!known(gt) || ns < 1) return cudaErrorInvalidValue;
    size_t nblocks = (total + SLICE_CHUNK - 1) / SLICE_CHUNK;
    if (!nblocks) return cudaSuccess;
    if (nblocks > 0x7fffffffu) return cudaErrorInvalidValue;
    float bc1 = 1.0f - powf(beta1, (float)t), bc2 = 1.0f - powf(beta2, (float)t);
    if (g_tries & DT_CUDA_TRY_ADAM2) /* the copy's type: bf16, else fp16 (adamw_slices refuses a copy of another) */
        return dt_by_type(gt, [&](auto *tag) {
            using G = std::remove_pointer_t<decltype(tag)>;
            if (pt == DT_CUDA_BF16)
                adamw2_slices_kernel<G, __nv_bfloat16><<<(unsigned)nblocks, THREADS>>>(
                    s, ns, total, gscale, lr, beta1, beta2, eps, lr / bc1, 1.0f / sqrtf(bc2));
            else
                adamw2_slices_kernel<G, __half><<<(unsigned)nblocks, THREADS>>>(s, ns, total, gscale, lr, beta1, beta2,
                                                                                 eps, lr / bc1, 1.0f / sqrtf(bc2));
            return cudaGetLastError();
        });
    adamw_slices_kernel<<<(unsigned)nblocks, THREADS>>>(s, ns, total, gt, gscale, lr, beta1, beta2, eps, lr / bc1,
                                                        1.0f / sqrtf(bc2), pt);
    return cudaGetLastError();
}

static_assert(DT_CUDA_REDUCE_BYTES >= NORM2_BLOCKS * (sizeof(double) + sizeof(unsigned long long)),
              "the reduction scratch holds norm2's partials");
static_assert(DT_CUDA_REDUCE_BYTES >= REDUCE_BLOCKS * (sizeof(double) + sizeof(unsigned long long)),
              "ops.h's reduction scratch holds the partials");

/* scratch: the partial sums, then the partial counts (the caller's: no allocation, which would wait
 * for the device, per call) */
cudaError_t dt_cuda_sumsq_nonfinite(const void *x, int t, size_t n, double *sumsq, size_t *nonfinite, void *scratch)
{
    if (t != DT_CUDA_F32 && t != DT_CUDA_BF16 && t != DT_CUDA_F16) return cudaErrorInvalidValue;
    double *partial = (double *)scratch;
    cudaError_t e;
    if (g_tries & DT_CUDA_TRY_NORM2) {
        unsigned long long *bad = (unsigned long long *)(partial + NORM2_BLOCKS);
        e = dt_by_type(t, [&](auto *tag) {
            using S = std::remove_pointer_t<decltype(tag)>;
            sumsq2_partial_kernel<S><<<NORM2_BLOCKS, THREADS>>>(partial, bad, (const S *)x, n);
            sumsq_final_kernel<<<1, 32>>>(partial, bad, NORM2_BLOCKS);
            return cudaGetLastError();
        });
    } else {
        unsigned long long *bad = (unsigned long long *)(partial + REDUCE_BLOCKS);
        sumsq_partial_kernel<<<REDUCE_BLOCKS, THREADS>>>(partial, bad, x, t, n);
        sumsq_final_kernel<<<1, 32>>>(partial, bad, REDUCE_BLOCKS);
        e = cudaGetLastError();
    }
    double got[2];
    if (e == cudaSuccess) e = cudaMemcpy(got, partial, sizeof got, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) {
        unsigned long long nb;
        memcpy(&nb, &got[1], sizeof nb);
        *sumsq = got[0], *nonfinite = (size_t)nb;
    }
    return e;
}

cudaError_t dt_cuda_layernorm_forward(void *out, int ot, float *mean, float *rstd, const float *inp, const float *weight,
                                      const float *bias, int BT, int C)
{
    return dt_by_type(ot, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        if (BT <= 0 || C <= 0) return cudaSuccess; /* nothing to do, as on the CPU (a 0-block grid is an error) */
        layernorm_forward_kernel<<<ln_blocks(BT), THREADS>>>((S *)out, mean, rstd, inp, weight, bias, BT, C);
        return cudaGetLastError();
    });
}

cudaError_t dt_cuda_layernorm_backward(float *dinp, void *dinp_lp, int lt, float *dweight, float *dbias,
                                       const float *dout, const float *inp, const float *weight, const float *mean,
                                       const float *rstd, int BT, int C, float *scratch)
{
    if (BT <= 0 || C <= 0) return cudaSuccess;
    dim3 grid;
    if (!row_grid(BT, C, &grid)) return cudaErrorInvalidValue;
    size_t np = dt_cuda_row_partials(BT, C);
    unsigned cb = (unsigned)((C + THREADS - 1) / THREADS);
    cudaError_t e = dt_by_type(dinp_lp ? lt : DT_CUDA_F32, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        layernorm_dinp_kernel<S><<<ln_blocks(BT), THREADS>>>(dinp, (S *)dinp_lp, dout, inp, weight, mean, rstd, BT, C);
        return cudaSuccess;
    });
    if (e != cudaSuccess) return e;
    layernorm_partials_kernel<<<grid, THREADS>>>(scratch, scratch + np, dout, inp, mean, rstd, BT, C);
    partials_sum_kernel<<<cb, THREADS>>>(dweight, scratch, (int)grid.x, C, 0);
    partials_sum_kernel<<<cb, THREADS>>>(dbias, scratch + np, (int)grid.x, C, 0);
    return cudaGetLastError();
}

cudaError_t dt_cuda_rmsnorm_forward(void *out, int ot, float *rstd, const float *inp, const float *weight, float eps,
                                    int BT, int C)
{
    return dt_by_type(ot, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        if (BT <= 0 || C <= 0) return cudaSuccess;
        if (g_tries & DT_CUDA_TRY_RMS2)
            rmsnorm2_forward_kernel<<<ln_blocks(BT), THREADS>>>((S *)out, rstd, inp, weight, eps, BT, C);
        else rmsnorm_forward_kernel<<<BT, THREADS>>>((S *)out, rstd, inp, weight, eps, C);
        return cudaGetLastError();
    });
}

cudaError_t dt_cuda_rmsnorm_backward(float *dinp, void *dinp_lp, int lt, float *dweight, const float *dout,
                                     const float *inp, const float *weight, const float *rstd, int BT, int C,
                                     float *scratch)
{
    if (BT <= 0 || C <= 0) return cudaSuccess;
    dim3 grid;
    if (!row_grid(BT, C, &grid)) return cudaErrorInvalidValue;
    cudaError_t e = dt_by_type(dinp_lp ? lt : DT_CUDA_F32, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        if (g_tries & DT_CUDA_TRY_RMS2)
            rmsnorm2_dinp_kernel<S><<<ln_blocks(BT), THREADS>>>(dinp, (S *)dinp_lp, dout, inp, weight, rstd, BT, C);
        else rmsnorm_dinp_kernel<S><<<BT, THREADS>>>(dinp, (S *)dinp_lp, dout, inp, weight, rstd, C);
        return cudaSuccess;
    });
    if (e != cudaSuccess) return e;
    rmsnorm_partials_kernel<<<grid, THREADS>>>(scratch, dout, inp, rstd, BT, C);
    partials_sum_kernel<<<(unsigned)((C + THREADS - 1) / THREADS), THREADS>>>(dweight, scratch, (int)grid.x, C, 0);
    return cudaGetLastError();
}

cudaError_t dt_cuda_rope(void *qkv, int at, const float *cs, int B, int T, int NH, int NKV, int hs, int backward)
{
    return dt_by_type(at, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        size_t rows = (size_t)B * T, n = rows * (size_t)(NH + NKV) * (hs / 2);
        if (hs % 2 || B < 0 || T < 0 || NH < 0 || NKV < 0) return cudaErrorInvalidValue;
        if (!n) return cudaSuccess;
        rope_kernel<<<blocks(n), THREADS>>>((S *)qkv, cs, T, NH, NKV, hs, rows, backward ? -1.0f : 1.0f);
        return cudaGetLastError();
    });
}

/* swiglu2's grid (on trial): x a row's packs of 8 columns, y the rows (65535 at most, then strided);
 * false where the kernels in use take the call: swiglu2 off, H not a multiple of 8, or a buffer not
 * aligned to its packs (pk bytes: 16 for 16-bit activations, 32 for fp32 and dout) */
static bool swiglu2_grid(size_t pk, int BT, int H, dim3 *grid, const void *a, const void *b, const float *f)
{
    if (!(g_tries & DT_CUDA_TRY_SWIGLU2) || H % 8 || (uintptr_t)a % pk || (uintptr_t)b % pk ||
        (uintptr_t)f % sizeof(pack8<float>))
        return false;
    *grid = dim3((unsigned)((H / 8 + THREADS - 1) / THREADS), (unsigned)(BT < 65535 ? BT : 65535));
    return true;
}

cudaError_t dt_cuda_swiglu_forward(void *out, const void *inp, int at, int BT, int H)
{
    return dt_by_type(at, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        size_t n = (size_t)BT * H;
        if (!n) return cudaSuccess;
        dim3 grid;
        if (swiglu2_grid(sizeof(pack8<S>), BT, H, &grid, out, inp, NULL))
            swiglu2_forward_kernel<<<grid, THREADS>>>((S *)out, (const S *)inp, (size_t)BT, H);
        else swiglu_forward_kernel<<<blocks(n), THREADS>>>((S *)out, (const S *)inp, (size_t)BT, H);
        return cudaGetLastError();
    });
}

cudaError_t dt_cuda_swiglu_backward(void *dinp, const void *inp, const float *dout, int at, int BT, int H)
{
    return dt_by_type(at, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        size_t n = (size_t)BT * H;
        if (!n) return cudaSuccess;
        dim3 grid;
        if (swiglu2_grid(sizeof(pack8<S>), BT, H, &grid, dinp, inp, dout))
            swiglu2_backward_kernel<<<grid, THREADS>>>((S *)dinp, (const S *)inp, dout, (size_t)BT, H);
        else swiglu_backward_kernel<<<blocks(n), THREADS>>>((S *)dinp, (const S *)inp, dout, (size_t)BT, H);
        return cudaGetLastError();
    });
}

cudaError_t dt_cuda_position_forward(float *out, const float *wpe, int B, int T, int C)
{
    position_forward_kernel<<<blocks((size_t)B * T * C), THREADS>>>(out, wpe, B, T, C);
    return cudaGetLastError();
}

cudaError_t dt_cuda_position_backward(float *dwpe, const float *dout, int B, int T, int C)
{
    position_backward_kernel<<<blocks((size_t)T * C), THREADS>>>(dwpe, dout, B, T, C);
    return cudaGetLastError();
}

cudaError_t dt_cuda_rows_forward(float *out, const int32_t *inp, const void *table, int t, int v0, int nv, int n, int C)
{
    if (!known(t)) return cudaErrorInvalidValue;
    rows_forward_kernel<<<blocks((size_t)n * C), THREADS>>>(out, inp, table, t, v0, nv, n, C);
    return cudaGetLastError();
}

cudaError_t dt_cuda_rows_add(void *dst, int t, size_t lo, size_t n, const int32_t *rows, const float *vals, int nrows,
                             int width)
{
    return dt_by_type(t, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        if (width <= 0 || nrows <= 0 || n == 0) return cudaSuccess;
        size_t r0 = lo / (size_t)width, r1 = (lo + n - 1) / (size_t)width; /* the table rows dst overlaps */
        unsigned groups = r1 - r0 + 1 < ROWS_ADD_GROUPS ? (unsigned)(r1 - r0 + 1) : ROWS_ADD_GROUPS;
        rows_add_kernel<<<groups, THREADS>>>((S *)dst, lo, n, rows, vals, nrows, width, r0, r1, groups);
        return cudaGetLastError();
    });
}

cudaError_t dt_cuda_softmax_xent(float *losses, float *logits, const int32_t *targets, float dloss, int BT, int V, int vb,
                                 float *mean, double *acc, double div)
{
    if (BT <= 0 || V <= 0 || vb <= 0 || !mean == !acc) return cudaErrorInvalidValue;
    return mean_loss(xent_launch(losses, logits, targets, dloss, BT, V, vb, DT_CUDA_F32), losses, BT, mean, acc, div);
}

cudaError_t dt_cuda_softmax_xent_lp(float *losses, uint16_t *logits, const int32_t *targets, float dloss, int BT, int V,
                                    int vb, int t, float *mean, double *acc, double div)
{
    if (BT <= 0 || V <= 0 || vb <= 0 || (t != DT_CUDA_BF16 && t != DT_CUDA_F16) || !mean == !acc)
        return cudaErrorInvalidValue;
    return mean_loss(xent_launch(losses, logits, targets, dloss, BT, V, vb, t), losses, BT, mean, acc, div);
}

cudaError_t dt_cuda_narrow_inplace(void *buf, size_t n, int t)
{
    if (t != DT_CUDA_BF16 && t != DT_CUDA_F16) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    int bf16 = t == DT_CUDA_BF16;
    narrow_head_kernel<<<1, THREADS>>>(buf, n < HEAD ? n : HEAD, bf16);
    cudaError_t e = cudaGetLastError();
    for (size_t a = HEAD; a < n && e == cudaSuccess; a *= 2) {
        size_t b = n - a < a ? n : 2 * a;
        narrow_pass_kernel<<<blocks(b - a), THREADS>>>(buf, a, b, bf16);
        e = cudaGetLastError();
    }
    return e;
}

cudaError_t dt_cuda_widen_inplace(void *buf, size_t n, int t)
{
    if (t != DT_CUDA_BF16 && t != DT_CUDA_F16) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    int bf16 = t == DT_CUDA_BF16;
    cudaError_t e = cudaSuccess;
    if (n > HEAD) { /* the passes of narrowing in reverse: the top one [a, n) with a < n <= 2a first */
        size_t a = HEAD;
        while (n - a > a) a *= 2;
        for (size_t b = n; e == cudaSuccess; b = a, a /= 2) {
            widen_pass_kernel<<<blocks(b - a), THREADS>>>(buf, a, b, bf16);
            e = cudaGetLastError();
            if (a == HEAD) break;
        }
    }
    if (e == cudaSuccess) {
        widen_head_kernel<<<1, THREADS>>>(buf, n < HEAD ? n : HEAD, bf16);
        e = cudaGetLastError();
    }
    return e;
}

cudaError_t dt_cuda_column_sums(float *dbias, const void *dout, int t, int BT, int OC, int set, float *scratch)
{
    return column_sums<false>(dbias, dout, t, BT, OC, set, scratch);
}

cudaError_t dt_cuda_column_sums_bf16(float *dbias, const void *dout, int t, int BT, int OC, int set, float *scratch)
{
    return column_sums<true>(dbias, dout, t, BT, OC, set, scratch);
}

cudaError_t dt_cuda_sgd(float *param, const void *grad, int gt, float gscale, float *buf, size_t n, float lr,
                        float momentum, int nesterov, float wd, int first_step, void *plp, int pt)
{
    if (!known(gt) || (plp && !half16(pt))) return cudaErrorInvalidValue;
    sgd_kernel<<<blocks(n), THREADS>>>(param, grad, gt, gscale, buf, n, lr, momentum, nesterov, wd, first_step, plp, pt);
    return cudaGetLastError();
}

cudaError_t dt_cuda_round_stochastic(uint16_t *dst, const float *src, size_t n, uint64_t seed, uint64_t index0)
{
    round_stochastic_kernel<<<blocks(n), THREADS>>>(dst, src, n, seed, index0);
    return cudaGetLastError();
}

void dt_cuda_set_tries(unsigned flags) { g_tries = flags; }
unsigned dt_cuda_tries(void) { return g_tries; }

cudaError_t dt_cuda_convert(void *dst, int dt, const void *src, int st, size_t n, int add)
{
    if (!known(dt) || !known(st)) return cudaErrorInvalidValue;
    size_t da = 8 * (dt == DT_CUDA_F32 ? 4 : 2), sa = 8 * (st == DT_CUDA_F32 ? 4 : 2);
    if ((g_tries & DT_CUDA_TRY_CONVERT2) && (uintptr_t)dst % da == 0 && (uintptr_t)src % sa == 0)
        return dt_by_type(dt, [&](auto *dtag) {
            using D = std::remove_pointer_t<decltype(dtag)>;
            return dt_by_type(st, [&](auto *stag) {
                using S = std::remove_pointer_t<decltype(stag)>;
                unsigned g = blocks((n + 7) / 8);
                if (add) convert8_kernel<D, S, true><<<g, THREADS>>>((D *)dst, (const S *)src, n);
                else convert8_kernel<D, S, false><<<g, THREADS>>>((D *)dst, (const S *)src, n);
                return cudaGetLastError();
            });
        });
    convert_kernel<<<blocks(n), THREADS>>>(dst, dt, src, st, n, add);
    return cudaGetLastError();
}

cudaError_t dt_cuda_mse(float *dout, const float *out, const float *target, float dloss, size_t n, void *scratch,
                        float *mean, double *acc, double div)
{
    if (!mean == !acc) return cudaErrorInvalidValue;
    double *partial = (double *)scratch, host[REDUCE_BLOCKS];
    mse_partial_kernel<<<REDUCE_BLOCKS, THREADS>>>(partial, dout, out, target, dloss, n);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && !mean) {
        mse_final_kernel<<<1, 1>>>(acc, partial, n, div);
        return cudaGetLastError();
    }
    if (e == cudaSuccess) e = cudaMemcpy(host, partial, sizeof host, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) { /* the partials in order of block, as sumsq adds them */
        double s = 0;
        for (int i = 0; i < REDUCE_BLOCKS; i++) s += host[i];
        *mean = (float)(s / (double)n);
    }
    return e;
}

} /* extern "C" */
