#!/usr/bin/env bash
# Attention at longer sequences: the GPT-2 124M shape with one sequence of T tokens (B1), fp32, for
# T = 256, 512 and 1024: the activation memory the run reports (the blocked kernels keep each row's
# log-sum-exp, not the T x T softmax) and attention's forward and backward ms per step from the
# per-op table (events.wall_clock_breakdown), with their share of the step.
# usage: bench/attention.sh [BUILD_DIR] [STEPS]   (defaults: build 4)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
case $build in /*) dtrun=$build/src/dtrun ;; *) dtrun=$PWD/$build/src/dtrun ;; esac
steps=${2:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), ${OMP_NUM_THREADS:-$(nproc)} threads"
printf '%6s %16s %22s %22s\n' T activations attention_forward attention_backward
for T in 256 512 1024; do
    out=$(cd "$tmp" && "$dtrun" run model.n_layer=12 model.n_head=12 model.n_embd=768 model.vocab_size=50257 \
        model.seq_len="$T" data.micro_batch_size=1 run.max_duration="$steps"ba events.wall_clock_breakdown=true \
        run.eval_interval=0ba events.interval=1ba events.jsonl=null checkpoint.dir=null run.dir=r 2>&1)
    rm -rf "$tmp/r"
    acts=$(sed -n 's/.*activations \([0-9.]* MiB\).*/\1/p' <<<"$out" | head -1)
    op() { awk -v op="$1" '$1 == op { printf "%s ms (%s)", $2, $4 }' <<<"$out"; }
    printf '%6s %16s %22s %22s\n' "$T" "$acts" "$(op attention_forward)" "$(op attention_backward)"
done
