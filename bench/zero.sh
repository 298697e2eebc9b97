#!/usr/bin/env bash
# The sharded strategies' cost: the GPT-2 124M shape (seq_len 64, micro-batch 4 per rank) on
# 2 ranks x 1 thread (`dtrun -n 2`), ddp, zero1, zero2 and zero3 interleaved round by round, each
# strategy's step time the median over steps 3.. of every round, and its ratio to ddp's; with each
# rank's model state from run_started. PRECISION (default 32-true) picks the precision.
# usage: bench/zero.sh [BUILD_DIR] [ROUNDS] [STEPS]   (defaults: build 3 8)
. "$(dirname "$0")/common.sh"
shape+=(compute.precision="${PRECISION:-32-true}")
strategies=(ddp zero1 zero2 zero3)
for s in "${strategies[@]}"; do : >"$s.ms"; done
for r in $(seq "$rounds"); do
    for s in "${strategies[@]}"; do
        "$dtrun" -n 2 "${shape[@]}" compute.strategy=$s run.dir=$s$r >/dev/null 2>&1
        steps_ms $s$r >>"$s.ms"
    done
done
ddp=$(median <ddp.ms)
echo "124M B4 T64 ${PRECISION:-32-true}, 2 ranks x 1 thread, $rounds rounds x $steps steps: step time (median)"
for s in "${strategies[@]}"; do
    ms=$(median <"$s.ms")
    state=$(sed -n 's/.*"model_state_bytes":\([0-9]*\).*/\1/p' "${s}1/events.jsonl" | head -1)
    awk -v s="$s" -v a="$ms" -v b="$ddp" -v m="$state" 'BEGIN {
        printf "  %-6s %9.1f ms  %.3fx ddp   model state on rank 0: %7.1f MiB\n", s, a, a / b, m / 1048576 }'
done
echo "targets: zero3 <= 1.2x ddp, zero1 and zero2 <= 1.05x"
