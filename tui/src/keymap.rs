//! The keymap as data: every binding is a (command, keys, context, description) row. The hint
//! bar, the `?` help overlay and `keymap.md` are all drawn from [`KEYMAP`], so they cannot drift
//! from what the keys do.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key asks for. [`crate::app::update`] gives each its meaning in the current view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    Quit,
    Help,
    NextView,
    PrevView,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Open,
    Back,
    Filter,
    ClearFilter,
    Jump,
    Copy,
    Refresh,
    SortNext,
    SortReverse,
    Mark,
    Compare,
    FocusPayload,
    FocusSteps,
    ToggleFold,
    ToggleRaw,
    ExpandAll,
    CollapseAll,
    Submit,
    Cancel,
    DeleteChar,
    ClearLine,
}

/// One key as the keymap names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    Char(char),
    Ctrl(char),
    Up,
    Down,
    Left,
    Right,
    Enter,
    Esc,
    Tab,
    BackTab,
    PageUp,
    PageDown,
    Home,
    End,
    Backspace,
}

impl Key {
    /// The key from a terminal key event, if the keymap can name it.
    pub fn from_event(event: &KeyEvent) -> Option<Key> {
        let ctrl = event.modifiers.contains(KeyModifiers::CONTROL);
        Some(match event.code {
            KeyCode::Char(c) if ctrl => Key::Ctrl(c.to_ascii_lowercase()),
            KeyCode::Char(c) => Key::Char(c),
            KeyCode::Up => Key::Up,
            KeyCode::Down => Key::Down,
            KeyCode::Left => Key::Left,
            KeyCode::Right => Key::Right,
            KeyCode::Enter => Key::Enter,
            KeyCode::Esc => Key::Esc,
            KeyCode::Tab => Key::Tab,
            KeyCode::BackTab => Key::BackTab,
            KeyCode::PageUp => Key::PageUp,
            KeyCode::PageDown => Key::PageDown,
            KeyCode::Home => Key::Home,
            KeyCode::End => Key::End,
            KeyCode::Backspace => Key::Backspace,
            _ => return None,
        })
    }

    /// How help and hints spell the key.
    pub fn label(&self) -> String {
        match self {
            Key::Char(' ') => "Space".into(),
            Key::Char(c) => c.to_string(),
            Key::Ctrl(c) => format!("Ctrl-{c}"),
            Key::Up => "Up".into(),
            Key::Down => "Down".into(),
            Key::Left => "Left".into(),
            Key::Right => "Right".into(),
            Key::Enter => "Enter".into(),
            Key::Esc => "Esc".into(),
            Key::Tab => "Tab".into(),
            Key::BackTab => "Shift-Tab".into(),
            Key::PageUp => "PgUp".into(),
            Key::PageDown => "PgDn".into(),
            Key::Home => "Home".into(),
            Key::End => "End".into(),
            Key::Backspace => "Backspace".into(),
        }
    }
}

/// Where a binding applies. Global bindings apply in every view unless the view binds the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Context {
    Global,
    Traces,
    Detail,
    Compare,
    Tools,
    Patterns,
    Candidates,
    /// One candidate opened from the Candidates table.
    Candidate,
    /// The filter (`/`) and jump (`:`) line while it is being edited.
    Input,
}

impl Context {
    /// The heading help and `keymap.md` give the context.
    pub fn title(&self) -> &'static str {
        match self {
            Context::Global => "Everywhere",
            Context::Traces => "Traces",
            Context::Detail => "Trace detail",
            Context::Compare => "Compare",
            Context::Tools => "Tools",
            Context::Patterns => "Patterns",
            Context::Candidates => "Candidates",
            Context::Candidate => "Candidate",
            Context::Input => "Filter and jump line",
        }
    }

    /// Every context in the order help lists them.
    pub const ALL: [Context; 9] = [
        Context::Global,
        Context::Traces,
        Context::Detail,
        Context::Compare,
        Context::Tools,
        Context::Patterns,
        Context::Candidates,
        Context::Candidate,
        Context::Input,
    ];
}

/// One row of the keymap.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    pub command: Command,
    pub keys: &'static [Key],
    pub context: Context,
    /// What the keys do, for the help.
    pub description: &'static str,
    /// The short word the hint bar shows, when the binding is worth a hint.
    pub hint: Option<&'static str>,
}

const fn bind(
    context: Context,
    command: Command,
    keys: &'static [Key],
    description: &'static str,
    hint: Option<&'static str>,
) -> Binding {
    Binding {
        command,
        keys,
        context,
        description,
        hint,
    }
}

use Command as C;
use Context as X;
use Key as K;

/// Every binding of the browser.
pub const KEYMAP: &[Binding] = &[
    bind(
        X::Global,
        C::Up,
        &[K::Char('k'), K::Up],
        "Move up",
        Some("move"),
    ),
    bind(
        X::Global,
        C::Down,
        &[K::Char('j'), K::Down],
        "Move down",
        None,
    ),
    bind(
        X::Global,
        C::PageUp,
        &[K::PageUp, K::Ctrl('b')],
        "Page up",
        None,
    ),
    bind(
        X::Global,
        C::PageDown,
        &[K::PageDown, K::Ctrl('f')],
        "Page down",
        None,
    ),
    bind(
        X::Global,
        C::Top,
        &[K::Char('g'), K::Home],
        "Go to the first row",
        None,
    ),
    bind(
        X::Global,
        C::Bottom,
        &[K::Char('G'), K::End],
        "Go to the last row",
        None,
    ),
    bind(
        X::Global,
        C::Open,
        &[K::Enter],
        "Open the selection",
        Some("open"),
    ),
    bind(
        X::Global,
        C::Back,
        &[K::Esc],
        "Go back, close help or clear the status",
        None,
    ),
    bind(
        X::Global,
        C::NextView,
        &[K::Tab],
        "Next view (Traces, Tools, Patterns, Candidates)",
        Some("view"),
    ),
    bind(X::Global, C::PrevView, &[K::BackTab], "Previous view", None),
    bind(
        X::Global,
        C::Filter,
        &[K::Char('/')],
        "Edit the trace filter, e.g. `tool=get_order error dur>2s`",
        Some("filter"),
    ),
    bind(
        X::Global,
        C::Jump,
        &[K::Char(':')],
        "Jump: `:trace ID`, `:traces`, `:tools`, `:patterns`, `:candidates`, `:q`",
        Some("jump"),
    ),
    bind(
        X::Global,
        C::Copy,
        &[K::Char('y')],
        "Copy the selection as JSON (OSC 52, also saved to a file)",
        Some("copy"),
    ),
    bind(
        X::Global,
        C::Refresh,
        &[K::Char('R')],
        "Reload the view from the store",
        None,
    ),
    bind(
        X::Global,
        C::Help,
        &[K::Char('?')],
        "Show or hide this help",
        Some("help"),
    ),
    bind(
        X::Global,
        C::Quit,
        &[K::Char('q'), K::Ctrl('c')],
        "Quit",
        Some("quit"),
    ),
    bind(
        X::Traces,
        C::SortNext,
        &[K::Char('s')],
        "Sort by the next column",
        Some("sort"),
    ),
    bind(
        X::Traces,
        C::SortReverse,
        &[K::Char('S')],
        "Reverse the sort order",
        None,
    ),
    bind(
        X::Traces,
        C::ClearFilter,
        &[K::Char('x')],
        "Clear the filter",
        None,
    ),
    bind(
        X::Traces,
        C::Mark,
        &[K::Char('m')],
        "Mark the trace for comparison (two marks compare)",
        Some("mark"),
    ),
    bind(
        X::Traces,
        C::Compare,
        &[K::Char('c')],
        "Compare the two marked traces side by side",
        None,
    ),
    bind(
        X::Detail,
        C::FocusPayload,
        &[K::Char('l'), K::Right],
        "Focus the step's inputs and outputs",
        Some("payload"),
    ),
    bind(
        X::Detail,
        C::FocusSteps,
        &[K::Char('h'), K::Left],
        "Focus the step list",
        None,
    ),
    bind(
        X::Detail,
        C::ToggleFold,
        &[K::Char(' ')],
        "Fold or unfold the JSON node",
        Some("fold"),
    ),
    bind(
        X::Detail,
        C::ToggleRaw,
        &[K::Char('r')],
        "Switch between the JSON tree and raw JSON",
        Some("raw"),
    ),
    bind(
        X::Detail,
        C::ExpandAll,
        &[K::Char('E')],
        "Unfold every JSON node",
        None,
    ),
    bind(
        X::Detail,
        C::CollapseAll,
        &[K::Char('C')],
        "Fold every JSON node",
        None,
    ),
    bind(
        X::Detail,
        C::Mark,
        &[K::Char('m')],
        "Mark this trace for comparison",
        Some("mark"),
    ),
    bind(
        X::Detail,
        C::Compare,
        &[K::Char('c')],
        "Compare the two marked traces",
        None,
    ),
    bind(
        X::Compare,
        C::Mark,
        &[K::Char('m')],
        "Clear both marks",
        None,
    ),
    bind(
        X::Tools,
        C::Open,
        &[K::Enter],
        "Show the traces calling the tool",
        Some("traces"),
    ),
    bind(
        X::Patterns,
        C::ToggleRaw,
        &[K::Char('r')],
        "Switch between the summary and the pattern's raw JSON",
        Some("raw"),
    ),
    bind(
        X::Candidates,
        C::Open,
        &[K::Enter],
        "Open the candidate: its bindings, verdict and replay differences",
        Some("open"),
    ),
    bind(
        X::Candidate,
        C::Open,
        &[K::Enter],
        "On a replay difference: open its trace at the differing step (Esc comes back)",
        Some("trace"),
    ),
    bind(
        X::Candidate,
        C::ToggleRaw,
        &[K::Char('r')],
        "Switch between the review and the candidate's raw JSON",
        Some("raw"),
    ),
    bind(X::Input, C::Submit, &[K::Enter], "Apply the line", None),
    bind(X::Input, C::Cancel, &[K::Esc], "Cancel editing", None),
    bind(
        X::Input,
        C::DeleteChar,
        &[K::Backspace],
        "Delete the last character",
        None,
    ),
    bind(
        X::Input,
        C::ClearLine,
        &[K::Ctrl('u')],
        "Clear the line",
        None,
    ),
    bind(X::Input, C::Quit, &[K::Ctrl('c')], "Quit", None),
];

/// The command `key` means in `context`, falling back to the global bindings.
pub fn lookup(context: Context, key: Key) -> Option<Command> {
    let find = |ctx: Context| {
        KEYMAP
            .iter()
            .find(|b| b.context == ctx && b.keys.contains(&key))
            .map(|b| b.command)
    };
    if context == Context::Input {
        return find(Context::Input);
    }
    find(context).or_else(|| find(Context::Global))
}

/// The hint bar's entries for `context`: `(keys, word)`, view bindings first.
pub fn hints(context: Context) -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = Vec::new();
    let mut push = |b: &Binding| {
        if let Some(word) = b.hint {
            let keys = match b.command {
                // The move hint covers both directions.
                Command::Up => "j/k".to_string(),
                _ => b.keys.first().map(Key::label).unwrap_or_default(),
            };
            out.push((keys, word));
        }
    };
    let leading = |b: &&Binding| {
        b.context == Context::Global && matches!(b.command, Command::Up | Command::Open)
    };
    let is_shadowed = |b: &Binding| {
        KEYMAP
            .iter()
            .any(|v| v.context == context && v.keys.iter().any(|k| b.keys.contains(k)))
    };
    // Moving and opening first, then what the view adds, then the rest.
    if context != Context::Input {
        for b in KEYMAP.iter().filter(leading) {
            if !is_shadowed(b) {
                push(b);
            }
        }
    }
    for b in KEYMAP.iter().filter(|b| b.context == context) {
        push(b);
    }
    if context != Context::Input {
        for b in KEYMAP
            .iter()
            .filter(|b| b.context == Context::Global && !leading(b))
        {
            if !is_shadowed(b) {
                push(b);
            }
        }
    }
    out
}

/// Help rows for one context: `(keys joined, description)`.
pub fn help_rows(context: Context) -> Vec<(String, &'static str)> {
    KEYMAP
        .iter()
        .filter(|b| b.context == context)
        .map(|b| {
            let keys: Vec<String> = b.keys.iter().map(Key::label).collect();
            (keys.join(", "), b.description)
        })
        .collect()
}

/// The keymap as Markdown, as committed in `tui/keymap.md`.
pub fn help_markdown() -> String {
    let mut out = String::from(
        "# chainweaver tui: keys\n\n\
         Generated from the keymap in `tui/src/keymap.rs`; a test fails when this file drifts.\n\
         Mouse wheel scrolls. `--ascii` (or `CHAINWEAVER_ASCII=1`) draws without box-drawing\n\
         characters or other symbols.\n",
    );
    for context in Context::ALL {
        out.push_str(&format!(
            "\n## {}\n\n| Keys | Action |\n| --- | --- |\n",
            context.title()
        ));
        for (keys, description) in help_rows(context) {
            let keys = keys
                .split(", ")
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ");
            out.push_str(&format!(
                "| {keys} | {} |\n",
                description.replace('|', "\\|")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_bindings_shadow_global_ones() {
        assert_eq!(lookup(Context::Tools, Key::Enter), Some(Command::Open));
        assert_eq!(
            lookup(Context::Detail, Key::Char('r')),
            Some(Command::ToggleRaw)
        );
        assert_eq!(lookup(Context::Traces, Key::Char('r')), None);
        assert_eq!(
            lookup(Context::Traces, Key::Char('R')),
            Some(Command::Refresh)
        );
        assert_eq!(lookup(Context::Detail, Key::Down), Some(Command::Down));
        assert_eq!(lookup(Context::Input, Key::Char('q')), None, "q is typed");
        assert_eq!(lookup(Context::Input, Key::Enter), Some(Command::Submit));
    }

    #[test]
    fn no_key_is_bound_twice_in_one_context() {
        for context in Context::ALL {
            let mut seen = Vec::new();
            for b in KEYMAP.iter().filter(|b| b.context == context) {
                for key in b.keys {
                    assert!(!seen.contains(key), "{key:?} bound twice in {context:?}");
                    seen.push(*key);
                }
            }
        }
    }

    #[test]
    fn hints_follow_the_view() {
        let traces: Vec<&str> = hints(Context::Traces).iter().map(|h| h.1).collect();
        assert!(
            traces.contains(&"sort") && traces.contains(&"quit"),
            "{traces:?}"
        );
        let detail: Vec<&str> = hints(Context::Detail).iter().map(|h| h.1).collect();
        assert!(
            detail.contains(&"raw") && !detail.contains(&"sort"),
            "{detail:?}"
        );
    }
}
