//! Lucene 9.9.1's `StandardTokenizer`: the UAX #29 word-break DFA JFlex generated for it (Unicode 12.1 tables),
//! run exactly as its scanner runs, on UTF-16 code units.
//!
//! The DFA is Lucene's own ([`super::tables`], dumped from the class the peer runs), so the Unicode version is
//! pinned to Lucene's rather than to whatever a segmentation crate ships. Two behaviours of the scanner matter
//! beyond the DFA: the match is the longest accepting prefix, and the scanner's buffer is the maximum token
//! length (255 UTF-16 units), so a scan never looks past 255 units from the token's start; a longer run is cut
//! there and the rest scanned as a new token.

use std::ops::Range;
use std::sync::OnceLock;

use super::tables;

/// Lucene's default `maxTokenLength`, which is also the scanner's buffer size.
pub(super) const MAX_TOKEN_LENGTH: usize = 255;

/// What the scanner's rule for a match says: skip it, or emit a token (the type is irrelevant to the analyzer).
const ACTION_SKIP: i32 = 1;
const ACTION_TOKEN_TYPES: std::ops::RangeInclusive<i32> = 2..=9;
/// `ZZ_ATTRIBUTE` bits: an accepting state, and one with no outgoing transition worth trying.
const ATTR_FINAL: i32 = 1;
const ATTR_NO_LOOKAHEAD: i32 = 8;

struct Dfa {
    cmap_top: Vec<i32>,
    cmap_blocks: Vec<i32>,
    action: Vec<i32>,
    rowmap: Vec<i32>,
    trans: Vec<i32>,
    attribute: Vec<i32>,
}

fn unpack(pairs: &[i32], len: usize) -> Vec<i32> {
    let mut out = Vec::with_capacity(len);
    for pair in pairs.chunks_exact(2) {
        let count = usize::try_from(pair[0]).unwrap_or(0);
        out.extend(std::iter::repeat_n(pair[1], count));
    }
    debug_assert_eq!(out.len(), len);
    out
}

fn dfa() -> &'static Dfa {
    static DFA: OnceLock<Dfa> = OnceLock::new();
    DFA.get_or_init(|| Dfa {
        cmap_top: unpack(&tables::CMAP_TOP, tables::CMAP_TOP_LEN),
        cmap_blocks: unpack(&tables::CMAP_BLOCKS, tables::CMAP_BLOCKS_LEN),
        action: unpack(&tables::ACTION, tables::ACTION_LEN),
        rowmap: unpack(&tables::ROWMAP, tables::ROWMAP_LEN),
        trans: unpack(&tables::TRANS, tables::TRANS_LEN),
        attribute: unpack(&tables::ATTRIBUTE, tables::ATTRIBUTE_LEN),
    })
}

impl Dfa {
    fn class(&self, code_point: u32) -> i32 {
        let offset = (code_point & 255) as usize;
        let index = if offset as u32 == code_point {
            offset
        } else {
            let top = self.cmap_top.get((code_point >> 8) as usize).copied().unwrap_or(0);
            usize::try_from(top).unwrap_or(0) | offset
        };
        self.cmap_blocks.get(index).copied().unwrap_or(0)
    }

    fn next(&self, state: usize, code_point: u32) -> Option<usize> {
        let row = usize::try_from(*self.rowmap.get(state)?).ok()?;
        let class = usize::try_from(self.class(code_point)).ok()?;
        usize::try_from(*self.trans.get(row + class)?).ok()
    }

    fn attribute(&self, state: usize) -> i32 {
        self.attribute.get(state).copied().unwrap_or(0)
    }
}

/// `Character.codePointAt(char[], index, limit)`: a surrogate pair inside the limit, else the unit itself.
fn code_point_at(units: &[u16], index: usize, limit: usize) -> (u32, usize) {
    let unit = units[index];
    if (0xD800..0xDC00).contains(&unit) && index + 1 < limit {
        let low = units[index + 1];
        if (0xDC00..0xE000).contains(&low) {
            return (0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00), 2);
        }
    }
    (u32::from(unit), 1)
}

/// The tokens of `units`, as ranges of UTF-16 code units, in order.
pub(super) fn tokenize(units: &[u16]) -> Vec<Range<usize>> {
    let dfa = dfa();
    let mut tokens = Vec::new();
    let mut start = 0;
    while start < units.len() {
        // The scanner's buffer holds 255 units from the token's start; a surrogate pair that would straddle its
        // end is held back whole.
        let mut limit = units.len().min(start + MAX_TOKEN_LENGTH);
        if limit < units.len() && (0xD800..0xDC00).contains(&units[limit - 1]) {
            limit -= 1;
        }
        let mut state = 0;
        let mut action = (dfa.attribute(0) & ATTR_FINAL != 0).then_some(0);
        let mut marked = start;
        let mut position = start;
        while position < limit {
            let (code_point, width) = code_point_at(units, position, limit);
            position += width;
            let Some(next) = dfa.next(state, code_point) else { break };
            state = next;
            let attribute = dfa.attribute(state);
            if attribute & ATTR_FINAL != 0 {
                action = Some(state);
                marked = position;
                if attribute & ATTR_NO_LOOKAHEAD != 0 {
                    break;
                }
            }
        }
        if marked == start {
            // Lucene's grammar matches every code point, so this is unreachable; step on rather than loop.
            marked = start + code_point_at(units, start, units.len()).1;
            action = None;
        }
        let rule = action.and_then(|state| dfa.action.get(state).copied()).unwrap_or(ACTION_SKIP);
        if ACTION_TOKEN_TYPES.contains(&rule) {
            tokens.push(start..marked);
        }
        start = marked;
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let units: Vec<u16> = text.encode_utf16().collect();
        tokenize(&units).into_iter().map(|r| String::from_utf16_lossy(&units[r])).collect()
    }

    #[test]
    fn keeps_what_lucene_keeps_whole() {
        assert_eq!(words("O'Neil's 1,000.5 x.org TNF-α"), ["O'Neil's", "1,000.5", "x.org", "TNF", "α"]);
    }

    #[test]
    fn symbols_lucene_calls_emoji_are_tokens_and_superscripts_are_not() {
        assert_eq!(words("© ® ™ x² 😀"), ["©", "®", "™", "x", "😀"]);
    }

    #[test]
    fn ideographs_are_single_tokens_and_katakana_runs_whole() {
        assert_eq!(words("中文 カタカナ ひらがな"), ["中", "文", "カタカナ", "ひ", "ら", "が", "な"]);
    }

    #[test]
    fn a_run_longer_than_the_buffer_is_cut_at_255_units() {
        let long = "a".repeat(300);
        let got = words(&long);
        assert_eq!(got.iter().map(String::len).collect::<Vec<_>>(), [255, 45]);
    }

    #[test]
    fn a_surrogate_pair_is_never_split_at_the_buffer_end() {
        // 254 units of 'a' then a supplementary letter (2 units): the pair straddles unit 255 and is held back.
        let text = format!("{}𐐀bc", "a".repeat(254));
        let got = words(&text);
        assert_eq!(got.iter().map(|t| t.encode_utf16().count()).collect::<Vec<_>>(), [254, 4]);
    }
}
