//! `receipt-verify`: checks SciFact evaluation artifacts without trusting the code that made them.
//!
//! # Overview
//! It reads rows, aggregates, mappings and databases as data and recomputes everything with its own code: the
//! metrics ([`metrics`]), canonical JSON and digests ([`canonical`]), the split ([`draw_split`]). It never
//! depends on `scifact-eval` or `semantic-memory`; the two implementations agreeing is the evidence.
//! - [`validate`]: the contract's validator for one aggregate and its rows.
//! - [`verify`]: the validator plus the gaps the contract admits (exactness policy, receipt digests,
//!   effective configuration, embedding values, the live database, clean git state, host identity).
//! - [`make_bundle`], [`keygen`], [`sign_bytes`], [`verify_bundle`]: a signed in-toto bundle that a third
//!   party verifies offline with the public key.
//!
//! Disagreements are failed [`Check`]s in a [`Report`], never errors; [`Error`] means an input could not be
//! read at all.

mod artifacts;
mod bundle;
pub mod canonical;
mod error;
mod exports;
mod fixture;
mod fusion;
pub mod metrics;
mod report;
mod reproduction;
mod selection;
mod sign;
mod statistics;
mod store;
mod validate;
mod verify;

pub use crate::artifacts::{
    AGGREGATE_SCHEMA, OUTPUT_LIMITS, ROW_SCHEMA, Run, SCHEMAS, aggregates_in, is_plain_file_name, load_runs,
};
pub use crate::bundle::{
    BUNDLE_LIMITS, BundleCheck, BundleContents, BundleOptions, EFFECTIVE_CONFIG_FILE, FIXTURE_METADATA_FILE,
    MANIFEST_FILE, MAPPING_FILE, MAX_MANIFEST_BYTES, MAX_SUBJECTS, PREDICATE_TYPE, PREDICATE_TYPE_V1,
    PREDICATE_TYPE_V2, REPORT_FILE, SELECTION_DOCUMENTS, STATEMENT_TYPE, VERIFICATION_FILE,
    check_bundle_files, claim, claim_v2, make_bundle, verify_bundle, verify_bundle_contents,
};
pub use crate::error::{Error, Result};
pub use crate::exports::{
    METADATA_SUFFIX, PROVENANCE_SUFFIX, QRELS_FILE, SLSA_PROVENANCE_TYPE, TEST_RESULT_FILE, TEST_RESULT_TYPE,
    TREC_SUFFIX, export_checks, export_names, export_stem, subjects_of, test_result_agrees,
    test_result_statement,
};
pub use crate::fixture::{FIXTURE_VIEW_SCHEMA, FixtureView, FullFixture};
pub use crate::report::{Check, REPORT_SCHEMA, Report, Status, terminal_safe};
pub use crate::reproduction::{
    MAX_STATEMENT_BYTES, REPRODUCTION_TYPE, published_tolerances, verify_reproduction,
};
pub use crate::selection::{
    Documents, PREREGISTRATION_FILE, PREREGISTRATION_SIGNATURE_FILE, SELECTION_FILE, STATISTICS_FILE,
    selection_checks,
};
pub use crate::sign::{
    MAX_KEY_FILE_BYTES, SIGNATURE_FILE, TRUSTED_COMMENT_PREFIX, VerifyingKey, keygen, load_public_key,
    load_secret_key, public_key_of, secret_key_is_encrypted, sign_bytes, sign_document, verify_bytes,
};
pub use crate::store::{DATABASE_TIME_LIMIT, MAX_DATABASE_BYTES};
pub use crate::validate::{Evidence, Input, METRIC_TOLERANCE, config_label, draw_split, validate};
pub use crate::verify::{
    EMBEDDING_MIN_COSINE, EMBEDDING_SAMPLE, LEXICAL_SAMPLE, MAX_EXECUTABLE_BYTES, MAX_FIXTURE_BYTES,
    MAX_SIDECAR_BYTES, VECTOR_SAMPLE, Verification, VerifyOptions, frozen_baseline, gaps, is_frozen_baseline,
    verify, write_verification,
};
