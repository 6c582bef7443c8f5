#!/usr/bin/env python3
"""Time `tools/call`s of one served flow over stdio with a minimal client: newline-delimited
JSON-RPC written and read on two threads, no SDK, so the client costs far less per call than
the server it measures (the official client takes about 1.4 ms a call, more than either server).

Usage: bench_serve_raw_client.py --calls N [--concurrency K] [--tool NAME] -- SERVER_COMMAND ARGS...
Prints one JSON object: calls, concurrency, seconds, calls_per_second. The session starts with
an `initialize` handshake (2025-06-18); every answer is checked: no error, and the flow's result
holds the `n` it was given.
"""

import argparse
import json
import subprocess
import sys
import threading
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=1, help="calls in flight at once")
    parser.add_argument("--tool", default="echo_flow")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()
    server = subprocess.Popen(
        args.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )

    def send(message: dict) -> None:
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "bench-raw", "version": "1"}}})
    answer = json.loads(server.stdout.readline())
    if "result" not in answer:
        sys.exit(f"initialize failed: {answer}")
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    slots = threading.Semaphore(args.concurrency)
    problems: list[str] = []

    def read_answers() -> None:
        done = 0
        for line in server.stdout:
            message = json.loads(line)
            if "id" not in message:
                continue  # a notification
            result = message.get("result") or {}
            text = json.dumps(result)
            if "error" in message or result.get("isError") or f'"n": {message["id"]}' not in text:
                problems.append(line.decode(errors="replace")[:300])
            done += 1
            slots.release()
            if done == args.calls:
                return

    reader = threading.Thread(target=read_answers)
    reader.start()
    started = time.perf_counter()
    for n in range(1, args.calls + 1):
        slots.acquire()
        send({"jsonrpc": "2.0", "id": n, "method": "tools/call",
              "params": {"name": args.tool, "arguments": {"n": n}}})
    reader.join()
    seconds = time.perf_counter() - started
    server.stdin.close()
    server.kill()
    if problems:
        sys.exit(f"{len(problems)} answers were wrong, the first: {problems[0]}")
    print(json.dumps({"calls": args.calls, "concurrency": args.concurrency,
                      "seconds": round(seconds, 3),
                      "calls_per_second": round(args.calls / seconds, 1)}))


if __name__ == "__main__":
    main()
