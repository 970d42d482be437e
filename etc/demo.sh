#!/bin/sh
# The demo behind `make demo`: byte-level Shakespeare (shipped in
# etc/data, public domain), a 0.8M-parameter GPT-2 trained on CPU, then a
# generated sample and where the loss plot is.  Usage: demo.sh SHARDTRAIN SRCDIR [DEMO_DIR]
set -eu
st=$1
src=$2
DEMO_DIR=${3:-${DEMO_DIR:-demo-run}}
export DEMO_DIR
rm -rf "$DEMO_DIR/logs" "$DEMO_DIR/checkpoints"
"$st" prepare "$src/etc/data/tinyshakespeare.txt" "$DEMO_DIR/data/shakespeare"
"$st" train "$src/etc/demo.ini"
echo "--- sample (shardtrain sample --prompt 'ROMEO:' --tokens 300) ---"
"$st" sample --prompt "ROMEO:" --tokens 300 --temperature 0.8 --seed 7 "$src/etc/demo.ini"
echo "--- the loss curve: open $DEMO_DIR/logs/plot.svg in a browser" \
     "(summary: $DEMO_DIR/logs/summary.json; tensorboard --logdir $DEMO_DIR/logs) ---"
