#!/bin/sh
# A Parquet store in S3-compatible object storage against the same folder on disk, through the
# binary: moto's S3 server on this machine (python3 -m moto.server, from .ci/requirements.txt)
# holds the folder as boto3 uploads it (scripts/s3_client.py). Each process runs from start to
# exit under /usr/bin/time -v (wall time, peak resident memory); the two stores take turns for
# BENCH_S3_ROUNDS rounds (default 2). The script checks that both give the same results.
#
#   scripts/bench_object_storage.sh [data_dir]
#
# Workloads: tau-bench retail (../shared/datasets) with `analyze`, and a generated store of
# BENCH_S3_STEPS steps (default 1000000) with `mine --holdout 20`, then `verify`, then
# `mine --engine datafusion`, as generated (many small parts) and compacted. data_dir (default: $CARGO_TARGET_DIR/bench-s3, or
# target/bench-s3) keeps the stores between runs. The server counts as part of the remote
# side: it runs on the same two cores, in Python, so the figures bound what a real object
# store costs from above, not below.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}
data=${1:-$target/bench-s3}
steps=${BENCH_S3_STEPS:-1000000}
rounds=${BENCH_S3_ROUNDS:-2}
datasets=${CHAINWEAVER_DATASETS:-$root/../shared/datasets}
mkdir -p "$data"

cargo build --release --quiet --features "s3 datafusion" --bin chainweaver
bin="$target/release/chainweaver"

. "$root/scripts/timed.sh"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
endpoint="http://127.0.0.1:$port"
python3 -m moto.server -H 127.0.0.1 -p "$port" >"$data/moto.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
until python3 -c "import urllib.request; urllib.request.urlopen('$endpoint')" 2>/dev/null; do
    sleep 0.2
done
export AWS_ENDPOINT_URL="$endpoint" AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=test \
    AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
s3() { python3 "$root/scripts/s3_client.py" "$endpoint" "$@"; }
s3 make-bucket bench

# What a run found, without its timings.
found() {
    python3 -c '
import json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if not k.endswith("_time") and k != "verified_at"}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
print(json.dumps(strip(json.load(open(sys.argv[1]))), sort_keys=True))
' "$1"
}

# `timed` each of LABEL ARGS on the folder and in the bucket, in turn; both must agree.
both() {
    # `timed` sets `label`.
    what=$1
    shift
    timed "$what-disk" --store "$disk" --format json "$@"
    requests_before=$(grep -c '" 2[0-9][0-9] ' "$data/moto.log" || true)
    timed "$what-s3" --store "$url" --format json "$@"
    requests=$(($(grep -c '" 2[0-9][0-9] ' "$data/moto.log" || true) - requests_before))
    echo "  ($requests requests to the server)"
    found "$data/$what-disk.out" >"$data/$what-disk.found"
    found "$data/$what-s3.out" >"$data/$what-s3.found"
    cmp -s "$data/$what-disk.found" "$data/$what-s3.found" || {
        echo "$what: the bucket gave other results than the folder" >&2
        exit 1
    }
}

# A fresh copy of FOLDER on disk and in the bucket under NAME, with nothing mined yet.
fresh() {
    disk="$data/$2-disk.parquet"
    rm -rf "$disk"
    cp -r "$1" "$disk"
    s3 upload "$1" bench "$2-$round.parquet"
    url="s3://bench/$2-$round.parquet"
}

tau="$data/tau.parquet"
if [ ! -e "$tau" ]; then
    "$bin" -q --store "$tau" import "$datasets/tau-bench-retail" >/dev/null
fi
generated="$data/synth-$steps.parquet"
if [ ! -e "$generated" ]; then
    "$bin" -q --store "$generated" datasets generate --traces $((steps * 100 / 737)) --seed 1 \
        --truth "$data/truth-$steps.json" >/dev/null
fi

# The same store compacted (`traces compact`), as docs/engines.md advises before an upload.
compacted="$data/synth-$steps-compacted.parquet"
if [ ! -e "$compacted" ]; then
    cp -r "$generated" "$compacted"
    "$bin" -q --store "$compacted" traces compact >/dev/null
fi
echo "part files: $(find "$generated" -name '*.parquet' -type f | wc -l) as generated," \
    "$(find "$compacted" -name '*.parquet' -type f | wc -l) compacted"

echo "# label wall_s peak_MiB"
round=1
while [ "$round" -le "$rounds" ]; do
    echo "## round $round: tau-bench retail"
    fresh "$tau" tau
    both analyze analyze
    echo "## round $round: $steps generated steps"
    fresh "$generated" synth
    both mine mine --holdout 20
    both verify verify
    both engine mine --engine datafusion
    echo "## round $round: the same, compacted"
    fresh "$compacted" compacted
    both compacted-mine mine --holdout 20
    both compacted-verify verify
    both compacted-engine mine --engine datafusion
    round=$((round + 1))
done
echo "the same results from the folder and the bucket"
