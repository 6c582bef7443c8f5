#!/bin/sh
# Mining plus inference of two builds side by side: the `mine_bench` example of each (for an
# older build: `git worktree add DIR COMMIT`, then in DIR `cargo build --release -p
# chainweaver-analyzer --example mine_bench` with its own CARGO_TARGET_DIR), run in turn on the
# same JSON Lines file, ROUNDS times each, every run the median of five analyses.
#
#   scripts/bench_mine_builds.sh OLD_MINE_BENCH NEW_MINE_BENCH FILE [ROUNDS]
#
# FILE comes from `mine_bench jsonl 100000 FILE`. Prints one line per run (mine + infer, mine,
# infer seconds; patterns; candidates) and the ratio of the medians, new / old.
set -eu
old=$1
new=$2
file=$3
rounds=${4:-3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
i=0
while [ "$i" -lt "$rounds" ]; do
    for side in old new; do
        bench=$old
        [ "$side" = new ] && bench=$new
        printf '%s ' "$side" >>"$out"
        "$bench" jsonl-mine "$file" --repeat 5 2>/dev/null >>"$out"
    done
    i=$((i + 1))
done
python3 - "$out" <<'PY'
import json, statistics, sys
runs = {"old": [], "new": []}
for line in open(sys.argv[1]):
    side, report = line.split(" ", 1)
    r = json.loads(report)
    runs[side].append(r["mine_plus_infer_s"])
    print(f'{side}: mine+infer {r["mine_plus_infer_s"]:.4f} s, mine {r["mine_s"]:.4f} s, '
          f'infer {r["infer_s"]:.4f} s, {r["patterns"]} patterns, {r["candidates"]} candidates')
old, new = statistics.median(runs["old"]), statistics.median(runs["new"])
print(f"median mine+infer: old {old:.4f} s, new {new:.4f} s, new / old {new / old:.2f}x")
PY
