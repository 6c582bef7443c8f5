//! Generated traffic stored in SQLite, for the unit tests that read a store as the engine
//! paths do.

use std::path::Path;

use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::store::{SqliteStore, TraceStore};
use chainweaver_recorder::synth::{Generator, GeneratorConfig};

/// 300 generated traces with behaviours, a fifth of them interleaved, from `seed`, in a new
/// SQLite store in `dir`; with the traces as generated.
pub(crate) fn stored_traffic(dir: &Path, seed: u64) -> (SqliteStore, Vec<TraceWithSteps>) {
    let mut store = SqliteStore::open(&dir.join("traffic.db")).unwrap();
    let config = GeneratorConfig {
        traces: 300,
        seed,
        behaviours: true,
        interleave: 0.2,
        ..GeneratorConfig::default()
    };
    let traffic: Vec<_> = Generator::new(config).collect();
    let steps: Vec<_> = traffic.iter().flat_map(|t| t.steps.clone()).collect();
    let traces: Vec<_> = traffic.iter().map(|t| t.trace.clone()).collect();
    store.append(&traces, &steps).unwrap();
    (store, traffic)
}
