//! The words Anserini's default English analyzer keeps, read by this verifier's own scanner: Lucene's
//! `StandardTokenizer` automaton (the generated tables the runner's port uses too: they are Lucene's definition,
//! data, not code), possessives cut, Java's lowercase, Lucene's English stop words dropped, then stemmed.

use std::sync::OnceLock;

mod lucene {
    #![allow(dead_code, unreachable_pub)]
    include!("../../../../../configs/lucene-tables.rs");
}

/// The scanner's buffer: no token runs, and no look-ahead reaches, past 255 UTF-16 units from its start.
const BUFFER_UNITS: usize = 255;

/// The automaton, unpacked once.
struct Automaton {
    top: Vec<i32>,
    blocks: Vec<i32>,
    actions: Vec<i32>,
    rows: Vec<i32>,
    next: Vec<i32>,
    flags: Vec<i32>,
}

fn runs(packed: &[i32]) -> Vec<i32> {
    packed
        .chunks_exact(2)
        .flat_map(|run| std::iter::repeat_n(run[1], usize::try_from(run[0]).unwrap_or(0)))
        .collect()
}

fn automaton() -> &'static Automaton {
    static CELL: OnceLock<Automaton> = OnceLock::new();
    CELL.get_or_init(|| Automaton {
        top: runs(&lucene::CMAP_TOP),
        blocks: runs(&lucene::CMAP_BLOCKS),
        actions: runs(&lucene::ACTION),
        rows: runs(&lucene::ROWMAP),
        next: runs(&lucene::TRANS),
        flags: runs(&lucene::ATTRIBUTE),
    })
}

fn at(table: &[i32], index: usize) -> Option<usize> {
    table.get(index).and_then(|&v| usize::try_from(v).ok())
}

impl Automaton {
    /// The state after `state` reads `code_point`, if the automaton goes on.
    fn step(&self, state: usize, code_point: u32) -> Option<usize> {
        let low = (code_point & 0xFF) as usize;
        let class_index =
            if code_point < 0x100 { low } else { at(&self.top, (code_point >> 8) as usize)? + low };
        let class = at(&self.blocks, class_index)?;
        at(&self.next, at(&self.rows, state)? + class)
    }

    fn accepting(&self, state: usize) -> bool {
        self.flags.get(state).is_some_and(|f| f & 1 == 1)
    }

    fn final_only(&self, state: usize) -> bool {
        self.flags.get(state).is_some_and(|f| f & 8 == 8)
    }

    /// Whether the rule that accepted in `state` makes a token (2 to 9: number, word, emoji, Southeast Asian,
    /// hangul, ideograph, katakana, hiragana) rather than passing over what it matched (1).
    fn emits(&self, state: usize) -> bool {
        self.actions.get(state).is_some_and(|a| (2..=9).contains(a))
    }
}

/// Code points of `units` with where each starts, pairs joined only when whole inside `units`.
fn decode(units: &[u16]) -> Vec<(usize, u32, usize)> {
    let mut out = Vec::with_capacity(units.len());
    let mut i = 0;
    while i < units.len() {
        let high = units[i];
        let pair = units
            .get(i + 1)
            .copied()
            .filter(|low| (0xD800..0xDC00).contains(&high) && (0xDC00..0xE000).contains(low));
        match pair {
            Some(low) => {
                out.push((i, 0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(low) - 0xDC00), 2));
                i += 2;
            }
            None => {
                out.push((i, u32::from(high), 1));
                i += 1;
            }
        }
    }
    out
}

/// Lucene's tokens of `units`, as unit ranges.
fn tokens(units: &[u16]) -> Vec<(usize, usize)> {
    let machine = automaton();
    let points = decode(units);
    let mut out = Vec::new();
    let mut p = 0;
    while p < points.len() {
        let start = points[p].0;
        let mut state = 0;
        let mut accepted: Option<(usize, usize)> = None; // (state, index of the next code point)
        let mut q = p;
        while q < points.len() {
            let (offset, code_point, width) = points[q];
            // A code point that does not fit whole in the buffer is beyond its end.
            if offset + width > start + BUFFER_UNITS {
                break;
            }
            let Some(next) = machine.step(state, code_point) else { break };
            state = next;
            q += 1;
            if machine.accepting(state) {
                accepted = Some((state, q));
                if machine.final_only(state) {
                    break;
                }
            }
        }
        match accepted {
            Some((state, end)) if end > p => {
                if machine.emits(state) {
                    let stop = points.get(end).map_or(units.len(), |&(offset, _, _)| offset);
                    out.push((start, stop));
                }
                p = end;
            }
            _ => p += 1,
        }
    }
    out
}

/// Java 21's `Character.toLowerCase(int)`.
fn java_lowercase(code_point: u32) -> u32 {
    let table = &lucene::LOWERCASE;
    let (mut lo, mut hi) = (0, table.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        match table[mid].0.cmp(&code_point) {
            std::cmp::Ordering::Equal => return table[mid].1,
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
        }
    }
    code_point
}

/// One token through the possessive filter and the lowercase filter.
fn normalize(token: &[u16]) -> Vec<u16> {
    let mut token = token;
    if let [head @ .., apostrophe, s] = token
        && [0x0027, 0x2019, 0xFF07].contains(apostrophe)
        && (*s == u16::from(b's') || *s == u16::from(b'S'))
    {
        token = head;
    }
    let mut lowered = Vec::with_capacity(token.len());
    for (_, code_point, _) in decode(token) {
        let lower = java_lowercase(code_point);
        match char::from_u32(lower) {
            Some(c) => lowered.extend_from_slice(c.encode_utf16(&mut [0; 2])),
            None => lowered.push(lower as u16),
        }
    }
    lowered
}

/// The terms of `text`: Lucene's tokens, normalized, stop words dropped, stemmed.
pub(crate) fn terms(text: &str) -> Vec<String> {
    let units: Vec<u16> = text.encode_utf16().collect();
    let mut out = Vec::new();
    for (start, stop) in tokens(&units) {
        let word = normalize(&units[start..stop]);
        let plain = String::from_utf16_lossy(&word);
        if lucene::STOP_WORDS.contains(&plain.as_str()) {
            continue;
        }
        out.push(String::from_utf16_lossy(&super::porter::stem(&word)));
    }
    out
}
