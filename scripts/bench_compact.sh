#!/bin/sh
# Compaction through the binary: a generated Parquet store as the generator writes it (one
# append per batch, each spread over the days: thousands of small part files at 10M steps),
# and a copy of it after `chainweaver traces compact`, mined side by side. Each process runs
# from start to exit under /usr/bin/time -v (wall time and peak resident memory); the two
# stores take turns, in-process and on DataFusion, for BENCH_COMPACT_ROUNDS rounds (default 2).
# The script checks that both stores give the same patterns and candidates.
#
#   scripts/bench_compact.sh [data_dir]
#
# data_dir (default: $CARGO_TARGET_DIR/bench-compact, or target/bench-compact) keeps the
# generated stores between runs. BENCH_COMPACT_SIZES chooses the sizes in steps (default
# "1000000 10000000"; 10M steps take a few minutes to write and about 1.6 GB of disk for the
# two stores).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}
data=${1:-$target/bench-compact}
sizes=${BENCH_COMPACT_SIZES:-"1000000 10000000"}
rounds=${BENCH_COMPACT_ROUNDS:-2}
mkdir -p "$data"

cargo build --release --quiet --features datafusion --bin chainweaver
bin="$target/release/chainweaver"

. "$root/scripts/timed.sh"

# What a mining run found, without its timings.
found() {
    python3 -c '
import json, sys
out = json.load(open(sys.argv[1]))
print(json.dumps({"patterns": out["patterns"], "candidates": out["candidates"]}, sort_keys=True))
' "$1"
}

for steps in $sizes; do
    # The generator averages about 7.37 steps a trace.
    traces=$((steps * 100 / 737))
    store="$data/synth-$steps.parquet"
    compacted="$data/synth-$steps-compacted.parquet"
    if [ ! -e "$store" ]; then
        "$bin" -q --store "$store" datasets generate --traces "$traces" --seed 1 \
            --truth "$data/truth-$steps.json" >/dev/null
    fi
    rm -rf "$compacted"
    cp -r "$store" "$compacted"
    echo "# $steps steps, Parquet (label wall_s peak_MiB)"
    echo "part files: $(find "$store" -type f -name '*.parquet' | wc -l) as written"
    timed compact --store "$compacted" --format json traces compact
    cat "$data/compact.out"
    echo "part files: $(find "$compacted" -type f -name '*.parquet' | wc -l) compacted"
    round=1
    while [ "$round" -le "$rounds" ]; do
        for engine in in-process datafusion; do
            for kind in written compacted; do
                if [ "$kind" = written ]; then at=$store; else at=$compacted; fi
                timed "$engine-$kind" --store "$at" --format json mine --engine "$engine"
                found "$data/$engine-$kind.out" >"$data/$engine-$kind.found"
            done
            cmp -s "$data/$engine-written.found" "$data/$engine-compacted.found" || {
                echo "$engine: the compacted store gave other patterns or candidates" >&2
                exit 1
            }
        done
        round=$((round + 1))
    done
    cmp -s "$data/in-process-written.found" "$data/datafusion-written.found" || {
        echo "the engines disagree" >&2
        exit 1
    }
    echo "same patterns and candidates on both stores and both engines"
done
