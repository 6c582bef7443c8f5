//! Wiring: how each binding's source reaches its field through the flow's context, and the
//! input mapping of each step built from those wires.

use std::collections::{HashMap, HashSet};

use chainweaver_recorder::model::candidate::{Binding, BindingFlag, BindingSource, Selection};
use serde_json::{Map, Value, json};

use crate::infer::OccurrenceView;
use crate::infer::index::{escape_segment, lookup, split_first_segment, unescape_segment};

/// Where a mapped value comes from in the flow's context.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Wire {
    /// A context key, plus a pointer inside its value.
    Context {
        key: String,
        suffix: String,
    },
    Literal(Value),
}

#[derive(Debug, Default)]
pub(super) struct FlowInput<'v> {
    /// Per occurrence, the value the caller would have passed.
    pub(super) values: Vec<Option<&'v Value>>,
    pub(super) default: Option<Value>,
}

/// The flow being wired: step ids, flow inputs, the context keys each step's outputs land
/// under, and what each step waits for.
pub(super) struct Builder<'a, 'v> {
    pub(super) views: &'a [OccurrenceView<'v>],
    pub(super) step_ids: Vec<String>,
    /// Output is an object in the occurrences (else it is wrapped as `{"result": ...}`).
    pub(super) object_output: Vec<bool>,
    pub(super) inputs: Vec<(String, FlowInput<'v>)>,
    used_names: HashSet<String>,
    /// Per step: context key -> output key.
    pub(super) output_keys: Vec<Vec<(String, String)>>,
    pub(super) depends: Vec<HashSet<usize>>,
}

impl<'a, 'v> Builder<'a, 'v> {
    /// A builder for a pattern calling `tools`, observed in `views`; the flow inputs the
    /// bindings name are reserved, so fresh inputs do not take their names.
    pub(super) fn new(
        views: &'a [OccurrenceView<'v>],
        tools: &[String],
        bindings: &[Binding],
    ) -> Self {
        let len = tools.len();
        Builder {
            views,
            step_ids: step_ids(tools),
            object_output: object_outputs(views, len),
            inputs: Vec::new(),
            used_names: bindings
                .iter()
                .filter_map(|b| match &b.source {
                    BindingSource::FlowInput { name } => Some(name.clone()),
                    _ => None,
                })
                .collect(),
            output_keys: vec![Vec::new(); len],
            depends: vec![HashSet::new(); len],
        }
    }
}

/// Step ids: the tool names, numbered from the second call of a tool (`get_order_2`).
fn step_ids(tools: &[String]) -> Vec<String> {
    let mut step_ids = Vec::with_capacity(tools.len());
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for tool in tools {
        let n = seen.entry(tool.as_str()).or_insert(0);
        *n += 1;
        step_ids.push(if *n == 1 {
            tool.clone()
        } else {
            format!("{tool}_{n}")
        });
    }
    step_ids
}

/// Per step, whether its output is an object in the occurrences (a step that never returned
/// counts as one); other outputs are seen as `{"result": ...}`.
fn object_outputs(views: &[OccurrenceView<'_>], len: usize) -> Vec<bool> {
    (0..len)
        .map(|s| {
            views
                .iter()
                .find_map(|v| v.outputs[s])
                .is_none_or(Value::is_object)
        })
        .collect()
}

impl<'v> Builder<'_, 'v> {
    fn field_values(&self, step: usize, pointer: &str) -> Vec<Option<&'v Value>> {
        self.views
            .iter()
            .map(|v| {
                let steps: &'v [&'v chainweaver_recorder::model::ObservedStep] = v.steps;
                lookup(&steps[step].inputs, pointer)
            })
            .collect()
    }

    fn fresh_input(&mut self, base: &str, values: Vec<Option<&'v Value>>) -> String {
        let base = if base.is_empty() { "input" } else { base };
        let mut name = base.to_string();
        let mut n = 2;
        while self.used_names.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.used_names.insert(name.clone());
        self.inputs.push((
            name.clone(),
            FlowInput {
                values,
                default: None,
            },
        ));
        name
    }

    fn named_input(&mut self, name: &str, values: Vec<Option<&'v Value>>) {
        if !self.inputs.iter().any(|(n, _)| n == name) {
            self.used_names.insert(name.to_string());
            self.inputs.push((
                name.to_string(),
                FlowInput {
                    values,
                    default: None,
                },
            ));
        }
    }

    /// Wire a value at `pointer` of step `from`'s normalized output into step `to`.
    fn output_wire(&mut self, to: usize, from: usize, pointer: &str) -> Option<Wire> {
        let step_id = &self.step_ids[from];
        let (output_key, suffix) = if self.object_output[from] {
            let (key, tail) = split_first_segment(pointer)?;
            (key.into_owned(), tail.to_string())
        } else {
            ("result".to_string(), pointer.to_string())
        };
        let context_key = format!("{step_id}.{output_key}");
        if !self.output_keys[from]
            .iter()
            .any(|(c, _)| *c == context_key)
        {
            self.output_keys[from].push((context_key.clone(), output_key));
        }
        self.depends[to].insert(from);
        Some(Wire::Context {
            key: context_key,
            suffix,
        })
    }
}

fn with_index(list_pointer: &str, index: usize, item_pointer: &str) -> String {
    format!("{list_pointer}/{index}{item_pointer}")
}

fn wire_to_mapping(wire: &Wire) -> Value {
    match wire {
        Wire::Context { key, suffix } if suffix.is_empty() && !key.starts_with('/') => {
            Value::String(key.clone())
        }
        Wire::Context { key, suffix } => Value::String(format!("/{}{suffix}", escape_segment(key))),
        Wire::Literal(value) => value.clone(),
    }
}

fn set_pointer(target: &mut Value, pointer: &str, value: Value) {
    let mut node = target;
    let segments: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|s| unescape_segment(s).into_owned())
        .collect();
    for (i, segment) in segments.iter().enumerate() {
        if !node.is_object() {
            *node = Value::Object(Map::new());
        }
        let Value::Object(map) = node else { return };
        if i + 1 == segments.len() {
            map.insert(segment.clone(), value);
            return;
        }
        node = map
            .entry(segment.clone())
            .or_insert(Value::Object(Map::new()));
    }
}

fn top_key(field: &str) -> String {
    let rest = field.strip_prefix('/').unwrap_or(field);
    unescape_segment(rest.split('/').next().unwrap_or("")).into_owned()
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// How each binding's source reaches its field through the context (`None` when no mapping can
/// express it), and the template bindings listed for the flow's metadata.
pub(super) fn wire_bindings(
    builder: &mut Builder<'_, '_>,
    bindings: &[Binding],
) -> (Vec<Option<Wire>>, Vec<Value>) {
    let mut wires: Vec<Option<Wire>> = Vec::with_capacity(bindings.len());
    let mut templates = Vec::new();
    for i in 0..bindings.len() {
        let binding = &bindings[i];
        let wire = match &binding.source {
            BindingSource::FlowInput { name } => {
                let values = builder.field_values(binding.step, &binding.field);
                builder.named_input(name, values);
                Some(Wire::Context {
                    key: name.clone(),
                    suffix: String::new(),
                })
            }
            BindingSource::StepOutput { step, pointer } => {
                builder.output_wire(binding.step, *step, pointer)
            }
            BindingSource::StepInput { step, pointer } => {
                // Same value as an earlier step's argument: wire it like that argument.
                let earlier = bindings[..i].iter().zip(&wires).find_map(|(b, w)| {
                    let suffix = pointer.strip_prefix(b.field.as_str())?;
                    (b.step == *step && (suffix.is_empty() || suffix.starts_with('/')))
                        .then_some((w.clone(), suffix.to_string()))
                });
                match earlier {
                    Some((Some(Wire::Context { key, suffix }), more)) => {
                        let origin = builder
                            .output_keys
                            .iter()
                            .position(|keys| keys.iter().any(|(c, _)| *c == key));
                        if let Some(origin) = origin {
                            builder.depends[binding.step].insert(origin);
                        }
                        Some(Wire::Context {
                            key,
                            suffix: format!("{suffix}{more}"),
                        })
                    }
                    Some((Some(Wire::Literal(value)), more)) => {
                        let inner = if more.is_empty() {
                            Some(value)
                        } else {
                            lookup(&value, &more).cloned()
                        };
                        inner.map(Wire::Literal)
                    }
                    _ => None,
                }
            }
            BindingSource::Constant { value } => Some(Wire::Literal(value.clone())),
            BindingSource::ListElement {
                step,
                list_pointer,
                item_pointer,
                selection,
            } => match selection {
                Selection::First => builder.output_wire(
                    binding.step,
                    *step,
                    &with_index(list_pointer, 0, item_pointer),
                ),
                Selection::Index { index } => builder.output_wire(
                    binding.step,
                    *step,
                    &with_index(list_pointer, *index, item_pointer),
                ),
                Selection::Last | Selection::Chosen => None,
            },
            BindingSource::Map {
                step,
                list_pointer,
                item_pointer,
                index,
                ..
            } => builder.output_wire(
                binding.step,
                *step,
                &with_index(list_pointer, *index, item_pointer),
            ),
            // Loop candidates are rewritten from built ones (the loops module), never wired here.
            BindingSource::Each { .. } => None,
            BindingSource::Template { template, .. } => {
                templates.push(json!({
                    "step": builder.step_ids[binding.step],
                    "field": binding.field,
                    "template": template,
                }));
                None
            }
        };
        wires.push(wire);
    }
    (wires, templates)
}

/// Each step's input mapping, top-level key by top-level key, and the string constants carried
/// as flow inputs; a key no wire expresses becomes a flow input, its bindings flagged.
pub(super) fn input_mappings(
    builder: &mut Builder<'_, '_>,
    bindings: &mut [Binding],
    wires: &[Option<Wire>],
) -> (Vec<Map<String, Value>>, Vec<Value>) {
    let len = builder.step_ids.len();
    let mut mappings: Vec<Map<String, Value>> = vec![Map::new(); len];
    let mut constants = StringConstants::default();
    for (step, mapping) in mappings.iter_mut().enumerate() {
        let members: Vec<usize> = (0..bindings.len())
            .filter(|&i| bindings[i].step == step)
            .collect();
        let mut keys: Vec<String> = Vec::new();
        for &i in &members {
            let key = top_key(&bindings[i].field);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        for key in keys {
            let group: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&i| top_key(&bindings[i].field) == key)
                .collect();
            let whole = format!("/{}", escape_segment(&key));
            let single = group.len() == 1 && bindings[group[0]].field == whole;
            let mapped = if single {
                let i = group[0];
                match (&wires[i], &bindings[i].source) {
                    (Some(Wire::Literal(Value::String(text))), _) => {
                        // A string in input_mapping is a context reference: carry the
                        // constant as a flow input with a default (one input per field name
                        // and value, however many steps take it).
                        let name = constants.input(builder, step, &key, &whole, text);
                        Some(Wire::Context {
                            key: name,
                            suffix: String::new(),
                        })
                    }
                    (Some(wire), _) => Some(wire.clone()),
                    (None, _) => None,
                }
            } else if group
                .iter()
                .all(|&i| matches!(wires[i], Some(Wire::Literal(_))))
            {
                let mut object = Value::Object(Map::new());
                for &i in &group {
                    if let Some(Wire::Literal(value)) = &wires[i] {
                        let inner = &bindings[i].field[whole.len()..];
                        set_pointer(&mut object, inner, value.clone());
                    }
                }
                Some(Wire::Literal(object))
            } else {
                None
            };
            let wire = match mapped {
                Some(wire) => wire,
                None => {
                    for &i in &group {
                        if !bindings[i].flags.contains(&BindingFlag::AgentChoice)
                            && !bindings[i].flags.contains(&BindingFlag::NotExpressible)
                        {
                            bindings[i].flags.push(BindingFlag::NotExpressible);
                        }
                    }
                    let values = builder.field_values(step, &whole);
                    let name = builder.fresh_input(&sanitize(&key), values);
                    Wire::Context {
                        key: name,
                        suffix: String::new(),
                    }
                }
            };
            mapping.insert(key, wire_to_mapping(&wire));
        }
    }
    (mappings, constants.listed)
}

/// String constants carried as flow inputs with a default: a string in `input_mapping` is a
/// context reference, so a constant cannot be a literal.
#[derive(Default)]
struct StringConstants {
    /// (field name, value) -> the flow input carrying it.
    names: HashMap<(String, String), String>,
    /// `{"input": name, "value": text}` for the flow's metadata.
    listed: Vec<Value>,
}

impl StringConstants {
    /// The flow input carrying `text` to top-level `key` (at `whole`) of `step`'s arguments:
    /// one input per field name and value, however many steps take it.
    fn input(
        &mut self,
        builder: &mut Builder<'_, '_>,
        step: usize,
        key: &str,
        whole: &str,
        text: &str,
    ) -> String {
        if let Some(name) = self.names.get(&(key.to_string(), text.to_string())) {
            return name.clone();
        }
        let values = builder.field_values(step, whole);
        let name = builder.fresh_input(&sanitize(key), values);
        if let Some((_, input)) = builder.inputs.last_mut() {
            input.default = Some(Value::String(text.to_string()));
        }
        self.listed.push(json!({"input": name, "value": text}));
        self.names
            .insert((key.to_string(), text.to_string()), name.clone());
        name
    }
}
