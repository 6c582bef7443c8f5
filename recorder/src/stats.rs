//! Per-tool statistics computed with polars.
