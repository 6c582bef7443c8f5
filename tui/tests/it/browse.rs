//! The browser over a real SQLite fixture store: frame snapshots at 80x24 and 120x40, escaping
//! of hostile payloads, keys while a query runs, and the committed keymap help.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chainweaver_analyzer::mine::MineOutcome;
use chainweaver_recorder::Result as StoreResult;
use chainweaver_recorder::model::{ObservedStep, ObservedTrace, TraceWithSteps};
use chainweaver_recorder::store::{
    AppendStats, PageRequest, SqliteStore, StepColumns, StoreCounts, TraceFilter, TracePage,
    TraceStore,
};
use chainweaver_tui::Browser;
use chainweaver_tui::app::{Action, Effect, Focus, Mode, StatusKind, View};
use chainweaver_tui::keymap::{Command, Key, help_markdown};
use chainweaver_tui::sanitize::needs_escape;
use chainweaver_tui::ui::{Theme, render};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::Value;

use crate::fixture::{write_analyzed, write_fixture, write_hostile_trace};

const WAIT: Duration = Duration::from_secs(20);

fn fixture_store(dir: &Path) -> Box<dyn TraceStore> {
    let path = dir.join("fixture.db");
    let mut store = SqliteStore::open(&path).unwrap();
    write_fixture(&mut store);
    Box::new(store)
}

fn open(dir: &Path, size: (u16, u16)) -> Browser {
    let mut browser = Browser::new(fixture_store(dir), "fixture.db", size).unwrap();
    assert!(browser.settle(WAIT));
    browser
}

fn keys(browser: &mut Browser, keys: &[Key]) -> Vec<Effect> {
    let mut effects = Vec::new();
    for key in keys {
        effects.extend(browser.key(*key));
        assert!(browser.settle(WAIT), "store answered");
    }
    effects
}

fn typed(browser: &mut Browser, text: &str) {
    for c in text.chars() {
        browser.key(Key::Char(c));
    }
}

fn draw(browser: &Browser, theme: Theme) -> Terminal<TestBackend> {
    let (w, h) = browser.state.size;
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal
        .draw(|frame| render(frame, &browser.state, &theme))
        .unwrap();
    terminal
}

fn frame_text(browser: &Browser, theme: Theme) -> String {
    draw(browser, theme).backend().to_string()
}

const SIZES: [(u16, u16); 2] = [(80, 24), (120, 40)];

fn snapshot(name: &str, browser: &Browser) {
    let (w, h) = browser.state.size;
    let text = frame_text(browser, Theme::default());
    insta::assert_snapshot!(format!("{name}_{w}x{h}"), text);
}

#[test]
fn snapshots_of_every_view() {
    for size in SIZES {
        let dir = tempfile::tempdir().unwrap();
        let mut b = open(dir.path(), size);
        snapshot("traces", &b);

        // Sorted by started time, newest first.
        keys(&mut b, &[Key::Char('s'), Key::Char('s')]);
        snapshot("traces_sorted_started", &b);
        keys(
            &mut b,
            &[
                Key::Char('s'),
                Key::Char('s'),
                Key::Char('s'),
                Key::Char('s'),
            ],
        );

        // A trace with a failed step, its payload focused.
        keys(&mut b, &[Key::Char(':')]);
        typed(&mut b, "trace trace-002");
        keys(&mut b, &[Key::Enter]);
        assert_eq!(b.state.view, View::Detail);
        keys(&mut b, &[Key::Char('G'), Key::Char('l'), Key::Char('j')]);
        snapshot("detail_error_step", &b);
        keys(&mut b, &[Key::Char('r')]);
        snapshot("detail_raw", &b);

        // No timestamps: durations, then plain order.
        keys(&mut b, &[Key::Char(':')]);
        typed(&mut b, "trace trace-durations");
        keys(&mut b, &[Key::Enter]);
        snapshot("detail_durations_only", &b);
        keys(&mut b, &[Key::Char(':')]);
        typed(&mut b, "trace trace-order");
        keys(&mut b, &[Key::Enter]);
        snapshot("detail_order_only", &b);

        // Compare two marked traces.
        keys(
            &mut b,
            &[
                Key::Esc,
                Key::Char('g'),
                Key::Char('m'),
                Key::Char('j'),
                Key::Char('m'),
                Key::Char('c'),
            ],
        );
        assert_eq!(b.state.view, View::Compare);
        snapshot("compare", &b);
        keys(&mut b, &[Key::Esc]);

        keys(&mut b, &[Key::Tab]);
        assert_eq!(b.state.view, View::Tools);
        snapshot("tools", &b);
        keys(&mut b, &[Key::Tab, Key::Tab]);
        assert_eq!(b.state.view, View::Candidates);
        keys(&mut b, &[Key::Char('?')]);
        snapshot("help", &b);
        keys(&mut b, &[Key::Esc, Key::Tab]);

        // A filter and a bad filter.
        keys(&mut b, &[Key::Char('/')]);
        typed(&mut b, "tool=cancel_pending_order error");
        keys(&mut b, &[Key::Enter]);
        snapshot("traces_filtered", &b);
        keys(&mut b, &[Key::Char('/'), Key::Ctrl('u')]);
        typed(&mut b, "dur<2s");
        keys(&mut b, &[Key::Enter]);
        snapshot("traces_bad_filter", &b);
    }
}

fn mined_store(dir: &Path) -> (Box<dyn TraceStore>, MineOutcome) {
    let mut store = SqliteStore::open(&dir.join("mined.db")).unwrap();
    let outcome = write_analyzed(&mut store);
    (Box::new(store), outcome)
}

/// Open the candidate that has a verdict, from the Traces view.
fn open_verdict_candidate(b: &mut Browser) -> String {
    keys(b, &[Key::Tab, Key::Tab, Key::Tab]);
    assert_eq!(b.state.view, View::Candidates);
    let verdict = b.state.verdicts.as_ref().unwrap()[0].clone();
    let index = b
        .state
        .candidates
        .items
        .as_ref()
        .unwrap()
        .iter()
        .position(|c| c.id == verdict.candidate_id)
        .unwrap();
    for _ in 0..index {
        keys(b, &[Key::Char('j')]);
    }
    keys(b, &[Key::Enter]);
    assert_eq!(b.state.view, View::Candidate);
    verdict.candidate_id
}

#[test]
fn patterns_and_candidates_mined_by_the_real_analyzer() {
    for size in SIZES {
        let dir = tempfile::tempdir().unwrap();
        let (store, outcome) = mined_store(dir.path());
        let mut b = Browser::new(store, "mined.db", size).unwrap();
        assert!(b.settle(WAIT));
        keys(&mut b, &[Key::Tab, Key::Tab]);
        assert_eq!(b.state.view, View::Patterns);
        assert_eq!(
            b.state.patterns.items.as_ref().unwrap().len(),
            outcome.patterns.len().min(1000)
        );
        snapshot("mined_patterns", &b);
        keys(&mut b, &[Key::Tab]);
        let listed: Vec<&str> = b
            .state
            .candidates
            .items
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        let mined: Vec<&str> = outcome.candidates.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(listed, mined, "best first, as mined");
        snapshot("mined_candidates", &b);
        // Back to Traces, then to the candidate with the verdict.
        keys(&mut b, &[Key::Char('g'), Key::Tab]);
        let id = open_verdict_candidate(&mut b);
        snapshot("mined_candidate", &b);
        let review: Vec<&str> = b
            .state
            .candidate
            .lines
            .iter()
            .map(|l| l.text.as_str())
            .collect();
        for expected in [
            "  step 0 find_customer /email <- input email, confidence 1.00 over 35",
            "  step 1 get_customer /customer_id <- step 0 output /customer_id, confidence 0.97 over 35",
            "  step 2 list_orders /status <- constant \"open\", confidence 1.00 over 35",
            "verdict: partial",
            "  exact replays 4/5 (5 found in 30 held-out traces), recorded tools",
            "  failures: binding wrong 1",
        ] {
            assert!(
                review.contains(&expected),
                "{expected:?} missing from {review:#?}"
            );
        }

        // The replay difference leads to its trace, at the differing step.
        let verdict = b.state.verdicts.as_ref().unwrap()[0].clone();
        let diff = &verdict.diffs[0];
        let at = b
            .state
            .candidate
            .lines
            .iter()
            .position(|l| l.jump.is_some())
            .unwrap();
        for _ in 0..at {
            keys(&mut b, &[Key::Char('j')]);
        }
        keys(&mut b, &[Key::Enter]);
        assert_eq!(b.state.view, View::Detail);
        let step = b.state.detail.selected_step().unwrap();
        assert_eq!(step.trace_id, diff.occurrence.trace_id);
        assert_eq!(step.step_index, diff.occurrence.step_indices[diff.step]);
        assert_eq!(step.tool_name, diff.tool_name);
        keys(&mut b, &[Key::Esc]);
        assert_eq!(b.state.view, View::Candidate);
        assert_eq!(b.state.candidate.id.as_deref(), Some(id.as_str()));
        keys(&mut b, &[Key::Char('r')]);
        assert_eq!(b.state.candidate.raw_lines[0], "{");
        keys(&mut b, &[Key::Esc]);
        assert_eq!(b.state.view, View::Candidates);
    }
}

#[test]
fn ascii_mode_draws_only_ascii() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = open(dir.path(), (100, 30));
    let theme = Theme {
        ascii: true,
        color: true,
    };
    let mut frames = vec![frame_text(&b, theme)];
    keys(
        &mut b,
        &[
            Key::Char('m'),
            Key::Char('j'),
            Key::Char('m'),
            Key::Enter,
            Key::Char('l'),
        ],
    );
    frames.push(frame_text(&b, theme));
    keys(&mut b, &[Key::Char('c')]);
    frames.push(frame_text(&b, theme));
    for _ in 0..3 {
        keys(&mut b, &[Key::Tab]);
        frames.push(frame_text(&b, theme));
    }
    keys(&mut b, &[Key::Char('?')]);
    frames.push(frame_text(&b, theme));
    // The mined results: the candidates table and a candidate with its verdict.
    let mined_dir = tempfile::tempdir().unwrap();
    let (store, _) = mined_store(mined_dir.path());
    let mut m = Browser::new(store, "mined.db", (100, 30)).unwrap();
    assert!(m.settle(WAIT));
    keys(&mut m, &[Key::Tab, Key::Tab, Key::Tab]);
    frames.push(frame_text(&m, theme));
    keys(&mut m, &[Key::Tab]);
    open_verdict_candidate(&mut m);
    frames.push(frame_text(&m, theme));
    for frame in &frames {
        let odd: Vec<char> = frame.chars().filter(|c| !c.is_ascii()).collect();
        assert!(odd.is_empty(), "non-ASCII {odd:?} in\n{frame}");
    }
    insta::assert_snapshot!("traces_ascii_100x30", frames[0]);
    insta::assert_snapshot!("detail_ascii_100x30", frames[1]);
}

#[test]
fn hostile_payloads_render_escaped_and_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.db");
    let mut store = SqliteStore::open(&path).unwrap();
    write_hostile_trace(&mut store);
    let mut b = Browser::new(Box::new(store), "hostile.db", (120, 40)).unwrap();
    assert!(b.settle(WAIT));
    let check = |b: &Browser, what: &str| -> String {
        let terminal = draw(b, Theme::default());
        let buffer = terminal.backend().buffer();
        let mut text = String::new();
        for cell in buffer.content.iter() {
            let symbol = cell.symbol();
            assert!(
                !symbol.chars().any(needs_escape),
                "{what}: control character {symbol:?} reached the frame"
            );
            text.push_str(symbol);
        }
        text
    };
    let traces = check(&b, "traces");
    assert!(traces.contains("trace-\\u{1b}[2Jevil"), "{traces}");
    assert!(traces.contains("hostile\\r\\0"), "{traces}");

    keys(&mut b, &[Key::Enter]);
    assert_eq!(b.state.view, View::Detail);
    let detail = check(&b, "detail");
    assert!(detail.contains("tool\\u{1b}]52;c;aGk=\\u{7}"), "{detail}");
    // The prepared payload lines: escaped, and the megabyte lines cut with a count.
    let lines: Vec<&str> = b
        .state
        .detail
        .lines
        .iter()
        .map(|l| l.text.as_str())
        .collect();
    let cmd = lines.iter().find(|l| l.starts_with("cmd:")).unwrap();
    assert_eq!(*cmd, "cmd: \"\\u{1b}[31mred\\u{1b}[0m\\0nul\\rcr\"");
    let long = lines.iter().find(|l| l.starts_with("long:")).unwrap();
    assert!(
        long.len() < 3_000,
        "cut to a bounded length: {}",
        long.len()
    );
    assert!(
        long.ends_with(&format!("... (+{} chars)\"", (1 << 20) - 2_000)),
        "{long}"
    );
    let raw = lines.iter().find(|l| l.starts_with("raw:")).unwrap();
    assert!(raw.contains("(+") && !raw.contains("\u{1b}"), "{raw}");
    assert!(
        detail.contains("boom\\u{1b}[2J"),
        "the error is shown escaped"
    );

    // The raw JSON view is bounded too.
    keys(&mut b, &[Key::Char('l'), Key::Char('r')]);
    check(&b, "raw");
    assert!(b.state.detail.raw_lines.iter().all(|l| l.len() < 3_000));
    assert!(
        b.state
            .detail
            .raw_lines
            .iter()
            .any(|l| l.contains("\\u001b[?1049l") || l.contains("(+"))
    );
}

/// A SQLite store whose trace listings wait until the test opens the gate.
struct GatedStore {
    inner: SqliteStore,
    gate: Arc<Mutex<()>>,
}

impl TraceStore for GatedStore {
    fn append(&mut self, t: &[ObservedTrace], s: &[ObservedStep]) -> StoreResult<AppendStats> {
        self.inner.append(t, s)
    }
    fn list_traces(&self, f: &TraceFilter, p: &PageRequest) -> StoreResult<TracePage> {
        let _open = self.gate.lock().unwrap();
        self.inner.list_traces(f, p)
    }
    fn get_trace(&self, id: &str) -> StoreResult<Option<TraceWithSteps>> {
        self.inner.get_trace(id)
    }
    fn for_each_trace(
        &self,
        visit: &mut dyn FnMut(TraceWithSteps) -> StoreResult<()>,
    ) -> StoreResult<()> {
        self.inner.for_each_trace(visit)
    }
    fn step_columns(&self, f: &TraceFilter) -> StoreResult<StepColumns> {
        self.inner.step_columns(f)
    }
    fn counts(&self) -> StoreResult<StoreCounts> {
        self.inner.counts()
    }
    fn put_document(&mut self, k: &str, key: &str, d: &Value) -> StoreResult<()> {
        self.inner.put_document(k, key, d)
    }
    fn get_document(&self, k: &str, key: &str) -> StoreResult<Option<Value>> {
        self.inner.get_document(k, key)
    }
    fn list_documents(&self, k: &str) -> StoreResult<Vec<(String, Value)>> {
        self.inner.list_documents(k)
    }
    fn delete_document(&mut self, k: &str, key: &str) -> StoreResult<bool> {
        self.inner.delete_document(k, key)
    }
}

#[test]
fn keys_work_while_a_store_query_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gated.db");
    let mut inner = SqliteStore::open(&path).unwrap();
    write_fixture(&mut inner);
    let gate = Arc::new(Mutex::new(()));
    let closed = gate.lock().unwrap();
    let store = GatedStore {
        inner,
        gate: Arc::clone(&gate),
    };
    let mut b = Browser::new(Box::new(store), "gated.db", (80, 24)).unwrap();
    // The first page is stuck in the store. Keys still act, and frames still draw.
    assert!(
        b.pump(Duration::from_millis(200)).is_none(),
        "the query is blocked"
    );
    b.key(Key::Char('?'));
    assert_eq!(b.state.mode, Mode::Help);
    b.key(Key::Esc);
    b.key(Key::Tab);
    assert_eq!(b.state.view, View::Tools);
    b.key(Key::Char('/'));
    typed(&mut b, "error");
    b.key(Key::Enter);
    assert_eq!(b.state.view, View::Tools);
    assert_eq!(b.state.filter.has_error, Some(true));
    let frame = frame_text(&b, Theme::default());
    assert!(frame.contains("[loading]"), "{frame}");
    drop(closed);
    assert!(b.settle(WAIT));
    // Only the answer for the newest filter was applied.
    let (_, page) = b.state.traces.page.as_ref().unwrap();
    assert!(page.traces.iter().all(|t| t.error_count > 0), "{page:?}");
    assert!(!page.traces.is_empty());
}

#[test]
fn filter_jump_copy_and_empty_documents() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = open(dir.path(), (120, 40));
    let total = b.state.traces.total().unwrap();
    assert_eq!(total, 42);
    keys(&mut b, &[Key::Char('/')]);
    typed(&mut b, "source=recorder dur>1s");
    keys(&mut b, &[Key::Enter]);
    let (_, page) = b.state.traces.page.as_ref().unwrap();
    assert!(page.total > 0 && page.total < total);
    assert!(
        page.traces
            .iter()
            .all(|t| t.trace.source == "recorder" && t.duration_ms.unwrap() >= 1_000.0)
    );
    keys(&mut b, &[Key::Char('x')]);
    assert_eq!(b.state.traces.total(), Some(42));

    keys(&mut b, &[Key::Char(':')]);
    typed(&mut b, "trace trace-007");
    keys(&mut b, &[Key::Enter, Key::Char('l')]);
    assert_eq!(b.state.detail.focus, Focus::Payload);
    let effects = keys(&mut b, &[Key::Char('y')]);
    let [Effect::Copy { json, .. }] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    let copied: Value = serde_json::from_str(json).unwrap();
    assert_eq!(copied["user_id"], "user_7");

    keys(&mut b, &[Key::Char(':')]);
    typed(&mut b, "trace nope");
    keys(&mut b, &[Key::Enter]);
    assert_eq!(b.state.status.as_ref().unwrap().kind, StatusKind::Error);

    // A store without documents says which command makes them.
    let empty_dir = tempfile::tempdir().unwrap();
    let empty = SqliteStore::open(&empty_dir.path().join("empty.db")).unwrap();
    let mut e = Browser::new(Box::new(empty), "empty.db", (120, 40)).unwrap();
    assert!(e.settle(WAIT));
    assert!(frame_text(&e, Theme::default()).contains("No traces in this store yet"));
    keys(&mut e, &[Key::Tab, Key::Tab]);
    assert!(frame_text(&e, Theme::default()).contains("chainweaver mine"));
    keys(&mut e, &[Key::Tab]);
    let frame = frame_text(&e, Theme::default());
    assert!(
        frame.contains("chainweaver mine") && frame.contains("chainweaver"),
        "{frame}"
    );
    assert!(e.state.candidates.items.as_ref().unwrap().is_empty());
    let _ = e.apply(Action::Command(Command::Quit));
}

#[test]
fn paging_reaches_the_last_trace_of_a_large_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.db");
    let mut store = SqliteStore::open(&path).unwrap();
    let traces: Vec<ObservedTrace> = (0..1_000)
        .map(|i| ObservedTrace::new(format!("t{i:04}"), "bulk"))
        .collect();
    let steps: Vec<ObservedStep> = (0..1_000)
        .map(|i| ObservedStep::new(format!("t{i:04}"), 0, "ping", serde_json::json!({})))
        .collect();
    store.append(&traces, &steps).unwrap();
    let mut b = Browser::new(Box::new(store), "large.db", (80, 24)).unwrap();
    assert!(b.settle(WAIT));
    let (offset, page) = b.state.traces.page.as_ref().unwrap();
    assert_eq!((*offset, page.traces.len(), page.total), (0, 200, 1_000));
    keys(&mut b, &[Key::Char('G')]);
    assert_eq!(b.state.traces.cursor, 999);
    assert_eq!(b.state.traces.row(999).unwrap().trace.trace_id, "t0999");
    for _ in 0..300 {
        keys(&mut b, &[Key::Char('k')]);
    }
    assert_eq!(b.state.traces.row(699).unwrap().trace.trace_id, "t0699");
    let frame = frame_text(&b, Theme::default());
    assert!(
        frame.contains("t0699") && frame.contains("of 1,000"),
        "{frame}"
    );
}

#[test]
fn committed_keymap_help_matches_the_keymap() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("keymap.md");
    let generated = help_markdown();
    if std::env::var_os("CHAINWEAVER_UPDATE_KEYMAP").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "tui/keymap.md is out of date with the keymap; regenerate it with \
         CHAINWEAVER_UPDATE_KEYMAP=1 cargo test -p chainweaver-tui --test it keymap"
    );
}
