"""peft_ref.py COMMAND ARG...: Hugging Face peft as the reference reader of
shardtrain's LoRA adapter exports.

An exported adapter (adapter_model.safetensors + adapter_config.json) is only
useful if the tool people will load it with accepts it and computes what
shardtrain trained, so the tests ask peft itself rather than re-implementing
its naming and scaling rules: peft on the base model must give the logits of
the merged model that shardtrain also exports.  It runs in its own virtual
environment (PEFT_PYTHON, _venv_peft) because peft needs torch, and only
Debian's torch 1.13 is at hand: the pinned transformers and peft are the last
ones known to accept it, while the tokenizer tests want a newer transformers.

Commands:
  make-base ARCH OUT_DIR
      a tiny random gpt2 or llama model, float32 safetensors (fixed seed)
  make-adapter BASE_DIR OUT_DIR R ALPHA TARGETS
      a random LoRA adapter (TARGETS: comma-separated module names) whose
      B matrices are non-zero too, so that it changes the logits
  merge BASE_DIR ADAPTER_DIR OUT_DIR
      peft's merge_and_unload of the adapter into the base, saved
  check BASE_DIR ADAPTER_DIR MERGED_DIR [--tol TOL]
      base + adapter through peft against MERGED_DIR: prints
      "max_abs_diff X" and "adapter_effect Y"; exit 0 when X <= TOL (1e-5)
      and Y > 100 TOL, 1 (with a "# ..." reason) otherwise, or when the
      adapter's tensors are not exactly those peft expects
  describe ADAPTER_DIR
      adapter_config.json, then each tensor's name, dtype and shape (sorted)
"""

import json
import os
import struct
import sys

# Everything is local: a directory that is not there must fail as such, not
# send huggingface_hub to the network looking for a repository of that name.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def fail(msg):
    print("# " + msg)
    sys.exit(1)


def cmd_make_base(arch, out_dir):
    import torch
    torch.manual_seed(1234)
    if arch == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=2, n_head=4, n_embd=32, vocab_size=61,
                         n_positions=16, bos_token_id=0, eos_token_id=0)
        model = GPT2LMHeadModel(cfg)
    elif arch == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(num_hidden_layers=2, hidden_size=32,
                          num_attention_heads=4, num_key_value_heads=2,
                          intermediate_size=48, vocab_size=61,
                          max_position_embeddings=16, rms_norm_eps=1e-5,
                          tie_word_embeddings=False, bos_token_id=0,
                          eos_token_id=0)
        model = LlamaForCausalLM(cfg)
        # RMSNorm weights start at one: perturb them so that a reader that
        # skipped them would show.
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("norm.weight"):
                    p.add_(0.1 * torch.randn_like(p))
    else:
        fail("unknown ARCH %r (gpt2 or llama)" % arch)
    model = model.float().eval()
    model.save_pretrained(out_dir, safe_serialization=True)


def cmd_make_adapter(base_dir, out_dir, r, alpha, targets):
    import torch
    from transformers import AutoModelForCausalLM
    from peft import LoraConfig, get_peft_model
    torch.manual_seed(4321)
    base = AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32)
    # GPT-2's projections are transformers' Conv1D ([in, out] weights):
    # peft wants fan_in_fan_out for them, and would only warn and flip it.
    fan_in_fan_out = base.config.model_type == "gpt2"
    alpha = float(alpha)
    cfg = LoraConfig(r=int(r), lora_alpha=int(alpha) if alpha.is_integer() else alpha,
                     target_modules=targets.split(","), lora_dropout=0.0,
                     fan_in_fan_out=fan_in_fan_out, bias="none",
                     task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg)
    # peft starts B at zero (the adapter is then a no-op): a non-zero B is
    # what makes a misplaced or ignored adapter visible in the logits.
    with torch.no_grad():
        n = 0
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.1)
                n += 1
    if n == 0:
        fail("no LoRA layers: TARGETS %r matched nothing" % targets)
    model.save_pretrained(out_dir, safe_serialization=True)


def load_peft(base_dir, adapter_dir):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
    from peft import PeftModel, get_peft_model_state_dict
    base = AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32)
    model = PeftModel.from_pretrained(base, adapter_dir)
    model.eval()
    # peft loads the adapter with strict=False and keeps quiet about tensors
    # that match no LoRA layer, or LoRA layers no tensor filled: such an
    # adapter would pass with random (or zero) weights in its place.
    want = get_peft_model_state_dict(model)
    have = load_file(os.path.join(adapter_dir, "adapter_model.safetensors"))
    missing = sorted(set(want) - set(have))
    unexpected = sorted(set(have) - set(want))
    if missing or unexpected:
        fail("adapter keys do not match peft's: missing %s; unexpected %s"
             % (missing[:8] or "none", unexpected[:8] or "none"))
    for k in sorted(want):
        if want[k].shape != have[k].shape or not torch.equal(want[k].float(), have[k].float()):
            fail("adapter tensor %s: peft holds %s, the file %s (or the values differ)"
                 % (k, tuple(want[k].shape), tuple(have[k].shape)))
    return model


def cmd_merge(base_dir, adapter_dir, out_dir):
    model = load_peft(base_dir, adapter_dir)
    model.merge_and_unload().save_pretrained(out_dir, safe_serialization=True)


def cmd_check(base_dir, adapter_dir, merged_dir, tol):
    import torch
    from transformers import AutoModelForCausalLM
    peft_model = load_peft(base_dir, adapter_dir)
    merged = AutoModelForCausalLM.from_pretrained(merged_dir, torch_dtype=torch.float32).eval()
    cfg = merged.config
    npos = getattr(cfg, "n_positions", None) or cfg.max_position_embeddings
    seq = min(12, npos)
    g = torch.Generator().manual_seed(99)
    tokens = torch.randint(0, cfg.vocab_size, (2, seq), generator=g)
    with torch.no_grad():
        lp = peft_model(input_ids=tokens, use_cache=False).logits
        lm = merged(input_ids=tokens, use_cache=False).logits
        # the base alone, with the same modules: disable_adapter bypasses
        # the LoRA branches without a second copy of the weights.
        with peft_model.disable_adapter():
            lb = peft_model(input_ids=tokens, use_cache=False).logits
    if lp.shape != lm.shape:
        fail("logits shapes differ: peft %s, merged %s" % (tuple(lp.shape), tuple(lm.shape)))
    diff = (lp - lm).abs().max().item()
    effect = (lp - lb).abs().max().item()
    print("max_abs_diff %.3g" % diff)
    print("adapter_effect %.3g" % effect)
    if not diff <= tol:
        fail("peft's logits and the merged model's differ by %.3g > %g" % (diff, tol))
    if not effect > 100 * tol:
        fail("the adapter barely changes the logits (%.3g <= %g): ignored or zero?"
             % (effect, 100 * tol))


def safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def cmd_describe(adapter_dir):
    with open(os.path.join(adapter_dir, "adapter_config.json")) as f:
        sys.stdout.write(f.read().rstrip("\n") + "\n")
    hdr = safetensors_header(os.path.join(adapter_dir, "adapter_model.safetensors"))
    meta = hdr.pop("__metadata__", None)
    if meta:
        print("__metadata__ %s" % json.dumps(meta, sort_keys=True))
    for name in sorted(hdr):
        print("%s %s %s" % (name, hdr[name]["dtype"], hdr[name]["shape"]))


def main(argv):
    usage = __doc__.split("\n\n")[0]
    if len(argv) < 2:
        sys.exit(usage)
    cmd, args = argv[1], argv[2:]
    if cmd == "make-base" and len(args) == 2:
        cmd_make_base(*args)
    elif cmd == "make-adapter" and len(args) == 5:
        cmd_make_adapter(*args)
    elif cmd == "merge" and len(args) == 3:
        cmd_merge(*args)
    elif cmd == "check" and len(args) in (3, 5):
        tol = 1e-5
        if len(args) == 5:
            if args[3] != "--tol":
                sys.exit(usage)
            tol = float(args[4])
        cmd_check(args[0], args[1], args[2], tol)
    elif cmd == "describe" and len(args) == 1:
        cmd_describe(args[0])
    else:
        sys.exit("%s\nusage: see %s's first lines" % (usage, argv[0]))


if __name__ == "__main__":
    main(sys.argv)
