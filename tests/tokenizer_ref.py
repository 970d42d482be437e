"""The reference side of tests/tokenizer.sh: Hugging Face's `tokenizers`
library (PyPI, in the build tree's virtual environment).

  tokenizer_ref.py sample OUT            a multilingual UTF-8 sample with
                                         emoji, odd spaces and invalid bytes
  tokenizer_ref.py train OUTDIR TEXT...  trains small tokenizers of both
                                         families the models here use and
                                         writes OUTDIR/NAME.json
  tokenizer_ref.py encode TOK FILE       ids of each line (encode(line))
  tokenizer_ref.py decode TOK FILE       decode(ids) of each line of ids
  tokenizer_ref.py time TOK FILE N [lines]
                                         encode the whole file N times as one
                                         text (or, with "lines", its lines
                                         with encode_batch), one thread;
                                         prints tokens and seconds of the
                                         fastest round

Nothing here is copied from a published vocabulary: the tokenizers are
trained from the texts given, with the library's own trainer, and shaped
as the hub's models ship them:
  gpt2        byte-level BPE, GPT-2's regex pre-tokeniser
  llama3      byte-level BPE after Llama 3's Split regex, ignore_merges,
              a BOS template
  llama2      metaspace BPE ("first" prepend, no split) with byte fallback,
              <unk>, a BOS template (TinyLlama's and Mistral's form)
  llama2norm  the older Llama 2 form: Prepend and Replace normalisers, no
              pre-tokeniser, fuse_unk and no byte fallback (so <unk> shows)
Files are read as Python reads them with errors="replace" and split at
"\\n" only, as test_tokenizer.c splits them."""
import json
import os
import sys
import time

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def read_text(path):
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        return f.read()


def sample(out):
    lines = [
        "Grüße aus Köln, naïve café — “quoted” ‘text’ … ½ ¾ ©",
        "Привет, мир! Как дела? Ёлка и щука.",
        "日本語のテキストと漢字、カタカナ。中文测试：你好，世界！",
        "한국어 문장입니다. עברית וערבית: مرحبا بالعالم",
        "हिन्दी में वाक्य। ภาษาไทย ไม่มีช่องว่าง Ελληνικά κείμενα",
        "emoji 👍🏽 🎉🎉 👨‍👩‍👧 🏳️‍🌈 and ✔︎ marks",
        "combining e\u0301 a\u0308 and precomposed é ä",
        "spaces:\u00a0nbsp,\u3000ideographic,\u2009thin,\ttab,   three, \u200bzwsp",
        "digits 1234567 3.14159 ١٢٣ ٤٥٦ ①②",
        "I'LL can't WON'T they're we've I'm you'd it's",
        "   leading spaces and trailing   ",
        "",
        "mixed\u2028line separator and \u0085next line",
        "specials <|endoftext|> and <s>x</s> and <|begin_of_text|>hi<|end_of_text|><s>",
        "<s>",
    ]
    data = "\n".join(lines).encode("utf-8")
    # Invalid UTF-8: a stray continuation, a truncated sequence, a UTF-16
    # surrogate encoded, an overlong form, bytes that never occur.
    data += (b"\nbad \x80 byte, cut \xe2\x82 short, surrogate \xed\xa0\x80, "
             b"overlong \xc0\xaf, never \xff\xfe, tail \xf0\x9f\x98")
    data += b"\n" + b"\n".join(line.encode("utf-8") for line in lines[:6]) + b"\n"
    with open(out, "wb") as f:
        f.write(data)


def byte_level(texts, path, llama3):
    if llama3:
        tok = Tokenizer(models.BPE(ignore_merges=True))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        special = ["<|begin_of_text|>", "<|end_of_text|>"]
    else:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        special = ["<|endoftext|>"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    if llama3:
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                          special_tokens=[("<|begin_of_text|>", 0)])])
    tok.save(path)


def metaspace(texts, path, normalized):
    # Trained with splitting on the metaspace (whole lines as words would
    # make training quadratic); shipped without, as the hub's files are.
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=not normalized,
                               fuse_unk=normalized))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581",
                                                 prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>", "<s>", "</s>"],
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581",
                                                 prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A",
                                                       special_tokens=[("<s>", 1)])
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    if normalized:
        j["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
        j["pre_tokenizer"] = None
    else:
        # Byte fallback needs the 256 byte tokens in the vocabulary, as
        # SentencePiece models carry them.
        for b in range(256):
            vocab.setdefault("<0x%02X>" % b, len(vocab))
    tok = Tokenizer.from_str(json.dumps(j))
    tok.save(path)


def main():
    cmd = sys.argv[1]
    if cmd == "sample":
        sample(sys.argv[2])
    elif cmd == "train":
        out, texts = sys.argv[2], [read_text(p) for p in sys.argv[3:]]
        byte_level(texts, os.path.join(out, "gpt2.json"), False)
        byte_level(texts, os.path.join(out, "llama3.json"), True)
        metaspace(texts, os.path.join(out, "llama2.json"), False)
        metaspace(texts, os.path.join(out, "llama2norm.json"), True)
    elif cmd == "encode":
        tok = Tokenizer.from_file(sys.argv[2])
        for line in read_text(sys.argv[3]).split("\n"):
            print(" ".join(map(str, tok.encode(line).ids)))
    elif cmd == "decode":
        tok = Tokenizer.from_file(sys.argv[2])
        with open(sys.argv[3]) as f:
            for line in f.read().split("\n")[:-1]:
                ids = [int(x) for x in line.split()]
                sys.stdout.buffer.write(tok.decode(ids).encode("utf-8") + b"\n")
    elif cmd == "time":
        # One thread: the library's batch encoder runs on Rayon's pool.
        os.environ["RAYON_NUM_THREADS"] = "1"
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        tok = Tokenizer.from_file(sys.argv[2])
        text, best, n = read_text(sys.argv[3]), float("inf"), 0
        lines = len(sys.argv) > 5 and sys.argv[5] == "lines"
        for _ in range(int(sys.argv[4])):
            t0 = time.perf_counter()
            if lines:
                n = sum(len(e.ids) for e in tok.encode_batch(text.split("\n")))
            else:
                n = len(tok.encode(text).ids)
            best = min(best, time.perf_counter() - t0)
        print(n, "%.6f" % best)
    else:
        sys.exit("tokenizer_ref.py: unknown command " + cmd)


if __name__ == "__main__":
    main()
