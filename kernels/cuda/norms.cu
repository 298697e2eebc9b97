/*
 * norms.cu - layernorm and RMSNorm on the GPU (rms2 and colsum2 on trial, plan.h), and the reductions
 * over rows they and a bias's gradient share. Those keep the CPU's order, cpu.h's DT_ROW_BLOCK: one thread per
 * (block of 64 rows, channel) sums its rows in order into a partial, then one thread per channel adds
 * the partials in block order, so dbias and the column sums are the CPU's bits (dweight's terms,
 * a product, may be fused otherwise on either side).
 */
#include "kernels/cuda/ops_shared.h"

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

/*
 * The same partial sums on trial (colsum2, plan.h): a thread takes a 16-byte pack of channels (four
 * fp32 ones, eight 16-bit) of a block of rows, so each row's read is 16 bytes a thread (a warp's 512
 * contiguous bytes) and a thread keeps a pack's loads in flight, not one 2- or 4-byte load a row.
 * Each channel's adds are the kernels' above, in the same order, written the same way (nvcc fuses
 * them alike): the same bits. The grid: x the row blocks, y the channels' blocks of PACK_THREADS
 * packs: blocks of 64 threads, so that a row of GPT-2's 768 channels (192 fp32 packs) is three
 * blocks, not one of 256 threads a quarter idle, and B=4's 64 row blocks still give 192 blocks.
 * Taken (colsum2_grid) where the trial is on, the channels are a whole number of packs and every
 * operand (a, b if any, the partials p) is 16-byte aligned; the kernels above otherwise.
 */
#define PACK_THREADS 64
template <typename S>
static bool colsum2_grid(int BT, int C, const void *a, const void *b, const void *p, dim3 *grid)
{
    unsigned cb = (unsigned)((C / pack_n<S> + PACK_THREADS - 1) / PACK_THREADS);
    if (!(dt_cuda_tries() & DT_CUDA_TRY_COLSUM2) || C % pack_n<S> || !aligned16(a) || (b && !aligned16(b)) ||
        !aligned16(p) || BT <= 0 || C <= 0 || cb > 65535u)
        return false;
    *grid = dim3((unsigned)((BT + DT_CUDA_ROW_BLOCK - 1) / DT_CUDA_ROW_BLOCK), cb);
    return true;
}

__global__ static void layernorm_partials2_kernel(float *pw, float *pb, const float *dout, const float *inp,
                                                  const float *mean, const float *rstd, int BT, int C)
{
    int c = (blockIdx.y * blockDim.x + threadIdx.x) * 4;
    if (c >= C) return;
    int r0 = blockIdx.x * DT_CUDA_ROW_BLOCK, r1 = min(BT, r0 + DT_CUDA_ROW_BLOCK);
    pack16<float> w = {}, b = {};
    for (int i = r0; i < r1; i++) {
        size_t at = (size_t)i * C + c;
        pack16<float> dy = *reinterpret_cast<const pack16<float> *>(dout + at);
        pack16<float> x = *reinterpret_cast<const pack16<float> *>(inp + at);
        float m = mean[i], r = rstd[i];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            w.x[k] += (x.x[k] - m) * r * dy.x[k];
            b.x[k] += dy.x[k];
        }
    }
    *reinterpret_cast<pack16<float> *>(pw + (size_t)blockIdx.x * C + c) = w;
    *reinterpret_cast<pack16<float> *>(pb + (size_t)blockIdx.x * C + c) = b;
}

__global__ static void rmsnorm_partials2_kernel(float *pw, const float *dout, const float *inp, const float *rstd,
                                                int BT, int C)
{
    int c = (blockIdx.y * blockDim.x + threadIdx.x) * 4;
    if (c >= C) return;
    int r0 = blockIdx.x * DT_CUDA_ROW_BLOCK, r1 = min(BT, r0 + DT_CUDA_ROW_BLOCK);
    pack16<float> w = {};
    for (int i = r0; i < r1; i++) {
        size_t at = (size_t)i * C + c;
        pack16<float> dy = *reinterpret_cast<const pack16<float> *>(dout + at);
        pack16<float> x = *reinterpret_cast<const pack16<float> *>(inp + at);
        float r = rstd[i];
#pragma unroll
        for (int k = 0; k < 4; k++) w.x[k] += x.x[k] * r * dy.x[k];
    }
    *reinterpret_cast<pack16<float> *>(pw + (size_t)blockIdx.x * C + c) = w;
}

template <typename S, bool BF16>
__global__ static void colsum_partials2_kernel(float *p, const S *x, int BT, int C)
{
    constexpr int E = pack_n<S>;
    int c = (blockIdx.y * blockDim.x + threadIdx.x) * E;
    if (c >= C) return;
    int r0 = blockIdx.x * DT_CUDA_ROW_BLOCK, r1 = min(BT, r0 + DT_CUDA_ROW_BLOCK);
    float s[E] = {};
    for (int i = r0; i < r1; i++) {
        pack16<S> a = *reinterpret_cast<const pack16<S> *>(x + (size_t)i * C + c);
#pragma unroll
        for (int k = 0; k < E; k++) {
            float v = dt_ld(a.x[k]);
            s[k] += BF16 ? dt_f32_from_bf16(dt_bf16_from_f32(v)) : v;
        }
    }
    float *o = p + (size_t)blockIdx.x * C + c;
#pragma unroll
    for (int k = 0; k < E; k += 4) *reinterpret_cast<float4 *>(o + k) = make_float4(s[k], s[k + 1], s[k + 2], s[k + 3]);
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
        dim3 packed;
        if (colsum2_grid<S>(BT, OC, dout, NULL, scratch, &packed))
            colsum_partials2_kernel<S, BF16><<<packed, PACK_THREADS>>>(scratch, (const S *)dout, BT, OC);
        else colsum_partials_kernel<S, BF16><<<grid, THREADS>>>(scratch, (const S *)dout, BT, OC);
        partials_sum_kernel<<<cb, THREADS>>>(dbias, scratch, (int)grid.x, OC, set);
        return cudaGetLastError();
    });
}

extern "C" {

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
    dim3 packed;
    if (colsum2_grid<float>(BT, C, dout, inp, scratch, &packed))
        layernorm_partials2_kernel<<<packed, PACK_THREADS>>>(scratch, scratch + np, dout, inp, mean, rstd, BT, C);
    else layernorm_partials_kernel<<<grid, THREADS>>>(scratch, scratch + np, dout, inp, mean, rstd, BT, C);
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
        if (dt_cuda_tries() & DT_CUDA_TRY_RMS2)
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
        if (dt_cuda_tries() & DT_CUDA_TRY_RMS2)
            rmsnorm2_dinp_kernel<S><<<ln_blocks(BT), THREADS>>>(dinp, (S *)dinp_lp, dout, inp, weight, rstd, BT, C);
        else rmsnorm_dinp_kernel<S><<<BT, THREADS>>>(dinp, (S *)dinp_lp, dout, inp, weight, rstd, C);
        return cudaSuccess;
    });
    if (e != cudaSuccess) return e;
    dim3 packed;
    if (colsum2_grid<float>(BT, C, dout, inp, scratch, &packed))
        rmsnorm_partials2_kernel<<<packed, PACK_THREADS>>>(scratch, dout, inp, rstd, BT, C);
    else rmsnorm_partials_kernel<<<grid, THREADS>>>(scratch, dout, inp, rstd, BT, C);
    partials_sum_kernel<<<(unsigned)((C + THREADS - 1) / THREADS), THREADS>>>(dweight, scratch, (int)grid.x, C, 0);
    return cudaGetLastError();
}

cudaError_t dt_cuda_column_sums(float *dbias, const void *dout, int t, int BT, int OC, int set, float *scratch)
{
    return column_sums<false>(dbias, dout, t, BT, OC, set, scratch);
}

cudaError_t dt_cuda_column_sums_bf16(float *dbias, const void *dout, int t, int BT, int OC, int set, float *scratch)
{
    return column_sums<true>(dbias, dout, t, BT, OC, set, scratch);
}

} /* extern "C" */
