//! A synthetic fixture written by the tests: documents from a small vocabulary, queries drawn from a target
//! document (so both lexical and vector search can find it), unit vectors, correct semantic-text digests.

use std::path::{Path, PathBuf};

use embedding::EmbedderIdentity;
use scifact_eval::{
    Counts, DigestPolicy, FIXTURE_SCHEMA, Fixture, FixtureDocument, FixtureMetadata, FixtureQrel,
    FixtureQuery, SourceMetadata, TextPolicy, document_semantic_text, query_semantic_text, sha256_hex,
};

const WORDS: &[&str] = &[
    "vitamin", "bone", "density", "sleep", "memory", "coffee", "heart", "protein", "cell", "tumor", "gene",
    "insulin", "liver", "immune", "virus", "brain", "neuron", "muscle", "blood", "pressure", "kidney",
    "lung", "enzyme", "receptor", "mouse", "trial", "dose", "risk", "cancer", "therapy", "signal", "pathway",
];

/// A small deterministic generator (SplitMix64).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn unit_vector(raw: &[f64]) -> Vec<f64> {
    let raw32: Vec<f32> = raw.iter().map(|x| *x as f32).collect();
    let norm = raw32.iter().map(|x| x * x).sum::<f32>().sqrt();
    raw32.iter().map(|x| f64::from(x / norm)).collect()
}

/// A fixture with `documents` documents and `queries` queries of dimension `dims`.
pub(crate) fn synthetic_fixture(documents: usize, queries: usize, dims: usize, seed: u64) -> Fixture {
    let mut rng = Rng::new(seed);
    let mut docs = Vec::with_capacity(documents);
    let mut raw_vectors = Vec::with_capacity(documents);
    for i in 0..documents {
        let words: Vec<&str> = (0..12).map(|_| WORDS[rng.below(WORDS.len())]).collect();
        let title = if i % 5 == 0 { String::new() } else { words[..2].join(" ") };
        let text = words[2..].join(" ");
        let raw: Vec<f64> = (0..dims).map(|_| rng.unit() - 0.5).collect();
        let (semantic, _) = document_semantic_text(&title, &text);
        docs.push(FixtureDocument {
            id: format!("{}", 1000 + i * 3),
            title,
            text,
            semantic_text_sha256: sha256_hex(semantic.as_bytes()),
            tokens: 14,
            vector: unit_vector(&raw),
        });
        raw_vectors.push(raw);
    }
    let mut fixture_queries = Vec::with_capacity(queries);
    let mut qrels = Vec::new();
    for q in 0..queries {
        let target = rng.below(documents);
        let words: Vec<&str> = docs[target].text.split(' ').take(4).collect();
        let text = format!("does {} matter?", words.join(" "));
        let raw: Vec<f64> = raw_vectors[target].iter().map(|x| x + (rng.unit() - 0.5) * 0.6).collect();
        let id = format!("{}", q * 2 + 1);
        qrels.push(FixtureQrel { query_id: id.clone(), doc_id: docs[target].id.clone(), score: 1 });
        if q % 3 == 0 {
            let other = rng.below(documents);
            if other != target {
                qrels.push(FixtureQrel { query_id: id.clone(), doc_id: docs[other].id.clone(), score: 2 });
            }
        }
        let (semantic, _) = query_semantic_text(&text);
        fixture_queries.push(FixtureQuery {
            id,
            text,
            semantic_text_sha256: sha256_hex(semantic.as_bytes()),
            tokens: 8,
            vector: unit_vector(&raw),
        });
    }
    Fixture {
        schema: FIXTURE_SCHEMA.into(),
        metadata: FixtureMetadata {
            builder: "tests".into(),
            profile: "synthetic".into(),
            qrels_split: None,
            fixture_format: None,
            registered: None,
            source: SourceMetadata {
                url: "https://example.invalid/synthetic.zip".into(),
                archive_file: "synthetic.zip".into(),
                archive_sha256: "00".repeat(32),
                archive_md5: "00".repeat(16),
                archive_bytes: 0,
                digest_policy: DigestPolicy::LocalRecorded,
                payload_sha256: Default::default(),
            },
            embedding: EmbedderIdentity {
                model: "synthetic".into(),
                dims,
                weights_sha256: None,
                tokenizer_sha256: None,
                max_tokens: 256,
                pooling: "mean".into(),
                normalization: "l2".into(),
                backend: "synthetic".into(),
                backend_version: "1".into(),
                overlong_policy: "none".into(),
                files: None,
                prompts: None,
                lower_case: None,
            },
            text_policy: TextPolicy {
                policy: None,
                max_semantic_chars: 700,
                joiner: ". ".into(),
                document_prefix: "search_document: ".into(),
                query_prefix: "search_query: ".into(),
                documents_cut: 0,
                queries_cut: 0,
                prompts_shortened: 0,
            },
            counts: Counts { documents, queries, qrels: qrels.len() },
        },
        documents: docs,
        queries: fixture_queries,
        qrels,
    }
}

/// Writes `fixture` as JSON to `dir/fixture.json`.
pub(crate) fn write_fixture(dir: &Path, fixture: &Fixture) -> PathBuf {
    let path = dir.join("fixture.json");
    std::fs::write(&path, serde_json::to_vec(fixture).unwrap()).unwrap();
    path
}
