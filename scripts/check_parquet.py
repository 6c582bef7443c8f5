#!/usr/bin/env python3
"""Check a ChainWeaver Parquet dataset with an independent reader (pyarrow).

Reads <dir>/traces and <dir>/steps the way other engines do (hive partitions `date=...`,
hidden and `_` files ignored) and compares what it finds with the expectations given on the
command line. Exits 0 when everything matches, 1 on a mismatch (with a message saying what
differs), 2 on bad usage and 3 when pyarrow is not installed.

    python3 scripts/check_parquet.py DATASET --traces 4 --steps 9 \
        --trace-columns trace_id,session_id,... --step-columns trace_id,step_index,...

`--traces` counts distinct trace ids (a trace appended again has several rows; the one with
the highest write_seq is its current state). `--steps` counts step rows. `--check-json` also
parses every JSON text column.
"""

import argparse
import json
import sys


def fail(message):
    print(f"check_parquet: {message}", file=sys.stderr)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", help="the dataset directory")
    parser.add_argument("--traces", type=int, help="expected number of distinct traces")
    parser.add_argument("--steps", type=int, help="expected number of steps")
    parser.add_argument("--trace-columns", help="expected trace columns, comma-separated, in order")
    parser.add_argument("--step-columns", help="expected step columns, comma-separated, in order")
    parser.add_argument("--check-json", action="store_true", help="parse every JSON column")
    args = parser.parse_args()

    try:
        import pyarrow.compute as pc
        import pyarrow.dataset as ds
    except ImportError as error:
        print(f"check_parquet: pyarrow is not importable: {error}", file=sys.stderr)
        sys.exit(3)

    import os

    if not os.path.isdir(args.dataset):
        fail(f"{args.dataset} is not a directory")

    def table(name):
        path = os.path.join(args.dataset, name)
        if not os.path.isdir(path):
            return None
        # The physical schema of the files; the partition column `date` comes from the paths.
        dataset = ds.dataset(path, format="parquet", partitioning="hive")
        return dataset.to_table()

    traces = table("traces")
    steps = table("steps")

    def columns_of(tbl):
        # Drop the hive partition column, which is not stored in the files.
        return [c for c in tbl.column_names if c != "date"] if tbl is not None else []

    problems = []
    if args.trace_columns is not None:
        want = args.trace_columns.split(",")
        got = columns_of(traces)
        if got != want:
            problems.append(f"trace columns are {got}, expected {want}")
    if args.step_columns is not None:
        want = args.step_columns.split(",")
        got = columns_of(steps)
        if got != want:
            problems.append(f"step columns are {got}, expected {want}")
    if args.traces is not None:
        got = 0 if traces is None else len(pc.unique(traces["trace_id"]))
        if got != args.traces:
            problems.append(f"{got} distinct traces, expected {args.traces}")
    if args.steps is not None:
        got = 0 if steps is None else steps.num_rows
        if got != args.steps:
            problems.append(f"{got} steps, expected {args.steps}")
    if steps is not None and steps.num_rows:
        keys = set(zip(steps["trace_id"].to_pylist(), steps["step_index"].to_pylist()))
        if len(keys) != steps.num_rows:
            problems.append("a (trace_id, step_index) pair occurs more than once")
    if args.check_json:
        for name, tbl, cols in [
            ("traces", traces, ["metadata"]),
            ("steps", steps, ["inputs", "outputs", "metadata"]),
        ]:
            if tbl is None:
                continue
            for col in cols:
                for row, text in enumerate(tbl[col].to_pylist()):
                    if text is None:
                        continue
                    try:
                        json.loads(text)
                    except ValueError as error:
                        problems.append(f"{name}.{col} row {row} is not JSON: {error}")
                        break

    if problems:
        fail("; ".join(problems))
    print(
        f"check_parquet: ok: {0 if traces is None else traces.num_rows} trace rows, "
        f"{0 if steps is None else steps.num_rows} step rows"
    )


if __name__ == "__main__":
    main()
