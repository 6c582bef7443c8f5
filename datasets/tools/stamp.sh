#!/bin/sh
# Command tool: wraps its JSON input as {"echo": <input>, "marker": "stamped"}.
input=$(cat)
printf '{"echo": %s, "marker": "stamped"}\n' "$input"
