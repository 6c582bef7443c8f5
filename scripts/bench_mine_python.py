"""Time the Python chainweaver 0.14.1 `ChainObserver.suggest_flows` on synthetic JSON Lines.

Run by scripts/bench_mine_python.sh inside a virtualenv holding chainweaver==0.14.1:

    python bench_mine_python.py <steps.jsonl> <max_length|none> <timeout_s>

The file holds one step a line (`trace_id`, `tool_name`, `inputs`, `outputs`, `error`), as
`mine_bench jsonl` writes it. Steps become `ObservedTrace`s (grouped by trace id, in order),
loaded with `ChainObserver.from_traces`; a failed step has `outputs = None`, and an output that
is not an object is wrapped as `{"result": value}` (the package wants dicts). Only
`suggest_flows` is timed, in a child process killed after `timeout_s` seconds. Prints one JSON
object.
"""

import json
import multiprocessing
import sys
import time
from datetime import datetime, timezone


def load(path):
    from chainweaver.observation import ObservedStep, ObservedTrace

    now = datetime.now(timezone.utc)
    traces, by_id = [], {}
    steps = 0
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            trace_id = record["trace_id"]
            trace = by_id.get(trace_id)
            if trace is None:
                trace = ObservedTrace(trace_id=trace_id, source="synthetic", started_at=now)
                by_id[trace_id] = trace
                traces.append(trace)
            inputs = record.get("inputs")
            if not isinstance(inputs, dict):
                inputs = {"input": inputs}
            outputs = record.get("outputs")
            if record.get("error") is not None:
                outputs = None
            elif outputs is not None and not isinstance(outputs, dict):
                outputs = {"result": outputs}
            trace.steps.append(
                ObservedStep(tool_name=record["tool_name"], inputs=inputs, outputs=outputs,
                             recorded_at=now)
            )
            steps += 1
    return traces, steps


def run(path, max_length, queue):
    from chainweaver.observer import ChainObserver

    started = time.perf_counter()
    traces, steps = load(path)
    load_s = time.perf_counter() - started
    observer = ChainObserver.from_traces(traces)
    started = time.perf_counter()
    suggestions = observer.suggest_flows(min_occurrences=3, min_length=2, max_length=max_length)
    queue.put({"steps": steps, "traces": len(traces), "load_s": load_s,
               "suggest_s": time.perf_counter() - started, "suggestions": len(suggestions)})


def main():
    path, max_length, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
    max_length = None if max_length == "none" else int(max_length)
    queue = multiprocessing.Queue()
    child = multiprocessing.Process(target=run, args=(path, max_length, queue))
    started = time.perf_counter()
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        result = {"timed_out_after_s": round(time.perf_counter() - started, 1)}
    else:
        result = queue.get() if not queue.empty() else {"error": f"exit code {child.exitcode}"}
    result.update({"file": path, "max_length": max_length})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
