//! `chainweaver traces`: list, show, stats, export and convert stored traces.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use chainweaver_recorder::export::{LogFormat, LogWriter};
use chainweaver_recorder::model::Timestamp;
use chainweaver_recorder::stats::tool_stats;
use chainweaver_recorder::store::{self, PageRequest, TraceFilter, TraceSort};
use clap::{Subcommand, ValueEnum};

use super::document::{emit_document, emit_named};
use super::output::{Table, human_ms, one_line};
use super::store::{open, open_existing, parse_time};
use super::{Failure, Global, exit, progress};

#[derive(Debug, Subcommand)]
pub enum TracesCommand {
    /// List traces, filtered and paged.
    List {
        #[command(flatten)]
        filter: FilterArgs,
        /// Order by this column.
        #[arg(long, value_enum, default_value_t = SortArg::Stored)]
        sort: SortArg,
        /// Largest first.
        #[arg(long)]
        desc: bool,
        /// At most this many traces.
        #[arg(long, default_value_t = 50)]
        limit: u64,
        /// Skip this many traces first (for paging).
        #[arg(long, default_value_t = 0)]
        offset: u64,
    },
    /// Show one trace with every step.
    Show {
        /// The trace id (see `traces list`).
        trace_id: String,
    },
    /// Per-tool statistics: calls, traces, error rate, latency p50/p95/p99 (interpolated
    /// linearly between the two nearest ranks; the TUI's Tools view shows the same figures).
    Stats {
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Write every trace as JSON Lines (one trace with its steps a line, readable by `import`),
    /// or as an event log for process-mining tools (PM4Py, ProM, Disco, Celonis): XES or
    /// OCEL 2.0 JSON, one case per trace, one event per call, the tool as activity.
    Export {
        /// The file to write (`-` for standard output).
        #[arg(long, short)]
        output: PathBuf,
        /// What to write: `jsonl`, `xes` or `ocel`. By default taken from the output's
        /// extension (`.xes`, `.jsonocel` or `.ocel.json`), else `jsonl`. (`--format` is the
        /// global table/JSON choice for what the command prints.)
        #[arg(long = "as", value_enum, value_name = "LOG")]
        log: Option<ExportAs>,
    },
    /// Rewrite the store compactly, keeping what it holds. A Parquet dataset filled by many
    /// appends (a recorder's batches, imports, `collect`) holds many small part files, and every
    /// read opens each one: compaction merges each day partition's parts into files of up to
    /// about a million rows, keeping every row as written except trace rows a later append
    /// replaced. A SQLite store is vacuumed. If a recorder or `collect` commits an append
    /// while it runs, it stops without changing anything: run it again when appends pause. A
    /// reader that is mid-way through a read when the old files go may fail, and works when it
    /// reads again. Prints the files and bytes before and after (with
    /// `--format json`: `files_before`, `files_after`, `bytes_before`, `bytes_after`,
    /// `rows_rewritten`).
    Compact,
    /// Copy every trace into another store: SQLite to Parquet or back, nothing lost.
    Convert {
        /// The target store: a `.db` file, or a directory / `.parquet` path for Parquet.
        #[arg(long)]
        to: PathBuf,
    },
}

/// Filters shared by `list` and `stats`.
#[derive(Debug, Clone, clap::Args)]
pub struct FilterArgs {
    /// Traces that call exactly this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Traces calling a tool whose name contains this text.
    #[arg(long)]
    tool_contains: Option<String>,
    /// Traces from this source (e.g. `tau-bench`, `recorder`).
    #[arg(long)]
    source: Option<String>,
    /// Traces started at or after this time (`2026-11-01` or RFC 3339).
    #[arg(long, value_parser = parse_time)]
    since: Option<Timestamp>,
    /// Traces started before this time.
    #[arg(long, value_parser = parse_time)]
    until: Option<Timestamp>,
    /// Only traces with a failed step.
    #[arg(long, conflicts_with = "no_errors")]
    errors: bool,
    /// Only traces without a failed step.
    #[arg(long)]
    no_errors: bool,
    /// Traces lasting at least this many milliseconds.
    #[arg(long)]
    min_duration_ms: Option<f64>,
}

impl FilterArgs {
    fn filter(&self) -> TraceFilter {
        TraceFilter {
            tool: self.tool.clone(),
            tool_contains: self.tool_contains.clone(),
            source: self.source.clone(),
            since: self.since,
            until: self.until,
            has_error: if self.errors {
                Some(true)
            } else if self.no_errors {
                Some(false)
            } else {
                None
            },
            min_duration_ms: self.min_duration_ms,
        }
    }
}

/// What `traces export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportAs {
    /// ChainWeaver's own JSON Lines, lossless.
    Jsonl,
    /// XES (IEEE 1849).
    Xes,
    /// OCEL 2.0 JSON.
    Ocel,
}

impl ExportAs {
    fn for_output(output: &std::path::Path) -> Self {
        let name = output.to_string_lossy().to_ascii_lowercase();
        if name.ends_with(".xes") {
            ExportAs::Xes
        } else if name.ends_with(".jsonocel") || name.ends_with(".ocel.json") {
            ExportAs::Ocel
        } else {
            ExportAs::Jsonl
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SortArg {
    Stored,
    Id,
    Started,
    Steps,
    Errors,
    Duration,
}

impl From<SortArg> for TraceSort {
    fn from(sort: SortArg) -> Self {
        match sort {
            SortArg::Stored => TraceSort::Stored,
            SortArg::Id => TraceSort::TraceId,
            SortArg::Started => TraceSort::StartedAt,
            SortArg::Steps => TraceSort::Steps,
            SortArg::Errors => TraceSort::Errors,
            SortArg::Duration => TraceSort::Duration,
        }
    }
}

pub fn run(command: TracesCommand, global: &Global) -> anyhow::Result<u8> {
    match command {
        TracesCommand::List {
            filter,
            sort,
            desc,
            limit,
            offset,
        } => {
            let store = open_existing(&global.store)?;
            let page = PageRequest {
                offset,
                limit,
                sort: sort.into(),
                descending: desc,
            };
            let listing = store.list_traces(&filter.filter(), &page)?;
            emit_document(global, &listing, || {
                let mut table = Table::new(&[
                    "trace",
                    "source",
                    "started",
                    ">steps",
                    ">errors",
                    ">duration",
                ]);
                for row in &listing.traces {
                    table.row(vec![
                        row.trace.trace_id.clone(),
                        row.trace.source.clone(),
                        row.trace
                            .started_at
                            .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
                            .unwrap_or_else(|| "-".into()),
                        row.step_count.to_string(),
                        row.error_count.to_string(),
                        human_ms(row.duration_ms),
                    ]);
                }
                let shown = listing.traces.len() as u64;
                format!(
                    "{}{} of {} traces (offset {offset})\n",
                    table.render(),
                    shown,
                    listing.total
                )
            })?;
        }
        TracesCommand::Show { trace_id } => {
            let store = open_existing(&global.store)?;
            let Some(trace) = store.get_trace(&trace_id)? else {
                return Err(Failure {
                    code: exit::FAILED,
                    message: format!("no trace `{trace_id}` in {}", global.store.display()),
                    hint: Some("`chainweaver traces list` shows the stored trace ids".into()),
                }
                .into());
            };
            emit_document(global, &trace, || {
                let mut text = format!(
                    "trace {}  source {}  steps {}\n",
                    trace.trace.trace_id,
                    trace.trace.source,
                    trace.steps.len()
                );
                let mut table =
                    Table::new(&[">#", "tool", "status", ">duration", "inputs", "outputs"]);
                for step in &trace.steps {
                    let status = if step.is_error() {
                        format!("error: {}", step.error_type.as_deref().unwrap_or("failed"))
                    } else {
                        "ok".into()
                    };
                    let outputs = match (&step.outputs, &step.error_message) {
                        (Some(outputs), _) => one_line(outputs, 60),
                        (None, Some(message)) => message.chars().take(60).collect(),
                        (None, None) => "-".into(),
                    };
                    table.row(vec![
                        step.step_index.to_string(),
                        step.tool_name.clone(),
                        status,
                        human_ms(step.duration_ms),
                        one_line(&step.inputs, 50),
                        outputs,
                    ]);
                }
                text.push_str(&table.render());
                text
            })?;
        }
        TracesCommand::Stats { filter } => {
            let store = open_existing(&global.store)?;
            let columns = store.step_columns(&filter.filter())?;
            let stats = tool_stats(&columns)?;
            emit_named(global, "tools", &stats, || {
                let mut table = Table::new(&[
                    "tool", ">calls", ">traces", ">errors", ">error%", ">p50", ">p95", ">p99",
                ]);
                for row in &stats {
                    table.row(vec![
                        row.tool_name.clone(),
                        row.calls.to_string(),
                        row.traces.to_string(),
                        row.errors.to_string(),
                        format!("{:.1}", row.error_rate * 100.0),
                        human_ms(row.p50_ms),
                        human_ms(row.p95_ms),
                        human_ms(row.p99_ms),
                    ]);
                }
                table.render()
            })?;
        }
        TracesCommand::Export { output, log } => {
            let log = log.unwrap_or_else(|| ExportAs::for_output(&output));
            let store = open_existing(&global.store)?;
            let total = store.counts()?;
            let bar = progress::bar(global, total.traces, "exporting");
            let mut writer: Box<dyn Write> = if output.as_os_str() == "-" {
                Box::new(BufWriter::new(std::io::stdout().lock()))
            } else {
                Box::new(BufWriter::new(File::create(&output).with_context(
                    || format!("cannot create {}", output.display()),
                )?))
            };
            let mut written = 0u64;
            let event_log = match log {
                ExportAs::Jsonl => None,
                ExportAs::Xes => Some(LogFormat::Xes),
                ExportAs::Ocel => Some(LogFormat::Ocel),
            };
            if let Some(format) = event_log {
                let mut log_writer = LogWriter::new(format, &mut writer, &output)?;
                store.for_each_trace(&mut |trace| {
                    log_writer.write_trace(&trace)?;
                    written += 1;
                    bar.inc(1);
                    Ok(())
                })?;
                log_writer.finish()?;
            } else {
                store.for_each_trace(&mut |trace| {
                    serde_json::to_writer(&mut writer, &trace)
                        .and_then(|()| writer.write_all(b"\n").map_err(serde_json::Error::io))
                        .map_err(|err| chainweaver_recorder::RecorderError::Io {
                            path: output.clone(),
                            source: std::io::Error::other(err),
                        })?;
                    written += 1;
                    bar.inc(1);
                    Ok(())
                })?;
            }
            writer
                .flush()
                .with_context(|| format!("cannot write {}", output.display()))?;
            bar.finish_and_clear();
            if output.as_os_str() != "-" {
                emit_document(
                    global,
                    &serde_json::json!({"traces": written, "output": output}),
                    || format!("exported {written} traces to {}\n", output.display()),
                )?;
            }
        }
        TracesCommand::Compact => {
            let total = open_existing(&global.store)?.counts()?;
            let bar = progress::bar(global, total.steps, "compacting");
            let stats = store::compact_store(&global.store, &mut |rows| bar.inc(rows))?;
            bar.finish_and_clear();
            emit_document(global, &stats, || {
                format!(
                    "compacted {}: {} files ({}) -> {} files ({}); {} step rows rewritten\n",
                    global.store.display(),
                    stats.files_before,
                    human_bytes(stats.bytes_before),
                    stats.files_after,
                    human_bytes(stats.bytes_after),
                    stats.rows_rewritten
                )
            })?;
        }
        TracesCommand::Convert { to } => {
            let from = open_existing(&global.store)?;
            if to == global.store {
                anyhow::bail!("--to names the store itself ({})", to.display());
            }
            let total = from.counts()?;
            let mut target = open(&to)?;
            let bar = progress::bar(global, total.steps, "converting");
            let written = store::copy_all(from.as_ref(), target.as_mut(), 50_000, &mut |steps| {
                bar.inc(steps)
            })?;
            bar.finish_and_clear();
            emit_document(global, &written, || {
                format!(
                    "copied {} traces and {} steps from {} to {} ({} steps were already there)\n",
                    written.traces,
                    written.steps,
                    global.store.display(),
                    to.display(),
                    written.duplicate_steps
                )
            })?;
        }
    }
    Ok(exit::OK)
}

/// A size on disk for people: bytes, KiB, MiB or GiB with one decimal.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn sizes_read_in_the_largest_unit_below_them() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(5 * 1024 * 1024), "5.0 MiB");
        assert_eq!(human_bytes(3 << 40), "3072.0 GiB");
    }
}
