#!/bin/sh
# Real logs imported at once: each tau-bench retail file and each agent-logs folder of the
# shared datasets by its own `chainweaver import` process, all started together into one
# Parquet store; then the same one after the other into a SQLite store. Prints how many
# imports failed and whether both stores export the same traces.
#
#   scripts/concurrent_imports.sh CHAINWEAVER_BINARY DATASETS_DIR OUT_DIR
#
# OUT_DIR is emptied first.
set -eu
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
data=$(cd "$2" && pwd)
out=$3
rm -rf "$out"; mkdir -p "$out"; cd "$out"
pids=""
for src in "$data"/tau-bench-retail/*.json "$data"/agent-logs/*/; do
    "$bin" -q --store both.parquet import "$src" > /dev/null 2>>err.txt &
    pids="$pids $!"
done
fail=0
for p in $pids; do
    rc=0; wait $p || rc=$?
    # 3: some lines rejected (reported, the rest stored), as a sequential import gives too.
    [ "$rc" = 0 ] || [ "$rc" = 3 ] || fail=$((fail+1))
done
echo "concurrent imports: $(echo $pids | wc -w), failed: $fail; error lines: $(grep -c '^error' err.txt || true)"
for src in "$data"/tau-bench-retail/*.json "$data"/agent-logs/*/; do
    "$bin" -q --store one.db import "$src" > /dev/null 2>/dev/null || true
done
"$bin" -q --store both.parquet traces export --output both.jsonl
"$bin" -q --store one.db traces export --output one.jsonl
sort both.jsonl > b.s; sort one.jsonl > o.s
echo "traces: parquet $(wc -l < b.s), sqlite $(wc -l < o.s); identical: $(cmp -s b.s o.s && echo yes || echo no)"
