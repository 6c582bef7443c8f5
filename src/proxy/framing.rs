//! Cutting a copy of one direction's byte stream into lines (MCP's stdio framing: one JSON-RPC
//! message a line).
//!
//! The relay hands over the bytes it forwarded in chunks of any size. A chunk may hold several
//! lines or a piece of one; a line too long to be worth parsing, or one a piece of which the
//! relay could not hand over (the observer fell behind), is skipped up to its newline and
//! counted, and framing carries on with the next line.

/// Lines cut from one direction's bytes.
#[derive(Debug)]
pub struct LineFramer {
    /// The start of a line whose newline has not arrived yet.
    partial: Vec<u8>,
    /// Skip everything up to the next newline (a line too long, or with a piece missing).
    skipping: bool,
    /// The longest line handed on; longer ones are skipped.
    max_line: usize,
    /// Lines skipped because they were longer than `max_line`.
    pub oversized: u64,
    /// Lines skipped because a piece of them was not handed over.
    pub incomplete: u64,
}

impl LineFramer {
    /// A framer handing on lines of at most `max_line` bytes (the newline not counted).
    pub fn new(max_line: usize) -> Self {
        Self {
            partial: Vec::new(),
            skipping: false,
            max_line,
            oversized: 0,
            incomplete: 0,
        }
    }

    /// Take the next chunk. `gap` says bytes are missing before it (the line under way is
    /// lost). Each complete line, without its line ending, goes to `line`.
    pub fn push(&mut self, chunk: &[u8], gap: bool, mut line: impl FnMut(&[u8])) {
        if gap {
            if !self.partial.is_empty() || !self.skipping {
                // The line under way (or one that started in the missing bytes) is lost.
                self.incomplete += 1;
            }
            self.partial.clear();
            self.skipping = true;
        }
        let mut rest = chunk;
        while let Some(newline) = rest.iter().position(|&b| b == b'\n') {
            let piece = &rest[..newline];
            rest = &rest[newline + 1..];
            if self.skipping {
                self.skipping = false;
                continue;
            }
            if self.partial.len() + piece.len() > self.max_line {
                self.oversized += 1;
                self.partial.clear();
                continue;
            }
            if self.partial.is_empty() {
                line(trim_cr(piece));
            } else {
                self.partial.extend_from_slice(piece);
                line(trim_cr(&self.partial));
                self.partial.clear();
            }
        }
        if self.skipping || rest.is_empty() {
            return;
        }
        if self.partial.len() + rest.len() > self.max_line {
            self.oversized += 1;
            self.partial = Vec::new();
            self.skipping = true;
        } else {
            self.partial.extend_from_slice(rest);
        }
    }

    /// The end of the stream: a last line without a newline is handed on.
    pub fn finish(&mut self, mut line: impl FnMut(&[u8])) {
        if !self.skipping && !self.partial.is_empty() {
            line(trim_cr(&self.partial));
        }
        self.partial = Vec::new();
        self.skipping = false;
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(framer: &mut LineFramer, chunks: &[(&str, bool)]) -> Vec<String> {
        let mut out = Vec::new();
        for (chunk, gap) in chunks {
            framer.push(chunk.as_bytes(), *gap, |l| {
                out.push(String::from_utf8_lossy(l).into_owned())
            });
        }
        framer.finish(|l| out.push(String::from_utf8_lossy(l).into_owned()));
        out
    }

    #[test]
    fn lines_are_cut_across_chunks_of_any_size() {
        let text = "{\"a\":1}\n{\"b\":2}\r\n\n{\"c\":3}";
        for size in 1..text.len() {
            let chunks: Vec<(&str, bool)> = text
                .as_bytes()
                .chunks(size)
                .map(|c| (std::str::from_utf8(c).unwrap(), false))
                .collect();
            let mut framer = LineFramer::new(1024);
            assert_eq!(
                lines_of(&mut framer, &chunks),
                ["{\"a\":1}", "{\"b\":2}", "", "{\"c\":3}"],
                "chunk size {size}"
            );
        }
    }

    #[test]
    fn a_line_over_the_limit_is_skipped_and_counted() {
        let mut framer = LineFramer::new(5);
        let lines = lines_of(
            &mut framer,
            &[
                ("abc\n0123", false),
                ("456789", false),
                ("xyz\nok\n", false),
            ],
        );
        assert_eq!(lines, ["abc", "ok"]);
        assert_eq!(framer.oversized, 1);
        let mut framer = LineFramer::new(5);
        assert_eq!(lines_of(&mut framer, &[("toolong\nok\n", false)]), ["ok"]);
        assert_eq!(framer.oversized, 1);
    }

    #[test]
    fn a_gap_loses_only_the_line_it_falls_in() {
        let mut framer = LineFramer::new(1024);
        let lines = lines_of(
            &mut framer,
            &[
                ("one\ntw", false),
                ("o-end\nthree\n", true),
                ("four\n", false),
            ],
        );
        assert_eq!(lines, ["one", "three", "four"]);
        assert_eq!(framer.incomplete, 1);
    }
}
