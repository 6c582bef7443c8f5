//! `chainweaver tui` in a real terminal: tmux runs it on a store imported from tau-bench, keys
//! are sent as a person would type them, and the captured panes are read.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::shared_datasets;

struct Tmux {
    session: String,
}

/// How long a pane may take to show what a test waits for: generous, because a loaded CI
/// machine draws slowly, and a test that passes returns as soon as the text is there.
const PANE_WAIT: Duration = Duration::from_secs(60);

impl Tmux {
    fn run(args: &[&str]) -> std::process::Output {
        Command::new("tmux").args(args).output().expect("tmux runs")
    }

    fn start(session: &str, dir: &Path, command: &str) -> Self {
        let status = Self::run(&[
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            "120",
            "-y",
            "40",
            "-c",
            dir.to_str().unwrap(),
            command,
        ]);
        assert!(
            status.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&status.stderr)
        );
        // Keep the pane after the program exits so its last screen can be read.
        Self::run(&["set-option", "-t", session, "remain-on-exit", "on"]);
        Self {
            session: session.to_string(),
        }
    }

    fn keys(&self, keys: &[&str]) {
        for key in keys {
            let out = Self::run(&["send-keys", "-t", &self.session, key]);
            assert!(out.status.success());
            std::thread::sleep(Duration::from_millis(60));
        }
    }

    fn literal(&self, text: &str) {
        let out = Self::run(&["send-keys", "-t", &self.session, "-l", text]);
        assert!(out.status.success());
    }

    fn pane(&self) -> String {
        String::from_utf8_lossy(&Self::run(&["capture-pane", "-p", "-t", &self.session]).stdout)
            .into_owned()
    }

    /// Wait until the pane shows `text` (the app draws asynchronously), or fail with the pane.
    fn wait_for(&self, text: &str) -> String {
        let started = Instant::now();
        loop {
            let pane = self.pane();
            if pane.contains(text) {
                return pane;
            }
            assert!(
                started.elapsed() < PANE_WAIT,
                "pane never showed {text:?}:\n{pane}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Wait until the pane shows `text` and nothing is still loading: a view draws its rows
    /// as soon as they arrive, and the verdicts that order them can come later.
    fn wait_for_loaded(&self, text: &str) -> String {
        let started = Instant::now();
        loop {
            let pane = self.wait_for(text);
            if !pane.contains("[loading]") {
                return pane;
            }
            assert!(
                started.elapsed() < PANE_WAIT,
                "pane never finished loading:\n{pane}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn pane_dead(&self) -> bool {
        let out = Self::run(&["display-message", "-p", "-t", &self.session, "#{pane_dead}"]);
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        Self::run(&["kill-session", "-t", &self.session]);
    }
}

#[test]
fn browse_tau_bench_in_a_real_terminal() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    if Command::new("tmux").arg("-V").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have tmux (.ci/run installs it)"
        );
        eprintln!("skipping: no tmux");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_chainweaver");
    let tau = datasets.join("tau-bench-retail");
    let import = Command::new(bin)
        .args(["--quiet", "import", tau.to_str().unwrap()])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );

    let session = format!("cw-tui-{}", std::process::id());
    // After the browser exits, `stty -a` shows whether it left the terminal sane.
    let command = format!("{bin} tui; echo $? > exit-code.txt; stty -a > stty.txt");
    let tmux = Tmux::start(&session, dir.path(), &command);
    tmux.wait_for("of 400");

    // Filter for traces that call get_order_details.
    tmux.keys(&["/"]);
    tmux.literal("tool=get_order_details");
    tmux.keys(&["Enter"]);
    let filtered = tmux.wait_for("tool=get_order_details");
    assert!(
        !filtered.contains("of 400"),
        "the filter narrows the listing:\n{filtered}"
    );

    // Open the first trace, move to a get_order_details step, focus its JSON and unfold it.
    tmux.keys(&["Enter"]);
    let detail = tmux.wait_for("get_order_details");
    assert!(
        detail.contains("find_user_id_by_name_zip") || detail.contains("get_user_details"),
        "{detail}"
    );
    tmux.keys(&["j", "j"]);
    tmux.wait_for("step 2: get_order_details");
    tmux.keys(&["l", "E"]);
    let expanded = tmux.wait_for("order_id");
    assert!(expanded.contains("order_id"), "{expanded}");

    // Quit, and the shell gets a sane terminal back.
    tmux.keys(&["q", "q"]);
    let stty = dir.path().join("stty.txt");
    let started = Instant::now();
    while !stty.exists()
        || std::fs::read_to_string(&stty)
            .unwrap_or_default()
            .is_empty()
    {
        assert!(
            started.elapsed() < PANE_WAIT,
            "the browser did not quit:\n{}",
            tmux.pane()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let code = std::fs::read_to_string(dir.path().join("exit-code.txt")).unwrap();
    assert_eq!(code.trim(), "0");
    let modes: Vec<String> = std::fs::read_to_string(&stty)
        .unwrap()
        .split([';', '\n', ' '])
        .map(|word| word.trim().to_string())
        .collect();
    for mode in ["icanon", "echo", "isig"] {
        assert!(
            modes.iter().any(|m| m == mode),
            "{mode} restored: {modes:?}"
        );
    }
    assert!(
        tmux.pane_dead() || !tmux.pane().contains("j/k move"),
        "the browser is gone"
    );
}

#[test]
fn review_the_top_verified_candidate_of_tau_bench() {
    let Some(datasets) = shared_datasets() else {
        return;
    };
    if Command::new("tmux").arg("-V").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have tmux (.ci/run installs it)"
        );
        eprintln!("skipping: no tmux");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_chainweaver");
    let tau = datasets.join("tau-bench-retail");
    // The real pipeline: import, mine 80%, replay every candidate on the other 20%.
    let analyze = Command::new(bin)
        .args(["--quiet", "analyze", tau.to_str().unwrap()])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        analyze.status.success(),
        "{}",
        String::from_utf8_lossy(&analyze.stderr)
    );

    let session = format!("cw-tui-review-{}", std::process::id());
    let tmux = Tmux::start(&session, dir.path(), &format!("{bin} tui"));
    tmux.wait_for("of 400");
    tmux.keys(&[":"]);
    tmux.literal("candidates");
    tmux.keys(&["Enter"]);
    // The best candidate is the top verified one, its replays all exact.
    let table = tmux.wait_for_loaded("best first");
    assert!(
        table.contains("find_user_id_by_name_zip -> get_user_details -> get_order_details")
            && table.contains("verified 57/57"),
        "{table}"
    );
    tmux.keys(&["Enter"]);
    let review = tmux.wait_for("verdict: verified");
    // It is the loop: one map step over the user's orders, the agent's pick an input.
    for expected in [
        "find_user_id_by_name_zip -> get_user_details -> each get_order_details",
        "flow inputs: first_name, last_name, zip, selected_orders",
        "loop runs (calls x occurrences): 1 x",
        "step 0 find_user_id_by_name_zip /zip <- input zip, confidence 1.00 over 206",
        "step 1 get_user_details /user_id <- step 0 output (whole), confidence 1.00 over 206",
        "step 2 get_order_details /order_id <- step 1 output /orders[each] (the elements input selected_orders picks)",
        "exact replays 57/57 (57 found in 85 held-out traces)",
        "behaviour: leads find_user_id_by_name_zip -> get_user_details -> each get_order_details",
    ] {
        assert!(
            review.contains(expected),
            "{expected:?} not shown:\n{review}"
        );
    }
    assert!(
        !review.contains("\"step_output\"") && !review.contains("{\"pointer\""),
        "bindings are sentences, not JSON:\n{review}"
    );
    tmux.keys(&["q"]);
}
