#!/usr/bin/env bash
# Tokenizer speed (#40 item 4): the same corpus encoded by dtrun's tokenizer (one thread and all of
# them) and by Hugging Face's Rust tokenizers (0.22 through its node binding, one awaited call a
# document: one thread), per family (GPT-2, Llama 3, Meta's Llama 2), MB/s side by side, and the
# ratio of dtrun's one thread to Hugging Face's. Targets: >= 20 MB/s on one core for GPT-2 and
# Llama 3, and >= 10x Hugging Face's rate measured in the same run.
# The corpus: this repository's text (Markdown, C, shell), each file cut into documents of 4 KB,
# every document once (so the word cache meets each word as natural text does, not a repeat).
# Needs node and scripts/setup-deps' npm packages (DTRUN_NPM_DIR), and the build's tok_tool
# (make -C BUILD_DIR tests/unit/tok_tool).
# usage: bench/tokenize.sh [BUILD_DIR] [ROUNDS]   (defaults: build 3; the best round is kept)
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=${1:-build}
rounds=${2:-3}
case $build in /*) ;; *) build=$PWD/$build ;; esac
tool=$build/tests/unit/tok_tool
[ -x "$tool" ] || { echo "bench/tokenize.sh: no $tool: make -C $build tests/unit/tok_tool" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git ls-files '*.md' '*.c' '*.h' '*.sh' | python3 -c '
import sys
out = open(sys.argv[1], "wb")
for f in sys.stdin.read().split():
    data = open(f, "rb").read()
    for i in range(0, len(data), 4096):
        d = data[i:i + 4096]
        out.write(b"%d\n" % len(d) + d + b"\n")
' "$tmp/corpus.bin"
node "$src/tests/cli/tok_ref.mjs" files "$tmp/hf"
threads=$(nproc)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads;" \
    "corpus: $(wc -c <"$tmp/corpus.bin") bytes of this repository's text in 4 KB documents"
printf '%-8s %14s %16s %14s %10s\n' family "dtrun 1 thread" "dtrun $threads threads" "HF 1 thread" "dtrun/HF"
best() { sed -n 's/.*MB\/s=\([0-9.]*\).*/\1/p' | sort -g | tail -1; }
for f in gpt2 llama3 llama2; do
    one=$(for _ in $(seq "$rounds"); do "$tool" bench "$tmp/hf/$f/tokenizer.json" "$tmp/corpus.bin" 1; done | best)
    all=$(for _ in $(seq "$rounds"); do "$tool" bench "$tmp/hf/$f/tokenizer.json" "$tmp/corpus.bin" "$threads"; done | best)
    hf=$(for _ in $(seq "$rounds"); do node "$src/tests/cli/tok_ref.mjs" bench "$tmp/hf/$f/tokenizer.json" "$tmp/corpus.bin"; done | best)
    printf '%-8s %9s MB/s %11s MB/s %9s MB/s %9sx\n' "$f" "$one" "$all" "$hf" "$(awk -v a="$one" -v b="$hf" 'BEGIN { printf "%.1f", a / b }')"
done
