//! Opening the store named by `--store`, with errors that say what to do.

use std::path::Path;

use anyhow::Context;
use chainweaver_recorder::model::Timestamp;
use chainweaver_recorder::store::{self, TraceStore};
use chrono::{NaiveDate, TimeZone, Utc};

use super::{Failure, exit};

/// Open (or create) the store at `path`.
pub fn open(path: &Path) -> anyhow::Result<Box<dyn TraceStore>> {
    store::open_store(path).with_context(|| format!("cannot open the store {}", path.display()))
}

/// Whether there is a store at `path` to open without creating one: a local file or folder, or
/// a dataset in object storage (whose opening says when there is none).
pub fn exists(path: &Path) -> bool {
    store::is_object_storage(path) || path.exists()
}

/// Open a store that must already exist (reading commands should not create empty stores).
pub fn open_existing(path: &Path) -> anyhow::Result<Box<dyn TraceStore>> {
    if !exists(path) {
        return Err(Failure {
            code: exit::FAILED,
            message: format!("no store at {}", path.display()),
            hint: Some(
                "import traces first (`chainweaver import FILE`) or name a store with --store"
                    .into(),
            ),
        }
        .into());
    }
    open(path)
}

/// A time on the command line: RFC 3339 (`2026-11-01T12:00:00Z`) or a day (`2026-11-01`, midnight UTC).
pub fn parse_time(text: &str) -> Result<Timestamp, String> {
    if let Ok(time) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(time.with_timezone(&Utc));
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d")
        && let Some(midnight) = day.and_hms_opt(0, 0, 0)
        && let Some(time) = Utc.from_local_datetime(&midnight).single()
    {
        return Ok(time);
    }
    Err(format!(
        "`{text}` is not a time: use 2026-11-01 or 2026-11-01T12:00:00Z"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_days_or_instants() {
        assert_eq!(
            parse_time("2026-11-01").unwrap().to_rfc3339(),
            "2026-11-01T00:00:00+00:00"
        );
        assert_eq!(
            parse_time("2026-11-01T12:30:00+02:00")
                .unwrap()
                .to_rfc3339(),
            "2026-11-01T10:30:00+00:00"
        );
        assert!(parse_time("yesterday").unwrap_err().contains("yesterday"));
    }
}
