//! Gapped sequential pattern mining: every sequence of items that occurs in order (with any
//! gap, or at most `max_gap` skipped items between consecutive pattern items) in at least
//! `min_support` sequences.
//!
//! PrefixSpan-style pseudo-projection, depth first. A node's projection lists, per sequence that
//! contains the pattern, where the pattern can end:
//!
//! - unbounded gap: only the earliest end matters (every later item is reachable from it). The
//!   extensions are the items whose last position in the sequence lies after that end; a
//!   per-sequence table of (item, last position) sorted by position, latest first, yields them
//!   without scanning the suffix. The child's earliest end is the first occurrence after the
//!   parent's end.
//! - bounded gap `g`: every end position, sorted. The extensions are the items inside the union
//!   of the windows `(e, e + g + 1]`, each position visited once per node.
//!
//! Projections live in a stack-shaped arena: a node's children are laid out together after it
//! and released when the traversal leaves the node, so memory follows the data and the depth,
//! not the number of patterns.
//!
//! Identical sequences are mined once: the database is reduced to its distinct sequences, each
//! weighted by how many times it occurs, and a pattern's support is the sum of the weights of
//! the distinct sequences holding it. Traces repeat (the same tool sequence from many sessions,
//! a log replayed), and then the cost follows the distinct traffic, not its volume.

use super::db::SequenceDb;
use super::error::SpmError;
use std::cell::RefCell;
use std::rc::Rc;

use crate::fast_hash::FastMap;

/// Options of the gapped miner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GappedOptions {
    /// Minimum number of distinct sequences containing a pattern (at least 1).
    pub min_support: u32,
    /// Most items skipped between two consecutive pattern items (`None`: any gap; `Some(0)`:
    /// contiguous).
    pub max_gap: Option<u32>,
    /// Shortest pattern reported.
    pub min_length: usize,
    /// Longest pattern reported, if bounded.
    pub max_length: Option<usize>,
}

impl Default for GappedOptions {
    fn default() -> Self {
        Self {
            min_support: 1,
            max_gap: None,
            min_length: 1,
            max_length: None,
        }
    }
}

impl GappedOptions {
    /// Default options (any gap) with the given minimum support.
    pub fn with_min_support(min_support: u32) -> Self {
        Self {
            min_support,
            ..Self::default()
        }
    }
}

/// One frequent sequential pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GappedPattern {
    /// Item ids, in order.
    pub items: Vec<u32>,
    /// Number of distinct sequences containing the pattern.
    pub support: u32,
}

/// Collects every frequent pattern, in depth-first order.
pub fn mine(db: &SequenceDb, options: &GappedOptions) -> Result<Vec<GappedPattern>, SpmError> {
    let mut out = Vec::new();
    visit(db, options, |items, support| {
        out.push(GappedPattern {
            items: items.to_vec(),
            support,
        });
    })?;
    Ok(out)
}

/// Counts the frequent patterns without materializing them.
pub fn count(db: &SequenceDb, options: &GappedOptions) -> Result<u64, SpmError> {
    let mut n = 0u64;
    visit(db, options, |_, _| n += 1)?;
    Ok(n)
}

/// Calls `visitor(items, support)` for every frequent pattern, depth first (a pattern before its
/// extensions). The slice is only valid for the call.
///
/// Without a gap bound, data of 20,000 steps or more is searched on all cores
/// (root items' subtrees spread over threads); the patterns and their order are the same.
pub fn visit<F>(db: &SequenceDb, options: &GappedOptions, visitor: F) -> Result<(), SpmError>
where
    F: FnMut(&[u32], u32),
{
    let threads = crate::parallel::mining_threads(db.num_steps());
    visit_threaded(db, options, threads, visitor)
}

/// [`visit`] on `threads` threads (unbounded gap only; bounded searches run on one).
fn visit_threaded<F>(
    db: &SequenceDb,
    options: &GappedOptions,
    threads: usize,
    visitor: F,
) -> Result<(), SpmError>
where
    F: FnMut(&[u32], u32),
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
    let longest = db
        .offsets()
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or(0);
    let distinct = Distinct::of(db.items(), db.offsets());
    let (items, offsets, weights) = match &distinct {
        Some(d) => (
            d.items.as_slice(),
            d.offsets.as_slice(),
            d.weights.as_slice(),
        ),
        None => (db.items(), db.offsets(), &[][..]),
    };
    let mut miner = Miner::new(items, offsets, db.num_items(), weights, options, visitor);
    match options.max_gap {
        // A gap as long as the longest sequence bounds nothing.
        Some(gap) if gap.saturating_add(1) < longest => miner.run_bounded(gap),
        _ if threads > 1 => run_unbounded_parallel(&mut miner, options, threads),
        _ => miner.run_unbounded(),
    }
    Ok(())
}

/// The distinct sequences of a database, each with how many times it occurs.
struct Distinct {
    items: Vec<u32>,
    offsets: Vec<u32>,
    weights: Vec<u32>,
}

impl Distinct {
    /// `None` when every sequence is distinct (then the database is mined as it is).
    fn of(items: &[u32], offsets: &[u32]) -> Option<Self> {
        let n_seq = offsets.len().saturating_sub(1);
        let sequence = |i: usize| &items[offsets[i] as usize..offsets[i + 1] as usize];
        // First sight of each distinct sequence, in order; weights counted alongside.
        let mut first: FastMap<&[u32], u32> = FastMap::default();
        first.reserve(n_seq);
        let mut kept: Vec<usize> = Vec::new();
        let mut weights: Vec<u32> = Vec::new();
        for i in 0..n_seq {
            match first.entry(sequence(i)) {
                std::collections::hash_map::Entry::Occupied(slot) => {
                    weights[*slot.get() as usize] += 1;
                }
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(kept.len() as u32);
                    kept.push(i);
                    weights.push(1);
                }
            }
        }
        if kept.len() == n_seq {
            return None;
        }
        let mut distinct_items = Vec::new();
        let mut distinct_offsets = Vec::with_capacity(kept.len() + 1);
        distinct_offsets.push(0u32);
        for &i in &kept {
            distinct_items.extend_from_slice(sequence(i));
            distinct_offsets.push(distinct_items.len() as u32);
        }
        Some(Self {
            items: distinct_items,
            offsets: distinct_offsets,
            weights,
        })
    }
}

/// Read-only tables of the unbounded search: per sequence its distinct items with their last
/// position (latest first), and every item's positions in order.
struct UnboundedTables {
    last_off: Vec<u32>,
    last: Vec<(u32, u32)>,
    by_item_off: Vec<u32>,
    by_item: Vec<u32>,
}

/// The unbounded search with the root items' subtrees spread over `threads` threads. Each
/// subtree's patterns are buffered and handed to `visitor` in root order, so the output is the
/// single-threaded one, pattern for pattern.
fn run_unbounded_parallel<F: FnMut(&[u32], u32)>(
    miner: &mut Miner<'_, F>,
    options: &GappedOptions,
    threads: usize,
) {
    let tables = miner.unbounded_roots();
    // Root frames in search order (the stack pops the first root last pushed).
    let roots: Vec<Frame> = miner.stack.drain(..).rev().collect();
    let root_arena = &miner.arena;
    let n_items = miner.support.len();
    let (items, offsets, weights) = (miner.items, miner.offsets, miner.weights);
    // Every node is recorded (the replay needs the prefixes); the replay keeps the long enough.
    let all_lengths = GappedOptions {
        min_length: 1,
        ..options.clone()
    };
    let done = crate::parallel::map_indices_with(
        roots.len(),
        threads,
        |at| roots[at].end - roots[at].start,
        || {
            let found = Rc::new(RefCell::new(Found::default()));
            let sink = Rc::clone(&found);
            let worker = Miner::new(
                items,
                offsets,
                n_items,
                weights,
                &all_lengths,
                move |pattern: &[u32], support: u32| sink.borrow_mut().push(pattern, support),
            );
            (found, worker)
        },
        |(found, worker), at| {
            let root = &roots[at];
            // The root's projection, copied to the start of this worker's arena. The worker's
            // counters are clean between subtrees: every node clears them.
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
            worker.search_unbounded(&tables);
            found.take()
        },
    );
    let mut pattern = Vec::new();
    for subtree in done {
        subtree.replay(&mut pattern, options.min_length, &mut miner.visitor);
    }
}

/// The nodes a worker entered, in depth-first order, each as `(depth, last item, support)`:
/// a node's pattern is its parent's plus one item, so the patterns are rebuilt on replay with
/// constant space per node (a run of 200,000 repeats is 200,000 nested patterns).
#[derive(Default)]
struct Found {
    nodes: Vec<(u32, u32, u32)>,
}

impl Found {
    fn push(&mut self, pattern: &[u32], support: u32) {
        let last = pattern.last().copied().unwrap_or(0);
        self.nodes.push((pattern.len() as u32, last, support));
    }

    /// Hands the patterns of at least `min_length` items to `visitor`, in order.
    fn replay<F: FnMut(&[u32], u32)>(
        &self,
        pattern: &mut Vec<u32>,
        min_length: usize,
        visitor: &mut F,
    ) {
        for &(depth, item, support) in &self.nodes {
            pattern.truncate(depth as usize - 1);
            pattern.push(item);
            if pattern.len() >= min_length {
                visitor(pattern, support);
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    item: u32,
    depth: usize,
    start: usize,
    end: usize,
    support: u32,
    top: usize,
}

const NO_CURSOR: usize = usize::MAX;

/// Suffixes up to this long are scanned for next occurrences; longer ones use binary search.
const SCAN_LIMIT: usize = 48;

struct Miner<'a, F> {
    items: &'a [u32],
    offsets: &'a [u32],
    /// Per sequence: how many identical sequences it stands for (empty: one each).
    weights: &'a [u32],
    min_support: u32,
    min_length: usize,
    max_length: usize,
    visitor: F,
    arena: Vec<u32>,
    stack: Vec<Frame>,
    pattern: Vec<u32>,
    /// Per item: support at this node (sequences counted, by weight).
    support: Vec<u32>,
    /// Per item: projected sequences at this node (each once, whatever its weight).
    rows: Vec<u32>,
    /// Per item: end positions counted at this node (bounded gap).
    ends: Vec<u32>,
    /// Per item: the last sequence/entry stamp that counted it.
    stamp: Vec<u32>,
    next_stamp: u32,
    touched: Vec<u32>,
    cursor: Vec<usize>,
    header: Vec<usize>,
    children: Vec<u32>,
}

impl<'a, F: FnMut(&[u32], u32)> Miner<'a, F> {
    fn new(
        items: &'a [u32],
        offsets: &'a [u32],
        n: usize,
        weights: &'a [u32],
        options: &GappedOptions,
        visitor: F,
    ) -> Self {
        Self {
            items,
            offsets,
            weights,
            min_support: options.min_support,
            min_length: options.min_length,
            max_length: options.max_length.unwrap_or(usize::MAX),
            visitor,
            arena: Vec::new(),
            stack: Vec::new(),
            pattern: Vec::new(),
            support: vec![0; n],
            rows: vec![0; n],
            ends: vec![0; n],
            stamp: vec![u32::MAX; n],
            next_stamp: 0,
            touched: Vec::new(),
            cursor: vec![NO_CURSOR; n],
            header: vec![0; n],
            children: Vec::new(),
        }
    }

    /// A fresh stamp, distinct from every value in `stamp`.
    #[inline]
    fn new_stamp(&mut self) -> u32 {
        if self.next_stamp == u32::MAX - 1 {
            self.stamp.fill(u32::MAX);
            self.next_stamp = 0;
        }
        self.next_stamp += 1;
        self.next_stamp
    }

    /// How many sequences sequence `seq` stands for.
    #[inline]
    fn weight(&self, seq: usize) -> u32 {
        self.weights.get(seq).copied().unwrap_or(1)
    }

    #[inline]
    fn count(&mut self, item: u32, weight: u32) {
        let i = item as usize;
        if self.rows[i] == 0 && self.ends[i] == 0 {
            self.touched.push(item);
        }
        self.support[i] += weight;
        self.rows[i] += 1;
    }

    fn clear_counts(&mut self) {
        for &c in &self.touched {
            self.support[c as usize] = 0;
            self.rows[c as usize] = 0;
            self.ends[c as usize] = 0;
            self.cursor[c as usize] = NO_CURSOR;
        }
        self.touched.clear();
    }

    /// Picks the frequent touched items, sorted, into `children`.
    fn select_children(&mut self) {
        self.children.clear();
        for &c in &self.touched {
            if self.support[c as usize] >= self.min_support {
                self.children.push(c);
            }
        }
        self.children.sort_unstable();
    }

    fn push_children(&mut self, depth: usize, base: usize) {
        let top = self.arena.len();
        let first = self.stack.len();
        let mut start = base;
        for &c in &self.children {
            let end = self.cursor[c as usize];
            self.stack.push(Frame {
                item: c,
                depth: depth + 1,
                start,
                end,
                support: self.support[c as usize],
                top,
            });
            start = end;
        }
        self.stack[first..].reverse();
    }

    /// Pops the next node, restores the arena and pattern, and reports it. Returns the frame and
    /// whether its children are wanted.
    fn enter(&mut self) -> Option<(Frame, bool)> {
        let frame = self.stack.pop()?;
        self.arena.truncate(frame.top);
        self.pattern.truncate(frame.depth - 1);
        self.pattern.push(frame.item);
        if frame.depth >= self.min_length {
            (self.visitor)(&self.pattern, frame.support);
        }
        Some((frame, frame.depth < self.max_length))
    }

    // ---- unbounded gap -------------------------------------------------------------------

    fn run_unbounded(&mut self) {
        let tables = self.unbounded_roots();
        self.search_unbounded(&tables);
    }

    /// Builds the unbounded search's tables and the roots' projections (into the arena, the
    /// root frames onto the stack).
    fn unbounded_roots(&mut self) -> UnboundedTables {
        let items = self.items;
        let offsets = self.offsets;
        let n_seq = offsets.len() - 1;
        // Per sequence: its distinct items with their last position, latest first.
        let mut last_off = Vec::with_capacity(n_seq + 1);
        let mut last: Vec<(u32, u32)> = Vec::new();
        last_off.push(0u32);
        for seq in 0..n_seq {
            let stamp = self.new_stamp();
            let weight = self.weight(seq);
            for pos in (offsets[seq] as usize..offsets[seq + 1] as usize).rev() {
                let c = items[pos];
                if self.stamp[c as usize] != stamp {
                    self.stamp[c as usize] = stamp;
                    last.push((c, pos as u32));
                    self.count(c, weight);
                }
            }
            last_off.push(last.len() as u32);
        }
        // Every item's positions, in order (counting sort), for next-occurrence searches.
        let n_items = self.support.len();
        let mut by_item_off = vec![0u32; n_items + 1];
        for &c in items {
            by_item_off[c as usize + 1] += 1;
        }
        for i in 0..n_items {
            by_item_off[i + 1] += by_item_off[i];
        }
        let mut by_item = vec![0u32; items.len()];
        {
            let mut fill: Vec<u32> = by_item_off[..n_items].to_vec();
            for (pos, &c) in items.iter().enumerate() {
                by_item[fill[c as usize] as usize] = pos as u32;
                fill[c as usize] += 1;
            }
        }
        // Roots: every frequent item with its first position in each sequence.
        self.select_children();
        let mut total = 0usize;
        for &c in &self.children {
            self.cursor[c as usize] = total;
            total += 2 * self.rows[c as usize] as usize;
        }
        self.arena.resize(total, 0);
        for seq in 0..n_seq {
            let stamp = self.new_stamp();
            let (first, last) = (offsets[seq] as usize, offsets[seq + 1] as usize);
            for (pos, &c) in items[first..last].iter().enumerate() {
                let (pos, c) = (first + pos, c as usize);
                if self.stamp[c] != stamp {
                    self.stamp[c] = stamp;
                    let at = self.cursor[c];
                    if at != NO_CURSOR {
                        self.arena[at] = seq as u32;
                        self.arena[at + 1] = pos as u32;
                        self.cursor[c] = at + 2;
                    }
                }
            }
        }
        self.push_children(0, 0);
        self.clear_counts();
        UnboundedTables {
            last_off,
            last,
            by_item_off,
            by_item,
        }
    }

    /// Depth-first search from the frames on the stack.
    fn search_unbounded(&mut self, tables: &UnboundedTables) {
        let items = self.items;
        let offsets = self.offsets;
        let (last_off, last) = (&tables.last_off, &tables.last);
        let (by_item_off, by_item) = (&tables.by_item_off, &tables.by_item);
        while let Some((frame, want_children)) = self.enter() {
            if !want_children {
                continue;
            }
            // Count: items whose last position lies after the pattern's earliest end.
            if self.weights.is_empty() {
                // Every sequence counts once: support is the row count, set after the loop.
                for rec in self.arena[frame.start..frame.end].chunks_exact(2) {
                    let (seq, end) = (rec[0] as usize, rec[1]);
                    for &(c, at) in &last[last_off[seq] as usize..last_off[seq + 1] as usize] {
                        if at <= end {
                            break;
                        }
                        let i = c as usize;
                        if self.rows[i] == 0 {
                            self.touched.push(c);
                        }
                        self.rows[i] += 1;
                    }
                }
                for &c in &self.touched {
                    self.support[c as usize] = self.rows[c as usize];
                }
            } else {
                for rec in self.arena[frame.start..frame.end].chunks_exact(2) {
                    let (seq, end) = (rec[0] as usize, rec[1]);
                    let weight = self.weights[seq];
                    for &(c, at) in &last[last_off[seq] as usize..last_off[seq + 1] as usize] {
                        if at <= end {
                            break;
                        }
                        let i = c as usize;
                        if self.rows[i] == 0 {
                            self.touched.push(c);
                        }
                        self.support[i] += weight;
                        self.rows[i] += 1;
                    }
                }
            }
            self.select_children();
            if self.children.is_empty() {
                self.clear_counts();
                continue;
            }
            let base = self.arena.len();
            let mut total = 0usize;
            for &c in &self.children {
                self.cursor[c as usize] = base + total;
                total += 2 * self.rows[c as usize] as usize;
            }
            self.arena.resize(base + total, 0);
            // Project: the first occurrence of every frequent item after the end. A short
            // suffix is scanned; in a long one each item's next position is found by binary
            // search in its position list, starting from where the previous entry (an earlier
            // sequence) left off.
            for &c in &self.children {
                self.header[c as usize] = by_item_off[c as usize] as usize;
            }
            let (old, new) = self.arena.split_at_mut(base);
            for rec in old[frame.start..frame.end].chunks_exact(2) {
                let (seq, end) = (rec[0] as usize, rec[1]);
                let mut wanted = 0u32;
                for &(c, at) in &last[last_off[seq] as usize..last_off[seq + 1] as usize] {
                    if at <= end {
                        break;
                    }
                    if self.cursor[c as usize] != NO_CURSOR {
                        wanted += 1;
                    }
                }
                if wanted == 0 {
                    continue;
                }
                let remaining = offsets[seq + 1] as usize - end as usize - 1;
                if remaining > SCAN_LIMIT {
                    for &(c, at) in &last[last_off[seq] as usize..last_off[seq + 1] as usize] {
                        if at <= end {
                            break;
                        }
                        let c = c as usize;
                        let cur = self.cursor[c];
                        if cur == NO_CURSOR {
                            continue;
                        }
                        let from = self.header[c];
                        let list = &by_item[from..by_item_off[c + 1] as usize];
                        let skip = list.partition_point(|&p| p <= end);
                        self.header[c] = from + skip;
                        new[cur - base] = seq as u32;
                        new[cur - base + 1] = list[skip];
                        self.cursor[c] = cur + 2;
                    }
                    continue;
                }
                if self.next_stamp == u32::MAX - 1 {
                    self.stamp.fill(u32::MAX);
                    self.next_stamp = 0;
                }
                self.next_stamp += 1;
                let stamp = self.next_stamp;
                let mut pos = end as usize + 1;
                loop {
                    let c = items[pos] as usize;
                    if self.stamp[c] != stamp {
                        self.stamp[c] = stamp;
                        let at = self.cursor[c];
                        if at != NO_CURSOR {
                            new[at - base] = seq as u32;
                            new[at - base + 1] = pos as u32;
                            self.cursor[c] = at + 2;
                            wanted -= 1;
                            if wanted == 0 {
                                break;
                            }
                        }
                    }
                    pos += 1;
                }
            }
            self.push_children(frame.depth, base);
            self.clear_counts();
        }
    }

    // ---- bounded gap ---------------------------------------------------------------------

    /// Records: `seq, k, e_1 .. e_k` with the end positions sorted.
    fn run_bounded(&mut self, gap: u32) {
        let items = self.items;
        let offsets = self.offsets;
        let n_seq = offsets.len() - 1;
        // Roots: every frequent item with all its positions.
        for seq in 0..n_seq {
            let stamp = self.new_stamp();
            let weight = self.weight(seq);
            for &c in &items[offsets[seq] as usize..offsets[seq + 1] as usize] {
                self.tally(c, stamp, weight);
            }
        }
        self.select_children();
        let mut total = 0usize;
        for &c in &self.children {
            self.cursor[c as usize] = total;
            total += 2 * self.rows[c as usize] as usize + self.ends[c as usize] as usize;
        }
        self.arena.resize(total, 0);
        for seq in 0..n_seq {
            let stamp = self.new_stamp();
            for pos in offsets[seq] as usize..offsets[seq + 1] as usize {
                self.scatter(0, seq as u32, pos as u32, stamp);
            }
        }
        self.push_children(0, 0);
        self.clear_counts();

        let reach = gap as usize + 1;
        while let Some((frame, want_children)) = self.enter() {
            if !want_children {
                continue;
            }
            let mut at = frame.start;
            while at < frame.end {
                let seq = self.arena[at] as usize;
                let k = self.arena[at + 1] as usize;
                let seq_end = offsets[seq + 1] as usize;
                let stamp = self.new_stamp();
                let weight = self.weight(seq);
                let mut covered = 0usize;
                for i in at + 2..at + 2 + k {
                    let e = self.arena[i] as usize;
                    let lo = (e + 1).max(covered);
                    let hi = (e + 1 + reach).min(seq_end);
                    for &c in items.get(lo..hi).unwrap_or(&[]) {
                        self.tally(c, stamp, weight);
                    }
                    covered = covered.max(hi);
                }
                at += 2 + k;
            }
            self.select_children();
            if self.children.is_empty() {
                self.clear_counts();
                continue;
            }
            let base = self.arena.len();
            let mut total = 0usize;
            for &c in &self.children {
                self.cursor[c as usize] = base + total;
                total += 2 * self.rows[c as usize] as usize + self.ends[c as usize] as usize;
            }
            self.arena.resize(base + total, 0);
            let mut at = frame.start;
            while at < frame.end {
                let seq = self.arena[at] as usize;
                let k = self.arena[at + 1] as usize;
                let seq_end = offsets[seq + 1] as usize;
                let stamp = self.new_stamp();
                let mut covered = 0usize;
                for i in at + 2..at + 2 + k {
                    let e = self.arena[i] as usize;
                    let lo = (e + 1).max(covered);
                    let hi = (e + 1 + reach).min(seq_end);
                    for pos in lo..hi {
                        self.scatter(0, seq as u32, pos as u32, stamp);
                    }
                    covered = covered.max(hi);
                }
                at += 2 + k;
            }
            self.push_children(frame.depth, base);
            self.clear_counts();
        }
    }

    /// Counts one candidate end position of item `c` for the entry marked `stamp`, a
    /// sequence standing for `weight` identical ones.
    #[inline]
    fn tally(&mut self, c: u32, stamp: u32, weight: u32) {
        let i = c as usize;
        if self.rows[i] == 0 && self.ends[i] == 0 {
            self.touched.push(c);
        }
        self.ends[i] += 1;
        if self.stamp[i] != stamp {
            self.stamp[i] = stamp;
            self.support[i] += weight;
            self.rows[i] += 1;
        }
    }

    /// Writes end position `pos` of item `items[pos]` into its child's region (if frequent),
    /// opening a `seq, k` header on the first position of this entry.
    #[inline]
    fn scatter(&mut self, _base: usize, seq: u32, pos: u32, stamp: u32) {
        let c = self.items[pos as usize] as usize;
        let at = self.cursor[c];
        if at == NO_CURSOR {
            return;
        }
        if self.stamp[c] != stamp {
            self.stamp[c] = stamp;
            self.header[c] = at;
            self.arena[at] = seq;
            self.arena[at + 1] = 0;
            self.arena[at + 2] = pos;
            self.cursor[c] = at + 3;
        } else {
            self.arena[at] = pos;
            self.cursor[c] = at + 1;
        }
        self.arena[self.header[c] + 1] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::{Distinct, GappedOptions, SequenceDb, visit_threaded};

    /// Patterns and supports in the order the search reports them.
    fn run(db: &SequenceDb, options: &GappedOptions, threads: usize) -> Vec<(Vec<u32>, u32)> {
        let mut out = Vec::new();
        visit_threaded(db, options, threads, |items, support| {
            out.push((items.to_vec(), support));
        })
        .unwrap();
        out
    }

    #[test]
    fn threads_report_the_same_patterns_in_the_same_order() {
        // 3,000 pseudo-random sequences over 12 items, some repeated, lengths 0 to 39.
        let mut state = 0x9E37_79B9_u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut text = String::new();
        let mut previous = String::new();
        for _ in 0..3000 {
            if next(5) == 0 {
                text.push_str(&previous);
                continue;
            }
            let mut line = String::new();
            for _ in 0..next(40) {
                line.push_str(&format!("{} -1 ", next(12)));
            }
            line.push_str("-2\n");
            text.push_str(&line);
            previous = line;
        }
        let db = SequenceDb::parse_spmf(text.as_bytes()).unwrap();
        for (min_support, min_length) in [(300, 1), (900, 1), (300, 3)] {
            let options = GappedOptions {
                min_support,
                min_length,
                max_length: Some(4),
                ..GappedOptions::default()
            };
            let single = run(&db, &options, 1);
            assert!(single.len() > 50, "too few patterns: {}", single.len());
            assert!(single.iter().all(|(items, _)| items.len() >= min_length));
            for threads in [2, 3] {
                assert_eq!(run(&db, &options, threads), single, "{threads} threads");
            }
        }
    }

    #[test]
    fn distinct_sequences_keep_first_sight_order_and_count_copies() {
        // Sequences: [1 2], [3], [1 2], [], [3], [1 2], [].
        let items = [1, 2, 3, 1, 2, 3, 1, 2];
        let offsets = [0, 2, 3, 5, 5, 6, 8, 8];
        let d = Distinct::of(&items, &offsets).expect("copies found");
        assert_eq!(d.items, vec![1, 2, 3]);
        assert_eq!(d.offsets, vec![0, 2, 3, 3]);
        assert_eq!(d.weights, vec![3, 2, 2]);
        // All distinct: mined as they are.
        assert!(Distinct::of(&[1, 2], &[0, 1, 2]).is_none());
        assert!(Distinct::of(&[], &[0]).is_none());
    }
}
