#!/bin/sh
# What can be said of the tensor-core attention's speed without a GPU:
# nvcc compiles cuda/attention_tc.cu for sm_80 and sm_90 and
#   - the PTX of every bf16 attention kernel (forward, dQ, dK/dV) holds
#     mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, ldmatrix and
#     cp.async (a self-check shows the same test fails on the CUDA-core
#     kernels of cuda/attention.cu);
#   - ptxas (-v, -warn-spills) reports no spill for any kernel, and the
#     registers and shared memory it reports are printed as diagnostics
#     (docs/gpu.md's table quotes them);
#   - every kernel of cuda/ fits the register file at the largest block it
#     may be launched with: registers (ptxas -v, rounded up to 8 as sm_90
#     allocates them) times that block's threads (rounded to whole warps)
#     at most 65,536, where the block is the kernel's __launch_bounds__
#     (.maxntid in its PTX) or else 1024.  A launch that breaks this fails
#     on the device ("too many resources requested for launch") and the
#     host emulation cannot see registers; a self-check shows the test fails
#     on a 107-register kernel without bounds and passes it with bounds of
#     256 (tests/gpu/launch_regs_selfcheck.cu).
# Registered only where configure found the CUDA toolkit.
. "$top_srcdir/tests/lib.sh"
NVCC=$(sed -n 's/^NVCC = //p' "$top_builddir/Makefile")
require test -x "$NVCC"
inc="-I$top_srcdir/cuda -I$top_srcdir/src -I$top_builddir"
KERNELS="attn_fwd_tc_kernel attn_bwd_dq_tc_kernel attn_bwd_dkdv_tc_kernel"

# entries FILE: "name instructions" per .entry of a PTX file, the
# instructions of interest that its body uses
entries() {
    awk '/^\.visible \.entry|^\.entry/ { if (name) print name, seen; name = $NF; sub(/\(.*/, "", name); seen = "" }
         /mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32/ { if (seen !~ /mma/) seen = seen " mma" }
         /ldmatrix\.sync\.aligned/ { if (seen !~ /ldmatrix/) seen = seen " ldmatrix" }
         /cp\.async\.cg\.shared\.global/ { if (seen !~ /cp.async/) seen = seen " cp.async" }
         END { if (name) print name, seen }' "$1"
}
# tensor_core_kernels FILE KERNEL...: each named kernel has an entry (one
# per head width) and every such entry uses all three instructions
tensor_core_kernels() {
    f=$1
    shift
    for k in "$@"; do
        n=$(entries "$f" | grep -c "$k")
        full=$(entries "$f" | grep "$k" | grep " mma" | grep " ldmatrix" | grep -c " cp.async")
        [ "$n" -ge 2 ] && [ "$full" -eq "$n" ] || return 1
    done
}

for sm in 80 90; do
    if "$NVCC" -std=c++17 -O2 -arch=sm_$sm -ptx $inc "$top_srcdir/cuda/attention_tc.cu" \
            -o "$TMP/tc_$sm.ptx" 2>"$TMP/ptx.err"; then
        check "sm_$sm: every bf16 attention kernel's PTX uses mma.sync m16n8k16, ldmatrix and cp.async" \
            tensor_core_kernels "$TMP/tc_$sm.ptx" $KERNELS
    else
        not_ok "sm_$sm: PTX of cuda/attention_tc.cu"
        diag "$(tail -n 5 "$TMP/ptx.err")"
    fi
    if "$NVCC" -std=c++17 -O2 -arch=sm_$sm -cubin -Xptxas -v,-warn-spills $inc \
            "$top_srcdir/cuda/attention_tc.cu" -o "$TMP/tc_$sm.cubin" >"$TMP/ptxas_$sm.log" 2>&1; then
        funcs=$(grep -c 'bytes spill stores' "$TMP/ptxas_$sm.log")
        clean=$(grep -c ' 0 bytes spill stores, 0 bytes spill loads' "$TMP/ptxas_$sm.log")
        if [ "$funcs" -eq 6 ] && [ "$clean" -eq 6 ] && ! grep -qi 'spilled' "$TMP/ptxas_$sm.log"; then
            ok "sm_$sm: ptxas reports no spill in the 6 attention kernels"
        else
            not_ok "sm_$sm: ptxas reports no spill in the 6 attention kernels ($clean of $funcs clean)"
        fi
        # one diagnostic line per kernel: name, registers, stack
        awk '/Function properties for/ { n = $NF; sub(/.*attn_/, "attn_", n); sub(/ILi/, " hd ", n); sub(/EE.*/, "", n) }
             /Used [0-9]+ registers/ { print "sm_'$sm' " n ": " $0 }' "$TMP/ptxas_$sm.log" |
            sed 's/ptxas info *: //' | while IFS= read -r l; do diag "$l"; done
    else
        not_ok "sm_$sm: ptxas on cuda/attention_tc.cu"
        diag "$(tail -n 5 "$TMP/ptxas_$sm.log")"
    fi
done

# reg_fit DIR: DIR holds, per compiled file, NAME.log (ptxas -v) and the
# kept NAME.ptx; prints "bad KERNEL regs THREADS" per kernel whose
# registers do not fit its largest block, then "fit N BOUNDED" (kernels
# checked, of them with __launch_bounds__).
reg_fit() {
    python3 - "$1" <<'EOF_PY'
import glob, os, re, sys
n = bounded = 0
for log in sorted(glob.glob(os.path.join(sys.argv[1], "*.log"))):
    ptx = open(log[:-4] + ".ptx").read()
    regs = {}
    name = None
    for line in open(log):
        m = re.search(r"Compiling entry function '(\S+)' for 'sm_90'", line)
        if m:
            name = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            regs[name] = int(m.group(1))
            name = None
    for k, r in regs.items():
        m = re.search(r"\.entry " + re.escape(k) + r"\((.*?)\{", ptx, re.S)
        if not m:
            print("bad", k, "no .entry in the PTX")
            continue
        b = re.search(r"\.maxntid (\d+), (\d+), (\d+)", m.group(1))
        threads = int(b.group(1)) * int(b.group(2)) * int(b.group(3)) if b else 1024
        n += 1
        bounded += bool(b)
        if -(-r // 8) * 8 * -(-threads // 32) * 32 > 65536:
            print("bad", k, r, threads)
print("fit", n, bounded)
EOF_PY
}
# compile_regs OUTDIR FILE...: sm_90 cubins with ptxas -v and the PTX kept
compile_regs() {
    d=$1
    shift
    mkdir -p "$d"
    for f in "$@"; do
        b=$(basename "$f" .cu)
        mkdir -p "$d/keep_$b"
        "$NVCC" -std=c++17 -O2 -arch=sm_90 -cubin -keep -keep-dir "$d/keep_$b" -Xptxas -v $inc \
            "$f" -o "$d/keep_$b/$b.cubin" >"$d/$b.log" 2>&1 || return 1
        cp "$d/keep_$b/$b.ptx" "$d/$b.ptx"
    done
}
cuda_files=$(grep -l '__global__' "$top_srcdir"/cuda/*.cu)
if compile_regs "$TMP/regs" $cuda_files; then
    out=$(reg_fit "$TMP/regs")
    nk=$(printf '%s\n' "$out" | sed -n 's/^fit \([0-9]*\) .*/\1/p')
    nb=$(printf '%s\n' "$out" | sed -n 's/^fit [0-9]* \([0-9]*\)/\1/p')
    if [ "${nk:-0}" -gt 0 ] && ! printf '%s\n' "$out" | grep -q '^bad'; then
        ok "sm_90: the registers of all $nk kernels of cuda/ fit their largest block ($nb with __launch_bounds__, the rest at 1024 threads)"
    else
        not_ok "sm_90: the registers of every kernel of cuda/ fit its largest block"
        diag "$(printf '%s\n' "$out" | c++filt | head -n 5)"
    fi
else
    not_ok "sm_90: ptxas -v on the kernels of cuda/"
fi
if compile_regs "$TMP/selfcheck" "$top_srcdir/tests/gpu/launch_regs_selfcheck.cu"; then
    out=$(reg_fit "$TMP/selfcheck")
    if printf '%s\n' "$out" | grep -q '^bad _Z16unbounded_kernel' &&
       ! printf '%s\n' "$out" | grep -q '^bad _Z14bounded_kernel' &&
       printf '%s\n' "$out" | grep -q '^fit 2 1$'; then
        ok "self-check: a 107-register kernel fails the register test without __launch_bounds__, passes with 256"
    else
        not_ok "self-check: the register test on tests/gpu/launch_regs_selfcheck.cu"
        diag "$out"
    fi
else
    not_ok "self-check: ptxas -v on tests/gpu/launch_regs_selfcheck.cu"
fi

# Self-check: the CUDA-core kernels' PTX does not pass the test above.
if "$NVCC" -std=c++17 -O2 -arch=sm_80 -ptx $inc "$top_srcdir/cuda/attention.cu" \
        -o "$TMP/cc.ptx" 2>/dev/null &&
   ! tensor_core_kernels "$TMP/cc.ptx" attn_fwd_kernel attn_bwd_dq_kernel attn_bwd_dkdv_kernel &&
   [ "$(entries "$TMP/cc.ptx" | grep -c attn_fwd_kernel)" -ge 2 ]; then
    ok "self-check: the CUDA-core kernels of attention.cu fail the tensor-core test"
else
    not_ok "self-check: the CUDA-core kernels of attention.cu fail the tensor-core test"
fi
exit $((tap_fail > 0))
