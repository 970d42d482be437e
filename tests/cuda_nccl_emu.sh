#!/bin/sh
# What a training step asks of the device's streams and of NCCL, checked
# without a GPU on the emulated shardtrain (tests/gpu/emu/build_shardtrain.sh),
# whose runtime trace (tests/gpu/emu/streams.c, ST_EMU_TRACE) records stream
# priorities, every synchronisation and every NCCL collective with its
# communicator and stream; NCCL itself is tests/gpu/emu/nccl_mpi.c, blocking
# MPI collectives, so parallel.backend = nccl trains here on emulated
# devices, one per rank (ST_EMU_DEVICES).  Checked (issue 13 item 5):
#   - hybrid_shard 2x2 over nccl on 4 ranks gives the 1-rank emulated
#     losses and weights (fsdp.sh's fp32 tolerance, 1e-5);
#   - the communication stream has the device's greatest priority, above
#     every other stream the process made (the compute stream);
#   - every collective of every communicator goes to that one stream, and
#     every rank issues the same sequence of (collective, communicator,
#     count): the order comm_nccl.c documents, under which two
#     communicators never need to progress at once; each replicate-group
#     all-reduce of a gradient follows the shard-group reduce-scatter of the
#     same size;
#   - the compute stream waits for a replicate all-reduce one reduction
#     after it was issued (it runs behind the backward), except for each
#     step's last two;
#   - no_shard (DDP) on 2 ranks over nccl gives the 1-rank losses, and
#     the compute stream waits for each unit's all-reduce only after the
#     next unit's was issued (each is issued as its unit's backward ends
#     and runs behind the next unit's backward), except each micro-step's
#     last;
#   - no device-wide synchronisation in the whole run (so none in a step),
#     over nccl and over the host-staged mpi backend; the staged copies wait
#     for the compute stream alone;
#   - over nccl, a step that does not log waits for the device nowhere:
#     with log.every = 100 (reads after step 1 and the last), a 3-step run
#     makes exactly as many stream synchronisations as a 2-step run (the
#     step verdict, engine/step_verdict.c, decides and counts the update on
#     the device); a step that logs waits once (its read of the steps'
#     records): with log.every = 1 the 3-step run makes exactly one more;
#   - every run goes through the emulation's stream race check
#     (tests/gpu/emu/races.c: a device operation not ordered after a
#     conflicting one on another stream aborts the run), and over nccl each
#     rank's check saw the compute and communication streams depend on
#     each other and found every such pair ordered;
#   - a bf16 full_shard step on 4 ranks zeroes none of the buffers its
#     gathers fill (kernels.h's alloc_raw, issue 13 item 3): the memsets
#     that a 3-step run makes beyond a 2-step run include none of the size
#     of an all-gather's bf16 receive buffer (checked to fail, by hand, with
#     that buffer allocated zeroed again).
# Registered only where configure found the CUDA toolkit.  Six to twelve
# minutes on two shared cores.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
require command -v g++
export OMP_NUM_THREADS=1

EMU="$TMP/shardtrain-emu"
build_emulated_shardtrain "$EMU" "emulated shardtrain builds, importing no CUDA runtime or NCCL call but cudaGetErrorString"

prepare_test_data

cat >"$TMP/gpt2.ini" <<EOF2
[model]
arch = gpt2
n_layer = 1
d_model = 128
n_head = 2
vocab_size = 256
seq_len = 64
[data]
train = $TMP/data/sh_train_*.bin
[train]
micro_batch = 1
global_batch = 4
seed = 7
device = cuda
[optim]
lr = 3e-3
warmup_steps = 1
[log]
every = 1
EOF2

# run NAME NP STEPS [-s ...]: train into $TMP/NAME on NP ranks, each with
# its own emulated device, tracing into $TMP/NAME.trace.PID
run() {
    name=$1 np=$2 steps=$3
    shift 3
    ST_EMU_DEVICES=$np ST_EMU_TRACE="$TMP/$name.trace" \
        ranks "$np" 600 nice -n 10 "$EMU" train -s log.dir="$TMP/$name/logs" \
        -s checkpoint.dir="$TMP/$name/ckpt" -s train.steps="$steps" "$@" "$TMP/gpt2.ini" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
}
traces() { ls "$TMP/$1".trace.[0-9]* 2>/dev/null; }
ran() { # NAME NP: the run finished and left one trace per rank
    [ -s "$TMP/$1/ckpt/final/model.safetensors" ] && [ "$(traces "$1" | wc -l)" -eq "$2" ]
}

hyb="-s parallel.backend=nccl -s parallel.strategy=hybrid_shard -s parallel.shard_size=2 \
    -s log.every=100"
run ref 1 3 -s parallel.backend=mpi -s log.every=100
run hyb3 4 3 $hyb
run hyb2 4 2 $hyb
run staged 2 2 -s parallel.backend=mpi -s parallel.strategy=full_shard
fsbf="-s parallel.backend=nccl -s parallel.strategy=full_shard -s train.precision=bf16"
run fsbf2 4 2 $fsbf
run fsbf3 4 3 $fsbf
run ddp3 2 3 -s parallel.backend=nccl -s parallel.strategy=no_shard -s log.every=100
for r in "ref 1" "hyb3 4" "hyb2 4" "staged 2" "fsbf2 4" "fsbf3 4" "ddp3 2"; do
    set -- $r
    if ran "$1" "$2"; then ok "$1: the run completes on $2 rank(s), one trace each"
    else not_ok "$1: the run completes"; diag "$(tail -n 8 "$TMP/$1.err")"; fi
done

check "hybrid_shard 2x2 over (emulated) nccl matches 1 rank within 1e-5" \
    compare_runs --steps 1,3 "$TMP/hyb3" "$TMP/ref" 1e-5

all_traces() { # NAME PREDICATE: PREDICATE holds for every trace of run NAME
    for t in $(traces "$1"); do "$2" "$t" || return 1; done
}

# Every nccl line of a rank names one stream.
one_comm_stream() { # TRACE
    [ "$(awk '$1 == "nccl" { print $4 }' "$1" | sort -u | wc -l)" -eq 1 ]
}
check "nccl: every collective of every communicator on one stream" all_traces hyb3 one_comm_stream

# The streams of the nccl lines were created at the greatest priority of
# the range the device reported, and no other stream has that priority or
# a higher one (CUDA: lower numbers are higher).
comm_priority_ok() { # TRACE
    awk '
        $1 == "priority_range" { greatest = $3; have = 1 }
        $1 == "stream" { prio[$2] = $4 }
        $1 == "nccl" { comm[$4] = 1; n++ }
        END {
            if (!have || n == 0) exit 1
            for (x in comm) if (prio[x] != greatest) exit 1
            for (x in prio) if (!(x in comm) && prio[x] <= greatest) exit 1
        }' "$1"
}
check "nccl: the communication stream has the device's greatest priority, above compute" \
    all_traces hyb3 comm_priority_ok

# The same sequence of collectives on every rank; the stream column (4th)
# is a per-process handle, left out.
sequence() { awk '$1 == "nccl" { print $2, $3, $5 }' "$1"; }
same_sequence() { # NAME
    first= i=0
    for t in $(traces "$1"); do
        i=$((i + 1))
        sequence "$t" >"$TMP/seq$i"
        [ -s "$TMP/seq$i" ] || return 1
        if [ -z "$first" ]; then first=$TMP/seq$i; else cmp -s "$first" "$TMP/seq$i" || return 1; fi
    done
}
check "nccl: every rank issues the same sequence of (collective, communicator, count)" \
    same_sequence hyb3

# Communicators are made in groups.c's order: 0 world, 1 shard, 2
# replicate.  Each gradient all-reduce over the replicate group has a
# reduce-scatter of the same count over the shard group before it.
reduce_order_ok() { # TRACE
    awk '
        $1 == "comm" { size[$2] = $4 }
        $1 == "nccl" && $2 == "reduce_scatter" && $3 == 1 { pending[$5]++ }
        $1 == "nccl" && $2 == "all_reduce" && $3 == 2 {
            if (pending[$5] < 1) exit 1
            pending[$5]--; n++
        }
        END { if (n == 0 || size[1] != 2 || size[2] != 2) exit 1 }' "$1"
}
check "hybrid_shard: each replicate all-reduce follows the shard reduce-scatter of its gradient" \
    all_traces hyb3 reduce_order_ok

# The replicate all-reduce of a unit runs behind a later unit's backward
# (fsdp.c's replicate_finish): the compute stream waits for it only after
# the next reduce-scatter has been issued, except for the micro-step's last
# two (the last block's and the embedding's), which the micro-step's end
# finishes with no reduce-scatter after them.  The run's model has one
# block, so 3 units: each rank's 3-step trace waits for 9 replicate
# all-reduces, 6 of them at once.  The engine that waited for each as soon
# as it issued it waited at once for all 9 (checked by hand with the
# emulated shardtrain built from that engine).
replicate_behind_backward() { # TRACE
    awk '
        $1 == "stream" && !compute { compute = $2 }
        $1 == "nccl" { last[$4] = ($2 == "all_reduce" && $3 == 2); if ($2 == "reduce_scatter") rs++ }
        $1 == "record" { ar[$2] = last[$3]; at[$2] = rs; last[$3] = 0 }
        $1 == "wait" && $2 == compute && ar[$3] { n++; if (at[$3] == rs) now++; ar[$3] = 0 }
        END { exit !(n == 9 && now == 6) }' "$1"
}
check "hybrid_shard: the compute stream waits for a replicate all-reduce only after the next reduce-scatter is issued (the last two of each step excepted)" \
    all_traces hyb3 replicate_behind_backward

# no_shard has no reduce-scatter: a unit's all-reduce (over the replicate
# group, communicator 2, of 2 ranks; the shard group is 1 rank) is issued
# as soon as its backward ends (fsdp.c's reduce_start), and the compute
# stream waits for it after the next unit's backward, by when the next
# all-reduce was issued; only each micro-step's last (the embedding's) is
# waited for with none after it.  3 units, 2 micro-steps a step (global
# batch 4 on 2 ranks of 1), 3 steps: 18 all-reduces waited for, 12 after
# the next was issued.  The engine that issued each a unit later (at the
# next unit's reduce_finish) and waited for it before issuing the next
# gives 0 of 18.
check "no_shard 2 ranks over (emulated) nccl matches 1 rank within 1e-5" \
    compare_runs --steps 1,3 "$TMP/ddp3" "$TMP/ref" 1e-5
ddp_allreduce_behind_backward() { # TRACE
    awk '
        $1 == "comm" { size[$2] = $4 }
        $1 == "stream" && !compute { compute = $2 }
        $1 == "nccl" { last[$4] = ($2 == "all_reduce" && $3 == 2); if (last[$4]) issued++ }
        $1 == "record" { ar[$2] = last[$3]; at[$2] = issued; last[$3] = 0 }
        $1 == "wait" && $2 == compute && ar[$3] { n++; if (issued > at[$3]) later++; ar[$3] = 0 }
        END { exit !(size[2] == 2 && n == 18 && later == 12) }' "$1"
}
check "no_shard: the compute stream waits for a unit's all-reduce only after the next unit's is issued (each micro-step's last excepted)" \
    all_traces ddp3 ddp_allreduce_behind_backward

count() { # WORD TRACE: lines of the trace that start with WORD
    awk -v w="$1" '$1 == w { n++ } END { print n + 0 }' "$2"
}
no_device_sync() { [ "$(count sync_device "$1")" -eq 0 ]; }
check "nccl: no cudaDeviceSynchronize anywhere in the run" all_traces hyb3 no_device_sync
check "staged mpi: no cudaDeviceSynchronize anywhere in the run" all_traces staged no_device_sync

# The first stream a rank creates is the kernels' compute stream (the
# kernels open before the groups); the staging copies wait for it alone.
staged_waits_compute() {
    awk '
        $1 == "stream" && !first { first = $2 }
        $1 == "sync_stream" { n++; if ($2 != first) bad = 1 }
        END { exit !(n > 0 && !bad) }' "$1"
}
check "staged mpi: the staging copies wait for the compute stream only" \
    all_traces staged staged_waits_compute

# The host waits of one step: the 3-step run's stream synchronisations
# minus the 2-step run's, rank by rank.  Every rank of a run does the same,
# so the sorted counts pair up without naming ranks.  With log.every = 100
# the extra step is one that does not log (the 2-step run reads after
# steps 1 and 2, the 3-step run after 1 and 3); with log.every = 1 (the
# bf16 full_shard runs) it logs.
syncs() { # NAME: each trace's sync_stream count, sorted
    for t in $(traces "$1"); do count sync_stream "$t"; done | sort -n
}
waits_per_step() { # NAME3 NAME2 WANT
    syncs "$1" >"$TMP/s3"
    syncs "$2" >"$TMP/s2"
    [ "$(wc -l <"$TMP/s3")" -eq 4 ] && [ "$(wc -l <"$TMP/s2")" -eq 4 ] &&
        paste "$TMP/s3" "$TMP/s2" | awk -v w="$3" '{ if ($1 - $2 != w) bad = 1 } END { exit bad }'
}
check "nccl: a step that does not log makes no host wait (hybrid 2x2, log.every 100)" \
    waits_per_step hyb3 hyb2 0
diag "stream synchronisations per rank, 3 steps: $(tr '\n' ' ' <"$TMP/s3")2 steps: $(tr '\n' ' ' <"$TMP/s2")"
check "nccl: a step that logs waits once (bf16 full_shard 4, log.every 1)" \
    waits_per_step fsbf3 fsbf2 1
diag "stream synchronisations per rank, 3 steps: $(tr '\n' ' ' <"$TMP/s3")2 steps: $(tr '\n' ' ' <"$TMP/s2")"

# The race check's count at exit (races.c): OPERATIONS ACCESSES
# ORDERED_ACROSS.  A race would have aborted the run (checked above that
# each completed); here, that the check followed the run's operations and
# met accesses on one stream that conflict with earlier ones on the other,
# every one ordered by an event wait or a synchronisation.
race_checked_across() { # TRACE
    awk '$1 == "race_check" { n++; if ($2 > 0 && $3 >= $2 && $4 > 0) good = 1 }
         END { exit !(n == 1 && good) }' "$1"
}
for r in hyb3 fsbf3 ddp3; do
    check "$r: the race check followed every rank's device operations and found each cross-stream dependency ordered" \
        all_traces "$r" race_checked_across
done
diag "race_check (operations, accesses, ordered across streams) of hyb3's ranks: $(for t in $(traces hyb3); do awk '$1 == "race_check" { printf "%s/%s/%s ", $2, $3, $4 }' "$t"; done)"

# The buffers a collective fills whole are not zeroed first.  One step's
# memsets are those of the 3-step bf16 run beyond the 2-step run's (all
# ranks together: set-up and the final weights cancel); none may have the
# size of a bf16 all-gather's receive buffer, COUNT x group size x 2 bytes.
# The zeroed buffers of a step are the fp32 gradient accumulators (COUNT x
# group size x 4 bytes), the shards' gradients (COUNT x 4) and 8-byte
# sums: with a shard group of 4 no size collides with a receive buffer's
# (with 2, a shard's fp32 gradient would).
memsets() { # NAME: every memset size of the run's traces, sorted
    for t in $(traces "$1"); do awk '$1 == "memset" { print $2 }' "$t"; done | sort
}
gather_sizes() { # NAME
    for t in $(traces "$1"); do
        awk '$1 == "comm" { size[$2] = $4 }
             $1 == "nccl" && $2 == "all_gather" && $6 == 2 { print $5 * size[$3] * 2 }' "$t"
    done | sort -u
}
step_zeroes_no_gather_buffer() {
    memsets fsbf3 >"$TMP/m3"
    memsets fsbf2 >"$TMP/m2"
    gather_sizes fsbf3 >"$TMP/gathers"
    # the multiset difference m3 - m2
    comm -23 "$TMP/m3" "$TMP/m2" >"$TMP/mstep"
    [ -s "$TMP/gathers" ] && [ -s "$TMP/mstep" ] && ! grep -qxFf "$TMP/gathers" "$TMP/mstep"
}
check "bf16 full_shard on 4 ranks: a step zeroes no buffer that an all-gather fills" \
    step_zeroes_no_gather_buffer
diag "one step's memset sizes (all ranks): $(uniq -c "$TMP/mstep" | tr -s ' \n' ' '); all-gather buffers: $(tr '\n' ' ' <"$TMP/gathers")"

exit $((tap_fail > 0))
