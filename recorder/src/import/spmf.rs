//! `spmf`: SPMF sequence files, the format of the sequential-pattern-mining benchmarks. Each line
//! is a sequence: itemsets of integer items, each itemset ended by `-1`, the sequence by `-2`.
//! Each line becomes a trace named `<file stem>:<line>` and each item a step whose tool is the
//! item (its name from an `@ITEM=<id>=<name>` header line when the file has one) with inputs `{}`.
//! Items of one itemset become consecutive steps; when an itemset holds more than one item, each
//! step's metadata records its `itemset` number. Lines starting with `#`, `%` or `@` are comments
//! or headers; `<n>` timestamps are skipped.

use std::collections::HashMap;
use std::io::BufReader;

use serde_json::{Map, Value};

use super::records::{Line, LineReader, line_text, open};
use super::values::excerpt_bytes;
use super::{Output, Position, RejectUnit};
use crate::error::{RecorderError, Result};
use crate::model::{ObservedStep, ObservedTrace};

/// Imports the SPMF file at `out.path`.
pub(crate) fn import(out: &mut Output<'_>) -> Result<()> {
    let path = out.path.clone();
    let file = open(&path)?;
    let mut lines = LineReader::new(
        BufReader::with_capacity(256 * 1024, file),
        out.max_record_bytes,
    );
    let mut names: HashMap<String, String> = HashMap::new();
    let mut buf = Vec::new();
    let mut sequence_index = 0u64;
    while let Some(line) = lines
        .next_line(&mut buf)
        .map_err(|source| RecorderError::Io {
            path: path.clone(),
            source,
        })?
    {
        let at = Position {
            line: lines.line_number,
            unit: RejectUnit::Line,
        };
        out.advance(lines.bytes_read);
        if let Line::TooLong(length) = line {
            let reason = format!(
                "line is {length} bytes, longer than the {} byte limit",
                out.max_record_bytes
            );
            out.reject(at, reason, String::new());
            continue;
        }
        let text = match line_text(&buf) {
            Ok(text) => text.trim(),
            Err(reason) => {
                out.reject(at, reason, excerpt_bytes(&buf));
                continue;
            }
        };
        if text.is_empty() || text.starts_with(['#', '%']) {
            continue;
        }
        if let Some(header) = text.strip_prefix('@') {
            if let Some((id, name)) = header.strip_prefix("ITEM=").and_then(|r| r.split_once('=')) {
                names.insert(id.to_owned(), name.to_owned());
            }
            continue;
        }
        match parse_sequence(text, &names) {
            Ok(items) => {
                let trace_id = format!("{}:{}", out.stem, at.line);
                let mut trace = ObservedTrace::new(trace_id.clone(), String::new());
                trace
                    .metadata
                    .insert("sequence_index".to_owned(), Value::from(sequence_index));
                sequence_index += 1;
                let steps = items
                    .into_iter()
                    .map(|(tool, itemset)| {
                        let mut step =
                            ObservedStep::new(trace_id.clone(), 0, tool, Value::Object(Map::new()));
                        if let Some(itemset) = itemset {
                            step.metadata
                                .insert("itemset".to_owned(), Value::from(itemset));
                        }
                        step
                    })
                    .collect();
                out.emit(trace, steps)?;
            }
            Err(reason) => out.reject(at, reason, excerpt_bytes(&buf)),
        }
    }
    Ok(())
}

/// The items of one sequence line, each with its itemset number when its itemset has several.
fn parse_sequence(
    text: &str,
    names: &HashMap<String, String>,
) -> Result<Vec<(String, Option<u64>)>, String> {
    let mut items = Vec::new();
    let mut itemset: Vec<String> = Vec::new();
    let mut itemset_number = 0u64;
    let mut ended = false;
    let flush =
        |itemset: &mut Vec<String>, number: &mut u64, items: &mut Vec<(String, Option<u64>)>| {
            let several = itemset.len() > 1;
            for item in itemset.drain(..) {
                items.push((item, several.then_some(*number)));
            }
            *number += 1;
        };
    for token in text.split_whitespace() {
        if ended {
            return Err(format!(
                "unexpected {token:?} after the sequence's end marker -2"
            ));
        }
        match token {
            "-1" => flush(&mut itemset, &mut itemset_number, &mut items),
            "-2" => {
                flush(&mut itemset, &mut itemset_number, &mut items);
                ended = true;
            }
            _ if token.starts_with('<') && token.ends_with('>') => {}
            _ => {
                if token.parse::<u64>().is_err() {
                    return Err(format!(
                        "{token:?} is not an item (a non-negative integer), -1 or -2"
                    ));
                }
                let name = names
                    .get(token)
                    .cloned()
                    .unwrap_or_else(|| token.to_owned());
                itemset.push(name);
            }
        }
    }
    // A last itemset without its -1 / -2 still counts: SPMF writers differ on the final markers.
    flush(&mut itemset, &mut itemset_number, &mut items);
    if items.is_empty() {
        return Err("the sequence has no items".to_owned());
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_and_itemsets() {
        let names = HashMap::new();
        let items = parse_sequence("5 -1 15 -1 23 -1 -2", &names).unwrap();
        assert_eq!(
            items,
            vec![("5".into(), None), ("15".into(), None), ("23".into(), None)]
        );
        let items = parse_sequence("1 2 -1 3 -1 -2", &names).unwrap();
        assert_eq!(
            items,
            vec![
                ("1".into(), Some(0)),
                ("2".into(), Some(0)),
                ("3".into(), None)
            ]
        );
        assert_eq!(
            parse_sequence("<0> 4 -1 <1> 5 -1 -2", &names)
                .unwrap()
                .len(),
            2
        );
        assert_eq!(parse_sequence("4 -1 5", &names).unwrap().len(), 2);
    }

    #[test]
    fn names_from_headers() {
        let names = HashMap::from([("1".to_owned(), "fetch".to_owned())]);
        assert_eq!(
            parse_sequence("1 -1 2 -1 -2", &names).unwrap()[0].0,
            "fetch"
        );
    }

    #[test]
    fn bad_sequences() {
        let names = HashMap::new();
        assert!(
            parse_sequence("a -1 -2", &names)
                .unwrap_err()
                .contains("\"a\"")
        );
        assert!(
            parse_sequence("-2", &names)
                .unwrap_err()
                .contains("no items")
        );
        assert!(
            parse_sequence("1 -1 -2 7", &names)
                .unwrap_err()
                .contains("after")
        );
    }
}
