#!/bin/sh
# The emulation's stream race check (tests/gpu/emu/races.c), which every
# emulated shardtrain run goes through (build_shardtrain.sh links it):
#   - on the cases of tests/gpu/emu/race_check.cu (run_races.sh), each
#     mistake a GPU would race on must abort with a line naming both
#     operations: a read, write or free on one stream not ordered after a
#     conflicting access on another; an event recorded before the work it
#     should cover; a synchronisation of the wrong stream; a synchronous
#     copy on the legacy stream after work on a non-blocking one; a
#     cudaMallocAsync block used on another stream; a cuBLASLt product's
#     operand, BGRADB bias or shared workspace (two streams, one context).
#     Each ordering CUDA promises must pass: one
#     stream, an event, cudaStreamSynchronize, cudaDeviceSynchronize,
#     cudaFree, the legacy stream with blocking streams, concurrent reads;
#     and ST_EMU_REVERSE=1 (threads and blocks run last to first) must
#     change the result of a kernel whose blocks read each other's output
#     in one launch, and of one whose threads share memory without a
#     barrier, but not of a race-free one (the reversed runs of
#     cuda_emu.sh, cuda_attention_emu.sh and cuda_train_emu.sh rely on it);
#   - on the engine itself: an emulated shardtrain built from a copy of
#     src/comm/comm_nccl.c without the compute stream's wait for a
#     collective (nccl_wait), and another without the communication
#     stream's wait for compute (order_after_compute), must each abort a
#     2-rank full_shard run over nccl with a race between a kernel or copy
#     and an NCCL collective, where the real engine trains
#     (tests/cuda_nccl_emu.sh).
# Registered in TESTS only where configure found the CUDA toolkit.  About
# three minutes on two cores.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
require command -v g++
export OMP_NUM_THREADS=1
lib="$top_builddir/libshardtrain.a"
. "$top_srcdir/tests/gpu/emu/link_env.sh"

# run_races.sh's TAP, renumbered into this script's.
sh "$top_srcdir/tests/gpu/emu/run_races.sh" "$top_srcdir" "$lib" >"$TMP/races.tap" 2>"$TMP/races.err"
rc=$?
n_cases=0
while IFS= read -r line; do
    case $line in
    "ok "*) ok "race_check ${line#ok [0-9]* - }"; n_cases=$((n_cases + 1)) ;;
    "not ok "*) not_ok "race_check ${line#not ok [0-9]* - }"; n_cases=$((n_cases + 1)) ;;
    esac
done <"$TMP/races.tap"
if [ "$rc" -ne 0 ] || [ "$n_cases" -eq 0 ] ||
   [ "$n_cases" -ne "$(sed -n 's/^1\.\.//p' "$TMP/races.tap")" ]; then
    not_ok "run_races.sh ran every case it planned and passed (exit status $rc)"
    diag "$(tail -n 20 "$TMP/races.err")"
fi

# mutant NAME SED: an emulated shardtrain from a copy of the sources whose
# comm_nccl.c went through SED (which must change it), at $TMP/NAME.
mutant() {
    rm -rf "$TMP/src_$1"
    mkdir -p "$TMP/src_$1/tests/gpu"
    cp -R "$top_srcdir/src" "$top_srcdir/cuda" "$TMP/src_$1/"
    cp -R "$top_srcdir/tests/gpu/emu" "$TMP/src_$1/tests/gpu/"
    f="$TMP/src_$1/src/comm/comm_nccl.c"
    sed "$2" "$top_srcdir/src/comm/comm_nccl.c" >"$f"
    ! cmp -s "$f" "$top_srcdir/src/comm/comm_nccl.c" &&
        nice -n 10 sh "$top_srcdir/tests/gpu/emu/build_shardtrain.sh" "$TMP/$1" \
            "$TMP/src_$1" "$top_builddir" >"$TMP/$1.build" 2>&1
}

prepare_test_data
cat >"$TMP/gpt2.ini" <<EOF2
[model]
arch = gpt2
n_layer = 1
d_model = 128
n_head = 2
vocab_size = 256
seq_len = 32
[data]
train = $TMP/data/sh_train_*.bin
[train]
micro_batch = 1
global_batch = 2
steps = 1
seed = 7
device = cuda
[parallel]
backend = nccl
strategy = full_shard
[log]
every = 1
EOF2

# races_in_engine NAME SED WANT: the mutant NAME aborts its run with a race
# line matching the pattern WANT.
races_in_engine() {
    mutant "$1" "$2" || { diag "$(tail -n 5 "$TMP/$1.build")"; return 1; }
    ST_EMU_DEVICES=2 ranks 2 600 nice -n 10 "$TMP/$1" train -s log.dir="$TMP/$1.logs" \
        -s checkpoint.dir="$TMP/$1.ckpt" "$TMP/gpt2.ini" >"$TMP/$1.out" 2>"$TMP/$1.err"
    rc=$?
    line=$(grep -m1 '^cuda emulation: race: ' "$TMP/$1.err")
    diag "$1: exit status $rc; ${line:-no race line}"
    [ "$rc" -ne 0 ] && printf '%s\n' "$line" | grep -q -- "$3"
}
check "engine without the compute stream's wait for a collective (nccl_wait): a kernel races with the NCCL collective it reads" \
    races_in_engine no_wait_for_comm \
    's/cudaStreamWaitEvent(s->compute, ev, 0)/cudaSuccess/' \
    'reads the device block .* that ncclAllGather (stream [0-9]*, its operation [0-9]*) wrote'
check "engine without the communication stream's wait for compute (order_after_compute): an NCCL collective races with the work that wrote its input" \
    races_in_engine no_wait_for_compute \
    's/cudaStreamWaitEvent(s->stream, s->ready, 0)/cudaSuccess/' \
    '^cuda emulation: race: nccl[A-Za-z]* (stream [0-9]*, its operation [0-9]*) reads'
exit $((tap_fail > 0))
