"""Command tool: {"number": n[, "label": s]} -> {"text": "<label> is <n>"}."""
import json
import sys

args = json.load(sys.stdin)
label = args.get("label", "the result")
json.dump({"text": f"{label} is {args['number']}"}, sys.stdout)
