//! Parquet store tests: the shared store suite, dataset layout, an independent reader
//! (pyarrow) and lossless conversion SQLite -> Parquet -> SQLite.

#![cfg(feature = "parquet")]
// Test helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::Command;

use chainweaver_recorder::RecorderError;
use chainweaver_recorder::model::{ObservedStep, ObservedTrace, TraceWithSteps};
use chainweaver_recorder::store::{ParquetStore, SqliteStore, TraceStore, copy_all};
use serde_json::json;

use crate::sqlite::suite;

fn open_parquet(dir: &Path) -> Box<dyn TraceStore> {
    Box::new(ParquetStore::open(&dir.join("dataset")).unwrap())
}

#[test]
fn every_filter() {
    suite::every_filter(open_parquet);
}

#[test]
fn every_sort_and_summaries() {
    suite::every_sort_and_summaries(open_parquet);
}

#[test]
fn paging() {
    suite::paging(open_parquet);
}

#[test]
fn get_and_stream_in_order() {
    suite::get_and_stream_in_order(open_parquet);
}

#[test]
fn step_columns_and_counts() {
    suite::step_columns_and_counts(open_parquet);
}

#[test]
fn upsert_and_duplicates() {
    suite::upsert_and_duplicates(open_parquet);
}

#[test]
fn documents() {
    suite::documents(open_parquet);
}

#[test]
fn reopen_after_appends() {
    suite::reopen_after_appends(open_parquet);
}

#[test]
fn failed_append_changes_nothing() {
    suite::failed_append_changes_nothing(open_parquet);
}

#[test]
fn exact_json() {
    suite::exact_json(open_parquet);
}

#[test]
fn raw_appends_equal_appends() {
    suite::raw_appends_equal_appends(open_parquet);
}

/// Every file below `dir` (relative, `/`-separated), sorted.
fn files_below(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let relative = path.strip_prefix(root).unwrap();
                out.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn layout_is_partitioned_by_day_and_append_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dataset");
    let mut store = ParquetStore::open(&root).unwrap();
    let (traces, steps) = suite::fixture();
    store.append(&traces, &steps).unwrap();
    let first = files_below(&root);
    let parts: Vec<&String> = first.iter().filter(|f| f.ends_with(".parquet")).collect();
    // Four traces over three start days plus one without a start: one part per partition for
    // traces; steps only where a trace has steps (d-third has none).
    let trace_parts: Vec<&str> = parts
        .iter()
        .filter(|f| f.starts_with("traces/"))
        .map(|f| f.rsplit_once('/').unwrap().0)
        .collect();
    assert_eq!(
        trace_parts,
        [
            "traces/date=2025-12-31",
            "traces/date=2026-01-01",
            "traces/date=2026-01-02",
            "traces/date=unknown"
        ]
    );
    assert_eq!(parts.iter().filter(|f| f.starts_with("steps/")).count(), 3);
    assert!(first.iter().any(|f| f.starts_with("_commits/")));
    assert!(!first.iter().any(|f| f.contains(".tmp")), "{first:?}");

    // A later append adds files and leaves the earlier ones byte for byte.
    let before: Vec<(String, Vec<u8>)> = first
        .iter()
        .map(|f| (f.clone(), std::fs::read(root.join(f)).unwrap()))
        .collect();
    let mut end = ObservedTrace::new("d-third", "import");
    end.agent = Some("late".into());
    store
        .append(
            &[end],
            &[ObservedStep::new("d-third", 0, "search", json!({}))],
        )
        .unwrap();
    for (file, bytes) in &before {
        assert_eq!(
            &std::fs::read(root.join(file)).unwrap(),
            bytes,
            "{file} changed"
        );
    }
    let second = files_below(&root);
    assert_eq!(second.len(), first.len() + 3, "{second:?}");
    // The upsert stays in the trace's first partition, so its steps stay together.
    assert!(
        second
            .iter()
            .filter(|f| f.starts_with("steps/date=unknown/"))
            .count()
            == 1
    );
}

#[test]
fn steps_of_a_trace_spread_over_many_appends_stream_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dataset");
    let mut store = ParquetStore::open(&root).unwrap();
    // Ten traces, started one by one; each append then adds one step to every open trace, in
    // descending index order across appends for odd traces. Trace rows are re-sent (upserts).
    let ids: Vec<String> = (0..10).map(|t| format!("trace-{t:02}")).collect();
    let mut expected: Vec<Vec<u32>> = vec![Vec::new(); ids.len()];
    for round in 0..10u32 {
        let opened = &ids[..=round as usize];
        let traces: Vec<ObservedTrace> = opened
            .iter()
            .map(|id| ObservedTrace::new(id.as_str(), "rounds"))
            .collect();
        let mut steps = Vec::new();
        for (t, id) in opened.iter().enumerate() {
            let index = if t % 2 == 1 { 100 - round } else { round };
            steps.push(ObservedStep::new(
                id.as_str(),
                index,
                "tool",
                json!({"round": round}),
            ));
            expected[t].push(index);
        }
        store.append(&traces, &steps).unwrap();
    }
    let reopened = ParquetStore::open(&root).unwrap();
    let mut seen: Vec<(String, Vec<u32>)> = Vec::new();
    reopened
        .for_each_trace(&mut |t| {
            seen.push((
                t.trace.trace_id,
                t.steps.iter().map(|s| s.step_index).collect(),
            ));
            Ok(())
        })
        .unwrap();
    assert_eq!(seen.len(), 10);
    for (t, (id, indices)) in seen.iter().enumerate() {
        assert_eq!(id, &ids[t]);
        let mut want = expected[t].clone();
        want.sort_unstable();
        assert_eq!(indices, &want, "{id}");
    }
    assert_eq!(
        reopened.get_trace("trace-01").unwrap().unwrap().steps.len(),
        9
    );
    assert_eq!(reopened.counts().unwrap().steps, 55);
    // The batched read and the narrow tool walk see the same steps, in step order.
    let batch = reopened.get_traces(&["trace-07", "trace-02"]).unwrap();
    let batch_indices: Vec<Vec<u32>> = batch
        .iter()
        .map(|t| t.steps.iter().map(|s| s.step_index).collect())
        .collect();
    assert_eq!(batch_indices, vec![seen[7].1.clone(), seen[2].1.clone()]);
    // Some steps of a trace, by place in step order, the same steps the whole read gives.
    let places: &[usize] = &[0, 2];
    let partial = reopened.get_trace_steps(&[("trace-07", places)]).unwrap();
    assert_eq!(partial.len(), 1);
    assert_eq!(
        partial[0].steps,
        vec![batch[0].steps[0].clone(), batch[0].steps[2].clone()]
    );
    let mut walked: Vec<String> = Vec::new();
    reopened
        .for_each_step_tool(&mut |step| {
            walked.push(step.trace_id.to_owned());
            Ok(())
        })
        .unwrap();
    let want: Vec<String> = seen
        .iter()
        .flat_map(|(id, indices)| std::iter::repeat_n(id.clone(), indices.len()))
        .collect();
    assert_eq!(walked, want);
    assert_eq!(reopened.trace_ids().unwrap(), ids);
}

#[test]
fn newer_layout_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dataset");
    drop(ParquetStore::open(&root).unwrap());
    std::fs::write(
        root.join("_chainweaver.json"),
        r#"{"format":"chainweaver-parquet","version":99}"#,
    )
    .unwrap();
    let err = ParquetStore::open(&root).unwrap_err();
    assert!(
        matches!(err, RecorderError::SchemaTooNew { found: 99, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("dataset"), "{err}");
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// True when `python3` can import pyarrow. Without it the check is skipped locally but fails
/// under CI.
fn pyarrow_available() -> bool {
    let available = Command::new("python3")
        .args(["-c", "import pyarrow"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !available {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but python3 cannot import pyarrow (pip install pyarrow)"
        );
        eprintln!("skipping: python3 cannot import pyarrow");
    }
    available
}

#[test]
fn pyarrow_reads_the_dataset() {
    if !pyarrow_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dataset");
    let mut store = ParquetStore::open(&root).unwrap();
    let (traces, steps) = suite::fixture();
    store.append(&traces, &steps[..4]).unwrap();
    // An upsert: two rows for b-first; pyarrow must still count 4 distinct traces.
    store.append(&traces[..1], &steps[4..]).unwrap();
    let trace_columns =
        "trace_id,session_id,source,agent,started_at,ended_at,metadata,trace_seq,write_seq";
    let step_columns = "trace_id,step_index,call_id,tool_name,inputs,outputs,error_type,\
                        error_message,started_at,ended_at,duration_ms,recorded_at,metadata,\
                        is_error,trace_seq,write_seq";
    let script = repo_root().join("scripts/check_parquet.py");
    let run = |traces: &str, steps: &str| {
        Command::new("python3")
            .arg(&script)
            .arg(&root)
            .args(["--traces", traces, "--steps", steps])
            .args([
                "--trace-columns",
                trace_columns,
                "--step-columns",
                step_columns,
            ])
            .arg("--check-json")
            .output()
            .unwrap()
    };
    let ok = run("4", "9");
    assert!(
        ok.status.success(),
        "{}{}",
        String::from_utf8_lossy(&ok.stdout),
        String::from_utf8_lossy(&ok.stderr)
    );
    // The checker really checks: a wrong count fails with a message.
    let wrong = run("4", "10");
    assert_eq!(wrong.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("9 steps, expected 10"));
    // Compacted, the folder as other engines read it holds the same traces and steps, with
    // no trace row twice and no file of the replaced parts left.
    store.compact(&mut |_| {}).unwrap();
    let compacted = run("4", "9");
    assert!(
        compacted.status.success(),
        "{}",
        String::from_utf8_lossy(&compacted.stderr)
    );
    let said = String::from_utf8_lossy(&compacted.stdout);
    assert!(said.contains("ok: 4 trace rows, 9 step rows"), "{said}");
}

mod lossless {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Map, Value};

    /// Number texts that lossy stores get wrong.
    const ODD_NUMBERS: &[&str] = &[
        "1.0",
        "1e5",
        "1E+2",
        "-0",
        "-0.0",
        "0.1",
        "12345678901234567890123",
        "-1.5e-7",
        "1.7976931348623157e308",
        "5e-324",
        "100",
    ];

    fn number() -> impl Strategy<Value = Value> {
        prop_oneof![
            proptest::sample::select(ODD_NUMBERS)
                .prop_map(|text| serde_json::from_str::<Value>(text).unwrap()),
            any::<i64>().prop_map(|n| serde_json::from_str::<Value>(&n.to_string()).unwrap()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| serde_json::from_str::<Value>(&format!("{f:?}")).unwrap()),
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z]{0,6}",
            "\\PC{0,8}",
            proptest::sample::select(&["ключ", "名前", "emoji 🎉", "", "a\"b\\c\n"][..])
                .prop_map(str::to_owned),
        ]
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            number(),
            text().prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec((text(), inner), 0..5)
                    .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
            ]
        })
    }

    fn metadata() -> impl Strategy<Value = Map<String, Value>> {
        prop::collection::vec((text(), json_value()), 0..3)
            .prop_map(|pairs| pairs.into_iter().collect())
    }

    fn timestamp() -> impl Strategy<Value = Option<chainweaver_recorder::model::Timestamp>> {
        // 1970..2200, nanosecond precision.
        proptest::option::of(
            (0i64..7_258_118_400_000_000_000).prop_map(chrono::DateTime::from_timestamp_nanos),
        )
    }

    fn trace_with_steps(id: String) -> impl Strategy<Value = TraceWithSteps> {
        let trace = (
            proptest::option::of(text()),
            text(),
            proptest::option::of(text()),
            timestamp(),
            timestamp(),
            metadata(),
        );
        let step = (
            proptest::option::of(text()),
            "[a-z_]{1,8}",
            json_value(),
            proptest::option::of(json_value()),
            proptest::option::of(text()),
            proptest::option::of(text()),
            (timestamp(), timestamp(), timestamp()),
            proptest::option::of(-1e9f64..1e9),
            metadata(),
        );
        (trace, prop::collection::vec(step, 0..5)).prop_map(move |(t, steps)| {
            let trace = ObservedTrace {
                trace_id: id.clone(),
                session_id: t.0,
                source: t.1,
                agent: t.2,
                started_at: t.3,
                ended_at: t.4,
                metadata: t.5,
            };
            let steps = steps
                .into_iter()
                .enumerate()
                .map(|(i, s)| ObservedStep {
                    trace_id: id.clone(),
                    // Gaps in the indices, as real traces have after a lost call.
                    step_index: (i as u32) * 3,
                    call_id: s.0,
                    tool_name: s.1,
                    inputs: s.2,
                    outputs: s.3,
                    error_type: s.4,
                    error_message: s.5,
                    started_at: s.6.0,
                    ended_at: s.6.1,
                    recorded_at: s.6.2,
                    duration_ms: s.7,
                    metadata: s.8,
                })
                .collect();
            TraceWithSteps { trace, steps }
        })
    }

    fn traces() -> impl Strategy<Value = Vec<TraceWithSteps>> {
        (1usize..6).prop_flat_map(|n| {
            (0..n)
                .map(|i| trace_with_steps(format!("trace-{}", 9 - i)))
                .collect::<Vec<_>>()
        })
    }

    fn dump(store: &dyn TraceStore) -> Vec<TraceWithSteps> {
        let mut all = Vec::new();
        store
            .for_each_trace(&mut |t| {
                all.push(t);
                Ok(())
            })
            .unwrap();
        all
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn sqlite_to_parquet_to_sqlite_is_lossless(input in traces()) {
            let dir = tempfile::tempdir().unwrap();
            let mut first = SqliteStore::open(&dir.path().join("first.db")).unwrap();
            let traces: Vec<ObservedTrace> = input.iter().map(|t| t.trace.clone()).collect();
            let steps: Vec<ObservedStep> = input.iter().flat_map(|t| t.steps.clone()).collect();
            first.append(&traces, &steps).unwrap();

            let mut parquet = ParquetStore::open(&dir.path().join("dataset")).unwrap();
            // Small batches: a trace's steps end up in several appends and part files.
            copy_all(&first, &mut parquet, 3, &mut |_| {}).unwrap();
            let mut second = SqliteStore::open(&dir.path().join("second.db")).unwrap();
            copy_all(&parquet, &mut second, 4, &mut |_| {}).unwrap();

            let original = dump(&first);
            prop_assert_eq!(&original, &input);
            for copy in [dump(&parquet), dump(&second)] {
                prop_assert_eq!(&copy, &original);
                // Equal values could still hide number text changes; compare the text too.
                prop_assert_eq!(
                    serde_json::to_string(&copy).unwrap(),
                    serde_json::to_string(&original).unwrap()
                );
            }
            prop_assert_eq!(parquet.counts().unwrap(), first.counts().unwrap());
            prop_assert_eq!(second.counts().unwrap(), first.counts().unwrap());
        }
    }
}

#[test]
fn a_writer_sees_appends_of_another_handle() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dataset");
    let mut first = ParquetStore::open(&root).unwrap();
    let mut second = ParquetStore::open(&root).unwrap();
    let step = |index| ObservedStep::new("t", index, "tool", json!({"i": index}));
    first
        .append(&[ObservedTrace::new("t", "one")], &[step(0)])
        .unwrap();
    let stats = second.append(&[], &[step(0), step(1)]).unwrap();
    assert_eq!((stats.steps, stats.duplicate_steps), (1, 1));
    // `first` built its index before `second` wrote step 1; it must notice.
    let mut update = ObservedTrace::new("t", "");
    update.agent = Some("a".into());
    let stats = first.append(&[update], &[step(1), step(2)]).unwrap();
    assert_eq!((stats.steps, stats.duplicate_steps), (1, 1));
    let got = second.get_trace("t").unwrap().unwrap();
    assert_eq!(got.trace.source, "one");
    assert_eq!(got.trace.agent.as_deref(), Some("a"));
    assert_eq!(got.steps, [step(0), step(1), step(2)]);
}

#[test]
fn a_read_over_damaged_parts_names_the_first_of_them_in_storage_order() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dataset");
    let mut store = ParquetStore::open(&root).unwrap();
    // One trace with a step in each of eight appends: eight steps parts it spans, read by
    // as many workers as the machine has cores.
    for round in 0..8u32 {
        let trace = ObservedTrace::new("long", "rounds");
        let step = ObservedStep::new("long", round, "tool", json!({"round": round}));
        store.append(&[trace], &[step]).unwrap();
    }
    let read = ParquetStore::open(&root).unwrap();
    let whole = read.get_traces(&["long"]).unwrap();
    let indices: Vec<u32> = whole[0].steps.iter().map(|s| s.step_index).collect();
    assert_eq!(indices, (0..8).collect::<Vec<u32>>());
    let mut parts: Vec<String> = files_below(&root)
        .into_iter()
        .filter(|f| f.starts_with("steps/") && f.ends_with(".parquet"))
        .collect();
    // Part names carry the append's sequence number, zero-padded: by name is by append.
    parts.sort();
    assert_eq!(parts.len(), 8, "{parts:?}");
    for damaged in [&parts[2], &parts[6]] {
        std::fs::write(root.join(damaged), b"not a parquet file").unwrap();
    }
    for _ in 0..5 {
        let error = read.get_traces(&["long"]).unwrap_err().to_string();
        let name = |part: &str| part.rsplit('/').next().unwrap().to_owned();
        assert!(error.contains(&name(&parts[2])), "{error}");
        assert!(!error.contains(&name(&parts[6])), "{error}");
    }
}

/// Everything a reader of `store` can ask for, for comparing two stores (or one store before
/// and after a change that must not change what it holds).
#[derive(Debug, PartialEq)]
struct Reading {
    traces: Vec<TraceWithSteps>,
    listed: chainweaver_recorder::store::TracePage,
    listed_by_steps: Vec<String>,
    filtered: Vec<String>,
    columns: chainweaver_recorder::store::StepColumns,
    counts: chainweaver_recorder::store::StoreCounts,
    ids: Vec<String>,
    walked: Vec<(String, String)>,
    picked: Vec<TraceWithSteps>,
}

fn read_everything(store: &dyn TraceStore) -> Reading {
    use chainweaver_recorder::store::{PageRequest, TraceFilter, TraceSort};
    let mut traces = Vec::new();
    store
        .for_each_trace(&mut |t| {
            traces.push(t);
            Ok(())
        })
        .unwrap();
    let all = PageRequest {
        limit: 10_000,
        ..PageRequest::default()
    };
    let by_steps = PageRequest {
        sort: TraceSort::Steps,
        descending: true,
        ..all
    };
    let by_tool = TraceFilter {
        tool: Some("search".into()),
        ..TraceFilter::default()
    };
    let ids = |page: chainweaver_recorder::store::TracePage| -> Vec<String> {
        page.traces.into_iter().map(|s| s.trace.trace_id).collect()
    };
    let mut walked = Vec::new();
    store
        .for_each_step_tool(&mut |step| {
            walked.push((step.trace_id.to_owned(), step.tool_name.to_owned()));
            Ok(())
        })
        .unwrap();
    Reading {
        listed: store.list_traces(&TraceFilter::default(), &all).unwrap(),
        listed_by_steps: ids(store
            .list_traces(&TraceFilter::default(), &by_steps)
            .unwrap()),
        filtered: ids(store.list_traces(&by_tool, &all).unwrap()),
        columns: store.step_columns(&TraceFilter::default()).unwrap(),
        counts: store.counts().unwrap(),
        ids: store.trace_ids().unwrap(),
        walked,
        picked: store
            .get_traces(&["trace-07", "c-fourth", "trace-02"])
            .unwrap(),
        traces,
    }
}

/// Appends of the kinds a recorder and an importer make: traces over several start days,
/// steps of one trace spread over many appends (so parts overlap), trace rows sent again
/// (upserts) and steps sent twice (duplicates).
fn fill_with_many_appends(store: &mut dyn TraceStore) {
    let (traces, steps) = suite::fixture();
    store.append(&traces, &steps[..4]).unwrap();
    let ids: Vec<String> = (0..10).map(|t| format!("trace-{t:02}")).collect();
    for round in 0..10u32 {
        let opened = &ids[..=round as usize];
        let mut traces: Vec<ObservedTrace> = opened
            .iter()
            .map(|id| ObservedTrace::new(id.as_str(), "rounds"))
            .collect();
        traces[0].agent = Some(format!("round-{round}"));
        let mut steps: Vec<ObservedStep> = opened
            .iter()
            .enumerate()
            .map(|(t, id)| {
                let index = if t % 2 == 1 { 100 - round } else { round };
                ObservedStep::new(id.as_str(), index, "tool", json!({"round": round, "t": t}))
            })
            .collect();
        // A step stored by the round before: a duplicate.
        if round > 0 {
            steps.push(ObservedStep::new(
                "trace-00",
                round - 1,
                "tool",
                json!({"round": round - 1, "t": 0}),
            ));
        }
        store.append(&traces, &steps).unwrap();
    }
    let (traces, steps) = suite::fixture();
    store.append(&traces[1..], &steps[4..]).unwrap();
}

#[test]
fn compaction_rewrites_many_parts_as_few_and_every_read_gives_what_it_gave() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dataset");
    let control_root = dir.path().join("control");
    let mut store = ParquetStore::open(&root).unwrap();
    let mut control = ParquetStore::open(&control_root).unwrap();
    fill_with_many_appends(&mut store);
    fill_with_many_appends(&mut control);
    let parts_before = files_below(&root)
        .iter()
        .filter(|f| f.ends_with(".parquet"))
        .count();
    let before = read_everything(&store);
    assert_eq!(before.counts.traces, 14);
    assert_eq!(before.counts.steps, 64);

    let mut rewritten = 0;
    let stats = store.compact(&mut |rows| rewritten += rows).unwrap();
    let after_files = files_below(&root);
    let parts: Vec<&String> = after_files
        .iter()
        .filter(|f| f.ends_with(".parquet"))
        .collect();
    // Four partitions (three start days; `unknown` holds d-third and the rounds' traces),
    // each now one traces part and one steps part.
    assert_eq!(parts.iter().filter(|f| f.starts_with("traces/")).count(), 4);
    assert_eq!(parts.iter().filter(|f| f.starts_with("steps/")).count(), 4);
    assert_eq!(stats.files_before, parts_before as u64);
    assert_eq!(stats.files_after, parts.len() as u64);
    assert!(stats.bytes_after < stats.bytes_before, "{stats:?}");
    assert_eq!(stats.rows_rewritten, rewritten);
    assert!(
        rewritten > 55,
        "the rounds' partition is rewritten: {rewritten}"
    );
    let manifests: Vec<&String> = after_files
        .iter()
        .filter(|f| f.starts_with("_commits/"))
        .collect();
    assert_eq!(manifests.len(), 1, "{after_files:?}");
    assert!(
        !after_files.iter().any(|f| f.contains(".tmp")),
        "{after_files:?}"
    );
    // Of the rows written for a trace (one an append that sent it), only the newest is kept.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join(manifests[0])).unwrap()).unwrap();
    let trace_rows: u64 = manifest["trace_parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rows"].as_u64().unwrap())
        .sum();
    assert_eq!(trace_rows, 14);
    let marker = std::fs::read_to_string(root.join("_chainweaver.json")).unwrap();
    assert!(marker.contains("\"version\": 3"), "{marker}");

    assert_eq!(read_everything(&store), before);
    let reopened = ParquetStore::open(&root).unwrap();
    assert_eq!(read_everything(&reopened), before);
    assert_eq!(read_everything(&control), before);

    // Appending after compaction: upserts merge into the compacted rows, a step stored
    // before compaction is a duplicate, and the two stores stay alike.
    let mut late = ObservedTrace::new("trace-03", "rounds");
    late.agent = Some("late".into());
    let steps = [
        ObservedStep::new("trace-03", 50, "search", json!({"late": true})),
        ObservedStep::new("trace-00", 0, "tool", json!({"round": 0, "t": 0})),
    ];
    for target in [&mut store, &mut control] {
        let stats = target.append(std::slice::from_ref(&late), &steps).unwrap();
        assert_eq!((stats.steps, stats.duplicate_steps), (1, 1));
    }
    let appended = read_everything(&store);
    assert_eq!(appended, read_everything(&control));
    assert_ne!(appended, before);
    // And once more: the compaction's own parts are compacted with the new append's.
    store.compact(&mut |_| {}).unwrap();
    assert_eq!(read_everything(&store), appended);
    assert_eq!(
        files_below(&root)
            .iter()
            .filter(|f| f.starts_with("_commits/"))
            .count(),
        1
    );
    // Nothing left to merge: the second compaction in a row writes nothing.
    let unchanged = store.compact(&mut |_| {}).unwrap();
    assert_eq!(unchanged.files_before, unchanged.files_after);
    assert_eq!(unchanged.rows_rewritten, 0);
}

/// Copy every file below `from` to `to`, keeping relative paths.
fn copy_tree(from: &Path, to: &Path) {
    for file in files_below(from) {
        let target = to.join(&file);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(from.join(&file), target).unwrap();
    }
}

#[test]
fn a_compaction_cut_short_at_either_side_of_its_commit_leaves_the_store_readable_and_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dataset");
    let mut store = ParquetStore::open(&root).unwrap();
    fill_with_many_appends(&mut store);
    let before = read_everything(&store);
    let old = dir.path().join("old");
    copy_tree(&root, &old);
    store.compact(&mut |_| {}).unwrap();
    let compacted: Vec<String> = files_below(&root);
    drop(store);

    // Died after the commit, before deleting what it replaced: the old manifests and parts
    // are back beside the new ones. Readers ignore them; the next writer deletes them.
    let after_commit = dir.path().join("after-commit");
    copy_tree(&old, &after_commit);
    copy_tree(&root, &after_commit);
    let reader = ParquetStore::open(&after_commit).unwrap();
    assert_eq!(read_everything(&reader), before);
    let mut writer = ParquetStore::open(&after_commit).unwrap();
    writer
        .append(&[ObservedTrace::new("later", "rounds")], &[])
        .unwrap();
    let left: Vec<String> = files_below(&after_commit);
    for file in files_below(&old) {
        if file != "_chainweaver.json" && !compacted.contains(&file) {
            assert!(!left.contains(&file), "{file} outlived the compaction");
        }
    }
    assert_eq!(writer.counts().unwrap().traces, before.counts.traces + 1);

    // Died before the commit: the new parts are there, their manifest is not. The store
    // reads as before compaction, and compacting again works.
    let before_commit = dir.path().join("before-commit");
    copy_tree(&old, &before_commit);
    for file in &compacted {
        if file.ends_with(".parquet") && !files_below(&old).contains(file) {
            let target = before_commit.join(file);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(root.join(file), target).unwrap();
        }
    }
    let mut interrupted = ParquetStore::open(&before_commit).unwrap();
    assert_eq!(read_everything(&interrupted), before);
    interrupted.compact(&mut |_| {}).unwrap();
    assert_eq!(read_everything(&interrupted), before);
}

#[test]
fn compaction_refuses_a_part_with_other_columns_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dataset");
    let mut store = ParquetStore::open(&root).unwrap();
    fill_with_many_appends(&mut store);
    let before = read_everything(&store);
    // Replace one steps part of the rounds' partition by a file of another layout.
    let victim = files_below(&root)
        .into_iter()
        .filter(|f| f.starts_with("steps/date=unknown/"))
        .nth(3)
        .unwrap();
    let schema = std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("trace_id", arrow::datatypes::DataType::Utf8, false),
    ]));
    let batch = arrow::array::RecordBatch::try_new(
        schema.clone(),
        vec![std::sync::Arc::new(arrow::array::StringArray::from(vec![
            "x",
        ]))],
    )
    .unwrap();
    let saved = std::fs::read(root.join(&victim)).unwrap();
    let file = std::fs::File::create(root.join(&victim)).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let files = files_below(&root);

    let err = store.compact(&mut |_| {}).unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&victim), "{message}");
    assert!(message.contains("columns"), "{message}");
    assert_eq!(
        files_below(&root),
        files,
        "a failed compaction leaves no file behind"
    );
    std::fs::write(root.join(&victim), saved).unwrap();
    assert_eq!(read_everything(&ParquetStore::open(&root).unwrap()), before);
    // A retry works once the file is repaired.
    store.compact(&mut |_| {}).unwrap();
    assert_eq!(read_everything(&store), before);
}

#[test]
fn compacting_while_another_handle_appends_loses_no_append() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dataset");
    let mut seed = ParquetStore::open(&root).unwrap();
    fill_with_many_appends(&mut seed);
    let before = seed.counts().unwrap();
    let appends = 150;
    let (compacted, refused) = std::thread::scope(|scope| {
        let appender = scope.spawn(|| {
            let mut store = ParquetStore::open(&root).unwrap();
            for i in 0..appends {
                let id = format!("late-{i:03}");
                // A commit that loses the race to a compaction's is staged again inside
                // `append`: no append fails.
                let stats = store
                    .append(
                        &[ObservedTrace::new(id.as_str(), "late")],
                        &[ObservedStep::new(id.as_str(), 0, "tool", json!({"i": i}))],
                    )
                    .unwrap_or_else(|e| panic!("append {i}: {e}"));
                assert_eq!(stats.steps, 1);
            }
        });
        let mut store = ParquetStore::open(&root).unwrap();
        let (mut compacted, mut refused) = (0, 0);
        // Until the appender ends, whether it finished or panicked. A compaction that an
        // append overtakes fails and changes nothing.
        while !appender.is_finished() {
            match store.compact(&mut |_| {}) {
                Ok(_) => compacted += 1,
                Err(RecorderError::ConcurrentCommit { .. }) => refused += 1,
                Err(e) => panic!("compaction: {e}"),
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        appender.join().unwrap();
        (compacted, refused)
    });
    eprintln!("{compacted} compactions committed beside the appends, {refused} refused");
    assert!(refused > 0, "no compaction was overtaken by an append");
    // Once the appends are done, a compaction commits.
    let mut store = ParquetStore::open(&root).unwrap();
    let stats = store.compact(&mut |_| {}).unwrap();
    assert!(stats.rows_rewritten > 0, "{stats:?}");
    let reopened = ParquetStore::open(&root).unwrap();
    let counts = reopened.counts().unwrap();
    assert_eq!(counts.traces, before.traces + appends as u64);
    assert_eq!(counts.steps, before.steps + appends as u64);
    let ids = reopened.trace_ids().unwrap();
    for i in 0..appends {
        assert!(
            ids.contains(&format!("late-{i:03}")),
            "late-{i:03} was lost"
        );
    }
    assert_eq!(steps_read(&reopened), counts.steps);
}

/// The steps of every trace the store reads back whole.
fn steps_read(store: &dyn TraceStore) -> u64 {
    let mut steps = 0;
    store
        .for_each_trace(&mut |t| {
            steps += t.steps.len() as u64;
            Ok(())
        })
        .unwrap();
    steps
}

#[test]
fn two_handles_appending_at_once_lose_no_append() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dataset");
    ParquetStore::open(&root).unwrap();
    let appends = 80;
    std::thread::scope(|scope| {
        for writer in ["a", "b"] {
            let root = &root;
            scope.spawn(move || {
                for i in 0..appends {
                    // A handle per append, as each `chainweaver import` opens its own: opening
                    // removes leftovers, and must not take the other writer's parts for them.
                    let mut store = ParquetStore::open(root).unwrap();
                    let id = format!("{writer}-{i:03}");
                    store
                        .append(
                            &[ObservedTrace::new(id.as_str(), "agent")],
                            &[ObservedStep::new(id.as_str(), 0, "tool", json!({"i": i}))],
                        )
                        .unwrap_or_else(|e| panic!("append {id}: {e}"));
                }
            });
        }
    });
    let reopened = ParquetStore::open(&root).unwrap();
    let counts = reopened.counts().unwrap();
    assert_eq!(
        (counts.traces, counts.steps),
        (2 * appends as u64, 2 * appends as u64)
    );
    assert_eq!(steps_read(&reopened), counts.steps);
}
