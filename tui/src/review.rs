//! What a reviewer reads about patterns, candidates and verdicts, built from the model's typed
//! values (never from field names): flows drawn as `a -> b -> c`, bindings as sentences,
//! verdicts with their replay differences. The views in [`crate::ui`] only lay these out.

use chainweaver_recorder::model::candidate::{
    Binding, BindingSource, Candidate, FailureCounts, FailureMode, PatternSummary, StepDiff,
    Verdict, VerdictStatus,
};
use serde_json::Value;

use crate::sanitize::escape_line;

/// How a line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Heading,
    Plain,
    Good,
    Warn,
    Bad,
}

/// A trace a line leads to: the trace and, when known, the `step_index` to select.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceJump {
    pub trace_id: String,
    pub step_index: Option<u32>,
}

/// One line of a summary: an escaped, bounded text, its tone, and the trace it leads to.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryLine {
    pub text: String,
    pub tone: Tone,
    pub jump: Option<TraceJump>,
}

fn line(text: impl AsRef<str>, tone: Tone) -> SummaryLine {
    SummaryLine {
        text: escape_line(text.as_ref(), 400),
        tone,
        jump: None,
    }
}

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

/// The steps of a candidate's flow as reviewers read them, one label a drawn step
/// ([`Candidate::step_labels`]), escaped for the terminal.
pub fn flow_labels(candidate: &Candidate) -> Vec<String> {
    candidate
        .step_labels()
        .iter()
        .map(|label| escape_line(label, 200))
        .collect()
}

/// The tool names of a pattern, escaped.
pub fn pattern_labels(pattern: &PatternSummary) -> Vec<String> {
    pattern.tools.iter().map(|t| escape_line(t, 200)).collect()
}

fn cut(text: &str, width: usize, ellipsis: &str) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let keep = width.saturating_sub(ellipsis.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(ellipsis);
    out
}

/// `labels` joined by ` -> ` in at most `width` characters. When they do not fit, the first
/// and the last step stay and the middle gives way to an ellipsis (`a -> b -> ... -> z`); when
/// even that is too long, the first and last names are cut.
pub fn fit_flow(labels: &[String], width: usize, ascii: bool) -> String {
    const ARROW: &str = " -> ";
    let ellipsis = if ascii { "..." } else { "…" };
    let width_of = |s: &str| s.chars().count();
    let full = labels.join(ARROW);
    if width_of(&full) <= width || labels.len() < 2 {
        return cut(&full, width, ellipsis);
    }
    let (first, last) = (&labels[0], &labels[labels.len() - 1]);
    let middle = &labels[1..labels.len() - 1];
    for kept in (0..middle.len()).rev() {
        let mut parts: Vec<&str> = vec![first];
        parts.extend(middle[..kept].iter().map(String::as_str));
        parts.push(ellipsis);
        parts.push(last);
        let text = parts.join(ARROW);
        if width_of(&text) <= width {
            return text;
        }
    }
    // Only the ends: share what is left between the two names.
    let skeleton = if middle.is_empty() {
        ARROW.to_string()
    } else {
        format!("{ARROW}{ellipsis}{ARROW}")
    };
    let room = width.saturating_sub(width_of(&skeleton));
    let head = room / 2;
    format!(
        "{}{skeleton}{}",
        cut(first, head, ellipsis),
        cut(last, room - head, ellipsis)
    )
}

/// The tone a verdict status is drawn in.
pub fn status_tone(status: VerdictStatus) -> Tone {
    match status {
        VerdictStatus::Verified => Tone::Good,
        VerdictStatus::Partial => Tone::Warn,
        VerdictStatus::Rejected => Tone::Bad,
    }
}

/// The verdict column: the status word, or `-` when the candidate was not verified yet.
pub fn verdict_cell(verdict: Option<&Verdict>) -> (String, Tone) {
    match verdict {
        Some(v) => (v.status.as_str().to_string(), status_tone(v.status)),
        None => ("-".to_string(), Tone::Plain),
    }
}

/// The exact-replays column: `exact/replayed` (`12/12`), or `-` without a verdict.
pub fn exact_cell(verdict: Option<&Verdict>) -> String {
    verdict
        .map(|v| format!("{}/{}", v.exact_matches, v.occurrences_replayed))
        .unwrap_or_else(|| "-".to_string())
}

/// A binding as a sentence: `step 1 get_order_details /order_id <- step 0 output /orders[*]
/// (agent's choice), confidence 0.78 over 12, flagged agent's choice`.
pub fn binding_sentence(binding: &Binding) -> String {
    let mut text = format!(
        "step {} {} {} <- {}, confidence {:.2} over {}",
        binding.step,
        binding.tool_name,
        binding.field,
        binding.source.describe(),
        binding.confidence,
        binding.observed
    );
    if !binding.flags.is_empty() {
        let flags: Vec<&str> = binding.flags.iter().map(|f| f.describe()).collect();
        text.push_str(&format!(", flagged {}", flags.join(", ")));
    }
    text
}

/// Summary lines of a pattern.
pub fn pattern_summary(pattern: &PatternSummary) -> Vec<SummaryLine> {
    let mut out = vec![
        line(pattern_labels(pattern).join(" -> "), Tone::Heading),
        line(format!("length: {}", pattern.tools.len()), Tone::Plain),
        line(format!("support: {} traces", pattern.support), Tone::Plain),
        line(format!("occurrences: {}", pattern.occurrences), Tone::Plain),
        line(
            format!("round trips saved: {}", pattern.round_trips_saved),
            Tone::Plain,
        ),
    ];
    if let (Some((first, _)), Some((last, _))) = (
        pattern.support_by_day.first_key_value(),
        pattern.support_by_day.last_key_value(),
    ) {
        let counts: Vec<u64> = pattern.support_by_day.values().copied().collect();
        out.push(line(
            format!("support per day: [{}] {first}..{last}", sparkline(&counts)),
            Tone::Plain,
        ));
    }
    out
}

/// Everything the candidate detail shows: the flow, its evidence, each binding as a sentence,
/// and the verdict with its differences (each leading to the trace it came from).
pub fn candidate_summary(candidate: &Candidate, verdict: Option<&Verdict>) -> Vec<SummaryLine> {
    let mut out = vec![line(flow_labels(candidate).join(" -> "), Tone::Heading)];
    push_evidence(&mut out, candidate);
    out.push(line("steps:", Tone::Heading));
    for (i, tool) in candidate.tools.iter().enumerate() {
        out.push(line(format!("  {i}. {tool}"), Tone::Plain));
    }
    out.push(line(
        format!("bindings ({}):", candidate.bindings.len()),
        Tone::Heading,
    ));
    for binding in &candidate.bindings {
        let tone = if binding.is_flagged() {
            Tone::Warn
        } else {
            Tone::Plain
        };
        out.push(line(format!("  {}", binding_sentence(binding)), tone));
    }
    match verdict {
        None => out.push(line(
            "verdict: none yet (`chainweaver verify` replays candidates)",
            Tone::Warn,
        )),
        Some(verdict) => push_verdict(&mut out, verdict),
    }
    out
}

fn push_evidence(out: &mut Vec<SummaryLine>, candidate: &Candidate) {
    let evidence = &candidate.evidence;
    out.push(line(format!("id: {}", candidate.id), Tone::Plain));
    out.push(line(
        format!(
            "support {} traces, {} occurrences, {} round trips saved, score {:.2}",
            evidence.support, evidence.occurrences, evidence.round_trips_saved, evidence.score
        ),
        Tone::Plain,
    ));
    out.push(line(
        format!(
            "data flow {:.2}, success {:.0}%, mean confidence {:.2}, {} flagged binding{}{}",
            evidence.data_flow,
            evidence.success_rate * 100.0,
            evidence.mean_confidence,
            evidence.flagged_bindings,
            if evidence.flagged_bindings == 1 {
                ""
            } else {
                "s"
            },
            if evidence.read_only {
                ", read-only"
            } else {
                ""
            }
        ),
        Tone::Plain,
    ));
    let inputs: Vec<&str> = candidate
        .bindings
        .iter()
        .filter_map(|b| match &b.source {
            BindingSource::FlowInput { name } => Some(name.as_str()),
            BindingSource::Each {
                select_input: Some(name),
                ..
            } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    if let Some(runs) = evidence.loop_runs() {
        out.push(line(
            format!("loop runs (calls x occurrences): {runs}"),
            Tone::Plain,
        ));
    }
    if !inputs.is_empty() {
        out.push(line(
            format!("flow inputs: {}", inputs.join(", ")),
            Tone::Plain,
        ));
    }
    if let Some(role) = &candidate.behaviour {
        out.push(line(format!("behaviour: {}", role.describe()), Tone::Plain));
    }
    if let Some(sample) = &candidate.sample {
        out.push(line(
            format!(
                "bindings inferred from {} of {} occurrences",
                sample.read, evidence.occurrences
            ),
            Tone::Warn,
        ));
    }
    if !evidence.support_by_day.is_empty() {
        let counts: Vec<u64> = evidence
            .support_by_day
            .values()
            .map(|n| *n as u64)
            .collect();
        let days: Vec<&String> = evidence.support_by_day.keys().collect();
        out.push(line(
            format!(
                "support per day: [{}] {}..{}",
                sparkline(&counts),
                days[0],
                days[days.len() - 1]
            ),
            Tone::Plain,
        ));
    }
}

fn failure_words(failures: &FailureCounts) -> Option<String> {
    let parts: Vec<String> = [
        (FailureMode::BindingWrong, failures.binding_wrong),
        (FailureMode::ToolOutputChanged, failures.tool_output_changed),
        (FailureMode::ToolFailed, failures.tool_failed),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(mode, n)| format!("{} {n}", mode.describe()))
    .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn shown(value: Option<&Value>) -> String {
    value
        .map(Value::to_string)
        .unwrap_or_else(|| "(absent)".into())
}

fn push_verdict(out: &mut Vec<SummaryLine>, verdict: &Verdict) {
    let tone = status_tone(verdict.status);
    let cause = verdict
        .cause
        .map(|c| format!(" ({})", c.describe()))
        .unwrap_or_default();
    out.push(line(
        format!("verdict: {}{cause}", verdict.status.as_str()),
        tone,
    ));
    if !verdict.reason.is_empty() {
        out.push(line(format!("  {}", verdict.reason), Tone::Plain));
    }
    out.push(line(
        format!(
            "  exact replays {}/{} ({} found in {} held-out traces){}",
            verdict.exact_matches,
            verdict.occurrences_replayed,
            verdict.occurrences_found,
            verdict.holdout_traces,
            if verdict.mode.is_empty() {
                String::new()
            } else {
                format!(", {} tools", verdict.mode)
            }
        ),
        Tone::Plain,
    ));
    if let Some(failures) = failure_words(&verdict.failures) {
        out.push(line(format!("  failures: {failures}"), Tone::Bad));
    }
    if verdict.diffs.is_empty() {
        return;
    }
    out.push(line(
        format!(
            "diffs ({}), Enter opens the trace at the step:",
            verdict.diffs.len()
        ),
        Tone::Heading,
    ));
    for diff in &verdict.diffs {
        let jump = Some(diff_jump(diff));
        let pointer = if diff.pointer.is_empty() {
            "(whole step)"
        } else {
            diff.pointer.as_str()
        };
        for (text, tone) in [
            (
                format!(
                    "  trace {} step {} {} {pointer}",
                    diff.occurrence.trace_id, diff.step, diff.tool_name
                ),
                Tone::Plain,
            ),
            (
                format!("    recorded {}", shown(diff.expected.as_ref())),
                Tone::Good,
            ),
            (
                format!("    replayed {}", shown(diff.actual.as_ref())),
                Tone::Bad,
            ),
        ] {
            let mut l = line(text, tone);
            l.jump = jump.clone();
            out.push(l);
        }
    }
}

/// Where a difference was recorded: its occurrence's trace, at the differing step.
pub fn diff_jump(diff: &StepDiff) -> TraceJump {
    TraceJump {
        trace_id: diff.occurrence.trace_id.clone(),
        step_index: diff.occurrence.step_indices.get(diff.step).copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chainweaver_recorder::model::candidate::BindingFlag;

    fn labels(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sparkline_scales_to_the_largest_value() {
        assert_eq!(sparkline(&[0, 1, 7, 14]), " .=#");
        assert_eq!(sparkline(&[]), "");
    }

    #[test]
    fn flows_keep_their_ends_when_cut() {
        let flow = labels(&[
            "get_user_details",
            "get_order_details",
            "get_product_details",
            "cancel_pending_order",
        ]);
        assert_eq!(
            fit_flow(&flow, 200, true),
            "get_user_details -> get_order_details -> get_product_details -> cancel_pending_order"
        );
        assert_eq!(
            fit_flow(&flow, 70, true),
            "get_user_details -> get_order_details -> ... -> cancel_pending_order"
        );
        assert_eq!(
            fit_flow(&flow, 50, true),
            "get_user_details -> ... -> cancel_pending_order"
        );
        assert_eq!(fit_flow(&flow, 30, false), "get_user_… -> … -> cancel_pen…");
        assert_eq!(fit_flow(&labels(&["a", "b"]), 6, true), "a -> b");
    }

    #[test]
    fn binding_sentences_name_step_field_source_and_flags() {
        let binding = Binding {
            step: 1,
            tool_name: "get_order_details".into(),
            field: "/order_id".into(),
            source: BindingSource::ListElement {
                step: 0,
                list_pointer: "/orders".into(),
                item_pointer: String::new(),
                selection: chainweaver_recorder::model::candidate::Selection::Chosen,
            },
            confidence: 0.78,
            observed: 12,
            alternatives: Vec::new(),
            flags: vec![BindingFlag::AgentChoice],
        };
        assert_eq!(
            binding_sentence(&binding),
            "step 1 get_order_details /order_id <- step 0 output /orders[*] (agent's choice), \
             confidence 0.78 over 12, flagged agent's choice"
        );
    }
}
