#!/bin/sh
# Times the host's side of a bf16 training step: gpt2-124m (micro-batch
# 64, seq 1024) and llama-1b (micro-batch 8, seq 2048) on one rank, 12
# steps each, through the emulated shardtrain of
# tests/gpu/emu/build_shardtrain.sh in record-only mode with the clock
# kept (ST_EMU_CLOCK, tests/gpu/emu/devmem.c), then bench/host_time.py
# on each.  No kernel runs, so what the clock sees is the host: the real
# binary's engine, data loader and logging, with the emulator's recording
# in place of the driver's launches.  A measurement of this machine's
# CPU, printed with the date, the machine and the commit; it is not a
# test (timings stay out of make check).  The record-only loss is NaN,
# so every step is skipped as non-finite (train.nonfinite_limit is
# raised): the launches are the same, since the skip is decided on the
# device, but the host also prints a warning line a step.
# Usage: bench/host_time.sh EMU_SHARDTRAIN SHARDTRAIN OUTDIR [top_srcdir]
set -eu
emu=$1 st=$2 out=$3 top=${4:-.}
mkdir -p "$out"
. "$top/bench/walk_data.sh"
walk_data host_time.sh
echo "Host time per step under the emulation (measured, $(date -u +%Y-%m-%d)," \
    "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores," \
    "commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)):"
for m in "gpt2-124m 64" "llama-1b 8"; do
    set -- $m
    cat >"$out/$1.ini" <<EOC
[model]
preset = $1
[data]
train = $out/data/sh_train_*.bin
[train]
device = cuda
precision = bf16
micro_batch = $2
global_batch = $2
steps = 12
nonfinite_limit = 1000
[checkpoint]
every = 0
dir = $out/$1/ckpt
[log]
dir = $out/$1/logs
EOC
    rm -rf "$out/$1" "$out/$1.host.rec" "$out/$1.host.clk"
    ST_EMU_RECORD="$out/$1.host.rec" ST_EMU_CLOCK="$out/$1.host.clk" ST_EMU_RECORD_ONLY=1 \
        OMP_NUM_THREADS=1 "$emu" train "$out/$1.ini" >"$out/$1.log" 2>&1 || {
        echo "host_time.sh: the emulated run of $1 failed:" >&2
        tail -n 5 "$out/$1.log" >&2
        exit 1
    }
    rm -rf "$out/$1"   # final weights of nothing
    python3 "$top/bench/host_time.py" "$1" "$out/$1.host.rec" "$out/$1.host.clk"
done
