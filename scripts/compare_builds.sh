#!/bin/sh
# Behaviour check between two builds of the binary: on the same input, `import`, `mine
# --holdout 20`, `verify`, then compare `candidates list` and `verdicts list` (JSON) field by
# field, leaving out what legitimately differs between runs or versions (the verdict time, the
# typed split/sample fields and the metadata they replaced, the rejection cause).
#
#   scripts/compare_builds.sh OLD_BINARY NEW_BINARY INPUT...
set -eu
old=$1
new=$2
shift 2
work=$(mktemp -d)
for side in old new; do
    bin=$old
    [ "$side" = new ] && bin=$new
    mkdir -p "$work/$side"
    (
        cd "$work/$side"
        "$bin" -q import "$@" >/dev/null 2>&1 || true
        "$bin" -q mine --holdout 20 >/dev/null
        "$bin" -q --format json candidates list >candidates.json
        "$bin" -q verify >/dev/null 2>&1 || true
        "$bin" -q --format json verdicts list >verdicts.json
    )
done
status=0
python3 - "$work/old" "$work/new" <<'PY' || status=$?
import json, sys

def load(path, key):
    value = json.load(open(path))
    return value[key] if isinstance(value, dict) else value

def strip(doc, keys):
    return {k: v for k, v in doc.items() if k not in keys}

old, new = sys.argv[1], sys.argv[2]
same = True
for name, key, drop in [("candidates", "candidates", {"metadata", "split", "sample"}),
                        ("verdicts", "verdicts", {"verified_at", "cause"})]:
    a = [strip(d, drop) for d in load(f"{old}/{name}.json", key)]
    b = [strip(d, drop) for d in load(f"{new}/{name}.json", key)]
    equal = a == b
    same &= equal
    print(f"{name}: {len(a)} before, {len(b)} after, {'identical' if equal else 'DIFFERENT'}")
    for x, y in zip(a, b):
        for field in x:
            if x.get(field) != y.get(field):
                print(f"  {x.get('id', x.get('candidate_id'))}: {field} differs")
sys.exit(0 if same else 1)
PY
rm -rf "$work"
exit $status
