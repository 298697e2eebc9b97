# tap.sh - a small TAP producer for the shell tests (sourced).
#   run NAME EXPECTED_RC CMD...   runs CMD, keeps $out, $err, $rc, $ms; checks the exit code
#   same NAME ACTUAL EXPECTED     compares two texts, shows a diff on failure
#   has NAME TEXT NEEDLE          TEXT contains NEEDLE
#   signal_and_wait SIG PID JOB   signals PID, waits for background JOB; sets $rc, $secs
#   losses DIR / maxrel DIR DIR [N]  the runs' metrics losses / their largest relative difference
#                                 (over the first N records when N is given)
#   within X LIMIT                X is a number and X <= LIMIT
#   dtrun_has PATTERN             a line of `dtrun --version` matches PATTERN (grep); asked once a
#                                 script (--version loads the CUDA module: half a second)
#   optimized                     this build's timings mean something (no sanitizers): only there
#                                 may a test time anything, and then with a budget no load decides
#   numerics                      this build's kernels are the fast ones and unsanitized (oneDNN, no
#                                 ASan): it runs the long runs whose ends or traces are compared; the
#                                 other builds run each code path on short runs
#   need_testbed                  skips the whole test (exit 0) without a Slurm testbed (SLURM_CONF) or
#                                 a dtrun with MPI and PMIx
#   finish                        prints the plan; exits 0 (failures are counted by the harness)
set -u
: "${DTRUN:?DTRUN must name the built dtrun}"
: "${DT_SRCDIR:?DT_SRCDIR must name the source tree}"
tap_n=0
tap_fail=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

ok() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $1"; }
not_ok() {
    tap_n=$((tap_n + 1))
    tap_fail=$((tap_fail + 1))
    echo "not ok $tap_n - $1"
    shift
    printf '%s\n' "$@" | sed 's/^/# /'
}

run() {
    local name=$1 want=$2
    shift 2
    local t0 t1
    t0=$(date +%s%N)
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    t1=$(date +%s%N)
    ms=$(((t1 - t0) / 1000000))
    out=$(cat "$TMP/out")
    err=$(cat "$TMP/err")
    if [ "$rc" = "$want" ]; then ok "$name: exit $rc"; else not_ok "$name: exit $rc, expected $want" "stderr: $err"; fi
}

same() {
    if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1" "$(diff <(printf '%s\n' "$3") <(printf '%s\n' "$2"))"; fi
}

has() {
    case "$2" in *"$3"*) ok "$1" ;; *) not_ok "$1" "expected to find: $3" "in: $2" ;; esac
}

# signal_and_wait SIG PID JOB: send SIG to PID, wait up to 60 s for the background JOB;
# sets $rc (JOB's exit code) and $secs (seconds from the signal to JOB's end)
signal_and_wait() {
    local t0
    t0=$(date +%s)
    kill "-$1" "$2"
    timeout 60 tail --pid="$3" -f /dev/null
    wait "$3"
    rc=$?
    secs=$(($(date +%s) - t0))
}

# losses RUN_DIR: the loss of each metrics record in RUN_DIR/events.jsonl, one a line
losses() { grep '"type":"metrics"' "$1/events.jsonl" 2>/dev/null | sed -n 's/.*"loss":\([0-9.e+-][0-9.e+-]*\).*/\1/p'; }
# maxrel DIR_A DIR_B [N]: the largest relative difference between their losses, record by record
# (the first N records only, when N is given). Two runs without losses, or with different numbers
# of them, are not alike: it then prints why (which `within` refuses) and fails.
maxrel() {
    local a b na nb
    a=$(losses "$1") b=$(losses "$2")
    if [ -n "${3:-}" ]; then
        a=$(head -n "$3" <<<"$a") b=$(head -n "$3" <<<"$b")
    fi
    na=$(printf '%s' "$a" | grep -c .) nb=$(printf '%s' "$b" | grep -c .)
    if [ "$na" = 0 ] || [ "$nb" = 0 ] || [ "$na" != "$nb" ]; then
        echo "not comparable: $na losses in $1, $nb in $2"
        return 1
    fi
    paste <(printf '%s\n' "$a") <(printf '%s\n' "$b") |
        awk '{ d = $2 != 0 ? ($1 - $2) / $2 : $1 - $2; d = d < 0 ? -d : d; if (d > m) m = d } END { printf "%.2e", m + 0 }'
}
# within X LIMIT: X is a number (not empty, not a message) and at most LIMIT
within() {
    awk -v x="$1" -v lim="$2" 'BEGIN { if (x !~ /^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$/) exit 1
                                       exit !(x + 0 <= lim + 0) }'
}

dtrun_has() {
    if [ "${tap_version_of:-}" != "$DTRUN" ]; then
        tap_version=$("$DTRUN" --version)
        tap_version_of=$DTRUN
    fi
    grep -q -e "$1" <<<"$tap_version"
}

optimized() { ! dtrun_has '--enable-sanitizers'; }

numerics() { optimized && dtrun_has '^kernels: cpu (oneDNN'; }

need_testbed() {
    if [ -z "${SLURM_CONF:-}" ] || ! sinfo -h >/dev/null 2>&1; then
        echo "1..0 # SKIP no Slurm testbed (scripts/testbed start, then export SLURM_CONF)"
        exit 0
    fi
    if ! dtrun_has '^comm: mpi' || ! dtrun_has '^bootstrap: pmix'; then
        echo "1..0 # SKIP this dtrun was built without MPI or PMIx"
        exit 0
    fi
}

finish() { echo "1..$tap_n"; exit 0; }
