/*
 * module.h - the interface between dtrun and its CUDA module (dtrun_cuda.so).
 *
 * Everything that links the CUDA runtime, cuBLAS(Lt) or NCCL is built into
 * that shared object, which dtrun dlopens only when a GPU is wanted
 * (kernels/cuda_module.c), so a dtrun process that trains on the CPU or only
 * checks a config maps none of those libraries. The module exports one symbol,
 * DT_CUDA_MODULE_SYMBOL, of this type; dtrun refuses a module whose abi or
 * version differs from its own.
 */
#ifndef DT_CUDA_MODULE_IFACE_H
#define DT_CUDA_MODULE_IFACE_H

#include <stddef.h>
#include <stdint.h>

/* Raise when this struct changes. */
#define DT_CUDA_MODULE_ABI 2
#define DT_CUDA_MODULE_SYMBOL "dt_cuda_module"
#define DT_CUDA_MODULE_FILE "dtrun_cuda.so"

/*
 * Device memory and the kernels of ops.cu (kernels.h's semantics, device pointers). Each returns 0
 * or a CUDA error code that error_string names; kernels run asynchronously, so a kernel's own
 * fault shows at the next synchronize. t: enum dt_dtype's DT_BF16 or DT_F16 (DT_F32 for sumsq).
 * The GPU tests drive them against the CPU kernels; the GPU kernel table (issue 14) will too.
 */
struct dt_cuda_ops {
    const char *(*error_string)(int err); /* CUDA's errors and cuBLASLt's */
    /* what the matmuls keep between calls (the cuBLASLt handle, workspace, scratch) */
    int (*ctx_create)(void **ctx);
    void (*ctx_destroy)(void *ctx);
    /* lp: DT_F32, or DT_BF16 / DT_F16 for the operands of matmul_*_lp (fp32 accumulation) */
    int (*matmul_forward)(void *ctx, float *out, const float *inp, const float *weight, const float *bias, int BT, int C,
                          int OC, int lp);
    int (*matmul_backward)(void *ctx, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                           const float *weight, int BT, int C, int OC, int lp);
    int (*malloc)(void **p, size_t bytes);
    int (*free)(void *p);
    int (*to_device)(void *dst, const void *src, size_t bytes);
    int (*to_host)(void *dst, const void *src, size_t bytes);
    int (*synchronize)(void);
    int (*gelu_forward)(float *out, const float *inp, size_t N);
    int (*gelu_backward)(float *dinp, const float *inp, const float *dout, size_t N);
    int (*residual_forward)(float *out, const float *a, const float *b, size_t N);
    int (*cast_to_lp)(uint16_t *dst, const float *src, size_t n, int t);
    int (*cast_from_lp)(float *dst, const uint16_t *src, size_t n, int t);
    int (*round_lp)(float *dst, const float *src, size_t n, int t);
    int (*adamw)(float *param, const float *grad, float gscale, float *m, float *v, size_t n, float lr, float beta1,
                 float beta2, float eps, float wd, int t);
    int (*sumsq_nonfinite)(const void *x, int t, size_t n, double *sumsq, size_t *nonfinite);
    int (*layernorm_forward)(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                             const float *bias, int BT, int C);
    int (*layernorm_backward)(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                              const float *weight, const float *mean, const float *rstd, int BT, int C);
    int (*position_forward)(float *out, const float *wpe, int B, int T, int C);
    int (*position_backward)(float *dwpe, const float *dout, int B, int T, int C);
    int (*rows_forward)(float *out, const int32_t *inp, const float *table, int v0, int nv, int n, int C);
    int (*rows_add)(void *dst, int t, size_t lo, size_t n, const int32_t *rows, const float *vals, int nrows, int width);
    int (*sgd)(float *param, const float *grad, float gscale, float *buf, size_t n, float lr, float momentum,
               int nesterov, float wd, int first_step);
    int (*round_stochastic)(uint16_t *dst, const float *src, size_t n, uint64_t seed, uint64_t index0);
    /* convert (add 0) and accumulate (add 1) between fp32, bf16, fp16 */
    int (*convert)(void *dst, int dt, const void *src, int st, size_t n, int add);
    /* *loss: the mean squared error (synchronizes) */
    int (*mse)(float *dout, const float *out, const float *target, float dloss, size_t n, float *loss);
    /* *mean: the mean loss (synchronizes) */
    int (*softmax_xent)(float *losses, float *logits, const int32_t *targets, float dloss, int BT, int V, int vb,
                        float *mean);
};

struct dt_cuda_module {
    int abi;             /* DT_CUDA_MODULE_ABI of the build that made it */
    const char *version; /* that build's PACKAGE_VERSION */
    /* GPUs the CUDA runtime sees; 0 with why[] filled when none */
    int (*device_count)(char *why, size_t n);
    /* "CUDA runtime 13.0, cuBLASLt 130000, NCCL 2.27.7; 1 GPU" */
    void (*describe)(char *buf, size_t n);
    const struct dt_cuda_ops *ops;
    /* ncclGetUniqueId into out (NCCL_UNIQUE_ID_BYTES, 128): what rank 0 hands every rank through
     * the bootstrap (launch/bootstrap.h) before ncclCommInitRank. 0, or -1 with why. */
    int (*nccl_unique_id)(unsigned char out[128], char *why, size_t n);
};

#endif
