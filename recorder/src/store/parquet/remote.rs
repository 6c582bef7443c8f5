//! A Parquet dataset in S3-compatible object storage (feature `s3`), named `s3://BUCKET/PREFIX`.
//!
//! The dataset is the same layout as on disk (`docs/parquet-schema.md`), uploaded as it is.
//! Opening it copies the small files (the marker, the manifests, the documents) into a private
//! folder of the system's temporary folder and reads them there; part files are never
//! downloaded whole: a read fetches a part's footer, then only the column chunks it decodes, in
//! ranged requests.
//!
//! Traffic is appended to a local store and uploaded; a dataset in object storage takes
//! documents only (the results of `mine`, `verify`, `analyze`). A kind a command changes is
//! uploaded as one object, `documents/<kind>/_pack.jsonl`, written in a single request, so a
//! reader sees the kind before or after the change, never half of it. Where an uploaded store
//! has documents in files of their own, the first change to their kind first puts the kind's
//! current documents into the pack (a reader sees the same documents) and removes the files,
//! then writes the change. The pack is written only if it is still the one this process read
//! (a conditional request): a second writer's change is refused, never overwritten.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{
    ClientConfigKey, GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions,
    PutPayload, RetryConfig, UpdateVersion,
};

use parquet::file::FOOTER_SIZE;
use parquet::file::metadata::FooterTail;

use crate::error::{RecorderError, Result};
use crate::store::OBJECT_STORAGE_SCHEME as S3_SCHEME;

/// Bytes fetched from a part's end when it is opened: its footer, in one request, for all but
/// very wide files.
const TAIL_BYTES: u64 = 64 * 1024;

/// Requests in flight at once while the small files are copied.
const CONCURRENT_GETS: usize = 16;

/// A bucket and a prefix in S3-compatible object storage, and the runtime its requests run on.
pub struct Remote {
    /// `s3://BUCKET/PREFIX` as given, without a trailing `/`.
    url: String,
    /// `s3://BUCKET`: what a query engine registers the store under.
    bucket_url: String,
    prefix: ObjectPath,
    store: Arc<dyn ObjectStore>,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("url", &self.url).finish()
    }
}

impl Remote {
    /// Connect to `s3://BUCKET/PREFIX`. The endpoint, region and credentials come from the
    /// usual `AWS_*` environment variables (`AWS_ENDPOINT_URL` for an S3-compatible server,
    /// `AWS_ALLOW_HTTP=true` for one without TLS), then from `settings` (the same names in
    /// lowercase: `aws_endpoint`, `aws_access_key_id`, ...); nothing is requested yet.
    pub fn connect(url: &str, settings: &[(&str, &str)]) -> Result<Self> {
        let url = url.trim_end_matches('/').to_string();
        let invalid = |message: &str| RecorderError::ObjectStore {
            url: url.clone(),
            message: message.into(),
        };
        let rest = url
            .strip_prefix(S3_SCHEME)
            .ok_or_else(|| invalid("not an s3:// URL"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(invalid("no bucket named (s3://BUCKET/PREFIX)"));
        }
        let prefix = ObjectPath::parse(prefix).map_err(|e| invalid(&e.to_string()))?;
        // A server that does not answer fails in seconds, not after the default three minutes
        // of retries.
        let retry = RetryConfig {
            max_retries: 3,
            retry_timeout: Duration::from_secs(20),
            ..RetryConfig::default()
        };
        let mut builder = AmazonS3Builder::from_env();
        for (key, value) in settings {
            let key = key
                .parse::<AmazonS3ConfigKey>()
                .map_err(|e| invalid(&e.to_string()))?;
            builder = builder.with_config(key, *value);
        }
        // Connecting gives up in seconds unless told otherwise (`AWS_CONNECT_TIMEOUT`).
        let connect = AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout);
        if builder.get_config_value(&connect).is_none() {
            builder = builder.with_config(connect, "5 seconds");
        }
        let store = builder
            .with_bucket_name(bucket)
            .with_retry(retry)
            .build()
            .map_err(|e| invalid(&e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("chainweaver-s3")
            .enable_all()
            .build()
            .map_err(|e| invalid(&format!("cannot start the request runtime: {e}")))?;
        Ok(Self {
            bucket_url: format!("{S3_SCHEME}{bucket}"),
            url,
            prefix,
            store: Arc::new(store),
            runtime,
        })
    }

    /// `s3://BUCKET/PREFIX`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `s3://BUCKET`, the URL a query engine registers [`Remote::object_store`] under.
    pub fn bucket_url(&self) -> &str {
        &self.bucket_url
    }

    /// The client, for a query engine reading the parts itself.
    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        Arc::clone(&self.store)
    }

    /// The object of a dataset-relative path (`steps/date=.../part-1.parquet`), named as the
    /// dataset names its files: a document file's `%XX` and `~` are part of its object's name
    /// (joining path parts would escape them once more).
    pub fn object(&self, relative: &str) -> ObjectPath {
        let relative = relative.trim_matches('/');
        let joined = match self.prefix.as_ref() {
            "" => relative.to_string(),
            prefix => format!("{prefix}/{relative}"),
        };
        // Only a control character fails to parse, and no dataset file name holds one.
        ObjectPath::parse(&joined).unwrap_or_else(|_| ObjectPath::from(joined.as_str()))
    }

    /// The URL of a dataset-relative path, for messages and query engines.
    pub fn url_of(&self, relative: &str) -> String {
        format!("{}/{}", self.bucket_url, self.object(relative))
    }

    fn failed(&self, relative: &str, error: impl std::fmt::Display) -> RecorderError {
        RecorderError::ObjectStore {
            url: self.url_of(relative),
            message: error.to_string(),
        }
    }

    /// Run a request to its end on the runtime's threads; the calling thread waits (it may
    /// itself be a thread of another runtime, where blocking on this one would panic).
    fn run<T, F>(&self, request: F) -> Result<T, object_store::Error>
    where
        F: Future<Output = Result<T, object_store::Error>> + Send + 'static,
        T: Send + 'static,
    {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = sender.send(request.await);
        });
        receiver.recv().unwrap_or_else(|_| {
            Err(object_store::Error::Generic {
                store: "S3",
                source: "the request stopped before it answered".into(),
            })
        })
    }

    /// The objects under a dataset-relative folder, with their paths relative to the dataset.
    fn list(&self, relative: &str) -> Result<Vec<(String, object_store::ObjectMeta)>> {
        let store = self.object_store();
        let folder = self.object(relative);
        let listed =
            self.run(async move { store.list(Some(&folder)).try_collect::<Vec<_>>().await });
        let listed = listed.map_err(|e| self.failed(relative, e))?;
        let strip = self.prefix.as_ref().len();
        Ok(listed
            .into_iter()
            .map(|meta| {
                let full = meta.location.as_ref();
                let relative = full
                    .get(strip..)
                    .unwrap_or(full)
                    .trim_start_matches('/')
                    .to_string();
                (relative, meta)
            })
            .collect())
    }

    /// An object's bytes, `None` when there is none.
    fn get(&self, relative: &str) -> Result<Option<Bytes>> {
        let store = self.object_store();
        let path = self.object(relative);
        let got = self.run(async move { store.get(&path).await?.bytes().await });
        match got {
            Ok(got) => Ok(Some(got)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed(relative, e)),
        }
    }

    /// Several objects' bytes, fetched a few at a time, in the order asked.
    fn get_all(&self, relatives: &[String]) -> Result<Vec<Bytes>> {
        let store = self.object_store();
        let paths: Vec<(String, ObjectPath)> = relatives
            .iter()
            .map(|relative| (relative.clone(), self.object(relative)))
            .collect();
        let fetched = self.run(async move {
            let each = futures::stream::iter(paths)
                .map(|(relative, path)| {
                    let store = Arc::clone(&store);
                    async move {
                        let got = match store.get(&path).await {
                            Ok(result) => result.bytes().await,
                            Err(e) => Err(e),
                        };
                        got.map_err(|e| (relative, e))
                    }
                })
                .buffered(CONCURRENT_GETS)
                .collect::<Vec<_>>()
                .await;
            Ok(each)
        });
        let fetched = fetched.map_err(|e| self.failed("", e))?;
        fetched
            .into_iter()
            .map(|got| got.map_err(|(relative, e)| self.failed(&relative, e)))
            .collect()
    }

    /// Write an object; with `replacing`, only over that version of it (`None`: only where
    /// there is none). The new version's tag.
    fn put(
        &self,
        relative: &str,
        bytes: Bytes,
        replacing: Option<Option<String>>,
    ) -> Result<Option<String>> {
        let store = self.object_store();
        let path = self.object(relative);
        let mode = match replacing {
            None => PutMode::Overwrite,
            Some(None) => PutMode::Create,
            // A server that gives no version tag cannot be asked to check one.
            Some(Some(e_tag)) if e_tag.is_empty() => PutMode::Overwrite,
            Some(Some(e_tag)) => PutMode::Update(UpdateVersion {
                e_tag: Some(e_tag),
                version: None,
            }),
        };
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        let put = self.run(async move {
            store
                .put_opts(&path, PutPayload::from(bytes), options)
                .await
        });
        match put {
            Ok(result) => Ok(result.e_tag),
            Err(
                object_store::Error::Precondition { .. }
                | object_store::Error::AlreadyExists { .. },
            ) => Err(RecorderError::ObjectStore {
                url: self.url_of(relative),
                message: "another process changed it since this one read it; nothing was \
                          written, run it again"
                    .into(),
            }),
            Err(e) => Err(self.failed(relative, e)),
        }
    }

    fn delete(&self, relative: &str) -> Result<()> {
        let store = self.object_store();
        let path = self.object(relative);
        match self.run(async move { store.delete(&path).await }) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.failed(relative, e)),
        }
    }
}

/// The committed step parts of a dataset in object storage, for a query engine reading them
/// where they are.
#[derive(Debug, Clone)]
pub struct StepObjects {
    /// `s3://BUCKET`: what the engine registers `store` under.
    pub bucket_url: String,
    /// The client that reads them.
    pub store: Arc<dyn ObjectStore>,
    /// Each part's URL (`s3://BUCKET/PREFIX/steps/date=.../part-....parquet`).
    pub files: Vec<String>,
    remote: Arc<Remote>,
    /// Each part's path in the dataset, in the order of `files`.
    parts: Vec<String>,
    /// The dataset's footers, shared: a check fetches each once for every later read.
    footers: Footers,
}

impl StepObjects {
    pub(super) fn new(dataset: &RemoteDataset, parts: Vec<String>) -> Self {
        let remote = &dataset.remote;
        Self {
            bucket_url: remote.bucket_url().to_string(),
            store: remote.object_store(),
            files: parts.iter().map(|part| remote.url_of(part)).collect(),
            remote: Arc::clone(remote),
            parts,
            footers: Arc::clone(&dataset.footers),
        }
    }

    /// The first part whose footer cannot be read, or that lacks one of `columns`, with why:
    /// what a query engine's own error may leave out.
    pub fn first_unreadable(&self, columns: &[&str]) -> Option<(String, String)> {
        let why_unreadable = |part: &str| -> Option<String> {
            match RemotePart::open(&self.remote, part, &self.footers).map(|part| {
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(part)
            }) {
                Err(e) => Some(e.to_string()),
                Ok(Err(e)) => Some(e.to_string()),
                Ok(Ok(builder)) => {
                    let schema = builder.parquet_schema();
                    let has = |name: &str| {
                        (0..schema.num_columns()).any(|i| schema.column(i).name() == name)
                    };
                    let missing = columns.iter().find(|c| !has(c))?;
                    Some(format!("it has no `{missing}` column"))
                }
            }
        };
        // A footer is a request of its own, answered at the bucket's latency: several at once.
        let workers = FOOTER_CHECKS.min(self.parts.len()).max(1);
        let unreadable: Vec<(usize, String)> = std::thread::scope(|scope| {
            let checks: Vec<_> = (0..workers)
                .map(|worker| {
                    let why_unreadable = &why_unreadable;
                    scope.spawn(move || {
                        (worker..self.parts.len())
                            .step_by(workers)
                            .filter_map(|i| Some((i, why_unreadable(&self.parts[i])?)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            checks
                .into_iter()
                .enumerate()
                .flat_map(|(worker, check)| {
                    // Named by the first part it had: which one stopped it is not known.
                    check.join().unwrap_or_else(|_| {
                        vec![(worker, "a thread reading the footers stopped".to_owned())]
                    })
                })
                .collect()
        });
        let (first, why) = unreadable.into_iter().min_by_key(|(i, _)| *i)?;
        Some((self.files[first].clone(), why))
    }
}

/// Footers [`StepObjects::first_unreadable`] fetches at once.
const FOOTER_CHECKS: usize = 8;

/// The footers of a dataset's parts read so far, by part: parts are never rewritten.
pub(super) type Footers = Arc<Mutex<HashMap<String, Footer>>>;

/// A part's length, and the bytes at its end that hold its footer.
#[derive(Debug, Clone)]
pub(super) struct Footer {
    len: u64,
    start: u64,
    bytes: Bytes,
}

/// One part file in object storage, read by ranges: what [`parquet`]'s reader asks of a file.
/// Ranges fetched ahead ([`RemotePart::fetch`]) are served from memory; anything else is a
/// request of its own. Clones share what was fetched.
#[derive(Clone)]
pub(super) struct RemotePart {
    remote: Arc<Remote>,
    relative: String,
    len: u64,
    fetched: Arc<Mutex<Vec<(u64, Bytes)>>>,
}

impl RemotePart {
    /// Open the part at `relative`: its footer as `footers` holds it from an earlier read,
    /// else fetched (the part's tail, with its length) and kept there. Mining reads each part
    /// up to three times (the tool names, then the sampled steps in two rounds).
    pub(super) fn open(
        remote: &Arc<Remote>,
        relative: &str,
        footers: &Mutex<HashMap<String, Footer>>,
    ) -> Result<Self> {
        let known = footers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(relative)
            .cloned();
        let footer = match known {
            Some(footer) => footer,
            None => {
                let footer = Self::fetch_footer(remote, relative)?;
                footers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(relative.to_string(), footer.clone());
                footer
            }
        };
        Ok(Self {
            remote: Arc::clone(remote),
            relative: relative.to_string(),
            len: footer.len,
            fetched: Arc::new(Mutex::new(vec![(footer.start, footer.bytes)])),
        })
    }

    /// A part's length and footer: its last [`TAIL_BYTES`], cut to the footer (the metadata,
    /// its length and the magic) when that is shorter.
    fn fetch_footer(remote: &Arc<Remote>, relative: &str) -> Result<Footer> {
        let store = remote.object_store();
        let path = remote.object(relative);
        let tail = remote.run(async move {
            let options = GetOptions {
                range: Some(GetRange::Suffix(TAIL_BYTES)),
                ..GetOptions::default()
            };
            let result = store.get_opts(&path, options).await?;
            let len = result.meta.size;
            let start = result.range.start;
            Ok((len, start, result.bytes().await?))
        });
        let (len, start, tail) = tail.map_err(|e| remote.failed(relative, e))?;
        // The last 8 bytes: the metadata's length and the magic. A damaged footer is kept
        // whole, for the reader to report.
        let metadata = tail
            .len()
            .checked_sub(FOOTER_SIZE)
            .and_then(|at| FooterTail::try_from(&tail[at..]).ok())
            .map(|frame| frame.metadata_length() + FOOTER_SIZE)
            .filter(|footer| *footer <= tail.len());
        Ok(match metadata {
            Some(footer) => Footer {
                len,
                start: start + (tail.len() - footer) as u64,
                bytes: tail.slice(tail.len() - footer..),
            },
            None => Footer {
                len,
                start,
                bytes: tail,
            },
        })
    }

    /// Where messages say the part is.
    pub(super) fn url(&self) -> PathBuf {
        PathBuf::from(self.remote.url_of(&self.relative))
    }

    /// Fetch `ranges` (the column chunks a read decodes) ahead, in one round of requests.
    pub(super) fn fetch(&self, ranges: Vec<Range<u64>>) -> Result<()> {
        if ranges.is_empty() {
            return Ok(());
        }
        let store = self.remote.object_store();
        let path = self.remote.object(&self.relative);
        let asked = ranges.clone();
        let got = self
            .remote
            .run(async move { store.get_ranges(&path, &asked).await })
            .map_err(|e| self.remote.failed(&self.relative, e))?;
        let mut fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
        fetched.extend(ranges.into_iter().map(|range| range.start).zip(got));
        Ok(())
    }

    /// `start..start + length` from what was fetched, else fetched now.
    fn bytes(&self, start: u64, length: u64) -> std::io::Result<Bytes> {
        let end = start.saturating_add(length).min(self.len);
        {
            let fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
            for (at, bytes) in fetched.iter() {
                if *at <= start && end <= at + bytes.len() as u64 {
                    return Ok(bytes.slice((start - at) as usize..(end - at) as usize));
                }
            }
        }
        let store = self.remote.object_store();
        let path = self.remote.object(&self.relative);
        self.remote
            .run(async move { store.get_range(&path, start..end).await })
            .map_err(std::io::Error::other)
    }
}

impl parquet::file::reader::Length for RemotePart {
    fn len(&self) -> u64 {
        self.len
    }
}

impl parquet::file::reader::ChunkReader for RemotePart {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        use bytes::Buf;
        // A reader of pages from `start` to the end of the range fetched for it (a column
        // chunk), else to the end of the file.
        let until = {
            let fetched = self.fetched.lock().unwrap_or_else(|e| e.into_inner());
            fetched
                .iter()
                .find(|(at, bytes)| *at <= start && start < at + bytes.len() as u64)
                .map_or(self.len, |(at, bytes)| at + bytes.len() as u64)
        };
        let bytes = self
            .bytes(start, until.saturating_sub(start))
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?;
        Ok(bytes.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.bytes(start, length as u64)
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
    }
}

/// What this process knows of a document kind in object storage.
#[derive(Debug, Default)]
struct KindObjects {
    /// The pack's version as read or last written (`None`: there is no pack).
    pack: Option<String>,
    /// Documents in objects of their own (as a local store writes them), by object name.
    own: Vec<String>,
}

/// A dataset in object storage opened through a local copy of its small files.
pub(super) struct RemoteDataset {
    pub(super) remote: Arc<Remote>,
    /// The copy: marker, manifests and documents. Removed when the store is dropped.
    pub(super) copy: tempfile::TempDir,
    kinds: Mutex<BTreeMap<String, KindObjects>>,
    /// The marker's text in object storage.
    marker: Mutex<Option<String>>,
    pub(super) footers: Footers,
}

impl std::fmt::Debug for RemoteDataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteDataset")
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

impl RemoteDataset {
    /// Copy the marker, the manifests and the documents of the dataset at `url` into a new
    /// private folder. A URL with no dataset marker is an error, not a new dataset.
    pub(super) fn open(url: &str, settings: &[(&str, &str)]) -> Result<Self> {
        let marker_file = super::MARKER_FILE;
        let remote = Arc::new(Remote::connect(url, settings)?);
        let copy = crate::scratch::scratch_folder("chainweaver-s3-")
            .map_err(|e| super::io_error(&std::env::temp_dir(), e))?;
        let Some(marker) = remote.get(marker_file)? else {
            return Err(RecorderError::ObjectStore {
                url: remote.url().to_string(),
                message: format!(
                    "no ChainWeaver Parquet dataset here (no {marker_file}); upload a store \
                     folder as it is"
                ),
            });
        };
        let write = |relative: &str, bytes: &[u8]| -> Result<()> {
            let path = relative
                .split('/')
                .fold(copy.path().to_path_buf(), |path, part| path.join(part));
            if let Some(folder) = path.parent() {
                std::fs::create_dir_all(folder).map_err(|e| super::io_error(folder, e))?;
            }
            std::fs::write(&path, bytes).map_err(|e| super::io_error(&path, e))
        };
        write(marker_file, &marker)?;
        let mut small: Vec<String> = Vec::new();
        let mut kinds: BTreeMap<String, KindObjects> = BTreeMap::new();
        for (relative, _) in remote.list(super::COMMITS_DIR)? {
            small.push(relative);
        }
        for (relative, meta) in remote.list("documents")? {
            let Some((kind, name)) = relative
                .strip_prefix("documents/")
                .and_then(|rest| rest.split_once('/'))
            else {
                continue;
            };
            // Only what a local store reads: a pack, and files of their own (not temporaries).
            let entry = kinds.entry(kind.to_string()).or_default();
            if name == super::documents::PACK {
                entry.pack = Some(meta.e_tag.clone().unwrap_or_default());
            } else if name.ends_with(".json") && !name.starts_with('.') && !name.contains('/') {
                entry.own.push(name.to_string());
            } else {
                continue;
            }
            small.push(relative);
        }
        for (relative, bytes) in small.iter().zip(remote.get_all(&small)?) {
            write(relative, &bytes)?;
        }
        Ok(Self {
            remote,
            copy,
            kinds: Mutex::new(kinds),
            marker: Mutex::new(Some(String::from_utf8_lossy(&marker).into_owned())),
            footers: Footers::default(),
        })
    }

    /// Before `kinds` change in the copy: where a kind has documents in objects of their own,
    /// put the kind's current documents (read from the copy) into its pack and remove those
    /// objects, so the pack written after the change is the kind's whole state.
    pub(super) fn before_change(
        &self,
        kinds: &[&str],
        current: &dyn Fn(&str) -> Result<String>,
    ) -> Result<()> {
        let mut known = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        for kind in kinds {
            let escaped = super::documents::escape(kind);
            let Some(objects) = known.get_mut(&escaped).filter(|o| !o.own.is_empty()) else {
                continue;
            };
            self.put_pack(&escaped, objects, current(kind)?)?;
            for name in std::mem::take(&mut objects.own) {
                self.remote.delete(&format!("documents/{escaped}/{name}"))?;
            }
        }
        Ok(())
    }

    /// After `kinds` changed in the copy: upload each as its pack, `current` of the kind.
    pub(super) fn after_change(
        &self,
        kinds: &[&str],
        current: &dyn Fn(&str) -> Result<String>,
    ) -> Result<()> {
        let mut known = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        for kind in kinds {
            let escaped = super::documents::escape(kind);
            let objects = known.entry(escaped.clone()).or_default();
            self.put_pack(&escaped, objects, current(kind)?)?;
        }
        Ok(())
    }

    /// Write `text` as the pack of the (escaped) kind, over the version `objects` last saw,
    /// the marker first where a pack raised it.
    fn put_pack(&self, escaped: &str, objects: &mut KindObjects, text: String) -> Result<()> {
        self.upload_marker()?;
        let pack = format!("documents/{escaped}/{}", super::documents::PACK);
        objects.pack = self
            .remote
            .put(&pack, Bytes::from(text), Some(objects.pack.clone()))?
            .or(Some(String::new()));
        Ok(())
    }

    /// Upload the copy's marker where it differs from the one in object storage (a pack raised
    /// the layout version): before the pack a build of the older version would misread.
    fn upload_marker(&self) -> Result<()> {
        let path = self.copy.path().join(super::MARKER_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| super::io_error(&path, e))?;
        let mut uploaded = self.marker.lock().unwrap_or_else(|e| e.into_inner());
        if uploaded.as_deref() != Some(text.as_str()) {
            self.remote
                .put(super::MARKER_FILE, Bytes::from(text.clone()), None)?;
            *uploaded = Some(text);
        }
        Ok(())
    }
}

/// The kinds a batch names, once each.
pub(super) fn distinct<'a>(kinds: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut once: Vec<&str> = Vec::new();
    for kind in kinds {
        if !once.contains(&kind) {
            once.push(kind);
        }
    }
    once
}
