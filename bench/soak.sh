#!/usr/bin/env bash
# Soak: the tiny model on 2 ranks as a --requeue batch job on the Slurm testbed for MINUTES minutes,
# its webhook receiver failing a random half of its requests (tests/receiver.py --mode flaky:0.5), and
# a random rank SIGKILLed every few minutes (the gap is 4 to 8 s per minute of soak: 2 to 4 minutes
# in 30); each kill fails the step and the batch script requeues the job (scontrol requeue), which
# resumes from its last checkpoint. Beside it, the same run
# undisturbed. At the end: the soak's final loss against the undisturbed run's (bitwise), every event
# of the soak's events.jsonl at the receiver (by id), and each rank's RSS and open file descriptors
# sampled every 10 s of every life (first sample after 30 s against the last).
# usage: bench/soak.sh [BUILD_DIR] [MINUTES] [STEPS]   (defaults: build 30, and the steps that fill the
# minutes at the rate a short run measures first, alone: on a busier machine the job takes longer, and
# the kills go on until it ends); starts and stops its own testbed
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=${1:-build}
case $build in /*) ;; *) build=$PWD/$build ;; esac
minutes=${2:-30}
DTRUN=$build/src/dtrun
PY=/usr/bin/python3
tmp=$(mktemp -d /tmp/dtrun-soak.XXXXXX)
tb=$tmp/testbed
cleanup() {
    set +e # every step, whichever fails (set -e ended this at a receiver already gone, leaving the testbed up)
    [ -n "${job:-}" ] && scancel "$job" 2>/dev/null
    kill "${rpid:-}" 2>/dev/null
    scripts/testbed stop "$tb" >/dev/null 2>&1
}
trap cleanup EXIT
scripts/testbed start "$tb" >/dev/null
# one thread a rank: two runs of two ranks share the machine, and spinning OpenMP workers on
# oversubscribed cores slow everything by orders of magnitude
export SLURM_CONF=$tb/slurm.conf OMPI_MCA_btl=self,tcp DTRUN_SITE_CONFIG= OMP_NUM_THREADS=1
cd "$tmp"

# the step rate of this shape here, from a short run, sets the steps that fill MINUTES with both runs side by side
model=(model.n_layer=2 model.n_embd=64 model.n_head=4 model.seq_len=32 data.micro_batch_size=4 run.eval_interval=0ba)
if ! srun -N2 -n2 --mpi=pmix "$DTRUN" "${model[@]}" run.max_duration=2000ba events.interval=1000ba run.dir=cal \
    >cal.out 2>&1; then
    tail -20 cal.out >&2
    echo "soak.sh: the calibration run failed (above)" >&2
    exit 1
fi
rate=$($PY -c "import json; e=[json.loads(l) for l in open('cal/events.jsonl')]; f=[x for x in e if x['type']=='run_finished'][0]; print(f['steps'] / f['seconds'])")
steps=${3:-$($PY -c "print(max(2000, int($rate * $minutes * 60 * 0.4) // 1000 * 1000))")}
run=("${model[@]}" run.max_duration="${steps}"ba events.interval=1000ba checkpoint.interval=2000ba)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $minutes minutes; $steps steps" \
    "(calibrated at $(printf %.0f "$rate") steps/s alone)"

$PY "$src/tests/receiver.py" --port-file port --mode flaky:0.5 --out hook.jsonl &
rpid=$!
for _ in $(seq 200); do [ -s port ] && break; sleep 0.05; done
port=$(cat port)

timeout $((minutes * 60 * 3)) srun -N2 -n2 --mpi=pmix "$DTRUN" "${run[@]}" run.dir=$tmp/U >u.out 2>&1 &
undisturbed=$!
cat >soak.sh <<EOS
#!/bin/bash
srun --mpi=pmix --kill-on-bad-exit=1 "$DTRUN" ${run[*]} run.dir=$tmp/S events.webhook.url=http://127.0.0.1:$port/ ||
    scontrol requeue \$SLURM_JOB_ID
EOS
job=$(sbatch --parsable -N2 --ntasks-per-node=1 --requeue --open-mode=append -o s.out soak.sh)

# a kill every gap to 2 gap seconds: every 2-4 minutes in a 30-minute soak
gap=$((minutes * 4))
# the soak's rank processes now: "pid rank" lines
ranks() {
    for p in $(pgrep -x dtrun); do
        # a process may end between pgrep and here: its /proc files are gone (the braces take the
        # redirection's own error)
        { tr '\0' '\n' </proc/$p/cmdline; } 2>/dev/null | grep -qx "run.dir=$tmp/S" || continue
        r=$({ tr '\0' '\n' </proc/$p/environ; } 2>/dev/null | sed -n 's/^SLURM_PROCID=//p') # srun's tasks
        [ -n "$r" ] && echo "$p $r"
    done
}
next_kill=$((SECONDS + gap + RANDOM % (gap + 1)))
kills=0 pending=0 state=
: >samples
while :; do
    st=$(scontrol show job -o "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 || true)
    case "$st" in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
        state=$st && break ;;
    PENDING)
        # a requeued job waits ~120 s for its begin time: start it once it has been pending 3 s
        pending=$((pending + 1))
        [ $pending = 3 ] && scontrol update jobid="$job" starttime=now 2>/dev/null || true ;;
    *) pending=0 ;;
    esac
    if [ $((SECONDS % 10)) = 0 ]; then
        while read -r p r; do
            rss=$(awk '/^VmRSS:/ { print $2 }' /proc/$p/status 2>/dev/null) # "VmRSS:<tab> N kB"
            fds=$(ls /proc/$p/fd 2>/dev/null | wc -l)
            start=$(stat -c %Y /proc/$p 2>/dev/null) || continue
            [ -n "$rss" ] && echo "$p $r $(($(date +%s) - start)) $rss $fds" >>samples
        done < <(ranks)
    fi
    if [ "$st" = RUNNING ] && [ $SECONDS -ge $next_kill ]; then
        victim=$(ranks | shuf -n1 || true)
        if [ -n "$victim" ]; then
            kill -9 "${victim%% *}" 2>/dev/null && kills=$((kills + 1)) &&
                echo "$(date +%T) SIGKILL rank ${victim##* } (pid ${victim%% *})"
        fi
        next_kill=$((SECONDS + gap + RANDOM % (gap + 1)))
    fi
    sleep 1
done
wait "$undisturbed" || true

echo "job $job: $state after $kills kills; $(grep -c '"type":"run_started"' S/events.jsonl) lives" \
    "(restart_count up to $(grep -o '"restart_count":[0-9]*' S/events.jsonl | cut -d: -f2 | sort -n | tail -1))"
echo "final loss: $($PY "$src/tests/ckpt_check.py" compare S/events.jsonl U/events.jsonl "$steps" "$steps")" \
    "against the undisturbed run"
# the receiver has had time to take what the last life's spool resent before it ended
sleep 5
$PY - hook.jsonl S/events.jsonl <<'EOF'
import json, sys
got = {json.loads(l).get("id") for l in open(sys.argv[1])}
wrote = [json.loads(l)["id"] for l in open(sys.argv[2])]
missing = [i for i in wrote if i not in got]
print("events: %d written, %d at the receiver, %d missing" % (len(wrote), len(got), len(missing)))
EOF
echo "receiver: $(curl -s "http://127.0.0.1:$port/_stats")"
# per life (pid): RSS and fds at the first sample past 30 s of age, and at the last
$PY - samples <<'EOF'
import sys
lives = {}
for l in open(sys.argv[1]):
    pid, rank, age, rss, fds = l.split()
    if int(age) >= 30:
        lives.setdefault(pid, []).append((int(rank), int(age), int(rss), int(fds)))
worst = 0
for pid, s in sorted(lives.items(), key=lambda kv: kv[1][0][1]):
    r, a0, rss0, fd0 = s[0]
    _, a1, rss1, fd1 = s[-1]
    worst = max(worst, rss1 - rss0)
    print("rank %d pid %s: %4d s -> %4d s of life: RSS %d -> %d kB, fds %d -> %d" % (r, pid, a0, a1, rss0, rss1, fd0, fd1))
print("largest RSS growth within a life: %d kB" % worst)
EOF
