//! Embedded counting by extension: each step numbered once, then each level's frequent
//! occurrences extended by the step after them with an integer join.
//!
//! The SQL of [`CountingQuery::level_sql`] recomputes a `LEAD` window over every step at each
//! length and groups by up to `max_length + 1` text columns, which is what a cluster or Spark can
//! run from plain SQL but grows far faster than the data on one machine. Here the plans stay
//! DataFusion's, but the intermediate results live in the session as tables:
//!
//! 1. `numbered`: every step as `(pos, tool)`, where `pos` is the trace's number times 2^32
//!    plus the step's place in the trace (one window, one sort), and `tool` a small integer from
//!    a dictionary of the tool names. The step after `pos` is `pos + 1` exactly when it exists.
//! 2. Level 1: tools counted by distinct trace (`pos / 2^32`), the frequent ones kept.
//! 3. Level n+1: each start position of a frequent n-gram (`occurrences`, with the pattern's
//!    number) joined with `numbered` at `pos + n`, grouped by (pattern, next tool) in two
//!    phases (per trace, then per pattern), the frequent extensions numbered in this process,
//!    and the occurrences of those kept for the next level.
//!
//! Every occurrence of a frequent pattern of length n+1 extends an occurrence of its frequent
//! prefix, so nothing is lost; the counts are the ones [`CountingQuery::level_sql`] gives.

use std::sync::Arc;

use chainweaver_recorder::model::dataset::steps;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringBuilder, UInt32Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, UInt32Type};
use datafusion::datasource::MemTable;
use datafusion::prelude::SessionContext;

use super::sql::{CountedPattern, CountingQuery};

/// `pos / TRACE_STRIDE` is a step's trace; steps of one trace are consecutive below it.
const TRACE_STRIDE: i64 = 1 << 32;

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

/// The frequent patterns of every length from `min_length` to `max_length + 1` among the steps
/// of `relation` (columns `trace_id`, `step_index`, `tool_name`), as
/// [`CountingQuery::frequent_sql`] defines them.
pub(super) async fn frequent_rows(
    context: &SessionContext,
    relation: &str,
    query: &CountingQuery,
) -> Result<Vec<CountedPattern>, String> {
    let tool_names = register_tool_ids(context, relation).await?;
    if tool_names.is_empty() {
        return Ok(Vec::new());
    }
    register_numbered(context, relation).await?;

    // Level 1: the tools themselves. `patterns[i]` spells pattern `i` of the current level as
    // tool numbers.
    let mut level = count_level(context, NUMBERED, false, query.min_support).await?;
    let mut patterns: Vec<Vec<u32>> = level.iter().map(|e| vec![e.tool]).collect();
    let mut rows = Vec::new();
    let mut length = 1;
    loop {
        if length >= query.min_length {
            for (extension, tools) in level.iter().zip(&patterns) {
                rows.push(CountedPattern {
                    tools: spell(tools, &tool_names)?,
                    support: extension.support,
                    occurrences: extension.occurrences,
                });
            }
        }
        if level.is_empty() || length > query.max_length {
            break;
        }
        keep_occurrences(context, &level, length).await?;
        extend_occurrences(context, length).await?;
        let next = count_level(context, EXTENDED, true, query.min_support).await?;
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
    for table in [NUMBERED, TOOL_IDS, OCCURRENCES, EXTENDED, FREQUENT] {
        let _ = context.deregister_table(table);
    }
    Ok(rows)
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

/// Register `numbered (pos, tool)`: every step of `relation` by its trace's number and its
/// place in the trace, with its tool's number.
async fn register_numbered(context: &SessionContext, relation: &str) -> Result<(), String> {
    let sql = format!(
        "WITH traces AS (
  SELECT {id}, CAST(ROW_NUMBER() OVER (ORDER BY {id}) AS BIGINT) AS trace_no
  FROM (SELECT DISTINCT {id} FROM {relation}) d
)
SELECT t.trace_no * {TRACE_STRIDE}
    + CAST(ROW_NUMBER() OVER (PARTITION BY s.{id} ORDER BY s.{index}) AS BIGINT) AS pos,
  n.tool
FROM {relation} s
JOIN traces t ON s.{id} = t.{id}
JOIN {TOOL_IDS} n ON s.{tool} = n.{tool}",
        id = steps::TRACE_ID,
        index = steps::STEP_INDEX,
        tool = steps::TOOL_NAME,
    );
    materialize(context, &sql, NUMBERED).await
}

/// The frequent patterns of one level in `table` (`pos`, `tool`, and when `extends` the
/// `prefix` pattern extended), numbered by (prefix, tool): pattern `i` of the level is the
/// `i`-th.
async fn count_level(
    context: &SessionContext,
    table: &str,
    extends: bool,
    min_support: u32,
) -> Result<Vec<Extension>, String> {
    let keys = if extends { "prefix, tool" } else { "tool" };
    let sql = format!(
        "SELECT {keys}, COUNT(*) AS support, SUM(n) AS occurrences
FROM (SELECT {keys}, pos / {TRACE_STRIDE} AS trace, COUNT(*) AS n FROM {table} GROUP BY {keys}, pos / {TRACE_STRIDE}) per_trace
GROUP BY {keys}
HAVING COUNT(*) >= {min_support}"
    );
    let mut level = Vec::new();
    for batch in run(context, &sql).await? {
        let u32s = |name: &str| -> Result<UInt32Array, String> {
            let column = batch
                .column_by_name(name)
                .ok_or_else(|| format!("no column {name}"))?;
            let column = cast(column, &DataType::UInt32).map_err(|e| e.to_string())?;
            Ok(column.as_primitive::<UInt32Type>().clone())
        };
        let i64s = |name: &str| -> Result<ArrayRef, String> {
            let column = batch
                .column_by_name(name)
                .ok_or_else(|| format!("no column {name}"))?;
            cast(column, &DataType::Int64).map_err(|e| e.to_string())
        };
        let tools = u32s("tool")?;
        let prefixes = extends.then(|| u32s("prefix")).transpose()?;
        let (support, occurrences) = (i64s("support")?, i64s("occurrences")?);
        let (support, occurrences) = (
            support.as_primitive::<Int64Type>(),
            occurrences.as_primitive::<Int64Type>(),
        );
        for row in 0..batch.num_rows() {
            level.push(Extension {
                prefix: prefixes.as_ref().map(|p| p.value(row)),
                tool: tools.value(row),
                support: u64::try_from(support.value(row)).unwrap_or(0),
                occurrences: u64::try_from(occurrences.value(row)).unwrap_or(0),
            });
        }
    }
    // A stable numbering, whatever order the partitions finished in.
    level.sort_by_key(|e| (e.prefix, e.tool));
    Ok(level)
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
    let sql = if length == 1 {
        format!("SELECT o.pos, f.pattern FROM {NUMBERED} o JOIN {FREQUENT} f ON o.tool = f.tool")
    } else {
        format!(
            "SELECT o.pos, f.pattern FROM {EXTENDED} o
JOIN {FREQUENT} f ON o.prefix = f.prefix AND o.tool = f.tool"
        )
    };
    let _ = context.deregister_table(OCCURRENCES);
    materialize(context, &sql, OCCURRENCES).await?;
    let _ = context.deregister_table(EXTENDED);
    Ok(())
}

/// Replace `extended (pos, prefix, tool)` with each kept occurrence of `length` tools and the
/// tool of the step after it, where its trace has one.
async fn extend_occurrences(context: &SessionContext, length: usize) -> Result<(), String> {
    let sql = format!(
        "SELECT o.pos, o.pattern AS prefix, n.tool
FROM {OCCURRENCES} o JOIN {NUMBERED} n ON n.pos = o.pos + {length}"
    );
    materialize(context, &sql, EXTENDED).await?;
    let _ = context.deregister_table(OCCURRENCES);
    Ok(())
}

/// Run `sql` and keep its result in the session as `name`, in the partitions it came in.
async fn materialize(context: &SessionContext, sql: &str, name: &str) -> Result<(), String> {
    let frame = context.sql(sql).await.map_err(|e| e.to_string())?;
    let schema = frame.schema().inner().clone();
    let partitions = frame
        .collect_partitioned()
        .await
        .map_err(|e| e.to_string())?;
    register(context, name, schema, partitions)
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

    /// The traces as a `steps` table, rows shuffled and step indexes spaced out, so the
    /// numbering must come from the order of `step_index` and not from the rows' order.
    fn steps_table(traces: &[Vec<&str>]) -> MemTable {
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
        let third = rows.len() / 3;
        rows.rotate_left(third);
        let schema = crate::engine::datafusion::stream_schema();
        let (mut ids, mut tools) = (StringBuilder::new(), StringBuilder::new());
        let mut indexes = Vec::new();
        for (id, index, tool) in &rows {
            ids.append_value(id);
            indexes.push(*index);
            tools.append_value(tool);
        }
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(ids.finish()) as ArrayRef,
                Arc::new(UInt32Array::from(indexes)),
                Arc::new(tools.finish()),
            ],
        )
        .expect("a batch of three columns");
        MemTable::try_new(schema, vec![vec![batch]]).expect("a table")
    }

    fn counted(traces: &[Vec<&str>], query: &CountingQuery) -> Vec<CountedPattern> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let context = SessionContext::new_with_config(
                datafusion::prelude::SessionConfig::new().with_target_partitions(2),
            );
            context
                .register_table(steps::TABLE, Arc::new(steps_table(traces)))
                .expect("registered");
            let mut rows = frequent_rows(&context, steps::TABLE, query)
                .await
                .expect("counted");
            rows.sort();
            rows
        })
    }

    #[test]
    fn levels_count_what_brute_force_counts() {
        // Loops, a tool repeated back to back, a one-step trace, an empty-ish tail and a
        // pattern that straddles the end of one trace and the start of the next in storage.
        let traces: Vec<Vec<&str>> = vec![
            vec!["a", "b", "c", "a", "b", "c", "d"],
            vec!["a", "b", "b", "b", "c"],
            vec!["x"],
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
    fn no_steps_count_nothing() {
        assert!(counted(&[], &CountingQuery::new(1, 1, 3)).is_empty());
    }
}
