//! JSON documents of a Parquet dataset: `documents/<kind>/<key>.json`, one file each, and the
//! documents a batch replaced the kind with, together in `documents/<kind>/_pack.jsonl`.
//!
//! A mining run replaces about a thousand documents at once; creating a file each cost it most
//! of its time on some file systems. A kind replaced whole is therefore written as one pack, one
//! line `{"key": KEY, "document": DOCUMENT}` a document, sorted by key. A document put or
//! deleted on its own afterwards is its own file as before: a file wins over the pack's line of
//! its key, and a delete also rewrites the pack without that key.
//!
//! Kinds and keys are escaped into file names: ASCII lowercase letters, digits, `_` and `-`
//! stay as they are, `.` stays except at the start; every other byte of the UTF-8 text becomes
//! `%XX` (uppercase hex). Uppercase letters are escaped too, so two keys differing only in case
//! never share a file on a case-insensitive file system.
//!
//! A key whose escaped name would be longer than [`MAX_NAME`] bytes (file systems refuse names
//! past 255) is stored under a shortened name instead: the escaped key's first bytes, `~` (which
//! [`escape`] never writes), and the key's sha256 in hex; that file holds an envelope
//! `{"key": KEY, "document": DOCUMENT}`, so the key is read back from the file, not its name.

use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{
    atomic_write, io_error, nonce, open_lock_file, parquet_error, raise_marker, sync_dir,
    temporary_beside,
};
use crate::error::{RecorderError, Result};

const SUFFIX: &str = ".json";

/// The file a batch writes a replaced kind's documents to. Not `.json`, so never a key's file.
pub(super) const PACK: &str = "_pack.jsonl";

/// One line of a pack: read with the document kept as text until it is asked for
/// (`PackLine<String, &RawValue>`), written from borrowed documents (`PackLine<&str, &Value>`).
#[derive(serde::Deserialize, serde::Serialize)]
struct PackLine<K, D> {
    key: K,
    document: D,
}

/// The text of the pack at `path`: one line a document, in key order (the last of a key given
/// twice winning).
fn pack_text<'a>(
    path: &Path,
    documents: impl IntoIterator<Item = (&'a str, &'a Value)>,
) -> Result<String> {
    let sorted: std::collections::BTreeMap<&str, &Value> = documents.into_iter().collect();
    let mut text = String::new();
    for (key, document) in sorted {
        let line = serde_json::to_string(&PackLine { key, document })
            .map_err(|e| parquet_error(path, format!("document {key}: {e}")))?;
        text.push_str(&line);
        text.push('\n');
    }
    Ok(text)
}

/// The longest file name written, suffix included.
pub(super) const MAX_NAME: usize = 200;

/// Where a key's file name keeps its escaped prefix when the whole key does not fit.
const LONG_PREFIX: usize = 120;

/// Marks a shortened name; [`escape`] turns a `~` of a key into `%7E`.
const LONG_MARK: char = '~';

/// The file name of a key: its escaped form, or the shortened form of a long key (then `true`:
/// the file holds an envelope).
fn file_name(key: &str) -> (String, bool) {
    let escaped = escape(key);
    if escaped.len() + SUFFIX.len() <= MAX_NAME {
        return (format!("{escaped}{SUFFIX}"), false);
    }
    // Cut at a whole byte's escape (`%XX` is never split).
    let mut cut = LONG_PREFIX;
    while cut > 0 && escaped[..cut].rfind('%').is_some_and(|at| at + 3 > cut) {
        cut -= 1;
    }
    let digest = Sha256::digest(key.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    (format!("{}{LONG_MARK}{hex}{SUFFIX}", &escaped[..cut]), true)
}

/// What a document's file holds.
fn file_text(key: &str, long: bool, document: &Value) -> String {
    if long {
        serde_json::json!({"key": key, "document": document}).to_string()
    } else {
        document.to_string()
    }
}

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

/// Create (or truncate) each file with its text, and make them all durable. On Linux the
/// files are written, then the file system is synced once (`syncfs`): a sync of each file
/// costs a journal commit each, and a mining run writes about a thousand documents.
fn write_synced(files: &[(PathBuf, String)]) -> Result<()> {
    let write_one = |path: &Path, text: &str, sync: bool| -> Result<()> {
        let mut file = File::create(path).map_err(|e| io_error(path, e))?;
        file.write_all(text.as_bytes())
            .and_then(|()| if sync { file.sync_all() } else { Ok(()) })
            .map_err(|e| io_error(path, e))
    };
    #[cfg(target_os = "linux")]
    if let Some(folder) = files.first().and_then(|(p, _)| p.parent()) {
        for (path, text) in files {
            write_one(path, text, false)?;
        }
        let handle = File::open(folder).map_err(|e| io_error(folder, e))?;
        return nix::unistd::syncfs(&handle).map_err(|e| io_error(folder, std::io::Error::from(e)));
    }
    for (path, text) in files {
        write_one(path, text, true)?;
    }
    Ok(())
}

/// Remove the temporary files interrupted writes left in a kind's folder.
fn remove_temporaries(folder: &Path) -> Result<()> {
    for entry in fs::read_dir(folder).map_err(|e| io_error(folder, e))? {
        let entry = entry.map_err(|e| io_error(folder, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') && name.contains(".tmp-") {
            let path = entry.path();
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(&path, e)),
            }
        }
    }
    Ok(())
}

/// The file in `documents/` a writer holds locked while it writes (an advisory lock, released
/// when its process ends however it ends). Hidden, so no reader takes it for a kind.
const BATCH_LOCK: &str = ".batch.lock";

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

    /// The document's file, and whether it holds an envelope (a long key).
    fn file(&self, kind: &str, key: &str) -> Result<(PathBuf, bool)> {
        if key.is_empty() {
            return Err(self.invalid("a document key must not be empty"));
        }
        let (name, long) = file_name(key);
        Ok((self.kind_dir(kind)?.join(name), long))
    }

    /// The key and document of an envelope file.
    fn open_envelope(&self, file: &Path, text: &str) -> Result<(String, Value)> {
        let corrupt = |message: String| RecorderError::CorruptStore {
            path: file.to_path_buf(),
            message,
        };
        let mut envelope = match self.parse(file, text)? {
            Value::Object(envelope) => envelope,
            _ => return Err(corrupt("a long-key document is not a JSON object".into())),
        };
        let key = match envelope.remove("key") {
            Some(Value::String(key)) => key,
            _ => return Err(corrupt("a long-key document has no `key` string".into())),
        };
        let document = envelope
            .remove("document")
            .ok_or_else(|| corrupt("a long-key document has no `document`".into()))?;
        Ok((key, document))
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
        let (file, long) = self.file(kind, key)?;
        let _turn = self.lock_writes()?;
        atomic_write(&file, file_text(key, long, document).as_bytes())
    }

    /// Take the writers' turn on this store's documents (waiting for a batch writing now): a
    /// document put beside a batch replacing its kind would go with the old folder, and a
    /// batch removes only what writers that are done left behind.
    fn lock_writes(&self) -> Result<File> {
        let documents = self.root.join("documents");
        fs::create_dir_all(&documents).map_err(|e| io_error(&documents, e))?;
        let path = documents.join(BATCH_LOCK);
        let lock = open_lock_file(&path)?;
        lock.lock().map_err(|e| io_error(&path, e))?;
        Ok(lock)
    }

    pub fn get(&self, kind: &str, key: &str) -> Result<Option<Value>> {
        let (file, long) = self.file(kind, key)?;
        let text = match fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let pack = self.kind_dir(kind)?.join(PACK);
                let mut found = None;
                self.read_pack(&pack, &mut |stored, document, _| {
                    if stored == key {
                        found = Some(self.parse(&pack, document.get())?);
                    }
                    Ok(())
                })?;
                return Ok(found);
            }
            Err(e) => return Err(io_error(&file, e)),
        };
        if !long {
            return Ok(Some(self.parse(&file, &text)?));
        }
        let (stored, document) = self.open_envelope(&file, &text)?;
        // Another key with the same shortened name would need a sha256 collision.
        Ok((stored == key).then_some(document))
    }

    /// Call `visit` with each line's key, document text and whole line, of the pack at
    /// `path` if there is one.
    fn read_pack(
        &self,
        path: &Path,
        visit: &mut dyn FnMut(&str, &serde_json::value::RawValue, &str) -> Result<()>,
    ) -> Result<()> {
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_error(path, e)),
        };
        for (number, line) in text.lines().enumerate() {
            let entry: PackLine<String, &serde_json::value::RawValue> = serde_json::from_str(line)
                .map_err(|e| RecorderError::CorruptStore {
                    path: path.to_path_buf(),
                    message: format!("line {}: not a packed document: {e}", number + 1),
                })?;
            visit(&entry.key, entry.document, line)?;
        }
        Ok(())
    }

    /// The text of a pack holding every document of `kind` as [`Documents::list`] reads it.
    #[cfg(feature = "s3")]
    pub fn pack_of(&self, kind: &str) -> Result<String> {
        let documents = self.list(kind)?;
        let path = self.kind_dir(kind)?.join(PACK);
        pack_text(
            &path,
            documents
                .iter()
                .map(|(key, document)| (key.as_str(), document)),
        )
    }

    pub fn list(&self, kind: &str) -> Result<Vec<(String, Value)>> {
        let dir = self.kind_dir(kind)?;
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error(&dir, e)),
        };
        // The pack first: a document's own file, read after it, wins over its line.
        let pack = dir.join(PACK);
        let mut documents = std::collections::BTreeMap::new();
        self.read_pack(&pack, &mut |key, document, _| {
            documents.insert(key.to_string(), self.parse(&pack, document.get())?);
            Ok(())
        })?;
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
            let file = entry.path();
            if stem.contains(LONG_MARK) {
                let text = fs::read_to_string(&file).map_err(|e| io_error(&file, e))?;
                let (key, document) = self.open_envelope(&file, &text)?;
                documents.insert(key, document);
                continue;
            }
            let Some(key) = unescape(stem) else { continue };
            let text = fs::read_to_string(&file).map_err(|e| io_error(&file, e))?;
            documents.insert(key, self.parse(&file, &text)?);
        }
        Ok(documents.into_iter().collect())
    }

    /// Replace each kind of `clear` whole, then put the other documents one by one. A cleared
    /// kind's new documents are written as one pack into a staging folder first (synced),
    /// which then takes the kind folder's place by renames: a reader sees all old or all new
    /// documents of a kind, and a crash leaves only hidden staging folders behind (readers skip
    /// names starting with `.`, and the next batch removes them). Batches written at once (two
    /// `mine` runs) take turns, so the last one's documents stand whole.
    pub fn write_batch(&self, clear: &[&str], put: &[(&str, &str, &Value)]) -> Result<()> {
        // Held to the end: another batch's staging folder is not this one's leftover.
        let _turn = self.lock_writes()?;
        let documents = self.root.join("documents");
        self.remove_leftovers(&documents)?;
        let batch = nonce();
        for kind in clear {
            let live = self.kind_dir(kind)?;
            let staged = documents.join(format!(".staged-{batch}-{}", escape(kind)));
            fs::create_dir_all(&staged).map_err(|e| io_error(&staged, e))?;
            let mut documents_of_kind = Vec::new();
            for (_, key, document) in put.iter().filter(|(k, _, _)| k == kind) {
                if key.is_empty() {
                    return Err(self.invalid("a document key must not be empty"));
                }
                documents_of_kind.push((*key, *document));
            }
            if !documents_of_kind.is_empty() {
                // Builds that know no packs must refuse the store, not read a kind as empty.
                raise_marker(self.root)?;
                // The folder is this batch's alone until it is renamed: the pack needs no
                // temporary name, only to be synced before the rename.
                let pack = staged.join(PACK);
                let text = pack_text(&pack, documents_of_kind)?;
                write_synced(&[(pack, text)])?;
            }
            sync_dir(&staged)?;
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
        let mut files = std::collections::BTreeMap::new();
        for (kind, key, document) in put.iter().filter(|(k, _, _)| !clear.contains(k)) {
            let (file, long) = self.file(kind, key)?;
            files.insert(file, file_text(key, long, document));
        }
        self.put_each_atomically(&batch, files.into_iter().collect())
    }

    /// Put documents in place, each atomically (a synced temporary file renamed over its name),
    /// the temporaries synced together and each folder once.
    fn put_each_atomically(&self, batch: &str, files: Vec<(PathBuf, String)>) -> Result<()> {
        let mut temporaries = Vec::with_capacity(files.len());
        let mut targets = Vec::with_capacity(files.len());
        let mut folders = std::collections::BTreeSet::new();
        for (file, text) in files {
            let (folder, temp) = temporary_beside(&file, &format!("-{batch}"))?;
            temporaries.push((temp, text));
            targets.push(file);
            folders.insert(folder);
        }
        let remove = |temporaries: &[(PathBuf, String)]| {
            for (temp, _) in temporaries {
                let _ = fs::remove_file(temp);
            }
        };
        if let Err(e) = write_synced(&temporaries) {
            remove(&temporaries);
            return Err(e);
        }
        for (i, ((temp, _), target)) in temporaries.iter().zip(&targets).enumerate() {
            if let Err(e) = fs::rename(temp, target) {
                remove(&temporaries[i..]);
                return Err(io_error(target, e));
            }
        }
        for folder in &folders {
            sync_dir(folder)?;
        }
        Ok(())
    }

    /// Staging and retired folders an interrupted batch left behind, and the temporary files
    /// (`.NAME.tmp-NONCE`) of interrupted writes in the kind folders. Only with the writers'
    /// turn held, so every writer that left them is gone.
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
            let path = entry.path();
            if name.starts_with(".staged-") || name.starts_with(".retired-") {
                fs::remove_dir_all(&path).map_err(|e| io_error(&path, e))?;
            } else if !name.starts_with('.') && path.is_dir() {
                remove_temporaries(&path)?;
            }
        }
        Ok(())
    }

    /// Remove a document: its own file, and its line of the pack (rewritten without it).
    pub fn delete(&self, kind: &str, key: &str) -> Result<bool> {
        let (file, _) = self.file(kind, key)?;
        let _turn = self.lock_writes()?;
        let own = match fs::remove_file(&file) {
            Ok(()) => true,
            Err(e) if e.kind() == ErrorKind::NotFound => false,
            Err(e) => return Err(io_error(&file, e)),
        };
        let pack = self.kind_dir(kind)?.join(PACK);
        let mut kept = String::new();
        let mut packed = false;
        self.read_pack(&pack, &mut |stored, _, line| {
            if stored == key {
                packed = true;
            } else {
                kept.push_str(line);
                kept.push('\n');
            }
            Ok(())
        })?;
        if packed {
            atomic_write(&pack, kept.as_bytes())?;
        }
        Ok(own || packed)
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

    #[test]
    fn a_batch_puts_every_document_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let documents = Documents { root: dir.path() };
        documents
            .put("verdict", "kept", &serde_json::json!("old"))
            .unwrap();
        let values: Vec<Value> = (0..40).map(|i| serde_json::json!({"i": i})).collect();
        let mut put: Vec<(&str, &str, &Value)> = Vec::new();
        let keys: Vec<String> = (0..40).map(|i| format!("key-{i:02}")).collect();
        for (key, value) in keys.iter().zip(&values) {
            put.push(("candidate", key, value));
            put.push(("verdict", key, value));
        }
        let replaced = serde_json::json!("new");
        // A key put twice in one batch: the later document stands, as one by one.
        put.push(("candidate", "key-00", &replaced));
        documents.write_batch(&[], &put).unwrap();
        let candidates = documents.list("candidate").unwrap();
        assert_eq!(candidates.len(), 40);
        assert_eq!(candidates[0], ("key-00".to_string(), replaced.clone()));
        assert_eq!(candidates[39].1, serde_json::json!({"i": 39}));
        // Not cleared: the verdict stored before is still there.
        assert_eq!(documents.list("verdict").unwrap().len(), 41);
        for kind in ["candidate", "verdict"] {
            for entry in fs::read_dir(documents.kind_dir(kind).unwrap()).unwrap() {
                let name = entry.unwrap().file_name();
                assert!(!name.to_string_lossy().starts_with('.'), "{name:?} left");
            }
        }
        // What a write killed before its rename leaves: removed by the next batch.
        let stray = documents
            .kind_dir("verdict")
            .unwrap()
            .join(".key-00.json.tmp-0000abcd");
        fs::write(&stray, "{").unwrap();
        documents.write_batch(&["candidate"], &put).unwrap();
        assert!(!stray.exists());
        assert_eq!(documents.list("candidate").unwrap(), candidates);
        assert_eq!(documents.list("verdict").unwrap().len(), 41);
        let leftovers: Vec<_> = fs::read_dir(dir.path().join("documents"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with(".staged"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_replaced_kind_is_one_pack_that_single_puts_and_deletes_amend() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(
            root.join(super::super::MARKER_FILE),
            r#"{"format": "chainweaver-parquet", "version": 1}"#,
        )
        .unwrap();
        let documents = Documents { root };
        let keys: Vec<String> = (0..300).map(|i| format!("pattern-{i:03}")).collect();
        let long_key = "x".repeat(400);
        let values: Vec<Value> = (0..300).map(|i| serde_json::json!({"i": i})).collect();
        let mut put: Vec<(&str, &str, &Value)> = keys
            .iter()
            .zip(&values)
            .map(|(key, value)| ("pattern", key.as_str(), value))
            .collect();
        put.push(("pattern", &long_key, &values[7]));
        documents.write_batch(&["pattern"], &put).unwrap();

        // One file holds the kind, and the marker says a build must know packs to read it.
        let folder = documents.kind_dir("pattern").unwrap();
        let names: Vec<String> = fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [PACK]);
        let marker = fs::read_to_string(root.join(super::super::MARKER_FILE)).unwrap();
        let marker: Value = serde_json::from_str(&marker).unwrap();
        assert_eq!(marker["version"], super::super::FORMAT_VERSION);
        let listed = documents.list("pattern").unwrap();
        assert_eq!(listed.len(), 301);
        assert_eq!(listed[5], (keys[5].clone(), values[5].clone()));
        assert_eq!(listed[300], (long_key.clone(), values[7].clone()));
        assert_eq!(
            documents.get("pattern", &keys[42]).unwrap(),
            Some(values[42].clone())
        );
        assert_eq!(
            documents.get("pattern", &long_key).unwrap(),
            Some(values[7].clone())
        );
        assert_eq!(documents.get("pattern", "absent").unwrap(), None);

        // A single put wins over the pack's line; a delete removes both.
        let changed = serde_json::json!("changed");
        documents.put("pattern", &keys[42], &changed).unwrap();
        assert_eq!(
            documents.get("pattern", &keys[42]).unwrap(),
            Some(changed.clone())
        );
        let listed = documents.list("pattern").unwrap();
        assert_eq!(listed.len(), 301);
        assert_eq!(listed[42], (keys[42].clone(), changed.clone()));
        assert!(documents.delete("pattern", &keys[42]).unwrap());
        assert_eq!(documents.get("pattern", &keys[42]).unwrap(), None);
        assert!(documents.delete("pattern", &keys[43]).unwrap());
        assert!(!documents.delete("pattern", &keys[43]).unwrap());
        let listed = documents.list("pattern").unwrap();
        assert_eq!(listed.len(), 299);
        assert!(
            !listed
                .iter()
                .any(|(key, _)| key == &keys[42] || key == &keys[43])
        );
        assert_eq!(
            documents.get("pattern", &keys[44]).unwrap(),
            Some(values[44].clone())
        );

        // The next batch replaces pack and own files alike.
        documents.put("pattern", "own-file", &changed).unwrap();
        documents.write_batch(&["pattern"], &put[..2]).unwrap();
        let listed = documents.list("pattern").unwrap();
        assert_eq!(
            listed,
            vec![
                (keys[0].clone(), values[0].clone()),
                (keys[1].clone(), values[1].clone())
            ]
        );
    }

    #[test]
    fn a_damaged_pack_is_an_error_naming_its_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let documents = Documents { root: dir.path() };
        let value = serde_json::json!({"a": 1});
        documents
            .write_batch(
                &["pattern"],
                &[("pattern", "one", &value), ("pattern", "two", &value)],
            )
            .unwrap();
        let pack = documents.kind_dir("pattern").unwrap().join(PACK);
        let text = fs::read_to_string(&pack).unwrap();
        fs::write(&pack, format!("{}{{\"key\": \"three\", \"docu\n", text)).unwrap();
        for err in [
            documents.list("pattern").unwrap_err(),
            documents.get("pattern", "absent").unwrap_err(),
        ] {
            let message = err.to_string();
            assert!(message.contains("_pack.jsonl"), "{message}");
            assert!(message.contains("line 3"), "{message}");
        }
        // Nothing in the damaged pack is rewritten by a delete that cannot read it.
        assert!(documents.delete("pattern", "one").is_err());
        assert!(fs::read_to_string(&pack).unwrap().starts_with(&text));
    }

    #[test]
    fn batches_written_at_once_each_replace_the_kind_whole() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let keys: Vec<String> = (0..20).map(|k| format!("key-{k:02}")).collect();
        std::thread::scope(|scope| {
            for writer in 0..2 {
                let keys = &keys;
                scope.spawn(move || {
                    let documents = Documents { root };
                    for round in 0..30 {
                        let value = serde_json::json!({"writer": writer, "round": round});
                        let put: Vec<(&str, &str, &Value)> = keys
                            .iter()
                            .map(|k| ("result", k.as_str(), &value))
                            .collect();
                        documents
                            .write_batch(&["result"], &put)
                            .unwrap_or_else(|e| panic!("writer {writer}, round {round}: {e}"));
                    }
                });
            }
        });
        let listed = Documents { root }.list("result").unwrap();
        assert_eq!(listed.len(), keys.len());
        // One batch's documents, whole: the last to finish.
        assert!(listed.iter().all(|(_, v)| *v == listed[0].1), "{listed:?}");
        assert_eq!(listed[0].1["round"], 29);
    }

    #[test]
    fn a_long_key_gets_a_short_name_and_is_read_back_from_its_envelope() {
        let dir = tempfile::tempdir().unwrap();
        let documents = Documents { root: dir.path() };
        let long: String = "get_order_details_then_".repeat(20);
        let also_long = format!("{long}x");
        let unicode: String = "ключ".repeat(60);
        for key in [&long, &also_long, &unicode] {
            let (name, is_long) = file_name(key);
            assert!(is_long && name.len() <= MAX_NAME, "{name}");
            documents
                .put("pattern", key, &serde_json::json!({"k": key}))
                .unwrap();
        }
        assert_ne!(file_name(&long).0, file_name(&also_long).0);
        documents
            .put("pattern", "short", &serde_json::json!(1))
            .unwrap();
        assert_eq!(
            documents.get("pattern", &also_long).unwrap(),
            Some(serde_json::json!({"k": also_long}))
        );
        let listed = documents.list("pattern").unwrap();
        let keys: Vec<&str> = listed.iter().map(|(k, _)| k.as_str()).collect();
        let mut expected = vec![long.as_str(), also_long.as_str(), unicode.as_str(), "short"];
        expected.sort();
        assert_eq!(keys, expected);
        documents
            .write_batch(&["pattern"], &[("pattern", &long, &serde_json::json!(2))])
            .unwrap();
        assert_eq!(
            documents.list("pattern").unwrap(),
            vec![(long.clone(), serde_json::json!(2))]
        );
        assert!(documents.delete("pattern", &long).unwrap());
        assert_eq!(documents.get("pattern", &long).unwrap(), None);
    }

    fn is_hex_escape(escaped: &str, c: char) -> bool {
        // Uppercase letters only appear as hex digits of `%XX`.
        ('A'..='F').contains(&c) && escaped.contains('%')
    }
}
