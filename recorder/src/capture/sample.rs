//! Sampling by trace: keep a fixed share of traces, decided from the trace id alone.
//!
//! The decision hashes the trace id (SHA-256, so it is the same on every platform, build and
//! run) to a position in `[0, 1)` and keeps the trace when that position is below the rate. The
//! same id is therefore always kept or always dropped, every process recording parts of one trace
//! agrees, and a trace kept at some rate is also kept at every higher rate.

use sha2::{Digest, Sha256};

/// The share of traces a recorder keeps, in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct SampleRate(f64);

impl SampleRate {
    /// Keep every trace (the default).
    pub const ALL: SampleRate = SampleRate(1.0);
    /// Keep no trace.
    pub const NONE: SampleRate = SampleRate(0.0);

    /// A rate in `[0, 1]`; `None` for anything else (including NaN).
    pub fn new(rate: f64) -> Option<Self> {
        (0.0..=1.0).contains(&rate).then_some(SampleRate(rate))
    }

    /// The rate as a number in `[0, 1]`.
    pub fn rate(self) -> f64 {
        self.0
    }

    /// True when the trace with this id is recorded at this rate.
    pub fn keeps(self, trace_id: &str) -> bool {
        if self.0 >= 1.0 {
            return true;
        }
        if self.0 <= 0.0 {
            return false;
        }
        trace_position(trace_id) < self.0
    }
}

impl Default for SampleRate {
    fn default() -> Self {
        SampleRate::ALL
    }
}

/// Where a trace id falls in `[0, 1)`: the first 53 bits of its SHA-256 as a fraction.
pub fn trace_position(trace_id: &str) -> f64 {
    let digest = Sha256::digest(trace_id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let bits = u64::from_be_bytes(first) >> 11;
    bits as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("trace-{i}")).collect()
    }

    #[test]
    fn rejects_rates_outside_the_unit_interval() {
        assert!(SampleRate::new(-0.01).is_none());
        assert!(SampleRate::new(1.01).is_none());
        assert!(SampleRate::new(f64::NAN).is_none());
        assert!(SampleRate::new(f64::INFINITY).is_none());
        assert_eq!(SampleRate::new(0.0), Some(SampleRate::NONE));
        assert_eq!(SampleRate::new(1.0), Some(SampleRate::ALL));
        assert_eq!(SampleRate::new(0.25).map(SampleRate::rate), Some(0.25));
    }

    #[test]
    fn all_keeps_everything_and_none_keeps_nothing() {
        for id in ids(500) {
            assert!(SampleRate::ALL.keeps(&id));
            assert!(!SampleRate::NONE.keeps(&id));
        }
        assert!(SampleRate::ALL.keeps(""));
        assert!(!SampleRate::NONE.keeps(""));
    }

    #[test]
    fn the_same_id_always_gets_the_same_decision() {
        let rate = SampleRate::new(0.5).unwrap();
        for id in ids(200) {
            let first = rate.keeps(&id);
            for _ in 0..3 {
                assert_eq!(rate.keeps(&id), first, "{id}");
            }
            assert_eq!(trace_position(&id), trace_position(&id.clone()));
        }
    }

    #[test]
    fn the_decision_does_not_depend_on_the_process() {
        // SHA-256("abc") is the published test vector ba7816bf 8f01cfea ...; pinning the position
        // it gives makes sure a change of hash (which would change which traces are kept) is seen.
        let expected = (0xba78_16bf_8f01_cfea_u64 >> 11) as f64 / (1u64 << 53) as f64;
        assert_eq!(trace_position("abc"), expected);
        assert!(SampleRate::new(0.73).unwrap().keeps("abc"));
        assert!(!SampleRate::new(0.72).unwrap().keeps("abc"));
    }

    #[test]
    fn the_kept_share_follows_the_rate() {
        let all = ids(20_000);
        for rate in [0.01, 0.1, 0.25, 0.5, 0.9] {
            let sample = SampleRate::new(rate).unwrap();
            let kept = all.iter().filter(|id| sample.keeps(id)).count();
            let share = kept as f64 / all.len() as f64;
            assert!(
                (share - rate).abs() < 0.02,
                "rate {rate}: kept {kept} of {} ({share})",
                all.len()
            );
        }
    }

    #[test]
    fn a_trace_kept_at_a_rate_is_kept_at_every_higher_rate() {
        let low = SampleRate::new(0.3).unwrap();
        let high = SampleRate::new(0.6).unwrap();
        let mut kept_low = 0;
        for id in ids(5_000) {
            if low.keeps(&id) {
                kept_low += 1;
                assert!(high.keeps(&id), "{id}");
            }
        }
        assert!(kept_low > 0);
    }

    #[test]
    fn positions_lie_in_the_unit_interval() {
        for id in ids(2_000)
            .iter()
            .map(String::as_str)
            .chain(["", "é", "a\0b"])
        {
            let p = trace_position(id);
            assert!((0.0..1.0).contains(&p), "{id:?}: {p}");
        }
    }
}
