//! Integration tests of the builder, on archives and corpora the tests write themselves.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod util;

mod acquire;
mod archive;
mod beir;
mod build;
mod cache;
mod real;
