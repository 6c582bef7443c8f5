//! Verification throughput: held-out occurrence replays per second with recorded tools.
//!
//! Generates synthetic traffic (planted flows, decoys, noise, failures), mines 80% of it,
//! builds the cassette from every trace, then verifies every candidate on the held-out 20%:
//! each occurrence runs the candidate's flow through the executor and is compared step by step.
//! Timed on one thread and on every core. Prints one JSON line. Run by
//! `scripts/bench_verify.sh`.
//!
//! ```text
//! cargo run --release --example bench_verify -- [traces]
//! ```

#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Instant;

use chainweaver::verify::{
    Cassette, HeldOut, IgnorePaths, Split, ToolSource, Verifier, VerifyOptions,
};
use chainweaver_analyzer::mine::{ChainAnalyzer, MineConfig};
use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::candidate::VerdictStatus;
use chainweaver_recorder::synth::{Generator, GeneratorConfig};
use serde_json::json;

// The allocator the `chainweaver` binary uses, so the figures are the command's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let traces_wanted: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let traces: Vec<TraceWithSteps> = Generator::new(GeneratorConfig {
        traces: traces_wanted,
        seed: 11,
        ..GeneratorConfig::default()
    })
    .collect();
    let steps: usize = traces.iter().map(|t| t.steps.len()).sum();
    let (mined, held_out) =
        Split::default().partition(traces.clone(), |t| t.trace.trace_id.as_str());
    let candidates = ChainAnalyzer::new(MineConfig::default())
        .analyze(&mined)
        .unwrap()
        .candidates;

    let started = Instant::now();
    let cassette = Arc::new(Cassette::from_traces(&traces, IgnorePaths::default()));
    let cassette_seconds = started.elapsed().as_secs_f64();
    let verifier = Verifier::new(
        ToolSource::Recorded(cassette),
        VerifyOptions {
            max_occurrences: usize::MAX,
            ..VerifyOptions::default()
        },
    );
    let held = HeldOut::new(held_out.iter().collect());
    let jobs: Vec<_> = candidates.iter().map(|c| (c, &held)).collect();

    let mut figures = Vec::new();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for threads in [1, cores] {
        // Best of three: the machine is shared.
        let mut best: Option<(f64, usize, usize, usize)> = None;
        for _ in 0..3 {
            let started = Instant::now();
            let verdicts = verifier.verify_many(&jobs, threads, &|| {});
            let seconds = started.elapsed().as_secs_f64();
            let verdicts: Vec<_> = verdicts.into_iter().map(Result::unwrap).collect();
            let replays: usize = verdicts.iter().map(|v| v.occurrences_replayed).sum();
            let exact: usize = verdicts.iter().map(|v| v.exact_matches).sum();
            let verified = verdicts
                .iter()
                .filter(|v| v.status == VerdictStatus::Verified)
                .count();
            if best.is_none_or(|(s, ..)| seconds < s) {
                best = Some((seconds, replays, exact, verified));
            }
        }
        let (seconds, replays, exact, verified) = best.unwrap();
        figures.push(json!({
            "threads": threads,
            "seconds": seconds,
            "occurrence_replays": replays,
            "exact": exact,
            "replays_per_second": replays as f64 / seconds,
            "verified_candidates": verified,
        }));
    }
    println!(
        "{}",
        json!({
            "traces": traces.len(),
            "steps": steps,
            "held_out_traces": held_out.len(),
            "candidates": candidates.len(),
            "cassette_build_seconds": cassette_seconds,
            "runs": figures,
        })
    );
}
