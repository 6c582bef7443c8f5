#!/usr/bin/env python3
"""Replay stored traces as OpenTelemetry GenAI tool spans, with the OpenTelemetry Python SDK.

Reads the JSON Lines that `chainweaver traces export` writes (one trace with its steps a line)
and, for each trace, opens an `invoke_agent` span holding one `execute_tool` span per step, in
step order: the tool's name, the arguments and the result as JSON text, and the trace id as the
conversation id. The SDK's OTLP/HTTP protobuf exporter sends them to ENDPOINT (a live receiver
such as `chainweaver collect`).

    scripts/otel_replay.py TRACES.jsonl ENDPOINT

Prints a JSON summary ({"traces": ..., "tool_spans": ...}) on stdout.
"""

import json
import sys

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


def main() -> None:
    traces_path, endpoint = sys.argv[1], sys.argv[2]
    provider = TracerProvider(resource=Resource.create({"service.name": "replay"}))
    # The processor's default queue (2,048 spans) drops what a fast replay makes beyond it.
    processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint), max_queue_size=1 << 20)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("chainweaver-replay")
    traces = tool_spans = 0
    with open(traces_path, encoding="utf-8") as lines:
        for line in lines:
            stored = json.loads(line)
            conversation = stored["trace"]["trace_id"]
            traces += 1
            with tracer.start_as_current_span("invoke_agent"):
                for step in stored["steps"]:
                    attributes = {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": step["tool_name"],
                        "gen_ai.conversation.id": conversation,
                        "gen_ai.tool.call.arguments": json.dumps(step["inputs"]),
                    }
                    if step.get("outputs") is not None:
                        attributes["gen_ai.tool.call.result"] = json.dumps(step["outputs"])
                    name = "execute_tool " + step["tool_name"]
                    with tracer.start_as_current_span(name, attributes=attributes):
                        tool_spans += 1
    if not provider.force_flush(60_000):
        sys.exit("the exporter did not flush within 60 s")
    provider.shutdown()
    print(json.dumps({"traces": traces, "tool_spans": tool_spans}))


if __name__ == "__main__":
    main()
