#!/bin/sh
# Mining: Python chainweaver 0.14.1 `ChainObserver.suggest_flows` vs our ChainAnalyzer (mining
# plus binding inference and candidates, default MineConfig) on the same synthetic steps, and
# vs `chainweaver mine` as a user runs it (process start to exit, on a SQLite store of them).
# Needs cargo, python3 (with venv) and access to PyPI.
#
#   scripts/bench_mine_python.sh [sizes] [python_timeout_s]
#
# sizes: step counts, space-separated (default "10000 30000 100000"); python_timeout_s: the
# Python run of one size is killed after this many seconds (default 1800) and reported as
# timed out. BENCH_VENV chooses the virtualenv folder (default: bench-venv in the target dir).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
sizes=${1:-"10000 30000 100000"}
timeout=${2:-1800}
target=${CARGO_TARGET_DIR:-$root/target}
venv=${BENCH_VENV:-$target/bench-venv}
data=$target/bench-mine-python
mkdir -p "$data"

cargo build --release --quiet -p chainweaver-analyzer --example mine_bench
cargo build --release --quiet --bin chainweaver
bench="$target/release/examples/mine_bench"
bin="$target/release/chainweaver"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet "chainweaver==0.14.1"

for steps in $sizes; do
    file="$data/synth-$steps.jsonl"
    "$bench" jsonl "$steps" "$file" >/dev/null
    # Ours: the median of five analyses of the loaded file (the per-run times go to stderr).
    ours=$("$bench" jsonl-mine "$file" --repeat 5)
    # And what a user runs: `chainweaver mine` on a SQLite store holding the same steps, from
    # process start to exit, the median of five runs.
    store="$data/synth-$steps.db"
    rm -f "$store" "$store-wal" "$store-shm"
    "$bin" -q --store "$store" import "$file" >/dev/null
    binary=$(python3 - "$bin" "$store" <<'PY'
import json, subprocess, sys, time
times = []
for _ in range(5):
    started = time.perf_counter()
    subprocess.run([sys.argv[1], "-q", "--store", sys.argv[2], "mine"], check=True,
                   stdout=subprocess.DEVNULL)
    times.append(time.perf_counter() - started)
times.sort()
print(json.dumps({"binary_mine_s": times[2], "binary_runs_s": times}))
PY
)
    python=$("$venv/bin/python" scripts/bench_mine_python.py "$file" none "$timeout")
    python3 - "$ours" "$python" "$binary" <<'PY'
import json, sys
ours, python, binary = (json.loads(a) for a in sys.argv[1:4])
row = {"steps": ours["steps"], "traces": ours["traces"],
       "ours_mine_plus_infer_s": round(ours["mine_plus_infer_s"], 3),
       "ours_mine_s": round(ours["mine_s"], 3), "ours_infer_s": round(ours["infer_s"], 3),
       "ours_candidates": ours["candidates"], "ours_patterns": ours["patterns"]}
if "suggest_s" in python:
    row.update({"python_suggest_flows_s": round(python["suggest_s"], 2),
                "python_suggestions": python["suggestions"],
                "ratio": round(python["suggest_s"] / ours["mine_plus_infer_s"], 1),
                "binary_mine_s": round(binary["binary_mine_s"], 3),
                "binary_ratio": round(python["suggest_s"] / binary["binary_mine_s"], 1)})
else:
    row.update({"python": python})
print(json.dumps(row))
PY
done
