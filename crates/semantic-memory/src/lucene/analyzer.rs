//! Anserini's `DefaultEnglishAnalyzer`: `StandardTokenizer`, `EnglishPossessiveFilter`, `LowerCaseFilter`,
//! `StopFilter` (Lucene's 33 English stop words) and `PorterStemFilter`, in that order.

use std::sync::OnceLock;

use super::{porter, standard_tokenizer, tables};

/// `Character.toLowerCase(int)` as Java 21 has it: simple, context-free mappings (`İ` becomes `i`, `Σ` always
/// `σ`), which is not what Rust's `to_lowercase` does.
fn to_lower(code_point: u32) -> u32 {
    match tables::LOWERCASE.binary_search_by_key(&code_point, |&(from, _)| from) {
        Ok(i) => tables::LOWERCASE[i].1,
        Err(_) => code_point,
    }
}

/// `CharacterUtils.toLowerCase`: each code point lowered in place (Java's mappings keep UTF-16 lengths).
fn lowercase(units: &mut Vec<u16>) {
    let lowered: Vec<u32> = char::decode_utf16(units.iter().copied())
        .map(|c| c.map_or_else(|unpaired| u32::from(unpaired.unpaired_surrogate()), |c| to_lower(c as u32)))
        .collect();
    units.clear();
    for code_point in lowered {
        match char::from_u32(code_point) {
            Some(c) => units.extend_from_slice(c.encode_utf16(&mut [0; 2])),
            None => units.push(code_point as u16),
        }
    }
}

fn is_stop_word(units: &[u16]) -> bool {
    static STOP: OnceLock<Vec<Vec<u16>>> = OnceLock::new();
    let stop = STOP.get_or_init(|| tables::STOP_WORDS.iter().map(|w| w.encode_utf16().collect()).collect());
    stop.iter().any(|word| word.as_slice() == units)
}

/// `EnglishPossessiveFilter`: a trailing `'s`, `’s` or `＇s` (either case of s) removed.
fn strip_possessive(units: &mut Vec<u16>) {
    let n = units.len();
    if n >= 2 && matches!(units[n - 2], 0x27 | 0x2019 | 0xFF07) && matches!(units[n - 1], 0x73 | 0x53) {
        units.truncate(n - 2);
    }
}

/// The terms Anserini's default English analyzer makes of `text`, in order (stop words removed).
pub fn analyze(text: &str) -> Vec<String> {
    let units: Vec<u16> = text.encode_utf16().collect();
    let mut terms = Vec::new();
    for range in standard_tokenizer::tokenize(&units) {
        let mut term = units[range].to_vec();
        strip_possessive(&mut term);
        lowercase(&mut term);
        if is_stop_word(&term) {
            continue;
        }
        terms.push(String::from_utf16_lossy(&porter::stem(&term)));
    }
    terms
}

#[cfg(test)]
mod tests {
    use super::analyze;

    #[test]
    fn possessives_stop_words_case_and_stems() {
        assert_eq!(
            analyze("The Cat’s hats AND dogs' İstanbul ΣΑΣ"),
            ["cat", "hat", "dog", "istanbul", "σασ"]
        );
    }

    #[test]
    fn a_text_of_stop_words_has_no_terms() {
        assert!(analyze("the and of it").is_empty());
        assert!(analyze("").is_empty());
    }
}
