//! Template search: a string input that embeds earlier values (`"Deployed to prod"` after an
//! earlier `env = "prod"`) becomes literal text plus slots.

use std::cmp::Reverse;

use super::OccurrenceView;
use super::index::{LocationId, Side};

/// One part of a template found in one occurrence.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Part {
    Literal(String),
    Slot {
        step: usize,
        side: Side,
        pointer: String,
    },
}

/// Byte offsets where `word` stands in `text` as a word of its own: no letter, digit or joiner
/// (`-`, `_`, `.`) right before or after it.
fn whole_word_matches(text: &str, word: &str) -> Vec<usize> {
    let joins = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.');
    text.match_indices(word)
        .map(|(start, _)| start)
        .filter(|&start| {
            let before = text[..start].chars().next_back();
            let after = text[start + word.len()..].chars().next();
            !before.is_some_and(joins) && !after.is_some_and(joins)
        })
        .collect()
}

/// Split `text` (an input of pattern step `step`) into literal text and earlier values, longest
/// values first, outputs before inputs, nearer steps first. `None` when no earlier value of at
/// least `min_part` bytes occurs in it.
pub(crate) fn find_template(
    view: &OccurrenceView<'_>,
    step: usize,
    text: &str,
    min_part: usize,
) -> Option<Vec<Part>> {
    let mut found: Vec<(&str, LocationId)> = Vec::new();
    for leaf in view.index.text_leaves() {
        // Cheapest tests first: this runs for every leaf of every earlier payload.
        if leaf.step >= step || leaf.text.is_empty() || leaf.text.len() >= text.len() {
            continue;
        }
        let short_number = leaf.text.len() < min_part && leaf.number;
        // Short numbers (a temperature, a count) only fill a whole word of the text: `17` in
        // "Lisbon: 17 degrees", never the `17` inside `2017` or `id-17`.
        let fits = if leaf.text.len() >= min_part {
            text.contains(leaf.text)
        } else {
            short_number && !whole_word_matches(text, leaf.text).is_empty()
        };
        if fits {
            found.push((leaf.text, leaf.id));
        }
    }
    if found.is_empty() {
        return None;
    }
    let mut found: Vec<(&str, LocationId, String)> = found
        .into_iter()
        .map(|(leaf, id)| (leaf, id, view.index.pointer(id)))
        .collect();
    found.sort_by(|(a_leaf, a_id, a_pointer), (b_leaf, b_id, b_pointer)| {
        let a = view.index.location(*a_id);
        let b = view.index.location(*b_id);
        (
            Reverse(a_leaf.len()),
            a.side != Side::Output,
            Reverse(a.step),
            a_pointer.len(),
            a_pointer,
        )
            .cmp(&(
                Reverse(b_leaf.len()),
                b.side != Side::Output,
                Reverse(b.step),
                b_pointer.len(),
                b_pointer,
            ))
    });
    // Claimed byte ranges of `text`, each with the location filling it.
    let mut claimed: Vec<(usize, usize, usize)> = Vec::new();
    for (number, (leaf, _, _)) in found.iter().enumerate() {
        let starts: Vec<usize> = if leaf.len() >= min_part {
            text.match_indices(leaf).map(|(start, _)| start).collect()
        } else {
            whole_word_matches(text, leaf)
        };
        for start in starts {
            let end = start + leaf.len();
            if claimed.iter().all(|&(s, e, _)| end <= s || start >= e) {
                claimed.push((start, end, number));
            }
        }
    }
    claimed.sort_unstable();
    let mut parts = Vec::new();
    let mut at = 0;
    for (start, end, number) in claimed {
        if start > at {
            parts.push(Part::Literal(text[at..start].to_string()));
        }
        let (_, id, pointer) = &found[number];
        let location = view.index.location(*id);
        parts.push(Part::Slot {
            step: location.step,
            side: location.side,
            pointer: pointer.clone(),
        });
        at = end;
    }
    if at < text.len() {
        parts.push(Part::Literal(text[at..].to_string()));
    }
    Some(parts)
}
