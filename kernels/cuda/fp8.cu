/*
 * fp8.cu - Transformer Engine's per-tensor FP8 scaling on the GPU (issue #42; kernels.h's struct
 * dt_fp8_q): the amax of an operand, the scales an FP8 matmul quantises with and the alphas its gemms
 * multiply by, the cast of an operand to FP8 codes with the transposed copy cuBLASLt's "TN" gemms
 * need in the backward (plan.h), and delayed scaling's update between optimizer steps (fp8_update).
 * matmul.c runs the gemms on what these write.
 *
 * The same bits as the CPU reference (kernels/cpu/matmul_fp8.c): every value is rounded to bf16 by
 * core/half.h, multiplied by its scale in fp32 and converted by core/fp8.h's dt_fp8_from_f32, scales
 * come from its dt_fp8_scale, and the inverses and their products are IEEE divisions and products
 * (nvcc's default -prec-div; nothing here is built with fast math). An amax is a max, which no order
 * of the threads changes; blocks fold theirs with an atomic max on the float's bits, which orders
 * non-negative floats as their values (NaNs skipped by fmaxf first, as the CPU's loop does).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>
#include "core/fp8.h"
#include "core/half.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/plan.h"

#define THREADS 256
#define AMAX_BLOCKS 1024     /* the amax pass's largest grid (a max is the same from any grid) */
#define UPDATE_THREADS 1024  /* fp8_update's one block: a model's few hundred tensors, a thread each */

static_assert(DT_CUDA_FP8_E4M3 == DT_FP8_E4M3 && DT_CUDA_FP8_E5M2 == DT_FP8_E5M2, "ops.h's formats are fp8.h's");
static_assert(DT_FP8_THREADS == THREADS, "the cast's blocks reduce their amax as the amax pass's do");

/* a value as the FP8 matmuls take it: widened, and rounded to bf16 unless it is bf16 already (an
 * fp32 weight or dout, rounded as the 16-bit matmuls round it) */
template <typename S>
__device__ static inline float bf16_value(S x)
{
    if constexpr (std::is_same_v<S, __nv_bfloat16>) return dt_ld(x);
    else return dt_f32_from_bf16(dt_bf16_from_f32(dt_ld(x)));
}

/* *p = max(*p, v) for v >= 0 and *p >= 0 (an amax): such floats order as their bit patterns */
__device__ static inline void fold_max(float *p, float v) { atomicMax((unsigned int *)p, __float_as_uint(v)); }

/* the largest m of the block's THREADS threads, in thread 0 */
__device__ static float block_max(float m)
{
    __shared__ float warp_max[THREADS / 32];
    for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x < 32) {
        m = threadIdx.x < THREADS / 32 ? warp_max[threadIdx.x] : 0.0f;
        for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    }
    return m;
}

/* current scaling's first pass: *amax and *fold (when not NULL) = max(themselves, the amax of x) */
template <typename S>
__global__ static void __launch_bounds__(THREADS) fp8_amax_kernel(float *amax, float *fold, const S *x, size_t n)
{
    float m = 0.0f;
    for (size_t i = blockIdx.x * (size_t)THREADS + threadIdx.x; i < n; i += (size_t)gridDim.x * THREADS)
        m = fmaxf(m, fabsf(bf16_value(x[i])));
    m = block_max(m);
    if (threadIdx.x == 0) {
        fold_max(amax, m);
        if (fold) fold_max(fold, m);
    }
}

/* what the scales kernel reads of each operand slot: whether it is there, and its struct dt_fp8_q */
struct scaling {
    const float *scale[DT_CUDA_FP8_SLOTS];
    int fmt[DT_CUDA_FP8_SLOTS], current[DT_CUDA_FP8_SLOTS], present[DT_CUDA_FP8_SLOTS];
};

/* Each operand's scale (current: from this call's amax, as dt_fp8_scale(amax, 1, fmt, 0); delayed:
 * *scale) and the gemms' alphas, the inverses' products as the CPU's matmul_fp8.c forms them. One
 * thread: three operands. */
__global__ static void fp8_scales_kernel(struct dt_cuda_fp8_state *st, struct scaling sc)
{
    float inv[DT_CUDA_FP8_SLOTS] = {0.0f, 0.0f, 0.0f};
    for (int i = 0; i < DT_CUDA_FP8_SLOTS; i++) {
        if (!sc.present[i]) continue;
        float s = sc.current[i] ? dt_fp8_scale(st->amax[i], 1.0f, (enum dt_fp8_fmt)sc.fmt[i], 0.0f) : *sc.scale[i];
        st->scale[i] = s;
        inv[i] = 1.0f / s;
    }
    st->alpha[DT_CUDA_FP8_FWD] = inv[DT_CUDA_FP8_X] * inv[DT_CUDA_FP8_W];
    st->alpha[DT_CUDA_FP8_DGRAD] = inv[DT_CUDA_FP8_G] * inv[DT_CUDA_FP8_W];
    st->alpha[DT_CUDA_FP8_WGRAD] = inv[DT_CUDA_FP8_G] * inv[DT_CUDA_FP8_X];
}

/*
 * The cast of one DT_FP8_TILE-square tile of x (R, Cc) (plan.h says which thread reads and writes
 * what): codes of fmt at *scale into q (R, Cc) and qt (Cc, R), either NULL; FOLD: the tile's amax
 * folded into *fold too (delayed scaling, whose scale is known before the pass).
 */
template <typename S, bool FOLD>
__global__ static void __launch_bounds__(DT_FP8_THREADS)
    fp8_cast_kernel(uint8_t *q, uint8_t *qt, const S *x, int R, int Cc, const float *scale, int fmt, float *fold)
{
    __shared__ __align__(16) uint8_t tile[DT_FP8_TILE][DT_FP8_PITCH];
    const int t = threadIdx.x, r0 = blockIdx.y * DT_FP8_TILE, c0 = blockIdx.x * DT_FP8_TILE;
    const float s = *scale;
    const enum dt_fp8_fmt f = (enum dt_fp8_fmt)fmt;
    const int col = dt_fp8_read_col(t);
    float m = 0.0f;
    for (int j = 0; j < DT_FP8_READS; j++) {
        int row = dt_fp8_read_row(t, j);
        if (r0 + row < R && c0 + col < Cc) {
            float v = bf16_value(x[(size_t)(r0 + row) * Cc + c0 + col]);
            if (FOLD) m = fmaxf(m, fabsf(v));
            tile[row][col] = dt_fp8_from_f32(v * s, f);
        }
    }
    __syncthreads();
    const int w = dt_fp8_write_word(t);
    for (int j = 0; j < DT_FP8_WRITES; j++) {
        int l = dt_fp8_write_line(t, j);
        if (q && r0 + l < R && c0 + 4 * w < Cc)
            *(uint32_t *)&q[(size_t)(r0 + l) * Cc + c0 + 4 * w] = *(const uint32_t *)&tile[l][4 * w];
        if (qt && c0 + l < Cc && r0 + 4 * w < R) { /* tile column l, rows 4w .. 4w + 3, little-endian */
            uint32_t word = (uint32_t)tile[4 * w][l] | (uint32_t)tile[4 * w + 1][l] << 8 |
                            (uint32_t)tile[4 * w + 2][l] << 16 | (uint32_t)tile[4 * w + 3][l] << 24;
            *(uint32_t *)&qt[(size_t)(c0 + l) * R + r0 + 4 * w] = word;
        }
    }
    if (FOLD) {
        m = block_max(m);
        if (t == 0) fold_max(fold, m);
    }
}

static unsigned amax_blocks(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < AMAX_BLOCKS ? (b ? b : 1) : AMAX_BLOCKS);
}

static bool operand_ok(const struct dt_cuda_fp8_operand *o)
{
    return (o->t == DT_CUDA_F32 || o->t == DT_CUDA_BF16 || o->t == DT_CUDA_F16) && o->R > 0 && o->Cc > 0 &&
           o->R % 4 == 0 && o->Cc % 4 == 0 && (o->R + DT_FP8_TILE - 1) / DT_FP8_TILE <= 65535 &&
           (o->fmt == DT_CUDA_FP8_E4M3 || o->fmt == DT_CUDA_FP8_E5M2) && (o->current || o->scale) &&
           (o->q || o->qt);
}

cudaError_t dt_cuda_fp8_quantise(struct dt_cuda_fp8_state *st, const struct dt_cuda_fp8_operand op[DT_CUDA_FP8_SLOTS])
{
    struct scaling sc = {};
    bool current = false;
    for (int i = 0; i < DT_CUDA_FP8_SLOTS; i++) {
        if (!op[i].x) continue;
        if (!operand_ok(&op[i])) return cudaErrorInvalidValue;
        sc.present[i] = 1;
        sc.scale[i] = op[i].scale;
        sc.fmt[i] = op[i].fmt;
        sc.current[i] = op[i].current;
        current |= op[i].current != 0;
    }
    /* current scaling: this call's amax first, from 0 */
    cudaError_t e = current ? cudaMemsetAsync(st->amax, 0, sizeof st->amax, cudaStreamPerThread) : cudaSuccess;
    for (int i = 0; i < DT_CUDA_FP8_SLOTS && e == cudaSuccess; i++) {
        if (!op[i].x || !op[i].current) continue;
        size_t n = (size_t)op[i].R * op[i].Cc;
        e = dt_by_type(op[i].t, [&](auto *tag) {
            using S = std::remove_pointer_t<decltype(tag)>;
            fp8_amax_kernel<S><<<amax_blocks(n), THREADS>>>(&st->amax[i], op[i].amax, (const S *)op[i].x, n);
            return cudaGetLastError();
        });
    }
    if (e == cudaSuccess) {
        fp8_scales_kernel<<<1, 1>>>(st, sc);
        e = cudaGetLastError();
    }
    for (int i = 0; i < DT_CUDA_FP8_SLOTS && e == cudaSuccess; i++) {
        if (!op[i].x) continue;
        const struct dt_cuda_fp8_operand *o = &op[i];
        dim3 grid((unsigned)((o->Cc + DT_FP8_TILE - 1) / DT_FP8_TILE),
                  (unsigned)((o->R + DT_FP8_TILE - 1) / DT_FP8_TILE));
        float *fold = o->current ? NULL : o->amax; /* current scaling folded it in the amax pass */
        e = dt_by_type(o->t, [&](auto *tag) {
            using S = std::remove_pointer_t<decltype(tag)>;
            if (fold)
                fp8_cast_kernel<S, true><<<grid, DT_FP8_THREADS>>>(o->q, o->qt, (const S *)o->x, o->R, o->Cc,
                                                                   &st->scale[i], o->fmt, fold);
            else
                fp8_cast_kernel<S, false><<<grid, DT_FP8_THREADS>>>(o->q, o->qt, (const S *)o->x, o->R, o->Cc,
                                                                    &st->scale[i], o->fmt, NULL);
            return cudaGetLastError();
        });
    }
    return e;
}

/*
 * kernels.h's fp8_update, the CPU's dt_cpu_fp8_update statement for statement: thread i takes tensor
 * i (and i + blockDim.x, ...), its history a column of hist (len, n), so a warp's reads of a row are
 * coalesced. The overflowed tensors (twice the range or more) are counted by the one block and added to *saturated once, as
 * the CPU adds its count.
 */
__global__ static void __launch_bounds__(UPDATE_THREADS)
    fp8_update_kernel(float *hist, float *scale, int n, int len, int most_recent, float margin, int gfmt,
                      float *saturated)
{
    int count = 0;
    for (int i0 = 0; i0 < n; i0 += blockDim.x) {
        int i = i0 + threadIdx.x, sat = 0;
        if (i < n) {
            enum dt_fp8_fmt f = i % 3 == 2 ? (enum dt_fp8_fmt)gfmt : DT_FP8_E4M3;
            float last = hist[i], amax = last;
            for (int r = 1; r < len; r++) amax = fmaxf(amax, hist[(size_t)r * n + i]);
            for (int r = 0; r + 1 < len; r++) hist[(size_t)r * n + i] = hist[(size_t)(r + 1) * n + i];
            if (len > 1) hist[(size_t)(len - 1) * n + i] = last;
            hist[i] = 0.0f;
            sat = last * scale[i] > 2.0f * dt_fp8_max(f);
            scale[i] = dt_fp8_scale(most_recent ? last : amax, scale[i], f, margin);
        }
        count += __syncthreads_count(sat);
    }
    if (threadIdx.x == 0) *saturated += (float)count;
}

cudaError_t dt_cuda_fp8_update(float *hist, float *scale, int n, int len, int most_recent, float margin, int gfmt,
                               float *saturated)
{
    if (n < 0 || len < 1 || (gfmt != DT_CUDA_FP8_E4M3 && gfmt != DT_CUDA_FP8_E5M2)) return cudaErrorInvalidValue;
    int threads = n < UPDATE_THREADS ? (n + 31) / 32 * 32 : UPDATE_THREADS;
    fp8_update_kernel<<<1, threads ? threads : 32>>>(hist, scale, n, len, most_recent, margin, gfmt, saturated);
    return cudaGetLastError();
}
