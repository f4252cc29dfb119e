//! `receipt-verify`: checks SciFact evaluation artifacts without trusting the code that made them, nor the
//! person who signed them.
//!
//! # Overview
//! A bundle is signed by the person whose numbers it holds; a signature proves authorship, not truth. This
//! crate therefore recomputes every number a reader sees from the bundle's bytes and public inputs (the
//! SciFact archive, the model), with its own code, and labels everything else as the signer's word. It never
//! depends on `scifact-eval` or `semantic-memory`: two implementations agreeing is the evidence.
//!
//! Layers, each using only those above it:
//! - below everything: [`names`] (file names and schema ids), [`baseline`], [`canonical`] (RFC 8785), [`json`]
//!   (strict I-JSON), [`report`] (checks, their basis, the verdict), `time`;
//! - inputs: [`artifacts`] (rows and aggregates), [`fixture`] (the fixture's view), [`vectors`] (the bundle's
//!   vectors), [`texts`] and [`archive`] (the public texts), [`sign`] (minisign);
//! - `recompute`: one home per thing recomputed: metrics, statistics, dense and lexical candidate lists,
//!   fusion, embeddings; and `render`, the report page drawn from what was recomputed;
//! - `checks`: every check, over [`Inputs`](checks) the readers assemble;
//! - the two readers: [`verify`] (an output directory) and [`verify_bundle`] (a bundle), with [`make_bundle`],
//!   and [`verify_reproduction`].
//!
//! Disagreements are failed [`Check`]s in a [`Report`], never errors; [`Error`] means an input could not be
//! read at all.

pub mod archive;
mod artifacts;
pub mod baseline;
mod bundle;
pub mod canonical;
mod checks;
mod comparison;
mod error;
mod fixture;
mod found;
pub mod json;
mod mapping;
pub mod names;
mod recompute;
mod registries;
mod render;
mod report;
mod reproduction;
mod rundir;
mod shard;
mod sign;
mod suite;
pub mod texts;
mod time;
pub mod vectors;

pub use crate::artifacts::{AGGREGATE_SCHEMA, ROW_SCHEMA, Run, SCHEMAS, aggregates_in, load_runs};
pub use crate::baseline::{bm25_flat_baseline, config_label, frozen_baseline, is_frozen_baseline};
pub use crate::bundle::{
    BundleCheck, BundleContents, BundleOptions, check_bundle_files, claim, claim_v2, claim_v4, claim_v5,
    claim_v6, claim_v7, claim_v8, claim_v9, make_bundle, verify_bundle, verify_bundle_contents,
    verify_embedding_shard,
};
pub use crate::checks::carried::runs_digest;
pub use crate::checks::exports::{
    export_checks, export_names, subjects_of, test_result_agrees, test_result_statement,
};
pub use crate::checks::selection::Documents;
pub use crate::checks::store::{DATABASE_TIME_LIMIT, MAX_DATABASE_BYTES};
pub use crate::checks::validate::{Evidence, METRIC_TOLERANCE, calibration_size, draw_split, validate};
pub use crate::checks::{EmbeddingCheck, Input};
pub use crate::comparison::{
    COMPARISON_DRAWS, ComparedRun, comparable, compared_runs, distinct, render_comparison, verify_comparison,
};
pub use crate::error::{Error, Result};
pub use crate::fixture::{
    FIXTURE_VIEW_SCHEMA, FIXTURE_VIEW_SCHEMA_V1, FULL_FIXTURE_SCHEMA_V2, FixtureView, FullFixture,
    SemanticDigests, VectorsBinding,
};
pub use crate::mapping::{Entry as MappingEntry, Mapping};
pub use crate::names::*;
pub use crate::recompute::embedding::{EVAL_EMBEDDING_SAMPLE, EmbeddingProgress, Ran, Sample, fresh_seed};
pub use crate::recompute::metrics;
pub use crate::report::{
    Basis, Check, Counted, EmbeddingExtent, PassChance, REPORT_SCHEMA, Report, Status, Verdict, passes_with,
    terminal_safe,
};
pub use crate::reproduction::{
    MAX_STATEMENT_BYTES, REPRODUCTION_TYPE, published_tolerances, verify_reproduction,
};
pub use crate::rundir::{Verification, Verified, VerifyOptions, verify, write_verification};
pub use crate::shard::{Finding, MAX_SHARD_BYTES, SHARD_SCHEMA, ShardResult, ShardResults, Slice};
pub use crate::sign::{
    MAX_KEY_FILE_BYTES, TRUSTED_COMMENT_PREFIX, VerifyingKey, keygen, load_public_key, load_secret_key,
    public_key_of, secret_key_is_encrypted, sign_bytes, sign_document, verify_bytes,
};
pub use crate::suite::{Archives, SuiteCheck, verify_suite, verify_suite_comparison};
