#!/usr/bin/env bash
# DDP through the local launcher (dtrun -n N, real mpirun and Open MPI):
# DESIGN.md invariant 1 across ranks (N ranks = 1 rank accumulating N
# micro-batches, within 1e-6 relative per step, measured 5e-8), several overlapped buckets,
# accumulation with DDP, and the failure modes: a rank killed with SIGKILL, a
# stalled rank (SIGSTOP) tripping the watchdog, errors every rank hits, a
# config that disagrees with the launcher, Ctrl-C; a killed and a stalled rank
# again through the fault-injection point.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
if ! dtrun_has '^comm: mpi'; then
    echo "1..0 # SKIP this dtrun was built without MPI"
    exit 0
fi
base=(events.interval=1ba model.n_layer=2 model.n_embd=64 model.n_head=4 model.seq_len=32 run.eval_interval=0ba data.micro_batch_size=4
    run.max_duration=50ba)
# the processes of a job whose run.dir is $TMP/$1: the whole path, at the end of the command line,
# so that no other test's job (tests run two at a time: test_zero's run.dir=skip-zero3) matches
job_re() { echo "run.dir=$TMP/$1\$"; }
# the pid of rank $1 of a running job started from directory $2
rank_pid() {
    local p
    for p in $(pgrep -f "$(job_re "$2")" 2>/dev/null); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return; }
    done
}
wait_for_steps() { for _ in $(seq 300); do [ -s "$1/events.jsonl" ] && return; sleep 0.1; done; }
gone() { ! pgrep -f "$(job_re "$1")" >/dev/null; }

run "dtrun -n 2 info" 0 timeout 60 "$DTRUN" -n 2 info
sums=$(sed -n 's/.*bootstrap pmix: 128 bytes from rank 0, FNV-1a \([0-9a-f]*\) (.*)$/\1/p' <<<"$out" | sort -u)
[ "$(grep -c '^\[rank [01]\] dtrun info: rank' <<<"$out")" = 2 ] && [ "$(wc -w <<<"$sums")" = 1 ] &&
    ok "rank 0's 128-byte blob reached rank 1 through mpirun's PMIx (FNV-1a $sums)" ||
    not_ok "the bootstrap blob differs across ranks" "$out"

run "1 rank, accumulation 2" 0 "$DTRUN" run "${base[@]}" compute.gradient_accumulation_steps=2 run.dir=a2
run "dtrun -n 2" 0 timeout 300 "$DTRUN" -n 2 "${base[@]}" run.dir=d2
same "50 steps each" "$(losses a2 | wc -l) $(losses d2 | wc -l)" "50 50"
has "rank 0 reports the world" "$err" "[rank 0] dtrun: training "
has "ddp on 2 ranks" "$err" "; 2 ranks (ddp)"
[ "$(grep -c 'dtrun: training' <<<"$err")" = 1 ] && ok "only rank 0 logs progress" || not_ok "ranks > 0 logged" "$err"
d=$(maxrel d2 a2)
within "$d" 1e-6 && ok "2 ranks trace 1 rank x 2 micro-batches (max relative difference $d)" ||
    not_ok "2 ranks vs 1 rank differ by $d"

run "1 rank, accumulation 4" 0 "$DTRUN" run "${base[@]}" compute.gradient_accumulation_steps=4 run.dir=a4
# 4 ranks run the 2-rank code with other counts: the optimized build traces them (4-rank runs under the
# sanitizers: test_zero.sh)
if optimized; then
    run "dtrun -n 4" 0 timeout 300 "$DTRUN" -n 4 "${base[@]}" run.dir=d4
    d=$(maxrel d4 a4)
    within "$d" 1e-6 && ok "4 ranks trace 1 rank x 4 micro-batches (max relative difference $d)" ||
        not_ok "4 ranks vs 1 rank differ by $d"
fi
if optimized; then # the sanitizer build runs DDP with accumulation in the run with small buckets below
    run "dtrun -n 2, accumulation 2" 0 timeout 300 "$DTRUN" -n 2 "${base[@]}" compute.gradient_accumulation_steps=2 \
        run.dir=d2a2
    d=$(maxrel d2a2 a4)
    within "$d" 1e-6 && ok "2 ranks x 2 micro-batches trace 1 rank x 4 (max relative difference $d)" ||
        not_ok "2x2 vs 1x4 differ by $d"
fi
run "dtrun -n 2, 0.05 MiB buckets" 0 timeout 300 "$DTRUN" -n 2 "${base[@]}" compute.gradient_accumulation_steps=2 \
    compute.strategy_config.bucket_cap_mb=0.05 run.dir=d2b
has "many buckets" "$err" "strategy: stage 0 over 2 ranks: 18 units in 15 pieces of at most 12608 elements"
d=$(maxrel d2b a4)
within "$d" 1e-6 && ok "overlapped buckets trace the same losses (max relative difference $d)" ||
    not_ok "small buckets differ by $d"

run "1 rank MLP, accumulation 2" 0 "$DTRUN" run "$DT_SRCDIR/templates/mlp-regression.yaml" run.max_duration=50ba \
    compute.gradient_accumulation_steps=2 run.dir=m1
run "dtrun -n 2 MLP" 0 timeout 300 "$DTRUN" -n 2 "$DT_SRCDIR/templates/mlp-regression.yaml" run.max_duration=50ba \
    run.dir=m2
d=$(maxrel m2 m1)
within "$d" 1e-6 && ok "MLP on 2 ranks traces 1 rank (max relative difference $d)" || not_ok "MLP differs by $d"

# a rank killed mid-run ends the job, named
"$DTRUN" -n 2 "${base[@]}" run.max_duration=100000ba run.dir="$TMP/k" >k.out 2>k.err &
launcher=$!
wait_for_steps k
signal_and_wait 9 "$(rank_pid 1 k)" "$launcher"
[ "$rc" = 137 ] && ok "kill -9 of rank 1: exit 137" || not_ok "kill -9 of rank 1: exit $rc" "$(cat k.err)"
# the launcher sees a dead rank within a second or two; 30 s is allowed on a loaded machine
[ "$secs" -le 30 ] && ok "the job ended ${secs} s after the kill" || not_ok "the job took ${secs} s to end"
grep -qE '^dtrun: rank 1 was killed by signal 9 \(Killed\) in step [0-9]+; the other ranks were stopped \(exit 137\)$' k.err &&
    ok "the launcher names the rank and its step" || not_ok "the launcher names the rank and its step" "$(tail -3 k.err)"
gone k && ok "no worker left behind" || not_ok "workers still running: $(pgrep -af "$(job_re k)")"

# a stalled rank trips the watchdog, which names the operation and the rank
"$DTRUN" -n 2 "${base[@]}" run.max_duration=100000ba compute.comm_timeout=2 run.dir="$TMP/s" >s.out 2>s.err &
launcher=$!
wait_for_steps s
signal_and_wait STOP "$(rank_pid 1 s)" "$launcher"
[ "$rc" = 4 ] && ok "SIGSTOP of rank 1: exit 4" || not_ok "SIGSTOP of rank 1: exit $rc" "$(cat s.err)"
# the watchdog's 2 s and its question to the stopped rank take 5-7 s; 60 s is allowed on a loaded machine
[ "$secs" -le 60 ] && ok "the watchdog ended the job ${secs} s after the stall" || not_ok "it took ${secs} s"
msg=$(grep 'did not finish' s.err)
# the stall lands in a gradient all-reduce, the embedding rows' all-gather or the metrics' all-reduce
grep -qE '^\[rank 0\] dtrun: rank 0: error: (all-reduce of gradient piece [0-9]+/[0-9]+|all-gather of embedding row(s| gradients)|all-reduce of (metrics|gradient norm)) \(' <<<"$msg" &&
    ok "the watchdog names the operation" || not_ok "the watchdog names the operation" "$msg"
has "the watchdog names the timeout and the step" "$msg" "did not finish within 2 s at step "
has "the watchdog names the stalled rank" "$msg" ": rank 1 did not answer (stopped, hung or dead)"
gone s && ok "the stopped worker was ended too" || { not_ok "workers left: $(pgrep -af "$(job_re s)")"; pkill -9 -f "$(job_re s)"; }

# the same two failures through the fault-injection point (DTRUN_FAULT), at a step chosen in advance
# (the sanitizer build runs them in the fault matrix, test_faults_process.sh)
if optimized; then
    DTRUN_FAULT=kill@3:1 run "rank 1 kills itself at step 3" 137 timeout 120 "$DTRUN" -n 2 "${base[@]}" run.dir=fk
    has "the launcher names the rank and the step" "$err" "dtrun: rank 1 was killed by signal 9 (Killed) in step 3; the other ranks were stopped (exit 137)"
    same "rank 0 got no further than step 2" "$(losses fk | wc -l)" 2
    DTRUN_FAULT=stall@3:1 run "rank 1 stalls before its first collective of step 3" 4 timeout 120 "$DTRUN" -n 2 \
        "${base[@]}" compute.comm_timeout=2 run.dir=fs
    has "rank 0's watchdog names the step and the rank that did not come" "$err" "did not finish within 2 s at step 3: rank 1 has not reached it (it is at request "
fi

# errors every rank sees come out with a rank prefix and the workers' exit code (which rank's line
# comes out first is a race: the first rank to fail ends the others)
run "missing data on every rank" 3 timeout 120 "$DTRUN" -n 2 "${base[@]}" data.train=/nonexistent/x_*.bin run.dir=e
has "rank-prefixed error" "$err" "] data.train: error: '/nonexistent/x_*.bin' matches no file"
run "a config that wants 4 ranks, started with 2" 2 timeout 120 "$DTRUN" -n 2 "${base[@]}" compute.num_devices=4 \
    run.dir=e2
has "the mismatch is named" "$err" "] override 'compute.num_devices=4': error: compute.num_nodes 1 (auto) x compute.num_devices 4 (override 'compute.num_devices=4') = 4 ranks, but mpirun started 2 ranks on 1 node"
run "-n without a number" 2 "$DTRUN" -n x
has "usage" "$err" "dtrun: error: -n takes a number of workers from 1 to 1024, e.g. dtrun -n 2 config.yaml"

# Ctrl-C (SIGINT to the launcher): every worker saves and stops at one step boundary
"$DTRUN" -n 2 "${base[@]}" run.max_duration=100000ba run.dir="$TMP/c" >c.out 2>c.err &
launcher=$!
wait_for_steps c
signal_and_wait INT "$launcher" "$launcher"
[ "$rc" = 75 ] && ok "Ctrl-C: exit 75 (stopped, state saved)" || not_ok "Ctrl-C: exit $rc" "$(cat c.err)"
has "Ctrl-C is reported" "$(cat c.err)" "dtrun: Interrupt: the workers save a checkpoint and stop (Ctrl-C again to stop at once)"
has "rank 0 names the checkpoint" "$(cat c.err)" "[rank 0] dtrun: stopped by SIGUSR1 after step "
sleep 1
gone c && ok "Ctrl-C left no worker" || { not_ok "workers left: $(pgrep -af "$(job_re c)")"; pkill -9 -f "$(job_re c)"; }
finish
