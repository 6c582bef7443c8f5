#!/usr/bin/env bash
# Import benchmark: ~1M synthetic steps into SQLite and into Parquet with `chainweaver import`,
# and the same rows inserted with plain rusqlite as a baseline, all in one run.
#
#   scripts/bench_import.sh [TRACES]      (default 132000 traces, about 1M steps)
#
# Prints steps/s, peak memory (max RSS) and CPU seconds (user + system; the import parses on
# one thread while it stores on another, so CPU can exceed wall time) of each, the store/raw
# ratio, and the load average before and after (the figures are only as quiet as the machine).
set -euo pipefail
cd "$(dirname "$0")/.."
traces="${1:-132000}"
target="${CARGO_TARGET_DIR:-target}"

cargo build --release --quiet --bin chainweaver --example raw_sqlite_insert
cw="$target/release/chainweaver"
raw="$target/release/examples/raw_sqlite_insert"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$cw" --quiet datasets generate --traces "$traces" --seed 1 --jsonl "$work/in.jsonl" --truth "$work/truth.json" >/dev/null
steps="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps"])' "$work/truth.json")"
bytes="$(stat -c %s "$work/in.jsonl")"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "input: $traces traces, $steps steps, $((bytes / 1048576)) MiB of JSON Lines"

# measure NAME CMD...: wall seconds, max RSS (KiB) and CPU seconds of one run.
measure() {
  local name="$1"; shift
  sync
  /usr/bin/time -f "%e %M %U %S" -o "$work/time" "$@" >/dev/null
  read -r seconds rss user system <"$work/time"
  python3 - "$name" "$steps" "$seconds" "$rss" "$user" "$system" <<'PY'
import sys
name, steps, seconds, rss = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
cpu = float(sys.argv[5]) + float(sys.argv[6])
print(f"{name:<28} {seconds:7.2f} s  {steps / seconds:>10,.0f} steps/s  peak {rss / 1024:6.0f} MiB  cpu {cpu:6.2f} s")
PY
  echo "$seconds" >"$work/$name.seconds"
}

measure "import -> SQLite" "$cw" --quiet --store "$work/bench.db" import "$work/in.jsonl"
measure "import -> Parquet" "$cw" --quiet --store "$work/bench.parquet" import "$work/in.jsonl"
measure "raw rusqlite insert" "$raw" "$work/in.jsonl" "$work/raw.db"
python3 - "$work" <<'PY'
import sys, pathlib
w = pathlib.Path(sys.argv[1])
s = lambda n: float((w / f"{n}.seconds").read_text())
raw = s("raw rusqlite insert")
print(f"SQLite import time / raw rusqlite time: {s('import -> SQLite') / raw:.2f}x")
print(f"Parquet import time / raw rusqlite time: {s('import -> Parquet') / raw:.2f}x")
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
