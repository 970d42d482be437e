"""compare_runs.py [OPTION...] A B TOL [STEPS]
compare_runs.py --exact [OPTION...] A B [STEPS]: two training runs agree.

A and B are run directories (log.dir = DIR/logs, checkpoint.dir = DIR/ckpt);
B is the reference.  Compared: the loss of every training line of
DIR/logs/metrics.jsonl, in order, and the final weights
DIR/ckpt/final/model.safetensors.  With TOL: each loss within TOL relative
to B's, and the fp32 weights within TOL norm-wise over all parameters.
With --exact: equal losses and the same tensors bit for bit (names, dtypes,
shapes and bytes; the headers may differ in order and metadata).  Either
way both runs log the same training steps, at least one (STEPS of them
when given), and every compared loss (or --field) is finite.  Exit status 0 when they agree; one
"# ..." line with the worst differences (or what does not match).

Norm-wise, not per tensor: the key bias of attention has an exactly zero
true gradient (softmax ignores a constant added to every key), so its fp32
rounding noise, normalised by AdamW, moves it by ~lr whatever the summation
order (this happens on one rank too, between micro-batch splits).

Options:
  --exact          equality instead of TOL (see above)
  --files          the weights files byte for byte, headers included
                   (implies --exact for the weights)
  --only PART      metrics (the losses, or what --field or --records name)
                   or weights alone; with weights, A and B may also be
                   .safetensors files
  --field NAME     compare this field of the training lines, not the loss
  --records LIST   compare every line (training, evaluation and skipped
                   alike) exactly, as the fields named in LIST (comma
                   separated); a field one line lacks must be missing from
                   the other's too
  --records-but LIST  the same with every field but those in LIST
  --after N        only the lines after step N (in both runs)
  --resumed-at N   A was resumed at step N: it logged no step up to N, and
                   B's lines up to step N are left out
  --last           a step logged more than once counts with its last line
                   (a run resumed from an older checkpoint logs it twice)
  --steps SPEC     the compared training steps are exactly SPEC, a comma
                   list of steps or FIRST-LAST ("1,2,4,5", "5-40")
  --logs-a NAME    A's metrics in A/NAME/metrics.jsonl (default: logs)
"""
import argparse, json, math, struct, sys
from array import array


def fail(msg):
    print("# " + msg)
    sys.exit(1)


def steps_spec(spec):
    out = []
    for part in spec.split(","):
        first, _, last = part.partition("-")
        out += list(range(int(first), int(last or first) + 1))
    return out


p = argparse.ArgumentParser(usage="\n".join(__doc__.split("\n")[:2]))
p.add_argument("a")
p.add_argument("b")
p.add_argument("rest", nargs="*", metavar="TOL STEPS")
p.add_argument("--exact", action="store_true")
p.add_argument("--files", action="store_true")
p.add_argument("--only", choices=("metrics", "weights"))
p.add_argument("--field", default="loss")
p.add_argument("--records", type=lambda x: (True, x.split(",")))
p.add_argument("--records-but", dest="records", type=lambda x: (False, x.split(",")))
p.add_argument("--after", type=int)
p.add_argument("--resumed-at", type=int)
p.add_argument("--last", action="store_true")
p.add_argument("--steps", type=steps_spec)
p.add_argument("--logs-a", default="logs")
o = p.parse_intermixed_args()
if len(o.rest) > (1 if o.exact else 2) or (not o.exact and not o.rest):
    p.error("A B TOL [STEPS], or --exact A B [STEPS]")
o.tol = None if o.exact else float(o.rest[0])
o.count = int(o.rest[-1]) if len(o.rest) == (1 if o.exact else 2) else None
if o.records is not None and not o.exact:
    p.error("--records and --records-but compare exactly: give --exact")
exact = o.exact


def records(d, logs):
    """The metrics lines of run D as (step, training?, kept fields)."""
    out = []
    for line in open("%s/%s/metrics.jsonl" % (d, logs)):
        r = json.loads(line)
        training = "loss" in r
        if o.records is None:
            if not training:
                continue
            v = r[o.field]
        else:
            keep, names = o.records
            v = json.dumps({k: x for k, x in r.items() if (k in names) == keep}, sort_keys=True)
        out.append((r["step"], training, v))
    if o.last:
        last = {}
        for i, (s, t, _) in enumerate(out):
            last[s, t] = i
        out = [x for i, x in enumerate(out) if last[x[0], x[1]] == i]
    if o.after is not None:
        out = [x for x in out if x[0] > o.after]
    return out


def compare_metrics(a, b):
    ra, rb = records(a, o.logs_a), records(b, "logs")
    if o.resumed_at is not None:
        early = [s for s, _, _ in ra if s <= o.resumed_at]
        if early:
            fail("A logged step %d, not after the resume at step %d" % (early[0], o.resumed_at))
        rb = [x for x in rb if x[0] > o.resumed_at]
    sa = [s for s, t, _ in ra if t]
    sb = [s for s, t, _ in rb if t]
    if sa != sb or not sa:
        fail("steps %s against %s" % (sa, sb))
    if o.count is not None and len(sa) != o.count:
        fail("%d steps, not %d" % (len(sa), o.count))
    if o.steps is not None and sa != o.steps:
        fail("steps %s, not %s" % (sa, o.steps))
    if o.records is not None:
        if ra != rb:
            bad = [(x, y) for x, y in zip(ra, rb) if x != y] or [(len(ra), len(rb))]
            fail("%d lines against %d, first difference %s" % (len(ra), len(rb), bad[0]))
        return "%d lines identical" % len(ra)
    va = [v for _, _, v in ra]
    vb = [v for _, _, v in rb]
    if not all(math.isfinite(x) for x in va + vb):
        fail("not finite: %s against %s" % (va, vb))
    if exact:
        if va != vb:
            fail("%s differs: %s against %s" % (o.field, va, vb))
        return "%d %s values identical" % (len(va), o.field)
    worst = max(abs(x - y) / abs(y) for x, y in zip(va, vb))
    return "%s rel %.1e" % (o.field, worst), worst


def weights_file(d):
    return d if d.endswith(".safetensors") else d + "/ckpt/final/model.safetensors"


def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    hdr.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in hdr.items()}


def compare_weights(a, b):
    fa, fb = weights_file(a), weights_file(b)
    if o.files:
        raw = open(fa, "rb").read()
        if not raw or raw != open(fb, "rb").read():
            fail("the weights files differ (or are empty)")
        return "weights files identical"
    wa, wb = tensors(fa), tensors(fb)
    if wa.keys() != wb.keys() or not wa:
        fail("tensors %s against %s" % (sorted(wa), sorted(wb)))
    if exact:
        bad = sorted(k for k in wa if wa[k] != wb[k])
        if bad:
            fail("tensors differ: %s" % bad)
        return "%d tensors identical" % len(wa)
    num = den = 0.0
    for k in wa:
        for t in wa[k], wb[k]:
            if t[0] != "F32":
                fail("%s is %s, not F32" % (k, t[0]))
        x, y = array("f"), array("f")
        x.frombytes(wa[k][2])
        y.frombytes(wb[k][2])
        num += sum((u - v) ** 2 for u, v in zip(x, y))
        den += sum(v * v for v in y)
    worst = math.sqrt(num / den)
    return "weights rel %.1e" % worst, worst


parts = [f(o.a, o.b) for part, f in (("metrics", compare_metrics), ("weights", compare_weights))
         if o.only in (None, part)]
print("# %s vs %s: %s (%s)" % (o.a.rstrip("/").split("/")[-1], o.b.rstrip("/").split("/")[-1],
      ", ".join(x[0] if isinstance(x, tuple) else x for x in parts),
      "exact" if exact else "tol %g" % o.tol))
# each worst difference on its own: max() would let a NaN through
sys.exit(not all(x[1] <= o.tol for x in parts if isinstance(x, tuple)))
