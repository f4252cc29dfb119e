//! Opening the embedder the flags ask for, fetching the pinned model files when none are on disk.

use std::path::PathBuf;

use anyhow::{Context, bail};
use embedding::{Embedder, Ollama, SentenceBert, WeightPin};

use crate::cli::{DeviceArg, EmbedderKind, ModelArgs};

/// The embedder, and the model directory it was loaded from (none for Ollama).
pub(crate) fn open_embedder(args: &ModelArgs) -> anyhow::Result<(Box<dyn Embedder>, Option<PathBuf>)> {
    match args.embedder {
        EmbedderKind::Ollama => {
            if matches!(args.device, DeviceArg::Cuda | DeviceArg::Emulated) {
                bail!(
                    "--device {} runs the in-process model; Ollama runs where its server runs",
                    args.device.request().name()
                );
            }
            let model = args.model.as_deref().unwrap_or(embedding::DEFAULT_OLLAMA_MODEL);
            if !model.starts_with("all-minilm") {
                bail!("unknown dimension for Ollama model {model:?}: only all-minilm is supported");
            }
            Ok((Box::new(Ollama::new(None, model, 384)?), None))
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
            let mut model = open_checkpoint(args, &dir)?;
            use_device(&mut model, args.device)?;
            Ok((Box::new(model), Some(dir)))
        }
    }
}

/// The in-process checkpoint in `dir`: pinned to `--weights-sha256` when given; to a known checkpoint's
/// published digests when `--model NAME` names one; whatever `--model-dir` holds, its digests measured; else
/// (`$SCIFACT_MODEL_DIR`, the cache) all-MiniLM-L6-v2, pinned.
fn open_checkpoint(args: &ModelArgs, dir: &std::path::Path) -> anyhow::Result<SentenceBert> {
    let loaded = match (&args.weights_sha256, args.model.as_deref(), &args.model_dir) {
        (Some(given), _, _) => {
            let hex = weights_digest(given)?;
            SentenceBert::load(dir, &format!("bert-sha256-{hex}"), WeightPin::Sha256(hex))
        }
        (None, Some(name), _) => {
            let Some(known) = embedding::registry::lookup(name)? else {
                let names: Vec<String> =
                    embedding::registry::known_models()?.into_iter().map(|model| model.name).collect();
                bail!(
                    "--model {name:?} is not a checkpoint this build knows by name (configs/models.json knows {}, \
                     each by the published digest of every file that shapes its vectors); pass --model-dir DIR \
                     without --model to run any other, named by its digests",
                    names.join(", ")
                );
            };
            if known.name == embedding::ALL_MINILM_L6_V2 {
                SentenceBert::load(dir, &known.name, WeightPin::AllMiniLmL6V2)
            } else {
                let weights = known.files.get("model.safetensors").cloned().unwrap_or_default();
                SentenceBert::load(dir, &known.name, WeightPin::Sha256(weights))
            }
        }
        (None, None, Some(_)) => SentenceBert::load_measured(dir),
        (None, None, None) => SentenceBert::load(dir, embedding::ALL_MINILM_L6_V2, WeightPin::AllMiniLmL6V2),
    };
    let mut model = loaded.with_context(|| format!("loading the model from {}", dir.display()))?;
    model.set_batch_size(args.batch_size);
    Ok(model)
}

/// Moves `model` to the device `device` asks for, and says on stderr where it runs (and, when `auto` found no
/// usable GPU, why).
pub(crate) fn use_device(model: &mut SentenceBert, device: DeviceArg) -> anyhow::Result<()> {
    let choice = model.use_device(device.request())?;
    let no_gpu = choice
        .no_gpu
        .map(|why| format!("; no usable GPU: {}", why.split("; ").next().unwrap_or(&why)))
        .unwrap_or_default();
    #[allow(clippy::print_stderr)]
    {
        eprintln!("device: {}{no_gpu}", choice.device.describe());
    }
    if choice.device.kind() != "cpu" {
        scifact_eval::note_embedding_device(choice.device.describe());
    }
    Ok(())
}

/// `--weights-sha256` as the one spelling every name uses: 64 lowercase hex digits (a `sha256:` prefix and upper
/// case are accepted and normalised; anything else is refused, so a name never carries a digest the verifier
/// would read as another).
fn weights_digest(given: &str) -> anyhow::Result<String> {
    let hex = given.trim();
    let hex = hex.strip_prefix("sha256:").unwrap_or(hex).to_ascii_lowercase();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!(
            "--weights-sha256 {given:?} is not a sha256 (64 hex digits, as `sha256sum model.safetensors` prints)"
        );
    }
    Ok(hex)
}

/// An embedder whose identity is written as identities were before they listed every file that shapes a vector
/// (claim v7 and earlier): without `files`. The vectors are the inner embedder's; only the record differs, so
/// that a fixture of such a bundle is rebuilt to its own bytes.
pub(crate) struct RecordedBeforeFiles {
    inner: Box<dyn Embedder>,
    identity: embedding::EmbedderIdentity,
}

impl RecordedBeforeFiles {
    /// `inner`, recorded without its files.
    pub(crate) fn new(inner: Box<dyn Embedder>) -> RecordedBeforeFiles {
        let identity = embedding::EmbedderIdentity { files: None, ..inner.identity().clone() };
        RecordedBeforeFiles { inner, identity }
    }
}

impl Embedder for RecordedBeforeFiles {
    fn identity(&self) -> &embedding::EmbedderIdentity {
        &self.identity
    }

    fn embed(&self, texts: &[&str]) -> embedding::Result<Vec<embedding::Embedding>> {
        self.inner.embed(texts)
    }

    fn declared_prompt(&self, role: embedding::Role) -> String {
        self.inner.declared_prompt(role)
    }

    fn has_own_text_policy(&self) -> bool {
        self.inner.has_own_text_policy()
    }

    fn on_gpu(&self) -> bool {
        self.inner.on_gpu()
    }

    fn embed_prompted(&self, prompt: &str, texts: &[&str]) -> embedding::Result<Vec<embedding::Embedding>> {
        self.inner.embed_prompted(prompt, texts)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_weights_digest_is_normalised_or_refused() {
        let lower = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";
        assert_eq!(super::weights_digest(&lower.to_uppercase()).unwrap(), lower);
        assert_eq!(super::weights_digest(&format!("sha256:{lower}")).unwrap(), lower);
        assert_eq!(super::weights_digest(&format!(" {lower}\n")).unwrap(), lower);
        for bad in ["", "53aa", &format!("{lower}00"), &lower.replace('a', "g")] {
            assert!(super::weights_digest(bad).is_err(), "{bad:?}");
        }
    }

    /// `reproduce` of a claim v7 bundle records the model as it was then: the same vectors, no `files`.
    #[test]
    fn a_model_recorded_before_files_embeds_the_same_and_lists_none() {
        use embedding::Embedder;
        let dir = tempfile::tempdir().unwrap();
        embedding::testing::write_tiny_bert(dir.path(), 3).unwrap();
        let load = || embedding::SentenceBert::load_measured(dir.path()).unwrap();
        let listed = load();
        assert!(listed.identity().files.as_ref().is_some_and(|files| files.contains_key("config.json")));
        let before = super::RecordedBeforeFiles::new(Box::new(load()));
        assert_eq!(before.identity().files, None);
        assert_eq!(
            embedding::EmbedderIdentity { files: None, ..listed.identity().clone() },
            *before.identity()
        );
        let texts = ["alpha beta", "gamma"];
        let (a, b) = (listed.embed(&texts).unwrap(), before.embed(&texts).unwrap());
        assert!(a.iter().zip(&b).all(|(a, b)| a.vector == b.vector));
        let listed: &dyn Embedder = &listed;
        let (a, b) =
            (listed.embed_prompted("q: ", &texts).unwrap(), before.embed_prompted("q: ", &texts).unwrap());
        assert!(a.iter().zip(&b).all(|(a, b)| a.vector == b.vector));
    }
}
