"""Checks of bench/step_overlap.py, the two-stream replay behind the
multi-rank rows of docs/gpu.md's step table (run by tests/cuda_step_model.sh,
which turns each printed `PASS name` / `FAIL name: why` into one TAP line).

The replay is checked on small records whose answer follows by hand from
the rules comm_nccl.c implements (a collective starts after the compute
enqueued before it; compute waits for a collective only where a wait is
enqueued), its ring cost against the formula worked by hand, its link
figures against src/plan/projection.c's defaults (one set of assumptions
for both models), and, given the walk's directory, the walked 8-rank step
against the bounds any schedule of it must meet.

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
    return float(line.split("\t")[1]) * MS


def ag(full_bytes, ranks=8):
    """An all_gather record line moving full_bytes over ranks, on stream 2."""
    return f"nccl\tall_gather\t2\t{full_bytes // (2 * ranks)}\t2\t{ranks}"


# 8 ranks, 360 MB gathered: 7 ring steps of 2 us, plus 7/8 of 1 ms
full = 360_000_000
t_ag = so.collective_seconds("all_gather", full, 8)
check("ring cost: an 8-rank all-gather of 360 MB takes 7 x 2 us + 875 us",
      math.isclose(t_ag, 7 * 2e-6 + 875e-6, rel_tol=1e-12), f"{t_ag}")
check("ring cost: an all-reduce costs twice the all-gather of the same buffer",
      math.isclose(so.collective_seconds("all_reduce", full, 8), 2 * t_ag, rel_tol=1e-12))
check("ring cost: one rank moves nothing", so.collective_seconds("all_gather", full, 1) == 0)

# compute 1 ms; the gather waits for it (record/wait as comm_nccl.c
# enqueues them) and completes at event 4; compute waits for event 4
# before its 2 ms
base = ["memset\t1", "record\t3\t1", "wait\t2\t3", ag(full), "record\t4\t2"]
end, busy_c, busy_m, colls, stalls = so.replay(base + ["wait\t1\t4", "memset\t2"], price)
check("replay: compute that waits for a gather starts when the gather ends",
      math.isclose(end, 3 * MS + t_ag, rel_tol=1e-12), f"end {end}")
check("replay: busy times are the sums of the prices",
      math.isclose(busy_c, 3 * MS) and math.isclose(busy_m, t_ag), f"{busy_c} {busy_m}")
check("replay: the collective is counted with its full buffer",
      colls == {("all_gather", 2): [1, full]}, f"{colls}")
check("replay: the compute stream's wait is charged to the gather it waited for",
      list(stalls) == [("all_gather", full)] and stalls[("all_gather", full)][0] == 1 and
      math.isclose(stalls[("all_gather", full)][1], t_ag),
      f"{stalls}")
end, _, _, _, _ = so.replay(base + ["memset\t2"], price)
check("replay: compute that does not wait overlaps the gather",
      math.isclose(end, 3 * MS, rel_tol=1e-12), f"end {end}")
# the gather cannot start before the compute enqueued before it (2 ms
# here, more than the gather), so it ends after it
end, _, _, _, _ = so.replay(["memset\t2", "record\t3\t1", "wait\t2\t3", ag(full),
                          "record\t4\t2", "wait\t1\t4"], price)
check("replay: a collective starts after the compute enqueued before it",
      math.isclose(end, 2 * MS + t_ag, rel_tol=1e-12), f"end {end}")
# two gathers run one after the other on their one stream
end, _, _, _, _ = so.replay([ag(full), ag(full)], price)
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
bw = re.search(r"c->intra_bw_gbs = ([0-9.]+);", proj)
lat = re.search(r"c->intra_lat_us = ([0-9.]+);", proj)
check("link figures equal src/plan/projection.c's intra-node defaults",
      bw and lat and float(bw.group(1)) * 1e9 == so.LINK_BW and
      float(lat.group(1)) * 1e-6 == so.LINK_LAT,
      f"projection.c {bw and bw.group(1)} GB/s {lat and lat.group(1)} us")

if len(sys.argv) > 2:
    import step_model as sm  # noqa: E402
    recs = sm.records(sys.argv[2], "gpt2-124m.r8")

    def make_price():
        c = {}
        return lambda line: sm.price(sm.Op(line), c)[3]

    t, busy_c, busy_m, colls, stalls = so.step(recs, make_price)
    check("walked gpt2-124m on 8 ranks: the step lies between its compute alone and "
          "compute plus every collective in series",
          busy_c <= t * (1 + 1e-12) and t <= (busy_c + busy_m) * (1 + 1e-12),
          f"step {t} compute {busy_c} collectives {busy_m}")
    check("walked gpt2-124m on 8 ranks: the compute stream's waits add up to the step "
          "beyond its compute (one stream waits, the other is the compute)",
          math.isclose(sum(w for n, w in stalls.values()), t - busy_c, rel_tol=1e-9,
                       abs_tol=1e-12),
          f"waits {stalls} step - compute {t - busy_c}")
    n_ag, gathered = colls.get(("all_gather", 2), [0, 0])
    n_rs, reduced = colls.get(("reduce_scatter", 4), [0, 0])
    # gpt2-124m has 14 units (embedding, 12 blocks, the head's norm); the
    # head runs forward and backward in one go, so it is gathered once
    check("walked gpt2-124m on 8 ranks: each step gathers every unit for the forward "
          "and again for the backward, the head once (27 bf16 all-gathers), and "
          "reduce-scatters each unit's fp32 gradient once (14)",
          n_ag == 27 and n_rs == 14, f"{n_ag} all-gathers, {n_rs} reduce-scatters")
    check("walked gpt2-124m on 8 ranks: the reduce-scatters carry 4 bytes per parameter "
          "(124,439,808, padded per unit), the gathers at most 2 bytes per parameter twice",
          4 * 124_439_808 <= reduced < 4 * 124_439_808 * 1.001 and gathered <= reduced,
          f"reduced {reduced} gathered {gathered}")

print("\n".join(results))
