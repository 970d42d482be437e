"""The reference models of tests/torch_ref.py, in float64 PyTorch: GPT-2 and
Llama built from a name -> array dict of weights with Hugging Face's names
and conventions (GPT2LMHeadModel, LlamaForCausalLM, Llama 3's RoPE
scaling), PEFT's LoRA on the targeted linear layers, and reference(), one
forward and backward with the mean cross-entropy (targets of -1 ignored).
Plain torch ops only, written from the models' definitions, so that
shardtrain's CPU backend is checked against an independent computation.
Also imported by tests/hf_make.py for the expected loss of a Hugging Face
directory.

Environment (tests/torch.sh's proofs that the comparison can fail):
ST_REF_LORA_SCALE overrides the LoRA scale alpha / r, ST_REF_COUNT_IGNORED
counts the ignored targets (as token 0), ST_REF_IGNORE_ROPE_SCALING drops
Llama 3's RoPE scaling.
"""
import math
import os

import numpy as np
import torch

F64 = torch.float64


def param_shapes(cfg):
    """Ordered dict of HF parameter name -> shape the reference expects."""
    L, C, F, V, T = (cfg["n_layer"], cfg["d_model"], cfg["d_ff"],
                     cfg["vocab_size"], cfg["seq_len"])
    s = {}
    if cfg["arch"] == "gpt2":
        s["transformer.wte.weight"] = (V, C)
        s["transformer.wpe.weight"] = (T, C)
        for i in range(L):
            p = "transformer.h.%d." % i
            s[p + "ln_1.weight"] = (C,)
            s[p + "ln_1.bias"] = (C,)
            s[p + "attn.c_attn.weight"] = (C, 3 * C)
            s[p + "attn.c_attn.bias"] = (3 * C,)
            s[p + "attn.c_proj.weight"] = (C, C)
            s[p + "attn.c_proj.bias"] = (C,)
            s[p + "ln_2.weight"] = (C,)
            s[p + "ln_2.bias"] = (C,)
            s[p + "mlp.c_fc.weight"] = (C, F)
            s[p + "mlp.c_fc.bias"] = (F,)
            s[p + "mlp.c_proj.weight"] = (F, C)
            s[p + "mlp.c_proj.bias"] = (C,)
        s["transformer.ln_f.weight"] = (C,)
        s["transformer.ln_f.bias"] = (C,)
    else:
        H, KV = cfg["n_head"], cfg["n_kv_head"]
        hd = C // H
        s["model.embed_tokens.weight"] = (V, C)
        for i in range(L):
            p = "model.layers.%d." % i
            s[p + "input_layernorm.weight"] = (C,)
            s[p + "self_attn.q_proj.weight"] = (H * hd, C)
            s[p + "self_attn.k_proj.weight"] = (KV * hd, C)
            s[p + "self_attn.v_proj.weight"] = (KV * hd, C)
            s[p + "self_attn.o_proj.weight"] = (C, H * hd)
            s[p + "post_attention_layernorm.weight"] = (C,)
            s[p + "mlp.gate_proj.weight"] = (F, C)
            s[p + "mlp.up_proj.weight"] = (F, C)
            s[p + "mlp.down_proj.weight"] = (C, F)
        s["model.norm.weight"] = (C,)
    if not cfg["tie_embeddings"]:
        s["lm_head.weight"] = (V, C)
    return s


# PEFT's target_modules names -> (module path in a block, in, out) per arch.
LORA_MODULES = {
    "gpt2": {
        "c_attn": ("attn.c_attn", lambda c: (c["d_model"], 3 * c["d_model"])),
        "attn.c_proj": ("attn.c_proj", lambda c: (c["d_model"], c["d_model"])),
        "c_fc": ("mlp.c_fc", lambda c: (c["d_model"], c["d_ff"])),
        "mlp.c_proj": ("mlp.c_proj", lambda c: (c["d_ff"], c["d_model"])),
    },
    "llama": {
        "q_proj": ("self_attn.q_proj", lambda c: (c["d_model"], c["d_model"])),
        "k_proj": ("self_attn.k_proj",
                   lambda c: (c["d_model"], c["n_kv_head"] * (c["d_model"] // c["n_head"]))),
        "v_proj": ("self_attn.v_proj",
                   lambda c: (c["d_model"], c["n_kv_head"] * (c["d_model"] // c["n_head"]))),
        "o_proj": ("self_attn.o_proj", lambda c: (c["d_model"], c["d_model"])),
        "gate_proj": ("mlp.gate_proj", lambda c: (c["d_model"], c["d_ff"])),
        "up_proj": ("mlp.up_proj", lambda c: (c["d_model"], c["d_ff"])),
        "down_proj": ("mlp.down_proj", lambda c: (c["d_ff"], c["d_model"])),
    },
}


def lora_shapes(cfg):
    """Ordered dict of adapter name -> shape (empty without LoRA): for each
    block and targeted module, lora_A [r, in] and lora_B [out, r]."""
    s = {}
    lo = cfg.get("lora")
    if not lo:
        return s
    r = lo["rank"]
    block = "transformer.h.%d." if cfg["arch"] == "gpt2" else "model.layers.%d."
    for i in range(cfg["n_layer"]):
        for t, (path, io) in LORA_MODULES[cfg["arch"]].items():
            if t in lo["targets"]:
                fin, fout = io(cfg)
                s[block % i + path + ".lora_A.weight"] = (r, fin)
                s[block % i + path + ".lora_B.weight"] = (fout, r)
    return s


def lora_scale(cfg):
    # ST_REF_LORA_SCALE: tests/torch.sh's proof that the comparison sees
    # the adapters' scale alpha / rank.
    if os.environ.get("ST_REF_LORA_SCALE"):
        return float(os.environ["ST_REF_LORA_SCALE"])
    return float(cfg["lora"]["alpha"]) / float(cfg["lora"]["rank"])


def lora_delta(cfg, P, module, x):
    """PEFT's LoRA update of module's output, (alpha / r) * (x A^T) B^T
    (dropout 0), or 0 where module has no adapter."""
    a = P.get(module + ".lora_A.weight")
    if a is None:
        return 0.0
    return lora_scale(cfg) * ((x @ a.t()) @ P[module + ".lora_B.weight"].t())


def layer_norm(x, w, b, eps):
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)      # biased
    return (x - mu) / torch.sqrt(var + eps) * w + b


def rms_norm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def causal_attention(q, k, v):
    """q [B,H,T,hd], k/v [B,H,T,hd] -> [B,H,T,hd]; causal, scale 1/sqrt(hd)."""
    T, hd = q.shape[-2], q.shape[-1]
    att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    att = att.masked_fill(~mask, float("-inf"))
    att = torch.softmax(att, dim=-1)
    return att @ v


def gpt2_forward(cfg, P, idx):
    B, T = idx.shape
    C, H = cfg["d_model"], cfg["n_head"]
    hd = C // H
    eps = cfg["norm_eps"]
    x = P["transformer.wte.weight"][idx] + P["transformer.wpe.weight"][:T][None]
    for i in range(cfg["n_layer"]):
        p = "transformer.h.%d." % i
        h = layer_norm(x, P[p + "ln_1.weight"], P[p + "ln_1.bias"], eps)
        qkv = (h @ P[p + "attn.c_attn.weight"] + P[p + "attn.c_attn.bias"]
               + lora_delta(cfg, P, p + "attn.c_attn", h))
        q, k, v = qkv.split(C, dim=-1)
        q, k, v = (t.view(B, T, H, hd).transpose(1, 2) for t in (q, k, v))
        y = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C)
        x = x + (y @ P[p + "attn.c_proj.weight"] + P[p + "attn.c_proj.bias"]
                 + lora_delta(cfg, P, p + "attn.c_proj", y))
        h = layer_norm(x, P[p + "ln_2.weight"], P[p + "ln_2.bias"], eps)
        h = gelu_tanh(h @ P[p + "mlp.c_fc.weight"] + P[p + "mlp.c_fc.bias"]
                      + lora_delta(cfg, P, p + "mlp.c_fc", h))
        x = x + (h @ P[p + "mlp.c_proj.weight"] + P[p + "mlp.c_proj.bias"]
                 + lora_delta(cfg, P, p + "mlp.c_proj", h))
    x = layer_norm(x, P["transformer.ln_f.weight"], P["transformer.ln_f.bias"], eps)
    w_out = P["transformer.wte.weight"] if cfg["tie_embeddings"] else P["lm_head.weight"]
    return x @ w_out.t()


def llama3_inv_freq(inv_freq, rs):
    """Llama 3.1's frequency scaling, written from its published definition
    (Meta's apply_scaling; transformers' rope_type "llama3"): wavelengths
    under original/high_freq_factor kept, over original/low_freq_factor
    divided by factor, interpolated in original/wavelength between."""
    orig, factor = float(rs["original_max_position_embeddings"]), float(rs["factor"])
    lo, hi = float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
    out = []
    for f in inv_freq.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < orig / hi:
            out.append(f)
        elif wavelen > orig / lo:
            out.append(f / factor)
        else:
            smooth = (orig / wavelen - lo) / (hi - lo)
            out.append((1 - smooth) * f / factor + smooth * f)
    return torch.tensor(out, dtype=F64)


def rope_cos_sin(T, hd, theta, scaling=None):
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=F64) / hd))   # hd/2
    # ST_REF_IGNORE_ROPE_SCALING: tests/torch.sh's proof that the
    # comparison tells scaled from plain RoPE.
    if scaling and not os.environ.get("ST_REF_IGNORE_ROPE_SCALING"):
        inv_freq = llama3_inv_freq(inv_freq, scaling)
    freqs = torch.arange(T, dtype=F64)[:, None] * inv_freq[None, :]         # [T, hd/2]
    emb = torch.cat((freqs, freqs), dim=-1)                                  # [T, hd]
    return emb.cos(), emb.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def llama_forward(cfg, P, idx):
    B, T = idx.shape
    C, H, KV = cfg["d_model"], cfg["n_head"], cfg["n_kv_head"]
    hd = C // H
    rep = H // KV
    eps = cfg["norm_eps"]
    cos, sin = rope_cos_sin(T, hd, float(cfg["rope_theta"]), cfg.get("rope_scaling"))
    # query head h reads kv head h // rep
    kv_of_head = torch.arange(H) // rep
    x = P["model.embed_tokens.weight"][idx]
    for i in range(cfg["n_layer"]):
        p = "model.layers.%d." % i
        h = rms_norm(x, P[p + "input_layernorm.weight"], eps)
        q, k, v = (h @ P[p + "self_attn.%s_proj.weight" % n].t()
                   + lora_delta(cfg, P, p + "self_attn.%s_proj" % n, h) for n in "qkv")
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, KV, hd).transpose(1, 2)
        v = v.view(B, T, KV, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k[:, kv_of_head]
        v = v[:, kv_of_head]
        y = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, H * hd)
        x = x + y @ P[p + "self_attn.o_proj.weight"].t() + lora_delta(cfg, P, p + "self_attn.o_proj", y)
        h = rms_norm(x, P[p + "post_attention_layernorm.weight"], eps)
        g = h @ P[p + "mlp.gate_proj.weight"].t() + lora_delta(cfg, P, p + "mlp.gate_proj", h)
        u = h @ P[p + "mlp.up_proj.weight"].t() + lora_delta(cfg, P, p + "mlp.up_proj", h)
        a = g * torch.sigmoid(g) * u
        x = x + a @ P[p + "mlp.down_proj.weight"].t() + lora_delta(cfg, P, p + "mlp.down_proj", a)
    x = rms_norm(x, P["model.norm.weight"], eps)
    w_out = P["model.embed_tokens.weight"] if cfg["tie_embeddings"] else P["lm_head.weight"]
    return x @ w_out.t()


def reference(cfg, weights, inputs, targets):
    """weights: name -> numpy (float32); returns dict of float64 numpy results.
    With LoRA only the adapters require (and get) gradients."""
    adapters = lora_shapes(cfg)
    trained = adapters if adapters else weights
    P = {n: torch.tensor(np.asarray(a, dtype=np.float64), dtype=F64,
                         requires_grad=n in trained)
         for n, a in weights.items()}
    idx = torch.tensor(np.asarray(inputs, dtype=np.int64))
    tgt = torch.tensor(np.asarray(targets, dtype=np.int64))
    # ST_REF_COUNT_IGNORED: tests/torch.sh's proof that the comparison sees
    # the mask: the ignored positions counted (as token 0) must disagree.
    if os.environ.get("ST_REF_COUNT_IGNORED"):
        tgt = torch.where(tgt < 0, torch.zeros_like(tgt), tgt)
    fwd = gpt2_forward if cfg["arch"] == "gpt2" else llama_forward
    logits = fwd(cfg, P, idx)
    V = logits.shape[-1]
    # Targets of -1 are positions that do not count (instruction data's
    # prompts); the mean is over the others, as PyTorch defines it.
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1),
                                             reduction="mean", ignore_index=-1)
    loss.backward()
    return {
        "loss": np.array([loss.item()]),
        "logits": logits.detach().numpy(),
        "grads": {n: p.grad.detach().numpy().copy() if p.grad is not None
                  else np.zeros(p.shape) for n, p in P.items() if n in trained},
    }
