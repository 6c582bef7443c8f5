//! Progress bars on standard error, only when a person is watching.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Global;

/// A bar counting to `total` (a spinner when `total` is 0), hidden unless stderr is a terminal.
pub fn bar(global: &Global, total: u64, what: &str) -> ProgressBar {
    let bar = if total == 0 {
        ProgressBar::new_spinner()
    } else {
        ProgressBar::new(total)
    };
    if !global.show_progress() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
        return bar;
    }
    let template = if total == 0 {
        "{spinner} {msg} {pos} [{elapsed_precise}]"
    } else {
        "{msg} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}

/// A bar over bytes read.
pub fn bytes_bar(global: &Global, total: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    if !global.show_progress() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
        return bar;
    }
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}

/// The library's progress reports as bars on standard error (hidden unless a person watches);
/// notes are printed as lines unless `--quiet` or `--format json`.
pub struct Bars<'g> {
    global: &'g Global,
    current: std::sync::Mutex<Option<ProgressBar>>,
    warnings: std::sync::Mutex<Vec<String>>,
}

impl<'g> Bars<'g> {
    pub fn new(global: &'g Global) -> Self {
        Self {
            global,
            current: std::sync::Mutex::new(None),
            warnings: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The warnings given so far, for JSON output.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().map(|w| w.clone()).unwrap_or_default()
    }

    fn with(&self, f: impl FnOnce(&ProgressBar)) {
        if let Ok(current) = self.current.lock()
            && let Some(bar) = current.as_ref()
        {
            f(bar);
        }
    }
}

impl chainweaver::pipeline::Progress for Bars<'_> {
    fn begin(&self, what: &str, total: Option<u64>, unit: chainweaver::pipeline::Unit) {
        let bar = match unit {
            chainweaver::pipeline::Unit::Bytes => bytes_bar(self.global, total.unwrap_or(0), what),
            chainweaver::pipeline::Unit::Items => {
                let bar = bar(self.global, total.unwrap_or(0), what);
                if total.is_none() {
                    bar.enable_steady_tick(std::time::Duration::from_millis(120));
                }
                bar
            }
        };
        if let Ok(mut current) = self.current.lock()
            && let Some(old) = current.replace(bar)
        {
            old.finish_and_clear();
        }
    }

    fn position(&self, done: u64) {
        self.with(|bar| bar.set_position(done));
    }

    fn advance(&self) {
        self.with(|bar| bar.inc(1));
    }

    fn end(&self) {
        if let Ok(mut current) = self.current.lock()
            && let Some(bar) = current.take()
        {
            bar.finish_and_clear();
        }
    }

    fn note(&self, text: &str) {
        if !self.global.quiet && self.global.format == super::OutputFormat::Table {
            self.with(|bar| bar.suspend(|| eprintln!("{text}")));
            if self.current.lock().is_ok_and(|c| c.is_none()) {
                eprintln!("{text}");
            }
        }
    }

    fn warn(&self, text: &str) {
        if let Ok(mut warnings) = self.warnings.lock() {
            warnings.push(text.to_owned());
        }
        if !self.global.quiet {
            let text = format!("warning: {text}");
            self.with(|bar| bar.suspend(|| eprintln!("{text}")));
            if self.current.lock().is_ok_and(|c| c.is_none()) {
                eprintln!("{text}");
            }
        }
    }
}
