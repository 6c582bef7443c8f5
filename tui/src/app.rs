//! The browser's state machine: [`update`] takes the state and one [`Action`] and returns the
//! [`Effect`]s the shell must carry out (store queries, a copy, quitting). It does no I/O, so
//! every behaviour is testable by feeding actions and looking at the state.

use std::cell::Cell;
use std::collections::HashMap;

use chainweaver_recorder::model::candidate::{Candidate, PatternSummary, Verdict};
use chainweaver_recorder::model::{ObservedStep, TraceWithSteps};
use chainweaver_recorder::stats::ToolStats;
use chainweaver_recorder::store::{PageRequest, TraceFilter, TracePage, TraceSort};
use serde_json::{Map, Value, json};

use crate::json_tree::{Folding, TreeLine, raw_lines, tree_lines};
use crate::keymap::{Command, Context, Key, lookup};
use crate::query::{format_query, parse_query};
use crate::review::{SummaryLine, TraceJump, candidate_summary};
use crate::worker::{Query, Reply, Request, Response, Slot};

/// Trace summaries fetched per page.
pub const PAGE_ROWS: u64 = 200;
/// Most raw JSON lines prepared for one payload.
pub const MAX_RAW_LINES: usize = 20_000;
/// Lines one mouse-wheel notch moves.
pub const WHEEL_LINES: usize = 3;

/// A screen of the browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    Traces,
    Detail,
    Compare,
    Tools,
    Patterns,
    Candidates,
    /// One candidate: its bindings, verdict and replay differences.
    Candidate,
}

/// The views Tab cycles through; Detail and Compare belong to the Traces tab.
pub const TABS: [View; 4] = [View::Traces, View::Tools, View::Patterns, View::Candidates];

impl View {
    /// The tab the view belongs to.
    pub fn tab(self) -> View {
        match self {
            View::Detail | View::Compare => View::Traces,
            View::Candidate => View::Candidates,
            other => other,
        }
    }

    /// The keymap context of the view.
    pub fn context(self) -> Context {
        match self {
            View::Traces => Context::Traces,
            View::Detail => Context::Detail,
            View::Compare => Context::Compare,
            View::Tools => Context::Tools,
            View::Patterns => Context::Patterns,
            View::Candidates => Context::Candidates,
            View::Candidate => Context::Candidate,
        }
    }

    /// The tab's title.
    pub fn title(self) -> &'static str {
        match self {
            View::Traces | View::Detail | View::Compare => "Traces",
            View::Tools => "Tools",
            View::Patterns => "Patterns",
            View::Candidates | View::Candidate => "Candidates",
        }
    }
}

/// What keys currently edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Editing the filter line (`/`).
    Filter,
    /// Editing the jump line (`:`).
    Jump,
    /// The help overlay is open.
    Help,
}

/// Whether the status line reports or warns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusKind {
    Info,
    Error,
}

/// The one-line message under the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub text: String,
    pub kind: StatusKind,
}

/// Something that happened: a command from a key, typed text, an answer from the store.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Command(Command),
    /// A character typed into the filter or jump line.
    Type(char),
    /// Mouse wheel: negative up, positive down, in notches.
    Scroll(i32),
    /// The terminal's new size in columns and rows.
    Resize(u16, u16),
    /// An answer from the store worker.
    Loaded(Response),
    /// A message from the shell (for instance where a copy went).
    Notice {
        text: String,
        error: bool,
    },
}

/// What the shell must do after an update.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Query(Request),
    /// Put `json` on the clipboard; `label` says what it is.
    Copy {
        label: String,
        json: String,
    },
    Quit,
}

/// Which pane of the trace detail has the keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Steps,
    Payload,
}

/// The Traces table.
#[derive(Debug, Default)]
pub struct TracesState {
    pub sort: TraceSort,
    pub descending: bool,
    /// Absolute row of the selection among all matching traces.
    pub cursor: u64,
    /// The loaded page and the absolute row of its first trace.
    pub page: Option<(u64, TracePage)>,
    /// The offset of the page being fetched.
    pub requested_offset: Option<u64>,
    /// First absolute row drawn last time (kept by the view so scrolling is smooth).
    pub scroll: Cell<u64>,
}

impl TracesState {
    /// Traces matching the filter, once a page told.
    pub fn total(&self) -> Option<u64> {
        self.page.as_ref().map(|(_, p)| p.total)
    }

    /// The summary at absolute row `row`, if it is loaded.
    pub fn row(&self, row: u64) -> Option<&chainweaver_recorder::store::TraceSummary> {
        let (offset, page) = self.page.as_ref()?;
        let index = row.checked_sub(*offset)?;
        page.traces.get(usize::try_from(index).ok()?)
    }
}

/// One trace's steps and the selected step's payload.
#[derive(Debug)]
pub struct DetailState {
    pub trace_id: Option<String>,
    pub trace: Option<TraceWithSteps>,
    pub step: usize,
    pub focus: Focus,
    pub raw: bool,
    pub folding: Folding,
    /// The selected step's inputs, outputs, error and metadata as one JSON object.
    pub payload: Value,
    pub lines: Vec<TreeLine>,
    pub raw_lines: Vec<String>,
    pub line: usize,
    /// The view to return to on Esc.
    pub back_to: View,
    /// The `step_index` to select once the trace is loaded (a replay difference's step).
    pub want_step: Option<u32>,
    pub step_scroll: Cell<usize>,
    pub payload_scroll: Cell<usize>,
}

impl Default for DetailState {
    fn default() -> Self {
        Self {
            trace_id: None,
            trace: None,
            step: 0,
            focus: Focus::Steps,
            raw: false,
            folding: Folding::default(),
            payload: Value::Null,
            lines: Vec::new(),
            raw_lines: Vec::new(),
            line: 0,
            back_to: View::Traces,
            want_step: None,
            step_scroll: Cell::new(0),
            payload_scroll: Cell::new(0),
        }
    }
}

impl DetailState {
    /// The trace shown, when it is loaded and is the one asked for.
    pub fn loaded(&self) -> Option<&TraceWithSteps> {
        self.trace
            .as_ref()
            .filter(|t| Some(&t.trace.trace_id) == self.trace_id.as_ref())
    }

    /// The selected step.
    pub fn selected_step(&self) -> Option<&ObservedStep> {
        self.loaded().and_then(|t| t.steps.get(self.step))
    }

    fn payload_len(&self) -> usize {
        if self.raw {
            self.raw_lines.len()
        } else {
            self.lines.len()
        }
    }

    fn rebuild_lines(&mut self) {
        self.lines = tree_lines(&self.payload, &self.folding);
        if self.raw {
            self.raw_lines = raw_lines(&self.payload, MAX_RAW_LINES);
        }
        self.line = self.line.min(self.payload_len().saturating_sub(1));
    }

    fn select_step(&mut self, step: usize) {
        self.step = step;
        self.payload = self
            .selected_step()
            .map(step_payload)
            .unwrap_or(Value::Null);
        self.folding = Folding::default();
        self.line = 0;
        self.payload_scroll.set(0);
        self.raw_lines.clear();
        self.rebuild_lines();
    }
}

/// The selected step as the payload pane shows it.
pub fn step_payload(step: &ObservedStep) -> Value {
    let mut map = Map::new();
    map.insert("inputs".into(), step.inputs.clone());
    if let Some(outputs) = &step.outputs {
        map.insert("outputs".into(), outputs.clone());
    }
    if step.is_error() {
        map.insert(
            "error".into(),
            json!({"type": step.error_type, "message": step.error_message}),
        );
    }
    if !step.metadata.is_empty() {
        map.insert("metadata".into(), Value::Object(step.metadata.clone()));
    }
    Value::Object(map)
}

/// Two marked traces side by side.
#[derive(Debug, Default)]
pub struct CompareState {
    pub ids: Option<(String, String)>,
    pub left: Option<TraceWithSteps>,
    pub right: Option<TraceWithSteps>,
    pub cursor: usize,
    pub scroll: Cell<usize>,
    pub back_to: Option<View>,
}

/// Per-tool statistics.
#[derive(Debug, Default)]
pub struct ToolsState {
    pub stats: Option<Vec<ToolStats>>,
    /// The filter the statistics were computed for.
    pub filter: Option<TraceFilter>,
    pub cursor: usize,
    pub scroll: Cell<usize>,
}

/// The patterns or the candidates of the store, as loaded.
#[derive(Debug)]
pub struct ListState<T> {
    pub items: Option<Vec<T>>,
    pub cursor: usize,
    pub raw: bool,
    pub scroll: Cell<usize>,
}

impl<T> Default for ListState<T> {
    fn default() -> Self {
        Self {
            items: None,
            cursor: 0,
            raw: false,
            scroll: Cell::new(0),
        }
    }
}

impl<T> ListState<T> {
    /// The selected item.
    pub fn selected(&self) -> Option<&T> {
        self.items.as_ref()?.get(self.cursor)
    }
}

/// One candidate opened from the Candidates table.
#[derive(Debug, Default)]
pub struct CandidateState {
    /// The candidate's id.
    pub id: Option<String>,
    /// Its summary, verdict and differences, as the view draws them.
    pub lines: Vec<SummaryLine>,
    pub raw: bool,
    /// The candidate as raw JSON.
    pub raw_lines: Vec<String>,
    /// The line under the cursor (of `raw_lines` in raw mode).
    pub line: usize,
    pub scroll: Cell<usize>,
}

impl CandidateState {
    fn len(&self) -> usize {
        if self.raw {
            self.raw_lines.len()
        } else {
            self.lines.len()
        }
    }
}

/// Everything the browser shows.
#[derive(Debug)]
pub struct AppState {
    pub view: View,
    pub mode: Mode,
    /// The filter or jump line being edited.
    pub input: String,
    pub status: Option<Status>,
    pub help_scroll: usize,
    /// Terminal size (columns, rows).
    pub size: (u16, u16),
    /// Where the store is, as the title shows it.
    pub store_label: String,
    pub filter: TraceFilter,
    pub traces: TracesState,
    pub detail: DetailState,
    /// Marked trace ids, at most two, oldest first.
    pub marks: Vec<String>,
    pub compare: CompareState,
    pub tools: ToolsState,
    pub patterns: ListState<PatternSummary>,
    pub candidates: ListState<Candidate>,
    pub verdicts: Option<Vec<Verdict>>,
    pub candidate: CandidateState,
    pending: HashMap<Slot, u64>,
    next_generation: u64,
}

impl AppState {
    /// A fresh state for a terminal of `size`; call [`start`] for the first queries.
    pub fn new(store_label: impl Into<String>, size: (u16, u16)) -> Self {
        Self {
            view: View::Traces,
            mode: Mode::Normal,
            input: String::new(),
            status: None,
            help_scroll: 0,
            size,
            store_label: store_label.into(),
            filter: TraceFilter::default(),
            traces: TracesState::default(),
            detail: DetailState::default(),
            marks: Vec::new(),
            compare: CompareState::default(),
            tools: ToolsState::default(),
            patterns: ListState::default(),
            candidates: ListState::default(),
            verdicts: None,
            candidate: CandidateState::default(),
            pending: HashMap::new(),
            next_generation: 1,
        }
    }

    /// The stored verdict of a candidate, once verdicts are loaded.
    pub fn verdict_of(&self, candidate_id: &str) -> Option<&Verdict> {
        self.verdicts
            .as_ref()?
            .iter()
            .find(|v| v.candidate_id == candidate_id)
    }

    /// True while an answer for `slot` is awaited.
    pub fn is_loading(&self, slot: Slot) -> bool {
        self.pending.contains_key(&slot)
    }

    /// The generation awaited for `slot`.
    pub fn awaited(&self, slot: Slot) -> Option<u64> {
        self.pending.get(&slot).copied()
    }

    /// The keymap context keys are looked up in.
    pub fn context(&self) -> Context {
        match self.mode {
            Mode::Filter | Mode::Jump => Context::Input,
            _ => self.view.context(),
        }
    }

    /// The filter as query text.
    pub fn filter_text(&self) -> String {
        format_query(&self.filter)
    }

    /// Rows of a list that fit on screen (for paging and prefetching).
    pub fn visible_rows(&self) -> usize {
        usize::from(self.size.1.saturating_sub(8)).max(1)
    }

    fn query(&mut self, slot: Slot, query: Query) -> Effect {
        let generation = self.next_generation;
        self.next_generation += 1;
        self.pending.insert(slot, generation);
        Effect::Query(Request {
            slot,
            generation,
            query,
        })
    }

    fn info(&mut self, text: impl Into<String>) {
        self.status = Some(Status {
            text: text.into(),
            kind: StatusKind::Info,
        });
    }

    fn error(&mut self, text: impl Into<String>) {
        self.status = Some(Status {
            text: text.into(),
            kind: StatusKind::Error,
        });
    }
}

/// The action a key stands for in the current mode, if any.
pub fn action_for_key(state: &AppState, key: Key) -> Option<Action> {
    if state.mode == Mode::Help {
        return match key {
            Key::Char('?') | Key::Char('q') | Key::Esc => Some(Action::Command(Command::Help)),
            Key::Ctrl('c') => Some(Action::Command(Command::Quit)),
            other => lookup(Context::Global, other).map(Action::Command),
        };
    }
    if let Some(command) = lookup(state.context(), key) {
        return Some(Action::Command(command));
    }
    match (state.context(), key) {
        (Context::Input, Key::Char(c)) => Some(Action::Type(c)),
        _ => None,
    }
}

/// The first queries: the first page of traces.
pub fn start(state: &mut AppState) -> Vec<Effect> {
    reload_traces(state)
}

/// Apply one action; return what the shell must do.
pub fn update(state: &mut AppState, action: Action) -> Vec<Effect> {
    match action {
        Action::Command(command) => command_update(state, command),
        Action::Type(c) => {
            if matches!(state.mode, Mode::Filter | Mode::Jump) && !c.is_control() {
                state.input.push(c);
            }
            Vec::new()
        }
        Action::Scroll(notches) => {
            let command = if notches < 0 {
                Command::Up
            } else {
                Command::Down
            };
            let times = notches.unsigned_abs() as usize * WHEEL_LINES;
            let mut effects = Vec::new();
            for _ in 0..times {
                effects.extend(move_update(state, command));
            }
            effects
        }
        Action::Resize(columns, rows) => {
            state.size = (columns, rows);
            ensure_trace_page(state)
        }
        Action::Loaded(response) => loaded(state, response),
        Action::Notice { text, error } => {
            if error {
                state.error(text);
            } else {
                state.info(text);
            }
            Vec::new()
        }
    }
}

fn command_update(state: &mut AppState, command: Command) -> Vec<Effect> {
    match state.mode {
        Mode::Filter | Mode::Jump => return input_update(state, command),
        Mode::Help => {
            match command {
                Command::Help | Command::Back => state.mode = Mode::Normal,
                Command::Quit => return vec![Effect::Quit],
                Command::Up => state.help_scroll = state.help_scroll.saturating_sub(1),
                Command::Down => state.help_scroll += 1,
                Command::PageUp => {
                    state.help_scroll = state.help_scroll.saturating_sub(state.visible_rows())
                }
                Command::PageDown => state.help_scroll += state.visible_rows(),
                Command::Top => state.help_scroll = 0,
                _ => {}
            }
            return Vec::new();
        }
        Mode::Normal => {}
    }
    match command {
        Command::Quit => vec![Effect::Quit],
        Command::Help => {
            state.mode = Mode::Help;
            state.help_scroll = 0;
            Vec::new()
        }
        Command::Filter => {
            state.mode = Mode::Filter;
            state.input = state.filter_text();
            Vec::new()
        }
        Command::Jump => {
            state.mode = Mode::Jump;
            state.input.clear();
            Vec::new()
        }
        Command::ClearFilter => {
            if state.filter == TraceFilter::default() {
                return Vec::new();
            }
            state.info("filter cleared");
            apply_filter(state, TraceFilter::default())
        }
        Command::NextView | Command::PrevView => {
            let current = TABS
                .iter()
                .position(|v| *v == state.view.tab())
                .unwrap_or(0);
            let next = if command == Command::NextView {
                (current + 1) % TABS.len()
            } else {
                (current + TABS.len() - 1) % TABS.len()
            };
            state.status = None;
            show_view(state, TABS[next])
        }
        Command::Back => {
            match state.view {
                View::Detail => state.view = state.detail.back_to,
                View::Compare => state.view = state.compare.back_to.unwrap_or(View::Traces),
                View::Candidate => state.view = View::Candidates,
                _ => state.status = None,
            }
            Vec::new()
        }
        Command::Refresh => refresh(state),
        Command::Copy => copy(state),
        Command::Mark => mark(state),
        Command::Compare => compare(state),
        Command::SortNext | Command::SortReverse => {
            if command == Command::SortNext {
                state.traces.sort = next_sort(state.traces.sort);
                // Numbers and times read best largest first.
                state.traces.descending =
                    !matches!(state.traces.sort, TraceSort::Stored | TraceSort::TraceId);
            } else {
                state.traces.descending = !state.traces.descending;
            }
            reload_traces(state)
        }
        Command::Open => open(state),
        Command::FocusPayload => {
            if state.view == View::Detail && state.detail.loaded().is_some() {
                state.detail.focus = Focus::Payload;
            }
            Vec::new()
        }
        Command::FocusSteps => {
            state.detail.focus = Focus::Steps;
            Vec::new()
        }
        Command::ToggleFold => {
            toggle_fold(state);
            Vec::new()
        }
        Command::ToggleRaw => {
            match state.view {
                View::Detail => {
                    state.detail.raw = !state.detail.raw;
                    state.detail.line = 0;
                    state.detail.payload_scroll.set(0);
                    state.detail.rebuild_lines();
                }
                View::Patterns => state.patterns.raw = !state.patterns.raw,
                View::Candidate => {
                    let candidate = &mut state.candidate;
                    candidate.raw = !candidate.raw;
                    candidate.line = 0;
                    candidate.scroll.set(0);
                }
                _ => {}
            }
            Vec::new()
        }
        Command::ExpandAll | Command::CollapseAll => {
            let detail = &mut state.detail;
            detail.folding.toggled.clear();
            detail.folding.all = Some(command == Command::CollapseAll);
            detail.rebuild_lines();
            Vec::new()
        }
        Command::Up
        | Command::Down
        | Command::PageUp
        | Command::PageDown
        | Command::Top
        | Command::Bottom => move_update(state, command),
        Command::Submit | Command::Cancel | Command::DeleteChar | Command::ClearLine => Vec::new(),
    }
}

fn input_update(state: &mut AppState, command: Command) -> Vec<Effect> {
    match command {
        Command::Quit => vec![Effect::Quit],
        Command::Cancel | Command::Back => {
            state.mode = Mode::Normal;
            state.input.clear();
            Vec::new()
        }
        Command::DeleteChar => {
            state.input.pop();
            Vec::new()
        }
        Command::ClearLine => {
            state.input.clear();
            Vec::new()
        }
        Command::Submit | Command::Open => {
            let text = std::mem::take(&mut state.input);
            if state.mode == Mode::Filter {
                match parse_query(&text) {
                    Ok(filter) => {
                        state.mode = Mode::Normal;
                        let shown = format_query(&filter);
                        if shown.is_empty() {
                            state.info("filter cleared");
                        } else {
                            state.info(format!("filter: {shown}"));
                        }
                        apply_filter(state, filter)
                    }
                    Err(err) => {
                        // Keep the line so the reader can fix it.
                        state.input = text;
                        state.error(format!("bad filter: {err}"));
                        Vec::new()
                    }
                }
            } else {
                state.mode = Mode::Normal;
                jump(state, text.trim())
            }
        }
        _ => Vec::new(),
    }
}

fn apply_filter(state: &mut AppState, filter: TraceFilter) -> Vec<Effect> {
    state.filter = filter;
    let mut effects = reload_traces(state);
    state.tools.stats = None;
    state.tools.filter = None;
    if state.view == View::Tools {
        effects.extend(load_tools(state));
    } else {
        state.view = View::Traces;
    }
    effects
}

fn jump(state: &mut AppState, text: &str) -> Vec<Effect> {
    let (word, rest) = match text.split_once(char::is_whitespace) {
        Some((w, r)) => (w, r.trim()),
        None => (text, ""),
    };
    match word {
        "" => Vec::new(),
        "trace" | "t" if !rest.is_empty() => open_trace(state, rest.to_string(), View::Traces),
        "traces" => show_view(state, View::Traces),
        "tools" => show_view(state, View::Tools),
        "patterns" => show_view(state, View::Patterns),
        "candidates" => show_view(state, View::Candidates),
        "q" | "quit" => vec![Effect::Quit],
        number if number.chars().all(|c| c.is_ascii_digit()) => {
            let row: u64 = number.parse().unwrap_or(1);
            state.view = View::Traces;
            let last = state.traces.total().unwrap_or(0).saturating_sub(1);
            state.traces.cursor = row.saturating_sub(1).min(last);
            ensure_trace_page(state)
        }
        _ => {
            state.error(format!(
                "unknown jump `:{}`; try :trace ID, :traces, :tools, :patterns, :candidates, :NUMBER or :q",
                crate::sanitize::escape_line(text, 80)
            ));
            Vec::new()
        }
    }
}

fn show_view(state: &mut AppState, view: View) -> Vec<Effect> {
    state.view = view;
    match view {
        View::Tools => load_tools(state),
        View::Patterns if state.patterns.items.is_none() && !state.is_loading(Slot::Patterns) => {
            vec![state.query(Slot::Patterns, Query::Patterns)]
        }
        View::Candidates | View::Candidate => {
            let mut effects = Vec::new();
            if state.candidates.items.is_none() && !state.is_loading(Slot::Candidates) {
                effects.push(state.query(Slot::Candidates, Query::Candidates));
            }
            if state.verdicts.is_none() && !state.is_loading(Slot::Verdicts) {
                effects.push(state.query(Slot::Verdicts, Query::Verdicts));
            }
            effects
        }
        View::Traces if state.traces.page.is_none() && !state.is_loading(Slot::Traces) => {
            reload_traces(state)
        }
        _ => Vec::new(),
    }
}

fn load_tools(state: &mut AppState) -> Vec<Effect> {
    let fresh = state.tools.filter.as_ref() == Some(&state.filter) && state.tools.stats.is_some();
    if fresh
        || (state.is_loading(Slot::Tools) && state.tools.filter.as_ref() == Some(&state.filter))
    {
        return Vec::new();
    }
    state.tools.filter = Some(state.filter.clone());
    let filter = state.filter.clone();
    vec![state.query(Slot::Tools, Query::ToolStats { filter })]
}

fn refresh(state: &mut AppState) -> Vec<Effect> {
    match state.view {
        View::Traces => reload_traces(state),
        View::Detail => match state.detail.trace_id.clone() {
            Some(id) => {
                let back = state.detail.back_to;
                open_trace(state, id, back)
            }
            None => Vec::new(),
        },
        View::Compare => compare(state),
        View::Tools => {
            state.tools.stats = None;
            state.tools.filter = None;
            load_tools(state)
        }
        View::Patterns => {
            state.patterns.items = None;
            show_view(state, View::Patterns)
        }
        View::Candidates | View::Candidate => {
            state.candidates.items = None;
            state.verdicts = None;
            show_view(state, state.view)
        }
    }
}

fn next_sort(sort: TraceSort) -> TraceSort {
    match sort {
        TraceSort::Stored => TraceSort::TraceId,
        TraceSort::TraceId => TraceSort::StartedAt,
        TraceSort::StartedAt => TraceSort::Steps,
        TraceSort::Steps => TraceSort::Errors,
        TraceSort::Errors => TraceSort::Duration,
        TraceSort::Duration => TraceSort::Stored,
    }
}

/// Forget the loaded page and fetch the first one for the current filter and sort.
fn reload_traces(state: &mut AppState) -> Vec<Effect> {
    state.traces.cursor = 0;
    state.traces.page = None;
    state.traces.scroll.set(0);
    request_trace_page(state, 0)
}

fn request_trace_page(state: &mut AppState, offset: u64) -> Vec<Effect> {
    state.traces.requested_offset = Some(offset);
    let page = PageRequest {
        offset,
        limit: PAGE_ROWS,
        sort: state.traces.sort,
        descending: state.traces.descending,
    };
    let filter = state.filter.clone();
    vec![state.query(Slot::Traces, Query::Traces { filter, page })]
}

/// Fetch another page when the selection comes near the edge of the loaded one.
fn ensure_trace_page(state: &mut AppState) -> Vec<Effect> {
    let cursor = state.traces.cursor;
    let margin = state.visible_rows() as u64;
    let Some((offset, page)) = state.traces.page.as_ref() else {
        return Vec::new();
    };
    let end = offset + page.traces.len() as u64;
    let near_top = *offset > 0 && cursor < offset + margin;
    let near_bottom = end < page.total && cursor + margin >= end;
    if !(near_top || near_bottom) {
        return Vec::new();
    }
    let wanted = cursor.saturating_sub(PAGE_ROWS / 2);
    // Skip when the page on its way already covers the selection comfortably.
    if state.is_loading(Slot::Traces)
        && let Some(asked) = state.traces.requested_offset
        && cursor >= asked + margin.min(asked)
        && cursor + margin < asked + PAGE_ROWS
    {
        return Vec::new();
    }
    request_trace_page(state, wanted)
}

fn open_trace(state: &mut AppState, trace_id: String, back_to: View) -> Vec<Effect> {
    open_trace_at(state, trace_id, back_to, None)
}

/// Show a trace, selecting the step with `step_index` once it is loaded.
fn open_trace_at(
    state: &mut AppState,
    trace_id: String,
    back_to: View,
    step_index: Option<u32>,
) -> Vec<Effect> {
    state.view = View::Detail;
    state.detail = DetailState {
        trace_id: Some(trace_id.clone()),
        back_to,
        want_step: step_index,
        ..DetailState::default()
    };
    vec![state.query(Slot::Detail, Query::Trace { trace_id })]
}

/// Open the selected candidate.
fn open_candidate(state: &mut AppState) -> Vec<Effect> {
    let Some(id) = state.candidates.selected().map(|c| c.id.clone()) else {
        return Vec::new();
    };
    state.candidate = CandidateState {
        id: Some(id),
        ..CandidateState::default()
    };
    rebuild_candidate(state);
    state.view = View::Candidate;
    Vec::new()
}

/// Prepare the open candidate's lines from the loaded candidates and verdicts (again when
/// either arrives).
fn rebuild_candidate(state: &mut AppState) {
    let Some(id) = state.candidate.id.clone() else {
        return;
    };
    let candidate = state
        .candidates
        .items
        .as_ref()
        .and_then(|items| items.iter().find(|c| c.id == id));
    let Some(candidate) = candidate else {
        state.candidate.lines.clear();
        state.candidate.raw_lines.clear();
        return;
    };
    let lines = candidate_summary(candidate, state.verdict_of(&id));
    let raw = serde_json::to_value(candidate)
        .map(|value| raw_lines(&value, MAX_RAW_LINES))
        .unwrap_or_default();
    let view = &mut state.candidate;
    view.lines = lines;
    view.raw_lines = raw;
    view.line = view.line.min(view.len().saturating_sub(1));
}

/// Enter on a candidate's line: a replay difference opens its trace at the differing step.
fn open_diff(state: &mut AppState) -> Vec<Effect> {
    let view = &state.candidate;
    let jump: Option<TraceJump> = if view.raw {
        None
    } else {
        view.lines.get(view.line).and_then(|l| l.jump.clone())
    };
    match jump {
        Some(TraceJump {
            trace_id,
            step_index,
        }) => open_trace_at(state, trace_id, View::Candidate, step_index),
        None => {
            state.error("move to a replay difference (j/k) to open its trace");
            Vec::new()
        }
    }
}

fn open(state: &mut AppState) -> Vec<Effect> {
    match state.view {
        View::Traces => {
            let row = state.traces.row(state.traces.cursor);
            match row.map(|r| r.trace.trace_id.clone()) {
                Some(id) => open_trace(state, id, View::Traces),
                None => Vec::new(),
            }
        }
        View::Detail => {
            match state.detail.focus {
                Focus::Steps if state.detail.loaded().is_some() => {
                    state.detail.focus = Focus::Payload
                }
                Focus::Payload => toggle_fold(state),
                _ => {}
            }
            Vec::new()
        }
        View::Tools => {
            let tool = state
                .tools
                .stats
                .as_ref()
                .and_then(|s| s.get(state.tools.cursor))
                .map(|s| s.tool_name.clone());
            match tool {
                Some(tool) => {
                    let mut filter = state.filter.clone();
                    filter.tool = Some(tool);
                    filter.tool_contains = None;
                    state.view = View::Traces;
                    state.info(format!("filter: {}", format_query(&filter)));
                    apply_filter(state, filter)
                }
                None => Vec::new(),
            }
        }
        View::Candidates => open_candidate(state),
        View::Candidate => open_diff(state),
        View::Patterns | View::Compare => Vec::new(),
    }
}

fn toggle_fold(state: &mut AppState) {
    let detail = &mut state.detail;
    if state.view != View::Detail || detail.focus != Focus::Payload || detail.raw {
        return;
    }
    let Some(line) = detail.lines.get(detail.line) else {
        return;
    };
    if line.fold.is_some() {
        let pointer = line.pointer.clone();
        detail.folding.toggle(&pointer);
        detail.rebuild_lines();
    }
}

fn mark(state: &mut AppState) -> Vec<Effect> {
    if state.view == View::Compare {
        state.marks.clear();
        state.info("marks cleared");
        return Vec::new();
    }
    let id = match state.view {
        View::Traces => state
            .traces
            .row(state.traces.cursor)
            .map(|r| r.trace.trace_id.clone()),
        View::Detail => state.detail.loaded().map(|t| t.trace.trace_id.clone()),
        _ => None,
    };
    let Some(id) = id else {
        return Vec::new();
    };
    let shown = crate::sanitize::escape_line(&id, 60);
    if let Some(at) = state.marks.iter().position(|m| *m == id) {
        state.marks.remove(at);
        state.info(format!("unmarked {shown}"));
        return Vec::new();
    }
    state.marks.push(id);
    if state.marks.len() > 2 {
        state.marks.remove(0);
    }
    if state.marks.len() == 2 {
        state.info(format!(
            "marked {shown}; two traces marked: c compares them"
        ));
    } else {
        state.info(format!(
            "marked {shown}; mark another trace with m, then c compares"
        ));
    }
    Vec::new()
}

fn compare(state: &mut AppState) -> Vec<Effect> {
    let [left, right] = match state.marks.as_slice() {
        [a, b] => [a.clone(), b.clone()],
        _ => {
            state.error("mark two traces with m first, then c compares them");
            return Vec::new();
        }
    };
    if state.view != View::Compare {
        state.compare.back_to = Some(state.view);
    }
    state.view = View::Compare;
    state.compare.ids = Some((left.clone(), right.clone()));
    state.compare.left = None;
    state.compare.right = None;
    state.compare.cursor = 0;
    state.compare.scroll.set(0);
    vec![
        state.query(Slot::CompareLeft, Query::Trace { trace_id: left }),
        state.query(Slot::CompareRight, Query::Trace { trace_id: right }),
    ]
}

fn copy(state: &mut AppState) -> Vec<Effect> {
    let selection: Option<(String, Value)> = match state.view {
        View::Traces => state.traces.row(state.traces.cursor).map(|row| {
            (
                format!("trace {}", row.trace.trace_id),
                serde_json::to_value(row).unwrap_or(Value::Null),
            )
        }),
        View::Detail => match state.detail.focus {
            Focus::Payload if !state.detail.raw => {
                let line = state.detail.lines.get(state.detail.line);
                line.and_then(|l| {
                    state
                        .detail
                        .payload
                        .pointer(&l.pointer)
                        .map(|v| (format!("value at {}", l.pointer), v.clone()))
                })
            }
            Focus::Payload => Some(("step payload".into(), state.detail.payload.clone())),
            Focus::Steps => state.detail.selected_step().map(|step| {
                (
                    format!("step {} of {}", step.step_index, step.trace_id),
                    serde_json::to_value(step).unwrap_or(Value::Null),
                )
            }),
        },
        View::Compare => match (&state.compare.left, &state.compare.right) {
            (Some(left), Some(right)) => Some((
                "both compared traces".into(),
                json!({"left": left, "right": right}),
            )),
            _ => None,
        },
        View::Tools => state
            .tools
            .stats
            .as_ref()
            .and_then(|s| s.get(state.tools.cursor))
            .map(|s| {
                (
                    format!("statistics of {}", s.tool_name),
                    serde_json::to_value(s).unwrap_or(Value::Null),
                )
            }),
        View::Patterns => state.patterns.selected().map(|p| {
            (
                format!("pattern {}", p.tools.join(" -> ")),
                serde_json::to_value(p).unwrap_or(Value::Null),
            )
        }),
        View::Candidates => state.candidates.selected().map(|c| {
            (
                format!("candidate {}", c.id),
                serde_json::to_value(c).unwrap_or(Value::Null),
            )
        }),
        View::Candidate => {
            let id = state.candidate.id.as_deref().unwrap_or_default();
            state
                .candidates
                .items
                .as_ref()
                .and_then(|items| items.iter().find(|c| c.id == id))
                .map(|c| {
                    (
                        format!("candidate {}", c.id),
                        serde_json::to_value(c).unwrap_or(Value::Null),
                    )
                })
        }
    };
    match selection {
        Some((label, value)) => {
            let json = serde_json::to_string_pretty(&value).unwrap_or_default();
            vec![Effect::Copy {
                label: crate::sanitize::escape_line(&label, 80),
                json,
            }]
        }
        None => {
            state.error("nothing selected to copy");
            Vec::new()
        }
    }
}

fn step_cursor(cursor: &mut usize, len: usize, command: Command, page: usize) {
    let last = len.saturating_sub(1);
    *cursor = match command {
        Command::Up => cursor.saturating_sub(1),
        Command::Down => (*cursor + 1).min(last),
        Command::PageUp => cursor.saturating_sub(page),
        Command::PageDown => (*cursor + page).min(last),
        Command::Top => 0,
        Command::Bottom => last,
        _ => *cursor,
    };
}

fn move_update(state: &mut AppState, command: Command) -> Vec<Effect> {
    let page = state.visible_rows();
    match state.view {
        View::Traces => {
            let total = state.traces.total().unwrap_or(0);
            let last = total.saturating_sub(1);
            let cursor = &mut state.traces.cursor;
            let page = page as u64;
            *cursor = match command {
                Command::Up => cursor.saturating_sub(1),
                Command::Down => (*cursor + 1).min(last),
                Command::PageUp => cursor.saturating_sub(page),
                Command::PageDown => (*cursor + page).min(last),
                Command::Top => 0,
                Command::Bottom => last,
                _ => *cursor,
            };
            ensure_trace_page(state)
        }
        View::Detail => {
            let detail = &mut state.detail;
            match detail.focus {
                Focus::Steps => {
                    let len = detail.loaded().map_or(0, |t| t.steps.len());
                    let mut step = detail.step;
                    step_cursor(&mut step, len, command, page);
                    if step != detail.step {
                        detail.select_step(step);
                    }
                }
                Focus::Payload => {
                    let len = detail.payload_len();
                    step_cursor(&mut detail.line, len, command, page);
                }
            }
            Vec::new()
        }
        View::Compare => {
            let len = state
                .compare
                .left
                .as_ref()
                .map_or(0, |t| t.steps.len())
                .max(state.compare.right.as_ref().map_or(0, |t| t.steps.len()));
            step_cursor(&mut state.compare.cursor, len, command, page);
            Vec::new()
        }
        View::Tools => {
            let len = state.tools.stats.as_ref().map_or(0, Vec::len);
            step_cursor(&mut state.tools.cursor, len, command, page);
            Vec::new()
        }
        View::Patterns => {
            let len = state.patterns.items.as_ref().map_or(0, Vec::len);
            step_cursor(&mut state.patterns.cursor, len, command, page);
            Vec::new()
        }
        View::Candidates => {
            let len = state.candidates.items.as_ref().map_or(0, Vec::len);
            step_cursor(&mut state.candidates.cursor, len, command, page);
            Vec::new()
        }
        View::Candidate => {
            let len = state.candidate.len();
            step_cursor(&mut state.candidate.line, len, command, page);
            Vec::new()
        }
    }
}

fn loaded(state: &mut AppState, response: Response) -> Vec<Effect> {
    if state.pending.get(&response.slot) != Some(&response.generation) {
        // A stale answer: a newer request for the same slot was sent since.
        return Vec::new();
    }
    state.pending.remove(&response.slot);
    let reply = match response.result {
        Ok(reply) => reply,
        Err(message) => {
            state.error(format!(
                "store: {}",
                crate::sanitize::escape_line(&message, 300)
            ));
            return Vec::new();
        }
    };
    match (response.slot, reply) {
        (Slot::Traces, Reply::Traces(page)) => {
            let offset = state.traces.requested_offset.unwrap_or(0);
            let total = page.total;
            state.traces.page = Some((offset, page));
            state.traces.cursor = state.traces.cursor.min(total.saturating_sub(1));
            ensure_trace_page(state)
        }
        (Slot::Detail, Reply::Trace(trace)) => {
            match trace {
                Some(trace) if Some(&trace.trace.trace_id) == state.detail.trace_id.as_ref() => {
                    let step = state
                        .detail
                        .want_step
                        .and_then(|want| trace.steps.iter().position(|s| s.step_index == want))
                        .unwrap_or(0);
                    state.detail.trace = Some(*trace);
                    state.detail.select_step(step);
                }
                _ => {
                    let id = state.detail.trace_id.clone().unwrap_or_default();
                    state.error(format!(
                        "no trace `{}` in the store",
                        crate::sanitize::escape_line(&id, 80)
                    ));
                    if state.view == View::Detail {
                        state.view = state.detail.back_to;
                    }
                }
            }
            Vec::new()
        }
        (slot @ (Slot::CompareLeft | Slot::CompareRight), Reply::Trace(trace)) => {
            match trace {
                Some(trace) => {
                    if slot == Slot::CompareLeft {
                        state.compare.left = Some(*trace);
                    } else {
                        state.compare.right = Some(*trace);
                    }
                }
                None => state.error("a marked trace is no longer in the store"),
            }
            Vec::new()
        }
        (Slot::Tools, Reply::ToolStats(stats)) => {
            state.tools.cursor = state.tools.cursor.min(stats.len().saturating_sub(1));
            state.tools.stats = Some(stats);
            Vec::new()
        }
        (Slot::Patterns, Reply::Patterns(items)) => {
            state.patterns.cursor = state.patterns.cursor.min(items.len().saturating_sub(1));
            state.patterns.items = Some(items);
            Vec::new()
        }
        (Slot::Candidates, Reply::Candidates(items)) => {
            state.candidates.cursor = state.candidates.cursor.min(items.len().saturating_sub(1));
            state.candidates.items = Some(items);
            rebuild_candidate(state);
            Vec::new()
        }
        (Slot::Verdicts, Reply::Verdicts(items)) => {
            state.verdicts = Some(items);
            rebuild_candidate(state);
            Vec::new()
        }
        (slot, _) => {
            state.error(format!("internal: unexpected answer for {slot:?}"));
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chainweaver_recorder::model::ObservedTrace;
    use chainweaver_recorder::store::TraceSummary;

    fn summary(id: &str, steps: u64) -> TraceSummary {
        TraceSummary {
            trace: ObservedTrace::new(id, "test"),
            step_count: steps,
            error_count: 0,
            duration_ms: None,
        }
    }

    fn requests(effects: &[Effect]) -> Vec<&Request> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Query(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    fn page_reply(state: &AppState, offset: u64, total: u64, len: u64) -> Action {
        let traces = (offset..offset + len)
            .map(|i| summary(&format!("t{i}"), 1))
            .collect();
        Action::Loaded(Response {
            slot: Slot::Traces,
            generation: state.awaited(Slot::Traces).unwrap(),
            result: Ok(Reply::Traces(TracePage { traces, total })),
        })
    }

    fn started(total: u64) -> AppState {
        let mut state = AppState::new("test.db", (80, 24));
        let effects = start(&mut state);
        assert_eq!(requests(&effects).len(), 1);
        let reply = page_reply(&state, 0, total, total.min(PAGE_ROWS));
        update(&mut state, reply);
        state
    }

    fn cmd(state: &mut AppState, command: Command) -> Vec<Effect> {
        update(state, Action::Command(command))
    }

    fn type_text(state: &mut AppState, text: &str) {
        for c in text.chars() {
            update(state, Action::Type(c));
        }
    }

    fn trace_with_steps(id: &str, tools: &[&str]) -> TraceWithSteps {
        TraceWithSteps {
            trace: ObservedTrace::new(id, "test"),
            steps: tools
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let mut s =
                        ObservedStep::new(id, i as u32, *t, json!({"i": i, "deep": {"x": [1, 2]}}));
                    s.outputs = Some(json!({"ok": true}));
                    s
                })
                .collect(),
        }
    }

    #[test]
    fn first_query_is_the_first_page_and_stale_answers_are_dropped() {
        let mut state = AppState::new("test.db", (80, 24));
        let effects = start(&mut state);
        let first = requests(&effects)[0].clone();
        assert!(matches!(&first.query, Query::Traces { page, .. } if page.offset == 0));
        // The sort changes before the first answer comes: the first answer is now stale.
        let effects = cmd(&mut state, Command::SortNext);
        let second = requests(&effects)[0].clone();
        assert!(second.generation > first.generation);
        update(
            &mut state,
            Action::Loaded(Response {
                slot: Slot::Traces,
                generation: first.generation,
                result: Ok(Reply::Traces(TracePage {
                    traces: vec![summary("stale", 1)],
                    total: 1,
                })),
            }),
        );
        assert!(state.traces.page.is_none(), "stale page must be dropped");
        assert!(state.is_loading(Slot::Traces));
        let reply = page_reply(&state, 0, 3, 3);
        update(&mut state, reply);
        assert_eq!(state.traces.row(0).unwrap().trace.trace_id, "t0");
        assert!(!state.is_loading(Slot::Traces));
    }

    #[test]
    fn keys_are_handled_while_a_query_is_outstanding() {
        let mut state = started(1_000);
        // A tools query is sent and not answered.
        cmd(&mut state, Command::NextView);
        assert_eq!(state.view, View::Tools);
        assert!(state.is_loading(Slot::Tools));
        // Keys keep working: back to traces, move, open help, close it.
        cmd(&mut state, Command::PrevView);
        assert_eq!(state.view, View::Traces);
        for _ in 0..5 {
            cmd(&mut state, Command::Down);
        }
        assert_eq!(state.traces.cursor, 5);
        cmd(&mut state, Command::Help);
        assert_eq!(state.mode, Mode::Help);
        cmd(&mut state, Command::Back);
        assert_eq!(state.mode, Mode::Normal);
        assert!(state.is_loading(Slot::Tools), "the query is still awaited");
    }

    #[test]
    fn moving_near_the_page_edge_fetches_the_next_page() {
        let mut state = started(1_000);
        let mut fetched = None;
        for _ in 0..PAGE_ROWS {
            let effects = cmd(&mut state, Command::Down);
            if let Some(r) = requests(&effects).first() {
                fetched = Some((*r).clone());
                break;
            }
        }
        let request = fetched.expect("a page request before the loaded rows run out");
        let Query::Traces { page, .. } = &request.query else {
            panic!("{request:?}")
        };
        assert!(page.offset > 0 && page.offset <= state.traces.cursor);
        assert!(state.traces.cursor + state.visible_rows() as u64 >= PAGE_ROWS);
        let offset = page.offset;
        let reply = page_reply(&state, offset, 1_000, PAGE_ROWS);
        update(&mut state, reply);
        let cursor = state.traces.cursor;
        assert_eq!(
            state.traces.row(cursor).unwrap().trace.trace_id,
            format!("t{cursor}")
        );
        // The last row: G asks for the page holding it.
        let effects = cmd(&mut state, Command::Bottom);
        assert_eq!(state.traces.cursor, 999);
        assert_eq!(requests(&effects).len(), 1);
    }

    #[test]
    fn a_bad_filter_keeps_the_line_and_says_why() {
        let mut state = started(10);
        cmd(&mut state, Command::Filter);
        assert_eq!(state.mode, Mode::Filter);
        type_text(&mut state, "dur>2 tool=x");
        let effects = cmd(&mut state, Command::Submit);
        assert!(effects.is_empty());
        assert_eq!(state.mode, Mode::Filter);
        assert_eq!(state.input, "dur>2 tool=x");
        let status = state.status.clone().unwrap();
        assert_eq!(status.kind, StatusKind::Error);
        assert!(status.text.contains("needs a unit"), "{}", status.text);
        // Fixing it applies the filter and reloads the first page.
        cmd(&mut state, Command::DeleteChar);
        for _ in 0..6 {
            cmd(&mut state, Command::DeleteChar);
        }
        type_text(&mut state, "s error");
        let effects = cmd(&mut state, Command::Submit);
        assert_eq!(state.mode, Mode::Normal);
        let request = requests(&effects)[0];
        let Query::Traces { filter, page } = &request.query else {
            panic!()
        };
        assert_eq!(filter.min_duration_ms, Some(2_000.0));
        assert_eq!(filter.has_error, Some(true));
        assert_eq!(page.offset, 0);
        assert_eq!(state.filter_text(), "error dur>=2s");
        // `/` again starts from the active filter.
        cmd(&mut state, Command::Filter);
        assert_eq!(state.input, "error dur>=2s");
        cmd(&mut state, Command::Cancel);
        assert_eq!(state.mode, Mode::Normal);
        assert_eq!(state.filter.has_error, Some(true));
    }

    #[test]
    fn typed_q_goes_into_the_line_not_quit() {
        let mut state = started(10);
        cmd(&mut state, Command::Jump);
        let action = action_for_key(&state, Key::Char('q')).unwrap();
        assert_eq!(action, Action::Type('q'));
        update(&mut state, action);
        assert_eq!(state.input, "q");
        // Submitting `:q` quits.
        assert_eq!(cmd(&mut state, Command::Submit), vec![Effect::Quit]);
    }

    #[test]
    fn jump_to_a_trace_and_to_an_unknown_one() {
        let mut state = started(10);
        cmd(&mut state, Command::Jump);
        type_text(&mut state, "trace t7");
        let effects = cmd(&mut state, Command::Submit);
        assert_eq!(state.view, View::Detail);
        assert_eq!(
            requests(&effects)[0].query,
            Query::Trace {
                trace_id: "t7".into()
            }
        );
        let generation = state.awaited(Slot::Detail).unwrap();
        update(
            &mut state,
            Action::Loaded(Response {
                slot: Slot::Detail,
                generation,
                result: Ok(Reply::Trace(None)),
            }),
        );
        assert_eq!(state.view, View::Traces);
        assert!(
            state
                .status
                .as_ref()
                .unwrap()
                .text
                .contains("no trace `t7`")
        );
        cmd(&mut state, Command::Jump);
        type_text(&mut state, "frobnicate");
        cmd(&mut state, Command::Submit);
        assert!(state.status.as_ref().unwrap().text.contains("unknown jump"));
    }

    #[test]
    fn detail_steps_payload_folding_raw_and_copy() {
        let mut state = started(3);
        let effects = cmd(&mut state, Command::Open);
        assert_eq!(state.view, View::Detail);
        assert_eq!(
            requests(&effects)[0].query,
            Query::Trace {
                trace_id: "t0".into()
            }
        );
        let generation = state.awaited(Slot::Detail).unwrap();
        update(
            &mut state,
            Action::Loaded(Response {
                slot: Slot::Detail,
                generation,
                result: Ok(Reply::Trace(Some(Box::new(trace_with_steps(
                    "t0",
                    &["a", "b"],
                ))))),
            }),
        );
        assert_eq!(state.detail.selected_step().unwrap().tool_name, "a");
        cmd(&mut state, Command::Down);
        assert_eq!(state.detail.selected_step().unwrap().tool_name, "b");
        // The payload tree: inputs {i, deep {x [1, 2]}}, outputs {ok}.
        assert_eq!(state.detail.lines.len(), 8);
        cmd(&mut state, Command::FocusPayload);
        assert_eq!(state.detail.focus, Focus::Payload);
        cmd(&mut state, Command::Down);
        cmd(&mut state, Command::Down);
        assert_eq!(
            state.detail.lines[state.detail.line].pointer,
            "/inputs/deep"
        );
        cmd(&mut state, Command::ToggleFold);
        assert_eq!(state.detail.lines.len(), 5);
        let effects = cmd(&mut state, Command::Copy);
        let [Effect::Copy { label, json }] = effects.as_slice() else {
            panic!("{effects:?}")
        };
        assert_eq!(label, "value at /inputs/deep");
        let copied: Value = serde_json::from_str(json).unwrap();
        assert_eq!(copied, json!({"x": [1, 2]}));
        cmd(&mut state, Command::ToggleRaw);
        assert!(state.detail.raw);
        assert_eq!(state.detail.raw_lines[0], "{");
        cmd(&mut state, Command::FocusSteps);
        let effects = cmd(&mut state, Command::Copy);
        let [Effect::Copy { json, .. }] = effects.as_slice() else {
            panic!()
        };
        assert!(json.contains("\"tool_name\": \"b\""), "{json}");
        cmd(&mut state, Command::Back);
        assert_eq!(state.view, View::Traces);
    }

    #[test]
    fn marks_and_compare() {
        let mut state = started(3);
        assert!(cmd(&mut state, Command::Compare).is_empty());
        assert_eq!(state.status.as_ref().unwrap().kind, StatusKind::Error);
        cmd(&mut state, Command::Mark);
        cmd(&mut state, Command::Down);
        cmd(&mut state, Command::Mark);
        cmd(&mut state, Command::Down);
        cmd(&mut state, Command::Mark);
        assert_eq!(state.marks, ["t1", "t2"], "the oldest mark gives way");
        cmd(&mut state, Command::Mark);
        assert_eq!(state.marks, ["t1"], "marking again unmarks");
        cmd(&mut state, Command::Mark);
        let effects = cmd(&mut state, Command::Compare);
        assert_eq!(state.view, View::Compare);
        let asked: Vec<_> = requests(&effects)
            .iter()
            .map(|r| (r.slot, r.query.clone()))
            .collect();
        assert_eq!(
            asked,
            [
                (
                    Slot::CompareLeft,
                    Query::Trace {
                        trace_id: "t1".into()
                    }
                ),
                (
                    Slot::CompareRight,
                    Query::Trace {
                        trace_id: "t2".into()
                    }
                ),
            ]
        );
        cmd(&mut state, Command::Back);
        assert_eq!(state.view, View::Traces);
    }

    #[test]
    fn tabs_load_their_data_once() {
        let mut state = started(3);
        let effects = cmd(&mut state, Command::NextView);
        assert!(matches!(
            requests(&effects)[0].query,
            Query::ToolStats { .. }
        ));
        let effects = cmd(&mut state, Command::NextView);
        assert_eq!(state.view, View::Patterns);
        assert_eq!(requests(&effects)[0].query, Query::Patterns);
        let generation = state.awaited(Slot::Patterns).unwrap();
        update(
            &mut state,
            Action::Loaded(Response {
                slot: Slot::Patterns,
                generation,
                result: Ok(Reply::Patterns(vec![])),
            }),
        );
        let effects = cmd(&mut state, Command::NextView);
        assert_eq!(state.view, View::Candidates);
        let kinds: Vec<_> = requests(&effects).iter().map(|r| r.slot).collect();
        assert_eq!(kinds, [Slot::Candidates, Slot::Verdicts]);
        cmd(&mut state, Command::NextView);
        assert_eq!(state.view, View::Traces);
        let effects = cmd(&mut state, Command::PrevView);
        assert_eq!(state.view, View::Candidates);
        assert!(
            requests(&effects).is_empty(),
            "still loading, not asked twice"
        );
        cmd(&mut state, Command::PrevView);
        let effects = cmd(&mut state, Command::PrevView);
        assert_eq!(state.view, View::Tools);
        assert!(
            requests(&effects).is_empty(),
            "statistics for this filter are on their way"
        );
    }

    #[test]
    fn enter_on_a_tool_filters_traces_by_it() {
        let mut state = started(3);
        cmd(&mut state, Command::NextView);
        let generation = state.awaited(Slot::Tools).unwrap();
        let stat = ToolStats {
            tool_name: "get_order".into(),
            calls: 3,
            traces: 2,
            errors: 0,
            error_rate: 0.0,
            p50_ms: None,
            p95_ms: None,
            p99_ms: None,
            mean_ms: None,
        };
        update(
            &mut state,
            Action::Loaded(Response {
                slot: Slot::Tools,
                generation,
                result: Ok(Reply::ToolStats(vec![stat])),
            }),
        );
        let effects = cmd(&mut state, Command::Open);
        assert_eq!(state.view, View::Traces);
        assert_eq!(state.filter.tool.as_deref(), Some("get_order"));
        assert!(
            matches!(&requests(&effects)[0].query, Query::Traces { filter, .. } if filter.tool.as_deref() == Some("get_order"))
        );
    }

    #[test]
    fn store_errors_reach_the_status_line() {
        let mut state = AppState::new("x", (80, 24));
        start(&mut state);
        let generation = state.awaited(Slot::Traces).unwrap();
        update(
            &mut state,
            Action::Loaded(Response {
                slot: Slot::Traces,
                generation,
                result: Err("disk I/O error\u{1b}[2J".into()),
            }),
        );
        let status = state.status.unwrap();
        assert_eq!(status.kind, StatusKind::Error);
        assert_eq!(status.text, "store: disk I/O error\\u{1b}[2J");
    }

    #[test]
    fn wheel_scrolls_three_rows_a_notch() {
        let mut state = started(50);
        update(&mut state, Action::Scroll(2));
        assert_eq!(state.traces.cursor, 6);
        update(&mut state, Action::Scroll(-1));
        assert_eq!(state.traces.cursor, 3);
    }
}
