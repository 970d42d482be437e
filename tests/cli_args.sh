#!/bin/sh
# The command line of every subcommand, as shardtrain(1) documents it: a
# bad argument is refused with exit status 2, nothing on stdout and exactly
# one line
#     shardtrain: error: command line:N: what is wrong; hint
# where N is the argument's position ("shardtrain" is 0, the subcommand 1);
# good command lines - options before or after CONFIG, -s and --set, an
# option value that starts with '-' - are taken.  Every message below is
# the whole line, so a change of wording or of the position it names shows
# here.  Arguments are parsed before MPI starts or a file is read, so none
# of the refusals starts a run.  Every positional is a path, as are the
# values of -o, --weights, --tokenizer and --base: an empty one is refused.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
printf '[model]\npreset = tiny\nseq_len = 32\n[data]\ntrain = none_*.bin\n' >c.ini
printf '[train]\nmicro_batch = 2\nsteps = 2\n' >>c.ini
seq 1 1000 >in.txt

H='; hint: see shardtrain --help'

# refused N MESSAGE ARGS...: shardtrain ARGS prints only the error line
# "shardtrain: error: command line:N: MESSAGE" and exits 2.
refused() {
    n=$1
    shift
    refused_at "command line:$n" "$@"
}

# refused_at WHERE MESSAGE ARGS...: the same with the location WHERE
# (FILE:LINE for a configuration line).
refused_at() {
    want="shardtrain: error: $1: $2"
    shift 2
    "$SHARDTRAIN" "$@" >stdout 2>stderr </dev/null
    st=$?
    what="refuses: $(printf '%s' "$*" | cut -c 1-100)"
    if [ "$st" -eq 2 ] && [ ! -s stdout ] && [ "$(wc -l <stderr)" -eq 1 ] &&
       [ "$(cat stderr)" = "$want" ]; then
        ok "$what"
    else
        not_ok "$what"
        diag "exit status $st (want 2)" "want: $want" "got:" "$(cat stderr)"
        [ -s stdout ] && diag "stdout:" "$(head -n 5 stdout)"
    fi
}

# taken PATTERN ARGS...: shardtrain ARGS exits 0 with a stdout line
# matching PATTERN (a basic regular expression).
taken() {
    pattern=$1
    shift
    "$SHARDTRAIN" "$@" >stdout 2>stderr </dev/null
    st=$?
    if [ "$st" -eq 0 ] && grep -q -- "$pattern" stdout; then
        ok "takes: $*"
    else
        not_ok "takes: $*"
        diag "exit status $st (want 0), stdout line wanted: $pattern" "$(head -n 5 stderr)"
    fi
}

# ---- the subcommand ------------------------------------------------------
"$SHARDTRAIN" >stdout 2>stderr </dev/null
st=$?
if [ "$st" -eq 2 ] && [ ! -s stdout ] && head -n 1 stderr | grep -q '^usage: shardtrain train' &&
   [ "$(tail -n 1 stderr)" = "shardtrain: error: command line:1: missing subcommand$H" ]; then
    ok "no subcommand: the usage and an error on stderr, exit 2"
else
    not_ok "no subcommand (exit $st)"
    diag "$(cat stderr)"
fi
for help in --help -h help; do
    taken '^usage: shardtrain train \[-s SECTION.KEY=VALUE\]\.\.\. CONFIG$' "$help"
done
taken '^shardtrain [0-9][0-9.]*$' --version
taken '^shardtrain [0-9][0-9.]*$' version
refused 1 "unknown subcommand 'bogus'$H" bogus
refused 1 "unknown subcommand '--bogus'$H" --bogus

# ---- train, check: [-s SECTION.KEY=VALUE]... CONFIG ----------------------
refused 2 "missing CONFIG$H" train
refused 3 "unexpected argument 'extra'$H" train c.ini extra
refused 2 "unknown option '--bogus'$H" train --bogus c.ini
refused 2 "unknown option '--weights'$H" train --weights w c.ini
refused 2 "-s needs SECTION.KEY=VALUE$H" train -s
refused 3 "-s needs SECTION.KEY=VALUE$H" train c.ini -s
refused 2 "--set needs SECTION.KEY=VALUE$H" train --set
refused 3 "invalid integer 'x' for train.steps" train -s train.steps=x c.ini
refused 3 "unknown key 'stepz' in [train]; did you mean 'steps'?" train -s train.stepz=1 c.ini
refused 3 "train.steps = 0 is out of range; must be [1, 1000000000]" train --set train.steps=0 c.ini
refused 2 "missing CONFIG$H" check
refused 2 "-s needs SECTION.KEY=VALUE$H" check -s
refused 3 "unexpected argument 'c.ini'$H" check c.ini c.ini
refused 3 "unexpected argument 'c.ini'$H" check - c.ini
refused 3 "invalid override 'foo'; hint: write -s section.key=value" check -s foo c.ini
refused 5 "invalid integer 'x' for train.steps" check -s train.seed=1 -s train.steps=x c.ini
refused 2 "unknown option '--bogus'$H" check --bogus
refused 2 "unknown option '-x'$H" check -x c.ini
refused 2 "unknown option '--'$H" check -- c.ini
refused 2 "unknown option '--help'$H" check --help
# An argument's message is kept in 512 bytes before its hint is added, so
# that the hint shows however long the argument: "unknown option '" (16
# bytes), the option and "'" fit up to a 494-byte option.  A longer one is
# cut with "..." before the hint, never inside a UTF-8 character.
xs() { printf 'x%.0s' $(seq 1 "$1"); }
refused 2 "unknown option '--$(xs 492)'$H" check "--$(xs 492)" c.ini
refused 2 "unknown option '--$(xs 490)...$H" check "--$(xs 493)" c.ini
refused 2 "unknown option '--$(xs 490)...$H" check "--$(xs 5000)" c.ini
refused 2 "unknown option '--$(xs 489)...$H" check "--$(xs 489)$(printf '\303\251')$(xs 9)" c.ini
refused 3 "--set needs SECTION.KEY=VALUE$H" check c.ini --set
taken '^steps = 2 ' check c.ini
taken '^steps = 7 *; from command line$' check -s train.steps=7 c.ini
taken '^steps = 7 *; from command line$' check c.ini -s train.steps=7
taken '^steps = 7 *; from command line$' check --set train.steps=7 c.ini
# The 257th override is one too many; its -s is argument 2 + 2 * 256.
set -- check
i=0
while [ "$i" -le 256 ]; do set -- "$@" -s train.steps=1; i=$((i + 1)); done
refused 514 "more than 256 overrides$H" "$@" c.ini

# ---- sample: the values are checked after CONFIG is found, last one only -
refused 2 "missing CONFIG$H" sample
refused 4 "missing CONFIG$H" sample --tokens x
refused 5 "unexpected argument 'extra'$H" sample --tokens x c.ini extra
refused 2 "--tokens needs a value$H" sample --tokens
refused 3 "--tokens needs a value$H" sample c.ini --tokens
refused 2 "--weights needs a value$H" sample --weights
refused 2 "--prompt needs a value$H" sample --prompt
refused 2 "unknown option '--bogus'$H" sample --bogus 1 c.ini
refused 2 "-s needs SECTION.KEY=VALUE$H" sample -s
for v in x -1 1000001 2x ''; do
    refused 3 "--tokens '$v' is not an integer in [0, 1000000]$H" sample --tokens "$v" c.ini
done
refused 5 "--tokens 'x' is not an integer in [0, 1000000]$H" sample --tokens 5 --tokens x c.ini
for v in x 100.5 -0.1 nan; do
    refused 3 "--temperature '$v' is not a number in [0, 100]$H" sample --temperature "$v" c.ini
done
for v in -1 2147483648 0x10; do
    refused 3 "--top-k '$v' is not a non-negative integer$H" sample --top-k "$v" c.ini
done
for v in -1 9223372036854775808; do
    refused 3 "--seed '$v' is not a non-negative integer$H" sample --seed "$v" c.ini
done
# In the order tokens, temperature, top-k, seed, whatever the command line's.
refused 5 "--tokens 'y' is not an integer in [0, 1000000]$H" sample --top-k x --tokens y c.ini
refused 5 "--tokens 'y' is not an integer in [0, 1000000]$H" sample --temperature x --tokens y c.ini
refused 5 "--top-k 'y' is not a non-negative integer$H" sample --seed x --top-k y c.ini
# Past the arguments (-s is the prompt here), the weights are missing.
"$SHARDTRAIN" sample --prompt -s --tokens 5 --tokens 3 c.ini >stdout 2>stderr </dev/null
st=$?
if [ "$st" -eq 2 ] && grep -q '^shardtrain: error: checkpoints/final/model.safetensors: cannot open weights' stderr; then
    ok "sample takes '--prompt -s' and a repeated option, and goes on to the weights"
else
    not_ok "sample --prompt -s (exit $st)"
    diag "$(cat stderr)"
fi

# ---- prepare [--val-fraction F] [--shard-tokens N] INPUT OUT_PREFIX -------
refused 2 "missing arguments$H" prepare
refused 3 "missing arguments$H" prepare in.txt
refused 5 "missing arguments$H" prepare --val-fraction x in.txt
refused 4 "unexpected argument 'extra'$H" prepare in.txt out/p extra
refused 2 "unknown option '-s'$H" prepare -s a.b=c in.txt out/p
refused 2 "unknown option '--bogus'$H" prepare --bogus in.txt out/p
refused 2 "--val-fraction needs a value$H" prepare --val-fraction
refused 2 "--shard-tokens needs a value$H" prepare --shard-tokens
for v in 1 1.0 0.99999999999999999 -0.1 x; do
    refused 3 "--val-fraction '$v' must be a number in [0, 1)$H" prepare --val-fraction "$v" in.txt out/p
done
refused 5 "--val-fraction '1' must be a number in [0, 1)$H" prepare --val-fraction 0.5 --val-fraction 1 in.txt out/p
refused 3 "--shard-tokens '0' must be a positive integer$H" prepare --shard-tokens 0 in.txt out/p
refused 5 "--val-fraction 'y' must be a number in [0, 1)$H" prepare --shard-tokens x --val-fraction y in.txt out/p
taken '^wrote out/p_val_000000.bin (389 tokens)$' prepare in.txt out/p
taken '^wrote out/q_train_000001.bin (947 tokens)$' prepare --shard-tokens 1000 in.txt --val-fraction 0.5 out/q

# ---- estimate: every value checked as it is read; a missing CONFIG is
# ---- reported at the last argument ----------------------------------------
refused 1 "missing CONFIG$H" estimate
refused 2 "missing CONFIG$H" estimate --json
refused 2 "missing CONFIG$H" estimate --time
refused 3 "--time needs --tflops, the compute rate achieved per GPU$H" estimate --time c.ini
refused 3 "unexpected argument 'extra'$H" estimate c.ini extra
refused 5 "unexpected argument 'extra2'$H" estimate --nodes 2 extra1 extra2
refused 3 "unexpected argument 'extra2'$H" estimate extra1 extra2 --nodes x
refused 2 "unknown option '--bogus'$H" estimate --bogus c.ini
refused 2 "-s needs SECTION.KEY=VALUE$H" estimate -s
refused 3 "invalid override 'foo'; hint: write -s section.key=value" estimate -s foo c.ini
refused 4 "invalid integer 'x' for train.micro_batch" estimate c.ini -s train.micro_batch=x
refused 2 "--nodes needs a value$H" estimate --nodes
refused 3 "'x' is not a valid number here$H" estimate --nodes x
refused 3 "'x' is not a valid number here$H" estimate --nodes x --nodes 2 c.ini
refused 4 "'x' is not a valid number here$H" estimate --time --tflops x c.ini
refused 3 "'1.5' is not a whole number$H" estimate --nodes 1.5 c.ini
refused 3 "'2.5' is not a whole number$H" estimate --tasks-per-node 2.5 c.ini
refused 3 "'10001' is not a valid number here$H" estimate --tasks-per-node 10001 c.ini
for o in --nodes --device-mem --tflops --intra-bw --inter-bw; do
    refused 3 "'0' is not a valid number here$H" estimate "$o" 0 c.ini
done
for o in --intra-lat --inter-lat --comm-sm-share; do
    refused 3 "'-1' is not a valid number here$H" estimate "$o" -1 c.ini
done
refused 3 "'1' is not a valid number here$H" estimate --comm-sm-share 1 c.ini
taken '^Memory per rank: gpt2, .* 1 node(s) x 8 task(s) = 8 ranks' estimate c.ini
taken '^Memory per rank: gpt2, .* 2 node(s) x 4 task(s) = 8 ranks' estimate --nodes 2 c.ini --tasks-per-node 4
taken '"max_micro_batch"' estimate --json --device-mem 80 c.ini
taken '^full_shard  ' estimate --time --tflops 100 -s train.global_batch=16 --intra-lat 1 c.ini
taken 'compute at 88% beside a collective$' estimate --time --tflops 100 -s train.global_batch=16 --comm-sm-share 0.12 c.ini
# What the configuration says wrong at the ranks assumed is found before
# any of the table is printed, at the line or argument that set the key.
{ cat c.ini; echo 'global_batch = 6'; } >b.ini
{ cat c.ini; printf '[parallel]\nshard_size = 3\n'; } >s.ini
B='train.global_batch is not a multiple of micro_batch x data-parallel ranks (2 x 8); hint: change global_batch or micro_batch'
refused_at b.ini:9 "$B" estimate --time --tflops 100 b.ini
refused_at b.ini:9 "$B" estimate --json --time --tflops 100 b.ini
refused 6 "$B" estimate --time --tflops 100 -s train.global_batch=12 c.ini
taken '^Memory per rank: ' estimate b.ini
S3='parallel.shard_size 3 does not divide 8 ranks; hint: change --nodes/--tasks-per-node or shard_size'
refused_at s.ini:10 "$S3" estimate s.ini
refused 3 "$S3" estimate -s parallel.shard_size=3 c.ini

# ---- bench-comm: the counts checked as read, --group and the sizes at the
# ---- end, then CONFIG -----------------------------------------------------
refused 2 "missing CONFIG$H" bench-comm
refused 3 "unexpected argument 'extra'$H" bench-comm c.ini extra
refused 2 "unknown option '--bogus'$H" bench-comm --bogus c.ini
refused 2 "-s needs SECTION.KEY=VALUE$H" bench-comm -s
refused 2 "--iters needs a value$H" bench-comm --iters
refused 2 "--group needs a value$H" bench-comm --group
refused 3 "--iters 'x' is not an integer in [1, 1000000000]$H" bench-comm --iters x
refused 3 "--iters '0' is not an integer in [1, 1000000000]$H" bench-comm --iters 0 c.ini
refused 3 "--warmup '-1' is not an integer in [0, 1000000000]$H" bench-comm --warmup -1 c.ini
refused 3 "--min-bytes '0' is not a byte count in [1, 4294967296]$H" bench-comm --min-bytes 0 c.ini
refused 3 "--max-bytes '4294967297' is not a byte count in [1, 4294967296]$H" bench-comm --max-bytes 4294967297 c.ini
refused 3 "--group 'nope' is not world, shard or replicate$H" bench-comm --group nope
refused 5 "--group 'nope' is not world, shard or replicate$H" bench-comm --group world --group nope c.ini
refused 3 "--group 'nope' is not world, shard or replicate$H" bench-comm --group nope --min-bytes 9 --max-bytes 8
refused 3 "--min-bytes 9 > --max-bytes 8$H" bench-comm --min-bytes 9 --max-bytes 8
refused 5 "--min-bytes 4096 > --max-bytes 1024$H" bench-comm --max-bytes 1024 --min-bytes 4096 c.ini
refused 3 "--min-bytes 1024 > --max-bytes 512$H" bench-comm --max-bytes 512 c.ini

# ---- an empty path, a positional or an option's value, is refused at its
# ---- argument, before anything is opened or made ---------------------------
refused 2 "CONFIG '' is an empty path$H" train ''
refused 4 "CONFIG '' is an empty path$H" check -s train.steps=1 ''
refused 4 "CONFIG '' is an empty path$H" estimate --nodes 2 ''
refused 2 "CONFIG '' is an empty path$H" bench-comm ''
refused 2 "CONFIG '' is an empty path$H" runtime-info ''
refused 2 "CHECKPOINT '' is an empty path$H" export '' exp
refused 3 "OUT_DIR '' is an empty path$H" export nope ''
refused 3 "--tokenizer '' is an empty path$H" export --tokenizer '' nope exp
refused 3 "--base '' is an empty path$H" export --base '' nope exp
refused 2 "INPUT '' is an empty path$H" prepare '' out/e
refused 3 "OUT_PREFIX '' is an empty path$H" prepare in.txt ''
refused 3 "--tokenizer '' is an empty path$H" prepare --tokenizer '' in.txt out/e
refused 3 "--weights '' is an empty path$H" sample --weights '' c.ini
refused 3 "--tokenizer '' is an empty path$H" sample --tokenizer '' c.ini
refused 2 "LOG_DIR '' is an empty path$H" plot ''
refused 3 "LOG_DIR '' is an empty path$H" plot logs ''
refused 3 "-o '' is an empty path$H" plot -o '' logs
no_stray_shards() { for f in _*.bin out/e*; do [ -e "$f" ] && return 1; done; return 0; }
check "no shard written for an empty OUT_PREFIX" no_stray_shards

# ---- export CHECKPOINT OUT_DIR; keys [--man]; runtime-info [[-s]... CONFIG]
refused 2 "missing arguments$H" export
refused 3 "missing arguments$H" export nope
refused 4 "unexpected argument 'extra'$H" export nope exp extra
refused 2 "unknown option '-s'$H" export -s a.b=c nope exp
taken '^model.arch$' keys
taken '^\.SS \[model\]$' keys --man
for args in "--man extra" extra -s --bogus; do
    # shellcheck disable=SC2086 # the words of $args are the arguments
    refused 2 "usage: shardtrain keys [--man]$H" keys $args
done
refused 3 "unexpected argument 'extra'$H" runtime-info c.ini extra
refused 4 "missing CONFIG$H" runtime-info -s parallel.strategy=no_shard
refused 2 "unknown option '--bogus'$H" runtime-info --bogus
refused 2 "-s needs SECTION.KEY=VALUE$H" runtime-info -s
