//! Evidence and score: how much a candidate saves and how far to trust it.

use chainweaver_recorder::model::TraceWithSteps;
use chainweaver_recorder::model::candidate::{
    Binding, BindingFlag, Effect, Evidence, OccurrenceRef, Pattern,
};

use super::effects::ToolBehaviour;
use super::stats::support_by_day;
use super::{CandidateConfig, linked_steps};
use crate::infer::OccurrenceView;

/// The candidate's evidence and its score (see the module documentation for the formula), from
/// the occurrences read, the bindings, the tools' behaviour and the replay's reproductions.
pub(super) fn evidence(
    traces: &[TraceWithSteps],
    pattern: &Pattern,
    views: &[OccurrenceView<'_>],
    bindings: &[Binding],
    behaviour: ToolBehaviour,
    reproduced: usize,
    config: &CandidateConfig,
) -> Evidence {
    let len = pattern.len();
    let ToolBehaviour {
        determinism,
        effects: step_effects,
    } = behaviour;
    let read_only = step_effects.iter().all(|e| e.effect == Effect::ReadOnly);
    let n = views.len().max(1) as f64;
    let success = views
        .iter()
        .filter(|v| v.steps.iter().all(|s| !s.is_error()))
        .count();
    let success_rate = success as f64 / n;
    let support = pattern.support();
    let round_trips_saved = support * len.saturating_sub(1);
    let mean_confidence = if bindings.is_empty() {
        1.0
    } else {
        bindings.iter().map(|b| b.confidence).sum::<f64>() / bindings.len() as f64
    };
    let binding_quality = if bindings.is_empty() {
        1.0
    } else {
        bindings
            .iter()
            .map(|b| {
                if b.is_flagged() && b.flags != [BindingFlag::Optional] {
                    config.flagged_binding_weight
                } else {
                    b.confidence
                }
            })
            .sum::<f64>()
            / bindings.len() as f64
    };
    let determinism_factor = pattern
        .tools
        .iter()
        .map(|t| determinism.get(t).and_then(|d| d.ratio).unwrap_or(1.0))
        .sum::<f64>()
        / len.max(1) as f64;
    let effect_factor = if read_only {
        1.0
    } else {
        config.side_effect_factor
    };
    let linked = linked_steps(len, bindings.iter().map(|b| (b.step, &b.source)));
    let data_flow = linked.iter().filter(|&&l| l).count() as f64 / len.max(1) as f64;
    let score = round_trips_saved as f64
        * data_flow
        * data_flow
        * success_rate
        * binding_quality
        * determinism_factor
        * effect_factor;
    Evidence {
        support,
        data_flow,
        occurrences: views.len(),
        occurrence_refs: views
            .iter()
            .map(|v| OccurrenceRef {
                trace_id: v.trace.trace.trace_id.clone(),
                step_indices: v.steps.iter().map(|s| s.step_index).collect(),
            })
            .collect(),
        success_rate,
        mean_confidence,
        flagged_bindings: bindings.iter().filter(|b| b.is_flagged()).count(),
        reproduced: reproduced as f64 / n,
        determinism,
        round_trips_saved,
        effects: step_effects,
        read_only,
        support_by_day: support_by_day(traces, pattern).by_day,
        loop_lengths: Default::default(),
        score,
    }
}
