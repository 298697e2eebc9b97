#!/usr/bin/env bash
# The sharded strategies (issue #11): zero1/2/3 in each precision, and fsdp's sharding strategies
# and the deepspeed strategy with templates/'s stage 1-3 JSONs in bf16-mixed, trace DDP's per-step
# losses on 4 ranks (fp32 within 1e-6, bf16-mixed, 16-mixed and bf16-true bit for bit, the loss
# scaler's skips on the same steps), and so does 1 rank accumulating 4 micro-batches (16-bit: within 1e-4 over 15
# steps, 1e-2 over 30); 3 ranks (parts that do not divide) and units smaller than a rank's share
# work; bf16-true keeps bf16 parameters only; the model state per
# rank is what `dtrun check --memory` says, within 10% of DeepSpeed's formulas at the 124M shape; bad
# strategy settings are refused before any rank starts; a Llama traces DDP under each stage too.
# (HYBRID_SHARD across two Slurm nodes: test_slurm.sh.) The sanitizer build runs each stage's code
# once, on 2 ranks, and checks the other names map to those stages.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
if ! dtrun_has '^comm: mpi'; then
    echo "1..0 # SKIP this dtrun was built without MPI"
    exit 0
fi
base=(events.interval=1ba model.n_layer=2 model.n_embd=64 model.n_head=4 model.seq_len=32 run.eval_interval=0ba
    data.micro_batch_size=4 run.max_duration=30ba)
ds=$DT_SRCDIR/templates/deepspeed
# the sanitizer build checks fewer combinations: each run there takes several times as long
full=0
optimized && full=1
precisions=(32-true bf16-mixed 16-mixed bf16-true)
[ $full = 1 ] || precisions=(32-true bf16-mixed)
# traces NAME RUN DDP-RUN PRECISION: RUN's losses trace DDP-RUN's. On 4 ranks every strategy rounds
# alike (README): 16-bit runs give DDP's losses bit for bit, fp32 ones within 1e-6 (measured 2e-8 to
# 5e-8; gradients reduced in fp16 would be 2e-6 off). 1 rank accumulating 4 micro-batches sums the
# same gradients in another order than the all-reduce, an fp32 ulp apart; with 16-bit weights such an ulp sometimes moves a weight by one 16-bit step, and 30
# steps of a tiny model at this learning rate grow that to ~1e-3 (a bf16 step is 2^-8 to 2^-7 of the
# weight): there early steps are held to 1e-4, the whole run to 1e-2.
traces() {
    local d e
    d=$(maxrel "$2" "$3")
    if [ "$4" = 32-true ]; then
        within "$d" 1e-6 && ok "$4: $1 traces ddp ($d)" || not_ok "$4: $1 differs from ddp by $d"
    elif [ "${2#one-}" = "$2" ]; then
        within "$d" 0 && ok "$4: $1 gives ddp's losses bit for bit" || not_ok "$4: $1 differs from ddp by $d"
    else
        e=$(maxrel "$2" "$3" 15)
        within "$e" 1e-4 && within "$d" 1e-2 && ok "$4: $1 traces ddp ($e over 15 steps, $d over all)" ||
            not_ok "$4: $1 differs from ddp by $e over 15 steps, $d over all"
    fi
}
# the grid on 4 ranks; under the sanitizers on 2, which run the same code (4-rank runs there: the MLP
# below; an ASan'd rank's start is seconds of Open MPI's allocations)
ranks=4
[ $full = 1 ] || ranks=2
four() { # NAME DIR ARGS...: a run on $ranks ranks
    local name=$1 dir=$2
    shift 2
    run "$name" 0 timeout 300 "$DTRUN" -n $ranks run "${base[@]}" "$@" run.dir="$dir"
}

for p in "${precisions[@]}"; do
    four "$p: ddp on $ranks ranks" "ddp-$p" compute.precision=$p
    run "$p: 1 rank, accumulation $ranks" 0 "$DTRUN" run "${base[@]}" compute.precision=$p \
        compute.gradient_accumulation_steps=$ranks run.dir="one-$p"
    traces "1 rank x $ranks micro-batches" "one-$p" "ddp-$p" "$p"
    # templates/deepspeed's stage JSONs enable bf16: against ddp in bf16-mixed
    if [ $full = 1 ]; then # the FSDP names and DeepSpeed JSONs resolve to these stages (checked below
        # without a run): they run in bf16-mixed, the precision the JSONs enable, the stages in all three
        variants=(zero1 zero2 zero3)
        [ $p = bf16-mixed ] && variants+=(fsdp:FULL_SHARD fsdp:SHARD_GRAD_OP fsdp:NO_SHARD deepspeed:zero1 deepspeed:zero2
            deepspeed:zero3)
    else # under the sanitizers each stage's code once: zero3 in fp32 (and in 16-mixed below), zero1 and
        # zero2 in bf16; the FSDP names and DeepSpeed JSONs map to these stages (checked without a run below)
        variants=(zero3)
        [ $p = bf16-mixed ] && variants=(zero1 zero2)
    fi
    for v in "${variants[@]}"; do
        case $v in
        fsdp:*) args=(compute.strategy=fsdp compute.strategy_config.sharding_strategy=${v#fsdp:}) ;;
        deepspeed:*) args=(compute.strategy=deepspeed compute.strategy_config.config=$ds/${v#deepspeed:}.json) ;;
        *) args=(compute.strategy=$v) ;;
        esac
        four "$p: $v" "$v-$p" compute.precision=$p "${args[@]}"
        case $v in deepspeed:zero*) has "$v.json runs stage ${v#deepspeed:zero}" "$err" "strategy: stage ${v#deepspeed:zero} over 4 ranks" ;; esac
        traces "$v" "$v-$p" "ddp-$p" "$p"
    done
done
# Llama (issue #30: grouped-query attention, its own LM head, whose untied embedding gets only rows)
# traces DDP under every stage as GPT does, in bf16-mixed (bit for bit: the strictest test of its
# units' layout; the precisions' own paths are GPT's grid above). Not under the sanitizers: there
# test_llama.sh runs a Llama under ddp and zero3 on 2 ranks, the same code.
llama=(model.type=llama model.n_kv_head=2 model.intermediate_size=96)
lprec=(bf16-mixed)
[ $full = 1 ] || lprec=()
for p in "${lprec[@]}"; do
    four "$p: llama ddp" "llama-ddp-$p" compute.precision=$p "${llama[@]}"
    run "$p: llama on 1 rank, accumulation $ranks" 0 "$DTRUN" run "${base[@]}" "${llama[@]}" compute.precision=$p \
        compute.gradient_accumulation_steps=$ranks run.dir="one-llama-$p"
    traces "llama: 1 rank x $ranks micro-batches" "one-llama-$p" "llama-ddp-$p" "$p"
    variants=(zero1 zero2 zero3)
    [ $full = 1 ] || variants=(zero3)
    for v in "${variants[@]}"; do
        four "$p: llama $v" "llama-$v-$p" compute.precision=$p compute.strategy=$v "${llama[@]}"
        traces "llama $v" "llama-$v-$p" "llama-ddp-$p" "$p"
    done
done
skips() { grep -o '"skipped_steps":[0-9]*' "$1/events.jsonl" | tr '\n' ' '; }
# fp16 overflows from a scale of 2^30: the skips land on the same steps whatever the strategy
f16=(compute.precision=16-mixed compute.loss_scaler.initial_scale_power=30)
four "16-mixed from 2^30: ddp" skip-ddp "${f16[@]}"
four "16-mixed from 2^30: zero3" skip-zero3 "${f16[@]}" compute.strategy=zero3
has "the scale starts too high: steps are skipped" "$(skips skip-ddp)" '"skipped_steps":3'
same "zero3 skips the same steps" "$(skips skip-zero3)" "$(skips skip-ddp)"
d=$(maxrel skip-zero3 skip-ddp)
within "$d" 0 && ok "and gives ddp's losses bit for bit" || not_ok "skips: zero3 differs by $d"

# the names that map to stages, each to its own (their runs above trace ddp in the optimized build)
for v in fsdp:FULL_SHARD:zero3 fsdp:SHARD_GRAD_OP:zero2 fsdp:NO_SHARD:ddp deepspeed:zero1:zero1 deepspeed:zero2:zero2 \
    deepspeed:zero3:zero3; do
    IFS=: read -r kind name stage <<<"$v"
    case $kind in
    fsdp) args=(compute.strategy=fsdp compute.strategy_config.sharding_strategy=$name) ;;
    *) args=(compute.strategy=deepspeed compute.strategy_config.config=$ds/$name.json) ;;
    esac
    same "$kind $name is $stage" "$("$DTRUN" check "${base[@]}" compute.num_devices=4 "${args[@]}" 2>&1 |
        sed -n 's/^# world: .*; strategy //p')" "$stage"
done

# 3 ranks: parts of every piece differ by one element (zero3 gathers them: the sanitizer build runs it alone)
run "1 rank, accumulation 3" 0 "$DTRUN" run "${base[@]}" compute.gradient_accumulation_steps=3 run.dir=one3
three=(zero1 zero3)
[ $full = 1 ] || three=(zero3)
for s in "${three[@]}"; do
    run "$s on 3 ranks" 0 timeout 300 "$DTRUN" -n 3 run "${base[@]}" compute.strategy=$s run.dir=$s-3
    d=$(maxrel $s-3 one3)
    within "$d" 1e-6 && ok "$s on 3 ranks traces 1 rank x 3 ($d)" || not_ok "$s on 3 ranks differs by $d"
done
# units smaller than a rank's share: an MLP whose last layer holds 3 parameters, none kept whole
mlp=("$DT_SRCDIR/templates/mlp-regression.yaml" 'model.mlp.hidden=[2]' model.mlp.out_features=1
    run.max_duration=30ba events.interval=1ba)
run "mlp, 1 rank x 4" 0 "$DTRUN" run "${mlp[@]}" compute.gradient_accumulation_steps=4 run.dir=mlp1
run "mlp with 3-parameter units, zero3 on 4 ranks" 0 timeout 300 "$DTRUN" -n 4 run "${mlp[@]}" \
    compute.strategy=zero3 compute.strategy_config.param_persistence_threshold=0 run.dir=mlp4
has "no unit kept whole" "$err" "2 partitioned, 0 units kept whole"
d=$(maxrel mlp4 mlp1)
within "$d" 1e-5 && ok "it traces 1 rank x 4 ($d)" || not_ok "mlp zero3 differs by $d"

# bf16-true: bf16 parameters only, updated with stochastic rounding (how close it trains to fp32, over
# several seeds and CPU paths: test_precision.sh)
membytes() { sed -n "s/.*\"$2\":\\([0-9]*\\).*/\\1/p" "$1/events.jsonl" | head -1; }
if [ $full = 1 ]; then
    for p in 32-true bf16-mixed bf16-true; do
        run "2 steps in $p" 0 "$DTRUN" run "${base[@]}" run.max_duration=2ba compute.precision=$p run.dir=t-$p
    done
    n=$(sed -n 's/.*"params":\([0-9]*\),.*/\1/p' t-32-true/events.jsonl | head -1)
    same "bf16-true keeps 2 bytes a parameter and no fp32 copy" \
        "$(membytes t-bf16-true params_bytes) $(membytes t-bf16-true master_bytes)" "$((2 * n)) 0"
    same "half of fp32's parameter bytes" "$((2 * $(membytes t-bf16-true params_bytes)))" "$(membytes t-32-true params_bytes)"
    same "bf16-mixed keeps fp32 master weights besides" \
        "$(membytes t-bf16-mixed params_bytes) $(membytes t-bf16-mixed master_bytes)" "$((2 * n)) $((4 * n))"
fi

# what each rank holds: the run's own report is the estimate, stage by stage (those run in bf16-mixed)
for s in ddp zero1 zero2 zero3; do
    dir=$s-bf16-mixed
    [ -d "$dir" ] || continue
    run "check --memory, $s" 0 "$DTRUN" check "${base[@]}" compute.precision=bf16-mixed compute.num_devices=$ranks \
        compute.strategy=$s --memory
    est=$(sed -n 's/^# this config: \([0-9]*\) bytes of model state on rank 0$/\1/p' <<<"$out")
    same "$s: rank 0 held what check --memory said ($est bytes)" "$(membytes "$dir" model_state_bytes)" "$est"
done
# the 124M shape on 4 ranks: each stage within 10% of DeepSpeed's formula; zero3 under 30% of ddp
run "check --memory at the 124M shape" 0 "$DTRUN" check model.n_layer=12 model.n_head=12 model.n_embd=768 \
    model.vocab_size=50257 model.seq_len=1024 compute.precision=bf16-mixed compute.num_devices=4 --memory
table=$(grep -E '^#   (ddp|zero[123]) ' <<<"$out")
while read -r _ stage _ _ _ _ _ state _ rest; do
    formula=$(sed -n 's/.* = \([0-9.]*\) MiB .*/\1/p' <<<"$rest")
    r=$(awk -v a="$state" -v b="$formula" 'BEGIN { printf "%.3f", a / b }')
    awk -v r="$r" 'BEGIN { exit !(r >= 1 && r <= 1.1) }' && ok "124M, 4 ranks, $stage: $state MiB, ${r}x DeepSpeed's $formula" ||
        not_ok "124M $stage: $state MiB against the formula's $formula ($r)"
done <<<"$table"
z3=$(awk '$2 == "zero3" { print $8 }' <<<"$table") dp=$(awk '$2 == "ddp" { print $8 }' <<<"$table")
awk -v a="$z3" -v b="$dp" 'BEGIN { exit !(a <= 0.3 * b) }' && ok "zero3 holds $z3 MiB, under 30% of ddp's $dp" ||
    not_ok "zero3 $z3 MiB against ddp $dp"

# bad settings, each refused before a rank starts, with the place and the fix
printf '{"zero_optimization": {"stage": 5}}' >stage5.json
run "stage 5" 2 "$DTRUN" check compute.strategy=deepspeed compute.strategy_config.config=stage5.json
same "is refused" "$err" "stage5.json:1:33: error: zero_optimization.stage: must be between 0 and 3"
printf '{"zero_optimization": {"stage": 3, "stage3_max_live_parameters": "many"}}' >type.json
run "a DeepSpeed key of the wrong type" 2 "$DTRUN" check compute.strategy=deepspeed compute.strategy_config.config=type.json
same "is refused" "$err" "type.json:1:66: error: zero_optimization.stage3_max_live_parameters: expected a whole number, got the string \"many\" (remove the quotes)"
run "an FSDP name that does not exist" 2 "$DTRUN" check compute.strategy=fsdp \
    compute.strategy_config.sharding_strategy=FULL_SHARDS
has "is refused with the names" "$err" "'FULL_SHARDS' is not one of FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD"
run "a bucket of 0" 2 "$DTRUN" check compute.strategy=zero2 compute.strategy_config.bucket_cap_mb=0
same "is refused" "$err" "override 'compute.strategy_config.bucket_cap_mb=0': error: compute.strategy_config.bucket_cap_mb: must be > 0 and <= 65536"
printf '{"zero_optimization": {"stage": 2, "reduce_bucket_size": -5}}' >neg.json
run "a negative DeepSpeed bucket" 2 "$DTRUN" check compute.strategy=deepspeed compute.strategy_config.config=neg.json
same "is refused" "$err" "neg.json:1:58: error: zero_optimization.reduce_bucket_size: must be between 1 and 1000000000000"
printf '{"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}' >nvme.json
run "offload to nvme" 2 "$DTRUN" check compute.strategy=deepspeed compute.strategy_config.config=nvme.json
has "is refused by name" "$err" "'nvme' is not supported: dtrun offloads to host memory only; use \"cpu\""
finish
