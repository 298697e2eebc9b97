#!/usr/bin/env bash
# Checkpoint cost on the GPT-2 124M shape (B4 T64, fp32, 1 rank; a checkpoint is its parameters and
# AdamW's two moments, 1.5 GB): (1) write bandwidth, dtrun's save (copy, write, fsync, manifest,
# renames) from its checkpoint_saved events against `dd conv=fsync` of the same file to the same
# disk in the same run, through the page cache and with oflag=direct as dtrun writes (target >= 80%); (2) what a save costs the training loop: the run's wall time
# with a save every 4 steps against the same run with none, per save, as a fraction of the median
# step (target < 1 step). Rounds interleave the two.
# usage: bench/ckpt.sh [BUILD_DIR] [ROUNDS] [STEPS]   (defaults: build 3 12)
default_rounds=3
. "$(dirname "$0")/common.sh"
steps=${3:-12}
shape=(model.n_layer=12 model.n_head=12 model.n_embd=768 model.vocab_size=50257 model.seq_len=64
    data.micro_batch_size=4 run.max_duration="$steps"ba run.eval_interval=0ba events.interval=1ba)
: >dd.mbs
: >ddd.mbs
: >ck.mbs
: >with.s
: >without.s
: >step.ms
for r in $(seq "$rounds"); do
    "$dtrun" run "${shape[@]}" checkpoint.interval=4ba checkpoint.keep=1 run.dir=w$r >/dev/null 2>&1
    "$dtrun" run "${shape[@]}" checkpoint.dir=null run.dir=n$r >/dev/null 2>&1
    sed -n 's/.*"type":"checkpoint_saved".*"mb_per_s":\([0-9.e+]*\).*/\1/p' w$r/events.jsonl >>ck.mbs
    bytes=$(sed -n 's/.*"type":"checkpoint_saved".*"bytes":\([0-9]*\).*/\1/p' w$r/events.jsonl | head -1)
    # the same bytes (the checkpoint's own file, read from the page cache), written plainly and
    # synced into the same file system
    src=$(ls w$r/ckpt/step-*/rank-*.bin | tail -1)
    cat "$src" >/dev/null
    t0=$(date +%s%N)
    dd if="$src" of=w$r/plain bs=8M conv=fsync status=none
    t1=$(date +%s%N)
    awk -v b="$bytes" -v ns=$((t1 - t0)) 'BEGIN { print b / (ns / 1e9) / 1e6 }' >>dd.mbs
    rm -f w$r/plain
    t0=$(date +%s%N) # and bypassing the page cache, as dtrun writes
    dd if="$src" of=w$r/plain bs=8M oflag=direct conv=fsync status=none
    t1=$(date +%s%N)
    awk -v b="$bytes" -v ns=$((t1 - t0)) 'BEGIN { print b / (ns / 1e9) / 1e6 }' >>ddd.mbs
    rm -f w$r/plain
    # the last save is the run's end, waited for: its seconds are not the loop's cost
    last=$(sed -n 's/.*"type":"checkpoint_saved".*"seconds":\([0-9.e+]*\).*/\1/p' w$r/events.jsonl | tail -1)
    fin=$(sed -n 's/.*"type":"run_finished".*"seconds":\([0-9.e+]*\).*/\1/p' w$r/events.jsonl)
    awk -v f="$fin" -v l="$last" 'BEGIN { print f - l }' >>with.s
    sed -n 's/.*"type":"run_finished".*"seconds":\([0-9.e+]*\).*/\1/p' n$r/events.jsonl >>without.s
    steps_ms n$r >>step.ms
    rm -rf w$r/ckpt
done
saves=$(($(grep -c '"type":"checkpoint_saved"' w1/events.jsonl) - 1)) # in the loop: all but the last
dd_m=$(median <dd.mbs) ddd_m=$(median <ddd.mbs) ck_m=$(median <ck.mbs) with=$(median <with.s) without=$(median <without.s) step=$(median <step.ms)
echo "124M B4 T64 fp32, 1 rank, $rounds rounds x $steps steps, a save every 4 steps ($saves in the loop and one at the end, $((bytes / 1048576)) MiB each)"
awk -v a="$ck_m" -v b="$dd_m" -v c="$ddd_m" 'BEGIN {
    printf "  write: dtrun %.0f MB/s; dd conv=fsync %.0f MB/s (%.0f%%), with oflag=direct %.0f MB/s (%.0f%%) (target >= 80%%)\n",
        a, b, 100 * a / b, c, 100 * a / c }'
awk -v w="$with" -v n="$without" -v s="$saves" -v st="$step" 'BEGIN {
    c = (w - n) / s * 1000
    printf "  loop: %.2f s with saves (the end save not counted), %.2f s without: %.0f ms a save, %.2f of a %.0f ms step (target < 1)\n", w, n, c, c / st, st }'
