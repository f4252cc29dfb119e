//! Zips written on the fly, a tiny BEIR corpus, and a deterministic fake embedder.

use std::cell::Cell;
use std::io::Write;
use std::path::{Path, PathBuf};

use embedding::{Embedder, EmbedderIdentity, Embedding};
use scifact_eval::{BuildOptions, DigestPolicy, Profile};
use zip::write::SimpleFileOptions;

/// A zip with these (name, bytes) members, deflated.
pub(crate) fn zip_bytes(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in members {
        writer.start_file(*name, options).unwrap();
        writer.write_all(bytes).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

pub(crate) fn write_zip(dir: &Path, members: &[(&str, &[u8])]) -> PathBuf {
    let path = dir.join("corpus.zip");
    std::fs::write(&path, zip_bytes(members)).unwrap();
    path
}

pub(crate) const CORPUS: &str = concat!(
    "{\"_id\": \"d1\", \"title\": \"Bone density\", \"text\": \"Vitamin D raises bone density.\", \"metadata\": {}}\n",
    "{\"_id\": \"d2\", \"title\": \"\", \"text\": \"Sleep helps memory.\", \"metadata\": {}}\n",
    "{\"_id\": \"d3\", \"title\": \"Only a title\", \"text\": \"\", \"metadata\": {}}\n",
    "{\"_id\": \"d4\", \"title\": \"Caf\\u00e9\", \"text\": \"Coffee and the heart.\", \"metadata\": {}}\n",
);
pub(crate) const QUERIES: &str = concat!(
    "{\"_id\": \"q1\", \"text\": \"vitamin d bones\", \"metadata\": {}}\n",
    "{\"_id\": \"q2\", \"text\": \"memory and sleep\", \"metadata\": {}}\n",
    "{\"_id\": \"q3\", \"text\": \"a train query\", \"metadata\": {}}\n",
);
pub(crate) const QRELS: &str = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq2\td3\t1\n";

pub(crate) fn mini_profile() -> Profile {
    Profile::exact("mini", 4, 2)
}

pub(crate) fn mini_archive(dir: &Path) -> PathBuf {
    write_zip(
        dir,
        &[
            ("mini/corpus.jsonl", CORPUS.as_bytes()),
            ("mini/queries.jsonl", QUERIES.as_bytes()),
            ("mini/qrels/test.tsv", QRELS.as_bytes()),
        ],
    )
}

pub(crate) fn options(archive: &Path, work: &Path, out: &Path) -> BuildOptions {
    BuildOptions {
        archive: archive.to_path_buf(),
        digest_policy: DigestPolicy::LocalRecorded,
        url: "https://example.invalid/mini.zip".into(),
        work_dir: work.to_path_buf(),
        out: out.to_path_buf(),
        profile: mini_profile(),
        batch_size: 2,
        text_policy: scifact_eval::TextPolicyKind::Contract,
        format: scifact_eval::FixtureFormat::Auto,
    }
}

/// Embeds a text as a unit vector derived from its sha256; can be told to fail after some calls.
pub(crate) struct FakeEmbedder {
    identity: EmbedderIdentity,
    pub(crate) calls: Cell<usize>,
    pub(crate) texts: Cell<usize>,
    pub(crate) fail_after_calls: Option<usize>,
    /// Every text the same vector (a model that tells nothing apart).
    pub(crate) constant: bool,
}

impl FakeEmbedder {
    pub(crate) fn new(model: &str) -> Self {
        FakeEmbedder {
            identity: EmbedderIdentity {
                model: model.into(),
                dims: 8,
                weights_sha256: Some("sha256:fake".into()),
                tokenizer_sha256: None,
                max_tokens: 256,
                pooling: "mean".into(),
                normalization: "l2".into(),
                backend: "fake".into(),
                backend_version: "1".into(),
                overlong_policy: "none".into(),
                files: None,
                prompts: None,
                lower_case: None,
            },
            calls: Cell::new(0),
            texts: Cell::new(0),
            fail_after_calls: None,
            constant: false,
        }
    }
}

impl Embedder for FakeEmbedder {
    fn identity(&self) -> &EmbedderIdentity {
        &self.identity
    }

    fn embed(&self, texts: &[&str]) -> embedding::Result<Vec<Embedding>> {
        if self.fail_after_calls.is_some_and(|limit| self.calls.get() >= limit) {
            return Err(embedding::Error::Tokenizer("simulated crash".into()));
        }
        self.calls.set(self.calls.get() + 1);
        self.texts.set(self.texts.get() + texts.len());
        Ok(texts
            .iter()
            .map(|text| {
                let hash = scifact_eval::sha256_hex(if self.constant { b"" } else { text.as_bytes() });
                let raw: Vec<f32> = hash.as_bytes()[..8].iter().map(|b| f32::from(*b) - 70.0).collect();
                let norm = raw.iter().map(|x| x * x).sum::<f32>().sqrt();
                Embedding {
                    vector: raw.iter().map(|x| x / norm).collect(),
                    tokens: text.len() / 4 + 2,
                    shortened_to: None,
                }
            })
            .collect())
    }
}
