#!/bin/sh
# Mining on Apache DataFusion against the in-process miner, through the binary, side by side
# on the same generated Parquet store (day partitions), each process from start to exit under
# /usr/bin/time -v (wall time and peak resident memory). Both count the closed patterns,
# sample the best-ranked patterns' occurrences, infer bindings and store candidates; the script
# checks that they find the same patterns, supports, occurrence counts and candidates. With
# BENCH_BALLISTA=1 the same mining also runs on a Ballista cluster of three processes on this
# machine (the cluster counts, the client builds the candidates): `chainweaver cluster
# scheduler` and two `chainweaver cluster executor` of one task slot each, on ports
# BENCH_BALLISTA_PORT (default 50150) to +4, started once; the client is timed, and the
# cluster's CPU time printed.
#
#   scripts/bench_engine.sh [data_dir]
#
# data_dir (default: $CARGO_TARGET_DIR/bench-engine, or target/bench-engine) keeps the
# generated stores between runs. BENCH_ENGINE_SIZES chooses the sizes in steps (default
# "1000000 10000000"; 10M steps take a few minutes to write and about 5 GB of disk).
# BENCH_MINE_FLAGS adds flags to every `mine` run, e.g. "--max-gap 1" (a cluster counts
# contiguous patterns only: leave BENCH_BALLISTA off then).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}
data=${1:-$target/bench-engine}
sizes=${BENCH_ENGINE_SIZES:-"1000000 10000000"}
flags=${BENCH_MINE_FLAGS:-}
mkdir -p "$data"

cargo build --release --quiet --workspace --all-features --bin chainweaver
bin="$target/release/chainweaver"
scheduler=""
if [ "${BENCH_BALLISTA:-0}" = 1 ]; then
    port=${BENCH_BALLISTA_PORT:-50150}
    "$bin" cluster scheduler --bind "127.0.0.1:$port" 2>"$data/scheduler.err" &
    cluster="$!"
    for executor in 1 2; do
        flight=$((port + 2 * executor - 1))
        "$bin" cluster executor --scheduler "df://localhost:$port" --bind-host 127.0.0.1 \
            --port "$flight" --grpc-port "$((flight + 1))" --slots 1 \
            2>"$data/executor-$executor.err" &
        cluster="$cluster $!"
    done
    trap 'kill $cluster 2>/dev/null || true' EXIT
    scheduler="df://localhost:$port"
fi

. "$root/scripts/timed.sh"

for steps in $sizes; do
    # The generator averages about 7.37 steps a trace.
    traces=$((steps * 100 / 737))
    store="$data/synth-$steps.parquet"
    if [ ! -e "$store" ]; then
        "$bin" -q --store "$store" datasets generate --traces "$traces" --seed 1 \
            --truth "$data/truth-$steps.json" >/dev/null
    fi
    echo "# $steps steps, Parquet (label wall_s peak_MiB)"
    # shellcheck disable=SC2086 # the flags are words
    timed datafusion --store "$store" --format json mine --engine datafusion $flags
    if [ -n "$scheduler" ]; then
        timed ballista --store "$store" --format json mine --engine ballista --scheduler "$scheduler"
        echo "cluster CPU so far: $(ps -o times= -p "$(echo "$cluster" | tr ' ' ',')" | awk '{ s += $1 } END { print s }') s"
    else
        cp "$data/datafusion.out" "$data/ballista.out"
    fi
    # shellcheck disable=SC2086
    timed count-only --store "$store" mine --count-only --max-length 10 $flags
    # shellcheck disable=SC2086
    timed in-process --store "$store" --format json mine $flags
    python3 - "$data/datafusion.out" "$data/ballista.out" "$data/in-process.out" <<'PY'
import json, sys
engine, cluster, mined = (json.load(open(p)) for p in sys.argv[1:4])
key = lambda p: (tuple(p["tools"]), p["support"], p["occurrences"])
a, c, b = ({key(p) for p in o["patterns"]} for o in (engine, cluster, mined))
print(f"patterns: datafusion {len(a)}, ballista {len(c)}, in-process {len(b)}, "
      f"identical: {a == b and c == b}")
# The candidates, whole, but for the support per day of a sampled one (not counted by engines).
def candidates(output):
    out = []
    for c in output["candidates"]:
        if c.get("sample"):
            c["evidence"]["support_by_day"] = None
        out.append(c)
    return out
d, k, m = candidates(engine), candidates(cluster), candidates(mined)
print(f"candidates: datafusion {len(d)}, ballista {len(k)}, in-process {len(m)}, "
      f"identical: {d == m and k == m}")
PY
done
