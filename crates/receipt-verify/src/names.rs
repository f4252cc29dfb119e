//! Every file name, schema id, predicate type and cap the verifier knows, in one place below everything else:
//! a bundle and an output directory are two readers of the same names.

use safe_fs::Limits;

/// The manifest file.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The manifest's detached signature.
pub const SIGNATURE_FILE: &str = "manifest.json.minisig";
/// The prefix of a replaced signature kept beside the new one (`sign --replace-signature`); the unix time of
/// the replacement follows. Such files are disclosed by the `signature` check, never read as evidence.
pub const REPLACED_SIGNATURE_PREFIX: &str = "manifest.json.minisig.replaced-";
/// The in-toto Statement type.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The newest predicate type this build writes, for bundles with learned sparse runs: version 9 is version 8's
/// claim with the sparse fixture the runs searched (`sparse`: its digest and the sparse model's identity, every
/// file by digest), which the bundle carries as [`SPARSE_FIXTURE_FILE`] so that every sparse score is recomputed
/// and, with the checkpoint, every sparse vector encoded again. A bundle without sparse runs is version 8.
pub const PREDICATE_TYPE: &str = "urn:scifact-audit:claim:v9";
/// Version 8: version 7's claim with the digest of every file that shapes the vectors (`model_files`: the
/// weights, the tokenizer, `config.json` and each sentence-transformers file the checkpoint holds), which the
/// model's identity in the fixture must list for a model run by this project's forward pass: `model.identity`
/// judges the model's name from all of them. What this build writes for a bundle without sparse runs.
pub const PREDICATE_TYPE_V8: &str = "urn:scifact-audit:claim:v8";
/// Version 7: version 6's claim with the lexical scorer of its runs (`lexical`: `bm25_flat` or `fts5`), a
/// `published.json` of version 3 or later (the registry whose BM25-flat rows a BM25-flat run can reproduce),
/// and a report page that names the scorer, the archive and model a reader re-runs with, and keeps intervals,
/// notes and latency tails legible. Its model identity names the weights and the tokenizer of
/// all-MiniLM-L6-v2 only; such bundles keep verifying.
pub const PREDICATE_TYPE_V7: &str = "urn:scifact-audit:claim:v7";
/// Version 6: version 5's claim with the digest of `published.json` (`published_sha256`), which a bundle of a
/// registered dataset must carry (the comparison with the dataset's published rows cannot be left out), of
/// version 2 or later (it states whose archive was evaluated). Such bundles keep verifying.
pub const PREDICATE_TYPE_V6: &str = "urn:scifact-audit:claim:v6";
/// Version 5: version 4's claim with how the signer's own verification checked the vectors
/// (`verification_embedding`: how many were re-embedded, and for a sample the chance a forgery passes), a
/// verification report of schema v3 (the `sampled` verdict), and a report page that states that check. Such
/// bundles keep verifying; their `published.json` may be absent.
pub const PREDICATE_TYPE_V5: &str = "urn:scifact-audit:claim:v5";
/// Version 4: version 3's claim, and the bundle carries the fixture's vectors (so every dense score can be
/// recomputed) and a report the verifier re-renders. Such bundles keep verifying.
pub const PREDICATE_TYPE_V4: &str = "urn:scifact-audit:claim:v4";
/// Version 3: version 2's claim with a TREC run file, ir_metadata and SLSA provenance per aggregate, the test
/// qrels and an in-toto Test Result. Such bundles carry no vectors and keep verifying.
pub const PREDICATE_TYPE_V3: &str = "urn:scifact-audit:claim:v3";
/// Version 2 adds each result's configuration and, when the run selected a configuration, the selection and
/// the held-out comparisons; such bundles carry no exports and keep verifying.
pub const PREDICATE_TYPE_V2: &str = "urn:scifact-audit:claim:v2";
/// The predicate type of bundles published before selection existed; they keep verifying.
pub const PREDICATE_TYPE_V1: &str = "urn:scifact-audit:claim:v1";

/// The claim version a predicate type names (1 for `urn:scifact-audit:claim:v1`), or 0 for any other,
/// a version newer than [`PREDICATE_TYPE`]'s included.
pub fn claim_version(predicate_type: &str) -> u32 {
    let number = |t: &str| t.strip_prefix("urn:scifact-audit:claim:v").and_then(|n| n.parse::<u32>().ok());
    let newest = number(PREDICATE_TYPE).unwrap_or(0);
    number(predicate_type).filter(|n| (1..=newest).contains(n)).unwrap_or(0)
}

/// The sparse fixture a claim v9 bundle carries: every document's and query's learned sparse vector.
pub const SPARSE_FIXTURE_FILE: &str = "sparse-fixture.json";

/// The human-readable report's file name, a subject of bundles with a selection.
pub const REPORT_FILE: &str = "report.html";
/// `preregistration.json`.
pub const PREREGISTRATION_FILE: &str = "preregistration.json";
/// Its detached signature.
pub const PREREGISTRATION_SIGNATURE_FILE: &str = "preregistration.json.minisig";
/// `selection.json`, the ledger.
pub const SELECTION_FILE: &str = "selection.json";
/// `statistics.json`.
pub const STATISTICS_FILE: &str = "statistics.json";
/// The documents beside the runs (the selection's, the report, the published rows) a bundle carries when its
/// output directory has them.
pub const SELECTION_DOCUMENTS: [&str; 6] = [
    PREREGISTRATION_FILE,
    PREREGISTRATION_SIGNATURE_FILE,
    SELECTION_FILE,
    STATISTICS_FILE,
    REPORT_FILE,
    PUBLISHED_FILE,
];
/// Published rows beside the measured ones (`scifact-audit-published-comparison-v1` or `-v2`), which `eval` writes.
pub const PUBLISHED_FILE: &str = "published.json";
/// The fixture view's file name in a bundle.
pub const FIXTURE_METADATA_FILE: &str = "fixture-metadata.json";
/// The fixture's vectors in a bundle (binary; layout in `vectors.rs`).
pub const VECTORS_FILE: &str = "vectors.f32";
/// The effective configuration's file name.
pub const EFFECTIVE_CONFIG_FILE: &str = "effective-config.json";
/// The verification report's file name.
pub const VERIFICATION_FILE: &str = "verification.json";
/// The verdict as an in-toto Test Result statement.
pub const TEST_RESULT_FILE: &str = "verification.intoto.json";
/// The mapping's file name in a store directory, and in bundles of claim v6 and earlier whatever their dataset
/// (claim v7 names it for the dataset: `FixtureView::mapping_file`).
pub const MAPPING_FILE: &str = "scifact.mapping.json";
/// The qrels file of bundles of claim v5 and earlier, whatever their dataset.
pub const LEGACY_QRELS_FILE: &str = "scifact-test.qrels";
/// A run file's suffix after its aggregate's stem.
pub const TREC_SUFFIX: &str = ".trec";
/// A run's ir_metadata suffix after its aggregate's stem.
pub const METADATA_SUFFIX: &str = ".ir_metadata.yml";
/// A run's SLSA provenance suffix after its aggregate's stem.
pub const PROVENANCE_SUFFIX: &str = ".provenance.json";

/// The predicate type of a comparison statement.
pub const COMPARISON_TYPE: &str = "urn:scifact-audit:comparison:v1";
/// The comparison statement's file name.
pub const COMPARISON_FILE: &str = "comparison.json";
/// The comparison page's file name, beside the statement.
pub const COMPARISON_PAGE: &str = "compare.html";
/// The name of a comparison's candidate subject when the comparison is carried inside the candidate bundle
/// (whose manifest lists the comparison, so cannot be its subject): the digest of its runs ([`runs_digest`]).
pub const CARRIED_SUBJECT: &str = "candidate/runs";
/// The prefix of a comparison carried in a bundle: `comparison-<earlier bundle>.json`, with its `.minisig`,
/// and its page `compare-<earlier bundle>.html`.
pub const CARRIED_PREFIX: &str = "comparison-";

/// The in-toto Test Result predicate type.
pub const TEST_RESULT_TYPE: &str = "https://in-toto.io/attestation/test-result/v0.1";
/// The SLSA provenance predicate type.
pub const SLSA_PROVENANCE_TYPE: &str = "https://slsa.dev/provenance/v1";

/// The largest `manifest.json` read.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The most subjects a manifest may list.
pub const MAX_SUBJECTS: usize = 4096;
/// The default caps on a bundle's files held in memory: 2 GiB each, 4 GiB in all (a SciFact bundle is about
/// 45 MB). The vectors are apart ([`MAX_VECTORS_BYTES`]).
pub const BUNDLE_LIMITS: Limits = Limits { max_file_bytes: 2 << 30, max_total_bytes: 4 << 30 };
/// Caps for the rows and aggregates of a local output directory.
pub const OUTPUT_LIMITS: Limits = Limits { max_file_bytes: 256 << 20, max_total_bytes: 4 << 30 };
/// The largest fixture read (the SciFact fixture is about 60 MB).
pub const MAX_FIXTURE_BYTES: u64 = 1 << 30;
/// The largest vectors file a bundle may carry (msmarco's 8.8 M documents at 768 dimensions are 27 GB). It is
/// never held in memory: it is copied as it is hashed and read from the copy.
pub const MAX_VECTORS_BYTES: u64 = 64 << 30;
/// The largest executable hashed.
pub const MAX_EXECUTABLE_BYTES: u64 = 2 << 30;
/// The largest mapping, effective configuration or fixture metadata read.
pub const MAX_SIDECAR_BYTES: u64 = 256 << 20;
/// The largest public archive read (the SciFact zip is about 3 MB, a generated corpus of a million documents
/// about 240 MB).
pub const MAX_ARCHIVE_BYTES: u64 = 4 << 30;

/// The stem of an aggregate's exports.
pub fn export_stem(aggregate: &str) -> &str {
    aggregate.strip_suffix(".aggregate.json").unwrap_or(aggregate)
}

/// Returns true if and only if `name` is a file name that cannot leave its directory or hide: ASCII letters,
/// digits, `.`, `_` and `-`, not starting with `.`, at most 255 bytes.
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every version this build writes or reads is its number; one past the newest, or anything else, is 0.
    #[test]
    fn claim_versions_run_from_1_to_the_one_this_build_writes() {
        assert_eq!(claim_version(PREDICATE_TYPE_V1), 1);
        assert_eq!(claim_version(PREDICATE_TYPE_V7), 7);
        assert_eq!(claim_version(PREDICATE_TYPE_V8), 8);
        assert_eq!(claim_version(PREDICATE_TYPE), 9);
        for other in ["urn:scifact-audit:claim:v10", "urn:scifact-audit:claim:v0", "urn:other:claim:v3", ""] {
            assert_eq!(claim_version(other), 0, "{other}");
        }
    }
}
