//! Small helpers the format modules share: excerpts, ids, timestamps, error texts.

use std::io::Write;
use std::path::Path;

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use serde_json::{Map, Value};

use crate::model::Timestamp;

/// How many characters of a bad record a reject keeps.
pub const EXCERPT_CHARS: usize = 200;

/// The file name without its last extension (`runs.json` -> `runs`).
pub fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "import".to_owned())
}

/// The start of some raw bytes as text: invalid UTF-8 replaced, cut at [`EXCERPT_CHARS`].
pub fn excerpt_bytes(bytes: &[u8]) -> String {
    let head = &bytes[..bytes.len().min(EXCERPT_CHARS * 4)];
    truncate_chars(&String::from_utf8_lossy(head), EXCERPT_CHARS)
}

/// The start of a JSON value's text, without serializing all of a large value.
pub fn excerpt_value(value: &Value) -> String {
    let mut writer = BoundedWriter {
        buf: Vec::new(),
        limit: EXCERPT_CHARS * 4,
    };
    // The writer refuses bytes past its limit; the error that causes is expected and harmless.
    let _ = serde_json::to_writer(&mut writer, value);
    excerpt_bytes(&writer.buf)
}

fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

struct BoundedWriter {
    buf: Vec<u8>,
    limit: usize,
}

impl Write for BoundedWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let room = self.limit.saturating_sub(self.buf.len());
        if room == 0 {
            return Err(std::io::Error::other("excerpt is full"));
        }
        let take = room.min(data.len());
        self.buf.extend_from_slice(&data[..take]);
        Ok(take)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The JSON type of a value, for messages ("expected a string, got a number").
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An id given as a string or a number, as text. Empty strings and other types give `None`.
pub fn id_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A required tool name: a non-empty string.
pub fn tool_name(value: Option<&Value>, field: &str) -> Result<String, String> {
    match value {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(format!("`{field}` is empty")),
        Some(other) => Err(format!(
            "`{field}` must be a string, got {}",
            type_name(other)
        )),
        None => Err(format!("missing `{field}`")),
    }
}

/// A timestamp written as RFC 3339 text, as a naive date-time (taken as UTC), or as Unix
/// seconds (milliseconds when the number is too large to be seconds).
pub fn timestamp(value: &Value) -> Option<Timestamp> {
    match value {
        Value::String(text) => {
            let text = text.trim();
            if let Ok(t) = DateTime::parse_from_rfc3339(text) {
                return Some(t.with_timezone(&Utc));
            }
            for pattern in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
                if let Ok(naive) = NaiveDateTime::parse_from_str(text, pattern) {
                    return Some(Utc.from_utc_datetime(&naive));
                }
            }
            None
        }
        Value::Number(n) => {
            let mut seconds = n.as_f64()?;
            if !seconds.is_finite() {
                return None;
            }
            if seconds.abs() > 1e11 {
                seconds /= 1000.0;
            }
            let whole = seconds.floor();
            let nanos = ((seconds - whole) * 1e9).round().clamp(0.0, 999_999_999.0);
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Utc.timestamp_opt(whole as i64, nanos as u32).single()
        }
        _ => None,
    }
}

/// Reads a timestamp field; a value that is present but unreadable is kept in `metadata` under
/// its own name, so nothing the source said is lost.
pub fn take_timestamp(
    record: &mut Map<String, Value>,
    field: &str,
    metadata: &mut Map<String, Value>,
) -> Option<Timestamp> {
    let value = record.remove(field)?;
    if value.is_null() {
        return None;
    }
    let parsed = timestamp(&value);
    if parsed.is_none() {
        metadata.insert(field.to_owned(), value);
    }
    parsed
}

/// A duration in milliseconds from a JSON number.
pub fn millis(value: &Value) -> Option<f64> {
    value.as_f64().filter(|v| v.is_finite())
}

/// What a record says about failure, taken out of it: the error class and message from
/// `error_type` / `error_message` / `error` (text or `{type, message}`), and `success: false` or
/// a failing `status` / `result_status`. A failure with neither class nor message gets the class
/// `ToolError`, so the step still reads as failed.
pub fn take_error(record: &mut Map<String, Value>) -> (Option<String>, Option<String>) {
    fn text(value: Value) -> Option<String> {
        match value {
            Value::Null => None,
            Value::String(s) if s.is_empty() => None,
            Value::String(s) => Some(s),
            other => Some(other.to_string()),
        }
    }
    let mut error_type = record.remove("error_type").and_then(text);
    let mut error_message = record.remove("error_message").and_then(text);
    let mut failed = false;
    match record.remove("error") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => failed = true,
        Some(Value::Object(mut detail)) => {
            failed = true;
            for key in ["type", "error_type", "name", "code"] {
                if error_type.is_none() {
                    error_type = detail.remove(key).and_then(text);
                }
            }
            for key in ["message", "error_message", "detail"] {
                if error_message.is_none() {
                    error_message = detail.remove(key).and_then(text);
                }
            }
        }
        Some(other) => {
            if let Some(message) = text(other) {
                failed = true;
                error_message.get_or_insert(message);
            }
        }
    }
    match record.remove("success") {
        Some(Value::Bool(false)) => failed = true,
        None | Some(Value::Bool(true)) => {}
        Some(other) => {
            record.insert("success".to_owned(), other);
        }
    }
    if let Some(Value::String(status)) =
        record.get("status").or_else(|| record.get("result_status"))
        && is_failure_status(status)
    {
        failed = true;
    }
    if failed && error_type.is_none() && error_message.is_none() {
        error_type = Some("ToolError".to_owned());
    }
    (error_type, error_message)
}

/// Status words that mean the call failed.
pub fn is_failure_status(status: &str) -> bool {
    matches!(
        status.to_ascii_lowercase().as_str(),
        "error" | "err" | "failed" | "failure" | "fail" | "exception" | "timeout" | "timed_out"
    )
}

/// A serde_json error as a reject reason. serde_json says "at line 1 column 9" for a record
/// parsed from one line, where the line is already in the reject; keep only the column then.
pub fn json_error(err: &serde_json::Error, one_line: bool) -> String {
    let text = err.to_string();
    let base = match text.rfind(" at line ") {
        Some(cut) => text[..cut].to_owned(),
        None => text,
    };
    let what = match err.classify() {
        serde_json::error::Category::Eof => "truncated JSON",
        serde_json::error::Category::Syntax => "invalid JSON",
        serde_json::error::Category::Data => "unexpected JSON",
        serde_json::error::Category::Io => "read error",
    };
    if one_line {
        format!("{what}: {base} (column {})", err.column())
    } else {
        format!(
            "{what}: {base} (line {}, column {})",
            err.line(),
            err.column()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_in_the_usual_spellings() {
        let expected = Utc.with_ymd_and_hms(2026, 5, 18, 10, 0, 0).unwrap();
        for v in [
            json!("2026-05-18T10:00:00Z"),
            json!("2026-05-18T12:00:00+02:00"),
            json!("2026-05-18T10:00:00"),
            json!("2026-05-18 10:00:00.000"),
            json!(1_779_098_400),
            json!(1_779_098_400_000_u64),
        ] {
            assert_eq!(timestamp(&v), Some(expected), "{v}");
        }
        assert_eq!(timestamp(&json!("yesterday")), None);
        assert_eq!(timestamp(&json!(true)), None);
    }

    #[test]
    fn excerpt_of_a_huge_value_is_short() {
        let big = json!({"s": "x".repeat(5_000_000)});
        let e = excerpt_value(&big);
        assert!(e.chars().count() <= EXCERPT_CHARS + 1);
        assert!(e.starts_with("{\"s\":\"xxx"));
    }

    #[test]
    fn excerpt_replaces_invalid_utf8() {
        let e = excerpt_bytes(b"{\"a\": \"\xff\xfe\"}");
        assert!(e.contains('\u{FFFD}'));
    }

    #[test]
    fn tool_name_must_be_a_non_empty_string() {
        assert_eq!(tool_name(Some(&json!("x")), "tool").unwrap(), "x");
        assert!(
            tool_name(Some(&json!(7)), "tool")
                .unwrap_err()
                .contains("got a number")
        );
        assert!(tool_name(Some(&json!(" ")), "tool").is_err());
        assert!(tool_name(None, "tool").unwrap_err().contains("missing"));
    }
}
