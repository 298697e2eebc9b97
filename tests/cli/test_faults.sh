#!/usr/bin/env bash
# The fault matrix (issue #16, item 2; DESIGN.md invariant 3): one driver over the fault-injection
# point (DTRUN_FAULT, src/core/fault.h), the test's own hands (a checkpoint file truncated or a
# byte flipped between save and resume) and tests/receiver.py's misbehaviours, each at the points
# of a 2-rank run of 12 steps with a save every 4 (start, mid-step, mid-save, at exit). Each case
# either finishes with the undisturbed run's final loss (the logged string, exactly) or stops
# within the stated time (the launcher's at once, the watchdog's after compute.comm_timeout: 30 s
# more is allowed either way, for a loaded machine) with one message naming the fault, the rank
# and the step, and then, run again, resumes from its last valid checkpoint to that loss. Every
# checkpoint a commit made valid still verifies (`dtrun ckpt inspect`) after the fault and after
# the resume; every event of events.jsonl reaches the receiver once it recovers. The matrix
# (fault x point -> outcome) is printed at the end as TAP comments, each cell's message after it. The
# sanitizer build runs one point of each row (asan_cells), the optimized build every cell.
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/receiver.sh"
cd "$TMP" || exit 1
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
if ! "$DTRUN" --version | grep -q '^comm: mpi'; then
    echo "1..0 # SKIP this dtrun was built without MPI"
    exit 0
fi
export OMP_NUM_THREADS=1 # the same bits in every life of a run
TO=3                     # compute.comm_timeout of the lives that end in a fault, seconds
BOUND=$((TO + 30))       # a stop comes within this many seconds, however loaded the machine
tiny=(model.n_layer=1 model.n_embd=32 model.n_head=2 model.seq_len=16 data.micro_batch_size=4 run.eval_interval=0ba
    events.interval=1ba run.max_duration=12ba checkpoint.interval=4ba checkpoint.keep=0 scheduler.type=constant
    optimizer.lr=3e-3)
# the webhook: one event a request (so a failure starts at a chosen event), short backoff and timeouts
hook=(events.webhook.batch=1 events.webhook.backoff=50ms events.webhook.max_backoff=200ms events.webhook.timeout=1s
    events.webhook.connect_timeout=1s events.webhook.flush_timeout=20s)

# ---- helpers
# go DIR [OVERRIDES...]: one life of the job in run.dir DIR (DTRUN_FAULT from the caller); sets $rc
# and $secs, keeps its stderr in DIR.err
go() {
    local dir=$1 t0
    shift
    t0=$(date +%s%N)
    timeout -k 5 150 "$DTRUN" -n 2 run "${tiny[@]}" run.dir="$dir" "$@" >"$dir.out" 2>"$dir.err"
    rc=$?
    secs=$((($(date +%s%N) - t0 + 500000000) / 1000000000))
}
# the loss run_finished logged last in DIR (a resumed run's is the last life's)
final_loss() { sed -n 's/.*"type":"run_finished".*"loss":\([^,]*\),.*/\1/p' "$1/events.jsonl" 2>/dev/null | tail -1; }
# the checkpoints a commit made in DIR (not partial, set aside or superseded)
committed() { ls -d "$1"/ckpt/step-* 2>/dev/null | grep -E '/step-[0-9]{8}$'; }
# verify CKPT...: nothing when each is a valid checkpoint (every file's size and checksum), else why not
verify() {
    local d
    for d in "$@"; do
        "$DTRUN" ckpt inspect "$d" >/dev/null 2>"$TMP/verify.err" || { echo "$d: $(head -1 "$TMP/verify.err")"; return; }
    done
}
# the step a life resumed from (0: it started afresh)
resumed_from() { sed -n 's|.*resuming from [^ ]*/step-0*\([0-9][0-9]*\): step .*|\1|p' "$1.err" | tail -1 | grep . || echo 0; }
# the first line of FILE matching the extended regex RE
first() { grep -E -m1 -e "$2" "$1" 2>/dev/null | sed 's/^\[rank [0-9]*\] //'; }

declare -A cell
details=()
rows=()
cols=(start mid-step mid-save exit)
row() { rows+=("$1"); }
note() {
    cell["$1|$2"]=$3
    details+=("$1 @ $2 [$4]: $5")
}
ncase=0
# the sanitizer build runs one point of each row (a different one from row to row): every fault's path
# runs under ASan and UBSan, at a quarter of the matrix's time there; the optimized build runs all
declare -A asan_cells
for c in "kill -9 rank 1|mid-save" "SIGSTOP rank 1|mid-step" "collective never returns|exit" \
    "checkpoint write ENOSPC|mid-save" "checkpoint write EIO|exit" "spool write ENOSPC|start" "spool write EIO|exit" \
    "checkpoint file truncated|mid-save" "checkpoint file byte flipped|exit" "webhook refusing|start" \
    "webhook stalling|mid-step" "webhook 500|mid-save" "webhook 429|exit" "webhook closing mid-response|mid-step" \
    "clock +1 h|mid-step" "clock -1 h|exit" "clock jump, then a stall|mid-step"; do
    asan_cells[$c]=1
done
all_cells=0
optimized && all_cells=1
# want ROW COL: this build runs the cell; else it is noted in the matrix and skipped
want() {
    if [ $all_cells = 1 ] || [ -n "${asan_cells["$1|$2"]:-}" ]; then return 0; fi
    note "$1" "$2" "(optimized build only)" - "not run under the sanitizers"
    ok "# SKIP $1 @ $2: the sanitizer build runs one point of each row"
    return 1
}

# finished DIR CASE: the run ended well, with the undisturbed loss
finished() {
    local loss
    loss=$(final_loss "$1")
    if [ "$rc" = 0 ] && [ "$loss" = "$L0" ]; then
        ok "$2: finished, same loss ($loss)"
        return 0
    fi
    not_ok "$2: exit $rc, final loss '$loss' (undisturbed: $L0)" "$(grep -v 'step [0-9]*/' "$1.err" | tail -15)"
    return 1
}
# stopped DIR CASE RE: the job ended (not 0) within BOUND seconds, with a message matching RE; sets $msg
stopped() {
    msg=$(first "$1.err" "$3")
    if [ "$rc" != 0 ] && [ -n "$msg" ] && [ "$secs" -le "$BOUND" ]; then
        ok "$2: stopped in $secs s (exit $rc): $msg"
        return 0
    fi
    not_ok "$2: exit $rc after $secs s; expected a stop within $BOUND s saying /$3/" \
        "$(grep -v 'step [0-9]*/' "$1.err" | tail -15)"
    return 1
}
# still_valid CASE CKPT...: the checkpoints that were valid still are
still_valid() {
    local bad
    bad=$(verify "${@:2}")
    [ -z "$bad" ] && ok "$1: the $(($# - 1)) checkpoints valid before still verify" || not_ok "$1: $bad"
}

# kept CASE DIR: every checkpoint the run said it saved (checkpoint_saved in its events.jsonl, each
# life's) is still committed in DIR, so the checks of their validity that follow cover them all
kept() {
    local k saved missing=()
    saved=$(sed -n 's/.*"type":"checkpoint_saved".*"step":\([0-9]*\),.*/\1/p' "$2/events.jsonl" 2>/dev/null | sort -un)
    for k in $saved; do
        [ -d "$2/ckpt/$(printf 'step-%08d' "$k")" ] || missing+=("$k")
    done
    [ ${#missing[@]} = 0 ] && ok "$1: every save it reported is there (steps: $(echo ${saved:-none}))" ||
        not_ok "$1: the reported saves of steps ${missing[*]} are gone" "$(ls "$2/ckpt" 2>&1)"
}

# stop_case ROW COL FAULT RE: DTRUN_FAULT=FAULT ends the job, saying RE (the fault, the rank, the
# step); the same command then resumes from the newest valid checkpoint to the undisturbed loss
stop_case() {
    local row=$1 col=$2 fault=$3 re=$4 dir name valid from out
    want "$row" "$col" || return 0
    dir=$TMP/c$((++ncase)) name="$row @ $col ($fault)"
    DTRUN_FAULT=$fault go "$dir" compute.comm_timeout=${TO}s
    stopped "$dir" "$name" "$re"
    out="stop ${secs}s"
    [ "$rc" = 0 ] && out="finished (expected a stop)"
    kept "$name, after the fault" "$dir"
    mapfile -t valid < <(committed "$dir")
    still_valid "$name, after the fault" "${valid[@]}"
    go "$dir"
    from=$(resumed_from "$dir")
    finished "$dir" "$name, run again (resumed from step $from)" && out="$out; resume@$from: same loss" ||
        out="$out; resume FAILED"
    kept "$name, after the resume" "$dir"
    still_valid "$name, after the resume" "${valid[@]}"
    note "$row" "$col" "$out" "$fault" "${msg:-no message}"
}

# finish_case ROW COL FAULT RE [OVERRIDES...]: the run absorbs DTRUN_FAULT=FAULT: it finishes with the
# undisturbed loss, having said RE (the fault, the rank, the step)
finish_case() {
    local row=$1 col=$2 fault=$3 re=$4 dir name valid
    want "$row" "$col" || return 0
    shift 4
    dir=$TMP/c$((++ncase)) name="$row @ $col ($fault)"
    DTRUN_FAULT=$fault go "$dir" "$@"
    casedone "$row" "$col" "$fault" "$re" "$dir"
}
# casedone ROW COL FAULT RE DIR: the checks of a run that absorbed its fault (go just ran)
casedone() {
    local row=$1 col=$2 fault=$3 re=$4 dir=$5 name="$1 @ $2 ($3)" out
    msg=$(first "$dir.err" "$re")
    [ -n "$msg" ] && ok "$name: said: $msg" || not_ok "$name: nothing said matches /$re/" \
        "$(grep -v 'step [0-9]*/' "$dir.err" | tail -15)"
    finished "$dir" "$name" && out="finished, same loss" || out="exit $rc, loss $(final_loss "$dir")"
    kept "$name" "$dir"
    mapfile -t valid < <(committed "$dir")
    still_valid "$name" "${valid[@]}"
    note "$row" "$col" "$out" "$fault" "${msg:-nothing said}"
}

# ---- the grammar: a malformed DTRUN_FAULT is refused at start, before anything is made
for bad in stall nosuch@3 kill@0 kill@3: kill@3x kill@-1 stop@3:-1 "kill@3,"; do
    DTRUN_FAULT=$bad run "DTRUN_FAULT='$bad' is refused" 2 "$DTRUN" run "${tiny[@]}" run.dir="$TMP/bad"
done
has "... saying what it accepts" "$err" "hint: KIND@STEP[:RANK], comma-separated; KIND is grad_inf, kill, stop, stall, enospc, eio, kill_save, stop_save, stall_save, spool_enospc, spool_eio, clock_fwd or clock_back (src/core/fault.h)"
[ ! -e "$TMP/bad" ] && ok "... before run.dir is made" || not_ok "a refused DTRUN_FAULT made $TMP/bad"

# ---- the undisturbed run
go "$TMP/base"
L0=$(final_loss "$TMP/base")
[ "$rc" = 0 ] && [ -n "$L0" ] && ok "the undisturbed run: loss $L0" || not_ok "the undisturbed run: exit $rc" "$(tail "$TMP/base.err")"

# ---- processes: SIGKILL, SIGSTOP, a collective that never returns. A save's file is written in the
# background and committed at a later step boundary, so a fault mid-save (or its stall, at the
# commit) meets the job a step or more later: the message names the step the job was in.
row "kill -9 rank 1"
stop_case "kill -9 rank 1" start kill@1:1 'rank 1 was killed by signal 9 \(Killed\) in step 1;'
stop_case "kill -9 rank 1" mid-step kill@6:1 'rank 1 was killed by signal 9 \(Killed\) in step 6;'
stop_case "kill -9 rank 1" mid-save kill_save@8:1 'rank 1 was killed by signal 9 \(Killed\) (in step ([89]|1[0-2])|at exit, after its last step \(12\));'
stop_case "kill -9 rank 1" exit kill@13:1 'rank 1 was killed by signal 9 \(Killed\) at exit, after its last step \(12\);'
row "SIGSTOP rank 1"
stop_case "SIGSTOP rank 1" start stop@1:1 'rank 0: error: .* at step 1: rank 1 did not answer \(stopped, hung or dead\)'
stop_case "SIGSTOP rank 1" mid-step stop@6:1 'rank 0: error: .* at step 6: rank 1 did not answer \(stopped, hung or dead\)'
stop_case "SIGSTOP rank 1" mid-save stop_save@8:1 'rank 0: error: .* at step (9|1[0-2]): rank 1 did not answer \(stopped, hung or dead\)'
stop_case "SIGSTOP rank 1" exit stop@13:1 'rank 0: error: .* at step 12: rank 1 did not answer \(stopped, hung or dead\)'
row "collective never returns"
stop_case "collective never returns" start stall@1:1 "rank 0: error: .* did not finish within $TO s at step 1: rank 1 has not reached it"
stop_case "collective never returns" mid-step stall@6:1 "rank 0: error: .* did not finish within $TO s at step 6: rank 1 has not reached it"
stop_case "collective never returns" mid-save stall_save@8:1 "rank 0: error: all-reduce of checkpoint writers .* at step (9|1[0-2]): rank 1 has not reached it"
stop_case "collective never returns" exit stall@13:1 "rank 0: error: all-reduce of checkpoint writers .* at step 12: rank 1 has not reached it"
# with nothing to save, the last collective is the end of the run's barrier (else MPI_Finalize would wait)
DTRUN_FAULT=stall@13:1 go "$TMP/nosave" compute.comm_timeout=${TO}s checkpoint.dir=null
stopped "$TMP/nosave" "collective never returns @ exit, nothing saved" \
    "rank 0: error: barrier of the end of the run \(request [0-9]*\) did not finish within $TO s at step 12: rank 1 has not reached it"

# ---- the checkpoint's disk: a save in between fails and is said, training goes on; the final save
# failing ends the run (exit 5), and the next start resumes from the save before
for f in enospc:"No space left on device" eio:"Input/output error"; do
    k=${f%%:*} e=${f#*:}
    r="checkpoint write $(tr a-z A-Z <<<"$k")"
    row "$r"
    note "$r" start "n/a" - "no checkpoint is written at the start"
    note "$r" mid-step "n/a" - "no checkpoint is written mid-step"
    finish_case "$r" mid-save "$k@8:1" "checkpoint of step 8 failed, rank 1: .*: $e"
    stop_case "$r" exit "$k@12:1" "dtrun: error: checkpoint of step 12 failed, rank 1: .*: $e"
done

# ---- the webhook spool's disk: while the endpoint fails, a spool write at that step fails; the
# events wait in memory and every one arrives once the endpoint recovers (the receiver answers 500
# until the run has written run_finished, then 200: the rest goes out in the exit's flush). Step 9
# is mid-save: the save of step 8 is being written and committed then.
spool_case() {
    local row=$1 col=$2 fault=$3 re=$4 dir t0
    want "$row" "$col" || return 0
    dir=$TMP/c$((++ncase))
    receiver status:500 --out "$dir.got"
    t0=$(date +%s%N)
    DTRUN_FAULT=$fault timeout -k 5 150 "$DTRUN" -n 2 run "${tiny[@]}" run.dir="$dir" "${hook[@]}" \
        events.webhook.queue=1 events.webhook.url="http://127.0.0.1:$port/" >"$dir.out" 2>"$dir.err" &
    local job=$!
    for _ in $(seq 1500); do grep -q '"type":"run_finished"' "$dir/events.jsonl" 2>/dev/null && break; sleep 0.02; done
    mode ok
    wait "$job"
    rc=$?
    casedone "$row" "$col" "$fault" "$re" "$dir"
    same "$row @ $col: every event reached the receiver" "$(delivered "$dir.got" "$dir/events.jsonl")" \
        "$(wc -l <"$dir/events.jsonl") events, 0 missing, 0 unexpected, order ok"
    stop_receiver
}
for f in spool_enospc:"No space left on device" spool_eio:"Input/output error"; do
    k=${f%%:*} e=${f#*:}
    r="spool write ${k#spool_}"
    r=${r/enospc/ENOSPC} r=${r/eio/EIO}
    row "$r"
    spool_case "$r" start "$k@1:0" "the event of step 1 cannot be spooled: .*$e"
    spool_case "$r" mid-step "$k@6:0" "the event of step 6 cannot be spooled: .*$e"
    spool_case "$r" mid-save "$k@9:0" "the event of step 9 cannot be spooled: .*$e"
    spool_case "$r" exit "$k@13:0" "the event of step (8|12) cannot be spooled: .*$e"
done

# ---- a checkpoint file damaged between save and resume: the job stops at the point, the newest
# checkpoint it committed has rank 1's file truncated (or a byte flipped), and the next start names
# it, skips it and resumes from the one before (or afresh), to the undisturbed loss
damage_case() {
    local row=$1 col=$2 how=$3 fault=$4 dir name valid newest f from out n
    want "$row" "$col" || return 0
    dir=$TMP/c$((++ncase)) name="$row @ $col (${fault:-no fault})"
    DTRUN_FAULT=$fault go "$dir"
    kept "$name" "$dir"
    mapfile -t valid < <(committed "$dir")
    newest=${valid[-1]}
    f=$newest/rank-00001-of-00002.bin
    if [ "$how" = truncate ]; then
        truncate -s -100 "$f"
    else
        printf '\001' | dd of="$f" bs=1 seek=5000 conv=notrunc status=none
    fi
    unset 'valid[-1]'
    go "$dir"
    msg=$(first "$dir.err" "skipping .*${newest##*/}, not a valid checkpoint: .*rank-00001-of-00002.bin: error: ")
    [ -n "$msg" ] && ok "$name: the damaged ${newest##*/} is named and skipped: $msg" ||
        not_ok "$name: ${newest##*/} damaged, not named" "$(grep -v 'step [0-9]*/' "$dir.err" | tail -15)"
    from=$(resumed_from "$dir")
    n=${newest##*/step-}
    finished "$dir" "$name, resumed from step $from" && out="step $((10#$n)) bad; resume@$from: same loss" ||
        out="resume FAILED"
    still_valid "$name, the others" "${valid[@]}"
    note "$row" "$col" "$out" "${fault:-complete run}, then $how" "$msg"
}
for how in truncate flip; do
    r="checkpoint file ${how/flip/byte flipped}"
    r=${r/truncate/truncated}
    row "$r"
    note "$r" start "n/a" - "nothing is saved at the start"
    damage_case "$r" mid-step $how kill@10:1
    damage_case "$r" mid-save $how kill_save@12:1
    damage_case "$r" exit $how ""
done

# ---- the webhook endpoint: refusing connections, stalling (past events.webhook.timeout), 500, 429
# and closing halfway through its answer. From the start: for the whole run, then it recovers and
# `dtrun events flush` sends the spool; at a later point (the first request carrying that event,
# tests/receiver.py --fail-from): for 3 requests (refuse: 1 s), recovering within the run.
hook_case() {
    local row=$1 col=$2 mode=$3 from=$4 dir t0 re fl=()
    want "$row" "$col" || return 0
    dir=$TMP/c$((++ncase))
    if [ "$col" = start ] && [ "${mode%%:*}" = refuse ]; then
        port=$(free_port) rpid= # nothing listens
    elif [ "$col" = start ]; then
        receiver "$mode" --out "$dir.got"
    else
        receiver "$mode" --out "$dir.got" --fail-from "$from" --fail-count 3
    fi
    [ "$col" = start ] && fl=(events.webhook.flush_timeout=1s)
    DTRUN_FAULT= go "$dir" "${hook[@]}" "${fl[@]}" events.webhook.url="http://127.0.0.1:$port/"
    if [ "$col" = start ]; then # it recovers: then the spool is flushed
        if [ -z "$rpid" ]; then
            $PY "$RECEIVER" --port "$port" --out "$dir.got" &
            rpid=$!
            for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/_stats" && break; sleep 0.05; done
        else
            mode ok
        fi
        "$DTRUN" events flush "$dir" >"$dir.flush" 2>&1 || not_ok "$row @ $col: dtrun events flush failed" "$(cat "$dir.flush")"
    fi
    case $mode in
    refuse*) re="Couldn't connect to server" ;;
    stall*) re="Timeout was reached" ;;
    status:500) re="HTTP 500: receiver told to fail" ;;
    status:429*) re="HTTP 429: receiver told to fail" ;;
    half) re="Transferred a partial file" ;;
    esac
    case $col in
    start) re="$re; .*\(noticed at (the run's start|step [0-9]+); " ;;
    # refusing starts with the request after step 5's metrics, which may be a save's event posted
    # while step 5 is still the last (a save's event lags its step): noticed at step 5 or later
    mid-step) re="$re; .*\(noticed at step ([5-9]|1[0-2]); " ;;
    mid-save) re="$re; .*\(noticed at step ([89]|1[0-2]); " ;;
    exit) re="$re; .*\(noticed at step 12; " ;;
    esac
    casedone "$row" "$col" "$mode${from:+ from /$from/}" "webhook http://127.0.0.1:$port: $re" "$dir"
    same "$row @ $col: every event reached the receiver" "$(delivered "$dir.got" "$dir/events.jsonl")" \
        "$(wc -l <"$dir/events.jsonl") events, 0 missing, 0 unexpected, order ok"
    stop_receiver
}
for m in "refusing=refuse:1" "stalling=stall:10" "500=status:500" "429=status:429:1" "closing mid-response=half"; do
    r="webhook ${m%%=*}" mode=${m#*=}
    row "$r"
    hook_case "$r" start "$mode" ""
    # refuse:S takes the request that starts it: there, the one before the point's
    if [ "${mode%%:*}" = refuse ]; then mid='"step":5,"steps"' end='"step":12,"steps"'; else
        mid='"step":6,"steps"' end='"type":"run_finished"'; fi
    hook_case "$r" mid-step "$mode" "$mid"
    hook_case "$r" mid-save "$mode" '"type":"checkpoint_saved".*"step":8,'
    hook_case "$r" exit "$mode" "$end"
done

# ---- the wall clock jumps (on both ranks): event times follow it, nothing timed does: the run ends
# with the same loss, one event's time is an hour off its predecessor's, and a rank that stalls
# after the jump is still named by the watchdog within compute.comm_timeout
jumped() { # DIR: the largest gap between consecutive events' times, in whole seconds
    $PY - "$1/events.jsonl" <<'EOF'
import datetime, json, sys
t = [datetime.datetime.fromisoformat(json.loads(l)["time"].replace("Z", "+00:00")).timestamp() for l in open(sys.argv[1])]
d = [b - a for a, b in zip(t, t[1:])]
print("%+.0f" % max(d, key=abs))
EOF
}
for j in fwd:+3600 back:-3600; do
    k=clock_${j%%:*} s=${j#*:}
    r="clock ${s:0:1}1 h" sre=${s/+/\\+}
    row "$r"
    for p in start:1 mid-step:6 mid-save:9 exit:13; do
        c=${p%%:*} n=${p#*:}
        at="as step $n started"
        [ "$n" = 13 ] && at="at exit, after step 12"
        want "$r" "$c" || continue
        finish_case "$r" "$c" "$k@$n:0,$k@$n:1" "rank 0: the wall clock jumped $sre s $at"
        g=$(jumped "$TMP/c$ncase")
        [ "${g#[+-]}" -ge 3590 ] && [ "${g#[+-]}" -le 3610 ] && [ "${g:0:1}" = "${s:0:1}" ] &&
            ok "$r @ $c: the events' times jumped ${g} s" || not_ok "$r @ $c: the largest gap between events is $g s"
    done
done
row "clock jump, then a stall"
note "clock jump, then a stall" start "n/a" - "(the clock rows cover the jump alone)"
stop_case "clock jump, then a stall" mid-step clock_back@5:0,clock_back@5:1,stall@6:1 \
    "rank 0: error: .* did not finish within $TO s at step 6: rank 1 has not reached it"
note "clock jump, then a stall" mid-save "n/a" - "(as mid-step)"
stop_case "clock jump, then a stall" exit clock_fwd@12:0,clock_fwd@12:1,stall@13:1 \
    "rank 0: error: all-reduce of checkpoint writers .* did not finish within $TO s at step 12: rank 1 has not reached it"

# ---- the matrix
w=32
line() { printf '# %-28s' "$1"; shift; for c in "$@"; do printf ' | %-*s' "$w" "$c"; done; printf '\n'; }
echo "# fault x point -> outcome (2 ranks, 12 steps, a save every 4; compute.comm_timeout ${TO} s where the job stops; undisturbed loss $L0)"
line "fault" "${cols[@]}"
line "----" "----" "----" "----" "----"
for r in "${rows[@]}"; do
    vals=()
    for c in "${cols[@]}"; do vals+=("${cell[$r|$c]:--}"); done
    line "$r" "${vals[@]}"
done
echo "# messages (fault @ point [what was injected]: the one message that names it):"
printf '#   %s\n' "${details[@]}"
finish
