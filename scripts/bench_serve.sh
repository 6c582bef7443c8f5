#!/usr/bin/env bash
# FlowServer benchmark: sequential calls per second of one trivial flow over stdio, driven by the
# official Python MCP client, `chainweaver serve` side by side with the Python ChainWeaver
# FlowServer (pip `chainweaver[mcp]==0.14.1`, installed in a venv under the target dir).
#
# The flow has one step, `echo`, returning the `n` it is given. In ChainWeaver (Rust) the step is a
# command tool: `cat` (one process per call, as command tools run by default), then
# scripts/bench_serve_worker.py as a persistent tool (started once, a JSON line per call); in the
# Python package it is an in-process function.
#
# `chainweaver serve` also runs the flow over the `echo` of an MCP server (the npm everything
# server, when .ci/run has installed it), a process that stays up.
#
# A further server serves the same flow the way the Python one does, over an in-process function:
# examples/bench_serve.rs, a program on the library's FlowServer (the like-for-like comparison;
# `chainweaver serve` has no in-process tools).
#
# Each server is driven by three clients: the official Python SDK's (bench_serve_client.py), a
# minimal Python one (bench_serve_raw_client.py: JSON lines on two threads, no SDK) and
# examples/serve_load.rs (the same in Rust), which costs the least per call, so the servers' own
# pace shows.
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
  cargo build --release --workspace --bin chainweaver --example bench_serve --example serve_load
else
  cargo build --workspace --bin chainweaver --example bench_serve --example serve_load
fi
BIN="$(cd "$TARGET/$PROFILE" && pwd)/chainweaver"
LIB_SERVER="$(cd "$TARGET/$PROFILE/examples" && pwd)/bench_serve"
LOAD="$(cd "$TARGET/$PROFILE/examples" && pwd)/serve_load"
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

# The same tool as a persistent command tool: one Python process answers every call.
mkdir -p "$WORK/worker"
cat > "$WORK/worker/tools.toml" <<TOML
[[tool]]
name = "echo"
description = "Return n"
argv = ["python3", "$(pwd)/scripts/bench_serve_worker.py"]
persistent = true
workers = 2
read_only = true
input_schema = { type = "object", properties = { n = { type = "integer" } }, required = ["n"] }
output_schema = { type = "object", properties = { n = { type = "integer" } }, required = ["n"] }
TOML
"$BIN" --store "$WORK/worker/cw.db" flows register "$WORK/echo_flow.json" \
  --tools "$WORK/worker/tools.toml" >/dev/null

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
# One client driving one server: `drive CLIENT CONCURRENCY -- SERVER...`.
drive() {
  local client="$1" concurrency="$2"
  shift 3
  case "$client" in
    serve_load)
      # The server's peak memory (max RSS of the server process) beside its pace.
      "$LOAD" "$CALLS" "$concurrency" echo_flow -- /usr/bin/time -o "$WORK/peak" -f "%M" "$@"
      sleep 0.2
      echo "  server peak memory: $(tail -1 "$WORK/peak") KiB"
      ;;
    *) python3 "scripts/$client" --calls "$CALLS" --concurrency "$concurrency" -- "$@" ;;
  esac
}
for client in bench_serve_client.py bench_serve_raw_client.py serve_load; do
  for concurrency in 1 16; do
    echo "rust (chainweaver serve, $PROFILE build, cat per call), $client, $concurrency in flight:"
    drive "$client" "$concurrency" -- \
      "$BIN" --store "$WORK/cw.db" serve --tools "$WORK/tools.toml" --flow echo_flow
    echo "rust (chainweaver serve, $PROFILE build, persistent Python tool), $client, $concurrency in flight:"
    drive "$client" "$concurrency" -- \
      "$BIN" --store "$WORK/worker/cw.db" serve --tools "$WORK/worker/tools.toml" --flow echo_flow
    if [ -f "$WORK/mcp/cw.db" ]; then
      echo "rust (chainweaver serve, $PROFILE build, MCP echo tool), $client, $concurrency in flight:"
      drive "$client" "$concurrency" -- \
        "$BIN" --store "$WORK/mcp/cw.db" serve --tools "$WORK/mcp/tools.toml" --flow echo_flow
    fi
    echo "rust (library FlowServer, in-process tool, examples/bench_serve.rs), $client, $concurrency in flight:"
    drive "$client" "$concurrency" -- "$LIB_SERVER"
    echo "python (chainweaver[mcp] 0.14.1 FlowServer), $client, $concurrency in flight:"
    drive "$client" "$concurrency" -- "$PY" scripts/bench_serve_python.py 2>/dev/null
  done
done
