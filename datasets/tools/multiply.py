"""Command tool: {"value": x, "factor": f} -> {"product": x * f}."""
import json
import sys

args = json.load(sys.stdin)
json.dump({"product": args["value"] * args["factor"]}, sys.stdout)
