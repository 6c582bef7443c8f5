#!/bin/sh
# Counting on Apache DataFusion against the in-process miner, through the binary, side by side
# on the same generated Parquet store (day partitions), each process from start to exit under
# /usr/bin/time -v (wall time and peak resident memory). Also checks that both find the same
# closed patterns, supports and occurrence counts.
#
#   scripts/bench_engine.sh [data_dir]
#
# data_dir (default: $CARGO_TARGET_DIR/bench-engine, or target/bench-engine) keeps the
# generated stores between runs. BENCH_ENGINE_SIZES chooses the sizes in steps (default
# "1000000 10000000"; 10M steps take a few minutes to write and about 5 GB of disk).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}
data=${1:-$target/bench-engine}
sizes=${BENCH_ENGINE_SIZES:-"1000000 10000000"}
mkdir -p "$data"

cargo build --release --quiet --workspace --all-features --bin chainweaver
bin="$target/release/chainweaver"

# One command under /usr/bin/time -v: prints `label wall_s peak_mib`; stdout goes to $data/$label.out.
timed() {
    label=$1
    shift
    /usr/bin/time -v "$bin" -q "$@" >"$data/$label.out" 2>"$data/time.txt" || {
        cat "$data/time.txt" >&2
        exit 1
    }
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$data/time.txt")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$data/time.txt")
    secs=$(echo "$wall" | awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }')
    echo "$label $secs $((rss / 1024))"
}

for steps in $sizes; do
    # The generator averages about 7.37 steps a trace.
    traces=$((steps * 100 / 737))
    store="$data/synth-$steps.parquet"
    if [ ! -e "$store" ]; then
        "$bin" -q --store "$store" datasets generate --traces "$traces" --seed 1 \
            --truth "$data/truth-$steps.json" >/dev/null
    fi
    echo "# $steps steps, Parquet (label wall_s peak_MiB)"
    timed datafusion --store "$store" --format json mine --engine datafusion
    timed count-only --store "$store" mine --count-only --max-length 10
    timed in-process --store "$store" --format json mine
    python3 - "$data/datafusion.out" "$data/in-process.out" <<'PY'
import json, sys
engine, mined = (json.load(open(p)) for p in sys.argv[1:3])
key = lambda p: (tuple(p["tools"]), p["support"], p["occurrences"])
a, b = {key(p) for p in engine["patterns"]}, {key(p) for p in mined["patterns"]}
print(f"patterns: datafusion {len(a)}, in-process {len(b)}, identical: {a == b}")
PY
done
