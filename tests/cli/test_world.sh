#!/usr/bin/env bash
# `dtrun info` under a real launcher: mpirun -n 2 (which serves PMIx) gives each
# process its own rank; without PMIx compiled in, the mpirun variables do.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
source=mpirun
dtrun_has '^bootstrap: pmix' && source=pmix
run "mpirun -n 2 dtrun info" 0 timeout 60 mpirun -n 2 --oversubscribe "$DTRUN" info
same "each rank knows its place" "$(grep '^dtrun info' <<<"$out" | sed 's/;.*//' | sort)" \
"dtrun info: rank 0/2 (local 0/2, node 0/1) from $source
dtrun info: rank 1/2 (local 1/2, node 0/1) from $source"
if [ $source = pmix ]; then boot="bootstrap pmix: 128 bytes from rank 0, FNV-1a "; else boot="bootstrap none: no PMIx key-value store"; fi
[ "$(grep -c "; $boot" <<<"$out")" = 2 ] && ok "each rank reports the bootstrap ($boot)" || not_ok "bootstrap line" "$out"
run "a Slurm step of 2 tasks without PMIx" 4 env -u PMIX_RANK -u PMIX_NAMESPACE SLURM_STEP_ID=0 SLURM_PROCID=0 \
    SLURM_STEP_NUM_TASKS=2 "$DTRUN" info
has "refused with the fix" "$err" "hint: run \`srun --mpi=pmix dtrun ...\`, or set MpiDefault=pmix in slurm.conf"
finish
