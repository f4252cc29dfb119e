//! The role prefixes of the evaluation contract, added to semantic text before it is embedded.

use serde::{Deserialize, Serialize};

/// Whether a text is a document or a query; each gets its own prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A corpus document: `search_document: `.
    Document,
    /// A query: `search_query: `.
    Query,
}

impl Role {
    /// The prefix, with its trailing space.
    pub fn prefix(self) -> &'static str {
        match self {
            Role::Document => "search_document: ",
            Role::Query => "search_query: ",
        }
    }

    /// `document` or `query`: the name identities and prompts use.
    pub fn name(self) -> &'static str {
        match self {
            Role::Document => "document",
            Role::Query => "query",
        }
    }

    /// `text` with this role's prefix.
    pub fn prompt(self, text: &str) -> String {
        format!("{}{text}", self.prefix())
    }
}
