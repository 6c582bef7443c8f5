#!/usr/bin/env python3
"""A stand-in for a function-calling model behind an OpenAI-compatible Chat Completions endpoint,
so the Berkeley Function Calling Leaderboard's own harness (pip `bfcl-eval`) can run its
multi-turn categories here, with no model and no network, and write the result file it writes
for any model. Used to make tests/data/bfcl (see its README).

For each request it finds the test entry by the conversation's first user message, and answers
the current turn (the number of user messages so far) with the entry's ground-truth calls as
`tool_calls`; once the turn's tool results are in, it answers with text, which ends the turn.
Every third turn it first makes a call that cannot succeed (a `cd` into a folder that is not
there, or the turn's first call with a made-up argument), as models do, so the harness records
failed calls too.

Usage: bfcl_standin_model.py PORT DATA_DIR
DATA_DIR: bfcl_eval's `data` folder (test entries, possible answers, function docs).
"""

import ast
import http.server
import json
import pathlib
import sys

CATEGORIES = ["multi_turn_base"]
# Functions of the file system class, whose failures a `cd` into a missing folder shows.
FILE_SYSTEM = {"cd", "ls", "mkdir", "mv", "cp", "cat", "grep", "touch", "echo", "sort", "diff",
               "tail", "wc", "find", "du", "rm", "rmdir", "pwd"}


def load(data_dir: pathlib.Path):
    entries = {}
    for category in CATEGORIES:
        questions = data_dir.glob(f"BFCL_v*_{category}.json")
        for path in questions:
            for line in path.read_text().splitlines():
                entry = json.loads(line)
                entries[entry["id"]] = entry
        for path in (data_dir / "possible_answer").glob(f"BFCL_v*_{category}.json"):
            for line in path.read_text().splitlines():
                answer = json.loads(line)
                if answer["id"] in entries:
                    entries[answer["id"]]["ground_truth"] = answer["ground_truth"]
    by_first_message = {}
    for entry in entries.values():
        first = entry["question"][0][0]["content"]
        by_first_message[first] = entry
    parameters = {}
    for path in (data_dir / "multi_turn_func_doc").glob("*.json"):
        for line in path.read_text().splitlines():
            doc = json.loads(line)
            props = doc.get("parameters", {}).get("properties", {})
            parameters[doc["name"]] = list(props)
    return by_first_message, parameters


def parse_call(text: str, parameters: dict) -> tuple[str, dict]:
    call = ast.parse(text, mode="eval").body
    name = call.func.id if isinstance(call.func, ast.Name) else ast.unparse(call.func)
    arguments = {}
    names = parameters.get(name, [])
    for position, arg in enumerate(call.args):
        arguments[names[position] if position < len(names) else f"arg{position}"] = ast.literal_eval(arg)
    for keyword in call.keywords:
        arguments[keyword.arg] = ast.literal_eval(keyword.value)
    return name, arguments


def main() -> None:
    port = int(sys.argv[1])
    by_first_message, parameters = load(pathlib.Path(sys.argv[2]))
    counter = [0]

    wrong_ids: set[str] = set()

    def tool_calls(calls, wrong=False):
        out = []
        for name, arguments in calls:
            counter[0] += 1
            call_id = f"call_{counter[0]:06d}"
            if wrong:
                wrong_ids.add(call_id)
            out.append({"id": call_id, "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)}})
        return out

    def turn_calls(entry: dict, turn: int):
        truth = entry.get("ground_truth", [])
        return [parse_call(text, parameters) for text in truth[turn]] if turn < len(truth) else []

    def answer(request: dict) -> dict:
        messages = request["messages"]
        users = [m for m in messages if m.get("role") == "user"]
        entry = by_first_message.get(users[0]["content"]) if users else None
        message = {"role": "assistant", "content": "Done."}
        turn = len(users) - 1
        if entry is not None and messages[-1].get("role") == "user":
            calls = turn_calls(entry, turn)
            if calls and turn % 3 == 2:
                # A first try that fails; the turn's calls follow once its result is in.
                name, _ = calls[0]
                wrong = ("cd", {"folder": "no_such_folder"}) if name in FILE_SYSTEM else (name, {})
                message = {"role": "assistant", "content": None,
                           "tool_calls": tool_calls([wrong], wrong=True)}
            elif calls:
                message = {"role": "assistant", "content": None, "tool_calls": tool_calls(calls)}
        elif entry is not None and messages[-1].get("role") == "tool":
            last = [m for m in messages if m.get("role") == "assistant"][-1]
            made = [c["id"] for c in (last.get("tool_calls") or [])]
            if made and all(call_id in wrong_ids for call_id in made):
                message = {"role": "assistant", "content": None,
                           "tool_calls": tool_calls(turn_calls(entry, turn))}
        return {
            "id": f"chatcmpl-{counter[0]}", "object": "chat.completion", "created": 0,
            "model": request.get("model", "standin"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("content-length", "0"))
            request = json.loads(self.rfile.read(length))
            body = json.dumps(answer(request)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
