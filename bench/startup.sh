#!/usr/bin/env bash
# bench/startup.sh [BUILD_DIR...] - what a dtrun process costs before it does anything: `dtrun check`
# on a missing file (the bad-input path), `dtrun --version` and `dtrun check` of the built-in default,
# in each build given (default: build build-minimal build-asan, those that exist). Runs interleaved,
# ROUNDS (default 20) times each; prints the median wall time and the largest peak RSS, and each
# build's median next to the minimal build's (the peer: it links no optional library).
# The shared libraries each binary maps at start are listed by ldd's count.
set -uo pipefail
rounds=${ROUNDS:-20}
builds=("$@")
# default: the source tree's builds, as scripts/test makes them
top=$(cd "$(dirname "$0")/.." && pwd)
[ ${#builds[@]} -eq 0 ] && for b in build build-minimal build-asan; do [ -x "$top/$b/src/dtrun" ] && builds+=("$top/$b"); done
[ ${#builds[@]} -eq 0 ] && { echo "no build with src/dtrun; run scripts/demo first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cases=("check-missing:check /nonexistent.yaml" "version:--version" "check-default:check")
export ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=0}

# one timed start: wall ms and peak RSS KiB, appended to FILE
one() { # FILE DTRUN ARGS...
    local f=$1 t0 t1
    shift
    t0=$(date +%s%N)
    /usr/bin/time -f '%M' -o "$tmp/rss" "$@" >/dev/null 2>&1
    t1=$(date +%s%N)
    echo "$(((t1 - t0) / 1000)) $(tail -1 "$tmp/rss")" >>"$f"
}
for _ in $(seq "$rounds"); do
    for c in "${cases[@]}"; do
        for b in "${builds[@]}"; do
            # shellcheck disable=SC2086
            one "$tmp/$(basename "$b").${c%%:*}" "$b/src/dtrun" ${c#*:}
        done
    done
done
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
peer=""
for b in "${builds[@]}"; do case $b in *minimal*) peer=$(basename "$b") ;; esac; done
printf '%-16s %-14s %10s %10s %9s %6s\n' build case "median ms" "RSS MiB" "vs minimal" libs
for c in "${cases[@]}"; do
    name=${c%%:*}
    base=""
    [ -n "$peer" ] && base=$(cut -d' ' -f1 "$tmp/$peer.$name" | median)
    for b in "${builds[@]}"; do
        f=$tmp/$(basename "$b").$name
        med=$(cut -d' ' -f1 "$f" | median)
        rss=$(cut -d' ' -f2 "$f" | sort -n | tail -1)
        ratio=-
        [ -n "$base" ] && ratio=$(awk -v a="$med" -v b="$base" 'BEGIN { printf "%.2fx", a / b }')
        printf '%-16s %-14s %10.1f %10.1f %9s %6s\n' "$(basename "$b")" "$name" "$(echo "$med / 1000" | bc -l)" \
            "$(echo "$rss / 1024" | bc -l)" "$ratio" "$(ldd "$b/src/dtrun" | wc -l)"
    done
done
