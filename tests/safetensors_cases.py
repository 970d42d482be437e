#!/usr/bin/env python3
"""Small safetensors files, valid and malformed, written byte by byte
(stdlib only).

  safetensors_cases.py seeds DIR   valid files: the fuzzer's seed corpus
  safetensors_cases.py bad DIR     malformed files, and DIR/cases.txt with one
                                   line per file: NAME<TAB>what the error must say

The malformed files are about the container alone (lengths, JSON, dtypes,
shapes, offsets); tests/safetensors_bad.sh adds the cases that need a model
(missing tensor, wrong shape, index and config.json problems).
"""
import json
import os
import struct
import sys


def image(header, data=b"", hlen=None, raw_header=None):
    text = raw_header if raw_header is not None else json.dumps(header).encode()
    n = len(text) if hlen is None else hlen
    return struct.pack("<Q", n) + text + data


def entry(dtype, shape, b, e):
    return {"dtype": dtype, "shape": shape, "data_offsets": [b, e]}


def seeds():
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.25)
    out = {
        "empty": image({}),
        "one-f32": image({"w": entry("F32", [2, 2], 0, 16)}, f32),
        "meta": image({"__metadata__": {"format": "pt"}, "w": entry("F32", [4], 0, 16)}, f32),
        "f16-bf16": image({"a": entry("F16", [2], 0, 4), "b": entry("BF16", [1, 2], 4, 8)},
                          b"\x00\x3c\x00\xc0\x80\x3f\x00\x40"),
        "scalar-empty": image({"s": entry("F32", [], 0, 4), "z": entry("F32", [0, 3], 4, 4)},
                              f32[:4]),
        "many-dtypes": image({d: entry(d, [1], i * 8, i * 8 + sz)
                              for i, (d, sz) in enumerate([("U8", 1), ("I64", 8), ("F64", 8),
                                                           ("BOOL", 1), ("I32", 4)])},
                             bytes(40)),
        "padded": image({"w": entry("F32", [1], 0, 4)}, f32[:4],
                        raw_header=json.dumps({"w": entry("F32", [1], 0, 4)}).encode() + b"   "),
        "names": image({"transformer.h.0.attn.c_attn.weight": entry("F32", [1, 2], 0, 8),
                        "h.0.attn.bias": entry("F32", [1, 1, 1, 1], 8, 12)}, bytes(12)),
    }
    return out


def bad():
    """name -> (file bytes, pattern the error must contain)."""
    w = {"w": entry("F32", [2], 0, 8)}
    d8 = bytes(8)
    return {
        "short-file": (b"\x01\x02\x03", "shorter than the 8-byte"),
        "header-longer-than-file": (struct.pack("<Q", 1000) + b"{}", "exceeds the file"),
        "header-length-overflow": (struct.pack("<Q", 2**64 - 1) + b"{}" + d8, "exceeds the file"),
        "truncated-header": (image(w, d8)[:20], "exceeds the file"),
        "not-json": (image(None, raw_header=b"this is not json"), "not valid JSON"),
        # Found by the fuzzer: jansson quotes the bad text, here a raw
        # newline after a backslash, which must not break the error line.
        "json-raw-newline": (image(None, raw_header=b'{"bad\\\n": {"dtype": "F32"}}'),
                             "not valid JSON"),
        "json-array": (image([1, 2, 3]), "not an object"),
        "entry-not-object": (image({"w": [1, 2]}), "is not an object"),
        "missing-dtype": (image({"w": {"shape": [2], "data_offsets": [0, 8]}}, d8), 'no "dtype"'),
        "missing-shape": (image({"w": {"dtype": "F32", "data_offsets": [0, 8]}}, d8), 'no "shape"'),
        "missing-offsets": (image({"w": {"dtype": "F32", "shape": [2]}}, d8), 'no "data_offsets"'),
        "unknown-dtype": (image({"w": entry("F33", [2], 0, 8)}, d8), "unknown dtype 'F33'"),
        "dtype-not-string": (image({"w": entry(4, [2], 0, 8)}, d8), "dtype is not a string"),
        "negative-shape": (image({"w": entry("F32", [-1, 2], 0, 8)}, d8), "negative"),
        "float-shape": (image({"w": entry("F32", [2.0], 0, 8)}, d8), "not an integer"),
        "huge-shape-entry": (image(None, d8, raw_header=b'{"w": {"dtype": "F32", "shape": '
                                   b'[100000000000000000000], "data_offsets": [0, 8]}}'),
                             "not valid JSON"),
        "shape-product-overflow": (image({"w": entry("F32", [2**62, 2**62], 0, 8)}, d8),
                                   "overflows 64 bits"),
        "shape-bytes-overflow": (image({"w": entry("F64", [2**62], 0, 8)}, d8),
                                 "overflows 64 bits"),
        "too-many-dims": (image({"w": entry("F32", [1] * 9, 0, 4)}, d8), "dimensions"),
        "offsets-out-of-range": (image({"w": entry("F32", [4], 0, 16)}, d8), "run past"),
        "offsets-reversed": (image({"w": entry("F32", [2], 8, 0)}, d8), "reversed"),
        "offsets-negative": (image({"w": entry("F32", [2], -8, 0)}, d8), "negative"),
        "offsets-not-pair": (image({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}},
                                   d8), "data_offsets is not"),
        "offsets-overlap": (image({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)},
                                  bytes(12)), "overlap"),
        "size-mismatch": (image({"w": entry("F32", [3], 0, 8)}, d8), "but shape x F32 size"),
        "duplicate-names": (image(None, d8 + d8, raw_header=b'{"w": {"dtype": "F32", "shape": '
                                  b'[2], "data_offsets": [0, 8]}, "w": {"dtype": "F32", '
                                  b'"shape": [2], "data_offsets": [8, 16]}}'), "duplicate"),
        "metadata-not-object": (image({"__metadata__": 3, "w": entry("F32", [2], 0, 8)}, d8),
                                "__metadata__"),
        "control-chars-in-name": (image({"bad\nname": entry("F33", [2], 0, 8)}, d8),
                                  "bad\\x0aname"),
    }


def main(argv):
    if len(argv) != 2 or argv[0] not in ("seeds", "bad"):
        sys.stderr.write(__doc__)
        return 2
    os.makedirs(argv[1], exist_ok=True)
    if argv[0] == "seeds":
        for name, data in seeds().items():
            with open(os.path.join(argv[1], name + ".safetensors"), "wb") as f:
                f.write(data)
        return 0
    with open(os.path.join(argv[1], "cases.txt"), "w") as lst:
        for name, (data, pat) in bad().items():
            with open(os.path.join(argv[1], name + ".safetensors"), "wb") as f:
                f.write(data)
            lst.write("%s\t%s\n" % (name, pat))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
