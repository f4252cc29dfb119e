//! Porter's stemmer, written here from the published algorithm's steps (1a, 1b, 1c, 2, 3, 4, 5a, 5b) with the
//! changes of Porter's own reference implementation that Lucene's `PorterStemmer` carries: `bli -> ble` in step 2
//! where the paper has `abli -> able`, `logi -> log` added there, and `(s|t)ion` in step 4. A word is UTF-16 code
//! units; a unit that is not a, e, i, o, u, or a y after a consonant, is a consonant (so every non-ASCII letter
//! is). Words of one or two units are not stemmed.

/// A word being stemmed: its units, of which the first `end` are the word so far.
struct Word {
    units: Vec<u16>,
    end: usize,
}

const fn unit(c: u8) -> u16 {
    c as u16
}

impl Word {
    fn consonant(&self, i: usize) -> bool {
        match self.units[i] {
            u if [b'a', b'e', b'i', b'o', b'u'].iter().any(|&v| u == unit(v)) => false,
            u if u == unit(b'y') => i == 0 || !self.consonant(i - 1),
            _ => true,
        }
    }

    /// Porter's m: the number of vowel-consonant sequences in the first `len` units.
    fn measure(&self, len: usize) -> usize {
        let mut m = 0;
        let mut previous_vowel = false;
        for i in 0..len {
            let vowel = !self.consonant(i);
            if previous_vowel && !vowel {
                m += 1;
            }
            previous_vowel = vowel;
        }
        m
    }

    fn has_vowel(&self, len: usize) -> bool {
        (0..len).any(|i| !self.consonant(i))
    }

    /// Whether the word so far ends in a double consonant.
    fn double_consonant(&self, len: usize) -> bool {
        len >= 2 && self.units[len - 1] == self.units[len - 2] && self.consonant(len - 1)
    }

    /// Porter's *o: the first `len` units end consonant-vowel-consonant, the last not w, x or y.
    fn cvc(&self, len: usize) -> bool {
        len >= 3
            && self.consonant(len - 1)
            && !self.consonant(len - 2)
            && self.consonant(len - 3)
            && ![b'w', b'x', b'y'].iter().any(|&c| self.units[len - 1] == unit(c))
    }

    /// The length of the stem before `suffix`, if the word so far ends with it.
    fn stem_before(&self, suffix: &str) -> Option<usize> {
        let n = suffix.len();
        (self.end >= n
            && self.units[self.end - n..self.end].iter().zip(suffix.bytes()).all(|(&u, c)| u == unit(c)))
        .then(|| self.end - n)
    }

    fn replace(&mut self, stem: usize, with: &str) {
        self.units.truncate(stem);
        self.units.extend(with.bytes().map(unit));
        self.end = self.units.len();
    }

    /// The first rule whose suffix ends the word decides; it applies when the stem's measure is above `min`.
    fn first_rule(&mut self, rules: &[(&str, &str)], min: usize) {
        if let Some((stem, with)) =
            rules.iter().find_map(|(suffix, with)| self.stem_before(suffix).map(|s| (s, with)))
            && self.measure(stem) > min
        {
            self.replace(stem, with);
        }
    }

    fn step_1a(&mut self) {
        if self.stem_before("sses").is_some() {
            self.end -= 2;
        } else if let Some(stem) = self.stem_before("ies") {
            self.replace(stem, "i");
        } else if self.stem_before("s").is_some() && self.stem_before("ss").is_none() {
            self.end -= 1;
        }
        self.units.truncate(self.end);
    }

    fn step_1b(&mut self) {
        if let Some(stem) = self.stem_before("eed") {
            if self.measure(stem) > 0 {
                self.end -= 1;
                self.units.truncate(self.end);
            }
            return;
        }
        let Some(stem) = self.stem_before("ed").or_else(|| self.stem_before("ing")) else { return };
        if !self.has_vowel(stem) {
            return;
        }
        self.replace(stem, "");
        if let Some(s) = self.stem_before("at") {
            self.replace(s, "ate");
        } else if let Some(s) = self.stem_before("bl") {
            self.replace(s, "ble");
        } else if let Some(s) = self.stem_before("iz") {
            self.replace(s, "ize");
        } else if self.double_consonant(self.end) {
            let last = self.units[self.end - 1];
            if ![b'l', b's', b'z'].iter().any(|&c| last == unit(c)) {
                self.replace(self.end - 1, "");
            }
        } else if self.measure(self.end) == 1 && self.cvc(self.end) {
            self.replace(self.end, "e");
        }
    }

    fn step_1c(&mut self) {
        if let Some(stem) = self.stem_before("y")
            && self.has_vowel(stem)
        {
            self.units[stem] = unit(b'i');
        }
    }

    fn step_2(&mut self) {
        self.first_rule(
            &[
                ("ational", "ate"),
                ("tional", "tion"),
                ("enci", "ence"),
                ("anci", "ance"),
                ("izer", "ize"),
                ("bli", "ble"),
                ("alli", "al"),
                ("entli", "ent"),
                ("eli", "e"),
                ("ousli", "ous"),
                ("ization", "ize"),
                ("ation", "ate"),
                ("ator", "ate"),
                ("alism", "al"),
                ("iveness", "ive"),
                ("fulness", "ful"),
                ("ousness", "ous"),
                ("aliti", "al"),
                ("iviti", "ive"),
                ("biliti", "ble"),
                ("logi", "log"),
            ],
            0,
        );
    }

    fn step_3(&mut self) {
        self.first_rule(
            &[
                ("icate", "ic"),
                ("ative", ""),
                ("alize", "al"),
                ("iciti", "ic"),
                ("ical", "ic"),
                ("ful", ""),
                ("ness", ""),
            ],
            0,
        );
    }

    fn step_4(&mut self) {
        const SUFFIXES: [&str; 19] = [
            "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou",
            "ism", "ate", "iti", "ous", "ive", "ize",
        ];
        // The longest suffix that ends the word; `ion` counts only after s or t.
        let found = SUFFIXES
            .iter()
            .filter_map(|suffix| self.stem_before(suffix).map(|stem| (stem, *suffix)))
            .filter(|&(stem, suffix)| {
                suffix != "ion" || (stem > 0 && [b's', b't'].iter().any(|&c| self.units[stem - 1] == unit(c)))
            })
            .min_by_key(|&(stem, _)| stem);
        if let Some((stem, _)) = found
            && self.measure(stem) > 1
        {
            self.replace(stem, "");
        }
    }

    fn step_5(&mut self) {
        if let Some(stem) = self.stem_before("e") {
            let m = self.measure(stem);
            if m > 1 || (m == 1 && !self.cvc(stem)) {
                self.replace(stem, "");
            }
        }
        if self.stem_before("l").is_some() && self.double_consonant(self.end) && self.measure(self.end) > 1 {
            self.replace(self.end - 1, "");
        }
    }
}

/// The stem of `word`, UTF-16 units.
pub(crate) fn stem(word: &[u16]) -> Vec<u16> {
    if word.len() <= 2 {
        return word.to_vec();
    }
    let mut w = Word { units: word.to_vec(), end: word.len() };
    w.step_1a();
    w.step_1b();
    w.step_1c();
    w.step_2();
    w.step_3();
    w.step_4();
    w.step_5();
    w.units.truncate(w.end);
    w.units
}
