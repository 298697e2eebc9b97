/*
 * loss.cu - the losses on the GPU: fused softmax + cross-entropy over the block-major logits (fp32,
 * and 16-bit logits; xent2 on trial, plan.h) and MSE, each with its gradient, and the mean loss
 * either read back (synchronizes) or added into the step's sink on the device (kernels.h's struct
 * dt_loss_sink). Sums in double, in a fixed order: the CPU's mean, the same bits on every run.
 */
#include "kernels/cuda/ops_shared.h"

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
 * multiprocessor when its 98 KiB row is in shared memory). Three passes over the row in 16-byte
 * packs, its full vocabulary blocks as one run (plan.h's dt_xent2_pack: a block of 2048 columns
 * alone would leave three quarters of the threads idle): the max, the sum of exponentials in
 * double, the gradient in place; the second and third mostly from L2. The same arithmetic as the
 * kernel above, the sum's terms grouped by other threads.
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

/* f(x, v) for each element x of row i, v its column: the full vocabulary blocks' packs as one run
 * where their rows start on 16 bytes, then the rest block by block (each_in_segment) */
template <bool WRITE, typename L, typename F>
__device__ static inline void each_in_row(L *logits, int i, int BT, int V, int vb, F f)
{
    constexpr int E = pack_n<L>;
    int full = vb % E == 0 && (uintptr_t)logits % 16 == 0 ? V / vb : 0, packs = full * (vb / E);
    for (int j = threadIdx.x; j < packs; j += blockDim.x) {
        int v;
        pack16<L> *p = reinterpret_cast<pack16<L> *>(logits + dt_xent2_pack(j, i, BT, vb, E, &v));
        pack16<L> x = *p;
#pragma unroll
        for (int k = 0; k < E; k++) f(x.x[k], v + k);
        if (WRITE) *p = x;
    }
    for (int v0 = full * vb; v0 < V; v0 += vb) {
        int n = V - v0 < vb ? V - v0 : vb;
        each_in_segment<WRITE>(logits + (size_t)BT * v0 + (size_t)i * n, n, [&](auto &x, int j) { f(x, v0 + j); });
    }
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
    each_in_row<false>(logits, i, BT, V, vb, [&](L &x, int) { mx = fmaxf(mx, widen(x, t)); });
    mx = block_max(mx, max_s);
    double sum = 0;
    each_in_row<false>(logits, i, BT, V, vb, [&](L &x, int) { sum += expf(widen(x, t) - mx); });
    float lse = mx + (float)log(block_sum(sum, sum_s));
    if (threadIdx.x == 0) losses[i] = lse - xy;
    if (dloss == 0) return;
    each_in_row<true>(logits, i, BT, V, vb,
                      [&](L &x, int v) { put(&x, expf(widen(x, t) - lse) * dloss - (v == y ? dloss : 0.0f), t); });
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

extern "C" {

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
