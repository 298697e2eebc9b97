#!/usr/bin/env bash
# The README's command blocks run as they are written (issue #28): every ```sh block that follows a
# `<!-- doctest -->` line is run by bash -e, in file order, in one fresh directory where
# `templates` is the source tree's and the built dtrun is first on PATH, so what a newcomer pastes
# keeps working. Blocks that need a cluster, a GPU or a long build are not marked. In the full
# optimized build only: the blocks use MPI and HMAC signing, and they test the text, not the code.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
if ! optimized || ! dtrun_has '^comm: mpi' ||
    ! dtrun_has '^events: webhook, HMAC-SHA256'; then
    echo "1..0 # SKIP the README's blocks run in the full optimized build"
    exit 0
fi
readme=$DT_SRCDIR/README.md
mkdir blocks work
# each marked block to blocks/N.sh, its first line's number in the README to blocks/N.line
awk -v dir=blocks '
    /^<!-- doctest -->$/ { want = NR; next }
    want && NR == want + 1 && /^```sh$/ { n++; inblock = 1; print NR + 1 > (dir "/" n ".line"); next }
    want && NR == want + 1 { print "line " want ": <!-- doctest --> is not followed by a ```sh block" > "/dev/stderr"; bad = 1 }
    inblock && /^```$/ { inblock = 0; want = 0; next }
    inblock { print > (dir "/" n ".sh") }
    END { exit bad }' "$readme" && ok "every doctest mark is followed by a sh block" ||
    not_ok "a doctest mark is not followed by a sh block"
n=$(ls blocks/*.sh 2>/dev/null | wc -l)
# the README has blocks for each thing a user does (quick start, checkpoints, events, DeepSpeed...)
[ "$n" -ge 10 ] && ok "$n blocks marked to run" || not_ok "only $n doctest blocks in README.md"
ln -s "$DT_SRCDIR/templates" work/templates
export PATH=$(dirname "$DTRUN"):$PATH
for i in $(seq "$n"); do
    line=$(cat blocks/$i.line)
    first=$(grep -m1 -v '^#' blocks/$i.sh)
    if ! grep -q '[^[:space:]]' blocks/$i.sh; then
        not_ok "README.md:$line: the block is empty"
        continue
    fi
    (cd work && timeout 300 bash -e "$TMP/blocks/$i.sh") >out 2>err
    rc=$?
    [ $rc = 0 ] && ok "README.md:$line: $first" ||
        not_ok "README.md:$line: $first: exit $rc" "$(tail -15 err)"
done
finish
