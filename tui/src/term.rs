//! The imperative shell: the real terminal, its events, the clipboard, and restoring the
//! terminal on every way out (return, error, panic).

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, select};
use crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, KeyEventKind, MouseEventKind,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

use crate::TuiOptions;
use crate::app::{Action, Effect};
use crate::browser::Browser;
use crate::error::TuiError;
use crate::keymap::Key;
use crate::ui::{Theme, render};

/// Larger selections are not sent through OSC 52 (terminals cap it); they go to the file only.
const OSC52_MAX_BYTES: usize = 100_000;

/// Put the terminal back the way the shell expects it. Safe to call more than once.
fn restore_terminal() {
    let _ = disable_raw_mode();
    let _ = execute!(
        io::stdout(),
        DisableMouseCapture,
        LeaveAlternateScreen,
        cursor::Show
    );
}

type PanicHook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync + 'static>;

/// A panic hook that runs `restore` before the hook that was installed before it; dropping the
/// guard puts that earlier hook back.
struct PanicHookGuard {
    previous: Arc<Mutex<Option<PanicHook>>>,
}

impl PanicHookGuard {
    fn install(restore: fn()) -> Self {
        let previous: Arc<Mutex<Option<PanicHook>>> =
            Arc::new(Mutex::new(Some(std::panic::take_hook())));
        let for_hook = Arc::clone(&previous);
        std::panic::set_hook(Box::new(move |info| {
            restore();
            if let Ok(guard) = for_hook.lock()
                && let Some(hook) = guard.as_ref()
            {
                hook(info);
            }
        }));
        Self { previous }
    }
}

impl Drop for PanicHookGuard {
    fn drop(&mut self) {
        let original = self.previous.lock().ok().and_then(|mut g| g.take());
        if let Some(original) = original {
            let _ = std::panic::take_hook();
            std::panic::set_hook(original);
        }
    }
}

/// Raw mode, the alternate screen and mouse capture for as long as it lives, with a panic hook
/// that restores the terminal before the panic message is printed.
struct TerminalSession {
    _hook: PanicHookGuard,
}

impl TerminalSession {
    fn enter(mouse: bool) -> Result<Self, TuiError> {
        let session = Self {
            _hook: PanicHookGuard::install(restore_terminal),
        };
        enable_raw_mode().map_err(TuiError::terminal("entering raw mode"))?;
        execute!(io::stdout(), EnterAlternateScreen, cursor::Hide)
            .map_err(TuiError::terminal("entering the alternate screen"))?;
        if mouse {
            execute!(io::stdout(), EnableMouseCapture)
                .map_err(TuiError::terminal("enabling the mouse"))?;
        }
        Ok(session)
    }
}

impl Drop for TerminalSession {
    fn drop(&mut self) {
        // Runs before the hook guard (a field) puts the original panic hook back.
        restore_terminal();
    }
}

/// Terminal events on a channel, read by a thread that stops when `stop` is set.
fn spawn_input_thread(stop: Arc<AtomicBool>) -> Result<Receiver<Event>, TuiError> {
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("chainweaver-tui-input".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match event::poll(Duration::from_millis(100)) {
                    Ok(true) => match event::read() {
                        Ok(ev) => {
                            if tx.send(ev).is_err() {
                                return;
                            }
                        }
                        Err(_) => return,
                    },
                    Ok(false) => {}
                    Err(_) => return,
                }
            }
        })
        .map_err(TuiError::terminal("starting the input thread"))?;
    Ok(rx)
}

/// The action a terminal event stands for.
fn action_for_event(browser: &Browser, ev: Event) -> Vec<Action> {
    match ev {
        Event::Key(key) if key.kind != KeyEventKind::Release => Key::from_event(&key)
            .and_then(|k| crate::app::action_for_key(&browser.state, k))
            .into_iter()
            .collect(),
        Event::Mouse(mouse) => match mouse.kind {
            MouseEventKind::ScrollUp => vec![Action::Scroll(-1)],
            MouseEventKind::ScrollDown => vec![Action::Scroll(1)],
            _ => Vec::new(),
        },
        Event::Resize(columns, rows) => vec![Action::Resize(columns, rows)],
        Event::Paste(text) => text.chars().map(Action::Type).collect(),
        _ => Vec::new(),
    }
}

/// Standard base64 (for OSC 52).
pub fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(TABLE[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The OSC 52 sequence that asks the terminal to put `text` on the clipboard.
pub fn osc52(text: &str) -> String {
    format!("\x1b]52;c;{}\x07", base64(text.as_bytes()))
}

/// Where a copied selection is saved as well.
pub fn copy_file(options: &TuiOptions) -> PathBuf {
    options
        .copy_file
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("chainweaver-tui-selection.json"))
}

fn copy<W: Write>(out: &mut W, options: &TuiOptions, label: &str, json: &str) -> Action {
    let file = copy_file(options);
    let saved = std::fs::write(&file, json);
    let sent = json.len() <= OSC52_MAX_BYTES
        && out
            .write_all(osc52(json).as_bytes())
            .and_then(|()| out.flush())
            .is_ok();
    let size = crate::ui::format_count(json.len() as u64);
    match (sent, saved) {
        (true, Ok(())) => Action::Notice {
            text: format!(
                "copied {label} ({size} bytes) via OSC 52; also saved to {}",
                file.display()
            ),
            error: false,
        },
        (false, Ok(())) => Action::Notice {
            text: format!(
                "{label} ({size} bytes) saved to {} (too large for the terminal clipboard)",
                file.display()
            ),
            error: false,
        },
        (true, Err(e)) => Action::Notice {
            text: format!(
                "copied {label} via OSC 52; saving {} failed: {e}",
                file.display()
            ),
            error: true,
        },
        (false, Err(e)) => Action::Notice {
            text: format!(
                "could not copy {label}: saving {} failed: {e}",
                file.display()
            ),
            error: true,
        },
    }
}

/// Run the browser in the terminal until the reader quits.
pub(crate) fn run_terminal(
    browser_store: Box<dyn chainweaver_recorder::store::TraceStore>,
    label: String,
    options: &TuiOptions,
) -> Result<(), TuiError> {
    let theme = Theme {
        ascii: options.ascii,
        color: !options.no_color,
    };
    let session = TerminalSession::enter(!options.no_mouse)?;
    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))
        .map_err(TuiError::terminal("starting the terminal"))?;
    let size = terminal
        .size()
        .map_err(TuiError::terminal("reading the terminal size"))?;
    let mut browser = Browser::new(browser_store, label, (size.width, size.height))
        .map_err(TuiError::terminal("starting the store worker"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let events = spawn_input_thread(Arc::clone(&stop))?;
    let result = (|| -> Result<(), TuiError> {
        loop {
            terminal
                .draw(|frame| render(frame, &browser.state, &theme))
                .map_err(TuiError::terminal("drawing"))?;
            let mut actions = Vec::new();
            select! {
                recv(events) -> ev => match ev {
                    Ok(ev) => actions.extend(action_for_event(&browser, ev)),
                    Err(_) => return Ok(()),
                },
                recv(browser.responses()) -> response => {
                    if let Ok(response) = response {
                        actions.push(Action::Loaded(response));
                    }
                }
            }
            // Apply everything already waiting before drawing again.
            let mut pending_actions = actions;
            loop {
                for action in pending_actions.drain(..) {
                    for effect in browser.apply(action) {
                        match effect {
                            Effect::Quit => return Ok(()),
                            Effect::Copy { label, json } => {
                                let notice = copy(terminal.backend_mut(), options, &label, &json);
                                browser.apply(notice);
                            }
                            Effect::Query(_) => {}
                        }
                    }
                }
                if let Ok(ev) = events.try_recv() {
                    pending_actions.extend(action_for_event(&browser, ev));
                } else if let Ok(response) = browser.responses().try_recv() {
                    pending_actions.push(Action::Loaded(response));
                } else {
                    break;
                }
            }
        }
    })();
    stop.store(true, Ordering::Relaxed);
    drop(session);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    static RESTORED: AtomicBool = AtomicBool::new(false);

    fn note_restore() {
        RESTORED.store(true, Ordering::SeqCst);
    }

    #[test]
    fn a_panic_runs_the_restore_before_the_panic_is_reported() {
        let guard = PanicHookGuard::install(note_restore);
        let outcome = std::panic::catch_unwind(|| panic!("deliberate panic in a test"));
        assert!(outcome.is_err());
        assert!(RESTORED.load(Ordering::SeqCst), "restore ran from the hook");
        drop(guard);
        RESTORED.store(false, Ordering::SeqCst);
        let _ = std::panic::catch_unwind(|| panic!("deliberate panic after the guard"));
        assert!(
            !RESTORED.load(Ordering::SeqCst),
            "the original hook is back once the guard is dropped"
        );
    }

    #[test]
    fn base64_matches_the_standard_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
        assert_eq!(osc52("hi"), "\x1b]52;c;aGk=\x07");
    }

    #[test]
    fn copy_writes_osc52_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let options = TuiOptions {
            copy_file: Some(dir.path().join("sel.json")),
            ..TuiOptions::default()
        };
        let mut out = Vec::new();
        let notice = copy(&mut out, &options, "step 1", "{\"a\": 1}");
        assert_eq!(out, osc52("{\"a\": 1}").into_bytes());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("sel.json")).unwrap(),
            "{\"a\": 1}"
        );
        assert!(matches!(notice, Action::Notice { error: false, .. }));
        let big = "x".repeat(OSC52_MAX_BYTES + 1);
        let mut out = Vec::new();
        let notice = copy(&mut out, &options, "big", &big);
        assert!(out.is_empty(), "too large for OSC 52");
        let Action::Notice { text, .. } = notice else {
            panic!()
        };
        assert!(text.contains("too large"), "{text}");
    }
}
