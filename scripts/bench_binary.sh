#!/bin/sh
# What a user runs, timed as a user sees it: `chainweaver mine --holdout 20` then
# `chainweaver verify` on generated stores of 1M and 10M steps, SQLite and Parquet, each
# process from start to exit under /usr/bin/time -v (wall time and peak resident memory).
#
#   scripts/bench_binary.sh [data_dir]
#
# data_dir (default: $CARGO_TARGET_DIR/bench-binary, or target/bench-binary) keeps the
# generated stores between runs (10M steps take a few minutes to write and about 5 GB of
# disk per backend). BENCH_BINARY_SIZES chooses the sizes in steps (default "1000000
# 10000000"); BENCH_BINARY_BACKENDS the backends (default "db parquet").
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}
data=${1:-$target/bench-binary}
sizes=${BENCH_BINARY_SIZES:-"1000000 10000000"}
backends=${BENCH_BINARY_BACKENDS:-"db parquet"}
mkdir -p "$data"

cargo build --release --quiet --bin chainweaver
bin="$target/release/chainweaver"

. "$root/scripts/timed.sh"

for steps in $sizes; do
    # The generator averages about 7.37 steps a trace.
    traces=$((steps * 100 / 737))
    jsonl="$data/synth-$steps.jsonl"
    if [ ! -f "$jsonl" ]; then
        # The ground truth goes beside the data, not into the working directory.
        "$bin" -q datasets generate --traces "$traces" --seed 1 --jsonl "$jsonl" \
            --truth "$data/truth-$steps.json" >/dev/null
    fi
    for backend in $backends; do
        store="$data/synth-$steps.$backend"
        if [ ! -e "$store" ]; then
            "$bin" -q --store "$store" import "$jsonl" >/dev/null
        fi
        echo "# $steps steps, $backend: mine --holdout 20, then verify (label wall_s peak_MiB)"
        timed "mine" --store "$store" mine --holdout 20
        timed "verify" --store "$store" verify
    done
done
