//! RFC 8785 (JCS) canonical JSON and `sha256:` digests, written here independently of the runner's library.
//!
//! Object keys are sorted by their UTF-16 code units; numbers are written the ECMAScript way (shortest
//! round-trip, exponent forms as `Number.prototype.toString`); strings escape only what JSON requires, with
//! lowercase `\u00xx` for other control characters.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical bytes of `value`.
pub fn canonical(value: &Value) -> Vec<u8> {
    let mut out = String::new();
    write_value(value, &mut out);
    out.into_bytes()
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_tagged(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// Lowercase hex sha256 of `bytes`, untagged (split order, samples, semantic-text digests).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 15)]));
    }
    out
}

/// `sha256:` of the canonical JSON of `value`.
pub fn canonical_digest(value: &Value) -> String {
    sha256_tagged(&canonical(value))
}

fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                write_float(i as f64, out);
            } else if let Some(u) = n.as_u64() {
                write_float(u as f64, out);
            } else {
                write_float(n.as_f64().unwrap_or(f64::NAN), out);
            }
        }
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                if let Some(item) = map.get(key) {
                    write_value(item, out);
                }
            }
            out.push('}');
        }
    }
}

fn write_float(x: f64, out: &mut String) {
    let mut buffer = ryu_js::Buffer::new();
    out.push_str(buffer.format(x));
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_8785_examples() {
        let value: Value = serde_json::from_str(
            r#"{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],
                "string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}"#,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(canonical(&value)).unwrap(),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    #[test]
    fn keys_sort_by_utf16_units() {
        // U+FB01 is above the surrogates in UTF-16 but below U+1F600 as a code point.
        let value: Value = serde_json::from_str(r#"{"\ufb01":1,"\ud83d\ude00":2,"a":3,"\u20ac":4}"#).unwrap();
        assert_eq!(String::from_utf8(canonical(&value)).unwrap(), "{\"a\":3,\"€\":4,\"😀\":2,\"ﬁ\":1}");
    }
}
