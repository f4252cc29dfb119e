//! Shared helpers: a seeded PRNG, random unit vectors and throwaway stores.

use semantic_memory::{FactStore, NewFact, StoreOptions};
use tempfile::TempDir;

/// SplitMix64: small, seeded, and the same sequence everywhere.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub(crate) fn normal(&mut self) -> f64 {
        let u = self.next_f64().max(1e-300);
        let v = self.next_f64();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

pub(crate) fn unit_vector(rng: &mut Rng, dims: usize) -> Vec<f32> {
    let raw: Vec<f64> = (0..dims).map(|_| rng.normal()).collect();
    let norm = raw.iter().map(|x| x * x).sum::<f64>().sqrt();
    raw.iter().map(|x| (x / norm) as f32).collect()
}

pub(crate) fn options(dims: usize) -> StoreOptions {
    StoreOptions { dims: Some(dims), ..StoreOptions::default() }
}

pub(crate) struct TestStore {
    pub(crate) dir: TempDir,
    pub(crate) store: FactStore,
}

/// A store in a fresh temp dir holding `texts`, each with a random vector, in namespace `ns`, source `doc`.
pub(crate) fn store_with(texts: &[&str], dims: usize, seed: u64) -> TestStore {
    store_in(tempfile::tempdir().unwrap(), texts, dims, seed)
}

/// [`store_with`] in a directory the caller made (and may be watching).
pub(crate) fn store_in(dir: TempDir, texts: &[&str], dims: usize, seed: u64) -> TestStore {
    let mut store = FactStore::open(dir.path().join("facts.db"), &options(dims)).unwrap();
    let mut rng = Rng::new(seed);
    let vectors: Vec<Vec<f32>> = texts.iter().map(|_| unit_vector(&mut rng, dims)).collect();
    let metadata = serde_json::json!({"k": "v"});
    let facts: Vec<NewFact<'_>> = texts
        .iter()
        .zip(&vectors)
        .map(|(text, vector)| NewFact {
            namespace: "ns",
            source_type: "doc",
            text,
            metadata: &metadata,
            vector,
        })
        .collect();
    store.insert_facts(&facts).unwrap();
    TestStore { dir, store }
}

/// Words from a fixed synthetic vocabulary, so texts are made here and never copied from a corpus.
pub(crate) fn synthetic_text(rng: &mut Rng, words: usize) -> String {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ren", "tos", "vi", "zu", "pha", "gen", "tri", "ol", "ux", "ber", "sta", "ni",
        "qua",
    ];
    let mut text = String::new();
    for index in 0..words {
        if index > 0 {
            text.push(' ');
        }
        // Zipf-like: low word numbers are much more frequent.
        let word = ((rng.next_f64().powi(3)) * 3000.0) as usize;
        text.push_str(SYLLABLES[word % 16]);
        text.push_str(SYLLABLES[(word / 16) % 16]);
        if word >= 256 {
            text.push_str(SYLLABLES[(word / 256) % 16]);
        }
    }
    text
}
