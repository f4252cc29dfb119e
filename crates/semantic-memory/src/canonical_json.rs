//! RFC 8785 (JCS) canonical JSON and the `sha256:<hex>` digests computed over it.
//!
//! Receipts are hashed over their canonical bytes so that anyone re-serializing the same value, in any language
//! with a JCS implementation, gets the same digest.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

mod serializer;

/// Serializes `value` as RFC 8785 canonical JSON: object keys sorted by UTF-16 code units, no insignificant
/// white space, numbers in ECMAScript's shortest form, strings with the minimal JSON escapes.
pub fn to_canonical_bytes(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_value(value, &mut out);
    out
}

/// Returns the canonical bytes of any serializable value: the bytes of `to_canonical_bytes` over its
/// `serde_json::to_value`, written directly (map keys that are floats are refused).
///
/// # Errors
/// Fails only when `T`'s `Serialize` implementation fails (for example, a map with non-string keys).
pub fn canonical_bytes_of<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    canonical_bytes_without(value, None)
}

/// As [`canonical_bytes_of`], with the member `omit` left out of the outermost object (a digest field that
/// cannot cover itself).
///
/// # Errors
/// As [`canonical_bytes_of`].
pub fn canonical_bytes_without<T: Serialize + ?Sized>(
    value: &T,
    omit: Option<&'static str>,
) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(4096);
    value.serialize(serializer::Canonical { out: &mut out, omit })?;
    Ok(out)
}

/// Returns `sha256:<lowercase hex>` of `bytes`, the digest notation used in every receipt.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// Returns the lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// `bytes` (a digest, whole or streamed) in lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(2 * bytes.len());
    for byte in bytes {
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
        write_f64(number.as_f64().unwrap_or(f64::NAN), out);
    }
}

/// A double in ECMAScript's shortest form, as JCS prints every non-integer number.
fn write_f64(float: f64, out: &mut Vec<u8>) {
    let mut buffer = ryu_js::Buffer::new();
    out.extend_from_slice(buffer.format(float).as_bytes());
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

    /// The direct serializer's bytes, checked against the JSON-value path they replace.
    fn same_both_ways<T: Serialize>(value: &T) -> String {
        let direct = canonical_bytes_of(value).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&direct),
            String::from_utf8_lossy(&to_canonical_bytes(&serde_json::to_value(value).unwrap()))
        );
        String::from_utf8(direct).unwrap()
    }

    #[derive(Serialize)]
    enum Shape {
        Unit,
        Newtype(u8),
        Tuple(i8, f32),
        Struct { z: Option<u64>, a: &'static str },
    }

    #[derive(Serialize)]
    struct Unit;

    #[derive(Serialize)]
    struct Everything {
        zeta: Vec<Shape>,
        alpha: (bool, char, Unit, Option<bool>),
        integers: [i64; 6],
        unsigned: [u64; 3],
        wide: (i128, u128),
        floats: [f64; 7],
        narrow: [f32; 3],
        #[serde(with = "bytes")]
        raw: Vec<u8>,
        by_number: std::collections::BTreeMap<u32, String>,
        by_text: std::collections::HashMap<String, Vec<()>>,
        nested: Option<Box<Everything>>,
        #[serde(rename = "\u{e000}")]
        private_use: u8,
        #[serde(rename = "\u{1f600}")]
        emoji: u8,
    }

    mod bytes {
        pub(super) fn serialize<S: serde::Serializer>(
            value: &[u8],
            serializer: S,
        ) -> Result<S::Ok, S::Error> {
            serializer.serialize_bytes(value)
        }
    }

    #[test]
    fn the_serializer_writes_what_the_value_path_writes_for_every_shape() {
        let leaf = Everything {
            zeta: vec![
                Shape::Unit,
                Shape::Newtype(7),
                Shape::Tuple(-3, 0.1),
                Shape::Struct { z: None, a: "é\n" },
            ],
            alpha: (true, '\u{1}', Unit, None),
            integers: [0, -1, 1 << 53, -(1 << 53), (1 << 53) + 1, i64::MIN],
            unsigned: [u64::MAX, 1 << 53, (1 << 53) + 1],
            wide: (-5, 1 << 60),
            floats: [1.0, -0.0, 0.1, 1e21, 5e-324, f64::NAN, f64::NEG_INFINITY],
            narrow: [0.1, f32::MAX, f32::INFINITY],
            raw: vec![0, 255, 34],
            by_number: [(10, "ten".to_owned()), (9, "nine".to_owned())].into(),
            by_text: [("b".to_owned(), vec![()]), ("a".to_owned(), vec![])].into(),
            nested: None,
            private_use: 1,
            emoji: 2,
        };
        let text = same_both_ways(&Everything { nested: Some(Box::new(leaf)), ..everything_default() });
        // UTF-16 order: ASCII, then U+1F600 (a surrogate pair, 0xD83D...), then U+E000.
        assert!(text.ends_with("\"\u{1f600}\":0,\"\u{e000}\":0}"), "{text}");
        assert!(text.contains(r#""integers":[0,-1,9007199254740992,-9007199254740992,9007199254740992,-9223372036854776000]"#), "{text}");
        assert!(text.contains(r#""floats":[1,0,0.1,1e+21,5e-324,null,null]"#), "{text}");
    }

    fn everything_default() -> Everything {
        Everything {
            zeta: Vec::new(),
            alpha: (false, 'x', Unit, Some(true)),
            integers: [0; 6],
            unsigned: [0; 3],
            wide: (0, 0),
            floats: [0.0; 7],
            narrow: [0.0; 3],
            raw: Vec::new(),
            by_number: Default::default(),
            by_text: Default::default(),
            nested: None,
            private_use: 0,
            emoji: 0,
        }
    }

    #[test]
    fn the_serializer_agrees_with_the_value_path_on_random_documents() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        fn document(next: &mut dyn FnMut() -> u64, depth: u32) -> Value {
            let pick = next() % if depth == 0 { 5 } else { 7 };
            match pick {
                0 => Value::Null,
                1 => Value::Bool(next().is_multiple_of(2)),
                2 => json!((next() as i64) >> (next() % 64)),
                3 => json!(f64::from_bits(next())),
                4 => {
                    let alphabet = ["a", "Z", "\"", "\\", "\u{7}", "é", "\u{e000}", "\u{1f600}", "€", " "];
                    Value::String((0..next() % 6).map(|_| alphabet[(next() % 10) as usize]).collect())
                }
                5 => Value::Array((0..next() % 5).map(|_| document(next, depth - 1)).collect()),
                _ => {
                    let keys = ["b", "a", "aa", "\u{e000}", "\u{1f600}", "", "B", "é"];
                    Value::Object(
                        (0..next() % 6)
                            .map(|_| (keys[(next() % 8) as usize].to_owned(), document(next, depth - 1)))
                            .collect(),
                    )
                }
            }
        }
        for _ in 0..2_000 {
            same_both_ways(&document(&mut next, 4));
        }
    }

    #[test]
    fn the_omitted_member_is_left_out_of_the_outermost_object_only() {
        let value = json!({"digest": 1, "inner": {"digest": 2}, "z": 3});
        assert_eq!(
            String::from_utf8(canonical_bytes_without(&value, Some("digest")).unwrap()).unwrap(),
            r#"{"inner":{"digest":2},"z":3}"#
        );
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value_as_a_json_map_does() {
        struct Twice;
        impl Serialize for Twice {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct;
                let mut object = serializer.serialize_struct("Twice", 3)?;
                object.serialize_field("b", &1)?;
                object.serialize_field("a", &2)?;
                object.serialize_field("b", &3)?;
                object.end()
            }
        }
        assert_eq!(same_both_ways(&Twice), r#"{"a":2,"b":3}"#);
    }

    #[test]
    fn a_float_map_key_is_refused() {
        struct FloatKey;
        impl Serialize for FloatKey {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(&1.5f64, &1u8)?;
                map.end()
            }
        }
        assert!(canonical_bytes_of(&FloatKey).is_err());
    }

    #[test]
    fn sha256_of_abc() {
        assert_eq!(
            sha256_digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
