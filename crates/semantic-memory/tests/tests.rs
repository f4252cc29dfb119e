//! Integration tests of `semantic-memory`'s public API, one module per concern.

mod util;

mod fts;
mod hybrid;
mod receipts;
mod store;
mod vector;
