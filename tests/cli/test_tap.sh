#!/usr/bin/env bash
# The shell tests' own helpers (tap.sh) fail on what would make a comparison meaningless: no
# losses, different numbers of them, a message where a number belongs.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
metrics() { # DIR LOSS...
    mkdir -p "$1"
    local d=$1
    shift
    : >"$d/events.jsonl"
    for l in "$@"; do echo "{\"type\":\"metrics\",\"step\":1,\"loss\":$l,\"lr\":0.001}" >>"$d/events.jsonl"; done
}
metrics a 2.5 2.0 1.5
metrics b 2.5 2.0 1.5
metrics c 2.5 2.0 1.50015
metrics short 2.5 2.0
metrics none
echo '{"type":"run_failed","step":null}' >none/events.jsonl
metrics zero 0 0
metrics zero2 0 0

same "losses reads every metrics record" "$(losses c | tr '\n' ' ')" "2.5 2.0 1.50015 "
d=$(maxrel a b) && within "$d" 0 && ok "equal runs: maxrel $d" || not_ok "equal runs: $d"
d=$(maxrel c a) && within "$d" 1.01e-4 && ! within "$d" 0.99e-4 && ok "one step apart by 1e-4: maxrel $d" ||
    not_ok "1e-4 apart: $d"
d=$(maxrel c a 2) && within "$d" 0 && ok "the first 2 records only: maxrel $d" || not_ok "first 2: $d"
d=$(maxrel zero zero2) && within "$d" 0 && ok "zero losses compare without dividing by zero: $d" || not_ok "zeros: $d"
d=$(maxrel none none) && not_ok "two runs without losses compared as equal ($d)" ||
    same "two runs without losses fail, saying why" "$d" "not comparable: 0 losses in none, 0 in none"
d=$(maxrel a missing) && not_ok "a missing run compared ($d)" ||
    same "a missing run fails" "$d" "not comparable: 3 losses in a, 0 in missing"
d=$(maxrel short a) && not_ok "runs of different lengths compared ($d)" ||
    same "runs of different lengths fail" "$d" "not comparable: 2 losses in short, 3 in a"
within "" 1 && not_ok "within accepts an empty value" || ok "within refuses an empty value"
within "not comparable: 0 losses" 1 && not_ok "within accepts a message" || ok "within refuses a message"
within 2e-5 1e-5 && not_ok "within accepts 2e-5 <= 1e-5" || ok "within refuses a value over the limit"
within 1e-6 1e-5 && ok "within accepts 1e-6 <= 1e-5" || not_ok "within refuses 1e-6 <= 1e-5"
within -3 0 && ok "within takes negative numbers" || not_ok "within refuses -3 <= 0"
finish
