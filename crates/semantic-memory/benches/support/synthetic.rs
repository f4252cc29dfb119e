//! Synthetic SciFact-shaped text for the benchmarks: never copied from a corpus.

use crate::util::Rng;

/// Zipf-like words over a 20,000-word synthetic vocabulary.
pub(crate) fn text(rng: &mut Rng, words: usize) -> String {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ren", "tos", "vi", "zu", "pha", "gen", "tri", "ol", "ux", "ber", "sta", "ni",
        "qua",
    ];
    let mut text = String::new();
    for index in 0..words {
        if index > 0 {
            text.push(' ');
        }
        let word = (rng.next_f64().powi(4) * 20_000.0) as usize;
        for digit in [word % 16, (word / 16) % 16, (word / 256) % 16, word / 4096] {
            text.push_str(SYLLABLES[digit % 16]);
        }
    }
    text
}
