//! Snapshots of what people and scripts read: the text and JSON output of the reviewing
//! commands over the project's fixed sample, analyzed by the real pipeline. Times, dates and
//! the temporary directory are masked; everything else must stay as it is, or the change is
//! reviewed with `cargo insta review`.

use std::path::Path;

use crate::chainweaver;

fn run(dir: &Path, args: &[&str]) -> String {
    let output = chainweaver(dir, args);
    assert!(
        output.status.success(),
        "chainweaver {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

fn settings(dir: &Path) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(&regex_escape(&dir.display().to_string()), "[dir]");
    settings.add_filter(r"\d+\.\d\d s\b", "[secs] s");
    settings.add_filter(
        r#""(mining_time|inference_time|load_time|seconds)": [0-9.e-]+"#,
        r#""$1": "[secs]""#,
    );
    settings.add_filter(r#""verified_at": "[^"]+""#, r#""verified_at": "[time]""#);
    settings
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}

#[test]
fn reviewing_commands_print_stable_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sample = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("datasets/sample/support-agent.jsonl");
    run(d, &["-q", "import", sample.to_str().unwrap()]);
    let analyze_text = run(d, &["-q", "analyze"]);
    settings(d).bind(|| {
        // `analyze` with no paths analyzes the store as it is.
        insta::assert_snapshot!("analyze_text", analyze_text.as_str());
        insta::assert_snapshot!("candidates_list_text", run(d, &["candidates", "list"]));
        insta::assert_snapshot!("candidates_show_text", run(d, &["candidates", "show", "1"]));
        insta::assert_snapshot!("verdicts_list_text", run(d, &["verdicts", "list"]));
        insta::assert_snapshot!("verdicts_show_text", run(d, &["verdicts", "show", "1"]));
        insta::assert_snapshot!(
            "patterns_list_text",
            run(d, &["patterns", "list", "--limit", "8"])
        );
        insta::assert_snapshot!("traces_stats_text", run(d, &["traces", "stats"]));
        let json = |args: &[&str]| {
            let mut all = vec!["--format", "json"];
            all.extend_from_slice(args);
            run(d, &all)
        };
        insta::assert_snapshot!("candidates_show_json", json(&["candidates", "show", "1"]));
        insta::assert_snapshot!("verdicts_list_json", json(&["verdicts", "list"]));
        insta::assert_snapshot!("verdicts_show_json", json(&["verdicts", "show", "1"]));
        insta::assert_snapshot!(
            "patterns_list_json",
            json(&["patterns", "list", "--limit", "8"])
        );
        insta::assert_snapshot!("traces_stats_json", json(&["traces", "stats"]));
    });
    // The whole JSON documents parse and carry their version; durations are numbers.
    let analyzed: serde_json::Value =
        serde_json::from_str(&run(d, &["-q", "--format", "json", "analyze"])).unwrap();
    assert_eq!(analyzed["schema_version"], 1);
    assert!(
        analyzed["mine"]["mining_time"].is_f64(),
        "{}",
        analyzed["mine"]
    );
    // Coverage comes under its documented names, with the figures the text reports.
    let coverage = &analyzed["coverage"];
    let saved = |field: &str| {
        coverage[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field}: {coverage}"))
    };
    let behaviours = saved("round_trips_saved_by_verified_behaviours");
    let candidates = saved("round_trips_saved_by_verified_candidates");
    assert!(behaviours > 0, "{coverage}");
    assert!(
        analyze_text.contains(&format!("save {behaviours} model round trips"))
            && analyze_text.contains(&format!(", {candidates})")),
        "{coverage}\n{analyze_text}"
    );
    let listed: serde_json::Value =
        serde_json::from_str(&run(d, &["--format", "json", "candidates", "list"])).unwrap();
    assert_eq!(listed["schema_version"], 1);
    assert_eq!(
        listed["candidates"].as_array().map(Vec::len),
        analyzed["report"].as_array().map(Vec::len)
    );
}
