#!/usr/bin/env bash
# fp8-mixed end to end on the CPU, the reference of the GPU's FP8 gemms (#42; the training quality
# against bf16-mixed over seeds is test_precision's): Lightning's and DeepSpeed's names for it; the
# compute.fp8 keys refused under another precision, an mlp and an E5M2 forward refused; every recipe
# (delayed with max and most_recent, current, hybrid and all-E4M3) trains, each its own trajectory,
# a grouped-query Llama too; activation checkpointing keeps the trajectory bit for bit;
# DDP, zero1 and zero3 on 2 ranks give the same losses bit for bit, and one rank with 2 micro-batches
# traces them (the step's amaxes are the ranks' maximum, the scales change between steps; the
# gradients summed in another order, an fp32 ulp apart, sometimes round to another E5M2 code, a
# step of 2^-3: the first 5 steps within 5e-4, measured 1e-4, the 30 within 1e-2 as bf16's are); a checkpoint carries the scales and the
# amax histories (fp8.bin, checksummed in the manifest) and a resumed run goes on bit for bit, a
# damaged fp8.bin is refused by name; an overflow forced into every scale (DTRUN_FAULT=fp8_jump)
# is clipped, counted in the metrics (fp8_overflows), said in the log (once a record that saw one),
# and the run recovers.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
base=(events.interval=1ba model.n_layer=2 model.n_embd=64 model.n_head=4 model.seq_len=32 run.eval_interval=0ba
    data.micro_batch_size=4 checkpoint.dir=null)
field() { grep '"type":"metrics"' "$1/events.jsonl" | sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p"; }

for name in fp8-mixed transformer-engine fp8; do
    run "compute.precision $name" 0 "$DTRUN" check compute.precision=$name
    has "... is fp8-mixed, with Transformer Engine's defaults" "$(grep -A7 '^  precision:' <<<"$out" |
        sed 's/ *#.*//')" "  precision: fp8-mixed"
done
has "compute.fp8's defaults are DelayedScaling's" "$(sed -n '/^  fp8:/,/margin/p' <<<"$out" | sed 's/ *#.*//')" \
    "  fp8:
    format: hybrid
    scaling: delayed
    amax_history_len: 1024
    amax_compute_algo: max
    margin: 0"
run "a compute.fp8 key under bf16-mixed" 2 "$DTRUN" check compute.precision=bf16-mixed compute.fp8.scaling=current
same "... is refused: it would mean nothing" "$err" "override 'compute.fp8.scaling=current': error: compute.fp8.scaling \
(override 'compute.fp8.scaling=current') configures fp8-mixed, and compute.precision is bf16-mixed
  hint: set compute.precision: fp8-mixed, or remove the key"
run "fp8-mixed on an mlp" 2 "$DTRUN" check model.type=mlp compute.precision=fp8-mixed
has "... is refused" "$err" "quantises a transformer's linear layers, and model.type is mlp"
run "an E5M2 forward" 2 "$DTRUN" check compute.precision=fp8-mixed compute.fp8.format=e5m2
has "... is refused with the formats there are" "$err" "use hybrid (E4M3 forward, E5M2 gradients) or e4m3"
# the GPU's FP8 gemms take every dimension in multiples of 16: refused by `dtrun check` wherever it runs
run "fp8-mixed on 4 x 33 rows and n_embd 72" 2 "$DTRUN" check compute.precision=fp8-mixed data.micro_batch_size=4 \
    model.seq_len=33 model.n_embd=72 model.n_head=6
same "... both refused, each by its key" "$err" "override 'data.micro_batch_size=4': error: compute.precision fp8-mixed: \
data.micro_batch_size 4 (override 'data.micro_batch_size=4') x model.seq_len 33 (override 'model.seq_len=33') is 132 \
rows, not a multiple of 16 (the GPU's FP8 gemms take every dimension in multiples of 16)
  hint: make data.micro_batch_size x model.seq_len a multiple of 16, or use bf16-mixed
override 'model.n_embd=72': error: compute.precision fp8-mixed: model.n_embd is 72 (override 'model.n_embd=72'), not \
a multiple of 16 (the GPU's FP8 gemms take every dimension in multiples of 16)
  hint: use widths in multiples of 16 under fp8-mixed, or bf16-mixed"
printf 'model:\n  seq_len: 33\n' >s33.yaml
run "... the rows from a file's seq_len" 2 "$DTRUN" check s33.yaml compute.precision=fp8-mixed
has "... pinned to the file" "$err" "s33.yaml:2:12: error: compute.precision fp8-mixed: data.micro_batch_size 8 \
(default) x model.seq_len 33 (s33.yaml:2:12) is 264 rows"
run "a Llama whose MLP is 40 wide and qkv 72" 2 "$DTRUN" check compute.precision=fp8-mixed model.type=llama \
    model.n_embd=64 model.n_head=16 model.n_kv_head=1 model.intermediate_size=40
has "... the MLP refused" "$err" "override 'model.intermediate_size=40': error: compute.precision fp8-mixed: \
model.intermediate_size is 40 (override 'model.intermediate_size=40'), not a multiple of 16"
has "... and the qkv projection" "$err" "override 'model.n_kv_head=1': error: compute.precision fp8-mixed: the qkv \
projection's width n_embd + 2 n_kv_head n_embd / n_head is 72 (model.n_kv_head: override 'model.n_kv_head=1'), not \
a multiple of 16"
run "... the same shapes under bf16-mixed" 0 "$DTRUN" check compute.precision=bf16-mixed model.type=llama \
    model.n_embd=64 model.n_head=16 model.n_kv_head=1 model.intermediate_size=40 data.micro_batch_size=4 model.seq_len=33

# every recipe trains; each quantises otherwise, so each has its own trajectory
steps=30
numerics || steps=8
recipes=("delayed" "current:compute.fp8.scaling=current" "e4m3:compute.fp8.format=e4m3"
    "recent:compute.fp8.amax_compute_algo=most_recent compute.fp8.amax_history_len=16 compute.fp8.margin=1")
for r in "${recipes[@]}"; do
    name=${r%%:*} args=()
    [ "$name" != "$r" ] && read -ra args <<<"${r#*:}"
    run "fp8-mixed, $name" 0 "$DTRUN" run "${base[@]}" run.max_duration=${steps}ba compute.precision=fp8-mixed \
        "${args[@]}" run.dir=$name
    [ "$name" = delayed ] && has "... the log names the precision" "$err" "1 rank (single); precision fp8-mixed"
done
run "bf16-mixed beside them" 0 "$DTRUN" run "${base[@]}" run.max_duration=${steps}ba compute.precision=bf16-mixed run.dir=bf16
same "every run logged its steps" "$(for d in delayed current e4m3 recent; do losses $d | wc -l; done | tr '\n' ' ')" \
    "$steps $steps $steps $steps "
falls=$(for d in delayed current e4m3 recent; do losses $d | sed -n '1p;$p' | tr '\n' ' '; echo; done |
    awk '$2 < $1 { n++ } END { print n + 0 }')
same "... and ended below where it began" "$falls" 4
distinct=$(for d in delayed current e4m3 recent bf16; do losses $d | md5sum; done | sort -u | wc -l)
same "five recipes, five trajectories (fp8 is not bf16 under another name)" "$distinct" 5
d=$(maxrel delayed bf16 3)
within "$d" 2e-3 && ok "the first 3 steps within 2e-3 of bf16-mixed's ($d)" || not_ok "the first steps differ by $d from bf16-mixed"
same "the metrics carry fp8_overflows, and only under fp8" "$(field delayed fp8_overflows | head -1) $(field bf16 fp8_overflows | wc -l)" "0 0"

run "with activation checkpointing" 0 "$DTRUN" run "${base[@]}" run.max_duration=${steps}ba compute.precision=fp8-mixed \
    model.activation_checkpointing=true run.dir=ac
same "... the same losses bit for bit (the recomputed forward folds the same amaxes)" "$(losses ac)" "$(losses delayed)"
run "a grouped-query Llama" 0 "$DTRUN" run "${base[@]}" run.max_duration=${steps}ba compute.precision=fp8-mixed \
    model.type=llama model.n_kv_head=2 run.dir=llama
run "... and in bf16-mixed" 0 "$DTRUN" run "${base[@]}" run.max_duration=${steps}ba compute.precision=bf16-mixed \
    model.type=llama model.n_kv_head=2 run.dir=llama-bf16
d=$(maxrel llama llama-bf16 3)
within "$d" 2e-3 && ok "... its first 3 steps within 2e-3 of bf16-mixed's ($d)" || not_ok "llama: the first steps differ by $d"

# invariant 1: one rank and two micro-batches, two ranks and one each
if dtrun_has '^comm: mpi'; then
    run "1 rank, 2 micro-batches" 0 "$DTRUN" run "${base[@]}" run.max_duration=${steps}ba compute.precision=fp8-mixed \
        data.micro_batch_size=2 compute.gradient_accumulation_steps=2 run.dir=one
    run "2 ranks (DDP), 1 micro-batch each" 0 timeout 300 "$DTRUN" -n 2 run "${base[@]}" run.max_duration=${steps}ba \
        compute.precision=fp8-mixed data.micro_batch_size=2 run.dir=$TMP/two
    for s in zero1 zero3; do
        run "2 ranks, $s" 0 timeout 300 "$DTRUN" -n 2 run "${base[@]}" run.max_duration=${steps}ba \
            compute.precision=fp8-mixed data.micro_batch_size=2 compute.strategy=$s run.dir=$TMP/$s
        same "... DDP's losses bit for bit" "$(losses $s)" "$(losses two)"
    done
    e=$(maxrel two one 5) d=$(maxrel two one)
    within "$e" 5e-4 && within "$d" 1e-2 && ok "1 rank accumulating 2 traces them ($e over 5 steps, $d over all)" ||
        not_ok "1x2 and 2x1 differ by $e over 5 steps, $d over all"
fi

# resume: the scales and histories come back, the run goes on bit for bit
ck=("${base[@]}" compute.precision=fp8-mixed compute.fp8.amax_history_len=8 checkpoint.dir=ckpt)
run "20 steps, a checkpoint at 10" 0 "$DTRUN" run "${ck[@]}" run.max_duration=20ba checkpoint.interval=10ba run.dir=whole
has "the checkpoint holds fp8.bin" "$(ls whole/ckpt/step-00000010)" "fp8.bin"
same "... its size and checksum in the manifest" "$(/usr/bin/python3 -c "
import json, os; from pathlib import Path
m = json.load(open('whole/ckpt/step-00000010/manifest.json'))['fp8']
print(m['tensors'], m['amax_history_len'], os.path.getsize('whole/ckpt/step-00000010/fp8.bin'), len(m['xxh64']))")" \
    "24 8 864 16"
run "10 steps" 0 "$DTRUN" run "${ck[@]}" run.max_duration=10ba run.dir=split
run "... resumed to 20" 0 "$DTRUN" run "${ck[@]}" run.max_duration=20ba run.dir=split
same "... the same losses as the run that never stopped, bit for bit" "$(losses split | tail -10)" "$(losses whole | tail -10)"
cp -r split/ckpt/step-00000010 bad && printf 'x' | dd of=bad/fp8.bin bs=1 seek=100 conv=notrunc 2>/dev/null
run "a damaged fp8.bin" 5 "$DTRUN" run "${ck[@]}" run.max_duration=20ba checkpoint.resume=$TMP/bad run.dir=r-bad
has "... is refused by name" "$err" "$TMP/bad/fp8.bin: error: checksum"
run "a bf16-mixed checkpoint resumed under fp8-mixed" 0 "$DTRUN" run "${base[@]}" run.max_duration=12ba \
    checkpoint.dir=ckpt checkpoint.resume=$TMP/whole/ckpt/step-00000010 compute.precision=bf16-mixed run.dir=b2
has "... says the fp8 scales are not used" "$err" "its fp8 scales are not used by this precision"

# an overflow in every scale at step J: clipped, counted, said, recovered
J=12
numerics || J=5
run "fp8_jump at step $J" 0 env DTRUN_FAULT=fp8_jump@$J "$DTRUN" run "${base[@]}" run.max_duration=${steps}ba \
    compute.precision=fp8-mixed run.dir=jump
same "the log says it once a record that saw overflows" "$(grep -c 'overflowed their scale' <<<"$err")" \
    "$(field jump fp8_overflows | awk '$1 > p { n++ } { p = $1 } END { print n + 0 }')"
has "... with what was done" "$err" "step $J: fp8: "
n=$(field jump fp8_overflows | sed -n ${J}p)
before=$(field jump fp8_overflows | sed -n $((J - 1))p)
awk -v a="$before" -v b="$n" 'BEGIN { exit !(b > a + 10) }' && ok "fp8_overflows jumps at step $J ($before -> $n)" ||
    not_ok "fp8_overflows at steps $((J - 1)), $J: $before, $n"
end=$(field jump fp8_overflows | tail -1)
[ $((end - n)) -lt $((n - before)) ] && ok "... and far fewer after it: the scales came down ($n -> $end at the end)" ||
    not_ok "fp8_overflows went on from $n to $end after the jump"
d=$(maxrel jump delayed $((J - 1)))
same "the steps before the jump are the undisturbed run's" "$d" "0.00e+00"
if numerics; then
    last=$(losses jump | tail -1) ref=$(losses delayed | tail -1)
    awk -v a="$last" -v b="$ref" 'BEGIN { d = (a - b) / b; exit !(d < 0.05 && d > -0.05) }' &&
        ok "the run ends within 5% of the undisturbed one ($last, $ref)" || not_ok "ended at $last, undisturbed $ref"
else
    same "the run goes on to its end with finite losses" "$(losses jump | awk '$1 + 0 == $1 { n++ } END { print n }')" $steps
fi
finish
