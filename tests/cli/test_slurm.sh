#!/usr/bin/env bash
# dtrun on a real Slurm cluster (scripts/testbed: slurmctld and three slurmd
# on this machine, PMIx, fake GPUs): DDP across "nodes" through
# `srun --mpi=pmix` against the 1-rank run, FSDP's HYBRID_SHARD and zero3 against it, the PMIx bootstrap over 3 nodes,
# the device map, what is refused (no PMIx, ranks sharing a GPU, more nodes
# than the allocation), the srun wrapper in a batch script, a rank killed
# under --kill-on-bad-exit, and one run.dir wanted by runs on two nodes (the
# preempted and requeued job: test_slurm_requeue.sh). scripts/test starts the
# testbed and exports SLURM_CONF; without it these tests are skipped.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
need_testbed
# Open MPI's shared-memory transport is confused by two "nodes" on one host (TESTBED.md)
export OMPI_MCA_btl=self,tcp OMP_NUM_THREADS=1
base=(events.interval=1ba model.n_layer=2 model.n_embd=64 model.n_head=4 model.seq_len=32 run.eval_interval=0ba data.micro_batch_size=4
    run.max_duration=50ba)
info() { sed 's/; [0-9]* CPU threads*//; s/; no GPU: [^;]*//; s/Slurm job [0-9]* step [0-9]*/Slurm job J step S/' | sort; }

run "1 rank, accumulation 4" 0 "$DTRUN" run "${base[@]}" compute.gradient_accumulation_steps=4 run.dir=a4
run "srun -N2 -n4 --mpi=pmix" 0 timeout 300 srun -N2 -n4 --ntasks-per-node=2 --mpi=pmix "$DTRUN" "${base[@]}" run.dir=s4
has "4 ranks on 2 nodes" "$err" "; 4 ranks (ddp)"
same "every line the ranks wrote says which rank (log, progress, the end)" "$(grep -vc '^\[rank [0-3]\] ' <<<"$err")" 0
has "progress lines too" "$err" "[rank 0] step 50/50 | loss "
same "50 steps" "$(losses s4 | wc -l)" 50
d=$(maxrel s4 a4)
within "$d" 1e-6 && ok "srun -N2 -n4 traces 1 rank x 4 micro-batches (max relative difference $d)" ||
    not_ok "srun -N2 -n4 vs 1 rank differ by $d"

# FSDP's HYBRID_SHARD: sharded within each node, replicated across the two
run "srun -N2 -n4, fsdp HYBRID_SHARD" 0 timeout 300 srun -N2 -n4 --ntasks-per-node=2 --mpi=pmix "$DTRUN" "${base[@]}" \
    compute.strategy=fsdp compute.strategy_config.sharding_strategy=HYBRID_SHARD run.dir=$TMP/hy
has "sharded within the node" "$err" "strategy: stage 3 (sharded within each node, replicated across nodes) over 2 ranks"
d=$(maxrel hy s4)
within "$d" 1e-6 && ok "HYBRID_SHARD traces ddp across the nodes ($d)" || not_ok "HYBRID_SHARD differs from ddp by $d"
# zero3 runs the code test_zero.sh runs under the sanitizers: across nodes, in the optimized build
if optimized; then
    run "srun -N2 -n4, zero3 over all four" 0 timeout 300 srun -N2 -n4 --ntasks-per-node=2 --mpi=pmix "$DTRUN" \
        "${base[@]}" compute.strategy=zero3 run.dir=$TMP/z3
    d=$(maxrel z3 s4)
    within "$d" 1e-6 && ok "zero3 across two nodes traces ddp ($d)" || not_ok "zero3 across nodes differs by $d"
fi

run "dtrun info on 3 nodes" 0 timeout 60 srun -N3 -n3 --mpi=pmix "$DTRUN" info
sums=$(sed -n 's/.*bootstrap pmix: 128 bytes from rank 0, FNV-1a \([0-9a-f]*\) (.*)$/\1/p' <<<"$out" | sort -u)
[ "$(wc -l <<<"$out")" = 3 ] && [ "$(wc -w <<<"$sums")" = 1 ] &&
    ok "rank 0's 128-byte blob reached every node through PMIx (FNV-1a $sums)" ||
    not_ok "the bootstrap blob differs across ranks" "$out"
if dtrun_has '^cuda: CUDA runtime'; then
    has "... the ncclUniqueId rank 0 drew (NCCL needs no GPU for it)" "$(grep 'rank 0/3' <<<"$out")" \
        "FNV-1a $sums (an ncclUniqueId)"
fi
same "each rank's place" "$(sed 's/;.*//' <<<"$out" | sort)" \
"dtrun info: rank 0/3 (local 0/1, node 0/3) from pmix
dtrun info: rank 1/3 (local 0/1, node 1/3) from pmix
dtrun info: rank 2/3 (local 0/1, node 2/3) from pmix"

run "dtrun info, one fake GPU per task" 0 timeout 60 srun -N2 -n4 --ntasks-per-node=2 --gpus-per-task=1 --mpi=pmix \
    "$DTRUN" info
same "each rank drives its own GPU" "$(sed 's/.*(local \([0-9]\)\/2, node \([0-9]\)\/2).*device \([^;]*\);.*/node \2 local \1: \3/' <<<"$out" | sed 's/, CUDA_VISIBLE.*//' | sort)" \
"node 0 local 0: cuda:0 (GPU 0 of the node
node 0 local 1: cuda:0 (GPU 1 of the node
node 1 local 0: cuda:0 (GPU 0 of the node
node 1 local 1: cuda:0 (GPU 1 of the node"
run "dtrun info, 2 GPUs for the node's 2 tasks" 0 timeout 60 srun -N1 -n2 --gres=gpu:2 --mpi=pmix "$DTRUN" info
has "local rank 1 takes the second GPU" "$out" "rank 1/2 (local 1/2, node 0/1) from pmix; Slurm job"
has "local rank 1: cuda:1" "$(grep 'rank 1/2' <<<"$out")" "device cuda:1 (GPU 1 of the node; CUDA_VISIBLE_DEVICES=0,1, SLURM_STEP_GPUS=0,1)"
run "2 tasks, 1 GPU" 2 timeout 60 srun -N1 -n2 --gres=gpu:1 --mpi=pmix "$DTRUN" info
has "sharing a GPU is refused" "$err" "error: 2 ranks on this node but the step has 1 GPU here (SLURM_GPUS_ON_NODE=1; CUDA_VISIBLE_DEVICES=0, SLURM_STEP_GPUS=0), so ranks would share a GPU"

run "srun -n 2 without PMIx" 4 timeout 60 srun -n 2 --mpi=none "$DTRUN" "${base[@]}" run.dir=np
has "says how to fix it" "$err" "dtrun: error: srun started 2 tasks without PMIx, so they cannot find each other (each would train alone)
  hint: run \`srun --mpi=pmix dtrun ...\`, or set MpiDefault=pmix in slurm.conf"
[ ! -e np/events.jsonl ] && ok "nothing trained" || not_ok "np/events.jsonl exists"

# the srun wrapper, from a batch script of 2 nodes x 1 task
cat >job.sh <<EOS
#!/bin/bash
"$DTRUN" ${base[*]} --dry-run
"$DTRUN" ${base[*]} compute.num_nodes=3 run.dir=$TMP/big; echo "too many nodes: exit \$?"
"$DTRUN" ${base[*]} run.dir=$TMP/w2; echo "wrapper: exit \$?"
EOS
run "sbatch -N2 with dtrun CONFIG inside" 0 timeout 300 sbatch -N2 --ntasks-per-node=1 -o job.out --wait job.sh
job=$(cat job.out)
has "--dry-run prints the srun line" "$job" "srun --mpi=pmix --kill-on-bad-exit=1 --nodes=2 --ntasks-per-node=1 $DTRUN run ${base[*]}"
has "more nodes than the allocation is refused" "$job" "override 'compute.num_nodes=3': error: compute.num_nodes is 3, but the allocation has 2 nodes (Slurm job"
has "... before training" "$job" "too many nodes: exit 2"
[ ! -e big ] && ok "no run directory for the refused config" || not_ok "big/ was created"
has "the wrapper says what it runs" "$job" "running: srun --mpi=pmix --kill-on-bad-exit=1 --nodes=2 --ntasks-per-node=1"
has "the wrapped step trains" "$job" "wrapper: exit 0"
run "1 rank, accumulation 2" 0 "$DTRUN" run "${base[@]}" compute.gradient_accumulation_steps=2 run.dir=a2
d=$(maxrel w2 a2)
within "$d" 1e-6 && ok "the wrapper's 2-node step traces 1 rank x 2 (max relative difference $d)" ||
    not_ok "wrapper vs 1 rank differ by $d"

# kill -9 of one rank under --kill-on-bad-exit ends the step
srun -N2 -n2 --mpi=pmix --kill-on-bad-exit=1 "$DTRUN" "${base[@]}" run.max_duration=100000ba run.dir=$TMP/k \
    >k.out 2>k.err &
step=$!
for _ in $(seq 300); do [ -s k/events.jsonl ] && break; sleep 0.1; done
victim=""
for p in $(pgrep -f "run.dir=$TMP/k"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx SLURM_PROCID=1 && victim=$p
done
signal_and_wait 9 "$victim" "$step"
[ "$rc" != 0 ] && ok "srun exits non-zero ($rc)" || not_ok "srun exit 0 after a rank was killed"
[ "$secs" -le 30 ] && ok "the step ended ${secs} s after the kill" || not_ok "the step took ${secs} s"
has "srun names the rank" "$(cat k.err)" "task 1: Killed"

# one run.dir, two nodes: the second run is refused while the first holds it; after a kill -9 of
# the first, the next start proves it gone and takes over
srun -N1 -w n1 --mpi=pmix "$DTRUN" "${base[@]}" run.max_duration=100000ba run.dir=$TMP/L >l1.out 2>l1.err &
step=$!
for _ in $(seq 300); do [ -s L/events.jsonl ] && break; sleep 0.1; done
holder=$(sed -n 's/^pid=//p' L/dtrun.lock)
job=$(sed -n 's/^slurm_job=//p' L/dtrun.lock)
run "a second run of the same run.dir on node n2" 2 timeout 60 srun -N1 -w n2 --mpi=pmix "$DTRUN" "${base[@]}" \
    run.max_duration=5ba run.dir=$TMP/L
has "is refused, naming the holder's pid, job and node" "$err" \
    "$TMP/L/dtrun.lock: error: run.dir $TMP/L is in use by dtrun pid $holder on host $(hostname) (Slurm job $job, restart 0, node n1), since "
same "n1's run is the only one in its events" "$(grep -c '"type":"run_started"' L/events.jsonl)" 1
kill -9 "$holder"
wait "$step"
run "after a kill -9 on n1, a run on n2" 0 timeout 120 srun -N1 -w n2 --mpi=pmix "$DTRUN" "${base[@]}" \
    run.max_duration=5ba run.dir=$TMP/L
has "takes the lock over with a notice" "$err" "took over the run.dir lock of dtrun pid $holder on host $(hostname) (Slurm job $job, restart 0, node n1)"
[ ! -e L/dtrun.lock ] && ok "and releases it at its end" || not_ok "L/dtrun.lock left"
# a holder on another machine: Slurm is asked whether its job still runs
far_lock() { # DIR JOB
    mkdir -p "$1"
    printf 'host=elsewhere\nboot_id=00000000-0000-0000-0000-000000000000\npid=4242\nstart=1\nslurm_job=%s\nslurm_restart=0\nslurm_node=n9\nsince=2026-01-01T00:00:00Z\n' "$2" >"$1/dtrun.lock"
}
far_lock F "$job"
run "a holder on another machine whose Slurm job has ended" 0 timeout 120 srun -N1 -w n2 --mpi=pmix "$DTRUN" \
    "${base[@]}" run.max_duration=5ba run.dir=$TMP/F
has "is taken over, on Slurm's word" "$err" "took over the run.dir lock of dtrun pid 4242 on host elsewhere (Slurm job $job, restart 0, node n9), since 2026-01-01T00:00:00Z, which is gone (Slurm job $job is "
live=$(sbatch --parsable -N1 -w n3 --wrap "sleep 120")
for _ in $(seq 100); do [ "$(squeue -h -j "$live" -o %T)" = RUNNING ] && break; sleep 0.1; done
far_lock G "$live"
run "a holder on another machine whose Slurm job runs" 2 timeout 120 srun -N1 -w n2 --mpi=pmix "$DTRUN" \
    "${base[@]}" run.max_duration=5ba run.dir=$TMP/G
has "is refused, on Slurm's word" "$err" "is in use by dtrun pid 4242 on host elsewhere (Slurm job $live, restart 0, node n9), since 2026-01-01T00:00:00Z: Slurm job $live is RUNNING"
scancel "$live"

finish
