#!/usr/bin/env bash
# One GPU, bf16-mixed, at each micro-batch of BS: dtrun's tokens/s and MFU (model FLOPs per second
# over the device's peak dense bf16 FLOP/s) beside PyTorch's on the same GPU in the same run, then
# dtrun's per-op device times at the first B (events.wall_clock_breakdown: each op timed once the
# device has run the ops before it); when LLMC names a built llm.c checkout, llm.c's train_gpt2cu on
# the GPT-2 shape too. The shapes (MODEL):
#   gpt2-124m       GPT-2 124M at T 1024 (B "4 16 64"); peer bench/torch_gpt2_gpu.py: nanoGPT's
#                   recipe, SDPA, bf16 autocast, fused AdamW, clipping; eager and torch.compile
#   llama3.2-1b     model.preset llama3.2-1b (16 layers, 32/8 heads, 2048 wide, vocabulary 128256,
#   tinyllama-1.1b  tied) and tinyllama-1.1b (22 layers, 32/4 heads, vocabulary 32000) at T 2048
#                   (B "4"); peer bench/torch_llama_gpu.py: F.rms_norm, SDPA with enable_gqa,
#                   SwiGLU, the same recipe
#   FLOPs per token: 6 x the matmuls' parameters + 12 x layers x width x seq_len (forward + backward,
#   PaLM's appendix B, as dtrun's run_started reports and llm.c's MFU counts).
#   Peak: from the device name (the table below, dense bf16 tensor-core rates from NVIDIA's data
#   sheets, as src/train/peak.c has them), or PEAK_TFLOPS=... for a device not in it.
# usage: bench/gpu.sh [BUILD_DIR]   env: MODEL (gpt2-124m) BS T STEPS (30) LLMC PEAK_TFLOPS
#   TORCH (python3 with torch on CUDA; "none" skips the peer)
#   PRECISIONS ("bf16-mixed"; "bf16-mixed fp8-mixed": a dtrun row for each, and each one's per-op
#   times: fp8-mixed's speedup over bf16-mixed in the same run; its MFU still over the bf16 peak)
#   DTRUN_ARGS: overrides added to each dtrun run (a switch to compare, say)
#   PROFILE ("yes"; "none" skips the per-op times, so that a run with a time limit keeps its rows)
#   TRIES: values of DTRUN_CUDA_TRY (kernels/cuda/plan.h's kernels on trial: "xent2 rows2 convert2
#   gelu norm2 rms2 resid2 dq2 dkv2 kv1 swiglu2 adam2 dkv3 colsum2 bgradb all", all but kv1 and dkv3), each a
#   row of its own after the first precision's, its speed over that row's and its device memory; the
#   last one's per-op times too. The other rows run the kernels in use, whatever DTRUN_CUDA_TRY says.
# Medians over the steps after the first five. Where no GPU is, it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dtrun=$build/src/dtrun
MODEL=${MODEL:-gpt2-124m} STEPS=${STEPS:-30} TORCH=${TORCH:-python3} PRECISIONS=${PRECISIONS:-bf16-mixed}
# each shape: dtrun's model keys, the peer and its arguments, the matmuls' parameters
case "$MODEL" in
gpt2-124m)
    BS=${BS:-${B:-4 16 64}} T=${T:-1024}
    L=12 NH=12 C=768 V=50257
    model=(model.n_layer=$L model.n_head=$NH model.n_embd=$C model.vocab_size=$V)
    peer=bench/torch_gpt2_gpu.py peer_args=($L $NH $C $V)
    params=$((V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C))
    ;;
llama3.2-1b | tinyllama-1.1b)
    BS=${BS:-${B:-4}} T=${T:-2048}
    if [ "$MODEL" = llama3.2-1b ]; then L=16 NH=32 NKV=8 C=2048 H=8192 V=128256 tie=1; else L=22 NH=32 NKV=4 C=2048 H=5632 V=32000 tie=0; fi
    model=(model.preset="$MODEL")
    peer=bench/torch_llama_gpu.py peer_args=($L $NH $NKV $C $H $V $tie)
    # as src/model/llama.c counts: every parameter but an untied embedding (a lookup)
    params=$((L * (2 * C * C + 2 * C * (C / NH * NKV) + 3 * C * H + 2 * C) + V * C + C))
    ;;
*) echo "bench/gpu.sh: MODEL is gpt2-124m, llama3.2-1b or tinyllama-1.1b, not '$MODEL'" >&2; exit 2 ;;
esac
read -ra extra <<<"${DTRUN_ARGS:-}"
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
flops_per_token=$((6 * params + 12 * L * C * T))
echo "device: $name, peak dense bf16 $peak TFLOP/s; $MODEL, T$T, $PRECISIONS, $STEPS steps, B in $BS"

# dtrun at micro-batch $1 in precision $prec (extra overrides after it), with DTRUN_CUDA_TRY=$try:
# ms/step median into $ms, its run dir bench-$prec-$1[-$try][-profiled] into $dir; a run that fails
# shows its log and returns 1
try=
dtrun_at() {
    local b=$1
    dir=bench-$prec-$1${try:+-$try}${2:+-profiled}
    shift
    (cd "$tmp" && DTRUN_CUDA_TRY="$try" "$OLDPWD/$dtrun" run compute.device=cuda compute.precision="$prec" "${model[@]}" model.seq_len="$T" \
        data.micro_batch_size="$b" run.max_duration="$STEPS"ba \
        run.eval_interval=0ba events.interval=1ba checkpoint.dir=null run.dir="$dir" "${extra[@]}" "$@" >"$tmp/dtrun.log" 2>&1) ||
        { cat "$tmp/dtrun.log" >&2; return 1; }
    ms=$(sed -n 's/.*"step_ms":\([0-9.]*\).*/\1/p' "$tmp/$dir/events.jsonl" | tail -n +6 | median)
}
# the last peak allocated / reserved device memory of run dir $1
mem_of() {
    sed -n 's/.*"device_peak_allocated_bytes":\([0-9]*\).*"device_reserved_bytes":\([0-9]*\).*/\1 \2/p' \
        "$tmp/$1/events.jsonl" | tail -n 1 | awk '{ printf "%.0f / %.0f MiB", $1 / 1048576, $2 / 1048576 }'
}
tps_of() { awk -v ms="$1" -v b="$2" -v t="$T" 'BEGIN { printf "%.0f", b * t / (ms / 1000) }'; }
mfu_of() { awk -v tps="$1" -v f="$flops_per_token" -v p="$peak" 'BEGIN { printf "%.1f", 100 * tps * f / (p * 1e12) }'; }

declare -A tps_at
printf '%-22s %4s %10s %11s %6s %s\n' "" B "ms/step" "tokens/s" "MFU" "peak GPU memory (allocated / reserved)"
for b in $BS; do
    for prec in $PRECISIONS; do
        dtrun_at "$b" || exit 1
        tps=$(tps_of "$ms" "$b")
        [ -n "${tps_at[$b]:-}" ] || tps_at[$b]=$tps
        mem=$(mem_of "$dir")
        printf '%-22s %4s %10.2f %11s %5s%% %s%s\n' "dtrun $prec" "$b" "$ms" "$tps" "$(mfu_of "$tps" "$b")" "$mem" \
            "$(awk -v a="$tps" -v f="${tps_at[$b]}" 'BEGIN { if (a != f) printf "; / the first precision = %.2f", a / f }')"
    done
    prec=${PRECISIONS%% *}
    for try in ${TRIES:-}; do
        if ! dtrun_at "$b"; then
            echo "dtrun +$try at B=$b failed (its log above); the next trial"
            continue
        fi
        tps=$(tps_of "$ms" "$b")
        printf '%-22s %4s %10.2f %11s %5s%% %s; / the kernels in use = %s\n' "dtrun +$try" "$b" "$ms" "$tps" \
            "$(mfu_of "$tps" "$b")" "$(mem_of "$dir")" \
            "$(awk -v a="$tps" -v f="${tps_at[$b]}" 'BEGIN { printf "%.3f", a / f }')"
    done
    try=
    [ "$TORCH" = none ] && continue
    for mode in eager compile; do
        if line=$("$TORCH" "$peer" "$mode" "${peer_args[@]}" "$T" "$b" "$STEPS" 2>"$tmp/torch.log"); then
            read -r _ _ _ pms ptps palloc preserved <<<"$line"
            printf '%-22s %4s %10.2f %11s %5s%% %s / %s MiB; dtrun (the first precision) / this = %s\n' "PyTorch $mode" "$b" "$pms" "$ptps" \
                "$(mfu_of "$ptps" "$b")" "$palloc" "$preserved" "$(awk -v a="${tps_at[$b]}" -v p="$ptps" 'BEGIN { printf "%.2f", a / p }')"
        else
            echo "PyTorch $mode at B=$b failed: $(tail -n 1 "$tmp/torch.log")"
        fi
    done
done

b=${BS%% *}
if [ "${PROFILE:-yes}" != none ]; then
    for prec in $PRECISIONS; do
        dtrun_at "$b" events.wall_clock_breakdown=true
        echo "dtrun's device time per op at B=$b, $prec (ops serialized while profiled: $ms ms/step):"
        sed -n '/wall clock per step by op/,/(outside the ops)/p' "$tmp/dtrun.log" | sed 's/^dtrun: //'
    done
    if [ -n "${TRIES:-}" ]; then
        prec=${PRECISIONS%% *} try=${TRIES##* }
        dtrun_at "$b" events.wall_clock_breakdown=true
        echo "the same with DTRUN_CUDA_TRY=$try ($ms ms/step):"
        sed -n '/wall clock per step by op/,/(outside the ops)/p' "$tmp/dtrun.log" | sed 's/^dtrun: //'
        try=
    fi
fi

if [ -n "${LLMC:-}" ] && [ "$MODEL" = gpt2-124m ]; then
    # llm.c's own trainer on its GPT-2 124M checkpoint and tinyshakespeare tokens, the same B and T
    (cd "$LLMC" && ./train_gpt2cu -b "$b" -t "$T" -x "$STEPS" -v 0 -s 0 -e gpt2_124M_bf16.bin) >"$tmp/llmc.log" 2>&1 ||
        { cat "$tmp/llmc.log" >&2; exit 1; }
    lms=$(sed -n 's/.*| *\([0-9.]*\) ms.*/\1/p' "$tmp/llmc.log" | tail -n +6 | median)
    ltps=$(tps_of "$lms" "$b")
    echo "llm.c:  $lms ms/step, $ltps tokens/s; dtrun / llm.c = $(awk -v a="${tps_at[$b]}" -v b="$ltps" 'BEGIN { printf "%.2f", a / b }')"
fi
