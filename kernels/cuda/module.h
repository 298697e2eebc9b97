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
/* on_device's copy goes through a temporary: the ranges overlap (the table counts that memory too) */
static inline int dt_cuda_copy_overlaps(const void *dst, const void *src, size_t bytes)
{
    const char *d = (const char *)dst, *s = (const char *)src;
    return !(d + bytes <= s || s + bytes <= d);
}

#define DT_CUDA_MODULE_ABI 14
#define DT_CUDA_MODULE_SYMBOL "dt_cuda_module"
#define DT_CUDA_MODULE_FILE "dtrun_cuda.so"

/*
 * Device memory and the kernels of ops.cu and its siblings (kernels.h's semantics, device pointers). Each returns 0
 * or a CUDA error code that error_string names; kernels run asynchronously, so a kernel's own
 * fault shows at the next synchronize. t: enum dt_dtype's DT_BF16 or DT_F16 (DT_F32 for sumsq);
 * at, ot, bt: an activation's type, any of DT_F32, DT_BF16, DT_F16 (computed in fp32, 16-bit stores
 * rounded to nearest even). ctx: ctx_create's, which also holds the device scratch of the ops that
 * take it. The GPU tests drive them against the CPU kernels, and kernels/cuda_table.c is kernels.h's
 * table over them.
 */
/* one of sumsq_parts' parts: n elements at x; at most DT_CUDA_PARTS_MAX a call */
#define DT_CUDA_PARTS_MAX 128
struct dt_cuda_part {
    const void *x;
    size_t n;
};
/* kernels.h's struct dt_adamw_slice, field for field (cuda_table.c asserts the layouts are one) */
struct dt_cuda_adamw_slice {
    float *param, *m, *v;
    const void *grad;
    void *plp;
    size_t n;
    float wd, l2;
};

/* kernels.h's struct dt_fp8_q as the module takes it: fmt enum dt_fp8_fmt's value (0 E4M3, 1 E5M2),
 * current 0 (delayed scaling: *scale) or 1; scale and amax device pointers */
struct dt_cuda_fp8_q {
    const float *scale;
    float *amax;
    int fmt, current;
};

/* The module's own error, beside CUDA's and cuBLAS's codes (error_string names it): an FP8 matmul
 * asked of a shape or buffer cuBLASLt's FP8 gemms do not take (matmul_forward_fp8's comment) */
#define DT_CUDA_ERR_FP8_SHAPE (1 << 21)

struct dt_cuda_ops {
    const char *(*error_string)(int err); /* CUDA's errors, cuBLASLt's and DT_CUDA_ERR_FP8_SHAPE */
    /* what the matmuls keep between calls (the cuBLASLt handle, workspace, scratch) */
    int (*ctx_create)(void **ctx);
    void (*ctx_destroy)(void *ctx);
    /* lp: DT_F32 (every operand fp32), or DT_BF16 / DT_F16, the operands of matmul_*_lp (fp32
     * accumulation): inp of type lp, out of type ot (lp, rounded once, or DT_F32), dout of type dt
     * (lp, or DT_F32: rounded to lp here), dbias the column sums of dout as rounded; wt: the type of
     * weight and bias, DT_F32 (the weight rounded to lp here) or lp (16-bit, used as it is) */
    int (*matmul_forward)(void *ctx, void *out, int ot, const void *inp, const void *weight, const void *bias, int wt,
                          int BT, int C, int OC, int lp);
    /* set: kernels.h's DT_SET_* bits, the outputs to overwrite rather than add to */
    int (*matmul_backward)(void *ctx, float *dinp, float *dweight, float *dbias, const void *dout, int dt,
                           const void *inp, const void *weight, int wt, int BT, int C, int OC, int lp, unsigned set);
    /* GELU in the matmul's epilogue (kernels.h's matmul_gelu_forward_lp, matmul_dgelu_backward_lp):
     * out, pre and dpre of type lp, 16-bit */
    int (*matmul_gelu_forward)(void *ctx, void *out, void *pre, const void *inp, const void *weight, const void *bias,
                               int wt, int BT, int C, int OC, int lp);
    int (*matmul_dgelu_backward)(void *ctx, void *dpre, const void *pre, float *dweight, float *dbias,
                                 const void *dout, int dt, const void *inp, const void *weight, int wt, int BT, int C,
                                 int OC, int lp, unsigned set);
    /* fp8-mixed's linear layers (kernels.h's matmul_forward_fp8, matmul_backward_fp8): inp bf16,
     * weight and bias of type wt (fp32 or bf16), out of type ot (fp32 or bf16), dout of type dt (fp32
     * or bf16), the operands quantised as qx, qw and qg say. cuBLASLt's FP8 gemms take only BT, C and OC
     * that are multiples of 16 and out, dinp and dweight on 16-byte boundaries: other calls return
     * DT_CUDA_ERR_FP8_SHAPE and touch nothing. */
    int (*matmul_forward_fp8)(void *ctx, void *out, int ot, const void *inp, const void *weight, const void *bias,
                              int wt, int BT, int C, int OC, const struct dt_cuda_fp8_q *qx,
                              const struct dt_cuda_fp8_q *qw);
    int (*matmul_backward_fp8)(void *ctx, float *dinp, float *dweight, float *dbias, const void *dout, int dt,
                               const void *inp, const void *weight, int wt, int BT, int C, int OC,
                               const struct dt_cuda_fp8_q *qx, const struct dt_cuda_fp8_q *qw,
                               const struct dt_cuda_fp8_q *qg, unsigned set);
    /* kernels.h's fp8_update (device pointers, saturated too; gfmt as dt_cuda_fp8_q's fmt) */
    int (*fp8_update)(float *hist, float *scale, int n, int len, int most_recent, float margin, int gfmt,
                      float *saturated);
    /* the GPU this thread's calls go to */
    int (*set_device)(int dev);
    /* the kernels on trial this process runs in place of those in use (plan.h's DT_CUDA_TRY_ flags) */
    void (*set_tries)(unsigned flags);
    /* 1: p is device (or managed) memory; 0: host memory, or NULL */
    int (*is_device)(const void *p);
    int (*malloc)(void **p, size_t bytes);
    int (*free)(void *p);
    /* page-locked host memory (checkpoint staging, offloaded state): copies from it run at the
     * link's rate and can be asynchronous */
    int (*malloc_host)(void **p, size_t bytes);
    int (*free_host)(void *p);
    int (*memset)(void *p, int byte, size_t bytes);
    int (*to_device)(void *dst, const void *src, size_t bytes);
    int (*to_host)(void *dst, const void *src, size_t bytes);
    /* device to device; the ranges may overlap (then through a temporary buffer of the copy's size,
     * dt_cuda_copy_overlaps) */
    int (*on_device)(void *dst, const void *src, size_t bytes);
    int (*synchronize)(void);
    /* Copies beside the kernels (kernels/cuda/copies.h, kernels.h's copy_async and copy_wait): on a
     * stream of their own, each after what the calling thread's compute stream holds so far, named
     * by *ticket; copy_wait has the host (host 1) or the compute stream (host 0) wait for the
     * copies up to a ticket. kind: enum dt_copy_kind. */
    int (*copies_create)(void **copies);
    void (*copies_destroy)(void *copies);
    int (*copy_async)(void *copies, void *dst, const void *src, size_t bytes, int kind, uint64_t *ticket);
    int (*copy_wait)(void *copies, uint64_t ticket, int host);
    /* kernels.h's copy_inline: on the calling thread's compute stream, its ticket of its own kind
     * (a ring of its own), which copy_wait takes as copy_async's */
    int (*copy_inline)(void *copies, void *dst, const void *src, size_t bytes, int kind, uint64_t *ticket);
    /* device bytes the context holds: cuBLASLt's workspace and the ops' scratch (it only grows) */
    size_t (*ctx_bytes)(void *ctx);
    /* cudaMemGetInfo on the calling thread's device */
    int (*mem_info)(size_t *free_bytes, size_t *total_bytes);
    /* gelu_backward writes dinp (=) */
    int (*gelu_forward)(void *out, const void *inp, int at, size_t N);
    int (*gelu_backward)(void *dinp, const void *inp, const float *dout, int at, size_t N);
    /* out = a + b, b of type bt widened */
    int (*residual_forward)(float *out, const float *a, const void *b, int bt, size_t N);
    int (*cast_to_lp)(uint16_t *dst, const float *src, size_t n, int t);
    int (*cast_from_lp)(float *dst, const uint16_t *src, size_t n, int t);
    int (*round_lp)(float *dst, const float *src, size_t n, int t);
    /* grad of type gt (any of the three); plp: NULL, or the updated parameters rounded to pt (16-bit) */
    int (*adamw)(float *param, const void *grad, int gt, float gscale, float l2, float *m, float *v, size_t n, float lr,
                 float beta1, float beta2, float eps, float wd, int t, void *plp, int pt);
    /* part i's sum of squares (in double) into sumsq[i] and its inf/nan count into nonfinite[i], np
     * in [1, DT_CUDA_PARTS_MAX]: one wait for the device for all of them (the results gather in ctx's
     * scratch, one copy back) */
    int (*sumsq_parts)(void *ctx, const struct dt_cuda_part *parts, int np, int t, double *sumsq, size_t *nonfinite);
    int (*layernorm_forward)(void *out, int ot, float *mean, float *rstd, const float *inp, const float *weight,
                             const float *bias, int BT, int C);
    /* dweight and dbias reduced over rows in the CPU's order (blocks of 64 rows) in ctx's scratch */
    /* dinp_lp (type lt) not NULL: dinp also rounded into it */
    int (*layernorm_backward)(void *ctx, float *dinp, void *dinp_lp, int lt, float *dweight, float *dbias,
                              const float *dout, const float *inp, const float *weight, const float *mean,
                              const float *rstd, int BT, int C);
    /* Llama's ops, kernels.h's semantics; rmsnorm_backward's scratch in ctx, rope's backward the
     * inverse rotation (backward 1) */
    int (*rmsnorm_forward)(void *out, int ot, float *rstd, const float *inp, const float *weight, float eps, int BT,
                           int C);
    int (*rmsnorm_backward)(void *ctx, float *dinp, void *dinp_lp, int lt, float *dweight, const float *dout,
                            const float *inp, const float *weight, const float *rstd, int BT, int C);
    int (*rope)(void *qkv, int at, const float *cs, int B, int T, int NH, int NKV, int hs, int backward);
    int (*swiglu_forward)(void *out, const void *inp, int at, int BT, int H);
    int (*swiglu_backward)(void *dinp, const void *inp, const float *dout, int at, int BT, int H);
    int (*position_forward)(float *out, const float *wpe, int B, int T, int C);
    int (*position_backward)(float *dwpe, const float *dout, int B, int T, int C);
    /* table of type t: fp32, bf16 or fp16 */
    int (*rows_forward)(float *out, const int32_t *inp, const void *table, int t, int v0, int nv, int n, int C);
    /* ctx: the sorted entries' scratch under rows2 */
    int (*rows_add)(void *ctx, void *dst, int t, size_t lo, size_t n, const int32_t *rows, const float *vals, int nrows,
                    int width);
    /* adamw over ns slices in one launch (ctx: where the slice table goes on the device) */
    int (*adamw_slices)(void *ctx, const struct dt_cuda_adamw_slice *s, int ns, int gt, float gscale, float lr,
                        float beta1, float beta2, float eps, int t, int pt);
    /* grad, gt, plp and pt as adamw's */
    int (*sgd)(float *param, const void *grad, int gt, float gscale, float *buf, size_t n, float lr, float momentum,
               int nesterov, float wd, int first_step, void *plp, int pt);
    int (*round_stochastic)(uint16_t *dst, const float *src, size_t n, uint64_t seed, uint64_t index0);
    /* convert (add 0) and accumulate (add 1) between fp32, bf16, fp16 */
    int (*convert)(void *dst, int dt, const void *src, int st, size_t n, int add);
    /* The loss ops put their mean loss in one of two places: *mean (host memory: copied back, which
     * synchronizes), or, mean NULL, *acc += (double)(float)mean / div (acc a double on the device:
     * nothing waits; kernels.h's struct dt_loss_sink). */
    /* the mean squared error */
    int (*mse)(void *ctx, float *dout, const float *out, const float *target, float dloss, size_t n, float *mean,
               double *acc, double div);
    /* the mean cross-entropy */
    int (*softmax_xent)(float *losses, float *logits, const int32_t *targets, float dloss, int BT, int V, int vb,
                        float *mean, double *acc, double div);
    /* the same on 16-bit logits of type t, dlogits rounded back in place */
    int (*softmax_xent_lp)(float *losses, uint16_t *logits, const int32_t *targets, float dloss, int BT, int V, int vb,
                           int t, float *mean, double *acc, double div);
    /* n fp32 values into n values of type t at the buffer's start, and back, without a second buffer */
    int (*narrow_inplace)(void *buf, size_t n, int t);
    int (*widen_inplace)(void *buf, size_t n, int t);
    /* Causal attention with grouped-query heads, fused (flash attention; head size up to 128): a
     * row of qkv (B,T,(NH + 2 NKV) hs), hs = C/NH, holds NH query heads, NKV key heads, NKV value
     * heads (NKV dividing NH), query head h attending with key/value head h / (NH/NKV); qkv and out
     * (B,T,C) of type at, lse (B,NH,T) fp32, each query row's log-sum-exp of its scaled scores, all
     * backward keeps; backward writes dqkv (=, type at, qkv's layout, a key/value head's gradient
     * summed over its group) from the fp32 dout, deterministic, with
     * attention_scratch(B, T, C, NH, NKV, at) floats of device scratch. */
    int (*attention_forward)(void *out, float *lse, const void *qkv, int at, int B, int T, int C, int NH, int NKV);
    int (*attention_backward)(void *dqkv, const float *dout, const void *qkv, const void *out, const float *lse,
                              float *scratch, int at, int B, int T, int C, int NH, int NKV);
    size_t (*attention_scratch)(int B, int T, int C, int NH, int NKV, int at);
    /* The reference, fp32, the same heads: the textbook algorithm through cuBLAS (ctx from
     * ctx_create), att (B,NH,T,T) the causal softmax; backward from att writes dqkv (=), with
     * attention_ref_scratch(NH, T) floats of scratch. */
    int (*attention_forward_ref)(void *ctx, float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                                 int NKV);
    int (*attention_backward_ref)(void *ctx, float *dqkv, const float *dout, const float *qkv, const float *att,
                                  float *scratch, int B, int T, int C, int NH, int NKV);
    size_t (*attention_ref_scratch)(int NH, int T);
    /* Attention for generation (kernels.h's attention_cached): the key and value heads of qkv's n
     * new rows (B,n,W) stored into kcache and vcache (B,Tc,NKV,hs) at rows [pos, pos + n), then out
     * (B,n,C) each new query attended over the cached rows 0 .. its own; of type at, computed in
     * fp32; head size up to 256, pos + n <= Tc. */
    int (*attention_cached)(void *out, const void *qkv, void *kcache, void *vcache, int at, int B, int n, int pos,
                            int Tc, int C, int NH, int NKV);
};

/* What `dtrun info` says about one GPU (cudaGetDeviceProperties, the PCI bus id, sysfs' NUMA node). */
struct dt_cuda_device {
    char name[256];
    size_t mem_bytes;     /* total device memory */
    char pci_bus_id[32];  /* "0000:3b:00.0" */
    int numa_node;        /* -1: the kernel does not say */
    int cc_major, cc_minor;
    int sm_count;
};

/*
 * NCCL, behind src/comm/nccl.c (the comm backend); kernels/cuda/nccl.c. Every communicator is
 * non-blocking (ncclConfig_t.blocking = 0) and every call is polled with ncclCommGetAsyncError, so
 * creation and teardown end at their timeout and a collective that never completes ends when
 * abort is called from another thread. Streams: the kernels run on each host thread's per-thread
 * default stream (the module is compiled with --default-stream per-thread); every communicator
 * has its own stream, ordered after the compute work by an event recorded on the starting thread
 * (order), so a gradient bucket's reduction overlaps the backward pass that continues on the
 * compute stream. kind, red, dtype: comm.h's enum dt_coll_kind, enum dt_reduce and enum dt_dtype
 * values; buffers are device memory, split and placed as comm.h says (dt_comm_part's uneven
 * parts, its in-place forms). Each returns 0, or -1 with why[] naming the rank ("rank 1 of 4
 * (cuda:1): "), the call, NCCL's or CUDA's error, ncclGetLastError's text and a hint line.
 */
struct dt_cuda_nccl {
    /* ncclCommInitRankConfig on device dev, non-blocking, polled until done or timeout_s (then aborted) */
    int (*init)(void **comm, const unsigned char id[128], int nranks, int rank, int dev, double timeout_s, char *why,
                size_t n);
    /* ncclCommSplit (collective over comm, MPI_Comm_split's color and key), under the same timeout */
    int (*split)(void *comm, int color, int key, void **child, double timeout_s, char *why, size_t n);
    /* an event recorded on the calling thread's compute stream, for run to wait on (NULL on error) */
    void *(*order)(char *why, size_t n);
    /* enqueue after `after` (order's event, consumed; may be NULL) on the communicator's stream
     * and wait for it, polling ncclCommGetAsyncError; an abort from another thread ends a wait
     * that never finishes */
    int (*run)(void *comm, void *after, int kind, int red, int dtype, const void *send, void *recv, size_t count,
               int root, char *why, size_t n);
    /* ncclCommAbort: safe from the watchdog thread while run waits; destroy still frees the rest */
    void (*abort)(void *comm);
    /* every rank together: ncclCommFinalize polled under init's timeout, then ncclCommDestroy
     * (ncclCommAbort when the finalize fails or times out); after abort, frees what is left */
    void (*destroy)(void *comm);
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
    /* device dev's details: 0, or -1 with why */
    int (*device_info)(int dev, struct dt_cuda_device *out, char *why, size_t n);
    const struct dt_cuda_nccl *nccl;
};

#endif
