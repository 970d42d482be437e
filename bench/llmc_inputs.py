#!/usr/bin/env python3
"""Inputs in llm.c's file formats for the CPU benchmark (bench/cpu.sh).

  llmc_inputs.py tokens TEXT OUT.bin
      Every byte of TEXT as one token id (0..255), in llm.c's token-file
      format: a header of 256 little-endian int32 (magic 20240520,
      version 1, token count, the rest zero), then the tokens as
      little-endian uint16.  shardtrain (data.train), llm.c's DataLoader
      and bench/torch_train.py --tokens all read this one file, so every
      program trains on the same tokens.  The ids are valid in any
      vocabulary of at least 256, GPT-2's 50,257 included: a model starts
      near ln(vocab) and its loss falls as it learns which 256 ids occur.

  llmc_inputs.py checkpoint OUT.bin --n-layer L --n-head H --d-model C
                            --seq T [--vocab V] [--seed S]
      A freshly initialised GPT-2 in llm.c's fp32 checkpoint format (what
      train_gpt2.c's gpt2_build_from_checkpoint reads): a header of 256
      int32 (magic 20240326, version 3 = fp32, maxT, V, L, NH, C, Vp = V
      rounded up to a multiple of 128), then the fp32 parameters in llm.c's
      order: wte (Vp, C), wpe (maxT, C), ln1w (L, C), ln1b (L, C),
      qkvw (L, 3C, C), qkvb (L, 3C), attprojw (L, C, C), attprojb (L, C),
      ln2w (L, C), ln2b (L, C), fcw (L, 4C, C), fcb (L, 4C),
      fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C), lnfb (C).
      The initialisation is GPT-2's (and shardtrain's and torch_train.py's):
      matrices and embeddings N(0, 0.02), the two residual projections
      N(0, 0.02 / sqrt(2 L)), LayerNorm weights 1, biases 0; the padded
      rows of wte (V..Vp) are 0, as llm.c's own train_gpt2.py writes them.

Only the formats are llm.c's; nothing here is llm.c code.
"""
import argparse
import math
import struct
import sys

TOKENS_MAGIC, TOKENS_VERSION = 20240520, 1
MODEL_MAGIC, MODEL_VERSION_FP32 = 20240326, 3


def header(*ints):
    h = list(ints) + [0] * (256 - len(ints))
    return struct.pack("<256i", *h)


def write_tokens(text, out):
    data = open(text, "rb").read()
    if not data:
        sys.exit(f"{text}: empty")
    with open(out, "wb") as f:
        f.write(header(TOKENS_MAGIC, TOKENS_VERSION, len(data)))
        # Each byte b becomes the little-endian uint16 (b, 0).
        buf = bytearray(2 * len(data))
        buf[0::2] = data
        f.write(buf)
    print(f"{out}: {len(data)} tokens")


def write_checkpoint(out, L, H, C, T, V, seed):
    try:
        import numpy as np
    except ImportError:
        sys.exit("numpy is needed to write a checkpoint")
    if C % H:
        sys.exit(f"d_model {C} is not a multiple of n_head {H}")
    Vp = (V + 127) // 128 * 128
    rng = np.random.default_rng(seed)
    std, proj_std = 0.02, 0.02 / math.sqrt(2 * L)

    def normal(shape, s):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(s)

    def zeros(shape):
        return np.zeros(shape, np.float32)

    def ones(shape):
        return np.ones(shape, np.float32)

    wte = zeros((Vp, C))
    wte[:V] = normal((V, C), std)
    tensors = [
        wte,                          # wte
        normal((T, C), std),          # wpe
        ones((L, C)),                 # ln1w
        zeros((L, C)),                # ln1b
        normal((L, 3 * C, C), std),   # qkvw
        zeros((L, 3 * C)),            # qkvb
        normal((L, C, C), proj_std),  # attprojw
        zeros((L, C)),                # attprojb
        ones((L, C)),                 # ln2w
        zeros((L, C)),                # ln2b
        normal((L, 4 * C, C), std),   # fcw
        zeros((L, 4 * C)),            # fcb
        normal((L, C, 4 * C), proj_std),  # fcprojw
        zeros((L, C)),                # fcprojb
        ones(C),                      # lnfw
        zeros(C),                     # lnfb
    ]
    n = 0
    with open(out, "wb") as f:
        f.write(header(MODEL_MAGIC, MODEL_VERSION_FP32, T, V, L, H, C, Vp))
        for t in tensors:
            f.write(np.ascontiguousarray(t, dtype="<f4").tobytes())
            n += t.size
    # The parameters a model without padding has (wte's V rows, not Vp).
    real = n - (Vp - V) * C
    print(f"{out}: L={L} H={H} C={C} maxT={T} V={V} Vp={Vp}: {n} floats "
          f"({real} parameters without the padded rows)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tokens", help="a text's bytes as an llm.c token file")
    t.add_argument("text")
    t.add_argument("out")
    c = sub.add_parser("checkpoint", help="a random GPT-2 in llm.c's fp32 checkpoint format")
    c.add_argument("out")
    c.add_argument("--n-layer", type=int, required=True)
    c.add_argument("--n-head", type=int, required=True)
    c.add_argument("--d-model", type=int, required=True)
    c.add_argument("--seq", type=int, required=True, help="maxT: rows of wpe")
    c.add_argument("--vocab", type=int, default=50257)
    c.add_argument("--seed", type=int, default=1337)
    a = ap.parse_args()
    if a.cmd == "tokens":
        write_tokens(a.text, a.out)
    else:
        write_checkpoint(a.out, a.n_layer, a.n_head, a.d_model, a.seq, a.vocab, a.seed)


if __name__ == "__main__":
    main()
