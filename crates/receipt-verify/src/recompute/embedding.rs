//! Embeddings, recomputed: every query text, and every document text or a sample of them drawn from
//! randomness the signer cannot predict, embedded again with the declared model by this build's forward pass
//! and required to equal the evidence's vectors bit for bit.
//!
//! The forward pass gives a text the same bits whatever its batch, companions, threads or vector kernels, so
//! anything looser than equality would hide a swapped vector. A sample is never called whole: the check is
//! then `sampled`, and the report's [`EmbeddingExtent`] states the chance that forged vectors escape it. The
//! draw is printed as a seed, so a second person can replay exactly the same sample.

use std::path::Path;
use std::sync::Arc;

use embedding::{Embedder, Role, SentenceBert, WeightPin};
use serde_json::Value;

use crate::recompute::memo::Memo;
use crate::recompute::statistics::Stream;
use crate::report::EmbeddingExtent;
use crate::texts::{Policy, Texts};
use crate::vectors::Vectors;

/// Document vectors `eval`'s own verify stage re-embeds (beside every query): the signer's quick look, which
/// says it is a sample. A reader's `verify` and `verify-bundle` re-embed every vector unless told otherwise.
pub const EVAL_EMBEDDING_SAMPLE: usize = 64;

/// Texts embedded and compared together: each part's prompts and fresh vectors are all that is held.
const PART: usize = 16_384;

/// Which document vectors to re-embed (every query vector is re-embedded always: they are short).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sample {
    /// Every document: the only way to `verified`.
    All,
    /// This many documents, drawn without replacement: the verdict is then `sampled` at best.
    Documents(usize),
}

impl Sample {
    /// Reads `all` or a positive count of documents.
    ///
    /// # Errors
    /// What the text is instead.
    pub fn parse(text: &str) -> Result<Sample, String> {
        if text == "all" {
            return Ok(Sample::All);
        }
        text.parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .map(Sample::Documents)
            .ok_or_else(|| format!("{text:?} is neither a positive count of documents nor `all`"))
    }
}

/// Told how far the re-embedding got: `(texts done, texts in all)`, from the thread that embeds.
#[derive(Clone, Default)]
pub struct EmbeddingProgress(Option<Arc<dyn Fn(u64, u64) + Send + Sync>>);

impl EmbeddingProgress {
    /// Reports to `report`.
    pub fn new(report: impl Fn(u64, u64) + Send + Sync + 'static) -> EmbeddingProgress {
        EmbeddingProgress(Some(Arc::new(report)))
    }

    fn tell(&self, done: u64, total: u64) {
        if let Some(report) = &self.0 {
            report(done, total);
        }
    }
}

impl std::fmt::Debug for EmbeddingProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "EmbeddingProgress(reporting)"
        } else {
            "EmbeddingProgress(silent)"
        })
    }
}

/// A seed from the operating system's randomness, below 2^53 so that every reader prints and reads it exactly.
pub fn fresh_seed() -> u64 {
    let mut bytes = [0u8; 8];
    let read =
        std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    let seed = if read.is_ok() {
        u64::from_le_bytes(bytes)
    } else {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()),
        );
        hasher.write_u32(std::process::id());
        hasher.finish()
    };
    seed & ((1 << 53) - 1)
}

/// The document indexes drawn from `documents`: a partial Fisher-Yates shuffle driven by SplitMix64 from
/// `seed`, sorted; every index for [`Sample::All`].
pub(crate) fn draw(documents: usize, sample: Sample, seed: u64) -> Vec<usize> {
    let n = match sample {
        Sample::All => return (0..documents).collect(),
        Sample::Documents(n) => n.min(documents),
    };
    let mut order: Vec<usize> = (0..documents).collect();
    let mut stream = Stream::new(seed);
    for i in 0..n {
        let j = i + stream.below((documents - i) as u64);
        order.swap(i, j);
    }
    order.truncate(n);
    order.sort_unstable();
    order
}

/// What a draw covers: the documents chosen of all, every query, and the chance a forgery passes.
pub(crate) fn extent(chosen: usize, texts: &Texts, seed: u64) -> EmbeddingExtent {
    EmbeddingExtent::new(chosen as u64, texts.documents.len() as u64, texts.queries.len() as u64, seed)
}

/// Re-embeds every query and the `chosen` documents with the model `identity` declares, from `model_dir`, and
/// compares bits.
///
/// # Errors
/// The first text whose vector differs, or why the model could not run.
#[allow(clippy::too_many_arguments)]
pub(crate) fn recheck(
    identity: &Value,
    policy: Policy,
    (model_dir, device): (&Path, embedding::DeviceRequest),
    texts: &Texts,
    vectors: &Vectors,
    chosen: &[usize],
    progress: &EmbeddingProgress,
    memo: Option<&Path>,
) -> Result<String, String> {
    let embedder = load(identity, model_dir, device)?;
    let ran = Ran::of(&embedder);
    let mut memo = match memo {
        Some(dir) => {
            let loaded = serde_json::to_value(embedder.identity()).map_err(|e| e.to_string())?;
            Some(Memo::open(dir, &loaded, policy.name(), &ran.kernels)?)
        }
        None => None,
    };
    // (which, index): documents by their index, then every query.
    let targets: Vec<(bool, usize)> =
        chosen.iter().map(|&d| (true, d)).chain((0..texts.queries.len()).map(|q| (false, q))).collect();
    compare(&embedder, policy, texts, vectors, &targets, progress, memo.as_mut())?;
    let mut sentence = ran.sentence(identity, chosen.len(), texts.documents.len(), texts.queries.len());
    if let Some(memo) = memo {
        if memo.taken > 0 {
            sentence.push_str(&format!(
                "; {} of those vectors were this executable's own re-embedding, kept by an earlier run in {}",
                memo.taken,
                memo.path().display()
            ));
        }
        memo.save()?;
    }
    Ok(sentence)
}

/// What re-embedded: the backend, its version and the kernels, as the evidence names them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ran {
    /// The forward pass (`embedding::BACKEND`).
    pub backend: String,
    /// Its version.
    pub backend_version: String,
    /// The vector kernels it ran on (they change speed, never bits).
    pub kernels: String,
}

impl Ran {
    pub(crate) fn of(embedder: &SentenceBert) -> Ran {
        Ran {
            backend: embedder.identity().backend.clone(),
            backend_version: embedder.identity().backend_version.clone(),
            kernels: match embedder.device() {
                embedding::Device::Cpu(kernels) => format!("{kernels:?}"),
                embedding::Device::Cuda(gpu) => format!("cuda {gpu}"),
                embedding::Device::Emulated => "emulated GPU".to_owned(),
            },
        }
    }

    /// The `embedding.values` evidence of a re-embedding that found every vector equal.
    pub(crate) fn sentence(
        &self,
        identity: &Value,
        chosen: usize,
        documents: usize,
        queries: usize,
    ) -> String {
        let model = identity["model"].as_str().unwrap_or("");
        format!(
            "{chosen} of {documents} documents and all {queries} queries re-embedded with {model} by {} {} ({} kernels): every vector equal to the bit",
            self.backend, self.backend_version, self.kernels
        )
    }
}

/// Loads the model `identity` declares from `model_dir`, and requires it to be that model: its name judged
/// from the bytes, and every file that shapes a vector the declared one.
///
/// # Errors
/// Why the model could not be loaded, or how it differs from the declared one.
pub(crate) fn load(
    identity: &Value,
    model_dir: &Path,
    device: embedding::DeviceRequest,
) -> Result<SentenceBert, String> {
    let model = identity["model"].as_str().unwrap_or("");
    let weights = identity["weights_sha256"].as_str().unwrap_or("").trim_start_matches("sha256:").to_owned();
    // Loaded under its digest, not the declared name: the name is judged from the reader's bytes below, so a
    // name the evidence gives is never taken into the identity it is compared with.
    let embedder = SentenceBert::load(
        model_dir,
        &format!("{}{weights}", crate::registries::DIGEST_NAME_PREFIX),
        WeightPin::Sha256(weights.clone()),
    )
    .map_err(|e| format!("cannot load the declared model {model} (weights {weights}): {e}"))?;
    let digests: std::collections::BTreeMap<String, String> =
        embedder.digests().iter().map(|(file, digest)| (file.clone(), digest.clone())).collect();
    crate::registries::judge_name(model, &digests)
        .map_err(|reason| format!("the model in {}: {reason}", model_dir.display()))?;
    // The reader's copy must be the declared model in every file that shapes a vector, not only its weights.
    let mut loaded = serde_json::to_value(embedder.identity()).map_err(|e| e.to_string())?;
    loaded["model"] = Value::from(model);
    // An identity recorded before identities listed every file (claim v7 and earlier, for all-MiniLM-L6-v2 and
    // bare directories) is compared without them: the reader's files were judged against the name above.
    if identity.get("files").is_none()
        && let Some(fields) = loaded.as_object_mut()
    {
        fields.remove("files");
    }
    if &loaded != identity {
        let differs = loaded
            .as_object()
            .into_iter()
            .flatten()
            .chain(identity.as_object().into_iter().flatten())
            .map(|(field, _)| field)
            .find(|field| loaded.get(field.as_str()) != identity.get(field.as_str()))
            .map_or_else(String::new, |field| {
                format!(" ({field}: {} here, {} declared)", loaded[field.as_str()], identity[field.as_str()])
            });
        return Err(format!(
            "the model in {} is not the one the evidence declares{differs}",
            model_dir.display()
        ));
    }
    let mut embedder = embedder;
    embedder.use_device(device).map_err(|e| e.to_string())?;
    Ok(embedder)
}

/// Re-embeds `targets` (`(true, d)` document `d`, `(false, q)` query `q`) and compares each with the
/// evidence's vector, bit for bit. A vector `memo` holds (this executable's own, from an earlier run) stands
/// for its re-embedding; every vector computed here is kept in it.
///
/// # Errors
/// The first text whose vector differs, named, or why the model failed.
pub(crate) fn compare(
    embedder: &SentenceBert,
    policy: Policy,
    texts: &Texts,
    vectors: &Vectors,
    targets: &[(bool, usize)],
    progress: &EmbeddingProgress,
    mut memo: Option<&mut Memo>,
) -> Result<(), String> {
    let total = targets.len() as u64;
    let done = std::sync::atomic::AtomicU64::new(0);
    progress.tell(0, total);
    let tell = |n: usize| {
        let now = done.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed) + n as u64;
        progress.tell(now, total);
    };
    let checkpoint = embedder.checkpoint();
    // A part at a time, so that the prompts and the fresh vectors held are a part's, whatever the corpus.
    for part in targets.chunks(PART) {
        // Each text as it is embedded: its role, the prompt passed beside it (the checkpoint's own, under the
        // model's policy) and the text (behind the contract's prefix, under the contract's).
        let inputs: Vec<(Role, &str, String)> = part
            .iter()
            .map(|&(document, index)| {
                let (role, semantic) = if document {
                    let (_, title, text) = &texts.documents[index];
                    (Role::Document, policy.document(title, text))
                } else {
                    (Role::Query, policy.query(&texts.queries[index].1))
                };
                match policy {
                    Policy::Contract => (role, "", role.prompt(&semantic)),
                    Policy::Model => (role, checkpoint.prompt(role), semantic),
                }
            })
            .collect();
        let keys: Vec<[u8; 32]> =
            inputs.iter().map(|(role, prompt, text)| Memo::key(*role, prompt, text)).collect();
        let mut fresh: Vec<Option<Vec<f32>>> =
            keys.iter().map(|key| memo.as_deref_mut().and_then(|memo| memo.take(key))).collect();
        tell(fresh.iter().filter(|vector| vector.is_some()).count());
        // The rest embedded: the contract's texts together; the model's per role, each behind its prompt and
        // left out of the pooling when the checkpoint says so (its identity, required equal, binds them).
        let groups: Vec<(Option<Role>, Vec<usize>)> = match policy {
            Policy::Contract => vec![(None, (0..part.len()).filter(|&i| fresh[i].is_none()).collect())],
            Policy::Model => [Role::Document, Role::Query]
                .into_iter()
                .map(|role| {
                    (
                        Some(role),
                        (0..part.len()).filter(|&i| fresh[i].is_none() && inputs[i].0 == role).collect(),
                    )
                })
                .collect(),
        };
        for (role, missing) in groups.into_iter().filter(|(_, missing)| !missing.is_empty()) {
            let refs: Vec<&str> = missing.iter().map(|&i| inputs[i].2.as_str()).collect();
            let embedded = match role {
                None => embedder.embed_reporting(&refs, &tell),
                Some(role) => embedder.embed_prompted(checkpoint.prompt(role), &refs, &tell),
            }
            .map_err(|e| format!("re-embedding failed: {e}"))?;
            for (i, vector) in missing.into_iter().zip(embedded) {
                if let Some(memo) = memo.as_deref_mut() {
                    memo.keep(keys[i], &vector.vector);
                }
                fresh[i] = Some(vector.vector);
            }
        }
        for (&(document, index), fresh) in part.iter().zip(fresh) {
            let fresh = fresh.ok_or("a text was neither re-embedded nor remembered")?;
            let (id, held) = if document {
                let held =
                    vectors.document(index).map_err(|e| format!("the vectors could not be read: {e}"))?;
                (&texts.documents[index].0, held)
            } else {
                (&texts.queries[index].0, std::borrow::Cow::Borrowed(vectors.query(index)))
            };
            let what = if document { "document" } else { "query" };
            if fresh.len() != held.len() {
                return Err(format!(
                    "{what} {id:?}: {} dimensions re-embedded, {} held",
                    fresh.len(),
                    held.len()
                ));
            }
            if let Some(at) = fresh.iter().zip(held.iter()).position(|(a, b)| a.to_bits() != b.to_bits()) {
                return Err(format!(
                    "{what} {id:?}: re-embedded component {at} is {:e}, the evidence holds {:e}: not the declared model's vector",
                    fresh[at], held[at]
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_replayable_distinct_and_cover_all_when_asked() {
        let a = draw(1000, Sample::Documents(64), 42);
        assert_eq!(a, draw(1000, Sample::Documents(64), 42));
        assert_ne!(a, draw(1000, Sample::Documents(64), 43));
        assert_eq!(a.len(), 64);
        assert!(a.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
        assert_eq!(draw(10, Sample::All, 1), (0..10).collect::<Vec<_>>());
        assert_eq!(draw(10, Sample::Documents(99), 1).len(), 10);
        // A fresh seed is what keeps the signer from knowing which texts will be re-embedded: 64 of them are
        // distinct and use the high bits (all 64 below 2^50 would happen once in 8^64), below 2^53.
        let seeds: std::collections::BTreeSet<u64> = (0..64).map(|_| fresh_seed()).collect();
        assert_eq!(seeds.len(), 64);
        assert!(seeds.iter().all(|s| *s < 1 << 53) && seeds.iter().any(|s| *s >= 1 << 50));
        assert_eq!(Sample::parse("all"), Ok(Sample::All));
        assert_eq!(Sample::parse("12"), Ok(Sample::Documents(12)));
        assert!(Sample::parse("0").is_err() && Sample::parse("x").is_err());
    }
}
