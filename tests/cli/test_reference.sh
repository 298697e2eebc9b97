#!/usr/bin/env bash
# README.md's config reference is `dtrun help config`, generated from the one
# schema table: this fails when they drift (regenerate with scripts/update-readme).
. "$(dirname "$0")/tap.sh"
run "help config" 0 "$DTRUN" help config
readme=$(sed -n '/<!-- config-reference:begin -->/,/<!-- config-reference:end -->/p' "$DT_SRCDIR/README.md" | sed '1d;$d')
same "README.md config reference matches the schema" "$readme" "$out"
finish
