#!/usr/bin/env python3
"""Predicted H100 SXM time of the tensor-core attention kernels
(cuda/attention_tc.cu) at the bench/gpu.sh shapes: a model, not a
measurement.  Prints the markdown table of docs/gpu.md.

It walks the tiles exactly as the kernels do (blocks, warps, the causal
skip of a warp whose rows see no key of a tile) and counts per kernel:
  - tensor-core FLOPs: 2*16*8*16 per mma.sync m16n8k16 actually issued;
  - exp2 calls (one per score a working warp computes; special-function
    unit) and fp32 CUDA-core operations (per score: the kernel's scale,
    max, subtract, sum, multiply and bf16 packing, and the forward's
    output rescale of HD/BK per score);
  - bytes: requested from global memory through L2 (every tile copy, the
    outputs, lse and D), and compulsory HBM traffic (each input and output
    tensor once).
Registers and shared memory per block are ptxas's (sm_90, tests/cuda_ptx.sh
prints them; copy them into PTXAS_SM90 when the kernels change); the
occupancy follows from H100's 64K registers, 228 KiB shared memory and 64
warps per SM.

Assumptions (a roofline, stated so it can be checked against a GPU):
  - H100 SXM5: 132 SMs at 1.83 GHz; dense bf16 tensor peak 989 TFLOP/s;
    mma.sync (not wgmma) sustaining EFF of it, 0.60 or 0.70 (the columns);
  - special-function unit: 16 exp2 per clock per SM = 3.87e12 per second;
  - fp32 CUDA cores: 128 operations per clock per SM = 30.9e12 per second;
  - HBM3 3.35 TB/s; L2 about 10 TB/s;
  - predicted time = max(tensor + SFU + fp32 time, memory time): the three
    compute pipes serialised within a warp (FlashAttention-2 style, no
    warp specialisation) and memory fully overlapped by cp.async.
Useful attention FLOPs, the unit of the TFLOP/s columns, are the causal
half of 4*B*H*T^2*hd for the forward and 2.5 times that for the backward
(the FlashAttention papers' convention), so the backward's recomputation
(7 products per tile where FlashAttention-2 does 5) counts against it.
"""
import math

SMS, CLOCK = 132, 1.83e9
PEAK_TC = 989e12
SFU = 16 * SMS * CLOCK
FP32 = 128 * SMS * CLOCK
HBM, L2 = 3.35e12, 10e12
REGS_SM, SMEM_SM, WARPS_SM, SMEM_RESERVED = 65536, 228 * 1024, 64, 1024

# (kernel, hd): (registers, dynamic shared bytes) -- ptxas sm_90 and the
# kernels' smem formulas (attention_tc.cu "shapes")
def smem(kernel, hd):
    bf = 2
    if kernel == "fwd":
        return bf * hd * (64 + 4 * 64)
    if kernel == "dq":
        return bf * hd * (2 * 64 + 4 * 64)
    return bf * hd * (2 * 64 + 4 * (64 if hd == 64 else 16))

PTXAS_SM90 = {("fwd", 64): 142, ("fwd", 128): 181, ("dq", 64): 163, ("dq", 128): 235,
              ("dkdv", 64): 229, ("dkdv", 128): 240}

SHAPES = [  # name, B, T, H, KV, hd, layers
    ("gpt2-124m", 64, 1024, 12, 12, 64, 12),
    ("llama-1b", 8, 2048, 32, 8, 64, 16),
    ("llama-8b", 1, 8192, 32, 8, 128, 32),  # the head width 128 kernels
]


def occupancy(regs, smem_bytes):
    per_warp = math.ceil(regs * 32 / 256) * 256
    by_regs = REGS_SM // (per_warp * 4)
    by_smem = SMEM_SM // (smem_bytes + SMEM_RESERVED)
    blocks = min(by_regs, by_smem, WARPS_SM // 4)
    return blocks, blocks * 4


def walk(kernel, B, T, H, KV, hd):
    """(tensor FLOPs, scores, fp32 ops, L2 bytes) of one launch."""
    mma_flops = 2 * 16 * 8 * 16
    group = H // KV
    tc = scores = alu = l2 = 0
    if kernel in ("fwd", "dq"):
        bq, bk = 64, 64
        per_score_mma = (2 if kernel == "fwd" else 3) * (hd // 16)  # mmas per 16x8 score tile / 128
        for q0 in range(0, T, bq):
            n_tiles = (min(q0 + bq, T) - 1) // bk + 1
            l2 += bq * hd * 2 * (1 if kernel == "fwd" else 2) + n_tiles * 2 * bk * hd * 2
            l2 += bq * hd * 2 + (bq * 4 if kernel == "fwd" else bq * 8)  # out / dq, lse (+D)
            for w in range(4):
                wq0 = q0 + 16 * w
                for j in range(n_tiles):
                    if j * bk <= wq0 + 15:
                        s = 16 * bk
                        scores += s
                        tc += (s // 128) * per_score_mma * mma_flops
        alu_per = (5.5 + hd / bk) if kernel == "fwd" else 3.5
        alu = scores * alu_per
        n = B * H
    else:
        bkv, bq = 64, (64 if hd == 64 else 16)
        for k0 in range(0, T, bkv):
            qt_first = k0 // bq
            n_qt = (T + bq - 1) // bq - qt_first
            l2 += 2 * bkv * hd * 2 + group * n_qt * (2 * bq * hd * 2 + 2 * bq * 4 * 4)
            l2 += 2 * bkv * hd * 2
            for w in range(4):
                wk0 = k0 + 16 * w
                if wk0 >= T:
                    continue
                for it in range(group * n_qt):
                    qt0 = (qt_first + it % n_qt) * bq
                    if qt0 + bq - 1 >= wk0:
                        s = 16 * bq
                        scores += s
                        tc += (s // 128) * 4 * (hd // 16) * mma_flops
        alu = scores * 4.0
        n = B * KV
    return tc * n, scores * n, alu * n, l2 * n


def hbm_bytes(kernel, B, T, H, KV, hd):
    q = B * T * H * hd * 2
    kv = B * T * KV * hd * 2
    row = B * H * T * 4
    if kernel == "fwd":
        return q + 2 * kv + q + row
    if kernel == "dq":
        return 2 * q + 2 * kv + q + 2 * row
    return 2 * q + 2 * kv + 2 * kv + 2 * row


def main():
    print("| shape | kernel | tensor GFLOP | exp2 (G) | fp32 CUDA-core Gop | L2 GB | HBM GB "
          "| regs | smem/block | blocks (warps)/SM | predicted ms @60% | @70% |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, B, T, H, KV, hd, layers in SHAPES:
        useful_fwd = 4 * B * H * T * T * hd / 2
        tot = {0.6: 0.0, 0.7: 0.0}
        for kernel in ("fwd", "dq", "dkdv"):
            tc, sc, alu, l2 = walk(kernel, B, T, H, KV, hd)
            hbm = hbm_bytes(kernel, B, T, H, KV, hd)
            regs = PTXAS_SM90[(kernel, hd)]
            sm = smem(kernel, hd)
            blocks, warps = occupancy(regs, sm)
            t = {}
            for eff in (0.6, 0.7):
                comp = tc / (eff * PEAK_TC) + sc / SFU + alu / FP32
                t[eff] = max(comp, hbm / HBM, l2 / L2)
                tot[eff] += t[eff]
            print(f"| {name} hd {hd} | {kernel} | {tc / 1e9:.1f} | {sc / 1e9:.2f} | "
                  f"{alu / 1e9:.1f} | {l2 / 1e9:.2f} | {hbm / 1e9:.3f} | {regs} | "
                  f"{sm // 1024} KiB | {blocks} ({warps}) | {t[0.6] * 1e3:.3f} | {t[0.7] * 1e3:.3f} |")
        useful = 3.5 * useful_fwd
        print(f"| {name} | fwd+bwd, one layer | useful {useful / 1e9:.1f} GFLOP | | | | | | | | "
              f"{tot[0.6] * 1e3:.3f} ms = {useful / tot[0.6] / 1e12:.0f} TFLOP/s | "
              f"{tot[0.7] * 1e3:.3f} ms = {useful / tot[0.7] / 1e12:.0f} TFLOP/s |")
        print(f"| {name} | all {layers} layers, one step | | | | | | | | | "
              f"{tot[0.6] * layers * 1e3:.1f} ms | {tot[0.7] * layers * 1e3:.1f} ms |")


if __name__ == "__main__":
    main()
