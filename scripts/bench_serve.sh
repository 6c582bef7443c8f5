#!/usr/bin/env bash
# FlowServer benchmark: sequential calls per second of one trivial flow over stdio, driven by the
# official Python MCP client, `chainweaver serve` side by side with the Python ChainWeaver
# FlowServer (pip `chainweaver[mcp]==0.14.1`, installed in a venv under the target dir).
#
# The flow has one step, `echo`, returning the `n` it is given. In ChainWeaver (Rust) the step is a
# command tool (`cat`: one process per call, as command tools run); in the Python package it is an
# in-process function.
#
# `chainweaver serve` also runs the flow over the `echo` of an MCP server (the npm everything
# server, when .ci/run has installed it), a process that stays up.
#
# A further server serves the same flow the way the Python one does, over an in-process function:
# examples/bench_serve.rs, a program on the library's FlowServer (the like-for-like comparison;
# `chainweaver serve` has no in-process tools).
#
# Then the same with scripts/bench_serve_raw_client.py, a minimal JSON-lines client, so the
# servers' own pace shows.
#
# Usage: scripts/bench_serve.sh [CALLS]      (PROFILE=debug to time the debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS="${1:-2000}"
PROFILE="${PROFILE:-release}"
TARGET="${CARGO_TARGET_DIR:-target}"
VENV="$TARGET/bench-venv"

# --workspace: the binary's feature set, so nothing recompiles for the benchmark.
if [ "$PROFILE" = release ]; then
  cargo build --release --workspace --bin chainweaver --example bench_serve
else
  cargo build --workspace --bin chainweaver --example bench_serve
fi
BIN="$(cd "$TARGET/$PROFILE" && pwd)/chainweaver"
LIB_SERVER="$(cd "$TARGET/$PROFILE/examples" && pwd)/bench_serve"
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

# `chainweaver serve` once more, its step the `echo` tool of a long-running MCP server (the npm
# "everything" server that .ci/run installs under the target dir), so no process starts per call.
PEERS="${CHAINWEAVER_MCP_PEERS:-$TARGET/mcp-peers}"
EVERYTHING="$PEERS/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
if [ -f "$EVERYTHING" ]; then
  mkdir -p "$WORK/mcp"
  cat > "$WORK/mcp/tools.toml" <<TOML
[[mcp_server]]
name = "everything"
command = "node"
args = ["$(cd "$(dirname "$EVERYTHING")" && pwd)/index.js"]
tools = ["echo"]
TOML
  cat > "$WORK/mcp/echo_flow.json" <<'JSON'
{"name": "echo_flow", "description": "The benchmark's trivial flow over an MCP server's echo",
 "metadata": {"safety": "read_only"},
 "steps": [{"tool_name": "echo", "input_templates": {"message": "n={{n}}"}}]}
JSON
  "$BIN" --store "$WORK/mcp/cw.db" flows register "$WORK/mcp/echo_flow.json" \
    --tools "$WORK/mcp/tools.toml" >/dev/null 2>&1
fi

PY="$(cd "$VENV/bin" && pwd)/python"
# The servers, 1 and 16 calls in flight, driven by one client script: the official Python
# SDK's (bench_serve_client.py), then a minimal one (bench_serve_raw_client.py: JSON lines on two
# threads, no SDK), which costs far less per call than either server, so their own pace shows.
for client in bench_serve_client.py bench_serve_raw_client.py; do
  for concurrency in 1 16; do
    echo "rust (chainweaver serve, $PROFILE build), $client, $concurrency in flight:"
    python3 "scripts/$client" --calls "$CALLS" --concurrency "$concurrency" -- \
      "$BIN" --store "$WORK/cw.db" serve --tools "$WORK/tools.toml" --flow echo_flow
    if [ -f "$WORK/mcp/cw.db" ]; then
      echo "rust (chainweaver serve, $PROFILE build, MCP echo tool), $client, $concurrency in flight:"
      python3 "scripts/$client" --calls "$CALLS" --concurrency "$concurrency" -- \
        "$BIN" --store "$WORK/mcp/cw.db" serve --tools "$WORK/mcp/tools.toml" --flow echo_flow
    fi
    echo "rust (library FlowServer, in-process tool, examples/bench_serve.rs), $client, $concurrency in flight:"
    python3 "scripts/$client" --calls "$CALLS" --concurrency "$concurrency" -- "$LIB_SERVER"
    echo "python (chainweaver[mcp] 0.14.1 FlowServer), $client, $concurrency in flight:"
    python3 "scripts/$client" --calls "$CALLS" --concurrency "$concurrency" -- \
      "$PY" scripts/bench_serve_python.py 2>/dev/null
  done
done
