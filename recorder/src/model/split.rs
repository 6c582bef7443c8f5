//! Which traces mining sees and which verification replays: a deterministic split by a hash of
//! the trace id, so the same store always splits the same way, whatever order traces arrive in.
//! Every candidate records the split it was mined with, so verification replays only traffic
//! its mining run did not see.

use serde::{Deserialize, Serialize};

/// FNV-1a, 64 bits: stable across platforms, releases and runs (unlike the std hasher).
pub fn trace_hash(trace_id: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in trace_id.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // Mix the high bits down: FNV's low bits are weak for short ids that differ at the end.
    hash ^ (hash >> 29) ^ (hash >> 47)
}

/// A split of traces into a mining share and a held-out share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Split {
    /// `percent` of the traces (by hash) are held out; the rest are mined. `0` holds out
    /// nothing (mine everything, nothing to verify against).
    Holdout { percent: u8 },
    /// `folds`-fold cross-validation: the traces whose hash falls in fold `fold` are held out.
    Fold { folds: u32, fold: u32 },
}

impl Default for Split {
    fn default() -> Self {
        Split::Holdout { percent: 20 }
    }
}

impl Split {
    /// True when the trace is held out from mining (and replayed by verification).
    pub fn is_holdout(&self, trace_id: &str) -> bool {
        let hash = trace_hash(trace_id);
        match *self {
            Split::Holdout { percent } => hash % 100 < u64::from(percent.min(100)),
            Split::Fold { folds, fold } => folds > 0 && hash % u64::from(folds) == u64::from(fold),
        }
    }

    /// Partition items by the trace id `id_of` gives: `(mined, held_out)`.
    pub fn partition<T>(&self, items: Vec<T>, id_of: impl Fn(&T) -> &str) -> (Vec<T>, Vec<T>) {
        items
            .into_iter()
            .partition(|item| !self.is_holdout(id_of(item)))
    }

    /// One line for reports: `80/20 hold-out` or `fold 2 of 5`.
    pub fn describe(&self) -> String {
        match *self {
            Split::Holdout { percent } => {
                format!("{}/{} hold-out", 100 - u32::from(percent.min(100)), percent)
            }
            Split::Fold { folds, fold } => format!("fold {} of {folds}", fold + 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holdout_share_is_close_to_the_percent_and_stable() {
        let split = Split::Holdout { percent: 20 };
        let ids: Vec<String> = (0..10_000).map(|i| format!("trace-{i}")).collect();
        let held = ids.iter().filter(|id| split.is_holdout(id)).count();
        assert!((1_800..=2_200).contains(&held), "{held} of 10000 held out");
        // Deterministic: the same answer again, and independent of order.
        let again = ids.iter().rev().filter(|id| split.is_holdout(id)).count();
        assert_eq!(held, again);
        assert_eq!(trace_hash("abc"), trace_hash("abc"));
        assert_ne!(trace_hash("abc"), trace_hash("abd"));
    }

    #[test]
    fn folds_cover_every_trace_exactly_once() {
        let ids: Vec<String> = (0..3_000).map(|i| format!("t{i:05}")).collect();
        let folds = 5;
        let mut seen = vec![0u32; ids.len()];
        for fold in 0..folds {
            let split = Split::Fold { folds, fold };
            let mut in_fold = 0;
            for (i, id) in ids.iter().enumerate() {
                if split.is_holdout(id) {
                    seen[i] += 1;
                    in_fold += 1;
                }
            }
            assert!((450..=750).contains(&in_fold), "fold {fold}: {in_fold}");
        }
        assert!(seen.iter().all(|&n| n == 1));
    }

    #[test]
    fn zero_percent_holds_out_nothing_and_hundred_everything() {
        let none = Split::Holdout { percent: 0 };
        let all = Split::Holdout { percent: 100 };
        for i in 0..500 {
            let id = format!("{i}");
            assert!(!none.is_holdout(&id));
            assert!(all.is_holdout(&id));
        }
        let (mined, held) = Split::default().partition((0..100).collect(), |_| "x");
        assert_eq!(mined.len() + held.len(), 100);
        assert!(mined.is_empty() || held.is_empty(), "one id, one side");
    }
}
