"""A scripted client on the official Python MCP SDK, for the recording proxy's tests.

    python3 mcp_record_client.py --plan PLAN.json --out RESULTS.jsonl [--mode legacy|2026-07-28|auto]
        [--concurrent] -- SERVER_COMMAND ARGS...

PLAN.json is a list of calls, each `{"tool": NAME, "arguments": {...}}` with an optional `"meta"`
object sent as the request's `_meta`. The client connects to the server command (which may be
`chainweaver record -- ...`), lists the tools, makes the calls (one after the other, or all at once
with --concurrent, so that they are pipelined), and writes one JSON line per call to RESULTS.jsonl:
`{"tool", "arguments", "result"}` with the CallToolResult exactly as the client received it, or
`{"tool", "arguments", "error"}` when the call raised. A first line `{"tools": {...}}` maps each
listed tool to whether it declares an outputSchema.
"""

import argparse
import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters


def dump(result):
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def one(client, call):
    record = {"tool": call["tool"], "arguments": call.get("arguments", {})}
    try:
        result = await client.call_tool(call["tool"], call.get("arguments", {}), meta=call.get("meta"))
        record["result"] = dump(result)
    except Exception as error:  # the test reads what happened, whatever it was
        record["error"] = f"{type(error).__name__}: {error}"
    return record


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--mode", default="legacy")
    parser.add_argument("--concurrent", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    with open(args.plan) as f:
        plan = json.load(f)
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    records = []
    async with Client(params, mode=args.mode, read_timeout_seconds=60) as client:
        tools = await client.list_tools()
        records.append({"tools": {t.name: t.output_schema is not None for t in tools.tools}})
        if args.concurrent:
            records.extend(await asyncio.gather(*(one(client, call) for call in plan)))
        else:
            for call in plan:
                records.append(await one(client, call))
    with open(args.out, "w") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
