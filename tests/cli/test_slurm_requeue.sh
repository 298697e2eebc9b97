#!/usr/bin/env bash
# Preemption on the Slurm testbed (scripts/testbed, as test_slurm.sh): a 2-node --requeue job with
# --time=1 --signal=USR1@50 is signalled (or, failing that, SIGTERMed at its limit) while it
# trains; every rank stops at one step boundary and saves, rank 0 requeues the job, the requeued
# job resumes by itself (restart_count 1) and ends with the uninterrupted run's loss, bitwise, and
# the webhook sees it all. Slurm signals each start of the job 10-40 s into it (it checks time
# limits every 30 s). The first run's ranks are stragglers (DTRUN_FAULT=slow: 10 ms a step), so its
# 6000 small steps (75 s) outlast that without keeping two cores busy. The requeued run goes at full
# speed (about 13 s alone) and so usually ends before its own signal: slowed too, every later run
# was signalled and requeued again, and one CI run timed out after four requeues. A loaded machine
# may still requeue it more than once; the test allows that. In the optimized build only: the job
# runs a minute or more.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
need_testbed
if ! optimized; then
    echo "1..0 # SKIP preemption and requeue: in the optimized build only (the job runs for minutes)"
    exit 0
fi
# Open MPI's shared-memory transport is confused by two "nodes" on one host (TESTBED.md)
export OMPI_MCA_btl=self,tcp OMP_NUM_THREADS=1
. "$DT_SRCDIR/tests/cli/receiver.sh"
receiver ok --out hook.jsonl
pre=(events.interval=1000ba model.n_layer=2 model.n_embd=64 model.n_head=4 model.seq_len=32 run.eval_interval=0ba
    data.micro_batch_size=4 run.max_duration=6000ba checkpoint.interval=1000ba)
# the same world outside the job, meanwhile: the run it must end like
timeout 600 srun -N2 -n2 --mpi=pmix "$DTRUN" "${pre[@]}" run.dir=$TMP/PU >pu.out 2>pu.err &
uninterrupted=$!
# 6000 steps of at least 10 ms: a minute or more, longer than the job's limit; the requeued run
# (SLURM_RESTART_COUNT set) is not slowed
cat >pre.sh <<EOS
#!/bin/bash
[ "\${SLURM_RESTART_COUNT:-0}" = 0 ] && export DTRUN_FAULT=slow@1:0,slow@1:1
srun --mpi=pmix "$DTRUN" ${pre[*]} run.dir=$TMP/P events.webhook.url=http://127.0.0.1:$port/
EOS
job=$(sbatch --parsable -N2 --ntasks-per-node=1 --time=1 --signal=USR1@50 --requeue --open-mode=append \
    -o pre.out pre.sh)
# a requeued job waits ~120 s for its begin time: start it 3 s after it is pending again (sooner,
# slurmd may still hold the last start's revoked credential: "Job credential revoked"); give up
# after 10 minutes
# scontrol, not squeue: on a loaded machine either may time out, and an empty answer must not
# read as "the job has ended"
state=running pending=0 seen=
for _ in $(seq 1200); do
    st=$(scontrol show job -o "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    [ "$st" != "${seen##* }" ] && seen="$seen $st"
    case "$st" in
    '') sleep 0.5; continue ;;
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | PREEMPTED | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
        state= && break ;;
    esac
    if [ "$st" = PENDING ] && grep -q '"type":"preempted"' P/events.jsonl 2>/dev/null; then
        pending=$((pending + 1))
        [ $pending = 6 ] && scontrol update jobid="$job" starttime=now 2>/dev/null
    else
        pending=0
    fi
    sleep 0.5
done
wait $uninterrupted
same "the job ended" "$state" ""
echo "# the job's states:$seen"
# a job that did not complete: what its runs said, for the log (the runs' rank-0 lines and Slurm's)
scontrol show job -o "$job" | grep -q 'JobState=COMPLETED' ||
    grep -E '^\[rank 0\] dtrun: (error|warning|resuming|job|stopped|checkpoint saved|done)|^srun|^slurmstepd' pre.out |
    tail -n 40 | sed 's/^/# pre.out: /'
same "... COMPLETED" "$(scontrol show job -o "$job" | grep -o 'JobState=[A-Z_]*')" JobState=COMPLETED
has "a signal stopped it at a step boundary, saved" "$(cat pre.out)" "[rank 0] dtrun: checkpoint saved: $TMP/P/ckpt/step-"
has "... and requeued it" "$(cat pre.out)" "[rank 0] dtrun: job $job requeued: it resumes from $TMP/P/ckpt/step-"
has "the requeued job resumed from it" "$(cat pre.out)" "[rank 0] dtrun: resuming from $TMP/P/ckpt/step-"
has "... restart_count 1 in its run_started" "$(grep '"type":"run_started"' P/events.jsonl | sed -n 2p)" \
    '"restart_count":1,'
same "... with the run id of the first start" "$(grep -o '"type":"run_started","time":"[^"]*","run_id":"[0-9a-f]*"' P/events.jsonl | sed 's/.*run_id//' | sort -u | wc -l)" 1
same "the final loss is the uninterrupted run's" "$($PY "$DT_SRCDIR/tests/ckpt_check.py" compare P/events.jsonl PU/events.jsonl 6000 6000)" bitwise
stop_receiver
types=$($PY -c "import json, sys; print(' '.join(sorted({json.loads(l).get('type', '?') for l in open('hook.jsonl')})))")
has "the webhook saw checkpoint_saved" "$types" checkpoint_saved
has "... preempted" "$types" preempted
has "... and run_finished" "$types" run_finished
finish
