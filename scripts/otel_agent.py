#!/usr/bin/env python3
"""A tiny tool-using "agent" instrumented with the OpenTelemetry Python SDK.

No model: a fixed plan per conversation calls local Python functions as tools. Each call is an
`execute_tool` span following the GenAI semantic conventions (or, for the last conversation,
OpenInference `TOOL` spans), under an `invoke_agent` span, next to a `chat` span that is not a
tool call. The spans go to one of:

  --endpoint URL   the SDK's OTLP/HTTP protobuf exporter (a live receiver such as `collect`;
                   `--gzip` compresses)
  --json FILE      OTLP JSON Lines, one export request a line, encoded by the SDK's own OTLP
                   encoder and written in the OTLP/HTTP JSON mapping (hex ids)
  --protobuf FILE  the SDK's protobuf export requests, each after its 4-byte big-endian length

It prints a JSON summary of what it did (conversations, calls, failed calls) on stdout, so a
test can compare what a reader stored with what the producer made.
"""

import argparse
import json
import struct
import sys

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Status, StatusCode

USERS = {7: {"name": "Ann", "tier": "gold"}, 8: {"name": "Bo", "tier": "basic"}}
ORDERS = {7: [{"order_id": "o-71", "total": 42.5}], 8: [{"order_id": "o-81", "total": 9}]}


def lookup_user(user_id):
    return USERS[user_id]


def list_orders(user_id):
    return ORDERS.get(user_id, [])


def refund(order_id):
    if order_id == "o-81":
        raise ValueError(f"order {order_id} is past the refund window")
    return {"refunded": order_id}


TOOLS = {"lookup_user": lookup_user, "list_orders": list_orders, "refund": refund}


def plan(user_id):
    """The calls a conversation makes: the user, their orders, a refund of the first."""
    orders = list_orders(user_id)
    return [
        ("lookup_user", {"user_id": user_id}),
        ("list_orders", {"user_id": user_id}),
        ("refund", {"order_id": orders[0]["order_id"]}),
    ]


class JsonLinesExporter(SpanExporter):
    """Writes each export as one OTLP JSON line, using the SDK's own OTLP encoder."""

    def __init__(self, path, framed_protobuf=False):
        self.out = open(path, "ab")
        self.framed = framed_protobuf

    def export(self, spans):
        request = encode_spans(spans)
        if self.framed:
            body = request.SerializeToString()
            self.out.write(struct.pack(">I", len(body)) + body)
        else:
            document = MessageToDict(request)
            hex_ids(document)
            self.out.write(json.dumps(document).encode() + b"\n")
        self.out.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self):
        self.out.close()


def hex_ids(node):
    """Protobuf's JSON mapping writes bytes as base64; OTLP JSON writes ids as hex."""
    import base64

    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            hex_ids(item)


def run_tool(tracer, conversation, call_id, name, arguments, openinference):
    with tracer.start_as_current_span(f"execute_tool {name}") as span:
        if openinference:
            span.set_attribute("openinference.span.kind", "TOOL")
            span.set_attribute("tool.name", name)
            span.set_attribute("tool_call.id", call_id)
            span.set_attribute("input.value", json.dumps(arguments))
            span.set_attribute("session.id", conversation)
        else:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", name)
            span.set_attribute("gen_ai.tool.call.id", call_id)
            span.set_attribute("gen_ai.tool.call.arguments", json.dumps(arguments))
            span.set_attribute("gen_ai.conversation.id", conversation)
        try:
            result = TOOLS[name](**arguments)
        except Exception as error:  # the tool's failure is the span's status
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            if not openinference:
                span.set_attribute("error.type", type(error).__name__)
            return False
        span.set_attribute(
            "output.value" if openinference else "gen_ai.tool.call.result", json.dumps(result)
        )
        return True


def main():
    parser = argparse.ArgumentParser()
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--endpoint")
    target.add_argument("--json")
    target.add_argument("--protobuf")
    parser.add_argument("--conversations", type=int, default=4)
    parser.add_argument("--gzip", action="store_true", help="compress what --endpoint sends")
    args = parser.parse_args()

    provider = TracerProvider(resource=Resource.create({"service.name": "refund-agent"}))
    if args.endpoint:
        from opentelemetry.exporter.otlp.proto.http import Compression
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        compression = Compression.Gzip if args.gzip else Compression.NoCompression
        exporter = OTLPSpanExporter(endpoint=args.endpoint, compression=compression)
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    elif args.json:
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(args.json)))
    else:
        provider.add_span_processor(
            SimpleSpanProcessor(JsonLinesExporter(args.protobuf, framed_protobuf=True))
        )
    tracer = provider.get_tracer("refund-agent")

    summary = {"conversations": {}, "calls": 0, "failed": 0}
    for n in range(args.conversations):
        conversation = f"conv-{n}"
        openinference = n == args.conversations - 1
        user_id = 7 if n % 2 == 0 else 8
        calls = []
        with tracer.start_as_current_span("invoke_agent refund-agent") as agent:
            agent.set_attribute("gen_ai.operation.name", "invoke_agent")
            agent.set_attribute("gen_ai.conversation.id", conversation)
            with tracer.start_as_current_span("chat stand-in") as chat:
                chat.set_attribute("gen_ai.operation.name", "chat")
            for index, (name, arguments) in enumerate(plan(user_id)):
                call_id = f"{conversation}-call-{index}"
                ok = run_tool(tracer, conversation, call_id, name, arguments, openinference)
                calls.append({"tool": name, "call_id": call_id, "ok": ok})
                summary["calls"] += 1
                summary["failed"] += 0 if ok else 1
        summary["conversations"][conversation] = calls
    provider.shutdown()
    json.dump(summary, sys.stdout)
    print()


if __name__ == "__main__":
    main()
