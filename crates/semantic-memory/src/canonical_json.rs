//! RFC 8785 (JCS) canonical JSON and the `sha256:<hex>` digests computed over it.
//!
//! Receipts are hashed over their canonical bytes so that anyone re-serializing the same value, in any language
//! with a JCS implementation, gets the same digest.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Serializes `value` as RFC 8785 canonical JSON: object keys sorted by UTF-16 code units, no insignificant
/// white space, numbers in ECMAScript's shortest form, strings with the minimal JSON escapes.
pub fn to_canonical_bytes(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_value(value, &mut out);
    out
}

/// Converts any serializable value to a JSON value and returns its canonical bytes.
///
/// # Errors
/// Fails only when `T`'s `Serialize` implementation fails (for example, a map with non-string keys).
pub fn canonical_bytes_of<T: Serialize>(value: &T) -> serde_json::Result<Vec<u8>> {
    Ok(to_canonical_bytes(&serde_json::to_value(value)?))
}

/// Returns `sha256:<lowercase hex>` of `bytes`, the digest notation used in every receipt.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// Returns the lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in hash.iter() {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    hex
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => write_number(number, out),
        Value::String(text) => write_string(text, out),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            out.push(b'{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_value(item, out);
            }
            out.push(b'}');
        }
    }
}

fn write_number(number: &serde_json::Number, out: &mut Vec<u8>) {
    // JCS treats every number as an IEEE double; integers that fit 2^53 print the same either way.
    if let Some(integer) = number.as_i64().filter(|i| i.unsigned_abs() <= 1 << 53) {
        out.extend_from_slice(integer.to_string().as_bytes());
    } else if let Some(integer) = number.as_u64().filter(|u| *u <= 1 << 53) {
        out.extend_from_slice(integer.to_string().as_bytes());
    } else {
        let float = number.as_f64().unwrap_or(f64::NAN);
        let mut buffer = ryu_js::Buffer::new();
        out.extend_from_slice(buffer.format(float).as_bytes());
    }
}

fn write_string(text: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for ch in text.chars() {
        match ch {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if u32::from(c) < 0x20 => {
                let code = u32::from(c) as usize;
                out.extend_from_slice(b"\\u00");
                out.push(HEX[code >> 4]);
                out.push(HEX[code & 0x0f]);
            }
            c => {
                let mut utf8 = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(value: Value, expected: &str) {
        assert_eq!(String::from_utf8_lossy(&to_canonical_bytes(&value)), expected);
    }

    #[test]
    fn sorts_keys_and_drops_whitespace() {
        check(json!({"b": 1, "a": [true, null, "x"]}), r#"{"a":[true,null,"x"],"b":1}"#);
    }

    #[test]
    fn sorts_keys_by_utf16_not_utf8() {
        // U+E000 sorts after U+1F600 in UTF-8 but before it in UTF-16 (surrogates are 0xD83D...).
        check(json!({"\u{e000}": 1, "\u{1f600}": 2}), "{\"\u{1f600}\":2,\"\u{e000}\":1}");
    }

    #[test]
    fn numbers_follow_ecmascript() {
        check(
            json!([1.0, 0.1, 1e21, 1e-7, -0.0, 123456789012.5, 5]),
            "[1,0.1,1e+21,1e-7,0,123456789012.5,5]",
        );
    }

    #[test]
    #[allow(clippy::excessive_precision)]
    fn rfc8785_example_numbers() {
        // From RFC 8785 appendix B.
        check(
            json!([333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]),
            "[333333333.3333333,1e+30,4.5,0.002,1e-27]",
        );
    }

    #[test]
    fn escapes_minimally() {
        check(json!("a\"b\\c\n\u{1}\u{7f}é€"), "\"a\\\"b\\\\c\\n\\u0001\u{7f}é€\"");
    }

    #[test]
    fn sha256_of_abc() {
        assert_eq!(
            sha256_digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
