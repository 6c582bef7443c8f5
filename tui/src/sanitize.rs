//! Making untrusted text safe to draw: payloads come from agents and tools, so they may hold
//! escape sequences that would drive the terminal, or lines megabytes long.

/// The most characters of one line the browser keeps; the rest is replaced by a count.
pub const MAX_LINE_CHARS: usize = 2_000;

/// `text` with every control character (and the bidirectional overrides that reorder what the
/// reader sees) written as a visible escape such as `\u{1b}`, cut to `max_chars` characters with
/// a marker saying how many were left out. Never returns a control character.
pub fn escape_line(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars * 2) + 16);
    for (kept, (at, ch)) in text.char_indices().enumerate() {
        if kept >= max_chars {
            let left = text[at..].chars().count();
            out.push_str(&format!("... (+{left} chars)"));
            return out;
        }
        push_escaped(&mut out, ch);
    }
    out
}

/// [`escape_line`] with the default limit [`MAX_LINE_CHARS`].
pub fn escape(text: &str) -> String {
    escape_line(text, MAX_LINE_CHARS)
}

/// True for characters that must never reach the terminal as they are.
pub fn needs_escape(ch: char) -> bool {
    ch.is_control()
        || matches!(ch, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn push_escaped(out: &mut String, ch: char) {
    match ch {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\0' => out.push_str("\\0"),
        c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_visibly() {
        let shown = escape("a\u{1b}[31mred\0\r\nx\u{7f}\u{9b}\u{202e}");
        assert_eq!(shown, "a\\u{1b}[31mred\\0\\r\\nx\\u{7f}\\u{9b}\\u{202e}");
        assert!(!shown.chars().any(needs_escape));
    }

    #[test]
    fn long_lines_are_cut_with_a_count() {
        let line = "é".repeat(5_000);
        let shown = escape_line(&line, 10);
        assert_eq!(shown, format!("{}... (+4990 chars)", "é".repeat(10)));
        assert_eq!(escape_line("short", 10), "short");
        assert_eq!(escape_line("exactly10!", 10), "exactly10!");
    }
}
