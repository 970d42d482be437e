"""compare_runs.py DIR_A DIR_B TOL STEPS: two training runs (log.dir =
DIR/logs, checkpoint.dir = DIR/ckpt) agree within TOL relative: each logged
loss, and the final fp32 weights norm-wise over all parameters.  Exit
status 0 when they do; one "# ..." line with the worst differences.

Norm-wise, not per tensor: the key bias of attention has an exactly zero
true gradient (softmax ignores a constant added to every key), so its fp32
rounding noise, normalised by AdamW, moves it by ~lr whatever the summation
order (this happens on one rank too, between micro-batch splits)."""
import json, math, struct, sys
from array import array


def losses(d):
    return [json.loads(l)["loss"] for l in open(d + "/logs/metrics.jsonl") if '"loss"' in l]


def weights(d):
    raw = open(d + "/ckpt/final/model.safetensors", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        b, e = v["data_offsets"]
        a = array("f")
        a.frombytes(raw[8 + n + b:8 + n + e])
        out[k] = a
    return out


a, b, tol, steps = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
la, lb = losses(a), losses(b)
assert len(la) == len(lb) == steps, (len(la), len(lb))
assert all(math.isfinite(x) for x in la + lb), (la, lb)
worst_loss = max(abs(x - y) / abs(y) for x, y in zip(la, lb))
wa, wb = weights(a), weights(b)
assert wa.keys() == wb.keys()
num = sum((x - y) ** 2 for k in wa for x, y in zip(wa[k], wb[k]))
den = sum(y * y for k in wb for y in wb[k])
worst_w = math.sqrt(num / den)
print("# %s vs %s: losses rel %.1e, weights rel %.1e (tol %g)"
      % (a.split("/")[-1], b.split("/")[-1], worst_loss, worst_w, tol))
sys.exit(not (worst_loss <= tol and worst_w <= tol))
