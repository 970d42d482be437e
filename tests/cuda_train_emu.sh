#!/bin/sh
# The real shardtrain's CUDA training path, end to end, under the host
# emulation of tests/gpu/emu/: build_shardtrain.sh links the binary with
# the CUDA runtime calls mapped onto host memory and the kernels of cuda/
# run as host fibers, so train.device = cuda binds an emulated cuda:0 and
# training goes through src/kernels/kernels_cuda.c (device memory, model_cuda
# units in fp32 and bf16 storage, AdamW, sumsq) and, on 2 ranks sharing the
# device with parallel.backend = mpi, through comm_mpi.c's host-staged
# collectives.  Checked against the CPU backend of the normal binary: fp32
# losses within 1e-4 relative at every step and final weights within 1e-4
# (norm-wise); bf16 within 2e-2; 2 ranks (full_shard) give the 1-rank
# emulated result within fsdp.sh's tolerances (1e-5 fp32, 1e-3 bf16).
# A block's CUDA threads resumed in reverse order give the same bits (no
# kernel depends on thread order), and so does a second run.  The
# optimizer is one AdamW launch per unit per step (the launch log), and a
# bf16 run on 2 ranks resumed from its step-2 checkpoint continues with the
# uninterrupted run's losses and weights bit for bit (the shard's bf16
# copy, which the gathers send, is packed afresh after the load).  Tiny models the attention kernels
# accept (head dim 64): gpt2 and llama with grouped-query attention
# (n_kv_head < n_head); bf16 attention on the tensor-core kernels, as the
# emulation's launch log shows.  Instruction data's masked targets (-1,
# ignored by the loss) give the CPU's losses and weights.  A few minutes
# on two cores.  Four ranks on the one device (full_shard, and hybrid_shard
# 2 x 2) match one rank within 1e-5.  LoRA (rank 4, alpha 12, every target,
# dropout 0.1; cuda/model_common.cu's adapters over a frozen base) matches
# the CPU backend as above, the adapters (final/adapter) and the gradient
# norm compared on their own too, in fp32 and bf16 for gpt2 and llama, and
# on 2 ranks full_shard matches 1 rank; gpt2 fp32 without dropout too
# (the adapters' other branch, no dropout or mask kernel).  A vocabulary of 300 stored as 384
# padded rows gives the unpadded run's losses.  Out of device memory
# (ST_EMU_DEVICE_MEM): a device exactly as large as a run's peak trains it
# bit for bit, one byte less or any smaller size down to none ends it with
# exit 1 and one line, and so does one rank of two running out mid-step.
# Not covered:
# cuBLASLt (the CPU st_gemm stands in), real streams and concurrency,
# NCCL.  Registered only where configure found the CUDA toolkit.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
require command -v g++
export OMP_NUM_THREADS=1

EMU="$TMP/shardtrain-emu"
build_emulated_shardtrain "$EMU" "emulated shardtrain builds, importing no CUDA runtime call but cudaGetErrorString"

prepare_test_data

STEPS=3
write_cfg() { # FILE ARCH
    cat >"$1" <<EOF2
[model]
arch = $2
n_layer = 2
d_model = 128
n_head = 2
vocab_size = 256
seq_len = 64
[data]
train = $TMP/data/sh_train_*.bin
[train]
micro_batch = 1
global_batch = 2
steps = $STEPS
seed = 7
[optim]
lr = 3e-3
warmup_steps = 1
[parallel]
backend = mpi
[log]
every = 1
EOF2
}
write_cfg "$TMP/gpt2.ini" gpt2
write_cfg "$TMP/llama.ini" llama
sed -i 's/^n_head = 2$/n_head = 2\nn_kv_head = 1/' "$TMP/llama.ini"

# run NAME BINARY NP CFG [-s ...]: train into $TMP/NAME
run() {
    name=$1 bin=$2 np=$3 cfg=$4
    shift 4
    set -- train -s log.dir="$TMP/$name/logs" -s checkpoint.dir="$TMP/$name/ckpt" "$@" "$cfg"
    ST_EMU_LAUNCH_LOG="$TMP/$name.launches" \
        ranks "$np" 900 nice -n 10 "$bin" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
}

# launched NAME KERNEL: the emulated run NAME launched KERNEL (the shim's
# launch log, one "count name" line per kernel)
launched() {
    [ -f "$TMP/$1.launches" ] && grep -q " $2" "$TMP/$1.launches"
}

# compare A B TOL: losses at every step and final weights of two runs
# within TOL relative (tests/compare_runs.py)
compare() {
    python3 "$top_srcdir/tests/compare_runs.py" "$TMP/$1" "$TMP/$2" "$3" "$STEPS"
}

# same NAME REF TOL WHAT: NAME ran and matches REF within TOL
same() {
    if [ ! -s "$TMP/$1/ckpt/final/model.safetensors" ]; then
        not_ok "$4 (the run failed)"
        diag "$(tail -n 8 "$TMP/$1.err")"
    elif compare "$1" "$2" "$3"; then ok "$4"
    else not_ok "$4"; fi
}

# The run really computed on the (emulated) GPU: every rank's identity
# line names cuda:0; the CPU reference says cpu.
on_device() { # NAME NP DEVICE
    test "$(grep -c "^shardtrain: rank [0-9]*/$2 .* device $3 identity" "$TMP/$1.err")" -eq "$2"
}

# CPU references (normal binary), then the emulated runs, two at a time
# (each is one process on one core).
for arch in gpt2 llama; do
    run cpu_$arch "$SHARDTRAIN" 1 "$TMP/$arch.ini" -s train.device=cpu
    run cpu_${arch}_bf16 "$SHARDTRAIN" 1 "$TMP/$arch.ini" -s train.device=cpu \
        -s train.precision=bf16
done
run cpu_gpt2_seed "$SHARDTRAIN" 1 "$TMP/gpt2.ini" -s train.device=cpu -s train.seed=8
check "cpu reference reports device cpu" on_device cpu_gpt2 1 cpu

# ST_EMU_REVERSE=1 resumes each block's CUDA threads last to first: a
# race-free kernel gives the same bits in both orders (no atomics anywhere).
for arch in gpt2 llama; do
    (export ST_EMU_DEVICE_PEAK="$TMP/emu_$arch.peak"
     run emu_$arch "$EMU" 1 "$TMP/$arch.ini" -s train.device=cuda) &
    if [ $arch = gpt2 ]; then
        run emu_gpt2_bf16_again "$EMU" 1 "$TMP/gpt2.ini" -s train.device=cuda \
            -s train.precision=bf16 &
    fi
    if [ $arch = llama ]; then
        (export ST_EMU_REVERSE=1; run emu_llama_bf16_rev "$EMU" 1 "$TMP/llama.ini" \
            -s train.device=cuda -s train.precision=bf16) &
    fi
    run emu_${arch}_bf16 "$EMU" 1 "$TMP/$arch.ini" -s train.device=cuda \
        -s train.precision=bf16
    wait
done
for arch in gpt2 llama; do
    check "$arch: emulated run reports device cuda:0" on_device emu_$arch 1 cuda:0
    check "$arch bf16: emulated run reports device cuda:0" on_device emu_${arch}_bf16 1 cuda:0
    same emu_$arch cpu_$arch 1e-4 "$arch fp32: cuda backend matches the cpu backend within 1e-4"
    same emu_${arch}_bf16 cpu_${arch}_bf16 2e-2 \
        "$arch bf16: cuda backend matches the cpu backend within 2e-2"
done

# bf16 attention runs on the tensor-core kernels (cuda/attention_tc.cu);
# fp32 keeps the CUDA-core ones.
for arch in gpt2 llama; do
    check "$arch bf16: attention ran on the tensor-core kernels (forward, dQ, dK/dV)" \
        sh -c "grep -q ' attn_fwd_tc_kernel' '$TMP/emu_${arch}_bf16.launches' &&
               grep -q ' attn_bwd_dq_tc_kernel' '$TMP/emu_${arch}_bf16.launches' &&
               grep -q ' attn_bwd_dkdv_tc_kernel' '$TMP/emu_${arch}_bf16.launches'"
    if launched emu_$arch attn_fwd_kernel && ! launched emu_$arch attn_fwd_tc_kernel; then
        ok "$arch fp32: attention ran on the CUDA-core kernels"
    else
        not_ok "$arch fp32: attention ran on the CUDA-core kernels"
    fi
done

if [ -s "$TMP/emu_llama_bf16_rev/ckpt/final/model.safetensors" ] &&
   same_tensors "$TMP/emu_llama_bf16_rev/ckpt/final/model.safetensors" \
                "$TMP/emu_llama_bf16/ckpt/final/model.safetensors"; then
    ok "llama bf16: threads resumed in reverse order give the same weights bit for bit"
else
    not_ok "llama bf16: threads resumed in reverse order give the same weights bit for bit"
fi

check "gpt2 bf16: a second emulated run gives the same losses and weights bit for bit" \
    compare_runs --exact "$TMP/emu_gpt2_bf16_again" "$TMP/emu_gpt2_bf16" "$STEPS"

# launches NAME KERNEL: how many times the run NAME (all its ranks) launched
# exactly KERNEL
launches() {
    awk -v k="$2" '$2 == k { n += $1 } END { print n + 0 }' "$TMP/$1.launches" 2>/dev/null
}
# n_layer 2: units embedding, 2 blocks, head
units=4
for name in emu_gpt2 emu_llama_bf16; do
    n=$(launches $name 'adamw_unit_kernel<kVec>')
    check "$name: one AdamW launch per unit per step ($n = $STEPS steps x $units units)" \
        test "$n" -eq $((STEPS * units))
done

# Instruction data (loss masks): the prompt positions' targets are -1, which
# cuda/xent.cu must ignore as the CPU does (shardtrain(1), INSTRUCTION DATA).
python3 - "$(shakespeare_text)" "$TMP/inst.jsonl" <<'EOF2'
import json, sys
lines = [l for l in open(sys.argv[1], encoding="utf-8").read().split("\n") if l.strip()][:400]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for i in range(0, len(lines) - 1, 2):
        f.write(json.dumps({"prompt": lines[i] + "\n", "completion": lines[i + 1]}) + "\n")
EOF2
"$SHARDTRAIN" prepare --format jsonl --val-fraction 0 "$TMP/inst.jsonl" "$TMP/data/inst" \
    >"$TMP/inst.out" 2>&1
check "instruction data prepared with its loss mask" test -s "$TMP/data/inst_train_000000.mask"
inst="-s data.train=$TMP/data/inst_train_*.bin"
run cpu_gpt2_inst "$SHARDTRAIN" 1 "$TMP/gpt2.ini" -s train.device=cpu $inst
run emu_gpt2_inst "$EMU" 1 "$TMP/gpt2.ini" -s train.device=cuda $inst
same emu_gpt2_inst cpu_gpt2_inst 1e-4 \
    "gpt2 fp32 on instruction data (masked targets): cuda backend matches the cpu backend within 1e-4"
check "the instruction data leaves most tokens untrained (prompts and padding are -1 targets)" \
    python3 -c "
import sys
m = open('$TMP/data/inst_train_000000.mask', 'rb').read()[1024:]
sys.exit(not 0 < sum(b & 1 for b in m) < len(m) // 2 + len(m) // 4)"

# The padded vocabulary (model.vocab_padding, default 128; tests/vocab_pad.sh
# for the CPU side): 300 token ids stored as 384 rows, 2 steps.
# The head's three products run over the stored rows (N = 384 for the
# logits, K = 384 for the input gradient, M = 384 for the weight gradient,
# logit rows 384 apart) and the cross-entropy zeroes the padding columns'
# gradient.  The padded emulated run gives the unpadded one's losses bit
# for bit and its weights within 1e-6 (the stand-in product, the CPU's
# st_gemm, blocks the last rows of M = 300 and M = 384 differently, which
# moves a few roundings of the weight gradient's last rows), and the CPU's
# within the bf16 tolerance above.
v300="-s train.precision=bf16 -s model.vocab_size=300 -s train.steps=2"
for arch in gpt2 llama; do
    run emu_${arch}_v300 "$EMU" 1 "$TMP/$arch.ini" -s train.device=cuda $v300 &
    run emu_${arch}_v300_p1 "$EMU" 1 "$TMP/$arch.ini" -s train.device=cuda $v300 \
        -s model.vocab_padding=1
    wait
    run cpu_${arch}_v300 "$SHARDTRAIN" 1 "$TMP/$arch.ini" -s train.device=cpu $v300
    check "$arch bf16, vocabulary 300 stored as 384 rows: the unpadded run's losses bit for bit" \
        compare_runs --exact --only metrics "$TMP/emu_${arch}_v300" \
        "$TMP/emu_${arch}_v300_p1" 2
    check "$arch bf16, vocabulary 300 stored as 384 rows: the unpadded run's weights within 1e-6" \
        compare_runs "$TMP/emu_${arch}_v300" "$TMP/emu_${arch}_v300_p1" 1e-6 2
    check "$arch bf16, vocabulary 300 stored as 384 rows: cuda backend matches the cpu backend within 2e-2" \
        compare_runs "$TMP/emu_${arch}_v300" "$TMP/cpu_${arch}_v300" 2e-2 2
done

# LoRA on the CUDA units: the adapters of every target, dropout masks from
# the device's st_lora_keep_at, frozen base weights (no gradient products).
# The merged final weights are mostly the frozen base, so the adapters
# themselves (PEFT's adapter file) and the gradient norm (the adapters'
# gradient alone) are compared as well, at the same tolerances.
for arch in gpt2 llama; do
    { cat "$TMP/$arch.ini"
      printf '[lora]\nrank = 4\nalpha = 12\ntargets = all\ndropout = 0.1\n'; } \
        >"$TMP/lora_$arch.ini"
    run cpu_lora_$arch "$SHARDTRAIN" 1 "$TMP/lora_$arch.ini" -s train.device=cpu
    run cpu_lora_${arch}_bf16 "$SHARDTRAIN" 1 "$TMP/lora_$arch.ini" -s train.device=cpu \
        -s train.precision=bf16
    run emu_lora_$arch "$EMU" 1 "$TMP/lora_$arch.ini" -s train.device=cuda &
    run emu_lora_${arch}_bf16 "$EMU" 1 "$TMP/lora_$arch.ini" -s train.device=cuda \
        -s train.precision=bf16
    wait
done
# same_lora NAME REF TOL WHAT: as same, plus the adapters and the gradient norm
same_lora() {
    same "$@"
    if [ -s "$TMP/$1/ckpt/final/adapter/adapter_model.safetensors" ] &&
       python3 "$top_srcdir/tests/compare_runs.py" --only weights \
           "$TMP/$1/ckpt/final/adapter/adapter_model.safetensors" \
           "$TMP/$2/ckpt/final/adapter/adapter_model.safetensors" "$3" &&
       python3 "$top_srcdir/tests/compare_runs.py" --only metrics --field grad_norm \
           "$TMP/$1" "$TMP/$2" "$3" "$STEPS"; then
        ok "$4: adapters and gradient norms"
    else
        not_ok "$4: adapters and gradient norms"
    fi
}
for arch in gpt2 llama; do
    check "$arch LoRA: emulated run reports device cuda:0" on_device emu_lora_$arch 1 cuda:0
    same_lora emu_lora_$arch cpu_lora_$arch 1e-4 \
        "$arch LoRA fp32: cuda backend matches the cpu backend within 1e-4"
    same_lora emu_lora_${arch}_bf16 cpu_lora_${arch}_bf16 2e-2 \
        "$arch LoRA bf16: cuda backend matches the cpu backend within 2e-2"
    check "$arch LoRA: the adapters' dropout ran on the device" \
        sh -c "grep -q ' lora_dropout_kernel' '$TMP/emu_lora_$arch.launches' &&
               grep -q ' lora_mask_add_kernel' '$TMP/emu_lora_$arch.launches'"
    if launched emu_$arch lora_; then
        not_ok "$arch without LoRA: no adapter kernel launched"
    else
        ok "$arch without LoRA: no adapter kernel launched"
    fi
done
# LoRA without dropout: the adapters read the layer's input itself and
# add their dx straight into the base's (model_common.cu's other branch,
# which make coverage-cuda found no test ran; docs/gpu.md).
run cpu_lora0_gpt2 "$SHARDTRAIN" 1 "$TMP/lora_gpt2.ini" -s train.device=cpu -s lora.dropout=0
run emu_lora0_gpt2 "$EMU" 1 "$TMP/lora_gpt2.ini" -s train.device=cuda -s lora.dropout=0
same_lora emu_lora0_gpt2 cpu_lora0_gpt2 1e-4 \
    "gpt2 LoRA fp32 without dropout: cuda backend matches the cpu backend within 1e-4"
if launched emu_lora0_gpt2 lora_dropout_kernel || launched emu_lora0_gpt2 lora_mask_add_kernel ||
   ! launched emu_lora0_gpt2 lora_scale_kernel; then
    not_ok "gpt2 LoRA without dropout: adapters ran, no dropout or mask kernel launched"
else
    ok "gpt2 LoRA without dropout: adapters ran, no dropout or mask kernel launched"
fi
# Self-check: the adapter comparison at fp32's 1e-4 tells bf16 adapters
# from fp32 ones.
if python3 "$top_srcdir/tests/compare_runs.py" --only weights \
       "$TMP/emu_lora_gpt2/ckpt/final/adapter/adapter_model.safetensors" \
       "$TMP/cpu_lora_gpt2_bf16/ckpt/final/adapter/adapter_model.safetensors" 1e-4 \
       >/dev/null 2>&1; then
    not_ok "self-check: fp32 and bf16 LoRA adapters are told apart at 1e-4"
else
    ok "self-check: fp32 and bf16 LoRA adapters are told apart at 1e-4"
fi

# Two ranks sharing the one device, host-staged mpi collectives.
fs="-s parallel.strategy=full_shard -s train.device=cuda"
(export ST_EMU_DEVICE_PEAK="$TMP/emu_gpt2_np2.peak"; run emu_gpt2_np2 "$EMU" 2 "$TMP/gpt2.ini" $fs)
check "2 ranks: both report device cuda:0" on_device emu_gpt2_np2 2 cuda:0
same emu_gpt2_np2 emu_gpt2 1e-5 "fp32 full_shard on 2 ranks (staged mpi) matches 1 rank within 1e-5"
run emu_gpt2_bf16_np2 "$EMU" 2 "$TMP/gpt2.ini" $fs -s train.precision=bf16 \
    -s checkpoint.every=1
same emu_gpt2_bf16_np2 emu_gpt2_bf16 1e-3 \
    "bf16 full_shard on 2 ranks (staged mpi) matches 1 rank within 1e-3"
run emu_lora_llama_np2 "$EMU" 2 "$TMP/lora_llama.ini" $fs
same_lora emu_lora_llama_np2 emu_lora_llama 1e-5 \
    "LoRA fp32 full_shard on 2 ranks (staged mpi) matches 1 rank within 1e-5"
run emu_lora_gpt2_bf16_np2 "$EMU" 2 "$TMP/lora_gpt2.ini" $fs -s train.precision=bf16
same_lora emu_lora_gpt2_bf16_np2 emu_lora_gpt2_bf16 1e-3 \
    "LoRA bf16 full_shard on 2 ranks (staged mpi) matches 1 rank within 1e-3"
n=$(launches emu_gpt2_bf16_np2 'adamw_unit_kernel<kVec>')
check "bf16 on 2 ranks: one AdamW launch per unit per step on each rank ($n)" \
    test "$n" -eq $((2 * STEPS * units))

# Four ranks sharing the one device: full_shard over 4, and hybrid_shard
# 2 x 2 (shard groups of 2, replicated twice: the shard group's
# reduce-scatter and the replicate group's all-reduce both over staged
# mpi), each against 1 rank with the same global batch of 4.
gb4="-s train.global_batch=4"
run emu_gpt2_gb4 "$EMU" 1 "$TMP/gpt2.ini" -s train.device=cuda $gb4
run emu_gpt2_np4 "$EMU" 4 "$TMP/gpt2.ini" $fs $gb4
run emu_gpt2_hy22 "$EMU" 4 "$TMP/gpt2.ini" -s parallel.strategy=hybrid_shard \
    -s parallel.shard_size=2 -s train.device=cuda $gb4
check "4 ranks: all report device cuda:0" on_device emu_gpt2_np4 4 cuda:0
check "hybrid 2 x 2: the identity lines name shard groups of 2 replicated twice" \
    grep -q 'hybrid_shard over 4 rank(s) (shard group 2 x replicate group 2)' \
    "$TMP/emu_gpt2_hy22.out"
same emu_gpt2_np4 emu_gpt2_gb4 1e-5 "fp32 full_shard on 4 ranks (staged mpi) matches 1 rank within 1e-5"
same emu_gpt2_hy22 emu_gpt2_gb4 1e-5 \
    "fp32 hybrid_shard 2 x 2 on 4 ranks (staged mpi) matches 1 rank within 1e-5"
run emu_gpt2_bf16_np2_res "$EMU" 2 "$TMP/gpt2.ini" $fs -s train.precision=bf16 \
    -s checkpoint.resume="$TMP/emu_gpt2_bf16_np2/ckpt/step_00000002"
check "bf16 on 2 ranks, resumed at step 2: losses and final weights bit-identical" \
    compare_runs --exact --resumed-at 2 "$TMP/emu_gpt2_bf16_np2_res" "$TMP/emu_gpt2_bf16_np2"

# The device's memory.  ST_EMU_DEVICE_MEM=BYTES gives the emulated device
# that much (tests/gpu/emu/devmem.c: live blocks at their 256-byte rounded
# sizes; the context and fragmentation of a real device are not modelled),
# and ST_EMU_DEVICE_PEAK wrote each run above its high-water mark.  A
# device exactly that large trains the run bit for bit; one byte less and
# the run stops at the allocation that does not fit, with exit 1 and one
# line that names the call and says what to lower.  Smaller devices make
# the allocations fail earlier, in set-up or in the step:
# every one must end the same way (exit 1, one error line, no abort of the
# emulation, no final checkpoint), never a crash or a hang.
peak() { # NAME: the largest high-water mark its processes wrote, or 0
    sort -n "$TMP/$1.peak" 2>/dev/null | tail -n 1 | grep -x '[0-9][0-9]*' || echo 0
}
# out_of_memory NAME PATTERN: NAME ended with exit 1 (its status file) and
# one error line matching PATTERN, the emulation did not abort, and it
# wrote no final checkpoint
out_of_memory() {
    test "$(cat "$TMP/$1.status")" = 1 &&
        test "$(grep -c '^shardtrain: error:' "$TMP/$1.err")" -eq 1 &&
        grep '^shardtrain: error:' "$TMP/$1.err" | grep -q -- "$2" &&
        ! grep -q '^cuda emulation:' "$TMP/$1.err" &&
        test ! -e "$TMP/$1/ckpt/final"
}
# run_on NAME BYTES NP CFG [-s ...]: run on a device of BYTES, status kept
run_on() {
    name=$1 bytes=$2
    shift 2
    (export ST_EMU_DEVICE_MEM=$bytes; run "$name" "$EMU" "$@"; echo $? >"$TMP/$name.status")
}
oom_step="cudaMallocAsync failed: out of memory; hint: lower train.micro_batch"
p1=$(peak emu_gpt2)
pl=$(peak emu_llama)
check "the emulated device's high-water marks were written (gpt2 $p1, llama $pl bytes)" \
    test "$p1" -gt 0 -a "$pl" -gt 0
run_on mem_fit "$p1" 1 "$TMP/gpt2.ini" -s train.device=cuda
check "a device of exactly the run's peak ($p1 bytes) trains it bit for bit" \
    compare_runs --exact "$TMP/mem_fit" "$TMP/emu_gpt2" "$STEPS"
run_on mem_short $((p1 - 1)) 1 "$TMP/gpt2.ini" -s train.device=cuda
check "one byte less: exit 1, one line naming the allocation and what to lower" \
    out_of_memory mem_short "$oom_step"
# llama on devices of 0, 1/6, ... 5/6 of its peak, two at a time
k=0
while [ $k -lt 6 ]; do
    run_on mem_llama_$k $((pl * k / 6)) 1 "$TMP/llama.ini" -s train.device=cuda &
    run_on mem_llama_$((k + 1)) $((pl * (k + 1) / 6)) 1 "$TMP/llama.ini" -s train.device=cuda
    wait
    k=$((k + 2))
done
check "no device memory: set-up fails, exit 1, one line blaming the GPU's memory" \
    out_of_memory mem_llama_0 "cannot set up the cuda kernels: out of memory; hint: another process"
for k in 1 2 3 4 5; do
    check "llama on a device of $k/6 of its peak: exit 1, one out-of-memory line" \
        out_of_memory mem_llama_$k "out of memory; hint: "
done
# Rank 1 alone runs out in the middle of a step, while rank 0 goes on into
# the step's collectives: the job must still end (exit 1, the one line),
# not wait for a rank that is gone.
p2=$(sort -n "$TMP/emu_gpt2_np2.peak" 2>/dev/null | head -n 1) # the smaller rank's
cat >"$TMP/rank1_small.sh" <<EOF2
#!/bin/sh
[ "\$OMPI_COMM_WORLD_RANK" = 1 ] && export ST_EMU_DEVICE_MEM=$((p2 - 1))
exec "$EMU" "\$@"
EOF2
chmod +x "$TMP/rank1_small.sh"
run mem_rank1 "$TMP/rank1_small.sh" 2 "$TMP/gpt2.ini" $fs
echo $? >"$TMP/mem_rank1.status"
check "2 ranks, rank 1's device one byte short of the peak ($p2): the job ends, exit 1, one line" \
    out_of_memory mem_rank1 "$oom_step"

# Self-check: a different run (another seed) is told apart.
if compare cpu_gpt2_seed emu_gpt2 1e-4 >/dev/null 2>&1; then
    not_ok "self-check: another seed does not match"
else
    ok "self-check: another seed does not match"
fi
exit $((tap_fail > 0))
