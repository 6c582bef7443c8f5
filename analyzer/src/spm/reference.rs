//! Brute-force reference miners: slow, simple, obviously correct. They enumerate every
//! substring (contiguous) or every subsequence (gapped) of every sequence, so they are only for
//! small inputs; the test suite compares the fast engines against them.

use std::collections::{BTreeMap, BTreeSet};

use super::db::SequenceDb;
use super::error::SpmError;

/// Longest sequence [`gapped`] accepts: it enumerates `2^len` subsequences per sequence.
pub const MAX_GAPPED_SEQUENCE: usize = 16;

/// Every contiguous pattern with its support (distinct sequences) and occurrence count, then
/// filtered by `min_support`, the length bounds and, if asked, closedness.
pub fn contiguous(
    db: &SequenceDb,
    min_support: u32,
    min_length: usize,
    max_length: Option<usize>,
    closed_only: bool,
) -> BTreeMap<Vec<u32>, (u32, u64)> {
    let mut all: BTreeMap<Vec<u32>, (BTreeSet<usize>, u64)> = BTreeMap::new();
    for (s, seq) in db.sequences().enumerate() {
        for i in 0..seq.len() {
            for j in i + 1..=seq.len() {
                let entry = all.entry(seq[i..j].to_vec()).or_default();
                entry.0.insert(s);
                entry.1 += 1;
            }
        }
    }
    let support = |p: &[u32]| all.get(p).map_or(0, |e| e.0.len() as u32);
    let contains = |outer: &[u32], inner: &[u32]| outer.windows(inner.len()).any(|w| w == inner);
    all.iter()
        .filter(|(p, (seqs, _))| {
            let s = seqs.len() as u32;
            s >= min_support
                && p.len() >= min_length
                && max_length.is_none_or(|m| p.len() <= m)
                && (!closed_only
                    || !all
                        .keys()
                        .any(|q| q.len() > p.len() && contains(q, p) && support(q) == s))
        })
        .map(|(p, (seqs, occ))| (p.clone(), (seqs.len() as u32, *occ)))
        .collect()
}

/// Every sequential pattern (items in order; at most `max_gap` items skipped between
/// consecutive pattern items when bounded) with its support, filtered by `min_support` and the
/// length bounds. Sequences longer than [`MAX_GAPPED_SEQUENCE`] are refused.
pub fn gapped(
    db: &SequenceDb,
    min_support: u32,
    max_gap: Option<u32>,
    min_length: usize,
    max_length: Option<usize>,
) -> Result<BTreeMap<Vec<u32>, u32>, SpmError> {
    let mut support: BTreeMap<Vec<u32>, u32> = BTreeMap::new();
    for seq in db.sequences() {
        if seq.len() > MAX_GAPPED_SEQUENCE {
            return Err(SpmError::InvalidOption(format!(
                "the reference gapped miner takes sequences of at most {MAX_GAPPED_SEQUENCE} items"
            )));
        }
        let mut here: BTreeSet<Vec<u32>> = BTreeSet::new();
        for mask in 1u32..(1u32 << seq.len()) {
            let picked: Vec<usize> = (0..seq.len()).filter(|&i| mask & (1 << i) != 0).collect();
            let gaps_ok = picked
                .windows(2)
                .all(|w| max_gap.is_none_or(|g| w[1] - w[0] - 1 <= g as usize));
            if gaps_ok {
                here.insert(picked.iter().map(|&i| seq[i]).collect());
            }
        }
        for p in here {
            *support.entry(p).or_default() += 1;
        }
    }
    Ok(support
        .into_iter()
        .filter(|(p, s)| {
            *s >= min_support && p.len() >= min_length && max_length.is_none_or(|m| p.len() <= m)
        })
        .collect())
}
