//! OpenTelemetry trace exports through `import`: the OTLP reader's batches, redacted as every
//! import is, and its report in the importers' terms.

use std::path::Path;

use super::{ImportBatch, ImportOptions, ImportReport};
use crate::error::Result;

#[cfg(feature = "otlp")]
pub(super) fn import(
    path: &Path,
    options: &ImportOptions,
    sink: &mut dyn FnMut(ImportBatch) -> Result<()>,
) -> Result<ImportReport> {
    use crate::capture::RedactionCounts;

    let read_options = crate::otlp::ReadOptions {
        batch_steps: options.batch_steps,
        source: options.source.clone(),
        trace_id_prefix: options.trace_id_prefix.clone(),
        max_record_bytes: options.max_record_bytes,
    };
    let mut redacted = RedactionCounts::default();
    let report = crate::otlp::read_file(path, &read_options, &mut |mut batch| {
        for trace in &mut batch.traces {
            redacted += options.redaction.redact_trace_counting(trace);
        }
        for step in &mut batch.steps {
            redacted += options.redaction.redact_step_counting(step);
        }
        sink(batch)
    })?;
    Ok(ImportReport {
        path: report.path,
        format: super::ImportFormat::Otlp,
        traces: report.traces,
        steps: report.steps,
        failed_steps: report.failed_steps,
        // A tool span is a finished call: it always carries its outcome.
        calls_without_result: 0,
        traces_without_calls: 0,
        redacted,
        rejects: report.rejects,
    })
}

#[cfg(not(feature = "otlp"))]
pub(super) fn import(
    path: &Path,
    _options: &ImportOptions,
    _sink: &mut dyn FnMut(ImportBatch) -> Result<()>,
) -> Result<ImportReport> {
    Err(crate::error::RecorderError::Import {
        path: path.to_owned(),
        line: 0,
        message: "this build reads no OTLP exports (cargo feature `otlp`)".into(),
    })
}
