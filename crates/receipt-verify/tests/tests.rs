//! Integration tests of receipt-verify's own pieces; the end-to-end and tamper tests run the binary
//! (crates/scifact-audit/tests/audit.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pytrec;
mod sign;
