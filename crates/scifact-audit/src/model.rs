//! Opening the embedder the flags ask for, fetching the pinned model files when none are on disk.

use std::path::PathBuf;

use anyhow::{Context, bail};
use embedding::{Embedder, MiniLm, Ollama, WeightPin};

use crate::cli::{EmbedderKind, ModelArgs};

/// The embedder, and the model directory it was loaded from (none for Ollama).
pub(crate) fn open_embedder(args: &ModelArgs) -> anyhow::Result<(Box<dyn Embedder>, Option<PathBuf>)> {
    match args.embedder {
        EmbedderKind::Ollama => {
            if !args.model.starts_with("all-minilm") {
                bail!("unknown dimension for Ollama model {:?}: only all-minilm is supported", args.model);
            }
            Ok((Box::new(Ollama::new(None, &args.model, 384)?), None))
        }
        EmbedderKind::Minilm => {
            let dir = match embedding::find_model_dir(args.model_dir.as_deref()) {
                Some(dir) => dir,
                None => {
                    let Some(cache) = embedding::model_cache_dir() else {
                        bail!("no --model-dir, no SCIFACT_MODEL_DIR and no HOME to cache a download in");
                    };
                    embedding::download_pinned(
                        embedding::ALL_MINILM_L6_V2_BASE_URL,
                        &embedding::all_minilm_l6_v2_files(),
                        &cache,
                    )
                    .context("fetching all-MiniLM-L6-v2 (set SCIFACT_MODEL_DIR to use a local copy)")?;
                    cache
                }
            };
            let (name, pin) = match &args.weights_sha256 {
                Some(hex) => (format!("bert-sha256-{hex}"), WeightPin::Sha256(hex.clone())),
                None => (embedding::ALL_MINILM_L6_V2.to_owned(), WeightPin::AllMiniLmL6V2),
            };
            let mut model = MiniLm::load(&dir, &name, pin)
                .with_context(|| format!("loading the model from {}", dir.display()))?;
            model.set_batch_size(args.batch_size);
            Ok((Box::new(model), Some(dir)))
        }
    }
}
