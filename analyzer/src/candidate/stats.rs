//! Simple pattern statistics.

use std::collections::{BTreeMap, BTreeSet};

use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::candidate::Pattern;

/// Support of a pattern per UTC day.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DailySupport {
    /// `YYYY-MM-DD` -> distinct traces with an occurrence starting that day.
    pub by_day: BTreeMap<String, usize>,
    /// Occurrences whose first step (and trace) carries no timestamp.
    pub undated_occurrences: usize,
}

/// Distinct supporting traces per day, dating each occurrence by its first step (`started_at`,
/// else `recorded_at`, else `ended_at`, else the trace's `started_at`). Occurrences that point
/// outside `traces` are ignored.
pub fn support_by_day(traces: &[TraceWithSteps], pattern: &Pattern) -> DailySupport {
    let mut seen: BTreeSet<(String, usize)> = BTreeSet::new();
    let mut undated = 0;
    for occurrence in &pattern.occurrences {
        let Some(trace) = traces.get(occurrence.trace) else {
            continue;
        };
        let first = occurrence.steps.first().and_then(|&at| trace.steps.get(at));
        let when = first
            .and_then(|s| s.started_at.or(s.recorded_at).or(s.ended_at))
            .or(trace.trace.started_at);
        match when {
            Some(when) => {
                seen.insert((when.date_naive().to_string(), occurrence.trace));
            }
            None => undated += 1,
        }
    }
    let mut by_day = BTreeMap::new();
    for (day, _) in seen {
        *by_day.entry(day).or_insert(0) += 1;
    }
    DailySupport {
        by_day,
        undated_occurrences: undated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chainweaver_recorder::model::candidate::Occurrence;
    use chainweaver_recorder::model::{ObservedStep, ObservedTrace, Timestamp};
    use serde_json::json;

    fn trace(id: &str, times: &[Option<&str>]) -> TraceWithSteps {
        TraceWithSteps {
            trace: ObservedTrace::new(id, "test"),
            steps: times
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let mut step = ObservedStep::new(id, i as u32, "a", json!({}));
                    step.started_at = t.map(|t| t.parse::<Timestamp>().unwrap());
                    step
                })
                .collect(),
        }
    }

    #[test]
    fn counts_distinct_traces_per_day() {
        let traces = vec![
            trace(
                "t0",
                &[Some("2025-01-01T10:00:00Z"), Some("2025-01-02T10:00:00Z")],
            ),
            trace("t1", &[Some("2025-01-01T23:59:59Z")]),
            trace("t2", &[None]),
        ];
        let occurrences = vec![
            Occurrence {
                trace: 0,
                steps: vec![0],
            },
            Occurrence {
                trace: 0,
                steps: vec![1],
            },
            Occurrence {
                trace: 0,
                steps: vec![0],
            },
            Occurrence {
                trace: 1,
                steps: vec![0],
            },
            Occurrence {
                trace: 2,
                steps: vec![0],
            },
        ];
        let pattern = Pattern::new(vec!["a".into()], occurrences);
        let daily = support_by_day(&traces, &pattern);
        assert_eq!(daily.by_day.get("2025-01-01"), Some(&2));
        assert_eq!(daily.by_day.get("2025-01-02"), Some(&1));
        assert_eq!(daily.undated_occurrences, 1);
    }
}
