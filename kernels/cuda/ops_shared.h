/*
 * ops_shared.h - what the CUDA ops' files (ops.cu, optim.cu, norms.cu, rope_swiglu.cu, embed.cu,
 * loss.cu) share: the block size and grids, the grid-stride loop, an element of any of the three
 * float types, and the packs of 16 bytes and of 8 elements the packed kernels move. C++ for nvcc;
 * the kernels' entry points are ops.h's.
 */
#ifndef DT_CUDA_OPS_SHARED_H
#define DT_CUDA_OPS_SHARED_H

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

static inline unsigned blocks(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 65535u * 16u ? (b ? b : 1) : 65535u * 16u);
}

/* grid-stride loop: any n with a bounded grid */
#define FOR_EACH(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

static inline bool known(int t) { return t == DT_CUDA_F32 || t == DT_CUDA_BF16 || t == DT_CUDA_F16; }
static inline bool half16(int t) { return t == DT_CUDA_BF16 || t == DT_CUDA_F16; }

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
static inline bool aligned16(const void *p) { return (uintptr_t)p % 16 == 0; }
/* the grid of a packed launch: a thread per pack (the tail's few elements go to the first threads) */
template <typename S>
static inline unsigned pack_blocks(size_t N)
{
    return blocks((N + pack_n<S> - 1) / pack_n<S>);
}

/* 8 elements of T moved as one (16 bytes of a 16-bit T, 32 of fp32): the packed kernels on trial
 * (plan.h) load and store their operands in these where the launcher finds the buffers aligned */
template <typename T>
struct __align__(8 * sizeof(T)) pack8 {
    T x[8];
};

#endif
