//! Redaction: what the recorder removes from traces and steps before they reach a store.
//!
//! Three rules, applied to step inputs, outputs, error messages and step and trace metadata:
//!
//! 1. **Secret keys.** In a JSON object, the value of a key that looks like a secret is replaced
//!    by `"[REDACTED]"`, whatever its type. A key is compared after lowercasing it and dropping
//!    everything but letters and digits, so `X-Api-Key`, `api_key`, `apiKey` and `APIKEY` all read
//!    `apikey`; it is secret when it *contains* one of the secret words (`password`, `secret`,
//!    `token`, `apikey`, `authorization`, `cookie`, `privatekey`, ...). The word `token` does not
//!    count inside `tokens`, `tokenize`, `token_count`, `token_limit` and `token_usage`: those are
//!    the usage counters language-model APIs report, not credentials. An object of the form
//!    `{"name": <secret key>, "value": ...}` (HTTP header lists) gets its `value` redacted too.
//! 2. **Secret patterns.** Inside every string value (and error message), text matching one of
//!    the secret patterns (bearer tokens, `sk-...` provider keys, AWS access key ids, GitHub
//!    tokens, JWTs, Slack tokens, Google API keys, PEM private keys, passwords in URLs,
//!    `api_key=...` query parameters) is replaced by `[REDACTED]`. A pattern with a capture group
//!    named `secret` only has that group replaced, so `Bearer abc...` becomes `Bearer [REDACTED]`.
//! 3. **Size cap.** A string longer than the cap (64 KiB unless configured) is cut to at most the
//!    cap, on a character boundary, followed by a marker saying how many bytes were cut. The cap
//!    is applied after the patterns, so a secret straddling the cut is still found.
//!
//! Everything here is a pure function of the policy and the value.

use std::borrow::Cow;
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use regex::{Captures, Regex, RegexSet};
use serde_json::{Map, Value};

use crate::model::{ObservedStep, ObservedTrace};

/// What a redacted value or secret becomes.
pub const REDACTED: &str = "[REDACTED]";

/// The default size cap on one string value: 64 KiB.
pub const DEFAULT_MAX_STRING_BYTES: usize = 64 * 1024;

/// The built-in secret key words, in normalized form (lowercase letters and digits only).
const BUILTIN_SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "secret",
    "token",
    "apikey",
    "authorization",
    "cookie",
    "privatekey",
    "accesskey",
    "credential",
    "sessionkey",
    "signingkey",
    "encryptionkey",
];

/// Text that, right after `token` in a normalized key, makes it a counter and not a credential.
const TOKEN_COUNTER_SUFFIXES: &[&str] = &["s", "iz", "is", "count", "limit", "usage"];

/// The built-in secret patterns.
const BUILTIN_PATTERNS: &[&str] = &[
    // An HTTP bearer credential: keep the scheme, drop the token.
    r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9\-._~+/]+=*)",
    // Provider API keys: OpenAI `sk-...`, `sk-proj-...`, Anthropic `sk-ant-...`.
    r"\bsk-[A-Za-z0-9_\-]{16,}",
    // AWS access key ids (long-term and temporary).
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    // GitHub tokens: personal, OAuth, user-to-server, server-to-server, refresh; fine-grained.
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",
    r"\bgithub_pat_[A-Za-z0-9_]{22,}",
    // JSON Web Tokens: base64url header and payload, both starting with `{"`, and a signature.
    r"\beyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*",
    // Slack tokens.
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
    // Google API keys.
    r"\bAIza[0-9A-Za-z_\-]{35}",
    // PEM private key blocks, whatever the key type.
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    // A password inside a URL: scheme://user:password@host.
    r"(?i)\b[a-z][a-z0-9+.\-]*://[^/\s:@]+:(?P<secret>[^/\s@]+)@",
    // A secret-named key with a quoted value inside text (JSON or a Python dict printed into a
    // tool's output): only the value goes. Keys must end in the secret word, so counters such
    // as `max_tokens` stay.
    r#"(?i)["'][a-z0-9_\-]*?(?:api[_\-]?key|password|passwd|secret|token|authorization|credentials?)\\?["']\s*:\s*\\?["'](?P<secret>[^"'\\]+)"#,
    // Credentials passed as query or form parameters.
    r"(?i)\b(?:api[_\-]?key|access[_\-]?token|refresh[_\-]?token|auth[_\-]?token|token|password|passwd|secret|client[_\-]?secret)=(?P<secret>[^&\s]+)",
];

/// The built-in patterns as one set, to tell in one pass whether any matches.
static BUILTIN_SET: LazyLock<RegexSet> =
    LazyLock::new(|| RegexSet::new(BUILTIN_PATTERNS).expect("built-in redaction patterns compile"));

/// Text every match of some built-in pattern contains (ASCII case ignored): `bearer`, `sk-`,
/// the AWS, GitHub, JWT, Slack and Google prefixes, the PEM header, `://`, and the words the two
/// key-named patterns need (`api_key` ends in `key`; `password` and `passwd` share `passw`).
/// Text holding none of them matches no built-in pattern; a literal search rules that out
/// several times faster than the patterns' automaton. Only ASCII text is ruled out this way:
/// case-insensitive patterns also match non-ASCII letters that fold to ASCII (the Kelvin sign
/// to `k`).
const BUILTIN_LITERALS: &[&str] = &[
    "bearer",
    "sk-",
    "akia",
    "asia",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "eyj",
    "xox",
    "aiza",
    "-----begin",
    "://",
    "key",
    "passw",
    "secret",
    "token",
    "authorization",
    "credential",
];

/// [`BUILTIN_LITERALS`] as a DFA: searched on its own, or stepped byte by byte alongside the
/// secret words ([`RedactionPolicy::scan_ascii`]). `None` only if it could not be built (never
/// expected of plain words): then nothing is ruled out by it.
static BUILTIN_LITERAL_DFA: LazyLock<Option<aho_corasick::dfa::DFA>> = LazyLock::new(|| {
    aho_corasick::dfa::DFA::builder()
        .ascii_case_insensitive(true)
        .build(BUILTIN_LITERALS)
        .ok()
});

/// True when some built-in pattern matches somewhere in `text`.
fn builtin_pattern_matches(text: &str) -> bool {
    use aho_corasick::automaton::Automaton;
    if text.is_ascii()
        && let Some(literals) = BUILTIN_LITERAL_DFA.as_ref()
        && let Ok(None) = literals.try_find(&aho_corasick::Input::new(text))
    {
        return false;
    }
    BUILTIN_SET.is_match(text)
}

static BUILTIN_REGEXES: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    BUILTIN_PATTERNS
        .iter()
        .map(|pattern| Regex::new(pattern).expect("built-in redaction patterns compile"))
        .collect()
});

/// One secret key word and the suffixes that exempt it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SecretKey {
    word: String,
    exempt_suffixes: &'static [&'static str],
}

impl SecretKey {
    fn matches(&self, normalized_key: &str) -> bool {
        normalized_key.match_indices(&self.word).any(|(at, word)| {
            let rest = &normalized_key[at + word.len()..];
            !self
                .exempt_suffixes
                .iter()
                .any(|suffix| rest.starts_with(suffix))
        })
    }
}

/// What the recorder removes from traces and steps before they are stored.
///
/// [`RedactionPolicy::default`] has the built-in secret keys and patterns and a 64 KiB cap;
/// [`RedactionPolicy::none`] changes nothing. Add keys with
/// [`with_secret_key`](Self::with_secret_key) and patterns with
/// [`with_pattern`](Self::with_pattern).
#[derive(Debug, Clone)]
pub struct RedactionPolicy {
    secret_keys: Vec<SecretKey>,
    /// The words of `secret_keys`, for searches; rebuilt whenever they change.
    words: SecretWords,
    patterns: Vec<Regex>,
    /// How many of `patterns`, from the first, are the built-in ones.
    builtin_patterns: usize,
    max_string_bytes: Option<usize>,
}

/// The secret key words, compiled two ways. Each is `None` without words (or, never expected of
/// plain words, when it cannot be built: then keys are looked at word by word, and text is
/// normalized and searched).
#[derive(Debug, Clone, Default)]
struct SecretWords {
    /// Finds the words (pattern `i` is `secret_keys[i]`) in a key in one pass, overlapping
    /// matches included: every imported string is looked at, so one search per word was most
    /// of an import's time.
    finder: Option<AhoCorasick>,
    /// The same words as a DFA stepped byte by byte alongside the built-in literals
    /// ([`RedactionPolicy::scan_ascii`]), which the finder's interface does not allow.
    automaton: Option<aho_corasick::dfa::DFA>,
}

impl SecretWords {
    fn of(keys: &[SecretKey]) -> Self {
        if keys.is_empty() {
            return Self::default();
        }
        let words = || keys.iter().map(|key| key.word.as_str());
        Self {
            finder: AhoCorasick::new(words()).ok(),
            automaton: aho_corasick::dfa::DFA::new(words()).ok(),
        }
    }
}

impl Default for RedactionPolicy {
    fn default() -> Self {
        let secret_keys: Vec<SecretKey> = BUILTIN_SECRET_KEYS
            .iter()
            .map(|word| SecretKey {
                word: (*word).to_owned(),
                exempt_suffixes: if *word == "token" {
                    TOKEN_COUNTER_SUFFIXES
                } else {
                    &[]
                },
            })
            .collect();
        Self {
            words: SecretWords::of(&secret_keys),
            secret_keys,
            patterns: BUILTIN_REGEXES.clone(),
            builtin_patterns: BUILTIN_REGEXES.len(),
            max_string_bytes: Some(DEFAULT_MAX_STRING_BYTES),
        }
    }
}

impl RedactionPolicy {
    /// A policy that changes nothing: no secret keys, no patterns, no size cap.
    pub fn none() -> Self {
        Self {
            secret_keys: Vec::new(),
            words: SecretWords::default(),
            patterns: Vec::new(),
            builtin_patterns: 0,
            max_string_bytes: None,
        }
    }

    /// Also treat keys containing `word` as secret. The word is compared like keys are: case and
    /// everything but letters and digits are ignored (`"X-Tenant_ID"` matches `x-tenant-id`).
    /// A word with no letter or digit is ignored.
    pub fn with_secret_key(mut self, word: &str) -> Self {
        let word = normalize_key(word).into_owned();
        if !word.is_empty() && !self.secret_keys.iter().any(|key| key.word == word) {
            self.secret_keys.push(SecretKey {
                word,
                exempt_suffixes: &[],
            });
            self.words = SecretWords::of(&self.secret_keys);
        }
        self
    }

    /// Also replace text matching `pattern` inside string values by `[REDACTED]` (only the
    /// capture group named `secret`, when the pattern has one).
    pub fn with_pattern(mut self, pattern: Regex) -> Self {
        self.patterns.push(pattern);
        self
    }

    /// [`with_pattern`](Self::with_pattern) for a pattern given as text (a command-line flag,
    /// say); an invalid regular expression is an error naming it.
    pub fn with_pattern_text(self, pattern: &str) -> crate::error::Result<Self> {
        let compiled =
            Regex::new(pattern).map_err(|e| crate::error::RecorderError::RedactionPattern {
                pattern: pattern.to_owned(),
                message: e.to_string(),
            })?;
        Ok(self.with_pattern(compiled))
    }

    /// Cut strings longer than `max_bytes` (`None`: no cap).
    pub fn with_max_string_bytes(mut self, max_bytes: Option<usize>) -> Self {
        self.max_string_bytes = max_bytes;
        self
    }

    /// The size cap on one string, if any.
    pub fn max_string_bytes(&self) -> Option<usize> {
        self.max_string_bytes
    }

    /// True when the policy can change nothing.
    pub fn is_noop(&self) -> bool {
        self.secret_keys.is_empty() && self.patterns.is_empty() && self.max_string_bytes.is_none()
    }

    /// False only when redacting any JSON value whose text is `json` would change nothing, so
    /// the text may be stored as it is; true when it might (it may be wrong that way, never the
    /// other). Text with a backslash always might, since an escape can hide a secret from a
    /// search of the text.
    pub fn may_change_json_text(&self, json: &str) -> bool {
        if self.is_noop() {
            return false;
        }
        if json.contains('\\') {
            return true;
        }
        // Without escapes every JSON string is the text between two quotes, as written.
        let strings = json.split('"').skip(1).step_by(2);
        if let Some(max) = self.max_string_bytes
            && strings.clone().any(|s| s.len() > max)
        {
            return true;
        }
        // Keys and header names are strings too; any string that would be a secret key might
        // be one. Without escapes, each string's normalized form is a piece of the whole
        // text's, so when no secret word occurs in the whole text at all (exempt or not), no
        // string can be a secret key: one search instead of one per string.
        let keys = !self.secret_keys.is_empty();
        let builtin = self.builtin_patterns > 0;
        // `literal`: a literal some built-in pattern needs occurs (true when not looked for).
        let (word, literal) = self.scan_ascii(json).unwrap_or_else(|| {
            let word = keys && self.has_secret_word(&normalize_key(json));
            (word, true)
        });
        if keys && word && strings.clone().any(|s| self.is_secret_key(s)) {
            return true;
        }
        // The built-in patterns have no anchors, so a match inside one string is a match in
        // the whole text; patterns added later may have, so they look at each string.
        if builtin && literal && BUILTIN_SET.is_match(json) {
            return true;
        }
        let extra = &self.patterns[self.builtin_patterns.min(self.patterns.len())..];
        !extra.is_empty()
            && strings
                .into_iter()
                .any(|s| extra.iter().any(|p| p.is_match(s)))
    }

    /// One pass over ASCII `text` for two questions: does a secret key word occur in its
    /// normalized form (`has_secret_word(&normalize_key(text))`), and does it hold one of
    /// [`BUILTIN_LITERALS`]? Both automata step over the bytes as they come, without the
    /// normalized copy or a second pass (those were a fifth of a redacting import's time).
    /// `None` for other text, or a policy without secret words or built-in patterns.
    fn scan_ascii(&self, text: &str) -> Option<(bool, bool)> {
        use aho_corasick::Anchored;
        use aho_corasick::automaton::Automaton;
        if self.builtin_patterns == 0 || !text.is_ascii() {
            return None;
        }
        let words = self.words.automaton.as_ref()?;
        let literals = BUILTIN_LITERAL_DFA.as_ref()?;
        let mut word_state = words.start_state(Anchored::No).ok()?;
        let mut literal_state = literals.start_state(Anchored::No).ok()?;
        let (mut word, mut literal) = (false, false);
        for &byte in text.as_bytes() {
            if !literal {
                literal_state = literals.next_state(Anchored::No, literal_state, byte);
                literal = literals.is_match(literal_state);
            }
            if !word && byte.is_ascii_alphanumeric() {
                word_state = words.next_state(Anchored::No, word_state, byte.to_ascii_lowercase());
                word = words.is_match(word_state);
            }
            if word && literal {
                break;
            }
        }
        Some((word, literal))
    }

    /// True when some secret key word occurs in `normalized` (exempt suffixes or not).
    fn has_secret_word(&self, normalized: &str) -> bool {
        match &self.words.finder {
            Some(finder) => finder.is_match(normalized),
            None => self
                .secret_keys
                .iter()
                .any(|secret| normalized.contains(&secret.word)),
        }
    }

    /// True when the value stored under `key` is a secret.
    pub fn is_secret_key(&self, key: &str) -> bool {
        if self.secret_keys.is_empty() {
            return false;
        }
        // Most keys are short ASCII (`gen_ai.tool.name`, `Content-Type`): normalize those on
        // the stack, since every key of every payload is looked at.
        let mut buffer = [0u8; 128];
        let normalized = match ascii_normalized(key, &mut buffer) {
            Some(short) => Cow::Borrowed(short),
            None => normalize_key(key),
        };
        let Some(finder) = &self.words.finder else {
            return self
                .secret_keys
                .iter()
                .any(|secret| secret.matches(&normalized));
        };
        // Every occurrence of every word, overlapping ones included, as `matches` looks at each.
        finder
            .find_overlapping_iter(normalized.as_ref())
            .any(|found| {
                let secret = &self.secret_keys[found.pattern().as_usize()];
                let rest = &normalized[found.end()..];
                !secret
                    .exempt_suffixes
                    .iter()
                    .any(|suffix| rest.starts_with(suffix))
            })
    }

    /// `text` with every secret pattern replaced and the size cap applied; borrowed when nothing
    /// changed.
    pub fn redact_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.redact_text_counting(text, &mut RedactionCounts::default())
    }

    /// [`redact_text`](Self::redact_text), adding what it replaced and cut to `counts`.
    pub fn redact_text_counting<'a>(
        &self,
        text: &'a str,
        counts: &mut RedactionCounts,
    ) -> Cow<'a, str> {
        let mut current = Cow::Borrowed(text);
        // Most text holds no secret: one pass of the built-in set rules all of them out, and
        // `is_match` rules out each other pattern without the captures `replace_all` builds
        // (those were most of the cost of redacting clean text). A pattern that matches
        // nothing leaves the text as it is, so skipping it changes nothing.
        let skip_builtin = self.builtin_patterns > 0 && !builtin_pattern_matches(text);
        for (i, pattern) in self.patterns.iter().enumerate() {
            if (skip_builtin && i < self.builtin_patterns) || !pattern.is_match(&current) {
                continue;
            }
            let mut found = 0u64;
            let replaced = pattern.replace_all(&current, |caps: &Captures<'_>| {
                found += 1;
                replace_secret(caps)
            });
            if let Cow::Owned(replaced) = replaced {
                current = Cow::Owned(replaced);
            }
            counts.secrets += found;
        }
        match self.max_string_bytes {
            Some(max) if current.len() > max => {
                counts.truncated += 1;
                Cow::Owned(truncate(&current, max))
            }
            _ => current,
        }
    }

    /// Redact a JSON value in place: secret keys at any depth, patterns and the cap in every
    /// string.
    pub fn redact_value(&self, value: &mut Value) {
        self.redact_value_counting(value, &mut RedactionCounts::default());
    }

    /// [`redact_value`](Self::redact_value), adding what it replaced and cut to `counts`.
    pub fn redact_value_counting(&self, value: &mut Value, counts: &mut RedactionCounts) {
        match value {
            Value::String(text) => {
                if let Cow::Owned(redacted) = self.redact_text_counting(text, counts) {
                    *text = redacted;
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.redact_value_counting(item, counts);
                }
            }
            Value::Object(map) => self.redact_map_counting(map, counts),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Redact a JSON object (or metadata map) in place.
    pub fn redact_map(&self, map: &mut Map<String, Value>) {
        self.redact_map_counting(map, &mut RedactionCounts::default());
    }

    /// [`redact_map`](Self::redact_map), adding what it replaced and cut to `counts`.
    pub fn redact_map_counting(&self, map: &mut Map<String, Value>, counts: &mut RedactionCounts) {
        let named_secret = ["name", "key", "header"].iter().any(|field| {
            map.get(*field)
                .and_then(Value::as_str)
                .is_some_and(|name| self.is_secret_key(name))
        });
        for (key, value) in map.iter_mut() {
            if self.is_secret_key(key) || (named_secret && key == "value") {
                if value.as_str() != Some(REDACTED) {
                    counts.secrets += 1;
                }
                *value = Value::String(REDACTED.to_owned());
            } else {
                self.redact_value_counting(value, counts);
            }
        }
    }

    /// Redact an optional string in place.
    fn redact_string(&self, text: &mut Option<String>, counts: &mut RedactionCounts) {
        if let Some(text) = text
            && let Cow::Owned(redacted) = self.redact_text_counting(text, counts)
        {
            *text = redacted;
        }
    }

    /// Redact everything a step carries: inputs, outputs, error type and message, metadata.
    pub fn redact_step(&self, step: &mut ObservedStep) {
        self.redact_step_counting(step);
    }

    /// [`redact_step`](Self::redact_step), saying how many secrets it replaced and strings it
    /// cut.
    pub fn redact_step_counting(&self, step: &mut ObservedStep) -> RedactionCounts {
        let mut counts = RedactionCounts::default();
        if self.is_noop() {
            return counts;
        }
        self.redact_value_counting(&mut step.inputs, &mut counts);
        if let Some(outputs) = &mut step.outputs {
            self.redact_value_counting(outputs, &mut counts);
        }
        self.redact_string(&mut step.error_type, &mut counts);
        self.redact_string(&mut step.error_message, &mut counts);
        self.redact_map_counting(&mut step.metadata, &mut counts);
        counts
    }

    /// Redact a trace's metadata.
    pub fn redact_trace(&self, trace: &mut ObservedTrace) {
        self.redact_trace_counting(trace);
    }

    /// [`redact_trace`](Self::redact_trace), saying how many secrets it replaced and strings it
    /// cut.
    pub fn redact_trace_counting(&self, trace: &mut ObservedTrace) -> RedactionCounts {
        let mut counts = RedactionCounts::default();
        if self.is_noop() {
            return counts;
        }
        self.redact_map_counting(&mut trace.metadata, &mut counts);
        counts
    }
}

/// What redaction changed: secrets replaced (a value under a secret key, or one pattern match)
/// and strings cut to the size cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RedactionCounts {
    /// Secret values and pattern matches replaced by `[REDACTED]`.
    pub secrets: u64,
    /// Strings cut to the size cap.
    pub truncated: u64,
}

impl std::ops::AddAssign for RedactionCounts {
    fn add_assign(&mut self, other: Self) {
        self.secrets += other.secrets;
        self.truncated += other.truncated;
    }
}

/// Lowercase letters and digits of `key`, nothing else.
fn normalize_key(key: &str) -> Cow<'_, str> {
    if key
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    {
        return Cow::Borrowed(key);
    }
    if key.is_ascii() {
        // Byte by byte into one allocation: every string of a payload is looked at as a
        // possible key, and long ASCII text was most of that cost.
        let mut normalized = vec![0u8; key.len()];
        let len = normalize_ascii_into(key, &mut normalized);
        normalized.truncate(len);
        // ASCII bytes are always UTF-8; the fallback below is never taken.
        if let Ok(normalized) = String::from_utf8(normalized) {
            return Cow::Owned(normalized);
        }
    }
    Cow::Owned(
        key.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect(),
    )
}

/// [`normalize_key`] of a short ASCII `key`, written into `buffer`; `None` for any other key.
fn ascii_normalized<'b>(key: &str, buffer: &'b mut [u8; 128]) -> Option<&'b str> {
    if key.len() > buffer.len() || !key.is_ascii() {
        return None;
    }
    let len = normalize_ascii_into(key, buffer);
    std::str::from_utf8(&buffer[..len]).ok()
}

/// The lowercase letters and digits of ASCII `key`, written to the front of `out` (at least as
/// long as `key`); how many. Without a branch per byte: each byte is written, and the end
/// moves past it only when it is kept.
fn normalize_ascii_into(key: &str, out: &mut [u8]) -> usize {
    let mut end = 0;
    for (&byte, slot) in key.as_bytes().iter().zip(0..out.len()) {
        out[end.min(slot)] = byte.to_ascii_lowercase();
        end += usize::from(byte.is_ascii_alphanumeric());
    }
    end
}

/// The replacement for one pattern match: the `secret` group replaced, or the whole match.
fn replace_secret(caps: &Captures<'_>) -> String {
    let Some(whole) = caps.get(0) else {
        return String::new();
    };
    match caps.name("secret") {
        Some(secret) => {
            let text = whole.as_str();
            let from = secret.start() - whole.start();
            let to = secret.end() - whole.start();
            format!("{}{REDACTED}{}", &text[..from], &text[to..])
        }
        None => REDACTED.to_owned(),
    }
}

/// `text` cut to at most `max` bytes on a character boundary, with a marker saying how many
/// bytes were cut.
fn truncate(text: &str, max: usize) -> String {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text.len() - end;
    format!("{}…[truncated {cut} bytes]", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn policy() -> RedactionPolicy {
        RedactionPolicy::default()
    }

    /// Text built from pieces of secrets and of ordinary payloads, in any case and order.
    fn payload_text() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "\"",
            ":",
            " ",
            "_",
            "-",
            "=",
            "&",
            "/",
            "@",
            ".",
            "{",
            "}",
            "api",
            "key",
            "Key",
            "pass",
            "word",
            "PWD",
            "to",
            "ken",
            "s",
            "count",
            "secret",
            "bearer ",
            "Bearer ",
            "sk-",
            "abcdefghijklmnop0123",
            "AKIA",
            "ASIA",
            "ABCDEFGHIJKLMNOP",
            "ghp_",
            "gho_",
            "github_pat_",
            "eyJ",
            "hbGciOi",
            "xoxb-",
            "AIza",
            "-----BEGIN ",
            "RSA PRIVATE KEY-----",
            "-----END ",
            "https://",
            "user:",
            "pw@",
            "host",
            "authorization",
            "credential",
            "cookie",
            "usage",
            "query",
            "order_id",
            "\\u00e9",
            "Kelvin\u{212a}",
            "\u{212a}ey",
            "é",
        ]);
        prop::collection::vec(pieces, 0..24).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        /// The one-pass scan answers as normalizing the text and searching it does, and as a
        /// search of each literal in the lowercased text does.
        #[test]
        fn the_one_pass_scan_agrees_with_separate_searches(text in payload_text()) {
            let policy = policy();
            let lowercase = text.to_ascii_lowercase();
            let expected = (
                policy.has_secret_word(&normalize_key(&text)),
                BUILTIN_LITERALS.iter().any(|literal| lowercase.contains(literal)),
            );
            let scanned = policy.scan_ascii(&text);
            if text.is_ascii() {
                prop_assert_eq!(scanned, Some(expected));
            } else {
                prop_assert_eq!(scanned, None);
            }
        }

        /// Whatever path answers, a record redaction would change is never passed as clean:
        /// the quick answer agrees with redacting the parsed value. Texts with a quote or a
        /// backslash are escaped in JSON, which the quick answer always passes on, so they are
        /// left out here to test the scans.
        #[test]
        fn may_change_is_never_wrong_about_a_change(
            key in payload_text(),
            text in payload_text(),
        ) {
            prop_assume!(!format!("{key}{text}").contains(['"', '\\']));
            let policy = policy();
            let json = json!({"name": key.clone(), key: text.clone(), "note": text}).to_string();
            let mut value: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
            let before = value.clone();
            policy.redact_value(&mut value);
            if value != before {
                prop_assert!(policy.may_change_json_text(&json), "{}", json);
            }
        }

        /// The literal prefilter never rules out text some built-in pattern matches.
        #[test]
        fn the_literal_prefilter_agrees_with_the_pattern_set(text in payload_text()) {
            prop_assert_eq!(builtin_pattern_matches(&text), BUILTIN_SET.is_match(&text));
        }
    }

    #[test]
    fn every_built_in_pattern_has_a_literal_of_the_prefilter() {
        // One match of each pattern, each found through the prefilter.
        let examples = [
            ("Authorization: Bearer abc.def", 0),
            ("sk-abcdefghijklmnop1234", 1),
            ("AKIAABCDEFGHIJKLMNOP", 2),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", 3),
            ("github_pat_abcdefghijklmnopqrstuvwxyz", 4),
            ("eyJhbGciOi.eyJzdWIiOi.sig", 5),
            ("xoxb-1234567890-abc", 6),
            ("AIzaSyA1234567890abcdefghijklmnopqrstuv", 7),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----",
                8,
            ),
            ("postgres://user:hunter2@db", 9),
            ("{'api_key': 'abc'}", 10),
            ("?password=hunter2", 11),
        ];
        let covered: Vec<usize> = examples.iter().map(|(_, pattern)| *pattern).collect();
        assert_eq!(
            covered,
            (0..BUILTIN_PATTERNS.len()).collect::<Vec<_>>(),
            "an example for every built-in pattern, so a new one needs its literal"
        );
        for (example, pattern) in examples {
            let regex = Regex::new(BUILTIN_PATTERNS[pattern]).unwrap_or_else(|e| panic!("{e}"));
            assert!(regex.is_match(example), "pattern {pattern} on {example}");
            assert!(builtin_pattern_matches(example), "{example}");
        }
        assert!(!builtin_pattern_matches(
            "{\"order_id\": \"#W123\", \"status\": \"pending\"}"
        ));
    }

    fn redacted(mut value: Value) -> Value {
        policy().redact_value(&mut value);
        value
    }

    #[test]
    fn every_builtin_pattern_compiles() {
        assert_eq!(BUILTIN_REGEXES.len(), BUILTIN_PATTERNS.len());
    }

    #[test]
    fn the_one_pass_key_finder_agrees_with_looking_for_each_word() {
        let policy = RedactionPolicy::default().with_secret_key("X-Tenant_ID");
        let keys = [
            "api_key",
            "apiKey",
            "max_tokens",
            "token",
            "tokens_used",
            "x-auth-token",
            "token_count",
            "refresh_token",
            "passwd",
            "user",
            "query",
            "Authorization",
            "secret_tokens",
            "tokentoken",
            "x_tenant_id",
            "tenant",
            "",
            "prompt_tokens_details",
        ];
        for key in keys {
            let normalized = normalize_key(key);
            let word_by_word = policy.secret_keys.iter().any(|s| s.matches(&normalized));
            assert_eq!(policy.is_secret_key(key), word_by_word, "{key}");
        }
        assert!(policy.is_secret_key("x-auth-token"));
        assert!(!policy.is_secret_key("max_tokens"));
    }

    #[test]
    fn short_ascii_keys_normalize_as_any_key_does() {
        let mut buffer = [0u8; 128];
        for key in ["gen_ai.tool.name", "X-Api-Key", "", "ALLCAPS_9", "a b-c.d"] {
            assert_eq!(
                ascii_normalized(key, &mut buffer),
                Some(normalize_key(key).as_ref()),
                "{key}"
            );
        }
        assert_eq!(normalize_key(&"Ab-".repeat(100)), "ab".repeat(100));
        assert_eq!(normalize_key("Clé_Été"), "cléété");
        assert_eq!(ascii_normalized("clé", &mut buffer), None);
        assert_eq!(ascii_normalized(&"k".repeat(129), &mut buffer), None);
    }

    #[test]
    fn secret_keys_are_found_whatever_their_case_and_separators() {
        let p = policy();
        for key in [
            "password",
            "PASSWORD",
            "Password",
            "db_password",
            "passwd",
            "user_pwd",
            "secret",
            "client_secret",
            "ClientSecret",
            "token",
            "refresh_token",
            "accessToken",
            "X-Auth-Token",
            "api_key",
            "apiKey",
            "API-KEY",
            "x-api-key",
            "apikey",
            "Authorization",
            "proxy-authorization",
            "cookie",
            "Set-Cookie",
            "cookies",
            "private_key",
            "privateKey",
            "aws_secret_access_key",
            "access_key",
            "credentials",
            "github_token",
            "passphrase",
        ] {
            assert!(p.is_secret_key(key), "{key} should be secret");
        }
    }

    #[test]
    fn ordinary_keys_and_token_counters_are_not_secret() {
        let p = policy();
        for key in [
            "user",
            "query",
            "max_tokens",
            "prompt_tokens",
            "completion_tokens",
            "total_tokens",
            "input_tokens",
            "tokenizer",
            "tokenize",
            "token_count",
            "tokenCount",
            "token_limit",
            "token_usage",
            "key",
            "keyword",
            "author",
            "path",
            "id",
        ] {
            assert!(!p.is_secret_key(key), "{key} should not be secret");
        }
        // A counter word does not hide a real secret word elsewhere in the key.
        assert!(p.is_secret_key("tokens_secret"));
        assert!(p.is_secret_key("token_or_tokens"));
    }

    #[test]
    fn secret_values_are_replaced_whatever_their_type() {
        let value = redacted(json!({
            "user": "ann",
            "password": "hunter2",
            "token": 12345,
            "credentials": {"user": "ann", "pass": "x"},
            "cookie": ["a=1", "b=2"],
            "secret": null,
            "max_tokens": 512
        }));
        assert_eq!(
            value,
            json!({
                "user": "ann",
                "password": REDACTED,
                "token": REDACTED,
                "credentials": REDACTED,
                "cookie": REDACTED,
                "secret": REDACTED,
                "max_tokens": 512
            })
        );
    }

    #[test]
    fn nested_objects_and_arrays_are_redacted_at_any_depth() {
        let value = redacted(json!({
            "request": {
                "headers": {"Content-Type": "json", "X-Api-Key": "abc"},
                "body": [{"items": [{"refresh_token": "r1", "n": 1}]}, "plain"]
            },
            "list": [[{"Authorization": "Basic xyz"}]]
        }));
        assert_eq!(
            value,
            json!({
                "request": {
                    "headers": {"Content-Type": "json", "X-Api-Key": REDACTED},
                    "body": [{"items": [{"refresh_token": REDACTED, "n": 1}]}, "plain"]
                },
                "list": [[{"Authorization": REDACTED}]]
            })
        );
    }

    #[test]
    fn key_order_and_numbers_are_kept() {
        let mut value: Value =
            serde_json::from_str(r#"{"z": 1.50, "password": "p", "a": 10000000000000000000001}"#)
                .unwrap();
        policy().redact_value(&mut value);
        assert_eq!(
            serde_json::to_string(&value).unwrap(),
            r#"{"z":1.50,"password":"[REDACTED]","a":10000000000000000000001}"#
        );
    }

    #[test]
    fn header_lists_of_name_and_value_are_redacted() {
        let value = redacted(json!({"headers": [
            {"name": "Authorization", "value": "Basic dXNlcjpwYXNz"},
            {"name": "Accept", "value": "text/html"},
            {"key": "x-api-key", "value": "k123"}
        ]}));
        assert_eq!(
            value,
            json!({"headers": [
                {"name": "Authorization", "value": REDACTED},
                {"name": "Accept", "value": "text/html"},
                {"key": "x-api-key", "value": REDACTED}
            ]})
        );
    }

    #[test]
    fn bearer_tokens_keep_their_scheme() {
        let p = policy();
        assert_eq!(
            p.redact_text("Authorization: Bearer abc.DEF-123_xyz== sent"),
            "Authorization: Bearer [REDACTED] sent"
        );
        assert_eq!(p.redact_text("bearer tok123"), "bearer [REDACTED]");
    }

    #[test]
    fn provider_cloud_and_forge_keys_are_replaced() {
        let p = policy();
        let cases = [
            ("key sk-abcdefghijklmnop1234 used", "key [REDACTED] used"),
            (
                "sk-proj-AbCdEf0123456789_-xyzXYZ and sk-ant-api03-abcdefghijklmnopqrst",
                "[REDACTED] and [REDACTED]",
            ),
            ("aws AKIAIOSFODNN7EXAMPLE end", "aws [REDACTED] end"),
            ("ASIAABCDEFGHIJKLMNOP", "[REDACTED]"),
            (
                "token ghp_0123456789abcdefghijklmnopqrstuvwxyz here",
                "token [REDACTED] here",
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
                "[REDACTED]",
            ),
            ("xoxb-1234567890-abcdefghij", "[REDACTED]"),
            ("AIzaSyA-0123456789abcdefghijklmnopqrstu", "[REDACTED]"),
        ];
        for (text, expected) in cases {
            assert_eq!(p.redact_text(text), expected, "{text}");
        }
    }

    #[test]
    fn jwts_are_replaced() {
        let jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(
            policy().redact_text(&format!("session={jwt};")),
            "session=[REDACTED];"
        );
    }

    #[test]
    fn private_key_blocks_and_url_passwords_and_query_credentials_are_replaced() {
        let p = policy();
        let pem = "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----\nb";
        assert_eq!(p.redact_text(pem), "a\n[REDACTED]\nb");
        assert_eq!(
            p.redact_text("postgres://app:s3cr3t@db:5432/main"),
            "postgres://app:[REDACTED]@db:5432/main"
        );
        assert_eq!(
            p.redact_text("GET /v1/items?api_key=abc123&page=2"),
            "GET /v1/items?api_key=[REDACTED]&page=2"
        );
    }

    #[test]
    fn ordinary_text_is_left_alone_and_borrowed() {
        let p = policy();
        for text in [
            "",
            "hello world",
            "skip-this",
            "sk-short",
            "ask-me-anything-about-it",
            "AKIA is a prefix",
            "bearer",
            "eyJ alone",
            "https://example.com/path?page=2",
        ] {
            assert!(
                matches!(p.redact_text(text), Cow::Borrowed(t) if t == text),
                "{text}"
            );
        }
    }

    #[test]
    fn skipping_patterns_that_do_not_match_changes_no_result() {
        // Every pattern applied in turn, as redaction did before it skipped any: the answer
        // the fast path must give on clean text, secrets, several secrets and near misses.
        let p = policy().with_pattern(Regex::new(r"pin (?P<secret>\d+)").unwrap());
        let every_pattern = |text: &str| -> (String, u64) {
            let mut current = text.to_owned();
            let mut found = 0;
            for pattern in &p.patterns {
                current = pattern
                    .replace_all(&current, |caps: &Captures<'_>| {
                        found += 1;
                        replace_secret(caps)
                    })
                    .into_owned();
            }
            (current, found)
        };
        for text in [
            "hello world",
            "pin 1234 and nothing else",
            "Authorization: Bearer abc.def and sk-0123456789abcdefghij",
            "token=abc&password=hunter2 at postgres://u:p4ss@db/x",
            "ghp_0123456789abcdefghijklmnopqrstuvwxyz then AKIA0123456789ABCDEF",
            "sk-short, bearer, eyJ alone, AKIA is a prefix",
            r#"{"api_key": "k-123", "note": "pin 99"}"#,
        ] {
            let mut counts = RedactionCounts::default();
            let fast = p.redact_text_counting(text, &mut counts).into_owned();
            assert_eq!((fast, counts.secrets), every_pattern(text), "{text}");
        }
    }

    #[test]
    fn patterns_apply_inside_values_under_ordinary_keys() {
        let value = redacted(json!({
            "command": "curl -H 'Authorization: Bearer xyz789' https://api",
            "args": ["--key", "sk-0123456789abcdefghij"]
        }));
        assert_eq!(
            value,
            json!({
                "command": "curl -H 'Authorization: Bearer [REDACTED]' https://api",
                "args": ["--key", REDACTED]
            })
        );
    }

    #[test]
    fn steps_are_redacted_everywhere_including_error_messages() {
        let mut step = ObservedStep::new(
            "t",
            0,
            "http_get",
            json!({"url": "https://u:pw@host/x", "token": "t"}),
        );
        step.outputs = Some(json!({"set-cookie": "sid=1", "body": "ok"}));
        step.error_type = Some("AuthError".into());
        step.error_message = Some("rejected key sk-abcdefghijklmnopqrstu (401)".into());
        step.metadata
            .insert("authorization".into(), json!("Basic abc"));
        step.metadata.insert("attempt".into(), json!(2));
        policy().redact_step(&mut step);
        assert_eq!(
            step.inputs,
            json!({"url": "https://u:[REDACTED]@host/x", "token": REDACTED})
        );
        assert_eq!(
            step.outputs,
            Some(json!({"set-cookie": REDACTED, "body": "ok"}))
        );
        assert_eq!(step.error_type.as_deref(), Some("AuthError"));
        assert_eq!(
            step.error_message.as_deref(),
            Some("rejected key [REDACTED] (401)")
        );
        assert_eq!(step.metadata["authorization"], json!(REDACTED));
        assert_eq!(step.metadata["attempt"], json!(2));
        assert_eq!(step.tool_name, "http_get");
    }

    #[test]
    fn trace_metadata_is_redacted() {
        let mut trace = ObservedTrace::new("t", "test");
        trace.metadata.insert("session_cookie".into(), json!("abc"));
        trace.metadata.insert("task".into(), json!("Bearer qwerty"));
        policy().redact_trace(&mut trace);
        assert_eq!(
            Value::Object(trace.metadata),
            json!({"session_cookie": REDACTED, "task": "Bearer [REDACTED]"})
        );
    }

    #[test]
    fn long_strings_are_cut_with_a_marker_saying_how_much() {
        let p = RedactionPolicy::default().with_max_string_bytes(Some(10));
        assert_eq!(p.redact_text("0123456789"), "0123456789");
        assert_eq!(
            p.redact_text("0123456789abcdef"),
            "0123456789…[truncated 6 bytes]"
        );
        // Never cut inside a character: "é" is two bytes, the cut moves back to a boundary.
        assert_eq!(
            p.redact_text("012345678é12"),
            "012345678…[truncated 4 bytes]"
        );
        let mut value = json!({"a": ["x".repeat(25)], "n": 1});
        p.redact_value(&mut value);
        assert_eq!(
            value,
            json!({"a": ["xxxxxxxxxx…[truncated 15 bytes]"], "n": 1})
        );
    }

    #[test]
    fn the_default_cap_is_64_kib() {
        let p = policy();
        let text = "a".repeat(DEFAULT_MAX_STRING_BYTES + 100);
        let cut = p.redact_text(&text);
        assert!(cut.starts_with(&"a".repeat(DEFAULT_MAX_STRING_BYTES)));
        assert!(cut.ends_with("…[truncated 100 bytes]"));
        let fits = "a".repeat(DEFAULT_MAX_STRING_BYTES);
        assert!(matches!(p.redact_text(&fits), Cow::Borrowed(_)));
    }

    #[test]
    fn a_secret_at_the_cut_is_still_redacted() {
        // Cutting first would leave "sk-abcdefghi", too short for the pattern to see.
        let p = RedactionPolicy::default().with_max_string_bytes(Some(24));
        let text = format!("{} sk-abcdefghijklmnopqrstuvwxyz", "x".repeat(11));
        let cut = p.redact_text(&text);
        assert!(!cut.contains("sk-abc"), "{cut}");
        assert_eq!(cut, "xxxxxxxxxxx [REDACTED]");
    }

    #[test]
    fn error_messages_are_capped() {
        let p = RedactionPolicy::default().with_max_string_bytes(Some(4));
        let mut step = ObservedStep::new("t", 0, "x", json!({}));
        step.error_message = Some("a long message".into());
        p.redact_step(&mut step);
        assert_eq!(
            step.error_message.as_deref(),
            Some("a lo…[truncated 10 bytes]")
        );
    }

    #[test]
    fn extra_keys_and_patterns_can_be_added() {
        let p = RedactionPolicy::default()
            .with_secret_key("SSN")
            .with_secret_key("x-tenant-id")
            .with_pattern(Regex::new(r"\b\d{4}-\d{4}-\d{4}-\d{4}\b").unwrap())
            .with_pattern(Regex::new(r"pin (?P<secret>\d+)").unwrap());
        let value = {
            let mut v = json!({
                "customer_ssn": "123-45-6789",
                "X_Tenant_Id": "acme",
                "note": "card 1234-5678-9012-3456, pin 4321"
            });
            p.redact_value(&mut v);
            v
        };
        assert_eq!(
            value,
            json!({
                "customer_ssn": REDACTED,
                "X_Tenant_Id": REDACTED,
                "note": "card [REDACTED], pin [REDACTED]"
            })
        );
        // Words without letters or digits add nothing.
        let unchanged = RedactionPolicy::none().with_secret_key("--");
        assert!(unchanged.is_noop());
    }

    #[test]
    fn secret_keys_inside_text_lose_their_values() {
        let p = policy();
        let text = r#"{"api_key": "kv-123", "max_tokens": "5", 'password': 'hunter2', \"token\": \"t0k\"}"#;
        let out = p.redact_text(text);
        for secret in ["kv-123", "hunter2", "t0k"] {
            assert!(!out.contains(secret), "{out}");
        }
        assert!(out.contains(r#""max_tokens": "5""#), "{out}");
        assert!(out.contains(r#""api_key": "[REDACTED]""#), "{out}");
    }

    #[test]
    fn counting_says_how_many_secrets_went_and_strings_were_cut() {
        let p = policy().with_max_string_bytes(Some(64));
        let mut step = ObservedStep::new(
            "t",
            0,
            "call",
            json!({"password": "x", "note": "key sk-abcdefghijklmnopqrstuvwxyz and ghp_abcdefghijklmnopqrstuvwxyz0123456789"}),
        );
        step.outputs = Some(json!({"body": "y".repeat(100), "ok": true}));
        let counts = p.redact_step_counting(&mut step);
        assert_eq!(
            counts,
            RedactionCounts {
                secrets: 3,
                truncated: 1
            }
        );
        // Already redacted values are not counted again.
        assert_eq!(p.redact_step_counting(&mut step).secrets, 0);
        assert_eq!(
            RedactionPolicy::none().redact_step_counting(&mut step),
            RedactionCounts::default()
        );
    }

    #[test]
    fn patterns_given_as_text_compile_or_say_why_not() {
        let p = RedactionPolicy::none()
            .with_pattern_text(r"ID-\d+")
            .unwrap();
        assert_eq!(p.redact_text("see ID-42"), "see [REDACTED]");
        let err = RedactionPolicy::none().with_pattern_text("(").unwrap_err();
        assert!(err.to_string().contains("redaction pattern"), "{err}");
    }

    #[test]
    fn json_text_that_redaction_would_change_is_told_apart() {
        let p = policy()
            .with_max_string_bytes(Some(32))
            .with_pattern(Regex::new("^ID-[0-9]+$").unwrap());
        let cases = [
            json!({"tool": "get_user", "inputs": {"id": 7}, "outputs": {"name": "Ada"}}),
            json!({"inputs": {"api_key": "x"}}),
            json!({"headers": [{"name": "Authorization", "value": "v"}]}),
            json!({"text": "use sk-abcdefghijklmnopqrstuvwxyz"}),
            json!({"ref": "ID-42"}),
            json!({"note": "x".repeat(40)}),
            json!({"note": "line\nbreak"}),
        ];
        for (i, value) in cases.iter().enumerate() {
            let text = value.to_string();
            let mut redacted = value.clone();
            p.redact_value(&mut redacted);
            let changes = redacted != *value;
            assert_eq!(
                p.may_change_json_text(&text),
                changes || text.contains('\\'),
                "{text}"
            );
            assert_eq!(changes, i > 0 && i < 6, "{text}");
        }
        assert!(!RedactionPolicy::none().may_change_json_text(r#"{"password": "x"}"#));
        // A secret key next to text that, joined to it, reads as an exempt counter
        // (`token` + `s...`), and counters alone.
        assert!(p.may_change_json_text(r#"{"token":"secret"}"#));
        assert!(p.may_change_json_text(r#"{"a":"Pass-Word","b":1}"#));
        assert!(!p.may_change_json_text(r#"{"max_tokens":5,"tokens":"s"}"#));
        assert!(!p.may_change_json_text(r#"{"pass":"word"}"#));
    }

    #[test]
    fn the_none_policy_changes_nothing() {
        let p = RedactionPolicy::none();
        assert!(p.is_noop());
        let original = json!({
            "password": "hunter2",
            "auth": "Bearer abc",
            "big": "x".repeat(DEFAULT_MAX_STRING_BYTES * 2)
        });
        let mut value = original.clone();
        p.redact_value(&mut value);
        assert_eq!(value, original);
        let mut step = ObservedStep::new("t", 0, "x", original.clone());
        step.error_message = Some("sk-abcdefghijklmnopqrstu".into());
        let before = step.clone();
        p.redact_step(&mut step);
        assert_eq!(step, before);
    }

    #[test]
    fn a_policy_without_patterns_still_redacts_keys() {
        let p = RedactionPolicy::none().with_secret_key("password");
        assert_eq!(
            {
                let mut v = json!({"password": "x", "note": "Bearer abc"});
                p.redact_value(&mut v);
                v
            },
            json!({"password": REDACTED, "note": "Bearer abc"})
        );
    }
}
