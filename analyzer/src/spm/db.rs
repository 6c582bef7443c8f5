//! The sequence database: interned item ids in one flat array, SPMF reading and writing, and
//! the X/D corpus generators used by the benchmarks.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use super::error::SpmError;
use crate::fast_hash::FastMap;

/// Positions are 32-bit inside the miners; one extra slot per sequence keeps ends addressable.
const MAX_POSITIONS: u64 = u32::MAX as u64 - 1;

/// Raw SPMF item numbers below this are interned through a flat table instead of a hash map.
const DIRECT_INTERN_LIMIT: u32 = 1 << 22;

/// Sequences of interned item ids, stored flat: sequence `i` is
/// `items[offsets[i]..offsets[i + 1]]`. Item ids are dense (`0..num_items()`), assigned in order
/// of first appearance, and [`SequenceDb::name`] maps them back to their tool name or SPMF label.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SequenceDb {
    items: Vec<u32>,
    offsets: Vec<u32>,
    names: Vec<String>,
}

impl SequenceDb {
    /// An empty database (no sequences).
    pub fn new() -> Self {
        Self {
            items: Vec::new(),
            offsets: vec![0],
            names: Vec::new(),
        }
    }

    /// Builds a database from sequences of tool names, interning every name.
    pub fn from_sequences<S, I, T>(sequences: S) -> Result<Self, SpmError>
    where
        S: IntoIterator<Item = I>,
        I: IntoIterator<Item = T>,
        T: AsRef<str>,
    {
        let mut builder = SequenceDbBuilder::new();
        for sequence in sequences {
            builder.push_sequence(sequence)?;
        }
        Ok(builder.finish())
    }

    /// Parses SPMF text (`item -1 item -1 -2` per line). Blank lines and lines starting with
    /// `#`, `%` or `@` are skipped; a missing final `-2` is accepted; anything else that is not
    /// a single non-negative integer per itemset is an error naming the line.
    pub fn parse_spmf(text: &[u8]) -> Result<Self, SpmError> {
        parse_spmf_named(text, "<input>")
    }

    /// Reads and parses an SPMF file; errors name the file and line.
    pub fn read_spmf(path: impl AsRef<Path>) -> Result<Self, SpmError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| SpmError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        parse_spmf_named(&bytes, &path.display().to_string())
    }

    /// Writes the database in SPMF format, one sequence a line, items written by name.
    pub fn write_spmf(&self, mut out: impl Write) -> std::io::Result<()> {
        let mut line = Vec::with_capacity(256);
        for sequence in self.sequences() {
            line.clear();
            for &item in sequence {
                line.extend_from_slice(self.names[item as usize].as_bytes());
                line.extend_from_slice(b" -1 ");
            }
            line.extend_from_slice(b"-2\n");
            out.write_all(&line)?;
        }
        Ok(())
    }

    /// Number of sequences.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when there are no sequences.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total number of steps (items) over all sequences.
    pub fn num_steps(&self) -> usize {
        self.items.len()
    }

    /// Number of distinct items.
    pub fn num_items(&self) -> usize {
        self.names.len()
    }

    /// Sequence `index`.
    pub fn sequence(&self, index: usize) -> &[u32] {
        &self.items[self.offsets[index] as usize..self.offsets[index + 1] as usize]
    }

    /// All sequences in order.
    pub fn sequences(&self) -> impl ExactSizeIterator<Item = &[u32]> + '_ {
        self.offsets
            .windows(2)
            .map(|w| &self.items[w[0] as usize..w[1] as usize])
    }

    /// The flat item array.
    pub fn items(&self) -> &[u32] {
        &self.items
    }

    /// Sequence boundaries: `len() + 1` entries, starting at 0.
    pub fn offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// The name (tool name or SPMF label) of item `id`.
    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// The id -> name table.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The id of `name`, if it occurs.
    pub fn id_of(&self, name: &str) -> Option<u32> {
        self.names.iter().position(|n| n == name).map(|i| i as u32)
    }

    /// The database repeated `copies` times in a row (the X corpora: every support scales by
    /// `copies`, the patterns stay the same).
    pub fn repeated(&self, copies: usize) -> Result<Self, SpmError> {
        check_size(
            self.items.len() as u64 * copies as u64,
            self.len() as u64 * copies as u64,
        )?;
        let mut items = Vec::with_capacity(self.items.len() * copies);
        let mut offsets = Vec::with_capacity(self.len() * copies + 1);
        offsets.push(0);
        for _ in 0..copies {
            let base = items.len() as u32;
            items.extend_from_slice(&self.items);
            offsets.extend(self.offsets[1..].iter().map(|&o| base + o));
        }
        Ok(Self {
            items,
            offsets,
            names: self.names.clone(),
        })
    }

    /// `copies` copies of the database where copy `r` renames numeric label `x` to
    /// `x + stride * r` (the D corpora: with `stride` above every label, copies share no item,
    /// so every pattern count multiplies by `copies`). Labels must be non-negative integers.
    pub fn disjoint_copies(&self, copies: usize, stride: u64) -> Result<Self, SpmError> {
        check_size(
            self.items.len() as u64 * copies as u64,
            self.len() as u64 * copies as u64,
        )?;
        let labels = self
            .names
            .iter()
            .map(|n| {
                n.parse::<u64>()
                    .map_err(|_| SpmError::NonNumericLabel { label: n.clone() })
            })
            .collect::<Result<Vec<u64>, _>>()?;
        let mut builder = SequenceDbBuilder::new();
        let mut map = Vec::with_capacity(labels.len() * copies);
        for r in 0..copies as u64 {
            for &label in &labels {
                map.push(builder.intern(&(label + stride * r).to_string()));
            }
        }
        let mut items = Vec::with_capacity(self.items.len() * copies);
        let mut offsets = Vec::with_capacity(self.len() * copies + 1);
        offsets.push(0);
        let width = labels.len();
        for r in 0..copies {
            let base = items.len() as u32;
            let table = &map[r * width..(r + 1) * width];
            items.extend(self.items.iter().map(|&i| table[i as usize]));
            offsets.extend(self.offsets[1..].iter().map(|&o| base + o));
        }
        Ok(Self {
            items,
            offsets,
            names: builder.names,
        })
    }
}

fn check_size(steps: u64, sequences: u64) -> Result<(), SpmError> {
    if steps + sequences > MAX_POSITIONS {
        return Err(SpmError::TooLarge {
            steps: steps + sequences,
            limit: MAX_POSITIONS,
        });
    }
    Ok(())
}

/// Builds a [`SequenceDb`] from tool-name sequences, interning names to dense ids.
#[derive(Debug, Default)]
pub struct SequenceDbBuilder {
    items: Vec<u32>,
    offsets: Vec<u32>,
    names: Vec<String>,
    index: FastMap<String, u32>,
}

impl SequenceDbBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            offsets: vec![0],
            ..Self::default()
        }
    }

    /// The id of `name`, assigning the next free id on first sight.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_owned());
        self.index.insert(name.to_owned(), id);
        id
    }

    /// Appends one sequence of names.
    pub fn push_sequence<I, T>(&mut self, sequence: I) -> Result<(), SpmError>
    where
        I: IntoIterator<Item = T>,
        T: AsRef<str>,
    {
        for name in sequence {
            let id = self.intern(name.as_ref());
            self.items.push(id);
        }
        check_size(self.items.len() as u64, self.offsets.len() as u64)?;
        self.offsets.push(self.items.len() as u32);
        Ok(())
    }

    /// Appends the sequences of `other` after this builder's, as if they had been pushed here
    /// in order: names new to this builder get the next ids in `other`'s first-seen order, so
    /// builders filled from consecutive chunks of the input (on several threads) and appended
    /// in order give the same database as one builder fed everything.
    pub fn append(&mut self, other: SequenceDbBuilder) -> Result<(), SpmError> {
        let ids: Vec<u32> = other.names.iter().map(|name| self.intern(name)).collect();
        let base = *self.offsets.last().unwrap_or(&0);
        check_size(
            self.items.len() as u64 + other.items.len() as u64,
            self.offsets.len() as u64 + other.offsets.len() as u64,
        )?;
        self.items
            .extend(other.items.iter().map(|&local| ids[local as usize]));
        self.offsets
            .extend(other.offsets.iter().skip(1).map(|&offset| base + offset));
        Ok(())
    }

    /// The finished database.
    pub fn finish(self) -> SequenceDb {
        SequenceDb {
            items: self.items,
            offsets: self.offsets,
            names: self.names,
        }
    }
}

/// Interns raw SPMF item numbers: a flat table for small numbers, a hash map beyond.
struct NumericInterner {
    direct: Vec<u32>,
    sparse: HashMap<u32, u32>,
    names: Vec<String>,
}

impl NumericInterner {
    fn intern(&mut self, raw: u32) -> u32 {
        if raw < DIRECT_INTERN_LIMIT {
            let slot = raw as usize;
            if slot >= self.direct.len() {
                self.direct
                    .resize((slot + 1).max(self.direct.len() * 2), u32::MAX);
            }
            let id = self.direct[slot];
            if id != u32::MAX {
                return id;
            }
            let id = self.names.len() as u32;
            self.direct[slot] = id;
            self.names.push(raw.to_string());
            id
        } else {
            let next = self.names.len() as u32;
            let id = *self.sparse.entry(raw).or_insert(next);
            if id == next {
                self.names.push(raw.to_string());
            }
            id
        }
    }
}

fn parse_spmf_named(text: &[u8], source_name: &str) -> Result<SequenceDb, SpmError> {
    let error = |line: usize, message: String| SpmError::Spmf {
        source_name: source_name.to_owned(),
        line: line as u64 + 1,
        message,
    };
    let mut interner = NumericInterner {
        direct: Vec::new(),
        sparse: HashMap::new(),
        names: Vec::new(),
    };
    // A step is at least three bytes ("1 -1 " is five); reserving a fifth of the input avoids
    // most regrowth without overcommitting.
    let mut items: Vec<u32> = Vec::with_capacity(text.len() / 5);
    let mut offsets: Vec<u32> = vec![0];
    for (line_no, raw_line) in text.split(|&b| b == b'\n').enumerate() {
        let line = trim_ascii(raw_line);
        match line.first() {
            None | Some(b'#' | b'%' | b'@') => continue,
            _ => {}
        }
        // `pending` holds the current itemset's item until its `-1`.
        let mut pending: Option<u32> = None;
        let mut ended = false;
        let mut pos = 0;
        while pos < line.len() {
            let b = line[pos];
            if b == b' ' || b == b'\t' {
                pos += 1;
                continue;
            }
            let start = pos;
            while pos < line.len() && line[pos] != b' ' && line[pos] != b'\t' {
                pos += 1;
            }
            let token = &line[start..pos];
            if ended {
                return Err(error(
                    line_no,
                    format!("unexpected {:?} after -2", String::from_utf8_lossy(token)),
                ));
            }
            match token {
                b"-1" => match pending.take() {
                    Some(item) => items.push(item),
                    None => return Err(error(line_no, "empty itemset before -1".to_owned())),
                },
                b"-2" => {
                    if let Some(item) = pending.take() {
                        items.push(item);
                    }
                    ended = true;
                }
                _ => {
                    let raw = parse_u32(token).ok_or_else(|| {
                        error(
                            line_no,
                            format!(
                                "expected an item number, -1 or -2, found {:?}",
                                String::from_utf8_lossy(token)
                            ),
                        )
                    })?;
                    if pending.is_some() {
                        return Err(error(
                            line_no,
                            "an itemset holds more than one item; only sequences of single items \
                             are supported"
                                .to_owned(),
                        ));
                    }
                    pending = Some(interner.intern(raw));
                }
            }
        }
        if let Some(item) = pending {
            items.push(item);
        }
        check_size(items.len() as u64, offsets.len() as u64)?;
        offsets.push(items.len() as u32);
    }
    items.shrink_to_fit();
    Ok(SequenceDb {
        items,
        offsets,
        names: interner.names,
    })
}

fn trim_ascii(mut line: &[u8]) -> &[u8] {
    while let [rest @ .., last] = line {
        if last.is_ascii_whitespace() {
            line = rest;
        } else {
            break;
        }
    }
    while let [first, rest @ ..] = line {
        if first.is_ascii_whitespace() {
            line = rest;
        } else {
            break;
        }
    }
    line
}

fn parse_u32(token: &[u8]) -> Option<u32> {
    if token.is_empty() || token.len() > 10 {
        return None;
    }
    let mut value: u64 = 0;
    for &b in token {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u64::from(b - b'0');
    }
    u32::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_chunks_equal_one_builder() {
        let sequences: Vec<Vec<&str>> = vec![
            vec!["b", "a"],
            vec![],
            vec!["a", "c", "b"],
            vec!["d", "c"],
            vec!["e", "a", "d"],
        ];
        let mut whole = SequenceDbBuilder::new();
        for sequence in &sequences {
            whole.push_sequence(sequence.iter()).unwrap();
        }
        let whole = whole.finish();
        for split in 0..=sequences.len() {
            let mut first = SequenceDbBuilder::new();
            let mut second = SequenceDbBuilder::new();
            for (i, sequence) in sequences.iter().enumerate() {
                let builder = if i < split { &mut first } else { &mut second };
                builder.push_sequence(sequence.iter()).unwrap();
            }
            first.append(second).unwrap();
            let joined = first.finish();
            assert_eq!(joined.names(), whole.names(), "split at {split}");
            assert_eq!(joined.items(), whole.items(), "split at {split}");
            assert_eq!(joined.offsets(), whole.offsets(), "split at {split}");
        }
    }

    #[test]
    fn parses_lines_blank_lines_and_trailing_empty_line() {
        let db = SequenceDb::parse_spmf(b"1 -1 2 -1 -2\n\n3 -1 1 -1 -2\r\n-2\n\n").unwrap();
        assert_eq!(db.len(), 3);
        assert_eq!(db.sequence(0), &[0, 1]);
        assert_eq!(db.sequence(1), &[2, 0]);
        assert_eq!(db.sequence(2), &[] as &[u32]);
        assert_eq!(db.names(), &["1", "2", "3"]);
    }

    #[test]
    fn garbage_names_the_line() {
        let err = SequenceDb::parse_spmf(b"1 -1 -2\n1 -1 x -1 -2\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "<input>:2: expected an item number, -1 or -2, found \"x\""
        );
        let err = SequenceDb::parse_spmf(b"1 2 -1 -2\n").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("<input>:1: an itemset holds more")
        );
        let err = SequenceDb::parse_spmf(b"1 -1 -2 4\n").unwrap_err();
        assert!(err.to_string().contains("after -2"), "{err}");
        let err = SequenceDb::parse_spmf(b"1 -1 -1 -2\n").unwrap_err();
        assert!(err.to_string().contains("empty itemset"), "{err}");
        let err = SequenceDb::parse_spmf(b"99999999999 -1 -2\n").unwrap_err();
        assert!(err.to_string().contains("99999999999"), "{err}");
    }

    #[test]
    fn large_labels_use_the_sparse_interner() {
        let db = SequenceDb::parse_spmf(b"4000000000 -1 7 -1 4000000000 -1 -2\n").unwrap();
        assert_eq!(db.sequence(0), &[0, 1, 0]);
        assert_eq!(db.name(0), "4000000000");
    }

    #[test]
    fn round_trips_through_spmf() {
        let db = SequenceDb::from_sequences([vec!["5", "7"], vec![], vec!["7"]]).unwrap();
        let mut out = Vec::new();
        db.write_spmf(&mut out).unwrap();
        assert_eq!(out, b"5 -1 7 -1 -2\n-2\n7 -1 -2\n");
        assert_eq!(SequenceDb::parse_spmf(&out).unwrap(), db);
    }

    #[test]
    fn generators_repeat_and_shift() {
        let db = SequenceDb::parse_spmf(b"1 -1 2 -1 -2\n2 -1 -2\n").unwrap();
        let x = db.repeated(3).unwrap();
        assert_eq!(x.len(), 6);
        assert_eq!(x.sequence(4), &[0, 1]);
        let d = db.disjoint_copies(2, 1000).unwrap();
        assert_eq!(d.len(), 4);
        assert_eq!(d.names(), &["1", "2", "1001", "1002"]);
        assert_eq!(d.sequence(2), &[2, 3]);
        let named = SequenceDb::from_sequences([["a"]]).unwrap();
        assert!(matches!(
            named.disjoint_copies(2, 10),
            Err(SpmError::NonNumericLabel { .. })
        ));
    }
}
