#!/bin/sh
# The documented way to get the binary and the job scripts (README, "Quick
# start"): `make install` with a prefix the user owns puts shardtrain in
# PREFIX/bin and the job scripts in PREFIX/share/shardtrain/sbatch, and an
# installed script finds the installed binary with nothing on PATH and no
# SHARDTRAIN.  A script run from the source tree finds ./shardtrain in the
# directory the job was submitted from (a build tree); with no binary
# anywhere it says where it looked.  srun is a stand-in here (the real
# Slurm runs of these scripts are tests/slurm.sh's); mpirun is real.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
export OMP_NUM_THREADS=1

prepare_test_data
write_base_ini "$TMP/base.ini" log.dir="$TMP/logs" checkpoint.dir="$TMP/ckpt"

P=$TMP/prefix
make -C "$top_builddir" install prefix="$P" >"$TMP/install.log" 2>&1
check "make install prefix=DIR: the binary and the job scripts" \
    test -x "$P/bin/shardtrain" -a -x "$P/share/shardtrain/sbatch/single-node.sbatch" \
    -a -x "$P/share/shardtrain/sbatch/mpirun.sh" -a -f "$P/share/shardtrain/sbatch/README"

# A PATH without shardtrain, and a stand-in srun that runs its command
# (after srun's own options) once, as srun runs one task.
mkdir -p "$TMP/bin"
cat >"$TMP/bin/srun" <<'EOF'
#!/bin/sh
while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done
echo "$1" >"$SRUN_LOG"
exec "$@"
EOF
chmod +x "$TMP/bin/srun"
# Open MPI's singleton start-up needs its helpers from the system's PATH.
BARE=$TMP/bin:/usr/bin:/bin
check "no shardtrain on that PATH" sh -c "! PATH='$BARE' command -v shardtrain"
run_script() {
    env -u SHARDTRAIN PATH="$BARE" SRUN_LOG="$TMP/srun.log" SLURM_SUBMIT_DIR="$1" \
        OMP_NUM_THREADS=1 bash "$2" "$TMP/base.ini" >"$TMP/script.out" 2>"$TMP/script.err"
}

rm -f "$TMP/srun.log"
run_script "$TMP" "$P/share/shardtrain/sbatch/single-node.sbatch"
check "an installed single-node.sbatch runs the installed binary ($?)" \
    sh -c "test \"\$(cat '$TMP/srun.log')\" = '$P/bin/shardtrain' &&
           test -s '$TMP/ckpt/final/model.safetensors'"
rm -rf "$TMP/ckpt" "$TMP/logs"
env -u SHARDTRAIN PATH="$BARE" sh "$P/share/shardtrain/sbatch/mpirun.sh" "$TMP/base.ini" -np 2 \
    >"$TMP/mpirun.out" 2>"$TMP/mpirun.err"
check "an installed mpirun.sh runs the installed binary on 2 ranks ($?)" \
    sh -c "grep -q 'over 2 rank' '$TMP/mpirun.out' && test -s '$TMP/ckpt/final/model.safetensors'"

# The source tree's copy: the build tree's ./shardtrain, via the submit dir.
rm -f "$TMP/srun.log"
cp "$top_builddir/shardtrain" "$TMP/shardtrain"
run_script "$TMP" "$top_srcdir/sbatch/multi-node.sbatch"
check "the source tree's multi-node.sbatch finds ./shardtrain in the submit directory" \
    test "$(cat "$TMP/srun.log" 2>/dev/null)" = "$TMP/shardtrain"
rm -f "$TMP/srun.log"
run_script "$TMP/data" "$top_srcdir/sbatch/single-node.sbatch"
st=$?
check "no binary anywhere: exit 1 and one error line saying where it looked" \
    sh -c "test $st -eq 1 && test ! -e '$TMP/srun.log' &&
           test \"\$(wc -l <'$TMP/script.err')\" -eq 1 &&
           grep -q '^shardtrain: error: no shardtrain binary (looked at SHARDTRAIN, the installed bindir, PATH and $TMP/data); hint:' '$TMP/script.err'"
rm -f "$TMP/srun.log"
env PATH="$BARE" SHARDTRAIN="$TMP/shardtrain" SRUN_LOG="$TMP/srun.log" bash \
    "$P/share/shardtrain/sbatch/preemptible.sbatch" "$TMP/base.ini" >/dev/null 2>&1
check "SHARDTRAIN still wins over the installed binary" \
    test "$(cat "$TMP/srun.log" 2>/dev/null)" = "$TMP/shardtrain"
