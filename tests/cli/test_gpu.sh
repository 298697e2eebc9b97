#!/usr/bin/env bash
# Training on GPUs against the CPU (issue #14): the tiny GPT's 20-step losses with compute.device
# cuda against cpu, in fp32 and bf16-mixed; where 2 GPUs exist, DDP and ZeRO-1/2/3 on 2 GPUs
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
for p in 32-true bf16-mixed; do
    tol=1e-4
    [ $p = bf16-mixed ] && tol=1e-2
    run "cpu, $p" 0 timeout 300 "$DTRUN" run "${base[@]}" compute.precision=$p compute.device=cpu run.dir=cpu-$p
    run "cuda, $p" 0 timeout 300 "$DTRUN" run "${base[@]}" compute.precision=$p compute.device=cuda run.dir=gpu-$p
    same "20 losses each ($p)" "$(losses gpu-$p | wc -l) $(losses cpu-$p | wc -l)" "20 20"
    within "cuda against cpu, $p" "$(maxrel gpu-$p cpu-$p)" $tol
done
if [ "$gpus" -ge 2 ]; then
    # the same global batch of 8: one GPU with micro-batch 8, or two with 4 each
    run "1 GPU" 0 timeout 300 "$DTRUN" run "${base[@]}" data.micro_batch_size=8 compute.device=cuda run.dir=one
    for s in ddp zero1 zero2 zero3; do
        run "2 GPUs, $s" 0 timeout 300 "$DTRUN" -n 2 run "${base[@]}" compute.strategy=$s compute.device=cuda run.dir=two-$s
        within "$s on 2 GPUs against 1" "$(maxrel two-$s one)" 1e-4
    done
else
    for s in ddp zero1 zero2 zero3; do ok "$s on 2 GPUs # SKIP this node has $gpus"; done
fi
finish
