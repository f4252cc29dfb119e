//! Strict JSON: every document the verifier reads from a bundle or an output directory is I-JSON (RFC 7493)
//! before it is parsed, so that no two readers can see two different claims in the same bytes.
//!
//! serde_json keeps the last of two equal keys, a first-wins reader the other; a lone surrogate decodes to
//! U+FFFD in one library and fails in another; `1e400` is infinity to one and an error to the next. Each of
//! these is refused here, with the line and column of the first offence: duplicate keys, lone surrogates and
//! noncharacters (escaped or not), numbers beyond a double's range or precision (integers beyond ±(2^53 - 1)
//! written without a fraction or exponent, more than 17 significant digits, overflow to infinity, a non-zero
//! literal that underflows to zero), a byte-order mark, nesting deeper than serde_json's 128, and anything
//! RFC 8259 itself refuses.

use serde_json::Value;

/// The deepest nesting accepted (serde_json's own recursion limit).
const MAX_DEPTH: usize = 128;

/// The largest integer I-JSON keeps exactly: 2^53 - 1.
const MAX_EXACT_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Parses `bytes` as one strict JSON document.
///
/// # Errors
/// Why the bytes are not one I-JSON document, with line and column.
pub fn parse(bytes: &[u8]) -> Result<Value, String> {
    check(bytes)?;
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

/// Parses `bytes` as strict JSON lines: one document per `\n`-terminated line (a last line without its
/// newline is accepted; an empty line is not a document and is refused).
///
/// # Errors
/// `line N: ...` for the first line that is not one I-JSON document.
pub fn parse_lines(bytes: &[u8]) -> Result<Vec<Value>, String> {
    lines(bytes).map(|(i, line)| parse(line).map_err(|e| format!("line {i}: {e}"))).collect()
}

/// Checks that `bytes` are strict JSON lines without building them.
///
/// # Errors
/// As [`parse_lines`].
pub fn check_lines(bytes: &[u8]) -> Result<(), String> {
    lines(bytes).try_for_each(|(i, line)| check(line).map_err(|e| format!("line {i}: {e}")))
}

/// The 1-based number and bytes of each line of a JSON-lines file.
fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let lines = (!body.is_empty()).then(|| body.split(|b| *b == b'\n'));
    lines.into_iter().flatten().enumerate().map(|(i, line)| (i + 1, line))
}

/// Checks that `bytes` are one strict JSON document without building it.
///
/// # Errors
/// As [`parse`].
pub fn check(bytes: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let (line, column) = position(bytes, e.valid_up_to());
        format!("line {line} column {column}: not UTF-8")
    })?;
    let mut scanner = Scanner { bytes: text.as_bytes(), at: 0 };
    let outcome = scanner.document();
    outcome.map_err(|reason| {
        let (line, column) = position(bytes, scanner.at);
        format!("line {line} column {column}: {reason}")
    })
}

/// 1-based line and column (in bytes) of offset `at`.
fn position(bytes: &[u8], at: usize) -> (usize, usize) {
    let before = &bytes[..at.min(bytes.len())];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|b| **b != b'\n').count() + 1;
    (line, column)
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

type Step = Result<(), String>;

impl Scanner<'_> {
    fn document(&mut self) -> Step {
        if self.bytes.starts_with("\u{feff}".as_bytes()) {
            return Err("a byte-order mark".into());
        }
        self.whitespace();
        self.value(0)?;
        self.whitespace();
        if self.at != self.bytes.len() {
            return Err("text after the document".into());
        }
        Ok(())
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Step {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!("expected {:?}", char::from(byte)))
        }
    }

    fn value(&mut self, depth: usize) -> Step {
        if depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH}"));
        }
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(drop),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err("expected a value".into()),
            None => Err("the document ends early".into()),
        }
    }

    fn literal(&mut self, word: &str) -> Step {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(())
        } else {
            Err("expected a value".into())
        }
    }

    fn object(&mut self, depth: usize) -> Step {
        self.at += 1;
        self.whitespace();
        let mut keys: std::collections::HashSet<String> = std::collections::HashSet::new();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.whitespace();
            if self.peek() != Some(b'"') {
                return Err("expected a key".into());
            }
            let start = self.at;
            let key = self.string()?;
            if !keys.insert(key) {
                self.at = start;
                let shown =
                    std::str::from_utf8(&self.bytes[start..start + self.key_len(start)]).unwrap_or("");
                return Err(format!("duplicate key {shown}"));
            }
            self.whitespace();
            self.expect(b':')?;
            self.whitespace();
            self.value(depth + 1)?;
            self.whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err("expected ',' or '}'".into()),
            }
        }
    }

    /// The length in bytes of the string token starting at `start` (for the evidence only).
    fn key_len(&self, start: usize) -> usize {
        let mut probe = Scanner { bytes: self.bytes, at: start };
        match probe.string() {
            Ok(_) => (probe.at - start).min(80),
            Err(_) => 1,
        }
    }

    fn array(&mut self, depth: usize) -> Step {
        self.at += 1;
        self.whitespace();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.whitespace();
            self.value(depth + 1)?;
            self.whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err("expected ',' or ']'".into()),
            }
        }
    }

    /// A string token, decoded (keys are compared decoded: `"a"` and `"\u0061"` are the same key).
    fn string(&mut self) -> Result<String, String> {
        self.at += 1;
        let mut out = String::new();
        loop {
            let start = self.at;
            while let Some(byte) = self.peek() {
                if byte == b'"' || byte == b'\\' || byte < 0x20 {
                    break;
                }
                self.at += 1;
            }
            // The input is valid UTF-8 and the stops are ASCII, so this slice is on char boundaries.
            let run = std::str::from_utf8(&self.bytes[start..self.at]).map_err(|e| e.to_string())?;
            if let Some(c) = run.chars().find(|c| noncharacter(u32::from(*c))) {
                return Err(format!("the noncharacter U+{:04X}", u32::from(c)));
            }
            out.push_str(run);
            match self.peek() {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.at += 1;
                    self.escape(&mut out)?;
                }
                Some(_) => return Err("an unescaped control character in a string".into()),
                None => return Err("a string is not closed".into()),
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Step {
        let Some(byte) = self.peek() else { return Err("a string is not closed".into()) };
        self.at += 1;
        let simple = match byte {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                let code = match unit {
                    0xD800..=0xDBFF => {
                        if !self.bytes[self.at..].starts_with(b"\\u") {
                            return Err(format!("a lone surrogate \\u{unit:04X}"));
                        }
                        self.at += 2;
                        let low = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return Err(format!("a lone surrogate \\u{unit:04X}"));
                        }
                        0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    }
                    0xDC00..=0xDFFF => return Err(format!("a lone surrogate \\u{unit:04X}")),
                    other => other,
                };
                if noncharacter(code) {
                    return Err(format!("the noncharacter U+{code:04X}"));
                }
                char::from_u32(code).ok_or_else(|| format!("no character U+{code:04X}"))?
            }
            _ => return Err("an unknown escape".into()),
        };
        out.push(simple);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self.bytes.get(self.at..self.at + 4).ok_or("a \\u escape ends early")?;
        let text = std::str::from_utf8(digits).map_err(|_| "a \\u escape is not 4 hex digits")?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("a \\u escape is not 4 hex digits".into());
        }
        self.at += 4;
        u32::from_str_radix(text, 16).map_err(|e| e.to_string())
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        self.at - start
    }

    fn number(&mut self) -> Step {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let int_start = self.at;
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err("a number without digits".into()),
        }
        let int_digits = &self.bytes[int_start..self.at];
        let mut fraction: &[u8] = &[];
        let mut integral = true;
        if self.peek() == Some(b'.') {
            self.at += 1;
            let fraction_start = self.at;
            if self.digits() == 0 {
                return Err("a fraction without digits".into());
            }
            fraction = &self.bytes[fraction_start..self.at];
            integral = false;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err("an exponent without digits".into());
            }
            integral = false;
        }
        let literal = std::str::from_utf8(&self.bytes[start..self.at]).map_err(|e| e.to_string())?;
        let value: f64 = literal.parse().map_err(|_| format!("the number {literal} does not parse"))?;
        let kept = fraction.len() - fraction.iter().rev().take_while(|d| **d == b'0').count();
        let significant = int_digits.iter().chain(&fraction[..kept]).skip_while(|d| **d == b'0').count();
        let nonzero = int_digits.iter().chain(fraction).any(|d| *d != b'0');
        if value.is_infinite() {
            Err(format!("the number {literal} is beyond a double's range"))
        } else if nonzero && value == 0.0 {
            Err(format!("the number {literal} underflows to zero"))
        } else if integral && value.abs() > MAX_EXACT_INTEGER {
            Err(format!("the integer {literal} is beyond ±(2^53 - 1)"))
        } else if significant > 17 {
            Err(format!("the number {literal} has more significant digits than a double keeps"))
        } else {
            Ok(())
        }
    }
}

/// Unicode noncharacters: U+FDD0..=U+FDEF and the last two code points of every plane.
fn noncharacter(code: u32) -> bool {
    (0xFDD0..=0xFDEF).contains(&code) || code & 0xFFFE == 0xFFFE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> String {
        match check(text.as_bytes()) {
            Ok(()) => panic!("{text:?} was accepted"),
            Err(reason) => reason,
        }
    }

    #[test]
    fn ordinary_documents_pass_and_parse_as_serde_json_does() {
        for text in [
            r#"{"a":1,"b":[true,false,null],"c":{"d":"é\u00e9\ud83d\ude00"},"e":-0.5e-3,"f":0}"#,
            "[]",
            "  \"x\"  ",
            "9007199254740991",
            "-9007199254740991",
            "0.30000000000000004",
            "1e308",
            "12345678901234567e3",
            "1.0000000000000000",
        ] {
            assert_eq!(
                parse(text.as_bytes()),
                serde_json::from_str::<Value>(text).map_err(|e| e.to_string()),
                "{text}"
            );
        }
    }

    #[test]
    fn each_ambiguity_is_refused_and_named() {
        assert!(refused(r#"{"ndcg@10":0.7,"ndcg@10":0.8}"#).contains("duplicate key \"ndcg@10\""));
        assert!(refused(r#"{"a":1,"\u0061":2}"#).contains("duplicate key"));
        assert!(refused(r#"{"x":{"a":1},"y":[{"b":1,"b":2}]}"#).contains("line 1 column 26"));
        assert!(refused(r#""\ud800""#).contains("lone surrogate"));
        assert!(refused(r#""\udc00\ud800""#).contains("lone surrogate"));
        assert!(refused(r#""\ud800\u0041""#).contains("lone surrogate"));
        assert!(refused(r#""\uffff""#).contains("noncharacter"));
        assert!(refused("\"\u{fdd0}\"").contains("noncharacter"));
        assert!(refused("1e400").contains("range"));
        assert!(refused("-1e400").contains("range"));
        assert!(refused("1e-400").contains("underflows"));
        assert!(refused("9007199254740993").contains("2^53"));
        assert!(refused("3.141592653589793238462643383279").contains("significant digits"));
        assert!(refused("\u{feff}{}").contains("byte-order mark"));
        assert!(refused("{} {}").contains("after the document"));
        assert!(refused("[1,]").contains("expected a value"));
        assert!(refused("01").contains("after the document"));
        assert!(refused("\"a\tb\"").contains("control character"));
        assert!(refused(&"[".repeat(200)).contains("deeper"));
        assert!(check(b"\"\xff\"").unwrap_err().contains("not UTF-8"));
    }

    #[test]
    fn zero_and_small_numbers_are_not_underflows() {
        for text in ["0", "-0", "0.0", "0.000", "0e10", "5e-324", "2.2250738585072014e-308", "100"] {
            assert!(check(text.as_bytes()).is_ok(), "{text}");
        }
    }

    #[test]
    fn lines_name_the_line_at_fault() {
        assert_eq!(parse_lines(b"{\"a\":1}\n{\"b\":2}\n").unwrap().len(), 2);
        assert_eq!(parse_lines(b"").unwrap().len(), 0);
        let error = parse_lines(b"{\"a\":1}\n{\"b\":2,\"b\":3}\n").unwrap_err();
        assert!(error.starts_with("line 2: "), "{error}");
        assert!(parse_lines(b"{}\n\n{}\n").unwrap_err().starts_with("line 2: "));
    }

    /// The bundle reader checks its JSON-lines files with `check_lines` and parses the rows later: both must
    /// refuse the same files with the same words.
    #[test]
    fn checking_lines_refuses_what_parsing_them_refuses() {
        let files: [&[u8]; 8] = [
            b"{\"a\":1}\n{\"b\":2}\n",
            b"",
            b"\n",
            b"{}",
            b"{\"a\":1}\n{\"b\":2,\"b\":3}\n",
            b"{}\n\n{}\n",
            b"{}\n{\"x\":1e999}\n{}\n",
            b"{}\n{}\n[1,\n",
        ];
        for bytes in files {
            assert_eq!(
                check_lines(bytes),
                parse_lines(bytes).map(drop),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        assert_eq!(check_lines(b"{}\n{\"x\":1e999}\n").unwrap_err().get(..8), Some("line 2: "));
    }
}
