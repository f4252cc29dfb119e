//! Integration tests of `embedding`, one module per concern.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod http;

mod checkpoints;
mod colbert;
mod download;
mod modern;
mod ollama;
mod parity;
mod sparse;
mod tiny;
