#!/usr/bin/env bash
# Training on GPUs against the CPU (issue #14): the tiny GPT's and a tiny Llama's 20-step losses with
# compute.device cuda against cpu, in fp32 and bf16-mixed; where 2 GPUs exist, DDP and ZeRO-1/2/3 on 2 GPUs
# against 1. Skipped where no GPU is: `make check-gpu` runs it on a GPU node. Tolerances: the GPU's
# expf, its summation orders and cuBLASLt's are not the CPU's, so losses agree to what 20 steps of
# those differences give (fp32 1e-4 relative, bf16-mixed 1e-2), and DDP over NCCL on 2 GPUs against
# 1 GPU with the same global batch to 1e-4 (the averaging order differs).
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$gpus" -lt 1 ]; then
    echo "1..0 # SKIP no GPU here (nvidia-smi lists none)"
    exit 0
fi
base=(events.interval=1ba model.n_layer=2 model.n_embd=64 model.n_head=4 model.seq_len=32 run.eval_interval=0ba
    run.max_duration=20ba data.micro_batch_size=4)
# against TOL: cuda's losses against the cpu's, run by run
against() {
    local d
    d=$(maxrel "$2" "$3")
    within "$d" "$4" && ok "$1: cuda against cpu within $4 ($d)" || not_ok "$1: cuda differs from cpu by $d (limit $4)"
}
# a Llama (issue #30): grouped-query attention on the CUDA-core kernels (head size 16), and on the
# tensor-core ones in bf16 (head size 64)
llama=(model.type=llama model.n_kv_head=2 model.intermediate_size=96)
llama64=(model.type=llama model.n_embd=256 model.n_kv_head=2 model.intermediate_size=384)
for p in 32-true bf16-mixed; do
    tol=1e-4
    [ $p = bf16-mixed ] && tol=1e-2
    for m in gpt llama llama64; do
        case $m in gpt) extra=() ;; llama) extra=("${llama[@]}") ;; llama64) extra=("${llama64[@]}") ;; esac
        run "$m cpu, $p" 0 timeout 300 "$DTRUN" run "${base[@]}" "${extra[@]}" compute.precision=$p compute.device=cpu \
            run.dir=cpu-$m-$p
        run "$m cuda, $p" 0 timeout 300 "$DTRUN" run "${base[@]}" "${extra[@]}" compute.precision=$p \
            compute.device=cuda run.dir=gpu-$m-$p
        same "$m: 20 losses each ($p)" "$(losses gpu-$m-$p | wc -l) $(losses cpu-$m-$p | wc -l)" "20 20"
        against "$m $p" gpu-$m-$p cpu-$m-$p $tol
    done
done
# the device memory figures (#41): the peak dtrun allocated is a real peak, so it lies between the
# model state `dtrun check --memory` counts and what the device has in use (the CUDA context beside it)
read -r alloc reserved <<<"$(sed -n 's/.*"device_peak_allocated_bytes":\([0-9]*\).*"device_reserved_bytes":\([0-9]*\).*/\1 \2/p' \
    gpu-gpt-bf16-mixed/events.jsonl | tail -n 1)"
state=$("$DTRUN" check --memory "${base[@]}" compute.precision=bf16-mixed compute.device=cuda 2>&1 |
    sed -n 's/^# this config: \([0-9]*\) bytes of model state.*/\1/p')
[ -n "$alloc" ] && [ -n "$state" ] && [ "$alloc" -ge "$state" ] && [ "$alloc" -lt "$reserved" ] &&
    ok "device peak allocated $alloc B: at least the model state $state, below the $reserved in use" ||
    not_ok "device peak allocated '$alloc' B against model state '$state' and '$reserved' in use"
# a micro-batch's tokens go up from two page-locked stages among the ops (model/lm_head.c, #41): with four
# micro-batches a step (the third refills the first's stage, and the host, ahead of a GPU busy with a
# wider model, waits for that stage's copy) and validation every 5 steps, two runs give the same losses and
# validation losses bit for bit (a stage refilled under its copy would not), and the CPU's as the runs above
staged=("${base[@]}" compute.gradient_accumulation_steps=4 data.micro_batch_size=4 model.n_embd=128
    model.seq_len=128 run.eval_interval=5ba data.eval_batches=3 compute.precision=bf16-mixed)
for r in 1 2; do
    run "staged tokens, run $r" 0 timeout 300 "$DTRUN" run "${staged[@]}" compute.device=cuda run.dir=staged-$r
done
run "staged tokens on the cpu" 0 timeout 300 "$DTRUN" run "${staged[@]}" compute.device=cpu run.dir=staged-cpu
record() { grep -o '"\(val_\)\{0,1\}loss":[^,]*' "$1/events.jsonl"; }
same "... 4 validations" "$(grep -c '"type":"eval"' staged-1/events.jsonl)" 4
same "... two runs, bit for bit" "$(record staged-1)" "$(record staged-2)"
against "staged tokens" staged-1 staged-cpu 1e-2
# DTRUN_CUDA_TRY (#41's kernels on trial, kernels/cuda/plan.h): a run says which it runs; a name it does
# not know is refused with every name
DTRUN_CUDA_TRY=kv1,swiglu2 run "kernels on trial: kv1, swiglu2" 0 timeout 300 "$DTRUN" run "${base[@]}" \
    run.max_duration=2ba compute.device=cuda run.dir=tried
has "... named where the run says what it runs on" "$err" "; on trial (DTRUN_CUDA_TRY): kv1, swiglu2)"
DTRUN_CUDA_TRY=nosuch run "a trial it does not know" 2 timeout 300 "$DTRUN" run "${base[@]}" compute.device=cuda \
    run.dir=tried-bad
has "... refused with every name" "$err" 'error: DTRUN_CUDA_TRY names "nosuch", no kernel on trial
  hint: a comma-separated list of xent2, rows2, convert2, gelu, norm2, rms2, resid2, dq2, dkv2, kv1, swiglu2, adam2, dkv3, colsum2, bgradb, or all; unset it for the kernels in use'
if [ "$gpus" -ge 2 ]; then
    # the same global batch of 8: one GPU with micro-batch 8, or two with 4 each
    run "1 GPU" 0 timeout 300 "$DTRUN" run "${base[@]}" data.micro_batch_size=8 compute.device=cuda run.dir=one
    for s in ddp zero1 zero2 zero3; do
        run "2 GPUs, $s" 0 timeout 300 "$DTRUN" -n 2 run "${base[@]}" compute.strategy=$s compute.device=cuda run.dir=two-$s
        d=$(maxrel two-$s one)
        within "$d" 1e-4 && ok "$s on 2 GPUs against 1 within 1e-4 ($d)" || not_ok "$s on 2 GPUs differs from 1 by $d"
    done
else
    for s in ddp zero1 zero2 zero3; do ok "$s on 2 GPUs # SKIP this node has $gpus"; done
fi
finish
