//! JSON documents of a Parquet dataset: `documents/<kind>/<key>.json`, one file each.
//!
//! Kinds and keys are escaped into file names: ASCII lowercase letters, digits, `_` and `-`
//! stay as they are, `.` stays except at the start; every other byte of the UTF-8 text becomes
//! `%XX` (uppercase hex). Uppercase letters are escaped too, so two keys differing only in case
//! never share a file on a case-insensitive file system.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{atomic_write, io_error, nonce, sync_dir};
use crate::error::{RecorderError, Result};

const SUFFIX: &str = ".json";

/// The file-name form of a kind or key.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, byte) in text.bytes().enumerate() {
        let keep = byte.is_ascii_lowercase()
            || byte.is_ascii_digit()
            || byte == b'_'
            || byte == b'-'
            || (byte == b'.' && i > 0);
        if keep {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The text a file name stands for, `None` when it is not something [`escape`] writes.
pub(super) fn unescape(name: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(name.len());
    let mut rest = name.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = tail.get(..2)?;
            let hex = std::str::from_utf8(hex).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// Where the documents live and how they are read and written.
pub(super) struct Documents<'a> {
    pub root: &'a Path,
}

impl Documents<'_> {
    fn kind_dir(&self, kind: &str) -> Result<PathBuf> {
        if kind.is_empty() {
            return Err(self.invalid("a document kind must not be empty"));
        }
        Ok(self.root.join("documents").join(escape(kind)))
    }

    fn file(&self, kind: &str, key: &str) -> Result<PathBuf> {
        if key.is_empty() {
            return Err(self.invalid("a document key must not be empty"));
        }
        Ok(self
            .kind_dir(kind)?
            .join(format!("{}{SUFFIX}", escape(key))))
    }

    fn invalid(&self, message: &str) -> RecorderError {
        RecorderError::Parquet {
            path: self.root.to_path_buf(),
            message: message.to_owned(),
        }
    }

    fn parse(&self, file: &Path, text: &str) -> Result<Value> {
        serde_json::from_str(text).map_err(|e| RecorderError::CorruptStore {
            path: file.to_path_buf(),
            message: format!("document is not valid JSON: {e}"),
        })
    }

    pub fn put(&self, kind: &str, key: &str, document: &Value) -> Result<()> {
        let file = self.file(kind, key)?;
        atomic_write(&file, document.to_string().as_bytes())
    }

    pub fn get(&self, kind: &str, key: &str) -> Result<Option<Value>> {
        let file = self.file(kind, key)?;
        match fs::read_to_string(&file) {
            Ok(text) => Ok(Some(self.parse(&file, &text)?)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(&file, e)),
        }
    }

    pub fn list(&self, kind: &str) -> Result<Vec<(String, Value)>> {
        let dir = self.kind_dir(kind)?;
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error(&dir, e)),
        };
        let mut documents = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            // Temporary files start with `.`; anything else foreign is skipped too.
            let Some(stem) = name.strip_suffix(SUFFIX) else {
                continue;
            };
            if stem.starts_with('.') {
                continue;
            }
            let Some(key) = unescape(stem) else { continue };
            let file = entry.path();
            let text = fs::read_to_string(&file).map_err(|e| io_error(&file, e))?;
            documents.push((key, self.parse(&file, &text)?));
        }
        documents.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(documents)
    }

    /// Replace each kind of `clear` whole, then put the other documents one by one. A cleared
    /// kind's new documents are written into a staging folder first (each file synced), which
    /// then takes the kind folder's place by renames: a reader sees all old or all new
    /// documents of a kind, and a crash leaves only hidden staging folders behind (readers skip
    /// names starting with `.`, and the next batch removes them).
    pub fn write_batch(&self, clear: &[&str], put: &[(&str, &str, &Value)]) -> Result<()> {
        let documents = self.root.join("documents");
        self.remove_leftovers(&documents)?;
        let batch = nonce();
        for kind in clear {
            let live = self.kind_dir(kind)?;
            let staged = documents.join(format!(".staged-{batch}-{}", escape(kind)));
            fs::create_dir_all(&staged).map_err(|e| io_error(&staged, e))?;
            for (_, key, document) in put.iter().filter(|(k, _, _)| k == kind) {
                if key.is_empty() {
                    return Err(self.invalid("a document key must not be empty"));
                }
                let file = staged.join(format!("{}{SUFFIX}", escape(key)));
                atomic_write(&file, document.to_string().as_bytes())?;
            }
            let retired = documents.join(format!(".retired-{batch}-{}", escape(kind)));
            match fs::rename(&live, &retired) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(&live, e)),
            }
            fs::rename(&staged, &live).map_err(|e| io_error(&live, e))?;
            sync_dir(&documents)?;
            match fs::remove_dir_all(&retired) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(&retired, e)),
            }
        }
        for (kind, key, document) in put.iter().filter(|(k, _, _)| !clear.contains(k)) {
            self.put(kind, key, document)?;
        }
        Ok(())
    }

    /// Staging and retired folders an interrupted batch left behind.
    fn remove_leftovers(&self, documents: &Path) -> Result<()> {
        let entries = match fs::read_dir(documents) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_error(documents, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| io_error(documents, e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(".staged-") || name.starts_with(".retired-") {
                let path = entry.path();
                fs::remove_dir_all(&path).map_err(|e| io_error(&path, e))?;
            }
        }
        Ok(())
    }

    pub fn delete(&self, kind: &str, key: &str) -> Result<bool> {
        let file = self.file(kind, key)?;
        match fs::remove_file(&file) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error(&file, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips_and_is_path_safe() {
        for key in [
            "a",
            "Flow/../x",
            ".hidden",
            "..",
            "ключ 1",
            "a%20b",
            "UPPER",
            "x.json",
        ] {
            let escaped = escape(key);
            assert!(!escaped.contains('/'), "{escaped}");
            assert!(!escaped.starts_with('.'), "{escaped}");
            assert!(
                !escaped
                    .chars()
                    .any(|c| c.is_ascii_uppercase() && !is_hex_escape(&escaped, c))
            );
            assert_eq!(unescape(&escaped).as_deref(), Some(key));
        }
        assert_ne!(escape("A"), escape("a"));
        assert_eq!(escape("my-flow_v1.2"), "my-flow_v1.2");
        assert_eq!(unescape("%4"), None);
        assert_eq!(unescape("%FF"), None);
    }

    fn is_hex_escape(escaped: &str, c: char) -> bool {
        // Uppercase letters only appear as hex digits of `%XX`.
        ('A'..='F').contains(&c) && escaped.contains('%')
    }
}
