#!/usr/bin/env python3
"""The FlowServer benchmark's `echo` tool as a persistent command tool: started once by
`chainweaver serve` (`persistent = true` in the manifest), it answers each call's JSON line
with the input it was given."""

import json
import sys

for line in sys.stdin:
    call = json.loads(line)
    sys.stdout.write(json.dumps({"id": call["id"], "output": call["input"]}) + "\n")
    sys.stdout.flush()
