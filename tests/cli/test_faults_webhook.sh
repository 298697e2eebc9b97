#!/usr/bin/env bash
# The fault matrix, part 3 of 3 (tests/cli/faults.sh has the driver): the webhook endpoint
# refusing, stalling, answering 500 or 429, closing mid-answer; the wall clock jumping an hour
# either way.
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/receiver.sh"
. "$(dirname "$0")/faults.sh"

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
        # the run's 1 s to flush at its end (the endpoint is down then) is too short for a flush that
        # must deliver on a loaded machine: it returns once everything is delivered
        "$DTRUN" events flush "$dir" events.webhook.flush_timeout=60s >"$dir.flush" 2>&1 ||
            not_ok "$row @ $col: dtrun events flush failed" "$(cat "$dir.flush")"
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
matrix
