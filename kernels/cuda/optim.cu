/*
 * optim.cu - the optimizer's kernels on the GPU, twins of kernels/cpu/optim.c: AdamW per tensor and
 * over many tensors in one launch (adam2 on trial, plan.h), SGD, and the gradient's sum of squares
 * with its inf/nan count (the step's norm; norm2 on trial). AdamW and SGD read a gradient of any of
 * the three types and can write the 16-bit working copy of the parameters in the same pass. The
 * sums run in a fixed grid, each block a fixed strided set, then one block adds the partials in
 * order: the same bits on every run.
 */
#include "kernels/cuda/module.h"
#include "kernels/cuda/ops_shared.h"

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
 * sums in a fixed tree), and leaves both results in out[0..1], a part's place among the results that
 * one copy brings to the host. A single thread walking all of them took ~19 us, once a part. */
__global__ static void sumsq_final_kernel(double *out, const double *partial, const unsigned long long *bad,
                                          int nblocks)
{
    unsigned l = threadIdx.x;
    double s = 0;
    unsigned long long nb = 0;
    for (int i = (int)l; i < nblocks; i += 32) s += partial[i], nb += bad[i];
    for (unsigned w = 16; w > 0; w >>= 1) {
        s += __shfl_down_sync(0xffffffffu, s, w);
        nb += __shfl_down_sync(0xffffffffu, nb, w);
    }
    if (l == 0) out[0] = s, ((unsigned long long *)out)[1] = nb;
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

extern "C" {

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
    if (dt_cuda_tries() & DT_CUDA_TRY_ADAM2) /* the copy's type: bf16, else fp16 (adamw_slices refuses a copy of another) */
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

/* scratch (DT_CUDA_REDUCE_SLOT): the partial sums, then the partial counts (DT_CUDA_REDUCE_BYTES,
 * each part's in turn, the kernels queued in order), then the parts' results, two 8-byte values a
 * part: the caller's, so no allocation (which would wait for the device) per call. One copy back for
 * all the parts. */
cudaError_t dt_cuda_sumsq_parts(const struct dt_cuda_part *parts, int np, int t, double *sumsq, size_t *nonfinite,
                                void *scratch)
{
    if (t != DT_CUDA_F32 && t != DT_CUDA_BF16 && t != DT_CUDA_F16) return cudaErrorInvalidValue;
    if (np < 1 || np > DT_CUDA_PARTS_MAX) return cudaErrorInvalidValue;
    double *partial = (double *)scratch, *out = (double *)((char *)scratch + DT_CUDA_REDUCE_BYTES);
    bool packs = dt_cuda_tries() & DT_CUDA_TRY_NORM2;
    unsigned long long *bad = (unsigned long long *)(partial + (packs ? NORM2_BLOCKS : REDUCE_BLOCKS));
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < np && e == cudaSuccess; i++) {
        const void *x = parts[i].x;
        size_t n = parts[i].n;
        if (packs)
            dt_by_type(t, [&](auto *tag) {
                using S = std::remove_pointer_t<decltype(tag)>;
                sumsq2_partial_kernel<S><<<NORM2_BLOCKS, THREADS>>>(partial, bad, (const S *)x, n);
                return cudaSuccess;
            });
        else sumsq_partial_kernel<<<REDUCE_BLOCKS, THREADS>>>(partial, bad, x, t, n);
        sumsq_final_kernel<<<1, 32>>>(out + 2 * i, partial, bad, packs ? NORM2_BLOCKS : REDUCE_BLOCKS);
        e = cudaGetLastError();
    }
    double got[2 * DT_CUDA_PARTS_MAX];
    if (e == cudaSuccess) e = cudaMemcpy(got, out, 2 * (size_t)np * sizeof *got, cudaMemcpyDeviceToHost);
    for (int i = 0; i < np && e == cudaSuccess; i++) {
        unsigned long long nb;
        memcpy(&nb, &got[2 * i + 1], sizeof nb);
        sumsq[i] = got[2 * i], nonfinite[i] = (size_t)nb;
    }
    return e;
}

cudaError_t dt_cuda_sgd(float *param, const void *grad, int gt, float gscale, float *buf, size_t n, float lr,
                        float momentum, int nesterov, float wd, int first_step, void *plp, int pt)
{
    if (!known(gt) || (plp && !half16(pt))) return cudaErrorInvalidValue;
    sgd_kernel<<<blocks(n), THREADS>>>(param, grad, gt, gscale, buf, n, lr, momentum, nesterov, wd, first_step, plp, pt);
    return cudaGetLastError();
}

} /* extern "C" */
