/*
 * embed.cu - the embeddings on the GPU: the position table added and its gradient (each thread one
 * column, the batches added in order), and the token table's rows gathered from a table of any of
 * the three types and its gradient without atomics (rows_add: each element's rows added in index
 * order; rows2 on trial is rows_sorted.cu).
 */
#include "kernels/cuda/ops_shared.h"

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

extern "C" {

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

} /* extern "C" */
