"""The reference side of tests/instruct.sh: what `shardtrain prepare
--format jsonl` must write for instruction data, computed here from the
JSONL and the documented template alone (shardtrain(1), PREPARE), with
Hugging Face's `tokenizers` library for the ids when a tokenizer is given.

  instruct_ref.py check JSONL PREFIX VAL_FRACTION [TOKENIZER_JSON]
      compares PREFIX_train_000000.{bin,mask} and PREFIX_val_000000.{bin,mask}
      with the expected tokens and loss masks; prints what differs and
      exits 1, or prints a summary and exits 0.

The template: {"prompt": P, "completion": C} is encode(P) (with the
tokenizer's template, e.g. a BOS) untrained, then encode(C) without
special tokens and the end mark, trained.  {"messages": [...]} is, per
message, encode("ROLE: ") untrained (special tokens for the first only),
then encode(content) and the end mark, trained for the assistant.
{"text": X} is encode(X) and the end mark, all trained.  The end mark is
the tokenizer's EOS ("</s>", "<|endoftext|>", ... as its post-processor or
added tokens name it), or a newline byte at byte level.  Mask bit 0: the
token is trained; bit 1: it starts an example.  The val split is the last
floor(examples x VAL_FRACTION) examples."""
import json
import struct
import sys


def read_u32_header(path, magic_ok):
    with open(path, "rb") as f:
        data = f.read()
    head = struct.unpack("<256i", data[:1024])
    if head[0] not in magic_ok:
        raise SystemExit("%s: magic %d" % (path, head[0]))
    return head, data[1024:]


def read_tokens(path):
    head, body = read_u32_header(path, (20240520, 20240801))
    width = 2 if head[0] == 20240520 else 4
    fmt = "<%d%s" % (head[2], "H" if width == 2 else "I")
    return list(struct.unpack(fmt, body))


def read_mask(path):
    head, body = read_u32_header(path, (20241125,))
    if head[1] != 1 or head[2] != len(body):
        raise SystemExit("%s: version %d, count %d for %d bytes" % (path, head[1], head[2], len(body)))
    return list(body)


class Encoder:
    def __init__(self, tok_path):
        self.tok = None
        self.eos = None
        if tok_path:
            from tokenizers import Tokenizer
            self.tok = Tokenizer.from_file(tok_path)
            for name in ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>"):
                i = self.tok.token_to_id(name)
                if i is not None:
                    self.eos = i
                    break

    def encode(self, text, special):
        if self.tok is None:
            return list(text.encode("utf-8"))
        return self.tok.encode(text, add_special_tokens=special).ids

    def end(self):
        if self.tok is None:
            return [10]
        return [self.eos] if self.eos is not None else []


def example(enc, obj):
    """(tokens, trained flags) of one JSONL object."""
    segs = []  # (text, trained, end mark follows)
    if "text" in obj:
        segs.append((obj["text"], True, True))
    elif "messages" in obj:
        for m in obj["messages"]:
            segs.append((m["role"] + ": ", False, False))
            segs.append((m["content"], m["role"] == "assistant", True))
    else:
        segs.append((obj["prompt"], False, False))
        segs.append((obj["completion"], True, True))
    toks, flags = [], []
    for i, (text, trained, end) in enumerate(segs):
        ids = enc.encode(text, i == 0) + (enc.end() if end else [])
        toks += ids
        flags += [trained] * len(ids)
    return toks, flags


def check(jsonl, prefix, val_fraction, tok_path):
    enc = Encoder(tok_path)
    examples = []
    with open(jsonl, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                examples.append(example(enc, json.loads(line)))
    n_val = int(len(examples) * val_fraction)
    splits = {"train": examples[:len(examples) - n_val], "val": examples[len(examples) - n_val:]}
    bad = []
    for split, exs in splits.items():
        want_t, want_m = [], []
        for toks, flags in exs:
            want_t += toks
            want_m += [(1 if fl else 0) | (2 if k == 0 else 0) for k, fl in enumerate(flags)]
        got_t = read_tokens("%s_%s_000000.bin" % (prefix, split))
        got_m = read_mask("%s_%s_000000.mask" % (prefix, split))
        for what, got, want in (("tokens", got_t, want_t), ("mask", got_m, want_m)):
            if got != want:
                k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                         min(len(got), len(want)))
                bad.append("%s %s: %d entries, want %d; first difference at %d: %r vs %r"
                           % (split, what, len(got), len(want), k, got[k:k + 8], want[k:k + 8]))
    for b in bad:
        print(b)
    if not bad:
        print("%d train and %d val examples, %d trained tokens, as the template says"
              % (len(splits["train"]), len(splits["val"]),
                 sum(sum(fl) for _, fl in examples)))
    return 1 if bad else 0


def main(argv):
    if len(argv) in (4, 5) and argv[0] == "check":
        return check(argv[1], argv[2], float(argv[3]), argv[4] if len(argv) == 5 else None)
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
