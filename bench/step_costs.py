"""The cost of one recorded device operation on an H100 SXM: a formula per
kind of operation (COSTS), from the numbers the record line itself
carries, for bench/step_model.py's whole-step table and
bench/step_overlap.py's replay.  A model, not a measurement; the
assumptions (the roofline figures below) are stated in step_model.py's
docstring.  An operation without a formula stops the caller (price()), so
a new kernel cannot go unpriced."""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (make check runs this)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attention_model as am  # noqa: E402

PEAK_TC = 989e12
FP32 = am.FP32
HBM = 3.35e12
PCIE = 25e9
LAUNCH_S = 2e-6
HOST_SYNC_S = 10e-6
ATTN_EFF = 0.7  # attention_model.py's mma.sync column


class Op:
    """One record line, parsed."""

    def __init__(self, line):
        self.line = line
        f = line.split("\t")
        self.kind = f[0]
        self.instance = ""
        if self.kind == "launch":
            # "NAME = <ARGS>": the kernel as the launch writes it (the key of
            # COSTS) and the template arguments it instantiates
            self.name, _, self.instance = f[1].partition(" = ")
            self.grid = [int(x) for x in f[2].split(",")]
            self.block = [int(x) for x in f[3].split(",")]
            self.smem = int(f[4])
            self.args = f[5:]
        else:
            self.name = self.kind
            self.args = f[1:]

    def shown_name(self):
        """The kernel with the values of its template arguments, as the
        table shows it: embed_forward_kernel<bf16, true>."""
        if not self.instance:
            return self.name
        return self.name.split("<")[0] + self.instance.replace("__nv_bfloat16", "bf16")

    def template_params(self):
        """The names of the kernel's template parameters, as the launch
        writes them (["T", "kVec"]); [] for no template."""
        if "<" not in self.name:
            return []
        return [x.strip() for x in self.name[self.name.index("<") + 1:-1].split(",")]

    def has_vec_path(self):
        """The kernel has a 16-byte path: a kVec template parameter."""
        return "kVec" in self.template_params()

    def scalar_path(self):
        """True for a launch of a kernel with a 16-byte path that took its
        one-element path."""
        params = self.template_params()
        values = [x.strip() for x in self.instance[1:-1].split(",")] if self.instance else []
        return self.has_vec_path() and len(values) == len(params) and \
            values[params.index("kVec")] == "false"

    def ints(self):
        """The integer arguments, in order (pointers and floats left out)."""
        out = []
        for a in self.args:
            try:
                out.append(int(a))
            except ValueError:
                pass
        return out

    def elem(self, i=0):
        """Element size of the i-th non-null typed pointer argument."""
        sizes = [int(a[1:]) for a in self.args if a.startswith("p") and a[1:].isdigit()]
        return sizes[i]


# Each cost function returns (tensor FLOPs, CUDA-core operations, bytes,
# time override in seconds or None).  ctx carries what a kernel's own
# arguments do not say (the row count of the embedding sort before the
# embedding gradient, the unit sizes of the gradient-norm sums before AdamW).

def c_gemm(o, ctx):
    M, N, K = (int(x) for x in o.args[:3])
    ab, c, d, ta, tb, epi = (int(x) for x in o.args[3:9])
    beta = float(o.args[9])
    sz = {0: 4, 1: 2}
    by = (M * K + K * N) * sz[ab] + M * N * sz[d] + (M * N * sz[c] if beta else 0)
    if epi in (2, 3):  # GELU aux written or read
        by += M * N * sz[d]
    flops = 2 * M * N * K
    if ab == 1:
        return flops, 0, by, None
    return 0, flops, by, None  # fp32 inputs: no tensor cores


def c_memset(o, ctx):
    return 0, 0, int(o.args[-1]), None


def c_memcpy(o, ctx):
    kind, n = o.args[0], int(o.args[-1])
    if kind == "d2d":
        return 0, 0, 2 * n, None
    return 0, 0, 0, n / PCIE + (HOST_SYNC_S if kind == "d2h" else 0.0)


def elementwise(reads, writes, ops):
    """n elements of the first pointer's type, `reads` + `writes` streams."""
    def f(o, ctx):
        n = o.ints()[-1]
        return 0, ops * n, (reads + writes) * n * o.elem(), None
    return f


def rows_cols(reads, writes, ops):
    def f(o, ctx):
        N, C = o.ints()[-2:]
        return 0, ops * N * C, (reads + writes) * N * C * o.elem(), None
    return f


def c_add_bias(o, ctx):
    N, C = o.ints()[-2:]
    return 0, N * C, (2 * N * C + C) * o.elem(), None


def c_bias_partials(o, ctx):
    N, C = o.ints()[-2:]
    return 0, N * C, N * C * o.elem(1) + o.grid[0] * C * 4, None


def c_colsum_finish(o, ctx):
    R, C = o.ints()[-2:]
    return 0, R * C, R * C * 4 + 2 * C * 4, None


def c_pack(o, ctx):
    return 0, o.ints()[-1], 6 * o.ints()[-1], None


def c_rope(o, ctx):
    ld, rows, T, heads, hd = o.ints()[:5]
    n = rows * heads * hd
    return 0, 3 * n, 2 * n * o.elem() + 2 * T * hd // 2 * 4, None


def c_embed_forward(o, ctx):
    rows, T, C = o.ints()[-3:]
    s = o.elem()
    wpe = 0 if o.args[2] == "null" else rows * C * s
    return 0, rows * C, 2 * rows * C * s + wpe + rows * 4, None


# The embedding sort (cuda/embedding.cu): tiles of keys sorted in shared
# memory, passes across tiles one launch each, then the run list.  A
# shared-memory pass over a tile moves the tile's 8-byte keys in and out
# at SMEM_BYTES_CLK per SM, plus SMEM_BARRIER_CLK for the barrier; a block
# scan (the run list) is 2 log2(threads) such barrier steps.  One block per
# SM is assumed, so blocks beyond the SMs' count run in further waves.
CLOCK, SMS = am.CLOCK, am.SMS
SMEM_BYTES_CLK = 128
SMEM_BARRIER_CLK = 50


def smem_passes_s(passes, tile, blocks):
    per_pass = (tile * 8 * 2 / SMEM_BYTES_CLK + SMEM_BARRIER_CLK) / CLOCK
    return passes * per_pass * -(-blocks // SMS)


def latency_or_memory(by, latency):
    """The time override: the latency where it exceeds the bytes' time, else
    None (the row is then priced, and labelled, by its bytes)."""
    return latency if latency > by / HBM else None


def block_scan_s(threads, times=1):
    return times * 2 * (threads - 1).bit_length() * SMEM_BARRIER_CLK / CLOCK


def c_embed_sort_tile(o, ctx):
    N, tile = o.ints()[-2:]
    P = tile * o.grid[0]
    ctx["embed_rows"] = N
    lg = (tile - 1).bit_length()
    passes = lg * (lg + 1) // 2
    by = N * 4 + P * 8
    return 0, passes * P // 2, by, latency_or_memory(by, smem_passes_s(passes, tile, o.grid[0]))


def c_embed_sort_span(o, ctx):
    P = o.ints()[-3]
    return 0, P // 2, 2 * P * 8, None


def c_embed_sort_merge(o, ctx):
    tile = o.ints()[-1]
    P = tile * o.grid[0]
    passes = (tile - 1).bit_length()
    by = 2 * P * 8
    return 0, passes * P // 2, by, latency_or_memory(by, smem_passes_s(passes, tile, o.grid[0]))


def c_embed_runs(o, ctx):
    N = o.ints()[-1]
    by = N * 8 + o.grid[0] * 4
    if "list" in o.name:
        by += N * 4  # at most one start per row, and the offsets
    return 0, N, by, latency_or_memory(by, block_scan_s(o.block[0], -(-o.grid[0] // SMS)))


def c_embed_runs_offsets(o, ctx):
    blocks = o.ints()[0]
    chunks = -(-blocks // o.block[0])
    return 0, blocks, 2 * blocks * 4, block_scan_s(o.block[0], chunks)


def c_embed_wte(o, ctx):
    C = o.ints()[-1]
    N = ctx["embed_rows"]
    return 0, N * C, N * C * o.elem(4) + N * 8, None  # dout, the keys


def c_embed_wpe(o, ctx):
    B, T, C = o.ints()[-3:]
    return 0, B * T * C, B * T * C * o.elem(1) + 2 * T * C * 4, None


def c_norm_forward(o, ctx):
    C = o.ints()[0]
    N = o.grid[0]
    return 0, 8 * N * C, 2 * N * C * o.elem() + 2 * C * o.elem() + 8 * N, None


def c_norm_backward(o, ctx):
    N, C = o.ints()[-2:]
    R = o.grid[0]
    return 0, 15 * N * C, 3 * N * C * o.elem() + 2 * R * C * 4 + 8 * N, None


def c_sumsq(o, ctx):
    n = o.ints()[0]
    ctx.setdefault("sumsq", []).append(n)
    return 0, 2 * n, 4 * n, None


def c_tiny(o, ctx):
    return 0, 0, 0, 0.0  # one block of bookkeeping: the launch gap alone


def c_sum_losses(o, ctx):
    return 0, o.ints()[0], 4 * o.ints()[0], None


def c_xent(o, ctx):
    V, ld = o.ints()[:2]
    N = o.grid[0]
    ctx["vocab"], ctx["vocab_ld"] = V, ld
    # logits read for the max and the sum, then read and written as the
    # gradient; the second read comes from the row cache in shared memory
    # (the launch's dynamic bytes) for the cached elements, from memory for
    # the rest; exp counted as a CUDA-core operation
    cached = o.smem // o.elem()
    if not 0 <= cached <= V:
        raise SystemExit(f"step_model.py: xent row cache of {cached} elements for V {V}")
    return 0, 8 * N * V, (3 * V - cached) * N * o.elem(), None


def c_adamw(o, ctx):
    # the unit's element count: its gradient-norm sum, in the same unit
    # order; the grid says how many elements it covers when not capped
    n = ctx["sumsq"][ctx.setdefault("adamw", 0)]
    ctx["adamw"] += 1
    threads = o.block[0]
    items = n // 8 if o.has_vec_path() and not o.scalar_path() else n  # 8 a thread on the 16-byte path
    if not (o.grid[0] == (items + threads - 1) // threads or o.grid[0] * threads < items):
        raise SystemExit(f"step_model.py: adamw launch of grid {o.grid[0]} does not cover "
                         f"the unit's {n} elements: the unit order changed")
    # p, m, v read and written (fp32), g read, the bf16 copy written
    return 0, 15 * n, n * (3 * 8 + 4 + 2), None


def attention(kernel):
    def f(o, ctx):
        i = o.ints()
        T, H, group = i[-3:]
        B = o.grid[2]
        # the narrowest row stride is that of out / dout / dq: H heads of hd
        hd = min(i[:-3]) // H
        tc, sc, alu, l2 = am.walk(kernel, B, T, H, H // group, hd)
        hbm = am.hbm_bytes(kernel, B, T, H, H // group, hd)
        comp = tc / (ATTN_EFF * am.PEAK_TC) + sc / am.SFU + alu / am.FP32
        if kernel == "fwd":
            ctx.setdefault("attn", []).append((B, T, H * hd))
        return tc, sc + alu, hbm, max(comp, hbm / HBM, l2 / am.L2)
    return f


def c_rowdot(o, ctx):
    i = o.ints()
    lddo, ldo, T, H, rows = i
    hd = ldo // H
    return 0, 2 * rows * hd, 2 * rows * hd * o.elem(1) + rows * 4, None


COSTS = {
    "gemm": c_gemm, "memset": c_memset, "memset2d": c_memset,
    "memcpy": c_memcpy, "memcpy2d": c_memcpy,
    "add_bias_kernel<T>": c_add_bias,
    "bias_partials_kernel<T, true>": c_bias_partials,
    "bias_partials_kernel<T, false>": c_bias_partials,
    "colsum_finish_kernel<0>": c_colsum_finish,
    "gelu_forward_kernel<T>": elementwise(1, 1, 15),
    "gelu_backward_kernel<T>": elementwise(2, 1, 20),
    "swiglu_forward_kernel<T, kVec>": rows_cols(2, 1, 10),
    "swiglu_backward_kernel<T, kVec>": rows_cols(3, 2, 15),
    "add_inplace_kernel<T, kVec>": elementwise(2, 1, 1),
    "rope_apply_kernel<T, kVec>": c_rope,
    "pack_bf16_kernel<kVec>": c_pack, "unpack_bf16_kernel<kVec>": c_pack,
    "round_bf16_kernel<kVec>": elementwise(1, 1, 2),
    "embed_forward_kernel<T, kVec>": c_embed_forward,
    "embed_sort_tile_kernel": c_embed_sort_tile,
    "embed_sort_span_kernel": c_embed_sort_span,
    "embed_sort_merge_kernel": c_embed_sort_merge,
    "embed_runs_count_kernel": c_embed_runs,
    "embed_runs_offsets_kernel": c_embed_runs_offsets,
    "embed_runs_list_kernel": c_embed_runs,
    "embed_backward_wte_kernel<T, kVec>": c_embed_wte,
    "embed_backward_wpe_kernel<T, kVec>": c_embed_wpe,
    "norm_forward_kernel<T, centered, kVec>": c_norm_forward,
    "norm_backward_kernel<T, centered, kCPT, kVec>": c_norm_backward,
    "sumsq_partials_kernel<kVec>": c_sumsq, "sumsq_finish_kernel": c_tiny,
    "add_double_kernel": c_tiny, "sum_losses_kernel": c_sum_losses,
    # the step's verdict and AdamW's gate (src/kernels/step_gate.h): a few
    # doubles in one thread
    "step_verdict_kernel": c_tiny, "step_gate_kernel": c_tiny,
    "xent_rows_kernel<T, kVec>": c_xent,
    "adamw_unit_kernel<kVec>": c_adamw,
    "attn_fwd_tc_kernel<HD>": attention("fwd"),
    "attn_bwd_dq_tc_kernel<HD>": attention("dq"),
    "attn_bwd_dkdv_tc_kernel<HD>": attention("dkdv"),
    "attn_bwd_rowdot_kernel<HD, S>": c_rowdot,
}


def price(o, ctx, times=1):
    """(tensor FLOPs, CUDA-core ops, bytes, seconds, bound) of one
    operation; `times` runs the cost `times` times first, so that stateful
    costs (AdamW after the norm sums) see every launch."""
    f = COSTS.get(o.name)
    if f is None:
        raise SystemExit(f"step_model.py: no cost formula for {o.name!r} "
                         f"(record line: {o.line}); add one to COSTS")
    for _ in range(times):
        tc, cu, by, t = f(o, ctx)
    times = {"tensor": tc / PEAK_TC, "CUDA core": cu / FP32, "memory": by / HBM}
    bound = max(times, key=times.get)
    if t is not None:
        bound = "attention model" if tc else "latency"
        if o.kind == "memcpy":
            bound = "host copy"
    else:
        t = times[bound]
    if t < 1e-6 and t is not None and bound not in ("host copy",):
        bound = "launch"
    return tc, cu, by, t + LAUNCH_S, bound


def head_vocab_dim(o, ctx):
    """The vocabulary dimension of an LM head product, else None: the
    products run over the stored rows (model.vocab_padding), from the true
    vocabulary V up to the logits' row stride (the cross-entropy's two
    arguments)."""
    V = ctx.get("vocab")
    if V is None:
        return None
    for x in o.args[:3]:
        d = int(x)
        if V <= d <= ctx.get("vocab_ld", V):
            return d
    return None


def group_of(o, ctx):
    n = o.name
    if o.kind == "gemm":
        return "LM head GEMMs" if head_vocab_dim(o, ctx) else "GEMMs"
    if n.startswith("attn_"):
        return "attention"
    if n.startswith("xent") or n in ("sum_losses_kernel", "add_double_kernel"):
        return "cross-entropy"
    if o.kind in ("memset", "memset2d", "memcpy", "memcpy2d"):
        return "memsets and copies"
    if n.startswith(("pack_bf16", "unpack_bf16", "round_bf16")):
        return "bf16 pack/unpack"
    if n.startswith(("norm_", "colsum", "bias_partials")):
        return "norms and bias gradients"
    if n.startswith(("adamw", "sumsq", "step_verdict", "step_gate")):
        return "optimizer and gradient norm"
    if n.startswith("embed"):
        return "embedding"
    return "elementwise"
