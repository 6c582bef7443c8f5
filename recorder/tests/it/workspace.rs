//! The typed workspace over real stores: results written by an earlier version read back as
//! the model's types, and a mining run's results replace the last run's as one change.

use chainweaver_recorder::model::DocumentKind;
use chainweaver_recorder::model::candidate::{
    BehaviourRole, InferenceSample, VariantKind, VerdictStatus,
};
use chainweaver_recorder::model::split::Split;
use chainweaver_recorder::store::{ParquetStore, SqliteStore, TraceStore};
use chainweaver_recorder::workspace::Workspace;

fn legacy_copy(dir: &std::path::Path) -> std::path::PathBuf {
    let fixture = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../datasets/stores/before-typed-results.db");
    let copy = dir.join("store.db");
    std::fs::copy(&fixture, &copy).unwrap();
    copy
}

#[test]
fn a_store_written_before_typed_results_reads_through_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&legacy_copy(dir.path())).unwrap();
    let candidates = store.candidates().unwrap();
    assert_eq!(candidates.len(), 4);
    for candidate in &candidates {
        assert_eq!(
            candidate.split,
            Some(Split::Holdout { percent: 20 }),
            "{}",
            candidate.id
        );
        assert_eq!(
            candidate.sample,
            Some(InferenceSample {
                read: 5,
                unlinked_in_probe: Vec::new()
            })
        );
        assert!(candidate.metadata.is_empty(), "{:?}", candidate.metadata);
    }
    // Best first, as stored scores rank them.
    let scores: Vec<f64> = candidates.iter().map(|c| c.evidence.score).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    let verdicts = store.verdicts().unwrap();
    let statuses: Vec<(&str, VerdictStatus)> = verdicts
        .iter()
        .map(|v| (v.candidate_id.as_str(), v.status))
        .collect();
    assert_eq!(
        statuses,
        vec![
            (
                "find_customer_then_get_customer_then_list_orders",
                VerdictStatus::Verified
            ),
            (
                "get_ticket_then_classify_ticket_then_assign_ticket",
                VerdictStatus::Verified
            ),
            (
                "geocode_then_get_forecast_then_send_message",
                VerdictStatus::Rejected
            ),
            (
                "create_release_then_deploy_release_then_notify_team",
                VerdictStatus::Rejected
            ),
        ]
    );
    assert_eq!(store.patterns().unwrap().len(), 71);
    assert_eq!(store.flows().unwrap().len(), 1);
}

/// Replacing the mining results removes the old candidates, patterns and verdicts and keeps
/// the flows, on both backends.
#[test]
fn replacing_mining_results_is_whole() {
    let dir = tempfile::tempdir().unwrap();
    let legacy = SqliteStore::open(&legacy_copy(dir.path())).unwrap();
    let candidates = legacy.candidates().unwrap();
    let patterns = legacy.patterns().unwrap();
    let flows = legacy.flows().unwrap();
    let mut parquet = ParquetStore::open(&dir.path().join("p.parquet")).unwrap();
    let mut sqlite = legacy;
    let stores: [&mut dyn TraceStore; 2] = [&mut sqlite, &mut parquet];
    for store in stores {
        store.put_flow(&flows[0]).unwrap();
        store
            .replace_mining_results(&patterns[..3], &candidates[..2])
            .unwrap();
        let kept: Vec<String> = store
            .candidates()
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(kept.len(), 2);
        assert_eq!(store.patterns().unwrap(), patterns[..3].to_vec());
        assert!(store.verdicts().unwrap().is_empty());
        assert_eq!(store.flows().unwrap(), flows);
        // Written back, the upgraded candidates keep their typed fields.
        assert!(
            store
                .candidates()
                .unwrap()
                .iter()
                .all(|c| c.sample.is_some())
        );
        assert!(
            store
                .list_documents(DocumentKind::Candidate.as_str())
                .unwrap()
                .iter()
                .all(|(_, doc)| doc.get("metadata").is_none() && doc.get("split").is_some())
        );
    }
}

/// A reviewed run's candidates (with their behaviour) and verdicts are written together, on
/// both backends, and read back as written.
#[test]
fn reviewed_results_are_written_together() {
    let dir = tempfile::tempdir().unwrap();
    let legacy = SqliteStore::open(&legacy_copy(dir.path())).unwrap();
    let mut candidates = legacy.candidates().unwrap();
    let verdicts = legacy.verdicts().unwrap();
    assert!(!verdicts.is_empty());
    candidates[1].behaviour = Some(BehaviourRole {
        name: "a -> each b".into(),
        lead: candidates[0].id.clone(),
        kind: VariantKind::LoopCount,
        inside: 1.0,
    });
    let mut parquet = ParquetStore::open(&dir.path().join("p.parquet")).unwrap();
    let mut sqlite = legacy;
    let stores: [&mut dyn TraceStore; 2] = [&mut sqlite, &mut parquet];
    for store in stores {
        store.put_reviewed(&candidates, &verdicts).unwrap();
        let read = store.candidates().unwrap();
        let folded = read
            .iter()
            .find(|c| c.id == candidates[1].id)
            .expect("the candidate is stored");
        assert_eq!(folded.behaviour, candidates[1].behaviour);
        let mut ids: Vec<String> = store
            .verdicts()
            .unwrap()
            .into_iter()
            .map(|v| v.candidate_id)
            .collect();
        ids.sort();
        let mut want: Vec<String> = verdicts.iter().map(|v| v.candidate_id.clone()).collect();
        want.sort();
        assert_eq!(ids, want);
    }
}

/// Opening a store of an earlier schema fills the per-trace tool sequences mining reads from
/// the steps it holds: the same tools, trace by trace, as the steps themselves name.
#[test]
fn a_store_of_an_earlier_schema_mines_the_tool_sequences_its_steps_hold() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&legacy_copy(dir.path())).unwrap();
    let read = chainweaver_recorder::store::tool_sequences(&store, &|_| true).unwrap();
    let mut stepped: Vec<(String, Vec<String>)> = Vec::new();
    store
        .for_each_step_tool(&mut |step| {
            if stepped.last().is_none_or(|(id, _)| id != step.trace_id) {
                stepped.push((step.trace_id.to_owned(), Vec::new()));
            }
            if let Some((_, tools)) = stepped.last_mut() {
                tools.push(step.tool_name.to_owned());
            }
            Ok(())
        })
        .unwrap();
    let sequenced: Vec<(String, Vec<String>)> = (0..read.trace_ids.len())
        .filter(|&t| !read.sequences[t].is_empty())
        .map(|t| {
            let tools = read.tools(t).map(str::to_owned).collect();
            (read.trace_ids[t].clone(), tools)
        })
        .collect();
    assert!(sequenced.len() > 1, "{sequenced:?}");
    assert_eq!(sequenced, stepped);
    let steps: usize = read.sequences.iter().map(Vec::len).sum();
    assert_eq!(steps as u64, store.counts().unwrap().steps);
}
