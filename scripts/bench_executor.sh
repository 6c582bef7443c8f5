#!/bin/sh
# Executor overhead per step, Rust vs the Python chainweaver 0.14.1 package, on the same 10-step
# linear flow of a trivial tool. Needs cargo, python3 (with venv) and access to PyPI.
#
#   scripts/bench_executor.sh [rust_iterations] [python_iterations]
#
# BENCH_VENV chooses the virtualenv folder (default: target/bench-venv under the workspace).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rust_iterations=${1:-50000}
python_iterations=${2:-2000}
venv=${BENCH_VENV:-${CARGO_TARGET_DIR:-$root/target}/bench-venv}

cargo build --release --quiet --workspace --example bench_executor
rust=$("${CARGO_TARGET_DIR:-$root/target}/release/examples/bench_executor" "$rust_iterations")
# A map step over 1,000 elements, per iteration, next to the linear step.
"${CARGO_TARGET_DIR:-$root/target}/release/examples/bench_executor" map 200

if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet "chainweaver==0.14.1"
python=$("$venv/bin/python" scripts/bench_executor.py "$python_iterations")

echo "$rust"
echo "$python"
python3 - "$rust" "$python" <<'PY'
import json, sys
rust, python = (json.loads(a) for a in sys.argv[1:3])
ratio = python["per_step_us"] / rust["per_step_us"]
print(json.dumps({"rust_per_step_us": round(rust["per_step_us"], 3),
                  "python_per_step_us": round(python["per_step_us"], 2),
                  "ratio": round(ratio, 1)}))
PY
