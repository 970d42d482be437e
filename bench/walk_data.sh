# Sourced by bench/step_walk.sh and bench/host_time.sh (with set -eu, and
# st, out and top set): the token shards their emulated runs read, made
# once in $out/data from tinyshakespeare.txt with byte-level tokens, below
# every vocabulary (the values never matter to a record-only run).
# walk_data NAME: NAME names the script in its error line.
walk_data() {
    text=
    for f in "$top/../shared/data/tinyshakespeare.txt" "$top/etc/data/tinyshakespeare.txt"; do
        [ -f "$f" ] && { text=$f; break; }
    done
    [ -n "$text" ] || { echo "$1: no tinyshakespeare.txt" >&2; exit 1; }
    [ -s "$out/data/sh_train_000000.bin" ] ||
        "$st" prepare "$text" "$out/data/sh" >/dev/null 2>"$out/prepare.err"
}
