#!/usr/bin/env python3
"""The Python ChainWeaver FlowServer (pip `chainweaver[mcp]`) serving the benchmark's trivial
flow over stdio: one step, `echo`, which returns the `n` it is given."""

from pydantic import BaseModel

from chainweaver import Flow, FlowExecutor, FlowRegistry, FlowStep, Tool
from chainweaver.mcp import FlowServer


class N(BaseModel):
    n: int


tool = Tool(
    name="echo",
    description="Return n",
    input_schema=N,
    output_schema=N,
    fn=lambda given: {"n": given.n},
)
flow = Flow(
    name="echo_flow",
    description="The benchmark's trivial flow",
    steps=[FlowStep(tool_name="echo", input_mapping={"n": "n"})],
)
registry = FlowRegistry()
registry.register_flow(flow)
executor = FlowExecutor(registry=registry)
executor.register_tool(tool)
FlowServer(executor, name="bench", flow_names=["echo_flow"], force_expose=True).serve()
