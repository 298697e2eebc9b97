#!/usr/bin/env bash
# The CUDA module (issue #10): dtrun links no CUDA library, loads dtrun_cuda.so only when a GPU is
# wanted, and says which path and why when the module is missing, unloadable or from another
# version; compute.device cpu (and auto on a machine without an NVIDIA driver) never maps it.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
if dtrun_has '^cuda: not built'; then
    echo "1..0 # SKIP this dtrun was built without CUDA"
    exit 0
fi
gpu_machine=0
[ -e /dev/nvidiactl ] || [ -e /proc/driver/nvidia/version ] && gpu_machine=1
hint="  hint: compute.device: cpu needs no module; for GPUs reinstall dtrun (make install puts the module in"

libs=$(ldd "$DTRUN" | grep -oE 'lib(cudart|nccl|cublas[A-Za-z]*|cuda)\.so[^ ]*' | tr '\n' ' ')
same "dtrun itself links no CUDA library" "$libs" ""
run "--version loads the module from the build tree" 0 "$DTRUN" --version
has "and reports CUDA, cuBLASLt and NCCL" "$(grep '^cuda: ' <<<"$out")" "cuda: CUDA runtime "
# what a process maps: LD_DEBUG names every library the loader opens
maps_cuda() { LD_DEBUG=libs "$@" 2>&1 >/dev/null | grep -cE 'calling init: .*lib(cudart|nccl|cublasLt)'; }
same "dtrun check with compute.device cpu maps no CUDA library" "$(maps_cuda "$DTRUN" check compute.device=cpu)" 0
same "a bad config file maps none either" "$(maps_cuda "$DTRUN" check nope.yaml)" 0
if [ $gpu_machine = 0 ]; then
    same "compute.device auto without an NVIDIA driver maps none" "$(maps_cuda "$DTRUN" check)" 0
    run "training asks for cuda on a machine without GPU" 2 "$DTRUN" run compute.device=cuda run.dir=r
    has "one message says why, before anything else" "$err" "dtrun: rank 0: error: compute.device is cuda, but this process can use no GPU (no GPU: "
    same "and nothing claims a device first" "$(grep -c 'device cpu' <<<"$err")" 0
fi
[ "$(maps_cuda "$DTRUN" check compute.device=cuda)" -ge 1 ] && ok "compute.device cuda loads the module" ||
    not_ok "compute.device cuda did not load the CUDA libraries"

DTRUN_CUDA_MODULE=$TMP/none.so run "a missing module" 6 "$DTRUN" check compute.device=cuda
same "names the path and the reason" "$(head -1 <<<"$err")" \
    "$TMP/none.so: error: cannot load dtrun's CUDA module: cannot open shared object file: No such file or directory"
has "and how to fix it" "$err" "$hint"
head -c 4096 /dev/zero | tr "\\0" x >junk.so
DTRUN_CUDA_MODULE=$TMP/junk.so run "an unloadable module" 6 "$DTRUN" check compute.device=cuda
same "names the path and the loader's reason" "$(head -1 <<<"$err")" \
    "$TMP/junk.so: error: cannot load dtrun's CUDA module: invalid ELF header"
yaml=$(ldd "$DTRUN" | sed -n 's/.*libyaml[^ ]* => \([^ ]*\) .*/\1/p')
DTRUN_CUDA_MODULE=$yaml run "a library that is not a dtrun module" 6 "$DTRUN" check compute.device=cuda
same "is named as such" "$(head -1 <<<"$err")" "$yaml: error: not a dtrun CUDA module (it has no 'dt_cuda_module' symbol)"
other=$(dirname "$DTRUN")/../tests/unit/.libs/cuda_module_other.so
version=$("$DTRUN" --version | sed -n 's/^dtrun //p')
abi=$(sed -n 's/^#define DT_CUDA_MODULE_ABI \([0-9]*\).*/\1/p' "$DT_SRCDIR/kernels/cuda/module.h") # the one both were built with
DTRUN_CUDA_MODULE=$other run "a module from another version" 6 "$DTRUN" check compute.device=cuda
same "is refused with both versions" "$(head -1 <<<"$err")" \
    "$other: error: the CUDA module is from dtrun 0.0.0-other (module interface $abi), this is dtrun $version (interface $abi)"
# every op of kernels.h has device code in the module (its host-side launch stub is in the symbol
# table; only dt_cuda_module is exported): op, then the kernels (the matmuls: the cuBLASLt callers)
module=$(dirname "$DTRUN")/../kernels/cuda/.libs/dtrun_cuda.so
syms=$(nm -C "$module" | sed -n 's/^[0-9a-f]* [tT] \(void \)\{0,1\}\([a-z_0-9]*\).*/\2/p' | sort -u)
table=$(cat <<'OPS'
matmul_forward dt_cuda_matmul_forward
matmul_backward dt_cuda_matmul_backward colsum_partials_kernel colsum_partials2_kernel partials_sum_kernel
matmul_forward_lp dt_cuda_matmul_forward cast_to_lp_kernel
matmul_backward_lp dt_cuda_matmul_backward cast_to_lp_kernel
matmul_gelu_forward_lp dt_cuda_matmul_gelu_forward gelu_forward_kernel
matmul_dgelu_backward_lp dt_cuda_matmul_dgelu_backward gelu_backward_kernel colsum_partials_kernel partials_sum_kernel
matmul_forward_fp8 dt_cuda_matmul_forward_fp8 fp8_amax_kernel fp8_scales_kernel fp8_cast_kernel
matmul_backward_fp8 dt_cuda_matmul_backward_fp8 fp8_amax_kernel fp8_scales_kernel fp8_cast_kernel colsum_partials_kernel partials_sum_kernel
fp8_update fp8_update_kernel
cast_to_lp cast_to_lp_kernel
cast_from_lp cast_from_lp_kernel
round_lp round_lp_kernel
layernorm_forward layernorm_forward_kernel
layernorm_backward layernorm_dinp_kernel layernorm_partials_kernel layernorm_partials2_kernel partials_sum_kernel
rmsnorm_forward rmsnorm_forward_kernel rmsnorm2_forward_kernel
rmsnorm_backward rmsnorm_dinp_kernel rmsnorm2_dinp_kernel rmsnorm_partials_kernel rmsnorm_partials2_kernel partials_sum_kernel
rope_forward rope_kernel
rope_backward rope_kernel
swiglu_forward swiglu_forward_kernel swiglu2_forward_kernel
swiglu_backward swiglu_backward_kernel swiglu2_backward_kernel
attention_forward attention_forward_kernel attention_tc_forward_kernel
attention_backward attention_drow_kernel attention_dkv_kernel attention_dq_kernel attention_kv_sum_kernel attention_tc_dkv_kernel attention_tc_dq_kernel dkv2_prep_kernel
attention_cached attention_cached_store_kernel attention_cached_kernel
gelu_forward gelu_forward_kernel
gelu_backward gelu_backward_kernel
residual_forward residual_kernel residual8_kernel
position_forward position_forward_kernel
position_backward position_backward_kernel
rows_forward rows_forward_kernel
rows_add rows_add_kernel keys_kernel rows_run_kernel
softmax_xent softmax_xent_kernel softmax_xent2_kernel loss_mean_kernel
softmax_xent_lp softmax_xent_kernel softmax_xent2_kernel loss_mean_kernel
adamw adamw_kernel
adamw_slices adamw_slices_kernel adamw2_slices_kernel
sgd sgd_kernel
mse mse_partial_kernel mse_final_kernel
sumsq sumsq_partial_kernel sumsq2_partial_kernel sumsq_final_kernel
nonfinite sumsq_partial_kernel sumsq2_partial_kernel
sumsq_parts sumsq_partial_kernel sumsq2_partial_kernel sumsq_final_kernel
convert convert_kernel convert8_kernel
accumulate convert_kernel convert8_kernel
narrow_inplace narrow_head_kernel narrow_pass_kernel
widen_inplace widen_head_kernel widen_pass_kernel
round_stochastic round_stochastic_kernel
OPS
)
missing=""
while read -r op kernels; do
    for k in $kernels; do grep -qx "$k" <<<"$syms" || missing="$missing $op:$k"; done
done <<<"$table"
ops=$(sed -n 's/^ *[a-z_ ]*(\*\([a-z_0-9]*\))(struct dt_kctx \*kc, .*/\1/p' "$DT_SRCDIR/kernels/kernels.h" | grep -vxE 'describe|alloc|free|host_alloc|host_free|zero|copy|copy_async|copy_wait|copy_inline|synchronize|wait|device_memory' | sort)
same "the table names every op of kernels.h" "$(cut -d' ' -f1 <<<"$table" | sort)" "$ops"
same "each op's kernels are in the module" "$missing" ""
# the kernels on trial as kernels/cuda/plan.h names them, and as README.md's DTRUN_CUDA_TRY row and
# bench/README.md's gpu.sh row list them
tries=$(sed -n '/dt_cuda_try_names\[\] = {/,/};/p' "$DT_SRCDIR/kernels/cuda/plan.h" | grep -o '"[a-z0-9]*"' | tr -d '"' | sort)
same "README.md lists every kernel on trial" \
    "$(grep '^| `DTRUN_CUDA_TRY`' "$DT_SRCDIR/README.md" | grep -o '`[a-z0-9]*`' | tr -d '`' | grep -vx all | sort -u)" "$tries"
same "bench/README.md too" "$(grep -o 'values of `DTRUN_CUDA_TRY`: `[a-z0-9 ]*`' "$DT_SRCDIR/bench/README.md" |
    sed 's/.*: `//; s/`$//' | tr ' ' '\n' | grep -vx all | sort)" "$tries"
DTRUN_CUDA_MODULE=$TMP/none.so run "dtrun info without the module" 0 "$DTRUN" info
has "says why there is no GPU" "$out" "$TMP/none.so: error: cannot load dtrun's CUDA module: cannot open shared object file"
DTRUN_CUDA_MODULE=$TMP/none.so run "compute.device cpu without the module" 0 "$DTRUN" run compute.device=cpu \
    run.max_duration=2ba model.n_layer=1 run.dir=cpu
finish
