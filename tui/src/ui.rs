//! Drawing: every view renders from [`AppState`] alone (the only thing written back is the
//! first row drawn, so scrolling stays smooth). Text from the store is escaped before it gets
//! here; see [`crate::sanitize`].

use chainweaver_recorder::model::{ObservedStep, Timestamp, TraceWithSteps};
use chainweaver_recorder::store::TraceSort;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::border;
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, Wrap};

use chainweaver_recorder::model::candidate::VerdictStatus;

use crate::app::{AppState, Focus, Mode, StatusKind, TABS, View};
use crate::json_tree::raw_lines;
use crate::keymap::{Context, help_rows, hints};
use crate::review::{
    Tone, exact_cell, fit_flow, flow_labels, pattern_labels, pattern_summary, verdict_cell,
};
use crate::sanitize::escape_line;
use crate::worker::Slot;

/// How the browser draws: with or without Unicode symbols and colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    /// Only ASCII: no box drawing, block elements or arrows.
    pub ascii: bool,
    /// Colours on (off for `NO_COLOR`; reverse video and bold still mark things).
    pub color: bool,
}

impl Default for Theme {
    fn default() -> Self {
        Self {
            ascii: false,
            color: true,
        }
    }
}

const ASCII_BORDER: border::Set<'static> = border::Set {
    top_left: "+",
    top_right: "+",
    bottom_left: "+",
    bottom_right: "+",
    vertical_left: "|",
    vertical_right: "|",
    horizontal_top: "-",
    horizontal_bottom: "-",
};

/// What a piece of text is, for styling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Title,
    Selected,
    Error,
    Warn,
    Good,
    Dim,
    Bar,
    Header,
}

impl Theme {
    fn border(&self) -> border::Set<'static> {
        if self.ascii {
            ASCII_BORDER
        } else {
            border::ROUNDED
        }
    }

    fn block<'a>(&self, title: impl Into<Line<'a>>, focused: bool) -> Block<'a> {
        let block = Block::default()
            .borders(Borders::ALL)
            .border_set(self.border())
            .title(title);
        if focused {
            block.border_style(self.style(Role::Title))
        } else {
            block
        }
    }

    fn style(&self, role: Role) -> Style {
        let base = Style::default();
        if !self.color {
            return match role {
                Role::Title | Role::Header => base.add_modifier(Modifier::BOLD),
                Role::Selected => base.add_modifier(Modifier::REVERSED),
                Role::Error => base.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
                _ => base,
            };
        }
        match role {
            Role::Title => base.fg(Color::Cyan).add_modifier(Modifier::BOLD),
            Role::Header => base.fg(Color::Yellow).add_modifier(Modifier::BOLD),
            Role::Selected => base.add_modifier(Modifier::REVERSED),
            Role::Error => base.fg(Color::Red).add_modifier(Modifier::BOLD),
            Role::Warn => base.fg(Color::Yellow),
            Role::Good => base.fg(Color::Green),
            Role::Dim => base.fg(Color::DarkGray),
            Role::Bar => base.fg(Color::Blue),
        }
    }

    fn selector(&self) -> &'static str {
        if self.ascii { ">" } else { "▶" }
    }

    fn mark(&self) -> &'static str {
        if self.ascii { "*" } else { "●" }
    }

    fn fold(&self, folded: bool) -> &'static str {
        match (self.ascii, folded) {
            (true, true) => "+ ",
            (true, false) => "- ",
            (false, true) => "▸ ",
            (false, false) => "▾ ",
        }
    }

    fn arrow(&self, descending: bool) -> &'static str {
        match (self.ascii, descending) {
            (true, true) => "v",
            (true, false) => "^",
            (false, true) => "▼",
            (false, false) => "▲",
        }
    }

    fn dot(&self) -> &'static str {
        if self.ascii { " - " } else { " · " }
    }

    /// A horizontal bar `fraction` of `width` cells long, padded to `width`.
    fn bar(&self, fraction: f64, width: usize) -> String {
        let fraction = if fraction.is_finite() {
            fraction.clamp(0.0, 1.0)
        } else {
            0.0
        };
        if self.ascii {
            let full = (fraction * width as f64).round() as usize;
            let full = if fraction > 0.0 { full.max(1) } else { 0 };
            return format!(
                "{}{}",
                "#".repeat(full),
                " ".repeat(width - full.min(width))
            );
        }
        let eighths = (fraction * width as f64 * 8.0).round() as usize;
        let eighths = if fraction > 0.0 { eighths.max(1) } else { 0 };
        let full = (eighths / 8).min(width);
        let mut out = "█".repeat(full);
        let rest = eighths % 8;
        let mut used = full;
        if rest > 0 && used < width {
            out.push(['▏', '▎', '▍', '▌', '▋', '▊', '▉'][rest - 1]);
            used += 1;
        }
        out.push_str(&" ".repeat(width - used));
        out
    }

    /// A bar from `start` to `end` (fractions of `width`), at least one cell.
    fn span_bar(&self, start: f64, end: f64, width: usize) -> String {
        if width == 0 {
            return String::new();
        }
        let from = ((start.clamp(0.0, 1.0)) * width as f64).floor() as usize;
        let from = from.min(width - 1);
        let to = ((end.clamp(0.0, 1.0)) * width as f64).ceil() as usize;
        let to = to.clamp(from + 1, width);
        let fill = if self.ascii { "=" } else { "━" };
        let lead = if self.ascii { "." } else { "·" };
        format!(
            "{}{}{}",
            lead.repeat(from),
            fill.repeat(to - from),
            " ".repeat(width - to)
        )
    }
}

/// Milliseconds as `850ms`, `1.23s`, `2m03s` or `1h02m`.
pub fn format_ms(ms: f64) -> String {
    if !ms.is_finite() || ms < 0.0 {
        return "-".into();
    }
    if ms < 1.0 {
        format!("{ms:.2}ms")
    } else if ms < 1_000.0 {
        format!("{ms:.0}ms")
    } else if ms < 60_000.0 {
        format!("{:.2}s", ms / 1_000.0)
    } else if ms < 3_600_000.0 {
        let s = (ms / 1_000.0).round() as u64;
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        let m = (ms / 60_000.0).round() as u64;
        format!("{}h{:02}m", m / 60, m % 60)
    }
}

/// A count with thousands separators.
pub fn format_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn format_time(at: &Timestamp) -> String {
    at.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// Keep `cursor` visible in a window of `height` rows, moving the remembered first row as
/// little as possible.
fn window(memo: &std::cell::Cell<usize>, cursor: usize, height: usize, len: usize) -> usize {
    let height = height.max(1);
    let mut first = memo.get();
    if cursor < first {
        first = cursor;
    } else if cursor >= first + height {
        first = cursor + 1 - height;
    }
    first = first.min(len.saturating_sub(height));
    memo.set(first);
    first
}

/// Draw the whole browser.
pub fn render(frame: &mut Frame<'_>, state: &AppState, theme: &Theme) {
    let [tabs, main, status, hint] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    render_tabs(frame, tabs, state, theme);
    match state.view {
        View::Traces => render_traces(frame, main, state, theme),
        View::Detail => render_detail(frame, main, state, theme),
        View::Compare => render_compare(frame, main, state, theme),
        View::Tools => render_tools(frame, main, state, theme),
        View::Patterns => render_patterns(frame, main, state, theme),
        View::Candidates => render_candidates(frame, main, state, theme),
        View::Candidate => render_candidate(frame, main, state, theme),
    }
    render_status(frame, status, state, theme);
    render_hints(frame, hint, state, theme);
    if state.mode == Mode::Help {
        render_help(frame, main, state, theme);
    }
}

fn render_tabs(frame: &mut Frame<'_>, area: Rect, state: &AppState, theme: &Theme) {
    let mut spans = vec![Span::styled(" chainweaver ", theme.style(Role::Title))];
    for view in TABS {
        let label = format!(" {} ", view.title());
        if view == state.view.tab() {
            spans.push(Span::styled(label, theme.style(Role::Selected)));
        } else {
            spans.push(Span::raw(label));
        }
    }
    let marks = if state.marks.is_empty() {
        String::new()
    } else {
        format!("{}marks {}  ", theme.mark(), state.marks.len())
    };
    let right = format!("{marks}{}", escape_line(&state.store_label, 60));
    let left_width: usize = spans.iter().map(Span::width).sum();
    let pad = usize::from(area.width).saturating_sub(left_width + right.chars().count() + 1);
    spans.push(Span::raw(" ".repeat(pad)));
    spans.push(Span::styled(right, theme.style(Role::Dim)));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn render_status(frame: &mut Frame<'_>, area: Rect, state: &AppState, theme: &Theme) {
    let line = match state.mode {
        Mode::Filter | Mode::Jump => {
            let prompt = if state.mode == Mode::Filter { "/" } else { ":" };
            let mut spans = vec![
                Span::styled(prompt, theme.style(Role::Title)),
                Span::raw(escape_line(&state.input, 500)),
                Span::styled("_", theme.style(Role::Selected)),
            ];
            if let Some(status) = state
                .status
                .as_ref()
                .filter(|s| s.kind == StatusKind::Error)
            {
                spans.push(Span::raw("   "));
                spans.push(Span::styled(status.text.clone(), theme.style(Role::Error)));
            }
            Line::from(spans)
        }
        _ => {
            let mut spans = Vec::new();
            match &state.status {
                Some(status) => {
                    let role = match status.kind {
                        StatusKind::Info => Role::Good,
                        StatusKind::Error => Role::Error,
                    };
                    spans.push(Span::styled(status.text.clone(), theme.style(role)));
                }
                None => {
                    let filter = state.filter_text();
                    if !filter.is_empty() {
                        spans.push(Span::styled("filter: ", theme.style(Role::Dim)));
                        spans.push(Span::raw(escape_line(&filter, 300)));
                    }
                }
            }
            let busy = [
                Slot::Traces,
                Slot::Detail,
                Slot::CompareLeft,
                Slot::CompareRight,
                Slot::Tools,
                Slot::Patterns,
                Slot::Candidates,
                Slot::Verdicts,
            ]
            .iter()
            .any(|s| state.is_loading(*s));
            if busy {
                spans.push(Span::styled("  [loading]", theme.style(Role::Warn)));
            }
            Line::from(spans)
        }
    };
    frame.render_widget(Paragraph::new(line), area);
}

fn render_hints(frame: &mut Frame<'_>, area: Rect, state: &AppState, theme: &Theme) {
    let context = if state.mode == Mode::Help {
        Context::Global
    } else {
        state.context()
    };
    let mut spans = Vec::new();
    if matches!(state.mode, Mode::Filter | Mode::Jump) {
        spans.push(Span::styled(
            "Enter apply  Esc cancel  Ctrl-u clear",
            theme.style(Role::Dim),
        ));
        if state.mode == Mode::Filter {
            spans.push(Span::styled(
                "  e.g. tool=NAME source=NAME error !error dur>2s since=2026-11-01 WORD",
                theme.style(Role::Dim),
            ));
        }
    } else {
        for (keys, word) in hints(context) {
            spans.push(Span::styled(keys, theme.style(Role::Header)));
            spans.push(Span::styled(format!(" {word}  "), theme.style(Role::Dim)));
        }
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn render_help(frame: &mut Frame<'_>, area: Rect, state: &AppState, theme: &Theme) {
    let width = area.width.saturating_sub(4).min(96);
    let height = area.height.saturating_sub(2);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + 1,
        width,
        height,
    };
    let mut lines: Vec<Line<'_>> = Vec::new();
    for context in Context::ALL {
        lines.push(Line::styled(context.title(), theme.style(Role::Header)));
        for (keys, description) in help_rows(context) {
            lines.push(Line::from(vec![
                Span::styled(format!("  {keys:<20}"), theme.style(Role::Title)),
                Span::raw(description),
            ]));
        }
    }
    let max_scroll = lines
        .len()
        .saturating_sub(usize::from(height.saturating_sub(2)));
    let scroll = state.help_scroll.min(max_scroll);
    let visible: Vec<Line<'_>> = lines.into_iter().skip(scroll).collect();
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(visible)
            .wrap(Wrap { trim: false })
            .block(theme.block(" Keys (? or Esc closes) ", true)),
        popup,
    );
}

fn sort_name(sort: TraceSort) -> &'static str {
    match sort {
        TraceSort::Stored => "stored",
        TraceSort::TraceId => "id",
        TraceSort::StartedAt => "started",
        TraceSort::Steps => "steps",
        TraceSort::Errors => "errors",
        TraceSort::Duration => "duration",
    }
}

fn render_traces(frame: &mut Frame<'_>, area: Rect, state: &AppState, theme: &Theme) {
    let traces = &state.traces;
    let height = usize::from(area.height.saturating_sub(3));
    let total = traces.total();
    let cursor = traces.cursor;
    let first = window_u64(&traces.scroll, cursor, height as u64, total.unwrap_or(0));
    let shown_to = (first + height as u64).min(total.unwrap_or(0));
    let count = match total {
        Some(0) => "0".to_string(),
        Some(total) => format!(
            "{}-{} of {}",
            format_count(first + 1),
            format_count(shown_to),
            format_count(total)
        ),
        None if state.is_loading(Slot::Traces) => "loading".to_string(),
        None => "unavailable".to_string(),
    };
    let title = format!(
        " Traces {count}{}sorted by {} {} ",
        theme.dot(),
        sort_name(traces.sort),
        theme.arrow(traces.descending)
    );
    let block = theme.block(title, true);
    if total == Some(0) {
        let text = if state.filter == Default::default() {
            "No traces in this store yet. Import agent logs or record with the TraceRecorder."
                .to_string()
        } else {
            "No trace matches the filter. Press / to change it or x to clear it.".to_string()
        };
        frame.render_widget(Paragraph::new(text).block(block), area);
        return;
    }
    let arrow = |sort: TraceSort, name: &str| {
        if traces.sort == sort {
            format!("{name}{}", theme.arrow(traces.descending))
        } else {
            name.to_string()
        }
    };
    let header = Row::new(vec![
        Cell::from(""),
        Cell::from(arrow(TraceSort::TraceId, "id")),
        Cell::from("source"),
        Cell::from(arrow(TraceSort::StartedAt, "started")),
        Cell::from(arrow(TraceSort::Steps, "steps")),
        Cell::from(arrow(TraceSort::Errors, "errors")),
        Cell::from(arrow(TraceSort::Duration, "duration")),
    ])
    .style(theme.style(Role::Header));
    let mut rows = Vec::new();
    for row in first..shown_to.max(first) {
        let selected = row == cursor;
        let marker = if selected { theme.selector() } else { " " };
        let Some(summary) = traces.row(row) else {
            let r =
                Row::new(vec![Cell::from(marker), Cell::from("...")]).style(theme.style(Role::Dim));
            rows.push(if selected {
                r.style(theme.style(Role::Selected))
            } else {
                r
            });
            continue;
        };
        let trace = &summary.trace;
        let marked = state.marks.contains(&trace.trace_id);
        let id = format!(
            "{}{}",
            if marked { theme.mark() } else { "" },
            escape_line(&trace.trace_id, 120)
        );
        let errors =
            Cell::from(summary.error_count.to_string()).style(if summary.error_count > 0 {
                theme.style(Role::Error)
            } else {
                Style::default()
            });
        let mut r = Row::new(vec![
            Cell::from(marker),
            Cell::from(id),
            Cell::from(escape_line(&trace.source, 120)),
            Cell::from(
                trace
                    .started_at
                    .as_ref()
                    .map(format_time)
                    .unwrap_or_else(|| "-".into()),
            ),
            Cell::from(format_count(summary.step_count)),
            errors,
            Cell::from(
                summary
                    .duration_ms
                    .map(format_ms)
                    .unwrap_or_else(|| "-".into()),
            ),
        ]);
        if selected {
            r = r.style(theme.style(Role::Selected));
        }
        rows.push(r);
    }
    let widths = [
        Constraint::Length(1),
        Constraint::Fill(3),
        Constraint::Fill(2),
        Constraint::Length(19),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(9),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .block(block);
    frame.render_widget(table, area);
}

fn window_u64(memo: &std::cell::Cell<u64>, cursor: u64, height: u64, len: u64) -> u64 {
    let height = height.max(1);
    let mut first = memo.get();
    if cursor < first {
        first = cursor;
    } else if cursor >= first + height {
        first = cursor + 1 - height;
    }
    first = first.min(len.saturating_sub(height));
    memo.set(first);
    first
}

/// Where each step lies on the trace's time axis, as fractions of the whole.
#[derive(Debug, Clone, PartialEq)]
pub enum Waterfall {
    /// From timestamps.
    Timeline(Vec<(f64, f64)>),
    /// From durations laid end to end (no timestamps).
    Durations(Vec<(f64, f64)>),
    /// Neither timestamps nor durations: one slot a step.
    Order(usize),
}

fn step_end(step: &ObservedStep) -> Option<Timestamp> {
    step.ended_at.or_else(|| {
        let start = step.started_at?;
        let ms = step.duration_ms?;
        Some(start + chrono::Duration::microseconds((ms * 1_000.0) as i64))
    })
}

/// The waterfall of a trace's steps.
pub fn waterfall(trace: &TraceWithSteps) -> Waterfall {
    let steps = &trace.steps;
    let starts: Vec<Timestamp> = steps.iter().filter_map(|s| s.started_at).collect();
    if let Some(t0) = starts.iter().min().copied() {
        let t1 = steps
            .iter()
            .filter_map(|s| step_end(s).or(s.started_at))
            .max()
            .unwrap_or(t0);
        let span = ((t1 - t0).num_microseconds().unwrap_or(0) as f64).max(1.0);
        let at = |t: Timestamp| (t - t0).num_microseconds().unwrap_or(0) as f64 / span;
        let mut last = 0.0;
        return Waterfall::Timeline(
            steps
                .iter()
                .map(|s| match s.started_at {
                    Some(start) => {
                        let from = at(start);
                        let to = step_end(s).map(at).unwrap_or(from);
                        last = to;
                        (from, to)
                    }
                    None => (last, last),
                })
                .collect(),
        );
    }
    let total: f64 = steps.iter().filter_map(|s| s.duration_ms).sum();
    if total > 0.0 {
        let mut at = 0.0;
        return Waterfall::Durations(
            steps
                .iter()
                .map(|s| {
                    let from = at / total;
                    at += s.duration_ms.unwrap_or(0.0);
                    (from, at / total)
                })
                .collect(),
        );
    }
    Waterfall::Order(steps.len())
}

fn step_duration(step: &ObservedStep) -> Option<f64> {
    step.duration_ms.or_else(|| {
        let (start, end) = (step.started_at?, step.ended_at?);
        Some((end - start).num_microseconds()? as f64 / 1_000.0)
    })
}

fn render_detail(frame: &mut Frame<'_>, area: Rect, state: &AppState, theme: &Theme) {
    let detail = &state.detail;
    let id = escape_line(detail.trace_id.as_deref().unwrap_or(""), 80);
    let Some(trace) = detail.loaded() else {
        let block = theme.block(format!(" Trace {id} "), true);
        frame.render_widget(Paragraph::new("Loading the trace...").block(block), area);
        return;
    };
    let share = if area.width < 100 { 50 } else { 45 };
    let left_width = ((u32::from(area.width) * share / 100) as u16).clamp(30.min(area.width), 70);
    let [left, right] =
        Layout::horizontal([Constraint::Length(left_width), Constraint::Fill(1)]).areas(area);

    // Step list with the waterfall.
    let errors = trace.steps.iter().filter(|s| s.is_error()).count();
    let marked = if state.marks.contains(&trace.trace.trace_id) {
        theme.mark()
    } else {
        ""
    };
    let fall = waterfall(trace);
    let axis = match &fall {
        Waterfall::Timeline(_) => "waterfall",
        Waterfall::Durations(_) => "durations, no timestamps",
        Waterfall::Order(_) => "in order, no timestamps",
    };
    let failed = if errors > 0 {
        format!(", {errors} failed")
    } else {
        String::new()
    };
    let dot = theme.dot();
    let title = format!(" {marked}{id}{dot}{} steps{failed} ", trace.steps.len());
    let block = theme
        .block(title, detail.focus == Focus::Steps)
        .title_bottom(format!(" {axis} "));
    let inner = block.inner(left);
    frame.render_widget(block, left);
    let height = usize::from(inner.height.saturating_sub(1));
    let source_line = Line::from(vec![
        Span::raw(escape_line(&trace.trace.source, 60)),
        Span::styled(
            trace
                .trace
                .started_at
                .as_ref()
                .map(|t| format!("{dot}{}", format_time(t)))
                .unwrap_or_default(),
            theme.style(Role::Dim),
        ),
    ]);
    let first = window(&detail.step_scroll, detail.step, height, trace.steps.len());
    let width = usize::from(inner.width);
    let name_width = (width / 3).clamp(8, 28);
    // The row's text: selector, error flag, 3-digit index, space, name, space, 8-wide
    // duration, space; the bar takes exactly the rest.
    let bar_width = width.saturating_sub(1 + 1 + 3 + 1 + name_width + 1 + 8 + 1);
    let mut lines = vec![source_line];
    for (i, step) in trace.steps.iter().enumerate().skip(first).take(height) {
        let selected = i == detail.step;
        let (from, to) = match &fall {
            Waterfall::Timeline(spans) | Waterfall::Durations(spans) => spans[i],
            Waterfall::Order(n) => (i as f64 / *n as f64, (i + 1) as f64 / *n as f64),
        };
        let name = escape_line(&step.tool_name, 200);
        let name: String = name.chars().take(name_width).collect();
        let duration = step_duration(step)
            .map(format_ms)
            .unwrap_or_else(|| "-".into());
        let flag = if step.is_error() { "!" } else { " " };
        let text = format!(
            "{}{flag}{:>3} {name:<name_width$} {duration:>8} ",
            if selected { theme.selector() } else { " " },
            step.step_index,
        );
        let bar = theme.span_bar(from, to, bar_width);
        let base = if step.is_error() {
            theme.style(Role::Error)
        } else {
            Style::default()
        };
        let style = if selected && detail.focus == Focus::Steps {
            base.patch(theme.style(Role::Selected))
        } else {
            base
        };
        let bar_style = if step.is_error() {
            theme.style(Role::Error)
        } else {
            theme.style(Role::Bar)
        };
        lines.push(Line::from(vec![
            Span::styled(text, style),
            Span::styled(bar, bar_style),
        ]));
    }
    frame.render_widget(Paragraph::new(lines), inner);

    // Payload of the selected step.
    let step = detail.selected_step();
    let title = match step {
        Some(step) => format!(
            " step {}: {}{}{} ",
            step.step_index,
            escape_line(&step.tool_name, 60),
            theme.dot(),
            if detail.raw { "raw JSON" } else { "JSON tree" }
        ),
        None => " no steps ".to_string(),
    };
    let block = theme.block(title, detail.focus == Focus::Payload);
    let inner = block.inner(right);
    frame.render_widget(block, right);
    let height = usize::from(inner.height);
    let focused = detail.focus == Focus::Payload;
    let mut lines = Vec::new();
    if detail.raw {
        let first = window(
            &detail.payload_scroll,
            detail.line,
            height,
            detail.raw_lines.len(),
        );
        for (i, text) in detail.raw_lines.iter().enumerate().skip(first).take(height) {
            let style = if focused && i == detail.line {
                theme.style(Role::Selected)
            } else {
                Style::default()
            };
            lines.push(Line::styled(text.clone(), style));
        }
    } else {
        let first = window(
            &detail.payload_scroll,
            detail.line,
            height,
            detail.lines.len(),
        );
        for (i, line) in detail.lines.iter().enumerate().skip(first).take(height) {
            let indent = "  ".repeat(line.depth.min(20));
            let marker = match line.fold {
                Some(folded) => theme.fold(folded),
                None => "  ",
            };
            let mut style = if line.is_error {
                theme.style(Role::Error)
            } else {
                Style::default()
            };
            if focused && i == detail.line {
                style = style.patch(theme.style(Role::Selected));
            }
            lines.push(Line::styled(
                format!("{indent}{marker}{}", line.text),
                style,
            ));
        }
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

fn render_compare(frame: &mut Frame<'_>, area: Rect, state: &AppState, theme: &Theme) {
    let compare = &state.compare;
    let [left, right] = Layout::horizontal([Constraint::Fill(1), Constraint::Fill(1)]).areas(area);
    let (left_id, right_id) = compare.ids.clone().unwrap_or_default();
    let sides = [
        (left, &compare.left, &compare.right, left_id),
        (right, &compare.right, &compare.left, right_id),
    ];
    let len = compare
        .left
        .as_ref()
        .map_or(0, |t| t.steps.len())
        .max(compare.right.as_ref().map_or(0, |t| t.steps.len()));
    for (i, (area, this, other, id)) in sides.into_iter().enumerate() {
        let Some(trace) = this else {
            let block = theme.block(format!(" {} ", escape_line(&id, 60)), false);
            frame.render_widget(Paragraph::new("Loading...").block(block), area);
            continue;
        };
        let duration: f64 = trace.steps.iter().filter_map(step_duration).sum();
        let title = format!(
            " {} {}{}{} steps{}{} ",
            if i == 0 { "A" } else { "B" },
            escape_line(&id, 60),
            theme.dot(),
            trace.steps.len(),
            theme.dot(),
            format_ms(duration)
        );
        let block = theme.block(title, i == 0);
        let inner = block.inner(area);
        frame.render_widget(block, area);
        let height = usize::from(inner.height);
        let name_width = usize::from(inner.width).saturating_sub(15).clamp(4, 40);
        let first = if i == 0 {
            window(&compare.scroll, compare.cursor, height, len)
        } else {
            compare.scroll.get()
        };
        let mut lines = Vec::new();
        for row in first..(first + height).min(len) {
            let selected = row == compare.cursor;
            let marker = if selected { theme.selector() } else { " " };
            let Some(step) = trace.steps.get(row) else {
                lines.push(Line::styled(
                    format!("{marker} {row:>3} (no step)"),
                    theme.style(Role::Dim),
                ));
                continue;
            };
            let other_tool = other
                .as_ref()
                .and_then(|o| o.steps.get(row))
                .map(|s| s.tool_name.as_str());
            let differs = other.is_some() && other_tool != Some(step.tool_name.as_str());
            let flag = if step.is_error() {
                "!"
            } else if differs {
                "~"
            } else {
                " "
            };
            let duration = step_duration(step)
                .map(format_ms)
                .unwrap_or_else(|| "-".into());
            let mut style = if step.is_error() {
                theme.style(Role::Error)
            } else if differs {
                theme.style(Role::Warn)
            } else {
                Style::default()
            };
            if selected {
                style = style.patch(theme.style(Role::Selected));
            }
            lines.push(Line::styled(
                format!(
                    "{marker}{flag}{:>3} {:<name_width$} {duration:>8}",
                    step.step_index,
                    escape_line(&step.tool_name, 200)
                        .chars()
                        .take(name_width)
                        .collect::<String>()
                ),
                style,
            ));
        }
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

fn render_tools(frame: &mut Frame<'_>, area: Rect, state: &AppState, theme: &Theme) {
    let tools = &state.tools;
    let filter = state.filter_text();
    let scope = if filter.is_empty() {
        "all traces".to_string()
    } else {
        format!("filter {}", escape_line(&filter, 80))
    };
    let Some(stats) = tools.stats.as_ref() else {
        let block = theme.block(format!(" Tools{}{scope} ", theme.dot()), true);
        frame.render_widget(
            Paragraph::new("Computing per-tool statistics...").block(block),
            area,
        );
        return;
    };
    let block = theme.block(
        format!(" Tools {}{}{scope} ", stats.len(), theme.dot()),
        true,
    );
    if stats.is_empty() {
        frame.render_widget(Paragraph::new("No tool calls.").block(block), area);
        return;
    }
    let wide = area.width >= 110;
    let bar = if wide { 14 } else { 6 };
    let err_bar = if wide { 8 } else { 4 };
    let max_calls = stats.iter().map(|s| s.calls).max().unwrap_or(1).max(1) as f64;
    let max_p95 = stats
        .iter()
        .filter_map(|s| s.p95_ms)
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let height = usize::from(area.height.saturating_sub(3));
    let first = window(&tools.scroll, tools.cursor, height, stats.len());
    let header = Row::new(vec![
        Cell::from(""),
        Cell::from("tool"),
        Cell::from("calls"),
        Cell::from(""),
        Cell::from("traces"),
        Cell::from("err%"),
        Cell::from(""),
        Cell::from("p50"),
        Cell::from("p95"),
        Cell::from(""),
    ])
    .style(theme.style(Role::Header));
    let rows: Vec<Row<'_>> = stats
        .iter()
        .enumerate()
        .skip(first)
        .take(height)
        .map(|(i, s)| {
            let selected = i == tools.cursor;
            let err_style = if s.errors > 0 {
                theme.style(Role::Error)
            } else {
                Style::default()
            };
            let row = Row::new(vec![
                Cell::from(if selected { theme.selector() } else { " " }),
                Cell::from(escape_line(&s.tool_name, 120)),
                Cell::from(format_count(s.calls)),
                Cell::from(theme.bar(s.calls as f64 / max_calls, bar))
                    .style(theme.style(Role::Bar)),
                Cell::from(format_count(s.traces)),
                Cell::from(format!("{:.1}", s.error_rate * 100.0)).style(err_style),
                Cell::from(theme.bar(s.error_rate, err_bar)).style(theme.style(Role::Error)),
                Cell::from(s.p50_ms.map(format_ms).unwrap_or_else(|| "-".into())),
                Cell::from(s.p95_ms.map(format_ms).unwrap_or_else(|| "-".into())),
                Cell::from(theme.bar(s.p95_ms.unwrap_or(0.0) / max_p95, bar))
                    .style(theme.style(Role::Warn)),
            ]);
            if selected {
                row.style(theme.style(Role::Selected))
            } else {
                row
            }
        })
        .collect();
    let widths = [
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(7),
        Constraint::Length(bar as u16),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(err_bar as u16),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(bar as u16),
    ];
    frame.render_widget(
        Table::new(rows, widths)
            .header(header)
            .column_spacing(1)
            .block(block),
        area,
    );
}

fn tone_style(theme: &Theme, tone: Tone) -> Style {
    match tone {
        Tone::Heading => theme.style(Role::Header),
        Tone::Plain => Style::default(),
        Tone::Good => theme.style(Role::Good),
        Tone::Warn => theme.style(Role::Warn),
        Tone::Bad => theme.style(Role::Error),
    }
}

/// The block shown while a list loads, or when the store holds none.
fn empty_list(
    frame: &mut Frame<'_>,
    area: Rect,
    theme: &Theme,
    title: &str,
    loaded: bool,
    loading: bool,
    empty: &str,
) {
    if loaded {
        frame.render_widget(
            Paragraph::new(Text::from(empty.to_string()))
                .wrap(Wrap { trim: false })
                .block(theme.block(format!(" {title} (none) "), true)),
            area,
        );
    } else {
        let text = if loading { "Loading..." } else { "" };
        frame.render_widget(
            Paragraph::new(text).block(theme.block(format!(" {title} "), true)),
            area,
        );
    }
}

fn render_patterns(frame: &mut Frame<'_>, area: Rect, state: &AppState, theme: &Theme) {
    let patterns = &state.patterns;
    let items = match patterns.items.as_ref() {
        Some(items) if !items.is_empty() => items,
        other => {
            return empty_list(
                frame,
                area,
                theme,
                "Patterns",
                other.is_some(),
                state.is_loading(Slot::Patterns),
                "No patterns in this store yet. `chainweaver mine` finds the tool sequences agents repeat and stores them here.",
            );
        }
    };
    let left_width = ((u32::from(area.width) * 11 / 20) as u16).clamp(24.min(area.width), 72);
    let [left, right] =
        Layout::horizontal([Constraint::Length(left_width), Constraint::Fill(1)]).areas(area);
    let block = theme.block(format!(" Patterns {} ", items.len()), true);
    let inner = block.inner(left);
    frame.render_widget(block, left);
    let height = usize::from(inner.height);
    let first = window(&patterns.scroll, patterns.cursor, height, items.len());
    let mut lines = Vec::new();
    for (i, pattern) in items.iter().enumerate().skip(first).take(height) {
        let selected = i == patterns.cursor;
        let support = format!(" x{}", pattern.support);
        let room = usize::from(inner.width).saturating_sub(1 + support.chars().count());
        let flow = fit_flow(&pattern_labels(pattern), room, theme.ascii);
        let style = if selected {
            theme.style(Role::Selected)
        } else {
            Style::default()
        };
        lines.push(Line::from(vec![
            Span::styled(
                format!("{}{flow}", if selected { theme.selector() } else { " " }),
                style,
            ),
            Span::styled(support, theme.style(Role::Dim)),
        ]));
    }
    frame.render_widget(Paragraph::new(lines), inner);

    let Some(pattern) = patterns.selected() else {
        return;
    };
    let title = format!(
        " pattern {}{}",
        patterns.cursor + 1,
        if patterns.raw { " (raw) " } else { " " }
    );
    let block = theme.block(title, false);
    let paragraph = if patterns.raw {
        let value = serde_json::to_value(pattern).unwrap_or_default();
        Paragraph::new(
            raw_lines(&value, 5_000)
                .into_iter()
                .map(Line::from)
                .collect::<Vec<_>>(),
        )
    } else {
        Paragraph::new(
            pattern_summary(pattern)
                .into_iter()
                .map(|l| Line::styled(l.text, tone_style(theme, l.tone)))
                .collect::<Vec<_>>(),
        )
        .wrap(Wrap { trim: false })
    };
    frame.render_widget(paragraph.block(block), right);
}

/// Widths of the Candidates table's columns after the flow.
const CANDIDATE_COLUMNS: [u16; 5] = [7, 8, 7, 6, 7];

fn render_candidates(frame: &mut Frame<'_>, area: Rect, state: &AppState, theme: &Theme) {
    let candidates = &state.candidates;
    let items = match candidates.items.as_ref() {
        Some(items) if !items.is_empty() => items,
        other => {
            return empty_list(
                frame,
                area,
                theme,
                "Candidates",
                other.is_some(),
                state.is_loading(Slot::Candidates),
                "No candidates in this store yet. `chainweaver mine` proposes candidate flows; `chainweaver verify` replays them and records verdicts.",
            );
        }
    };
    let verified = items
        .iter()
        .filter(|c| {
            state
                .verdict_of(&c.id)
                .is_some_and(|v| v.status == VerdictStatus::Verified)
        })
        .count();
    let title = format!(
        " Candidates {}{}{verified} verified{}best first ",
        items.len(),
        theme.dot(),
        theme.dot()
    );
    let block = theme
        .block(title, true)
        .title_bottom(" Exact: replays matching their recording; Saved: round trips saved ");
    // Borders, the selector column and one space between columns.
    let fixed: u16 =
        CANDIDATE_COLUMNS.iter().sum::<u16>() + 2 + 1 + CANDIDATE_COLUMNS.len() as u16 + 1;
    let flow_width = usize::from(area.width.saturating_sub(fixed)).max(8);
    let height = usize::from(area.height.saturating_sub(3));
    let first = window(&candidates.scroll, candidates.cursor, height, items.len());
    let header = Row::new(vec![
        Cell::from(""),
        Cell::from("Flow"),
        Cell::from("Support"),
        Cell::from("Verdict"),
        Cell::from("Exact"),
        Cell::from("Saved"),
        Cell::from("Score"),
    ])
    .style(theme.style(Role::Header));
    let rows: Vec<Row<'_>> = items
        .iter()
        .enumerate()
        .skip(first)
        .take(height)
        .map(|(i, candidate)| {
            let selected = i == candidates.cursor;
            let verdict = state.verdict_of(&candidate.id);
            let (status, tone) = verdict_cell(verdict);
            let evidence = &candidate.evidence;
            let row = Row::new(vec![
                Cell::from(if selected { theme.selector() } else { " " }),
                Cell::from(fit_flow(&flow_labels(candidate), flow_width, theme.ascii)),
                Cell::from(format_count(evidence.support as u64)),
                Cell::from(status).style(tone_style(theme, tone)),
                Cell::from(exact_cell(verdict)),
                Cell::from(format_count(evidence.round_trips_saved as u64)),
                Cell::from(format!("{:.2}", evidence.score)),
            ]);
            if selected {
                row.style(theme.style(Role::Selected))
            } else {
                row
            }
        })
        .collect();
    let mut widths = vec![Constraint::Length(1), Constraint::Fill(1)];
    widths.extend(CANDIDATE_COLUMNS.iter().map(|w| Constraint::Length(*w)));
    frame.render_widget(
        Table::new(rows, widths)
            .header(header)
            .column_spacing(1)
            .block(block),
        area,
    );
}

/// A line cut into rows of at most `width` characters, at a space when one is near the end;
/// continuation rows are indented.
fn wrap_rows(text: &str, width: usize) -> Vec<String> {
    const INDENT: &str = "      ";
    let width = width.max(2 * INDENT.len());
    let mut rest: Vec<char> = text.chars().collect();
    let mut rows = Vec::new();
    let mut room = width;
    while rest.len() > room {
        let cut = rest[..room]
            .iter()
            .rposition(|c| *c == ' ')
            .filter(|at| *at > room / 2)
            .unwrap_or(room);
        let row: String = rest[..cut].iter().collect();
        rows.push(row);
        let skip = if rest.get(cut) == Some(&' ') { 1 } else { 0 };
        rest.drain(..cut + skip);
        room = width - INDENT.len();
    }
    let last: String = rest.into_iter().collect();
    rows.push(last);
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            if i == 0 {
                row.clone()
            } else {
                format!("{INDENT}{row}")
            }
        })
        .collect()
}

fn render_candidate(frame: &mut Frame<'_>, area: Rect, state: &AppState, theme: &Theme) {
    let view = &state.candidate;
    let id = escape_line(view.id.as_deref().unwrap_or(""), 80);
    let mode = if view.raw { "raw JSON" } else { "review" };
    let block = theme.block(format!(" Candidate {id}{}{mode} ", theme.dot()), true);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let texts: Vec<(String, Style, bool)> = if view.raw {
        view.raw_lines
            .iter()
            .map(|l| (l.clone(), Style::default(), false))
            .collect()
    } else {
        view.lines
            .iter()
            .map(|l| (l.text.clone(), tone_style(theme, l.tone), l.jump.is_some()))
            .collect()
    };
    if texts.is_empty() {
        let text = if state.is_loading(Slot::Candidates) {
            "Loading..."
        } else {
            "This candidate is no longer in the store (R reloads)."
        };
        frame.render_widget(Paragraph::new(text), inner);
        return;
    }
    let width = usize::from(inner.width).saturating_sub(2);
    let mut rows: Vec<(usize, String)> = Vec::new();
    for (i, (text, _, _)) in texts.iter().enumerate() {
        rows.extend(wrap_rows(text, width).into_iter().map(|r| (i, r)));
    }
    let cursor_row = rows.iter().position(|(i, _)| *i == view.line).unwrap_or(0);
    let cursor_rows = rows.iter().filter(|(i, _)| *i == view.line).count();
    let height = usize::from(inner.height);
    // Keep the whole cursor line in view: its last row, then its first.
    window(
        &view.scroll,
        cursor_row + cursor_rows.saturating_sub(1),
        height,
        rows.len(),
    );
    let first = window(&view.scroll, cursor_row, height, rows.len());
    let lines: Vec<Line<'_>> = rows
        .iter()
        .skip(first)
        .take(height)
        .map(|(i, text)| {
            let (_, style, jumps) = &texts[*i];
            let on = *i == view.line;
            let marker = if on && *jumps { theme.selector() } else { " " };
            let style = if on {
                style.patch(theme.style(Role::Selected))
            } else {
                *style
            };
            Line::styled(format!("{marker} {text}"), style)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}
