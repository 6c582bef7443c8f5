//! `chainweaver record -- CMD ARGS...`: stand in front of an MCP server and record its tool calls.

use std::ffi::OsString;
use std::time::Duration;

use chainweaver::proxy::session::TraceBy;
use chainweaver::proxy::{RecordOptions, RecordReport, os_signals, record};
use clap::Args;

use super::{Global, OutputFormat, SCHEMA_VERSION};

/// The flags of `chainweaver record` (its description is on `cli::Command::Record`).
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct RecordArgs {
    /// How calls are grouped into traces: `session` (one trace per client session),
    /// `client` (per client name and version), or `request-meta:KEY` (per value of KEY in
    /// the tools/call request's `_meta`, such as a conversation id).
    #[arg(long, value_name = "RULE", default_value = "session", value_parser = parse_trace_by)]
    pub trace_by: TraceBy,
    /// Seconds the server may take to exit after its stdin closes or a signal, before the
    /// next, harder signal.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = parse_seconds)]
    pub shutdown_grace: f64,
    /// The MCP server's command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

const AFTER_HELP: &str = "\
Examples:
  # Record a server's calls into ./chainweaver.db while a client talks to it:
  chainweaver record -- python3 weather_server.py

  # In an MCP client's configuration (JSON), the server entry becomes:
  #   \"weather\": {\"command\": \"chainweaver\",
  #               \"args\": [\"--store\", \"/home/me/traces.db\", \"record\", \"--\",
  #                        \"python3\", \"/home/me/weather_server.py\"]}

  # One trace per conversation, from a `_meta` key the agent sets on each call:
  chainweaver record --trace-by request-meta:conversation_id -- npx my-mcp-server

  # Then mine what was recorded:
  chainweaver analyze";

fn parse_trace_by(text: &str) -> Result<TraceBy, String> {
    match text {
        "session" => Ok(TraceBy::Session),
        "client" => Ok(TraceBy::Client),
        other => match other.strip_prefix("request-meta:") {
            Some(key) if !key.is_empty() => Ok(TraceBy::RequestMeta(key.to_owned())),
            Some(_) => Err("name the _meta key: request-meta:KEY".into()),
            None => Err("use `session`, `client` or `request-meta:KEY`".into()),
        },
    }
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && (0.0..=3600.0).contains(&seconds) => Ok(seconds),
        _ => Err("a number of seconds between 0 and 3600".into()),
    }
}

#[allow(clippy::print_stderr)]
pub fn run(args: RecordArgs, global: &Global) -> anyhow::Result<u8> {
    let mut options = RecordOptions::new(args.command, global.store.clone());
    options.trace_by = args.trace_by;
    options.shutdown_grace = Duration::from_secs_f64(args.shutdown_grace);
    let report = record(options, os_signals)?;
    match global.format {
        OutputFormat::Json => {
            let mut document = serde_json::Map::new();
            document.insert("schema_version".into(), SCHEMA_VERSION.into());
            if let serde_json::Value::Object(fields) = serde_json::to_value(&report)? {
                document.extend(fields);
            }
            eprintln!("{}", serde_json::Value::Object(document));
        }
        OutputFormat::Table => {
            if !global.quiet || report.lost_anything() {
                eprintln!("{}", render(&report, global));
            }
        }
    }
    Ok(report.exit_code)
}

fn render(report: &RecordReport, global: &Global) -> String {
    let mut lines = vec![format!(
        "record: {} tool calls in {} traces stored into {} ({}; exit status {})",
        report.steps_stored,
        report.traces,
        global.store.display(),
        report.ended_by,
        report.exit_code
    )];
    if report.steps_lost > 0 {
        lines.push(format!(
            "record: {} of {} tool calls were NOT recorded: {}",
            report.steps_lost,
            report.tool_calls,
            report.store_error.as_deref().unwrap_or("the store failed")
        ));
    } else if let Some(error) = &report.store_error {
        lines.push(format!("record: the store reported: {error}"));
    }
    if report.recorder_unfinished {
        lines.push(
            "record: the store did not finish writing in time (slow or locked): calls of this run may NOT be recorded"
                .to_owned(),
        );
    }
    if report.unobserved_bytes > 0 {
        lines.push(format!(
            "record: {} relayed bytes were not observed (the recorder fell behind); calls in them are not recorded",
            report.unobserved_bytes
        ));
    }
    if report.skipped_messages > 0 {
        lines.push(format!(
            "record: {} messages were too large or incomplete to record (relayed all the same)",
            report.skipped_messages
        ));
    }
    if report.malformed_lines > 0 {
        lines.push(format!(
            "record: {} lines were not JSON-RPC messages (relayed all the same)",
            report.malformed_lines
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_by_rules_parse() {
        assert_eq!(parse_trace_by("session"), Ok(TraceBy::Session));
        assert_eq!(parse_trace_by("client"), Ok(TraceBy::Client));
        assert_eq!(
            parse_trace_by("request-meta:conv"),
            Ok(TraceBy::RequestMeta("conv".into()))
        );
        assert!(parse_trace_by("request-meta:").is_err());
        assert!(parse_trace_by("trace").is_err());
    }
}
