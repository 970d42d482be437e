#!/usr/bin/env python3
"""Independent PyTorch reference for shardtrain's forward and backward pass.

Usage:
  torch_ref.py DUMP_DIR [--tol 1e-4]      compare a dump written by tests/test_dump
  torch_ref.py DUMP_DIR --self-test       check that the comparison can fail
  torch_ref.py --make-fake DUMP_DIR ARCH [--tie yes|no] [--seed N]
                                          write a dump from this reference itself

DUMP_DIR holds config.json and dump.bin (see read_dump for the format).  The
model (tests/torch_models.py) is rebuilt from the dumped float32 weights in
float64 with plain torch ops (Hugging Face GPT2LMHeadModel /
LlamaForCausalLM conventions and names),
run forward on the dumped inputs, the mean cross-entropy taken against the
dumped targets, and backward run.  Loss, logits and every parameter gradient
are compared with the dump; the result is printed as TAP.  Exit status 0 when
every check passes, 1 otherwise (2 for usage errors, a crash is nonzero too).

With a "lora" object in config.json ({"rank": r, "alpha": a, "targets":
[...]}, PEFT's target_modules names) the model is PEFT's LoRA: each
targeted linear layer computes base(x) + (alpha / r) * (x @ A.T) @ B.T with
A [r, in] and B [out, r] (dropout 0), the base weights frozen.  Only the
adapters (PEFT's names without the base_model.model. prefix, e.g.
transformer.h.0.attn.c_attn.lora_A.weight) have gradients: the dump must
hold every base weight without a grad: record and every adapter with one,
and loss, logits and the adapters' gradients are compared.  The
environment variable ST_REF_LORA_SCALE=1 makes the reference use a scale
of 1 instead of alpha / r: tests/torch.sh's proof that the comparison sees
the scale (it must then disagree).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

from torch_models import F64, LORA_MODULES, lora_shapes, param_shapes, reference

MAGIC = b"STDUMP1\0"
DTYPES = {0: np.dtype("<f4"), 1: np.dtype("<i4")}
DTYPE_CODES = {np.dtype("<f4"): 0, np.dtype("<i4"): 1}
DATA_NAMES = ("inputs", "targets", "logits", "loss")


class DumpError(Exception):
    pass


# ---------------------------------------------------------------- dump I/O

def read_dump(path):
    """Returns an insertion-ordered dict name -> numpy array."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < len(MAGIC) or buf[:len(MAGIC)] != MAGIC:
        raise DumpError("%s: bad magic %r (want %r)" % (path, buf[:8], MAGIC))
    pos = len(MAGIC)
    out = {}

    def take(n, what):
        nonlocal pos
        if pos + n > len(buf):
            raise DumpError("%s: truncated at byte %d reading %s (need %d bytes, %d left)"
                            % (path, pos, what, n, len(buf) - pos))
        b = buf[pos:pos + n]
        pos += n
        return b

    while pos < len(buf):
        start = pos
        (name_len,) = struct.unpack("<I", take(4, "name length"))
        if name_len == 0 or name_len > 4096:
            raise DumpError("%s: record at byte %d: implausible name length %d"
                            % (path, start, name_len))
        try:
            name = take(name_len, "name").decode("utf-8")
        except UnicodeDecodeError as e:
            raise DumpError("%s: record at byte %d: name not utf-8: %s" % (path, start, e))
        code, ndim = struct.unpack("<II", take(8, "dtype/ndim of " + name))
        if code not in DTYPES:
            raise DumpError("%s: record %s: unknown dtype code %d" % (path, name, code))
        if ndim > 8:
            raise DumpError("%s: record %s: implausible ndim %d" % (path, name, ndim))
        dims = struct.unpack("<%dq" % ndim, take(8 * ndim, "dims of " + name))
        if any(d < 0 for d in dims):
            raise DumpError("%s: record %s: negative dimension in %s" % (path, name, dims))
        count = int(np.prod(dims, dtype=np.int64)) if ndim else 1
        dt = DTYPES[code]
        data = take(count * dt.itemsize, "data of %s %s" % (name, list(dims)))
        if name in out:
            raise DumpError("%s: duplicate record %s" % (path, name))
        out[name] = np.frombuffer(data, dtype=dt).reshape(dims).copy()
    return out


def write_dump(path, records):
    with open(path, "wb") as f:
        f.write(MAGIC)
        for name, arr in records.items():
            arr = np.ascontiguousarray(arr)
            if arr.dtype.kind == "f":
                arr = arr.astype("<f4")
            else:
                arr = arr.astype("<i4")
            nb = name.encode("utf-8")
            f.write(struct.pack("<I", len(nb)))
            f.write(nb)
            f.write(struct.pack("<II", DTYPE_CODES[arr.dtype], arr.ndim))
            f.write(struct.pack("<%dq" % arr.ndim, *arr.shape))
            f.write(arr.tobytes())


def load_config(dump_dir):
    with open(os.path.join(dump_dir, "config.json")) as f:
        cfg = json.load(f)
    need = ["arch", "n_layer", "n_head", "d_model", "d_ff", "vocab_size",
            "seq_len", "norm_eps", "tie_embeddings", "batch"]
    if cfg.get("arch") == "llama":
        need += ["n_kv_head", "rope_theta"]
    missing = [k for k in need if k not in cfg]
    if missing:
        raise DumpError("config.json lacks %s" % ", ".join(missing))
    if cfg["arch"] not in ("gpt2", "llama"):
        raise DumpError("config.json: unknown arch %r" % cfg["arch"])
    if cfg["d_model"] % cfg["n_head"]:
        raise DumpError("config.json: d_model %d not divisible by n_head %d"
                        % (cfg["d_model"], cfg["n_head"]))
    if cfg["arch"] == "llama":
        if cfg["n_head"] % cfg["n_kv_head"]:
            raise DumpError("config.json: n_head %d not divisible by n_kv_head %d"
                            % (cfg["n_head"], cfg["n_kv_head"]))
        if (cfg["d_model"] // cfg["n_head"]) % 2:
            raise DumpError("config.json: odd head dim, RoPE needs it even")
    if "lora" in cfg:
        lo = cfg["lora"]
        if not isinstance(lo, dict) or any(k not in lo for k in ("rank", "alpha", "targets")):
            raise DumpError("config.json: lora wants rank, alpha and targets")
        if not isinstance(lo["rank"], int) or lo["rank"] <= 0:
            raise DumpError("config.json: lora.rank %r is not a positive integer" % lo["rank"])
        known = LORA_MODULES[cfg["arch"]]
        bad = [t for t in lo["targets"] if t not in known]
        if bad or not lo["targets"]:
            raise DumpError("config.json: lora.targets %r: want some of %s"
                            % (lo["targets"], ", ".join(known)))
    return cfg


# ---------------------------------------------------------------- comparison

def rel_norm(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    d = np.linalg.norm((a - b).ravel())
    if not np.isfinite(d):
        return float("inf")
    return float(d / max(np.linalg.norm(b.ravel()), 1e-30))


def validate_tokens(cfg, dump):
    """Problems with inputs/targets that stop the reference from running."""
    errs = []
    B, T, V = cfg["batch"], cfg["seq_len"], cfg["vocab_size"]
    for n in ("inputs", "targets"):
        if n not in dump:
            errs.append("record %s missing" % n)
            continue
        a = dump[n]
        if a.dtype != DTYPES[1]:
            errs.append("%s has dtype %s, want int32" % (n, a.dtype))
        if a.ndim != 2 or a.shape[0] != B or not 1 <= a.shape[1] <= T:
            errs.append("%s has shape %s, want [%d, <=%d]" % (n, list(a.shape), B, T))
        elif a.size and (a.min() < (0 if n == "inputs" else -1) or a.max() >= V):
            errs.append("%s has token ids outside [%d, %d)" % (n, 0 if n == "inputs" else -1, V))
        elif n == "targets" and a.size and (a >= 0).sum() == 0:
            errs.append("every target is ignored (-1)")
    if not errs and dump["inputs"].shape != dump["targets"].shape:
        errs.append("inputs %s and targets %s differ in shape"
                    % (list(dump["inputs"].shape), list(dump["targets"].shape)))
    return errs


def names_check(shapes, dump, trained=None):
    """trained: the names with a gradient (all of shapes when None)."""
    trained = shapes if trained is None else trained
    expected = set(shapes) | {"grad:" + n for n in trained} | set(DATA_NAMES)
    got = set(dump)
    missing = sorted(expected - got)
    extra = sorted(got - expected)
    desc = "record names match the reference (%d params, %d records)" % (len(shapes), len(got))
    if missing:
        desc += "; missing: " + ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else "")
    if extra:
        desc += "; extra: " + ", ".join(extra[:8]) + (" ..." if len(extra) > 8 else "")
    return (not missing and not extra, desc)


def compare(cfg, dump, ref, tol):
    """Returns a list of (passed, description) checks of dump against ref."""
    checks = []
    shapes = ref["shapes"]
    trained = ref["trained"]
    checks.append(names_check(shapes, dump, trained))
    if "lora" in cfg:
        # Frozen base weights: the engine computes no gradient for them,
        # and the dump must not claim one.
        frozen = [n for n in shapes if n not in trained and "grad:" + n in dump]
        checks.append((not frozen, "no grad: record for the %d frozen base tensors%s"
                       % (len(shapes) - len(trained),
                          (": " + ", ".join(frozen[:6])) if frozen else "")))
        zero = [n for n in trained if n in dump and not np.any(dump[n])]
        checks.append((not zero and len(trained) > 0,
                       "every one of the %d adapter tensors (A and B) is non-zero%s"
                       % (len(trained), (": " + ", ".join(zero[:6])) if zero else "")))

    bad = []
    for n, shp in shapes.items():
        for rn in (n, "grad:" + n):
            if rn in dump:
                a = dump[rn]
                if tuple(a.shape) != tuple(shp):
                    bad.append("%s %s != %s" % (rn, list(a.shape), list(shp)))
                elif a.dtype != DTYPES[0]:
                    bad.append("%s dtype %s" % (rn, a.dtype))
    desc = "parameter and gradient shapes/dtypes match"
    if bad:
        desc += ": " + "; ".join(bad[:6]) + (" ..." if len(bad) > 6 else "")
    checks.append((not bad, desc))

    tok = validate_tokens(cfg, dump)
    checks.append((not tok, "inputs and targets valid" + (": " + "; ".join(tok) if tok else "")))

    def cmp(label, name, want, relfn):
        if name not in dump:
            checks.append((False, "%s (record missing)" % label))
            return
        a = dump[name]
        if tuple(a.shape) != tuple(want.shape):
            checks.append((False, "%s shape %s != %s" % (label, list(a.shape), list(want.shape))))
            return
        r = relfn(a, want)
        diff = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(want, dtype=np.float64))
        mabs = float(diff.max()) if diff.size and np.isfinite(diff).all() else float("inf")
        checks.append((r <= tol, "%s rel %.1e (max abs %.1e)" % (label, r, mabs)))

    cmp("loss", "loss", ref["loss"],
        lambda a, b: float(abs(float(a.ravel()[0]) - b[0]) / max(abs(b[0]), 1e-30))
        if np.isfinite(a).all() else float("inf"))
    cmp("logits", "logits", ref["logits"], rel_norm)
    for n in trained:
        cmp("grad " + n, "grad:" + n, ref["grads"][n], rel_norm)
    return checks


def build_reference(cfg, dump):
    """Runs the reference on the dumped weights; raises DumpError when it cannot."""
    shapes = param_shapes(cfg)
    trained = lora_shapes(cfg) or dict(shapes)
    shapes.update(trained)
    problems = []
    for n, shp in shapes.items():
        if n not in dump:
            problems.append("parameter %s missing" % n)
        elif tuple(dump[n].shape) != shp:
            problems.append("parameter %s has shape %s, want %s"
                            % (n, list(dump[n].shape), list(shp)))
    problems += validate_tokens(cfg, dump)
    if problems:
        raise DumpError("cannot run the reference: " + "; ".join(problems[:6])
                        + (" ... (%d problems)" % len(problems) if len(problems) > 6 else ""))
    ref = reference(cfg, {n: dump[n] for n in shapes}, dump["inputs"], dump["targets"])
    ref["shapes"] = shapes
    ref["trained"] = trained
    return ref


def print_tap(checks):
    for i, (passed, desc) in enumerate(checks, 1):
        print("%s %d - %s" % ("ok" if passed else "not ok", i, desc))
    print("1..%d" % len(checks))
    sys.stdout.flush()
    return all(p for p, _ in checks)


# ---------------------------------------------------------------- self-test

def self_test(cfg, dump, tol):
    """Shows that the comparison catches small errors.  Uses a 'perfect' dump
    (the reference's own results rounded to float32) so the checks do not
    depend on whether the C side is right, then breaks it in several ways."""
    ref = build_reference(cfg, dump)
    checks = []

    perfect = {n: dump[n] for n in list(ref["shapes"]) + ["inputs", "targets"]}
    perfect["logits"] = ref["logits"].astype(np.float32)
    perfect["loss"] = ref["loss"].astype(np.float32)
    for n in ref["trained"]:
        perfect["grad:" + n] = ref["grads"][n].astype(np.float32)
    res = compare(cfg, perfect, ref, tol)
    worst = [d for p, d in res if not p]
    checks.append((not worst, "self-test: the reference's own float32 results pass"
                   + ("" if not worst else " (FAILED: %s)" % worst[0])))

    # Perturb one gradient by 1e-3 relative (one element moved by 1e-3 ||g||),
    # in the perfect dump and in the real one.
    names = [n for n in ref["trained"] if len(ref["trained"][n]) == 2
             and np.linalg.norm(ref["grads"][n]) > 0]
    target = names[len(names) // 2]
    for label, base in (("reference", perfect), ("dumped", dump)):
        d = dict(base)
        g = np.array(d["grad:" + target], dtype=np.float32)
        flat = g.reshape(-1)
        j = int(np.argmax(np.abs(flat)))
        flat[j] += np.float32(1e-3 * np.linalg.norm(g.astype(np.float64)))
        d["grad:" + target] = g
        res = compare(cfg, d, ref, tol)
        hit = [(p, desc) for p, desc in res if desc.startswith("grad %s rel" % target)]
        flagged = len(hit) == 1 and not hit[0][0]
        checks.append((flagged, "self-test: 1e-3 relative perturbation of %s grad %s %s (%s)"
                       % (label, target, "detected" if flagged else "NOT detected",
                          hit[0][1] if hit else "no such check")))

    # Logits off by 1e-3 relative in one element.
    d = dict(perfect)
    lg = np.array(d["logits"], dtype=np.float32)
    lg.reshape(-1)[0] += np.float32(1e-3 * np.linalg.norm(lg.astype(np.float64)))
    d["logits"] = lg
    res = compare(cfg, d, ref, tol)
    flagged = any(not p and desc.startswith("logits rel") for p, desc in res)
    checks.append((flagged, "self-test: perturbed logits %s" % ("detected" if flagged else "NOT detected")))

    # Loss off by 1e-3 relative.
    d = dict(perfect)
    d["loss"] = (perfect["loss"] * np.float32(1 + 1e-3)).astype(np.float32)
    res = compare(cfg, d, ref, tol)
    flagged = any(not p and desc.startswith("loss rel") for p, desc in res)
    checks.append((flagged, "self-test: perturbed loss %s" % ("detected" if flagged else "NOT detected")))

    # A missing gradient, an extra record, a wrong shape.
    d = dict(perfect)
    del d["grad:" + target]
    flagged = not all(p for p, _ in compare(cfg, d, ref, tol))
    checks.append((flagged, "self-test: missing grad record %s" % ("detected" if flagged else "NOT detected")))
    d = dict(perfect)
    d["grad:bogus.weight"] = np.zeros(3, dtype=np.float32)
    flagged = not all(p for p, _ in compare(cfg, d, ref, tol))
    checks.append((flagged, "self-test: extra record %s" % ("detected" if flagged else "NOT detected")))
    d = dict(perfect)
    d["grad:" + target] = perfect["grad:" + target].reshape(1, -1)
    flagged = not all(p for p, _ in compare(cfg, d, ref, tol))
    checks.append((flagged, "self-test: wrong gradient shape %s" % ("detected" if flagged else "NOT detected")))
    # LoRA: a gradient claimed for a frozen base tensor.
    frozen = [n for n in ref["shapes"] if n not in ref["trained"]]
    if "lora" in cfg and frozen:
        d = dict(perfect)
        d["grad:" + frozen[0]] = np.zeros(ref["shapes"][frozen[0]], dtype=np.float32)
        flagged = any(not p and desc.startswith("no grad: record") for p, desc in
                      compare(cfg, d, ref, tol))
        checks.append((flagged, "self-test: grad record of frozen %s %s"
                       % (frozen[0], "detected" if flagged else "NOT detected")))
    # A NaN must never pass.
    d = dict(perfect)
    g = np.array(perfect["grad:" + target])
    g.reshape(-1)[0] = np.nan
    d["grad:" + target] = g
    flagged = not all(p for p, _ in compare(cfg, d, ref, tol))
    checks.append((flagged, "self-test: NaN gradient %s" % ("detected" if flagged else "NOT detected")))
    return checks


# ---------------------------------------------------------------- fake dumps

FAKE = {
    "gpt2": dict(arch="gpt2", n_layer=2, n_head=4, n_kv_head=4, d_model=32, d_ff=128,
                 vocab_size=61, seq_len=16, rope_theta=10000.0, norm_eps=1e-5,
                 tie_embeddings=True, batch=3),
    "llama": dict(arch="llama", n_layer=2, n_head=4, n_kv_head=2, d_model=32, d_ff=88,
                  vocab_size=61, seq_len=16, rope_theta=10000.0, norm_eps=1e-5,
                  tie_embeddings=False, batch=3),
}


def make_fake(dump_dir, arch, tie, seed):
    cfg = dict(FAKE[arch])
    if tie is not None:
        cfg["tie_embeddings"] = tie
    rng = np.random.default_rng(seed)
    weights = {}
    for n, shp in param_shapes(cfg).items():
        if n.endswith("norm.weight") or n.endswith("layernorm.weight") \
                or ".ln_" in n and n.endswith(".weight"):
            w = 1.0 + 0.1 * rng.standard_normal(shp)        # norm gains near 1
        else:
            w = 0.02 * rng.standard_normal(shp)
        weights[n] = w.astype(np.float32)
    B, T, V = cfg["batch"], cfg["seq_len"], cfg["vocab_size"]
    inputs = rng.integers(0, V, size=(B, T)).astype(np.int32)
    targets = rng.integers(0, V, size=(B, T)).astype(np.int32)
    ref = reference(cfg, weights, inputs, targets)
    rec = dict(weights)
    for n in weights:
        rec["grad:" + n] = ref["grads"][n].astype(np.float32)
    rec["inputs"] = inputs
    rec["targets"] = targets
    rec["logits"] = ref["logits"].astype(np.float32)
    rec["loss"] = ref["loss"].astype(np.float32)
    os.makedirs(dump_dir, exist_ok=True)
    with open(os.path.join(dump_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_dump(os.path.join(dump_dir, "dump.bin"), rec)


# ---------------------------------------------------------------- main

def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump_dir")
    ap.add_argument("arch", nargs="?", help="with --make-fake: gpt2 or llama")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--make-fake", action="store_true")
    ap.add_argument("--tie", choices=("yes", "no"))
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args(argv)

    torch.set_default_dtype(F64)
    if a.make_fake:
        if a.arch not in FAKE:
            ap.error("--make-fake needs ARCH gpt2 or llama")
        make_fake(a.dump_dir, a.arch, None if a.tie is None else a.tie == "yes", a.seed)
        return 0
    if a.arch is not None:
        ap.error("unexpected argument %r" % a.arch)

    try:
        cfg = load_config(a.dump_dir)
        dump = read_dump(os.path.join(a.dump_dir, "dump.bin"))
        print("# %s: %s, %d records" % (a.dump_dir, cfg["arch"], len(dump)))
        if a.self_test:
            checks = self_test(cfg, dump, a.tol)
        else:
            try:
                ref = build_reference(cfg, dump)
            except DumpError as e:
                shapes = param_shapes(cfg)
                trained = lora_shapes(cfg) or dict(shapes)
                shapes.update(trained)
                checks = [names_check(shapes, dump, trained), (False, str(e))]
            else:
                checks = compare(cfg, dump, ref, a.tol)
    except (DumpError, OSError, ValueError, KeyError) as e:
        print("not ok 1 - read %s: %s" % (a.dump_dir, e))
        print("1..1")
        return 1
    return 0 if print_tap(checks) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
