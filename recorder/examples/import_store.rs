//! Imports one file into a store the way `chainweaver import` does (default options, every batch
//! appended as it comes), and prints how long it took. For profiling the import path without
//! building the whole command-line tool.
//!
//!     cargo run --release -p chainweaver-recorder --example import_store -- IN STORE
//!
//! STORE is a SQLite file, or a Parquet dataset when it ends in `.parquet` or `/`.

use std::path::PathBuf;
use std::time::Instant;

use chainweaver_recorder::import::{ImportOptions, import_path};
use chainweaver_recorder::store::open_store;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let (Some(input), Some(store_path)) = (args.next(), args.next()) else {
        return Err("usage: import_store IN STORE".into());
    };
    let (input, store_path) = (PathBuf::from(input), PathBuf::from(store_path));
    let started = Instant::now();
    let mut store = open_store(&store_path)?;
    let mut stored = 0u64;
    let report = import_path(
        &input,
        &ImportOptions::default(),
        &mut |batch| {
            stored += store.append(&batch.traces, &batch.steps)?.steps;
            Ok(())
        },
        &mut |_| {},
    )?;
    let seconds = started.elapsed().as_secs_f64();
    #[allow(clippy::print_stdout)]
    {
        println!(
            "{{\"steps\": {stored}, \"rejects\": {}, \"seconds\": {seconds:.3}, \"steps_per_second\": {:.0}}}",
            report.rejects.len(),
            stored as f64 / seconds
        );
    }
    Ok(())
}
