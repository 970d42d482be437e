#!/usr/bin/env python3
"""A stand-in for a downloaded model, for etc/lora-sft.sh: a small Llama
with random weights and a byte-level BPE tokenizer trained on the text
given, saved the way the Hugging Face hub ships models (model.safetensors,
config.json, tokenizer.json).  Nothing can be downloaded where the test
suite runs; with a real model (TinyLlama, Llama 3.2 1B, ...) this step is
`huggingface-cli download` instead.

  lora-sft-model.py OUT_DIR TEXT_FILE
"""
import os
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM


def main(out, text):
    os.makedirs(out, exist_ok=True)
    # GPT-2's byte-level scheme: every byte has a token, so any UTF-8 text
    # encodes; EOS ends each training example.
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    with open(text, encoding="utf-8") as f:
        tok.train_from_iterator(f.read().split("\n\n"), trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    eos = tok.token_to_id("<|endoftext|>")
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=176,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=512, rms_norm_eps=1e-5, rope_theta=10000.0,
                      tie_word_embeddings=False, bos_token_id=eos, eos_token_id=eos)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(out, safe_serialization=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
