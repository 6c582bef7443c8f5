//! `chainweaver mine`, `patterns` and `candidates`: find repeated tool sequences and propose them
//! as flows.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use chainweaver::pipeline::{self, MineRequest};
use chainweaver::verify::Split;
#[cfg(feature = "datafusion")]
use chainweaver_analyzer::engine::datafusion::Runner;
use chainweaver_analyzer::engine::sql::{self, CountingQuery, Reported};
use chainweaver_analyzer::mine::{MineConfig, MineOutcome};
use chainweaver_analyzer::spm::{
    self, ContiguousOptions, GappedOptions, SequenceDb, SequenceDbBuilder,
};
use chainweaver_recorder::model::candidate::{
    Candidate, InferenceSample, PatternSummary, VariantKind,
};
use chainweaver_recorder::store::{TraceStore, tool_sequences};
use chainweaver_recorder::workspace::Workspace;
use clap::Subcommand;
use serde::Serialize;

use super::document::emit_named;
use super::output::{Table, emit};
use super::store::open_existing;
use super::{Global, exit, failure, progress};

/// Mine the stored traces for repeated tool sequences, infer where each argument comes from,
/// and store the best as candidate flows.
///
/// Support counts distinct traces. Only closed patterns are kept: a pattern is dropped when a
/// longer one containing it has the same support. With `--count-only` nothing is stored: the
/// number of frequent patterns (all, not only closed, as the literature counts them) and the time
/// spent are printed, for parity and benchmark runs; `--spmf FILE` then mines an SPMF file
/// directly instead of the store.
#[derive(Debug, clap::Args)]
pub struct MineArgs {
    /// A pattern must appear in at least this many distinct traces.
    #[arg(long, default_value_t = 3)]
    pub min_support: u32,
    /// Shortest pattern (use 1 to count single tools, as the literature does).
    #[arg(long, default_value_t = 2)]
    pub min_length: usize,
    /// Longest pattern (default: 10 when proposing candidates, unbounded with --count-only).
    #[arg(long)]
    pub max_length: Option<usize>,
    /// Allow up to N unrelated calls between two steps of a pattern (sequences with gaps).
    /// Without it, patterns are contiguous.
    #[arg(long)]
    pub max_gap: Option<usize>,
    /// With --count-only: any gap at all (all frequent sequential patterns).
    #[arg(long, requires = "count_only", conflicts_with = "max_gap")]
    pub any_gap: bool,
    /// Propose at most this many candidates (the best-ranked patterns).
    #[arg(long, default_value_t = 50)]
    pub max_candidates: usize,
    /// Infer each candidate's bindings from at most N of its occurrences, spread evenly over
    /// them (support, counts and support per day stay the full figures); `all` reads every
    /// occurrence.
    #[arg(long, value_name = "N|all", default_value = "1000", value_parser = parse_sample)]
    pub sample: Cap,
    /// Infer a pattern with more occurrences first on N of them; when a step is then linked to
    /// no other (a flow padded with an unrelated call, or tools that merely follow each other),
    /// the candidate is built from those N. `off` reads the whole sample for every pattern.
    #[arg(long, value_name = "N|off", default_value = "64", value_parser = parse_probe)]
    pub probe: Cap,
    /// Only count the frequent patterns and print the time spent; store nothing.
    #[arg(long)]
    pub count_only: bool,
    /// With --count-only: mine this SPMF sequence file instead of the store.
    #[arg(long, requires = "count_only", value_name = "FILE")]
    pub spmf: Option<PathBuf>,
    /// Hold this percent of the traces (chosen by a hash of the trace id, the same on every
    /// run) out of mining, for `verify` to replay. Default: 0 for `mine`, 20 for `analyze`.
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub holdout: Option<u8>,
    /// Print the SQL that counts these closed contiguous patterns, with their support and
    /// occurrences, and exit without reading the store. It reads a relation named `steps`
    /// (columns trace_id, step_index, tool_name: the store's Parquet `steps` folder) and runs
    /// unchanged on Spark SQL, DuckDB and DataFusion.
    #[arg(long, conflicts_with_all = ["max_gap", "any_gap", "count_only", "holdout"])]
    pub emit_sql: bool,

    /// With --emit-sql or an --engine: every frequent contiguous pattern of the
    /// lengths asked for, closed or not (the counts the pattern mining literature publishes,
    /// with --min-length 1), instead of the closed ones `mine` stores
    #[arg(long)]
    pub all_frequent: bool,
    /// Where the support counting runs. `datafusion` counts the closed patterns as Apache
    /// DataFusion query plans over the store's Parquet files in place (a SQLite store through
    /// its tool-name columns) and samples the occurrences of the best-ranked there (with
    /// --max-gap, in two passes over the tool names); bindings are inferred from that sample
    /// in-process and the candidates stored, the same as without an engine. `ballista` runs
    /// the counting plans on a Ballista cluster (see --scheduler), --max-gap too; this machine
    /// then finds the best-ranked patterns' occurrences in streamed passes over the tool
    /// names and builds and stores the candidates the same way. Need a build with the
    /// `datafusion` or `ballista` feature.
    #[arg(long, value_enum, default_value_t = Engine::InProcess, conflicts_with_all = ["any_gap", "count_only", "emit_sql"])]
    pub engine: Engine,
    /// With --engine ballista: the cluster's scheduler, e.g. `df://localhost:50050`. Its
    /// executors read the Parquet store's files by the paths this machine sees.
    #[arg(long, value_name = "URL")]
    pub scheduler: Option<String>,
    /// With --engine datafusion: the memory its sorts and groupings may hold, in MiB, before
    /// they spill to the temporary folder (default: half the machine's memory). The tables
    /// kept between pattern lengths always go there.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(64..))]
    pub engine_memory: Option<u64>,
    /// With --engine ballista: give up on a pattern length's query after this many seconds
    /// (default 1800). A job waits as long as the cluster has no executor (the scheduler runs
    /// a lost executor's tasks again on the others); the run then fails naming the scheduler,
    /// and nothing is stored.
    #[arg(long, value_name = "SECS", requires = "scheduler", value_parser = clap::value_parser!(u64).range(1..))]
    pub query_timeout: Option<u64>,
}

/// Where `mine` counts patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// The built-in miner.
    InProcess,
    /// Apache DataFusion, embedded.
    Datafusion,
    /// The same plans on a Ballista cluster (--scheduler).
    Ballista,
}

impl Engine {
    /// The name JSON output gives the engine that counted, when not the in-process miner.
    fn name(self) -> Option<&'static str> {
        match self {
            Engine::InProcess => None,
            Engine::Datafusion => Some("datafusion"),
            Engine::Ballista => Some("ballista"),
        }
    }
}

impl MineArgs {
    /// Which patterns the counting engines report.
    pub fn reported(&self) -> Reported {
        if self.all_frequent {
            Reported::AllFrequent
        } else {
            Reported::Closed
        }
    }

    /// Where the patterns are counted (candidates are built in-process either way).
    pub fn miner(&self) -> anyhow::Result<pipeline::Miner> {
        self.check_scheduler()?;
        match self.engine {
            Engine::InProcess => Ok(pipeline::Miner::InProcess),
            #[cfg(feature = "datafusion")]
            Engine::Datafusion | Engine::Ballista => Ok(pipeline::Miner::Engine(runner(self)?)),
            #[cfg(not(feature = "datafusion"))]
            Engine::Datafusion | Engine::Ballista => Err(without_datafusion()),
        }
    }

    /// `--engine ballista` and `--scheduler` go together.
    fn check_scheduler(&self) -> anyhow::Result<()> {
        if (self.engine == Engine::Ballista) != self.scheduler.is_some() {
            return Err(super::Failure {
                code: exit::USAGE,
                message: "--engine ballista and --scheduler URL go together".into(),
                hint: Some(
                    "e.g. `chainweaver --store DIR.parquet mine --engine ballista --scheduler df://localhost:50050`"
                        .into(),
                ),
            }
            .into());
        }
        Ok(())
    }

    pub fn config(&self) -> MineConfig {
        MineConfig {
            min_support: self.min_support,
            min_length: self.min_length,
            max_length: self.max_length.unwrap_or(10),
            max_gap: self.max_gap,
            max_candidates: self.max_candidates,
            max_inference_occurrences: self.sample.0,
            probe_occurrences: self.probe.0,
            ..MineConfig::default()
        }
    }
}

/// A number of occurrences, or no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap(pub Option<usize>);

/// A positive count, or `word` for no limit.
fn parse_cap(text: &str, word: &str) -> Result<Cap, String> {
    if text == word {
        return Ok(Cap(None));
    }
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(Cap(Some(n))),
        _ => Err(format!("expected a positive number or `{word}`")),
    }
}

fn parse_sample(text: &str) -> Result<Cap, String> {
    parse_cap(text, "all")
}

fn parse_probe(text: &str) -> Result<Cap, String> {
    parse_cap(text, "off")
}

#[derive(Debug, Subcommand)]
pub enum PatternsCommand {
    /// List the patterns the last `mine` stored, best-ranked first.
    List {
        #[arg(long, default_value_t = 30)]
        limit: usize,
    },
}

#[derive(Debug, Subcommand)]
pub enum CandidatesCommand {
    /// List the candidate flows, highest score first.
    List,
    /// Show one candidate: its steps, every binding with its confidence, and its evidence.
    Show { candidate: String },
    /// Write a candidate's flow as a flow file (JSON), ready for `flows validate` and `run`.
    Export {
        candidate: String,
        /// The file to write (default: standard output).
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Also write the tool schemas inferred from the traces, as JSON, here.
        #[arg(long)]
        tool_schemas: Option<PathBuf>,
    },
}

#[derive(Debug, Serialize)]
struct CountOnly {
    schema_version: u32,
    patterns: u64,
    sequences: usize,
    steps: usize,
    seconds: f64,
}

fn count_only(args: &MineArgs, global: &Global) -> anyhow::Result<u8> {
    let started = Instant::now();
    let db = match &args.spmf {
        Some(path) => SequenceDb::read_spmf(path)?,
        None => {
            let store = open_existing(&global.store)?;
            sequence_db(store.as_ref())?
        }
    };
    let patterns = if args.max_gap.is_none() && !args.any_gap {
        let options = ContiguousOptions {
            min_support: args.min_support,
            min_length: args.min_length,
            max_length: args.max_length,
            closed_only: false,
        };
        spm::contiguous::count(&db, &options)?
    } else {
        let options = GappedOptions {
            min_support: args.min_support,
            min_length: args.min_length,
            max_length: args.max_length,
            max_gap: args.max_gap.map(|g| u32::try_from(g).unwrap_or(u32::MAX)),
        };
        spm::gapped::count(&db, &options)?
    };
    let result = CountOnly {
        schema_version: super::SCHEMA_VERSION,
        patterns,
        sequences: db.len(),
        steps: db.num_steps(),
        seconds: started.elapsed().as_secs_f64(),
    };
    emit(global, &result, || {
        format!(
            "{} patterns in {} sequences ({} steps), {:.3} s\n",
            result.patterns, result.sequences, result.steps, result.seconds
        )
    })?;
    Ok(exit::OK)
}

#[cfg(feature = "datafusion")]
fn engine_patterns(args: &MineArgs, global: &Global) -> anyhow::Result<u8> {
    let store = open_existing(&global.store)?;
    let request = MineRequest {
        config: args.config(),
        split: Split::Holdout {
            percent: args.holdout.unwrap_or(0),
        },
        ..MineRequest::default()
    };
    let runner = runner(args)?;
    let bars = progress::Bars::new(global);
    let started = Instant::now();
    let found =
        pipeline::engine_patterns(store.as_ref(), &request, args.reported(), &runner, &bars)
            .map_err(|err| failure::library(err, global))?;
    if !global.quiet {
        for retry in &found.retried {
            eprintln!(
                "warning: the query counting patterns of length {} lost an endpoint and ran again ({})",
                retry.length, retry.error
            );
        }
    }
    let output = EnginePatternsOutput {
        schema_version: super::SCHEMA_VERSION,
        engine: args.engine.name().unwrap_or("datafusion"),
        split: request.split,
        held_out_traces: found.held_out_traces,
        seconds: started.elapsed().as_secs_f64(),
        retried: &found.retried,
        patterns: &found.patterns,
    };
    emit(global, &output, || {
        format!(
            "{} {} patterns counted on {} in {:.2} s ({} traces held out); no candidates (`mine` without --all-frequent proposes them)\n\n{}",
            found.patterns.len(),
            match args.reported() {
                Reported::Closed => "closed",
                Reported::AllFrequent => "frequent",
            },
            match runner {
                Runner::Embedded { .. } => "DataFusion",
                #[cfg(feature = "ballista")]
                Runner::Ballista { .. } => "Ballista",
            },
            output.seconds,
            found.held_out_traces,
            pattern_table(&found.patterns)
        )
    })?;
    Ok(exit::OK)
}

/// Where `--engine` runs the plans.
#[cfg(feature = "datafusion")]
fn runner(args: &MineArgs) -> anyhow::Result<Runner> {
    match (args.engine, &args.scheduler) {
        #[cfg(feature = "ballista")]
        (Engine::Ballista, Some(scheduler)) => Ok(Runner::Ballista {
            scheduler: scheduler.clone(),
            query_timeout: std::time::Duration::from_secs(args.query_timeout.unwrap_or(1800)),
        }),
        (Engine::Ballista, _) => Err(super::Failure {
            code: exit::USAGE,
            message: "this chainweaver was built without the Ballista engine".into(),
            hint: Some("build it with `cargo build --release --features ballista`".into()),
        }
        .into()),
        _ => Ok(Runner::Embedded {
            threads: std::thread::available_parallelism().map_or(1, usize::from),
            memory_budget: match args.engine_memory {
                Some(mib) => {
                    Some(usize::try_from(mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX))
                }
                None => chainweaver_analyzer::engine::datafusion::default_memory_budget(),
            },
        }),
    }
}

#[cfg(not(feature = "datafusion"))]
fn engine_patterns(_: &MineArgs, _: &Global) -> anyhow::Result<u8> {
    Err(without_datafusion())
}

#[cfg(not(feature = "datafusion"))]
fn without_datafusion() -> anyhow::Error {
    super::Failure {
        code: exit::USAGE,
        message: "this chainweaver was built without the DataFusion engine".into(),
        hint: Some("build it with `cargo build --release --features datafusion`".into()),
    }
    .into()
}

/// What `mine --engine datafusion --format json` prints.
#[cfg(feature = "datafusion")]
#[derive(Debug, Serialize)]
struct EnginePatternsOutput<'a> {
    schema_version: u32,
    engine: &'static str,
    split: Split,
    held_out_traces: usize,
    seconds: f64,
    /// A cluster's length queries that lost an executor and ran again, with the error.
    retried: &'a [chainweaver_analyzer::engine::datafusion::RetriedQuery],
    patterns: &'a [PatternSummary],
}

#[derive(Debug, Serialize)]
struct EmittedSql {
    schema_version: u32,
    /// Result columns, in order.
    columns: Vec<String>,
    sql: String,
}

pub fn emit_sql(args: &MineArgs, global: &Global) -> anyhow::Result<u8> {
    let config = args.config();
    let query = CountingQuery::new(config.min_support, config.min_length, config.max_length);
    let columns = ["length", "support", "occurrences"]
        .into_iter()
        .map(str::to_string)
        .chain((0..=query.max_length).map(sql::tool_column))
        .collect();
    let output = EmittedSql {
        schema_version: super::SCHEMA_VERSION,
        columns,
        sql: query.reported_sql(args.reported()),
    };
    let what = match args.reported() {
        Reported::Closed => "The closed contiguous patterns `chainweaver mine` stores",
        Reported::AllFrequent => "Every frequent contiguous pattern, closed or not",
    };
    emit(global, &output, || {
        format!(
            "-- {what} (min support {}, length {}..{}),\n\
             -- over a relation `steps` (trace_id, step_index, tool_name). Bind it first, e.g.\n\
             --   Spark:  spark.read.parquet(\"DATASET/steps\").createOrReplaceTempView(\"steps\")\n\
             --   DuckDB: CREATE VIEW steps AS SELECT * FROM read_parquet('DATASET/steps/**/*.parquet');\n{}",
            query.min_support, query.min_length, query.max_length, output.sql
        )
    })?;
    Ok(exit::OK)
}

/// The store's tool sequences, one a trace in storage order (traces without steps too, as
/// before streaming), read from the tool-name stream (no payloads).
fn sequence_db(store: &dyn TraceStore) -> anyhow::Result<SequenceDb> {
    let read = tool_sequences(store, &|_| true)?;
    let mut builder = SequenceDbBuilder::new();
    for t in 0..read.trace_ids.len() {
        builder.push_sequence(read.tools(t))?;
    }
    Ok(builder.finish())
}

/// What `mine --format json` prints.
#[derive(Debug, Serialize)]
struct MineOutput<'a> {
    schema_version: u32,
    /// The engine that counted the patterns, when not the in-process miner.
    #[serde(skip_serializing_if = "Option::is_none")]
    engine: Option<&'static str>,
    split: Split,
    #[serde(flatten)]
    outcome: &'a MineOutcome,
    /// What went wrong on the way and was recovered from (a cluster's query that ran again).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

pub fn run_mine(args: MineArgs, global: &Global) -> anyhow::Result<u8> {
    if args.all_frequent && !args.emit_sql && args.engine == Engine::InProcess {
        return Err(super::Failure {
            code: exit::USAGE,
            message: "--all-frequent applies to --emit-sql and --engine datafusion only".into(),
            hint: Some(
                "the in-process miner stores closed patterns; `mine --count-only --min-length 1` counts all frequent ones"
                    .into(),
            ),
        }
        .into());
    }
    if args.emit_sql {
        return emit_sql(&args, global);
    }
    if args.count_only {
        return count_only(&args, global);
    }
    args.check_scheduler()?;
    if args.engine_memory.is_some() && args.engine != Engine::Datafusion {
        return Err(super::Failure {
            code: exit::USAGE,
            message: "--engine-memory sets the budget of --engine datafusion".into(),
            hint: Some(
                "e.g. `chainweaver --store DIR.parquet mine --engine datafusion --engine-memory 4096`"
                    .into(),
            ),
        }
        .into());
    }
    if args.all_frequent {
        return engine_patterns(&args, global);
    }
    let miner = args.miner()?;
    let mut store = open_existing(&global.store)?;
    let request = MineRequest {
        config: args.config(),
        split: Split::Holdout {
            percent: args.holdout.unwrap_or(0),
        },
        miner,
    };
    let bars = progress::Bars::new(global);
    let outcome = pipeline::mine_store(store.as_mut(), &request, &bars)
        .map_err(|err| failure::library(err, global))?;
    let output = MineOutput {
        schema_version: super::SCHEMA_VERSION,
        engine: args.engine.name(),
        split: request.split,
        outcome: &outcome,
        warnings: bars.warnings(),
    };
    emit(global, &output, || {
        let mut text = String::new();
        if outcome.held_out_traces > 0 {
            text.push_str(&format!(
                "mined {} traces, {} held out for `chainweaver verify` ({})\n",
                outcome.traces,
                outcome.held_out_traces,
                request.split.describe()
            ));
        }
        text.push_str(&summary_text(&outcome));
        text
    })?;
    Ok(exit::OK)
}

/// The ranked summary `mine` and `analyze` print.
pub fn summary_text(outcome: &MineOutcome) -> String {
    let mut text = format!(
        "{} traces, {} steps, {} tools: {} closed patterns, {} candidates (mining {:.2} s, inference {:.2} s)\n\n",
        outcome.traces,
        outcome.steps,
        outcome.distinct_tools,
        outcome.patterns.len(),
        outcome.candidates.len(),
        outcome.mining_time.as_secs_f64(),
        outcome.inference_time.as_secs_f64()
    );
    text.push_str(&candidate_table(&outcome.candidates).render());
    for (tools, reason) in &outcome.skipped {
        text.push_str(&format!("skipped {}: {reason}\n", tools.join(" -> ")));
    }
    text
}

fn candidate_table(candidates: &[Candidate]) -> Table {
    let mut table = Table::new(&[
        ">#",
        "candidate",
        ">support",
        ">saved",
        ">data flow",
        ">confidence",
        ">flagged",
        "effects",
        ">score",
        "behaviour",
    ]);
    for (rank, candidate) in candidates.iter().enumerate() {
        let evidence = &candidate.evidence;
        table.row(vec![
            (rank + 1).to_string(),
            candidate.step_labels().join(" -> "),
            evidence.support.to_string(),
            evidence.round_trips_saved.to_string(),
            format!("{:.2}", evidence.data_flow),
            format!("{:.2}", evidence.mean_confidence),
            evidence.flagged_bindings.to_string(),
            if evidence.read_only {
                "read-only".into()
            } else {
                "side effects".into()
            },
            format!("{:.1}", evidence.score),
            candidate.behaviour.as_ref().map_or(String::new(), |role| {
                let lead = candidates
                    .iter()
                    .position(|c| c.id == role.lead)
                    .map_or(String::new(), |at| format!(" of #{}", at + 1));
                match role.kind {
                    VariantKind::Lead => "lead".into(),
                    VariantKind::LoopCount => format!("loop count{lead}"),
                    VariantKind::FirstStep => format!("first step{lead}"),
                    VariantKind::Part => format!("part{lead}"),
                }
            }),
        ]);
    }
    table
}

/// A stored candidate by id, or by its rank in `candidates list` (1-based).
pub fn find_candidate(
    store: &dyn TraceStore,
    wanted: &str,
    global: &Global,
) -> anyhow::Result<Candidate> {
    let candidates = store.candidates()?;
    pipeline::find_candidate(&candidates, wanted)
        .cloned()
        .map_err(|err| failure::library(err, global))
}

/// Patterns as `patterns list` shows them.
fn pattern_table(patterns: &[PatternSummary]) -> String {
    let mut table = Table::new(&["pattern", ">length", ">support", ">occurrences", ">saved"]);
    for pattern in patterns {
        table.row(vec![
            pattern.tools.join(" -> "),
            pattern.tools.len().to_string(),
            pattern.support.to_string(),
            pattern.occurrences.to_string(),
            pattern.round_trips_saved.to_string(),
        ]);
    }
    table.render()
}

pub fn run_patterns(command: PatternsCommand, global: &Global) -> anyhow::Result<u8> {
    let PatternsCommand::List { limit } = command;
    let store = open_existing(&global.store)?;
    let mut patterns = store.patterns()?;
    patterns.truncate(limit);
    emit_named(global, "patterns", &patterns, || {
        if patterns.is_empty() {
            return "no patterns stored: run `chainweaver mine`\n".into();
        }
        pattern_table(&patterns)
    })?;
    Ok(exit::OK)
}

pub fn run_candidates(command: CandidatesCommand, global: &Global) -> anyhow::Result<u8> {
    let store = open_existing(&global.store)?;
    match command {
        CandidatesCommand::List => {
            let candidates = store.candidates()?;
            emit_named(global, "candidates", &candidates, || {
                if candidates.is_empty() {
                    "no candidates stored: run `chainweaver mine`\n".into()
                } else {
                    candidate_table(&candidates).render()
                }
            })?;
        }
        CandidatesCommand::Show { candidate } => {
            let candidate = find_candidate(store.as_ref(), &candidate, global)?;
            emit_named(global, "candidate", &candidate, || show_text(&candidate))?;
        }
        CandidatesCommand::Export {
            candidate,
            output,
            tool_schemas,
        } => {
            let candidate = find_candidate(store.as_ref(), &candidate, global)?;
            let flow = serde_json::to_string_pretty(&candidate.flow)? + "\n";
            match &output {
                Some(path) => std::fs::write(path, &flow)
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => {
                    use std::io::Write as _;
                    write!(std::io::stdout().lock(), "{flow}")?;
                }
            }
            if let Some(path) = &tool_schemas {
                let text = serde_json::to_string_pretty(&candidate.tool_schemas)? + "\n";
                std::fs::write(path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
        }
    }
    Ok(exit::OK)
}

/// Why a candidate's bindings come from some of its occurrences only.
fn sample_line(candidate: &Candidate, sample: &InferenceSample) -> String {
    let unlinked: Vec<String> = sample
        .unlinked_in_probe
        .iter()
        .map(|&step| {
            let tool = candidate.tools.get(step).map_or("?", String::as_str);
            format!("{step} ({tool})")
        })
        .collect();
    let mut line = format!(
        "  bindings inferred from {} of {} occurrences, spread evenly",
        sample.read, candidate.evidence.occurrences
    );
    if !unlinked.is_empty() {
        line.push_str(&format!(
            "; the probe found step {} linked to no other step, so no more were read",
            unlinked.join(", ")
        ));
    }
    line.push('\n');
    line
}

fn show_text(candidate: &Candidate) -> String {
    let evidence = &candidate.evidence;
    let mut text = format!(
        "candidate {}\n  steps: {}\n  support {} traces, {} occurrences, success rate {:.0}%, reproduced {:.0}%\n  round trips saved {}, score {:.1}, {}\n",
        candidate.id,
        candidate.step_labels().join(" -> "),
        evidence.support,
        evidence.occurrences,
        evidence.success_rate * 100.0,
        evidence.reproduced * 100.0,
        evidence.round_trips_saved,
        evidence.score,
        if evidence.read_only {
            "read-only"
        } else {
            "may have side effects"
        },
    );
    if let Some(runs) = evidence.loop_runs() {
        text.push_str(&format!("  loop runs (calls x occurrences): {runs}\n"));
    }
    if let Some(sample) = &candidate.sample {
        text.push_str(&sample_line(candidate, sample));
    }
    if let Some(role) = &candidate.behaviour {
        text.push_str(&format!("  behaviour: {}\n", role.describe()));
    }
    text.push_str("\nbindings:\n");
    let mut table = Table::new(&[">step", "tool", "field", "source", ">confidence", "flag"]);
    for binding in &candidate.bindings {
        let tool = candidate
            .tools
            .get(binding.step)
            .cloned()
            .unwrap_or_default();
        table.row(vec![
            binding.step.to_string(),
            tool,
            binding.field.clone(),
            binding.source.describe(),
            format!("{:.2}", binding.confidence),
            binding
                .flags
                .iter()
                .map(|f| format!("{f:?}"))
                .collect::<Vec<_>>()
                .join(","),
        ]);
    }
    text.push_str(&table.render());
    text
}

#[cfg(test)]
mod tests {
    use super::{Cap, parse_probe, parse_sample};

    #[test]
    fn caps_are_positive_counts_or_the_keyword() {
        assert_eq!(parse_sample("1000"), Ok(Cap(Some(1000))));
        assert_eq!(parse_sample("all"), Ok(Cap(None)));
        assert_eq!(parse_probe("off"), Ok(Cap(None)));
        for bad in ["0", "-3", "many", "off"] {
            assert!(parse_sample(bad).is_err(), "{bad}");
        }
        assert!(parse_probe("all").is_err());
    }
}
