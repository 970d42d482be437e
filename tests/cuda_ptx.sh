#!/bin/sh
# What can be said of the tensor-core attention's speed without a GPU:
# nvcc compiles cuda/attention_tc.cu for sm_80 and sm_90 and
#   - the PTX of every bf16 attention kernel (forward, dQ, dK/dV) holds
#     mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, ldmatrix and
#     cp.async (a self-check shows the same test fails on the CUDA-core
#     kernels of cuda/attention.cu);
#   - ptxas (-v, -warn-spills) reports no spill for any kernel, and the
#     registers and shared memory it reports are printed as diagnostics
#     (docs/gpu.md's table quotes them).
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
