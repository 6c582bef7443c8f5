#!/usr/bin/env python3
"""An MCP server built on the official Python `mcp` package, for the MCP tests.

Tools:
  lookup_user   structured output (outputSchema), read-only
  add           structured output, read-only and idempotent
  greet         text only (no outputSchema), no annotations
  delete_user   text only, destructive
  fail          always a tool error (isError) with the reason given
  slow          sleeps; appends `cancelled <seconds>` to $MCP_EXAMPLE_LOG when cancelled
  exit_now      the server process exits in the middle of the call
  garble        writes a line that is not JSON onto the protocol stream, then never answers

Usage: mcp_example_server.py            (stdio)
       mcp_example_server.py --http PORT (streamable HTTP on 127.0.0.1:PORT/mcp)
       mcp_example_server.py --https PORT CERT KEY
                                         (the same over TLS, with this PEM certificate and key)
"""

import os
import sys
from typing import TypedDict

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("chainweaver-example", version="1.0.0")

USERS = {
    "u1": {"name": "Ada", "email": "ada@example.com", "plan": "pro"},
    "u2": {"name": "Grace", "email": "grace@example.com", "plan": "free"},
}


class User(TypedDict):
    user_id: str
    name: str
    email: str
    plan: str


class Sum(TypedDict):
    total: int


def log(line: str) -> None:
    path = os.environ.get("MCP_EXAMPLE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lookup_user(user_id: str) -> User:
    """Look a user up by id."""
    user = USERS.get(user_id)
    if user is None:
        raise ToolError(f"no user {user_id}")
    return {"user_id": user_id, **user}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, idempotentHint=True))
def add(a: int, b: int) -> Sum:
    """Add two integers."""
    return {"total": a + b}


@server.tool(structured_output=False)
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


@server.tool(structured_output=False, annotations=ToolAnnotations(destructiveHint=True))
def delete_user(user_id: str) -> str:
    """Pretend to delete a user."""
    return f"deleted {user_id}"


@server.tool(structured_output=False)
def fail(reason: str) -> str:
    """Always fails with the reason given."""
    raise ToolError(reason)


@server.tool(structured_output=False)
async def slow(seconds: float) -> str:
    """Sleep, then answer; records a cancellation in $MCP_EXAMPLE_LOG."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        log(f"cancelled {seconds}")
        raise
    return f"slept {seconds}"


@server.tool(structured_output=False)
def exit_now() -> str:
    """The server exits while the call is in flight."""
    sys.stdout.flush()
    os._exit(3)


@server.tool(structured_output=False)
async def garble() -> str:
    """Writes a line that is not JSON onto the protocol stream itself, and never answers.

    The SDK serves the wire from a private copy of fd 1 and points fd 1 at stderr, so a plain
    print never reaches the client; the garbled frame goes to the copy, as a broken transport's
    would.
    """
    from mcp.server import stdio as sdk_stdio

    claim = sdk_stdio._claims.get(1)
    wire = claim.private_fd if claim is not None and claim.private_fd is not None else 1
    os.write(wire, b"{this is not json\n")
    await anyio.sleep(3600)
    return "unreachable"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif len(sys.argv) == 5 and sys.argv[1] == "--https":
        import uvicorn

        port, cert, key = int(sys.argv[2]), sys.argv[3], sys.argv[4]
        app = server.streamable_http_app(host="127.0.0.1")
        uvicorn.run(app, host="127.0.0.1", port=port, ssl_certfile=cert, ssl_keyfile=key,
                    log_level="info")
    else:
        server.run()
