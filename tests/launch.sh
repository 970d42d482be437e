#!/bin/sh
# Launch identity and process groups, through the hidden `shardtrain
# runtime-info [CONFIG]`, which starts the runtime, binds the device,
# builds the groups and prints one identity line per rank.  A job whose
# ranks disagree with the launcher about who they are, or whose layout does
# not fit the ranks launched, must be refused on every rank with exit
# status 2 and never hang; a good launch must show each rank exactly once
# with the groups the configuration asks for.
. "$(dirname "$0")/lib.sh"

require command -v mpirun

# The test may itself run inside a Slurm job or an mpirun: identity
# variables inherited from there would be read as this launch's.
for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\|OMPI_COMM_WORLD_[A-Z_]*\|PMIX_[A-Za-z0-9_]*\)=.*/\1/p'); do
    unset "$v"
done

# What mpirun's ranks report: pmix when this build has a PMIx client.
want_src=ompi
if grep -q '^#define HAVE_PMIX 1' "${top_builddir:-.}/st_build.h" 2>/dev/null; then
    want_src=pmix
fi

# launch NAME NP [ARGS...]: runs runtime-info under `mpirun -np NP` (NP 0:
# plain, no launcher) with a time limit; status in $st, output in
# $TMP/NAME.out and $TMP/NAME.err.
launch() {
    name=$1 np=$2
    shift 2
    if [ "$np" -eq 0 ]; then
        timeout 60 "$SHARDTRAIN" runtime-info "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    else
        timeout 60 mpirun --oversubscribe -np "$np" "$SHARDTRAIN" runtime-info "$@" \
            >"$TMP/$name.out" 2>"$TMP/$name.err"
    fi
    st=$?
    [ "$st" -eq 124 ] && diag "$name: timed out (hang)"
    return 0
}

ident_lines() { grep '^shardtrain: rank ' "$TMP/$1.err"; }
errors() { grep -c '^shardtrain: error: ' "$TMP/$1.err"; }
show() { diag "exit status $st" "stderr:" "$(cat "$TMP/$1.err")"; }

# ---- plain run: no launcher, MPI alone -----------------------------------
launch plain 0
if [ "$st" -eq 0 ] && [ "$(ident_lines plain | wc -l)" -eq 1 ] &&
   ident_lines plain | grep -q '^shardtrain: rank 0/1 host .* local 0/1 node 0 device [a-z:0-9]* identity mpi shard 0/1 (rank 0) replicate 0/1 (rank 0)$'; then
    ok "plain run is rank 0/1, identity mpi"
else
    not_ok "plain run is rank 0/1, identity mpi"; show plain
fi

# ---- mpirun -np 4: every rank once, the launcher's identity --------------
launch np4 4
good=1
[ "$st" -eq 0 ] || good=0
[ "$(ident_lines np4 | wc -l)" -eq 4 ] || good=0
for r in 0 1 2 3; do
    [ "$(ident_lines np4 | grep -c "^shardtrain: rank $r/4 ")" -eq 1 ] || good=0
done
if [ "$good" -eq 1 ]; then ok "mpirun -np 4 prints ranks 0..3 once each"
else not_ok "mpirun -np 4 prints ranks 0..3 once each"; show np4; fi
if [ "$(ident_lines np4 | grep -c " identity $want_src ")" -eq 4 ]; then
    ok "mpirun -np 4 identity comes from $want_src"
else
    not_ok "mpirun -np 4 identity comes from $want_src"; show np4
fi
if [ "$(ident_lines np4 | grep -c ' local [0-3]/4 node 0 ')" -eq 4 ]; then
    ok "mpirun -np 4 local size 4 on node 0"
else
    not_ok "mpirun -np 4 local size 4 on node 0"; show np4
fi
# Default strategy full_shard: one shard group of all four ranks.
if [ "$(ident_lines np4 | grep -c ' shard [0-3]/4 (ranks 0-3) replicate 0/1 (rank [0-3])$')" -eq 4 ]; then
    ok "full_shard: one shard group of ranks 0-3"
else
    not_ok "full_shard: one shard group of ranks 0-3"; show np4
fi

# ---- hybrid_shard with shard_size 2: two groups of two -------------------
printf '[parallel]\nstrategy = hybrid_shard\nshard_size = 2\n' > "$TMP/hybrid.ini"
launch hybrid 4 "$TMP/hybrid.ini"
good=1
[ "$st" -eq 0 ] || good=0
for r in 0 1 2 3; do
    lo=$(( r / 2 * 2 )) hi=$(( r / 2 * 2 + 1 )) pos=$(( r % 2 )) rep=$(( r % 2 ))
    want="^shardtrain: rank $r/4 .* shard $pos/2 (ranks $lo-$hi) replicate $(( r / 2 ))/2 (ranks $rep,$(( rep + 2 )))\$"
    [ "$(ident_lines hybrid | grep -c "$want")" -eq 1 ] || good=0
done
if [ "$good" -eq 1 ]; then ok "hybrid_shard shard_size 2: shard groups of 2 ranks, replicate pairs"
else not_ok "hybrid_shard shard_size 2: shard groups of 2 ranks, replicate pairs"; show hybrid; fi

# ---- a layout that does not fit: refused on every rank, no hang ----------
# Every rank finds the fault; the user reads it once.
printf '[parallel]\nstrategy = hybrid_shard\nshard_size = 3\n' > "$TMP/bad.ini"
launch badlayout 4 "$TMP/bad.ini"
n=$(grep -c "^shardtrain: error: $TMP/bad.ini:3: .*shard_size.*; hint" "$TMP/badlayout.err")
if [ "$st" -eq 2 ] && [ "$n" -eq 1 ] && [ "$(errors badlayout)" -eq 1 ] &&
   ! grep -q '^shardtrain: rank ' "$TMP/badlayout.err"; then
    ok "shard_size 3 on 4 ranks: one error line at the config line, mpirun exits 2"
else
    not_ok "shard_size 3 on 4 ranks: one error line at the config line, mpirun exits 2"
    diag "$n error lines (want 1)"; show badlayout
fi
# Each rank's own exit status, through a shell around each rank.
timeout 60 mpirun --oversubscribe -np 4 sh -c \
    '"$0" runtime-info "$1" 2>/dev/null; echo "rank-exit $?"' "$SHARDTRAIN" "$TMP/bad.ini" \
    >"$TMP/exits.out" 2>"$TMP/exits.err"
st=$?
if [ "$st" -ne 124 ] && [ "$(grep -c '^rank-exit 2$' "$TMP/exits.out")" -eq 4 ]; then
    ok "shard_size 3 on 4 ranks: every rank exits 2"
else
    not_ok "shard_size 3 on 4 ranks: every rank exits 2"
    diag "mpirun status $st" "$(cat "$TMP/exits.out" "$TMP/exits.err")"
fi

# ---- an error seen by only some ranks: printed once, by the lowest -------
# mpirun's MPMD form gives ranks their own arguments, as a file present on
# some nodes only would.  mpmd NAME NP COMMAND GOOD BAD: ranks below NP/2
# run `shardtrain COMMAND GOOD`, each rank R from NP/2 up `shardtrain
# COMMAND BAD$R.ini`; of 2 ranks one sees the error, of 4 two do, and the
# one line must be rank NP/2's.  Status in $st, output in $TMP/NAME.{out,err}.
mpmd() {
    name=$1 np=$2 cmd=$3 good=$4 bad=$5
    set -- -np $((np / 2)) "$SHARDTRAIN" "$cmd" "$good"
    r=$((np / 2))
    while [ "$r" -lt "$np" ]; do
        set -- "$@" : -np 1 "$SHARDTRAIN" "$cmd" "$bad$r.ini"
        r=$((r + 1))
    done
    timeout 120 mpirun --oversubscribe "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    st=$?
    [ "$st" -eq 124 ] && diag "$name: timed out (hang)"
    return 0
}
printf '[parallel]\nstrategy = full_shard\n' > "$TMP/good.ini"
for np in 2 4; do
    mpmd "some$np" "$np" runtime-info "$TMP/good.ini" "$TMP/missing-on-rank-"
    d="config missing on ranks $((np / 2))..$((np - 1)) of $np: one line, from rank $((np / 2)), exit 2"
    if [ "$st" -eq 2 ] && [ "$(errors "some$np")" -eq 1 ] &&
       grep -q "^shardtrain: error: $TMP/missing-on-rank-$((np / 2)).ini: " "$TMP/some$np.err" &&
       ! grep -q '^shardtrain: rank ' "$TMP/some$np.err"; then ok "$d"
    else not_ok "$d"; show "some$np"; fi
done

# ---- shardtrain train under mpirun: the same, through the train loop ----
# A bad value every rank reads, and data shards missing on some ranks only
# (found after start-up, by the train loop's set-up).
prepare_test_data
printf '[model]\narch = gpt9\n' > "$TMP/badarch.ini"
for np in 2 4; do
    timeout 60 mpirun --oversubscribe -np "$np" "$SHARDTRAIN" train "$TMP/badarch.ini" \
        >"$TMP/badarch$np.out" 2>"$TMP/badarch$np.err"
    st=$?
    d="train with a bad model.arch on $np ranks: exactly one error line, mpirun exits 2"
    if [ "$st" -eq 2 ] && [ "$(errors "badarch$np")" -eq 1 ] &&
       grep -q "^shardtrain: error: $TMP/badarch.ini:2: .*model.arch" "$TMP/badarch$np.err"
    then ok "$d"; else not_ok "$d"; show "badarch$np"; fi
done
timeout 60 mpirun --oversubscribe -np 4 sh -c \
    '"$0" train "$1" 2>/dev/null; echo "rank-exit $?"' "$SHARDTRAIN" "$TMP/badarch.ini" \
    >"$TMP/archexits.out" 2>"$TMP/archexits.err"
check "train with a bad model.arch on 4 ranks: every rank exits 2" \
    test "$(grep -c '^rank-exit 2$' "$TMP/archexits.out")" -eq 4
write_base_ini "$TMP/train.ini" train.steps=1 train.micro_batch=2
for r in 1 2 3; do
    write_base_ini "$TMP/nodata-$r.ini" train.steps=1 train.micro_batch=2 "data.train=$TMP/data-of-rank-$r/sh_train_*.bin"
done
for np in 2 4; do
    mpmd "nodata$np" "$np" train "$TMP/train.ini" "$TMP/nodata-"
    d="data missing on ranks $((np / 2))..$((np - 1)) of $np: one line, from rank $((np / 2)), exit 2"
    if [ "$st" -eq 2 ] && [ "$(errors "nodata$np")" -eq 1 ] &&
       grep -q "^shardtrain: error: .*data-of-rank-$((np / 2))/" "$TMP/nodata$np.err"
    then ok "$d"; else not_ok "$d"; show "nodata$np"; fi
done

# ---- identity mismatch: the environment claims rank 3, MPI says 0 --------
# No launcher, so no PMIx server: the SLURM_* variables are the claim.
SLURM_PROCID=3 SLURM_NTASKS=4 SLURM_LOCALID=0 SLURM_NODEID=0 \
    timeout 60 "$SHARDTRAIN" runtime-info >"$TMP/mismatch.out" 2>"$TMP/mismatch.err"
st=$?
if [ "$st" -eq 2 ] && [ "$(wc -l < "$TMP/mismatch.err")" -eq 1 ] &&
   grep -q '^shardtrain: error: rank identity mismatch: SLURM_PROCID=3 but MPI rank 0; hint: ' "$TMP/mismatch.err"; then
    ok "SLURM_PROCID=3 without srun: identity mismatch, exit 2"
else
    not_ok "SLURM_PROCID=3 without srun: identity mismatch, exit 2"; show mismatch
fi
