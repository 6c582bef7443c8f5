"""Command tool: {"a": x, "b": y} -> {"sum": x + y}."""
import json
import sys

args = json.load(sys.stdin)
json.dump({"sum": args["a"] + args["b"]}, sys.stdout)
