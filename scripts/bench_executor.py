"""Per-step executor overhead of the Python chainweaver package on a 10-step linear flow.

Each step calls a trivial tool ({"value": n} -> {"value": n + 1}) with pydantic input and output
models, the same flow the Rust example `bench_executor` runs. Prints one JSON line.
"""
import json
import sys
import time

from pydantic import BaseModel

from chainweaver import Flow, FlowExecutor, FlowRegistry, FlowStep, Tool

STEPS = 10


class Value(BaseModel):
    value: int


def inc(args: Value) -> dict:
    return {"value": args.value + 1}


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    tool = Tool(name="inc", description="add one", input_schema=Value, output_schema=Value, fn=inc)
    flow = Flow(
        name="ten",
        description="ten increments",
        steps=[FlowStep(tool_name="inc", input_mapping={"value": "value"}) for _ in range(STEPS)],
    )
    registry = FlowRegistry()
    registry.register_flow(flow)
    executor = FlowExecutor(registry=registry)
    executor.register_tool(tool)
    result = executor.execute_flow("ten", {"value": 0})
    assert result.success and result.final_output["value"] == STEPS, result
    for _ in range(min(200, iterations)):
        executor.execute_flow("ten", {"value": 0})
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iterations // 5):
            executor.execute_flow("ten", {"value": 0})
        runs.append((time.perf_counter() - start) / (iterations // 5))
    per_flow = sorted(runs)[len(runs) // 2]
    # The tool itself (pydantic validation excluded) is a dict literal: its cost is negligible.
    print(json.dumps({"impl": "python chainweaver 0.14.1", "steps": STEPS,
                      "per_flow_us": per_flow * 1e6, "per_step_us": per_flow * 1e6 / STEPS}))


main()
