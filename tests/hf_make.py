#!/usr/bin/env python3
"""Hugging Face-layout weight files for tests/hf_import.sh, written by hand
(json + struct: Debian has no python3-safetensors), and the independent
PyTorch reference loss (tests/torch_models.py) on the same weights.

  hf_make.py make OUT CFG_JSON [--seed N]
      random weights for the model CFG_JSON describes, written as
        OUT/ref-f32.safetensors          fp32, shardtrain's own names and order
        OUT/ref-f16r.safetensors         fp32 holding the values rounded to fp16
        OUT/ref-bf16r.safetensors        ... and to bf16
      and, for DT in f32 f16 bf16, the same weights stored as DT in:
        OUT/DT-single.safetensors        one file as the hub ships them (gpt2:
                                         GPT2Model names without "transformer.",
                                         with attn.bias / attn.masked_bias
                                         buffers; llama: rotary_emb.inv_freq)
        OUT/DT-dir/                      model.safetensors (GPT2LMHeadModel /
                                         LlamaForCausalLM names) + config.json
        OUT/DT-sharded/                  3 shards in scrambled tensor order,
                                         model.safetensors.index.json, config.json
  hf_make.py edit SRC DST OP NAME [ARG]
      copy safetensors file SRC to DST with one change: OP is drop (remove
      NAME), dup (add a copy of NAME as ARG), transpose (store NAME's 2-D
      data transposed), shrink (keep NAME's first ARG rows), retype (NAME as
      I32 of the same element count)
  hf_make.py refloss OUT CFG_JSON VAL_BIN NSEQ ROUNDING
      mean cross-entropy of the weights rounded to ROUNDING (f32|f16|bf16)
      on eval windows 0..NSEQ-1 of VAL_BIN (shardtrain's val_loss windows),
      computed in float64 by tests/torch_models.py; printed with repr().
  hf_make.py refloss OUT CFG_JSON VAL_BIN NSEQ ROUNDING masked|unmasked
      the same on instruction data (VAL_BIN with its loss mask VAL.mask):
      sequence i is example i from its first token, padded with token 0
      past its end; masked: the mean over the targets the mask marks
      (PyTorch's ignore_index), as shardtrain's val_loss; unmasked: over
      every target of the sequences, which must disagree.
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def param_shapes(cfg):
    import torch_models
    return torch_models.param_shapes(cfg)


def make_weights(cfg, seed):
    rng = np.random.default_rng(seed)
    w = {}
    for n, shp in param_shapes(cfg).items():
        if n.endswith("norm.weight") or (".ln_" in n and n.endswith(".weight")):
            a = 1.0 + 0.1 * rng.standard_normal(shp)
        else:
            a = 0.05 * rng.standard_normal(shp)
        w[n] = a.astype(np.float32)
    return w


def to_bf16_bits(a):
    """float32 -> bf16 bits, round to nearest even (no NaNs in test data)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def rounded(a, dt):
    """The float32 values a file of dtype dt holds."""
    if dt == "f32":
        return a
    if dt == "f16":
        return a.astype(np.float16).astype(np.float32)
    return (to_bf16_bits(a).astype(np.uint32) << 16).view(np.float32)


def encode(a, dt):
    """(safetensors dtype, little-endian bytes)."""
    if dt == "f32":
        return "F32", np.ascontiguousarray(a, dtype="<f4").tobytes()
    if dt == "f16":
        return "F16", a.astype("<f2").tobytes()
    return "BF16", to_bf16_bits(a).astype("<u2").tobytes()


def item(name, a, dt):
    dtype, raw = encode(a, dt)
    return (name, dtype, a.shape, raw)


def write_safetensors(path, items):
    """items: list of (name, dtype, shape, bytes) in data order."""
    hdr, off = {}, 0
    for name, dtype, shape, raw in items:
        hdr[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    hdr["__metadata__"] = {"format": "pt"}
    text = json.dumps(hdr).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, raw in items:
            f.write(raw)


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    hdr.pop("__metadata__", None)
    items = []
    for name, e in sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, end = e["data_offsets"]
        items.append((name, e["dtype"], tuple(e["shape"]), raw[8 + n + b:8 + n + end]))
    return items


def edit(src, dst, op, name, arg):
    items = read_safetensors(src)
    idx = [i for i, it in enumerate(items) if it[0] == name]
    if not idx:
        raise SystemExit("hf_make.py edit: no tensor %s in %s" % (name, src))
    i = idx[0]
    n, dtype, shape, raw = items[i]
    es = {"F32": 4, "F16": 2, "BF16": 2}[dtype]
    if op == "drop":
        del items[i]
    elif op == "dup":
        items.append((arg, dtype, shape, raw))
    elif op == "transpose":
        a = np.frombuffer(raw, dtype="<u%d" % es).reshape(shape)
        items[i] = (n, dtype, shape[::-1], np.ascontiguousarray(a.T).tobytes())
    elif op == "shrink":
        rows = int(arg)
        items[i] = (n, dtype, (rows,) + shape[1:], raw[:len(raw) * rows // shape[0]])
    elif op == "retype":
        count = len(raw) // es
        items[i] = (n, "I32", shape, bytes(4 * count))
    else:
        raise SystemExit("hf_make.py edit: unknown op " + op)
    write_safetensors(dst, items)


def hf_config(cfg):
    if cfg["arch"] == "gpt2":
        return {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
                "n_layer": cfg["n_layer"], "n_embd": cfg["d_model"], "n_head": cfg["n_head"],
                "n_inner": cfg["d_ff"], "vocab_size": cfg["vocab_size"],
                "n_positions": cfg["seq_len"], "n_ctx": cfg["seq_len"],
                "layer_norm_epsilon": cfg["norm_eps"], "activation_function": "gelu_new",
                "tie_word_embeddings": cfg["tie_embeddings"], "torch_dtype": "float32"}
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
            "num_hidden_layers": cfg["n_layer"], "hidden_size": cfg["d_model"],
            "num_attention_heads": cfg["n_head"], "num_key_value_heads": cfg["n_kv_head"],
            "intermediate_size": cfg["d_ff"], "vocab_size": cfg["vocab_size"],
            "max_position_embeddings": 4 * cfg["seq_len"], "rms_norm_eps": cfg["norm_eps"],
            "rope_theta": cfg["rope_theta"], "rope_scaling": None, "hidden_act": "silu",
            "attention_bias": False, "mlp_bias": False,
            "tie_word_embeddings": cfg["tie_embeddings"], "torch_dtype": "bfloat16"}


def hub_items(cfg, w, dt):
    """One file as the hub ships it, with the non-parameter buffers."""
    items = []
    T = cfg["seq_len"]
    for n, a in w.items():
        name = n
        if cfg["arch"] == "gpt2" and n.startswith("transformer."):
            name = n[len("transformer."):]
        items.append(item(name, a, dt))
    for i in range(cfg["n_layer"]):
        if cfg["arch"] == "gpt2":
            mask = np.tril(np.ones((T, T), dtype=np.float32)).reshape(1, 1, T, T)
            items.append(("h.%d.attn.bias" % i, "F32", mask.shape, mask.astype("<f4").tobytes()))
            items.append(("h.%d.attn.masked_bias" % i, "F32", (),
                          np.array(-1e4, dtype="<f4").tobytes()))
        else:
            hd = cfg["d_model"] // cfg["n_head"]
            inv = (1.0 / (cfg["rope_theta"] ** (np.arange(0, hd, 2) / hd))).astype("<f4")
            items.append(("model.layers.%d.self_attn.rotary_emb.inv_freq" % i, "F32",
                          inv.shape, inv.tobytes()))
    return items


def make(out, cfg, seed):
    os.makedirs(out, exist_ok=True)
    w = make_weights(cfg, seed)
    for r in ("f32", "f16", "bf16"):
        name = "ref-f32" if r == "f32" else "ref-%sr" % r
        write_safetensors(os.path.join(out, name + ".safetensors"),
                          [item(n, rounded(a, r), "f32") for n, a in w.items()])
    for dt in ("f32", "f16", "bf16"):
        write_safetensors(os.path.join(out, dt + "-single.safetensors"), hub_items(cfg, w, dt))
        d = os.path.join(out, dt + "-dir")
        os.makedirs(d, exist_ok=True)
        write_safetensors(os.path.join(d, "model.safetensors"),
                          [item(n, a, dt) for n, a in w.items()])
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(hf_config(cfg), f, indent=2)
        # Shards: tensors dealt round-robin in reverse order, so a unit's
        # tensors are spread over files and lie out of table order in each.
        d = os.path.join(out, dt + "-sharded")
        os.makedirs(d, exist_ok=True)
        names = list(w)[::-1]
        nshard = 3
        weight_map = {}
        for s in range(nshard):
            fname = "model-%05d-of-%05d.safetensors" % (s + 1, nshard)
            mine = names[s::nshard]
            write_safetensors(os.path.join(d, fname),
                              [item(n, w[n], dt) for n in mine])
            for n in mine:
                weight_map[n] = fname
        total = sum(len(encode(a, dt)[1]) for a in w.values())
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(hf_config(cfg), f, indent=2)
    np.savez(os.path.join(out, "weights.npz"), **w)


def read_tokens(path):
    raw = open(path, "rb").read()
    hdr = np.frombuffer(raw[:1024], dtype="<i4")
    dt = "<u2" if hdr[1] == 1 else "<u4"
    return np.frombuffer(raw[1024:], dtype=dt)[:hdr[2]].astype(np.int64)


def refloss(out, cfg, val_bin, nseq, rounding):
    import torch
    import torch_models
    torch.set_default_dtype(torch.float64)
    w = dict(np.load(os.path.join(out, "weights.npz")))
    w = {n: rounded(a, rounding) for n, a in w.items()}
    tok = read_tokens(val_bin)
    T = cfg["seq_len"]
    wins = np.stack([tok[i * T:i * T + T + 1] for i in range(nseq)])
    r = torch_models.reference(cfg, w, wins[:, :-1], wins[:, 1:])
    print(repr(float(r["loss"][0])))


def refloss_examples(out, cfg, val_bin, nseq, rounding, masked):
    import torch
    import torch_models
    torch.set_default_dtype(torch.float64)
    w = dict(np.load(os.path.join(out, "weights.npz")))
    w = {n: rounded(a, rounding) for n, a in w.items()}
    tok = read_tokens(val_bin)
    raw = open(val_bin[:-4] + ".mask", "rb").read()
    mask = np.frombuffer(raw[1024:], dtype=np.uint8)
    starts = list(np.flatnonzero(mask & 2)) + [len(tok)]
    T = cfg["seq_len"]
    wins = np.zeros((nseq, T + 1), dtype=np.int64)
    loss = np.zeros((nseq, T + 1), dtype=bool)
    for i in range(nseq):
        e = i % (len(starts) - 1)
        a, b = starts[e], min(starts[e + 1], starts[e] + T + 1)
        wins[i, :b - a] = tok[a:b]
        loss[i, :b - a] = (mask[a:b] & 1) != 0
    targets = np.where(loss[:, 1:], wins[:, 1:], -1) if masked else wins[:, 1:]
    r = torch_models.reference(cfg, w, wins[:, :-1], targets)
    print(repr(float(r["loss"][0])))


def main(argv):
    if len(argv) >= 3 and argv[0] == "make":
        seed = int(argv[4]) if len(argv) > 4 and argv[3] == "--seed" else 1
        make(argv[1], json.loads(argv[2]), seed)
        return 0
    if len(argv) in (5, 6) and argv[0] == "edit":
        edit(argv[1], argv[2], argv[3], argv[4], argv[5] if len(argv) == 6 else None)
        return 0
    if len(argv) == 7 and argv[0] == "refloss" and argv[6] in ("masked", "unmasked"):
        refloss_examples(argv[1], json.loads(argv[2]), argv[3], int(argv[4]), argv[5],
                         argv[6] == "masked")
        return 0
    if len(argv) == 6 and argv[0] == "refloss":
        refloss(argv[1], json.loads(argv[2]), argv[3], int(argv[4]), argv[5])
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
