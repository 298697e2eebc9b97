#!/usr/bin/env bash
# Mixed precision's speed on this CPU: the GPT-2 124M shape (B4 T64, all threads)
# in 32-true and bf16-mixed (this CPU's default bf16 matmul path, and oneDNN's
# bf16 matmul primitive forced with DTRUN_BF16_GEMM=onednn), ROUNDS interleaved
# rounds of STEPS steps, median step time over steps 3.. of every round.
# usage: bench/precision.sh [BUILD_DIR] [ROUNDS] [STEPS]   (defaults: build 2 8)
default_rounds=2
. "$(dirname "$0")/common.sh"
: >fp32
: >bf16
: >onednn
for r in $(seq "$rounds"); do
    "$dtrun" run "${shape[@]}" run.dir=a$r >/dev/null 2>&1
    steps_ms a$r >>fp32
    "$dtrun" run "${shape[@]}" compute.precision=bf16-mixed run.dir=b$r >/dev/null 2>&1
    steps_ms b$r >>bf16
    DTRUN_BF16_GEMM=onednn "$dtrun" run "${shape[@]}" compute.precision=bf16-mixed run.dir=c$r >/dev/null 2>&1
    steps_ms c$r >>onednn
done
a=$(median <fp32)
b=$(median <bf16)
c=$(median <onednn)
echo "124M B4 T64, $rounds rounds x $steps steps, median step time"
awk -v a="$a" -v b="$b" -v c="$c" 'BEGIN {
    printf "  32-true:                          %8.1f ms  %6.1f tokens/s\n", a, 256000 / a
    printf "  bf16-mixed (default path):        %8.1f ms  %6.1f tokens/s  %.2fx fp32 (target >= 1.5x on a CPU with fast bf16)\n", b, 256000 / b, a / b
    printf "  bf16-mixed (oneDNN bf16 matmul):  %8.1f ms  %6.1f tokens/s  %.2fx fp32\n", c, 256000 / c, a / c }'
