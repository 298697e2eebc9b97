/* backend_cpu.c - the CPU op table. */
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "core/mem.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu.h"
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

/*
 * Flush denormals to zero (FTZ and DAZ in MXCSR). Adam's moments of rarely
 * seen embedding rows decay geometrically into the denormal range, where every
 * operation takes a microcode assist: PyTorch's 124M step on these machines
 * slows from 4 s to 17 s over five steps for that reason. OpenMP workers,
 * oneDNN's included, are started later and inherit the setting.
 */
static void cpu_init(void)
{
#if defined(__x86_64__)
    _mm_setcsr(_mm_getcsr() | 0x8040);
#elif defined(__aarch64__)
    uint64_t fpcr; /* FZ, bit 24: flush denormal inputs and results to zero */
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr | (1ull << 24)));
#endif
}

/* Which code each kind of op runs on this CPU: a run's sums depend on it (AMX, AVX512-BF16 and AVX2
 * machines each take their own), so the log says it. */
static void cpu_describe(struct dt_kctx *kc, char *buf, size_t n, enum dt_dtype compute)
{
    const char *fp32 = dt_cpu_gemm_path(), *loops = "baseline";
#if defined(__x86_64__)
    /* the levels DT_CLONES compiles for (vmath.h), by their defining features (clang's builtin knows
     * no level names) */
    __builtin_cpu_init();
    bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
    bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    loops = v4 ? "x86-64-v4" : v3 ? "x86-64-v3" : "x86-64";
#endif
    if (compute == DT_F32) snprintf(buf, n, "matmuls: %s; loops: %s", fp32, loops);
    else snprintf(buf, n, "%s matmuls: %s; fp32 matmuls: %s; conversions: %s; loops: %s", dt_dtype_str(compute),
                  dt_cpu_matmul_lp_path(kc, compute), fp32, dt_convert_fast()->name, loops);
}

/* Tensor memory is host memory: huge pages for the big buffers (core/mem.h), plain memset and memcpy. */
static void *cpu_alloc(struct dt_kctx *kc, size_t bytes) { return dt_alloc_big(bytes); }
static void cpu_free(struct dt_kctx *kc, void *p) { dt_free_big(p); }
static void *cpu_host_alloc(struct dt_kctx *kc, size_t bytes) { return dt_alloc_big(bytes); }
static void cpu_host_free(struct dt_kctx *kc, void *p) { dt_free_big(p); }
/* One thread's memset stops well short of the memory's bandwidth (124M fp32 gradients: 2x faster
 * on two threads than on one); below a MiB a parallel region's start would cost what it saves. */
void dt_cpu_zero(struct dt_kctx *kc, void *p, size_t bytes)
{
    #pragma omp parallel if (bytes >= DT_CPU_PARALLEL_BYTES)
    {
        size_t lo, hi;
        dt_cpu_byte_share(bytes, &lo, &hi);
        memset((char *)p + lo, 0, hi - lo);
    }
}
static void cpu_copy(struct dt_kctx *kc, void *dst, const void *src, size_t bytes, enum dt_copy_kind kind)
{
    if (bytes) memmove(dst, src, bytes);
}
/* every CPU kernel has finished when it returns; one that could not get its scratch said so */
static dt_status_t cpu_synchronize(struct dt_kctx *kc, int64_t step) { return dt_cpu_failure(kc, step); }
static void cpu_wait(struct dt_kctx *kc) {}

const struct dt_kernels dt_kernels_cpu = {
    .name = "cpu",
    .ctx_create = dt_cpu_ctx_create,
    .ctx_destroy = dt_cpu_ctx_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .zero = dt_cpu_zero,
    .copy = cpu_copy,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .synchronize = cpu_synchronize,
    .wait = cpu_wait,
    .attention_saved = dt_cpu_attention_saved,
    .attention_scratch = dt_cpu_attention_scratch,
    .init = cpu_init,
    .describe = cpu_describe,
    .matmul_forward = dt_cpu_matmul_forward,
    .matmul_backward = dt_cpu_matmul_backward,
    .matmul_forward_lp = dt_cpu_matmul_forward_lp,
    .matmul_backward_lp = dt_cpu_matmul_backward_lp,
    .gelu_fused = dt_cpu_gelu_fused,
    .matmul_gelu_forward_lp = dt_cpu_matmul_gelu_forward_lp,
    .matmul_dgelu_backward_lp = dt_cpu_matmul_dgelu_backward_lp,
    .matmul_forward_fp8 = dt_cpu_matmul_forward_fp8,
    .matmul_backward_fp8 = dt_cpu_matmul_backward_fp8,
    .fp8_update = dt_cpu_fp8_update,
    .cast_to_lp = dt_cpu_cast_to_lp,
    .cast_from_lp = dt_cpu_cast_from_lp,
    .round_lp = dt_cpu_round_lp,
    .layernorm_forward = dt_cpu_layernorm_forward,
    .layernorm_backward = dt_cpu_layernorm_backward,
    .rmsnorm_forward = dt_cpu_rmsnorm_forward,
    .rmsnorm_backward = dt_cpu_rmsnorm_backward,
    .rope_forward = dt_cpu_rope_forward,
    .rope_backward = dt_cpu_rope_backward,
    .swiglu_forward = dt_cpu_swiglu_forward,
    .swiglu_backward = dt_cpu_swiglu_backward,
    .attention_forward = dt_cpu_attention_forward,
    .attention_backward = dt_cpu_attention_backward,
    .attention_cached = dt_cpu_attention_cached,
    .gelu_forward = dt_cpu_gelu_forward,
    .gelu_backward = dt_cpu_gelu_backward,
    .residual_forward = dt_cpu_residual_forward,
    .position_forward = dt_cpu_position_forward,
    .rows_forward = dt_cpu_rows_forward,
    .position_backward = dt_cpu_position_backward,
    .rows_add = dt_cpu_rows_add,
    .convert = dt_cpu_convert,
    .accumulate = dt_cpu_accumulate,
    .narrow_inplace = dt_cpu_narrow_inplace,
    .widen_inplace = dt_cpu_widen_inplace,
    .round_stochastic = dt_cpu_round_stochastic,
    .softmax_xent = dt_cpu_softmax_xent,
    .softmax_xent_lp = dt_cpu_softmax_xent_lp,
    .adamw = dt_cpu_adamw,
    .adamw_slices = dt_cpu_adamw_slices,
    .sgd = dt_cpu_sgd,
    .mse = dt_cpu_mse,
    .sumsq = dt_cpu_sumsq,
    .nonfinite = dt_cpu_nonfinite,
    .sumsq_parts = dt_cpu_sumsq_parts,
};

int dt_kernels_threads(void) { return omp_get_max_threads(); }
