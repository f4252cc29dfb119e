//! Semantic text: what is embedded for a document or query, before its prompt, under a declared text policy.
//! The contract's (the default): title and text joined by `. `, cut to 700 characters, behind the contract's own
//! role prefixes. The model's: the text as sentence-transformers' and MTEB's retrieval evaluation build it
//! (title and text joined by a space, stripped; never cut, the model truncates), behind the prompts the
//! checkpoint declares.

use serde::{Deserialize, Serialize};

/// Which text policy built the semantic texts and prompts: part of a fixture's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextPolicyKind {
    /// The evaluation contract's: `title. text` cut to 700 characters, `search_document: ` / `search_query: `.
    #[default]
    Contract,
    /// The checkpoint's: `title text` stripped, uncut, behind the prompts the checkpoint declares per role.
    Model,
}

impl TextPolicyKind {
    /// `contract` or `model`.
    pub fn name(self) -> &'static str {
        match self {
            TextPolicyKind::Contract => "contract",
            TextPolicyKind::Model => "model",
        }
    }

    /// How a title and its text are joined, as the fixture records it.
    pub fn joiner(self) -> &'static str {
        match self {
            TextPolicyKind::Contract => ". ",
            TextPolicyKind::Model => " ",
        }
    }

    /// Unicode scalar values a semantic text is cut to, as the fixture records it (0: never cut).
    pub fn max_semantic_chars(self) -> usize {
        match self {
            TextPolicyKind::Contract => MAX_SEMANTIC_CHARS,
            TextPolicyKind::Model => 0,
        }
    }

    /// A document's semantic text under this policy, and whether it was cut.
    pub fn document(self, title: &str, text: &str) -> (String, bool) {
        match self {
            TextPolicyKind::Contract => document_semantic_text(title, text),
            // BEIR's and MTEB's `(doc["title"] + " " + doc["text"]).strip()`: Python's whitespace, which adds
            // the information separators U+001C to U+001F to Unicode's.
            TextPolicyKind::Model => (
                format!("{title} {text}")
                    .trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
                    .to_owned(),
                false,
            ),
        }
    }

    /// A query's semantic text under this policy, and whether it was cut.
    pub fn query(self, text: &str) -> (String, bool) {
        match self {
            TextPolicyKind::Contract => query_semantic_text(text),
            TextPolicyKind::Model => (text.to_owned(), false),
        }
    }
}

/// Semantic text is cut to this many Unicode scalar values before the role prefix is added.
pub const MAX_SEMANTIC_CHARS: usize = 700;

/// `title + ". " + text`, or whichever of them is non-empty, cut to [`MAX_SEMANTIC_CHARS`] chars. Returns the
/// text and whether it was cut.
pub fn document_semantic_text(title: &str, text: &str) -> (String, bool) {
    let joined = match (title.is_empty(), text.is_empty()) {
        (false, false) => format!("{title}. {text}"),
        (false, true) => title.to_owned(),
        (true, _) => text.to_owned(),
    };
    cut(joined)
}

/// A query's text cut to [`MAX_SEMANTIC_CHARS`] chars, and whether it was cut.
pub fn query_semantic_text(text: &str) -> (String, bool) {
    cut(text.to_owned())
}

fn cut(text: String) -> (String, bool) {
    match text.char_indices().nth(MAX_SEMANTIC_CHARS) {
        Some((boundary, _)) => (text[..boundary].to_owned(), true),
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_policy_joins_as_beir_and_mteb_do_and_never_cuts() {
        let model = TextPolicyKind::Model;
        assert_eq!(model.document("T", "body"), ("T body".into(), false));
        assert_eq!(model.document("", "body"), ("body".into(), false), "an empty title leaves no space");
        assert_eq!(model.document(" T ", "body \n"), ("T  body".into(), false), "stripped at the ends only");
        let long = "é".repeat(800);
        assert_eq!(model.document("", &long).0.chars().count(), 800);
        assert_eq!(model.query(" q "), (" q ".into(), false), "queries are encoded as given");
        assert_eq!(TextPolicyKind::Contract.document("T", "body"), document_semantic_text("T", "body"));
    }

    #[test]
    fn joins_title_and_text() {
        assert_eq!(document_semantic_text("T", "body"), ("T. body".into(), false));
        assert_eq!(document_semantic_text("T", ""), ("T".into(), false));
        assert_eq!(document_semantic_text("", "body"), ("body".into(), false));
    }

    #[test]
    fn cuts_at_700_scalar_values_on_a_char_boundary() {
        let long = "é".repeat(800);
        let (text, cut) = document_semantic_text("", &long);
        assert!(cut);
        assert_eq!(text.chars().count(), 700);
        let exact = "a".repeat(700);
        assert_eq!(query_semantic_text(&exact), (exact.clone(), false));
    }
}
