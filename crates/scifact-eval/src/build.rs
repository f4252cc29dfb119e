//! `build_fixture`: archive -> safety checks -> BEIR parse and shape gate -> semantic text -> embeddings
//! through the cache -> vector checks -> fixture, written atomically.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use embedding::{Embedder, Role};

use crate::archive::{Dataset, hex, sha256_hex};
use crate::beir::{
    BeirCorpus, Profile, QRELS_SPLITS, assemble, parse_corpus_from, parse_qrels_from, parse_queries_from,
};
use crate::cache::{CachedVector, EmbeddingCache, Held};
use crate::error::{Error, Result};
use crate::fixture::{
    Counts, DigestPolicy, FIXTURE_SCHEMA, FIXTURE_SCHEMA_V2, Fixture, FixtureDocument, FixtureFormat,
    FixtureHead, FixtureMetadata, FixtureQrel, FixtureQuery, QueryLine, Sidecar, SourceMetadata, TextPolicy,
};
use crate::shard::{Shard, ShardBinding};
use crate::text::TextPolicyKind;
use sha2::{Digest, Sha256};

/// BEIR's SciFact download.
pub const SCIFACT_URL: &str =
    "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip";

/// Where progress goes; the library never prints.
pub trait Progress {
    /// A stage with `total` steps begins.
    fn start(&self, stage: &str, total: u64);
    /// `steps` more steps are done.
    fn advance(&self, steps: u64);
    /// `steps` steps were already done before this process started (cached, stored, answered): they count
    /// towards the total but not towards the rate or the time left.
    fn skip(&self, steps: u64);
    /// The stage is over.
    fn finish(&self);
}

/// Progress that goes nowhere.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn skip(&self, _: u64) {}
    fn finish(&self) {}
}

/// What to build.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// The archive on disk.
    pub archive: PathBuf,
    /// How it was admitted.
    pub digest_policy: DigestPolicy,
    /// Its published URL.
    pub url: String,
    /// Where the embedding cache lives.
    pub work_dir: PathBuf,
    /// The fixture to write.
    pub out: PathBuf,
    /// The shape gate.
    pub profile: Profile,
    /// Which text policy builds the semantic texts and prompts (the contract's by default).
    pub text_policy: TextPolicyKind,
    /// Texts per embedder call (and per fsync'd cache append).
    pub batch_size: usize,
    /// Which fixture layout to write.
    pub format: FixtureFormat,
}

/// What a build did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildSummary {
    /// Counts written.
    pub counts: Counts,
    /// Documents and queries whose semantic text was cut at 700 chars.
    pub documents_cut: usize,
    /// Queries cut.
    pub queries_cut: usize,
    /// Vectors found in the cache.
    pub cache_hits: usize,
    /// Vectors embedded in this run.
    pub embedded: usize,
    /// Bytes of a torn cache tail that were dropped on open.
    pub dropped_cache_tail_bytes: usize,
    /// sha256 (hex) of the fixture file.
    pub fixture_sha256: String,
    /// Wall time.
    pub elapsed: Duration,
}

/// A text's two digests; the text itself is made again from the corpus when it is embedded, so a million
/// of them are never held twice.
struct Item {
    semantic_sha256: String,
    /// The cache key: sha256 (hex) of the prompt, prefix and semantic text.
    key: String,
}

/// One role's texts: its prompt and, by position, each semantic text (made again from the corpus under the
/// policy when it is embedded) and id.
struct Texts<'a> {
    role: Role,
    prefix: &'a str,
    corpus: &'a crate::beir::BeirCorpus,
    policy: TextPolicyKind,
}

impl<'a> Texts<'a> {
    /// The semantic text at `i`.
    fn semantic(&self, i: usize) -> String {
        match self.role {
            Role::Document => {
                let document = &self.corpus.documents[i];
                self.policy.document(&document.title, &document.text).0
            }
            Role::Query => self.policy.query(&self.corpus.test_queries[i].text).0,
        }
    }

    /// The BEIR id at `i`.
    fn id(&self, i: usize) -> &'a str {
        match self.role {
            Role::Document => &self.corpus.documents[i].id,
            Role::Query => &self.corpus.test_queries[i].id,
        }
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Document => "document",
        Role::Query => "query",
    }
}

/// Every member a dataset folder in BEIR's layout may hold: the folder, its three files, `qrels/` and each
/// split's judgements.
fn beir_members(folder: &str) -> Vec<String> {
    let mut members = vec![
        format!("{folder}/"),
        format!("{folder}/corpus.jsonl"),
        format!("{folder}/queries.jsonl"),
        format!("{folder}/qrels/"),
    ];
    members.extend(QRELS_SPLITS.iter().map(|split| format!("{folder}/qrels/{split}.tsv")));
    members
}

/// The folders above a forum's (`cqadupstack/` above `cqadupstack/android`), which a zip may list.
fn parent_folders(folder: &str) -> Vec<String> {
    folder.match_indices('/').map(|(at, _)| format!("{}/", &folder[..at])).collect()
}

/// An archive read for a build: its corpus, where it came from, and each text's digests and prompt.
struct Read {
    corpus: crate::beir::BeirCorpus,
    source: SourceMetadata,
    documents: Vec<Item>,
    queries: Vec<Item>,
    documents_cut: usize,
    queries_cut: usize,
    document_prefix: String,
    query_prefix: String,
}

/// Reads a BEIR dataset, a zip or a dataset directory, as `profile` says it is laid out and shaped: every member
/// checked and streamed (one line held at a time), the corpus assembled and gated; with the digests read.
///
/// # Errors
/// As [`Dataset::open_archive`], [`Dataset::stream`], the parsers and [`assemble`].
pub fn read_corpus(archive: &Path, profile: &Profile) -> Result<(BeirCorpus, crate::DatasetDigests)> {
    let prefix = &profile.name;
    let corpus_member = format!("{prefix}/corpus.jsonl");
    let queries_member = format!("{prefix}/queries.jsonl");
    let split = &profile.split;
    let qrels_member = format!("{prefix}/qrels/{split}.tsv");
    let allowed: Vec<String> = std::iter::once(prefix)
        .chain(&profile.siblings)
        .flat_map(|folder| beir_members(folder))
        .chain(parent_folders(prefix))
        .filter(|name| *name != qrels_member)
        .collect();
    let wanted = [corpus_member.as_str(), queries_member.as_str(), qrels_member.as_str()];
    let allowed: Vec<&str> = allowed.iter().map(String::as_str).collect();
    let mut dataset = if archive.is_dir() {
        Dataset::open_directory(archive, prefix)
    } else {
        Dataset::open_archive(archive, &wanted, &allowed)?
    };
    // Every member streams, one line held at a time under the line cap (msmarco's corpus is 3.2 GB).
    let documents = dataset.stream(&corpus_member, |reader| parse_corpus_from(&corpus_member, reader))?;
    let queries = dataset.stream(&queries_member, |reader| parse_queries_from(&queries_member, reader))?;
    let qrels = dataset.stream(&qrels_member, |reader| parse_qrels_from(&qrels_member, reader))?;
    let corpus = assemble(profile, documents, queries, qrels)?;
    Ok((corpus, dataset.finish()))
}

/// Reads and checks the archive, and makes each text's digests under the text policy.
fn read(options: &BuildOptions, embedder: &dyn Embedder) -> Result<Read> {
    let (corpus, digests) = read_corpus(&options.archive, &options.profile)?;
    let source = SourceMetadata {
        url: options.url.clone(),
        archive_file: file_name(&options.archive),
        archive_sha256: digests.sha256,
        archive_md5: digests.md5,
        archive_bytes: digests.bytes,
        digest_policy: options.digest_policy.clone(),
        payload_sha256: digests.members,
    };

    let policy = options.text_policy;
    let prefix_of = |role: Role| match policy {
        TextPolicyKind::Contract => role.prefix().to_owned(),
        TextPolicyKind::Model => embedder.declared_prompt(role),
    };
    let (document_prefix, query_prefix) = (prefix_of(Role::Document), prefix_of(Role::Query));
    let item = |(semantic, _): &(String, bool), prefix: &str| Item {
        semantic_sha256: sha256_hex(semantic.as_bytes()),
        key: prompt_key(prefix, semantic),
    };
    let mut documents_cut = 0;
    let documents: Vec<Item> = corpus
        .documents
        .iter()
        .map(|d| {
            let semantic = policy.document(&d.title, &d.text);
            documents_cut += usize::from(semantic.1);
            item(&semantic, &document_prefix)
        })
        .collect();
    let mut queries_cut = 0;
    let queries: Vec<Item> = corpus
        .test_queries
        .iter()
        .map(|q| {
            let semantic = policy.query(&q.text);
            queries_cut += usize::from(semantic.1);
            item(&semantic, &query_prefix)
        })
        .collect();
    Ok(Read { corpus, source, documents, queries, documents_cut, queries_cut, document_prefix, query_prefix })
}

/// What a shard of a build did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSummary {
    /// The slice.
    pub shard: Shard,
    /// The positions of the documents it embeds.
    pub documents: std::ops::Range<usize>,
    /// The positions of the test queries it embeds.
    pub queries: std::ops::Range<usize>,
    /// Documents and queries in the whole dataset.
    pub counts: Counts,
    /// Vectors of its slice found in its cache.
    pub cache_hits: usize,
    /// Vectors embedded in this run.
    pub embedded: usize,
    /// Bytes of a torn cache tail that were dropped on open.
    pub dropped_cache_tail_bytes: usize,
    /// Its cache file.
    pub cache: PathBuf,
    /// Wall time.
    pub elapsed: Duration,
}

/// Embeds one shard's slice of the texts ([`Shard::slice`]) into its own resumable cache under the work
/// directory ([`Shard::dir`]), bound to the archive, model, text policy and slice. A build without a shard,
/// once every shard is complete, finds all their vectors and writes the fixture an unsharded build writes.
///
/// # Errors
/// As [`build_fixture`] up to the embedding, and [`Error::Cache`] when the shard's cache is bound to another
/// archive, dataset, chunking or model.
pub fn build_shard(
    options: &BuildOptions,
    shard: Shard,
    embedder: &dyn Embedder,
    progress: &dyn Progress,
) -> Result<ShardSummary> {
    let started = Instant::now();
    let read = read(options, embedder)?;
    let policy = options.text_policy;
    let binding = shard_binding(options, &read.source, shard);
    let dir = shard.dir(&options.work_dir, &options.profile.name, &options.profile.split);
    std::fs::create_dir_all(&dir).map_err(|source| Error::Io { path: dir.clone(), source })?;
    let cache_path = dir.join(crate::cache::cache_file_name_for(embedder.identity(), policy));
    let (mut cache, report) = EmbeddingCache::open_bound(&cache_path, embedder.identity(), Some(&binding))?;
    let before = report.loaded;
    let (documents, queries) = shard.slice(read.documents.len(), read.queries.len(), options.batch_size);
    let embed = Embed { embedder, policy, batch_size: options.batch_size };
    let corpus = &read.corpus;
    let document_role = Texts { role: Role::Document, prefix: &read.document_prefix, corpus, policy };
    let query_role = Texts { role: Role::Query, prefix: &read.query_prefix, corpus, policy };
    embed_all(&mut cache, &embed, &document_role, &read.documents, documents.clone(), progress)?;
    embed_all(&mut cache, &embed, &query_role, &read.queries, queries.clone(), progress)?;
    let embedded = cache.len() - before;
    Ok(ShardSummary {
        shard,
        cache_hits: documents.len() + queries.len() - embedded,
        documents,
        queries,
        counts: Counts {
            documents: corpus.documents.len(),
            queries: corpus.test_queries.len(),
            qrels: corpus.qrels.len(),
        },
        embedded,
        dropped_cache_tail_bytes: report.dropped_tail_bytes,
        cache: cache_path,
        elapsed: started.elapsed(),
    })
}

/// What a shard's cache of this build is bound to.
fn shard_binding(options: &BuildOptions, source: &SourceMetadata, shard: Shard) -> ShardBinding {
    ShardBinding {
        archive_sha256: source.archive_sha256.clone(),
        dataset: options.profile.name.clone(),
        split: options.profile.split.clone(),
        batch_size: options.batch_size,
        shard,
    }
}

/// The shards of this build found under the work directory: each shard directory holding a cache of this
/// model and text policy, locked (a shard still running is refused by name) and opened to be read from.
fn open_shards(
    options: &BuildOptions,
    source: &SourceMetadata,
    embedder: &dyn Embedder,
) -> Result<Vec<(Shard, EmbeddingCache, safe_fs::DirLock)>> {
    let dir = crate::shard::shards_dir(&options.work_dir, &options.profile.name, &options.profile.split);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(Error::Io { path: dir, source }),
    };
    let file = crate::cache::cache_file_name_for(embedder.identity(), options.text_policy);
    let mut shards = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Io { path: dir.clone(), source })?;
        let shard = match entry.file_name().to_str().and_then(Shard::from_dir_name) {
            None => continue,
            Some(Ok(shard)) => shard,
            Some(Err(reason)) => {
                return Err(Error::Shards {
                    dir: dir.clone(),
                    reason: format!("{reason}: remove {}", entry.path().display()),
                });
            }
        };
        let path = entry.path().join(&file);
        if !path.exists() {
            continue;
        }
        let lock = safe_fs::lock_dir(
            &entry.path(),
            "scifact-audit build (merging shards)",
            safe_fs::Contention::Refuse,
            &|_| {},
        )
        .map_err(|error| match error {
            safe_fs::Error::Locked { holder, .. } => Error::Shards {
                dir: dir.clone(),
                reason: format!("shard {shard} is still being embedded by {holder}; wait for it to finish"),
            },
            other => Error::File(other),
        })?;
        let binding = shard_binding(options, source, shard);
        let (cache, _) = EmbeddingCache::open_bound(&path, embedder.identity(), Some(&binding))?;
        shards.push((shard, cache, lock));
    }
    shards.sort_by_key(|(shard, _, _)| (shard.count, shard.index));
    Ok(shards)
}

/// Refuses a merge that would leave texts to embed here: names each shard whose slice is absent or short.
fn refuse_incomplete_shards(
    options: &BuildOptions,
    cache: &EmbeddingCache,
    found: &[Shard],
    read: &Read,
) -> Result<()> {
    let missing = |items: &[Item], role: Role, range: std::ops::Range<usize>| {
        items[range].iter().filter(|item| cache.get(role, &item.key).is_none()).count()
    };
    let (documents, queries) = (read.documents.len(), read.queries.len());
    let total = missing(&read.documents, Role::Document, 0..documents)
        + missing(&read.queries, Role::Query, 0..queries);
    if total == 0 {
        return Ok(());
    }
    let counts: std::collections::BTreeSet<usize> = found.iter().map(|shard| shard.count).collect();
    let batch = options.batch_size.max(1);
    let chunks = documents.div_ceil(batch) + queries.div_ceil(batch);
    let mut short = Vec::new();
    for &count in &counts {
        // Only the slices that hold a chunk can lack a text: a merge never walks the empty ones of a large count.
        let holding: std::collections::BTreeSet<usize> =
            (0..chunks).map(|chunk| Shard::of_chunk(chunk, count, chunks).index).collect();
        for index in holding {
            let shard = Shard { index, count };
            let (d, q) = shard.slice(documents, queries, options.batch_size);
            let size = d.len() + q.len();
            let lacking =
                missing(&read.documents, Role::Document, d) + missing(&read.queries, Role::Query, q);
            if lacking == 0 {
                continue;
            }
            short.push(if found.contains(&shard) {
                format!("shard {shard} has {} of its {size} texts", size - lacking)
            } else {
                format!("shard {shard} is absent ({size} texts)")
            });
        }
    }
    let dir = crate::shard::shards_dir(&options.work_dir, &options.profile.name, &options.profile.split);
    Err(Error::Shards {
        reason: format!(
            "{total} of {} texts are in no shard's cache: {}. Run each with `build --shard I/N` and the same flags, \
             or remove {} to embed everything in one process",
            documents + queries,
            if short.is_empty() {
                "the shards were made with other chunks".to_owned()
            } else {
                short.join("; ")
            },
            dir.display()
        ),
        dir,
    })
}

/// Builds the fixture. Shards of this build found under the work directory ([`build_shard`]) are read
/// from, and must then hold every text: a merge never embeds what a shard left out.
///
/// # Errors
/// Any refusal of the archive, parse error, shape error, cache error, embedding or vector failure, and
/// [`Error::Shards`] when shards are found and leave texts out; the fixture is only written (atomically)
/// when everything succeeded.
pub fn build_fixture(
    options: &BuildOptions,
    embedder: &dyn Embedder,
    progress: &dyn Progress,
) -> Result<BuildSummary> {
    let started = Instant::now();
    let read = read(options, embedder)?;
    let policy = options.text_policy;
    let split = &options.profile.split;
    std::fs::create_dir_all(&options.work_dir)
        .map_err(|source| Error::Io { path: options.work_dir.clone(), source })?;
    let cache_path = options.work_dir.join(crate::cache::cache_file_name_for(embedder.identity(), policy));
    let (cache, report) = EmbeddingCache::open(&cache_path, embedder.identity())?;
    let shards = open_shards(options, &read.source, embedder)?;
    let found: Vec<Shard> = shards.iter().map(|(shard, _, _)| *shard).collect();
    let (caches, _locks): (Vec<EmbeddingCache>, Vec<safe_fs::DirLock>) =
        shards.into_iter().map(|(_, cache, lock)| (cache, lock)).unzip();
    let mut cache = cache.reading_also(caches);
    if !found.is_empty() {
        refuse_incomplete_shards(options, &cache, &found, &read)?;
    }
    let Read {
        corpus,
        source,
        documents,
        queries,
        documents_cut,
        queries_cut,
        document_prefix,
        query_prefix,
    } = read;
    let before = report.loaded;
    let embed = Embed { embedder, policy, batch_size: options.batch_size };
    let document_role = Texts { role: Role::Document, prefix: &document_prefix, corpus: &corpus, policy };
    let query_role = Texts { role: Role::Query, prefix: &query_prefix, corpus: &corpus, policy };
    embed_all(&mut cache, &embed, &document_role, &documents, 0..documents.len(), progress)?;
    embed_all(&mut cache, &embed, &query_role, &queries, 0..queries.len(), progress)?;
    let embedded = cache.len() - before;
    let cache_hits = documents.len() + queries.len() - embedded;
    let held_documents = held(&cache, &document_role, &documents)?;
    refuse_identical_documents(&cache, &documents)?;
    let held_queries = held(&cache, &query_role, &queries)?;

    let prompts_shortened =
        held_documents.iter().chain(&held_queries).filter(|v| v.shortened_to.is_some()).count();
    let counts = Counts {
        documents: corpus.documents.len(),
        queries: corpus.test_queries.len(),
        qrels: corpus.qrels.len(),
    };
    let v2 = options.format.writes_v2(counts.documents);
    let metadata = FixtureMetadata {
        builder: format!("scifact-audit {}", env!("CARGO_PKG_VERSION")),
        profile: options.profile.name.clone(),
        qrels_split: (split != "test").then(|| split.clone()),
        fixture_format: v2.then_some(2),
        registered: (!options.profile.registered).then_some(false),
        source,
        embedding: embedder.identity().clone(),
        text_policy: TextPolicy {
            policy: (policy == TextPolicyKind::Model).then_some(policy),
            max_semantic_chars: policy.max_semantic_chars(),
            joiner: policy.joiner().into(),
            document_prefix,
            query_prefix,
            documents_cut,
            queries_cut,
            prompts_shortened,
        },
        counts,
    };
    let qrels: Vec<FixtureQrel> = corpus
        .qrels
        .iter()
        .map(|q| FixtureQrel { query_id: q.query_id.clone(), doc_id: q.doc_id.clone(), score: q.score })
        .collect();
    if let Some(parent) = options.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| Error::Io { path: parent.to_path_buf(), source })?;
    }
    let built = Built {
        corpus: &corpus,
        documents: &documents,
        queries: &queries,
        held_documents,
        held_queries,
        cache: &cache,
    };
    let bytes = if v2 {
        built.write_v2(&options.out, metadata, qrels)?
    } else {
        serde_json::to_vec(&built.v1(metadata, qrels)?)?
    };
    safe_fs::halt::point("build.fixture");
    safe_fs::write_atomically(&options.out, &bytes)?;
    Ok(BuildSummary {
        counts,
        documents_cut,
        queries_cut,
        cache_hits,
        embedded,
        dropped_cache_tail_bytes: report.dropped_tail_bytes,
        fixture_sha256: sha256_hex(&bytes),
        elapsed: started.elapsed(),
    })
}

/// The cache key of a text behind its prompt: sha256 (hex) of the whole prompt.
fn prompt_key(prefix: &str, semantic: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prefix.as_bytes());
    hasher.update(semantic.as_bytes());
    hex(&hasher.finalize())
}

/// Everything a build made, before it is written in either layout.
struct Built<'a> {
    corpus: &'a crate::beir::BeirCorpus,
    documents: &'a [Item],
    queries: &'a [Item],
    held_documents: Vec<&'a Held>,
    held_queries: Vec<&'a Held>,
    /// Where the vectors are read from, one at a time.
    cache: &'a EmbeddingCache,
}

impl Built<'_> {
    /// The vector of `item` in `role`, read back from the cache.
    fn vector(&self, role: Role, item: &Item) -> Result<Vec<f32>> {
        self.cache.vector(role, &item.key)?.ok_or_else(|| Error::InvalidVector {
            role: role_name(role),
            id: item.key.clone(),
            reason: "missing from the cache after embedding".into(),
        })
    }

    /// The version 1 fixture: one document.
    fn v1(&self, metadata: FixtureMetadata, qrels: Vec<FixtureQrel>) -> Result<Fixture> {
        let widen = |role: Role, item: &Item| -> Result<Vec<f64>> {
            Ok(self.vector(role, item)?.iter().map(|x| f64::from(*x)).collect())
        };
        Ok(Fixture {
            schema: FIXTURE_SCHEMA.into(),
            metadata,
            documents: self
                .corpus
                .documents
                .iter()
                .zip(self.documents)
                .zip(&self.held_documents)
                .map(|((d, item), v)| {
                    Ok(FixtureDocument {
                        id: d.id.clone(),
                        title: d.title.clone(),
                        text: d.text.clone(),
                        semantic_text_sha256: item.semantic_sha256.clone(),
                        tokens: v.tokens,
                        vector: widen(Role::Document, item)?,
                    })
                })
                .collect::<Result<_>>()?,
            queries: self
                .corpus
                .test_queries
                .iter()
                .zip(self.queries)
                .zip(&self.held_queries)
                .map(|((q, item), v)| {
                    Ok(FixtureQuery {
                        id: q.id.clone(),
                        text: q.text.clone(),
                        semantic_text_sha256: item.semantic_sha256.clone(),
                        tokens: v.tokens,
                        vector: widen(Role::Query, item)?,
                    })
                })
                .collect::<Result<_>>()?,
            qrels,
        })
    }

    /// Writes a version 2 fixture's documents and vectors beside `out` (each streamed to a temp file, synced
    /// and renamed) and returns the bytes of its JSON file, which binds them and is written last.
    fn write_v2(&self, out: &Path, metadata: FixtureMetadata, qrels: Vec<FixtureQrel>) -> Result<Vec<u8>> {
        let stem =
            out.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "fixture".into());
        let directory = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or_else(|| Path::new("."));
        let mut lines = SidecarWriter::create(directory, format!("{stem}.documents.jsonl"))?;
        for ((d, item), v) in self.corpus.documents.iter().zip(self.documents).zip(&self.held_documents) {
            let line = LineRef {
                id: &d.id,
                title: &d.title,
                text: &d.text,
                semantic_text_sha256: &item.semantic_sha256,
                tokens: v.tokens,
            };
            let mut bytes = serde_json::to_vec(&line)?;
            bytes.push(b'\n');
            lines.write(&bytes)?;
        }
        let documents_file = lines.commit()?;
        let mut vectors = SidecarWriter::create(directory, format!("{stem}.vectors.f32"))?;
        let items = self.documents.iter().map(|item| (Role::Document, item));
        for (role, item) in items.chain(self.queries.iter().map(|item| (Role::Query, item))) {
            let bytes: Vec<u8> = self.vector(role, item)?.iter().flat_map(|x| x.to_le_bytes()).collect();
            vectors.write(&bytes)?;
        }
        let vectors_file = vectors.commit()?;
        let head = FixtureHead {
            schema: FIXTURE_SCHEMA_V2.into(),
            metadata,
            documents_file,
            vectors_file,
            queries: self
                .corpus
                .test_queries
                .iter()
                .zip(self.queries)
                .zip(&self.held_queries)
                .map(|((q, item), v)| QueryLine {
                    id: q.id.clone(),
                    text: q.text.clone(),
                    semantic_text_sha256: item.semantic_sha256.clone(),
                    tokens: v.tokens,
                })
                .collect(),
            qrels,
        };
        Ok(serde_json::to_vec(&head)?)
    }
}

/// A document line, borrowed ([`crate::fixture::DocumentLine`]'s fields, in its order).
#[derive(serde::Serialize)]
struct LineRef<'a> {
    id: &'a str,
    title: &'a str,
    text: &'a str,
    semantic_text_sha256: &'a str,
    tokens: usize,
}

/// A file of a version 2 fixture being written: its bytes counted and hashed on the way.
struct SidecarWriter {
    file: String,
    writer: safe_fs::AtomicWriter,
    hasher: Sha256,
    bytes: u64,
}

impl SidecarWriter {
    fn create(directory: &Path, file: String) -> Result<SidecarWriter> {
        let writer = safe_fs::AtomicWriter::create(&directory.join(&file))?;
        Ok(SidecarWriter { file, writer, hasher: Sha256::new(), bytes: 0 })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.hasher.update(bytes);
        self.bytes += bytes.len() as u64;
        Ok(self.writer.write(bytes)?)
    }

    fn commit(self) -> Result<Sidecar> {
        self.writer.commit()?;
        let sha256 = hex(&self.hasher.finalize());
        Ok(Sidecar { file: self.file, sha256, bytes: self.bytes })
    }
}

/// Every item's vector, from the cache, in order.
fn held<'c>(cache: &'c EmbeddingCache, texts: &Texts<'_>, items: &[Item]) -> Result<Vec<&'c Held>> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            cache.get(texts.role, &item.key).ok_or_else(|| Error::InvalidVector {
                role: role_name(texts.role),
                id: texts.id(i).to_owned(),
                reason: "missing from the cache after embedding".into(),
            })
        })
        .collect()
}

/// Refuses a corpus whose document vectors are all the same bits: the model saw no difference between the
/// texts (a tokenizer with no vocabulary, a window the special tokens fill), so every ranking would be a tie
/// broken by id and every metric would measure nothing.
fn refuse_identical_documents(cache: &EmbeddingCache, documents: &[Item]) -> Result<()> {
    let mut items = documents.iter();
    let (Some(first), Some(_)) = (items.next(), documents.get(1)) else { return Ok(()) };
    let first = cache.vector(Role::Document, &first.key)?;
    for item in items {
        if cache.vector(Role::Document, &item.key)? != first {
            return Ok(());
        }
    }
    Err(Error::InvalidVector {
        role: "document",
        id: "(every one)".into(),
        reason: format!(
            "all {} document vectors are the same bits: the model tells none of the texts apart (a tokenizer \
             with no vocabulary, or a window its special tokens or prompt fill), so nothing could be ranked",
            documents.len()
        ),
    })
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// How texts go through the model: the embedder, the policy (under the model's, each prompt goes to the model
/// apart from its text) and the texts per call.
struct Embed<'a> {
    embedder: &'a dyn Embedder,
    policy: TextPolicyKind,
    batch_size: usize,
}

/// Embeds every item of `range` not in the cache. Items are embedded in
/// fixed chunks of `batch_size` by position, each appended and fsync'd before the next, and a chunk with any
/// item missing is embedded whole: every text always shares a model call with the same companions, so a
/// build resumed after a crash embeds exactly what an uninterrupted one does. Every vector is checked.
fn embed_all(
    cache: &mut EmbeddingCache,
    embed: &Embed<'_>,
    texts: &Texts<'_>,
    items: &[Item],
    range: std::ops::Range<usize>,
    progress: &dyn Progress,
) -> Result<()> {
    let (embedder, batch_size, role) = (embed.embedder, embed.batch_size, texts.role);
    let plural = match role {
        Role::Document => "documents",
        Role::Query => "queries",
    };
    let cached = items[range.clone()].iter().filter(|item| cache.get(role, &item.key).is_some()).count();
    progress.start(&format!("embedding {plural}"), range.len() as u64);
    progress.skip(cached as u64);
    let dims = embedder.identity().dims;
    // `range` starts on a chunk's first text (a shard's slice does), so its chunks are the whole build's.
    let positions: Vec<usize> = range.collect();
    for chunk in positions.chunks(batch_size.max(1)) {
        let missing: Vec<usize> =
            chunk.iter().copied().filter(|&i| cache.get(role, &items[i].key).is_none()).collect();
        if missing.is_empty() {
            continue;
        }
        let semantic: Vec<String> = chunk.iter().map(|&i| texts.semantic(i)).collect();
        let embeddings = match embed.policy {
            TextPolicyKind::Contract => {
                let prompts: Vec<String> = semantic.iter().map(|s| format!("{}{s}", texts.prefix)).collect();
                let prompts: Vec<&str> = prompts.iter().map(String::as_str).collect();
                embedder.embed(&prompts)?
            }
            TextPolicyKind::Model => {
                let semantic: Vec<&str> = semantic.iter().map(String::as_str).collect();
                embedder.embed_prompted(texts.prefix, &semantic)?
            }
        };
        let mut batch = Vec::with_capacity(missing.len());
        for (&i, embedding) in chunk.iter().zip(embeddings) {
            if !missing.contains(&i) {
                continue;
            }
            check_vector(&embedding.vector, dims).map_err(|reason| Error::InvalidVector {
                role: role_name(role),
                id: texts.id(i).to_owned(),
                reason,
            })?;
            batch.push(CachedVector {
                role,
                prompt_sha256: items[i].key.clone(),
                vector: embedding.vector.iter().map(|x| f64::from(*x)).collect(),
                tokens: embedding.tokens,
                shortened_to: embedding.shortened_to,
            });
        }
        cache.append(batch)?;
        safe_fs::halt::point("build.embedded");
        progress.advance(missing.len() as u64);
    }
    progress.finish();
    Ok(())
}

/// Non-empty, the model's dimension, finite, unit length within 1e-3.
fn check_vector(vector: &[f32], dims: usize) -> std::result::Result<(), String> {
    if vector.is_empty() {
        return Err("empty".into());
    }
    if vector.len() != dims {
        return Err(format!("{} dimensions, the model's is {dims}", vector.len()));
    }
    if let Some(i) = vector.iter().position(|x| !x.is_finite()) {
        return Err(format!("component {i} is {}", vector[i]));
    }
    let norm = vector.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if norm == 0.0 {
        return Err("zero norm".into());
    }
    if (norm - 1.0).abs() > 1e-3 {
        return Err(format!("norm {norm}, not normalised"));
    }
    Ok(())
}
