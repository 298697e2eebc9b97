/*
 * rope_swiglu.cu - Llama's elementwise ops on the GPU, twins of the CPU's: rotary position
 * embeddings in place on the query and key heads (forward, and backward the inverse rotation), and
 * SwiGLU forward and backward (swiglu2 on trial, plan.h). Formulas: kernels/formulas.h.
 */
#include "kernels/cuda/ops_shared.h"

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

extern "C" {

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
    if (!(dt_cuda_tries() & DT_CUDA_TRY_SWIGLU2) || H % 8 || (uintptr_t)a % pk || (uintptr_t)b % pk ||
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

} /* extern "C" */
