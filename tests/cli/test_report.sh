#!/usr/bin/env bash
# dtrun report (issue #31): the HTML page of real short runs. (a) a run with every metric (the op
# breakdown on, a peak rate for MFU): the page is well-formed XHTML with no script and nothing to
# fetch, has every chart, and headless Chromium renders it with marks in each chart's plot box
# (checked on the screenshot; the check refuses the same page with one chart's marks taken out);
# (b) a run preempted by SIGTERM and resumed: one curve, its two lives marked; (c) two runs
# compared: only the config keys that differ; (d) a torn last line: a page, with a note; (e) a
# webhook receiver's log with other ranks' task_failed records: on the timeline; (f) bad
# input: a run.dir without events, an events file without records, an unwritable --out: the exact
# error, a non-zero exit and no file left; (g) 100k metrics records (written by awk, not trained;
# 10k under the sanitizers): a page under 1 MB; (h) a step-time axis scaled to the steady steps, each
# life's first step marked above it; an fp32 run's constant loss scale left out with a note, a
# moving one drawn.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
PY=/usr/bin/python3
CHECK="$PY $DT_SRCDIR/tests/cli/report_check.py"
tiny=(model.n_layer=1 model.n_embd=32 model.n_head=2 model.seq_len=16 data.micro_batch_size=4 events.interval=2ba
    run.eval_interval=10ba checkpoint.interval=10ba)

# screenshot PAGE PNG: headless Chromium renders the page, tall enough for every chart; fails (with
# Chromium's words) when it did not write the PNG or the page logged to the console
screenshot() {
    local h
    h=$(awk '/^chart-/ { if ($3 + $5 > h) h = $3 + $5 } END { print h + 40 }' "$1")
    timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
        --enable-logging=stderr --v=0 --window-size=1280,"$h" --screenshot="$2" "file://$TMP/$1" >chromium.log 2>&1
    if [ ! -s "$2" ] || grep -q ':CONSOLE' chromium.log; then
        grep -v -e dbus -e 'unexpected operator' chromium.log | tail -n 5
        return 1
    fi
}
# chart_of PAGE ID: the <svg> of one chart
chart_of() { sed -n "/<svg [^>]*id=\"chart-$2\"/,/<\/svg>/p" "$1"; }

# ---- (a) a run with every metric
run "(a) 40 steps, the op breakdown on, a peak rate" 0 "$DTRUN" run "${tiny[@]}" run.dir=a run.name=a \
    run.max_duration=40ba events.wall_clock_breakdown=true events.peak_tflops=0.01
run "(a) dtrun report a" 0 "$DTRUN" report a
same "(a) ... says where the page is" "$(sed 's/ ([0-9]* KiB)$//' <<<"$out")" "dtrun: report of 1 run written to a/report.html"
same "(a) no temporary file left" "$(ls -A a | grep -v -x -e ckpt -e config.yaml -e events.jsonl)" "report.html"
same "(a) well-formed, nothing to fetch, every chart" "$($CHECK page a/report.html)" \
    "chart-loss-step chart-loss-tokens chart-timeline chart-lr chart-throughput chart-mfu chart-grad-norm \
chart-step-time chart-memory chart-phases-1 chart-ops-1"
has "(a) an fp32 run's loss scale left out, saying why" "$(cat a/report.html)" \
    "Loss scale: not drawn: 1 at every step (only 16-mixed scales its loss, and then the scale moves)"
has "(a) the best possible loss" "$(chart_of a/report.html loss-step)" ">best possible "
has "(a) the validation loss" "$(chart_of a/report.html loss-step)" ">validation</text>"
has "(a) axes say their units" "$(chart_of a/report.html loss-step)" ">loss (nats, log scale)</text>"
has "(a) the phases stacked" "$(chart_of a/report.html phases-1)" ">optimizer</text>"
has "(a) the end in the timeline" "$(chart_of a/report.html timeline)" "<title>run finished: 40 steps"
has "(a) the resolved config" "$(cat a/report.html)" "max_duration: 40ba"
# rendered in the optimized build with every dependency (the sanitizer and minimal builds write the
# same page; Chromium is most of this test's time)
if ! optimized || dtrun_has "^configured with: .*'--without-"; then
    ok "# SKIP the pages are rendered in the optimized build with every dependency"
    chromium=0
elif command -v chromium >/dev/null && $PY -c 'import PIL' 2>/dev/null; then
    if screenshot a/report.html a.png; then ok "(a) Chromium renders the page, no console message"
    else not_ok "(a) Chromium did not render the page"; fi
    same "(a) every chart has marks on the screenshot" "$($CHECK marks a/report.html a.png)" "11 charts, each with marks"
    # the check itself: one chart with its marks taken out (frame, axes, legend kept) is named
    $CHECK blank a/report.html chart-lr a/blank.html
    screenshot a/blank.html blank.png
    same "(a) ... and names a chart without" "$($CHECK marks a/blank.html blank.png)" \
        "chart-lr: no marks (0 colored pixels in its plot box)"
    chromium=1
else
    ok "# SKIP no chromium or python3-pil (scripts/setup-deps installs them): pages not rendered"
    chromium=0
fi

# ---- (b) preempted (SIGTERM) and resumed: one curve, two lives. The first life cannot end before
# the signal whatever the load (as test_ckpt.sh's); the second goes 30 steps past where it stopped.
DTRUN_FAULT=slow@1 "$DTRUN" run "${tiny[@]}" run.dir=b run.name=b run.max_duration=100000ba >b.out 2>b.err &
job=$!
for _ in $(seq 600); do grep -q '"step":10,' b/events.jsonl 2>/dev/null && break; sleep 0.05; done
signal_and_wait TERM $job $job
same "(b) stopped by SIGTERM" "$rc" 75
end=$(($(sed -n 's/.*stopped by SIGTERM after step \([0-9]*\);.*/\1/p' b.err) + 30))
run "(b) resumed to the end" 0 "$DTRUN" run "${tiny[@]}" run.dir=b run.name=b run.max_duration=${end}ba
from=$(grep -o '"resumed":{[^}]*}' b/events.jsonl | sed 's/.*"step":\([0-9]*\).*/\1/')
run "(b) dtrun report b" 0 "$DTRUN" report b
page=$(cat b/report.html)
has "(b) two lives" "$page" "to step $end, 2 lives; run finished: $end steps"
has "(b) ... the first preempted" "$page" "preempted by SIGTERM at step $from, its state saved"
has "(b) ... the second resumed where it stopped" "$(chart_of b/report.html timeline)" \
    "life 2 started (restart 0), resumed from step $from"
has "(b) the resume marked on the loss curve" "$(chart_of b/report.html loss-step)" ">life 2</text>"
same "(b) one training curve" "$(chart_of b/report.html loss-step | grep -c 'fill="none" stroke="#1f77b4"')" 1
same "(b) its steps ascend" "$(chart_of b/report.html loss-step | grep 'fill="none" stroke="#1f77b4"' |
    sed 's/.* d="M//; s/".*//' | tr ' ' '\n' | awk 'NR % 2 == 1 { if ($1 <= last) bad++; last = $1 } END { print bad + 0 }')" 0
if [ "$chromium" = 1 ]; then
    screenshot b/report.html b.png && same "(b) every chart has marks" "$($CHECK marks b/report.html b.png)" \
        "8 charts, each with marks"
fi

# ---- (c) two runs compared: the keys that differ, a legend naming each
run "(c) a second run, another learning rate" 0 "$DTRUN" run "${tiny[@]}" run.dir=c run.name=c \
    run.max_duration=40ba events.wall_clock_breakdown=true events.peak_tflops=0.01 optimizer.lr=1e-3
run "(c) dtrun report a c --out cmp.html" 0 "$DTRUN" report a c --out cmp.html
same "(c) only the keys that differ" "$(sed -n '/<table id="config-diff">/,/<\/table>/p' cmp.html |
    sed -n 's/^<tr><td>\([^<]*\)<\/td>.*/\1/p' | tr '\n' ' ')" "run.name run.dir optimizer.lr scheduler.warmup_max_lr "
has "(c) ... with each run's value" "$(cat cmp.html)" "<tr><td>optimizer.lr</td><td>0.003</td><td>0.001</td></tr>"
has "(c) legends name the runs" "$(chart_of cmp.html loss-step)" ">c validation</text>"
same "(c) the page" "$($CHECK page cmp.html | wc -w)" 13
if [ "$chromium" = 1 ]; then
    screenshot cmp.html cmp.png && same "(c) every chart has marks" "$($CHECK marks cmp.html cmp.png)" \
        "13 charts, each with marks"
fi

# ---- (d) killed mid-write: the torn last line skipped, with a note on the page
mkdir d
cp a/events.jsonl a/config.yaml d/
truncate -s -40 d/events.jsonl
run "(d) a torn last line" 0 "$DTRUN" report d
has "(d) ... noted on the page" "$(cat d/report.html)" \
    "d/events.jsonl:$(wc -l <d/events.jsonl | awk '{ print $1 + 1 }'): the last line is torn (the run was killed while writing it): skipped"

# ---- (e) a webhook receiver's log holds every rank's records: the SPANK plugin's task_failed for
# ranks 3 (a signal) and 2 (an exit status), records without a step, placed where the run was
mkdir g
tf='{"schema_version":1,"id":"slurm-4242-0.0-t%d","type":"task_failed","time":"2026-11-27T10:00:00.000Z","run_name":"a","job_id":"4242","step_id":"0","restart_count":0,"node":"node2","node_rank":1,"rank":%d,"local_rank":1,"pid":1234,"signal":%s,"signal_number":%s,"exit_status":%s,"core_dumped":false,"oom_killed":%s}\n'
{
    cat a/events.jsonl
    printf "$tf" 3 3 '"SIGKILL"' 9 null true
    printf "$tf" 2 2 null null 1 false
} >g/received.jsonl
run "(e) a receiver's log" 0 "$DTRUN" report g/received.jsonl --out g.html
has "(e) a task killed, on the timeline" "$(chart_of g.html timeline)" "task failed: rank 3 on node2, SIGKILL (OOM killed)"
has "(e) a task that exited, on the timeline" "$(cat g.html)" "task failed: rank 2 on node2, exit status 1"

# ---- (f) bad input: one clear error, a non-zero exit, no page
mkdir e
run "(f) a run.dir without events" 2 "$DTRUN" report e
same "(f) ... says so, and what to give" "$err" "e: error: no events here (no events.jsonl), so there is nothing to draw
  hint: give the run.dir of a run that has started (a run with events.jsonl: null keeps none)"
same "(f) ... no file left" "$(ls -A e; ls -A | grep -c report)" 0
printf 'garbage\n' >e/events.jsonl
run "(f) an events.jsonl without a record" 2 "$DTRUN" report e
has "(f) ... says so" "$err" "e/events.jsonl: error: no event records in it (1 line), so there is nothing to draw"
run "(f) no such directory" 2 "$DTRUN" report nowhere
run "(f) no run named" 2 "$DTRUN" report
echo "a file" >afile
run "(f) --out in a directory that cannot be" 6 "$DTRUN" report a --out afile/r.html
has "(f) ... says why, and how to fix it" "$err" "afile/r.html: error: cannot write the report: Not a directory
  hint: give --out a file in a directory you can write"
mkdir out.html
run "(f) --out naming a directory" 6 "$DTRUN" report a --out out.html
same "(f) ... no partial file left" "$(ls -A out.html; ls -A | grep -c '^\.')" 0

# ---- (g) a 100k-step run: thinned to the pixels, under 1 MB
mkdir f
# under the sanitizers 10k records: the same code, thinned just as much (past 2 points a pixel column)
n=100000
optimized || n=10000
awk -v n=$n 'BEGIN {
    h = "{\"schema_version\":1,\"id\":\"0123456789abcdef-01234567-r0-%d\",\"type\":\"%s\",\"time\":\"2026-01-01T00:00:00.000Z\",\"run_id\":\"0123456789abcdef\",\"run_name\":\"long\",\"rank\":0,\"job_id\":null,\"step_id\":null,\"restart_count\":0"
    printf h ",\"world\":{\"size\":8,\"nodes\":2,\"ranks_per_node\":4,\"description\":\"8 ranks\"},\"resumed\":null}\n", 1, "run_started"
    for (s = 1; s <= n; s++) {
        printf h ",\"step\":%d,\"tokens\":%d,\"loss\":%.5f,\"lr\":0.0003,\"grad_norm\":%.4f,\"loss_scale\":65536,\"skipped_steps\":0,\"tokens_per_s\":%d,\"mfu\":0.41,\"step_ms\":%.2f,\"peak_memory_bytes\":%d}\n",
            s + 1, "metrics", s, s * 4096, 2 + 3 * exp(-s / 20000) + 0.05 * sin(s / 7), 1 + 0.1 * sin(s / 11), 400000 + s % 1000, 100 + s % 97, 2e9 + s
        if (s % 500 == 0) printf h ",\"step\":%d,\"path\":\"ckpt\",\"bytes\":1000,\"seconds\":1,\"mb_per_s\":1}\n", s + 1e6, "checkpoint_saved", s
    }
}' >f/events.jsonl
run "(g) $n metrics records" 0 "$DTRUN" report f
size=$(stat -c %s f/report.html)
[ "$size" -lt 1000000 ] && ok "(g) the page is $size bytes" || not_ok "(g) the page is $size bytes, 1 MB or more"

# ---- (h) what a chart's axis shows (records written by awk: the times are the test's, not a
# machine's): a first step of 900 ms before steps of 10-11 ms, in two lives, the second resumed at
# step 30 with a first step of 400 ms; a 16-mixed run whose loss scale moves
mkdir h
awk 'BEGIN {
    h = "{\"schema_version\":1,\"id\":\"0123456789abcdef-%s-r0-%d\",\"type\":\"%s\",\"time\":\"2026-01-01T00:00:00.000Z\",\"run_id\":\"0123456789abcdef\",\"run_name\":\"h\",\"rank\":0,\"job_id\":null,\"step_id\":null,\"restart_count\":0"
    for (life = 1; life <= 2; life++) {
        tok = life == 1 ? "aaaaaaaa" : "bbbbbbbb"
        from = life == 1 ? 0 : 30
        printf h ",\"world\":{\"size\":1,\"nodes\":1,\"ranks_per_node\":1,\"description\":\"1 rank\"},\"resumed\":%s}\n", tok, 1, "run_started", life == 1 ? "null" : "{\"path\":\"ckpt/step-00000030\",\"step\":30}"
        for (s = from + 1; s <= from + (life == 1 ? 30 : 20); s++)
            printf h ",\"step\":%d,\"tokens\":%d,\"loss\":%.4f,\"lr\":0.001,\"grad_norm\":1,\"loss_scale\":%d,\"skipped_steps\":0,\"tokens_per_s\":1000,\"mfu\":null,\"step_ms\":%.1f,\"peak_memory_bytes\":1000000}\n",
                tok, s + 1, "metrics", s, s * 512, 3 - s / 50, s < 20 ? 65536 : 32768, s == from + 1 ? (life == 1 ? 900 : 400) : 10 + s % 2
    }
}' >h/events.jsonl
run "(h) dtrun report h" 0 "$DTRUN" report h
st=$(chart_of h/report.html step-time)
same "(h) the step-time axis is the steady steps' (10-11 ms): its top tick 15 ms, not 900" \
    "$(grep -o 'class="tick" text-anchor="end">[0-9.]*<' <<<"$st" | sed 's/.*>\([0-9.]*\)</\1/' | sort -g | tail -1)" 15
same "(h) ... each life's first step marked above it" "$(grep -c 'class="spike"' <<<"$st")" 2
has "(h) ... with its time" "$st" ">900 (step 1)</text>"
has "(h) ... and the second life's" "$st" ">400 (step 31)</text>"
has "(h) a loss scale that moves is drawn" "$($CHECK page h/report.html)" "chart-loss-scale"
finish
