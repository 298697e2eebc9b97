/*
 * test_cuda_ops.c - every CUDA op kernel of the module (kernels/cuda/ops.cu and its siblings)
 * against its CPU twin (dt_kernels_cpu) on random inputs, with a tolerance per op written here: casts bit for bit
 * (both sides compile core/half.h), elementwise ops within a few ulp (the GPU's expf is not
 * glibc's), reductions in the CPU's fixed order (row blocks of 64) bit for bit where they add
 * without multiplying, matmuls within the rounding error bound of fp32 accumulation. Each op that
 * takes activations of the run's type is run in fp32, bf16 and fp16: a 16-bit result may differ
 * from the CPU's by the fp32 tolerance plus one unit in its last place (lp_excess). Attention has a
 * program of its own (test_cuda_attention.c). Speaks TAP into its log; where the
 * module cannot be loaded or sees no GPU it says why and exits 77, which `make check` counts as
 * skipped, so it runs for real only on a GPU node: `make check-gpu`. The cases live one idea a file
 * (cuda_ops_*.c, cuda_ops_cases.h); this file runs them in order, then again with the kernels on
 * trial.
 */
#include "cuda_check.h"
#include "cuda_ops_cases.h"
#include "kernels/cuda/plan.h"

unsigned trying; /* cuda_ops_cases.h */

int main(void)
{
    int rc = cuda_check_start();
    if (rc) return rc;
    elementwise();
    casts();
    optimizer_and_norms();
    llama_ops();
    adamw_slices_case(DT_F32, DT_BF16);
    adamw_slices_case(DT_BF16, DT_BF16);
    adamw_slices_case(DT_F16, DT_F16);
    layernorm_and_positions(768);
    layernorm_and_positions(77); /* fewer channels than threads, and odd */
    embeddings_and_loss();
    rows_add_cases();
    matmuls();
    updates_and_conversions();
    loss_lp();
    narrow_widen();
    convert_offsets();
    sumsq_offsets();
    rmsnorm_odd_width();
    swiglu_packs();
    row_sums_packed();
    /* the kernels on trial (plan.h's DTRUN_CUDA_TRY), held to the same checks as those in use (gelu's
     * ops are the matmuls' above: the flag only tells the model to call them) */
    gpu->set_tries(trying = DT_CUDA_TRY_ALL);
    report_prefix = "on trial (xent2, rows2, convert2, norm2, rms2, resid2, adam2, colsum2, bgradb): ";
    elementwise();
    optimizer_and_norms();
    llama_ops();
    adamw_slices_case(DT_F32, DT_BF16); /* adam2: against adamw slice by slice, which stays in use */
    adamw_slices_case(DT_BF16, DT_BF16);
    adamw_slices_case(DT_F16, DT_F16);
    embeddings_and_loss();
    rows_add_cases();
    updates_and_conversions();
    loss_lp();
    convert_offsets();
    sumsq_offsets();
    rmsnorm_odd_width();
    /* bgradb: a bias's gradient in the weight's gemm */
    gpu->set_tries(trying = DT_CUDA_TRY_BGRADB);
    report_prefix = "on trial (bgradb): ";
    bgradb_cases();
    gpu->set_tries(trying = 0);
    return cuda_check_finish();
}
