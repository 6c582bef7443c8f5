#!/bin/sh
# The recording proxy's cost, against the example MCP server on the official Python SDK:
#  1. added latency per tools/call: the same server started twice, once directly and once behind
#     `chainweaver record`, called alternately in one run (median and p99 of each side);
#  2. a lossless relay: CALLS tools/call, WINDOW in flight, through `record` and a byte tap in
#     front of the server; every byte each side wrote is compared with what the other received.
#
#   scripts/bench_proxy.sh [latency_calls] [lossless_calls] [window]
#
# Needs cargo and python3 with the mcp package (pip install -r .ci/requirements.txt).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
latency_calls=${1:-20000}
lossless_calls=${2:-100000}
window=${3:-32}
target=${CARGO_TARGET_DIR:-$root/target}

cargo build --release --quiet --workspace --bin chainweaver --example bench_proxy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
server="python3 $root/scripts/mcp_record_server.py"
export CHAINWEAVER_BIN="$target/release/chainweaver"

# shellcheck disable=SC2086
"$target/release/examples/bench_proxy" latency "$latency_calls" "$work/latency.db" -- $server
# shellcheck disable=SC2086
"$target/release/examples/bench_proxy" lossless "$lossless_calls" "$window" "$work/lossless.db" \
    "$work/tap" -- $server
# Every call of the lossless run is a stored step.
"$target/release/chainweaver" --store "$work/lossless.db" --format json traces stats \
    | python3 -c 'import json, sys; d = json.load(sys.stdin); print(json.dumps({"stored_steps": sum(t["calls"] for t in d["tools"])}))'
