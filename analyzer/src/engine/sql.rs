//! The counting query: frequent contiguous patterns of a `steps` relation, in SQL that
//! DataFusion, DuckDB and Spark SQL run unchanged.
//!
//! Every trace contributes its n-grams independently (`LEAD` over the trace's steps in
//! `step_index` order), and one `GROUP BY` a length sums them: support is the number of
//! distinct traces, occurrences the number of (possibly overlapping) start positions, exactly
//! what [`spm::contiguous`](crate::spm::contiguous) counts. A pattern is closed when no
//! one-item extension to the left or right has the same support, so lengths up to one past the
//! longest reported are counted, and closedness is decided from the counts of the next length:
//! in SQL ([`CountingQuery::closed_sql`]) or in-process over the frequent rows
//! ([`closed_patterns`]).
//!
//! Only portable SQL is used: CTEs, `LEAD` with an inline window, `GROUP BY`/`HAVING`,
//! `COUNT(DISTINCT ...)`, `LEFT JOIN`, `UNION ALL` and `CAST(NULL AS STRING)`. Tool names stay
//! text columns, `tool_0` .. `tool_{n-1}`, padded with nulls past a pattern's length, so no
//! separator can collide with a tool's name.

use std::collections::HashMap;
use std::fmt::Write as _;

use chainweaver_recorder::model::dataset::steps;

/// Which patterns the counting query reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountingQuery {
    /// Distinct traces a pattern must occur in (at least 1).
    pub min_support: u32,
    /// Shortest pattern reported (at least 1).
    pub min_length: usize,
    /// Longest pattern reported (at least `min_length`).
    pub max_length: usize,
    /// Gapped counting: at most this many other steps between two consecutive tools of a
    /// pattern, closedness by subsequence and occurrences reported as the support (as the
    /// in-process miner's `--max-gap`). The engines count it level by level (a cluster with
    /// [`CountingQuery::gapped_level_sql`]); the one-query SQL of this module is contiguous.
    pub max_gap: Option<u32>,
}

/// One row of the counting query's result.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CountedPattern {
    pub tools: Vec<String>,
    /// Distinct traces containing it.
    pub support: u64,
    /// Start positions, overlapping ones included.
    pub occurrences: u64,
}

/// The name of the result column holding a pattern's `i`-th tool.
pub fn tool_column(i: usize) -> String {
    format!("tool_{i}")
}

impl CountingQuery {
    pub fn new(min_support: u32, min_length: usize, max_length: usize) -> Self {
        let min_length = min_length.max(1);
        Self {
            min_support: min_support.max(1),
            min_length,
            max_length: max_length.max(min_length),
            max_gap: None,
        }
    }

    /// This query counting gapped patterns (see [`CountingQuery::max_gap`]).
    pub fn with_max_gap(self, max_gap: Option<u32>) -> Self {
        Self { max_gap, ..self }
    }

    /// Result columns: `length`, `support`, `occurrences`, then one per tool position.
    pub fn columns(&self) -> usize {
        3 + self.max_length + 1
    }

    /// The frequent patterns of every length from `min_length` to `max_length + 1` (the extra
    /// length decides closedness), unfiltered: for [`closed_patterns`].
    pub fn frequent_sql(&self) -> String {
        let mut sql = self.ctes();
        sql.push_str(&self.union("counted", self.max_length + 1, "frequent"));
        sql
    }

    /// Every frequent pattern of length `min_length..=max_length`, closed or not, with its
    /// support and occurrences: what the sequential pattern mining literature counts (from
    /// length 1).
    pub fn all_frequent_sql(&self) -> String {
        let mut sql = self.ctes();
        sql.push_str(&self.union("counted", self.max_length, "frequent"));
        sql
    }

    /// The query for the patterns `reported` asks for: [`closed_sql`](Self::closed_sql) or
    /// [`all_frequent_sql`](Self::all_frequent_sql).
    pub fn reported_sql(&self, reported: Reported) -> String {
        match reported {
            Reported::Closed => self.closed_sql(),
            Reported::AllFrequent => self.all_frequent_sql(),
        }
    }

    /// The closed patterns of length `min_length..=max_length` with their support and
    /// occurrences: what `chainweaver mine` stores as its patterns.
    pub fn closed_sql(&self) -> String {
        let mut sql = self.ctes();
        for length in self.min_length..=self.max_length {
            let next = length + 1;
            // Anti-joins: no extension of the next length by one item on the right
            // (`r`, sharing this pattern as its prefix) or on the left (`l`, as its suffix)
            // has the same support.
            let _ = writeln!(
                sql,
                ", closed_{length} AS (\n  SELECT c.* FROM counted_{length} c"
            );
            for (alias, shift) in [("r", 0), ("l", 1)] {
                let on: Vec<String> = (0..length)
                    .map(|i| format!("{alias}.{} = c.{}", tool_column(i + shift), tool_column(i)))
                    .collect();
                let _ = writeln!(
                    sql,
                    "  LEFT JOIN counted_{next} {alias} ON {} AND {alias}.support = c.support",
                    on.join(" AND ")
                );
            }
            sql.push_str("  WHERE r.support IS NULL AND l.support IS NULL\n)\n");
        }
        sql.push_str(&self.union("closed", self.max_length, "closed"));
        sql
    }

    /// The patterns of exactly `length` tools that occur in at least `min_support` traces, level
    /// by level: with `previous` (a relation of the frequent patterns one shorter, columns
    /// `tool_0 ..`), only the n-grams whose prefix and suffix are both in it are counted, which
    /// loses nothing (a pattern's support is at most its prefix's and its suffix's) and keeps
    /// the long, rare n-grams that make up most of a large log out of the group-by. Columns:
    /// `tool_0 ..`, `support`, `occurrences`.
    ///
    /// Both counts are of distinct things (traces; trace and step), not of rows, so rows read
    /// twice do not change them. A Ballista job that lost an executor can read a stage's output
    /// twice after resubmitting a running stage (seen on tau-bench retail with an executor
    /// killed: counting rows gave 105 occurrences for a pattern the traces hold 84 times).
    pub fn level_sql(&self, length: usize, previous: Option<&str>) -> String {
        self.level_sql_over(steps::TABLE, length, previous)
    }

    /// [`level_sql`](Self::level_sql) over `relation` (a table name, or a parenthesized
    /// subquery with an alias) instead of `steps`.
    pub fn level_sql_over(&self, relation: &str, length: usize, previous: Option<&str>) -> String {
        let length = length.max(1);
        let keys: Vec<String> = (0..length).map(tool_column).collect();
        let mut sql = grams_cte_over(relation, length);
        let selected: Vec<String> = keys.iter().map(|k| format!("g.{k}")).collect();
        let _ = write!(
            sql,
            ", kept AS (\n  SELECT g.{id}, g.{index}, {}\n  FROM grams g",
            selected.join(", "),
            id = steps::TRACE_ID,
            index = steps::STEP_INDEX,
        );
        if let Some(previous) = previous.filter(|_| length > 1) {
            for (alias, shift) in [("p", 0), ("s", 1)] {
                let on: Vec<String> = (0..length - 1)
                    .map(|i| format!("{alias}.{} = g.{}", tool_column(i), tool_column(i + shift)))
                    .collect();
                let _ = write!(sql, "\n  JOIN {previous} {alias} ON {}", on.join(" AND "));
            }
        }
        let _ = writeln!(
            sql,
            "\n  WHERE g.{} IS NOT NULL\n)",
            tool_column(length - 1)
        );
        // A step index is an integer, so the last `#` ends the trace id.
        let _ = writeln!(
            sql,
            "SELECT {keys}, COUNT(DISTINCT {id}) AS support, \
             COUNT(DISTINCT CONCAT({id}, '#', CAST({index} AS VARCHAR))) AS occurrences\n\
             FROM kept GROUP BY {keys}\nHAVING COUNT(DISTINCT {id}) >= {min}",
            keys = keys.join(", "),
            id = steps::TRACE_ID,
            index = steps::STEP_INDEX,
            min = self.min_support
        );
        sql
    }

    /// Gapped counting on a cluster, which keeps no table between queries of its own: each
    /// trace's steps numbered (`trace_id`, `pos`, `tool`), for the cluster to write out once
    /// and the levels to read ([`gapped_level_sql`](Self::gapped_level_sql)).
    pub fn numbered_sql(relation: &str) -> String {
        format!(
            "SELECT {id}, CAST(ROW_NUMBER() OVER (PARTITION BY {id} ORDER BY {index}) AS BIGINT) AS pos, {tool} AS tool FROM {relation}",
            id = steps::TRACE_ID,
            index = steps::STEP_INDEX,
            tool = steps::TOOL_NAME,
        )
    }

    /// The frequent gapped patterns of `length` tools (at most `gap` other steps between two
    /// of them), or, as `kept` says, where each of them ends, from `numbered`
    /// ([`numbered_sql`](Self::numbered_sql)) and, past length 1, `ends`: where each frequent
    /// pattern one tool shorter ends (`trace_id`, `pos`, `tool_0 ..`).
    ///
    /// A pattern's ends are the steps at most `gap + 1` places after an end of its prefix that
    /// hold its last tool, each end once however many ways reach it, as the embedded levels
    /// keep them. Counted, the extension is also kept to those whose suffix is among
    /// `shorter` (the frequent patterns one tool shorter), which loses nothing: dropping an
    /// occurrence's first step leaves an occurrence of the suffix. As ends, only the frequent
    /// patterns of this length (`frequent`) are kept. Occurrences are reported as the support,
    /// as the in-process gapped miner counts them. Columns counted: `tool_0 ..`, `support`,
    /// `occurrences`; as ends: `trace_id`, `pos`, `tool_0 ..`.
    pub fn gapped_level_sql(
        &self,
        numbered: &str,
        ends: &str,
        length: usize,
        gap: u32,
        kept: GappedKept<'_>,
    ) -> String {
        let length = length.max(1);
        let id = steps::TRACE_ID;
        let last = tool_column(length - 1);
        // What an end row holds, where the extension reads from, and its trace.
        let (ends_select, from, trace) = if length == 1 {
            (
                vec![
                    format!("n.{id}"),
                    "n.pos".into(),
                    format!("n.tool AS {last}"),
                ],
                format!("{numbered} n"),
                format!("n.{id}"),
            )
        } else {
            let mut select = vec![format!("e.{id}"), "n.pos".into()];
            select.extend((0..length - 1).map(|i| format!("e.{}", tool_column(i))));
            select.push(format!("n.tool AS {last}"));
            let reach = u64::from(gap) + 1;
            (
                select,
                format!(
                    "{ends} e JOIN {numbered} n ON n.{id} = e.{id} AND n.pos > e.pos AND n.pos <= e.pos + {reach}"
                ),
                format!("e.{id}"),
            )
        };
        // The tool at place `i` of the extended pattern.
        let tool_at = |i: usize| {
            if i + 1 == length {
                "n.tool".to_string()
            } else {
                format!("e.{}", tool_column(i))
            }
        };
        let mut sql = String::new();
        match kept {
            GappedKept::Ends { frequent } => {
                let on: Vec<String> = (0..length)
                    .map(|i| format!("f.{} = {}", tool_column(i), tool_at(i)))
                    .collect();
                let _ = write!(
                    sql,
                    "SELECT DISTINCT {} FROM {from} JOIN {frequent} f ON {}",
                    ends_select.join(", "),
                    on.join(" AND ")
                );
            }
            GappedKept::Counted { shorter } => {
                let select: Vec<String> = (0..length)
                    .map(|i| format!("{} AS {}", tool_at(i), tool_column(i)))
                    .collect();
                let _ = write!(
                    sql,
                    "SELECT {}, COUNT(DISTINCT {trace}) AS support, COUNT(DISTINCT {trace}) AS occurrences FROM {from}",
                    select.join(", ")
                );
                if let Some(shorter) = shorter.filter(|_| length > 1) {
                    let on: Vec<String> = (1..length)
                        .map(|i| format!("s.{} = {}", tool_column(i - 1), tool_at(i)))
                        .collect();
                    let _ = write!(sql, " JOIN {shorter} s ON {}", on.join(" AND "));
                }
                let grouped: Vec<String> = (0..length).map(tool_at).collect();
                let _ = write!(
                    sql,
                    " GROUP BY {} HAVING COUNT(DISTINCT {trace}) >= {}",
                    grouped.join(", "),
                    self.min_support
                );
            }
        }
        sql
    }

    /// `SELECT * FROM (...) AS name`: the relations `<prefix>_<n>` for `n` from `min_length` to
    /// `longest`, padded to the result columns and stacked.
    fn union(&self, prefix: &str, longest: usize, name: &str) -> String {
        let lengths: Vec<String> = (self.min_length..=longest)
            .map(|length| self.padded_select(&format!("{prefix}_{length}"), length, "c"))
            .collect();
        format!(
            "SELECT * FROM (\n{}) AS {name}\n",
            lengths.join("UNION ALL\n")
        )
    }

    /// `grams` (each step with the tools of the steps after it) and `counted_<n>` per length.
    fn ctes(&self) -> String {
        let widest = self.max_length + 1;
        let mut sql = grams_cte(widest);
        for length in self.min_length..=widest {
            let keys: Vec<String> = (0..length).map(tool_column).collect();
            let keys = keys.join(", ");
            let _ = writeln!(
                sql,
                ", counted_{length} AS (\n  SELECT {keys}, COUNT(DISTINCT {id}) AS support, COUNT(*) AS occurrences\n  FROM grams WHERE {last} IS NOT NULL\n  GROUP BY {keys}\n  HAVING COUNT(DISTINCT {id}) >= {min}\n)",
                id = steps::TRACE_ID,
                last = tool_column(length - 1),
                min = self.min_support,
            );
        }
        sql
    }

    /// `length, support, occurrences, tool_0 .. tool_max` of a per-length relation.
    fn padded_select(&self, relation: &str, length: usize, alias: &str) -> String {
        let mut select = format!(
            "  SELECT CAST({length} AS BIGINT) AS length, CAST({alias}.support AS BIGINT) AS support, CAST({alias}.occurrences AS BIGINT) AS occurrences"
        );
        for i in 0..=self.max_length {
            if i < length {
                let _ = write!(select, ", {alias}.{}", tool_column(i));
            } else {
                let _ = write!(select, ", CAST(NULL AS STRING) AS {}", tool_column(i));
            }
        }
        let _ = writeln!(select, " FROM {relation} {alias}");
        select
    }
}

/// `WITH grams AS (...)`: each step with the tools of the `widest - 1` steps after it in its
/// trace, as `tool_0 .. tool_{widest-1}` (null past the trace's end).
fn grams_cte(widest: usize) -> String {
    grams_cte_over(steps::TABLE, widest)
}

/// [`grams_cte`] over `relation` instead of `steps`.
fn grams_cte_over(relation: &str, widest: usize) -> String {
    let window = format!(
        "OVER (PARTITION BY {} ORDER BY {})",
        steps::TRACE_ID,
        steps::STEP_INDEX
    );
    let mut sql = format!(
        "WITH grams AS (\n  SELECT {}, {}, {} AS {}",
        steps::TRACE_ID,
        steps::STEP_INDEX,
        steps::TOOL_NAME,
        tool_column(0)
    );
    for i in 1..widest {
        let _ = write!(
            sql,
            ",\n    LEAD({}, {i}) {window} AS {}",
            steps::TOOL_NAME,
            tool_column(i)
        );
    }
    let _ = writeln!(sql, "\n  FROM {relation}\n)");
    sql
}

/// A SQL string literal of `text` (quotes doubled).
pub fn string_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The patterns `rows` (each `length` tools) as an inline relation with columns
/// `tool_0 ..`, parenthesized, for [`CountingQuery::level_sql`]'s `previous` where the engine
/// cannot read a table held in the client's memory (a cluster).
pub fn patterns_relation(rows: &[Vec<String>], length: usize) -> String {
    let columns: Vec<String> = (0..length)
        .map(|i| format!("column{} AS {}", i + 1, tool_column(i)))
        .collect();
    let values: Vec<String> = rows
        .iter()
        .map(|tools| {
            let literals: Vec<String> = tools.iter().map(|t| string_literal(t)).collect();
            format!("({})", literals.join(", "))
        })
        .collect();
    format!(
        "(SELECT {} FROM (VALUES {}) AS v)",
        columns.join(", "),
        values.join(", ")
    )
}

/// What [`CountingQuery::gapped_level_sql`] returns.
#[derive(Debug, Clone, Copy)]
pub enum GappedKept<'a> {
    /// The frequent patterns of the length, their suffixes kept to `shorter` (a relation of
    /// the frequent patterns one tool shorter; `None` at length 1).
    Counted { shorter: Option<&'a str> },
    /// Where each pattern of `frequent` (a relation of them) ends.
    Ends { frequent: &'a str },
}

/// Which of the frequent patterns an engine reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reported {
    /// The closed ones: what `mine` stores.
    #[default]
    Closed,
    /// Every frequent one, closed or not: what the pattern mining literature counts.
    AllFrequent,
}

/// The patterns `reported` asks for among the rows of [`CountingQuery::frequent_sql`]: the
/// closed ones ([`closed_patterns`]) or every one of length `min_length..=max_length`. Sorted
/// by tools.
pub fn reported_patterns(
    query: &CountingQuery,
    frequent: Vec<CountedPattern>,
    reported: Reported,
) -> Vec<CountedPattern> {
    match reported {
        Reported::Closed if query.max_gap.is_some() => {
            // Compared as numbers: closedness compares many patterns tool by tool.
            let mut names: Vec<String> = Vec::new();
            let mut numbers: HashMap<String, u32> = HashMap::new();
            let patterns = frequent
                .into_iter()
                .map(|p| {
                    let tools = p
                        .tools
                        .into_iter()
                        .map(|tool| {
                            *numbers.entry(tool).or_insert_with_key(|tool| {
                                names.push(tool.clone());
                                names.len() as u32 - 1
                            })
                        })
                        .collect();
                    (tools, u32::try_from(p.support).unwrap_or(u32::MAX))
                })
                .collect();
            let mut closed: Vec<CountedPattern> = crate::mine::closed_gapped(patterns)
                .into_iter()
                .map(|(tools, support)| CountedPattern {
                    tools: tools.iter().map(|&t| names[t as usize].clone()).collect(),
                    support: u64::from(support),
                    occurrences: u64::from(support),
                })
                .collect();
            closed.sort();
            closed
        }
        Reported::Closed => closed_patterns(query, frequent),
        Reported::AllFrequent => {
            let mut all: Vec<CountedPattern> = frequent
                .into_iter()
                .filter(|p| p.tools.len() <= query.max_length)
                .collect();
            all.sort();
            all
        }
    }
}

/// The closed patterns among the frequent ones of `min_length..=max_length + 1` (the rows of
/// [`CountingQuery::frequent_sql`]): those of length `min_length..=max_length` that no
/// one-item extension with the same support contains. Sorted by tools.
pub fn closed_patterns(
    query: &CountingQuery,
    frequent: Vec<CountedPattern>,
) -> Vec<CountedPattern> {
    // The supports of every extension of each pattern, keyed by the pattern it extends.
    let mut extended: HashMap<&[String], Vec<u64>> = HashMap::new();
    for pattern in frequent.iter().filter(|p| p.tools.len() > query.min_length) {
        let tools = &pattern.tools[..];
        let n = tools.len();
        extended
            .entry(&tools[..n - 1])
            .or_default()
            .push(pattern.support);
        extended
            .entry(&tools[1..])
            .or_default()
            .push(pattern.support);
    }
    let mut closed: Vec<CountedPattern> = frequent
        .iter()
        .filter(|p| (query.min_length..=query.max_length).contains(&p.tools.len()))
        .filter(|p| {
            extended
                .get(&p.tools[..])
                .is_none_or(|supports| !supports.contains(&p.support))
        })
        .cloned()
        .collect();
    closed.sort();
    closed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(tools: &[&str], support: u64, occurrences: u64) -> CountedPattern {
        CountedPattern {
            tools: tools.iter().map(|t| t.to_string()).collect(),
            support,
            occurrences,
        }
    }

    #[test]
    fn an_extension_with_the_same_support_on_either_side_hides_a_pattern() {
        let query = CountingQuery::new(2, 2, 2);
        let frequent = vec![
            pattern(&["a", "b"], 3, 3),
            pattern(&["b", "c"], 4, 4),
            pattern(&["x", "y"], 2, 2),
            // `a b c` hides `a b` (same support 3) but not `b c` (4).
            pattern(&["a", "b", "c"], 3, 3),
            // `w x y` hides `x y` from the left.
            pattern(&["w", "x", "y"], 2, 2),
        ];
        let closed = closed_patterns(&query, frequent);
        assert_eq!(closed, vec![pattern(&["b", "c"], 4, 4)]);
    }

    #[test]
    fn the_query_counts_one_length_past_the_longest_and_pads_with_nulls() {
        let query = CountingQuery::new(3, 2, 3);
        let frequent = query.frequent_sql();
        assert!(frequent.contains("counted_4 AS"), "{frequent}");
        assert!(!frequent.contains("counted_1 AS"), "{frequent}");
        assert!(frequent.contains("LEAD(tool_name, 3)"), "{frequent}");
        assert!(!frequent.contains("LEAD(tool_name, 4)"), "{frequent}");
        assert!(
            frequent.contains("HAVING COUNT(DISTINCT trace_id) >= 3"),
            "{frequent}"
        );
        let closed = query.closed_sql();
        assert!(closed.contains("closed_3 AS"), "{closed}");
        assert!(!closed.contains("closed_4 AS"), "{closed}");
        assert!(
            closed.contains("LEFT JOIN counted_3 l ON l.tool_1 = c.tool_0 AND l.tool_2 = c.tool_1"),
            "{closed}"
        );
        assert_eq!(query.columns(), 7);
    }

    #[test]
    fn a_level_counts_only_what_its_prefix_and_suffix_allow() {
        let query = CountingQuery::new(2, 2, 3);
        let first = query.level_sql(1, None);
        assert!(!first.contains("LEAD"), "{first}");
        assert!(!first.contains("JOIN"), "{first}");
        let third = query.level_sql(3, Some("frequent_2"));
        assert!(third.contains("LEAD(tool_name, 2)"), "{third}");
        assert!(!third.contains("LEAD(tool_name, 3)"), "{third}");
        assert!(
            third.contains("JOIN frequent_2 p ON p.tool_0 = g.tool_0 AND p.tool_1 = g.tool_1"),
            "{third}"
        );
        assert!(
            third.contains("JOIN frequent_2 s ON s.tool_0 = g.tool_1 AND s.tool_1 = g.tool_2"),
            "{third}"
        );
        assert!(
            third.contains("HAVING COUNT(DISTINCT trace_id) >= 2"),
            "{third}"
        );
    }

    #[test]
    fn bounds_are_clamped() {
        assert_eq!(
            CountingQuery::new(0, 0, 0),
            CountingQuery {
                min_support: 1,
                min_length: 1,
                max_length: 1,
                max_gap: None,
            }
        );
    }
}
