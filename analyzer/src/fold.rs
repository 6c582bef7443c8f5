//! Folding: one proposal per behaviour instead of one per window of it.
//!
//! Mining proposes every frequent window of what agents do: a loop over a list becomes one
//! candidate per loop count, a lookup that can start from an email or a zip code becomes two,
//! and every prefix and suffix of a long behaviour that clears the support threshold becomes its
//! own. Folding groups them back, in three moves over the candidates a report would propose
//! (best first):
//!
//! 1. **Loop counts.** Candidates whose tool sequences are equal once back-to-back repeats of a
//!    tool are collapsed are one behaviour; the collapsed step is marked repeated.
//! 2. **First steps.** Behaviours equal but for their first step (with at least two steps
//!    after it) are one behaviour whose first step has alternatives.
//! 3. **Parts.** A behaviour whose shape sits inside a longer one, and whose occurrences in the
//!    traffic lie inside an occurrence of the longer one at least [`FoldConfig::inside_share`]
//!    of the time, is folded into it. One that mostly occurs on its own stays a proposal.
//!
//! Occurrences are counted on the tool sequences alone (no payloads), at the level of runs: a
//! trace `a b b b c` is the runs `a`, `b x3`, `c`. Candidates mined with gaps fold the same
//! way when [`FoldConfig::max_gap`] says the gap they were mined with: their occurrences are
//! then matched call by call with up to that many other calls between two of them, and a part
//! sits inside a longer behaviour as a subsequence of its steps.

use std::collections::{BTreeSet, HashMap, HashSet};

use chainweaver_recorder::model::candidate::{Behaviour, BehaviourVariant, ShapeStep, VariantKind};
use chainweaver_recorder::store::ToolSequences;

/// Folding settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FoldConfig {
    /// A part is folded into a longer behaviour when at least this share of its occurrences lie
    /// inside one of the longer behaviour's (default 0.8).
    pub inside_share: f64,
    /// The gap gapped candidates were mined with (0: none were, and a gapped candidate keeps
    /// a behaviour of its own).
    pub max_gap: usize,
}

impl Default for FoldConfig {
    fn default() -> Self {
        Self {
            inside_share: 0.8,
            max_gap: 0,
        }
    }
}

/// A candidate to fold: its id and tool sequence, in the order proposals are ranked.
#[derive(Debug, Clone, Copy)]
pub struct FoldInput<'a> {
    pub id: &'a str,
    pub tools: &'a [String],
    /// Mined with gaps: folded with [`FoldConfig::max_gap`], or kept as its own behaviour
    /// when that is 0.
    pub gapped: bool,
    /// The step that is a map step (a loop candidate): it stands for a run of calls, and the
    /// candidate leads the behaviour its loop counts fold into.
    pub map_step: Option<usize>,
}

/// A tool sequence with back-to-back repeats collapsed: (tool, times).
pub(crate) fn runs<T: PartialEq + Clone>(items: &[T]) -> Vec<(T, usize)> {
    let mut out: Vec<(T, usize)> = Vec::new();
    for item in items {
        match out.last_mut() {
            Some((last, times)) if last == item => *times += 1,
            _ => out.push((item.clone(), 1)),
        }
    }
    out
}

/// A behaviour being built.
struct Group {
    shape: Vec<ShapeStep>,
    variants: Vec<BehaviourVariant>,
    /// Kept as its own behaviour (gapped, with no gap to fold with).
    gapped: bool,
    /// Led by a loop candidate.
    looped: bool,
}

/// Fold ranked candidates into behaviours, in the order of their best-ranked candidate.
pub fn fold(
    candidates: &[FoldInput<'_>],
    sequences: &ToolSequences,
    config: &FoldConfig,
) -> Vec<Behaviour> {
    let mut groups = loop_groups(candidates, config.max_gap > 0);
    merge_first_steps(&mut groups);
    let runs_of = TraceRuns::with_gap(sequences, config.max_gap);
    fold_parts(&mut groups, &runs_of, config);
    let mut names: HashMap<String, usize> = HashMap::new();
    groups
        .into_iter()
        .map(|group| {
            let traces = runs_of.traces_with(&group.shape);
            let mut name = display_name(&group.shape);
            let seen = names.entry(name.clone()).or_insert(0);
            *seen += 1;
            if *seen > 1 {
                name = format!("{name} ({seen})");
            }
            Behaviour {
                name,
                lead: group.variants[0].candidate_id.clone(),
                shape: group.shape,
                variants: group.variants,
                traces,
            }
        })
        .collect()
}

/// Move 1: candidates with the same collapsed sequence, the best-ranked one leading
/// (`fold_gapped`: gapped candidates fold too).
fn loop_groups(candidates: &[FoldInput<'_>], fold_gapped: bool) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut by_key: HashMap<Vec<String>, usize> = HashMap::new();
    for input in candidates {
        let candidate = &FoldInput {
            gapped: input.gapped && !fold_gapped,
            ..*input
        };
        let collapsed = runs(candidate.tools);
        let key: Vec<String> = collapsed.iter().map(|(tool, _)| tool.clone()).collect();
        let existing = if candidate.gapped {
            None
        } else {
            by_key.get(&key).copied()
        };
        match existing {
            Some(at) => {
                let group = &mut groups[at];
                for (step, (_, times)) in group.shape.iter_mut().zip(&collapsed) {
                    step.repeated |= *times > 1;
                }
                let variant = BehaviourVariant {
                    candidate_id: candidate.id.to_string(),
                    kind: VariantKind::LoopCount,
                    tools: candidate.tools.to_vec(),
                    inside: 1.0,
                };
                let leads_loop = group.variants[0].kind == VariantKind::Lead
                    && !group.looped
                    && candidate.map_step.is_some();
                if leads_loop {
                    // The loop candidate covers every count: it leads, the unrolled lead
                    // becomes one of its loop counts.
                    group.variants[0].kind = VariantKind::LoopCount;
                    group.variants.insert(
                        0,
                        BehaviourVariant {
                            kind: VariantKind::Lead,
                            ..variant
                        },
                    );
                    group.looped = true;
                    if let Some(step) = candidate.map_step.and_then(|s| group.shape.get_mut(s)) {
                        step.repeated = true;
                    }
                } else {
                    group.variants.push(variant);
                }
            }
            None => {
                if !candidate.gapped {
                    by_key.insert(key, groups.len());
                }
                groups.push(Group {
                    shape: collapsed
                        .into_iter()
                        .enumerate()
                        .map(|(s, (tool, times))| ShapeStep {
                            tools: vec![tool],
                            repeated: times > 1 || candidate.map_step == Some(s),
                        })
                        .collect(),
                    looped: candidate.map_step.is_some(),
                    variants: vec![BehaviourVariant {
                        candidate_id: candidate.id.to_string(),
                        kind: VariantKind::Lead,
                        tools: candidate.tools.to_vec(),
                        inside: 1.0,
                    }],
                    gapped: candidate.gapped,
                });
            }
        }
    }
    groups
}

/// Move 2: behaviours equal but for their first step (two or more steps after it).
fn merge_first_steps(groups: &mut Vec<Group>) {
    let mut at = 0;
    while at < groups.len() {
        let mut other = at + 1;
        while other < groups.len() {
            let same_rest = {
                let (a, b) = (&groups[at], &groups[other]);
                !a.gapped
                    && !b.gapped
                    && a.shape.len() >= 3
                    && a.shape.len() == b.shape.len()
                    && a.shape[1..]
                        .iter()
                        .zip(&b.shape[1..])
                        .all(|(x, y)| x.tools == y.tools)
            };
            if same_rest {
                let merged = groups.remove(other);
                let group = &mut groups[at];
                for (step, other_step) in group.shape.iter_mut().zip(&merged.shape) {
                    step.repeated |= other_step.repeated;
                }
                for tool in merged.shape[0].tools.iter() {
                    if !group.shape[0].tools.contains(tool) {
                        group.shape[0].tools.push(tool.clone());
                    }
                }
                group
                    .variants
                    .extend(merged.variants.into_iter().map(|mut variant| {
                        variant.kind = VariantKind::FirstStep;
                        variant
                    }));
            } else {
                other += 1;
            }
        }
        at += 1;
    }
}

/// Move 3: fold each behaviour that mostly occurs inside a longer one into it, shortest first
/// so a part of a part ends up in the longest behaviour holding it.
fn fold_parts(groups: &mut Vec<Group>, runs_of: &TraceRuns<'_>, config: &FoldConfig) {
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&g| groups[g].shape.len());
    let mut parent: Vec<Option<(usize, f64)>> = vec![None; groups.len()];
    for &small in &order {
        if groups[small].gapped {
            continue;
        }
        let mut best: Option<(usize, f64)> = None;
        for big in 0..groups.len() {
            let longer = groups[big].shape.len() > groups[small].shape.len();
            if big == small || groups[big].gapped || !longer {
                continue;
            }
            if !contains_shape(&groups[big].shape, &groups[small].shape, runs_of.max_gap) {
                continue;
            }
            let share = runs_of.inside_share(&groups[small].shape, &groups[big].shape);
            if share >= config.inside_share && best.is_none_or(|(_, b)| share > b) {
                best = Some((big, share));
            }
        }
        parent[small] = best;
    }
    // Follow each chain to its root, then move the parts over, keeping the rank order.
    let root = |mut g: usize| {
        let mut share = 1.0;
        while let Some((p, s)) = parent[g] {
            share = f64::min(share, s);
            g = p;
        }
        (g, share)
    };
    let roots: Vec<(usize, f64)> = (0..groups.len()).map(root).collect();
    let mut taken: Vec<Vec<BehaviourVariant>> = vec![Vec::new(); groups.len()];
    for (g, &(r, share)) in roots.iter().enumerate() {
        if r != g {
            let moved = std::mem::take(&mut groups[g].variants);
            taken[r].extend(moved.into_iter().map(|mut variant| {
                variant.kind = VariantKind::Part;
                variant.inside = share;
                variant
            }));
        }
    }
    for (group, parts) in groups.iter_mut().zip(taken) {
        group.variants.extend(parts);
    }
    groups.retain(|group| !group.variants.is_empty());
}

/// True when `small`'s steps appear in `big` in order, with at most `max_gap` of `big`'s
/// steps between two of them (0: a contiguous run of steps), each of `small`'s tools allowed
/// where `big` allows it.
fn contains_shape(big: &[ShapeStep], small: &[ShapeStep], max_gap: usize) -> bool {
    fn fits(b: &ShapeStep, s: &ShapeStep) -> bool {
        s.tools.iter().all(|tool| b.tools.contains(tool))
    }
    fn rest(big: &[ShapeStep], small: &[ShapeStep], from: usize, max_gap: usize) -> bool {
        let Some((first, others)) = small.split_first() else {
            return true;
        };
        (from..big.len().min(from + 1 + max_gap))
            .any(|b| fits(&big[b], first) && rest(big, others, b + 1, max_gap))
    }
    let Some((first, others)) = small.split_first() else {
        return true;
    };
    (0..big.len()).any(|b| fits(&big[b], first) && rest(big, others, b + 1, max_gap))
}

/// A behaviour's display name: its steps (the first and last when there are more than three),
/// `each` before a repeated one; an interchangeable first step shows its first-ranked tool.
fn display_name(shape: &[ShapeStep]) -> String {
    let word = |step: &ShapeStep| {
        let tool = step.tools.first().map_or("?", String::as_str);
        if step.repeated {
            format!("each {tool}")
        } else {
            tool.to_string()
        }
    };
    let words: Vec<String> = if shape.len() > 3 {
        vec![word(&shape[0]), "...".into(), word(&shape[shape.len() - 1])]
    } else {
        shape.iter().map(word).collect()
    };
    words.join(" -> ")
}

/// Every trace's tool runs, for counting behaviour occurrences.
pub struct TraceRuns<'a> {
    sequences: &'a ToolSequences,
    /// Per trace: (tool, first position, length) of each run.
    runs: Vec<Vec<(u32, usize, usize)>>,
    /// Other calls allowed between two calls of an occurrence (0: runs back to back).
    max_gap: usize,
}

/// One occurrence of a shape in a trace.
struct Found {
    /// Where it starts and ends, comparable between occurrences of one trace (runs when
    /// contiguous, calls when gapped), both ends included.
    span: (usize, usize),
    /// The positions of its calls.
    calls: Vec<usize>,
}

type IndexedShape = Vec<(BTreeSet<u32>, bool)>;

impl<'a> TraceRuns<'a> {
    /// Occurrences back to back.
    pub fn new(sequences: &'a ToolSequences) -> Self {
        Self::with_gap(sequences, 0)
    }

    /// Occurrences with up to `max_gap` other calls between two of their calls.
    pub fn with_gap(sequences: &'a ToolSequences, max_gap: usize) -> Self {
        let runs = sequences
            .sequences
            .iter()
            .map(|sequence| {
                let mut out: Vec<(u32, usize, usize)> = Vec::new();
                for (position, &tool) in sequence.iter().enumerate() {
                    match out.last_mut() {
                        Some((last, _, len)) if *last == tool => *len += 1,
                        _ => out.push((tool, position, 1)),
                    }
                }
                out
            })
            .collect();
        Self {
            sequences,
            runs,
            max_gap,
        }
    }

    /// The shape with tool names turned into the sequences' tool indexes (`None`: a tool the
    /// traces never call).
    fn indexed(&self, shape: &[ShapeStep]) -> Option<IndexedShape> {
        shape
            .iter()
            .map(|step| {
                let tools: BTreeSet<u32> = step
                    .tools
                    .iter()
                    .filter_map(|tool| {
                        self.sequences
                            .names
                            .iter()
                            .position(|name| name == tool)
                            .map(|i| i as u32)
                    })
                    .collect();
                (!tools.is_empty()).then_some((tools, step.repeated))
            })
            .collect()
    }

    fn occurrences(&self, t: usize, shape: &IndexedShape) -> Vec<Found> {
        if self.max_gap == 0 {
            self.run_occurrences(t, shape)
        } else {
            self.gapped_occurrences(t, shape)
        }
    }

    /// Occurrences of `shape` in trace `t`, run by run.
    ///
    /// A repeated step takes a whole run; a step that is not repeated takes one call, so it
    /// must be a run of one call unless it is the first step (the last call of a longer run)
    /// or the last step (the first call of one).
    fn run_occurrences(&self, t: usize, shape: &IndexedShape) -> Vec<Found> {
        let runs = &self.runs[t];
        let mut found = Vec::new();
        if shape.is_empty() || runs.len() < shape.len() {
            return found;
        }
        let last = shape.len() - 1;
        for first in 0..=runs.len() - shape.len() {
            let mut calls = 0;
            let mut start = 0;
            let matched = shape.iter().enumerate().all(|(k, (tools, repeated))| {
                let (tool, position, len) = runs[first + k];
                if !tools.contains(&tool) {
                    return false;
                }
                let (from, taken) = if *repeated {
                    (position, len)
                } else if k == 0 {
                    (position + len - 1, 1)
                } else if k == last || len == 1 {
                    (position, 1)
                } else {
                    return false;
                };
                if k == 0 {
                    start = from;
                }
                calls += taken;
                true
            });
            if matched {
                found.push(Found {
                    span: (first, first + last),
                    calls: (start..start + calls).collect(),
                });
            }
        }
        found
    }

    /// Occurrences of `shape` in trace `t`, call by call with gaps, leftmost first and not
    /// overlapping: each next call is the first of its step's tools within reach from which
    /// the rest of the shape can still be matched, and a repeated step takes another call of
    /// its tools while one comes within reach before the next step's do.
    fn gapped_occurrences(&self, t: usize, shape: &IndexedShape) -> Vec<Found> {
        let sequence = &self.sequences.sequences[t];
        let mut found = Vec::new();
        let Some((first_tools, _)) = shape.first() else {
            return found;
        };
        // (step, call) pairs known to lead to no occurrence. What follows a step's call is
        // decided by the two alone, so this holds for every start and keeps the search linear.
        let mut dead: HashSet<(usize, usize)> = HashSet::new();
        let mut at = 0;
        while at < sequence.len() {
            if !first_tools.contains(&sequence[at]) {
                at += 1;
                continue;
            }
            let mut calls = Vec::new();
            if self.gapped_from(sequence, shape, (0, at), &mut calls, &mut dead) {
                let last = calls.last().copied().unwrap_or(at);
                found.push(Found {
                    span: (at, last),
                    calls,
                });
                at = last + 1;
            } else {
                at += 1;
            }
        }
        found
    }

    /// Match `shape` from its step `k` taking call `i` on: push the occurrence's calls from
    /// there onto `calls` and say true, or leave `calls` as it was and say false.
    fn gapped_from(
        &self,
        sequence: &[u32],
        shape: &IndexedShape,
        (k, i): (usize, usize),
        calls: &mut Vec<usize>,
        dead: &mut HashSet<(usize, usize)>,
    ) -> bool {
        if dead.contains(&(k, i)) {
            return false;
        }
        let reach = |from: usize| from + 1..(from + 2 + self.max_gap).min(sequence.len());
        let Some((tools, repeated)) = shape.get(k) else {
            return false;
        };
        let mark = calls.len();
        calls.push(i);
        let mut last = i;
        let next = shape.get(k + 1).map(|(next, _)| next);
        if *repeated {
            let ends = |tool: &u32| next.is_some_and(|n| n.contains(tool));
            while let Some(j) =
                reach(last).find(|&j| tools.contains(&sequence[j]) || ends(&sequence[j]))
            {
                if ends(&sequence[j]) {
                    break;
                }
                calls.push(j);
                last = j;
            }
        }
        let Some(next) = next else {
            return true;
        };
        for j in reach(last) {
            if next.contains(&sequence[j])
                && self.gapped_from(sequence, shape, (k + 1, j), calls, dead)
            {
                return true;
            }
        }
        calls.truncate(mark);
        dead.insert((k, i));
        false
    }

    /// Share of `small`'s occurrences that lie inside an occurrence of `big`.
    pub fn inside_share(&self, small: &[ShapeStep], big: &[ShapeStep]) -> f64 {
        let (Some(small), Some(big)) = (self.indexed(small), self.indexed(big)) else {
            return 0.0;
        };
        let (mut inside, mut total) = (0usize, 0usize);
        for t in 0..self.runs.len() {
            let smalls = self.occurrences(t, &small);
            if smalls.is_empty() {
                continue;
            }
            let bigs = self.occurrences(t, &big);
            total += smalls.len();
            inside += smalls
                .iter()
                .filter(|s| {
                    bigs.iter()
                        .any(|b| b.span.0 <= s.span.0 && s.span.1 <= b.span.1)
                })
                .count();
        }
        if total == 0 {
            0.0
        } else {
            inside as f64 / total as f64
        }
    }

    /// Traces holding at least one occurrence of `shape`.
    pub fn traces_with(&self, shape: &[ShapeStep]) -> usize {
        let Some(shape) = self.indexed(shape) else {
            return 0;
        };
        (0..self.runs.len())
            .filter(|&t| !self.occurrences(t, &shape).is_empty())
            .count()
    }

    /// What `shapes` cover of every trace: the calls inside an occurrence of any of them
    /// (calls in a gapped occurrence's gaps are not), and the model round trips they would save
    /// with each call counted once.
    ///
    /// Round trips: an occurrence of `k` calls run as one flow takes one round trip instead of
    /// `k`. Occurrences of different shapes may overlap (a part inside its parent), so per trace
    /// the longest occurrences are taken first and any that shares a call with one already
    /// taken is left out; the saving is the sum of `k - 1` over those taken.
    pub fn coverage(&self, shapes: &[&[ShapeStep]]) -> Covered {
        let indexed: Vec<IndexedShape> = shapes
            .iter()
            .filter_map(|shape| self.indexed(shape))
            .collect();
        let mut out = Covered::default();
        for (t, sequence) in self.sequences.sequences.iter().enumerate() {
            out.calls += sequence.len();
            let mut found: Vec<Found> = indexed
                .iter()
                .flat_map(|shape| self.occurrences(t, shape))
                .collect();
            let mut covered = vec![false; sequence.len()];
            for call in found.iter().flat_map(|f| &f.calls) {
                if let Some(mark) = covered.get_mut(*call) {
                    *mark = true;
                }
            }
            out.covered += covered.iter().filter(|m| **m).count();
            found.sort_by(|a, b| {
                b.calls
                    .len()
                    .cmp(&a.calls.len())
                    .then(a.calls.first().cmp(&b.calls.first()))
            });
            let mut taken = vec![false; sequence.len()];
            for occurrence in &found {
                let free = occurrence
                    .calls
                    .iter()
                    .all(|&call| taken.get(call).is_some_and(|t| !t));
                if free && !occurrence.calls.is_empty() {
                    for &call in &occurrence.calls {
                        taken[call] = true;
                    }
                    out.round_trips_saved += occurrence.calls.len() - 1;
                }
            }
        }
        out
    }
}

/// What a set of shapes covers of the traffic ([`TraceRuns::coverage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Covered {
    /// Every call of every trace.
    pub calls: usize,
    /// Calls inside an occurrence.
    pub covered: usize,
    /// Model round trips saved, each call counted once.
    pub round_trips_saved: usize,
}

/// A candidate's tool sequence as a shape of single calls (no repeats, no alternatives), for
/// counting what the unfolded candidates cover.
pub fn exact_shape(tools: &[String]) -> Vec<ShapeStep> {
    tools
        .iter()
        .map(|tool| ShapeStep {
            tools: vec![tool.clone()],
            repeated: false,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(names: &str) -> Vec<String> {
        names.split_whitespace().map(str::to_string).collect()
    }

    fn sequences(traces: &[&str]) -> ToolSequences {
        let mut names: Vec<String> = Vec::new();
        let mut out = ToolSequences::default();
        for (t, trace) in traces.iter().enumerate() {
            let mut sequence = Vec::new();
            for tool in trace.split_whitespace() {
                let at = match names.iter().position(|n| n == tool) {
                    Some(at) => at,
                    None => {
                        names.push(tool.to_string());
                        names.len() - 1
                    }
                };
                sequence.push(at as u32);
            }
            out.trace_ids.push(format!("t{t}"));
            out.sequences.push(sequence);
            out.first_started.push(None);
        }
        out.names = names;
        out
    }

    /// `a -> each b -> c`.
    fn a_each_b_c() -> Vec<ShapeStep> {
        vec![
            ShapeStep {
                tools: tools("a"),
                repeated: false,
            },
            ShapeStep {
                tools: tools("b"),
                repeated: true,
            },
            ShapeStep {
                tools: tools("c"),
                repeated: false,
            },
        ]
    }

    fn covered(runs: &TraceRuns<'_>, shapes: &[&[ShapeStep]]) -> (usize, usize) {
        let covered = runs.coverage(shapes);
        (covered.covered, covered.calls)
    }

    fn fold_all(candidates: &[(&str, &str)], traces: &[&str]) -> Vec<Behaviour> {
        fold_mined(candidates, traces, false, 0)
    }

    fn fold_gapped(candidates: &[(&str, &str)], traces: &[&str], max_gap: usize) -> Vec<Behaviour> {
        fold_mined(candidates, traces, true, max_gap)
    }

    /// Fold candidates mined contiguously or with gaps, with the gap given to folding.
    fn fold_mined(
        candidates: &[(&str, &str)],
        traces: &[&str],
        gapped: bool,
        max_gap: usize,
    ) -> Vec<Behaviour> {
        let owned: Vec<(String, Vec<String>)> = candidates
            .iter()
            .map(|(id, t)| (id.to_string(), tools(t)))
            .collect();
        let inputs: Vec<FoldInput<'_>> = owned
            .iter()
            .map(|(id, tools)| FoldInput {
                id,
                tools,
                gapped,
                map_step: None,
            })
            .collect();
        let config = FoldConfig {
            max_gap,
            ..FoldConfig::default()
        };
        fold(&inputs, &sequences(traces), &config)
    }

    fn summary(behaviours: &[Behaviour]) -> Vec<(String, Vec<(String, VariantKind)>)> {
        behaviours
            .iter()
            .map(|b| {
                (
                    b.name.clone(),
                    b.variants
                        .iter()
                        .map(|v| (v.candidate_id.clone(), v.kind))
                        .collect(),
                )
            })
            .collect()
    }

    #[test]
    fn loop_counts_first_steps_and_parts_fold_into_one_behaviour() {
        let traces = [
            "zip user order",
            "zip user order order",
            "zip user order order order",
            "email user order order",
            "email user order",
            "zip user order other",
        ];
        let behaviours = fold_all(
            &[
                ("zip1", "zip user order"),
                ("zip2", "zip user order order"),
                ("email1", "email user order"),
                ("user-order", "user order"),
                ("zip-user", "zip user"),
            ],
            &traces,
        );
        assert_eq!(
            summary(&behaviours),
            vec![(
                "zip -> user -> each order".to_string(),
                vec![
                    ("zip1".to_string(), VariantKind::Lead),
                    ("zip2".to_string(), VariantKind::LoopCount),
                    ("email1".to_string(), VariantKind::FirstStep),
                    ("user-order".to_string(), VariantKind::Part),
                    ("zip-user".to_string(), VariantKind::Part),
                ]
            )]
        );
        assert_eq!(behaviours[0].lead, "zip1");
        assert_eq!(behaviours[0].traces, 6);
        assert_eq!(
            behaviours[0].shape[0].tools,
            vec!["zip".to_string(), "email".to_string()]
        );
    }

    #[test]
    fn gapped_candidates_fold_with_the_gap_they_were_mined_with() {
        // The same behaviour as above with unrelated calls (x, y) inside its occurrences.
        let traces = [
            "zip x user order",
            "zip user y order order",
            "zip user order x order order",
            "email user order y order",
            "email x user order",
            "zip user order other",
        ];
        let candidates = [
            ("zip1", "zip user order"),
            ("zip2", "zip user order order"),
            ("email1", "email user order"),
            ("user-order", "user order"),
            // A part that skips a step of the longer behaviour.
            ("zip-order", "zip order"),
        ];
        let behaviours = fold_gapped(&candidates, &traces, 1);
        assert_eq!(
            summary(&behaviours),
            vec![(
                "zip -> user -> each order".to_string(),
                vec![
                    ("zip1".to_string(), VariantKind::Lead),
                    ("zip2".to_string(), VariantKind::LoopCount),
                    ("email1".to_string(), VariantKind::FirstStep),
                    ("user-order".to_string(), VariantKind::Part),
                    ("zip-order".to_string(), VariantKind::Part),
                ]
            )]
        );
        assert_eq!(behaviours[0].traces, 6);
        // Without a gap to fold with, each gapped candidate keeps its own behaviour.
        assert_eq!(fold_gapped(&candidates, &traces, 0).len(), 5);
    }

    #[test]
    fn gapped_occurrences_skip_other_calls_but_not_more_than_the_gap() {
        let sequences = sequences(&["a x b b y b c", "a x y b c"]);
        let shape = a_each_b_c();
        let runs = TraceRuns::with_gap(&sequences, 1);
        assert_eq!(runs.traces_with(&shape), 1);
        // a, b, b, b, c of the first trace; x and y sit in gaps.
        assert_eq!(covered(&runs, &[&shape]), (5, 12));
        let wider = TraceRuns::with_gap(&sequences, 2);
        assert_eq!(covered(&wider, &[&shape]), (8, 12));
    }

    #[test]
    fn a_gapped_call_that_leads_nowhere_is_given_up_for_a_later_one() {
        // With one call of gap, the first b after a cannot reach c; the second b can.
        let sequences = sequences(&["a b b x c", "x a b b y c"]);
        let shape = exact_shape(&tools("a b c"));
        let runs = TraceRuns::with_gap(&sequences, 1);
        assert_eq!(runs.traces_with(&shape), 2);
        // a, the second b and c of each trace.
        assert_eq!(covered(&runs, &[&shape]), (6, 11));
    }

    #[test]
    fn a_part_that_mostly_occurs_on_its_own_stays_a_proposal() {
        // `order product` occurs 4 times, once inside `user order product`.
        let traces = [
            "user order product",
            "order product",
            "order product",
            "x order product",
            "user order product",
        ];
        let behaviours = fold_all(
            &[("long", "user order product"), ("short", "order product")],
            &traces,
        );
        let names: Vec<&str> = behaviours.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["user -> order -> product", "order -> product"]);
        let shape = exact_shape(&tools("order product"));
        let long = exact_shape(&tools("user order product"));
        let sequences = sequences(&traces);
        let runs = TraceRuns::new(&sequences);
        assert!((runs.inside_share(&shape, &long) - 0.4).abs() < 1e-9);
    }

    #[test]
    fn occurrences_respect_single_calls_and_repeats() {
        let traces = ["a b b c", "a b c", "b b"];
        let sequences = sequences(&traces);
        let runs = TraceRuns::new(&sequences);
        // `a b c` as single calls: only the second trace; `a each b c`: both.
        assert_eq!(runs.traces_with(&exact_shape(&tools("a b c"))), 1);
        let looped = a_each_b_c();
        assert_eq!(runs.traces_with(&looped), 2);
        // Covered calls: 4 + 3 of 9.
        assert_eq!(covered(&runs, &[&looped]), (7, 9));
        // A last single step takes the first call of a longer run: `a b` covers `a b` of
        // `a b b c`.
        assert_eq!(covered(&runs, &[&exact_shape(&tools("a b"))]), (4, 9));
    }

    #[test]
    fn round_trips_count_each_call_once_longest_occurrence_first() {
        let traces = ["a b b c", "a b c", "b b", "x a b c"];
        let sequences = sequences(&traces);
        let runs = TraceRuns::new(&sequences);
        let looped = a_each_b_c();
        let pair = exact_shape(&tools("a b"));
        let lead = exact_shape(&tools("x a"));
        // `a b` alone: one saving in each of the three traces that hold it.
        assert_eq!(
            runs.coverage(&[&pair]),
            Covered {
                calls: 13,
                covered: 6,
                round_trips_saved: 3
            }
        );
        // With the loop: it takes `a b b c` (3), `a b c` (2) and `a b c` of the last trace
        // (2); `a b` and `x a` overlap those and save nothing more, though `x` is covered.
        assert_eq!(
            runs.coverage(&[&pair, &looped, &lead]),
            Covered {
                calls: 13,
                covered: 11,
                round_trips_saved: 7
            }
        );
    }

    #[test]
    fn names_are_short_and_unique() {
        let traces = ["a b c d", "a x y d"];
        let behaviours = fold_all(&[("one", "a b c d"), ("two", "a x y d")], &traces);
        let names: Vec<&str> = behaviours.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["a -> ... -> d", "a -> ... -> d (2)"]);
    }

    #[test]
    fn a_loop_candidate_leads_the_loop_counts_it_covers() {
        let (two, three, each) = (tools("u o o"), tools("u o o o"), tools("u o"));
        let inputs = [
            FoldInput {
                id: "u_o_o",
                tools: &two,
                gapped: false,
                map_step: None,
            },
            FoldInput {
                id: "u_each_o",
                tools: &each,
                gapped: false,
                map_step: Some(1),
            },
            FoldInput {
                id: "u_o_o_o",
                tools: &three,
                gapped: false,
                map_step: None,
            },
        ];
        let behaviours = fold(
            &inputs,
            &sequences(&["u o o", "u o o o", "u o"]),
            &FoldConfig::default(),
        );
        assert_eq!(
            summary(&behaviours),
            vec![(
                "u -> each o".to_string(),
                vec![
                    ("u_each_o".to_string(), VariantKind::Lead),
                    ("u_o_o".to_string(), VariantKind::LoopCount),
                    ("u_o_o_o".to_string(), VariantKind::LoopCount),
                ]
            )]
        );
        assert_eq!(behaviours[0].lead, "u_each_o");
        assert!(behaviours[0].shape[1].repeated);
    }
}
