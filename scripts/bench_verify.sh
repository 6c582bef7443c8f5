#!/bin/sh
# Verification throughput: held-out occurrence replays per second with recorded tools.
#
#   scripts/bench_verify.sh [traces]
#
# Generates synthetic traffic (default 20,000 traces), mines 80% of it, and replays every
# candidate on the held-out 20% through the executor with the cassette, on one thread and on
# every core (best of three each). Prints one JSON line.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo build --release --quiet --workspace --example bench_verify
"${CARGO_TARGET_DIR:-$root/target}/release/examples/bench_verify" "${1:-20000}"
