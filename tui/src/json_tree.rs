//! A JSON value as a foldable tree of display lines, and as raw pretty-printed text.
//!
//! Every line is escaped and cut here (see [`crate::sanitize`]), once, when the value or the
//! folding changes; drawing only copies the prepared text.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::sanitize::{MAX_LINE_CHARS, escape_line};

/// The most children of one array or object listed; the rest are counted on one line.
pub const MAX_CHILDREN: usize = 500;
/// Containers with more children than this start folded.
pub const FOLD_ABOVE: usize = 50;

/// One display line of a JSON tree.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeLine {
    pub depth: usize,
    /// JSON pointer of the node within the tree's root (empty for the root).
    pub pointer: String,
    /// `Some(folded)` for a non-empty array or object, `None` for everything else.
    pub fold: Option<bool>,
    /// The key or index and, for scalars, the value, already escaped.
    pub text: String,
    /// The node lies under an `error` key (drawn highlighted).
    pub is_error: bool,
}

/// Which nodes the reader folded or unfolded, relative to the default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Folding {
    /// Pointers whose folding differs from the default.
    pub toggled: BTreeSet<String>,
    /// `Some(true)`: everything folded; `Some(false)`: everything unfolded; `None`: default.
    pub all: Option<bool>,
}

impl Folding {
    fn is_folded(&self, pointer: &str, children: usize) -> bool {
        let default = match self.all {
            Some(all) => all,
            None => children > FOLD_ABOVE,
        };
        default ^ self.toggled.contains(pointer)
    }

    /// Fold or unfold the node at `pointer`.
    pub fn toggle(&mut self, pointer: &str) {
        if !self.toggled.remove(pointer) {
            self.toggled.insert(pointer.to_string());
        }
    }
}

/// Escape one JSON pointer segment.
pub fn pointer_segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The tree's lines: the root's children at depth 0 (the root itself is not a line).
pub fn tree_lines(root: &Value, folding: &Folding) -> Vec<TreeLine> {
    let mut out = Vec::new();
    match root {
        Value::Object(map) => {
            for (key, value) in map {
                let pointer = format!("/{}", pointer_segment(key));
                walk(
                    &mut out,
                    &escape_line(key, 200),
                    value,
                    pointer,
                    0,
                    key == "error",
                    folding,
                );
            }
        }
        Value::Array(items) => {
            for (i, value) in items.iter().enumerate() {
                walk(
                    &mut out,
                    &i.to_string(),
                    value,
                    format!("/{i}"),
                    0,
                    false,
                    folding,
                );
            }
        }
        scalar => out.push(TreeLine {
            depth: 0,
            pointer: String::new(),
            fold: None,
            text: scalar_text(scalar),
            is_error: false,
        }),
    }
    out
}

fn walk(
    out: &mut Vec<TreeLine>,
    label: &str,
    value: &Value,
    pointer: String,
    depth: usize,
    is_error: bool,
    folding: &Folding,
) {
    let children = match value {
        Value::Object(map) => map.len(),
        Value::Array(items) => items.len(),
        _ => 0,
    };
    if children == 0 {
        out.push(TreeLine {
            depth,
            pointer,
            fold: None,
            text: format!("{label}: {}", scalar_text(value)),
            is_error,
        });
        return;
    }
    let folded = folding.is_folded(&pointer, children);
    let summary = match value {
        Value::Object(_) if children == 1 => "{1 key}".to_string(),
        Value::Object(_) => format!("{{{children} keys}}"),
        _ if children == 1 => "[1 item]".to_string(),
        _ => format!("[{children} items]"),
    };
    out.push(TreeLine {
        depth,
        pointer: pointer.clone(),
        fold: Some(folded),
        text: format!("{label} {summary}"),
        is_error,
    });
    if folded {
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter().take(MAX_CHILDREN) {
                let child_pointer = format!("{pointer}/{}", pointer_segment(key));
                let label = escape_line(key, 200);
                let err = is_error || key == "error";
                walk(out, &label, child, child_pointer, depth + 1, err, folding);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate().take(MAX_CHILDREN) {
                let child_pointer = format!("{pointer}/{i}");
                walk(
                    out,
                    &i.to_string(),
                    child,
                    child_pointer,
                    depth + 1,
                    is_error,
                    folding,
                );
            }
        }
        _ => {}
    }
    if children > MAX_CHILDREN {
        out.push(TreeLine {
            depth: depth + 1,
            pointer: pointer.clone(),
            fold: None,
            text: format!(
                "... {} more (press r for raw JSON)",
                children - MAX_CHILDREN
            ),
            is_error,
        });
    }
}

/// A scalar (or empty container) as one escaped, bounded line.
pub fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(text) => format!("\"{}\"", escape_line(text, MAX_LINE_CHARS)),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
        other => escape_line(&other.to_string(), MAX_LINE_CHARS),
    }
}

/// The value pretty-printed, one escaped, bounded display line per text line. At most
/// `max_lines` lines, then a count of the rest.
pub fn raw_lines(value: &Value, max_lines: usize) -> Vec<String> {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("<{e}>"));
    let mut out = Vec::new();
    let mut lines = text.lines();
    for line in lines.by_ref().take(max_lines) {
        out.push(escape_line(line, MAX_LINE_CHARS));
    }
    let rest = lines.count();
    if rest > 0 {
        out.push(format!("... {rest} more lines"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_pointers_and_folding() {
        let root = json!({"inputs": {"id": 7, "a/b": [1, 2]}, "error": {"message": "boom"}});
        let mut folding = Folding::default();
        let lines = tree_lines(&root, &folding);
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "inputs {2 keys}",
                "id: 7",
                "a/b [2 items]",
                "0: 1",
                "1: 2",
                "error {1 key}",
                "message: \"boom\""
            ]
        );
        assert_eq!(lines[2].pointer, "/inputs/a~1b");
        assert!(lines[6].is_error && !lines[1].is_error);
        folding.toggle("/inputs");
        let folded = tree_lines(&root, &folding);
        assert_eq!(folded.len(), 3);
        assert_eq!(folded[0].fold, Some(true));
        folding.toggle("/inputs");
        assert_eq!(tree_lines(&root, &folding).len(), 7);
        folding.all = Some(true);
        folding.toggled.clear();
        assert_eq!(tree_lines(&root, &folding).len(), 2);
    }

    #[test]
    fn numbers_keep_their_text_and_big_containers_start_folded() {
        let root: Value = serde_json::from_str(r#"{"price": 10.50, "big": [0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0]}"#).unwrap();
        let lines = tree_lines(&root, &Folding::default());
        assert_eq!(lines[0].text, "price: 10.50");
        assert_eq!(lines[1].fold, Some(true));
        assert_eq!(lines.len(), 2);
    }

    #[test]
    fn raw_lines_are_escaped_and_capped() {
        let value = json!({"s": "a\u{1b}b", "list": [1, 2, 3]});
        let lines = raw_lines(&value, 3);
        assert_eq!(lines[1], "  \"s\": \"a\\u001bb\",");
        assert_eq!(lines.last().unwrap(), "... 5 more lines");
    }
}
