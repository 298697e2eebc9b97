# faults.sh - the fault matrix's driver (issue #16, item 2; DESIGN.md invariant 3), sourced by
# tests/cli/test_faults_*.sh after tap.sh and receiver.sh: each of them runs some rows of the matrix
# (fault x point -> outcome) at the points of a 2-rank run of 12 steps with a save every 4 (start,
# mid-step, mid-save, at exit), and make runs the three side by side. A fault comes from the
# fault-injection point (DTRUN_FAULT, src/core/fault.h), the test's own hands (a checkpoint file
# truncated or a byte flipped between save and resume) or tests/receiver.py's misbehaviours. Each
# case either finishes with the undisturbed run's final loss (the logged string, exactly) or stops
# within BOUND seconds (the launcher's stop comes at once, the watchdog's after
# compute.comm_timeout: 1-8 s; a loaded machine is allowed ten times that) with one message naming
# the fault, the rank and the step, and then, run again, resumes from its last valid checkpoint to
# that loss. Every checkpoint a commit made valid still verifies (`dtrun ckpt inspect`) after the
# fault and after the resume; every event of events.jsonl reaches the receiver once it recovers.
# Each part prints its rows of the matrix at the end as TAP comments, each cell's message after it.
# The sanitizer build runs one point of each row (asan_cells), the optimized build every cell.
cd "$TMP" || exit 1
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
if ! dtrun_has '^comm: mpi'; then
    echo "1..0 # SKIP this dtrun was built without MPI"
    exit 0
fi
# Under ASan the lives run without LeakSanitizer, and so with the fast unwinder (tests/lsan.supp needs the
# slow one to name Open MPI's frames; it is most of an ASan'd rank's start): most lives end by a signal,
# the watchdog's abort or a failed save, where it never runs, and the code of those that end well (a
# resume, a spool sent later) is leak-checked in test_ckpt.sh and test_events.sh.
optimized || export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0:fast_unwind_on_malloc=1"
export OMP_NUM_THREADS=1 # the same bits in every life of a run
TO=3                     # compute.comm_timeout of the lives that end in a fault, seconds
BOUND=90                 # a stop comes within this many seconds, however loaded the machine
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

# ---- the undisturbed run, which every finished case ends like
go "$TMP/base"
L0=$(final_loss "$TMP/base")
[ "$rc" = 0 ] && [ -n "$L0" ] && ok "the undisturbed run: loss $L0" || not_ok "the undisturbed run: exit $rc" "$(tail "$TMP/base.err")"

# matrix: this part's rows, printed as TAP comments, then the plan
matrix() {
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
}
