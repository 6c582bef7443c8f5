//! The `chainweaver` binary end to end: real processes, real stores, real files.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::{chainweaver, shared_datasets};

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let output = chainweaver(dir, args);
    assert!(
        output.status.success(),
        "chainweaver {args:?} failed: {}",
        stderr(&output)
    );
    stdout(&output)
}

fn json(dir: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let text = ok(dir, &all);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {text}"))
}

fn sample() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("datasets/sample/support-agent.jsonl")
}

#[test]
fn generate_is_deterministic_and_round_trips_through_both_stores() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(
        d,
        &[
            "datasets", "generate", "--traces", "150", "--seed", "5", "--jsonl", "a.jsonl",
            "--truth", "a.json",
        ],
    );
    ok(
        d,
        &[
            "datasets", "generate", "--traces", "150", "--seed", "5", "--jsonl", "b.jsonl",
            "--truth", "b.json",
        ],
    );
    let a = std::fs::read(d.join("a.jsonl")).unwrap();
    assert_eq!(
        a,
        std::fs::read(d.join("b.jsonl")).unwrap(),
        "same seed, same bytes"
    );
    assert_eq!(
        std::fs::read(d.join("a.json")).unwrap(),
        std::fs::read(d.join("b.json")).unwrap()
    );

    // JSONL -> SQLite -> Parquet -> SQLite -> JSONL gives the same bytes back.
    ok(d, &["--store", "one.db", "import", "a.jsonl"]);
    ok(
        d,
        &[
            "--store",
            "one.db",
            "traces",
            "convert",
            "--to",
            "two.parquet",
        ],
    );
    ok(
        d,
        &[
            "--store",
            "two.parquet",
            "traces",
            "convert",
            "--to",
            "three.db",
        ],
    );
    ok(
        d,
        &[
            "--store",
            "three.db",
            "traces",
            "export",
            "-o",
            "back.jsonl",
        ],
    );
    assert_eq!(a, std::fs::read(d.join("back.jsonl")).unwrap());

    let stats = json(d, &["--store", "two.parquet", "traces", "stats"]);
    assert_eq!(stats["schema_version"], 1);
    let calls: u64 = stats["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(
        calls as usize,
        steps_in(String::from_utf8(a).unwrap().lines())
    );
}

#[test]
fn import_with_bad_lines_stores_the_rest_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("calls.jsonl"),
        concat!(
            r#"{"trace_id": "a", "tool": "fetch", "inputs": {"url": "u"}, "outputs": {"body": "b"}}"#, "\n",
            r#"{"trace_id": "a", "tool": "parse", "inputs": {"body": "b"#, "\n",
            r#"{"trace_id": "b", "tool": "fetch", "inputs": {"url": "v"}, "outputs": {"body": "c"}}"#, "\n",
        ),
    )
    .unwrap();
    let output = chainweaver(d, &["import", "calls.jsonl"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("calls.jsonl:2"),
        "the reject names file and line: {}",
        stderr(&output)
    );
    let rejects = std::fs::read_to_string(d.join("chainweaver-rejects.jsonl")).unwrap();
    assert_eq!(rejects.lines().count(), 1);
    let listing = json(d, &["traces", "list"]);
    assert_eq!(listing["total"], 2);
}

#[test]
fn errors_say_what_and_hint_how() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let output = chainweaver(d, &["traces", "list"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("error: no store at chainweaver.db"),
        "{}",
        stderr(&output)
    );
    assert!(stderr(&output).contains("hint:"));
    assert!(
        !d.join("chainweaver.db").exists(),
        "reading commands create no store"
    );

    let output = chainweaver(d, &["traces", "list", "--format", "spmf"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("name it with --input-format spmf"),
        "{}",
        stderr(&output)
    );

    let output = chainweaver(d, &["import", "missing.json"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("missing.json"),
        "{}",
        stderr(&output)
    );

    let output = chainweaver(d, &["traces", "list", "--since", "last tuesday"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("last tuesday"),
        "{}",
        stderr(&output)
    );

    // `analyze` builds and verifies candidates: a flag that only counts is refused, not
    // ignored, and no store is made.
    let fresh = tempfile::tempdir().unwrap();
    let output = chainweaver(fresh.path(), &["analyze", "--count-only", "missing.json"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("mine --count-only"),
        "{}",
        stderr(&output)
    );
    assert!(!fresh.path().join("chainweaver.db").exists());
}

#[test]
fn analyze_on_the_sample_ranks_the_planted_flows_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sample = sample();
    let report = json(
        d,
        &["analyze", sample.to_str().unwrap(), "--report", "report.md"],
    );
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(sample.with_file_name("support-agent.truth.json")).unwrap(),
    )
    .unwrap();
    let planted: Vec<Vec<String>> = truth["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| serde_json::from_value(f["tools"].clone()).unwrap())
        .collect();
    let candidates = report["mine"]["candidates"].as_array().unwrap();
    let proposed: Vec<Vec<String>> = candidates
        .iter()
        .map(|c| serde_json::from_value(c["tools"].clone()).unwrap())
        .collect();
    // The planted flows are the best-ranked proposals, before any decoy or sub-flow.
    let mut top: Vec<Vec<String>> = proposed[..planted.len()].to_vec();
    let mut wanted = planted.clone();
    top.sort();
    wanted.sort();
    assert_eq!(top, wanted, "ranking: {proposed:?}");
    assert!(
        std::fs::read_to_string(d.join("report.md"))
            .unwrap()
            .contains("find_customer -> get_customer")
    );
    // The store keeps the candidates for later commands.
    let listed = json(d, &["candidates", "list"]);
    assert_eq!(listed["schema_version"], 1);
    assert_eq!(
        listed["candidates"].as_array().unwrap().len(),
        candidates.len()
    );
    ok(d, &["candidates", "export", "1", "-o", "flow.json"]);
    let flow: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("flow.json")).unwrap()).unwrap();
    assert!(
        flow["steps"].as_array().is_some_and(|s| s.len() >= 2),
        "{flow}"
    );
}

#[test]
fn count_only_matches_the_literature_on_sign() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sign = datasets.join("spm/SIGN.txt");
    let contiguous = json(
        dir.path(),
        &[
            "mine",
            "--count-only",
            "--spmf",
            sign.to_str().unwrap(),
            "--min-support",
            "37",
            "--min-length",
            "1",
        ],
    );
    assert_eq!(contiguous["patterns"], 184);
    let gapped = json(
        dir.path(),
        &[
            "mine",
            "--count-only",
            "--spmf",
            sign.to_str().unwrap(),
            "--min-support",
            "219",
            "--min-length",
            "1",
            "--any-gap",
        ],
    );
    assert_eq!(gapped["patterns"], 1928);
}

#[test]
fn tau_bench_imports_through_the_cli() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tau = datasets.join("tau-bench-retail");
    let report = json(dir.path(), &["import", tau.to_str().unwrap()]);
    // The folder's licence is listed as skipped; the four result files are imported.
    let files: Vec<&Value> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["status"] == "imported")
        .collect();
    assert_eq!(files.len(), 4);
    let steps: u64 = files.iter().map(|f| f["steps"].as_u64().unwrap()).sum();
    let counts = json(dir.path(), &["traces", "list", "--limit", "1"]);
    assert_eq!(counts["total"], 400);
    let stats = json(dir.path(), &["traces", "stats"]);
    assert_eq!(stats["schema_version"], 1);
    let calls: u64 = stats["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["calls"].as_u64().unwrap())
        .sum();
    assert_eq!(calls, steps);
    // Importing again stores nothing twice.
    let again = json(dir.path(), &["import", tau.to_str().unwrap()]);
    let duplicates: u64 = again["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["stored"]["duplicate_steps"].as_u64().unwrap())
        .sum();
    assert_eq!(duplicates, steps);
}

/// The `#` of each proposal `analyze` prints, and the one its `next:` line names, is the number
/// `candidates list`, `verdicts show` and `flows promote` take for that candidate. On
/// tau-bench the proposals are not the first candidates listed, so a rank of the report's own
/// would name other candidates.
#[test]
fn analyze_numbers_its_proposals_as_candidates_list_does_on_tau_bench() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tau = datasets.join("tau-bench-retail");
    let text = ok(d, &["-q", "analyze", tau.to_str().unwrap()]);
    let rows: Vec<(usize, String)> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("#  behaviour"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            (
                cells[0].parse().unwrap(),
                cells[cells.len() - 1].to_string(),
            )
        })
        .collect();
    assert_eq!(rows.len(), 7, "{text}");
    let listed = json(d, &["candidates", "list"]);
    let listed = listed["candidates"].as_array().unwrap();
    for (number, score) in &rows {
        let candidate = &listed[number - 1];
        assert_eq!(
            format!("{:.1}", candidate["evidence"]["score"].as_f64().unwrap()),
            *score,
            "#{number}: {}",
            candidate["id"]
        );
        assert_eq!(
            candidate["behaviour"]["kind"], "lead",
            "#{number}: {candidate}"
        );
    }
    let numbers: Vec<usize> = rows.iter().map(|(n, _)| *n).collect();
    assert_ne!(numbers, (1..=rows.len()).collect::<Vec<_>>());
    let next = text.lines().find(|l| l.starts_with("next: ")).unwrap();
    assert!(next.contains("`chainweaver flows promote 1`"), "{next}");
    let second = rows[1].0.to_string();
    let verdict = json(d, &["verdicts", "show", &second]);
    assert_eq!(
        verdict["verdict"]["candidate_id"],
        listed[rows[1].0 - 1]["id"],
        "{verdict}"
    );
}

#[test]
fn help_teaches_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    let help = ok(dir.path(), &["--help"]);
    insta::assert_snapshot!("main_help", help);
}

/// A flow padded with an unrelated call is probed on 64 occurrences; `candidates show` says so
/// and names the unlinked step, and the JSON carries the same facts.
#[test]
fn show_explains_a_probed_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let generate = chainweaver(
        path,
        &[
            "datasets", "generate", "--traces", "4000", "--seed", "7", "--jsonl", "t.jsonl",
        ],
    );
    assert!(
        generate.status.success(),
        "{}",
        String::from_utf8_lossy(&generate.stderr)
    );
    for args in [
        &["import", "t.jsonl"][..],
        &["mine", "--min-support", "5"][..],
    ] {
        let output = chainweaver(path, args);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let listed = chainweaver(path, &["--format", "json", "candidates", "list"]);
    assert!(listed.status.success());
    let candidates: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(candidates["schema_version"], 1);
    let probed = candidates["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["sample"].get("unlinked_in_probe").is_some())
        .expect("a padded flow is probed at 4,000 traces");
    assert_eq!(probed["sample"]["read"], 64);
    let step = probed["sample"]["unlinked_in_probe"][0].as_u64().unwrap() as usize;
    let tool = probed["tools"][step].as_str().unwrap();
    let id = probed["id"].as_str().unwrap();
    let shown = chainweaver(path, &["candidates", "show", id]);
    assert!(shown.status.success());
    let text = String::from_utf8_lossy(&shown.stdout);
    let occurrences = probed["evidence"]["occurrences"].as_u64().unwrap();
    assert!(
        text.contains(&format!(
            "bindings inferred from 64 of {occurrences} occurrences"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("step {step} ({tool}) linked to no other step")),
        "{text}"
    );
}

/// The committed completion scripts are what the binary generates: regenerate them with
/// `chainweaver completions SHELL > completions/FILE` after changing the command line.
#[test]
fn committed_completions_match_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for (shell, file) in [
        ("bash", "chainweaver.bash"),
        ("zsh", "_chainweaver"),
        ("fish", "chainweaver.fish"),
    ] {
        let generated = ok(dir.path(), &["completions", shell]);
        assert!(
            generated.contains("replay") && generated.contains("completions"),
            "{shell}: the script covers the subcommands:\n{generated}"
        );
        let committed = std::fs::read_to_string(repo.join("completions").join(file))
            .unwrap_or_else(|err| panic!("completions/{file}: {err}"));
        assert!(
            committed == generated,
            "completions/{file} is out of date: regenerate it with \
             `cargo run -- completions {shell} > completions/{file}`"
        );
    }
    for shell in ["elvish", "powershell"] {
        assert!(ok(dir.path(), &["completions", shell]).contains("chainweaver"));
    }
    let output = chainweaver(dir.path(), &["completions", "tcsh"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}

/// Output into a pipe nobody reads any more (`chainweaver traces list | head -1`) ends quietly
/// and successfully, whatever the command.
#[test]
fn a_closed_stdout_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    ok(dir.path(), &["import", sample().to_str().unwrap()]);
    let calc = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("datasets/flows/calc.json");
    let commands: [&[&str]; 5] = [
        &["traces", "list"],
        &["--format", "json", "traces", "stats"],
        &["traces", "export", "-o", "-"],
        &["completions", "bash"],
        &["flows", "validate", calc.to_str().unwrap()],
    ];
    for args in commands {
        // The read end is closed before the binary starts, so its first write fails.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_chainweaver"))
            .args(args)
            .current_dir(dir.path())
            .env_remove("CHAINWEAVER_STORE")
            .stdout(writer)
            .output()
            .unwrap();
        assert_eq!(stderr(&output), "", "{args:?}");
        assert_eq!(output.status.code(), Some(0), "{args:?}");
    }
}

/// A manifest named by its bare file name, from its own folder: its command tools start there
/// (a bare name's parent is the empty path, which no child process can start in).
#[test]
fn command_tools_of_a_manifest_named_by_its_file_name_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tools.toml"),
        "[[tool]]\nname = \"echo\"\nargv = [\"cat\"]\n\
         input_schema = { type = \"object\", properties = { n = { type = \"integer\" } }, required = [\"n\"] }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("echo.json"),
        r#"{"name": "echo_flow", "steps": [{"tool_name": "echo", "input_mapping": {"n": "n"}}]}"#,
    )
    .unwrap();
    let result = json(
        dir.path(),
        &[
            "run",
            "echo.json",
            "--tools",
            "tools.toml",
            "--input",
            r#"{"n": 7}"#,
        ],
    );
    assert_eq!(result["success"], Value::Bool(true), "{result}");
    assert_eq!(
        result["final_output"]["n"],
        serde_json::json!(7),
        "{result}"
    );
}

/// The steps of the traces in `lines` of a chainweaver-traces JSON Lines file.
fn steps_in<'a>(lines: impl Iterator<Item = &'a str>) -> usize {
    lines
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["steps"]
                .as_array()
                .unwrap()
                .len()
        })
        .sum()
}

/// `all.jsonl` in `dir`: `traces` generated traces from `seed`, as the file's text.
fn generated_jsonl(dir: &Path, traces: &str, seed: &str) -> String {
    ok(
        dir,
        &[
            "datasets",
            "generate",
            "--traces",
            traces,
            "--seed",
            seed,
            "--jsonl",
            "all.jsonl",
        ],
    );
    std::fs::read_to_string(dir.join("all.jsonl")).unwrap()
}

#[test]
fn imports_running_at_once_into_one_parquet_store_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = generated_jsonl(d, "1900", "5");
    let lines: Vec<&str> = text.lines().collect();
    let write = |name: String, chunk: &[&str]| {
        std::fs::write(d.join(&name), chunk.join("\n") + "\n").unwrap();
        name
    };
    // One user imports large files, whose parts take a while to write; another imports one
    // trace at a time, so its commits take the numbers the large imports are writing parts
    // for, and each of its processes opens the store (removing leftovers of appends that
    // never committed) while a large import's parts are half written.
    let (large, small) = lines.split_at(1800);
    let large: Vec<String> = large
        .chunks(450)
        .enumerate()
        .map(|(i, chunk)| write(format!("large-{i}.jsonl"), chunk))
        .collect();
    let small: Vec<String> = small
        .chunks(1)
        .enumerate()
        .map(|(i, chunk)| write(format!("small-{i:03}.jsonl"), chunk))
        .collect();
    std::thread::scope(|scope| {
        for files in [&large, &small] {
            scope.spawn(move || {
                for file in files {
                    ok(d, &["-q", "--store", "both.parquet", "import", file]);
                }
            });
        }
    });
    ok(d, &["-q", "--store", "one.db", "import", "all.jsonl"]);
    let exported = |store: &str| {
        let file = format!("{store}.jsonl");
        ok(
            d,
            &[
                "-q", "--store", store, "traces", "export", "--output", &file,
            ],
        );
        let text = std::fs::read_to_string(d.join(&file)).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines.sort();
        lines
    };
    let both = exported("both.parquet");
    assert_eq!(both.len(), lines.len());
    assert_eq!(both, exported("one.db"));
}

#[test]
fn compacting_a_store_filled_by_many_imports_keeps_what_mine_finds() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = generated_jsonl(d, "600", "11");
    let lines: Vec<&str> = text.lines().collect();
    let steps = steps_in(lines.iter().copied());
    // Six imports, six appends, each spread over the generator's days.
    for (i, chunk) in lines.chunks(100).enumerate() {
        let file = format!("chunk-{i}.jsonl");
        std::fs::write(d.join(&file), chunk.join("\n") + "\n").unwrap();
        for store in ["s.parquet", "s.db"] {
            ok(d, &["-q", "--store", store, "import", &file]);
        }
    }
    for store in ["s.parquet", "s.db"] {
        let mined = |d: &Path| {
            let outcome = json(d, &["-q", "--store", store, "mine"]);
            (outcome["patterns"].clone(), outcome["candidates"].clone())
        };
        let before = mined(d);
        assert!(
            !before.1.as_array().unwrap().is_empty(),
            "{store}: no candidates"
        );
        let stats = json(d, &["-q", "--store", store, "traces", "compact"]);
        let files = (
            stats["files_before"].as_u64().unwrap(),
            stats["files_after"].as_u64().unwrap(),
        );
        if store == "s.parquet" {
            assert!(files.0 >= 6 * files.1, "{stats}");
            assert_eq!(
                stats["rows_rewritten"].as_u64().unwrap() as usize,
                steps,
                "{stats}"
            );
        } else {
            // The file, its write-ahead log emptied into it.
            assert_eq!(files.1, 1, "{stats}");
        }
        assert_eq!(mined(d), before, "{store}: mining changed after compaction");
    }
    let text = ok(d, &["--store", "s.parquet", "traces", "compact"]);
    assert!(text.starts_with("compacted s.parquet: "), "{text}");
    assert!(text.contains("0 step rows rewritten"), "{text}");
}
