/*
 * ops.cu - the CUDA twins of the CPU's elementwise kernels (issue 14, first part): GELU, the
 * residual add, casts between fp32 and bf16/fp16, conversion and accumulation between any two of
 * the three types, narrowing and widening in place, stochastic rounding to bf16; and the kernels on
 * trial's flags (DTRUN_CUDA_TRY, plan.h). The rest of the ops are beside it: optim.cu (AdamW, SGD,
 * the gradient's norm), norms.cu (layernorm, RMSNorm and the reductions over rows), rope_swiglu.cu,
 * embed.cu (the position and token tables), loss.cu (softmax + cross-entropy, MSE).
 *
 * Same layouts, same arguments and the same semantics as kernels/cpu/ (kernels.h): backward kernels
 * accumulate (+=) into fp32 gradients, GELU's backward writes its 16-bit-capable dinp (=), casts
 * round to nearest even through core/half.h, the one definition both sides compile. The activation
 * ops are templates on the storage type (ops.h's dt_ld/dt_st): widened on load, computed in fp32,
 * rounded once on store. The per-element formulas are kernels/formulas.h, compiled by both sides.
 * Deterministic everywhere: no float atomics; reductions in a fixed grid and order.
 *
 * Every launcher returns cudaSuccess or the launch's error; ops.h names the kernel for messages.
 */
#include "kernels/cuda/ops_shared.h"

/* DTRUN_CUDA_TRY's kernels on trial (plan.h), set once as a context is made, before any launch */
static unsigned g_tries;

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

} /* extern "C" */
