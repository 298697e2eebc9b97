#!/usr/bin/env bash
# The GPT-2 124M shape on one GPU, bf16-mixed: dtrun's tokens/s and MFU (model FLOPs per second
# over the device's peak dense bf16 FLOP/s), and, when LLMC names a built llm.c checkout, llm.c's
# train_gpt2cu on the same shape in the same run, for the ratio.
#   FLOPs per token: 6 x parameters + 12 x layers x width x seq_len (forward + backward, PaLM's
#   appendix B, as dtrun's run_started reports and llm.c's MFU counts).
#   Peak: from the device name (the table below, dense bf16 tensor-core rates from NVIDIA's data
#   sheets), or PEAK_TFLOPS=... for a device not in it.
# usage: bench/gpu.sh [BUILD_DIR]   env: B (4) T (1024) STEPS (30) LLMC (llm.c dir) PEAK_TFLOPS
# Medians over the steps after the first five. Where no GPU is, it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dtrun=$build/src/dtrun
B=${B:-4} T=${T:-1024} STEPS=${STEPS:-30}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null || true)
if [ -z "$name" ]; then
    echo "bench/gpu.sh: no GPU here (nvidia-smi finds none): run it on a GPU node"
    exit 0
fi
peak=${PEAK_TFLOPS:-}
if [ -z "$peak" ]; then
    case "$name" in
    *H100*SXM* | *H100\ 80GB\ HBM3* | *H200* | *GH200*) peak=989 ;;
    *H100*PCIe* | *H100\ PCIe*) peak=756 ;;
    *A100*) peak=312 ;;
    *L40S*) peak=362 ;;
    *A10G* | *A10\ *) peak=70 ;;
    *RTX\ 4090*) peak=165 ;;
    *RTX\ 3090*) peak=71 ;;
    *) echo "bench/gpu.sh: no peak bf16 rate known for '$name': set PEAK_TFLOPS" >&2; exit 2 ;;
    esac
fi
L=12 C=768 V=50257
params=$((V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C))
flops_per_token=$((6 * params + 12 * L * C * T))
echo "device: $name, peak dense bf16 $peak TFLOP/s; GPT-2 124M shape, B$B T$T, bf16-mixed, $STEPS steps"

(cd "$tmp" && "$OLDPWD/$dtrun" run compute.device=cuda compute.precision=bf16-mixed model.n_layer=$L model.n_head=12 \
    model.n_embd=$C model.vocab_size=$V model.seq_len="$T" data.micro_batch_size="$B" run.max_duration="$STEPS"ba \
    run.eval_interval=0ba events.interval=1ba run.dir=bench >"$tmp/dtrun.log" 2>&1) ||
    { cat "$tmp/dtrun.log" >&2; exit 1; }
ms=$(sed -n 's/.*"step_ms":\([0-9.]*\).*/\1/p' "$tmp/bench/events.jsonl" | tail -n +6 | median)
tps=$(awk -v ms="$ms" -v b="$B" -v t="$T" 'BEGIN { printf "%.0f", b * t / (ms / 1000) }')
mfu=$(awk -v tps="$tps" -v f="$flops_per_token" -v p="$peak" 'BEGIN { printf "%.1f", 100 * tps * f / (p * 1e12) }')
echo "dtrun:  $ms ms/step, $tps tokens/s, MFU $mfu%"

if [ -n "${LLMC:-}" ]; then
    # llm.c's own trainer on its GPT-2 124M checkpoint and tinyshakespeare tokens, the same B and T
    (cd "$LLMC" && ./train_gpt2cu -b "$B" -t "$T" -x "$STEPS" -v 0 -s 0 -e gpt2_124M_bf16.bin) >"$tmp/llmc.log" 2>&1 ||
        { cat "$tmp/llmc.log" >&2; exit 1; }
    lms=$(sed -n 's/.*| *\([0-9.]*\) ms.*/\1/p' "$tmp/llmc.log" | tail -n +6 | median)
    ltps=$(awk -v ms="$lms" -v b="$B" -v t="$T" 'BEGIN { printf "%.0f", b * t / (ms / 1000) }')
    echo "llm.c:  $lms ms/step, $ltps tokens/s; dtrun / llm.c = $(awk -v a="$tps" -v b="$ltps" 'BEGIN { printf "%.2f", a / b }')"
fi
