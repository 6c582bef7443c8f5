//! The counting query run by Apache DataFusion, embedded and multi-threaded, or (feature
//! `ballista`) by a Ballista cluster's executors.
//!
//! A Parquet store's committed step files are read in place (only the three columns the query
//! names are decoded); any other store is read through its tool-name stream
//! ([`TraceStore::for_each_step_tool`]) into Arrow batches of those three columns, so payloads
//! are never loaded either way. Closedness is then decided in-process over the frequent rows
//! ([`closed_patterns`](super::sql::closed_patterns)), which are few next to the steps.
//!
//! Embedded, the levels extend each frequent pattern's occurrences by integer joins over
//! tables kept in the session (the `engine::extend` module). A cluster cannot read those, so there each
//! level is one SQL query ([`CountingQuery::level_sql`], or for gapped patterns
//! [`CountingQuery::gapped_level_sql`] over tables the cluster writes beside the store) with
//! the frequent shorter patterns inlined.
//!
//! A cluster reads the files where they are, so it needs a Parquet store whose paths its
//! executors can open.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chainweaver_recorder::model::candidate::PatternSummary;
use chainweaver_recorder::model::dataset::steps;
use chainweaver_recorder::store::TraceStore;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringBuilder, TimestampNanosecondBuilder,
    UInt32Builder,
};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, TimeUnit};
use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::datasource::MemTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};

use super::extend;
pub use super::extend::SampledOccurrences;
use super::sql::{
    self, CountedPattern, CountingQuery, GappedKept, Reported, reported_patterns, tool_column,
};
use crate::error::{AnalyzerError, Result};

/// Where the counting plans run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runner {
    /// DataFusion in this process, on this many threads; past `memory_budget` bytes its sorts
    /// and groupings spill to disk (`None`: no budget; see [`default_memory_budget`]).
    Embedded {
        threads: usize,
        memory_budget: Option<usize>,
    },
    /// A Ballista cluster, by its scheduler's URL (`df://host:port`). A length's query that
    /// has not finished after `query_timeout` fails the run: a job waits, and the client is
    /// told nothing, while the cluster has no executor to run it.
    #[cfg(feature = "ballista")]
    Ballista {
        scheduler: String,
        query_timeout: std::time::Duration,
    },
}

impl Runner {
    fn engine(&self) -> &'static str {
        match self {
            Self::Embedded { .. } => "DataFusion",
            #[cfg(feature = "ballista")]
            Self::Ballista { .. } => "Ballista",
        }
    }

    /// True for a cluster, whose executors see only what the plan itself carries.
    pub fn is_remote(&self) -> bool {
        !matches!(self, Self::Embedded { .. })
    }

    /// Threads of this process's query runtime: every core's worth when it runs the plans, a
    /// couple when it only plans them and collects a cluster's results.
    fn threads(&self) -> usize {
        match self {
            Self::Embedded { threads, .. } => (*threads).max(1),
            #[cfg(feature = "ballista")]
            Self::Ballista { .. } => 2,
        }
    }

    /// The session the plans are made in; a cluster's scheduler sets its own partitioning.
    /// Embedded, the tables kept between levels go to a scratch folder that lives as long as
    /// the session.
    async fn context(&self) -> Result<SessionContext, String> {
        match self {
            Self::Embedded {
                threads,
                memory_budget,
            } => {
                let scratch = Arc::new(extend::Scratch::new()?);
                let config = scratch.install(embedded_config(*threads));
                let Some(budget) = memory_budget else {
                    return Ok(SessionContext::new_with_config(config));
                };
                let runtime = RuntimeEnvBuilder::new()
                    .with_memory_pool(Arc::new(FairSpillPool::new(*budget)))
                    .build_arc()
                    .map_err(|e| e.to_string())?;
                Ok(SessionContext::new_with_config_rt(config, runtime))
            }
            #[cfg(feature = "ballista")]
            Self::Ballista { scheduler, .. } => {
                use ballista::prelude::SessionContextExt;
                let failed =
                    |e: datafusion::error::DataFusionError| format!("scheduler {scheduler}: {e}");
                let context = SessionContext::remote(scheduler).await.map_err(failed)?;
                // The static planner: when an executor is lost mid-job it runs the lost tasks
                // and stages again on the others and the job finishes, where a job planned
                // adaptively stalls for good (Ballista 55).
                context
                    .sql("SET ballista.planner.adaptive.enabled = false")
                    .await
                    .map_err(failed)?
                    .collect()
                    .await
                    .map_err(failed)?;
                Ok(context)
            }
        }
    }
}

/// The embedded engine's session settings, on `threads` threads.
pub(super) fn embedded_config(threads: usize) -> SessionConfig {
    // No per-file statistics: the plans prune nothing by them, and collecting them reads every
    // part's footer whenever a query over the steps is planned.
    let mut config = SessionConfig::new()
        .with_target_partitions(threads.max(1))
        .with_collect_statistics(false);
    // A join whose build side is a table of this process (the mined traces' ids, the tool
    // numbers, a level's patterns) is built once and probed by every partition of the steps as
    // they stream, instead of both sides being hashed into partitions first: the steps are
    // never held, only the table.
    let options = &mut config.options_mut().optimizer;
    options.hash_join_single_partition_threshold = usize::MAX;
    options.hash_join_single_partition_threshold_rows = usize::MAX;
    config
}

/// Half the machine's memory (Linux: `MemTotal` in `/proc/meminfo`), the embedded engine's
/// default budget: the counting plans' sorts and groupings grow with the steps, and past it
/// they spill to disk instead of taking memory the rest of the run (and the machine) needs.
/// `None` where the total cannot be read.
pub fn default_memory_budget() -> Option<usize> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: usize = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib.saturating_mul(1024) / 2)
}

/// Rows a batch of the tool-name stream holds.
const BATCH_ROWS: usize = 65_536;

/// Where the counting reads its steps from.
#[derive(Debug, Clone)]
pub enum StepSource {
    /// Parquet files in the dataset layout, read in place.
    Files(Vec<PathBuf>),
    /// The parts of a dataset in object storage, read where they are.
    #[cfg(feature = "s3")]
    Objects(chainweaver_recorder::store::StepObjects),
    /// The store's tool-name stream, copied into memory as three Arrow columns.
    Stream,
}

impl StepSource {
    /// The files of a Parquet store, else the stream.
    pub fn of(store: &dyn TraceStore) -> Result<Self> {
        #[cfg(feature = "s3")]
        if let Some(objects) = store.committed_step_objects()? {
            return Ok(Self::Objects(objects));
        }
        Ok(match store.committed_step_files()? {
            Some(files) => Self::Files(files),
            None => Self::Stream,
        })
    }

    /// The first file or object whose footer cannot be read, or that lacks a column the plans
    /// read, named, with why.
    fn first_unreadable(&self) -> Option<(String, String)> {
        match self {
            Self::Files(files) => {
                first_unreadable(files).map(|(file, why)| (file.display().to_string(), why))
            }
            #[cfg(feature = "s3")]
            Self::Objects(objects) => objects.first_unreadable(&READ_COLUMNS),
            Self::Stream => None,
        }
    }

    /// The first file whose footer's frame is damaged (a local file's last eight bytes; an
    /// object's footer is fetched and read whole, see [`StepSource::first_unreadable`]).
    fn first_damaged_footer(&self) -> Option<(String, String)> {
        match self {
            Self::Files(files) => files.iter().find_map(|file| {
                let why = footer_frame_damage(file)?;
                Some((file.display().to_string(), why))
            }),
            #[cfg(feature = "s3")]
            Self::Objects(objects) => objects.first_unreadable(&READ_COLUMNS),
            Self::Stream => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Files(files) => match files.first() {
                Some(first) => format!("{} Parquet files ({} first)", files.len(), first.display()),
                None => "no Parquet files".into(),
            },
            #[cfg(feature = "s3")]
            Self::Objects(objects) => match objects.files.first() {
                Some(first) => format!("{} Parquet objects ({first} first)", objects.files.len()),
                None => "no Parquet objects".into(),
            },
            Self::Stream => "the store's tool-name stream".into(),
        }
    }
}

/// The traces an engine mines: those of `mined`, in storage order; `held_out` are the store's
/// other traces (a cluster leaves them out by a list in the SQL text).
#[derive(Debug, Clone, Copy)]
pub struct MinedTraces<'a> {
    pub mined: &'a [String],
    pub held_out: &'a HashSet<String>,
}

/// The best-ranked patterns to become candidates, with their occurrences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choose {
    /// How many of the best-ranked patterns.
    pub max_candidates: usize,
    /// Support per day is counted for this many best-ranked patterns (and the chosen ones).
    pub max_dated: usize,
    /// At most this many occurrences of each, spread evenly (`None`: all).
    pub cap: Option<usize>,
}

/// What an engine found.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineMined {
    /// The reported patterns, best-ranked first (as the in-process miner ranks them), with
    /// [`Choose`] the first `max_dated` with their support per day.
    pub patterns: Vec<PatternSummary>,
    /// With [`Choose`]: the occurrences of the first `max_candidates` of `patterns`, in order.
    pub chosen: Vec<SampledOccurrences>,
    /// Steps of the mined traces and their distinct tools (embedded only; 0 on a cluster).
    pub steps: u64,
    pub distinct_tools: u64,
    /// A cluster's queries that lost an endpoint and were run again (see [`lost_endpoint`]).
    pub retried: Vec<RetriedQuery>,
}

/// A cluster's query for one pattern length that failed for a lost endpoint and ran again.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RetriedQuery {
    /// The pattern length it counted.
    pub length: usize,
    /// The error of the attempt given up on.
    pub error: String,
}

/// How long a cluster's query for one length waits before each run again after losing an
/// endpoint: a moment (a lost executor's work goes to the others at once), then longer, for a
/// network that comes back or an executor that restarts (51 s in all).
#[cfg(feature = "ballista")]
const LOST_ENDPOINT_WAITS: [std::time::Duration; 4] = [
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(5),
    std::time::Duration::from_secs(15),
    std::time::Duration::from_secs(30),
];

/// True when a cluster's query failed because an executor (or the scheduler) stopped
/// answering, not for anything in the data or the plan: the client could not connect to the
/// endpoint holding a result, or the transport broke while it read one.
///
/// The scheduler runs a lost executor's tasks again on the others, but a job's last stage
/// output is fetched by the client itself, from the executor that wrote it; when that executor
/// is gone the fetch fails and Ballista does not look elsewhere. A level's query only reads,
/// so running it again is safe, and the new job runs on the executors still polling.
pub fn lost_endpoint(message: &str) -> bool {
    const SIGNS: [&str; 6] = [
        // The client could not connect to the executor holding the result.
        "GrpcConnectionError",
        "Error connecting to Ballista scheduler or executor",
        // It connected, and the connection broke while it read (Ballista's FetchFailed).
        "Shuffle fetch partition error",
        "tonic::transport::Error",
        "transport error",
        "Connection refused",
    ];
    SIGNS.iter().any(|sign| message.contains(sign))
}

/// The closed (or, as `reported` says, all frequent) patterns of `query` among the steps of
/// the mined traces, counted where `runner` says, best-ranked first; with `choose`, the
/// occurrences of the best-ranked (embedded only, contiguous patterns only).
pub fn mine(
    store: &dyn TraceStore,
    query: &CountingQuery,
    reported: Reported,
    traces: MinedTraces<'_>,
    runner: &Runner,
    choose: Option<Choose>,
) -> Result<EngineMined> {
    let source = StepSource::of(store)?;
    let failed = |message: String| AnalyzerError::Engine {
        engine: runner.engine(),
        source_name: source.describe(),
        message,
    };
    if query.max_gap.is_some() && choose.is_some() {
        // A gapped pattern's occurrences are matched greedily along each trace, which is no
        // join: they are found over the tool names ([`crate::mine::streamed_samples`]).
        return Err(failed(
            "the engine samples contiguous patterns' occurrences only; a gapped pattern's are \
             found by `mine::streamed_samples`"
                .into(),
        ));
    }
    if runner.is_remote() && choose.is_some() {
        return Err(failed(
            "a cluster counts the patterns only; their occurrences for candidates are found \
             over the tool names (`mine::streamed_samples`)"
                .into(),
        ));
    }
    // The footers are checked before the engine reads them: one claiming more bytes than its
    // file holds makes the engine's footer decoder panic, where this names the file.
    if let Some((file, why)) = source.first_damaged_footer() {
        return Err(failed(format!("{file}: {why}")));
    }
    let stream = match (&source, runner) {
        (StepSource::Stream, Runner::Embedded { .. }) => Some(stream_batches(store, runner)?),
        #[cfg(feature = "ballista")]
        (StepSource::Stream, Runner::Ballista { .. }) => {
            return Err(failed(
                "a cluster reads the store's Parquet files where they are: use a Parquet store \
                 (copy this one with `chainweaver traces convert DIR.parquet`)"
                    .into(),
            ));
        }
        #[cfg(all(feature = "s3", feature = "ballista"))]
        (StepSource::Objects(_), Runner::Ballista { .. }) => {
            return Err(failed(
                "a cluster's executors read the store's files by their paths: mount the bucket \
                 at the same path on this machine and the executors, and name that folder"
                    .into(),
            ));
        }
        (StepSource::Files(_), _) => None,
        #[cfg(feature = "s3")]
        (StepSource::Objects(_), _) => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(runner.threads())
        .enable_all()
        .build()
        .map_err(|e| failed(format!("cannot start the query runtime: {e}")))?;
    let plans = Plans {
        source: &source,
        query,
        reported,
        traces,
        runner,
        choose,
    };
    // The query runs on a thread of its own: a caller inside another runtime cannot block on one.
    let mut mined = std::thread::scope(|scope| {
        scope
            .spawn(|| runtime.block_on(plans.run(stream)))
            .join()
            .unwrap_or_else(|_| Err("the query thread panicked".into()))
    })
    // The engine's message may not say which file it could not read (one damaged since the
    // check above): the footers do.
    .map_err(|message| match source.first_unreadable() {
        Some((file, why)) => failed(format!("{file}: {why} ({message})")),
        None => failed(message),
    })?;
    if runner.is_remote() {
        add_client_totals(store, &traces, &mut mined)?;
    }
    Ok(mined)
}

/// What a cluster does not say, from one pass over the mined traces' tool names here: the
/// steps and distinct tools, and the order of first appearance that breaks the ranking's ties
/// as the in-process miner breaks them (the embedded plans number the steps for that).
fn add_client_totals(
    store: &dyn TraceStore,
    traces: &MinedTraces<'_>,
    mined: &mut EngineMined,
) -> Result<()> {
    let mined_ids: HashSet<&str> = traces.mined.iter().map(String::as_str).collect();
    let totals = crate::tool_stream::tool_totals(store, &|id| mined_ids.contains(id))?;
    let first_seen: HashMap<&str, usize> = totals
        .first_seen
        .iter()
        .enumerate()
        .map(|(rank, tool)| (tool.as_str(), rank))
        .collect();
    let rank = |tool: &String| first_seen.get(tool.as_str()).copied().unwrap_or(usize::MAX);
    super::rank(&mut mined.patterns, |a, b| {
        a.iter().map(rank).cmp(b.iter().map(rank))
    });
    mined.steps = totals.steps;
    mined.distinct_tools = totals.first_seen.len() as u64;
    Ok(())
}

/// The paths to register `files` (committed parts) by: a partition folder (with a trailing
/// separator) where every Parquet file in it is one of `files`, else the folder's files one by
/// one. Each query plans its scan by looking up every path given (a `head` per file path, whose
/// open descriptors pile up while the lookups wait to be collected): file by file, 28,014
/// parts (100M generated steps) passed the open-file limit, where one folder per day is a
/// listing.
fn table_paths(files: &[PathBuf]) -> Vec<String> {
    let mut by_folder: BTreeMap<&Path, BTreeSet<OsString>> = BTreeMap::new();
    let mut paths: Vec<String> = Vec::new();
    for file in files {
        match (file.parent(), file.file_name()) {
            (Some(folder), Some(name)) => {
                by_folder.entry(folder).or_default().insert(name.to_owned());
            }
            _ => paths.push(file.to_string_lossy().into_owned()),
        }
    }
    for (folder, committed) in by_folder {
        let on_disk: Option<BTreeSet<OsString>> = std::fs::read_dir(folder).ok().map(|entries| {
            entries
                .filter_map(|entry| entry.ok())
                .map(|entry| entry.file_name())
                .filter(|name| name.to_string_lossy().ends_with(".parquet"))
                .collect()
        });
        if on_disk.as_ref() == Some(&committed) {
            paths.push(format!("{}/", folder.display()));
        } else {
            // A crashed append's parts lie beside the committed ones: name those one by one.
            paths.extend(
                committed
                    .iter()
                    .map(|name| folder.join(name).to_string_lossy().into_owned()),
            );
        }
    }
    paths
}

/// Register the Parquet files and folders at `urls` as the table `name`.
async fn register_listing(
    context: &SessionContext,
    name: &str,
    urls: Vec<ListingTableUrl>,
) -> Result<(), String> {
    let text = |e: datafusion::error::DataFusionError| e.to_string();
    let options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .infer_schema(&context.state())
        .await
        .map_err(text)?;
    let table = ListingTable::try_new(config).map_err(text)?;
    context
        .register_table(name, Arc::new(table))
        .map_err(text)?;
    Ok(())
}

/// The first file whose Parquet footer cannot be read, or that lacks a column the plans read,
/// with the reason.
fn first_unreadable(files: &[PathBuf]) -> Option<(PathBuf, String)> {
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
    files.iter().find_map(|file| {
        let reader = match std::fs::File::open(file).map(SerializedFileReader::new) {
            Ok(Ok(reader)) => reader,
            Ok(Err(e)) => return Some((file.clone(), e.to_string())),
            Err(e) => return Some((file.clone(), e.to_string())),
        };
        let schema = reader.metadata().file_metadata().schema_descr_ptr();
        let has = |name: &str| (0..schema.num_columns()).any(|i| schema.column(i).name() == name);
        let missing = READ_COLUMNS.iter().find(|name| !has(name))?;
        Some((file.clone(), format!("it has no `{missing}` column")))
    })
}

/// Why `file` cannot hold a Parquet footer where its last eight bytes say (the metadata's
/// length, then the magic `PAR1`), if it cannot: read alone, these bytes cost one small read
/// a file, where decoding every footer would cost a noticeable share of a large store's run.
fn footer_frame_damage(file: &Path) -> Option<String> {
    use datafusion::parquet::file::FOOTER_SIZE;
    use datafusion::parquet::file::metadata::FooterTail;
    use std::io::{Read, Seek, SeekFrom};
    // The leading magic, then the frame at the end.
    let smallest = (4 + FOOTER_SIZE) as u64;
    let read = || -> std::io::Result<(u64, [u8; FOOTER_SIZE])> {
        let mut f = std::fs::File::open(file)?;
        let len = f.metadata()?.len();
        let mut tail = [0u8; FOOTER_SIZE];
        if len >= smallest {
            f.seek(SeekFrom::Start(len - FOOTER_SIZE as u64))?;
            f.read_exact(&mut tail)?;
        }
        Ok((len, tail))
    };
    let (len, tail) = match read() {
        Ok(read) => read,
        Err(e) => return Some(e.to_string()),
    };
    if len < smallest {
        return Some(format!("{len} bytes is too short for a Parquet file"));
    }
    let metadata = match FooterTail::try_new(&tail) {
        Ok(frame) => frame.metadata_length() as u64,
        Err(e) => return Some(e.to_string()),
    };
    (metadata + smallest > len).then(|| {
        format!("its footer claims {metadata} bytes of metadata, more than its {len} bytes hold")
    })
}

/// The `steps` columns the plans read.
const READ_COLUMNS: [&str; 4] = [
    steps::TRACE_ID,
    steps::STEP_INDEX,
    steps::TOOL_NAME,
    steps::STARTED_AT,
];

/// One engine run's inputs.
struct Plans<'a> {
    source: &'a StepSource,
    query: &'a CountingQuery,
    reported: Reported,
    traces: MinedTraces<'a>,
    runner: &'a Runner,
    choose: Option<Choose>,
}

impl Plans<'_> {
    /// Register the steps, count, rank and (embedded, when asked) find the chosen patterns'
    /// occurrences.
    async fn run(&self, stream: Option<Vec<RecordBatch>>) -> Result<EngineMined, String> {
        let context = self.runner.context().await?;
        let all_steps = "all_steps";
        if !self.register_steps(&context, all_steps, stream).await? {
            return Ok(EngineMined {
                patterns: Vec::new(),
                chosen: Vec::new(),
                steps: 0,
                distinct_tools: 0,
                retried: Vec::new(),
            });
        }
        if self.runner.is_remote() {
            let scratch = match (self.query.max_gap, self.source) {
                (None, _) => None,
                (Some(_), StepSource::Files(files)) => Some(ClusterScratch::beside(files)?),
                (Some(_), _) => {
                    return Err(
                        "a cluster writes gapped levels beside a local Parquet store".into(),
                    );
                }
            };
            let folder = scratch
                .as_ref()
                .map_or(Path::new(""), |s| s.folder.as_path());
            let (frequent, retried) = self.remote_levels(&context, all_steps, folder).await?;
            return Ok(EngineMined {
                patterns: super::ranked_summaries(
                    reported_patterns(self.query, frequent, self.reported),
                    |a, b| a.cmp(b),
                ),
                chosen: Vec::new(),
                steps: 0,
                distinct_tools: 0,
                retried,
            });
        }
        // In this process the levels extend occurrences kept in the session, by integer joins.
        register_mined_steps(&context, all_steps, self.traces.mined).await?;
        let counted = extend::frequent_rows(&context, steps::TABLE, all_steps, self.query).await?;
        let first_seen = extend::first_seen(&context, &counted.tool_names).await?;
        let rank = |name: &str| first_seen.get(name).copied().unwrap_or(u64::MAX);
        let mut patterns = super::ranked_summaries(
            reported_patterns(self.query, counted.rows, self.reported),
            |a, b| a.iter().map(|t| rank(t)).cmp(b.iter().map(|t| rank(t))),
        );
        let chosen = match self.choose {
            Some(choose) => {
                let located: Vec<Vec<String>> = patterns
                    .iter()
                    .take(choose.max_dated.max(choose.max_candidates))
                    .map(|p| p.tools.clone())
                    .collect();
                extend::register_trace_days(&context, steps::TABLE).await?;
                let wanted = extend::Wanted {
                    located: &located,
                    chosen: choose.max_candidates.min(located.len()),
                    cap: choose.cap,
                };
                let found =
                    extend::located_occurrences(&context, &counted.tool_names, &wanted).await?;
                for (pattern, by_day) in
                    patterns.iter_mut().zip(found.by_day).take(choose.max_dated)
                {
                    pattern.support_by_day = by_day;
                }
                found.chosen
            }
            None => Vec::new(),
        };
        let (steps, distinct_tools) = extend::numbered_totals(&context).await?;
        extend::release(&context);
        Ok(EngineMined {
            patterns,
            chosen,
            steps,
            distinct_tools,
            retried: Vec::new(),
        })
    }

    /// Register the steps as `all_steps`; false when there are none.
    async fn register_steps(
        &self,
        context: &SessionContext,
        all_steps: &str,
        stream: Option<Vec<RecordBatch>>,
    ) -> Result<bool, String> {
        let text = |e: datafusion::error::DataFusionError| e.to_string();
        match (self.source, stream) {
            (StepSource::Files(files), _) if files.is_empty() => return Ok(false),
            (StepSource::Files(files), _) => {
                let urls = table_paths(files)
                    .iter()
                    .map(ListingTableUrl::parse)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(text)?;
                register_listing(context, all_steps, urls).await?;
            }
            #[cfg(feature = "s3")]
            (StepSource::Objects(objects), _) if objects.files.is_empty() => return Ok(false),
            #[cfg(feature = "s3")]
            (StepSource::Objects(objects), _) => {
                let bucket =
                    datafusion::execution::object_store::ObjectStoreUrl::parse(&objects.bucket_url)
                        .map_err(text)?;
                context
                    .runtime_env()
                    .register_object_store(bucket.as_ref(), Arc::clone(&objects.store));
                // Part by part: a day folder may also hold a crashed append's parts, which only
                // the manifests tell apart.
                let urls = objects
                    .files
                    .iter()
                    .map(ListingTableUrl::parse)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(text)?;
                register_listing(context, all_steps, urls).await?;
            }
            (StepSource::Stream, batches) => {
                // Spread over `threads` partitions, so the scan feeds every core.
                let mut partitions: Vec<Vec<RecordBatch>> =
                    vec![Vec::new(); self.runner.threads().max(1)];
                let count = partitions.len();
                for (i, batch) in batches.unwrap_or_default().into_iter().enumerate() {
                    partitions[i % count].push(batch);
                }
                let table = MemTable::try_new(stream_schema(), partitions).map_err(text)?;
                context
                    .register_table(all_steps, Arc::new(table))
                    .map_err(text)?;
            }
        }
        Ok(true)
    }

    /// The rows [`CountingQuery::frequent_sql`] answers, counted on a cluster: its executors
    /// cannot read tables held in this process's memory, so the held-out traces and each
    /// level's patterns go into the SQL text itself; gapped levels also read where the shorter
    /// patterns end from Parquet files the cluster writes into `scratch` (see
    /// [`ClusterScratch`]). Also the queries that lost an endpoint and ran again.
    async fn remote_levels(
        &self,
        context: &SessionContext,
        all_steps: &str,
        scratch: &Path,
    ) -> Result<(Vec<CountedPattern>, Vec<RetriedQuery>), String> {
        let query = self.query;
        let relation = remote_relation(all_steps, self.traces.held_out);
        let mut retried = Vec::new();
        if let Some(gap) = query.max_gap {
            let rows = self
                .remote_gapped_levels(context, &relation, gap, scratch, &mut retried)
                .await?;
            return Ok((rows, retried));
        }
        // Level by level, each length counted over the n-grams the frequent patterns one
        // shorter allow, up to one past the longest reported (closedness needs it) or the first
        // empty level.
        let mut rows = Vec::new();
        let mut previous: Option<String> = None;
        for length in 1..=query.max_length + 1 {
            let sql = query.level_sql_over(&relation, length, previous.as_deref());
            let batches = self
                .remote_level(context, &sql, length, &mut retried)
                .await?;
            let Some(level) = Self::level_rows(&batches, length)? else {
                break;
            };
            let tools: Vec<Vec<String>> = level.iter().map(|p| p.tools.clone()).collect();
            previous = Some(sql::patterns_relation(&tools, length));
            if length >= query.min_length {
                rows.extend(level);
            }
        }
        Ok((rows, retried))
    }

    /// [`remote_levels`](Self::remote_levels) of gapped patterns. A gapped pattern is no
    /// n-gram: each level extends where the frequent patterns one shorter end, as the embedded
    /// levels do. A cluster keeps nothing between queries, so it writes the numbered steps once
    /// and each level's ends as Parquet files in `scratch`, which the next level reads (a plan
    /// that found them again from the steps would nest one join deeper per length, past what
    /// a scheduler decodes). Up to `max_length`: closedness compares the reported lengths
    /// among themselves, as the in-process miner does.
    async fn remote_gapped_levels(
        &self,
        context: &SessionContext,
        relation: &str,
        gap: u32,
        scratch: &Path,
        retried: &mut Vec<RetriedQuery>,
    ) -> Result<Vec<CountedPattern>, String> {
        let query = self.query;
        let (numbered, ends) = ("gapped_numbered", "gapped_ends");
        self.remote_write(
            context,
            &CountingQuery::numbered_sql(relation),
            &scratch.join("numbered"),
            numbered,
            1,
            retried,
        )
        .await?;
        let mut rows = Vec::new();
        let mut shorter: Option<String> = None;
        let mut ends_read: Option<String> = None;
        for length in 1..=query.max_length {
            let counting = GappedKept::Counted {
                shorter: shorter.as_deref(),
            };
            let sql = query.gapped_level_sql(numbered, ends, length, gap, counting);
            let batches = self.remote_level(context, &sql, length, retried).await?;
            let Some(level) = Self::level_rows(&batches, length)? else {
                break;
            };
            let tools: Vec<Vec<String>> = level.iter().map(|p| p.tools.clone()).collect();
            let frequent = sql::patterns_relation(&tools, length);
            if length >= query.min_length {
                rows.extend(level);
            }
            if length < query.max_length {
                let kept = GappedKept::Ends {
                    frequent: &frequent,
                };
                let sql = query.gapped_level_sql(numbered, ends, length, gap, kept);
                let folder = scratch.join(format!("ends-{length}"));
                let written = self
                    .remote_write(context, &sql, &folder, ends, length, retried)
                    .await?;
                // The ends one shorter are read no more.
                if let Some(read) = ends_read.replace(written) {
                    let _ = std::fs::remove_dir_all(read);
                }
            }
            shorter = Some(frequent);
        }
        for table in [numbered, ends] {
            let _ = context.deregister_table(table);
        }
        Ok(rows)
    }

    /// A level's patterns, each once; `None` when it has none.
    fn level_rows(
        batches: &[RecordBatch],
        length: usize,
    ) -> Result<Option<Vec<CountedPattern>>, String> {
        if batches.iter().all(|batch| batch.num_rows() == 0) {
            return Ok(None);
        }
        let mut level = Vec::new();
        for batch in batches {
            read_level(batch, length, &mut level)?;
        }
        distinct_rows(level, length).map(Some)
    }

    /// One length's query on the cluster, bounded by the query timeout, and run again (at most
    /// once per [`LOST_ENDPOINT_WAITS`]) when it fails for a [`lost_endpoint`].
    async fn remote_level(
        &self,
        context: &SessionContext,
        sql: &str,
        length: usize,
        retried: &mut Vec<RetriedQuery>,
    ) -> Result<Vec<RecordBatch>, String> {
        self.on_cluster(length, retried, move || async move {
            let frame = context.sql(sql).await.map_err(|e| e.to_string())?;
            frame.collect().await.map_err(|e| e.to_string())
        })
        .await
    }

    /// Have the cluster write the result of `sql` as Parquet files in a fresh folder named
    /// after `folder` (one per attempt, so a lost attempt's files are never read), and register
    /// it as `table`, replacing the table of that name; the folder written.
    async fn remote_write(
        &self,
        context: &SessionContext,
        sql: &str,
        folder: &Path,
        table: &str,
        length: usize,
        retried: &mut Vec<RetriedQuery>,
    ) -> Result<String, String> {
        let text = |e: datafusion::error::DataFusionError| e.to_string();
        let attempts = std::cell::Cell::new(0usize);
        let attempts = &attempts;
        let written = self
            .on_cluster(length, retried, move || async move {
                let attempt = attempts.get();
                attempts.set(attempt + 1);
                let target = format!("{}-{attempt}/", folder.display());
                context
                    .sql(sql)
                    .await
                    .map_err(text)?
                    .write_parquet(&target, DataFrameWriteOptions::new(), None)
                    .await
                    .map_err(text)?;
                Ok(target)
            })
            .await?;
        let _ = context.deregister_table(table);
        context
            .register_parquet(table, &written, ParquetReadOptions::default())
            .await
            .map_err(text)?;
        Ok(written)
    }

    /// `run` on the cluster, bounded by the query timeout, and run again (at most once per
    /// [`LOST_ENDPOINT_WAITS`]) when it fails for a [`lost_endpoint`]; embedded, once.
    async fn on_cluster<T, F, Fut>(
        &self,
        length: usize,
        retried: &mut Vec<RetriedQuery>,
        run: F,
    ) -> Result<T, String>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        match &self.runner {
            #[cfg(feature = "ballista")]
            Runner::Ballista {
                scheduler,
                query_timeout,
            } => loop {
                let outcome = tokio::time::timeout(*query_timeout, run())
                    .await
                    .map_err(|_| stalled(scheduler, length, *query_timeout))?;
                let retries = retried.iter().filter(|r| r.length == length).count();
                match (outcome, LOST_ENDPOINT_WAITS.get(retries)) {
                    (Err(error), Some(wait)) if lost_endpoint(&error) => {
                        retried.push(RetriedQuery { length, error });
                        tokio::time::sleep(*wait).await;
                    }
                    (outcome, _) => return outcome,
                }
            },
            Runner::Embedded { .. } => {
                // Only a cluster loses endpoints.
                #[cfg(not(feature = "ballista"))]
                let _ = (length, retried);
                run().await
            }
        }
    }
}

/// A folder for the tables a cluster writes between gapped levels, removed with this value:
/// beside the Parquet store (in its parent folder), the one place known to be at the same path
/// on the client and every executor, since they read the store there.
struct ClusterScratch {
    folder: PathBuf,
}

impl ClusterScratch {
    /// A fresh folder beside the store holding `files` (its committed step files).
    fn beside(files: &[PathBuf]) -> Result<Self, String> {
        let store = files
            .first()
            .and_then(|file| {
                file.ancestors()
                    .find(|a| a.file_name().is_some_and(|name| name == steps::TABLE))
            })
            .and_then(Path::parent)
            .ok_or_else(|| "the store's step files are not in its `steps` folder".to_string())?;
        let name = store
            .file_name()
            .map_or_else(|| "store".into(), |n| n.to_string_lossy().into_owned());
        let parent = store.parent().unwrap_or(Path::new("."));
        let prefix = format!(".{name}.cluster-");
        // A run stopped by a signal runs no destructor: its folder goes once its process is
        // gone and an hour has passed (as the embedded engine's scratch folders do).
        super::sweep_abandoned(parent, &prefix, std::time::Duration::from_secs(3600));
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let folder = parent.join(format!("{prefix}{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&folder)
            .map_err(|e| format!("cannot write to {}: {e}", folder.display()))?;
        // Absolute: the executors resolve a relative path against their own working folder.
        let folder = std::fs::canonicalize(&folder)
            .map_err(|e| format!("cannot find {}: {e}", folder.display()))?;
        Ok(Self { folder })
    }
}

impl Drop for ClusterScratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

/// Why a cluster's query was given up on: it names the scheduler, the length it was counting
/// and the likely cause (no executor), which only the scheduler's log can confirm.
#[cfg(feature = "ballista")]
fn stalled(scheduler: &str, length: usize, waited: std::time::Duration) -> String {
    format!(
        "scheduler {scheduler}: the query counting patterns of length {length} did not finish \
         in {} s (has the cluster an executor left? the scheduler's log names the executors it \
         lost); nothing was stored: run `mine` again once executors poll the scheduler, or \
         wait longer with --query-timeout",
        waited.as_secs()
    )
}

/// Register `steps`: the steps of `all_steps` of the traces in `mined` (storage order), each
/// with its trace's ordinal there (a join with an in-memory table of the ids).
async fn register_mined_steps(
    context: &SessionContext,
    all_steps: &str,
    mined: &[String],
) -> Result<(), String> {
    let text = |e: datafusion::error::DataFusionError| e.to_string();
    let mut ids = StringBuilder::new();
    for id in mined {
        ids.append_value(id);
    }
    let ordinals: Int64Array = (0..mined.len() as i64).collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new(steps::TRACE_ID, DataType::Utf8, false),
        Field::new(extend::ORDINAL, DataType::Int64, false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(ids.finish()) as ArrayRef, Arc::new(ordinals)],
    )
    .map_err(|e| e.to_string())?;
    let table = MemTable::try_new(schema, vec![vec![batch]]).map_err(text)?;
    context
        .register_table("mined_traces", Arc::new(table))
        .map_err(text)?;
    // The ids first: a join hashes its left side when the size of the right is unknown (a
    // listing of Parquet files without statistics), and the steps must stream, not be hashed.
    let view = format!(
        "SELECT s.{id}, s.{index}, s.{tool}, s.{started}, m.{ordinal} FROM mined_traces m JOIN {all_steps} s ON s.{id} = m.{id}",
        id = steps::TRACE_ID,
        index = steps::STEP_INDEX,
        tool = steps::TOOL_NAME,
        started = steps::STARTED_AT,
        ordinal = extend::ORDINAL,
    );
    let frame = context.sql(&view).await.map_err(text)?;
    context
        .register_table(steps::TABLE, frame.into_view())
        .map_err(text)?;
    Ok(())
}

/// The relation a cluster counts over: the registered files, minus the held-out traces by a
/// list of literals.
fn remote_relation(all_steps: &str, held_out: &HashSet<String>) -> String {
    if held_out.is_empty() {
        return all_steps.to_string();
    }
    let mut ids: Vec<&String> = held_out.iter().collect();
    ids.sort();
    let literals: Vec<String> = ids.iter().map(|id| sql::string_literal(id)).collect();
    format!(
        "(SELECT {id}, {index}, {tool} FROM {all_steps} WHERE {id} NOT IN ({list})) AS mined",
        id = steps::TRACE_ID,
        index = steps::STEP_INDEX,
        tool = steps::TOOL_NAME,
        list = literals.join(", ")
    )
}

/// A level's rows with each pattern once: a recovered Ballista job can return a stage's rows
/// twice (see [`CountingQuery::level_sql`]), which then agree; rows that disagree fail the
/// run.
fn distinct_rows(rows: Vec<CountedPattern>, length: usize) -> Result<Vec<CountedPattern>, String> {
    let mut seen: HashMap<Vec<String>, (u64, u64)> = HashMap::with_capacity(rows.len());
    let mut kept = Vec::with_capacity(rows.len());
    for row in rows {
        match seen.get(&row.tools) {
            Some(&counts) if counts == (row.support, row.occurrences) => {}
            Some(&(support, occurrences)) => {
                return Err(format!(
                    "length {length}: the cluster returned {} twice with different counts \
                     (support {support} and {}, occurrences {occurrences} and {}); run `mine` \
                     again",
                    row.tools.join(" -> "),
                    row.support,
                    row.occurrences
                ));
            }
            None => {
                seen.insert(row.tools.clone(), (row.support, row.occurrences));
                kept.push(row);
            }
        }
    }
    Ok(kept)
}

/// The patterns of one level's result batch (`tool_0 ..`, `support`, `occurrences`).
fn read_level(
    batch: &RecordBatch,
    length: usize,
    rows: &mut Vec<CountedPattern>,
) -> Result<(), String> {
    let column = |name: &str, to: &DataType| extend::column_as(batch, name, to);
    let (support, occurrences) = (
        column("support", &DataType::Int64)?,
        column("occurrences", &DataType::Int64)?,
    );
    let (support, occurrences) = (
        support.as_primitive::<Int64Type>(),
        occurrences.as_primitive::<Int64Type>(),
    );
    let tools: Vec<ArrayRef> = (0..length)
        .map(|i| column(&tool_column(i), &DataType::Utf8))
        .collect::<Result<_, _>>()?;
    for row in 0..batch.num_rows() {
        let names = tools
            .iter()
            .map(|column| {
                let column = column.as_string::<i32>();
                (!column.is_null(row)).then(|| column.value(row).to_string())
            })
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| format!("row {row}: a tool is missing inside the pattern"))?;
        rows.push(CountedPattern {
            tools: names,
            support: u64::try_from(support.value(row)).unwrap_or(0),
            occurrences: u64::try_from(occurrences.value(row)).unwrap_or(0),
        });
    }
    Ok(())
}

/// `trace_id`, `step_index`, `tool_name`: the columns the counting reads; and `started_at`,
/// which dates the traces for support per day.
pub(super) fn stream_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new(steps::TRACE_ID, DataType::Utf8, false),
        Field::new(steps::STEP_INDEX, DataType::UInt32, false),
        Field::new(steps::TOOL_NAME, DataType::Utf8, false),
        Field::new(
            steps::STARTED_AT,
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            true,
        ),
    ]))
}

/// The store's tool-name stream as batches of the three columns (a step's place in its trace
/// stands for its index: the stream visits a trace's steps in order).
fn stream_batches(store: &dyn TraceStore, runner: &Runner) -> Result<Vec<RecordBatch>> {
    let mut batches = Vec::new();
    let mut columns = StreamColumns::default();
    let mut last: Option<String> = None;
    let mut place = 0u32;
    // Arrow refuses a batch only when its columns disagree, which these never do; kept anyway.
    let mut refused = None;
    store.for_each_step_tool(&mut |step| {
        if last.as_deref() == Some(step.trace_id) {
            place += 1;
        } else {
            last = Some(step.trace_id.to_string());
            place = 0;
        }
        columns.ids.append_value(step.trace_id);
        columns.indexes.append_value(place);
        columns.tools.append_value(step.tool_name);
        columns
            .started
            .append_option(step.started_at.and_then(|t| t.timestamp_nanos_opt()));
        columns.rows += 1;
        if columns.rows == BATCH_ROWS {
            match std::mem::take(&mut columns).finish() {
                Ok(batch) => batches.push(batch),
                Err(e) => refused = Some(e),
            }
        }
        Ok(())
    })?;
    if columns.rows > 0 {
        match columns.finish() {
            Ok(batch) => batches.push(batch),
            Err(e) => refused = Some(e),
        }
    }
    match refused {
        Some(e) => Err(AnalyzerError::Engine {
            engine: runner.engine(),
            source_name: StepSource::Stream.describe(),
            message: e.to_string(),
        }),
        None => Ok(batches),
    }
}

#[derive(Default)]
struct StreamColumns {
    ids: StringBuilder,
    indexes: UInt32Builder,
    tools: StringBuilder,
    started: TimestampNanosecondBuilder,
    rows: usize,
}

impl StreamColumns {
    fn finish(mut self) -> Result<RecordBatch, datafusion::arrow::error::ArrowError> {
        RecordBatch::try_new(
            stream_schema(),
            vec![
                Arc::new(self.ids.finish()),
                Arc::new(self.indexes.finish()),
                Arc::new(self.tools.finish()),
                Arc::new(self.started.finish().with_timezone("UTC")),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_footer_frame_is_damaged_when_it_claims_more_than_the_file_or_lacks_the_magic() {
        let dir = tempfile::tempdir().unwrap();
        let check = |name: &str, bytes: &[u8]| {
            let file = dir.path().join(name);
            std::fs::write(&file, bytes).unwrap();
            footer_frame_damage(&file)
        };
        // Magic, four bytes of "metadata", their length, magic: the smallest frame that fits.
        let mut fits = b"PAR1meta".to_vec();
        fits.extend_from_slice(&4u32.to_le_bytes());
        fits.extend_from_slice(b"PAR1");
        assert_eq!(check("fits.parquet", &fits), None);
        let mut past = fits.clone();
        past[8..12].copy_from_slice(&5u32.to_le_bytes());
        let why = check("past.parquet", &past).unwrap();
        assert!(
            why.contains("claims 5 bytes") && why.contains("16 bytes"),
            "{why}"
        );
        let why = check("garbage.parquet", b"PAR1 not a Parquet file PAR1").unwrap();
        assert!(why.contains("more than its 28 bytes"), "{why}");
        let why = check("magic.parquet", b"not a parquet file").unwrap();
        assert!(why.contains("Corrupt footer"), "{why}");
        let why = check("short.parquet", b"PAR1PAR1").unwrap();
        assert!(why.contains("too short"), "{why}");
        assert!(footer_frame_damage(&dir.path().join("gone.parquet")).is_some());
    }

    /// What the client's fetch of a result says when its executor is gone, made by Ballista's
    /// own client against a port nothing listens on, and wrapped as its query does.
    #[cfg(feature = "ballista")]
    #[test]
    fn a_fetch_from_a_gone_executor_is_a_lost_endpoint() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.port())
            .expect("a free port");
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        let refused = runtime
            .block_on(ballista_core::client::BallistaClient::try_new(
                "127.0.0.1",
                port,
                16 << 20,
                false,
                None,
                0,
                0,
                0,
                0,
            ))
            .err()
            .expect("nothing listens on the port");
        let message =
            datafusion::error::DataFusionError::Execution(format!("{refused:?}")).to_string();
        assert!(lost_endpoint(&message), "{message}");
    }

    fn row(tools: &[&str], support: u64, occurrences: u64) -> CountedPattern {
        CountedPattern {
            tools: tools.iter().map(|t| t.to_string()).collect(),
            support,
            occurrences,
        }
    }

    /// The folder beside the store for a cluster's gapped levels: absolute, fresh, gone with
    /// its value; and the folder of a run stopped by a signal (its process gone, an hour idle)
    /// is swept, while a young one is left to its run.
    #[test]
    fn a_cluster_scratch_sits_beside_the_store_and_sweeps_an_abandoned_one() {
        let dir = tempfile::tempdir().expect("a folder");
        let part = dir
            .path()
            .join("traces.parquet/steps/date=2026-12-06/part-1.parquet");
        let abandoned = dir
            .path()
            .join(format!(".traces.parquet.cluster-{}-1", u32::MAX));
        let young = dir
            .path()
            .join(format!(".traces.parquet.cluster-{}-2", u32::MAX));
        for folder in [&abandoned, &young] {
            std::fs::create_dir_all(folder).expect("a folder");
        }
        let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        std::fs::File::open(&abandoned)
            .and_then(|folder| folder.set_modified(long_ago))
            .expect("an old folder");
        let scratch = ClusterScratch::beside(&[part]).expect("a scratch folder");
        let folder = scratch.folder.clone();
        assert!(folder.is_absolute() && folder.is_dir(), "{folder:?}");
        assert_eq!(
            folder.parent(),
            Some(
                std::fs::canonicalize(dir.path())
                    .expect("the folder")
                    .as_path()
            )
        );
        assert!(!abandoned.exists());
        assert!(young.exists());
        drop(scratch);
        assert!(!folder.exists());
    }

    /// The gapped levels a cluster runs, here on the embedded engine: every frequent gapped
    /// pattern with the in-process gapped miner's support, with a held-out trace left out,
    /// step indices with holes (the SQL numbers the steps) and the rows out of order.
    #[test]
    fn the_cluster_levels_count_gapped_what_the_in_process_gapped_miner_counts() {
        let mut traces = crate::engine::gapped_fixture::traces();
        // Held out: counted, it would change the supports of `a -> b -> c` and more.
        traces.push(vec!["a", "b", "c", "a", "b", "c"]);
        let held_out: HashSet<String> = HashSet::from([format!("trace-{}", traces.len() - 1)]);
        let mut rows: Vec<(String, u32, String)> = traces
            .iter()
            .enumerate()
            .flat_map(|(t, tools)| {
                tools.iter().enumerate().map(move |(i, tool)| {
                    (format!("trace-{t}"), i as u32 * 3 + 1, tool.to_string())
                })
            })
            .collect();
        rows.reverse();
        rows.rotate_left(7);
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new(steps::TRACE_ID, DataType::Utf8, false),
                Field::new(steps::STEP_INDEX, DataType::UInt32, false),
                Field::new(steps::TOOL_NAME, DataType::Utf8, false),
            ])),
            vec![
                Arc::new(datafusion::arrow::array::StringArray::from_iter_values(
                    rows.iter().map(|r| r.0.as_str()),
                )) as ArrayRef,
                Arc::new(datafusion::arrow::array::UInt32Array::from_iter_values(
                    rows.iter().map(|r| r.1),
                )),
                Arc::new(datafusion::arrow::array::StringArray::from_iter_values(
                    rows.iter().map(|r| r.2.as_str()),
                )),
            ],
        )
        .expect("a batch");
        let runner = Runner::Embedded {
            threads: 2,
            memory_budget: None,
        };
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        for (gap, min_support, min_length, max_length) in
            [(0, 2, 1, 4), (1, 2, 1, 4), (3, 2, 2, 5), (20, 3, 1, 3)]
        {
            let query =
                CountingQuery::new(min_support, min_length, max_length).with_max_gap(Some(gap));
            // Where the levels' ends are written, as a cluster writes them.
            let scratch = tempfile::tempdir().expect("a scratch folder");
            let plans = Plans {
                source: &StepSource::Stream,
                query: &query,
                reported: Reported::AllFrequent,
                traces: MinedTraces {
                    mined: &[],
                    held_out: &held_out,
                },
                runner: &runner,
                choose: None,
            };
            let (mut counted, retried) = runtime
                .block_on(async {
                    let context = SessionContext::new();
                    let table = MemTable::try_new(batch.schema(), vec![vec![batch.clone()]])
                        .expect("a table");
                    context
                        .register_table("all_steps", Arc::new(table))
                        .expect("registered");
                    plans
                        .remote_levels(&context, "all_steps", scratch.path())
                        .await
                })
                .expect("counted");
            counted.sort();
            // The levels read the steps and ends written as Parquet files, not tables in
            // memory; ends no longer read are deleted.
            let written: Vec<String> = std::fs::read_dir(scratch.path())
                .expect("the scratch folder")
                .map(|e| {
                    e.expect("an entry")
                        .file_name()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            assert!(written.contains(&"numbered-0".to_string()), "{written:?}");
            assert_eq!(
                written.iter().filter(|w| w.starts_with("ends-")).count(),
                1,
                "{written:?}"
            );
            let mined = &traces[..traces.len() - 1];
            let expected = crate::engine::gapped_fixture::mined(
                mined,
                gap,
                min_support,
                min_length,
                max_length,
            );
            assert_eq!(counted, expected, "gap {gap}");
            assert!(retried.is_empty());
        }
    }

    #[test]
    fn a_pattern_returned_twice_is_kept_once_and_disagreeing_rows_fail() {
        let kept = distinct_rows(
            vec![
                row(&["a", "b"], 3, 4),
                row(&["b", "c"], 2, 2),
                row(&["a", "b"], 3, 4),
            ],
            2,
        )
        .unwrap();
        assert_eq!(kept, vec![row(&["a", "b"], 3, 4), row(&["b", "c"], 2, 2)]);
        let failed = distinct_rows(vec![row(&["a", "b"], 3, 4), row(&["a", "b"], 3, 5)], 2)
            .err()
            .unwrap();
        assert!(
            failed.contains(
                "length 2: the cluster returned a -> b twice with different counts \
                 (support 3 and 3, occurrences 4 and 5)"
            ),
            "{failed}"
        );
    }

    /// An error in the data or the plan fails again on every attempt: not worth a retry.
    #[test]
    fn a_plan_error_is_not_a_lost_endpoint() {
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        let message = runtime.block_on(async {
            let context = SessionContext::new();
            context
                .sql("SELECT no_such_column FROM (VALUES (1)) AS t(x)")
                .await
                .err()
                .map(|e| e.to_string())
                .expect("the column does not exist")
        });
        assert!(!lost_endpoint(&message), "{message}");
    }
}
