//! Integration tests of the builder and runner, on archives, corpora and fixtures the tests write themselves.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod fixture_gen;
mod util;

mod acquire;
mod anserini;
mod archive;
mod beir;
mod build;
mod cache;
mod exports;
mod git;
mod journal;
mod pytrec;
mod real;
mod reproduction;
mod run;
mod scipy;
mod sparse;
mod tiny;
