#!/bin/sh
# The distribution (`make distdir`: what `make dist` packs and what `make
# check-sanitize` builds and tests from) holds every file git tracks, but
# the repository's own plumbing (.ci/, .gitignore, m4/.gitkeep).  A file
# added to the tree and not to Makefile.am breaks the tarball's build or
# its tests, and the in-tree build never notices: src/kernels/cpu_math.h
# and tests/vocab_pad.sh were missing until `make check-sanitize` failed to
# compile.  Registered only in a git checkout (configure's GIT_CHECKOUT); a
# tarball's tree is the distribution itself.
. "$top_srcdir/tests/lib.sh"
require test -n "${GIT:-}"
require "$GIT" -C "$top_srcdir" rev-parse --git-dir

# missing TREE FILE...: the FILEs (paths from the top) absent from TREE,
# except the repository's own plumbing
missing() {
    _tree=$1
    shift
    for _f in "$@"; do
        case $_f in .ci/* | .gitignore | m4/.gitkeep) continue ;; esac
        [ -e "$_tree/$_f" ] || echo "$_f"
    done
}

tracked=$("$GIT" -C "$top_srcdir" ls-files)
n=$(printf '%s\n' "$tracked" | wc -l)
if ${MAKE:-make} -C "$top_builddir" distdir distdir="$TMP/tree" >"$TMP/distdir.log" 2>&1; then
    ok "make distdir"
    # shellcheck disable=SC2086 # the file names have no spaces (ls-files)
    gone=$(missing "$TMP/tree" $tracked)
    if [ -z "$gone" ]; then
        ok "the distribution holds all $n files git tracks (but .ci/, .gitignore, m4/.gitkeep)"
    else
        not_ok "files git tracks that the distribution lacks (add them to Makefile.am):"
        diag "$gone"
    fi
    check "self-check: a tracked file absent from the distribution is reported" \
        test "$(missing "$TMP/tree" tests/dist.sh tests/no-such-file.sh .ci/run)" = \
        tests/no-such-file.sh
else
    not_ok "make distdir"
    diag "$(tail -n 5 "$TMP/distdir.log")"
fi
