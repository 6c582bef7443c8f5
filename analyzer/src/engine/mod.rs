//! Mining where the data is: the support counting as query plans of an engine that reads the
//! store's Parquet dataset, with binding inference fed by the occurrences the engine returns.
//!
//! - [`sql`]: the counting query, in SQL that DataFusion, DuckDB and Spark SQL run unchanged
//!   (`chainweaver mine --emit-sql` prints it).

pub mod sql;
