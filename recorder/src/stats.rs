//! Per-tool statistics computed with polars.
//!
//! The store hands over slim columns ([`StepColumns`]: no payloads), polars groups and
//! aggregates them. Latency percentiles use linear interpolation between the two nearest
//! ranks (the value at position `q x (n - 1)` of the sorted durations, as numpy's default and
//! polars' `QuantileMethod::Linear` define it) and skip steps without a duration. This is the
//! one definition: `chainweaver traces stats` and the TUI's Tools view both call [`tool_stats`].

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{RecorderError, Result};
use crate::store::StepColumns;

/// What one tool did across the steps considered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolStats {
    pub tool_name: String,
    /// Steps calling the tool.
    pub calls: u64,
    /// Distinct traces calling it.
    pub traces: u64,
    /// Failed calls.
    pub errors: u64,
    /// `errors / calls`.
    pub error_rate: f64,
    /// Latency percentiles in milliseconds over calls with a known duration.
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub mean_ms: Option<f64>,
}

fn polars_error(err: PolarsError) -> RecorderError {
    RecorderError::Stats(err.to_string())
}

/// Per-tool statistics, most-called tool first (ties by name).
pub fn tool_stats(columns: &StepColumns) -> Result<Vec<ToolStats>> {
    if columns.tool_name.is_empty() {
        return Ok(Vec::new());
    }
    let height = columns.tool_name.len();
    let frame = DataFrame::new(
        height,
        vec![
            Column::new("tool".into(), &columns.tool_name),
            Column::new("trace".into(), &columns.trace_id),
            Column::new("error".into(), &columns.is_error),
            Column::new("duration".into(), &columns.duration_ms),
        ],
    )
    .map_err(polars_error)?;
    let percentile = |q: f64, name: &str| {
        col("duration")
            .quantile(lit(q), QuantileMethod::Linear)
            .alias(name)
    };
    let out = frame
        .lazy()
        .group_by([col("tool")])
        .agg([
            col("tool").len().alias("calls"),
            col("trace").n_unique().alias("traces"),
            col("error").cast(DataType::UInt64).sum().alias("errors"),
            percentile(0.50, "p50"),
            percentile(0.95, "p95"),
            percentile(0.99, "p99"),
            col("duration").mean().alias("mean"),
        ])
        .collect()
        .map_err(polars_error)?;

    let text = |name: &str| -> Result<Vec<String>> {
        let column = out.column(name).map_err(polars_error)?;
        let strings = column.str().map_err(polars_error)?;
        Ok(strings
            .iter()
            .map(|v| v.unwrap_or_default().to_string())
            .collect())
    };
    let whole = |name: &str| -> Result<Vec<u64>> {
        let column = out
            .column(name)
            .map_err(polars_error)?
            .cast(&DataType::UInt64)
            .map_err(polars_error)?;
        let values = column.u64().map_err(polars_error)?;
        Ok(values.iter().map(|v| v.unwrap_or(0)).collect())
    };
    let real = |name: &str| -> Result<Vec<Option<f64>>> {
        let column = out
            .column(name)
            .map_err(polars_error)?
            .cast(&DataType::Float64)
            .map_err(polars_error)?;
        let values = column.f64().map_err(polars_error)?;
        Ok(values.iter().collect())
    };
    let (tools, calls, traces, errors) = (
        text("tool")?,
        whole("calls")?,
        whole("traces")?,
        whole("errors")?,
    );
    let (p50, p95, p99, mean) = (real("p50")?, real("p95")?, real("p99")?, real("mean")?);
    let mut stats: Vec<ToolStats> = (0..tools.len())
        .map(|i| ToolStats {
            tool_name: tools[i].clone(),
            calls: calls[i],
            traces: traces[i],
            errors: errors[i],
            error_rate: if calls[i] == 0 {
                0.0
            } else {
                errors[i] as f64 / calls[i] as f64
            },
            p50_ms: p50[i],
            p95_ms: p95[i],
            p99_ms: p99[i],
            mean_ms: mean[i],
        })
        .collect();
    stats.sort_by(|a, b| {
        b.calls
            .cmp(&a.calls)
            .then_with(|| a.tool_name.cmp(&b.tool_name))
    });
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(rows: &[(&str, &str, bool, Option<f64>)]) -> StepColumns {
        StepColumns {
            trace_id: rows.iter().map(|r| r.0.to_string()).collect(),
            tool_name: rows.iter().map(|r| r.1.to_string()).collect(),
            is_error: rows.iter().map(|r| r.2).collect(),
            duration_ms: rows.iter().map(|r| r.3).collect(),
            started_at: rows.iter().map(|_| None).collect(),
        }
    }

    #[test]
    fn counts_rates_and_percentiles_per_tool() {
        let mut rows = Vec::new();
        // 100 calls of `get` in 10 traces, durations 1..=100, every 10th failing.
        let traces: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
        for i in 0..100 {
            rows.push((
                traces[i % 10].as_str(),
                "get",
                i % 10 == 9,
                Some((i + 1) as f64),
            ));
        }
        rows.push(("t0", "put", false, None));
        let stats = tool_stats(&columns(&rows)).unwrap();
        assert_eq!(stats.len(), 2);
        let get = &stats[0];
        assert_eq!(
            (get.tool_name.as_str(), get.calls, get.traces, get.errors),
            ("get", 100, 10, 10)
        );
        assert!((get.error_rate - 0.1).abs() < 1e-12);
        // Linear interpolation over 1..=100: p50 = 50.5, p95 = 95.05, p99 = 99.01.
        assert!((get.p50_ms.unwrap() - 50.5).abs() < 1e-9, "{get:?}");
        assert!((get.p95_ms.unwrap() - 95.05).abs() < 1e-9, "{get:?}");
        assert!((get.p99_ms.unwrap() - 99.01).abs() < 1e-9, "{get:?}");
        let put = &stats[1];
        assert_eq!((put.calls, put.traces, put.errors), (1, 1, 0));
        assert_eq!(put.p50_ms, None, "no durations, no percentile");
    }

    #[test]
    fn percentiles_interpolate_between_the_nearest_ranks() {
        // Sorted 10, 20, 30, 1000: p50 sits halfway between 20 and 30 (position 1.5); p95 at
        // position 2.85, 85% of the way from 30 to 1000; p99 at 2.97.
        let rows = [
            ("t1", "get", false, Some(30.0)),
            ("t1", "get", false, Some(10.0)),
            ("t2", "get", true, Some(1000.0)),
            ("t3", "get", false, Some(20.0)),
            ("t3", "get", false, None),
        ];
        let stats = tool_stats(&columns(&rows)).unwrap();
        let get = &stats[0];
        assert_eq!((get.calls, get.traces, get.errors), (5, 3, 1));
        assert_eq!(get.p50_ms, Some(25.0));
        assert!((get.p95_ms.unwrap() - 854.5).abs() < 1e-9, "{get:?}");
        assert!((get.p99_ms.unwrap() - 970.9).abs() < 1e-9, "{get:?}");
        assert_eq!(get.mean_ms, Some(265.0));
        // One duration: every percentile is that duration.
        let one = tool_stats(&columns(&[("t1", "put", false, Some(7.0))])).unwrap();
        assert_eq!((one[0].p50_ms, one[0].p99_ms), (Some(7.0), Some(7.0)));
    }

    #[test]
    fn empty_input_gives_no_rows() {
        assert!(tool_stats(&StepColumns::default()).unwrap().is_empty());
    }
}
