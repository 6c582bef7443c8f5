//! Embedded counting by extension: each step numbered once, then each level's frequent
//! occurrences extended by the step after them with an integer join.
//!
//! The SQL of [`CountingQuery::level_sql`] recomputes a `LEAD` window over every step at each
//! length and groups by up to `max_length + 1` text columns, which is what a cluster or Spark can
//! run from plain SQL but grows far faster than the data on one machine. Here the plans stay
//! DataFusion's, but the intermediate results live in the session as tables:
//!
//! 1. `numbered`: every step as `(pos, tool)`, where `pos` is the trace's ordinal (its place in
//!    storage order among the mined traces) times 2^32 plus the step's place in the trace (one
//!    window, one sort), and `tool` a small integer from a dictionary of the tool names. The
//!    step after `pos` is `pos + 1` exactly when it exists.
//! 2. Level 1: tools counted by distinct trace (`pos / 2^32`), the frequent ones kept.
//! 3. Level n+1: each start position of a frequent n-gram (`occurrences`, with the pattern's
//!    number) joined with `numbered` at `pos + n`, grouped by (pattern, next tool) in two
//!    phases (per trace, then per pattern), the frequent extensions numbered in this process,
//!    and the occurrences of those kept for the next level.
//!
//! Every occurrence of a frequent pattern of length n+1 extends an occurrence of its frequent
//! prefix, so nothing is lost; the counts are the ones [`CountingQuery::level_sql`] gives.
//!
//! The occurrences of the patterns chosen to become candidates are then found the same way,
//! along the prefixes of those patterns only ([`located_occurrences`]), and an evenly spread
//! sample of each is taken in the plan, ordered by `pos`: storage order, as the in-process
//! miner samples.
//!
//! The kept tables (`numbered`, each level's occurrences and extensions, the trail of the
//! chosen patterns' prefixes) are written as Arrow IPC files to the session's [`Scratch`]
//! folder and read back from there, each deleted once replaced: they grow with the steps
//! (about 12 bytes a step each), so in memory they would set the peak at 100M steps; on disk
//! the peak is what one plan holds at a time.
//!
//! What one plan holds still grows with the steps: a join holds the occurrences it extends, a
//! grouping its groups. So past [`SLICE_STEPS`] the numbered steps are cut into slices of whole
//! traces, and each level is joined and counted slice by slice, the counts summed here; a trace
//! lies in one slice, so its contribution to a support is counted once. The peak is then that
//! of one slice, and the time grows with the number of slices.
//!
//! DataFusion hashes the left side of a join when it cannot tell which side is smaller (the
//! kept tables and the Parquet steps carry no statistics), so every join here puts first a
//! table of this process (tool numbers, a level's patterns, the prefix tree) or the
//! occurrences being extended, never the steps.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use chainweaver_recorder::model::dataset::steps;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringBuilder, UInt32Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, UInt32Type};
use datafusion::datasource::MemTable;
use datafusion::datasource::file_format::options::ArrowReadOptions;
use datafusion::prelude::{SessionConfig, SessionContext};

use super::sql::{CountedPattern, CountingQuery};

/// The folder a session's kept tables are written to, as a session extension
/// ([`SessionConfig::with_extension`]); what it holds is removed with it.
pub(super) struct Scratch {
    dir: tempfile::TempDir,
    written: AtomicUsize,
    /// The folder of each kept table, by name.
    tables: Mutex<HashMap<String, PathBuf>>,
    /// At most about this many steps in one slice (see [`register_numbered`]).
    slice_steps: u64,
    /// How many slices the numbered steps were cut into (1 until they are numbered).
    slices: AtomicUsize,
}

impl Scratch {
    /// A fresh folder in the system's temporary folder (`TMPDIR`) (see
    /// [`scratch_folder`](super::scratch_folder)).
    pub(super) fn new() -> Result<Self, String> {
        let dir = super::scratch_folder("chainweaver-engine-")
            .map_err(|e| format!("cannot make a scratch folder: {e}"))?;
        Ok(Self {
            dir,
            written: AtomicUsize::new(0),
            tables: Mutex::new(HashMap::new()),
            slice_steps: SLICE_STEPS,
            slices: AtomicUsize::new(1),
        })
    }

    /// [`Scratch::new`], cutting the steps into slices of at most about `steps` steps.
    #[cfg(test)]
    fn with_slice_steps(steps: u64) -> Result<Self, String> {
        Ok(Self {
            slice_steps: steps.max(1),
            ..Self::new()?
        })
    }

    /// `config` with this folder for the kept tables.
    pub(super) fn install(self: &Arc<Self>, config: SessionConfig) -> SessionConfig {
        config.with_extension(Arc::clone(self))
    }

    fn of(context: &SessionContext) -> Result<Arc<Self>, String> {
        context
            .state()
            .config()
            .get_extension::<Self>()
            .ok_or_else(|| "the session has no scratch folder".to_string())
    }

    fn fresh_folder(&self, name: &str) -> PathBuf {
        let n = self.written.fetch_add(1, Ordering::Relaxed);
        self.dir.path().join(format!("{name}-{n}"))
    }

    fn remember(&self, name: &str, folder: PathBuf) {
        self.tables
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(name.to_string(), folder);
    }

    /// The folders of the tables kept now, and the files in each, by folder name.
    #[cfg(test)]
    fn listing(&self) -> BTreeMap<String, Vec<String>> {
        let names = |dir: &std::path::Path| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .map(|entries| {
                    entries
                        .filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            names
        };
        names(self.dir.path())
            .into_iter()
            .map(|folder| {
                let files = names(&self.dir.path().join(&folder));
                (folder, files)
            })
            .collect()
    }

    fn slices(&self) -> usize {
        self.slices.load(Ordering::Relaxed).max(1)
    }

    fn take(&self, name: &str) -> Option<PathBuf> {
        self.tables
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(name)
    }
}

/// Deregister the table `name` and delete its files, if it was kept on disk.
fn forget(context: &SessionContext, name: &str) {
    let _ = context.deregister_table(name);
    if let Some(folder) = Scratch::of(context).ok().and_then(|s| s.take(name)) {
        // Deleting frees the disk early; what is left goes with the scratch folder.
        let _ = std::fs::remove_dir_all(folder);
    }
}

/// `pos / TRACE_STRIDE` is a step's trace; steps of one trace are consecutive below it.
const TRACE_STRIDE: i64 = 1 << 32;

/// Past this many steps the numbered steps are cut into slices of whole traces, about this
/// many steps each, and every level joins and counts slice by slice: a join holds one slice's
/// occurrences and a grouping one slice's groups, so the peak stays that of about 10M steps
/// however many there are (at 100M steps in one piece the joins and groupings held 15 GiB).
const SLICE_STEPS: u64 = 10_000_000;

/// The name of table `base` in slice `slice` of `slices`: `base` itself when there is one.
fn in_slice(base: &str, slice: usize, slices: usize) -> String {
    if slices <= 1 {
        base.to_string()
    } else {
        format!("{base}_{slice}")
    }
}

/// Table `base` in every slice of the session's numbered steps.
fn sliced(context: &SessionContext, base: &str) -> Result<Vec<String>, String> {
    let slices = Scratch::of(context)?.slices();
    Ok((0..slices).map(|s| in_slice(base, s, slices)).collect())
}

/// Keep, in every slice, the query `sql` spells for that slice (from a function naming a table
/// in the slice) as the table `target` in that slice. `consumed`, a table the query reads and
/// nothing needs after it, is forgotten in each slice as soon as that slice is written, so the
/// scratch folder holds one slice of it and of `target` at once, not a whole level of each.
async fn materialize_sliced(
    context: &SessionContext,
    target: &str,
    consumed: Option<&str>,
    sql: impl Fn(&dyn Fn(&str) -> String) -> String,
) -> Result<(), String> {
    let slices = Scratch::of(context)?.slices();
    for slice in 0..slices {
        let name = |base: &str| in_slice(base, slice, slices);
        materialize(context, &sql(&name), &name(target)).await?;
        if let Some(consumed) = consumed {
            forget(context, &name(consumed));
        }
    }
    Ok(())
}

/// Forget table `base` in every slice (and `base` itself).
fn forget_sliced(context: &SessionContext, base: &str) {
    if let Ok(names) = sliced(context, base) {
        for name in names {
            forget(context, &name);
        }
    }
    forget(context, base);
}

/// The column of the counted relation holding each step's trace ordinal (`BIGINT`).
pub(super) const ORDINAL: &str = "trace_ordinal";

const NUMBERED: &str = "numbered";
const TOOL_IDS: &str = "tool_ids";
const OCCURRENCES: &str = "occurrences_of_frequent";
const EXTENDED: &str = "extended";
const FREQUENT: &str = "frequent_extensions";

/// One frequent pattern of a level: the pattern it extends (its number one level down; none at
/// level 1), its last tool, and its counts.
struct Extension {
    prefix: Option<u32>,
    tool: u32,
    support: u64,
    occurrences: u64,
}

/// What [`frequent_rows`] counted; the session keeps `numbered` and the tool numbers for
/// [`located_occurrences`] until [`release`].
pub(super) struct Counted {
    pub rows: Vec<CountedPattern>,
    /// Tool names by number.
    pub tool_names: Vec<String>,
}

/// The frequent patterns of every length from `min_length` to `max_length + 1` among the steps
/// of `relation` (columns `trace_id`, `step_index`, `tool_name` and the trace's ordinal), as
/// [`CountingQuery::frequent_sql`] defines them. The tools are numbered from `tools_of`, any
/// relation whose `tool_name`s include those of `relation`; mining passes all the store's
/// steps, so that pass reads one column and joins nothing.
pub(super) async fn frequent_rows(
    context: &SessionContext,
    relation: &str,
    tools_of: &str,
    query: &CountingQuery,
) -> Result<Counted, String> {
    let tool_names = register_tool_ids(context, tools_of).await?;
    if tool_names.is_empty() {
        return Ok(Counted {
            rows: Vec::new(),
            tool_names,
        });
    }
    register_numbered(context, relation).await?;

    // Level 1: the tools themselves. `patterns[i]` spells pattern `i` of the current level as
    // tool numbers.
    let mut level = count_level(
        context,
        &sliced(context, NUMBERED)?,
        false,
        query.min_support,
    )
    .await?;
    let mut patterns: Vec<Vec<u32>> = level.iter().map(|e| vec![e.tool]).collect();
    let mut rows = Vec::new();
    // Contiguous closedness looks one tool further; gapped closedness compares the reported
    // lengths among themselves, as the in-process miner does.
    let longest = match query.max_gap {
        None => query.max_length + 1,
        Some(_) => query.max_length,
    };
    let mut length = 1;
    loop {
        if length >= query.min_length {
            for (extension, tools) in level.iter().zip(&patterns) {
                rows.push(CountedPattern {
                    tools: spell(tools, &tool_names)?,
                    support: extension.support,
                    // A gapped pattern's occurrences are its traces (the in-process count).
                    occurrences: match query.max_gap {
                        None => extension.occurrences,
                        Some(_) => extension.support,
                    },
                });
            }
        }
        if level.is_empty() || length >= longest {
            break;
        }
        keep_occurrences(context, &level, length).await?;
        match query.max_gap {
            None => extend_occurrences(context, length).await?,
            Some(gap) => extend_gapped(context, gap).await?,
        }
        let next = count_level(
            context,
            &sliced(context, EXTENDED)?,
            true,
            query.min_support,
        )
        .await?;
        patterns = next
            .iter()
            .map(|extension| {
                let prefix = extension.prefix.unwrap_or(u32::MAX);
                let mut tools = patterns.get(prefix as usize).cloned().ok_or_else(|| {
                    format!("length {}: no pattern {prefix} to extend", length + 1)
                })?;
                tools.push(extension.tool);
                Ok(tools)
            })
            .collect::<Result<_, String>>()?;
        level = next;
        length += 1;
    }
    for table in [OCCURRENCES, EXTENDED, FREQUENT] {
        forget_sliced(context, table);
    }
    Ok(Counted { rows, tool_names })
}

/// Let go of the tables [`frequent_rows`] kept.
pub(super) fn release(context: &SessionContext) {
    for table in [NUMBERED, TOOL_IDS, TRAIL, STEPPED, TRACE_DAYS] {
        forget_sliced(context, table);
    }
    if let Ok(scratch) = Scratch::of(context) {
        scratch.slices.store(1, Ordering::Relaxed);
    }
}

/// The steps [`frequent_rows`] numbered and their distinct tools.
pub(super) async fn numbered_totals(context: &SessionContext) -> Result<(u64, u64), String> {
    let batches = run(
        context,
        &format!("SELECT COUNT(*) AS steps, COUNT(DISTINCT tool) AS tools FROM {NUMBERED}"),
    )
    .await?;
    Ok((
        single_count(&batches, "steps")?,
        single_count(&batches, "tools")?,
    ))
}

/// The count in column `name` of the one row an aggregate query returned (0 for no row).
fn single_count(batches: &[RecordBatch], name: &str) -> Result<u64, String> {
    let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
        return Ok(0);
    };
    let column = column_as(batch, name, &DataType::Int64)?;
    Ok(u64::try_from(column.as_primitive::<Int64Type>().value(0)).unwrap_or(0))
}

/// For each tool of the numbered steps, by name: its rank by where it first appears (its
/// lowest `pos`), the order in which the in-process miner numbers tools, which breaks its ties.
pub(super) async fn first_seen(
    context: &SessionContext,
    tool_names: &[String],
) -> Result<HashMap<String, u64>, String> {
    let batches = run(
        context,
        &format!("SELECT tool, MIN(pos) AS first FROM {NUMBERED} GROUP BY tool"),
    )
    .await?;
    let mut firsts: Vec<(i64, u32)> = Vec::new();
    for batch in &batches {
        let tool = column_as(batch, "tool", &DataType::UInt32)?;
        let first = column_as(batch, "first", &DataType::Int64)?;
        let (tool, first) = (
            tool.as_primitive::<UInt32Type>(),
            first.as_primitive::<Int64Type>(),
        );
        firsts.extend((0..batch.num_rows()).map(|row| (first.value(row), tool.value(row))));
    }
    firsts.sort_unstable();
    Ok(firsts
        .into_iter()
        .enumerate()
        .filter_map(|(rank, (_, tool))| Some((tool_names.get(tool as usize)?.clone(), rank as u64)))
        .collect())
}

/// One chosen pattern's occurrences: how many, the sample inference reads, and the distinct
/// traces per day.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampledOccurrences {
    pub total: u64,
    /// `(trace ordinal, place of the first step)`, in storage order: every occurrence, or
    /// `cap` spread evenly over them as the in-process miner picks them.
    pub sample: Vec<(u64, u32)>,
    /// Distinct traces holding an occurrence, by the UTC day (`YYYY-MM-DD`) of each trace's
    /// first timed step.
    pub support_by_day: BTreeMap<String, u64>,
}

const TRAIL: &str = "chosen_trail";
const STEPPED: &str = "chosen_steps";
const FOUND: &str = "chosen_found";
const TRACE_DAYS: &str = "trace_days";

/// What [`located_occurrences`] looks for.
pub(super) struct Wanted<'a> {
    /// Patterns (tool names) whose support per day is counted.
    pub located: &'a [Vec<String>],
    /// The first this many of them are also sampled, for candidates.
    pub chosen: usize,
    /// At most this many occurrences of each chosen pattern (`None`: all).
    pub cap: Option<usize>,
}

/// What [`located_occurrences`] found.
pub(super) struct Located {
    /// Per located pattern: distinct traces per day.
    pub by_day: Vec<BTreeMap<String, u64>>,
    /// Per chosen pattern.
    pub chosen: Vec<SampledOccurrences>,
}

/// The occurrences of each located pattern among the numbered steps, counted by day, and for
/// the chosen ones the count and, when `cap` is given, `cap` of them spread evenly (all when
/// there are no more), chosen in the plan so only the sample comes back.
///
/// The patterns' prefixes form a tree; level by level, the start positions reaching a prefix
/// are extended by the step after them (an integer join, as for counting), and those reaching a
/// whole pattern are kept.
pub(super) async fn located_occurrences(
    context: &SessionContext,
    tool_names: &[String],
    wanted: &Wanted<'_>,
) -> Result<Located, String> {
    let mut found = Located {
        by_day: vec![BTreeMap::new(); wanted.located.len()],
        chosen: vec![SampledOccurrences::default(); wanted.chosen],
    };
    let tree = PrefixTree::of(wanted.located, tool_names);
    let found_levels = walk_prefixes(context, &tree).await?;
    if found_levels.is_empty() {
        return Ok(found);
    }
    let union = found_levels
        .iter()
        .map(|table| format!("SELECT pos, pattern FROM {table}"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let days = run(
        context,
        &format!(
            // Distinct (pattern, trace) pairs first, a plain grouping, then counted per day: a
            // `COUNT(DISTINCT)` per group would hold a set of traces for every group at once.
            "SELECT t.pattern, d.day, COUNT(*) AS traces
FROM (SELECT DISTINCT pattern, pos / {TRACE_STRIDE} AS trace FROM ({union}) f) t
JOIN {TRACE_DAYS} d ON d.{ORDINAL} = t.trace
GROUP BY t.pattern, d.day"
        ),
    )
    .await;
    // Item `i` of `total` is taken when it is the first at or past one of `cap` even marks
    // (`candidate::even_positions`): when `i * cap / total` steps past `(i - 1) * cap / total`.
    let taken = match wanted.cap {
        Some(cap) => {
            let cap = cap.max(1);
            format!(
                "WHERE total <= {cap} OR i = 0 OR (i * {cap}) / total > ((i - 1) * {cap}) / total"
            )
        }
        None => String::new(),
    };
    let sample = if wanted.chosen == 0 {
        Ok(Vec::new())
    } else {
        let sql = format!(
            "SELECT pattern, pos, total FROM (
  SELECT pattern, pos,
    CAST(ROW_NUMBER() OVER (PARTITION BY pattern ORDER BY pos) AS BIGINT) - 1 AS i,
    CAST(COUNT(*) OVER (PARTITION BY pattern) AS BIGINT) AS total
  FROM ({union}) found WHERE pattern < {chosen}
) numbered_found {taken}",
            chosen = wanted.chosen
        );
        run(context, &sql).await
    };
    for table in &found_levels {
        forget(context, table);
    }
    forget_sliced(context, TRAIL);
    for batch in days? {
        read_days(&batch, &mut found.by_day)?;
    }
    for batch in sample? {
        read_sample(&batch, &mut found.chosen)?;
    }
    for (slot, by_day) in found.chosen.iter_mut().zip(&found.by_day) {
        slot.sample.sort_unstable();
        slot.support_by_day = by_day.clone();
    }
    Ok(found)
}

/// Register `trace_days (trace ordinal, day)`: the UTC day of each trace's first timed step
/// (by step index), as the in-process miner dates traces; traces without one are left out.
/// One pass over the steps, one group per trace.
///
/// The group keeps the least of one integer per timed step, its index above its day (days
/// since 1970, made positive), so the least is the first step's day. An integer minimum
/// is a plain grouped aggregate; `first_value(.. ORDER BY ..)` kept an ordering per group,
/// which at 100M steps cost more time and memory than any other pass but the lengths.
pub(super) async fn register_trace_days(
    context: &SessionContext,
    relation: &str,
) -> Result<(), String> {
    let sql = format!(
        "SELECT {ORDINAL}, to_char(CAST(CAST(first % {DAY_SPAN} - {DAY_OFFSET} AS INT) AS DATE), '%Y-%m-%d') AS day
FROM (
  SELECT {ORDINAL}, MIN(CAST({index} AS BIGINT) * {DAY_SPAN}
    + CAST(CAST(CAST({started} AS DATE) AS INT) AS BIGINT) + {DAY_OFFSET}) AS first
  FROM {relation} WHERE {started} IS NOT NULL GROUP BY {ORDINAL}
) firsts",
        index = steps::STEP_INDEX,
        started = steps::STARTED_AT,
    );
    materialize(context, &sql, TRACE_DAYS).await
}

/// Room for a day in [`register_trace_days`]'s packed integer: nanosecond timestamps span
/// about 107,000 days each side of 1970, shifted by [`DAY_OFFSET`] to be positive. A step
/// index (below 2^32) times the span stays below 2^56.
const DAY_SPAN: i64 = 1 << 24;
const DAY_OFFSET: i64 = 1 << 23;

/// Add the rows of one result batch (`pattern`, `day`, `traces`) to `by_day`.
fn read_days(batch: &RecordBatch, by_day: &mut [BTreeMap<String, u64>]) -> Result<(), String> {
    let (pattern, day, traces) = (
        column_as(batch, "pattern", &DataType::UInt32)?,
        column_as(batch, "day", &DataType::Utf8)?,
        column_as(batch, "traces", &DataType::Int64)?,
    );
    let (pattern, day, traces) = (
        pattern.as_primitive::<UInt32Type>(),
        day.as_string::<i32>(),
        traces.as_primitive::<Int64Type>(),
    );
    for row in 0..batch.num_rows() {
        let slot = by_day
            .get_mut(pattern.value(row) as usize)
            .ok_or_else(|| format!("no located pattern {}", pattern.value(row)))?;
        if !day.is_null(row) {
            slot.insert(
                day.value(row).to_string(),
                u64::try_from(traces.value(row)).unwrap_or(0),
            );
        }
    }
    Ok(())
}

/// The located patterns' prefixes as a tree of tool numbers; node 0 is the root.
struct PrefixTree {
    /// Per depth: `(parent, tool, node)` of each prefix of that length plus one.
    levels: Vec<Vec<(u32, u32, u32)>>,
    /// Per depth: `(node, pattern)` of the patterns that end there.
    ends: Vec<Vec<(u32, u32)>>,
}

impl PrefixTree {
    fn of(chosen: &[Vec<String>], tool_names: &[String]) -> Self {
        let number: HashMap<&str, u32> = tool_names
            .iter()
            .enumerate()
            .map(|(i, name)| (name.as_str(), i as u32))
            .collect();
        let mut nodes: HashMap<(u32, u32), u32> = HashMap::new();
        let mut tree = Self {
            levels: Vec::new(),
            ends: Vec::new(),
        };
        for (pattern, tools) in chosen.iter().enumerate() {
            let mut parent = 0u32;
            for (depth, tool) in tools.iter().enumerate() {
                // A tool the steps never name: the pattern has no occurrence.
                let Some(&tool) = number.get(tool.as_str()) else {
                    break;
                };
                if tree.levels.len() <= depth {
                    tree.levels.resize(depth + 1, Vec::new());
                    tree.ends.resize(depth + 1, Vec::new());
                }
                let next = nodes.len() as u32 + 1;
                let node = *nodes.entry((parent, tool)).or_insert_with(|| {
                    tree.levels[depth].push((parent, tool, next));
                    next
                });
                if depth + 1 == tools.len() {
                    tree.ends[depth].push((node, pattern as u32));
                }
                parent = node;
            }
        }
        tree
    }
}

/// Walk the numbered steps along `tree`, depth by depth, and keep, per depth where patterns
/// end, their start positions as a table `(pos, pattern)`; returns those tables' names.
async fn walk_prefixes(context: &SessionContext, tree: &PrefixTree) -> Result<Vec<String>, String> {
    let mut found_levels = Vec::new();
    for (depth, level) in tree.levels.iter().enumerate() {
        register_u32s(context, STEPPED, ["parent", "tool", "node"], level)?;
        materialize_sliced(context, TRAIL, None, |name| {
            let (numbered, trail) = (name(NUMBERED), name(TRAIL));
            if depth == 0 {
                format!(
                    "SELECT o.pos, w.node FROM {STEPPED} w JOIN {numbered} o ON o.tool = w.tool"
                )
            } else {
                format!(
                    "SELECT o.pos, w.node FROM {trail} o
JOIN {numbered} n ON n.pos = o.pos + {depth}
JOIN {STEPPED} w ON w.parent = o.node AND w.tool = n.tool"
                )
            }
        })
        .await?;
        let _ = context.deregister_table(STEPPED);
        let Some(ends) = tree.ends.get(depth).filter(|ends| !ends.is_empty()) else {
            continue;
        };
        let ends_table = format!("{FOUND}_{depth}_ends");
        let pairs: Vec<(u32, u32, u32)> = ends.iter().map(|&(n, p)| (n, p, 0)).collect();
        register_u32s(context, &ends_table, ["node", "pattern", "unused"], &pairs)?;
        let ended = format!("{FOUND}_{depth}");
        materialize_sliced(context, &ended, None, |name| {
            format!(
                "SELECT t.pos, e.pattern FROM {ends_table} e JOIN {} t ON t.node = e.node",
                name(TRAIL)
            )
        })
        .await?;
        found_levels.extend(sliced(context, &ended)?);
        let _ = context.deregister_table(ends_table.as_str());
    }
    Ok(found_levels)
}

/// Add the rows of one result batch (`pattern`, `pos`, `total`) to `out`.
fn read_sample(batch: &RecordBatch, out: &mut [SampledOccurrences]) -> Result<(), String> {
    let (pattern, pos, total) = (
        column_as(batch, "pattern", &DataType::UInt32)?,
        column_as(batch, "pos", &DataType::Int64)?,
        column_as(batch, "total", &DataType::Int64)?,
    );
    let (pattern, pos, total) = (
        pattern.as_primitive::<UInt32Type>(),
        pos.as_primitive::<Int64Type>(),
        total.as_primitive::<Int64Type>(),
    );
    for row in 0..batch.num_rows() {
        let slot = out
            .get_mut(pattern.value(row) as usize)
            .ok_or_else(|| format!("no chosen pattern {}", pattern.value(row)))?;
        let pos = pos.value(row);
        slot.total = u64::try_from(total.value(row)).unwrap_or(0);
        // Places are numbered from 1 in `numbered`.
        let place = (pos % TRACE_STRIDE) - 1;
        slot.sample.push((
            u64::try_from(pos / TRACE_STRIDE).unwrap_or(0),
            u32::try_from(place).unwrap_or(0),
        ));
    }
    Ok(())
}

/// Register `name` as a table of three `UInt32` columns.
fn register_u32s(
    context: &SessionContext,
    name: &str,
    columns: [&str; 3],
    rows: &[(u32, u32, u32)],
) -> Result<(), String> {
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(*c, DataType::UInt32, false))
            .collect::<Vec<_>>(),
    ));
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(rows.iter().map(|r| r.0).collect::<UInt32Array>()),
        Arc::new(rows.iter().map(|r| r.1).collect::<UInt32Array>()),
        Arc::new(rows.iter().map(|r| r.2).collect::<UInt32Array>()),
    ];
    let batch = RecordBatch::try_new(schema.clone(), arrays).map_err(|e| e.to_string())?;
    register(context, name, schema, vec![vec![batch]])
}

/// The names of the tools numbered `tools`.
fn spell(tools: &[u32], names: &[String]) -> Result<Vec<String>, String> {
    tools
        .iter()
        .map(|&t| {
            names
                .get(t as usize)
                .cloned()
                .ok_or_else(|| format!("no tool numbered {t}"))
        })
        .collect()
}

/// Register `tool_ids (tool_name, tool)`, a number for each distinct tool name, and return the
/// names by number.
async fn register_tool_ids(
    context: &SessionContext,
    relation: &str,
) -> Result<Vec<String>, String> {
    let batches = run(
        context,
        &format!(
            "SELECT DISTINCT {tool} FROM {relation}",
            tool = steps::TOOL_NAME
        ),
    )
    .await?;
    let mut names = Vec::new();
    for batch in &batches {
        let column = cast(batch.column(0), &DataType::Utf8).map_err(|e| e.to_string())?;
        let column = column.as_string::<i32>();
        names.extend(
            (0..column.len())
                .filter(|&row| !column.is_null(row))
                .map(|row| column.value(row).to_string()),
        );
    }
    names.sort();
    let schema = Arc::new(Schema::new(vec![
        Field::new(steps::TOOL_NAME, DataType::Utf8, false),
        Field::new("tool", DataType::UInt32, false),
    ]));
    let mut texts = StringBuilder::new();
    for name in &names {
        texts.append_value(name);
    }
    let numbers: UInt32Array = (0..names.len() as u32).collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(texts.finish()) as ArrayRef, Arc::new(numbers)],
    )
    .map_err(|e| e.to_string())?;
    register(context, TOOL_IDS, schema, vec![vec![batch]])?;
    Ok(names)
}

/// How [`register_numbered`] placed each step in its trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Numbering {
    /// By its step index: every trace's indexes run from 0 to its length less one.
    ByIndex,
    /// By its rank among its trace's step indexes (a sort), since some trace skips one.
    ByRank,
}

/// Register `numbered (pos, tool)`: every step of `relation` by its trace's ordinal (the
/// trace's place in storage order among the mined traces, so positions sort as the in-process
/// miner visits occurrences) and its place in the trace, with its tool's number.
///
/// A store keeps `(trace, step_index)` unique, and its traces' indexes usually run from 0 with
/// no gap; then the index is the place, and no step is sorted (that sort was 4% of a run at
/// 100M steps). A trace whose indexes start past 0 or skip one is found in the numbered table
/// itself (its first place is not 1 or its last is not its length), and then every step is
/// numbered by rank instead.
///
/// Past the scratch's slice size the numbered steps are then cut into slices of whole traces
/// (see [`SLICE_STEPS`]), each its own table, `numbered` their union.
async fn register_numbered(context: &SessionContext, relation: &str) -> Result<Numbering, String> {
    materialize(
        context,
        &numbered_sql(relation, Numbering::ByIndex),
        NUMBERED,
    )
    .await?;
    let shape = run(
        context,
        &format!(
            "SELECT CAST(COALESCE(SUM(CASE WHEN first <> 1 OR last <> steps THEN 1 ELSE 0 END), 0) AS BIGINT) AS skipping,
  CAST(COALESCE(SUM(steps), 0) AS BIGINT) AS steps,
  CAST(COALESCE(MAX(trace), -1) + 1 AS BIGINT) AS ordinals
FROM (
  SELECT pos / {TRACE_STRIDE} AS trace, MIN(pos % {TRACE_STRIDE}) AS first,
    MAX(pos % {TRACE_STRIDE}) AS last, COUNT(*) AS steps
  FROM {NUMBERED} GROUP BY pos / {TRACE_STRIDE}
) per_trace"
        ),
    )
    .await?;
    let numbering = if single_count(&shape, "skipping")? == 0 {
        Numbering::ByIndex
    } else {
        materialize(
            context,
            &numbered_sql(relation, Numbering::ByRank),
            NUMBERED,
        )
        .await?;
        Numbering::ByRank
    };
    slice_numbered(
        context,
        single_count(&shape, "steps")?,
        single_count(&shape, "ordinals")?,
    )
    .await?;
    Ok(numbering)
}

/// Cut the `steps` numbered steps, of traces numbered below `ordinals`, into slices of about
/// the scratch's slice size: trace `t` goes to slice `t * slices / ordinals`, so each slice
/// holds whole traces and about as many of them. One slice leaves `numbered` as it is.
async fn slice_numbered(context: &SessionContext, steps: u64, ordinals: u64) -> Result<(), String> {
    let scratch = Scratch::of(context)?;
    let slices = steps.div_ceil(scratch.slice_steps).min(ordinals).max(1);
    scratch.slices.store(1, Ordering::Relaxed);
    if slices == 1 {
        return Ok(());
    }
    let text = |e: datafusion::error::DataFusionError| e.to_string();
    // One pass: each step is written under `slice=<n>/`, its slice's own folder.
    let folder = copy_to_scratch(
        context,
        &scratch,
        NUMBERED,
        &format!("SELECT pos, tool, (pos / {TRACE_STRIDE}) * {slices} / {ordinals} AS slice FROM {NUMBERED}"),
        "PARTITIONED BY (slice)",
    )
    .await?;
    let schema = Arc::new(
        context
            .table(NUMBERED)
            .await
            .map_err(text)?
            .schema()
            .as_arrow()
            .clone(),
    );
    forget(context, NUMBERED);
    scratch.remember(NUMBERED, folder.clone());
    let slices = usize::try_from(slices).map_err(|e| e.to_string())?;
    let mut union = Vec::with_capacity(slices);
    for slice in 0..slices {
        let name = in_slice(NUMBERED, slice, slices);
        let part = folder.join(format!("slice={slice}"));
        if part.is_dir() {
            let options = ArrowReadOptions {
                schema: Some(&schema),
                ..ArrowReadOptions::default()
            };
            context
                .register_arrow(&name, &format!("{}/", part.display()), options)
                .await
                .map_err(text)?;
        } else {
            // No trace was numbered into this slice (ordinals can skip).
            register(context, &name, schema.clone(), Vec::new())?;
        }
        union.push(format!("SELECT pos, tool FROM {name}"));
    }
    let whole = context
        .sql(&union.join(" UNION ALL "))
        .await
        .map_err(text)?;
    context
        .register_table(NUMBERED, whole.into_view())
        .map_err(text)?;
    scratch.slices.store(slices, Ordering::Relaxed);
    Ok(())
}

/// The query [`register_numbered`] keeps, placing steps as `numbering` says (1 is a trace's
/// first place).
fn numbered_sql(relation: &str, numbering: Numbering) -> String {
    let index = steps::STEP_INDEX;
    let place = match numbering {
        Numbering::ByIndex => format!("CAST(s.{index} AS BIGINT) + 1"),
        Numbering::ByRank => format!(
            "CAST(ROW_NUMBER() OVER (PARTITION BY s.{ORDINAL} ORDER BY s.{index}) AS BIGINT)"
        ),
    };
    format!(
        "SELECT s.{ORDINAL} * {TRACE_STRIDE} + {place} AS pos, n.tool
FROM {TOOL_IDS} n
JOIN {relation} s ON s.{tool} = n.{tool}",
        tool = steps::TOOL_NAME,
    )
}

/// The frequent patterns of one level in `table` (`pos`, `tool`, and when `extends` the
/// `prefix` pattern extended), numbered by (prefix, tool): pattern `i` of the level is the
/// `i`-th.
async fn count_level(
    context: &SessionContext,
    slices: &[String],
    extends: bool,
    min_support: u32,
) -> Result<Vec<Extension>, String> {
    let keys = if extends { "prefix, tool" } else { "tool" };
    // A pattern rare in every slice can be frequent over all of them, so slices are counted
    // whole and summed here; a trace lies in one slice, so the supports add up.
    let having = match slices {
        [_] => format!("HAVING COUNT(*) >= {min_support}"),
        _ => String::new(),
    };
    let mut counts: HashMap<(Option<u32>, u32), (u64, u64)> = HashMap::new();
    for table in slices {
        let sql = format!(
            "SELECT {keys}, COUNT(*) AS support, SUM(n) AS occurrences
FROM (SELECT {keys}, pos / {TRACE_STRIDE} AS trace, COUNT(*) AS n FROM {table} GROUP BY {keys}, pos / {TRACE_STRIDE}) per_trace
GROUP BY {keys}
{having}"
        );
        for batch in run(context, &sql).await? {
            add_counts(&batch, extends, &mut counts)?;
        }
    }
    let mut level: Vec<Extension> = counts
        .into_iter()
        .filter(|(_, (support, _))| *support >= u64::from(min_support))
        .map(|((prefix, tool), (support, occurrences))| Extension {
            prefix,
            tool,
            support,
            occurrences,
        })
        .collect();
    // A stable numbering, whatever order the partitions and slices finished in.
    level.sort_by_key(|e| (e.prefix, e.tool));
    Ok(level)
}

/// Add one batch of a level's counts (`tool`, `prefix` when `extends`, `support`,
/// `occurrences`) to `counts`, by (prefix, tool).
fn add_counts(
    batch: &RecordBatch,
    extends: bool,
    counts: &mut HashMap<(Option<u32>, u32), (u64, u64)>,
) -> Result<(), String> {
    let u32s = |name: &str| -> Result<UInt32Array, String> {
        let column = column_as(batch, name, &DataType::UInt32)?;
        Ok(column.as_primitive::<UInt32Type>().clone())
    };
    let i64s = |name: &str| column_as(batch, name, &DataType::Int64);
    let tools = u32s("tool")?;
    let prefixes = extends.then(|| u32s("prefix")).transpose()?;
    let (support, occurrences) = (i64s("support")?, i64s("occurrences")?);
    let (support, occurrences) = (
        support.as_primitive::<Int64Type>(),
        occurrences.as_primitive::<Int64Type>(),
    );
    for row in 0..batch.num_rows() {
        let slot = counts
            .entry((prefixes.as_ref().map(|p| p.value(row)), tools.value(row)))
            .or_default();
        slot.0 += u64::try_from(support.value(row)).unwrap_or(0);
        slot.1 += u64::try_from(occurrences.value(row)).unwrap_or(0);
    }
    Ok(())
}

/// Replace `occurrences_of_frequent (pos, pattern)` with the start positions of the patterns of
/// `level` (of `length` tools): from `numbered` at level 1, else from `extended`.
async fn keep_occurrences(
    context: &SessionContext,
    level: &[Extension],
    length: usize,
) -> Result<(), String> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("prefix", DataType::UInt32, false),
        Field::new("tool", DataType::UInt32, false),
        Field::new("pattern", DataType::UInt32, false),
    ]));
    let prefixes: UInt32Array = level.iter().map(|e| e.prefix.unwrap_or(0)).collect();
    let tools: UInt32Array = level.iter().map(|e| e.tool).collect();
    let patterns: UInt32Array = (0..level.len() as u32).collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(prefixes), Arc::new(tools), Arc::new(patterns)],
    )
    .map_err(|e| e.to_string())?;
    let _ = context.deregister_table(FREQUENT);
    register(context, FREQUENT, schema, vec![vec![batch]])?;
    // Past length 1 the extensions are read, once.
    let consumed = (length > 1).then_some(EXTENDED);
    materialize_sliced(context, OCCURRENCES, consumed, |name| {
        if length == 1 {
            format!(
                "SELECT o.pos, f.pattern FROM {FREQUENT} f JOIN {} o ON o.tool = f.tool",
                name(NUMBERED)
            )
        } else {
            format!(
                "SELECT o.pos, f.pattern FROM {FREQUENT} f
JOIN {} o ON o.prefix = f.prefix AND o.tool = f.tool",
                name(EXTENDED)
            )
        }
    })
    .await
}

/// Replace `extended (pos, prefix, tool)` with each kept occurrence of `length` tools and the
/// tool of the step after it, where its trace has one.
async fn extend_occurrences(context: &SessionContext, length: usize) -> Result<(), String> {
    materialize_sliced(context, EXTENDED, Some(OCCURRENCES), |name| {
        format!(
            "SELECT o.pos, o.pattern AS prefix, n.tool
FROM {} o JOIN {} n ON n.pos = o.pos + {length}",
            name(OCCURRENCES),
            name(NUMBERED)
        )
    })
    .await
}

/// Gaps up to this many steps are joined position by position (one equi-join per distance);
/// wider ones join the steps of the same trace within the window.
const UNROLLED_GAPS: u32 = 15;

/// [`extend_occurrences`] for gapped patterns: `occurrences_of_frequent` holds where each
/// pattern can end (`pos`), and `extended (pos, prefix, tool)` becomes every step at most `gap`
/// other steps after such an end, as a new end of the pattern extended by its tool; each end
/// once, however many ways reach it, so a level holds at most one row per step and pattern.
async fn extend_gapped(context: &SessionContext, gap: u32) -> Result<(), String> {
    materialize_sliced(context, EXTENDED, Some(OCCURRENCES), |name| {
        gapped_extension_sql(&name(OCCURRENCES), &name(NUMBERED), gap)
    })
    .await
}

/// The query [`extend_gapped`] keeps for one slice.
fn gapped_extension_sql(occurrences: &str, numbered: &str, gap: u32) -> String {
    let reach = i64::from(gap) + 1;
    if gap <= UNROLLED_GAPS {
        let branches: Vec<String> = (1..=reach)
            .map(|distance| {
                format!(
                    "SELECT n.pos, o.pattern AS prefix, n.tool
FROM {occurrences} o JOIN {numbered} n ON n.pos = o.pos + {distance}"
                )
            })
            .collect();
        format!(
            "SELECT DISTINCT pos, prefix, tool FROM ({}) reached",
            branches.join("\nUNION ALL\n")
        )
    } else {
        format!(
            "SELECT DISTINCT n.pos, o.pattern AS prefix, n.tool
FROM {occurrences} o JOIN {numbered} n
  ON n.pos / {TRACE_STRIDE} = o.pos / {TRACE_STRIDE}
 AND n.pos > o.pos AND n.pos <= o.pos + {reach}"
        )
    }
}

/// Run `sql` and keep its result as the table `name` (replacing one of that name, which `sql`
/// may read): Arrow IPC files in a fresh folder of the session's [`Scratch`], written by the
/// plan as it runs, so the result never has to fit in memory.
async fn materialize(context: &SessionContext, sql: &str, name: &str) -> Result<(), String> {
    let text = |e: datafusion::error::DataFusionError| e.to_string();
    let scratch = Scratch::of(context)?;
    let frame = context.sql(sql).await.map_err(text)?;
    let schema = frame.schema().as_arrow().clone();
    let folder = copy_to_scratch(context, &scratch, name, sql, "").await?;
    let target = format!("{}/", folder.display());
    forget(context, name);
    let options = ArrowReadOptions {
        schema: Some(&schema),
        ..ArrowReadOptions::default()
    };
    // Remembered first, so a failed registration's files still go with `forget` or the folder.
    scratch.remember(name, folder);
    context
        .register_arrow(name, &target, options)
        .await
        .map_err(text)
}

/// Write the result of `sql` as Arrow IPC files into a fresh folder of `scratch` for table
/// `name` (with `clause` after `STORED AS ARROW`, e.g. a partitioning), and return the folder;
/// on an error nothing is left.
async fn copy_to_scratch(
    context: &SessionContext,
    scratch: &Scratch,
    name: &str,
    sql: &str,
    clause: &str,
) -> Result<PathBuf, String> {
    let folder = scratch.fresh_folder(name);
    std::fs::create_dir_all(&folder)
        .map_err(|e| format!("cannot write to {}: {e}", folder.display()))?;
    // A trailing separator makes it a folder of files, one per writer, rather than one file.
    let target = format!("{}/", folder.display());
    let written = match context
        .sql(&format!(
            "COPY ({sql}) TO {} STORED AS ARROW {clause}",
            super::sql::string_literal(&target)
        ))
        .await
    {
        Ok(frame) => frame.collect().await.map(|_| ()),
        Err(e) => Err(e),
    };
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&folder);
        return Err(e.to_string());
    }
    Ok(folder)
}

fn register(
    context: &SessionContext,
    name: &str,
    schema: Arc<Schema>,
    partitions: Vec<Vec<RecordBatch>>,
) -> Result<(), String> {
    let partitions = if partitions.is_empty() {
        vec![Vec::new()]
    } else {
        partitions
    };
    let table = MemTable::try_new(schema, partitions).map_err(|e| e.to_string())?;
    context
        .register_table(name, Arc::new(table))
        .map_err(|e| e.to_string())?;
    Ok(())
}

async fn run(context: &SessionContext, sql: &str) -> Result<Vec<RecordBatch>, String> {
    context
        .sql(sql)
        .await
        .map_err(|e| e.to_string())?
        .collect()
        .await
        .map_err(|e| e.to_string())
}

/// Column `name` of a result batch, cast to `to`.
pub(super) fn column_as(
    batch: &RecordBatch,
    name: &str,
    to: &DataType,
) -> Result<ArrayRef, String> {
    let column = batch
        .column_by_name(name)
        .ok_or_else(|| format!("no column {name}"))?;
    cast(column, to).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    /// Every contiguous pattern of `lengths` in `traces`, counted by brute force.
    fn brute_force(
        traces: &[Vec<&str>],
        min_support: u64,
        lengths: std::ops::RangeInclusive<usize>,
    ) -> Vec<CountedPattern> {
        let mut counts: BTreeMap<Vec<String>, (BTreeSet<usize>, u64)> = BTreeMap::new();
        for (t, tools) in traces.iter().enumerate() {
            for length in lengths.clone() {
                for window in tools.windows(length) {
                    let entry = counts
                        .entry(window.iter().map(|s| s.to_string()).collect())
                        .or_default();
                    entry.0.insert(t);
                    entry.1 += 1;
                }
            }
        }
        counts
            .into_iter()
            .filter(|(_, (traces, _))| traces.len() as u64 >= min_support)
            .map(|(tools, (traces, occurrences))| CountedPattern {
                tools,
                support: traces.len() as u64,
                occurrences,
            })
            .collect()
    }

    /// Start of step `i` of trace `t`: trace `t` on day `t % 3` from 2026-11-01 (UTC), but
    /// trace 2 untimed and the first step of trace 3 untimed (its second dates it, a day later);
    /// trace 4 runs back in time a day a step from 2026-11-10, so its first step is its latest;
    /// trace 5 starts on the last day before 1970.
    fn started(t: usize, i: usize) -> Option<i64> {
        const DAY: i64 = 86_400 * 1_000_000_000;
        const NOV_1: i64 = 1_793_491_200 * 1_000_000_000;
        match (t, i) {
            (2, _) | (3, 0) => None,
            (3, _) => Some(NOV_1 + 4 * DAY + i as i64),
            (4, _) => Some(NOV_1 + (9 - i as i64) * DAY),
            (5, _) => Some(-DAY + 3_600_000_000_000 * i as i64),
            _ => Some(NOV_1 + (t % 3) as i64 * DAY + 3_600_000_000_000 * i as i64),
        }
    }

    /// Step `i` of trace `t` has index `i * 3 + 1`: no trace starts at 0, so steps are
    /// numbered by rank.
    fn spaced(_t: usize, i: usize) -> u32 {
        i as u32 * 3 + 1
    }

    /// Step `i` has index `i`, as the stores write them: the index is the place.
    fn dense(_t: usize, i: usize) -> u32 {
        i as u32
    }

    /// Dense but for trace 1, whose indexes skip every other number.
    fn one_skipping(t: usize, i: usize) -> u32 {
        if t == 1 { i as u32 * 2 } else { i as u32 }
    }

    /// The traces as a `steps` table (with each trace's ordinal and start times), rows
    /// shuffled and step `i` of trace `t` indexed `indexes(t, i)`, so the numbering must come
    /// from the order of `step_index` and not from the rows' order.
    fn steps_table(traces: &[Vec<&str>], indexes: fn(usize, usize) -> u32) -> MemTable {
        let mut rows: Vec<(String, u32, String, i64, Option<i64>)> = traces
            .iter()
            .enumerate()
            .flat_map(|(t, tools)| {
                tools.iter().enumerate().map(move |(i, tool)| {
                    let index = indexes(t, i);
                    (
                        format!("trace-{t}"),
                        index,
                        tool.to_string(),
                        t as i64,
                        started(t, i),
                    )
                })
            })
            .collect();
        rows.reverse();
        let third = rows.len() / 3;
        rows.rotate_left(third);
        let mut fields: Vec<Field> = crate::engine::datafusion::stream_schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new(ORDINAL, DataType::Int64, false));
        let schema = Arc::new(Schema::new(fields));
        let (mut ids, mut tools) = (StringBuilder::new(), StringBuilder::new());
        let (mut indexes, mut ordinals, mut starts) = (Vec::new(), Vec::new(), Vec::new());
        for (id, index, tool, ordinal, start) in &rows {
            ids.append_value(id);
            indexes.push(*index);
            tools.append_value(tool);
            ordinals.push(*ordinal);
            starts.push(*start);
        }
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(ids.finish()) as ArrayRef,
                Arc::new(UInt32Array::from(indexes)),
                Arc::new(tools.finish()),
                Arc::new(
                    datafusion::arrow::array::TimestampNanosecondArray::from(starts)
                        .with_timezone("UTC"),
                ),
                Arc::new(datafusion::arrow::array::Int64Array::from(ordinals)),
            ],
        )
        .expect("a batch of five columns");
        MemTable::try_new(schema, vec![vec![batch]]).expect("a table")
    }

    /// How the steps of a test's session are indexed and sliced.
    #[derive(Clone, Copy)]
    struct Layout {
        indexes: fn(usize, usize) -> u32,
        /// The scratch's slice size (`None`: the engine's).
        slice_steps: Option<u64>,
    }

    impl Layout {
        fn whole(indexes: fn(usize, usize) -> u32) -> Self {
            Self {
                indexes,
                slice_steps: None,
            }
        }
    }

    /// Every way the level tests lay the steps out: indexed spaced, dense and with one trace
    /// skipping; in one piece, a slice per trace, and slices of about four steps.
    fn layouts() -> Vec<Layout> {
        let mut all = Vec::new();
        for indexes in [spaced as fn(usize, usize) -> u32, dense, one_skipping] {
            for slice_steps in [None, Some(1), Some(4)] {
                all.push(Layout {
                    indexes,
                    slice_steps,
                });
            }
        }
        all
    }

    /// The tools of the steps and of held-out traces; see [`session_over`].
    const STORE_TOOLS: &str = "store_tools";

    /// A runtime, and a session (kept tables in a scratch folder of its own) whose `steps`
    /// table holds `traces` laid out as `layout` says, and whose `store_tools` holds their
    /// tools and two more, as a store's steps do with tools only held-out traces call: one
    /// sorts before every other, so every tool's number moves.
    fn session_over(
        traces: &[Vec<&str>],
        layout: Layout,
    ) -> (tokio::runtime::Runtime, SessionContext) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let scratch = Arc::new(match layout.slice_steps {
            Some(steps) => Scratch::with_slice_steps(steps).expect("a scratch folder"),
            None => Scratch::new().expect("a scratch folder"),
        });
        let context = SessionContext::new_with_config(
            scratch.install(crate::engine::datafusion::embedded_config(2)),
        );
        context
            .register_table(steps::TABLE, Arc::new(steps_table(traces, layout.indexes)))
            .expect("registered");
        let tools = runtime
            .block_on(context.sql(&format!(
                "SELECT {tool} FROM {table} UNION ALL SELECT column1 AS {tool} FROM (VALUES ('0-held-out'), ('zz-held-out'))",
                tool = steps::TOOL_NAME,
                table = steps::TABLE,
            )))
            .expect("a view");
        context
            .register_table(STORE_TOOLS, tools.into_view())
            .expect("registered");
        (runtime, context)
    }

    /// Count `traces` with `query`; then, when `located` is given, find those patterns'
    /// occurrences (the first `chosen` sampled with `cap`).
    fn counted_and_found(
        traces: &[Vec<&str>],
        layout: Layout,
        query: &CountingQuery,
        wanted: &Wanted<'_>,
    ) -> (Vec<CountedPattern>, Option<Located>) {
        let (runtime, context) = session_over(traces, layout);
        runtime.block_on(async {
            let mut counted = frequent_rows(&context, steps::TABLE, STORE_TOOLS, query)
                .await
                .expect("counted");
            let found = if wanted.located.is_empty() {
                None
            } else {
                register_trace_days(&context, steps::TABLE)
                    .await
                    .expect("days");
                Some(
                    located_occurrences(&context, &counted.tool_names, wanted)
                        .await
                        .expect("found"),
                )
            };
            release(&context);
            counted.rows.sort();
            (counted.rows, found)
        })
    }

    /// The rows counted in `traces`, the same whichever way their steps are indexed and
    /// sliced.
    fn counted(traces: &[Vec<&str>], query: &CountingQuery) -> Vec<CountedPattern> {
        let nothing = Wanted {
            located: &[],
            chosen: 0,
            cap: None,
        };
        let mut layouts = layouts().into_iter();
        let first = layouts.next().expect("a layout");
        let rows = counted_and_found(traces, first, query, &nothing).0;
        for layout in layouts {
            assert_eq!(
                counted_and_found(traces, layout, query, &nothing).0,
                rows,
                "slices of {:?} steps",
                layout.slice_steps
            );
        }
        rows
    }

    /// The tools numbered and the steps of the session's store registered as numbered steps.
    async fn number_steps(context: &SessionContext) -> Numbering {
        register_tool_ids(context, steps::TABLE)
            .await
            .expect("tool ids");
        register_numbered(context, steps::TABLE)
            .await
            .expect("numbered")
    }

    /// How `traces` indexed by `indexes` are numbered.
    fn numbering(traces: &[Vec<&str>], indexes: fn(usize, usize) -> u32) -> Numbering {
        let (runtime, context) = session_over(traces, Layout::whole(indexes));
        runtime.block_on(async {
            let numbering = number_steps(&context).await;
            release(&context);
            numbering
        })
    }

    #[test]
    fn steps_indexed_from_0_without_a_gap_are_placed_by_index_else_by_rank() {
        let traces: Vec<Vec<&str>> = vec![vec!["a", "b", "c"], vec!["b", "c"], vec!["c"]];
        assert_eq!(numbering(&traces, dense), Numbering::ByIndex);
        assert_eq!(numbering(&traces, spaced), Numbering::ByRank);
        assert_eq!(numbering(&traces, one_skipping), Numbering::ByRank);
        // A trace starting at 1 with no gap is no trace starting at 0.
        assert_eq!(numbering(&traces, |_, i| i as u32 + 1), Numbering::ByRank);
        // The last index possible: its place would be the next trace's first.
        assert_eq!(
            numbering(&traces, |t, i| if t == 2 { u32::MAX } else { i as u32 }),
            Numbering::ByRank
        );
    }

    #[test]
    fn a_consumed_table_leaves_the_scratch_folder_slice_by_slice() {
        let traces: Vec<Vec<&str>> = vec![vec!["a", "b"], vec!["b", "c"], vec!["c", "a"]];
        let layout = Layout {
            indexes: dense,
            slice_steps: Some(2),
        };
        let (runtime, context) = session_over(&traces, layout);
        let scratch = Scratch::of(&context).expect("a scratch folder");
        // The folders of `copy` left when each slice of `again` is planned.
        let seen: Mutex<Vec<Vec<String>>> = Mutex::new(Vec::new());
        runtime.block_on(async {
            number_steps(&context).await;
            assert_eq!(scratch.slices(), 3);
            materialize_sliced(&context, "copy", None, |name| {
                format!("SELECT pos, tool FROM {}", name(NUMBERED))
            })
            .await
            .expect("copied");
            materialize_sliced(&context, "again", Some("copy"), |name| {
                let left = scratch
                    .listing()
                    .into_keys()
                    .filter(|folder| folder.starts_with("copy_"))
                    .collect();
                seen.lock().expect("seen").push(left);
                format!("SELECT pos, tool FROM {}", name("copy"))
            })
            .await
            .expect("copied again");
            let totals = run(
                &context,
                "SELECT COUNT(*) AS n FROM again_0 UNION ALL SELECT COUNT(*) FROM again_1 UNION ALL SELECT COUNT(*) FROM again_2",
            )
            .await
            .expect("counted");
            let rows: u64 = totals
                .iter()
                .map(|b| {
                    let n = column_as(b, "n", &DataType::Int64).expect("n");
                    n.as_primitive::<Int64Type>().iter().flatten().sum::<i64>() as u64
                })
                .sum();
            assert_eq!(rows, 6, "every step copied twice over");
        });
        let seen = seen.into_inner().expect("seen");
        let slices_left: Vec<Vec<char>> = seen
            .iter()
            .map(|folders| {
                folders
                    .iter()
                    .filter_map(|f| f.strip_prefix("copy_")?.chars().next())
                    .collect()
            })
            .collect();
        assert_eq!(
            slices_left,
            vec![vec!['0', '1', '2'], vec!['1', '2'], vec!['2']],
            "{seen:?}"
        );
        assert!(
            !scratch
                .listing()
                .keys()
                .any(|folder| folder.starts_with("copy_")),
            "every slice of the consumed table is gone"
        );
    }

    #[test]
    fn steps_past_the_slice_size_are_cut_into_slices_of_whole_traces() {
        // 21 steps in 5 traces: slices of 4 steps would be 6, but there are only 5 traces.
        let traces: Vec<Vec<&str>> = vec![
            vec!["a", "b", "c", "a", "b", "c", "d"],
            vec!["a", "b", "c", "d"],
            vec!["b", "c", "d", "a"],
            vec!["x"],
            vec!["d", "a", "b", "c", "d"],
        ];
        for (slice_steps, expected_slices) in [(4, 5), (8, 3), (21, 1), (100, 1)] {
            let layout = Layout {
                indexes: dense,
                slice_steps: Some(slice_steps),
            };
            let (runtime, context) = session_over(&traces, layout);
            let per_slice: Vec<Vec<(i64, i64)>> = runtime.block_on(async {
                number_steps(&context).await;
                let mut per_slice = Vec::new();
                for table in sliced(&context, NUMBERED).expect("slices") {
                    let sql = format!(
                        "SELECT pos / {TRACE_STRIDE} AS trace, COUNT(*) AS steps FROM {table} GROUP BY pos / {TRACE_STRIDE} ORDER BY trace"
                    );
                    let mut rows = Vec::new();
                    for batch in run(&context, &sql).await.expect("per trace") {
                        let trace = column_as(&batch, "trace", &DataType::Int64).expect("trace");
                        let steps = column_as(&batch, "steps", &DataType::Int64).expect("steps");
                        let (trace, steps) = (
                            trace.as_primitive::<Int64Type>(),
                            steps.as_primitive::<Int64Type>(),
                        );
                        rows.extend((0..batch.num_rows()).map(|r| (trace.value(r), steps.value(r))));
                    }
                    per_slice.push(rows);
                }
                assert_eq!(
                    numbered_totals(&context).await.expect("totals"),
                    (21, 5),
                    "the union of the slices is every step"
                );
                release(&context);
                per_slice
            });
            assert_eq!(per_slice.len(), expected_slices, "slices of {slice_steps}");
            // Every trace whole in one slice, in order, each slice holding some.
            let flat: Vec<(i64, i64)> = per_slice.iter().flatten().copied().collect();
            let whole: Vec<(i64, i64)> = traces
                .iter()
                .enumerate()
                .map(|(t, tools)| (t as i64, tools.len() as i64))
                .collect();
            assert_eq!(flat, whole, "slices of {slice_steps}: {per_slice:?}");
            assert!(per_slice.iter().all(|s| !s.is_empty()), "{per_slice:?}");
        }
    }

    #[test]
    fn located_occurrences_are_dated_by_trace_and_sampled_in_storage_order_as_in_process() {
        let traces: Vec<Vec<&str>> = vec![
            vec!["a", "b", "c", "a", "b", "c", "d"],
            vec!["a", "b", "b", "b", "c"],
            vec!["x"],
            vec!["c", "d", "a", "b", "c"],
            vec!["b", "b", "b", "b"],
            vec!["a", "b", "c", "d"],
        ];
        let chosen: Vec<Vec<String>> = [
            &["a", "b", "c"][..],
            &["b", "b"],
            &["a", "b"],
            &["nope", "a"],
        ]
        .iter()
        .map(|p| p.iter().map(|t| t.to_string()).collect())
        .collect();
        // Every start, by brute force, in (trace, place) order.
        let every: Vec<Vec<(u64, u32)>> = chosen
            .iter()
            .map(|pattern| {
                let mut starts = Vec::new();
                for (t, tools) in traces.iter().enumerate() {
                    for (i, window) in tools.windows(pattern.len()).enumerate() {
                        if window.iter().zip(pattern).all(|(a, b)| a == b) {
                            starts.push((t as u64, i as u32));
                        }
                    }
                }
                starts
            })
            .collect();
        assert_eq!(
            every[1].len(),
            5,
            "overlapping runs count: b b b twice, b b b b thrice"
        );
        // Distinct traces by day of their first timed step (trace 2 has none).
        let days = |starts: &[(u64, u32)]| {
            let mut by_day: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
            for &(t, _) in starts {
                let day = match t {
                    2 => continue,
                    3 => "2026-11-05".to_string(),
                    4 => "2026-11-10".to_string(),
                    5 => "1969-12-31".to_string(),
                    t => format!("2026-11-0{}", 1 + t % 3),
                };
                by_day.entry(day).or_default().insert(t);
            }
            by_day
                .into_iter()
                .map(|(day, traces)| (day, traces.len() as u64))
                .collect::<BTreeMap<String, u64>>()
        };
        let query = CountingQuery::new(1, 1, 4);
        for (cap, layout) in [None, Some(1), Some(2), Some(3), Some(100)]
            .into_iter()
            .flat_map(|cap| layouts().into_iter().map(move |layout| (cap, layout)))
        {
            // The last pattern is located (dated) but not chosen.
            let wanted = Wanted {
                located: &chosen,
                chosen: chosen.len() - 1,
                cap,
            };
            let found = counted_and_found(&traces, layout, &query, &wanted)
                .1
                .expect("found");
            assert_eq!(found.chosen.len(), chosen.len() - 1);
            for (pattern, by_day) in found.by_day.iter().enumerate() {
                assert_eq!(*by_day, days(&every[pattern]), "pattern {pattern}");
            }
            for (pattern, (found, every)) in found.chosen.iter().zip(&every).enumerate() {
                assert_eq!(found.support_by_day, days(every), "pattern {pattern}");
                let expected: Vec<(u64, u32)> = match cap {
                    Some(cap) if every.len() > cap => {
                        crate::candidate::even_positions(every.len(), cap)
                            .map(|i| every[i])
                            .collect()
                    }
                    _ => every.clone(),
                };
                assert_eq!(found.sample, expected, "pattern {pattern}, cap {cap:?}");
                assert_eq!(found.total, every.len() as u64, "pattern {pattern}");
            }
        }
    }

    #[test]
    fn kept_tables_are_files_in_the_scratch_folder_each_deleted_once_replaced() {
        let traces: Vec<Vec<&str>> = vec![
            vec!["a", "b", "c", "a", "b", "c", "d"],
            vec!["a", "b", "c", "d"],
            vec!["b", "c", "d", "a"],
        ];
        let query = CountingQuery::new(2, 1, 5);
        let expected = counted(&traces, &query);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let scratch = Arc::new(Scratch::new().expect("a scratch folder"));
        let (during, after_release) = runtime.block_on(async {
            let context = SessionContext::new_with_config(
                scratch.install(crate::engine::datafusion::embedded_config(2)),
            );
            context
                .register_table(steps::TABLE, Arc::new(steps_table(&traces, spaced)))
                .expect("registered");
            let mut rows = frequent_rows(&context, steps::TABLE, steps::TABLE, &query)
                .await
                .expect("counted")
                .rows;
            rows.sort();
            assert_eq!(rows, expected);
            // `numbered` is read from its files: the totals come from them.
            let totals = numbered_totals(&context).await.expect("totals");
            assert_eq!(totals, (15, 4));
            let during = scratch.listing();
            release(&context);
            (during, scratch.listing())
        });
        // Of the levels' occurrences and extensions (one folder per length written), only
        // `numbered` is left once counting is done, as Arrow IPC files.
        let folders: Vec<&String> = during.keys().collect();
        assert_eq!(folders.len(), 1, "{during:?}");
        assert!(folders[0].starts_with("numbered-"), "{during:?}");
        let files = &during[folders[0]];
        assert!(!files.is_empty(), "{during:?}");
        assert!(files.iter().all(|f| f.ends_with(".arrow")), "{during:?}");
        assert!(after_release.is_empty(), "{after_release:?}");
        let folder = scratch.dir.path().to_path_buf();
        drop(scratch);
        assert!(!folder.exists(), "the scratch folder goes with the session");
    }

    #[test]
    fn levels_count_what_brute_force_counts() {
        // Loops, a tool repeated back to back, a one-step trace, a trace with no step (so a
        // slice per trace leaves one slice empty), an empty-ish tail and a pattern that
        // straddles the end of one trace and the start of the next in storage.
        let traces: Vec<Vec<&str>> = vec![
            vec!["a", "b", "c", "a", "b", "c", "d"],
            vec!["a", "b", "b", "b", "c"],
            vec!["x"],
            vec![],
            vec!["c", "d", "a", "b", "c"],
            vec!["b", "c", "d", "x", "a"],
            vec!["a", "b", "c", "d"],
            vec!["d", "a"],
        ];
        for (min_support, min_length, max_length) in [(1, 1, 3), (2, 1, 4), (2, 2, 2), (3, 1, 10)] {
            let query = CountingQuery::new(min_support, min_length, max_length);
            let expected = brute_force(
                &traces,
                u64::from(min_support),
                query.min_length..=query.max_length + 1,
            );
            assert_eq!(
                counted(&traces, &query),
                expected,
                "min_support {min_support}, lengths {min_length}..={max_length}"
            );
        }
    }

    #[test]
    fn gapped_levels_count_what_the_in_process_gapped_miner_counts() {
        let traces = crate::engine::gapped_fixture::traces();
        // Distances joined one by one (gaps 0, 1, 3) and as a window (20 and 40, past
        // `UNROLLED_GAPS`).
        for (gap, min_support, max_length) in
            [(0, 2, 4), (1, 2, 4), (3, 2, 5), (20, 2, 4), (40, 3, 3)]
        {
            let query = CountingQuery::new(min_support, 1, max_length).with_max_gap(Some(gap));
            let expected =
                crate::engine::gapped_fixture::mined(&traces, gap, min_support, 1, max_length);
            assert_eq!(counted(&traces, &query), expected, "gap {gap}");
        }
    }

    #[test]
    fn no_steps_count_nothing() {
        assert!(counted(&[], &CountingQuery::new(1, 1, 3)).is_empty());
    }
}
