# common.sh - what the 124M benchmarks share (sourced): arguments [BUILD_DIR] [ROUNDS] [STEPS]
# with defaults build, $default_rounds and 8; $dtrun; a scratch directory the script runs in;
# $shape, the GPT-2 124M shape at B4 T64; median (of numbers on stdin) and steps_ms RUN_DIR (the
# step times of steps 3.., the first two warm up).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-${default_rounds:-3}}
steps=${3:-8}
dtrun=$PWD/$build/src/dtrun
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
shape=(model.n_layer=12 model.n_head=12 model.n_embd=768 model.vocab_size=50257 model.seq_len=64
    data.micro_batch_size=4 run.max_duration="$steps"ba run.eval_interval=0ba events.interval=1ba)
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
steps_ms() { sed -n 's/.*"step_ms":\([0-9.]*\).*/\1/p' "$1/events.jsonl" | tail -n +3; }
