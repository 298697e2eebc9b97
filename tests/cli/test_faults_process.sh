#!/usr/bin/env bash
# The fault matrix, part 1 of 3 (tests/cli/faults.sh has the driver): processes. A rank killed
# (SIGKILL), frozen (SIGSTOP) or never reaching a collective, alone and after a wall-clock jump; and
# DTRUN_FAULT's grammar.
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/receiver.sh"
. "$(dirname "$0")/faults.sh"

# ---- the grammar: a malformed DTRUN_FAULT is refused at start, before anything is made
for bad in stall nosuch@3 kill@0 kill@3: kill@3x kill@-1 stop@3:-1 "kill@3,"; do
    DTRUN_FAULT=$bad run "DTRUN_FAULT='$bad' is refused" 2 "$DTRUN" run "${tiny[@]}" run.dir="$TMP/bad"
done
has "... saying what it accepts" "$err" "hint: KIND@STEP[:RANK], comma-separated; KIND is grad_inf, kill, stop, stall, enospc, eio, kill_save, stop_save, stall_save, spool_enospc, spool_eio, clock_fwd, clock_back, slow, nomem, hog or fp8_jump (src/core/fault.h)"
[ ! -e "$TMP/bad" ] && ok "... before run.dir is made" || not_ok "a refused DTRUN_FAULT made $TMP/bad"

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

row "clock jump, then a stall"
note "clock jump, then a stall" start "n/a" - "(the clock rows cover the jump alone)"
stop_case "clock jump, then a stall" mid-step clock_back@5:0,clock_back@5:1,stall@6:1 \
    "rank 0: error: .* did not finish within $TO s at step 6: rank 1 has not reached it"
note "clock jump, then a stall" mid-save "n/a" - "(as mid-step)"
stop_case "clock jump, then a stall" exit clock_fwd@12:0,clock_fwd@12:1,stall@13:1 \
    "rank 0: error: all-reduce of checkpoint writers .* did not finish within $TO s at step 12: rank 1 has not reached it"

matrix
