"""Run a query printed by `chainweaver mine --emit-sql` on DuckDB or Spark SQL (local mode)
over a ChainWeaver Parquet dataset, with the relation `steps` bound to its steps folder.

    python3 scripts/run_sql.py duckdb|spark DATASET QUERY_FILE

Prints one JSON document: {"engine": ..., "rows": [[column values...], ...]}.
"""

import json
import os
import sys


def run_duckdb(dataset, query):
    import duckdb

    con = duckdb.connect()
    pattern = os.path.join(dataset, "steps", "**", "*.parquet")
    # A view cannot take a prepared parameter: the path is quoted as an SQL string literal.
    literal = "'" + pattern.replace("'", "''") + "'"
    con.execute(f"CREATE VIEW steps AS SELECT * FROM read_parquet({literal}, hive_partitioning = true)")
    return [list(row) for row in con.execute(query).fetchall()]


def run_spark(dataset, query):
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("chainweaver-counting")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        # Only the columns the query reads, typed: Spark refuses the nanosecond timestamp
        # columns when it infers the whole schema (step_index is an unsigned 32-bit integer,
        # which Spark reads as a long).
        (
            spark.read.schema("trace_id STRING, step_index BIGINT, tool_name STRING")
            .parquet(os.path.join(dataset, "steps"))
            .createOrReplaceTempView("steps")
        )
        return [list(row) for row in spark.sql(query).collect()]
    finally:
        spark.stop()


def main():
    engine, dataset, query_file = sys.argv[1:4]
    with open(query_file, encoding="utf-8") as f:
        query = f.read()
    runners = {"duckdb": run_duckdb, "spark": run_spark}
    if engine not in runners:
        sys.exit(f"unknown engine {engine!r}: expected duckdb or spark")
    rows = runners[engine](dataset, query)
    json.dump({"engine": engine, "rows": rows}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
