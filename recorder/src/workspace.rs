//! The typed workspace: the results a store keeps beside its traces (patterns, candidates,
//! verdicts, registered flows), read and written as the model's types.
//!
//! Every crate goes through [`Workspace`] rather than the store's raw document calls, so a
//! document's kind and shape are defined once, in [`crate::model`]. It is implemented for
//! every [`TraceStore`], SQLite and Parquet alike.
//!
//! ```
//! use chainweaver_recorder::store::SqliteStore;
//! use chainweaver_recorder::workspace::Workspace;
//!
//! # fn main() -> chainweaver_recorder::Result<()> {
//! let dir = tempfile::tempdir().expect("temp dir");
//! let mut store = SqliteStore::open(&dir.path().join("chainweaver.db"))?;
//! // A mining run replaces the patterns, candidates and verdicts of the last one at once.
//! store.replace_mining_results(&[], &[])?;
//! assert!(store.candidates()?.is_empty());
//! assert!(store.verdict("no-such-candidate")?.is_none());
//! # Ok(())
//! # }
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{RecorderError, Result};
use crate::model::DocumentKind;
use crate::model::candidate::{Candidate, PatternSummary, Verdict};
use crate::model::flow::RegisteredFlow;
use crate::store::TraceStore;

/// At most this many patterns of a mining run are kept for browsing.
pub const STORED_PATTERNS: usize = 1000;

fn encode<T: Serialize>(kind: DocumentKind, key: &str, value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| RecorderError::Document {
        kind: kind.as_str(),
        key: key.to_string(),
        message: e.to_string(),
    })
}

fn decode<T: DeserializeOwned>(kind: DocumentKind, key: &str, value: Value) -> Result<T> {
    serde_json::from_value(value).map_err(|e| RecorderError::Document {
        kind: kind.as_str(),
        key: key.to_string(),
        message: e.to_string(),
    })
}

fn read_candidate(key: &str, value: Value) -> Result<Candidate> {
    let mut candidate: Candidate = decode(DocumentKind::Candidate, key, value)?;
    candidate.upgrade();
    Ok(candidate)
}

/// The store key of a pattern: its rank (so listing by key lists best first) and its tools.
fn pattern_key(rank: usize, pattern: &PatternSummary) -> String {
    format!("{rank:05}-{}", pattern.tools.join("_then_"))
}

/// The store key of a registered flow version.
pub fn flow_key(name: &str, version: &str) -> String {
    format!("{name}@{version}")
}

/// Typed access to the results a store keeps. Implemented for every [`TraceStore`].
pub trait Workspace: TraceStore {
    /// Replace the last mining run's results with a new run's, as one change: its best
    /// [`STORED_PATTERNS`] patterns (in rank order) and its candidates; the verdicts of the
    /// replaced candidates go too (they judged other flows).
    fn replace_mining_results(
        &mut self,
        patterns: &[PatternSummary],
        candidates: &[Candidate],
    ) -> Result<()> {
        let mut owned: Vec<(DocumentKind, String, Value)> = Vec::new();
        for (rank, pattern) in patterns.iter().take(STORED_PATTERNS).enumerate() {
            let key = pattern_key(rank, pattern);
            let value = encode(DocumentKind::Pattern, &key, pattern)?;
            owned.push((DocumentKind::Pattern, key, value));
        }
        for candidate in candidates {
            let value = encode(DocumentKind::Candidate, &candidate.id, candidate)?;
            owned.push((DocumentKind::Candidate, candidate.id.clone(), value));
        }
        let put: Vec<(&str, &str, &Value)> = owned
            .iter()
            .map(|(kind, key, value)| (kind.as_str(), key.as_str(), value))
            .collect();
        let clear = DocumentKind::MINING_RESULTS.map(DocumentKind::as_str);
        self.write_documents(&clear, &put)
    }

    /// The stored patterns, best-ranked first.
    fn patterns(&self) -> Result<Vec<PatternSummary>> {
        self.list_documents(DocumentKind::Pattern.as_str())?
            .into_iter()
            .map(|(key, value)| decode(DocumentKind::Pattern, &key, value))
            .collect()
    }

    /// The stored candidates, best first ([`Candidate::rank_order`]).
    fn candidates(&self) -> Result<Vec<Candidate>> {
        let mut candidates = self
            .list_documents(DocumentKind::Candidate.as_str())?
            .into_iter()
            .map(|(key, value)| read_candidate(&key, value))
            .collect::<Result<Vec<_>>>()?;
        candidates.sort_by(Candidate::rank_order);
        Ok(candidates)
    }

    /// One candidate by id.
    fn candidate(&self, id: &str) -> Result<Option<Candidate>> {
        self.get_document(DocumentKind::Candidate.as_str(), id)?
            .map(|value| read_candidate(id, value))
            .transpose()
    }

    /// Store a candidate (a new one, or one whose review status changed).
    fn put_candidate(&mut self, candidate: &Candidate) -> Result<()> {
        let value = encode(DocumentKind::Candidate, &candidate.id, candidate)?;
        self.put_document(DocumentKind::Candidate.as_str(), &candidate.id, &value)
    }

    /// Every stored verdict, verified first, then by exact share, then by candidate id.
    fn verdicts(&self) -> Result<Vec<Verdict>> {
        let mut verdicts = self
            .list_documents(DocumentKind::Verdict.as_str())?
            .into_iter()
            .map(|(key, value)| decode::<Verdict>(DocumentKind::Verdict, &key, value))
            .collect::<Result<Vec<_>>>()?;
        verdicts.sort_by(|a, b| {
            a.status
                .cmp(&b.status)
                .then(b.exact_rate.total_cmp(&a.exact_rate))
                .then_with(|| a.candidate_id.cmp(&b.candidate_id))
        });
        Ok(verdicts)
    }

    /// The verdict of one candidate.
    fn verdict(&self, candidate_id: &str) -> Result<Option<Verdict>> {
        self.get_document(DocumentKind::Verdict.as_str(), candidate_id)?
            .map(|value| decode(DocumentKind::Verdict, candidate_id, value))
            .transpose()
    }

    /// Store verdicts (each under its candidate's id, replacing an earlier one) as one change.
    fn put_verdicts(&mut self, verdicts: &[Verdict]) -> Result<()> {
        let owned = verdicts
            .iter()
            .map(|v| encode(DocumentKind::Verdict, &v.candidate_id, v))
            .collect::<Result<Vec<_>>>()?;
        let put: Vec<(&str, &str, &Value)> = verdicts
            .iter()
            .zip(&owned)
            .map(|(v, value)| {
                (
                    DocumentKind::Verdict.as_str(),
                    v.candidate_id.as_str(),
                    value,
                )
            })
            .collect();
        self.write_documents(&[], &put)
    }

    /// A verified run's results as one change: its verdicts, and its candidates as review left
    /// them (with the behaviour each was folded into).
    fn put_reviewed(&mut self, candidates: &[Candidate], verdicts: &[Verdict]) -> Result<()> {
        let encoded_candidates = candidates
            .iter()
            .map(|c| encode(DocumentKind::Candidate, &c.id, c))
            .collect::<Result<Vec<_>>>()?;
        let encoded_verdicts = verdicts
            .iter()
            .map(|v| encode(DocumentKind::Verdict, &v.candidate_id, v))
            .collect::<Result<Vec<_>>>()?;
        let mut put: Vec<(&str, &str, &Value)> = Vec::new();
        for (c, value) in candidates.iter().zip(&encoded_candidates) {
            put.push((DocumentKind::Candidate.as_str(), c.id.as_str(), value));
        }
        for (v, value) in verdicts.iter().zip(&encoded_verdicts) {
            put.push((
                DocumentKind::Verdict.as_str(),
                v.candidate_id.as_str(),
                value,
            ));
        }
        self.write_documents(&[], &put)
    }

    /// Every registered flow version, by `name@version`.
    fn flows(&self) -> Result<Vec<RegisteredFlow>> {
        self.list_documents(DocumentKind::Flow.as_str())?
            .into_iter()
            .map(|(key, value)| decode(DocumentKind::Flow, &key, value))
            .collect()
    }

    /// Store a registered flow version under `name@version`.
    fn put_flow(&mut self, flow: &RegisteredFlow) -> Result<()> {
        let key = flow_key(flow.definition.name(), flow.definition.version());
        let value = encode(DocumentKind::Flow, &key, flow)?;
        self.put_document(DocumentKind::Flow.as_str(), &key, &value)
    }
}

impl<S: TraceStore + ?Sized> Workspace for S {}
