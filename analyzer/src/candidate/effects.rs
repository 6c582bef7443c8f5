//! Side-effect guesses, from tool names and observed behaviour.

use std::collections::BTreeMap;

use chainweaver_recorder::model::candidate::{Effect, StepEffect, ToolDeterminism};

use super::profile::ToolProfiles;

/// Verbs that name a read.
const READ_VERBS: &[&str] = &[
    "get",
    "find",
    "list",
    "search",
    "fetch",
    "read",
    "query",
    "lookup",
    "describe",
    "show",
    "view",
    "check",
    "count",
    "calculate",
    "validate",
    "inspect",
    "retrieve",
    "load",
    "think",
];

/// Verbs that name a change to the world.
const WRITE_VERBS: &[&str] = &[
    "create", "update", "delete", "cancel", "modify", "exchange", "return", "transfer", "send",
    "put", "post", "patch", "set", "add", "remove", "write", "insert", "upsert", "pay", "refund",
    "submit", "publish", "deploy", "charge", "approve", "reject", "move", "rename", "upload",
    "save", "reset", "grant", "revoke", "execute", "run",
];

/// Lower-case words of a tool name: split on `_`, `-`, `.`, `/`, spaces and camelCase humps.
pub(crate) fn name_tokens(name: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                tokens.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            tokens.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

/// Guess a tool's effect from its name (the leading verb decides; otherwise any write verb in
/// the name, then any read verb), then from its determinism when the name says nothing.
pub(crate) fn guess_effect(tool: &str, determinism: Option<&ToolDeterminism>) -> (Effect, String) {
    let tokens = name_tokens(tool);
    if let Some(first) = tokens.first() {
        if WRITE_VERBS.contains(&first.as_str()) {
            return (Effect::SideEffect, format!("name starts with `{first}`"));
        }
        if READ_VERBS.contains(&first.as_str()) {
            return (Effect::ReadOnly, format!("name starts with `{first}`"));
        }
    }
    if let Some(verb) = tokens.iter().find(|t| WRITE_VERBS.contains(&t.as_str())) {
        return (Effect::SideEffect, format!("name contains `{verb}`"));
    }
    if let Some(verb) = tokens.iter().find(|t| READ_VERBS.contains(&t.as_str())) {
        return (Effect::ReadOnly, format!("name contains `{verb}`"));
    }
    match determinism {
        Some(d) if d.repeated_inputs > 0 && d.consistent == d.repeated_inputs => (
            Effect::ReadOnly,
            format!(
                "name says nothing; same inputs gave the same output for all {} repeated inputs",
                d.repeated_inputs
            ),
        ),
        Some(d) if d.repeated_inputs > 0 => (
            Effect::Unknown,
            format!(
                "name says nothing; outputs differed for {} of {} repeated inputs",
                d.repeated_inputs - d.consistent,
                d.repeated_inputs
            ),
        ),
        _ => (
            Effect::Unknown,
            "name says nothing and no call was repeated".to_string(),
        ),
    }
}

/// What the profiles say about a pattern's tools: determinism per tool, and each step's effect.
pub(super) struct ToolBehaviour {
    pub(super) determinism: BTreeMap<String, ToolDeterminism>,
    pub(super) effects: Vec<StepEffect>,
}

impl ToolBehaviour {
    /// Each tool's determinism from `profiles`, then each step's effect guessed from its tool.
    pub(super) fn of(tools: &[String], profiles: &ToolProfiles) -> Self {
        let mut determinism = BTreeMap::new();
        for tool in tools {
            if !determinism.contains_key(tool) {
                determinism.insert(tool.clone(), profiles.determinism(tool));
            }
        }
        let effects: Vec<StepEffect> = tools
            .iter()
            .enumerate()
            .map(|(step, tool)| {
                let (effect, reason) = guess_effect(tool, determinism.get(tool));
                StepEffect {
                    step,
                    tool_name: tool.clone(),
                    effect,
                    reason,
                }
            })
            .collect();
        ToolBehaviour {
            determinism,
            effects,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_and_verbs_decide() {
        assert_eq!(
            name_tokens("getUserDetails"),
            vec!["get", "user", "details"]
        );
        assert_eq!(
            name_tokens("find_user_id-by.zip"),
            vec!["find", "user", "id", "by", "zip"]
        );
        assert_eq!(guess_effect("get_user_details", None).0, Effect::ReadOnly);
        assert_eq!(
            guess_effect("cancel_pending_order", None).0,
            Effect::SideEffect
        );
        assert_eq!(guess_effect("get_order_details", None).0, Effect::ReadOnly);
        assert_eq!(guess_effect("user_delete", None).0, Effect::SideEffect);
        assert_eq!(guess_effect("transform", None).0, Effect::Unknown);
        let stable = ToolDeterminism {
            calls: 4,
            repeated_inputs: 1,
            consistent: 1,
            ratio: Some(1.0),
        };
        assert_eq!(guess_effect("transform", Some(&stable)).0, Effect::ReadOnly);
    }
}
