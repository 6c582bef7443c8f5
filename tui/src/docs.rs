//! Patterns, candidates and verdicts as the store holds them: JSON documents whose exact shape
//! belongs to the miner and the verifier. They are read generically here, by the field names
//! those shapes use or are likely to use, and anything unrecognised stays visible in the raw
//! document view.

use serde_json::Value;

use crate::sanitize::escape_line;

/// How a summary line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Heading,
    Plain,
    Good,
    Warn,
    Bad,
}

/// One line of a document summary: an escaped, bounded text and its tone.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryLine {
    pub text: String,
    pub tone: Tone,
}

fn line(text: impl AsRef<str>, tone: Tone) -> SummaryLine {
    SummaryLine {
        text: escape_line(text.as_ref(), 400),
        tone,
    }
}

/// The first value found at any of the JSON pointers.
fn first<'a>(doc: &'a Value, pointers: &[&str]) -> Option<&'a Value> {
    pointers
        .iter()
        .find_map(|p| doc.pointer(p).filter(|v| !v.is_null()))
}

/// A scalar as short text (strings without quotes); containers compactly.
pub fn short(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The document's display name.
pub fn doc_name(key: &str, doc: &Value) -> String {
    first(
        doc,
        &[
            "/name",
            "/flow/name",
            "/candidate/name",
            "/id",
            "/pattern_id",
        ],
    )
    .map(short)
    .unwrap_or_else(|| key.to_string())
}

/// Support (traces containing the pattern), when the document states it.
/// A one-line chart of `values` in plain ASCII (so it draws in every terminal and in `--ascii`
/// mode): one character a value, from ` ` (zero) up to `#` (the largest).
pub fn sparkline(values: &[u64]) -> String {
    const RAMP: &[u8] = b" .:-=+*#";
    let max = values.iter().copied().max().unwrap_or(0).max(1);
    values
        .iter()
        .map(|&v| {
            let level = if v == 0 {
                0
            } else {
                1 + (v * (RAMP.len() as u64 - 2)) / max
            };
            RAMP[level.min(RAMP.len() as u64 - 1) as usize] as char
        })
        .collect()
}

#[cfg(test)]
#[test]
fn sparkline_scales_to_the_largest_value() {
    assert_eq!(sparkline(&[0, 1, 7, 14]), " .=#");
    assert_eq!(sparkline(&[]), "");
}

/// Best first: documents with a score (candidates carry `evidence.score`) in descending score
/// order; the rest keep their stored (key) order after them.
pub fn rank_documents(documents: &mut [(String, Value)]) {
    let score = |doc: &Value| {
        doc.pointer("/evidence/score")
            .or_else(|| doc.pointer("/score"))
            .and_then(Value::as_f64)
    };
    documents.sort_by(|a, b| match (score(&a.1), score(&b.1)) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
}

#[cfg(test)]
#[test]
fn documents_rank_by_score_then_key_order() {
    let mut docs = vec![
        (
            "a".to_string(),
            serde_json::json!({"evidence": {"score": 1.0}}),
        ),
        ("b".to_string(), serde_json::json!({"name": "unscored"})),
        (
            "c".to_string(),
            serde_json::json!({"evidence": {"score": 9.5}}),
        ),
    ];
    rank_documents(&mut docs);
    let keys: Vec<&str> = docs.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["c", "a", "b"]);
}

pub fn doc_support(doc: &Value) -> Option<String> {
    first(
        doc,
        &[
            "/support",
            "/evidence/support",
            "/stats/support",
            "/pattern/support",
        ],
    )
    .map(short)
}

/// The tool names of the document's steps, in order.
pub fn doc_steps(doc: &Value) -> Vec<String> {
    let list = first(
        doc,
        &[
            "/steps",
            "/tools",
            "/sequence",
            "/flow/steps",
            "/pattern/steps",
            "/pattern/tools",
            "/pattern/sequence",
        ],
    );
    let Some(Value::Array(items)) = list else {
        return Vec::new();
    };
    items
        .iter()
        .map(|item| match item {
            Value::Object(_) => first(item, &["/tool_name", "/tool", "/name"])
                .map(short)
                .unwrap_or_else(|| item.to_string()),
            other => short(other),
        })
        .collect()
}

/// The verdict for a candidate: a verdict stored under the same key, or one naming the
/// candidate (by key or by name).
pub fn verdict_for<'a>(
    key: &str,
    name: &str,
    verdicts: &'a [(String, Value)],
) -> Option<&'a Value> {
    verdicts
        .iter()
        .find(|(k, _)| k == key)
        .or_else(|| {
            verdicts.iter().find(|(_, v)| {
                first(
                    v,
                    &[
                        "/candidate",
                        "/candidate_key",
                        "/candidate_id",
                        "/candidate_name",
                        "/name",
                    ],
                )
                .map(short)
                .is_some_and(|n| n == key || n == name)
            })
        })
        .map(|(_, v)| v)
}

/// The verdict's status word (`verified`, `partial`, `rejected`, ...).
pub fn verdict_status(verdict: &Value) -> Option<String> {
    first(verdict, &["/status", "/verdict", "/result"]).map(short)
}

fn status_tone(status: &str) -> Tone {
    match status.to_ascii_lowercase().as_str() {
        "verified" | "pass" | "passed" | "ok" => Tone::Good,
        "partial" => Tone::Warn,
        _ => Tone::Bad,
    }
}

/// The tone a verdict status is drawn in.
pub fn tone_of_status(status: &str) -> Tone {
    status_tone(status)
}

/// "support per day" as an ASCII sparkline, from a pattern's `support_by_day` or a candidate's
/// `evidence.support_by_day`.
fn push_support_by_day(out: &mut Vec<SummaryLine>, doc: &Value) {
    let Some(Value::Object(days)) = first(doc, &["/support_by_day", "/evidence/support_by_day"])
    else {
        return;
    };
    let counts: Vec<(String, u64)> = days
        .iter()
        .map(|(day, n)| (day.clone(), n.as_u64().unwrap_or(0)))
        .collect();
    if let (Some(first_day), Some(last_day)) = (counts.first(), counts.last()) {
        out.push(line(
            format!(
                "support per day: [{}] {}..{}",
                sparkline(&counts.iter().map(|(_, n)| *n).collect::<Vec<_>>()),
                first_day.0,
                last_day.0
            ),
            Tone::Plain,
        ));
    }
}

/// Summary lines of a pattern document.
pub fn pattern_summary(key: &str, doc: &Value) -> Vec<SummaryLine> {
    let mut out = vec![line(doc_name(key, doc), Tone::Heading)];
    let steps = doc_steps(doc);
    if !steps.is_empty() {
        out.push(line(format!("steps: {}", steps.join(" > ")), Tone::Plain));
    }
    if let Some(support) = doc_support(doc) {
        out.push(line(format!("support: {support}"), Tone::Plain));
    }
    if !steps.is_empty() {
        out.push(line(format!("length: {}", steps.len()), Tone::Plain));
    }
    push_support_by_day(&mut out, doc);
    if let Some(Value::Array(occ)) = first(doc, &["/occurrences", "/evidence/occurrences"]) {
        out.push(line(format!("occurrences: {}", occ.len()), Tone::Plain));
    }
    push_other_scalars(
        &mut out,
        doc,
        &[
            "name",
            "support",
            "steps",
            "tools",
            "sequence",
            "occurrences",
        ],
    );
    out
}

/// Summary lines of a candidate document, with its verdict when there is one.
pub fn candidate_summary(key: &str, doc: &Value, verdict: Option<&Value>) -> Vec<SummaryLine> {
    let name = doc_name(key, doc);
    let mut out = vec![line(&name, Tone::Heading)];
    if let Some(support) = doc_support(doc) {
        out.push(line(format!("support: {support}"), Tone::Plain));
    }
    push_support_by_day(&mut out, doc);
    if let Some(Value::Object(props)) = doc.pointer("/flow/input_schema/properties") {
        let names: Vec<&str> = props.keys().map(String::as_str).collect();
        out.push(line(
            format!("flow inputs: {}", names.join(", ")),
            Tone::Plain,
        ));
    }
    let steps = doc_steps(doc);
    if !steps.is_empty() {
        out.push(line("steps:", Tone::Heading));
        for (i, tool) in steps.iter().enumerate() {
            out.push(line(format!("  {}. {tool}", i + 1), Tone::Plain));
        }
    }
    push_bindings(&mut out, doc);
    push_other_scalars(
        &mut out,
        doc,
        &[
            "name", "support", "steps", "tools", "sequence", "bindings", "flow", "pattern",
        ],
    );
    match verdict {
        None => out.push(line(
            "verdict: none yet (`chainweaver verify` replays candidates)",
            Tone::Warn,
        )),
        Some(verdict) => push_verdict(&mut out, verdict),
    }
    out
}

fn push_bindings(out: &mut Vec<SummaryLine>, doc: &Value) {
    let Some(bindings) = first(doc, &["/bindings", "/flow/bindings", "/evidence/bindings"]) else {
        return;
    };
    let entries: Vec<(String, &Value)> = match bindings {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let target = match (
                    first(b, &["/step", "/step_index"]),
                    first(b, &["/field", "/input", "/target", "/param"]),
                ) {
                    (Some(step), Some(field)) => format!("step {}.{}", short(step), short(field)),
                    (None, Some(field)) => short(field),
                    (Some(step), None) => format!("step {}", short(step)),
                    (None, None) => format!("#{i}"),
                };
                (target, b)
            })
            .collect(),
        Value::Object(map) => map.iter().map(|(k, b)| (k.clone(), b)).collect(),
        _ => return,
    };
    out.push(line("bindings:", Tone::Heading));
    for (target, binding) in entries {
        let source = match binding {
            Value::Object(_) => first(binding, &["/source", "/from", "/kind", "/value"])
                .map(|s| match s {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .unwrap_or_else(|| binding.to_string()),
            other => short(other),
        };
        let confidence = first(binding, &["/confidence", "/score"]).map(short);
        let tone = match confidence.as_deref().and_then(|c| c.parse::<f64>().ok()) {
            Some(c) if c < 0.8 => Tone::Warn,
            _ => Tone::Plain,
        };
        let text = match confidence {
            Some(c) => format!("  {target} <- {source}  (confidence {c})"),
            None => format!("  {target} <- {source}"),
        };
        out.push(line(text, tone));
    }
}

fn push_verdict(out: &mut Vec<SummaryLine>, verdict: &Value) {
    let status = verdict_status(verdict).unwrap_or_else(|| "unknown".into());
    out.push(line(format!("verdict: {status}"), status_tone(&status)));
    for (label, pointers) in [
        (
            "replayed",
            &["/occurrences_replayed", "/replayed", "/occurrences"][..],
        ),
        (
            "exact matches",
            &["/exact_matches", "/matches", "/matched"][..],
        ),
    ] {
        if let Some(value) = first(verdict, pointers) {
            let text = match value {
                Value::Array(items) => items.len().to_string(),
                other => short(other),
            };
            out.push(line(format!("  {label}: {text}"), Tone::Plain));
        }
    }
    let mut diffs = Vec::new();
    collect_diffs(verdict, &mut diffs);
    if !diffs.is_empty() {
        out.push(line(format!("diffs ({}):", diffs.len()), Tone::Heading));
        for diff in diffs.iter().take(200) {
            let at = first(diff, &["/pointer", "/path", "/json_pointer"])
                .map(short)
                .unwrap_or_else(|| "/".into());
            let step = first(diff, &["/step", "/step_index", "/tool", "/tool_name"])
                .map(|s| format!("step {} ", short(s)))
                .unwrap_or_default();
            let expected = first(diff, &["/expected", "/recorded"]).map(Value::to_string);
            let actual = first(diff, &["/actual", "/replayed", "/got"]).map(Value::to_string);
            out.push(line(format!("  {step}{at}"), Tone::Plain));
            out.push(line(
                format!(
                    "    expected {}",
                    expected.unwrap_or_else(|| "(absent)".into())
                ),
                Tone::Good,
            ));
            out.push(line(
                format!(
                    "    actual   {}",
                    actual.unwrap_or_else(|| "(absent)".into())
                ),
                Tone::Bad,
            ));
        }
    }
}

/// Every object under a `diffs` array anywhere in the verdict, in document order.
fn collect_diffs<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if (key == "diffs" || key == "diff")
                    && let Value::Array(items) = child
                {
                    out.extend(items.iter().filter(|d| d.is_object()));
                    continue;
                }
                collect_diffs(child, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_diffs(v, out)),
        _ => {}
    }
}

fn push_other_scalars(out: &mut Vec<SummaryLine>, doc: &Value, skip: &[&str]) {
    let Value::Object(map) = doc else { return };
    for (key, value) in map {
        if skip.contains(&key.as_str()) || value.is_object() || value.is_array() || value.is_null()
        {
            continue;
        }
        out.push(line(format!("{key}: {}", short(value)), Tone::Plain));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn candidate_with_bindings_and_verdict_diffs() {
        let candidate = json!({
            "name": "lookup_then_refund",
            "support": 12,
            "steps": [{"tool_name": "get_order"}, {"tool_name": "refund"}],
            "bindings": [
                {"step": 1, "field": "order_id", "source": "/steps/0/outputs/id", "confidence": 0.97},
                {"step": 1, "field": "reason", "source": {"constant": "late"}, "confidence": 0.5}
            ],
            "success_rate": 0.9
        });
        let verdicts = vec![(
            "v1".to_string(),
            serde_json::from_str(
                r#"{"candidate": "c1", "status": "partial", "exact_matches": 3,
                    "steps": [{"diffs": [{"pointer": "/amount", "expected": 10.50, "actual": 10.5}]}]}"#,
            )
            .unwrap(),
        )];
        let verdict = verdict_for("c1", "lookup_then_refund", &verdicts);
        assert!(verdict.is_some());
        let text: Vec<String> = candidate_summary("c1", &candidate, verdict)
            .into_iter()
            .map(|l| l.text)
            .collect();
        let all = text.join("\n");
        for expected in [
            "lookup_then_refund",
            "support: 12",
            "  2. refund",
            "  step 1.order_id <- /steps/0/outputs/id  (confidence 0.97)",
            "success_rate: 0.9",
            "verdict: partial",
            "  exact matches: 3",
            "  /amount",
            "    expected 10.50",
            "    actual   10.5",
        ] {
            assert!(
                text.iter().any(|l| l == expected),
                "missing {expected:?} in\n{all}"
            );
        }
    }

    #[test]
    fn unknown_shapes_still_summarise() {
        let doc = json!(["get_order", "refund"]);
        let lines = pattern_summary("p7", &doc);
        assert_eq!(lines[0].text, "p7");
        let lines = candidate_summary(
            "c9",
            &json!({"flow": {"name": "f", "steps": ["a", "b"]}}),
            None,
        );
        assert_eq!(lines[0].text, "f");
        assert!(lines.iter().any(|l| l.text.contains("chainweaver verify")));
    }
}
