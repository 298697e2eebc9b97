#!/usr/bin/env bash
# dtrun's Llama against PyTorch's (tests/reference/llama_torch.py, Hugging Face LlamaForCausalLM's
# arithmetic; Debian's python3-torch) on this machine, in one run, at the same thread count, fp32,
# AdamW with clipping, as bench/train_gpt2.sh does for GPT-2:
#   - the llama-tiny preset (4 layers, 4 query heads on 2 key/value heads, 128 wide, SwiGLU 384,
#     vocab 256, B8 T128): steps/s of both, ROUNDS (3) times interleaved, and the median ratio;
#   - a TinyLlama-shaped slice (2 of its 22 layers: 2048 wide, 32 query heads on 4, SwiGLU 5632,
#     vocab 32000; B1 T128): tokens/s of both and their ratio.
# Medians over the steps after the first two. Timings on a shared machine are noisy: compare the
# ratios, not the absolute figures.
# usage: [ROUNDS=3] bench/train_llama.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dtrun=$(realpath "$build/src/dtrun")
threads=${OMP_NUM_THREADS:-$(nproc)}
export OMP_NUM_THREADS=$threads
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# dtrun_step_ms L NH NKV C H V T B STEPS: median step time over steps 3.. (ms)
dtrun_step_ms() {
    (cd "$tmp" && "$dtrun" run model.type=llama model.n_layer="$1" model.n_head="$2" model.n_kv_head="$3" \
        model.n_embd="$4" model.intermediate_size="$5" model.vocab_size="$6" model.seq_len="$7" \
        data.micro_batch_size="$8" run.max_duration="$9"ba run.eval_interval=0ba events.interval=1ba \
        run.dir=bench >/dev/null 2>&1)
    sed -n 's/.*"step_ms":\([0-9.]*\).*/\1/p' "$tmp/bench/events.jsonl" | tail -n +3 | median
    rm -rf "$tmp/bench"
}
torch_step_ms() { /usr/bin/python3 bench/torch_llama.py "$@" "$threads"; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads"

tiny=(4 4 2 128 384 256 128 8)
ratios=()
for r in $(seq "${ROUNDS:-3}"); do
    d=$(dtrun_step_ms "${tiny[@]}" 60)
    t=$(torch_step_ms "${tiny[@]}" 30)
    ratios+=("$(awk -v d="$d" -v t="$t" 'BEGIN { printf "%.2f", t / d }')")
    awk -v r="$r" -v d="$d" -v t="$t" 'BEGIN {
        printf "llama-tiny (L4 NH4 NKV2 C128 H384 V256 B8 T128), round %d: dtrun %.1f steps/s (%.1f ms), PyTorch %.1f steps/s (%.1f ms); ratio %.2fx\n", r, 1000 / d, d, 1000 / t, t, t / d
    }'
done
echo "llama-tiny ratio, median of ${#ratios[@]} rounds: $(printf '%s\n' "${ratios[@]}" | median)x"

slice=(2 32 4 2048 5632 32000 128 1)
d=$(dtrun_step_ms "${slice[@]}" 8)
t=$(torch_step_ms "${slice[@]}" 6)
awk -v d="$d" -v t="$t" 'BEGIN {
    printf "TinyLlama slice (L2 of 22, B1 T128): dtrun %.0f tokens/s (%.0f ms/step), PyTorch %.0f tokens/s (%.0f ms/step); ratio %.2fx\n", 128 / (d / 1000), d, 128 / (t / 1000), t, t / d
}'
