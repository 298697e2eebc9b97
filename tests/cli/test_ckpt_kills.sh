#!/usr/bin/env bash
# Checkpoints under kill -9 at random moments (issue #12): a 2-rank DDP run killed 20 times (the
# whole job or one rank, a random moment after each life's own save, and every fifth halfway
# through a save), each restart resuming from the newest valid checkpoint, ends with the
# uninterrupted run's loss, bitwise, and leaves nothing half-written.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
if ! dtrun_has '^comm: mpi'; then
    echo "1..0 # SKIP this dtrun was built without MPI"
    exit 0
fi
PY=/usr/bin/python3
export OMP_NUM_THREADS=1 # bitwise comparisons: the same threads in every life
tiny=(model.n_layer=2 model.n_embd=32 model.n_head=2 model.seq_len=16 data.micro_batch_size=4 run.eval_interval=0ba
    events.interval=1ba scheduler.type=constant optimizer.lr=3e-3)
compare() { $PY "$DT_SRCDIR/tests/ckpt_check.py" compare "$1/events.jsonl" "$2/events.jsonl" "$3" "$4"; }
if ! optimized; then
    echo "1..0 # SKIP the kill loop runs in the optimized build (under the sanitizers a kill mid-save and the resumes after kills run in the fault matrix and test_ckpt.sh)"
    exit 0
fi

kills=20 steps=6000
loop=("${tiny[@]}" compute.strategy=ddp data.micro_batch_size=2 run.max_duration=${steps}ba checkpoint.interval=20ba
    events.interval=100ba)
run "ddp on 2 ranks, uninterrupted" 0 timeout 300 "$DTRUN" -n 2 run "${loop[@]}" run.dir=loop-u
resumed=0 bad=0
for i in $(seq $kills); do
    latest=$(sed 's/step-0*//' loop/ckpt/latest 2>/dev/null)
    fault=
    [ $((i % 5)) = 0 ] && fault=kill_save@$((${latest:-0} + 20)):$((i % 2)) # halfway through its next save
    DTRUN_FAULT=$fault timeout 300 "$DTRUN" -n 2 run "${loop[@]}" run.dir=loop >life.out 2>life.err &
    job=$!
    if [ -z "$fault" ]; then
        # the kill comes a random moment after this life committed a checkpoint of its own, so
        # every life makes progress however loaded the machine is (that takes a second or two here,
        # a minute or more on a loaded machine: mpirun, MPI_Init and 20 steps; 300 s at most)
        deadline=$((SECONDS + 300))
        while [ $SECONDS -lt $deadline ] && kill -0 $job 2>/dev/null; do
            [ "$(cat loop/ckpt/latest 2>/dev/null)" != "${latest:+step-$(printf %08d "$latest")}" ] && break
            sleep 0.05
        done
        sleep "0.$((RANDOM % 3))$((RANDOM % 10))"
        if [ $((i % 2)) = 0 ]; then
            pkill -9 -f "run.dir=loop\$" # the whole job: launcher, mpirun, ranks
        else
            pkill -9 -n -f "dtrun run .*run.dir=loop\$" # the newest rank
        fi
    fi
    wait $job
    rc=$?
    # the next life starts once this one's processes are gone (a killed job's ranks may take a while on
    # a loaded machine), as a requeued job's would: else it would find run.dir still held
    deadline=$((SECONDS + 300))
    while [ $SECONDS -lt $deadline ] && pgrep -f "run.dir=loop\$" >/dev/null; do sleep 0.1; done
    if grep -q "resuming from loop/ckpt/step-" life.err; then
        resumed=$((resumed + 1))
    elif [ "$i" -gt 1 ]; then
        echo "# life $i (exit $rc) did not resume:"
        grep -v 'step [0-9]*/' life.err | tail -5 | sed 's/^/#   /'
    fi
    if grep -q "skipping\|checkpoint error" life.err || [ $rc = 5 ]; then
        bad=$((bad + 1))
        grep -h "skipping\|error:" life.err | head -3
    fi
done
run "after $kills kills, the same command to the end" 0 timeout 300 "$DTRUN" -n 2 run "${loop[@]}" run.dir=loop
# every life but the first found the checkpoint of the one before it
same "every restart resumed from a checkpoint" "$resumed" $((kills - 1))
same "no restart met a corrupt checkpoint" "$bad" 0
same "the final loss is the uninterrupted run's, bitwise" "$(compare loop loop-u $steps $steps)" bitwise
left=$(find loop/ckpt -name '*.tmp' -o -name '*.partial-*' | wc -l)
same "nothing half-written is left" "$left" 0
finish
