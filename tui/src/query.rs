//! The filter line: a small structured query parsed into a [`TraceFilter`].
//!
//! ```text
//! tool=get_order_details error dur>2s source=tau since=2026-11-01
//! ```
//!
//! Terms are separated by spaces and must all hold. `tool=NAME` (exact tool), a bare word (tool
//! name contains it, case-insensitive), `source=NAME`, `error` / `!error`, `dur>2s` or `dur>=2s`
//! (units `ms`, `s`, `m`, `h`), `since=DATE` and `until=DATE` (`2026-11-01`,
//! `2026-11-01T12:30`, or RFC 3339). Values may be double-quoted to hold spaces.

use chainweaver_recorder::model::Timestamp;
use chainweaver_recorder::store::TraceFilter;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};

/// Why a query could not be read; the message names the offending term and what would work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct QueryError {
    /// One line, fit for the status bar.
    pub message: String,
}

fn bad(message: impl Into<String>) -> QueryError {
    QueryError {
        message: message.into(),
    }
}

/// Parse a filter line. An empty line is the empty filter (every trace).
pub fn parse_query(text: &str) -> Result<TraceFilter, QueryError> {
    let mut filter = TraceFilter::default();
    for term in split_terms(text)? {
        apply_term(&mut filter, &term)?;
    }
    Ok(filter)
}

fn split_terms(text: &str) -> Result<Vec<String>, QueryError> {
    let mut terms = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut started = false;
    for ch in text.chars() {
        match ch {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    terms.push(std::mem::take(&mut current));
                    started = false;
                }
            }
            c => {
                current.push(c);
                started = true;
            }
        }
    }
    if quoted {
        return Err(bad("unclosed double quote in the filter"));
    }
    if started {
        terms.push(current);
    }
    Ok(terms)
}

fn set_once<T>(slot: &mut Option<T>, value: T, name: &str) -> Result<(), QueryError> {
    if slot.is_some() {
        return Err(bad(format!("`{name}` is given twice; give it once")));
    }
    *slot = Some(value);
    Ok(())
}

fn apply_term(filter: &mut TraceFilter, term: &str) -> Result<(), QueryError> {
    match term {
        "error" | "errors" => return set_once(&mut filter.has_error, true, "error"),
        "!error" | "!errors" | "ok" => return set_once(&mut filter.has_error, false, "error"),
        _ => {}
    }
    if let Some(rest) = term.strip_prefix("dur") {
        // `dur>2s` and `dur>=2s` both mean "at least": durations are measured in milliseconds
        // with fractions, so the two only differ on an exact tie.
        let value = if let Some(v) = rest.strip_prefix(">=") {
            v
        } else if let Some(v) = rest.strip_prefix('>') {
            v
        } else if rest.starts_with('<') || rest.starts_with('=') {
            return Err(bad(format!(
                "`{term}`: only a lower bound is supported, like dur>2s or dur>=500ms"
            )));
        } else {
            // A bare word that merely starts with "dur".
            return set_once(&mut filter.tool_contains, term.to_string(), "tool name");
        };
        let ms = parse_duration_ms(value).map_err(|why| bad(format!("`{term}`: {why}")))?;
        return set_once(&mut filter.min_duration_ms, ms, "dur");
    }
    if let Some((key, value)) = term.split_once('=') {
        if value.is_empty() {
            return Err(bad(format!("`{term}` has no value after `=`")));
        }
        return match key {
            "tool" => set_once(&mut filter.tool, value.to_string(), "tool"),
            "source" => set_once(&mut filter.source, value.to_string(), "source"),
            "since" => {
                let at = parse_instant(value).map_err(|why| bad(format!("`{term}`: {why}")))?;
                set_once(&mut filter.since, at, "since")
            }
            "until" => {
                let at = parse_instant(value).map_err(|why| bad(format!("`{term}`: {why}")))?;
                set_once(&mut filter.until, at, "until")
            }
            "error" => match value {
                "true" | "yes" => set_once(&mut filter.has_error, true, "error"),
                "false" | "no" => set_once(&mut filter.has_error, false, "error"),
                _ => Err(bad(format!("`{term}`: use `error` or `!error`"))),
            },
            other => Err(bad(format!(
                "unknown key `{other}` in `{term}`; keys are tool, source, since, until, dur, error"
            ))),
        };
    }
    if term.contains(['<', '>']) {
        return Err(bad(format!(
            "`{term}`: comparisons work on `dur` only, like dur>2s"
        )));
    }
    if filter.tool_contains.is_some() {
        return Err(bad(format!(
            "`{term}`: only one bare word (tool name contains) is allowed; quote it to search for a phrase"
        )));
    }
    filter.tool_contains = Some(term.to_string());
    Ok(())
}

/// `500ms`, `2s`, `1.5s`, `3m`, `1h` in milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<f64, String> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like 500ms, 2s, 1.5m or 1h"))?;
    let factor = match unit {
        "ms" => 1.0,
        "s" => 1_000.0,
        "m" | "min" => 60_000.0,
        "h" => 3_600_000.0,
        "" => return Err(format!("`{text}` needs a unit: ms, s, m or h")),
        other => {
            return Err(format!(
                "unknown duration unit `{other}`; use ms, s, m or h"
            ));
        }
    };
    Ok(value * factor)
}

/// A date (midnight UTC), a date and time without zone (UTC), or RFC 3339.
pub fn parse_instant(text: &str) -> Result<Timestamp, String> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"] {
        if let Ok(at) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(at.and_utc());
        }
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d")
        && let Some(at) = day.and_hms_opt(0, 0, 0)
    {
        return Ok(at.and_utc());
    }
    Err(format!(
        "`{text}` is not a date like 2026-11-01, 2026-11-01T12:30 or RFC 3339"
    ))
}

/// The query text that parses back into `filter` (used to show the active filter).
pub fn format_query(filter: &TraceFilter) -> String {
    let mut terms = Vec::new();
    let quote = |v: &str| {
        if v.contains(char::is_whitespace) || v.is_empty() {
            format!("\"{v}\"")
        } else {
            v.to_string()
        }
    };
    if let Some(tool) = &filter.tool {
        terms.push(format!("tool={}", quote(tool)));
    }
    if let Some(word) = &filter.tool_contains {
        terms.push(quote(word));
    }
    if let Some(source) = &filter.source {
        terms.push(format!("source={}", quote(source)));
    }
    match filter.has_error {
        Some(true) => terms.push("error".into()),
        Some(false) => terms.push("!error".into()),
        None => {}
    }
    if let Some(ms) = filter.min_duration_ms {
        terms.push(format!("dur>={}", format_ms_term(ms)));
    }
    if let Some(at) = filter.since {
        terms.push(format!("since={}", at.to_rfc3339()));
    }
    if let Some(at) = filter.until {
        terms.push(format!("until={}", at.to_rfc3339()));
    }
    terms.join(" ")
}

fn format_ms_term(ms: f64) -> String {
    if ms >= 1_000.0 && (ms / 1_000.0).fract() == 0.0 {
        format!("{}s", ms / 1_000.0)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let filter =
            parse_query("tool=get_order_details error dur>2s source=tau since=2026-11-01").unwrap();
        assert_eq!(filter.tool.as_deref(), Some("get_order_details"));
        assert_eq!(filter.has_error, Some(true));
        assert_eq!(filter.min_duration_ms, Some(2_000.0));
        assert_eq!(filter.source.as_deref(), Some("tau"));
        assert_eq!(
            filter.since.unwrap().to_rfc3339(),
            "2026-11-01T00:00:00+00:00"
        );
        assert_eq!(filter.tool_contains, None);
    }

    #[test]
    fn bare_words_negation_and_quotes() {
        let filter = parse_query("  order !error  until=2026-11-02T10:30 ").unwrap();
        assert_eq!(filter.tool_contains.as_deref(), Some("order"));
        assert_eq!(filter.has_error, Some(false));
        assert_eq!(
            filter.until.unwrap().to_rfc3339(),
            "2026-11-02T10:30:00+00:00"
        );
        let quoted = parse_query("source=\"my agent\" dur>=1.5m").unwrap();
        assert_eq!(quoted.source.as_deref(), Some("my agent"));
        assert_eq!(quoted.min_duration_ms, Some(90_000.0));
        assert_eq!(parse_query("").unwrap(), TraceFilter::default());
    }

    #[test]
    fn bad_queries_say_what_is_wrong() {
        let cases = [
            ("colour=red", "unknown key `colour`"),
            ("dur>2", "needs a unit"),
            ("dur>2weeks", "unknown duration unit `weeks`"),
            ("dur<2s", "only a lower bound"),
            ("since=yesterday", "not a date"),
            ("tool=", "no value"),
            ("error !error", "`error` is given twice"),
            ("foo bar", "only one bare word"),
            ("source=\"open", "unclosed double quote"),
            ("steps>3", "comparisons work on `dur` only"),
        ];
        for (query, expected) in cases {
            let err = parse_query(query).unwrap_err();
            assert!(
                err.message.contains(expected),
                "{query}: {} lacks {expected}",
                err.message
            );
        }
    }

    #[test]
    fn formatting_round_trips() {
        for query in [
            "tool=get_order_details order source=\"my agent\" error dur>=2s since=2026-11-01T00:00:00+00:00",
            "!error dur>=250ms",
            "",
        ] {
            let filter = parse_query(query).unwrap();
            assert_eq!(parse_query(&format_query(&filter)).unwrap(), filter);
        }
    }
}
