//! `chainweaver-traces`: ChainWeaver's own lossless export, one trace with its steps a line
//! (`{"trace": {...}, "steps": [...]}`), as `chainweaver traces export` and
//! `chainweaver datasets generate --jsonl` write it. Every field of the data model survives.

use serde_json::Value;

use super::records::Handler as RecordHandler;
use super::{Output, Position};
use crate::error::Result;
use crate::model::TraceWithSteps;

/// The `chainweaver-traces` handler.
pub(crate) struct Handler;

impl RecordHandler for Handler {
    fn record(
        &mut self,
        out: &mut Output<'_>,
        _at: Position,
        value: Value,
    ) -> Result<Result<(), String>> {
        match serde_json::from_value::<TraceWithSteps>(value) {
            Ok(TraceWithSteps { trace, steps }) => {
                if let Some(step) = steps.iter().find(|s| s.trace_id != trace.trace_id) {
                    return Ok(Err(format!(
                        "step {} belongs to trace `{}`, not `{}`",
                        step.step_index, step.trace_id, trace.trace_id
                    )));
                }
                out.emit(trace, steps)?;
                Ok(Ok(()))
            }
            Err(err) => Ok(Err(format!("not a ChainWeaver trace record: {err}"))),
        }
    }

    fn finish(&mut self, _out: &mut Output<'_>) -> Result<()> {
        Ok(())
    }
}
