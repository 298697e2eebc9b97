/* backend_cpu.c - the CPU op table. */
#include <omp.h>
#include "kernels/cpu/cpu.h"

const struct dt_kernels dt_kernels_cpu = {
    .name = "cpu",
    .matmul_forward = dt_cpu_matmul_forward,
    .matmul_backward = dt_cpu_matmul_backward,
    .layernorm_forward = dt_cpu_layernorm_forward,
    .layernorm_backward = dt_cpu_layernorm_backward,
    .attention_forward = dt_cpu_attention_forward,
    .attention_backward = dt_cpu_attention_backward,
    .gelu_forward = dt_cpu_gelu_forward,
    .gelu_backward = dt_cpu_gelu_backward,
    .residual_forward = dt_cpu_residual_forward,
    .encoder_forward = dt_cpu_encoder_forward,
    .encoder_backward = dt_cpu_encoder_backward,
    .softmax_xent = dt_cpu_softmax_xent,
    .adamw = dt_cpu_adamw,
    .sgd = dt_cpu_sgd,
    .sumsq = dt_cpu_sumsq,
    .nonfinite = dt_cpu_nonfinite,
    .scale = dt_cpu_scale,
};

int dt_kernels_threads(void) { return omp_get_max_threads(); }
