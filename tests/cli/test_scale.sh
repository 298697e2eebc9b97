#!/usr/bin/env bash
# No rank holds the whole model (#39): (a) every world size and strategy starts from the same
# parameters (each rank draws only its slices, with the bits of one draw: test_params.c), so the first
# step's loss and gradient norm of a Llama agree on 1, 2, 3 and 4 ranks; (b) model.init_from reads on
# each rank only the bytes of the slices it keeps (a Hugging Face directory on 4 ranks under zero3:
# each reads about a quarter), and gives the 1-rank run's first step; (c) a 38M-parameter Llama on 4
# ranks under zero3 peaks within 10% of what `dtrun check --memory` plans for a rank (it held 2-3x
# that when every rank built the whole model first), and says nothing; (d) the plan as `dtrun check
# --memory` prints it (Llama 3 8B on 8 GPUs against an 80 GiB one), a node that cannot hold the run
# refused before anything is allocated, with the numbers and what to change, and a run whose peak
# passes its plan by more than 10% saying so (DTRUN_FAULT=hog); (e) ZeRO-Offload (offload_optimizer, and
# offload_param under zero3) on the CPU backend, which runs the GPU's path: the same losses bit for bit
# on 1 and 2 ranks, fp32 and bf16-mixed, a checkpoint written offloaded resumed without, the settings
# it cannot carry refused by name, and its plan. The sanitizer build runs (a), (b), (d) and (e) on
# smaller worlds.
. "$(dirname "$0")/tap.sh"
unset DTRUN_CUDA_TRY # the plans below are those of the kernels in use, but where a test sets it
cd "$TMP" || exit 1
first() { grep '"type":"metrics"' "$1/events.jsonl" | head -1 | sed 's/.*"loss":\([0-9.e+-]*\),"lr":[^,]*,"grad_norm":\([0-9.e+-]*\),.*/\1 \2/'; }
# rel A B: |a - b| / b of two "loss norm" pairs, the larger of the two
rel() { awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); m = 0
    for (i = 1; i <= 2; i++) { d = (x[i] - y[i]) / y[i]; d = d < 0 ? -d : d; if (d > m) m = d }
    if (x[1] == "" || y[1] == "") m = "none"; printf "%s", m }'; }
llama=(model.type=llama model.n_layer=2 model.n_embd=64 model.n_head=4 model.n_kv_head=2 model.intermediate_size=160
    model.vocab_size=256 model.seq_len=16 data.micro_batch_size=1 run.eval_interval=0ba events.interval=1ba
    run.max_duration=1ba checkpoint.dir=null)
full=0
optimized && full=1

# ---- (a) the same first step on every world size
run "(a) 1 rank, 12 micro-batches" 0 "$DTRUN" run "${llama[@]}" compute.gradient_accumulation_steps=12 run.dir=w1
one=$(first w1)
if dtrun_has '^comm: mpi'; then
    worlds=("2 zero3 6" "3 zero3 4" "4 fsdp 3")
    [ $full = 1 ] || worlds=("3 zero3 4")
    for w in "${worlds[@]}"; do
        set -- $w
        run "(a) $1 ranks, $2" 0 timeout 300 "$DTRUN" -n "$1" run "${llama[@]}" compute.strategy=$2 \
            compute.gradient_accumulation_steps=$3 run.dir=w$1
        d=$(rel "$(first w$1)" "$one")
        within "$d" 1e-6 && ok "(a) ... the first step's loss and gradient norm are 1 rank's ($d)" ||
            not_ok "(a) $1 ranks: $(first w$1), 1 rank: $one"
    done
else
    ok "# SKIP no MPI in this build: one world size"
fi

# ---- (b) each rank reads its slices of a Hugging Face directory
run "(b) a Llama to export" 0 "$DTRUN" run "${llama[@]}" model.vocab_size=4096 checkpoint.dir=ckpt run.dir=x
run "(b) exported" 0 "$DTRUN" ckpt export x --format safetensors --out hf
loaded=(model.init_from=hf model.seq_len=16 data.micro_batch_size=1 run.eval_interval=0ba events.interval=1ba
    run.max_duration=1ba checkpoint.dir=null optimizer.lr=1e-30)
run "(b) model.init_from on 1 rank, 4 micro-batches" 0 "$DTRUN" run "${loaded[@]}" \
    compute.gradient_accumulation_steps=4 run.dir=l1
if dtrun_has '^comm: mpi'; then
    run "(b) ... on 4 ranks, zero3" 0 timeout 300 "$DTRUN" -n 4 run "${loaded[@]}" compute.strategy=zero3 run.dir=l4
    line=$(grep -o 'model.init_from hf: each rank read the slices it keeps, .*' <<<"$err")
    at_most=$(sed -n 's/.* \([0-9.]*\) MiB at most, of \([0-9.]*\) MiB .*/\1 \2/p' <<<"$line")
    awk -v x="$at_most" 'BEGIN { split(x, v, " "); exit !(v[2] > 0 && v[1] <= 0.3 * v[2]) }' &&
        ok "(b) ... each rank read about a quarter ($line)" || not_ok "(b) the ranks read more than their share" "$err"
    d=$(rel "$(first l4)" "$(first l1)")
    within "$d" 1e-6 && ok "(b) ... and the first step is 1 rank's ($d)" || not_ok "(b) 4 ranks: $(first l4), 1: $(first l1)"
else
    ok "# SKIP no MPI in this build: loading on several ranks"
fi

# ---- (c) the measured peak against the plan
if [ $full = 1 ] && dtrun_has '^comm: mpi'; then
    big=(model.type=llama model.n_layer=2 model.n_embd=512 model.n_head=8 model.n_kv_head=4 model.intermediate_size=1024
        model.vocab_size=32000 model.seq_len=16 data.micro_batch_size=1 run.eval_interval=0ba events.interval=1ba
        run.max_duration=2ba checkpoint.dir=null compute.strategy=zero3)
    run "(c) a 38M-parameter Llama on 4 ranks, zero3" 0 timeout 600 "$DTRUN" -n 4 run "${big[@]}" run.dir=big
    plan=$(sed -n 's/.*\[rank 0\].*planned for this rank: \([0-9.]*\) MiB of host memory.*/\1/p' <<<"$err")
    peak=$(grep '"type":"metrics"' big/events.jsonl | tail -1 | sed 's/.*"peak_memory_bytes":\([0-9]*\).*/\1/')
    awk -v p="$plan" -v m="$peak" 'BEGIN { exit !(p > 0 && m > 0 && m / 1048576 <= 1.1 * p) }' &&
        ok "(c) ... peaks at $(awk -v m="$peak" 'BEGIN { printf "%.1f", m / 1048576 }') MiB, within 10% of the $plan planned" ||
        not_ok "(c) peak $peak bytes against $plan MiB planned" "$err"
    [ "$(grep -c 'peaked at' <<<"$err")" = 0 ] && ok "(c) ... and says nothing of it" || not_ok "(c) it warned" "$err"
else
    ok "# SKIP the peak is measured in the optimized build with MPI"
fi

# ---- (d) the plan, a node too small, a peak past the plan
run "(d) dtrun check --memory: Llama 3 8B on 8 GPUs of 80 GiB" 0 "$DTRUN" check "$DT_SRCDIR/templates/llama3-8b.yaml" \
    --memory --device-memory 80GiB
has "(d) ... the device's sum, part by part" "$out" "#   device: 29.1 GiB = model state 18131.1 MiB (parameters 1915.0, gradients 3830.0, master 3830.0, optimizer 7660.0, gathered 896.0) + workspace 1011.8 + activations 8890.2 + embedding rows 1024.2 + kernels' scratch 226.0 + CUDA context and cuBLASLt workspace ~544"
has "(d) ... fits, with its margin" "$out" "#   fits a 80.0 GiB GPU: yes, margin 50.9 GiB (64%)"
has "(d) ... the host's, the checkpoint's pinned copy first" "$out" "#   host: 11.5 GiB = offloaded state 0.0 MiB + checkpoint copy 11487.4"
has "(d) ... the node's" "$out" "#   node: 91.8 GiB for its 8 ranks;"
# a kernel on trial's scratch is planned with it: dkv2's dout in 16 bits and lse in base 2 (kernels/cuda/plan.h),
# 16 x 1024 x 768 x 2 bytes and 16 x 12 x 1024 floats at GPT-2's attention and B 16
gpt2=(compute.device=cuda compute.precision=bf16-mixed model.n_layer=1 model.n_embd=768 model.n_head=12
    model.seq_len=1024 data.micro_batch_size=16)
run "(d) dtrun check --memory: GPT-2's attention at B 16 on a GPU" 0 "$DTRUN" check --memory "${gpt2[@]}"
acts=$(grep -o 'activations [0-9.]*' <<<"$out" | cut -d' ' -f2)
DTRUN_CUDA_TRY=dkv2 run "(d) ... with dkv2 on trial" 0 "$DTRUN" check --memory "${gpt2[@]}"
acts2=$(grep -o 'activations [0-9.]*' <<<"$out" | cut -d' ' -f2)
same "(d) ... 24.75 MiB more activations" \
    "$(awk -v a="$acts" -v b="$acts2" 'BEGIN { d = b - a; print ((d > 24.65 && d < 24.85) ? "yes" : a " then " b) }')" yes
# gelu's: the fp32 dinp between the MLP's matmuls is not carved (16 x 1024 x 3072 floats), nor under fp8-mixed
DTRUN_CUDA_TRY=gelu run "(d) ... with gelu on trial" 0 "$DTRUN" check --memory "${gpt2[@]}"
acts3=$(grep -o 'activations [0-9.]*' <<<"$out" | cut -d' ' -f2)
same "(d) ... 192 MiB fewer activations" "$(awk -v a="$acts" -v b="$acts3" 'BEGIN { print a - b }')" 192
DTRUN_CUDA_TRY=gelu run "(d) ... with gelu on trial under fp8-mixed" 0 "$DTRUN" check --memory "${gpt2[@]}" \
    compute.precision=fp8-mixed
fp8acts=$(grep -o 'activations [0-9.]*' <<<"$out" | cut -d' ' -f2)
run "(d) ... fp8-mixed without it" 0 "$DTRUN" check --memory "${gpt2[@]}" compute.precision=fp8-mixed
has "(d) ... the same activations" "$out" "activations $fp8acts "
# the CUDA module's own scratch (kernels/cuda/plan.h's dt_cuda_scratch_bytes) at that shape: the row blocks'
# partials, 1024 x 16 / 64 blocks of 3072 floats (3 MiB); fp8-mixed's codes of fc's input (16384 x 3072 bytes),
# its weight (3072 x 768) and their output gradient's two (2 x 16384 x 3072), 146.25 MiB more; zero3 on 2 ranks
# rounds fc's gathered fp32 weight to bf16 (4.5 MiB more); at width 772 cuBLASLt's 16-byte kernels do not
# run, and fc's output is summed in fp32 first (16384 x 3088 floats); rows2 (on trial) sorts the 16384 rows
# the token table's gradient adds (32 bytes a row)
for c in "3.0|" "149.3|compute.precision=fp8-mixed" "7.5|compute.strategy=zero3 compute.num_devices=2" \
    "196.0|model.n_embd=772 model.n_head=4"; do
    mib=${c%%|*} over=${c#*|}
    run "(d) ... the kernels' scratch: ${over:-bf16-mixed}" 0 "$DTRUN" check --memory "${gpt2[@]}" $over
    has "(d) ... $mib MiB" "$out" "kernels' scratch $mib +"
done
DTRUN_CUDA_TRY=rows2 run "(d) ... the kernels' scratch: rows2 on trial" 0 "$DTRUN" check --memory "${gpt2[@]}"
has "(d) ... 3.5 MiB" "$out" "kernels' scratch 3.5 +"
DTRUN_CUDA_TRY=nosuch run "(d) ... a name it does not know" 0 "$DTRUN" check --memory "${gpt2[@]}"
has "(d) ... is said, and left out" "$err" "dtrun: warning: DTRUN_CUDA_TRY names 'nosuch', no kernel on trial (kernels/cuda/plan.h): the plan leaves it out, and a run refuses it"
has "(d) ... the plan of the kernels in use" "$out" "activations $acts "
run "(d) --device-memory without a size" 2 "$DTRUN" check --memory --device-memory lots
has "(d) ... says what it takes" "$err" "--device-memory 'lots': give a size, as 80GB or 141GiB (a GPU's memory)"
SLURM_MEM_PER_NODE=20 run "(d) a node of 20 MB" 2 "$DTRUN" run model.n_layer=2 run.max_duration=2ba run.dir=small
has "(d) ... refused with the numbers and what to change" "$err" "dtrun: error: this node cannot hold the run: its 1 rank needs 63.2 MiB of host memory (63.2 MiB each: 32.4 MiB of model state, activations and workspace, 0.0 MiB offloaded state, 5.1 MiB checkpoint copy, 1.7 MiB staging, 24.0 MiB the process), and Slurm's --mem (SLURM_MEM_PER_NODE=20 MB) gives 20.0 MiB
  hint: model.activation_checkpointing: true keeps fewer activations; lower data.micro_batch_size, or give the job more nodes or memory (sbatch --mem)"
[ ! -e small ] && ok "(d) ... before anything was made (no run.dir)" || not_ok "(d) small/ exists: $(ls small)"
DTRUN_FAULT=hog@2 run "(d) 256 MiB more than planned from step 2" 0 "$DTRUN" run run.max_duration=3ba checkpoint.dir=null \
    run.dir=hog
if optimized; then
    has "(d) ... the end says the peak passed the plan" "$err" "dtrun: warning: this rank's host memory peaked at "
    if dtrun_has '^comm: mpi'; then
        # a warning's hint says which rank wrote it too (srun without --label interleaves the ranks' lines)
        DTRUN_FAULT=hog@2:1 run "(d) rank 1 of 2 takes 256 MiB more" 0 timeout 300 "$DTRUN" -n 2 run run.max_duration=3ba \
            checkpoint.dir=null run.dir=hog2
        has "(d) ... every line of its warning names it" "$err" "[rank 1] dtrun: warning: this rank's host memory peaked at "
        has "(d) ... the hint too" "$err" "[rank 1]   hint: the plan misses something this run holds"
    fi
else # ASan's own memory is in a sanitizer build's peak, not in the plan
    same "(d) ... a sanitizer build does not compare its peak" "$(grep -c 'peaked at' <<<"$err")" 0
fi

# ---- (e) ZeRO-Offload: the optimizer's state and fp32 master weights on the host, and under zero3 the
# working weights too; the CPU backend runs the GPU's path (copies down and up), so the losses are the
# same bits as without it, and a checkpoint written offloaded resumes without
tiny=(model.n_layer=2 model.n_embd=64 model.n_head=4 model.seq_len=32 run.eval_interval=0ba events.interval=1ba
    run.max_duration=10ba data.micro_batch_size=4 checkpoint.dir=null)
off=(compute.strategy_config.offload_optimizer=cpu)
bitwise() { [ -n "$(losses "$1")" ] && [ "$(losses "$1")" = "$(losses "$2")" ]; }
run "(e) 1 rank, fp32" 0 "$DTRUN" run "${tiny[@]}" run.dir=e0
run "(e) ... offload_optimizer: cpu" 0 "$DTRUN" run "${tiny[@]}" "${off[@]}" run.dir=e1
has "(e) ... says where the state is" "$err" "the optimizer offloaded: its state and fp32 master weights in host memory, stepped by the CPU"
bitwise e1 e0 && ok "(e) ... the same losses, bit for bit" || not_ok "(e) offloaded: $(losses e1 | tail -1), not: $(losses e0 | tail -1)"
run "(e) 1 rank, bf16-mixed" 0 "$DTRUN" run "${tiny[@]}" compute.precision=bf16-mixed run.dir=e2
run "(e) ... zero3 with its weights on the host too (one rank: each unit fetched)" 0 "$DTRUN" run "${tiny[@]}" "${off[@]}" \
    compute.precision=bf16-mixed compute.strategy=zero3 compute.strategy_config.offload_param=cpu run.dir=e3
has "(e) ... says so" "$err" "stage 3 over 1 rank"
bitwise e3 e2 && ok "(e) ... the same losses, bit for bit" || not_ok "(e) offloaded: $(losses e3 | tail -1), not: $(losses e2 | tail -1)"
if dtrun_has '^comm: mpi'; then
    two=(timeout 300 "$DTRUN" -n 2 run "${tiny[@]}")
    cases=("zero2 bf16-mixed" "zero3 bf16-mixed param" "fsdp 32-true")
    [ $full = 1 ] || cases=("zero3 bf16-mixed param")
    for c in "${cases[@]}"; do
        set -- $c
        extra=()
        [ "${3:-}" = param ] && extra=(compute.strategy_config.offload_param=cpu)
        run "(e) 2 ranks, $1, $2" 0 "${two[@]}" compute.strategy=$1 compute.precision=$2 run.dir=n-$1
        run "(e) ... offloaded${3:+, weights too}" 0 "${two[@]}" compute.strategy=$1 compute.precision=$2 "${off[@]}" \
            "${extra[@]}" run.dir=o-$1
        bitwise o-$1 n-$1 && ok "(e) ... the same losses, bit for bit" || not_ok "(e) $1 offloaded: $(losses o-$1 | tail -1), not: $(losses n-$1 | tail -1)"
    done
    # saved offloaded at step 5, resumed without: the offloaded run's losses from step 6 on
    run "(e) zero3 offloaded to step 5, saved" 0 "${two[@]}" compute.strategy=zero3 "${off[@]}" run.max_duration=5ba \
        checkpoint.dir=ckpt checkpoint.interval=5ba run.dir=r
    run "(e) ... resumed to step 10 without offload" 0 "${two[@]}" compute.strategy=zero3 checkpoint.dir=ckpt run.dir=r
    run "(e) ... and offloaded throughout" 0 "${two[@]}" compute.strategy=zero3 "${off[@]}" run.dir=u
    same "(e) ... the same losses after the resume" "$(losses r | tail -5)" "$(losses u | tail -5)"
fi
run "(e) offload_param under zero2" 2 "$DTRUN" check compute.strategy=zero2 compute.num_devices=2 "${off[@]}" \
    compute.strategy_config.offload_param=cpu
has "(e) ... refused, with what to use" "$err" "compute.strategy_config.offload_param: cpu (override 'compute.strategy_config.offload_param=cpu') keeps zero3's weights on the host, fetched to the device unit by unit, and this run is zero2"
run "(e) offload_param without offload_optimizer" 2 "$DTRUN" check compute.strategy=zero3 compute.num_devices=2 \
    compute.strategy_config.offload_param=cpu
has "(e) ... refused" "$err" "hint: set offload_optimizer: cpu too, as DeepSpeed's ZeRO-Infinity configs do"
run "(e) offload with bf16-true" 2 "$DTRUN" check "${off[@]}" compute.precision=bf16-true
has "(e) ... refused: no master weights" "$err" "steps fp32 master weights on the host, and compute.precision bf16-true keeps none"
run "(e) dtrun check --memory: Llama 3 8B offloaded on one GPU of 141 GB" 0 "$DTRUN" check model.preset=llama3-8b \
    compute.device=cuda compute.precision=bf16-mixed model.activation_checkpointing=true model.seq_len=2048 \
    data.micro_batch_size=1 "${off[@]}" checkpoint.dir=null --memory --device-memory 141GB
has "(e) ... the device keeps the 16-bit weights and gradients" "$out" "model state 31529.0 MiB (parameters 15316.5, gradients 15316.5, master 0.0, optimizer 0.0, gathered 896.0)"
has "(e) ... the host the fp32 master weights, the moments, the gradients' and weights' copies" "$out" "#   host: 119.9 GiB = offloaded state 122532.1 MiB"
finish
