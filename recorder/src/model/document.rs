//! The kinds of document a store keeps beside its traces.

/// What a stored document is. The store keys documents by `(kind, key)`; this enum is the one
/// place a kind is spelled, so no other module writes a kind as a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DocumentKind {
    /// A frequent pattern of the last mining run ([`PatternSummary`](super::candidate::PatternSummary)),
    /// keyed by its rank.
    Pattern,
    /// A candidate flow ([`Candidate`](super::candidate::Candidate)), keyed by its id.
    Candidate,
    /// The verdict of replaying a candidate ([`Verdict`](super::candidate::Verdict)), keyed by
    /// the candidate's id.
    Verdict,
    /// A registered flow with its lifecycle ([`RegisteredFlow`](super::flow::RegisteredFlow)), keyed by
    /// `name@version`.
    Flow,
}

impl DocumentKind {
    /// Every kind, in a fixed order.
    pub const ALL: [DocumentKind; 4] = [
        DocumentKind::Pattern,
        DocumentKind::Candidate,
        DocumentKind::Verdict,
        DocumentKind::Flow,
    ];

    /// The kind as the store writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            DocumentKind::Pattern => "pattern",
            DocumentKind::Candidate => "candidate",
            DocumentKind::Verdict => "verdict",
            DocumentKind::Flow => "flow",
        }
    }

    /// The kinds a mining run replaces: its patterns and candidates, and the verdicts that
    /// judged the candidates it replaces.
    pub const MINING_RESULTS: [DocumentKind; 3] = [
        DocumentKind::Pattern,
        DocumentKind::Candidate,
        DocumentKind::Verdict,
    ];
}

impl std::fmt::Display for DocumentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::DocumentKind;

    #[test]
    fn kinds_are_distinct_words() {
        let mut words: Vec<&str> = DocumentKind::ALL.iter().map(|k| k.as_str()).collect();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), DocumentKind::ALL.len());
        assert_eq!(DocumentKind::Verdict.to_string(), "verdict");
    }
}
