/*
 * rows_sorted.cu - a table's gradient by sorted rows: rows_add on trial (rows2, issue #41; plan.h
 * says how). The kernel in use (embed.cu) deals the table's rows to 1024 blocks and has every block
 * walk all B T entries; here the entries are sorted by row first (CUB's radix sort, stable, so a
 * row's entries stay in index order), and the block of each run of one row adds that run alone.
 * The same sums in the same order as the CPU's rows_add: its bits, a 16-bit element rounded after
 * each add. In its own file: CUB's sort takes its own compile time, beside the other kernels'.
 */
#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>
#include <stdint.h>
#include <type_traits>
#include "core/half.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/plan.h"

#define THREADS 256

/* the scratch: CUB's temporary storage, then the keys and indices in and out, each 256-byte aligned */
static size_t up(size_t b) { return (b + 255) / 256 * 256; }
static cudaError_t cub_bytes(int nrows, int bits, size_t *bytes)
{
    size_t b = 0;
    cudaError_t e = cub::DeviceRadixSort::SortPairs(NULL, b, (const unsigned *)NULL, (unsigned *)NULL,
                                                    (const int *)NULL, (int *)NULL, nrows, 0, bits, cudaStreamPerThread);
    *bytes = up(b);
    return e;
}
/* the key bits of the rows a range of the table overlaps */
static int range_bits(size_t lo, size_t n, int width) { return dt_rows_key_bits(lo / width, (lo + n - 1) / width); }

__global__ static void keys_kernel(unsigned *keys, int *idx, const int32_t *rows, int nrows, size_t r0, size_t r1)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nrows; i += gridDim.x * blockDim.x) {
        keys[i] = dt_rows_key(rows[i], r0, r1);
        idx[i] = i;
    }
}

/* block k: the run of one row that starts at sorted position k, if one does, its entries in order */
template <typename S>
__global__ static void __launch_bounds__(THREADS)
    rows_run_kernel(S *dst, size_t lo, size_t n, const unsigned *keys, const int *idx, const float *vals, int nrows,
                    int width, size_t r0, unsigned sentinel)
{
    int k = blockIdx.x;
    if (!dt_rows_run_start(keys, k, sentinel)) return;
    unsigned key = keys[k];
    size_t start = (r0 + key) * (size_t)width;
    for (int c = threadIdx.x; c < width; c += THREADS) {
        size_t e = start + (size_t)c;
        if (e < lo || e >= lo + n) continue;
        S x = dst[e - lo];
        for (int j = k; j < nrows && keys[j] == key; j++) dt_st(&x, dt_ld(x) + vals[(size_t)idx[j] * width + c]);
        dst[e - lo] = x;
    }
}

extern "C" {

cudaError_t dt_cuda_rows_sorted_bytes(int nrows, size_t lo, size_t n, int width, size_t *bytes)
{
    size_t tb;
    *bytes = 0;
    if (nrows <= 0 || width <= 0 || n == 0) return cudaSuccess;
    cudaError_t e = cub_bytes(nrows, range_bits(lo, n, width), &tb);
    if (e == cudaSuccess) *bytes = tb + 4 * up((size_t)nrows * 4);
    return e;
}

cudaError_t dt_cuda_rows_add_sorted(void *dst, int t, size_t lo, size_t n, const int32_t *rows, const float *vals,
                                    int nrows, int width, void *scratch)
{
    return dt_by_type(t, [&](auto *tag) {
        using S = std::remove_pointer_t<decltype(tag)>;
        if (width <= 0 || nrows <= 0 || n == 0) return cudaSuccess;
        size_t r0 = lo / (size_t)width, r1 = (lo + n - 1) / (size_t)width; /* the table rows dst overlaps */
        int bits = range_bits(lo, n, width);
        size_t tb, part = up((size_t)nrows * 4);
        cudaError_t e = cub_bytes(nrows, bits, &tb);
        if (e != cudaSuccess) return e;
        char *s = (char *)scratch;
        unsigned *keys_in = (unsigned *)(s + tb), *keys = (unsigned *)(s + tb + part);
        int *idx_in = (int *)(s + tb + 2 * part), *idx = (int *)(s + tb + 3 * part);
        unsigned g = (unsigned)((nrows + THREADS - 1) / THREADS);
        keys_kernel<<<g, THREADS>>>(keys_in, idx_in, rows, nrows, r0, r1);
        e = cudaGetLastError();
        if (e == cudaSuccess)
            e = cub::DeviceRadixSort::SortPairs(scratch, tb, keys_in, keys, idx_in, idx, nrows, 0, bits,
                                                cudaStreamPerThread);
        if (e != cudaSuccess) return e;
        rows_run_kernel<S><<<(unsigned)nrows, THREADS>>>((S *)dst, lo, n, keys, idx, vals, nrows, width, r0,
                                                          dt_rows_key(-1, r0, r1));
        return cudaGetLastError();
    });
}

} /* extern "C" */
