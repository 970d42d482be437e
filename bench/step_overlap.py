"""One rank's training step among several, on its two streams: when the
GPU could finish it, with the collectives overlapping the compute as far
as the code's own ordering lets them.  A model, not a measurement;
bench/step_model.py prices the compute and prints the result.

Input: the launch record of one rank of a walk on N ranks with
parallel.backend = nccl (bench/step_walk.sh).  Besides the compute
stream's operations it holds, in the order the host enqueued them, every
collective (`nccl OP STREAM COUNT ELEM RANKS`, tests/gpu/emu/nccl_mpi.c;
COUNT is NCCL's, per rank for all_gather and reduce_scatter) and the
event ordering around it (`record EVENT STREAM`, `wait STREAM EVENT`,
tests/gpu/emu/shim_c.h).  src/comm/comm_nccl.c orders them so: before a
collective the communication stream waits for all compute enqueued so
far, and compute that needs its result waits for its completion event.
Replaying the record on one clock per stream gives the time the walk's
GPU work could end:
  - an operation on a stream starts when that stream is free and ends
    its price later;
  - `record E S` stamps E with S's clock, `wait S E` moves S's clock up
    to E's stamp.
Assumptions (stated so that a GPU can check them):
  - every kernel, product, copy and memset runs on the compute stream (the
    record names no stream for them; the cuda backend has one), at
    step_model.py's price;
  - collectives run one at a time on the communication stream (as on
    comm_nccl.c's one stream) at the ring cost src/plan/projection.c uses
    (bus bandwidth as nccl-tests defines it): all-gather and
    reduce-scatter (n-1) lat + B (n-1)/n / bw, all-reduce twice that, B
    the full buffer in bytes; bw and lat are projection.c's intra-node
    defaults, 360 GB/s and 2 us per ring step (H100 SXM over NVLink);
  - NCCL's kernels take nothing from the compute (on a GPU they occupy a
    few SMs), and the host enqueues ahead of the GPU (no host gaps).
One step is the end of the 2-step walk minus the end of the 1-step walk,
as step_model.py takes the difference of the two records. """
from collections import Counter

LINK_BW = 360e9   # bytes/s: projection.c's intra_bw_gbs default
LINK_LAT = 2e-6   # s per ring step: projection.c's intra_lat_us default
COLLECTIVES = ("all_gather", "reduce_scatter", "all_reduce")


def collective(line):
    """(op, full buffer bytes, ranks) of a `nccl` record line."""
    f = line.split("\t")
    op, count, elem, ranks = f[1], int(f[3]), int(f[4]), int(f[5])
    if op not in COLLECTIVES:
        raise SystemExit(f"step_overlap.py: a collective it cannot price: {line}")
    full = count * elem * (ranks if op != "all_reduce" else 1)
    return op, full, ranks


def collective_seconds(op, full, ranks, bw=LINK_BW, lat=LINK_LAT):
    """The ring cost of one collective over `ranks` ranks."""
    if ranks < 2:
        return 0.0
    t = (ranks - 1) * lat + full * (ranks - 1) / ranks / bw
    return 2 * t if op == "all_reduce" else t


def replay(lines, price):
    """Replays one record on per-stream clocks.  price(line) gives a
    compute operation's seconds.  Returns (end, compute busy, communication
    busy, {(op, element bytes): [count, full bytes]}, {(op, full bytes):
    [times, seconds] the compute stream stood waiting for such a
    collective})."""
    comm = {int(x.split("\t")[2]) for x in lines if x.startswith("nccl\t")}
    compute = set()
    for x in lines:
        f = x.split("\t")
        if f[0] in ("record", "wait"):
            s = int(f[2] if f[0] == "record" else f[1])
            if s not in comm:
                compute.add(s)
    if len(compute) > 1:
        raise SystemExit(f"step_overlap.py: events on {len(compute)} streams besides the "
                         "collectives'; the record does not say which one a launch ran on")
    cs = compute.pop() if compute else -1
    clock, stamp, last = Counter(), {}, {}
    busy_compute = busy_comm = 0.0
    colls, stalls = {}, {}
    for x in lines:
        f = x.split("\t")
        if f[0] == "record":
            # the event marks the stream's clock, and the collective last
            # enqueued there (what a wait on it waits for)
            stamp[int(f[1])] = clock[int(f[2])], last.get(int(f[2]))
        elif f[0] == "wait":
            s, e = int(f[1]), int(f[2])
            if e not in stamp:
                raise SystemExit(f"step_overlap.py: a wait for an event never recorded: {x}")
            t, what = stamp[e]
            if s == cs and t > clock[s] and what:
                w = stalls.setdefault(what, [0, 0.0])
                w[0] += 1
                w[1] += t - clock[s]
            clock[s] = max(clock[s], t)
        elif f[0] == "nccl":
            op, full, ranks = collective(x)
            t = collective_seconds(op, full, ranks)
            last[int(f[2])] = op, full
            clock[int(f[2])] += t
            busy_comm += t
            c = colls.setdefault((op, int(f[4])), [0, 0])
            c[0] += 1
            c[1] += full
        else:
            t = price(x)
            clock[cs] += t
            busy_compute += t
    return max(clock.values(), default=0.0), busy_compute, busy_comm, colls, stalls


def step(recs, make_price):
    """One step from the 1-step and 2-step records (lists of lines):
    (step seconds, compute busy, communication busy, collectives of the
    step as {(op, element bytes): [count, full bytes]}, the compute
    stream's waits as {(op, full bytes): [times, seconds]}).  make_price()
    gives a fresh price function for each record."""
    a = replay(recs[0], make_price())
    b = replay(recs[1], make_price())
    colls = {k: [v[0] - a[3].get(k, [0, 0])[0], v[1] - a[3].get(k, [0, 0])[1]]
             for k, v in b[3].items()}
    stalls = {k: [v[0] - a[4].get(k, [0, 0.0])[0], v[1] - a[4].get(k, [0, 0.0])[1]]
              for k, v in b[4].items()}
    return (b[0] - a[0], b[1] - a[1], b[2] - a[2], {k: v for k, v in colls.items() if v[0]},
            {k: v for k, v in stalls.items() if v[0]})
