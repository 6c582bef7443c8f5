//! Per-tool statistics for the Tools view, computed from the store's slim step columns.

use std::collections::{HashMap, HashSet};

use chainweaver_recorder::store::StepColumns;
use serde::Serialize;

/// What the Tools view shows for one tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolStat {
    pub tool: String,
    /// Steps calling the tool.
    pub calls: u64,
    /// Distinct traces with at least one call.
    pub traces: u64,
    /// Failed calls.
    pub errors: u64,
    /// `errors / calls`.
    pub error_rate: f64,
    /// Median duration over the calls with a known duration (nearest rank).
    pub p50_ms: Option<f64>,
    /// 95th percentile duration (nearest rank).
    pub p95_ms: Option<f64>,
}

/// Statistics of every tool in `columns`, most called first (ties by name).
pub fn tool_stats(columns: &StepColumns) -> Vec<ToolStat> {
    struct Acc<'a> {
        calls: u64,
        errors: u64,
        traces: HashSet<&'a str>,
        durations: Vec<f64>,
    }
    let mut by_tool: HashMap<&str, Acc<'_>> = HashMap::new();
    for (i, tool) in columns.tool_name.iter().enumerate() {
        let acc = by_tool.entry(tool.as_str()).or_insert_with(|| Acc {
            calls: 0,
            errors: 0,
            traces: HashSet::new(),
            durations: Vec::new(),
        });
        acc.calls += 1;
        if columns.is_error.get(i).copied().unwrap_or(false) {
            acc.errors += 1;
        }
        if let Some(trace) = columns.trace_id.get(i) {
            acc.traces.insert(trace.as_str());
        }
        if let Some(Some(ms)) = columns.duration_ms.get(i)
            && ms.is_finite()
        {
            acc.durations.push(*ms);
        }
    }
    let mut stats: Vec<ToolStat> = by_tool
        .into_iter()
        .map(|(tool, mut acc)| {
            acc.durations.sort_by(f64::total_cmp);
            ToolStat {
                tool: tool.to_string(),
                calls: acc.calls,
                traces: acc.traces.len() as u64,
                errors: acc.errors,
                error_rate: acc.errors as f64 / acc.calls as f64,
                p50_ms: percentile(&acc.durations, 50.0),
                p95_ms: percentile(&acc.durations, 95.0),
            }
        })
        .collect();
    stats.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.tool.cmp(&b.tool)));
    stats
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_rates_and_percentiles() {
        let mut columns = StepColumns::default();
        let rows = [
            ("t1", "get", false, Some(10.0)),
            ("t1", "get", true, Some(30.0)),
            ("t2", "get", false, Some(20.0)),
            ("t2", "put", false, None),
            ("t3", "get", false, Some(1000.0)),
        ];
        for (trace, tool, err, dur) in rows {
            columns.trace_id.push(trace.into());
            columns.tool_name.push(tool.into());
            columns.is_error.push(err);
            columns.duration_ms.push(dur);
            columns.started_at.push(None);
        }
        let stats = tool_stats(&columns);
        assert_eq!(stats.len(), 2);
        let get = &stats[0];
        assert_eq!(
            (get.tool.as_str(), get.calls, get.traces, get.errors),
            ("get", 4, 3, 1)
        );
        assert_eq!(get.error_rate, 0.25);
        assert_eq!(get.p50_ms, Some(20.0));
        assert_eq!(get.p95_ms, Some(1000.0));
        assert_eq!(stats[1].p50_ms, None);
    }

    #[test]
    fn percentile_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 95.0), Some(95.0));
        assert_eq!(percentile(&[7.0], 95.0), Some(7.0));
    }
}
