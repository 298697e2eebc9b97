#!/usr/bin/env bash
# DDP's cost on this machine: the GPT-2 124M shape (seq_len 64, micro-batch 4 per
# rank, fp32) as 1 rank x 1 thread and as 2 ranks x 1 thread through `dtrun -n 2`
# (same per-rank work; the 2-rank step also all-reduces 498 MB of gradients).
# Runs alternate (ROUNDS of each), step times are the median over steps 3.. of
# every round; overhead = 2-rank step / 1-rank step - 1. A third run, two
# independent 1-rank processes at once, separates memory-bandwidth contention
# from communication.
# usage: bench/ddp_overhead.sh [BUILD_DIR] [ROUNDS] [STEPS]   (defaults: build 3 8)
default_rounds=3
. "$(dirname "$0")/common.sh"
: >one
: >two
: >pair
for r in $(seq "$rounds"); do
    OMP_NUM_THREADS=1 taskset -c 0 "$dtrun" run "${shape[@]}" run.dir=one$r >/dev/null 2>&1
    steps_ms one$r >>one
    "$dtrun" -n 2 "${shape[@]}" run.dir=two$r >/dev/null 2>&1
    steps_ms two$r >>two
    OMP_NUM_THREADS=1 taskset -c 0 "$dtrun" run "${shape[@]}" run.dir=pa$r >/dev/null 2>&1 &
    OMP_NUM_THREADS=1 taskset -c 1 "$dtrun" run "${shape[@]}" run.dir=pb$r >/dev/null 2>&1
    wait
    steps_ms pa$r >>pair
done
one=$(median <one)
two=$(median <two)
pair=$(median <pair)
echo "124M B4 T64 fp32, $rounds rounds x $steps steps: step time (median)"
echo "  1 rank  x 1 thread:                 $one ms"
echo "  2 ranks x 1 thread (dtrun -n 2):    $two ms (DDP, 498 MB all-reduced per step)"
echo "  2 independent 1-rank processes:     $pair ms (memory contention alone)"
awk -v a="$one" -v b="$two" -v c="$pair" 'BEGIN {
    printf "DDP step-time overhead: %.1f%% (target <= 15%%); contention alone %.1f%%\n", (b / a - 1) * 100, (c / a - 1) * 100 }'
