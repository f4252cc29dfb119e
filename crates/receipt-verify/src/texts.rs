//! The corpus and query texts a recomputation needs, and the contract's two derived texts, stated here from
//! the contract rather than taken from the builder: the *semantic* text (what is embedded) and the
//! *searchable* text (what the lexical index holds).
//!
//! Texts come from the public archive (`--archive`, for a bundle, which never holds text) or from the full
//! fixture (for an output directory).

use crate::canonical::sha256_hex;

/// Semantic text is cut to this many Unicode scalar values before the role prefix is added.
pub const MAX_SEMANTIC_CHARS: usize = 700;

/// How a fixture's semantic texts were built (its `text_policy`), stated here as the builder states it: the
/// contract's (the default) or the model's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `title. text` cut to [`MAX_SEMANTIC_CHARS`], behind the contract's `search_document: ` / `search_query: `.
    Contract,
    /// `title text` stripped as Python strips, uncut, behind the prompts the checkpoint declares: the texts
    /// sentence-transformers' and MTEB's retrieval evaluation embed.
    Model,
}

impl Policy {
    /// The policy a fixture's metadata declares (`text_policy.policy`; absent is the contract's).
    ///
    /// # Errors
    /// A policy this verifier does not know.
    pub fn of(metadata: &serde_json::Value) -> Result<Policy, String> {
        match &metadata["text_policy"]["policy"] {
            serde_json::Value::Null => Ok(Policy::Contract),
            serde_json::Value::String(name) if name == "model" => Ok(Policy::Model),
            other => Err(format!(
                "the fixture declares the text policy {other}, which this verifier does not know"
            )),
        }
    }

    /// The policy's name, as a fixture declares it (`contract` for the default).
    pub fn name(self) -> &'static str {
        match self {
            Policy::Contract => "contract",
            Policy::Model => "model",
        }
    }

    /// A document's semantic text.
    pub fn document(self, title: &str, text: &str) -> String {
        match self {
            Policy::Contract => semantic_document(title, text),
            Policy::Model => format!("{title} {text}")
                .trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
                .to_owned(),
        }
    }

    /// A query's semantic text.
    pub fn query(self, text: &str) -> String {
        match self {
            Policy::Contract => semantic_query(text),
            Policy::Model => text.to_owned(),
        }
    }
}

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
    /// Hex sha256 of every document's semantic text under `policy`, in order.
    pub fn document_semantic_digests(&self, policy: Policy) -> Vec<String> {
        self.documents
            .iter()
            .map(|(_, title, text)| sha256_hex(policy.document(title, text).as_bytes()))
            .collect()
    }

    /// Hex sha256 of every query's semantic text under `policy`, in order.
    pub fn query_semantic_digests(&self, policy: Policy) -> Vec<String> {
        self.queries.iter().map(|(_, text)| sha256_hex(policy.query(text).as_bytes())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_policy_texts_are_beir_s_and_mteb_s() {
        assert_eq!(Policy::Model.document("T", "body"), "T body");
        assert_eq!(Policy::Model.document("", "body"), "body");
        assert_eq!(
            Policy::Model.document("T\u{1f}", " body\t"),
            "T\u{1f}  body",
            "Python's strip: the ends only"
        );
        assert_eq!(Policy::Model.document("", "\u{1c}body\u{85}"), "body");
        let long = "é".repeat(800);
        assert_eq!(Policy::Model.document("", &long).chars().count(), 800, "never cut");
        assert_eq!(Policy::Model.query(" q "), " q ");
        let model = serde_json::json!({"text_policy": {"policy": "model"}});
        assert_eq!(Policy::of(&model), Ok(Policy::Model));
        assert_eq!(Policy::of(&serde_json::json!({"text_policy": {}})), Ok(Policy::Contract));
        assert!(Policy::of(&serde_json::json!({"text_policy": {"policy": "other"}})).is_err());
    }

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
