//! Baseline for the import benchmark: the same rows inserted with plain rusqlite.
//!
//! Reads a `chainweaver-traces` JSON Lines file (as `datasets generate --jsonl` writes it),
//! parses every line like the importer does, and inserts one row a step into a bare table with
//! a prepared statement, 10,000 rows a transaction, WAL and synchronous=FULL like the store.
//! No schema versioning, no indexes, no trace rows, no duplicate checks: the floor the store's
//! own import is compared with.
//!
//!     cargo run --release --example raw_sqlite_insert -- IN.jsonl OUT.db

use std::io::BufRead;
use std::time::Instant;

// The allocator the `chainweaver` binary uses, so the baseline parses with the same one.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(input), Some(output)) = (args.next(), args.next()) else {
        return Err("usage: raw_sqlite_insert IN.jsonl OUT.db".into());
    };
    let started = Instant::now();
    let mut db = rusqlite::Connection::open(&output)?;
    db.pragma_update(None, "journal_mode", "WAL")?;
    db.pragma_update(None, "synchronous", "FULL")?;
    db.execute_batch(
        "CREATE TABLE steps (trace_id TEXT, step_index INTEGER, tool_name TEXT, inputs TEXT,
         outputs TEXT, error_type TEXT, error_message TEXT, duration_ms REAL)",
    )?;
    let reader = std::io::BufReader::new(std::fs::File::open(&input)?);
    let mut rows = 0u64;
    let mut pending = 0usize;
    let mut tx = db.transaction()?;
    for line in reader.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let record: serde_json::Value = serde_json::from_str(&line)?;
        let Some(steps) = record["steps"].as_array() else {
            continue;
        };
        {
            let mut insert =
                tx.prepare_cached("INSERT INTO steps VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")?;
            for step in steps {
                insert.execute(rusqlite::params![
                    step["trace_id"].as_str(),
                    step["step_index"].as_i64(),
                    step["tool_name"].as_str(),
                    serde_json::to_string(&step["inputs"])?,
                    step.get("outputs").map(serde_json::to_string).transpose()?,
                    step["error_type"].as_str(),
                    step["error_message"].as_str(),
                    step["duration_ms"].as_f64(),
                ])?;
                rows += 1;
            }
        }
        pending += steps.len();
        if pending >= 10_000 {
            pending = 0;
            tx.commit()?;
            tx = db.transaction()?;
        }
    }
    tx.commit()?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{{\"rows\": {rows}, \"seconds\": {seconds:.3}, \"rows_per_second\": {:.0}}}",
        rows as f64 / seconds
    );
    Ok(())
}
