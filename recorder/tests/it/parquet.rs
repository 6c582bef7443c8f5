//! parquet tests.
