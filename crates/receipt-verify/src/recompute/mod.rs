//! One home per thing this verifier recomputes, each from its definition and apart from the runner's code:
//! the metrics, the held-out statistics, the dense and lexical candidate lists, fusion, and embeddings.

pub(crate) mod bm25_flat;
pub(crate) mod dense;
pub(crate) mod embedding;
pub(crate) mod fusion;
pub(crate) mod lexical;
pub(crate) mod memo;
pub mod metrics;
pub(crate) mod sparse;
pub(crate) mod statistics;
