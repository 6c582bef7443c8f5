//! Printing results: aligned text tables for people, JSON for scripts.

use std::io::{self, Write};

use serde::Serialize;

use super::{Global, OutputFormat};

/// A plain text table: a header row and data rows, columns padded to their widest cell.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    right_aligned: Vec<bool>,
}

impl Table {
    /// Columns named in `header`; a name starting with `>` is right-aligned (numbers).
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header
                .iter()
                .map(|h| h.trim_start_matches('>').to_string())
                .collect(),
            right_aligned: header.iter().map(|h| h.starts_with('>')).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, one line a row, no trailing spaces.
    pub fn render(&self) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let mut line = |cells: &[String]| {
            let mut text = String::new();
            for (i, cell) in cells.iter().enumerate().take(columns) {
                if i > 0 {
                    text.push_str("  ");
                }
                let pad = widths[i].saturating_sub(cell.chars().count());
                if self.right_aligned[i] {
                    text.push_str(&" ".repeat(pad));
                    text.push_str(cell);
                } else {
                    text.push_str(cell);
                    text.push_str(&" ".repeat(pad));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(&self.header);
        for row in &self.rows {
            line(row);
        }
        out
    }
}

/// Print `value` as pretty JSON when `--format json`, else print `table()`'s text.
pub fn emit<T: Serialize>(
    global: &Global,
    value: &T,
    table: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    match global.format {
        OutputFormat::Json => {
            serde_json::to_writer_pretty(&mut stdout, value)?;
            writeln!(stdout)?;
        }
        OutputFormat::Table => write!(stdout, "{}", table())?,
    }
    Ok(())
}

/// Whether a command failed writing its output to a reader that went away (`... | head -1`).
///
/// A broken pipe anywhere in the error's chain counts (store writers wrap their write errors),
/// except under a library error: there the pipe is one the library talked to, such as a
/// command tool that closed its stdin, and that is a real failure.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    let from_library = err
        .chain()
        .any(|cause| cause.downcast_ref::<chainweaver::Error>().is_some());
    !from_library && err.chain().any(is_broken_pipe_cause)
}

fn is_broken_pipe_cause(cause: &(dyn std::error::Error + 'static)) -> bool {
    if let Some(err) = cause.downcast_ref::<io::Error>() {
        // `io::Error::other(inner)` hides `inner` from the chain: look inside.
        return err.kind() == io::ErrorKind::BrokenPipe
            || err
                .get_ref()
                .is_some_and(|inner| is_broken_pipe_cause(inner));
    }
    cause
        .downcast_ref::<serde_json::Error>()
        .and_then(serde_json::Error::io_error_kind)
        == Some(io::ErrorKind::BrokenPipe)
}

/// A duration in milliseconds for people: `850ms`, `2.4s`, `3m12s`.
pub fn human_ms(ms: Option<f64>) -> String {
    match ms {
        None => "-".to_string(),
        Some(ms) if ms < 1000.0 => format!("{ms:.0}ms"),
        Some(ms) if ms < 60_000.0 => format!("{:.1}s", ms / 1000.0),
        Some(ms) => format!(
            "{}m{:02}s",
            (ms / 60_000.0) as u64,
            ((ms % 60_000.0) / 1000.0) as u64
        ),
    }
}

/// A JSON value on one line, cut to `max` characters.
pub fn one_line(value: &serde_json::Value, max: usize) -> String {
    let text = value.to_string();
    if text.chars().count() <= max {
        text
    } else {
        let cut: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_pads_and_right_aligns() {
        let mut table = Table::new(&["tool", ">calls"]);
        table.row(vec!["get_user".into(), "7".into()]);
        table.row(vec!["x".into(), "1200".into()]);
        assert_eq!(
            table.render(),
            "tool      calls\nget_user      7\nx          1200\n"
        );
    }

    #[test]
    fn only_the_commands_own_write_errors_count_as_a_closed_output() {
        let pipe = || io::Error::from(io::ErrorKind::BrokenPipe);
        assert!(is_broken_pipe(&anyhow::Error::from(pipe())));
        assert!(is_broken_pipe(
            &anyhow::Error::from(pipe()).context("writing")
        ));
        let json = || serde_json::to_writer(ClosedPipe, &[1, 2]).unwrap_err();
        assert!(is_broken_pipe(&anyhow::Error::from(json())));
        let wrapped = chainweaver::recorder::RecorderError::Io {
            path: "-".into(),
            source: io::Error::other(json()),
        };
        assert!(is_broken_pipe(&anyhow::Error::from(wrapped)));
        let other = io::Error::from(io::ErrorKind::PermissionDenied);
        assert!(!is_broken_pipe(&anyhow::Error::from(other)));
        let tool = chainweaver::Error::Io {
            path: "tool".into(),
            source: pipe(),
        };
        assert!(!is_broken_pipe(&anyhow::Error::from(tool)));
    }

    /// A writer whose reader is gone.
    struct ClosedPipe;

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_ms(None), "-");
        assert_eq!(human_ms(Some(850.0)), "850ms");
        assert_eq!(human_ms(Some(2400.0)), "2.4s");
        assert_eq!(human_ms(Some(192_000.0)), "3m12s");
    }
}
