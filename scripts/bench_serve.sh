#!/usr/bin/env bash
# FlowServer benchmark: sequential calls per second of one trivial flow over stdio, driven by the
# official Python MCP client, `chainweaver serve` side by side with the Python ChainWeaver
# FlowServer (pip `chainweaver[mcp]==0.14.1`, installed in a venv under the target dir).
#
# The flow has one step, `echo`, returning the `n` it is given. In ChainWeaver (Rust) the step is a
# command tool (`cat`: one process per call, as command tools run); in the Python package it is an
# in-process function.
#
# Usage: scripts/bench_serve.sh [CALLS]      (PROFILE=debug to time the debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS="${1:-2000}"
PROFILE="${PROFILE:-release}"
TARGET="${CARGO_TARGET_DIR:-target}"
VENV="$TARGET/bench-venv"

if [ "$PROFILE" = release ]; then cargo build --release -p chainweaver; else cargo build -p chainweaver; fi
BIN="$(cd "$TARGET/$PROFILE" && pwd)/chainweaver"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check 'chainweaver[mcp]==0.14.1'
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/tools.toml" <<'TOML'
[[tool]]
name = "echo"
description = "Return n"
argv = ["cat"]
read_only = true
input_schema = { type = "object", properties = { n = { type = "integer" } }, required = ["n"] }
output_schema = { type = "object", properties = { n = { type = "integer" } }, required = ["n"] }
TOML
cat > "$WORK/echo_flow.json" <<'JSON'
{"name": "echo_flow", "description": "The benchmark's trivial flow",
 "steps": [{"tool_name": "echo", "input_mapping": {"n": "n"}}]}
JSON
"$BIN" --store "$WORK/cw.db" flows register "$WORK/echo_flow.json" --tools "$WORK/tools.toml" >/dev/null

PY="$(cd "$VENV/bin" && pwd)/python"
for concurrency in 1 16; do
  echo "rust (chainweaver serve, $PROFILE build), $concurrency in flight:"
  python3 scripts/bench_serve_client.py --calls "$CALLS" --concurrency "$concurrency" -- \
    "$BIN" --store "$WORK/cw.db" serve --tools "$WORK/tools.toml" --flow echo_flow
  echo "python (chainweaver[mcp] 0.14.1 FlowServer), $concurrency in flight:"
  python3 scripts/bench_serve_client.py --calls "$CALLS" --concurrency "$concurrency" -- \
    "$PY" scripts/bench_serve_python.py 2>/dev/null
done
