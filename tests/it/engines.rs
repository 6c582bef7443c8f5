//! `chainweaver mine --emit-sql` on the engines a team already runs: the printed query, run by
//! DuckDB and by Spark SQL (local mode) over the store's Parquet dataset, finds exactly the
//! closed patterns, supports and occurrence counts that `chainweaver mine` stores.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::{chainweaver, shared_datasets};

/// `python3` with DuckDB and PySpark (and Java for Spark), or `None` (skip); under CI (`CI` set)
/// they must be there.
fn python_with_engines() -> bool {
    if !crate::python_imports("duckdb, pyspark") {
        return false;
    }
    let java = Command::new("java")
        .arg("-version")
        .output()
        .is_ok_and(|out| out.status.success());
    crate::peer_present(java, "java is missing (Spark needs it)")
}

/// `candidates list --format json` of `store`.
#[allow(dead_code)]
fn listed_candidates(dir: &Path, store: &str) -> Value {
    json_ok(
        dir,
        &[
            "-q",
            "--store",
            store,
            "--format",
            "json",
            "candidates",
            "list",
        ],
    )
}

fn json_ok(dir: &Path, args: &[&str]) -> Value {
    let output = chainweaver(dir, args);
    assert!(
        output.status.success(),
        "chainweaver {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

/// `chainweaver import [--input-format FORMAT] SOURCE` into `store`, which must succeed.
fn import_into(dir: &Path, store: &str, input_format: Option<&str>, source: &Path) {
    let mut args = vec!["-q", "--store", store, "import"];
    if let Some(format) = input_format {
        args.extend(["--input-format", format]);
    }
    args.push(source.to_str().unwrap());
    let import = chainweaver(dir, &args);
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
}

/// A pattern as both sides report it: tools, support, occurrences.
type Counted = (Vec<String>, u64, u64);

/// The patterns `chainweaver mine` stores, mined with `flags`.
fn mined(dir: &Path, store: &str, flags: &[&str]) -> BTreeSet<Counted> {
    patterns_of(&mine_output(dir, store, flags))
}

/// What in-process `mine --format json` with `flags` prints.
fn mine_output(dir: &Path, store: &str, flags: &[&str]) -> Value {
    let mut args = vec!["-q", "--store", store, "--format", "json", "mine"];
    args.extend_from_slice(flags);
    json_ok(dir, &args)
}

/// The `patterns` of a `--format json` output.
fn patterns_of(output: &Value) -> BTreeSet<Counted> {
    output["patterns"]
        .as_array()
        .expect("patterns")
        .iter()
        .map(|p| {
            let tools = p["tools"].as_array().unwrap();
            (
                tools
                    .iter()
                    .map(|t| t.as_str().unwrap().to_string())
                    .collect(),
                p["support"].as_u64().unwrap(),
                p["occurrences"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The query `mine --emit-sql` prints for `flags`, run by `engine` over the dataset.
fn counted_by(engine: &str, dir: &Path, store: &str, flags: &[&str]) -> BTreeSet<Counted> {
    let mut args = vec!["--format", "json", "mine", "--emit-sql"];
    args.extend_from_slice(flags);
    let emitted = json_ok(dir, &args);
    let columns = emitted["columns"].as_array().unwrap();
    assert_eq!(columns[..3], ["length", "support", "occurrences"]);
    let query = dir.join(format!("query-{engine}.sql"));
    std::fs::write(&query, emitted["sql"].as_str().unwrap()).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/run_sql.py");
    let output = Command::new("python3")
        .arg(script)
        .args([engine, store])
        .arg(&query)
        .current_dir(dir)
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "{engine}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).expect("JSON rows");
    result["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let row = row.as_array().unwrap();
            assert_eq!(row.len(), columns.len());
            let length = row[0].as_u64().unwrap() as usize;
            let tools: Vec<String> = row[3..]
                .iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect();
            assert_eq!(tools.len(), length, "{row:?}");
            (tools, row[1].as_u64().unwrap(), row[2].as_u64().unwrap())
        })
        .collect()
}

fn assert_engines_agree(dir: &Path, store: &str, flags: &[&str], engines: &[&str]) {
    let expected = mined(dir, store, flags);
    assert!(!expected.is_empty(), "no patterns with {flags:?}");
    for engine in engines {
        let counted = counted_by(engine, dir, store, flags);
        let missing: Vec<_> = expected.difference(&counted).take(3).collect();
        let extra: Vec<_> = counted.difference(&expected).take(3).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{engine} with {flags:?}: {} patterns against {}; missing {missing:?}, extra {extra:?}",
            counted.len(),
            expected.len()
        );
    }
}

#[test]
fn emitted_sql_on_duckdb_and_spark_finds_the_patterns_mine_stores_on_tau_bench() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    if !python_with_engines() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = "tau.parquet";
    let source = datasets.join("tau-bench-retail");
    import_into(dir.path(), store, None, &source);
    assert_engines_agree(dir.path(), store, &[], &["duckdb", "spark"]);
}

/// The longest pattern the known-answer query asks for: past the longest frequent one in these
/// benchmarks at these supports, which the test checks.
const KNOWN_ANSWER_MAX_LENGTH: usize = 40;

#[test]
fn all_frequent_sql_on_duckdb_and_spark_gives_the_known_pattern_counts_of_the_spm_benchmarks() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    if !python_with_engines() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    #[cfg(feature = "ballista")]
    let cluster = local_ballista_cluster();
    // The known answers of ../shared/datasets/README.md (contiguous, from length 1); Spark on
    // one of them, since each Spark run starts a JVM.
    let cases: [(&str, u32, usize, &[&str]); 3] = [
        ("SIGN", 37, 184, &["duckdb", "spark"]),
        ("SIGN", 15, 371, &["duckdb"]),
        ("LEVIATHAN", 30, 1_370, &["duckdb"]),
    ];
    for (name, min_support, known, engines) in cases {
        let store = format!("{name}.parquet");
        if !dir.path().join(&store).exists() {
            let source = datasets.join("spm").join(format!("{name}.txt"));
            import_into(dir.path(), &store, Some("spmf"), &source);
        }
        let support = min_support.to_string();
        let longest = KNOWN_ANSWER_MAX_LENGTH.to_string();
        let flags = [
            "--all-frequent",
            "--min-support",
            &support,
            "--min-length",
            "1",
            "--max-length",
            &longest,
        ];
        let mut first: Option<BTreeSet<Counted>> = None;
        for engine in engines {
            let counted = counted_by(engine, dir.path(), &store, &flags);
            assert_eq!(counted.len(), known, "{engine} on {name}@{min_support}");
            // Nothing reaches the longest length asked for, so no longer pattern was cut off.
            let reached = counted.iter().map(|(tools, _, _)| tools.len()).max();
            assert!(
                reached.is_some_and(|l| l < KNOWN_ANSWER_MAX_LENGTH),
                "{engine} on {name}@{min_support}: longest {reached:?}"
            );
            assert!(
                counted
                    .iter()
                    .all(|(_, s, o)| *s >= u64::from(min_support) && o >= s),
                "{engine} on {name}@{min_support}"
            );
            if let Some(first) = &first {
                assert_eq!(&counted, first, "{engine} on {name}@{min_support}");
            }
            first.get_or_insert(counted);
        }
        // DataFusion, embedded, reads the same Parquet files and reports the same rows. Not on
        // LEVIATHAN: its plan of 41 lengths outgrows this machine's memory there (killed at
        // 24 GB), the limit docs/engines.md describes.
        #[cfg(feature = "datafusion")]
        if name == "SIGN" {
            let mut args = vec!["-q", "--store", &store, "--format", "json", "mine"];
            args.extend(["--engine", "datafusion"]);
            args.extend_from_slice(&flags);
            let output = json_ok(dir.path(), &args);
            assert_eq!(
                Some(patterns_of(&output)),
                first,
                "DataFusion on {name}@{min_support}"
            );
            // And the same plans on a Ballista cluster of two executors.
            #[cfg(feature = "ballista")]
            {
                let mut args = vec!["-q", "--store", &store, "--format", "json", "mine"];
                args.extend(["--engine", "ballista", "--scheduler", &cluster.1]);
                args.extend_from_slice(&flags);
                let output = json_ok(dir.path(), &args);
                assert_eq!(
                    Some(patterns_of(&output)),
                    first,
                    "Ballista on {name}@{min_support}"
                );
            }
        }
    }
}

/// A scheduler and two executors (one task slot each, so stages spread over both) on a
/// runtime of their own, which keeps them up until it is dropped; with the scheduler's URL.
#[cfg(feature = "ballista")]
fn local_ballista_cluster() -> (tokio::runtime::Runtime, String) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let scheduler = runtime
        .block_on(chainweaver_analyzer::engine::ballista::start_local_cluster(
            2, 1,
        ))
        .unwrap();
    (runtime, scheduler)
}

#[test]
fn emitted_sql_agrees_on_generated_loops_failures_and_interleaving_over_day_partitions() {
    if !python_with_engines() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = "generated.parquet";
    generated_parquet_store(dir.path(), store, "600", "7");
    let partitions = day_partitions(dir.path(), store);
    assert!(
        partitions >= 2,
        "the generated traffic spans {partitions} day partitions"
    );
    // Single tools and runs of one repeated tool count; the longest length is cut at 4, where
    // closedness depends on the counts of length 5.
    let flags = [
        "--min-length",
        "1",
        "--max-length",
        "4",
        "--min-support",
        "5",
    ];
    assert_engines_agree(dir.path(), store, &flags, &["duckdb", "spark"]);
    assert_engines_agree(dir.path(), store, &["--min-support", "2"], &["duckdb"]);
}

/// `mine --engine datafusion` against `mine`, on the same store and flags: the same patterns.
#[cfg(feature = "datafusion")]
fn assert_datafusion_agrees(dir: &Path, store: &str, flags: &[&str]) {
    let engine = "datafusion";
    let expected = mined(dir, store, flags);
    assert!(!expected.is_empty(), "no patterns with {flags:?}");
    let mut args = vec!["-q", "--store", store, "--format", "json", "mine"];
    args.extend(["--engine", engine]);
    args.extend_from_slice(flags);
    let output = json_ok(dir, &args);
    assert_eq!(output["engine"], engine);
    let counted = patterns_of(&output);
    let missing: Vec<_> = expected.difference(&counted).take(3).collect();
    let extra: Vec<_> = counted.difference(&expected).take(3).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{engine} on {store} with {flags:?}: {} patterns against {}; missing {missing:?}, extra {extra:?}",
        counted.len(),
        expected.len()
    );
}

/// Counting flags for generated traffic: single tools and runs of a repeated tool count, and
/// the longest length is cut at 4, where closedness depends on the counts of length 5.
#[cfg(feature = "datafusion")]
const GENERATED_FLAGS: [&str; 6] = [
    "--min-length",
    "1",
    "--max-length",
    "4",
    "--min-support",
    "4",
];

/// The `date=` partitions of a Parquet store's steps.
fn day_partitions(dir: &Path, store: &str) -> usize {
    std::fs::read_dir(dir.join(store).join("steps"))
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("date="))
        })
        .count()
}

/// A generated Parquet store of `traces` traces (loops, failures, interleaving) in `dir`,
/// spread over several day partitions.
fn generated_parquet_store(dir: &Path, store: &str, traces: &str, seed: &str) {
    let generate = chainweaver(
        dir,
        &[
            "-q",
            "--store",
            store,
            "datasets",
            "generate",
            "--traces",
            traces,
            "--seed",
            seed,
            "--behaviours",
            "--interleave",
            "0.2",
            "--failure-rate",
            "0.05",
        ],
    );
    assert!(
        generate.status.success(),
        "{}",
        String::from_utf8_lossy(&generate.stderr)
    );
}

#[cfg(feature = "datafusion")]
fn mined_result(output: &Value) -> Value {
    let patterns: Vec<Value> = output["patterns"]
        .as_array()
        .expect("patterns")
        .iter()
        .map(|p| {
            serde_json::json!([
                p["tools"],
                p["support"],
                p["occurrences"],
                p["support_by_day"]
            ])
        })
        .collect();
    let candidates = output["candidates"].clone();
    serde_json::json!({
        "traces": output["traces"],
        "held_out_traces": output["held_out_traces"],
        "steps": output["steps"],
        "distinct_tools": output["distinct_tools"],
        "patterns": patterns,
        "candidates": candidates,
        "skipped": output["skipped"],
    })
}

/// `analyze` with `engine_args` on `store` as it is: per report entry the candidate, its
/// verdict and reason; how many were verified; the behaviours.
#[cfg(feature = "datafusion")]
fn analyzed(dir: &Path, store: &str, engine_args: &[&str]) -> (Vec<Value>, Value, Value) {
    let mut args = vec!["-q", "--store", store, "--format", "json", "analyze"];
    args.extend_from_slice(engine_args);
    let report = json_ok(dir, &args);
    let entries: Vec<Value> = report["report"]
        .as_array()
        .expect("report")
        .iter()
        .map(|e| {
            serde_json::json!([
                e["candidate"]["id"],
                e["verdict"]["status"],
                e["verdict"]["reason"]
            ])
        })
        .collect();
    (
        entries,
        report["verified"].clone(),
        report["behaviours"].clone(),
    )
}

/// `mine` and `mine --engine datafusion` with `flags` store the same candidates.
#[cfg(feature = "datafusion")]
fn assert_same_candidates(dir: &Path, store: &str, flags: &[&str]) -> usize {
    assert_engine_mines_the_same(dir, store, flags, &["--engine", "datafusion"], "datafusion")
}

/// `mine` and `mine` with `engine_args` (an `--engine` and its options) and `flags` print and
/// store the same patterns and candidates; the JSON output names the engine `engine`.
#[cfg(feature = "datafusion")]
fn assert_engine_mines_the_same(
    dir: &Path,
    store: &str,
    flags: &[&str],
    engine_args: &[&str],
    engine_name: &str,
) -> usize {
    let run = |engine: &[&str]| {
        let mut args = vec!["-q", "--store", store, "--format", "json", "mine"];
        args.extend_from_slice(engine);
        args.extend_from_slice(flags);
        json_ok(dir, &args)
    };
    let in_process = run(&[]);
    let engine = run(engine_args);
    assert_eq!(engine["engine"], engine_name);
    let (expected, found) = (mined_result(&in_process), mined_result(&engine));
    let candidates = expected["candidates"].as_array().unwrap().len();
    let sampled = expected["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !c["sample"].is_null())
        .count();
    assert!(candidates > 0, "no candidates on {store} with {flags:?}");
    if expected != found {
        let (e, f) = (&expected["candidates"], &found["candidates"]);
        let first = (0..candidates.max(f.as_array().map_or(0, Vec::len)))
            .find(|&i| e[i] != f[i])
            .map(|i| (i, e[i]["id"].clone(), f[i]["id"].clone()));
        panic!(
            "{store} with {flags:?}: in-process and {engine_name} differ (first differing candidate {first:?}; patterns equal: {}; counts {} / {} {} / {})",
            expected["patterns"] == found["patterns"],
            expected["steps"],
            found["steps"],
            expected["distinct_tools"],
            found["distinct_tools"],
        );
    }
    assert!(
        sampled > 0 || !flags.contains(&"--sample"),
        "no candidate inferred from a sample on {store} with {flags:?}"
    );
    // What is stored is what was printed: the engine ran last.
    let listed = listed_candidates(dir, store);
    assert_eq!(
        listed["candidates"].as_array().map(Vec::len),
        Some(candidates),
        "{listed}"
    );
    candidates
}

/// The stores [`tau_bench_stores`] fills: SQLite and Parquet.
#[cfg(feature = "datafusion")]
const TAU_STORES: [&str; 2] = ["tau.db", "tau.parquet"];

/// A folder with tau-bench retail (shared) imported into each of [`TAU_STORES`]; none when the
/// shared datasets are missing outside CI.
#[cfg(feature = "datafusion")]
fn tau_bench_stores() -> Option<tempfile::TempDir> {
    let source = shared_datasets()?.join("tau-bench-retail");
    let dir = tempfile::tempdir().unwrap();
    for store in TAU_STORES {
        import_into(dir.path(), store, None, &source);
    }
    Some(dir)
}

#[cfg(feature = "datafusion")]
#[test]
fn datafusion_mines_the_patterns_and_candidates_mine_stores_from_parquet_files_and_from_sqlite() {
    let Some(dir) = tau_bench_stores() else {
        return;
    };
    for store in TAU_STORES {
        // Every trace; then the traces a 20% hold-out keeps for verification left out on both
        // sides. Every occurrence read, tools profiled over every call (a small store).
        assert_same_candidates(dir.path(), store, &[]);
        assert_same_candidates(dir.path(), store, &["--holdout", "20"]);
        // Sampled: a few evenly spread occurrences, the probe first.
        assert_same_candidates(
            dir.path(),
            store,
            &["--holdout", "20", "--sample", "9", "--probe", "4"],
        );
    }
    // `analyze` on the store as it is: the same report, verdicts and behaviours either way.
    let in_process = analyzed(dir.path(), "tau.db", &[]);
    assert!(
        in_process.1.as_u64().is_some_and(|n| n > 0),
        "{:?}",
        in_process.1
    );
    assert_eq!(
        analyzed(dir.path(), "tau.db", &["--engine", "datafusion"]),
        in_process
    );
    // Generated loops, failures and interleaving over day partitions; loop candidates' runs
    // counted over the mined traces.
    generated_parquet_store(dir.path(), "generated.parquet", "800", "11");
    assert_datafusion_agrees(dir.path(), "generated.parquet", &GENERATED_FLAGS);
    assert_same_candidates(dir.path(), "generated.parquet", &["--holdout", "20"]);
    assert_same_candidates(
        dir.path(),
        "generated.parquet",
        &["--sample", "25", "--probe", "8", "--max-candidates", "30"],
    );
    // With the smallest memory budget and a temporary folder of its own: the same patterns,
    // and the tables the engine kept between lengths are gone when it exits.
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let mut args = vec![
        "-q",
        "--store",
        "generated.parquet",
        "--format",
        "json",
        "mine",
        "--engine",
        "datafusion",
        "--engine-memory",
        "64",
    ];
    args.extend_from_slice(&GENERATED_FLAGS);
    let budgeted = crate::chainweaver_with_env(dir.path(), &args, &[("TMPDIR", &scratch)]);
    assert!(
        budgeted.status.success(),
        "{}",
        String::from_utf8_lossy(&budgeted.stderr)
    );
    let budgeted: Value = serde_json::from_slice(&budgeted.stdout).unwrap();
    assert_eq!(
        patterns_of(&budgeted),
        mined(dir.path(), "generated.parquet", &GENERATED_FLAGS)
    );
    let left: Vec<_> = std::fs::read_dir(&scratch).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A gap with a hold-out, a sample and a probe: on tau-bench retail, every part of gapped
/// mining at once.
#[cfg(feature = "datafusion")]
const GAPPED_HELD_OUT_FLAGS: [&str; 8] = [
    "--max-gap",
    "2",
    "--holdout",
    "20",
    "--sample",
    "9",
    "--probe",
    "4",
];

/// Gapped patterns (`--max-gap`): counted by the embedded engine, their occurrences matched
/// along the traces' tool names, and the same patterns, supports, days and candidates as the
/// in-process gapped miner, on real traffic and on generated interleaving.
#[cfg(feature = "datafusion")]
#[test]
fn datafusion_mines_the_gapped_patterns_and_candidates_mine_stores() {
    let Some(dir) = tau_bench_stores() else {
        return;
    };
    for store in TAU_STORES {
        assert_same_candidates(dir.path(), store, &["--max-gap", "1"]);
        assert_same_candidates(dir.path(), store, &GAPPED_HELD_OUT_FLAGS);
    }
    // A gap finds what contiguous counting does not: otherwise this test would not tell.
    let gapped = mined(dir.path(), "tau.db", &["--max-gap", "2"]);
    let contiguous = mined(dir.path(), "tau.db", &[]);
    assert_ne!(gapped, contiguous);
    // Interleaved generated traffic, where other calls sit inside behaviours; loop candidates'
    // runs counted with the gap; a gap wide enough for the windowed join.
    generated_parquet_store(dir.path(), "generated.parquet", "600", "17");
    assert_same_candidates(dir.path(), "generated.parquet", &["--max-gap", "1"]);
    assert_same_candidates(
        dir.path(),
        "generated.parquet",
        &[
            "--max-gap",
            "20",
            "--max-length",
            "4",
            "--sample",
            "25",
            "--probe",
            "8",
        ],
    );
}

/// A Parquet file beside the committed parts of a day (what an append that crashed after its
/// renames and before its manifest leaves) is not counted: the engine reads that day's
/// committed files one by one, and the other days by their folders.
#[cfg(feature = "datafusion")]
#[test]
fn a_part_no_manifest_lists_is_not_counted_by_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    generated_parquet_store(dir.path(), "generated.parquet", "400", "3");
    let expected = mined(dir.path(), "generated.parquet", &GENERATED_FLAGS);
    let day = std::fs::read_dir(dir.path().join("generated.parquet/steps"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .expect("a day partition");
    let part = std::fs::read_dir(&day)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .expect("a part");
    std::fs::copy(
        &part,
        day.join("part-999999999999-ffffffffffffffff.parquet"),
    )
    .unwrap();
    assert_datafusion_agrees(dir.path(), "generated.parquet", &GENERATED_FLAGS);
    assert_eq!(
        mined(dir.path(), "generated.parquet", &GENERATED_FLAGS),
        expected
    );
}

/// `--engine-memory` is the embedded engine's budget; anywhere else it is a usage error.
#[test]
fn engine_memory_without_the_datafusion_engine_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["mine", "--engine-memory", "1024"][..],
        &[
            "mine",
            "--engine",
            "ballista",
            "--scheduler",
            "df://localhost:1",
            "--engine-memory",
            "1024",
        ],
    ] {
        let refused = chainweaver(dir.path(), args);
        assert_eq!(refused.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(
            stderr.contains("--engine-memory sets the budget of --engine datafusion"),
            "{stderr}"
        );
    }
    let too_small = chainweaver(dir.path(), &["mine", "--engine-memory", "10"]);
    assert_eq!(too_small.status.code(), Some(2));
}

#[cfg(feature = "datafusion")]
#[test]
fn a_part_without_a_column_the_engine_reads_is_named_and_a_retry_after_repair_works() {
    if !crate::python_imports("pyarrow") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = "generated.parquet";
    generated_parquet_store(dir.path(), store, "200", "8");
    let part = std::fs::read_dir(dir.path().join(store).join("steps"))
        .unwrap()
        .flat_map(|day| std::fs::read_dir(day.unwrap().path()).unwrap())
        .map(|file| file.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "parquet"))
        .max()
        .expect("a steps part");
    let good = std::fs::read(&part).unwrap();
    let mine = |dir: &Path| {
        chainweaver(
            dir,
            &[
                "-q",
                "--store",
                store,
                "--format",
                "json",
                "mine",
                "--engine",
                "datafusion",
            ],
        )
    };
    let expected = mine(dir.path());
    assert!(expected.status.success());
    let before = listed_candidates(dir.path(), store);
    // The same rows, rewritten by another writer without one column.
    let dropped = Command::new("python3")
        .args([
            "-c",
            "import sys, pyarrow.parquet as pq; \
             t = pq.read_table(sys.argv[1]); \
             pq.write_table(t.drop([sys.argv[2]]), sys.argv[1], compression='zstd')",
        ])
        .arg(&part)
        .arg("tool_name")
        .output()
        .expect("python3 runs");
    assert!(
        dropped.status.success(),
        "{}",
        String::from_utf8_lossy(&dropped.stderr)
    );
    let failed = mine(dir.path());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "{stderr}");
    let name = part.file_name().unwrap().to_string_lossy();
    assert!(
        stderr.contains(name.as_ref()) && stderr.contains("`tool_name`"),
        "the error names the file and the column: {stderr}"
    );
    assert_eq!(
        listed_candidates(dir.path(), store),
        before,
        "the stored results are unchanged"
    );
    std::fs::write(&part, &good).unwrap();
    let retried = mine(dir.path());
    assert!(
        retried.status.success(),
        "{}",
        String::from_utf8_lossy(&retried.stderr)
    );
    let expected = mined_result(&serde_json::from_slice(&expected.stdout).unwrap());
    assert_eq!(
        mined_result(&serde_json::from_slice(&retried.stdout).unwrap()),
        expected
    );
    // The same rows rewritten with pyarrow's defaults (Snappy, as Spark and DuckDB write
    // too) read the same, with and without the engine.
    let rewritten = Command::new("python3")
        .args([
            "-c",
            "import sys, pyarrow.parquet as pq; pq.write_table(pq.read_table(sys.argv[1]), sys.argv[1])",
        ])
        .arg(&part)
        .output()
        .expect("python3 runs");
    assert!(
        rewritten.status.success(),
        "{}",
        String::from_utf8_lossy(&rewritten.stderr)
    );
    assert!(
        std::fs::read(&part).unwrap() != good,
        "pyarrow wrote the part anew"
    );
    for engine in [&["--engine", "datafusion"][..], &[]] {
        let mut args = vec!["-q", "--store", store, "--format", "json", "mine"];
        args.extend_from_slice(engine);
        assert_eq!(
            mined_result(&json_ok(dir.path(), &args)),
            expected,
            "{engine:?}"
        );
    }
}

#[cfg(feature = "datafusion")]
#[test]
fn a_corrupt_parquet_file_fails_the_engine_with_its_name_and_a_retry_after_repair_works() {
    let dir = tempfile::tempdir().unwrap();
    let store = "generated.parquet";
    let generate = chainweaver(
        dir.path(),
        &[
            "-q", "--store", store, "datasets", "generate", "--traces", "200",
        ],
    );
    assert!(
        generate.status.success(),
        "{}",
        String::from_utf8_lossy(&generate.stderr)
    );
    let steps = dir.path().join(store).join("steps");
    let part = std::fs::read_dir(&steps)
        .unwrap()
        .flat_map(|day| std::fs::read_dir(day.unwrap().path()).unwrap())
        .map(|file| file.unwrap().path())
        .find(|path| path.extension().is_some_and(|e| e == "parquet"))
        .expect("a steps part");
    let good = std::fs::read(&part).unwrap();
    let before = json_ok(
        dir.path(),
        &[
            "-q", "--store", store, "--format", "json", "traces", "stats",
        ],
    );
    let run = |dir: &Path| {
        chainweaver(
            dir,
            &["-q", "--store", store, "mine", "--engine", "datafusion"],
        )
    };
    let name = part.file_name().unwrap().to_string_lossy();
    // No Parquet magic; and the magic at both ends around a footer length far past the file's
    // size, which the engine's own footer decoder answers with a panic.
    for damage in [&b"not a parquet file"[..], b"PAR1 not a Parquet file PAR1"] {
        std::fs::write(&part, damage).unwrap();
        let failed = run(dir.path());
        let stderr = String::from_utf8_lossy(&failed.stderr);
        assert!(!failed.status.success(), "{stderr}");
        assert!(
            stderr.contains(name.as_ref()),
            "the error names the file: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    std::fs::write(&part, &good).unwrap();
    let retried = run(dir.path());
    assert!(
        retried.status.success(),
        "{}",
        String::from_utf8_lossy(&retried.stderr)
    );
    let after = json_ok(
        dir.path(),
        &[
            "-q", "--store", store, "--format", "json", "traces", "stats",
        ],
    );
    assert_eq!(before, after, "the store is unchanged");
}

#[cfg(not(feature = "datafusion"))]
#[test]
fn without_the_feature_the_datafusion_engine_is_refused_with_how_to_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let generate = chainweaver(
        dir.path(),
        &["-q", "datasets", "generate", "--traces", "20"],
    );
    assert!(generate.status.success());
    let refused = chainweaver(dir.path(), &["mine", "--engine", "datafusion"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--features datafusion"));
}

#[test]
fn all_frequent_without_an_engine_that_reports_it_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = chainweaver(dir.path(), &["mine", "--all-frequent"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--all-frequent applies to --emit-sql and --engine datafusion only"),
        "{stderr}"
    );
}

/// The same plans on a Ballista cluster: a scheduler and two executors (one task slot each, so
/// the stages spread over both) started in this test process, and `chainweaver mine --engine
/// ballista` as a separate process talking to them over gRPC and Arrow Flight. The cluster
/// counts (contiguous and gapped); the client locates the chosen patterns' occurrences over the
/// tool names; the patterns and candidates printed and stored are the in-process miner's, field
/// for field.
#[cfg(feature = "ballista")]
#[test]
fn ballista_with_two_executors_mines_the_patterns_and_candidates_mine_stores() {
    let (runtime, scheduler) = local_ballista_cluster();
    let on_ballista = ["--engine", "ballista", "--scheduler", scheduler.as_str()];
    let same = |dir: &Path, store: &str, flags: &[&str]| {
        assert_engine_mines_the_same(dir, store, flags, &on_ballista, "ballista")
    };
    let dir = tempfile::tempdir().unwrap();
    if let Some(datasets) = shared_datasets() {
        import_into(
            dir.path(),
            "tau.parquet",
            None,
            &datasets.join("tau-bench-retail"),
        );
        same(dir.path(), "tau.parquet", &[]);
        same(
            dir.path(),
            "tau.parquet",
            &["--holdout", "20", "--sample", "9", "--probe", "4"],
        );
        // Gapped: the cluster counts the ends level by level, the client matches occurrences.
        same(dir.path(), "tau.parquet", &GAPPED_HELD_OUT_FLAGS);
        // And `analyze` on the store as it is: the same report, verdicts and behaviours.
        let in_process = analyzed(dir.path(), "tau.parquet", &[]);
        assert!(in_process.1.as_u64().is_some_and(|n| n > 0));
        assert_eq!(
            analyzed(dir.path(), "tau.parquet", &on_ballista),
            in_process
        );
    }
    generated_parquet_store(dir.path(), "generated.parquet", "800", "11");
    let partitions = day_partitions(dir.path(), "generated.parquet");
    assert!(partitions >= 2, "{partitions} day partitions");
    same(dir.path(), "generated.parquet", &GENERATED_FLAGS);
    same(
        dir.path(),
        "generated.parquet",
        &["--holdout", "30", "--sample", "25"],
    );
    same(dir.path(), "generated.parquet", &["--max-gap", "1"]);
    same(
        dir.path(),
        "generated.parquet",
        &["--max-gap", "20", "--max-length", "4", "--sample", "25"],
    );
    // The gapped levels' tables, written beside the store for the executors, are gone.
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".cluster-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    drop(runtime);
}

/// A scheduler nobody listens on: a clear error naming it, and the store is untouched.
#[cfg(feature = "ballista")]
#[test]
fn an_unreachable_ballista_scheduler_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    generated_parquet_store(dir.path(), "generated.parquet", "50", "3");
    let port = crate::free_port();
    let scheduler = format!("df://127.0.0.1:{port}");
    let failed = chainweaver(
        dir.path(),
        &[
            "-q",
            "--store",
            "generated.parquet",
            "mine",
            "--engine",
            "ballista",
            "--scheduler",
            &scheduler,
        ],
    );
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(stderr.contains("Ballista"), "{stderr}");
}

/// `--engine ballista` needs `--scheduler`, and `--scheduler` needs it.
#[test]
fn ballista_and_scheduler_go_together() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["mine", "--engine", "ballista"][..],
        &["mine", "--scheduler", "df://localhost:50050"][..],
    ] {
        let refused = chainweaver(dir.path(), args);
        assert_eq!(refused.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&refused.stderr)
                .contains("--engine ballista and --scheduler URL go together"),
            "{}",
            String::from_utf8_lossy(&refused.stderr)
        );
    }
}

/// A SQLite store on a cluster: refused before any connection, with how to get a Parquet one.
#[cfg(feature = "ballista")]
#[test]
fn a_sqlite_store_on_ballista_is_refused_with_how_to_convert_it() {
    let dir = tempfile::tempdir().unwrap();
    let generate = chainweaver(
        dir.path(),
        &[
            "-q", "--store", "small.db", "datasets", "generate", "--traces", "20", "--seed", "5",
        ],
    );
    assert!(generate.status.success());
    let refused = chainweaver(
        dir.path(),
        &[
            "-q",
            "--store",
            "small.db",
            "mine",
            "--engine",
            "ballista",
            "--scheduler",
            "df://127.0.0.1:9",
        ],
    );
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("traces convert"), "{stderr}");
}

/// A part of a cluster, `chainweaver cluster ARGS` as a process of its own (its log in
/// `dir/NAME.log`), killed when dropped.
#[cfg(feature = "ballista")]
struct ClusterPart {
    child: std::process::Child,
    log: PathBuf,
}

#[cfg(feature = "ballista")]
impl ClusterPart {
    fn start(dir: &Path, name: &str, args: &[&str]) -> Self {
        let log = dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_chainweaver"))
            .arg("cluster")
            .args(args)
            .current_dir(dir)
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap();
        Self { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

#[cfg(feature = "ballista")]
impl Drop for ClusterPart {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A scheduler process (executor timeout 10 s) on a free port, and its `df://` URL.
#[cfg(feature = "ballista")]
fn scheduler_process(dir: &Path) -> (ClusterPart, String) {
    let port = crate::free_port();
    let bind = format!("127.0.0.1:{port}");
    let scheduler = ClusterPart::start(
        dir,
        "scheduler",
        &["scheduler", "--bind", &bind, "--executor-timeout", "10"],
    );
    (scheduler, format!("df://localhost:{port}"))
}

/// An executor process of one task slot polling `scheduler`, writing its shuffle output to
/// `work_dir`.
#[cfg(feature = "ballista")]
fn executor_process(dir: &Path, name: &str, scheduler: &str, work_dir: &Path) -> ClusterPart {
    let ports = (crate::free_port(), crate::free_port());
    executor_process_at(dir, name, scheduler, work_dir, ports, None, 1)
}

/// An executor process listening on 127.0.0.1 at `ports` (Arrow Flight, gRPC), reached by the
/// others at `external_host` when given, with `slots` task slots.
#[cfg(feature = "ballista")]
fn executor_process_at(
    dir: &Path,
    name: &str,
    scheduler: &str,
    work_dir: &Path,
    (port, grpc_port): (u16, u16),
    external_host: Option<&str>,
    slots: usize,
) -> ClusterPart {
    let (port, grpc_port, slots) = (port.to_string(), grpc_port.to_string(), slots.to_string());
    let mut args = vec![
        "executor",
        "--scheduler",
        scheduler,
        "--bind-host",
        "127.0.0.1",
        "--port",
        &port,
        "--grpc-port",
        &grpc_port,
        "--slots",
        &slots,
        "--work-dir",
        work_dir.to_str().unwrap(),
    ];
    if let Some(host) = external_host {
        args.extend(["--external-host", host]);
    }
    ClusterPart::start(dir, name, &args)
}

/// Every file of a folder, with its length, recursively: what "the store did not change"
/// compares.
#[cfg(feature = "ballista")]
fn files_of(root: &Path) -> BTreeSet<(PathBuf, u64)> {
    let mut found = BTreeSet::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                let length = std::fs::metadata(&path).unwrap().len();
                found.insert((path, length));
            }
        }
    }
    found
}

/// A cluster of separate processes, a scheduler and two executors, and one executor killed
/// (SIGKILL) once it has written shuffle output for the job `mine` submitted: the scheduler
/// drops it, runs its tasks and the stages it served again on the other, and `mine` prints
/// and stores the same patterns and candidates as the in-process miner.
#[cfg(feature = "ballista")]
#[test]
fn a_ballista_executor_killed_mid_query_is_replaced_and_the_mined_results_are_the_same() {
    let dir = tempfile::tempdir().unwrap();
    generated_parquet_store(dir.path(), "generated.parquet", "3000", "11");
    let expected = mined_result(&mine_output(
        dir.path(),
        "generated.parquet",
        &GENERATED_FLAGS,
    ));

    let (scheduler, url) = scheduler_process(dir.path());
    let (doomed_work, other_work) = (dir.path().join("work-1"), dir.path().join("work-2"));
    std::fs::create_dir_all(&doomed_work).unwrap();
    std::fs::create_dir_all(&other_work).unwrap();
    let mut doomed = executor_process(dir.path(), "executor-1", &url, &doomed_work);
    let _other = executor_process(dir.path(), "executor-2", &url, &other_work);

    let mut mine = Command::new(env!("CARGO_BIN_EXE_chainweaver"))
        .args(["-q", "--store", "generated.parquet", "--format", "json"])
        .args(["mine", "--engine", "ballista", "--scheduler", &url])
        .args(["--query-timeout", "180"])
        .args(GENERATED_FLAGS)
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The doomed executor has run a task of the job once its work folder holds output.
    let started = std::time::Instant::now();
    while files_of(&doomed_work).is_empty() {
        assert!(
            mine.try_wait().unwrap().is_none(),
            "mine ended before the executor ran a task:\n{}",
            doomed.log()
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(300),
            "the executor never ran a task:\n{}\n{}",
            doomed.log(),
            scheduler.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    doomed.child.kill().unwrap();
    doomed.child.wait().unwrap();
    assert!(
        mine.try_wait().unwrap().is_none(),
        "the executor was killed after the query ended"
    );

    let output = mine.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}\nscheduler:\n{}",
        String::from_utf8_lossy(&output.stderr),
        scheduler.log()
    );
    let found = mined_result(&serde_json::from_slice(&output.stdout).unwrap());
    assert!(
        found == expected,
        "the patterns or candidates differ from mine's"
    );
    // The scheduler saw the executor go.
    assert!(
        scheduler.log().contains("heartbeat timed out"),
        "{}",
        scheduler.log()
    );
    // What is stored is what was printed.
    let listed = listed_candidates(dir.path(), "generated.parquet");
    assert_eq!(
        listed["candidates"].as_array().map(Vec::len),
        found["candidates"].as_array().map(Vec::len)
    );
}

/// A TCP forwarder from `from` to `to`: for `outage` after the first connection it closes
/// every connection it accepts at once, as an executor that went away after finishing its
/// work does; before and after, it relays both ways. Returns how many it has closed.
#[cfg(feature = "ballista")]
fn forwarder_with_an_outage(
    from: std::net::SocketAddr,
    to: std::net::SocketAddr,
    outage: std::time::Duration,
) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
    use std::sync::atomic::Ordering;
    let listener = std::net::TcpListener::bind(from).unwrap();
    let closed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = closed.clone();
    std::thread::spawn(move || {
        let mut first: Option<std::time::Instant> = None;
        for incoming in listener.incoming() {
            let Ok(client) = incoming else { continue };
            let since = *first.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() < outage {
                counter.fetch_add(1, Ordering::SeqCst);
                drop(client);
                continue;
            }
            let Ok(server) = std::net::TcpStream::connect(to) else {
                continue;
            };
            let relay = |mut from: std::net::TcpStream, mut to: std::net::TcpStream| {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Both);
                });
            };
            relay(client.try_clone().unwrap(), server.try_clone().unwrap());
            relay(server, client);
        }
    });
    closed
}

/// The client reads each query's result from the executor that wrote it. An executor that
/// polls the scheduler but whose results cannot be read for a while (its address advertised
/// through a forwarder that closes every connection for 20 s) fails that read; `mine` runs the
/// length's query again, warns on stderr, lists the retry in its JSON, and prints the patterns
/// the in-process miner finds.
#[cfg(feature = "ballista")]
#[test]
fn a_result_the_client_cannot_read_from_its_executor_is_counted_again() {
    let dir = tempfile::tempdir().unwrap();
    generated_parquet_store(dir.path(), "generated.parquet", "300", "5");
    let expected = mined(dir.path(), "generated.parquet", &GENERATED_FLAGS);
    let (_scheduler, url) = scheduler_process(dir.path());
    // The executor listens on 127.0.0.1 and is reached at 127.0.0.3, through the forwarders.
    let (port, grpc_port) = (crate::free_port(), crate::free_port());
    let advertised = |port: u16| std::net::SocketAddr::from(([127, 0, 0, 3], port));
    let bound = |port: u16| std::net::SocketAddr::from(([127, 0, 0, 1], port));
    // Ballista's client fails a read at once, or after reconnecting by itself for about 9 s
    // (3 s apart); the outage outlasts that, and ends before `mine`'s retries (1, 5, 15 and
    // 30 s apart) run out.
    let outage = std::time::Duration::from_secs(20);
    let flight = forwarder_with_an_outage(advertised(port), bound(port), outage);
    let _grpc =
        forwarder_with_an_outage(advertised(grpc_port), bound(grpc_port), Default::default());
    let work_dir = dir.path().join("work");
    std::fs::create_dir_all(&work_dir).unwrap();
    let executor = executor_process_at(
        dir.path(),
        "executor",
        &url,
        &work_dir,
        (port, grpc_port),
        Some("127.0.0.3"),
        2,
    );
    let output = Command::new(env!("CARGO_BIN_EXE_chainweaver"))
        .args(["--store", "generated.parquet", "--format", "json"])
        .args(["mine", "--engine", "ballista", "--scheduler", &url])
        .args(["--query-timeout", "180"])
        .args(GENERATED_FLAGS)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}\nexecutor:\n{}",
        String::from_utf8_lossy(&output.stderr),
        executor.log()
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "warning: the query counting patterns of length 1 lost an endpoint and ran again"
        ),
        "{stderr}"
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let warnings = json["warnings"].as_array().unwrap();
    assert!(
        !warnings.is_empty()
            && warnings.iter().all(|w| w
                .as_str()
                .unwrap()
                .starts_with("the query counting patterns of length 1 lost an endpoint")),
        "{warnings:?}"
    );
    assert!(flight.load(std::sync::atomic::Ordering::SeqCst) > 0);
    assert_eq!(patterns_of(&json), expected);
}

/// A cluster with no executor: the query waits, and `--query-timeout` gives up on it with an
/// error naming the scheduler and what to check; the store does not change.
#[cfg(feature = "ballista")]
#[test]
fn a_ballista_query_nothing_runs_is_given_up_after_the_query_timeout() {
    let dir = tempfile::tempdir().unwrap();
    generated_parquet_store(dir.path(), "generated.parquet", "50", "3");
    let store_before = files_of(&dir.path().join("generated.parquet"));
    let (_scheduler, url) = scheduler_process(dir.path());
    let failed = chainweaver(
        dir.path(),
        &[
            "-q",
            "--store",
            "generated.parquet",
            "mine",
            "--engine",
            "ballista",
            "--scheduler",
            &url,
            "--query-timeout",
            "3",
        ],
    );
    assert_eq!(failed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        stderr.contains(&format!(
            "scheduler {url}: the query counting patterns of length 1 did not finish in 3 s"
        )) && stderr.contains("has the cluster an executor left?"),
        "{stderr}"
    );
    assert_eq!(
        files_of(&dir.path().join("generated.parquet")),
        store_before
    );
}

/// `--query-timeout` is for a cluster: without `--scheduler` it is a usage error.
#[test]
fn query_timeout_without_a_scheduler_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let refused = chainweaver(dir.path(), &["mine", "--query-timeout", "60"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--scheduler <URL>"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// Without the `ballista` feature, `cluster` says how to get it.
#[cfg(not(feature = "ballista"))]
#[test]
fn without_the_feature_a_cluster_part_is_refused_with_how_to_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let refused = chainweaver(dir.path(), &["cluster", "scheduler"]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("built without the Ballista engine")
            && stderr.contains("--features ballista"),
        "{stderr}"
    );
}

/// An executor's `--scheduler` is checked when the command line is read: a usage error that
/// shows the value and the expected form, before anything starts.
#[test]
fn a_cluster_executor_with_a_scheduler_url_without_a_port_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let refused = chainweaver(
        dir.path(),
        &["cluster", "executor", "--scheduler", "df://scheduler"],
    );
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("'df://scheduler'") && stderr.contains("expected df://HOST:PORT"),
        "{stderr}"
    );
}
