# Shared helpers for the shell tests: TAP output, a scratch directory, and
# the run-and-check idioms.  Sourced by tests/*.sh; automake's TAP driver
# counts every ok/not ok line.
set -u
: "${SHARDTRAIN:?SHARDTRAIN must point at the built binary (run through make check)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
tap_n=0
tap_fail=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/shardtrain-test.XXXXXX")
trap 'rm -rf "$TMP"; echo "1..$tap_n"' EXIT

# `make check-sanitize` sets ST_TEST_SIZE=small.  Under AddressSanitizer
# and UndefinedBehaviorSanitizer the training compute runs about 25 times
# slower (the demo's 300 steps would take two hours), so the tests whose
# length is training compute run fewer steps or a smaller model there, each
# saying what it shrinks; what they check stays the same.
small() { [ "${ST_TEST_SIZE:-}" = small ]; }

ok()     { tap_n=$((tap_n + 1)); echo "ok $tap_n - $*"; }
not_ok() { tap_n=$((tap_n + 1)); tap_fail=$((tap_fail + 1)); echo "not ok $tap_n - $*"; }
diag()   { printf '%s\n' "$@" | sed 's/^/# /'; }
# check DESCRIPTION COMMAND...: passes when the command succeeds.
check()  { local d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }

# Shakespeare text for tests: ../shared/data beside the checkout, else the
# copy the repository ships for the demo.
shakespeare_text() {
    for f in "$top_srcdir/../shared/data/tinyshakespeare.txt" \
             "$top_srcdir/etc/data/tinyshakespeare.txt"; do
        [ -f "$f" ] && { echo "$f"; return 0; }
    done
    return 1
}

# prepare_test_data [DIR]: the Shakespeare text as byte-level token shards
# DIR/data/sh_{train,val}_*.bin (DIR defaults to $TMP; prepare's messages in
# DIR/prep.err), counted as one check; no text at all ends the test.
prepare_test_data() {
    _dir=${1:-$TMP}
    _text=$(shakespeare_text) || { not_ok "no Shakespeare text found"; exit 1; }
    "$SHARDTRAIN" prepare "$_text" "$_dir/data/sh" >/dev/null 2>"$_dir/prep.err"
    check "prepare the test data" test -s "$_dir/data/sh_train_000000.bin"
}

# ranks NP SECONDS COMMAND...: COMMAND with a hang guard of SECONDS, alone
# when NP is 1, else as NP ranks under mpirun (oversubscribed: the tests
# run more ranks than this machine has cores).  SIGKILL follows 10 s after
# the guard's SIGTERM: a process stuck in a blocking call may not die of
# SIGTERM, and a guard that cannot end it is no guard.
ranks() {
    _np=$1 _limit=$2
    shift 2
    if [ "$_np" -eq 1 ]; then
        timeout -k 10 "$_limit" "$@"
    else
        timeout -k 10 "$_limit" mpirun --oversubscribe -np "$_np" "$@"
    fi
}

# stopped_pid PATTERN: the pid of a process whose command line matches
# PATTERN (pgrep -f) once it is stopped (SIGSTOP, as SHARDTRAIN_TEST_FAULT's
# "stop" does), waiting up to 120 s; nothing printed when none stopped.
stopped_pid() {
    _sp_i=0
    while [ $_sp_i -lt 1200 ]; do
        _sp_i=$((_sp_i + 1))
        sleep 0.1
        for _sp_pid in $(pgrep -f "$1"); do
            case "$(ps -o stat= -p "$_sp_pid")" in T*) echo "$_sp_pid"; return 0 ;; esac
        done
    done
}

# refused NAME PATTERN COMMAND...: one check that COMMAND (a single
# process, with a 60 s hang guard) exits 2 with exactly one error line,
# matching PATTERN.
refused() {
    _name=$1 _pat=$2 _err=$TMP/refused$tap_n.err
    shift 2
    ranks 1 60 "$@" >/dev/null 2>"$_err"
    _st=$?
    if [ "$_st" -eq 2 ] && [ "$(grep -c '^shardtrain: error:' "$_err")" -eq 1 ] &&
        grep '^shardtrain: error:' "$_err" | grep -q -- "$_pat"; then
        ok "$_name"
    else
        not_ok "$_name (exit $_st)"; diag "$(cut -c1-300 "$_err")"
    fi
}

# wait_logged_step LOG_DIR N: wait (2 minutes at most) until a run in the
# background has logged step N to LOG_DIR/metrics.jsonl, so that a signal
# sent next lands mid-run.
wait_logged_step() {
    _i=0
    until [ -f "$1/metrics.jsonl" ] && grep -q "\"step\":$2," "$1/metrics.jsonl"; do
        _i=$((_i + 1))
        [ $_i -gt 1200 ] && return 1
        sleep 0.1
    done
}

# write_base_ini FILE [SECTION.KEY=VALUE...]: the tiny configuration the
# training tests start from: gpt2 of preset tiny on 32-token sequences, the
# shards of prepare_test_data, global batch 8 in micro-batches of 4, 4
# steps, seed 5, lr 3e-3 after 1 warmup step, metrics every step.  Scripts
# vary it with -s SECTION.KEY=VALUE on their command lines; a configuration
# that must carry its changes itself (a job script takes a config path
# alone) gives them here: each replaces its key in the file, or is added to
# its section.  A bare SECTION.KEY leaves the key out of the file (some
# defaults, global_batch's, follow other keys: -s cannot restore them).
write_base_ini() {
    _ini=$1
    shift
    awk '
    BEGIN {
        for (i = 1; i < ARGC; i++) {
            dot = index(ARGV[i], "."); eq = index(ARGV[i], "=")
            s = substr(ARGV[i], 1, dot - 1)
            if (eq == 0) { drop[s, substr(ARGV[i], dot + 1)] = 1; continue }
            k = substr(ARGV[i], dot + 1, eq - dot - 1)
            val[s, k] = substr(ARGV[i], eq + 1)
            if (!(s in keys)) order[++n] = s
            keys[s] = keys[s] " " k
        }
        ARGC = 1
    }
    function add(s,   m, j, list) {   # the keys of section s not in the base
        m = split(keys[s], list, " ")
        for (j = 1; j <= m; j++)
            if (!((s, list[j]) in done)) { print list[j] " = " val[s, list[j]]; done[s, list[j]] = 1 }
    }
    /^\[/ { if (sec != "") add(sec); sec = substr($0, 2, length($0) - 2); had[sec] = 1; print; next }
    (sec, $1) in drop { next }
    (sec, $1) in val { print $1 " = " val[sec, $1]; done[sec, $1] = 1; next }
    { print }
    END { add(sec); for (j = 1; j <= n; j++) if (!(order[j] in had)) { print "[" order[j] "]"; add(order[j]) } }
    ' "$@" >"$_ini" <<EOF_BASE
[model]
arch = gpt2
preset = tiny
seq_len = 32
[data]
train = $TMP/data/sh_train_*.bin
[train]
micro_batch = 4
global_batch = 8
steps = 4
seed = 5
[optim]
lr = 3e-3
warmup_steps = 1
[log]
every = 1
EOF_BASE
}

# compare_runs ARGS...: tests/compare_runs.py (two runs' losses and final
# weights; see its options)
compare_runs() { python3 "$top_srcdir/tests/compare_runs.py" "$@"; }

# same_tensors A B: safetensors files A and B hold the same tensor names,
# dtypes, shapes and bytes (headers may differ in order and metadata).
same_tensors() { compare_runs --exact --only weights "$1" "$2"; }

# build_emulated_shardtrain DEST WHAT: link shardtrain with the CUDA code
# under the host emulation (tests/gpu/emu/build_shardtrain.sh) into DEST;
# one TAP line WHAT, and the test stops when the build fails.
build_emulated_shardtrain() {
    if nice -n 10 sh "$top_srcdir/tests/gpu/emu/build_shardtrain.sh" "$1" "$top_srcdir" \
            "$top_builddir" >"$TMP/build.log" 2>&1; then
        ok "$2"
    else
        not_ok "$2"
        diag "$(tail -n 20 "$TMP/build.log")"
        exit 1
    fi
}

# In CI a missing prerequisite is a failure, never a skip.
require() {
    if ! "$@" >/dev/null 2>&1; then
        not_ok "prerequisite missing: $*"
        exit 1
    fi
}
