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
  - NCCL's kernels take nothing from the compute (on a GPU they occupy a
    few SMs), and the host enqueues ahead of the GPU (no host gaps).
One step is the end of the 2-step walk minus the end of the 1-step walk,
as step_model.py takes the difference of the two records. """
from collections import Counter, namedtuple

INTRA = (360e9, 2e-6)  # bytes/s, s per ring step: projection.c's intra_bw_gbs, intra_lat_us
INTER = (40e9, 5e-6)   # projection.c's inter_bw_gbs, inter_lat_us
PER_NODE = 8           # projection.c's gpus_per_node default
COLLECTIVES = ("all_gather", "reduce_scatter", "all_reduce")

# A replay's result; step() gives the same for one step.  colls:
# {(op, element bytes, crosses nodes): [count, full bytes, seconds]}; stalls: {(op, full bytes,
# crosses nodes): [times, seconds] the compute stream stood waiting for such a
# collective}; by_kind: {kind: compute seconds}, kind as price() names it.
Replay = namedtuple("Replay", "end compute comm colls stalls by_kind")


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


def replay(lines, price, per_node=PER_NODE):
    """Replays one record on per-stream clocks.  price(line) gives a
    compute operation's (seconds, kind).  Returns a Replay."""
    _, cs = streams(lines)
    clock, stamp, last = Counter(), {}, {}
    busy_compute = busy_comm = 0.0
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
            clock[int(f[2])] += t
            busy_comm += t
            c = colls.setdefault((op, int(f[4]), across), [0, 0, 0.0])
            c[0] += 1
            c[1] += full
            c[2] += t
        else:
            t, kind = price(x)
            clock[cs] += t
            busy_compute += t
            by_kind[kind] += t
    return Replay(max(clock.values(), default=0.0), busy_compute, busy_comm, colls, stalls,
                  by_kind)


def step(recs, make_price, per_node=PER_NODE):
    """One step from the 1-step and 2-step records (lists of lines), as a
    Replay of differences.  make_price() gives a fresh price function for
    each record."""
    a = replay(recs[0], make_price(), per_node)
    b = replay(recs[1], make_price(), per_node)

    def minus(new, old):
        d = {k: [x - y for x, y in zip(v, old.get(k, [0] * len(v)))] for k, v in new.items()}
        return {k: v for k, v in d.items() if v[0]}

    return Replay(b.end - a.end, b.compute - a.compute, b.comm - a.comm,
                  minus(b.colls, a.colls), minus(b.stalls, a.stalls),
                  {k: v - a.by_kind.get(k, 0.0) for k, v in b.by_kind.items()})
