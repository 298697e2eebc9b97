#!/usr/bin/env bash
# What the webhook costs a training step: a small GPT (steps of a few ms, so that a sender's
# microseconds per event would show) trained with and without events.webhook, the receiver down
# for the first half of each run with it and up for the second (tests/receiver.py on this
# machine), ROUNDS interleaved pairs of STEPS steps at one OpenMP thread (so the receiver does not
# take a training core). Prints each pair's median step times and their ratio, and the median
# ratio. It was tests/cli/test_events.sh's (b), where the machine's load decided it (issue #28).
# usage: bench/webhook.sh [BUILD_DIR] [ROUNDS] [STEPS]   (defaults: build 3 600)
default_rounds=3
. "$(dirname "$0")/common.sh"
steps=${3:-600}
py=/usr/bin/python3
receiver=$OLDPWD/tests/receiver.py # common.sh left the source tree for a scratch directory
small=(checkpoint.dir=null model.n_layer=2 model.n_embd=64 model.n_head=4 model.seq_len=32 data.micro_batch_size=8
    run.eval_interval=0ba run.max_duration="${steps}ba" events.interval=5ba)
free_port() { $py -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
median_step() { sed -n 's/.*"step_ms":\([0-9.e+-]*\).*/\1/p' "$1/events.jsonl" | median; }
half=$((steps / 10 + 1)) # events.jsonl lines at half the run: run_started and steps / 10 metrics
: >ratios
echo "webhook on the L2 C64 T32 B8 shape, $steps steps, $rounds rounds, median step time"
for r in $(seq "$rounds"); do
    OMP_NUM_THREADS=1 "$dtrun" run "${small[@]}" run.dir=off$r >/dev/null 2>&1
    port=$(free_port)
    OMP_NUM_THREADS=1 "$dtrun" run "${small[@]}" run.dir=on$r events.webhook.url="http://127.0.0.1:$port/" \
        >/dev/null 2>&1 &
    job=$!
    for _ in $(seq 1200); do [ "$(wc -l 2>/dev/null <on$r/events.jsonl || echo 0)" -ge $half ] && break; sleep 0.05; done
    $py "$receiver" --port "$port" --out /dev/null &
    rpid=$!
    wait $job
    kill $rpid
    wait $rpid 2>/dev/null || true
    a=$(median_step off$r) b=$(median_step on$r)
    awk -v a="$a" -v b="$b" -v r="$r" 'BEGIN { printf "  round %d: without %.3f ms, with %.3f ms: %.3fx\n", r, a, b, b / a }'
    awk -v a="$a" -v b="$b" 'BEGIN { print b / a }' >>ratios
done
echo "  median ratio $(median <ratios | awk '{ printf "%.3f", $1 }')x (with / without webhook)"
