#!/bin/sh
# One schedule for three readers: the engine's gather / compute / release /
# reduce events, traced on real MPI ranks, must be the events the memory
# estimator and the step-time projection walk for the same configuration
# (tests/test_schedule.c): every strategy, prefetch 0..3, tied and untied,
# activation checkpointing, accumulation with and without no_sync, on 1, 2
# and 4 ranks.  One check per configuration.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
export OMP_NUM_THREADS=1   # 4 ranks on 2 cores: no thread oversubscription on top

prog=${top_builddir:-.}/tests/test_schedule
for np in 1 2 4; do
    ranks "$np" 300 "$prog" >"$TMP/out$np" 2>"$TMP/err$np"
    rc=$?
    while read -r verdict rest; do
        case $verdict in
        same) ok "$rest" ;;
        differ) not_ok "$rest" ;;
        esac
    done <"$TMP/out$np"
    if [ "$rc" -eq 0 ] && grep -q '^checked [0-9]* configurations, 0 differ$' "$TMP/out$np"; then
        ok "$np rank(s): $(grep '^checked' "$TMP/out$np")"
    else
        not_ok "$np rank(s): test_schedule exit status $rc"
        diag "$(tail -n 5 "$TMP/err$np")"
    fi
done
