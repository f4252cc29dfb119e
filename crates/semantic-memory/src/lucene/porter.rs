//! Lucene's `PorterStemmer`: Martin Porter's reference algorithm (release 3, with `bli -> ble` and
//! `logi -> log`), on UTF-16 code units, where every unit that is not `a e i o u` (or a `y` after a consonant)
//! counts as a consonant, so non-ASCII letters are consonants. Words of two units or fewer are left alone.

struct Stemmer {
    b: Vec<u16>,
    j: isize,
    k: isize,
    k0: isize,
}

fn unit(c: char) -> u16 {
    c as u16
}

impl Stemmer {
    fn at(&self, i: isize) -> u16 {
        usize::try_from(i).ok().and_then(|i| self.b.get(i).copied()).unwrap_or(0)
    }

    fn cons(&self, i: isize) -> bool {
        match self.at(i) {
            c if c == unit('a') || c == unit('e') || c == unit('i') || c == unit('o') || c == unit('u') => {
                false
            }
            c if c == unit('y') => i == self.k0 || !self.cons(i - 1),
            _ => true,
        }
    }

    fn m(&self) -> usize {
        let mut n = 0;
        let mut i = self.k0;
        loop {
            if i > self.j {
                return n;
            }
            if !self.cons(i) {
                break;
            }
            i += 1;
        }
        i += 1;
        loop {
            loop {
                if i > self.j {
                    return n;
                }
                if self.cons(i) {
                    break;
                }
                i += 1;
            }
            i += 1;
            n += 1;
            loop {
                if i > self.j {
                    return n;
                }
                if !self.cons(i) {
                    break;
                }
                i += 1;
            }
            i += 1;
        }
    }

    fn vowel_in_stem(&self) -> bool {
        (self.k0..=self.j).any(|i| !self.cons(i))
    }

    fn double_c(&self, j: isize) -> bool {
        j > self.k0 && self.at(j) == self.at(j - 1) && self.cons(j)
    }

    fn cvc(&self, i: isize) -> bool {
        if i < self.k0 + 2 || !self.cons(i) || self.cons(i - 1) || !self.cons(i - 2) {
            return false;
        }
        let c = self.at(i);
        !(c == unit('w') || c == unit('x') || c == unit('y'))
    }

    fn ends(&mut self, s: &str) -> bool {
        let l = s.len() as isize;
        let o = self.k - l + 1;
        if o < self.k0 {
            return false;
        }
        if s.bytes().enumerate().any(|(i, c)| self.at(o + i as isize) != u16::from(c)) {
            return false;
        }
        self.j = self.k - l;
        true
    }

    fn set_to(&mut self, s: &str) {
        let o = self.j + 1;
        for (i, c) in s.bytes().enumerate() {
            let at = (o + i as isize) as usize;
            if at >= self.b.len() {
                self.b.resize(at + 1, 0);
            }
            self.b[at] = u16::from(c);
        }
        self.k = self.j + s.len() as isize;
    }

    fn r(&mut self, s: &str) {
        if self.m() > 0 {
            self.set_to(s);
        }
    }

    fn step1(&mut self) {
        if self.at(self.k) == unit('s') {
            if self.ends("sses") {
                self.k -= 2;
            } else if self.ends("ies") {
                self.set_to("i");
            } else if self.at(self.k - 1) != unit('s') {
                self.k -= 1;
            }
        }
        if self.ends("eed") {
            if self.m() > 0 {
                self.k -= 1;
            }
        } else if (self.ends("ed") || self.ends("ing")) && self.vowel_in_stem() {
            self.k = self.j;
            if self.ends("at") {
                self.set_to("ate");
            } else if self.ends("bl") {
                self.set_to("ble");
            } else if self.ends("iz") {
                self.set_to("ize");
            } else if self.double_c(self.k) {
                let c = self.at(self.k);
                self.k -= 1;
                if c == unit('l') || c == unit('s') || c == unit('z') {
                    self.k += 1;
                }
            } else if self.m() == 1 && self.cvc(self.k) {
                self.set_to("e");
            }
        }
    }

    fn step2(&mut self) {
        if self.ends("y")
            && self.vowel_in_stem()
            && let Ok(k) = usize::try_from(self.k)
        {
            self.b[k] = unit('i');
        }
    }

    /// Tries `(suffix, replacement)` pairs in order; the first suffix that ends the word decides, whether or not
    /// the measure lets it be replaced.
    fn replace_first(&mut self, rules: &[(&str, &str)]) {
        for (suffix, replacement) in rules {
            if self.ends(suffix) {
                self.r(replacement);
                return;
            }
        }
    }

    fn step3(&mut self) {
        if self.k == self.k0 {
            return;
        }
        let rules: &[(&str, &str)] = match char::from_u32(u32::from(self.at(self.k - 1))).unwrap_or('\0') {
            'a' => &[("ational", "ate"), ("tional", "tion")],
            'c' => &[("enci", "ence"), ("anci", "ance")],
            'e' => &[("izer", "ize")],
            'l' => &[("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")],
            'o' => &[("ization", "ize"), ("ation", "ate"), ("ator", "ate")],
            's' => &[("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")],
            't' => &[("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")],
            'g' => &[("logi", "log")],
            _ => &[],
        };
        self.replace_first(rules);
    }

    fn step4(&mut self) {
        let rules: &[(&str, &str)] = match char::from_u32(u32::from(self.at(self.k))).unwrap_or('\0') {
            'e' => &[("icate", "ic"), ("ative", ""), ("alize", "al")],
            'i' => &[("iciti", "ic")],
            'l' => &[("ical", "ic"), ("ful", "")],
            's' => &[("ness", "")],
            _ => &[],
        };
        self.replace_first(rules);
    }

    fn step5(&mut self) {
        if self.k == self.k0 {
            return;
        }
        let found = match char::from_u32(u32::from(self.at(self.k - 1))).unwrap_or('\0') {
            'a' => self.ends("al"),
            'c' => self.ends("ance") || self.ends("ence"),
            'e' => self.ends("er"),
            'i' => self.ends("ic"),
            'l' => self.ends("able") || self.ends("ible"),
            'n' => self.ends("ant") || self.ends("ement") || self.ends("ment") || self.ends("ent"),
            'o' => {
                (self.ends("ion")
                    && self.j >= 0
                    && (self.at(self.j) == unit('s') || self.at(self.j) == unit('t')))
                    || self.ends("ou")
            }
            's' => self.ends("ism"),
            't' => self.ends("ate") || self.ends("iti"),
            'u' => self.ends("ous"),
            'v' => self.ends("ive"),
            'z' => self.ends("ize"),
            _ => false,
        };
        if found && self.m() > 1 {
            self.k = self.j;
        }
    }

    fn step6(&mut self) {
        self.j = self.k;
        if self.at(self.k) == unit('e') {
            let a = self.m();
            if a > 1 || (a == 1 && !self.cvc(self.k - 1)) {
                self.k -= 1;
            }
        }
        if self.at(self.k) == unit('l') && self.double_c(self.k) && self.m() > 1 {
            self.k -= 1;
        }
    }
}

/// The stem of `word` (UTF-16 code units), as `PorterStemFilter` leaves it.
pub(super) fn stem(word: &[u16]) -> Vec<u16> {
    let k = word.len() as isize - 1;
    if k <= 1 {
        return word.to_vec();
    }
    let mut s = Stemmer { b: word.to_vec(), j: 0, k, k0: 0 };
    s.step1();
    s.step2();
    s.step3();
    s.step4();
    s.step5();
    s.step6();
    let end = usize::try_from(s.k + 1).unwrap_or(0);
    s.b.truncate(end);
    s.b
}

#[cfg(test)]
mod tests {
    use super::stem;

    fn porter(word: &str) -> String {
        String::from_utf16_lossy(&stem(&word.encode_utf16().collect::<Vec<_>>()))
    }

    #[test]
    fn porters_own_examples() {
        for (word, expected) in [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("ties", "ti"),
            ("cats", "cat"),
            ("feed", "feed"),
            ("agreed", "agre"),
            ("disabled", "disabl"),
            ("matting", "mat"),
            ("mating", "mate"),
            ("meeting", "meet"),
            ("milling", "mill"),
            ("meetings", "meet"),
            ("relational", "relat"),
            ("conditional", "condit"),
            ("generalization", "gener"),
            ("hopefulness", "hope"),
            ("microstructural", "microstructur"),
            ("archaeology", "archaeolog"),
            ("is", "is"),
            ("aed", "a"),
            ("ion", "ion"),
        ] {
            assert_eq!(porter(word), expected, "{word}");
        }
    }

    #[test]
    fn non_ascii_letters_are_consonants() {
        assert_eq!(porter("naïvely"), "naïv");
        assert_eq!(porter("αβγs"), "αβγ");
    }
}
