"""Checks a plot written by `shardtrain plot` against the metrics it drew.

    plot_check.py svg SVG METRICS...   the SVG's series against each run's log
    plot_check.py png PNG N_RUNS       the rendered PNG is a picture of N runs

svg: the metrics are read here independently of shardtrain's reader,
applying the orphan rule of a resumed log (a record whose step is not
greater than the previous record's of its kind drops every earlier record of
that kind at or after its step).  For run I (its METRICS file's position),
the polylines run<I>-loss, run<I>-tokens-per-s, run<I>-lr (and run<I>-mfu
when the log knows MFU, run<I>-loss-smoothed when drawn) must have one point
per kept step record whose value is known (not null), the group run<I>-val-loss one circle per evaluation,
run<I>-skipped one mark per skipped step; x must be the same increasing
affine function of the step for every point of a panel, and y one affine
function of the value (larger values higher up) for every run and series of
a panel (loss, its smoothed curve - the centred mean over the window the
legend names, narrowing at the ends - and validation loss share theirs),
within the 0.01 px the file's two decimals allow.

png: not blank (a fair share of pixels differ from the background, and
dark text is there), and each run's colour of the plot's palette is drawn.

Prints one TAP-style line per check ("ok - ..." / "not ok - ..."); the
shell test counts them.
"""
import json
import re
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def report(good, what):
    print(("ok - " if good else "not ok - ") + what)
    return good


def read_metrics(path):
    """(steps, evals, skipped): lists of dicts / step numbers after the orphan rule."""
    kinds = {"step": [], "eval": [], "skipped": []}
    for line in open(path):
        if not line.strip():
            continue
        rec = json.loads(line)
        if "skipped" in rec:
            kind = "skipped"
        elif "val_loss" in rec:
            kind = "eval"
        elif "loss" in rec:
            kind = "step"
        else:
            continue
        kept = kinds[kind]
        if kept and rec["step"] <= kept[-1]["step"]:
            kinds[kind] = kept = [r for r in kept if r["step"] < rec["step"]]
        kept.append(rec)
    evals = [r for r in kinds["eval"] if r["val_loss"] is not None]
    return kinds["step"], evals, [r["step"] for r in kinds["skipped"]]


def centred_means(ys, window):
    """Each point's mean over up to window points centred on it, fewer near the ends."""
    out = []
    for i in range(len(ys)):
        h = min(window // 2, i, len(ys) - 1 - i)
        out.append(sum(ys[i - h:i + h + 1]) / (2 * h + 1))
    return out


def polyline_points(elem):
    pts = []
    for pair in elem.get("points", "").split():
        x, y = pair.split(",")
        pts.append((float(x), float(y)))
    return pts


def affine_ok(xs, values, increasing):
    """Whether xs = a * values + b with the sign of a as asked, within 0.01."""
    pairs = sorted(zip(values, xs))
    if len(pairs) < 2 or pairs[0][0] == pairs[-1][0]:
        return all(abs(x - xs[0]) < 0.011 for x in xs)
    (v0, x0), (v1, x1) = pairs[0], pairs[-1]
    a = (x1 - x0) / (v1 - v0)
    if (a > 0) != increasing:
        return False
    return all(abs(x0 + a * (v - v0) - x) < 0.011 for v, x in pairs)


def check_svg(svg_path, metrics_paths):
    root = ET.parse(svg_path).getroot()
    by_id = {e.get("id"): e for e in root.iter() if e.get("id")}
    fails = 0
    # panel -> [(step, x)] and [(value, y)] over every run and series in it:
    # each panel has one x and one y scale
    step_x, value_y = {}, {}
    # the smoothing window, as the legend gives it
    window = 0
    for e in root.iter(SVG + "text"):
        m = re.search(r"centred mean of (\d+) steps", e.text or "")
        if m:
            window = int(m.group(1))
    for i, path in enumerate(metrics_paths):
        steps, evals, skipped = read_metrics(path)
        series = [("loss", "loss", "loss"), ("tokens-per-s", "tokens_per_s", "rate"),
                  ("lr", "lr", "lr")]
        mfu = [r for r in steps if r.get("mfu") is not None]
        if mfu:
            series.append(("mfu", "mfu", "mfu"))
        elif not report(f"run{i}-mfu" not in by_id, f"run {i}: no MFU series when the log has none"):
            fails += 1
        for name, key, panel in series:
            elem = by_id.get(f"run{i}-{name}")
            recs = [r for r in steps if r.get(key) is not None]
            pts = polyline_points(elem) if elem is not None else []
            good = len(pts) == len(recs)
            fails += not report(good, f"run {i}: {name} has {len(pts)} points, the log "
                                      f"{len(recs)} steps ({path})")
            if not good or not recs:
                continue
            xs = [p[0] for p in pts]
            fails += not report(all(a < b for a, b in zip(xs, xs[1:])),
                                f"run {i}: {name}: each step once, in order")
            step_x.setdefault(panel, []).extend((r["step"], x) for r, x in zip(recs, xs))
            value_y.setdefault(panel, []).extend((r[key], p[1]) for r, p in zip(recs, pts))
        smoothed = by_id.get(f"run{i}-loss-smoothed")
        if smoothed is not None:
            pts = polyline_points(smoothed)
            losses = [r for r in steps if r.get("loss") is not None]
            fails += not report(len(pts) == len(losses), f"run {i}: smoothed loss has {len(pts)} "
                                                         f"points, the log {len(losses)} steps")
            if len(pts) == len(losses) and window:
                means = centred_means([r["loss"] for r in losses], window)
                step_x.setdefault("loss", []).extend(
                    (r["step"], p[0]) for r, p in zip(losses, pts))
                value_y.setdefault("loss", []).extend((m, p[1]) for m, p in zip(means, pts))
        elem = by_id.get(f"run{i}-val-loss")
        circles = list(elem.iter(SVG + "circle")) if elem is not None else []
        good = elem is not None and len(circles) == len(evals)
        fails += not report(good, f"run {i}: val loss has {len(circles)} circles, the log "
                                  f"{len(evals)} evaluations")
        if good and evals:
            cx = [float(c.get("cx")) for c in circles]
            cy = [float(c.get("cy")) for c in circles]
            step_x.setdefault("loss", []).extend((r["step"], x) for r, x in zip(evals, cx))
            value_y.setdefault("loss", []).extend((r["val_loss"], y) for r, y in zip(evals, cy))
        elem = by_id.get(f"run{i}-skipped")
        marks = list(elem.iter(SVG + "path")) if elem is not None else []
        fails += not report(elem is not None and len(marks) == len(skipped),
                            f"run {i}: {len(marks)} skipped-step marks, the log {len(skipped)}")
    for panel, sx in step_x.items():
        fails += not report(affine_ok([x for _, x in sx], [s for s, _ in sx], True),
                            f"the {panel} panel: every point on one step axis")
    for panel, vy in value_y.items():
        fails += not report(affine_ok([y for _, y in vy], [v for v, _ in vy], False),
                            f"the {panel} panel: every point's height on one value axis")
    return fails


def check_png(png_path, n_runs):
    from PIL import Image
    img = Image.open(png_path).convert("RGB")
    w, h = img.size
    counts = {}
    for c in img.getdata():
        counts[c] = counts.get(c, 0) + 1
    background = max(counts, key=counts.get)
    drawn = w * h - counts[background]
    fails = 0
    fails += not report(w >= 400 and h >= 300, f"the PNG is {w}x{h}")
    fails += not report(drawn > 0.05 * w * h,
                        f"the PNG is not blank: {drawn} of {w * h} pixels drawn")
    dark = sum(n for c, n in counts.items() if max(c) < 80)
    fails += not report(dark > 500, f"dark text and axes: {dark} pixels")
    for i in range(n_runs):
        want = tuple(int(PALETTE[i][k:k + 2], 16) for k in (1, 3, 5))
        near = sum(n for c, n in counts.items()
                   if all(abs(a - b) <= 12 for a, b in zip(c, want)))
        fails += not report(near > 200, f"run {i}'s colour {PALETTE[i]} is drawn ({near} pixels)")
    return fails


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "svg":
        fails = check_svg(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 4 and sys.argv[1] == "png":
        fails = check_png(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
