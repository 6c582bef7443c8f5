//! SQLite store tests, and the backend-independent store suite the Parquet tests reuse.

// Test helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use chainweaver_recorder::RecorderError;
use chainweaver_recorder::store::{SqliteStore, TraceStore};

fn open_sqlite(dir: &Path) -> Box<dyn TraceStore> {
    Box::new(SqliteStore::open(&dir.join("store.db")).unwrap())
}

/// Tests every backend must pass. Each takes a function that opens (or reopens) the backend's
/// store inside a given directory.
pub mod suite {
    use std::path::Path;

    use chainweaver_recorder::RecorderError;
    use chainweaver_recorder::model::{ObservedStep, ObservedTrace, Timestamp};
    use chainweaver_recorder::store::{
        PageRequest, RawSteps, StoreCounts, TraceFilter, TraceSort, TraceStore,
    };
    use chrono::{Duration, TimeZone, Utc};
    use serde_json::{Value, json};

    /// Opens the store of one backend in a directory; called again to reopen.
    pub type Opener = fn(&Path) -> Box<dyn TraceStore>;

    pub fn at(y: i32, m: u32, d: u32, h: u32, min: u32, s: u32) -> Timestamp {
        Utc.with_ymd_and_hms(y, m, d, h, min, s).unwrap()
    }

    fn step(
        trace: &str,
        index: u32,
        tool: &str,
        duration: Option<f64>,
        failed: bool,
    ) -> ObservedStep {
        let mut step = ObservedStep::new(trace, index, tool, json!({"i": index, "trace": trace}));
        step.duration_ms = duration;
        if failed {
            step.error_type = Some("ToolError".into());
            step.error_message = Some(format!("{tool} failed"));
        } else {
            step.outputs = Some(json!({"ok": true, "n": 1.50}));
        }
        step
    }

    /// Four traces stored in the order b, a, d, c (ids chosen so id order differs from storage
    /// order), 9 steps, 3 failed.
    pub fn fixture() -> (Vec<ObservedTrace>, Vec<ObservedStep>) {
        let mut b = ObservedTrace::new("b-first", "import");
        b.started_at = Some(at(2026, 1, 2, 0, 0, 0));
        b.ended_at = Some(at(2026, 1, 2, 0, 0, 2));
        b.session_id = Some("session-1".into());
        b.metadata.insert("task".into(), json!("t-17"));
        let mut a = ObservedTrace::new("a-second", "recorder");
        a.started_at = Some(at(2026, 1, 1, 0, 0, 0));
        a.agent = Some("agent-x".into());
        let d = ObservedTrace::new("d-third", "import");
        let mut c = ObservedTrace::new("c-fourth", "mcp-proxy");
        c.started_at = Some(at(2025, 12, 31, 23, 59, 59));
        c.ended_at = Some(at(2025, 12, 31, 23, 59, 59) + Duration::milliseconds(100));
        let steps = vec![
            step("b-first", 0, "search", Some(10.0), false),
            step("b-first", 1, "fetch_url", Some(20.0), false),
            step("a-second", 0, "Fetch_URL", Some(1.5), true),
            step("a-second", 1, "search", Some(2.5), false),
            step("a-second", 2, "write", None, false),
            step("c-fourth", 0, "ÜBER_tool", None, true),
            step("c-fourth", 1, "über_tool", None, true),
            step("c-fourth", 2, "search", None, false),
            step("c-fourth", 3, "search", None, false),
        ];
        (vec![b, a, d, c], steps)
    }

    fn ids(store: &dyn TraceStore, filter: &TraceFilter, page: &PageRequest) -> (Vec<String>, u64) {
        let listed = store.list_traces(filter, page).unwrap();
        let ids = listed
            .traces
            .into_iter()
            .map(|s| s.trace.trace_id)
            .collect();
        (ids, listed.total)
    }

    fn all() -> PageRequest {
        PageRequest {
            limit: 1000,
            ..PageRequest::default()
        }
    }

    fn filtered(store: &dyn TraceStore, filter: TraceFilter) -> Vec<String> {
        let (ids, total) = ids(store, &filter, &all());
        assert_eq!(total as usize, ids.len(), "total for {filter:?}");
        ids
    }

    fn loaded(open: Opener, dir: &Path) -> Box<dyn TraceStore> {
        let mut store = open(dir);
        let (traces, steps) = fixture();
        let stats = store.append(&traces, &steps).unwrap();
        assert_eq!(
            (stats.traces, stats.steps, stats.duplicate_steps),
            (4, 9, 0)
        );
        store
    }

    pub fn every_filter(open: Opener) {
        let dir = tempfile::tempdir().unwrap();
        let store = loaded(open, dir.path());
        let store = store.as_ref();
        let f = TraceFilter::default;
        assert_eq!(
            filtered(store, f()),
            ["b-first", "a-second", "d-third", "c-fourth"]
        );
        let tool = |t: &str| TraceFilter {
            tool: Some(t.into()),
            ..f()
        };
        assert_eq!(
            filtered(store, tool("search")),
            ["b-first", "a-second", "c-fourth"]
        );
        assert_eq!(filtered(store, tool("fetch_url")), ["b-first"]);
        assert!(filtered(store, tool("nope")).is_empty());
        let contains = |t: &str| TraceFilter {
            tool_contains: Some(t.into()),
            ..f()
        };
        assert_eq!(filtered(store, contains("FETCH")), ["b-first", "a-second"]);
        assert_eq!(filtered(store, contains("über")), ["c-fourth"]);
        assert_eq!(filtered(store, contains("%")), Vec::<String>::new());
        assert_eq!(
            filtered(
                store,
                TraceFilter {
                    source: Some("import".into()),
                    ..f()
                }
            ),
            ["b-first", "d-third"]
        );
        assert_eq!(
            filtered(
                store,
                TraceFilter {
                    since: Some(at(2026, 1, 1, 0, 0, 0)),
                    ..f()
                }
            ),
            ["b-first", "a-second"]
        );
        assert_eq!(
            filtered(
                store,
                TraceFilter {
                    until: Some(at(2026, 1, 2, 0, 0, 0)),
                    ..f()
                }
            ),
            ["a-second", "c-fourth"]
        );
        assert_eq!(
            filtered(
                store,
                TraceFilter {
                    since: Some(at(2026, 1, 1, 0, 0, 0)),
                    until: Some(at(2026, 1, 2, 0, 0, 0)),
                    ..f()
                }
            ),
            ["a-second"]
        );
        assert_eq!(
            filtered(
                store,
                TraceFilter {
                    has_error: Some(true),
                    ..f()
                }
            ),
            ["a-second", "c-fourth"]
        );
        assert_eq!(
            filtered(
                store,
                TraceFilter {
                    has_error: Some(false),
                    ..f()
                }
            ),
            ["b-first", "d-third"]
        );
        assert_eq!(
            filtered(
                store,
                TraceFilter {
                    min_duration_ms: Some(100.0),
                    ..f()
                }
            ),
            ["b-first", "c-fourth"]
        );
        assert_eq!(
            filtered(
                store,
                TraceFilter {
                    min_duration_ms: Some(3.0),
                    ..f()
                }
            ),
            ["b-first", "a-second", "c-fourth"]
        );
        assert_eq!(
            filtered(
                store,
                TraceFilter {
                    source: Some("import".into()),
                    has_error: Some(false),
                    ..f()
                }
            ),
            ["b-first", "d-third"]
        );
        assert_eq!(
            filtered(
                store,
                TraceFilter {
                    source: Some("import".into()),
                    has_error: Some(false),
                    tool: Some("search".into()),
                    ..f()
                }
            ),
            ["b-first"]
        );
    }

    pub fn every_sort_and_summaries(open: Opener) {
        let dir = tempfile::tempdir().unwrap();
        let store = loaded(open, dir.path());
        let cases = [
            (
                TraceSort::Stored,
                ["b-first", "a-second", "d-third", "c-fourth"],
            ),
            (
                TraceSort::TraceId,
                ["a-second", "b-first", "c-fourth", "d-third"],
            ),
            (
                TraceSort::StartedAt,
                ["d-third", "c-fourth", "a-second", "b-first"],
            ),
            (
                TraceSort::Steps,
                ["d-third", "b-first", "a-second", "c-fourth"],
            ),
            (
                TraceSort::Errors,
                ["b-first", "d-third", "a-second", "c-fourth"],
            ),
            (
                TraceSort::Duration,
                ["d-third", "a-second", "c-fourth", "b-first"],
            ),
        ];
        for (sort, expected) in cases {
            let page = PageRequest { sort, ..all() };
            let (got, total) = ids(store.as_ref(), &TraceFilter::default(), &page);
            assert_eq!(got, expected, "{sort:?} ascending");
            assert_eq!(total, 4);
            let page = PageRequest {
                descending: true,
                ..page
            };
            let (got, _) = ids(store.as_ref(), &TraceFilter::default(), &page);
            let mut reversed = expected.to_vec();
            reversed.reverse();
            assert_eq!(got, reversed, "{sort:?} descending");
        }
        let page = store.list_traces(&TraceFilter::default(), &all()).unwrap();
        let summary: Vec<(&str, u64, u64, Option<f64>)> = page
            .traces
            .iter()
            .map(|s| {
                (
                    s.trace.trace_id.as_str(),
                    s.step_count,
                    s.error_count,
                    s.duration_ms,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("b-first", 2, 0, Some(2000.0)),
                ("a-second", 3, 1, Some(4.0)),
                ("d-third", 0, 0, None),
                ("c-fourth", 4, 2, Some(100.0)),
            ]
        );
        let (traces, _) = fixture();
        assert_eq!(page.traces[0].trace, traces[0], "trace fields survive");
        assert_eq!(page.traces[1].trace, traces[1]);
    }

    pub fn paging(open: Opener) {
        let dir = tempfile::tempdir().unwrap();
        let store = loaded(open, dir.path());
        let store = store.as_ref();
        let none = TraceFilter::default();
        let page = |offset, limit, descending| PageRequest {
            offset,
            limit,
            descending,
            sort: TraceSort::Stored,
        };
        assert_eq!(
            ids(store, &none, &page(1, 2, false)),
            (vec!["a-second".into(), "d-third".into()], 4)
        );
        assert_eq!(
            ids(store, &none, &page(3, 2, false)),
            (vec!["c-fourth".into()], 4)
        );
        assert_eq!(
            ids(store, &none, &page(0, 1, true)),
            (vec!["c-fourth".into()], 4)
        );
        assert_eq!(ids(store, &none, &page(10, 5, false)), (vec![], 4));
        assert_eq!(ids(store, &none, &page(0, 0, false)), (vec![], 4));
        assert_eq!(ids(store, &none, &page(0, u64::MAX, false)).0.len(), 4);
        let errors = TraceFilter {
            has_error: Some(true),
            ..none
        };
        assert_eq!(
            ids(store, &errors, &page(1, 10, false)),
            (vec!["c-fourth".into()], 2)
        );
    }

    pub fn get_and_stream_in_order(open: Opener) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        let (traces, mut steps) = fixture();
        // Start times on the later steps of c-fourth only, so its first timed step is not its
        // first row in storage order.
        for (minute, step) in steps[6..9].iter_mut().enumerate() {
            step.started_at = Some(at(2026, 2, 1, 0, minute as u32, 0));
        }
        // Steps arrive out of order and over several batches; reads put them in step order.
        let mut reversed = steps.clone();
        reversed.reverse();
        store.append(&traces, &reversed[..4]).unwrap();
        store.append(&[], &reversed[4..]).unwrap();
        let got = store.get_trace("c-fourth").unwrap().unwrap();
        assert_eq!(got.trace, traces[3]);
        assert_eq!(got.steps, steps[5..9]);
        assert_eq!(store.get_trace("d-third").unwrap().unwrap().steps, vec![]);
        assert!(store.get_trace("missing").unwrap().is_none());

        let mut seen = Vec::new();
        store
            .for_each_trace(&mut |t| {
                seen.push(t);
                Ok(())
            })
            .unwrap();
        let order: Vec<&str> = seen.iter().map(|t| t.trace.trace_id.as_str()).collect();
        assert_eq!(order, ["b-first", "a-second", "d-third", "c-fourth"]);
        assert_eq!(seen[0].steps, steps[0..2]);
        assert_eq!(seen[1].steps, steps[2..5]);
        assert_eq!(seen[2].steps, vec![]);
        assert_eq!(seen[3].steps, steps[5..9]);

        // A batch comes back in the order asked, unknown and repeated ids left out.
        let batch = store
            .get_traces(&["c-fourth", "missing", "b-first", "c-fourth", "d-third"])
            .unwrap();
        let batch_ids: Vec<&str> = batch.iter().map(|t| t.trace.trace_id.as_str()).collect();
        assert_eq!(batch_ids, ["c-fourth", "b-first", "d-third"]);
        assert_eq!(batch[0], seen[3]);
        assert_eq!(batch[1], seen[0]);
        assert_eq!(batch[2], seen[2]);

        // Some steps of some traces: positions are places in step order (the steps arrived
        // reversed), past-the-end positions and unknown ids are left out, order as asked.
        let c_positions: &[usize] = &[0, 2, 3, 9];
        let b_positions: &[usize] = &[1];
        let none: &[usize] = &[];
        let partial = store
            .get_trace_steps(&[
                ("c-fourth", c_positions),
                ("missing", b_positions),
                ("b-first", b_positions),
                ("d-third", none),
            ])
            .unwrap();
        let partial_ids: Vec<&str> = partial.iter().map(|t| t.trace.trace_id.as_str()).collect();
        assert_eq!(partial_ids, ["c-fourth", "b-first", "d-third"]);
        assert_eq!(partial[0].trace, traces[3]);
        assert_eq!(
            partial[0].steps,
            vec![steps[5].clone(), steps[7].clone(), steps[8].clone()]
        );
        assert_eq!(partial[1].steps, vec![steps[1].clone()]);
        assert_eq!(partial[2].steps, vec![]);

        // The ids and the tool walk follow the same storage order; the walk skips traces
        // without steps and keeps each trace's steps together, in step order.
        assert_eq!(store.trace_ids().unwrap(), order);
        type Walked = (String, String, Option<Timestamp>);
        let mut walked: Vec<Walked> = Vec::new();
        store
            .for_each_step_tool(&mut |step| {
                walked.push((
                    step.trace_id.to_owned(),
                    step.tool_name.to_owned(),
                    step.started_at,
                ));
                Ok(())
            })
            .unwrap();
        let want: Vec<Walked> = seen
            .iter()
            .flat_map(|t| t.steps.iter())
            .map(|s| (s.trace_id.clone(), s.tool_name.clone(), s.started_at))
            .collect();
        assert_eq!(walked, want);

        // The interned sequences (the steps arrived reversed, so a store that reads its rows
        // in storage order must put them back in step order): every trace in storage order,
        // traces without steps too, tools interned by first appearance, first start times;
        // traces `keep` rejects only counted.
        let sequences =
            chainweaver_recorder::store::tool_sequences(store.as_ref(), &|id| id != "a-second")
                .unwrap();
        assert_eq!(sequences.trace_ids, ["b-first", "d-third", "c-fourth"]);
        assert_eq!(sequences.left_out, 1);
        let mut names: Vec<String> = Vec::new();
        let mut expected: Vec<Vec<u32>> = Vec::new();
        for trace in seen.iter().filter(|t| t.trace.trace_id != "a-second") {
            expected.push(
                trace
                    .steps
                    .iter()
                    .map(|s| match names.iter().position(|n| *n == s.tool_name) {
                        Some(at) => at as u32,
                        None => {
                            names.push(s.tool_name.clone());
                            names.len() as u32 - 1
                        }
                    })
                    .collect(),
            );
        }
        assert_eq!(sequences.names, names);
        assert_eq!(sequences.sequences, expected);
        let first_started: Vec<Option<Timestamp>> = seen
            .iter()
            .filter(|t| t.trace.trace_id != "a-second")
            .map(|t| t.steps.iter().find_map(|s| s.started_at))
            .collect();
        assert_eq!(sequences.first_started, first_started);
        assert_eq!(
            sequences.first_started[2],
            Some(at(2026, 2, 1, 0, 0, 0)),
            "c-fourth starts at its step 1"
        );

        // A visitor error stops the walk and comes back.
        let mut visited = 0;
        let err = store
            .for_each_trace(&mut |t| {
                visited += 1;
                Err(RecorderError::InvalidTrace {
                    trace_id: t.trace.trace_id,
                    message: "stop".into(),
                })
            })
            .unwrap_err();
        assert_eq!(visited, 1);
        assert!(err.to_string().contains("b-first"), "{err}");
    }

    pub fn step_columns_and_counts(open: Opener) {
        let dir = tempfile::tempdir().unwrap();
        let store = loaded(open, dir.path());
        assert_eq!(
            store.counts().unwrap(),
            StoreCounts {
                traces: 4,
                steps: 9,
                failed_steps: 3
            }
        );
        let columns = store.step_columns(&TraceFilter::default()).unwrap();
        assert_eq!(columns.trace_id.len(), 9);
        assert_eq!(columns.tool_name.len(), 9);
        assert_eq!(columns.is_error.iter().filter(|e| **e).count(), 3);
        assert_eq!(columns.started_at.len(), 9);
        let mut durations: Vec<f64> = columns.duration_ms.iter().flatten().copied().collect();
        durations.sort_by(f64::total_cmp);
        assert_eq!(durations, [1.5, 2.5, 10.0, 20.0]);
        let errors = store
            .step_columns(&TraceFilter {
                has_error: Some(true),
                ..TraceFilter::default()
            })
            .unwrap();
        assert_eq!(errors.trace_id.len(), 7);
        assert!(
            errors
                .trace_id
                .iter()
                .all(|t| t == "a-second" || t == "c-fourth")
        );
        let unknown = store
            .step_columns(&TraceFilter {
                tool: Some("nope".into()),
                ..TraceFilter::default()
            })
            .unwrap();
        assert!(unknown.trace_id.is_empty());
    }

    pub fn upsert_and_duplicates(open: Opener) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = loaded(open, dir.path());
        let (traces, steps) = fixture();
        // The end of trace a arrives: ended_at and a metadata key; the source left empty.
        let mut end = ObservedTrace::new("a-second", "");
        end.ended_at = Some(at(2026, 1, 1, 0, 0, 9));
        end.metadata.insert("reward".into(), json!(1.0));
        let mut again = end.clone();
        again.metadata.insert("reward".into(), json!(0.5));
        again.agent = Some("agent-y".into());
        let stats = store.append(&[end, again], &steps[2..5]).unwrap();
        assert_eq!(
            (stats.traces, stats.steps, stats.duplicate_steps),
            (2, 0, 3)
        );
        // The same new step twice in one batch: the first copy wins.
        let mut first = step("a-second", 3, "first", None, false);
        first.call_id = Some("call-1".into());
        let second = step("a-second", 3, "second", None, false);
        let stats = store.append(&[], &[first.clone(), second]).unwrap();
        assert_eq!((stats.steps, stats.duplicate_steps), (1, 1));

        let got = store.get_trace("a-second").unwrap().unwrap();
        let mut expected = traces[1].clone();
        expected.ended_at = Some(at(2026, 1, 1, 0, 0, 9));
        expected.agent = Some("agent-y".into());
        expected.metadata.insert("reward".into(), json!(0.5));
        assert_eq!(got.trace, expected);
        assert_eq!(got.steps.len(), 4);
        assert_eq!(got.steps[3], first);
        assert_eq!(
            store.counts().unwrap(),
            StoreCounts {
                traces: 4,
                steps: 10,
                failed_steps: 3
            }
        );
        // The upsert keeps the storage position and feeds the summary duration.
        let page = store.list_traces(&TraceFilter::default(), &all()).unwrap();
        assert_eq!(page.traces[1].trace.trace_id, "a-second");
        assert_eq!(page.traces[1].duration_ms, Some(9000.0));
        assert_eq!(page.traces[1].step_count, 4);
        // The trace list names the upserted trace once, in its first place, as the listing.
        let ids = store.trace_ids().unwrap();
        let listed: Vec<String> = page
            .traces
            .iter()
            .map(|t| t.trace.trace_id.clone())
            .collect();
        assert_eq!(ids, listed);
        assert_eq!((ids.len(), ids[1].as_str()), (4, "a-second"));
    }

    pub fn documents(open: Opener) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        let doc: Value = serde_json::from_str(r#"{"z":1.0,"a":[1e+5,-0],"name":"x"}"#).unwrap();
        store.put_document("flow", "b/../odd key", &doc).unwrap();
        store.put_document("flow", "a", &json!({"v": 1})).unwrap();
        store.put_document("flow", "a", &json!({"v": 2})).unwrap();
        store
            .put_document("candidate", "a", &json!("other kind"))
            .unwrap();
        let got = store.get_document("flow", "b/../odd key").unwrap().unwrap();
        assert_eq!(got.to_string(), r#"{"z":1.0,"a":[1e+5,-0],"name":"x"}"#);
        assert_eq!(
            store.get_document("flow", "a").unwrap(),
            Some(json!({"v": 2}))
        );
        assert_eq!(store.get_document("flow", "missing").unwrap(), None);
        let listed = store.list_documents("flow").unwrap();
        let keys: Vec<&str> = listed.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b/../odd key"]);
        assert_eq!(store.list_documents("verdict").unwrap(), vec![]);
        assert!(store.delete_document("flow", "a").unwrap());
        assert!(!store.delete_document("flow", "a").unwrap());
        assert_eq!(store.get_document("flow", "a").unwrap(), None);
        assert_eq!(
            store.get_document("candidate", "a").unwrap(),
            Some(json!("other kind"))
        );
        drop(store);
        let store = open(dir.path());
        assert_eq!(store.list_documents("flow").unwrap().len(), 1);
        assert_eq!(
            store
                .get_document("flow", "b/../odd key")
                .unwrap()
                .unwrap()
                .to_string(),
            doc.to_string()
        );
    }

    pub fn reopen_after_appends(open: Opener) {
        let dir = tempfile::tempdir().unwrap();
        let (traces, steps) = fixture();
        {
            let mut store = open(dir.path());
            store.append(&traces[..2], &steps[..5]).unwrap();
        }
        {
            let mut store = open(dir.path());
            store.append(&traces[2..], &steps[5..]).unwrap();
            // Re-sending stored steps after a reopen is still caught.
            let again = store.append(&[], &steps[..2]).unwrap();
            assert_eq!(again.duplicate_steps, 2);
        }
        let store = open(dir.path());
        assert_eq!(store.counts().unwrap().steps, 9);
        let mut all_steps = Vec::new();
        let mut all_traces = Vec::new();
        store
            .for_each_trace(&mut |t| {
                all_traces.push(t.trace);
                all_steps.extend(t.steps);
                Ok(())
            })
            .unwrap();
        assert_eq!(all_traces, traces);
        assert_eq!(all_steps, steps);
    }

    /// What a store holds, in full, for before/after comparisons.
    fn snapshot(store: &dyn TraceStore) -> (StoreCounts, Vec<String>) {
        let mut dump = Vec::new();
        store
            .for_each_trace(&mut |t| {
                dump.push(serde_json::to_string(&t).unwrap());
                Ok(())
            })
            .unwrap();
        (store.counts().unwrap(), dump)
    }

    pub fn failed_append_changes_nothing(open: Opener) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = loaded(open, dir.path());
        let before = snapshot(store.as_ref());

        // A step of a trace that is neither in the batch nor stored, after valid work that
        // updates a stored trace, adds a trace and adds steps.
        let mut update = ObservedTrace::new("b-first", "changed");
        update.agent = Some("someone".into());
        let new_trace = ObservedTrace::new("e-new", "import");
        let batch = vec![
            step("e-new", 0, "brand_new_tool", Some(1.0), false),
            step("b-first", 2, "search", None, true),
            step("ghost", 0, "search", None, false),
        ];
        let err = store
            .append(&[update.clone(), new_trace.clone()], &batch)
            .unwrap_err();
        assert!(
            matches!(&err, RecorderError::InvalidStep { trace_id, step_index: 0, .. } if trace_id == "ghost"),
            "{err}"
        );
        assert_eq!(snapshot(store.as_ref()), before);
        assert!(store.get_trace("e-new").unwrap().is_none());
        assert!(
            store
                .list_traces(
                    &TraceFilter {
                        tool: Some("brand_new_tool".into()),
                        ..TraceFilter::default()
                    },
                    &all()
                )
                .unwrap()
                .traces
                .is_empty()
        );

        // A non-finite duration.
        let mut bad = step("e-new", 1, "search", None, false);
        bad.duration_ms = Some(f64::NAN);
        let err = store
            .append(std::slice::from_ref(&new_trace), &[batch[0].clone(), bad])
            .unwrap_err();
        assert!(
            matches!(err, RecorderError::InvalidStep { step_index: 1, .. }),
            "{err}"
        );
        assert_eq!(snapshot(store.as_ref()), before);

        // A timestamp 64-bit nanoseconds cannot hold.
        let mut far = new_trace.clone();
        far.started_at = Some(at(2300, 1, 1, 0, 0, 0));
        let err = store.append(&[far], &[]).unwrap_err();
        assert!(matches!(err, RecorderError::InvalidTrace { .. }), "{err}");
        assert_eq!(snapshot(store.as_ref()), before);

        // The store still takes good batches afterwards, including the new tool.
        let stats = store.append(&[new_trace], &batch[..2]).unwrap();
        assert_eq!((stats.traces, stats.steps), (2 - 1, 2));
        assert_eq!(store.counts().unwrap().steps, 11);
        assert_eq!(
            store
                .list_traces(
                    &TraceFilter {
                        tool: Some("brand_new_tool".into()),
                        ..TraceFilter::default()
                    },
                    &all()
                )
                .unwrap()
                .total,
            1
        );
    }

    /// `append_raw` of steps as text stores what `append` of the same steps stores, with the
    /// same statistics and the same refusals, also inside a bulk load.
    pub fn raw_appends_equal_appends(open: Opener) {
        let (traces, mut steps) = fixture();
        // Payloads whose text a careless copy would change.
        let exact = r#"{"zeta":1.0,"alpha":1e+5,"neg":-0,"big":12345678901234567890123,"k":[0.10,{"b":null,"a":"é\n"}]}"#;
        steps[0].inputs = serde_json::from_str(exact).unwrap();
        steps[0]
            .metadata
            .insert("z".into(), serde_json::from_str("2.50").unwrap());
        steps[1].outputs = Some(Value::Null);
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let mut plain = open(dirs[0].path());
        let mut raw = open(dirs[1].path());
        let mut bulk = open(dirs[2].path());
        bulk.begin_bulk_load().unwrap();
        // The second batch repeats two steps and updates a trace.
        let mut update = traces[1].clone();
        update.agent = Some("agent-y".into());
        let batches = [
            (traces.clone(), steps[..5].to_vec()),
            (vec![update, traces[3].clone()], steps[3..].to_vec()),
        ];
        for (traces, steps) in &batches {
            let expected = plain.append(traces, steps).unwrap();
            let text = RawSteps::from(&steps[..]);
            assert_eq!(text.len(), steps.len());
            assert_eq!(raw.append_raw(traces, &text).unwrap(), expected);
            assert_eq!(bulk.append_raw(traces, &text).unwrap(), expected);
        }
        // Queries during a bulk load see everything stored so far.
        let by_tool = TraceFilter {
            tool: Some("search".into()),
            ..TraceFilter::default()
        };
        assert_eq!(
            bulk.list_traces(&by_tool, &all()).unwrap(),
            plain.list_traces(&by_tool, &all()).unwrap()
        );
        bulk.end_bulk_load().unwrap();
        let expected = snapshot(plain.as_ref());
        assert_eq!(expected.0.steps, 9);
        assert_eq!(snapshot(raw.as_ref()), expected);
        assert_eq!(snapshot(bulk.as_ref()), expected);
        let got = raw.get_trace("b-first").unwrap().unwrap();
        assert_eq!(got.steps[0].inputs.to_string(), exact);
        assert_eq!(got.steps[1].outputs, Some(Value::Null));

        // A step of an unknown trace fails the whole raw append and changes nothing.
        let err = raw
            .append_raw(
                &[ObservedTrace::new("e-new", "import")],
                &RawSteps::from(
                    &[
                        step("e-new", 0, "brand_new_tool", Some(1.0), false),
                        step("ghost", 0, "search", None, false),
                    ][..],
                ),
            )
            .unwrap_err();
        assert!(
            matches!(&err, RecorderError::InvalidStep { trace_id, .. } if trace_id == "ghost"),
            "{err}"
        );
        let mut infinite = step("b-first", 7, "search", None, false);
        infinite.duration_ms = Some(f64::INFINITY);
        let err = raw
            .append_raw(&[], &RawSteps::from(&[infinite][..]))
            .unwrap_err();
        assert!(
            matches!(err, RecorderError::InvalidStep { step_index: 7, .. }),
            "{err}"
        );
        assert_eq!(snapshot(raw.as_ref()), expected);
    }

    /// Inputs and outputs keep key order and number text; `Some(null)` outputs differ from none.
    pub fn exact_json(open: Opener) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        let text = r#"{"zeta":1.0,"alpha":1e+5,"neg":-0,"big":12345678901234567890123,"ключ":[0.10,{"b":null,"a":"é"}]}"#;
        let mut first = ObservedStep::new("t", 0, "tool", serde_json::from_str(text).unwrap());
        first.outputs = Some(Value::Null);
        first
            .metadata
            .insert("z".into(), serde_json::from_str("2.50").unwrap());
        first.metadata.insert("a".into(), json!(1));
        first.recorded_at = Some(at(2026, 3, 4, 5, 6, 7) + Duration::nanoseconds(123_456_789));
        let mut second = ObservedStep::new("t", 1, "tool", json!("not an object"));
        second.outputs = None;
        store
            .append(
                &[ObservedTrace::new("t", "s")],
                &[first.clone(), second.clone()],
            )
            .unwrap();
        let got = store.get_trace("t").unwrap().unwrap();
        assert_eq!(got.steps[0].inputs.to_string(), text);
        assert_eq!(got.steps[0].outputs, Some(Value::Null));
        assert_eq!(got.steps[1].outputs, None);
        assert_eq!(
            serde_json::to_string(&got.steps[0].metadata).unwrap(),
            r#"{"z":2.50,"a":1}"#
        );
        assert_eq!(got.steps, [first, second]);
    }
}

#[test]
fn every_filter() {
    suite::every_filter(open_sqlite);
}

#[test]
fn raw_appends_equal_appends() {
    suite::raw_appends_equal_appends(open_sqlite);
}

/// The names of the indexes in the file that are not unique keys, sorted.
/// Each read trace's id with the indexes of the steps read.
fn step_indexes(read: &[chainweaver_recorder::model::TraceWithSteps]) -> Vec<(&str, Vec<u32>)> {
    read.iter()
        .map(|t| {
            (
                t.trace.trace_id.as_str(),
                t.steps.iter().map(|s| s.step_index).collect(),
            )
        })
        .collect()
}

fn index_names(path: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'index' \
             AND name NOT LIKE 'sqlite_autoindex_%' ORDER BY name",
        )
        .unwrap();
    stmt.query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The schema as SQLite keeps it, to compare files.
fn schema(path: &Path) -> Vec<(String, Option<String>)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT name, sql FROM sqlite_master ORDER BY name")
        .unwrap();
    stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn a_bulk_load_into_an_empty_store_builds_the_indexes_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.db");
    drop(SqliteStore::open(&fresh).unwrap());
    let all_indexes = index_names(&fresh);
    assert_eq!(all_indexes.len(), 7, "{all_indexes:?}");

    let (traces, steps) = suite::fixture();
    let path = dir.path().join("bulk.db");
    let mut store = SqliteStore::open(&path).unwrap();
    store.begin_bulk_load().unwrap();
    let during: Vec<String> = all_indexes
        .iter()
        .filter(|name| !name.ends_with("started_at"))
        .cloned()
        .collect();
    assert_eq!(
        index_names(&path),
        during,
        "start-time indexes dropped for the load"
    );
    store.append(&traces, &steps).unwrap();
    store.end_bulk_load().unwrap();
    assert_eq!(index_names(&path), all_indexes);
    assert_eq!(schema(&path), schema(&fresh));
    // Ending twice, or a load into a store holding data, changes nothing.
    store.end_bulk_load().unwrap();
    store.begin_bulk_load().unwrap();
    assert_eq!(
        index_names(&path),
        all_indexes,
        "a store with data keeps them"
    );
    store.end_bulk_load().unwrap();
    assert_eq!(store.counts().unwrap().steps, 9);
}

#[test]
fn a_bulk_load_cut_short_leaves_complete_data_and_open_restores_the_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let (traces, steps) = suite::fixture();
    let mut store = SqliteStore::open(&path).unwrap();
    store.begin_bulk_load().unwrap();
    store.append(&traces, &steps[..4]).unwrap();
    // A failed append in the middle leaves the committed one as it was.
    let err = store
        .append(
            &[],
            &[chainweaver_recorder::model::ObservedStep::new(
                "ghost",
                0,
                "x",
                serde_json::json!({}),
            )],
        )
        .unwrap_err();
    assert!(matches!(err, RecorderError::InvalidStep { .. }), "{err}");
    // The process dies here: no `end_bulk_load`.
    drop(store);
    assert_eq!(index_names(&path).len(), 5);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        index_names(&path).len(),
        7,
        "open creates the missing indexes"
    );
    let counts = store.counts().unwrap();
    assert_eq!((counts.traces, counts.steps), (4, 4));
}

#[test]
fn every_sort_and_summaries() {
    suite::every_sort_and_summaries(open_sqlite);
}

#[test]
fn paging() {
    suite::paging(open_sqlite);
}

#[test]
fn get_and_stream_in_order() {
    suite::get_and_stream_in_order(open_sqlite);
}

#[test]
fn step_columns_and_counts() {
    suite::step_columns_and_counts(open_sqlite);
}

#[test]
fn upsert_and_duplicates() {
    suite::upsert_and_duplicates(open_sqlite);
}

#[test]
fn documents() {
    suite::documents(open_sqlite);
}

#[test]
fn reopen_after_appends() {
    suite::reopen_after_appends(open_sqlite);
}

#[test]
fn failed_append_changes_nothing() {
    suite::failed_append_changes_nothing(open_sqlite);
}

#[test]
fn exact_json() {
    suite::exact_json(open_sqlite);
}

#[test]
fn newer_schema_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    drop(SqliteStore::open(&path).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let err = SqliteStore::open(&path).unwrap_err();
    match &err {
        RecorderError::SchemaTooNew {
            path: reported,
            found,
            supported,
        } => {
            assert_eq!(reported, &path);
            assert_eq!(*found, 99);
            assert!(*supported < 99);
        }
        other => panic!("expected SchemaTooNew, got {other}"),
    }
    assert!(err.to_string().contains("store.db"), "{err}");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 99);
}

#[test]
fn older_schema_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    // An empty file at version 0 is migrated to the current version.
    drop(rusqlite::Connection::open(&path).unwrap());
    let store = SqliteStore::open(&path).unwrap();
    assert!(store.schema_version().unwrap() >= 1);
    assert_eq!(store.counts().unwrap().traces, 0);
}

#[test]
fn a_version_1_store_gains_the_sequence_index_and_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let (traces, steps) = suite::fixture();
    let before = {
        let mut store = SqliteStore::open(&path).unwrap();
        store.append(&traces, &steps).unwrap();
        chainweaver_recorder::store::tool_sequences(&store, &|_| true).unwrap()
    };
    // What version 1 wrote: no sequence index.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP INDEX steps_sequence; DROP TABLE trace_sequences; PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    assert!(!index_names(&path).contains(&"steps_sequence".to_string()));
    let store = SqliteStore::open(&path).unwrap();
    let current = SqliteStore::open(&dir.path().join("fresh.db"))
        .unwrap()
        .schema_version()
        .unwrap();
    assert_eq!(store.schema_version().unwrap(), current);
    assert!(index_names(&path).contains(&"steps_sequence".to_string()));
    assert_eq!(store.counts().unwrap().steps, 9);
    let after = chainweaver_recorder::store::tool_sequences(&store, &|_| true).unwrap();
    assert_eq!(after, before);
    assert_eq!(after.sequences.iter().map(Vec::len).sum::<usize>(), 9);
}

#[test]
fn errors_name_the_store_path() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("not-a-db.db");
    std::fs::write(&garbage, vec![b'x'; 4096]).unwrap();
    let err = SqliteStore::open(&garbage).unwrap_err();
    assert!(matches!(err, RecorderError::Sqlite { .. }), "{err}");
    assert!(err.to_string().contains("not-a-db.db"), "{err}");
    let missing_dir = dir.path().join("no/such/dir/store.db");
    let err = SqliteStore::open(&missing_dir).unwrap_err();
    assert!(err.to_string().contains("no/such/dir"), "{err}");
}

#[test]
fn two_handles_share_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let mut writer = SqliteStore::open(&path).unwrap();
    let reader = SqliteStore::open(&path).unwrap();
    let (traces, steps) = suite::fixture();
    writer.append(&traces, &steps).unwrap();
    assert_eq!(reader.counts().unwrap().steps, 9);
    // A tool first interned by the other handle is found, not duplicated.
    let mut other = SqliteStore::open(&path).unwrap();
    let extra = chainweaver_recorder::model::ObservedStep::new(
        "d-third",
        0,
        "search",
        serde_json::json!({}),
    );
    other.append(&[], &[extra]).unwrap();
    let tools: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT count(*) FROM tools", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tools, 6);
}

/// Many steps, read in several batches (parsed on other threads while this one reads): each
/// comes back in step order, and a payload that is not JSON fails the read, long or short,
/// naming the trace, the step and the column, while the other steps still read.
#[test]
fn steps_read_in_batches_keep_their_order_and_a_corrupt_payload_is_named() {
    use chainweaver_recorder::model::{ObservedStep, ObservedTrace};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let mut store = SqliteStore::open(&path).unwrap();
    let ids = ["t-0", "t-1", "t-2"];
    let traces: Vec<ObservedTrace> = ids
        .iter()
        .map(|id| ObservedTrace::new(*id, "import"))
        .collect();
    // 3 x 3,000 steps: more than one batch of rows per trace.
    let steps: Vec<ObservedStep> = ids
        .iter()
        .flat_map(|id| {
            (0..3_000_u32).map(move |i| {
                let mut step =
                    ObservedStep::new(*id, i, "tool", serde_json::json!({"i": i, "t": id}));
                step.outputs = Some(serde_json::json!({"twice": i * 2}));
                step
            })
        })
        .collect();
    store.append(&traces, &steps).unwrap();
    let every: Vec<usize> = (0..3_000).collect();
    let odd: Vec<usize> = (0..3_000).filter(|i| i % 2 == 1).collect();
    let read = store
        .get_trace_steps(&[("t-2", &every), ("t-0", &odd), ("t-1", &[2_999])])
        .unwrap();
    let got = step_indexes(&read);
    let every_index: Vec<u32> = (0..3_000).collect();
    let odd_index: Vec<u32> = (0..3_000).filter(|i| i % 2 == 1).collect();
    assert_eq!(
        got,
        [
            ("t-2", every_index),
            ("t-0", odd_index),
            ("t-1", vec![2_999])
        ]
    );
    assert_eq!(read[0].steps, steps[6_000..9_000]);
    drop(store);

    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE steps SET inputs = '{not json' WHERE step_index = 1234 \
         AND trace_key = (SELECT id FROM traces WHERE trace_id = 't-1')",
        [],
    )
    .unwrap();
    drop(conn);
    let store = SqliteStore::open(&path).unwrap();
    let err = store
        .get_trace_steps(&[("t-0", &every), ("t-1", &every)])
        .unwrap_err();
    assert!(matches!(err, RecorderError::CorruptStore { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("inputs of trace t-1, step 1234") && message.contains("store.db"),
        "{message}"
    );
    // The same from a read short enough to be parsed without threads.
    let err = store.get_trace_steps(&[("t-1", &[1_234])]).unwrap_err();
    assert!(
        err.to_string().contains("inputs of trace t-1, step 1234"),
        "{err}"
    );
    let around = store.get_trace_steps(&[("t-1", &[1_233, 1_235])]).unwrap();
    assert_eq!(around[0].steps.len(), 2);
}

/// Mining reads a sample of steps back by where `read_tool_sequences` saw them: a trace whose
/// steps sit in consecutive rows is placed and read by row id, one appended among other
/// traces' steps is not and is read by position, both giving what `get_trace_steps` gives; a
/// row that changed since the sequences were read is left out, never read as another step.
#[test]
fn sequence_steps_are_read_by_their_rows_and_a_changed_row_is_left_out() {
    use chainweaver_recorder::model::{ObservedStep, ObservedTrace};
    use chainweaver_recorder::store::SequenceSteps;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let mut store = SqliteStore::open(&path).unwrap();
    let step = |trace: &str, i: u32| {
        let mut step = ObservedStep::new(trace, i, "tool", serde_json::json!({"t": trace, "i": i}));
        step.outputs = Some(serde_json::json!({"twice": i * 2}));
        step
    };
    let traces: Vec<ObservedTrace> = ["placed", "first", "second"]
        .iter()
        .map(|id| ObservedTrace::new(*id, "import"))
        .collect();
    // `placed` in one piece; `first` and `second` a step each per append, as a live capture
    // writes them, so their rows interleave.
    let mut steps: Vec<ObservedStep> = (0..4).map(|i| step("placed", i)).collect();
    steps.extend([step("first", 0), step("second", 0)]);
    store.append(&traces, &steps).unwrap();
    store
        .append(&traces[1..], &[step("first", 1), step("second", 1)])
        .unwrap();

    let read = chainweaver_recorder::store::tool_sequences(&store, &|_| true).unwrap();
    assert_eq!(read.trace_ids, ["placed", "first", "second"]);
    let placed: Vec<bool> = read.rows.iter().map(Option::is_some).collect();
    assert_eq!(placed, [true, false, false]);

    let positions: [&[usize]; 3] = [&[0, 2, 3], &[1], &[0, 1]];
    let wanted: Vec<SequenceSteps<'_>> = (0..3)
        .map(|t| SequenceSteps {
            trace_id: &read.trace_ids[t],
            positions: positions[t],
            rows: read.rows[t],
        })
        .collect();
    let plain: Vec<(&str, &[usize])> = wanted.iter().map(|w| (w.trace_id, w.positions)).collect();
    let by_rows = store.get_sequence_steps(&wanted).unwrap();
    assert_eq!(by_rows, store.get_trace_steps(&plain).unwrap());
    let got = step_indexes(&by_rows);
    assert_eq!(
        got,
        [
            ("placed", vec![0, 2, 3]),
            ("first", vec![1]),
            ("second", vec![0, 1])
        ]
    );
    assert_eq!(by_rows[0].steps[1], step("placed", 2));

    // Another process moves a step and renames a trace after the sequences were read.
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "UPDATE steps SET step_index = 12 WHERE step_index = 2 \
           AND trace_key = (SELECT id FROM traces WHERE trace_id = 'placed');",
    )
    .unwrap();
    drop(conn);
    let store = SqliteStore::open(&path).unwrap();
    let after = store.get_sequence_steps(&wanted[..1]).unwrap();
    assert_eq!(step_indexes(&after), [("placed", vec![0, 3])]);
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("UPDATE traces SET trace_id = 'renamed' WHERE trace_id = 'placed';")
        .unwrap();
    drop(conn);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.get_sequence_steps(&wanted[..1]).unwrap(), []);
}
