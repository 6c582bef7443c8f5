//! Benchmark driver for mining plus binding inference (used by `scripts/bench_mine.sh`).
//!
//! ```text
//! mine_bench memory <steps> [--seed S] [--sample N|all]
//!                                                 generate in-process, ChainAnalyzer::analyze
//! mine_bench gen-store <steps> <store> [--seed S] write synthetic traffic into a store
//! mine_bench store <store> [--sample N|all]       ChainAnalyzer::analyze_store (streaming)
//! mine_bench jsonl <steps> <out.jsonl> [--seed S] write synthetic traffic as JSON Lines, one
//!                                                 step a line (the Python package's format)
//! mine_bench jsonl-mine <in.jsonl> [--repeat K]   read those JSON Lines, ChainAnalyzer::analyze
//!                                                 (K times: the median run is reported)
//! ```
//!
//! Traffic comes from the recorder's synthetic generator (`GeneratorConfig::default()` apart
//! from the seed), trace after trace until at least `<steps>` steps. The analyzer runs with
//! `MineConfig::default()` (`--sample` sets `max_inference_occurrences`, and for `store` also
//! `StreamConfig::max_occurrences_per_pattern`). One JSON object goes to stdout: steps, traces, seconds split into
//! load / mine / infer, patterns, candidates, the best candidates' tools, and the peak resident
//! memory (`VmHWM` from `/proc/self/status`).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::error::Error;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use chainweaver_analyzer::mine::{ChainAnalyzer, MineConfig, MineOutcome, StreamConfig};
use chainweaver_recorder::model::{ObservedStep, ObservedTrace, TraceWithSteps};
use chainweaver_recorder::store::{SqliteStore, TraceStore, open_store};
use chainweaver_recorder::synth::{Generator, GeneratorConfig};
use serde_json::{Value, json};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

// The allocator the `chainweaver` binary uses, so the figures are the command's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let positional: Vec<&str> = {
        let mut out = Vec::new();
        let mut skip = false;
        for arg in &args {
            if skip {
                skip = false;
            } else if arg.starts_with("--") {
                skip = true;
            } else {
                out.push(arg.as_str());
            }
        }
        out
    };
    let option = |name: &str| -> Option<&str> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(String::as_str)
    };
    let arg = |i: usize| -> Result<&str> {
        positional
            .get(i)
            .copied()
            .ok_or_else(|| format!("missing argument {i}; see the file header for usage").into())
    };
    let seed: u64 = option("--seed").unwrap_or("1").parse()?;
    match arg(0)? {
        "memory" => {
            let steps: u64 = arg(1)?.parse()?;
            let started = Instant::now();
            let traces = generate(steps, seed);
            let load = started.elapsed().as_secs_f64();
            let mut config = MineConfig::default();
            match option("--sample") {
                Some("all") => config.max_inference_occurrences = None,
                Some(n) => config.max_inference_occurrences = Some(n.parse()?),
                None => {}
            }
            let outcome = ChainAnalyzer::new(config).analyze(&traces)?;
            report("memory", load, &outcome);
        }
        "gen-store" => {
            let steps: u64 = arg(1)?.parse()?;
            let path = Path::new(arg(2)?);
            let mut store = open_store(path)?;
            let started = Instant::now();
            let written = write_store(store.as_mut(), steps, seed)?;
            println!(
                "{}",
                json!({
                    "store": path.display().to_string(),
                    "traces": written.0,
                    "steps": written.1,
                    "seconds": started.elapsed().as_secs_f64(),
                })
            );
        }
        "store" => {
            let path = Path::new(arg(1)?);
            let store: Box<dyn TraceStore> = if path.is_file() {
                Box::new(SqliteStore::open(path)?)
            } else {
                open_store(path)?
            };
            let mut stream = StreamConfig::default();
            let mut config = MineConfig::default();
            let sample = match option("--sample") {
                Some("all") => Some(None),
                Some(n) => Some(Some(n.parse()?)),
                None => None,
            };
            if let Some(cap) = sample {
                // MineConfig's cap wins over StreamConfig's: set both.
                stream.max_occurrences_per_pattern = cap;
                config.max_inference_occurrences = cap;
            }
            let outcome = ChainAnalyzer::new(config).analyze_store(store.as_ref(), &stream)?;
            report("store", outcome.load_time.as_secs_f64(), &outcome);
        }
        "jsonl" => {
            let steps: u64 = arg(1)?.parse()?;
            let mut out = BufWriter::new(File::create(arg(2)?)?);
            let (mut traces, mut written) = (0u64, 0u64);
            for trace in Generator::new(generator_config(seed)) {
                for step in &trace.steps {
                    let line = json!({
                        "trace_id": step.trace_id,
                        "step_index": step.step_index,
                        "tool_name": step.tool_name,
                        "inputs": step.inputs,
                        "outputs": step.outputs,
                        "error": step.error_message,
                    });
                    serde_json::to_writer(&mut out, &line)?;
                    out.write_all(b"\n")?;
                }
                traces += 1;
                written += trace.steps.len() as u64;
                if written >= steps {
                    break;
                }
            }
            out.flush()?;
            println!("{}", json!({"traces": traces, "steps": written}));
        }
        "jsonl-mine" => {
            let started = Instant::now();
            let traces = read_jsonl(Path::new(arg(1)?))?;
            let load = started.elapsed().as_secs_f64();
            let repeat: usize = option("--repeat").unwrap_or("1").parse()?;
            // Repeated runs on the loaded traces: the figures are the median run's, and the
            // per-run times and analysis CPU seconds are listed (a shared machine is noisy).
            let mut runs = Vec::new();
            for _ in 0..repeat.max(1) {
                let cpu_before = cpu_seconds().unwrap_or(0.0);
                let outcome = ChainAnalyzer::new(MineConfig::default()).analyze(&traces)?;
                let cpu = cpu_seconds().unwrap_or(0.0) - cpu_before;
                let total = (outcome.mining_time + outcome.inference_time).as_secs_f64();
                runs.push((total, cpu, outcome));
            }
            let times: Vec<(f64, f64)> = runs.iter().map(|(t, c, _)| (*t, *c)).collect();
            runs.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (_, _, median) = &runs[runs.len() / 2];
            if repeat > 1 {
                eprintln!("runs (mine + infer s, analysis cpu s): {times:?}");
            }
            report("jsonl", load, median);
        }
        other => return Err(format!("unknown command {other:?}").into()),
    }
    Ok(())
}

fn generator_config(seed: u64) -> GeneratorConfig {
    GeneratorConfig {
        traces: u64::MAX,
        seed,
        ..GeneratorConfig::default()
    }
}

/// Whole traces until at least `steps` steps.
fn generate(steps: u64, seed: u64) -> Vec<TraceWithSteps> {
    let mut traces = Vec::new();
    let mut total = 0u64;
    for trace in Generator::new(generator_config(seed)) {
        total += trace.steps.len() as u64;
        traces.push(trace);
        if total >= steps {
            break;
        }
    }
    traces
}

fn write_store(store: &mut dyn TraceStore, steps: u64, seed: u64) -> Result<(u64, u64)> {
    let (mut batch_traces, mut batch_steps): (Vec<ObservedTrace>, Vec<ObservedStep>) =
        (Vec::new(), Vec::new());
    let (mut traces, mut total) = (0u64, 0u64);
    for trace in Generator::new(generator_config(seed)) {
        traces += 1;
        total += trace.steps.len() as u64;
        batch_traces.push(trace.trace);
        batch_steps.extend(trace.steps);
        let done = total >= steps;
        if batch_steps.len() >= 20_000 || done {
            store.append(&batch_traces, &batch_steps)?;
            batch_traces.clear();
            batch_steps.clear();
        }
        if done {
            break;
        }
    }
    Ok((traces, total))
}

/// One step a line, grouped into traces in order of first appearance.
fn read_jsonl(path: &Path) -> Result<Vec<TraceWithSteps>> {
    let mut traces: Vec<TraceWithSteps> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for (number, line) in BufReader::new(File::open(path)?).lines().enumerate() {
        let line = line?;
        let value: Value = serde_json::from_str(&line)
            .map_err(|e| format!("{}:{}: {e}", path.display(), number + 1))?;
        let field = |name: &str| value.get(name).cloned().unwrap_or(Value::Null);
        let trace_id = field("trace_id").as_str().unwrap_or_default().to_string();
        let tool = field("tool_name").as_str().unwrap_or_default().to_string();
        let slot = *index.entry(trace_id.clone()).or_insert_with(|| {
            traces.push(TraceWithSteps {
                trace: ObservedTrace::new(&trace_id, "jsonl"),
                steps: Vec::new(),
            });
            traces.len() - 1
        });
        let step_index = traces[slot].steps.len() as u32;
        let mut step = ObservedStep::new(&trace_id, step_index, &tool, field("inputs"));
        step.outputs = Some(field("outputs")).filter(|v| !v.is_null());
        step.error_message = field("error").as_str().map(str::to_string);
        traces[slot].steps.push(step);
    }
    Ok(traces)
}

fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// User plus system CPU time of this process so far (`/proc/self/stat`, 100 ticks a second).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let user: f64 = fields.get(11)?.parse().ok()?;
    let system: f64 = fields.get(12)?.parse().ok()?;
    Some((user + system) / 100.0)
}

fn report(mode: &str, load: f64, outcome: &MineOutcome) {
    let mine = outcome.mining_time.as_secs_f64();
    let infer = outcome.inference_time.as_secs_f64();
    let top: Vec<Value> = outcome
        .candidates
        .iter()
        .take(6)
        .map(|c| {
            json!({
                "tools": c.tools,
                "support": c.evidence.support,
                "occurrences": c.evidence.occurrences,
                "score": c.evidence.score,
            })
        })
        .collect();
    let figures = json!({
        "mode": mode,
        "steps": outcome.steps,
        "traces": outcome.traces,
        "distinct_tools": outcome.distinct_tools,
        "load_s": load,
        "mine_s": mine,
        "infer_s": infer,
        "mine_plus_infer_s": mine + infer,
        "patterns": outcome.patterns.len(),
        "candidates": outcome.candidates.len(),
        "skipped": outcome.skipped.len(),
        "peak_rss_mib": peak_rss_mib(),
        "cpu_s": cpu_seconds(),
        "top_candidates": top,
    });
    println!("{figures}");
}
