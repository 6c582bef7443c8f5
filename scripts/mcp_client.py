#!/usr/bin/env python3
"""A scripted MCP client on the official Python `mcp` package, for the MCP tests.

Reads a JSON list of operations on stdin, runs them in order over one session, and prints one
JSON document: {"protocol_version", "server_info", "results": [...], "notifications": [...]}.

Operations:
  {"op": "list_tools"}                                -> the tools, as the wire spells them
  {"op": "call", "name": "...", "arguments": {...}}   -> the CallToolResult, as the wire spells it
  {"op": "wait_notification", "method": "...", "seconds": 10}
                                                      -> {"seen": true|false}
An operation that raises gives {"error": "<type>: <message>"} and the script goes on.

Usage:
  mcp_client.py [--mode legacy|auto|2026-07-28] -- COMMAND ARGS...   (stdio: spawn the server)
  mcp_client.py [--mode ...] --url http://127.0.0.1:PORT/mcp         (streamable HTTP)
"""

import argparse
import json
import sys

import anyio
from mcp import Client, StdioServerParameters


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="legacy")
    parser.add_argument("--url")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args()
    operations = json.load(sys.stdin)

    if args.url:
        target = args.url
    else:
        if not args.command:
            parser.error("give --url or a server command after --")
        target = StdioServerParameters(command=args.command[0], args=args.command[1:])

    notifications = []
    arrived = anyio.Event()

    async def on_message(message):
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if method is not None:
            notifications.append(method)
            arrived.set()

    results = []
    async with Client(target, mode=args.mode, message_handler=on_message, cache=None) as client:
        for operation in operations:
            try:
                kind = operation["op"]
                if kind == "list_tools":
                    listed = await client.list_tools()
                    results.append([dump(tool) for tool in listed.tools])
                elif kind == "call":
                    result = await client.call_tool(operation["name"], operation.get("arguments", {}))
                    results.append(dump(result))
                elif kind == "wait_notification":
                    wanted = operation["method"]
                    with anyio.move_on_after(operation.get("seconds", 10)):
                        while wanted not in notifications:
                            await arrived.wait()
                            arrived = anyio.Event()
                    results.append({"seen": wanted in notifications})
                else:
                    results.append({"error": f"unknown op {kind}"})
            except Exception as error:  # noqa: BLE001 - reported to the test, which decides
                results.append({"error": f"{type(error).__name__}: {error}"})
        info = client.server_info
        document = {
            "protocol_version": client.protocol_version,
            "server_info": dump(info) if info is not None else None,
            "results": results,
            "notifications": notifications,
        }
    json.dump(document, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    anyio.run(main)
