#!/usr/bin/env bash
# The fault matrix, part 2 of 3 (tests/cli/faults.sh has the driver): storage. The checkpoint's
# disk full or failing (ENOSPC, EIO), the webhook spool's disk the same, a checkpoint file
# truncated or a byte flipped between save and resume.
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/receiver.sh"
. "$(dirname "$0")/faults.sh"

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

matrix
