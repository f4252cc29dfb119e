//! Every check over a set of runs, whatever they were read from. A bundle (`bundle.rs`) and an output
//! directory (`rundir.rs`) are two thin readers: each turns what it found into [`Inputs`] and calls
//! [`run_all`], then adds the few checks only it can make (signature and subjects; the live database).
//!
//! Each check records its basis: recomputed from the inputs, attested (the signer's word), or not checked (an
//! input is missing here, and its evidence says which).

use std::path::PathBuf;

use serde_json::Value;

use crate::artifacts::Run;
use crate::fixture::FixtureView;
use crate::mapping::Mapping;
use crate::recompute::embedding::{EmbeddingProgress, Sample};
use crate::render::Model;
use crate::report::Report;
use crate::texts::Texts;
use crate::vectors::Vectors;

pub(crate) mod attested;
pub(crate) mod carried;
pub(crate) mod exports;
pub(crate) mod identity;
pub(crate) mod published;
pub(crate) mod rankings;
pub(crate) mod receipts;
pub(crate) mod selection;
pub(crate) mod store;
pub(crate) mod validate;

pub use crate::found::Input;

/// How the embedding re-check runs.
#[derive(Debug, Clone)]
pub struct EmbeddingCheck {
    /// The model directory; without one the check is not made.
    pub model_dir: Option<PathBuf>,
    /// Every document, or how many (every query is re-embedded either way).
    pub sample: Sample,
    /// The draw's seed (printed, so that it can be replayed).
    pub seed: u64,
    /// Told how far the re-embedding got.
    pub progress: EmbeddingProgress,
    /// The re-embedding taken from shard results (`--embedding-shards`) instead of made here.
    pub shards: Option<crate::shard::ShardResults>,
    /// Where the model re-embeds (a GPU only after its self-check; every vector is compared bit for bit
    /// wherever it was computed).
    pub device: embedding::DeviceRequest,
    /// A directory where this verifier keeps the vectors it re-embeds and takes those it re-embedded before
    /// (`--embedding-memo`), for the same executable, model, text policy and device; `None`: none kept.
    pub memo: Option<PathBuf>,
}

/// What the readers hand to [`run_all`].
pub(crate) struct Inputs<'a> {
    /// Every aggregate with its rows.
    pub(crate) runs: &'a [Run],
    /// The fixture view (from `fixture-metadata.json`, or the full fixture).
    pub(crate) fixture: Input<'a, FixtureView>,
    /// The store's mapping file, read.
    pub(crate) mapping: Input<'a, Mapping>,
    /// The executable's digest to compare with the recorded one.
    pub(crate) executable: Input<'a, str>,
    /// `effective-config.json`, parsed.
    pub(crate) frozen: Option<&'a Value>,
    /// The selection's documents.
    pub(crate) documents: selection::Documents<'a>,
    /// The fixture's vectors (the bundle's `vectors.f32`, or the full fixture's).
    pub(crate) vectors: Input<'a, Vectors>,
    /// The corpus and query texts (the public archive, or the full fixture).
    pub(crate) texts: Input<'a, Texts>,
    /// The sparse fixture the runs searched with, when one did.
    pub(crate) sparse: Input<'a, crate::recompute::sparse::SparseView>,
    /// The embedding re-check.
    pub(crate) embedding: &'a EmbeddingCheck,
    /// `published.json`, when the evidence holds one.
    pub(crate) published: Option<&'a [u8]>,
    /// `sha256:` of the bundle's manifest, which shard results must name (`None` for an output directory).
    pub(crate) manifest_sha256: Option<&'a str>,
    /// Whether the model identity must list every file that shapes the vectors (claim v8 and later, and an
    /// output directory, which this build's runner wrote).
    pub(crate) identity_lists_files: bool,
}

/// The checks and, for a run with a selection, what the report draws.
pub(crate) struct Outcome {
    pub(crate) report: Report,
    pub(crate) model: Option<Model>,
}

/// How the machine's cores are shared while the embedding re-check runs beside the other checks.
pub(crate) struct Share {
    /// Threads re-embedding.
    pub(crate) embedding: usize,
    /// Threads ranking lexically, each a reader of the one index (at most four).
    pub(crate) lexical: usize,
}

/// When `reembedding`, a pool as wide as the machine re-embeds (the longest check: its threads take the cores
/// the other checks leave idle, and all of them once those are done) and one thread ranks lexically (about
/// half a second of work on SciFact); otherwise every core ranks lexically, up to four.
fn share(reembedding: bool) -> Share {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if reembedding {
        Share { embedding: cores, lexical: 1 }
    } else {
        Share { embedding: 0, lexical: cores.clamp(1, 4) }
    }
}

/// Runs every check that needs nothing but [`Inputs`]: the contract's validator, the receipts, what is
/// attested, every ranking recomputed, the embeddings (on a second thread), and the selection.
pub(crate) fn run_all(inputs: &Inputs<'_>) -> Outcome {
    let share = share(inputs.embedding.model_dir.is_some() && inputs.embedding.shards.is_none());
    std::thread::scope(|scope| {
        // Re-embedding is the longest check and shares nothing with the others, so it runs beside them, on
        // threads of its own: the other checks keep the other cores, and no idle worker spins against them.
        let beside = (share.embedding > 0)
            .then(|| {
                std::thread::Builder::new().name("embedding-check".into()).spawn_scoped(scope, || {
                    match rayon::ThreadPoolBuilder::new().num_threads(share.embedding).build() {
                        Ok(pool) => pool.install(|| rankings::embedding(inputs)),
                        Err(_) => rankings::embedding(inputs),
                    }
                })
            })
            .and_then(Result::ok);
        let mut report = Report::default();
        for run in inputs.runs {
            report.extend(validate::validate(
                run,
                validate::Evidence {
                    fixture: inputs.fixture,
                    mapping: inputs.mapping,
                    executable_sha256: inputs.executable,
                },
            ));
            report.extend(receipts::receipts(run, inputs.frozen));
            report.extend(attested::attested(run));
            if let Some(frozen) = inputs.frozen
                && frozen.get("frozen_unix").is_some()
                && run.str_at("/split") != "calibration"
            {
                report.attest(&run.name, "freeze.order", attested::freeze_order(run, frozen));
            }
        }
        if let Input::Read { content: view, .. } = inputs.fixture {
            identity::model(&view.metadata, inputs.identity_lists_files, &mut report);
        }
        report.extend(rankings::rankings(inputs, share.lexical));
        let (selection, mut model) = selection::selection_checks(inputs.runs, inputs.documents);
        if let (Some(model), Input::Read { content: view, .. }) = (model.as_mut(), inputs.fixture) {
            model.dataset = crate::render::Dataset::of(&view.metadata);
            model.archive = Some(match crate::registries::archive_standing(&view.metadata) {
                Ok(what) | Err(what) => what,
            });
            let config = inputs.runs.first().map_or(&serde_json::Value::Null, |run| run.config());
            model.page = Some(crate::render::Page::of(&view.metadata, config));
        }
        if let Some(bytes) = inputs.published {
            match inputs.fixture {
                Input::Read { content: view, .. } => {
                    let sparse = match inputs.sparse {
                        Input::Read { content, .. } => Some(content),
                        Input::Absent(_) | Input::Refused(_) => None,
                    };
                    let (result, rows) =
                        published::published(inputs.runs, bytes, &view.metadata, sparse, &mut report.notes);
                    report.record("published", "published.rows", result);
                    if let (Some(model), Some(rows)) = (model.as_mut(), rows) {
                        model.published = rows;
                    }
                }
                Input::Refused(reason) | Input::Absent(reason) => report.record(
                    "published",
                    "published.rows",
                    Err(format!("no fixture to read it by: {reason}")),
                ),
            }
        }
        let embedded = match beside {
            Some(thread) => thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            None => rankings::embedding(inputs),
        };
        report.extend(embedded);
        report.extend(selection);
        Outcome { report, model }
    })
}
