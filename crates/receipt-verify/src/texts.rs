//! The corpus and query texts a recomputation needs, and the contract's two derived texts, stated here from
//! the contract rather than taken from the builder: the *semantic* text (what is embedded) and the
//! *searchable* text (what the lexical index holds).
//!
//! Texts come from the public archive (`--archive`, for a bundle, which never holds text) or from the full
//! fixture (for an output directory).

use crate::canonical::sha256_hex;

/// Semantic text is cut to this many Unicode scalar values before the role prefix is added.
pub const MAX_SEMANTIC_CHARS: usize = 700;

/// Documents and queries, in fixture order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Texts {
    /// `(id, title, text)` of every document.
    pub documents: Vec<(String, String, String)>,
    /// `(id, text)` of every query.
    pub queries: Vec<(String, String)>,
}

/// A document's semantic text: `title + ". " + text`, or whichever is non-empty, cut to
/// [`MAX_SEMANTIC_CHARS`] scalar values.
pub fn semantic_document(title: &str, text: &str) -> String {
    let joined = match (title.is_empty(), text.is_empty()) {
        (false, false) => format!("{title}. {text}"),
        (false, true) => title.to_owned(),
        (true, _) => text.to_owned(),
    };
    cut(&joined)
}

/// A query's semantic text: its text cut to [`MAX_SEMANTIC_CHARS`] scalar values.
pub fn semantic_query(text: &str) -> String {
    cut(text)
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_SEMANTIC_CHARS) {
        Some((boundary, _)) => text[..boundary].to_owned(),
        None => text.to_owned(),
    }
}

/// A document's searchable text, the lexical index's row: `title + "\n" + text`, or whichever is non-empty.
pub fn searchable(title: &str, text: &str) -> String {
    match (title.is_empty(), text.is_empty()) {
        (false, false) => format!("{title}\n{text}"),
        (false, true) => title.to_owned(),
        (true, _) => text.to_owned(),
    }
}

impl Texts {
    /// Hex sha256 of every document's semantic text, in order.
    pub fn document_semantic_digests(&self) -> Vec<String> {
        self.documents
            .iter()
            .map(|(_, title, text)| sha256_hex(semantic_document(title, text).as_bytes()))
            .collect()
    }

    /// Hex sha256 of every query's semantic text, in order.
    pub fn query_semantic_digests(&self) -> Vec<String> {
        self.queries.iter().map(|(_, text)| sha256_hex(semantic_query(text).as_bytes())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_texts() {
        assert_eq!(semantic_document("T", "body"), "T. body");
        assert_eq!(semantic_document("T", ""), "T");
        assert_eq!(semantic_document("", "body"), "body");
        assert_eq!(searchable("T", "body"), "T\nbody");
        assert_eq!(searchable("", "body"), "body");
        let long = "é".repeat(800);
        assert_eq!(semantic_query(&long).chars().count(), 700);
        assert_eq!(semantic_document("", &long).chars().count(), 700);
        let exact = "a".repeat(700);
        assert_eq!(semantic_query(&exact), exact);
    }
}
