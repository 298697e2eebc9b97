#!/usr/bin/env bash
# The minimal build cross-compiled for aarch64 (scripts/test builds it in build-aarch64 with Debian's
# cross compiler and arm64 -dev packages) runs under qemu-user: it starts, refuses bad input with
# the native build's message, and trains the native build's trajectory.
#   DTRUN=build-aarch64/src/dtrun DTRUN_NATIVE=build-minimal/src/dtrun DT_SRCDIR=. tests/cli/test_aarch64.sh
. "$(dirname "$0")/tap.sh"
: "${DTRUN_NATIVE:?DTRUN_NATIVE must name a native build of the same source}"
cd "$TMP" || exit 1
arm() { qemu-aarch64 -L / "$DTRUN" "$@"; }
case $(file -b "$DTRUN") in *"ARM aarch64"*) ok "the binary is aarch64 code" ;; *) not_ok "not an aarch64 binary: $(file -b "$DTRUN")" ;; esac
run "dtrun --version under qemu-aarch64" 0 arm --version
has "it names its build" "$out" "configured with: '--host=aarch64-linux-gnu'"
run "a missing config" 2 arm check nope.yaml
native_err=$("$DTRUN_NATIVE" check nope.yaml 2>&1)
same "the same message as on x86-64" "$err" "$native_err"
tiny=(run.max_duration=5ba events.interval=1ba model.n_layer=1 model.n_embd=32 model.n_head=2 model.seq_len=16
    data.micro_batch_size=4 run.eval_interval=0ba)
run "5 training steps under qemu-aarch64" 0 arm run "${tiny[@]}" run.dir=arm
"$DTRUN_NATIVE" run "${tiny[@]}" run.dir=x86 2>/dev/null
d=$(maxrel arm x86)
within "$d" 1e-5 && ok "the x86-64 build's losses, to $d" || not_ok "aarch64 and x86-64 losses differ: $d"
# the tokenizers (#40; char is unsigned there): the native build's shards, byte for byte
for f in gpt2_small llama3_small llama2_small; do
    tok=$DT_SRCDIR/tests/fuzz/corpus/tokenizer/$f.json
    run "prepare --tokenizer $f under qemu-aarch64" 0 arm prepare "$DT_SRCDIR/README.md" --out arm_$f --tokenizer "$tok" -j 2
    "$DTRUN_NATIVE" prepare "$DT_SRCDIR/README.md" --out x86_$f --tokenizer "$tok" >/dev/null 2>&1
    same "prepare --tokenizer $f: the x86-64 build's shards" "$(cat arm_$f/*.bin | md5sum)" "$(cat x86_$f/*.bin | md5sum)"
done
finish
