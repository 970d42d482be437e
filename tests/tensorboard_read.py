"""Reads shardtrain's TensorBoard event files back with PyPI's tensorboard
package, the reader users run, and checks them (tests/tensorboard.sh).

  records DIR      every record of DIR's event files, read one by one by
                   tensorboard's event file loaders (which check each
                   record's CRCs and stop at the first bad one), equals what
                   test_tensorboard wrote into DIR/expected.jsonl;
  purged DIR       what EventAccumulator makes of DIR, after it purged the
                   steps each SessionLog START orphans, equals expected.jsonl
                   with the same rule applied;
  run LOGDIR [--config FILE] [--mfu]
                   the scalars of a training run's LOGDIR equal the records
                   of its metrics.jsonl (tensorboard stores floats; the tags
                   are the ones shardtrain(1) lists), each tag's steps
                   strictly increasing; the config text summary of each
                   session is FILE's text (the resolved configuration); MFU
                   present exactly when --mfu;
  served LOGDIR    what the dashboard itself serves for LOGDIR (the HTTP API
                   of `tensorboard --logdir LOGDIR`, with its Python loader
                   and with its Rust data server, the default): the steps
                   and values of every scalar, and the steps of every text,
                   that EventAccumulator gives;
  same LOGDIR REF  the run in LOGDIR (interrupted and resumed) shows in
                   tensorboard the same steps for every tag as the
                   uninterrupted REF, and the same values for the tags that
                   do not depend on timing.

Prints "# ..." lines on failure and exits 1; exits 0 when all is well.
"""
import glob
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import numpy as np
from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.compat.proto import event_pb2, types_pb2

problems = []


def problem(msg):
    problems.append(msg)
    print("# " + msg)


def event_files(d):
    return sorted(glob.glob(os.path.join(d, "events.out.tfevents.*")))


def accumulate(d):
    # size 0: keep every event (the default samples a reservoir)
    acc = event_accumulator.EventAccumulator(
        d, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
    acc.Reload()
    return acc


def text_of(tensor_event):
    t = tensor_event.tensor_proto
    if t.dtype != types_pb2.DT_STRING or len(t.string_val) != 1 or t.tensor_shape.dim:
        problem("step %d: text is not one DT_STRING scalar" % tensor_event.step)
        return None
    return t.string_val[0].decode("utf-8")


def as_block(text):
    """What st_tb_text_block makes of text: a Markdown code block."""
    return re.sub(r"(?m)^(?=[^\n])", "    ", text)


def expected_records(d):
    """test_tensorboard's list, blocks turned into the text they are written as."""
    recs = [json.loads(line) for line in open(os.path.join(d, "expected.jsonl"))]
    for r in recs:
        if "block" in r:
            r["text"] = [r["block"][0], as_block(r.pop("block")[1])]
    return recs


def check_records(d):
    """Each session's file: file_version, START, then the records asked for."""
    sessions = []
    for rec in expected_records(d):
        if "start" in rec:
            sessions.append([rec])
        else:
            sessions[-1].append(rec)
    files = event_files(d)
    if len(files) != len(sessions):
        problem("%d event files for %d sessions" % (len(files), len(sessions)))
        return
    for path, want in zip(files, sessions):
        name = os.path.basename(path)
        # the loader TensorBoard runs (it migrates simple_value to tensors),
        # then its base, which hands over the Event records as they are
        migrated = list(event_file_loader.EventFileLoader(path).Load())
        events = list(event_file_loader.LegacyEventFileLoader(path).Load())
        if len(migrated) != len(events):
            problem("%s: EventFileLoader read %d records, its base %d" % (name, len(migrated), len(events)))
        if len(events) != len(want) + 1:
            problem("%s: %d records read, %d written" % (name, len(events), len(want) + 1))
            continue
        if events[0].file_version != "brain.Event:2":
            problem("%s: first record is not file_version brain.Event:2" % name)
        start = events[1]
        if not (start.HasField("session_log") and start.session_log.status ==
                event_pb2.SessionLog.START and start.step == want[0]["start"]):
            problem("%s: second record is not SessionLog START at step %d" % (name, want[0]["start"]))
        times = [e.wall_time for e in events]
        if times != sorted(times) or abs(times[0] - time.time()) > 3600:
            problem("%s: wall times not increasing from about now" % name)
        for ev, rec in zip(events[2:], want[1:]):
            where = "%s step %d" % (name, rec["step"])
            if ev.step != rec["step"] or not ev.HasField("summary"):
                problem("%s: record at step %d, or not a summary" % (where, ev.step))
                continue
            vals = ev.summary.value
            if "text" in rec:
                tag, text = rec["text"]
                v = vals[0]
                if (len(vals) != 1 or v.tag != tag or not v.HasField("tensor") or
                        v.metadata.plugin_data.plugin_name != "text"):
                    problem("%s: not one text summary %r" % (where, tag))
                elif v.tensor.string_val != [text.encode("utf-8")]:
                    problem("%s: text %r, wrote %r" % (where, v.tensor.string_val, text))
                continue
            got = [(v.tag, v.simple_value) for v in vals if v.HasField("simple_value")]
            wantv = [(t, np.float32(x)) for t, x in rec["scalars"]]
            if len(got) != len(vals) or got != wantv:
                problem("%s: scalars %r, wrote %r" % (where, got, wantv))


def check_purged(d):
    want_scalars, want_text = {}, {}
    for rec in expected_records(d):
        if "start" in rec:   # TensorBoard's rule: START at s orphans steps >= s
            for series in list(want_scalars.values()) + list(want_text.values()):
                for s in [s for s in series if s >= rec["start"]]:
                    del series[s]
        elif "text" in rec:
            want_text.setdefault(rec["text"][0], {})[rec["step"]] = rec["text"][1]
        else:
            for tag, x in rec["scalars"]:
                want_scalars.setdefault(tag, {})[rec["step"]] = np.float32(x)
    acc = accumulate(d)
    tags = acc.Tags()
    if sorted(tags["scalars"]) != sorted(want_scalars):
        problem("scalar tags %s, want %s" % (sorted(tags["scalars"]), sorted(want_scalars)))
    for tag, want in want_scalars.items():
        if tag in tags["scalars"]:
            got = [(e.step, np.float32(e.value)) for e in acc.Scalars(tag)]
            if got != sorted(want.items()):
                problem("%s: %r, want %r" % (tag, got, sorted(want.items())))
    for tag, want in want_text.items():
        if tag not in tags["tensors"]:
            problem("no text tag %s" % tag)
            continue
        got = [(e.step, text_of(e)) for e in acc.Tensors(tag)]
        if got != sorted(want.items()):
            problem("%s: %r, want %r" % (tag, got, sorted(want.items())))


# metrics.jsonl field -> tag, and the significant digits metrics.jsonl
# prints it with (None: an integer, exact)
STEP_TAGS = [("loss", "train/loss", 9), ("lr", "train/lr", 9), ("grad_norm", "train/grad_norm", 9),
             ("tokens_per_s", "train/tokens_per_s", 6), ("mfu", "train/mfu", 6),
             ("state_bytes", "memory/state_bytes", None), ("peak_bytes", "memory/peak_bytes", None)]
TIMING_TAGS = {"train/tokens_per_s", "train/mfu", "memory/peak_bytes"}


def metrics_series(logdir):
    """{tag: {step: (value, digits)}} from metrics.jsonl, each kind of record
    purged as TensorBoard purges: a step not after the previous record of its
    kind drops that kind's records from that step on."""
    kinds = {"step": [], "eval": [], "skipped": []}
    for line in open(os.path.join(logdir, "metrics.jsonl")):
        r = json.loads(line)
        kind = "skipped" if "skipped" in r else "eval" if "val_loss" in r else "step"
        recs = kinds[kind]
        if recs and r["step"] <= recs[-1]["step"]:
            recs[:] = [x for x in recs if x["step"] < r["step"]]
        recs.append(r)
    out = {}
    for r in kinds["step"]:
        for field, tag, digits in STEP_TAGS:
            if r.get(field) is not None:
                out.setdefault(tag, {})[r["step"]] = (r[field], digits)
    for r in kinds["eval"]:
        out.setdefault("eval/val_loss", {})[r["step"]] = (r["val_loss"], 9)
    for r in kinds["skipped"]:
        out.setdefault("train/skipped_nonfinite", {})[r["step"]] = (1, None)
        out.setdefault("train/nonfinite_in_a_row", {})[r["step"]] = (r["in_a_row"], None)
    return out


def close_enough(got, want, digits):
    if digits is None:
        return got == np.float32(want)
    if want == 0:
        return got == 0
    # metrics.jsonl rounds to `digits` significant digits, tensorboard to a float
    tol = abs(want) * 0.5 * 10.0 ** (1 - digits) + float(np.spacing(np.float32(abs(want))))
    return abs(float(got) - want) <= tol


def strictly_increasing(tag, steps):
    if any(b <= a for a, b in zip(steps, steps[1:])):
        problem("%s: steps not strictly increasing: %s" % (tag, steps))
        return False
    return True


def check_run(logdir, config_file, mfu):
    want = metrics_series(logdir)
    acc = accumulate(logdir)
    tags = acc.Tags()
    if sorted(tags["scalars"]) != sorted(want):
        problem("scalar tags %s, metrics.jsonl has %s" % (sorted(tags["scalars"]), sorted(want)))
    if ("train/mfu" in tags["scalars"]) != mfu:
        problem("train/mfu %s, expected %s" % ("present" if not mfu else "absent",
                                                "present" if mfu else "absent"))
    n = 0
    for tag in sorted(set(tags["scalars"]) & set(want)):
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        strictly_increasing(tag, steps)
        if steps != sorted(want[tag]):
            problem("%s: steps %s, metrics.jsonl %s" % (tag, steps, sorted(want[tag])))
            continue
        for e in events:
            value, digits = want[tag][e.step]
            n += 1
            if not close_enough(e.value, value, digits):
                problem("%s step %d: %r, metrics.jsonl %r" % (tag, e.step, e.value, value))
    print("# %d scalars of %d tags checked" % (n, len(want)))
    if config_file:
        if "config" not in tags["tensors"]:
            problem("no config text summary")
        else:
            events = acc.Tensors("config")
            strictly_increasing("config", [e.step for e in events])
            want_text = as_block(open(config_file).read())
            for e in events:
                t = text_of(e)
                if t is not None and t != want_text:
                    problem("config text at step %d differs from %s:\n%s" % (e.step, config_file, t))
            print("# %d config text summaries checked" % len(events))


def check_same(logdir, ref):
    a, b = accumulate(logdir), accumulate(ref)
    ta, tb = sorted(a.Tags()["scalars"]), sorted(b.Tags()["scalars"])
    if ta != tb or not ta:
        problem("scalar tags %s, uninterrupted run %s" % (ta, tb))
    for tag in sorted(set(ta) & set(tb)):
        ea, eb = a.Scalars(tag), b.Scalars(tag)
        strictly_increasing(tag, [e.step for e in ea])
        if [e.step for e in ea] != [e.step for e in eb]:
            problem("%s: steps %s, uninterrupted %s" % (tag, [e.step for e in ea],
                                                         [e.step for e in eb]))
        elif tag not in TIMING_TAGS:
            for x, y in zip(ea, eb):
                if x.value != y.value:
                    problem("%s step %d: %r, uninterrupted %r" % (tag, x.step, x.value, y.value))


def serve(logdir, load_fast):
    """Starts tensorboard on a free loopback port; (process, base URL)."""
    log = open("%s.serve_%s.log" % (logdir.rstrip("/"), load_fast), "w+")
    proc = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "tensorboard"), "--logdir", logdir,
         "--host", "127.0.0.1", "--port", "0", "--load_fast", load_fast, "--reload_interval", "1"],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        log.seek(0)
        m = re.search(r"(http://127\.0\.0\.1:\d+)/", log.read())
        if m:
            return proc, m.group(1)
        time.sleep(0.2)
    proc.kill()
    log.seek(0)
    problem("tensorboard --load_fast %s did not start: %s" % (load_fast, log.read()[-500:]))
    return None, None


def fetch(url, path, **query):
    with urllib.request.urlopen(url + path + "?" + urllib.parse.urlencode(query), timeout=10) as r:
        return json.load(r)


def check_served(d):
    """The dashboard's answers for run "." (d itself) equal EventAccumulator's."""
    acc = accumulate(d)
    scalars = {t: [[e.step, np.float32(e.value)] for e in acc.Scalars(t)]
               for t in acc.Tags()["scalars"]}
    texts = {t: [e.step for e in acc.Tensors(t)] for t in acc.Tags()["tensors"]}
    for load_fast in ("false", "true"):
        proc, url = serve(d, load_fast)
        if not proc:
            continue
        try:
            got, got_text, deadline = {}, {}, time.time() + 60
            while time.time() < deadline:   # the server loads in the background
                try:
                    got = {t: [[s, np.float32(v)] for _, s, v in
                               fetch(url, "/data/plugin/scalars/scalars", run=".", tag=t)]
                           for t in scalars}
                    got_text = {t: [x["step"] for x in
                                    fetch(url, "/data/plugin/text/text", run=".", tag=t)]
                                for t in texts}
                    if got == scalars and got_text == texts:
                        break
                except OSError:
                    pass
                time.sleep(0.5)
            if got != scalars or got_text != texts:
                problem("load_fast=%s serves %r %r, EventAccumulator %r %r"
                        % (load_fast, got, got_text, scalars, texts))
            else:
                print("# load_fast=%s: %d tags served as EventAccumulator reads them"
                      % (load_fast, len(scalars) + len(texts)))
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def main(argv):
    cmd = argv[1]
    if cmd == "records":
        check_records(argv[2])
    elif cmd == "purged":
        check_purged(argv[2])
    elif cmd == "run":
        config = argv[argv.index("--config") + 1] if "--config" in argv else None
        check_run(argv[2], config, "--mfu" in argv)
    elif cmd == "served":
        check_served(argv[2])
    elif cmd == "same":
        check_same(argv[2], argv[3])
    else:
        sys.exit("usage: tensorboard_read.py records|purged|run|served|same ...")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
