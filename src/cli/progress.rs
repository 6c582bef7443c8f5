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
