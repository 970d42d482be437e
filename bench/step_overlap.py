"""One rank's training step among several, on its two streams: when the
GPU could finish it, with the collectives overlapping the compute as far
as the code's own ordering lets them.  A model, not a measurement;
bench/step_model.py prices the compute and prints the result.

Input: the launch record of one rank of a walk on N ranks with
parallel.backend = nccl (bench/step_walk.sh).  Besides the compute
stream's operations it holds, in the order the host enqueued them, every
collective (`nccl OP STREAM COUNT ELEM RANKS LO HI`,
tests/gpu/emu/nccl_mpi.c; COUNT is NCCL's, per rank for all_gather and
reduce_scatter; LO and HI the lowest and highest world rank of the
group) and the
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
    the full buffer in bytes;
  - ranks sit on nodes of PER_NODE (8) in blocks, as Slurm's default
    distribution places them; a group inside one node runs at
    projection.c's intra-node defaults, 360 GB/s and 2 us per ring step
    (H100 SXM over NVLink), a group across nodes at its inter-node ones,
    40 GB/s and 5 us (one 400 Gb/s NIC per GPU): the ring is as fast as
    its slowest link;
  - while a collective runs, NCCL's kernel holds NCCL_SMS of the GPU's
    SMS streaming multiprocessors (one thread block per channel, NCCL_SMS
    channels: NCCL picks the count per topology, and NCCL_MIN_NCHANNELS /
    NCCL_MAX_NCHANNELS bound it), and every compute operation then runs
    at (SMS - NCCL_SMS) / SMS of its price's speed, memory-bound ones
    too (NCCL's copies use HBM as well); the collectives themselves keep
    their ring cost;
  - the host enqueues ahead of the GPU (no host gaps).
One step is the end of the 2-step walk minus the end of the 1-step walk,
as step_model.py takes the difference of the two records. """
from collections import Counter, namedtuple

INTRA = (360e9, 2e-6)  # bytes/s, s per ring step: projection.c's intra_bw_gbs, intra_lat_us
INTER = (40e9, 5e-6)   # projection.c's inter_bw_gbs, inter_lat_us
PER_NODE = 8           # projection.c's gpus_per_node default
SMS = 132              # H100 SXM5
NCCL_SMS = 16          # an assumption for 8 ranks over NVLink, to be measured
COLLECTIVES = ("all_gather", "reduce_scatter", "all_reduce")

# A replay's result; step() gives the same for one step.  compute: the
# compute stream's busy time, slowed included; slowed: what NCCL's SMs
# added to it; colls: {(op, element bytes, crosses nodes): [count, full
# bytes, seconds]}; stalls: {(op, full bytes, crosses nodes): [times,
# seconds] the compute stream stood waiting for such a collective};
# by_kind: {kind: compute seconds at full speed}, kind as price() names it.
Replay = namedtuple("Replay", "end compute slowed comm colls stalls by_kind")


def run_beside(start, work, busy, first, keep):
    """When compute of `work` seconds (at the whole GPU's speed) that
    starts at `start` ends, running at `keep` of that speed while a
    collective of `busy` (the communication stream's (start, end) spans,
    in order) runs.  Spans from index `first` on may overlap it; returns
    (end, the index of the first span that may overlap what follows)."""
    t = start
    while first < len(busy) and busy[first][1] <= t:
        first += 1
    i = first
    while work > 0 and i < len(busy):
        a, b = busy[i]
        if a > t:   # the GPU is the compute's alone until the span starts
            if work <= a - t:
                return t + work, first
            work -= a - t
            t = a
        if work <= (b - t) * keep:
            return t + work / keep, first
        work -= (b - t) * keep
        t = b
        i += 1
    return t + work, first


def collective(line, per_node=PER_NODE):
    """(op, full buffer bytes, ranks, crosses nodes) of a `nccl` record line."""
    f = line.split("\t")
    if len(f) != 8:
        raise SystemExit(f"step_overlap.py: a collective without its group's ranks: {line}")
    op, count, elem, ranks, lo, hi = f[1], int(f[3]), int(f[4]), int(f[5]), int(f[6]), int(f[7])
    if op not in COLLECTIVES:
        raise SystemExit(f"step_overlap.py: a collective it cannot price: {line}")
    full = count * elem * (ranks if op != "all_reduce" else 1)
    return op, full, ranks, lo // per_node != hi // per_node


def collective_seconds(op, full, ranks, link=INTRA):
    """The ring cost of one collective over `ranks` ranks on link (bw, lat)."""
    if ranks < 2:
        return 0.0
    bw, lat = link
    t = (ranks - 1) * lat + full * (ranks - 1) / ranks / bw
    return 2 * t if op == "all_reduce" else t


def streams(lines):
    """(communication streams, the compute stream or -1), in one scan."""
    comm, ordered = set(), set()
    for x in lines:
        f = x.split("\t", 3)
        if f[0] == "nccl":
            comm.add(int(f[2]))
        elif f[0] == "record":
            ordered.add(int(f[2]))
        elif f[0] == "wait":
            ordered.add(int(f[1]))
    compute = ordered - comm
    if len(compute) > 1:
        raise SystemExit(f"step_overlap.py: events on {len(compute)} streams besides the "
                         "collectives'; the record does not say which one a launch ran on")
    return comm, compute.pop() if compute else -1


def replay(lines, price, per_node=PER_NODE, nccl_sms=NCCL_SMS):
    """Replays one record on per-stream clocks.  price(line) gives a
    compute operation's (seconds, kind).  Compute beside a collective runs
    at (SMS - nccl_sms) / SMS speed.  A collective starts only after every
    compute operation enqueued before it (comm_nccl.c's order), so the
    collectives that can overlap an operation are all known when it is
    replayed.  Returns a Replay."""
    comm_streams, cs = streams(lines)
    if len(comm_streams) > 1:
        raise SystemExit("step_overlap.py: collectives on more than one stream; the "
                         "replay assumes comm_nccl.c's one communication stream")
    keep = (SMS - nccl_sms) / SMS
    clock, stamp, last = Counter(), {}, {}
    busy, first = [], 0   # the collectives' (start, end) spans, in order
    busy_compute = busy_comm = slowed = 0.0
    colls, stalls, by_kind = {}, {}, Counter()
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
            op, full, ranks, across = collective(x, per_node)
            t = collective_seconds(op, full, ranks, INTER if across else INTRA)
            last[int(f[2])] = op, full, across
            if t > 0:
                busy.append((clock[int(f[2])], clock[int(f[2])] + t))
            clock[int(f[2])] += t
            busy_comm += t
            c = colls.setdefault((op, int(f[4]), across), [0, 0, 0.0])
            c[0] += 1
            c[1] += full
            c[2] += t
        else:
            t, kind = price(x)
            end, first = run_beside(clock[cs], t, busy, first, keep)
            busy_compute += end - clock[cs]
            slowed += end - clock[cs] - t
            clock[cs] = end
            by_kind[kind] += t
    return Replay(max(clock.values(), default=0.0), busy_compute, slowed, busy_comm, colls,
                  stalls, by_kind)


def step(recs, make_price, per_node=PER_NODE, nccl_sms=NCCL_SMS):
    """One step from the 1-step and 2-step records (lists of lines), as a
    Replay of differences.  make_price() gives a fresh price function for
    each record."""
    a = replay(recs[0], make_price(), per_node, nccl_sms)
    b = replay(recs[1], make_price(), per_node, nccl_sms)

    def minus(new, old):
        d = {k: [x - y for x, y in zip(v, old.get(k, [0] * len(v)))] for k, v in new.items()}
        return {k: v for k, v in d.items() if v[0]}

    return Replay(b.end - a.end, b.compute - a.compute, b.slowed - a.slowed, b.comm - a.comm,
                  minus(b.colls, a.colls), minus(b.stalls, a.stalls),
                  {k: v - a.by_kind.get(k, 0.0) for k, v in b.by_kind.items()})
