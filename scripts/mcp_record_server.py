"""An example MCP server on the official Python SDK, for the recording proxy's tests and benchmark.

Tools:
- `add`: structured output (declares an outputSchema); `{"sum": a + b}`.
- `lookup_user`: structured output; takes an `api_key` argument, so tests can check redaction.
- `echo`: unstructured text (no outputSchema).
- `fail`: always a tool error (`isError: true`) with the given message.
- `slow`: sleeps `seconds`, reporting progress, then answers (unstructured).
- `big`: an unstructured answer of `size` characters.
- `exit_now`: the server process exits with `code` in the middle of the call.
- `pid`: the server's process id (unstructured), so tests can check it is gone.

Run over stdio: `python3 scripts/mcp_record_server.py`.
"""

import asyncio
import os
import sys

from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("record-example")


class Sum(BaseModel):
    sum: int


class User(BaseModel):
    user: str
    plan: str


@server.tool()
def add(a: int, b: int) -> Sum:
    """Add two integers."""
    return Sum(sum=a + b)


@server.tool()
def lookup_user(user: str, api_key: str) -> User:
    """Look a user up (the key is only checked for presence)."""
    if not api_key:
        raise ToolError("an api_key is required")
    return User(user=user, plan="pro" if user.startswith("a") else "free")


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Answer with the text given."""
    return text


@server.tool(structured_output=False)
def fail(message: str) -> str:
    """Always fail with the message given."""
    raise ToolError(message)


@server.tool(structured_output=False)
async def slow(seconds: float, ctx: Context) -> str:
    """Sleep, reporting progress, then answer."""
    steps = 4
    for i in range(steps):
        await ctx.report_progress(i, steps)
        await asyncio.sleep(seconds / steps)
    return f"slept {seconds}"


@server.tool(structured_output=False)
def big(size: int) -> str:
    """Answer with `size` characters."""
    return "x" * size


@server.tool(structured_output=False)
def exit_now(code: int) -> str:
    """Exit the server process with `code` without answering."""
    sys.stdout.flush()
    os._exit(code)


@server.tool(structured_output=False)
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


if __name__ == "__main__":
    server.run("stdio")
