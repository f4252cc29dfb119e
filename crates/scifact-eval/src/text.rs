//! The contract's semantic text: what is embedded for a document or query, before the role prefix.

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
