#!/usr/bin/env bash
# Mixed precision end to end: the tiny GPT trained 300 steps (30 in the sanitizer and minimal builds,
# which do not compare the ends) in bf16-mixed,
# 16-mixed and bf16-true ends within 2% of fp32's final loss; bf16-mixed keeps
# activations in half the bytes; the metrics carry loss_scale
# and skipped_steps; an overflow injected into one rank's gradient in a DDP run
# (DTRUN_FAULT=grad_inf, the fault-injection point) is skipped on every rank, without advancing the
# LR schedule, and said once; gradients can travel in bf16; an overflow at
# the minimum scale ends the run.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
base=(events.interval=1ba model.n_layer=2 model.n_embd=64 model.n_head=4 model.seq_len=32 run.eval_interval=0ba data.micro_batch_size=4)
field() { sed -n "s/.*\"step\":$2,.*\"$3\":\\([^,}]*\\).*/\\1/p" "$1/events.jsonl"; }
last_loss() { losses "$1" | tail -1; }
relto() { awk -v a="$1" -v b="$2" 'BEGIN { d = (a - b) / b; printf "%.2e", d < 0 ? -d : d }'; }

# how close each policy ends to fp32 is arithmetic, which the optimized build with oneDNN checks; the
# sanitizer and minimal builds run each policy's code for 30 steps
steps=300
numerics || steps=30
for p in 32-true bf16-mixed 16-mixed bf16-true; do
    run "$steps steps in $p" 0 "$DTRUN" run "${base[@]}" run.max_duration=${steps}ba compute.precision=$p run.dir=$p
    printf '%s\n' "$err" >"$p/log"
done
for p in bf16-mixed 16-mixed bf16-true; do
    [ $steps = 300 ] || break
    d=$(relto "$(last_loss $p)" "$(last_loss 32-true)")
    within "$d" 0.02 && ok "$p ends within 2% of fp32 ($(last_loss $p) vs $(last_loss 32-true): $d)" ||
        not_ok "$p ends $d away from fp32"
done
# activations stored in 16 bits between ops, as autocast keeps them: a block's ln1, qkv, atty, ln2, fch and
# fch_gelu are 14 x (B,T,C) = 14 x 8192 values, 2 bytes each instead of 4: 8 layers x 229376 bytes = 1.75 MiB
# less; the projection scratch and lnf (2 x 8192 values) and the (128, 256) logits: 0.09 MiB less; the
# residual stream, the statistics and attention's log-sum-exp stay fp32. The log shows tenths of a MiB.
acts() { sed -n 's/.*activations \([0-9.]*\) MiB.*/\1/p' <<<"$1"; }
run "8 layers, fp32" 0 "$DTRUN" run "${base[@]}" model.n_layer=8 run.max_duration=1ba run.dir=m32
a32=$(acts "$err")
run "8 layers, bf16-mixed" 0 "$DTRUN" run "${base[@]}" model.n_layer=8 run.max_duration=1ba compute.precision=bf16-mixed \
    run.dir=m16
a16=$(acts "$err")
awk -v a="$a32" -v b="$a16" 'BEGIN { d = a - b; exit !(d >= 1.75 && d <= 1.95) }' &&
    ok "bf16-mixed keeps activations in half the bytes ($a16 vs $a32 MiB)" ||
    not_ok "activations: bf16-mixed $a16 MiB, fp32 $a32 MiB"
[ "$(last_loss bf16-mixed)" != "$(last_loss 32-true)" ] && ok "bf16-mixed really rounds (another trajectory)" ||
    not_ok "bf16-mixed traced fp32 exactly"
same "16-mixed starts at 2^16" "$(field 16-mixed 1 loss_scale)" 65536
same "bf16-mixed has no loss scale" "$(field bf16-mixed 1 loss_scale)" 1
same "nothing skipped" "$(field 16-mixed $steps skipped_steps)" 0

if dtrun_has '^comm: mpi'; then
    fp16=("${base[@]}" run.max_duration=20ba compute.precision=16-mixed)
    DTRUN_FAULT=grad_inf@5:1 run "dtrun -n 2, inf in rank 1's gradient at step 5" 0 timeout 300 "$DTRUN" -n 2 "${fp16[@]}" \
        run.dir=inj
    [ "$(grep -c 'fp16 gradients overflowed' <<<"$err")" = 1 ] && ok "said once, by rank 0" || not_ok "overflow lines" "$err"
    has "what happened" "$err" "[rank 0] dtrun: step 5: fp16 gradients overflowed; step skipped, loss scale kept at 65536 (hysteresis left 1 of 2; 1 skipped so far)"
    same "step 5 has no gradient norm" "$(field inj 5 grad_norm)" null
    same "skipped_steps counts it" "$(field inj 4 skipped_steps) $(field inj 5 skipped_steps) $(field inj 20 skipped_steps)" "0 1 1"
    same "the LR schedule waited a step" "$(field inj 6 lr)" "$(field inj 5 lr)"
    # every rank skipped: the run traces 1 rank x 2 micro-batches with the same skip
    DTRUN_FAULT=grad_inf@5:0 run "1 rank, accumulation 2, the same overflow" 0 "$DTRUN" run "${fp16[@]}" \
        compute.gradient_accumulation_steps=2 run.dir=inj1
    d=$(maxrel inj inj1)
    within "$d" 1e-4 && ok "both ranks skipped: the 2-rank run traces the 1-rank run ($d, fp16 operands)" ||
        not_ok "the ranks diverged ($d)"
    # gradients travel in bf16: summed in fp32 per addition, rounded, and the run still lands on fp32's
    ddp=("${base[@]}" run.max_duration=$((steps / 3))ba compute.strategy_config.bucket_cap_mb=0.1)
    run "dtrun -n 2, gradients reduced in fp32" 0 timeout 300 "$DTRUN" -n 2 "${ddp[@]}" run.dir=r32
    run "dtrun -n 2, gradients reduced in bf16" 0 timeout 300 "$DTRUN" -n 2 "${ddp[@]}" \
        compute.grad_reduce_dtype=bf16 run.dir=r16
    has "the log says so" "$err" "parameters in fp32, gradients in fp32, reduced in bf16"
    d=$(relto "$(last_loss r16)" "$(last_loss r32)")
    [ $steps = 30 ] || { within "$d" 0.01 && ok "bf16 gradient reduction ends within 1% of fp32's ($d)" ||
        not_ok "bf16 reduction: $d"; }
    [ "$(last_loss r16)" != "$(last_loss r32)" ] && ok "and really rounds (another trajectory)" ||
        not_ok "bf16 reduction traced fp32 exactly"
else
    ok "# SKIP no MPI in this build"
fi

DTRUN_FAULT=grad_inf@3:0 run "an overflow at the minimum scale" 1 "$DTRUN" run "${base[@]}" run.max_duration=20ba \
    compute.precision=16-mixed compute.loss_scaler.initial_scale_power=0 compute.loss_scaler.hysteresis=1 run.dir=min
same "ends the run, naming the minimum and the way out" "$(tail -2 <<<"$err")" "dtrun: error: step 3: the gradients overflow fp16 at the minimum loss scale 1 (1 steps skipped so far)
  hint: the model does not fit fp16's range: use compute.precision bf16-mixed, lower optimizer.lr, or lower compute.loss_scaler.min_loss_scale"
finish
