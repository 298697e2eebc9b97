#!/usr/bin/env bash
# Training on the synthetic source ends within 0.05 nats of the best possible
# loss (its entropy rate, in closed form), and the loss falls on the way; the MLP
# learns its teacher.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
# How near the floor a run ends is arithmetic, which the optimized build with oneDNN checks; the sanitizer
# and minimal builds train 30 steps (the portable kernels' arithmetic: the unit tests, test_aarch64.sh)
full=0
numerics && full=1
steps=300 short=()
[ $full = 1 ] || steps=30 short=(run.max_duration=30ba)
run "tiny synthetic run" 0 "$DTRUN" run model.n_layer=2 model.n_embd=64 model.seq_len=64 data.micro_batch_size=16 \
    run.max_duration=${steps}ba events.interval=1ba
done_line=$(grep '^dtrun: done' <<<"$err")
val=$(sed -n 's/.*validation \([0-9.]*\).*/\1/p' <<<"$done_line")
best=$(sed -n 's/.*best possible \([0-9.]*\).*/\1/p' <<<"$done_line")
gap=$(awk -v v="$val" -v b="$best" 'BEGIN { printf "%.4f", v - b }')
first=$(grep -m1 '"type":"metrics"' runs/gpt-tiny/events.jsonl | sed 's/.*"loss":\([0-9.]*\).*/\1/')
last=$(grep '"type":"metrics"' runs/gpt-tiny/events.jsonl | tail -1 | sed 's/.*"loss":\([0-9.]*\).*/\1/')
if [ $full = 1 ]; then
    awk -v g="$gap" 'BEGIN { exit !(g >= 0 && g <= 0.05) }' && ok "within 0.05 nats of the entropy floor ($val vs $best, gap $gap)" \
        || not_ok "validation $val is $gap nats above the floor $best" "$done_line"
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 3) }' && ok "the loss falls ($first -> $last)" \
        || not_ok "the loss did not fall: $first -> $last"
else
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' && ok "the loss falls in 30 steps ($first -> $last)" \
        || not_ok "the loss did not fall: $first -> $last"
fi

run "mlp regression" 0 "$DTRUN" run "$DT_SRCDIR/templates/mlp-regression.yaml" "${short[@]}" run.dir=mlp
val=$(grep '^dtrun: done' <<<"$err" | sed -n 's/.*validation \([0-9.]*\).*/\1/p')
[ $full = 0 ] || { awk -v v="$val" 'BEGIN { exit !(v <= 0.03) }' &&
    ok "mlp regression ends near the noise floor 0.01 (validation $val)" ||
    not_ok "mlp regression validation $val, expected <= 0.03" "$err"; }
run "mlp classification" 0 "$DTRUN" run "$DT_SRCDIR/templates/mlp-regression.yaml" model.mlp.task=classification \
    "${short[@]}" run.dir=mlpc
val=$(grep '^dtrun: done' <<<"$err" | sed -n 's/.*validation \([0-9.]*\).*/\1/p')
[ $full = 0 ] || { awk -v v="$val" 'BEGIN { exit !(v <= 0.6) }' &&
    ok "mlp classification learns (validation $val from ln 4 = 1.386)" ||
    not_ok "mlp classification validation $val, expected <= 0.6" "$err"; }

run "non-finite loss stops the run" 1 "$DTRUN" run model.n_layer=1 model.n_embd=32 model.n_head=2 model.seq_len=16 \
    optimizer.lr=10 compute.gradient_clipping=0 optimizer.type=sgd optimizer.momentum=0.99 run.max_duration=200ba \
    run.dir=nan
has "non-finite loss: message" "$err" "hint: lower optimizer.lr or set compute.gradient_clipping"
# a kernel that could not have its scratch leaves a NaN loss: the kernel's failure is what is said
DTRUN_FAULT=nomem@3 run "a kernel out of memory stops the run" 6 "$DTRUN" run model.n_layer=1 model.n_embd=32 \
    model.n_head=2 model.seq_len=16 compute.precision=bf16-mixed run.max_duration=6ba run.eval_interval=0ba \
    checkpoint.dir=null run.dir=nomem
has "... saying which op and step, not the loss" "$err" "dtrun: error: step 3: out of memory for "
same "... and nothing about the loss" "$(grep -c 'the loss is' <<<"$err")" 0

# on a machine without GPU; a build without CUDA says so (the CUDA build: test_cuda_module.sh)
if dtrun_has '^cuda: not built'; then
    run "cuda asked of a build without CUDA" 2 "$DTRUN" run compute.device=cuda
    same "cuda: says why, and nothing else" "$err" "dtrun: rank 0: error: compute.device is cuda, but this process can use no GPU (no GPU: dtrun was built without CUDA)
  hint: set compute.device: cpu, or auto (a GPU when there is one)"
fi
finish
