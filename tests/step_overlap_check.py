"""Checks of bench/step_overlap.py, the two-stream replay behind the
multi-rank rows of docs/gpu.md's step table (run by tests/cuda_step_model.sh,
which turns each printed `PASS name` / `FAIL name: why` into one TAP line),
and of bench/step_model.py's host replay (the stream's wait for the host).

The replay is checked on small records whose answer follows by hand from
the rules comm_nccl.c implements (a collective starts after the compute
enqueued before it; compute waits for a collective only where a wait is
enqueued), its ring cost against the formula worked by hand, its choice
of link (inside a node or across nodes) from the group's world ranks, its
link figures against src/plan/projection.c's defaults (one set of
assumptions for both models), and, given the walk's directory, the walked
multi-rank steps (gpt2-124m full_shard on 8 ranks and hybrid_shard on 16,
llama-1b full_shard on 8) against the bounds any schedule of them must
meet and the collectives their units must make.

Usage: step_overlap_check.py TOP_SRCDIR [WALK_DIR]"""
import math
import os
import re
import sys

top = sys.argv[1]
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(top, "bench"))
import step_overlap as so  # noqa: E402

MS = 1e-3
results = []


def check(name, cond, why=""):
    results.append(f"PASS {name}" if cond else f"FAIL {name}: {why}")


def price(line):
    """The price of a fake compute line, `memset MS`."""
    return float(line.split("\t")[1]) * MS, "compute"


def ag(full_bytes, ranks=8, lo=0):
    """An all_gather record line moving full_bytes over the ranks lo, lo + 1,
    ... (lo + ranks - 1), on stream 2."""
    return f"nccl\tall_gather\t2\t{full_bytes // (2 * ranks)}\t2\t{ranks}\t{lo}\t{lo + ranks - 1}"


# 8 ranks, 360 MB gathered: 7 ring steps of 2 us, plus 7/8 of 1 ms
full = 360_000_000
t_ag = so.collective_seconds("all_gather", full, 8)
check("ring cost: an 8-rank all-gather of 360 MB takes 7 x 2 us + 875 us",
      math.isclose(t_ag, 7 * 2e-6 + 875e-6, rel_tol=1e-12), f"{t_ag}")
check("ring cost: an all-reduce costs twice the all-gather of the same buffer",
      math.isclose(so.collective_seconds("all_reduce", full, 8), 2 * t_ag, rel_tol=1e-12))
check("ring cost: one rank moves nothing", so.collective_seconds("all_gather", full, 1) == 0)
t_x = so.collective_seconds("all_gather", full, 8, so.INTER)
check("ring cost across nodes: an 8-rank all-gather of 360 MB takes 7 x 5 us + 7/8 of "
      "360 MB at 40 GB/s", math.isclose(t_x, 7 * 5e-6 + 0.875 * 360e6 / 40e9, rel_tol=1e-12),
      f"{t_x}")
# world ranks 0-7 lie in node 0, 4-11 cross into node 1, 8 and 0 (a
# replicate pair) span both; with nodes of 4 ranks, 0-7 spans two
check("link: a group inside one node of 8 runs inside the node, one across two runs "
      "across nodes",
      not so.collective(ag(full))[3] and so.collective(ag(full, lo=4))[3] and
      so.collective("nccl\tall_reduce\t2\t10\t4\t2\t0\t8")[3] and
      so.collective(ag(full), per_node=4)[3])
end = so.replay([ag(full, lo=4)], price).end
check("replay: a gather across nodes is priced at the inter-node link",
      math.isclose(end, t_x, rel_tol=1e-12), f"end {end}")
try:
    so.collective("nccl\tall_gather\t2\t10\t2\t8")
    check("a collective without its group's world ranks is refused", False, "accepted")
except SystemExit:
    check("a collective without its group's world ranks is refused", True)

# compute 1 ms; the gather waits for it (record/wait as comm_nccl.c
# enqueues them) and completes at event 4; compute waits for event 4
# before its 2 ms
# (NCCL's SMs taken from the compute are checked after these: nccl_sms=0
# here leaves the order alone to be checked)
base = ["memset\t1", "record\t3\t1", "wait\t2\t3", ag(full), "record\t4\t2"]
end, busy_c, slowed, busy_m, colls, stalls, kinds = so.replay(
    base + ["wait\t1\t4", "memset\t2"], price, nccl_sms=0)
check("replay: compute that waits for a gather starts when the gather ends",
      math.isclose(end, 3 * MS + t_ag, rel_tol=1e-12), f"end {end}")
check("replay: busy times are the sums of the prices",
      math.isclose(busy_c, 3 * MS) and math.isclose(busy_m, t_ag), f"{busy_c} {busy_m}")
check("replay: the collective is counted with its full buffer and its price",
      colls == {("all_gather", 2, False): [1, full, t_ag]}, f"{colls}")
check("replay: compute time is added up by the kind price() names",
      kinds == {"compute": busy_c}, f"{kinds}")
w = stalls.get(("all_gather", full, False), [0, 0.0])
check("replay: the compute stream's wait is charged to the gather it waited for",
      len(stalls) == 1 and w[0] == 1 and math.isclose(w[1], t_ag), f"{stalls}")
end = so.replay(base + ["memset\t2"], price, nccl_sms=0).end
check("replay: compute that does not wait overlaps the gather",
      math.isclose(end, 3 * MS, rel_tol=1e-12), f"end {end}")
# NCCL's kernel holds 16 of the 132 SMs while the gather runs: the 2 ms
# beside it do t_ag x 116/132 of their work in the gather's t_ag and the
# rest after it, so they end t_ag x 16/132 later than alone
keep = (so.SMS - so.NCCL_SMS) / so.SMS
r = so.replay(base + ["memset\t2"], price)
check("NCCL's SMs: 2 ms of compute beside a gather of t_ag end t_ag x 16/132 later",
      so.SMS == 132 and so.NCCL_SMS == 16 and
      math.isclose(r.end, 3 * MS + t_ag * 16 / 132, rel_tol=1e-12) and
      math.isclose(r.slowed, t_ag * 16 / 132, rel_tol=1e-12) and
      math.isclose(r.compute, 3 * MS + r.slowed, rel_tol=1e-12) and
      r.by_kind == {"compute": 3 * MS},
      f"end {r.end} slowed {r.slowed} compute {r.compute} kinds {r.by_kind}")
# 0.5 ms beside the gather end inside it, at 116/132 speed all along
r = so.replay(base + ["memset\t0.5"], price)
check("NCCL's SMs: compute that ends inside the gather runs at 116/132 speed throughout",
      math.isclose(r.slowed, 0.5 * MS * (132 / 116 - 1), rel_tol=1e-12) and
      math.isclose(r.end, 1 * MS + t_ag, rel_tol=1e-12),
      f"slowed {r.slowed} end {r.end}")
# compute that waits for the gather runs after it, at full speed
r = so.replay(base + ["wait\t1\t4", "memset\t2"], price)
check("NCCL's SMs: compute that waits for the gather is not slowed",
      r.slowed == 0 and math.isclose(r.end, 3 * MS + t_ag, rel_tol=1e-12),
      f"slowed {r.slowed} end {r.end}")
# the span walk itself, by hand: 3 s of work from 0 at half speed inside
# the spans [1, 2] and [3, 4]: 1 s done by 1, 0.5 more by 2, 1 more by 3,
# the last 0.5 taking all of [3, 4]
end, first = so.run_beside(0.0, 3.0, [(1.0, 2.0), (3.0, 4.0)], 0, 0.5)
check("NCCL's SMs: compute across two spans and the gap between them, by hand (ends at 4)",
      math.isclose(end, 4.0, rel_tol=1e-12) and first == 0, f"end {end} first {first}")
end, first = so.run_beside(2.5, 1.0, [(1.0, 2.0), (3.0, 4.0)], 0, 0.5)
check("NCCL's SMs: the walk skips spans that ended before the compute starts",
      math.isclose(end, 4.0, rel_tol=1e-12) and first == 1, f"end {end} first {first}")
try:
    so.replay([ag(full), "nccl\tall_gather\t5\t10\t2\t8\t0\t7"], price)
    check("replay: collectives on two streams are refused (the replay's one-stream rule)",
          False, "accepted")
except SystemExit:
    check("replay: collectives on two streams are refused (the replay's one-stream rule)", True)
# the gather cannot start before the compute enqueued before it (2 ms
# here, more than the gather), so it ends after it
end = so.replay(["memset\t2", "record\t3\t1", "wait\t2\t3", ag(full),
                 "record\t4\t2", "wait\t1\t4"], price).end
check("replay: a collective starts after the compute enqueued before it",
      math.isclose(end, 2 * MS + t_ag, rel_tol=1e-12), f"end {end}")
# two gathers run one after the other on their one stream
end = so.replay([ag(full), ag(full)], price).end
check("replay: collectives on one stream run one at a time",
      math.isclose(end, 2 * t_ag, rel_tol=1e-12), f"end {end}")
try:
    so.replay(["memset\t1", "wait\t1\t9"], price)
    check("replay: a wait for an event never recorded is refused", False, "accepted")
except SystemExit:
    check("replay: a wait for an event never recorded is refused", True)

# one set of link figures for both models
with open(os.path.join(top, "src", "plan", "projection.c")) as fp:
    proj = fp.read()


def default(name):
    m = re.search(rf"c->{name} = ([0-9.]+);", proj)
    return float(m.group(1)) if m else None


check("link figures equal src/plan/projection.c's defaults (intra and inter node, nodes of 8)",
      all(d is not None and math.isclose(d * k, v, rel_tol=1e-12) for d, k, v in (
          (default("intra_bw_gbs"), 1e9, so.INTRA[0]), (default("intra_lat_us"), 1e-6, so.INTRA[1]),
          (default("inter_bw_gbs"), 1e9, so.INTER[0]), (default("inter_lat_us"), 1e-6, so.INTER[1]),
          (default("gpus_per_node"), 1, so.PER_NODE))),
      f"projection.c {[default(n) for n in ('intra_bw_gbs', 'intra_lat_us', 'inter_bw_gbs', 'inter_lat_us', 'gpus_per_node')]}")

# step_model.py's host replay: three 0-byte memsets (2 us each, the launch
# gap) and the loss's 80-byte copy to the host (12.0032 us) a step.  At
# 5 us of host time per operation the stream first waits 5 us, then 3 us
# before each later operation; the host waits for the copy, so the next
# step starts the same way: 5 + 3 x 3 = 14 us a step.
import step_model as sm  # noqa: E402
import tempfile  # noqa: E402

toy_step = ["memset\t0"] * 3 + ["memcpy\td2h\t80"]
with tempfile.TemporaryDirectory() as d:
    for n in (1, 2):
        with open(os.path.join(d, f"toy.steps{n}.rec"), "w") as fp:
            fp.write("\n".join(toy_step * n) + "\n")
    idle, n_ops = sm.host_idle(d, "toy")
check("host replay: 3 launch-gap memsets and the loss copy wait 5 + 3 x 3 us for the host a step",
      n_ops == 4 and math.isclose(idle, 14e-6, rel_tol=1e-9) and sm.HOST_ENQUEUE_S == 5e-6,
      f"idle {idle}, {n_ops} operations")

# bench/host_time.py on a record and clock worked by hand: 6 steps of
# 1 ms, each the mark, a launch 10 us later and the batch's copy at
# 400 us; step 4 also reads the loss back at 20 us.  Steps 2 to 5 are
# timed (step 1 is the set-up's, and no mark ends step 6); the median
# step is step 2, whose largest gap is the 600 us before the next mark;
# the read of step 4 is followed by 380 us until the batch's copy.
import host_time as ht  # noqa: E402

toy_rec, toy_clk = [], []
for s in range(6):
    t0 = s * 1_000_000
    ops = [(ht.MARK + "\t1,1,1", 0), ("launch\tk\t1,1,1", 10_000)]
    if s == 3:
        ops.append(("memcpy\td2h\t80", 20_000))
    ops.append(("memcpy\th2d\t100", 400_000))
    for line, dt in ops:
        toy_rec.append(line)
        toy_clk.append(t0 + dt)
ops, secs, gaps, reads = ht.analyse(toy_rec, toy_clk)
check("host_time: 4 steps timed of 1 ms, the median's largest gap 600 us before the mark, "
      "380 us after step 4's loss read",
      ops == [3, 3, 4, 3] and all(math.isclose(x, 1e-3) for x in secs) and
      math.isclose(gaps[0][0], 600e-6) and gaps[0][1].startswith(ht.MARK) and
      math.isclose(gaps[1][0], 390e-6) and len(reads) == 1 and reads[0][0] == 4 and
      math.isclose(reads[0][1], 380e-6),
      f"ops {ops} secs {secs} gaps {gaps[:2]} reads {reads}")
try:
    ht.analyse(toy_rec[:8], toy_clk[:8])
    refused = False
except SystemExit:
    refused = True
check("host_time: a record of fewer than 4 steps is refused", refused)

if len(sys.argv) > 2:

    def make_price():
        c = {}

        def f(line):
            o = sm.Op(line)
            return sm.price(o, c)[3], sm.group_of(o, c)
        return f

    # walk, label, parameters, units: gpt2-124m has 14 (embedding, 12
    # blocks, the head's norm), llama-1b 18 (embedding, 16 blocks, the head
    # with its own output matrix)
    for walk, label, params, units in (
            ("gpt2-124m.r8", "gpt2-124m on 8 ranks", 124_439_808, 14),
            ("gpt2-124m.r16h8", "gpt2-124m hybrid_shard 2x8", 124_439_808, 14),
            ("llama-1b.r8", "llama-1b on 8 ranks", 1_235_814_400, 18),
            ("llama-1b.r16h8", "llama-1b hybrid_shard 2x8", 1_235_814_400, 18)):
        r = so.step(sm.records(sys.argv[2], walk), make_price)
        check(f"walked {label}: the step lies between its compute alone and "
              "compute plus every collective in series",
              r.compute <= r.end * (1 + 1e-12) and r.end <= (r.compute + r.comm) * (1 + 1e-12),
              f"step {r.end} compute {r.compute} collectives {r.comm}")
        check(f"walked {label}: the compute stream's waits add up to the step "
              "beyond its compute (one stream waits, the other is the compute)",
              math.isclose(sum(w for n, w in r.stalls.values()), r.end - r.compute,
                           rel_tol=1e-9, abs_tol=1e-12),
              f"waits {r.stalls} step - compute {r.end - r.compute}")
        check(f"walked {label}: the compute kinds at full speed and what NCCL's SMs "
              "slowed add up to the compute stream's time",
              math.isclose(sum(r.by_kind.values()) + r.slowed, r.compute, rel_tol=1e-9),
              f"{r.by_kind} slowed {r.slowed}")
        # the collectives run mostly beside compute: more than a tenth of
        # the bound (a replay that slowed nothing leaves only rounding)
        check(f"walked {label}: NCCL's SMs slow the compute by at most 16/116 of the "
              "collectives' time on the wire, and by more than a tenth of that",
              r.comm * 16 / 116 / 10 < r.slowed <= r.comm * 16 / 116 * (1 + 1e-9),
              f"slowed {r.slowed} collectives {r.comm}")
        n_ag, gathered, _ = r.colls.get(("all_gather", 2, False), [0, 0, 0])
        n_rs, reduced, _ = r.colls.get(("reduce_scatter", 4, False), [0, 0, 0])
        # the head runs forward and backward in one go, so it is gathered once
        check(f"walked {label}: each step gathers every unit inside the node for the "
              f"forward and again for the backward, the head once ({2 * units - 1} bf16 "
              f"all-gathers), and reduce-scatters each unit's fp32 gradient once ({units})",
              n_ag == 2 * units - 1 and n_rs == units,
              f"{n_ag} all-gathers, {n_rs} reduce-scatters")
        check(f"walked {label}: the reduce-scatters carry 4 bytes per parameter "
              f"({params:,}, padded per unit), the gathers at most 2 bytes per parameter twice",
              4 * params <= reduced < 4 * params * 1.001 and gathered <= reduced,
              f"reduced {reduced} gathered {gathered}")
        n_ar, ar_bytes, _ = r.colls.get(("all_reduce", 4, True), [0, 0, 0])
        if walk.endswith("h8"):
            # each unit's fp32 gradient shard (1/8 of it) is all-reduced
            # with the other node's rank
            check(f"walked {label}: each unit's gradient shard is all-reduced across "
                  f"nodes once ({units} fp32 all-reduces carrying 1/8 of 4 bytes a parameter)",
                  n_ar == units and math.isclose(ar_bytes * 8, reduced, rel_tol=1e-9),
                  f"{n_ar} all-reduces of {ar_bytes} bytes")
            # the engine waits for a unit's all-reduce one reduction later,
            # so it runs behind the backward: the compute stream's waits for
            # them come to under half their time on the wire (waiting for
            # each at once, as the engine did, waits for all of it)
            waited = sum(w for (op, b, x), (n, w) in r.stalls.items()
                         if op == "all_reduce" and x and b >= 1e6)
            _, _, wire = r.colls.get(("all_reduce", 4, True), [0, 0, 0.0])
            check(f"walked {label}: the compute stream waits for the replicate all-reduces "
                  "less than half their time on the wire",
                  0 < waited < 0.5 * wire, f"waited {waited} of {wire} s: {r.stalls}")
        else:
            check(f"walked {label}: nothing crosses nodes",
                  not any(k[2] for k in r.colls), f"{r.colls}")

print("\n".join(results))
