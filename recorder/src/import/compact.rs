//! Compact JSON text without building a `Value`: the text `serde_json` would write for the
//! `Value` a JSON text parses into (with `preserve_order` and `arbitrary_precision`), made from
//! the text itself.
//!
//! What parsing into a `Value` and writing it back changes, and so what this rewrites:
//! - whitespace between tokens is dropped;
//! - strings are unescaped and escaped again the way `serde_json` writes them (`\"`, `\\`,
//!   `\b`, `\f`, `\n`, `\r`, `\t`, other control characters as `\u00xx`, everything else as
//!   UTF-8, so `\u00e9` becomes `é` and `\/` becomes `/`);
//! - number text is kept, except an exponent, which `serde_json` writes as `e` with an explicit
//!   sign (`1E5` becomes `1e+5`).
//!
//! What this refuses (the caller then takes the `Value` path, which decides): an object with a
//! repeated key (a `Value` keeps one of them), escapes that are not a valid character (a lone
//! surrogate), a raw control character in a string, nesting deeper than [`MAX_DEPTH`] (the
//! `Value` parser has a depth limit), and anything that is not JSON.

/// Deeper payloads are left to the `Value` path, whose parser stops at 128 levels for the whole
/// record.
pub(crate) const MAX_DEPTH: usize = 100;

/// Reusable working memory for [`write_compact`].
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// Per open container: whether it is an object, and where its keys start in `keys`.
    frames: Vec<(bool, usize)>,
    /// Spans (in the output) of the keys of the open objects.
    keys: Vec<(usize, usize)>,
    /// An unescaped string being re-escaped.
    string: String,
}

/// Appends to `out` the compact text `serde_json` writes for `text` parsed into a `Value`.
/// Returns false (with `out` as it was) when the `Value` path has to decide (see the module).
pub(crate) fn write_compact(text: &str, out: &mut String, scratch: &mut Scratch) -> bool {
    let start = out.len();
    scratch.frames.clear();
    scratch.keys.clear();
    if compact(text.as_bytes(), text, out, scratch).is_none() || !scratch.frames.is_empty() {
        out.truncate(start);
        return false;
    }
    true
}

/// The work of [`write_compact`]; `None` refuses.
fn compact(bytes: &[u8], text: &str, out: &mut String, scratch: &mut Scratch) -> Option<()> {
    // `run` is where the bytes not yet copied to `out` start: unchanged text is copied in runs.
    let mut run = 0;
    let mut i = 0;
    let mut expect_key = false;
    let mut seen_value = false;
    while i < bytes.len() {
        match bytes[i] {
            b' ' | b'\t' | b'\n' | b'\r' => {
                out.push_str(text.get(run..i)?);
                while i < bytes.len() && matches!(bytes[i], b' ' | b'\t' | b'\n' | b'\r') {
                    i += 1;
                }
                run = i;
            }
            b'"' => {
                let is_key = expect_key;
                expect_key = false;
                let (end, plain) = string_end(bytes, i + 1)?;
                if is_key || !plain {
                    out.push_str(text.get(run..i)?);
                    let key_start = out.len();
                    if plain {
                        out.push_str(text.get(i..=end)?);
                    } else {
                        unescape(text.get(i + 1..end)?, &mut scratch.string)?;
                        escape(&scratch.string, out);
                    }
                    if is_key {
                        scratch.keys.push((key_start, out.len()));
                    }
                    run = end + 1;
                }
                i = end + 1;
                seen_value |= !is_key;
            }
            b'{' | b'[' => {
                let is_object = bytes[i] == b'{';
                if scratch.frames.len() >= MAX_DEPTH {
                    return None;
                }
                scratch.frames.push((is_object, scratch.keys.len()));
                expect_key = is_object;
                i += 1;
            }
            b'}' | b']' => {
                let (is_object, first_key) = scratch.frames.pop()?;
                if is_object != (bytes[i] == b'}') {
                    return None;
                }
                if is_object {
                    // The keys are in their final (compact) form, so equal text is an equal key.
                    let keys = scratch.keys.get(first_key..)?;
                    if has_repeat(keys, out) {
                        return None;
                    }
                    scratch.keys.truncate(first_key);
                }
                expect_key = false;
                seen_value = true;
                i += 1;
            }
            b',' => {
                expect_key = scratch
                    .frames
                    .last()
                    .is_some_and(|&(is_object, _)| is_object);
                i += 1;
            }
            b':' => i += 1,
            b'-' | b'0'..=b'9' => {
                while i < bytes.len() {
                    match bytes[i] {
                        b'0'..=b'9' | b'-' | b'+' | b'.' => i += 1,
                        b'e' | b'E' => {
                            out.push_str(text.get(run..i)?);
                            out.push('e');
                            i += 1;
                            if !matches!(bytes.get(i), Some(b'+' | b'-')) {
                                out.push('+');
                            }
                            run = i;
                        }
                        _ => break,
                    }
                }
                seen_value = true;
            }
            b't' | b'n' => {
                let word: &[u8] = if bytes[i] == b't' { b"true" } else { b"null" };
                (bytes.get(i..i + 4)? == word).then_some(())?;
                i += 4;
                seen_value = true;
            }
            b'f' => {
                (bytes.get(i..i + 5)? == b"false").then_some(())?;
                i += 5;
                seen_value = true;
            }
            _ => return None,
        }
    }
    out.push_str(text.get(run..)?);
    seen_value.then_some(())
}

/// The index of the quote closing the string whose contents start at `from`, and whether the
/// string has no escapes; `None` at a raw control character or the end of the text.
fn string_end(bytes: &[u8], from: usize) -> Option<(usize, bool)> {
    let mut i = from;
    let mut plain = true;
    loop {
        match *bytes.get(i)? {
            b'"' => return Some((i, plain)),
            b'\\' => {
                plain = false;
                i += 2;
            }
            0..=0x1f => return None,
            _ => i += 1,
        }
    }
}

/// True when two of `keys` (spans of `out`) have the same text.
fn has_repeat(keys: &[(usize, usize)], out: &str) -> bool {
    let key = |&(a, b): &(usize, usize)| out.get(a..b).unwrap_or_default();
    if keys.len() <= 16 {
        return keys
            .iter()
            .enumerate()
            .any(|(n, k)| keys[..n].iter().any(|earlier| key(earlier) == key(k)));
    }
    let mut sorted: Vec<&str> = keys.iter().map(key).collect();
    sorted.sort_unstable();
    sorted.windows(2).any(|pair| pair[0] == pair[1])
}

/// Decodes the contents of a JSON string (between its quotes) into `into`; `None` when an escape
/// is not a character.
fn unescape(contents: &str, into: &mut String) -> Option<()> {
    into.clear();
    let mut rest = contents;
    while let Some(at) = rest.find('\\') {
        into.push_str(rest.get(..at)?);
        let escape = rest.get(at + 1..)?;
        let simple = match escape.bytes().next()? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => '\0',
            _ => return None,
        };
        let consumed = if escape.starts_with('u') {
            let high = hex4(escape.get(1..5)?)?;
            match high {
                0xD800..=0xDBFF => {
                    // A surrogate pair: `\uD83D\uDE00`.
                    if escape.get(5..7)? != "\\u" {
                        return None;
                    }
                    let low = hex4(escape.get(7..11)?)?;
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return None;
                    }
                    into.push(char::from_u32(
                        0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00),
                    )?);
                    11
                }
                0xDC00..=0xDFFF => return None,
                _ => {
                    into.push(char::from_u32(high)?);
                    5
                }
            }
        } else {
            into.push(simple);
            1
        };
        rest = escape.get(consumed..)?;
    }
    into.push_str(rest);
    Some(())
}

fn hex4(digits: &str) -> Option<u32> {
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// Writes `s` as a JSON string the way `serde_json` does.
fn escape(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let mut run = 0;
    for (i, byte) in s.bytes().enumerate() {
        let escaped = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0c => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[run..i]);
        if escaped.is_empty() {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        } else {
            out.push_str(escaped);
        }
        run = i + 1;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// What the `Value` path stores for `text`, or `None` when it cannot parse it.
    fn through_value(text: &str) -> Option<String> {
        serde_json::from_str::<Value>(text)
            .ok()
            .map(|v| v.to_string())
    }

    fn compacted(text: &str) -> Option<String> {
        let mut out = String::from("prefix");
        let ok = write_compact(text, &mut out, &mut Scratch::default());
        if !ok {
            assert_eq!(out, "prefix", "a refusal leaves the output as it was");
            return None;
        }
        Some(out["prefix".len()..].to_owned())
    }

    #[test]
    fn compact_text_is_what_the_value_path_writes() {
        for text in [
            r#"{"b":1.0,"a":[1,2,{"c":null}],"d":"x"}"#,
            " { \"b\" : 1.50 ,\n\t\"a\" : [ 1 , true , false , null ] } ",
            r#"{"s":"\u00e9\/\n\t\"\\\b\f\r\u0001\u001F\u007f\ud83d\ude00 é"}"#,
            r#"{"\u0041":"key escapes","B":2}"#,
            r#"[-0,-0.0,1e400,1E5,1e-7,2.5E+3,0.000000000000000000000000000000000000001300167387880023,12345678901234567890123]"#,
            r#""just a string""#,
            "-12",
            "[]",
            "{}",
            "[ ]",
            "{ }",
        ] {
            assert_eq!(compacted(text), through_value(text), "{text}");
        }
    }

    #[test]
    fn what_a_value_would_change_is_refused() {
        for text in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,"\u0061":2}"#,
            r#"{"x":{"a":1,"b":2,"a":3}}"#,
            r#""\ud800""#,
            r#""\udc00x""#,
            "\"a\u{1}b\"",
            r#"{"a":1"#,
            "",
            "tru",
            "[1]]",
        ] {
            assert_eq!(compacted(text), None, "{text:?}");
        }
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(compacted(&deep), None);
        let fine = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(compacted(&fine), through_value(&fine));
    }

    #[test]
    fn many_keys_are_checked_for_repeats() {
        let keys: Vec<String> = (0..40).map(|n| format!("\"k{n}\":{n}")).collect();
        let unique = format!("{{{}}}", keys.join(","));
        assert_eq!(compacted(&unique), through_value(&unique));
        let repeated = format!("{{{},\"k7\":0}}", keys.join(","));
        assert_eq!(compacted(&repeated), None);
    }

    /// Parses like a `Value` but fails on an object with a repeated key.
    struct NoRepeatedKeys;

    impl<'de> serde::Deserialize<'de> for NoRepeatedKeys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = NoRepeatedKeys;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("JSON")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Self::Value, A::Error> {
                    let mut keys = std::collections::HashSet::new();
                    while let Some(key) = map.next_key::<String>()? {
                        if !keys.insert(key) {
                            return Err(serde::de::Error::custom("repeated key"));
                        }
                        map.next_value::<NoRepeatedKeys>()?;
                    }
                    Ok(NoRepeatedKeys)
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(
                    self,
                    mut seq: A,
                ) -> Result<Self::Value, A::Error> {
                    while seq.next_element::<NoRepeatedKeys>()?.is_some() {}
                    Ok(NoRepeatedKeys)
                }
                fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                    Ok(NoRepeatedKeys)
                }
                fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                    Ok(NoRepeatedKeys)
                }
                fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                    Ok(NoRepeatedKeys)
                }
                fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                    Ok(NoRepeatedKeys)
                }
                fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                    Ok(NoRepeatedKeys)
                }
                fn visit_unit<E>(self) -> Result<Self::Value, E> {
                    Ok(NoRepeatedKeys)
                }
            }
            d.deserialize_any(Visit)
        }
    }

    fn json_text() -> impl Strategy<Value = String> {
        let space = prop_oneof![Just(""), Just(""), Just(" "), Just("\n\t ")];
        let number = prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{f:e}")),
            (
                0u32..100,
                0u32..1000,
                -400i32..400,
                any::<bool>(),
                any::<bool>()
            )
                .prop_map(|(a, b, e, upper, plus)| {
                    let e_char = if upper { 'E' } else { 'e' };
                    let sign = if plus && e >= 0 { "+" } else { "" };
                    format!("{a}.{b}{e_char}{sign}{e}")
                }),
            Just("-0".to_owned()),
        ];
        let string = prop_oneof![
            "[a-z\u{e9}\u{1F600} ]{0,6}".prop_map(|s| format!("\"{s}\"")),
            Just(r#""\u00e9\/\n\u0000\"\\""#.to_owned()),
            Just(r#""\uD83D\uDE00""#.to_owned()),
            Just(r#""\ud800""#.to_owned()),
        ];
        let leaf = prop_oneof![
            number,
            string.clone(),
            Just("true".to_owned()),
            Just("null".to_owned()),
        ];
        leaf.prop_recursive(4, 32, 6, move |inner| {
            let space = space.clone();
            prop_oneof![
                (prop::collection::vec(inner.clone(), 0..5), space.clone())
                    .prop_map(|(items, s)| format!("[{s}{}{s}]", items.join(&format!("{s},{s}")))),
                (
                    prop::collection::vec(("[a-c]{1,2}|\\\\u0061", inner), 0..5),
                    space
                )
                    .prop_map(|(entries, s)| {
                        let entries: Vec<String> = entries
                            .into_iter()
                            .map(|(k, v)| format!("\"{k}\"{s}:{s}{v}"))
                            .collect();
                        format!("{{{s}{}{s}}}", entries.join(&format!("{s},")))
                    }),
            ]
        })
    }

    proptest! {
        /// Whenever the compact writer takes a text, it writes exactly what the `Value` path
        /// stores; it refuses only what a `Value` would change beyond spelling (repeated keys)
        /// or cannot hold.
        #[test]
        fn compact_writer_never_differs_from_the_value_path(text in json_text()) {
            let expected = through_value(&text);
            match compacted(&text) {
                Some(got) => prop_assert_eq!(Some(got), expected),
                None => prop_assert!(
                    expected.is_none() || serde_json::from_str::<NoRepeatedKeys>(&text).is_err(),
                    "refused a text the Value path takes without change: {}", text
                ),
            }
        }
    }
}
