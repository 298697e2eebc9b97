#!/usr/bin/env bash
# The communicator between real ranks (tests/unit/comm_check.c under mpirun, 2 and 3 ranks):
# reduce-scatter, all-gather and broadcast in fp32, bf16 and fp16 on counts that do not divide
# by the number of ranks, each element checked on every rank.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
if ! dtrun_has '^comm: mpi'; then
    echo "1..0 # SKIP this dtrun was built without MPI"
    exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
check=$(dirname "$DTRUN")/../tests/unit/comm_check
for n in 2 3; do
    run "comm_check on $n ranks" 0 timeout 120 mpirun -n $n --oversubscribe "$check"
    cases=0
    while IFS= read -r line; do
        case $line in
        "ok - "*) ok "${line#ok - }"; cases=$((cases + 1)) ;;
        "not ok - "*) not_ok "${line#not ok - }"; cases=$((cases + 1)) ;;
        esac
    done <<<"$out"
    same "$n ranks: every case reported" "$cases" 78
done
finish
