//! Reading the OTLP/HTTP JSON encoding into the protobuf types of [`super::proto`].
//!
//! The JSON mapping differs from plain serde in a few places, handled here: trace and span ids
//! are hex text (not base64), 64-bit integers may be text or numbers, enums are numbers (their
//! names are accepted too), bytes are base64 text, and an attribute value is an object with one
//! key naming its kind. The workspace reads JSON with exact numbers, so a non-integer number
//! reaches a visitor as a one-entry map holding its text; the double visitor reads that too.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use super::proto::{AnyValue, ArrayValue, KeyValueList, any_value};

/// A trace or span id written as hex text (empty text: no id).
pub(crate) fn hex_id<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    let text = String::deserialize(deserializer)?;
    decode_hex(&text).ok_or_else(|| de::Error::custom(format!("id {text:?} is not hex text")))
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks(2)
        .map(|pair| {
            let high = (pair[0] as char).to_digit(16)?;
            let low = (pair[1] as char).to_digit(16)?;
            u8::try_from(high * 16 + low).ok()
        })
        .collect()
}

/// A `uint64`/`fixed64` field: a number or decimal text.
pub(crate) fn unsigned<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    deserializer.deserialize_any(IntegerVisitor).and_then(|n| {
        u64::try_from(n).map_err(|_| de::Error::custom(format!("{n} is not an unsigned integer")))
    })
}

/// A span status code: 0 unset, 1 ok, 2 error, or the enum's name.
pub(crate) fn status_code<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i32, D::Error> {
    deserializer.deserialize_any(StatusCodeVisitor)
}

struct IntegerVisitor;

impl Visitor<'_> for IntegerVisitor {
    type Value = i128;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer, or an integer as text")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i128, E> {
        Ok(i128::from(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i128, E> {
        Ok(i128::from(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<i128, E> {
        v.trim()
            .parse()
            .map_err(|_| E::custom(format!("{v:?} is not an integer")))
    }
}

struct StatusCodeVisitor;

impl Visitor<'_> for StatusCodeVisitor {
    type Value = i32;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a status code (0, 1, 2 or its name)")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i32, E> {
        i32::try_from(v).map_err(|_| E::custom(format!("status code {v} is out of range")))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i32, E> {
        i32::try_from(v).map_err(|_| E::custom(format!("status code {v} is out of range")))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<i32, E> {
        match v {
            "STATUS_CODE_UNSET" | "UNSET" => Ok(0),
            "STATUS_CODE_OK" | "OK" => Ok(1),
            "STATUS_CODE_ERROR" | "ERROR" => Ok(2),
            other => other
                .parse()
                .map_err(|_| E::custom(format!("unknown status code {other:?}"))),
        }
    }
}

impl<'de> Deserialize<'de> for AnyValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(AnyValueVisitor)
    }
}

struct AnyValueVisitor;

impl<'de> Visitor<'de> for AnyValueVisitor {
    type Value = AnyValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an attribute value such as {\"stringValue\": \"...\"}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AnyValue, A::Error> {
        use any_value::Value;
        let mut value = None;
        while let Some(key) = map.next_key::<String>()? {
            let kind = match key.as_str() {
                "stringValue" | "string_value" => Value::StringValue(map.next_value()?),
                "boolValue" | "bool_value" => Value::BoolValue(map.next_value()?),
                "intValue" | "int_value" => {
                    let n = map.next_value::<Integer>()?.0;
                    Value::IntValue(i64::try_from(n).map_err(|_| {
                        de::Error::custom(format!("intValue {n} does not fit 64 bits"))
                    })?)
                }
                "doubleValue" | "double_value" => Value::DoubleValue(map.next_value::<Double>()?.0),
                "arrayValue" | "array_value" => Value::ArrayValue(map.next_value::<ArrayValue>()?),
                "kvlistValue" | "kvlist_value" => {
                    Value::KvlistValue(map.next_value::<KeyValueList>()?)
                }
                "bytesValue" | "bytes_value" => {
                    let text = map.next_value::<String>()?;
                    Value::BytesValue(decode_base64(&text).ok_or_else(|| {
                        de::Error::custom("bytesValue is not base64 text".to_owned())
                    })?)
                }
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                    continue;
                }
            };
            value = Some(kind);
        }
        Ok(AnyValue { value })
    }
}

/// An `int64` as a number or text.
struct Integer(i128);

impl<'de> Deserialize<'de> for Integer {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IntegerVisitor).map(Integer)
    }
}

/// A `double`: a number, or the text `NaN`, `Infinity`, `-Infinity` (or a number as text).
struct Double(f64);

impl<'de> Deserialize<'de> for Double {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DoubleVisitor;
        impl<'de> Visitor<'de> for DoubleVisitor {
            type Value = f64;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
                Ok(v)
            }
            #[allow(clippy::cast_precision_loss)]
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
                Ok(v as f64)
            }
            #[allow(clippy::cast_precision_loss)]
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
                Ok(v as f64)
            }
            /// Exact-number builds hand a non-integer over as a one-entry map holding its text.
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<f64, A::Error> {
                match map.next_entry::<String, String>()? {
                    Some((_, text)) => text
                        .parse()
                        .map_err(|_| de::Error::custom(format!("{text:?} is not a number"))),
                    None => Err(de::Error::custom("an empty object is not a number")),
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
                match v {
                    "NaN" => Ok(f64::NAN),
                    "Infinity" => Ok(f64::INFINITY),
                    "-Infinity" => Ok(f64::NEG_INFINITY),
                    other => other
                        .parse()
                        .map_err(|_| E::custom(format!("{other:?} is not a number"))),
                }
            }
        }
        deserializer.deserialize_any(DoubleVisitor).map(Double)
    }
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with or without padding; `None` for anything else.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text.bytes().filter(|b| *b != b'=').collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    let mut buffer = 0u32;
    let mut bits = 0;
    for digit in digits {
        let value = BASE64.iter().position(|c| *c == digit)?;
        buffer = (buffer << 6) | u32::try_from(value).ok()?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((buffer >> bits) & 0xff).ok()?);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(decode_base64("aGk=").as_deref(), Some(&b"hi"[..]));
        assert_eq!(decode_base64("aGk").as_deref(), Some(&b"hi"[..]));
        assert_eq!(decode_base64("aGVsbG8h").as_deref(), Some(&b"hello!"[..]));
        assert_eq!(decode_base64("a$"), None);
    }

    #[test]
    fn hex_ids_decode_and_bad_ones_are_refused() {
        assert_eq!(decode_hex("0aFf"), Some(vec![0x0a, 0xff]));
        assert_eq!(decode_hex("abc"), None);
        assert_eq!(decode_hex("zz"), None);
        assert_eq!(decode_hex(""), Some(Vec::new()));
    }
}
