//! One field's binding: the source keys that explain its value in each occurrence, their
//! ranking, and the choice among them (see the parent module for the rules).

use std::cmp::Reverse;

use chainweaver_recorder::model::candidate::{
    Alternative, Binding, BindingFlag, BindingSource, Pattern, Selection, TemplateSlot,
};
use serde_json::Value;

use super::index::{FastMap, Side, last_segment, last_segment_cow};
use super::template::{Part, find_template};
use super::{Field, InferConfig, OccurrenceView};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Exact {
        step: usize,
        side: Side,
        pointer: String,
    },
    Element {
        step: usize,
        list_pointer: String,
        item_pointer: String,
    },
    Template(Vec<Part>),
    FlowInput,
    Constant,
}

#[derive(Debug)]
struct KeyStats {
    /// The occurrences (among those holding the field) where the key holds, ascending. Sparse:
    /// a key that holds in a few occurrences costs a few entries, however many there are.
    holds: Vec<usize>,
    count: usize,
    /// Element keys: position and list length where the key holds, one per `holds` entry.
    positions: Vec<Option<(usize, usize)>>,
}

impl KeyStats {
    fn new(_n: usize) -> Self {
        Self {
            holds: Vec::new(),
            count: 0,
            positions: Vec::new(),
        }
    }

    /// Occurrences are recorded in ascending order; a second record for one occurrence keeps
    /// the first.
    fn record(&mut self, at: usize, position: Option<(usize, usize)>) {
        if self.holds.last() != Some(&at) {
            self.holds.push(at);
            self.count += 1;
            self.positions.push(position);
        }
    }
}

/// A binding plus what the map detection needs to know about list positions.
#[derive(Debug)]
pub(super) struct Inferred {
    pub(super) binding: Binding,
    /// For list-element bindings: per holding occurrence, `(position, list length)`.
    pub(super) positions: Vec<(usize, usize)>,
}

/// A key with what ranks it.
struct Ranked {
    key: Key,
    stats: KeyStats,
    class: u8,
    distance: usize,
    name_match: bool,
    pointer: String,
}

/// A value unlikely to match by coincidence.
fn informative(value: &Value) -> bool {
    match value {
        Value::String(s) => s.chars().count() >= 3,
        Value::Number(n) => n.to_string().len() >= 3,
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
        Value::Bool(_) | Value::Null => false,
    }
}

/// Infer the binding of one field, in phases: the source keys explaining its value in each
/// occurrence, the most common value as a constant, the ranking, then the choice.
pub(super) fn infer_field(
    views: &[OccurrenceView<'_>],
    pattern: &Pattern,
    step: usize,
    field: &Field<'_>,
    config: &InferConfig,
) -> Option<Inferred> {
    let present: Vec<(&OccurrenceView<'_>, &Value)> = field
        .values
        .iter()
        .map(|&(at, value, _)| (&views[at], value))
        .collect();
    let n = present.len();
    if n == 0 {
        return None;
    }
    let mut keys = source_keys(&present, field, step, config);
    let common = add_constant(&mut keys, field, config)?;
    let mut ranked = rank_keys(keys, step, &field.pointer, &common);
    promote_template(&mut ranked, n, config);
    let choice = choose_source(&ranked, &present, pattern, views.len(), config)?;
    let alternatives = ranked
        .iter()
        .enumerate()
        .filter(|(i, r)| Some(*i) != choice.index && r.stats.count > 0)
        .take(3)
        .map(|(_, r)| Alternative {
            source: to_source(&r.key, &r.stats, &present, pattern),
            confidence: share(r.stats.count, n),
        })
        .collect();
    let positions = match choice.index.map(|i| &ranked[i]) {
        Some(
            r @ Ranked {
                key: Key::Element { .. },
                ..
            },
        ) => r.stats.positions.iter().flatten().copied().collect(),
        _ => Vec::new(),
    };
    Some(Inferred {
        binding: Binding {
            step,
            tool_name: pattern.tools[step].clone(),
            field: field.pointer.clone(),
            source: choice.source,
            confidence: choice.confidence,
            observed: n,
            alternatives,
            flags: choice.flags,
        },
        positions,
    })
}

/// The share of the `n` occurrences holding a field that `count` of them make.
fn share(count: usize, n: usize) -> f64 {
    count as f64 / n as f64
}

/// Every key explaining the field's value, occurrence by occurrence: an earlier step's value
/// equal to it (an output list's element keyed by its list), else "first appears here" (a
/// flow input) and, for a string made of earlier values, a template.
fn source_keys(
    present: &[(&OccurrenceView<'_>, &Value)],
    field: &Field<'_>,
    step: usize,
    config: &InferConfig,
) -> FastMap<Key, KeyStats> {
    let n = present.len();
    let mut keys: FastMap<Key, KeyStats> = FastMap::default();
    for (at, ((view, value), &(_, _, hash))) in present.iter().zip(&field.values).enumerate() {
        let mut found = 0;
        for id in view.index.candidates(hash) {
            if found >= config.max_locations_per_value {
                break;
            }
            let location = view.index.location(id);
            if location.step >= step || location.value != *value {
                continue;
            }
            found += 1;
            let listed = match (location.side, location.element) {
                (Side::Output, Some(element)) => {
                    view.index.list_pointer(id).map(|lists| (lists, element))
                }
                _ => None,
            };
            let (key, position) = match listed {
                Some(((list_pointer, item_pointer), element)) => (
                    Key::Element {
                        step: location.step,
                        list_pointer,
                        item_pointer,
                    },
                    Some((element.index, element.list_len)),
                ),
                None => (
                    Key::Exact {
                        step: location.step,
                        side: location.side,
                        pointer: view.index.pointer(id),
                    },
                    None,
                ),
            };
            // A key seen twice in one occurrence counts once (`record` keeps the first).
            keys.entry(key)
                .or_insert_with(|| KeyStats::new(n))
                .record(at, position);
        }
        if found == 0 {
            keys.entry(Key::FlowInput)
                .or_insert_with(|| KeyStats::new(n))
                .record(at, None);
            if let Value::String(text) = value
                && text.len() <= config.max_template_len
                && let Some(parts) = find_template(view, step, text, config.min_template_part)
            {
                keys.entry(Key::Template(parts))
                    .or_insert_with(|| KeyStats::new(n))
                    .record(at, None);
            }
        }
    }
    keys
}

/// The field's most common value.
struct CommonValue<'v> {
    value: &'v Value,
    /// The value is the same in every occurrence holding the field, and those are enough to
    /// call it a constant.
    everywhere: bool,
}

/// Find the most common value and, when it repeats often enough, add it as the constant key.
/// `None` only for a field without values.
fn add_constant<'v>(
    keys: &mut FastMap<Key, KeyStats>,
    field: &Field<'v>,
    config: &InferConfig,
) -> Option<CommonValue<'v>> {
    let n = field.values.len();
    let mut values: FastMap<u64, (usize, usize)> = FastMap::default(); // hash -> (count, first at)
    for (at, &(_, _, hash)) in field.values.iter().enumerate() {
        values.entry(hash).or_insert((0, at)).0 += 1;
    }
    let (common_hash, common_count, common_at) = values
        .iter()
        .map(|(&h, &(count, first))| (h, count, first))
        .max_by_key(|&(_, count, first)| (count, Reverse(first)))?;
    let min_constant = config.min_constant_occurrences.max(2);
    if common_count >= min_constant {
        let mut stats = KeyStats::new(n);
        for (at, &(_, _, hash)) in field.values.iter().enumerate() {
            if hash == common_hash {
                stats.record(at, None);
            }
        }
        keys.insert(Key::Constant, stats);
    }
    Some(CommonValue {
        value: field.values[common_at].1,
        everywhere: common_count == n && n >= min_constant,
    })
}

/// The keys in rank order: by count, then kind (step values, templates, constants, flow
/// inputs), the earliest step (its input before its output, which may echo it), a source named
/// like the field, the shorter pointer; a constant value that data flow does not really explain
/// ranks as a constant.
fn rank_keys(
    keys: FastMap<Key, KeyStats>,
    step: usize,
    field_pointer: &str,
    common: &CommonValue<'_>,
) -> Vec<Ranked> {
    let field_name = last_segment_cow(field_pointer);
    let mut ranked: Vec<Ranked> = keys
        .into_iter()
        .map(|(key, stats)| {
            let (class, distance, pointer) = match &key {
                Key::Exact {
                    step: from,
                    side: Side::Output,
                    pointer,
                } => (0, step - from, pointer.clone()),
                Key::Element {
                    step: from,
                    list_pointer,
                    item_pointer,
                } => (0, step - from, format!("{list_pointer}/*{item_pointer}")),
                // A step's input ranks with outputs: the earliest step holding a value is its
                // cause, and a later step holding it (an output that echoes an input, an input
                // copied from an earlier output) only copies it.
                Key::Exact {
                    step: from,
                    side: Side::Input,
                    pointer,
                } => (0, step - from, pointer.clone()),
                Key::Template(_) => (20, 0, String::new()),
                Key::Constant => (30, 0, String::new()),
                Key::FlowInput => (40, 0, String::new()),
            };
            let name_match = match &key {
                Key::Exact { pointer, .. } => last_segment_cow(pointer) == field_name,
                Key::Element {
                    list_pointer,
                    item_pointer,
                    ..
                } => {
                    let named = if item_pointer.is_empty() {
                        list_pointer
                    } else {
                        item_pointer
                    };
                    last_segment_cow(named) == field_name
                }
                _ => false,
            };
            // A constant value that data flow does not really explain stays a constant.
            let class =
                if class < 30 && common.everywhere && !informative(common.value) && !name_match {
                    35
                } else {
                    class
                };
            Ranked {
                key,
                stats,
                class,
                distance,
                name_match,
                pointer,
            }
        })
        .collect();
    // The first occurrence a key holds in ends the ties (two templates never share one), so
    // the order, and with it the alternatives reported, does not depend on hash order.
    ranked.sort_by(|a, b| {
        (
            Reverse(a.stats.count),
            a.class,
            Reverse(a.distance),
            side_rank(&a.key),
            !a.name_match,
            a.pointer.len(),
            &a.pointer,
            a.stats.holds.first(),
        )
            .cmp(&(
                Reverse(b.stats.count),
                b.class,
                Reverse(b.distance),
                side_rank(&b.key),
                !b.name_match,
                b.pointer.len(),
                &b.pointer,
                b.stats.holds.first(),
            ))
    });
    ranked
}

/// Within one step, its input before its output: an output holding an input's value echoes it.
fn side_rank(key: &Key) -> u8 {
    match key {
        Key::Exact {
            side: Side::Input, ..
        } => 0,
        _ => 1,
    }
}

/// "First appears here" is counted wherever no earlier value matches exactly, so it also covers
/// every occurrence a template explains: a template that holds often enough goes first.
fn promote_template(ranked: &mut Vec<Ranked>, n: usize, config: &InferConfig) {
    if ranked.first().is_some_and(|r| r.key == Key::FlowInput)
        && let Some(position) = ranked.iter().position(|r| {
            matches!(r.key, Key::Template(_)) && share(r.stats.count, n) >= config.min_confidence
        })
    {
        let template = ranked.remove(position);
        ranked.insert(0, template);
    }
}

/// The source a field takes, and why it is flagged.
struct Choice {
    /// The ranked key taken (for a flow input when none is trusted: the flow-input key, if any).
    index: Option<usize>,
    source: BindingSource,
    confidence: f64,
    flags: Vec<BindingFlag>,
}

/// Take the best key unless it explains too few occurrences or a different key comes close:
/// then the field becomes a flow input, flagged. `None` only for an empty ranking.
fn choose_source(
    ranked: &[Ranked],
    present: &[(&OccurrenceView<'_>, &Value)],
    pattern: &Pattern,
    occurrences: usize,
    config: &InferConfig,
) -> Option<Choice> {
    let n = present.len();
    let best = ranked.first()?;
    let best_share = share(best.stats.count, n);
    let mut flags = Vec::new();
    let runner_up = ranked.iter().skip(1).find(|r| {
        r.key != Key::FlowInput && r.key != best.key && r.stats.holds != best.stats.holds
    });
    let ambiguous = best.key != Key::FlowInput
        && best.stats.count < n
        && runner_up
            .is_some_and(|r| share(r.stats.count, n) + config.ambiguity_margin >= best_share);
    let chosen = if best.key == Key::FlowInput {
        if best_share < config.min_confidence {
            // Even "first appears here" is rare: the field has no dominant source at all.
            flags.push(BindingFlag::LowConfidence);
        }
        Some(0)
    } else if best_share < config.min_confidence {
        flags.push(BindingFlag::LowConfidence);
        None
    } else if ambiguous {
        flags.push(BindingFlag::Ambiguous);
        None
    } else {
        Some(0)
    };
    let (source, confidence, index) = match chosen {
        Some(i) => (
            to_source(&ranked[i].key, &ranked[i].stats, present, pattern),
            share(ranked[i].stats.count, n),
            Some(i),
        ),
        None => {
            let flow_input = ranked.iter().position(|r| r.key == Key::FlowInput);
            let confidence = flow_input.map_or(0.0, |i| share(ranked[i].stats.count, n));
            (
                BindingSource::FlowInput {
                    name: String::new(),
                },
                confidence,
                flow_input,
            )
        }
    };
    if let BindingSource::ListElement {
        selection: Selection::Chosen,
        ..
    } = source
    {
        flags.push(BindingFlag::AgentChoice);
    }
    if n < occurrences {
        flags.push(BindingFlag::Optional);
    }
    Some(Choice {
        index,
        source,
        confidence,
        flags,
    })
}

fn selection_of(positions: &[(usize, usize)]) -> Selection {
    if positions.iter().all(|&(index, _)| index == 0) {
        Selection::First
    } else if positions.windows(2).all(|w| w[0].0 == w[1].0) {
        // A fixed index is expressible as a pointer; prefer it to "last" when both hold.
        Selection::Index {
            index: positions.first().map_or(0, |p| p.0),
        }
    } else if positions.iter().all(|&(index, len)| index + 1 == len) {
        Selection::Last
    } else {
        Selection::Chosen
    }
}

fn location_source(step: usize, side: Side, pointer: &str) -> BindingSource {
    match side {
        Side::Output => BindingSource::StepOutput {
            step,
            pointer: pointer.to_string(),
        },
        Side::Input => BindingSource::StepInput {
            step,
            pointer: pointer.to_string(),
        },
    }
}

fn to_source(
    key: &Key,
    stats: &KeyStats,
    present: &[(&OccurrenceView<'_>, &Value)],
    pattern: &Pattern,
) -> BindingSource {
    match key {
        Key::Exact {
            step,
            side,
            pointer,
        } => location_source(*step, *side, pointer),
        Key::Element {
            step,
            list_pointer,
            item_pointer,
        } => {
            let positions: Vec<(usize, usize)> =
                stats.positions.iter().flatten().copied().collect();
            BindingSource::ListElement {
                step: *step,
                list_pointer: list_pointer.clone(),
                item_pointer: item_pointer.clone(),
                selection: selection_of(&positions),
            }
        }
        Key::Template(parts) => {
            let mut template = String::new();
            let mut slots: Vec<TemplateSlot> = Vec::new();
            for part in parts {
                match part {
                    Part::Literal(text) => template.push_str(text),
                    Part::Slot {
                        step,
                        side,
                        pointer,
                    } => {
                        let source = location_source(*step, *side, pointer);
                        let name = match slots.iter().find(|s| s.source == source) {
                            Some(slot) => slot.name.clone(),
                            None => {
                                let base = match last_segment(pointer) {
                                    s if s.is_empty() => pattern.tools[*step].clone(),
                                    s => s,
                                };
                                let mut name = base.clone();
                                let mut n = 2;
                                while slots.iter().any(|s| s.name == name) {
                                    name = format!("{base}_{n}");
                                    n += 1;
                                }
                                slots.push(TemplateSlot {
                                    name: name.clone(),
                                    source,
                                });
                                name
                            }
                        };
                        template.push_str("{{");
                        template.push_str(&name);
                        template.push_str("}}");
                    }
                }
            }
            BindingSource::Template { template, slots }
        }
        Key::Constant => {
            let at = stats.holds.first().copied().unwrap_or(0);
            BindingSource::Constant {
                value: present.get(at).map_or(Value::Null, |(_, v)| (*v).clone()),
            }
        }
        Key::FlowInput => BindingSource::FlowInput {
            name: String::new(),
        },
    }
}
