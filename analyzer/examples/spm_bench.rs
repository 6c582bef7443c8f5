//! Benchmark driver for the sequential pattern miners (used by `scripts/bench_spm.sh`).
//!
//! ```text
//! spm_bench gen x|d <input.txt> <copies> <output.txt>     write the X or D corpus
//! spm_bench parse <input.txt>                             read, intern, one counting pass
//! spm_bench contiguous <input.txt> <min_support> <output.txt> [--closed]
//! spm_bench gapped <input.txt> <min_support> <output.txt> [--max-gap N]
//! ```
//!
//! Mining runs end to end: parse the SPMF file, mine, write every pattern (SPMF output style,
//! `a -1 b -1 #SUP: n`) to the output file. One summary line goes to stdout:
//! `patterns=N parse_s=.. mine_s=.. total_s=..`.

#![allow(clippy::print_stdout)]

use std::error::Error;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::Instant;

use chainweaver_analyzer::spm::{ContiguousOptions, GappedOptions, SequenceDb, contiguous, gapped};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> Result<&str> {
        args.get(i)
            .map(String::as_str)
            .ok_or_else(|| format!("missing argument {i}; see the file header for usage").into())
    };
    let started = Instant::now();
    match arg(0)? {
        "gen" => {
            let db = SequenceDb::read_spmf(arg(2)?)?;
            let copies: usize = arg(3)?.parse()?;
            let out = match arg(1)? {
                "x" => db.repeated(copies)?,
                "d" => db.disjoint_copies(copies, 1000)?,
                other => return Err(format!("unknown corpus kind {other:?}").into()),
            };
            let mut w = BufWriter::new(File::create(arg(4)?)?);
            out.write_spmf(&mut w)?;
            w.flush()?;
            println!(
                "sequences={} steps={} items={}",
                out.len(),
                out.num_steps(),
                out.num_items()
            );
        }
        "parse" => {
            let db = SequenceDb::read_spmf(arg(1)?)?;
            // One counting pass: per-sequence support of every item.
            let mut support = vec![0u32; db.num_items()];
            let mut last = vec![u32::MAX; db.num_items()];
            for (s, seq) in db.sequences().enumerate() {
                for &item in seq {
                    if last[item as usize] != s as u32 {
                        last[item as usize] = s as u32;
                        support[item as usize] += 1;
                    }
                }
            }
            let frequent = support.iter().filter(|&&s| s > 0).count();
            println!(
                "items={frequent} steps={} total_s={:.4}",
                db.num_steps(),
                started.elapsed().as_secs_f64()
            );
        }
        mode @ ("contiguous" | "gapped") => {
            let db = SequenceDb::read_spmf(arg(1)?)?;
            let parsed = started.elapsed().as_secs_f64();
            let min_support: u32 = arg(2)?.parse()?;
            let mut w = BufWriter::with_capacity(1 << 20, File::create(arg(3)?)?);
            let flags = &args[4.min(args.len())..];
            let mut n = 0u64;
            let mut line = Vec::with_capacity(256);
            let mut write = |items: &[u32], support: u32| -> std::io::Result<()> {
                line.clear();
                for &i in items {
                    line.extend_from_slice(db.name(i).as_bytes());
                    line.extend_from_slice(b" -1 ");
                }
                line.extend_from_slice(format!("#SUP: {support}\n").as_bytes());
                n += 1;
                w.write_all(&line)
            };
            let mut io_error = None;
            if mode == "contiguous" {
                let options = ContiguousOptions {
                    closed_only: flags.iter().any(|f| f == "--closed"),
                    ..ContiguousOptions::with_min_support(min_support)
                };
                contiguous::visit(&db, &options, |items, support, _| {
                    if let Err(e) = write(items, support) {
                        io_error.get_or_insert(e);
                    }
                })?;
            } else {
                let max_gap = match flags.iter().position(|f| f == "--max-gap") {
                    Some(i) => Some(flags.get(i + 1).ok_or("--max-gap needs a value")?.parse()?),
                    None => None,
                };
                let options = GappedOptions {
                    max_gap,
                    ..GappedOptions::with_min_support(min_support)
                };
                gapped::visit(&db, &options, |items, support| {
                    if let Err(e) = write(items, support) {
                        io_error.get_or_insert(e);
                    }
                })?;
            }
            if let Some(e) = io_error {
                return Err(e.into());
            }
            w.flush()?;
            let total = started.elapsed().as_secs_f64();
            println!(
                "patterns={n} parse_s={parsed:.4} mine_s={:.4} total_s={total:.4}",
                total - parsed
            );
        }
        other => return Err(format!("unknown mode {other:?}").into()),
    }
    Ok(())
}
