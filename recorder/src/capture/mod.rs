//! Capture from a running program: the TraceRecorder and redaction.
