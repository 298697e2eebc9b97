#!/usr/bin/env bash
# Generation speed (#40): the GPT-2 124M shape (random weights after one step, fp32, 512 positions),
# greedy from a 64-token prompt for N new tokens on the CPU, dtrun generate (prefill, then its
# key/value cache) beside PyTorch on the same weights exported to Hugging Face's layout, with a cache
# written out by hand and without one (nanoGPT's and llm.c's loop): prefill seconds and tokens/s after
# the first token, and whether the greedy ids agree with dtrun's.
# usage: bench/generate.sh [BUILD_DIR] [N]   (defaults: build 128)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
case $build in /*) dtrun=$build/src/dtrun ;; *) dtrun=$PWD/$build/src/dtrun ;; esac
n=${2:-128}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$PWD
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), ${OMP_NUM_THREADS:-$(nproc)} threads"
cd "$tmp"
"$dtrun" run model.n_layer=12 model.n_head=12 model.n_embd=768 model.vocab_size=50257 model.seq_len=512 \
    data.micro_batch_size=1 run.max_duration=1ba run.eval_interval=0ba events.jsonl=null checkpoint.interval=1ba \
    run.dir=r >/dev/null 2>&1
"$dtrun" ckpt export r --format safetensors --out hf >/dev/null 2>&1
prompt=$(seq -s, 100 163)
ids=$("$dtrun" generate r --device cpu --prompt-ids "$prompt" --ids --temperature 0 --ignore-eos --max-tokens "$n" \
    2>err)
sed -n 's/.*generate: \([0-9]*\) new tokens, log-probability [^;]*; prompt \([0-9]*\) tokens in \([0-9.]*\) s, then \([0-9.]*\) tokens\/s/dtrun: prefill \3 s, \4 tokens\/s (\1 new tokens after \2)/p' err
torch=$(/usr/bin/python3 "$src/bench/torch_generate.py" hf "$prompt" "$n")
grep -v '^ids:' <<<"$torch"
[ "$(sed -n 's/^ids: //p' <<<"$torch")" = "$ids" ] && echo "dtrun's greedy ids equal PyTorch's: yes" ||
    echo "dtrun's greedy ids equal PyTorch's: no"
