//! A Parquet store in S3-compatible object storage (`--store s3://BUCKET/PREFIX`, feature
//! `s3`), against a real S3 API: moto's server, in a process of its own. The store is uploaded
//! by another client (boto3, `scripts/s3_client.py`), as a team would upload a folder, and
//! must give what the same folder gives on disk.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use chainweaver::recorder::store::{ParquetStore, TraceStore};
use serde_json::{Value, json};

use crate::{free_port, shared_datasets};

/// An S3-compatible server on a local port, stopped when dropped.
struct S3Server {
    child: Child,
    endpoint: String,
}

impl S3Server {
    /// Start moto's server (`python3 -m moto.server`), or `None` where moto is not installed
    /// (a failure under CI).
    fn start() -> Option<Self> {
        if !crate::python_imports("moto.server, boto3, flask_cors") {
            return None;
        }
        let port = free_port();
        let mut child = Command::new("python3")
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("moto's server starts");
        // It says where it listens once it does.
        let stderr = child.stderr.take().expect("piped stderr");
        let mut lines = BufReader::new(stderr).lines();
        let listening = lines
            .by_ref()
            .map_while(Result::ok)
            .any(|line| line.contains("Running on"));
        assert!(listening, "moto's server did not start");
        // Its request log must not fill the pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Some(Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        })
    }

    /// `scripts/s3_client.py ENDPOINT ARGS..`, which must succeed; its stdout.
    fn client(&self, args: &[&str]) -> String {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/s3_client.py");
        let output = Command::new("python3")
            .arg(script)
            .arg(&self.endpoint)
            .args(args)
            .output()
            .expect("python3 runs");
        assert!(
            output.status.success(),
            "s3_client.py {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("UTF-8")
    }

    /// The keys under `prefix` in `bucket`.
    fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        serde_json::from_str(&self.client(&["list", bucket, prefix])).expect("a JSON list")
    }

    /// What the binary needs to reach the server.
    fn env(&self) -> [(&'static str, String); 5] {
        [
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// The same as [`ParquetStore::open_remote`] settings (the variables' names in lowercase),
    /// with the endpoint `endpoint`.
    fn settings(&self, endpoint: &str) -> Vec<(String, String)> {
        self.env()
            .into_iter()
            .map(|(name, value)| {
                let value = if name == "AWS_ENDPOINT_URL" {
                    endpoint.to_string()
                } else {
                    value
                };
                (name.to_ascii_lowercase(), value)
            })
            .collect()
    }

    /// Open the dataset at `url` in this process, through `endpoint`.
    fn open_through(
        &self,
        url: &str,
        endpoint: &str,
    ) -> chainweaver::recorder::error::Result<ParquetStore> {
        let settings = self.settings(endpoint);
        let settings: Vec<(&str, &str)> = settings
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        ParquetStore::open_remote(url, &settings)
    }

    fn open(&self, url: &str) -> chainweaver::recorder::error::Result<ParquetStore> {
        self.open_through(url, &self.endpoint)
    }

    /// `chainweaver ARGS` in `dir`, reaching this server.
    fn chainweaver(&self, dir: &Path, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_chainweaver"))
            .args(args)
            .current_dir(dir)
            .env_remove("CHAINWEAVER_STORE")
            .envs(self.env())
            .output()
            .expect("the chainweaver binary runs")
    }

    fn json(&self, dir: &Path, args: &[&str]) -> Value {
        let output = self.chainweaver(dir, args);
        assert!(
            output.status.success(),
            "chainweaver {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("JSON on stdout")
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// JSON `chainweaver` printed, without what differs between any two runs: how long phases took
/// and when verdicts were reached.
fn comparable(mut value: Value) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.retain(|key, _| !key.ends_with("_time") && key != "verified_at");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut value);
    value
}

/// tau-bench retail, imported into a local Parquet store and uploaded as it is: `analyze` on
/// the dataset in object storage (mining, then verifying against held-out traffic) proposes
/// and verifies what it does on the folder, stores its results there as one object per kind,
/// and a new process reads them back.
#[test]
fn analyze_on_a_dataset_in_object_storage_matches_the_same_folder_on_disk() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    let Some(server) = S3Server::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tau = datasets.join("tau-bench-retail");
    let imported = server.chainweaver(
        d,
        &[
            "-q",
            "--store",
            "local.parquet",
            "import",
            tau.to_str().unwrap(),
        ],
    );
    assert!(
        imported.status.success(),
        "{}",
        String::from_utf8_lossy(&imported.stderr)
    );
    server.client(&["make-bucket", "traffic"]);
    let folder = d.join("local.parquet");
    server.client(&["upload", folder.to_str().unwrap(), "traffic", "tau.parquet"]);
    // The local folder is analyzed after the upload, so the bucket holds traffic only.
    let url = "s3://traffic/tau.parquet";
    let on_disk = server.json(
        d,
        &[
            "-q",
            "--store",
            "local.parquet",
            "--format",
            "json",
            "analyze",
        ],
    );
    let remote = server.json(d, &["-q", "--store", url, "--format", "json", "analyze"]);
    assert_eq!(comparable(remote.clone()), comparable(on_disk.clone()));
    assert!(on_disk["verified"].as_u64().unwrap() > 0, "{on_disk}");

    // What a new process reads back from the bucket is what the folder holds.
    for listing in [
        &["candidates", "list"][..],
        &["verdicts", "list"],
        &["patterns", "list"],
    ] {
        let args = |store: &'static str| {
            let mut args = vec!["-q", "--store", store, "--format", "json"];
            args.extend_from_slice(listing);
            args
        };
        assert_eq!(
            comparable(server.json(d, &args(url))),
            comparable(server.json(d, &args("local.parquet"))),
            "{listing:?}"
        );
    }
    // Each kind of result is one object.
    let documents = server.keys("traffic", "tau.parquet/documents/");
    assert!(!documents.is_empty());
    for key in documents.iter().filter(|key| !key.ends_with(".lock")) {
        assert!(key.ends_with("/_pack.jsonl"), "{key} in {documents:?}");
    }

    // The query engine counts over the parts where they are, and finds what it finds on disk.
    #[cfg(feature = "datafusion")]
    {
        use chainweaver::analyzer::engine::datafusion::StepSource;
        let store = server.open(url).unwrap();
        let parts: Vec<String> = server
            .keys("traffic", "tau.parquet/steps/")
            .into_iter()
            .map(|key| format!("s3://traffic/{key}"))
            .collect();
        match StepSource::of(&store).unwrap() {
            StepSource::Objects(objects) => {
                let mut files = objects.files.clone();
                files.sort();
                assert_eq!(files, parts);
            }
            other => panic!("the engine reads {other:?}"),
        }
        let mine = |store: &str| {
            comparable(server.json(
                d,
                &[
                    "-q",
                    "--store",
                    store,
                    "--format",
                    "json",
                    "mine",
                    "--engine",
                    "datafusion",
                ],
            ))
        };
        assert_eq!(mine(url), mine("local.parquet"));
    }

    // Traffic is appended locally, not into the bucket: a clear error, nothing written.
    let before = server.keys("traffic", "tau.parquet/");
    let import = server.chainweaver(d, &["-q", "--store", url, "import", tau.to_str().unwrap()]);
    assert!(!import.status.success());
    let stderr = String::from_utf8_lossy(&import.stderr);
    assert!(
        stderr.contains(url) && stderr.contains("upload"),
        "{stderr}"
    );
    assert_eq!(server.keys("traffic", "tau.parquet/"), before);

    // A damaged part, the last (an engine's message names the first): each way of mining names
    // the damaged one.
    let parts: Vec<String> = server
        .keys("traffic", "tau.parquet/steps/")
        .into_iter()
        .filter(|key| key.ends_with(".parquet"))
        .collect();
    assert!(parts.len() > 1, "{parts:?}");
    let part = parts.last().unwrap().clone();
    server.client(&["put", "traffic", &part, "PAR1 not a Parquet file PAR1"]);
    let mut ways: Vec<&[&str]> = vec![&["mine"]];
    if cfg!(feature = "datafusion") {
        ways.push(&["mine", "--engine", "datafusion"]);
    }
    for way in ways {
        let mut args = vec!["-q", "--store", url];
        args.extend_from_slice(way);
        let failed = server.chainweaver(d, &args);
        assert!(!failed.status.success(), "{way:?}");
        let stderr = String::from_utf8_lossy(&failed.stderr);
        assert!(
            stderr.contains(&format!("s3://traffic/{part}")),
            "{way:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{way:?}: {stderr}");
    }
}

/// A store whose documents were uploaded as files of their own (as a local store writes a put)
/// keeps reading the same while its kind is folded into one object, a second writer holding an
/// older state is refused instead of overwriting, and a missing dataset or an unreachable
/// server is an error naming the URL.
#[test]
fn documents_in_object_storage_change_whole_and_never_over_another_writer() {
    let Some(server) = S3Server::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("store.parquet");
    {
        let mut local = ParquetStore::open(&folder).unwrap();
        local
            .write_documents(
                &["notes"],
                &[
                    ("notes", "a", &json!({"n": 1})),
                    ("notes", "b", &json!({"n": 2})),
                ],
            )
            .unwrap();
        // A put after the batch is a file of its own, over the pack's line.
        local.put_document("notes", "b", &json!({"n": 3})).unwrap();
        local.put_document("notes", "c", &json!({"n": 4})).unwrap();
        // File names with escapes (`%XX`) and a long key's shortened name (`~`).
        local
            .put_document("notes", "Upper Case/Key", &json!({"n": 6}))
            .unwrap();
        local
            .put_document("notes", &"long".repeat(60), &json!({"n": 7}))
            .unwrap();
    }
    server.client(&["make-bucket", "results"]);
    server.client(&[
        "upload",
        folder.to_str().unwrap(),
        "results",
        "store.parquet",
    ]);
    let url = "s3://results/store.parquet";
    let expected = vec![
        ("Upper Case/Key".to_string(), json!({"n": 6})),
        ("a".to_string(), json!({"n": 1})),
        ("b".to_string(), json!({"n": 3})),
        ("c".to_string(), json!({"n": 4})),
        ("long".repeat(60), json!({"n": 7})),
    ];

    let mut first = server.open(url).unwrap();
    let mut second = server.open(url).unwrap();
    assert_eq!(first.list_documents("notes").unwrap(), expected);
    first.delete_document("notes", "a").unwrap();
    let keys = server.keys("results", "store.parquet/documents/notes/");
    assert_eq!(
        keys,
        vec!["store.parquet/documents/notes/_pack.jsonl".to_string()]
    );
    let without_a: Vec<(String, Value)> = expected
        .iter()
        .filter(|(key, _)| key != "a")
        .cloned()
        .collect();
    let reopened = server.open(url).unwrap();
    assert_eq!(reopened.list_documents("notes").unwrap(), without_a);
    assert_eq!(
        reopened.get_document("notes", "Upper Case/Key").unwrap(),
        Some(json!({"n": 6}))
    );

    // The second handle read the kind before the first changed it.
    let refused = second
        .put_document("notes", "d", &json!({"n": 5}))
        .unwrap_err();
    let message = refused.to_string();
    assert!(message.contains("another process changed it"), "{message}");
    assert!(
        message.contains("s3://results/store.parquet/documents/notes/_pack.jsonl"),
        "{message}"
    );
    assert_eq!(
        server.open(url).unwrap().list_documents("notes").unwrap(),
        without_a
    );
    // Opened again, it writes.
    let mut again = server.open(url).unwrap();
    again.put_document("notes", "d", &json!({"n": 5})).unwrap();
    let written = server.open(url).unwrap().list_documents("notes").unwrap();
    assert_eq!(written.len(), without_a.len() + 1);

    let missing = server
        .open("s3://results/nothing-here")
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("s3://results/nothing-here") && missing.contains("no ChainWeaver"),
        "{missing}"
    );
    // Nothing listens there.
    let unreachable = format!("http://127.0.0.1:{}", free_port());
    let gone = server
        .open_through(url, &unreachable)
        .unwrap_err()
        .to_string();
    assert!(gone.contains("s3://results/store.parquet"), "{gone}");
}
