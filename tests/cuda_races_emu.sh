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
#     (tests/cuda_nccl_emu.sh);
#   - NCCL's contract across ranks, which the emulated NCCL (nccl_mpi.c)
#     checks before every collective: tests/gpu/emu/nccl_check.c's cases
#     on two or three ranks that issue a different count, collective or
#     type on one rank, use communicators in orders whose waits close a
#     cycle (what NCCL may deadlock on; nccl_waits.c names the cycle at
#     once, not after ST_EMU_NCCL_WAIT_S), or never issue, must each abort
#     with one line naming the collective, where without the check MPI
#     truncates on one rank or hangs; the same calls on every rank, a chain
#     of waits that resolves, and two ranks waiting for a late third must
#     run, their sums right; and an engine mutant whose all-gather count
#     differs on group rank 1 is refused at that all-gather;
#   - the board's judgement alone (nccl_wait_cycle.c), on looks made by
#     hand (tests/gpu/emu/nccl_wait_cycle_test.c): a cycle that stood over
#     two looks is named with its whole line; none is named in a first
#     look, after a rank on it moved between looks, or where the cycle
#     does not pass through the looking rank.
# Registered in TESTS only where configure found the CUDA toolkit.  About
# four minutes on two cores.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
require command -v g++
export OMP_NUM_THREADS=1
lib="$top_builddir/libshardtrain.a"
. "$top_srcdir/tests/gpu/emu/link_env.sh"

# merge_tap WHO TAP STATUS LOG: TAP's cases renumbered into this script's,
# each named after WHO, its "# " lines kept as diagnostics; then one check
# that WHO ran every case it planned and exited 0 (LOG's tail if not).
merge_tap() {
    n=0
    while IFS= read -r line; do
        case $line in
        "ok "*) ok "$1 ${line#ok [0-9]* - }"; n=$((n + 1)) ;;
        "not ok "*) not_ok "$1 ${line#not ok [0-9]* - }"; n=$((n + 1)) ;;
        "# "*) diag "${line#\# }" ;;
        esac
    done <"$2"
    planned=$(sed -n 's/^1\.\.//p' "$2")
    if [ "$3" -eq 0 ] && [ "$n" -gt 0 ] && [ "$n" = "$planned" ]; then
        ok "$1 ran the $n cases it planned and exited 0"
    else
        not_ok "$1 ran the ${planned:-?} cases it planned and exited 0 (ran $n, exit status $3)"
        diag "$(tail -n 20 "$4")"
    fi
}

sh "$top_srcdir/tests/gpu/emu/run_races.sh" "$top_srcdir" "$lib" >"$TMP/races.tap" 2>"$TMP/races.err"
merge_tap race_check "$TMP/races.tap" $? "$TMP/races.err"

# NCCL's contract across ranks (nccl_mpi.c's agree, nccl_waits.c's board
# of waits): tests/gpu/emu/nccl_check.c, built as comm_nccl.c is for the
# emulated shardtrain, on the ranks each case lists.  A case that breaks
# the contract must abort with one "cuda emulation: nccl...:" line holding
# each word nccl_check lists ('|' for a space); without the check, the same
# cases die of MPI_ERR_TRUNCATE on one rank while the other finishes, or
# hang.
emu="$top_srcdir/tests/gpu/emu"
cc=$(emu_make_var CC)
nc_flags="-std=c11 -O2 -Wall -Wextra -Werror $EMU_LINK_FLAGS"
nc_built=1
mkdir -p "$TMP/nc"
for f in devmem streams races nccl_waits nccl_wait_cycle; do
    # shellcheck disable=SC2086
    nice -n 10 "$cc" $nc_flags -c "$emu/$f.c" -o "$TMP/nc/$f.o" >>"$TMP/nc.build" 2>&1 ||
        nc_built=0
done
for f in nccl_mpi nccl_check; do
    # shellcheck disable=SC2046,SC2086
    nice -n 10 "$cc" $nc_flags -D_GNU_SOURCE $(emu_make_var CUDA_CFLAGS) \
        $(emu_make_var NCCL_CFLAGS) -I"$emu" -include "$emu/shim_c.h" -c "$emu/$f.c" -o "$TMP/nc/$f.o" >>"$TMP/nc.build" 2>&1 ||
        nc_built=0
done
# shellcheck disable=SC2046,SC2086
[ "$nc_built" -eq 1 ] && "$cc" $EMU_LINK_FLAGS -o "$TMP/nc/nccl_check" "$TMP/nc/"*.o \
    $(emu_make_var CUDA_LIBS) -lm >>"$TMP/nc.build" 2>&1 || nc_built=0
if [ "$nc_built" -eq 1 ] && "$TMP/nc/nccl_check" --list >"$TMP/nc/cases"; then
    ok "nccl_check builds and lists $(wc -l <"$TMP/nc/cases") cases"
else
    not_ok "nccl_check builds and lists its cases"
    diag "$(tail -n 20 "$TMP/nc.build")"
    : >"$TMP/nc/cases"
fi
# mpirun reads its standard input: without </dev/null it would eat the
# rest of the case list.
nc_ran=0
while read -r name np expect what; do
    rc=0
    nc_ran=$((nc_ran + 1))
    ST_EMU_NCCL_WAIT_S=3 ranks "$np" 120 "$TMP/nc/nccl_check" "$name" </dev/null \
        >"$TMP/nc/out" 2>"$TMP/nc/err" || rc=$?
    line=$(grep -m1 -o 'cuda emulation: nccl[A-Za-z]*: .*' "$TMP/nc/err")
    why=
    if [ "$expect" = ok ]; then
        [ "$rc" -eq 0 ] || why="exit status $rc"
        [ -z "$line" ] || why="${why:-it was refused: $line}"
        [ "$(grep -c 'ran to the end' "$TMP/nc/out")" -eq "$np" ] ||
            why="${why:-not all $np ranks ran to their end}"
    else
        [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || why="exit status $rc, not an abort"
        [ -n "$line" ] || why="${why:-no line on stderr ($(head -c 300 "$TMP/nc/err"))}"
        for w in $what; do
            w=$(printf '%s' "$w" | tr '|' ' ')
            case $line in *"$w"*) ;; *) why="${why:-the line lacks '$w': $line}" ;; esac
        done
    fi
    if [ -z "$why" ]; then
        ok "nccl_check $name ($np ranks): ${line:-every rank ran to its end, the sums right}"
    else
        not_ok "nccl_check $name: $why"
    fi
done <"$TMP/nc/cases"
check "nccl_check: every listed case ran ($nc_ran of $(wc -l <"$TMP/nc/cases"))" \
    test "$nc_ran" -eq "$(wc -l <"$TMP/nc/cases")" -a "$nc_ran" -gt 0

# The board's judgement alone (nccl_wait_cycle.c), on looks made by hand
# that real ranks produce only by chance: a cycle seen in one look, a rank
# that moved between two, a cycle this rank is not on.  Its TAP, renumbered
# into this script's.
# shellcheck disable=SC2086
if nice -n 10 "$cc" $nc_flags -o "$TMP/nc/wait_cycle_test" "$emu/nccl_wait_cycle_test.c" \
    "$emu/nccl_wait_cycle.c" >>"$TMP/nc.build" 2>&1; then
    "$TMP/nc/wait_cycle_test" >"$TMP/nc/wait_cycle.tap" 2>"$TMP/nc/wait_cycle.err"
    merge_tap nccl_wait_cycle "$TMP/nc/wait_cycle.tap" $? "$TMP/nc/wait_cycle.err"
else
    not_ok "nccl_wait_cycle_test builds"
    diag "$(tail -n 20 "$TMP/nc.build")"
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

# aborts_in_engine NAME SED LINE WANT: the mutant NAME aborts its run with
# a line (the first part of stderr matching LINE, a grep -o pattern)
# matching the pattern WANT.
aborts_in_engine() {
    mutant "$1" "$2" || { diag "$(tail -n 5 "$TMP/$1.build")"; return 1; }
    ST_EMU_DEVICES=2 ranks 2 600 nice -n 10 "$TMP/$1" train -s log.dir="$TMP/$1.logs" \
        -s checkpoint.dir="$TMP/$1.ckpt" "$TMP/gpt2.ini" >"$TMP/$1.out" 2>"$TMP/$1.err"
    rc=$?
    line=$(grep -m1 -o -- "$3" "$TMP/$1.err")
    diag "$1: exit status $rc; ${line:-no such line}"
    [ "$rc" -ne 0 ] && printf '%s\n' "$line" | grep -q -- "$4"
}
# races_in_engine NAME SED WANT: a race line, from the line's start.
races_in_engine() { aborts_in_engine "$1" "$2" '^cuda emulation: race: .*' "$3"; }
check "engine without the compute stream's wait for a collective (nccl_wait): a kernel races with the NCCL collective it reads" \
    races_in_engine no_wait_for_comm \
    's/cudaStreamWaitEvent(s->compute, ev, 0)/cudaSuccess/' \
    'reads the device block .* that ncclAllGather (stream [0-9]*, its operation [0-9]*) wrote'
check "engine without the communication stream's wait for compute (order_after_compute): an NCCL collective races with the work that wrote its input" \
    races_in_engine no_wait_for_compute \
    's/cudaStreamWaitEvent(s->stream, s->ready, 0)/cudaSuccess/' \
    '^cuda emulation: race: nccl[A-Za-z]* (stream [0-9]*, its operation [0-9]*) reads'
# The engine's own collectives go through the same check: a mutant whose
# all-gather asks one element more on group rank 1 is refused there, with
# both ranks' calls named.
check "engine whose ranks all-gather different counts: refused at that all-gather, both calls named" \
    aborts_in_engine count_differs \
    's/ncclAllGather(send, recv, (size_t)count,/ncclAllGather(send, recv, (size_t)count + (size_t)c->rank,/' \
    'cuda emulation: nccl[A-Za-z]*: .*' \
    'ncclAllGather: collective [0-9]* on communicator [0-9]* differs between ranks'
exit $((tap_fail > 0))
