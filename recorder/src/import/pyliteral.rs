//! A tolerant parser for Python literals, the way many harnesses write tool arguments
//! (`str(dict)` instead of `json.dumps`): `{'zip': '19122', 'ok': True, 'x': None}`.
//!
//! Accepted: single-, double- and triple-quoted strings with Python escapes and the `r`/`u`/`b`
//! prefixes, adjacent string concatenation, `True`/`False`/`None` (and JSON's `true`/`false`/
//! `null`), integers (with `_`, hex, octal, binary), floats, lists, tuples, dicts and trailing
//! commas. Dict keys become JSON strings the way `json.dumps` converts them (`1` -> `"1"`,
//! `True` -> `"true"`, `None` -> `"null"`). Sets, `inf`/`nan`, complex numbers and expressions are
//! refused: they have no JSON form, and guessing one would alter the data.

use serde_json::{Map, Value};

/// How deep lists, tuples and dicts may nest; deeper input is refused rather than risking the stack.
const MAX_DEPTH: usize = 128;

/// Parses `text` as one Python literal and converts it to JSON. The error names the character
/// offset where parsing stopped.
pub fn parse(text: &str) -> Result<Value, String> {
    let mut parser = Parser {
        chars: text.char_indices().collect(),
        pos: 0,
        depth: 0,
    };
    parser.skip_ws();
    let value = parser.value()?;
    parser.skip_ws();
    if parser.pos < parser.chars.len() {
        return Err(parser.error("unexpected text after the literal"));
    }
    Ok(value)
}

struct Parser {
    chars: Vec<(usize, char)>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).map(|&(_, c)| c)
    }

    fn peek_at(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).map(|&(_, c)| c)
    }

    fn offset(&self) -> usize {
        self.chars
            .get(self.pos)
            .map(|&(offset, _)| offset)
            .unwrap_or_else(|| self.chars.last().map_or(0, |&(o, c)| o + c.len_utf8()))
    }

    fn error(&self, message: &str) -> String {
        format!("{message} at offset {}", self.offset())
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.pos += 1;
            } else if c == '\\' && matches!(self.peek_at(1), Some('\n')) {
                // An explicit line continuation.
                self.pos += 2;
            } else {
                break;
            }
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        match self.peek() {
            None => Err(self.error("unexpected end of input")),
            Some('{') => self.nested(|p| p.dict()),
            Some('[') => self.nested(|p| p.sequence('[', ']')),
            Some('(') => self.nested(|p| p.parenthesized()),
            Some(c) if c == '\'' || c == '"' => self.strings(),
            Some(c) if c.is_ascii_alphabetic() || c == '_' => self.word(),
            Some(c) if c.is_ascii_digit() || c == '.' || c == '-' || c == '+' => self.number(),
            Some(c) => Err(self.error(&format!("unexpected character {c:?}"))),
        }
    }

    fn nested(
        &mut self,
        inner: impl FnOnce(&mut Self) -> Result<Value, String>,
    ) -> Result<Value, String> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error(&format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        self.depth += 1;
        let result = inner(self);
        self.depth -= 1;
        result
    }

    /// `[a, b]` or, after `(` was seen to open a tuple, the rest of it.
    fn sequence(&mut self, open: char, close: char) -> Result<Value, String> {
        self.expect(open)?;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok(Value::Array(items));
            }
            items.push(self.value()?);
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.error(&format!("expected ',' or '{close}'"))),
            }
        }
    }

    /// `(x)` is just `x`; `()`, `(x,)` and `(x, y)` are tuples, which become arrays.
    fn parenthesized(&mut self) -> Result<Value, String> {
        self.expect('(')?;
        self.skip_ws();
        if self.peek() == Some(')') {
            self.pos += 1;
            return Ok(Value::Array(Vec::new()));
        }
        let first = self.value()?;
        self.skip_ws();
        match self.peek() {
            Some(')') => {
                self.pos += 1;
                Ok(first)
            }
            Some(',') => {
                self.pos += 1;
                let mut items = vec![first];
                loop {
                    self.skip_ws();
                    if self.peek() == Some(')') {
                        self.pos += 1;
                        return Ok(Value::Array(items));
                    }
                    items.push(self.value()?);
                    self.skip_ws();
                    match self.peek() {
                        Some(',') => self.pos += 1,
                        Some(')') => {
                            self.pos += 1;
                            return Ok(Value::Array(items));
                        }
                        _ => return Err(self.error("expected ',' or ')'")),
                    }
                }
            }
            _ => Err(self.error("expected ',' or ')'")),
        }
    }

    fn dict(&mut self) -> Result<Value, String> {
        self.expect('{')?;
        let mut map = Map::new();
        loop {
            self.skip_ws();
            if self.peek() == Some('}') {
                self.pos += 1;
                return Ok(Value::Object(map));
            }
            let key_at = self.offset();
            let key = match self.value()? {
                Value::String(s) => s,
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                Value::Null => "null".to_owned(),
                _ => {
                    return Err(format!(
                        "dict key at offset {key_at} is not a string, number, bool or None"
                    ));
                }
            };
            self.skip_ws();
            if self.peek() != Some(':') {
                return Err(self.error("expected ':' (set literals have no JSON form)"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value()?;
            // Like a Python dict, a repeated key keeps the last value.
            map.insert(key, value);
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some('}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                _ => return Err(self.error("expected ',' or '}'")),
            }
        }
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected {c:?}")))
        }
    }

    fn word(&mut self) -> Result<Value, String> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == '_' {
                self.pos += 1;
            } else {
                break;
            }
        }
        let word: String = self.chars[start..self.pos]
            .iter()
            .map(|&(_, c)| c)
            .collect();
        // A string prefix such as r'..', b"..", u'..', rb'..'.
        if word.len() <= 2
            && word
                .chars()
                .all(|c| matches!(c.to_ascii_lowercase(), 'r' | 'u' | 'b'))
            && matches!(self.peek(), Some('\'' | '"'))
        {
            self.pos = start;
            return self.strings();
        }
        match word.as_str() {
            "True" | "true" => Ok(Value::Bool(true)),
            "False" | "false" => Ok(Value::Bool(false)),
            "None" | "null" => Ok(Value::Null),
            _ => {
                self.pos = start;
                Err(self.error(&format!("unknown name {word:?}")))
            }
        }
    }

    /// One string literal or several adjacent ones, concatenated as Python does.
    fn strings(&mut self) -> Result<Value, String> {
        let mut text = self.string()?;
        loop {
            let save = self.pos;
            self.skip_ws();
            if self.at_string_start() {
                text.push_str(&self.string()?);
            } else {
                self.pos = save;
                return Ok(Value::String(text));
            }
        }
    }

    fn at_string_start(&self) -> bool {
        let mut i = 0;
        while i < 2
            && matches!(
                self.peek_at(i).map(|c| c.to_ascii_lowercase()),
                Some('r' | 'u' | 'b')
            )
        {
            i += 1;
        }
        matches!(self.peek_at(i), Some('\'' | '"'))
    }

    fn string(&mut self) -> Result<String, String> {
        let mut raw = false;
        while let Some(c) = self.peek() {
            match c.to_ascii_lowercase() {
                'r' => raw = true,
                'u' | 'b' => {}
                _ => break,
            }
            self.pos += 1;
        }
        let quote = match self.peek() {
            Some(q @ ('\'' | '"')) => q,
            _ => return Err(self.error("expected a string")),
        };
        let triple = self.peek_at(1) == Some(quote) && self.peek_at(2) == Some(quote);
        self.pos += if triple { 3 } else { 1 };
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.error("unterminated string"));
            };
            if c == quote {
                if !triple {
                    self.pos += 1;
                    return Ok(out);
                }
                if self.peek_at(1) == Some(quote) && self.peek_at(2) == Some(quote) {
                    self.pos += 3;
                    return Ok(out);
                }
                out.push(c);
                self.pos += 1;
            } else if c == '\n' && !triple {
                return Err(self.error("line break inside a single-quoted string"));
            } else if c == '\\' {
                if raw {
                    // Raw strings keep the backslash, but it still protects the next character.
                    out.push('\\');
                    self.pos += 1;
                    if let Some(next) = self.peek() {
                        out.push(next);
                        self.pos += 1;
                    }
                } else {
                    self.escape(&mut out)?;
                }
            } else {
                out.push(c);
                self.pos += 1;
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), String> {
        self.pos += 1; // the backslash
        let Some(c) = self.peek() else {
            return Err(self.error("unterminated escape"));
        };
        self.pos += 1;
        match c {
            '\n' => {}
            '\\' | '\'' | '"' => out.push(c),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'v' => out.push('\u{b}'),
            'a' => out.push('\u{7}'),
            '0'..='7' => {
                let mut code = c.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match self.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            code = code * 8 + d;
                            self.pos += 1;
                        }
                        None => break,
                    }
                }
                out.push(self.code_point(code)?);
            }
            'x' => {
                let code = self.hex_digits(2)?;
                out.push(self.code_point(code)?);
            }
            'u' => {
                let code = self.hex_digits(4)?;
                if (0xD800..0xDC00).contains(&code)
                    && self.peek() == Some('\\')
                    && self.peek_at(1) == Some('u')
                {
                    // A surrogate pair written as two escapes, as JSON-minded writers do.
                    let save = self.pos;
                    self.pos += 2;
                    let low = self.hex_digits(4)?;
                    if (0xDC00..0xE000).contains(&low) {
                        let combined = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                        out.push(self.code_point(combined)?);
                        return Ok(());
                    }
                    self.pos = save;
                }
                out.push(self.code_point(code)?);
            }
            'U' => {
                let code = self.hex_digits(8)?;
                out.push(self.code_point(code)?);
            }
            'N' => return Err(self.error("named unicode escapes (\\N{...}) are not supported")),
            other => {
                // Python keeps unknown escapes verbatim.
                out.push('\\');
                out.push(other);
            }
        }
        Ok(())
    }

    fn hex_digits(&mut self, count: usize) -> Result<u32, String> {
        let mut code = 0u32;
        for _ in 0..count {
            let digit = self
                .peek()
                .and_then(|d| d.to_digit(16))
                .ok_or_else(|| self.error(&format!("expected {count} hex digits in an escape")))?;
            code = code * 16 + digit;
            self.pos += 1;
        }
        Ok(code)
    }

    fn code_point(&self, code: u32) -> Result<char, String> {
        char::from_u32(code)
            .ok_or_else(|| self.error(&format!("escape U+{code:04X} is not a character")))
    }

    fn number(&mut self) -> Result<Value, String> {
        let start_offset = self.offset();
        let start = self.pos;
        let mut negative = false;
        while let Some(sign @ ('-' | '+')) = self.peek() {
            if sign == '-' {
                negative = !negative;
            }
            self.pos += 1;
            self.skip_ws();
        }
        let body_start = self.pos;
        while let Some(c) = self.peek() {
            let exponent_sign = matches!(c, '+' | '-')
                && matches!(
                    self.chars.get(self.pos.wrapping_sub(1)),
                    Some((_, 'e' | 'E'))
                )
                && self.pos > body_start;
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' || exponent_sign {
                self.pos += 1;
            } else {
                break;
            }
        }
        let body: String = self.chars[body_start..self.pos]
            .iter()
            .map(|&(_, c)| c)
            .filter(|&c| c != '_')
            .collect();
        let fail = |why: &str| {
            let text: String = self.chars[start..self.pos]
                .iter()
                .map(|&(_, c)| c)
                .collect();
            Err(format!("{why} {text:?} at offset {start_offset}"))
        };
        if body.is_empty() {
            return fail("not a number:");
        }
        let lower = body.to_ascii_lowercase();
        let radix = match lower.get(..2) {
            Some("0x") => Some(16),
            Some("0o") => Some(8),
            Some("0b") => Some(2),
            _ => None,
        };
        let text = if let Some(radix) = radix {
            match u128::from_str_radix(&lower[2..], radix) {
                Ok(n) => n.to_string(),
                Err(_) => return fail("not a number:"),
            }
        } else {
            if !lower
                .chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-'))
            {
                return fail("no JSON form for");
            }
            let (mantissa, exponent) = match lower.find('e') {
                Some(i) => (&lower[..i], Some(&lower[i + 1..])),
                None => (&lower[..], None),
            };
            let mut text = String::new();
            let (int_part, frac_part) = match mantissa.find('.') {
                Some(i) => (&mantissa[..i], Some(&mantissa[i + 1..])),
                None => (mantissa, None),
            };
            if int_part.is_empty() && frac_part.is_none_or(str::is_empty) {
                return fail("not a number:");
            }
            // Python allows leading zeros on 0 only and `1.` / `.5`; JSON wants `1.0` / `0.5`.
            let int_trimmed = int_part.trim_start_matches('0');
            text.push_str(if int_trimmed.is_empty() {
                "0"
            } else {
                int_trimmed
            });
            if let Some(frac) = frac_part {
                text.push('.');
                text.push_str(if frac.is_empty() { "0" } else { frac });
            }
            if let Some(exp) = exponent {
                text.push('e');
                text.push_str(exp);
            }
            text
        };
        let signed = if negative { format!("-{text}") } else { text };
        // Parsed as JSON text, so the number keeps exactly the form a JSON file would give it.
        match serde_json::from_str::<Value>(&signed) {
            Ok(number @ Value::Number(_)) => Ok(number),
            _ => fail("not a number:"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse;
    use serde_json::{Value, json};

    fn same_as_json(python: &str, json_text: &str) {
        let expected: Value = serde_json::from_str(json_text).unwrap();
        assert_eq!(parse(python).unwrap(), expected, "{python}");
    }

    #[test]
    fn dict_with_python_constants_matches_json() {
        same_as_json(
            "{'zip': '19122', 'ok': True, 'x': None, 'n': False}",
            r#"{"zip": "19122", "ok": true, "x": null, "n": false}"#,
        );
    }

    #[test]
    fn key_order_is_kept() {
        let value = parse("{'b': 1, 'a': 2, 'c': 3}").unwrap();
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["b", "a", "c"]);
    }

    #[test]
    fn nested_lists_tuples_and_dicts() {
        same_as_json(
            "{'items': ['1', '2'], 'pair': (1, 'a'), 'one': (5,), 'empty': (), 'grouped': (7), 'd': {'k': [{}]}}",
            r#"{"items": ["1", "2"], "pair": [1, "a"], "one": [5], "empty": [], "grouped": 7, "d": {"k": [{}]}}"#,
        );
    }

    #[test]
    fn escapes_and_quotes() {
        let value = parse(r#"{'a': 'it\'s', 'b': "say \"hi\"", 'c': 'tab\there\nnew', 'd': '\x41\u00e9\U0001F600', 'e': '\\'}"#)
            .unwrap();
        assert_eq!(
            value,
            json!({"a": "it's", "b": "say \"hi\"", "c": "tab\there\nnew", "d": "Aé😀", "e": "\\"})
        );
    }

    #[test]
    fn mixed_quotes_inside_strings() {
        // Python switches to double quotes when the text holds a single quote.
        assert_eq!(
            parse(r#"{'thought': "name='x' kwargs={'a': 1}"}"#).unwrap(),
            json!({"thought": "name='x' kwargs={'a': 1}"})
        );
    }

    #[test]
    fn unknown_escape_is_kept_verbatim() {
        assert_eq!(parse(r"'a\qb'").unwrap(), json!("a\\qb"));
    }

    #[test]
    fn octal_escape_and_raw_and_prefixed_strings() {
        assert_eq!(parse(r"'\101\0'").unwrap(), json!("A\u{0}"));
        assert_eq!(parse(r"r'a\nb'").unwrap(), json!("a\\nb"));
        assert_eq!(parse(r"u'x' b'y'").unwrap(), json!("xy"));
        assert_eq!(parse("'''tri'ple'''").unwrap(), json!("tri'ple"));
    }

    #[test]
    fn numbers_keep_their_text_when_json_valid() {
        let value = parse("[1, -2, 3.50, 1e5, 2.5E-3, 1_000, 0x1F, .5, 5., +4, 007]").unwrap();
        let json: Value =
            serde_json::from_str("[1, -2, 3.50, 1e5, 2.5e-3, 1000, 31, 0.5, 5.0, 4, 7]").unwrap();
        assert_eq!(
            serde_json::to_string(&value).unwrap(),
            serde_json::to_string(&json).unwrap()
        );
        assert!(
            serde_json::to_string(&value)
                .unwrap()
                .starts_with("[1,-2,3.50,")
        );
    }

    #[test]
    fn dict_keys_convert_like_json_dumps() {
        same_as_json(
            "{1: 'a', True: 'b', None: 'c', 2.5: 'd'}",
            r#"{"1": "a", "true": "b", "null": "c", "2.5": "d"}"#,
        );
    }

    #[test]
    fn trailing_commas_and_whitespace() {
        same_as_json("  { 'a' : [1, 2, ], }  ", r#"{"a": [1, 2]}"#);
    }

    #[test]
    fn json_is_accepted_too() {
        same_as_json(
            r#"{"a": true, "b": null, "c": [1.0]}"#,
            r#"{"a": true, "b": null, "c": [1.0]}"#,
        );
    }

    #[test]
    fn refuses_what_has_no_json_form() {
        for bad in [
            "{1, 2}",
            "float('inf')",
            "inf",
            "nan",
            "1j",
            "{'a': 1",
            "'unterminated",
            "{'a': 1} extra",
            "{(1, 2): 'tuple key'}",
            "",
            "'\\N{BULLET}'",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing() {
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        let err = parse(&deep).unwrap_err();
        assert!(err.contains("nesting"), "{err}");
        let ok = "[".repeat(100) + &"]".repeat(100);
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn error_names_the_offset() {
        let err = parse("{'a': @}").unwrap_err();
        assert!(err.contains("offset 6"), "{err}");
    }
}
