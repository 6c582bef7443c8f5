//! `chainweaver collect`: receive OpenTelemetry traces over OTLP/HTTP and store their tool calls.

use std::net::SocketAddr;

use anyhow::Context;
use chainweaver::collect::{CollectConfig, CollectReport, Collector};
use clap::Args;

use super::document::emit_document;
use super::output::Table;
use super::{Global, exit};

/// Receive OpenTelemetry traces over OTLP/HTTP and store their tool calls as they arrive.
///
/// Point an exporter at `http://ADDR/v1/traces` (for example
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:4318/v1/traces`). Protobuf and JSON bodies
/// are taken, gzip-compressed or not. Tool spans (GenAI `execute_tool` spans and OpenInference
/// `TOOL` spans) become steps, one trace per conversation id (else per trace id); every other
/// span is left out. Values are redacted before they are stored, as with the recorder.
///
/// A request is answered only once its spans are committed to the store, so an acknowledged span
/// survives a crash. When the write queue is full the answer is 429 with Retry-After, which
/// exporters honour. Ctrl-C or SIGTERM stops accepting, finishes the requests under way, flushes
/// and prints what was received.
#[derive(Debug, Args)]
pub struct CollectArgs {
    /// The address to listen on (port 0 picks a free one; the address is printed on start).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:4318")]
    pub listen: SocketAddr,
    /// Spans waiting to be written before requests are answered 429.
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    pub max_queued_spans: usize,
}

pub fn run(args: CollectArgs, global: &Global) -> anyhow::Result<u8> {
    let mut config = CollectConfig::new(args.listen, global.store.clone());
    config.max_queued_spans = args.max_queued_spans;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the receiver's runtime")?;
    let report = runtime.block_on(async {
        let collector = Collector::bind(config).await?;
        let address = collector.local_addr()?;
        eprintln!(
            "collect: listening on http://{address}/v1/traces, storing into {}",
            global.store.display()
        );
        collector.run(shutdown_signal()).await
    })?;
    emit_document(global, &report, || render(&report))?;
    Ok(exit::OK)
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = interrupt => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

fn render(report: &CollectReport) -> String {
    let mut table = Table::new(&["what", ">count"]);
    for (what, count) in [
        ("requests stored", report.requests),
        ("spans received", report.spans),
        ("tool calls stored", report.steps),
        ("duplicate spans left out", report.duplicate_spans),
        ("tool spans rejected", report.rejected_spans),
        ("requests throttled (429)", report.throttled),
        ("requests refused", report.refused),
        ("requests not stored (503)", report.failed),
    ] {
        table.row(vec![what.to_owned(), count.to_string()]);
    }
    table.render()
}
