#!/bin/sh
# The tensor-core attention of cuda/attention_tc.cu, on the CPU, under the
# exact models of mma.sync, ldmatrix and cp.async in tests/gpu/emu/
# tensor_core.h (tests/gpu/emu/run_attention_tc.sh builds both programs):
#   - tests/gpu/test_tensor_core: the instruction models against the PTX
#     ISA's fragment tables, and three deliberately permuted fragment
#     layouts that must give wrong products;
#   - tests/gpu/test_attention_tc: forward (out, log-sum-exp) and backward
#     (dq, dk, dv) against the CPU backend for T in {1, 7, 64, 65, 129,
#     1024}, head widths 64 and 128, n_head / n_kv_head 1, 2 and 4, batch
#     1 and 3, within the bf16 tolerances (2e-2; lse 1e-4), padding left
#     alone, the backward bit-identical when run twice, and the launch
#     counts showing which kernels ran;
#   - the quick cases (T <= 129) with each block's threads resumed last to
#     first (ST_EMU_REVERSE=1) give the same bits: no kernel depends on
#     thread order, so no race hides behind the emulation's scheduling;
#   - tests/gpu/test_cuda_attention, make check-gpu's attention program
#     (tests/gpu/emu/run.sh): cuda/attention.h's entry points, fp32 and
#     bf16, against the CPU backend, their refusals, and the backward's
#     bits when run twice.
# Each program's TAP lines are repeated here.  About eight minutes on two
# cores.  Registered only where configure found the CUDA toolkit.
. "$top_srcdir/tests/lib.sh"
require command -v g++
lib="$top_builddir/libshardtrain.a"
require test -f "$lib"
. "$top_srcdir/tests/gpu/emu/link_env.sh"
export OMP_NUM_THREADS=1

if sh "$top_srcdir/tests/gpu/emu/run_attention_tc.sh" "$TMP/emu" "$top_srcdir" "$lib" \
        >"$TMP/build.log" 2>&1; then
    ok "the tensor-core tests build for the emulation"
else
    not_ok "the tensor-core tests build for the emulation"
    diag "$(tail -n 20 "$TMP/build.log")"
    exit 1
fi

# relay PROGRAM NAME: run it, repeat its TAP lines, fail if it failed or
# printed no plan
relay() {
    "$@" >"$TMP/run.out" 2>"$TMP/run.err"
    rc=$?
    while IFS= read -r line; do
        case $line in
            "not ok "*) not_ok "${line#not ok * - }" ;;
            "ok "*) ok "${line#ok * - }" ;;
        esac
    done <"$TMP/run.out"
    if [ $rc -ne 0 ] || ! grep -q '^1\.\.[1-9]' "$TMP/run.out"; then
        not_ok "$(basename "$1") exits 0 with a plan (exit $rc)"
        diag "$(tail -n 5 "$TMP/run.err")"
    fi
}

relay "$TMP/emu/test_tensor_core"
relay nice -n 5 "$TMP/emu/test_attention_tc"
relay sh "$top_srcdir/tests/gpu/emu/run.sh" "$top_srcdir" "$lib"

ST_ATTN_TC_QUICK=1 "$TMP/emu/test_attention_tc" >"$TMP/fwd.out" 2>&1 &
ST_ATTN_TC_QUICK=1 ST_EMU_REVERSE=1 "$TMP/emu/test_attention_tc" >"$TMP/rev.out" 2>&1
wait
d1=$(sed -n 's/^# digest //p' "$TMP/fwd.out")
d2=$(sed -n 's/^# digest //p' "$TMP/rev.out")
if [ -n "$d1" ] && [ "$d1" = "$d2" ] && ! grep -q '^not ok' "$TMP/rev.out"; then
    ok "threads resumed in reverse order give the same bits (digest $d1)"
else
    not_ok "threads resumed in reverse order give the same bits ($d1 vs $d2)"
fi
exit $((tap_fail > 0))
