#!/usr/bin/env bash
# scripts/gpu-sanitize's charging (#41 item 4), on logs in compute-sanitizer's formats: each report is
# charged to the first kernel it names, dtrun's *_kernel apart from cuBLASLt's and NCCL's, one count
# a report however many lines it spans; summaries and host frames are not reports. The script's runs
# need a GPU (it says so and exits 0 here); this is the part that decides what it reports.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
sanitize=$DT_SRCDIR/scripts/gpu-sanitize

cat >memcheck.log <<'LOG'
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at void rows_add_kernel<float>(float *, unsigned long, unsigned long, const int *)+0x1c0 in /src/kernels/cuda/ops.cu:538
=========     by thread (1,0,0) in block (0,0,0)
=========     Address 0x7f3c00000400 is out of bounds
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: [0x2f1b6f] in libcuda.so.1
=========
========= Invalid __global__ read of size 16 bytes
=========     at rows_add_kernel<__nv_bfloat16>(__nv_bfloat16 *, unsigned long)+0x90
=========
========= Invalid __shared__ read of size 4 bytes
=========     at nvjet_hsh_128x256_64x4_2x1_v_bz_coopB_TNN+0x4f0
=========
========= ERROR SUMMARY: 3 errors
LOG
run "memcheck's log charged" 0 "$sanitize" --charge memcheck.log
same "memcheck: two reports in rows_add_kernel, one in cuBLASLt's" "$out" \
    "$(printf 'other:nvjet_hsh_128x256_64x4_2x1_v_bz_coopB_TNN 1\nrows_add_kernel 2')"

cat >racecheck.log <<'LOG'
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at void attention_tc_dkv_kernel<__nv_bfloat16, 64>(__nv_bfloat16 *, float *)+0x2170 in attention_tc.cu:300
=========     and Read access at void attention_tc_dkv_kernel<__nv_bfloat16, 64>(__nv_bfloat16 *, float *)+0x2a0 in attention_tc.cu:310 [1024 hazards]
=========
========= Warning: Race reported between Read access at sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64+0x10
=========     and Write access at sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64+0x20 [8 hazards]
=========
========= Error: Race reported between Write access at attention_tc_forward_kernel
=========     and Read access at attention_tc_forward_kernel [2 hazards]
=========
========= Error: Potential RAW hazard detected at __shared__ 0x40 in block (0,0,0) :
=========     Write Thread (31,0,0) at 0x300
=========     Current Value : 0
=========
========= RACECHECK SUMMARY: 4 hazards displayed (3 errors, 1 warning)
LOG
run "racecheck's log charged" 0 "$sanitize" --charge racecheck.log
same "racecheck: dkv and forward once each, the gemm apart, the unnamed hazard as -" "$out" \
    "$(printf -- '- 1\nattention_tc_dkv_kernel 1\nattention_tc_forward_kernel 1\nother:sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64 1')"

printf '========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n' >clean.log
run "a clean log" 0 "$sanitize" --charge clean.log
same "a clean log charges nothing" "$out" ""
run "no GPU here: says so" 0 env PATH=/usr/bin:/bin "$sanitize" "$DTRUN"
nvidia-smi -L >/dev/null 2>&1 || same "no GPU: the reason" "$out" "gpu-sanitize: no GPU or no compute-sanitizer here: run it on a GPU node"
finish
