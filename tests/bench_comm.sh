#!/bin/sh
# `shardtrain bench-comm` on 1, 2 and 4 ranks (mpirun --oversubscribe on 2
# cores): every collective and size is reported, every result is exact
# (wrong = 0), and the printed bandwidths agree with the printed bytes and
# times and with nccl-tests' bus-bandwidth factors to within the printed
# digits, in the out-of-place columns for all_gather and reduce_scatter and
# the in-place ones for all_reduce (the other placement N/A), and the closing
# "# Avg bus bandwidth" lines are their means; --group picks the configured
# group; sizes below one float per rank, which all round up to it, are
# measured and printed once; bad arguments are one error line and exit
# status 2 before any MPI start-up.
. "$top_srcdir/tests/lib.sh"
require command -v mpirun
require command -v python3
export OMP_NUM_THREADS=1   # 4 ranks on 2 cores: no thread oversubscription on top

# CPU, hence the mpi backend, even where a GPU is visible: NCCL refuses
# several ranks on one device, and these runs oversubscribe one machine.
printf '[model]\npreset = tiny\n[train]\ndevice = cpu\n' >"$TMP/bench.ini"
SIZES="--min-bytes 1024 --max-bytes 65536 --iters 3 --warmup 1"

# bench NAME NP [ARGS...]: bench-comm on NP ranks (1 = no launcher)
bench() {
    name=$1 np=$2
    shift 2
    ranks "$np" 120 "$SHARDTRAIN" bench-comm "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
}

# verify NAME N: the table of run NAME is complete and consistent for a
# group of N ranks.  Prints what is wrong and fails.
verify() {
    python3 - "$TMP/$1.out" "$2" <<'EOF'
import re, sys
path, n = sys.argv[1], int(sys.argv[2])
lines = open(path).read().splitlines()
bad = []
head = [l for l in lines if l.startswith("# shardtrain bench-comm:")]
m = re.search(r"ranks (\d+)", head[0]) if head else None
if not m or int(m.group(1)) != n:
    bad.append("header does not say ranks %d: %r" % (n, head[:1]))
if not any("2(n-1)/n" in l for l in lines if l.startswith("#")):
    bad.append("header lacks the busbw formulas")
rows = [l.split() for l in lines if l.strip() and not l.startswith("#")]
colls = ["all_gather", "reduce_scatter", "all_reduce"]
want = [(c, 1024 << k) for k in range(7) for c in colls]
got = []
def half_ulp(s):  # half a unit in the last printed digit
    return 0.5 * 10 ** -(len(s.split(".")[1]) if "." in s else 0)
if not any(re.match(r"#\s+out-of-place\s+in-place\s*$", l) for l in lines):
    bad.append("no 'out-of-place  in-place' heading")
measured = {}  # collective -> its measured columns (out-of-place or in-place)
for r in rows:
    if len(r) != 11:
        bad.append("malformed row %r" % r)
        continue
    coll, nbytes, count = r[0], int(r[1]), int(r[2])
    # the engine's placement: all_reduce in place, the others out of place;
    # the other placement is not run, so its four columns are N/A
    col, na = (r[7:11], r[3:7]) if coll == "all_reduce" else (r[3:7], r[7:11])
    if na != ["N/A"] * 4:
        bad.append("%s %d: the unmeasured placement is %r, not N/A" % (coll, nbytes, na))
    measured.setdefault(coll, []).append(col)
    t, a, b, wrong = float(col[0]), float(col[1]), float(col[2]), int(col[3])
    ht, ha, hb = half_ulp(col[0]), half_ulp(col[1]), half_ulp(col[2])
    got.append((coll, nbytes))
    if count * 4 != nbytes:
        bad.append("%s %d: count %d is not bytes/4" % (coll, nbytes, count))
    if wrong != 0:
        bad.append("%s %d: %d wrong" % (coll, nbytes, wrong))
    # algbw [GB/s] = bytes / (time_us * 1e3), time known to +-ht
    lo = nbytes / ((t + ht) * 1e3)
    hi = nbytes / ((t - ht) * 1e3) if t - ht > 0 else float("inf")
    if not (lo - ha <= a <= hi + ha):
        bad.append("%s %d: algbw %s is not bytes/time (%.4g..%.4g)" % (coll, nbytes, col[1], lo, hi))
    f = 2.0 * (n - 1) / n if coll == "all_reduce" else (n - 1) / n
    if not ((a - ha) * f - hb <= b <= (a + ha) * f + hb):
        bad.append("%s %d: busbw %s is not algbw * %.3f" % (coll, nbytes, col[2], f))
if got != want:
    bad.append("rows %r, expected %r" % (got, want))
# nccl-tests' footer: the wrong-value total, then per collective the mean of
# its rows' busbw (each printed to 2 decimals, so the mean is known to 0.005)
foot = [l for l in lines if l.startswith("# Wrong values") or l.startswith("# Avg bus bandwidth")]
if not foot or not re.match(r"# Wrong values {9}: 0 OK$", foot[0]):
    bad.append("no '# Wrong values : 0 OK' line: %r" % foot[:1])
for c in colls:
    mean = [float(col[2]) for col in measured.get(c, [])]
    line = [l for l in foot if l.endswith(" " + c) and l.startswith("# Avg bus bandwidth    : ")]
    if not line or not mean:
        bad.append("no '# Avg bus bandwidth' line for %s" % c)
        continue
    avg = float(line[0].split(":")[1].split()[0])
    if abs(avg - sum(mean) / len(mean)) > 0.005 + 1e-9:
        bad.append("%s: Avg bus bandwidth %g is not the mean of its rows (%g)" % (c, avg, sum(mean) / len(mean)))
for x in bad:
    print(x)
sys.exit(1 if bad else 0)
EOF
}

for np in 1 2 4; do
    # shellcheck disable=SC2086
    bench "np$np" "$np" $SIZES "$TMP/bench.ini"
    st=$?
    if [ "$st" -eq 0 ] && verify "np$np" "$np" >"$TMP/np$np.why" 2>&1; then
        ok "bench-comm on $np rank(s): all sizes, exact results, consistent bandwidths"
    else
        not_ok "bench-comm on $np rank(s) (exit $st)"
        diag "$(cat "$TMP/np$np.why" "$TMP/np$np.err" 2>/dev/null)"
    fi
done

# shellcheck disable=SC2086
bench hybrid 4 -s parallel.strategy=hybrid_shard -s parallel.shard_size=2 --group shard \
    $SIZES "$TMP/bench.ini"
st=$?
if [ "$st" -eq 0 ] && grep -q '^# shardtrain bench-comm:.* group shard, ranks 2 ' "$TMP/hybrid.out" &&
   verify hybrid 2 >"$TMP/hybrid.why" 2>&1; then
    ok "--group shard under hybrid_shard, shard_size 2, on 4 ranks is a group of 2"
else
    not_ok "--group shard under hybrid_shard (exit $st)"
    diag "$(head -n 1 "$TMP/hybrid.out" 2>/dev/null)" "$(cat "$TMP/hybrid.why" "$TMP/hybrid.err" 2>/dev/null)"
fi

# Below one float per rank every size rounds up to that floor: the same
# call, measured and printed once.  rows NAME: run NAME's "collective
# bytes;" pairs in order.
rows() { awk '!/^#/ && NF { printf "%s %s;", $1, $2 }' "$TMP/$1.out"; }
for case in "1 7 1|all_gather 4;reduce_scatter 4;all_reduce 4;" \
    "1 16 2|all_gather 8;reduce_scatter 8;all_reduce 4;all_reduce 8;all_gather 16;reduce_scatter 16;all_reduce 16;"; do
    want=${case#*|}
    # shellcheck disable=SC2086 # the words are MIN MAX NP
    set -- ${case%%|*}
    bench "tiny$3" "$3" --min-bytes "$1" --max-bytes "$2" --iters 1 --warmup 0 "$TMP/bench.ini"
    st=$?
    if [ "$st" -eq 0 ] && [ "$(rows "tiny$3")" = "$want" ] &&
       [ "$(grep -c '^# Avg bus bandwidth' "$TMP/tiny$3.out")" -eq 3 ]; then
        ok "--min-bytes $1 --max-bytes $2 on $3 rank(s): each rounded size once"
    else
        not_ok "--min-bytes $1 --max-bytes $2 on $3 rank(s) (exit $st)"
        diag "want: $want" "got:  $(rows "tiny$3")" "$(cat "$TMP/tiny$3.err")"
    fi
done

# refused NAME ARGNO ARGS...: exit 2, nothing on stdout, exactly one error
# line at command line:ARGNO (the CLI counts "shardtrain" as 0).
refused() {
    name=$1 argno=$2
    shift 2
    timeout 60 "$SHARDTRAIN" bench-comm "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    st=$?
    if [ "$st" -eq 2 ] && [ ! -s "$TMP/$name.out" ] && [ "$(wc -l <"$TMP/$name.err")" -eq 1 ] &&
       grep -q "^shardtrain: error: command line:$argno: " "$TMP/$name.err"; then
        ok "refuses $name"
    else
        not_ok "refuses $name (exit $st)"
        diag "$(cat "$TMP/$name.err")"
    fi
}
refused "--min-bytes above --max-bytes" 3 --min-bytes 4096 --max-bytes 1024 "$TMP/bench.ini"
refused "--iters 0" 3 --iters 0 "$TMP/bench.ini"
refused "--group nope" 3 --group nope "$TMP/bench.ini"
refused "non-numeric --max-bytes" 3 --max-bytes 1k "$TMP/bench.ini"
refused "--min-bytes 0" 3 --min-bytes 0 "$TMP/bench.ini"
refused "a missing CONFIG" 2
