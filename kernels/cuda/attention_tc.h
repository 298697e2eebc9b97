/*
 * attention_tc.h - the tensor-core attention of attention_tc.cu, for attention.cu's dispatch: the
 * fused flash attention forward and backward (grouped-query heads) for bf16 and fp16 activations of
 * head size 64 or 128, the products on mma.sync (16-bit operands, fp32 accumulators), the softmax
 * in fp32. Same arguments and buffers as ops.h's dt_cuda_attention_forward/_backward; backward
 * takes Drow, the (B,NH,T) rowsum(dout . out) that attention.cu's drow kernel has put in the
 * scratch.
 */
#ifndef DT_CUDA_ATTENTION_TC_H
#define DT_CUDA_ATTENTION_TC_H

#include <cuda_runtime.h>
#include <stdint.h>
#include "kernels/cuda/ops.h"
#include "kernels/cuda/plan.h"

/* whether the tensor-core kernels take a call: activations bf16 or fp16 (at), head size 64 or 128,
 * and the buffers they read and write 16 bytes at a time 16-byte aligned (a NULL one is not read) */
static inline bool dt_cuda_attention_tc_takes(int at, int hs, const void *a, const void *b, const void *c)
{
    uintptr_t bits = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c;
    return (at == DT_CUDA_BF16 || at == DT_CUDA_F16) && dt_attn_tc_head(hs) && (bits & 15) == 0;
}

/* B, T > 0, C = NH * hs and NH a multiple of NKV (grouped-query heads, kernels.h) with
 * dt_cuda_attention_tc_takes; cudaSuccess or the launch's error. Backward's splits: plan.h's
 * dt_attn_kv_splits_tried for the shape; when over 1, part: the scratch of the splits' fp32
 * partial dK and dV (after Drow), which attention.cu then adds into dqkv; else NULL. work: NULL, or
 * dkv2 on trial (plan.h): the scratch's dt_attn_dkv2_scratch floats past dt_attn_scratch_s's for
 * those splits. */
cudaError_t dt_cuda_attention_tc_forward(void *out, float *lse, const void *qkv, int at, int B, int T, int C, int NH,
                                         int NKV);
cudaError_t dt_cuda_attention_tc_backward(void *dqkv, float *part, int splits, const float *dout, const void *qkv,
                                          const float *lse, const float *drow, float *work, int at, int B, int T, int C,
                                          int NH, int NKV);

#endif
