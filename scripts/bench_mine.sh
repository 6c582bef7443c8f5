#!/bin/sh
# Mining plus binding inference on synthetic traffic: 1M steps in memory, and 1M and 10M steps
# streamed from a SQLite store (ChainAnalyzer::analyze_store), with wall time and peak memory
# from /usr/bin/time -v next to the figures the example prints.
#
#   scripts/bench_mine.sh [data_dir]
#
# data_dir (default: target/bench-mine under the workspace, or $CARGO_TARGET_DIR/bench-mine)
# keeps the generated stores between runs: writing the 10M-step store takes several minutes
# and about 4 GB of disk. Set BENCH_MINE_SIZES to choose the store sizes (default "1000000
# 10000000").
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}
data=${1:-$target/bench-mine}
sizes=${BENCH_MINE_SIZES:-"1000000 10000000"}
mkdir -p "$data"

cargo build --release --quiet -p chainweaver-analyzer --example mine_bench
bench="$target/release/examples/mine_bench"

# Runs the example under /usr/bin/time -v; prints its JSON and the time figures.
timed() {
    /usr/bin/time -v "$bench" "$@" 2>"$data/time.txt" >"$data/out.json"
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$data/time.txt")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$data/time.txt")
    echo "$(cat "$data/out.json")"
    echo "{\"command\": \"mine_bench $*\", \"time_wall\": \"$wall\", \"time_max_rss_kib\": $rss}"
}

echo "# in memory: generate, then ChainAnalyzer::analyze (default MineConfig)"
timed memory 1000000

for steps in $sizes; do
    store="$data/synth-$steps.db"
    if [ ! -f "$store" ]; then
        echo "# writing $store"
        "$bench" gen-store "$steps" "$store"
    fi
    echo "# streamed from SQLite: ChainAnalyzer::analyze_store ($steps steps)"
    timed store "$store"
done
