//! The tiny corpus: a SciFact-shaped stand-in written by this project (made-up words, no real text) and a
//! miniature BERT over its vocabulary, so that the whole pipeline (build, pre-registration, calibration,
//! selection, held-out, statistics, exports, verification, report, bundle) runs offline in seconds. Its files
//! are committed under `fixtures/tiny/`; [`write_archive`] and [`write_model`] write them again, byte for byte,
//! and a test holds the committed copies to that.
//!
//! The archive has BEIR's layout under `tiny/`: 300 documents of 18 to 40 made-up words with a title, 200 test
//! queries, each of words from one document (its judged relevant one) and a few others, and a second judged
//! document for every fifth query. The numbers it gives mean nothing about retrieval; their digests are the
//! point (the same on every CPU).

use std::io::Write;
use std::path::Path;

use embedding::testing::{BertShape, write_bert};

use crate::beir::Profile;
use crate::error::{Error, Result};

/// The profile's name: the archive's member prefix and the fixture's `profile`.
pub const TINY_PROFILE: &str = "tiny";
/// Documents in the tiny corpus.
pub const TINY_DOCUMENTS: usize = 300;
/// Test queries in the tiny corpus.
pub const TINY_QUERIES: usize = 200;
/// The tiny archive's file name under `fixtures/tiny/`.
pub const TINY_ARCHIVE_FILE: &str = "scifact-tiny.zip";
/// The tiny model's directory under `fixtures/tiny/`.
pub const TINY_MODEL_DIR: &str = "model";
/// sha256 (hex) of the tiny model's `model.safetensors`, pinned like MiniLM's.
pub const TINY_WEIGHTS_SHA256: &str = "3ce634324a4512b4b24a23cb4b78f3c5558ade07462de632c49632211731b2a0";
/// The seed of the tiny model's weights.
const MODEL_SEED: u64 = 20_261_201;
/// The seed of the tiny corpus.
const CORPUS_SEED: u64 = 1_977;

/// The shape gate of the tiny corpus.
pub fn profile() -> Profile {
    Profile::exact(TINY_PROFILE, TINY_DOCUMENTS, TINY_QUERIES)
}

/// SplitMix64, so that the corpus is the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The made-up vocabulary: 160 words of two or three syllables.
pub fn words() -> Vec<String> {
    const ONSETS: [&str; 12] = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t"];
    const NUCLEI: [&str; 5] = ["a", "e", "i", "o", "u"];
    let mut rng = Rng(CORPUS_SEED ^ 0xA5A5);
    let mut words: Vec<String> = Vec::new();
    while words.len() < 160 {
        let syllables = 2 + rng.below(2);
        let word: String = (0..syllables)
            .map(|_| format!("{}{}", ONSETS[rng.below(ONSETS.len())], NUCLEI[rng.below(NUCLEI.len())]))
            .collect();
        if !words.contains(&word) {
            words.push(word);
        }
    }
    words
}

fn sentence(rng: &mut Rng, words: &[String], topic: &[usize], length: usize) -> Vec<String> {
    (0..length)
        .map(|_| {
            // Two words in three come from the document's topic, so documents on a topic share words.
            let index = if rng.below(3) < 2 { topic[rng.below(topic.len())] } else { rng.below(words.len()) };
            words[index].clone()
        })
        .collect()
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}

/// The archive's three members: `(name, bytes)`.
pub fn archive_members() -> Vec<(String, Vec<u8>)> {
    shaped_archive_members(TINY_PROFILE, TINY_DOCUMENTS, TINY_QUERIES)
}

/// The tiny corpus's kind of made-up text in BEIR's layout under `prefix/`, with `document_count` documents and
/// `query_count` test queries: a stand-in of another dataset's exact shape, for its shape gate and the
/// pipeline.
pub fn shaped_archive_members(
    prefix: &str,
    document_count: usize,
    query_count: usize,
) -> Vec<(String, Vec<u8>)> {
    members_of(prefix, document_count, query_count, None)
}

/// [`shaped_archive_members`] with every body `body_words` words long: a corpus member of gigabytes from a few
/// hundred thousand documents, for the scale bench's reader.
pub fn long_archive_members(
    prefix: &str,
    document_count: usize,
    query_count: usize,
    body_words: usize,
) -> Vec<(String, Vec<u8>)> {
    members_of(prefix, document_count, query_count, Some(body_words))
}

/// Words of a document that its queries are drawn from (all of a shaped document's: its title and body are 44
/// at the most).
const QUERY_SOURCE_WORDS: usize = 48;

fn members_of(
    prefix: &str,
    document_count: usize,
    query_count: usize,
    body_words: Option<usize>,
) -> Vec<(String, Vec<u8>)> {
    let words = words();
    let mut rng = Rng(CORPUS_SEED);
    let topics: Vec<Vec<usize>> = (0..20).map(|_| (0..8).map(|_| rng.below(words.len())).collect()).collect();
    let mut corpus = String::new();
    let mut documents: Vec<Vec<String>> = Vec::new();
    for i in 0..document_count {
        let topic = &topics[rng.below(topics.len())];
        let title_length = 2 + rng.below(3);
        let title = sentence(&mut rng, &words, topic, title_length);
        let body_length = body_words.unwrap_or_else(|| 18 + rng.below(23));
        let body = sentence(&mut rng, &words, topic, body_length);
        let title_text: Vec<String> =
            title.iter().enumerate().map(|(j, w)| if j == 0 { capitalized(w) } else { w.clone() }).collect();
        let mut text = capitalized(&body.join(" "));
        text.push('.');
        let record = serde_json::json!({
            "_id": format!("{}", 4_000 + i * 7),
            "title": title_text.join(" "),
            "text": text,
            "metadata": {},
        });
        corpus.push_str(&record.to_string());
        corpus.push('\n');
        documents.push(title.into_iter().chain(body).take(QUERY_SOURCE_WORDS).collect());
    }
    let mut queries = String::new();
    let mut qrels = String::from("query-id\tcorpus-id\tscore\n");
    for q in 0..query_count {
        let target = rng.below(document_count);
        let from = &documents[target];
        let mut query: Vec<String> =
            (0..4 + rng.below(3)).map(|_| from[rng.below(from.len())].clone()).collect();
        query.push(words[rng.below(words.len())].clone());
        let id = format!("{}", 1 + q * 3);
        let record = serde_json::json!({"_id": id, "text": format!("{}?", capitalized(&query.join(" "))), "metadata": {}});
        queries.push_str(&record.to_string());
        queries.push('\n');
        qrels.push_str(&format!("{id}\t{}\t1\n", 4_000 + target * 7));
        if q % 5 == 0 {
            let other = (target + 1 + rng.below(document_count - 1)) % document_count;
            qrels.push_str(&format!("{id}\t{}\t1\n", 4_000 + other * 7));
        }
    }
    vec![
        (format!("{prefix}/corpus.jsonl"), corpus.into_bytes()),
        (format!("{prefix}/queries.jsonl"), queries.into_bytes()),
        (format!("{prefix}/qrels/test.tsv"), qrels.into_bytes()),
    ]
}

/// The tiny corpus with BEIR's quirks, in the tiny profile's shape (300 documents, 200 test queries): every
/// tenth document without a title, every thirteenth with a string id (`doc-<n>`) beside the numeric ones;
/// graded judgements as trec-covid and dbpedia-entity have them (a relevant document of every seventh query
/// graded 2, judged non-relevant lines of grade 0 for every fourth query and of grade -1 for every ninth,
/// one query judged with grade 0 only); and, as in ArguAna, one query that is a corpus document under the same
/// id and with its text. What trec_eval computes from it, with BEIR's ignore_identical_ids, is the check.
pub fn quirks_archive_members() -> Vec<(String, Vec<u8>)> {
    let members = archive_members();
    let text = |i: usize| String::from_utf8_lossy(&members[i].1).into_owned();
    let mut renamed = std::collections::HashMap::new();
    let mut ids = Vec::new();
    let mut corpus = String::new();
    for (i, line) in text(0).lines().enumerate() {
        let Ok(mut record) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if i % 10 == 3 {
            record["title"] = serde_json::Value::from("");
        }
        let id = record["_id"].as_str().unwrap_or_default().to_owned();
        let new_id = if i % 13 == 5 { format!("doc-{id}") } else { id.clone() };
        record["_id"] = serde_json::Value::from(new_id.as_str());
        renamed.insert(id, new_id.clone());
        ids.push(new_id);
        corpus.push_str(&record.to_string());
        corpus.push('\n');
    }
    // ArguAna's quirk: one query is itself a document of the corpus, under the same id, with that document's
    // text; BEIR never counts it as a hit of itself.
    let (twin_query, twin_doc) = ("25", 100);
    let twin: serde_json::Value =
        text(0).lines().nth(twin_doc).and_then(|line| serde_json::from_str(line).ok()).unwrap_or_default();
    let mut queries = String::new();
    for line in text(1).lines() {
        let Ok(mut record) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if record["_id"] == twin_query {
            record["_id"] = serde_json::Value::from(ids[twin_doc].as_str());
            record["text"] = twin["text"].clone();
        }
        queries.push_str(&record.to_string());
        queries.push('\n');
    }
    let mut judged: Vec<(String, Vec<(String, i64)>)> = Vec::new();
    for line in text(2).lines().skip(1) {
        let fields: Vec<&str> = line.split('\t').collect();
        let [query, doc, _] = fields.as_slice() else { continue };
        let query = if *query == twin_query { ids[twin_doc].as_str() } else { *query };
        let doc = renamed.get(*doc).cloned().unwrap_or_else(|| (*doc).to_owned());
        match judged.last_mut() {
            Some((last, lines)) if last == query => lines.push((doc, 1)),
            _ => judged.push(((*query).to_owned(), vec![(doc, 1)])),
        }
    }
    let mut qrels = String::from("query-id\tcorpus-id\tscore\n");
    for (q, (query, lines)) in judged.iter_mut().enumerate() {
        let other = |salt: usize, grade: i64, lines: &mut Vec<(String, i64)>| {
            let mut pick = (q * 37 + salt) % ids.len();
            while lines.iter().any(|(doc, _)| *doc == ids[pick]) {
                pick = (pick + 1) % ids.len();
            }
            lines.push((ids[pick].clone(), grade));
        };
        if q % 7 == 0 {
            lines[0].1 = 2;
        }
        if q % 4 == 1 {
            other(11, 0, lines);
        }
        if q % 9 == 2 {
            other(29, -1, lines);
        }
        if q == 5 {
            lines.iter_mut().for_each(|line| line.1 = 0);
        }
        for (doc, grade) in lines.iter() {
            qrels.push_str(&format!("{query}\t{doc}\t{grade}\n"));
        }
    }
    vec![
        (members[0].0.clone(), corpus.into_bytes()),
        (members[1].0.clone(), queries.into_bytes()),
        (members[2].0.clone(), qrels.into_bytes()),
    ]
}

/// The quirks corpus as an archive that no registry names, under `folder/`, with a second split: `qrels/dev.tsv`
/// judges the first 60 judged queries (with their grades) as `qrels/test.tsv` does, so a run scored on dev
/// (as msmarco is) has 60 queries, calibrates on 30 and holds out 30.
pub fn second_split_archive_members(folder: &str) -> Vec<(String, Vec<u8>)> {
    let mut members = quirks_archive_members();
    let test = String::from_utf8_lossy(&members[2].1).into_owned();
    let mut kept: Vec<&str> = Vec::new();
    let mut dev = String::from("query-id\tcorpus-id\tscore\n");
    for line in test.lines().skip(1) {
        let query = line.split('\t').next().unwrap_or_default();
        if !kept.contains(&query) {
            if kept.len() == 60 {
                continue;
            }
            kept.push(query);
        }
        dev.push_str(line);
        dev.push('\n');
    }
    members.push((format!("{TINY_PROFILE}/qrels/dev.tsv"), dev.into_bytes()));
    let prefix = format!("{TINY_PROFILE}/");
    members
        .into_iter()
        .map(|(name, bytes)| (format!("{folder}/{}", name.strip_prefix(&prefix).unwrap_or(&name)), bytes))
        .collect()
}

/// Writes the tiny archive (stored, not deflated, every time stamp 1980-01-01) to `path`.
///
/// # Errors
/// [`Error::Io`] when it cannot be written.
pub fn write_archive(path: &Path) -> Result<()> {
    write_members(path, archive_members())
}

/// Writes [`shaped_archive_members`] as [`write_archive`] writes the tiny archive.
///
/// # Errors
/// [`Error::Io`] when it cannot be written.
pub fn write_shaped_archive(path: &Path, prefix: &str, documents: usize, queries: usize) -> Result<()> {
    write_members(path, shaped_archive_members(prefix, documents, queries))
}

/// Writes [`long_archive_members`] as [`write_archive`] writes the tiny archive.
///
/// # Errors
/// [`Error::Io`] when it cannot be written.
pub fn write_long_archive(
    path: &Path,
    prefix: &str,
    documents: usize,
    queries: usize,
    body_words: usize,
) -> Result<()> {
    write_members(path, long_archive_members(prefix, documents, queries, body_words))
}

/// Writes [`quirks_archive_members`] as [`write_archive`] writes the tiny archive.
///
/// # Errors
/// [`Error::Io`] when it cannot be written.
pub fn write_quirks_archive(path: &Path) -> Result<()> {
    write_members(path, quirks_archive_members())
}

/// Writes [`second_split_archive_members`] as [`write_archive`] writes the tiny archive.
///
/// # Errors
/// [`Error::Io`] when it cannot be written.
pub fn write_second_split_archive(path: &Path, folder: &str) -> Result<()> {
    write_members(path, second_split_archive_members(folder))
}

/// Writes an archive of forums, as CQADupStack's zip is laid out: `top/<forum>/…` for each `(forum, documents,
/// queries)`, each forum a [`shaped_archive_members`] of that shape.
///
/// # Errors
/// [`Error::Io`] when it cannot be written.
pub fn write_forums_archive(path: &Path, top: &str, forums: &[(&str, usize, usize)]) -> Result<()> {
    let members = forums
        .iter()
        .flat_map(|(forum, documents, queries)| {
            shaped_archive_members(&format!("{top}/{forum}"), *documents, *queries)
        })
        .collect();
    write_members(path, members)
}

/// Writes `members` (name, bytes) as a zip as [`write_archive`] writes the tiny archive: stored, no timestamps,
/// replaced atomically.
///
/// # Errors
/// [`Error::Io`] when it cannot be written.
pub fn write_members(path: &Path, members: Vec<(String, Vec<u8>)>) -> Result<()> {
    let io = |source: std::io::Error| Error::Io { path: path.to_owned(), source };
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .last_modified_time(zip::DateTime::default());
    for (name, bytes) in members {
        writer.start_file(name, options).map_err(|e| io(std::io::Error::other(e)))?;
        writer.write_all(&bytes).map_err(io)?;
    }
    let bytes = writer.finish().map_err(|e| io(std::io::Error::other(e)))?.into_inner();
    safe_fs::write_atomically(path, &bytes).map_err(|e| io(std::io::Error::other(e)))
}

/// Writes the tiny model (hidden 64, 2 layers, 4 heads, the tiny vocabulary and punctuation) into `dir`.
///
/// # Errors
/// [`Error::Io`] when it cannot be written.
pub fn write_model(dir: &Path) -> Result<()> {
    let mut vocabulary = words();
    vocabulary.extend([".", ",", "?", "_", ":", "-", "search", "document", "query"].map(str::to_owned));
    let shape = BertShape {
        words: vocabulary,
        hidden: 64,
        intermediate: 128,
        heads: 4,
        layers: 2,
        max_positions: 96,
        encoder: embedding::testing::Encoder::Bert,
    };
    write_bert(dir, &shape, MODEL_SEED)
        .map_err(|e| Error::Io { path: dir.to_owned(), source: std::io::Error::other(e) })
}
