#!/usr/bin/env python3
"""PyTorch reference trainer for shardtrain's GPU and CPU benchmarks.

Trains one of shardtrain's model presets (the shapes of src/config/schema.c's
st_presets, the tensor layout of src/model/model.c) on synthetic random
tokens with what a well-tuned single-GPU PyTorch run uses: fp32 master
weights under bf16 autocast, F.scaled_dot_product_attention(is_causal=True)
(flash attention on an H100), fused AdamW, global gradient-norm clipping and
torch.compile.  It prints one JSON line:

  {"status": "ok", "model": ..., "params": ..., "flops_per_token": ...,
   "micro_batch": ..., "seq": ..., "tokens_per_s": ..., "step_time_ms": ...,
   "mfu": ..., "peak_tflops": ..., ...}

or, when it cannot run (no torch, no CUDA, out of memory at micro-batch 1),
{"status": "failed", "reason": "..."} with exit status 1 (3 for no torch).

FLOPs per token are counted exactly as shardtrain counts them
(st_model_flops_per_token in src/model/model.c): 6 x the parameters of every
matrix product (the output head once, also when tied to the embedding; the
embedding lookups are not matrix products) + 12 x n_layer x d_model x seq.
The matrix parameters are read off this model's nn.Linear modules, so the
count checks the architecture rather than restating the formula.
MFU = tokens/s x FLOPs per token / (peak TFLOP/s x 1e12).

Timing: --warmup steps first (torch.compile compiles during the first), then
--steps steps timed with CUDA events (wall clock on CPU).  Timings are for
the benchmark only; the test suite checks parameter and FLOP counts.

The CPU benchmark (bench/cpu.sh) runs it as a plain eager fp32 trainer:
--device cpu --precision fp32 --no-compile --threads N, the shape given key
by key (--n-layer, --n-head, --d-model, --d-ff, --vocab, --seq override the
preset's values as shardtrain's explicit model keys do, nothing derived),
real tokens from an llm.c-format token file (--tokens: random windows, one
batch per step, drawn before the timing) and --log-steps, which prints
"step N: loss X (took Y ms)" for every step, warm-up included (N from 1),
before the JSON line.  The optimizer is the same in every mode: AdamW, lr
--lr held constant, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on the
matrices and embeddings (none on biases and norms), gradients clipped to a
global norm of 1.0: shardtrain's defaults with optim.schedule = constant.
"""
import argparse
import contextlib
import gc
import json
import math
import struct
import sys
import time

# name: arch, n_layer, n_head, n_kv_head {gpt2, llama}, d_model,
# d_ff {gpt2, llama}, vocab, seq, rope_theta, norm_eps, tied.
# None keeps shardtrain's default: arch gpt2, n_kv_head = n_head,
# rope_theta 10000, norm_eps 1e-5, tied true for gpt2 and false for llama.
# Mirrors src/config/schema.c st_presets; tests/bench_torch.sh checks the counts
# against the shardtrain binary.
PRESETS = {
    "tiny":       (None,    2,  4, (None, 2),  64,   (256, 176),     256,    64,   None,     None, None),
    "gpt2-124m":  ("gpt2", 12, 12, (None, None), 768,  (3072, 3072),   50257,  1024, None,     None, True),
    "gpt2-350m":  ("gpt2", 24, 16, (None, None), 1024, (4096, 4096),   50257,  1024, None,     None, True),
    "gpt2-774m":  ("gpt2", 36, 20, (None, None), 1280, (5120, 5120),   50257,  1024, None,     None, True),
    "gpt2-1558m": ("gpt2", 48, 25, (None, None), 1600, (6400, 6400),   50257,  1024, None,     None, True),
    "llama-1b":   ("llama", 16, 32, (8, 8),    2048, (8192, 8192),   128256, 2048, 500000.0, 1e-5, True),
    "llama-8b":   ("llama", 32, 32, (8, 8),    4096, (14336, 14336), 128256, 8192, 500000.0, 1e-5, False),
}

# Dense bf16 tensor-core peaks (no sparsity), TFLOP/s, by device name.
# H200 has the H100 SXM's compute (it differs in memory), so the same 989.
PEAKS = [("H200", 989.0), ("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.0)]


def emit(obj, code=0):
    print(json.dumps(obj, sort_keys=True), flush=True)
    sys.exit(code)


def resolve(name, arch_arg, seq_arg, over=None):
    p = PRESETS[name]
    arch = p[0] or arch_arg or "gpt2"
    if p[0] and arch_arg and arch_arg != p[0]:
        raise SystemExit(f"--arch {arch_arg} contradicts preset {name} ({p[0]})")
    a = 0 if arch == "gpt2" else 1
    n_head = p[2]
    kv = p[3][a] or n_head
    if arch == "gpt2":
        kv = n_head
    cfg = dict(
        model=name, arch=arch, n_layer=p[1], n_head=n_head, n_kv_head=kv, d_model=p[4],
        d_ff=p[5][a], vocab=p[6], seq=seq_arg or p[7],
        rope_theta=p[8] if p[8] is not None else 10000.0,
        norm_eps=p[9] if p[9] is not None else 1e-5,
        tied=p[10] if p[10] is not None else arch == "gpt2",
    )
    for k, v in (over or {}).items():
        if v:
            cfg[k] = v
    if arch == "gpt2":
        cfg["n_kv_head"] = cfg["n_head"]
    if cfg["d_model"] % cfg["n_head"] or cfg["n_head"] % cfg["n_kv_head"]:
        raise SystemExit(f"inconsistent shape {cfg}")
    return cfg


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gpt2-124m", choices=sorted(PRESETS))
    ap.add_argument("--arch", choices=["gpt2", "llama"],
                    help="architecture for presets without one (tiny); default gpt2")
    ap.add_argument("--seq", type=int, default=0, help="override the preset's seq_len")
    ap.add_argument("--micro-batch", default="auto",
                    help="sequences per step, or auto: the largest power of two that "
                         "fits, found by trying (up to --max-micro-batch)")
    ap.add_argument("--max-micro-batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first (compilation)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--compile", dest="compile", action="store_true", default=None,
                    help="torch.compile the model (default on CUDA when available)")
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    ap.add_argument("--peak-tflops", type=float, default=0.0,
                    help="dense bf16 peak of the device for MFU (default: by device "
                         "name, 989 for H100 SXM and H200)")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"],
                    help="bf16: bf16 autocast over fp32 weights; fp32: no autocast")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--tokens", help="llm.c token file (header of 256 int32: 20240520, 1, "
                    "count; uint16 tokens) to train on instead of random tokens")
    ap.add_argument("--lr", type=float, default=3e-4, help="AdamW learning rate (constant)")
    ap.add_argument("--log-steps", action="store_true",
                    help="print 'step N: loss X (took Y ms)' for every step")
    for k in ("n-layer", "n-head", "n-kv-head", "d-model", "d-ff", "vocab"):
        ap.add_argument("--" + k, type=int, default=0, help="override the preset's " + k)
    ap.add_argument("--count-only", action="store_true",
                    help="build the model and print the counts without training")
    return ap.parse_args()


def main():
    args = parse_args()
    over = {k: getattr(args, k) for k in ("n_layer", "n_head", "n_kv_head", "d_model", "d_ff", "vocab")}
    cfg = resolve(args.model, args.arch, args.seq, over)
    base = dict(model=args.model, arch=cfg["arch"], seq=cfg["seq"], device=args.device)
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001 - any import failure is reported
        emit(dict(base, status="failed", reason=f"torch not importable: {type(e).__name__}: {e}"), 3)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass

    notes = []
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    if not has_sdpa:
        notes.append(f"torch {torch.__version__} has no scaled_dot_product_attention: explicit attention")
    try:
        import inspect
        sdpa_gqa = has_sdpa and "enable_gqa" in inspect.signature(F.scaled_dot_product_attention).parameters
    except (TypeError, ValueError):
        sdpa_gqa = False

    def attention(q, k, v):
        # q: B H T hd, k v: B KV T hd
        if k.shape[1] != q.shape[1]:
            if sdpa_gqa:
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            rep = q.shape[1] // k.shape[1]
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        if has_sdpa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        T = q.shape[2]
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(mask, float("-inf"))
        return torch.softmax(s.float(), dim=-1).to(v.dtype) @ v

    class RMSNorm(nn.Module):
        def __init__(self, c, eps):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(c, device=mk))
            self.eps = eps

        def forward(self, x):
            xf = x.float()
            y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
            return (y * self.weight).to(x.dtype)

    L, C, H, KV, Fw, V, T = (cfg[k] for k in ("n_layer", "d_model", "n_head", "n_kv_head",
                                              "d_ff", "vocab", "seq"))
    hd = C // H
    gpt2 = cfg["arch"] == "gpt2"
    dev = torch.device(args.device)
    if args.device == "cuda" and not args.count_only and not torch.cuda.is_available():
        emit(dict(base, status="failed", reason=f"torch {torch.__version__} sees no CUDA device "
                  f"(torch.version.cuda={torch.version.cuda})"), 1)
    # Built where it runs; --count-only builds it on the meta device (shapes, no memory).
    mk = torch.device("meta") if args.count_only else dev

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            if gpt2:
                self.ln_1 = nn.LayerNorm(C, eps=cfg["norm_eps"], device=mk)
                self.c_attn = nn.Linear(C, 3 * C, device=mk)
                self.attn_proj = nn.Linear(C, C, device=mk)
                self.ln_2 = nn.LayerNorm(C, eps=cfg["norm_eps"], device=mk)
                self.c_fc = nn.Linear(C, Fw, device=mk)
                self.mlp_proj = nn.Linear(Fw, C, device=mk)
            else:
                self.input_layernorm = RMSNorm(C, cfg["norm_eps"])
                self.q_proj = nn.Linear(C, H * hd, bias=False, device=mk)
                self.k_proj = nn.Linear(C, KV * hd, bias=False, device=mk)
                self.v_proj = nn.Linear(C, KV * hd, bias=False, device=mk)
                self.o_proj = nn.Linear(H * hd, C, bias=False, device=mk)
                self.post_attention_layernorm = RMSNorm(C, cfg["norm_eps"])
                self.gate_proj = nn.Linear(C, Fw, bias=False, device=mk)
                self.up_proj = nn.Linear(C, Fw, bias=False, device=mk)
                self.down_proj = nn.Linear(Fw, C, bias=False, device=mk)

        def forward(self, x, cos, sin):
            B = x.shape[0]
            if gpt2:
                q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=-1)
                q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in (q, k, v))
                y = attention(q, k, v).transpose(1, 2).reshape(B, T, C)
                x = x + self.attn_proj(y)
                return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
            h = self.input_layernorm(x)
            q = self.q_proj(h).view(B, T, H, hd).transpose(1, 2)
            k = self.k_proj(h).view(B, T, KV, hd).transpose(1, 2)
            v = self.v_proj(h).view(B, T, KV, hd).transpose(1, 2)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            y = attention(q, k, v).transpose(1, 2).reshape(B, T, H * hd)
            x = x + self.o_proj(y)
            h = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

    def rope(x, cos, sin):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return (x * cos + torch.cat((-x2, x1), dim=-1) * sin).to(x.dtype)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C, device=mk)
            self.wpe = nn.Embedding(T, C, device=mk) if gpt2 else None
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.norm_f = nn.LayerNorm(C, eps=cfg["norm_eps"], device=mk) if gpt2 else RMSNorm(C, cfg["norm_eps"])
            self.lm_head = nn.Linear(C, V, bias=False, device=mk)
            if cfg["tied"]:
                self.lm_head.weight = self.wte.weight
            inv = 1.0 / cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
            ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
            ang = torch.cat((ang, ang), dim=-1)
            self.register_buffer("cos", ang.cos().float().to(mk), persistent=False)
            self.register_buffer("sin", ang.sin().float().to(mk), persistent=False)
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02
                    if name.endswith(("attn_proj.weight", "mlp_proj.weight", "o_proj.weight",
                                      "down_proj.weight")):
                        std /= math.sqrt(2 * L)
                    nn.init.normal_(p, std=std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, idx, targets):
            x = self.wte(idx)
            if gpt2:
                x = x + self.wpe.weight[: idx.shape[1]]
            for b in self.blocks:
                x = b(x, self.cos, self.sin)
            logits = self.lm_head(self.norm_f(x))
            return F.cross_entropy(logits.float().view(-1, V), targets.reshape(-1))

    torch.manual_seed(args.seed)
    model = Model()

    # The counts, from the module itself: unique parameters (a tied head is
    # one tensor), and the matrix products' weights (every nn.Linear, the
    # head once; embeddings are lookups).
    params = sum(p.numel() for p in model.parameters())
    seen, matmul = set(), 0
    for m in model.modules():
        if isinstance(m, nn.Linear) and id(m.weight) not in seen:
            seen.add(id(m.weight))
            matmul += m.weight.numel()
    flops_tok = 6 * matmul + 12 * L * C * T
    out = dict(base, status="ok", params=params, flops_per_token=flops_tok,
               n_layer=L, d_model=C, n_head=H, n_kv_head=KV, d_ff=Fw, vocab=V,
               tied=cfg["tied"], rope_theta=cfg["rope_theta"], norm_eps=cfg["norm_eps"],
               torch=torch.__version__)
    if args.count_only:
        emit(out)

    cuda = dev.type == "cuda"
    want_compile = args.compile if args.compile is not None else cuda
    if want_compile and not hasattr(torch, "compile"):
        if args.compile:
            emit(dict(out, status="failed", reason=f"torch {torch.__version__} has no torch.compile"), 1)
        notes.append(f"torch {torch.__version__} has no torch.compile: eager")
        want_compile = False

    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() != 2]
    groups = [dict(params=decay, weight_decay=0.1), dict(params=no_decay, weight_decay=0.0)]
    fused = False
    if cuda:
        try:
            opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
            fused = True
        except (TypeError, RuntimeError) as e:
            notes.append(f"no fused AdamW ({e}): default implementation")
    if not fused:
        opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    all_params = list(model.parameters())

    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    tokens = None
    if args.tokens:
        try:
            raw = open(args.tokens, "rb").read()
            magic, version, count = struct.unpack_from("<3i", raw)
            if (magic, version) != (20240520, 1) or len(raw) != 1024 + 2 * count or count < T + 2:
                raise ValueError(f"not an llm.c uint16 token file of more than {T + 1} tokens "
                                 f"(magic {magic}, version {version}, count {count}, {len(raw)} bytes)")
            import numpy as np
            tokens = torch.from_numpy(np.frombuffer(raw, dtype="<u2", offset=1024).astype(np.int64))
            if int(tokens.max()) >= V:
                raise ValueError(f"token {int(tokens.max())} >= vocab {V}")
        except (OSError, ValueError, struct.error) as e:
            emit(dict(out, status="failed", reason=f"--tokens {args.tokens}: {e}"), 1)

    def batches(b, n=4):
        if tokens is not None:
            # Random windows of T + 1 tokens, one batch per step.
            n = args.warmup + args.steps
            start = torch.randint(0, tokens.numel() - T - 1, (n, b), generator=gen)
            data = tokens[start.unsqueeze(-1) + torch.arange(T + 1)].to(dev)
        else:
            data = torch.randint(0, V, (n, b, T + 1), generator=gen).to(dev)
        return [(d[:, :-1].contiguous(), d[:, 1:].contiguous()) for d in data]

    bf16 = args.precision == "bf16"

    def make_step(fwd):
        def step(x, y):
            opt.zero_grad(set_to_none=True)
            with (torch.autocast(device_type=dev.type, dtype=torch.bfloat16) if bf16
                  else contextlib.nullcontext()):
                loss = fwd(x, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(all_params, 1.0)
            opt.step()
            return loss
        return step

    def is_oom(e):
        return cuda and (isinstance(e, getattr(torch.cuda, "OutOfMemoryError", ())) or
                         "out of memory" in str(e))

    def release():
        opt.zero_grad(set_to_none=True)
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()

    # Micro-batch: the largest power of two for which one eager step (the
    # compiled model needs no more memory than eager) fits.
    if args.micro_batch == "auto":
        if not cuda:
            emit(dict(out, status="failed", reason="--micro-batch auto needs CUDA"), 1)
        eager_step, fit, b = make_step(model), 0, 1
        while b <= args.max_micro_batch:
            try:
                x, y = batches(b, 1)[0]
                eager_step(x, y)
                torch.cuda.synchronize()
                fit = b
            except Exception as e:  # noqa: BLE001
                if not is_oom(e):
                    raise
                break
            finally:
                x = y = None
                release()
            b *= 2
        if not fit:
            emit(dict(out, status="failed", reason="out of memory at micro-batch 1"), 1)
        micro = fit
        search = f"eager probe 1..{args.max_micro_batch}: largest fitting {fit}"
    else:
        micro = int(args.micro_batch)
        search = "given"

    while True:
        fwd = torch.compile(model) if want_compile else model
        step = make_step(fwd)
        try:
            data = batches(micro)
            t_compile = time.perf_counter()
            loss0 = None
            for i in range(args.warmup):
                t1 = time.perf_counter()
                loss = step(*data[i % len(data)])
                if i == 0:
                    loss0 = float(loss)
                if args.log_steps:
                    if cuda:
                        torch.cuda.synchronize()
                    print(f"step {i + 1}: loss {float(loss):.6f} (took "
                          f"{1e3 * (time.perf_counter() - t1):.3f} ms)", flush=True)
            w = args.warmup
            if cuda:
                torch.cuda.synchronize()
            t_warm = time.perf_counter() - t_compile
            times = []
            if cuda:
                torch.cuda.reset_peak_memory_stats()
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps + 1)]
                ev[0].record()
                losses = []
                for i in range(args.steps):
                    loss = step(*data[(w + i) % len(data)])
                    losses.append(loss.detach())
                    ev[i + 1].record()
                torch.cuda.synchronize()
                times = [ev[i].elapsed_time(ev[i + 1]) / 1e3 for i in range(args.steps)]
                total = ev[0].elapsed_time(ev[-1]) / 1e3
                if args.log_steps:
                    for i, (lo, t) in enumerate(zip(losses, times)):
                        print(f"step {w + i + 1}: loss {float(lo):.6f} (took {1e3 * t:.3f} ms)")
            else:
                t0 = time.perf_counter()
                for i in range(args.steps):
                    t1 = time.perf_counter()
                    loss = step(*data[(w + i) % len(data)])
                    times.append(time.perf_counter() - t1)
                    if args.log_steps:
                        print(f"step {w + i + 1}: loss {float(loss):.6f} (took "
                              f"{1e3 * times[-1]:.3f} ms)", flush=True)
                    if loss0 is None:
                        loss0 = float(loss)
                total = time.perf_counter() - t0
            if loss0 is None:
                loss0 = float(losses[0])
            loss_last = float(loss)
            break
        except Exception as e:  # noqa: BLE001
            if not is_oom(e) or micro == 1:
                if is_oom(e):
                    emit(dict(out, status="failed", reason="out of memory at micro-batch 1"), 1)
                emit(dict(out, status="failed", reason=f"{type(e).__name__}: {str(e)[:300]}"), 1)
            data = fwd = step = None
            release()
            notes.append(f"micro-batch {micro} ran out of memory compiled; halved")
            micro //= 2
            search += f"; halved to {micro} after OOM"

    step_s = total / args.steps
    tok_s = micro * T / step_s
    peak, peak_src = args.peak_tflops, "--peak-tflops"
    name = torch.cuda.get_device_name(dev) if cuda else "cpu"
    if not peak and cuda:
        for key, val in PEAKS:
            if key in name:
                peak, peak_src = val, f"by device name ({key}: dense bf16)"
                break
        else:
            peak_src = "unknown device: MFU not reported (give --peak-tflops)"
    elif not peak:
        peak_src = "cpu: MFU not reported (give --peak-tflops)"
    times.sort()
    out.update(
        micro_batch=micro, micro_batch_search=search, steps=args.steps, warmup=args.warmup,
        tokens_per_s=tok_s, step_time_ms=1e3 * step_s, step_time_ms_median=1e3 * times[len(times) // 2],
        step_time_ms_min=1e3 * times[0], warmup_s=t_warm,
        mfu=(tok_s * flops_tok / (peak * 1e12)) if peak else None,
        peak_tflops=peak or None, peak_source=peak_src, device_name=name,
        compile=bool(want_compile), fused_adamw=fused,
        attention="sdpa is_causal" if has_sdpa else "explicit (math)",
        precision="bf16 autocast, fp32 master weights" if bf16 else "fp32",
        threads=torch.get_num_threads(), tokens=args.tokens or "random", lr=args.lr,
        loss_first=loss0, loss_last=loss_last,
        notes=notes,
    )
    if cuda:
        out["max_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
        out["cuda"] = torch.version.cuda
    if not math.isfinite(loss_last):
        emit(dict(out, status="failed", reason=f"non-finite loss {loss_last}"), 1)
    emit(out)


if __name__ == "__main__":
    main()
