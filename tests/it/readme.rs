//! The README's "A short tour", run as written: every command of its code block, read from
//! README.md (so the test follows the README), in order, through `sh` in a fresh directory that
//! holds a copy of the repository's `datasets/` and sees the shared datasets at
//! `../shared/datasets`, as a checkout does. Only placeholders such as `<trace-id>` are replaced,
//! with values taken from the output of the commands before them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::shared_datasets;

/// One command of the tour, with the comment lines of its paragraph.
#[derive(Debug)]
struct TourCommand {
    /// 1-based line in README.md where the command starts.
    line: usize,
    /// The command, continuation lines joined.
    text: String,
    /// The `#` lines that open its paragraph of the block.
    comment: String,
}

impl TourCommand {
    /// The subcommand (`import`, `traces`, ...): the first word after `chainweaver` that is
    /// not an option.
    fn subcommand(&self) -> &str {
        self.text
            .split_whitespace()
            .skip(1)
            .find(|word| !word.starts_with('-'))
            .unwrap_or("")
    }

    /// Exit codes that count as running: 0, and 3 (some records rejected) for the commands that
    /// read records when their paragraph says that is their exit status.
    fn accepted_codes(&self) -> Vec<i32> {
        let reads_records = matches!(self.subcommand(), "import" | "analyze");
        if reads_records && self.comment.contains("exit status is 3") {
            vec![0, 3]
        } else {
            vec![0]
        }
    }

    /// Commands that take over the terminal, run in a real one.
    fn is_interactive(&self) -> bool {
        self.subcommand() == "tui"
    }
}

/// The commands of the code block under `## A short tour`: its indented lines, comments and
/// blank lines left out, `\` continuations joined.
fn tour_commands(readme: &str) -> Vec<TourCommand> {
    let lines: Vec<&str> = readme.lines().collect();
    let start = lines
        .iter()
        .position(|line| line.trim() == "## A short tour")
        .expect("README.md has a `## A short tour` section");
    let mut commands = Vec::new();
    let mut comment = String::new();
    let mut pending: Option<TourCommand> = None;
    for (index, line) in lines.iter().enumerate().skip(start + 1) {
        let in_block = line.starts_with("    ") || line.trim().is_empty();
        if !in_block {
            if commands.is_empty() && pending.is_none() {
                continue; // prose before the block
            }
            break;
        }
        let code = line.trim();
        if let Some(command) = pending.as_mut() {
            command.text.push(' ');
            command.text.push_str(code.trim_end_matches('\\').trim());
            if !code.ends_with('\\') {
                commands.extend(pending.take());
            }
            continue;
        }
        if code.is_empty() {
            comment.clear();
        } else if let Some(text) = code.strip_prefix('#') {
            comment.push_str(text.trim());
            comment.push(' ');
        } else {
            let command = TourCommand {
                line: index + 1,
                text: code.trim_end_matches('\\').trim().to_string(),
                comment: comment.clone(),
            };
            if code.ends_with('\\') {
                pending = Some(command);
            } else {
                commands.push(command);
            }
        }
    }
    assert!(
        pending.is_none(),
        "the tour ends inside a `\\` continuation"
    );
    commands
}

/// What the tour has printed so far, for placeholders.
#[derive(Default)]
struct History {
    /// Each command's text and stdout, in order.
    outputs: Vec<(String, String)>,
}

impl History {
    /// The value for `<name>`, from the output of an earlier command.
    fn value(&self, name: &str) -> String {
        match name {
            // The first trace of the latest `traces list` table (its first column).
            "trace-id" => self
                .outputs
                .iter()
                .rev()
                .find(|(command, _)| command.contains("traces list"))
                .and_then(|(_, stdout)| stdout.lines().nth(1))
                .and_then(|row| row.split_whitespace().next())
                .unwrap_or_else(|| panic!("<trace-id> needs a `traces list` with rows before it"))
                .to_string(),
            other => panic!("the tour uses <{other}>: teach tests/it/readme.rs where to find it"),
        }
    }

    /// `text` with every `<placeholder>` replaced.
    fn substitute(&self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(open) = rest.find('<') {
            let Some(close) = rest[open..].find('>') else {
                break;
            };
            let name = &rest[open + 1..open + close];
            let is_placeholder = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            out.push_str(&rest[..open]);
            if is_placeholder {
                out.push_str(&self.value(name));
            } else {
                out.push_str(&rest[open..=open + close]);
            }
            rest = &rest[open + close + 1..];
        }
        out.push_str(rest);
        out
    }
}

/// A fresh checkout-like directory: `<tmp>/checkout` with a copy of `datasets/`, and
/// `<tmp>/shared/datasets` pointing at the shared datasets.
fn checkout(tmp: &Path, shared: &Path) -> PathBuf {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let work = tmp.join("checkout");
    copy_dir(&repo.join("datasets"), &work.join("datasets"));
    std::fs::create_dir_all(tmp.join("shared")).unwrap();
    std::os::unix::fs::symlink(shared, tmp.join("shared/datasets")).unwrap();
    work
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// `PATH` with the built binary first, so `chainweaver` in a command is the one under test.
fn path_with_binary() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_chainweaver"))
        .parent()
        .unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// A home for the tour, so no command can touch the real one.
fn tour_home(dir: &Path) -> &Path {
    dir.parent()
        .expect("the checkout is inside the temporary directory")
}

fn run_in_shell(dir: &Path, command: &str) -> Output {
    Command::new("sh")
        .args(["-c", command])
        .current_dir(dir)
        .env("PATH", path_with_binary())
        .env("HOME", tour_home(dir))
        .env_remove("CHAINWEAVER_STORE")
        .stdin(Stdio::null())
        .output()
        .expect("sh runs")
}

/// Run an interactive command in a tmux terminal, quit it with `q` once it has drawn, and
/// return its exit status and last screen.
///
/// The script records the exit status in a file: tmux's own `pane_dead_status` is sometimes
/// empty for a pane that has just died (seen with tmux 3.3), which made this test flaky. Each
/// run gets its own tmux server (`-L`), so other terminal tests cannot disturb it.
fn run_in_terminal(dir: &Path, command: &str) -> (Option<i32>, String) {
    let socket = format!("readme-tour-{}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs (the tour has a terminal UI)")
    };
    let script = dir.join(".tour-interactive.sh");
    let exit_file = dir.join(".tour-interactive.exit");
    let _ = std::fs::remove_file(&exit_file);
    std::fs::write(
        &script,
        format!(
            "unset CHAINWEAVER_STORE\nPATH='{}'\nHOME='{}'\nexport PATH HOME\n{command}\n\
             echo $? > '{}'\nsleep 600\n",
            path_with_binary(),
            tour_home(dir).display(),
            exit_file.display()
        ),
    )
    .unwrap();
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        "tour",
        "-x",
        "120",
        "-y",
        "40",
        "-c",
        dir.to_str().unwrap(),
        &format!("sh {}", script.display()),
    ]);
    assert!(started.status.success(), "{started:?}");
    let exit_code = || {
        std::fs::read_to_string(&exit_file)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok())
    };
    let pane = || {
        String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", "tour"]).stdout).into_owned()
    };
    // Wait (bounded, so a broken command cannot hang the suite) for a first frame (the title
    // bar names the store), then quit and wait for the status.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut screen = pane();
    while exit_code().is_none() && !screen.contains("chainweaver") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        screen = pane();
    }
    tmux(&["send-keys", "-t", "tour", "q"]);
    let mut code = exit_code();
    while code.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        code = exit_code();
    }
    tmux(&["kill-server"]);
    (code, screen)
}

#[test]
fn the_tour_parses_into_commands() {
    let readme = "intro\n\n## A short tour\n\n    # Group one; exit status is 3.\n    \
                  chainweaver import x  # trailing\n    chainweaver run a \\\n        --save b\n\n    \
                  chainweaver traces show <trace-id>\n\nAfter.\n    chainweaver not-in-the-tour\n";
    let commands = tour_commands(readme);
    let texts: Vec<&str> = commands.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "chainweaver import x  # trailing",
            "chainweaver run a --save b",
            "chainweaver traces show <trace-id>",
        ]
    );
    assert_eq!(commands[0].line, 6);
    assert_eq!(commands[0].accepted_codes(), vec![0, 3]);
    assert_eq!(commands[1].accepted_codes(), vec![0]);
    assert_eq!(commands[2].comment, "");
    let history = History {
        outputs: vec![(
            "chainweaver traces list".into(),
            "trace  steps\nabc-1  3\nabc-2  4\n".into(),
        )],
    };
    assert_eq!(
        history.substitute("chainweaver traces show <trace-id> <PATH>"),
        "chainweaver traces show abc-1 <PATH>"
    );
}

#[test]
fn every_tour_command_runs_as_written() {
    let Some(shared) = shared_datasets() else {
        return;
    };
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap();
    let commands = tour_commands(&readme);
    assert!(
        commands.len() >= 20,
        "the tour has its commands: {commands:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let work = checkout(tmp.path(), &shared);
    let mut history = History::default();
    let mut failures = Vec::new();
    for command in &commands {
        assert!(
            command.text.starts_with("chainweaver "),
            "README.md:{}: a tour command runs chainweaver: {}",
            command.line,
            command.text
        );
        let text = history.substitute(&command.text);
        let (code, stdout, stderr) = if command.is_interactive() {
            let (code, screen) = run_in_terminal(&work, &text);
            (code, screen, String::new())
        } else {
            let output = run_in_shell(&work, &text);
            (
                output.status.code(),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        };
        if !code.is_some_and(|code| command.accepted_codes().contains(&code)) {
            let tail: Vec<&str> = stdout.lines().rev().take(5).collect();
            failures.push(format!(
                "README.md:{}: `{text}` exited {code:?} (accepted: {:?})\n  stderr: {}\n  \
                 stdout (last lines): {}",
                command.line,
                command.accepted_codes(),
                stderr.trim(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n    ")
            ));
        }
        history.outputs.push((text, stdout));
    }
    assert!(
        failures.is_empty(),
        "{} of {} tour commands failed:\n{}",
        failures.len(),
        commands.len(),
        failures.join("\n")
    );
}
