#!/usr/bin/env python3
"""How long the host takes between the device operations of a training
step: a measurement of this machine's CPU under the emulation, not of a
GPU node.

Input: a record and its clock from the emulated shardtrain
(tests/gpu/emu/devmem.c: ST_EMU_RECORD=FILE, ST_EMU_CLOCK=FILE, and
ST_EMU_RECORD_ONLY=1, so no kernel runs and the host's time is all there
is), one line of each per device operation, the clock in nanoseconds of
CLOCK_MONOTONIC when the host enqueued it.  bench/host_time.sh makes
them.

Why it matters: bench/step_model.py prices the GPU's side of a step and
replays the host at HOST_ENQUEUE_S per operation, an assumption for the
CUDA driver's launch cost.  What the host does besides launching (the
engine's bookkeeping, reading the next batch, logging) it does not
model.  Here that work is timed with everything the real binary does on
the host, the emulator's recording of each operation standing in for the
driver's launch, so the figures bound the host's own work from above on
this CPU.

Steps are delimited by MARK, the step's first kernel (the embedding's
forward).  The first and the last step are left out (set-up, and the
final weights after it).  Reported per model: operations per step; the
host's time per step (median and range over the steps timed), and per
operation; the largest gaps of the median step with the operation they
precede; and, on each step that reads the loss back (a log step: the
host waits for the stream there), the gap from that read to the next
operation, which a GPU's stream would stand idle for.

Usage: bench/host_time.py LABEL RECORD CLOCK [MARK]
"""
import statistics
import sys

MARK = "launch\tembed_forward_kernel"


def load(rec_path, clock_path):
    with open(rec_path) as fp:
        rec = fp.read().splitlines()
    with open(clock_path) as fp:
        clk = [int(x) for x in fp.read().split()]
    if len(rec) != len(clk):
        raise SystemExit(f"host_time.py: {rec_path} has {len(rec)} lines, "
                         f"{clock_path} {len(clk)}: not one clock per operation")
    return rec, clk


def analyse(rec, clk, mark=MARK):
    """(ops per step, host seconds per step, gaps, log-step gaps): steps
    from each MARK line to the next, the first left out (and the last,
    which no MARK ends); gaps:
    the median step's largest gaps as (seconds, next operation); log-step
    gaps: (step, seconds) from each small copy to the host inside a timed
    step to the operation after it."""
    starts = [i for i, line in enumerate(rec) if line.startswith(mark)]
    if len(starts) < 4:
        raise SystemExit(f"host_time.py: {len(starts)} steps marked by {mark!r}; "
                         "time at least 4 steps")
    timed = list(zip(starts[1:-1], starts[2:]))   # steps 2 .. n-1 of n
    secs = [(clk[b] - clk[a]) / 1e9 for a, b in timed]
    ops = [b - a for a, b in timed]
    med = statistics.median(secs)
    a, b = timed[min(range(len(secs)), key=lambda k: abs(secs[k] - med))]
    gaps = sorted((((clk[i + 1] - clk[i]) / 1e9, rec[i + 1]) for i in range(a, b)),
                  key=lambda g: -g[0])
    reads = []
    for k, (a, b) in enumerate(timed):
        for i in range(a, b):
            f = rec[i].split("\t")
            if f[0] == "memcpy" and f[1] == "d2h" and int(f[2]) < 4096:
                reads.append((k + 2, (clk[i + 1] - clk[i]) / 1e9))
    return ops, secs, gaps, reads


def name(line):
    f = line.split("\t")
    return f[1].split("<")[0] if f[0] == "launch" else " ".join(f[:2])


def report(label, rec, clk, mark=MARK):
    ops, secs, gaps, reads = analyse(rec, clk, mark)
    med = statistics.median(secs)
    n_ops = statistics.median(ops)
    out = [f"- {label}: {n_ops:.0f} operations a step; the host takes "
           f"{med * 1e3:.3f} ms a step (median of {len(secs)} steps, "
           f"{min(secs) * 1e3:.3f} to {max(secs) * 1e3:.3f}), "
           f"{med / n_ops * 1e6:.2f} us an operation; its largest gaps "
           "(us, before): " + "; ".join(f"{g * 1e6:.1f} `{name(n)}`" for g, n in gaps[:3]) +
           "; after the loss is read on a log step: " +
           (", ".join(f"step {s} {g * 1e6:.1f} us" for s, g in reads) if reads
            else "no log step among the steps timed") + "."]
    return "\n".join(out)


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    rec, clk = load(sys.argv[2], sys.argv[3])
    print(report(sys.argv[1], rec, clk, *sys.argv[4:]))


if __name__ == "__main__":
    main()
