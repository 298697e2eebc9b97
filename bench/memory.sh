#!/usr/bin/env bash
# memory.sh [BUILD_DIR] [RANKS] - issue #39's measurement: a 506M-parameter Llama (llama3.2-1b's
# shape cut to 4 layers) under zero3 on RANKS (4) CPU ranks, 3 steps: the peak any rank reached
# (peak_memory_bytes, its RSS) against what `dtrun check --memory` plans for a rank; then the plan of
# templates/llama3-8b.yaml on 8 GPUs of 80 GiB (FSDP and zero3, bf16-mixed, activation checkpointing,
# T=8192 at micro-batch 1 and 2), and on one GPU with offload_optimizer at T=2048. Needs about
# RANKS x 2.7 GB of memory.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
ranks=${2:-4}
dtrun=$PWD/$build/src/dtrun
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

big=(model.type=llama model.preset=llama3.2-1b model.n_layer=4 model.seq_len=64 data.micro_batch_size=1
    compute.strategy=zero3 run.max_duration=3ba run.eval_interval=0ba events.interval=1ba checkpoint.dir=null)
"$dtrun" -n "$ranks" run "${big[@]}" run.dir="$tmp/run" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
plan=$(sed -n 's/.*\[rank 0\].*planned for this rank: \([0-9.]*\) MiB of host memory.*/\1/p' "$tmp/err")
peak=$(grep '"type":"metrics"' "$tmp/run/events.jsonl" | sed 's/.*"peak_memory_bytes":\([0-9]*\).*/\1/' | sort -n | tail -1)
params=$(sed -n 's/.*training [^:]*: .*, \([0-9.]*M\) parameters.*/\1/p' "$tmp/err" | head -1)
awk -v plan="$plan" -v peak="$peak" -v params="$params" -v ranks="$ranks" 'BEGIN {
    printf "llama %s parameters, zero3 on %d CPU ranks: peak %.0f MiB on the busiest rank, planned %.0f MiB: %.2fx\n",
        params, ranks, peak / 1048576, plan, peak / 1048576 / plan }'

echo "templates/llama3-8b.yaml, 8 GPUs of 80 GiB, bf16-mixed, activation checkpointing, T=8192:"
for s in fsdp zero3; do
    for mb in 1 2; do
        "$dtrun" check templates/llama3-8b.yaml --memory --device-memory 80GiB compute.strategy=$s \
            data.micro_batch_size=$mb >"$tmp/8b.txt"
        dev=$(sed -n 's/^#   device: \([0-9.]* [GM]iB\) = .*/\1/p' "$tmp/8b.txt")
        fit=$(sed -n 's/^#   fits a [0-9.]* GiB GPU: \(.*\)/\1/p' "$tmp/8b.txt")
        host=$(sed -n 's/^#   host: \([0-9.]* [GM]iB\) = .*/\1/p' "$tmp/8b.txt")
        printf '  %-5s micro-batch %d: device %s (fits: %s), host %s a rank\n' "$s" "$mb" "$dev" "$fit" "$host"
    done
done
"$dtrun" check templates/llama3-8b.yaml --memory --device-memory 141GiB compute.num_devices=1 model.seq_len=2048 \
    compute.strategy_config.offload_optimizer=cpu compute.gradient_accumulation_steps=1 checkpoint.dir=null >"$tmp/one.txt"
echo "one GPU of 141 GiB (H200), offload_optimizer: cpu, T=2048, no accumulation, no checkpoint:"
grep -E '^#   (device:|fits|host:|node:)' "$tmp/one.txt"
