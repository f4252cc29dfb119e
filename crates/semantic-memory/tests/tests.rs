//! Integration tests of `semantic-memory`'s public API, one module per concern.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;

mod bm25;
mod excluded;
mod fts;
mod hybrid;
mod late;
mod lucene;
mod matryoshka;
mod receipts;
mod sparse;
mod store;
mod vector;
