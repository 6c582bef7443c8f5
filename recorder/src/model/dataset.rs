//! Names in the Parquet dataset that query engines read directly (`docs/parquet-schema.md`):
//! the tables' folders and the columns mining reads, so that SQL built elsewhere spells them
//! once, here.

/// The `steps` table: one row a recorded tool call.
pub mod steps {
    /// The table's folder under the dataset root, and the relation name the counting SQL reads.
    pub const TABLE: &str = "steps";
    pub const TRACE_ID: &str = "trace_id";
    pub const STEP_INDEX: &str = "step_index";
    pub const TOOL_NAME: &str = "tool_name";
    /// When the call started (UTC); a trace is dated by its first timed step.
    pub const STARTED_AT: &str = "started_at";
}
