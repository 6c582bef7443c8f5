#!/usr/bin/env python3
"""Time sequential `tools/call`s of one served flow over stdio with the official Python client.

Usage: bench_serve_client.py --calls N [--concurrency K] [--tool NAME] -- SERVER_COMMAND ARGS...
Prints one JSON object: calls, seconds, calls_per_second, median_ms, p99_ms.
Every answer is checked: the flow must return the `n` it was given.
"""

import argparse
import json
import statistics
import sys
import time

import anyio
from mcp import Client, StdioServerParameters


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--tool", default="echo_flow")
    parser.add_argument("--concurrency", type=int, default=1, help="calls in flight at once")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()
    server = StdioServerParameters(command=args.command[0], args=args.command[1:])
    async with Client(server, mode="legacy", cache=None) as client:
        async def call(n: int) -> None:
            result = await client.call_tool(args.tool, {"n": n})
            if result.is_error:
                raise SystemExit(f"call {n} failed: {result.content}")
            text = json.dumps(result.structured_content) + " ".join(
                getattr(block, "text", "") for block in result.content
            )
            if str(n) not in text:
                raise SystemExit(f"call {n}: the answer does not carry n: {text}")

        for n in range(args.warmup):
            await call(n)
        latencies = []

        async def worker(first: int) -> None:
            for n in range(first, args.calls, args.concurrency):
                begin = time.perf_counter()
                await call(100000 + n)
                latencies.append((time.perf_counter() - begin) * 1000.0)

        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for first in range(args.concurrency):
                group.start_soon(worker, first)
        seconds = time.perf_counter() - started
    latencies.sort()
    json.dump(
        {
            "calls": args.calls,
            "concurrency": args.concurrency,
            "seconds": round(seconds, 3),
            "calls_per_second": round(args.calls / seconds, 1),
            "median_ms": round(statistics.median(latencies), 3),
            "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1], 3),
        },
        sys.stdout,
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    anyio.run(main)
