#!/usr/bin/env bash
# Receiver benchmark: `chainweaver collect` taking OTLP JSON tool spans over HTTP into SQLite,
# driven by the load generator in examples/otlp_load.rs, in one run.
#
#   scripts/bench_collect.sh [TOTAL_SPANS] [CONNECTIONS] [SPANS_PER_REQUEST]
#                            (default 1000000 spans, 8 connections, 1000 spans a request)
#
# Prints the generator's spans/s (first request to last acknowledgement: every span counted is
# committed), the receiver's own report, its peak memory (max RSS) and CPU seconds, and the
# load average before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
total="${1:-1000000}"
connections="${2:-8}"
per_request="${3:-1000}"
target="${CARGO_TARGET_DIR:-target}"

# --workspace: the feature set of the other benchmarks' builds, so nothing recompiles between them.
cargo build --release --quiet --workspace --bin chainweaver --example otlp_load
cw="$target/release/chainweaver"
load="$target/release/examples/otlp_load"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -v -o "$work/time" "$cw" --quiet --store "$work/bench.db" collect \
  --listen 127.0.0.1:0 >"$work/report" 2>"$work/collect.err" &
timer=$!
address=""
for _ in $(seq 100); do
  address="$(sed -n 's|.*http://\([^/]*\)/v1/traces.*|\1|p' "$work/collect.err")"
  [ -n "$address" ] && break
  sleep 0.1
done
[ -n "$address" ] || { cat "$work/collect.err"; exit 1; }

"$load" "$address" "$total" "$connections" "$per_request"

pkill -TERM -P "$timer" -x chainweaver
wait "$timer"
echo "receiver report:"
cat "$work/report"
grep -E "Maximum resident|User time|System time|Elapsed" "$work/time"
echo "store: $(du -h "$work/bench.db" | cut -f1)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
