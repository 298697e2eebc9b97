#!/usr/bin/env bash
# DESIGN.md invariant 1, single-process half: the same global batch gives the
# same loss trajectory however it is split into micro-batches (the sampler
# hands step s the same samples either way). Also: the same seed gives the same
# run twice, and activation checkpointing does not change the trajectory (in fp32
# and with bf16-mixed's 16-bit activations).
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
base=(events.interval=1ba model.n_layer=2 model.n_embd=64 model.n_head=4 model.seq_len=32 run.max_duration=30ba run.eval_interval=0ba)
# max relative difference of two loss columns

run "micro-batch 8, accumulation 1" 0 "$DTRUN" run "${base[@]}" data.micro_batch_size=8 run.dir=a
run "micro-batch 4, accumulation 2" 0 "$DTRUN" run "${base[@]}" data.micro_batch_size=4 \
    compute.gradient_accumulation_steps=2 run.dir=b
run "micro-batch 2, accumulation 4" 0 "$DTRUN" run "${base[@]}" data.micro_batch_size=2 \
    compute.gradient_accumulation_steps=4 run.dir=c
same "30 steps each" "$(losses a | wc -l) $(losses b | wc -l) $(losses c | wc -l)" "30 30 30"
d=$(maxrel b a)
within "$d" 1e-6 && ok "8x1 and 4x2 trace the same losses (max relative difference $d)" || not_ok "8x1 vs 4x2 differ by $d"
d=$(maxrel c a)
within "$d" 1e-6 && ok "8x1 and 2x4 trace the same losses (max relative difference $d)" || not_ok "8x1 vs 2x4 differ by $d"

run "the same run again" 0 "$DTRUN" run "${base[@]}" data.micro_batch_size=8 run.dir=a2
same "same seed, same losses, bit for bit" "$(losses a2)" "$(losses a)"
run "with activation checkpointing" 0 "$DTRUN" run "${base[@]}" data.micro_batch_size=8 \
    model.activation_checkpointing=true run.dir=ck
same "checkpointing keeps the trajectory, bit for bit" "$(losses ck)" "$(losses a)"
# the same with 16-bit activations: the recomputed block, its 16-bit tensors in the one shared set
run "bf16-mixed" 0 "$DTRUN" run "${base[@]}" data.micro_batch_size=8 compute.precision=bf16-mixed run.dir=h
run "bf16-mixed with activation checkpointing" 0 "$DTRUN" run "${base[@]}" data.micro_batch_size=8 \
    compute.precision=bf16-mixed model.activation_checkpointing=true run.dir=hck
same "checkpointing keeps the bf16-mixed trajectory, bit for bit" "$(losses hck)" "$(losses h)"
run "another seed" 0 "$DTRUN" run "${base[@]}" data.micro_batch_size=8 run.seed=7 run.dir=s7
[ "$(losses s7)" != "$(losses a)" ] && ok "another seed, another trajectory" || not_ok "run.seed changed nothing"
finish
