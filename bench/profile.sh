#!/usr/bin/env bash
# Where a step's time goes, op by op (events.wall_clock_breakdown): the table dtrun logs at the end
# of a run, for the GPT-2 124M shape (B4 T64) and the tiny shape (L2 C128 V256 B8 T64), each in
# 32-true and bf16-mixed, one run after the other on this machine.
# usage: bench/profile.sh [BUILD_DIR] [STEPS_124M] [STEPS_TINY]   (defaults: build 12 300)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dtrun=$PWD/$build/src/dtrun
big=${2:-12} tiny=${3:-300}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), ${OMP_NUM_THREADS:-$(nproc)} threads"
shape_124m=(model.n_layer=12 model.n_head=12 model.n_embd=768 model.vocab_size=50257 model.seq_len=64
    data.micro_batch_size=4 run.max_duration="$big"ba)
shape_tiny=(model.n_layer=2 model.n_head=4 model.n_embd=128 model.vocab_size=256 model.seq_len=64
    data.micro_batch_size=8 run.max_duration="$tiny"ba)
for shape in 124m tiny; do
    for p in 32-true bf16-mixed; do
        declare -n args="shape_$shape"
        echo
        echo "== $shape, $p"
        (cd "$tmp" && "$dtrun" run "${args[@]}" compute.precision=$p events.wall_clock_breakdown=true \
            run.eval_interval=0ba events.interval=1ba events.jsonl=null checkpoint.dir=null run.dir=r 2>&1) |
            sed -n '/wall clock per step by op/,/(outside the ops)/p' | sed 's/^dtrun: //'
        rm -rf "$tmp/r"
    done
done
