//! Embeddings, recomputed: texts drawn from randomness the signer cannot predict, embedded again with the
//! declared model by this build's forward pass, and required to equal the evidence's vectors bit for bit.
//!
//! The forward pass gives a text the same bits whatever its batch, companions, threads or vector kernels, so
//! anything looser than equality would hide a swapped vector. The draw is printed as a seed, so a second
//! person can replay exactly the same sample.

use std::path::Path;

use embedding::{Embedder, MiniLm, Role, WeightPin};
use serde_json::Value;

use crate::recompute::statistics::Stream;
use crate::texts::{Texts, semantic_document, semantic_query};
use crate::vectors::Vectors;

/// Texts re-embedded when no sample size is given: documents and queries drawn together.
pub const EMBEDDING_SAMPLE: usize = 64;

/// How many texts to re-embed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sample {
    /// This many, drawn without replacement from every document and query.
    Count(usize),
    /// Every document and query.
    All,
}

impl Sample {
    /// Reads `N` or `all`.
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
            .map(Sample::Count)
            .ok_or_else(|| format!("{text:?} is neither a positive count nor `all`"))
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

/// The indexes drawn from `population` (documents first, then queries): a partial Fisher-Yates shuffle driven
/// by SplitMix64 from `seed`, sorted.
pub(crate) fn draw(population: usize, sample: Sample, seed: u64) -> Vec<usize> {
    let n = match sample {
        Sample::All => population,
        Sample::Count(n) => n.min(population),
    };
    let mut order: Vec<usize> = (0..population).collect();
    let mut stream = Stream::new(seed);
    for i in 0..n {
        let j = i + stream.below((population - i) as u64);
        order.swap(i, j);
    }
    order.truncate(n);
    order.sort_unstable();
    order
}

/// Re-embeds the drawn texts with the model `identity` declares, from `model_dir`, and compares bits.
///
/// # Errors
/// The first text whose semantic digest or vector differs, or why the model could not run.
pub(crate) fn recheck(
    identity: &Value,
    model_dir: &Path,
    texts: &Texts,
    vectors: &Vectors,
    chosen: &[usize],
) -> Result<String, String> {
    let model = identity["model"].as_str().unwrap_or("");
    let weights = identity["weights_sha256"].as_str().unwrap_or("").trim_start_matches("sha256:").to_owned();
    let embedder = MiniLm::load(model_dir, model, WeightPin::Sha256(weights.clone()))
        .map_err(|e| format!("cannot load the declared model {model} (weights {weights}): {e}"))?;
    let documents = texts.documents.len();
    let mut prompts = Vec::with_capacity(chosen.len());
    for &index in chosen {
        prompts.push(if index < documents {
            let (_, title, text) = &texts.documents[index];
            Role::Document.prompt(&semantic_document(title, text))
        } else {
            Role::Query.prompt(&semantic_query(&texts.queries[index - documents].1))
        });
    }
    let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let embedded = embedder.embed(&refs).map_err(|e| format!("re-embedding failed: {e}"))?;
    let (mut docs, mut queries) = (0, 0);
    for (&index, fresh) in chosen.iter().zip(&embedded) {
        let (id, held) = if index < documents {
            docs += 1;
            (&texts.documents[index].0, vectors.document(index))
        } else {
            queries += 1;
            (&texts.queries[index - documents].0, vectors.query(index - documents))
        };
        if fresh.vector.len() != held.len() {
            return Err(format!(
                "{id:?}: {} dimensions re-embedded, {} held",
                fresh.vector.len(),
                held.len()
            ));
        }
        if let Some(at) = fresh.vector.iter().zip(held).position(|(a, b)| a.to_bits() != b.to_bits()) {
            return Err(format!(
                "{id:?}: re-embedded component {at} is {:e}, the evidence holds {:e}: not the declared model's vector",
                fresh.vector[at], held[at]
            ));
        }
    }
    Ok(format!(
        "{docs} documents and {queries} queries re-embedded with {model} by {} {} ({:?} kernels): every vector equal to the bit",
        embedder.identity().backend,
        embedder.identity().backend_version,
        embedder.kernels()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_replayable_distinct_and_cover_all_when_asked() {
        let a = draw(1000, Sample::Count(64), 42);
        assert_eq!(a, draw(1000, Sample::Count(64), 42));
        assert_ne!(a, draw(1000, Sample::Count(64), 43));
        assert_eq!(a.len(), 64);
        assert!(a.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
        assert_eq!(draw(10, Sample::All, 1), (0..10).collect::<Vec<_>>());
        assert_eq!(draw(10, Sample::Count(99), 1).len(), 10);
        // A fresh seed is what keeps the signer from knowing which texts will be re-embedded: 64 of them are
        // distinct and use the high bits (all 64 below 2^50 would happen once in 8^64), below 2^53.
        let seeds: std::collections::BTreeSet<u64> = (0..64).map(|_| fresh_seed()).collect();
        assert_eq!(seeds.len(), 64);
        assert!(seeds.iter().all(|s| *s < 1 << 53) && seeds.iter().any(|s| *s >= 1 << 50));
        assert_eq!(Sample::parse("all"), Ok(Sample::All));
        assert_eq!(Sample::parse("12"), Ok(Sample::Count(12)));
        assert!(Sample::parse("0").is_err() && Sample::parse("x").is_err());
    }
}
