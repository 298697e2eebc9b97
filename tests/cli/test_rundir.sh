#!/usr/bin/env bash
# A run.dir belongs to one run at a time (issue #17): of two runs started at once in one
# directory one trains and the other is refused, naming the holder; the lock goes on every way
# out (the end, an error, SIGTERM, Ctrl-C); a run killed with SIGKILL leaves it, and the next
# start takes it over with a notice; a holder on another machine that cannot be proved gone is
# not taken over; nor is a zombie holder's lock kept. (Across two Slurm nodes: test_slurm.sh.)
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
tiny=(model.n_layer=1 model.n_embd=32 model.n_head=2 model.seq_len=16 data.micro_batch_size=4 run.eval_interval=0ba
    events.interval=1ba)
long=("${tiny[@]}" run.max_duration=1000000ba)
wait_for() { for _ in $(seq 600); do [ -e "$1" ] && return 0; sleep 0.05; done; return 1; }
pid_in() { sed -n 's/^pid=//p' "$1/dtrun.lock"; }

# two at once: exactly one holds the directory
"$DTRUN" run "${long[@]}" run.dir=two >a.out 2>a.err &
a=$!
"$DTRUN" run "${long[@]}" run.dir=two >b.out 2>b.err &
b=$!
# the one refused ends at start; the other trains until stopped
for _ in $(seq 600); do ! kill -0 $a 2>/dev/null || ! kill -0 $b 2>/dev/null && break; sleep 0.05; done
if ! kill -0 $a 2>/dev/null; then loser=$a winner=$b lerr=a.err; else loser=$b winner=$a lerr=b.err; fi
wait $loser
same "two starts at once: one is refused (exit 2)" "$?" 2
wait_for two/dtrun.lock
same "the lock names the one that trains" "$(pid_in two)" "$winner"
has "the refusal names the holder and the way out" "$(cat $lerr)" "two/dtrun.lock: error: run.dir two is in use by dtrun pid $winner on host $(hostname), since "
has "... and what to do" "$(cat $lerr)" "hint: give this run another run.dir, or wait for that run to end; if you know it has ended, remove two/dtrun.lock"
for _ in $(seq 600); do grep -q '"type":"run_started"' two/events.jsonl 2>/dev/null && break; sleep 0.05; done
same "the refused run wrote nothing there" "$(grep -c '"type":"run_started"' two/events.jsonl)" 1
kill -TERM $winner
wait $winner
same "SIGTERM stops the holder, its state saved (exit 75)" "$?" 75
[ ! -e two/dtrun.lock ] && ok "and releases the lock" || not_ok "SIGTERM left two/dtrun.lock"

run "the next run in that directory" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=3ba run.dir=two \
    checkpoint.resume=none
same "finds it free: no notice" "$(grep -c 'took over' <<<"$err")" 0
[ ! -e two/dtrun.lock ] && ok "a run that ends releases it" || not_ok "two/dtrun.lock left after the end"
run "a run that fails (no such data)" 3 "$DTRUN" run "${tiny[@]}" data.train=/nonexistent/x_*.bin run.dir=two
[ ! -e two/dtrun.lock ] && ok "a run that fails releases it" || not_ok "two/dtrun.lock left after a failure"

# SIGKILL: the lock stays; the next start proves the holder gone and takes it over
"$DTRUN" run "${long[@]}" run.dir=k >k.out 2>k.err &
k=$!
wait_for k/events.jsonl
kill -9 $k
wait $k 2>/dev/null
same "kill -9 leaves the lock" "$(pid_in k)" "$k"
run "the run after a kill -9" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=3ba run.dir=k
has "takes the lock over with a notice" "$err" "dtrun: warning: k/dtrun.lock: took over the run.dir lock of dtrun pid $k on host $(hostname), since "
has "... saying why the holder is gone" "$err" "which is gone (no process $k runs on this machine)"
[ ! -e k/dtrun.lock ] && ok "and releases it at its end" || not_ok "k/dtrun.lock left"

# a holder killed but not yet reaped by its parent (a zombie) holds nothing any more
/usr/bin/python3 -c '
import os, signal, subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while not os.path.exists("z/events.jsonl"): time.sleep(0.05)
os.kill(p.pid, signal.SIGKILL)
print(p.pid, flush=True)
time.sleep(120)' "$DTRUN" run "${long[@]}" run.dir=z >z.pid &
zp=$!
for _ in $(seq 600); do [ -s z.pid ] && break; sleep 0.05; done
z=$(cat z.pid)
for _ in $(seq 100); do [ "$(awk '{print $3}' /proc/$z/stat 2>/dev/null)" = Z ] && break; sleep 0.05; done
same "the killed holder is a zombie" "$(awk '{print $3}' /proc/$z/stat)" Z
run "the run after it" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=3ba run.dir=z
has "takes the lock over" "$err" "which is gone (no process $z runs on this machine)"
kill $zp

# Ctrl-C of a run in the foreground
"$DTRUN" run "${long[@]}" run.dir=c >c.out 2>c.err &
c=$!
wait_for c/events.jsonl
kill -INT $c 2>/dev/null
kill -TERM $c # a background job ignores SIGINT; SIGTERM is what a launcher sends after it
wait $c
[ ! -e c/dtrun.lock ] && ok "a stopped run releases the lock" || not_ok "c/dtrun.lock left after SIGTERM"

# a holder on another machine, outside Slurm: whether it runs cannot be known, so it is not taken
mkdir far
printf 'host=elsewhere\nboot_id=00000000-0000-0000-0000-000000000000\npid=4242\nstart=1\nslurm_job=\nslurm_restart=0\nslurm_node=\nsince=2026-01-01T00:00:00Z\n' >far/dtrun.lock
run "a holder on another machine" 2 "$DTRUN" run "${tiny[@]}" run.max_duration=3ba run.dir=far
same "is named, and not taken over" "$(head -1 <<<"$err")" "far/dtrun.lock: error: run.dir far is in use by dtrun pid 4242 on host elsewhere, since 2026-01-01T00:00:00Z: it ran on another machine and outside Slurm, so whether it still runs cannot be known here"
same "the lock is still the other machine's" "$(pid_in far)" 4242

# dtrun events flush respects the lock too: a live run sends its own spool
"$DTRUN" run "${long[@]}" run.dir=f >f.out 2>f.err &
f=$!
wait_for f/events.jsonl
run "events flush while the run is on" 2 "$DTRUN" events flush f events.webhook.url=http://127.0.0.1:9/
has "is refused, naming the run" "$err" "f/dtrun.lock: error: run.dir f is in use by dtrun pid $f on host "
kill -TERM $f
wait $f

if dtrun_has '^comm: mpi'; then
    "$DTRUN" -n 2 run "${long[@]}" run.dir=d >d.out 2>d.err &
    d=$!
    wait_for d/events.jsonl
    run "dtrun -n 2 into a directory a 2-rank run holds" 2 timeout 120 "$DTRUN" -n 2 run "${tiny[@]}" run.dir=d
    has "rank 0 says who holds it" "$err" "[rank 0] d/dtrun.lock: error: run.dir d is in use by dtrun pid "
    same "the running job's run_started is the only one" "$(grep -c '"type":"run_started"' d/events.jsonl)" 1
    kill -INT $d
    wait $d
    sleep 1
    [ ! -e d/dtrun.lock ] && ok "Ctrl-C of the 2-rank run releases the lock" || not_ok "d/dtrun.lock left after Ctrl-C"
fi
finish
