# Sourced by the emulation's tests (tests/cuda_*emu.sh, cuda_gemm_check.sh):
# sets and exports what emu.sh and the run_*.sh scripts add when they link
# an emulated program against $top_builddir's libshardtrain.a.  The
# libraries are the ones configure found for the build (read from its
# Makefile), not pkg-config's guess, so a program links the way shardtrain
# does:
#   EMU_LIBS        BLAS (the CPU reference), inih and jansson (the model
#                   set-up reaches the config layer), xxhash and PCRE2;
#   EMU_LINK_FLAGS  a sanitizer build's flags (SAN_CFLAGS), without which
#                   an instrumented library does not link.
emu_make_var() { sed -n "s/^$1 = //p" "$top_builddir/Makefile"; }
EMU_LIBS="$(emu_make_var BLAS_LIBS) $(emu_make_var INIH_LIBS) $(emu_make_var JANSSON_LIBS)"
EMU_LIBS="$EMU_LIBS $(emu_make_var XXHASH_LIBS) $(emu_make_var PCRE2_LIBS)"
EMU_LINK_FLAGS=$(emu_make_var SAN_CFLAGS)
export EMU_LIBS EMU_LINK_FLAGS
