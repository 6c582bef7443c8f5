//! Contiguous pattern mining: every substring that occurs in at least `min_support` sequences.
//!
//! Depth-first pattern growth. A pattern's node holds its occurrences; its children are the
//! one-item right extensions, found by reading the item after each occurrence. Support counts
//! distinct sequences: occurrences are kept in position order, so a per-item "last sequence
//! seen" marker suffices.
//!
//! Runs of one repeated item are the case that makes naive growth quadratic: `a^k` occurs
//! `R - k + 1` times inside a run of length `R`. Patterns made only of `a` ("pure" nodes) are
//! therefore kept as run records (sequence, run end, run length) and a node `a^l` keeps the runs
//! with `R >= l`; its occurrence count is the sum of `R - l + 1`. Any pattern with two distinct
//! items occurs at most once per run boundary it is anchored to, so ordinary occurrence lists
//! stay linear. The total work is the sum over frequent patterns of their (run-compressed)
//! occurrences, plus one pass over the data.
//!
//! A pattern is closed when no one-item extension to the left or right has the same support
//! (any longer super-pattern with equal support implies such an extension), so closedness is
//! decided locally from the counts of both neighbours.
//!
//! Subtrees of different root items share nothing but the read-only data, so from 20,000
//! steps on they are expanded on all cores and replayed in root order (see [`visit`]).

use std::cell::Cell;
use std::rc::Rc;

use super::db::SequenceDb;
use super::error::SpmError;

/// Options of the contiguous miner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContiguousOptions {
    /// Minimum number of distinct sequences containing a pattern (at least 1).
    pub min_support: u32,
    /// Shortest pattern reported (patterns of length 1 count, as in the literature).
    pub min_length: usize,
    /// Longest pattern reported, if bounded.
    pub max_length: Option<usize>,
    /// Report only closed patterns: drop a pattern when a longer pattern containing it has the
    /// same support.
    pub closed_only: bool,
}

impl Default for ContiguousOptions {
    fn default() -> Self {
        Self {
            min_support: 1,
            min_length: 1,
            max_length: None,
            closed_only: false,
        }
    }
}

impl ContiguousOptions {
    /// Default options with the given minimum support.
    pub fn with_min_support(min_support: u32) -> Self {
        Self {
            min_support,
            ..Self::default()
        }
    }
}

/// One frequent contiguous pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContiguousPattern {
    /// Item ids, in order.
    pub items: Vec<u32>,
    /// Number of distinct sequences containing the pattern.
    pub support: u32,
    /// Total number of (possibly overlapping) positions where the pattern occurs.
    pub occurrences: u64,
}

/// Where a pattern occurs: sequence index and start offset inside that sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Occurrence {
    /// Index of the sequence in the database.
    pub sequence: u32,
    /// Offset of the pattern's first item inside the sequence.
    pub start: u32,
}

/// Collects every frequent contiguous pattern, in depth-first order.
pub fn mine(
    db: &SequenceDb,
    options: &ContiguousOptions,
) -> Result<Vec<ContiguousPattern>, SpmError> {
    let mut out = Vec::new();
    visit(db, options, |items, support, occurrences| {
        out.push(ContiguousPattern {
            items: items.to_vec(),
            support,
            occurrences,
        });
    })?;
    Ok(out)
}

/// Counts the frequent contiguous patterns without materializing them.
pub fn count(db: &SequenceDb, options: &ContiguousOptions) -> Result<u64, SpmError> {
    let mut n = 0u64;
    visit(db, options, |_, _, _| n += 1)?;
    Ok(n)
}

/// Calls `visitor(items, support, occurrences)` for every frequent contiguous pattern, in
/// depth-first order (a pattern before its extensions). The slice is only valid for the call.
pub fn visit<F>(db: &SequenceDb, options: &ContiguousOptions, visitor: F) -> Result<(), SpmError>
where
    F: FnMut(&[u32], u32, u64),
{
    if options.min_support == 0 {
        return Err(SpmError::InvalidOption(
            "min_support must be at least 1".to_owned(),
        ));
    }
    let max_length = options.max_length.unwrap_or(usize::MAX);
    if max_length == 0 || max_length < options.min_length {
        return Ok(());
    }
    let threads = crate::parallel::mining_threads(db.num_steps());
    visit_threaded(db, options, threads, visitor);
    Ok(())
}

/// [`visit`] on `threads` threads: the root items' subtrees are spread over the threads, each
/// subtree's nodes are recorded, and the patterns are handed to `visitor` in root order, so
/// the output is the single-threaded one, pattern for pattern.
fn visit_threaded<F>(db: &SequenceDb, options: &ContiguousOptions, threads: usize, visitor: F)
where
    F: FnMut(&[u32], u32, u64),
{
    let mut miner = Miner::new(db, options, visitor);
    if threads <= 1 {
        miner.run();
        return;
    }
    miner.push_roots();
    // Root frames in search order (the stack pops the first root last pushed).
    let roots: Vec<Frame> = miner.stack.drain(..).rev().collect();
    if roots.len() <= 1 {
        miner.stack.extend(roots.into_iter().rev());
        miner.search();
        return;
    }
    let root_arena = &miner.arena;
    let done = crate::parallel::map_indices_with(
        roots.len(),
        threads,
        |at| roots[at].end - roots[at].start,
        || {
            let report = Rc::new(Cell::new(None));
            let sink = Rc::clone(&report);
            let worker = Miner::new(db, options, move |_: &[u32], support, occurrences| {
                sink.set(Some((support, occurrences)));
            });
            (report, worker)
        },
        |(report, worker), at| {
            let root = &roots[at];
            // The root's records, copied to the start of this worker's arena; the counters
            // are clean between subtrees (every node clears them).
            worker.arena.clear();
            worker
                .arena
                .extend_from_slice(&root_arena[root.start..root.end]);
            worker.stack.push(Frame {
                start: 0,
                end: worker.arena.len(),
                top: worker.arena.len(),
                ..*root
            });
            let mut entered = Vec::new();
            while let Some(frame) = worker.stack.pop() {
                worker.enter(frame);
                entered.push(Entered {
                    depth: frame.depth as u32,
                    item: frame.item,
                    report: report.take(),
                });
            }
            entered
        },
    );
    // Replay: a node's pattern is its parent's plus one item.
    let mut pattern: Vec<u32> = Vec::new();
    for entered in done {
        for node in entered {
            pattern.truncate(node.depth as usize - 1);
            pattern.push(node.item);
            if let Some((support, occurrences)) = node.report {
                (miner.visitor)(&pattern, support, occurrences);
            }
        }
    }
}

/// A node a worker expanded, and what it reported (the pattern ending there, when closed and
/// long enough).
struct Entered {
    depth: u32,
    item: u32,
    report: Option<(u32, u64)>,
}

/// The occurrences of each of `patterns`, sorted by sequence then start.
///
/// One pass over the database, whatever the number of patterns: the patterns form a trie, and
/// from every position the walk follows the items for as long as the trie has a branch (at most
/// the longest pattern's length), reporting every pattern that ends on the way.
pub fn occurrences<P: AsRef<[u32]>>(db: &SequenceDb, patterns: &[P]) -> Vec<Vec<Occurrence>> {
    let n_items = db.num_items();
    let mut trie = PatternTrie::new(n_items);
    for (number, pattern) in patterns.iter().enumerate() {
        let pattern = pattern.as_ref();
        if pattern.is_empty() || pattern.iter().any(|&i| i as usize >= n_items) {
            continue;
        }
        trie.insert(pattern, number as u32);
    }
    // Consecutive ranges of sequences on their own threads; each range's lists come out
    // sorted, so joining them in range order keeps every list sorted.
    let threads = crate::parallel::mining_threads(db.num_steps());
    let per_range = db.len().div_ceil(threads).max(1);
    let ranges: Vec<std::ops::Range<usize>> = (0..db.len())
        .step_by(per_range)
        .map(|from| from..(from + per_range).min(db.len()))
        .collect();
    let count = patterns.len();
    let parts = crate::parallel::map(&ranges, threads, |range| {
        occurrences_in(db, &trie, count, range.clone())
    });
    let mut found: Vec<Vec<Occurrence>> = (0..patterns.len()).map(|_| Vec::new()).collect();
    for part in parts {
        for (list, more) in found.iter_mut().zip(part) {
            if list.is_empty() {
                *list = more;
            } else {
                list.extend(more);
            }
        }
    }
    found
}

/// [`occurrences`] of the trie's patterns in the sequences `range` of `db`.
fn occurrences_in(
    db: &SequenceDb,
    trie: &PatternTrie,
    patterns: usize,
    range: std::ops::Range<usize>,
) -> Vec<Vec<Occurrence>> {
    let mut found: Vec<Vec<Occurrence>> = (0..patterns).map(|_| Vec::new()).collect();
    for seq in range {
        let sequence = db.sequence(seq);
        for start in 0..sequence.len() {
            let mut node = PatternTrie::ROOT;
            for &item in &sequence[start..] {
                let Some(next) = trie.child(node, item) else {
                    break;
                };
                node = next;
                for &number in &trie.ends[node as usize] {
                    found[number as usize].push(Occurrence {
                        sequence: seq as u32,
                        start: start as u32,
                    });
                }
            }
        }
    }
    found
}

/// The patterns whose occurrences are looked for, as a trie over item ids.
struct PatternTrie {
    /// The root's children by item (dense: every walk starts there).
    root: Vec<u32>,
    /// Other nodes' children, `(item, node)`, searched linearly (they are few).
    children: Vec<Vec<(u32, u32)>>,
    /// Per node, the numbers of the patterns ending there.
    ends: Vec<Vec<u32>>,
}

impl PatternTrie {
    const ROOT: u32 = 0;
    const NONE: u32 = u32::MAX;

    fn new(n_items: usize) -> Self {
        Self {
            root: vec![Self::NONE; n_items],
            children: vec![Vec::new()],
            ends: vec![Vec::new()],
        }
    }

    fn child(&self, node: u32, item: u32) -> Option<u32> {
        if node == Self::ROOT {
            return self
                .root
                .get(item as usize)
                .copied()
                .filter(|&n| n != Self::NONE);
        }
        self.children[node as usize]
            .iter()
            .find(|(i, _)| *i == item)
            .map(|&(_, n)| n)
    }

    fn insert(&mut self, pattern: &[u32], number: u32) {
        let mut node = Self::ROOT;
        for &item in pattern {
            node = match self.child(node, item) {
                Some(next) => next,
                None => {
                    let next = self.ends.len() as u32;
                    self.ends.push(Vec::new());
                    self.children.push(Vec::new());
                    if node == Self::ROOT {
                        self.root[item as usize] = next;
                    } else {
                        self.children[node as usize].push((item, next));
                    }
                    next
                }
            };
        }
        self.ends[node as usize].push(number);
    }
}

/// A pending node of the depth-first traversal.
#[derive(Debug, Clone, Copy)]
struct Frame {
    /// Last item of the pattern.
    item: u32,
    /// Pattern length.
    depth: usize,
    /// Pure node (`item` repeated `depth` times, run records) or ordinary (occurrence pairs).
    pure: bool,
    /// The node's records in the arena.
    start: usize,
    end: usize,
    support: u32,
    /// Arena length to restore before expanding this node.
    top: usize,
}

/// Per-item counters for one node's neighbours, reset through the touched list.
struct NeighbourCounts {
    support: Vec<u32>,
    occurrences: Vec<u32>,
    last_seq: Vec<u32>,
    touched: Vec<u32>,
}

impl NeighbourCounts {
    fn new(n: usize) -> Self {
        Self {
            support: vec![0; n],
            occurrences: vec![0; n],
            last_seq: vec![u32::MAX; n],
            touched: Vec::new(),
        }
    }

    #[inline]
    fn add(&mut self, item: u32, seq: u32) {
        let i = item as usize;
        if self.occurrences[i] == 0 {
            self.touched.push(item);
        }
        self.occurrences[i] += 1;
        if self.last_seq[i] != seq {
            self.last_seq[i] = seq;
            self.support[i] += 1;
        }
    }

    fn any_support_equals(&self, support: u32) -> bool {
        self.touched
            .iter()
            .any(|&c| self.support[c as usize] == support)
    }

    fn clear(&mut self) {
        for &c in &self.touched {
            let i = c as usize;
            self.support[i] = 0;
            self.occurrences[i] = 0;
            self.last_seq[i] = u32::MAX;
        }
        self.touched.clear();
    }
}

const NO_CURSOR: usize = usize::MAX;

struct Miner<'a, F> {
    items: &'a [u32],
    offsets: &'a [u32],
    min_support: u32,
    min_length: usize,
    max_length: usize,
    closed_only: bool,
    visitor: F,
    arena: Vec<u32>,
    stack: Vec<Frame>,
    pattern: Vec<u32>,
    right: NeighbourCounts,
    left: NeighbourCounts,
    cursor: Vec<usize>,
    children: Vec<u32>,
}

impl<'a, F: FnMut(&[u32], u32, u64)> Miner<'a, F> {
    fn new(db: &'a SequenceDb, options: &ContiguousOptions, visitor: F) -> Self {
        let n = db.num_items();
        Self {
            items: db.items(),
            offsets: db.offsets(),
            min_support: options.min_support,
            min_length: options.min_length,
            max_length: options.max_length.unwrap_or(usize::MAX),
            closed_only: options.closed_only,
            visitor,
            arena: Vec::new(),
            stack: Vec::new(),
            pattern: Vec::new(),
            right: NeighbourCounts::new(n),
            left: NeighbourCounts::new(n),
            cursor: vec![NO_CURSOR; n],
            children: Vec::new(),
        }
    }

    fn run(&mut self) {
        self.push_roots();
        self.search();
    }

    /// Depth-first search from the frames on the stack.
    fn search(&mut self) {
        while let Some(frame) = self.stack.pop() {
            self.enter(frame);
        }
    }

    /// Expands one node: reports it (when closed and long enough) and pushes its children.
    fn enter(&mut self, frame: Frame) {
        self.arena.truncate(frame.top);
        self.pattern.truncate(frame.depth - 1);
        self.pattern.push(frame.item);
        if frame.pure {
            self.expand_pure(frame);
        } else {
            self.expand_plain(frame);
        }
    }

    /// The roots are the frequent single items, each as a pure node holding all its runs.
    fn push_roots(&mut self) {
        let items = self.items;
        let offsets = self.offsets;
        let counts = &mut self.right;
        for seq in 0..offsets.len() - 1 {
            let (mut pos, end) = (offsets[seq] as usize, offsets[seq + 1] as usize);
            while pos < end {
                let item = items[pos];
                while pos < end && items[pos] == item {
                    pos += 1;
                }
                counts.add(item, seq as u32);
            }
        }
        let mut roots: Vec<u32> = counts
            .touched
            .iter()
            .copied()
            .filter(|&c| counts.support[c as usize] >= self.min_support)
            .collect();
        roots.sort_unstable();
        let mut total = 0usize;
        for &c in &roots {
            self.cursor[c as usize] = total;
            total += 3 * counts.occurrences[c as usize] as usize;
        }
        self.arena.resize(total, 0);
        for seq in 0..offsets.len() - 1 {
            let (mut pos, end) = (offsets[seq] as usize, offsets[seq + 1] as usize);
            while pos < end {
                let item = items[pos];
                let run_start = pos;
                while pos < end && items[pos] == item {
                    pos += 1;
                }
                let at = self.cursor[item as usize];
                if at != NO_CURSOR {
                    self.arena[at] = seq as u32;
                    self.arena[at + 1] = pos as u32;
                    self.arena[at + 2] = (pos - run_start) as u32;
                    self.cursor[item as usize] = at + 3;
                }
            }
        }
        let mut end = total;
        for &c in roots.iter().rev() {
            let start = end - 3 * counts.occurrences[c as usize] as usize;
            self.stack.push(Frame {
                item: c,
                depth: 1,
                pure: true,
                start,
                end,
                support: counts.support[c as usize],
                top: total,
            });
            self.cursor[c as usize] = NO_CURSOR;
            end = start;
        }
        counts.clear();
    }

    /// Node `a^l`: records are runs of `a` with length `R >= l`.
    fn expand_pure(&mut self, frame: Frame) {
        let l = frame.depth as u32;
        let a = frame.item;
        let want_children = frame.depth < self.max_length;
        let need_counts = want_children || self.closed_only;
        let mut occurrences = 0u64;
        // The extension a^(l+1): runs longer than l.
        let mut longer_runs = 0usize;
        let mut longer_support = 0u32;
        let mut longer_last = u32::MAX;
        {
            let items = self.items;
            let offsets = self.offsets;
            let region = &self.arena[frame.start..frame.end];
            for rec in region.chunks_exact(3) {
                let (seq, run_end, run_len) = (rec[0], rec[1], rec[2]);
                occurrences += u64::from(run_len - l + 1);
                if !need_counts {
                    continue;
                }
                if run_len > l {
                    longer_runs += 1;
                    if longer_last != seq {
                        longer_last = seq;
                        longer_support += 1;
                    }
                }
                if run_end < offsets[seq as usize + 1] {
                    self.right.add(items[run_end as usize], seq);
                }
                if self.closed_only {
                    let run_start = run_end - run_len;
                    if run_start > offsets[seq as usize] {
                        self.left.add(items[run_start as usize - 1], seq);
                    }
                }
            }
        }
        let closed = !self.closed_only
            || (longer_support != frame.support
                && !self.right.any_support_equals(frame.support)
                && !self.left.any_support_equals(frame.support));
        self.emit(frame, occurrences, closed);
        self.left.clear();
        if !want_children {
            self.right.clear();
            return;
        }
        // Lay out the children in item order: pure a^(l+1) among the plain a^l b.
        self.children.clear();
        for &c in &self.right.touched {
            if self.right.support[c as usize] >= self.min_support {
                self.children.push(c);
            }
        }
        let longer_frequent = longer_support >= self.min_support;
        if longer_frequent {
            self.children.push(a);
        }
        self.children.sort_unstable();
        let base = self.arena.len();
        let mut total = 0usize;
        for &c in &self.children {
            self.cursor[c as usize] = base + total;
            total += if c == a {
                3 * longer_runs
            } else {
                2 * self.right.occurrences[c as usize] as usize
            };
        }
        self.arena.resize(base + total, 0);
        {
            let offsets = self.offsets;
            let items = self.items;
            let (old, new) = self.arena.split_at_mut(base);
            let region = &old[frame.start..frame.end];
            for rec in region.chunks_exact(3) {
                let (seq, run_end, run_len) = (rec[0], rec[1], rec[2]);
                if longer_frequent && run_len > l {
                    let at = self.cursor[a as usize] - base;
                    new[at..at + 3].copy_from_slice(rec);
                    self.cursor[a as usize] += 3;
                }
                if run_end < offsets[seq as usize + 1] {
                    let b = items[run_end as usize] as usize;
                    if self.cursor[b] != NO_CURSOR {
                        let at = self.cursor[b] - base;
                        new[at] = seq;
                        new[at + 1] = run_end + 1;
                        self.cursor[b] += 2;
                    }
                }
            }
        }
        self.push_children(frame, base, a, longer_support);
    }

    /// Ordinary node: records are (sequence, position after the occurrence) pairs.
    fn expand_plain(&mut self, frame: Frame) {
        let len = frame.depth as u32;
        let want_children = frame.depth < self.max_length;
        let occurrences = ((frame.end - frame.start) / 2) as u64;
        if want_children || self.closed_only {
            let items = self.items;
            let offsets = self.offsets;
            let region = &self.arena[frame.start..frame.end];
            for rec in region.chunks_exact(2) {
                let (seq, next) = (rec[0], rec[1]);
                if next < offsets[seq as usize + 1] {
                    self.right.add(items[next as usize], seq);
                }
                if self.closed_only {
                    let start = next - len;
                    if start > offsets[seq as usize] {
                        self.left.add(items[start as usize - 1], seq);
                    }
                }
            }
        }
        let closed = !self.closed_only
            || (!self.right.any_support_equals(frame.support)
                && !self.left.any_support_equals(frame.support));
        self.emit(frame, occurrences, closed);
        self.left.clear();
        if !want_children {
            self.right.clear();
            return;
        }
        self.children.clear();
        for &c in &self.right.touched {
            if self.right.support[c as usize] >= self.min_support {
                self.children.push(c);
            }
        }
        self.children.sort_unstable();
        let base = self.arena.len();
        let mut total = 0usize;
        for &c in &self.children {
            self.cursor[c as usize] = base + total;
            total += 2 * self.right.occurrences[c as usize] as usize;
        }
        self.arena.resize(base + total, 0);
        if !self.children.is_empty() {
            let offsets = self.offsets;
            let items = self.items;
            let (old, new) = self.arena.split_at_mut(base);
            let region = &old[frame.start..frame.end];
            for rec in region.chunks_exact(2) {
                let (seq, next) = (rec[0], rec[1]);
                if next < offsets[seq as usize + 1] {
                    let b = items[next as usize] as usize;
                    if self.cursor[b] != NO_CURSOR {
                        let at = self.cursor[b] - base;
                        new[at] = seq;
                        new[at + 1] = next + 1;
                        self.cursor[b] += 2;
                    }
                }
            }
        }
        self.push_children(frame, base, u32::MAX, 0);
    }

    /// Pushes the laid-out children (in reverse, so the smallest item pops first) and resets
    /// the counters. Children regions are adjacent from `base` on, in item order, and every
    /// cursor now sits at the end of its child's region. `pure_item` is the item whose child is
    /// a pure node (`u32::MAX`: none), with support `pure_support`.
    fn push_children(&mut self, frame: Frame, base: usize, pure_item: u32, pure_support: u32) {
        let top = self.arena.len();
        let first = self.stack.len();
        let mut start = base;
        for &c in &self.children {
            let end = self.cursor[c as usize];
            let pure = c == pure_item;
            self.stack.push(Frame {
                item: c,
                depth: frame.depth + 1,
                pure,
                start,
                end,
                support: if pure {
                    pure_support
                } else {
                    self.right.support[c as usize]
                },
                top,
            });
            self.cursor[c as usize] = NO_CURSOR;
            start = end;
        }
        self.stack[first..].reverse();
        self.right.clear();
    }

    fn emit(&mut self, frame: Frame, occurrences: u64, closed: bool) {
        if closed && frame.depth >= self.min_length {
            (self.visitor)(&self.pattern, frame.support, occurrences);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ContiguousOptions, SequenceDb, visit_threaded};

    /// Patterns, supports and occurrence counts in the order the search reports them.
    fn run(
        db: &SequenceDb,
        options: &ContiguousOptions,
        threads: usize,
    ) -> Vec<(Vec<u32>, u32, u64)> {
        let mut out = Vec::new();
        visit_threaded(db, options, threads, |items, support, occurrences| {
            out.push((items.to_vec(), support, occurrences));
        });
        out
    }

    #[test]
    fn threads_report_the_same_patterns_in_the_same_order() {
        // 2,000 pseudo-random sequences over 6 items, with runs of one item (pure nodes).
        let mut state = 0x2545_F491_4F6C_DD1D_u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut text = String::new();
        for _ in 0..2000 {
            let mut previous = None;
            for _ in 0..next(30) {
                let item = match previous {
                    Some(p) if next(3) == 0 => p,
                    _ => next(6),
                };
                text.push_str(&format!("{item} -1 "));
                previous = Some(item);
            }
            text.push_str("-2\n");
        }
        let db = SequenceDb::parse_spmf(text.as_bytes()).unwrap();
        for (min_support, min_length, closed_only) in [
            (50, 1, false),
            (50, 2, true),
            (200, 1, true),
            (20, 3, false),
        ] {
            let options = ContiguousOptions {
                min_support,
                min_length,
                max_length: Some(6),
                closed_only,
            };
            let single = run(&db, &options, 1);
            assert!(single.len() > 30, "too few patterns: {}", single.len());
            for threads in [2, 3] {
                assert_eq!(
                    run(&db, &options, threads),
                    single,
                    "{threads} threads, {options:?}"
                );
            }
        }
    }
}
