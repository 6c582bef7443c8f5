//! Exact sequential pattern mining over interned tool sequences.
//!
//! The input is a [`SequenceDb`]: one sequence of interned item ids per trace, stored flat
//! (compressed sparse rows). Support is always counted per sequence: a pattern counts once for
//! every sequence that contains it, however often it occurs there. Every count includes patterns
//! of length 1 unless `min_length` says otherwise.
//!
//! Two engines:
//!
//! - [`contiguous`]: patterns whose items are adjacent (a substring of the sequence). A
//!   depth-first pattern growth over occurrence lists; runs of one repeated item are kept
//!   run-length encoded, so a tool repeated 10,000 times in a row costs linear time. Reports
//!   support, total occurrence count, optionally only the closed patterns, and the occurrence
//!   positions of chosen patterns ([`contiguous::occurrences`]).
//! - [`gapped`]: sequential patterns (items in order, any gap, or at most `max_gap` skipped
//!   items between consecutive pattern items), PrefixSpan-style pseudo-projection: each
//!   projected sequence keeps its earliest end (unbounded gap) or all its end positions
//!   (bounded gap).
//!
//! Both traverse the pattern tree depth first with an explicit stack and a stack-shaped arena,
//! so memory is bounded by the data, not by the number of patterns, and long patterns cannot
//! overflow the call stack. Results go to a visitor; the `mine_*` functions collect them and the
//! `count_*` functions only count.
//!
//! From 20,000 steps on, both spread the root items' subtrees over all cores; each subtree's
//! nodes are recorded compactly and replayed to the visitor in root order, so the patterns and
//! their order do not depend on the thread count. The gapped engine also mines identical
//! sequences once, weighted by their number of copies.
//!
//! [`reference`](mod@reference) holds brute-force miners that are slow but obviously correct; the test suite
//! checks both engines against them on thousands of random inputs.

pub mod contiguous;
mod db;
mod error;
pub mod gapped;
pub mod reference;

pub use contiguous::{ContiguousOptions, ContiguousPattern, Occurrence};
pub use db::{SequenceDb, SequenceDbBuilder};
pub use error::SpmError;
pub use gapped::{GappedOptions, GappedPattern};
