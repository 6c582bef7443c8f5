//! `chainweaver datasets generate`: synthetic agent traffic with planted flows.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use chainweaver_recorder::synth::{Generator, GeneratorConfig};
use clap::Subcommand;

use super::document::emit_document;
use super::store::open;
use super::{Global, exit, progress};

#[derive(Debug, Subcommand)]
pub enum DatasetsCommand {
    /// Generate realistic agent traffic with planted flows, noise calls, decoys and failures,
    /// plus a ground-truth file naming the planted flows and where each argument comes from.
    ///
    /// The same seed always gives the same traffic. Written to the store (`--store`), or as
    /// JSON Lines with `--jsonl`.
    Generate {
        /// Number of traces.
        #[arg(long, default_value_t = 1000)]
        traces: u64,
        /// Seed of the generator.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Write JSON Lines (one trace with its steps a line) here instead of into the store.
        #[arg(long)]
        jsonl: Option<PathBuf>,
        /// Where the ground truth goes.
        #[arg(long, default_value = "ground-truth.json")]
        truth: PathBuf,
        /// Probability that any one call fails.
        #[arg(long, default_value_t = 0.02)]
        failure_rate: f64,
        /// Share of flow instances replaced by decoys (same tools, unrelated arguments).
        #[arg(long, default_value_t = 0.1)]
        decoy_rate: f64,
        /// Also plant the hard behaviours: loops over a whole list and over the elements the
        /// agent picks, interchangeable first steps, an echoing step; a failed call cuts its
        /// flow instance short. The ground truth says where each loop and alternative is.
        #[arg(long)]
        behaviours: bool,
        /// Probability of an unrelated call between two calls of a flow instance, for mining
        /// with `--max-gap`.
        #[arg(long, default_value_t = 0.0)]
        interleave: f64,
    },
}

pub fn run(command: DatasetsCommand, global: &Global) -> anyhow::Result<u8> {
    let DatasetsCommand::Generate {
        traces,
        seed,
        jsonl,
        truth,
        failure_rate,
        decoy_rate,
        behaviours,
        interleave,
    } = command;
    if ![failure_rate, decoy_rate, interleave]
        .iter()
        .all(|p| (0.0..=1.0).contains(p))
    {
        anyhow::bail!(
            "--failure-rate, --decoy-rate and --interleave are probabilities between 0 and 1"
        );
    }
    let config = GeneratorConfig {
        traces,
        seed,
        failure_rate,
        decoy_rate,
        behaviours,
        interleave,
        ..GeneratorConfig::default()
    };
    let mut generator = Generator::new(config);
    let bar = progress::bar(global, traces, "generating");
    let target = match &jsonl {
        Some(path) => {
            let mut writer = BufWriter::new(
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
            );
            for trace in generator.by_ref() {
                serde_json::to_writer(&mut writer, &trace)?;
                writer.write_all(b"\n")?;
                bar.inc(1);
            }
            writer
                .flush()
                .with_context(|| format!("cannot write {}", path.display()))?;
            path.clone()
        }
        None => {
            let mut store = open(&global.store)?;
            let mut batch_traces = Vec::new();
            let mut batch_steps = Vec::new();
            for trace in generator.by_ref() {
                batch_traces.push(trace.trace);
                batch_steps.extend(trace.steps);
                bar.inc(1);
                if batch_steps.len() >= 50_000 {
                    store.append(&batch_traces, &batch_steps)?;
                    batch_traces.clear();
                    batch_steps.clear();
                }
            }
            if !batch_traces.is_empty() {
                store.append(&batch_traces, &batch_steps)?;
            }
            global.store.clone()
        }
    };
    bar.finish_and_clear();
    let ground_truth = generator.ground_truth();
    let file =
        File::create(&truth).with_context(|| format!("cannot create {}", truth.display()))?;
    serde_json::to_writer_pretty(BufWriter::new(file), ground_truth)
        .with_context(|| format!("cannot write {}", truth.display()))?;
    emit_document(global, ground_truth, || {
        let mut text = format!(
            "generated {} traces, {} steps ({} failed) into {}\nground truth: {}\n",
            ground_truth.traces,
            ground_truth.steps,
            ground_truth.failed_steps,
            target.display(),
            truth.display()
        );
        for flow in &ground_truth.flows {
            text.push_str(&format!(
                "  planted {:<16} {} ({} instances in {} traces)\n",
                flow.name,
                flow.tools.join(" -> "),
                flow.instances,
                flow.traces
            ));
        }
        text
    })?;
    Ok(exit::OK)
}
